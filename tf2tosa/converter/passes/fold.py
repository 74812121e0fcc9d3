"""Constant folding after legalization.

before: a TOSA graph, some of whose ops have only constant operands; after: those ops are tosa.CONST (evaluated
with the executor's kernels through :func:`tf2tosa.tosa.builder.fold_op`).
"""

from __future__ import annotations

from ...ir import Graph
from ...tosa.builder import fold_op


def fold_constants(graph: Graph) -> int:
    """Evaluate TOSA ops whose operands are all constant; returns the number folded."""
    return sum(1 for op in graph.topological_order() if op.name.startswith("tosa.") and fold_op(graph, op))
