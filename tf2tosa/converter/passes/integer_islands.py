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

An op that only moves elements (:data:`MOVES`: SPLIT, RESHAPE, SLICE, TRANSPOSE, …) right after the DEQUANTIZE
moves into the integer domain, its results quantized as its input, and each result it hands on starts an island
of its own (the float chain may then be empty: DEQUANTIZE → SPLIT → QUANTIZE, which TensorFlow leaves in a
recurrent layer's first step, is one SPLIT of the codes and a table per QUANTIZE).  Moving elements commutes with
the elementwise DEQUANTIZE, so the tables are the same; the op's unread results are left to the dead-op sweep::

    x i8 ──tfl.dequantize──► f32 ──tfl.split──► f32 ×3 ──tfl.quantize──► y i8 (per read part)
    x i8 ──tfl.split──► i8 ×3 ──tosa.TABLE──► y i8 (per read part)

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


#: ops that only move elements, with the position of their data operand: a DEQUANTIZE before one of them is the
#: same as one after it on each result, so the op moves into the integer domain and the island starts past it
#: (TensorFlow leaves a recurrent layer's first step as DEQUANTIZE → SPLIT → QUANTIZE per gate)
MOVES: dict[str, int] = {
    "tfl.split": 1,
    "tfl.split_v": 0,
    "tfl.reshape": 0,
    "tfl.squeeze": 0,
    "tfl.expand_dims": 0,
    "tfl.transpose": 0,
    "tfl.slice": 0,
    "tfl.strided_slice": 0,
    "tfl.unpack": 0,
}


def _island(graph: Graph, v: Value, dt: DType) -> tuple[list[Operation], list[Operation]] | None:
    """The float ops after ``v`` (single-use) and the QUANTIZEs (to the integer type ``dt``) that read the last."""
    from ...quant.tflite_reference import FLOAT_ISLAND_KERNELS  # (loaded for a quantized model only)

    chain: list[Operation] = []
    while True:
        uses = graph.uses(v)
        if not uses or v in graph.outputs:
            return None
        if all(op.name == "tfl.quantize" for op, _ in uses):
            quants = [op for op, _ in uses]
            return (chain, quants) if all(_per_tensor(q.results[0], dt) for q in quants) else None
        if len(uses) != 1:
            return None
        op, _ = uses[0]
        if op.name not in FLOAT_ISLAND_KERNELS or len(op.operands) != 1 or op.results[0].dtype is not DType.FP32 \
                or op.attrs.get("fused_activation_function", "NONE") not in ("NONE", None):
            return None
        chain.append(op)
        v = op.results[0]


def _islands(graph: Graph, dq: Operation) -> tuple[Operation | None, list[tuple[list[Operation], list[Operation]]]]:
    """The islands after ``dq``: one through float ops (at least one), or one per read result of a single-use
    :data:`MOVES` op after it (that op returned first); none when any read result does not end in QUANTIZEs."""
    v = dq.results[0]
    dt = dq.operands[0].dtype
    uses = graph.uses(v)
    if len(uses) == 1 and v not in graph.outputs and uses[0][0].name in MOVES and uses[0][1] == MOVES[uses[0][0].name]:
        move = uses[0][0]
        read = [r for r in move.results if graph.uses(r) or r in graph.outputs]
        found = [_island(graph, r, dt) for r in read]
        if not read or any(f is None for f in found):
            return None, []
        return move, [f for f in found if f is not None]
    one = _island(graph, v, dt)
    return None, [one] if one is not None and one[0] else []


def integer_islands(graph: Graph, context: LegalizeContext | None = None) -> int:
    """Replace each DEQUANTIZE → NEG/ABS/HARD_SWISH… → QUANTIZE chain of int8/int16 values by one table lookup
    per QUANTIZE (an element-moving op right after the DEQUANTIZE moves before the lookups); returns how many
    chains."""
    done = 0
    for dq in graph.topological_order():
        if dq.name != "tfl.dequantize" or dq.id not in graph.ops or len(dq.operands) != 1 \
                or len(dq.results) != 1 or not _per_tensor(dq.operands[0]):
            continue
        move, islands = _islands(graph, dq)
        if not islands:
            continue
        x = dq.operands[0]
        if move is not None:  # the op reads the integer tensor; each result keeps its quantization
            graph.set_operand(move, MOVES[move.name], x)
            for r in move.results:
                r.type = x.type.with_shape(r.type.shape)
        for chain, quants in islands:
            src = x if move is None else chain[0].operands[0] if chain else quants[0].operands[0]
            _tabulate(graph, src, x, chain, quants, context)
            done += 1
        graph.remove_op(dq)
    return done


def _tabulate(graph: Graph, src: Value, x: Value, chain: list[Operation], quants: list[Operation],
              context: LegalizeContext | None) -> None:
    """Each QUANTIZE of the island as a table lookup of ``src`` (codes quantized as ``x``): TFLite's DEQUANTIZE,
    the chain's float kernels and its QUANTIZE, evaluated on every code; the chain's ops are removed."""
    from ...quant.elementwise import lut16
    from ...quant.table import apply_table_i8
    from ...quant.tflite_reference import FLOAT_ISLAND_KERNELS

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
        t = apply_table_i8(b, src, table, qy) if x.dtype is DType.INT8 else lut16(b, src, table, qy)
        t.source = y.source
        graph.replace_all_uses(y, t)
        graph.remove_op(qop)
    for op in reversed(chain):
        graph.remove_op(op)
