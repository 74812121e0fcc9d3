"""Dynamic-range ("hybrid") CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED and BATCH_MATMUL: float32
activations, int8 constant weights (the arithmetic: :mod:`tf2tosa.quant.hybrid`).

Not a registry module: the rules of :mod:`.tfl_nn` call :func:`kernel_mode` / :func:`float_weight` first and hand
a hybrid op here.  By default (``--hybrid kernel``) each op follows the structure of LiteRT's hybrid kernel:

* FULLY_CONNECTED (``EvalHybrid``): each row of the input (``[N, IC]`` after flattening) quantized on its own,
  asymmetrically when the op's ``asymmetric_quantize_inputs`` says so; CONV2D 1×1 with int8 operands → int32;
  ``float(dot) · (factor_row · s_w[c]) + bias``, the activation, the ``keep_num_dims`` shape.
* CONV_2D with one weight scale (``EvalHybrid``): each batch image quantized symmetrically,
  ``float(dot) · (factor_b · s_w) + bias``; with per-channel scales (``EvalHybridPerChannel``) asymmetrically
  whatever the option says, ``(float(dot - zp_b·Σw[c]) · s_w[c]) · factor_b + bias``.
* DEPTHWISE_CONV_2D (``DepthwiseConvHybridPerChannel``): each batch image asymmetrically,
  ``float(dot - zp_b·Σw[c]) · (s_w[c] · factor_b) + bias``.
* TRANSPOSE_CONV: not reproduced yet (a symmetric per-image quantization with ``factor_b · s_w[c]`` was 1.5% off
  LiteRT 2.3's reference kernel): its weights are always dequantized (:func:`float_weight`), recorded as inexact.
* BATCH_MATMUL (the constant int8 operand on the right): each row of the left operand quantized (asymmetric per
  the option), MATMUL int8 → int32, ``float(dot - zp·Σw) · (factor_row · s_w)``; no bias.

The kernels skip the window taps outside the image.  A symmetric zero point is 0, so TOSA's own padding does the
same; with an asymmetric zero point (a run-time value, while TOSA's zero-point operands are constants) the float
input is padded with 0.0 before it is quantized - 0 lies in every asymmetric range, so the factor does not change,
and 0.0 quantizes to exactly the zero point - the product then takes ``zp·Σw`` off every output, which removes the
padded taps exactly.  Rows cut off by a VALID window's remainder are cut after the quantization (LiteRT's range
covers the whole input).

Size (the weights stay int8, so a ``.tosa`` grows by its ops, ~90-100 bytes each in the flatbuffer): the int8
product's bias is one [1] zero (broadcast, spec BC == 1); ``zp·Σw`` is taken off in float32 where that is exact
(:func:`~tf2tosa.quant.hybrid.corrected`); a tensor read by several hybrid ops (Q/K/V projections) is quantized
once, its asymmetric range once whatever the paddings; a non-negative input (a ReLU's output) has the constant
zero point -128, the int8 product's input zero point (no correction, no float padding:
:func:`~tf2tosa.quant.hybrid.nonnegative`); an unrolled loop's per-step rows GATHERed from one sequence are
quantized once for the whole sequence and gathered (:func:`_gathered_rows`), and a loop whose body runs hybrid ops
is not unrolled by default (:func:`keeps_loop`); the values made inside an op get short names.
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Graph, Operation, Value, has_value
from ..quant.conv import note_inexact
from ..quant.hybrid import (
    ZeroPoint,
    corrected,
    dequantize_weight,
    hybrid_mode,
    input_zp,
    is_hybrid,
    nonnegative,
    quantize,
    short_names,
    weight_scales,
)
from ..tosa.builder import Builder
from .lowering.conv import fully_connected_rows, stride_dilation
from .lowering.legalize_common import fused_activation
from .lowering.numeric import static_shape
from .lowering.padding import apply_window_padding, window_pads


def kernel_mode(b: Builder, x: Value, w: Value) -> bool:
    """``x`` float32 and ``w`` an int8 weight, lowered as LiteRT's hybrid kernel (the default)."""
    return is_hybrid(x, w) and hybrid_mode(b) == "kernel"


def float_weight(b: Builder, op: Operation, x: Value, w: Value) -> Value:
    """``w`` itself, or (``--hybrid dequantize``) the float weights of a hybrid op: CAST + MUL of the int8
    constant, recorded as a path that is not LiteRT's."""
    if not is_hybrid(x, w):
        return w
    if op.name == "tfl.transpose_conv" and hybrid_mode(b) == "kernel":
        note_inexact(b, op, "hybrid TRANSPOSE_CONV: int8 weights dequantized and the op run in float (LiteRT's "
                            "hybrid transpose-conv arithmetic is not reproduced yet)")
    else:
        note_inexact(b, op, "--hybrid dequantize: int8 weights dequantized and the op run in float (LiteRT "
                            "quantizes the activations on the fly)")
    return dequantize_weight(b, op, w)


#: TFLite ops that run a hybrid kernel when their input is float32 and a weight int8
_HYBRID_OPS = frozenset({"tfl.fully_connected", "tfl.conv_2d", "tfl.depthwise_conv_2d", "tfl.transpose_conv",
                         "tfl.batch_matmul", "tfl.unidirectional_sequence_lstm", "tfl.bidirectional_sequence_lstm",
                         "tfl.unidirectional_sequence_rnn", "tfl.bidirectional_sequence_rnn", "tfl.rnn",
                         "tfl.svdf", "tfl.lstm"})


def keeps_loop(b: Builder, body: Graph) -> bool:
    """Whether a WHILE with a static trip count stays a WHILE_LOOP rather than being unrolled: when its body runs a
    hybrid op (a Keras LSTM's gate products), no ``max_unroll`` was given and the target (if any) has
    EXT-CONTROLFLOW.  Unrolled, every step repeats the cell and each hybrid op's on-the-fly quantization (25 ops):
    a 16-step LSTM text classifier with 357 KB of int8 weights grew to 1.33x its .tflite (1.05x as a loop)."""
    if b.context.options.max_unroll is not None:
        return False
    target = b.context.options.target
    if target is not None:
        from ..tosa.targets import takes_control_flow  # (loaded only with --target)

        if not takes_control_flow(str(target)):
            return False
    return hybrid_body(body)


def hybrid_body(body: Graph) -> bool:
    """Whether a loop body (a TFLite subgraph) runs a hybrid op."""
    return any(op.name in _HYBRID_OPS and op.operands and has_value(op.operands[0])
               and any(has_value(w) and is_hybrid(op.operands[0], w) for w in op.operands[1:])
               for op in body.ops.values())


def kept_loop(b: Builder, results: list[Value], body: Graph) -> list[Value]:
    """The results of a WHILE_LOOP made of the TFLite loop ``body``; when that runs hybrid ops, the loop's regions
    are marked to have their equal constants merged (``GraphPasses.share_constants``)."""
    wl = results[0].producer if results and hybrid_body(body) else None
    for r in wl.regions if wl is not None else []:
        b.context.passes.of(r).share_constants = True
    return results


def _static(op: Operation, *vs: Value) -> None:
    for v in vs:
        if not v.type.is_static:
            raise Unsupported(f"hybrid {op.name}: --dynamic: not yet (the on-the-fly quantization needs static "
                              "shapes)")


def _z8(b: Builder) -> Value:
    return b.zp(0, DType.INT8)


def _zero_bias(b: Builder) -> Value:
    """A [1] int32 zero: the int8 product's bias, broadcast over the output channels (spec: BC == 1)."""
    return b.const(np.zeros([1], np.int64), DType.INT32, name="zero_bias")


def _finish(b: Builder, op: Operation, y: Value, k: int) -> Value:
    """``y`` + the float bias (operand ``k``, when present), then the fused activation."""
    if len(op.operands) > k and has_value(op.operands[k]):
        bias = op.operands[k]
        if bias.type.is_quantized or bias.dtype is not DType.FP32:
            raise Unsupported(f"hybrid {op.name}: bias of type {bias.type}")
        y = b.binary("ADD", y, b.reshape(bias, [1] * (y.type.rank - 1) + [int(np.prod(static_shape(bias)))]))
    return fused_activation(b, y, op.attrs.get("fused_activation_function"))


def _scale(b: Builder, rank: int, scales: np.ndarray) -> Value:
    return b.const(np.asarray(scales, np.float32).reshape([1] * (rank - 1) + [-1]), DType.FP32)


def _quantized_input(b: Builder, x: Value, pads: list[int], asymmetric: bool
                     ) -> tuple[Value, Value, ZeroPoint, list[int]]:
    """x [N, H, W, C] quantized per batch image, with the window's pads: (q, factor [N,1,1,1], zero point or None,
    the pads left for the TOSA op).  A non-negative x's zero point is a constant (the TOSA op's input zero point,
    whose padding then adds nothing): no float padding."""
    n, h, w, c = static_shape(x)
    padding = None
    if asymmetric and any(p > 0 for p in pads) and not nonnegative(x):
        pos = [max(0, p) for p in pads]
        padding = [0, 0, pos[0], pos[1], pos[2], pos[3], 0, 0]
        pads = [0, min(0, pads[1]), 0, min(0, pads[3])]
    q, factor, zp = quantize(b, x, [n, h, w, c], asymmetric, rows=[n, 1, 1, h * w * c], padding=padding)
    with short_names(b):
        q, pads = apply_window_padding(b, q, pads, input_zp(b, zp))
    return q, factor, zp, pads


def _per_channel(w: Value) -> bool:
    q = w.type.quant
    return q is not None and len(q.scale) > 1


def conv_2d(b: Builder, op: Operation) -> list[Value]:
    x, w = op.operands[0], op.operands[1]
    _static(op, x)
    _, ih, iw, c = static_shape(x)
    oc, kh, kw, ic = static_shape(w)
    if c != ic:
        raise Unsupported(f"hybrid {op.name}: grouped convolution ({c} input channels, filter {ic})")
    scales = weight_scales(op, w, oc, 0)
    per_channel = _per_channel(w)
    stride, dil = stride_dilation(op)
    pads = window_pads(op.attrs.get("padding", "VALID"), [ih, iw], [kh, kw], stride, dil)
    q, factor, zp, pads = _quantized_input(b, x, pads, asymmetric=per_channel)
    with short_names(b):
        dot = b.conv2d(q, w, _zero_bias(b), input_zp(b, zp), _z8(b), pad=pads, stride=stride, dilation=dil,
                       acc_type="INT32")
        acc = corrected(b, dot, zp, np.asarray(w.const(), np.int64).reshape(oc, -1))
        if per_channel:  # reference_ops::HybridConvPerChannel: acc · s_w[c] · factor_b
            acc = b.mul(acc, _scale(b, 4, scales))
        else:  # EvalHybrid: factor_b *= s_w, then acc · factor_b
            factor = b.mul(factor, _scale(b, 4, scales[:1]))
    return [_finish(b, op, b.mul(acc, factor), 2)]


def depthwise_conv_2d(b: Builder, op: Operation) -> list[Value]:
    x, w = op.operands[0], op.operands[1]
    _static(op, x)
    _, ih, iw, c = static_shape(x)
    one, kh, kw, cm = static_shape(w)
    if one != 1 or cm % c:
        raise Unsupported(f"depthwise filter shape {[one, kh, kw, cm]} for {c} input channels")
    scales = weight_scales(op, w, cm, 3)
    stride, dil = stride_dilation(op)
    pads = window_pads(op.attrs.get("padding", "VALID"), [ih, iw], [kh, kw], stride, dil)
    q, factor, zp, pads = _quantized_input(b, x, pads, asymmetric=True)
    with short_names(b):
        w4 = b.reshape(w, [kh, kw, c, cm // c])
        dot = b.depthwise_conv2d(q, w4, _zero_bias(b), input_zp(b, zp), _z8(b), pad=pads, stride=stride,
                                 dilation=dil, acc_type="INT32")
        acc = corrected(b, dot, zp, np.asarray(w.const(), np.int64).reshape(kh * kw, cm).T)
        scale = b.mul(_scale(b, 4, scales), factor)
    return [_finish(b, op, b.mul(acc, scale), 2)]


def _unreshaped(v: Value, ic: int) -> Value:
    """The tensor ``v`` is reshaped from through RESHAPEs that keep a last axis of ``ic`` (the same rows)."""
    while v.producer is not None and v.producer.opcode == "RESHAPE" and v.type.is_static and v.shape \
            and int(v.shape[-1]) == ic and v.producer.operands[0].shape \
            and int(v.producer.operands[0].shape[-1]) == ic:
        v = v.producer.operands[0]
    return v


def _gathered_rows(b: Builder, x: Value, n: int, ic: int, asymmetric: bool
                   ) -> tuple[Value, Value, ZeroPoint] | None:
    """When x is (a reshape of) whole rows GATHERed from a float tensor T [N, K, ic] - the time step an unrolled
    loop takes from its sequence - T's rows quantized once (shared by every step) and gathered like x: the same
    q, factor and zero point, as each row is quantized on its own.  None for any other x."""
    v = _unreshaped(x, ic)
    g = v.producer
    if g is None or g.opcode != "GATHER" or not g.operands[1].is_const or g.operands[0].is_const \
            or not v.type.is_static:
        return None
    t, idx = g.operands
    if not t.type.is_static or int(t.shape[-1]) != ic or int(np.prod(static_shape(v))) != n * ic:
        return None
    # (each copy of an unrolled body reshapes the sequence anew: the rows are those of the first tensor)
    qt, ft, zt = quantize(b, _unreshaped(t, ic), static_shape(t), asymmetric)
    with short_names(b):
        q = b.reshape(b.gather(qt, idx), [n, 1, 1, ic])
        factor = b.reshape(b.gather(ft, idx), [n, 1, 1, 1])
        zp = b.reshape(b.gather(zt, idx), [n, 1, 1, 1]) if isinstance(zt, Value) else zt
    return q, factor, zp


def fully_connected(b: Builder, op: Operation) -> list[Value]:
    x, w = op.operands[0], op.operands[1]
    _static(op, x)
    if op.attrs.get("weights_format", "DEFAULT") != "DEFAULT" or len(op.results) > 1:
        raise Unsupported(f"hybrid {op.name} with weights_format {op.attrs.get('weights_format')}")
    xs, ws = static_shape(x), static_shape(w)
    oc, ic, n = fully_connected_rows(xs, ws)
    scales = weight_scales(op, w, oc, 0)
    asymmetric = bool(op.attrs.get("asymmetric_quantize_inputs", False))
    # each row quantized on its own (BatchQuantizeFloats): rows [n, 1, 1, ic], factor and zero point [n, 1, 1, 1]
    q, factor, zp = _gathered_rows(b, x, n, ic, asymmetric) or quantize(b, x, [n, 1, 1, ic], asymmetric)
    with short_names(b):
        dot = b.conv2d(q, b.reshape(w, [oc, 1, 1, ic]), _zero_bias(b), input_zp(b, zp), _z8(b), pad=[0, 0, 0, 0],
                       stride=[1, 1], dilation=[1, 1], acc_type="INT32")
        acc = corrected(b, dot, zp, np.asarray(w.const(), np.int64))
        # scaling_factor · s_w (per tensor), or · s_w[c] (per channel)
        scale = b.mul(factor, _scale(b, 4, scales if _per_channel(w) else scales[:1]))
    y = _finish(b, op, b.mul(acc, scale), 2)
    out = xs[:-1] + [oc] if op.attrs.get("keep_num_dims") and xs else [n, oc]
    return [b.reshape(y, out)]


def matmul(b: Builder, op: Operation, x3: Value, y3: Value) -> Value:
    """BATCH_MATMUL's product of x3 [B, M, K] (float32) by the int8 constant y3 [B' ∈ {1, B}, K, N]."""
    _static(op, x3)
    y = op.operands[1]
    if not y3.is_const:
        raise Unsupported(f"hybrid {op.name}: the int8 operand is not a constant")
    q = y.type.quant
    assert q is not None
    if len(q.scale) != 1 or any(int(z) != 0 for z in q.zero_point) or y.dtype is not DType.INT8:
        raise Unsupported(f"hybrid {op.name}: the int8 operand needs one scale and zero point 0 (LiteRT reads "
                          "its per-tensor parameters)")
    asymmetric = bool(op.attrs.get("asymmetric_quantize_inputs", False))
    qx, factor, zp = quantize(b, x3, static_shape(x3), asymmetric)  # each row (last axis) on its own
    with short_names(b):
        dot = b.matmul(qx, y3, input_zp(b, zp), _z8(b))
        wy = np.asarray(y3.const(), np.int64)  # [B', K, N]: the weights of output column n are wy[:, :, n]
        if wy.shape[0] == 1:
            acc = corrected(b, dot, zp, wy[0].T)
        else:  # one weight matrix per batch entry: its own column sums
            acc = _corrected_batched(b, dot, zp, wy)
        scale = b.mul(factor, _scale(b, 3, np.asarray(q.scale, np.float32)[:1]))
    return b.mul(acc, scale)


def _corrected_batched(b: Builder, dot: Value, zp: ZeroPoint, wy: np.ndarray) -> Value:
    """float32(dot - zp · Σ_k wy[b, k, n]) for a batch of weight matrices wy [B, K, N] (dot [B, M, N])."""
    if not isinstance(zp, Value):
        return b.cast(dot, DType.FP32)
    rs = b.const(wy.sum(axis=1, keepdims=True), DType.INT32)
    return b.cast(b.binary("SUB", dot, b.mul(b.cast(zp, DType.INT32), rs)), DType.FP32)


__all__ = ["conv_2d", "depthwise_conv_2d", "float_weight", "fully_connected", "hybrid_body",
           "keeps_loop", "kept_loop", "kernel_mode", "matmul"]
