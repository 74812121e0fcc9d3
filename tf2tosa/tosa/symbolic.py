"""Dimension symbols of a symbolic (TOSA 1.1-draft) program read back from a file.

A ``.tosa`` or ``.mlir`` file carries an unknown dimension as ``-1`` / ``?`` with no name.  Reading one back,
:func:`name_dimensions` names them the way the converter does (``tf2tosa.converter.passes.input_shapes``): an
unknown dimension ``k`` of a graph input is the symbol ``batch`` when ``k = 0``, else ``d<k>`` (the names
``--dim SYMBOL=VALUE`` takes), and every other value's unknown dimensions are derived from those through the
program: the EXT-SHAPE operators that compute shape values (``DIM``, ``ADD/SUB/MUL_SHAPE`` …, ``CONCAT_SHAPE``,
``SLICE_SHAPE``), the shape operands of RESHAPE / SLICE / TILE / PAD, the convolution and pooling output-size
formulas, CONCAT's sum, and the 1.0 shape rules of :mod:`.shapes` (which pass symbols through elementwise ops,
transposes, reductions, matmul).  A dimension is a :class:`tf2tosa.ir.symdim.Expr`, the expression type the
converter's ``--dynamic`` mode labels values with, so a program read back labels each value exactly as the
in-memory program did (``batch``, ``2*batch``, ``d1 - 64``, ``(d1 - 64) // 16 + 1``, ``ceildiv(d1, 2)``); what
cannot be derived stays :data:`UNKNOWN` (``?``).

The names are for people (``tf2tosa inspect``) and for binding sizes (``tf2tosa specialize --dim``); the
executor and :mod:`tf2tosa.converter.specialize` compute actual sizes from the inputs' shapes, never from these
strings.  ``graph.dims.symbols`` gets where each symbol is read (its first input dimension) and
``graph.dims.equalities`` the ASSERT_EQUAL_SHAPE checks of the program, with both sides named;
``graph.dims.shape_values`` the value of each computed shape, by value name (``[batch, 1, 1, 8]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidGraphError
from ..ir.graph import Graph, Operation, Value
from ..ir.symdim import Expr
from ..ir.types import Dim, DType
from . import shapes

__all__ = ["UNKNOWN", "input_symbol", "name_dimensions"]

#: an unknown dimension with no name (printed ``?``)
UNKNOWN = "?"

def input_symbol(k: int) -> str:
    """The symbol of unknown dimension ``k`` of a graph input (the converter's convention)."""
    return "batch" if k == 0 else f"d{k}"


def _const(n: int) -> Expr:
    return Expr(int(n))


def _term(name: str) -> Expr:
    return Expr(0, ((("sym", name), 1),))


def _value(e: Expr) -> int | None:
    """The integer, when the expression is constant."""
    return e.const if e.is_const else None


def _shape_binary(opcode: str, a: Expr, b: Expr) -> Expr:
    if opcode == "ADD_SHAPE":
        return a + b
    if opcode == "SUB_SHAPE":
        return a - b
    if opcode == "MUL_SHAPE":
        return a * b
    if opcode == "DIV_FLOOR_SHAPE":
        return a.floordiv(b)
    if opcode == "DIV_CEIL_SHAPE":
        return a.ceildiv(b)
    if opcode == "MOD_SHAPE":
        return a.mod(b)
    if opcode in ("MIN_SHAPE", "MAX_SHAPE"):
        return a.minmax(b, opcode.removesuffix("_SHAPE").lower())
    return _term(f"{opcode.removesuffix('_SHAPE').lower()}({a}, {b})")


def _shape_unary(opcode: str, a: Expr) -> Expr:
    av = _value(a)
    if av is not None:
        if opcode == "EXP2_SHAPE" and 0 <= av < 63:
            return _const(1 << av)
        if av >= 1 and opcode == "LOG2_FLOOR_SHAPE":
            return _const(av.bit_length() - 1)
        if av >= 1 and opcode == "LOG2_CEIL_SHAPE":
            return _const((av - 1).bit_length())
    # no such atom in SymDim's expressions (the converter never emits these): an opaque named term
    return _term(f"{opcode.removesuffix('_SHAPE').lower()}({a})")


def _from_dim(d: Dim) -> Expr | None:
    if isinstance(d, int):
        return _const(d)
    return None if d == UNKNOWN else _term(d)


def _to_dim(e: Expr | None) -> Dim:
    if e is None:
        return UNKNOWN
    v = _value(e)
    return v if v is not None else str(e)


class _Namer:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        #: shape value id -> its elements (None: not derivable)
        self.shape_vals: dict[int, list[Expr | None]] = {}
        #: tensor value id -> its dimensions
        self.dims: dict[int, list[Expr | None]] = {}

    def tensor(self, v: Value) -> list[Expr | None]:
        if v.id in self.dims:
            return self.dims[v.id]
        return [_from_dim(d) for d in v.type.shape]

    def shape(self, v: Value) -> list[Expr | None] | None:
        if v.id in self.shape_vals:
            return self.shape_vals[v.id]
        c = v.const()
        if c is not None and v.dtype is DType.SHAPE:
            return [_const(int(x)) for x in np.asarray(c).reshape(-1)]
        return None

    def ints(self, v: Value) -> list[int] | None:
        """The values of a constant operand, or of a shape value whose elements are all known integers."""
        s = self.shape(v) if v.dtype is DType.SHAPE else None
        if s is not None:
            vals = [_value(e) if e is not None else None for e in s]
            return None if any(x is None for x in vals) else [int(x) for x in vals if x is not None]
        c = v.const()
        return None if c is None else [int(x) for x in np.asarray(c).reshape(-1)]

    # ------------------------------------------------------------------------------------------ shape values
    def shape_op(self, op: Operation) -> list[Expr | None] | None:
        code = op.opcode
        ins = op.operands
        if code == "DIM":
            dims = self.tensor(ins[0])
            axis = int(op.attrs.get("axis", 0))
            return [dims[axis]] if 0 <= axis < len(dims) else None
        if code == "CONCAT_SHAPE":
            out: list[Expr | None] = []
            for v in ins:
                s = self.shape(v)
                if s is None:
                    return None
                out.extend(s)
            return out
        if code == "SLICE_SHAPE":
            s = self.shape(ins[0])
            start, size = self.ints(ins[1]), self.ints(ins[2])
            if s is None or not start or not size:
                return None
            return s[start[0]:start[0] + size[0]]
        if len(ins) == 2 and code.endswith("_SHAPE"):
            a, b = self.shape(ins[0]), self.shape(ins[1])
            if a is None or b is None or len(a) != len(b):
                return None
            return [_shape_binary(code, x, y) if x is not None and y is not None else None for x, y in zip(a, b)]
        if len(ins) == 1 and code.endswith("_SHAPE"):
            a = self.shape(ins[0])
            return None if a is None else [_shape_unary(code, x) if x is not None else None for x in a]
        return None

    # ------------------------------------------------------------------------------------------ tensors
    def tensor_op(self, op: Operation) -> list[list[Expr | None] | None]:
        code = op.opcode
        ins = op.operands
        if code == "RESHAPE" and len(ins) > 1:
            return [self.shape(ins[1])]
        if code == "SLICE" and len(ins) > 2:
            return [self.shape(ins[2])]
        if code == "TILE" and len(ins) > 1:
            m = self.shape(ins[1])
            x = self.tensor(ins[0])
            if m is None or len(m) != len(x):
                return [None]
            return [[a * b if a is not None and b is not None else None for a, b in zip(x, m)]]
        if code == "PAD" and len(ins) > 1:
            p = self.shape(ins[1])
            x = self.tensor(ins[0])
            if p is None or len(p) != 2 * len(x):
                return [None]
            return [[a + lo + hi if a is not None and lo is not None and hi is not None else None
                     for a, lo, hi in zip(x, p[0::2], p[1::2])]]
        if code in ("CONV2D", "DEPTHWISE_CONV2D", "MAX_POOL2D", "AVG_POOL2D"):
            return [self.window(op)]
        if code == "CONCAT":
            return [self.concat(op)]
        # the 1.0 rules of .shapes on the dimensions as strings: symbols pass through where the rule is the
        # identity, a broadcast, a permutation or a reduction; arithmetic gives "?"
        types = [v.type.with_shape(tuple(_to_dim(e) for e in self.tensor(v))) if v.dtype is not DType.SHAPE
                 else v.type for v in ins]
        consts = [np.asarray(self.ints(v), np.int64) if v.dtype is DType.SHAPE and self.ints(v) is not None
                  else v.const() for v in ins]
        try:
            got = shapes.result_shapes(code, types, dict(op.attrs), consts)
        except (InvalidGraphError, ValueError, TypeError, IndexError):
            return [None] * len(op.results)
        return [[_from_dim(d) for d in s] for s in got]

    def window(self, op: Operation) -> list[Expr | None] | None:
        x = self.tensor(op.operands[0])
        if len(x) != 4:
            return None
        code = op.opcode
        pad = [int(p) for p in np.asarray(op.attrs.get("pad", [0, 0, 0, 0])).reshape(-1)]
        stride = [int(s) for s in np.asarray(op.attrs.get("stride", [1, 1])).reshape(-1)]
        if code in ("MAX_POOL2D", "AVG_POOL2D"):
            kernel: list[Expr | None] = [_const(int(k)) for k in np.asarray(op.attrs.get("kernel")).reshape(-1)]
            dil = [1, 1]
            c: Expr | None = x[3]
        else:
            w = self.tensor(op.operands[1])
            dil = [int(d) for d in np.asarray(op.attrs.get("dilation", [1, 1])).reshape(-1)]
            if code == "CONV2D":
                kernel, c = w[1:3], w[0]
            else:  # DEPTHWISE_CONV2D: weight [KH, KW, C, M], output C * M channels
                kernel = w[0:2]
                c = x[3] * w[3] if x[3] is not None and w[3] is not None else None
        if len(pad) != 4 or len(stride) != 2 or len(dil) != 2 or len(kernel) != 2:
            return None
        out: list[Expr | None] = [x[0]]
        for i in range(2):
            size, k = x[1 + i], kernel[i]
            if size is None or k is None or stride[i] < 1:
                out.append(None)
                continue
            # spec 2.3 CONV2D / 2.4 pooling: OH = idiv(IH - 1 + pad_top + pad_bottom - (KH - 1) * dilation, stride) + 1
            num = size - _const(1) + _const(pad[2 * i] + pad[2 * i + 1]) - (k - _const(1)) * _const(
                dil[i])
            out.append(num.floordiv(_const(stride[i])) + _const(1))
        out.append(c)
        return out

    def concat(self, op: Operation) -> list[Expr | None] | None:
        if not op.operands:
            return None
        first = self.tensor(op.operands[0])
        axis = int(op.attrs.get("axis", 0))
        if not 0 <= axis < len(first):
            return None
        total: Expr | None = _const(0)
        for v in op.operands:
            d = self.tensor(v)
            term = d[axis] if axis < len(d) else None
            total = total + term if total is not None and term is not None else None
        return first[:axis] + [total] + first[axis + 1:]


def _merge(declared: Sequence[Dim], inferred: Sequence[Expr | None] | None) -> tuple[Dim, ...]:
    """The file's dimensions, each unknown one replaced by its derived name where there is one (known ones kept)."""
    if inferred is None or len(inferred) != len(declared):
        return tuple(declared)
    return tuple(d if isinstance(d, int) else _to_dim(e) for d, e in zip(declared, inferred))


def name_dimensions(graph: Graph) -> None:
    """Name every unknown dimension of ``graph`` (in place; see the module docstring) and record
    ``graph.dims.symbols`` and ``graph.dims.equalities``."""
    namer = _Namer(graph)
    symbols: dict[str, dict[str, Any]] = {}
    for v in graph.inputs:
        dims = list(v.type.shape)
        for k, d in enumerate(dims):
            if isinstance(d, int):
                continue
            sym = d if d != UNKNOWN else input_symbol(k)
            dims[k] = sym
            symbols.setdefault(sym, {"input": v.name, "dim": k})
        v.type = v.type.with_shape(tuple(dims))
    equalities: list[dict[str, Any]] = []
    for op in graph.topological_order():
        if op.dialect != "tosa" or op.opcode in ("CONST", "CONST_SHAPE"):
            continue
        if op.opcode == "ASSERT_EQUAL_SHAPE" and len(op.operands) == 2:
            a, b = (namer.shape(v) for v in op.operands)
            text = ["[" + ", ".join(str(_to_dim(e)) for e in s) + "]" if s is not None else UNKNOWN for s in (a, b)]
            equalities.append({"a": text[0], "b": text[1], "broadcast": bool(op.attrs.get("allow_broadcast")),
                               "op": op.location or f"ASSERT_EQUAL_SHAPE#{op.id}"})
            continue
        if op.results and all(r.dtype is DType.SHAPE for r in op.results):
            got = namer.shape_op(op)
            if got is not None and len(got) == (op.result.type.shape[0] if op.result.type.shape else -1):
                namer.shape_vals[op.result.id] = got
            continue
        if op.regions:
            continue  # control flow: results keep the file's dimensions
        derived = namer.tensor_op(op)
        for r, inferred in zip(op.results, derived):
            if r.dtype is DType.SHAPE:
                continue
            declared = r.type.shape
            r.type = r.type.with_shape(_merge(declared, inferred))
            if inferred is not None and len(inferred) == len(declared):
                namer.dims[r.id] = [_const(d) if isinstance(d, int) else e for d, e in zip(declared, inferred)]
    graph.dims.symbols = symbols
    graph.dims.shape_values = {
        v.name: "[" + ", ".join(str(_to_dim(e)) for e in namer.shape_vals[v.id]) + "]"
        for op in graph.topological_order() for v in op.results if v.id in namer.shape_vals}
    graph.dims.equalities = equalities + shapes.graph_equalities(graph.topological_order())
