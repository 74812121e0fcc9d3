"""Sparse constants (TFLite sparsity).

before: ``tfl.const`` ops may carry a ``sparsity`` record (compressed weights); after: they hold dense values.
Problems are recorded as failures of ``tfl.const (sparse)`` on the context.  The decoding itself is
:func:`tf2tosa.legalizations.tfl_sparse.densify_constants`.
"""

from __future__ import annotations

from ...ir import Graph
from ...legalizations.tfl_sparse import densify_constants
from ...tosa.context import LegalizeContext


def densify(graph: Graph, context: LegalizeContext) -> None:
    """Make every sparse constant of ``graph`` dense."""
    for problem in densify_constants(graph):
        context.fail("tfl.const (sparse)", problem)
