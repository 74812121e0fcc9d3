"""tf2tosa.quant: scales, RESCALE, TABLE, activation bounds and uint8 boundaries vs independent formulas and LiteRT.

The TFLite reference formulas below are written from scratch in this file (exact rational arithmetic for
QuantizeMultiplier; gemmlowp's SaturatingRoundingDoublingHighMul + RoundingDivideByPOT for the int32
MultiplyByQuantizedMultiplier; the int64 variant with its 16-bit reduced multiplier) and compared with what
:mod:`tf2tosa.quant` builds, run through the executor.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from tf2tosa.converter.passes.unsigned_io import legalize_unsigned_io
from tf2tosa.errors import Unsupported
from tf2tosa.executor import run
from tf2tosa.ir import DType, Graph, QuantParams, TensorType, Value
from tf2tosa.quant import (
    activation_bounds,
    apply_table_i8,
    apply_table_i16,
    compute_scale_16,
    compute_scale_32,
    fused_activation_q,
    quantize_multiplier_arrays,
    requantize,
    rescale,
    rescale_to_i32,
    rounding_mode,
    table_i8,
    table_i16,
)
from tf2tosa.quant.rescale import max_input_magnitude
from tf2tosa.quant.scale import product_scale
from tf2tosa.tosa.builder import Builder
from tf2tosa.tosa.context import LegalizeContext

RNG = np.random.default_rng(20240611)


# ------------------------------------------------------------------------------------------------ references
def ref_quantize_multiplier(d: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier in exact rationals: (q, e) with d ≈ q·2^(e-31); flush e < -31 to (0, 0)."""
    if d == 0:
        return 0, 0
    f, e = Fraction(d), 0
    while f >= 1:
        f /= 2
        e += 1
    while f < Fraction(1, 2):
        f *= 2
        e -= 1
    q = math.floor(f * 2**31 + Fraction(1, 2))  # std::round of a positive value
    if q == 2**31:
        q //= 2
        e += 1
    if e < -31:
        return 0, 0
    return q, e


def ref_tosa_pair(d: float) -> tuple[int, int]:
    q, e = ref_quantize_multiplier(d)
    return (0, 62) if q == 0 else (q, 31 - e)


def ref_mbqm32(x: np.ndarray, qm: Any, shift: Any) -> np.ndarray:
    """gemmlowp-style MultiplyByQuantizedMultiplier(int32 x, q, shift): SRDHM(x << ls, q) then RDBPOT(rs)."""
    x = np.asarray(x, np.int64)
    qm = np.asarray(qm, np.int64)
    shift = np.asarray(shift, np.int64)
    ls = np.maximum(shift, 0)
    rs = np.maximum(-shift, 0)
    a = x * (np.int64(1) << ls)
    assert np.all((a >= -(2**31)) & (a < 2**31)), "left-shifted input overflows int32"
    ab = a * qm
    t = ab + np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    hi = np.where(t >= 0, t >> 31, -((-t) >> 31))  # C++ truncating division by 2^31
    mask = (np.int64(1) << rs) - 1
    rem = hi & mask
    thr = (mask >> 1) + (hi < 0)
    out: np.ndarray = (hi >> rs) + (rem > thr)
    return out


def ref_mbqm64(x: np.ndarray, qm: int, shift: int) -> np.ndarray:
    """TFLite's int64 MultiplyByQuantizedMultiplier (int16×8 kernels): 16-bit reduced multiplier, one rounding."""
    reduced = (qm + (1 << 15)) >> 16 if qm < 0x7FFF0000 else 0x7FFF
    total = 15 - shift
    out: np.ndarray = (np.asarray(x, np.int64) * reduced + (np.int64(1) << (total - 1))) >> total
    return out


def graph_with_input(shape: tuple[int, ...], dtype: DType, quant: QuantParams | None = None,
                     rounding: str = "double") -> tuple[Graph, Builder, Value]:
    g = Graph()
    x = g.add_input("x", TensorType(shape, dtype, quant))
    b = Builder(g, location="test", context=LegalizeContext(rounding=rounding))
    return g, b, x


# ---------------------------------------------------------------------------------------------- scale pairs
@pytest.mark.parametrize("scale,expected", [
    (1.0, (1 << 30, 30)),                 # S9786: scale 1.0 is (1<<30, 30)
    (1.5, (3 << 29, 30)),                 # 0.75·2^1
    (3.9, (2093796557, 29)),              # 0.975·2^31 = 2093796556.8 → round up, e = 2
    (0.5, (1 << 30, 31)),
    (2.0 ** -20, (1 << 30, 50)),
    (2.0 ** -32, (1 << 30, 62)),          # smallest exponent TFLite keeps; shift 62 is still legal
    (2.0 ** -33, (0, 62)),                # TFLite flushes (exponent -32 < -31): multiplier 0
    (2.0 ** -40, (0, 62)),
    (1e-9, (1152921505, 60)),             # 1e-9 = 0.536870912·2^-29 → round(0.536870912·2^31)
    (0.0, (0, 62)),
    (0.5 + 2.0 ** -32, ((1 << 30) + 1, 31)),  # m·2^31 = 2^30 + 0.5: std::round goes up, Python's round wouldn't
    (1.0 - 2.0 ** -40, (1 << 30, 30)),        # rounds to 2^31: renormalised to (2^30, e+1), i.e. scale 1.0
])
def test_compute_scale_32_golden(scale: float, expected: tuple[int, int]) -> None:
    assert compute_scale_32(scale) == expected
    assert ref_tosa_pair(scale) == expected


def test_compute_scale_32_vs_reference_random() -> None:
    scales = np.concatenate([10.0 ** RNG.uniform(-11, 8.7, 3000), 2.0 ** RNG.integers(-40, 29, 200).astype(float)])
    for s in scales:
        s = float(s)
        if ref_tosa_pair(s)[1] < 2:
            with pytest.raises(Unsupported):
                compute_scale_32(s)
            continue
        m, sh = compute_scale_32(s)
        assert (m, sh) == ref_tosa_pair(s), s
        assert 2 <= sh <= 62 and 0 <= m < 2**31
        if m:
            assert abs(m * 2.0 ** -sh - s) <= s * 2.0 ** -30


@pytest.mark.parametrize("bad", [2.0 ** 29, 1e12, -0.5, float("nan"), float("inf")])
def test_compute_scale_32_rejects(bad: float) -> None:
    with pytest.raises(Unsupported):
        compute_scale_32(bad)


def test_compute_scale_32_largest_legal() -> None:
    s = 2.0 ** 29 * (1 - 2.0 ** -20)  # e = 29 → shift 2
    assert compute_scale_32(s)[1] == 2
    with pytest.raises(Unsupported):  # rounds up to 2^31 → e = 30 → shift 1
        compute_scale_32(2.0 ** 29 * (1 - 2.0 ** -40))


def test_compute_scale_16() -> None:
    assert compute_scale_16(1.0) == (1 << 14, 14)  # S9786
    assert compute_scale_16(0.5) == (1 << 14, 15)
    assert compute_scale_16(0.0) == (0, 62)
    with pytest.raises(Unsupported):
        compute_scale_16(2.0 ** 13)
    for s in 10.0 ** RNG.uniform(-9, 3.5, 2000):
        q, e = ref_quantize_multiplier(float(s))
        m16, sh = compute_scale_16(float(s))
        if q == 0:
            assert (m16, sh) == (0, 62)
            continue
        assert m16 == ((q + (1 << 15)) >> 16 if q < 0x7FFF0000 else 0x7FFF)
        assert sh == 15 - e and 2 <= sh <= 62 and 0 < m16 < 2**15


def test_per_channel_arrays_mixed_magnitudes() -> None:
    scales = [1e-6, 3.3e-5, 0.01, 0.3, 0.999999, 1.0, 2.5, 10.0, 2.0 ** -36, 0.0]
    m, s = quantize_multiplier_arrays(scales, True)
    assert m.dtype == np.int32 and s.dtype == np.int8
    assert [(int(a), int(b)) for a, b in zip(m, s)] == [ref_tosa_pair(x) for x in scales]
    m16, s16 = quantize_multiplier_arrays(scales, False)
    assert m16.dtype == np.int16 and s16.dtype == np.int8
    assert [(int(a), int(b)) for a, b in zip(m16, s16)] == [compute_scale_16(x) for x in scales]


def test_product_scale_float32_vs_double() -> None:
    si, sw, so = 0.0235, 0.00314, 0.0471
    a = product_scale(si, sw, so, float32_product=True)
    b = product_scale(si, sw, so, float32_product=False)
    assert a == float(np.float32(si) * np.float32(sw)) / float(np.float32(so))
    assert b == float(np.float32(si)) * float(np.float32(sw)) / float(np.float32(so))


# ------------------------------------------------------------------------------------- RESCALE vs TFLite
def _run_rescale(x_arr: np.ndarray, in_dtype: DType, scale: Any, out_dtype: DType, rounding: str = "double",
                 **kw: Any) -> tuple[np.ndarray, Graph]:
    g, b, x = graph_with_input(x_arr.shape, in_dtype, rounding=rounding)
    y = rescale(b, x, scale, out_dtype, **kw)
    g.outputs = [y]
    return next(iter(run(g, {"x": x_arr}).values())), g


def _per_channel_case(scales: np.ndarray, rows: int, lim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.where(RNG.random((rows, scales.size)) < 0.5, RNG.integers(-lim, lim + 1, (rows, scales.size)),
                 RNG.integers(-300, 301, (rows, scales.size))).astype(np.int32)
    pairs = [ref_quantize_multiplier(float(s)) for s in scales]
    q = np.array([p[0] for p in pairs], np.int64)
    e = np.array([p[1] for p in pairs], np.int64)
    return x, q, e


def test_rescale_double_round_matches_tflite_below_one() -> None:
    """100k values × 64 per-channel scales in [1e-6, 1): DOUBLE_ROUND == MultiplyByQuantizedMultiplier exactly;
    SINGLE_ROUND (round half up once) differs on a few percent."""
    scales = np.concatenate([10.0 ** RNG.uniform(-6, -1e-3, 56), 2.0 ** -np.arange(1, 9)])
    x, q, e = _per_channel_case(scales, 1563, 2**20)
    ref = ref_mbqm32(x, q[None, :], e[None, :])
    got, g = _run_rescale(x, DType.INT32, scales, DType.INT32)
    (op,) = [o for o in g.ops.values() if o.name == "tosa.RESCALE"]
    assert op.attrs["rounding_mode"] == "DOUBLE_ROUND" and op.attrs["per_channel"] and op.attrs["scale32"]
    assert x.size >= 100_000
    assert int(np.count_nonzero(got != ref)) == 0
    single, g1 = _run_rescale(x, DType.INT32, scales, DType.INT32, rounding="single")
    assert [o.attrs["rounding_mode"] for o in g1.ops.values() if o.name == "tosa.RESCALE"] == ["SINGLE_ROUND"]
    bad = int(np.count_nonzero(single != ref))
    pct = 100.0 * bad / x.size
    print(f"SINGLE_ROUND vs TFLite: {bad}/{x.size} = {pct:.2f}% mismatches (all 1 LSB)")
    assert int(np.abs(single.astype(np.int64) - ref).max()) == 1
    assert 0.5 < pct < 10.0


def test_rescale_scales_at_least_one() -> None:
    """Scales in [1, 1000): both rounding modes are one rounding (shift <= 31); they match TFLite except at exact
    negative ties, which TFLite rounds away from zero and RESCALE rounds up (none occur with random scales)."""
    scales = 10.0 ** RNG.uniform(0, 3, 32)
    x, q, e = _per_channel_case(scales, 3200, 2**19)
    ref = ref_mbqm32(x, q[None, :], e[None, :])
    got, _ = _run_rescale(x, DType.INT32, scales, DType.INT32)
    assert int(np.count_nonzero(got != ref)) == 0


def test_rescale_exact_ties_scale_at_least_one() -> None:
    """Scale 1.5 makes every odd input an exact tie.  With shift <= 31 both TFLite (SRDHM: nudge 2^30 or 1 - 2^30,
    then truncating division) and RESCALE round ties toward +inf: -1.5 → -1, 1.5 → 2."""
    x = np.arange(-1001, 1002, dtype=np.int32)
    qm, e = ref_quantize_multiplier(1.5)
    ref = ref_mbqm32(x, qm, e)
    assert ref[x == -1][0] == -1 and ref[x == 1][0] == 2
    for rounding in ("double", "single"):
        got, _ = _run_rescale(x, DType.INT32, 1.5, DType.INT32, rounding=rounding)
        assert np.array_equal(got, ref)


def test_rescale_i8_requantize_exhaustive() -> None:
    """i8 → i8 with zero points: clamp(MBQM(x - zp_in) + zp_out) on all 256 inputs for several scales."""
    x = np.arange(-128, 128, dtype=np.int8)
    for scale, zi, zo in [(0.37, 5, -3), (1.0, -128, 0), (0.0039, 0, -128), (2.0 ** -7, 17, 100), (3.9, 0, 0)]:
        qm, e = ref_quantize_multiplier(scale)
        ref = np.clip(ref_mbqm32(x.astype(np.int64) - zi, qm, e) + zo, -128, 127)
        got, _ = _run_rescale(x, DType.INT8, scale, DType.INT8, in_zp=zi, out_zp=zo)
        assert np.array_equal(got, ref), scale


def test_rescale_16bit_multiplier_matches_tflite_int64() -> None:
    """scale32=False (the i48 path) equals TFLite's int64 MBQM with its reduced 16-bit multiplier."""
    x = RNG.integers(-(2**31), 2**31, 20000).astype(np.int64)
    for scale in [0.0123, 3.1e-5, 0.9999999, 2.0 ** -20]:
        qm, e = ref_quantize_multiplier(scale)
        ref = np.clip(ref_mbqm64(x, qm, e), -(2**31), 2**31 - 1)
        got, g = _run_rescale(x, DType.INT48, scale, DType.INT32)
        (op,) = [o for o in g.ops.values() if o.name == "tosa.RESCALE"]
        assert op.attrs["scale32"] is False and op.attrs["rounding_mode"] == "SINGLE_ROUND"
        assert np.array_equal(got, ref), scale


def test_rescale_options_and_errors() -> None:
    g, b, x = graph_with_input((4, 3), DType.INT8)
    assert rounding_mode(b) == "DOUBLE_ROUND" and rounding_mode(b, scale32=False) == "SINGLE_ROUND"
    assert rounding_mode(Builder(Graph())) == "DOUBLE_ROUND"  # no options: TFLite-exact default
    with pytest.raises(Unsupported):
        rescale(b, x, [0.1, 0.2], DType.INT8)  # 2 scales, 3 channels
    with pytest.raises(Unsupported):
        rescale(b, x, 0.5, DType.INT8, scale32=False, double_round=True)
    with pytest.raises(Unsupported):
        rescale(b, x, 0.5, DType.INT8, in_zp=200)
    y = rescale(b, x, 0.5, DType.INT8, double_round=False, out_quant=QuantParams((0.2,), (1,)))
    assert y.producer is not None and y.producer.attrs["rounding_mode"] == "SINGLE_ROUND"
    assert y.type.quant == QuantParams((0.2,), (1,))

    def mode(v: Value) -> str:
        assert v.producer is not None
        return str(v.producer.attrs["rounding_mode"])

    assert mode(rescale(b, x, 0.3, DType.INT8)) == "DOUBLE_ROUND"  # shift 32
    assert mode(rescale(b, x, 1.0, DType.INT32)) == "SINGLE_ROUND"  # shift 30: same result, no EXT-DOUBLEROUND
    assert mode(rescale(b, x, 0.7, DType.INT8)) == "SINGLE_ROUND"  # shift 31
    assert mode(rescale(b, x, 1.0, DType.INT32, double_round=True)) == "DOUBLE_ROUND"  # explicit request kept
    same = rescale(b, x, [0.25, 0.25, 0.25], DType.INT8)
    assert same.producer is not None and same.producer.attrs["per_channel"] is False
    mixed = rescale(b, x, [0.25, 0.5, 2.0], DType.INT8)
    assert mixed.producer is not None and mixed.producer.attrs["per_channel"] is True
    assert mode(mixed) == "DOUBLE_ROUND"  # one channel has shift 32
    assert max_input_magnitude(1.0) == 2**29 - 1 and max_input_magnitude(0.01) == 2**36 - 1


def test_rescale_to_i32_and_requantize() -> None:
    q_in = QuantParams((0.05,), (-7,))
    g, b, x = graph_with_input((256,), DType.INT8, q_in)
    acc = rescale_to_i32(b, x)
    q_out = QuantParams((0.11,), (9,))
    r = requantize(b, x, q_out)
    assert requantize(b, x, q_in) is x
    g.outputs = [acc, r]
    xa = np.arange(-128, 128, dtype=np.int8)
    out = list(run(g, {"x": xa}).values())
    assert np.array_equal(out[0], xa.astype(np.int32) + 7)
    qm, e = ref_quantize_multiplier(0.05 / 0.11)
    assert np.array_equal(out[1], np.clip(ref_mbqm32(xa.astype(np.int64) + 7, qm, e) + 9, -128, 127))


def test_rescale_unsigned_zero_points() -> None:
    """uint8 bits in i8: input_unsigned zero-extends value and zp (S10091-10093); u - 128 exactly."""
    u = np.arange(256, dtype=np.uint8)
    got, g = _run_rescale(u.view(np.int8), DType.INT8, 1.0, DType.INT8, in_zp=200, out_zp=72, input_unsigned=True)
    zps = [o.attrs["values"][0] for o in g.ops.values() if o.name == "tosa.CONST" and o.result.name.startswith("zp")]
    assert sorted(int(z) for z in zps) == [-56, 72]  # 200 stored as its i8 bit pattern
    assert np.array_equal(got.astype(np.int64), u.astype(np.int64) - 128)
    back, _ = _run_rescale(got, DType.INT8, 1.0, DType.INT8, in_zp=72, out_zp=200, output_unsigned=True)
    assert np.array_equal(back.view(np.uint8), u)


# ------------------------------------------------------------------------------------------------- tables
def sigmoid(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-x))
    return out


def test_table_i8_formula_and_executor() -> None:
    q_in, q_out = QuantParams((0.0625,), (-3,)), QuantParams((1 / 256,), (-128,))
    t = table_i8(sigmoid, q_in, q_out)
    assert t.dtype == np.int8 and t.shape == (256,)
    for i in (-128, -3, 0, 77, 127):
        y = 1 / (1 + math.exp(-(i + 3) * 0.0625)) * 256
        expect = max(-128, min(127, int(math.floor(y + 0.5)) - 128))
        assert int(t[i + 128]) == expect
    g, b, x = graph_with_input((256,), DType.INT8, q_in)
    g.outputs = [apply_table_i8(b, x, t, q_out)]
    xa = np.arange(-128, 128, dtype=np.int8)
    assert np.array_equal(next(iter(run(g, {"x": xa}).values())), t)


def test_table_i16_layout_and_interpolation() -> None:
    q_in, q_out = QuantParams((8.0 / 32768,), (0,)), QuantParams((1.0 / 32768,), (0,))
    t = table_i16(np.tanh, q_in, q_out)
    assert t.dtype == np.int16 and t.shape == (513,)
    assert t[256] == 0 and t[0] == -32768  # tanh(-8)·32768 = -32767.99 → -32768 (in range)
    assert t[512] == 32767  # tanh(8)·32768 = 32767.99 → 32768 clipped (S862)
    g, b, x = graph_with_input((2001,), DType.INT16, q_in)
    g.outputs = [apply_table_i16(b, x, t, q_out)]
    xa = np.linspace(-32768, 32767, 2001).astype(np.int16)
    got = next(iter(run(g, {"x": xa}).values()))
    assert got.dtype == np.int16
    assert np.abs(got.astype(float) - np.tanh(xa * q_in.s) / q_out.s).max() < 40  # 9.7 interpolation of tanh


def _all_256(model: bytes, reference_kernels: bool) -> np.ndarray:
    from tf2tosa.converter.tflite import load_tflite
    from tf2tosa.verify.litert import run_tflite_many

    g = load_tflite(model)
    shape = tuple(int(d) for d in g.inputs[0].shape)
    n = int(np.prod(shape))
    sets = np.resize(np.arange(-128, 128, dtype=np.int8), -(-256 // n) * n).reshape(-1, *shape)
    res = run_tflite_many(model, [[a] for a in sets], reference_kernels=reference_kernels)
    return np.concatenate([next(iter(r.values())).reshape(-1) for r in res])[:256]


@pytest.mark.parametrize("name,fn", [("logistic", sigmoid), ("tanh", np.tanh)])
def test_table_i8_vs_litert(name: str, fn: Any) -> None:
    """TFLite's int8 LOGISTIC/TANH on all 256 inputs vs our real-domain table (float64 and float32 variants)."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("ai_edge_litert")
    from tests.modelgen import ONE_OP_MODELS
    from tf2tosa.converter.tflite import load_tflite

    model = ONE_OP_MODELS[name](quant="int8")
    g = load_tflite(model)
    q_in, q_out = g.inputs[0].type.quant, g.outputs[0].type.quant
    assert q_in is not None and q_out is not None
    ref = _all_256(model, reference_kernels=True)
    opt = _all_256(model, reference_kernels=False)
    ours = table_i8(fn, q_in, q_out)
    ours32 = table_i8(fn, q_in, q_out, precision="float32")
    print(f"{name}: table vs BUILTIN_REF {int(np.count_nonzero(ours != ref))}/256, vs optimized "
          f"{int(np.count_nonzero(ours != opt))}/256, float32 LUT vs REF {int(np.count_nonzero(ours32 != ref))}/256")
    assert np.array_equal(ours, ref)
    assert np.array_equal(ours32, ref)
    assert np.array_equal(ref, opt)


# ------------------------------------------------------------------------------------- fused activations
@pytest.mark.parametrize("act,scale,zp,dtype,expected", [
    ("RELU6", 0.1, 3, DType.INT8, (3, 63)),
    ("RELU6", 6 / 255, -128, DType.INT8, (-128, 127)),       # 6/s = 255: whole range
    ("RELU6", 0.05, 10, DType.INT8, (10, 127)),               # 10 + 120 clamped to qmax
    ("RELU6", 0.07, -5, DType.INT8, (-5, 81)),                # 85.71 → 86
    ("RELU6", 0.0235, 0, DType.INT16, (0, 255)),              # 255.32 → 255
    ("RELU6", 0.5, 200, DType.INT8, (127, 127)),              # zero above qmax: TFLite's min(max(v,lo),hi) = hi
    ("RELU", 0.1, -20, DType.INT8, (-20, 127)),
    ("RELU_N1_TO_1", 0.4, 0, DType.INT8, (-3, 3)),            # 1/0.4f = 2.5 in float32 → 3 (float64 gives 2)
    ("RELU_N1_TO_1", 4.0, 1, DType.INT8, (1, 1)),             # ±0.25 → 0: both bounds at the zp
    ("RELU_0_TO_1", 1 / 100, -50, DType.INT8, (-50, 50)),
    ("RELU6", 0.1, 128, DType.UINT8, (128, 188)),
])
def test_activation_bounds(act: str, scale: float, zp: int, dtype: DType, expected: tuple[int, int]) -> None:
    assert activation_bounds(act, QuantParams((scale,), (zp,)), dtype) == expected


def test_activation_bounds_none_and_unsupported() -> None:
    q = QuantParams((0.1,), (0,))
    assert activation_bounds(None, q, DType.INT8) is None
    assert activation_bounds("NONE", q, DType.INT8) is None
    with pytest.raises(Unsupported):
        activation_bounds("SIGN_BIT", q, DType.INT8)


def test_fused_activation_q() -> None:
    q = QuantParams((0.1,), (3,))
    g, b, x = graph_with_input((256,), DType.INT8, q)
    assert fused_activation_q(b, x, None, q) is x
    full = QuantParams((6 / 255,), (-128,))
    assert fused_activation_q(b, x, "RELU6", full) is x  # bounds span the type: no CLAMP
    r6 = fused_activation_q(b, x, "RELU6", q)
    th = fused_activation_q(b, x, "TANH", q)
    g.outputs = [r6, th]
    xa = np.arange(-128, 128, dtype=np.int8)
    out = list(run(g, {"x": xa}).values())
    assert np.array_equal(out[0], np.clip(xa, 3, 63))
    assert np.array_equal(out[1], table_i8(np.tanh, q, q)[xa.astype(np.int64) + 128])
    g16, b16, x16 = graph_with_input((64,), DType.INT16, QuantParams((1 / 4096,), (0,)))
    q16 = QuantParams((1 / 4096,), (0,))
    g16.outputs = [fused_activation_q(b16, x16, "TANH", q16), fused_activation_q(b16, x16, "RELU_N1_TO_1", q16)]
    xa16 = np.linspace(-32768, 32767, 64).astype(np.int16)
    o16 = list(run(g16, {"x": xa16}).values())
    assert np.abs(o16[0] / 4096.0 - np.tanh(xa16 / 4096.0)).max() < 2e-3
    assert np.array_equal(o16[1], np.clip(xa16, -4096, 4096))


# ------------------------------------------------------------------------------------------ uint8 boundary
def test_unsigned_io_passthrough_and_constants() -> None:
    """A uint8 input feeding a uint8 output directly, and a uint8 constant remapped to i8 (u - 128)."""
    g = Graph()
    q = QuantParams((0.5,), (100,))
    x = g.add_input("img", TensorType((2, 128), DType.UINT8, q))
    x.source = "img"
    c = g.add_const(np.array([0, 128, 255], np.uint8), DType.UINT8, name="c", op_name="tfl.const", quant=q)
    g.outputs = [x]
    legalize_unsigned_io(g, None)
    assert x.dtype is DType.INT8 and x.type.quant == QuantParams((0.5,), (-28,))
    assert c.dtype is DType.INT8 and c.type.quant == QuantParams((0.5,), (-28,))
    assert list(np.asarray(c.producer.attrs["values"])) == [-128, 0, 127]  # type: ignore[union-attr]
    out = g.outputs[0]
    assert g.record.unsigned_io == ["img", out.name] and out.name == "img_1"
    ops = [o for o in g.topological_order() if o.name == "tosa.RESCALE"]
    assert [(o.attrs["input_unsigned"], o.attrs["output_unsigned"]) for o in ops] == [(True, False), (False, True)]
    g.remove_dead_ops()  # the (unused) tfl.const has no executor kernel
    u = np.arange(256, dtype=np.uint8).reshape(2, 128)
    got = next(iter(run(g, {"img": u.view(np.int8)}).values()))
    assert np.array_equal(got.view(np.uint8), u)
    trace = run(g, {"img": u.view(np.int8)}, trace=True)
    assert np.array_equal(trace[ops[0].result.name].astype(np.int64), u.astype(np.int64) - 128)


def test_unsigned_io_rejects_unquantized() -> None:
    from tf2tosa.errors import InvalidGraphError

    # a non-quantized uint8 input that reaches arithmetic (here tfl.add) has no int8 reading: refused
    g = Graph()
    raw = g.add_input("raw", TensorType((4,), DType.UINT8))
    g.outputs = [g.add_op("tfl.add", [raw, raw], [TensorType((4,), DType.UINT8)],
                          {"fused_activation_function": "NONE"}).result]
    with pytest.raises(InvalidGraphError):
        legalize_unsigned_io(g, None)
    # one that only moves (here: straight to the output, as TFLite's uint8 ring buffers do) is read as quantized
    # uint8 (scale 1, zero point 0), stored in i8 as u - 128
    g = Graph()
    g.outputs = [g.add_input("raw", TensorType((4,), DType.UINT8))]
    legalize_unsigned_io(g, None)
    assert g.inputs[0].dtype is DType.INT8 and g.inputs[0].name in g.unsigned_io


def _mini_legalize(g: Graph) -> None:
    """Lower tfl.quantize / tfl.logistic with this package's API only (the real rules live elsewhere)."""
    for op in g.topological_order():
        if not op.name.startswith("tfl.") or op.name == "tfl.const":
            continue
        b = Builder(g, location=op.name)
        x, r = op.operands[0], op.result
        assert r.type.quant is not None and x.type.quant is not None
        if op.name == "tfl.quantize":
            new = requantize(b, x, r.type.quant, r.dtype)
        elif op.name == "tfl.logistic":
            new = apply_table_i8(b, x, table_i8(sigmoid, x.type.quant, r.type.quant), r.type.quant)
        else:
            raise AssertionError(op.name)
        if new is x:
            new = b.emit("IDENTITY", [x], quant=x.type.quant).result
        new.source = r.source
        g.replace_all_uses(r, new)
        g.remove_op(op)


def test_unsigned_io_model_vs_litert() -> None:
    """A TFLiteConverter model with inference_input/output_type=tf.uint8 (TF 2.21 allows it: it wraps the int8
    graph in tfl.quantize u8→i8 / i8→u8): our boundary + API-lowered body vs LiteRT on all 256 input values."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("ai_edge_litert")
    from tests.modelgen import ONE_OP_MODELS
    from tf2tosa.converter.tflite import load_tflite
    from tf2tosa.verify.litert import run_tflite_many

    model = ONE_OP_MODELS["logistic"](quant="uint8io")
    g = load_tflite(model)
    assert g.inputs[0].dtype is DType.UINT8 and g.outputs[0].dtype is DType.UINT8
    out_src = g.outputs[0].source
    legalize_unsigned_io(g, None)
    assert g.inputs[0].dtype is DType.INT8 and g.outputs[0].dtype is DType.INT8
    assert set(g.record.unsigned_io) == {g.inputs[0].name, g.outputs[0].name}
    assert g.outputs[0].source == out_src
    _mini_legalize(g)
    shape = tuple(int(d) for d in g.inputs[0].shape)
    n = int(np.prod(shape))
    sets = np.resize(np.arange(256, dtype=np.uint8), -(-256 // n) * n).reshape(-1, *shape)
    refs = run_tflite_many(model, [[a] for a in sets], reference_kernels=True)
    for a, r in zip(sets, refs):
        ours = next(iter(run(g, {g.inputs[0].name: a.view(np.int8)}).values())).view(np.uint8)
        ref = next(iter(r.values()))
        assert ref.dtype == np.uint8
        assert np.array_equal(ours.reshape(ref.shape), ref)


def test_unsigned_io_full_conversion() -> None:
    """Through tf2tosa.convert, once the quantized rules exist (skipped until then)."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("ai_edge_litert")
    import tf2tosa
    from tests.modelgen import ONE_OP_MODELS

    model = ONE_OP_MODELS["logistic"](quant="uint8io")
    m = tf2tosa.convert(model)
    g = m.graph
    assert set(g.record.unsigned_io) == {g.inputs[0].name, g.outputs[0].name}
    u = np.arange(48, dtype=np.uint8).reshape(tuple(int(d) for d in g.inputs[0].shape)) * 5
    from tf2tosa.verify.litert import run_tflite

    ref = next(iter(run_tflite(model, [u], reference_kernels=True).values()))
    ours = next(iter(m.run({g.inputs[0].name: u.view(np.int8)}).values())).view(np.uint8)
    assert np.array_equal(ours.reshape(ref.shape), ref)


def _inv_sqrt_scalar(value: int) -> tuple[int, int]:
    """GetInvSqrtQuantizedMultiplierExp(value, kReverseShift) in Python integers, one value at a time, as TFLite's
    C++ writes it (the ``while`` loop, the five Newton steps on gemmlowp fixed-point in Q3): the oracle of the
    vectorised version."""
    def mulhi(a: int, b: int) -> int:  # SaturatingRoundingDoublingHighMul (a = b = INT32_MIN cannot occur here)
        ab = a * b
        n = ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30))
        return abs(n) // (1 << 31) * (1 if n >= 0 else -1)

    def wrap(a: int) -> int:
        return (a + (1 << 31)) % (1 << 32) - (1 << 31)

    def shl_sat(a: int, k: int) -> int:  # SaturatingRoundingMultiplyByPOT, k > 0
        lim = (1 << (31 - k)) - 1
        return 2**31 - 1 if a > lim else -2**31 if a < -lim else wrap(a << k)

    if value <= 1:
        return 2**31 - 1, 0
    shift = 11
    while value >= (1 << 29):
        value //= 4
        shift += 1
    pairs = (32 - value.bit_length() - 1) // 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    fixed = value >> 1
    half = (fixed >> 1) + ((fixed & 1) > 0)  # RoundingDivideByPOT(fixed, 1) of a non-negative value
    x = 1 << 28
    for _ in range(5):
        x3 = shl_sat(mulhi(mulhi(x, x), x), 6)
        x = shl_sat(wrap(mulhi((1 << 28) + (1 << 27), x) - mulhi(half, x3)), 3)
    x = mulhi(x, 1518500250)
    if shift < 0:
        x <<= -shift
        shift = 0
    return x, -shift


def test_inv_sqrt_multiplier_vectorised_matches_scalar() -> None:
    """The array form of GetInvSqrtQuantizedMultiplierExp (one call per int8 RSQRT table instead of one per code)
    gives the scalar C++ transcription's (multiplier, shift) on every int8 table value and on 3,000 int32 values,
    the /4 step's edges included."""
    from tf2tosa.quant import tflite_reference as R

    rng = np.random.default_rng(7)
    values = [*range(0, 600), *(int(v) for v in rng.integers(600, 2**31 - 1, 3000)),
              2**29 - 1, 2**29, 2**30, 2**31 - 1]
    m, sh = R.inv_sqrt_quantized_multiplier_exp(np.asarray(values))
    got = [(int(a), int(b)) for a, b in zip(m, sh)]
    assert got == [_inv_sqrt_scalar(v) for v in values]


def test_add_sub_search_is_shared_between_equal_quantizations() -> None:
    """int8 ADD/SUB: the 65,536-pair search for one-RESCALE input stages depends on the quantizations only, so it
    runs once per distinct (input, input, output) quantization (DenseNet121 int8: 62 ADDs, 13 searches; conversion
    0.54 -> 0.43 s, same bytes).  The shared answer is the search's own, and it reproduces TFLite's ADD on every
    code pair (the search checks them all; tests/test_ops_e2e_int.py compares whole int8 ADDs with LiteRT)."""
    from tf2tosa.quant import elementwise as E

    E._add_sub_singles.cache_clear()
    args = ((0.05, 3), (0.02, -7), (0.06, 1), (-128, 127), False, "DOUBLE_ROUND")
    first = E._add_sub_singles(*args)
    assert E._add_sub_singles(*args) == first and E._add_sub_singles.cache_info().hits == 1
    assert first == E._add_sub_singles.__wrapped__(*args)
    other = ((0.05, 3), (0.02, -7), (0.06, 2), (-128, 127), False, "DOUBLE_ROUND")  # another output zero point
    E._add_sub_singles(*other)
    assert E._add_sub_singles.cache_info().misses == 2
    assert E._add_sub_singles((0.05, 3), (0.02, -7), (0.06, 1), (-128, 127), False, "SINGLE_ROUND") == (None, None)


def test_f32_div_overflow_is_inf_without_numpy_warnings() -> None:
    """A fuzzed scale of 1e-45 (a float32 denormal) overflows TFLite's float32 division to inf: the callers' scale
    checks refuse it with their own message, so no numpy RuntimeWarning may reach the user first."""
    import warnings

    from tf2tosa.quant.elementwise import f32_div

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f32_div(1.0, 1e-45) == math.inf
        assert f32_div(1.0, 0.0) == math.inf
        assert math.isnan(f32_div(0.0, 0.0))
        assert f32_div(3.0, 2.0) == 1.5
