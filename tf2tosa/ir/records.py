"""Typed records of a conversion, in place of a free-form metadata dict.

* :class:`SourceInfo` — ``graph.source``: what the frontend read: the file, its format and version, the
  signatures and tensor names of the source, and what the frontend has to tell about how it loaded it.
* :class:`ConversionRecord` — ``graph.record``: what the conversion decided and has to tell: its warnings, the
  inexact paths, the fixed dimensions, the TOSA profiles and extensions the program needs, the name maps, what
  the I/O and state passes did.  The CLI, ``inspect`` and the verify report show it.
* :class:`SymbolicDims` — ``graph.dims``: what a symbolic (TOSA 1.1-draft) program knows about its unknown
  dimensions: where each symbol is read, the equalities it asserts, the size guards and sample sizes of
  ``convert --dynamic``, the value of each computed shape.

What the passes and rules of one conversion hand each other about a graph is not on the graph: it is in the
conversion's pass context (:mod:`.pass_context`).  Each pass module's docstring says which records it reads and
writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SourceInfo:
    """``graph.source``: facts about the source model a frontend read (empty for a graph made in memory)."""

    #: the frontend: ``"tflite"``, ``"tensorflow"`` or ``"nnef"`` (None: a ``.tosa`` / ``.mlir`` read back)
    format: str | None = None
    #: the file read (path; None for bytes or an in-memory model)
    file: str | None = None
    #: TensorFlow sources: ``"saved_model"``, ``"keras"``, ``"function"``, ``"graphdef"`` …
    kind: str | None = None
    #: the TFLite schema version / the NNEF document version
    tflite_version: int | None = None
    nnef_version: str | None = None
    #: the TFLite model's description string
    description: str | None = None
    #: the TFLite model's metadata entries (name -> bytes)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the source's signatures (TFLite: ``{"signature_key", "subgraph_index", "inputs", "outputs"}``)
    signatures: list[Any] = field(default_factory=list)
    #: TensorFlow: the signature converted
    signature: str | None = None
    #: value name -> the signature key of that model input/output
    signature_names: dict[str, str] = field(default_factory=dict)
    #: TensorFlow: signature key -> graph tensor name, of the inputs and the outputs
    input_tensors: dict[str, str] = field(default_factory=dict)
    output_tensors: dict[str, str] = field(default_factory=dict)
    #: TFLite: every subgraph of the model as the frontend read it (regions of the ops that use them); emptied
    #: once the conversion is done.  (Graphs, typed Any: this module does not import ir.graph, which imports it.)
    subgraphs: list[Any] = field(default_factory=list)
    #: TFLite: which subgraph is the main graph, and the subgraph this graph was read from
    main_subgraph_index: int | None = None
    subgraph_index: int | None = None
    #: TFLite: value name -> the shape the file stores for a tensor whose shape signature is dynamic
    stored_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: TFLite: value name -> tensor index in its subgraph (per-layer comparisons)
    tensor_indices: dict[str, int] = field(default_factory=dict)
    #: TensorFlow: how a SavedModel was read when not by reviving its objects
    loader: str | None = None
    #: TensorFlow: the ``--inputs`` / ``--outputs`` cut: ``{"inputs": [...], "outputs": [...]}``
    cut: dict[str, list[str]] | None = None
    #: TensorFlow: the library function a region graph was made from
    function: str | None = None
    #: TensorFlow: variable name -> its value when the model was loaded (variables kept as state)
    variable_values: dict[str, Any] = field(default_factory=dict)
    #: TensorFlow: the ops with side effects the program leaves out: ``{"kind", "what", "op", "node"}``
    side_effect_ops: list[dict[str, Any]] = field(default_factory=list)
    #: NNEF: the graph's name, the document's extensions, the fragments expanded and those kept whole
    graph_name: str | None = None
    nnef_extensions: list[str] = field(default_factory=list)
    expanded: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    #: NNEF: tensor name -> its quantization entry
    quantization: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: what the frontend has to tell about how it loaded the model (added to the conversion's warnings)
    warnings: list[str] = field(default_factory=list)


@dataclass
class ConversionRecord:
    """``graph.record``: what the conversion of a graph did and decided (empty for a graph not converted)."""

    #: what the user is told at conversion time (printed by ``convert`` / ``verify``, listed by the zoo)
    warnings: list[str] = field(default_factory=list)
    #: ops lowered by a path that is not bit-exact with TFLite: ``{"op", "tensor", "reason"}`` (``quant.conv``)
    inexact: list[dict[str, Any]] = field(default_factory=list)
    #: each input dimension fixed at conversion time: ``{"input", "shape", "dims": [{"dim", "symbol", "value",
    #: "from"}]}`` (``converter.passes.input_shapes``)
    fixed_dims: list[dict[str, Any]] = field(default_factory=list)
    #: the TOSA profiles and extensions the program needs (None: not worked out; the writer's checks compute them)
    profiles: list[str] | None = None
    extensions: list[str] | None = None
    #: ``"1.1.draft"`` for a symbolic program (``convert --dynamic``, or a draft ``.tosa`` read back); None: 1.0
    specification_version: str | None = None
    #: the version a ``.tosa`` read back declares (``"1.0.0"``; ``d`` appended for a draft)
    tosa_version: str | None = None
    #: the ``tosa.target_env`` of an ``.mlir`` read back (``api.load``)
    declared_target: dict[str, Any] | None = None
    #: source tensor name -> TOSA value name (``converter.passes.outputs.rebuild_tensor_map``)
    tensor_map: dict[str, str] = field(default_factory=dict)
    #: source tensors whose value was folded or merged away
    tensor_map_dropped: list[str] = field(default_factory=list)
    #: names of the inputs/outputs whose i8 arrays carry uint8 bits (``converter.passes.unsigned_io``)
    unsigned_io: list[str] = field(default_factory=list)
    #: ``io="int"``: per role (``"inputs"`` / ``"outputs"``) the integer edge tensors' quantization
    #: (``converter.passes.integer_io``, or a sidecar read back); None: float I/O
    io_quantization: dict[str, list[dict[str, Any]]] | None = None
    #: ``--state-io``: the variable / input / output pairs (``converter.passes.state_io``)
    state_io: list[dict[str, Any]] = field(default_factory=list)
    #: variable name -> how its stored form holds the source's values (``"i16-bytes"``, ``"u8-offset"``)
    state_encoding: dict[str, str] = field(default_factory=dict)
    #: the operators kept as TOSA CUSTOM (``--custom-ops``)
    custom_ops: list[str] = field(default_factory=list)
    #: what if-conversion did: ``{"converted": n, "refused": [...]}`` (``converter.passes.if_conversion``)
    if_conversion: dict[str, Any] | None = None
    #: what the QAT pass did (``converter.qat``; TensorFlow sources)
    qat: dict[str, Any] | None = None
    #: the NCHW/NHWC transposes before and after the layout pass (NNEF sources)
    layout: dict[str, int] | None = None
    #: what ``specialize`` folded and checked
    specialized: dict[str, int] | None = None


@dataclass
class SymbolicDims:
    """``graph.dims``: the dimension symbols of a symbolic program (empty for a static one)."""

    #: symbol -> where it is read: ``{"input": value name, "dim": k}`` (its first input dimension)
    symbols: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the run-time equalities the program asserts (``tosa.shapes.graph_equalities`` entries and the like)
    equalities: list[dict[str, Any]] = field(default_factory=list)
    #: the size comparisons ``convert --dynamic`` decided at its sample sizes, as text (``"d1 // 16 >= 1"``); None
    #: where the program carries none (a ``.tosa`` read back: only the ``.mlir`` holds them)
    guards: list[str] | None = None
    #: the sample size of each symbol the guards were decided at; None as for ``guards``
    hints: dict[str, int] | None = None
    #: value name -> its computed shape in terms of the symbols (``"[batch, 1, 1, 8]"``)
    shape_values: dict[str, str] = field(default_factory=dict)


def inexact_warning(entry: dict[str, Any]) -> str:
    """The warning of one :attr:`ConversionRecord.inexact` entry: the sentence logged when the op is lowered and the
    one recorded among the conversion's warnings (the same text, so the CLI prints it once)."""
    return f"{entry['op']} ({entry['tensor']}) is not bit-exact with TFLite: {entry['reason']}"


__all__ = ["ConversionRecord", "SourceInfo", "SymbolicDims", "inexact_warning"]
