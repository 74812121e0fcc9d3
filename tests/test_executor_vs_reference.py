"""Differential tests: our executor vs Arm's TOSA reference model on random multi-op graphs.

Each graph holds many independent ops (int8 / int16 / int32 / fp32 families) so that one
reference-model subprocess checks them all.  Integer outputs must match exactly; float
outputs within a few ulp-scaled tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.executor_testing import Const, GraphBuilder, In, Shape
from tf2tosa.executor import run
from tf2tosa.ir.types import DType as D
from tf2tosa.verify import tosa_tools

pytestmark = pytest.mark.skipif(not tosa_tools.available(), reason="tosa-tools environment not available")


def _ri(rng: np.random.Generator, lo: int, hi: int, shape: tuple[int, ...], dt: type = np.int8) -> np.ndarray:
    return rng.integers(lo, hi + 1, shape).astype(dt)


def z(dt: D, v: int = 0) -> Const:
    return Const(np.array([v]), dt)


def compare(b: GraphBuilder) -> dict[str, float]:
    from tf2tosa.serializer import to_bytes

    ours = run(b.graph, b.feed)
    ref = tosa_tools.run_reference(to_bytes(b.graph), b.feed)
    assert list(ref) == list(ours)
    stats: dict[str, float] = {}
    bad = []
    for v in b.graph.outputs:
        o, r = ours[v.name], ref[v.name]
        assert o.shape == r.shape, v.name
        if v.type.dtype.is_float:
            of, rf = o.astype(np.float64), r.astype(np.float64)
            same_nan = np.array_equal(np.isnan(of), np.isnan(rf))
            fin = ~np.isnan(of) & (of != rf)  # equal values (incl. same-signed infinities) have no error
            with np.errstate(invalid="ignore"):
                err = np.abs(of[fin] - rf[fin]) / np.maximum(1.0, np.abs(rf[fin])) if fin.any() else np.zeros(1)
            err = np.where(np.isnan(err), np.inf, err)
            stats[v.name] = float(err.max()) if err.size else 0.0
            tol = {D.FP16: 2e-3, D.BF16: 1e-2}.get(v.type.dtype, 1e-5)
            if not same_nan or stats[v.name] > tol:
                bad.append((v.name, stats[v.name], same_nan))
        else:
            mism = int(np.count_nonzero(o.astype(np.int64) != r.astype(np.int64)))
            stats[v.name] = mism
            if mism:
                bad.append((v.name, mism, o.reshape(-1)[:8].tolist(), r.reshape(-1)[:8].tolist()))
    assert not bad, bad
    return stats


def conv_attrs(pad: list[int], stride: list[int], dil: list[int], acc: str) -> dict[str, object]:
    return {"pad": pad, "stride": stride, "dilation": dil, "acc_type": acc, "local_bound": False}


@pytest.mark.parametrize("seed", [0, 1])
def test_int8_tensor_ops_vs_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    b = GraphBuilder("int8_tensor")
    izp, wzp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    x = _ri(rng, -128, 127, (2, 9, 9, 5))
    b.add("CONV2D", [In(x), _ri(rng, -128, 127, (6, 3, 3, 5)), _ri(rng, -9000, 9000, (6,), np.int32),
                     z(D.INT8, izp), z(D.INT8, wzp)], D.INT32, conv_attrs([1, 1, 1, 1], [1, 1], [1, 1], "INT32"))
    b.add("CONV2D", [In(x), _ri(rng, -128, 127, (4, 2, 3, 5)), _ri(rng, -9000, 9000, (1,), np.int32),
                     z(D.INT8, izp), z(D.INT8, 0)], D.INT32, conv_attrs([0, 1, 2, 0], [2, 3], [1, 2], "INT32"))
    b.add("DEPTHWISE_CONV2D", [In(x), _ri(rng, -128, 127, (3, 3, 5, 2)), _ri(rng, -99, 99, (10,), np.int32),
                               z(D.INT8, izp), z(D.INT8, wzp)], D.INT32,
          conv_attrs([1, 1, 1, 1], [2, 2], [1, 1], "INT32"))
    b.add("TRANSPOSE_CONV2D", [In(x), _ri(rng, -128, 127, (3, 3, 4, 5)), _ri(rng, -99, 99, (3,), np.int32),
                               z(D.INT8, izp), z(D.INT8, wzp)], D.INT32,
          {"out_pad": [-1, 0, 1, -2], "stride": [2, 3], "acc_type": "INT32", "local_bound": False})
    b.add("CONV3D", [In(_ri(rng, -128, 127, (1, 4, 5, 5, 3))), _ri(rng, -128, 127, (2, 2, 3, 3, 3)),
                     _ri(rng, -99, 99, (2,), np.int32), z(D.INT8, izp), z(D.INT8, wzp)], D.INT32,
          conv_attrs([1, 0, 1, 1, 0, 1], [1, 2, 1], [1, 1, 2], "INT32"))
    b.add("MATMUL", [In(_ri(rng, -128, 127, (2, 3, 40))), In(_ri(rng, -128, 127, (2, 40, 5))), z(D.INT8, izp),
                     z(D.INT8, wzp)], D.INT32)
    b.add("AVG_POOL2D", [In(x), z(D.INT8, izp), z(D.INT8, int(rng.integers(-128, 128)))], D.INT8,
          {"kernel": [3, 3], "stride": [2, 2], "pad": [1, 1, 1, 1], "acc_type": "INT32"})
    b.add("AVG_POOL2D", [In(x), z(D.INT8, izp), z(D.INT8, 0)], D.INT8,
          {"kernel": [2, 4], "stride": [1, 1], "pad": [0, 1, 2, 3], "acc_type": "INT32"})
    b.add("MAX_POOL2D", [In(x)], D.INT8, {"kernel": [3, 2], "stride": [2, 1], "pad": [1, 1, 0, 1],
                                          "nan_mode": "PROPAGATE"})
    b.add("ARGMAX", [In(x)], D.INT32, {"axis": 3, "nan_mode": "PROPAGATE"})
    b.add("ARGMAX", [In(_ri(rng, -3, 3, (4, 7)))], D.INT32, {"axis": 0, "nan_mode": "PROPAGATE"})
    b.add("RESIZE", [In(x), Shape([4, 2, 6, 3]), Shape([-1, -1]), Shape([1, 2])], D.INT32, {"mode": "BILINEAR"})
    b.add("RESIZE", [In(x), Shape([3, 5, 7, 4]), Shape([1, -2]), Shape([2, 2])], D.INT8,
          {"mode": "NEAREST_NEIGHBOR"})
    compare(b)


@pytest.mark.parametrize("seed", [0, 1])
def test_int16_int48_ops_vs_reference(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    b = GraphBuilder("int16")
    x = _ri(rng, -32768, 32767, (1, 7, 7, 4), np.int16)
    acc = b.add("CONV2D", [In(x), _ri(rng, -128, 127, (3, 3, 3, 4)), Const(_ri(rng, -2**40, 2**40, (3,), np.int64),
                                                                             D.INT48),
                           z(D.INT16), z(D.INT8)], D.INT48, conv_attrs([1, 1, 1, 1], [1, 1], [1, 1], "INT48"),
                output=False)[0]
    mult = _ri(rng, 1 << 14, (1 << 15) - 1, (3,), np.int16)
    b.add("RESCALE", [acc, Const(mult), Const(_ri(rng, 30, 40, (3,))), z(D.INT48), z(D.INT16)], D.INT16,
          {"scale32": False, "rounding_mode": "SINGLE_ROUND", "per_channel": True, "input_unsigned": False,
           "output_unsigned": False})
    rs = b.add("RESIZE", [In(x), Shape([4, 2, 6, 3]), Shape([-1, -1]), Shape([1, 2])], D.INT48,
               {"mode": "BILINEAR"}, output=False)[0]
    b.add("RESCALE", [rs, Const(np.array([1 << 14], np.int16)), Const(np.array([18], np.int8)), z(D.INT48),
                      z(D.INT32)], D.INT32, {"scale32": False, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
                                             "input_unsigned": False, "output_unsigned": False})
    b.add("RESIZE", [In(x), Shape([2, 1, 2, 1]), Shape([0, 0]), Shape([0, 0])], D.INT16, {"mode": "NEAREST_NEIGHBOR"})
    b.add("AVG_POOL2D", [In(x), z(D.INT16), z(D.INT16)], D.INT16,
          {"kernel": [3, 3], "stride": [1, 1], "pad": [1, 1, 1, 1], "acc_type": "INT32"})
    b.add("MAX_POOL2D", [In(x)], D.INT16, {"kernel": [2, 2], "stride": [1, 1], "pad": [0, 0, 0, 0],
                                           "nan_mode": "PROPAGATE"})
    mm = b.add("MATMUL", [In(_ri(rng, -32768, 32767, (1, 4, 30), np.int16)),
                          In(_ri(rng, -32768, 32767, (1, 30, 3), np.int16)), z(D.INT16), z(D.INT16)], D.INT48,
               output=False)[0]
    b.add("RESCALE", [mm, Const(np.array([1 << 14], np.int16)), Const(np.array([30], np.int8)), z(D.INT48),
                      z(D.INT32)], D.INT32, {"scale32": False, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
                                             "input_unsigned": False, "output_unsigned": False})
    t16 = np.cumsum(rng.integers(-250, 250, 513)).astype(np.int16)
    b.add("TABLE", [In(x), Const(t16)], D.INT32)
    b.add("CLAMP", [In(x)], D.INT16, {"min_val": -1000, "max_val": 20000, "nan_mode": "PROPAGATE"})
    b.add("ARGMAX", [In(x)], D.INT32, {"axis": 2, "nan_mode": "PROPAGATE"})
    b.add("REDUCE_MIN", [In(x)], D.INT16, {"axis": 1, "nan_mode": "PROPAGATE"})
    compare(b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rescale_vs_reference(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    b = GraphBuilder("rescale")
    x8 = _ri(rng, -128, 127, (3, 4, 6))
    x16 = _ri(rng, -32768, 32767, (3, 4, 6), np.int16)
    x32 = _ri(rng, -2**24, 2**24, (3, 4, 6), np.int32)

    def r(x: np.ndarray, it: D, ot: D, izp: int, ozp: int, scale32: bool, mode: str, pc: bool,
          in_u: bool = False, out_u: bool = False, shifts: tuple[int, int] = (25, 45)) -> None:
        nc = 6 if pc else 1
        if scale32:
            m = rng.integers(1 << 30, 1 << 31, nc).astype(np.int32)
        else:
            m = rng.integers(1 << 14, 1 << 15, nc).astype(np.int16)
        s = rng.integers(shifts[0], shifts[1], nc).astype(np.int8)
        b.add("RESCALE", [In(x, it), Const(m), Const(s), z(it, izp), z(ot, ozp)], ot,
              {"scale32": scale32, "rounding_mode": mode, "per_channel": pc, "input_unsigned": in_u,
               "output_unsigned": out_u})

    for mode in ("SINGLE_ROUND", "DOUBLE_ROUND"):
        r(x8, D.INT8, D.INT8, int(rng.integers(-128, 128)), int(rng.integers(-128, 128)), True, mode, False,
          shifts=(28, 34))
        r(x32, D.INT32, D.INT8, 0, int(rng.integers(-128, 128)), True, mode, True, shifts=(30, 50))
        r(x32, D.INT32, D.INT16, 0, 0, True, mode, False, shifts=(31, 40))
        r(x16, D.INT16, D.INT32, 0, 0, True, mode, True, shifts=(20, 34))
        r(x8, D.INT8, D.INT32, -5, 0, True, mode, False, shifts=(10, 40))
    r(x8, D.INT8, D.INT8, -100, 7, True, "SINGLE_ROUND", False, in_u=True, shifts=(29, 32))
    r(x8, D.INT8, D.INT8, 7, -100, True, "SINGLE_ROUND", False, out_u=True, shifts=(29, 32))
    r(x16, D.INT16, D.INT8, -32768, 0, True, "SINGLE_ROUND", True, in_u=True, shifts=(36, 40))
    r(x8, D.INT8, D.INT16, 3, -32768, True, "SINGLE_ROUND", False, out_u=True, shifts=(22, 26))
    r(x16, D.INT16, D.INT16, 0, 0, False, "SINGLE_ROUND", True, shifts=(14, 20))
    compare(b)


@pytest.mark.parametrize("seed", [0, 1])
def test_elementwise_int_vs_reference(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    b = GraphBuilder("elementwise_int")
    a32 = _ri(rng, -2**30, 2**30, (4, 1, 5), np.int32)
    b32 = _ri(rng, -2**30, 2**30, (1, 3, 5), np.int32)
    for op in ("ADD", "SUB", "MAXIMUM", "MINIMUM"):
        attrs = {"nan_mode": "PROPAGATE"} if op in ("MAXIMUM", "MINIMUM") else {}
        b.add(op, [In(a32), In(b32)], D.INT32, attrs)
    for op in ("EQUAL", "GREATER", "GREATER_EQUAL"):
        b.add(op, [In(a32), In(np.where(rng.random(b32.shape) < 0.3, a32[:1, :1], b32))], D.BOOL)
    for dt, np_t in ((D.INT8, np.int8), (D.INT16, np.int16), (D.INT32, np.int32)):
        lo, hi = dt.range()
        v = _ri(rng, lo, hi, (3, 40), np_t)
        s = _ri(rng, 0, dt.bits - 1, (3, 40), np_t)
        for rnd in (False, True):
            b.add("ARITHMETIC_RIGHT_SHIFT", [In(v), In(s)], dt, {"round": rnd})
        for op in ("LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR"):
            b.add(op, [In(v), In(s)], dt)
        b.add("BITWISE_NOT", [In(v)], dt)
        b.add("REDUCE_MAX", [In(v)], dt, {"axis": 1, "nan_mode": "PROPAGATE"})
        b.add("SELECT", [In(rng.random((3, 1)) < 0.5), In(v), In(s)], dt)
        if dt is not D.INT32:
            b.add("MUL", [In(v), In(s), Const(np.array([0], np.int8))], D.INT32)
    m1 = _ri(rng, -2**31, 2**31 - 1, (50,), np.int32)
    m2 = _ri(rng, -2**14, 2**14, (50,), np.int32)
    b.add("MUL", [In(m1), In(m2), Const(np.array([17], np.int8))], D.INT32)
    b.add("MUL", [In(m1), In(m2), Const(np.array([0], np.int8))], D.INT32)
    b.add("INTDIV", [In(m1), In(np.where(m2 == 0, 3, m2).astype(np.int32))], D.INT32)
    b.add("CLZ", [In(np.concatenate([m1, [0, -1, 1]]).astype(np.int32))], D.INT32)
    b.add("ABS", [In(m1[m1 != -(2**31)])], D.INT32)
    x8 = _ri(rng, -128, 127, (2, 64))
    b.add("NEGATE", [In(x8), z(D.INT8, int(rng.integers(-128, 128))), z(D.INT8, int(rng.integers(-128, 128)))],
          D.INT8)
    b.add("NEGATE", [In(m1[m1 != -(2**31)]), z(D.INT32), z(D.INT32)], D.INT32)
    b.add("TABLE", [In(x8), Const(_ri(rng, -128, 127, (256,)))], D.INT8)
    b.add("CLAMP", [In(x8)], D.INT8, {"min_val": -20, "max_val": 90, "nan_mode": "PROPAGATE"})
    b.add("REDUCE_SUM", [In(_ri(rng, -2**20, 2**20, (3, 50), np.int32))], D.INT32, {"axis": 1})
    bl1, bl2 = In(rng.random((4, 4)) < 0.5), In(rng.random((1, 4)) < 0.5)
    for op in ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR"):
        b.add(op, [bl1, bl2], D.BOOL)
    b.add("LOGICAL_NOT", [bl1], D.BOOL)
    b.add("REDUCE_ALL", [bl1], D.BOOL, {"axis": 0})
    b.add("REDUCE_ANY", [bl1], D.BOOL, {"axis": 1})
    compare(b)


@pytest.mark.parametrize("seed", [0])
def test_layout_and_cast_vs_reference(seed: int) -> None:
    rng = np.random.default_rng(400 + seed)
    b = GraphBuilder("layout_cast")
    x8 = _ri(rng, -128, 127, (2, 3, 4))
    b.add("PAD", [In(x8), Shape([1, 0, 0, 2, 1, 1]), Const(np.array([-7], np.int8))], D.INT8)
    b.add("SLICE", [In(x8), Shape([1, 1, 0]), Shape([1, 2, 3])], D.INT8)
    b.add("TILE", [In(x8), Shape([1, 2, 2])], D.INT8)
    b.add("TRANSPOSE", [In(x8)], D.INT8, {"perms": [2, 0, 1]})
    b.add("REVERSE", [In(x8)], D.INT8, {"axis": 2})
    b.add("RESHAPE", [In(x8), Shape([4, 6])], D.INT8)
    b.add("CONCAT", [In(x8), In(_ri(rng, -128, 127, (2, 1, 4))), In(x8)], D.INT8, {"axis": 1})
    b.add("IDENTITY", [In(x8)], D.INT8)
    b.add("GATHER", [In(_ri(rng, -2**31, 2**31 - 1, (2, 7, 3), np.int32)), In(_ri(rng, 0, 6, (2, 9), np.int32))],
          D.INT32)
    idx = np.stack([rng.permutation(7)[:4] for _ in range(2)]).astype(np.int32)
    b.add("SCATTER", [In(_ri(rng, -999, 999, (2, 7, 3), np.int16)), In(idx), In(_ri(rng, -999, 999, (2, 4, 3),
                                                                                       np.int16))], D.INT16)
    f = np.concatenate([rng.uniform(-300, 300, 60), np.arange(-4.5, 5, 0.5), [1e10, -1e10, 32767.5, -32768.5]])
    f = f.astype(np.float32)
    for ot in (D.INT8, D.INT16, D.INT32, D.FP16):
        b.add("CAST", [In(f)], ot)
    i32 = _ri(rng, -2**31, 2**31 - 1, (40,), np.int32)
    for ot in (D.INT8, D.INT16, D.BOOL, D.FP32, D.FP16):
        b.add("CAST", [In(i32)], ot)
    b.add("CAST", [In(x8)], D.INT32)
    b.add("CAST", [In(x8)], D.BOOL)
    b.add("CAST", [In(rng.random(10) < 0.5)], D.INT16)
    b.add("CAST", [In(rng.standard_normal(20).astype(np.float16))], D.FP32)
    compare(b)


@pytest.mark.parametrize("seed", [0, 1])
def test_fp32_ops_vs_reference(seed: int) -> None:
    rng = np.random.default_rng(500 + seed)
    b = GraphBuilder("fp32")
    zf = Const(np.zeros(1, np.float32))

    def fr(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    x = fr(2, 9, 9, 5)
    b.add("CONV2D", [In(x), fr(6, 3, 3, 5), fr(6), zf, zf], D.FP32, conv_attrs([1, 1, 1, 1], [2, 2], [1, 1], "FP32"))
    b.add("CONV2D", [In(x), fr(4, 2, 3, 5), fr(1), zf, zf], D.FP32, conv_attrs([0, 1, 2, 0], [2, 3], [1, 2], "FP32"))
    b.add("DEPTHWISE_CONV2D", [In(x), fr(3, 3, 5, 2), fr(10), zf, zf], D.FP32,
          conv_attrs([1, 1, 1, 1], [1, 1], [2, 2], "FP32"))
    b.add("TRANSPOSE_CONV2D", [In(x), fr(3, 3, 4, 5), fr(3), zf, zf], D.FP32,
          {"out_pad": [-1, 0, 1, -2], "stride": [2, 3], "acc_type": "FP32", "local_bound": False})
    b.add("CONV3D", [In(fr(1, 4, 5, 5, 3)), fr(2, 2, 3, 3, 3), fr(2), zf, zf], D.FP32,
          conv_attrs([1, 0, 1, 1, 0, 1], [1, 2, 1], [1, 1, 2], "FP32"))
    b.add("MATMUL", [In(fr(2, 3, 40)), In(fr(2, 40, 5)), zf, zf], D.FP32)
    b.add("AVG_POOL2D", [In(x), zf, zf], D.FP32, {"kernel": [3, 3], "stride": [2, 2], "pad": [1, 1, 1, 1],
                                                  "acc_type": "FP32"})
    b.add("MAX_POOL2D", [In(x)], D.FP32, {"kernel": [3, 2], "stride": [2, 1], "pad": [1, 1, 0, 1],
                                          "nan_mode": "PROPAGATE"})
    b.add("RESIZE", [In(x), Shape([4, 2, 6, 3]), Shape([-1, -1]), Shape([1, 2])], D.FP32, {"mode": "BILINEAR"})
    b.add("RESIZE", [In(x), Shape([3, 5, 7, 4]), Shape([1, -2]), Shape([2, 2])], D.FP32,
          {"mode": "NEAREST_NEIGHBOR"})
    u = rng.uniform(-4, 4, (3, 50)).astype(np.float32)
    pos = rng.uniform(0.05, 20, (3, 50)).astype(np.float32)
    for op in ("ERF", "SIGMOID", "TANH", "EXP", "SIN", "COS", "FLOOR", "CEIL", "ABS", "NEGATE"):
        args = [In(u)] + ([zf, zf] if op == "NEGATE" else [])
        b.add(op, args, D.FP32)
    for op in ("LOG", "RECIPROCAL", "RSQRT"):
        b.add(op, [In(pos)], D.FP32)
    v = fr(3, 50)
    for op in ("ADD", "SUB", "MAXIMUM", "MINIMUM", "POW"):
        attrs = {"nan_mode": "PROPAGATE"} if op in ("MAXIMUM", "MINIMUM") else {}
        b.add(op, [In(pos if op == "POW" else u), In(v)], D.FP32, attrs)
    b.add("MUL", [In(u), In(v), Const(np.array([0], np.int8))], D.FP32)
    b.add("CLAMP", [In(u)], D.FP32, {"min_val": -1.0, "max_val": 2.5, "nan_mode": "PROPAGATE"})
    for op in ("REDUCE_SUM", "REDUCE_PRODUCT", "REDUCE_MAX", "REDUCE_MIN"):
        attrs = {"nan_mode": "PROPAGATE"} if op in ("REDUCE_MAX", "REDUCE_MIN") else {}
        b.add(op, [In(u[:, :8])], D.FP32, {"axis": 1, **attrs})
    b.add("ARGMAX", [In(u)], D.INT32, {"axis": 1, "nan_mode": "PROPAGATE"})
    for op in ("EQUAL", "GREATER", "GREATER_EQUAL"):
        b.add(op, [In(u), In(np.where(rng.random(u.shape) < 0.3, u, v))], D.BOOL)
    b.add("FFT2D", [In(fr(2, 8, 4)), In(fr(2, 8, 4))], [D.FP32, D.FP32], {"inverse": bool(seed), "local_bound": False})
    b.add("RFFT2D", [In(fr(2, 4, 8))], [D.FP32, D.FP32], {"local_bound": False})
    b.add("SELECT", [In(rng.random((3, 1)) < 0.5), In(u), In(v)], D.FP32)
    compare(b)


def test_nan_semantics_vs_reference() -> None:
    b = GraphBuilder("nan")
    nan = np.float32(np.nan)
    a = np.array([[1.0, nan, -2.0, nan, 3.0]], np.float32)
    c = np.array([[0.5, 3.0, nan, nan, 3.0]], np.float32)
    for mode in ("PROPAGATE", "IGNORE"):
        b.add("MAXIMUM", [In(a), In(c)], D.FP32, {"nan_mode": mode})
        b.add("MINIMUM", [In(a), In(c)], D.FP32, {"nan_mode": mode})
        b.add("CLAMP", [In(a)], D.FP32, {"min_val": 0.0, "max_val": 2.0, "nan_mode": mode})
        m = np.array([[1.0, nan, 5.0, 5.0], [nan, nan, nan, nan], [-1.0, -3.0, nan, 2.0]], np.float32)
        b.add("ARGMAX", [In(m)], D.INT32, {"axis": 1, "nan_mode": mode})
        b.add("REDUCE_MAX", [In(m)], D.FP32, {"axis": 1, "nan_mode": mode})
        b.add("REDUCE_MIN", [In(m)], D.FP32, {"axis": 1, "nan_mode": mode})
        p = np.full((1, 4, 4, 1), nan, np.float32)
        p[0, 0, 0, 0] = 1.0
        b.add("MAX_POOL2D", [In(p)], D.FP32, {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0],
                                              "nan_mode": mode})
    b.add("EQUAL", [In(a), In(c)], D.BOOL)
    b.add("GREATER", [In(a), In(c)], D.BOOL)
    compare(b)


def test_fp16_bf16_vs_reference() -> None:
    import ml_dtypes

    rng = np.random.default_rng(600)
    b = GraphBuilder("fp16_bf16")
    h = rng.standard_normal((1, 6, 6, 4)).astype(np.float16)
    zh = Const(np.zeros(1, np.float16))
    b.add("CONV2D", [In(h), (rng.standard_normal((3, 3, 3, 4)) * 0.3).astype(np.float16),
                     rng.standard_normal(3).astype(np.float16), zh, zh], D.FP16,
          conv_attrs([1, 1, 1, 1], [1, 1], [1, 1], "FP32"))
    b.add("ADD", [In(h), In(h[:, :1])], D.FP16)
    b.add("MUL", [In(h), In(h), Const(np.array([0], np.int8))], D.FP16)
    b.add("TANH", [In(h)], D.FP16)
    b.add("CAST", [In(h)], D.FP32)
    f = rng.standard_normal(64).astype(np.float32) * 100
    b.add("CAST", [In(f)], D.BF16)
    bf = rng.standard_normal((4, 8)).astype(ml_dtypes.bfloat16)
    b.add("ADD", [In(bf, D.BF16), In(bf, D.BF16)], D.BF16)
    b.add("CAST", [In(bf, D.BF16)], D.FP32)
    compare(b)


def test_error_if_and_require_agree_with_reference() -> None:
    from tf2tosa.executor import ExecutionError
    from tf2tosa.serializer import to_bytes

    # REQUIRE: i32 ADD overflow -> reference reports an unpredictable result, we raise
    b = GraphBuilder("require")
    b.add("ADD", [In(np.array([2**31 - 2, 5], np.int32)), In(np.array([1, 1], np.int32))], D.INT32)
    b.feed[b.graph.inputs[0].name] = np.array([2**31 - 1, 5], np.int32)
    with pytest.raises(ExecutionError, match="REQUIRE"):
        run(b.graph, b.feed)
    with pytest.raises(tosa_tools.ReferenceModelError, match="UNPREDICTABLE"):
        tosa_tools.run_reference(to_bytes(b.graph), b.feed)
