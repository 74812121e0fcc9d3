"""Explicit padding folded into the convolution that reads it.

before::

    x ──PAD(padding, pad_const = input_zp)──► [RESHAPE that only adds/removes size-1 dims] ──► CONV2D / DEPTHWISE_CONV2D
                                                                                                (pad = [t, b, l, r])

after::

    x ──[RESHAPE of the unpadded shape]──► CONV2D / DEPTHWISE_CONV2D (pad = [t + pt, b + pb, l + pl, r + pr])

CONV2D and DEPTHWISE_CONV2D read a position outside the input as contributing nothing: the spec's pseudo-code only
accumulates ``(value - input_zp)·weight`` for positions inside the input (spec 2.3.3 CONV2D, 2.3.5
DEPTHWISE_CONV2D).  A PAD whose value equals the convolution's ``input_zp`` (0.0 for float) contributes
``(input_zp - input_zp)·weight = 0`` at the same positions, so the fold is exact.  The output size
``(IH - 1 + pad_top + pad_bottom - (KH - 1)·dilation) / stride + 1`` only depends on the sum ``IH + pads``, which
is unchanged, so the divisibility the spec checks still holds.  NPUs run the padding as part of the convolution
instead of a separate memory copy (Vela's per-pass report shows each PAD as a MemoryCopy pass).

Only padding of the H and W axes is folded (batch and channel padding change the output), only when the PAD (and
the RESHAPE) have no other reader, and never into AVG_POOL2D or MAX_POOL2D: the spec's pools exclude padded
positions (AVG_POOL2D divides by the count of positions inside the input), while an explicit PAD makes TFLite count
them.  TFLite's ``tfl.conv_2d`` on a 1-D signal (a TCN's causal padding) arrives as PAD → RESHAPE → CONV2D.

Records (:mod:`tf2tosa.ir.records`): reads and writes none; only the graph's ops.
"""

from __future__ import annotations

import numpy as np

from ...ir import DType, Graph, Operation, Value
from ...ir.symdim import SYM_VALUES, is_symbolic

_CONVS = ("tosa.CONV2D", "tosa.DEPTHWISE_CONV2D")


def _non_unit(shape: tuple[int, ...] | list[int]) -> list[tuple[int, int]]:
    """(axis, size) of the dims that are not 1."""
    return [(i, int(d)) for i, d in enumerate(shape) if int(d) != 1]


def _sole_use(graph: Graph, v: Value) -> tuple[Operation, int] | None:
    uses = graph.uses(v)
    if len(uses) != 1 or v in graph.outputs:
        return None
    return uses[0]


def _map_pads(padded: list[int], pads: np.ndarray, target: list[int]) -> np.ndarray | None:
    """The (rank(target), 2) padding of ``target`` (a reshape of the padded shape that only adds or removes
    size-1 dims) that corresponds to ``pads`` of the padded shape; None when the reshape is not of that kind."""
    src, dst = _non_unit(padded), _non_unit(target)
    if [d for _, d in src] != [d for _, d in dst]:
        return None
    out = np.zeros((len(target), 2), dtype=np.int64)
    where = {a: b for (a, _), (b, _) in zip(src, dst)}
    for axis in range(len(padded)):
        if pads[axis].any():
            if axis not in where:  # a padded dim of size 1 (e.g. 0 + 1): not followed through the reshape
                return None
            out[where[axis]] = pads[axis]
    return out


def _symbolic(v: Value) -> bool:
    return v.producer is not None and SYM_VALUES in v.producer.attrs


def fold_pad(graph: Graph) -> int:
    """Fold every PAD (optionally followed by a unit-dim RESHAPE) into the CONV2D/DEPTHWISE_CONV2D reading it;
    returns how many were folded."""
    folded = 0
    for pad in graph.topological_order():
        if pad.name != "tosa.PAD" or pad.id not in graph.ops:
            continue
        x, padding, pad_const = pad.operands
        pv, cv = padding.const(), pad_const.const()
        use = _sole_use(graph, pad.results[0])
        if pv is None or cv is None or use is None or not x.type.is_static or _symbolic(padding) \
                or any(is_symbolic(d) for d in x.shape):
            continue  # (a padding holding dimension expressions, --dynamic, is computed at run time: kept)
        reshape: Operation | None = None
        consumer, k = use
        if consumer.name == "tosa.RESHAPE" and k == 0:
            reshape = consumer
            use = _sole_use(graph, reshape.results[0])
            if use is None:
                continue
            consumer, k = use
        if consumer.name not in _CONVS or k != 0:
            continue
        zp = consumer.operands[3].const()
        if zp is None or np.asarray(cv).size != 1 or np.asarray(zp).size != 1 or \
                float(np.asarray(cv).ravel()[0]) != float(np.asarray(zp).ravel()[0]):
            continue
        pads = np.asarray(pv, dtype=np.int64).reshape(-1, 2)
        if (pads < 0).any():
            continue
        padded = [int(d) for d in pad.results[0].type.static_shape]
        if reshape is not None:
            target = [int(d) for d in reshape.results[0].type.static_shape]
            pads4 = _map_pads(padded, pads, target)
        else:
            target, pads4 = padded, pads
        if pads4 is None or len(target) != 4 or pads4[0].any() or pads4[3].any():
            continue
        # the convolution now reads the unpadded tensor (reshaped like the padded one was)
        source = x
        if reshape is not None:
            unpadded = [d - int(p.sum()) for d, p in zip(target, pads4)]
            shape_const = graph.add_const(np.asarray(unpadded, dtype=np.int64), DType.SHAPE, name="shape",
                                          op_name="tosa.CONST_SHAPE")
            new_reshape = graph.add_op("tosa.RESHAPE", [x, shape_const],
                                       [reshape.results[0].type.with_shape(tuple(unpadded))], dict(reshape.attrs),
                                       [reshape.results[0].name + "_unpadded"], location=reshape.location)
            source = new_reshape.result
        old = [int(v) for v in consumer.attrs["pad"]]
        consumer.attrs["pad"] = [old[0] + int(pads4[1][0]), old[1] + int(pads4[1][1]),
                                 old[2] + int(pads4[2][0]), old[3] + int(pads4[2][1])]
        graph.set_operand(consumer, 0, source)
        for dead in (reshape, pad):
            if dead is not None and not graph.uses(dead.results[0]):
                graph.remove_op(dead)
        folded += 1
    return folded
