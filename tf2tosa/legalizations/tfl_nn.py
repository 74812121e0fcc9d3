"""Float rules for TFLite's neural-network ops: convolutions, fully connected, batch matmul, pools.

Lowering document sections: tfl.conv_2d L3082, tfl.depthwise_conv_2d L3157, tfl.fully_connected L3364,
tfl.transpose_conv L4415, tfl.average_pool_2d L2991, tfl.max_pool_2d L3694 (pre-1.0 TOSA; translated per
op_inventory §4 #3, #14, #21-23, #28).  Quantized inputs raise Unsupported (the integer path is separate).
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from .common import (
    acc_type_for,
    apply_window_padding,
    const_operand,
    float_zp,
    fused_activation,
    has_value,
    same_padding,
    window_padding,
)
from .nn_helpers import broadcast_shape, require_float, static_shape
from .registry import legalize


def _bias(b: Builder, op: Operation, k: int, channels: int, dt: DType) -> Value:
    """Operand ``k`` when present, else a zero bias of ``channels`` elements (L3384 with shape[0] fixed)."""
    if len(op.operands) > k and has_value(op.operands[k]):
        bias = op.operands[k]
        if bias.type.is_quantized or bias.dtype is not dt:
            raise Unsupported(f"bias of type {bias.type} with {dt.value} input")
        if bias.type.rank != 1:
            bias = b.reshape(bias, [int(np.prod(static_shape(bias)))])
        return bias
    return b.const(np.zeros([channels]), dt, name="zero_bias")


def _stride_dilation(op: Operation) -> tuple[list[int], list[int]]:
    a = op.attrs
    stride = [int(a.get("stride_h", 1)), int(a.get("stride_w", 1))]
    dil = [int(a.get("dilation_h_factor", 1)), int(a.get("dilation_w_factor", 1))]
    return stride, dil


def _conv(b: Builder, x: Value, w: Value, bias: Value, dt: DType, pads: list[int], stride: list[int],
          dil: list[int]) -> Value:
    return b.conv2d(x, w, bias, float_zp(b, dt), float_zp(b, dt), pad=pads, stride=stride, dilation=dil,
                    acc_type=acc_type_for(dt))


@legalize("tfl.conv_2d")
def conv_2d(b: Builder, op: Operation) -> list[Value]:
    """CONV2D (OHWI weights as in TOSA, S1414) + fused activation; grouped convs become a CONCAT of groups."""
    x, w = op.operands[0], op.operands[1]
    dt = require_float(op, x, w)
    _, ih, iw, c = static_shape(x)
    oc, kh, kw, ic = static_shape(w)
    stride, dil = _stride_dilation(op)
    bias = _bias(b, op, 2, oc, dt)
    pads = window_padding(op.attrs.get("padding", "VALID"), [ih, iw], [kh, kw], stride, dil)
    x, pads = apply_window_padding(b, x, pads)
    n, h2, w2, _ = static_shape(x)
    if c == ic:
        y = _conv(b, x, w, bias, dt, pads, stride, dil)
    else:
        # TFLite grouped convolution: filter IC = C / groups, OC split evenly between groups
        if c % ic or oc % (c // ic):
            raise Unsupported(f"conv_2d input channels {c} vs filter channels {ic}")
        groups = c // ic
        ocg = oc // groups
        if bias.shape[0] == 1:
            bias = b.const(np.zeros([oc]), dt, name="zero_bias")
        parts = []
        for g in range(groups):
            xg = b.slice(x, [0, 0, 0, g * ic], [n, h2, w2, ic])
            wg = b.slice(w, [g * ocg, 0, 0, 0], [ocg, kh, kw, ic])
            bg = b.slice(bias, [g * ocg], [ocg])
            parts.append(_conv(b, xg, wg, bg, dt, pads, stride, dil))
        y = b.concat(parts, 3)
    return [fused_activation(b, y, op.attrs.get("fused_activation_function"))]


@legalize("tfl.depthwise_conv_2d")
def depthwise_conv_2d(b: Builder, op: Operation) -> list[Value]:
    """DEPTHWISE_CONV2D; TFLite's [1,KH,KW,C*M] filter is reshaped to TOSA's [KH,KW,C,M] (S2067, §6.1)."""
    x, w = op.operands[0], op.operands[1]
    dt = require_float(op, x, w)
    _, ih, iw, c = static_shape(x)
    one, kh, kw, cm = static_shape(w)
    if one != 1 or cm % c:
        raise Unsupported(f"depthwise filter shape {[one, kh, kw, cm]} for {c} input channels")
    m = cm // c
    stride, dil = _stride_dilation(op)
    bias = _bias(b, op, 2, cm, dt)
    pads = window_padding(op.attrs.get("padding", "VALID"), [ih, iw], [kh, kw], stride, dil)
    x, pads = apply_window_padding(b, x, pads)
    # output channel c*M + m of TFLite is [.., c, m] of TOSA: a plain row-major reshape
    w4 = b.reshape(w, [kh, kw, c, m])
    y = b.depthwise_conv2d(x, w4, bias, float_zp(b, dt), float_zp(b, dt), pad=pads, stride=stride,
                           dilation=dil, acc_type=acc_type_for(dt))
    return [fused_activation(b, y, op.attrs.get("fused_activation_function"))]


@legalize("tfl.transpose_conv")
def transpose_conv(b: Builder, op: Operation) -> list[Value]:
    """TRANSPOSE_CONV2D with out_pad from the declared output shape (op_inventory §4 #23, §6.2).

    TFLite places input pixel iy at output rows iy*s - pad + ky (pad from SAME/VALID on the *output* size);
    TOSA places it at iy*s + out_pad_top + ky (S3266-3277), so out_pad_top = -pad and out_pad_bottom follows
    from OH = (IH-1)*s + out_pad_top + out_pad_bottom + KH (S3262).  The document's helper (L969-999) pushes
    only pad_before, uses +1 for +i, and clamps at 0: not copied.  Out-pads <= -K (ERROR_IF, S3259) are
    computed wider and SLICEd.
    """
    w, x = op.operands[1], op.operands[2]
    dt = require_float(op, x, w)
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
    out_pad: list[int] = []
    crop: list[int] = []  # rows/cols to slice off [top, bottom, left, right]
    for size, insize, k, s in ((oh, ih, kh, sh), (ow, iw, kw, sw)):
        before = same_padding(size, k, s)[0] if padding == "SAME" else 0
        top = -before
        bottom = size - (insize - 1) * s - k - top
        for p in (top, bottom):
            lim = 1 - k
            out_pad.append(max(p, lim))
            crop.append(max(p, lim) - p)
    bias = _bias(b, op, 3, oc, dt)
    y = b.transpose_conv2d(x, w, bias, float_zp(b, dt), float_zp(b, dt), out_pad=out_pad, stride=[sh, sw],
                           acc_type=acc_type_for(dt))
    if any(crop):
        full = static_shape(y)
        y = b.slice(y, [0, crop[0], crop[2], 0], [n, full[1] - crop[0] - crop[1], full[2] - crop[2] - crop[3], oc])
    return [fused_activation(b, y, op.attrs.get("fused_activation_function"))]


@legalize("tfl.fully_connected")
def fully_connected(b: Builder, op: Operation) -> list[Value]:
    """1x1 CONV2D (1.0 has no FULLY_CONNECTED, §4 #14): input [N,1,1,IC], weights [OC,1,1,IC], bias [OC]."""
    x, w = op.operands[0], op.operands[1]
    dt = require_float(op, x, w)
    if op.attrs.get("weights_format", "DEFAULT") != "DEFAULT":
        raise Unsupported(f"fully_connected weights_format {op.attrs['weights_format']}")
    xs = static_shape(x)
    ws = static_shape(w)
    if len(ws) != 2:
        raise Unsupported(f"fully_connected weights of rank {len(ws)}")
    oc, ic = ws
    total = int(np.prod(xs)) if xs else 1
    if total % ic:
        raise Unsupported(f"fully_connected input {xs} not divisible into rows of {ic}")
    n = total // ic
    bias = _bias(b, op, 2, oc, dt)
    x4 = b.reshape(x, [n, 1, 1, ic])
    w4 = b.reshape(w, [oc, 1, 1, ic])
    y = _conv(b, x4, w4, bias, dt, [0, 0, 0, 0], [1, 1], [1, 1])
    y = fused_activation(b, y, op.attrs.get("fused_activation_function"))
    if op.attrs.get("keep_num_dims") and xs:
        out = xs[:-1] + [oc]
    else:
        out = [n, oc]
    return [b.reshape(y, out)]


@legalize("tfl.batch_matmul")
def batch_matmul(b: Builder, op: Operation) -> list[Value]:
    """MATMUL on rank-3 views (§4 #28): batch dims broadcast (TILE) and flattened; adj_x/adj_y by TRANSPOSE."""
    x, y = op.operands[0], op.operands[1]
    dt = require_float(op, x, y)
    xs, ys = static_shape(x), static_shape(y)
    if len(xs) < 2 or len(ys) < 2:
        raise Unsupported("batch_matmul operands must have rank >= 2")
    adj_x, adj_y = bool(op.attrs.get("adj_x")), bool(op.attrs.get("adj_y"))
    m, k = (xs[-1], xs[-2]) if adj_x else (xs[-2], xs[-1])
    k2, nn = (ys[-1], ys[-2]) if adj_y else (ys[-2], ys[-1])
    if k != k2:
        raise Unsupported(f"batch_matmul inner dims {k} and {k2} differ")
    batch = broadcast_shape(xs[:-2], ys[:-2])
    nb = int(np.prod(batch)) if batch else 1
    bx = int(np.prod(xs[:-2])) if len(xs) > 2 else 1
    by = int(np.prod(ys[:-2])) if len(ys) > 2 else 1
    zp = float_zp(b, dt)
    if by == 1 and bx == nb:
        # a shared right operand (the usual constant weight): fold the batch into the rows, no TILE
        if adj_x:
            x = b.transpose(b.reshape(x, [nb, k, m]), [0, 2, 1])
        x3 = b.reshape(x, [1, nb * m, k])
        y3 = b.reshape(y, [1, ys[-2], ys[-1]])
        if adj_y:
            y3 = b.transpose(y3, [0, 2, 1])
        out = b.matmul(x3, y3, zp, zp)
        return [b.reshape(out, batch + [m, nn])]
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
    out = b.matmul(x3, y3, zp, zp)
    return [b.reshape(out, batch + [m, nn])]


def _pool_geometry(op: Operation, x: Value) -> tuple[list[int], list[int], list[int]]:
    a = op.attrs
    _, ih, iw, _ = static_shape(x)
    kernel = [int(a["filter_height"]), int(a["filter_width"])]
    stride = [int(a.get("stride_h", 1)), int(a.get("stride_w", 1))]
    pads = window_padding(a.get("padding", "VALID"), [ih, iw], kernel, stride)
    return kernel, stride, pads


@legalize("tfl.average_pool_2d")
def average_pool_2d(b: Builder, op: Operation) -> list[Value]:
    """AVG_POOL2D (S1324-1374): the count excludes padding, as TFLite's does; SAME pads are < kernel."""
    x = op.operands[0]
    dt = require_float(op, x)
    kernel, stride, pads = _pool_geometry(op, x)
    x, pads = apply_window_padding(b, x, pads)
    if pads[0] >= kernel[0] or pads[1] >= kernel[0] or pads[2] >= kernel[1] or pads[3] >= kernel[1]:
        raise Unsupported(f"pool padding {pads} not smaller than kernel {kernel} (S1341-1342)")
    y = b.avg_pool2d(x, float_zp(b, dt), float_zp(b, dt), kernel=kernel, stride=stride, pad=pads,
                     acc_type=acc_type_for(dt))
    return [fused_activation(b, y, op.attrs.get("fused_activation_function"))]


@legalize("tfl.max_pool_2d")
def max_pool_2d(b: Builder, op: Operation) -> list[Value]:
    """MAX_POOL2D (no zero points in 1.0, S2709-2781; nan_mode PROPAGATE)."""
    x = op.operands[0]
    require_float(op, x)
    kernel, stride, pads = _pool_geometry(op, x)
    x, pads = apply_window_padding(b, x, pads)
    if pads[0] >= kernel[0] or pads[1] >= kernel[0] or pads[2] >= kernel[1] or pads[3] >= kernel[1]:
        raise Unsupported(f"pool padding {pads} not smaller than kernel {kernel} (S2844-2845)")
    y = b.max_pool2d(x, kernel=kernel, stride=stride, pad=pads, nan_mode="PROPAGATE")
    return [fused_activation(b, y, op.attrs.get("fused_activation_function"))]


@legalize("tfl.l2_pool_2d")
def l2_pool_2d(b: Builder, op: Operation) -> list[Value]:
    """sqrt(mean of x^2 over the window), count excluding padding like TFLite: AVG_POOL2D(x*x) then
    RECIPROCAL(RSQRT(.)) (exact 0 at 0; no lowering in the document)."""
    x = op.operands[0]
    dt = require_float(op, x)
    kernel, stride, pads = _pool_geometry(op, x)
    sq = b.mul(x, x)
    sq, pads = apply_window_padding(b, sq, pads)
    avg = b.avg_pool2d(sq, float_zp(b, dt), float_zp(b, dt), kernel=kernel, stride=stride, pad=pads,
                       acc_type=acc_type_for(dt))
    y = b.reciprocal(b.rsqrt(avg))
    return [fused_activation(b, y, op.attrs.get("fused_activation_function"))]


@legalize("tfl.l2_normalization")
def l2_normalization(b: Builder, op: Operation) -> list[Value]:
    """x / max(sqrt(sum(x^2, last axis)), 1e-6) as x * MINIMUM(RSQRT(sum), 1e6) (TFLite's epsilon; no lowering
    in the document, L3511).  RSQRT(0) = inf, so an all-zero row gives 0 like TFLite."""
    x = op.operands[0]
    require_float(op, x)
    if x.type.rank == 0:
        raise Unsupported("l2_normalization of a rank-0 tensor")
    axis = x.type.rank - 1
    s = b.emit("REDUCE_SUM", [b.mul(x, x)], {"axis": axis}).result
    big = b.const(np.full((1,) * x.type.rank, 1e6), x.dtype)
    inv = b.binary("MINIMUM", b.rsqrt(s), big, nan_mode="PROPAGATE")
    y = b.mul(x, inv)
    return [fused_activation(b, y, op.attrs.get("fused_activation_function"))]


@legalize("tfl.local_response_normalization")
def local_response_normalization(b: Builder, op: Operation) -> list[Value]:
    """x * (bias + alpha * sum_{|d| <= r} x[c+d]^2) ^ -beta over the channel (last) axis.

    The windowed channel sum is a CONV2D with a [1,1,2r+1,1] ones kernel on an [N*H*W,1,C,1] view (pad r
    each side); the power is POW (base >= bias > 0 as POW REQUIREs, S5178).  No lowering in the document.
    """
    x = op.operands[0]
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
    # stride 1, pad r each side of a 2r+1 window: the output width is C exactly (S1668-1669)
    acc = _conv(b, sq, ones, b.const(np.zeros([1]), dt), dt, [0, 0, r, r], [1, 1], [1, 1])
    acc = b.reshape(acc, shape)
    base = b.binary("ADD", b.mul(acc, b.const(np.full([1, 1, 1, 1], alpha), dt)),
                    b.const(np.full([1, 1, 1, 1], bias), dt))
    scale = b.binary("POW", base, b.const(np.full([1, 1, 1, 1], -beta), dt))
    return [b.mul(x, scale)]
