"""uint8 model inputs and outputs (placeholder until the quantized path lands)."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidGraphError
from ..ir import DType, Graph


def legalize_unsigned_io(graph: Graph, options: Any) -> None:
    """Rewrite uint8 graph inputs/outputs as i8 tensors with unsigned RESCALEs (S9907-9925)."""
    for v in list(graph.inputs) + list(graph.outputs):
        if v.dtype is DType.UINT8:
            raise InvalidGraphError("uint8 model inputs/outputs are not supported yet", tensor=v.source or v.name)
