"""One tf.function per tf.* rule: load_tensorflow → convert_graph → executor, compared with TF eager on the same
inputs (float: max |err| / max |ref| within the case's bound; integer/bool: exact), and the .tosa validated by
tosa-opt for the profiles/extensions the graph declares."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import tensorflow as tf  # noqa: E402

from tests.tfgen import REPO, Case, In, run_case  # noqa: E402

RESULTS = REPO / ".cache" / "tf_op_results.jsonl"
_R = np.random.default_rng(1234)


def W(*shape: int, scale: float = 0.5) -> Any:
    """A seeded constant weight."""
    return tf.constant(_R.uniform(-scale, scale, shape).astype(np.float32))


def F(*shape: int, lo: float = -2.0, hi: float = 2.0) -> In:
    return In(tuple(shape), "float32", lo, hi)


def I32(*shape: int, lo: int = -8, hi: int = 8) -> In:
    return In(tuple(shape), "int32", lo, hi)


def B(*shape: int) -> In:
    return In(tuple(shape), "bool")


def fixed(values: Any, dtype: str = "float32") -> In:
    arr = np.asarray(values, dtype=dtype)
    return In(arr.shape, dtype, values=arr)


def _nhwc(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Reference for an NCHW function: the NHWC computation, transposed back."""
    return lambda x: tf.transpose(f(tf.transpose(x, [0, 2, 3, 1])), [0, 3, 1, 2])


def _cases() -> list[Case]:
    c: list[Case] = []

    def add(name: str, fn: Callable[..., Any], inputs: list[In], op: str, rtol: float | None = None,
            **kw: Any) -> None:
        c.append(Case(name, fn, inputs, op, rtol, **kw))

    # ------------------------------------------------------------------------------------- convolutions
    w433 = W(3, 3, 3, 4)
    add("conv2d_same", lambda x: tf.nn.conv2d(x, w433, 1, "SAME"), [F(1, 8, 8, 3)], "Conv2D")
    add("conv2d_valid_s2_rem", lambda x: tf.nn.conv2d(x, w433, 2, "VALID"), [F(1, 10, 9, 3)], "Conv2D")
    add("conv2d_same_s2_dil", lambda x: tf.nn.conv2d(x, w433, 1, "SAME", dilations=2), [F(1, 9, 9, 3)], "Conv2D")
    w1 = W(1, 1, 3, 2)
    add("conv2d_k1_s4", lambda x: tf.nn.conv2d(x, w1, 4, "SAME"), [F(1, 6, 7, 3)], "Conv2D")
    add("conv2d_explicit", lambda x: tf.nn.conv2d(x, w433, [1, 2, 3, 1], [[0, 0], [1, 2], [2, 0], [0, 0]]),
        [F(1, 9, 8, 3)], "Conv2D")
    wg = W(3, 3, 2, 6)
    add("conv2d_grouped", lambda x: tf.nn.conv2d(x, wg, 1, "SAME"), [F(1, 6, 6, 4)], "Conv2D")
    add("conv2d_nchw", lambda x: tf.nn.conv2d(x, w433, 2, "SAME", data_format="NCHW"), [F(1, 3, 9, 9)], "Conv2D",
        ref=_nhwc(lambda y: tf.nn.conv2d(y, w433, 2, "SAME")))
    add("conv2d_nchw_explicit",
        lambda x: tf.nn.conv2d(x, w433, 1, [[0, 0], [0, 0], [1, 0], [0, 2]], data_format="NCHW"), [F(1, 3, 7, 7)],
        "Conv2D", ref=_nhwc(lambda y: tf.nn.conv2d(y, w433, 1, [[0, 0], [1, 0], [0, 2], [0, 0]])))
    add("conv2d_dynamic_filter", lambda x, f: tf.nn.conv2d(x, f, 1, "VALID"), [F(1, 6, 6, 2), F(3, 3, 2, 3)],
        "Conv2D")
    wd = W(3, 3, 4, 2)
    add("depthwise_same", lambda x: tf.nn.depthwise_conv2d(x, wd, [1, 1, 1, 1], "SAME"), [F(1, 8, 8, 4)],
        "DepthwiseConv2dNative")
    add("depthwise_valid_s2", lambda x: tf.nn.depthwise_conv2d(x, wd, [1, 2, 2, 1], "VALID"), [F(1, 10, 9, 4)],
        "DepthwiseConv2dNative")
    add("depthwise_explicit_dil",
        lambda x: tf.raw_ops.DepthwiseConv2dNative(input=x, filter=wd, strides=[1, 1, 1, 1], padding="EXPLICIT",
                                                   explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0], dilations=[1, 2, 2, 1]),
        [F(1, 8, 8, 4)], "DepthwiseConv2dNative")
    add("depthwise_nchw",
        lambda x: tf.raw_ops.DepthwiseConv2dNative(input=x, filter=wd, strides=[1, 1, 1, 1], padding="SAME",
                                                   data_format="NCHW"), [F(1, 4, 6, 6)], "DepthwiseConv2dNative",
        ref=_nhwc(lambda y: tf.nn.depthwise_conv2d(y, wd, [1, 1, 1, 1], "SAME")))
    wt = W(3, 3, 5, 4)
    for nm, shape, s, pad, dil in (("same_s2", [1, 16, 16, 5], 2, "SAME", 1), ("same_s2_odd", [1, 15, 15, 5], 2,
                                                                                "SAME", 1),
                                   ("valid_s2", [1, 17, 17, 5], 2, "VALID", 1), ("valid_dil2", [1, 12, 12, 5], 1,
                                                                                  "VALID", 2),
                                   ("same_dil2", [1, 8, 8, 5], 1, "SAME", 2)):
        add(f"conv2d_transpose_{nm}",
            lambda x, shape=shape, s=s, pad=pad, dil=dil: tf.nn.conv2d_transpose(x, wt, shape, s, pad, dilations=dil),
            [F(1, 8, 8, 4)], "Conv2DBackpropInput")
    add("conv2d_transpose_explicit",
        lambda x: tf.raw_ops.Conv2DBackpropInput(input_sizes=[1, 16, 16, 5], filter=wt, out_backprop=x,
                                                 strides=[1, 2, 2, 1], padding="EXPLICIT",
                                                 explicit_paddings=[0, 0, 1, 0, 0, 1, 0, 0]),
        [F(1, 8, 8, 4)], "Conv2DBackpropInput")
    bias4 = W(4)
    add("bias_add", lambda x: tf.nn.bias_add(x, bias4), [F(1, 5, 5, 4)], "BiasAdd")
    add("bias_add_rank2", lambda x: tf.nn.bias_add(x, bias4), [F(3, 4)], "BiasAdd")
    add("bias_add_nchw", lambda x: tf.nn.bias_add(x, bias4, data_format="NCHW"), [F(1, 4, 3, 3)], "BiasAdd")
    sc, off, mu = W(4) + 1.0, W(4), W(4)
    var = tf.constant(_R.uniform(0.2, 2.0, 4).astype(np.float32))
    add("fused_batch_norm_v3",
        lambda x: tf.compat.v1.nn.fused_batch_norm(x, sc, off, mu, var, epsilon=1e-3, is_training=False)[0],
        [F(1, 5, 5, 4)], "FusedBatchNormV3")
    add("fused_batch_norm_v1",
        lambda x: tf.raw_ops.FusedBatchNorm(x=x, scale=sc, offset=off, mean=mu, variance=var, epsilon=1e-3,
                                            is_training=False)[0], [F(1, 5, 5, 4)], "FusedBatchNorm")
    add("fused_batch_norm_v2",
        lambda x: tf.raw_ops.FusedBatchNormV2(x=x, scale=sc, offset=off, mean=mu, variance=var, epsilon=1e-3,
                                              is_training=False)[0], [F(1, 5, 5, 4)], "FusedBatchNormV2")
    add("avg_pool_same", lambda x: tf.nn.avg_pool2d(x, 3, 2, "SAME"), [F(1, 7, 7, 3)], "AvgPool")
    add("avg_pool_valid", lambda x: tf.nn.avg_pool2d(x, 2, 2, "VALID"), [F(1, 8, 9, 3)], "AvgPool")
    add("avg_pool_nchw", lambda x: tf.nn.avg_pool2d(x, 2, 2, "VALID", data_format="NCHW"), [F(1, 3, 6, 6)],
        "AvgPool", ref=_nhwc(lambda y: tf.nn.avg_pool2d(y, 2, 2, "VALID")))
    add("max_pool_same", lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME"), [F(1, 7, 7, 3)], "MaxPool")
    add("max_pool_explicit", lambda x: tf.nn.max_pool2d(x, 3, 2, [[0, 0], [1, 1], [1, 0], [0, 0]]),
        [F(1, 8, 8, 3)], "MaxPool")
    add("max_pool_v2", lambda x: tf.raw_ops.MaxPoolV2(input=x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                                      padding="VALID"), [F(1, 6, 6, 2)], "MaxPoolV2")
    # -------------------------------------------------------------------------------------- matrix products
    add("matmul", lambda a, b: tf.matmul(a, b), [F(3, 5), F(5, 4)], "MatMul")
    add("matmul_ta_tb", lambda a, b: tf.matmul(a, b, transpose_a=True, transpose_b=True), [F(5, 3), F(4, 5)],
        "MatMul")
    w62 = W(6, 2)
    add("matmul_const", lambda a: tf.matmul(a, w62), [F(2, 6)], "MatMul")
    add("batch_matmul", lambda a, b: tf.matmul(a, b), [F(2, 3, 4), F(2, 4, 5)], "BatchMatMulV2")
    add("batch_matmul_adj_bcast", lambda a, b: tf.matmul(a, b, adjoint_a=True, adjoint_b=True),
        [F(2, 1, 4, 3), F(3, 5, 4)], "BatchMatMulV2")
    add("batch_matmul_v1", lambda a, b: tf.raw_ops.BatchMatMul(x=a, y=b), [F(2, 3, 4), F(2, 4, 2)], "BatchMatMul")
    for i, (eq, shapes) in enumerate((("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
                                      ("abc,cde->abde", [(2, 3, 4), (4, 2, 5)]),
                                      ("aecd,abcd->acbe", [(1, 5, 2, 4), (1, 3, 2, 4)]),
                                      ("acbe,aecd->abcd", [(1, 2, 3, 5), (1, 5, 2, 4)]),
                                      ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 2)]), ("ij->ji", [(3, 4)]),
                                      ("ij,ij->i", [(3, 4), (3, 4)]), ("i,j->ij", [(3,), (4,)]),
                                      ("bqhd,bkhd->bhqk", [(1, 3, 2, 4), (1, 5, 2, 4)]),
                                      ("ijk->k", [(2, 3, 4)]))):
        add(f"einsum_{i}_{eq.replace(',', '_').replace('->', '_to_').replace('.', 'E')}",
            lambda *xs, eq=eq: tf.einsum(eq, *xs), [F(*s) for s in shapes], "Einsum")
    # --------------------------------------------------------------------------------- softmax & activations
    add("softmax", lambda x: tf.nn.softmax(x), [F(2, 7, lo=-10, hi=10)], "Softmax")
    add("softmax_rank4", lambda x: tf.nn.softmax(x), [F(1, 3, 4, 5)], "Softmax")
    add("log_softmax", lambda x: tf.nn.log_softmax(x), [F(2, 7, lo=-10, hi=10)], "LogSoftmax")
    add("lrn", lambda x: tf.nn.local_response_normalization(x, 2, 1.0, 0.1, 0.75), [F(1, 3, 3, 8)], "LRN")
    add("relu", tf.nn.relu, [F(2, 9)], "Relu")
    add("relu6", tf.nn.relu6, [F(2, 9, lo=-8, hi=8)], "Relu6")
    add("elu", tf.nn.elu, [F(2, 9, lo=-4, hi=4)], "Elu")
    add("selu", tf.nn.selu, [F(2, 9, lo=-4, hi=4)], "Selu")
    add("leaky_relu", lambda x: tf.nn.leaky_relu(x, 0.2), [F(2, 9)], "LeakyRelu")
    add("leaky_relu_alpha_gt1", lambda x: tf.nn.leaky_relu(x, 1.5), [F(2, 9)], "LeakyRelu")
    add("sigmoid", tf.math.sigmoid, [F(2, 9, lo=-8, hi=8)], "Sigmoid")
    add("tanh", tf.math.tanh, [F(2, 9, lo=-4, hi=4)], "Tanh")
    add("softplus", tf.math.softplus, [F(2, 9, lo=-30, hi=30)], "Softplus")
    add("softplus_small", tf.math.softplus, [F(2, 9, lo=-2, hi=2)], "Softplus")
    add("softsign", tf.math.softsign, [F(2, 9, lo=-5, hi=5)], "Softsign")
    add("erf", tf.math.erf, [F(2, 9, lo=-3, hi=3)], "Erf")
    add("erfc", tf.math.erfc, [F(2, 9, lo=-3, hi=2)], "Erfc")
    add("gelu_exact", lambda x: tf.nn.gelu(x, approximate=False), [F(2, 9, lo=-4, hi=4)], "Erfc")
    add("gelu_tanh", lambda x: tf.nn.gelu(x, approximate=True), [F(2, 9, lo=-4, hi=4)], "Tanh")
    # ----------------------------------------------------------------------------------- fake quantization
    add("fake_quant_args", lambda x: tf.quantization.fake_quant_with_min_max_args(x, -1.0, 1.5),
        [F(2, 50, lo=-2, hi=2)], "FakeQuantWithMinMaxArgs", rtol=0.0)
    add("fake_quant_args_narrow4", lambda x: tf.quantization.fake_quant_with_min_max_args(
        x, -0.7, 2.3, num_bits=4, narrow_range=True), [F(2, 50, lo=-2, hi=3)], "FakeQuantWithMinMaxArgs", rtol=0.0)
    add("fake_quant_vars", lambda x: tf.quantization.fake_quant_with_min_max_vars(
        x, tf.constant(-0.3), tf.constant(0.8)), [F(3, 40, lo=-1, hi=1)], "FakeQuantWithMinMaxVars", rtol=0.0)
    add("fake_quant_per_channel", lambda x: tf.quantization.fake_quant_with_min_max_vars_per_channel(
        x, tf.constant([-1.0, -0.5, -2.0]), tf.constant([1.0, 0.25, 3.0])), [F(4, 5, 3, lo=-3, hi=3)],
        "FakeQuantWithMinMaxVarsPerChannel", rtol=0.0)
    # --------------------------------------------------------------------------------------- binary math
    add("add_bcast", lambda x, y: x + y, [F(1, 4, 4, 3), F(3)], "AddV2")
    add("add_v1", lambda x, y: tf.raw_ops.Add(x=x, y=y), [F(2, 3), F(2, 3)], "Add")
    add("add_int", lambda x, y: x + y, [I32(2, 5), I32(5)], "AddV2")
    add("sub", lambda x, y: x - y, [F(2, 1, 3), F(4, 1)], "Sub")
    add("mul", lambda x, y: x * y, [F(2, 3, 4), F(1, 4)], "Mul")
    add("mul_int", lambda x, y: x * y, [I32(2, 5), I32(2, 5)], "Mul")
    add("realdiv", lambda x, y: x / y, [F(2, 6), F(2, 6, lo=0.5, hi=3)], "RealDiv")
    add("div_int", lambda x, y: tf.raw_ops.Div(x=x, y=y), [I32(3, 8, lo=-50, hi=50), fixed(
        [[3, -3, 7, -7, 2, -2, 5, 1]] * 3, "int32")], "Div")
    add("maximum", tf.maximum, [F(2, 5), F(5)], "Maximum")
    add("minimum", tf.minimum, [F(2, 5), F(5)], "Minimum")
    add("pow", tf.pow, [F(2, 5, lo=0.1, hi=3), F(2, 5, lo=-2, hi=2)], "Pow")
    add("pow_int_exp", lambda x: tf.pow(x, 3.0), [F(2, 5)], "Pow")
    add("squared_difference", tf.math.squared_difference, [F(2, 5), F(5)], "SquaredDifference")
    add("floordiv", tf.math.floordiv, [F(3, 7, lo=-10, hi=10), F(3, 7, lo=0.5, hi=3)], "FloorDiv")
    add("floordiv_int", tf.math.floordiv, [I32(3, 8, lo=-50, hi=50), fixed([[3, -3, 7, -7, 2, -2, 5, 1]] * 3,
                                                                           "int32")], "FloorDiv")
    add("floormod", tf.math.floormod, [F(3, 7, lo=-10, hi=10), F(3, 7, lo=0.5, hi=3)], "FloorMod")
    add("floormod_int", tf.math.floormod, [I32(3, 8, lo=-50, hi=50), fixed([[3, -3, 7, -7, 2, -2, 5, 1]] * 3,
                                                                           "int32")], "FloorMod")
    add("truncatediv_int", tf.truncatediv, [I32(3, 8, lo=-50, hi=50), fixed([[3, -3, 7, -7, 2, -2, 5, 1]] * 3,
                                                                                 "int32")], "TruncateDiv")
    add("truncatediv_float", tf.truncatediv, [F(3, 7, lo=-10, hi=10), F(3, 7, lo=0.5, hi=3)], "TruncateDiv")
    add("divnonan", tf.math.divide_no_nan, [F(2, 5), fixed([[0, 1, -2, 0, 0.5]] * 2)], "DivNoNan")
    add("mulnonan", tf.math.multiply_no_nan, [F(2, 5), fixed([[0, 1, -2, 0, 0.5]] * 2)], "MulNoNan")
    add("addn", lambda a, b, d: tf.math.add_n([a, b, d]), [F(2, 3), F(2, 3), F(2, 3)], "AddN")
    # ------------------------------------------------------------------------------------------------- unary
    for nm, fn, inp, op in (("abs", tf.abs, F(2, 9), "Abs"), ("abs_int", tf.abs, I32(2, 9), "Abs"),
                            ("neg", tf.negative, F(2, 9), "Neg"), ("exp", tf.exp, F(2, 9, lo=-5, hi=5), "Exp"),
                            ("log", tf.math.log, F(2, 9, lo=0.01, hi=10), "Log"),
                            ("floor", tf.floor, F(2, 9, lo=-5, hi=5), "Floor"),
                            ("ceil", tf.math.ceil, F(2, 9, lo=-5, hi=5), "Ceil"),
                            ("rsqrt", tf.math.rsqrt, F(2, 9, lo=0.01, hi=10), "Rsqrt"),
                            ("sqrt", tf.sqrt, fixed([[0.0, 0.25, 1.0, 2.0, 1e-6, 100.0, 3.0, 7.5, 1e6]]), "Sqrt"),
                            ("square", tf.square, F(2, 9), "Square"), ("sin", tf.sin, F(2, 9, lo=-6, hi=6), "Sin"),
                            ("cos", tf.cos, F(2, 9, lo=-6, hi=6), "Cos"),
                            ("round", tf.round, fixed([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51, 3.7]]),
                             "Round"),
                            ("sign", tf.sign, fixed([[-2.0, 0.0, 3.0, -0.0, 1e-30]]), "Sign"),
                            ("reciprocal", tf.math.reciprocal, F(2, 9, lo=0.5, hi=4), "Reciprocal"),
                            ("log1p", tf.math.log1p, fixed([[-0.9, -1e-7, 0.0, 1e-8, 3e-4, 0.5, 2.0, 100.0]]),
                             "Log1p"),
                            ("expm1", tf.math.expm1, fixed([[-3.0, -1e-6, 0.0, 1e-8, 3e-4, 0.3, 2.0]]), "Expm1"),
                            ("is_finite", tf.math.is_finite, fixed([[1.0, np.inf, -np.inf, np.nan, 0.0]]),
                             "IsFinite"),
                            ("is_nan", tf.math.is_nan, fixed([[1.0, np.inf, -np.inf, np.nan, 0.0]]), "IsNan"),
                            ("is_inf", tf.math.is_inf, fixed([[1.0, np.inf, -np.inf, np.nan, 0.0]]), "IsInf"),
                            ("logical_not", tf.logical_not, B(3, 4), "LogicalNot")):
        add(nm, fn, [inp], op)
    add("clip_const", lambda x: tf.raw_ops.ClipByValue(t=x, clip_value_min=-0.5, clip_value_max=1.0), [F(3, 6)],
        "ClipByValue")
    add("clip_tensor", lambda x, lo: tf.raw_ops.ClipByValue(t=x, clip_value_min=lo, clip_value_max=1.0),
        [F(3, 6), F(3, 6, lo=-1, hi=0)], "ClipByValue")
    # ------------------------------------------------------------------------------------ compare & logic
    for nm, fn, op in (("equal", tf.equal, "Equal"), ("not_equal", tf.not_equal, "NotEqual"),
                       ("greater", tf.greater, "Greater"), ("greater_equal", tf.greater_equal, "GreaterEqual"),
                       ("less", tf.less, "Less"), ("less_equal", tf.less_equal, "LessEqual")):
        add(nm, fn, [I32(3, 5, lo=-2, hi=2), I32(5, lo=-2, hi=2)], op)
        add(nm + "_float", fn, [F(3, 5), fixed([0.5, np.nan, -1.0, 0.0, 2.0])], op)
    add("logical_and", tf.logical_and, [B(3, 4), B(4)], "LogicalAnd")
    add("logical_or", tf.logical_or, [B(3, 4), B(3, 4)], "LogicalOr")
    add("bitwise_and", tf.bitwise.bitwise_and, [I32(3, 4, lo=-100, hi=100), I32(3, 4, lo=-100, hi=100)],
        "BitwiseAnd")
    add("bitwise_or", tf.bitwise.bitwise_or, [I32(3, 4, lo=-100, hi=100), I32(4, lo=-100, hi=100)], "BitwiseOr")
    add("bitwise_xor", tf.bitwise.bitwise_xor, [I32(3, 4, lo=-100, hi=100), I32(3, 4, lo=-100, hi=100)],
        "BitwiseXor")
    add("left_shift", tf.bitwise.left_shift, [I32(3, 4, lo=-100, hi=100), I32(3, 4, lo=0, hi=8)], "LeftShift")
    add("right_shift", tf.bitwise.right_shift, [I32(3, 4, lo=-1000, hi=1000), I32(3, 4, lo=0, hi=8)], "RightShift")
    add("invert", tf.bitwise.invert, [I32(3, 4, lo=-100, hi=100)], "Invert")
    # ------------------------------------------------------------------------------------------ reductions
    add("mean", lambda x: tf.reduce_mean(x, [1, 2], keepdims=True), [F(1, 4, 5, 3)], "Mean")
    add("mean_neg_axis", lambda x: tf.reduce_mean(x, -1), [F(2, 3, 6)], "Mean")
    add("sum", lambda x: tf.reduce_sum(x, [0, 2]), [F(2, 3, 4)], "Sum")
    add("sum_int", lambda x: tf.reduce_sum(x, 1), [I32(3, 4)], "Sum")
    add("max", lambda x: tf.reduce_max(x, 1, keepdims=True), [F(2, 5, 3)], "Max")
    add("min", lambda x: tf.reduce_min(x, [0, 1]), [F(2, 5, 3)], "Min")
    add("prod", lambda x: tf.reduce_prod(x, 1), [F(2, 5, 3, lo=0.5, hi=1.5)], "Prod")
    add("all", lambda x: tf.reduce_all(x, 1), [B(3, 4)], "All")
    add("any", lambda x: tf.reduce_any(x, [0, 1], keepdims=True), [B(3, 4)], "Any")
    add("argmax", lambda x: tf.argmax(x, 1), [F(3, 7)], "ArgMax")
    add("argmin", lambda x: tf.argmin(x, -1, output_type=tf.int32), [F(3, 4, 7)], "ArgMin")
    # ------------------------------------------------------------------------------------ shape and layout
    add("reshape", lambda x: tf.reshape(x, [3, -1]), [F(2, 3, 4)], "Reshape")
    add("reshape_dynamic_shape", lambda x: tf.reshape(x, [tf.raw_ops.Shape(input=x)[0], -1]), [F(2, 3, 4)], "Shape")
    add("squeeze", lambda x: tf.squeeze(x, [0, 2]), [F(1, 3, 1, 4)], "Squeeze")
    add("squeeze_all", tf.squeeze, [F(1, 3, 1, 4)], "Squeeze")
    add("expand_dims", lambda x: tf.expand_dims(x, -1), [F(3, 4)], "ExpandDims")
    add("transpose", lambda x: tf.transpose(x, [2, 0, 1]), [F(2, 3, 4)], "Transpose")
    add("concat", lambda a, b, d: tf.concat([a, b, d], -1), [F(2, 3), F(2, 1), F(2, 4)], "ConcatV2")
    add("concat_int", lambda a, b: tf.concat([a, b], 0), [I32(2, 3), I32(1, 3)], "ConcatV2")
    add("pack", lambda a, b: tf.stack([a, b], 1), [F(2, 3), F(2, 3)], "Pack")
    add("unpack", lambda x: tf.unstack(x, axis=1), [F(2, 3, 4)], "Unpack")
    add("split", lambda x: tf.split(x, 3, axis=1), [F(2, 6, 2)], "Split")
    add("split_v", lambda x: tf.split(x, [1, -1, 2], axis=-1), [F(2, 7)], "SplitV")
    add("slice", lambda x: tf.slice(x, [0, 1, 2], [-1, 2, 3]), [F(2, 4, 6)], "Slice")
    for i, sl in enumerate((lambda x: x[:, 1:5:2, ::-1], lambda x: x[..., 0], lambda x: x[:, tf.newaxis, 2:],
                            lambda x: x[1, -3:, ::3], lambda x: x[-1:0:-2, ..., 1:2],
                            lambda x: tf.strided_slice(x, [0, 1, 0], [2, 3, 4], [1, 1, 1], begin_mask=2,
                                                       shrink_axis_mask=2))):
        add(f"strided_slice_{i}", sl, [F(3, 6, 5)], "StridedSlice")
    add("reverse", lambda x: tf.reverse(x, [0, -1]), [F(2, 3, 4)], "ReverseV2")
    add("pad", lambda x: tf.pad(x, [[0, 1], [2, 0], [1, 1]]), [F(2, 3, 4)], "Pad")
    add("pad_v2", lambda x: tf.pad(x, [[1, 1], [0, 2]], constant_values=-3.5), [F(2, 3)], "PadV2")
    add("mirror_pad_reflect", lambda x: tf.pad(x, [[1, 2], [2, 1]], "REFLECT"), [F(4, 5)], "MirrorPad")
    add("mirror_pad_symmetric", lambda x: tf.pad(x, [[0, 2], [3, 1]], "SYMMETRIC"), [F(4, 5)], "MirrorPad")
    add("tile", lambda x: tf.tile(x, [2, 1, 3]), [F(2, 3, 2)], "Tile")
    add("gather", lambda x: tf.gather(x, [2, 0, 2, 1], axis=1), [F(2, 3, 4)], "GatherV2")
    add("gather_batch_dims", lambda x: tf.gather(x, [[1, 0], [2, 2]], axis=1, batch_dims=1), [F(2, 3, 4)],
        "GatherV2")
    add("gather_dynamic", lambda x, i: tf.gather(x, i), [F(5, 3), I32(4, lo=0, hi=5)], "GatherV2")
    add("gather_v1", lambda x: tf.raw_ops.Gather(params=x, indices=[1, 0, 1]), [F(3, 4)], "Gather")
    add("gather_nd", lambda x: tf.gather_nd(x, [[0, 1], [1, 2], [0, 0]]), [F(2, 3, 4)], "GatherNd")
    add("gather_nd_dynamic", lambda x, i: tf.gather_nd(x, i), [F(3, 4, 2), I32(5, 2, lo=0, hi=3)], "GatherNd")
    add("depth_to_space", lambda x: tf.nn.depth_to_space(x, 2), [F(1, 3, 4, 8)], "DepthToSpace")
    add("space_to_depth", lambda x: tf.nn.space_to_depth(x, 2), [F(1, 4, 6, 3)], "SpaceToDepth")
    add("space_to_batch_nd", lambda x: tf.space_to_batch_nd(x, [2, 2], [[1, 1], [0, 2]]), [F(1, 4, 4, 3)],
        "SpaceToBatchND")
    add("batch_to_space_nd", lambda x: tf.compat.v1.batch_to_space_nd(x, [2, 2], [[1, 0], [0, 1]]),
        [F(4, 3, 3, 2)], "BatchToSpaceND")
    add("broadcast_to", lambda x: tf.broadcast_to(x, [2, 3, 4]), [F(3, 1)], "BroadcastTo")
    add("broadcast_args", lambda x: tf.broadcast_to(x, tf.raw_ops.BroadcastArgs(
        s0=tf.raw_ops.Shape(input=x), s1=tf.constant([2, 1, 1]))), [F(3, 1)], "BroadcastArgs")
    for mode, kw in (("default", {}), ("align", {"align_corners": True}), ("half", {"half_pixel_centers": True})):
        add(f"resize_bilinear_{mode}", lambda x, kw=kw: tf.compat.v1.image.resize_bilinear(x, [7, 10], **kw),
            [F(1, 4, 5, 2)], "ResizeBilinear")
        add(f"resize_nearest_{mode}",
            lambda x, kw=kw: tf.compat.v1.image.resize_nearest_neighbor(x, [7, 10], **kw), [F(1, 4, 5, 2)],
            "ResizeNearestNeighbor")
    # ---------------------------------------------------------------------------------------- types & select
    add("cast_f2i", lambda x: tf.cast(x, tf.int32), [fixed([[-2.7, -0.5, 0.0, 0.5, 1.9, 3.0, -3.0]])], "Cast")
    add("cast_i2f", lambda x: tf.cast(x, tf.float32), [I32(2, 5, lo=-100, hi=100)], "Cast")
    add("cast_b2f", lambda x: tf.cast(x, tf.float32), [B(2, 5)], "Cast")
    add("cast_f2b", lambda x: tf.cast(x, tf.bool), [fixed([[0.0, -0.0, 1.0, -2.0, 0.1]])], "Cast")
    add("cast_i64_roundtrip", lambda x: tf.cast(tf.argmax(x, 1), tf.float32), [F(3, 5)], "Cast")
    add("select_v1_rows", lambda c, a, b: tf.raw_ops.Select(condition=c, x=a, y=b), [B(3), F(3, 4), F(3, 4)],
        "Select")
    add("select_v2", tf.where, [B(3, 1), F(3, 4), F(4)], "SelectV2")
    add("fill", lambda x: tf.fill([2, 3], x), [F()], "Fill")
    add("zeros_like", lambda x: tf.raw_ops.ZerosLike(x=x) + x, [F(2, 3)], "ZerosLike")
    add("ones_like", lambda x: tf.raw_ops.OnesLike(x=x) * x, [F(2, 3)], "OnesLike")
    add("range", lambda x: tf.cast(tf.range(2, 11, 3), tf.float32) + x, [F(3)], "Range")
    add("rank", lambda x: tf.cast(tf.raw_ops.Rank(input=x), tf.float32) + x, [F(2, 3)], "Rank")
    add("size", lambda x: tf.cast(tf.raw_ops.Size(input=x), tf.float32) * x, [F(2, 3)], "Size")
    add("shape_n", lambda x, y: tf.cast(tf.raw_ops.ShapeN(input=[x, y])[1], tf.float32) + x[0, :2],
        [F(2, 3), F(4, 2)], "ShapeN")
    add("one_hot", lambda i: tf.one_hot(i, 5, 2.0, -1.0), [I32(2, 3, lo=-1, hi=6)], "OneHot")
    add("one_hot_axis0", lambda i: tf.one_hot(i, 4, axis=0), [I32(3, lo=0, hi=4)], "OneHot")
    add("identity_chain", lambda x: tf.identity(tf.stop_gradient(x)) * 2.0, [F(2, 3)], "Mul")
    # ---------------------------------------------- FFT (the complex result read by ComplexAbs / Real / Imag)
    add("rfft_abs", lambda x: tf.abs(tf.signal.rfft(x, fft_length=[16])), [F(2, 16)], "RFFT")
    add("rfft_padded_abs", lambda x: tf.abs(tf.signal.rfft(x, fft_length=[16])), [F(3, 11)], "ComplexAbs")
    add("rfft_cropped_real", lambda x: tf.math.real(tf.signal.rfft(x, fft_length=[8])), [F(2, 10)], "Real")
    add("rfft_imag", lambda x: tf.math.imag(tf.signal.rfft(x)), [F(2, 32)], "Imag")
    # ------------------------------------------------ TensorLists (outside loops; in loops: test_tf_control.py)
    def tlist(x: Any) -> Any:
        return tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([3], tf.int32))

    add("tensor_list_get_item", lambda x: tf.raw_ops.TensorListGetItem(
        input_handle=tlist(x), index=2, element_shape=[3], element_dtype=tf.float32) * 2.0, [F(4, 3)],
        "TensorListGetItem")
    add("tensor_list_set_item", lambda x, y: tf.raw_ops.TensorListStack(input_handle=tf.raw_ops.TensorListSetItem(
        input_handle=tlist(x), index=1, item=y), element_shape=[3], element_dtype=tf.float32), [F(4, 3), F(3)],
        "TensorListSetItem")
    add("tensor_list_length", lambda x: x * tf.cast(tf.raw_ops.TensorListLength(input_handle=tlist(x)),
                                                   tf.float32), [F(4, 3)], "TensorListLength")
    add("tensor_list_element_shape", lambda x: x + tf.cast(tf.raw_ops.TensorListElementShape(
        input_handle=tlist(x), shape_type=tf.int32), tf.float32), [F(4, 3)], "TensorListElementShape")
    return c


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_tf_op(case: Case) -> None:
    res = run_case(case)
    if os.environ.get("TF2TOSA_RECORD", "1") != "0":
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with open(RESULTS, "a") as f:
            f.write(json.dumps({"name": case.name, "op": case.op, "rel": res.rel, "bound": case.rtol,
                                "bound_use": res.bound_use, "mismatches": res.mismatches, "validated": res.validated,
                                "ops": res.tosa_ops}) + "\n")
    assert res.mismatches == 0, f"{case.name}: {res.mismatches} integer/bool mismatches vs TF"
    if case.rtol is not None:  # a pinned bound (0.0: FakeQuant outputs sit on the quantization grid, exactly)
        assert res.rel <= case.rtol, f"{case.name}: max rel error {res.rel:.3g} > {case.rtol:g}"
    assert res.bound_use <= 1.0, (f"{case.name}: TF vs our fp64 run is {res.bound_use:.3g} x the fp32 bound "
                                  f"(tests/e2e.py fp32_bound)")


def test_every_tf_rule_has_a_case() -> None:
    """Each registered tf.* rule (except pure plumbing) is exercised by at least one case above."""
    from tf2tosa.legalizations.registry import all_rules

    covered = {f"tf.{c.op}" for c in CASES}
    plumbing = {"tf.Const", "tf.Identity", "tf.IdentityN", "tf.StopGradient", "tf.Snapshot", "tf.PreventGradient",
                "tf.EnsureShape", "tf.PlaceholderWithDefault", "tf.CheckNumerics", "tf.NoOp", "tf.Placeholder"}
    indirect = {"tf.Gelu", "tf.Inv", "tf.BiasAddV1", "tf.Concat", "tf.Reverse", "tf.ConjugateTranspose",
                "tf.BatchMatMulV3"}  # same code path as a covered op, or no public TF API emits them
    # control flow, TensorLists inside loops and kept resource variables: tests/test_tf_control.py; calls left by
    # freezing: tests/test_tf_frontend.py
    control = {"tf.While", "tf.StatelessWhile", "tf.If", "tf.StatelessIf", "tf.PartitionedCall",
               "tf.StatefulPartitionedCall", "tf.TensorListReserve",
               "tf.TensorListFromTensor", "tf.TensorListStack", "tf.VarHandleOp", "tf.ReadVariableOp",
               "tf.AssignVariableOp", "tf.AssignAddVariableOp", "tf.AssignSubVariableOp"}
    missing = sorted(n for n in all_rules() if n.startswith("tf.") and n not in covered | plumbing | indirect | control)
    assert not missing, f"tf rules without a test case: {missing}"
