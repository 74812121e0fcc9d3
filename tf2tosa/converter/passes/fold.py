"""Constant folding after legalization.

before: a TOSA graph, some of whose ops have only constant operands; after: those ops are tosa.CONST (evaluated
with the executor's kernels through :func:`tf2tosa.tosa.builder.fold_op`).

Reads the conversion's :class:`~tf2tosa.ir.pass_context.GraphPasses` of the graph (``keep_unfolded``, ``fp16_keep``,
``fp16_sources``); writes ``fp16_sources`` / ``fp16_pending`` for a folded RESHAPE of an fp16 weight.
"""

from __future__ import annotations

from ...ir import Graph
from ...ir.pass_context import GraphPasses
from ...tosa.builder import fold_op


def fold_constants(graph: Graph, passes: GraphPasses | None = None) -> int:
    """Evaluate TOSA ops whose operands are all constant; returns the number folded."""
    # (fold_op returns None for an op without operands or with one that is not constant: not called for those)
    return sum(1 for op in graph.topological_order() if op.name.startswith("tosa.") and op.operands
               and all(v.is_const for v in op.operands) and fold_op(graph, op, passes))
