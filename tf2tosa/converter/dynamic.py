"""``--dynamic`` groundwork: one symbolic TOSA 1.1-draft program from specialised conversions.

before: the same model converted (by the default, specialising pipeline) at three sizes of one dimension symbol
(``batch``: 2, 3, 5); after: one graph whose values carry the symbol (``"batch"``, ``"2*batch"``: printed ``?``)
and whose shape operands that depended on it are computed at run time from ``DIM`` of a graph input with the
1.1 draft's EXT-SHAPE operators (``DIM``, ``MUL_SHAPE``, ``CONCAT_SHAPE``), plus one ``ASSERT_EQUAL_SHAPE`` per
further input carrying the symbol (the equality the program relies on, ``meta["dim_equalities"]``).

The three conversions must agree op for op (same operators, attributes, constants); every dimension and shape
value either agrees or is ``k * size`` at all three sizes (``k`` an integer).  Anything else (a second symbol, a
dimension not proportional to the symbol such as a strided spatial size, a constant that depends on the size)
is refused with a "not yet" :class:`~tf2tosa.errors.ConversionError`: that needs symbolic shape inference in
the lowerings, which is not done yet (docs/design-notes.md, "Dynamic shapes: plan and status").
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any

import numpy as np

from ..errors import ConversionError
from ..ir import Graph
from ..ir.graph import Operation, Value
from ..ir.types import DType, TensorType
from ..tosa.optable import DRAFT_VERSION
from ..tosa.shapes import graph_equalities

__all__ = ["SIZES", "generalise"]

#: sizes the symbol takes in the three specialised conversions (distinct primes > 1: no size-1 special cases,
#: and a dimension equal to ``k * size`` at all three is proportional with no coincidence below 30k)
SIZES = (2, 3, 5)

Sym = int | tuple[int]  # a static size, or (k,) for k * symbol


def _not_yet(msg: str, file: str | None, op: str | None = None, tensor: str | None = None) -> ConversionError:
    return ConversionError(f"--dynamic: not yet: {msg}", file=file, op=op, tensor=tensor)


def _dim(vals: Sequence[int], sizes: Sequence[int]) -> Sym | None:
    """``vals[i]`` at ``sizes[i]``: a static size, ``(k,)`` for ``k * symbol``, or None (neither)."""
    if all(v == vals[0] for v in vals):
        return int(vals[0])
    if vals[0] % sizes[0] == 0:
        k = vals[0] // sizes[0]
        if k > 0 and all(v == k * s for v, s in zip(vals, sizes)):
            return (k,)
    return None


def _label(d: Sym, symbol: str) -> int | str:
    if isinstance(d, int):
        return d
    return symbol if d[0] == 1 else f"{d[0]}*{symbol}"


def _same_attr(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        return x.shape == y.shape and x.dtype == y.dtype and bool(np.array_equal(x, y))
    if isinstance(a, Graph) or isinstance(b, Graph):
        return False  # control-flow bodies: not yet compared
    return bool(a == b) if type(a) is type(b) else False


def generalise(graphs: Sequence[Graph], sizes: Sequence[int], symbol: str, file: str | None = None) -> Graph:
    """Turn ``graphs[0]`` (converted at ``sizes[0]``) into the symbolic program; see the module docstring.

    ``graphs[i]`` is the conversion with ``symbol`` fixed to ``sizes[i]``.  ``graphs[0]`` is changed in place and
    returned, with ``meta["specification_version"] = "1.1.draft"``, ``meta["dim_symbols"]`` (the input dimension each
    symbol is read from) and ``meta["dim_equalities"]``.
    """
    base = graphs[0]
    orders = [g.topological_order() for g in graphs]
    if any(len(o) != len(orders[0]) for o in orders) or any(len(g.inputs) != len(base.inputs) for g in graphs):
        raise _not_yet(f"the conversions at {symbol} = {', '.join(map(str, sizes))} differ in their operators",
                       file)
    # value correspondence: inputs by position, results by (op position, result index)
    values: list[list[Value]] = [list(vs) for vs in zip(*(g.inputs for g in graphs))]
    for ops in zip(*orders):
        op0 = ops[0]
        if any(o.name != op0.name or len(o.results) != len(op0.results) or len(o.operands) != len(op0.operands)
               or set(o.attrs) != set(op0.attrs) for o in ops[1:]):
            raise _not_yet(f"the conversions at {symbol} = {', '.join(map(str, sizes))} differ at {op0.name}",
                           file, op=op0.name)
        values.extend([list(vs) for vs in zip(*(o.results for o in ops))])
    # symbolic dimensions of every value
    new_types: dict[int, TensorType] = {}
    for vs in values:
        v0 = vs[0]
        if any(v.type.rank != v0.type.rank or v.type.dtype is not v0.type.dtype for v in vs):
            raise _not_yet("a value changes rank or type with the size", file, tensor=v0.name)
        if v0.type.dtype is DType.SHAPE:
            continue
        dims = []
        for k in range(v0.type.rank):
            d = _dim([int(v.type.shape[k]) for v in vs], sizes)
            if d is None:
                got = ", ".join(str(v.type.shape[k]) for v in vs)
                raise _not_yet(f"dimension {k} of {v0.name!r} is {got} at {symbol} = "
                               f"{', '.join(map(str, sizes))}: not a multiple of {symbol}", file, tensor=v0.name)
            dims.append(_label(d, symbol))
        if any(isinstance(d, str) for d in dims):
            new_types[v0.id] = v0.type.with_shape(tuple(dims))
    # where the symbol is read: the first input dimension equal to it; further ones are asserted equal
    sources = [(v, k) for v in base.inputs if v.id in new_types for k, d in enumerate(new_types[v.id].shape)
               if d == symbol]
    if not sources:
        raise _not_yet(f"no input dimension is {symbol} itself", file)
    # shape operands: constants that agree, or are k * symbol per element, are rebuilt from DIM
    rebuilt: list[tuple[Operation, list[Sym]]] = []
    for ops in zip(*orders):
        op0 = ops[0]
        for name in op0.attrs:
            if name == "values" and op0.opcode == "CONST_SHAPE":
                continue
            if not all(_same_attr(op0.attrs[name], o.attrs[name]) for o in ops[1:]):
                raise _not_yet(f"attribute {name} of {op0.name} depends on {symbol}", file, op=op0.name,
                               tensor=op0.results[0].name if op0.results else None)
        if op0.opcode == "CONST_SHAPE":
            arrs = [np.asarray(o.attrs["values"], np.int64).reshape(-1) for o in ops]
            if any(a.shape != arrs[0].shape for a in arrs):
                raise _not_yet(f"shape {op0.result.name!r} changes length with {symbol}", file, op=op0.name)
            elems: list[Sym] = []
            for i in range(arrs[0].shape[0]):
                d = _dim([int(a[i]) for a in arrs], sizes)
                if d is None:
                    raise _not_yet(f"shape value {i} of {op0.result.name!r} is not a multiple of {symbol}", file,
                                   op=op0.name, tensor=op0.result.name)
                elems.append(d)
            if any(not isinstance(e, int) for e in elems):
                rebuilt.append((op0, elems))
    for v in base.values():
        if v.id in new_types:
            v.type = new_types[v.id]
    src, axis = sources[0]
    shape1 = TensorType((1,), DType.SHAPE)
    dim = base.add_op("tosa.DIM", [src], [shape1], {"axis": axis}, [f"{symbol}_dim"]).result
    equalities = []
    for other, k in sources[1:]:
        d2 = base.add_op("tosa.DIM", [other], [shape1], {"axis": k}, [f"{symbol}_dim"]).result
        base.add_op("tosa.ASSERT_EQUAL_SHAPE", [dim, d2], [], {"allow_broadcast": False})
        equalities.append({"symbol": symbol, "a": [src.name, axis], "b": [other.name, k]})
    multiples: dict[int, Value] = {1: dim}
    for op0, elems in rebuilt:
        parts: list[Value] = []
        for static, group in groupby(elems, key=lambda e: isinstance(e, int)):
            items = list(group)
            if static:
                parts.append(base.add_const(np.array(items, np.int64), DType.SHAPE, name="shape",
                                            op_name="tosa.CONST_SHAPE"))
                continue
            for e in items:
                k = e[0] if isinstance(e, tuple) else 1
                if k not in multiples:
                    kv = base.add_const(np.array([k], np.int64), DType.SHAPE, name="shape",
                                        op_name="tosa.CONST_SHAPE")
                    multiples[k] = base.add_op("tosa.MUL_SHAPE", [dim, kv], [shape1], {}, [f"{k}_{symbol}"]).result
                parts.append(multiples[k])
        out_t = op0.result.type
        new = parts[0] if len(parts) == 1 else base.add_op("tosa.CONCAT_SHAPE", parts, [out_t], {},
                                                             [op0.result.name]).result
        base.replace_all_uses(op0.result, new)
        base.remove_op(op0)
    base.meta["specification_version"] = DRAFT_VERSION
    base.meta["dim_symbols"] = {symbol: {"input": src.name, "dim": axis}}
    # the equalities the ops rely on beyond the inputs' (none while every symbolic dimension is k * one symbol,
    # unless two multiples are matched against each other, which the generalisation above rules out)
    base.meta["dim_equalities"] = equalities + graph_equalities(base.topological_order())
    return base
