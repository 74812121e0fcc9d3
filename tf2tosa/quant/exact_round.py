"""Exact ``round(acc · s)`` for wide integer accumulators, in i32 TOSA ops (multi-limb arithmetic).

LiteRT's reference fully_connected (and the 16x8 one in every kernel mode, since its bias is int64) requantizes
in double precision: ``(int32)round((double)acc · s)`` with ``s = (double)s_x·(double)s_w[c]/(double)s_out``,
rounding half away from zero.  For an int8 model the accumulator fits i32 and :func:`.fully_connected.round_scale_exact`
reproduces it with a few MULs.  A 16x8 model accumulates in 64 bits (i48 in TOSA, spec: CONV2D); with a deep input
(1,280 features and more) ``|acc|`` exceeds 2^31, and the only way out of i48 — RESCALE with a 16-bit multiplier
(spec: apply_scale_16) — cannot carry a 53-bit scale.  So:

1. **The accumulator, exactly, in i32 pieces.**  ``R = RESCALE(acc, multiplier 1, shift 8)`` is
   ``floor((acc + 128) / 256)`` (exact, no information lost but the low byte).  The low byte comes from a second,
   int8 convolution of the input's low bytes: with ``x = 256·x_h + x_l`` (``x_l`` in [0, 255], stored as the i8
   ``x_l - 128`` with input zero point -128), ``A_l = Σ x_l·(w - zp_w)`` is congruent to ``acc - bias`` modulo 256,
   so ``e = acc - 256·R = ((A_l + (bias + 128) mod 256) mod 256) - 128`` and ``acc = 256·R + e``.
2. **|acc| in base 2^15 limbs** (each in [0, 2^15), held in i32), and the sign.
3. **Schoolbook multiplication by the scale.**  ``s = M·2^-K`` exactly (a double is a dyadic rational); with
   ``K' = 15·k >= K`` and ``M' = M·2^(K'-K)`` split into base-2^15 limbs (per channel), every partial product of
   two limbs is below 2^30 and splits into a low and a high limb; column sums with carries never exceed i32.
   ``q = floor((|acc|·M' + 2^(K'-1)) / 2^K')`` is read off limbs k and k+1 (anything above saturates).
4. ``round(-y) = -round(y)``: the sign is restored with SELECT.

That is the exact rational rounding of ``acc·s``.  The kernel rounds ``acc·s`` to a double first, which can land
on ``n + 1/2`` from just below; ``round_scaled(..., double_product=True)`` reads that case off the fraction limbs
and rounds up as the kernel does (tests/near_half.py finds such accumulators by lattice reduction).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..ir import DType, Value
from ..tosa.builder import Builder
from .elementwise import Fx
from .rescale import rescale_raw

LIMB = 15
MASK = (1 << LIMB) - 1
#: RESCALE(acc, 1, 8) must fit i32 (apply_scale_16's REQUIRE): |acc| < 2^39 - 256
WIDE_LIMIT = (1 << 39) - 256


def wide_acc(b: Builder, acc48: Value, low_acc: Callable[[], Value], bias: Sequence[int]) -> tuple[Value, Value]:
    """(R, e) with ``acc = 256·R + e`` exactly, R i32 and e in [-128, 128) (step 1 of the module docstring).

    ``low_acc()`` builds ``Σ x_l·(w - zp_w)`` (i32, same shape as ``acc48``); ``bias`` holds the per-channel (or
    one) int64 bias values already inside ``acc48``.
    """
    o = Fx(b, acc48.type.rank)
    r = rescale_raw(b, acc48, [1], [8], DType.INT32, scale32=False, double_round=False)
    c = [(int(v) + 128) % 256 for v in bias]
    e = o.sub(o.band(o.add(low_acc(), o.c(c if len(set(c)) > 1 else c[0])), 255), 128)
    return r, e


def low_byte_input(b: Builder, x: Value) -> Value:
    """The i16 input's low bytes as i8 ``x_l - 128`` (to be read with input zero point -128)."""
    o = Fx(b, x.type.rank)
    lo = o.sub(o.band(b.cast(x, DType.INT32), 255), 128)
    return b.cast(lo, DType.INT8)


def limbs_of_wide(b: Builder, r: Value, e: Value) -> tuple[Value, list[Value]]:
    """(negative?, base-2^15 limbs of |256·r + e|) for |r| < 2^31."""
    o = Fx(b, r.type.rank)
    u = o.add(o.mul(o.band(r, 127), 256), e)  # in [-128, 2^15 - 128)
    d0 = o.band(u, MASK)
    h = o.add(o.shr(r, 7), o.shr(u, LIMB))  # acc = 2^15·h + d0
    neg = o.lt0(h)
    nz = o.shr(o.add(d0, MASK), LIMB)  # d0 != 0
    habs = o.where(neg, o.sub(o.sub(0, h), nz), h)
    d0abs = o.where(neg, o.band(o.sub(1 << LIMB, d0), MASK), d0)
    return neg, [d0abs, o.band(habs, MASK), o.shr(habs, LIMB)]


def limbs_of_signed(b: Builder, x: Value) -> tuple[Value, list[Value]]:
    """(negative?, base-2^15 limbs of |x|) for any i32 ``x`` (also -2^31: no ABS, no overflow)."""
    o = Fx(b, x.type.rank)
    d0 = o.band(x, MASK)
    h = o.shr(x, LIMB)  # x = 2^15·h + d0, |h| <= 2^16
    neg = o.lt0(h)
    nz = o.shr(o.add(d0, MASK), LIMB)
    habs = o.where(neg, o.sub(o.sub(0, h), nz), h)
    d0abs = o.where(neg, o.band(o.sub(1 << LIMB, d0), MASK), d0)
    return neg, [d0abs, o.band(habs, MASK), o.shr(habs, LIMB)]


def mul_limbs(b: Builder, xs: Sequence[Value], ys: Sequence[Value]) -> list[Value]:
    """The base-2^15 limbs of the product of two limb vectors (schoolbook, carries propagated)."""
    o = Fx(b, xs[0].type.rank)
    cols: list[list[Value]] = [[] for _ in range(len(xs) + len(ys))]
    for i, x in enumerate(xs):
        for j, y in enumerate(ys):
            p = o.mul(x, y)
            cols[i + j].append(o.band(p, MASK))
            cols[i + j + 1].append(o.shr(p, LIMB))
    out: list[Value] = []
    carry: Value | None = None
    for col in cols:
        terms = col + ([carry] if carry is not None else [])
        acc = terms[0]
        for t in terms[1:]:
            acc = o.add(acc, t)
        out.append(o.band(acc, MASK))
        carry = o.shr(acc, LIMB)
    return out


def limbs_of_i32(b: Builder, acc: Value) -> tuple[Value, list[Value]]:
    """(negative?, base-2^15 limbs of |acc|) for an i32 ``acc`` > -2^31."""
    o = Fx(b, acc.type.rank)
    neg = o.lt0(acc)
    a = b.abs(acc)
    return neg, [o.band(a, MASK), o.band(o.shr(a, LIMB), MASK), o.shr(a, 2 * LIMB)]


def scale_limbs(scales: Sequence[float]) -> tuple[list[list[int]], int]:
    """Per-channel base-2^15 limbs of ``M'_c`` and the common ``k`` with ``s_c = M'_c · 2^(-15k)`` exactly."""
    from fractions import Fraction  # (and decimal): only for the few exact-rounding lowerings

    fr = [Fraction(float(s)) for s in scales]
    if any(f < 0 for f in fr):
        raise ValueError("negative scale")
    kbits = max(f.denominator.bit_length() - 1 for f in fr)
    k = max(1, -(-kbits // LIMB))
    ms = [int(f * (1 << (LIMB * k))) for f in fr]  # exact: every denominator divides 2^(15k)
    n = max(1, -(-max(m.bit_length() for m in ms) // LIMB))
    return [[(m >> (LIMB * j)) & MASK for m in ms] for j in range(n)], k


def round_scaled(b: Builder, neg: Value, limbs: Sequence[Value], scales: Sequence[float], cap: int = 1 << 16,
                 *, half_up: bool = False, wrap32: bool = False, double_product: bool = False,
                 rows: int = 1) -> Value:
    """``sign · min(floor(|a|·s_c + 1/2), cap)`` as i32 (round half away from zero), channels on the last axis.

    ``double_product``: round ``fl64(|a|·s)`` instead of the exact product, as ``round((double)acc · s)`` does.
    The two differ only when ``y = |a|·s`` lies just below a half-integer ``n + 1/2`` within half an ulp of ``y``
    (``fl64`` then returns ``n + 1/2``, which rounds up): with ``R`` the fraction bits of ``y + 1/2`` (the low
    ``K'`` bits of the limb sum) that is ``R >= 2^K' - 2^p``, ``p = K' + e - 53``, ``e = floor(log2 y)`` =
    ``bitlen(n) - 1`` (``-2`` for n = 0) — the top ``K' - p = 22 + clz(n) (+1 for n = 0)`` bits of ``R`` all ones.

    ``half_up``: ``floor(a·s + 1/2)`` for negative ``a`` too (apply_scale_16 / TFLite's int64 MBQM); ``wrap32``:
    the low 32 bits of the (signed) result instead of a saturated one (C's int64 → int32 cast).  ``rows``: the
    scales are ``rows`` × channels, row-major, one row per index of the first axis (stacked fully_connected rows)."""
    o = Fx(b, neg.type.rank)
    mlimbs, k = scale_limbs(scales)
    ncol = max(len(limbs) + len(mlimbs), k + 1)
    cols: list[list[Value]] = [[] for _ in range(ncol)]
    for i, a in enumerate(limbs):
        for j, mv in enumerate(mlimbs):
            if not any(mv):
                continue
            p = o.mul(a, o.c(mv[0] if len(set(mv)) == 1 else np.asarray(mv).reshape(rows, -1) if rows > 1 else mv))
            cols[i + j].append(o.band(p, MASK))
            cols[i + j + 1].append(o.shr(p, LIMB))
    cols[k - 1].append(o.c(1 << (LIMB - 1)))  # + 1/2
    if half_up:  # negative a: -floor(|a|·s + 1/2 - 2^-K') = floor(a·s + 1/2)
        cols[0].append(o.where(neg, -1, 0))
    digits: list[Value | None] = []
    carry: Value | None = None
    for col in cols:
        terms = col + ([carry] if carry is not None else [])
        if not terms:
            digits.append(None)
            carry = None
            continue
        s = terms[0]
        for t in terms[1:]:
            s = o.add(s, t)
        digits.append(o.band(s, MASK))
        carry = o.shr(s, LIMB)
    zero = o.c(0)
    dig = [d if d is not None else zero for d in digits] + [carry if carry is not None else zero]
    if wrap32:
        dig += [zero, zero]
        low = b.binary("BITWISE_OR", dig[k], o.mul(dig[k + 1], 1 << LIMB))
        low = b.binary("BITWISE_OR", low, o.mul(o.band(dig[k + 2], 3), 1 << (2 * LIMB)))
        return o.where(neg, o.mul(low, -1), low)  # MUL keeps the low 32 bits (spec: MUL): a wrapping negation
    q = dig[k] if k < len(dig) else zero
    if k + 1 < len(dig):
        q = o.add(q, o.mul(dig[k + 1], 1 << LIMB))
    if double_product:
        q = _double_rounding_step(b, o, q, dig, k)
    above: Value | None = None
    for d in dig[k + 2:]:
        above = d if above is None else o.add(above, d)
    q = b.binary("MINIMUM", q, o.c(cap), nan_mode="PROPAGATE")
    if above is not None:
        q = o.where(b.binary("GREATER", above, o.c(0)), cap, q)
    return o.where(neg, o.sub(0, q), q)


def _double_rounding_step(b: Builder, o: Fx, q: Value, dig: Sequence[Value], k: int) -> Value:
    """``q + 1`` where fl64 rounds ``|a|·s`` up onto ``q + 1/2`` (see :func:`round_scaled`), else ``q``."""
    clz = b.clz(q)
    ones = o.add(o.add(clz, 22), b.cast(b.binary("EQUAL", q, o.c(0)), DType.INT32))  # top bits of R that must be 1
    cond: Value | None = None
    for i in range(4):  # j <= 55 < 60: the four digits below K'
        d = dig[k - 1 - i] if k - 1 - i >= 0 else o.c(0)
        need = b.binary("MAXIMUM", b.binary("MINIMUM", o.sub(ones, 15 * i), o.c(LIMB), nan_mode="PROPAGATE"),
                        o.c(0), nan_mode="PROPAGATE")
        mask = o.sub(b.binary("LOGICAL_LEFT_SHIFT", o.c(1), o.sub(LIMB, need)), 1)
        ok = b.binary("EQUAL", b.binary("BITWISE_OR", d, mask), o.c(MASK))
        cond = ok if cond is None else b.binary("LOGICAL_AND", cond, ok)
    assert cond is not None
    return o.where(cond, o.add(q, 1), q)


__all__ = ["LIMB", "WIDE_LIMIT", "limbs_of_i32", "limbs_of_signed", "limbs_of_wide", "low_byte_input", "mul_limbs",
           "round_scaled", "scale_limbs", "wide_acc"]
