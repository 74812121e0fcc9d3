"""Graph interpreter: runs a TOSA graph with the registered kernels."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..ir.graph import Graph, Operation, Value
from ..ir.types import DType, TensorType
from .registry import KERNELS, PRECISE, ExecutionError, op_label


@dataclass
class ExecState:
    """Per-run state: persistent variables (EXT-VARIABLE) and nesting depth."""

    variables: dict[str, np.ndarray] = field(default_factory=dict)
    declared: set[str] = field(default_factory=set)
    depth: int = 0
    profile: dict[str, float] | None = None
    trace: dict[str, np.ndarray] | None = None


_STATE: contextvars.ContextVar[ExecState | None] = contextvars.ContextVar("tf2tosa_exec_state", default=None)


def current_state() -> ExecState:
    st = _STATE.get()
    if st is None:
        st = ExecState()
        _STATE.set(st)
    return st


def storage(arr: Any, t: TensorType) -> np.ndarray:
    """Cast ``arr`` to the storage numpy type of ``t``."""
    a = np.asarray(arr)
    dt = np.dtype(np.float64) if PRECISE.get() and t.dtype.is_float else t.dtype.np_dtype()
    if a.dtype != dt:
        a = a.astype(dt)
    return a


def _check_result(op: Operation, i: int, arr: np.ndarray) -> np.ndarray:
    t = op.results[i].type
    arr = storage(arr, t)
    if t.dtype is DType.SHAPE:
        arr = arr.reshape(-1)
        exp_len = t.shape[0] if t.shape else None
        if isinstance(exp_len, int) and arr.shape[0] != exp_len:
            raise ExecutionError(f"result {i} has {arr.shape[0]} shape elements, type says {exp_len}",
                                 op=op_label(op))
        return arr
    if len(t.shape) != arr.ndim or any(isinstance(d, int) and d != s for d, s in zip(t.shape, arr.shape)):
        raise ExecutionError(f"result {i} has shape {list(arr.shape)}, type says {list(t.shape)}",
                             op=op_label(op))
    return arr


def evaluate_op(op: Operation, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run one operation on arrays (for constant folding).  Results are cast to the result types."""
    fn = KERNELS.get(op.opcode) if op.dialect == "tosa" else None
    if fn is None:
        raise ExecutionError(f"no executor kernel for {op.name}", op=op_label(op))
    args = [storage(a, v.type) for a, v in zip(inputs, op.operands)]
    try:
        outs = fn(op, args)
    except ExecutionError as e:
        if e.op is None:
            raise ExecutionError(str(e), op=op_label(op)) from None
        raise
    except (ValueError, IndexError, TypeError, KeyError, ZeroDivisionError, OverflowError) as e:
        raise ExecutionError(f"kernel failed: {type(e).__name__}: {e}", op=op_label(op)) from e
    if len(outs) != len(op.results):
        raise ExecutionError(f"kernel returned {len(outs)} results, op has {len(op.results)}", op=op_label(op))
    return [_check_result(op, i, a) for i, a in enumerate(outs)]


def _bind_inputs(graph: Graph, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[int, np.ndarray]:
    env: dict[int, np.ndarray] = {}
    if isinstance(inputs, Mapping):
        names = {v.name for v in graph.inputs}
        for k in inputs:
            if k not in names:
                raise InputError(f"unknown input name {k!r}; the graph inputs are {sorted(names)}", tensor=str(k))
        for v in graph.inputs:
            if v.name not in inputs:
                raise InputError(f"missing input {v.name!r}", tensor=v.name)
            env[v.id] = _check_input(v, inputs[v.name])
    else:
        seq = list(inputs)
        if len(seq) != len(graph.inputs):
            raise InputError(f"expected {len(graph.inputs)} inputs, got {len(seq)}")
        for v, a in zip(graph.inputs, seq):
            env[v.id] = _check_input(v, a)
    return env


def _check_input(v: Value, a: Any) -> np.ndarray:
    arr = np.asarray(a)
    t = v.type
    want = t.dtype.np_dtype()
    if arr.dtype != want:
        raise InputError(f"input {v.name!r} has dtype {arr.dtype}, expected {want} ({t.dtype.value})", tensor=v.name)
    shape = tuple(arr.shape)
    if t.dtype is DType.SHAPE:
        return arr
    ok = len(shape) == len(t.shape) and all(not isinstance(d, int) or d < 0 or d == s
                                             for d, s in zip(t.shape, shape))
    if not ok:
        raise InputError(f"input {v.name!r} has shape {list(shape)}, expected {list(t.shape)}", tensor=v.name)
    return arr


def run_graph(graph: Graph, args: Sequence[np.ndarray] | Mapping[str, Any], state: ExecState) -> list[np.ndarray]:
    """Run ``graph`` (also used for COND_IF / WHILE_LOOP regions); returns the outputs in order."""
    env = _bind_inputs(graph, args)
    trace = state.trace if state.depth == 0 else None
    if trace is not None:
        for v in graph.inputs:
            trace[v.name] = env[v.id]
    prof = state.profile if state.depth == 0 else None
    for op in graph.topological_order():
        ins = []
        for v in op.operands:
            if v.id not in env:
                raise ExecutionError(f"operand {v.name} has no value (not produced in this graph)", op=op_label(op))
            ins.append(env[v.id])
        t0 = time.perf_counter() if prof is not None else 0.0
        outs = evaluate_op(op, ins)
        if prof is not None:
            key = f"{op.name}#{op.id}"
            prof[key] = prof.get(key, 0.0) + time.perf_counter() - t0
        for r, a in zip(op.results, outs):
            env[r.id] = a
            if trace is not None:
                trace[r.name] = a
    out = []
    for v in graph.outputs:
        if v.id not in env:
            raise ExecutionError(f"graph output {v.name} is never computed")
        out.append(env[v.id])
    return out


def run(graph: Graph, inputs: Mapping[str, Any] | Sequence[Any], *, trace: bool = False,
        variables: dict[str, np.ndarray] | None = None, precise: bool = False) -> dict[str, np.ndarray]:
    """Run ``graph`` on ``inputs`` (by input name, or a list in input order).

    Returns the outputs keyed by output value name, in output order.  With
    ``trace=True`` every value of the top-level graph (inputs, intermediates,
    outputs) is returned by value name instead.  ``variables`` (name -> array) holds
    EXT-VARIABLE state and is updated in place, so passing the same dict to several
    runs keeps state across invocations.  ``precise=True`` computes float ops in fp64 (the reference
    model's precise mode); float outputs are then float64 arrays.
    """
    token = PRECISE.set(precise)
    try:
        res, _ = _run(graph, inputs, trace=trace, variables=variables, profile=False)
    finally:
        PRECISE.reset(token)
    return res


def run_with_profile(graph: Graph, inputs: Mapping[str, Any] | Sequence[Any]
                     ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Like :func:`run`, also returning seconds spent per op (``tosa.CONV2D#12`` keys)."""
    res, prof = _run(graph, inputs, trace=False, variables=None, profile=True)
    assert prof is not None
    return res, prof


def _run(graph: Graph, inputs: Mapping[str, Any] | Sequence[Any], *, trace: bool,
         variables: dict[str, np.ndarray] | None, profile: bool
         ) -> tuple[dict[str, np.ndarray], dict[str, float] | None]:
    state = ExecState(variables=variables if variables is not None else {})
    state.trace = {} if trace else None
    state.profile = {} if profile else None
    token = _STATE.set(state)
    try:
        outs = run_graph(graph, inputs, state)
    finally:
        _STATE.reset(token)
    if trace:
        assert state.trace is not None
        return state.trace, state.profile
    return {v.name: a for v, a in zip(graph.outputs, outs)}, state.profile
