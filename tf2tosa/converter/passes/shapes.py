"""Shape refresh.

before: TOSA ops created before their operands became static (the uint8 boundary RESCALEs); after: their result
shapes re-inferred from the catalogue (element type and quantization kept).
"""

from __future__ import annotations

from ...ir import Graph, TensorType
from ...tosa import catalogue


def refresh_shapes(graph: Graph) -> int:
    """Re-infer the shapes of TOSA ops created before their operands became static (e.g. the uint8 output
    RESCALE inserted ahead of legalization).  Element type and quantization are kept."""
    n = 0
    for op in graph.topological_order():
        if not op.name.startswith("tosa.") or all(r.type.is_static for r in op.results):
            continue
        if not all(v.type.is_static for v in op.operands):
            continue
        types = catalogue.infer_result_types(op.opcode, [v.type for v in op.operands], op.attrs,
                                             out_dtype=op.results[0].dtype,
                                             operand_consts=[v.const() for v in op.operands])
        for r, t in zip(op.results, types):
            r.type = TensorType(t.shape, r.dtype, r.type.quant)
        n += 1
    return n
