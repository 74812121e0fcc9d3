"""Fused activations in the quantized domain (lowering doc: lower_fused_activation, with op_inventory §6.3's
corrections).

The clamp bounds follow TFLite's ``CalculateActivationRangeQuantized``: ``quantize(f) = zp + round(f / scale)``
evaluated in float32 with ``TfLiteRound`` (half away from zero), lower bounds ``max(qmin, …)`` and upper bounds
``min(qmax, …)`` of the storage type.  The lowering document truncates ``6.0 / scale`` and does not clamp to the
storage range (lowering doc: lower_fused_activation); we round and clamp.  RELU
has no upper bound but the storage maximum.
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import Unsupported
from ..ir import DType, QuantParams, Value
from ..tosa.builder import Builder

#: the real interval of each clamp-like fused activation (None = unbounded)
_REAL_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "RELU": (0.0, None),
    "RELU6": (0.0, 6.0),
    "RELU_N1_TO_1": (-1.0, 1.0),
    "RELU_0_TO_1": (0.0, 1.0),
}


def _quantize_f32(f: float, scale: float, zp: int) -> int:
    """TFLite's ``zero_point + static_cast<int32_t>(TfLiteRound(f / scale))`` in float32."""
    r = np.float32(f) / np.float32(scale)
    if not np.isfinite(r):
        raise Unsupported(f"activation bound {f} / scale {scale} is not finite")
    a = float(np.floor(np.abs(r) + np.float32(0.5)))  # roundf: half away from zero
    return int(zp) + int(np.copysign(a, r))


def _norm(act: str | None) -> str:
    return "NONE" if act is None else str(act).upper()


def activation_bounds(act: str | None, q: QuantParams, dtype: DType) -> tuple[int, int] | None:
    """Integer clamp bounds of a fused RELU / RELU6 / RELU_N1_TO_1 / RELU_0_TO_1; None for NONE.

    The bounds are in ``dtype``'s storage range (i8, i16, or u8 for uint8 models).  When the real bound is outside
    that range the clamp collapses to the range edge (``lo <= hi`` always holds: a lower bound above qmax is
    returned as ``(hi, hi)``: TFLite computes ``min(max(v, act_min), act_max)``, which is then always act_max).
    """
    a = _norm(act)
    if a == "NONE":
        return None
    if a not in _REAL_BOUNDS:
        raise Unsupported(f"fused activation {a} has no integer clamp bounds")
    if q.per_channel:
        raise Unsupported("fused activation on a per-channel quantized tensor")
    return _clamp_bounds(a, float(q.s), int(q.zp), dtype)


@functools.lru_cache(maxsize=4096)
def _clamp_bounds(a: str, scale: float, zp: int, dtype: DType) -> tuple[int, int]:
    """:func:`activation_bounds` of a clamp-like activation ``a`` and a per-tensor (scale, zero point), kept per
    argument: a model's convolutions share a few output quantizations, and each bound is a few numpy scalar
    operations (errors are raised on every call, as they are not kept)."""
    qmin, qmax = dtype.range()
    f_lo, f_hi = _REAL_BOUNDS[a]
    lo = qmin if f_lo is None else max(qmin, _quantize_f32(f_lo, scale, zp))
    hi = qmax if f_hi is None else min(qmax, _quantize_f32(f_hi, scale, zp))
    # TFLite applies max(act_min) then min(act_max): a value ends at min(max(v, lo), hi); keep lo <= hi for CLAMP
    lo = min(lo, qmax)
    hi = max(hi, qmin)
    if lo > hi:
        lo = hi
    return lo, hi


def fused_activation_q(b: Builder, x: Value, act: str | None, q: QuantParams) -> Value:
    """Apply a fused activation to a quantized i8 (PRO-INT) or i16 (EXT-INT16) tensor with parameters ``q``.

    Clamp-like activations become one CLAMP (omitted when the bounds span the whole type); TANH becomes a TABLE
    (i8: 256-entry real-domain table; i16: 513-entry interpolated table + RESCALE ×2^-7) with output quantization
    ``q``.  Note TFLite's quantized kernels reject a fused TANH; this is for graphs that carry one anyway.
    """
    a = _norm(act)
    if a == "NONE":
        return x
    if x.dtype not in (DType.INT8, DType.INT16):
        raise Unsupported(f"quantized fused activation on {x.dtype.value}")
    if a == "TANH":
        from .table import apply_table_i8, apply_table_i16, table_i8, table_i16

        if x.dtype is DType.INT8:
            return apply_table_i8(b, x, table_i8(np.tanh, q, q), q)
        return apply_table_i16(b, x, table_i16(np.tanh, q, q), q)
    bounds = activation_bounds(a, q, x.dtype)
    assert bounds is not None
    lo, hi = bounds
    qmin, qmax = x.dtype.range()
    if lo <= qmin and hi >= qmax:
        return x
    return b.clamp(x, int(lo), int(hi))
