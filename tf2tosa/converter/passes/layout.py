"""NNEF layout: NCHW spatial operations run in NHWC, and the transposes that cancel are removed.

before: an ``nnef.*`` graph in NNEF's layout: ``nnef.conv`` / pools / resampling on NCHW tensors, and (for a graph
nnef-tools made of an NHWC ``.tflite``) ``nnef.transpose`` ops at the inputs, outputs and on every filter;
after: each spatial op carries ``layout = "NHWC"`` between an ``nnef.transpose`` to NHWC and one back to NCHW (for a
rank-3 one, 1-D: NWC and NCW), those
transposes are moved past the layout-agnostic ops that follow them (elementwise ops and activations, reductions and
softmax with their axes renumbered, concat, pad, squeeze), and a transpose of a transpose is merged, so the
NCHW↔NHWC pairs between consecutive layers cancel.  An elementwise op's constant operands are permuted with it
(after NNEF's broadcasting, which aligns leading dimensions).

:func:`to_channels_last` returns the transpose count before (the ``nnef.transpose`` ops of computed tensors
plus the two each spatial op would need) and after (transposes of constants, such as nnef-tools' OHWI → OIHW
filter transposes, are not counted: constant folding removes them); the route keeps it in ``graph.record.layout``.

Records (:mod:`tf2tosa.ir.records`): reads and writes none itself; the NNEF route stores what it returns in
``graph.record.layout``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...ir import Graph, Operation, TensorType, Value
from ...legalizations.nnef_ops import permute_type as _ptype

_TO_NHWC = [0, 2, 3, 1]
_TO_NCHW = [0, 3, 1, 2]
#: ops whose data input (operand 0) is NCHW; the pools' window attributes have one entry per dimension
SPATIAL = frozenset({"conv", "deconv", "box", "max_pool", "avg_pool", "rms_pool", "nearest_upsample",
                     "multilinear_upsample", "nearest_downsample", "area_downsample"})
_FULL_RANK_ATTRS = {"box", "max_pool", "avg_pool", "rms_pool"}
#: elementwise ops and activations: any layout, operands broadcast (leading dimensions aligned)
ELEMENTWISE = frozenset("""
add sub mul div pow min max lt gt le ge eq ne and or select clamp prelu copy exp log sin cos tan sinh cosh tanh
asin acos atan asinh acosh atanh abs sign rcp neg not floor ceil round sqr sqrt rsqr rsqrt log2 relu sigmoid elu
gelu silu softplus leaky_relu softabs
""".split())
_AXES = frozenset({"sum_reduce", "mean_reduce", "max_reduce", "min_reduce", "any_reduce", "all_reduce", "softmax"})


def _inverse(perm: Sequence[int]) -> list[int]:
    return [list(perm).index(i) for i in range(len(perm))]


def _transpose(graph: Graph, x: Value, perm: Sequence[int], name: str, location: str | None) -> Value:
    op = graph.add_op("nnef.transpose", [x], [_ptype(x.type, perm)],
                      {"axes": list(perm), "input_names": ["input"], "output_names": ["output"]},
                      [name], location=location)
    return op.result


def _count(graph: Graph) -> int:
    """Transposes of computed tensors (a transpose of a constant, e.g. a filter, is folded away later)."""
    return sum(1 for op in graph.ops.values() if op.name == "nnef.transpose" and not op.operands[0].is_const)


def _wrap(graph: Graph, op: Operation) -> bool:
    """Run a spatial op channels-last (NHWC, or NWC for a rank-3 one) between two transposes."""
    x = op.operands[0]
    if op.attrs.get("layout") == "NHWC" or x.type.rank not in (3, 4) or len(op.results) != 1:
        return False
    to_last, to_first = (_TO_NHWC, _TO_NCHW) if x.type.rank == 4 else ([0, 2, 1], [0, 2, 1])
    xt = _transpose(graph, x, to_last, x.name + "_nhwc", op.location)
    graph.set_operand(op, 0, xt)
    if op.opcode in _FULL_RANK_ATTRS:
        for key in ("size", "stride", "dilation", "padding"):
            v = op.attrs.get(key)
            if v:
                op.attrs[key] = [v[p] for p in to_last]
    op.attrs["layout"] = "NHWC"
    old = op.result
    new_t = _ptype(old.type, to_last)
    uses = list(graph.uses(old))
    is_out = [i for i, o in enumerate(graph.outputs) if o is old]
    source = old.source
    # the op keeps computing ``old`` (now NHWC); a transpose back gives the NCHW value its users expect
    old.type = new_t
    back = _transpose(graph, old, to_first, old.name + "_nchw", op.location)
    back.source, old.source = source, None
    for user, k in uses:
        graph.set_operand(user, k, back)
    for i in is_out:
        graph.outputs[i] = back
    return True


def _permuted_const(graph: Graph, v: Value, rank: int, perm: Sequence[int]) -> Value | None:
    arr = v.const()
    if arr is None:
        return None
    a = np.asarray(arr)
    if a.ndim > rank:
        return None
    if a.ndim == 0:
        return v
    a = np.transpose(a.reshape(a.shape + (1,) * (rank - a.ndim)), list(perm))
    t = TensorType(a.shape, v.dtype, v.type.quant)
    if t.quant is not None and t.quant.axis is not None:
        return None
    op = graph.add_op(v.producer.name if v.producer is not None else "nnef.const", [], [t],
                      {"values": np.ascontiguousarray(a), "kind": "constant"}, [v.name + "_nhwc"],
                      location=v.producer.location if v.producer is not None else None)
    return op.result


def _sink(graph: Graph, op: Operation) -> bool:
    """Move the transposes feeding ``op`` to its results when ``op`` does not care about the layout."""
    name = op.opcode
    if not op.name.startswith("nnef.") or len(op.results) != 1 or not op.operands:
        return False
    perm: list[int] | None = None
    for v in op.operands:
        p = v.producer
        if p is not None and p.name == "nnef.transpose" and len(p.attrs["axes"]) == v.type.rank:
            if perm is not None and list(p.attrs["axes"]) != perm:
                return False
            perm = list(p.attrs["axes"])
    if perm is None or perm == list(range(len(perm))):
        return False
    rank = len(perm)
    inv = _inverse(perm)
    attrs = dict(op.attrs)
    if name in ELEMENTWISE:
        pass
    elif name in _AXES:
        attrs["axes"] = [perm[int(a) % rank] for a in attrs.get("axes", [])]
    elif name == "concat":
        attrs["axis"] = perm[int(attrs["axis"]) % rank]
    elif name == "pad":
        pads = list(attrs["padding"]) + [(0, 0)] * (rank - len(attrs["padding"]))
        attrs["padding"] = [pads[inv[i]] for i in range(rank)]
    elif name == "squeeze":
        axes = sorted(perm[int(a) % rank] for a in attrs["axes"])
        kept = [perm[i] for i in range(rank) if i not in {int(a) % rank for a in attrs["axes"]}]
        if kept != sorted(kept):
            return False
        attrs["axes"] = axes
        producer = op.operands[0].producer
        assert producer is not None
        new = graph.add_op(op.name, [producer.operands[0]], [op.result.type], attrs, [op.result.name + "_"],
                           location=op.location)
        _replace(graph, op, new.result)
        return True
    else:
        return False
    operands: list[Value] = []
    for v in op.operands:
        p = v.producer
        if p is not None and p.name == "nnef.transpose" and list(p.attrs["axes"]) == perm and v.type.rank == rank:
            operands.append(p.operands[0])
        elif v.type.rank == 0:
            operands.append(v)
        else:
            c = _permuted_const(graph, v, rank, inv)
            if c is None or v.type.rank > rank:
                return False
            operands.append(c)
    new_t = _ptype(op.result.type, inv)
    new = graph.add_op(op.name, operands, [new_t], attrs, [op.result.name + "_t"], location=op.location)
    back = _transpose(graph, new.result, perm, op.result.name, op.location)
    _replace(graph, op, back)
    return True


def _replace(graph: Graph, op: Operation, new: Value) -> None:
    old = op.result
    new.source = old.source
    graph.replace_all_uses(old, new)
    for i, o in enumerate(graph.outputs):
        if o is old:
            graph.outputs[i] = new
    graph.remove_op(op)


def _merge(graph: Graph, op: Operation) -> bool:
    """transpose(transpose(x, p), q) → transpose(x, p∘q), or x when that is the identity."""
    x = op.operands[0]
    p = x.producer
    if p is None or p.name != "nnef.transpose" or len(p.attrs["axes"]) != x.type.rank:
        return False
    inner, outer = list(p.attrs["axes"]), list(op.attrs["axes"])
    if len(outer) != len(inner):
        return False
    composed = [inner[i] for i in outer]
    src = p.operands[0]
    if composed == list(range(len(composed))) and src.type == op.result.type:
        if op.result in graph.outputs and (src in graph.inputs or src.is_const or src in graph.outputs):
            return False
        if src.source is None:
            src.source = op.result.source
        for i, o in enumerate(graph.outputs):
            if o is op.result:
                graph.outputs[i] = src
        graph.replace_all_uses(op.result, src)
        graph.remove_op(op)
        return True
    graph.set_operand(op, 0, src)
    op.attrs["axes"] = composed
    return True


def to_channels_last(graph: Graph) -> dict[str, int]:
    """Rewrite ``graph`` (``nnef.*`` ops) as described in the module docstring; returns the transpose counts."""
    spatial = sum(1 for op in graph.ops.values() if op.name.startswith("nnef.") and op.opcode in SPATIAL)
    before = _count(graph) + 2 * spatial
    for op in graph.topological_order():
        if op.name.startswith("nnef.") and op.opcode in SPATIAL:
            _wrap(graph, op)
    graph.rewrite_until_settled(lambda op: _merge(graph, op) if op.name == "nnef.transpose" else _sink(graph, op),
                                after_round=graph.remove_dead_ops)
    after = _count(graph)
    return {"transposes_before": before, "transposes_after": after}


__all__ = ["ELEMENTWISE", "SPATIAL", "to_channels_last"]
