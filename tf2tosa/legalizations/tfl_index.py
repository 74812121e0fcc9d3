"""TFLite index, scan and scatter ops → TOSA 1.0 by composition (none has a lowering in the document, except
lowering doc: tfl.one_hot, whose SCATTER form is replaced): one_hot, broadcast_to/args, range, cumsum, topk_v2,
segment_sum and unsorted_segment_*, matrix_diag/set_diag, reverse_sequence, scatter_nd, embedding_lookup, where,
dynamic_update_slice, bucketize, dilate.

Integer results are exact by construction: every data-dependent choice is an EQUAL/GREATER against an iota
constant followed by SELECT, and every sum that must be exact runs in i32 (REDUCE_SUM has i32 and float modes
only, spec 2.9.6 REDUCE_SUM).  Shapes come from the (static) operands and constant operands, never from ``op.results``,
except where the output size is the only place it is recorded (tfl.where).  Data-movement rules keep the stored
values of quantized tensors (TFLite copies them), see :func:`.lowering.layout.keeps_values`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value, has_value
from ..ir.symdim import SYM_AFFINE, is_symbolic
from ..tosa.builder import Builder
from . import delegate
from .lowering import tf_ops
from .lowering.layout import (
    check_rank,
    const_ints,
    data_operand,
    dilate_axis,
    keeps_values,
    narrow_array,
    prod,
    reverse,
    static_shape,
    tosa_dtype,
)
from .lowering.legalize_common import const_operand, positive_axis
from .lowering.numeric import FLOAT_TYPES, select
from .registry import legalize

_ANY = ("fp32", "i8", "i16", "i32", "bool")
_NUM = ("fp32", "i32")
#: largest intermediate (elements) a compare-and-reduce composition may build before we refuse
MAX_MASK_ELEMENTS = 1 << 26


# ------------------------------------------------------------------------------------------------ helpers
def _iota(b: Builder, n: int, rank: int, axis: int) -> Value:
    """An i32 constant 0..n-1 laid along ``axis`` of a rank-``rank`` shape of 1s."""
    shape = [1] * rank
    shape[axis] = n
    return b.const(np.arange(n, dtype=np.int32).reshape(shape), DType.INT32, name="iota")


def _k(b: Builder, value: float | int | bool, dtype: DType, rank: int) -> Value:
    """A constant of ``dtype`` with ``rank`` dims of 1."""
    return b.const(np.full((1,) * rank, value, dtype=dtype.np_dtype()), dtype)


def _i32(b: Builder, v: Value, what: str) -> Value:
    """``v`` as i32 data: constant i64 narrowed, i8/i16 widened; non-constant i64 refused."""
    x = data_operand(b, v)
    if x.dtype is DType.INT32:
        return x
    if x.dtype in (DType.INT8, DType.INT16):
        return b.cast(x, DType.INT32)
    raise Unsupported(f"{what} of type {v.dtype}")


def _lowest(dtype: DType) -> float | int:
    return float(np.finfo(np.float32).min) if dtype.is_float else dtype.range()[0]


def _highest(dtype: DType) -> float | int:
    return float(np.finfo(np.float32).max) if dtype.is_float else dtype.range()[1]


def _check_mask(elements: int, what: str) -> None:
    if elements > MAX_MASK_ELEMENTS:
        raise Unsupported(f"{what} needs a {elements}-element comparison mask (> {MAX_MASK_ELEMENTS})")


def _widen_sum(b: Builder, x: Value) -> tuple[Value, DType]:
    """REDUCE_SUM-able view of ``x`` (i8/i16 → i32, exact) and the type to cast the sum back to."""
    if x.dtype in FLOAT_TYPES or x.dtype is DType.INT32:
        return x, x.dtype
    if x.dtype in (DType.INT8, DType.INT16):
        return b.cast(x, DType.INT32), x.dtype
    raise Unsupported(f"sum of {x.dtype} values")


# ------------------------------------------------------------------------------------------------ one_hot
@legalize("tfl.one_hot", dtypes=("fp32", "i8", "i32"), arity=4)
@keeps_values
def one_hot(b: Builder, op: Operation) -> list[Value]:
    """EQUAL of the indices against an iota along the new axis, then SELECT(on, off) (the tfl.one_hot lowering's SCATTER
    replaced).

    on where indices == k at position k of the new ``axis``, off elsewhere (:func:`.lowering.tf_ops.one_hot`).  the
    tfl.one_hot lowering's
    SCATTER form (lowering doc: lower_one_hot_op, W never set) REQUIREs in-range indices (spec 2.11.2 SCATTER); TFLite
    gives an
    all-off row for an index outside [0, depth), and so does this."""
    depth = const_ints(op, 1, "depth")
    if len(depth) != 1:
        raise Unsupported(f"one_hot depth {depth}")
    on, off = data_operand(b, op.operands[2]), data_operand(b, op.operands[3])
    if on.dtype != off.dtype:
        raise Unsupported(f"one_hot on/off values of types {on.dtype}/{off.dtype}")
    idx = _i32(b, op.operands[0], "one_hot indices")
    check_rank(idx.type.rank + 1, "one_hot result")
    return [tf_ops.one_hot(b, idx, depth[0], on, off, int(op.attrs.get("axis", -1)))]


# -------------------------------------------------------------------------------------------- broadcasting
@legalize("tfl.broadcast_to", dtypes=("fp32", "i8", "i16"), arity=2)
@keeps_values
def broadcast_to(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE to the target rank, TILE the size-1 dims (:func:`.lowering.tf_ops.broadcast_to`; no lowering in L)."""
    shape = const_ints(op, 1, "shape")
    check_rank(len(shape), "broadcast_to result")
    x = data_operand(b, op.operands[0])
    y = tf_ops.broadcast_to(b, x, shape)
    return [b.identity(y) if y is x else y]


@legalize("tfl.broadcast_args", dtypes=("i32",))
def broadcast_args(b: Builder, op: Operation) -> list[Value]:
    """The broadcast of two constant shapes, as an i32 CONST."""
    s0, s1 = const_ints(op, 0, "shape"), const_ints(op, 1, "shape")
    try:
        out = np.broadcast_shapes(tuple(s0), tuple(s1))
    except ValueError:
        raise Unsupported(f"shapes {s0} and {s1} do not broadcast") from None
    return [b.const(np.asarray(out, dtype=np.int32).reshape(-1), DType.INT32)]


# ---------------------------------------------------------------------------------------------------- range
#: elements a constant RANGE may have (it is computed at conversion time)
MAX_RANGE = 1 << 22


@legalize("tfl.range", dtypes=("fp32", "i32"), arity=3)
def range_(b: Builder, op: Operation) -> list[Value]:
    """A CONST for constant start/limit/delta (no lowering in lowering doc: tfl.range); dynamic bounds are refused.

    Float values are accumulated in float32 as
    TFLite's kernel does.  With dynamic bounds the output size depends on the data, which a static TOSA graph
    cannot express.  ``--dynamic``: an integer range whose start or limit is computed from a dimension size keeps
    its length as an expression and its values as an affine form (``SYM_AFFINE``), which the gather of frames reads
    (:func:`.tfl_layout.gather`)."""
    sym = _symbolic_range(b, op)
    if sym is not None:
        return [sym]
    vals = []
    for k, what in enumerate(("start", "limit", "delta")):
        c = op.operands[k].const()
        if c is None:
            raise Unsupported(f"range {what} is not a compile-time constant (the output size would be dynamic)")
        vals.append(np.asarray(c).reshape(-1)[0])
    start, limit, delta = vals
    if delta == 0:
        raise Unsupported("range with delta 0")
    dt = tosa_dtype(op.results[0].type.dtype)
    if dt.is_float:
        # TFLite's kernel: n = ceil(|(limit - start) / delta|) and value += delta, both in float32
        s32, l32, d32 = np.float32(start), np.float32(limit), np.float32(delta)
        with np.errstate(all="ignore"):
            steps = np.abs((l32 - s32) / d32) if d32 != 0 else np.float32(np.inf)
        if not np.isfinite(steps) or steps > MAX_RANGE:
            raise Unsupported(f"range({start}, {limit}, {delta}) has too many elements")
        n = int(np.ceil(steps))
        arr = np.empty(max(n, 0), np.float32)
        v = s32
        for i in range(arr.size):
            arr[i] = v
            v = np.float32(v + d32)
    else:
        if int(delta) == 0 or abs(int(limit) - int(start)) // abs(int(delta)) > MAX_RANGE:
            raise Unsupported(f"range({start}, {limit}, {delta}) has too many elements")
        arr = narrow_array(np.arange(int(start), int(limit), int(delta), dtype=np.int64), op.results[0].type.dtype)
    if arr.size == 0:
        raise Unsupported("range with an empty result (TOSA tensors have no zero-sized dimensions)")
    return [b.const(arr, dt)]


def _symbolic_range(b: Builder, op: Operation) -> Value | None:
    """range(start, limit, delta) with an integer start or limit that carries a dimension expression and a constant
    positive delta: the CONST of the sample values, with the length expression in its type and ``SYM_AFFINE``."""
    if len(op.operands) < 3 or op.results[0].dtype.is_float:
        return None
    syms = [v.sym_const() for v in op.operands[:3]]
    if any(s is None for s in syms) or not any(s is not None and s.dtype == object for s in syms[:2]):
        return None
    start, limit, delta = (np.asarray(s, dtype=object).reshape(-1)[0] for s in syms)
    if is_symbolic(delta) or int(delta) <= 0:
        return None
    n = (limit - start + delta - 1) // delta
    if n <= 0:
        raise Unsupported("range with an empty result (TOSA tensors have no zero-sized dimensions)")
    arr = narrow_array(np.arange(int(start), int(limit), int(delta), dtype=np.int64), op.results[0].type.dtype)
    v = b.const(arr, tosa_dtype(op.results[0].type.dtype))
    v.type = v.type.with_shape((n,))
    assert v.producer is not None
    v.producer.attrs[SYM_AFFINE] = ((n,), start, (int(delta),))
    return v


# --------------------------------------------------------------------------------------------------- cumsum
def _shift(b: Builder, x: Value, axis: int, k: int, fill: float | int) -> Value:
    """``x`` moved ``k`` places up ``axis`` (y[i] = x[i - k], ``fill`` for i < k): SLICE, then PAD at the front."""
    shape = static_shape(x)
    size = list(shape)
    size[axis] = shape[axis] - k
    y = b.slice(x, [0] * len(shape), size)
    pads = [0] * (2 * len(shape))
    pads[2 * axis] = k
    return b.pad(y, pads, fill)


@legalize("tfl.cumsum", dtypes=_NUM, arity=2)
def cumsum(b: Builder, op: Operation) -> list[Value]:
    """Log-step scan of ADDs of shifted copies (PAD + SLICE); exact for i32; exclusive/reverse supported.

    Inclusive (or ``exclusive``) prefix sum along a constant axis, optionally ``reverse``: a log-step scan
    (Hillis-Steele: x += shift(x, 2^j) for 2^j < n), exact for i32 (wrapping like TFLite's kernel) and within a
    few ulp of TFLite's sequential float sum (the partial sums are added in a tree order).  No lowering in L."""
    x = data_operand(b, op.operands[0])
    if x.type.is_quantized or not (x.dtype in FLOAT_TYPES or x.dtype is DType.INT32):
        raise Unsupported(f"cumsum on {x.type}")
    if x.type.rank == 0:
        raise Unsupported("cumsum of a rank-0 tensor")
    axis = positive_axis(const_ints(op, 1, "axis")[0], x.type.rank)
    rev = bool(op.attrs.get("reverse", False))
    zero: float | int = 0.0 if x.dtype.is_float else 0
    if rev:
        x = reverse(b, x, [axis])
    n = static_shape(x)[axis]
    if op.attrs.get("exclusive", False):
        x = _shift(b, x, axis, 1, zero) if n > 1 else b.const(np.zeros(static_shape(x)), x.dtype)
    k = 1
    while k < n:
        x = b.binary("ADD", x, _shift(b, x, axis, k, zero))
        k *= 2
    if rev:
        x = reverse(b, x, [axis])
    return [x]


# ---------------------------------------------------------------------------------------------------- top k
def _orderable(b: Builder, x: Value) -> Value:
    """A view of ``x`` GREATER/EQUAL accept (float or i32); int8/int16 stored values widen exactly."""
    if x.dtype in FLOAT_TYPES or x.dtype is DType.INT32:
        return x
    if x.dtype in (DType.INT8, DType.INT16):
        return b.cast(x, DType.INT32)
    raise Unsupported(f"ordering of {x.dtype} values")


@legalize("tfl.topk_v2", dtypes=("fp32", "i8", "i32"), arity=2)
def topk_v2(b: Builder, op: Operation) -> list[Value]:
    """Rank by an [n, n] compare + REDUCE_SUM, indices by EQUAL/SELECT, values by GATHER; exact, constant k.

    The k largest entries of each last-axis row, largest first, ties by lower index (TFLite's order), and
    their indices.  Rank of element i: #{j: x_j > x_i} + #{j < i: x_j == x_i}, from an [n, n] compare and a
    REDUCE_SUM in i32; index r = the i whose rank is r (EQUAL + SELECT + REDUCE_SUM); values = GATHER(x, index).
    Exact for every type (quantized rows compare their stored values).  k must be constant (no lowering in L)."""
    x = data_operand(b, op.operands[0])
    ks = const_ints(op, 1, "k")
    shape = static_shape(x)
    if not shape:
        raise Unsupported("topk_v2 of a rank-0 tensor")
    n = shape[-1]
    k = ks[0]
    if not 0 < k <= n:
        raise Unsupported(f"topk_v2 k={k} for rows of {n}")
    rows = prod(shape[:-1])
    _check_mask(rows * n * n, "topk_v2")
    xo = _orderable(b, b.reshape(x, [rows, n]))
    xi, xj = b.reshape(xo, [rows, n, 1]), b.reshape(xo, [rows, 1, n])
    lower = b.const((np.arange(n)[None, :] < np.arange(n)[:, None]).reshape(1, n, n), DType.BOOL)  # j < i
    before = b.binary("LOGICAL_OR", b.binary("GREATER", xj, xi),
                      b.binary("LOGICAL_AND", b.binary("EQUAL", xj, xi), lower))
    rank = b.emit("REDUCE_SUM", [b.cast(before, DType.INT32)], {"axis": 2}).result  # [rows, n, 1]
    hit = b.binary("EQUAL", b.reshape(rank, [rows, 1, n]), _iota(b, k, 3, 1))  # [rows, k, n]
    idx = b.emit("REDUCE_SUM", [select(b, hit, _iota(b, n, 3, 2), _k(b, 0, DType.INT32, 3))], {"axis": 2}).result
    idx = b.reshape(idx, [rows, k])
    vals = b.emit("GATHER", [b.reshape(x, [rows, n, 1]), idx], quant=x.type.quant).result
    out_shape = shape[:-1] + [k]
    vals = b.reshape(vals, out_shape)
    q = op.results[0].type.quant
    if q is not None and vals.type.quant != q:
        vals = b.emit("IDENTITY", [vals], quant=q).result
    return [vals, b.reshape(idx, out_shape)]


# ---------------------------------------------------------------------------------------------------- segments
def _segment_reduce(b: Builder, data: Value, ids: Value, num: int, kind: str) -> Value:
    """out[s] = reduce over rows i with ids[i] == s of data[i] (fill = the reduction's identity for empty
    segments; negative and out-of-range ids never match).  ids: [N] i32 (any leading shape of data, flattened)."""
    dshape = static_shape(data)
    ishape = static_shape(ids)
    if dshape[:len(ishape)] != ishape:
        raise Unsupported(f"segment ids of shape {ishape} for data of shape {dshape}")
    n, rest = prod(ishape), dshape[len(ishape):]
    d = prod(rest)
    _check_mask(num * n * d, "segment reduction")
    x = b.reshape(data, [1, n, d])
    dt = x.dtype
    if kind == "SUM":
        x, back = _widen_sum(b, x)
        fill: float | int = 0.0 if x.dtype.is_float else 0
        opcode = "REDUCE_SUM"
    elif kind == "PROD":
        if x.dtype not in FLOAT_TYPES:
            raise Unsupported(f"segment product of {x.dtype} (REDUCE_PRODUCT is float only, S7578-7596)")
        back, fill, opcode = dt, 1.0, "REDUCE_PRODUCT"
    elif kind in ("MAX", "MIN"):
        if x.dtype not in FLOAT_TYPES and x.dtype not in (DType.INT8, DType.INT16, DType.INT32):
            raise Unsupported(f"segment {kind.lower()} of {x.dtype}")
        back, fill = dt, _lowest(dt) if kind == "MAX" else _highest(dt)
        opcode = f"REDUCE_{kind}"
    else:  # pragma: no cover - internal
        raise AssertionError(kind)
    mask = b.binary("EQUAL", b.reshape(ids, [1, n, 1]), _iota(b, num, 3, 0))  # [num, n, 1]
    sel = select(b, mask, x, _k(b, fill, x.dtype, 3))  # [num, n, d]
    attrs = {"axis": 1, "nan_mode": "PROPAGATE"} if kind in ("MAX", "MIN") else {"axis": 1}
    y = b.emit(opcode, [sel], attrs).result
    if back is not y.dtype:
        y = b.cast(y, back)
    return b.reshape(y, [num] + rest)


def _segment_ids(b: Builder, op: Operation) -> Value:
    return _i32(b, op.operands[1], "segment ids")


@legalize("tfl.segment_sum", dtypes=_NUM, arity=2)
def segment_sum(b: Builder, op: Operation) -> list[Value]:
    """EQUAL mask of the ids against an iota, SELECT, REDUCE_SUM over the rows (exact for i32).

    Sum of the rows of each (sorted) segment: an EQUAL mask against an iota of segment ids, SELECT, and
    REDUCE_SUM over the rows (i32 exact).  The segment count is max(ids) + 1, so the ids must be constant or
    the result shape static.  No lowering in lowering doc: tfl.segment_sum."""
    data = data_operand(b, op.operands[0])
    ids = op.operands[1]
    c = ids.const()
    if c is not None:
        num = int(np.max(c)) + 1 if np.asarray(c).size else 0
        if np.asarray(c).size and int(np.min(c)) < 0:
            raise Unsupported("segment_sum with negative segment ids (TFLite rejects them)")
    elif op.results[0].type.is_static and op.results[0].type.rank:
        num = int(op.results[0].shape[0])
    else:
        raise Unsupported("segment_sum ids are not constant: the number of segments (the output size) would be "
                          "dynamic")
    if num < 1:
        raise Unsupported("segment_sum with no segments")
    return [_segment_reduce(b, data, _segment_ids(b, op), num, "SUM")]


def _const_segment_prod(b: Builder, op: Operation, num: int) -> Value:
    """An integer unsorted segment product, computed here: TOSA has no integer product (REDUCE_PRODUCT is float
    only), but the integer case is shape arithmetic (Keras' Tensordot multiplies the dimensions of a SHAPE), whose
    operands are constant once the shapes are fixed, and under ``--dynamic`` carry dimension expressions, which the
    products keep.  Empty segments give 1 and ids outside [0, num) are dropped, as in TFLite; i32 wraps as the C
    kernel's int32 multiply does."""
    data, ids = op.operands[0].sym_const(), op.operands[1].const()
    if data is None or ids is None:
        raise Unsupported(f"{op.name} of {op.operands[0].dtype} with non-constant data (REDUCE_PRODUCT is float "
                          f"only, S7578-7596)")
    ids = np.asarray(ids).reshape(-1)
    rows = np.asarray(data, dtype=object).reshape((ids.size, -1))
    out = np.empty((num, rows.shape[1]), dtype=object)
    out[:] = 1
    for i, s in enumerate(ids.tolist()):
        if 0 <= s < num:
            out[s] = [x * y for x, y in zip(out[s], rows[i])]
    out = out.reshape((num,) + np.asarray(data, dtype=object).shape[1:])
    dt = op.results[0].dtype
    bits = 8 * dt.np_dtype().itemsize
    # a product of plain ints wraps as the C kernel's int32 multiply; one of sizes keeps its expression (--dynamic)
    flat = [x if is_symbolic(x) else ((int(x) + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))
            for x in out.reshape(-1)]
    return b.sizes(np.asarray(flat, dtype=object).reshape(out.shape), dt)


def _unsorted(kind: str) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        data = data_operand(b, op.operands[0])
        if data.type.is_quantized:
            raise Unsupported(f"quantized {op.name}")
        num = const_ints(op, 2, "num_segments")[0]
        if num < 1:
            raise Unsupported(f"{op.name} with {num} segments")
        if kind == "PROD" and not data.dtype.is_float:
            return [_const_segment_prod(b, op, num)]
        return [_segment_reduce(b, data, _segment_ids(b, op), num, kind)]

    fill = {"SUM": "0", "PROD": "1", "MAX": "the lowest value", "MIN": "the highest value"}[kind]
    rule.__doc__ = (f"EQUAL mask of the ids against an iota, SELECT, REDUCE_{'PRODUCT' if kind == 'PROD' else kind} "
                    f"over the rows; constant num_segments.\n\n"
                    f"unsorted segment {kind.lower()} with a constant num_segments: EQUAL mask against an iota, "
                    f"SELECT with {fill} (an empty segment's result, as in TFLite), REDUCE_"
                    f"{'PRODUCT' if kind == 'PROD' else kind} over the rows; ids < 0 or >= num_segments are dropped.")
    legalize(f"tfl.unsorted_segment_{kind.lower()}", dtypes=("fp32", "i32") if kind == "PROD" else _NUM, arity=3)(rule)


for _kind in ("SUM", "PROD", "MAX", "MIN"):
    _unsorted(_kind)


# ------------------------------------------------------------------------------------------- matrix diagonals
def _eye(b: Builder, m: int, n: int, rank: int) -> Value:
    return b.const(np.eye(m, n, dtype=bool).reshape((1,) * (rank - 2) + (m, n)), DType.BOOL, name="eye")


def _zero_of(b: Builder, x: Value, rank: int) -> Value:
    """Raw 0 of ``x``'s type (TFLite's diag kernels write 0 whatever the quantization)."""
    return _k(b, False if x.dtype is DType.BOOL else 0, x.dtype, rank)


@legalize("tfl.matrix_diag", dtypes=("fp32", "i8"), arity=1)
@keeps_values
def matrix_diag(b: Builder, op: Operation) -> list[Value]:
    """SELECT(eye, x[..., None, :], 0): [..., N] → [..., N, N] with x on the diagonal (no lowering in lowering doc:
    tfl.matrix_diag)."""
    x = data_operand(b, op.operands[0])
    shape = static_shape(x)
    if not shape:
        raise Unsupported("matrix_diag of a rank-0 tensor")
    n = shape[-1]
    check_rank(len(shape) + 1, "matrix_diag result")
    r = len(shape) + 1
    return [select(b, _eye(b, n, n, r), b.reshape(x, shape[:-1] + [1, n]), _zero_of(b, x, r))]


@legalize("tfl.matrix_set_diag", dtypes=("fp32", "i8"), arity=2)
@keeps_values
def matrix_set_diag(b: Builder, op: Operation) -> list[Value]:
    """SELECT(eye, diagonal as a column, input): the main diagonal replaced (no lowering in lowering doc:
    tfl.matrix_set_diag).

    input [..., M, N] with its main diagonal replaced by diag [..., min(M, N)]: diag as a column [..., K, 1]
    (padded to M rows), SELECT(eye, column, input)."""
    x, diag = data_operand(b, op.operands[0]), data_operand(b, op.operands[1])
    shape, dshape = static_shape(x), static_shape(diag)
    if len(shape) < 2:
        raise Unsupported("matrix_set_diag of a tensor of rank < 2")
    m, n = shape[-2:]
    k = min(m, n)
    if dshape != shape[:-2] + [k] or diag.dtype != x.dtype:
        raise Unsupported(f"matrix_set_diag diagonal {diag.type} for input {x.type}")
    col = b.reshape(diag, shape[:-2] + [k, 1])
    if m > k:
        col = b.pad(col, [0, 0] * (len(shape) - 2) + [0, m - k, 0, 0], False if x.dtype is DType.BOOL else 0)
    return [select(b, _eye(b, m, n, len(shape)), col, x)]


# -------------------------------------------------------------------------------------------- reverse_sequence
@legalize("tfl.reverse_sequence", dtypes=("fp32", "i32"), arity=2)
@keeps_values
def reverse_sequence(b: Builder, op: Operation) -> list[Value]:
    """One GATHER with index t < L ? L - 1 - t : t on a [batch, seq, rest] view (no lowering in lowering doc:
    tfl.reverse_sequence).

    Reverse the first seq_lengths[b] entries along seq_dim of each batch_dim slice.  As one GATHER on a
    [batch, seq, rest] view with index t < L ? L - 1 - t : t (folded to a constant for constant lengths).
    No lowering in lowering doc: tfl.reverse_sequence."""
    x = data_operand(b, op.operands[0])
    shape = static_shape(x)
    r = len(shape)
    sd = positive_axis(int(op.attrs.get("seq_dim", 0)), r)
    bd = positive_axis(int(op.attrs.get("batch_dim", 0)), r)
    if sd == bd:
        raise Unsupported("reverse_sequence with seq_dim == batch_dim")
    lens = _i32(b, op.operands[1], "seq_lengths")
    nb, nt = shape[bd], shape[sd]
    if static_shape(lens) != [nb]:
        raise Unsupported(f"seq_lengths of shape {list(lens.shape)} for batch dimension {nb}")
    c = lens.const()
    if c is not None and (np.min(c) < 0 or np.max(c) > nt):
        raise Unsupported(f"seq_lengths {np.asarray(c).tolist()} outside [0, {nt}] (TFLite rejects them)")
    rest = [a for a in range(r) if a not in (bd, sd)]
    perm = [bd, sd] + rest
    values = b.reshape(b.transpose(x, perm), [nb, nt, prod([shape[a] for a in rest])])
    t = _iota(b, nt, 2, 1)
    ln = b.reshape(lens, [nb, 1])
    rev_idx = b.binary("SUB", b.binary("SUB", ln, _k(b, 1, DType.INT32, 2)), t)
    idx = select(b, b.binary("GREATER", ln, t), rev_idx, t)
    if list(idx.shape) != [nb, nt]:
        idx = b.tile(idx, [nb // int(idx.shape[0]), nt // int(idx.shape[1])])
    g, restore = _gather_ready(b, values)
    y = b.emit("GATHER", [g, idx], quant=values.type.quant).result
    if restore is not None:
        y = b.cast(y, restore)
    y = b.reshape(y, [shape[a] for a in perm])
    inv = [perm.index(a) for a in range(r)]
    return [b.transpose(y, inv)]


def _gather_ready(b: Builder, v: Value) -> tuple[Value, DType | None]:
    """GATHER/SCATTER have no bool mode (spec 2.11.1 GATHER): carry bool through i8."""
    if v.dtype is DType.BOOL:
        return b.cast(v, DType.INT8), DType.BOOL
    return v, None


# ------------------------------------------------------------------------------------------------ scatter_nd
def _flat_indices(b: Builder, idx: Value, lead: Sequence[int], what: str) -> tuple[Value, np.ndarray | None]:
    """Index tuples [..., q] into the first q dims of a tensor → flat i32 row indices [W]; constant when ``idx``
    is (then also returned as an array)."""
    ishape = static_shape(idx)
    q = ishape[-1]
    w = prod(ishape[:-1])
    strides = [prod(lead[i + 1:]) for i in range(q)]
    c = idx.const()
    if c is not None:
        tup = np.asarray(c, dtype=np.int64).reshape(w, q)
        if (tup < 0).any() or (tup >= np.asarray(lead)).any():
            raise Unsupported(f"{what} indices out of range")
        flat = (tup @ np.asarray(strides, dtype=np.int64)).astype(np.int32)
        return b.const(flat, DType.INT32), flat
    iv = b.reshape(_i32(b, idx, f"{what} indices"), [w, q])
    prodv = b.mul(iv, b.const(np.asarray(strides, dtype=np.int32).reshape(1, q), DType.INT32))
    return b.reshape(b.emit("REDUCE_SUM", [prodv], {"axis": 1}).result, [w]), None


def scatter_add(b: Builder, base: Value | None, shape: Sequence[int], idx: Value, updates: Value,
                what: str) -> Value:
    """``base`` (zeros when None) with ``updates`` added at the index tuples ``idx`` [..., q] (duplicates add up,
    as TFLite's scatter_nd does).  Unique constant indices: one SCATTER (spec 2.11.2 SCATTER) into the base when it is
    zero,
    else a SELECT-and-sum over an EQUAL mask of the flat row index (REDUCE_SUM in i32 / float)."""
    shape = [int(d) for d in shape]
    ishape = static_shape(idx)
    if not ishape or ishape[-1] > len(shape) or ishape[-1] < 1:
        raise Unsupported(f"{what} indices of shape {ishape} for a result of rank {len(shape)}")
    q = ishape[-1]
    lead, tail = shape[:q], shape[q:]
    k, d, w = prod(lead), prod(tail), prod(ishape[:-1])
    if static_shape(updates) != ishape[:-1] + tail:
        raise Unsupported(f"{what} updates of shape {list(updates.shape)} for indices {ishape} into {shape}")
    flat, fc = _flat_indices(b, idx, lead, what)
    upd = b.reshape(updates, [1, w, d])
    if base is None and fc is not None and len(np.unique(fc)) == w:
        u, restore = _gather_ready(b, upd)
        zeros = b.const(np.zeros([1, k, d]), u.dtype)
        y = b.emit("SCATTER", [zeros, b.reshape(flat, [1, w]), u], quant=updates.type.quant).result
        y = b.cast(y, restore) if restore is not None else y
        return b.reshape(y, shape)
    _check_mask(k * w * d, what)
    if updates.dtype is DType.BOOL:
        raise Unsupported(f"{what} of bool updates with repeated or dynamic indices")
    u, back = _widen_sum(b, upd)
    mask = b.binary("EQUAL", b.reshape(flat, [1, w, 1]), _iota(b, k, 3, 0))  # [k, w, 1]
    zero: float | int = 0.0 if u.dtype.is_float else 0
    total = b.emit("REDUCE_SUM", [select(b, mask, u, _k(b, zero, u.dtype, 3))], {"axis": 1}).result  # [k, 1, d]
    if base is not None:
        bb, _ = _widen_sum(b, b.reshape(base, [k, 1, d]))
        total = b.binary("ADD", bb, total)
    y = b.cast(total, back) if back is not total.dtype else total
    return b.reshape(y, shape)


@legalize("tfl.scatter_nd", dtypes=("fp32", "i32"), arity=3)
@keeps_values
def scatter_nd(b: Builder, op: Operation) -> list[Value]:
    """SCATTER for unique constant indices, else EQUAL mask + SELECT + REDUCE_SUM (duplicates add up).

    zeros(shape) with updates added at indices (duplicates sum, as in TFLite): SCATTER for unique constant
    indices, else EQUAL mask + SELECT + REDUCE_SUM (:func:`scatter_add`).  shape must be constant."""
    shape = const_ints(op, 2, "shape")
    check_rank(len(shape), "scatter_nd result")
    updates = data_operand(b, op.operands[1])
    return [scatter_add(b, None, shape, op.operands[0], updates, "scatter_nd")]


# ------------------------------------------------------------------------------------------ embedding_lookup
@legalize("tfl.embedding_lookup", dtypes=("fp32", "i8"), arity=2)
def embedding_lookup(b: Builder, op: Operation) -> list[Value]:
    """GATHER of the table's rows (tfl.gather on axis 0); hybrid int8 tables dequantized on the host.

    Rows of ``value`` selected by ``lookup`` (the section lowering doc: tfl.embedding_lookup has no lowering text):
    tfl.gather on axis 0.

    Hybrid models (int8/uint8 constant table, float output): TFLite multiplies each stored value by the scale
    (the zero point is not applied), done here on the host before the GATHER."""
    ids, value = op.operands[0], op.operands[1]
    out = op.results[0].type
    if value.type.is_quantized and out.dtype.is_float:
        c = value.const()
        q = value.type.quant
        assert q is not None
        if c is None:
            raise Unsupported("hybrid embedding_lookup with a non-constant table")
        if any(int(z) != 0 for z in np.asarray(q.zero_point).reshape(-1)) and value.dtype is not DType.UINT8:
            raise Unsupported("hybrid embedding_lookup with a non-zero zero point")
        arr = np.asarray(c)
        if value.dtype is DType.UINT8:  # TFLite treats uint8 tables as int8 offset by 128
            arr = arr.astype(np.int32) - 128
        scale = np.asarray(q.scale, dtype=np.float32)
        if scale.size > 1:
            scale = scale.reshape((-1,) + (1,) * (arr.ndim - 1))
        value = b.const((arr.astype(np.float32) * scale).astype(np.float32), DType.FP32)
    return delegate.via(b, op, "tfl.gather", [value, ids], {"axis": 0, "batch_dims": 0})


# ---------------------------------------------------------------------------------------------------- where
@legalize("tfl.where", dtypes=("fp32", "bool"), arity=1)
def where(b: Builder, op: Operation) -> list[Value]:
    """A CONST for a constant condition, a prefix-count composition for a static output size; else refused.

    Coordinates [num_true, rank] of the true elements in row-major order (i32 for TFLite's int64).

    A constant condition gives a CONST.  Otherwise the number of true elements is the output size, which must be
    static in the result type: slot of element i = (prefix count of trues up to i) - 1, and row r collects the
    coordinates of the true element whose slot is r (EQUAL mask + SELECT + REDUCE_SUM, exact in i32).  With a
    data-dependent size (the usual case) the op cannot be expressed in a static TOSA graph."""
    cond = op.operands[0]
    c = cond.const()
    if c is not None:
        coords = np.argwhere(np.asarray(c).astype(bool))
        if coords.size == 0:
            raise Unsupported("where with no true element (an empty result; TOSA has no zero-sized tensors)")
        return [b.const(coords.astype(np.int32), DType.INT32)]
    res = op.results[0].type
    if not res.is_static:
        raise Unsupported("where with a non-constant condition: the output size depends on the data (dynamic "
                          "shape, not expressible in TOSA 1.0)")
    shape = static_shape(cond)
    r = len(shape)
    num = int(res.shape[0])
    if r == 0 or num < 1 or list(res.shape) != [num, r]:
        raise Unsupported(f"where result {res} for a condition of shape {shape}")
    n = prod(shape)
    _check_mask(num * n * r, "where")
    x = data_operand(b, cond)
    if x.dtype is not DType.BOOL:
        x = b.logical_not(b.binary("EQUAL", x, _k(b, 0.0 if x.dtype.is_float else 0, x.dtype, r)))
    flag = b.cast(b.reshape(x, [1, n]), DType.INT32)
    # inclusive prefix count of trues along the flattened condition
    pc = flag
    k = 1
    while k < n:
        pc = b.binary("ADD", pc, _shift(b, pc, 1, k, 0))
        k *= 2
    slot = b.binary("SUB", pc, _k(b, 1, DType.INT32, 2))  # [1, n]
    hit = b.binary("LOGICAL_AND", b.binary("EQUAL", b.reshape(slot, [1, n, 1]), _iota(b, num, 3, 0)),
                   b.reshape(b.cast(flag, DType.BOOL), [1, n, 1]))  # [num, n, 1]
    where_at = np.stack(np.unravel_index(np.arange(n), shape), axis=-1).astype(np.int32).reshape(1, n, r)
    picked = select(b, hit, b.const(where_at, DType.INT32), _k(b, 0, DType.INT32, 3))  # [num, n, r]
    return [b.reshape(b.emit("REDUCE_SUM", [picked], {"axis": 1}).result, [num, r])]


# ------------------------------------------------------------------------------------------ dynamic_update_slice
@legalize("tfl.dynamic_update_slice", dtypes=("fp32", "i8"), arity=3)
@keeps_values
def dynamic_update_slice(b: Builder, op: Operation) -> list[Value]:
    """PAD + SELECT with a constant mask for a constant start, else GATHER at computed offsets + SELECT.

    ``operand`` with ``update`` written at ``start`` (clamped so the update fits, as TFLite does).

    Constant start: PAD the update into place and SELECT with a constant mask.  Dynamic start: for each output
    element, its offset inside the update per dim (i - s), a GATHER of the update at the clamped flat offset, and
    a SELECT where every offset lies in [0, u)."""
    x, upd = data_operand(b, op.operands[0]), data_operand(b, op.operands[1])
    shape, ushape = static_shape(x), static_shape(upd)
    r = len(shape)
    if len(ushape) != r or any(u > d for u, d in zip(ushape, shape)) or upd.dtype != x.dtype:
        raise Unsupported(f"dynamic_update_slice update {upd.type} into {x.type}")
    if r == 0:
        return [upd]
    c = op.operands[2].const()
    if c is not None:
        start = [min(max(int(s), 0), d - u) for s, d, u in zip(np.asarray(c).reshape(-1), shape, ushape)]
        pads = []
        for s, d, u in zip(start, shape, ushape):
            pads += [s, d - u - s]
        mask = np.zeros(shape, dtype=bool)
        mask[tuple(slice(s, s + u) for s, u in zip(start, ushape))] = True
        fill = False if x.dtype is DType.BOOL else 0
        return [select(b, b.const(mask, DType.BOOL), b.pad(upd, pads, fill), x)]
    starts = _i32(b, op.operands[2], "dynamic_update_slice start indices")
    if static_shape(starts) != [r]:
        raise Unsupported(f"dynamic_update_slice start of shape {list(starts.shape)} for rank {r}")
    n_out, n_up = prod(shape), prod(ushape)
    inside: Value | None = None
    flat: Value | None = None
    for a in range(r):
        sv = b.slice(starts, [a], [1])
        lo, hi = _k(b, 0, DType.INT32, 1), _k(b, shape[a] - ushape[a], DType.INT32, 1)
        sv = b.binary("MINIMUM", b.binary("MAXIMUM", sv, lo, nan_mode="PROPAGATE"), hi, nan_mode="PROPAGATE")
        off = b.binary("SUB", _iota(b, shape[a], r, a), b.reshape(sv, [1] * r))  # i - s along axis a
        ok = b.binary("LOGICAL_AND", b.binary("GREATER_EQUAL", off, _k(b, 0, DType.INT32, r)),
                      b.binary("GREATER", _k(b, ushape[a], DType.INT32, r), off))
        offc = b.binary("MINIMUM", b.binary("MAXIMUM", off, _k(b, 0, DType.INT32, r), nan_mode="PROPAGATE"),
                        _k(b, ushape[a] - 1, DType.INT32, r), nan_mode="PROPAGATE")
        term = b.mul(offc, _k(b, prod(ushape[a + 1:]), DType.INT32, r))
        inside = ok if inside is None else b.binary("LOGICAL_AND", inside, ok)
        flat = term if flat is None else b.binary("ADD", flat, term)
    assert inside is not None and flat is not None
    flat = b.binary("ADD", flat, b.const(np.zeros(shape, np.int32), DType.INT32)) if list(flat.shape) != shape \
        else flat
    g, restore = _gather_ready(b, b.reshape(upd, [1, n_up, 1]))
    y = b.emit("GATHER", [g, b.reshape(flat, [1, n_out])], quant=upd.type.quant).result
    y = b.reshape(b.cast(y, restore) if restore is not None else y, shape)
    return [select(b, inside, y, x)]


# ------------------------------------------------------------------------------------------------ bucketize
@legalize("tfl.bucketize", dtypes=_NUM, arity=1)
def bucketize(b: Builder, op: Operation) -> list[Value]:
    """GREATER_EQUAL against the constant boundaries, CAST to i32, REDUCE_SUM (std::upper_bound's index).

    Index of the bucket of each element = #{boundaries <= x} (std::upper_bound): GREATER_EQUAL against the
    constant boundaries, CAST to i32, REDUCE_SUM.  int32 inputs compare as float, as the kernel's promotion
    does."""
    x = data_operand(b, op.operands[0])
    bounds = np.asarray(op.attrs.get("boundaries") or [], dtype=np.float32).reshape(-1)
    shape = static_shape(x)
    if x.type.is_quantized or (x.dtype not in FLOAT_TYPES and x.dtype is not DType.INT32):
        raise Unsupported(f"bucketize of {x.type}")
    if bounds.size == 0:
        return [b.const(np.zeros(shape, np.int32), DType.INT32)]
    if np.any(np.diff(bounds) < 0):
        raise Unsupported("bucketize boundaries are not sorted")
    check_rank(len(shape) + 1, "bucketize intermediate")
    xf = b.cast(x, DType.FP32) if x.dtype is DType.INT32 else x
    r = len(shape) + 1
    ge = b.binary("GREATER_EQUAL", b.reshape(xf, shape + [1]),
                  b.const(bounds.reshape((1,) * (r - 1) + (-1,)), xf.dtype))
    s = b.emit("REDUCE_SUM", [b.cast(ge, DType.INT32)], {"axis": r - 1}).result
    return [b.reshape(s, shape)]


# ------------------------------------------------------------------------------------------------ dilate
@legalize("tfl.dilate", dtypes=("fp32",), arity=3)
@keeps_values
def dilate(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE + PAD + RESHAPE + SLICE per axis: dilations[a] - 1 padding values between elements."""
    x = data_operand(b, op.operands[0])
    dil = const_ints(op, 1, "dilations")
    if len(dil) != x.type.rank or min(dil, default=1) < 1:
        raise Unsupported(f"dilate dilations {dil} for rank {x.type.rank}")
    fill: float | int | bool = False if x.dtype is DType.BOOL else 0
    if len(op.operands) > 2 and has_value(op.operands[2]):
        pv = np.asarray(const_operand(op, 2, "padding_value")).reshape(-1)
        if pv.size:
            fill = bool(pv[0]) if x.dtype is DType.BOOL else float(pv[0]) if x.dtype.is_float else int(pv[0])
    for a, d in enumerate(dil):
        x = dilate_axis(b, x, a, d, fill)
    return [x]


# ---------------------------------------------------------------------------------------------- sparse_to_dense
@legalize("tfl.sparse_to_dense", dtypes=("fp32", "i32"), arity=4)
def sparse_to_dense(b: Builder, op: Operation) -> list[Value]:
    """SCATTER into a default-filled tensor for unique constant indices; else the last write per element found
    with an EQUAL mask, REDUCE_MAX and GATHER.

    TFLite writes ``output[indices[w]] = values[w]`` in order over a ``default_value`` fill, so with repeated indices
    the last write wins: for each output element, w* = max{w : flat(indices[w]) == k} (REDUCE_MAX of SELECT(hit,
    w, -1) in i32), then SELECT(w* >= 0, values[w*], default).  indices: [N, R], [N] (R = 1) or a scalar."""
    shape = const_ints(op, 1, "output_shape")
    check_rank(max(len(shape), 1), "sparse_to_dense result")
    values, default = data_operand(b, op.operands[2]), data_operand(b, op.operands[3])
    idx = op.operands[0]
    ishape = static_shape(idx)
    r = len(shape)
    if len(ishape) == 2:
        n, q = ishape
    elif len(ishape) <= 1 and r == 1:
        n, q = (ishape[0] if ishape else 1), 1
    else:
        raise Unsupported(f"sparse_to_dense indices of shape {ishape} for an output of rank {r}")
    if q != r or values.dtype != default.dtype:
        raise Unsupported(f"sparse_to_dense indices {ishape}, values {values.type}, default {default.type}")
    if static_shape(values) not in ([n], []) or static_shape(default) not in ([], [1]):
        raise Unsupported(f"sparse_to_dense values {values.type} / default {default.type} for {n} indices")
    k = prod(shape)
    vals = b.reshape(values, [1, 1, 1]) if not static_shape(values) else b.reshape(values, [1, n, 1])
    if static_shape(vals)[1] != n:
        vals = b.tile(vals, [1, n, 1])
    fill = b.reshape(default, [1, 1, 1])
    c = idx.const()
    flat: Value
    if c is not None:
        tup = np.asarray(c, dtype=np.int64).reshape(n, q)
        if (tup < 0).any() or (tup >= np.asarray(shape)).any():
            raise Unsupported("sparse_to_dense indices out of range (TFLite rejects them)")
        fc = (tup @ np.asarray([prod(shape[i + 1:]) for i in range(q)], dtype=np.int64)).astype(np.int32)
        if len(np.unique(fc)) == n:
            v, restore = _gather_ready(b, vals)
            base, _ = _gather_ready(b, b.tile(fill, [1, k, 1]))
            y = b.emit("SCATTER", [base, b.const(fc.reshape(1, n), DType.INT32), v]).result
            return [b.reshape(b.cast(y, restore) if restore is not None else y, shape)]
        flat = b.const(fc, DType.INT32)
    else:
        flat, _ = _flat_indices(b, b.reshape(_i32(b, idx, "sparse_to_dense indices"), [n, q]), shape,
                                "sparse_to_dense")
    _check_mask(k * n, "sparse_to_dense")
    hit = b.binary("EQUAL", b.reshape(flat, [1, n]), _iota(b, k, 2, 0))  # [k, n]
    last = b.emit("REDUCE_MAX", [select(b, hit, _iota(b, n, 2, 1), _k(b, -1, DType.INT32, 2))],
                  {"axis": 1, "nan_mode": "PROPAGATE"}).result  # [k, 1]
    found = b.binary("GREATER_EQUAL", last, _k(b, 0, DType.INT32, 2))
    at = b.binary("MAXIMUM", last, _k(b, 0, DType.INT32, 2), nan_mode="PROPAGATE")
    v, restore = _gather_ready(b, vals)
    g = b.emit("GATHER", [v, b.reshape(at, [1, k])]).result  # [1, k, 1]
    g = b.cast(g, restore) if restore is not None else g
    y = select(b, b.reshape(found, [1, k, 1]), g, fill)
    return [b.reshape(y, shape)]
