"""Zero-size tensors during legalization (TOSA 1.0 has none, spec 1.11.1 Tensors).

A source tensor with a zero dimension (an empty SLICE / STRIDED_SLICE / SPLIT_V piece, a zero-length padding
amount that YAMNet's framing concatenates, an empty constant, an elementwise op on one of these) holds no
elements, so it is fully known at conversion time: the rules carry it as a zero-size ``tosa.CONST`` (an *empty
value*) that no TOSA op may read.  The rules that meet one deal with it:

* a concatenation drops its empty inputs (one input left: that input; none: an empty result);
* a slice, strided slice or split piece of size 0 is an empty value;
* a PAD of an empty value is a constant of the pad value (or empty again);
* any other op reading an empty value (:func:`empty_results`, the driver's fallback when the rule fails) gives
  empty results when its result shape has a zero dimension (elementwise broadcasting, or the source's static
  result type), else it is refused naming the empty tensor.

An empty value still read after legalization (a graph output) is refused by
:mod:`tf2tosa.converter.passes.zero_size`; unread ones are dead constants and disappear.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import Unsupported
from ...ir import DType, Operation, QuantParams, Value
from ...ir.symdim import is_symbolic, size
from ...tosa.builder import Builder
from .layout import tosa_dtype

#: ``attrs`` key marking the constants made here (the graph pass names them in its refusal)
EMPTY = "zero_size"

#: source ops whose result has the broadcast shape of their operands (any frontend, by the name after the prefix)
_ELEMENTWISE = frozenset(
    "add addv2 sub mul div realdiv floordiv floor_div floormod floor_mod maximum minimum max min pow "
    "squareddifference squared_difference equal notequal not_equal less lessequal less_equal greater "
    "greaterequal greater_equal logicaland logical_and logicalor logical_or and or select selectv2 select_v2 "
    "lt gt le ge eq ne abs neg negative ceil floor round rint exp log log2 sqrt rsqrt sqr rsqr rcp square sin cos "
    "tanh sigmoid logistic relu relu6 elu sign cast identity logicalnot logical_not not copy clamp".split())


def has_zero(shape: Sequence[object]) -> bool:
    """``shape`` has a dimension that is 0 whatever the input sizes (a symbolic one is never read: no guard)."""
    return any(isinstance(d, int) and not is_symbolic(d) and d == 0 for d in shape)


def is_empty(v: Value) -> bool:
    """A data value (not a ``shape_t``) with a static zero dimension."""
    return v.dtype is not DType.SHAPE and has_zero(v.shape)


def empty(b: Builder, shape: Sequence[int], dtype: DType, quant: QuantParams | None = None) -> Value:
    """An empty value of ``shape`` (at least one 0) and TOSA element type ``dtype``, located at the source op."""
    arr = np.zeros([int(d) for d in shape], dtype=dtype.np_dtype())
    v = b.graph.add_const(arr, dtype, name=b.name_hint or "empty", quant=quant)
    assert v.producer is not None
    v.producer.location = b.location
    v.producer.attrs[EMPTY] = True
    return v


def filled(b: Builder, shape: Sequence[int], value: float | int | bool, dtype: DType,
           quant: QuantParams | None = None) -> Value:
    """``shape`` filled with ``value``: what padding an empty value gives (empty again when ``shape`` has a 0)."""
    if has_zero(shape):
        return empty(b, shape, dtype, quant)
    return b.const(np.full([int(d) for d in shape], value, dtype=dtype.np_dtype()), dtype, quant=quant)


def without_empty(xs: Sequence[Value]) -> list[Value]:
    """The concatenation inputs that hold elements."""
    return [v for v in xs if not is_empty(v)]


def _broadcast(shapes: Sequence[Sequence[int]]) -> list[int] | None:
    """numpy broadcasting of static shapes (a 1 meets a 0: 0), None when they do not broadcast."""
    try:
        return [int(d) for d in np.broadcast_shapes(*[tuple(int(d) for d in s) for s in shapes])]
    except ValueError:
        return None


def _short(name: str) -> str:
    return name.split(".", 1)[1].lower() if "." in name else name.lower()


def empty_results(b: Builder, op: Operation) -> list[Value] | None:
    """The results of ``op`` when it reads an empty value and its rule could not lower it: empty values of the
    result shapes when every one has a zero dimension (from elementwise broadcasting, else the source's static
    result types); None when ``op`` reads no empty value.  Raises :class:`Unsupported` naming the empty operand
    when a result would hold elements."""
    hit = [v for v in op.operands if is_empty(v)]
    if not hit:
        return None
    shapes: list[list[int]] | None = None
    if _short(op.name) in _ELEMENTWISE and len(op.results) == 1:
        data = [v for v in op.operands if v.dtype is not DType.SHAPE and v.type.is_static]
        got = _broadcast([[int(size(d)) for d in v.shape] for v in data])
        shapes = [got] if got is not None else None
    if shapes is None and op.results and all(r.type.is_static for r in op.results):
        shapes = [[int(size(d)) for d in r.shape] for r in op.results]
    e = hit[0]
    if shapes is None or not all(has_zero(s) for s in shapes):
        raise Unsupported(f"reads the zero-size tensor {e.source or e.name} {list(e.shape)} and its result is not "
                          "known to be empty (TOSA has no empty tensors, spec 1.11.1 Tensors)")
    try:
        return [empty(b, s, tosa_dtype(r.dtype), r.type.quant) for s, r in zip(shapes, op.results)]
    except (Unsupported, ValueError, TypeError):
        raise Unsupported(f"reads the zero-size tensor {e.source or e.name} {list(e.shape)} (TOSA has no empty "
                          "tensors, spec 1.11.1 Tensors)") from None


__all__ = ["EMPTY", "empty", "empty_results", "filled", "has_zero", "is_empty", "without_empty"]
