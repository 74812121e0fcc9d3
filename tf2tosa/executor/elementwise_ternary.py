"""§2.7 Elementwise ternary operators: SELECT."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from .common import broadcast_shape
from .registry import kernel, to_out


@kernel("SELECT")
def select(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.7.1 SELECT: equal-rank three-way broadcast."""
    c, a, b = ins
    broadcast_shape(op, c, a, b)
    return [to_out(np.where(c.astype(bool), a, b), op)]
