"""Executor API: run/evaluate_op, input checks, errors naming the op, trace, profile, control flow, variables."""

from __future__ import annotations

import numpy as np
import pytest

from tests.executor_testing import In, single_op
from tf2tosa.errors import ConversionError, InputError
from tf2tosa.executor import KERNELS, ExecutionError, evaluate_op, run, run_with_profile
from tf2tosa.ir.graph import Graph
from tf2tosa.ir.types import DType as D
from tf2tosa.ir.types import TensorType

SPEC_OPS = """ARGMAX AVG_POOL2D CONV2D CONV3D DEPTHWISE_CONV2D FFT2D MATMUL MAX_POOL2D RFFT2D TRANSPOSE_CONV2D CLAMP ERF
SIGMOID TANH ADD ARITHMETIC_RIGHT_SHIFT BITWISE_AND BITWISE_OR BITWISE_XOR INTDIV LOGICAL_AND LOGICAL_LEFT_SHIFT
LOGICAL_RIGHT_SHIFT LOGICAL_OR LOGICAL_XOR MAXIMUM MINIMUM MUL POW SUB TABLE ABS BITWISE_NOT CEIL CLZ COS EXP FLOOR LOG
LOGICAL_NOT NEGATE RECIPROCAL RSQRT SIN SELECT EQUAL GREATER GREATER_EQUAL REDUCE_ALL REDUCE_ANY REDUCE_MAX REDUCE_MIN
REDUCE_PRODUCT REDUCE_SUM CONCAT PAD RESHAPE REVERSE SLICE TILE TRANSPOSE GATHER SCATTER RESIZE CAST RESCALE CONST
IDENTITY CUSTOM COND_IF WHILE_LOOP VARIABLE VARIABLE_WRITE VARIABLE_READ CONST_SHAPE""".split()


#: the 1.1 draft's EXT-SHAPE operators (tf2tosa.tosa.optable.DRAFT_OPS)
DRAFT_SHAPE_OPS = """DIM ADD_SHAPE SUB_SHAPE MUL_SHAPE DIV_CEIL_SHAPE DIV_FLOOR_SHAPE MOD_SHAPE MIN_SHAPE MAX_SHAPE
EXP2_SHAPE
LOG2_CEIL_SHAPE LOG2_FLOOR_SHAPE CONCAT_SHAPE SLICE_SHAPE ASSERT_EQUAL_SHAPE""".split()


def test_every_spec_op_has_a_kernel() -> None:
    assert len(SPEC_OPS) == 75
    assert sorted(SPEC_OPS + DRAFT_SHAPE_OPS) == sorted(KERNELS)


def _add_graph() -> Graph:
    g = Graph()
    a = g.add_input("a", TensorType((2, 3), D.FP32))
    b = g.add_input("b", TensorType((2, 3), D.FP32))
    s = g.add_op("tosa.ADD", [a, b], [TensorType((2, 3), D.FP32)], result_names=["sum"]).result
    t = g.add_op("tosa.TANH", [s], [TensorType((2, 3), D.FP32)], result_names=["out"]).result
    g.outputs = [t, s]
    return g


def test_run_by_name_and_list_and_order() -> None:
    g = _add_graph()
    a, b = np.ones((2, 3), np.float32), np.full((2, 3), 2, np.float32)
    out = run(g, {"b": b, "a": a})
    assert list(out) == ["out", "sum"]
    assert np.array_equal(out["sum"], a + b) and np.allclose(out["out"], np.tanh(3.0))
    out2 = run(g, [a, b])
    assert all(np.array_equal(out[k], out2[k]) for k in out)
    tr = run(g, [a, b], trace=True)
    assert set(tr) == {"a", "b", "sum", "out"}
    res, prof = run_with_profile(g, [a, b])
    assert list(res) == ["out", "sum"] and len(prof) == 2 and all(v >= 0 for v in prof.values())


def test_input_errors_name_the_tensor() -> None:
    g = _add_graph()
    a = np.ones((2, 3), np.float32)
    with pytest.raises(InputError, match="'c'") as e:
        run(g, {"a": a, "b": a, "c": a})
    assert isinstance(e.value, ConversionError)
    with pytest.raises(InputError, match="missing input 'b'"):
        run(g, {"a": a})
    with pytest.raises(InputError, match="'b'.*shape"):
        run(g, {"a": a, "b": np.ones((3, 2), np.float32)})
    with pytest.raises(InputError, match="'a'.*dtype"):
        run(g, {"a": a.astype(np.float64), "b": a})
    with pytest.raises(InputError, match="expected 2 inputs"):
        run(g, [a])


def test_execution_error_names_op() -> None:
    x = np.zeros((1, 6, 6, 1), np.float32)
    g, feed = single_op("MAX_POOL2D", [In(x)], (D.FP32, (1, 2, 2, 1)),
                        {"kernel": [2, 2], "stride": [3, 3], "pad": [0, 0, 0, 0]})
    with pytest.raises(ExecutionError, match=r"idiv_check.*tosa\.MAX_POOL2D") as e:
        run(g, feed)
    assert isinstance(e.value, ConversionError) and e.value.op and "MAX_POOL2D" in e.value.op
    # shape disagreement between the kernel and the result type
    g, feed = single_op("ADD", [In(np.zeros((2, 2), np.float32)), In(np.zeros((2, 2), np.float32))],
                        (D.FP32, (2, 3)))
    with pytest.raises(ExecutionError, match="type says"):
        run(g, feed)


@pytest.mark.parametrize("returned", ["float64", "list", "scalar_shape"])
def test_run_casts_and_checks_results_like_evaluate_op(monkeypatch: pytest.MonkeyPatch, returned: str) -> None:
    """A run recognises a kernel result already of its storage type and shape without the general cast; anything
    else (float64 for an fp32 result, a list, a wrong shape) goes through the same cast and checks as evaluate_op."""
    a, b = np.array([[1.5, -2.0]], np.float32), np.array([[0.25, 4.0]], np.float32)
    g, feed = single_op("ADD", [In(a), In(b)], (D.FP32, (1, 2)))

    def kernel(op: object, ins: list[np.ndarray]) -> list[object]:
        s = ins[0].astype(np.float64) + ins[1]
        if returned == "list":
            return [s.tolist()]
        if returned == "scalar_shape":
            return [s.reshape(2)]
        return [s]

    monkeypatch.setitem(KERNELS, "ADD", kernel)
    if returned == "scalar_shape":
        with pytest.raises(ExecutionError, match="type says"):
            run(g, feed)
        return
    (out,) = run(g, feed).values()
    op = next(o for o in g.topological_order() if o.name == "tosa.ADD")
    (ref,) = evaluate_op(op, [a, b])
    assert out.dtype == ref.dtype == np.float32 and out.tolist() == ref.tolist() == [[1.75, 2.0]]


def test_evaluate_op_for_folding() -> None:
    g = Graph()
    c1 = g.add_const(np.array([1, 2, 3], np.int32), D.INT32)
    c2 = g.add_const(np.array([10, 20, 30], np.int32), D.INT32)
    op = g.add_op("tosa.ADD", [c1, c2], [TensorType((3,), D.INT32)])
    (r,) = evaluate_op(op, [np.array([1, 2, 3]), np.array([10, 20, 30])])
    assert r.dtype == np.int32 and r.tolist() == [11, 22, 33]


def _region(name: str, in_types: list[TensorType]) -> tuple[Graph, list]:
    g = Graph(name)
    vals = [g.add_input(f"{name}_in{i}", t) for i, t in enumerate(in_types)]
    return g, vals


def test_cond_if_and_while_loop() -> None:
    t = TensorType((1,), D.INT32)
    # then: x + x ; else: x - 1
    then_g, (tx,) = _region("then", [t])
    then_g.outputs = [then_g.add_op("tosa.ADD", [tx, tx], [t]).result]
    else_g, (ex,) = _region("else", [t])
    one = else_g.add_const(np.array([1], np.int32), D.INT32)
    else_g.outputs = [else_g.add_op("tosa.SUB", [ex, one], [t]).result]
    g = Graph()
    c = g.add_input("c", TensorType((1,), D.BOOL))
    x = g.add_input("x", t)
    r = g.add_op("tosa.COND_IF", [c, x], [t], regions=[then_g, else_g], result_names=["r"]).result
    g.outputs = [r]
    assert run(g, {"c": np.array([True]), "x": np.array([5], np.int32)})["r"].tolist() == [10]
    assert run(g, {"c": np.array([False]), "x": np.array([5], np.int32)})["r"].tolist() == [4]

    # while i < 10: i += 3 ; acc *= 2  (i32 with shift 0)
    cond_g, (ci, _ca) = _region("cond", [t, t])
    ten = cond_g.add_const(np.array([10], np.int32), D.INT32)
    cond_g.outputs = [cond_g.add_op("tosa.GREATER", [ten, ci], [TensorType((1,), D.BOOL)]).result]
    body_g, (bi, ba) = _region("body", [t, t])
    three = body_g.add_const(np.array([3], np.int32), D.INT32)
    two = body_g.add_const(np.array([2], np.int32), D.INT32)
    sh = body_g.add_const(np.array([0], np.int8), D.INT8)
    body_g.outputs = [body_g.add_op("tosa.ADD", [bi, three], [t]).result,
                      body_g.add_op("tosa.MUL", [ba, two, sh], [t]).result]
    g = Graph()
    i0 = g.add_input("i", t)
    a0 = g.add_input("acc", t)
    w = g.add_op("tosa.WHILE_LOOP", [i0, a0], [t, t], regions=[cond_g, body_g], result_names=["i_out", "acc_out"])
    g.outputs = list(w.results)
    out = run(g, {"i": np.array([0], np.int32), "acc": np.array([1], np.int32)})
    assert out["i_out"].tolist() == [12] and out["acc_out"].tolist() == [16]


def test_variables_persist_across_runs() -> None:
    t = TensorType((2,), D.FP32)
    g = Graph()
    x = g.add_input("x", t)
    g.add_op("tosa.VARIABLE", [], [], {"name": "state", "initial_value": np.zeros(2, np.float32)})
    old = g.add_op("tosa.VARIABLE_READ", [], [t], {"name": "state"}, result_names=["old"]).result
    new = g.add_op("tosa.ADD", [old, x], [t], result_names=["new"]).result
    g.add_op("tosa.VARIABLE_WRITE", [new], [], {"name": "state"})
    g.outputs = [new]
    state: dict[str, np.ndarray] = {}
    for k in range(1, 4):
        out = run(g, {"x": np.ones(2, np.float32)}, variables=state)
        assert out["new"].tolist() == [float(k)] * 2
    assert state["state"].tolist() == [3.0, 3.0]
