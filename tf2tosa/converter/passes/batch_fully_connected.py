"""int16x8 FULLY_CONNECTEDs that share their weights and read independent rows, as one op over stacked rows.

An unrolled recurrent network applies its input kernel once per time step: 16 FULLY_CONNECTEDs with the same
constant weights and bias, each on one [1, IC] row, each with its own output scale (TFLite calibrates every step's
tensor separately).  The exact int16x8 output stage (:func:`tf2tosa.quant.fully_connected.fc_output`: LiteRT's reference
kernel rounds ``fl64(acc·s)``, which takes ~140 i32 ops per FULLY_CONNECTED) is the bulk of such a graph.

before (a frontend graph, ``tfl`` ops)::

    x_0 [1, IC] i16 ──tfl.fully_connected(W, B)──► y_0 [1, OC] i16 (scale s_0)
    …
    x_15 [1, IC] i16 ──tfl.fully_connected(W, B)──► y_15 [1, OC] i16 (scale s_15)

after::

    x_0 … x_15 ──tfl.concatenation(axis 0)──► [16, IC] ──tfl.fully_connected(W, B)──► y_0 … y_15

one op with one result per row; its rule (``tfl_nn.fully_connected``) runs one CONV2D and one output stage whose
per-channel constants become per-row-and-channel constants, then SLICEs each row and saturates it to its own output
type.  Every element goes through the same integer arithmetic as before with the same ``s_x·s_w[c]/s_out`` (the
common limb exponent of :func:`tf2tosa.quant.exact_round.scale_limbs` represents each scale exactly either way), so
the result is bit-identical.  Only ops whose inputs do not depend on one another are stacked (the recurrent
kernel's steps stay apart), and only where the accumulator provably fits i32 (the exact form used per row).
Run before legalization.

Records (:mod:`tf2tosa.ir.records`): reads and writes none; only the graph's ops.
"""

from __future__ import annotations

import networkx as nx

from ...errors import Unsupported
from ...ir import DType, Graph, Operation, TensorType, has_value
from ...quant.conv import weight_zp
from ...quant.fully_connected import acc_bound


def _key(op: Operation) -> tuple[object, ...] | None:
    """What stacked ops must share, or None when ``op`` is not a candidate."""
    if op.name != "tfl.fully_connected" or len(op.results) != 1 or len(op.operands) < 2:
        return None
    x, w = op.operands[0], op.operands[1]
    bias = op.operands[2] if len(op.operands) > 2 and has_value(op.operands[2]) else None
    y = op.results[0]
    qx, qy = x.type.quant, y.type.quant
    if x.dtype is not DType.INT16 or y.dtype is not DType.INT16 or qx is None or qy is None \
            or qx.per_channel or qy.per_channel or not w.is_const or (bias is not None and not bias.is_const):
        return None
    if op.attrs.get("fused_activation_function", "NONE") not in ("NONE", None) or op.attrs.get("keep_num_dims") \
            or op.attrs.get("weights_format", "DEFAULT") != "DEFAULT":
        return None
    if not x.type.is_static or not y.type.is_static or len(x.shape) != 2 or x.shape[0] != 1 or len(y.shape) != 2:
        return None
    try:
        if acc_bound(x, w, bias, weight_zp(w)) >= (1 << 31) - 1:
            return None
    except Unsupported:
        return None
    return (w.id, bias.id if bias is not None else None, x.type, repr(sorted(op.attrs.items(), key=str)))


def batch_fully_connected(graph: Graph) -> int:
    """Stack the independent int16x8 FULLY_CONNECTEDs that share weights (see the module docstring); returns how
    many stacked ops it made."""
    groups: dict[tuple[object, ...], list[Operation]] = {}
    for op in graph.topological_order():
        key = _key(op)
        if key is not None:
            groups.setdefault(key, []).append(op)
    made = 0
    for ops in groups.values():
        chosen: list[Operation] = []
        for op in ops:  # topological order: a later op can depend on an earlier one, never the reverse
            x = op.operands[0]
            anc = nx.ancestors(graph.nx, x.producer.id) | {x.producer.id} if x.producer is not None else set()
            if not any(c.id in anc for c in chosen):
                chosen.append(op)
        if len(chosen) < 2:
            continue
        first = chosen[0]
        x0 = first.operands[0]
        rows = graph.add_op("tfl.concatenation", [op.operands[0] for op in chosen],
                            [TensorType((len(chosen), x0.shape[1]), x0.dtype, x0.type.quant)],
                            {"axis": 0, "fused_activation_function": "NONE"}, location=first.location)
        stacked = graph.add_op("tfl.fully_connected", [rows.results[0], *first.operands[1:]],
                               [op.results[0].type for op in chosen], dict(first.attrs),
                               [op.results[0].name + "_row" for op in chosen], location=first.location)
        for op, r in zip(chosen, stacked.results):
            r.source = op.results[0].source
            graph.replace_all_uses(op.results[0], r)
            graph.remove_op(op)
        made += 1
    return made
