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
  zp = clamp(round(-128 - rmin / factor)), q = clamp(zp + round(v / factor)) in [-128, 127] (the offset is added
  after the rounding: an exact tie rounds by the sign of v) (zeros, factor 1 and
  zp 0 when rmin = rmax); the product subtracts ``zp · Σ w`` (the weights' row sums);
* result = float(dot) · factor · s_w (per channel) + bias, then the fused activation.

TOSA, per quantized tensor (:func:`quantize`): REDUCE_MAX of ABS (symmetric) or REDUCE_MIN/REDUCE_MAX with 0
(asymmetric) for the range, RECIPROCAL and MUL for the scale, C's ``round`` exactly (:func:`c_round`), CAST to
int8 (which saturates: the kernels' clamp); then an int8 product (exact int32), the row-sum correction in int32,
CAST to float, MULs and the bias ADD.  The dot products are exact; the kernels' divisions (partly in double) are
RECIPROCAL + MUL in float32 here (an ulp apart at worst), so an element within that distance of a rounding
boundary may quantize one step differently: the outputs are compared with LiteRT within the float bound.

A zero range (an all-zero row) is raised to :data:`TINY` instead of being special-cased: every element is 0, so
q is 0 (symmetric) or exactly the zero point (asymmetric, zp = -128), and the product, corrected by ``zp·Σw``, is
0 as LiteRT's (which takes q = 0, factor 1).  A tensor that feeds several hybrid ops (Q/K/V projections) is
quantized once (:func:`quantize` keeps what it made per graph).  A tensor known to be >= 0 (:func:`nonnegative`:
a ReLU's output ...) has rmin = 0, so its asymmetric zero point is the constant -128 and only the FLOOR branch of
the rounding is ever taken: 10 ops instead of 25, the same bits, and the int8 product takes -128 as its input zero
point (:func:`_asymmetric_nonneg`).  The tensors made here get short names (``hq``,
``hq_1`` …: :func:`short_names`); the op's result keeps the source's name.
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from .common import MODES, check_mode, is_hybrid  # (in common: a float conversion asks them, not loading this)


def hybrid_mode(b: Builder) -> str:
    """The conversion's ``hybrid`` option checked: ``"kernel"`` (the default) or ``"dequantize"``."""
    return check_mode(b.context.options.hybrid, b.context.file)


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
    kept = b.context.passes.of(b.graph).keep_unfolded
    for v in (wf, out):
        assert v.producer is not None
        kept.append(v.producer.id)
    return out


#: a quantized range below this is taken as this (a zero range: see the module docstring); 2^-110 keeps
#: ``range / 255`` a normal float32, so its RECIPROCAL is finite
TINY = 2.0 ** -110
#: the float32 just below 1/2: FLOOR(v + HALF_BELOW) is C's round of any float32 0 <= v < 2^23 (v + 0.5 would take
#: 0.49999997 to 1)
HALF_BELOW = float(np.nextafter(np.float32(0.5), np.float32(0.0)))
#: the base of the names of the tensors the hybrid rules make inside an op
SHORT_NAME = "hq"


class short_names:
    """``with short_names(b):`` the values made get the short base name :data:`SHORT_NAME` (the source's names
    run to hundreds of bytes, and an on-the-fly quantization makes a dozen values); the builder's name hint is
    restored on exit, for the op's last values."""

    def __init__(self, b: Builder) -> None:
        self.b = b
        self.hint = b.name_hint

    def __enter__(self) -> None:
        self.b.name_hint = SHORT_NAME

    def __exit__(self, *exc: object) -> None:
        self.b.name_hint = self.hint


def fconst(b: Builder, value: float, rank: int = 3) -> Value:
    """A float32 scalar as a rank-``rank`` [1, ...] constant."""
    return b.const(np.full([1] * rank, value, np.float32), DType.FP32)


def c_round(b: Builder, v: Value, nonnegative: bool = False) -> Value:
    """C's round (half away from zero) of a float32 tensor, exactly: FLOOR(v + 0.5⁻) where v >= 0, CEIL(v - 0.5⁻)
    where v < 0 (0.5⁻ = :data:`HALF_BELOW`; both exact below 2^23, checked over every float32 below 256).  TOSA's
    CAST rounds ties to even instead, and a tie is an ordinary event here (an input of power-of-two range)."""
    r = v.type.rank
    up = b.floor(b.binary("ADD", v, fconst(b, HALF_BELOW, r)))
    if nonnegative:
        return up
    down = b.ceil(b.binary("SUB", v, fconst(b, HALF_BELOW, r)))
    return where(b, b.binary("GREATER", fconst(b, 0.0, r), v), down, up)


def where(b: Builder, cond: Value, a: Value, c: Value) -> Value:
    return b.emit("SELECT", b.broadcast_ranks(cond, a, c)).result


#: ops whose result is >= 0 (or NaN) whatever their operands
_NONNEG_ALWAYS = frozenset({"SIGMOID", "EXP", "ABS"})
#: ops whose result is >= 0 (or NaN) when all their data operands (the first ``n``, None: all) are
_NONNEG_IF_OPERANDS: dict[str, int | None] = {
    "RESHAPE": 1, "TRANSPOSE": 1, "SLICE": 1, "TILE": 1, "GATHER": 1, "IDENTITY": 1, "MAX_POOL2D": 1,
    "AVG_POOL2D": 1, "REDUCE_MAX": 1, "REDUCE_MIN": 1, "REDUCE_SUM": 1, "CONCAT": None, "ADD": 2, "MUL": 2,
    "MINIMUM": 2, "MAXIMUM": 2, "SELECT": None}


def nonnegative(v: Value, depth: int = 12) -> bool:
    """Whether every element of the float tensor ``v`` is >= 0 (-0.0 included) or NaN, by what makes it: a CLAMP
    to a minimum >= 0 (a fused ReLU / ReLU6), a sigmoid or exp, a non-negative constant, and the ops that keep the
    sign of non-negative operands (reshapes, slices, pools, sums, products ...).  False when not known."""
    op = v.producer
    if op is None or depth <= 0:
        return False
    code = op.opcode
    if code == "CONST":
        c = v.const()
        return c is not None and bool(np.all(np.asarray(c, np.float64) >= 0))
    if code in _NONNEG_ALWAYS:
        return True
    if code == "CLAMP":
        lo, hi = float(op.attrs.get("min_val", -1.0)), float(op.attrs.get("max_val", -1.0))
        return lo >= 0 or (hi >= 0 and nonnegative(op.operands[0], depth - 1))
    if code == "MAXIMUM" and any(o.is_const and nonnegative(o, 1) for o in op.operands[:2]):
        return True  # max(x, c >= 0) >= c, or NaN (PROPAGATE), or c (IGNORE)
    if code == "PAD":
        return nonnegative(op.operands[0], depth - 1) and nonnegative(op.operands[2], 1)
    if code not in _NONNEG_IF_OPERANDS:
        return False
    n = _NONNEG_IF_OPERANDS[code]
    data = op.operands[1:] if code == "SELECT" else op.operands[:n] if n is not None else op.operands
    return bool(data) and all(nonnegative(o, depth - 1) for o in data)


def _row_max(b: Builder, x: Value, rows: list[int]) -> Value:
    """REDUCE_MAX of each row of x reshaped to ``rows`` (shaped like ``rows`` with a last axis of 1).  When the rows
    are x's trailing axes and at most two of them are not 1 (a Conv1D's [N, 1, W, C]), one REDUCE_MAX per such axis
    instead of the RESHAPE (and its shape constant) and one: the same maximum, which is exact in any order."""
    shape = [int(d) for d in x.shape]
    k = len(rows)
    axes = [i for i in range(1, len(shape)) if shape[i] != 1]
    if len(shape) == k and shape[0] == rows[0] and all(r == 1 for r in rows[1:-1]) and 0 < len(axes) <= 2 \
            and rows[-1] == int(np.prod(shape[1:])):
        for i in reversed(axes):
            x = b.reduce_max(x, axis=i)
        return x
    return b.reduce_max(b.reshape(x, rows), axis=k - 1)


def _symmetric(b: Builder, x: Value, rows: list[int], nonneg: bool = False) -> tuple[Value, Value]:
    """SymmetricQuantizeFloats of each row of x reshaped to ``rows`` (along its last axis): (int8 q shaped like x,
    float32 factor shaped like ``rows`` with a last axis of 1, which must broadcast against x).
    q = sign(x)·round(|x|·(127/range)): fl(|x|·s) = |fl(x·s)| and C's round is odd, so rounding the magnitude (>= 0,
    two ops) and restoring the sign is the same.  A ``nonneg`` x (:func:`nonnegative`) is its own magnitude: no
    ABS, no sign (the same values: -0.0 quantizes to 0 either way)."""
    r = x.type.rank
    ax = x if nonneg else b.abs(x)
    rmax = _row_max(b, ax, rows)
    rng = b.binary("MAXIMUM", rmax, fconst(b, TINY, len(rows)))
    inv = b.mul(b.reciprocal(rng), fconst(b, 127.0, len(rows)))  # 127/range (exact for a power-of-two range)
    factor = b.mul(rng, fconst(b, float(np.float32(1.0 / 127.0)), len(rows)))
    mag = c_round(b, b.mul(ax, inv), nonnegative=True)  # <= 127: |x| <= range
    if nonneg:
        return b.cast(mag, DType.INT8), factor
    signed = where(b, b.binary("GREATER", fconst(b, 0.0, r), x), b.binary("SUB", fconst(b, 0.0, r), mag), mag)
    return b.cast(signed, DType.INT8), factor


#: the zero point of an asymmetric quantization of a non-negative tensor: rmin = 0, so round(-128 - 0) = -128,
#: a constant (the int8 product's input zero point) instead of a run-time value
NONNEG_ZP = -128


def _asymmetric_nonneg(b: Builder, x: Value, rows: list[int]) -> tuple[Value, Value]:
    """:func:`_asymmetric` of an x whose elements are all >= 0 (-0.0 included) or NaN (:func:`nonnegative`), the
    same bits in 10 ops instead of 25: rmin = MINIMUM(min x, 0) is ±0, so the factor (rmax - ±0)/255 is rmax/255,
    the zero point round(-128 - ±0·inv) is -128 (:data:`NONNEG_ZP`), and every v = x·inv is >= 0, -0.0 or NaN,
    for which :func:`c_round` takes its FLOOR(v + 0.5⁻) branch (GREATER(0, v) is false).  (A NaN anywhere makes
    the range, hence every output, NaN in both forms.)"""
    k = len(rows)
    rmax = b.binary("MAXIMUM", _row_max(b, x, rows), fconst(b, TINY, k),
                    nan_mode="PROPAGATE")
    factor = b.mul(rmax, fconst(b, float(np.float32(1.0 / 255.0)), k))
    up = c_round(b, b.mul(x, b.reciprocal(factor)), nonnegative=True)
    return b.cast(b.binary("ADD", fconst(b, float(NONNEG_ZP), k), up), DType.INT8), factor


def _asymmetric(b: Builder, x: Value, rows: list[int], padding: list[int] | None = None
                ) -> tuple[Value, Value, Value]:
    """AsymmetricQuantizeFloats of each row of x reshaped to ``rows``: (int8 q shaped like x, float32 factor and
    float32 zero point (an integer) shaped like ``rows`` with a last axis of 1).  The range's upper end is at least
    :data:`TINY` rather than 0: the same (max - min) for any row but one whose values all lie within 2^-86 of 0.
    With ``padding`` (TOSA PAD layout) q is that of x padded with 0.0, whose range is x's (0 lies in every
    asymmetric range): the range is computed once per x (:func:`_asymmetric_range`) for all its paddings."""
    factor, inv, zp = _asymmetric_range(b, x, rows)
    if padding:
        x = b.pad(x, padding, 0.0)
    # zp + round(x/factor), as the kernel adds the (integer) offset after rounding: a tie rounds away from zero by
    # the sign of x, not of the sum; CAST saturates to [-128, 127] (the kernel's clamp)
    q = b.cast(b.binary("ADD", zp, c_round(b, b.mul(x, inv))), DType.INT8)
    return q, factor, zp


def _asymmetric_range(b: Builder, x: Value, rows: list[int]) -> tuple[Value, Value, Value]:
    """The asymmetric range of each row of x reshaped to ``rows``: (factor, 1/factor, zero point), made once per
    tensor and rows in a graph."""
    memo = b.context.passes.of(b.graph).hybrid_ranges
    key = (x.id, tuple(rows))
    got = memo.get(key)
    if got is not None and all(v.producer is not None and b.graph.ops.get(v.producer.id) is v.producer for v in got):
        return got
    k = len(rows)
    flat = b.reshape(x, rows)
    rmin = b.binary("MINIMUM", b.reduce_min(flat, axis=k - 1), fconst(b, 0.0, k), nan_mode="PROPAGATE")
    rmax = b.binary("MAXIMUM", b.reduce_max(flat, axis=k - 1), fconst(b, TINY, k), nan_mode="PROPAGATE")
    factor = b.mul(b.binary("SUB", rmax, rmin), fconst(b, float(np.float32(1.0 / 255.0)), k))
    inv = b.reciprocal(factor)
    # zero point: round(-128 - rmin/factor), in [-128, 127] as rmin <= 0 and -rmin <= range
    zp = c_round(b, b.binary("SUB", fconst(b, -128.0, k), b.mul(rmin, inv)))
    memo[key] = (factor, inv, zp)
    return factor, inv, zp


#: a quantization's zero point: a float32 run-time Value (asymmetric), the constant :data:`NONNEG_ZP` (asymmetric,
#: non-negative input) or None (symmetric: 0)
ZeroPoint = Value | int | None


def quantize(b: Builder, x: Value, shape: list[int], asymmetric: bool, rows: list[int] | None = None,
             padding: list[int] | None = None) -> tuple[Value, Value, ZeroPoint]:
    """x reshaped to ``shape`` and quantized row by row, a row being the last axis of x reshaped to ``rows``
    (default ``shape``; LiteRT's per-row or per-batch quantization): (int8 q of ``shape``, float32 factor of
    ``rows`` with a last axis of 1, broadcast against ``shape``, and the zero point: float32 like the factor (an
    integer; asymmetric), :data:`NONNEG_ZP` (asymmetric, x :func:`nonnegative`: the int8 product takes it as its
    input zero point, :func:`input_zp`) or None (symmetric)).  Made once per tensor, shapes and kind in a graph: a
    later hybrid op reading the same tensor reuses it.  ``padding`` (TOSA PAD layout; asymmetric, x not
    non-negative): q is that of x padded with 0.0 (a window's pads, which then contribute ``zp·w``, taken off with
    the rest of ``zp·Σw``), the range that of x, shared with x's other quantizations."""
    rows = rows or shape
    memo = b.context.passes.of(b.graph).hybrid_quantized
    key = (x.id, tuple(shape), tuple(rows), asymmetric, tuple(padding or ()))
    got = memo.get(key)
    if got is not None and all(v.producer is not None and b.graph.ops.get(v.producer.id) is v.producer
                               for v in got if isinstance(v, Value)):
        return got
    src = x  # (a reshape of a reshape: the first one's input, when it has the shape - one op fewer, or two)
    while src.producer is not None and src.producer.opcode == "RESHAPE" and list(src.shape) != list(shape):
        src = src.producer.operands[0]
    nonneg = nonnegative(x)
    with short_names(b):
        elems = b.reshape(src if list(src.shape) == list(shape) else x, shape)
        made: tuple[Value, Value, ZeroPoint]
        if asymmetric and nonneg and not padding:
            q, factor = _asymmetric_nonneg(b, elems, rows)
            made = (q, factor, NONNEG_ZP)
        elif asymmetric:
            made = _asymmetric(b, elems, rows, padding)
        else:
            q, factor = _symmetric(b, elems, rows, nonneg)
            made = (q, factor, None)
    memo[key] = made
    return made


def quantize_rows(b: Builder, x: Value) -> tuple[Value, Value]:
    """SymmetricQuantizeFloats per row of x [1, R, K]: (int8 [1, R, K], float32 factor [1, R, 1])."""
    with short_names(b):
        return _symmetric(b, x, list(x.shape))


def quantize_rows_asymmetric(b: Builder, x: Value) -> tuple[Value, Value, Value]:
    """AsymmetricQuantizeFloats per row of x [1, R, K]: (int8 q, float32 factor [1, R, 1], int32 zero point)."""
    with short_names(b):
        q, factor, zp = _asymmetric(b, x, list(x.shape))
        return q, factor, b.cast(zp, DType.INT32)


def input_zp(b: Builder, zp: ZeroPoint) -> Value:
    """The int8 product's input zero point: :data:`NONNEG_ZP` for a constant zero point (the product is then
    Σ(q - zp)·w, exact in int32, with no correction), else 0."""
    return b.zp(zp if isinstance(zp, int) else 0, DType.INT8)


def corrected(b: Builder, dot: Value, zp: ZeroPoint, w_rows: np.ndarray) -> Value:
    """float32(``dot - zp · Σw``) (``w_rows`` [C, K]: the int8 weights of each output channel, the last axis of
    ``dot``; ``zp`` the float zero point, None for symmetric inputs, an int when the product took it as its input
    zero point (:func:`input_zp`)).  In float32 (CAST, MUL, SUB) where every integer involved is below 2^24
    (|dot - zp·Σw| <= 255·Σ|w|), so exact and the same as in int32; else in int32."""
    if not isinstance(zp, Value):
        return b.cast(dot, DType.FP32)
    rank = dot.type.rank
    w_rows = np.asarray(w_rows, np.int64)
    rowsum = w_rows.sum(axis=1).reshape([1] * (rank - 1) + [-1])
    if 255 * int(np.abs(w_rows).sum(axis=1).max(initial=0)) < (1 << 24):
        return b.binary("SUB", b.cast(dot, DType.FP32), b.mul(zp, b.const(rowsum.astype(np.float32), DType.FP32)))
    rs = b.const(rowsum, DType.INT32)
    return b.cast(b.binary("SUB", dot, b.mul(b.cast(zp, DType.INT32), rs)), DType.FP32)


__all__ = ["HALF_BELOW", "MODES", "NONNEG_ZP", "SHORT_NAME", "TINY", "ZeroPoint", "c_round",
           "check_mode", "corrected", "dequantize_weight", "fconst", "hybrid_mode", "input_zp", "is_hybrid",
           "nonnegative", "quantize", "quantize_rows", "quantize_rows_asymmetric", "short_names", "weight_scales",
           "where"]
