"""Float islands of an int8 graph as one TABLE.

before (a frontend graph; TFLite leaves ops it cannot quantize in float, e.g. the NEG of a LayerNorm)::

    x i8 ──tfl.dequantize──► f32 ──tfl.neg / tfl.abs …──► f32 ──tfl.quantize──► y i8

after::

    x i8 ──tosa.TABLE(256 entries)──► y i8

The island's result depends on the 256 codes of ``x`` only, so it is a table, computed here with TFLite's own
kernels (the DEQUANTIZE and QUANTIZE reference kernels of :mod:`.integer_io`; NEG and ABS are exact in float32).
The graph then holds no PRO-FP op, which an integer NPU needs (Vela refuses the float ops of such islands).
Only chains of single-use NEG/ABS between a per-tensor int8 DEQUANTIZE and a per-tensor int8 QUANTIZE are
rewritten.  Run before legalization (the ops are still ``tfl`` ops).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir import DType, Graph, Operation, Value
from ...quant.table import apply_table_i8
from ...tosa.builder import Builder
from ...tosa.context import LegalizeContext
from .integer_io import dequantize, quantize

#: float32 ops of an island whose TFLite kernels are exact (the result is the float32 of the exact value)
_EXACT: dict[str, Callable[[np.ndarray], np.ndarray]] = {"tfl.neg": np.negative, "tfl.abs": np.abs}


def _per_tensor_i8(v: Value) -> bool:
    q = v.type.quant
    return v.dtype is DType.INT8 and q is not None and not q.per_channel


def _island(graph: Graph, dq: Operation) -> tuple[list[Operation], Operation] | None:
    """The exact float ops after ``dq`` and the QUANTIZE that ends them, when all are single-use."""
    chain: list[Operation] = []
    v = dq.results[0]
    while True:
        uses = graph.uses(v)
        if len(uses) != 1 or v in graph.outputs:
            return None
        op, _ = uses[0]
        if op.name == "tfl.quantize":
            return (chain, op) if chain and _per_tensor_i8(op.results[0]) else None
        if op.name not in _EXACT or len(op.operands) != 1 or op.results[0].dtype is not DType.FP32:
            return None
        chain.append(op)
        v = op.results[0]


def integer_islands(graph: Graph, context: LegalizeContext | None = None) -> int:
    """Replace each DEQUANTIZE → NEG/ABS… → QUANTIZE chain of int8 values by one TABLE; returns how many."""
    done = 0
    for dq in graph.topological_order():
        if dq.name != "tfl.dequantize" or dq.id not in graph.ops or not _per_tensor_i8(dq.operands[0]):
            continue
        found = _island(graph, dq)
        if found is None:
            continue
        chain, qop = found
        x, y = dq.operands[0], qop.results[0]
        qx, qy = x.type.quant, y.type.quant
        assert qx is not None and qy is not None
        f = dequantize(np.arange(-128, 128), float(qx.scale[0]), int(qx.zero_point[0]))
        for op in chain:
            f = _EXACT[op.name](f).astype(np.float32)
        table = quantize(f, "i8", float(qy.scale[0]), int(qy.zero_point[0]))
        b = Builder(graph, location=qop.location or qop.name, fold=False, context=context)
        b.name_hint = y.name + "_table"
        t = apply_table_i8(b, x, table, qy)
        t.source = y.source
        graph.replace_all_uses(y, t)
        for op in [qop, *reversed(chain), dq]:
            graph.remove_op(op)
        done += 1
    return done
