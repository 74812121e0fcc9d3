"""Zero-size tensors after legalization (TOSA 1.0 has none, spec 1.11.1 Tensors).

Reads what the rules leave (:mod:`tf2tosa.legalizations.lowering.zero_size`): every source tensor with a zero
dimension became an *empty value*, a zero-size ``tosa.CONST`` marked ``attrs["zero_size"]`` and located at the
source op that made it; concatenations dropped such inputs, slices/splits/pads/elementwise ops on them gave empty
values again, so no TOSA op reads one.

before: a legalized graph in which empty values may still exist, unread (the pieces a concatenation dropped) or as
graph outputs; after: the unread ones removed.  A graph output that is empty cannot be a TOSA tensor (every
dimension ≥ 1): one :class:`InvalidGraphError` names that output and the source op that made it.  A graph without
empty values is left as it is (nothing is read but the constants' marks, nothing written).

Records (:mod:`tf2tosa.ir.records`): reads ``graph.source.signature_names`` (to name an empty output).
"""

from __future__ import annotations

from ...errors import InvalidGraphError
from ...ir import Graph
from ...legalizations.lowering.zero_size import EMPTY


def remove_zero_size(graph: Graph, file: str | None = None) -> int:
    """Refuse an empty graph output, remove the unread empty values; returns how many were removed."""
    empties = [op for op in graph.ops.values() if op.name == "tosa.CONST" and op.attrs.get(EMPTY)]
    if not empties:
        return 0
    for k, v in enumerate(graph.outputs):
        op = v.producer
        if op is not None and op.name == "tosa.CONST" and op.attrs.get(EMPTY):
            name = graph.source.signature_names.get(v.name) or v.source or v.name
            raise InvalidGraphError(f"output {k} {name!r} has shape {list(v.shape)}, no elements: TOSA has no "
                                    "empty tensors (spec 1.11.1 Tensors), so a model whose output is empty at "
                                    "these input sizes cannot be converted", file=file,
                                    op=op.location or op.name, tensor=str(name))
    n = 0
    for op in empties:
        if not any(graph.uses(r) for r in op.results):
            graph.remove_op(op)
            n += 1
    return n


__all__ = ["remove_zero_size"]
