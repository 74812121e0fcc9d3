"""§2.11 GATHER / SCATTER."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from .registry import error_if, kernel, require, to_out


@kernel("GATHER")
def gather(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.11.1 GATHER: values [N,K,C], indices [N,W] -> [N,W,C]."""
    values, idx = ins
    error_if(values.ndim != 3 or idx.ndim != 2 or idx.shape[0] != values.shape[0], op, "GATHER shapes")
    k = values.shape[1]
    require((idx >= 0) & (idx < k), op, f"indices in [0, {k})")
    n = np.arange(values.shape[0])[:, None]
    return [to_out(values[n, idx.astype(np.int64)], op)]


@kernel("SCATTER")
def scatter(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.11.2 SCATTER: positions written at most once."""
    values_in, idx, inp = ins
    error_if(values_in.ndim != 3 or idx.ndim != 2 or inp.ndim != 3, op, "SCATTER ranks")
    k = values_in.shape[1]
    require((idx >= 0) & (idx < k), op, f"indices in [0, {k})")
    ii = idx.astype(np.int64)
    for row in ii:
        require(len(np.unique(row)) == len(row), op, "each output position written at most once")
    out = values_in.copy()
    n = np.arange(values_in.shape[0])[:, None]
    out[n, ii] = inp
    return [to_out(out, op)]
