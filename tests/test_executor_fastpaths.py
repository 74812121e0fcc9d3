"""The executor's fast paths compute exactly what the spec's pseudo-code does.

* exact integer accumulation: float BLAS while every partial sum is provably below 2^24 (float32) or 2^53
  (float64), int64 otherwise - checked against Python integers and int64 on adversarial extremes, and checked to
  be the path actually taken;
* RESCALE in float64 while every intermediate is an integer below 2^53, int64 otherwise;
* blocked RESCALE / apply_scale_32 against a scalar transcription of S11743-11756 and S10067-10122;
* vectorised TABLE against the scalar lookup (S843-854, S5383-5397).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.executor_testing import Const, In, run_single
from tf2tosa.executor import numerics as nm
from tf2tosa.executor import run, tensor_ops
from tf2tosa.ir.types import DType as D


def test_exact_matmul_float_and_int64_paths() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(-(1 << 20), 1 << 20, (7, 33))
    b = rng.integers(-(1 << 20), 1 << 20, (33, 5))
    want = [[sum(int(a[i, k]) * int(b[k, j]) for k in range(33)) for j in range(5)] for i in range(7)]
    assert tensor_ops.exact_matmul(a, b).tolist() == want  # 2^40 * 33 < 2^53: float64 BLAS
    big_a = a * 4099 + 1  # products ~2^52: partial sums beyond 2^53 need int64
    want_big = [[sum(int(big_a[i, k]) * int(b[k, j]) for k in range(33)) for j in range(5)] for i in range(7)]
    assert tensor_ops.exact_matmul(big_a, b).tolist() == want_big
    # the float path would be wrong here, so the fallback is really needed
    approx = np.matmul(big_a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
    assert approx.tolist() != want_big


class _Spy:
    def __init__(self) -> None:
        self.dtypes: list[tuple[str, str]] = []
        self.terms: list[int] = []  # K of each call
        self._orig = np.matmul

    def __call__(self, a: Any, b: Any, *args: Any, **kw: Any) -> Any:
        self.dtypes.append((np.asarray(a).dtype.name, np.asarray(b).dtype.name))
        self.terms.append(int(np.shape(a)[-1]))
        return self._orig(a, b, *args, **kw)


def _conv_i8(rng: np.random.Generator, k: int) -> tuple[list[Any], dict[str, Any]]:
    x = rng.integers(-128, 128, (1, 6, 6, 4)).astype(np.int8)
    w = rng.integers(-128, 128, (3, k, k, 4)).astype(np.int8)
    bias = rng.integers(-1000, 1000, (3,)).astype(np.int32)
    args = [In(x, D.INT8), Const(w, D.INT8), Const(bias, D.INT32), Const(np.array([-7]), D.INT8),
            Const(np.array([3]), D.INT8)]
    return args, {"pad": [1, 1, 1, 1] if k == 3 else [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1],
                  "acc_type": "INT32"}


def _conv_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray, izp: int, wzp: int, pad: int) -> np.ndarray:
    """CONV2D (S1653-1697) with Python integers, one output at a time."""
    n, ih, iw, ic = x.shape
    oc, kh, kw, _ = w.shape
    oh, ow = ih + 2 * pad - kh + 1, iw + 2 * pad - kw + 1
    out = np.zeros((n, oh, ow, oc), np.int64)
    for b in range(n):
        for y in range(oh):
            for xx in range(ow):
                for o in range(oc):
                    acc = 0
                    for ky in range(kh):
                        for kx in range(kw):
                            iy, ix = y + ky - pad, xx + kx - pad
                            if 0 <= iy < ih and 0 <= ix < iw:
                                for c in range(ic):
                                    acc += (int(x[b, iy, ix, c]) - izp) * (int(w[o, ky, kx, c]) - wzp)
                    out[b, y, xx, o] = acc + int(bias[o])
    return out


@pytest.mark.parametrize("k", [1, 3])
def test_int8_conv_uses_float32_blas_when_the_bound_allows_and_is_exact(monkeypatch: pytest.MonkeyPatch,
                                                                        k: int) -> None:
    rng = np.random.default_rng(k)
    args, attrs = _conv_i8(rng, k)
    spy = _Spy()
    monkeypatch.setattr(tensor_ops.np, "matmul", spy)
    (got,) = run_single("CONV2D", args, D.INT32, attrs)
    monkeypatch.undo()
    # raw inputs |x| <= 128, sum_k |w - wzp| <= 131 * K and the folded bias: far below 2^24
    assert spy.dtypes and set(spy.dtypes) == {("float32", "float32")}
    want = _conv_reference(args[0].arr, args[1].arr, args[2].arr, -7, 3, 1 if k == 3 else 0)
    assert got.tolist() == want.tolist()


def _int64_conv(x: np.ndarray, w: np.ndarray, bias: np.ndarray, izp: int, wzp: int) -> np.ndarray:
    """Unpadded stride-1 CONV2D in int64 (the reference for the adversarial cases)."""
    oc, kh, kw, _ = w.shape
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    xi, wi = x.astype(np.int64) - izp, w.astype(np.int64) - wzp
    out = np.zeros((x.shape[0], oh, ow, oc), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            out += np.einsum("nhwc,oc->nhwo", xi[:, ky:ky + oh, kx:kx + ow], wi[:, ky, kx])
    return out + bias.astype(np.int64)


@pytest.mark.parametrize(("ic", "want_type"), [(8, "float32"), (2000, "float32 in ranges")])
def test_int8_conv_on_adversarial_extremes(monkeypatch: pytest.MonkeyPatch, ic: int, want_type: str) -> None:
    """Products at their extremes (x = -128 against weights -128 / 127 with the zero point pushing |x - zp| to 255):
    one float32 GEMM is taken only while the bound proves every partial sum below 2^24, and both paths equal int64.
    With IC = 2000 the sums pass 2^24, where one float32 GEMM is no longer exact: the GEMM goes over ranges of K
    whose sums stay below 2^24 (raw |x| <= 128 times sum |w| <= 128 * 128 per column), summed in float64."""
    rng = np.random.default_rng(ic)
    x = np.full((1, 3, 3, ic), -128, np.int8)
    x[0, 1, 1, ::3] = 127
    w = np.where(rng.random((2, 1, 1, ic)) < 0.5, -128, 127).astype(np.int8)
    w[1] = 127  # channel 1: odd products (255 * 127) of one sign, the sums grow monotonically to the bound
    bias = np.array([(1 << 20) + 1, -(1 << 20) - 3], np.int32)
    args = [In(x, D.INT8), Const(w, D.INT8), Const(bias, D.INT32), Const(np.array([127]), D.INT8),
            Const(np.array([0]), D.INT8)]
    spy = _Spy()
    monkeypatch.setattr(tensor_ops.np, "matmul", spy)
    (got,) = run_single("CONV2D", args, D.INT32, {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1],
                                                  "acc_type": "INT32"})
    monkeypatch.undo()
    assert {a for a, _ in spy.dtypes} == {"float32"}
    if ic == 2000:
        # (the helper runs the kernel more than once: each run covers K once, in consecutive ranges)
        ranges, k0 = [], 0
        for t in spy.terms:
            ranges.append((k0, k0 + t))
            k0 = 0 if k0 + t == ic else k0 + t
        wabs = np.abs(w.reshape(2, ic).astype(np.int64))
        assert len(ranges) >= 2 and k0 == 0
        assert all(128 * int(wabs[:, a:b].sum(axis=1).max()) < 1 << 24 for a, b in ranges)
    else:
        assert set(spy.terms) == {ic}
    want = _int64_conv(x, w, bias, 127, 0)
    assert got.tolist() == want.tolist()
    if ic == 2000:  # one float32 GEMM would be wrong here: the bound check is needed
        approx = (x.astype(np.float32) - 127).reshape(9, ic) @ w.reshape(2, ic).T.astype(np.float32)
        assert (approx.astype(np.int64) + bias).tolist() != want.reshape(9, 2).tolist()


def test_depthwise_int8_adversarial_extremes_equal_int64() -> None:
    """Depthwise with |x - izp| = 255 and |w| = 128 everywhere, 3x3 taps and padding: exact."""
    x = np.full((1, 5, 5, 4), -128, np.int8)
    w = np.full((3, 3, 4, 1), -128, np.int8)
    w[:, :, 1] = 127
    bias = np.array([1 << 30, -(1 << 30), 7, -7], np.int32)
    (got,) = run_single("DEPTHWISE_CONV2D", [In(x, D.INT8), Const(w, D.INT8), Const(bias, D.INT32),
                                             Const(np.array([127]), D.INT8), Const(np.array([0]), D.INT8)],
                        D.INT32, {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT32"})
    xp = np.pad(x.astype(np.int64) - 127, ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros((1, 5, 5, 4), np.int64)
    for ky in range(3):
        for kx in range(3):
            want += xp[:, ky:ky + 5, kx:kx + 5] * w[ky, kx, :, 0].astype(np.int64)
    assert got.tolist() == (want + bias).tolist()


def test_int8_depthwise_accumulates_exactly_in_float32() -> None:
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (1, 7, 7, 3)).astype(np.int8)
    w = rng.integers(-128, 128, (3, 3, 3, 2)).astype(np.int8)
    bias = rng.integers(-99, 99, (6,)).astype(np.int32)
    (got,) = run_single("DEPTHWISE_CONV2D", [In(x, D.INT8), Const(w, D.INT8), Const(bias, D.INT32),
                                             Const(np.array([5]), D.INT8), Const(np.array([-2]), D.INT8)],
                        D.INT32, {"pad": [1, 0, 0, 0], "stride": [1, 2], "dilation": [1, 1], "acc_type": "INT32"})
    oh, ow = 6, 3
    want = np.zeros((1, oh, ow, 6), np.int64)
    xp = np.pad(x.astype(np.int64) - 5, ((0, 0), (1, 0), (0, 0), (0, 0)))
    for y in range(oh):
        for xx in range(ow):
            for c in range(3):
                for m in range(2):
                    win = xp[0, y:y + 3, xx * 2:xx * 2 + 3, c]
                    dot = int(np.sum(win * (w[:, :, c, m].astype(np.int64) + 2)))
                    want[0, y, xx, c * 2 + m] = dot + bias[c * 2 + m]
    assert got.tolist() == want.tolist()
    # i16 x i8 (acc i48): partial sums beyond 2^24 take float64, still exact
    x16 = rng.integers(-32768, 32768, (1, 4, 4, 2)).astype(np.int16)
    w8 = rng.integers(-128, 128, (2, 2, 2, 1)).astype(np.int8)
    (g16,) = run_single("DEPTHWISE_CONV2D", [In(x16, D.INT16), Const(w8, D.INT8), Const(np.zeros(2), D.INT48),
                                             Const(np.array([0]), D.INT16), Const(np.array([0]), D.INT8)],
                        D.INT48, {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT48"})
    ref = np.zeros((1, 3, 3, 2), np.int64)
    for y in range(3):
        for xx in range(3):
            for c in range(2):
                ref[0, y, xx, c] = sum(int(x16[0, y + a, xx + b, c]) * int(w8[a, b, c, 0]) for a in range(2)
                                       for b in range(2))
    assert g16.tolist() == ref.tolist()


def _scale_32_scalar(v: int, m: int, s: int, double: bool) -> int:
    """apply_scale_32 (S11743-11756) on Python integers."""
    rnd = 1 << (s - 1)
    if double and s > 31:
        rnd += (1 << 30) if v >= 0 else -(1 << 30)
    return (v * m + rnd) >> s


@pytest.mark.parametrize("double", [False, True])
def test_blocked_apply_scale_32_matches_the_pseudo_code(double: bool) -> None:
    rng = np.random.default_rng(int(double))
    n = nm.BLOCK * 2 + 123  # several blocks and a ragged tail
    s = rng.integers(20, 40, 16)
    m = rng.integers(0, 1 << 31, 16)
    lim = [1 << min(int(sh) - 1, 31) for sh in s]  # value is int32 (S11743) and within the shift's range
    v = np.stack([rng.integers(-b, b, n // 16) for b in lim], axis=-1)
    got = nm.apply_scale_32(v, m, s, double)
    flat_v, flat_g = v.reshape(-1, 16), got.reshape(-1, 16)
    rows = rng.integers(0, flat_v.shape[0], 300)
    for r in rows:
        for c in range(16):
            assert flat_g[r, c] == _scale_32_scalar(int(flat_v[r, c]), int(m[c]), int(s[c]), double)
    # per-tensor (scalar multiplier / shift) over a big tensor
    vv = rng.integers(-(1 << 30), 1 << 30, (3, nm.BLOCK + 7))
    g2 = nm.apply_scale_32(vv, np.int64(1518500250), np.int64(38), double)
    idx = rng.integers(0, vv.size, 500)
    assert all(g2.reshape(-1)[i] == _scale_32_scalar(int(vv.reshape(-1)[i]), 1518500250, 38, double) for i in idx)


def _rescale_scalar(x: int, m: int, s: int, izp: int, ozp: int, lo: int, hi: int, double: bool) -> int:
    r = _scale_32_scalar(x - izp, m, s, double) + ozp
    return min(max(r, lo), hi)


@pytest.mark.parametrize("per_channel", [False, True])
def test_rescale_kernel_matches_the_pseudo_code(per_channel: bool) -> None:
    rng = np.random.default_rng(9)
    c = 24
    x = rng.integers(-(1 << 20), 1 << 20, (2, 40, 37, c)).astype(np.int32)
    mult = rng.integers(1 << 29, 1 << 31, c if per_channel else 1)
    shift = rng.integers(33, 40, c if per_channel else 1)
    (got,) = run_single("RESCALE", [In(x, D.INT32), Const(mult, D.INT32), Const(shift, D.INT8),
                                    Const(np.array([0]), D.INT32), Const(np.array([-3]), D.INT8)], D.INT8,
                        {"scale32": True, "rounding_mode": "DOUBLE_ROUND", "per_channel": per_channel,
                         "input_unsigned": False, "output_unsigned": False})
    flat_x, flat_g = x.reshape(-1, c), got.reshape(-1, c)
    for r in rng.integers(0, flat_x.shape[0], 200):
        for ch in range(c):
            k = ch if per_channel else 0
            assert flat_g[r, ch] == _rescale_scalar(int(flat_x[r, ch]), int(mult[k]), int(shift[k]), 0, -3, -128, 127,
                                                    True)


@pytest.mark.parametrize("double", [False, True])
def test_rescale_float64_path_on_adversarial_extremes(monkeypatch: pytest.MonkeyPatch, double: bool) -> None:
    """RESCALE's float64 evaluation against Python integers for every value at the edges of its 2^53 bound:
    the largest multiplier, values at the ends of the REQUIRE range, shifts either side of 31 (double rounding),
    ties of the rounding and zero points; beyond the bound the int64 path must run (and agrees too)."""
    used: list[bool] = []
    orig = nm._rescale_32_float

    def spy(*a: Any) -> bool:
        used.append(orig(*a))
        return used[-1]

    monkeypatch.setattr(nm, "_rescale_32_float", spy)
    m = np.array([(1 << 31) - 1, 1 << 30, 0, 1, (1 << 31) - 1, 1518500250], np.int64)
    s = np.array([31, 32, 33, 25, 40, 45], np.int64)
    for vmax, float_path in [((1 << 21) + 5, True), ((1 << 23), False)]:
        edge = [0, 1, -1, vmax, -vmax, vmax - 1, -vmax + 1, 1 << 20, -(1 << 20), (1 << 20) + 1]
        ties = [(1 << 30) + 1, -(1 << 30) - 1, 3 << 29, -(3 << 29)]
        vals = np.array([[v] * len(m) for v in edge + ties + [vmax // 3, -vmax // 7]], np.int64)
        vals = np.clip(vals, -vmax, vmax)
        cases = [(0, (-(1 << 31), (1 << 31) - 1), np.int32), (-128, (-128, 127), np.int8),
                 (5, (-(1 << 15), (1 << 15) - 1), np.int16), (127, (-128, 127), np.int8)]
        for ozp, (lo, hi), narrow in cases:
            # int64 results, and the output's own signed type (where the float path floors by an unsigned cast)
            for out_t in (np.int64, narrow):
                out = np.empty(vals.shape, out_t)
                used.clear()
                nm.rescale_32_into(vals, m, s, double, ozp, lo, hi, out)
                assert used == [float_path]
                for r in range(vals.shape[0]):
                    for c in range(len(m)):
                        want = min(max(_scale_32_scalar(int(vals[r, c]), int(m[c]), int(s[c]), double) + ozp, lo), hi)
                        assert out[r, c] == want, (int(vals[r, c]), int(m[c]), int(s[c]), ozp, out_t)


def test_rescale_float_accumulator_signed_zero_and_zero_multiplier() -> None:
    """A float32 accumulator (what a fused convolution hands over) holding -0.0, and m == 0 with negative values:
    the double-round sign term may pick either sign there, the result must still be the pseudo-code's."""
    vals = np.array([[-0.0, 0.0, -5.0, 5.0], [-(1 << 20), 1 << 20, -1.0, 1.0]], np.float32)
    m = np.array([0, 1 << 30, 0, (1 << 31) - 1], np.int64)
    s = np.array([40, 33, 35, 31], np.int64)
    for out_t, ozp, (lo, hi) in [(np.int8, -128, (-128, 127)), (np.int32, 0, (-(1 << 31), (1 << 31) - 1))]:
        out = np.empty(vals.shape, out_t)
        nm.rescale_32_into(vals, m, s, True, ozp, lo, hi, out)
        want = [[min(max(_scale_32_scalar(int(v), int(m[c]), int(s[c]), True) + ozp, lo), hi)
                 for c, v in enumerate(row)] for row in vals]
        assert out.tolist() == want


def test_table_lookups_match_the_pseudo_code() -> None:
    rng = np.random.default_rng(2)
    t8 = rng.integers(-128, 128, 256).astype(np.int8)
    x8 = np.arange(-128, 128, dtype=np.int8)
    (g8,) = run_single("TABLE", [In(x8, D.INT8), Const(t8, D.INT8)], D.INT8)
    assert g8.tolist() == [int(t8[v + 128]) for v in range(-128, 128)]
    t16 = np.clip(np.cumsum(rng.integers(-200, 200, 513)), -32768, 32767).astype(np.int16)
    x16 = np.arange(-32768, 32768, dtype=np.int16)
    (g16,) = run_single("TABLE", [In(x16, D.INT16), Const(t16, D.INT16)], D.INT32)

    def lookup(v: int) -> int:  # apply_lookup_s (S843-854)
        index = (v + 32768) >> 7
        frac = v & 0x7F
        base, nxt = int(t16[index]), int(t16[min(index + 1, 512)])
        return (base << 7) + (nxt - base) * frac

    assert g16.tolist() == [lookup(v) for v in range(-32768, 32768)]


def test_repeated_runs_reuse_the_cached_order() -> None:
    from tests.executor_testing import GraphBuilder

    b = GraphBuilder("order")
    (a,) = b.add("ADD", [In(np.ones(3, np.float32)), In(np.ones(3, np.float32))], D.FP32, output=False)
    b.add("ABS", [a], D.FP32)
    first = run(b.graph, b.feed)
    assert run(b.graph, b.feed)[b.graph.outputs[0].name].tolist() == first[b.graph.outputs[0].name].tolist()
    # changing the graph invalidates the cache
    b.add("NEGATE", [a, Const(np.array([0.0], np.float32)), Const(np.array([0.0], np.float32))], D.FP32)
    out = run(b.graph, b.feed)
    assert out[b.graph.outputs[-1].name].tolist() == [-2.0] * 3


@pytest.mark.parametrize("op", ["CONV2D", "DEPTHWISE_CONV2D"])
def test_padding_contributes_nothing_even_with_infinite_weights(op: str) -> None:
    """Padded positions are skipped by the pseudo-code (not multiplied by zero): an infinite weight must not turn
    the border outputs into NaN (0 * inf)."""
    x = np.ones((1, 3, 3, 1), np.float32)
    w = np.ones((1, 3, 3, 1) if op == "CONV2D" else (3, 3, 1, 1), np.float32)
    w[(0, 0, 0, 0)] = np.inf  # the top-left tap: only used where the input row/column -1 would be
    z = Const(np.array([0.0], np.float32))
    (got,) = run_single(op, [In(x), Const(w), Const(np.zeros(1, np.float32)), z, z], D.FP32,
                        {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "acc_type": "FP32"})
    got = got.reshape(3, 3)
    assert not np.isnan(got).any()
    assert got[0, 0] == 4.0 and got[0, 1] == 6.0 and got[1, 0] == 6.0  # the inf tap falls on padding
    assert np.isinf(got[1, 1]) and np.isinf(got[2, 2])  # ... and on real inputs elsewhere


def _conv_rescale_graph(rng: np.random.Generator, shift: int) -> tuple[Any, dict[str, Any], list[Any]]:
    from tests.executor_testing import GraphBuilder

    args, attrs = _conv_i8(rng, 3)
    b = GraphBuilder("conv_rescale")
    (acc,) = b.add("CONV2D", args, D.INT32, attrs, output=False)
    mult = rng.integers(1 << 30, 1 << 31, 3)
    shifts = np.array([shift, shift + 1, shift + 2])
    b.add("RESCALE", [acc, Const(mult, D.INT32), Const(shifts, D.INT8), Const(np.array([0]), D.INT32),
                      Const(np.array([-5]), D.INT8)], D.INT8,
          {"scale32": True, "rounding_mode": "DOUBLE_ROUND", "per_channel": True, "input_unsigned": False,
           "output_unsigned": False})
    return b, {"mult": mult, "shift": shifts}, args


def test_conv_then_rescale_run_fused_and_match_the_pseudo_code() -> None:
    """CONV2D whose i32 result only a RESCALE reads runs fused (its exact accumulator goes straight to the RESCALE):
    the output equals CONV2D then RESCALE on Python integers."""
    from tf2tosa.executor import run_with_profile

    rng = np.random.default_rng(21)
    b, q, args = _conv_rescale_graph(rng, 33)
    out, prof = run_with_profile(b.graph, b.feed)
    assert any(k.startswith("tosa.CONV2D+RESCALE#") for k in prof)
    acc = _conv_reference(args[0].arr, args[1].arr, args[2].arr, -7, 3, 1)
    got = out[b.graph.outputs[0].name]
    for idx in np.ndindex(acc.shape):
        c = idx[-1]
        assert got[idx] == _rescale_scalar(int(acc[idx]), int(q["mult"][c]), int(q["shift"][c]), 0, -5, -128, 127,
                                           True)


def test_fused_rescale_failure_names_the_rescale() -> None:
    """A REQUIRE of the RESCALE that fails inside the fused run is reported at the RESCALE, as when run apart."""
    from tf2tosa.executor import run_checked

    b, _, _ = _conv_rescale_graph(np.random.default_rng(22), 33)
    assert run_checked(b.graph, b.feed, validate=False).ok
    resc = next(op for op in b.graph.ops.values() if op.opcode == "RESCALE")
    shift_op = resc.operands[2].producer
    assert shift_op is not None
    shift_op.attrs["values"] = np.array([3, 4, 5], np.int8)  # |acc| >= 2^(shift-1): the value REQUIRE fails
    res = run_checked(b.graph, b.feed, validate=False)
    assert res.status == "UNPREDICTABLE" and "apply_scale_32 value" in res.message
    assert res.op is not None and "RESCALE" in res.op


def test_clamp_after_conv_runs_in_place_without_touching_other_values() -> None:
    """CLAMP over a float convolution result nobody else reads overwrites it; a result also read elsewhere is left
    alone.  Checked against numpy (a 1x1 convolution is a matmul)."""
    from tests.executor_testing import GraphBuilder

    rng = np.random.default_rng(23)
    x = rng.standard_normal((1, 4, 4, 8)).astype(np.float32)
    w = rng.standard_normal((5, 1, 1, 8)).astype(np.float32)
    z = Const(np.array([0.0], np.float32))
    attrs = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "FP32"}
    b = GraphBuilder("conv_clamp")
    xin = In(x, name="x")
    (c1,) = b.add("CONV2D", [xin, Const(w), Const(np.zeros(5, np.float32)), z, z], D.FP32, attrs, output=False)
    b.add("CLAMP", [c1], D.FP32, {"min_val": np.float32(-0.5), "max_val": np.float32(0.5), "nan_mode": "PROPAGATE"})
    (c2,) = b.add("CONV2D", [b.graph.inputs[0], Const(w), Const(np.zeros(5, np.float32)), z, z], D.FP32, attrs)
    b.add("CLAMP", [c2], D.FP32, {"min_val": np.float32(-0.5), "max_val": np.float32(0.5), "nan_mode": "PROPAGATE"})
    out = run(b.graph, b.feed)
    names = [v.name for v in b.graph.outputs]
    ref = np.einsum("nhwc,oc->nhwo", x.astype(np.float64), w[:, 0, 0].astype(np.float64))
    assert np.allclose(out[names[0]], np.clip(ref, -0.5, 0.5), atol=1e-5)
    assert np.allclose(out[names[1]], ref, atol=1e-5)  # the conv output also read by the graph: not clamped
    assert np.allclose(out[names[2]], np.clip(ref, -0.5, 0.5), atol=1e-5)


def _depthwise_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray, izp: int, wzp: int, pad: list[int],
                         stride: list[int], dil: list[int]) -> np.ndarray:
    """DEPTHWISE_CONV2D (spec 2.3.5) on Python integers, one output at a time; padded positions are skipped."""
    n, ih, iw, c = x.shape
    kh, kw, _, mm = w.shape
    pt, pb, pl, pr = pad
    oh = (ih - 1 + pt + pb - (kh - 1) * dil[0]) // stride[0] + 1
    ow = (iw - 1 + pl + pr - (kw - 1) * dil[1]) // stride[1] + 1
    out = np.zeros((n, oh, ow, c * mm), np.int64)
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    for m in range(mm):
                        acc = 0
                        for ky in range(kh):
                            for kx in range(kw):
                                iy = oy * stride[0] + ky * dil[0] - pt
                                ix = ox * stride[1] + kx * dil[1] - pl
                                if 0 <= iy < ih and 0 <= ix < iw:
                                    acc += (int(x[b, iy, ix, ch]) - izp) * (int(w[ky, kx, ch, m]) - wzp)
                        out[b, oy, ox, ch * mm + m] = acc + int(bias[(ch * mm + m) % bias.size])
    return out

def _spy_depthwise_einsum(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The accumulator dtype of every call of the depthwise einsum path, appended as it runs."""
    calls: list[str] = []
    orig = tensor_ops._depthwise_einsum

    def spy(*a: Any) -> np.ndarray:
        calls.append(np.dtype(a[4]).name)
        return orig(*a)

    monkeypatch.setattr(tensor_ops, "_depthwise_einsum", spy)
    return calls



@pytest.mark.parametrize(("stride", "dil", "pad", "mm", "ih"), [
    ([1, 1], [1, 1], [1, 1, 1, 1], 1, 7),  # stride 1 along W: the merged (OW*C) einsum
    ([2, 1], [1, 2], [0, 2, 2, 1], 2, 7),  # merged, channel multiplier, dilation, uneven padding
    ([2, 2], [1, 1], [0, 1, 0, 1], 1, 8),  # stride 2: the windowed einsum
    ([1, 3], [2, 1], [2, 2, 1, 0], 3, 7),
    ([1, 1], [1, 1], [6, 5, 0, 2], 1, 2),  # padding taller than the kernel: whole bands of padding rows
])
@pytest.mark.parametrize("chunk", [tensor_ops.DW_CHUNK, 10, 4])
def test_depthwise_einsum_paths_on_adversarial_extremes(monkeypatch: pytest.MonkeyPatch, stride: list[int],
                                                        dil: list[int], pad: list[int], mm: int, ih: int,
                                                        chunk: int) -> None:
    """The int8 depthwise einsum (raw inputs, padding holding input_zp, zero points folded into the bias) at the
    extremes: |x - izp| = 255 and weights -128 / 127, every output sum of one sign, against Python integers; the
    einsum path is the one taken.  ``chunk``: the merged rows in one chunk (the default: OW*C*M at once), in
    chunks of 2 columns (OW = 8: four chunks; OW = 7: seven of one column) and of one column (C*M above the
    chunk)."""
    rng = np.random.default_rng(sum(stride) * 10 + mm)
    c = 5
    x = np.where(rng.random((2, ih, 8, c)) < 0.8, -128, 127).astype(np.int8)
    w = np.where(rng.random((3, 3, c, mm)) < 0.5, -128, 127).astype(np.int8)
    w[:, :, 0] = -128  # channel 0: (x - 127) * (-128 - 3) all positive, the largest sums
    bias = rng.integers(-(1 << 20), 1 << 20, (c * mm,)).astype(np.int32)
    calls = _spy_depthwise_einsum(monkeypatch)
    monkeypatch.setattr(tensor_ops, "DW_BAND", 1)  # one output row per band: every band edge is exercised
    monkeypatch.setattr(tensor_ops, "DW_CHUNK", chunk)
    args = [In(x, D.INT8), Const(w, D.INT8), Const(bias, D.INT32), Const(np.array([127]), D.INT8),
            Const(np.array([3]), D.INT8)]
    (got,) = run_single("DEPTHWISE_CONV2D", args, D.INT32,
                        {"pad": pad, "stride": stride, "dilation": dil, "acc_type": "INT32"})
    assert calls and set(calls) == {"float32"}  # 255 * 9 * 131 + 2^20 + 127 * 9 * 131 < 2^24
    assert got.tolist() == _depthwise_reference(x, w, bias, 127, 3, pad, stride, dil).tolist()


def test_depthwise_einsum_float64_and_fallback_paths_are_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """i16 inputs (sums beyond 2^24: the float64 einsum) and a bias so large that only the data can show the i32
    REQUIREs hold (the tap-by-tap path with the checked add) both equal Python integers."""
    rng = np.random.default_rng(31)
    x16 = np.where(rng.random((1, 6, 6, 3)) < 0.5, -32768, 32767).astype(np.int16)
    w8 = np.where(rng.random((3, 3, 3, 1)) < 0.5, -128, 127).astype(np.int8)
    calls = _spy_depthwise_einsum(monkeypatch)
    pad, st, dl = [1, 1, 1, 1], [1, 1], [1, 1]
    zero48 = np.zeros(3, np.int64)
    (g16,) = run_single("DEPTHWISE_CONV2D", [In(x16, D.INT16), Const(w8, D.INT8), Const(zero48, D.INT48),
                                             Const(np.array([0]), D.INT16), Const(np.array([0]), D.INT8)],
                        D.INT48, {"pad": pad, "stride": st, "dilation": dl, "acc_type": "INT48"})
    assert calls and set(calls) == {"float64"}
    assert g16.tolist() == _depthwise_reference(x16, w8, zero48, 0, 0, pad, st, dl).tolist()
    calls.clear()
    x8 = rng.integers(-128, 128, (1, 5, 5, 3)).astype(np.int8)
    x8[0, :3, :, :2] = 0  # channels 0 and 1 stay within 128 * 6 * 128 of 0: their biases do not overflow
    big = np.array([(1 << 31) - 100000, -(1 << 31) + 100000, 5], np.int32)  # the bound (+-147456) passes i32
    (g8,) = run_single("DEPTHWISE_CONV2D", [In(x8, D.INT8), Const(w8, D.INT8), Const(big, D.INT32),
                                            Const(np.array([0]), D.INT8), Const(np.array([0]), D.INT8)],
                       D.INT32, {"pad": pad, "stride": st, "dilation": dl, "acc_type": "INT32"})
    assert calls == []
    assert g8.tolist() == _depthwise_reference(x8, w8, big, 0, 0, pad, st, dl).tolist()


@pytest.mark.parametrize(("stride", "mm", "chunk"), [([1, 1], 1, tensor_ops.DW_CHUNK), ([1, 1], 2, tensor_ops.DW_CHUNK),
                                                    ([2, 2], 1, tensor_ops.DW_CHUNK), ([1, 1], 1, 12),
                                                    ([1, 1], 2, 24), ([1, 1], 2, 1)])
def test_float_depthwise_einsum_within_fp32_rounding(monkeypatch: pytest.MonkeyPatch, stride: list[int], mm: int,
                                                     chunk: int) -> None:
    """The float einsum paths against float64 numpy written from the spec: each output is a sum of 9 fp32
    products, within 9 fp32 roundings of the exact sum (relative to the sum of |products|); the merged rows (OW = 9)
    at once and in chunks of 3 columns and of 1.  Every run gives the taps' sum in the same order whatever the
    chunk: the same bits as the tap-by-tap kernel (products rounded, then added in (ky, kx) order)."""
    monkeypatch.setattr(tensor_ops, "DW_CHUNK", chunk)
    rng = np.random.default_rng(stride[0] + mm)
    x = rng.standard_normal((1, 9, 9, 4)).astype(np.float32)
    w = rng.standard_normal((3, 3, 4, mm)).astype(np.float32)
    bias = rng.standard_normal(4 * mm).astype(np.float32)
    z = Const(np.array([0.0], np.float32))
    (got,) = run_single("DEPTHWISE_CONV2D", [In(x), Const(w), Const(bias), z, z], D.FP32,
                        {"pad": [1, 1, 1, 1], "stride": stride, "dilation": [1, 1], "acc_type": "FP32"})
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    oh, ow = got.shape[1], got.shape[2]
    want = np.zeros((1, oh, ow, 4, mm))
    mag = np.zeros_like(want)
    seq = np.zeros((1, oh, ow, 4, mm), np.float32)  # fp32: each product rounded, added in (ky, kx) order
    for ky in range(3):
        for kx in range(3):
            xs = xp[:, ky:ky + (oh - 1) * stride[0] + 1:stride[0], kx:kx + (ow - 1) * stride[1] + 1:stride[1]]
            prod = xs[..., None] * w[ky, kx].astype(np.float64)
            want += prod
            mag += np.abs(prod)
            seq += (xs[..., None].astype(np.float32) * w[ky, kx]).astype(np.float32)
    want = want.reshape(1, oh, ow, 4 * mm) + bias
    mag = mag.reshape(1, oh, ow, 4 * mm) + np.abs(bias)
    assert np.all(np.abs(got - want) <= 10 * 2.0 ** -24 * mag)
    assert got.tobytes() == (seq.reshape(1, oh, ow, 4 * mm) + bias).tobytes()


def test_float_clamp_signed_zeros_and_nan_follow_the_spec() -> None:
    """CLAMP (PROPAGATE) bit for bit against apply_max_s / apply_min_s transcribed (S11353-11374: ``a >= b ? a :
    b`` and ``a < b ? a : b``, NaN propagates), signed zeros included, for max_val zero or not."""
    import math

    def smax(a: float, b: float) -> float:
        return math.nan if math.isnan(a) or math.isnan(b) else (a if a >= b else b)

    def smin(a: float, b: float) -> float:
        return math.nan if math.isnan(a) or math.isnan(b) else (a if a < b else b)

    x = np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, 3.0, 7.0, -1.0, 6.0, -2.0], np.float32)
    for lo, hi in [(0.0, 6.0), (-0.0, 6.0), (0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (-1.0, -0.0), (-1.0, 0.0)]:
        (got,) = run_single("CLAMP", [In(x)], D.FP32,
                            {"min_val": np.float32(lo), "max_val": np.float32(hi), "nan_mode": "PROPAGATE"})
        want = np.array([smin(smax(float(v), lo), hi) for v in x], np.float32)
        assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist(), (lo, hi)


@pytest.mark.parametrize("dt", [D.INT8, D.FP32])
def test_depthwise_with_padding_beyond_the_memory_budget_still_runs(monkeypatch: pytest.MonkeyPatch, dt: D) -> None:
    """Padding whose padded copy would pass the tensor budget: the tap-by-tap path (which pads nothing) runs instead
    of the einsum, as before it existed (one real and one padded output column)."""
    monkeypatch.setattr(tensor_ops, "_depthwise_einsum", None)  # not to be called here
    big = 1 << 28
    np_t = np.int8 if dt is D.INT8 else np.float32
    x = np.array([[[[5, -3]]]], np_t)
    w = np.array([[[[2], [7]]]], np_t)
    bias = np.array([1, -1], np.int32 if dt is D.INT8 else np.float32)
    zero = Const(np.array([0], np_t), dt)
    (got,) = run_single("DEPTHWISE_CONV2D", [In(x, dt), Const(w, dt), Const(bias, D.INT32 if dt is D.INT8 else dt),
                                             zero, zero], D.INT32 if dt is D.INT8 else dt,
                        {"pad": [0, 0, 0, big], "stride": [1, big], "dilation": [1, 1],
                         "acc_type": "INT32" if dt is D.INT8 else "FP32"})
    assert got.shape == (1, 1, 2, 2)
    assert got.reshape(2, 2).tolist() == [[11, -22], [1, -1]]


def test_cached_rescale_parameters_keep_their_require_failures() -> None:
    """The multiplier/shift verdicts are made once per (multiplier, shift, rounding) but fail every call, and a
    scalar and a one-channel multiplier of the same value are distinct entries with the same results."""
    from tf2tosa.executor.registry import UnpredictableError

    v = np.array([[5], [-7]], np.int64)
    out = np.empty((2, 1), np.int64)
    for _ in range(2):
        with pytest.raises(UnpredictableError, match="multiplier >= 0"):
            nm.rescale_32_into(v, np.array([-3]), np.array([33]), True, 0, -128, 127, out)
        with pytest.raises(UnpredictableError, match="2 <= shift <= 62"):
            nm.rescale_32_into(v, np.array([1 << 30]), np.array([63]), True, 0, -128, 127, out)
    m, s = (1 << 30) + 12345, 33
    want = [[_scale_32_scalar(int(x), m, s, True)] for x in v[:, 0]]
    for mult, shift in [(np.int64(m), np.int64(s)), (np.array([m]), np.array([s]))]:
        nm.rescale_32_into(v, mult, shift, True, 0, -(1 << 31), (1 << 31) - 1, out)
        assert out.tolist() == want



@pytest.mark.parametrize("kind,k,ozp,double,out_t", [
    ("CONV2D", 1, -128, True, D.INT8), ("CONV2D", 1, 5, True, D.INT8), ("CONV2D", 3, 5, False, D.INT8),
    ("CONV2D", 3, -128, True, D.INT8), ("DEPTHWISE_CONV2D", 3, -128, True, D.INT8),
    ("DEPTHWISE_CONV2D", 3, 7, True, D.INT8), ("DEPTHWISE_CONV2D", 3, 7, False, D.INT8),
    ("CONV2D", 1, 0, False, D.INT16), ("CONV2D", 3, 0, True, D.INT16), ("DEPTHWISE_CONV2D", 3, 0, False, D.INT16)])
def test_prepared_conv_rescale_chain_on_adversarial_extremes(kind: str, k: int, ozp: int, double: bool,
                                                             out_t: D) -> None:
    """The third run of a CONV2D / DEPTHWISE_CONV2D → RESCALE pair takes the prepared chain (bound-proven, blocked,
    float64; the double-round sign term folded when output_zp is the output minimum; the narrowing's offset
    ``lo mod 2^bits`` for int8 and int16 results) and gives, like the first (checked) run, exactly CONV2D then
    RESCALE on Python integers - on inputs and weights at their extremes."""
    from tests.executor_testing import GraphBuilder
    from tf2tosa.executor.runner import _plan

    rng = np.random.default_rng(31 + k + abs(ozp))
    izp, wzp, c = -128, 0, 4
    x = np.where(rng.random((1, 33, 31, c)) < 0.5, rng.choice([-128, 127], (1, 33, 31, c)),
                 rng.integers(-128, 128, (1, 33, 31, c))).astype(np.int8)  # 1023 rows: tiled and ragged
    if kind == "CONV2D":
        w = rng.choice([-127, 127, 0, 1, -1], (6, k, k, c)).astype(np.int8)
        oc, attrs = 6, {"pad": [k // 2] * 4, "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT32"}
    else:
        w = rng.choice([-127, 127, 0, 1, -1], (k, k, c, 2)).astype(np.int8)
        oc, attrs = 2 * c, {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT32"}
    bias = rng.integers(-3000, 3000, (oc,)).astype(np.int32)
    b = GraphBuilder("chain")
    (acc,) = b.add(kind, [In(x, D.INT8), Const(w, D.INT8), Const(bias, D.INT32), Const(np.array([izp]), D.INT8),
                          Const(np.array([wzp]), D.INT8)], D.INT32, attrs, output=False)
    mult = np.concatenate([[1 << 30, (1 << 31) - 1, 0], rng.integers(1 << 30, 1 << 31, oc - 3)])
    shifts = rng.integers(36, 41, oc) if k == 3 else rng.integers(38, 44, oc)
    if out_t is D.INT16:  # 16-bit results: smaller shifts keep (output_zp - lo + d) * 2^s below 2^53
        shifts = rng.integers(30, 35, oc)
    lo, hi = out_t.range()
    b.add("RESCALE", [acc, Const(mult, D.INT32), Const(shifts, D.INT8), Const(np.array([0]), D.INT32),
                      Const(np.array([ozp]), out_t)], out_t,
          {"scale32": True, "rounding_mode": "DOUBLE_ROUND" if double else "SINGLE_ROUND", "per_channel": True,
           "input_unsigned": False, "output_unsigned": False})
    if kind == "CONV2D":
        ref_acc = _conv_reference(x, w, bias, izp, wzp, k // 2)
    else:
        ref_acc = _depthwise_reference(x, w, bias, izp, wzp, [1, 1, 1, 1], [1, 1], [1, 1])
    want = np.array([_rescale_scalar(int(ref_acc[idx]), int(mult[idx[-1]]), int(shifts[idx[-1]]), 0, ozp, lo, hi,
                                     double) for idx in np.ndindex(ref_acc.shape)]).reshape(ref_acc.shape)
    name = b.graph.outputs[0].name
    first = run(b.graph, b.feed)[name]
    first = run(b.graph, b.feed)[name]  # checked again, and the chain is prepared
    chain = [c for c in _plan(b.graph).chains.values()]
    assert len(chain) == 1 and chain[0][2] is not None  # proven: the next run takes it
    assert chain[0][2].dbits is (None if ozp == lo or not double else chain[0][2].dbits)
    # a 1x1 CONV2D with few input terms and no sign term: one float64 GEMM of scaled weights and a constant row
    assert (chain[0][2].w64 is not None) == (kind == "CONV2D" and k == 1 and (ozp == lo or not double))
    # ... and without a sign term the bias term joins the float64 constant (no pass adding it to the accumulator)
    assert chain[0][2].folded == (ozp == lo or not double)
    second = run(b.graph, b.feed)[name]
    assert first.dtype == second.dtype == out_t.np_dtype()
    assert np.array_equal(first, want) and np.array_equal(second, want)
    assert len(set(want.reshape(-1).tolist())) > 20  # not only saturated outputs


@pytest.mark.parametrize("kind,k,stride,width", [("CONV2D", 1, 1, 10), ("CONV2D", 3, 2, 10), ("CONV2D", 3, 2, 64),
                                                 ("CONV2D", 3, 1, 30), ("DEPTHWISE_CONV2D", 3, 1, 10),
                                                 ("DEPTHWISE_CONV2D", 3, 2, 10)])
def test_prepared_float_conv_clamp_chain(kind: str, k: int, stride: int, width: int) -> None:
    """A float32 convolution whose result only a CLAMP reads runs, from its third run on, as one blocked pass (GEMM
    or depthwise band, bias, clip; from 28 output columns on, one GEMM call per output row): both runs agree with a
    float64 numpy sum of the products, clipped, within the fp32 error of the sum, and bit for bit with each other; a
    CLAMP with max_val 0 keeps the two kernels (the signed-zero order)."""
    from tests.executor_testing import GraphBuilder
    from tf2tosa.executor.runner import _plan

    rng = np.random.default_rng(41 + k + stride)
    c, oc = 5, 7
    x = rng.standard_normal((1, 300, width, c)).astype(np.float32)  # 300 x OW rows: several GEMM blocks
    z = Const(np.array([0.0], np.float32))
    pad = [k // 2] * 4 if stride == 1 else [0, 1, 0, 1]
    attrs = {"pad": pad, "stride": [stride, stride], "dilation": [1, 1], "acc_type": "FP32"}
    if kind == "CONV2D":
        w = rng.standard_normal((oc, k, k, c)).astype(np.float32)
    else:
        w = rng.standard_normal((k, k, c, 2)).astype(np.float32)
        oc = 2 * c
    bias = rng.standard_normal(oc).astype(np.float32)
    b = GraphBuilder("float_chain")
    xin = In(x, name="x")
    for top in (np.float32(0.7), np.float32(0.0)):
        (acc,) = b.add(kind, [xin if top else b.graph.inputs[0], Const(w), Const(bias), z, z], D.FP32, attrs,
                       output=False)
        b.add("CLAMP", [acc], D.FP32, {"min_val": np.float32(-0.6), "max_val": top, "nan_mode": "PROPAGATE"})
    xp = np.pad(x.astype(np.float64), [(0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)])
    oh, ow = (xp.shape[1] - k) // stride + 1, (xp.shape[2] - k) // stride + 1
    win = np.stack([np.stack([xp[:, ky:ky + (oh - 1) * stride + 1:stride, kx:kx + (ow - 1) * stride + 1:stride]
                              for kx in range(k)], 3) for ky in range(k)], 3)  # [N, OH, OW, KH, KW, C]
    if kind == "CONV2D":
        ref = np.einsum("nhwijc,oijc->nhwo", win, w.astype(np.float64)) + bias
        mag = np.einsum("nhwijc,oijc->nhwo", np.abs(win), np.abs(w.astype(np.float64)))
    else:
        ref = np.einsum("nhwijc,ijcm->nhwcm", win, w.astype(np.float64)).reshape(1, oh, ow, oc) + bias
        mag = np.einsum("nhwijc,ijcm->nhwcm", np.abs(win), np.abs(w.astype(np.float64))).reshape(1, oh, ow, oc)
    tol = (mag + np.abs(bias)) * 2.0 ** -20
    names = [v.name for v in b.graph.outputs]
    runs = [run(b.graph, b.feed), run(b.graph, b.feed)]  # checked twice: prepared after the second
    prepared = [p[2] for p in _plan(b.graph).chains.values()]
    runs.append(run(b.graph, b.feed))
    assert len(prepared) == 2 and prepared[0] is not None and prepared[1] is None
    for out in runs:
        assert np.all(np.abs(out[names[0]] - np.clip(ref, -0.6, 0.7)) <= tol)
        assert np.all(np.abs(out[names[1]] - np.clip(ref, -0.6, 0.0)) <= tol)
    assert np.array_equal(runs[0][names[0]], runs[2][names[0]])
    assert (runs[2][names[0]] == np.float32(0.7)).any() and (runs[1][names[0]] == np.float32(-0.6)).any()


@pytest.mark.parametrize("out_t,in_u,out_u,double", [(D.INT32, False, False, False), (D.INT8, False, False, True),
                                                     (D.INT8, True, False, True), (D.INT8, False, True, False),
                                                     (D.INT16, False, False, True)])
def test_rescale_of_an_8_bit_input_by_table(out_t: D, in_u: bool, out_u: bool, double: bool) -> None:
    """A RESCALE of an 8-bit input by one multiplier is, from its third run on, a 256-entry table (made by the
    kernel on every code): both runs equal RESCALE on Python integers (S11743-11756 and the zero-point and unsigned
    rules of RESCALE) for every code."""
    from tests.executor_testing import GraphBuilder
    from tf2tosa.executor import runner
    from tf2tosa.executor.runner import _plan

    x = np.tile(np.arange(-128, 128, dtype=np.int8), 9).reshape(2, 3, 384)  # every code, several times
    mult, shift = 1_518_500_250, {D.INT32: 20, D.INT16: 25, D.INT8: 32}[out_t]
    izp, ozp = (-128 if in_u else 17), (0 if out_t is not D.INT8 else (-128 if out_u else -9))
    b = GraphBuilder("table")
    b.add("RESCALE", [In(x, D.INT8), Const(np.array([mult]), D.INT32), Const(np.array([shift]), D.INT8),
                      Const(np.array([izp]), D.INT8), Const(np.array([ozp]), out_t)], out_t,
          {"scale32": True, "rounding_mode": "DOUBLE_ROUND" if double else "SINGLE_ROUND", "per_channel": False,
           "input_unsigned": in_u, "output_unsigned": out_u})
    bits = {D.INT8: 8, D.INT16: 16, D.INT32: 32}[out_t]
    lo, hi = (0, (1 << bits) - 1) if out_u else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    izp_v, ozp_v = (izp & 0xFF if in_u else izp), (ozp & ((1 << bits) - 1) if out_u else ozp)
    want = []
    for code in x.reshape(-1).tolist():
        v = (code & 0xFF) if in_u else code
        r = _rescale_scalar(v, mult, shift, izp_v, ozp_v, lo, hi, double)
        want.append(r - (1 << bits) if out_u and r >= 1 << (bits - 1) else r)  # stored as the signed bit pattern
    name = b.graph.outputs[0].name
    first = run(b.graph, b.feed)[name]
    (entry,) = _plan(b.graph).chains.values()
    assert entry[2] is runner._PENDING  # a program run once makes no table
    assert run(b.graph, b.feed)[name].reshape(-1).tolist() == want  # checked again; the table is made
    (entry,) = _plan(b.graph).chains.values()
    assert entry[2] is not None and entry[2].shape == (256,)
    second = run(b.graph, b.feed)[name]
    assert first.reshape(-1).tolist() == want and second.reshape(-1).tolist() == want
    assert len(set(want)) > 60


def test_rescale_table_not_made_when_a_code_fails_a_require() -> None:
    """When some 8-bit code breaks apply_scale_32's value REQUIRE no table is made: data without that code runs,
    data with it is still UNPREDICTABLE, on every run."""
    from tests.executor_testing import GraphBuilder
    from tf2tosa.executor import run_checked
    from tf2tosa.executor.runner import _plan

    x = np.arange(-20, 20, dtype=np.int8).reshape(1, 40)
    b = GraphBuilder("table_require")
    b.add("RESCALE", [In(x, D.INT8, name="x"), Const(np.array([1 << 30]), D.INT32), Const(np.array([6]), D.INT8),
                      Const(np.array([0]), D.INT8), Const(np.array([0]), D.INT32)], D.INT32,
          {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False, "input_unsigned": False,
           "output_unsigned": False})  # |value| < 2^5 required
    for _ in range(2):
        assert run_checked(b.graph, b.feed, validate=False).ok
    assert [e[2] for e in _plan(b.graph).chains.values()] == [None]
    bad = {"x": np.full((1, 40), 40, np.int8)}
    for _ in range(2):
        res = run_checked(b.graph, bad, validate=False)
        assert res.status == "UNPREDICTABLE" and "apply_scale_32 value" in res.message


def test_conv_rescale_chain_checked_on_the_data_when_the_bound_does_not_prove_it() -> None:
    """Where the weight bound cannot prove RESCALE's value REQUIRE (a small shift), the prepared chain checks each
    block's extremes: small data takes the chain and equals the pseudo-code; data past the limit goes back through
    the kernels, which report the REQUIRE at the RESCALE - on every run."""
    from tests.executor_testing import GraphBuilder
    from tf2tosa.executor import run_checked
    from tf2tosa.executor.runner import _plan

    rng = np.random.default_rng(51)
    w = rng.integers(-127, 128, (6, 1, 1, 8)).astype(np.int8)
    bias = rng.integers(-50, 50, 6).astype(np.int32)
    small = rng.integers(-3, 4, (1, 40, 40, 8)).astype(np.int8)  # |acc| <= 3 * 8 * 127 + 50 < 2^12
    b = GraphBuilder("chain_checked")
    (acc,) = b.add("CONV2D", [In(small, D.INT8, name="x"), Const(w, D.INT8), Const(bias, D.INT32),
                              Const(np.array([0]), D.INT8), Const(np.array([0]), D.INT8)], D.INT32,
                   {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT32"}, output=False)
    mult = rng.integers(1 << 30, 1 << 31, 6)
    b.add("RESCALE", [acc, Const(mult, D.INT32), Const(np.full(6, 13), D.INT8), Const(np.array([0]), D.INT32),
                      Const(np.array([3]), D.INT8)], D.INT8,
          {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": True, "input_unsigned": False,
           "output_unsigned": False})  # |v| < 2^12 required; the bound allows 128 * 8 * 127 + 50
    ref = _conv_reference(small, w, bias, 0, 0, 0)
    want = np.array([_rescale_scalar(int(ref[i]), int(mult[i[-1]]), 13, 0, 3, -128, 127, False)
                     for i in np.ndindex(ref.shape)]).reshape(ref.shape)
    for _ in range(2):
        res = run_checked(b.graph, b.feed, validate=False)
        assert res.ok and np.array_equal(res.outputs[b.graph.outputs[0].name], want)
    (entry,) = _plan(b.graph).chains.values()
    assert entry[2] is not None and entry[2].vlimit == (1 << 12) - 1
    big = {"x": np.full((1, 40, 40, 8), 100, np.int8)}
    for _ in range(2):
        res = run_checked(b.graph, big, validate=False)
        assert res.status == "UNPREDICTABLE" and "apply_scale_32 value" in res.message and "RESCALE" in str(res.op)


def _add_group(m: list[int], s: list[int], zps: list[int], op: str = "ADD", small: bool = False) -> Any:
    """RESCALE(a), RESCALE(b) (i8 -> i32), ADD/SUB, RESCALE (i32 -> i8) on every pair of int8 codes (or on small
    ones), as TFLite's int8 ADD lowers."""
    from tests.executor_testing import GraphBuilder

    codes = np.arange(-128, 128, dtype=np.int8)
    xa, xb = np.repeat(codes, 256).reshape(1, 256, 256), np.tile(codes, 256).reshape(1, 256, 256)
    if small:
        xa, xb = xa // 64, xb // 64
    b = GraphBuilder("add_group")
    attrs = {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False, "input_unsigned": False,
             "output_unsigned": False}
    (ra,) = b.add("RESCALE", [In(xa, D.INT8, name="a"), Const(np.array([m[0]]), D.INT32),
                              Const(np.array([s[0]]), D.INT8), Const(np.array([zps[0]]), D.INT8),
                              Const(np.array([0]), D.INT32)], D.INT32, attrs, output=False)
    (rb,) = b.add("RESCALE", [In(xb, D.INT8, name="b"), Const(np.array([m[1]]), D.INT32),
                              Const(np.array([s[1]]), D.INT8), Const(np.array([zps[1]]), D.INT8),
                              Const(np.array([0]), D.INT32)], D.INT32, attrs, output=False)
    (acc,) = b.add(op, [ra, rb], D.INT32, output=False)
    b.add("RESCALE", [acc, Const(np.array([m[2]]), D.INT32), Const(np.array([s[2]]), D.INT8),
                      Const(np.array([0]), D.INT32), Const(np.array([zps[2]]), D.INT8)], D.INT8,
          dict(attrs, rounding_mode="DOUBLE_ROUND"))
    return b


@pytest.mark.parametrize("op", ["ADD", "SUB"])
def test_int8_add_group_by_pair_table(op: str) -> None:
    """RESCALE, RESCALE, ADD/SUB, RESCALE on two int8 tensors is, from its third run on, a 65536-entry table made
    by the kernels on every pair of codes: both runs equal the four ops on Python integers for every pair."""
    from tf2tosa.executor.runner import _plan

    m, s, zps = [1_431_655_765, 2_004_318_071, 1_717_986_918], [11, 12, 51], [-5, 9, -3]
    b = _add_group(m, s, zps, op)
    lo, hi = -(1 << 31), (1 << 31) - 1
    want = []
    for a in range(-128, 128):
        va = _rescale_scalar(a, m[0], s[0], zps[0], 0, lo, hi, False)
        for c in range(-128, 128):
            vb = _rescale_scalar(c, m[1], s[1], zps[1], 0, lo, hi, False)
            want.append(_rescale_scalar(va + vb if op == "ADD" else va - vb, m[2], s[2], 0, zps[2], -128, 127, True))
    name = b.graph.outputs[0].name
    first = run(b.graph, b.feed)[name]
    assert run(b.graph, b.feed)[name].reshape(-1).tolist() == want  # checked again; the table is made
    (group,) = _plan(b.graph).groups.values()
    assert [g.opcode for g in group] == ["RESCALE", "RESCALE", op, "RESCALE"]
    assert [e[2] is not None for e in _plan(b.graph).chains.values()] == [True]
    second = run(b.graph, b.feed)[name]
    assert first.reshape(-1).tolist() == want and second.reshape(-1).tolist() == want
    assert len(set(want)) > 150


def test_int8_add_group_without_table_when_a_pair_fails_a_require() -> None:
    """When some pair of codes breaks the last RESCALE's value REQUIRE no pair table is made: data without such a
    pair runs, data with one is UNPREDICTABLE at that RESCALE, on every run."""
    from tf2tosa.executor import run_checked
    from tf2tosa.executor.runner import _plan

    b = _add_group([(1 << 31) - 1, (1 << 31) - 1, 1 << 30], [8, 8, 26], [0, 0, 0], small=True)  # |a + b| < 2^25
    ok = {"a": np.zeros((1, 256, 256), np.int8), "b": np.ones((1, 256, 256), np.int8)}
    for _ in range(2):
        assert run_checked(b.graph, ok, validate=False).ok
    assert [e[2] for e in _plan(b.graph).chains.values()] == [None]
    bad = {"a": np.full((1, 256, 256), 127, np.int8), "b": np.full((1, 256, 256), 127, np.int8)}
    for _ in range(2):
        res = run_checked(b.graph, bad, validate=False)
        assert res.status == "UNPREDICTABLE" and "apply_scale_32 value" in res.message and "RESCALE" in str(res.op)


@pytest.mark.parametrize("kind", ["CONV2D", "DEPTHWISE_CONV2D"])
def test_prepared_float_convolution_alone(kind: str) -> None:
    """A float32 convolution fused with nothing is prepared too (GEMM blocks or depthwise bands with the bias add):
    the first (checked) and third (prepared) runs give the same bits, within fp32 error of a float64 numpy sum."""
    from tests.executor_testing import GraphBuilder
    from tf2tosa.executor.runner import _plan

    rng = np.random.default_rng(61)
    x = rng.standard_normal((1, 300, 10, 4)).astype(np.float32)
    z = Const(np.array([0.0], np.float32))
    w = rng.standard_normal((6, 1, 1, 4) if kind == "CONV2D" else (3, 3, 4, 1)).astype(np.float32)
    bias = rng.standard_normal(6 if kind == "CONV2D" else 4).astype(np.float32)
    pad = [0, 0, 0, 0] if kind == "CONV2D" else [1, 1, 1, 1]
    b = GraphBuilder("float_solo")
    b.add(kind, [In(x, name="x"), Const(w), Const(bias), z, z], D.FP32,
          {"pad": pad, "stride": [1, 1], "dilation": [1, 1], "acc_type": "FP32"})
    if kind == "CONV2D":
        ref = np.einsum("nhwc,oc->nhwo", x.astype(np.float64), w[:, 0, 0].astype(np.float64)) + bias
    else:
        xp = np.pad(x.astype(np.float64), [(0, 0), (1, 1), (1, 1), (0, 0)])
        ref = sum(xp[:, i:i + 300, j:j + 10] * w[i, j, :, 0] for i in range(3) for j in range(3)) + bias
    name = b.graph.outputs[0].name
    runs = [run(b.graph, b.feed)[name] for _ in range(3)]
    (entry,) = _plan(b.graph).chains.values()
    assert entry[2] is not None and entry[2].lo is None
    assert np.array_equal(runs[0], runs[2]) and np.allclose(runs[2], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stride,pad,width", [(1, [1, 1, 1, 1], 30), (2, [0, 1, 0, 1], 30), (1, [2, 0, 0, 2], 30),
                                              (1, [1, 1, 1, 1], 20), (2, [0, 1, 0, 1], 22)])
def test_float_conv_writes_into_the_next_depthwise_padding(monkeypatch: pytest.MonkeyPatch, stride: int,
                                                           pad: list[int], width: int) -> None:
    """A prepared float CONV2D + CLAMP whose result only a float depthwise reads writes it inside that depthwise's zero
    padding and the depthwise reads its bands from there: from 28 columns on, one GEMM call per output row writes
    straight into the bordered array (the kernel's first run makes the same calls); narrower, GEMM blocks of whole
    rows are copied in.  The same bits as the checked first run, which pads a copy, and the float64 numpy result
    within fp32 error."""
    from tests.executor_testing import GraphBuilder
    from tf2tosa.executor.runner import _plan

    targets: list[bool] = []
    orig = tensor_ops.gemm_rows

    def spy(*a: Any, **kw: Any) -> np.ndarray:
        targets.append(kw.get("out") is not None)
        return orig(*a, **kw)

    monkeypatch.setattr(tensor_ops, "gemm_rows", spy)
    rng = np.random.default_rng(71 + stride + pad[0])
    x = rng.standard_normal((1, 40, width, 3)).astype(np.float32)
    z = Const(np.array([0.0], np.float32))
    w1 = rng.standard_normal((8, 1, 1, 3)).astype(np.float32)
    w2 = rng.standard_normal((3, 3, 8, 1)).astype(np.float32)
    b1, b2 = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    clamp = {"min_val": np.float32(0.0), "max_val": np.float32(6.0), "nan_mode": "PROPAGATE"}
    b = GraphBuilder("bordered")
    (c1,) = b.add("CONV2D", [In(x, name="x"), Const(w1), Const(b1), z, z], D.FP32,
                  {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "FP32"}, output=False)
    (r1,) = b.add("CLAMP", [c1], D.FP32, clamp, output=False)
    (c2,) = b.add("DEPTHWISE_CONV2D", [r1, Const(w2), Const(b2), z, z], D.FP32,
                  {"pad": pad, "stride": [stride, stride], "dilation": [1, 1], "acc_type": "FP32"}, output=False)
    b.add("CLAMP", [c2], D.FP32, clamp)
    y = np.clip(np.einsum("nhwc,oc->nhwo", x.astype(np.float64), w1[:, 0, 0].astype(np.float64)) + b1, 0, 6)
    yp = np.pad(y, [(0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)])
    oh, ow = (yp.shape[1] - 3) // stride + 1, (yp.shape[2] - 3) // stride + 1
    ref = sum(yp[:, i:i + (oh - 1) * stride + 1:stride, j:j + (ow - 1) * stride + 1:stride] * w2[i, j, :, 0]
              for i in range(3) for j in range(3))
    ref = np.clip(ref + b2, 0, 6)
    name = b.graph.outputs[0].name
    runs = [run(b.graph, b.feed)[name] for _ in range(3)]
    assert list(_plan(b.graph).pad_out.values()) == [tuple(pad)]
    assert np.array_equal(runs[0], runs[2]) and np.allclose(runs[2], ref, rtol=1e-5, atol=1e-4)
    assert targets[-1] == (width >= tensor_ops.GEMM_ROW_CALLS)  # the prepared run wrote into the border directly


@pytest.mark.parametrize("conv_first", [True, False])
def test_float_conv_and_residual_add_run_as_one(conv_first: bool) -> None:
    """A float32 CONV2D whose result only the next ADD reads (a residual connection) is, once prepared, one pass: the
    bias and then the other operand added to each GEMM block (the ADD's np.add in its operand order).  The checked
    first run and the prepared third run give the same bits, within fp32 error of a float64 numpy sum (inf and NaN
    in the other operand where the float64 sum has them)."""
    from tests.executor_testing import GraphBuilder
    from tf2tosa.executor.runner import _plan

    rng = np.random.default_rng(67)
    x = rng.standard_normal((1, 300, 10, 4)).astype(np.float32)
    r = rng.standard_normal((1, 300, 10, 6)).astype(np.float32)
    r[0, 5, 3, 2], r[0, 250, 9, 0] = np.inf, np.nan
    z = Const(np.array([0.0], np.float32))
    w = rng.standard_normal((6, 1, 1, 4)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    b = GraphBuilder("residual")
    (conv,) = b.add("CONV2D", [In(x, name="x"), Const(w), Const(bias), z, z], D.FP32,
                    {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "FP32"}, output=False)
    other = In(r, name="r")
    b.add("ADD", [conv, other] if conv_first else [other, conv], D.FP32)
    ref = np.einsum("nhwc,oc->nhwo", x.astype(np.float64), w[:, 0, 0].astype(np.float64)) + bias + r
    name = b.graph.outputs[0].name
    runs = [run(b.graph, b.feed)[name] for _ in range(3)]
    plan = _plan(b.graph)
    assert [p.opcode for p in plan.fused.values()] == ["ADD"]
    (entry,) = plan.chains.values()
    assert entry[2] is not None  # prepared: the third run took the blocked pass
    assert runs[0].tobytes() == runs[2].tobytes()
    assert np.allclose(runs[2], ref, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert np.isinf(runs[2][0, 5, 3, 2]) and np.isnan(runs[2][0, 250, 9, 0])


def test_gemm_chunks_keep_float32_partial_sums_exact() -> None:
    """A weight whose sums need float64 as a whole is cut into column ranges whose every partial sum stays below
    2^24 (checked here on int64); float32 GEMMs over them summed in float64 equal the int64 product exactly, on
    inputs that reach the bound, where one float32 GEMM over all of K rounds."""
    from types import SimpleNamespace

    from tf2tosa.executor.chains import ConvRescale

    rng = np.random.default_rng(41)
    k, oc = 3001, 5
    w = rng.choice([-128, 127, -127, 126, 1], (oc, k)).astype(np.int8)
    w[0] = 127  # channel 0: every term of one sign, the largest sums
    w[1] = -127
    x = rng.choice([-128, 127, 125, -3], (300, k)).astype(np.int8)
    x[0] = 127
    x[1] = -128
    prep = tensor_ops._GemmWeights(w, 0)
    chunks = prep.f32_chunks(128)
    assert chunks is not None and len(chunks) >= 3
    assert chunks[0][0] == 0 and chunks[-1][1] == k and all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
    wabs = np.abs(w.astype(np.int64))
    assert all(128 * int(wabs[:, k0:k1].sum(axis=1).max()) < 1 << 24 for k0, k1 in chunks)
    exact = x.astype(np.int64) @ w.T.astype(np.int64)
    assert int(np.abs(exact).max()) > 1 << 25
    x32, w32 = x.astype(np.float32), prep.matrix(np.float32)
    assert not np.array_equal(np.matmul(x32, w32).astype(np.int64), exact)  # one float32 GEMM rounds here
    got = np.empty((300, oc), np.float64)
    ConvRescale._gemm(SimpleNamespace(chunks=chunks, wm=w32), x32, got,  # type: ignore[arg-type]
                      np.empty((300, oc), np.float32))
    assert np.array_equal(got.astype(np.int64), exact)
    assert tensor_ops._GemmWeights(w[:, :900], 0).f32_chunks(128) is None  # fits float32 whole: no cut


@pytest.mark.parametrize("k,c", [(1, 3000), (3, 300)])
def test_prepared_conv_chain_sums_float32_chunks_into_float64(k: int, c: int) -> None:
    """A CONV2D → RESCALE chain whose accumulator bound needs float64 runs float32 GEMMs over chunks of K (the 1x1
    path converting its input a block at a time, the 3x3 path through its windows): every run equals CONV2D then
    RESCALE on Python integers."""
    from tests.executor_testing import GraphBuilder
    from tf2tosa.executor.runner import _plan

    rng = np.random.default_rng(7 + k)
    izp, oc = -128, 3
    x = rng.choice([-128, 127, 100, -50], (1, 4, 5, c)).astype(np.int8)
    x[0, 1, 2] = 127
    w = rng.choice([-127, 127, 90, -1], (oc, k, k, c)).astype(np.int8)
    w[0] = 127
    bias = rng.integers(-3000, 3000, (oc,)).astype(np.int32)
    attrs = {"pad": [k // 2] * 4, "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT32"}
    b = GraphBuilder("chunks")
    (acc,) = b.add("CONV2D", [In(x, D.INT8), Const(w, D.INT8), Const(bias, D.INT32), Const(np.array([izp]), D.INT8),
                              Const(np.array([0]), D.INT8)], D.INT32, attrs, output=False)
    # |v| < 2^27 scaled by about 2^-20 (shifts up to 44 keep the float64 rescale exact): int8 results in range
    mult, shifts = np.array([1 << 24, (1 << 25) + 12345, 3 * (1 << 23) + 777]), np.array([44, 44, 43])
    b.add("RESCALE", [acc, Const(mult, D.INT32), Const(shifts, D.INT8), Const(np.array([0]), D.INT32),
                      Const(np.array([-3]), D.INT8)], D.INT8,
          {"scale32": True, "rounding_mode": "DOUBLE_ROUND", "per_channel": True, "input_unsigned": False,
           "output_unsigned": False})
    ref = _conv_reference(x, w, bias, izp, 0, k // 2)
    want = np.array([_rescale_scalar(int(ref[i]), int(mult[i[-1]]), int(shifts[i[-1]]), 0, -3, -128, 127, True)
                     for i in np.ndindex(ref.shape)]).reshape(ref.shape)
    name = b.graph.outputs[0].name
    runs = [run(b.graph, b.feed)[name] for _ in range(3)]
    (entry,) = _plan(b.graph).chains.values()
    assert entry[2] is not None and entry[2].ft is np.float64 and entry[2].chunks and len(entry[2].chunks) >= 2
    # the kernel's runs and the chain's use the float32 matrix: no float64 copy of the weight is made
    preps = [p for _, p in tensor_ops._PREPARED.values()
             if type(p) is tensor_ops._GemmWeights and p._w2.shape == (oc, k * k * c)]
    assert preps and entry[2].wm.dtype == np.float32 and all(np.float64 not in p._mats for p in preps)
    assert int(np.abs(ref).max()) > 1 << 24 and len(set(want.reshape(-1).tolist())) > 10
    for r in runs:
        assert np.array_equal(r, want)


def _avg_pool_reference(x: np.ndarray, k: list[int], st: list[int], pad: list[int], izp: int, ozp: int
                        ) -> np.ndarray:
    """spec AVG_POOL2D on Python numbers, one output at a time: integers through reciprocal_scale and
    apply_scale_32 (single round), floats summed in float32 from +0 in (ky, kx) order, then divided."""
    n, ih, iw, c = x.shape
    pt, pb, pl, pr = pad
    oh, ow = (ih + pt + pb - k[0]) // st[0] + 1, (iw + pl + pr - k[1]) // st[1] + 1
    is_float = x.dtype.kind == "f"
    out = np.zeros((n, oh, ow, c), x.dtype if is_float else np.int64)
    for b, oy, ox, ch in np.ndindex(n, oh, ow, c):
        acc: Any = np.float32(0.0) if is_float else 0
        count = 0
        for ky in range(k[0]):
            for kx in range(k[1]):
                yy, xx = oy * st[0] + ky - pt, ox * st[1] + kx - pl
                if 0 <= yy < ih and 0 <= xx < iw:
                    acc = np.float32(acc + x[b, yy, xx, ch]) if is_float else acc + int(x[b, yy, xx, ch]) - izp
                    count += 1
        if is_float:
            out[b, oy, ox, ch] = np.float32(acc / np.float32(count))
            continue
        shift_k = (count - 1).bit_length()
        mult, shift = (((1 << 30) + 1) << shift_k) // count, 30 + shift_k
        out[b, oy, ox, ch] = min(max(((acc * mult + (1 << (shift - 1))) >> shift) + ozp, -128), 127)
    return out


@pytest.mark.parametrize(("k", "st", "pad"), [([3, 3], [1, 1], [1, 1, 1, 1]), ([2, 3], [2, 1], [0, 1, 1, 2]),
                                              ([3, 3], [2, 2], [1, 1, 1, 1]), ([1, 1], [1, 1], [0, 0, 0, 0])])
def test_avg_pool_tap_sums_follow_the_pseudo_code(k: list[int], st: list[int], pad: list[int]) -> None:
    """AVG_POOL2D (a strided add per tap, row sums first for integers) against the pseudo-code: int8 with zero
    points at the extremes bit for bit, float32 bit for bit (the spec's summation order, from +0, so a window of
    -0.0 gives +0.0), borders with fewer real taps included."""
    rng = np.random.default_rng(sum(k) + sum(st) + sum(pad))
    x8 = rng.choice([-128, 127, 0, 5, -77], (2, 7, 9, 3)).astype(np.int8)
    attrs = {"kernel": k, "stride": st, "pad": pad, "acc_type": "INT32"}
    (g8,) = run_single("AVG_POOL2D", [In(x8, D.INT8), Const(np.array([-128]), D.INT8), Const(np.array([9]), D.INT8)],
                       D.INT8, attrs)
    assert g8.tolist() == _avg_pool_reference(x8, k, st, pad, -128, 9).tolist()
    xf = rng.standard_normal((2, 7, 9, 3)).astype(np.float32) * np.float32(1e3)
    xf[0, :3, :4] = -0.0  # windows of negative zeros only
    xf[1, 2, 2, 1] = np.float32(3e-8)
    z = Const(np.array([0.0], np.float32))
    (gf,) = run_single("AVG_POOL2D", [In(xf), z, z], D.FP32, dict(attrs, acc_type="FP32"))
    want = _avg_pool_reference(xf, k, st, pad, 0, 0)
    assert gf.tobytes() == want.tobytes()
