"""The TensorFlow frontend: SavedModel / Keras / tf.function / frozen GraphDef → the IR (``tf.*`` ops).

TensorFlow is imported only inside the functions of this module (converting a ``.tflite`` never needs it).
Entry points: :func:`load_tensorflow` (the IR graph) and :func:`load_source` (the frozen function together
with a callable that runs the *original* model in TensorFlow, for verification).

Sources
-------
* a SavedModel directory: the signature ``signature`` (default ``serving_default``); a missing signature
  raises :class:`ModelLoadError` listing the available ones, a directory without ``saved_model.pb`` is not a
  SavedModel;
  when ``tf.saved_model.load`` cannot revive the saved objects (a Keras 2 optimizer's slot variables: "'_UserObject'
  object has no attribute 'add_slot'"), the MetaGraph and the variables are read directly instead (TF's v1 loader
  in a session, frozen there; ``graph.source.loader`` says so and why);
* a ``.keras`` / ``.h5`` file, or an in-memory ``keras.Model``: the model's call in inference mode, inputs
  named after the Keras inputs, outputs after the output layers;
* a ``tf.function`` with an ``input_signature``, or a ``ConcreteFunction``;
* a frozen GraphDef (``.pb`` file or its bytes): inputs are the ``Placeholder`` nodes in node order, outputs
  the nodes nobody consumes (or ``outputs=[...]`` tensor names).

Variables are frozen with ``convert_variables_to_constants_v2`` (functions inlined, control flow kept as
``If``/``While`` ops); a variable that is written by the function cannot be frozen and raises
:class:`ModelLoadError` naming it, unless it is kept (``keep_variables``, ``--keep-variables``): a kept variable
stays a resource (``tf.VarHandleOp`` with ``shared_name`` = the variable's name, its load-time value in
``graph.source.variable_values``), read by ``tf.ReadVariableOp`` and written by ``tf.AssignVariableOp`` /
``AssignAddVariableOp`` / ``AssignSubVariableOp`` (kept with ``side_effect``, created in TensorFlow's program
order).

IR produced
-----------
* every reachable op of the frozen graph becomes ``tf.<OpType>`` (``tf.Conv2D``, ``tf.AddV2`` …); the op's
  ``location`` is the node name;
* attributes keep the NodeDef names (``strides``, ``padding``, ``explicit_paddings``, ``data_format``,
  ``dilations``, ``T``, ``transpose_a`` …), decoded: strings → ``str``, types → :class:`DType` (or the TF type
  name when the IR has none), shapes → ``list[int | None]`` (``None`` for an unknown rank), tensors →
  ``numpy`` arrays, lists → lists, functions → the function name; ``_``-prefixed (internal) attributes dropped;
* ``Const`` → ``tf.Const`` with ``values`` (a numpy array) and ``dtype``;
* ``While``/``StatelessWhile`` and ``If``/``StatelessIf`` carry their FunctionDefs (the frozen graph's library) as
  ``op.regions`` (cond, body / then, else), each an IR graph mapped the same way (inputs/outputs the function's
  arguments/results, shapes from the op's inputs), one per function and input shapes, shared by the ops using it;
* ``Identity``, ``IdentityN``, ``StopGradient``, ``Snapshot``, ``PreventGradient``, ``EnsureShape`` and
  ``PlaceholderWithDefault`` are forwarded (their results alias their inputs) and ``NoOp`` / control edges are
  dropped, so none of them reaches legalization;
* values: name = node name with characters outside ``[A-Za-z0-9_]`` replaced (``_<k>`` appended for output
  k > 0); ``Value.source`` = the TF tensor name (``node`` or ``node:k``); unknown dims are the symbols
  ``"batch"`` (dim 0) and ``"d<k>"``;
* graph inputs/outputs: in signature order (signature keys sorted, as TensorFlow flattens them), the IR
  values named (and ``source``) after the signature keys.

``graph.source`` (:class:`~tf2tosa.ir.records.SourceInfo`): ``format`` ("tensorflow"), ``kind`` ("saved_model" /
"keras" / "function" /
"graphdef"), ``file``, ``signature`` (key), ``signature_names`` (value name → signature key),
``input_tensors`` / ``output_tensors`` (signature key → TF tensor name), ``signatures`` (SavedModel: all keys).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConversionError, ModelLoadError, first_line
from ..ir.graph import Graph, Value
from ..ir.types import DType, TensorType
from ..options import ConvertOptions

__all__ = ["TF_DTYPES", "TFSource", "graph_from_source", "graph_from_tf", "is_tensorflow_source", "tensorflow_frontend",
           "load_source", "load_tensorflow", "tflite_qat_reference"]

#: TensorFlow DataType enum → IR dtype (types the IR cannot describe are left out)
TF_DTYPES: dict[int, DType] = {
    1: DType.FP32, 2: DType.FP64, 3: DType.INT32, 4: DType.UINT8, 5: DType.INT16, 6: DType.INT8,
    7: DType.STRING, 8: DType.COMPLEX64, 9: DType.INT64, 10: DType.BOOL, 14: DType.BF16, 17: DType.UINT16,
    18: DType.COMPLEX128, 19: DType.FP16, 20: DType.RESOURCE, 21: DType.VARIANT, 22: DType.UINT32,
    23: DType.UINT64, 24: DType.FP8E5M2, 25: DType.FP8E4M3, 29: DType.INT4,
}

#: ops whose results are their inputs (forwarded by the frontend)
FORWARDED = frozenset({"Identity", "IdentityN", "StopGradient", "Snapshot", "PreventGradient", "EnsureShape",
                       "PlaceholderWithDefault", "CheckNumerics"})
#: op types that write a resource variable (they keep a variable from being frozen)
_WRITES = ("Assign", "ResourceApply", "ResourceScatter", "ResourceSparseApply", "ResourceStridedSliceAssign",
           "StatefulPartitionedCall", "DestroyResourceOp")


#: TensorFlow ops that do something besides computing their results, by kind.  A TOSA program computes its outputs
#: and nothing else, so conversion drops these and warns naming each (:func:`side_effect_ops`,
#: ``graph.source.side_effect_ops``); ``verify`` runs the source model in TensorFlow, so it refuses a graph holding
#: one of the kinds in :data:`REFUSED_EFFECTS` unless the model is trusted (``--trust-model``, ``trust_model=True``).
#: A ``PrintV2`` whose ``output_stream`` is a ``file://`` path counts as file I/O.
SIDE_EFFECT_OPS: dict[str, str] = {
    **dict.fromkeys((
        "WriteFile", "ReadFile", "MatchingFiles", "ImmutableConst", "Save", "SaveSlices", "SaveV2", "Restore",
        "RestoreSlice", "RestoreV2", "MergeV2Checkpoints", "InitializeTableFromTextFile",
        "InitializeTableFromTextFileV2", "LoadAndRemapMatrix", "GenerateVocabRemapping", "DecodeProtoV2",
        "EncodeProto", "WholeFileReader", "WholeFileReaderV2", "TextLineReader", "TextLineReaderV2",
        "TFRecordReader", "TFRecordReaderV2", "FixedLengthRecordReader", "FixedLengthRecordReaderV2", "LMDBReader",
        "ReaderRead", "ReaderReadV2", "ReaderReadUpTo", "ReaderReadUpToV2", "TFRecordDataset", "TFRecordDatasetV2",
        "FixedLengthRecordDataset", "FixedLengthRecordDatasetV2", "TextLineDataset", "MatchingFilesDataset",
        "ExperimentalMatchingFilesDataset", "SaveDataset", "SaveDatasetV2", "LoadDataset", "SnapshotDataset",
        "SnapshotDatasetV2", "CacheDataset", "CacheDatasetV2", "LMDBDataset", "ExperimentalLMDBDataset",
        "SqlDataset", "ExperimentalSqlDataset", "CreateSummaryFileWriter", "CreateSummaryDbWriter", "WriteSummary",
        "WriteRawProtoSummary", "WriteScalarSummary", "WriteHistogramSummary", "WriteImageSummary",
        "WriteAudioSummary", "WriteGraphSummary", "ImportEvent", "FlushSummaryWriter", "CloseSummaryWriter",
        "DebugIdentity", "DebugIdentityV2", "DebugIdentityV3", "DebugNanCount", "DebugNumericSummary",
        "DebugNumericSummaryV2", "Rpc", "TryRpc"), "file"),
    **dict.fromkeys(("PyFunc", "PyFuncStateless", "EagerPyFunc"), "python"),
    **dict.fromkeys((
        "FIFOQueue", "FIFOQueueV2", "PaddingFIFOQueue", "PaddingFIFOQueueV2", "RandomShuffleQueue",
        "RandomShuffleQueueV2", "PriorityQueue", "PriorityQueueV2", "FakeQueue", "QueueEnqueue", "QueueEnqueueV2",
        "QueueEnqueueMany", "QueueEnqueueManyV2", "QueueDequeue", "QueueDequeueV2", "QueueDequeueMany",
        "QueueDequeueManyV2", "QueueDequeueUpTo", "QueueDequeueUpToV2", "QueueClose", "QueueCloseV2", "QueueSize",
        "QueueSizeV2", "QueueIsClosed", "QueueIsClosedV2", "Barrier", "BarrierInsertMany", "BarrierTakeMany",
        "BarrierClose", "Stage", "Unstage", "StagePeek", "MapStage", "MapUnstage", "MapPeek", "OrderedMapStage",
        "OrderedMapUnstage", "OrderedMapPeek"), "queue"),
    **dict.fromkeys(("Print", "PrintV2"), "print"),
    **dict.fromkeys(("Assert", "CheckNumerics", "CheckNumericsV2"), "assert"),
}
#: how each kind reads in messages
EFFECT_KINDS: dict[str, str] = {"file": "file system or network", "python": "Python call", "queue": "queue",
                                "print": "print", "assert": "assert"}
#: the kinds verify refuses to run without --trust-model: they reach outside the process (files, the network),
#: run arbitrary Python, or can block forever (a dequeue from a queue nothing fills); prints and asserts only write
#: to the console or stop the run with an error, so they run
REFUSED_EFFECTS = frozenset({"file", "python", "queue"})


@dataclass(frozen=True)
class EffectOp:
    """One op with a side effect in a TensorFlow graph: its kind (:data:`EFFECT_KINDS`), op type and node name
    (``function/node`` inside a library function)."""

    kind: str
    op: str
    node: str


def _effect_kind(node: Any) -> str | None:
    kind = SIDE_EFFECT_OPS.get(str(node.op))
    if kind == "print" and node.op == "PrintV2" and "output_stream" in node.attr \
            and node.attr["output_stream"].s.decode(errors="replace").startswith("file://"):
        return "file"
    return kind


def _called_functions(nodes: Any) -> set[str]:
    """The library functions that ``nodes`` (NodeDefs) name in their attributes (calls, control-flow bodies)."""
    out: set[str] = set()
    for n in nodes:
        for a in n.attr.values():
            if a.HasField("func"):
                out.add(a.func.name)
            if a.HasField("list"):
                out.update(f.name for f in a.list.func)
    return out


def _function_closure(library: Mapping[str, Any], names: set[str]) -> list[str]:
    """``names`` and every library function they call, transitively (sorted; names not in ``library`` left out)."""
    funcs = set(names)
    todo = sorted(funcs)
    while todo:
        f = library.get(todo.pop())
        if f is None:
            continue
        new = _called_functions(f.node_def) - funcs
        funcs |= new
        todo += sorted(new)
    return sorted(f for f in funcs if f in library)


def _reachable(nodes: Sequence[Any], roots: Sequence[str]) -> list[Any]:
    """The ``nodes`` that ``roots`` (node or tensor names) depend on through data or control edges, in order."""
    by_name = {n.name: n for n in nodes}
    seen: set[str] = set()
    stack = [r.lstrip("^").split(":")[0] for r in roots]
    while stack:
        nm = stack.pop()
        if nm in seen or nm not in by_name:
            continue
        seen.add(nm)
        stack.extend(i.lstrip("^").split(":")[0] for i in by_name[nm].input)
    return [n for n in nodes if n.name in seen]


def effect_ops(graph_def: Any, roots: Sequence[str] | None = None) -> list[EffectOp]:
    """The side-effect ops (:data:`SIDE_EFFECT_OPS`) of a GraphDef that running it runs: its nodes (with
    ``roots``, only those the ``roots`` depend on through data or control edges) and the nodes of the library
    functions they call, transitively (named ``function/node``)."""
    nodes = list(graph_def.node)
    if roots is not None:
        nodes = _reachable(nodes, roots)
    found = [EffectOp(k, str(n.op), str(n.name)) for n in nodes if (k := _effect_kind(n)) is not None]
    lib = {f.signature.name: f for f in graph_def.library.function}
    for fn in _function_closure(lib, _called_functions(nodes)):
        found += [EffectOp(k, str(n.op), f"{fn}/{n.name}") for n in lib[fn].node_def
                  if (k := _effect_kind(n)) is not None]
    return found


def describe_effects(ops: Sequence[EffectOp]) -> str:
    """``file system or network: WriteFile x1 (a/WriteFile); print: PrintV2 x2 (b/PrintV2, c/PrintV2)``: every op,
    grouped by kind and type."""
    groups: dict[str, dict[str, list[str]]] = {}
    order = list(EFFECT_KINDS)
    for e in sorted(ops, key=lambda e: (order.index(e.kind), e.op, e.node)):
        groups.setdefault(e.kind, {}).setdefault(e.op, []).append(e.node)
    return "; ".join(f"{EFFECT_KINDS[kind]}: " + ", ".join(f"{op} x{len(names)} ({', '.join(names)})"
                                                          for op, names in by_op.items())
                     for kind, by_op in groups.items())


def source_effects(src: TFSource) -> list[EffectOp]:
    """The side-effect ops that running ``src`` (its ``run``) may run: a function's graph with every function it
    calls (TensorFlow runs every stateful op of a tf.function), a GraphDef's or a v1 SavedModel's nodes that the
    outputs depend on."""
    if src.effects is None:
        if src.function is not None and src.kind != "graphdef" and not src.loader:
            src.effects = effect_ops(src.function.graph.as_graph_def())
        elif src.graph_def is not None:
            src.effects = effect_ops(src.graph_def, src.output_tensors)
        else:
            src.effects = []
    return src.effects


def _tf() -> Any:
    try:
        import tensorflow as tf
    except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
        raise ModelLoadError("TensorFlow models need the 'tensorflow' package (pip install 'tf2tosa[tf]')") from e
    return tf


def _clean(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return s or "t"


# ------------------------------------------------------------------------------------------ the source
@dataclass
class TFSource:
    """A loaded TensorFlow model: the frozen function to convert and the original to run."""

    kind: str  # saved_model | keras | function | graphdef
    label: str  # the file, or a description of the in-memory object
    #: the function whose frozen graph is converted (a ConcreteFunction), None for a GraphDef
    function: Any
    #: signature keys of the flat inputs / outputs, in order
    input_names: list[str]
    output_names: list[str]
    #: runs the original model: flat list of arrays (input order) → flat list of arrays (output order)
    run: Callable[[Sequence[np.ndarray]], list[np.ndarray]]
    #: for a GraphDef: the graph_def and the tensor names of the inputs / outputs
    graph_def: Any = None
    input_tensors: list[str] = field(default_factory=list)
    output_tensors: list[str] = field(default_factory=list)
    signature: str | None = None
    signatures: list[str] = field(default_factory=list)
    #: a SavedModel's MetaGraph tag set when one was chosen (``--tag``), else None
    tags: list[str] | None = None
    #: how a SavedModel was read when not by reviving its objects (``graph.source.loader``), else None
    loader: str | None = None
    #: the side-effect ops running it runs (:func:`source_effects`; None until asked)
    effects: list[EffectOp] | None = None
    #: opened with ``trust_model``: verify runs it whatever its graph does
    trusted: bool = False


def _is_keras_model(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return (mod.startswith("keras") or mod.startswith("tf_keras") or mod.startswith("tensorflow.python.keras")
            ) and hasattr(obj, "inputs") and hasattr(obj, "outputs") and callable(obj)


def load_source(source: Any, signature: str = "serving_default", outputs: Sequence[str] | None = None, *,
                unsafe_deserialization: bool = False, trust_model: bool = False, tag: str | None = None) -> TFSource:
    """Open ``source`` (see the module docstring) without converting it.

    A ``.keras`` / ``.h5`` file is loaded in Keras's safe mode: a layer holding Python code (a ``Lambda``'s
    function) is refused, naming the layer, unless ``unsafe_deserialization`` (which runs that code).  A SavedModel
    whose loading would run file-system, Python or queue ops (:func:`load_time_effects`) is refused unless
    ``trust_model``; a source opened with ``trust_model`` is trusted by verify too (``TFSource.trusted``).
    ``tag`` (a SavedModel's MetaGraph tag set, comma-separated: ``serve``, ``eval``, ``serve,gpu``) picks the
    MetaGraph; without it, the one holding ``signature`` (``serve`` first)."""
    if tag is not None and not (isinstance(source, (str, os.PathLike)) and Path(os.fspath(source)).is_dir()):
        raise ModelLoadError("--tag picks a SavedModel's MetaGraph; this source is no SavedModel directory",
                             file=os.fspath(source) if isinstance(source, (str, os.PathLike)) else None)
    src = _load_source(source, signature, outputs, unsafe_deserialization, trust_model, tag)
    src.trusted = trust_model
    return src


def _load_source(source: Any, signature: str, outputs: Sequence[str] | None, unsafe_deserialization: bool,
                 trust_model: bool, tag: str | None = None) -> TFSource:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _graphdef_source(bytes(source), "<bytes>", outputs)
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        p = Path(path)
        if p.is_dir():
            if not (p / "saved_model.pb").exists() and not (p / "saved_model.pbtxt").exists():
                raise ModelLoadError("not a SavedModel directory (no saved_model.pb inside)", file=path)
            return _saved_model_source(path, signature, trust_model, tag, outputs)
        if not p.exists():
            raise ModelLoadError("no such file or directory", file=path)
        suffix = p.suffix.lower()
        if suffix == ".keras":
            from .archive import MAX_KERAS_MEMBERS, check_zip

            # its members' count and declared sizes within the caps before Keras inflates one
            check_zip(path, max_members=MAX_KERAS_MEMBERS)
        if suffix in (".keras", ".h5", ".hdf5"):
            return _keras_source(_load_keras_file(path, unsafe_deserialization), path)
        if p.name == "saved_model.pb":
            return _saved_model_source(str(p.parent), signature, trust_model)
        if suffix in (".pb", ".graphdef"):
            try:
                data = p.read_bytes()
            except OSError as e:
                raise ModelLoadError(f"cannot read GraphDef: {e.strerror or e}", file=path) from None
            return _graphdef_source(data, path, outputs)
        raise ModelLoadError(f"unknown TensorFlow model format {suffix or '(no suffix)'!r}; expected a SavedModel "
                             "directory, .keras, .h5 or a frozen GraphDef .pb", file=path)
    if _is_keras_model(source):
        return _keras_source(source, f"<keras.Model {getattr(source, 'name', '')}>")
    tf = _tf()
    if isinstance(source, tf.types.experimental.ConcreteFunction):
        return _function_source(source, f"<ConcreteFunction {getattr(source, 'name', '')}>")
    if isinstance(source, tf.types.experimental.PolymorphicFunction):
        label = f"<tf.function {getattr(source, '__name__', '')}>"
        if getattr(source, "input_signature", None) is None:
            raise ModelLoadError("a tf.function needs an input_signature (or pass fn.get_concrete_function(...))",
                                 file=label)
        try:
            cf = source.get_concrete_function()
        except Exception as e:
            raise ModelLoadError(f"cannot trace the tf.function: {first_line(e)}", file=label) from None
        return _function_source(cf, label)
    raise ModelLoadError(f"cannot load a TensorFlow model from a {type(source).__name__}")


def _flat_names(structure: Any, default: str, specs_only: bool = False) -> list[str]:
    """Names of the flattened leaves of a signature structure: dict keys (joined paths), TensorSpec names or
    ``default_<i>``.  With ``specs_only`` only TensorSpec leaves count (python values bound at trace time are
    not inputs)."""
    tf = _tf()
    from tensorflow.python.util import nest

    pairs = list(nest.flatten_with_joined_string_paths(structure))
    if specs_only:
        pairs = [(p, leaf) for p, leaf in pairs if isinstance(leaf, tf.TensorSpec)]
    names: list[str] = []
    for i, (path, leaf) in enumerate(pairs):
        nm = getattr(leaf, "name", None) if isinstance(leaf, tf.TensorSpec) else None
        if nm:
            names.append(str(nm).split(":")[0])
        elif path and not re.fullmatch(r"[0-9/]*", path):
            names.append(path)
        else:
            names.append(f"{default}_{i}" if len(pairs) > 1 else default)
    return _dedupe(names)


def _dedupe(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0)
        out.append(n if k == 0 else f"{n}_{k}")
        seen[n] = k + 1
    return out


def _saved_model_source(path: str, signature: str, trust_model: bool = False, tag: str | None = None,
                        roots: Sequence[str] | None = None) -> TFSource:
    tf = _tf()
    tags = _tag_set(path, tag) if tag is not None else None
    if not trust_model:
        try:
            proto = _saved_model_proto(path)
        except ModelLoadError as e:
            raise ModelLoadError(f"cannot load SavedModel: {e.message}", file=path) from None
        at_load = load_time_effects(proto)
        if at_load:
            raise ModelLoadError(f"loading this SavedModel would run op(s) that touch the file system, call Python "
                                 f"or wait on queues, in its initialisation code ({describe_effects(at_load)}); not "
                                 "loaded: pass --trust-model (API trust_model=True) if you trust this model",
                                 file=path)
    try:
        loaded = tf.saved_model.load(path) if tags is None else tf.saved_model.load(path, tags=tags)
    except Exception as e:
        # reviving the object graph failed (e.g. a Keras 2 optimizer whose slot variables need Python classes
        # that are gone): read the MetaGraph and the variables instead
        revive_error = first_line(e)
        if "requires a `tags=` argument" in revive_error:  # (a TF1 export with several MetaGraphs, no --tag)
            revive_error = "the SavedModel holds several MetaGraphs (tag sets; choose one with --tag)"
        try:
            return _saved_model_graph_source(path, signature, revive_error, tags, roots)
        except ModelLoadError as e2:
            raise ModelLoadError(f"cannot load SavedModel: {revive_error}; reading its MetaGraph directly also "
                                 f"failed: {e2}", file=path) from None
    keys = sorted(loaded.signatures.keys())
    if signature not in loaded.signatures:
        avail = ", ".join(keys) if keys else "none"
        raise ModelLoadError(f"SavedModel has no signature {signature!r} (available: {avail}; pick one with "
                             "--signature)", file=path)
    fn = loaded.signatures[signature]
    args, kwargs = fn.structured_input_signature
    specs = dict(kwargs)
    in_names = sorted(specs)
    out_struct = fn.structured_outputs
    out_names = sorted(out_struct) if isinstance(out_struct, dict) else _flat_names(out_struct, "output")

    def run(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        res = fn(**{k: tf.constant(a) for k, a in zip(in_names, arrays)})
        if isinstance(res, dict):
            return [np.asarray(res[k]) for k in out_names]
        return [np.asarray(t) for t in tf.nest.flatten(res)]

    src = TFSource("saved_model", path, fn, in_names, out_names, run, signature=signature, signatures=keys,
                   tags=tags)
    src._loaded = loaded  # type: ignore[attr-defined]  # keeps the variables alive
    return src


def _tag_set(path: str, tag: str) -> list[str]:
    """``--tag serve,gpu`` → the tag list of the MetaGraph with exactly that tag set (an error lists the sets)."""
    want = sorted({t.strip() for t in tag.split(",") if t.strip()})
    sm = _saved_model_proto(path)
    sets = [sorted(m.meta_info_def.tags) for m in sm.meta_graphs]
    if want not in sets:
        avail = "; ".join(",".join(s) or "(none)" for s in sets) or "none"
        raise ModelLoadError(f"SavedModel has no MetaGraph tagged {','.join(want) or '(none)'!r} (tag sets: {avail}; "
                             "pick one with --tag)", file=path)
    return want


def saved_model_listing(path: str) -> list[dict[str, Any]]:
    """Every MetaGraph of the SavedModel at ``path``: its tags and each signature's method and inputs/outputs
    (key, tensor name, dtype, shape; a sparse or ragged one says so), read from saved_model.pb alone (nothing is
    loaded or run)."""
    from tensorflow.core.framework import types_pb2

    def info(t: Any) -> dict[str, Any]:
        enc = t.WhichOneof("encoding")
        name = t.name if enc == "name" else ("sparse: " + ", ".join((t.coo_sparse.values_tensor_name,
                                                                     t.coo_sparse.indices_tensor_name,
                                                                     t.coo_sparse.dense_shape_tensor_name))
                                             if enc == "coo_sparse" else f"({enc})")
        dims = None if t.tensor_shape.unknown_rank else [int(d.size) for d in t.tensor_shape.dim]
        return {"tensor": name, "dtype": types_pb2.DataType.Name(t.dtype).removeprefix("DT_").lower(),
                "shape": dims}

    out = []
    for m in _saved_model_proto(path).meta_graphs:
        sigs = {k: {"method": s.method_name, "inputs": {a: info(t) for a, t in sorted(s.inputs.items())},
                    "outputs": {a: info(t) for a, t in sorted(s.outputs.items())}}
                for k, s in sorted(m.signature_def.items()) if k != "__saved_model_init_op"}
        out.append({"tags": sorted(m.meta_info_def.tags), "signatures": sigs})
    return out

def _saved_model_proto(path: str) -> Any:
    """The SavedModel protobuf of ``path``/saved_model.pb (or .pbtxt)."""
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    pb, pbtxt = Path(path) / "saved_model.pb", Path(path) / "saved_model.pbtxt"
    try:
        if pb.exists():
            sm.ParseFromString(pb.read_bytes())
        else:
            from google.protobuf import text_format

            text_format.Parse(pbtxt.read_text(), sm)
    except Exception as e:
        raise ModelLoadError(f"saved_model.pb is not a SavedModel protobuf: {first_line(e)}", file=path) from None
    return sm


#: ops that loading runs to read a SavedModel's own files, not counted as its effects there: the checkpoint restore
#: (its variables) and a lookup table's vocabulary file (its assets; what a table holds cannot leave the process
#: while loading)
_RESTORE_OPS = frozenset({"Restore", "RestoreV2", "RestoreSlice", "InitializeTableFromTextFile",
                          "InitializeTableFromTextFileV2"})
#: collections naming a TF1 SavedModel's initialisation ops, which loading runs
_INIT_COLLECTIONS = ("saved_model_main_op", "legacy_init_op", "main_op", "table_initializer")


def load_time_effects(sm: Any) -> list[EffectOp]:
    """The refused side-effect ops (:data:`REFUSED_EFFECTS`) that *loading* a SavedModel (``sm``, its protobuf) runs
    before anything is called: the resources' ``_create_resource`` / ``_initialize`` functions of a TF2 object graph
    (``tf.saved_model.load`` runs them), a TF1 MetaGraph's init ops and restore op (the v1 loader runs them), and the
    functions they call; checkpoint restore and vocabulary-file ops excepted (they read the model's own files)."""
    found: list[EffectOp] = []
    for meta in sm.meta_graphs:
        lib = {f.signature.name: f for f in meta.graph_def.library.function}
        og = meta.object_graph_def
        funcs: set[str] = set()
        for obj in og.nodes:
            for ch in obj.children:
                if ch.local_name not in ("_create_resource", "_initialize") or ch.node_id >= len(og.nodes):
                    continue
                target = og.nodes[ch.node_id]
                kind = target.WhichOneof("kind")
                if kind == "function":
                    funcs.update(target.function.concrete_functions)
                elif kind == "bare_concrete_function":
                    funcs.add(target.bare_concrete_function.concrete_function_name)
        roots = [meta.saver_def.restore_op_name] if meta.saver_def.restore_op_name else []
        for key in _INIT_COLLECTIONS:
            if key in meta.collection_def:
                roots += list(meta.collection_def[key].node_list.value)
        if "__saved_model_init_op" in meta.signature_def:
            roots += [t.name for t in meta.signature_def["__saved_model_init_op"].outputs.values()]
        graph_nodes = _reachable(list(meta.graph_def.node), roots) if roots else []
        funcs |= _called_functions(graph_nodes)
        cands = [(n, str(n.name)) for n in graph_nodes] + \
            [(n, f"{fn}/{n.name}") for fn in _function_closure(lib, funcs) for n in lib[fn].node_def]
        for n, name in cands:
            k = _effect_kind(n)
            if k in REFUSED_EFFECTS and n.op not in _RESTORE_OPS:
                found.append(EffectOp(k, str(n.op), name))
    return found


def _meta_graph_tags(path: str, signature: str, tags: Sequence[str] | None = None) -> list[str]:
    """The tag set of the MetaGraph in ``path``/saved_model.pb that has ``signature`` ("serve" first; with ``tags``
    only the MetaGraph of that tag set)."""
    sm = _saved_model_proto(path)
    metas = sorted(sm.meta_graphs, key=lambda m: "serve" not in m.meta_info_def.tags)
    if tags is not None:
        metas = [m for m in metas if sorted(m.meta_info_def.tags) == sorted(tags)]
    for m in metas:
        if signature in m.signature_def:
            return list(m.meta_info_def.tags)
    avail = sorted({k for m in sm.meta_graphs for k in m.signature_def})
    raise ModelLoadError(f"SavedModel has no signature {signature!r} (available: {', '.join(avail) or 'none'})")


def _saved_model_graph_source(path: str, signature: str, revive_error: str,
                              tag_set: Sequence[str] | None = None, roots: Sequence[str] | None = None) -> TFSource:
    """A SavedModel read without reviving Python objects: TF's v1 loader imports the MetaGraph into a session and
    restores the variables from the checkpoint; the signature's tensors are run there (the original model) and
    frozen to a GraphDef (``convert_variables_to_constants_from_session_graph``), which becomes the function to
    convert.  ``roots`` (tensor names, a cut's ``--outputs``): freeze only what they read instead of the whole
    signature (an Estimator's eval signature also updates its metric variables, which cannot be frozen)."""
    tf = _tf()
    from tensorflow.python.framework import convert_to_constants as c2c

    tags = _meta_graph_tags(path, signature, tag_set)
    graph = tf.Graph()
    sess = tf.compat.v1.Session(graph=graph)
    try:
        with graph.as_default():
            meta = tf.compat.v1.saved_model.loader.load(sess, tags, path)
        sig = meta.signature_def[signature]
        in_names, out_names = sorted(sig.inputs), sorted(sig.outputs)
        if roots:  # (a cut: its outputs must be in the graph; its inputs are the placeholders they read)
            in_t = []
            out_t = [r if ":" in r else f"{r}:0" for r in roots]
            out_names = [r[:-2] if r.endswith(":0") else r for r in out_t]
            for t in out_t:
                if t.split(":")[0] not in {n.name for n in graph.as_graph_def().node}:
                    raise ModelLoadError(f"--outputs: the graph has no tensor {t!r}", tensor=t)
        else:
            _dense_signature(sig, signature)
            in_t = [sig.inputs[k].name for k in in_names]
            out_t = [sig.outputs[k].name for k in out_names]
        written = _metric_updates(graph.as_graph_def(), out_t)
        if written:
            raise ModelLoadError(f"signature {signature!r} updates variables when run ({written}: an Estimator "
                                 "eval graph's metrics), which a TOSA program cannot; convert a serving signature "
                                 "(--tag serve --signature …) or only the outputs you need (--outputs NAME)")
        effects = effect_ops(graph.as_graph_def(), out_t)  # (freezing prunes what the outputs do not read)
        frozen = c2c.convert_variables_to_constants_from_session_graph(
            sess, graph.as_graph_def(), sorted({t.split(":")[0] for t in out_t}))
        if roots:
            in_t = [f"{n.name}:0" for n in _reachable(list(frozen.node), out_t) if n.op == "Placeholder"]
            in_names = _dedupe([t[:-2] for t in in_t])
    except ModelLoadError:
        sess.close()
        raise
    except Exception as e:
        sess.close()
        kernel = re.search(r"No OpKernel was registered to support Op '(\w+)'", str(e))
        if kernel:
            raise ModelLoadError(f"this TensorFlow has no kernel for op {kernel.group(1)!r} (an op TensorFlow has "
                                 "dropped since the model was exported), so the model can neither be loaded nor "
                                 "run here", op=kernel.group(1)) from None
        raise ModelLoadError(f"v1 loader: {first_line(e)}") from None
    keys = sorted(meta.signature_def)
    _rename_functions(frozen)

    def imp() -> None:
        tf.compat.v1.import_graph_def(frozen, name="")

    try:
        wrapped = tf.compat.v1.wrap_function(imp, [])
        fn = wrapped.prune([wrapped.graph.get_tensor_by_name(t) for t in in_t],
                           [wrapped.graph.get_tensor_by_name(t) for t in out_t])
    except Exception as e:
        sess.close()
        raise ModelLoadError(f"frozen signature {signature!r}: {first_line(e)}") from None

    def run(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        res = sess.run(out_t, {t: np.asarray(a) for t, a in zip(in_t, arrays)})
        return [np.asarray(r) for r in res]

    src = TFSource("saved_model", path, fn, in_names, out_names, run, signature=signature, signatures=keys,
                   tags=tag_set if tag_set is None else list(tag_set))
    src.effects = effects
    src.graph_def = frozen
    src.input_tensors, src.output_tensors = in_t, out_t
    src.loader = f"MetaGraph + variables (TF v1 loader, tags {tags}); object graph not revived: {revive_error}"
    src._loaded = sess  # type: ignore[attr-defined]  # the session holding the restored variables
    return src


def _dense_signature(sig: Any, key: str) -> None:
    """Refuse a signature with a sparse or ragged input or output (TOSA takes and returns dense tensors)."""
    odd = [f"{role[:-1]} {k} ({t.WhichOneof('encoding')})" for role, m in (("inputs", sig.inputs),
                                                                           ("outputs", sig.outputs))
           for k, t in sorted(m.items()) if t.WhichOneof("encoding") != "name"]
    if odd:
        raise ModelLoadError(f"signature {key!r} has sparse or ragged tensors ({', '.join(odd[:4])}"
                             f"{' …' if len(odd) > 4 else ''}); TOSA takes dense tensors: cut the graph at the dense "
                             "tensors they feed with --inputs NAME … --outputs NAME")


#: ops that write a variable (an Estimator eval graph's metric updates)
_UPDATE_OPS = ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "Assign", "AssignAdd", "AssignSub",
               "ScatterAdd", "ResourceScatterAdd")


def _metric_updates(gd: Any, roots: Sequence[str]) -> str:
    """``AssignAddVariableOp x4 (a, b …)`` when running ``roots`` in ``gd`` writes variables, else ``""``."""
    nodes = [n for n in _reachable(list(gd.node), roots) if n.op in _UPDATE_OPS]
    if not nodes:
        return ""
    names = [n.name for n in nodes]
    return f"{len(nodes)} op(s) {', '.join(sorted({n.op for n in nodes}))} ({', '.join(names[:3])}" + \
        (" …)" if len(names) > 3 else ")")


_renamed = [0]


def _rename_functions(gd: Any) -> None:
    """Give every library function of ``gd`` a fresh name (references updated).  The frozen functions keep their
    SavedModel names but not their bodies, and the eager context may already hold the originals (registered by a
    revival attempt that failed), which TensorFlow refuses to redefine."""
    _renamed[0] += 1
    suffix = f"_tf2tosa_frozen{_renamed[0]}"
    names = {f.signature.name: re.sub(r"_tf2tosa_frozen\d+$", "", f.signature.name) + suffix
             for f in gd.library.function}
    if not names:
        return

    def fix_attrs(attrs: Any) -> None:
        for a in attrs.values():
            if a.HasField("func") and a.func.name in names:
                a.func.name = names[a.func.name]
            if a.HasField("list"):
                for f in a.list.func:
                    if f.name in names:
                        f.name = names[f.name]

    for n in gd.node:
        fix_attrs(n.attr)
    for f in gd.library.function:
        f.signature.name = names[f.signature.name]
        for n in f.node_def:
            fix_attrs(n.attr)
    for gdef in gd.library.gradient:
        if gdef.function_name in names:
            gdef.function_name = names[gdef.function_name]


#: the largest ``config.json`` / ``model_config`` read to name a refused layer (a model's config is kilobytes)
_MAX_KERAS_CONFIG = 64 << 20


def _keras_archive_problem(path: str) -> str | None:
    """Why ``path`` is not a Keras archive (``.keras``: a zip holding ``config.json``; ``.h5``: an HDF5 file holding
    a ``model_config``), or None when it looks like one."""
    if path.lower().endswith(".keras"):
        import zipfile

        try:
            with zipfile.ZipFile(path) as z:
                if "config.json" not in z.namelist():
                    return "a zip without config.json"
        except (zipfile.BadZipFile, ValueError, EOFError, NotImplementedError) as e:
            return "not a zip file (truncated, or another format)" if "not a zip" in str(e) else \
                f"a broken zip ({first_line(e)})"
        except OSError as e:
            return f"unreadable: {e.strerror or e}"
        return None
    try:
        import h5py

        with h5py.File(path, "r") as f:
            if "model_config" not in f.attrs:
                return "an HDF5 file without a model_config (weights only?)"
    except OSError as e:
        return f"HDF5 cannot open it ({first_line(e)})"
    return None


def _keras_config(path: str) -> Any:
    """The model config (JSON) of a ``.keras`` / ``.h5`` file, or None when it cannot be read."""
    import json

    try:
        if path.lower().endswith(".keras"):
            import zipfile

            with zipfile.ZipFile(path) as z:
                if z.getinfo("config.json").file_size > _MAX_KERAS_CONFIG:
                    return None
                return json.loads(z.read("config.json"))
        import h5py

        with h5py.File(path, "r") as f:
            raw = f.attrs.get("model_config")
            if raw is None or len(raw) > _MAX_KERAS_CONFIG:
                return None
            return json.loads(raw.decode() if isinstance(raw, bytes) else str(raw))
    except Exception:
        return None


def _code_layers(config: Any) -> list[str]:
    """Names of the layers in a Keras config that hold Python code (``Lambda``)."""
    found: list[str] = []
    stack = [config]
    while stack:
        c = stack.pop()
        if isinstance(c, dict):
            if c.get("class_name") == "Lambda":
                cfg = c.get("config")
                found.append(str(cfg.get("name")) if isinstance(cfg, dict) and cfg.get("name") else "(unnamed)")
            stack.extend(c.values())
        elif isinstance(c, list):
            stack.extend(c)
    return sorted(set(found))


def _load_keras_file(path: str, unsafe_deserialization: bool = False) -> Any:
    """Load a ``.keras`` / ``.h5`` file with Keras, in safe mode unless ``unsafe_deserialization``.  One
    :class:`ModelLoadError` for a file that is no Keras archive, a layer that safe mode refuses, and the rest."""
    problem = _keras_archive_problem(path)
    if problem is not None:
        kind = ".keras archive" if path.lower().endswith(".keras") else "Keras .h5 file"
        raise ModelLoadError(f"cannot load Keras model: not a valid {kind}: {problem}", file=path)
    _tf()
    import keras

    # Keras unpacks a .keras file into a temporary folder of its own and leaves it behind when the archive is
    # malformed (a folder entry named like a member: "File exists"); give it a private one, removed on every path
    scratch = tempfile.mkdtemp(prefix="tf2tosa-keras-")
    saved_tempdir = tempfile.tempdir
    tempfile.tempdir = scratch
    from .keras_files import active_custom_objects, fallback

    custom = active_custom_objects()  # (--custom-objects, API custom_objects=)
    try:
        return keras.models.load_model(path, compile=False, safe_mode=not unsafe_deserialization,
                                       **({"custom_objects": custom} if custom is not None else {}))
    except Exception as e:
        text = str(e)
        cause = e.__cause__ or e.__context__
        text += " " + str(cause) if cause is not None else ""
        layers = _code_layers(_keras_config(path)) if not unsafe_deserialization and \
            ("safe_mode" in text or "Lambda" in text) else []
        if not unsafe_deserialization and ("safe_mode" in text or layers):
            which = f"Lambda layer(s) {', '.join(repr(n) for n in layers)}" if layers else "a layer"
            raise ModelLoadError(f"Keras safe mode refused the Python code in {which}; loading it would run that "
                                 "code: if you trust this file, pass --unsafe-deserialization (API "
                                 "unsafe_deserialization=True)", file=path) from None
        # a custom layer nobody gave, or a Keras 2 file (loaded with tf_keras), or Keras 3's reason
        return fallback(path, e, unsafe_deserialization, _code_layers(_keras_config(path)), custom)
    finally:
        tempfile.tempdir = saved_tempdir
        shutil.rmtree(scratch, ignore_errors=True)


def _keras_source(model: Any, label: str) -> TFSource:
    tf = _tf()
    inputs = list(getattr(model, "inputs", None) or [])
    if not inputs:
        raise ModelLoadError("Keras model has no defined inputs (build it or give it an Input layer)", file=label)
    in_names = _dedupe([_keras_name(t, f"input_{i}") for i, t in enumerate(inputs)])
    specs = [tf.TensorSpec(tuple(t.shape), tf.as_dtype(_keras_dtype(t)), name=_clean(n))
             for t, n in zip(inputs, in_names)]
    outs = list(getattr(model, "outputs", None) or [])
    out_names = _dedupe([_keras_name(t, f"output_{i}") for i, t in enumerate(outs)]) if outs else []

    def call(*xs: Any) -> Any:
        arg = xs[0] if len(xs) == 1 else list(xs)
        return model(arg, training=False)

    from .keras_files import inference_trace

    try:
        with inference_trace(model):  # (no dropout-mask draw that writes a seed generator in inference)
            cf = tf.function(call).get_concrete_function(*specs)
    except Exception as e:
        raise ModelLoadError(f"cannot trace the Keras model: {first_line(e)}", file=label) from None
    flat_out = tf.nest.flatten(cf.structured_outputs)
    if len(out_names) != len(flat_out):
        out_names = _flat_names(cf.structured_outputs, "output")

    def run(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        res = model([tf.constant(a) for a in arrays] if len(arrays) > 1 else tf.constant(arrays[0]),
                    training=False)
        return [np.asarray(t) for t in tf.nest.flatten(res)]

    return TFSource("keras", label, cf, in_names, out_names, run)


def _keras_name(t: Any, default: str) -> str:
    hist = getattr(t, "_keras_history", None)
    op = getattr(hist, "operation", None) if hist is not None else None
    name = getattr(op, "name", None) or getattr(t, "name", None) or default
    return str(name).split(":")[0]


def _keras_dtype(t: Any) -> str:
    dt = getattr(t, "dtype", "float32")
    return getattr(dt, "name", None) or str(dt)


def _function_source(cf: Any, label: str) -> TFSource:
    tf = _tf()
    args, kwargs = cf.structured_input_signature
    in_names = _flat_names((args, kwargs), "input", specs_only=True)
    out_names = _flat_names(cf.structured_outputs, "output")
    kw_specs = [k for k, v in sorted(kwargs.items()) if isinstance(v, tf.TensorSpec)]
    n_pos = sum(isinstance(a, tf.TensorSpec) for a in tf.nest.flatten(args))

    def run(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        ts = [tf.constant(a) for a in arrays]
        res = cf(*ts[:n_pos], **dict(zip(kw_specs, ts[n_pos:])))
        return [np.asarray(t) for t in tf.nest.flatten(res)]

    return TFSource("function", label, cf, in_names, out_names, run)


def _graphdef_source(data: bytes, label: str, outputs: Sequence[str] | None) -> TFSource:
    tf = _tf()
    gd = tf.compat.v1.GraphDef()
    try:
        gd.ParseFromString(data)
    except Exception as e:
        raise ModelLoadError(f"not a GraphDef protobuf: {first_line(e)}", file=label) from None
    if not gd.node:
        raise ModelLoadError("GraphDef has no nodes", file=label)
    consumed: set[str] = set()
    for n in gd.node:
        for i in n.input:
            consumed.add(i.lstrip("^").split(":")[0])
    in_t = [f"{n.name}:0" for n in gd.node if n.op == "Placeholder"]
    if outputs:
        names = {n.name for n in gd.node}
        out_t = [o if ":" in o else f"{o}:0" for o in outputs]
        for o in out_t:
            if o.split(":")[0] not in names:
                raise ModelLoadError(f"GraphDef has no node {o.split(':')[0]!r}", file=label, tensor=o)
    else:
        skip = {"Const", "NoOp", "Placeholder", "Assert", "SaveV2", "RestoreV2", "VarHandleOp"}
        out_t = [f"{n.name}:0" for n in gd.node if n.name not in consumed and n.op not in skip]
    if not out_t:
        raise ModelLoadError("GraphDef has no output nodes", file=label)
    in_names = _dedupe([t.split(":")[0] for t in in_t])
    out_names = _dedupe([t[:-2] if t.endswith(":0") else t for t in out_t])

    def run(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        def imp() -> None:
            tf.compat.v1.import_graph_def(gd, name="")

        wrapped = tf.compat.v1.wrap_function(imp, [])
        pruned = wrapped.prune([wrapped.graph.get_tensor_by_name(t) for t in in_t],
                               [wrapped.graph.get_tensor_by_name(t) for t in out_t])
        return [np.asarray(t) for t in pruned(*[tf.constant(a) for a in arrays])]

    return TFSource("graphdef", label, None, in_names, out_names, run, graph_def=gd, input_tensors=in_t,
                    output_tensors=out_t)


# ---------------------------------------------------------------------------------------------- freezing
@dataclass
class KeptVariable:
    """A resource variable kept as a TOSA variable (``--keep-variables``)."""

    name: str  # the variable's name (``counter``, ``dense/kernel``), the TOSA variable's name once cleaned
    value: np.ndarray  # its value when the model was loaded: the initial value


def _variable_name(v: Any) -> str:
    return str(v.name).split(":")[0]


def _unique_variable_name(v: Any, found: Mapping[str, KeptVariable]) -> str:
    """The variable's name, else its ``path``, else the name with ``_<k>``: distinct from the TOSA names (cleaned)
    of the variables already kept (Keras 3 names every layer's weight ``kernel``)."""
    taken = {re.sub(r"[^A-Za-z0-9_]", "_", k.name).strip("_") for k in found.values()}
    nm = _variable_name(v)
    candidates = [nm, str(getattr(v, "path", nm))] + [f"{nm}_{k}" for k in range(1, len(found) + 2)]
    return next(c for c in candidates if re.sub(r"[^A-Za-z0-9_]", "_", c).strip("_") not in taken)


def _kept_variables(src: TFSource, keep: Sequence[str] | str | None) -> dict[str, KeptVariable]:
    """The captured variables to keep, by the name of their capture placeholder in the function's graph.

    ``keep`` is a list of variable names (or their ``path``), or ``"all"``; a name that is no variable of the
    function raises :class:`ModelLoadError` listing the variables."""
    if not keep:
        return {}
    cf = src.function
    if cf is None or src.loader:
        how = f"read from its {src.loader}" if src.loader else "already frozen"
        raise ModelLoadError("--keep-variables needs a SavedModel, Keras model or tf.function whose variables can be "
                             f"revived (this {src.kind} is {how})", file=src.label)
    by_handle = {id(v.handle): v for v in getattr(cf, "variables", ())}
    found: dict[str, KeptVariable] = {}
    names: list[str] = []
    wanted = None if keep == "all" or (not isinstance(keep, str) and list(keep) == ["all"]) else \
        {keep} if isinstance(keep, str) else set(keep)
    used: set[str] = set()
    for ext, internal in cf.graph.captures:
        v = by_handle.get(id(ext))
        if v is None:
            continue
        nm = _variable_name(v)
        names.append(nm)
        aliases = {nm, str(getattr(v, "path", nm))}
        if wanted is None or aliases & wanted:
            used |= aliases & (wanted or set())
            found[internal.name.split(":")[0]] = KeptVariable(_unique_variable_name(v, found), np.asarray(v.numpy()))
    missing = sorted((wanted or set()) - used)
    if missing:
        raise ModelLoadError(f"--keep-variables: no variable {', '.join(missing)} in the function (its variables: "
                             f"{', '.join(sorted(set(names))) or 'none'})", file=src.label)
    return found


def _freeze(src: TFSource, keep: Sequence[str] | str | None = None
            ) -> tuple[Any, list[Any], list[Any], dict[str, KeptVariable]]:
    """The frozen tf.Graph, its flat input / output tensors and the variables kept (by capture placeholder)."""
    tf = _tf()
    if src.kind == "graphdef":
        _kept_variables(src, keep)  # (refuses keep_variables)
        g = tf.Graph()
        try:
            with g.as_default():
                tf.compat.v1.import_graph_def(src.graph_def, name="")
        except Exception as e:
            raise ModelLoadError(f"invalid GraphDef: {first_line(e)}", file=src.label) from None
        return g, [g.get_tensor_by_name(t) for t in src.input_tensors], [g.get_tensor_by_name(t)
                                                                         for t in src.output_tensors], {}
    cf = src.function
    kept = _kept_variables(src, keep)
    written = [w for w, n in _written_variables(cf) if n not in kept]
    if written:
        raise ModelLoadError(f"variable(s) cannot be frozen because the function writes them: {', '.join(written)} "
                             "(to keep them as TOSA variables: convert --keep-variables NAME|all, API "
                             "keep_variables=)", file=src.label)
    from tensorflow.python.framework import convert_to_constants as c2c

    try:
        if kept:
            data = c2c._FunctionConverterDataInEager(func=cf, lower_control_flow=False, aggressive_inlining=True,
                                                     variable_names_denylist=sorted(kept))
            gd, converted = c2c._replace_variables_by_constants(converter_data=data)
            frozen = c2c._construct_concrete_function(cf, gd, converted)
        else:
            frozen = c2c.convert_variables_to_constants_v2(cf, lower_control_flow=False, aggressive_inlining=True)
    except Exception as e:
        frozen = _freeze_again(src, keep, e)
        if isinstance(frozen, tuple):
            return frozen
    n_in = len(src.input_names)
    ins = [t for t in frozen.inputs if t.dtype != tf.resource][:n_in]
    if len(ins) != n_in:
        raise ModelLoadError(f"frozen function has {len(ins)} inputs for a signature of {n_in}", file=src.label)
    return frozen.graph, ins, list(frozen.outputs), kept


def _freeze_again(src: TFSource, keep: Sequence[str] | str | None, error: Exception) -> Any:
    """What :func:`_freeze` does when freezing failed with ``error`` (which is raised as one
    :class:`ModelLoadError` when nothing here works):

    * a SavedModel read by the v1 loader whose loop body the inliner rewrote ("duplicate function … definitions
      differ": the rewritten body keeps the name the imported one has in the eager context): frozen again with the
      library functions renamed between the inlining and the import (the frozen function);
    * a SavedModel revived by ``tf.saved_model.load`` (a TF1 export wrapped in a function, whose graph Grappler's
      inliner cannot import: "Failed to import metagraph", its log saying "Init node
      …/InitializeTableFromTextFileV2 doesn't exist in graph": the wrapped signature keeps the MetaGraph's table
      initializers as init ops, but its pruned graph does not hold them): read again through the v1 loader, frozen
      in its session (``src`` becomes that source; the result is :func:`_freeze`'s tuple)."""
    from tensorflow.python.framework import convert_to_constants as c2c

    reason = first_line(error)
    if src.loader and "duplicate function" in reason:
        try:
            data = c2c._FunctionConverterDataInEager(func=src.function, lower_control_flow=False,
                                                     aggressive_inlining=True)
            gd, converted = c2c._replace_variables_by_constants(converter_data=data)
            _rename_functions(gd)
            return c2c._construct_concrete_function(src.function, gd, converted)
        except Exception as e2:
            raise ModelLoadError(f"variables cannot be frozen: {first_line(e2)}", file=src.label) from None
    if src.kind == "saved_model" and not src.loader and not keep and src.signature is not None:
        try:
            alt = _saved_model_graph_source(src.label, src.signature, f"freezing the revived signature failed: "
                                            f"{reason}", src.tags)
        except ModelLoadError as e2:
            raise ModelLoadError(f"variables cannot be frozen: {reason}; reading its MetaGraph directly also "
                                 f"failed: {e2.message}", file=src.label) from None
        trusted = src.trusted
        src.__dict__.update(alt.__dict__)
        src.trusted = trusted
        return _freeze(src, keep)
    raise ModelLoadError(f"variables cannot be frozen: {reason}", file=src.label) from None


def _written_variables(cf: Any) -> list[tuple[str, str]]:
    """The captured variables that an op of ``cf`` (functions inlined) writes: (description, capture placeholder
    name)."""
    try:
        from tensorflow.python.framework import convert_to_constants as c2c

        gd = c2c._run_inline_graph_optimization(cf, lower_control_flow=False, aggressive_inlining=True)
    except Exception:
        return []
    captures = [t.name.split(":")[0] for t in cf.graph.internal_captures]
    var_by_handle = {id(v.handle): v for v in getattr(cf, "variables", ())}
    cap_names: dict[str, str] = {}
    for cap_node, ext in zip(captures, cf.captured_inputs):
        v = var_by_handle.get(id(ext))
        if v is not None:
            cap_names[cap_node] = f"{v.name.split(':')[0]} ({v.dtype.name}{list(v.shape)})"
    if not cap_names:
        return []
    nodes = {n.name: n for n in gd.node}

    def origin(name: str) -> str | None:
        seen = 0
        while seen < 1000:
            seen += 1
            base = name.lstrip("^").split(":")[0]
            if base in cap_names:
                return base
            n = nodes.get(base)
            if n is None or n.op not in ("Identity", "IdentityN") or not n.input:
                return None
            name = n.input[0]
        return None

    fdefs = {f.signature.name: f for f in gd.library.function}
    out: list[tuple[str, str]] = []
    for n in gd.node:
        if not n.op.startswith(_WRITES):
            continue
        for k, i in enumerate(n.input):
            o = origin(i)
            if o is None or (cap_names[o], o) in out:
                continue
            if n.op in _CALLS and not _call_writes(fdefs, n.attr["f"].func.name, k):
                continue  # a call that only reads the variable (Keras 3's jit-compiled grouped convolution)
            out.append((cap_names[o], o))
    return out


#: function-call ops: they write a resource argument only if their callee does
_CALLS = ("StatefulPartitionedCall", "PartitionedCall")


def _call_writes(fdefs: Mapping[str, Any], fname: str, k: int, depth: int = 0) -> bool:
    """Whether function ``fname`` may write the resource of its input ``k`` (an op of the _WRITES family reads it,
    through Identity, directly or in a function it calls; unknown functions and deep nesting count as writes)."""
    f = fdefs.get(fname)
    if f is None or depth > 20 or k >= len(f.signature.input_arg):
        return True
    arg = f.signature.input_arg[k].name
    forwarded = {arg}  # names of values that are the argument (the argument and Identity chains of it)
    changed = True
    while changed:
        changed = False
        for n in f.node_def:
            if n.name not in forwarded and n.op in ("Identity", "IdentityN") and n.input \
                    and n.input[0].split(":")[0] in forwarded:
                forwarded.add(n.name)
                changed = True
    for n in f.node_def:
        for j, i in enumerate(n.input):
            if i.startswith("^") or i.split(":")[0] not in forwarded or not n.op.startswith(_WRITES):
                continue
            if n.op not in _CALLS or _call_writes(fdefs, n.attr["f"].func.name, j, depth + 1):
                return True
    return False


# ------------------------------------------------------------------------------------------------ mapping
def _dtype(tf_dtype: Any, where: str, file: str) -> DType:
    enum = int(getattr(tf_dtype, "as_datatype_enum", tf_dtype))
    if enum > 100:  # reference types (DT_FLOAT_REF …)
        enum -= 100
    dt = TF_DTYPES.get(enum)
    if dt is None:
        name = getattr(tf_dtype, "name", str(enum))
        raise ModelLoadError(f"tensor type {name} is not supported", file=file, tensor=where)
    return dt


def _shape(tf_shape: Any) -> tuple[int | str, ...]:
    if tf_shape.rank is None:
        return ("?",)
    dims: list[int | str] = []
    for k, d in enumerate(tf_shape.as_list()):
        dims.append(int(d) if d is not None else ("batch" if k == 0 else f"d{k}"))
    return tuple(dims)


def _decode_attr(a: Any) -> Any:
    """Decode one AttrValue protobuf into Python / numpy values."""
    kind = a.WhichOneof("value")
    if kind is None:
        return None
    if kind == "s":
        try:
            return a.s.decode()
        except UnicodeDecodeError:
            return bytes(a.s)
    if kind in ("i", "f", "b"):
        return getattr(a, kind)
    if kind == "type":
        return TF_DTYPES.get(int(a.type), _tf().dtypes.as_dtype(a.type).name)
    if kind == "shape":
        return None if a.shape.unknown_rank else [int(d.size) if d.size >= 0 else None for d in a.shape.dim]
    if kind == "tensor":
        return _tf().make_ndarray(a.tensor)
    if kind == "func":
        return a.func.name
    if kind == "placeholder":
        return a.placeholder
    lst = a.list
    for fld in ("s", "i", "f", "b"):
        vals = list(getattr(lst, fld))
        if vals:
            return [v.decode(errors="replace") if isinstance(v, bytes) else v for v in vals]
    if lst.type:
        return [TF_DTYPES.get(int(t), _tf().dtypes.as_dtype(t).name) for t in lst.type]
    if lst.shape:
        return [None if s.unknown_rank else [int(d.size) if d.size >= 0 else None for d in s.dim] for s in lst.shape]
    if lst.tensor:
        return [_tf().make_ndarray(t) for t in lst.tensor]
    if lst.func:
        return [f.name for f in lst.func]
    return []


#: ops that write the resource variable of their first operand (kept by ``--keep-variables``)
_VAR_WRITES = ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp")


def _handle_origin(t: Any) -> str:
    """The op a resource tensor comes from, through forwarded ops (the inliner's ``Identity`` chain)."""
    for _ in range(1000):
        if t.op.type not in FORWARDED or not t.op.inputs:
            break
        t = t.op.inputs[t.value_index if t.op.type == "IdentityN" else 0]
    return str(t.op.name)


def _program_order(tf_graph: Any, live: set[str]) -> list[Any]:
    """The ``live`` ops of ``tf_graph`` in a topological order over data *and* control edges, ties broken by the
    graph's creation order (stable)."""
    ops = [op for op in tf_graph.get_operations() if op.name in live]
    index = {op.name: k for k, op in enumerate(ops)}
    preds: dict[str, set[str]] = {}
    for op in ops:
        deps = {t.op.name for t in op.inputs} | {c.name for c in op.control_inputs}
        preds[op.name] = {d for d in deps if d in index and d != op.name}
    import heapq

    users: dict[str, list[str]] = {op.name: [] for op in ops}
    for n, ds in preds.items():
        for d in ds:
            users[d].append(n)
    waiting = {n: len(ds) for n, ds in preds.items()}
    ready = [index[n] for n, k in waiting.items() if k == 0]
    heapq.heapify(ready)
    out: list[Any] = []
    while ready:
        op = ops[heapq.heappop(ready)]
        out.append(op)
        for u in users[op.name]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, index[u])
    if len(out) != len(ops):  # a cycle (not a valid graph): keep the creation order
        return ops
    return out


#: functional control-flow ops and the attributes naming their FunctionDefs, in region order (the order the
#: ``tfl.while`` / ``tfl.if`` rules expect: cond, body / then, else)
_REGION_ATTRS: dict[str, tuple[str, ...]] = {
    "While": ("cond", "body"), "StatelessWhile": ("cond", "body"),
    "If": ("then_branch", "else_branch"), "StatelessIf": ("then_branch", "else_branch"),
    # calls the inliner leaves (functions marked ``_noinline`` / ``_XlaMustCompile``: Keras 3 runs a grouped
    # convolution on CPU as a ``jit_compile`` function): the callee, inlined by the tf.*PartitionedCall rule
    "PartitionedCall": ("f",), "StatefulPartitionedCall": ("f",),
}


class _Library:
    """The FunctionDefs of a frozen graph, loaded on demand as region graphs (one per function, shared by every op
    that references it, like the TFLite loader's subgraphs)."""

    def __init__(self, tf_graph: Any, file: str) -> None:
        self.file = file
        self.fdefs = {f.signature.name: f for f in tf_graph.as_graph_def().library.function}
        self.graphs: dict[tuple[str, tuple[Any, ...]], Graph] = {}

    def region(self, fname: str, shapes: Sequence[Any], op_name: str) -> Graph:
        from tensorflow.python.framework.function_def_to_graph import function_def_to_graph

        key = (fname, tuple(str(s) for s in shapes))
        got = self.graphs.get(key)
        if got is not None:
            return got
        fdef = self.fdefs.get(fname)
        if fdef is None:
            raise ModelLoadError(f"function {fname} is not in the graph's library", file=self.file, op=op_name)
        try:
            fg = function_def_to_graph(fdef, input_shapes=list(shapes))
        except Exception as e:
            raise ModelLoadError(f"function {fname}: {first_line(e)}", file=self.file, op=op_name) from None
        in_names = [a.name for a in fdef.signature.input_arg]
        out_names = [a.name for a in fdef.signature.output_arg]
        region = graph_from_tf(fg, list(fg.inputs), list(fg.outputs), in_names, out_names, name=_clean(fname),
                               file=self.file, library=self)
        region.source.function = fname
        self.graphs[key] = region
        return region


def graph_from_tf(tf_graph: Any, inputs: Sequence[Any], outputs: Sequence[Any], input_names: Sequence[str],
                  output_names: Sequence[str], name: str = "main", file: str = "<tensorflow>",
                  library: _Library | None = None, variables: Mapping[str, KeptVariable] | None = None) -> Graph:
    """Map a (frozen) tf.Graph into the IR: reachable ops only, forwarded ops removed.

    ``While``/``StatelessWhile``/``If``/``StatelessIf`` get their FunctionDefs (the frozen graph's library) as
    ``op.regions`` (cond, body / then, else), each mapped the same way, for the shapes of the op's inputs.

    ``variables`` (capture placeholder name → :class:`KeptVariable`): those placeholders become ``tf.VarHandleOp``
    (``shared_name`` the variable's name) and the ops writing them are kept (``side_effect``) even when no output
    depends on them.  Ops are created in an order that respects the control edges too, so reads and writes of a
    variable keep TensorFlow's program order (the IR orders by data edges, ties by creation)."""
    graph = Graph(name)
    variables = variables or {}
    values: dict[str, Value] = {}  # TF tensor name -> IR value
    in_tensors = {t.name: (k, n) for k, (t, n) in enumerate(zip(inputs, input_names))}
    for t, nm in zip(inputs, input_names):
        v = graph.add_input(_clean(nm), TensorType(_shape(t.shape), _dtype(t.dtype, t.name, file)))
        v.source = nm
        values[t.name] = v
    for op in _live_ops(tf_graph, outputs, in_tensors, variables):
        if op.type == "Placeholder" and all(t.name in in_tensors for t in op.outputs):
            continue
        kept = variables.get(op.name) if op.type == "Placeholder" else None
        if kept is not None:
            values[op.outputs[0].name] = _var_handle(graph, op, kept, file)
            continue
        operands = []
        for t in op.inputs:
            arg = values.get(t.name)
            if arg is None:
                raise ModelLoadError(f"op {op.name} reads {t.name}, which is not defined before it", file=file,
                                     op=op.name)
            operands.append(arg)
        if op.type in FORWARDED:
            fwd = operands[: len(op.outputs)] if op.type == "IdentityN" else operands[:1]
            for t, fv in zip(op.outputs, fwd):
                values[t.name] = fv
            continue
        attrs = {k: _decode_attr(a) for k, a in sorted(op.node_def.attr.items()) if not k.startswith("_")}
        if op.type == "Const":
            attrs = {"values": np.asarray(attrs.get("value")), "dtype": attrs.get("dtype")}
        types = _result_types(op, variables, file)
        base = _clean(op.name)
        names = [base if k == 0 else f"{base}_{k}" for k in range(len(types))]
        regions: list[Graph] = []
        if op.type in _REGION_ATTRS:
            library = library if library is not None else _Library(tf_graph, file)
            shapes = [t.shape for t in (op.inputs[1:] if op.type in ("If", "StatelessIf") else op.inputs)]
            regions = [library.region(str(attrs.get(a)), shapes, op.name) for a in _REGION_ATTRS[op.type]]
        new = graph.add_op(f"tf.{op.type}", operands, types, attrs, names, regions, location=op.name)
        if op.type.startswith(_VAR_WRITES) and operands and operands[0].producer is not None \
                and operands[0].producer.name == "tf.VarHandleOp":
            new.attrs["side_effect"] = True
        for t, r in zip(op.outputs, new.results):
            r.source = t.name[:-2] if t.name.endswith(":0") else t.name
            values[t.name] = r
    outs: list[Value] = []
    for t, nm in zip(outputs, output_names):
        out_v = values.get(t.name)
        if out_v is None:
            raise ModelLoadError(f"output {nm!r} ({t.name}) is not produced by the graph", file=file, tensor=nm)
        outs.append(out_v)
    graph.outputs = outs
    _name_io(graph, output_names)
    return graph


def _live_ops(tf_graph: Any, outputs: Sequence[Any], in_tensors: Mapping[str, Any],
              variables: Mapping[str, KeptVariable]) -> list[Any]:
    """The ops the outputs (and, with kept variables, the writes of those variables) reach by data edges, not
    looking past the graph inputs ``in_tensors``: in program order with kept variables, else in the graph's
    (topological) creation order."""
    live: set[str] = set()
    stack = [t.op for t in outputs]
    if variables:
        stack += [op for op in tf_graph.get_operations() if op.type.startswith(_VAR_WRITES)
                  and op.inputs and _handle_origin(op.inputs[0]) in variables]
    while stack:
        op = stack.pop()
        if op.name in live:
            continue
        live.add(op.name)
        for t in op.inputs:
            if t.name not in in_tensors:
                stack.append(t.op)
    return _program_order(tf_graph, live) if variables else \
        [op for op in tf_graph.get_operations() if op.name in live]


def _var_handle(graph: Graph, op: Any, kept: KeptVariable, file: str) -> Value:
    """The ``tf.VarHandleOp`` standing for the capture placeholder ``op`` of the kept variable ``kept``."""
    handle = {"shared_name": kept.name, "container": "", "dtype": _dtype(op.outputs[0].dtype, op.name, file)}
    new = graph.add_op("tf.VarHandleOp", [], [TensorType((), DType.RESOURCE)], handle, [_clean(op.name)],
                       location=op.name)
    new.result.source = kept.name
    return new.result


def _result_types(op: Any, variables: Mapping[str, KeptVariable], file: str) -> list[TensorType]:
    """The IR types of ``op``'s outputs; a read of a kept variable takes the variable's shape."""
    types = [TensorType(_shape(t.shape), _dtype(t.dtype, t.name, file)) for t in op.outputs]
    if op.type == "ReadVariableOp" and _handle_origin(op.inputs[0]) in variables:  # (the frozen graph may
        shape = variables[_handle_origin(op.inputs[0])].value.shape  # have lost the variable's shape)
        types = [TensorType(tuple(int(d) for d in shape), types[0].dtype)]
    return types


def _name_io(graph: Graph, output_names: Sequence[str]) -> None:
    """Signature names on the output values (an input or a value used twice keeps its own name)."""
    seen: set[int] = set()
    for v, nm in zip(graph.outputs, output_names):
        if v.id in seen or v in graph.inputs or v.producer is None or v.is_const:
            seen.add(v.id)
            continue
        seen.add(v.id)
        v.source = nm
        graph._names.discard(v.name)
        v.name = graph.unique_name(_clean(nm))


def load_tensorflow(source: Any, signature: str = "serving_default", name: str | None = None, *,
                    outputs: Sequence[str] | None = None,
                    keep_variables: Sequence[str] | str | None = None) -> Graph:
    """Load a TensorFlow model (SavedModel dir, .keras/.h5, keras.Model, tf.function, frozen GraphDef .pb)
    into the IR of ``tf.*`` ops.  Raises :class:`ModelLoadError` for anything that cannot be loaded."""
    return graph_from_source(load_source(source, signature, outputs), name, keep_variables)


def graph_from_source(src: TFSource, name: str | None = None,
                      keep_variables: Sequence[str] | str | None = None) -> Graph:
    """The IR graph of an opened source (see :func:`load_source`).

    ``keep_variables`` (variable names, or ``"all"``): those resource variables stay variables (``tf.VarHandleOp``
    read by ``tf.ReadVariableOp``, written by ``tf.AssignVariableOp`` …; ``graph.source.variable_values`` holds
    their values at load time, the initial values), which the legalization makes TOSA ``VARIABLE`` /
    ``VARIABLE_READ`` / ``VARIABLE_WRITE`` when the model writes them; the others are frozen to constants."""
    tf_graph, ins, outs, kept = _freeze(src, keep_variables)
    if len(outs) != len(src.output_names):
        raise ModelLoadError(f"function has {len(outs)} outputs, signature names {len(src.output_names)}",
                             file=src.label)
    label = src.label
    gname = name or (_clean(Path(label).stem) if not label.startswith("<") else "main")
    graph = graph_from_tf(tf_graph, ins, outs, src.input_names, src.output_names, name=gname, file=label,
                          variables=kept)
    if kept:
        graph.source.variable_values = {k.name: k.value for k in kept.values()}
    # the side-effect ops are dropped: none has a legalization, so one that an output read would have failed
    # the conversion; the frozen graph's node names where it still has them (a function's), else the source's
    dropped = effect_ops(tf_graph.as_graph_def()) if src.function is not None and src.kind != "graphdef" \
        and not src.loader else source_effects(src)
    if dropped:
        graph.source.side_effect_ops = [{"kind": e.kind, "what": EFFECT_KINDS[e.kind], "op": e.op, "node": e.node}
                                         for e in dropped]
    info = graph.source
    info.format, info.kind, info.file = "tensorflow", src.kind, None if label.startswith("<") else label
    info.signature, info.signatures = src.signature, list(src.signatures)
    info.signature_names = {**{v.name: n for v, n in zip(graph.inputs, src.input_names)},
                            **{v.name: n for v, n in zip(graph.outputs, src.output_names)}}
    info.input_tensors = {n: t.name for n, t in zip(src.input_names, ins)}
    info.output_tensors = {n: t.name for n, t in zip(src.output_names, outs)}
    if src.loader:
        info.loader = src.loader
    return graph


def is_tensorflow_source(source: Any) -> bool:
    """True for what :func:`load_tensorflow` loads (checked without importing TensorFlow): a directory, a
    ``.keras``/``.h5``/``.hdf5``/``.pb`` path, a Keras model or a TensorFlow function object."""
    if isinstance(source, (str, os.PathLike)):
        p = Path(os.fspath(source))
        return p.is_dir() or p.suffix.lower() in (".keras", ".h5", ".hdf5", ".pb", ".graphdef")
    mod = type(source).__module__ or ""
    return mod.startswith(("keras", "tf_keras", "tensorflow"))


def tensorflow_frontend(source: Any, options: ConvertOptions | None = None, signature: str = "serving_default",
                        name: str | None = None, outputs: Sequence[str] | None = None) -> tuple[Graph, TFSource]:
    """The TensorFlow frontend: load a model and return its graph of ``tf.*`` ops, ready for the pipeline
    (:func:`tf2tosa.converter.pipeline.convert_graph`), and the opened source (for verification).

    ``options.qat`` ("auto" default, "int8", "float") and ``options.qat_io`` ("float" default,
    "int8") choose how FakeQuant ops are converted (:mod:`.qat`); ``graph.record.qat`` reports what was done."""
    from .qat import apply_qat, options_of

    mode, io = options_of(options)
    opts = options if options is not None else ConvertOptions()
    from .archive import extract_limit
    from .keras_files import custom_objects_scope
    from .tf_cut import parse_cut_outputs

    cut_in, cut_out = opts.inputs, parse_cut_outputs(opts.outputs)  # (a cut by tensor names)
    # (the cap of a .keras zip's members, None: the default; the custom objects a Keras file's layers may need)
    with extract_limit(opts.max_extract_mb), custom_objects_scope(opts.custom_objects):
        src = load_source(source, signature, cut_out or outputs,
                          unsafe_deserialization=bool(opts.unsafe_deserialization),
                          trust_model=bool(opts.trust_model), tag=opts.tag)
    keep = opts.keep_variables
    if cut_in or (cut_out and src.kind != "graphdef"):
        src = cut_source(src, cut_in, cut_out, keep)
    graph = graph_from_source(src, name, keep)
    if cut_in or cut_out:
        graph.source.cut = {"inputs": list(src.input_names), "outputs": list(src.output_names)}
    if not opts.custom_ops:
        _refuse_string_ops(graph, src)
    apply_qat(graph, mode, io)
    warnings: list[str] = []
    if src.loader:
        warnings.append(f"SavedModel loaded from its {src.loader}")
    dropped = [EffectOp(e["kind"], e["op"], e["node"]) for e in graph.source.side_effect_ops]
    if dropped:
        warnings.append(f"dropped {len(dropped)} op(s) with side effects (a TOSA program only computes its outputs, "
                        f"so it will not do what they do): {describe_effects(dropped)}")
    if warnings:
        graph.source.warnings = warnings
    return graph, src


def _refuse_string_ops(graph: Graph, src: TFSource) -> None:
    """One error when string, hash or table ops (:data:`.tf_cut.STRING_OPS`) are in the graph: none has a TOSA form;
    it lists them and the cut (``--inputs`` / ``--outputs``) that would leave them out."""
    from ..errors import UnsupportedOpsError
    from .tf_cut import string_blockers

    found = string_blockers(graph, list(graph.source.output_tensors.values()) or None)
    if found is None:
        return
    counts: dict[str, int] = {}
    for t, _ in found.ops:
        counts[f"tf.{t}"] = counts.get(f"tf.{t}", 0) + 1
    if found.carriers:
        counts["ops on string tensors"] = found.carriers
    err = UnsupportedOpsError({k: (n, "a string, hash or table op (TOSA has no strings)") for k, n in counts.items()},
                              file=src.label)
    ConversionError.__init__(err, f"string, hash and table ops block the conversion (TOSA has no strings): "
                             f"{found.describe()}; {found.guidance()}", file=src.label)
    raise err


def cut_source(src: TFSource, inputs: Any = None, outputs: Any = None,
               keep: Sequence[str] | str | None = None) -> TFSource:
    """The part of ``src`` between the tensors ``inputs`` and ``outputs`` (:mod:`.tf_cut`; names of its frozen
    graph: ``node`` or ``node:k``), as a GraphDef source whose inputs are placeholders standing for the cut tensors.
    Without ``outputs``, the source's outputs; without ``inputs``, the graph inputs the outputs read.  Its ``run``
    feeds the cut tensors to the original model (a v1 SavedModel's session), else to the frozen graph in
    TensorFlow."""
    tf = _tf()
    from .tf_cut import cut_graph_def, parse_cut_inputs, parse_cut_outputs

    if keep:
        raise ModelLoadError("--keep-variables does not combine with a cut (--inputs/--outputs)", file=src.label)
    cins, couts = parse_cut_inputs(inputs), parse_cut_outputs(outputs)
    try:
        tf_graph, _ins, outs, _ = _freeze(src)
    except ModelLoadError:
        if not (couts and src.kind == "saved_model" and src.signature is not None):
            raise
        # (an Estimator eval signature: freeze only what the cut's outputs read, in the v1 loader's session)
        alt = _saved_model_graph_source(src.label, src.signature, "a cut of its graph", src.tags, couts)
        alt.trusted = src.trusted
        src = alt
        tf_graph, _ins, outs, _ = _freeze(src)
    couts = couts or [t.name for t in outs]
    gd = tf_graph.as_graph_def()
    new, in_t, out_t = cut_graph_def(gd, tf_graph, cins, couts, src.label)
    by_ph = {f"{c.tensor.rsplit(':', 1)[0]}__cut{c.tensor.rsplit(':', 1)[1]}": c.tensor for c in cins}
    orig_in = [by_ph[t.split(":")[0]] if t.split(":")[0] in by_ph else t for t in in_t]
    in_names = _dedupe([t[:-2] if t.endswith(":0") else t for t in orig_in])
    out_names = _dedupe([t[:-2] if t.endswith(":0") else t for t in couts]) if outputs else list(src.output_names)
    sess = getattr(src, "_loaded", None) if src.loader else None
    session_names = {n.name for n in sess.graph.as_graph_def().node} if sess is not None else set()
    if sess is not None and all(t.split(":")[0] in session_names for t in orig_in + couts):
        def run(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
            res = sess.run(list(couts), {t: np.asarray(a) for t, a in zip(orig_in, arrays)})
            return [np.asarray(r) for r in res]
    else:
        def run(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
            def imp() -> None:
                tf.compat.v1.import_graph_def(new, name="")

            wrapped = tf.compat.v1.wrap_function(imp, [])
            pruned = wrapped.prune([wrapped.graph.get_tensor_by_name(t) for t in in_t],
                                   [wrapped.graph.get_tensor_by_name(t) for t in out_t])
            return [np.asarray(t) for t in pruned(*[tf.constant(a) for a in arrays])]

    cut = TFSource("graphdef", src.label, None, in_names, out_names, run, graph_def=new, input_tensors=in_t,
                   output_tensors=out_t, signature=src.signature, signatures=list(src.signatures), tags=src.tags)
    cut.trusted = src.trusted
    cut.effects = effect_ops(new, out_t)
    cut._loaded = getattr(src, "_loaded", None)  # type: ignore[attr-defined]  # (keeps the variables alive)
    return cut


def tflite_qat_reference(source: Any, int8_io: bool = False, signature: str = "serving_default") -> bytes:
    """TFLite's integer conversion of a QAT model (``TFLiteConverter`` with ``Optimize.DEFAULT`` and no
    representative dataset: the FakeQuant ranges are the quantization), float or int8 inputs/outputs.

    The oracle of an integer QAT conversion (``qat="int8"``): the ``.tflite`` run with LiteRT's reference kernels
    (BUILTIN_REF) gives the same outputs bit for bit.  ``source`` is anything :func:`load_source` opens except a
    frozen GraphDef, or an opened :class:`TFSource`.
    """
    tf = _tf()
    src = source if isinstance(source, TFSource) else load_source(source, signature)
    if src.kind == "graphdef" or src.function is None:
        raise ModelLoadError("the TFLite reference of a frozen GraphDef is not supported; use the SavedModel",
                             file=src.label)
    try:
        if src.kind == "saved_model" and not src.loader:
            conv = tf.lite.TFLiteConverter.from_saved_model(src.label, signature_keys=[src.signature or signature])
        else:
            conv = tf.lite.TFLiteConverter.from_concrete_functions([src.function])
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        if int8_io:
            conv.inference_input_type = tf.int8
            conv.inference_output_type = tf.int8
        return bytes(conv.convert())
    except Exception as e:
        raise ModelLoadError(f"TFLite conversion failed: {first_line(e)}", file=src.label) from None
