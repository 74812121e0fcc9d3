"""Helpers shared by the elementwise kernels: broadcasting (spec 4.4.6 broadcast_shape) and float evaluation."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.graph import Operation
from ..ir.types import DType
from .registry import PRECISE, error_if, in_dtype, to_out

F32 = np.float32


def broadcast_shape(op: Operation, *arrays: np.ndarray) -> tuple[int, ...]:
    """broadcast_shape (spec 4.4.6 broadcast_shape): equal ranks, dims equal or 1."""
    rank = arrays[0].ndim
    error_if(any(a.ndim != rank for a in arrays), op, f"operand ranks differ: {[a.ndim for a in arrays]}")
    shape = []
    for i in range(rank):
        dims = {a.shape[i] for a in arrays}
        big = dims - {1}
        error_if(len(big) > 1, op, f"dimension {i} does not broadcast: {sorted(dims)}")
        shape.append(big.pop() if big else 1)
    return tuple(shape)


def fcompute(x: np.ndarray, dt: DType) -> np.ndarray:
    """Float operand in its compute type (fp32; fp16/bf16/fp8 are exact in fp32)."""
    return x.astype(np.float64 if dt is DType.FP64 or PRECISE.get() else F32, copy=False)


def float_unary(op: Operation, x: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return [to_out(fn(fcompute(x, in_dtype(op, 0))), op)]


def float_unary_wide(op: Operation, x: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> list[np.ndarray]:
    """A transcendental function evaluated in fp64 and rounded once to the output type.

    numpy's fp32 ``exp``/``sin``/… are vectorised approximations whose error can exceed one ulp, which is
    already beyond the spec's bound for EXP near 0 (calcAbsErrorBound(out_ref, 1+|x|, 0, 1) is ~1 ulp there).
    The fp64 result rounded to fp32 is within half an ulp plus a negligible double-rounding term.
    """
    with np.errstate(all="ignore"):
        return [to_out(fn(x.astype(np.float64)), op)]


def float_binary(op: Operation, a: np.ndarray, b: np.ndarray,
                 fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> list[np.ndarray]:
    broadcast_shape(op, a, b)
    with np.errstate(all="ignore"):
        return [to_out(fn(fcompute(a, in_dtype(op, 0)), fcompute(b, in_dtype(op, 1))), op)]
