"""Rules for TensorFlow's constants, identities, shape, layout, gather, pad, resize and type ops (``tf.*``).

Shapes are static once the pipeline has fixed the inputs, so ``Shape``/``Rank``/``Size`` fold to constants and
the shape arithmetic after them (StridedSlice, Pack, …) folds in the builder.  Ops whose TF semantics equal a
TFLite op's run that op's rule (:func:`delegate.via`): the strided-slice planner with every mask, the
gather/gather_nd/space-batch lowerings with the document's helper bugs fixed (op_inventory §6.1), the RESIZE
parameters of op_inventory §4 #20.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from . import delegate
from .lowering import tf_ops
from .lowering.layout import check_rank, const_ints, data_operand, narrow_array, reverse, static_shape, tosa_dtype
from .lowering.legalize_common import const_operand, positive_axis
from .lowering.numeric import FLOAT_TYPES
from .registry import legalize

_ANY = ("fp32", "i32", "bool")


def _same_as(tf_names: tuple[str, ...], tfl_name: str, n: int, attrs: Mapping[str, object] | None = None,
             note: str = "") -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        return delegate.via(b, op, tfl_name, op.operands[:n], attrs)

    rule.__doc__ = f"{tfl_name}'s lowering{note}."
    legalize(*tf_names, dtypes=_ANY)(rule)


# ------------------------------------------------------------------------------------- constants / identities
@legalize("tf.Const", dtypes=_ANY)
def const(b: Builder, op: Operation) -> list[Value]:
    """CONST (lowering doc: tf.Const); 64-bit and unsigned integers narrowed to i32 when the values fit (§6.7).

    Other constants (fp64, strings, out-of-range i64) stay for rules that read them at conversion time; one that
    is still needed at run time fails the final check."""
    arr = np.asarray(op.attrs["values"])
    dt = op.results[0].dtype
    if dt.is_tosa and dt is not DType.SHAPE:
        return [b.const(arr, dt, name=b.name_hint or "const")]
    if dt.is_int:
        info = np.iinfo(np.int32)
        if not arr.size or (int(arr.min()) >= info.min and int(arr.max()) <= info.max):
            return [b.const(arr.astype(np.int32), DType.INT32, name=b.name_hint or "const")]
    return [op.result]


def _forward(b: Builder, op: Operation) -> list[Value]:
    """The results are the operands (TF identities; the frontend already forwards them)."""
    return list(op.operands[: len(op.results)])


for _name in ("tf.Identity", "tf.IdentityN", "tf.StopGradient", "tf.Snapshot", "tf.PreventGradient",
              "tf.EnsureShape", "tf.PlaceholderWithDefault", "tf.CheckNumerics"):
    legalize(_name, dtypes=_ANY)(_forward)


@legalize("tf.NoOp")
def no_op(b: Builder, op: Operation) -> list[Value]:
    """Nothing (control dependencies are dropped by the frontend)."""
    return []


@legalize("tf.Placeholder")
def placeholder(b: Builder, op: Operation) -> list[Value]:
    """A Placeholder that is not a signature input has no value to convert."""
    raise Unsupported("placeholder that is not an input of the signature (an unfrozen capture?)")


# ------------------------------------------------------------------------------------------ shape queries
@legalize("tf.Shape", dtypes=_ANY)
def shape(b: Builder, op: Operation) -> list[Value]:
    """The static shape as an i32 CONST (lowering doc: lower_shape_op; int64 out_type narrowed, §6.7)."""
    return delegate.via(b, op, "tfl.shape", op.operands[:1])


@legalize("tf.ShapeN", dtypes=_ANY)
def shape_n(b: Builder, op: Operation) -> list[Value]:
    """One i32 CONST per operand shape (no lowering in lowering doc: tf.ShapeN)."""
    return [b.const(np.asarray(static_shape(v), np.int32), DType.INT32) for v in op.operands[: len(op.results)]]


@legalize("tf.Rank", dtypes=_ANY)
def rank(b: Builder, op: Operation) -> list[Value]:
    """The rank as a rank-0 i32 CONST (lowering doc: tf.Rank)."""
    return delegate.via(b, op, "tfl.rank", op.operands[:1])


@legalize("tf.Size", dtypes=_ANY)
def size(b: Builder, op: Operation) -> list[Value]:
    """The element count as a rank-0 i32 CONST (no lowering in lowering doc: tf.Size)."""
    return [b.const(np.asarray(int(np.prod(static_shape(op.operands[0]))), np.int32), DType.INT32)]


# ------------------------------------------------------------------------------------------------ creation
@legalize("tf.Range", dtypes=_ANY)
def range_(b: Builder, op: Operation) -> list[Value]:
    """CONST of numpy.arange(start, limit, delta) for constant operands (no lowering in lowering doc: tf.Range).

    An empty range (Keras' ``reduce_max(x, range(rank(x)))`` of a scalar: no axes) is a zero-size constant that the
    rules reading it at conversion time (reduction axes) accept; one still needed at run time fails the final check
    (TOSA has no empty tensors)."""
    start, limit, delta = (np.asarray(const_operand(op, k, n)).reshape(-1)[0]
                           for k, n in ((0, "start"), (1, "limit"), (2, "delta")))
    if delta == 0:
        raise Unsupported("range with delta 0")
    out = op.results[0].dtype
    arr = np.arange(start, limit, delta).astype(out.np_dtype())
    return [b.const(narrow_array(arr, out), tosa_dtype(out))]


_same_as(("tf.Fill",), "tfl.fill", 2, note=" (CONST for a constant value, lowering doc: tf.Fill; else RESHAPE + TILE)")
_same_as(("tf.ZerosLike",), "tfl.zeros_like", 1, note=" (zero CONST, lowering doc: tf.ZerosLike)")
_same_as(("tf.OnesLike",), "tfl.ones_like", 1)


@legalize("tf.OneHot", dtypes=_ANY)
def one_hot(b: Builder, op: Operation) -> list[Value]:
    """EQUAL(indices, iota) then SELECT(on, off); out-of-range indices give off-rows.

    EQUAL(indices, iota) then SELECT(on, off) (:func:`tf_ops.one_hot`); out-of-range indices give off-rows
    like TF, which the document's SCATTER form (lowering doc: tf.OneHot) cannot."""
    idx = data_operand(b, op.operands[0])
    depth = const_ints(op, 1, "depth")[0]
    on, off = data_operand(b, op.operands[2]), data_operand(b, op.operands[3])
    if on.dtype != off.dtype:
        raise Unsupported(f"one_hot on/off values of types {on.dtype} and {off.dtype}")
    check_rank(idx.type.rank + 1, "one_hot result")
    return [tf_ops.one_hot(b, idx, depth, on, off, int(op.attrs.get("axis", -1)))]


@legalize("tf.BroadcastTo", dtypes=_ANY)
def broadcast_to(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE to the target rank, then TILE (no lowering in lowering doc: tf.BroadcastTo)."""
    x = data_operand(b, op.operands[0])
    target = const_ints(op, 1, "shape")
    check_rank(len(target), "broadcast_to result")
    return [tf_ops.broadcast_to(b, x, target)]


@legalize("tf.BroadcastArgs", dtypes=_ANY)
def broadcast_args(b: Builder, op: Operation) -> list[Value]:
    """The broadcast shape of two constant shapes, computed on the host (shape arithmetic of dynamic-batch graphs)."""
    s0, s1 = (np.asarray(const_operand(op, k, "shape")).reshape(-1) for k in (0, 1))
    try:
        out = np.asarray(np.broadcast_shapes(tuple(int(d) for d in s0), tuple(int(d) for d in s1)), np.int32)
    except ValueError:
        raise Unsupported(f"shapes {s0.tolist()} and {s1.tolist()} do not broadcast") from None
    return [b.const(out, DType.INT32)]


# --------------------------------------------------------------------------------------------------- casts
def _host_cast(arr: np.ndarray, out: DType) -> np.ndarray:
    """TF's Cast on the host: float → int truncates, → bool is != 0."""
    a = np.asarray(arr)
    if out is DType.BOOL:
        return a != 0
    with np.errstate(invalid="ignore", over="ignore"):
        if a.dtype.kind == "f" and out.is_int:
            return np.trunc(a).astype(out.np_dtype())
        return a.astype(out.np_dtype())


@legalize("tf.Cast", dtypes=("fp32", "i32", "i8", "i16", "bool"))
def cast(b: Builder, op: Operation) -> list[Value]:
    """TF Cast: float → int truncates, bool ↔ float via i32, i64 → i32; constants on the host.

    tfl.cast's lowering (float → int truncates via FLOOR/CEIL before CAST, bool ↔ float via i32, i64 → i32;
    lowering doc: tf.Cast says trivially CAST, but CAST rounds to nearest, spec 2.13.1 CAST); constant operands are cast
    on the host."""
    x = op.operands[0]
    out = op.results[0].dtype
    c = x.const()
    if c is not None:
        return [b.const(narrow_array(_host_cast(c, out), out), tosa_dtype(out))]
    return delegate.via(b, op, "tfl.cast", [x])


# ------------------------------------------------------------------------------------------ reshape & co
_same_as(("tf.Reshape",), "tfl.reshape", 2, note=" (RESHAPE with a CONST_SHAPE, −1 resolved; lowering doc: tf.Reshape)")
_same_as(("tf.ExpandDims",), "tfl.expand_dims", 2, note=" (RESHAPE; negative axis = axis + rank + 1)")
_same_as(("tf.Transpose", "tf.ConjugateTranspose"), "tfl.transpose", 2,
         note=" (TRANSPOSE with perms, lowering doc: tf.Transpose)")


@legalize("tf.Squeeze", dtypes=_ANY)
def squeeze(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE dropping the size-1 dims (lowering doc: lower_squeeze_op with its keep condition fixed)."""
    return delegate.via(b, op, "tfl.squeeze", op.operands[:1], {"squeeze_dims": list(op.attrs.get("squeeze_dims")
                                                                                       or [])})


@legalize("tf.ConcatV2", dtypes=_ANY)
def concat_v2(b: Builder, op: Operation) -> list[Value]:
    """One CONCAT of all inputs along the constant axis (last operand; lowering doc: lower_concatv2_op)."""
    axis = const_ints(op, len(op.operands) - 1, "axis")[0]
    return delegate.via(b, op, "tfl.concatenation", op.operands[:-1], {"axis": axis})


@legalize("tf.Concat", dtypes=_ANY)
def concat(b: Builder, op: Operation) -> list[Value]:
    """tf.ConcatV2 with the axis first (v1)."""
    axis = const_ints(op, 0, "axis")[0]
    return delegate.via(b, op, "tfl.concatenation", op.operands[1:], {"axis": axis})


@legalize("tf.Pack", dtypes=_ANY)
def pack(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE each input + one CONCAT (lowering doc: lower_pack_op, tf.Pack)."""
    return delegate.via(b, op, "tfl.pack", op.operands, {"axis": int(op.attrs.get("axis", 0))})


@legalize("tf.Unpack", dtypes=_ANY)
def unpack(b: Builder, op: Operation) -> list[Value]:
    """SLICE per index + RESHAPE (lowering doc: lower_unpack_op with its loop bound fixed; lowering doc: tf.Unpack)."""
    return delegate.via(b, op, "tfl.unpack", op.operands[:1], {"axis": int(op.attrs.get("axis", 0)),
                                                              "num": len(op.results)})


@legalize("tf.Split", dtypes=_ANY)
def split(b: Builder, op: Operation) -> list[Value]:
    """Equal SLICEs (lowering doc: lower_split_op without IDENTITYN, which 1.0 lacks; lowering doc: tf.Split)."""
    return delegate.via(b, op, "tfl.split", op.operands[:2], {"num_splits": int(op.attrs.get("num_split",
                                                                                         len(op.results)))})


_same_as(("tf.SplitV",), "tfl.split_v", 3, note=" (SLICEs of the given sizes, one −1; lowering doc: tf.SplitV)")
_same_as(("tf.Slice",), "tfl.slice", 3,
         note=" (SLICE with CONST_SHAPE start/size, −1 resolved; lowering doc: tf.Slice)")
_same_as(("tf.ReverseV2",), "tfl.reverse_v2", 2, note=" (REVERSE per axis, lowering doc: tf.ReverseV2)")
_same_as(("tf.Tile",), "tfl.tile", 2, note=" (TILE with CONST_SHAPE multiples, lowering doc: tf.Tile)")


@legalize("tf.Reverse", dtypes=_ANY)
def reverse_v1(b: Builder, op: Operation) -> list[Value]:
    """REVERSE along every axis whose bool flag is set (v1 Reverse)."""
    x = data_operand(b, op.operands[0])
    flags = np.asarray(const_operand(op, 1, "dims")).reshape(-1)
    if flags.size != x.type.rank:
        raise Unsupported(f"reverse dims {flags.tolist()} for rank {x.type.rank}")
    return [reverse(b, x, [a for a, f in enumerate(flags) if f])]


@legalize("tf.StridedSlice", dtypes=_ANY)
def strided_slice(b: Builder, op: Operation) -> list[Value]:
    """SLICE + strided selection + REVERSE + RESHAPE: every mask (tfl.strided_slice's planner).

    SLICE + per-axis stride selection + REVERSE + RESHAPE (tfl.strided_slice's planner: every mask, negative
    strides, rank ≤ 6; lowering doc: lower_strided_slice_op has none of these, §6.1).  TF ignores begin_mask on a
    shrunk axis (TFLite applies it), so those bits are cleared first."""
    a = op.attrs
    shrink = int(a.get("shrink_axis_mask", 0))
    attrs = {"begin_mask": int(a.get("begin_mask", 0)) & ~shrink, "end_mask": int(a.get("end_mask", 0)),
             "ellipsis_mask": int(a.get("ellipsis_mask", 0)), "new_axis_mask": int(a.get("new_axis_mask", 0)),
             "shrink_axis_mask": shrink, "offset": False}
    return delegate.via(b, op, "tfl.strided_slice", op.operands[:4], attrs)


# ------------------------------------------------------------------------------------------------- padding
_same_as(("tf.Pad",), "tfl.pad", 2,
         note=" (PAD with zero; TF paddings flatten to TOSA's order, lowering doc: tf.Pad, spec 2.10.2 PAD)")
_same_as(("tf.PadV2",), "tfl.padv2", 3,
         note=" (PAD with the constant_values operand; no lowering in lowering doc: tf.PadV2)")


@legalize("tf.MirrorPad", dtypes=_ANY)
def mirror_pad(b: Builder, op: Operation) -> list[Value]:
    """Per axis CONCAT(REVERSE(SLICE), x, REVERSE(SLICE)) (tfl.mirror_pad's lowering; none in lowering doc:
    tf.MirrorPad)."""
    return delegate.via(b, op, "tfl.mirror_pad", op.operands[:2], {"mode": str(op.attrs.get("mode", "REFLECT"))})


# ------------------------------------------------------------------------------------------------- gathers
@legalize("tf.Gather", dtypes=_ANY)
def gather(b: Builder, op: Operation) -> list[Value]:
    """GatherV2 with axis 0 (lowering doc: lower_gather_op, tf.Gather)."""
    return delegate.via(b, op, "tfl.gather", op.operands[:2], {"axis": 0, "batch_dims": 0})


@legalize("tf.GatherV2", dtypes=_ANY)
def gather_v2(b: Builder, op: Operation) -> list[Value]:
    """GATHER along a constant axis with batch_dims (tfl.gather's lowering).

    TRANSPOSE/RESHAPE to [B, K, C] + GATHER + RESHAPE/TRANSPOSE back (lower_gather_op with its result perm
    fixed, lowering doc: tf.GatherV2); constant axis, batch_dims."""
    axis = const_ints(op, 2, "axis")[0]
    axis = positive_axis(axis, op.operands[0].type.rank)
    return delegate.via(b, op, "tfl.gather", op.operands[:2], {"axis": axis,
                                                              "batch_dims": int(op.attrs.get("batch_dims", 0))})


_same_as(("tf.GatherNd",), "tfl.gather_nd", 2,
         note=" (index tuples flattened into one GATHER; lowering doc: tf.GatherNd with "
                                                    "the helper's K/stride fixed)")


# ------------------------------------------------------------------------------------------ space / depth
def _nchw_wrap(b: Builder, op: Operation, name: str, attrs: dict[str, object]) -> list[Value]:
    fmt = op.attrs.get("data_format") or "NHWC"
    if fmt not in ("NHWC", "NCHW"):
        raise Unsupported(f"data_format {fmt}")
    x = data_operand(b, op.operands[0])
    if fmt == "NCHW":
        (y,) = delegate.via(b, op, name, [tf_ops.to_nhwc(b, x)], attrs)
        return [tf_ops.to_nchw(b, y)]
    return delegate.via(b, op, name, [x], attrs)


@legalize("tf.DepthToSpace", dtypes=_ANY)
def depth_to_space(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE/TRANSPOSE/RESHAPE (lowering doc: lower_depth_to_space_op, tf.DepthToSpace); NCHW through
    TRANSPOSEs."""
    return _nchw_wrap(b, op, "tfl.depth_to_space", {"block_size": int(op.attrs.get("block_size", 2))})


@legalize("tf.SpaceToDepth", dtypes=_ANY)
def space_to_depth(b: Builder, op: Operation) -> list[Value]:
    """RESHAPE/TRANSPOSE/RESHAPE (lowering doc: lower_space_to_depth_op, tf.SpaceToDepth); NCHW through
    TRANSPOSEs."""
    return _nchw_wrap(b, op, "tfl.space_to_depth", {"block_size": int(op.attrs.get("block_size", 2))})


_same_as(("tf.SpaceToBatchND",), "tfl.space_to_batch_nd", 3,
         note=" (PAD, RESHAPE, TRANSPOSE, RESHAPE; lowering doc: lower_space_to_batch_nd_op with its step-3 TRANSPOSE "
              "fixed, lowering doc: tf.SpaceToBatchND)")
_same_as(("tf.BatchToSpaceND",), "tfl.batch_to_space_nd", 3,
         note=" (RESHAPE, TRANSPOSE, RESHAPE, SLICE; lowering doc: lower_batch_to_space_nd_op with its crop/perm bugs "
              "fixed, lowering doc: tf.BatchToSpaceND)")


# ------------------------------------------------------------------------------------------------- resize
def _resize(b: Builder, op: Operation, name: str) -> list[Value]:
    x = op.operands[0]
    if name == "tfl.resize_bilinear" and x.dtype not in FLOAT_TYPES:
        raise Unsupported(f"{op.name} of {x.dtype} (TF computes it in float; cast first)")
    attrs = {"align_corners": bool(op.attrs.get("align_corners")),
             "half_pixel_centers": bool(op.attrs.get("half_pixel_centers"))}
    return delegate.via(b, op, name, op.operands[:2], attrs)


@legalize("tf.ResizeBilinear", dtypes=("fp32",))
def resize_bilinear(b: Builder, op: Operation) -> list[Value]:
    """RESIZE BILINEAR with align_corners / half_pixel_centers (op_inventory §4 #20).

    RESIZE BILINEAR with scale/offset/border from align_corners / half_pixel_centers (§4 #20; the tf.ResizeBilinear
    lowering's
    pre-1.0 helper is not followed)."""
    return _resize(b, op, "tfl.resize_bilinear")


@legalize("tf.ResizeNearestNeighbor", dtypes=_ANY)
def resize_nearest_neighbor(b: Builder, op: Operation) -> list[Value]:
    """RESIZE NEAREST_NEIGHBOR (§4 #20), GATHERs where TF's float index rounding differs (lowering doc:
    tf.ResizeNearestNeighbor)."""
    return _resize(b, op, "tfl.resize_nearest_neighbor")


# ------------------------------------------------------------------------------------------------- select
_same_as(("tf.Select",), "tfl.select", 3,
         note=" (a rank-1 condition picks rows; no lowering in lowering doc: tf.Select)")
_same_as(("tf.SelectV2",), "tfl.select_v2", 3,
         note=" (SELECT with all three ranks equalised, lowering doc: tf.SelectV2)")
