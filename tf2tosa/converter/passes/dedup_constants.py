"""Constants deduplicated and shared.

before: a TOSA graph in which several CONST / CONST_SHAPE ops hold the same data (the zero points, shifts and
multipliers of every RESCALE, the shapes of every RESHAPE …, one op per use as the rules emit them); after: one op
per distinct constant, read by all its former users.

Two constants are merged when their op, element type, shape, quantization and data are equal (compared by bytes,
so -0.0 and 0.0, or two NaN payloads, stay apart).  The first in the graph's deterministic topological order is
kept, so the output is the same for the same input.  A constant that is a graph output keeps its own op.  Fewer
tensors mean a smaller file and fewer constant tensors for a compiler such as Vela to place.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import Graph
from ...ir.symdim import SYM_AFFINE, SYM_VALUES

_CONSTS = ("tosa.CONST", "tosa.CONST_SHAPE")


def dedup_constants(graph: Graph) -> int:
    """Merge equal constants (see the module docstring); returns how many ops were merged away."""
    kept: dict[Any, Any] = {}
    merged = 0
    for op in graph.topological_order():
        if op.name not in _CONSTS or len(op.results) != 1:
            continue
        v = op.results[0]
        if v in graph.outputs:
            continue
        arr = np.ascontiguousarray(np.asarray(op.attrs.get("values")))
        # --dynamic: constants holding size expressions are equal only when the expressions are
        sym = tuple(repr(op.attrs[k]) for k in (SYM_VALUES, SYM_AFFINE) if k in op.attrs)
        key = (op.name, v.type, arr.dtype.str, arr.shape, arr.tobytes(), sym)
        first = kept.setdefault(key, v)
        if first is v:
            continue
        graph.replace_all_uses(v, first)
        graph.remove_op(op)
        merged += 1
    return merged
