"""Integer kernels: bit-exact vs brute-force Python transcriptions of the spec pseudo-code and TF float64."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.executor_testing import Const, In, Shape, run_single
from tf2tosa.executor import ExecutionError
from tf2tosa.ir.types import DType as D

RNG = np.random.default_rng(99)


def ri(lo: int, hi: int, shape: tuple[int, ...], dt: type = np.int8) -> np.ndarray:
    return RNG.integers(lo, hi + 1, shape).astype(dt)


def i8(v: int) -> np.ndarray:
    return np.array([v], np.int8)


def brute_conv2d(x, w, b, izp, wzp, pad, stride, dil):  # type: ignore[no-untyped-def]
    n_, ih, iw, ic = x.shape
    oc, kh, kw, _ = w.shape
    pt, pb, pl, pr = pad
    oh = (ih - 1 + pt + pb - (kh - 1) * dil[0]) // stride[0] + 1
    ow = (iw - 1 + pl + pr - (kw - 1) * dil[1]) // stride[1] + 1
    out = np.zeros((n_, oh, ow, oc), np.int64)
    for n, oy, ox, o in itertools.product(range(n_), range(oh), range(ow), range(oc)):
        acc = 0
        for ky, kx, c in itertools.product(range(kh), range(kw), range(ic)):
            y, xx = oy * stride[0] - pt + ky * dil[0], ox * stride[1] - pl + kx * dil[1]
            if 0 <= y < ih and 0 <= xx < iw:
                acc += (int(x[n, y, xx, c]) - izp) * (int(w[o, ky, kx, c]) - wzp)
        out[n, oy, ox, o] = acc + int(b[0 if b.size == 1 else o])
    return out


@pytest.mark.parametrize("stride,dil,pad", [((1, 1), (1, 1), (1, 1, 1, 1)), ((2, 2), (1, 1), (0, 0, 0, 0)),
                                            ((1, 2), (2, 1), (2, 2, 0, 0))])
def test_conv2d_int8_zero_points(stride, dil, pad) -> None:  # type: ignore[no-untyped-def]
    x, w = ri(-128, 127, (2, 7, 7, 3)), ri(-127, 127, (4, 3, 3, 3))
    b = ri(-5000, 5000, (4,), np.int32)
    izp, wzp = -17, 5
    ref = brute_conv2d(x, w, b, izp, wzp, pad, stride, dil)
    (got,) = run_single("CONV2D", [In(x), In(w), b, i8(izp), i8(wzp)], D.INT32,
                        {"pad": list(pad), "stride": list(stride), "dilation": list(dil), "acc_type": "INT32"})
    assert got.dtype == np.int32 and np.array_equal(got, ref)


def test_conv2d_i16_i8_to_i48_and_large_accumulators() -> None:
    x = ri(-32768, 32767, (1, 5, 5, 64), np.int16)
    w = ri(-128, 127, (3, 3, 3, 64))
    b = np.array([2**40, -(2**40), 7], np.int64)
    ref = brute_conv2d(x, w, b, 0, 0, (1, 1, 1, 1), (1, 1), (1, 1))
    (got,) = run_single("CONV2D", [In(x), In(w), Const(b, D.INT48), np.zeros(1, np.int16), i8(0)], D.INT48,
                        {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT48"})
    assert got.dtype == np.int64 and np.array_equal(got, ref)


def test_depthwise_and_transpose_conv_int8_vs_tf_float64() -> None:
    tf = pytest.importorskip("tensorflow")
    x, izp = ri(-128, 127, (1, 9, 9, 4)), 11
    w, wzp = ri(-127, 127, (3, 3, 4, 2)), -3
    b = ri(-1000, 1000, (8,), np.int32)
    xf = x.astype(np.float64) - izp
    wf = w.astype(np.float64) - wzp
    ref = tf.nn.depthwise_conv2d(xf, wf, [1, 2, 2, 1], "VALID").numpy() + b
    (got,) = run_single("DEPTHWISE_CONV2D", [In(x), In(w), b, i8(izp), i8(wzp)], D.INT32,
                        {"pad": [0, 0, 0, 0], "stride": [2, 2], "dilation": [1, 1], "acc_type": "INT32"})
    assert np.array_equal(got, ref.astype(np.int64))
    # transpose conv: TF filter [KH,KW,OC,IC]
    x = ri(-128, 127, (1, 4, 4, 3))
    f = ri(-127, 127, (3, 3, 5, 3))
    ref = tf.nn.conv2d_transpose(x.astype(np.float64) - izp, f.astype(np.float64) - wzp, [1, 8, 8, 5],
                                 [1, 2, 2, 1], "SAME").numpy()
    b = np.zeros(5, np.int32)
    (got,) = run_single("TRANSPOSE_CONV2D", [In(x), In(f.transpose(2, 0, 1, 3)), b, i8(izp), i8(wzp)], D.INT32,
                        {"out_pad": [0, -1, 0, -1], "stride": [2, 2], "acc_type": "INT32"})
    assert np.array_equal(got, ref.astype(np.int64))


def test_matmul_int8_zp() -> None:
    a, b = ri(-128, 127, (2, 3, 17)), ri(-128, 127, (2, 17, 4))
    (got,) = run_single("MATMUL", [In(a), In(b), i8(3), i8(-2)], D.INT32)
    ref = np.matmul(a.astype(np.int64) - 3, b.astype(np.int64) + 2)
    assert np.array_equal(got, ref)


def brute_avg_pool(x, k, s, pad, izp, ozp):  # type: ignore[no-untyped-def]
    n_, ih, iw, c = x.shape
    pt, pb, pl, pr = pad
    oh = (ih + pt + pb - k[0]) // s[0] + 1
    ow = (iw + pl + pr - k[1]) // s[1] + 1
    out = np.zeros((n_, oh, ow, c), np.int64)
    for n, oy, ox, ch in itertools.product(range(n_), range(oh), range(ow), range(c)):
        acc, count = 0, 0
        for ky, kx in itertools.product(range(k[0]), range(k[1])):
            y, xx = oy * s[0] - pt + ky, ox * s[1] - pl + kx
            if 0 <= y < ih and 0 <= xx < iw:
                count += 1
                acc += int(x[n, y, xx, ch]) - izp
        kk = (count - 1).bit_length()
        mult, shift = (((1 << 30) + 1) << kk) // count, 30 + kk
        v = (acc * mult + (1 << (shift - 1))) >> shift
        out[n, oy, ox, ch] = min(max(v + ozp, -128), 127)
    return out


@pytest.mark.parametrize("k,s,pad", [((3, 3), (1, 1), (1, 1, 1, 1)), ((2, 2), (2, 2), (0, 1, 0, 0)),
                                     ((3, 2), (2, 1), (1, 1, 0, 1))])
def test_avg_pool_int8(k, s, pad) -> None:  # type: ignore[no-untyped-def]
    x = ri(-128, 127, (2, 7, 6, 3))
    izp, ozp = -9, 4
    ref = brute_avg_pool(x, k, s, pad, izp, ozp)
    (got,) = run_single("AVG_POOL2D", [In(x), i8(izp), i8(ozp)], D.INT8,
                        {"kernel": list(k), "stride": list(s), "pad": list(pad), "acc_type": "INT32"})
    assert got.dtype == np.int8 and np.array_equal(got, ref)


def py_rescale(v, m, s, izp, ozp, scale32, dr, in_bits, out_bits, in_u, out_u):  # type: ignore[no-untyped-def]
    if in_u:
        v &= (1 << in_bits) - 1
        izp &= (1 << in_bits) - 1
    if out_u:
        ozp &= (1 << out_bits) - 1
    val = v - izp
    rnd = 1 << (s - 1)
    if scale32 and dr and s > 31:
        rnd += (1 << 30) if val >= 0 else -(1 << 30)
    r = (val * m + rnd) >> s
    if scale32:
        r = (r + 2**31) % 2**32 - 2**31
    r += ozp
    if out_u:
        r = min(max(r, 0), (1 << out_bits) - 1)
        return (r + (1 << (out_bits - 1))) % (1 << out_bits) - (1 << (out_bits - 1))
    lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    return min(max(r, lo), hi)


RESCALE_CASES = [
    (D.INT8, D.INT8, True, "SINGLE_ROUND", False, False, False),
    (D.INT8, D.INT8, True, "DOUBLE_ROUND", False, False, False),
    (D.INT32, D.INT8, True, "DOUBLE_ROUND", True, False, False),
    (D.INT32, D.INT16, True, "SINGLE_ROUND", True, False, False),
    (D.INT8, D.INT32, True, "SINGLE_ROUND", False, False, False),
    (D.INT8, D.INT8, True, "SINGLE_ROUND", False, True, False),
    (D.INT8, D.INT8, True, "SINGLE_ROUND", False, False, True),
    (D.INT16, D.INT8, True, "SINGLE_ROUND", False, True, False),
    (D.INT48, D.INT16, False, "SINGLE_ROUND", True, False, False),
    (D.INT16, D.INT16, False, "SINGLE_ROUND", False, False, True),
]


@pytest.mark.parametrize("it,ot,scale32,rmode,per_channel,in_u,out_u", RESCALE_CASES)
def test_rescale_vs_python(it, ot, scale32, rmode, per_channel, in_u, out_u) -> None:  # type: ignore[no-untyped-def]
    shape = (3, 5, 4)
    lo, hi = it.range()
    if it is D.INT48:
        lo, hi = -(2**40), 2**40
    if it is D.INT32:
        lo, hi = -(2**24), 2**24
    x = RNG.integers(lo, hi + 1, shape).astype(it.np_dtype())
    nc = shape[-1] if per_channel else 1
    if scale32:
        mult = RNG.integers(1 << 30, 1 << 31, nc).astype(np.int32)
        shift = RNG.integers(30, 40, nc).astype(np.int8)
    else:
        mult = RNG.integers(1 << 14, 1 << 15, nc).astype(np.int16)
        shift = RNG.integers(14 + 10 * (it is D.INT48), 30 + 10 * (it is D.INT48), nc).astype(np.int8)
    izp = 0
    if it is D.INT8:
        izp = int(RNG.integers(-128, 128))
    if it is D.INT16 and in_u:
        izp = -32768  # 32768 as an int16 bit pattern
    ozp = int(RNG.integers(-128, 128)) if ot is D.INT8 else (-32768 if (ot is D.INT16 and out_u) else 0)
    args = [In(x, it), Const(mult), Const(shift), Const(np.array([izp]), it), Const(np.array([ozp]), ot)]
    attrs = {"scale32": scale32, "rounding_mode": rmode, "per_channel": per_channel,
             "input_unsigned": in_u, "output_unsigned": out_u}
    (got,) = run_single("RESCALE", args, ot, attrs)
    flat = x.reshape(-1, shape[-1]).astype(np.int64)
    ref = np.array([[py_rescale(int(v), int(mult[c if per_channel else 0]), int(shift[c if per_channel else 0]),
                                izp, ozp, scale32, rmode == "DOUBLE_ROUND", it.bits, ot.bits, in_u, out_u)
                     for c, v in enumerate(row)] for row in flat]).reshape(shape)
    assert got.dtype == ot.np_dtype() and np.array_equal(got.astype(np.int64), ref)


def test_rescale_error_ifs() -> None:
    x = ri(-100, 100, (4,), np.int32)
    base = [In(x), Const(np.array([1 << 30], np.int32)), Const(np.array([30], np.int8))]
    with pytest.raises(ExecutionError, match="input_zp"):
        run_single("RESCALE", base + [Const(np.array([3], np.int32)), i8(0)], D.INT8, {"scale32": True})
    with pytest.raises(ExecutionError, match="DOUBLE_ROUND"):
        run_single("RESCALE", base + [Const(np.array([0], np.int32)), i8(0)], D.INT8,
                   {"scale32": False, "rounding_mode": "DOUBLE_ROUND"})
    (ok,) = run_single("RESCALE", base + [Const(np.array([0], np.int32)), i8(0)], D.INT8, {"scale32": True})
    assert np.array_equal(ok, x.astype(np.int8))


def test_cast_rounding_and_saturation() -> None:
    f = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 126.5, 127.5, 300.0, -300.0, -128.5], np.float32)
    (got,) = run_single("CAST", [In(f)], D.INT8)
    assert got.tolist() == [0, 2, 2, 0, -2, -2, 0, 126, 127, 127, -128, -128]
    big = np.array([3e9, -3e9, 2147483520.0, 65535.5, -32768.5], np.float32)
    assert run_single("CAST", [In(big)], D.INT32)[0].tolist() == [2**31 - 1, -(2**31), 2147483520, 65536, -32768]
    assert run_single("CAST", [In(big)], D.INT16)[0].tolist() == [32767, -32768, 32767, 32767, -32768]
    i = np.array([300, -129, 128, 65535, -1], np.int32)
    assert run_single("CAST", [In(i)], D.INT8)[0].tolist() == [44, 127, -128, -1, -1]
    assert run_single("CAST", [In(i)], D.INT16)[0].tolist() == [300, -129, 128, -1, -1]
    assert run_single("CAST", [In(i)], D.BOOL)[0].tolist() == [True] * 5
    assert run_single("CAST", [In(np.array([True, False]))], D.INT32)[0].tolist() == [1, 0]
    assert run_single("CAST", [In(np.array([True, False]))], D.FP32)[0].tolist() == [1.0, 0.0]
    assert run_single("CAST", [In(np.array([16777217], np.int32))], D.FP32)[0].tolist() == [16777216.0]
    assert run_single("CAST", [In(np.array([-7], np.int8))], D.INT32)[0].tolist() == [-7]
    assert run_single("CAST", [In(np.array([65504.0, 65520.0, 1e-8], np.float32))], D.FP16)[0].tolist() == [
        65504.0, float("inf"), 0.0]


def test_mul_int() -> None:
    a = RNG.integers(-(2**31), 2**31, (200,)).astype(np.int32)
    b = RNG.integers(-(2**15), 2**15, (200,)).astype(np.int32)
    for shift in (1, 15, 20, 31):
        res = [(int(x) * int(y) + (1 << (shift - 1))) >> shift for x, y in zip(a, b)]
        keep = np.array([-(2**31) <= r < 2**31 for r in res])
        (got,) = run_single("MUL", [In(a[keep]), In(b[keep]), Const(i8(shift))], D.INT32)
        assert got.tolist() == [r for r, k in zip(res, keep) if k]
    (got,) = run_single("MUL", [In(a), In(b), i8(0)], D.INT32)
    assert got.tolist() == [((int(x) * int(y) + 2**31) % 2**32) - 2**31 for x, y in zip(a, b)]
    x8, y8 = ri(-128, 127, (50,)), ri(-128, 127, (50,))
    (got,) = run_single("MUL", [In(x8), In(y8), i8(0)], D.INT32)
    assert got.tolist() == [int(p) * int(q) for p, q in zip(x8, y8)]
    big = np.array([2**31 - 1], np.int32)
    with pytest.raises(ExecutionError, match="REQUIRE"):
        run_single("MUL", [In(big), In(big), i8(1)], D.INT32)
    with pytest.raises(ExecutionError, match="shift"):
        run_single("MUL", [In(x8), In(y8), i8(3)], D.INT32)


@pytest.mark.parametrize("dt", [D.INT8, D.INT16, D.INT32])
def test_shifts_and_bitwise(dt) -> None:  # type: ignore[no-untyped-def]
    lo, hi = dt.range()
    bits = dt.bits
    a = RNG.integers(lo, hi + 1, (300,)).astype(dt.np_dtype())
    s = RNG.integers(0, bits, (300,)).astype(dt.np_dtype())

    def wrap(v: int) -> int:
        return (v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))

    for rnd in (False, True):
        (got,) = run_single("ARITHMETIC_RIGHT_SHIFT", [In(a), In(s)], dt, {"round": rnd})
        ref = []
        for x, y in zip(a.tolist(), s.tolist()):
            r = x >> y
            if rnd and y > 0 and ((x >> (y - 1)) & 1):
                r += 1
            ref.append(wrap(r))
        assert got.tolist() == ref
    (got,) = run_single("LOGICAL_RIGHT_SHIFT", [In(a), In(s)], dt)
    assert got.tolist() == [wrap((x & ((1 << bits) - 1)) >> y) for x, y in zip(a.tolist(), s.tolist())]
    (got,) = run_single("LOGICAL_LEFT_SHIFT", [In(a), In(s)], dt)
    assert got.tolist() == [wrap(x << y) for x, y in zip(a.tolist(), s.tolist())]
    for name, fn in (("BITWISE_AND", lambda x, y: x & y), ("BITWISE_OR", lambda x, y: x | y),
                     ("BITWISE_XOR", lambda x, y: x ^ y)):
        (got,) = run_single(name, [In(a), In(s)], dt)
        assert got.tolist() == [fn(x, y) for x, y in zip(a.tolist(), s.tolist())]
    assert run_single("BITWISE_NOT", [In(a)], dt)[0].tolist() == [~x for x in a.tolist()]
    with pytest.raises(ExecutionError, match="shift amount"):
        run_single("LOGICAL_LEFT_SHIFT", [In(a), In(np.full_like(a, bits))], dt)


def test_table_i8_i16() -> None:
    t8 = ri(-128, 127, (256,))
    x8 = np.arange(-128, 128, dtype=np.int8)
    (got,) = run_single("TABLE", [In(x8), t8], D.INT8)
    assert np.array_equal(got, t8)
    t16 = np.cumsum(RNG.integers(-200, 200, 513)).astype(np.int16)
    x16 = np.arange(-32768, 32768, 7, dtype=np.int16)
    (got,) = run_single("TABLE", [In(x16), t16], D.INT32)
    ref = []
    for v in x16.tolist():
        idx, frac = (v + 32768) >> 7, v & 0x7F
        base, nxt = int(t16[idx]), int(t16[idx + 1])
        ref.append((base << 7) + (nxt - base) * frac)
    assert got.tolist() == ref


def test_misc_int_ops() -> None:
    a = np.array([7, -7, 7, -7, 0, 2**31 - 1], np.int32)
    b = np.array([2, 2, -2, -2, 5, 1], np.int32)
    assert run_single("INTDIV", [In(a), In(b)], D.INT32)[0].tolist() == [3, -3, -3, 3, 0, 2**31 - 1]
    with pytest.raises(ExecutionError, match="divisor"):
        run_single("INTDIV", [In(a), In(np.zeros_like(b))], D.INT32)
    with pytest.raises(ExecutionError, match="overflow"):
        run_single("INTDIV", [In(np.array([-(2**31)], np.int32)), In(np.array([-1], np.int32))], D.INT32)
    assert run_single("CLZ", [In(np.array([0, 1, -1, 255], np.int32))], D.INT32)[0].tolist() == [32, 31, 0, 24]
    x = np.array([-128, -5, 0, 100, 127], np.int8)
    (got,) = run_single("NEGATE", [In(x), i8(3), i8(-4)], D.INT8)
    assert got.tolist() == [min(max(-4 - (v - 3), -128), 127) for v in x.tolist()]
    assert run_single("NEGATE", [In(np.array([-(2**31) + 1, 5], np.int32)), np.zeros(1, np.int32),
                                 np.zeros(1, np.int32)], D.INT32)[0].tolist() == [2**31 - 1, -5]
    with pytest.raises(ExecutionError, match="overflow"):
        run_single("ADD", [In(np.array([2**31 - 1], np.int32)), In(np.array([1], np.int32))], D.INT32)
    assert run_single("SUB", [In(np.array([5], np.int32)), In(np.array([7], np.int32))], D.INT32)[0].tolist() == [-2]
    assert run_single("ABS", [In(np.array([-5, 3], np.int32))], D.INT32)[0].tolist() == [5, 3]
    (c,) = run_single("CLAMP", [In(x)], D.INT8, {"min_val": -10, "max_val": 50})
    assert c.tolist() == [-10, -5, 0, 50, 50]
    assert run_single("REDUCE_SUM", [In(np.array([[1, 2], [3, 4]], np.int32))], D.INT32,
                      {"axis": 0})[0].tolist() == [[4, 6]]
    assert run_single("REDUCE_MAX", [In(x.reshape(1, 5))], D.INT8, {"axis": 1})[0].tolist() == [[127]]
    assert run_single("ARGMAX", [In(np.array([[3, 9, 9, -1]], np.int8))], D.INT32, {"axis": 1})[0].tolist() == [1]


def brute_resize(x, scale, offset, border, mode):  # type: ignore[no-untyped-def]
    yn, yd, xn, xd = scale
    n_, ih, iw, c = x.shape
    oh = ((ih - 1) * yn - offset[0] + border[0]) // yd + 1
    ow = ((iw - 1) * xn - offset[1] + border[1]) // xd + 1
    out = np.zeros((n_, oh, ow, c), np.int64)
    for n, oy, ox, ch in itertools.product(range(n_), range(oh), range(ow), range(c)):
        y, xx = oy * yd + offset[0], ox * xd + offset[1]
        iy, ix = y // yn, xx // xn
        dy, dx = y - iy * yn, xx - ix * xn
        iy0, iy1, ix0, ix1 = max(iy, 0), min(iy + 1, ih - 1), max(ix, 0), min(ix + 1, iw - 1)
        if mode == "BILINEAR":
            v = [[int(x[n, iy0, ix0, ch]), int(x[n, iy0, ix1, ch])], [int(x[n, iy1, ix0, ch]), int(x[n, iy1, ix1, ch])]]
            out[n, oy, ox, ch] = (v[0][0] * (yn - dy) * (xn - dx) + v[0][1] * (yn - dy) * dx
                                  + v[1][0] * dy * (xn - dx) + v[1][1] * dy * dx)
        else:
            out[n, oy, ox, ch] = x[n, iy1 if 2 * dy >= yn else iy0, ix1 if 2 * dx >= xn else ix0, ch]
    return out


#: legal RESIZE parameters for a 5x6 input: ((in - 1) * scale_n - offset + border) is a multiple of scale_d on each
#: axis (the spec's idiv_check), offsets and borders within their ERROR_IF ranges
@pytest.mark.parametrize("scale,offset,border", [([4, 2, 6, 3], [-1, -1], [1, 2]), ([2, 1, 2, 1], [0, 0], [0, 0]),
                                                 ([3, 5, 7, 4], [1, -2], [-1, 3]), ([16, 6, 10, 6], [5, 2], [1, 6])])
def test_resize_int(scale, offset, border) -> None:  # type: ignore[no-untyped-def]
    x8 = ri(-128, 127, (1, 5, 6, 2))
    x16 = ri(-32768, 32767, (1, 5, 6, 2), np.int16)
    for mode, x, ot in (("BILINEAR", x8, D.INT32), ("BILINEAR", x16, D.INT48), ("NEAREST_NEIGHBOR", x8, D.INT8),
                        ("NEAREST_NEIGHBOR", x16, D.INT16)):
        (got,) = run_single("RESIZE", [In(x), Shape(scale), Shape(offset), Shape(border)], ot, {"mode": mode})
        assert np.array_equal(got.astype(np.int64), brute_resize(x, scale, offset, border, mode))


@pytest.mark.parametrize("scale,offset,border", [([4, 2, 6, 3], [-1, -1], [1, 1]), ([3, 5, 7, 4], [1, -2], [1, 3]),
                                                 ([16, 6, 10, 6], [5, 2], [-3, 6])])
def test_resize_int_inexact_output_size_is_an_error(scale, offset, border) -> None:  # type: ignore[no-untyped-def]
    x8 = ri(-128, 127, (1, 5, 6, 2))
    with pytest.raises(ExecutionError, match="idiv_check"):
        run_single("RESIZE", [In(x8), Shape(scale), Shape(offset), Shape(border)], D.INT8, {"mode": "NEAREST_NEIGHBOR"})
