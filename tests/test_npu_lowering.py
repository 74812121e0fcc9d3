"""The NPU-efficient lowerings stay bit-exact (issue 15 item 3): each is checked against LiteRT's reference kernels
(BUILTIN_REF) on models that exercise it, and the emitted op mix is asserted so the test fails if the lowering
goes back to the costlier form.

* explicit PAD of the input zero point folded into CONV2D / DEPTHWISE_CONV2D padding (``passes/fold_pad.py``),
  not into pools (TFLite counts the padded positions of an explicit PAD, the spec's pools do not);
* int8 ADD/SUB: one input RESCALE where one is exact on all 256 codes (``quant.rescale.merged_widen_rescale``);
* int8 softmax exp tables as byte-split TABLEs instead of GATHER on large tensors (``quant.elementwise``);
* int8 MEAN over H and W summed by one all-ones DEPTHWISE_CONV2D instead of REDUCE_SUMs (``tfl_reduce.mean``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tf2tosa
from tf2tosa.quant.rescale import apply_scale_32, merged_widen_rescale
from tf2tosa.quant.tflite_reference import mbqm

pytest.importorskip("tensorflow")

from tests import modelgen  # noqa: E402

RNG = np.random.default_rng(15)


def _model(name: str, fn: Any, shape: tuple[int, ...], quant: str | None, maker: Any) -> bytes:
    """A cached .tflite of ``fn`` (``maker``, the function that built ``fn``, enters the cache key)."""
    return modelgen.cached(f"npu_lowering/{name}-{quant}", lambda q: modelgen.convert(
        fn, [(shape, "float32")], quant=q, ranges=(-1.0, 1.0)), {"q": quant}, extra=(maker,))


def _pad_conv(kind: str) -> Any:
    tf = modelgen._tf()
    rng = np.random.default_rng(3)
    w = rng.normal(0, 0.4, (3, 3, 4, 6)).astype(np.float32)
    w_dw = rng.normal(0, 0.4, (3, 3, 4, 1)).astype(np.float32)

    def fn(x: Any) -> Any:
        y = tf.pad(x, [[0, 0], [2, 1], [0, 3], [0, 0]])
        if kind == "conv":
            return tf.nn.conv2d(y, w, 1, "VALID")
        if kind == "depthwise":
            return tf.nn.depthwise_conv2d(y, w_dw, [1, 1, 1, 1], "VALID")
        if kind == "pad_one":  # a pad value that is not the zero point: stays a PAD
            return tf.nn.conv2d(tf.pad(x, [[0, 0], [2, 1], [0, 3], [0, 0]], constant_values=0.75), w, 1, "VALID")
        return tf.nn.avg_pool2d(y, 3, 1, "VALID")  # "avgpool": stays a PAD
    return fn


@pytest.mark.parametrize("quant", ["int8", None])
@pytest.mark.parametrize("kind", ["conv", "depthwise", "avgpool", "pad_one"])
def test_pad_folding_bit_exact(kind: str, quant: str | None) -> None:
    buf = _model(f"pad_{kind}", _pad_conv(kind), (1, 8, 8, 4), quant, _pad_conv)
    m = tf2tosa.convert(buf)
    pads = m.graph.op_counts().get("tosa.PAD", 0)
    if kind in ("conv", "depthwise"):
        assert pads == 0, m.graph.op_counts()
        conv = next(op for op in m.graph.topological_order() if op.opcode in ("CONV2D", "DEPTHWISE_CONV2D"))
        assert list(conv.attrs["pad"]) == [2, 1, 0, 3]
    else:
        assert pads == 1, m.graph.op_counts()
    report = m.verify(num=3, oracle="ref")
    assert report.ok, report
    if quant:
        assert all(o.mismatches == 0 for o in report.outputs), report


def test_merged_add_input_rescale_is_exact_on_every_code() -> None:
    """The one-RESCALE form equals TFLite's ``MBQM((x - zp)·2^20, m, e)`` (numpy from the reference kernel) on all
    256 codes, for the larger-scale input (factor 1/2) of random scale pairs; a refusal keeps the two steps."""
    from tf2tosa.quant.scale import quantize_multiplier

    codes = np.arange(-128, 128)
    merged_big = 0
    for _ in range(50):
        s1, s2 = (float(np.float32(s)) for s in RNG.uniform(0.002, 0.2, 2))
        zp = int(RNG.integers(-128, 128))
        twice = 2.0 * max(s1, s2)
        for s in (s1, s2):
            got = merged_widen_rescale(codes, zp, 20, s / twice, "DOUBLE_ROUND")
            if got is None:
                continue
            m, e = quantize_multiplier(s / twice)
            want = mbqm((codes - zp) << 20, m, e)
            mult, shift, mode = got
            assert np.array_equal(apply_scale_32(codes - zp, mult, shift, mode == "DOUBLE_ROUND"), want)
            merged_big += s == max(s1, s2)
    assert merged_big == 50


def test_int8_add_and_softmax_models_bit_exact() -> None:
    """An int8 residual ADD and a softmax over 96 positions: one input RESCALE less per ADD, no GATHER."""
    tf = modelgen._tf()
    w = RNG.normal(0, 0.3, (1, 1, 8, 8)).astype(np.float32)

    def fn(x: Any) -> Any:
        y = x + 0.5 * tf.nn.conv2d(x, w, 1, "SAME")
        return tf.nn.softmax(tf.reshape(y, (1, 12, 8 * 8)), axis=-1), tf.nn.softmax(tf.reshape(y, (1, 96, 8)))

    buf = _model("add_softmax", fn, (1, 12, 8, 8), "int8", test_int8_add_and_softmax_models_bit_exact)
    m = tf2tosa.convert(buf)
    counts = m.graph.op_counts()
    assert counts.get("tosa.GATHER", 0) == 0 and counts.get("tosa.TABLE", 0) >= 4, counts
    adds = [op for op in m.graph.topological_order() if op.opcode == "ADD" and
            all(o.producer is not None and o.producer.opcode == "RESCALE" for o in op.operands)]
    assert adds
    for add in adds:  # the larger-scale input's RESCALE reads the i8 tensor directly
        assert any(o.producer.operands[0].dtype.value == "i8" for o in add.operands)
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


@pytest.mark.parametrize("keep", [False, True])
def test_int8_spatial_mean_is_one_depthwise_sum(keep: bool) -> None:
    """A global average pool (tfl.mean over axes 1, 2) sums with one all-ones DEPTHWISE_CONV2D and no REDUCE_SUM
    (Vela transposes an i32 REDUCE_SUM over H or W); LiteRT's reference MEAN agrees on every element, also on
    inputs at the int8 extremes (the largest sums)."""
    tf = modelgen._tf()

    def fn(x: Any) -> Any:
        return tf.reduce_mean(tf.nn.relu6(x * 3.0), axis=[1, 2], keepdims=keep)

    buf = _model(f"mean_hw_{keep}", fn, (1, 7, 9, 16), "int8", test_int8_spatial_mean_is_one_depthwise_sum)
    m = tf2tosa.convert(buf)
    counts = m.graph.op_counts()
    assert counts.get("tosa.REDUCE_SUM", 0) == 0 and counts.get("tosa.DEPTHWISE_CONV2D", 0) == 1, counts
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report
    for fill in (-128, 127):
        report = m.verify([{m.input_names[0]: np.full((1, 7, 9, 16), fill, np.int8)}], oracle="ref")
        assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def test_int8_dense_relu_clamps_after_the_reshape() -> None:
    """An int8 fully_connected with a fused RELU feeding a CONCAT: the activation's CLAMP reads the reshaped 2-D
    result (the CONCAT reads the CLAMP directly, which Vela writes into the CONCAT without a copy); LiteRT's
    reference kernels agree on every element."""
    tf = modelgen._tf()
    keras = tf.keras
    keras.utils.set_random_seed(5)
    inp = keras.Input((12,), batch_size=1)
    h = keras.layers.Dense(16, activation="relu")(inp)
    out = keras.layers.Dense(4)(keras.layers.Concatenate()([h, inp]))
    model = keras.Model(inp, out)
    buf = _model("dense_relu_concat", model, (1, 12), "int8", test_int8_dense_relu_clamps_after_the_reshape)
    m = tf2tosa.convert(buf)
    concat = next(op for op in m.graph.topological_order() if op.opcode == "CONCAT")
    producers = [o.producer.opcode for o in concat.operands if o.producer is not None]
    assert "CLAMP" in producers, producers
    clamp = next(o.producer for o in concat.operands if o.producer is not None and o.producer.opcode == "CLAMP")
    assert clamp.operands[0].producer.opcode == "RESHAPE"
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def test_float_island_of_int8_layer_norm_becomes_a_table() -> None:
    """TFLite leaves LayerNorm's NEG in float (DEQUANTIZE → NEG → QUANTIZE); it becomes one i8 TABLE, so the graph
    is PRO-INT only, and stays bit-exact."""
    tf = modelgen._tf()
    keras = tf.keras
    keras.utils.set_random_seed(4)
    inp = keras.Input((16, 8), batch_size=1)
    out = keras.layers.LayerNormalization()(keras.layers.Dense(8)(inp))
    model = keras.Model(inp, out)
    buf = _model("layer_norm", model, (1, 16, 8), "int8", test_float_island_of_int8_layer_norm_becomes_a_table)
    from tf2tosa.converter.tflite import load_tflite

    names = [op.name for op in load_tflite(buf).ops.values()]
    assert "tfl.neg" in names and "tfl.dequantize" in names  # the float island is in the source
    m = tf2tosa.convert(buf)
    assert m.profiles == ["PRO-INT"], (m.profiles, m.graph.op_counts())
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def test_constants_deduplicated_and_the_file_runs(tmp_path: Any) -> None:
    """No two CONST/CONST_SHAPE ops of the int8 sample hold the same data; the shared constants still give a file
    that tosa-opt validates and the Arm reference model runs bit-exactly like LiteRT (the .tosa hook and verify)."""
    from pathlib import Path

    sample = Path(__file__).resolve().parent.parent / "models" / "samples" / "small_cnn_int8.tflite"
    m = tf2tosa.convert(sample)
    seen: set[Any] = set()
    shared = 0
    for op in m.graph.topological_order():
        if op.opcode in ("CONST", "CONST_SHAPE"):
            arr = np.asarray(op.attrs["values"])
            key = (op.opcode, op.results[0].type, arr.dtype.str, arr.shape, arr.tobytes())
            assert key not in seen, op.results[0].name
            seen.add(key)
            shared += len(m.graph.uses(op.results[0])) > 1
    assert shared > 0
    m.save(tmp_path / "m.tosa")
    assert (tmp_path / "m.tosa").read_bytes() == tf2tosa.convert(sample).to_bytes()
    report = m.verify(num=2, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def test_int8_mul_by_constant_keeps_the_int8_constant() -> None:
    """x · c (a per-channel constant, as an unfused BatchNorm): the constant stays int8 behind a RESCALE (i8 → i32,
    zero point), which Vela runs as one int8 MUL, instead of being folded into an i32 constant; still bit-exact."""
    c = np.linspace(-1.5, 2.0, 8).astype(np.float32)

    def fn(x: Any) -> Any:
        return x * c

    buf = _model("mul_const", fn, (1, 6, 6, 8), "int8", test_int8_mul_by_constant_keeps_the_int8_constant)
    m = tf2tosa.convert(buf)
    muls = [op for op in m.graph.topological_order() if op.opcode == "MUL"]
    assert muls
    for mul in muls:
        producers = [o.producer for o in mul.operands[:2]]
        producers = [p.operands[0].producer if p is not None and p.opcode == "RESHAPE" else p for p in producers]
        assert any(p is not None and p.opcode == "RESCALE" and p.operands[0].is_const and
                   p.operands[0].dtype.value == "i8" for p in producers), [str(o.type) for o in mul.operands]
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def test_single_rescale_for_fully_connected_matches_the_double_rounding() -> None:
    """The window check of ``single_rescale_exact`` agrees with a brute force over every accumulator: whenever it
    accepts a RESCALE, ``clip(round_half_away(fl64(acc·s)) + zp)`` (LiteRT's double requantization, numpy) equals
    the RESCALE on all ``|acc| <= bound``, also with exact ties (s = 1/4: half away from zero needs the multiplier
    one above 2^30, which nudges negative ties down)."""
    from tf2tosa.quant.conv import single_rescale_exact

    assert single_rescale_exact([0.25], 1000, 0) == ([(1 << 30) + 1], [32])
    accepted = 0
    cases = [(0.25, 0, 1000), (0.125, 5, 4000)] + [
        (float(RNG.uniform(1e-4, 0.3)), int(RNG.integers(-128, 128)), int(RNG.integers(100, 200_000)))
        for _ in range(120)]
    for s, zp, bound in cases:
        got = single_rescale_exact([s], bound, zp)
        if got is None:
            continue
        accepted += 1
        (mult,), (shift,) = got
        acc = np.arange(-bound, bound + 1, dtype=np.int64)
        prod = acc * s
        want = np.clip((np.sign(prod) * np.floor(np.abs(prod) + 0.5)).astype(np.int64) + zp, -128, 127)
        np.testing.assert_array_equal(np.clip(apply_scale_32(acc, mult, shift, False) + zp, -128, 127), want)
    assert accepted > 100
