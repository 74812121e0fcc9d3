"""§2.17 Variables (EXT-VARIABLE): VARIABLE, VARIABLE_WRITE, VARIABLE_READ.

State lives in the run's :class:`ExecState` (``run(..., variables=dict)`` keeps it
across invocations).  The variable is identified by attribute ``name`` (or ``uid``).
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from .registry import ExecutionError, bind, error_if, kernel, op_label, require, to_out
from .runner import current_state


def _key(op: Operation) -> str:
    for k in ("name", "uid"):
        if k in op.attrs:
            return str(op.attrs[k])
    raise ExecutionError("variable op without a name/uid attribute", op=op_label(op))


def _initial(op: Operation, key: str) -> np.ndarray | None:
    for src in (op.attrs, op.results[0].graph.variables.get(key, {}) if op.results else {},):
        for k in ("initial_value", "values", "value", "data"):
            if k in src and src[k] is not None:
                return np.asarray(src[k])
    return None


@kernel("VARIABLE")
def variable(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.17.1 VARIABLE: declare once; keep an existing value from a previous invocation."""
    st = current_state()
    key = _key(op)
    error_if(key in st.declared, op, f"variable {key} declared twice")
    st.declared.add(key)
    if key not in st.variables:
        init = _initial(op, key)
        if init is None:
            shape = op.attrs.get("var_shape", ())
            init = np.zeros([int(d) for d in np.asarray(shape).reshape(-1)], np.float32)
        st.variables[key] = init
    return [to_out(st.variables[key], op, i) for i in range(len(op.results))]


@kernel("VARIABLE_WRITE")
def variable_write(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    st = current_state()
    key = _key(op)
    if key in st.variables:
        old = st.variables[key]
        require(old.shape == args.input1.shape, op, f"shape {args.input1.shape} != variable shape {old.shape}")
    st.variables[key] = np.array(args.input1, copy=True)
    return []


@kernel("VARIABLE_READ")
def variable_read(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    st = current_state()
    key = _key(op)
    if key not in st.variables:
        init = _initial(op, key)
        require(init is not None, op, f"variable {key} read before it was written")
        assert init is not None
        st.variables[key] = init
    return [to_out(st.variables[key], op)]
