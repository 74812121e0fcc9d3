"""§2.9 Reduction operators: one axis, output keeps the rank with the axis dim 1."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from . import numerics as nm
from .common import fcompute
from .registry import bind, catalogue_attr, error_if, in_dtype, kernel, to_out


def _axis(op: Operation, x: np.ndarray) -> int:
    axis = int(catalogue_attr(op, "axis"))
    error_if(axis < 0 or axis >= x.ndim, op, f"axis {axis} out of range for rank {x.ndim}")
    return axis


@kernel("REDUCE_ALL")
def reduce_all(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    x = args.input
    return [to_out(np.all(x.astype(bool), axis=_axis(op, x), keepdims=True), op)]


@kernel("REDUCE_ANY")
def reduce_any(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    x = args.input
    return [to_out(np.any(x.astype(bool), axis=_axis(op, x), keepdims=True), op)]


def _minmax(op: Operation, x: np.ndarray, is_max: bool) -> list[np.ndarray]:
    axis = _axis(op, x)
    dt = in_dtype(op)
    if dt.is_float:
        xf = fcompute(x, dt)
        if str(catalogue_attr(op, "nan_mode")).upper() == "IGNORE":
            fn = np.fmax if is_max else np.fmin
            return [to_out(fn.reduce(xf, axis=axis, keepdims=True), op)]
        return [to_out(xf.max(axis=axis, keepdims=True) if is_max else xf.min(axis=axis, keepdims=True), op)]
    return [to_out(x.max(axis=axis, keepdims=True) if is_max else x.min(axis=axis, keepdims=True), op)]


@kernel("REDUCE_MAX")
def reduce_max(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.9.3 REDUCE_MAX."""
    args = bind(op, ins)
    return _minmax(op, args.input, True)


@kernel("REDUCE_MIN")
def reduce_min(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return _minmax(op, args.input, False)


@kernel("REDUCE_PRODUCT")
def reduce_product(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    x = args.input
    axis = _axis(op, x)
    with np.errstate(all="ignore"):
        return [to_out(np.prod(fcompute(x, in_dtype(op)), axis=axis, keepdims=True), op)]


@kernel("REDUCE_SUM")
def reduce_sum(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.9.6 REDUCE_SUM: i32 accumulation with the overflow REQUIRE; floats accumulate in fp32."""
    args = bind(op, ins)
    x = args.input
    axis = _axis(op, x)
    dt = in_dtype(op)
    if dt.is_float:
        with np.errstate(all="ignore"):
            xf = fcompute(x, dt)  # fp32, or fp64 in precise mode
            return [to_out(np.asarray(np.sum(xf, axis=axis, keepdims=True, dtype=xf.dtype)), op)]
    s = np.sum(x.astype(np.int64), axis=axis, keepdims=True)
    # the partial sums are monotone only for same-sign inputs; the final-sum check covers the common case
    nm.check_fits(s, dt, "REDUCE_SUM accumulator")
    return [to_out(s, op)]
