"""Exact integer results at realistic sizes (issue 17), always against LiteRT's BUILTIN_REF kernels, with
tosa-opt validation and the Arm reference model (tests.e2e.check_tflite); integer outputs compare exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import tf2tosa  # noqa: E402
from tests import modelgen_exact as M  # noqa: E402
from tests.e2e import check_tflite  # noqa: E402


def _ref_run(data: bytes, xs: list[np.ndarray]) -> list[np.ndarray]:
    from tf2tosa.verify.litert import run_tflite_many

    model = tf2tosa.convert(data)
    name = model.graph.inputs[0].source or model.graph.inputs[0].name
    return [list(r.values())[0] for r in run_tflite_many(data, [{name: x} for x in xs], reference_kernels=True)]


@pytest.mark.parametrize("ic", [2048, 4096])
def test_fully_connected_16x8_deep(ic: int) -> None:
    """A 16x8 FULLY_CONNECTED whose 48-bit accumulator exceeds i32: 0 mismatches, no inexact path."""
    data = M.fully_connected(ic)
    res = check_tflite(f"exact_fc{ic}", data, num=5, reference_kernels=True)
    assert res.litert_mismatches == 0
    model = tf2tosa.convert(data)
    assert not model.graph.record.inexact
    # inputs built to reach the accumulator's extremes (saturating outputs) and sparse large values
    rng = np.random.default_rng(ic)
    g = model.graph
    w_sign = np.sign(rng.standard_normal((1, ic)))
    xs = [np.where(w_sign > 0, 32767, -32768).astype(np.int16),
          (rng.integers(-32768, 32768, (1, ic)) * (rng.random((1, ic)) < 0.05)).astype(np.int16),
          rng.integers(-2000, 2000, (1, ic)).astype(np.int16)]
    refs = _ref_run(data, xs)
    for x, r in zip(xs, refs):
        got = model.run({g.inputs[0].name: x})[g.outputs[0].name].reshape(r.shape)
        assert np.array_equal(got, r)


def test_reduce_prod_int32_wraps() -> None:
    """int32 REDUCE_PROD wraps like TFLite's C multiplication (TOSA MUL with shift 0 keeps the low 32 bits)."""
    data = M.reduce_prod_int()
    res = check_tflite("exact_reduce_prod_i32", data, num=5, lo=-70000, hi=70000, reference_kernels=True)
    assert res.litert_mismatches == 0 and res.ops.get("tosa.MUL")
    # the products wrap: the test would fail with a saturating or 64-bit product
    from tf2tosa.verify.litert import run_tflite_many

    x = np.random.default_rng(0).integers(-70000, 70000, (2, 7, 5)).astype(np.int32)
    ref = list(run_tflite_many(data, [{"x0": x}], reference_kernels=True)[0].values())[0]
    assert not np.array_equal(ref.astype(np.int64), np.prod(x.astype(object), axis=1).astype(float))
    assert np.array_equal(ref, np.prod(x, axis=1, dtype=np.int32))


@pytest.mark.parametrize("concat", [False, True])
def test_split_v_empty_piece(concat: bool) -> None:
    data = M.split_v_empty(concat=concat)
    check_tflite(f"exact_split_v_empty_{concat}", data, num=2)


@pytest.mark.parametrize("lo,hi", [(0.5, 2.0), (-2.0, 2.0)])
def test_div_int8_every_code_pair(lo: float, hi: float) -> None:
    """int8 DIV over all 65,536 code pairs (divisor zero point excluded: LiteRT refuses it), including the
    numerators 0 and -1 whose 31 sign bits push RoundingDivideByPOT's exponent past 31."""
    from tf2tosa.verify.litert import run_tflite_many

    data = M.div_int8(lo, hi)
    model = tf2tosa.convert(data)
    g = model.graph
    zp2 = g.inputs[1].type.quant.zp
    xs = np.repeat(np.arange(-128, 128), 256).astype(np.int8)
    ys = np.tile(np.arange(-128, 128), 256)
    ys = np.where(ys == zp2, zp2 + 1 if zp2 < 127 else zp2 - 1, ys).astype(np.int8)
    ref = list(run_tflite_many(data, [{"x0": xs, "x1": ys}], reference_kernels=True)[0].values())[0]
    got = model.run({g.inputs[0].name: xs, g.inputs[1].name: ys})[g.outputs[0].name]
    assert np.array_equal(got, ref)
    if lo > 0:
        check_tflite("exact_div_i8", data, num=5, lo=lo, hi=hi, reference_kernels=True)


SUM_CASES = [("int8", 0.25, 3, 0.5, -1), ("int8", 0.25, -5, 0.5, 7), ("int8", 0.1, 3, 0.2, 0), ("int8", 0.1, 0, 0.3, 0),
             ("int16", 0.25, 0, 0.5, 0), ("int16", 0.1, 0, 0.2, 0), ("int16", 0.25, 0, 1.0, 0)]


@pytest.mark.parametrize("case", SUM_CASES, ids=[f"{c[0]}-{c[1]}-{c[3]}" for c in SUM_CASES])
def test_quantized_sum_ties(case: tuple[str, float, int, float, int]) -> None:
    """Quantized SUM with ratios that make exact ties common: the default kernels' tie rules (int8: v + zp_out
    half to even, int16: half away from zero) over 120 inputs; BUILTIN_REF's SUM is broken (test_ops_e2e_int)."""
    from tf2tosa.verify.litert import run_tflite_many

    dt, s_in, zp_in, s_out, zp_out = case
    data = M.quantized_sum(dt, s_in, zp_in, s_out, zp_out)
    model = tf2tosa.convert(data)
    g = model.graph
    npdt = np.dtype(dt)
    info = np.iinfo(npdt)
    rng = np.random.default_rng(7)
    xs = [rng.integers(-12, 12, (3, 8)).astype(npdt) for _ in range(100)]
    xs += [rng.integers(info.min, info.max + 1, (3, 8)).astype(npdt) for _ in range(20)]
    refs = run_tflite_many(data, [{"x": x} for x in xs])
    ties = 0
    for x, r in zip(xs, refs):
        ref = list(r.values())[0]
        v = (x.astype(np.int64).sum(1) - 8 * zp_in) * (s_in / s_out)
        ties += int(np.count_nonzero(v - np.floor(v) == 0.5))
        got = model.run({g.inputs[0].name: x})[g.outputs[0].name].reshape(ref.shape)
        assert np.array_equal(got, ref), (x, got, ref)
    assert ties > 20 or s_in / s_out not in (0.5,)
    check_tflite(f"exact_sum_{dt}", data, num=2)


@pytest.mark.parametrize("kind", M.OPS16)
def test_16x8_ops_realistic_sizes(kind: str) -> None:
    """16x8 ops with deep channels, long reductions and big windows: bit-exact vs BUILTIN_REF (SUM: the default
    kernels), no inexact lowering recorded."""
    data = M.op16(kind)
    res = check_tflite(f"exact_op16_{kind}", data, num=5, reference_kernels=kind != "sum_long")
    assert res.litert_mismatches == 0
    assert not tf2tosa.convert(data).graph.record.inexact


def test_inexact_lowering_is_reported() -> None:
    """A path that cannot be exact is named at conversion (warning), in graph meta (inspect) and in verify."""
    data = M.op16("avgpool_huge")
    model = tf2tosa.convert(data)
    inexact = model.graph.record.inexact
    assert inexact and inexact[0]["op"] == "AVERAGE_POOL_2D"
    assert any("AVERAGE_POOL_2D" in w and "not bit-exact" in w for w in model.graph.record.warnings)
    report = model.verify(reference_kernels=True)
    assert "inexact lowering: AVERAGE_POOL_2D" in str(report)


@pytest.mark.parametrize("shape", [(4, 6), (2, 12)])
@pytest.mark.slow
def test_reduce_prod_16x8(shape: tuple[int, int]) -> None:
    """int16x8 REDUCE_PROD: TFLite's 64-bit running product, rescaled each step, exact through multi-limb
    arithmetic; full-range inputs make the int64→int32 casts wrap, calibrated ones stay in range."""
    from tf2tosa.verify.litert import run_tflite_many

    data = M.reduce_prod_quant(shape=shape)
    model = tf2tosa.convert(data)
    g = model.graph
    q = g.inputs[0].type.quant
    rng = np.random.default_rng(0)
    xs = [rng.integers(-32768, 32768, shape).astype(np.int16) for _ in range(10)]
    xs += [np.clip(np.round(rng.uniform(-1.5, 1.5, shape) / q.s), -32768, 32767).astype(np.int16) for _ in range(10)]
    refs = run_tflite_many(data, [{"x0": x} for x in xs], reference_kernels=True)
    for x, r in zip(xs, refs):
        ref = list(r.values())[0]
        assert np.array_equal(model.run({g.inputs[0].name: x})[g.outputs[0].name].reshape(ref.shape), ref)
    check_tflite(f"exact_reduce_prod_16x8_{shape}", data, num=5, reference_kernels=True)


@pytest.mark.parametrize("kind", ["hard_swish", "neg"])
def test_16x8_float_fallback_ops(kind: str) -> None:
    """Ops TFLite cannot quantize to 16x8 (HARD_SWISH, NEG) in its mixed mode: float islands between DEQUANTIZE
    and QUANTIZE.  HARD_SWISH's island becomes one exact lookup table; results bit-exact vs BUILTIN_REF."""
    from tf2tosa.converter.tflite import load_tflite

    data = M.mixed16(kind)
    names = [op.name for op in load_tflite(data).topological_order()]
    assert f"tfl.{kind}" in names and "tfl.dequantize" in names  # the op really is a float island
    res = check_tflite(f"exact_mixed16_{kind}", data, num=5, reference_kernels=True, lo=-3.0, hi=3.0)
    assert res.litert_mismatches == 0


def test_16x8_hard_swish_island_every_code() -> None:
    """DEQUANTIZE → float HARD_SWISH → QUANTIZE over all 65,536 int16 codes: the fused table equals BUILTIN_REF
    (computing x·relu6(x+3)·(1/6) in float instead of the kernel's /6 moves a few codes by 1 LSB)."""
    from tf2tosa.verify.litert import run_tflite_many

    data = M.mixed16("hard_swish_alone")
    model = tf2tosa.convert(data)
    g = model.graph
    x = np.arange(-32768, 32768, dtype=np.int64).astype(np.int16).reshape(1, 256, 256, 1)
    ref = list(run_tflite_many(data, [{"x0": x}], reference_kernels=True)[0].values())[0]
    got = model.run({g.inputs[0].name: x})[g.outputs[0].name].reshape(ref.shape)
    assert np.array_equal(got, ref)


def test_split_v_empty_piece_tensorflow() -> None:
    """tf.SplitV with a zero-size piece feeding tf.ConcatV2 (TensorFlow frontend), against TF eager."""
    from tests.tfgen import Case, In, run_case, tf

    t = tf()

    def f(x: object) -> object:
        a, b, c = t.split(x, [3, 0, 5], axis=2)
        return t.concat([a * 2.0, b, c], axis=2), a + 1.0

    r = run_case(Case("split_v_empty_tf", f, [In((1, 4, 8))], "SplitV"))
    assert r.rel == 0.0 and r.mismatches == 0


def _c_round(x: float) -> int:
    """C's round() of a double (half away from zero, exact)."""
    f = abs(x)
    n = math.floor(f)
    q = n + (1 if f - n >= 0.5 else 0)
    return q if x >= 0 else -q


def test_double_rounding_of_the_product() -> None:
    """round((double)acc · s): when fl64(acc·s) lands on n + 1/2 although acc·s is below it, LiteRT rounds up;
    the limb arithmetic reproduces it (found by lattice search: acc ~ 2^38, s ~ 2^-24), and stays exact elsewhere."""
    import random

    from tests.near_half import find_near_half
    from tf2tosa.executor import run
    from tf2tosa.ir import DType, Graph, TensorType
    from tf2tosa.quant import exact_round as X
    from tf2tosa.tosa.builder import Builder

    random.seed(3)
    cases: list[tuple[float, int]] = []
    while len(cases) < 6:
        s = random.uniform(2.0**-24, 2.0**-23)
        cases += [(s, a) for a in find_near_half(s, 16384, 32767, 14)]
    for s, special in cases:
        rng = np.random.default_rng(special % 1000)
        accs = [special, -special, special + 1, 0, 1, -1] + [int(v) for v in rng.integers(-(1 << 38), 1 << 38, 40)]
        for double_product in (True, False):
            g = Graph()
            r = g.add_input("r", TensorType((len(accs), 1), DType.INT32))
            e = g.add_input("e", TensorType((len(accs), 1), DType.INT32))
            b = Builder(g)
            neg, limbs = X.limbs_of_wide(b, r, e)
            g.outputs = [X.round_scaled(b, neg, limbs, [s], cap=1 << 20, double_product=double_product)]
            rr = np.array([[(a + 128) >> 8] for a in accs], np.int64)
            ee = np.array([[a - 256 * ((a + 128) >> 8)] for a in accs], np.int64)
            got = np.asarray(next(iter(run(g, [rr.astype(np.int32), ee.astype(np.int32)]).values()))).reshape(-1)
            want = np.array([_c_round(float(a) * s) for a in accs])
            if double_product:
                assert np.array_equal(got, want), (s, accs[:3], got[:3], want[:3])
            else:  # the exact rational rounding differs exactly at the lattice-found inputs
                assert got[0] == want[0] - 1 and got[1] == want[1] + 1
