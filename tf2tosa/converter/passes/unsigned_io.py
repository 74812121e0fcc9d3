"""uint8 model inputs and outputs.

before: a frontend graph whose quantized inputs/outputs (and internal values) may be uint8; after: every quantized
value is int8 (zero point - 128), with an unsigned RESCALE at each uint8 input and output
(``meta["unsigned_io"]`` names them).  The rewrite itself is :func:`tf2tosa.quant.boundary.legalize_unsigned_io`.
"""

from __future__ import annotations

from ...errors import Unsupported, UnsupportedOpsError
from ...ir import Graph
from ...quant.boundary import legalize_unsigned_io
from ...tosa.context import LegalizeContext


def unsigned_io(graph: Graph, context: LegalizeContext) -> None:
    """uint8 model inputs/outputs -> i8 tensors + unsigned RESCALE; a failure is reported as an unsupported op."""
    try:
        legalize_unsigned_io(graph, context)
    except Unsupported as e:
        raise UnsupportedOpsError({"uint8 model input/output": (1, e.reason)}, file=context.file) from None
