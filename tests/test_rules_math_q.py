"""Quantized (int8 / int16) rules of tfl_math and tfl_activation vs independent oracles.

Three layers, each checked against something it was not derived from:

1. Primitives: tflite_reference's gemmlowp arithmetic (srdhm, rdbpot, MultiplyByQuantizedMultiplier) against exact
   rational arithmetic; its fixed-point exp / reciprocal / log against float math; the TOSA emission of the
   same primitives (quant.elementwise.Fx, run in our executor) against tflite_reference.
2. Rules on hand-built one-op graphs with random quantization parameters, run in our executor, against numpy
   formulas written here from TFLite's kernels (add, sub, mul, squared difference, comparisons, relu family,
   prelu, max/min, select) or against tflite_reference's kernels (table-based ops, softmax) — every int8 code
   (pair), every int16 code for unary ops.
3. LiteRT's reference kernels (BUILTIN_REF) as the oracle: tflite_reference on every input code of TF-built models
   (the cached ONE_OP models and variants with other quantization ranges), and whole conversions of models the
   e2e suite lacks (quantized comparisons, select, fused activations) through tests.e2e.check_tflite.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from tests import softmax_reference as SR
from tf2tosa.converter.pipeline import legalize_graph
from tf2tosa.errors import UnsupportedOpsError
from tf2tosa.executor import run
from tf2tosa.ir import DType, Graph, QuantParams, TensorType, Value
from tf2tosa.quant import quantize_multiplier
from tf2tosa.quant import tflite_reference as R
from tf2tosa.quant.elementwise import Fx, get_reciprocal, log_x_ge_1, one_over_one_plus_x
from tf2tosa.tosa.builder import Builder

RNG = np.random.default_rng(20250611)
C8 = np.arange(-128, 128, dtype=np.int64)
C16 = np.arange(-32768, 32768, dtype=np.int64)
f32 = np.float32


def qp(s: float, zp: int = 0) -> QuantParams:
    return QuantParams((float(f32(s)),), (int(zp),))


def rand_q8(rng: np.random.Generator) -> tuple[float, int]:
    return float(f32(10 ** rng.uniform(-3, -1))), int(rng.integers(-128, 128))


def rand_q16(rng: np.random.Generator) -> tuple[float, int]:
    return float(f32(10 ** rng.uniform(-5, -3))), 0


# ------------------------------------------------------------------------------------------ graph helper
Feed = tuple[np.ndarray, DType, QuantParams | None]


def one_op(name: str, inputs: Sequence[Feed], out: TensorType | None, *, consts: Sequence[int] = (),
           **attrs: Any) -> np.ndarray:
    """Legalize a one-op tfl graph and run it in the executor; ``consts`` are operand indices made constant."""
    g = Graph()
    feeds: list[np.ndarray] = []
    vals: list[Value] = []
    for k, (arr, dt, q) in enumerate(inputs):
        if k in consts:
            vals.append(g.add_const(np.asarray(arr), dt, name=f"c{k}", quant=q, op_name="tfl.const"))
        else:
            vals.append(g.add_input(f"in{k}", TensorType(tuple(arr.shape), dt, q)))
            feeds.append(np.asarray(arr, dtype=dt.np_dtype()))
    if out is None:
        shape = np.broadcast_shapes(*(np.shape(i[0]) for i in inputs))
        out = TensorType(tuple(shape), DType.BOOL)
    o = g.add_op(name, vals, [out], attrs)
    g.outputs = list(o.results)
    legalize_graph(g)
    assert all(op.name.startswith("tosa.") for op in g.topological_order())
    return np.asarray(list(run(g, feeds).values())[0]).astype(np.int64)


def i8(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=np.int8)


def i16(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=np.int16)


def mbqm_ref(x: np.ndarray, scale: float) -> np.ndarray:
    q, e = quantize_multiplier(scale)
    return R.mbqm(x, q, e)


# ============================================================================== 1. primitives
def _srdhm_exact(a: int, b: int) -> int:
    """round-half-up of a·b / 2^31 (the nudge makes gemmlowp's truncating division exactly this)."""
    return math.floor(Fraction(a * b, 1 << 31) + Fraction(1, 2))


def _rdbpot_exact(x: int, e: int) -> int:
    v = Fraction(x, 1 << e)
    return int(math.copysign(math.floor(abs(v) + Fraction(1, 2)), x)) if x else 0


def test_gemmlowp_primitives_vs_rationals() -> None:
    a = RNG.integers(-(1 << 31), 1 << 31, 3000)
    b = RNG.integers(-(1 << 31), 1 << 31, 3000)
    a[:4] = [R.I32_MIN, R.I32_MIN, 5, -5]
    b[:4] = [R.I32_MIN + 1, 7, 1 << 30, 1 << 30]  # includes exact ties of both signs
    got = R.srdhm(a, b)
    assert all(int(g) == _srdhm_exact(int(x), int(y)) for g, x, y in zip(got, a, b))
    assert int(R.srdhm(R.I32_MIN, R.I32_MIN)) == R.I32_MAX
    x = RNG.integers(-(1 << 31), 1 << 31, 3000)
    e = RNG.integers(0, 31, 3000)
    assert all(int(g) == _rdbpot_exact(int(v), int(k)) for g, v, k in zip(R.rdbpot(x, e), x, e))
    # ties: -5/2 -> -3, 5/2 -> 3, -6/4 -> -2
    assert list(R.rdbpot([-5, 5, -6, 6], [1, 1, 2, 2])) == [-3, 3, -2, 2]


def test_fixed_point_functions_approximate_their_math() -> None:
    q5 = RNG.integers(-(31 << 26), 0, 2000)
    got = R.exp_on_negative_values(q5, 5) / 2.0**31
    np.testing.assert_allclose(got, np.exp(q5 / 2.0**26), atol=5e-7)  # gemmlowp: ~2e-7
    a = RNG.integers(0, R.I32_MAX, 2000)
    np.testing.assert_allclose(R.one_over_one_plus_x_for_x_in_0_1(a) / 2.0**31, 1 / (1 + a / 2.0**31), atol=1e-8)
    s = RNG.integers(1 << 19, 1 << 30, 2000)  # Q12.19 sums >= 1
    np.testing.assert_allclose(R.log_x_for_x_greater_than_or_equal_to_1(s, 5, 12) / 2.0**26, np.log(s / 2.0**19),
                               atol=1e-6)
    r, nbou = R.get_reciprocal(s, 12)
    np.testing.assert_allclose(r / 2.0**31 * 2.0 ** (-nbou.astype(np.float64)), 2.0**19 / s, rtol=1e-8)


def _run_fx(build: Callable[[Fx, Value], Value], x: np.ndarray) -> np.ndarray:
    g = Graph()
    v = g.add_input("x", TensorType(tuple(x.shape), DType.INT32))
    b = Builder(g, fold=False)
    g.outputs = [build(Fx(b, x.ndim), v)]
    return np.asarray(list(run(g, [x.astype(np.int32)]).values())[0]).astype(np.int64)


@pytest.mark.parametrize("case", ["rdbpot", "sat_shl", "sat_shl_var", "half_sum", "one_over", "reciprocal", "log"])
def test_fx_ops_match_tflite_ref(case: str) -> None:
    """The TOSA spelling of each gemmlowp primitive gives tflite_reference's int32 results on random operands."""
    rng = np.random.default_rng(7)
    big = rng.integers(-(1 << 31) + 1, 1 << 31, (1, 4000))
    pos = rng.integers(1, 1 << 31, (1, 4000))
    cases: dict[str, tuple[Callable[[Fx, Value], Value], np.ndarray, np.ndarray]] = {
        "rdbpot": (lambda fx, v: fx.rdbpot(v, 7), big, R.rdbpot(big, 7)),
        "sat_shl": (lambda fx, v: fx.sat_shl(v, 3), big, R.sat_shl(big, 3)),
        "sat_shl_var": (lambda fx, v: fx.sat_shl(v, fx.b.binary("BITWISE_AND", v, fx.c(15))), big,
                        R.sat_shl(big, big & 15)),
        "half_sum": (lambda fx, v: fx.rounding_half_sum(v, 1805811301), big, R.rounding_half_sum(big, 1805811301)),
        "one_over": (lambda fx, v: one_over_one_plus_x(fx, v), pos, R.one_over_one_plus_x_for_x_in_0_1(pos)),
        "reciprocal": (lambda fx, v: fx.add(get_reciprocal(fx, v, 12)[0], 0), pos, R.get_reciprocal(pos, 12)[0]),
        "log": (lambda fx, v: log_x_ge_1(fx, v, 5, 12), pos >> 1, R.log_x_for_x_greater_than_or_equal_to_1(pos >> 1,
                                                                                                          5, 12)),
    }
    build, x, want = cases[case]
    np.testing.assert_array_equal(_run_fx(build, x), want)


#: the inputs of one_over_one_plus_x that matter most for its select-free form: a = 0 (the only saturating case of
#: the final doubling), its neighbours, the top of the range, and the half_den extremes of RoundingHalfSum
A_EDGES = np.array([0, 1, 2, 3, 4, 5, (1 << 30) - 1, 1 << 30, (1 << 30) + 1, (1 << 31) - 3, (1 << 31) - 2,
                    (1 << 31) - 1], dtype=np.int64)


def test_one_over_one_plus_x_without_selects_matches_tflite_ref() -> None:
    """``in_0_1=True`` (no SELECT: the saturations it drops are proven unreachable) equals tflite_reference's
    one_over_one_plus_x_for_x_in_0_1 on the edges and 2^20 random a in [0, 2^31); GetReciprocal's a = 0 case
    (a power-of-two sum) included.  Would fail if the last doubling wrapped instead of saturating at a = 0."""
    a = np.concatenate([A_EDGES, np.random.default_rng(11).integers(0, 1 << 31, 1 << 20)]).reshape(1, -1)
    got = _run_fx(lambda fx, v: one_over_one_plus_x(fx, v, in_0_1=True), a)
    np.testing.assert_array_equal(got, R.one_over_one_plus_x_for_x_in_0_1(a))
    assert got[0, 0] == R.I32_MAX  # the saturated case is really reached
    pot = np.array([[1 << k for k in range(31)] + [3, 5, (1 << 31) - 1]], dtype=np.int64)
    g = Graph()
    v = g.add_input("x", TensorType(pot.shape, DType.INT32))
    b = Builder(g, fold=False)
    fx = Fx(b, 2)
    g.outputs = list(get_reciprocal(fx, v, 12))
    got_r, got_n = (np.asarray(o).astype(np.int64) for o in run(g, [pot.astype(np.int32)]).values())
    want_r, want_n = R.get_reciprocal(pot, 12)
    np.testing.assert_array_equal(got_r, want_r)
    np.testing.assert_array_equal(got_n, want_n)


@pytest.mark.slow
def test_one_over_one_plus_x_without_selects_exhaustive() -> None:
    """The proof behind ``in_0_1``: on every a in [0, 2^31) the select-free TOSA form equals tflite_reference
    (2^31 values in chunks of 2^24)."""
    chunk = 1 << 24
    for start in range(0, 1 << 31, chunk):
        a = np.arange(start, start + chunk, dtype=np.int64).reshape(1, -1)
        got = _run_fx(lambda fx, v: one_over_one_plus_x(fx, v, in_0_1=True), a)
        np.testing.assert_array_equal(got, R.one_over_one_plus_x_for_x_in_0_1(a), err_msg=f"chunk at {start}")


# =================================================== 2. rules on hand-built graphs vs numpy formulas
def _add_ref(x: np.ndarray, y: np.ndarray, q1: tuple[float, int], q2: tuple[float, int], qo: tuple[float, int],
             bits: int, sub: bool, act: tuple[int, int]) -> np.ndarray:
    """TFLite AddElementwise / SubElementwise (left shift 20 / 15)."""
    ls = 20 if bits == 8 else 15
    twice = 2.0 * max(float(f32(q1[0])), float(f32(q2[0])))
    a = mbqm_ref((x - q1[1]) << ls, float(f32(q1[0])) / twice)
    c = mbqm_ref((y - q2[1]) << ls, float(f32(q2[0])) / twice)
    r = mbqm_ref(a - c if sub else a + c, twice / ((1 << ls) * float(f32(qo[0])))) + qo[1]
    return np.clip(r, *act)


def _pairs(bits: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if bits == 8:
        xs, ys = np.meshgrid(C8, C8, indexing="ij")
        return xs.reshape(1, 256, 256, 1), ys.reshape(1, 256, 256, 1)
    return rng.integers(-32768, 32768, (1, 64, 64, 4)), rng.integers(-32768, 32768, (1, 64, 64, 4))


def _act_range(act: str, q: tuple[float, int], bits: int) -> tuple[int, int]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    bounds = {"NONE": (None, None), "RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}[act]

    def qz(f: float) -> int:
        r = f32(f) / f32(q[0])
        return q[1] + int(math.copysign(math.floor(abs(float(r)) + 0.5), float(r)))

    a = lo if bounds[0] is None else max(lo, qz(bounds[0]))
    b = hi if bounds[1] is None else min(hi, qz(bounds[1]))
    return a, b


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("opname", ["add", "sub"])
@pytest.mark.parametrize("act", ["NONE", "RELU6"])
def test_add_sub(bits: int, opname: str, act: str) -> None:
    rng = np.random.default_rng(bits + len(opname) + len(act))
    dt, rq = (DType.INT8, rand_q8) if bits == 8 else (DType.INT16, rand_q16)
    for _ in range(3):
        q1, q2 = rq(rng), rq(rng)
        qo = (float(f32((q1[0] + q2[0]) * rng.uniform(0.5, 1.5))), q1[1] // 2 if bits == 8 else 0)
        x, y = _pairs(bits, rng)
        cast = i8 if bits == 8 else i16
        got = one_op(f"tfl.{opname}", [(cast(x), dt, qp(*q1)), (cast(y[:, :1] if bits == 16 else y), dt, qp(*q2))],
                     TensorType(x.shape, dt, qp(*qo)), fused_activation_function=act, pot_scale_int16=False)
        yy = y[:, :1] if bits == 16 else y
        want = _add_ref(x, yy, q1, q2, qo, bits, opname == "sub", _act_range(act, qo, bits))
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bits", [8, 16])
def test_mul(bits: int) -> None:
    rng = np.random.default_rng(3 + bits)
    dt, rq, cast = (DType.INT8, rand_q8, i8) if bits == 8 else (DType.INT16, rand_q16, i16)
    for trial in range(3):
        q1, q2 = rq(rng), rq(rng)
        if trial == 0 and bits == 8:
            q1, q2 = (q1[0], 0), (q2[0], 0)  # the direct i8 x i8 -> i32 MUL
        qo = (float(f32(q1[0] * q2[0] * (127 if bits == 8 else 32767) * rng.uniform(0.3, 1.2))),
              int(rng.integers(-20, 20)) if bits == 8 else 0)
        x, y = _pairs(bits, rng)
        got = one_op("tfl.mul", [(cast(x), dt, qp(*q1)), (cast(y), dt, qp(*q2))], TensorType(x.shape, dt, qp(*qo)),
                     fused_activation_function="RELU" if trial == 2 else "NONE")
        scale = float(f32(f32(f32(q1[0]) * f32(q2[0])) / f32(qo[0])))
        want = np.clip(mbqm_ref((x - q1[1]) * (y - q2[1]), scale) + qo[1], *_act_range(
            "RELU" if trial == 2 else "NONE", qo, bits))
        np.testing.assert_array_equal(got, want)


def test_squared_difference_int8() -> None:
    rng = np.random.default_rng(11)
    for _ in range(3):
        q1, q2 = rand_q8(rng), rand_q8(rng)
        qo = (float(f32(max(q1[0], q2[0]) ** 2 * 255 * rng.uniform(0.5, 2))), -128)
        x, y = _pairs(8, rng)
        got = one_op("tfl.squared_difference", [(i8(x), DType.INT8, qp(*q1)), (i8(y), DType.INT8, qp(*q2))],
                     TensorType(x.shape, DType.INT8, qp(*qo)))
        twice = 2.0 * max(float(f32(q1[0])), float(f32(q2[0])))
        d = mbqm_ref((x - q1[1]) << 7, float(f32(q1[0])) / twice) - mbqm_ref((y - q2[1]) << 7,
                                                                             float(f32(q2[0])) / twice)
        want = np.clip(mbqm_ref(d * d, twice * twice / (16384 * float(f32(qo[0])))) + qo[1], -128, 127)
        np.testing.assert_array_equal(got, want)


def test_div_int8_table() -> None:
    rng = np.random.default_rng(5)
    q1, q2, qo = rand_q8(rng), (0.01, -128), (0.05, -20)
    x, y = _pairs(8, rng)
    got = one_op("tfl.div", [(i8(x), DType.INT8, qp(*q1)), (i8(y), DType.INT8, qp(*q2))],
                 TensorType(x.shape, DType.INT8, qp(*qo)), fused_activation_function="NONE")
    want = R.div_i8(x, y, *q1, *q2, *qo)
    ok = y != q2[1]  # TFLite rejects a zero divisor
    np.testing.assert_array_equal(got[ok], want[ok])
    # sanity of the kernel itself: close to the real quotient where it is representable
    real = (x - q1[1]) * q1[0] / np.where(ok, (y - q2[1]) * q2[0], 1) / qo[0] + qo[1]
    inside = ok & (real > -127) & (real < 126)
    assert np.abs(want[inside] - real[inside]).max() <= 1.0


@pytest.mark.parametrize("opname", ["maximum", "minimum"])
@pytest.mark.parametrize("bits", [8, 16])
def test_max_min_raw_codes(opname: str, bits: int) -> None:
    rng = np.random.default_rng(2)
    dt, cast = (DType.INT8, i8) if bits == 8 else (DType.INT16, i16)
    q = rand_q8(rng) if bits == 8 else rand_q16(rng)
    x, y = _pairs(bits, rng)
    got = one_op(f"tfl.{opname}", [(cast(x), dt, qp(*q)), (cast(y), dt, qp(*q))], TensorType(x.shape, dt, qp(*q)))
    np.testing.assert_array_equal(got, np.maximum(x, y) if opname == "maximum" else np.minimum(x, y))


@pytest.mark.parametrize("opname,fn", [("equal", np.equal), ("not_equal", np.not_equal), ("greater", np.greater),
                                       ("greater_equal", np.greater_equal), ("less", np.less),
                                       ("less_equal", np.less_equal)])
def test_comparisons_int8(opname: str, fn: Callable[[Any, Any], Any]) -> None:
    """ComparisonWithScaling: ((x - zp) << 8) rescaled by the input's own scale, then compared."""
    rng = np.random.default_rng(len(opname))
    for _ in range(3):
        q1, q2 = rand_q8(rng), rand_q8(rng)
        if _ == 0:
            q2 = q1
        x, y = _pairs(8, rng)
        got = one_op(f"tfl.{opname}", [(i8(x), DType.INT8, qp(*q1)), (i8(y), DType.INT8, qp(*q2))], None)
        a = mbqm_ref((x - q1[1]) << 8, float(f32(q1[0])))
        c = mbqm_ref((y - q2[1]) << 8, float(f32(q2[0])))
        np.testing.assert_array_equal(got, fn(a, c).astype(np.int64))


def test_select_raw_codes() -> None:
    rng = np.random.default_rng(9)
    q = rand_q8(rng)
    cond = rng.integers(0, 2, (2, 3, 5)).astype(bool)
    x, y = rng.integers(-128, 128, (2, 3, 5)), rng.integers(-128, 128, (3, 5))
    got = one_op("tfl.select_v2", [(cond, DType.BOOL, None), (i8(x), DType.INT8, qp(*q)), (i8(y), DType.INT8, qp(*q))],
                 TensorType((2, 3, 5), DType.INT8, qp(*q)))
    np.testing.assert_array_equal(got, np.where(cond, x, y))


@pytest.mark.parametrize("bits", [8, 16])
def test_neg(bits: int) -> None:
    """No TFLite kernel: NEGATE around the zero points (same scale), else -(x - zp) requantized."""
    dt, cast, codes = (DType.INT8, i8, C8) if bits == 8 else (DType.INT16, i16, C16)
    q = (0.02, 5) if bits == 8 else (1e-4, 0)
    x = codes.reshape(1, -1)
    got = one_op("tfl.neg", [(cast(x), dt, qp(*q))], TensorType(x.shape, dt, qp(*q)))
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    np.testing.assert_array_equal(got, np.clip(2 * q[1] - x, lo, hi))
    qo = (q[0] * 2, -3 if bits == 8 else 0)
    got = one_op("tfl.neg", [(cast(x), dt, qp(*q))], TensorType(x.shape, dt, qp(*qo)))
    np.testing.assert_array_equal(got, np.clip(mbqm_ref(q[1] - x, q[0] / qo[0]) + qo[1], lo, hi))


# unary ops: (tfl op, attrs, bits) -> oracle(codes, s_in, zp_in, s_out, zp_out)
def _log_oracle(bits: int) -> Callable[..., np.ndarray]:
    def fn(c: np.ndarray, si: float, zi: int, so: float, zo: int) -> np.ndarray:
        g = R.log_lut_fn(so, zo, bits)
        if bits == 8:
            return R.lut_populate_i8(g, si, zi, so, zo)[c + 128]
        return R.lut_lookup_i16(c, R.lut_populate_i16(g, si, zi, so, zo))
    return fn


def _relu_oracle(act: str, bits: int) -> Callable[..., np.ndarray]:
    def fn(c: np.ndarray, si: float, zi: int, so: float, zo: int) -> np.ndarray:
        v = mbqm_ref(c - zi, float(f32(f32(si) / f32(so)))) + zo
        lo, hi = _act_range(act if act != "RELU_0_TO_1" else "NONE", (so, zo), bits)
        if act == "RELU_0_TO_1":
            lo, hi = max(lo, zo), min(hi, zo + round(float(f32(1) / f32(so))))
        return np.clip(v, lo, hi)
    return fn


UNARY8: dict[str, tuple[str, dict[str, Any], Callable[..., np.ndarray]]] = {
    "exp": ("tfl.exp", {}, lambda c, *q: R.lut_populate_i8(R.exp32, *q)[c + 128]),
    "log": ("tfl.log", {}, _log_oracle(8)),
    "rsqrt": ("tfl.rsqrt", {}, R.rsqrt_i8),
    "sqrt": ("tfl.sqrt", {}, R.sqrt_i8),
    "abs": ("tfl.abs", {}, lambda c, si, zi, so, zo: R.abs_q(c, si, zi, so, zo, 8)),
    "logistic": ("tfl.logistic", {}, lambda c, *q: R.lut_populate_i8(R.logistic32, *q)[c + 128]),
    "tanh": ("tfl.tanh", {}, lambda c, *q: R.lut_populate_i8(R.tanh32, *q)[c + 128]),
    "gelu": ("tfl.gelu", {"approximate": False}, lambda c, *q: R.lut_populate_i8(R.gelu32, *q)[c + 128]),
    "gelu_approx": ("tfl.gelu", {"approximate": True}, lambda c, *q: R.lut_populate_i8(R.gelu_approx32, *q)[c + 128]),
    "elu": ("tfl.elu", {}, lambda c, *q: R.lut_populate_i8(R.elu32, *q)[c + 128]),
    "hard_swish": ("tfl.hard_swish", {}, R.hard_swish_i8),
    "leaky_relu": ("tfl.leaky_relu", {"alpha": float(f32(0.3))},
                   lambda c, si, zi, so, zo: R.leaky_relu_q(c, si, zi, so, zo, 0.3, 8)),
    "leaky_relu_neg": ("tfl.leaky_relu", {"alpha": float(f32(-0.5))},
                       lambda c, si, zi, so, zo: R.leaky_relu_q(c, si, zi, so, zo, -0.5, 8)),
    "relu": ("tfl.relu", {}, _relu_oracle("RELU", 8)),
    "relu6": ("tfl.relu6", {}, _relu_oracle("RELU6", 8)),
    "relu_n1_to_1": ("tfl.relu_n1_to_1", {}, _relu_oracle("RELU_N1_TO_1", 8)),
    "relu_0_to_1": ("tfl.relu_0_to_1", {}, _relu_oracle("RELU_0_TO_1", 8)),
}


@pytest.mark.parametrize("name", sorted(UNARY8))
def test_unary_int8_every_code(name: str) -> None:
    opname, attrs, oracle = UNARY8[name]
    rng = np.random.default_rng(len(name))
    x = C8.reshape(1, 1, 256)
    for trial in range(3):
        (si, zi), (so, zo) = rand_q8(rng), rand_q8(rng)
        if trial == 0 and name.startswith("relu"):
            so, zo = si, zi  # unchanged quantization: CLAMP only
        got = one_op(opname, [(i8(x), DType.INT8, qp(si, zi))], TensorType(x.shape, DType.INT8, qp(so, zo)), **attrs)
        np.testing.assert_array_equal(got.ravel(), oracle(C8, si, zi, so, zo), err_msg=f"{name} {si} {zi} {so} {zo}")


def _rsqrt16(c: np.ndarray, si: float, zi: int, so: float, zo: int) -> np.ndarray:
    return R.lut_lookup_i16(c, R.lut_populate_i16(R.rsqrt16_lut_fn(so), si, zi, so, zo))


UNARY16: dict[str, tuple[str, dict[str, Any], Callable[..., np.ndarray]]] = {
    "exp": ("tfl.exp", {}, lambda c, *q: R.lut_lookup_i16(c, R.lut_populate_i16(R.exp32, *q))),
    "log": ("tfl.log", {}, _log_oracle(16)),
    "rsqrt": ("tfl.rsqrt", {}, _rsqrt16),
    "gelu": ("tfl.gelu", {"approximate": False}, lambda c, *q: R.lut_lookup_i16(c, R.lut_populate_i16(R.gelu32, *q))),
    "abs": ("tfl.abs", {}, lambda c, si, zi, so, zo: R.abs_q(c, si, zi, so, zo, 16)),
    "logistic": ("tfl.logistic", {}, lambda c, si, zi, so, zo: R.logistic_tanh_i16(c, si, False)),
    "tanh": ("tfl.tanh", {}, lambda c, si, zi, so, zo: R.logistic_tanh_i16(c, si, True)),
    "leaky_relu": ("tfl.leaky_relu", {"alpha": float(f32(0.2))},
                   lambda c, si, zi, so, zo: R.leaky_relu_q(c, si, zi, so, zo, 0.2, 16)),
    "relu": ("tfl.relu", {}, _relu_oracle("RELU", 16)),
    "relu6": ("tfl.relu6", {}, _relu_oracle("RELU6", 16)),
}


@pytest.mark.parametrize("name", sorted(UNARY16))
def test_unary_int16_every_code(name: str) -> None:
    opname, attrs, oracle = UNARY16[name]
    rng = np.random.default_rng(100 + len(name))
    x = C16.reshape(1, 256, 256)
    for trial in range(2):
        (si, _), (so, _) = rand_q16(rng), rand_q16(rng)
        if name in ("logistic", "tanh"):
            so = 2.0**-15
            si = 2.0**-12 if trial == 0 else si  # the power-of-two kernel variant, then a general scale
        if trial == 1 and name == "abs":
            so = si  # no rescale: saturating copy
        got = one_op(opname, [(i16(x), DType.INT16, qp(si))], TensorType(x.shape, DType.INT16, qp(so)), **attrs)
        np.testing.assert_array_equal(got.ravel(), oracle(C16, si, 0, so, 0), err_msg=f"{name} {si} {so}")


def test_prelu_int8() -> None:
    rng = np.random.default_rng(4)
    x = np.tile(C8, 6).reshape(1, 16, 32, 3)
    alpha = rng.integers(-128, 128, (1, 1, 3))
    (si, zi), (sa, za), (so, zo) = rand_q8(rng), (0.004, 3), rand_q8(rng)
    got = one_op("tfl.prelu", [(i8(x), DType.INT8, qp(si, zi)), (i8(alpha), DType.INT8, qp(sa, za))],
                 TensorType(x.shape, DType.INT8, qp(so, zo)), consts=(1,))
    v = x - zi
    pos = mbqm_ref(v, float(f32(f32(si) / f32(so))))
    neg = mbqm_ref(v * (alpha - za), float(f32(f32(f32(si) * f32(sa)) / f32(so))))
    np.testing.assert_array_equal(got, np.clip(np.where(v >= 0, pos, neg) + zo, -128, 127))


@pytest.mark.parametrize("depth", [1, 3, 16, 200])
def test_softmax_int8(depth: int) -> None:
    rng = np.random.default_rng(depth)
    for s_in in (0.0235, 0.1, 0.002):
        x = rng.integers(-128, 128, (2, 40, depth))
        x[0, :8] = rng.integers(-128, -120, (8, depth))  # near-uniform rows
        x[1, :8, 0] = 127  # one dominant entry
        got = one_op("tfl.softmax", [(i8(x), DType.INT8, qp(s_in))], TensorType(x.shape, DType.INT8,
                                                                                  qp(1 / 256, -128)), beta=1.0)
        np.testing.assert_array_equal(got, SR.softmax_i8(x, s_in))


@pytest.mark.parametrize("depth", [1, 5, 64])
def test_softmax_int16(depth: int) -> None:
    rng = np.random.default_rng(depth + 50)
    for s_in in (9.15e-5, 6e-4):
        x = rng.integers(-32768, 32768, (3, 30, depth))
        x[0, :10] = rng.integers(-200, 200, (10, depth))
        got = one_op("tfl.softmax", [(i16(x), DType.INT16, qp(s_in))], TensorType(x.shape, DType.INT16,
                                                                                    qp(2.0**-15)), beta=1.0)
        np.testing.assert_array_equal(got, SR.softmax_i16(x, s_in))


@pytest.mark.parametrize("depth", [1, 4, 33])
def test_log_softmax_int8(depth: int) -> None:
    rng = np.random.default_rng(depth + 9)
    for s_in in (0.0235, 0.3, 0.004):
        x = rng.integers(-128, 128, (3, 30, depth))
        x[0, :10] = rng.integers(120, 128, (10, depth))
        x[1, :10, 0] = 127
        got = one_op("tfl.log_softmax", [(i8(x), DType.INT8, qp(s_in))], TensorType(x.shape, DType.INT8,
                                                                                      qp(16 / 256, 127)))
        np.testing.assert_array_equal(got, SR.log_softmax_i8(x, s_in))


@pytest.mark.parametrize("case", ["add_pot_int16", "div_int16", "softmax_bad_out", "prelu_int16", "cmp_int16"])
def test_unsupported_reasons(case: str) -> None:
    q16, q8 = qp(2.0**-12), qp(0.01, 3)
    x16, x8 = i16(np.zeros((1, 4))), i8(np.zeros((1, 4)))
    t16, t8 = TensorType((1, 4), DType.INT16, q16), TensorType((1, 4), DType.INT8, q8)
    calls: dict[str, tuple[str, list[Feed], TensorType | None, dict[str, Any], str]] = {
        "add_pot_int16": ("tfl.add", [(x16, DType.INT16, q16)] * 2, t16, {"pot_scale_int16": True}, "power-of-two"),
        "div_int16": ("tfl.div", [(x16, DType.INT16, q16)] * 2, t16, {}, "int16"),
        "softmax_bad_out": ("tfl.softmax", [(x8, DType.INT8, q8)], t8, {"beta": 1.0}, "1/256"),
        "prelu_int16": ("tfl.prelu", [(x16, DType.INT16, q16)] * 2, t16, {}, "int8 only"),
        "cmp_int16": ("tfl.greater", [(x16, DType.INT16, q16)] * 2, None, {}, "int8 only"),
    }
    name, ins, out, attrs, reason = calls[case]
    with pytest.raises(UnsupportedOpsError, match=reason):
        one_op(name, ins, out, **attrs)


# ===================================================================== 3. LiteRT reference kernels
def _litert() -> Any:
    pytest.importorskip("ai_edge_litert")
    from tf2tosa.verify.litert import run_tflite

    return run_tflite


def _op_quant(tflite: bytes) -> tuple[str, tuple[float, int], tuple[float, int]]:
    from tf2tosa.converter.tflite import load_tflite

    g = load_tflite(tflite)
    op = next(o for o in g.topological_order() if o.name not in ("tfl.const", "tfl.quantize", "tfl.dequantize"))
    qi, qo = op.operands[0].type.quant, op.results[0].type.quant
    assert qi is not None and qo is not None
    return op.name, (qi.s, qi.zp), (qo.s, qo.zp)


def _every_code_litert(tflite: bytes, bits: int, codes: np.ndarray) -> tuple[np.ndarray, tuple[float, int],
                                                                               tuple[float, int]]:
    """LiteRT BUILTIN_REF on every code (input resized to [1, 1, 1, N]); int16x8 models have float I/O."""
    run_tflite = _litert()
    from tf2tosa.verify.litert import input_details

    _, qi, qo = _op_quant(tflite)
    d = input_details(tflite)[0]
    if d["dtype"] == "float32":
        x: np.ndarray = ((codes - qi[1]) * np.float64(qi[0])).astype(np.float32)
    else:
        x = codes.astype(d["dtype"])
    y = list(run_tflite(tflite, [x.reshape(1, 1, 1, -1)], reference_kernels=True).values())[0].reshape(-1)
    if y.dtype == np.float32:
        y = np.round(y.astype(np.float64) / qo[0]).astype(np.int64) + qo[1]
    return y.astype(np.int64), qi, qo


ORACLE8 = {k: v[2] for k, v in UNARY8.items()}
ORACLE16 = {k: v[2] for k, v in UNARY16.items()}
LITERT_UNARY = [("exp", "int8"), ("log", "int8"), ("rsqrt", "int8"), ("sqrt", "int8"), ("abs", "int8"),
                ("logistic", "int8"), ("tanh", "int8"), ("gelu", "int8"), ("gelu/approximate", "int8"),
                ("hard_swish", "int8"), ("leaky_relu", "int8"), ("relu", "int8"), ("relu6", "int8"),
                ("relu_n1_to_1", "int8"), ("exp", "int16x8"), ("log", "int16x8"), ("rsqrt", "int16x8"),
                ("gelu", "int16x8"), ("abs", "int16x8"), ("logistic", "int16x8"), ("tanh", "int16x8"),
                ("leaky_relu", "int16x8"), ("relu", "int16x8"), ("relu6", "int16x8")]


def _oracle(name: str, quant: str) -> Callable[..., np.ndarray]:
    key = {"gelu/approximate": "gelu_approx"}.get(name, name)
    if name == "leaky_relu":
        bits = 8 if quant == "int8" else 16
        return lambda c, si, zi, so, zo: R.leaky_relu_q(c, si, zi, so, zo, 0.2, bits)
    return (ORACLE8 if quant == "int8" else ORACLE16)[key]


@pytest.mark.parametrize("name,quant", LITERT_UNARY, ids=[f"{n}-{q}" for n, q in LITERT_UNARY])
def test_tflite_ref_kernels_vs_litert(name: str, quant: str) -> None:
    """tflite_reference's kernels (the tables' source) equal LiteRT BUILTIN_REF on every input code."""
    pytest.importorskip("tensorflow")
    from tests.modelgen import ONE_OP_MODELS

    tflite = ONE_OP_MODELS[name](quant=quant)
    bits = 8 if quant == "int8" else 16
    codes = C8 if bits == 8 else C16
    if name == "rsqrt" and bits == 16:
        codes = C16[C16 >= 0]  # LiteRT rejects negative RSQRT inputs
    y, qi, qo = _every_code_litert(tflite, bits, codes)
    np.testing.assert_array_equal(_oracle(name, quant)(codes, *qi, *qo), y)


# models with other quantization ranges (the kernels' float32 scale arithmetic differs per scale)
RANGED = [("sqrt", (0.0, 9.0)), ("logistic", (-9.0, 9.0)), ("tanh", (-0.5, 0.5)), ("hard_swish", (-12.0, 5.0)),
          ("log", (0.01, 30.0)), ("exp", (-6.0, 0.5)), ("gelu", (-1.0, 6.0)), ("rsqrt", (0.5, 60.0)),
          ("leaky_relu", (-40.0, 3.0))]


def _ranged_model(name: str, lo: float, hi: float, quant: str) -> bytes:
    from tests.modelgen import _tf, b_unary, convert

    fn, specs = b_unary(_tf(), np.random.default_rng(0), op=name, shape=(1, 4, 4, 3))
    return convert(fn, specs, quant=quant, ranges=(lo, hi))


@pytest.mark.parametrize("name,rng_", RANGED, ids=[n for n, _ in RANGED])
def test_tflite_ref_kernels_other_ranges(name: str, rng_: tuple[float, float]) -> None:
    pytest.importorskip("tensorflow")
    from tests.modelgen import b_unary, cached

    for quant in ("int8", "int16x8"):
        if quant == "int16x8" and name in ("sqrt", "hard_swish"):
            continue  # the converter has no 16x8 kernel for these
        tflite = cached(f"qrange_{name}/{quant}", _ranged_model, {"name": name, "lo": rng_[0], "hi": rng_[1],
                                                                   "quant": quant}, extra=(b_unary,))
        bits = 8 if quant == "int8" else 16
        codes = C8 if bits == 8 else C16
        if name == "rsqrt" and bits == 16:
            codes = C16[C16 >= 0]
        y, qi, qo = _every_code_litert(tflite, bits, codes)
        np.testing.assert_array_equal(_oracle(name, quant)(codes, *qi, *qo), y, err_msg=f"{name}/{quant} {qi} {qo}")


def _model_fn(kind: str) -> tuple[Callable[..., Any], list[tuple[int, ...]]]:
    from tests.modelgen import _tf

    tf = _tf()
    two: list[tuple[int, ...]] = [(1, 8, 8, 4), (1, 8, 8, 4)]
    fns: dict[str, Callable[..., Any]] = {
        "greater": tf.math.greater, "greater_equal": tf.math.greater_equal, "less": tf.math.less,
        "less_equal": tf.math.less_equal, "equal": tf.math.equal, "not_equal": tf.math.not_equal,
        "select": lambda x, y: tf.where(x > y, x, y * 0.5),
        "add_relu6": lambda x, y: tf.nn.relu6(x * 4.0 + y * 4.0),
        "mul_relu": lambda x, y: tf.nn.relu(x * y),
        "sub_relu": lambda x, y: tf.nn.relu(x - y),
        "add_relu_n1": lambda x, y: tf.clip_by_value(x + y, -1.0, 1.0),
    }
    return fns[kind], two


def _kind_model(kind: str, quant: str) -> bytes:
    from tests.modelgen import convert

    fn, specs = _model_fn(kind)
    return convert(fn, list(specs), quant=quant, ranges=(-2.0, 2.0))


KINDS = [("greater", "int8"), ("greater_equal", "int8"), ("less", "int8"), ("less_equal", "int8"),
         ("equal", "int8"), ("not_equal", "int8"), ("select", "int8"), ("add_relu6", "int8"), ("mul_relu", "int8"),
         ("sub_relu", "int8"), ("add_relu_n1", "int8"), ("add_relu6", "int16x8"), ("mul_relu", "int16x8")]


@pytest.mark.parametrize("kind,quant", KINDS, ids=[f"{k}-{q}" for k, q in KINDS])
def test_models_vs_litert(kind: str, quant: str) -> None:
    """Quantized comparisons, select and fused activations through the whole chain (tests.e2e.check_tflite):
    0 mismatches vs BUILTIN_REF, tosa-opt validation, the Arm reference model bit-exact."""
    pytest.importorskip("tensorflow")
    from tests.e2e import check_tflite
    from tests.modelgen import cached

    tflite = cached(f"qmath_{kind}/{quant}", _kind_model, {"kind": kind, "quant": quant}, extra=(_model_fn,))
    res = check_tflite(f"qmath_{kind}/{quant}", tflite, reference_kernels=True, lo=-2.0, hi=2.0)
    # every output was compared in the integer domain (int16x8 models have float I/O: their DEQUANTIZEd outputs
    # are compared in LSB), so "0 mismatches" is a statement about integers, not a float tolerance
    assert res.int_elements > 0 and res.float_elements == 0, res
    assert res.litert_mismatches == 0
