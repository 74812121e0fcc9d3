"""What the passes and rules of one conversion hand each other about a graph, kept off the graph.

* :class:`GraphPasses` — the state of one graph during one conversion: which ops stay unfolded, the fp16 weights
  being kept, the hybrid rules' memo, the TFLite control-flow rules' record of the resource variables.
* :class:`PassContext` — the :class:`GraphPasses` of every graph a conversion touches (its main graph and the
  regions).  One per conversion rides on the ``LegalizeContext`` (``passes``); the pipeline hands it to the passes
  that need it (``fold_constants``, the fp16 pass) and the rules reach it as ``b.context.passes.of(b.graph)``.  It
  ends with the conversion.

The records a conversion leaves on the graph are in :mod:`.records`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from .graph import Graph, Value


@dataclass
class GraphPasses:
    """Pass-to-pass state of one graph during one conversion (op and value ids are the graph's own)."""

    #: ids of ops kept unfolded on purpose (``tosa.builder.fold_op`` skips them): an NPU compiler reads the small
    #: op better than its folded constant (``quant.elementwise.widen_kept``, ``quant.hybrid``, the fp16 CASTs)
    keep_unfolded: list[int] = field(default_factory=list)
    #: set while fp16 weights are kept as fp16 (``--fp16-weights keep``): a folded fp16 -> fp32 CAST of a constant
    #: holds a :class:`~tf2tosa.ir.widened.Widened`, not a float32 copy (``converter.passes.fp16_weights``)
    fp16_keep: bool = False
    #: how many fp16 weights the DEQUANTIZE rule expanded (``legalizations.tfl_types``)
    fp16_weights: int = 0
    #: value id -> the fp16 array a constant was expanded from
    fp16_sources: dict[int, np.ndarray] = field(default_factory=dict)
    #: the expanded constants :func:`~tf2tosa.converter.passes.fp16_weights.keep_fp16_weights_early` has yet to see
    fp16_pending: list[Value] = field(default_factory=list)
    #: the hybrid rules' memo: (value id, shape, rows, asymmetric, padding) -> what ``quant.hybrid.quantize`` made
    #: for it (q, factor, zero point: a Value, the constant ``quant.hybrid.NONNEG_ZP`` or None)
    hybrid_quantized: dict[tuple[int, tuple[int, ...], tuple[int, ...], bool, tuple[int, ...]],
                           tuple[Value, Value, Value | int | None]] = field(default_factory=dict)
    #: (value id, rows) -> the (factor, 1/factor, zero point) ``quant.hybrid._asymmetric_range`` made for it
    hybrid_ranges: dict[tuple[int, tuple[int, ...]], tuple[Value, Value, Value]] = field(default_factory=dict)
    #: a WHILE_LOOP region whose body runs hybrid ops (``legalizations.tfl_hybrid.kept_loop``): its equal constants
    #: are merged as the program's are (``converter.pipeline.convert_graph``)
    share_constants: bool = False
    #: the TFLite control-flow rules' record of the model's resource variables (``legalizations.tfl_control``)
    resource_variables: Any = None


class PassContext:
    """The :class:`GraphPasses` of each graph one conversion touches (the main graph and its regions)."""

    def __init__(self) -> None:
        self._graphs: dict[Graph, GraphPasses] = {}

    def of(self, graph: Graph) -> GraphPasses:
        """The state of ``graph`` (made empty the first time it is asked for)."""
        got = self._graphs.get(graph)
        if got is None:
            got = self._graphs[graph] = GraphPasses()
        return got


__all__ = ["GraphPasses", "PassContext"]
