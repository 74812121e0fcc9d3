"""Floating-point compliance checks of the TOSA 1.0 specification (§1.10, §4.5.3).

An implementation's float result is compliant when it lies within the error bound the spec gives for the
operator, measured against an fp64 reference result (``ref``, e.g. the reference model's precise mode or our
executor with ``precise=True``).  This module writes those bounds down once, vectorised over numpy arrays:

* :func:`ulp_check` - ``tosa_reference_check_fp`` (spec 4.5.3): ``num_ulp`` units of the last place;
* :func:`bound_check` - ``tosa_reference_check_fp_bnd`` (spec 4.5.3) with an absolute bound per element,
  and :func:`calc_abs_error_bound` (``calcAbsErrorBound``, spec 4.5.3) to build one;
* :func:`dot_product_check` - ``tosa_reference_check_dotproduct`` (spec 1.10.3, "Dot product accuracy
  requirements" of §1.10.3) from the fp64 result and the fp64 bound result (the op on absolute values);
* per-op bounds: :func:`abs_bound` (SIGMOID, TANH, EXP, COS, SIN, POW), :func:`reduce_product_check`,
  :func:`resize_check`, :func:`rescale_inexact_check`, :func:`special_check` (inf/NaN/zero agreement);
* :func:`op_accuracy` - which of these applies to an op (the "Precision Requirements" of each operator).

Every check returns a :class:`CheckResult` (truthy when compliant) that counts and locates the failures.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.types import DType, dtype_from_numpy
from ..tosa import optable

__all__ = ["CheckResult", "Accuracy", "normal_frac", "normal_min", "normal_max", "calc_abs_error_bound",
           "ulp_error_bound", "ulp_check", "bound_check", "exact_check", "special_check", "abs_bound",
           "dot_product_check", "fft_bound", "reduce_product_check", "resize_check", "rescale_inexact_check",
           "kernel_size", "op_accuracy", "check_op"]

# ------------------------------------------------------------------------------ format constants
#: (normal_frac, log2 normal_min, normal_max) per float type (spec 4.5.3)
_FP: dict[DType, tuple[int, int, float]] = {
    DType.FP32: (23, -126, 2.0 ** 128 - 2.0 ** (127 - 23)),
    DType.BF16: (7, -126, 2.0 ** 128 - 2.0 ** (127 - 7)),
    DType.FP16: (10, -14, 2.0 ** 16 - 2.0 ** (15 - 10)),
    DType.FP8E4M3: (3, -6, 2.0 ** 9 - 2.0 ** (8 - 2)),
    DType.FP8E5M2: (2, -14, 2.0 ** 16 - 2.0 ** (15 - 2)),
    DType.FP64: (52, -1022, float(np.finfo(np.float64).max)),
}


def _dt(dt: DType | str | np.dtype | type | None, like: Any = None) -> DType:
    if isinstance(dt, DType):
        return dt
    if isinstance(dt, str):
        try:
            return DType(dt.lower())
        except ValueError:
            names = {"fp32": DType.FP32, "float32": DType.FP32, "fp16": DType.FP16, "float16": DType.FP16,
                     "bf16": DType.BF16, "bfloat16": DType.BF16, "fp8e4m3": DType.FP8E4M3, "fp8e5m2": DType.FP8E5M2,
                     "fp64": DType.FP64, "float64": DType.FP64}
            return names[dt.lower()]
    if dt is None:
        dt = np.asarray(like).dtype
    return dtype_from_numpy(np.dtype(dt))


def normal_frac(dt: DType | str | np.dtype | type) -> int:
    """Number of fraction (mantissa) bits (spec 4.5.3)."""
    return _FP[_dt(dt)][0]


def normal_min(dt: DType | str | np.dtype | type) -> float:
    """Smallest positive normal value (spec 4.5.3)."""
    return 2.0 ** _FP[_dt(dt)][1]


def normal_max(dt: DType | str | np.dtype | type) -> float:
    """Largest finite value (spec 4.5.3)."""
    return _FP[_dt(dt)][2]


# ------------------------------------------------------------------------------------- results
@dataclass
class CheckResult:
    """Outcome of a compliance check over a tensor."""

    ok: bool
    total: int = 0
    failures: int = 0
    #: flat index and (impl, ref, bound) of the first failure, for messages
    first: tuple[int, float, float, float] | None = None
    #: largest |impl - ref| / bound over the finite, bounded elements (<= 1 when compliant; dot product: / ksb)
    worst: float = 0.0
    message: str = ""
    #: largest allowed |impl - ref| over the finite, bounded elements (the absolute error the bound admits)
    allowed: float = 0.0

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            return f"compliant ({self.total} values, worst {self.worst:.3g} of the bound)"
        return self.message or f"{self.failures}/{self.total} values outside the bound"


def _result(ok_mask: np.ndarray, impl: Any, ref: Any, bnd: Any, what: str) -> CheckResult:
    ok_mask = np.asarray(ok_mask, bool).reshape(-1)
    n = int(ok_mask.size)
    bad = np.flatnonzero(~ok_mask)
    i64 = np.asarray(impl, np.float64).reshape(-1)
    r64 = np.asarray(ref, np.float64).reshape(-1)
    b64 = np.asarray(bnd, np.float64).reshape(-1)
    if b64.size != r64.size:
        b64 = np.broadcast_to(b64[:1], r64.shape)
    with np.errstate(all="ignore"):
        fin = np.isfinite(i64) & np.isfinite(r64) & np.isfinite(b64) & (b64 > 0) & (i64 != 0)  # 0: flushed
        ratio = np.abs(i64[fin] - r64[fin]) / b64[fin]
    worst = float(ratio.max()) if ratio.size else 0.0
    with np.errstate(all="ignore"):
        admitted = b64[np.isfinite(b64) & (b64 > 0)]
    allowed = float(admitted.max()) if admitted.size else 0.0
    if not bad.size:
        return CheckResult(True, n, 0, None, worst, allowed=allowed)
    k = int(bad[0])
    first = (k, float(i64[k]), float(r64[k]), float(b64[k]))
    msg = (f"{bad.size}/{n} values outside the {what} bound; first at flat index {k}: "
           f"got {first[1]!r}, reference {first[2]!r}, bound {first[3]!r}")
    return CheckResult(False, n, int(bad.size), first, worst, msg, allowed)


# ------------------------------------------------------------------------------ spec 4.5.3
def calc_abs_error_bound(dt: DType | str, bound_magnitude: Any, bounds_value: Any, lower_bound: float = 0.0,
                         normal_divisor: float = 1.0) -> np.ndarray:
    """``calcAbsErrorBound<in_t>`` (spec 4.5.3), elementwise over arrays."""
    t = _dt(dt)
    mag = np.abs(np.asarray(bound_magnitude, np.float64))
    bv = np.asarray(bounds_value, np.float64)
    mag, bv = np.broadcast_arrays(mag, bv)
    with np.errstate(all="ignore"):
        value_bound = np.maximum(mag, normal_min(t))
        if lower_bound > 0:
            value_bound = np.maximum(lower_bound / bv, value_bound)
        err = np.exp2(-normal_frac(t) / normal_divisor) * value_bound * bv
    use = np.isfinite(bv) | (mag != 0.0)
    return np.where(use, err, 0.0)


def ulp_error_bound(ref: Any, dt: DType | str, num_ulp: float) -> np.ndarray:
    """The error bound of ``tosa_reference_check_fp`` (spec 4.5.3): ``num_ulp`` ulps of ``ref`` in ``dt``."""
    r = np.abs(np.asarray(ref, np.float64))
    normal = np.isfinite(r) & (r >= np.finfo(np.float64).tiny)  # is_normal_fp64 && != 0
    _, e = np.frexp(np.where(normal, r, 1.0))
    pow2 = np.maximum(np.ldexp(1.0, e - 1), normal_min(dt))  # 2^ilog2(|ref|)
    return np.where(normal, pow2 * 2.0 ** -normal_frac(dt) * num_ulp, 0.0)


def _within(impl: Any, ref: Any, err_bnd: Any, dt: DType) -> np.ndarray:
    """Elementwise ``tosa_reference_check_fp_bnd<in_t>`` (spec 4.5.3)."""
    test = np.asarray(impl).astype(np.float64)
    r = np.asarray(ref, np.float64)
    bnd = np.asarray(err_bnd, np.float64)
    test, r, bnd = np.broadcast_arrays(test, r, bnd)
    ref_nan = np.isnan(r)
    with np.errstate(all="ignore"):
        neg = r < 0
        rv = np.where(neg, -r, r)
        tv = np.where(neg, -test, test)
        ref_max = rv + bnd
        ref_min = rv - bnd
        nmax = normal_max(dt)
        ref_max = np.where(ref_max > nmax, np.inf, ref_max)
        ref_min = np.where(ref_min > nmax, np.inf, ref_min)
        ref_min = np.where(ref_min < -nmax, -np.inf, ref_min)
        ok = (tv >= ref_min) & (tv <= ref_max)
        if dt in (DType.BF16, DType.FP16, DType.FP32):  # subnormal results may be flushed to zero
            ok = np.where(tv == 0, ref_min < normal_min(dt), ok)
        if dt is DType.FP8E4M3:  # no infinity: NaN stands for overflow
            ok = np.where(np.isnan(tv), ref_max == np.inf, ok)
    ok = np.where(~np.isfinite(bnd), True, ok)
    return np.where(ref_nan, np.isnan(test), ok)


def bound_check(ref_fp64: Any, impl: Any, err_bnd: Any, dtype: DType | str | None = None,
                what: str = "absolute") -> CheckResult:
    """``tosa_reference_check_fp_bnd``: every ``impl`` value within ``err_bnd`` of ``ref_fp64``.

    ``dtype`` is the float type the result has in the graph (default: ``impl``'s numpy type).
    """
    dt = _dt(dtype, impl)
    bnd = np.broadcast_to(np.asarray(err_bnd, np.float64), np.shape(ref_fp64))
    if np.any(bnd < 0):
        raise ValueError("error bound must be >= 0")
    ok = _within(impl, ref_fp64, bnd, dt)
    return _result(ok, impl, ref_fp64, bnd, what)


def ulp_check(ref_fp64: Any, impl: Any, ulp_bound: float, dtype: DType | str | None = None) -> CheckResult:
    """``tosa_reference_check_fp(impl, ref, num_ulp)`` (spec 4.5.3) over whole tensors.

    ``ref_fp64`` is the fp64 reference result, ``impl`` the result under test (its numpy dtype, or ``dtype``,
    gives the format whose ulp is used).  NaN must match NaN; subnormal results may be flushed to zero.
    """
    dt = _dt(dtype, impl)
    bnd = ulp_error_bound(ref_fp64, dt, ulp_bound)
    return _result(_within(impl, ref_fp64, bnd, dt), impl, ref_fp64, bnd, f"{ulp_bound} ulp")


def exact_check(ref: Any, impl: Any, float_zero_sign: bool = True) -> CheckResult:
    """Exact match: integers bit for bit; floats equal with NaN == NaN (any payload) and, unless
    ``float_zero_sign``, either sign of zero accepted."""
    r, i = np.asarray(ref), np.asarray(impl)
    if r.shape != i.shape:
        return CheckResult(False, int(i.size), int(i.size), None, math.inf, f"shape {i.shape} != {r.shape}")
    if r.dtype.kind in "biu" and i.dtype.kind in "biu":
        ok = r.astype(np.int64) == i.astype(np.int64)
        return _result(ok, i.astype(np.float64), r.astype(np.float64), 0.0, "exact")
    rf, f = r.astype(np.float64), i.astype(np.float64)
    ok = (rf == f) | (np.isnan(rf) & np.isnan(f))
    if float_zero_sign:
        ok &= ~((rf == 0) & (f == 0) & (np.signbit(rf) != np.signbit(f)))
    return _result(ok, f, rf, 0.0, "exact")


def special_check(ref_fp64: Any, impl: Any) -> CheckResult:
    """FP special values only: where the reference is NaN / ±inf / zero the result must be too (the check the
    conformance suite uses for the special-value data sets of dot-product ops, whose finite values need the
    statistical dot-product test)."""
    r = np.asarray(ref_fp64, np.float64)
    i = np.asarray(impl).astype(np.float64)
    ok = np.ones(r.shape, bool)
    ok &= np.where(np.isnan(r), np.isnan(i), True)
    ok &= np.where(np.isinf(r), i == r, True)
    ok &= np.where(np.isfinite(r), ~np.isnan(i), True)  # a finite reference never becomes NaN
    return _result(ok, i, r, 0.0, "special-value")


# ------------------------------------------------------------------------------ per-op absolute bounds
def abs_bound(opcode: str, dt: DType | str, ref: Any, x: Any, y: Any = None) -> np.ndarray:
    """The absolute error bound the spec gives ``opcode`` for inputs ``x`` (and ``y`` for POW), with the fp64
    reference result ``ref``.  Elements where the spec gives no accuracy requirement get ``inf``."""
    t = _dt(dt)
    r = np.asarray(ref, np.float64)
    xv = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        if opcode == "SIGMOID":  # spec 2.4.3 SIGMOID
            return calc_abs_error_bound(t, r, 2 * (1 + np.abs(xv)), 0, 1)
        if opcode == "TANH":  # spec 2.4.4 TANH
            return calc_abs_error_bound(t, r, 4 * (1 + np.abs(xv)), 0.5, 1)
        if opcode == "EXP":  # spec 2.6.6 EXP
            return calc_abs_error_bound(t, r, 1 + np.abs(xv), 0, 1)
        if opcode == "COS":  # spec 2.6.5 COS
            return calc_abs_error_bound(t, 1 + np.abs(xv), 1, 0, 2)
        if opcode == "SIN":  # spec 2.6.13 SIN
            return np.maximum(calc_abs_error_bound(t, xv, 1, 0, 2), math.pi * normal_min(t))
        if opcode == "POW":  # spec 2.5.15 POW ("log(abs)" read as log(abs(x)))
            yv = np.asarray(y, np.float64)
            b = calc_abs_error_bound(t, r, 2 * (1 + np.abs(np.log(np.abs(xv)) * yv)), 0, 1)
            undefined = ~np.isfinite(xv) | ~np.isfinite(yv) | (xv < 0) | ((xv == 0) & (yv <= 0))
            b = np.where((xv == 0) & (yv > 0), 0.0, b)
            b = np.where((xv > 0) & (yv == 0), 0.0, b)
            return np.where(undefined, np.inf, b)
    raise ValueError(f"{opcode} has no absolute error bound in the spec")


# ------------------------------------------------------------------------------ spec 1.10.3
def dot_product_check(ref_fp64: Any, bound_fp64: Any, impl: Any, ks: int, *, out_dtype: DType | str | None = None,
                      acc_dtype: DType | str | None = None, has_bias: bool = False, test_set: int | None = None,
                      ksb: float | None = None, abs_bound_: float | None = None,
                      variance_bound: float | None = None, min_t: int = 0) -> CheckResult:
    """``tosa_reference_check_dotproduct`` (spec 1.10.3).

    ``ref_fp64`` is the op computed in fp64, ``bound_fp64`` the op computed in fp64 on absolute values (with the
    input replaced by its global maximum unless the op has ``local_bound``), ``impl`` the result under test,
    ``ks`` the dot-product length (:func:`kernel_size`).  ``ksb`` defaults to the spec's
    ``ceil(KS / 2^((frac(acc)-frac(out))/2)) + (bias ? 1 : 0)``.  Per element ``|impl - ref|`` must be at most
    ``ksb`` (or ``abs_bound_``) times ``max(bound * 2^(-1-frac(out)), normal_min)``; over the tensor, the sum of
    squared normalised errors must stay within ``0.4 * ksb * T`` (or ``variance_bound * T``) and, for test sets
    3-5, the error sum within ``2 * sqrt(ksb * T)``.  The statistical (variance) condition is applied when the
    tensor has at least ``min_t`` elements: it is a statement about the spec's test data sets, and over a handful of
    elements of real data (T = 2: one element at 0.96 of its bound fails it) it is no statistic at all.
    """
    ot = _dt(out_dtype, impl)
    at = _dt(acc_dtype) if acc_dtype is not None else ot
    if ksb is None:
        ksb = math.ceil(ks / 2.0 ** ((normal_frac(at) - normal_frac(ot)) / 2)) + (1 if has_bias else 0)
    lim = float(abs_bound_) if abs_bound_ is not None else float(ksb)
    var_lim = float(variance_bound) if variance_bound is not None else 0.4 * ksb
    r = np.asarray(ref_fp64, np.float64).reshape(-1)
    b = np.asarray(bound_fp64, np.float64).reshape(-1)
    i = np.asarray(impl).astype(np.float64).reshape(-1)
    n = int(r.size)
    if b.size != n or i.size != n:
        return CheckResult(False, n, n, None, math.inf, f"sizes differ: ref {n}, bound {b.size}, impl {i.size}")
    frac = normal_frac(ot)
    with np.errstate(all="ignore"):
        overflow = np.isinf((b * (1 + ksb * 2.0 ** (-1 - frac))).astype(ot.np_dtype()).astype(np.float64))
        err_bnd = np.maximum(b * 2.0 ** (-1 - frac), normal_min(ot))
        err = (i - r) / err_bnd
    ref_nan = np.isnan(r)
    free = ~ref_nan & (np.isnan(b) | overflow)  # no accuracy requirement
    zero = ~ref_nan & ~free & (b == 0)
    normal = ~ref_nan & ~free & ~zero
    ok = np.ones(n, bool)
    ok[ref_nan] = np.isnan(i[ref_nan])
    ok[zero] = (r[zero] == 0) & (i[zero] == 0)
    ok[normal] = np.abs(err[normal]) <= lim  # NaN err (impl NaN) compares False
    e = np.where(normal, err, 0.0)
    res = _result(ok, i, r, np.where(normal, err_bnd * lim, 0.0), f"dot-product (ksb={ksb})")
    res.worst = float(np.max(np.abs(e[normal])) / lim) if normal.any() and np.isfinite(e[normal]).all() else (
        res.worst if not normal.any() else math.inf)
    if not res.ok:
        return res
    t = n
    sumsq = float(np.sum(e * e))
    if t >= min_t and sumsq > var_lim * t:
        return CheckResult(False, n, n, None, res.worst,
                           f"dot-product error variance {sumsq:.4g} > {var_lim:.4g} * T (T={t}, ksb={ksb})")
    if test_set is not None and 3 <= test_set <= 5:
        s = float(np.sum(e))
        if abs(s) > 2 * math.sqrt(ksb * t):
            return CheckResult(False, n, n, None, res.worst,
                               f"dot-product error bias {s:.4g} > 2*sqrt(ksb*T) = {2 * math.sqrt(ksb * t):.4g}")
    return res


def reduce_product_check(ref_fp64: Any, impl: Any, n: int, dtype: DType | str | None = None) -> CheckResult:
    """REDUCE_PRODUCT (spec 2.9.5 REDUCE_PRODUCT): ``err_bnd = max(|ref|, normal_min) * ((1 + 2^(-frac-1))^n - 1)``."""
    dt = _dt(dtype, impl)
    r = np.asarray(ref_fp64, np.float64)
    bnd = np.maximum(np.abs(r), normal_min(dt)) * ((1 + 2.0 ** (-normal_frac(dt) - 1)) ** n - 1)
    bnd = np.where(np.isfinite(bnd), bnd, np.inf)
    return _result(_within(impl, r, bnd, dt), impl, r, bnd, f"reduce-product (n={n})")


def resize_check(ref_fp64: Any, impl: Any, max_abs_input: float, dtype: DType | str | None = None) -> CheckResult:
    """RESIZE (spec 2.12.1 RESIZE): ``err_bnd = max(calcAbsErrorBound(max|input|, 20, 0, 1), max|input| * 0.006)``."""
    dt = _dt(dtype, impl)
    ulp_bnd = float(calc_abs_error_bound(dt, max_abs_input, 20.0, 0, 1))
    bnd = max(ulp_bnd, abs(max_abs_input) * 0.006)
    return bound_check(ref_fp64, impl, bnd, dt, "resize")


def rescale_inexact_check(x: Any, impl: Any, multiplier: Any, shift: Any, input_zp: int, output_zp: int,
                          out_range: tuple[int, int], per_channel: bool = False) -> CheckResult:
    """RESCALE with INEXACT_ROUND (spec 2.13.2 RESCALE): ``|(impl - output_zp) - (x - input_zp) * m * 2^-shift|`` at
    most ``0.5 + 3 * |out_ref| * 2^-24``; a reference beyond the output range must saturate."""
    xv = np.asarray(x, np.float64)
    m = np.asarray(multiplier, np.float64).reshape(-1)
    s = np.asarray(shift, np.float64).reshape(-1)
    if not per_channel:
        m, s = m[:1], s[:1]
    out_ref = (xv - input_zp) * m * np.exp2(-s)
    bnd = 0.5 + 3 * np.abs(out_ref) * 2.0 ** (-normal_frac(DType.FP32) - 1)
    got = np.asarray(impl).astype(np.float64)
    lo, hi = out_range
    ok = np.abs((got - output_zp) - out_ref) <= bnd
    ok |= (out_ref + output_zp >= hi) & (got == hi)
    ok |= (out_ref + output_zp <= lo) & (got == lo)
    return _result(ok, got - output_zp, out_ref, bnd, "inexact-rescale")


# ------------------------------------------------------------------------------ which bound applies
def _section(code: str) -> str:
    """The spec section of operator ``code``, e.g. ``2.4.3 SIGMOID``."""
    return f"{optable.get(code).section} {code}"


@dataclass(frozen=True)
class Accuracy:
    """The accuracy requirement of an op for float results (integer results are always exact)."""

    #: "exact" | "ulp" | "abs" | "dot_product" | "reduce_product" | "resize" | "rescale_inexact" | "none"
    mode: str
    ulp: float | None = None
    spec_line: int = 0
    description: str = ""

    def __str__(self) -> str:
        return self.description


_EXACT_FLOAT = ("ABS NEGATE MAXIMUM MINIMUM CLAMP MAX_POOL2D REDUCE_MAX REDUCE_MIN SELECT CONCAT PAD RESHAPE REVERSE "
                "SLICE TILE TRANSPOSE GATHER SCATTER CONST IDENTITY VARIABLE_READ COND_IF WHILE_LOOP").split()
_ULP: dict[str, tuple[float, int]] = {"ADD": (0.5, 3743), "SUB": (0.5, 5190), "MUL": (0.5, 4910),
                                      "CEIL": (0.5, 5573), "FLOOR": (0.5, 5914), "ERF": (5, 3445), "LOG": (5, 6008),
                                      "RECIPROCAL": (1, 6329), "RSQRT": (2, 6423)}
_ABS: dict[str, tuple[int, str]] = {
    "SIGMOID": (3546, "calcAbsErrorBound(out_ref, 2*(1+|x|), 0, 1)"),
    "TANH": (3657, "calcAbsErrorBound(out_ref, 4*(1+|x|), 0.5, 1)"),
    "EXP": (5830, "calcAbsErrorBound(out_ref, 1+|x|, 0, 1)"),
    "COS": (5734, "calcAbsErrorBound(1+|x|, 1, 0, 2)"),
    "SIN": (6535, "max(calcAbsErrorBound(x, 1, 0, 2), pi*normal_min)"),
    "POW": (5102, "calcAbsErrorBound(out_ref, 2*(1+|log|x|*y|), 0, 1); undefined for x<0, x or y inf/NaN, x==0&&y<=0"),
}
_DOT: dict[str, tuple[int, str]] = {"AVG_POOL2D": (1130, "KS = KY*KX"), "CONV2D": (1380, "KS = KH*KW*IC"),
                                    "CONV3D": (1703, "KS = KD*KH*KW*IC"), "DEPTHWISE_CONV2D": (2033, "KS = KH*KW"),
                                    "MATMUL": (2506, "KS = C"), "TRANSPOSE_CONV2D": (2986, "KS = KH*KW*IC"),
                                    "FFT2D": (2361, "KS = 2*H*W"), "RFFT2D": (2872, "KS = H*W"),
                                    "REDUCE_SUM": (7621, "KS = shape[axis]")}


def _opcode_types(op: Any) -> tuple[str, list[DType], list[DType], dict[str, Any]]:
    if isinstance(op, str):
        return op.removeprefix("tosa.").upper(), [], [], {}
    return (op.opcode, [v.type.dtype for v in op.operands], [v.type.dtype for v in op.results], dict(op.attrs))


def op_accuracy(op: Any) -> Accuracy:
    """Which accuracy requirement of the spec applies to ``op`` (an :class:`Operation` or an op name).

    Given an Operation with integer results (other than RESCALE INEXACT_ROUND and int->float CAST) the answer
    is "exact"; given only a name, the float requirement is described.
    """
    code, ins, outs, attrs = _opcode_types(op)
    float_out = any(d.is_float for d in outs) if outs else True
    if code == "RESCALE":
        if str(attrs.get("rounding_mode", "")).upper() == "INEXACT_ROUND" or not outs:
            return Accuracy("rescale_inexact", None, 9796, "RESCALE: exact for SINGLE_ROUND/DOUBLE_ROUND; "
                            "INEXACT_ROUND: |(out-zp) - (x-izp)*m*2^-shift| <= 0.5 + 3*|out_ref|*2^-24 "
                            "(spec 2.13.2 RESCALE)")
        return Accuracy("exact", None, 9792, "RESCALE: results must be exact (spec 2.13.2 RESCALE)")
    if code == "CAST":
        if ins and outs and ins[0].is_int and outs[0].is_float or not outs:
            return Accuracy("ulp", 0.5, 9698, "CAST int->float: tosa_reference_check_fp(out, ref, 0.5 ulp) "
                            "(spec 2.13.1 CAST); "
                            "float->float: round to nearest (exact); float->int: round half to even, saturate "
                            "(exact); NaN input to an integer output is unpredictable")
        return Accuracy("exact", None, 9698, "CAST: exact (round to nearest even, saturating to integers)")
    if outs and not float_out and code not in ("ARGMAX",) and not any(d.is_float for d in ins):
        return Accuracy("exact", None, 0, f"{code}: integer results must be exact")
    if code in ("EQUAL", "GREATER", "GREATER_EQUAL", "ARGMAX"):
        return Accuracy("exact", None, 0, f"{code}: exact (NaN compares false / per nan_mode; sign of zero ignored)")
    if code in _ULP:
        u, line = _ULP[code]
        return Accuracy("ulp", u, line, f"{code}: tosa_reference_check_fp(out, ref, {u} ulp) (spec {_section(code)})")
    if code in _ABS:
        line, text = _ABS[code]
        return Accuracy("abs", None, line,
                        f"{code}: tosa_reference_check_fp_bnd with err_bnd = {text} (spec {_section(code)})")
    if code in _DOT:
        line, ks = _DOT[code]
        return Accuracy("dot_product", None, line,
                        f"{code}: dot product accuracy (spec 1.10.3), {ks} (spec {_section(code)})")
    if code == "REDUCE_PRODUCT":
        return Accuracy("reduce_product", None, 7534, "REDUCE_PRODUCT: err_bnd = max(|ref|, normal_min) * "
                        "((1 + 2^(-frac-1))^n - 1), n = shape[axis] (spec 2.9.5 REDUCE_PRODUCT)")
    if code == "RESIZE":
        return Accuracy("resize", None, 9027, "RESIZE: err_bnd = max(calcAbsErrorBound(max|in|, 20, 0, 1), "
                        "max|in| * 0.006) (spec 2.12.1 RESIZE)")
    if code in _EXACT_FLOAT:
        return Accuracy("exact", None, 0, f"{code}: float results must be exact (zero sign and subnormal flush "
                        "to zero aside)")
    if code in ("CUSTOM",):
        return Accuracy("none", None, 0, "CUSTOM: implementation defined")
    return Accuracy("exact", None, 0, f"{code}: results must be exact")


def kernel_size(op: Any, input_shape: tuple[int, ...] | None = None) -> int:
    """KS, the dot-product length of a dot-product op (Appendix A "Floating-Point Operator Test Data")."""
    code, _, _, attrs = _opcode_types(op)
    w = tuple(op.operands[1].type.shape) if not isinstance(op, str) and len(op.operands) > 1 else ()
    x = input_shape or (tuple(op.operands[0].type.shape) if not isinstance(op, str) and op.operands else ())
    if code in ("CONV2D", "CONV3D"):
        return int(np.prod(w[1:]))
    if code == "TRANSPOSE_CONV2D":
        return int(np.prod(w[1:]))
    if code == "DEPTHWISE_CONV2D":
        return int(w[0] * w[1])
    if code == "MATMUL":
        return int(x[-1])
    if code == "AVG_POOL2D":
        return int(np.prod(np.asarray(attrs["kernel"]).reshape(-1)))
    if code == "FFT2D":
        return int(2 * x[1] * x[2])
    if code == "RFFT2D":
        return int(x[1] * x[2])
    if code == "REDUCE_SUM":
        return int(x[int(attrs["axis"])])
    raise ValueError(f"{code} is not a dot-product op")


def fft_bound(opcode: str, inputs: list[np.ndarray], result_index: int) -> np.ndarray:
    """The dot-product bound result of FFT2D / RFFT2D: the transform with the inputs *and* the twiddle factors
    replaced by their absolute values, e.g. RFFT2D real part sum |x[y, x]| * |cos(2 pi (oy y / H + ox x / W))|.
    (The op itself evaluated on |x| is no bound: its signed twiddles cancel, giving a near-zero "bound".)"""
    re = np.abs(np.asarray(inputs[0], np.float64))
    im = np.abs(np.asarray(inputs[1], np.float64)) if opcode == "FFT2D" and len(inputs) > 1 else None
    _, h, w = re.shape
    ow = w if opcode == "FFT2D" else w // 2 + 1
    if h * h * ow * w > 20_000_000:  # |cos|, |sin| <= 1: the sum of magnitudes bounds every output (looser)
        tot = re.sum(axis=(1, 2)) + (im.sum(axis=(1, 2)) if im is not None else 0.0)
        return np.broadcast_to(tot[:, None, None], (re.shape[0], h, ow)).copy()
    ang_y = 2 * np.pi * np.outer(np.arange(h), np.arange(h)) / h      # [oy, y]
    ang_x = 2 * np.pi * np.outer(np.arange(ow), np.arange(w)) / w     # [ox, x]
    ang = ang_y[:, None, :, None] + ang_x[None, :, None, :]             # [oy, ox, y, x]
    c, s = np.abs(np.cos(ang)), np.abs(np.sin(ang))
    first, second = (c, s) if result_index == 0 else (s, c)
    out = np.einsum("nyx,abyx->nab", re, first)
    if im is not None:
        out = out + np.einsum("nyx,abyx->nab", im, second)
    return out


def check_op(op: Any, ref_fp64: Any, impl: Any, inputs: list[np.ndarray] | None = None, *,
             bound_fp64: Any = None, result_index: int = 0, test_set: int | None = None,
             bound_fn: Callable[[], Any] | None = None) -> CheckResult:
    """Check result ``result_index`` of ``op`` (an Operation) against the fp64 reference with the bound
    :func:`op_accuracy` names.  ``inputs`` are the op's operand arrays (needed by the bounds that depend on the
    input); dot-product ops need ``bound_fp64`` (or ``bound_fn`` computing it)."""
    acc = op_accuracy(op)
    dt = op.results[result_index].type.dtype
    ins = inputs or []
    if acc.mode == "exact" or not dt.is_float and acc.mode != "rescale_inexact":
        return exact_check(np.asarray(ref_fp64).astype(dt.np_dtype()) if dt.is_float else ref_fp64, impl,
                           float_zero_sign=False)
    if acc.mode == "ulp":
        return ulp_check(ref_fp64, impl, float(acc.ulp or 0), dt)
    if acc.mode == "abs":
        abnd = abs_bound(op.opcode, dt, ref_fp64, ins[0], ins[1] if len(ins) > 1 else None)
        return bound_check(ref_fp64, impl, abnd, dt)
    if acc.mode == "reduce_product":
        return reduce_product_check(ref_fp64, impl, int(np.shape(ins[0])[int(op.attrs["axis"])]), dt)
    if acc.mode == "resize":
        return resize_check(ref_fp64, impl, float(np.max(np.abs(np.asarray(ins[0], np.float64)))), dt)
    if acc.mode == "dot_product":
        bnd: Any
        if op.opcode in ("FFT2D", "RFFT2D"):
            bnd = fft_bound(op.opcode, ins, result_index)
        else:
            bnd = bound_fp64 if bound_fp64 is not None else (bound_fn() if bound_fn is not None else None)
        if bnd is None:
            raise ValueError(f"{op.opcode}: the dot-product check needs the bound result (bound_fp64)")
        acc_t: DType = {"FP16": DType.FP16, "FP32": DType.FP32}.get(str(op.attrs.get("acc_type", "")).upper(), dt)
        has_bias = op.opcode in ("CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D") and len(ins) > 2 and \
            bool(np.any(np.asarray(ins[2], np.float64) != 0))
        return dot_product_check(ref_fp64, bnd, impl, kernel_size(op), out_dtype=dt, acc_dtype=acc_t,
                                 has_bias=has_bias, test_set=test_set, min_t=0 if test_set is not None else 64)
    if acc.mode == "rescale_inexact":
        a = op.attrs
        izp = int(np.asarray(ins[3]).reshape(-1)[0]) if len(ins) > 3 else 0
        ozp = int(np.asarray(ins[4]).reshape(-1)[0]) if len(ins) > 4 else 0
        lo, hi = (0, (1 << dt.bits) - 1) if a.get("output_unsigned") else dt.range()
        x = np.asarray(ins[0]).astype(np.int64)
        if a.get("input_unsigned"):
            x = x & ((1 << op.operands[0].type.dtype.bits) - 1)
            izp &= (1 << op.operands[0].type.dtype.bits) - 1
        got = np.asarray(impl).astype(np.int64)
        if a.get("output_unsigned"):
            got = got & ((1 << dt.bits) - 1)
            ozp &= (1 << dt.bits) - 1
        return rescale_inexact_check(x, got, ins[1], ins[2], izp, ozp, (lo, hi), bool(a.get("per_channel")))
    return CheckResult(True, int(np.size(impl)), 0, None, 0.0, "no requirement")
