"""Rules for TensorFlow's neural-network ops (``tf.*``, float): convolutions, bias, batch norm, pools, matrix
products, softmax and activations, fake quantization.

Lowering document sections: tf.Conv2D, tf.DepthwiseConv2dNative, tf.Conv2DBackpropInput,
tf.BiasAdd, tf.FusedBatchNorm / tf.FusedBatchNormV3, tf.AvgPool, tf.MaxPool, tf.MatMul,
tf.Softmax, tf.LogSoftmax, tf.Relu, tf.Relu6, tf.Elu, tf.LeakyRelu,
tf.FakeQuantWithMinMaxArgs / tf.FakeQuantWithMinMaxVars (pre-1.0 TOSA; translated per op_inventory §4, §6.1, §6.2).

TF layouts (op_inventory §6.2): Conv2D filters are HWIO (→ OHWI by TRANSPOSE [3,0,1,2]), depthwise filters HWCM
(= TOSA's [KH,KW,C,M]), Conv2DBackpropInput filters [H,W,C_out_t,C_in_t] (→ OHWI by [2,0,1,3]).  NCHW
activations are TRANSPOSEd to NHWC and back (the pass that cancels transpose pairs removes them between
consecutive NCHW ops).  Ops whose TF semantics equal a TFLite op's run that op's rule (:func:`delegate.via`).
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from . import delegate
from .lowering import tf_ops
from .lowering.layout import const_ints, static_shape
from .lowering.legalize_common import const_operand
from .lowering.numeric import expm1, fconst, float_divide, require_float, select
from .lowering.padding import same_padding, window_pads
from .registry import legalize


def _nchw(op: Operation) -> bool:
    fmt = op.attrs.get("data_format") or "NHWC"
    if fmt in ("NHWC", "NDHWC", "N..C"):
        return False
    if fmt in ("NCHW", "NC.."):
        return True
    raise Unsupported(f"data_format {fmt}")


def _padding(op: Operation, nchw: bool) -> tuple[str, list[int] | None]:
    padding = str(op.attrs.get("padding", "VALID"))
    if padding == "EXPLICIT":
        return padding, tf_ops.explicit_spatial(op.attrs.get("explicit_paddings") or [], nchw)
    return padding, None


def _in(b: Builder, x: Value, nchw: bool) -> Value:
    return tf_ops.to_nhwc(b, x) if nchw else x


def _out(b: Builder, y: Value, nchw: bool) -> Value:
    return tf_ops.to_nchw(b, y) if nchw else y


# -------------------------------------------------------------------------------------------- convolutions
@legalize("tf.Conv2D")
def conv2d(b: Builder, op: Operation) -> list[Value]:
    """CONV2D, HWIO filter TRANSPOSEd to OHWI; SAME/VALID/EXPLICIT, dilations, groups, NCHW.

    CONV2D with the HWIO filter TRANSPOSEd to OHWI (perms [3,0,1,2], lowering doc: tf.Conv2D), zero bias,
    SAME/VALID/EXPLICIT
    pads (trimmed for TOSA's exact division), dilations, groups; NCHW through TRANSPOSEs (lowering doc: tf.Conv2D is
    NHWC-only)."""
    x, f = op.operands[0], op.operands[1]
    nchw = _nchw(op)
    stride = tf_ops.spatial(op.attrs.get("strides"), nchw)
    dil = tf_ops.spatial(op.attrs.get("dilations"), nchw)
    x = _in(b, x, nchw)
    kh, kw, _, _ = static_shape(f)
    padding, explicit = _padding(op, nchw)
    _, h, w, _ = static_shape(x)
    pads = window_pads(padding, [h, w], [kh, kw], stride, dil, explicit)
    y = tf_ops.conv2d(b, op, x, b.transpose(f, [3, 0, 1, 2]), None, pads, stride, dil)
    return [_out(b, y, nchw)]


@legalize("tf.DepthwiseConv2dNative")
def depthwise_conv2d_native(b: Builder, op: Operation) -> list[Value]:
    """DEPTHWISE_CONV2D with TF's HWCM filter as is; SAME/VALID/EXPLICIT, dilations, NCHW.

    DEPTHWISE_CONV2D; TF's [KH,KW,C,M] filter is TOSA's layout (spec 2.3.5 DEPTHWISE_CONV2D), the zero bias has C·M
    elements (lowering doc: tf.DepthwiseConv2dNative),
    ``padding`` becomes the TOSA pads (lowering doc: tf.DepthwiseConv2dNative passes the TF string), EXPLICIT and NCHW
    handled."""
    x, f = op.operands[0], op.operands[1]
    nchw = _nchw(op)
    stride = tf_ops.spatial(op.attrs.get("strides"), nchw)
    dil = tf_ops.spatial(op.attrs.get("dilations"), nchw)
    x = _in(b, x, nchw)
    kh, kw, _, _ = static_shape(f)
    padding, explicit = _padding(op, nchw)
    _, h, w, _ = static_shape(x)
    pads = window_pads(padding, [h, w], [kh, kw], stride, dil, explicit)
    return [_out(b, tf_ops.depthwise_conv2d(b, op, x, f, None, pads, stride, dil), nchw)]


@legalize("tf.Conv2DBackpropInput")
def conv2d_backprop_input(b: Builder, op: Operation) -> list[Value]:
    """TRANSPOSE_CONV2D with filter perms [2,0,1,3] and out_pad from the forward padding.

    TRANSPOSE_CONV2D (lowering doc: tf.Conv2DBackpropInput in 1.0 form): filter [H,W,C_out,C_in] → OHWI by perms
    [2,0,1,3] (lowering doc: tf.Conv2DBackpropInput),
    out_pad from the forward convolution's padding of ``input_sizes`` (out_pad_top = −pad_top); dilation by a
    zero-dilated kernel (TRANSPOSE_CONV2D has none)."""
    sizes = const_ints(op, 0, "input_sizes")
    f, g = op.operands[1], op.operands[2]
    nchw = _nchw(op)
    stride = tf_ops.spatial(op.attrs.get("strides"), nchw)
    dil = tf_ops.spatial(op.attrs.get("dilations"), nchw)
    if len(sizes) == 4:
        oh, ow = (sizes[2], sizes[3]) if nchw else (sizes[1], sizes[2])
    elif len(sizes) == 2:
        oh, ow = sizes
    else:
        raise Unsupported(f"input_sizes {sizes}")
    g = _in(b, g, nchw)
    kh, kw, _, _ = static_shape(f)
    w = tf_ops.dilate_kernel(b, b.transpose(f, [2, 0, 1, 3]), dil)
    padding, explicit = _padding(op, nchw)
    before: list[int] = []
    for size, k, s, d, i in ((oh, kh, stride[0], dil[0], 0), (ow, kw, stride[1], dil[1], 1)):
        if padding == "SAME":
            before.append(same_padding(size, k, s, d)[0])
        elif padding == "VALID":
            before.append(0)
        elif padding == "EXPLICIT" and explicit is not None:
            before.append(explicit[2 * i])
        else:
            raise Unsupported(f"padding {padding!r}")
    y = tf_ops.transpose_conv2d(b, op, g, w, None, [oh, ow], before, stride)
    return [_out(b, y, nchw)]


@legalize("tf.BiasAdd", "tf.BiasAddV1")
def bias_add(b: Builder, op: Operation) -> list[Value]:
    """ADD of the [C] bias RESHAPEd along the channel axis (NHWC or NCHW).

    ADD of the [C] bias RESHAPEd to equal rank along the channel axis (last, or 1 for NCHW; lowering doc: tf.BiasAdd
    with
    its operands in TF's order)."""
    x, bias = op.operands[0], op.operands[1]
    if x.dtype not in (DType.FP32, DType.FP16, DType.BF16, DType.INT32):
        raise Unsupported(f"{op.name} on {x.dtype}")
    if x.type.rank < 2:
        raise Unsupported(f"{op.name} of a rank-{x.type.rank} tensor")
    axis = 1 if op.name == "tf.BiasAdd" and _nchw(op) else x.type.rank - 1
    return [tf_ops.bias_add(b, x, bias, axis)]


@legalize("tf.FusedBatchNorm", "tf.FusedBatchNormV2", "tf.FusedBatchNormV3")
def fused_batch_norm(b: Builder, op: Operation) -> list[Value]:
    """Inference batch norm as one MUL and one ADD per channel (NHWC or NCHW).

    Inference batch norm x·s + (offset − mean·s), s = scale·RSQRT(var + ε) (lowering doc: tf.FusedBatchNorm,
    tf.FusedBatchNormV3 with the tf.FusedBatchNormV3 lowering's
    MUL(%mean, %op3) fixed to use x − mean, §6.1); training mode is unsupported.  The statistics results are
    the given mean/variance."""
    x, scale, offset, mean, var = op.operands[:5]
    if op.attrs.get("is_training", False):
        raise Unsupported(f"{op.name} in training mode (is_training=True)")
    require_float(op, x)
    nchw = _nchw(op)
    axis = 1 if nchw else x.type.rank - 1
    y = tf_ops.batch_norm(b, x, scale, offset, mean, var, float(op.attrs.get("epsilon", 1e-4)), axis)
    rest = [mean, var, mean, var, var][: len(op.results) - 1]
    return [y, *rest]


# ------------------------------------------------------------------------------------------------- pools
def _pool(b: Builder, op: Operation, name: str, ksize: list[int], strides: list[int]) -> list[Value]:
    nchw = _nchw(op)
    k = tf_ops.spatial(ksize, nchw)
    s = tf_ops.spatial(strides, nchw)
    x = _in(b, op.operands[0], nchw)
    padding = str(op.attrs.get("padding", "VALID"))
    if padding == "EXPLICIT":
        pads = tf_ops.explicit_spatial(op.attrs.get("explicit_paddings") or [], nchw)
        if name != "tfl.max_pool_2d":
            raise Unsupported(f"{op.name} with EXPLICIT padding")
        require_float(op, x)
        lowest = float(np.finfo(x.dtype.np_dtype()).min)
        x = b.pad(x, [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0], lowest)
        padding = "VALID"
    attrs = {"filter_height": k[0], "filter_width": k[1], "stride_h": s[0], "stride_w": s[1], "padding": padding}
    (y,) = delegate.via(b, op, name, [x], attrs)
    return [_out(b, y, nchw)]


@legalize("tf.AvgPool")
def avg_pool(b: Builder, op: Operation) -> list[Value]:
    """AVG_POOL2D (tfl.average_pool_2d's lowering); NCHW through TRANSPOSEs.

    AVG_POOL2D as tfl.average_pool_2d (padding excluded from the count, as TF does; ksize/strides 4-vectors
    → kernel/stride, lowering doc: tf.AvgPool); NCHW through TRANSPOSEs."""
    return _pool(b, op, "tfl.average_pool_2d", op.attrs.get("ksize") or [], op.attrs.get("strides") or [])


@legalize("tf.MaxPool")
def max_pool(b: Builder, op: Operation) -> list[Value]:
    """MAX_POOL2D as tfl.max_pool_2d (lowering doc: tf.MaxPool); EXPLICIT pads become a PAD with the lowest float."""
    return _pool(b, op, "tfl.max_pool_2d", op.attrs.get("ksize") or [], op.attrs.get("strides") or [])


@legalize("tf.MaxPoolV2")
def max_pool_v2(b: Builder, op: Operation) -> list[Value]:
    """tf.MaxPool with constant ksize/strides operands."""
    return _pool(b, op, "tfl.max_pool_2d", const_ints(op, 1, "ksize"), const_ints(op, 2, "strides"))


# ---------------------------------------------------------------------------------------- matrix products
@legalize("tf.MatMul")
def matmul(b: Builder, op: Operation) -> list[Value]:
    """MATMUL on rank-3 views, transpose_a/b by TRANSPOSE (tfl.batch_matmul's lowering).

    MATMUL on [1,M,K]×[1,K,N] views (lowering doc: tf.MatMul is pre-1.0: rank-3 operands and zero points in 1.0,
    spec 2.3.7 MATMUL), transpose_a/b by TRANSPOSE: tfl.batch_matmul's lowering with adj_x/adj_y."""
    x, y = op.operands[0], op.operands[1]
    if x.type.rank != 2 or y.type.rank != 2:
        raise Unsupported(f"{op.name} of rank {x.type.rank} and {y.type.rank} operands")
    attrs = {"adj_x": bool(op.attrs.get("transpose_a")), "adj_y": bool(op.attrs.get("transpose_b"))}
    return delegate.via(b, op, "tfl.batch_matmul", [x, y], attrs)


@legalize("tf.BatchMatMul", "tf.BatchMatMulV2", "tf.BatchMatMulV3")
def batch_matmul(b: Builder, op: Operation) -> list[Value]:
    """tfl.batch_matmul's lowering: batch dims broadcast and flattened, one rank-3 MATMUL.

    tfl.batch_matmul's lowering (no lowering in lowering doc: tf.BatchMatMul/lowering doc: tf.BatchMatMulV2): batch dims
    broadcast and flattened, adj_x/adj_y
    by TRANSPOSE, one rank-3 MATMUL."""
    attrs = {"adj_x": bool(op.attrs.get("adj_x")), "adj_y": bool(op.attrs.get("adj_y"))}
    return delegate.via(b, op, "tfl.batch_matmul", op.operands[:2], attrs)


@legalize("tf.Einsum")
def einsum(b: Builder, op: Operation) -> list[Value]:
    """Pairwise contractions as rank-3 MATMULs with TRANSPOSE/RESHAPE around them (:func:`tf_ops.einsum`)."""
    return [tf_ops.einsum(b, op, str(op.attrs.get("equation", "")), list(op.operands))]


# ------------------------------------------------------------------------------------------------ softmax
@legalize("tf.Softmax")
def softmax(b: Builder, op: Operation) -> list[Value]:
    """tfl.softmax's lowering: EXP(x − max) · RECIPROCAL(sum) on the last axis (lowering doc: tf.Softmax lacks the
    max)."""
    return delegate.via(b, op, "tfl.softmax", op.operands[:1], {"beta": 1.0})


@legalize("tf.LogSoftmax")
def log_softmax(b: Builder, op: Operation) -> list[Value]:
    """tfl.log_softmax's lowering: (x − max) − LOG(sum EXP(x − max)) (lowering doc: tf.LogSoftmax lacks the max,
    §6.1)."""
    return delegate.via(b, op, "tfl.log_softmax", op.operands[:1])


@legalize("tf.LRN")
def lrn(b: Builder, op: Operation) -> list[Value]:
    """tfl.local_response_normalization's lowering (same formula).

    tfl.local_response_normalization's lowering (same formula: x·(bias + α·Σ x²)^−β over the channel
    window; no lowering in lowering doc: tf.LRN)."""
    a = op.attrs
    attrs = {"radius": int(a.get("depth_radius", 5)), "bias": float(a.get("bias", 1.0)),
             "alpha": float(a.get("alpha", 1.0)), "beta": float(a.get("beta", 0.5))}
    return delegate.via(b, op, "tfl.local_response_normalization", op.operands[:1], attrs)


# ------------------------------------------------------------------------------------------------ activations
def _same_as(tf_name: str, tfl_name: str, attrs: dict[str, object] | None = None) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        return [tf_ops.through_transpose(b, op.operands[0], lambda v: delegate.via(b, op, tfl_name, [v], attrs)[0])]

    rule.__doc__ = f"{tfl_name}'s lowering (same semantics; applied before a producing TRANSPOSE)."
    legalize(tf_name)(rule)


_same_as("tf.Relu", "tfl.relu")  # CLAMP [0, max]: the tf.Relu lowering's RELUN {max_val=0} would zero everything (§6.1)
_same_as("tf.Relu6", "tfl.relu6")
_same_as("tf.Elu", "tfl.elu")
_same_as("tf.Sigmoid", "tfl.logistic")
_same_as("tf.Tanh", "tfl.tanh")


@legalize("tf.LeakyRelu")
def leaky_relu(b: Builder, op: Operation) -> list[Value]:
    """tfl.leaky_relu's x > 0 ? x : αx (TF's kernel); the tf.LeakyRelu lowering's MAXIMUM(x, αx) is wrong for α > 1
    (§6.1)."""
    attrs = {"alpha": float(op.attrs.get("alpha", 0.2))}
    return [tf_ops.through_transpose(b, op.operands[0], lambda v: delegate.via(b, op, "tfl.leaky_relu", [v], attrs)[0])]


@legalize("tf.Selu")
def selu(b: Builder, op: Operation) -> list[Value]:
    """scale · (x > 0 ? x : α·expm1(x)) with TF's constants (no lowering in L)."""
    x = op.operands[0]
    require_float(op, x)
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    pos = b.binary("GREATER", x, fconst(b, 0.0, x))
    neg = b.mul(expm1(b, x), fconst(b, alpha * scale, x))
    return [select(b, pos, b.mul(x, fconst(b, scale, x)), neg)]


@legalize("tf.Softplus")
def softplus(b: Builder, op: Operation) -> list[Value]:
    """MAXIMUM(x, 0) + log1p(EXP(−|x|)) (:func:`tf_ops.softplus`; no lowering in lowering doc: tf.Softplus)."""
    x = op.operands[0]
    require_float(op, x)
    return [tf_ops.softplus(b, x)]


@legalize("tf.Softsign")
def softsign(b: Builder, op: Operation) -> list[Value]:
    """x · RECIPROCAL(1 + |x|)."""
    x = op.operands[0]
    require_float(op, x)
    return [float_divide(b, x, b.binary("ADD", fconst(b, 1.0, x), b.abs(x)))]


@legalize("tf.Erf")
def erf(b: Builder, op: Operation) -> list[Value]:
    """ERF (spec 2.4.2 ERF)."""
    x = op.operands[0]
    require_float(op, x)
    return [b.erf(x)]


@legalize("tf.Erfc")
def erfc(b: Builder, op: Operation) -> list[Value]:
    """1 − ERF(x).

    1 − ERF(x) (Keras' exact GELU is 0.5·x·erfc(−x/√2)); absolute error ~1e-7, relative error grows where
    erfc(x) is tiny (x > 3)."""
    x = op.operands[0]
    require_float(op, x)
    return [b.binary("SUB", fconst(b, 1.0, x), b.erf(x))]


@legalize("tf.Gelu")
def gelu(b: Builder, op: Operation) -> list[Value]:
    """tfl.gelu's lowering (for graphs that carry a fused Gelu op)."""
    return delegate.via(b, op, "tfl.gelu", op.operands[:1], {"approximate": bool(op.attrs.get("approximate"))})


# ---------------------------------------------------------------------------------------- fake quantization
def _fq_bits(op: Operation) -> tuple[int, bool]:
    bits = int(op.attrs.get("num_bits", 8))
    if not 2 <= bits <= 16:
        raise Unsupported(f"{op.name} with num_bits {bits}")
    return bits, bool(op.attrs.get("narrow_range", False))


def _fake_quant(b: Builder, op: Operation, lo: np.ndarray, hi: np.ndarray) -> list[Value]:
    x = op.operands[0]
    if x.dtype is not DType.FP32:
        raise Unsupported(f"{op.name} on {x.dtype}")
    bits, narrow = _fq_bits(op)
    lo, hi = np.asarray(lo, np.float32).reshape(-1), np.asarray(hi, np.float32).reshape(-1)
    if lo.shape != hi.shape or not lo.size:
        raise Unsupported(f"{op.name} min/max of shapes {lo.shape} and {hi.shape}")
    if np.any(lo > hi):
        raise Unsupported(f"{op.name} with min > max")
    params = [tf_ops.fake_quant_params(float(a), float(c), bits, narrow) for a, c in zip(lo, hi)]
    nmin, nmax, scale = (np.asarray(p, np.float32) for p in zip(*params))
    if lo.size > 1 and (x.type.rank == 0 or static_shape(x)[-1] != lo.size):
        raise Unsupported(f"{op.name} with {lo.size} channels for input shape {list(x.shape)}")
    if np.any(scale <= 0) or not np.all(np.isfinite(scale)):
        raise Unsupported(f"{op.name} with an empty or invalid range")
    return [tf_ops.fake_quant(b, x, nmin, nmax, scale)]


@legalize("tf.FakeQuantWithMinMaxArgs")
def fake_quant_args(b: Builder, op: Operation) -> list[Value]:
    """Float fake quantization with TF's nudged range, bit-exact with TF's kernel.

    Float emulation of quantization with TF's nudged min/max (lowering doc: tf.FakeQuantWithMinMaxArgs plus the nudging
    it lacks):
    FLOOR((CLAMP(x) − min)·(1/scale) − zp + ½)·scale, bit-exact with TF's kernel (:func:`tf_ops.fake_quant`)."""
    a = op.attrs
    return _fake_quant(b, op, np.array([a.get("min", -6.0)]), np.array([a.get("max", 6.0)]))


@legalize("tf.FakeQuantWithMinMaxVars")
def fake_quant_vars(b: Builder, op: Operation) -> list[Value]:
    """As FakeQuantWithMinMaxArgs with constant min/max operands (lowering doc: tf.FakeQuantWithMinMaxVars)."""
    return _fake_quant(b, op, const_operand(op, 1, "min"), const_operand(op, 2, "max"))


@legalize("tf.FakeQuantWithMinMaxVarsPerChannel")
def fake_quant_vars_per_channel(b: Builder, op: Operation) -> list[Value]:
    """Per-channel (last axis) fake quantization with constant min/max vectors (no lowering in lowering doc:
    tf.FakeQuantWithMinMaxVarsPerChannel)."""
    return _fake_quant(b, op, const_operand(op, 1, "min"), const_operand(op, 2, "max"))

