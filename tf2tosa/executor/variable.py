"""§2.17 Variables (EXT-VARIABLE): VARIABLE, VARIABLE_WRITE, VARIABLE_READ, with the stateful-ops RFC's memory model.

The RFC's ``variable_tensors`` list (persistent across graph invocations) is the ``variables`` dict of the run's
:class:`ExecState` (``run(..., variables=dict)``, or a :class:`~tf2tosa.executor.session.Session`): name -> the
variable's data.  A variable is in the dict only once it holds a value, so ``is_written`` is "the name is in the
dict".  A variable that is allocated but never written leaves nothing behind, which the spec cannot tell apart from
one that was never allocated: the next invocation's VARIABLE allocates it again with the same declaration.

The ``seen`` flag is ``ExecState.declared``: a fresh set per invocation (the spec clears ``seen`` at the start of
``tosa_execute_graph``), with the declared ``var_shape`` / ``var_t`` in ``ExecState.declarations``.  The variable is
identified by attribute ``name`` (or ``uid``).  Every check is a REQUIRE of spec 2.17 (status UNPREDICTABLE):

* VARIABLE: a second declaration in one invocation (``REQUIRE(!var_tensor.seen)``); an initial value whose type or
  shape is not the declared one (``REQUIRE(var_t == in_t)``, ``REQUIRE(var_shape == shape)``);
* VARIABLE_WRITE: a variable not declared in this invocation (``REQUIRE(variable_tensor.seen)``); a value of another
  shape or type than the variable's;
* VARIABLE_READ: a variable never declared, or declared but never written (``REQUIRE(variable_tensor.is_written)``);
  a result of another shape or type than the variable's.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from ..ir.types import DType
from .registry import PRECISE, ExecutionError, bind, kernel, op_label, require, to_out
from .runner import ExecState, current_state


def _key(op: Operation) -> str:
    for k in ("name", "uid"):
        if k in op.attrs:
            return str(op.attrs[k])
    raise ExecutionError("variable op without a name/uid attribute", op=op_label(op))


def _dtype(value: object) -> DType | None:
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        try:
            return DType(value)
        except ValueError:
            return None
    return None


def _same_type(arr: np.ndarray, t: DType | None) -> bool:
    """Whether ``arr`` holds elements of ``t`` (float data may be fp64 in the precise mode)."""
    if t is None:
        return True
    if t.is_float and (PRECISE.get() or arr.dtype == np.float64):
        return arr.dtype.kind == "f"
    return bool(arr.dtype == np.dtype(t.np_dtype()))


def _variable_shape(st: ExecState, key: str) -> tuple[tuple[int, ...], DType | None]:
    """The variable's shape and type: as declared in this invocation, else as its data from an earlier one."""
    if key in st.declarations:
        return st.declarations[key]
    arr = st.variables[key]
    return tuple(arr.shape), None


@kernel("VARIABLE")
def variable(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.17.1 VARIABLE: allocate on first use (with the initial value, if any); once per invocation."""
    st = current_state()
    key = _key(op)
    require(key not in st.declared, op, f"variable {key} declared twice in one invocation (seen is set)")
    init = op.attrs.get("initial_value")
    var_t = _dtype(op.attrs.get("type"))
    shape_attr = op.attrs.get("var_shape")
    if shape_attr is not None:
        var_shape = tuple(int(d) for d in np.asarray(shape_attr).reshape(-1))
    elif init is not None:
        var_shape = tuple(np.asarray(init).shape)
    else:
        raise ExecutionError(f"variable {key} has neither var_shape nor initial_value", op=op_label(op))
    st.declared.add(key)
    st.declarations[key] = (var_shape, var_t)
    if key not in st.variables and init is not None:  # invocation for the first time, with an initial value
        arr = np.asarray(init)
        require(_same_type(arr, var_t), op, f"variable {key}: initial value of type {arr.dtype}, var_t {var_t}")
        require(tuple(arr.shape) == var_shape, op,
                f"variable {key}: initial value of shape {list(arr.shape)}, var_shape {list(var_shape)}")
        st.variables[key] = np.array(arr, copy=True)  # is_written
    return []


@kernel("VARIABLE_WRITE")
def variable_write(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.17.2 VARIABLE_WRITE: only a variable declared in this invocation, with its own shape and type."""
    args = bind(op, ins)
    st = current_state()
    key = _key(op)
    require(key in st.declared, op, f"variable {key} written before its VARIABLE declaration in this invocation")
    shape, var_t = _variable_shape(st, key)
    x = np.asarray(args.input1)
    require(tuple(x.shape) == shape, op, f"variable {key}: value of shape {list(x.shape)} written to a variable "
                                         f"of shape {list(shape)}")
    require(_same_type(x, var_t), op, f"variable {key}: value of type {x.dtype} written to a {var_t} variable")
    st.variables[key] = np.array(x, copy=True)  # is_written
    return []


@kernel("VARIABLE_READ")
def variable_read(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.17.3 VARIABLE_READ: the variable's latest value; it must have been written."""
    st = current_state()
    key = _key(op)
    require(key in st.declared or key in st.variables, op, f"variable {key} read but never declared")
    require(key in st.variables, op, f"variable {key} read before any write (is_written is false)")
    arr = st.variables[key]
    t = op.results[0].type
    require(tuple(arr.shape) == tuple(t.shape), op,
            f"variable {key} of shape {list(arr.shape)} read as shape {list(t.shape)}")
    require(_same_type(arr, t.dtype), op, f"variable {key} of type {arr.dtype} read as {t.dtype.value}")
    return [to_out(arr, op)]
