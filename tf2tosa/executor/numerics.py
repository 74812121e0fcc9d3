"""Bit-exact integer helpers of the TOSA 1.0 specification, vectorised over numpy int64 arrays.

Every kernel uses these (one implementation of each helper).  References name the section and
helper of the TOSA 1.0 specification (``spec 4.5.5 apply_scale_32``) and ``op_inventory.md`` §5.

Arithmetic is in int64.  Where the spec's 64-bit intermediates could exceed int64
(e.g. ``product + (1 << 62)``), the equivalent overflow-free form is used:
``(p + 2**(s-1)) >> s == (p >> s) + ((p >> (s-1)) & 1)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.types import DType
from .registry import UnpredictableError

I64 = np.int64


def _req(ok: Any, msg: str) -> None:
    if not (ok if isinstance(ok, bool) else bool(np.all(ok))):
        raise UnpredictableError(f"REQUIRE violated (result unpredictable): {msg}")


def as_i64(x: Any) -> np.ndarray:
    return np.asarray(x).astype(I64)


def check_fits(x: np.ndarray, dt: DType, what: str) -> None:
    """REQUIRE(c >= minimum_s<dt> && c <= maximum_s<dt>) of apply_add_s / apply_sub_s (spec 4.5.1 apply_add_s)."""
    lo, hi = dt.range()
    if x.size:
        _req(bool(x.min() >= lo) and bool(x.max() <= hi), f"{what} overflows {dt.value}")


def apply_add_s(a: Any, b: Any, dt: DType) -> np.ndarray:
    """spec 4.5.1 apply_add_s: exact add with the no-overflow REQUIRE."""
    c = as_i64(a) + as_i64(b)
    check_fits(c, dt, "add")
    return c


def apply_sub_s(a: Any, b: Any, dt: DType) -> np.ndarray:
    """spec 4.5.1 apply_sub_s: exact subtract with the no-overflow REQUIRE."""
    c = as_i64(a) - as_i64(b)
    check_fits(c, dt, "subtract")
    return c


def wrap(x: np.ndarray, bits: int) -> np.ndarray:
    """static_cast / truncate to a signed ``bits``-bit integer (two's complement wrap), kept in int64."""
    x = as_i64(x)
    if bits >= 64:
        return x
    m = I64(1) << I64(bits)
    half = I64(1) << I64(bits - 1)
    return ((x + half) & (m - 1)) - half


def shift_round_half_up(x: np.ndarray, shift: Any) -> np.ndarray:
    """(x + (1 << (shift-1))) >> shift for shift >= 1, without int64 overflow (arithmetic shift)."""
    x = as_i64(x)
    s = as_i64(shift)
    return (x >> s) + ((x >> (s - 1)) & 1)


#: elements per block of the blocked integer pipelines (their temporaries stay in cache)
BLOCK = 1 << 15


def _scale_32_block(v: np.ndarray, m: np.ndarray, s: np.ndarray, double: bool, out: np.ndarray) -> None:
    """``out = (v * m + round) >> s`` for one block (``v`` any integer type, ``out`` int64)."""
    out[...] = v
    if double:
        # double round: +2^30 extra for values >= 0, -2^30 for negative ones where shift > 31
        # (spec 4.5.5 apply_scale_32)
        sign = out >> 63  # -1 / 0, taken before the multiply
        sign <<= 31
        sign += I64(1) << 30
        if s.ndim:
            sign *= s > 31
    np.multiply(out, m, out=out)
    out += I64(1) << (s - 1)
    if double:
        out += sign
    out >>= s


def apply_scale_32(value: Any, multiplier: Any, shift: Any, double_round: bool = False) -> np.ndarray:
    """spec 4.5.5 apply_scale_32 (op_inventory §5.2).  Returns int64 (the caller static_casts / clips).

    The REQUIREs are checked on the extremes of ``value`` (and on the scalar or per-channel multiplier and
    shift), then ``(value * multiplier + round) >> shift`` is formed in int64 blocks of :data:`BLOCK` elements
    (fresh multi-megabyte temporaries cost more in page faults than the arithmetic).  Under the value REQUIRE
    ``|value| < 2^(shift-1)`` the result lies in ``(-2^30, 2^30]``: it always fits i32.  ``multiplier`` and
    ``shift`` are scalars or broadcast along the last axis of ``value`` (per channel).
    """
    v = np.asarray(value)
    m = np.asarray(multiplier, dtype=I64)
    s = np.asarray(shift, dtype=I64)
    _req(m >= 0, "apply_scale_32 multiplier >= 0")
    _req((s >= 2) & (s <= 62), "apply_scale_32 2 <= shift <= 62")
    if v.size:
        half = I64(1) << (s - 1)
        if s.ndim == 0:
            vmin, vmax = int(v.min()), int(v.max())
            _req(vmin >= -int(half) and vmax < int(half), "apply_scale_32 value in [-(1<<(shift-1)), 1<<(shift-1))")
        else:
            _req((v >= -half) & (v < half), "apply_scale_32 value in [-(1<<(shift-1)), 1<<(shift-1))")
    # |v*m| <= 2^31 * (2^31-1) < 2^62 and the rounding term <= 2^61 + 2^30: the sum fits int64
    double = double_round and bool(np.any(s > 31))
    shape = np.broadcast_shapes(v.shape, m.shape, s.shape)
    out = np.empty(shape, I64)
    if v.shape != shape or m.ndim > 1 or s.ndim > 1 or (m.ndim == 1 and s.ndim == 1 and m.shape != s.shape):
        _scale_32_block(np.broadcast_to(v, shape), np.broadcast_to(m, shape), np.broadcast_to(s, shape), double, out)
        return out
    c = max(m.size if m.ndim else 1, s.size if s.ndim else 1)
    v2, o2 = v.reshape(-1, c), out.reshape(-1, c)
    rows = max(1, BLOCK // c)
    for i in range(0, v2.shape[0], rows):
        _scale_32_block(v2[i:i + rows], m, s, double, o2[i:i + rows])
    return out


def rescale_32_into(value: np.ndarray, multiplier: Any, shift: Any, double_round: bool, zp_add: int,
                    lo: int, hi: int, out: np.ndarray) -> None:
    """``out = clip(apply_scale_32(value, multiplier, shift) + zp_add, lo, hi)`` (spec 2.13.2 RESCALE, scale32)
    fused and blocked: ``value`` is ``[rows, C]`` with ``multiplier``/``shift`` scalars or ``[C]`` (per channel),
    ``out`` the ``[rows, C]`` result of any integer type.  Same REQUIREs as :func:`apply_scale_32` (the value range
    is checked per block, which fails iff it fails overall); ``|zp_add| < 2^30`` so the i32 add cannot overflow.
    """
    m = np.asarray(multiplier, dtype=I64)
    s = np.asarray(shift, dtype=I64)
    sp = _scale_params(m, s, double_round)
    _req(sp.m_ok, "apply_scale_32 multiplier >= 0")
    _req(sp.s_ok, "apply_scale_32 2 <= shift <= 62")
    if abs(zp_add) >= 1 << 30:
        raise ValueError("zero point out of range")
    double = sp.double
    if value.size and _rescale_32_float(value, sp, zp_add, lo, hi, out):
        return
    half = I64(1) << (s - 1)
    big = s > 31
    mixed = double and s.ndim > 0 and not bool(np.all(big))
    # rounding constant: 2^(s-1), plus 2^30 when double rounding (negative values then subtract 2^31 below)
    const = half + (np.where(big, I64(1) << 30, I64(0)) if double else I64(0))
    lo_v, hi_v = -half, half
    rows = max(1, BLOCK // max(1, value.shape[-1]))
    n = value.shape[0]
    buf = np.empty((min(rows, n), value.shape[-1]), I64)
    sbuf = np.empty_like(buf) if double else None
    scalar = s.ndim == 0
    for i in range(0, n, rows):
        v = value[i:i + rows]
        b = buf[:v.shape[0]]
        if scalar:
            _req(bool(v.min() >= lo_v) and bool(v.max() < hi_v),
                 "apply_scale_32 value in [-(1<<(shift-1)), 1<<(shift-1))")
        else:
            _req((v >= lo_v) & (v < hi_v), "apply_scale_32 value in [-(1<<(shift-1)), 1<<(shift-1))")
        np.copyto(b, v, casting="unsafe")
        if double:
            sb = sbuf[:v.shape[0]]  # type: ignore[index]
            np.right_shift(b, 63, out=sb)  # -1 for negative values, 0 otherwise
            np.left_shift(sb, 31, out=sb)
            if mixed:
                sb *= big
        np.multiply(b, m, out=b)
        b += const
        if double:
            b += sb
        b >>= s
        if zp_add:
            b += zp_add
        np.minimum(b, hi, out=b)
        np.maximum(b, lo, out=b)
        np.copyto(out[i:i + rows], b, casting="unsafe")


#: every integer of magnitude below this is exact in float64
EXACT64 = 1 << 53
#: the sign bit of a float64's bit pattern, as an int64
SIGN_BIT = I64(-(1 << 63))


class _ScaleParams:
    """What RESCALE's float64 path derives from one (multiplier, shift, double_round) alone, made once per distinct
    triple (a graph's RESCALEs repeat theirs every run; small tensors spent most of their time here): the REQUIRE
    verdicts on the multiplier and shift, their extremes, ``m * 2^-s`` and the double-round term ``2^(30-s)``."""

    def __init__(self, m: np.ndarray, s: np.ndarray, double_round: bool) -> None:
        self.m, self.s = m, s
        self.m_ok = bool(np.all(m >= 0))
        self.s_ok = bool(np.all((s >= 2) & (s <= 62)))
        self.double = double_round and bool(np.any(s > 31))
        self.mmax = int(m.max()) if m.size else 0
        self.smax = int(s.max()) if s.size else 2
        self.smin = int(s.min()) if s.size else 2
        ok = self.m_ok and self.s_ok and self.smax <= 53
        # scaled by 2^-s (exact: powers of two, no underflow for s <= 53)
        self.f = np.ldexp(m.astype(np.float64), -s) if ok else None
        self.d = np.ldexp(np.where(s > 31, 1.0, 0.0), 30 - s) if ok else None


#: _ScaleParams by (multiplier bytes, shift bytes, shapes, double_round); a bounded cache of small objects
_SCALE_PARAMS: dict[tuple[bytes, bytes, tuple[int, ...], tuple[int, ...], bool], _ScaleParams] = {}


def _scale_params(m: np.ndarray, s: np.ndarray, double_round: bool) -> _ScaleParams:
    key = (m.tobytes(), s.tobytes(), m.shape, s.shape, double_round)
    hit = _SCALE_PARAMS.get(key)
    if hit is None:
        if len(_SCALE_PARAMS) >= 1024:
            _SCALE_PARAMS.clear()
        hit = _SCALE_PARAMS[key] = _ScaleParams(m, s, double_round)
    return hit


def _require_value_in_shift_range(value: np.ndarray, sp: _ScaleParams, vmin: int, vmax: int) -> None:
    """apply_scale_32's value REQUIRE, ``-(1 << (shift-1)) <= value < 1 << (shift-1)``: settled by the extremes
    ``vmin``, ``vmax`` against the smallest shift, else checked per element."""
    half_lo = sp.smin - 1  # the smallest 2^(s-1): the value REQUIRE holds everywhere if the extremes meet it
    if not (vmin >= -(1 << half_lo) and vmax < (1 << half_lo)):
        half = I64(1) << (sp.s - 1)
        _req((value >= -half) & (value < half), "apply_scale_32 value in [-(1<<(shift-1)), 1<<(shift-1))")


def _rescale_32_float(value: np.ndarray, sp: _ScaleParams, zp_add: int, lo: int, hi: int, out: np.ndarray) -> bool:
    """:func:`rescale_32_into` in float64, when every intermediate is an exactly represented integer; returns False
    (nothing written) when the bound does not hold and the int64 path must run.

    With ``v`` the value, ``T = v * m + (±2^30 when double rounding and shift > 31) + 2^(s-1)`` is an integer and
    ``floor(T * 2^-s) == (v * m + round) >> s``.  It is evaluated scaled by 2^-s (an exact power-of-two scaling), as
    ``floor(v * (m * 2^-s) ± 2^(30-s) + 0.5)``: every partial sum is 2^-s times an integer of magnitude at most
    ``max|v| * max(m) + 2^30 + 2^(max(s)-1)``; when that is below 2^53 every float64 operation is exact (adding
    the zero point too: before the floor when the bound still holds with ``|zp| * 2^max(s)`` added, else after).
    The value REQUIRE is checked on the extremes (exactly per element when the shift is per channel and the extremes
    do not settle it).
    """
    if sp.f is None or sp.d is None:
        return False
    double = sp.double
    vmin, vmax = int(value.min()), int(value.max())
    reach = max(abs(vmin), abs(vmax)) * sp.mmax + (1 << 30) + (1 << (sp.smax - 1))
    if reach >= EXACT64:
        return False
    _require_value_in_shift_range(value, sp, vmin, vmax)
    # the rounding constant is 0.5 whatever the shift, and the zero point joins it when the sums stay below 2^53
    # with it
    fold = reach + abs(zp_add) * (1 << sp.smax) < EXACT64
    c = value.shape[-1]
    rows = max(1, BLOCK // max(1, c))
    n = min(rows, value.shape[0])

    def tile(a: np.ndarray) -> np.ndarray | float:
        # per-channel vectors tiled to a whole block: same-shape float operations run at full vector speed
        return np.ascontiguousarray(np.broadcast_to(a, (n, c))) if a.ndim else float(a)

    f = tile(sp.f)
    const = 0.5 + zp_add if fold else 0.5
    if double:
        # +2^30 for v >= 0, -2^30 for v < 0 (scaled by 2^-s): copysign(d, v * m) (m >= 0; v == 0 gives +0.0, v < 0
        # with m == 0 gives -0.0, and then d < 0.5 leaves 0 either way), made by moving the product's sign bit onto
        # d's bit pattern (two integer passes cost less than np.copysign)
        dbits = np.asarray(tile(sp.d), np.float64).view(I64)
        sbits = np.empty((n, c), I64)
    buf = np.empty((n, c), np.float64)
    flo, fhi = float(lo), float(hi)
    # a signed integer output: with -lo also added before the floor (when the sums stay exact), clip to [0, hi - lo]
    # and let the cast to the unsigned type of the same width truncate (the floor, for values >= 0), then add lo
    # modulo 2^bits - the bit pattern of the signed result; clipping before the floor is the same, the bounds being
    # integers
    ut = np.dtype(f"u{out.dtype.itemsize}") if out.dtype.kind == "i" and out.dtype.itemsize <= 4 else None
    offset = ut is not None and fold and reach + (abs(zp_add) + abs(lo)) * (1 << sp.smax) < EXACT64
    if offset:
        assert ut is not None
        const -= lo
        fhi -= flo
        flo = 0.0
        outu = out.view(ut)
        lo_u = ut.type(lo % (1 << (8 * ut.itemsize)))
    for i in range(0, value.shape[0], rows):
        v = value[i:i + rows]
        k = v.shape[0]
        b = buf[:k]
        np.copyto(b, v, casting="unsafe")
        b *= f[:k] if isinstance(f, np.ndarray) else f
        if double:
            sb = sbits[:k]
            np.bitwise_and(b.view(I64), SIGN_BIT, out=sb)
            np.bitwise_or(sb, dbits[:k] if dbits.ndim else dbits, out=sb)
            b += sb.view(np.float64)
        b += const
        if offset:
            np.clip(b, flo, fhi, out=b)
            ob = outu[i:i + rows]
            np.copyto(ob, b, casting="unsafe")
            if lo_u:
                np.add(ob, lo_u, out=ob)
            continue
        np.floor(b, out=b)
        if zp_add and not fold:
            b += zp_add  # integers: exact
        np.clip(b, flo, fhi, out=b)
        np.copyto(out[i:i + rows], b, casting="unsafe")
    return True


def apply_scale_16(value: Any, multiplier: Any, shift: Any) -> np.ndarray:
    """spec 4.5.5 apply_scale_16.  value is int48; |value*multiplier| < 2^62 so int64 suffices."""
    v = as_i64(value)
    m = as_i64(multiplier)
    s = as_i64(shift)
    _req(m >= 0, "apply_scale_16 multiplier >= 0")
    _req((s >= 2) & (s <= 62), "apply_scale_16 2 <= shift <= 62")
    result = (v * m + (I64(1) << (s - 1))) >> s
    check_fits(result, DType.INT32, "apply_scale_16 result")
    return result


def bit_length(x: Any) -> np.ndarray:
    """Number of significant bits of non-negative integers < 2^53 (0 -> 0)."""
    x = as_i64(x)
    _, e = np.frexp(x.astype(np.float64))
    return e.astype(I64)


def count_leading_zeros32(x: Any) -> np.ndarray:
    """spec 4.5.1 count_leading_zeros on int32 values (bit pattern as unsigned); clz(0) == 32."""
    u = as_i64(x) & I64(0xFFFFFFFF)
    return I64(32) - bit_length(u)


def reciprocal_scale(value: Any) -> tuple[np.ndarray, np.ndarray]:
    """spec 4.5.5 reciprocal_scale: (multiplier, shift) with multiplier/2^shift ~= 1/value."""
    v = as_i64(value)
    _req(v > 0, "reciprocal_scale value > 0")
    k = I64(32) - count_leading_zeros32(v - 1)
    numerator = ((I64(1) << 30) + 1) << k
    return numerator // v, 30 + k


def arith_rshift(a: Any, b: Any) -> np.ndarray:
    """apply_arith_rshift (spec 4.5.1 apply_arith_rshift): sign-extended arithmetic shift."""
    return as_i64(a) >> as_i64(b)


def logical_rshift(a: Any, b: Any, bits: int) -> np.ndarray:
    """spec 4.5.1 apply_logical_rshift: zero-extend from ``bits`` then shift, static_cast back."""
    mask = (I64(1) << I64(bits)) - 1
    return wrap((as_i64(a) & mask) >> as_i64(b), bits)


def lookup_i16(table: np.ndarray, value: Any) -> np.ndarray:
    """apply_lookup_s (spec 1.12.5 General Unary Functions): 513-entry int16 table, 16.7 fixed-point int32 result."""
    t = as_i64(table)
    v = np.clip(as_i64(value), -32768, 32767)
    index = (v + 32768) >> 7
    fraction = v & 0x7F
    base = t[index]
    nxt = t[index + 1]
    slope = nxt - base
    _req((slope >= -32768) & (slope <= 32767), "TABLE slope fits int16")
    result: np.ndarray = (base << 7) + slope * fraction
    return result


def idiv_floor(a: Any, b: Any) -> np.ndarray:
    """spec 4.5.4 idiv_floor (floor division)."""
    return as_i64(a) // as_i64(b)


def idiv_trunc(a: Any, b: Any) -> np.ndarray:
    """C integer division truncating towards zero (spec 4.5.4 idiv, apply_intdiv_s)."""
    a = as_i64(a)
    b = as_i64(b)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) ^ (b < 0), -q, q)
