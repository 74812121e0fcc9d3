"""Helpers for the data-layout rules (tfl_layout, tfl_image, tfl_types): static shape/constant reading,
rank-0 handling, strided slicing and REVERSE chains, all emitted with TOSA 1.0 ops.

Everything here works on values whose shapes are static (the pipeline rewrites operands before a rule runs).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import Unsupported
from ...ir import DType, Operation, QuantParams, Value
from ...ir.symdim import is_symbolic, size
from ...tosa.builder import Builder
from .legalize_common import const_operand

#: Level 8K MAX_RANK (spec 1.7 Levels)
MAX_RANK = 6

#: source-only integer types narrowed to i32 (op_inventory §6.7: no int64 tensors in TOSA, spec 1.9 Supported Number
#: Formats)
_NARROW = {DType.INT64: DType.INT32, DType.UINT32: DType.INT32, DType.UINT64: DType.INT32}


def static_shape(v: Value) -> list[int]:
    """The static shape of ``v`` (raises Unsupported for symbolic dimensions)."""
    if not v.type.is_static:
        raise Unsupported(f"{v.name} has a dynamic shape {v.type.shape}")
    return [size(d) for d in v.shape]


def prod(dims: Sequence[int]) -> int:
    """The product of sizes (a dimension expression stays one, ``--dynamic``)."""
    return size(math.prod(size(d) for d in dims))


def const_ints(op: Operation, k: int, what: str = "operand") -> list[int]:
    """Operand ``k`` as a flat list of Python ints (it must be a compile-time constant of integers); sizes that
    carry dimension expressions (``--dynamic``) stay :class:`~tf2tosa.ir.symdim.SymDim`."""
    arr = np.asarray(const_operand(op, k, what)).reshape(-1)
    sym = op.operands[k].sym_const()
    if sym is not None and sym.dtype == object:
        return [size(x) for x in sym.reshape(-1)]
    if arr.dtype.kind not in "iub":
        with np.errstate(invalid="ignore", over="ignore"):  # (2**62 is inf as a float16: every finite one is below)
            integral = arr.dtype.kind == "f" and bool(np.all(np.isfinite(arr) & (np.abs(arr) < 2**62)
                                                              & (arr == np.round(arr))))
        if not integral:
            raise Unsupported(f"{what} (operand {k} of {op.name}) must hold integers, not {arr.dtype} values")
    return [int(x) for x in arr]


def tosa_dtype(dtype: DType) -> DType:
    """The TOSA element type that carries a source type: i64 → i32; raises for types TOSA cannot hold."""
    dt = _NARROW.get(dtype, dtype)
    if not dt.is_tosa or dt is DType.SHAPE:
        raise Unsupported(f"element type {dtype} has no TOSA 1.0 equivalent")
    return dt


def narrow_array(arr: np.ndarray, dtype: DType) -> np.ndarray:
    """Convert a constant array to the TOSA type for ``dtype`` (i64 → i32, checking the values fit)."""
    dt = tosa_dtype(dtype)
    a = np.asarray(arr)
    if dt is DType.INT32 and a.dtype != np.int32:
        if a.size and (a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max):
            raise Unsupported(f"{dtype} constant does not fit in i32")
        return a.astype(np.int32)
    return a


def data_operand(b: Builder, v: Value) -> Value:
    """An operand usable as TOSA data: constants of source-only types (i64 …) are re-made as i32 CONSTs.

    A non-constant i64 value cannot be consumed by any TOSA op (§6.7); that raises Unsupported.
    """
    if v.dtype.is_tosa and v.dtype is not DType.SHAPE:
        return v
    arr = v.const()
    if arr is None:
        raise Unsupported(f"{v.name} has type {v.dtype}, which TOSA 1.0 has no tensors of")
    dt = tosa_dtype(v.dtype)
    return b.const(narrow_array(arr, v.dtype), dt, quant=v.type.quant)


def at_least_1d(b: Builder, x: Value) -> Value:
    """RESHAPE a rank-0 value to [1] (CONCAT/PAD/SLICE/TILE/TRANSPOSE/REVERSE need rank ≥ 1, §6.7)."""
    return b.reshape(x, [1]) if x.type.rank == 0 else x


def check_rank(rank: int, what: str) -> None:
    if rank > MAX_RANK:
        raise Unsupported(f"{what} needs rank {rank} > MAX_RANK {MAX_RANK} (level 8K, S318-322)")


def reverse(b: Builder, x: Value, axes: Sequence[int]) -> Value:
    """REVERSE along each axis with a dimension > 1 (one axis per op, spec 2.10.4 REVERSE; lowering doc:
    lower_reversev2_op)."""
    for a in axes:
        if int(x.shape[a]) > 1:
            x = b.emit("REVERSE", [x], {"axis": int(a)}, quant=x.type.quant).result
    return x


def take_every(b: Builder, x: Value, axis: int, count: int, stride: int, phase: int = 0) -> Value:
    """Elements ``phase + k·stride`` (k < count, stride ≥ 1, any phase ≥ 0 that keeps them inside ``x``) along
    ``axis``.

    the lowering doc's lower_strided_slice_op reshapes to 2·rank dims, which breaks MAX_RANK for rank > 3 inputs
    and needs size % stride == 0.  Here one axis at a time is folded into a rank-4 view
    [outer, count, stride, inner] (PAD at the end of the axis when it is shorter than count·stride), element
    ``phase`` of each block is kept, and the result reshaped back: the rank never exceeds max(rank, 4).  A phase
    of a stride or more first SLICEs off its whole blocks (``phase // stride`` of them), so the kept element is
    always inside its block.
    """
    shape = static_shape(x)
    dim = shape[axis]
    if count < 1 or stride < 1 or phase < 0 or phase + (count - 1) * stride >= dim:
        raise Unsupported(f"take_every: {count} elements from {phase} by {stride} on an axis of {dim}")
    if count == 1 or stride == 1:
        begin = [0] * len(shape)
        begin[axis] = phase
        size = list(shape)
        size[axis] = (count - 1) * stride + 1
        return b.slice(x, begin, size)
    span = count * stride
    shift = phase - phase % stride  # whole blocks before the first kept element
    phase -= shift
    dim -= shift
    y = x
    if dim > span or shift:
        begin = [0] * len(shape)
        begin[axis] = shift
        size = list(shape)
        size[axis] = min(dim, span)
        y = b.slice(y, begin, size)
    if dim < span:
        pads = [0] * (2 * len(shape))
        pads[2 * axis + 1] = span - dim
        y = b.pad(y, pads, pad_value(x))
    outer, inner = prod(shape[:axis]), prod(shape[axis + 1:])
    y = b.reshape(y, [outer, count, stride, inner])
    y = b.slice(y, [0, 0, phase, 0], [outer, count, 1, inner])
    out = list(shape)
    out[axis] = count
    return b.reshape(y, out)


@dataclass
class DimSlice:
    """The elements one input dimension keeps: ``start + k·stride`` for k < count (stride may be < 0)."""

    start: int
    count: int
    stride: int
    shrink: bool = False


@dataclass
class StridedSlicePlan:
    dims: list[DimSlice]          # one per input dimension
    out_shape: list[int]          # final output shape (new axes inserted, shrunk axes removed)


def plan_strided_slice(in_shape: Sequence[int], begin: Sequence[int], end: Sequence[int], strides: Sequence[int],
                       begin_mask: int = 0, end_mask: int = 0, ellipsis_mask: int = 0, new_axis_mask: int = 0,
                       shrink_axis_mask: int = 0, offset: bool = False, empty: bool = False) -> StridedSlicePlan:
    """Resolve a (Tensorflow/TFLite) strided-slice spec into per-input-dimension index ranges.

    Follows the documented tf.strided_slice semantics: the spec is sparse (ellipsis expands to the
    unmentioned dimensions, new_axis inserts a 1, shrink removes a dimension); a missing ellipsis is implied
    at the end.  Index clamping is Python's slice semantics, which equals TF's canonicalisation (begin/end
    clamped to [0, dim] for positive and [-1, dim-1] for negative strides).  lowering doc: lower_strided_slice_op
    implements none of
    ellipsis / negative strides / correct new_axis (op_inventory §6.1); they are handled here.
    TFLite ``offset``: end values are relative to begin (end = begin + end).  ``empty``: a static empty range is
    planned (count 0, for :mod:`.zero_size`) instead of refused.
    """
    rank = len(in_shape)
    n = len(begin)
    if not (len(end) == n == len(strides)):
        raise Unsupported("strided_slice begin/end/strides lengths differ")
    if bin(ellipsis_mask).count("1") > 1:
        raise Unsupported("strided_slice with more than one ellipsis")
    if offset:
        end = [int(bv) + int(ev) for bv, ev in zip(begin, end)]
    # expand the sparse spec into one entry per input dim + an output-shape recipe
    ell = [i for i in range(n) if ellipsis_mask >> i & 1]
    if not ell:
        ellipsis_mask |= 1 << n  # implicit ellipsis at the end
        n_spec = n + 1
    else:
        n_spec = n
    n_real = sum(1 for i in range(n) if not (ellipsis_mask >> i & 1) and not (new_axis_mask >> i & 1))
    if n_real > rank:
        raise Unsupported(f"strided_slice spec indexes {n_real} dims of a rank-{rank} tensor")
    dims: list[DimSlice] = []
    out_shape: list[int] = []
    d = 0
    for i in range(n_spec):
        if ellipsis_mask >> i & 1:
            for _ in range(rank - n_real):
                dims.append(DimSlice(0, in_shape[d], 1))
                out_shape.append(in_shape[d])
                d += 1
            continue
        if new_axis_mask >> i & 1:
            out_shape.append(1)
            continue
        dim = size(in_shape[d])
        s = int(strides[i])
        if s == 0:
            raise Unsupported("strided_slice stride 0")
        if shrink_axis_mask >> i & 1:
            # TFLite StartForAxis applies begin_mask also to shrunk axes; end is ignored (start + 1)
            if begin_mask >> i & 1:
                idx = 0 if s > 0 else dim - 1
            else:
                idx = int(begin[i])
                idx = idx + dim if idx < 0 else idx
            if not 0 <= idx < dim:
                raise Unsupported(f"strided_slice shrink index {begin[i]} out of range for dim {dim}")
            dims.append(DimSlice(idx, 1, 1, shrink=True))
        else:
            bgn = None if begin_mask >> i & 1 else size(begin[i])
            e = None if end_mask >> i & 1 else size(end[i])
            if s == 1 and any(is_symbolic(t) for t in (dim, bgn, e)):
                start, count = _unit_slice(dim, bgn, e)  # --dynamic: the bounds keep their expressions
            else:
                start, stop, step = slice(bgn, e, s).indices(dim)
                count = len(range(start, stop, step))
            if count == 0 and not (empty and not is_symbolic(count)):
                raise Unsupported("strided_slice result is empty (TOSA has no empty tensors, S760)")
            dims.append(DimSlice(start, count, s))
            out_shape.append(count)
        d += 1
    assert d == rank
    return StridedSlicePlan(dims, out_shape)


def _unit_slice(dim: int, bgn: int | None, end: int | None) -> tuple[int, int]:
    """``slice(bgn, end, 1).indices(dim)`` as (start, count) with sizes that may be dimension expressions: the
    clamps compare sizes, so they are guards of a ``--dynamic`` conversion."""
    start = 0 if bgn is None else (bgn + dim if bgn < 0 else bgn)
    start = 0 if start < 0 else (dim if start > dim else start)
    stop = dim if end is None else (end + dim if end < 0 else end)
    stop = 0 if stop < 0 else (dim if stop > dim else stop)
    return start, (stop - start if stop > start else 0)


def apply_strided_slice(b: Builder, x: Value, plan: StridedSlicePlan) -> Value:
    """Emit SLICE (bounding box) + per-axis stride selection + REVERSE + final RESHAPE for ``plan``.

    For a strided axis the bounding box starts ``phase`` elements before the first kept index so that
    count·stride elements fit inside the dimension when possible (then no PAD is needed).
    """
    shape = static_shape(x)
    if len(plan.dims) != len(shape):
        raise Unsupported("strided_slice plan does not match the input rank")
    if any(not is_symbolic(d) and d == 0 for d in plan.out_shape):
        raise Unsupported("strided_slice result is empty (TOSA has no empty tensors, S760)")
    if shape:
        begins, sizes, phases = [], [], []
        for ds, dim in zip(plan.dims, shape):
            s = abs(ds.stride)
            lo = ds.start if ds.stride > 0 else ds.start + (ds.count - 1) * ds.stride
            if ds.count > 1 and s > 1:
                span = ds.count * s
                # phase j: box [lo-j, lo-j+span) inside [0, dim) needs j >= lo+span-dim, j <= lo, j < s
                j = max(0, lo + span - dim)
                j = j if j <= min(lo, s - 1) else 0
                begins.append(lo - j)
                sizes.append(min(span, dim - (lo - j)))
                phases.append(j)
            else:
                begins.append(lo)
                sizes.append((ds.count - 1) * s + 1)
                phases.append(0)
        x = b.slice(x, begins, sizes)
        for axis, ds in enumerate(plan.dims):
            if ds.count > 1 and abs(ds.stride) > 1:
                x = take_every(b, x, axis, ds.count, abs(ds.stride), phases[axis])
        x = reverse(b, x, [a for a, ds in enumerate(plan.dims) if ds.stride < 0 and ds.count > 1])
    check_rank(len(plan.out_shape), "strided_slice output")
    return b.reshape(x, plan.out_shape)


def dilate_axis(b: Builder, x: Value, axis: int, d: int, fill: float | int | bool) -> Value:
    """``d - 1`` copies of ``fill`` between neighbours along ``axis``: RESHAPE [.., n, 1, ..], PAD to d, RESHAPE
    [.., n·d, ..], SLICE to (n - 1)·d + 1."""
    if d == 1:
        return x
    shape = static_shape(x)
    n = shape[axis]
    inner = shape[:axis + 1] + [1] + shape[axis + 1:]
    check_rank(len(inner), "dilation intermediate")
    pads = [0] * (2 * len(inner))
    pads[2 * (axis + 1) + 1] = d - 1
    y = b.pad(b.reshape(x, inner), pads, fill)
    flat = shape[:axis] + [n * d] + shape[axis + 1:]
    size = list(flat)
    size[axis] = (n - 1) * d + 1
    return b.slice(b.reshape(y, flat), [0] * len(flat), size)


def resolve_reshape(in_size: int, new_shape: Sequence[int]) -> list[int]:
    """Resolve one -1 in a reshape target (spec 1.11.1 Tensors: 1.0 shapes are fully static)."""
    shape = [size(d) for d in new_shape]
    holes = [k for k, d in enumerate(shape) if not is_symbolic(d) and d == -1]
    if len(holes) > 1:
        raise Unsupported(f"reshape target {shape} has more than one -1")
    if holes:
        known = prod([d for k, d in enumerate(shape) if k != holes[0]])
        if known == 0 or in_size % known:
            raise Unsupported(f"cannot resolve -1 in reshape target {shape} for {in_size} elements")
        shape[holes[0]] = in_size // known
    if prod(shape) != in_size:
        raise Unsupported(f"reshape target {shape} does not hold {in_size} elements")
    return shape


def split_along(b: Builder, x: Value, axis: int, sizes: Sequence[int]) -> list[Value]:
    """SLICE ``x`` into consecutive pieces of ``sizes`` along ``axis`` (lowering doc: lower_split_op, lower_splitv_op
    without IDENTITYN)."""
    shape = static_shape(x)
    outs: list[Value] = []
    pos = 0
    for s in sizes:
        if s <= 0:
            raise Unsupported("split piece of size 0 (TOSA has no empty tensors)")
        start = [0] * len(shape)
        start[axis] = pos
        size = list(shape)
        size[axis] = int(s)
        outs.append(b.slice(x, start, size))
        pos += int(s)
    if pos != shape[axis]:
        raise Unsupported(f"split sizes {list(sizes)} do not add up to dimension {shape[axis]}")
    return outs


def pad_value(x: Value, value: float | int | None = None) -> float | int | bool:
    """The PAD pad_const for ``x``: ``value`` as given (already in storage units), else 0 / the zero point.

    For quantized tensors the pad value includes the zero point (spec 2.10.2 PAD).
    """
    if value is not None:
        return value
    if x.dtype is DType.BOOL:
        return False
    if x.type.quant is not None and not x.type.quant.per_channel:
        return int(x.type.quant.zp)
    return 0.0 if x.dtype.is_float else 0


def retag(b: Builder, v: Value, quant: QuantParams | None, keep: Sequence[Value] = ()) -> Value:
    """``v`` carrying ``quant`` (the source op's result quantization) instead of its own.

    A value made by the current rule is retyped in place; a pre-existing one (a graph input, constant, or one of
    ``keep``, e.g. the op's operands passed through) gets an IDENTITY with the new type instead.
    """
    if v.type.quant == quant or (quant is None and not v.dtype.is_int):
        return v
    if v.producer is None or v.is_const or any(v is k for k in keep):
        return b.emit("IDENTITY", [v], quant=quant).result
    v.type = v.type.with_dtype(v.dtype, quant)
    return v


Rule = Callable[[Builder, Operation], list[Value]]


def keeps_values(rule: Rule) -> Rule:
    """For data-movement rules: TFLite's kernel copies stored values whatever the quantization of its operands
    and results (reshape, transpose, slice, gather, pad, … check none, or require them equal), so each result
    takes the quantization of the op's result, which the consumers' rules then read."""

    @functools.wraps(rule)
    def wrapped(b: Builder, op: Operation) -> list[Value]:
        outs = rule(b, op)
        return [retag(b, v, r.type.quant, op.operands) for v, r in zip(outs, op.results)]

    return wrapped
