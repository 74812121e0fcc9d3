"""Graph.merge_constants (dedup_constants' bulk merge) against the replace_all_uses + remove_op it stands for."""

from __future__ import annotations

import copy
import random
from typing import Any

import numpy as np

from tf2tosa.converter.passes import dedup_constants
from tf2tosa.ir import DType, Graph, TensorType, Value


def _graph(seed: int) -> tuple[Graph, list[tuple[Value, Value]]]:
    rng = random.Random(seed)
    g = Graph()
    x = g.add_input("x", TensorType((4,), DType.INT32))
    consts = [g.add_const(np.array([i % 5] * 4, np.int32)) for i in range(30)]
    vals = [x, *consts]
    for _ in range(40):  # ops reading constants, some one constant twice or two equal ones
        ins = [rng.choice(vals) for _ in range(rng.randint(1, 4))]
        vals.append(g.add_op("tosa.ADD", ins, [TensorType((4,), DType.INT32)]).results[0])
    g.outputs = [vals[-1], vals[-2], consts[7]]
    # the first constant of each value survives; the constant that is an output is not merged
    first: dict[int, Value] = {}
    pairs = []
    for i, c in enumerate(consts):
        w = first.setdefault(i % 5, c)
        if w is not c and c is not consts[7]:
            pairs.append((c, w))
    return g, pairs


def _state(g: Graph) -> Any:
    return ([(op.id, op.name, [v.id for v in op.operands], [r.name for r in op.results]) for op in g.ops.values()],
            {n: {d: list(k) for d, k in s.items()} for n, s in g.nx._succ.items()},
            {n: {d: list(k) for d, k in s.items()} for n, s in g.nx._pred.items()},
            list(g.nx._node), sorted(g._names), dict(g._names.hint), [v.id for v in g.outputs],
            [op.id for op in g.topological_order()], g.unique_name("const"), g.unique_name("const_3"))


def test_merge_constants_is_replace_and_remove() -> None:
    for seed in range(20):
        g, pairs = _graph(seed)
        want = copy.deepcopy(g)
        ids = {id(v): v.id for v, _ in pairs}
        wv = {v.id: v for op in want.ops.values() for v in op.results}
        for old, new in pairs:
            o, n = wv[ids[id(old)]], wv[new.id]
            want.replace_all_uses(o, n)
            want.remove_op(o.producer)  # type: ignore[arg-type]
        g.merge_constants(pairs)
        assert _state(g) == _state(want), seed


def test_dedup_constants_merges_equal_ones() -> None:
    g, pairs = _graph(3)
    n = len(g.ops)
    assert dedup_constants(g) == len(pairs)
    assert len(g.ops) == n - len(pairs)
