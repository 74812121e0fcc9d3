"""Rules for TFLite's neural-network ops: convolutions, fully connected, batch matmul, pools — float and quantized.

Lowering document sections: tfl.conv_2d, tfl.depthwise_conv_2d, tfl.fully_connected,
tfl.transpose_conv, tfl.average_pool_2d, tfl.max_pool_2d (pre-1.0 TOSA; translated per
op_inventory §4 #3, #14, #21-23, #28).

Quantized (int8, per-tensor or per-channel weights; int16x8 = i16 activations × i8 weights, EXT-INT16) follows
LiteRT's reference kernels bit-exactly (see :mod:`tf2tosa.quant.conv`): CONV2D/DEPTHWISE/TRANSPOSE_CONV2D/MATMUL
with the zero points as [1] tensors → i32 (i48) accumulator → RESCALE by ``s_x·s_w[c]/s_out`` (per_channel, spec 2.13.2
RESCALE) →
CLAMP of the fused activation in the output domain (lowering doc: tfl.conv_2d, tfl.depthwise_conv_2d,
lowering doc: tfl.fully_connected with op_inventory §6.1's
fixes: the depthwise filter is reshaped, the fully-connected zero bias has OC elements, the RESCALEs carry both
zero points, and the RELUN-on-i32 becomes a CLAMP on the output type).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .. import quant  # (quant.NAME: the quantized branches' helpers, loaded by the first quantized rule)
from ..errors import Unsupported
from ..ir import DType, Operation, Value, has_value
from ..quant.common import is_hybrid, is_quantized, per_tensor, qparams, same_quant
from ..tosa.builder import Builder
from .lowering.conv import (
    crop_output,
    fully_connected_rows,
    grouped_conv2d,
    stride_dilation,
    transpose_conv_out_pads,
    transpose_conv_phases,
)
from .lowering.layout import dilate_axis, prod, reverse
from .lowering.legalize_common import acc_type_for, const_operand, float_zp, fused_activation
from .lowering.numeric import FLOAT_TYPES, broadcast_shape, operands, require_float, static_shape
from .lowering.padding import apply_window_padding, same_padding, window_pads
from .registry import legalize

if TYPE_CHECKING:
    from ..quant.elementwise import Fx

_QTYPES = ("fp32", "i8", "i16")


class _ConvTypes(NamedTuple):
    """Zero-point operands, accumulator and element type of one conv-like op (float or quantized)."""

    izp: Value
    wzp: Value
    acc_type: str
    acc: DType  # bias / accumulator element type
    dt: DType  # activation element type
    quantized: bool


def _conv_types(b: Builder, op: Operation, x: Value, w: Value) -> _ConvTypes:
    if not is_quantized(x, w):
        dt = require_float(op, x, w)
        zp = float_zp(b, dt)
        return _ConvTypes(zp, zp, acc_type_for(dt), dt, dt, False)
    dt = quant.require_act_type(op, x)
    acc, acc_type = quant.ACC[dt]
    return _ConvTypes(b.zp(per_tensor(x, "input")[1], dt), b.zp(quant.weight_zp(w), DType.INT8), acc_type, acc, dt,
                      True)


def _bias(b: Builder, op: Operation, k: int, channels: int, ct: _ConvTypes) -> tuple[Value, DType | None]:
    """Operand ``k`` when present, else a zero bias of ``channels`` elements (lowering doc: tfl.fully_connected with
    shape[0] fixed, §6.1).

    Returns the bias and (quantized only) TFLite's accumulator type (see :func:`tf2tosa.quant.conv.quant_bias`)."""
    if ct.quantized:
        return quant.quant_bias(b, op, k, channels, ct.acc)
    dt = ct.dt
    if len(op.operands) > k and has_value(op.operands[k]):
        bias = op.operands[k]
        if bias.type.is_quantized or bias.dtype is not dt:
            raise Unsupported(f"bias of type {bias.type} with {dt.value} input")
        if bias.type.rank != 1:
            bias = b.reshape(bias, [int(np.prod(static_shape(bias)))])
        return bias, None
    return b.const(np.zeros([channels]), dt, name="zero_bias"), None


def _conv(b: Builder, x: Value, w: Value, bias: Value, ct: _ConvTypes, pads: list[int], stride: list[int],
          dil: list[int]) -> Value:
    return _window_conv(b, "CONV2D", [x, w, bias, ct.izp, ct.wzp],
                        {"pad": pads, "stride": stride, "dilation": dil, "acc_type": ct.acc_type}, ct)


def _window_conv(b: Builder, opcode: str, operands: list[Value], attrs: dict[str, Any], ct: _ConvTypes) -> Value:
    """``b.emit(opcode, operands, attrs).result`` of a CONV2D or DEPTHWISE_CONV2D ``[x, w, bias, x_zp, w_zp]``.
    A quantized one of static shapes and plain-int attributes through :meth:`Builder.emit_vouched`: the checks
    read no constant values of these ops but the zero points', and those pass for every value an i8 tensor holds,
    and for the 0 of an int16 input (:func:`tf2tosa.quant.conv.require_act_type`)."""
    if ct.quantized:
        shapes = [v.type.__dict__.get("_static_shape") for v in operands[:3]]  # (kept for plain int shapes)
        lists = [attrs["pad"], attrs["stride"], attrs["dilation"]]
        if None not in shapes and all(d.__class__ is int for vals in lists for d in vals):
            key = (*shapes, *(v.dtype for v in operands), *(tuple(vals) for vals in lists), attrs["acc_type"])
            return b.emit_vouched(opcode, operands, attrs, key).result
    return b.emit(opcode, operands, attrs).result


def _finish(b: Builder, op: Operation, acc: Value, ct: _ConvTypes, scales: list[float] | np.ndarray | None,
            tfl_acc: DType | None) -> Value:
    """Float: the fused activation.  Quantized: RESCALE per channel, then the activation's CLAMP."""
    if not ct.quantized:
        return fused_activation(b, acc, op.attrs.get("fused_activation_function"))
    assert scales is not None
    return quant.conv_output(b, op, acc, scales, tfl_acc)


@legalize("tfl.conv_2d", dtypes=_QTYPES, arity=2)
def conv_2d(b: Builder, op: Operation) -> list[Value]:
    """CONV2D (OHWI weights as in TOSA, spec 2.3.3 CONV2D) + fused activation; grouped convs become one
    DEPTHWISE_CONV2D (one input channel per group) or a CONCAT of groups (:func:`.lowering.conv.grouped_conv2d`).

    Quantized: acc = CONV2D(x, w, bias, x_zp, w_zp) (i32, or i48 for i16 × i8), RESCALE by s_x·s_w[c]/s_out
    (lowering doc: tfl.conv_2d, per channel instead of the tfl.conv_2d lowering's single scale), CLAMP of the activation
    (lowering doc: tfl.conv_2d)."""
    x, w = operands(op, 4, 4)
    if is_hybrid(x, w):  # (int8 weights of a float op: tfl_hybrid, loaded for such a model only)
        from . import tfl_hybrid as hybrid

        if hybrid.kernel_mode(b, x, w):
            return hybrid.conv_2d(b, op)
        w = hybrid.float_weight(b, op, x, w)
    ct = _conv_types(b, op, x, w)
    _, ih, iw, c = static_shape(x)
    oc, kh, kw, ic = static_shape(w)
    stride, dil = stride_dilation(op)
    bias, tfl_acc = _bias(b, op, 2, oc, ct)
    pads = window_pads(op.attrs.get("padding", "VALID"), [ih, iw], [kh, kw], stride, dil)
    x, pads = apply_window_padding(b, x, pads, ct.izp)
    if c == ic:
        y = _conv(b, x, w, bias, ct, pads, stride, dil)
    else:  # TFLite grouped convolution: filter IC = C / groups, OC split evenly between groups
        y = grouped_conv2d(b, x, w, bias, lambda xg, wg, bg: _conv(b, xg, wg, bg, ct, pads, stride, dil),
                           lambda _: b.const(np.zeros([oc]), ct.acc, name="zero_bias"), "conv_2d",
                           lambda x1, w4, b1: b.depthwise_conv2d(x1, w4, b1, ct.izp, ct.wzp, pad=pads, stride=stride,
                                                                 dilation=dil, acc_type=ct.acc_type))
    scales = quant.conv_scale_array(x, w, op.results[0], oc) if ct.quantized else None
    return [_finish(b, op, y, ct, scales, tfl_acc)]


@legalize("tfl.depthwise_conv_2d", dtypes=_QTYPES, arity=2)
def depthwise_conv_2d(b: Builder, op: Operation) -> list[Value]:
    """DEPTHWISE_CONV2D; TFLite's [1,KH,KW,C*M] filter is reshaped to TOSA's [KH,KW,C,M] (spec 2.3.5 DEPTHWISE_CONV2D,
    §6.1).

    Quantized: the per-channel scales follow TFLite's filter axis 3 (channel c*M + m), which is the output's last
    dimension, so one per_channel RESCALE applies them (lowering doc: tfl.depthwise_conv_2d, of the depthwise result,
    not %conv2d)."""
    x, w = operands(op, 4, 4)
    if is_hybrid(x, w):  # (int8 weights of a float op: tfl_hybrid, loaded for such a model only)
        from . import tfl_hybrid as hybrid

        if hybrid.kernel_mode(b, x, w):
            return hybrid.depthwise_conv_2d(b, op)
        w = hybrid.float_weight(b, op, x, w)
    ct = _conv_types(b, op, x, w)
    _, ih, iw, c = static_shape(x)
    one, kh, kw, cm = static_shape(w)
    if one != 1 or cm % c:
        raise Unsupported(f"depthwise filter shape {[one, kh, kw, cm]} for {c} input channels")
    m = cm // c
    stride, dil = stride_dilation(op)
    bias, tfl_acc = _bias(b, op, 2, cm, ct)
    pads = window_pads(op.attrs.get("padding", "VALID"), [ih, iw], [kh, kw], stride, dil)
    x, pads = apply_window_padding(b, x, pads, ct.izp)
    # output channel c*M + m of TFLite is [.., c, m] of TOSA: a plain row-major reshape
    w4 = b.reshape(w, [kh, kw, c, m])
    y = _window_conv(b, "DEPTHWISE_CONV2D", [x, w4, bias, ct.izp, ct.wzp],
                     {"pad": pads, "stride": stride, "dilation": dil, "acc_type": ct.acc_type}, ct)
    scales = quant.conv_scale_array(x, w, op.results[0], cm) if ct.quantized else None
    return [_finish(b, op, y, ct, scales, tfl_acc)]


@legalize("tfl.transpose_conv", dtypes=_QTYPES, arity=3)
def transpose_conv(b: Builder, op: Operation) -> list[Value]:
    """TRANSPOSE_CONV2D with out_pad from the declared output shape (op_inventory §4 #23, §6.2).

    TFLite places input pixel iy at output rows iy*s - pad + ky (pad from SAME/VALID on the *output* size);
    TOSA places it at iy*s + out_pad_top + ky (spec 2.3.10 TRANSPOSE_CONV2D), so out_pad_top = -pad and out_pad_bottom
    follows
    from OH = (IH-1)*s + out_pad_top + out_pad_bottom + KH (spec 2.3.10 TRANSPOSE_CONV2D).  The document's helper
    (lowering doc: get_transpose_conv2d_padding_values_from_pad_type) pushes
    only pad_before, uses +1 for +i, and clamps at 0: not copied.  Out-pads <= -K (ERROR_IF, spec 2.3.10
    TRANSPOSE_CONV2D) are
    computed wider and SLICEd.  Quantized: zero points as [1] tensors (lowering doc: tfl.transpose_conv omits them),
    per-channel RESCALE
    (lowering doc: tfl.transpose_conv), activation CLAMP.
    """
    _, w, x = operands(op, 1, 4, 4)
    if is_hybrid(x, w):  # (hybrid: always dequantized, see tfl_hybrid.transpose_conv)
        from . import tfl_hybrid as hybrid

        w = hybrid.float_weight(b, op, x, w)
    ct = _conv_types(b, op, x, w)
    n, ih, iw, ic = static_shape(x)
    oc, kh, kw, wic = static_shape(w)
    if wic != ic:
        raise Unsupported(f"transpose_conv filter channels {wic} vs input channels {ic}")
    oshape = const_operand(op, 0, "output_shape")
    on, oh, ow, occ = (int(d) for d in np.asarray(oshape).reshape(-1))
    if on != n or occ != oc:
        raise Unsupported(f"transpose_conv output_shape {[on, oh, ow, occ]} inconsistent with operands")
    sh, sw = int(op.attrs.get("stride_h", 1)), int(op.attrs.get("stride_w", 1))
    padding = op.attrs.get("padding", "VALID")
    if padding not in ("SAME", "VALID"):
        raise Unsupported(f"padding {padding!r}")
    before = [same_padding(size, k, s)[0] if padding == "SAME" else 0 for size, k, s in ((oh, kh, sh), (ow, kw, sw))]
    out_pad, crop = transpose_conv_out_pads([oh, ow], [ih, iw], [kh, kw], [sh, sw], before)
    bias, tfl_acc = _bias(b, op, 3, oc, ct)
    scales = quant.conv_scales(x, w, op.results[0], oc) if ct.quantized else None
    phased = _phased_transpose_conv(b, op, x, w, bias, ct, out_pad, scales, tfl_acc)
    if phased is not None:
        return [crop_output(b, phased, crop)]
    y = b.transpose_conv2d(x, w, bias, ct.izp, ct.wzp, out_pad=out_pad, stride=[sh, sw], acc_type=ct.acc_type)
    y = crop_output(b, y, crop)
    return [_finish(b, op, y, ct, scales, tfl_acc)]


def _phased_transpose_conv(b: Builder, op: Operation, x: Value, w: Value, bias: Value, ct: _ConvTypes,
                           out_pad: list[int], scales: list[float] | None, tfl_acc: DType | None) -> Value | None:
    """For a target with ``split_transpose_conv`` (Ethos-U), an int8 transposed convolution as one CONV2D per
    output phase (:func:`.lowering.conv.transpose_conv_phases`), each finished (RESCALE, activation) on its own, and
    their int8 outputs interleaved by CONCAT and RESHAPE; None where that form does not apply.  Each phase sums the
    same terms as TRANSPOSE_CONV2D, so the result is the same.  Vela fuses each RESCALE into its convolution, where
    the RESCALE after a TRANSPOSE_CONV2D runs on its own over the i32 result (tests/test_npu_target.py)."""
    target = b.context.target()
    sh, sw = int(op.attrs.get("stride_h", 1)), int(op.attrs.get("stride_w", 1))
    if target is None or not target.split_transpose_conv or not ct.quantized or x.dtype is not DType.INT8 \
            or not w.is_const or (sh, sw) == (1, 1):
        return None
    n, ih, iw, ic = static_shape(x)
    oc, kh, kw, _ = static_shape(w)
    oh = (ih - 1) * sh + out_pad[0] + out_pad[1] + kh  # TRANSPOSE_CONV2D's output, before any crop
    ow = (iw - 1) * sw + out_pad[2] + out_pad[3] + kw
    rows = transpose_conv_phases(ih, kh, sh, out_pad[0], oh)
    cols = transpose_conv_phases(iw, kw, sw, out_pad[2], ow)
    if rows is None or cols is None:
        return None
    weights = np.asarray(w.const())
    lines = []
    for r in rows:
        parts = []
        for c in cols:
            xs = b.slice(x, [0, r.start, c.start, 0], [n, r.end - r.start, c.end - c.start, ic])
            taps = weights[:, list(r.taps)][:, :, list(c.taps)]
            wc = b.const(taps, w.dtype, quant=w.type.quant)
            acc = _conv(b, xs, wc, bias, ct, [*r.pad, *c.pad], [1, 1], [1, 1])
            parts.append(_finish(b, op, acc, ct, scales, tfl_acc))
        # the column phases side by side in the channels are the row's outputs in order: [n, q, ow, oc]
        lines.append(b.reshape(b.concat(parts, 3), [n, r.size, ow, oc]))
    # the row phases side by side along W are the output rows in order
    return b.reshape(b.concat(lines, 2), [n, oh, ow, oc])


@legalize("tfl.fully_connected", dtypes=_QTYPES, arity=2)
def fully_connected(b: Builder, op: Operation) -> list[Value]:
    """1x1 CONV2D (1.0 has no FULLY_CONNECTED, §4 #14): input [N,1,1,IC], weights [OC,1,1,IC], bias [OC].

    Quantized: LiteRT's reference kernels requantize in double, round(acc · s_x·s_w[c]/s_out) (not MBQM, unlike
    conv), reproduced exactly by :func:`tf2tosa.quant.fully_connected.fc_output`; the tfl.fully_connected lowering's
    zero bias of %filter.shape[3] is OC elements (§6.1)."""
    x, w = operands(op, None, 2)
    if is_hybrid(x, w):  # (int8 weights of a float op: tfl_hybrid, loaded for such a model only)
        from . import tfl_hybrid as hybrid

        if hybrid.kernel_mode(b, x, w):
            return hybrid.fully_connected(b, op)
        w = hybrid.float_weight(b, op, x, w)
    ct = _conv_types(b, op, x, w)
    if op.attrs.get("weights_format", "DEFAULT") != "DEFAULT":
        raise Unsupported(f"fully_connected weights_format {op.attrs['weights_format']}")
    if len(op.results) > 1:
        return _fully_connected_rows(b, op, x, w, ct)
    xs = static_shape(x)
    ws = static_shape(w)
    oc, ic, n = fully_connected_rows(xs, ws)
    bias, tfl_acc = _bias(b, op, 2, oc, ct)
    x4 = b.reshape(x, [n, 1, 1, ic])
    w4 = b.reshape(w, [oc, 1, 1, ic])
    y = _conv(b, x4, w4, bias, ct, [0, 0, 0, 0], [1, 1], [1, 1])
    if ct.quantized:
        wzp = quant.weight_zp(w)
        bound = quant.acc_bound(x, w, bias, wzp)

        def low_acc() -> Value:
            # the i16 input's low bytes times the weights: acc modulo 256 (exact_round.wide_acc)
            from ..quant.exact_round import low_byte_input

            xl = low_byte_input(b, x4)
            zero = b.const(np.zeros([oc], np.int64), DType.INT32, name="zero_bias")
            return b.conv2d(xl, w4, zero, b.zp(-128, DType.INT8), b.zp(wzp, DType.INT8), pad=[0, 0, 0, 0],
                            stride=[1, 1], dilation=[1, 1], acc_type="INT32")

        bvals = [int(v) for v in np.asarray(bias.const(), np.int64).reshape(-1)]
        y = quant.fc_output(b, op, y, quant.conv_scales(x, w, op.results[0], oc), tfl_acc, bound,
                      low_acc if x.dtype is DType.INT16 else None, bvals, activation=False)
    else:
        y = fused_activation(b, y, op.attrs.get("fused_activation_function"))
    if op.attrs.get("keep_num_dims") and xs:
        out = xs[:-1] + [oc]
    else:
        out = [n, oc]
    y = b.reshape(y, out)
    if ct.quantized:
        # the activation's CLAMP after the RESHAPE (they commute): its output is then the tensor the consumer
        # reads, so Vela writes a CONCAT input straight into the CONCAT instead of copying it
        y = quant.fused_activation_q(b, y, op.attrs.get("fused_activation_function"), qparams(op.results[0]))
    return [y]


def _fully_connected_rows(b: Builder, op: Operation, x: Value, w: Value, ct: _ConvTypes) -> list[Value]:
    """Stacked int16x8 rows (:mod:`tf2tosa.converter.passes.batch_fully_connected`): x [rows, IC], one result
    [1, OC] per row with its own output scale; one CONV2D and one exact output stage for all rows."""
    oc, ic = static_shape(w)
    n = static_shape(x)[0]
    if not ct.quantized or x.dtype is not DType.INT16 or n != len(op.results):
        raise Unsupported("stacked fully_connected rows need an int16 input with one result per row")
    bias, _ = _bias(b, op, 2, oc, ct)
    if quant.acc_bound(x, w, bias, quant.weight_zp(w)) >= (1 << 31) - 1:
        raise Unsupported("stacked fully_connected rows need an accumulator that fits i32")
    y = _conv(b, b.reshape(x, [n, 1, 1, ic]), b.reshape(w, [oc, 1, 1, ic]), bias, ct, [0, 0, 0, 0], [1, 1], [1, 1])
    rows = quant.fc_output_rows(b, y, [quant.conv_scales(x, w, r, oc) for r in op.results], op.results)
    return [b.reshape(r, [1, oc]) for r in rows]


@legalize("tfl.batch_matmul", dtypes=_QTYPES, arity=2)
def batch_matmul(b: Builder, op: Operation) -> list[Value]:
    """MATMUL on rank-3 views (§4 #28): batch dims broadcast (TILE) and flattened; adj_x/adj_y by TRANSPOSE.

    Quantized: MATMUL with both zero points (i8 → i32; i16 → i48, EXT-INT16), then RESCALE by
    float32(s_x·s_y)/s_out (TFLite's GetQuantizedConvolutionMultipler; int16 uses the int64 MBQM)."""
    x, y = op.operands[0], op.operands[1]
    kernel = False  # hybrid: a float32 x by an int8 constant y
    if is_hybrid(x, y):
        from . import tfl_hybrid as hybrid

        kernel = hybrid.kernel_mode(b, x, y)
        y = y if kernel else hybrid.float_weight(b, op, x, y)
    quantized = is_quantized(x, y) and not kernel
    if quantized:
        dt = quant.require_act_type(op, x)
        if y.dtype is not dt:
            raise Unsupported(f"quantized batch_matmul of {x.dtype.value} and {y.dtype.value}")
        quant.require_act_type(op, y)
        zx, zy = b.zp(per_tensor(x, "lhs")[1], dt), b.zp(per_tensor(y, "rhs")[1], dt)
    else:
        dt = require_float(op, x) if kernel else require_float(op, x, y)
        zx = zy = float_zp(b, dt)
    xs, ys = static_shape(x), static_shape(y)
    if len(xs) < 2 or len(ys) < 2:
        raise Unsupported("batch_matmul operands must have rank >= 2")
    adj_x, adj_y = bool(op.attrs.get("adj_x")), bool(op.attrs.get("adj_y"))
    m, k = (xs[-1], xs[-2]) if adj_x else (xs[-2], xs[-1])
    k2, nn = (ys[-1], ys[-2]) if adj_y else (ys[-2], ys[-1])
    if k != k2:
        raise Unsupported(f"batch_matmul inner dims {k} and {k2} differ")
    batch = broadcast_shape(xs[:-2], ys[:-2])
    nb = prod(batch) if batch else 1  # (dimension expressions stay symbolic, --dynamic)
    bx = prod(xs[:-2]) if len(xs) > 2 else 1
    by = prod(ys[:-2]) if len(ys) > 2 else 1
    if by == 1 and bx == nb:
        # a shared right operand (the usual constant weight): fold the batch into the rows, no TILE
        if adj_x:
            x = b.transpose(b.reshape(x, [nb, k, m]), [0, 2, 1])
        x3 = b.reshape(x, [1, nb * m, k])
        y3 = b.reshape(y, [1, ys[-2], ys[-1]])
        if adj_y:
            y3 = b.transpose(y3, [0, 2, 1])
    else:
        rank = len(batch) + 2
        x = b.reshape(x, [1] * (rank - len(xs)) + xs)
        y = b.reshape(y, [1] * (rank - len(ys)) + ys)
        x = b.tile(x, [nb_d // xd for nb_d, xd in zip(batch, static_shape(x)[:-2])] + [1, 1])
        y = b.tile(y, [nb_d // yd for nb_d, yd in zip(batch, static_shape(y)[:-2])] + [1, 1])
        x3 = b.reshape(x, [nb, xs[-2], xs[-1]])
        y3 = b.reshape(y, [nb, ys[-2], ys[-1]])
        if adj_x:
            x3 = b.transpose(x3, [0, 2, 1])
        if adj_y:
            y3 = b.transpose(y3, [0, 2, 1])
    if kernel:
        from . import tfl_hybrid as hybrid

        out = hybrid.matmul(b, op, x3, y3)
    else:
        out = b.matmul(x3, y3, zx, zy)
    if quantized:
        res = op.results[0]
        scale = quant.tfl_product_scale(per_tensor(x)[0], per_tensor(y)[0]) / per_tensor(res, "output")[0]
        out = quant.requantize_acc(b, out, [scale], res, DType.INT64 if dt is DType.INT16 else DType.INT32)
    return [b.reshape(out, batch + [m, nn])]


def _pool_geometry(op: Operation, x: Value) -> tuple[list[int], list[int], list[int]]:
    a = op.attrs
    if x.type.rank != 4:
        raise Unsupported(f"{op.name} input has rank {x.type.rank}, expected 4")
    _, ih, iw, _ = static_shape(x)
    if "filter_height" not in a or "filter_width" not in a:
        raise Unsupported(f"{op.name} has no filter size (its options table is missing or of another op)")
    kernel = [int(a["filter_height"]), int(a["filter_width"])]
    stride = [int(a.get("stride_h", 1)), int(a.get("stride_w", 1))]
    pads = window_pads(a.get("padding", "VALID"), [ih, iw], kernel, stride, explicit=a.get("explicit_paddings"))
    return kernel, stride, pads


def _lowest(b: Builder, x: Value) -> Value:
    """The one-element PAD value a max-pool never picks: -inf for float, the type's minimum for integers."""
    dt = x.dtype
    v = -np.inf if dt in FLOAT_TYPES else np.iinfo(dt.np_dtype()).min
    return b.const(np.array([v]), dt, name="pad_const")


def _pool_activation(b: Builder, op: Operation, y: Value) -> Value:
    act = op.attrs.get("fused_activation_function")
    if y.type.is_quantized:
        return quant.fused_activation_q(b, y, act, qparams(op.results[0]))
    return fused_activation(b, y, act)


@legalize("tfl.average_pool_2d", dtypes=_QTYPES, arity=1)
def average_pool_2d(b: Builder, op: Operation) -> list[Value]:
    """AVG_POOL2D (spec 2.3.2 AVG_POOL2D): the count excludes padding, as TFLite's does; SAME pads are < kernel.

    Quantized: TFLite's reference kernel averages the *raw* stored values (input and output quantization must be
    equal) as (sum ± count/2) / count, i.e. rounding half away from zero.  AVG_POOL2D with zero points 0 computes
    round(sum / count) by reciprocal_scale (spec 4.5.5: reciprocal_scale), whose multiplier over-estimates 1/count by
    less than
    2^-30 relative: ties round away from zero and no other result moves while |sum| < 2^15·count (i16) and
    count < 2^14.  With TFLite's zero points instead, ties would round around zp (op_inventory §5.5).
    """
    (x,) = operands(op, None)
    if x.type.is_quantized:
        dt = quant.require_act_type(op, x)
        if not same_quant(x, op.results[0]):
            raise Unsupported("quantized average_pool_2d with different input/output quantization (TFLite "
                              "requires them equal)")
        zp, acc_type = b.zp(0, dt), "INT32"
    else:
        dt = require_float(op, x)
        zp, acc_type = float_zp(b, dt), acc_type_for(dt)
    kernel, stride, pads = _pool_geometry(op, x)
    x, pads = apply_window_padding(b, x, pads, what="AVG_POOL2D")
    if pads[0] >= kernel[0] or pads[1] >= kernel[0] or pads[2] >= kernel[1] or pads[3] >= kernel[1]:
        raise Unsupported(f"pool padding {pads} not smaller than kernel {kernel} (S1341-1342)")
    if x.type.is_quantized and kernel[0] * kernel[1] > (1 << 29) // (1 << (x.dtype.bits - 1)):
        quant.note_inexact(b, op, f"a {kernel[0]}x{kernel[1]} window: AVG_POOL2D's reciprocal multiplier may move a "
                                  "result by 1 LSB once |sum| reaches 2^29")
    y = b.avg_pool2d(x, zp, zp, kernel=kernel, stride=stride, pad=pads, acc_type=acc_type, quant=x.type.quant)
    return [_pool_activation(b, op, y)]


@legalize("tfl.max_pool_2d", dtypes=_QTYPES, arity=1)
def max_pool_2d(b: Builder, op: Operation) -> list[Value]:
    """MAX_POOL2D (no zero points in 1.0, spec 2.3.8 MAX_POOL2D; nan_mode PROPAGATE; the tfl.max_pool_2d lowering's
    quantization_info dropped).

    Quantized: the max of the stored values (a positive-scale affine map keeps the order); a different output
    quantization is one RESCALE after the pool (TFLite itself requires them equal)."""
    (x,) = operands(op, None)
    if x.type.is_quantized:
        quant.require_act_type(op, x)
    else:
        require_float(op, x)
    kernel, stride, pads = _pool_geometry(op, x)
    x, pads = apply_window_padding(b, x, pads, _lowest(b, x), "MAX_POOL2D")
    if pads[0] >= kernel[0] or pads[1] >= kernel[0] or pads[2] >= kernel[1] or pads[3] >= kernel[1]:
        raise Unsupported(f"pool padding {pads} not smaller than kernel {kernel} (S2844-2845)")
    y = b.max_pool2d(x, kernel=kernel, stride=stride, pad=pads, nan_mode="PROPAGATE", quant=x.type.quant)
    if x.type.is_quantized and not same_quant(x, op.results[0]):
        y = quant.requantize(b, y, qparams(op.results[0]))
    return [_pool_activation(b, op, y)]


@legalize("tfl.l2_pool_2d", arity=1)
def l2_pool_2d(b: Builder, op: Operation) -> list[Value]:
    """sqrt(mean of x^2 over the window), count excluding padding like TFLite: AVG_POOL2D(x*x) then
    RECIPROCAL(RSQRT(.)) (exact 0 at 0; no lowering in the document)."""
    (x,) = operands(op, None)
    dt = require_float(op, x)
    kernel, stride, pads = _pool_geometry(op, x)
    sq = b.mul(x, x)
    sq, pads = apply_window_padding(b, sq, pads, what="the AVG_POOL2D of L2_POOL2D")
    avg = b.avg_pool2d(sq, float_zp(b, dt), float_zp(b, dt), kernel=kernel, stride=stride, pad=pads,
                       acc_type=acc_type_for(dt))
    y = b.reciprocal(b.rsqrt(avg))
    return [fused_activation(b, y, op.attrs.get("fused_activation_function"))]


@legalize("tfl.l2_normalization", dtypes=("fp32", "i8"), arity=1)
def l2_normalization(b: Builder, op: Operation) -> list[Value]:
    """float: x * MINIMUM(RSQRT(sum x^2), 1e6); int8: TFLite's integer kernel (fixed-point inverse sqrt).

    x / max(sqrt(sum(x^2, last axis)), 1e-6) as x * MINIMUM(RSQRT(sum), 1e6) (TFLite's epsilon; no lowering
    in the document, lowering doc: tfl.l2_normalization).  RSQRT(0) = inf, so an all-zero row gives 0 like TFLite.

    int8: TFLite's integer kernel (:func:`_q_l2_normalization`), output scale 1/128 and zero point 0."""
    (x,) = operands(op, None)
    if x.type.rank == 0:
        raise Unsupported("l2_normalization of a rank-0 tensor")
    if x.type.is_quantized:
        return [_q_l2_normalization(b, op)]
    require_float(op, x)
    axis = x.type.rank - 1
    s = b.emit("REDUCE_SUM", [b.mul(x, x)], {"axis": axis}).result
    big = b.const(np.full((1,) * x.type.rank, 1e6), x.dtype)
    inv = b.binary("MINIMUM", b.rsqrt(s), big, nan_mode="PROPAGATE")
    y = b.mul(x, inv)
    return [fused_activation(b, y, op.attrs.get("fused_activation_function"))]


def _inv_sqrt_multiplier(fx: Fx, acc: Value) -> tuple[Value, Value]:
    """TFLite GetInvSqrtQuantizedMultiplierExp(acc, kReverseShift) per element of ``acc`` (i32 >= 0), as TOSA ops:
    (multiplier, left shift); mirrors :func:`tf2tosa.quant.tflite_reference.inv_sqrt_quantized_multiplier_exp`
    step by step."""
    b = fx.b
    big = fx.gt(acc, (1 << 29) - 1)  # one /4 step brings any i32 below 2^29
    value = fx.where(big, fx.shr(acc, 2), acc)
    shift = fx.where(big, 12, 11)
    pairs = fx.sub(fx.shr(fx.sub(fx.clz(value), 1), 1), 1)
    shift = fx.sub(shift, pairs)
    value = b.binary("LOGICAL_LEFT_SHIFT", value, fx.add(pairs, pairs))
    half_input = fx.rdbpot(fx.shr(value, 1), 1, nonneg=True)
    half_three = (1 << 28) + (1 << 27)
    xv: Value = fx.c(1 << 28)
    for _ in range(5):
        x3 = fx.sat_shl(fx.mulhi(fx.mulhi(xv, xv), xv), 6)
        xv = fx.sat_shl(fx.sub(fx.mulhi(half_three, xv), fx.mulhi(half_input, x3)), 3)
    xv = fx.mulhi(xv, 1518500250)
    neg = fx.gt(0, shift)
    up = b.binary("MAXIMUM", fx.sub(0, shift), fx.c(0), nan_mode="PROPAGATE")  # in range on both branches
    xv = fx.where(neg, b.binary("LOGICAL_LEFT_SHIFT", xv, up), xv)
    shift = fx.where(neg, 0, shift)
    small = fx.gt(2, acc)  # acc <= 1
    from ..quant import tflite_reference as R

    return fx.where(small, R.I32_MAX, xv), fx.where(small, 0, fx.sub(0, shift))


def _q_l2_normalization(b: Builder, op: Operation) -> Value:
    """TFLite's reference_integer_ops::L2Normalization (int8): acc = Σ (x - zp)^2 per row (i32), the per-row
    inverse square root as a (multiplier, shift) pair from GetInvSqrtQuantizedMultiplierExp, then
    MultiplyByQuantizedMultiplier(x - zp, m, shift + 7) (RESCALE cannot take per-row multipliers: done with MUL
    shift 31 and rounding shifts) and a clamp to [-128, 127]; the output scale is fixed at 1/128, zero point 0."""
    x, res = op.operands[0], op.results[0]
    if x.dtype is not DType.INT8:
        raise Unsupported(f"quantized l2_normalization on {x.dtype.value} (TFLite: int8 only)")
    _, zp = per_tensor(x, "input")
    s_out, zp_out = per_tensor(res, "output")
    if zp_out != 0 or abs(s_out - 1.0 / 128) > 1e-9:
        raise Unsupported(f"l2_normalization output quantization ({s_out}, {zp_out}) is not TFLite's (1/128, 0)")
    if op.attrs.get("fused_activation_function") not in (None, "NONE"):
        raise Unsupported("quantized l2_normalization with a fused activation")
    from ..quant.elementwise import Fx  # (the integer arithmetic modules: loaded by a quantized rule only)

    rank = x.type.rank
    fx = Fx(b, rank)
    d = fx.sub(b.cast(x, DType.INT32), zp)
    acc = b.emit("REDUCE_SUM", [b.mul(d, d)], {"axis": rank - 1}).result
    m, sh = _inv_sqrt_multiplier(fx, acc)
    total = fx.add(sh, 7)
    left = b.binary("MAXIMUM", total, fx.c(0), nan_mode="PROPAGATE")
    right = b.binary("MAXIMUM", fx.sub(0, total), fx.c(0), nan_mode="PROPAGATE")
    v = fx.mulhi(b.binary("LOGICAL_LEFT_SHIFT", d, left), m)
    # RoundingDivideByPOT with a per-row exponent that may be 0 (Fx.rdbpot's x - 1 for x < 0 needs e > 0)
    v = fx.where(fx.gt(right, 0), fx.shr(fx.add(v, fx.shr(v, 31)), right, rnd=True), v)
    v = b.binary("MINIMUM", b.binary("MAXIMUM", v, fx.c(-128), nan_mode="PROPAGATE"), fx.c(127),
                 nan_mode="PROPAGATE")
    return b.emit("CAST", [v], out_dtype=DType.INT8, quant=res.type.quant).result


@legalize("tfl.local_response_normalization", arity=1)
def local_response_normalization(b: Builder, op: Operation) -> list[Value]:
    """x * (bias + alpha * sum_{|d| <= r} x[c+d]^2) ^ -beta over the channel (last) axis.

    The windowed channel sum is a CONV2D with a [1,1,2r+1,1] ones kernel on an [N*H*W,1,C,1] view (pad r
    each side); the power is POW (base >= bias > 0 as POW REQUIREs, spec 2.5.15 POW).  No lowering in the document.
    """
    (x,) = operands(op, None)
    dt = require_float(op, x)
    shape = static_shape(x)
    if len(shape) != 4:
        raise Unsupported(f"local_response_normalization of rank {len(shape)}")
    r = int(op.attrs.get("radius", 5))
    bias = float(op.attrs.get("bias", 1.0))
    alpha = float(op.attrs.get("alpha", 1.0))
    beta = float(op.attrs.get("beta", 0.5))
    if bias <= 0.0:
        raise Unsupported("local_response_normalization with bias <= 0 (POW needs a positive base, S5178)")
    n, h, w, c = shape
    sq = b.reshape(b.mul(x, x), [n * h * w, 1, c, 1])
    ones = b.const(np.ones([1, 1, 2 * r + 1, 1]), dt)
    # stride 1, pad r each side of a 2r+1 window: the output width is C exactly (spec 2.3.3 CONV2D)
    zp = float_zp(b, dt)
    ct = _ConvTypes(zp, zp, acc_type_for(dt), dt, dt, False)
    acc = _conv(b, sq, ones, b.const(np.zeros([1]), dt), ct, [0, 0, r, r], [1, 1], [1, 1])
    acc = b.reshape(acc, shape)
    base = b.binary("ADD", b.mul(acc, b.const(np.full([1, 1, 1, 1], alpha), dt)),
                    b.const(np.full([1, 1, 1, 1], bias), dt))
    scale = b.binary("POW", base, b.const(np.full([1, 1, 1, 1], -beta), dt))
    return [b.mul(x, scale)]


# ------------------------------------------------------------------------------------------------------ 3-D
def _conv3d_geometry(op: Operation) -> tuple[list[int], list[int]]:
    a = op.attrs
    stride = [int(a.get("stride_d", 1)), int(a.get("stride_h", 1)), int(a.get("stride_w", 1))]
    dil = [int(a.get("dilation_d_factor", 1)), int(a.get("dilation_h_factor", 1)), int(a.get("dilation_w_factor", 1))]
    if min(stride + dil) < 1:
        raise Unsupported(f"conv_3d stride {stride} / dilation {dil}")
    return stride, dil


def _conv3d_bias(b: Builder, op: Operation, k: int, oc: int, dt: DType) -> Value:
    if len(op.operands) > k and has_value(op.operands[k]):
        bias = op.operands[k]
        if bias.type.is_quantized or bias.dtype is not dt:
            raise Unsupported(f"bias of type {bias.type} with {dt.value} input")
        return b.reshape(bias, [int(np.prod(static_shape(bias)))])
    return b.const(np.zeros([oc]), dt, name="zero_bias")


def _conv3d_stride1(b: Builder, x: Value, w: Value, bias: Value, pads: list[int], stride: list[int], dil: list[int],
                    dt: DType) -> Value:
    """CONV3D (spec 2.3.4 CONV3D) after SLICEing away input planes that negative pads stand for."""
    shape = static_shape(x)
    start, size = [0] * 5, list(shape)
    for i in range(3):
        before, after = pads[2 * i], pads[2 * i + 1]
        if before < 0:
            start[1 + i] = -before
            size[1 + i] += before
        if after < 0:
            size[1 + i] += after
    x = b.slice(x, start, size)
    pads = [max(0, p) for p in pads]
    zp = float_zp(b, dt)
    return b.conv3d(x, w, bias, zp, zp, pad=pads, stride=stride, dilation=dil, acc_type=acc_type_for(dt))


@legalize("tfl.conv_3d", arity=2)
def conv_3d(b: Builder, op: Operation) -> list[Value]:
    """CONV3D with the filter TRANSPOSEd to TOSA's [OC,KD,KH,KW,IC] + fused activation (float).

    CONV3D with TFLite's [KD,KH,KW,IC,OC] filter TRANSPOSEd to TOSA's [OC,KD,KH,KW,IC] (spec 2.3.4 CONV3D); SAME/VALID
    pads
    trimmed so the exact output division holds (op_inventory §6.2); fused activation.  Float (TFLite's kernel is
    float only); no lowering in the document."""
    x, w = operands(op, 5, 5)
    dt = require_float(op, x, w)
    n, idp, ih, iw, c = static_shape(x)
    kd, kh, kw, ic, oc = static_shape(w)
    if ic != c:
        raise Unsupported(f"conv_3d filter channels {ic} vs input channels {c}")
    stride, dil = _conv3d_geometry(op)
    padding = op.attrs.get("padding", "VALID")
    pads: list[int] = []
    for size, k, s, d in ((idp, kd, stride[0], dil[0]), (ih, kh, stride[1], dil[1]), (iw, kw, stride[2], dil[2])):
        before, after = same_padding(size, k, s, d) if padding == "SAME" else (0, 0)
        if padding not in ("SAME", "VALID"):
            raise Unsupported(f"padding {padding!r}")
        span = size + before + after - ((k - 1) * d + 1)
        if span < 0:
            raise Unsupported(f"conv_3d window larger than the padded input ({size})")
        pads += [before, after - span % s]
    wt = b.transpose(w, [4, 0, 1, 2, 3])
    y = _conv3d_stride1(b, x, wt, _conv3d_bias(b, op, 2, oc, dt), pads, stride, dil, dt)
    return [fused_activation(b, y, op.attrs.get("fused_activation_function"))]


@legalize("tfl.conv_3d_transpose", arity=3)
def conv_3d_transpose(b: Builder, op: Operation) -> list[Value]:
    """Stride-1 CONV3D over the zero-dilated input with the filter flipped (TOSA has no TRANSPOSE_CONV3D).

    Transposed 3-D convolution (TOSA 1.0 has TRANSPOSE_CONV2D only) as a stride-1 CONV3D over the input with
    s-1 zeros inserted between samples, with the filter flipped in space and TRANSPOSEd [KD,KH,KW,OC,IC] →
    [OC,KD,KH,KW,IC] (folded for a constant filter): output o = Σ_i,k x[i]·f[k] at o = i·s - p + k·d equals a
    correlation of the dilated input padded by (K-1)·d - p in front.  p = TFLite's SAME pad (total // 2) or 0."""
    _, w, x = operands(op, 1, 5, 5)
    dt = require_float(op, x, w)
    n, idp, ih, iw, c = static_shape(x)
    kd, kh, kw, oc, ic = static_shape(w)
    if ic != c:
        raise Unsupported(f"conv_3d_transpose filter channels {ic} vs input channels {c}")
    out = [int(v) for v in np.asarray(const_operand(op, 0, "output_shape")).reshape(-1)]
    if len(out) != 5 or out[0] != n or out[4] != oc:
        raise Unsupported(f"conv_3d_transpose output_shape {out} inconsistent with its operands")
    stride, dil = _conv3d_geometry(op)
    padding = op.attrs.get("padding", "VALID")
    if padding not in ("SAME", "VALID"):
        raise Unsupported(f"padding {padding!r}")
    xd = x
    pads: list[int] = []
    for i, (size, k, s, d, o) in enumerate(zip((idp, ih, iw), (kd, kh, kw), stride, dil, out[1:4])):
        eff = (k - 1) * d + 1
        p = max(0, (size - 1) * s + eff - o) // 2 if padding == "SAME" else 0
        xd = dilate_axis(b, xd, 1 + i, s, 0.0)
        dsize = (size - 1) * s + 1
        before = eff - 1 - p
        pads += [before, o - dsize + eff - 1 - before]
    wt = reverse(b, b.transpose(w, [3, 0, 1, 2, 4]), [1, 2, 3])
    y = _conv3d_stride1(b, xd, wt, _conv3d_bias(b, op, 3, oc, dt), pads, [1, 1, 1], dil, dt)
    return [fused_activation(b, y, op.attrs.get("fused_activation_function"))]

