"""Unit tests of the float tfl rules (tfl_nn, tfl_math, tfl_activation, tfl_reduce).

Each test builds a one-op tfl-dialect graph by hand, legalizes it with the pipeline, runs the TOSA graph in
our executor, and compares with an independent oracle: TensorFlow ops on the same inputs (numpy for the few
ops where TF's kernel *is* the definition, e.g. round half to even).

Bounds: conv/pool/matmul/reduce/elementwise results are compared with rtol 1e-5 and an absolute floor
(1e-5 * max|ref|) for values near 0 that come out of sums with cancellation; transcendental rules
(softmax, gelu, elu, sqrt) use rtol 2e-5 (a few ulp of the spec's EXP/ERF/RSQRT bounds compounded).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from tf2tosa.converter.pipeline import convert_graph, legalize_graph
from tf2tosa.executor import run
from tf2tosa.ir import DType, Graph, QuantParams, TensorType, Value

tf = pytest.importorskip("tensorflow")

RNG = np.random.default_rng(1234)


def _t(shape: Sequence[int], dtype: DType = DType.FP32, quant: QuantParams | None = None) -> TensorType:
    return TensorType(tuple(shape), dtype, quant)


class OneOp:
    """A one-op tfl graph: inputs are float tensors or constants (``np.ndarray`` marked const)."""

    def __init__(self) -> None:
        self.g = Graph()
        self.feeds: list[np.ndarray] = []

    def input(self, arr: np.ndarray, dtype: DType | None = None) -> Value:
        dt = dtype or {np.dtype(np.float32): DType.FP32, np.dtype(np.int32): DType.INT32,
                       np.dtype(np.bool_): DType.BOOL}[arr.dtype]
        v = self.g.add_input(f"in{len(self.feeds)}", _t(arr.shape, dt))
        self.feeds.append(arr)
        return v

    def const(self, arr: np.ndarray, dtype: DType | None = None) -> Value:
        return self.g.add_const(np.asarray(arr), dtype, name="w", op_name="tfl.const")

    def no_value(self) -> Value:
        return self.g.add_op("tfl.no_value", [], [_t([], DType.FP32)]).result

    def op(self, name: str, operands: Sequence[Value], out: TensorType | Sequence[TensorType],
           **attrs: Any) -> None:
        outs = [out] if isinstance(out, TensorType) else list(out)
        o = self.g.add_op(name, operands, outs, attrs)
        self.g.outputs = list(o.results)

    def run(self) -> list[np.ndarray]:
        legalize_graph(self.g)
        for op in self.g.topological_order():
            assert op.name.startswith("tosa."), op
        res = run(self.g, self.feeds)
        outs = list(res.values())
        _LAST[:] = [self.g, self.feeds, outs]
        return outs

    def run_with_arm_tools(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Full pipeline, then tosa-opt validation and the Arm reference model; (ours, reference model)."""
        from tf2tosa.api import TosaModel
        from tf2tosa.verify import tosa_tools

        if not tosa_tools.available():
            pytest.skip("tosa-tools environment not available")
        convert_graph(self.g)
        model = TosaModel(self.g)
        data = model.to_bytes()
        ok, msg = tosa_tools.validate(data, model.profiles, model.extensions)
        assert ok, msg
        ours = list(run(self.g, self.feeds).values())
        arm = list(tosa_tools.run_reference(data, self.feeds).values())
        return ours, arm


#: (graph, feeds, outputs) of the last OneOp.run: close() measures the reference against that graph's fp64 run
_LAST: list[Any] = []


def close(got: np.ndarray, ref: Any) -> None:
    """``got``, an output of the last OneOp.run, against ``ref`` (TF / numpy): integers equal; floats: ``ref`` within
    the derived fp32 bound of that graph's fp64 run (tests/e2e.py fp32_bound: TF is another fp32 implementation)."""
    ref = np.asarray(ref)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if ref.dtype.kind in "biu":
        np.testing.assert_array_equal(got, ref)
        return
    assert _LAST and any(got is o for o in _LAST[2]), "close() compares an output of the last OneOp.run"
    from tests.e2e import fp32_bound, fp32_noise

    g, feeds, outs = _LAST
    if not isinstance(feeds, dict):
        feeds = {v.name: a for v, a in zip(g.inputs, feeds)}
    v = g.outputs[next(i for i, o in enumerate(outs) if got is o)]
    o64 = np.asarray(run(g, feeds, precise=True)[v.name], np.float64)
    r64 = ref.astype(np.float64)
    assert np.array_equal(np.isnan(r64), np.isnan(o64)), "NaNs differ"
    fin = np.isfinite(r64) & np.isfinite(o64)
    assert np.array_equal(np.isfinite(r64), np.isfinite(o64)) and np.array_equal(r64[~fin & ~np.isnan(r64)],
                                                                                 o64[~fin & ~np.isnan(o64)])
    bound = fp32_bound(got, o64, v.dtype, fp32_noise(g, feeds).get(v.name, 0.0))
    err = float(np.abs(r64[fin] - o64[fin]).max()) if fin.any() else 0.0
    assert err <= bound, f"reference vs our fp64 run: {err:.3g} > the derived fp32 bound {bound:.3g}"


def rand(*shape: int, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def one_unary(name: str, x: np.ndarray, out_shape: Sequence[int] | None = None, **attrs: Any) -> np.ndarray:
    m = OneOp()
    v = m.input(x)
    m.op(name, [v], _t(out_shape if out_shape is not None else x.shape, v.dtype), **attrs)
    return m.run()[0]


# ------------------------------------------------------------------------------------------------ convolutions
CONV_CASES = [
    # (N, H, W, C, OC, KH, KW, stride, dilation, padding)
    (1, 8, 8, 3, 4, 3, 3, (1, 1), (1, 1), "SAME"),
    (2, 9, 7, 2, 5, 3, 2, (2, 2), (1, 1), "SAME"),
    (1, 10, 10, 3, 2, 3, 3, (3, 2), (1, 1), "VALID"),   # 10-3 % 3 != 0: exact-division fix (§6.2)
    (1, 6, 6, 2, 3, 1, 1, (4, 4), (1, 1), "SAME"),      # k < s: negative pad → SLICE
    (1, 9, 9, 2, 3, 3, 3, (1, 1), (2, 2), "SAME"),
    (1, 7, 8, 4, 4, 2, 3, (2, 1), (2, 1), "VALID"),
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("act", ["NONE", "RELU6"])
def test_conv_2d(case: tuple[Any, ...], act: str) -> None:
    n, h, w, c, oc, kh, kw, (sh, sw), (dh, dw), padding = case
    x, wt, bias = rand(n, h, w, c), rand(oc, kh, kw, c), rand(oc)
    ref = tf.nn.conv2d(x, np.transpose(wt, (1, 2, 3, 0)), strides=[1, sh, sw, 1], padding=padding,
                       dilations=[1, dh, dw, 1]).numpy() + bias
    if act == "RELU6":
        ref = np.clip(ref, 0, 6)
    m = OneOp()
    m.op("tfl.conv_2d", [m.input(x), m.const(wt), m.const(bias)], _t(ref.shape), padding=padding, stride_h=sh,
         stride_w=sw, dilation_h_factor=dh, dilation_w_factor=dw, fused_activation_function=act)
    close(m.run()[0], ref)


def test_conv_2d_no_bias_grouped() -> None:
    x, wt = rand(1, 6, 6, 4), rand(6, 3, 3, 2)   # 2 groups of 2 input channels → 3 outputs each
    ref = tf.nn.conv2d(x, np.transpose(wt, (1, 2, 3, 0)), strides=1, padding="SAME").numpy()
    m = OneOp()
    m.op("tfl.conv_2d", [m.input(x), m.const(wt), m.no_value()], _t(ref.shape), padding="SAME", stride_h=1,
         stride_w=1, dilation_h_factor=1, dilation_w_factor=1, fused_activation_function="NONE")
    close(m.run()[0], ref)


@pytest.mark.parametrize("mult", [1, 2])
@pytest.mark.parametrize("case", CONV_CASES[:5])
def test_depthwise_conv_2d(case: tuple[Any, ...], mult: int) -> None:
    n, h, w, c, _, kh, kw, (sh, sw), (dh, dw), padding = case
    x, wt, bias = rand(n, h, w, c), rand(kh, kw, c, mult), rand(c * mult)
    if (sh, sw) != (1, 1) and (dh, dw) != (1, 1):
        pytest.skip("TF depthwise needs stride 1 with dilation")
    ref = tf.nn.depthwise_conv2d(x, wt, strides=[1, sh, sw, 1], padding=padding, dilations=[dh, dw]).numpy() + bias
    m = OneOp()
    m.op("tfl.depthwise_conv_2d", [m.input(x), m.const(wt.reshape(1, kh, kw, c * mult)), m.const(bias)],
         _t(ref.shape), padding=padding, stride_h=sh, stride_w=sw, dilation_h_factor=dh, dilation_w_factor=dw,
         depth_multiplier=mult, fused_activation_function="NONE")
    close(m.run()[0], ref)


@pytest.mark.parametrize("case", [
    # (N, IH, IW, IC, OC, KH, KW, stride, padding, OH, OW)
    (1, 4, 4, 3, 2, 3, 3, (2, 2), "SAME", 8, 8),
    (1, 4, 5, 2, 3, 3, 3, (2, 2), "VALID", 9, 11),
    (2, 3, 3, 2, 2, 2, 2, (2, 2), "SAME", 6, 6),
    (1, 5, 5, 2, 2, 3, 3, (1, 1), "SAME", 5, 5),
    (1, 3, 4, 2, 2, 3, 2, (3, 2), "SAME", 8, 7),   # output smaller than (IH-1)*s+K with SAME
    (1, 4, 4, 1, 1, 5, 5, (2, 2), "VALID", 12, 12),  # output bigger than (IH-1)*s+K: positive out_pad
])
@pytest.mark.parametrize("with_bias", [False, True])
def test_transpose_conv(case: tuple[Any, ...], with_bias: bool) -> None:
    n, ih, iw, ic, oc, kh, kw, (sh, sw), padding, oh, ow = case
    x, wt, bias = rand(n, ih, iw, ic), rand(oc, kh, kw, ic), rand(oc)
    ref = tf.nn.conv2d_transpose(x, np.transpose(wt, (1, 2, 0, 3)), output_shape=[n, oh, ow, oc],
                                 strides=[1, sh, sw, 1], padding=padding).numpy()
    m = OneOp()
    operands = [m.const(np.array([n, oh, ow, oc], np.int32)), m.const(wt), m.input(x)]
    if with_bias:
        ref = ref + bias
        operands.append(m.const(bias))
    m.op("tfl.transpose_conv", operands, _t(ref.shape), padding=padding, stride_h=sh, stride_w=sw,
         fused_activation_function="NONE")
    close(m.run()[0], ref)


@pytest.mark.parametrize("xshape,keep", [((3, 10), False), ((2, 3, 10), False), ((2, 3, 10), True), ((10,), False)])
@pytest.mark.parametrize("bias", [False, True])
def test_fully_connected(xshape: tuple[int, ...], keep: bool, bias: bool) -> None:
    x, wt, bv = rand(*xshape), rand(7, 10), rand(7)
    ref = x.reshape(-1, 10) @ wt.T + (bv if bias else 0)
    if keep:
        ref = ref.reshape(*xshape[:-1], 7)
    m = OneOp()
    m.op("tfl.fully_connected", [m.input(x), m.const(wt), m.const(bv) if bias else m.no_value()], _t(ref.shape),
         fused_activation_function="RELU", weights_format="DEFAULT", keep_num_dims=keep)
    close(m.run()[0], np.maximum(ref, 0))


@pytest.mark.parametrize("xs,ys,adj_x,adj_y,const_y", [
    ((3, 4), (4, 5), False, False, False),
    ((2, 3, 4), (2, 4, 5), False, False, False),
    ((2, 3, 4), (4, 5), False, False, True),
    ((2, 1, 3, 4), (5, 5, 4), False, True, False),
    ((2, 4, 3), (2, 5, 4), True, True, False),
    ((1, 4, 3), (3, 2, 4, 5), True, False, True),
    ((2, 3, 4, 5), (4, 6), True, False, True),
    ((3, 4), (5, 4), False, True, True),
    ((4, 3), (1, 1, 4, 2), True, False, False),
])
def test_batch_matmul(xs: tuple[int, ...], ys: tuple[int, ...], adj_x: bool, adj_y: bool, const_y: bool) -> None:
    x, y = rand(*xs), rand(*ys)
    ref = tf.linalg.matmul(x, y, adjoint_a=adj_x, adjoint_b=adj_y).numpy()
    m = OneOp()
    m.op("tfl.batch_matmul", [m.input(x), m.const(y) if const_y else m.input(y)], _t(ref.shape), adj_x=adj_x,
         adj_y=adj_y)
    close(m.run()[0], ref)


POOL_CASES = [
    # (N, H, W, C, KH, KW, stride, padding)
    (1, 8, 8, 3, 2, 2, (2, 2), "VALID"),
    (2, 7, 9, 2, 3, 3, (2, 2), "SAME"),
    (1, 10, 10, 1, 3, 2, (3, 3), "VALID"),
    (1, 5, 6, 2, 3, 3, (1, 1), "SAME"),
    (1, 6, 6, 2, 1, 1, (4, 4), "SAME"),
]


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("kind", ["avg", "max"])
def test_pool(case: tuple[Any, ...], kind: str) -> None:
    n, h, w, c, kh, kw, (sh, sw), padding = case
    x = rand(n, h, w, c)
    fn = tf.nn.avg_pool2d if kind == "avg" else tf.nn.max_pool2d
    ref = fn(x, ksize=[kh, kw], strides=[sh, sw], padding=padding).numpy()
    m = OneOp()
    m.op(f"tfl.{'average' if kind == 'avg' else 'max'}_pool_2d", [m.input(x)], _t(ref.shape), padding=padding,
         stride_h=sh, stride_w=sw, filter_height=kh, filter_width=kw, fused_activation_function="RELU_N1_TO_1")
    close(m.run()[0], np.clip(ref, -1, 1))


# ----------------------------------------------------------------------------------------------- elementwise
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "tfl.add": tf.math.add, "tfl.sub": tf.math.subtract, "tfl.mul": tf.math.multiply, "tfl.div": tf.math.divide,
    "tfl.maximum": tf.math.maximum, "tfl.minimum": tf.math.minimum,
    "tfl.squared_difference": tf.math.squared_difference, "tfl.floor_div": tf.math.floordiv,
    "tfl.floor_mod": tf.math.floormod, "tfl.pow": tf.math.pow,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (2, 1, 5))])
def test_binary_float(name: str, shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    lo = 0.1 if name == "tfl.pow" else -3.0
    x, y = rand(*shapes[0], lo=lo, hi=3.0), rand(*shapes[1], lo=-3.0, hi=3.0)
    if name in ("tfl.div", "tfl.floor_div", "tfl.floor_mod"):
        y = np.where(np.abs(y) < 0.2, 0.5, y).astype(np.float32)
    ref = BINARY[name](x, y).numpy()
    m = OneOp()
    attrs = {"fused_activation_function": "NONE"} if name in ("tfl.add", "tfl.sub", "tfl.mul", "tfl.div") else {}
    m.op(name, [m.input(x), m.input(y)], _t(ref.shape), **attrs)
    got = m.run()[0]
    if name in ("tfl.floor_div", "tfl.floor_mod"):
        # x*(1/y) may land on the other side of an integer quotient (≤ 1.5 ulp): allow those rare points
        bad = ~np.isclose(got, ref, rtol=1e-5, atol=1e-5)
        assert bad.mean() < 0.01, (got[bad], ref[bad])
        return
    close(got, ref)


@pytest.mark.parametrize("name", ["tfl.add", "tfl.sub", "tfl.mul", "tfl.div", "tfl.maximum", "tfl.minimum",
                                  "tfl.floor_div", "tfl.floor_mod", "tfl.squared_difference"])
def test_binary_int32(name: str) -> None:
    x = RNG.integers(-50, 50, size=(3, 4)).astype(np.int32)
    y = RNG.integers(-9, 9, size=(4,)).astype(np.int32)
    y[y == 0] = 3
    if name == "tfl.div":
        ref = np.trunc(x / y).astype(np.int32)  # TFLite int32 div truncates (C++ '/')
    else:
        ref = BINARY[name](x, y).numpy()
    m = OneOp()
    attrs = {"fused_activation_function": "NONE"} if name in ("tfl.add", "tfl.sub", "tfl.mul", "tfl.div") else {}
    m.op(name, [m.input(x), m.input(y)], _t(ref.shape, DType.INT32), **attrs)
    close(m.run()[0], ref)


def test_add_fused_relu() -> None:
    x, y = rand(2, 5), rand(5)
    m = OneOp()
    m.op("tfl.add", [m.input(x), m.const(y)], _t([2, 5]), fused_activation_function="RELU")
    close(m.run()[0], np.maximum(x + y, 0))


def test_pow_negative_base_integer_exponent() -> None:
    x = rand(3, 4, lo=-2, hi=2)
    for e in (2.0, 3.0, -2.0, 5.0):
        m = OneOp()
        m.op("tfl.pow", [m.input(x), m.const(np.array([e], np.float32))], _t(x.shape))
        close(m.run()[0], tf.math.pow(x, e).numpy())


UNARY: dict[str, tuple[Callable[[Any], Any], float, float]] = {
    "tfl.exp": (tf.math.exp, -5, 5), "tfl.log": (tf.math.log, 0.01, 10), "tfl.rsqrt": (tf.math.rsqrt, 0.01, 10),
    "tfl.sqrt": (tf.math.sqrt, 0.0, 10), "tfl.abs": (tf.math.abs, -3, 3), "tfl.neg": (tf.math.negative, -3, 3),
    "tfl.floor": (tf.math.floor, -3, 3), "tfl.ceil": (tf.math.ceil, -3, 3), "tfl.sin": (tf.math.sin, -4, 4),
    "tfl.cos": (tf.math.cos, -4, 4), "tfl.square": (tf.math.square, -3, 3),
    "tfl.logistic": (tf.math.sigmoid, -8, 8), "tfl.tanh": (tf.math.tanh, -4, 4),
    "tfl.relu": (tf.nn.relu, -3, 3), "tfl.relu6": (tf.nn.relu6, -3, 9),
    "tfl.relu_n1_to_1": (lambda v: tf.clip_by_value(v, -1.0, 1.0), -3, 3),
    "tfl.relu_0_to_1": (lambda v: tf.clip_by_value(v, 0.0, 1.0), -3, 3),
    "tfl.hard_swish": (lambda v: v * tf.nn.relu6(v + 3) / 6, -5, 5), "tfl.elu": (tf.nn.elu, -4, 4),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float(name: str) -> None:
    fn, lo, hi = UNARY[name]
    x = rand(3, 17, lo=lo, hi=hi)
    if name == "tfl.sqrt":
        x[0, 0] = 0.0
    if name == "tfl.elu":
        x[0, :6] = [-1e-6, -1e-3, -0.3, 0.0, 1e-7, -0.36]
    close(one_unary(name, x), fn(x).numpy())


def test_sqrt_special_values() -> None:
    x = np.array([0.0, np.inf, 4.0, -1.0], np.float32)
    got = one_unary("tfl.sqrt", x)
    np.testing.assert_array_equal(got[:3], [0.0, np.inf, 2.0])
    assert np.isnan(got[3])


def test_round_half_to_even() -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, -0.49999997, 2.6, -2.6, 1e8, 8388609.0,
                  -0.0, 7.5], np.float32)
    close(one_unary("tfl.round", x), tf.math.round(x).numpy())


@pytest.mark.parametrize("alpha", [0.2, -0.5, 1.7])
def test_leaky_relu(alpha: float) -> None:
    x = rand(4, 6, lo=-3, hi=3)
    close(one_unary("tfl.leaky_relu", x, alpha=alpha), tf.nn.leaky_relu(x, alpha).numpy())


def test_prelu() -> None:
    x, alpha = rand(2, 3, 4, lo=-3, hi=3), rand(4, lo=-1, hi=1)
    m = OneOp()
    m.op("tfl.prelu", [m.input(x), m.const(alpha)], _t(x.shape))
    close(m.run()[0], np.where(x >= 0, x, x * alpha))


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu(approximate: bool) -> None:
    x = rand(5, 20, lo=-6, hi=6)
    ref = tf.nn.gelu(x, approximate=approximate).numpy()
    close(one_unary("tfl.gelu", x, approximate=approximate), ref)


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_softmax(beta: float) -> None:
    x = rand(3, 4, 10, lo=-50, hi=50)   # large logits: max-subtraction needed
    ref = tf.nn.softmax(x * beta).numpy()
    close(one_unary("tfl.softmax", x, beta=beta), ref)


def test_log_softmax() -> None:
    x = rand(3, 10, lo=-100, hi=100)
    close(one_unary("tfl.log_softmax", x), tf.nn.log_softmax(x).numpy())


# ----------------------------------------------------------------------------------------------- comparisons
CMP: dict[str, Callable[[Any, Any], Any]] = {
    "tfl.equal": tf.math.equal, "tfl.not_equal": tf.math.not_equal, "tfl.greater": tf.math.greater,
    "tfl.greater_equal": tf.math.greater_equal, "tfl.less": tf.math.less, "tfl.less_equal": tf.math.less_equal,
}


@pytest.mark.parametrize("name", sorted(CMP))
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_compare(name: str, dtype: type) -> None:
    x: np.ndarray = RNG.integers(-3, 3, size=(3, 5)).astype(dtype)
    y: np.ndarray = RNG.integers(-3, 3, size=(5,)).astype(dtype)
    if dtype is np.float32:
        x[0, 0] = np.nan  # NaN compares false except !=
        x[1, 1] = np.nan
        y[1] = np.nan
    ref = CMP[name](x, y).numpy()
    m = OneOp()
    m.op(name, [m.input(x), m.input(y)], _t(ref.shape, DType.BOOL))
    close(m.run()[0], ref)


@pytest.mark.parametrize("name,fn", [("tfl.logical_and", np.logical_and), ("tfl.logical_or", np.logical_or),
                                     ("tfl.equal", np.equal), ("tfl.not_equal", np.not_equal)])
def test_logical(name: str, fn: Callable[[Any, Any], Any]) -> None:
    x, y = RNG.integers(0, 2, size=(2, 3)).astype(bool), RNG.integers(0, 2, size=(3,)).astype(bool)
    m = OneOp()
    m.op(name, [m.input(x), m.input(y)], _t([2, 3], DType.BOOL))
    close(m.run()[0], fn(x, y))
    close(one_unary("tfl.logical_not", x), np.logical_not(x))


@pytest.mark.parametrize("shapes", [((2, 3), (2, 3), (2, 3)), ((3,), (2, 3), (1,)), ((2, 1), (3,), (2, 3))])
def test_select_v2(shapes: tuple[tuple[int, ...], ...]) -> None:
    c = RNG.integers(0, 2, size=shapes[0]).astype(bool)
    x, y = rand(*shapes[1]), rand(*shapes[2])
    ref = tf.where(c, x, y).numpy()
    m = OneOp()
    m.op("tfl.select_v2", [m.input(c), m.input(x), m.input(y)], _t(ref.shape))
    close(m.run()[0], ref)


def test_select_v1_rank1_condition() -> None:
    c = np.array([True, False, True])
    x, y = rand(3, 4), rand(3, 4)
    m = OneOp()
    m.op("tfl.select", [m.input(c), m.input(x), m.input(y)], _t([3, 4]))
    close(m.run()[0], np.where(c[:, None], x, y))


# ------------------------------------------------------------------------------------------------- reductions
REDUCE: dict[str, Callable[..., Any]] = {
    "tfl.mean": tf.math.reduce_mean, "tfl.sum": tf.math.reduce_sum, "tfl.reduce_max": tf.math.reduce_max,
    "tfl.reduce_min": tf.math.reduce_min, "tfl.reduce_prod": tf.math.reduce_prod,
}


@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("axes,keep", [([1], False), ([1], True), ([0, 2], False), ([-1, 1], True), ([2, -1], False)])
def test_reduce(name: str, axes: list[int], keep: bool) -> None:
    x = rand(2, 3, 4, lo=0.5 if name == "tfl.reduce_prod" else -1, hi=1.5 if name == "tfl.reduce_prod" else 1)
    ref = REDUCE[name](x, axis=sorted(set(a % 3 for a in axes)), keepdims=keep).numpy()
    m = OneOp()
    m.op(name, [m.input(x), m.const(np.array(axes, np.int32))], _t(ref.shape), keep_dims=keep)
    close(m.run()[0], ref)


def test_sum_int32_and_bool_reductions() -> None:
    x = RNG.integers(-9, 9, size=(3, 4)).astype(np.int32)
    m = OneOp()
    m.op("tfl.sum", [m.input(x), m.const(np.array([0], np.int32))], _t([4], DType.INT32), keep_dims=False)
    close(m.run()[0], x.sum(0).astype(np.int32))
    bx = RNG.integers(0, 2, size=(3, 4)).astype(bool)
    for name, fn in (("tfl.reduce_any", np.any), ("tfl.reduce_all", np.all)):
        m = OneOp()
        m.op(name, [m.input(bx), m.const(np.array(1, np.int32))], _t([3, 1], DType.BOOL), keep_dims=True)
        close(m.run()[0], fn(bx, axis=1, keepdims=True))


@pytest.mark.parametrize("name", ["tfl.arg_max", "tfl.arg_min"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_arg_max_min(name: str, axis: int) -> None:
    x = RNG.integers(-4, 4, size=(4, 5, 6)).astype(np.float32)   # many ties: first index must win
    fn = tf.math.argmax if name == "tfl.arg_max" else tf.math.argmin
    ref = fn(x, axis=axis, output_type=tf.int32).numpy()
    m = OneOp()
    m.op(name, [m.input(x), m.const(np.array([axis], np.int32))], _t(ref.shape, DType.INT64),
         output_type="INT64")
    got = m.run()[0]
    assert got.dtype == np.int32
    close(got, ref)


def test_arg_min_int8_extremes() -> None:
    q = QuantParams((0.5,), (3,))
    x = np.array([[5, -128, 127, -128], [127, 0, 127, -1]], np.int8)
    m = OneOp()
    v = m.g.add_input("x", _t(x.shape, DType.INT8, q))
    m.feeds.append(x)
    m.op("tfl.arg_min", [v, m.const(np.array([1], np.int32))], _t([2], DType.INT32))
    close(m.run()[0], np.array([1, 3], np.int32))
    m = OneOp()
    v = m.g.add_input("x", _t(x.shape, DType.INT8, q))
    m.feeds.append(x)
    m.op("tfl.arg_max", [v, m.const(np.array([1], np.int32))], _t([2], DType.INT32))
    close(m.run()[0], np.array([2, 0], np.int32))


# ------------------------------------------------------------------ the multi-op lowerings through the Arm tools
def _arm_cases() -> dict[str, Callable[[], OneOp]]:
    def unary(name: str, x: np.ndarray, **attrs: Any) -> Callable[[], OneOp]:
        def build() -> OneOp:
            m = OneOp()
            m.op(name, [m.input(x)], _t(x.shape), **attrs)
            return m
        return build

    def binary(name: str, x: np.ndarray, y: np.ndarray, out: Sequence[int], dt: DType = DType.FP32,
               **attrs: Any) -> Callable[[], OneOp]:
        def build() -> OneOp:
            m = OneOp()
            m.op(name, [m.input(x), m.input(y)], _t(out, dt), **attrs)
            return m
        return build

    def tconv() -> OneOp:
        m = OneOp()
        m.op("tfl.transpose_conv", [m.const(np.array([1, 8, 7, 2], np.int32)), m.const(rand(2, 3, 2, 2)),
                                    m.input(rand(1, 3, 4, 2))], _t([1, 8, 7, 2]), padding="SAME", stride_h=3,
             stride_w=2, fused_activation_function="NONE")
        return m

    def argmin() -> OneOp:
        m = OneOp()
        m.op("tfl.arg_min", [m.input(rand(3, 5)), m.const(np.array([1], np.int32))], _t([3], DType.INT32))
        return m

    def bmm() -> OneOp:
        m = OneOp()
        m.op("tfl.batch_matmul", [m.input(rand(2, 1, 4, 3)), m.input(rand(3, 4, 5))], _t([2, 3, 3, 5]),
             adj_x=True, adj_y=False)
        return m

    xi = RNG.integers(-50, 50, size=(3, 4)).astype(np.int32)
    yi = np.array([3, -4, 7, -2], np.int32)
    return {
        "round": unary("tfl.round", np.array([-2.5, -1.5, 0.5, 1.5, 2.6, -0.2], np.float32)),
        "elu": unary("tfl.elu", rand(4, 5, lo=-3, hi=3)),
        "gelu": unary("tfl.gelu", rand(4, 5, lo=-3, hi=3), approximate=False),
        "softmax": unary("tfl.softmax", rand(2, 6, lo=-5, hi=5), beta=1.0),
        "log_softmax": unary("tfl.log_softmax", rand(2, 6, lo=-5, hi=5)),
        "floor_mod": binary("tfl.floor_mod", rand(3, 4, lo=-5, hi=5), rand(4, lo=0.5, hi=2), [3, 4]),
        "floor_div_i32": binary("tfl.floor_div", xi, yi, [3, 4], DType.INT32),
        "less_equal": binary("tfl.less_equal", rand(3, 4), rand(4), [3, 4], DType.BOOL),
        "pool_slice": lambda: _pool_model(),
        "l2_normalization": unary("tfl.l2_normalization", rand(2, 7), fused_activation_function="NONE"),
        "lrn": unary("tfl.local_response_normalization", rand(1, 2, 2, 6), radius=2, bias=1.0, alpha=0.5,
                     beta=0.75),
        "sign": unary("tfl.sign", np.array([-2.0, 0.0, 3.0], np.float32)),
        "sqrt": unary("tfl.sqrt", np.array([0.0, 2.0, 9.0], np.float32)),
        "transpose_conv_crop": tconv,
        "arg_min": argmin,
        "batch_matmul_tile": bmm,
    }


def _pool_model() -> OneOp:
    m = OneOp()
    m.op("tfl.average_pool_2d", [m.input(rand(1, 6, 6, 2))], _t([1, 2, 2, 2]), padding="SAME", stride_h=4,
         stride_w=4, filter_height=1, filter_width=1, fused_activation_function="NONE")
    return m


@pytest.mark.parametrize("name", sorted(_arm_cases()))
def test_arm_tools_agree(name: str) -> None:
    """tosa-opt accepts the multi-op lowerings and the Arm reference model gives our executor's numbers."""
    from tests.e2e import fp32_bound, fp32_noise

    case = _arm_cases()[name]()
    ours, arm = case.run_with_arm_tools()
    feeds = case.feeds if isinstance(case.feeds, dict) else {v.name: a for v, a in zip(case.g.inputs, case.feeds)}
    ours64 = run(case.g, feeds, precise=True)
    noise = fp32_noise(case.g, feeds)
    for o, a, v in zip(ours, arm, case.g.outputs):
        if o.dtype.kind == "f":  # the reference model's fp32 run: another fp32 implementation
            o64 = np.asarray(ours64[v.name], np.float64)
            err = float(np.abs(a.reshape(o.shape).astype(np.float64) - o64).max())
            assert err <= fp32_bound(o, o64, v.dtype, noise.get(v.name, 0.0)), err
        else:
            np.testing.assert_array_equal(o, a.reshape(o.shape))


# -------------------------------------------------------------------------- ops without a lowering in the document
@pytest.mark.parametrize("case", POOL_CASES)
def test_l2_pool_2d(case: tuple[Any, ...]) -> None:
    n, h, w, c, kh, kw, (sh, sw), padding = case
    x = rand(n, h, w, c)
    ref = np.sqrt(tf.nn.avg_pool2d(x * x, ksize=[kh, kw], strides=[sh, sw], padding=padding).numpy())
    m = OneOp()
    m.op("tfl.l2_pool_2d", [m.input(x)], _t(ref.shape), padding=padding, stride_h=sh, stride_w=sw, filter_height=kh,
         filter_width=kw, fused_activation_function="NONE")
    close(m.run()[0], ref)


def test_l2_normalization() -> None:
    x = rand(2, 3, 8, lo=-2, hi=2)
    x[0, 0] = 0.0   # zero row: TFLite divides by epsilon → 0
    ref = tf.math.l2_normalize(x, axis=-1).numpy()
    close(one_unary("tfl.l2_normalization", x, fused_activation_function="NONE"), ref)


@pytest.mark.parametrize("radius,bias,alpha,beta", [(2, 1.0, 1e-4, 0.75), (1, 2.0, 0.5, 0.5), (5, 1.0, 1.0, 1.0)])
def test_local_response_normalization(radius: int, bias: float, alpha: float, beta: float) -> None:
    x = rand(2, 3, 4, 7, lo=-2, hi=2)
    ref = tf.nn.local_response_normalization(x, depth_radius=radius, bias=bias, alpha=alpha, beta=beta).numpy()
    close(one_unary("tfl.local_response_normalization", x, radius=radius, bias=bias, alpha=alpha, beta=beta), ref)


def test_add_n_and_sign() -> None:
    xs = [rand(2, 3) for _ in range(3)]
    m = OneOp()
    m.op("tfl.add_n", [m.input(a) for a in xs], _t([2, 3]))
    close(m.run()[0], tf.math.add_n(xs).numpy())
    x = np.array([-2.0, -0.0, 0.0, 3.0, 1e-30, -1e-30], np.float32)
    close(one_unary("tfl.sign", x), np.sign(x))
    xi = np.array([-5, 0, 7], np.int32)
    close(one_unary("tfl.sign", xi), np.sign(xi).astype(np.int32))


@pytest.mark.parametrize("name", ["tfl.mean", "tfl.sum"])
def test_reduce_to_scalar(name: str) -> None:
    x = rand(2, 3)
    m = OneOp()
    m.op(name, [m.input(x), m.const(np.array([0, 1], np.int32))], _t([]), keep_dims=False)
    close(m.run()[0], REDUCE[name](x).numpy())
