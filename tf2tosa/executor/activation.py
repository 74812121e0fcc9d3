"""§2.4 Activation functions: CLAMP, ERF, SIGMOID, TANH (float ones computed in fp32)."""

from __future__ import annotations

import math

import numpy as np

from ..ir.graph import Operation
from .common import F32, fcompute, float_unary, float_unary_wide
from .registry import bind, catalogue_attr, error_if, fdt, in_dtype, kernel, to_out

_erf64 = np.frompyfunc(math.erf, 1, 1)


def erf_f32(x: np.ndarray) -> np.ndarray:
    """erf of float32 values: exact float64 math.erf, rounded once to fp32."""
    if x.size == 0:
        return x.astype(F32)
    return np.asarray(_erf64(x.astype(np.float64)), dtype=np.float64).astype(fdt())


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
    return (F32(1) / (F32(1) + np.exp(-x))).astype(x.dtype)


@kernel("SIGMOID")
def sigmoid(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary_wide(op, args.input, _sigmoid)


@kernel("TANH")
def tanh(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary_wide(op, args.input, np.tanh)
