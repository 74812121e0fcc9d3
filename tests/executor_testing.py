"""Helpers to build single-op TOSA graphs (tests, differential checks against the reference model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tf2tosa.executor.registry import KERNELS
from tf2tosa.executor.runner import run
from tf2tosa.ir.graph import Graph, Value
from tf2tosa.ir.types import DType, TensorType, dtype_from_numpy


@dataclass
class In:
    """A run-time graph input holding ``arr`` (dtype defaults to the array's)."""

    arr: Any
    dtype: DType | None = None
    name: str | None = None


@dataclass
class Const:
    """A tosa.CONST operand (use for zero points, tables, shifts, weights that must be constant)."""

    arr: Any
    dtype: DType | None = None


@dataclass
class Shape:
    """A tosa.CONST_SHAPE operand."""

    values: Any


def _dt(arr: np.ndarray, dt: DType | None) -> DType:
    return dt if dt is not None else dtype_from_numpy(arr.dtype)


def single_op(opcode: str, args: list[Any], out: list[DType | tuple[DType, tuple[int, ...]]] | DType,
              attrs: dict[str, Any] | None = None) -> tuple[Graph, dict[str, np.ndarray]]:
    """Build ``tosa.<opcode>`` over ``args`` (In / Const / Shape / bare array = Const).

    ``out`` gives each result dtype, optionally with its shape; a missing shape is
    found by running the kernel once.  Returns the graph and its input feed.
    """
    g = Graph("single_" + opcode.lower())
    feed: dict[str, np.ndarray] = {}
    operands: list[Value] = []
    for i, a in enumerate(args):
        if isinstance(a, In):
            arr = np.asarray(a.arr)
            dt = _dt(arr, a.dtype)
            v = g.add_input(a.name or f"in{i}", TensorType(arr.shape, dt))
            feed[v.name] = arr.astype(dt.np_dtype())
        elif isinstance(a, Shape):
            vals = np.asarray(a.values, dtype=np.int64).reshape(-1)
            v = g.add_const(vals, DType.SHAPE, name=f"shape{i}", op_name="tosa.CONST_SHAPE")
        else:
            c = a if isinstance(a, Const) else Const(a)
            arr = np.asarray(c.arr)
            dt = _dt(arr, c.dtype)
            v = g.add_const(arr.astype(dt.np_dtype()), dt, name=f"c{i}")
        operands.append(v)
    outs = out if isinstance(out, list) else [out]
    types: list[TensorType] = []
    need_shape = False
    for o in outs:
        if isinstance(o, tuple):
            types.append(TensorType(o[1], o[0]))
        else:
            need_shape = True
            types.append(TensorType((), o))
    op = g.add_op("tosa." + opcode, operands, types, attrs or {})
    if need_shape:
        args_now = [feed[v.name] if v.producer is None else _const_val(v) for v in operands]
        res = KERNELS[opcode](op, args_now)
        for r, a in zip(op.results, res):
            if not isinstance(outs[r.index], tuple):
                r.type = TensorType(np.asarray(a).shape, r.type.dtype)
    g.outputs = list(op.results)
    return g, feed


def _const_val(v: Value) -> np.ndarray:
    c = v.const()
    assert c is not None
    return np.asarray(c, dtype=v.type.dtype.np_dtype()) if v.type.dtype is not DType.SHAPE else c.astype(np.int64)


def run_single(opcode: str, args: list[Any], out: list[DType | tuple[DType, tuple[int, ...]]] | DType,
               attrs: dict[str, Any] | None = None) -> list[np.ndarray]:
    """Build and run a single-op graph; returns the results in order."""

    g, feed = single_op(opcode, args, out, attrs)
    res = run(g, feed)
    return list(res.values())


class GraphBuilder:
    """Build a graph of many independent ops over fresh inputs (one reference-model run checks them all)."""

    def __init__(self, name: str = "multi") -> None:
        self.graph = Graph(name)
        self.feed: dict[str, np.ndarray] = {}
        self._n = 0
        self._vals: dict[int, np.ndarray] = {}

    def _value(self, v: Value) -> np.ndarray:
        if v.producer is None:
            return self.feed[v.name]
        if v.id in self._vals:
            return self._vals[v.id]
        return _const_val(v)

    def _operand(self, a: Any) -> Value:
        g = self.graph
        self._n += 1
        if isinstance(a, Value):
            return a
        if isinstance(a, In):
            arr = np.asarray(a.arr)
            dt = _dt(arr, a.dtype)
            v = g.add_input(a.name or f"in{self._n}", TensorType(arr.shape, dt))
            self.feed[v.name] = arr.astype(dt.np_dtype())
            return v
        if isinstance(a, Shape):
            vals = np.asarray(a.values, dtype=np.int64).reshape(-1)
            return g.add_const(vals, DType.SHAPE, name=f"shape{self._n}", op_name="tosa.CONST_SHAPE")
        c = a if isinstance(a, Const) else Const(a)
        arr = np.asarray(c.arr)
        dt = _dt(arr, c.dtype)
        return g.add_const(arr.astype(dt.np_dtype()), dt, name=f"c{self._n}")

    def add(self, opcode: str, args: list[Any], out: DType | list[DType], attrs: dict[str, Any] | None = None,
            name: str | None = None, output: bool = True) -> list[Value]:
        """Add ``tosa.<opcode>`` (args may also be earlier results); shapes come from running the kernel.

        With ``output`` the results become graph outputs.
        """
        operands = [self._operand(a) for a in args]
        outs = out if isinstance(out, list) else [out]
        op = self.graph.add_op("tosa." + opcode, operands, [TensorType((), d) for d in outs], attrs or {},
                               result_names=[f"{name or opcode.lower()}_{i}" for i in range(len(outs))])
        vals = [self._value(v) for v in operands]
        res = KERNELS[opcode](op, vals)
        for r, a in zip(op.results, res):
            r.type = TensorType(np.asarray(a).shape, r.type.dtype)
            self._vals[r.id] = np.asarray(a).astype(r.type.dtype.np_dtype())
        if output:
            self.graph.outputs.extend(op.results)
        return list(op.results)
