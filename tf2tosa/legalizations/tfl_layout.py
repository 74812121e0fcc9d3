"""TFLite data-layout ops → TOSA 1.0: reshape/transpose/concat/pack/split/slice/pad/tile/gather/…

All rules are type-agnostic data movement unless noted; shapes come from the (already static) operand types
and constant operands, never from ``op.results`` (which may be symbolic).  Quantized tensors: TFLite's kernels
copy stored values unchanged, so the results simply take the op's output quantization (:func:`keeps_values`); pads
use the output zero point; concatenation/pack RESCALE int8 inputs quantized unlike the output (int16
concatenation copies, as TFLite does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, QuantParams, Value, has_value
from ..ir.symdim import SYM_AFFINE, has_symbols, is_symbolic, size
from ..quant.activation import fused_activation_q
from ..quant.rescale import requantize
from ..tosa.builder import Builder
from .lowering.depth_space import depth_to_space_by_concat, space_to_depth_by_concat
from .lowering.layout import (
    apply_strided_slice,
    at_least_1d,
    check_rank,
    const_ints,
    data_operand,
    keeps_values,
    narrow_array,
    pad_value,
    plan_strided_slice,
    prod,
    resolve_reshape,
    retag,
    reverse,
    split_along,
    static_shape,
    tosa_dtype,
)
from .lowering.legalize_common import const_operand, fused_activation, positive_axis
from .lowering.zero_size import empty, filled, has_zero, is_empty, without_empty
from .registry import legalize

_ANY = ("fp32", "i8", "i16", "i32", "bool")


def _x(b: Builder, op: Operation, k: int = 0) -> Value:
    """Operand ``k`` as a TOSA data value (constant i64 inputs narrowed to i32)."""
    return data_operand(b, op.operands[k])


def _out_quant(op: Operation, k: int = 0) -> QuantParams | None:
    return op.results[k].type.quant


def _same_quant(a: QuantParams | None, c: QuantParams | None) -> bool:
    if a is None or c is None:
        return a is None and c is None
    return a.scale == c.scale and a.zero_point == c.zero_point


# ----------------------------------------------------------------------------------------------- reshaping
@legalize("tfl.reshape", dtypes=_ANY, arity=1)
@keeps_values
def reshape(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE with a CONST_SHAPE target (op_inventory §4 #6, spec 2.10.3 RESHAPE); -1 resolved statically (spec 1.11.1
    Tensors)."""
    x = _x(b, op)
    if len(op.operands) > 1 and has_value(op.operands[1]) and op.operands[1].const() is not None:
        target = const_ints(op, 1, "new shape")
    elif "new_shape" in op.attrs and op.attrs["new_shape"] is not None:
        target = [int(d) for d in op.attrs["new_shape"]]
    elif op.results[0].type.is_static:
        target = list(op.results[0].type.static_shape)
    else:
        raise Unsupported("reshape target shape is not a compile-time constant")
    target = resolve_reshape(prod(static_shape(x)), target)
    check_rank(len(target), "reshape result")
    if is_empty(x):  # (:mod:`.lowering.zero_size`)
        return [empty(b, target, x.dtype, _out_quant(op))]
    return [b.reshape(x, target)]


@legalize("tfl.squeeze", dtypes=_ANY, arity=1)
@keeps_values
def squeeze(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE dropping size-1 dims (lowering doc: lower_squeeze_op, with its keep-condition lowering doc:
    lower_squeeze_op fixed)."""
    x = _x(b, op)
    shape = static_shape(x)
    dims = [positive_axis(int(d), len(shape)) for d in (op.attrs.get("squeeze_dims") or [])]
    if dims:
        for d in dims:
            if shape[d] != 1:
                raise Unsupported(f"squeeze of dimension {d} with size {shape[d]}")
        keep = [s for i, s in enumerate(shape) if i not in dims]
    else:
        keep = [s for s in shape if s != 1]
    return [b.reshape(x, keep)]


@legalize("tfl.expand_dims", dtypes=_ANY, arity=2)
@keeps_values
def expand_dims(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE inserting a 1; a negative axis means axis + rank + 1 (fixes lowering doc: lower_expand_dims)."""
    x = _x(b, op)
    shape = static_shape(x)
    (axis,) = const_ints(op, 1, "axis")[:1]
    r = len(shape)
    if not -(r + 1) <= axis <= r:
        raise Unsupported(f"expand_dims axis {axis} out of range for rank {r}")
    if axis < 0:
        axis += r + 1
    new = shape[:axis] + [1] + shape[axis:]
    check_rank(len(new), "expand_dims result")
    return [b.reshape(x, new)]


@legalize("tfl.transpose", dtypes=_ANY, arity=2)
@keeps_values
def transpose(b: Builder, op: Operation) -> list[Value]:
    """TRANSPOSE with the perm constant as the ``perms`` attribute (§4 #10, spec 2.10.7 TRANSPOSE)."""
    x = _x(b, op)
    perm = const_ints(op, 1, "perm")
    r = x.type.rank
    perm = [positive_axis(p, r) for p in perm]
    if sorted(perm) != list(range(r)):
        raise Unsupported(f"transpose perm {perm} is not a permutation of rank {r}")
    if is_empty(x):
        return [empty(b, [x.shape[p] for p in perm], x.dtype, _out_quant(op))]
    return [b.transpose(x, perm)]


# ------------------------------------------------------------------------------------ concatenation / pack
def _concat(b: Builder, xs: Sequence[Value], axis: int, out_quant: QuantParams | None, raw_i16: bool = False) -> Value:
    """CONCAT after bringing every input to the output's quantization.

    TFLite's kernels (outside the seeds): concatenation and pack require int8 inputs quantized like the output
    (so a differing one can only come from our uint8 → int8 retyping): one RESCALE per input as in
    lowering doc: lower_concatv2_op, but with that input's own zero point (lowering doc: lower_concatv2_op takes the
    first input's).  int16
    concatenation copies the stored values whatever the scales (``raw_i16``), which we reproduce.  Zero-size
    inputs are dropped (:mod:`.lowering.zero_size`); with none left the result is zero-size too.
    """
    if any(is_empty(v) for v in xs):
        kept = without_empty(xs)
        if not kept:
            shape = [size(d) for d in xs[0].shape]
            shape[axis] = sum(size(v.shape[axis]) for v in xs)
            return empty(b, shape, xs[0].dtype, out_quant)
        xs = kept
    ys = []
    for v in xs:
        q = v.type.quant
        if out_quant is None or _same_quant(q, out_quant) or (raw_i16 and v.dtype is DType.INT16):
            ys.append(v)
        elif q is None or v.dtype not in (DType.INT8, DType.INT16):
            raise Unsupported(f"concatenation of a {v.dtype} input{'' if q else ' without quantization'} into a "
                              "quantized output")
        else:
            ys.append(requantize(b, v, out_quant))
    return b.concat(ys, axis)


@legalize("tfl.concatenation", dtypes=_ANY, arity=1)
def concatenation(b: Builder, op: Operation) -> list[Value]:
    """CONCAT of all inputs in one op (spec 2.10.1 CONCAT), then the fused activation (lowering doc:
    lower_concatv2_op)."""
    xs = [data_operand(b, v) for v in op.operands]
    rank = xs[0].type.rank
    if rank == 0:
        raise Unsupported("concatenation of rank-0 tensors")
    axis = positive_axis(int(op.attrs.get("axis", 0)), rank)
    y = _concat(b, xs, axis, _out_quant(op), raw_i16=True)
    if is_empty(y):
        return [y]
    act = op.attrs.get("fused_activation_function")
    q = _out_quant(op)
    y = fused_activation_q(b, y, act, q) if q is not None and y.dtype.is_int else fused_activation(b, y, act)
    return [retag(b, y, q, op.operands)]


@legalize("tfl.pack", dtypes=_ANY, arity=1)
def pack(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE each input to insert a 1 at ``axis``, then one CONCAT (simplified lowering doc: lower_pack_op)."""
    xs = [data_operand(b, v) for v in op.operands]
    shape = static_shape(xs[0])
    r = len(shape)
    axis = int(op.attrs.get("axis", 0))
    if not -(r + 1) <= axis <= r:
        raise Unsupported(f"pack axis {axis} out of range for rank {r}")
    axis = axis + r + 1 if axis < 0 else axis
    new = shape[:axis] + [1] + shape[axis:]
    check_rank(len(new), "pack result")
    return [retag(b, _concat(b, [b.reshape(v, new) for v in xs], axis, _out_quant(op)), _out_quant(op), op.operands)]


@legalize("tfl.unpack", dtypes=_ANY, arity=1)
@keeps_values
def unpack(b: Builder, op: Operation) -> list[Value]:
    """SLICE per index along ``axis`` + RESHAPE dropping it (lowering doc: lower_unpack_op; loop bound lowering doc:
    lower_unpack_op fixed)."""
    x = _x(b, op)
    shape = static_shape(x)
    axis = positive_axis(int(op.attrs.get("axis", 0)), len(shape))
    n = shape[axis]
    if len(op.results) != n:
        raise Unsupported(f"unpack into {len(op.results)} results of a dimension of size {n}")
    rest = shape[:axis] + shape[axis + 1:]
    return [b.reshape(p, rest) for p in split_along(b, x, axis, [1] * n)]


# ------------------------------------------------------------------------------------------------ splitting
@legalize("tfl.split", dtypes=_ANY, arity=2)
@keeps_values
def split(b: Builder, op: Operation) -> list[Value]:
    """N equal SLICEs (lowering doc: lower_split_op, without IDENTITYN: §4 #15).  Inputs: axis, value."""
    x = data_operand(b, op.operands[1])
    shape = static_shape(x)
    axis = positive_axis(const_ints(op, 0, "split axis")[0], len(shape))
    n = int(op.attrs.get("num_splits", len(op.results)))
    if n <= 0 or shape[axis] % n:
        raise Unsupported(f"split of dimension {shape[axis]} into {n} equal parts")
    return split_along(b, x, axis, [shape[axis] // n] * n)


@legalize("tfl.split_v", dtypes=_ANY, arity=3)
@keeps_values
def split_v(b: Builder, op: Operation) -> list[Value]:
    """SLICEs of the given sizes; one -1 takes the remainder (lowering doc: lower_splitv_op).  Inputs: value, sizes,
    axis."""
    x = _x(b, op)
    shape = static_shape(x)
    axis = positive_axis(const_ints(op, 2, "split axis")[0], len(shape))
    sizes = const_ints(op, 1, "size_splits")
    if sizes.count(-1) > 1:
        raise Unsupported("split_v with more than one -1 size")
    if -1 in sizes:
        sizes[sizes.index(-1)] = shape[axis] - sum(s for s in sizes if s != -1)
    if len(sizes) != len(op.results) or any(s < 0 for s in sizes):
        raise Unsupported(f"split_v sizes {sizes} for {len(op.results)} results")
    pieces = iter(split_along(b, x, axis, [s for s in sizes if s]) if any(sizes) else [])
    return [empty(b, shape[:axis] + [0] + shape[axis + 1:], x.dtype, op.results[k].type.quant) if s == 0
            else next(pieces) for k, s in enumerate(sizes)]


# ------------------------------------------------------------------------------------------------- slicing
@legalize("tfl.slice", dtypes=_ANY, arity=3)
@keeps_values
def slice_(b: Builder, op: Operation) -> list[Value]:
    """SLICE with start/size as CONST_SHAPE (§4 #7, spec 2.10.5 SLICE); size -1 = to the end."""
    x = at_least_1d(b, _x(b, op))
    shape = static_shape(x)
    begin = const_ints(op, 1, "begin")
    size = const_ints(op, 2, "size")
    if len(begin) != len(shape) or len(size) != len(shape):
        raise Unsupported("slice begin/size length differs from the input rank")
    size = [d - s if z == -1 else z for d, s, z in zip(shape, begin, size)]
    for d, s, z in zip(shape, begin, size):
        if s < 0 or z < 0 or s + z > d:
            raise Unsupported(f"slice begin {begin} size {size} outside shape {shape}")
    if has_zero(size):  # an empty piece (:mod:`.lowering.zero_size`)
        return [empty(b, size, x.dtype, _out_quant(op))]
    return [b.slice(x, begin, size)]


@legalize("tfl.strided_slice", dtypes=_ANY, arity=4)
@keeps_values
def strided_slice(b: Builder, op: Operation) -> list[Value]:
    """SLICE + per-axis stride selection + REVERSE + RESHAPE (lowering doc: lower_strided_slice_op reworked:
    ellipsis, new_axis, negative strides and rank ≤ 6 handled, see lowering.layout.plan_strided_slice)."""
    x = _x(b, op)
    a = op.attrs
    plan = plan_strided_slice(static_shape(x), const_ints(op, 1, "begin"), const_ints(op, 2, "end"),
                              const_ints(op, 3, "strides"), int(a.get("begin_mask", 0)), int(a.get("end_mask", 0)),
                              int(a.get("ellipsis_mask", 0)), int(a.get("new_axis_mask", 0)),
                              int(a.get("shrink_axis_mask", 0)), bool(a.get("offset", False)), empty=True)
    if has_zero(plan.out_shape):  # an empty piece (:mod:`.lowering.zero_size`)
        return [empty(b, plan.out_shape, x.dtype, _out_quant(op))]
    return [apply_strided_slice(b, x, plan)]


@legalize("tfl.reverse_v2", dtypes=_ANY, arity=2)
@keeps_values
def reverse_v2(b: Builder, op: Operation) -> list[Value]:
    """One REVERSE per axis (lowering doc: lower_reversev2_op)."""
    x = _x(b, op)
    if x.type.rank == 0:
        return [x]
    axes = sorted({positive_axis(a, x.type.rank) for a in const_ints(op, 1, "axis")})
    return [reverse(b, x, axes)]


# ------------------------------------------------------------------------------------------------- padding
def _paddings(op: Operation, k: int, rank: int) -> list[int]:
    """TF/TFLite [rank, 2] paddings flattened row-major = TOSA [s0, e0, s1, e1, …] (spec 2.10.2 PAD)."""
    pads = const_ints(op, k, "paddings")
    if len(pads) != 2 * rank:
        raise Unsupported(f"paddings of {len(pads)} values for rank {rank}")
    if min(pads, default=0) < 0:
        raise Unsupported("negative paddings")
    return pads


@legalize("tfl.pad", dtypes=_ANY, arity=2)
@keeps_values
def pad(b: Builder, op: Operation) -> list[Value]:
    """PAD with zero (the zero point for quantized tensors, spec 2.10.2 PAD) (§4 #9, spec 2.10.2 PAD)."""
    x = _x(b, op)
    if x.type.rank == 0:
        return [x]
    return [_pad(b, op, x, _paddings(op, 1, x.type.rank), _pad_const(op, x))]


def _pad(b: Builder, op: Operation, x: Value, pads: list[int], value: float | int | bool) -> Value:
    """PAD; padding a zero-size ``x`` gives the pad value only (:mod:`.lowering.zero_size`)."""
    if is_empty(x):
        out = [size(d) + pads[2 * k] + pads[2 * k + 1] for k, d in enumerate(x.shape)]
        return filled(b, out, value, x.dtype, _out_quant(op))
    return b.pad(x, pads, value)


def _pad_const(op: Operation, x: Value, value: float | int | bool | None = None) -> float | int | bool:
    """PAD's pad_const: ``value`` (stored units), else the *output's* zero point, as TFLite's pad and
    space_to_batch_nd kernels use (they copy the input values unchanged)."""
    q = _out_quant(op)
    if value is None and q is not None and not q.per_channel and x.dtype.is_int:
        return int(q.zp)
    return pad_value(x, value)


@legalize("tfl.padv2", dtypes=_ANY, arity=3)
@keeps_values
def padv2(b: Builder, op: Operation) -> list[Value]:
    """PAD with the constant_values operand (in storage units for quantized tensors)."""
    x = _x(b, op)
    if x.type.rank == 0:
        return [x]
    value: float | int | None = None
    if len(op.operands) > 2 and has_value(op.operands[2]):
        c = np.asarray(const_operand(op, 2, "constant_values")).reshape(-1)
        if c.dtype.kind == "f" and x.dtype.is_int:
            raise Unsupported("padv2 of an integer tensor with a float constant_values (TFLite rejects it)")
        value = c[0].item() if c.size else None
        if value is not None and x.dtype.is_int:
            value = int(value)
        elif value is not None and x.dtype is DType.BOOL:
            value = bool(value)
    return [_pad(b, op, x, _paddings(op, 1, x.type.rank), _pad_const(op, x, value))]


@legalize("tfl.mirror_pad", dtypes=_ANY, arity=2)
@keeps_values
def mirror_pad(b: Builder, op: Operation) -> list[Value]:
    """Per axis: CONCAT(REVERSE(SLICE(head)), x, REVERSE(SLICE(tail))).  No lowering in the lowering doc
    (tfl.mirror_pad).

    REFLECT excludes the edge element (pad ≤ dim-1), SYMMETRIC includes it (pad ≤ dim).
    """
    x = _x(b, op)
    if x.type.rank == 0:
        return [x]
    mode = str(op.attrs.get("mode", "REFLECT")).upper()
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise Unsupported(f"mirror_pad mode {mode}")
    edge = 1 if mode == "REFLECT" else 0
    pads = _paddings(op, 1, x.type.rank)
    for axis in range(x.type.rank):
        before, after = pads[2 * axis], pads[2 * axis + 1]
        if not before and not after:
            continue
        shape = static_shape(x)
        dim = shape[axis]
        if max(before, after) > dim - edge:
            raise Unsupported(f"mirror_pad {mode} of {max(before, after)} on a dimension of size {dim}")
        parts: list[Value] = []
        if before:
            parts.append(reverse(b, _axis_slice(b, x, axis, edge, before), [axis]))
        parts.append(x)
        if after:
            parts.append(reverse(b, _axis_slice(b, x, axis, dim - edge - after, after), [axis]))
        x = b.concat(parts, axis)
    return [x]


def _axis_slice(b: Builder, x: Value, axis: int, start: int, size: int) -> Value:
    shape = static_shape(x)
    begin = [0] * len(shape)
    begin[axis] = start
    sz = list(shape)
    sz[axis] = size
    return b.slice(x, begin, sz)


# ------------------------------------------------------------------------------------------------- tiling
@legalize("tfl.tile", dtypes=_ANY, arity=2)
@keeps_values
def tile(b: Builder, op: Operation) -> list[Value]:
    """TILE with multiples as CONST_SHAPE (§4 #8, spec 2.10.6 TILE)."""
    x = _x(b, op)
    mult = const_ints(op, 1, "multiples")
    if x.type.rank == 0:
        return [x]
    if len(mult) != x.type.rank or min(mult) < 0:
        raise Unsupported(f"tile multiples {mult} for rank {x.type.rank}")
    if is_empty(x) or 0 in mult:  # (:mod:`.lowering.zero_size`)
        return [empty(b, [size(d) * m for d, m in zip(x.shape, mult)], x.dtype, _out_quant(op))]
    return [b.tile(x, mult)]


# ------------------------------------------------------------------------------------------------ gathers
def _gather_ready(b: Builder, v: Value) -> tuple[Value, DType | None]:
    """GATHER has no bool mode (spec 2.11.1 GATHER): carry bool through i8."""
    if v.dtype is DType.BOOL:
        return b.cast(v, DType.INT8), DType.BOOL
    return v, None


def _indices_i32(b: Builder, v: Value) -> Value:
    """Indices as i32 (constant int64 indices narrowed; GATHER index_t is i32, spec 2.11.1 GATHER)."""
    if v.dtype is DType.INT32:
        return v
    c = v.const()
    if c is not None:
        return b.const(narrow_array(c, DType.INT64), DType.INT32)
    if v.dtype in (DType.INT8, DType.INT16):
        return b.cast(v, DType.INT32)
    raise Unsupported(f"gather indices of type {v.dtype} (non-constant int64 indices cannot enter TOSA)")


@legalize("tfl.gather", dtypes=_ANY, arity=2)
@keeps_values
def gather(b: Builder, op: Operation) -> list[Value]:
    """params = B+P+[K]+S, indices = B+I → TRANSPOSE to B+[K]+P+S, RESHAPE [nB, K, nP·nS], GATHER with indices
    [nB, nI], RESHAPE to B+I+P+S, TRANSPOSE to B+P+I+S.  (lowering doc: lower_gather_op with its result perm,
    which indexes params dims instead of the gathered layout, fixed.)"""
    params = _x(b, op)
    idx = op.operands[1]
    pshape = static_shape(params)
    ishape = static_shape(idx)
    rp, ri = len(pshape), len(ishape)
    if rp == 0:
        raise Unsupported("gather from a rank-0 tensor")
    axis = positive_axis(int(op.attrs.get("axis", 0)), rp)
    bd = int(op.attrs.get("batch_dims", 0))
    if bd < 0:
        bd += ri
    if not 0 <= bd <= min(axis, ri) or pshape[:bd] != ishape[:bd]:
        raise Unsupported(f"gather batch_dims {bd} with axis {axis}")
    if idx.producer is not None and SYM_AFFINE in idx.producer.attrs and bd == 0:
        return [_affine_gather(b, params, axis, idx.producer.attrs[SYM_AFFINE])]
    c = idx.const()
    if c is not None:
        k = pshape[axis]
        if c.size and (c.min() < 0 or c.max() >= k):
            raise Unsupported("gather indices out of range")  # TOSA REQUIRE(0 <= k < K), spec 2.11.1 GATHER
        sym = op.operands[0].sym_const()
        if bd == 0 and sym is not None and has_symbols(sym):  # --dynamic: picking sizes out of a SHAPE keeps them
            picked = np.take(np.asarray(sym, dtype=object), np.asarray(c, dtype=np.int64), axis=axis)
            return [b.sizes(picked, params.dtype)]
    bsh, psh, k, ssh, ish = pshape[:bd], pshape[bd:axis], pshape[axis], pshape[axis + 1:], ishape[bd:]
    out_rank = bd + len(psh) + len(ish) + len(ssh)
    check_rank(out_rank, "gather result")
    params, restore = _gather_ready(b, params)
    perm = list(range(bd)) + [axis] + list(range(bd, axis)) + list(range(axis + 1, rp))
    values = b.reshape(b.transpose(params, perm), [prod(bsh), k, prod(psh) * prod(ssh)])
    indices = _indices_i32(b, idx)
    indices = b.reshape(at_least_1d(b, indices), [prod(bsh), prod(ish)])
    g = b.emit("GATHER", [values, indices], quant=params.type.quant).result
    y = b.reshape(g, bsh + ish + psh + ssh)
    # B+I+P+S → B+P+I+S
    nb, ni, np_ = len(bsh), len(ish), len(psh)
    back = (list(range(nb)) + list(range(nb + ni, nb + ni + np_)) + list(range(nb, nb + ni))
            + list(range(nb + ni + np_, out_rank)))
    y = b.transpose(y, back)
    return [b.cast(y, restore) if restore else y]


def _affine_gather(b: Builder, params: Value, axis: int, aff: Any) -> Value:
    """``--dynamic``: a gather along ``axis`` whose indices are affine in their position, ``offset + Σ c_a·i_a``
    over a shape with one symbolic axis ``s`` (``c_s`` = 1) and small static others (the frames of
    ``tf.signal.frame``: ``i + j``): one SLICE of the symbolic length per static index combination, each RESHAPEd
    into place, then CONCATs along the static axes (no index tensor, whose size would depend on the input).
    A step c_s = c > 1 along the symbolic axis (frames with a hop that is a multiple of their gcd with the frame
    length: ``c·i + j``) takes c·(m - 1) + 1 elements, PADs c - 1 at the end (never read), RESHAPEs the run to
    [m, c] and SLICEs its first column."""
    shape, offset, coefs = aff
    pshape = static_shape(params)
    sym_axes = [a for a, n in enumerate(shape) if is_symbolic(n)]
    if len(sym_axes) != 1 or int(coefs[sym_axes[0]]) < 1:
        raise Unsupported("gather with computed indices that are not one run of positive step per static position")
    s = sym_axes[0]
    others = [a for a in range(len(shape)) if a != s]
    if prod([shape[a] for a in others]) > 64:
        raise Unsupported("gather with computed indices: more than 64 static positions")
    lead, rest = pshape[:axis], pshape[axis + 1:]
    pieces: list[Value] = []
    for combo in np.ndindex(*[int(shape[a]) for a in others]):
        start = offset + sum(int(coefs[a]) * int(m) for a, m in zip(others, combo))
        begin = [0] * len(pshape)
        begin[axis] = start
        size = list(pshape)
        step = int(coefs[s])
        size[axis] = shape[s] if step == 1 else step * (shape[s] - 1) + 1
        y = b.slice(params, begin, size)
        if step > 1:  # every step-th element: [.., m·step, ..] as [.., m, step, ..], column 0
            pad = [0] * (2 * len(pshape))
            pad[2 * axis + 1] = step - 1
            y = b.pad(y, pad)
            y = b.reshape(y, lead + [shape[s], step] + rest)
            y = b.slice(y, [0] * (len(pshape) + 1), lead + [shape[s], 1] + rest)
        inner = [shape[a] if a == s else 1 for a in range(len(shape))]
        pieces.append(b.reshape(y, lead + inner + rest))
    # concatenate along the static axes, last first (pieces are in row-major order of ``others``)
    for a in reversed(others):
        n = int(shape[a])
        pieces = [b.concat(pieces[i:i + n], len(lead) + a) for i in range(0, len(pieces), n)]
    return pieces[0]


@legalize("tfl.gather_nd", dtypes=_ANY, arity=2)
@keeps_values
def gather_nd(b: Builder, op: Operation) -> list[Value]:
    """Flatten the first q params dims into K and the index tuples into one i32 index (host-side for constant
    indices, MUL + REDUCE_SUM otherwise), then one GATHER (lowering doc: lower_gather_nd_op with its K/stride
    slips lowering doc: lower_gather_nd_op/lowering doc: lower_gather_nd_op fixed)."""
    params = _x(b, op)
    idx = op.operands[1]
    pshape = static_shape(params)
    ishape = static_shape(idx)
    if not ishape:
        raise Unsupported("gather_nd with rank-0 indices")
    q = ishape[-1]
    if q > len(pshape) or q < 1:
        raise Unsupported(f"gather_nd index depth {q} for params rank {len(pshape)}")
    lead, tail = pshape[:q], pshape[q:]
    out_shape = ishape[:-1] + tail
    check_rank(max(len(out_shape), 1), "gather_nd result")
    strides = [prod(lead[i + 1:]) for i in range(q)]
    w = prod(ishape[:-1])
    params, restore = _gather_ready(b, params)
    values = b.reshape(params, [1, prod(lead), prod(tail)])
    c = idx.const()
    if c is not None:
        tup = np.asarray(c, dtype=np.int64).reshape(w, q)
        if (tup < 0).any() or (tup >= np.asarray(lead)).any():
            raise Unsupported("gather_nd indices out of range")
        flat = b.const((tup @ np.asarray(strides, dtype=np.int64)).astype(np.int32).reshape(1, w), DType.INT32)
    else:
        iv = b.reshape(_indices_i32(b, idx), [w, q])
        prodv = b.mul(iv, b.const(np.asarray(strides, dtype=np.int32).reshape(1, q), DType.INT32))
        flat = b.reshape(b.emit("REDUCE_SUM", [prodv], {"axis": 1}).result, [1, w])
    g = b.emit("GATHER", [values, flat], quant=params.type.quant).result
    y = b.reshape(g, out_shape)
    return [b.cast(y, restore) if restore else y]


# --------------------------------------------------------------------------------------- space / depth / batch
@legalize("tfl.depth_to_space", dtypes=_ANY, arity=1)
@keeps_values
def depth_to_space(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE [N,H,W,bs,bs,C'] → TRANSPOSE {0,1,3,2,4,5} → RESHAPE [N,H·bs,W·bs,C'] (DCR, lower_depth_to_space_op
    lowering doc: lower_depth_to_space_op)."""
    x = _x(b, op)
    n, h, w, c = _nhwc(x)
    bs = int(op.attrs["block_size"])
    if bs < 1 or c % (bs * bs):
        raise Unsupported(f"depth_to_space block {bs} with {c} channels")
    cc = c // (bs * bs)
    if _by_concat(b):
        return [depth_to_space_by_concat(b, x, op.operands[0], [n, h, w, c], bs)]
    y = b.reshape(x, [n, h, w, bs, bs, cc])
    y = b.transpose(y, [0, 1, 3, 2, 4, 5])
    return [b.reshape(y, [n, h * bs, w * bs, cc])]


@legalize("tfl.space_to_depth", dtypes=_ANY, arity=1)
@keeps_values
def space_to_depth(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE [N,H/bs,bs,W/bs,bs,C] → TRANSPOSE {0,1,3,2,4,5} → RESHAPE [N,H/bs,W/bs,bs·bs·C]
    (lowering doc: lower_space_to_depth_op; its ``perm=`` is the 1.0 ``perms`` attribute)."""
    x = _x(b, op)
    n, h, w, c = _nhwc(x)
    bs = int(op.attrs["block_size"])
    if bs < 1 or h % bs or w % bs:
        raise Unsupported(f"space_to_depth block {bs} for {h}x{w}")
    if _by_concat(b):
        return [space_to_depth_by_concat(b, x, [n, h, w, c], bs)]
    y = b.reshape(x, [n, h // bs, bs, w // bs, bs, c])
    y = b.transpose(y, [0, 1, 3, 2, 4, 5])
    return [b.reshape(y, [n, h // bs, w // bs, bs * bs * c])]


def _by_concat(b: Builder) -> bool:
    """The target runs DEPTH_TO_SPACE / SPACE_TO_DEPTH cheaper as SLICE and CONCAT (:mod:`.lowering.depth_space`)."""
    target = b.context.target()
    return target is not None and target.depth_space_by_concat


def _nhwc(x: Value) -> list[int]:
    shape = static_shape(x)
    if len(shape) != 4:
        raise Unsupported(f"expected an NHWC rank-4 tensor, got rank {len(shape)}")
    return shape


@legalize("tfl.space_to_batch_nd", dtypes=_ANY, arity=3)
@keeps_values
def space_to_batch_nd(b: Builder, op: Operation) -> list[Value]:
    """PAD → RESHAPE [B, d1/b1, b1, …, R] → TRANSPOSE [b1…, B, d1/b1…, R] → RESHAPE (lower_space_to_batch_nd_op
    lowering doc: lower_space_to_batch_nd_op; its step-3 RESHAPE is a TRANSPOSE, lowering doc:
    lower_space_to_batch_nd_op, and remaining dims get zero padding).  The remaining
    dims are collapsed into one so the 6-D limit holds for two spatial dims."""
    x = _x(b, op)
    shape = static_shape(x)
    block = const_ints(op, 1, "block_shape")
    m = len(block)
    pads = const_ints(op, 2, "paddings")
    if len(pads) != 2 * m or min(block, default=1) < 1 or min(pads, default=0) < 0:
        raise Unsupported("space_to_batch_nd block/paddings")
    rest = shape[1 + m:]
    x = b.reshape(x, shape[:1 + m] + ([prod(rest)] if rest else []))
    full = [0, 0] + pads + ([0, 0] if rest else [])
    x = b.pad(x, full, _pad_const(op, x))
    padded = static_shape(x)
    spatial = padded[1:1 + m]
    if any(d % bl for d, bl in zip(spatial, block)):
        raise Unsupported("space_to_batch_nd padded size not divisible by the block")
    r = [prod(rest)] if rest else []
    split = [padded[0]]
    for d, bl in zip(spatial, block):
        split += [d // bl, bl]
    check_rank(len(split) + len(r), "space_to_batch_nd intermediate")
    y = b.reshape(x, split + r)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + ([1 + 2 * m] if r else [])
    y = b.transpose(y, perm)
    out = [padded[0] * prod(block)] + [d // bl for d, bl in zip(spatial, block)] + rest
    return [b.reshape(y, out)]


@legalize("tfl.batch_to_space_nd", dtypes=_ANY, arity=3)
@keeps_values
def batch_to_space_nd(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE [b1…bM, B', d1…dM, R] → TRANSPOSE [B', d1, b1, …, dM, bM, R] → RESHAPE → SLICE crops
    (lowering doc: lower_batch_to_space_nd_op with its crop indexing lowering doc: lower_batch_to_space_nd_op/lowering
    doc: lower_batch_to_space_nd_op and perm lowering doc: lower_batch_to_space_nd_op fixed)."""
    x = _x(b, op)
    shape = static_shape(x)
    block = const_ints(op, 1, "block_shape")
    m = len(block)
    crops = const_ints(op, 2, "crops")
    if len(crops) != 2 * m or min(block, default=1) < 1 or min(crops, default=0) < 0:
        raise Unsupported("batch_to_space_nd block/crops")
    nb = prod(block)
    if shape[0] % nb:
        raise Unsupported(f"batch {shape[0]} not divisible by block product {nb}")
    bo = shape[0] // nb
    spatial = shape[1:1 + m]
    rest = shape[1 + m:]
    r = [prod(rest)] if rest else []
    split = block + [bo] + spatial + r
    check_rank(len(split), "batch_to_space_nd intermediate")
    y = b.reshape(x, split)
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += [2 * m + 1] if r else []
    y = b.transpose(y, perm)
    full = [bo] + [d * bl for d, bl in zip(spatial, block)] + r
    y = b.reshape(y, full)
    start = [0] + [crops[2 * i] for i in range(m)] + ([0] if r else [])
    size = [bo] + [full[1 + i] - crops[2 * i] - crops[2 * i + 1] for i in range(m)] + r
    if min(size) <= 0:
        raise Unsupported("batch_to_space_nd crops leave an empty tensor")
    y = b.slice(y, start, size)
    return [b.reshape(y, [bo] + size[1:1 + m] + rest)]


# ------------------------------------------------------------------------------------------ shape / fill
@legalize("tfl.shape", dtypes=_ANY, arity=1)
def shape_(b: Builder, op: Operation) -> list[Value]:
    """The static shape as an i32 CONST (lowering doc: lower_shape_op; int64 out_type narrowed, §6.7)."""
    x = op.operands[0]
    dims = static_shape(x)
    return [b.sizes(dims)]  # --dynamic: the sizes keep their dimension expressions


@legalize("tfl.rank", dtypes=_ANY, arity=1)
def rank_(b: Builder, op: Operation) -> list[Value]:
    """Rank as a rank-0 i32 CONST (lowering doc: tfl.rank; spec 2.14.1 CONST allows rank 0)."""
    return [b.const(np.asarray(op.operands[0].type.rank, dtype=np.int32), DType.INT32)]


def _full(b: Builder, dims: list[int], value: Any, dt: DType, quant: QuantParams | None = None) -> Value:
    """A CONST of ``dims`` filled with ``value``; with sizes that are dimension expressions (``--dynamic``) a
    TILE of a one-element CONST by those sizes instead (a constant tensor cannot have a run-time shape)."""
    if not any(is_symbolic(d) for d in dims):
        return b.const(np.full(dims, value, dtype=dt.np_dtype()), dt, quant=quant)
    one = b.const(np.full([1] * len(dims), value, dtype=dt.np_dtype()), dt, quant=quant)
    return b.tile(one, dims)


@legalize("tfl.fill", dtypes=_ANY, arity=2)
def fill(b: Builder, op: Operation) -> list[Value]:
    """CONST of the filled shape for a constant value (lowering doc: tfl.fill), else RESHAPE the scalar to 1s + TILE."""
    dims = const_ints(op, 0, "dims")
    v = op.operands[1]
    dt = tosa_dtype(v.dtype)
    check_rank(len(dims), "fill result")
    c = v.const()
    if c is not None:
        return [_full(b, dims, narrow_array(np.asarray(c).reshape(-1)[:1], v.dtype)[0], dt, v.type.quant)]
    x = data_operand(b, v)
    if not dims:
        return [b.reshape(x, [])]
    return [b.tile(b.reshape(x, [1] * len(dims)), dims)]


@legalize("tfl.zeros_like", dtypes=_ANY, arity=1)
def zeros_like(b: Builder, op: Operation) -> list[Value]:
    """Zero CONST of the input's shape (lowering doc: tfl.zeros_like)."""
    x = op.operands[0]
    dt = tosa_dtype(x.dtype)
    return [_full(b, static_shape(x), 0, dt)]


@legalize("tfl.ones_like", dtypes=_ANY, arity=1)
def ones_like(b: Builder, op: Operation) -> list[Value]:
    """One-filled CONST of the input's shape."""
    x = op.operands[0]
    dt = tosa_dtype(x.dtype)
    return [_full(b, static_shape(x), 1, dt)]
