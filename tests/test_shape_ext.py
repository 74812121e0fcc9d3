"""TOSA 1.1 draft EXT-SHAPE: catalogue entries, executor kernels against arithmetic written from the draft's
pseudo-code (pseudocode/operators/*_SHAPE.tosac, DIM.tosac of arm/tosa-specification main), their ERROR_IF /
REQUIRE, a symbolic (dynamic-batch) program run at several sizes, and its MLIR validated by tosa-opt as 1.1.draft."""

from __future__ import annotations

import numpy as np
import pytest

from tf2tosa.errors import InvalidGraphError
from tf2tosa.executor import run_checked
from tf2tosa.ir.graph import Graph, Value
from tf2tosa.ir.types import DType as D
from tf2tosa.ir.types import TensorType as T
from tf2tosa.serializer.mlir import to_mlir
from tf2tosa.tosa import optable
from tf2tosa.verify import tosa_tools

needs_tools = pytest.mark.skipif(not tosa_tools.available(), reason="tosa-tools environment not available")

DRAFT = ["ADD_SHAPE", "SUB_SHAPE", "MUL_SHAPE", "DIV_CEIL_SHAPE", "DIV_FLOOR_SHAPE", "MOD_SHAPE", "MIN_SHAPE",
         "MAX_SHAPE", "EXP2_SHAPE", "LOG2_CEIL_SHAPE", "LOG2_FLOOR_SHAPE", "ASSERT_EQUAL_SHAPE", "CONCAT_SHAPE",
         "SLICE_SHAPE", "DIM"]


def test_draft_ops_are_apart_from_the_1_0_catalogue() -> None:
    assert sorted(optable.DRAFT_OPS) == sorted(DRAFT)
    assert not set(optable.DRAFT_OPS) & set(optable.OPS) and len(optable.OPS) == 75
    for name, spec in optable.DRAFT_OPS.items():
        assert optable.is_draft(name) and optable.get(f"tosa.{name}") is spec
        assert spec.section == "1.1-draft shape"
        assert all("EXT-SHAPE" in r.requirements for r in spec.rows), name
    assert not optable.is_draft("RESHAPE")


def _shape_const(g: Graph, vals: list[int]) -> Value:
    return g.add_const(np.array(vals, np.int64), D.SHAPE, op_name="tosa.CONST_SHAPE")


def _run_shape_op(opcode: str, operands: list[list[int]], attrs: dict | None = None,
                  extra: list[np.ndarray] | None = None) -> tuple[str, list[int] | None, str]:
    """Run ``opcode`` on shape values fed as CONST_SHAPE (and i32 tensors ``extra``); (status, result, message)."""
    g = Graph()
    ins = [_shape_const(g, v) for v in operands]
    ins += [g.add_const(np.asarray(e, np.int32), D.INT32) for e in extra or []]
    spec = optable.get(opcode)
    if not spec.outputs:
        g.add_op(f"tosa.{opcode}", ins, [], attrs=attrs or {})
        x = g.add_input("x", T((1,), D.FP32))
        g.outputs = [x]
        r = run_checked(g, {"x": np.zeros(1, np.float32)}, level="NONE")
        return r.status, None, r.message
    if opcode == "SLICE_SHAPE":
        n = int(np.asarray(extra[1]).reshape(-1)[0]) if extra else 1
    elif opcode == "CONCAT_SHAPE":
        n = sum(len(v) for v in operands)
    else:
        n = len(operands[0])
    out = g.add_op(f"tosa.{opcode}", ins, [T((max(n, 1),), D.SHAPE)], attrs=attrs or {}, result_names=["s"]).result
    g.outputs = [out]
    r = run_checked(g, {}, level="NONE", validate=False)
    return r.status, ([int(v) for v in r.outputs["s"]] if r.status == "VALID" else None), r.message


# the draft's formulas, written out on Python integers (tensor_size_t is signed 64-bit)
ORACLE = {
    "ADD_SHAPE": lambda a, b: a + b,
    "SUB_SHAPE": lambda a, b: a - b,
    "MUL_SHAPE": lambda a, b: a * b,
    "DIV_FLOOR_SHAPE": lambda a, b: int(np.floor_divide(a, b)),
    "DIV_CEIL_SHAPE": lambda a, b: -((-a) // b),
    "MOD_SHAPE": lambda a, b: int(np.mod(a, b)),
    "MIN_SHAPE": lambda a, b: a if a < b else b,
    "MAX_SHAPE": lambda a, b: a if a > b else b,
}


@pytest.mark.parametrize("opcode", sorted(ORACLE))
def test_binary_shape_ops(opcode: str) -> None:
    rng = np.random.default_rng(13)
    a = [int(x) for x in rng.integers(0, 1000, 6)] + [0, 7]
    b = [int(x) for x in rng.integers(1, 50, 6)] + [1, 7]
    status, got, msg = _run_shape_op(opcode, [a, b])
    assert status == "VALID", msg
    assert got == [ORACLE[opcode](x, y) for x, y in zip(a, b)]
    status, _, msg = _run_shape_op(opcode, [a, b[:3]])  # ERROR_IF(length(input1) != length(input2))
    assert status == "ERROR" and "length" in msg


@pytest.mark.parametrize("opcode", ["DIV_FLOOR_SHAPE", "DIV_CEIL_SHAPE", "MOD_SHAPE"])
def test_division_requires(opcode: str) -> None:
    assert _run_shape_op(opcode, [[4], [0]])[0] == "UNPREDICTABLE"  # REQUIRE(input2 >= 1)
    assert _run_shape_op(opcode, [[-4], [2]])[0] == "UNPREDICTABLE"  # REQUIRE(input1 >= 0)


def test_unary_shape_ops() -> None:
    vals = [1, 2, 3, 4, 5, 31, 32, 33, 1000, 1024]
    assert _run_shape_op("LOG2_FLOOR_SHAPE", [vals])[1] == [int(np.floor(np.log2(v))) for v in vals]
    assert _run_shape_op("LOG2_CEIL_SHAPE", [vals])[1] == [int(np.ceil(np.log2(v))) for v in vals]
    assert _run_shape_op("EXP2_SHAPE", [[0, 1, 10, 62]])[1] == [1, 2, 1024, 2 ** 62]
    assert _run_shape_op("LOG2_FLOOR_SHAPE", [[0]])[0] == "UNPREDICTABLE"
    assert _run_shape_op("EXP2_SHAPE", [[63]])[0] == "UNPREDICTABLE"  # REQUIRE(input < MAX_LOG2_SIZE)


def test_concat_and_slice_shape() -> None:
    assert _run_shape_op("CONCAT_SHAPE", [[1, 2], [3], [4, 5, 6]])[1] == [1, 2, 3, 4, 5, 6]
    base = [10, 20, 30, 40]
    assert _run_shape_op("SLICE_SHAPE", [base], extra=[np.array([1]), np.array([2])])[1] == [20, 30]
    for start, size in ((3, 2), (-1, 1), (0, 0)):  # the three ERROR_IFs
        status, _, _ = _run_shape_op("SLICE_SHAPE", [base], extra=[np.array([start]), np.array([size])])
        assert status == "ERROR", (start, size)


@pytest.mark.parametrize(("a", "b", "broadcast", "ok"), [
    ([4, 8], [4, 8], False, True), ([4, 8], [4, 9], False, False), ([1, 8], [4, 8], False, False),
    ([1, 8], [4, 8], True, True), ([4, 8], [1, 8], True, True), ([4, 8], [3, 8], True, False)])
def test_assert_equal_shape(a: list[int], b: list[int], broadcast: bool, ok: bool) -> None:
    status, _, msg = _run_shape_op("ASSERT_EQUAL_SHAPE", [a, b], {"allow_broadcast": broadcast})
    assert status == ("VALID" if ok else "ERROR"), msg


def _dynamic_batch_reshape() -> Graph:
    """y = RESHAPE(x, CONCAT_SHAPE(DIM(x, 0), [192])) with x: [batch, 8, 8, 3]; z = x + w (w: [batch, 8, 8, 3])
    guarded by ASSERT_EQUAL_SHAPE(DIM(x, 0), DIM(w, 0))."""
    g = Graph()
    x = g.add_input("x", T(("batch", 8, 8, 3), D.FP32))
    w = g.add_input("w", T(("batch", 8, 8, 3), D.FP32))
    dx = g.add_op("tosa.DIM", [x], [T((1,), D.SHAPE)], attrs={"axis": 0}).result
    dw = g.add_op("tosa.DIM", [w], [T((1,), D.SHAPE)], attrs={"axis": 0}).result
    g.add_op("tosa.ASSERT_EQUAL_SHAPE", [dx, dw], [], attrs={"allow_broadcast": False})
    s = g.add_op("tosa.CONCAT_SHAPE", [dx, _shape_const(g, [192])], [T((2,), D.SHAPE)]).result
    y = g.add_op("tosa.RESHAPE", [x, s], [T(("batch", 192), D.FP32)], result_names=["y"]).result
    z = g.add_op("tosa.ADD", [x, w], [T(("batch", 8, 8, 3), D.FP32)], result_names=["z"]).result
    g.outputs = [y, z]
    return g


@pytest.mark.parametrize("batch", [1, 4, 16])
def test_symbolic_program_runs_at_every_batch(batch: int) -> None:
    g = _dynamic_batch_reshape()
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch, 8, 8, 3)).astype(np.float32)
    w = rng.standard_normal((batch, 8, 8, 3)).astype(np.float32)
    r = run_checked(g, {"x": x, "w": w}, level="NONE")
    assert r.status == "VALID", r.message
    assert np.array_equal(r.outputs["y"], x.reshape(batch, 192))
    assert np.array_equal(r.outputs["z"], x + w)
    # the recorded equality batch(x) == batch(w) is checked at run time
    bad = run_checked(g, {"x": x, "w": np.concatenate([w, w])}, level="NONE")
    assert bad.status == "ERROR" and "ASSERT_EQUAL_SHAPE" in bad.message


def test_draft_ops_need_the_draft_version() -> None:
    with pytest.raises(InvalidGraphError, match="1.1.draft"):
        to_mlir(_dynamic_batch_reshape())
    with pytest.raises(InvalidGraphError, match="version"):
        to_mlir(_dynamic_batch_reshape(), version="1.2")


@needs_tools
def test_tosa_opt_validates_the_symbolic_program_as_1_1_draft() -> None:
    g = _dynamic_batch_reshape()
    text = to_mlir(g, ["PRO-FP"], ["EXT-SHAPE", "EXT-DYNAMIC"], level="none", version=optable.DRAFT_VERSION)
    assert "tensor<?x8x8x3xf32>" in text and '"tosa.dim"' in text and '"tosa.assert_equal_shape"' in text
    ok, msg = tosa_tools.validate_mlir(text, ["PRO-FP"], ["EXT-SHAPE", "EXT-DYNAMIC"], level="none",
                                       version=optable.DRAFT_VERSION)
    assert ok, msg
    # the same program declared as 1.0 is refused (dynamic dimensions, shape operators)
    ok10, msg10 = tosa_tools.validate_mlir(text, ["PRO-FP"], ["EXT-DYNAMIC"], level="8k")
    assert not ok10 and msg10


def test_shape_inference_keeps_symbols_and_records_equalities() -> None:
    from tf2tosa.tosa import shapes

    f = D.FP32
    zp = [T((1,), f), T((1,), f)]
    conv = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1]}
    # conv keeps the batch symbol; the input's symbolic channel count must equal the weight's
    ins = [T(("batch", 16, 16, "c"), f), T((8, 3, 3, 3), f), T((8,), f), *zp]
    assert shapes.result_shapes("CONV2D", ins, conv) == [("batch", 16, 16, 8)]
    assert shapes.equalities("CONV2D", ins, conv) == [("c", 3, False)]
    # elementwise: the RFC's broadcast (1 expands to the symbol; two symbols must match unless one is 1)
    add = [T(("b", 1, 8), f), T(("c", "s", 8), f)]
    assert shapes.result_shapes("ADD", add, {}) == [("c", "s", 8)]
    assert shapes.equalities("ADD", add, {}) == [("b", "c", True)]
    mm = [T(("b", "s", 8), f), T(("n", 8, "t"), f), *zp]
    assert shapes.result_shapes("MATMUL", mm, {}) == [("n", "s", "t")]  # either: b == n is recorded
    assert shapes.equalities("MATMUL", mm, {}) == [("b", "n", False)]
    cat = [T(("b", "s", 8), f), T(("n", "t", 8), f)]
    assert shapes.equalities("CONCAT", cat, {"axis": 1}) == [("n", "b", False)]
    assert shapes.result_shapes("TRANSPOSE", [T(("b", "s", 8), f)], {"perms": [2, 0, 1]}) == [(8, "b", "s")]
    assert shapes.result_shapes("REDUCE_SUM", [T(("b", "s", 8), f)], {"axis": 1}) == [("b", 1, 8)]
    assert shapes.equalities("ADD", [T(("b", 4), f), T(("b", 4), f)], {}) == []  # same symbol: nothing to check
    g = Graph()
    x = g.add_input("x", T(("b", 4), f))
    y = g.add_input("y", T(("c", 4), f))
    s = g.add_op("tosa.ADD", [x, y], [T(("b", 4), f)]).result
    g.outputs = [s]
    assert shapes.graph_equalities(g.topological_order()) == [
        {"a": "b", "b": "c", "broadcast": True, "op": "tosa.ADD"}]
