"""§2.18 Shape operators: CONST_SHAPE (shape_t values are int64 1-D arrays at run time)."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from .registry import kernel


@kernel("CONST_SHAPE")
def const_shape(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(op.attrs["values"], dtype=np.int64).reshape(-1)]
