"""Output naming and the tensor map.

before: a folded TOSA graph whose outputs may be inputs, constants or repeated values, named after internal values;
after: every output is a distinct op result named after its source tensor (an IDENTITY guards the others), and
``graph.record.tensor_map`` maps each surviving source tensor to its TOSA value (``tensor_map_dropped``: the others).

Records (:mod:`tf2tosa.ir.records`): :func:`rebuild_tensor_map` reads ``graph.record.tensor_map`` (the
legalization's) and writes it and ``graph.record.tensor_map_dropped``; :func:`name_outputs` reads and writes none.
"""

from __future__ import annotations

import re

from ...ir import Graph, Value


def clean_name(name: str) -> str:
    """``name`` as a TOSA value name: every character but letters, digits and ``_`` replaced."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_")
    return s or "t"


def name_outputs(graph: Graph) -> None:
    """Give output values names derived from their source tensors; guard inputs/consts/duplicates with IDENTITY."""
    seen: set[int] = set()
    outs: list[Value] = []
    for v in graph.outputs:
        if v.id in seen or v.producer is None or v.is_const:
            op = graph.add_op("tosa.IDENTITY", [v], [v.type], {}, [v.name + "_out"], location="output")
            op.result.source = v.source
            v = op.result
        seen.add(v.id)
        outs.append(v)
    graph.outputs = outs
    for v in graph.outputs:
        if v.source:
            want = clean_name(v.source)
            if v.name != want:
                graph._names.discard(v.name)
                v.name = graph.unique_name(want)


def rebuild_tensor_map(graph: Graph) -> None:
    """Source tensor -> TOSA value name, for the values that survived folding, merging and renaming.

    Source tensors whose value was folded or merged away are listed in ``graph.record.tensor_map_dropped``.
    """
    values = graph.values()
    alive = {v.name for v in values}
    old: dict[str, str] = graph.record.tensor_map
    tm = {k: n for k, n in old.items() if n in alive}
    for v in values:
        if v.source:
            tm[v.source] = v.name
    graph.record.tensor_map = tm
    graph.record.tensor_map_dropped = sorted(set(old) - set(tm))
