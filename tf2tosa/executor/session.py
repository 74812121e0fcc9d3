"""Streaming sessions: run a TOSA program step after step with its state carried between invocations.

A :class:`Session` holds the state of one stream.  It works on both forms of a stateful program:

* **EXT-VARIABLE form**: the graph declares ``VARIABLE``s; the session owns the RFC's persistent
  ``variable_tensors`` (the ``variables`` dict the executor updates, see :mod:`.variable`), so each
  :meth:`Session.run` is one ``tosa_execute_graph`` invocation with the state of the previous ones;
* **state-as-I/O form** (``--state-io``, :mod:`tf2tosa.converter.passes.state_io`): each variable is a graph input
  ``<name>_state_in`` and a graph output ``<name>_state_out``; the session feeds the previous state in and keeps the
  next state, so the caller sees the same inputs and outputs as in the EXT-VARIABLE form.

Two sessions on one graph share nothing.  ``session.state`` reads and sets the state by variable name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..ir.graph import Graph
from ..ir.types import DType, TensorType
from .runner import run

#: suffixes of the graph input / output that carry a variable's state in the state-as-I/O form
STATE_IN_SUFFIX = "_state_in"
STATE_OUT_SUFFIX = "_state_out"


@dataclass(frozen=True)
class StateVariable:
    """One piece of state: its variable name, type, initial value (None: none known) and, in the state-as-I/O form,
    the graph input and output carrying it."""

    name: str
    type: TensorType
    initial: np.ndarray | None = None
    input: str | None = None
    output: str | None = None
    #: how the stored (TOSA) form holds the source's values, when they differ (``graph.record.state_encoding``):
    #: ``"i32-bytes"`` / ``"i16-bytes"`` (the value's bytes, last axis), ``"u8-offset"`` (uint8 stored as u - 128)
    encoding: str | None = None

    @property
    def value_dtype(self) -> np.dtype:
        """The dtype of the source's values (what ``session.state`` shows and takes)."""
        enc = {"i32-bytes": np.int32, "i16-bytes": np.int16, "u8-offset": np.uint8}.get(self.encoding or "")
        return np.dtype(enc) if enc is not None else np.dtype(self.type.dtype.np_dtype())

    @property
    def value_shape(self) -> tuple[int, ...]:
        shape = tuple(int(d) for d in self.type.shape)
        return shape[:-1] if self.encoding in ("i32-bytes", "i16-bytes") else shape


_BYTES = {"i32-bytes": 4, "i16-bytes": 2}


def decode_state(var: StateVariable, stored: np.ndarray) -> np.ndarray:
    """The source's value of a stored state (the inverse of :func:`encode_state`)."""
    if var.encoding == "u8-offset":
        return (stored.astype(np.int16) + 128).astype(np.uint8)
    n = _BYTES.get(var.encoding or "")
    if n:
        x = stored.astype(np.int64)
        v = sum(((x[..., j] + 128) << (8 * j)) for j in range(n - 1)) + (x[..., n - 1] << (8 * (n - 1)))
        return np.asarray(v).astype(var.value_dtype)
    return np.array(stored, copy=True)


def encode_state(var: StateVariable, value: np.ndarray) -> np.ndarray:
    """A source value in the stored (TOSA) form."""
    if var.encoding == "u8-offset":
        return (value.astype(np.int16) - 128).astype(np.int8)
    n = _BYTES.get(var.encoding or "")
    if n:
        x = value.astype(np.int64)
        parts = [((x >> (8 * j)) & 255) - 128 for j in range(n - 1)] + [x >> (8 * (n - 1))]
        return np.stack(parts, axis=-1).astype(np.int8)
    return np.array(value, copy=True)


def _var_type(attrs: Mapping[str, Any]) -> TensorType:
    dt = attrs.get("type")
    if not isinstance(dt, DType):
        init = attrs.get("initial_value")
        kind = None if init is None else np.asarray(init).dtype
        dt = next((d for d in (DType.FP32, DType.FP16, DType.INT8) if d.np_dtype() == kind), DType.FP32)
    shape = attrs.get("var_shape")
    if shape is None:
        shape = np.asarray(attrs.get("initial_value")).shape
    return TensorType(tuple(int(d) for d in np.asarray(shape).reshape(-1)), dt)


def state_variables(graph: Graph) -> list[StateVariable]:
    """The program's state: its ``VARIABLE`` declarations, or its state input/output pairs (recorded by the
    state-as-I/O pass in ``graph.record.state_io``, else found by name in a ``.tosa`` read back)."""
    found: list[StateVariable] = []
    encoding: dict[str, str] = dict(graph.record.state_encoding)
    for op in sorted(graph.ops.values(), key=lambda o: o.id):
        if op.opcode == "VARIABLE":
            init = op.attrs.get("initial_value")
            name = str(op.attrs.get("name", op.attrs.get("uid")))
            found.append(StateVariable(name, _var_type(op.attrs), None if init is None else np.asarray(init),
                                       encoding=encoding.get(name)))
    recorded = {str(p["variable"]): p for p in graph.record.state_io}
    outs = {v.name: v for v in graph.outputs}
    for v in graph.inputs:
        if not v.name.endswith(STATE_IN_SUFFIX):
            continue
        name = v.name[: -len(STATE_IN_SUFFIX)]
        o = outs.get(name + STATE_OUT_SUFFIX)
        if o is None or tuple(o.type.shape) != tuple(v.type.shape) or o.dtype is not v.dtype:
            continue
        init = recorded.get(name, {}).get("initial")
        found.append(StateVariable(name, v.type, None if init is None else np.asarray(init), v.name, o.name,
                                   encoding.get(name)))
    return found


def check_state_value(var: StateVariable, value: Any, what: str = "state", file: str | None = None,
                      stored: bool = False) -> np.ndarray:
    """``value`` (a source value, or with ``stored`` the stored form) as the variable's stored array; an
    :class:`InputError` naming the variable when its shape or dtype is not the variable's."""
    arr = np.asarray(value)
    if var.encoding and not stored:
        if arr.dtype != var.value_dtype or tuple(arr.shape) != var.value_shape:
            raise InputError(f"{what} of variable {var.name!r}: {arr.dtype} {list(arr.shape)} given, the variable "
                             f"holds {var.value_dtype} {list(var.value_shape)}", file=file, tensor=var.name)
        return encode_state(var, arr)
    want = np.dtype(var.type.dtype.np_dtype())
    if arr.dtype != want:  # no silent reinterpretation: uint8 state is stored as u - 128, not as its bits
        raise InputError(f"{what} of variable {var.name!r}: dtype {arr.dtype} given, the variable holds {want} "
                         "(the TOSA storage form, see the guide's state types)", file=file, tensor=var.name)
    if tuple(arr.shape) != tuple(var.type.shape):
        raise InputError(f"{what} of variable {var.name!r}: shape {list(arr.shape)} given, the variable has shape "
                         f"{list(var.type.shape)}", file=file, tensor=var.name)
    return np.array(arr, copy=True)


class _StateView(MutableMapping[str, np.ndarray]):
    """``session.state``: variable name -> its current value (a copy, in the source's type: int32/int16/uint8 state
    stored in another form is decoded); assigning sets it (checked, encoded)."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def __getitem__(self, name: str) -> np.ndarray:
        self._s._var(name)
        got = self._s._values.get(name)
        if got is None:
            raise KeyError(name)
        return decode_state(self._s._var(name), got)

    def __setitem__(self, name: str, value: Any) -> None:
        self._s._values[name] = check_state_value(self._s._var(name), value, file=self._s.file)

    def __delitem__(self, name: str) -> None:
        self._s._var(name)
        self._s._values.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter([v.name for v in self._s.variables if v.name in self._s._values])

    def __len__(self) -> int:
        return sum(1 for v in self._s.variables if v.name in self._s._values)


class Session:
    """One stream of invocations of ``graph`` (see the module docstring).

    ``run(inputs)`` runs one step; ``reset()`` returns to the initial state; ``state`` reads or sets the state by
    variable name; ``steps`` counts the steps run since the last reset.
    """

    def __init__(self, graph: Graph, file: str | None = None) -> None:
        self.graph = graph
        self.file = file
        self.variables = state_variables(graph)
        self._by_name = {v.name: v for v in self.variables}
        self._state_inputs = {v.input: v for v in self.variables if v.input is not None}
        self._state_outputs = {v.output: v for v in self.variables if v.output is not None}
        #: variable name -> value; in the EXT-VARIABLE form this is the executor's persistent variable store
        self._values: dict[str, np.ndarray] = {}
        self.steps = 0
        self.reset()

    # ------------------------------------------------------------------ facts
    @property
    def state_io(self) -> bool:
        """True for the state-as-I/O form (the state travels through graph inputs and outputs)."""
        return bool(self._state_inputs)

    @property
    def input_names(self) -> list[str]:
        """The inputs a step takes (the state inputs are the session's)."""
        return [v.name for v in self.graph.inputs if v.name not in self._state_inputs]

    @property
    def output_names(self) -> list[str]:
        """The outputs a step returns (the state outputs are kept as the next state)."""
        return [v.name for v in self.graph.outputs if v.name not in self._state_outputs]

    @property
    def state(self) -> MutableMapping[str, np.ndarray]:
        return _StateView(self)

    @state.setter
    def state(self, values: Mapping[str, Any]) -> None:
        view = _StateView(self)
        for k, v in values.items():
            view[k] = v

    def _var(self, name: str) -> StateVariable:
        got = self._by_name.get(name)
        if got is None:
            known = ", ".join(sorted(self._by_name)) or "none"
            raise InputError(f"no state variable named {name!r} (variables: {known})", file=self.file, tensor=name)
        return got

    # ------------------------------------------------------------------- runs
    def reset(self) -> None:
        """Back to the initial state: the next step starts from the variables' initial values (variables without
        one hold nothing until written or set)."""
        self._values.clear()
        for v in self.variables:  # the state before the first step (what the first VARIABLE would allocate)
            if v.initial is not None:
                self._values[v.name] = check_state_value(v, v.initial, "initial value", self.file, stored=True)
        self.steps = 0

    def run(self, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[str, np.ndarray]:
        """One step: returns the outputs by name (without the state outputs) and keeps the new state."""
        if not isinstance(inputs, Mapping):
            names = self.input_names
            if len(inputs) != len(names):
                raise InputError(f"{len(inputs)} inputs given, a step takes {len(names)}: {', '.join(names)}",
                                 file=self.file)
            inputs = dict(zip(names, inputs))
        feed = dict(inputs)
        for name in feed:
            if name in self._state_inputs:
                raise InputError(f"input {name!r} carries the state of variable {self._state_inputs[name].name!r}: "
                                 "set it through the session's state", file=self.file, tensor=name)
        if self.state_io:
            for name, var in self._state_inputs.items():
                got = self._values.get(var.name)
                if got is None:
                    raise InputError(f"variable {var.name!r} is read before any write: it has no initial value; "
                                     "set its state first (session.state / --state NAME=FILE.npy)",
                                     file=self.file, tensor=var.name)
                feed[name] = got
            outs = run(self.graph, feed)
            for name, var in self._state_outputs.items():
                self._values[var.name] = np.array(outs.pop(name), copy=True)
        else:
            outs = run(self.graph, feed, variables=self._values)
        self.steps += 1
        return outs


__all__ = ["STATE_IN_SUFFIX", "STATE_OUT_SUFFIX", "Session", "StateVariable", "check_state_value", "decode_state",
           "encode_state", "state_variables"]
