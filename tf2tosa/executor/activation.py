"""§2.4 Activation functions: CLAMP, ERF, SIGMOID, TANH (float ones computed in fp32)."""

from __future__ import annotations

import functools
import math

import numpy as np

from ..ir.graph import Operation
from .common import F32, fcompute, float_unary, float_unary_wide
from .registry import bind, catalogue_attr, error_if, fdt, in_dtype, kernel, to_out

#: erf(x) = x * sum over n of _ERF_SERIES[n] * (x^2)^n for |x| < 1 (the Maclaurin series, 2/sqrt(pi) (-1)^n /
#: (n! (2n + 1)); 19 terms: the last is 4e-18 at |x| = 1)
_ERF_SERIES = tuple(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(19))
#: |x| in [lo, hi): erfc(x) = exp(-x^2) * G(x), G (erfcx, smooth) as a degree-16 Chebyshev interpolant; 1 from 6 on
_ERFC_PIECES = ((1.0, 2.5), (2.5, 6.0))
_ERFC_DEGREE = 16


@functools.cache
def _erfc_chebyshev(lo: float, hi: float) -> tuple[float, ...]:
    """Chebyshev coefficients of erfc(x) exp(x^2) on [lo, hi], interpolated at the Chebyshev points of the first kind
    (``math.erfc``, summed with ``math.fsum``: the same coefficients on every machine)."""
    n = _ERFC_DEGREE + 1
    theta = [math.pi * (j + 0.5) / n for j in range(n)]
    xs = [(math.cos(t) * (hi - lo) + lo + hi) / 2 for t in theta]
    fs = [math.erfc(x) * math.exp(x * x) for x in xs]
    return tuple((1.0 if k == 0 else 2.0) / n * math.fsum(f * math.cos(k * t) for f, t in zip(fs, theta))
                 for k in range(n))


def erf64(x: np.ndarray) -> np.ndarray:
    """erf of a float64 array, vectorised: the series below 1, ``1 - exp(-x^2) G(x)`` from 1 to 6, 1 beyond (odd,
    NaN kept).  Relative error below 3e-16 (within 2 ulp of ``math.erf``; rounded to fp32, every one of 5 million
    sampled float32 inputs gives ``math.erf``'s fp32 value)."""
    a = np.abs(x)
    t = np.minimum(a, 1.0)
    np.multiply(t, t, out=t)
    out = np.full_like(a, _ERF_SERIES[-1])
    for c in reversed(_ERF_SERIES[:-1]):  # Horner in x^2
        np.multiply(out, t, out=out)
        out += c
    out *= a
    big = np.flatnonzero(a >= 1.0)
    if big.size:
        ab = a.reshape(-1)[big]
        res = np.ones_like(ab)  # (from 6 on erf is 1 in float64 too: erfc(6) = 2e-17)
        for lo, hi in _ERFC_PIECES:
            j = np.flatnonzero((ab >= lo) & (ab < hi))
            if j.size:
                aj = ab[j]
                res[j] = 1.0 - np.exp(-aj * aj) * _clenshaw((2 * aj - (lo + hi)) / (hi - lo), _erfc_chebyshev(lo, hi))
        out.reshape(-1)[big] = res
    # (a NaN stays NaN: np.minimum keeps it through the series, and it is not >= 1)
    return np.copysign(out, x, out=out)  # type: ignore[no-any-return]


def _clenshaw(u: np.ndarray, c: tuple[float, ...]) -> np.ndarray:
    """sum over k of c[k] T_k(u) (Clenshaw's recurrence)."""
    b1, b2, tmp = np.zeros_like(u), np.zeros_like(u), np.empty_like(u)
    u2 = u + u
    for ck in reversed(c[1:]):
        np.multiply(u2, b1, out=tmp)
        tmp -= b2
        tmp += ck
        b1, b2, tmp = tmp, b1, b2
    np.multiply(u, b1, out=tmp)
    tmp -= b2
    tmp += c[0]
    return tmp


def erf_f32(x: np.ndarray) -> np.ndarray:
    """erf of float32 values: float64 :func:`erf64`, rounded once to fp32."""
    if x.size == 0:
        return x.astype(F32)
    return erf64(x.astype(np.float64)).astype(fdt())


def _float_clamp(op: Operation, ins: list[np.ndarray], out: np.ndarray | None) -> np.ndarray:
    args = bind(op, ins)
    lo = np.asarray(args.min_val).reshape(-1)[0].item()
    hi = np.asarray(args.max_val).reshape(-1)[0].item()
    flo, fhi = F32(lo), F32(hi)
    error_if(np.isnan(flo) or np.isnan(fhi), op, "NaN clamp bound")
    error_if(fhi < flo, op, f"max_val {hi} < min_val {lo}")
    xf = fcompute(args.input, in_dtype(op, 0))
    ignore = str(catalogue_attr(op, "nan_mode")).upper() == "IGNORE"
    if not ignore:
        # np.clip is ``x < lo ? lo : x > hi ? hi : x`` with NaN kept: apply_max_s then apply_min_s (S11391-11392,
        # ``a >= b ? a : b`` and ``a < b ? a : b``) for every x, in one pass, unless x and max_val are zeros of
        # opposite sign (the spec then returns max_val, np.minimum too; np.maximum would return min_val for
        # max(-0.0, +0.0), not the spec's -0.0)
        if fhi != 0:
            return np.clip(xf, flo, fhi, out=out)  # type: ignore[no-any-return]
        low = np.clip(xf, flo, F32(np.inf) if xf.dtype == np.float32 else np.inf, out=out)
        return np.minimum(low, fhi, out=low)  # type: ignore[no-any-return]
    lower, upper = (np.fmax, np.fmin) if ignore else (np.maximum, np.minimum)
    if out is None:
        return upper(lower(xf, flo), fhi)  # type: ignore[no-any-return]
    lower(xf, flo, out=out)
    return upper(out, fhi, out=out)  # type: ignore[no-any-return]


def clamp_inplace(op: Operation, ins: list[np.ndarray]) -> np.ndarray:
    """CLAMP of an fp32 operand no other op reads, written over it (the runner's plan decides when)."""
    return _float_clamp(op, ins, ins[0])


@kernel("CLAMP")
def clamp(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.4.1 CLAMP."""
    args = bind(op, ins)
    x = args.input
    dt = in_dtype(op, 0)
    lo = np.asarray(args.min_val).reshape(-1)[0].item()
    hi = np.asarray(args.max_val).reshape(-1)[0].item()
    if dt.is_float:
        return [to_out(_float_clamp(op, ins, None), op)]
    ilo, ihi = int(lo), int(hi)
    error_if(ihi < ilo, op, f"max_val {hi} < min_val {lo}")
    return [to_out(np.clip(x.astype(np.int64), ilo, ihi), op)]


@kernel("ERF")
def erf(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary(op, args.input, erf_f32)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) in ``x``'s type, computed in place (``x`` is float_unary_wide's own float64 copy)."""
    np.negative(x, out=x)
    np.exp(x, out=x)
    x += 1
    return np.divide(1, x, out=x)  # type: ignore[no-any-return]


@kernel("SIGMOID")
def sigmoid(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary_wide(op, args.input, _sigmoid)


@kernel("TANH")
def tanh(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary_wide(op, args.input, np.tanh)
