"""The IR's graph is a networkx MultiDiGraph whose nodes and keyed edges ``ir.graph.Graph`` writes into networkx's
own dicts on its hot paths (``add_op``, ``_add_edge``, ``_remove_edge``).  This holds them equal to what
networkx's public methods make from the same changes, so a networkx release that lays its dicts out differently
fails here rather than in a conversion."""

from __future__ import annotations

import random
from typing import Any

import networkx as nx

from tf2tosa.ir import DType, Graph, TensorType
from tf2tosa.ir.graph import INPUT


def _shape(g: nx.MultiDiGraph) -> tuple[Any, ...]:
    edges = sorted((u, v, k, d["index"], d["value"].id) for u, v, k, d in g.edges(keys=True, data=True))
    return sorted(g.nodes), edges, {n: sorted(g.succ[n]) for n in g.nodes}, {n: sorted(g.pred[n]) for n in g.nodes}


def test_graph_dicts_match_networkx_methods() -> None:
    rng = random.Random(7)
    g = Graph()
    mirror = nx.MultiDiGraph()
    mirror.add_node(INPUT)
    t = TensorType((2,), DType.INT32)
    values = [g.add_input(f"x{i}", t) for i in range(2)]
    ops = []
    for step in range(300):
        if ops and rng.random() < 0.3:  # rewire one operand
            op = rng.choice(ops)
            if op.operands:
                k = rng.randrange(len(op.operands))
                old = op.operands[k]
                new = rng.choice([v for v in values if v.producer is None or v.producer.id < op.id])
                mirror.remove_edge(old.producer.id if old.producer else INPUT, op.id, key=(old.id, k))
                g.set_operand(op, k, new)
                mirror.add_edge(new.producer.id if new.producer else INPUT, op.id, key=(new.id, k), value=new, index=k)
                continue
        operands = [rng.choice(values) for _ in range(rng.randint(0, 3))]
        op = g.add_op("tosa.IDENTITY" if len(operands) == 1 else "tosa.CONCAT", operands, [t], {}, [f"v{step}"])
        mirror.add_node(op.id)
        for k, v in enumerate(operands):
            mirror.add_edge(v.producer.id if v.producer else INPUT, op.id, key=(v.id, k), value=v, index=k)
        ops.append(op)
        values.append(op.result)
    for op in ops[::7]:  # drop the tail operands of some ops
        if op.operands:
            for k in range(len(op.operands) - 1, 0, -1):
                w = op.operands[k]
                mirror.remove_edge(w.producer.id if w.producer else INPUT, op.id, key=(w.id, k))
            g.truncate_operands(op, 1)
    assert _shape(g.nx) == _shape(mirror)
    assert nx.is_directed_acyclic_graph(g.nx)
    assert all(nx.ancestors(g.nx, op.id) == nx.ancestors(mirror, op.id) for op in ops[::11])
    assert [op.id for op in g.topological_order()] == [n for n in nx.lexicographical_topological_sort(mirror)
                                                      if n != INPUT]
