"""§2.14 Data nodes: CONST, IDENTITY (and the not-executable CUSTOM)."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from .registry import ExecutionError, bind, kernel, op_label, to_out


@kernel("CONST")
def const(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    return [to_out(np.asarray(op.attrs["values"]), op)]


@kernel("IDENTITY")
def identity(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return [to_out(args.input1, op)]


@kernel("CUSTOM")
def custom(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    name = op.attrs.get("operator_name", "?")
    raise ExecutionError(f"CUSTOM operator {name!r} is implementation defined and cannot be run",
                         op=op_label(op))
