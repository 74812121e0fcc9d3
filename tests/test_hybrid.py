"""Dynamic-range ("hybrid") models - int8 constant weights, float32 activations - built from fixed seeds with
``TFLiteConverter`` and ``Optimize.DEFAULT`` without a representative dataset (:mod:`tests.hybrid_models`).

The oracle is LiteRT (its reference kernels, through :meth:`TosaModel.verify`, judged within the float bound);
the distance of each conversion from the float Keras model the ``.tflite`` came from is measured for both
``--hybrid`` modes, and ``dequantize`` (float weights) must be no farther from it than ``kernel`` (LiteRT's
on-the-fly quantization), within reason.

Size: the weights stay int8, so a ``.tosa`` exceeds its ``.tflite`` by the ops of the on-the-fly quantizations
(about 16 TOSA ops for a non-negative input, 33 for a signed one, ~100-150 bytes each, per hybrid op: TOSA has no
dynamic quantize).  :data:`MAX_RATIO` holds each
model's ``.tosa`` / ``.tflite`` ceiling, a few percent above what it measures, so that a change that makes the
program bigger fails here.  Those models are tiny (1-10 KB of weights per hybrid op); the ``real_*`` models are
of the size users publish (200-600 KB of int8 weights) and must stay within 1.1x their ``.tflite``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")
pytest.importorskip("tensorflow")

import tf2tosa  # noqa: E402
from tests.hybrid_models import model  # noqa: E402
from tf2tosa.ir import DType, Graph, TensorType  # noqa: E402
from tf2tosa.quant.hybrid import HALF_BELOW, SHORT_NAME, c_round, nonnegative  # noqa: E402
from tf2tosa.tosa.builder import Builder  # noqa: E402

FAST = ["cnn", "mlp", "depthwise", "lstm_text", "batch_matmul", "shared_input"]
SLOW = ["conv1d", "transformer"]
#: op of each model that must run as LiteRT's hybrid kernel (an int8 product on quantized activations)
PRODUCT = {"cnn": "CONV2D", "mlp": "CONV2D", "depthwise": "DEPTHWISE_CONV2D", "lstm_text": "CONV2D",
           "batch_matmul": "MATMUL", "conv1d": "CONV2D", "transformer": "CONV2D", "transpose_conv": None,
           "shared_input": "DEPTHWISE_CONV2D"}

#: .tosa / .tflite ceilings (measured, +~3%); they were 2.5 (cnn), 2.53 (mlp), 1.52 (depthwise), 6.35 (lstm_text),
#: 2.2 (batch_matmul), 2.79 (conv1d), 3.12 (transformer) before the quantization was made compact, then 1.92, 1.99,
#: 1.26, 4.22 (unrolled), 1.94, 1.94, 2.17 before non-negative inputs got a constant zero point and hybrid loops
#: stayed loops
MAX_RATIO = {"cnn": 1.61, "mlp": 1.81, "depthwise": 1.20, "lstm_text": 1.54, "batch_matmul": 1.94, "conv1d": 1.58,
             "transformer": 2.17, "shared_input": 1.29}
#: asymmetric on-the-fly quantizations of a signed tensor (one REDUCE_MIN each) of each model: the transformer's Q, K
#: and V projections read one tensor, quantized once (then the attention output and the two feed-forward layers);
#: the LSTM's loop (a WHILE_LOOP) quantizes its step's input row and its state h, then the dense layer its output; a
#: tensor a ReLU made is non-negative (its zero point is the constant -128, no REDUCE_MIN): the CNNs' and the
#: Conv1D net's only signed input is the model's; the MLP's are its input and the tanh layer's output, the
#: depthwise net's its input and the outputs of its two depthwise layers without activation; shared_input's one
#: input is read by a SAME depthwise conv (quantized padded) and a 1x1 conv: one range for both (1.343x before)
QUANTIZATIONS = {"transformer": 4, "lstm_text": 3, "mlp": 2, "cnn": 1, "depthwise": 3, "conv1d": 1,
                 "shared_input": 1}


def _convert(name: str, mode: str) -> tuple[tf2tosa.TosaModel, bytes, list[dict[str, np.ndarray]], float]:
    """The conversion, the .tflite, the input sets by our input names, and max|ours - float Keras model|."""
    tfl, ins, outs = model(name)
    m = tf2tosa.convert(tfl, hybrid=mode, input_shapes={k: a.shape for k, a in ins[0].items()})
    names = {v.source or v.name: v.name for v in m.graph.inputs}
    sets = [{names[k]: a for k, a in s.items()} for s in ins]
    dist = 0.0
    for s, ref in zip(sets, outs):
        got = m.run(s)
        for v, r in zip(m.graph.outputs, ref):
            dist = max(dist, float(np.abs(np.asarray(got[v.name], np.float64).reshape(r.shape) - r).max()))
    return m, tfl, sets, dist


def _float_weights(m: tf2tosa.TosaModel) -> list[str]:
    """Float constants of >= 1024 elements spread over two or more axes (a weight, not a bias)."""
    return [op.result.name for op in m.graph.ops.values()
            if op.opcode == "CONST" and op.result.dtype is tf2tosa.ir.DType.FP32 and op.result.type.size >= 1024
            and sum(int(d) > 1 for d in op.result.type.static_shape) >= 2]


def _check(name: str) -> None:
    m, tfl, _, dist_kernel = _convert(name, "kernel")
    rep = m.verify()  # LiteRT's reference kernels on the verifier's seeded inputs, within the float bound
    assert rep.ok, rep.text()
    g = m.graph
    ops = g.op_counts()
    if PRODUCT[name]:
        int8_products = [op for op in g.ops.values() if op.opcode == PRODUCT[name]
                         and op.operands[0].dtype is tf2tosa.ir.DType.INT8]
        assert int8_products, f"{name}: no int8 {PRODUCT[name]} ({ops})"
    # the weights stay int8: no float matrix of 1024 elements or more (TF's dynamic-range threshold) appears
    assert not _float_weights(m), _float_weights(m)
    md, _, _, dist_deq = _convert(name, "dequantize")
    assert any("dequantize" in e["reason"] for e in md.graph.inexact)
    assert not _float_weights(md), _float_weights(md)
    # float weights: no farther from the float model than LiteRT's on-the-fly quantization, within reason
    assert dist_deq <= 1.5 * dist_kernel + 1e-6, (dist_deq, dist_kernel)
    ratio = len(m.to_bytes()) / len(tfl)
    assert ratio <= MAX_RATIO[name], (name, ratio)
    if name in QUANTIZATIONS:  # (in the program and its loop bodies)
        graphs = [g, *(r for op in g.ops.values() for r in op.regions)]
        assert sum(op.opcode == "REDUCE_MIN" for x in graphs for op in x.ops.values()) == QUANTIZATIONS[name], ops
    # the values made inside a hybrid op have short names; the source's (often hundreds of bytes) stay on results
    made = [r.name for op in g.ops.values() for r in op.results if r.name.split("_")[0] == SHORT_NAME]
    assert len(made) > len(g.ops) // 3 and max(len(n) for n in made) <= 8, made[:5]
    print(f"{name}: vs LiteRT {rep.text().splitlines()[1].strip()[:120]}; size {ratio:.2f}x .tflite; "
          f"max|.-float model| kernel {dist_kernel:.3g}, dequantize {dist_deq:.3g}")


@pytest.mark.parametrize("name", FAST)
def test_hybrid_model(name: str) -> None:
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_hybrid_model_slow(name: str) -> None:
    _check(name)


def test_unknown_mode_is_an_error() -> None:
    tfl, _, _ = model("mlp")
    with pytest.raises(tf2tosa.errors.InputError, match="hybrid"):
        tf2tosa.convert(tfl, hybrid="float")


def test_kernel_is_default_and_not_recorded_inexact() -> None:
    tfl, ins, _ = model("mlp")
    m = tf2tosa.convert(tfl, input_shapes={k: a.shape for k, a in ins[0].items()})
    assert not m.graph.inexact
    assert any(op.opcode == "CONV2D" and op.operands[0].dtype is tf2tosa.ir.DType.INT8 for op in m.graph.ops.values())


@pytest.mark.slow
def test_transpose_conv_is_dequantized_and_recorded() -> None:
    """LiteRT's hybrid TRANSPOSE_CONV arithmetic is not reproduced yet: both modes dequantize its weights, which is
    recorded as inexact (so verify shows it), and the int8 weights stay int8."""
    m, _, _, dist = _convert("transpose_conv", "kernel")
    assert any(e["op"] == "TRANSPOSE_CONV" and "not reproduced" in e["reason"] for e in m.graph.inexact)
    assert not _float_weights(m)
    assert dist < 0.05


def _tie_rows() -> np.ndarray:
    """Rows whose asymmetric quantization lands exactly on halves: with min 0 (or max 0) and a range of 255/256
    LiteRT's scale is 1/256 and its zero point -128 (or 127) exactly, so (j + 0.5)/256 quantizes to zp + j + 0.5,
    which C's round takes away from zero and TOSA's CAST (ties to even) would take to the even neighbour half the
    time.  The third row straddles 0 (zero point -28: ties of both signs); the fourth is all zero (range 0)."""
    j = np.arange(47, dtype=np.float64)
    up = np.append((5 * j + 0.5) / 256, 255 / 256)
    down = -up
    mixed = np.append(np.append((np.arange(-100, 135, 5) + 0.5)[:46] / 256, -100 / 256), 155 / 256)
    return np.stack([up, down, mixed, np.zeros(48)]).astype(np.float32)


def test_ties_are_rounded_like_litert() -> None:
    """LiteRT's reference kernels (the oracle) on inputs full of exact quantization ties and an all-zero row."""
    m, _, sets, _ = _convert("mlp", "kernel")
    name = next(iter(sets[0]))
    rep = m.verify([{name: _tie_rows()}])
    assert rep.ok, rep.text()
    assert max(o.max_abs for o in rep.outputs) <= 1e-5, rep.text()


def test_nonnegative_input_ties_are_rounded_like_litert() -> None:
    """A ReLU's output quantized with the constant zero point -128 (no REDUCE_MIN, the int8 product's input zero
    point): LiteRT's reference kernels on rows of exact ties, an all-zero row and a random one, through the ReLU."""
    tfl, ins, _ = model("relu_dense")
    m = tf2tosa.convert(tfl, input_shapes={k: a.shape for k, a in ins[0].items()})
    ops = m.graph.op_counts()
    assert "tosa.REDUCE_MIN" not in ops and "tosa.CEIL" not in ops, ops
    assert any(op.opcode == "CONV2D" and op.operands[0].dtype is DType.INT8
               and int(np.asarray(op.operands[3].const()).reshape(-1)[0]) == -128 for op in m.graph.ops.values())
    rows = _tie_rows()
    rows[1] = np.random.default_rng(0).uniform(-1, 1, 48).astype(np.float32)
    rep = m.verify([{m.graph.inputs[0].name: rows}, {m.graph.inputs[0].name: np.abs(rows[::-1]).copy()}])
    assert rep.ok, rep.text()
    assert max(o.max_abs for o in rep.outputs) <= 1e-5, rep.text()


def test_nonnegative() -> None:
    """What :func:`~tf2tosa.quant.hybrid.nonnegative` takes as >= 0: a clamp to >= 0 and what keeps its sign; not a
    signed input, a negative constant, or a clamp whose minimum is below 0."""
    g = Graph("main")
    b = Builder(g, location="test", fold=False)
    x = g.add_input("x", TensorType((1, 4), DType.FP32))
    relu = b.clamp(x, 0.0, 6.0)
    c = b.const(np.array([[0.0, -0.0, 1.0, 2.0]], np.float32), DType.FP32)
    neg = b.const(np.array([[0.0, -1.0, 1.0, 2.0]], np.float32), DType.FP32)
    assert nonnegative(relu) and nonnegative(c) and not nonnegative(x) and not nonnegative(neg)
    assert nonnegative(b.reshape(b.binary("ADD", relu, c), [2, 2])) and nonnegative(b.sigmoid(x))
    assert nonnegative(b.binary("MAXIMUM", x, c)) and not nonnegative(b.binary("MAXIMUM", x, neg))
    assert not nonnegative(b.binary("SUB", relu, c)) and not nonnegative(b.clamp(x, -1.0, 6.0))
    assert not nonnegative(b.binary("ADD", relu, neg)) and nonnegative(b.clamp(relu, -1.0, 6.0))


def test_c_round_is_half_away_from_zero() -> None:
    """c_round against C's round computed in float64 (sign · floor(|v| + 0.5), exact there) on ties, the float32
    just below 1/2 (which FLOOR(v + 0.5) takes to 1) and neighbours of halves; run by the executor here and by the
    Arm reference model through the session hook."""
    halves = np.arange(-130, 130, dtype=np.float32) + np.float32(0.5)
    near = np.concatenate([np.nextafter(halves, np.float32(np.inf)), np.nextafter(halves, np.float32(-np.inf))])
    special = np.array([0.0, -0.0, HALF_BELOW, -HALF_BELOW, 1e-30, -1e-30, 8388607.5, -8388607.5], np.float32)
    v = np.concatenate([halves, near, special]).astype(np.float32)
    g = Graph("main")
    x = g.add_input("x", TensorType((1, 1, int(v.size)), DType.FP32))
    g.outputs.append(c_round(Builder(g, location="test", fold=False), x))
    model = tf2tosa.TosaModel(g)
    model.to_bytes()  # (validated by tosa-opt and run in the Arm reference model by the session hook)
    got = np.asarray(model.run({"x": v.reshape(1, 1, -1)})[g.outputs[0].name], np.float64).reshape(-1)
    want = np.sign(v.astype(np.float64)) * np.floor(np.abs(v.astype(np.float64)) + 0.5)
    assert np.array_equal(got, want), v[got != want]


# -- models of the size users publish ----------------------------------------------------------------------------

#: realistic-size hybrid models (tests/hybrid_models.py r_*): CNN 356 KB of int8 weights, depthwise-separable CNN
#: 577 KB, MLP 535 KB, Conv1D keyword spotter 296 KB, LSTM text classifier (embedding 5000 x 64) 357 KB, transformer
#: block (d_model 128, 4 heads, FFN 512) 197 KB
REAL_FAST = ["real_mlp", "real_cnn"]
REAL_SLOW = ["real_depthwise", "real_conv1d", "real_lstm_text", "real_transformer"]
REAL_PRODUCT = {"real_cnn": "CONV2D", "real_mlp": "CONV2D", "real_depthwise": "DEPTHWISE_CONV2D",
                "real_conv1d": "CONV2D", "real_lstm_text": "CONV2D", "real_transformer": "CONV2D"}
#: the issue's ceiling for a realistic model, with the default options: the int8 weights dominate, the on-the-fly
#: quantizations (10-25 TOSA ops, 1.5-3.5 KB, per hybrid op) do not; the LSTM's loop stays a WHILE_LOOP (its body
#: runs hybrid ops)
REAL_MAX_RATIO = 1.1
#: measured +3% ceilings of the cases near or above it: the Conv1D net with a global pool instead of the flattened
#: dense layer (99 KB of weights over 5 hybrid ops: 1.098x), and the LSTM unrolled over its 16 steps when
#: max_unroll is given (1.33x: every step repeats the cell and the recurrent product's quantization)
SMALL_MAX_RATIO: dict[tuple[str, str], tuple[dict[str, Any], float]] = {
    ("real_conv1d_pool", "default"): ({}, 1.131), ("real_lstm_text", "unrolled"): ({"max_unroll": 1024}, 1.37)}


def _distance(m: tf2tosa.TosaModel, sets: list[dict[str, np.ndarray]], outs: list[list[np.ndarray]]) -> float:
    """max|m - the float Keras model| over the cached input sets (already keyed by m's input names)."""
    dist = 0.0
    for s, ref in zip(sets, outs):
        got = m.run(s)
        for v, r in zip(m.graph.outputs, ref):
            dist = max(dist, float(np.abs(np.asarray(got[v.name], np.float64).reshape(r.shape) - r).max()))
    return dist


def _real(name: str, **options: Any) -> dict[str, float]:
    """Both modes of one realistic model: verified against LiteRT (kernel), sizes and distances from the float model;
    returns the figures (printed as a row of the guide's table)."""
    tfl, ins, outs = model(name)
    shapes = {k: a.shape for k, a in ins[0].items()}
    m = tf2tosa.convert(tfl, input_shapes=shapes, **options)
    names = {v.source or v.name: v.name for v in m.graph.inputs}
    sets = [{names[k]: a for k, a in s.items()} for s in ins]
    rep = m.verify()  # LiteRT's reference kernels on the verifier's seeded inputs, within the float bound
    assert rep.ok, rep.text()
    assert not m.graph.inexact, m.graph.inexact
    product = REAL_PRODUCT[name.replace("_pool", "")]
    graphs = [m.graph, *(r for op in m.graph.ops.values() for r in op.regions)]
    assert any(op.opcode == product and op.operands[0].dtype is DType.INT8 for g in graphs for op in g.ops.values()), \
        f"{name}: no int8 {product}"
    assert not _float_weights(m), _float_weights(m)
    md = tf2tosa.convert(tfl, input_shapes=shapes, hybrid="dequantize", **options)
    assert any("dequantize" in e["reason"] for e in md.graph.inexact)
    size_k, size_d = len(m.to_bytes()), len(md.to_bytes())
    dist_k, dist_d = _distance(m, sets, outs), _distance(md, sets, outs)
    # float weights: no farther from the float model than LiteRT's on-the-fly quantization, within reason
    assert dist_d <= 1.5 * dist_k + 1e-6, (dist_d, dist_k)
    worst = max(rep.outputs, key=lambda o: o.max_abs)
    weights = sum(int(op.result.type.size) for g in graphs for op in g.ops.values()
                  if op.opcode == "CONST" and op.result.dtype is DType.INT8)
    fig = {"weights": weights, "tflite": len(tfl), "kernel": size_k, "ratio": size_k / len(tfl),
           "dequantize": size_d, "ratio_deq": size_d / len(tfl), "max_abs": worst.max_abs,
           "bound": worst.bound_value, "dist_kernel": dist_k, "dist_deq": dist_d}
    print(f"| {name}{' ' + str(options) if options else ''} | {weights} | {len(tfl)} | {size_k} | "
          f"{fig['ratio']:.3f} | {size_d} | {fig['ratio_deq']:.3f} | {worst.max_abs:.2g} (bound "
          f"{worst.bound_value:.2g}) | {dist_k:.2g} / {dist_d:.2g} |")
    return fig


def _check_real(name: str) -> None:
    fig = _real(name)
    assert fig["ratio"] <= REAL_MAX_RATIO, fig
    assert fig["ratio_deq"] <= REAL_MAX_RATIO, fig


@pytest.mark.parametrize("name", REAL_FAST)
def test_realistic_hybrid_model(name: str) -> None:
    _check_real(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", REAL_SLOW)
def test_realistic_hybrid_model_slow(name: str) -> None:
    _check_real(name)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(SMALL_MAX_RATIO))
def test_realistic_hybrid_model_over_the_ceiling(case: tuple[str, str]) -> None:
    """The two measured cases at or above 1.1x stay verified and at their measured size (a growth fails here)."""
    options, ceiling = SMALL_MAX_RATIO[case]
    fig = _real(case[0], **options)
    assert fig["ratio"] <= ceiling, fig


def _loops(m: tf2tosa.TosaModel) -> int:
    return sum(op.opcode == "WHILE_LOOP" for op in m.graph.ops.values())


def test_hybrid_loop_stays_a_loop_unless_unrolling_is_asked() -> None:
    """A loop whose body runs hybrid ops (the LSTM's gate products) stays a WHILE_LOOP by default; given
    max_unroll, or for a target without EXT-CONTROLFLOW, it is unrolled as any other loop.  Both forms agree with
    LiteRT (the reference kernels, within the float bound)."""
    tfl, ins, _ = model("lstm_text")
    shapes = {k: a.shape for k, a in ins[0].items()}
    kept = tf2tosa.convert(tfl, input_shapes=shapes)
    unrolled = tf2tosa.convert(tfl, input_shapes=shapes, max_unroll=1024)
    assert _loops(kept) == 1 and _loops(unrolled) == 0
    assert len(kept.to_bytes()) < len(unrolled.to_bytes()) / 2
    for m in (kept, unrolled):
        rep = m.verify()
        assert rep.ok, rep.text()
    assert _loops(tf2tosa.convert(tfl, input_shapes=shapes, target="vulkan-ml")) == 0
    assert _loops(tf2tosa.convert(tfl, input_shapes=shapes, max_unroll=0)) == 1
