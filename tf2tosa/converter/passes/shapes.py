"""Shape refresh.

before: TOSA ops created before their operands became static (the uint8 boundary RESCALEs, the TABLEs of int8 float
islands); after: their result shapes re-inferred from the catalogue (element type and quantization kept).

Records (:mod:`tf2tosa.ir.records`): reads and writes none; only the result types.
"""

from __future__ import annotations

from ...ir import Graph, Operation, TensorType, static_dims
from ...tosa import validation


def refresh_op(op: Operation) -> bool:
    """Re-infer one TOSA op's result shapes when they are not static and its operands now are (element type and
    quantization kept); returns whether it did.  The legalization loop calls it on the TOSA ops the passes ahead
    of it created (an int8 island's TABLE reading a value whose batch was still symbolic), so the rules after
    them see static shapes."""
    if not op.name.startswith("tosa."):
        return False
    for r in op.results:
        if static_dims(r.type) is None:
            break
    else:
        return False
    if not all(v.type.is_static for v in op.operands):
        return False
    types = validation.infer_result_types(op.opcode, [v.type for v in op.operands], op.attrs,
                                         out_dtype=op.results[0].dtype,
                                         operand_consts=[v.const() for v in op.operands])
    for r, t in zip(op.results, types):
        r.type = TensorType(t.shape, r.dtype, r.type.quant)
    return True


def refresh_shapes(graph: Graph) -> int:
    """Re-infer the shapes of TOSA ops created before their operands became static (e.g. the uint8 output
    RESCALE inserted ahead of legalization).  Element type and quantization are kept."""
    return sum(refresh_op(op) for op in graph.topological_order())
