"""Quantized layout / type rules (quantize, requantize, concat/pack rescaling, pad zero points, int16 resize,
quantization pass-through) against independent oracles: numpy re-implementations of TFLite's reference-kernel
formulas (AffineQuantize, Requantize/MultiplyByQuantizedMultiplier, ResizeBilinearInteger) and LiteRT's BUILTIN_REF
kernels on small .tflite models fed with inputs aimed at rounding boundaries.  Every comparison is exact."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from tf2tosa.converter.pipeline import legalize_graph
from tf2tosa.executor import run
from tf2tosa.ir import DType, Graph, QuantParams, TensorType, dtype_from_numpy
from tf2tosa.legalizations.tfl_types import quantize_thresholds, reciprocal_below

RNG = np.random.default_rng(77)
F32 = np.float32


# ----------------------------------------------------------------------------- TFLite formulas (numpy oracles)
def tfl_affine_quantize(x: np.ndarray, scale: float, zp: int, dtype: Any) -> np.ndarray:
    """reference_ops::AffineQuantize: clamp(static_cast<int32>(std::round(x / float(scale))) + zp)."""
    t = (np.asarray(x, F32) / F32(scale)).astype(np.float64)
    r = np.sign(t) * np.floor(np.abs(t) + 0.5)  # std::round; |t| + 0.5 is exact in float64
    info = np.iinfo(dtype)
    return np.clip(r + zp, info.min, info.max).astype(dtype)


def tfl_quantize_multiplier(d: float) -> tuple[int, int]:
    """QuantizeMultiplier: (q, shift) with d ≈ q·2^(shift-31), q rounded half away from zero."""
    if d == 0.0:
        return 0, 0
    frac, shift = math.frexp(d)
    q = int(math.floor(abs(frac) * (1 << 31) + 0.5))
    if q == 1 << 31:
        q //= 2
        shift += 1
    return (0, 0) if shift < -31 else (q, shift)


def _tdiv(a: np.ndarray, b: int) -> np.ndarray:
    """C integer division (truncation toward zero) of int64 arrays."""
    return np.where(a >= 0, a // b, -((-a) // b))


def tfl_mbqm(x: np.ndarray, q: int, shift: int) -> np.ndarray:
    """MultiplyByQuantizedMultiplier: SaturatingRoundingDoublingHighMul then RoundingDivideByPOT."""
    left, right = max(shift, 0), max(-shift, 0)
    a = np.asarray(x, np.int64) * (1 << left)
    ab = a * q
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    hi = _tdiv(ab + nudge, 1 << 31)
    mask = (1 << right) - 1
    rem = hi & mask
    threshold = (mask >> 1) + (hi < 0)
    return (hi >> right) + (rem > threshold)


def tfl_requantize(x: np.ndarray, s_in: float, zp_in: int, s_out: float, zp_out: int, dtype: Any) -> np.ndarray:
    """reference_ops::Requantize with the multiplier of double(s_in) / double(s_out)."""
    q, shift = tfl_quantize_multiplier(float(F32(s_in)) / float(F32(s_out)))
    y = tfl_mbqm(np.asarray(x, np.int64) - zp_in, q, shift) + zp_out
    info = np.iinfo(dtype)
    return np.clip(y, info.min, info.max).astype(dtype)


def bilinear_sums(x: np.ndarray, oh: int, ow: int, align: bool, half: bool) -> np.ndarray:
    """The 64-bit sums Σ v·w (weights in 1/2^20) of reference_ops::ResizeBilinearInteger."""
    _, ih, iw, _ = x.shape

    def axis(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if align and n_out > 1:
            s10 = ((1 << 10) * (n_in - 1) + (n_out - 1) // 2) // (n_out - 1)
        else:
            s10 = ((1 << 10) * n_in + n_out // 2) // n_out
        v = np.arange(n_out, dtype=np.int64) * s10
        if half:
            v = v + s10 // 2 - (1 << 9)
        lo = np.maximum(_tdiv(v, 1 << 10), 0)
        hi = np.minimum(_tdiv(v + (1 << 10) - 1, 1 << 10), n_in - 1)
        return v, lo, hi

    vy, y0, y1 = axis(ih, oh)
    vx, x0, x1 = axis(iw, ow)
    wy = (vy - (1 << 10) * y0)[None, :, None, None]
    wx = (vx - (1 << 10) * x0)[None, None, :, None]
    xi = x.astype(np.int64)

    def at(ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
        return xi[:, ys][:, :, xs]

    return (at(y0, x0) * ((1 << 10) - wy) * ((1 << 10) - wx) + at(y1, x0) * wy * ((1 << 10) - wx)
            + at(y0, x1) * ((1 << 10) - wy) * wx + at(y1, x1) * wy * wx)


def tfl_resize_bilinear_int(x: np.ndarray, oh: int, ow: int, align: bool, half: bool) -> np.ndarray:
    """reference_ops::ResizeBilinearInteger: the sums rounded half away from zero (``round = ±2^19``, C division)."""
    acc = bilinear_sums(x, oh, ow, align, half)
    rnd = np.where(acc > 0, 1 << 19, -(1 << 19))
    return _tdiv(acc + rnd, 1 << 20).astype(x.dtype)


# ------------------------------------------------------------------------------------------------- harness
def qp(scale: float, zp: int) -> QuantParams:
    """Per-tensor parameters as a .tflite file stores them (float32 scale)."""
    return QuantParams((float(F32(scale)),), (int(zp),))


def one_op(opname: str, inputs: Sequence[tuple[np.ndarray, QuantParams | None]], consts: dict[int, np.ndarray],
           out_types: Sequence[tuple[DType, QuantParams | None]], attrs: dict[str, Any] | None = None,
           ) -> tuple[list[np.ndarray], Graph]:
    """Build one tfl op (inputs first, then constants at the given operand positions), legalize, run.

    Result shapes are symbolic so rules cannot read them."""
    g = Graph()
    feeds, operands = [], []
    it = iter(inputs)
    n = len(inputs) + len(consts)
    for k in range(n):
        if k in consts:
            operands.append(g.add_const(np.asarray(consts[k]), op_name="tfl.const"))
        else:
            arr, q = next(it)
            operands.append(g.add_input(f"in{k}", TensorType(arr.shape, dtype_from_numpy(arr.dtype), q)))
            feeds.append(arr)
    rank = inputs[0][0].ndim
    rtypes = [TensorType(tuple(f"r{i}_{d}" for d in range(rank)), dt, q) for i, (dt, q) in enumerate(out_types)]
    op = g.add_op(opname, operands, rtypes, attrs or {})
    g.outputs = list(op.results)
    legalize_graph(g)
    assert all(o.name.startswith("tosa.") for o in g.ops.values())
    return list(run(g, feeds).values()), g


def boundary_inputs(scale: float, zp: int, dtype: Any, n_random: int = 200) -> np.ndarray:
    """Floats at, just below and just above every rounding threshold of the output range (both signs), plus
    random values, saturating values and zeros."""
    info = np.iinfo(dtype)
    j = max(info.max - zp, zp - info.min) + 1
    thr = quantize_thresholds(scale, j + 2)
    ks = np.unique(np.concatenate([np.arange(min(j + 2, 300)), RNG.integers(0, j + 2, 300)]))
    t = thr[ks]
    near = np.concatenate([t, np.nextafter(t, F32(0)), np.nextafter(t, F32(np.inf))])
    mid = ((np.arange(-j - 2, j + 3, dtype=np.float64) + 0.5) * float(F32(scale))).astype(F32)
    rnd = (RNG.uniform(-1.2, 1.2, n_random) * j * float(F32(scale))).astype(F32)
    # x/s beyond int32 is undefined behaviour in TFLite (static_cast<int32>: INT_MIN on x86), so stay below it
    big = float(F32(scale)) * (j + 1000)
    extra = np.array([0.0, -0.0, big, -big, 1e-30, -1e-30], F32)
    return np.concatenate([near, -near, mid, rnd, extra]).astype(F32)


# ------------------------------------------------------------------------------------ quantize: float → int
@pytest.mark.parametrize("scale", [0.00784313725490196, 0.0117647, 3.0516e-05, 1.0 / 256, 0.37, 1.7e-6])
def test_quantize_thresholds_and_reciprocal(scale: float) -> None:
    s = F32(scale)
    thr = quantize_thresholds(scale, 600)
    h = np.arange(600, dtype=F32) + F32(0.5)
    assert np.all(thr / s >= h) and np.all(np.nextafter(thr, F32(0)) / s < h)
    r = reciprocal_below(scale)
    a = np.concatenate([thr, np.nextafter(thr, F32(0)), (RNG.uniform(0, 40000, 5000) * s).astype(F32)])
    lo, hi = a * r, a / s
    assert np.all(lo <= hi) and np.all(hi.astype(np.float64) - lo < 0.5)


@pytest.mark.parametrize("dtype,scale,zp", [
    (np.int8, 0.00784313725490196, 0), (np.int8, 0.0117647, -128), (np.int8, 0.0235062, 17),
    (np.int8, 0.37, 127), (np.int16, 3.0516e-05, 0), (np.int16, 0.00018293, 0), (np.int16, 1.0 / 512, 0)])
def test_quantize_float_matches_affine_quantize(dtype: Any, scale: float, zp: int) -> None:
    x = boundary_inputs(scale, zp, dtype)
    q = QuantParams((float(F32(scale)),), (zp,))
    (y,), g = one_op("tfl.quantize", [(x, None)], {}, [(dtype_from_numpy(dtype), q)])
    np.testing.assert_array_equal(y, tfl_affine_quantize(x, scale, zp, dtype))
    assert g.outputs[0].type.quant == q
    counts = g.op_counts()
    assert counts.get("tosa.GATHER") == 1 and "tosa.RESCALE" not in counts


def test_quantize_multiplying_by_reciprocal_is_not_enough() -> None:
    """Why the threshold table exists: round(x·(1/s)) and round(x/s) differ on values next to a threshold."""
    s = F32(3.0516e-05)
    x = boundary_inputs(float(s), 0, np.int16)
    by_mul = np.clip(np.sign(x * (F32(1) / s)) * np.floor(np.abs((x * (F32(1) / s)).astype(np.float64)) + 0.5),
                     -32768, 32767)
    assert np.count_nonzero(by_mul != tfl_affine_quantize(x, float(s), 0, np.int16)) > 0


# ----------------------------------------------------------------------------------- quantize: requantize
@pytest.mark.parametrize("src,dst,s_in,zp_in,s_out,zp_out", [
    (np.int8, np.int8, 0.0235062, -128, 0.00783513, 3),
    (np.int8, np.int8, 0.00783513, 5, 0.0235062, -128),
    (np.int8, np.int8, 0.02, -128, 0.02, 0),  # uint8 ↔ int8 after the boundary's zp − 128 retyping
    (np.int16, np.int16, 3.04841e-05, 0, 3.05165e-05, 0),
    (np.int16, np.int16, 3.05165e-05, 0, 1.2e-04, 0),
    (np.int16, np.int8, 3.05165e-05, 0, 0.00784, -3),
    (np.int8, np.int16, 0.00784, 7, 3.05165e-05, 0),
])
def test_requantize_matches_tflite(src: Any, dst: Any, s_in: float, zp_in: int, s_out: float, zp_out: int) -> None:
    info = np.iinfo(src)
    x = np.arange(info.min, info.max + 1, dtype=np.int64)
    if src is np.int16:
        x = np.concatenate([x[::97], x[:300], x[-300:], np.arange(-300, 300)])
    x = x.astype(src)
    qi, qo = QuantParams((float(F32(s_in)),), (zp_in,)), QuantParams((float(F32(s_out)),), (zp_out,))
    (y,), g = one_op("tfl.quantize", [(x, qi)], {}, [(dtype_from_numpy(dst), qo)])
    np.testing.assert_array_equal(y, tfl_requantize(x, s_in, zp_in, s_out, zp_out, dst))
    if (s_in, src) != (s_out, dst) or zp_in != zp_out:
        assert g.op_counts().get("tosa.RESCALE") == 1


# ---------------------------------------------------------------------------- concatenation / pack quant
def test_concat_int8_inputs_rescaled_to_output_quant() -> None:
    qo = qp(0.02, -5)
    qa, qb = qp(0.05, 10), qp(0.02, -5)
    a = np.arange(-128, 128, dtype=np.int8).reshape(2, 128)
    b = RNG.integers(-128, 128, (2, 7)).astype(np.int8)
    (y,), g = one_op("tfl.concatenation", [(a, qa), (b, qb)], {}, [(DType.INT8, qo)], {"axis": 1})
    want = np.concatenate([tfl_requantize(a, 0.05, 10, 0.02, -5, np.int8), b], axis=1)
    np.testing.assert_array_equal(y, want)
    assert g.op_counts()["tosa.RESCALE"] == 1 and g.outputs[0].type.quant == qo


def test_concat_int16_copies_values_like_tflite() -> None:
    """TFLite's int16 concatenation copies stored values whatever the input scales (zero points must be 0)."""
    qo, qa = qp(3.0e-5, 0), qp(6.0e-5, 0)
    a = RNG.integers(-32768, 32768, (3, 2)).astype(np.int16)
    b = RNG.integers(-32768, 32768, (3, 4)).astype(np.int16)
    (y,), g = one_op("tfl.concatenation", [(a, qa), (b, qo)], {}, [(DType.INT16, qo)], {"axis": -1})
    np.testing.assert_array_equal(y, np.concatenate([a, b], axis=1))
    assert "tosa.RESCALE" not in g.op_counts() and g.outputs[0].type.quant == qo


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_pack_rescales_differing_inputs(dtype: Any) -> None:
    zp = 3 if dtype is np.int8 else 0
    qo, qa = qp(0.01, zp), qp(0.013, zp)
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max + 1, (2, 3)).astype(dtype)
    b = RNG.integers(info.min, info.max + 1, (2, 3)).astype(dtype)
    (y,), _ = one_op("tfl.pack", [(a, qa), (b, qo)], {}, [(dtype_from_numpy(dtype), qo)],
                     {"axis": 1, "values_count": 2})
    want = np.stack([tfl_requantize(a, 0.013, zp, 0.01, zp, dtype), b], axis=1)
    np.testing.assert_array_equal(y, want)


# ------------------------------------------------------------------ pad zero point / quantization pass-through
def test_pad_uses_output_zero_point_and_keeps_values() -> None:
    qi, qo = qp(0.02, -7), qp(0.03, 11)
    x = RNG.integers(-128, 128, (1, 2, 3, 1)).astype(np.int8)
    pads = np.array([[0, 0], [1, 0], [0, 2], [0, 0]], np.int32)
    (y,), g = one_op("tfl.pad", [(x, qi)], {1: pads}, [(DType.INT8, qo)])
    np.testing.assert_array_equal(y, np.pad(x, pads, constant_values=11))
    assert g.outputs[0].type.quant == qo


@pytest.mark.parametrize("opname,consts,attrs", [
    ("tfl.reshape", {1: np.array([3, 2], np.int32)}, {}),
    ("tfl.transpose", {1: np.array([1, 0], np.int32)}, {}),
    ("tfl.reshape", {1: np.array([2, 3], np.int32)}, {}),  # a no-op reshape: the operand itself is returned
])
def test_layout_result_takes_output_quantization(opname: str, consts: dict[int, np.ndarray],
                                                 attrs: dict[str, Any]) -> None:
    qi, qo = qp(0.02, -7), qp(0.05, 3)
    x = RNG.integers(-128, 128, (2, 3)).astype(np.int8)
    (y,), g = one_op(opname, [(x, qi)], consts, [(DType.INT8, qo)], attrs)
    want = x.reshape(3, 2) if opname == "tfl.reshape" and consts[1][0] == 3 else x.T if opname == "tfl.transpose" else x
    np.testing.assert_array_equal(y, want)
    assert g.outputs[0].type.quant == qo


def test_cast_of_quantized_values_converts_stored_integers() -> None:
    """TFLite's cast ignores quantization: i8 values become i32 unchanged."""
    x = np.arange(-128, 128, dtype=np.int8).reshape(4, 64)
    (y,), _ = one_op("tfl.cast", [(x, qp(0.1, 4))], {}, [(DType.INT32, None)])
    np.testing.assert_array_equal(y, x.astype(np.int32))


# ------------------------------------------------------------------------------------------ int16 bilinear
@pytest.mark.parametrize("ih,iw,oh,ow,align,half", [
    (4, 5, 8, 10, False, True), (4, 5, 8, 12, False, False), (4, 5, 7, 9, True, False), (7, 9, 3, 4, False, True),
    (3, 3, 12, 12, False, True), (5, 3, 13, 2, False, False)])
def test_resize_bilinear_int16_matches_resize_bilinear_integer(ih: int, iw: int, oh: int, ow: int, align: bool,
                                                               half: bool) -> None:
    x = RNG.integers(-32768, 32768, (2, ih, iw, 3)).astype(np.int16)
    x[0, 0, 0, :] = [-32768, 32767, -1]
    q = qp(3.05e-5, 0)
    (y,), g = one_op("tfl.resize_bilinear", [(x, q)], {1: np.array([oh, ow], np.int32)}, [(DType.INT16, q)],
                     {"align_corners": align, "half_pixel_centers": half})
    np.testing.assert_array_equal(y, tfl_resize_bilinear_int(x, oh, ow, align, half))
    assert g.op_counts()["tosa.RESIZE"] == 2


@pytest.mark.parametrize("ih,iw,oh,ow,align,half", [
    (4, 5, 8, 10, False, True), (4, 5, 8, 12, False, False), (4, 5, 7, 9, True, False), (7, 9, 3, 4, False, True)])
def test_resize_bilinear_int8_matches_resize_bilinear_integer(ih: int, iw: int, oh: int, ow: int, align: bool,
                                                              half: bool) -> None:
    """int8: the half-away-from-zero division by 2^20 ends in one RESCALE to i8 (no rounding shift + CAST), still
    ResizeBilinearInteger's result, negative ties and the int8 extremes included."""
    x = RNG.integers(-128, 128, (2, ih, iw, 3)).astype(np.int8)
    x[0, 0, 0, :] = [-128, 127, -1]
    x[1, :2, :2, :] = -1  # negative ties of the ×2 half-pixel weights
    q = qp(0.03, 0)
    (y,), g = one_op("tfl.resize_bilinear", [(x, q)], {1: np.array([oh, ow], np.int32)}, [(DType.INT8, q)],
                     {"align_corners": align, "half_pixel_centers": half})
    np.testing.assert_array_equal(y, tfl_resize_bilinear_int(x, oh, ow, align, half))
    counts = g.op_counts()
    assert counts.get("tosa.CAST", 0) == 0 and counts["tosa.RESCALE"] == 1, counts


def test_resize_bilinear_int16_negative_ties_occur() -> None:
    """×2 half-pixel weights are multiples of 2^16, so v/2^20 often ends in exactly ½: a half-up RESCALE alone
    would be one LSB high on every negative tie."""
    x = RNG.integers(-32768, 32768, (1, 4, 5, 3)).astype(np.int16)
    acc = bilinear_sums(x, 8, 10, False, True)
    neg_ties = (acc < 0) & (acc % (1 << 20) == 1 << 19)
    assert np.count_nonzero(neg_ties) > 0
    half_up = (acc + (1 << 19)) >> 20
    ref = tfl_resize_bilinear_int(x, 8, 10, False, True)
    assert np.array_equal(half_up != ref, neg_ties)
    q = qp(1e-4, 0)
    (y,), _ = one_op("tfl.resize_bilinear", [(x, q)], {1: np.array([8, 10], np.int32)}, [(DType.INT16, q)],
                     {"half_pixel_centers": True})
    np.testing.assert_array_equal(y, ref)


# ------------------------------------------------------------------------------ LiteRT BUILTIN_REF oracles
def _litert_outputs(buf: bytes, xs: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    pytest.importorskip("ai_edge_litert")
    import tf2tosa
    from tf2tosa.verify.litert import run_tflite_many

    m = tf2tosa.convert(buf)
    name = m.graph.inputs[0].source or m.graph.inputs[0].name
    refs = [list(r.values())[0] for r in run_tflite_many(buf, [{name: x} for x in xs], reference_kernels=True)]
    ours = [list(m.run({m.graph.inputs[0].name: x}).values())[0] for x in xs]
    return refs, ours


def _model_quant(buf: bytes, dtype: DType) -> QuantParams:
    """The quantization of the first quantized ``dtype`` value of the converted model."""
    import tf2tosa

    q = next(v for v in tf2tosa.convert(buf).graph.values() if v.dtype is dtype and v.type.quant is not None).type.quant
    assert q is not None
    return q


def _chunks(x: np.ndarray, shape: tuple[int, ...]) -> list[np.ndarray]:
    n = int(np.prod(shape))
    pad = (-len(x)) % n
    x = np.concatenate([x, np.zeros(pad, x.dtype)])
    return [x[i:i + n].reshape(shape) for i in range(0, len(x), n)]


def test_quantize_int16_vs_litert_at_thresholds() -> None:
    """int16x8 reshape model: QUANTIZE(fp32 → i16) → RESHAPE → DEQUANTIZE.  Equal floats out ⇔ equal i16."""
    pytest.importorskip("tensorflow")
    import modelgen

    buf = modelgen.one_op_model("reshape", "int16x8")
    q = _model_quant(buf, DType.INT16)
    x = boundary_inputs(q.s, 0, np.int16, n_random=100)
    refs, ours = _litert_outputs(buf, _chunks(x, (1, 4, 4, 3)))
    for r, o in zip(refs, ours):
        np.testing.assert_array_equal(o.reshape(r.shape), r)


def test_quantize_int8_float_io_vs_litert_at_thresholds() -> None:
    """A full-integer model with float input/output: QUANTIZE(fp32 → i8) → op → DEQUANTIZE, zero point ≠ 0."""
    pytest.importorskip("tensorflow")
    import modelgen

    def build() -> bytes:
        tf = modelgen._tf()
        fn = tf.function(lambda x: tf.reverse(x, [1]), input_signature=[tf.TensorSpec((1, 64), tf.float32)])
        conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        data = [[RNG.uniform(-0.3, 1.0, (1, 64)).astype(F32)] for _ in range(8)]
        conv.representative_dataset = lambda: iter(data)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        return bytes(conv.convert())

    buf = modelgen.cached("rules_layout_q/quantize_int8_float_io", build, {})
    q = _model_quant(buf, DType.INT8)
    assert q.zp != 0
    x = boundary_inputs(q.s, q.zp, np.int8, n_random=100)
    refs, ours = _litert_outputs(buf, _chunks(x, (1, 64)))
    for r, o in zip(refs, ours):
        np.testing.assert_array_equal(o.reshape(r.shape), r)


@pytest.mark.parametrize("name", ["resize_bilinear/half_pixel_centers", "resize_bilinear", "resize_bilinear/downscale"])
def test_resize_bilinear_int16_vs_litert(name: str) -> None:
    """int16x8 resize models fed with exactly representable i16 values over the whole range (many ties)."""
    pytest.importorskip("tensorflow")
    import modelgen

    import tf2tosa

    buf = modelgen.one_op_model(name, "int16x8")
    q = _model_quant(buf, DType.INT16)
    shape = tuple(int(d) for d in tf2tosa.convert(buf).graph.inputs[0].shape)
    xs = [(RNG.integers(-32768, 32768, shape) * float(F32(q.s))).astype(F32) for _ in range(4)]
    refs, ours = _litert_outputs(buf, xs)
    for r, o in zip(refs, ours):
        np.testing.assert_array_equal(o.reshape(r.shape), r)


# ------------------------------------------------- layout ops outside ONE_OP_MODELS, quantized, whole chain
def _extra_quantized() -> dict[str, tuple[Any, list[Any]]]:
    """name -> (tf function, input specs) for quantized layout models that tests/modelgen.py does not build."""
    tf = pytest.importorskip("tensorflow")
    return {
        "gather_nd": (lambda x: tf.gather_nd(x, [[1, 2], [0, 3], [1, 0]]), [(2, 4, 3)]),
        "reverse_v2": (lambda x: tf.reverse(x, [1]), [(1, 3, 4, 2)]),
        "space_to_batch_nd": (lambda x: tf.space_to_batch_nd(x, [2, 2], [[1, 1], [0, 2]]), [(1, 4, 4, 3)]),
        "batch_to_space_nd": (lambda x: tf.batch_to_space(x, [2, 2], [[0, 1], [1, 0]]), [(4, 3, 3, 2)]),
        "strided_slice/ellipsis_newaxis": (lambda x: x[..., tf.newaxis, 1:3, ::-2], [(2, 3, 4, 5)]),
        "mirror_pad/rank3": (lambda x: tf.pad(x, [[1, 1], [0, 2], [2, 0]], mode="SYMMETRIC"), [(2, 3, 4)]),
    }


@pytest.mark.parametrize("quant", ["int8", "int16x8"])
@pytest.mark.parametrize("name", ["gather_nd", "reverse_v2", "space_to_batch_nd", "batch_to_space_nd",
                                  "strided_slice/ellipsis_newaxis", "mirror_pad/rank3"])
def test_extra_layout_models_quantized_e2e(name: str, quant: str) -> None:
    pytest.importorskip("ai_edge_litert")
    import modelgen
    from e2e import check_tflite

    fn, specs = _extra_quantized()[name]
    buf = modelgen.cached(f"rules_layout_q/{name}/{quant}", lambda: modelgen.convert(fn, specs, quant=quant), {},
                          extra=(_extra_quantized,), key=(name, quant))
    check_tflite(f"{name}/{quant}", buf, reference_kernels=True)
