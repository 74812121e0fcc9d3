"""Bit-exact integer helpers of the TOSA 1.0 specification, vectorised over numpy int64 arrays.

Every kernel uses these (one implementation of each helper).  Line references are
to the specification seed (``S<line>``) and to ``op_inventory.md`` §5.

Arithmetic is in int64.  Where the spec's 64-bit intermediates could exceed int64
(e.g. ``product + (1 << 62)``), the equivalent overflow-free form is used:
``(p + 2**(s-1)) >> s == (p >> s) + ((p >> (s-1)) & 1)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.types import DType
from .registry import ExecutionError

I64 = np.int64


def _req(ok: Any, msg: str) -> None:
    if not bool(np.all(ok)):
        raise ExecutionError(f"REQUIRE violated (result unpredictable): {msg}")


def as_i64(x: Any) -> np.ndarray:
    return np.asarray(x).astype(I64)


def int_range(dt: DType) -> tuple[int, int]:
    return dt.range()


def check_fits(x: np.ndarray, dt: DType, what: str) -> None:
    """REQUIRE(c >= minimum_s<dt> && c <= maximum_s<dt>) of apply_add_s / apply_sub_s (S11290-11295)."""
    lo, hi = dt.range()
    if x.size:
        _req((x.min() >= lo) & (x.max() <= hi), f"{what} overflows {dt.value}")


def apply_add_s(a: Any, b: Any, dt: DType) -> np.ndarray:
    """S11290: exact add with the no-overflow REQUIRE."""
    c = as_i64(a) + as_i64(b)
    check_fits(c, dt, "add")
    return c


def apply_sub_s(a: Any, b: Any, dt: DType) -> np.ndarray:
    """S11416: exact subtract with the no-overflow REQUIRE."""
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


def apply_clip(x: np.ndarray, lo: Any, hi: Any) -> np.ndarray:
    """apply_clip_s for integers (S11383-11394)."""
    _req(np.asarray(lo) <= np.asarray(hi), "clip min <= max")
    return np.minimum(np.maximum(x, lo), hi)


def shift_round_half_up(x: np.ndarray, shift: Any) -> np.ndarray:
    """(x + (1 << (shift-1))) >> shift for shift >= 1, without int64 overflow (arithmetic shift)."""
    x = as_i64(x)
    s = as_i64(shift)
    return (x >> s) + ((x >> (s - 1)) & 1)


def apply_scale_32(value: Any, multiplier: Any, shift: Any, double_round: bool = False) -> np.ndarray:
    """S11743-11756 (op_inventory §5.2).  Returns int64 (the caller static_casts / clips)."""
    v = as_i64(value)
    m = as_i64(multiplier)
    s = as_i64(shift)
    _req(m >= 0, "apply_scale_32 multiplier >= 0")
    _req((s >= 2) & (s <= 62), "apply_scale_32 2 <= shift <= 62")
    half = I64(1) << (s - 1)
    _req((v >= -half) & (v < half), "apply_scale_32 value in [-(1<<(shift-1)), 1<<(shift-1))")
    rnd = np.broadcast_to(half, np.broadcast(v, s).shape).copy()
    if double_round:
        big = np.broadcast_to(s > 31, rnd.shape)
        pos = np.broadcast_to(v >= 0, rnd.shape)
        rnd = rnd + np.where(big, np.where(pos, I64(1) << 30, -(I64(1) << 30)), I64(0))
    # |v*m| <= 2^31 * (2^31-1) < 2^62 and rnd <= 2^61 + 2^30: the sum fits int64
    result: np.ndarray = (v * m + rnd) >> s
    return result


def apply_scale_16(value: Any, multiplier: Any, shift: Any) -> np.ndarray:
    """S11758-11766.  value is int48; |value*multiplier| < 2^62 so int64 suffices."""
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
    """S11429-11441 on int32 values (bit pattern as unsigned); clz(0) == 32."""
    u = as_i64(x) & I64(0xFFFFFFFF)
    return I64(32) - bit_length(u)


def reciprocal_scale(value: Any) -> tuple[np.ndarray, np.ndarray]:
    """S11775-11783: (multiplier, shift) with multiplier/2^shift ~= 1/value."""
    v = as_i64(value)
    _req(v > 0, "reciprocal_scale value > 0")
    k = I64(32) - count_leading_zeros32(v - 1)
    numerator = ((I64(1) << 30) + 1) << k
    return numerator // v, 30 + k


def arith_rshift(a: Any, b: Any) -> np.ndarray:
    """apply_arith_rshift (S11304-11307): sign-extended arithmetic shift."""
    return as_i64(a) >> as_i64(b)


def logical_rshift(a: Any, b: Any, bits: int) -> np.ndarray:
    """apply_logical_rshift (S11337-11340): zero-extend from ``bits`` then shift, static_cast back."""
    mask = (I64(1) << I64(bits)) - 1
    return wrap((as_i64(a) & mask) >> as_i64(b), bits)


def lookup_i16(table: np.ndarray, value: Any) -> np.ndarray:
    """apply_lookup_s (S843-854): 513-entry int16 table, 16.7 fixed-point int32 result."""
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


def round_half_even(x: np.ndarray) -> np.ndarray:
    """round_to_nearest_int with ties to even (CAST, S9730)."""
    return np.rint(x)


def idiv_floor(a: Any, b: Any) -> np.ndarray:
    """S11689-11695 (floor division)."""
    return as_i64(a) // as_i64(b)


def idiv_trunc(a: Any, b: Any) -> np.ndarray:
    """C integer division truncating towards zero (S11676-11678, apply_intdiv_s)."""
    a = as_i64(a)
    b = as_i64(b)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) ^ (b < 0), -q, q)
