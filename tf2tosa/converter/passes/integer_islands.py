"""Float islands of an int8 graph as one TABLE.

before (a frontend graph; TFLite leaves ops it cannot quantize in float, e.g. the NEG of a LayerNorm)::

    x i8 ──tfl.dequantize──► f32 ──tfl.neg / tfl.abs / tfl.hard_swish …──► f32 ──tfl.quantize──► y i8

after::

    x i8 ──tosa.TABLE(256 entries)──► y i8          (int16: a 65536-entry GATHER lookup)

The island's result depends on the codes of ``x`` only, so it is a table, computed here with TFLite's own
kernels (the DEQUANTIZE and QUANTIZE reference kernels of :mod:`.integer_io`; the float ops' kernels of
:data:`~tf2tosa.quant.tflite_reference.FLOAT_ISLAND_KERNELS`: NEG and ABS are exact in float32, HARD_SWISH is
evaluated in float32 as its float kernel does).  The graph then holds no PRO-FP op, which an integer NPU needs
(Vela refuses the float ops of such islands; TFLite's int16x8 conversion leaves HARD_SWISH in float).  Only chains
of single-use NEG/ABS/HARD_SWISH from a per-tensor int8/int16 DEQUANTIZE to QUANTIZEs of the same integer type are
rewritten (one table per QUANTIZE).  Run before legalization (the ops are still ``tfl`` ops).

Records (:mod:`tf2tosa.ir.records`): reads and writes none; only the graph's ops.
"""

from __future__ import annotations

import numpy as np

from ...ir import DType, Graph, Operation, Value
from ...tosa.builder import Builder
from ...tosa.context import LegalizeContext
from .integer_io import dequantize, quantize


def _per_tensor(v: Value, dtype: DType | None = None) -> bool:
    q = v.type.quant
    return v.dtype in (DType.INT8, DType.INT16) and (dtype is None or v.dtype is dtype) and q is not None \
        and not q.per_channel


def _island(graph: Graph, dq: Operation) -> tuple[list[Operation], list[Operation]] | None:
    """The float ops after ``dq`` (single-use) and the QUANTIZEs (to ``dq``'s integer type) that read the last."""
    from ...quant.tflite_reference import FLOAT_ISLAND_KERNELS  # (loaded for a quantized model only)

    chain: list[Operation] = []
    v = dq.results[0]
    dt = dq.operands[0].dtype
    while True:
        uses = graph.uses(v)
        if not uses or v in graph.outputs:
            return None
        if all(op.name == "tfl.quantize" for op, _ in uses):
            quants = [op for op, _ in uses]
            ok = chain and all(_per_tensor(q.results[0], dt) for q in quants)
            return (chain, quants) if ok else None
        if len(uses) != 1:
            return None
        op, _ = uses[0]
        if op.name not in FLOAT_ISLAND_KERNELS or len(op.operands) != 1 or op.results[0].dtype is not DType.FP32 \
                or op.attrs.get("fused_activation_function", "NONE") not in ("NONE", None):
            return None
        chain.append(op)
        v = op.results[0]


def integer_islands(graph: Graph, context: LegalizeContext | None = None) -> int:
    """Replace each DEQUANTIZE → NEG/ABS/HARD_SWISH… → QUANTIZE chain of int8/int16 values by one table lookup
    per QUANTIZE; returns how many chains."""
    done = 0
    for dq in graph.topological_order():
        if dq.name != "tfl.dequantize" or dq.id not in graph.ops or len(dq.operands) != 1 \
                or len(dq.results) != 1 or not _per_tensor(dq.operands[0]):
            continue
        found = _island(graph, dq)
        if found is None:
            continue
        from ...quant.elementwise import lut16
        from ...quant.table import apply_table_i8
        from ...quant.tflite_reference import FLOAT_ISLAND_KERNELS

        chain, quants = found
        x = dq.operands[0]
        qx = x.type.quant
        assert qx is not None
        codes = np.arange(-128, 128) if x.dtype is DType.INT8 else np.arange(-32768, 32768)
        f = dequantize(codes, float(qx.scale[0]), int(qx.zero_point[0]))
        for op in chain:
            f = FLOAT_ISLAND_KERNELS[op.name](f).astype(np.float32)
        for qop in quants:
            y = qop.results[0]
            qy = y.type.quant
            assert qy is not None
            table = quantize(f, y.dtype.value, float(qy.scale[0]), int(qy.zero_point[0]))
            b = Builder(graph, location=qop.location or qop.name, fold=False, context=context)
            b.name_hint = y.name + "_table"
            # int8: a PRO-INT TABLE; int16: one 65536-entry lookup (EXT-INT16's interpolating TABLE is not exact)
            t = apply_table_i8(b, x, table, qy) if x.dtype is DType.INT8 else lut16(b, x, table, qy)
            t.source = y.source
            graph.replace_all_uses(y, t)
            graph.remove_op(qop)
        for op in [*reversed(chain), dq]:
            graph.remove_op(op)
        done += 1
    return done
