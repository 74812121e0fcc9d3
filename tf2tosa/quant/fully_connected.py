"""fully_connected's output stage: LiteRT's double-precision requantization ``round(acc · s)``, reproduced exactly.

LiteRT's reference fully_connected requantizes with ``(int32)round((double)acc · s)``, ``s = s_x·s_w[c]/s_out``
in double (not the 32-bit MultiplyByQuantizedMultiplier of the conv family, :func:`.conv.requantize_acc`).  The
exact forms, cheapest first (:func:`fc_output` picks):

* one SINGLE_ROUND RESCALE where an exhaustive check over the reachable accumulators proves it equal
  (:func:`single_rescale_exact`, int8 outputs);
* a few i32 MULs splitting the scale in two 32-bit halves (:func:`round_scale_exact`, accumulators within i32);
* multi-limb arithmetic (:mod:`.exact_round`) for wider accumulators (16x8 models).

Only beyond those does it fall back to the MBQM RESCALE (within 1 LSB), recorded with :func:`.conv.note_inexact`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from .activation import fused_activation_q
from .common import per_tensor, qparams
from .conv import abs_weight_sums, note_inexact, requantize_acc
from .rescale import rescale, rescale_raw


def exact_split(scales: Sequence[float]) -> tuple[list[int], list[int], int] | None:
    """(M_hi, M_lo, L) with ``s_c·2^(L+32) = M_hi[c]·2^L + M_lo[c]`` (exact for ``L + 32 >= `` every scale's
    binary denominator, else truncated below 2^-63), M_hi < 2^31 and M_lo < 2^L, L in [1, 31]; None when a scale
    is >= 1/2 (M_hi would not fit i32)."""
    from fractions import Fraction

    if any(not 0.0 <= s < 0.5 for s in scales):
        return None
    k = max(33, *(Fraction(s).denominator.bit_length() - 1 for s in scales))
    k = min(k, 63)
    big = [int(Fraction(s) * (1 << k)) for s in scales]  # floor
    lbits = k - 32
    return [m >> lbits for m in big], [m & ((1 << lbits) - 1) for m in big], lbits


def _single_rescale_channel(sc: float, bound: int, zp_out: int, lo: int, hi: int, top: int,
                            half: np.ndarray) -> tuple[int, int] | None:
    """The first (multiplier, shift) candidate that passes :func:`single_rescale_exact`'s check for one channel:
    the nearest multiplier at the largest shift, then its neighbours and smaller shifts (LiteRT's double product
    can round onto a half-integer, which a neighbouring multiplier may reproduce)."""
    top_shift = min(62, int(np.floor(np.log2(((1 << 31) - 1) / sc))))
    for shift in range(top_shift, top_shift - 4, -1):
        near = int(np.floor(sc * 2.0**shift + 0.5))
        for mult in (near, near + 1, near - 1):
            if not 0 < mult < 1 << 31 or shift < 2 or (shift < 32 and bound >= 1 << (shift - 1)):
                continue
            err = float(bound) * abs(sc - mult / 2.0**shift) + (top + 1) * 2.0**-50 + 1e-12
            width = int(np.ceil(2 * err / sc)) + 3
            if width > 64:
                continue
            start = np.floor((half - err) / sc).astype(np.int64) - 1
            acc = (start[:, None] + np.arange(width, dtype=np.int64)[None, :]).ravel()
            acc = acc[np.abs(acc) <= bound]
            prod = acc.astype(np.float64) * np.float64(sc)
            tfl = np.sign(prod) * np.floor(np.abs(prod) + 0.5)
            want = np.clip(tfl.astype(np.int64) + zp_out, lo, hi)
            got = np.clip(((acc * mult + (1 << (shift - 1))) >> shift) + zp_out, lo, hi)
            if np.array_equal(want, got):
                return mult, shift
    return None


def single_rescale_exact(scales: Sequence[float], bound: int, zp_out: int, lo: int = -128,
                         hi: int = 127) -> tuple[list[int], list[int]] | None:
    """Per-channel SINGLE_ROUND RESCALE ``(multiplier, shift)`` pairs equal to LiteRT's double-precision
    requantization ``clip(round_half_away(fl64(acc·s[c])) + zp_out, lo, hi)`` on every accumulator ``|acc| <=
    bound``, or None.

    The candidate is the multiplier below 2^31 with the largest shift: ``acc·M/2^S`` is within
    ``d = bound·|s - M/2^S|`` of ``acc·s``, and ``fl64(acc·s)`` within ``|acc·s|·2^-53``.  So the two roundings can
    only differ where ``acc·s`` lies within ``d`` (plus that float error) of a half-integer ``n + 1/2``; elsewhere
    both equal the nearest integer.  The check tries every integer ``acc`` in a window of one unit beyond each such
    interval, for every ``n`` up to where all outputs saturate (both roundings are monotone, so beyond it they
    agree): an exhaustive check of the only places they can differ, hence a proof.  Scales of 1/2 or more, and
    windows wider than 64 accumulators (a scale so small that ``d/s`` is large), keep the exact multi-op form.
    """
    mults: list[int] = []
    shifts: list[int] = []
    top = max(abs(lo - zp_out), abs(hi - zp_out)) + 2
    half = np.arange(-top, top + 1, dtype=np.float64) + 0.5
    if any(not 0.0 < sc < 0.5 for sc in scales):
        return None
    first = _first_candidates_pass(scales, bound, zp_out, lo, hi, top, half)
    for sc, hit in zip(scales, first, strict=True):
        found = hit or _single_rescale_channel(sc, bound, zp_out, lo, hi, top, half)
        if found is None:
            return None
        mults.append(found[0])
        shifts.append(found[1])
    return mults, shifts


def _first_candidates_pass(scales: Sequence[float], bound: int, zp_out: int, lo: int, hi: int, top: int,
                           half: np.ndarray) -> list[tuple[int, int] | None]:
    """:func:`_single_rescale_channel`'s first candidate (the nearest multiplier at the largest shift) checked for
    every channel at once: per channel its ``(multiplier, shift)`` when that candidate passes the same exhaustive
    check, else None (the caller then runs the channel's whole search, which tries this candidate first again).

    The candidates and their windows are computed per channel with the same scalar expressions as the search; only
    the check itself runs on arrays (channels x half-integers x window), with the same IEEE operations (exactly
    rounded, so the same values) and a mask for the columns beyond a channel's window.  Channels whose window is
    narrow are checked at the one accumulator per half-integer that can differ (:func:`_nearest_only_pass`, the
    same verdict)."""
    cand: list[tuple[int, int, int, float, float]] = []  # channel, mult, shift, err, sc
    log2 = np.log2
    for c, sc in enumerate(scales):  # (math.floor/ceil of a float are np.floor/ceil's integers, without the ufunc)
        shift = min(62, math.floor(log2(((1 << 31) - 1) / sc)))
        mult = math.floor(sc * 2.0**shift + 0.5)
        if not 0 < mult < 1 << 31 or shift < 2 or (shift < 32 and bound >= 1 << (shift - 1)):
            continue
        err = float(bound) * abs(sc - mult / 2.0**shift) + (top + 1) * 2.0**-50 + 1e-12
        if math.ceil(2 * err / sc) + 3 <= 64:
            cand.append((c, mult, shift, err, sc))
    out: list[tuple[int, int] | None] = [None] * len(scales)

    def is_narrow(p: tuple[int, int, int, float, float]) -> bool:
        return 4 * p[3] <= p[4] and 2 * (p[4] + p[3]) < 1 and (top + 1) < p[4] * 2.0**40

    # a channel whose window is narrow next to the spacing of the half-integers is checked at one accumulator per
    # half-integer (the same verdict, see _nearest_only_pass); the others at their whole windows below
    narrow = [p for p in cand if is_narrow(p)]
    # (channels x half-integers at a time: a 4096-channel layer at once took 37 MB of float64 arrays)
    step = max(1, (1 << 16) // len(half))
    for k in range(0, len(narrow), step):
        part = narrow[k:k + step]
        for (c, mult, shift, _, _), good in zip(part, _nearest_only_pass(part, bound, zp_out, lo, hi, half),
                                               strict=True):
            if good:
                out[c] = (mult, shift)
    if narrow:
        cand = [p for p in cand if not is_narrow(p)]
    if not cand:
        return out
    # a few hundred kB of accumulators per step: the arrays stay in the cache
    chunk = max(1, (1 << 15) // (len(half) * max(int(np.ceil(2 * p[3] / p[4])) + 3 for p in cand)))
    for k in range(0, len(cand), chunk):
        part = cand[k:k + chunk]
        sc_a = np.array([p[4] for p in part], np.float64)[:, None]
        err_a = np.array([p[3] for p in part], np.float64)[:, None]
        width = np.array([int(np.ceil(2 * p[3] / p[4])) + 3 for p in part], np.int64)
        mult_a = np.array([p[1] for p in part], np.int64)[:, None, None]
        shift_a = np.array([p[2] for p in part], np.int64)[:, None, None]
        start = np.floor((half[None, :] - err_a) / sc_a).astype(np.int64) - 1
        cols = np.arange(int(width.max()), dtype=np.int64)
        acc = start[:, :, None] + cols[None, None, :]
        live = (cols[None, None, :] < width[:, None, None]) & (np.abs(acc) <= bound)
        prod = acc.astype(np.float64) * sc_a[:, :, None]
        # sign(p)·floor(|p| + 1/2) as trunc(p ± 1/2): p ± 1/2 rounds symmetrically, so the same integers
        want = np.trunc(prod + np.copysign(0.5, prod)).astype(np.int64)
        # shifts above 62 do not occur (capped), so acc·mult + 2^(shift-1) stays in int64 as in the search
        got = (acc * mult_a + (np.int64(1) << (shift_a - 1))) >> shift_a
        # equal before the output zero point and the clip: equal after; the few others are compared saturated
        off = live & (want != got)
        if off.any():
            off &= np.clip(want + zp_out, lo, hi) != np.clip(got + zp_out, lo, hi)
        ok = ~off.any(axis=(1, 2))
        for (c, mult, shift, _, _), good in zip(part, ok.tolist(), strict=True):
            if good:
                out[c] = (mult, shift)
    return out


def _nearest_only_pass(cand: Sequence[tuple[int, int, int, float, float]], bound: int, zp_out: int, lo: int, hi: int,
                      half: np.ndarray) -> list[bool]:
    """:func:`_first_candidates_pass`'s verdicts for channels with ``err <= sc/4``, ``2·(sc + err) < 1`` and
    ``|half| / sc < 2^40``, checking one accumulator per half-integer instead of the whole window.

    The two roundings can differ only at an ``acc`` with ``|acc·sc - h| <= err`` for a half-integer ``h`` (the
    argument of :func:`single_rescale_exact`).  With ``err <= sc/4`` such an ``acc`` is within 1/4 of ``h/sc``, so it
    is ``rint(h/sc)``; with ``2·(sc + err) < 1`` the window of ``h`` (``acc·sc`` within ``err + 2·sc`` of ``h``) is
    within ``err`` of no other half-integer.  So the accumulators of the windows where the results can differ are
    exactly the ``rint(h/sc)`` within ``err`` of ``h`` (with ``|acc| <= bound``), each inside its window; they are
    picked with a float distance test whose margin (1e-9) is far above its rounding error (< 2^-30 here), and
    compared with the same operations as the window check.  Picking a few more changes nothing: results away from
    every half-integer are equal.  A channel passes when none differs after the clip, as in the window check."""
    sc = np.array([p[4] for p in cand], np.float64)
    err = np.array([p[3] for p in cand], np.float64)
    mult = np.array([p[1] for p in cand], np.int64)
    shift = np.array([p[2] for p in cand], np.int64)
    nearest = np.multiply(half[None, :], 1.0 / sc[:, None])  # half/sc within 2^-11 (|half/sc| < 2^40)
    np.rint(nearest, out=nearest)
    dist = np.multiply(nearest, sc[:, None])
    np.subtract(dist, half[None, :], out=dist)
    np.abs(dist, out=dist)
    ch, col = np.nonzero(dist <= err[:, None] + 1e-9)
    acc = nearest[ch, col].astype(np.int64)
    keep = np.abs(acc) <= bound
    ch, acc = ch[keep], acc[keep]
    prod = acc.astype(np.float64) * sc[ch]
    want = np.trunc(prod + np.copysign(0.5, prod)).astype(np.int64)
    got = (acc * mult[ch] + (np.int64(1) << (shift[ch] - 1))) >> shift[ch]
    off = (want != got) & (np.clip(want + zp_out, lo, hi) != np.clip(got + zp_out, lo, hi))
    return (np.bincount(ch[off], minlength=len(cand)) == 0).tolist()


def round_scale_exact(b: Builder, acc: Value, scales: Sequence[float], out: Value) -> Value | None:
    """``clip(round_half_away(acc·s[c]) + zp_out)`` computed exactly from an i32 accumulator (last dim = channels).

    LiteRT's reference fully_connected requantizes in double: ``(int32)round((double)acc · s)`` with
    ``s = (double)s_x·s_w[c]/s_out`` (reference_integer_ops::FullyConnected/FullyConnectedPerChannel, the variant
    taking float scales).  A 32-bit multiplier RESCALE (relative error 2^-31) misses it near half-integers, so
    with ``s = M·2^-K`` (M split at bit L = K-32 into M_hi, M_lo) and ``a = |acc| < 2^31``:

        u = a·M_hi = hi·2^32 + lo          lo = MUL(a, M_hi, shift 0) (the low 32 bits, spec: MUL),
                                           hi = MUL(a, M_hi, shift 32) - [lo >= 2^31] (spec: MUL)
        t = floor(a·M_lo / 2^L)            = MUL(a, M_lo, shift L) - bit L-1 of MUL(a, M_lo, shift 0)
        floor(a·s + 1/2) = hi + [lo + t >= 2^31]

    (the carry is at most 1 because lo·2^L + a·M_lo + 2^(K-1) < 2^(K+1)).  The sign is restored with SELECT and a
    RESCALE ×1 adds the output zero point and saturates.  Returns None when a scale is >= 1/2.
    """
    split = exact_split(scales)
    if split is None:
        return None
    mh, ml, lbits = split
    rank = acc.type.rank
    i32 = DType.INT32

    def vec(vals: Sequence[int]) -> Value:
        return b.const(np.asarray(vals, np.int64).reshape((1,) * (rank - 1) + (len(vals),)), i32)

    def scalar(v: int) -> Value:
        return b.const(np.full((1,) * rank, v, np.int64), i32)

    a = b.abs(acc)
    lo = b.mul(a, vec(mh), 0)
    hi = b.binary("ADD", b.mul(a, vec(mh), 32), b.binary("ARITHMETIC_RIGHT_SHIFT", lo, scalar(31), round=False))
    low_l = b.mul(a, vec(ml), 0)
    bit = b.binary("BITWISE_AND", b.binary("ARITHMETIC_RIGHT_SHIFT", low_l, scalar(lbits - 1), round=False),
                   scalar(1))
    t = b.binary("SUB", b.mul(a, vec(ml), lbits), bit)
    room = b.binary("SUB", scalar((1 << 31) - 1), b.binary("MAXIMUM", lo, scalar(0), nan_mode="PROPAGATE"))
    carry = b.binary("LOGICAL_OR", b.binary("GREATER", scalar(0), lo), b.binary("GREATER", t, room))
    q = b.binary("ADD", hi, b.cast(carry, i32))
    zero = b.zp(0, i32)
    signed = b.emit("SELECT", [b.binary("GREATER", scalar(0), acc), b.negate(q, zero, zero), q]).result
    # keep the RESCALE ×1 within apply_scale_32's value range (spec: apply_scale_32); anything this big saturates anyway
    lim = 1 << 24
    signed = b.binary("MAXIMUM", b.binary("MINIMUM", signed, scalar(lim), nan_mode="PROPAGATE"), scalar(-lim),
                      nan_mode="PROPAGATE")
    zp_out = per_tensor(out, "output")[1]
    return rescale(b, signed, 1.0, out.dtype, out_zp=zp_out if out.dtype is DType.INT8 else 0,
                   out_quant=qparams(out), double_round=False)


def acc_bound(x: Value, w: Value, bias: Value | None, wzp: int) -> int:
    """A static bound on |sum((x - zp_x)(w - zp_w)) + bias| over every input (constant weights and bias)."""
    wc = w.const()
    if wc is None:
        return 1 << 62
    lo, hi = x.dtype.range()
    zx = per_tensor(x)[1] if x.dtype is DType.INT8 else 0
    xmax = max(abs(lo - zx), abs(hi - zx))
    per_c = abs_weight_sums(np.asarray(wc), wzp) * xmax
    bc = bias.const() if bias is not None else None
    if bc is not None:
        per_c = per_c + np.abs(np.asarray(bc, np.int64).reshape(-1))
    return int(per_c.max(initial=0))


def fc_output(b: Builder, op: Operation, acc: Value, scales: Sequence[float], tfl_acc: DType | None,
              bound: int, low_acc: Callable[[], Value] | None = None, bias: Sequence[int] = (0,),
              activation: bool = True) -> Value:
    """fully_connected's output stage, then (``activation``) the fused activation's CLAMP.

    LiteRT requantizes fully_connected in double, ``round(acc · s)`` (see :func:`round_scale_exact`), reproduced
    exactly by: :func:`round_scale_exact` when the accumulator provably fits i32 (``bound``) and the scales are
    below 1/2; the multi-limb :mod:`.exact_round` otherwise — for an i48 accumulator (16x8) of up to 2^39 it needs
    ``low_acc`` (the low-byte int8 convolution, see :func:`exact_round.wide_acc`) and the int64 ``bias`` values.
    Only beyond that does it fall back to the MBQM RESCALE of :func:`requantize_acc` (within 1 LSB), recorded
    with :func:`note_inexact`."""
    from . import exact_round as X  # (with elementwise and tflite_reference: loaded by a quantized rule only)

    out = op.results[0]
    y = None
    if bound < (1 << 31) - 1:
        acc32 = acc if acc.dtype is DType.INT32 else rescale(b, acc, 1.0, DType.INT32, scale32=False)
        # int8 outputs: the double product's rounding can only matter once in ~2^27 channels (see exact_round);
        # one RESCALE where an exhaustive check over the reachable accumulators proves it equal
        single = None
        if acc.dtype is DType.INT32 and out.dtype is DType.INT8:
            single = single_rescale_exact(scales, bound, per_tensor(out, "output")[1])
        if single is not None:
            y = rescale_raw(b, acc32, single[0], single[1], DType.INT8, out_zp=per_tensor(out, "output")[1],
                            out_quant=qparams(out), double_round=False)
        elif acc.dtype is DType.INT32:
            y = round_scale_exact(b, acc32, scales, out)
        if y is None:
            neg, limbs = X.limbs_of_i32(b, acc32)
            y = _saturate_out(b, X.round_scaled(b, neg, limbs, scales, double_product=True), out)
    elif acc.dtype is DType.INT48 and low_acc is not None and bound < X.WIDE_LIMIT:
        r, e = X.wide_acc(b, acc, low_acc, bias)
        neg, limbs = X.limbs_of_wide(b, r, e)
        y = _saturate_out(b, X.round_scaled(b, neg, limbs, scales, double_product=True), out)
    if y is None:
        note_inexact(b, op, f"accumulator bound {bound} too wide for the exact double-precision requantization; "
                            "a 32/16-bit multiplier RESCALE is used (may differ by 1 LSB)")
        y = requantize_acc(b, acc, scales, out, tfl_acc)
    return fused_activation_q(b, y, op.attrs.get("fused_activation_function"), qparams(out)) if activation else y


def fc_output_rows(b: Builder, acc: Value, scales: Sequence[Sequence[float]], outs: Sequence[Value]) -> list[Value]:
    """The output stage of stacked int16x8 fully_connected rows (``acc`` [rows, 1, 1, C], row ``i`` requantized
    by ``scales[i]`` to the type of ``outs[i]``): :func:`fc_output`'s exact multi-limb form once over all rows,
    with per-row-and-channel constants, then per row a SLICE and the saturating RESCALE to that row's type
    (the caller has checked that the accumulator fits i32)."""
    from . import exact_round as X

    acc32 = acc if acc.dtype is DType.INT32 else rescale(b, acc, 1.0, DType.INT32, scale32=False)
    neg, limbs = X.limbs_of_i32(b, acc32)
    flat = [s for row in scales for s in row]
    q = X.round_scaled(b, neg, limbs, flat, double_product=True, rows=len(scales))
    oc = acc.shape[-1]
    return [_saturate_out(b, b.slice(q, [i, 0, 0, 0], [1, 1, 1, oc]), out) for i, out in enumerate(outs)]


def _saturate_out(b: Builder, q: Value, out: Value) -> Value:
    """``clip(q + zp_out)`` to the output type (RESCALE ×1; |q| <= 2^16 keeps apply_scale_32's range)."""
    zp_out = per_tensor(out, "output")[1]
    return rescale(b, q, 1.0, out.dtype, out_zp=zp_out if out.dtype is DType.INT8 else 0,
                   out_quant=qparams(out), double_round=False)


__all__ = ["acc_bound", "exact_split", "fc_output", "fc_output_rows", "round_scale_exact", "single_rescale_exact"]
