"""Frontend constants to TOSA constants.

before: a legalized graph that still holds ``tfl.const`` ops (frontend types, e.g. i64); after: the ones in use are
``tosa.CONST`` with TOSA types (narrowed by :func:`tf2tosa.tosa.constants.tosa_constant`), the dead ones removed.

Records (:mod:`tf2tosa.ir.records`): reads and writes none; only the graph's ops.
"""

from __future__ import annotations

from ...errors import InvalidGraphError
from ...ir import Graph
from ...tosa.constants import tosa_constant


def finish_constants(graph: Graph, file: str | None = None) -> None:
    """Turn the frontend constants still in use into tosa.CONST with TOSA types."""
    graph.remove_dead_ops()
    for op in graph.topological_order():
        if op.name != "tfl.const":
            continue
        r = op.result
        try:
            values, r.type = tosa_constant(op.attrs["values"], r.type)
        except ValueError:
            raise InvalidGraphError(f"constant of type {r.dtype.value} has no TOSA type", file=file,
                                    tensor=r.source or r.name) from None
        op.name = "tosa.CONST"
        op.attrs = {"values": values}
