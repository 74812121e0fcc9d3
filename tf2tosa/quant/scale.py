"""Real scale → RESCALE (multiplier, shift), reproducing TFLite's QuantizeMultiplier.

The lowering document's compute_scale_32 (lowering doc: compute_scale_32) and TFLite's ``QuantizeMultiplier`` agree on
the
representation: ``scale = m·2^e`` with ``m ∈ [0.5, 1)`` (``frexp``), ``q = round(m·2^31)`` rounded half away from
zero (``std::round``), and ``q == 2^31`` renormalised to ``(2^30, e+1)``.  TFLite stores ``shift = e`` (left shift
positive); TOSA's right shift is ``31 - e`` because the multiplier carries 31 fraction bits (lowering doc:
compute_scale_32).

TOSA 1.0 adds limits the lowering document does not check (op_inventory §5.1, §6.4):

* ``multiplier >= 0`` (spec 4.5.5: apply_scale_32, spec 4.5.5: apply_scale_16): negative scales raise
:class:`Unsupported`.
* ``2 <= shift <= 62`` (spec 4.5.5: apply_scale_32, spec 4.5.5: apply_scale_16):

  - ``shift > 62`` (scale < 2^-32 for 32-bit multipliers): TFLite's QuantizeMultiplier flushes any exponent below
    -31 — the same condition — to ``multiplier 0``, so every result is 0.  We return ``(0, 62)``, which gives the same
    zeros for every input.  Shift 62 (not 31) keeps the value-range REQUIRE of apply_scale_32 (spec 4.5.5:
    apply_scale_32,
    ``|value| < 2^(shift-1)``) vacuous for any i32/i48 input.  ``scale == 0`` gives the same ``(0, 62)``.
  - ``shift < 2`` (scale ≥ 2^29 for 32-bit, ≥ 2^13 for 16-bit multipliers) raises :class:`Unsupported`.

The 16-bit multiplier (``scale32=false``, mandatory for i48 inputs, spec 2.13.2 RESCALE) reproduces TFLite's int64
``MultiplyByQuantizedMultiplier`` (used by the int16×8 conv/fully-connected kernels), which reduces the 32-bit
multiplier to 16 bits as ``min((q + 2^15) >> 16, 0x7FFF)`` with total right shift ``15 - e``, then rounds once half
up — exactly apply_scale_16 (spec 4.5.5: apply_scale_16).  So compute_scale_16 derives the 16-bit pair from the 32-bit
one
instead of rounding the mantissa directly (the two differ at ties and where ``q >= 0x7FFF0000``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import Unsupported

#: legal RESCALE shift range (spec 4.5.5: apply_scale_32, spec 4.5.5: apply_scale_16)
MIN_SHIFT = 2
MAX_SHIFT = 62


def _check_scale(scale: float) -> float:
    s = float(scale)
    if not math.isfinite(s):
        raise Unsupported(f"quantization scale {scale} is not finite")
    if s < 0.0:
        raise Unsupported(f"negative rescale factor {s} (TOSA multipliers must be >= 0, S11744)")
    return s


def quantize_multiplier(scale: float) -> tuple[int, int]:
    """TFLite's ``QuantizeMultiplier``: (q, e) with ``scale ≈ q·2^(e-31)``; (0, 0) for 0 and flushed scales."""
    s = _check_scale(scale)
    if s == 0.0:
        return 0, 0
    m, e = math.frexp(s)
    # m·2^31 < 2^31 is exact in float64 and m·2^31 + 0.5 too (ulp ≤ 2^-22): this is std::round (half away from 0)
    q = math.floor(m * float(1 << 31) + 0.5)
    if q == 1 << 31:
        q //= 2
        e += 1
    if e < -31:  # TFLite: "shift amount smaller than -31 … implement that with q_fixed == 0"
        return 0, 0
    return int(q), int(e)


def compute_scale_32(scale: float) -> tuple[int, int]:
    """(multiplier, shift) for a 32-bit-multiplier RESCALE; multiplier in [2^30, 2^31) or 0.

    ``compute_scale_32(1.0) == (1 << 30, 30)``; scales below 2^-32 (and 0) give ``(0, 62)`` (TFLite's flush to
    zero); scales of 2^29 and above raise :class:`Unsupported`.
    """
    q, e = quantize_multiplier(scale)
    if q == 0:
        return 0, MAX_SHIFT
    shift = 31 - e
    if shift < MIN_SHIFT:
        raise Unsupported(f"rescale factor {float(scale):.6g} is too large for a 32-bit multiplier RESCALE "
                          f"(shift {shift} < {MIN_SHIFT}, S11745)")
    assert shift <= MAX_SHIFT
    return q, shift


def compute_scale_16(scale: float) -> tuple[int, int]:
    """(multiplier, shift) for a 16-bit-multiplier RESCALE (``scale32=false``); multiplier in [2^14, 2^15) or 0.

    Derived from the 32-bit pair the way TFLite's int64 MultiplyByQuantizedMultiplier does:
    ``m16 = min((q + 2^15) >> 16, 0x7FFF)``, ``shift = 15 - e``.  ``compute_scale_16(1.0) == (1 << 14, 14)``
    (spec 2.13.2 RESCALE).  Scales below 2^-48 (and 0) give ``(0, 62)``; below TFLite's own 2^-32 flush the result is
    the
    flushed 0 as in TFLite.  Scales of 2^13 and above raise :class:`Unsupported`.
    """
    q, e = quantize_multiplier(scale)
    if q == 0:
        return 0, MAX_SHIFT
    m16 = (q + (1 << 15)) >> 16 if q < 0x7FFF0000 else 0x7FFF
    shift = 15 - e
    if shift < MIN_SHIFT:
        raise Unsupported(f"rescale factor {float(scale):.6g} is too large for a 16-bit multiplier RESCALE "
                          f"(shift {shift} < {MIN_SHIFT}, S11760)")
    if shift > MAX_SHIFT:  # unreachable: e >= -31 after TFLite's flush, so shift <= 46
        return 0, MAX_SHIFT
    return m16, shift


#: up to this many scales the scalar functions are quicker than the array pass (~0.4 µs a scale against ~20 µs for
#: the pass's dozen numpy calls; a per-tensor RESCALE has one scale)
FEW_SCALES = 16


def quantize_multiplier_arrays(scales: Sequence[float] | np.ndarray, scale32: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (multiplier, shift) arrays: int32 (scale32) or int16 multipliers, int8 shifts."""
    flat = np.asarray(scales, dtype=np.float64).reshape(-1)
    if flat.size == 0:
        raise Unsupported("empty scale vector")
    fast = _multiplier_arrays(flat, scale32) if flat.size > FEW_SCALES else None
    if fast is not None:
        return fast
    fn = compute_scale_32 if scale32 else compute_scale_16
    pairs = [fn(float(s)) for s in flat]
    mult = np.array([p[0] for p in pairs], dtype=np.int32 if scale32 else np.int16)
    shift = np.array([p[1] for p in pairs], dtype=np.int8)
    return mult, shift


_MIN, _MAX = np.minimum.reduce, np.maximum.reduce


def channel_pairs(scales: Sequence[float] | np.ndarray, scale32: bool) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """:func:`quantize_multiplier_arrays` (new arrays), the largest shift, and whether every channel's pair is the
    first's.  Positive finite 32-bit scales beyond :data:`FEW_SCALES` (a conv's per-channel requantization) take
    :func:`_common_pairs`, whose checks' extremes answer the other two questions as well."""
    flat = np.asarray(scales, dtype=np.float64).reshape(-1)
    if scale32 and flat.size > FEW_SCALES:
        common = _common_pairs(flat)
        if common is not None:
            return common
    mult, shift = quantize_multiplier_arrays(flat, scale32)
    return mult, shift, int(_MAX(shift)), bool((mult == mult[0]).all() and (shift == shift[0]).all())


def _common_pairs(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, bool] | None:
    """:func:`compute_scale_32` over a non-empty float64 array in the common case, positive finite scales with no
    q of 2^31, none flushed (e >= -31) nor too large (shift = 31 - e >= 2): the same float64 operations
    elementwise, in place, in a third of the general pass's numpy calls.  Also the largest shift and whether every
    pair is the first's; None when a scale is not such a one."""
    m, e = np.frexp(flat)
    m *= float(1 << 31)
    m += 0.5
    np.floor(m, out=m)
    # every q in [2^30, 2^31) is every scale positive and finite (frexp's mantissa of 0 is 0, of a negative scale
    # negative, of inf or NaN inf or NaN: a NaN fails both tests) with no q of 2^31
    low, top = _MIN(m), _MAX(m)
    if not (low >= float(1 << 30) and top < float(1 << 31)):
        return None
    emin, emax = int(_MIN(e)), int(_MAX(e))
    if emin < -31 or emax > 31 - MIN_SHIFT:
        return None
    return m.astype(np.int32), (31 - e).astype(np.int8), 31 - emin, emin == emax and low == top


def _multiplier_arrays(flat: np.ndarray, scale32: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`compute_scale_32` / :func:`compute_scale_16` over a float64 array, the same float64 operations
    elementwise; None when a scale needs the scalar path's error (not finite, negative, too large)."""
    common = _common_pairs(flat) if scale32 and flat.size else None
    if common is not None:
        return common[0], common[1]
    if not np.all(np.isfinite(flat)) or np.any(flat < 0.0):
        return None
    m, e = np.frexp(flat)
    q = np.floor(m * float(1 << 31) + 0.5).astype(np.int64)
    e = e.astype(np.int64)
    full = q == (1 << 31)
    q = np.where(full, q // 2, q)
    e = np.where(full, e + 1, e)
    zero = (flat == 0.0) | (e < -31)
    q = np.where(zero, 0, q)
    if scale32:
        mult, shift = q, 31 - e
    else:
        mult, shift = np.where(q < 0x7FFF0000, (q + (1 << 15)) >> 16, 0x7FFF), 15 - e
    if np.any(~zero & (shift < MIN_SHIFT)):
        return None
    flushed = zero | (shift > MAX_SHIFT)
    mult = np.where(flushed, 0, mult)
    shift = np.where(flushed, MAX_SHIFT, shift)
    return mult.astype(np.int32 if scale32 else np.int16), shift.astype(np.int8)


def product_scale(in_scale: float, weight_scale: float, out_scale: float, *, float32_product: bool) -> float:
    """A conv/fully-connected output factor ``s_in·s_w / s_out`` computed the way TFLite computes it.

    TFLite's per-channel path (PopulateConvolutionQuantizationParams, used by int8 conv and depthwise conv) forms
    ``double(s_in) · double(s_w[c]) / double(s_out)``; the per-tensor GetQuantizedConvolutionMultipler (used by
    fully-connected with one weight scale) multiplies ``s_in · s_w`` in float32 first.  The multiplier can differ by
    one LSB between the two, so rules must pick the one the TFLite kernel uses.
    """
    if float32_product:
        prod = float(np.float32(in_scale) * np.float32(weight_scale))
    else:
        prod = float(np.float32(in_scale)) * float(np.float32(weight_scale))
    return prod / float(np.float32(out_scale))
