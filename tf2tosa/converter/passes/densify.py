"""Sparse constants (TFLite sparsity).

before: ``tfl.const`` ops may carry a ``sparsity`` record (compressed weights); after: they hold dense values.
Problems are recorded as failures of ``tfl.const (sparse)`` on the context.  Decoding one sparse tensor is
:func:`tf2tosa.legalizations.tfl_sparse.densify_op`, which the ``tfl.densify`` rule shares.

Records (:mod:`tf2tosa.ir.records`): reads and writes none (failures go on the context).
"""

from __future__ import annotations

from ...errors import Unsupported
from ...ir import Graph
from ...tosa.context import LegalizeContext


def densify_constants(graph: Graph) -> list[str]:
    """Densify every sparse ``tfl.const`` of ``graph`` (before legalization); returns the problems found.

    A constant whose metadata is inconsistent is left alone and reported (its consumers then fail with that
    reason through :func:`dense_operand`)."""
    problems = []
    for op in list(graph.ops.values()):
        if op.name == "tfl.const" and op.attrs.get("sparsity") is not None:
            from ...legalizations.tfl_sparse import densify_op  # (loaded only for a sparse model)

            try:
                densify_op(op)
            except Unsupported as e:
                problems.append(e.reason)
    return problems


def densify(graph: Graph, context: LegalizeContext) -> None:
    """Make every sparse constant of ``graph`` dense."""
    for problem in densify_constants(graph):
        context.fail("tfl.const (sparse)", problem)
