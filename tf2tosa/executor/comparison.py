"""§2.8 Comparison operators (NaN compares false)."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from .common import broadcast_shape, fcompute
from .registry import in_dtype, kernel, to_out


def _cmp(op: Operation, ins: list[np.ndarray], fn: np.ufunc) -> list[np.ndarray]:
    a, b = ins
    broadcast_shape(op, a, b)
    dt = in_dtype(op)
    if dt.is_float:
        a, b = fcompute(a, dt), fcompute(b, dt)
    else:
        a, b = a.astype(np.int64), b.astype(np.int64)
    with np.errstate(invalid="ignore"):
        return [to_out(fn(a, b), op)]


@kernel("EQUAL")
def equal(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    return _cmp(op, ins, np.equal)


@kernel("GREATER")
def greater(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    return _cmp(op, ins, np.greater)


@kernel("GREATER_EQUAL")
def greater_equal(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    return _cmp(op, ins, np.greater_equal)
