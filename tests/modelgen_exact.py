"""Test models for exact integer arithmetic at realistic sizes (issue 17): int16x8 models with int16 inputs and
outputs (so results compare as integers), deep fully-connected layers, long reductions, int32 reduce_prod, and
SPLIT_V with an empty piece.  Built with TFLiteConverter and cached like :mod:`tests.modelgen`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tests.modelgen import _tf, cached


def _convert(fn: Callable[..., Any], shapes: list[tuple[tuple[int, ...], str]], quant: str | None,
             seed: int = 0, lo: float = -1.0, hi: float = 1.0) -> bytes:
    """``quant``: None (float / integer model as traced), "int8" (int8 I/O) or "int16io" (16x8, int16 I/O)."""
    tf = _tf()
    sigs = [tf.TensorSpec(s, getattr(tf, dt), name=f"x{i}") for i, (s, dt) in enumerate(shapes)]
    tfn = tf.function(fn, input_signature=sigs, autograph=False)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([tfn.get_concrete_function()], tfn)
    if quant is not None:
        rng = np.random.default_rng(seed + 11)
        data = [[rng.uniform(lo, hi, s).astype(np.float32) for s, _ in shapes] for _ in range(16)]

        def rep() -> Any:
            yield from data

        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = rep
        if quant == "int8":
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            conv.inference_input_type = conv.inference_output_type = tf.int8
        elif quant in ("int16io", "int16mixed"):  # int16mixed: ops TFLite cannot quantize to 16x8 stay float
            conv.target_spec.supported_ops = [
                tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
            if quant == "int16mixed":
                conv.target_spec.supported_ops.append(tf.lite.OpsSet.TFLITE_BUILTINS)
            conv.inference_input_type = conv.inference_output_type = tf.int16
        else:
            raise ValueError(quant)
    return bytes(conv.convert())


def _fc(ic: int, oc: int, quant: str | None) -> bytes:
    tf = _tf()
    rng = np.random.default_rng(ic)
    w = (rng.standard_normal((ic, oc)) * 0.05).astype(np.float32)
    bias = (rng.standard_normal(oc) * 0.1).astype(np.float32)
    return _convert(lambda x: tf.matmul(x, w) + bias, [((1, ic), "float32")], quant)


def fully_connected(ic: int, oc: int = 64, quant: str = "int16io") -> bytes:
    """x[1, ic] @ W + b, per-channel int8 weights; for "int16io" the bias is int64 and the accumulator 48-bit."""
    return cached(f"exact_fc{ic}x{oc}_{quant}", _fc, {"ic": ic, "oc": oc, "quant": quant}, extra=(_convert,))


def _reduce_prod_q(shape: tuple[int, ...], axis: int, quant: str) -> bytes:
    tf = _tf()
    return _convert(lambda x: tf.reduce_prod(x, axis=axis), [(shape, "float32")], quant, lo=-1.5, hi=1.5)


def reduce_prod_quant(shape: tuple[int, ...] = (4, 6), axis: int = 1, quant: str = "int16io") -> bytes:
    """A quantized REDUCE_PROD (int16x8 with int16 I/O, or int8) over ``axis``."""
    return cached("exact_reduce_prod_q", _reduce_prod_q, {"shape": shape, "axis": axis, "quant": quant},
                  extra=(_convert,))


def _reduce_prod(shape: tuple[int, ...], axis: int, dtype: str, keepdims: bool) -> bytes:
    tf = _tf()
    return _convert(lambda x: tf.reduce_prod(x, axis=axis, keepdims=keepdims), [(shape, dtype)], None)


def reduce_prod_int(shape: tuple[int, ...] = (2, 7, 5), axis: int = 1, keepdims: bool = False) -> bytes:
    """An int32 REDUCE_PROD (a wake-word model's shape computation does this on data)."""
    return cached("exact_reduce_prod_i32", _reduce_prod,
                  {"shape": shape, "axis": axis, "dtype": "int32", "keepdims": keepdims}, extra=(_convert,))


def _split_v(sizes: tuple[int, ...], concat: bool) -> bytes:
    tf = _tf()

    def f(x: Any) -> Any:
        parts = tf.split(x, list(sizes), axis=2)
        if concat:
            return tf.concat([p * 2.0 for p in parts if True], axis=2) + 1.0
        return [p + 1.0 for p in parts if p.shape[2]]

    return _convert(f, [((1, 4, sum(sizes)), "float32")], None)


def split_v_empty(sizes: tuple[int, ...] = (3, 0, 5), concat: bool = False) -> bytes:
    """SPLIT_V with a zero-size piece, its pieces used (all but the empty one) or concatenated again."""
    return cached("exact_split_v_empty", _split_v, {"sizes": sizes, "concat": concat}, extra=(_convert,))


def _div(lo: float, hi: float) -> bytes:
    tf = _tf()
    return _convert(lambda a, b: tf.divide(a, b), [((65536,), "float32"), ((65536,), "float32")], "int8",
                    lo=lo, hi=hi)


def div_int8(lo: float, hi: float) -> bytes:
    """int8 DIV of two 65536-element vectors (room for every code pair), calibrated on [lo, hi)."""
    return cached("exact_div_i8", _div, {"lo": lo, "hi": hi}, extra=(_convert,))


def _op16(kind: str) -> bytes:
    tf = _tf()
    rng = np.random.default_rng(5)
    if kind == "conv_deep":  # 3x3 conv over 512 channels: 4,608-term accumulations
        w = (rng.standard_normal((3, 3, 512, 16)) * 0.05).astype(np.float32)
        return _convert(lambda x: tf.nn.relu(tf.nn.conv2d(x, w, 1, "SAME") + 0.1), [((1, 6, 6, 512), "float32")],
                        "int16io")
    if kind == "depthwise_big":  # 7x7 depthwise, multiplier 2
        w = (rng.standard_normal((7, 7, 32, 2)) * 0.2).astype(np.float32)
        return _convert(lambda x: tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME"), [((1, 12, 12, 32), "float32")],
                        "int16io")
    if kind == "mean_long":  # global mean over 64x64 positions
        return _convert(lambda x: tf.reduce_mean(x, axis=[1, 2], keepdims=True), [((1, 64, 64, 8), "float32")],
                        "int16io")
    if kind == "sum_long":
        return _convert(lambda x: tf.reduce_sum(x, axis=[1, 2]), [((1, 32, 32, 4), "float32")], "int16io")
    if kind == "avgpool_big":  # 16x16 window (count 256)
        return _convert(lambda x: tf.nn.avg_pool2d(x, 16, 16, "VALID"), [((1, 32, 32, 8), "float32")], "int16io")
    if kind == "avgpool_huge":  # a 129x129 window: beyond AVG_POOL2D's exact range for int16
        return _convert(lambda x: tf.nn.avg_pool2d(x, 129, 1, "VALID"), [((1, 129, 129, 2), "float32")], "int16io")
    if kind == "add":
        return _convert(lambda x, y: x + y * 1.7, [((1, 16, 16, 64), "float32")] * 2, "int16io")
    if kind == "mul":
        return _convert(lambda x, y: x * y, [((1, 16, 16, 64), "float32")] * 2, "int16io")
    if kind == "softmax_long":
        return _convert(lambda x: tf.nn.softmax(x * 4.0), [((2, 1000), "float32")], "int16io")
    if kind == "batch_matmul_deep":
        w = (rng.standard_normal((1, 1024, 32)) * 0.05).astype(np.float32)
        return _convert(lambda x: tf.matmul(x, tf.constant(w)), [((1, 4, 1024), "float32")], "int16io")
    raise ValueError(kind)


#: 16x8 ops at realistic sizes (deep channels, long reductions, big windows)
OPS16 = ("conv_deep", "depthwise_big", "mean_long", "sum_long", "avgpool_big", "add", "mul", "softmax_long",
         "batch_matmul_deep")


def op16(kind: str) -> bytes:
    """One 16x8 model (int16 inputs and outputs) of :data:`OPS16`."""
    return cached(f"exact_op16_{kind}", _op16, {"kind": kind}, extra=(_convert,))


def _mixed16(kind: str) -> bytes:
    tf = _tf()
    rng = np.random.default_rng(9)
    w1 = (rng.standard_normal((1, 1, 8, 8)) * 0.4).astype(np.float32)
    w2 = (rng.standard_normal((1, 1, 8, 8)) * 0.4).astype(np.float32)
    if kind == "hard_swish_alone":  # every int16 code can be fed: (1, 256, 256, 1)
        def hs(x: Any) -> Any:
            t = tf.nn.max_pool2d(x, 1, 1, "VALID")  # an int16 op first: the model input stays int16
            return tf.nn.max_pool2d(t * tf.nn.relu6(t + 3.0) / 6.0, 1, 1, "VALID")

        return _convert(hs,
                        [((1, 256, 256, 1), "float32")], "int16mixed", lo=-7.0, hi=7.0)
    mid = {"hard_swish": lambda t: t * tf.nn.relu6(t + 3.0) / 6.0, "neg": lambda t: -t}[kind]
    return _convert(lambda x: [tf.nn.max_pool2d(mid(tf.nn.conv2d(x, w1, 1, "SAME")), 1, 1, "VALID"),
                               tf.nn.conv2d(mid(tf.nn.conv2d(x, w2, 1, "SAME")), w1, 1, "SAME")],
                    [((1, 64, 64, 8), "float32")], "int16mixed", lo=-3.0, hi=3.0)


def mixed16(kind: str) -> bytes:
    """TFLite's mixed 16x8 mode for ops it cannot quantize to 16x8 (HARD_SWISH, NEG): the op stays float between
    DEQUANTIZE and QUANTIZE.  Outputs conv → op and conv → op → conv; "hard_swish_alone" takes every int16 code."""
    return cached(f"exact_mixed16_{kind}", _mixed16, {"kind": kind}, extra=(_convert,))


def quantized_sum(dtype: str, s_in: float, zp_in: int, s_out: float, zp_out: int,
                  shape: tuple[int, int] = (3, 8)) -> bytes:
    """A hand-written SUM over axis 1 with chosen quantization (a ratio like 0.5 makes exact ties reachable)."""
    from tests.modelgen_more import Op, T, _opts, tflite_model

    sum_op = 74
    return tflite_model([T("x", shape, dtype, quant=([s_in], [zp_in], 0)),
                         T("axis", (1,), "int32", data=np.array([1], np.int32)),
                         T("y", (shape[0],), dtype, quant=([s_out], [zp_out], 0))],
                        [Op(sum_op, [0, 1], [2], options=_opts("ReducerOptions", KeepDims=False))], [0], [2])


__all__ = ["OPS16", "div_int8", "fully_connected", "mixed16", "op16", "quantized_sum", "reduce_prod_int",
           "reduce_prod_quant", "split_v_empty"]
