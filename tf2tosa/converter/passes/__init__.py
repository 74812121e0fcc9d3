"""Graph passes run around legalization, one module per pass, in the order the pipeline runs them:

1. :mod:`.input_shapes` — static input shapes;
2. :mod:`.integer_io` — with ``--io int`` only: a quantized model's edge QUANTIZE/DEQUANTIZE removed;
3. :mod:`.unsigned_io` — uint8 model inputs/outputs as int8 with unsigned RESCALEs;
4. :mod:`.integer_islands` — int8 DEQUANTIZE → NEG/ABS → QUANTIZE chains as one TABLE;
   :mod:`.batch_fully_connected` — int16x8 FULLY_CONNECTEDs sharing weights on independent rows as one op;
5. :mod:`.densify` — sparse constants made dense, then :mod:`.complex_pairs` — complex64 values carried as
   real/imaginary fp32 pairs (both from :func:`..pipeline.legalize_graph`, before the rules run);
6. :mod:`.constants` — the frontend constants still in use become tosa.CONST with TOSA types;
   :mod:`.zero_size` — the zero-size tensors the rules left unread removed, an empty graph output refused;
7. :mod:`.shapes` — shapes of ops created before their operands were static, re-inferred;
8. :mod:`.fold` — ops with constant operands folded;
9. :mod:`.fp16_weights` — the source's float16 weights stored as fp16 constants + CAST (``--fp16-weights keep``);
10. :mod:`.identities` — no-op RESHAPE/TRANSPOSE/IDENTITY removed;
11. :mod:`.fold_pad` — a PAD of the input zero point folded into the CONV2D/DEPTHWISE_CONV2D padding;
    :mod:`.dilation` — with ``--target`` ethos-u85/ethos-u55 only: a dilation above 2 as dilation 2 (or 1) of a
    wider kernel;
    :mod:`.lift_reshapes` — with ``--target`` ethos-u85/ethos-u55 only: elementwise ops between RESHAPEs at the
    rank of the tensors reshaped;
12. :mod:`.dedup_constants` — equal constants merged into one shared op, and the CASTs of one constant to one type
    into one CAST;
13. :mod:`.outputs` — outputs named after their source tensors, the tensor map rebuilt;
14. :mod:`.state_io` — with ``--state-io`` only: EXT-VARIABLE variables become state inputs/outputs.

Each module's docstring names its input and output form, and the typed records it reads and writes
(:mod:`tf2tosa.ir.records`: ``graph.source``, ``graph.record``; :mod:`tf2tosa.ir.pass_context`: the conversion's
``GraphPasses`` of the graph).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...lazy import on_first_use
from ...tosa.constants import narrow_constant, retype
from .constants import finish_constants
from .dedup_constants import dedup_constants
from .densify import densify
from .fold import fold_constants
from .fold_pad import fold_pad
from .fp16_weights import fp16_weights_mode, keep_fp16_weights, keep_fp16_weights_early
from .identities import remove_identities
from .input_shapes import resolve_input_shapes
from .outputs import name_outputs, rebuild_tensor_map
from .shapes import refresh_op, refresh_shapes

if TYPE_CHECKING:
    from .batch_fully_connected import batch_fully_connected
    from .dilation import limit_dilation
    from .dilation import wanted as dilation_wanted
    from .integer_io import integer_io, integer_io_names
    from .integer_islands import integer_islands
    from .lift_reshapes import lift_reshapes
    from .lift_reshapes import wanted as lift_reshapes_wanted
    from .state_io import state_io
    from .unsigned_io import unsigned_io

#: the passes only some conversions run, loaded on first use: name -> (module, attribute): ``--target`` and
#: ``--state-io`` ones, and the integer ones (``io="int"``, or a graph with a quantized or uint8 value:
#: :func:`..pipeline.integer_values`).  A float conversion does not hold their code in memory (the fp16 model's peak
#: is held to twice its file by bench_convert).  A name that is also its module's (``integer_io``, ``state_io`` ...)
#: stays the pass however its module is first imported (:func:`...lazy.on_first_use`).
_ON_USE = {"limit_dilation": ("dilation", "limit_dilation"), "dilation_wanted": ("dilation", "wanted"),
           "lift_reshapes": ("lift_reshapes", "lift_reshapes"), "lift_reshapes_wanted": ("lift_reshapes", "wanted"),
           "state_io": ("state_io", "state_io"),
           "batch_fully_connected": ("batch_fully_connected", "batch_fully_connected"),
           "integer_io": ("integer_io", "integer_io"), "integer_io_names": ("integer_io", "integer_io_names"),
           "integer_islands": ("integer_islands", "integer_islands"), "unsigned_io": ("unsigned_io", "unsigned_io")}


__getattr__ = on_first_use(__name__, globals(), _ON_USE)

__all__ = ["batch_fully_connected", "dedup_constants", "densify", "dilation_wanted", "finish_constants",
           "fold_constants", "fold_pad",
           "fp16_weights_mode", "integer_io", "integer_io_names", "integer_islands", "keep_fp16_weights",
           "keep_fp16_weights_early", "lift_reshapes", "lift_reshapes_wanted", "limit_dilation",
           "name_outputs", "narrow_constant", "rebuild_tensor_map", "refresh_op", "refresh_shapes", "remove_identities",
           "resolve_input_shapes", "retype", "state_io", "unsigned_io"]
