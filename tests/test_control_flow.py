"""Control flow (``tfl.while``, ``tfl.if``, ``tfl.call``, ``tfl.call_once`` + resource variables) → TOSA.

The first part builds small frontend graphs by hand (no TensorFlow): unrolling, the WHILE_LOOP fallback when the
trip count exceeds ``max_unroll``, constant conditions, CALL inlining and zero-size slices.  The second part
converts TensorFlow-built models (``tests/modelgen_cf.py``) end to end: executor vs LiteRT, ``tosa-opt``
validation with the graph's profiles/extensions and the Arm reference model (``tests.e2e.check_tflite``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import HAVE_LITERT, HAVE_TF

import tf2tosa
from tests import modelgen_cf as mg
from tests.e2e import check_tflite, fp32_bound
from tf2tosa.converter.pipeline import ConvertOptions, convert_graph
from tf2tosa.errors import UnsupportedOpsError
from tf2tosa.executor import run
from tf2tosa.ir import DType, Graph, TensorType, Value

F32 = DType.FP32
I32 = DType.INT32
_ADD = {"fused_activation_function": "NONE"}


def _const(g: Graph, arr: Any, dt: DType) -> Value:
    a = np.asarray(arr, dt.np_dtype())
    return g.add_op("tfl.const", [], [TensorType(a.shape, dt)], {"values": a}, ["c"]).result


def _counter_loop(n: int, shape: tuple[int, ...] = (2, 3)) -> Graph:
    """main(x) = while (i < n) { i += 1; a = a + a }: x * 2**n."""
    t = TensorType(shape, F32)
    cond = Graph("cond")
    ci, _ = cond.add_input("i", TensorType((), I32)), cond.add_input("a", t)
    cond.outputs = [cond.add_op("tfl.less", [ci, _const(cond, n, I32)], [TensorType((), DType.BOOL)], {}).result]
    body = Graph("body")
    bi, ba = body.add_input("i", TensorType((), I32)), body.add_input("a", t)
    i1 = body.add_op("tfl.add", [bi, _const(body, 1, I32)], [TensorType((), I32)], dict(_ADD)).result
    a1 = body.add_op("tfl.add", [ba, ba], [t], dict(_ADD)).result
    body.outputs = [i1, a1]
    g = Graph("main")
    x = g.add_input("x", t)
    w = g.add_op("tfl.while", [_const(g, 0, I32), x], [TensorType((), I32), t],
                 {"cond_subgraph_index": 1, "body_subgraph_index": 2}, regions=[cond, body])
    g.outputs = [w.results[1]]
    return g


def _x(shape: tuple[int, ...] = (2, 3)) -> np.ndarray:
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 2.5


def test_static_trip_count_is_unrolled() -> None:
    g = convert_graph(_counter_loop(3))
    counts = g.op_counts()
    assert "tosa.WHILE_LOOP" not in counts and counts.get("tosa.ADD") == 3
    assert g.record.extensions == []
    np.testing.assert_array_equal(next(iter(run(g, {"x": _x()}).values())), _x() * 8)


def test_trip_count_over_the_bound_gives_while_loop() -> None:
    g = convert_graph(_counter_loop(3), ConvertOptions(max_unroll=2))
    counts = g.op_counts()
    # the rolled-back unrolling leaves nothing behind: one WHILE_LOOP and its operands
    assert counts.get("tosa.WHILE_LOOP") == 1 and "tosa.ADD" not in counts
    assert "EXT-CONTROLFLOW" in g.record.extensions
    (loop,) = [op for op in g.ops.values() if op.name == "tosa.WHILE_LOOP"]
    cond, body = loop.regions
    assert [v.type.dtype for v in cond.outputs] == [DType.BOOL]
    assert [str(v.type) for v in body.outputs] == [str(v.type) for v in body.inputs]
    np.testing.assert_array_equal(next(iter(run(g, {"x": _x()}).values())), _x() * 8)


def test_zero_iterations() -> None:
    g = convert_graph(_counter_loop(0))
    assert "tosa.WHILE_LOOP" not in g.op_counts()
    np.testing.assert_array_equal(next(iter(run(g, {"x": _x()}).values())), _x())


def _branches(shape: tuple[int, ...]) -> tuple[Graph, Graph]:
    t = TensorType(shape, F32)
    then, els = Graph("then"), Graph("else")
    a = then.add_input("a", t)
    then.outputs = [then.add_op("tfl.add", [a, a], [t], dict(_ADD)).result]
    e = els.add_input("a", t)
    els.outputs = [els.add_op("tfl.neg", [e], [t], {}).result]
    return then, els


@pytest.mark.parametrize("flag", [True, False])
def test_if_with_constant_condition_is_inlined(flag: bool) -> None:
    t = TensorType((2, 3), F32)
    then, els = _branches((2, 3))
    g = Graph("main")
    x = g.add_input("x", t)
    op = g.add_op("tfl.if", [_const(g, flag, DType.BOOL), x], [t],
                  {"then_subgraph_index": 1, "else_subgraph_index": 2}, regions=[then, els])
    g.outputs = [op.result]
    convert_graph(g)
    assert "tosa.COND_IF" not in g.op_counts()
    want = _x() * 2 if flag else -_x()
    np.testing.assert_array_equal(next(iter(run(g, {"x": _x()}).values())), want)


def test_if_with_input_condition_gives_cond_if() -> None:
    t = TensorType((2, 3), F32)
    then, els = _branches((2, 3))
    g = Graph("main")
    x, p = g.add_input("x", t), g.add_input("p", TensorType((), DType.BOOL))
    op = g.add_op("tfl.if", [p, x], [t], {"then_subgraph_index": 1, "else_subgraph_index": 2},
                  regions=[then, els])
    g.outputs = [op.result]
    convert_graph(g)
    assert g.op_counts().get("tosa.COND_IF") == 1 and g.record.extensions == ["EXT-CONTROLFLOW"]
    for flag, want in ((True, _x() * 2), (False, -_x())):
        got = next(iter(run(g, {"x": _x(), "p": np.array(flag)}).values()))
        np.testing.assert_array_equal(got, want)


def test_call_is_inlined_and_empty_slices_are_dropped() -> None:
    """CALL inlines its subgraph; slices of size 0 (the head/tail of a tensor-list write) vanish from CONCAT."""
    t = TensorType((2, 3), F32)
    sub = Graph("callee")
    a = sub.add_input("a", t)
    head = sub.add_op("tfl.slice", [a, _const(sub, [0, 0], I32), _const(sub, [0, -1], I32)],
                      [TensorType(("batch", 3), F32)], {}).result
    tail = sub.add_op("tfl.slice", [a, _const(sub, [2, 0], I32), _const(sub, [-1, -1], I32)],
                      [TensorType(("batch", 3), F32)], {}).result
    twice = sub.add_op("tfl.add", [a, a], [t], dict(_ADD)).result
    cat = sub.add_op("tfl.concatenation", [head, twice, tail], [t], {"axis": 0, **_ADD}).result
    sub.outputs = [cat]
    g = Graph("main")
    x = g.add_input("x", t)
    g.outputs = [g.add_op("tfl.call", [x], [t], {"subgraph": 1}, regions=[sub]).result]
    convert_graph(g)
    assert set(g.op_counts()) <= {"tosa.ADD", "tosa.IDENTITY"}
    np.testing.assert_array_equal(next(iter(run(g, {"x": _x()}).values())), _x() * 2)


def test_region_ops_without_rule_are_reported() -> None:
    t = TensorType((2, 3), F32)
    sub = Graph("callee")
    a = sub.add_input("a", t)
    sub.outputs = [sub.add_op("tfl.no_such_op", [a], [t], {}).result]
    g = Graph("main")
    x = g.add_input("x", t)
    g.outputs = [g.add_op("tfl.call", [x], [t], {"subgraph": 1}, regions=[sub], location="CALL#0").result]
    with pytest.raises(UnsupportedOpsError, match=r"tfl\.call x1: CALL#0/callee/.*tfl\.no_such_op"):
        convert_graph(g)


# ------------------------------------------------------------------------------------ models built with TF
# (a cached model needs no TensorFlow; LiteRT is the oracle)
needs_tf = pytest.mark.skipif(not (HAVE_TF and HAVE_LITERT), reason="needs tensorflow and ai_edge_litert")

RNNS = ["lstm", "gru", "simple_rnn", "bilstm"]


@needs_tf
@pytest.mark.parametrize("kind", RNNS)
def test_keras_rnn_unrolled(kind: str) -> None:
    """Keras 3 recurrent layers: their WHILE is unrolled; no control flow and no EXT-DYNAMIC is left."""
    res = check_tflite(f"cf_{kind}", mg.rnn_model(kind))
    assert res.profiles == ["PRO-FP"] and res.extensions == []
    assert "tosa.WHILE_LOOP" not in res.ops


@needs_tf
def test_keras_lstm_last_output_batch2() -> None:
    res = check_tflite("cf_lstm_b2_last", mg.rnn_model("lstm", batch=2, return_sequences=False))
    assert res.extensions == []


@needs_tf
@pytest.mark.slow
def test_long_sequence_stays_within_the_8k_level() -> None:
    """70 steps: the output CONCAT is split (at most 64 tensors per list) and tosa-opt accepts level 8K."""
    res = check_tflite("cf_simple_rnn_70", mg.rnn_model("simple_rnn", seq=70, units=4), num=1)
    assert res.ops["tosa.CONCAT"] == 2


@needs_tf
def test_keras_lstm_without_unrolling_is_refused() -> None:
    """The LSTM body writes its step output with slices whose start is the loop counter: without unrolling, TOSA
    (static shapes) cannot express it, and the reason names the body op."""
    with pytest.raises(UnsupportedOpsError, match=r"tfl\.while x1: .*/body.*tfl\.slice.*unrolling is off"):
        tf2tosa.convert(mg.rnn_model("lstm"), max_unroll=0)
    with pytest.raises(UnsupportedOpsError, match=r"tfl\.while x1: .*more than max_unroll=4 iterations"):
        tf2tosa.convert(mg.rnn_model("lstm"), max_unroll=4)  # 8 steps > 4: not unrolled either


@needs_tf
def test_unrolled_lstm_writes_its_outputs_with_one_concat() -> None:
    """The per-step tensor-list write (slice + concat of the whole buffer) collapses into one CONCAT of the steps
    (two, nested, past the 8K level's 64-tensor list), and the weights are shared by the steps."""
    g = tf2tosa.convert(mg.rnn_model("lstm")).graph
    counts = g.op_counts()
    assert counts["tosa.CONCAT"] == 1 and counts["tosa.GATHER"] == mg.SEQ
    big = [np.asarray(op.attrs["values"]) for op in g.ops.values()
           if op.name == "tosa.CONST" and np.asarray(op.attrs["values"]).size >= 32]
    assert len(big) < mg.SEQ
    assert len({(a.shape, a.tobytes()) for a in big}) == len(big)  # no step has its own copy of a weight


def _mlir_valid(data: bytes) -> None:
    """The MLIR text (regions as tosa.cond_if / tosa.while_loop) passes tosa-opt too."""
    from tf2tosa.verify import tosa_tools

    if not tosa_tools.available():
        return
    model = tf2tosa.convert(data)
    ok, msg = tosa_tools.validate_mlir(model.to_mlir(), model.profiles, model.extensions)
    assert ok, msg


@needs_tf
@pytest.mark.parametrize("batch", [2, None])
def test_tf_while_loop_static(batch: int | None) -> None:
    res = check_tflite(f"cf_while_static_{batch}", mg.while_static(batch=batch))
    assert res.extensions == [] and "tosa.WHILE_LOOP" not in res.ops


@needs_tf
@pytest.mark.parametrize("batch", [2, None])
def test_tf_while_loop_dynamic(batch: int | None) -> None:
    """The trip count is an input: WHILE_LOOP (EXT-CONTROLFLOW); a dynamic batch takes the caller's size."""
    res = check_tflite(f"cf_while_dynamic_{batch}", mg.while_dynamic(batch=batch), lo=0, hi=6)
    assert res.ops.get("tosa.WHILE_LOOP") == 1 and "EXT-CONTROLFLOW" in res.extensions
    _mlir_valid(mg.while_dynamic(batch=batch))


@needs_tf
def test_tf_cond() -> None:
    res = check_tflite("cf_cond", mg.cond_model(), num=4)
    assert res.ops.get("tosa.COND_IF") == 1 and res.extensions == ["EXT-CONTROLFLOW"]
    _mlir_valid(mg.cond_model())
    _both_branches(mg.cond_model(), {"x0": np.full((2, 3), 0.5, np.float32)},
                   {"x0": np.full((2, 3), -0.5, np.float32)})


def _both_branches(data: bytes, *input_sets: dict[str, np.ndarray]) -> None:
    from tests.e2e import fp32_bound, fp32_noise
    from tf2tosa.verify.litert import run_tflite

    model = tf2tosa.convert(data)
    g = model.graph
    for inputs in input_sets:
        feed = {v.name: inputs[v.source or v.name] for v in g.inputs}
        ours, ours64, noise = model.run(feed), run(g, feed, precise=True), fp32_noise(g, feed)
        ref = run_tflite(data, inputs)
        for v, b in zip(g.outputs, ref.values()):
            a, a64 = ours[v.name].reshape(b.shape), np.asarray(ours64[v.name], np.float64).reshape(b.shape)
            err = float(np.abs(b.astype(np.float64) - a64).max())
            assert err <= fp32_bound(a, a64, v.dtype, noise.get(v.name, 0.0)), err


@needs_tf
@pytest.mark.parametrize("static", [True, False])
def test_cond_inside_while(static: bool) -> None:
    """Nested control flow: an unrolled loop of COND_IFs, or a WHILE_LOOP whose body holds a COND_IF."""
    data = mg.while_cond(static)
    res = check_tflite(f"cf_while_cond_{static}", data, lo=0, hi=5)
    model = tf2tosa.convert(data)
    if static:
        assert res.ops.get("tosa.COND_IF") == 4 and "tosa.WHILE_LOOP" not in res.ops
    else:
        (loop,) = [op for op in model.graph.ops.values() if op.name == "tosa.WHILE_LOOP"]
        assert "tosa.COND_IF" in loop.regions[1].op_counts()
        _mlir_valid(data)
    x = np.linspace(-1.5, 1.0, 8, dtype=np.float32).reshape(2, 4)
    _both_branches(data, {"x0": x, "x1": np.array([4], np.int32)}, {"x0": -x, "x1": np.array([3], np.int32)})


@needs_tf
def test_resource_variable_read_only() -> None:
    """Variables that are only read are frozen by the TFLite converter itself: plain constants."""
    res = check_tflite("cf_variable_read", mg.variable_model(False))
    assert res.extensions == []


@needs_tf
@pytest.mark.parametrize("twice", [False, True])
def test_resource_variable_state_across_invocations(twice: bool) -> None:
    """CALL_ONCE is resolved at conversion time (initial values); the assigned variable becomes a TOSA VARIABLE
    (EXT-VARIABLE) whose state carries across invocations exactly as LiteRT's does.  ``twice``: a read after a
    write takes the written value and only the last of two writes is kept."""
    from tf2tosa.verify.litert import run_tflite_many

    data = mg.variable_model(True, twice)
    res = check_tflite(f"cf_variable_assign_{twice}", data, num=1)
    assert res.extensions == ["EXT-VARIABLE"]
    assert res.ops.get("tosa.VARIABLE_WRITE") == 1 and res.ops.get("tosa.VARIABLE") == 1
    model = tf2tosa.convert(data)
    rng = np.random.default_rng(5)
    sets = [[rng.uniform(-1, 1, (2, 4)).astype(np.float32)] for _ in range(3)]
    refs = run_tflite_many(data, sets)  # one interpreter: its variable state carries from call to call
    state: dict[str, np.ndarray] = {}
    state64: dict[str, np.ndarray] = {}
    for s, ref in zip(sets, refs):
        got = next(iter(run(model.graph, s, variables=state).values()))
        # the fp64 twin carries its own state; the variable holds an input-derived sum, so our fp32 noise is the
        # difference of the two runs
        got64 = np.asarray(next(iter(run(model.graph, s, variables=state64, precise=True).values())), np.float64)
        r = np.asarray(next(iter(ref.values())), np.float64).reshape(got64.shape)
        assert float(np.abs(r - got64).max()) <= fp32_bound(got, got64, model.graph.outputs[0].dtype)
