"""Weight products of the recurrent ops, float32 or *hybrid* (int8 weights, float32 activations).

LiteRT runs an LSTM/RNN whose weights are int8 and whose input is float32 with its hybrid kernels
(``lstm_eval.cc`` ``EvalHybrid``, ``kernel_utils.cc`` ``RnnBatchStep``): every product W·v first quantizes each
row of v on the fly (``SymmetricQuantizeFloats``: range = max|v|, factor = range / 127, q = round(v·127 / range)
clamped to ±127, all zeros for a zero row) and then accumulates ``dot(q, W_int8) · (factor · s_W)`` into the
float result, which starts at the bias.  This is the only integer form of BIDIRECTIONAL_SEQUENCE_LSTM and
(UNI|BI)DIRECTIONAL_SEQUENCE_RNN in LiteRT (they have no full-integer kernel).

With ``asymmetric_quantize_inputs`` (what TF's dynamic-range quantization sets) the rows are quantized
asymmetrically instead (``AsymmetricQuantizeFloats``: rmin = min(0, min v), rmax = max(0, max v), factor =
(rmax - rmin) / 255, zero point = clamp(round(-128 - rmin / factor)), q = clamp(round(zp + v / factor)) in
[-128, 127]) and the product subtracts ``rowsum(W)·zp`` from the integer dot product.

The on-the-fly quantization is shared with the other hybrid ops (:mod:`tf2tosa.quant.hybrid`).
TOSA: ABS/REDUCE_MAX (REDUCE_MIN) for the range, RECIPROCAL for the inverse factor, FLOOR(|x| + 0.5) with the
sign for C's ``round``, CLAMP, CAST to int8, an int8 MATMUL (exact int32 dot products), the row-sum correction in
int32, CAST to float, two MULs.  The results are float: the dot products are exact, but the kernel's divisions
(partly in double) are RECIPROCAL + MUL in float32 here (an ulp apart at worst), so an element within that
distance of a rounding boundary may quantize one step differently; the outputs are compared with LiteRT within
the float tolerance.  Per-channel weight scales are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..quant.hybrid import quantize_rows, quantize_rows_asymmetric
from ..tosa.builder import Builder
from .lowering.numeric import static_shape


@dataclass
class Weights:
    """Gate weight matrices [n_g, k] stacked as the [1, k, Σn_g] right operand of MATMUL; ``scales`` holds each
    column's weight scale for int8 (hybrid) weights, None for float32."""

    mat: Value
    scales: np.ndarray | None
    rowsum: Value | None = None  # [1, 1, Σn_g] int32 row sums of the int8 weights (asymmetric inputs)


def _rows3(b: Builder, v: Value) -> Value:
    if v.type.rank != 2:
        raise Unsupported(f"weight {v.name} has rank {v.type.rank}, expected 2")
    r, c = static_shape(v)
    return b.reshape(b.transpose(v, [1, 0]), [1, c, r])


def weight_scale(op: Operation, v: Value) -> float | None:
    """The per-tensor scale of an int8 (hybrid) weight, None for a float32 one; anything else is refused."""
    if v.dtype is DType.FP32 and not v.type.is_quantized:
        return None
    q = v.type.quant
    if v.dtype is not DType.INT8 or q is None or q.per_channel or q.zero_point[0] != 0:
        raise Unsupported(f"{op.name}: weight {v.source or v.name} is {v.type} (float32 or per-tensor symmetric "
                          f"int8 weights are lowered)")
    if op.operands[0].dtype is not DType.FP32:
        raise Unsupported(f"{op.name}: int8 weights with a {op.operands[0].dtype.value} input")
    return float(q.scale[0])


def stack(b: Builder, op: Operation, ws: list[Value]) -> Weights:
    """Stack gate weights (all float32 or all int8) as one MATMUL operand."""
    scales = [weight_scale(op, w) for w in ws]
    if any(s is None for s in scales) and any(s is not None for s in scales):
        raise Unsupported(f"{op.name}: float32 and int8 weights mixed in one product")
    mat = _rows3(b, b.concat(ws, 0))
    if scales[0] is None:
        return Weights(mat, None)
    cols = np.concatenate([np.full(static_shape(w)[0], s, np.float32) for w, s in zip(ws, scales)])
    rowsum = None
    if bool(op.attrs.get("asymmetric_quantize_inputs", False)):
        n = int(cols.size)
        rowsum = b.reshape(b.reduce_sum(b.cast(mat, DType.INT32), axis=1), [1, 1, n])
    return Weights(mat, cols, rowsum)


def dequantized(b: Builder, op: Operation, v: Value) -> Value:
    """A float32 weight vector; an int8 one as LiteRT's hybrid kernel recovers it (``q · scale`` in float32)."""
    s = weight_scale(op, v)
    if s is None:
        return v
    return b.mul(b.cast(v, DType.FP32), b.const(np.full((1,) * v.type.rank, s, np.float32), DType.FP32))


def wmatmul(b: Builder, x: Value, w: Weights) -> Value:
    """x [1, R, K] (float32) times the stacked weights: a float MATMUL, or the hybrid product."""
    if w.scales is None:
        zp = b.zp(0.0, DType.FP32)
        return b.matmul(x, w.mat, zp, zp)
    z8 = b.zp(0, DType.INT8)
    if w.rowsum is not None:
        q, factor, zp = quantize_rows_asymmetric(b, x)
        dot = b.binary("SUB", b.matmul(q, w.mat, z8, z8), b.mul(w.rowsum, zp))
    else:
        q, factor = quantize_rows(b, x)
        dot = b.matmul(q, w.mat, z8, z8)
    acc = b.cast(dot, DType.FP32)
    scale = b.mul(factor, b.const(w.scales.reshape(1, 1, -1), DType.FP32))
    return b.mul(acc, scale)
