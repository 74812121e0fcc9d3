"""Dynamic-range ("hybrid") arithmetic: int8 constant weights, float32 activations quantized on the fly.

``TFLiteConverter`` with ``Optimize.DEFAULT`` and no representative dataset stores every weight of 1024 elements or
more as a symmetric int8 constant (per output channel for conv, depthwise and fully connected) and keeps the
activations float32.  LiteRT's hybrid kernels (``kernel_utils`` / ``tensor_utils``: ``BatchQuantizeFloats``,
``SymmetricQuantizeFloats``, ``AsymmetricQuantizeFloats``, ``MatrixBatchVectorMultiplyAccumulate``) then quantize
each activation row (fully connected, batch matmul, the recurrent ops) or each batch image (conv, depthwise,
transpose conv) to int8 on the fly, take the int8 × int8 → int32 product and rescale it in float:

* symmetric: range = max|v|, factor = range / 127, q = round(v · 127 / range) clamped to ±127 (all zeros and
  factor 1 for a zero row);
* asymmetric: rmin = min(0, min v), rmax = max(0, max v), factor = (rmax - rmin) / 255, zero point
  zp = clamp(round(-128 - rmin / factor)), q = clamp(round(zp + v / factor)) in [-128, 127] (zeros, factor 1 and
  zp 0 when rmin = rmax); the product subtracts ``zp · Σ w`` (the weights' row sums);
* result = float(dot) · factor · s_w (per channel) + bias, then the fused activation.

TOSA: ABS/REDUCE_MAX (REDUCE_MIN) for the range, RECIPROCAL for the inverse factor, FLOOR(|x| + 0.5) with the
sign for C's ``round``, CLAMP, CAST to int8, an int8 product (exact int32), the row-sum correction in int32, CAST
to float, MULs and the bias ADD.  The dot products are exact; the kernels' divisions (partly in double) are
RECIPROCAL + MUL in float32 here (an ulp apart at worst), so an element within that distance of a rounding
boundary may quantize one step differently: the outputs are compared with LiteRT within the float bound.

The ``dequantize`` mode (``--hybrid dequantize``) instead keeps each int8 weight as its constant plus CAST and MUL
by its scales (:func:`dequantize_weight`) and runs the op in float: closer to the float model the weights came
from, not what LiteRT computes.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError, Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import KEEP_UNFOLDED, Builder

#: values of the ``hybrid`` conversion option (``--hybrid``): LiteRT's hybrid kernels, or float weights
MODES = ("kernel", "dequantize")


def hybrid_mode(b: Builder) -> str:
    """The conversion's ``hybrid`` option checked: ``"kernel"`` (the default) or ``"dequantize"``."""
    return check_mode(b.context.extra.get("hybrid"), b.context.file)


def check_mode(value: object, file: str | None = None) -> str:
    mode = "kernel" if value is None else str(value)
    if mode not in MODES:
        raise InputError(f"hybrid (--hybrid) must be 'kernel' or 'dequantize', not {value!r}", file=file)
    return mode


def is_hybrid(x: Value, w: Value) -> bool:
    """A float32 activation with an int8 (or uint8) quantized constant weight: LiteRT's hybrid kernels."""
    return (x.dtype is DType.FP32 and not x.type.is_quantized and w.dtype in (DType.INT8, DType.UINT8)
            and w.type.quant is not None)


def weight_scales(op: Operation, w: Value, channels: int, axis: int) -> np.ndarray:
    """The float32 scales of an int8 symmetric weight, one per output channel (``channels``, along ``axis``); a
    per-tensor scale is repeated.  Non-zero zero points, uint8 and non-constant weights are refused."""
    q = w.type.quant
    assert q is not None
    if w.dtype is not DType.INT8 or not w.is_const:
        raise Unsupported(f"{op.name}: hybrid weight {w.source or w.name} is a {'constant ' if w.is_const else ''}"
                          f"{w.dtype.value} tensor (constant int8 weights are lowered)")
    if any(int(z) != 0 for z in q.zero_point):
        raise Unsupported(f"{op.name}: hybrid weight {w.source or w.name} has a non-zero zero point")
    scales = np.asarray(q.scale, np.float32).reshape(-1)
    if scales.size == 1:
        return np.full(channels, scales[0], np.float32)
    rank = max(1, w.type.rank)
    if scales.size != channels or (q.axis is not None and int(q.axis) % rank != axis):
        raise Unsupported(f"{op.name}: hybrid weight {w.source or w.name} has {scales.size} scales along axis "
                          f"{q.axis}, expected {channels} along axis {axis}")
    return scales


def dequantize_weight(b: Builder, op: Operation, w: Value) -> Value:
    """``float(w) · scale`` (per channel along the weight's quantized axis) as CAST + MUL of the int8 constant,
    kept unfolded so that the weights stay int8 in the ``.tosa``."""
    shape = [int(d) for d in w.type.static_shape]
    q = w.type.quant
    assert q is not None
    bshape = [1] * len(shape)
    if len(q.scale) > 1:
        axis = int(q.axis or 0) % max(1, len(shape))
        bshape[axis] = shape[axis]
        scales = weight_scales(op, w, shape[axis], axis).reshape(bshape)
    else:
        scales = weight_scales(op, w, 1, 0).reshape(bshape)
    fold, b.fold = b.fold, False
    try:
        wf = b.cast(w, DType.FP32)
        scale = b.const(scales, DType.FP32)
        out = b.mul(wf, scale)
    finally:
        b.fold = fold
    kept = b.graph.meta.setdefault(KEEP_UNFOLDED, [])
    for v in (wf, out):
        assert v.producer is not None
        kept.append(v.producer.id)
    return out


def fconst(b: Builder, value: float, rank: int = 3) -> Value:
    """A float32 scalar as a rank-``rank`` [1, ...] constant."""
    return b.const(np.full([1] * rank, value, np.float32), DType.FP32)


def c_round(b: Builder, v: Value) -> Value:
    """C's round (half away from zero) of a float32 tensor: sign(v)·FLOOR(|v| + 0.5)."""
    r = v.type.rank
    mag = b.floor(b.binary("ADD", b.abs(v), fconst(b, 0.5, r)))
    neg = b.binary("GREATER", fconst(b, 0.0, r), v)
    return where(b, neg, b.binary("SUB", fconst(b, 0.0, r), mag), mag)


def where(b: Builder, cond: Value, a: Value, c: Value) -> Value:
    return b.emit("SELECT", b.broadcast_ranks(cond, a, c)).result


def quantize_rows(b: Builder, x: Value) -> tuple[Value, Value]:
    """SymmetricQuantizeFloats per row of x [1, R, K]: (int8 [1, R, K], float32 factor [1, R, 1])."""
    rng = b.reduce_max(b.abs(x), axis=2)
    zero = b.binary("EQUAL", rng, fconst(b, 0.0))
    one = fconst(b, 1.0)
    safe = where(b, zero, one, rng)
    factor = where(b, zero, one, b.mul(rng, fconst(b, float(np.float32(1.0 / 127.0)))))
    v = b.mul(x, b.mul(b.reciprocal(safe), fconst(b, 127.0)))
    q = b.cast(b.clamp(c_round(b, v), -127.0, 127.0), DType.INT8)
    return q, factor


def quantize_rows_asymmetric(b: Builder, x: Value) -> tuple[Value, Value, Value]:
    """AsymmetricQuantizeFloats per row of x [1, R, K]: (int8 q, float32 factor [1, R, 1], int32 zero point)."""
    zero_f = fconst(b, 0.0)
    rmin = b.binary("MINIMUM", b.reduce_min(x, axis=2), zero_f, nan_mode="PROPAGATE")
    rmax = b.binary("MAXIMUM", b.reduce_max(x, axis=2), zero_f, nan_mode="PROPAGATE")
    rng = b.binary("SUB", rmax, rmin)
    empty = b.binary("EQUAL", rng, zero_f)
    one = fconst(b, 1.0)
    factor = where(b, empty, one, b.mul(rng, fconst(b, float(np.float32(1.0 / 255.0)))))
    inv = b.reciprocal(factor)
    zp_real = b.binary("SUB", fconst(b, -128.0), b.mul(rmin, inv))
    zp = where(b, empty, zero_f, b.clamp(c_round(b, zp_real), -128.0, 127.0))
    q = b.cast(b.clamp(c_round(b, b.binary("ADD", zp, b.mul(x, inv))), -128.0, 127.0), DType.INT8)
    return q, factor, b.cast(zp, DType.INT32)


def quantize_batches(b: Builder, x: Value, asymmetric: bool) -> tuple[Value, Value, Value | None]:
    """Quantize each batch entry (leading axis) of x as one row: (int8 q shaped like x, float32 factor and int32
    zero point (asymmetric, else None) shaped [N, 1, …, 1] of x's rank)."""
    shape = [int(d) for d in x.type.static_shape]
    n = shape[0]
    rows = b.reshape(x, [1, n, int(np.prod(shape[1:]))])
    per = [n] + [1] * (len(shape) - 1)
    if asymmetric:
        q, factor, zp = quantize_rows_asymmetric(b, rows)
        return b.reshape(q, shape), b.reshape(factor, per), b.reshape(zp, per)
    q, factor = quantize_rows(b, rows)
    return b.reshape(q, shape), b.reshape(factor, per), None


def offset_correction(b: Builder, dot: Value, zp: Value | None, rowsum: np.ndarray) -> Value:
    """``dot - zp · Σw`` in int32 (asymmetric inputs; ``rowsum`` per output channel, the last axis of ``dot``);
    ``dot`` itself for symmetric ones."""
    if zp is None:
        return dot
    rank = dot.type.rank
    rs = b.const(rowsum.astype(np.int64).reshape([1] * (rank - 1) + [-1]), DType.INT32)
    return b.binary("SUB", dot, b.mul(zp, rs))


def scaled(b: Builder, dot: Value, factor: Value, scales: np.ndarray) -> Value:
    """float(dot) · (factor · s_w): the hybrid kernels' float rescaling (``scales`` along the last axis)."""
    rank = dot.type.rank
    s = b.const(scales.reshape([1] * (rank - 1) + [-1]), DType.FP32)
    return b.mul(b.cast(dot, DType.FP32), b.mul(factor, s))


__all__ = ["MODES", "c_round", "check_mode", "dequantize_weight", "fconst", "hybrid_mode", "is_hybrid",
           "offset_correction", "quantize_batches", "quantize_rows", "quantize_rows_asymmetric", "scaled",
           "weight_scales", "where"]
