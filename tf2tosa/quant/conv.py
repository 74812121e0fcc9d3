"""Quantized helpers of the tfl_nn / tfl_reduce rules: conv-family requantization, biases, zero points.

Everything reproduces LiteRT's reference kernels (BUILTIN_REF), whose fixed-point formulas are public:

* The conv family (conv_2d, depthwise_conv_2d, transpose_conv, fully_connected) accumulates
  ``sum((x - zp_x)·(w - zp_w)) + bias`` and requantizes with ``MultiplyByQuantizedMultiplier`` (MBQM) per output
  channel, then adds the output zero point and clamps to the fused activation's range.  The 32-bit MBQM (int32
  accumulators: int8 models, and int16 models with an int32 bias) is RESCALE with DOUBLE_ROUND (op_inventory §6.3);
  the int64 MBQM (int16x8 models with an int64 bias) reduces the multiplier to 16 bits and rounds once, which is
  RESCALE with ``scale32=false`` (spec: RESCALE, apply_scale_16) via :func:`tf2tosa.quant.compute_scale_16`.
* Multipliers come from TFLite's QuantizeMultiplier of ``s_x·s_w[c]/s_out`` in double (per-channel weights, and all
  int8/int16 conv and depthwise weights), or of ``float32(s_x·s_w)/s_out`` where TFLite calls
  ``GetQuantizedConvolutionMultipler`` (per-tensor fully_connected, batch_matmul): :func:`tfl_product_scale`.
* Zero points are ``[1]`` tensors of the data type (op_inventory §4 #3); weight zero points must be one value
  (spec: CONV2D, ``weight_zp``), so per-channel weights need all-zero zero points (TFLite's int8 weights are symmetric).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, QuantParams, Value, has_value
from ..ir.mapped import drop_pages, file_region
from ..tosa.builder import Builder
from .activation import fused_activation_q
from .rescale import rescale, rounding_mode

#: quantized activation types of the conv family and their TOSA accumulators (spec: CONV2D, supported data types)
ACC = {DType.INT8: (DType.INT32, "INT32"), DType.INT16: (DType.INT48, "INT48")}


def is_quantized(*values: Value) -> bool:
    return any(v.type.is_quantized for v in values)


def qparams(v: Value, what: str = "tensor") -> QuantParams:
    """``v``'s quantization; Unsupported when it has none."""
    q = v.type.quant
    if q is None:
        raise Unsupported(f"{what} {v.name} is not quantized")
    return q


def per_tensor(v: Value, what: str = "tensor") -> tuple[float, int]:
    """(scale, zero point) of a per-tensor quantized value."""
    q = qparams(v, what)
    if q.per_channel:
        raise Unsupported(f"{what} {v.name} must be quantized per tensor")
    return float(q.s), int(q.zp)


def require_act_type(op: Operation, x: Value) -> DType:
    """i8 or i16 activations (int16 ones with zero point 0, as TFLite and TOSA both require)."""
    if x.dtype not in ACC:
        raise Unsupported(f"quantized {op.name} on {x.dtype.value}")
    if x.dtype is DType.INT16 and per_tensor(x, "input")[1] != 0:
        raise Unsupported(f"int16 {op.name} input with zero point {per_tensor(x)[1]} (must be 0, spec: CONV2D)")
    return x.dtype


def weight_zp(w: Value) -> int:
    """The single weight zero point (per-channel zero points must all be 0 or all equal)."""
    q = qparams(w, "weights")
    zps = set(q.zero_point)
    if len(zps) != 1:
        raise Unsupported("per-channel weight zero points differ (TOSA weight_zp is one value, spec: CONV2D)")
    zp = int(zps.pop())
    if w.dtype is not DType.INT8:
        raise Unsupported(f"quantized weights of type {w.dtype.value} (i8 expected)")
    return zp


def tfl_product_scale(s_a: float, s_b: float) -> float:
    """``static_cast<double>(s_a * s_b)`` with float32 operands: TFLite's GetQuantizedConvolutionMultipler."""
    return float(np.float32(s_a) * np.float32(s_b))


def conv_scales(x: Value, w: Value, out: Value, channels: int, *, float_product: bool = False) -> list[float]:
    """Per-output-channel requantization factors ``s_x·s_w[c]/s_out`` (TFLite's PopulateConvolutionQuantizationParams:
    double arithmetic; ``float_product`` for the float32 product of GetQuantizedConvolutionMultipler)."""
    s_x, _ = per_tensor(x, "input")
    s_out, _ = per_tensor(out, "output")
    sw = [float(s) for s in qparams(w, "weights").scale]
    if len(sw) == 1:
        sw = sw * channels
    if len(sw) != channels:
        raise Unsupported(f"{len(sw)} weight scales for {channels} output channels")
    if float_product:
        return [tfl_product_scale(s_x, s) / s_out for s in sw]
    return [s_x * s / s_out for s in sw]


def quant_bias(b: Builder, op: Operation, k: int, channels: int, acc: DType) -> tuple[Value, DType | None]:
    """Operand ``k`` as an ``acc``-typed bias of ``channels`` values (zeros when absent).

    Returns the bias and the TFLite accumulator type it implies (int32 for an int32 bias, int64 for int64, None
    when absent).  The int64 bias of int16x8 models must fit the 48-bit accumulator (op_inventory §6.3).
    """
    if len(op.operands) <= k or not has_value(op.operands[k]):
        return b.const(np.zeros([channels], np.int64), acc, name="zero_bias"), None
    v = op.operands[k]
    arr = v.const()
    if arr is None:
        raise Unsupported(f"non-constant bias {v.name} of a quantized {op.name}")
    if v.dtype not in (DType.INT32, DType.INT64):
        raise Unsupported(f"bias of type {v.dtype.value} in a quantized {op.name}")
    vals = np.asarray(arr, np.int64).reshape(-1)
    if vals.size == 1 and channels > 1:
        vals = np.repeat(vals, channels)
    if vals.size != channels:
        raise Unsupported(f"bias of {vals.size} values for {channels} output channels")
    lo, hi = acc.range()
    if vals.min(initial=0) < lo or vals.max(initial=0) > hi:
        raise Unsupported(f"bias values do not fit the {acc.value} accumulator")
    return b.const(vals, acc, name="bias"), v.dtype


def requantize_acc(b: Builder, acc: Value, scales: Sequence[float], out: Value, tfl_acc: DType | None) -> Value:
    """The conv-family output stage: MBQM per channel + output zero point (+ clip), as RESCALE.

    ``tfl_acc`` is TFLite's accumulator: for an i48 TOSA accumulator an int64 (or absent) bias means TFLite's int64
    MBQM — one 16-bit RESCALE — and an int32 bias means its int32 MBQM, reproduced by an exact i48→i32 RESCALE
    (×1, multiplier 2^14, shift 14, spec: RESCALE) and a DOUBLE_ROUND i32→i16 RESCALE.
    """
    s_out, zp_out = per_tensor(out, "output")
    oq = qparams(out)
    if acc.dtype is DType.INT48 and tfl_acc is DType.INT32:
        acc = rescale(b, acc, 1.0, DType.INT32, scale32=False)
    return rescale(b, acc, list(scales) if len(set(scales)) > 1 else scales[0], out.dtype,
                   out_zp=zp_out if out.dtype is DType.INT8 else 0, out_quant=oq)


def conv_output(b: Builder, op: Operation, acc: Value, scales: Sequence[float], tfl_acc: DType | None) -> Value:
    """requantize_acc then the fused activation as a CLAMP in the output domain (TFLite's activation range)."""
    out = op.results[0]
    if acc.dtype is DType.INT48 and tfl_acc is DType.INT32 and _conv_bound(op) >= 1 << 31:
        note_inexact(b, op, "a 16x8 convolution with an int32 bias whose accumulator may exceed int32: TFLite wraps "
                            "it, TOSA's exact i48 → i32 RESCALE requires it to fit (spec: apply_scale_16)")
    y = requantize_acc(b, acc, scales, out, tfl_acc)
    return fused_activation_q(b, y, op.attrs.get("fused_activation_function"), qparams(out))


#: :func:`abs_weight_sums` widens this many weight elements at a time
_SUM_BLOCK = 1 << 20


def abs_weight_sums(w: np.ndarray, zp: int) -> np.ndarray:
    """Per output channel (axis 0) the sum of ``|w - zp|`` over the channel's weights, as int64.  Widened a block
    of channels at a time (int32 when ``|w - zp|`` fits it): no full-size wide copy of a large weight (a
    4096x4096 int8 weight made a 134 MB int64 copy)."""
    warr = np.asarray(w)
    oc = warr.shape[0] if warr.ndim else 1
    flat = warr.reshape(oc, -1)
    narrow = warr.dtype.kind in "iu" and warr.dtype.itemsize <= 2 and abs(zp) < 1 << 16
    wide = np.dtype(np.int32 if narrow else np.int64)
    out = np.empty(oc, np.int64)
    step = max(1, _SUM_BLOCK // max(1, flat.shape[1]))
    # a weight read in place from the model file: each block's pages are released once summed (the serializer
    # reads them again, a piece at a time), so the whole file is not left resident
    region = file_region(warr) if warr.flags.c_contiguous else None
    row = flat.shape[1] * warr.itemsize
    for r in range(0, oc, step):
        blk = flat[r:r + step].astype(wide)
        np.subtract(blk, np.asarray(zp, wide), out=blk)
        np.abs(blk, out=blk)
        out[r:r + step] = blk.sum(axis=1, dtype=np.int64)
        if region is not None:
            drop_pages(region[0], region[1] + r * row, region[1] + min(oc, r + step) * row)
    return out


def _conv_bound(op: Operation) -> int:
    """A static bound on a conv-family accumulator: every weight of the layer times the largest |x - zp_x|, plus
    the largest |bias| (conservative: one output channel sums fewer weights)."""
    x_idx, w_idx = (2, 1) if op.name == "tfl.transpose_conv" else (0, 1)
    x, w = op.operands[x_idx], op.operands[w_idx]
    wc = w.const()
    if wc is None or w.type.quant is None:
        return 1 << 62
    lo, hi = x.dtype.range()
    zx = per_tensor(x)[1] if x.dtype is DType.INT8 else 0
    wsum = int(abs_weight_sums(np.asarray(wc), weight_zp(w)).sum())
    bmax = 0
    for v in op.operands[x_idx + 1 if op.name == "tfl.transpose_conv" else 2:]:
        c = v.const() if has_value(v) and v.dtype in (DType.INT32, DType.INT64) else None
        if c is not None:
            bmax = max(bmax, int(np.abs(np.asarray(c, np.int64)).max(initial=0)))
    return wsum * max(abs(lo - zx), abs(hi - zx)) + bmax


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
    from . import exact_round as X

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


def note_inexact(b: Builder, op: Operation, reason: str) -> None:
    """Record that ``op`` is lowered by a path that is not bit-exact with TFLite (``graph.record.inexact``, shown by
    ``convert``, ``inspect`` and the verify report) and log a warning naming the op."""
    import logging

    label = op.name.removeprefix("tfl.").upper()
    src = next((r.source or r.name for r in op.results), "")
    entry = {"op": label, "tensor": src, "reason": reason}
    lst = b.graph.record.inexact
    if entry not in lst:
        lst.append(entry)
        logging.getLogger("tf2tosa").warning("%s (%s): not bit-exact with TFLite: %s", label, src, reason)


def rescale_raw(b: Builder, x: Value, multiplier: Sequence[int], shift: Sequence[int], out_dtype: DType, *,
                in_zp: int = 0, out_zp: int = 0, out_quant: QuantParams | None = None, scale32: bool = True,
                double_round: bool | None = None) -> Value:
    """RESCALE with explicit (multiplier, shift) pairs (for multipliers TFLite derives arithmetically, e.g. the
    folded 1/N of mean).  ``double_round`` None follows the conversion's rounding option (spec: RESCALE)."""
    mode = rounding_mode(b, scale32) if double_round is None else ("DOUBLE_ROUND" if double_round else "SINGLE_ROUND")
    m = b.const(np.asarray(multiplier, np.int64), DType.INT32 if scale32 else DType.INT16, name="multiplier")
    s = b.const(np.asarray(shift, np.int64), DType.INT8, name="shift")
    attrs = {"scale32": scale32, "rounding_mode": mode, "per_channel": len(multiplier) > 1,
             "input_unsigned": False, "output_unsigned": False}
    return b.emit("RESCALE", [x, m, s, b.zp(in_zp, x.dtype), b.zp(out_zp, out_dtype)], attrs,
                  out_dtype=out_dtype, quant=out_quant).result


def to_i32(b: Builder, x: Value, zp: int = 0) -> Value:
    """x - zp as i32 (RESCALE ×1: multiplier 2^30, shift 30, exact; spec: RESCALE)."""
    return rescale(b, x, 1.0, DType.INT32, in_zp=zp, double_round=False)


def same_quant(a: Value, b_: Value) -> bool:
    qa, qb = a.type.quant, b_.type.quant
    return qa is not None and qb is not None and qa.scale == qb.scale and qa.zero_point == qb.zero_point


__all__ = ["ACC", "acc_bound", "conv_output", "conv_scales", "exact_split", "fc_output", "fc_output_rows",
           "is_quantized", "note_inexact", "per_tensor", "qparams", "quant_bias", "require_act_type", "requantize_acc",
           "rescale_raw", "round_scale_exact", "same_quant", "single_rescale_exact", "tfl_product_scale", "to_i32",
           "weight_zp"]
