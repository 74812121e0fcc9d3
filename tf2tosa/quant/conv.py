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

fully_connected's own output stage (LiteRT requantizes it in double precision) is :mod:`.fully_connected`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value, has_value
from ..ir.mapped import drop_pages, file_region
from ..ir.records import inexact_warning
from ..tosa.builder import Builder
from .activation import fused_activation_q
from .common import per_tensor, qparams
from .rescale import rescale

#: quantized activation types of the conv family and their TOSA accumulators (spec: CONV2D, supported data types)
ACC = {DType.INT8: (DType.INT32, "INT32"), DType.INT16: (DType.INT48, "INT48")}


def require_act_type(op: Operation, x: Value) -> DType:
    """i8 or i16 activations (int16 ones with zero point 0, as TFLite and TOSA both require)."""
    if x.dtype not in ACC:
        raise Unsupported(f"quantized {op.name} on {x.dtype.value}")
    if x.dtype is DType.INT16 and per_tensor(x, "input")[1] != 0:
        raise Unsupported(f"int16 {op.name} input with zero point {per_tensor(x)[1]} (must be 0, spec: CONV2D)")
    return x.dtype


def weight_zp(w: Value) -> int:
    """The single weight zero point (per-channel zero points must all be 0 or all equal)."""
    zps = qparams(w, "weights").zero_point
    if zps.count(zps[0]) != len(zps):  # (every one equal to the first: one value)
        raise Unsupported("per-channel weight zero points differ (TOSA weight_zp is one value, spec: CONV2D)")
    zp = int(zps[0])
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


def conv_scale_array(x: Value, w: Value, out: Value, channels: int) -> np.ndarray:
    """:func:`conv_scales` (double arithmetic) as a float64 array: the same double operations elementwise, so the
    same values, without a Python float per channel."""
    s_x, _ = per_tensor(x, "input")
    s_out, _ = per_tensor(out, "output")
    sw = qparams(w, "weights").scale
    if len(sw) == 1:
        arr = np.full(channels, float(sw[0]))
    elif len(sw) != channels:
        raise Unsupported(f"{len(sw)} weight scales for {channels} output channels")
    else:
        arr = np.array(sw, dtype=np.float64)
    arr *= s_x
    arr /= s_out
    return arr


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
    narrow = arr.__class__ is np.ndarray and arr.dtype == np.int32 and acc in (DType.INT32, DType.INT48)
    vals = (arr if narrow else np.asarray(arr, np.int64)).reshape(-1)
    if vals.size == 1 and channels > 1:
        vals = np.repeat(vals, channels)
    if vals.size != channels:
        raise Unsupported(f"bias of {vals.size} values for {channels} output channels")
    lo, hi = acc.range()
    if not narrow and (vals.min(initial=0) < lo or vals.max(initial=0) > hi):  # (int32 values fit both)
        raise Unsupported(f"bias values do not fit the {acc.value} accumulator")
    return b.const(vals, acc, name="bias"), v.dtype


def requantize_acc(b: Builder, acc: Value, scales: Sequence[float] | np.ndarray, out: Value,
                   tfl_acc: DType | None) -> Value:
    """The conv-family output stage: MBQM per channel + output zero point (+ clip), as RESCALE.

    ``tfl_acc`` is TFLite's accumulator: for an i48 TOSA accumulator an int64 (or absent) bias means TFLite's int64
    MBQM — one 16-bit RESCALE — and an int32 bias means its int32 MBQM, reproduced by an exact i48→i32 RESCALE
    (×1, multiplier 2^14, shift 14, spec: RESCALE) and a DOUBLE_ROUND i32→i16 RESCALE.  ``scales`` as an array
    (:func:`conv_scale_array`'s, one per channel of acc's last dimension) goes to :func:`rescale` as it is, equal
    scales too: channels of one (multiplier, shift) pair get the per-tensor RESCALE a list of equal scales gets.
    """
    s_out, zp_out = per_tensor(out, "output")
    oq = qparams(out)
    if acc.dtype is DType.INT48 and tfl_acc is DType.INT32:
        acc = rescale(b, acc, 1.0, DType.INT32, scale32=False)
    if isinstance(scales, np.ndarray):
        scale: float | list[float] | np.ndarray = scales if scales.size > 1 else float(scales[0])
    else:
        scale = list(scales) if len(set(scales)) > 1 else scales[0]
    return rescale(b, acc, scale, out.dtype, out_zp=zp_out if out.dtype is DType.INT8 else 0, out_quant=oq)


def conv_output(b: Builder, op: Operation, acc: Value, scales: Sequence[float] | np.ndarray,
                tfl_acc: DType | None) -> Value:
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
    of channels at a time (int16 or int32 when ``|w - zp|`` fits it): no full-size wide copy of a large weight (a
    4096x4096 int8 weight made a 134 MB int64 copy)."""
    warr = np.asarray(w)
    oc = warr.shape[0] if warr.ndim else 1
    flat = warr.reshape(oc, -1)
    narrow = warr.dtype.kind in "iu" and warr.dtype.itemsize <= 2 and abs(zp) < 1 << 16
    # (int16 holds |w - zp| of a byte weight for a zero point within the byte's range: half the bytes to pass)
    byte = warr.dtype.kind in "iu" and warr.dtype.itemsize == 1 and -256 <= zp <= 256
    wide = np.dtype(np.int16 if byte else np.int32 if narrow else np.int64)
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
        logging.getLogger("tf2tosa").warning("%s", inexact_warning(entry))


__all__ = ["ACC", "abs_weight_sums", "conv_output", "conv_scale_array", "conv_scales", "note_inexact", "quant_bias",
           "require_act_type", "requantize_acc", "tfl_product_scale", "weight_zp"]
