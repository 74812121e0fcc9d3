"""No-op removal.

before: a TOSA graph with identity RESHAPE/TRANSPOSE/IDENTITY ops, RESHAPE chains and TRANSPOSE pairs; after:
the no-ops forwarded and removed, chains merged (an op is kept between an input or constant and an output).

Records (:mod:`tf2tosa.ir.records`): reads and writes none; only the graph's ops.
"""

from __future__ import annotations

from ...ir import Graph, Operation, Value


def _forward(graph: Graph, op: Operation, new: object) -> None:
    assert isinstance(new, Value)
    old = op.result
    if old in graph.outputs and (new in graph.inputs or new in graph.outputs or new.is_const):
        return  # keep an op between an input/constant and an output
    if new.source is None:
        new.source = old.source
    graph.replace_all_uses(old, new)


def remove_identities(graph: Graph) -> int:
    """Remove no-op RESHAPE/TRANSPOSE/IDENTITY ops and merge RESHAPE chains and TRANSPOSE pairs."""
    n = 0
    for op in graph.topological_order():
        if op.id not in graph.ops:
            continue
        x = op.operands[0] if op.operands else None
        if op.name == "tosa.RESHAPE" and x is not None:
            src = x.producer
            if tuple(x.shape) == tuple(op.result.shape):
                _forward(graph, op, x)
            elif src is not None and src.name == "tosa.RESHAPE" and len(graph.uses(x)) == 1 and x not in graph.outputs:
                graph.set_operand(op, 0, src.operands[0])
                n += 1
                continue
        elif op.name == "tosa.TRANSPOSE" and x is not None:
            perms = list(op.attrs["perms"])
            src = x.producer
            if perms == list(range(len(perms))):
                _forward(graph, op, x)
            elif src is not None and src.name == "tosa.TRANSPOSE" and x not in graph.outputs:
                inner = list(src.attrs["perms"])
                composed = [inner[p] for p in perms]
                if composed == list(range(len(composed))):
                    _forward(graph, op, src.operands[0])
                else:
                    graph.set_operand(op, 0, src.operands[0])
                    op.attrs["perms"] = composed
                    n += 1
                    continue
        elif op.name == "tosa.IDENTITY" and x is not None:
            _forward(graph, op, x)
        else:
            continue
        if not graph.uses(op.result) and op.result not in graph.outputs:
            graph.remove_op(op)
            n += 1
    graph.remove_dead_ops()
    return n
