"""Lowerings the ``tf.*`` rules need, in the form both frontends can use (float paths).

A ``tf.*`` op with the same semantics as a ``tfl.*`` op runs that op's rule through
:func:`tf2tosa.legalizations.delegate.via`.  The lowerings the ``tfl.*`` rules wrote inline (convolution
geometry, transposed convolution, batch matmul through einsum, …) live here; the ``tfl.*`` rules can switch to
them (conv_2d → :func:`conv2d`, depthwise_conv_2d → :func:`depthwise_conv2d`, transpose_conv →
:func:`transpose_conv2d`, one_hot → :func:`one_hot`).

References: ``spec: X`` is section X of the TOSA 1.0 specification, ``lowering doc: op`` the op's heading
in the lowering document, op_inventory §x.  The shared geometry lives in :mod:`.conv` and :mod:`.padding`.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence

import numpy as np

from ...errors import Unsupported
from ...ir import DType, Operation, Value
from ...tosa.builder import Builder
from .conv import crop_output, grouped_conv2d, transpose_conv_out_pads
from .layout import prod, static_shape
from .legalize_common import acc_type_for, float_zp
from .numeric import fconst, float_divide, require_float, select
from .padding import apply_window_padding


# ---------------------------------------------------------------------------------------- layout helpers
def to_nhwc(b: Builder, x: Value) -> Value:
    """NCHW → NHWC (TOSA's activations are NHWC only)."""
    if x.type.rank != 4:
        raise Unsupported(f"NCHW tensor of rank {x.type.rank}")
    return b.transpose(x, [0, 2, 3, 1])


def to_nchw(b: Builder, x: Value) -> Value:
    """NHWC → NCHW."""
    return b.transpose(x, [0, 3, 1, 2])


def spatial(values: Sequence[int] | None, nchw: bool, default: int = 1) -> list[int]:
    """The H, W entries of a TF 4-vector attribute (strides, dilations, ksize) in NHWC or NCHW order."""
    if not values:
        return [default, default]
    v = [int(x) for x in values]
    if len(v) == 2:
        return v
    if len(v) != 4:
        raise Unsupported(f"expected a 4-element attribute, got {v}")
    if (v[0], v[1] if nchw else v[3]) != (1, 1):
        raise Unsupported(f"batch/channel entries of {v} must be 1")
    return [v[2], v[3]] if nchw else [v[1], v[2]]


def explicit_spatial(pads: Sequence[int], nchw: bool) -> list[int]:
    """[top, bottom, left, right] from TF's explicit_paddings (8 values: a pair per dim in data_format order)."""
    p = [int(x) for x in pads]
    if len(p) != 8:
        raise Unsupported(f"explicit_paddings {p} must have 8 values")
    h, w = (2, 3) if nchw else (1, 2)
    if any(p[2 * d] or p[2 * d + 1] for d in range(4) if d not in (h, w)):
        raise Unsupported(f"explicit_paddings {p} pad the batch or channel dimension")
    return [p[2 * h], p[2 * h + 1], p[2 * w], p[2 * w + 1]]


def through_transpose(b: Builder, x: Value, fn: Callable[[Value], Value]) -> Value:
    """``fn`` (an elementwise, layout-agnostic op) applied before the TRANSPOSE that produces ``x``, and the
    TRANSPOSE re-applied after it: an NCHW chain conv → (TRANSPOSE) → relu → (TRANSPOSE) → conv then has two
    adjacent inverse TRANSPOSEs, which the cleanup pass cancels."""
    t = x.producer
    if t is not None and t.name == "tosa.TRANSPOSE" and x not in b.graph.outputs and len(b.graph.uses(x)) == 1:
        return b.transpose(fn(t.operands[0]), list(t.attrs["perms"]))
    return fn(x)


# --------------------------------------------------------------------------------------------- convolution
def _conv_zp(b: Builder, op: Operation, x: Value, w: Value) -> tuple[Value, str]:
    dt = require_float(op, x, w)
    return float_zp(b, dt), acc_type_for(dt)


def _bias_or_zero(b: Builder, bias: Value | None, channels: int, dt: DType) -> Value:
    if bias is None:
        return b.const(np.zeros([channels]), dt, name="zero_bias")
    if bias.type.rank != 1:
        bias = b.reshape(bias, [prod(static_shape(bias))])
    return bias


def conv2d(b: Builder, op: Operation, x: Value, w: Value, bias: Value | None, pads: list[int], stride: Sequence[int],
           dilation: Sequence[int]) -> Value:
    """CONV2D of NHWC ``x`` with OHWI ``w`` (spec: CONV2D) and the pads of :func:`window_pads`.

    A filter with fewer input channels than ``x`` is a grouped convolution (C = groups · IC, OC split evenly):
    one DEPTHWISE_CONV2D when each group has one input channel, else one CONV2D per group, then CONCAT
    (:func:`.conv.grouped_conv2d`, shared with tfl.conv_2d).
    """
    zp, acc_type = _conv_zp(b, op, x, w)
    c = static_shape(x)[3]
    oc, kh, kw, ic = static_shape(w)
    bias = _bias_or_zero(b, bias, oc, x.dtype)
    x, pads = apply_window_padding(b, x, pads)
    stride, dilation = [int(s) for s in stride], [int(d) for d in dilation]
    if c == ic:
        return b.conv2d(x, w, bias, zp, zp, pad=pads, stride=stride, dilation=dilation, acc_type=acc_type)
    return grouped_conv2d(
        b, x, w, bias,
        lambda xg, wg, bg: b.conv2d(xg, wg, bg, zp, zp, pad=pads, stride=stride, dilation=dilation, acc_type=acc_type),
        lambda bias1: b.tile(bias1, [oc]), "convolution",
        lambda x1, w4, b1: b.depthwise_conv2d(x1, w4, b1, zp, zp, pad=pads, stride=stride, dilation=dilation,
                                              acc_type=acc_type))


def depthwise_conv2d(b: Builder, op: Operation, x: Value, w: Value, bias: Value | None, pads: list[int],
                     stride: Sequence[int], dilation: Sequence[int]) -> Value:
    """DEPTHWISE_CONV2D of NHWC ``x`` with a [KH, KW, C, M] filter (TF's HWCM is TOSA's layout)."""
    zp, acc_type = _conv_zp(b, op, x, w)
    c = static_shape(x)[3]
    kh, kw, wc, m = static_shape(w)
    if wc != c:
        raise Unsupported(f"depthwise filter channels {wc} vs input channels {c}")
    bias = _bias_or_zero(b, bias, c * m, x.dtype)
    x, pads = apply_window_padding(b, x, pads)
    return b.depthwise_conv2d(x, w, bias, zp, zp, pad=pads, stride=[int(s) for s in stride],
                              dilation=[int(d) for d in dilation], acc_type=acc_type)


def dilate_kernel(b: Builder, w: Value, dilation: Sequence[int]) -> Value:
    """An OHWI kernel with (d−1) zeros between taps, K' = (K−1)·d + 1: a dilated transposed convolution as an
    undilated one (TRANSPOSE_CONV2D has no dilation).  RESHAPE/PAD/SLICE, folded for constants."""
    for axis, d in ((1, int(dilation[0])), (2, int(dilation[1]))):
        if d == 1:
            continue
        shape = static_shape(w)
        k = shape[axis]
        inner = shape[:axis + 1] + [1] + shape[axis + 1:]
        y = b.reshape(w, inner)
        pads = [0] * (2 * len(inner))
        pads[2 * (axis + 1) + 1] = d - 1
        y = b.pad(y, pads, 0.0)
        flat = shape[:axis] + [k * d] + shape[axis + 1:]
        y = b.reshape(y, flat)
        size = list(flat)
        size[axis] = (k - 1) * d + 1
        w = b.slice(y, [0] * len(flat), size)
    return w


def transpose_conv2d(b: Builder, op: Operation, x: Value, w: Value, bias: Value | None, out_hw: Sequence[int],
                     pad_before: Sequence[int], stride: Sequence[int]) -> Value:
    """TRANSPOSE_CONV2D of NHWC ``x`` with OHWI ``w`` giving ``out_hw``, where the forward convolution padded
    ``pad_before`` = (top, left).

    TOSA writes input pixel iy to output rows iy·s + out_pad_top + ky (spec: TRANSPOSE_CONV2D), the forward convolution
    reads input rows iy·s − pad_top + ky: out_pad_top = −pad_top, and out_pad_bottom follows from
    OH = (IH−1)·s + out_pad_top + out_pad_bottom + KH.  Out-pads ≤ −K (ERROR_IF) are computed
    wider and SLICEd (op_inventory §6.2; :func:`.conv.transpose_conv_out_pads`, shared with
    tfl.transpose_conv).
    """
    zp, acc_type = _conv_zp(b, op, x, w)
    n, ih, iw, ic = static_shape(x)
    oc, kh, kw, wic = static_shape(w)
    if wic != ic:
        raise Unsupported(f"transposed convolution filter channels {wic} vs input channels {ic}")
    out_pad, crop = transpose_conv_out_pads(out_hw, [ih, iw], [kh, kw], stride, pad_before)
    bias = _bias_or_zero(b, bias, oc, x.dtype)
    y = b.transpose_conv2d(x, w, bias, zp, zp, out_pad=out_pad, stride=[int(s) for s in stride], acc_type=acc_type)
    return crop_output(b, y, crop)


_CONVS = {"tosa.CONV2D": 0, "tosa.DEPTHWISE_CONV2D": -1, "tosa.TRANSPOSE_CONV2D": 0}


def fold_into_conv(b: Builder, x: Value, c: Value, kind: str, channel_axis: int = -1) -> Value | None:
    """x ⊙ c folded into the convolution producing ``x`` (lowering doc: fuse_tf_bias, extended to scales).

    ``kind`` is ``"add"``, ``"sub"`` (x − c) or ``"mul"``.  Applies when ``x`` comes from a float CONV2D /
    DEPTHWISE_CONV2D / TRANSPOSE_CONV2D with constant weights and bias, is used only here and is not a graph
    output, and ``c`` is a constant per-output-channel vector (shape [..., OC] with leading 1s, or a scalar).  The
    conv's bias (and for ``mul`` its weights) are replaced by folded constants: add/sub change the bias, mul
    scales weights and bias per output channel (Conv → BiasAdd → BatchNorm as one op, like TFLite's converter).
    With ``channel_axis=1`` ``x`` is an NCHW value: the TRANSPOSE [0,3,1,2] of the convolution's NHWC result.
    Returns ``x`` (now computing the fused result) or None when the pattern does not apply.
    """
    rank = x.type.rank
    axis = channel_axis + rank if channel_axis < 0 else channel_axis
    y = x
    if axis != rank - 1:
        t = x.producer
        if (axis != 1 or rank != 4 or t is None or t.name != "tosa.TRANSPOSE" or list(t.attrs["perms"]) != [0, 3, 1, 2]
                or x in b.graph.outputs or len(b.graph.uses(x)) != 1):
            return None
        y = t.operands[0]
    conv = y.producer
    cv = c.const()
    if conv is None or conv.name not in _CONVS or cv is None or not x.dtype.is_float or c.dtype is not x.dtype:
        return None
    if y in b.graph.outputs or len(b.graph.uses(y)) != 1 or y.type.quant is not None:
        return None
    w, bias = conv.operands[1], conv.operands[2]
    wc, bc = w.const(), bias.const()
    if wc is None or bc is None:
        return None
    oc = int(y.shape[-1])
    arr = np.asarray(cv)
    if arr.size == oc and arr.ndim and arr.ndim <= rank:
        per_chan = arr.ndim == 1 or all(int(d) == 1 for i, d in enumerate(arr.shape) if i != arr.ndim - rank + axis)
    else:
        per_chan = arr.size == 1
    if arr.ndim > rank or not per_chan:
        return None
    vec = np.broadcast_to(arr.reshape(-1), (oc,)).astype(np.float64)
    bias64 = np.broadcast_to(np.asarray(bc, np.float64).reshape(-1), (oc,))
    dt = x.dtype.np_dtype()
    if kind in ("add", "sub"):
        new_bias = bias64 + vec if kind == "add" else bias64 - vec
        b.graph.set_operand(conv, 2, b.const(new_bias.astype(dt), x.dtype, name="fused_bias"))
        return x
    if kind != "mul":
        return None
    wf = np.asarray(wc, np.float64)
    if conv.name == "tosa.DEPTHWISE_CONV2D":
        kh, kw, ch, m = wf.shape
        new_w = wf * vec.reshape(1, 1, ch, m)
    else:
        new_w = wf * vec.reshape((-1,) + (1,) * (wf.ndim - 1))
    b.graph.set_operand(conv, 1, b.const(new_w.astype(dt), x.dtype, name="fused_weights"))
    b.graph.set_operand(conv, 2, b.const((bias64 * vec).astype(dt), x.dtype, name="fused_bias"))
    return x


def bias_add(b: Builder, x: Value, bias: Value, channel_axis: int) -> Value:
    """x + bias along ``channel_axis`` (the [C] bias RESHAPEd to equal rank; lowering doc:
    tf.BiasAdd, operands fixed)."""
    rank = x.type.rank
    shape = [1] * rank
    shape[channel_axis] = prod(static_shape(bias))
    fused = fold_into_conv(b, x, bias, "add", channel_axis)
    if fused is not None:
        return fused
    return b.binary("ADD", x, b.reshape(bias, shape))


def batch_norm(b: Builder, x: Value, scale: Value, offset: Value, mean: Value, variance: Value, epsilon: float,
               channel_axis: int) -> Value:
    """Inference batch normalization: y = x·s + (offset − mean·s) with s = scale·RSQRT(variance + ε).

    The document's FusedBatchNorm(V3) (lowering doc: tf.FusedBatchNorm, with MUL(%op1, %op3) for its MUL(%mean, %op3),
    §6.1) computes
    ((x − mean)·RSQRT(var + ε))·scale + offset; the per-channel factors fold to constants here, so only one MUL
    and one ADD run, in the order TF's own inference kernel uses.
    """
    rank = x.type.rank
    c = static_shape(x)[channel_axis]
    shape = [1] * rank
    shape[channel_axis] = c

    def chan(v: Value) -> Value:
        if prod(static_shape(v)) != c:
            raise Unsupported(f"batch-norm parameter of shape {list(v.shape)} for {c} channels")
        return b.reshape(v, shape)

    eps = b.const(np.full(shape, epsilon), x.dtype)
    s = b.mul(chan(scale), b.rsqrt(b.binary("ADD", chan(variance), eps)))
    shift = b.binary("SUB", chan(offset), b.mul(chan(mean), s))
    if fold_into_conv(b, x, s, "mul", channel_axis) is not None:
        return fold_into_conv(b, x, shift, "add", channel_axis) or b.binary("ADD", x, shift)
    return b.binary("ADD", b.mul(x, s), shift)


# --------------------------------------------------------------------------------------------------- einsum
def _parse_einsum(equation: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """Operand subscripts and the output with ``...`` expanded into fresh letters (right-aligned broadcast)."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(ranks):
        raise Unsupported(f"einsum {equation!r} names {len(specs)} operands, got {len(ranks)}")
    used = set(eq) - {".", ",", "-", ">"}
    fresh = [c for c in string.ascii_letters + "0123456789" if c not in used]
    n_ell = max((r - (len(s) - 3) for s, r in zip(specs, ranks) if "..." in s), default=0)
    ell = "".join(fresh[:n_ell])
    expanded = []
    for s, r in zip(specs, ranks):
        if "..." in s:
            k = r - (len(s) - 3)
            s = s.replace("...", ell[n_ell - k:] if k else "")
        if len(s) != r or not all(c.isalpha() or c.isdigit() for c in s):
            raise Unsupported(f"einsum subscripts {s!r} for an operand of rank {r}")
        if len(set(s)) != len(s):
            raise Unsupported(f"einsum with a repeated subscript in {s!r} (diagonals)")
        expanded.append(s)
    if not arrow:
        counts: dict[str, int] = {}
        for s in expanded:
            for ch in s:
                counts[ch] = counts.get(ch, 0) + 1
        out = ell + "".join(sorted(ch for ch, n in counts.items() if n == 1 and ch not in ell))
    else:
        out = out.replace("...", ell)
    return expanded, out


def _sum_out(b: Builder, x: Value, spec: str, keep: set[str]) -> tuple[Value, str]:
    """REDUCE_SUM the subscripts of ``spec`` not in ``keep``."""
    drop = [i for i, ch in enumerate(spec) if ch not in keep]
    if not drop:
        return x, spec
    shape = static_shape(x)
    for a in drop:
        x = b.emit("REDUCE_SUM", [x], {"axis": a}).result
    rest = [i for i in range(len(spec)) if i not in drop]
    return b.reshape(x, [shape[i] for i in rest]), "".join(spec[i] for i in rest)


def _contract(b: Builder, x: Value, xs: str, y: Value, ys: str, out: str) -> tuple[Value, str]:
    """One pairwise einsum step as a rank-3 MATMUL (spec: MATMUL): [B, M, K] × [B, K, N]."""
    sx, sy = dict(zip(xs, static_shape(x))), dict(zip(ys, static_shape(y)))
    batch = [c for c in out if c in sx and c in sy]
    contract = [c for c in xs if c in sy and c not in out]
    free_x = [c for c in xs if c not in sy]
    free_y = [c for c in ys if c not in sx]
    for c in contract:
        if sx[c] != sy[c]:
            raise Unsupported(f"einsum contracted dimension {c} has sizes {sx[c]} and {sy[c]}")
    bsz = []
    for c in batch:
        if sx[c] != sy[c] and 1 not in (sx[c], sy[c]):
            raise Unsupported(f"einsum batch dimension {c} has sizes {sx[c]} and {sy[c]}")
        bsz.append(max(sx[c], sy[c]))
    dt = x.dtype
    xt = b.transpose(x, [xs.index(c) for c in batch + free_x + contract])
    yt = b.transpose(y, [ys.index(c) for c in batch + contract + free_y])
    nb = len(batch)
    xt = b.tile(xt, [bsz[i] // sx[c] for i, c in enumerate(batch)] + [1] * (len(xs) - nb))
    yt = b.tile(yt, [bsz[i] // sy[c] for i, c in enumerate(batch)] + [1] * (len(ys) - nb))
    m = prod([sx[c] for c in free_x])
    k = prod([sx[c] for c in contract])
    n = prod([sy[c] for c in free_y])
    zp = float_zp(b, dt)
    z = b.matmul(b.reshape(xt, [prod(bsz), m, k]), b.reshape(yt, [prod(bsz), k, n]), zp, zp)
    zs = "".join(batch + free_x + free_y)
    return b.reshape(z, bsz + [sx[c] for c in free_x] + [sy[c] for c in free_y]), zs


def einsum(b: Builder, op: Operation, equation: str, xs: Sequence[Value]) -> Value:
    """tf.Einsum (not in the lowering doc): subscripts summed away early, each pair of operands contracted by one
    MATMUL on [batch, free, contracted] views, the result TRANSPOSEd to the output order.  Ellipses broadcast;
    repeated subscripts inside one operand (diagonals) are unsupported."""
    if not xs:
        raise Unsupported("einsum without operands")
    require_float(op, *xs)
    specs, out = _parse_einsum(equation, [v.type.rank for v in xs])
    vals = list(xs)
    # letters still needed after operand i: by the output or a later operand
    acc, acc_s = vals[0], specs[0]
    need = set(out).union(*[set(s) for s in specs[1:]]) if len(specs) > 1 else set(out)
    acc, acc_s = _sum_out(b, acc, acc_s, need)
    for i in range(1, len(vals)):
        later = set(out).union(*[set(s) for s in specs[i + 1:]])
        y, ys = _sum_out(b, vals[i], specs[i], later | set(acc_s))
        acc, acc_s = _sum_out(b, acc, acc_s, later | set(ys))
        acc, acc_s = _contract(b, acc, acc_s, y, ys, "".join(c for c in out if c in acc_s or c in ys)
                               + "".join(sorted((set(acc_s) | set(ys)) & (later - set(out)))))
    acc, acc_s = _sum_out(b, acc, acc_s, set(out))
    if set(acc_s) != set(out):
        raise Unsupported(f"einsum output {out!r} names subscripts that no operand has")
    return b.transpose(acc, [acc_s.index(c) for c in out])


# -------------------------------------------------------------------------------------------- elementwise
def log1p(b: Builder, x: Value) -> Value:
    """log(1 + x) without the cancellation of LOG(1 + x) near 0: u = 1 + x; u == 1 ? x : LOG(u)·x / (u − 1)
    (the rounding error of u cancels in the ratio)."""
    one = fconst(b, 1.0, x)
    u = b.binary("ADD", one, x)
    um1 = b.binary("SUB", u, one)
    exact = b.binary("EQUAL", u, one)
    ratio = float_divide(b, b.mul(b.log(u), x), um1)
    # u == inf (x == inf): LOG(u)·x/(u−1) is inf·inf/inf = NaN; log1p(inf) = inf
    big = b.binary("EQUAL", u, fconst(b, float("inf"), x))
    return select(b, exact, x, select(b, big, u, ratio))


def softplus(b: Builder, x: Value) -> Value:
    """log(1 + exp(x)) = MAXIMUM(x, 0) + log1p(EXP(−|x|)): no overflow for large x, no underflow to 0 for very
    negative x (the lowering doc has no lowering for it)."""
    zero = fconst(b, 0.0, x)
    neg_abs = b.negate(b.abs(x), float_zp(b, x.dtype), float_zp(b, x.dtype))
    return b.binary("ADD", b.binary("MAXIMUM", x, zero, nan_mode="PROPAGATE"), log1p(b, b.exp(neg_abs)))


def one_hot(b: Builder, indices: Value, depth: int, on: Value, off: Value, axis: int) -> Value:
    """on where indices == k at position k of a new ``axis`` (size ``depth``), off elsewhere: EQUAL against an
    iota constant, then SELECT.  Out-of-range and negative indices give an all-``off`` row, as TF/TFLite do;
    the document's SCATTER form (lowering doc: tfl.one_hot) REQUIREs in-range indices (spec: SCATTER)."""
    shape = static_shape(indices)
    rank = len(shape) + 1
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise Unsupported(f"one_hot axis {axis} for rank {rank}")
    if depth < 1:
        raise Unsupported(f"one_hot depth {depth}")
    idx = indices
    if idx.dtype in (DType.INT8, DType.INT16):
        idx = b.cast(idx, DType.INT32)
    if idx.dtype is not DType.INT32:
        raise Unsupported(f"one_hot indices of type {idx.dtype}")
    new = shape[:axis] + [1] + shape[axis:]
    iota_shape = [1] * rank
    iota_shape[axis] = depth
    iota = b.const(np.arange(depth, dtype=np.int32).reshape(iota_shape), DType.INT32)
    hit = b.binary("EQUAL", b.reshape(idx, new), iota)
    out_shape = list(new)
    out_shape[axis] = depth
    on_r = b.reshape(on, [1] * rank)
    off_r = b.reshape(off, [1] * rank)
    y = select(b, hit, on_r, off_r)
    if list(y.shape) != out_shape:
        y = b.tile(y, [o // d for o, d in zip(out_shape, static_shape(y))])
    return y


def broadcast_to(b: Builder, x: Value, shape: Sequence[int]) -> Value:
    """RESHAPE to the target rank (leading 1s), then TILE the size-1 dims (numpy broadcasting)."""
    target = [int(d) for d in shape]
    xs = static_shape(x)
    if len(xs) > len(target):
        raise Unsupported(f"cannot broadcast shape {xs} to {target}")
    full = [1] * (len(target) - len(xs)) + xs
    for d, t in zip(full, target):
        if d != t and d != 1:
            raise Unsupported(f"cannot broadcast shape {xs} to {target}")
    y = b.reshape(x, full) if full != xs else x
    if not target:
        return y
    return b.tile(y, [t // d for d, t in zip(full, target)])


# ------------------------------------------------------------------------------------------ fake quantization
def fake_quant_params(lo: float, hi: float, num_bits: int, narrow_range: bool) -> tuple[float, float, float]:
    """TF's nudged (min, max, scale) of FakeQuantWithMinMax* (fake_quant_ops_functor.h; outside the seeds): the
    zero point is rounded to an integer in [qmin, qmax] and min/max moved so that 0.0 is exactly representable
    (lowering doc: lower_fake_quant_op does no nudging, op_inventory §1.2 #52)."""
    f32 = np.float32
    qmin = 1 if narrow_range else 0
    qmax = (1 << num_bits) - 1
    lo32, hi32 = f32(lo), f32(hi)
    scale = (hi32 - lo32) / f32(qmax - qmin)
    zp_from_min = f32(qmin) - lo32 / scale
    if zp_from_min < qmin:
        zp = f32(qmin)
    elif zp_from_min > qmax:
        zp = f32(qmax)
    else:
        fl = np.floor(zp_from_min)  # std::round (half away from zero) of a value >= 0
        zp = f32(fl + 1 if zp_from_min - fl >= f32(0.5) else fl)
    nmin = (f32(qmin) - zp) * scale
    nmax = (f32(qmax) - zp) * scale
    return float(nmin), float(nmax), float(scale)


def fake_quant(b: Builder, x: Value, nmin: np.ndarray, nmax: np.ndarray, scale: np.ndarray) -> Value:
    """y = FLOOR((CLAMP(x, nmin, nmax) − nmin)·(1/scale) − qz + ½)·scale with qz = floor(−nmin/scale + ½), in
    fp32 and in the operation order of TF's kernel (fake_quant_ops_functor.h; outside the seeds), so the result is
    bit-exact with it; ``nmin``/``nmax``/``scale`` are per-tensor scalars or per-channel vectors (last axis)."""
    rank = max(x.type.rank, 1)
    shape = [1] * rank
    shape[-1] = int(np.asarray(nmin).size)

    def k(v: np.ndarray) -> Value:
        return b.const(np.asarray(v, np.float32).reshape(shape), DType.FP32)

    lo, hi, sc = (np.asarray(v, np.float32).reshape(-1) for v in (nmin, nmax, scale))
    inv = np.float32(1.0) / sc
    qz = np.floor(-lo * inv + np.float32(0.5))
    clamped = b.binary("MAXIMUM", b.binary("MINIMUM", x, k(hi), nan_mode="PROPAGATE"), k(lo), nan_mode="PROPAGATE")
    t = b.binary("SUB", b.mul(b.binary("SUB", clamped, k(lo)), k(inv)), k(qz))
    q = b.floor(b.binary("ADD", t, k(np.full_like(sc, 0.5))))
    return b.mul(q, k(sc))


def fake_quant_array(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, num_bits: int = 8,
                     narrow_range: bool = False) -> np.ndarray:
    """TF's FakeQuantWithMinMax* kernel on a host array (the numpy twin of :func:`fake_quant`, same fp32 operation
    order): what TF's constant folding makes of a fake-quantized weight.  ``lo``/``hi`` are scalars or per-channel
    vectors along the last axis; a channel with min = max = 0 gives zeros, as in TF's kernel."""
    f32 = np.float32
    xs = np.asarray(x, f32)
    lo_v, hi_v = np.asarray(lo, f32).reshape(-1), np.asarray(hi, f32).reshape(-1)
    out = np.zeros(xs.shape, f32)
    n = lo_v.size
    for c in range(n):
        sel = (..., c) if n > 1 else (...,)
        if lo_v[c] == 0 and hi_v[c] == 0:
            continue
        nmin, nmax, sc = (f32(v) for v in fake_quant_params(float(lo_v[c]), float(hi_v[c]), num_bits, narrow_range))
        inv = f32(1.0) / sc
        qz = np.floor(-nmin * inv + f32(0.5))
        clamped = np.maximum(np.minimum(xs[sel], nmax), nmin)
        q = np.floor((clamped - nmin) * inv - qz + f32(0.5))
        out[sel] = q * sc
    return out


__all__ = ["batch_norm", "bias_add", "broadcast_to", "conv2d", "depthwise_conv2d", "dilate_kernel", "einsum",
           "explicit_spatial", "fake_quant", "fake_quant_array", "fake_quant_params", "fold_into_conv", "log1p",
           "one_hot", "softplus", "spatial", "through_transpose", "to_nchw", "to_nhwc", "transpose_conv2d"]
