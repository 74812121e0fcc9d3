"""Graph results of the spec (VALID / ERROR / UNPREDICTABLE), LEVEL_CHECKs, and bad input.

``run_checked`` returns the spec's ``tosa_graph_result`` (S585-623): ERROR_IF -> ERROR, REQUIRE and
LEVEL_CHECK -> UNPREDICTABLE, with the failing condition and the op; ``run`` keeps raising ExecutionError.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.executor_testing import Const, In, single_op
from tf2tosa.errors import ConversionError, InputError, ModelLoadError
from tf2tosa.executor import (
    ERROR,
    UNPREDICTABLE,
    VALID,
    ErrorIfError,
    ExecutionError,
    UnpredictableError,
    run,
    run_checked,
    static_check,
)
from tf2tosa.ir.graph import Graph
from tf2tosa.ir.types import DType as D
from tf2tosa.ir.types import TensorType
from tf2tosa.serializer import from_bytes, load, to_bytes


def _pool(x: np.ndarray, kernel: list[int], stride: list[int], out: tuple[int, ...]) -> tuple[Graph, dict]:
    return single_op("MAX_POOL2D", [In(x)], (D.FP32, out),
                     {"kernel": kernel, "stride": stride, "pad": [0, 0, 0, 0], "nan_mode": "PROPAGATE"})


def _add_i32(a: int, b: int) -> tuple[Graph, dict]:
    g, feed = single_op("ADD", [In(np.array([a], np.int32)), In(np.array([b], np.int32))], (D.INT32, (1,)))
    return g, feed


def test_valid_result_has_outputs() -> None:
    g, feed = _add_i32(2, 3)
    r = run_checked(g, feed)
    assert r.status == VALID and r.ok and r.message == "" and r.op is None
    assert list(r.outputs) == [g.outputs[0].name] and r.outputs[g.outputs[0].name].tolist() == [5]
    assert str(r) == "VALID"


def test_error_if_gives_error_with_condition_and_op() -> None:
    g, feed = _pool(np.zeros((1, 6, 6, 1), np.float32), [2, 2], [3, 3], (1, 2, 2, 1))
    r = run_checked(g, feed)
    assert r.status == ERROR and not r.ok
    assert "not a multiple of 3" in r.message and r.op is not None and "MAX_POOL2D" in r.op
    with pytest.raises(ErrorIfError) as e:  # run() still raises, now with the status
        run(g, feed)
    assert e.value.status == ERROR and isinstance(e.value, ExecutionError)
    # the kernel's own ERROR_IF, without the catalogue's static checks
    r2 = run_checked(g, feed, validate=False)
    assert r2.status == ERROR and "idiv_check" in r2.message and "MAX_POOL2D" in (r2.op or "")


def test_require_gives_unpredictable() -> None:
    g, feed = _add_i32(2 ** 31 - 1, 1)
    r = run_checked(g, feed)
    assert r.status == UNPREDICTABLE and "overflows i32" in r.message and "ADD" in (r.op or "")
    with pytest.raises(UnpredictableError) as e:
        run(g, feed)
    assert e.value.status == UNPREDICTABLE
    # a REQUIRE inside a numerics helper (apply_scale_32's value range)
    x = np.array([1 << 20], np.int32)
    g, feed = single_op("RESCALE", [In(x), Const(np.array([1 << 30]), D.INT32), Const(np.array([10]), D.INT8),
                                    Const(np.array([0]), D.INT32), Const(np.array([0]), D.INT8)], (D.INT8, (1,)),
                        {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
                         "input_unsigned": False, "output_unsigned": False})
    r = run_checked(g, feed)
    assert r.status == UNPREDICTABLE and "apply_scale_32" in r.message and "RESCALE" in (r.op or "")


def test_static_require_is_unpredictable_not_error() -> None:
    """The catalogue rejects a RESCALE shift outside [2, 62]; the spec makes that a REQUIRE (S11744)."""
    g, feed = single_op("RESCALE", [In(np.array([5], np.int32)), Const(np.array([1 << 30]), D.INT32),
                                    Const(np.array([63]), D.INT8), Const(np.array([0]), D.INT32),
                                    Const(np.array([0]), D.INT8)], (D.INT8, (1,)),
                        {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
                         "input_unsigned": False, "output_unsigned": False})
    r = run_checked(g, feed)
    assert r.status == UNPREDICTABLE and "shift" in r.message


def test_level_8k_kernel_limit() -> None:
    x = np.zeros((1, 8200, 2, 1), np.float32)
    g, feed = _pool(x, [8193, 2], [1, 1], (1, 8, 1, 1))
    r = run_checked(g, feed, level="8K")
    assert r.status == UNPREDICTABLE and "MAX_KERNEL" in r.message and "MAX_POOL2D" in (r.op or "")
    assert run_checked(g, feed, level=None).status == VALID
    assert run_checked(g, feed, level="NONE").status == VALID
    with pytest.raises(ValueError, match="level"):
        run_checked(g, feed, level="4K")


def test_level_8k_rank_limit() -> None:
    shape = (1,) * 7
    g, feed = single_op("ABS", [In(np.ones(shape, np.float32))], (D.FP32, shape))
    r = run_checked(g, feed, level="8K")
    # beyond the argument table's "rank 0 to MAX_RANK": reported as the ERROR_IF it also is (Arm's model agrees)
    assert r.status == ERROR and "MAX_RANK" in r.message
    assert run_checked(g, feed, level=None).status == VALID


def _passthrough(t: TensorType, with_cond: bool = False) -> Graph:
    g = Graph("pass")
    if with_cond:
        g.add_input("c", TensorType((1,), D.BOOL))
    x = g.add_input("x", t)
    g.outputs = [x]
    return g


def _chain(depth: int) -> Graph:
    """COND_IF nested ``depth`` deep: each then-branch is another COND_IF on the same condition."""
    t = TensorType((1,), D.INT32)
    b = TensorType((1,), D.BOOL)
    body = Graph("leaf")
    bc = body.add_input("c", b)
    bx = body.add_input("x", t)
    del bc
    body.outputs = [body.add_op("tosa.ADD", [bx, bx], [t]).result]
    for k in range(depth - 1):
        g = Graph(f"then{k}")
        c = g.add_input("c", b)
        x = g.add_input("x", t)
        g.outputs = [g.add_op("tosa.COND_IF", [c, c, x], [t], regions=[body, _passthrough(t, True)]).result]
        body = g
    main = Graph("main")
    c = main.add_input("c", b)
    x = main.add_input("x", t)
    main.outputs = [main.add_op("tosa.COND_IF", [c, c, x], [t], regions=[body, _passthrough(t, True)],
                                result_names=["out"]).result]
    return main


def test_nesting_limit_is_an_error_at_level_8k() -> None:
    feed = {"c": np.array([True]), "x": np.array([3], np.int32)}
    ok = _chain(6)  # depths 0..5 < MAX_NESTING 6
    r = run_checked(ok, feed, level="8K")
    assert r.status == VALID, r
    assert r.outputs["out"].tolist() == [6]
    deep = _chain(7)
    r = run_checked(deep, feed, level="8K")
    assert r.status == ERROR and "MAX_NESTING 6" in r.message and "COND_IF" in (r.op or "")
    assert run_checked(deep, feed, level=None).status == VALID
    # the not-taken branch is never entered, so its depth does not matter
    assert run_checked(deep, {"c": np.array([False]), "x": np.array([3], np.int32)}, level="8K").status == VALID


# ------------------------------------------------------------------------------------------ bad input
def test_wrong_input_dtype_and_shape_name_the_tensor() -> None:
    g, _ = _add_i32(1, 2)
    name = g.inputs[0].name
    bad_dtype = {name: np.array([1], np.int64), g.inputs[1].name: np.array([2], np.int32)}
    with pytest.raises(InputError, match=f"'{name}'.*dtype int64, expected int32") as e:
        run(g, bad_dtype)
    assert e.value.tensor == name
    r = run_checked(g, bad_dtype)
    assert r.status == ERROR and r.tensor == name and "dtype" in r.message
    bad_shape = {name: np.array([1, 2], np.int32), g.inputs[1].name: np.array([2], np.int32)}
    with pytest.raises(InputError, match=r"shape \[2\], expected \[1\]"):
        run(g, bad_shape)
    r = run_checked(g, bad_shape)
    assert r.status == ERROR and r.tensor == name and "shape [2]" in r.message
    r = run_checked(g, {name: np.array([1], np.int32)})
    assert r.status == ERROR and "missing input" in r.message


def test_forbidden_graphs_are_errors_naming_the_op() -> None:
    # ranks differ (S11252): the catalogue's check, and the kernel's if validation is skipped
    g = Graph("bad")
    a = g.add_input("a", TensorType((2, 3), D.FP32))
    b = g.add_input("b", TensorType((3,), D.FP32))
    g.outputs = [g.add_op("tosa.ADD", [a, b], [TensorType((2, 3), D.FP32)], result_names=["y"]).result]
    feed = {"a": np.zeros((2, 3), np.float32), "b": np.zeros(3, np.float32)}
    r = run_checked(g, feed)
    assert r.status == ERROR and "rank" in r.message and "ADD" in (r.op or "")
    assert static_check(g) is not None
    r = run_checked(g, feed, validate=False)
    assert r.status == ERROR and "rank" in r.message
    with pytest.raises(ExecutionError, match=r"ADD"):
        run(g, feed)
    # a type combination no row allows: i8 input with fp32 weights
    g2 = Graph("bad2")
    x = g2.add_input("x", TensorType((1, 3, 3, 1), D.INT8))
    w = g2.add_const(np.zeros((1, 1, 1, 1), np.float32), D.FP32)
    bias = g2.add_const(np.zeros(1, np.int32), D.INT32)
    z8 = g2.add_const(np.zeros(1, np.int8), D.INT8)
    zf = g2.add_const(np.zeros(1, np.float32), D.FP32)
    g2.outputs = [g2.add_op("tosa.CONV2D", [x, w, bias, z8, zf], [TensorType((1, 3, 3, 1), D.INT32)],
                            {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT32"}).result]
    r = run_checked(g2, {"x": np.zeros((1, 3, 3, 1), np.int8)})
    assert r.status == ERROR and "no type row" in r.message and "CONV2D" in (r.op or "")
    # an op that is not TOSA at all
    g3 = Graph("bad3")
    i = g3.add_input("i", TensorType((2,), D.FP32))
    g3.outputs = [g3.add_op("tfl.relu", [i], [TensorType((2,), D.FP32)]).result]
    r = run_checked(g3, {"i": np.zeros(2, np.float32)})
    assert r.status == ERROR and "not a TOSA operator" in r.message
    with pytest.raises(ExecutionError, match="no executor kernel"):
        run(g3, {"i": np.zeros(2, np.float32)})


def test_custom_operator_is_an_error() -> None:
    g = Graph("custom")
    x = g.add_input("x", TensorType((2,), D.FP32))
    g.outputs = [g.add_op("tosa.CUSTOM", [x], [TensorType((2,), D.FP32)],
                          {"operator_name": "my_op", "domain_name": "acme", "implementation_attrs": b""}).result]
    r = run_checked(g, {"x": np.zeros(2, np.float32)})
    assert r.status == ERROR and "my_op" in r.message


def test_corrupt_tosa_files(tmp_path: object) -> None:
    from pathlib import Path

    g, feed = _add_i32(1, 2)
    data = to_bytes(g)
    assert run(from_bytes(data), feed)  # the good file runs
    for bad in (b"", b"not a flatbuffer at all", data[: len(data) // 2], data[:8] + bytes(len(data) - 8)):
        with pytest.raises(ModelLoadError) as e:
            from_bytes(bad, name="model.tosa")
        assert "model.tosa" in str(e.value) and isinstance(e.value, ConversionError)
    p = Path(str(tmp_path)) / "broken.tosa"
    p.write_bytes(data[:-20])
    with pytest.raises(ModelLoadError, match="broken.tosa"):
        load(p)
    with pytest.raises(ModelLoadError, match="missing.tosa"):
        load(Path(str(tmp_path)) / "missing.tosa")
