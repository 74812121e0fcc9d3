"""Floating-point compliance checks (tf2tosa.executor.compliance) and our float kernels against them.

The checks are unit-tested on hand-made values at the bound edges; then every float op of our executor is run
in normal mode and checked against its own fp64 precise mode (the spec's ``operation_fp64``) with the bound
``op_accuracy`` names.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from tests.executor_testing import Const, GraphBuilder, In
from tf2tosa.executor import compliance as cp
from tf2tosa.executor import run
from tf2tosa.ir.types import DType as D
from tf2tosa.tosa.optable import OPS

ULP1 = 2.0 ** -23


def test_format_constants() -> None:
    assert cp.normal_frac(D.FP32) == 23 and cp.normal_frac("bf16") == 7 and cp.normal_frac(np.float16) == 10
    assert cp.normal_min(D.FP16) == 2.0 ** -14 and cp.normal_min(D.FP8E4M3) == 2.0 ** -6
    assert cp.normal_max(D.FP32) == float(np.finfo(np.float32).max)
    assert cp.normal_max(D.FP16) == 65504.0 and cp.normal_max(D.FP8E4M3) == 448.0
    assert cp.normal_max(D.BF16) == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)


def test_ulp_check_edges() -> None:
    ref = np.array([1.0, 1.0, 1.0, -3.0, 2.0 ** -140, 0.0, np.inf, np.nan])
    exact = ref.astype(np.float32)
    assert cp.ulp_check(ref, exact, 0.5)
    assert cp.ulp_check(ref, exact, 0)
    one_up = np.nextafter(np.float32(1), np.float32(2))
    r = cp.ulp_check(np.array([1.0]), np.array([one_up]), 0.5)
    assert not r and r.failures == 1 and r.first is not None and r.first[0] == 0
    assert cp.ulp_check(np.array([1.0]), np.array([one_up]), 1)
    # half an ulp of the reference: 1 + 2^-24 rounds either way
    assert cp.ulp_check(np.array([1.0 + 2.0 ** -24]), np.array([1.0], np.float32), 0.5)
    assert cp.ulp_check(np.array([1.0 + 2.0 ** -24]), np.array([one_up]), 0.5)
    # NaN must match NaN; inf must be inf; subnormal results may flush to zero
    assert not cp.ulp_check(np.array([np.nan]), np.array([1.0], np.float32), 100)
    assert not cp.ulp_check(np.array([1.0]), np.array([np.nan], np.float32), 100)
    assert not cp.ulp_check(np.array([np.inf]), np.array([3e38], np.float32), 1)
    assert cp.ulp_check(np.array([2.0 ** -130]), np.array([0.0], np.float32), 0.5)
    # a reference just past the largest float: inf is within 0.5 ulp
    assert cp.ulp_check(np.array([float(np.finfo(np.float32).max) * (1 + 2 ** -25)]),
                        np.array([np.inf], np.float32), 0.5)
    # ulp size follows the dtype
    assert cp.ulp_check(np.array([1.0]), np.array([1.0 + 2 ** -7], ml_dtypes.bfloat16), 1)
    assert not cp.ulp_check(np.array([1.0]), np.array([1.0 + 2 ** -7], np.float32), 1)
    assert cp.ulp_check(np.array([1.0]), np.array([1.0 + 2 ** -7], np.float32), 1, dtype=D.BF16)


def test_ulp_error_bound_matches_the_pseudo_code() -> None:
    def ref_bound(ref: float, frac: int, nmin: float, num_ulp: float) -> float:
        if not (math.isfinite(ref) and ref != 0 and abs(ref) >= 2.0 ** -1022):
            return 0.0
        v, e = abs(ref), 0
        while v >= 2.0:
            v, e = v / 2, e + 1
        while v < 1.0:
            v, e = v * 2, e - 1
        return max(2.0 ** e, nmin) * 2.0 ** -frac * num_ulp

    rng = np.random.default_rng(3)
    refs = np.concatenate([rng.normal(0, 1e3, 200), rng.normal(0, 1e-38, 50), [0.0, np.inf, -np.inf, 1.0, 2.0]])
    got = cp.ulp_error_bound(refs, D.FP32, 0.5)
    want = [ref_bound(float(r), 23, 2.0 ** -126, 0.5) for r in refs]
    assert np.array_equal(got, want)


def test_fp8e4m3_nan_means_overflow() -> None:
    big = np.array([500.0])  # beyond fp8e4m3's 448: NaN is the overflow result
    assert cp.ulp_check(big, np.array([np.nan], ml_dtypes.float8_e4m3fn), 0.5)
    assert not cp.ulp_check(np.array([10.0]), np.array([np.nan], ml_dtypes.float8_e4m3fn), 0.5)


def test_calc_abs_error_bound_and_op_bounds() -> None:
    # calcAbsErrorBound(bound_magnitude, bounds_value, lower_bound, normal_divisor)
    assert cp.calc_abs_error_bound(D.FP32, 2.0, 3.0) == 2.0 * 3.0 * ULP1
    assert cp.calc_abs_error_bound(D.FP32, 1e-45, 1.0) == 2.0 ** -126 * ULP1
    assert cp.calc_abs_error_bound(D.FP32, 0.1, 4.0, 0.5) == (0.5 / 4.0) * 4.0 * ULP1
    assert cp.calc_abs_error_bound(D.FP32, 2.0, 1.0, 0, 2) == 2.0 * 2.0 ** -11.5
    assert cp.calc_abs_error_bound(D.FP32, 0.0, np.inf) == 0.0
    x = np.array([0.5, -3.0])
    ref = np.exp(x)
    assert np.allclose(cp.abs_bound("EXP", D.FP32, ref, x), ref * (1 + np.abs(x)) * ULP1)
    b = cp.abs_bound("POW", D.FP32, np.array([0.0, 1.0, 8.0, np.nan]), np.array([0.0, 2.0, 2.0, -1.0]),
                     np.array([2.0, 0.0, 3.0, 0.5]))
    assert b[0] == 0.0 and b[1] == 0.0 and b[2] > 0 and b[3] == np.inf  # x<0: no requirement
    with pytest.raises(ValueError):
        cp.abs_bound("ADD", D.FP32, ref, x)


def test_dot_product_check() -> None:
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (64, 200))
    w = rng.uniform(-1, 1, (200, 30))
    ref = a @ w
    bnd = np.full_like(a, np.abs(a).max()) @ np.abs(w)
    imp = (a.astype(np.float32) @ w.astype(np.float32)).astype(np.float32)
    r = cp.dot_product_check(ref, bnd, imp, 200, test_set=3)
    assert r, r
    assert 0 < r.worst <= 1
    bad = imp.copy()
    bad[3, 4] += np.float32(bnd[3, 4] * 200 * 2.0 ** -20)
    r = cp.dot_product_check(ref, bnd, bad, 200)
    assert not r and r.failures == 1 and "ksb=200" in r.message
    # a consistent bias of ~ksb/3 per element passes element-wise but fails the variance bound
    biased = (ref + bnd * 2.0 ** -24 * 0.9 * 200).astype(np.float32)
    r = cp.dot_product_check(ref, bnd, biased, 200)
    assert not r and "variance" in r.message
    # special cases: NaN reference, zero bound, overflow
    assert cp.dot_product_check(np.array([np.nan, 0.0]), np.array([1.0, 0.0]), np.array([np.nan, 0.0], np.float32), 4)
    assert not cp.dot_product_check(np.array([0.0]), np.array([0.0]), np.array([1e-30], np.float32), 4)
    assert cp.dot_product_check(np.array([1e39]), np.array([1e39]), np.array([np.inf], np.float32), 4)
    # ksb from accumulator/output fractions: fp16 out, fp32 acc
    assert math.ceil(10 / 2.0 ** ((23 - 10) / 2)) == 1


def test_reduce_product_resize_rescale_checks() -> None:
    x = np.array([[1.5, 2.25, -3.0, 1.125]])
    ref = np.prod(x, axis=1, keepdims=True)
    imp = np.prod(x.astype(np.float32), axis=1, keepdims=True)
    assert cp.reduce_product_check(ref, imp, 4)
    assert not cp.reduce_product_check(ref, imp * np.float32(1.001), 4)
    assert cp.resize_check(np.array([1.0]), np.array([1.005], np.float32), 1.0)
    assert not cp.resize_check(np.array([1.0]), np.array([1.01], np.float32), 1.0)
    xv = np.array([100, -100, 7])
    out = np.array([50, -50, 4])  # 7 * 0.5 = 3.5 -> 3 or 4 within 0.5
    assert cp.rescale_inexact_check(xv, out, [1 << 30], [31], 0, 0, (-128, 127))
    assert not cp.rescale_inexact_check(xv, out + np.array([0, 0, 1]), [1 << 30], [31], 0, 0, (-128, 127))
    assert cp.rescale_inexact_check(np.array([1000]), np.array([127]), [1 << 30], [31], 0, 0, (-128, 127))


def test_op_accuracy_names_a_bound_for_every_op() -> None:
    seen = {}
    for name in OPS:
        acc = cp.op_accuracy(name)
        assert acc.description.startswith(name), acc
        seen[name] = acc.mode
    assert seen["ADD"] == "ulp" and cp.op_accuracy("ADD").ulp == 0.5
    assert seen["ERF"] == "ulp" and cp.op_accuracy("erf").ulp == 5
    assert seen["CONV2D"] == "dot_product" and seen["REDUCE_SUM"] == "dot_product" and seen["FFT2D"] == "dot_product"
    assert seen["SIGMOID"] == "abs" and seen["POW"] == "abs"
    assert seen["REDUCE_PRODUCT"] == "reduce_product" and seen["RESIZE"] == "resize"
    assert seen["MAXIMUM"] == "exact" and seen["TRANSPOSE"] == "exact"
    assert seen["RESCALE"] == "rescale_inexact"
    assert "spec 2.4.3 SIGMOID" in str(cp.op_accuracy("SIGMOID"))


# ------------------------------------------------------------- our float kernels vs their own fp64 mode
FLOAT_TYPES = [D.FP32, D.FP16, D.BF16]
UNARY = ["ABS", "CEIL", "FLOOR", "COS", "SIN", "EXP", "LOG", "RECIPROCAL", "RSQRT", "NEGATE", "ERF", "SIGMOID",
         "TANH", "CLAMP", "IDENTITY"]
BINARY = ["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "POW"]


def _vals(dt: D, shape: tuple[int, ...], rng: np.random.Generator, lo: float, hi: float) -> np.ndarray:
    return rng.uniform(lo, hi, shape).astype(np.float32).astype(dt.np_dtype())


def _args(op: str, dt: D, rng: np.random.Generator) -> tuple[list[object], dict[str, object]]:
    lo, hi = (0.05, 4.0) if op in ("LOG", "RSQRT", "RECIPROCAL") else (-4.0, 4.0)
    if op == "POW":
        return [In(_vals(dt, (8, 50), rng, 0.1, 3.0), dt), In(_vals(dt, (8, 50), rng, -2.0, 2.0), dt)], {}
    if op in BINARY:
        extra: list[object] = [Const(np.array([0]), D.INT8)] if op == "MUL" else []
        attrs: dict[str, object] = {"nan_mode": "PROPAGATE"} if op in ("MAXIMUM", "MINIMUM") else {}
        return [In(_vals(dt, (8, 50), rng, lo, hi), dt), In(_vals(dt, (8, 50), rng, lo, hi), dt), *extra], attrs
    x = In(_vals(dt, (8, 50), rng, lo, hi), dt)
    if op == "NEGATE":
        return [x, Const(np.array([0]), dt), Const(np.array([0]), dt)], {}
    if op == "CLAMP":
        return [x], {"min_val": -1.0, "max_val": 2.5, "nan_mode": "PROPAGATE"}
    return [x], {}


@pytest.mark.parametrize("dt", FLOAT_TYPES, ids=lambda d: d.value)
def test_elementwise_float_ops_meet_their_bounds(dt: D) -> None:
    rng = np.random.default_rng(5)
    b = GraphBuilder("ew")
    ops = {}
    for op in UNARY + BINARY:
        args, attrs = _args(op, dt, rng)
        (res,) = b.add(op, args, dt, attrs, name=op.lower())
        ops[res.name] = res.producer
    normal = run(b.graph, b.feed)
    precise = run(b.graph, b.feed, precise=True)
    bad = []
    for name, op in ops.items():
        ins = [b.feed[v.name] if v.producer is None else v.const() for v in op.operands]
        r = cp.check_op(op, precise[name], normal[name], [np.asarray(a) for a in ins])
        if not r:
            bad.append((op.opcode, str(r)))
    assert not bad, bad


def test_dot_product_ops_meet_their_bounds() -> None:
    rng = np.random.default_rng(7)
    b = GraphBuilder("dot")
    x = rng.uniform(-1, 1, (2, 12, 12, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (6, 3, 3, 8)).astype(np.float32)
    bias = rng.uniform(-1, 1, (6,)).astype(np.float32)
    z = Const(np.array([0.0], np.float32))
    conv = b.add("CONV2D", [In(x), Const(w), Const(bias), z, z], D.FP32,
                 {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "acc_type": "FP32"}, name="conv")[0]
    mm = b.add("MATMUL", [In(rng.uniform(-1, 1, (2, 30, 64)).astype(np.float32)),
                          In(rng.uniform(-1, 1, (2, 64, 20)).astype(np.float32)), z, z], D.FP32, name="mm")[0]
    rs = b.add("REDUCE_SUM", [In(rng.uniform(-1, 1, (40, 300)).astype(np.float32))], D.FP32, {"axis": 1},
               name="rsum")[0]
    pool = b.add("AVG_POOL2D", [In(x), z, z], D.FP32, {"kernel": [3, 3], "stride": [1, 1], "pad": [1, 1, 1, 1],
                                                      "acc_type": "FP32"}, name="pool")[0]
    normal = run(b.graph, b.feed)
    precise = run(b.graph, b.feed, precise=True)
    for v in (conv, mm, rs, pool):
        op = v.producer
        ins = [np.asarray(b.feed[o.name] if o.producer is None else o.const()) for o in op.operands]

        def bound(op=op, ins=ins) -> np.ndarray:  # the op in fp64 on |x| (global max) and |w|
            from tests.conformance import _dot_bound

            return _dot_bound(b.graph, op, ins, 0)

        r = cp.check_op(op, precise[v.name], normal[v.name], ins, bound_fn=bound)
        assert r, (op.opcode, str(r))
