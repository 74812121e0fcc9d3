"""§2.16 Control flow: COND_IF (regions [then, else]) and WHILE_LOOP (regions [cond, body])."""

from __future__ import annotations

import os

import numpy as np

from ..ir.graph import Operation
from .registry import ExecutionError, bind, error_if, kernel, op_label, to_out
from .runner import current_state, run_graph

MAX_NESTING = 256  # level none (Table 4); run_checked(level="8K") lowers it to 6 via ExecState.max_nesting
#: WHILE_LOOP iterations before the executor gives up on a loop that does not end (ExecutionError);
#: environment variable TF2TOSA_MAX_WHILE_ITERATIONS
MAX_ITERATIONS = int(os.environ.get("TF2TOSA_MAX_WHILE_ITERATIONS", "100000"))


def _run_region(op: Operation, idx: int, args: list[np.ndarray]) -> list[np.ndarray]:
    error_if(len(op.regions) <= idx, op, f"missing region {idx}")
    st = current_state()
    error_if(st.depth >= st.max_nesting, op, f"control-flow nesting depth {st.depth} >= MAX_NESTING {st.max_nesting}")
    st.depth += 1
    try:
        return run_graph(op.regions[idx], args, st)
    finally:
        st.depth -= 1


@kernel("COND_IF")
def cond_if(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.16.1 COND_IF."""
    args = bind(op, ins)
    cond = args.condition
    error_if(cond.size != 1, op, "condition must have exactly one element")
    outs = _run_region(op, 0 if bool(cond.reshape(-1)[0]) else 1, list(args.input_list))
    error_if(len(outs) != len(op.results), op, "branch output count != op result count")
    return [to_out(a, op, i) for i, a in enumerate(outs)]


@kernel("WHILE_LOOP")
def while_loop(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.16.2 WHILE_LOOP."""
    vals = list(ins)
    for _ in range(MAX_ITERATIONS):
        c = _run_region(op, 0, vals)
        error_if(len(c) != 1 or c[0].size != 1, op, "cond_graph must return one bool")
        if not bool(c[0].reshape(-1)[0]):
            error_if(len(vals) != len(op.results), op, "loop value count != op result count")
            return [to_out(a, op, i) for i, a in enumerate(vals)]
        new = _run_region(op, 1, vals)
        error_if(len(new) != len(vals), op, "body_graph output count != input count")
        vals = [np.asarray(a).astype(v.dtype, copy=False) for a, v in zip(new, vals)]
    raise ExecutionError(f"the loop did not end within {MAX_ITERATIONS} iterations (TF2TOSA_MAX_WHILE_ITERATIONS)",
                         op=op_label(op))
