"""TFLite's reference integer kernels (LiteRT ``BUILTIN_REF``) re-implemented in numpy, written from their formulas.

The quantized rules use these to build lookup tables that are exact by construction: an int8 elementwise op is a
function of one of 256 codes (a ``TABLE`` i8), an int8 binary op of one of 65536 code pairs (a
``GATHER``), and TFLite's int16 LUT kernels are exactly TOSA's interpolating i16 ``TABLE`` (spec: TABLE).  The same
formulas serve as oracles in the tests.

Integer arithmetic runs on int64 arrays holding int32 values; C's wrapping int32 arithmetic is reproduced with
:func:`wrap32`.  Float arithmetic that TFLite does in ``float`` is done in float32 here.

Primitives (gemmlowp ``fixedpoint.h`` and TFLite ``common.h``, outside the seeds):

* ``srdhm`` — SaturatingRoundingDoublingHighMul: ``(a·b + nudge) / 2^31`` truncating, ``nudge = 2^30`` for
  ``a·b >= 0`` else ``1 - 2^30``; that is round-half-up of ``a·b / 2^31`` for both signs, i.e. TOSA ``MUL`` with
  ``shift = 31`` (spec: MUL) except for ``a = b = INT32_MIN`` (saturates to INT32_MAX).
* ``rdbpot`` — RoundingDivideByPOT: ``x / 2^e`` rounded half away from zero.
* ``mbqm`` — MultiplyByQuantizedMultiplier: ``rdbpot(srdhm(x·2^max(s,0), q), max(-s,0))``, which is RESCALE with
  multiplier ``q`` and shift ``31 - s`` under DOUBLE_ROUND (spec: apply_scale_32; op_inventory §5.2, §7).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..quant.scale import quantize_multiplier

I32_MIN = -(1 << 31)
I32_MAX = (1 << 31) - 1
I16_MIN, I16_MAX = -32768, 32767

Arr = np.ndarray


def i64(x: Any) -> Arr:
    return np.asarray(x, dtype=np.int64)


def wrap32(x: Any) -> Arr:
    """Two's-complement wrap of int64 values to the int32 range (C's wrapping int32 arithmetic)."""
    return ((i64(x) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def f32(x: Any) -> np.float32:
    return np.float32(x)


# ----------------------------------------------------------------------------------------- gemmlowp scalars
def trunc_div(n: Arr, d: int) -> Arr:
    """C integer division (truncation toward zero) by a positive ``d``."""
    n = i64(n)
    d = int(d)
    if d > 0 and d & (d - 1) == 0:  # 2^k: an arithmetic shift after adding 2^k - 1 to the negatives (no division pass)
        return (n + ((n >> 63) & (d - 1))) >> (d.bit_length() - 1)
    return np.sign(n) * (np.abs(n) // d)


def srdhm(a: Any, b: Any) -> Arr:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32."""
    a, b = i64(a), i64(b)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    r = trunc_div(ab + nudge, 1 << 31)
    if (a.ndim == 0 and a != I32_MIN) or (b.ndim == 0 and b != I32_MIN):
        return r  # the one saturating case, a = b = INT32_MIN, cannot occur
    return np.where((a == b) & (a == I32_MIN), I32_MAX, r)


def rdbpot(x: Any, e: Any) -> Arr:
    """gemmlowp RoundingDivideByPOT: ``x / 2^e`` rounded half away from zero (``e >= 0``)."""
    x, e = i64(x), i64(e)
    mask = (np.int64(1) << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (x < 0)
    return (x >> e) + (rem > thr)


def mbqm(x: Any, q: Any, shift: Any) -> Arr:
    """TFLite MultiplyByQuantizedMultiplier (double rounding) for int32 ``x``; ``shift`` is TFLite's (left > 0).
    ``q`` and ``shift`` may be arrays of per-element values."""
    if np.ndim(q) == 0 and np.ndim(shift) == 0 and int(q) != I32_MIN and -31 <= int(shift) <= 31:
        return _mbqm_scalar(x, int(q), int(shift))
    sh = i64(shift)
    return rdbpot(srdhm(wrap32(i64(x) << np.maximum(sh, 0)), q), np.maximum(-sh, 0))


def _mbqm_scalar(x: Any, q: int, shift: int, inplace: bool = False) -> Arr:
    """:func:`mbqm` by one multiplier ``q`` (not INT32_MIN) and one shift, in place on one int64 copy of ``x`` (the
    65,536 code pairs of an int8 ADD's exhaustive check run through it).  The same values, by two identities of the
    integer forms above (``tests/test_convert_fastpaths.py`` holds it to the general path and to exact rationals):

    * srdhm: ``trunc((a·q + nudge) / 2^31)`` is ``floor((a·q + 2^30) / 2^31)`` for both signs (for ``a·q < 0`` the
      truncation of the negative ``a·q + 1 - 2^30`` is the floor of ``a·q + 1 - 2^30 + 2^31 - 1``), and with
      ``q != INT32_MIN`` there is no saturating case;
    * rdbpot by ``e >= 1``: ``(x >> e) + (rem > thr)`` is ``(x + 2^(e-1) - [x < 0]) >> e`` (half away from zero).
    """
    # a copy (the passes below write into it), or ``x`` itself for a caller's own int64 array (``inplace``)
    v = x if inplace and isinstance(x, np.ndarray) and x.dtype == np.int64 and x.ndim else np.array(x, dtype=np.int64)
    if shift > 0:
        v <<= shift
    v += 1 << 31  # wrap32
    v &= 0xFFFFFFFF
    v -= 1 << 31
    v *= q  # srdhm: |a·q| <= 2^62
    v += 1 << 30
    v >>= 31
    e = -shift
    if e > 0:  # rdbpot
        neg = v >> 63  # -1 where v < 0
        v += neg
        v += 1 << (e - 1)
        v >>= e
    return v if v.ndim else v[()]


def sat_shl(x: Any, k: Any) -> Arr:
    """gemmlowp SaturatingRoundingMultiplyByPOT for a non-negative exponent (also the TFLite ``…Param`` form)."""
    x, k = i64(x), i64(k)
    thr = (np.int64(1) << (31 - k)) - 1
    r = wrap32(x << k)
    return np.where(x > thr, I32_MAX, np.where(x < -thr, I32_MIN, r))


def rescale_pot(x: Any, exponent: int) -> Arr:
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> (``Rescale`` between fixed-point formats)."""
    return sat_shl(x, exponent) if exponent > 0 else rdbpot(x, -exponent) if exponent < 0 else i64(x)


def rounding_half_sum(a: Any, b: Any) -> Arr:
    """gemmlowp RoundingHalfSum for int32: ``(a + b + sign) / 2`` in int64, truncating."""
    s = i64(a) + i64(b)
    return trunc_div(s + np.where(s >= 0, 1, -1), 2)


def clz32(x: Any) -> Arr:
    """Count leading zeros of the uint32 bit pattern (32 for 0), like TOSA CLZ."""
    u = (i64(x) & 0xFFFFFFFF).astype(np.float64)  # exact: < 2^53
    _, e = np.frexp(u)  # u = m·2^e, m in [0.5, 1): e is the bit length (0 for u = 0)
    return 32 - e.astype(np.int64)


def clamp(x: Any, lo: int, hi: int) -> Arr:
    return np.clip(i64(x), lo, hi)


# ------------------------------------------------------------------------------- gemmlowp fixed-point functions
def exp_on_interval_between_negative_one_quarter_and_0_excl(a: Any) -> Arr:
    """exp(a) for a Q0.31 ``a`` in [-1/4, 0): Taylor series around -1/8."""
    constant_term, constant_1_over_3 = 1895147668, 715827883
    x = wrap32(i64(a) + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbpot(x4, 2)
    t = rdbpot(wrap32(srdhm(wrap32(x4_over_4 + x3), constant_1_over_3) + x2), 1)
    return wrap32(constant_term + srdhm(constant_term, wrap32(x + t)))


#: (exponent, multiplier) pairs of gemmlowp's exp barrel shifter: multiplier = exp(-2^exponent) in Q0.31
EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401),
              (4, 242))


def exp_on_negative_values(a: Any, integer_bits: int) -> Arr:
    """exp(a) in Q0.31 for a Q``integer_bits`` input ``a <= 0``."""
    a = i64(a)
    frac = 31 - integer_bits
    one_quarter = 1 << (frac - 2)
    a_mod = wrap32((a & (one_quarter - 1)) - one_quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(rescale_pot(a_mod, integer_bits))
    remainder = wrap32(a_mod - a)
    for exponent, mult in EXP_BARREL:
        if integer_bits > exponent:
            bit = np.int64(1) << (frac + exponent)
            result = np.where((remainder & bit) != 0, srdhm(result, mult), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, I32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(a: Any) -> Arr:
    """1 / (1 + a) for a Q0.31 ``a`` in [0, 1): Newton-Raphson with 3 iterations, Q2.29 inside."""
    half_denominator = rounding_half_sum(a, I32_MAX)
    x = wrap32(1515870810 + srdhm(half_denominator, -1010580540))
    for _ in range(3):
        one_minus = wrap32((1 << 29) - srdhm(half_denominator, x))
        x = wrap32(x + sat_shl(srdhm(x, one_minus), 2))
    return sat_shl(x, 1)


def get_reciprocal(x: Any, x_integer_digits: int) -> tuple[Arr, Arr]:
    """TFLite GetReciprocal: (Q0.31 reciprocal of the normalised ``x``, num_bits_over_unit)."""
    x = i64(x)
    hp1 = clz32(x)
    shifted_minus_one = wrap32(((x & 0xFFFFFFFF) << hp1) - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_minus_one), x_integer_digits - hp1


def log_x_for_x_greater_than_or_equal_to_1(x: Any, out_bits: int, in_bits: int) -> Arr:
    """TFLite log_x_for_x_greater_than_or_equal_to_1_impl<out_bits, in_bits> on raw int32 values."""
    log_2, sqrt_sqrt_half, sqrt_half, one_quarter = 1488522236, 1805811301, 1518500250, 536870912
    alpha_n, alpha_d, alpha_i, alpha_f = 117049297, 127690142, 1057819769, 638450708
    accum = out_bits + 1
    shifted_quarter = rdbpot(one_quarter, accum)
    z_a = i64(x)
    hp1 = clz32(z_a)
    r_a_tmp = sat_shl(z_a, hp1 - 1)
    r_a = sat_shl(srdhm(r_a_tmp, sqrt_half), 1)
    z_a_adj = clamp(sat_shl(in_bits - hp1, 31 - accum) + shifted_quarter, I32_MIN, I32_MAX)
    z_b = srdhm(z_a, sqrt_half)
    z_b_headroom = clz32(z_b) - 1
    r_b = sat_shl(z_a, z_b_headroom)
    z_b_adj = clamp(sat_shl(in_bits - z_b_headroom, 31 - accum) - shifted_quarter, I32_MIN, I32_MAX)
    r = np.minimum(r_a, r_b)
    z_adj = np.maximum(z_a_adj, z_b_adj)
    p = rounding_half_sum(r, sqrt_sqrt_half)
    q = wrap32(r - sqrt_sqrt_half)
    q = wrap32(q + q)
    common_sq = srdhm(q, q)
    num = wrap32(srdhm(q, r) + srdhm(srdhm(q, common_sq), alpha_n))
    denom_minus_one = wrap32(srdhm(p, wrap32(alpha_i + q + srdhm(alpha_d, common_sq))) + srdhm(alpha_f, q))
    recip = one_over_one_plus_x_for_x_in_0_1(denom_minus_one)
    num_scaled = rdbpot(num, accum)
    return sat_shl(wrap32(srdhm(z_adj, log_2) + srdhm(num_scaled, recip)), 1)


def inv_sqrt_quantized_multiplier_exp(value: Any) -> tuple[Arr, Arr]:
    """TFLite GetInvSqrtQuantizedMultiplierExp(value, kReverseShift): (multiplier, left shift), elementwise over an
    int32 ``value`` array (or a scalar).  Its ``while (input >= 2^29)`` divides by 4 at most once for an int32."""
    v = i64(value)
    small = v <= 1
    big = v >= (1 << 29)
    v = np.where(big, v // 4, v)
    shift = np.where(big, 12, 11)
    pairs = (clz32(v) - 1) // 2 - 1  # max_left_shift_bit_pairs - 1
    shift = shift - pairs
    v = v << np.maximum(2 * pairs, 0)
    half_input = rdbpot(v >> 1, 1)  # fixed_input = value >> 1, Q3.28
    half_three = (1 << 28) + (1 << 27)
    x = np.full(v.shape, 1 << 28, np.int64)  # F3::One()
    for _ in range(5):
        x3 = sat_shl(srdhm(srdhm(x, x), x), 6)  # Rescale<3> from Q9 to Q3
        x = sat_shl(wrap32(srdhm(half_three, x) - srdhm(half_input, x3)), 3)  # Rescale<3> from Q6 to Q3
    x = srdhm(x, 1518500250)  # * sqrt(2)/2, Q3
    neg = shift < 0
    x = np.where(neg, x << np.where(neg, -shift, 0), x)
    shift = np.where(neg, 0, shift)
    return np.where(small, I32_MAX, x), np.where(small, 0, -shift)


# ------------------------------------------------------------------------------------------------ LUT kernels
def tfl_round(x: Any) -> Arr:
    """TfLiteRound / std::round: ties away from zero, exact in the input's precision (float32 or float64)."""
    x = np.asarray(x)
    t = np.trunc(x)
    return t + np.sign(x) * (np.abs(x - t) >= x.dtype.type(0.5))


def lut_populate_i8(fn: Callable[[Arr], Arr], s_in: float, zp_in: int, s_out: float, zp_out: int) -> Arr:
    """TFLite LUTPopulateInt8 in float32; entry ``v + 128`` for input code ``v`` (TOSA TABLE order).

    ``fn`` maps a float32 array to a float32 array (the C ``float`` transform).
    """
    v = np.arange(-128, 128, dtype=np.int64)
    with np.errstate(all="ignore"):
        deq = (f32(s_in) * (v - zp_in).astype(np.float32)).astype(np.float32)
        y = np.asarray(fn(deq), dtype=np.float32)
        r = tfl_round((y * (f32(1) / f32(s_out))).astype(np.float32)).astype(np.float32)
        q = (r + np.float32(zp_out)).astype(np.float32)
    q = np.nan_to_num(q.astype(np.float64), nan=0.0, posinf=1e9, neginf=-1e9)
    return np.clip(q, -128, 127).astype(np.int64)


def lut_populate_i16(fn: Callable[[Arr], Arr], s_in: float, zp_in: int, s_out: float, zp_out: int,
                     dtype: Any = np.float32) -> Arr:
    """TFLite LUTPopulateInt16: 513 entries with the midpoint-error bias correction, in ``dtype`` arithmetic."""
    t: Any = dtype
    in_min = t(t(s_in) * t(I16_MIN - zp_in))
    in_max = t(t(s_in) * t(I16_MAX - zp_in))
    out_min = t(t(s_out) * t(I16_MIN - zp_out))
    out_max = t(t(s_out) * t(I16_MAX - zp_out))
    step = t((in_max - in_min) / t(512))
    half_step = t(step / t(2))
    inv = t(t(65536) / t(out_max - out_min))
    i: Arr = np.arange(512).astype(t)
    with np.errstate(all="ignore"):
        x0 = (in_min + i * step).astype(t)
        val: Arr = np.asarray(fn(x0), dtype=t)
        val_mid: Arr = np.asarray(fn((x0 + half_step).astype(t)), dtype=t)
        val_next: Arr = np.asarray(fn((in_min + (i + t(1)) * step).astype(t)), dtype=t)
        sample = tfl_round((val * inv).astype(t))
        mid_interp = tfl_round(((val_next * inv + tfl_round((val * inv).astype(t))) / t(2)).astype(t))
        mid_val = tfl_round((val_mid * inv).astype(t))
        bias = tfl_round(((mid_interp - mid_val) / t(2)).astype(t))
        body = np.clip((sample - bias).astype(np.float64), I16_MIN, I16_MAX)
        last = np.clip(float(tfl_round(np.asarray(fn(np.asarray([in_max], dtype=t)), dtype=t) * inv)[0]),
                       I16_MIN, I16_MAX)
    return np.concatenate([np.trunc(body), [np.trunc(last)]]).astype(np.int64)


def lut_lookup_i16(x: Any, lut: Arr) -> Arr:
    """TFLite LUTLookup (int16): ``base + ((slope·(x & 0x7f) + 64) >> 7)``, index ``256 + (x >> 7)``."""
    x = i64(x)
    idx = 256 + (x >> 7)
    base = lut[idx]
    slope = wrap16(lut[idx + 1] - base)
    return wrap16(base + ((slope * (x & 0x7F) + 64) >> 7))


def wrap16(x: Any) -> Arr:
    return ((i64(x) + 32768) & 0xFFFF) - 32768


def codes(dtype_bits: int) -> Arr:
    lo = -(1 << (dtype_bits - 1))
    return np.arange(lo, -lo, dtype=np.int64)


def to_qmultiplier(scale: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier: (q, shift) with scale ≈ q·2^(shift-31)."""
    return quantize_multiplier(scale)


# ---------------------------------------------------------------------------------------- float transforms
def _erfc32(x: Arr) -> Arr:
    return np.asarray([math.erfc(float(v)) for v in np.asarray(x, np.float64).ravel()],
                      dtype=np.float64).reshape(np.shape(x)).astype(np.float32)


def _via64(fn: Callable[[Arr], Arr]) -> Callable[[Arr], Arr]:
    """A float32 libm function evaluated in float64 and rounded once (glibc's float functions are ≤ 1 ulp)."""
    def g(x: Arr) -> Arr:
        with np.errstate(all="ignore"):
            return np.asarray(fn(np.asarray(x, np.float64)), np.float64).astype(np.float32)
    return g


exp32 = _via64(np.exp)
tanh32 = _via64(np.tanh)
log32 = _via64(np.log)
sqrt32 = _via64(np.sqrt)
expm1_32 = _via64(np.expm1)


def logistic32(x: Arr) -> Arr:
    """``1.0f / (1.0f + std::exp(-value))`` in float32 (SigmoidPrepare)."""
    e = exp32(-np.asarray(x, np.float32))
    return (np.float32(1) / (np.float32(1) + e)).astype(np.float32)


def gelu32(x: Arr) -> Arr:
    """GeluTransform: ``0.5f * x * erfc(x * -M_SQRT1_2)`` in float32."""
    x = np.asarray(x, np.float32)
    return (np.float32(0.5) * x * _erfc32((x * np.float32(-math.sqrt(0.5))).astype(np.float32))).astype(np.float32)


def gelu_approx32(x: Arr) -> Arr:
    """GeluTransformApproximate: ``0.5f*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715f*x^3)))`` in float32."""
    x = np.asarray(x, np.float32)
    k = np.float32(2.0 / math.sqrt(math.pi) * math.sqrt(0.5))
    inner = (k * (x + np.float32(0.044715) * x * x * x)).astype(np.float32)
    return (np.float32(0.5) * x * (np.float32(1) + tanh32(inner))).astype(np.float32)


def elu32(x: Arr) -> Arr:
    x = np.asarray(x, np.float32)
    return np.where(x < 0, expm1_32(x), x).astype(np.float32)


def log_lut_fn(s_out: float, zp_out: int, bits: int) -> Callable[[Arr], Arr]:
    """LogLUTPrepare's transform: ``log(x)``, and the output minimum for ``x <= 0``."""
    omin = np.float32(np.float32(-(1 << (bits - 1)) - zp_out) * np.float32(s_out))

    def fn(v: Arr) -> Arr:
        return np.where(v <= 0, omin, log32(v)).astype(np.float32)
    return fn


def rsqrt16_lut_fn(s_out: float) -> Callable[[Arr], Arr]:
    """The int16 RSQRT LUT transform: ``1/sqrt(x)``, and ``32767·s_out`` (the top code) for ``x <= 0``."""
    top = np.float32(np.float32(32767) * np.float32(s_out))

    def fn(v: Arr) -> Arr:
        return np.where(v <= 0, top, np.float32(1) / sqrt32(v)).astype(np.float32)
    return fn


# ------------------------------------------------------------------------------------- int8 element kernels
def abs_q(v: Arr, s_in: float, zp_in: int, s_out: float, zp_out: int, bits: int) -> Arr:
    """AbsEvalQuantized: ``|v - zp_in|``, MBQM by float32 ``s_in/s_out`` unless the scales are equal."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    a = np.abs(i64(v) - zp_in)
    if f32(s_in) == f32(s_out):
        return clamp(a + zp_out, lo, hi)
    q, s = to_qmultiplier(float(f32(s_in) / f32(s_out)))
    return clamp(mbqm(a, q, s) + zp_out, lo, hi)


def rsqrt_i8(v: Arr, s_in: float, zp_in: int, s_out: float, zp_out: int) -> Arr:
    """RsqrtEvalQuantizedInt8 (kShift 20, GetInvSqrtQuantizedMultiplierExp per value)."""
    # SetRsqrtOutputMultiplier: std::sqrt(float) and the product are float; 1. / … is double
    q, s = to_qmultiplier(1.0 / float(f32(np.sqrt(f32(s_in), dtype=np.float32)) * f32(s_out)))
    value = i64(v) - zp_in
    # value <= 0: TFLite rejects a negative input ("only defined for positive values") and gives 127 for 0; any code
    # will do for the rejected ones, 127 here
    pos = value > 0
    m, sh = inv_sqrt_quantized_multiplier_exp(np.where(pos, value, 2))
    data = mbqm(np.ones_like(value), m, sh + 20)
    out = clamp(mbqm(data, q, s - 20) + zp_out, -128, 127)
    return np.where(pos, out, 127).reshape(np.shape(v))


def leaky_relu_q(v: Arr, s_in: float, zp_in: int, s_out: float, zp_out: int, alpha: float, bits: int) -> Arr:
    """QuantizeLeakyRelu: identity and alpha branches with their own float32-derived multipliers."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    qa, sa = to_qmultiplier_signed(float(f32(f32(s_in) * f32(alpha)) / f32(s_out)))
    qi, si = to_qmultiplier(float(f32(s_in) / f32(s_out)))
    x = i64(v) - zp_in
    return clamp(np.where(x >= 0, mbqm(x, qi, si), mbqm(x, qa, sa)) + zp_out, lo, hi)


def to_qmultiplier_signed(scale: float) -> tuple[int, int]:
    """QuantizeMultiplier for a possibly negative scale (frexp keeps the sign)."""
    if scale < 0:
        q, s = quantize_multiplier(-scale)
        return -q, s
    return quantize_multiplier(scale)


def srdhm16(a: Any, b: Any) -> Arr:
    """gemmlowp SaturatingRoundingDoublingHighMul on int16."""
    a, b = i64(a), i64(b)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    r = trunc_div(ab + nudge, 1 << 15)
    return np.where((a == b) & (a == I16_MIN), I16_MAX, r)


def hard_swish_i8(v: Arr, s_in: float, zp_in: int, s_out: float, zp_out: int) -> Arr:
    """reference_ops::HardSwish (int8) with HardSwishPrepare's float32 multipliers."""
    hires = f32(f32(1.0 / 128.0) * f32(s_in))
    out_mult = float(f32(hires / f32(s_out)))
    relu_mult = float(f32(hires / f32(3.0 / 32768.0)))

    def down16(q: int) -> int:  # DownScaleInt32ToInt16Multiplier
        return I16_MAX if q >= I32_MAX - (1 << 15) else (q + (1 << 15)) >> 16

    oq, oe = quantize_multiplier(out_mult)
    rq, re_ = quantize_multiplier(relu_mult)
    om16, rm16 = down16(oq), down16(rq)
    x = wrap16(i64(v) - zp_in)
    hires_v = wrap16(x * 128)
    preshift = srdhm16(hires_v, om16)
    r = hires_v
    if re_ > 0:
        r = np.clip(r * (1 << (re_ - 1)), I16_MIN, I16_MAX)
    r = srdhm16(r, rm16)
    if re_ > 0:
        r = np.clip(r * 2, I16_MIN, I16_MAX)
    if re_ < 0:
        r = rdbpot(r, -re_)
    r = wrap16((r + (1 << 15)) >> 1)
    ab = r * preshift  # SaturatingDoublingHighMul (truncating)
    pre = np.where((r == preshift) & (r == I16_MIN), I16_MAX, wrap16(trunc_div(ab, 1 << 15)))
    out = wrap16(rdbpot(pre, -oe) + zp_out)
    return np.clip(out, -128, 127)


#: TFLite's ``sigmoid_table_uint16`` (kernels/internal/common.h): sigmoid(i/24) in unsigned 0.16, i = 0..255.  Data,
#: not a formula: the entries differ from round(65536·sigmoid(i/24)) by up to one unit (44 of 256), so the int16
#: LOGISTIC/TANH reference kernels can only be reproduced bit-exactly with these very values.
SIGMOID_TABLE_U16 = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432, 42064, 42688,
    43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409,
    51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110,
    61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186,
    63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208,
    65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433, 65438, 65442, 65445, 65449,
    65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
], dtype=np.int64)


def sigmoid_table_u16() -> Arr:
    """TFLite's 256-entry sigmoid table (see :data:`SIGMOID_TABLE_U16`)."""
    return SIGMOID_TABLE_U16


def int16_logistic_tanh_params(s_in: float, tanh: bool) -> tuple[int, int]:
    """(input_multiplier, input_left_shift) of SigmoidPrepare/TanhPrepare for int16 (0 multiplier: POT case)."""
    x = float(f32(s_in))
    log2 = math.log(x) * (1.0 / math.log(2.0))
    rounded = math.floor(abs(log2) + 0.5) * (1 if log2 >= 0 else -1)
    pot = abs(log2 - rounded) < 1e-3
    left = 12 + int(rounded)
    pot = pot and (left in (0, 1) if tanh else left == 0)
    if pot:
        return 0, left
    mult = x * 4096.0 * 3.0
    left = 0
    while mult <= 32767.0 / 2.0 and left <= 30:
        left += 1
        mult *= 2.0
    return int(mult), left


def logistic_tanh_i16(v: Arr, s_in: float, tanh: bool) -> Arr:
    """reference_integer_ops::Logistic / Tanh (int16): sigmoid_table_uint16 with 9-bit (8-bit for tanh)
    interpolation."""
    mult, left = int16_logistic_tanh_params(s_in, tanh)
    if mult == 0:
        mult, left = 3 << left, 0
    rnd = (1 << (left - 1)) if left > 0 else 0
    x = (i64(v) * mult + rnd) >> left
    ax = np.abs(x)
    tab = sigmoid_table_u16()
    fb = 8 if tanh else 9
    uh = ax >> fb
    sat = uh >= 255
    uhc = np.minimum(uh, 254)
    ua, ub = tab[uhc], tab[uhc + 1]
    interp = (ua << fb) + (ax & ((1 << fb) - 1)) * (ub - ua)
    if tanh:
        res = np.where(sat, 0xFFFF << 8, interp)
        res = np.where(x >= 0, res - (1 << 23) + (1 << 7), -res + (1 << 23) + (1 << 7) - 1)
        return wrap16(res >> 8)
    res = np.where(sat, 0x7FFF << 10, interp)
    res = np.where(x >= 0, res + (1 << 9), (1 << 25) - res + (1 << 9) - 1)
    return wrap16(res >> 10)


def div_i8(x: Arr, y: Arr, s1: float, zp1: int, s2: float, zp2: int, s_out: float, zp_out: int,
           act: tuple[int, int] = (-128, 127)) -> Arr:
    """reference_ops::DivElementwise (int8): reciprocal by GetReciprocal, headroom-normalised numerator."""
    q, s = to_qmultiplier(float(f32(s1) / f32(f32(s2) * f32(s_out))))
    a = i64(x) - zp1
    d = i64(y) - zp2
    neg = d < 0
    a = np.where(neg, -a, a)
    d = np.where(neg, -d, d)
    dsafe = np.where(d == 0, 1, d)
    inv, nbou = get_reciprocal(dsafe, 31)
    recip_shift = nbou
    headroom = clrsb32(a)
    unscaled = srdhm(wrap32(a << headroom), inv)
    total = s - recip_shift - headroom
    res = rdbpot_x86(srdhm(unscaled, q), -total)
    out = np.clip(res + zp_out, act[0], act[1])
    return np.where(d == 0, zp_out, out)


def rdbpot_x86(x: Any, e: Any) -> Arr:
    """RoundingDivideByPOT as LiteRT's x86 build computes it for any exponent ``e >= 0`` of an int32 ``x``.

    DivElementwise can ask for ``e >= 32`` (a zero or -1 numerator has 31 sign bits, a divisor of 128 or more
    7-8 reciprocal bits), which gemmlowp only asserts against.  The x86 binary then computes the mask
    ``(1ll << e) - 1`` truncated to int32 (-1), so the threshold is ``(-1 >> 1) + (x < 0)`` = -1 or 0, and the
    int32 shift ``x >> e`` uses the count modulo 32: the result is ``(x >> (e - 32)) + (x >= 0)``.  Measured
    against LiteRT 2.3 over every int8 code pair (tests/test_exact_int.py).
    """
    x, e = i64(x), i64(e)
    big = e >= 32
    return np.where(big, (x >> np.where(big, e - 32, 0)) + (x >= 0), rdbpot(x, np.where(big, 0, e)))


def clrsb32(x: Any) -> Arr:
    """CountLeadingSignBits for int32 (31 for 0)."""
    x = i64(x)
    return np.where(x >= 0, clz32(x) - 1, clz32(~x & 0xFFFFFFFF) - 1)


def sqrt_i8(v: Arr, s_in: float, zp_in: int, s_out: float, zp_out: int) -> Arr:
    """LiteRT's int8 SQRT: ``trunc(sqrtf(s_in·(v - zp_in)) / s_out) + zp_out`` in float32, clamped.

    Inferred from LiteRT 2.3 (every int8 code of the test models matches; the kernel source is not in the
    references): the quotient is truncated, not rounded.  Negative inputs (sqrt NaN) give ``zp_out``.
    """
    deq = (f32(s_in) * (i64(v) - zp_in).astype(np.float32)).astype(np.float32)
    with np.errstate(all="ignore"):
        y = (sqrt32(deq) / f32(s_out)).astype(np.float32)
    y = np.where(np.isnan(y), 0.0, np.trunc(y.astype(np.float64)))
    return clamp(np.clip(y, -1e9, 1e9).astype(np.int64) + zp_out, -128, 127)


# ------------------------------------------------------------------------------- float kernels of float islands
def hard_swish_f32(x: Arr) -> Arr:
    """reference_ops::HardSwish<float>: ``in · min(6, max(0, in + 3)) / 6`` in float32."""
    f = np.float32
    x = x.astype(f)
    return ((x * np.minimum(f(6), np.maximum(f(0), x + f(3)))) / f(6)).astype(f)


#: float32 kernels of the ops TFLite leaves in float between a DEQUANTIZE and a QUANTIZE of an integer model (ops
#: it cannot quantize, e.g. HARD_SWISH in 16x8 mode or the NEG of a LayerNorm), as LiteRT's reference kernels compute
#: them: numpy float32 arithmetic rounds each operation as the C++ kernel does; NEG and ABS are exact
FLOAT_ISLAND_KERNELS: dict[str, Callable[[Arr], Arr]] = {"tfl.neg": np.negative, "tfl.abs": np.abs,
                                                        "tfl.hard_swish": hard_swish_f32}


# ----------------------------------------------------------------------------- gemmlowp int16 fixed point
# gemmlowp's templates instantiated with ``int16_t`` raws (``FixedPoint<int16_t, k>``): the LSTM integer kernels'
# ``ApplySigmoid`` (F3 → F0) and ``ApplyTanh`` (Fk → F0, k = 0…6).  Add/Sub/Neg wrap to int16 as C's narrowing
# conversion does; products are srdhm16; the int32 constants of the generic code are rounded to their 16-bit
# value by RoundingDivideByPOT(c, 16) (``RescaleConstantInitializer``).
def _const16(c: int) -> int:
    return int(rdbpot(c, 16))


def _sat_pot16(x: Arr, e: int) -> Arr:
    """SaturatingRoundingMultiplyByPOT<e> on int16 raws."""
    x = i64(x)
    if e == 0:
        return x
    if e < 0:
        return rdbpot(x, -e)
    thr = (1 << (15 - e)) - 1
    return np.where(x > thr, I16_MAX, np.where(x < -thr, I16_MIN, wrap16(x << e)))


def _half_sum16(a: Arr, b: Any) -> Arr:
    s = i64(a) + i64(b)
    return wrap16(trunc_div(s + np.where(s >= 0, 1, -1), 2))


def _exp_quarter16(a: Arr) -> Arr:
    """exp_on_interval_between_negative_one_quarter_and_0_excl, F0 int16."""
    constant_term, one_third = _const16(1895147668), _const16(715827883)
    x = wrap16(i64(a) + (1 << 12))
    x2 = srdhm16(x, x)
    x3 = srdhm16(x2, x)
    x4 = srdhm16(x2, x2)
    x4_over_4 = _sat_pot16(x4, -2)
    t = _sat_pot16(wrap16(srdhm16(wrap16(x4_over_4 + x3), one_third) + x2), -1)
    return np.clip(constant_term + srdhm16(constant_term, wrap16(x + t)), I16_MIN, I16_MAX)  # AddSaturatingIf16Bit


def exp_on_negative_values16(a: Arr, integer_bits: int) -> Arr:
    """exp(a) as an F0 int16 raw for an F``integer_bits`` int16 raw ``a <= 0``."""
    a = i64(a)
    frac = 15 - integer_bits
    one_quarter = 1 << (frac - 2)
    a_mod = wrap16((a & (one_quarter - 1)) - one_quarter)
    result = _exp_quarter16(_sat_pot16(a_mod, integer_bits))
    remainder = wrap16(a_mod - a)
    for exponent, mult in EXP_BARREL:
        if integer_bits > exponent:
            bit = wrap16(1 << (frac + exponent))
            result = np.where((remainder & bit) != 0, srdhm16(result, _const16(mult)), result)
    if integer_bits > 5:
        result = np.where(a < wrap16(_const16(-(1 << (36 - integer_bits)))), 0, result)
    return np.where(a == 0, I16_MAX, result)


def _newton16(a: Arr) -> Arr:
    """The shared Newton-Raphson part of one_over_one_plus_x / one_minus_x_over_one_plus_x (F2 result)."""
    half_den = _half_sum16(a, I16_MAX)
    x = wrap16(_const16(1515870810) + srdhm16(half_den, _const16(-1010580540)))
    one_f2 = 1 << 13
    for _ in range(3):
        one_minus = wrap16(one_f2 - srdhm16(half_den, x))
        x = wrap16(x + _sat_pot16(srdhm16(x, one_minus), 2))
    return x


def logistic16(a: Any, integer_bits: int) -> Arr:
    """gemmlowp::logistic(FixedPoint<int16_t, integer_bits>) → F0 raw (TFLite's int16 ApplySigmoid with 3 bits)."""
    a = i64(a)
    positive = a > 0
    abs_in = np.where(positive, a, wrap16(-a))
    pos = _sat_pot16(_newton16(exp_on_negative_values16(wrap16(-abs_in), integer_bits)), 1)  # F2 as F1 → F0
    neg = wrap16(I16_MAX - pos)
    return np.where(a == 0, _const16(1 << 30), np.where(positive, pos, neg))


def tanh16(a: Any, integer_bits: int) -> Arr:
    """gemmlowp::tanh(FixedPoint<int16_t, integer_bits>) → F0 raw (TFLite's int16 ApplyTanh)."""
    a = i64(a)
    negative = a < 0
    n = np.where(negative, a, wrap16(-a))
    t = _sat_pot16(wrap16(_newton16(exp_on_negative_values16(n, integer_bits + 1)) - (1 << 13)), 2)
    return np.where(a == 0, 0, np.where(negative, wrap16(-t), t))


def add_sub_multipliers_i8(s1: float, s2: float, s_out: float) -> tuple[tuple[int, int], ...]:
    """The (q, shift) pairs of int8 ADD/SUB's Prepare: input 1, input 2 and the output (see :func:`add_sub_i8`)."""
    twice = 2.0 * max(float(f32(s1)), float(f32(s2)))
    return (to_qmultiplier(float(f32(s1)) / twice), to_qmultiplier(float(f32(s2)) / twice),
            to_qmultiplier(twice / ((1 << 20) * float(f32(s_out)))))


def add_sub_i8(x: Any, y: Any, s1: float, zp1: int, s2: float, zp2: int, s_out: float, zp_out: int,
               subtract: bool = False, act: tuple[int, int] = (-128, 127)) -> Arr:
    """reference_integer_ops AddElementwise / SubElementwise (int8), with Prepare's parameters: left shift 20,
    input multipliers ``s_i / (2·max(s1, s2))`` and output multiplier ``2·max(s1, s2) / (2^20·s_out)`` (double;
    the scales are TFLite's float32), each applied by MultiplyByQuantizedMultiplierSmallerThanOneExp."""
    (q1, e1), (q2, e2), (qo, eo) = add_sub_multipliers_i8(s1, s2, s_out)
    a = mbqm((i64(x) - zp1) << 20, q1, e1)
    c = mbqm((i64(y) - zp2) << 20, q2, e2)
    return add_sub_output_i8(a, c, qo, eo, zp_out, subtract, act)


def add_sub_output_i8(a: Any, c: Any, qo: int, eo: int, zp_out: int, subtract: bool = False,
                      act: tuple[int, int] = (-128, 127)) -> Arr:
    """The output stage of :func:`add_sub_i8` on its inputs' stage values ``a`` and ``c`` (each input's
    ``mbqm((x - zp) << 20, q, e)``, an elementwise function of its code: a caller may index them from the 256 codes'
    values) with the output's (q, shift) of :func:`add_sub_multipliers_i8`."""
    acc = i64(a - c if subtract else a + c)
    if acc.ndim and qo != I32_MIN and -31 <= eo <= 31:  # the same passes on the one new array (65536 code pairs)
        r = _mbqm_scalar(acc, qo, eo, inplace=True)
        r += zp_out
        np.maximum(r, act[0], out=r)  # (the clamp in place)
        return np.minimum(r, act[1], out=r)
    return clamp(mbqm(acc, qo, eo) + zp_out, act[0], act[1])
