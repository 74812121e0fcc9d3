"""Cutting a TensorFlow graph by tensor names (``--inputs`` / ``--outputs``, API ``inputs=`` / ``outputs=``), and
finding where such a cut would work when string, hash or table ops block a conversion.

TOSA has no strings.  A TF1 Estimator or TFX export takes serialized ``tf.Example`` protos and parses them in the
graph (``ParseExampleV2``), hashes strings into buckets and looks words up in tables; the numeric network behind
that is what users deploy.  Cutting the graph at the parser's float outputs converts that part alone.

The cut (:func:`cut_graph_def`)
-------------------------------
* before: a frozen GraphDef (what the TensorFlow frontend maps), with its function library;
* after: a new GraphDef holding one ``Placeholder`` per cut input (named ``<node>__cut<k>``, the dtype of the tensor
  it stands for and the given shape, else the tensor's static shape), every use of the cut tensor rewired to it,
  and only the nodes the cut outputs read through data edges, stopping at the placeholders; control edges are
  dropped (the IR drops them too) and the library is kept whole;
* reads: the GraphDef and, for dtypes and shapes, the ``tf.Graph`` it was imported into; writes nothing else (the
  input GraphDef is left as it was).

Where a cut would work (:func:`string_blockers`)
------------------------------------------------
Reads the IR graph of ``tf.*`` ops (before legalization): the ops of :data:`STRING_OPS`, and every op with a
string operand or result, are *blocked*; the numeric graph outputs that some path reaches without a blocked op are
the suggested ``--outputs``, and the numeric results of blocked ops that those paths read are the suggested
``--inputs``.  Writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InputError, ModelLoadError
from ..ir.graph import Graph, Operation, Value
from ..ir.types import DType

__all__ = ["STRING_OPS", "CutInput", "StringBlockers", "cut_graph_def", "parse_cut_inputs", "parse_cut_outputs",
           "string_blockers", "tensor_name"]

#: TensorFlow ops that handle strings, hash them or look them up in tables: none has a TOSA form
STRING_OPS = frozenset({
    "ParseExample", "ParseExampleV2", "ParseSingleExample", "ParseSequenceExample", "ParseSequenceExampleV2",
    "ParseSingleSequenceExample", "ParseTensor", "DecodeCSV", "DecodeRaw", "DecodePaddedRaw", "DecodeJpeg",
    "DecodePng", "DecodeGif", "DecodeBmp", "DecodeImage", "DecodeAndCropJpeg", "DecodeBase64", "DecodeCompressed",
    "DecodeJSONExample", "DecodeWav", "EncodeJpeg", "EncodePng", "EncodeBase64", "StringToHashBucket",
    "StringToHashBucketFast", "StringToHashBucketStrong", "StringToNumber", "AsString", "StringJoin", "StringSplit",
    "StringSplitV2", "StringStrip", "StringLower", "StringUpper", "StringLength", "StringFormat", "Substr",
    "RegexReplace", "StaticRegexReplace", "RegexFullMatch", "StaticRegexFullMatch", "ReduceJoin", "UnicodeDecode",
    "UnicodeDecodeWithOffsets", "UnicodeEncode", "UnicodeScript", "UnicodeTranscode", "Fingerprint",
    "LookupTableFind", "LookupTableFindV2", "LookupTableSize", "LookupTableSizeV2", "LookupTableImport",
    "LookupTableImportV2", "LookupTableExport", "LookupTableExportV2", "LookupTableInsert", "LookupTableInsertV2",
    "HashTable", "HashTableV2", "MutableHashTable", "MutableHashTableV2", "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2", "MutableDenseHashTable", "MutableDenseHashTableV2", "AnonymousHashTable",
    "InitializeTable", "InitializeTableV2", "InitializeTableFromTextFile", "InitializeTableFromTextFileV2",
})


def tensor_name(name: str) -> str:
    """``node`` → ``node:0``; ``node:k`` stays."""
    name = name.strip()
    return name if re.fullmatch(r".+:\d+", name) else f"{name}:0"


def _short(tensor: str) -> str:
    """``node:0`` → ``node`` (how the frontend names a first output)."""
    return tensor[:-2] if tensor.endswith(":0") else tensor


@dataclass(frozen=True)
class CutInput:
    """One ``--inputs`` item: the tensor (``node:k``), its shape (None: the tensor's static shape; a None dimension:
    unknown) and dtype name (None: the tensor's)."""

    tensor: str
    shape: tuple[int | None, ...] | None = None
    dtype: str | None = None


def _split_items(text: str) -> list[str]:
    """Split a comma list, keeping commas inside ``[...]`` (a shape written ``[1,13]``)."""
    items, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    return [s.strip() for s in items if s.strip()]


def _parse_shape(text: str, item: str) -> tuple[int | None, ...]:
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    dims: list[int | None] = []
    for d in re.split(r"[,x]", body) if body else []:
        d = d.strip()
        if d in ("?", "-1", "None"):
            dims.append(None)
        elif d.isdigit():
            dims.append(int(d))
        else:
            raise InputError(f"bad --inputs {item!r}: shape {text!r}; expected e.g. 1x13 or [1,13] (? for unknown)")
    return tuple(dims)


def _looks_like_shape(part: str) -> bool:
    """A shape starts with a digit, ``[``, ``?`` or ``-`` (a dtype name with a letter)."""
    return part[:1].isdigit() or part[:1] in ("[", "?", "-")


def _parse_one(item: str) -> CutInput:
    """``NAME[:K][:SHAPE][:DTYPE]``: a bare integer after the node name is its output index (TensorFlow's ``node:k``);
    a shape is written with ``x`` or in brackets (``1x13``, ``[1,13]``, ``[5]``, ``?x13``)."""
    parts = item.split(":")
    node = parts[0].strip()
    if not node:
        raise InputError(f"bad --inputs {item!r}; expected NAME[:SHAPE[:DTYPE]], e.g. features:0:1x13:float32")
    rest = parts[1:]
    k = 0
    if rest and rest[0].strip().isdigit():
        k = int(rest.pop(0))
    shape = None
    dtype = None
    if len(rest) > 1 and not rest[0].strip():
        rest.pop(0)  # (an empty shape field: ``node:k::int32``, the dtype alone)
    elif rest and _looks_like_shape(rest[0].strip()):
        shape = _parse_shape(rest.pop(0), item)
    if rest:
        dtype = rest.pop(0).strip() or None
    if rest:
        raise InputError(f"bad --inputs {item!r}; expected NAME[:SHAPE[:DTYPE]], e.g. features:0:1x13:float32")
    return CutInput(f"{node}:{k}", shape, dtype)


def parse_cut_inputs(spec: Any) -> list[CutInput]:
    """The cut inputs of ``inputs=``: a string (comma list) or a list of strings ``NAME[:SHAPE[:DTYPE]]``, of
    :class:`CutInput`, or a mapping tensor name → shape (or ``(shape, dtype)``)."""
    if spec is None:
        return []
    if isinstance(spec, Mapping):
        out = []
        for name, val in spec.items():
            shape, dtype = (val if isinstance(val, tuple) and len(val) == 2 and not isinstance(val[1], int)
                            else (val, None))
            out.append(CutInput(tensor_name(str(name)), None if shape is None else
                                tuple(None if d is None or int(d) < 0 else int(d) for d in shape),
                                None if dtype is None else str(getattr(dtype, "name", dtype))))
        return out
    items = [spec] if isinstance(spec, (str, CutInput)) else list(spec)
    out = []
    for it in items:
        if isinstance(it, CutInput):
            out.append(it)
        elif isinstance(it, str):
            out += [_parse_one(s) for s in _split_items(it)]
        else:
            raise InputError(f"inputs=: expected tensor names (str), got a {type(it).__name__}")
    seen: set[str] = set()
    for c in out:
        if c.tensor in seen:
            raise InputError(f"--inputs names {c.tensor} twice", tensor=c.tensor)
        seen.add(c.tensor)
    return out


def parse_cut_outputs(spec: Any) -> list[str]:
    """The tensor names of ``outputs=`` / ``--outputs`` (a comma list or a list), as ``node:k``."""
    if spec is None:
        return []
    items = [spec] if isinstance(spec, str) else list(spec)
    out = [tensor_name(s) for it in items for s in str(it).split(",") if s.strip()]
    if len(set(out)) != len(out):
        raise InputError(f"--outputs names a tensor twice: {', '.join(out)}")
    return out


def _tensor(tf_graph: Any, name: str, role: str, label: str) -> Any:
    try:
        return tf_graph.get_tensor_by_name(name)
    except (KeyError, ValueError):
        node = name.split(":")[0]
        close = sorted(op.name for op in tf_graph.get_operations() if node.split("/")[-1] in op.name)[:5]
        hint = f" (names like it: {', '.join(close)})" if close else ""
        raise ModelLoadError(f"{role}: the graph has no tensor {name!r}{hint}; `tf2tosa inspect` on the unconverted "
                             "graph's error, or TensorBoard, shows its tensor names", file=label,
                             tensor=name) from None


def cut_graph_def(gd: Any, tf_graph: Any, inputs: Sequence[CutInput], outputs: Sequence[str], label: str
                  ) -> tuple[Any, list[str], list[str]]:
    """The GraphDef between ``inputs`` and ``outputs`` (see the module docstring): (the new GraphDef, its input
    tensors, its output tensors).  Without ``inputs``, the graph's own ``Placeholder`` nodes that the outputs read
    are the inputs; with them, an output that still reads another ``Placeholder`` is an error naming it."""
    import tensorflow as tf

    new = tf.compat.v1.GraphDef()
    new.CopyFrom(gd)
    names = {n.name for n in new.node}
    rewire: dict[str, str] = {}
    in_t: list[str] = []
    for c in inputs:
        t = _tensor(tf_graph, c.tensor, "--inputs", label)
        if t.dtype == tf.resource or t.dtype == tf.variant:
            raise InputError(f"--inputs {c.tensor}: a {t.dtype.name} tensor cannot be a graph input", file=label,
                             tensor=c.tensor)
        if c.dtype is not None:
            try:
                want = tf.as_dtype(c.dtype)
            except TypeError:
                raise InputError(f"--inputs {c.tensor}: unknown dtype {c.dtype!r}", file=label,
                                 tensor=c.tensor) from None
            if want != t.dtype:
                raise InputError(f"--inputs {c.tensor}: the tensor is {t.dtype.name}, not {want.name}", file=label,
                                 tensor=c.tensor)
        shape = c.shape if c.shape is not None else (tuple(t.shape.as_list()) if t.shape.rank is not None else None)
        if c.shape is not None and t.shape.rank is not None and not t.shape.is_compatible_with(c.shape):
            raise InputError(f"--inputs {c.tensor}: shape {list(c.shape)} does not fit the tensor's "
                             f"{t.shape.as_list()}", file=label, tensor=c.tensor)
        node, k = c.tensor.rsplit(":", 1)
        ph = f"{node}__cut{k}"
        while ph in names:
            ph += "_"
        names.add(ph)
        p = new.node.add()
        p.name, p.op = ph, "Placeholder"
        p.attr["dtype"].type = t.dtype.as_datatype_enum
        if shape is not None:
            p.attr["shape"].shape.CopyFrom(tf.TensorShape(list(shape)).as_proto())
        rewire[c.tensor] = ph
        if k == "0":
            rewire[node] = ph
        in_t.append(f"{ph}:0")
    out_t = []
    for o in outputs:
        _tensor(tf_graph, o, "--outputs", label)
        node, k = o.rsplit(":", 1)
        out_t.append(f"{rewire[o]}:0" if o in rewire else o)
    for n in new.node:
        if n.name in rewire.values():
            continue
        kept = [rewire.get(i, i) for i in n.input if not i.startswith("^")]
        del n.input[:]
        n.input.extend(kept)
    by_name = {n.name: n for n in new.node}
    seen: set[str] = set()
    stack = [t.split(":")[0] for t in out_t]
    while stack:
        nm = stack.pop()
        if nm in seen or nm not in by_name:
            continue
        seen.add(nm)
        stack.extend(i.split(":")[0] for i in by_name[nm].input)
    cut_nodes = set(rewire.values())
    stray = [n.name for n in new.node if n.name in seen and n.op == "Placeholder" and n.name not in cut_nodes]
    if inputs and stray:
        raise InputError(f"the --outputs also read graph input(s) {', '.join(stray)} that --inputs does not name; "
                         "add them to --inputs (or cut further in)", file=label, tensor=stray[0])
    in_t += [f"{s}:0" for s in stray]
    unused = [c.tensor for c in inputs if rewire[c.tensor] not in seen]
    if unused:
        raise InputError(f"--inputs {', '.join(unused)}: no --outputs tensor depends on it", file=label,
                         tensor=unused[0])
    kept_nodes = [n for n in new.node if n.name in seen]
    del new.node[:]
    new.node.extend(kept_nodes)
    return new, in_t, out_t


# ------------------------------------------------------------------------------------ where a cut would work
@dataclass
class StringBlockers:
    """What :func:`string_blockers` found: the blocked ops (type, node), the suggested cut inputs and outputs (TF
    tensor names)."""

    ops: list[tuple[str, str]]
    inputs: list[str]
    outputs: list[str]
    #: how many other ops only carry string values (a Reshape or Squeeze of a string tensor …)
    carriers: int = 0

    def describe(self, limit: int = 2) -> str:
        """``ParseExampleV2 x1 (ParseExample/ParseExampleV2), StringToHashBucketFast x9 (a, b …)``."""
        by_type: dict[str, list[str]] = {}
        for t, node in self.ops:
            by_type.setdefault(t, []).append(node)
        text = ", ".join(f"{t} x{len(ns)} ({', '.join(ns[:limit])}{' …' if len(ns) > limit else ''})"
                         for t, ns in sorted(by_type.items()))
        return text + (f", and {self.carriers} other op(s) on string tensors" if self.carriers else "")

    def guidance(self) -> str:
        """The one-line advice: the cut to try, or why there is none."""
        if not self.outputs:
            return ("no graph output is computed without them, so no cut by tensor names leaves a numeric graph; "
                    "export the numeric model on its own")
        if not self.inputs:
            return (f"the outputs {', '.join(self.outputs)} do not need them: convert with --outputs "
                    f"{','.join(self.outputs)}")
        return (f"the numeric part behind them can be converted on its own: cut the graph with --inputs "
                f"{','.join(self.inputs)} --outputs {','.join(self.outputs)} (API inputs=[...], outputs=[...])")


def _is_string(v: Value) -> bool:
    return v.dtype is DType.STRING


def _blocked(op: Operation) -> bool:
    return op.name.removeprefix("tf.") in STRING_OPS or any(_is_string(v) for v in (*op.operands, *op.results))


def string_blockers(graph: Graph, output_tensors: Sequence[str] | None = None) -> StringBlockers | None:
    """The string, hash and table ops of ``graph`` (an IR graph of ``tf.*`` ops, its top level) and the cut that
    would leave them out (see the module docstring), or None when it has none.  ``output_tensors``: the TF tensor
    names of the graph outputs (default: their ``Value.source``)."""
    ops = [op for op in graph.topological_order() if _blocked(op)]
    if not ops:
        return None
    named = [op for op in ops if op.name.removeprefix("tf.") in STRING_OPS]
    carriers = sum(1 for op in ops if op not in named and op.name != "tf.Const")
    out_names = list(output_tensors) if output_tensors is not None else [str(v.source or v.name)
                                                                         for v in graph.outputs]
    good_outputs: list[str] = []
    inputs: list[str] = []
    for v, tname in zip(graph.outputs, out_names):
        if _is_string(v) or (v.producer is not None and _blocked(v.producer)):
            continue
        good_outputs.append(_short(tname))
    seen: set[int] = set()
    stack = [v for v, t in zip(graph.outputs, out_names) if _short(t) in good_outputs]
    while stack:
        v = stack.pop()
        if v.id in seen:
            continue
        seen.add(v.id)
        p = v.producer
        if p is None:
            continue
        if _blocked(p):
            if not _is_string(v) and v.source and _short(str(v.source)) not in inputs:
                inputs.append(_short(str(v.source)))
            continue
        stack.extend(p.operands)
    return StringBlockers([(op.name.removeprefix("tf."), str(op.location or op.results[0].name)) for op in named],
                          sorted(inputs, key=_natural), good_outputs, carriers)


def _natural(name: str) -> tuple[str, int]:
    """``node:3`` before ``node:10``."""
    node, _, k = name.rpartition(":")
    return (node, int(k)) if node and k.isdigit() else (name, 0)
