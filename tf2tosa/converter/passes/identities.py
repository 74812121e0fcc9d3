"""No-op removal.

before: a TOSA graph with identity RESHAPE/TRANSPOSE/IDENTITY ops, RESHAPE chains and TRANSPOSE pairs; after:
the no-ops forwarded and removed, chains merged (an op is kept between an input or constant and an output).  A
RESHAPE read only by RESHAPEs is bypassed by all of them, and equal RESHAPEs of one tensor become one: Vela runs a
RESHAPE with two RESHAPE readers as a memory copy (bidirectional_lstm: 151 k → 143 k cycles).

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


def _merge_equal_reshape(graph: Graph, op: Operation) -> int:
    """Forward ``op`` (a RESHAPE) to an earlier RESHAPE of the same tensor to the same shape; 1 when merged.  (A
    RESHAPE read by several RESHAPEs of one shape: an unrolled LSTM's step input feeding two gate convolutions.)"""
    for use, k in graph.uses(op.operands[0]):
        if use is not op and k == 0 and use.name == "tosa.RESHAPE" and use.id < op.id and op.result.type.is_static \
                and tuple(use.result.shape) == tuple(op.result.shape) and op.result not in graph.outputs:
            graph.replace_all_uses(op.result, use.result)
            return 1
    return 0


_NO_OPS = frozenset({"tosa.RESHAPE", "tosa.TRANSPOSE", "tosa.IDENTITY"})


def remove_identities(graph: Graph) -> int:
    """Remove no-op RESHAPE/TRANSPOSE/IDENTITY ops and merge RESHAPE chains and TRANSPOSE pairs."""
    n = 0
    for op in graph.topological_order():
        if op.name not in _NO_OPS or op.id not in graph.ops:  # (every other op is left as it is)
            continue
        x = op.operands[0] if op.operands else None
        if op.name == "tosa.RESHAPE" and x is not None:
            src = x.producer
            if tuple(x.shape) == tuple(op.result.shape):
                _forward(graph, op, x)
            elif src is not None and src.name == "tosa.RESHAPE" and x not in graph.outputs \
                    and all(use.name == "tosa.RESHAPE" for use, _ in graph.uses(x)):
                graph.set_operand(op, 0, src.operands[0])
                n += 1 + _merge_equal_reshape(graph, op)
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
