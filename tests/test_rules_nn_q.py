"""Unit tests of the quantized tfl_nn / tfl_reduce rules (int8 per-tensor and per-channel, int16x8).

Oracles, independent of the converter:

* numpy re-implementations of LiteRT's reference kernels written from their published formulas (gemmlowp's
  SaturatingRoundingDoublingHighMul + RoundingDivideByPOT = MultiplyByQuantizedMultiplier, its int64 variant
  with a 16-bit multiplier, QuantizeMultiplier, CalculateActivationRangeQuantized, the avg-pool
  ``(sum ± n/2) / n``, the mean's folded 1/N multiplier, fully_connected's double-precision requantization,
  QuantizedReduceProd's per-step rescale).  One-op tfl graphs are built by hand (nonzero zero points,
  activations, paddings the cached models do not exercise) and must match with **0** differing elements.
* LiteRT's BUILTIN_REF kernels themselves on cached one-op ``.tflite`` models whose quantization parameters are
  patched in the flatbuffer (nonzero input zero points, tie-heavy avg-pool inputs, other mean scales): 0
  mismatches.  (Skipped when LiteRT or the cached models are unavailable.)
* Python's exact rationals (``fractions``) for the exact double-rounding helper of fully_connected.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from tf2tosa.converter.pipeline import ConvertOptions, convert_graph, legalize_graph
from tf2tosa.errors import UnsupportedOpsError
from tf2tosa.executor import run
from tf2tosa.ir import DType, Graph, QuantParams, TensorType, Value
from tf2tosa.quant.fully_connected import exact_split, round_scale_exact
from tf2tosa.tosa.builder import Builder

RNG = np.random.default_rng(20240611)


# ------------------------------------------------------------------------------ TFLite fixed-point arithmetic
def quantize_multiplier(d: float) -> tuple[int, int]:
    """QuantizeMultiplier: d = q·2^(e-31), q in [2^30, 2^31), std::round; exponents below -31 flush to 0."""
    if d == 0.0:
        return 0, 0
    m, e = math.frexp(d)
    q = int(Fraction(m) * (1 << 31) + Fraction(1, 2))  # floor(x + 1/2) = std::round for x > 0
    if q == 1 << 31:
        q, e = q // 2, e + 1
    return (0, 0) if e < -31 else (q, e)


def srdhm(a: np.ndarray, b: int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul: (a·b + nudge) / 2^31 truncated toward zero."""
    ab = np.asarray(a, np.int64) * np.int64(b)
    num = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    return np.where(num >= 0, num >> 31, -((-num) >> 31))


def rdbpot(x: np.ndarray, exponent: int) -> np.ndarray:
    """RoundingDivideByPOT: round half away from zero."""
    mask = (1 << exponent) - 1
    rem = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (rem > threshold)


def mbqm(x: np.ndarray, q: int, e: int) -> np.ndarray:
    """MultiplyByQuantizedMultiplier (int32 accumulator)."""
    return rdbpot(srdhm(np.asarray(x, np.int64) * (1 << max(e, 0)), q), max(-e, 0))


def mbqm64(x: np.ndarray, q: int, e: int) -> np.ndarray:
    """MultiplyByQuantizedMultiplier (int64 accumulator): 16-bit reduced multiplier, one half-up rounding."""
    red = (q + (1 << 15)) >> 16 if q < 0x7FFF0000 else 0x7FFF
    total = 15 - e
    return (np.asarray(x, np.int64) * red + (1 << (total - 1))) >> total


def round_away(x: Any) -> np.ndarray:
    return np.asarray(np.sign(x) * np.floor(np.abs(x) + 0.5))


def act_range(act: str, scale: float, zp: int, dt: DType) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: zp + roundf(f / scale) in float32, within the storage range."""
    lo, hi = dt.range()

    def q(f: float) -> int:
        return zp + int(round_away(np.float32(f) / np.float32(scale)))

    if act == "RELU":
        return max(lo, q(0.0)), hi
    if act == "RELU6":
        return max(lo, q(0.0)), min(hi, q(6.0))
    if act == "RELU_N1_TO_1":
        return max(lo, q(-1.0)), min(hi, q(1.0))
    return lo, hi


def per_channel_requant(acc: np.ndarray, scales: Sequence[float], wide: bool) -> np.ndarray:
    """MBQM per output channel (last axis); ``wide``: the int64 variant (int16x8 with an int64 bias)."""
    out = np.empty_like(acc)
    for c, s in enumerate(scales):
        out[..., c] = (mbqm64 if wide else mbqm)(acc[..., c], *quantize_multiplier(s))
    return out


# --------------------------------------------------------------------------------- reference kernels (numpy)
def same_pads(size: int, k: int, s: int, d: int = 1) -> tuple[int, int]:
    eff = (k - 1) * d + 1
    total = max(0, (-(-size // s) - 1) * s + eff - size)
    return total // 2, total - total // 2


def conv_acc(x: np.ndarray, zx: int, w: np.ndarray, padding: str, stride: tuple[int, int],
             dil: tuple[int, int]) -> np.ndarray:
    """sum((x - zx)·w) of TFLite's ConvPerChannel, w OHWI; padded taps contribute 0."""
    n, h, wd, c = x.shape
    oc, kh, kw, _ = w.shape
    (pt, pb), (pl, pr) = ((same_pads(h, kh, stride[0], dil[0]), same_pads(wd, kw, stride[1], dil[1]))
                          if padding == "SAME" else ((0, 0), (0, 0)))
    xs = np.pad(x.astype(np.int64) - zx, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    oh = (h + pt + pb - ((kh - 1) * dil[0] + 1)) // stride[0] + 1
    ow = (wd + pl + pr - ((kw - 1) * dil[1] + 1)) // stride[1] + 1
    acc = np.zeros((n, oh, ow, oc), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dil[0], kx * dil[1]
            patch = xs[:, y0:y0 + (oh - 1) * stride[0] + 1:stride[0], x0:x0 + (ow - 1) * stride[1] + 1:stride[1], :]
            acc += patch @ w[:, ky, kx, :].astype(np.int64).T
    return acc


def depthwise_acc(x: np.ndarray, zx: int, w: np.ndarray, padding: str, stride: int) -> np.ndarray:
    """TFLite depthwise: output channel c·M + m = sum((x[..c] - zx)·w[0, ky, kx, c·M + m])."""
    c = x.shape[3]
    m = w.shape[3] // c
    xr = np.repeat(x, m, axis=3)  # channel c·M + m reads input channel c
    wr = w[0]
    n, h, wd, cm = xr.shape
    kh, kw = wr.shape[:2]
    (pt, pb), (pl, pr) = ((same_pads(h, kh, stride), same_pads(wd, kw, stride)) if padding == "SAME"
                          else ((0, 0), (0, 0)))
    xs = np.pad(xr.astype(np.int64) - zx, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    oh, ow = (h + pt + pb - kh) // stride + 1, (wd + pl + pr - kw) // stride + 1
    acc = np.zeros((n, oh, ow, cm), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += xs[:, ky:ky + (oh - 1) * stride + 1:stride, kx:kx + (ow - 1) * stride + 1:stride, :] * wr[ky, kx]
    return acc


def transpose_conv_acc(x: np.ndarray, zx: int, w: np.ndarray, out_hw: tuple[int, int], padding: str,
                       stride: int) -> np.ndarray:
    """TFLite TransposeConv: input pixel (iy, ix) scatters to (iy·s - pad + ky, ix·s - pad + kx)."""
    n, ih, iw, _ = x.shape
    oc, kh, kw, _ = w.shape
    oh, ow = out_hw
    pt = same_pads(oh, kh, stride)[0] if padding == "SAME" else 0
    pl = same_pads(ow, kw, stride)[0] if padding == "SAME" else 0
    acc = np.zeros((n, oh, ow, oc), np.int64)
    xi = x.astype(np.int64) - zx
    for iy in range(ih):
        for ix in range(iw):
            for ky in range(kh):
                for kx in range(kw):
                    oy, ox = iy * stride - pt + ky, ix * stride - pl + kx
                    if 0 <= oy < oh and 0 <= ox < ow:
                        acc[:, oy, ox, :] += xi[:, iy, ix, :] @ w[:, ky, kx, :].astype(np.int64).T
    return acc


def avg_pool_ref(x: np.ndarray, k: int, s: int, padding: str) -> np.ndarray:
    """reference_integer_ops::AveragePool: raw values, count without padding, (sum ± count/2) / count."""
    n, h, w, c = x.shape
    (pt, _), (pl, _) = ((same_pads(h, k, s), same_pads(w, k, s)) if padding == "SAME" else ((0, 0), (0, 0)))
    oh, ow = (-(-h // s), -(-w // s)) if padding == "SAME" else ((h - k) // s + 1, (w - k) // s + 1)
    out = np.zeros((n, oh, ow, c), np.int64)
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * s - pt, ox * s - pl
            win = x[:, max(y0, 0):min(y0 + k, h), max(x0, 0):min(x0 + k, w), :].astype(np.int64)
            acc, cnt = win.sum(axis=(1, 2)), win.shape[1] * win.shape[2]
            out[:, oy, ox, :] = np.where(acc > 0, (acc + cnt // 2) // cnt, -((-acc + cnt // 2) // cnt))
    return out


# ------------------------------------------------------------------------------------------ one-op tfl graphs
def qp(scale: float | Sequence[float], zp: int | Sequence[int] = 0, axis: int | None = None) -> QuantParams:
    s = tuple(float(v) for v in np.atleast_1d(scale))
    z = tuple(int(v) for v in np.atleast_1d(zp)) if np.ndim(zp) else (int(np.asarray(zp)),) * len(s)
    return QuantParams(s, z, axis if len(s) > 1 else None)


class QOp:
    """A one-op tfl graph over quantized tensors; ``run()`` legalizes and executes it."""

    def __init__(self) -> None:
        self.g = Graph()
        self.feeds: list[np.ndarray] = []

    def input(self, arr: np.ndarray, dt: DType, q: QuantParams | None) -> Value:
        v = self.g.add_input(f"in{len(self.feeds)}", TensorType(arr.shape, dt, q))
        self.feeds.append(arr.astype(dt.np_dtype()))
        return v

    def const(self, arr: np.ndarray, dt: DType, q: QuantParams | None = None) -> Value:
        return self.g.add_const(np.asarray(arr), dt, name="w", op_name="tfl.const", quant=q)

    def no_value(self) -> Value:
        return self.g.add_op("tfl.no_value", [], [TensorType((), DType.FP32)]).result

    def op(self, name: str, operands: Sequence[Value], shape: Sequence[int], dt: DType, q: QuantParams | None,
           **attrs: Any) -> None:
        o = self.g.add_op(name, operands, [TensorType(tuple(shape), dt, q)], attrs)
        self.g.outputs = list(o.results)

    def run(self) -> np.ndarray:
        legalize_graph(self.g)
        assert all(op.name.startswith("tosa.") for op in self.g.topological_order())
        return np.asarray(next(iter(run(self.g, self.feeds).values())))


def rand_q(shape: Sequence[int], dt: DType, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    a, b = dt.range()
    return RNG.integers(a if lo is None else lo, (b if hi is None else hi) + 1, size=tuple(shape))


def exact(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == tuple(ref.shape), (got.shape, ref.shape)
    diff = got.astype(np.int64) != np.asarray(ref, np.int64)
    assert not diff.any(), f"{int(diff.sum())} of {diff.size} differ: ours {got[diff][:8]} ref {ref[diff][:8]}"


def w_scales(n: int, per_channel: bool) -> list[float]:
    return [float(np.float32(v)) for v in RNG.uniform(0.002, 0.02, n)] if per_channel else [0.0071]


# ------------------------------------------------------------------------------------------- conv family
CONV_Q_CASES = [
    # (dtype, per_channel, x_zp, padding, stride, dilation, act, bias)
    (DType.INT8, True, -7, "SAME", (1, 1), (1, 1), "RELU", "i32"),
    (DType.INT8, False, 25, "VALID", (2, 2), (1, 1), "NONE", "i32"),
    (DType.INT8, True, 0, "SAME", (2, 1), (2, 2), "RELU6", "none"),
    (DType.INT8, True, 100, "SAME", (1, 1), (1, 1), "RELU_N1_TO_1", "i32"),
    (DType.INT16, True, 0, "SAME", (1, 1), (1, 1), "RELU", "i64"),
    (DType.INT16, False, 0, "VALID", (2, 2), (1, 1), "NONE", "i64"),
    (DType.INT16, True, 0, "SAME", (1, 1), (2, 2), "RELU6", "i32"),  # int32 bias: TFLite's int32 accumulator
    (DType.INT16, True, 0, "SAME", (1, 2), (1, 1), "NONE", "none"),
]


def _bias(op: QOp, kind: str, n: int, scales: Sequence[float]) -> tuple[Value, np.ndarray]:
    if kind == "none":
        return op.no_value(), np.zeros(n, np.int64)
    vals = RNG.integers(-3000, 3000, n) * (40 if kind == "i64" else 1)
    dt = DType.INT64 if kind == "i64" else DType.INT32
    return op.const(vals, dt, qp(scales, 0, 0)), vals


@pytest.mark.parametrize("case", CONV_Q_CASES, ids=lambda c: "-".join(str(v) for v in c))
def test_conv_2d_quantized(case: tuple[Any, ...]) -> None:
    dt, per_channel, zx, padding, stride, dil, act, bias_kind = case
    sx, so, zo = (0.0123, 0.047, -9) if dt is DType.INT8 else (1.7e-4, 2.1e-3, 0)
    x = rand_q((2, 9, 8, 3), dt)
    w = rand_q((5, 3, 3, 3), DType.INT8, -127, 127)
    sw = w_scales(5, per_channel)
    m = QOp()
    bias, bvals = _bias(m, bias_kind, 5, [sx * s for s in sw])
    acc = conv_acc(x, zx, w, padding, stride, dil) + bvals
    scales = [sx * s / so for s in (sw * 5 if len(sw) == 1 else sw)]
    wide = dt is DType.INT16 and bias_kind != "i32"
    lo, hi = act_range(act, so, zo, dt)
    ref = np.clip(per_channel_requant(acc, scales, wide) + zo, lo, hi)
    m.op("tfl.conv_2d", [m.input(x, dt, qp(sx, zx)), m.const(w, DType.INT8, qp(sw, 0, 0)), bias], ref.shape, dt,
         qp(so, zo), padding=padding, stride_h=stride[0], stride_w=stride[1], dilation_h_factor=dil[0],
         dilation_w_factor=dil[1], fused_activation_function=act)
    exact(m.run(), ref)


@pytest.mark.parametrize("acc_dt,tfl_acc,out_dt", [(DType.INT32, DType.INT32, DType.INT8),
                                                   (DType.INT48, DType.INT64, DType.INT16),
                                                   (DType.INT48, DType.INT32, DType.INT16)])
def test_requantize_acc_is_mbqm(acc_dt: DType, tfl_acc: DType, out_dt: DType) -> None:
    """The conv-family output stage over 60k accumulators per channel: DOUBLE_ROUND RESCALE = the int32 MBQM
    (SINGLE_ROUND would differ in ~0.1% of them), 16-bit RESCALE = the int64 MBQM, and an int32 bias in an int16
    model = exact i48→i32 then the int32 MBQM."""
    from tf2tosa.quant.conv import requantize_acc

    scales = [0.0018580851, 3.3e-4, 0.61, 2.2e-6]
    zp = -6 if out_dt is DType.INT8 else 0
    big = 1 << (24 if out_dt is DType.INT8 else 28)
    acc = np.concatenate([RNG.integers(-big, big, (60000, 4)), RNG.integers(-300, 300, (2000, 4))])
    g = Graph()
    a = g.add_input("acc", TensorType(acc.shape, acc_dt))
    out = g.add_input("out_type", TensorType(acc.shape, out_dt, qp(0.1, zp)))
    y = requantize_acc(Builder(g), a, scales, out, tfl_acc)
    g.inputs, g.outputs = [a], [y]
    got = np.asarray(next(iter(run(g, [acc.astype(acc_dt.np_dtype())]).values())))
    ref = per_channel_requant(acc, scales, tfl_acc is DType.INT64)
    exact(got, np.clip(ref + zp, *out_dt.range()))


def test_conv_2d_quantized_grouped_and_weight_zp() -> None:
    """Two groups of 2 input channels, per-tensor weights with a nonzero weight zero point (TOSA weight_zp)."""
    x = rand_q((1, 6, 6, 4), DType.INT8)
    w = rand_q((4, 3, 3, 2), DType.INT8, -100, 100)
    sx, sw, so, zx, zw, zo = 0.02, 0.006, 0.05, 11, 3, -4
    acc = np.concatenate([conv_acc(x[..., 2 * g:2 * g + 2], zx, w[2 * g:2 * g + 2] - zw, "SAME", (1, 1), (1, 1))
                          for g in range(2)], axis=3)
    ref = np.clip(per_channel_requant(acc, [sx * sw / so] * 4, False) + zo, -128, 127)
    m = QOp()
    m.op("tfl.conv_2d", [m.input(x, DType.INT8, qp(sx, zx)), m.const(w, DType.INT8, qp(sw, zw)), m.no_value()],
         ref.shape, DType.INT8, qp(so, zo), padding="SAME", stride_h=1, stride_w=1, dilation_h_factor=1,
         dilation_w_factor=1, fused_activation_function="NONE")
    exact(m.run(), ref)


@pytest.mark.parametrize("dt,mult,stride,padding,act", [
    (DType.INT8, 1, 1, "SAME", "RELU6"), (DType.INT8, 2, 2, "VALID", "NONE"), (DType.INT16, 2, 1, "SAME", "RELU"),
    (DType.INT16, 1, 2, "SAME", "NONE")])
def test_depthwise_conv_2d_quantized(dt: DType, mult: int, stride: int, padding: str, act: str) -> None:
    c = 3
    zx = -20 if dt is DType.INT8 else 0
    sx, so, zo = (0.015, 0.03, 6) if dt is DType.INT8 else (2e-4, 1.3e-3, 0)
    x = rand_q((1, 7, 8, c), dt)
    w = rand_q((1, 3, 3, c * mult), DType.INT8, -127, 127)
    sw = w_scales(c * mult, True)
    m = QOp()
    bias, bvals = _bias(m, "i32" if dt is DType.INT8 else "i64", c * mult, [sx * s for s in sw])
    acc = depthwise_acc(x, zx, w, padding, stride) + bvals
    lo, hi = act_range(act, so, zo, dt)
    ref = np.clip(per_channel_requant(acc, [sx * s / so for s in sw], dt is DType.INT16) + zo, lo, hi)
    m.op("tfl.depthwise_conv_2d", [m.input(x, dt, qp(sx, zx)), m.const(w, DType.INT8, qp(sw, 0, 3)), bias],
         ref.shape, dt, qp(so, zo), padding=padding, stride_h=stride, stride_w=stride, depth_multiplier=mult,
         dilation_h_factor=1, dilation_w_factor=1, fused_activation_function=act)
    exact(m.run(), ref)


@pytest.mark.parametrize("dt,padding,bias_kind", [(DType.INT8, "SAME", "i32"), (DType.INT8, "VALID", "none"),
                                                  (DType.INT16, "SAME", "none"), (DType.INT16, "VALID", "i64")])
def test_transpose_conv_quantized(dt: DType, padding: str, bias_kind: str) -> None:
    ih, s, k, oc = 4, 2, 3, 2
    oh = ih * s if padding == "SAME" else (ih - 1) * s + k
    zx = 9 if dt is DType.INT8 else 0
    sx, so, zo = (0.01, 0.04, -3) if dt is DType.INT8 else (3e-5, 2e-4, 0)
    x = rand_q((1, ih, ih, 3), dt)
    w = rand_q((oc, k, k, 3), DType.INT8, -127, 127)
    sw = w_scales(oc, True)
    m = QOp()
    bias, bvals = _bias(m, bias_kind, oc, [sx * v for v in sw])
    acc = transpose_conv_acc(x, zx, w, (oh, oh), padding, s) + bvals
    ref = np.clip(per_channel_requant(acc, [sx * v / so for v in sw], dt is DType.INT16) + zo, *dt.range())
    shape = m.const(np.array([1, oh, oh, oc]), DType.INT32)
    m.op("tfl.transpose_conv", [shape, m.const(w, DType.INT8, qp(sw, 0, 0)), m.input(x, dt, qp(sx, zx)), bias],
         ref.shape, dt, qp(so, zo), padding=padding, stride_h=s, stride_w=s, fused_activation_function="NONE")
    exact(m.run(), ref)


# -------------------------------------------------------------------------------------- fully connected
FC_CASES = [
    # (dtype, x shape, per_channel, w_zp, x_zp, act, bias, keep_num_dims)
    (DType.INT8, (3, 16), True, 0, -5, "RELU", "i32", False),
    (DType.INT8, (2, 3, 16), False, 4, 30, "NONE", "none", True),
    (DType.INT8, (2, 3, 16), False, 0, 0, "RELU6", "i32", False),
    (DType.INT16, (4, 16), True, 0, 0, "NONE", "i64", False),
    (DType.INT16, (1, 2, 16), True, 0, 0, "RELU", "i32", True),
]


@pytest.mark.parametrize("case", FC_CASES, ids=lambda c: "-".join(str(v) for v in c))
def test_fully_connected_quantized(case: tuple[Any, ...]) -> None:
    """TFLite's reference FC requantizes in double: (int32)round((double)acc · s_x·s_w[c]/s_out)."""
    dt, xs, per_channel, zw, zx, act, bias_kind, keep = case
    oc, ic = 6, xs[-1]
    sx, so, zo = (0.013, 0.021, 7) if dt is DType.INT8 else (3.1e-5, 1.2e-4, 0)
    x = rand_q(xs, dt)
    w = rand_q((oc, ic), DType.INT8, -127, 127)
    sw = w_scales(oc, per_channel)
    m = QOp()
    bias, bvals = _bias(m, bias_kind, oc, [sx * v for v in sw])
    acc = (x.reshape(-1, ic).astype(np.int64) - zx) @ (w.astype(np.int64) - zw).T + bvals
    eff = np.array([sx * v / so for v in (sw * oc if len(sw) == 1 else sw)])
    lo, hi = act_range(act, so, zo, dt)
    ref = np.clip(round_away(acc * eff) + zo, lo, hi)
    ref = ref.reshape(tuple(xs[:-1]) + (oc,)) if keep else ref
    m.op("tfl.fully_connected", [m.input(x, dt, qp(sx, zx)), m.const(w, DType.INT8, qp(sw, zw, 0)), bias],
         ref.shape, dt, qp(so, zo), fused_activation_function=act, weights_format="DEFAULT", keep_num_dims=keep)
    exact(m.run(), ref)


def _exact_graph(acc: np.ndarray, scales: Sequence[float], out_dt: DType, zp: int) -> np.ndarray:
    g = Graph()
    a = g.add_input("acc", TensorType(acc.shape, DType.INT32))
    out = g.add_input("out_type", TensorType(acc.shape, out_dt, qp(0.1, zp)))  # carries the output type only
    y = round_scale_exact(Builder(g), a, scales, out)
    assert y is not None
    g.inputs = [a]
    g.outputs = [y]
    return np.asarray(next(iter(run(g, [acc.astype(np.int32)]).values())))


@pytest.mark.parametrize("scales", [[0.0017], [0.375], [0.4999999], [2.0 ** -20 * 1.37, 3.3e-3, 0.25, 1e-9],
                                    [0.1, 0.2, 0.3]])
def test_round_scale_exact_vs_fractions(scales: list[float]) -> None:
    """round_half_away(acc·s) + zp, saturated, for accumulators over the whole i32 range, exact to the bit
    (dyadic scales such as 0.375 produce exact ties, which must round away from zero)."""
    nc = len(scales)
    acc = np.concatenate([RNG.integers(-(1 << 31) + 1, 1 << 31, (400, nc)), RNG.integers(-3000, 3000, (400, nc)),
                          np.array([[1 << 31 - 1] * nc, [-(1 << 31) + 1] * nc, [0] * nc, [1] * nc, [-1] * nc])])
    for dt, zp in ((DType.INT8, -3), (DType.INT16, 0)):
        got = _exact_graph(acc, scales, dt, zp)
        lo, hi = dt.range()
        fr = [Fraction(s) for s in scales]
        ref = np.array([[min(hi, max(lo, int(math.copysign(math.floor(abs(Fraction(int(v)) * fr[c]) + Fraction(1, 2)),
                                                            int(v))) + zp)) for c, v in enumerate(row)]
                        for row in acc])
        exact(got, ref)


def test_exact_split_limits() -> None:
    assert exact_split([0.5]) is None and exact_split([-0.1]) is None
    mh, ml, lbits = exact_split([0.1, 0.375])  # type: ignore[misc]
    assert 1 <= lbits <= 31 and all(0 <= v < 1 << 31 for v in mh) and all(0 <= v < 1 << lbits for v in ml)
    assert Fraction(mh[1] * (1 << lbits) + ml[1], 1 << (lbits + 32)) == Fraction(0.375)


# ---------------------------------------------------------------------------------------------- batch matmul
@pytest.mark.parametrize("dt,adj_y", [(DType.INT8, False), (DType.INT8, True), (DType.INT16, False)])
def test_batch_matmul_quantized(dt: DType, adj_y: bool) -> None:
    """MBQM by float32(s_x·s_y)/s_out (GetQuantizedConvolutionMultipler), both zero points subtracted."""
    zx, zy = (5, -17) if dt is DType.INT8 else (0, 0)
    sx, sy, so, zo = (0.011, 0.009, 0.07, 2) if dt is DType.INT8 else (3e-5, 4e-5, 2e-5, 0)
    x = rand_q((2, 3, 8), dt)
    y = rand_q((2, 5, 8) if adj_y else (2, 8, 5), dt)
    yy = np.swapaxes(y, 1, 2) if adj_y else y
    acc = np.einsum("bmk,bkn->bmn", x.astype(np.int64) - zx, yy.astype(np.int64) - zy)
    scale = float(np.float32(sx) * np.float32(sy)) / so
    ref = np.clip((mbqm64 if dt is DType.INT16 else mbqm)(acc, *quantize_multiplier(scale)) + zo, *dt.range())
    m = QOp()
    m.op("tfl.batch_matmul", [m.input(x, dt, qp(sx, zx)), m.input(y, dt, qp(sy, zy))], ref.shape, dt, qp(so, zo),
         adj_x=False, adj_y=adj_y)
    exact(m.run(), ref)


# ---------------------------------------------------------------------------------------------------- pools
@pytest.mark.parametrize("dt,k,s,padding,zp,act", [
    (DType.INT8, 2, 2, "VALID", 13, "NONE"), (DType.INT8, 3, 2, "SAME", -40, "RELU6"),
    (DType.INT8, 3, 1, "SAME", 0, "RELU"), (DType.INT16, 3, 2, "SAME", 0, "NONE")])
def test_average_pool_quantized_ties(dt: DType, k: int, s: int, padding: str, zp: int, act: str) -> None:
    """Small-range inputs around the zero point make many exact ties: TFLite rounds the raw sum half away from
    zero, which AVG_POOL2D with zero points 0 reproduces (op_inventory §5.5's mismatch needs zp != 0 in TOSA)."""
    x = rand_q((2, 7, 7, 3), dt, zp - 3, zp + 3) if dt is DType.INT8 else rand_q((1, 7, 7, 2), dt)
    sc = 0.02 if dt is DType.INT8 else 3e-5
    lo, hi = act_range(act, sc, zp, dt)
    ref = np.clip(avg_pool_ref(x, k, s, padding), lo, hi)
    m = QOp()
    m.op("tfl.average_pool_2d", [m.input(x, dt, qp(sc, zp))], ref.shape, dt, qp(sc, zp), filter_height=k,
         filter_width=k, stride_h=s, stride_w=s, padding=padding, fused_activation_function=act)
    exact(m.run(), ref)


def test_average_pool_quantized_needs_equal_quant() -> None:
    m = QOp()
    m.op("tfl.average_pool_2d", [m.input(rand_q((1, 4, 4, 1), DType.INT8), DType.INT8, qp(0.1, 0))], (1, 2, 2, 1),
         DType.INT8, qp(0.2, 0), filter_height=2, filter_width=2, stride_h=2, stride_w=2, padding="VALID",
         fused_activation_function="NONE")
    with pytest.raises(UnsupportedOpsError, match="average_pool_2d"):
        m.run()


@pytest.mark.parametrize("dt,requant", [(DType.INT8, False), (DType.INT8, True), (DType.INT16, False)])
def test_max_pool_quantized(dt: DType, requant: bool) -> None:
    x = rand_q((1, 6, 6, 2), dt)
    iq = qp(0.03, 5) if dt is DType.INT8 else qp(3e-5, 0)
    oq = qp(0.05, -7) if requant else iq
    mx = x.reshape(1, 3, 2, 3, 2, 2).max(axis=(2, 4)).astype(np.int64)
    ref = mx if not requant else np.clip(mbqm(mx - 5, *quantize_multiplier(0.03 / 0.05)) - 7, -128, 127)
    m = QOp()
    m.op("tfl.max_pool_2d", [m.input(x, dt, iq)], ref.shape, dt, oq, filter_height=2, filter_width=2, stride_h=2,
         stride_w=2, padding="VALID", fused_activation_function="NONE")
    exact(m.run(), ref)


# ---------------------------------------------------------------------------------------------- reductions
def mean_ref(x: np.ndarray, axes: tuple[int, ...], si: float, zi: int, so: float, zo: int, dt: DType) -> np.ndarray:
    """reference_ops::QuantizedMeanOrSum / reference_integer_ops::Mean: 1/N folded into the multiplier."""
    n = int(np.prod([x.shape[a] for a in axes]))
    s = (x.astype(np.int64) - zi).sum(axis=axes, keepdims=True)
    q, e = quantize_multiplier(si / so)
    sh = min(n.bit_length() - 1, 32, 31 + e)
    return np.clip(mbqm(s, (q << sh) // n, e - sh) + zo, *dt.range())


@pytest.mark.parametrize("dt,shape,axes,keep", [
    (DType.INT8, (2, 5, 6, 3), (1, 2), True), (DType.INT8, (2, 5, 6, 3), (3,), False),
    (DType.INT8, (3, 7, 4), (0, 2), False), (DType.INT8, (1, 13, 13, 8), (1, 2), True),
    (DType.INT16, (2, 5, 6, 3), (1, 2), True), (DType.INT16, (4, 9), (1,), False)])
def test_mean_quantized(dt: DType, shape: tuple[int, ...], axes: tuple[int, ...], keep: bool) -> None:
    si, zi, so, zo = (0.017, -11, 0.006, 23) if dt is DType.INT8 else (3e-5, 0, 1.1e-5, 0)
    x = rand_q(shape, dt)
    ref = mean_ref(x, axes, si, zi, so, zo, dt)
    if not keep:
        ref = ref.reshape([d for i, d in enumerate(shape) if i not in axes])
    m = QOp()
    m.op("tfl.mean", [m.input(x, dt, qp(si, zi)), m.const(np.array(axes, np.int32), DType.INT32)], ref.shape, dt,
         qp(so, zo), keep_dims=keep)
    exact(m.run(), ref)


@pytest.mark.parametrize("dt,si,zi,so,zo", [(DType.INT8, 0.0123, 9, 0.031, -2), (DType.INT8, 0.02, 0, 0.02, 0),
                                            (DType.INT16, 3e-5, 0, 3e-5, 0)])
def test_sum_quantized(dt: DType, si: float, zi: int, so: float, zo: int) -> None:
    """Round-once requantization of sum(x - zp_in), saturated (LiteRT's default SUM kernel; its BUILTIN_REF SUM is
    broken, see tfl_reduce.sum_), against exact rational rounding.  The kernel scales by a 31-bit multiplier, so a
    value within its error of a half (e.g. 61.49999999 for these scales) may round either way: the inputs are drawn
    (from this test's own generator, whatever ran before it) until every value is clear of a half by 1e-4."""
    rng = np.random.default_rng(509)
    ratio = Fraction(si) / Fraction(so)
    while True:
        a, b = dt.range()
        x = rng.integers(a, b + 1, size=(2, 4, 5))
        s = (x.astype(np.int64) - zi).sum(axis=1)
        exact_vals = [Fraction(int(v)) * ratio for v in s.reshape(-1)]
        if all(abs(v - math.floor(v) - Fraction(1, 2)) > Fraction(1, 10**4) for v in exact_vals):
            break
    ref = np.clip(np.array([math.floor(v + Fraction(1, 2)) for v in exact_vals]).reshape(s.shape) + zo, *dt.range())
    m = QOp()
    m.op("tfl.sum", [m.input(x, dt, qp(si, zi)), m.const(np.array([1], np.int32), DType.INT32)], ref.shape, dt,
         qp(so, zo), keep_dims=False)
    exact(m.run(), ref)


@pytest.mark.parametrize("name", ["tfl.reduce_max", "tfl.reduce_min"])
@pytest.mark.parametrize("dt", [DType.INT8, DType.INT16])
def test_reduce_minmax_quantized(name: str, dt: DType) -> None:
    x = rand_q((2, 3, 4), dt)
    q = qp(0.01, 3) if dt is DType.INT8 else qp(3e-5, 0)
    ref = (x.max if name == "tfl.reduce_max" else x.min)(axis=(0, 2))
    m = QOp()
    m.op(name, [m.input(x, dt, q), m.const(np.array([0, 2], np.int32), DType.INT32)], ref.shape, dt, q,
         keep_dims=False)
    exact(m.run(), ref)


@pytest.mark.parametrize("name", ["tfl.arg_max", "tfl.arg_min"])
@pytest.mark.parametrize("dt", [DType.INT8, DType.INT16])
def test_arg_max_min_quantized(name: str, dt: DType) -> None:
    x = rand_q((3, 7, 2), dt, -5, 5)  # many equal values: the first index must win
    q = qp(0.01, 3) if dt is DType.INT8 else qp(3e-5, 0)
    ref = (np.argmax if name == "tfl.arg_max" else np.argmin)(x, axis=1)
    m = QOp()
    m.op(name, [m.input(x, dt, q), m.const(np.array([1], np.int32), DType.INT32)], ref.shape, DType.INT32, None)
    exact(m.run(), ref)


def prod_ref(x: np.ndarray, axes: tuple[int, ...], si: float, zi: int, so: float, zo: int, dt: DType) -> np.ndarray:
    """QuantizedReduceProd: p = x0 - zp; p = MBQM64(p·(x_j - zp), g) in row-major order; MBQM64(p, g) + zo."""
    n = int(np.prod([x.shape[a] for a in axes]))
    q, e = quantize_multiplier(si / so ** (1.0 / n))
    kept = [a for a in range(x.ndim) if a not in axes]
    flat = np.transpose(x.astype(np.int64) - zi, kept + list(axes)).reshape(-1, n)
    p = flat[:, 0]
    for j in range(1, n):
        p = mbqm64(p * flat[:, j], q, e)
    out = np.clip(mbqm64(p, q, e) + zo, *dt.range())
    return out.reshape([1 if a in axes else d for a, d in enumerate(x.shape)])


@pytest.mark.parametrize("axes", [(2,), (1, 2)])
def test_reduce_prod_quantized(axes: tuple[int, ...]) -> None:
    x = rand_q((2, 3, 2), DType.INT8)
    si, zi, so, zo = 0.01, -3, 0.004, 5
    ref = prod_ref(x, axes, si, zi, so, zo, DType.INT8)
    m = QOp()
    m.op("tfl.reduce_prod", [m.input(x, DType.INT8, qp(si, zi)), m.const(np.array(axes, np.int32), DType.INT32)],
         ref.shape, DType.INT8, qp(so, zo), keep_dims=True)
    exact(m.run(), ref)


def test_reduce_prod_int16_wide_products() -> None:
    """int16 running products leave i32 (TFLite forms them in 64 bits); the multi-limb chain reproduces every step,
    including the int64 → int32 casts that wrap for full-range inputs."""
    x = rand_q((1, 4, 3), DType.INT16)
    si, so = 3e-5, 2.7e-5
    n = 3
    q, e = quantize_multiplier(si / so ** (1.0 / n))
    p = x.astype(np.int64)[..., 0]
    for j in range(1, n):
        p = (mbqm64(p * x.astype(np.int64)[..., j], q, e) + (1 << 31)) % (1 << 32) - (1 << 31)  # C's int32 cast
    ref = np.clip((mbqm64(p, q, e) + (1 << 31)) % (1 << 32) - (1 << 31), -32768, 32767).reshape(1, 4, 1)
    m = QOp()
    m.op("tfl.reduce_prod", [m.input(x, DType.INT16, qp(si, 0)), m.const(np.array([2], np.int32), DType.INT32)],
         (1, 4, 1), DType.INT16, qp(so, 0), keep_dims=True)
    exact(m.run(), ref)


def test_conv_weight_zero_points_must_agree() -> None:
    m = QOp()
    x = m.input(rand_q((1, 4, 4, 1), DType.INT8), DType.INT8, qp(0.1, 0))
    w = m.const(rand_q((2, 1, 1, 1), DType.INT8), DType.INT8, QuantParams((0.1, 0.2), (0, 1), 0))
    m.op("tfl.conv_2d", [x, w, m.no_value()], (1, 4, 4, 2), DType.INT8, qp(0.1, 0), padding="VALID", stride_h=1,
         stride_w=1, dilation_h_factor=1, dilation_w_factor=1, fused_activation_function="NONE")
    with pytest.raises(UnsupportedOpsError, match="zero points"):
        m.run()


# -------------------------------------------------------------------- Arm tools on the exotic integer path
def test_fully_connected_exact_path_validates_and_matches_reference_model() -> None:
    """The exact FC requantization uses MUL with shift 32, ARITHMETIC_RIGHT_SHIFT, SELECT …: tosa-opt must accept
    it with the declared profiles and the Arm reference model must agree bit for bit."""
    from tf2tosa.api import TosaModel
    from tf2tosa.verify import tosa_tools

    if not tosa_tools.available():
        pytest.skip("tosa-tools environment not available")
    m = QOp()
    x = rand_q((4, 16), DType.INT8)
    w = rand_q((6, 16), DType.INT8, -127, 127)
    m.op("tfl.fully_connected", [m.input(x, DType.INT8, qp(0.013, -5)), m.const(w, DType.INT8, qp(w_scales(6, True),
                                                                                                 0, 0)),
                                 m.no_value()], (4, 6), DType.INT8, qp(0.021, 7), fused_activation_function="NONE",
         weights_format="DEFAULT", keep_num_dims=False)
    convert_graph(m.g, ConvertOptions())
    model = TosaModel(m.g)
    data = model.to_bytes()
    ok, msg = tosa_tools.validate(data, model.profiles, model.extensions)
    assert ok, msg
    assert model.profiles == ["PRO-INT"]
    ours = next(iter(run(m.g, m.feeds).values()))
    arm = next(iter(tosa_tools.run_reference(data, m.feeds).values()))
    exact(np.asarray(ours), np.asarray(arm).reshape(np.shape(ours)))


# ------------------------------------------------------------ LiteRT BUILTIN_REF on patched cached models
def _patch_quant(buf: bytes, tensor: int, scale: Sequence[float], zp: Sequence[int]) -> bytes:
    """Overwrite a tensor's quantization scale/zero_point vectors in the flatbuffer (same lengths)."""
    import tflite
    from flatbuffers import number_types as nt

    out = bytearray(buf)
    q = tflite.Model.GetRootAsModel(buf, 0).Subgraphs(0).Tensors(tensor).Quantization()
    for field, arr in ((8, np.asarray(scale, np.float32)), (10, np.asarray(zp, np.int64))):
        o = nt.UOffsetTFlags.py_type(q._tab.Offset(field))
        pos, n = q._tab.Vector(o), q._tab.VectorLen(o)
        assert n == arr.size
        out[pos:pos + arr.nbytes] = arr.tobytes()
    return bytes(out)


def _tensor_index(buf: bytes, role: str) -> int:
    """Index of the model's single input (``"in"``) or output (``"out"``) tensor."""
    import tflite

    sg = tflite.Model.GetRootAsModel(buf, 0).Subgraphs(0)
    return int(sg.Inputs(0) if role == "in" else sg.Outputs(0))


LITERT_CASES = {
    # id: (model, input (scale, zp), output (scale, zp), input value range or None, number of inputs)
    "conv_2d": ("conv_2d", (0.011, 17), (0.03, -20), None, 4),
    "depthwise_mult2": ("depthwise_conv_2d/mult2", (0.009, -33), (0.02, 4), None, 4),
    "transpose_conv": ("transpose_conv", (0.012, 21), (0.05, 2), None, 4),
    "fully_connected": ("fully_connected/no_act", (0.0091, -12), (0.027, 9), None, 12),
    "avg_pool_same_ties": ("average_pool_2d/same3x3", (0.02, 13), (0.02, 13), (10, 16), 6),
    "avg_pool_valid_ties": ("average_pool_2d", (0.02, -50), (0.02, -50), (-53, -47), 6),
    "mean_hw": ("mean", (0.017, -11), (0.0061, 23), None, 6),
    "mean_axis3": ("mean/axis3", (0.013, 40), (0.009, -7), None, 6),
    "mean_axis3_same_quant": ("mean/axis3", (0.02, -40), (0.02, -40), None, 6),
    "reduce_prod": ("reduce_prod", (0.02, -3), (0.003, 5), (-20, 20), 6),
}


@pytest.mark.parametrize("case", sorted(LITERT_CASES))
def test_patched_models_vs_litert_reference_kernels(case: str, litert_worker: Any) -> None:
    import tf2tosa
    from tests.modelgen import ONE_OP_MODELS
    from tf2tosa.verify.litert import run_tflite_many

    name, (si, zi), (so, zo), rng_in, seeds = LITERT_CASES[case]
    try:
        buf = ONE_OP_MODELS[name](quant="int8")
    except ModuleNotFoundError:
        pytest.skip("the cached model needs TensorFlow to build")
    buf = _patch_quant(_patch_quant(buf, _tensor_index(buf, "in"), [si], [zi]), _tensor_index(buf, "out"), [so], [zo])
    model = tf2tosa.convert(buf)
    (inp,) = model.graph.inputs
    lo, hi = rng_in or (-128, 127)
    sets = [{inp.name: RNG.integers(lo, hi + 1, inp.type.static_shape).astype(np.int8)} for _ in range(seeds)]
    refs = run_tflite_many(buf, [{inp.source or inp.name: s[inp.name]} for s in sets], reference_kernels=True,
                           worker=litert_worker)
    for s, r in zip(sets, refs):
        (ref,) = r.values()
        exact(np.asarray(next(iter(model.run(s).values()))).reshape(ref.shape), ref)


@pytest.mark.parametrize("ic,noted", [(4, False), (2048, True)])
def test_conv_16x8_int32_bias_wide_accumulator_is_noted(ic: int, noted: bool) -> None:
    """16x8 conv with an int32 bias: TFLite accumulates in int32 (wrapping); a layer whose accumulator may exceed
    int32 is recorded in graph.record.inexact, a small one is not."""
    m = QOp()
    x = m.input(rand_q((1, 1, 1, ic), DType.INT16), DType.INT16, qp(3e-5, 0))
    w = m.const(rand_q((2, 1, 1, ic), DType.INT8, -127, 127), DType.INT8, QuantParams((0.01,), (0,), 0))
    bias = m.const(np.array([5, -7], np.int32), DType.INT32, QuantParams((3e-7,), (0,), 0))
    m.op("tfl.conv_2d", [x, w, bias], (1, 1, 1, 2), DType.INT16, qp(1e-3, 0), padding="VALID", stride_h=1,
         stride_w=1, dilation_h_factor=1, dilation_w_factor=1, fused_activation_function="NONE")
    legalize_graph(m.g)
    assert bool(m.g.record.inexact) is noted
