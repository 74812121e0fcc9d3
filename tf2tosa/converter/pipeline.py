"""The conversion pipeline: load → static shapes → legalize → fold/cleanup → check."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConversionError, InvalidGraphError, Unsupported, UnsupportedOpsError
from ..ir import DType, Graph, Value
from ..legalizations.driver import failure_reason, legalize_op, missing_rule
from ..tosa.builder import Builder
from ..tosa.context import MAX_UNROLL, LegalizeContext
from . import passes

#: frontend ops that legalization leaves alone (constants are retyped at the end, no_value dies)
_PASSIVE = frozenset({"tfl.const", "tfl.no_value", "tosa.CONST", "tosa.CONST_SHAPE"})



@dataclass
class ConvertOptions:
    """Options of :func:`convert_graph` (and of the CLI)."""

    input_shapes: Mapping[str, Sequence[int]] | None = None
    fold: bool = True
    #: requantization rounding: "double" reproduces TFLite's reference kernels (needs EXT-DOUBLEROUND),
    #: "single" keeps to the PRO-INT core (SINGLE_ROUND)
    rounding: str = "double"
    #: extra knobs for later paths (rounding, custom ops …)
    extra: dict[str, Any] = field(default_factory=dict)


def legalize_context(options: ConvertOptions, file: str | None = None) -> LegalizeContext:
    """The typed context the legalization rules read ``options`` from."""
    return LegalizeContext(fold=options.fold, rounding=options.rounding,
                           custom_ops=bool(options.extra.get("custom_ops")),
                           max_unroll=int(options.extra.get("max_unroll", MAX_UNROLL)),
                           extra=options.extra, file=file)


def _op_label(op: Any) -> str:
    return f"{op.name}" + (f" ({op.location})" if op.location else "")


def legalize_graph(graph: Graph, options: ConvertOptions | None = None, file: str | None = None,
                   context: LegalizeContext | None = None) -> Graph:
    """Rewrite every framework op of ``graph`` into TOSA ops, in place.

    Every op without a rule, and every op whose rule raises :class:`Unsupported`, is collected; if there are any,
    one :class:`UnsupportedOpsError` lists them all with counts and reasons.
    """
    options = options or ConvertOptions()
    if options.rounding not in ("double", "single"):
        raise ConversionError(f"rounding must be 'double' or 'single', not {options.rounding!r}")
    ctx = context if context is not None else legalize_context(options, file)
    tensor_map: dict[str, str] = graph.meta.setdefault("tensor_map", {})
    from ..legalizations.tfl_sparse import densify_constants

    for problem in densify_constants(graph):  # sparse weights (TFLite sparsity) become dense constants first
        ctx.fail("tfl.const (sparse)", problem)
    blocked: set[int] = set()  # results of ops that failed: their consumers are not reported again
    for op in graph.topological_order():
        if op.name in _PASSIVE or op.name.startswith("tosa."):
            continue
        if any(v.id in blocked for v in op.operands) and missing_rule(op) is None:
            blocked.update(r.id for r in op.results)
            continue
        b = Builder(graph, location=op.location or op.name, fold=options.fold, context=ctx)
        b.name_hint = _clean(op.results[0].source) if op.results and op.results[0].source else None
        try:
            new = legalize_op(b, op, custom=ctx.custom_ops)
        except (Unsupported, InvalidGraphError) as e:
            ctx.fail(op.name, failure_reason(e))
            blocked.update(r.id for r in op.results)
            continue
        for old, val in zip(op.results, new):
            if val.source is None:
                val.source = old.source
            if old.source:
                tensor_map[old.source] = val.name
            graph.replace_all_uses(old, val)
        if not any(graph.uses(r) for r in op.results):
            graph.remove_op(op)
    failures = ctx.failures
    if failures:
        reasons = {name: (len(rs), "; ".join(sorted(set(rs)))) for name, rs in failures.items()}
        raise UnsupportedOpsError(reasons, file=file)
    _finish_constants(graph, file)
    return graph


def _finish_constants(graph: Graph, file: str | None) -> None:
    """Turn the frontend constants still in use into tosa.CONST with TOSA types."""
    graph.remove_dead_ops()
    for op in graph.topological_order():
        if op.name != "tfl.const":
            continue
        r = op.result
        if not r.dtype.is_tosa:
            try:
                arr, dt = passes.narrow_constant(op.attrs["values"], r.dtype)
            except ValueError:
                raise InvalidGraphError(f"constant of type {r.dtype.value} has no TOSA type", file=file,
                                        tensor=r.source or r.name) from None
            op.attrs["values"] = arr
            r.type = passes.retype(r.type, dt)
        if not r.dtype.is_tosa:
            raise InvalidGraphError(f"constant of type {r.dtype.value} has no TOSA type", file=file,
                                    tensor=r.source or r.name)
        op.name = "tosa.CONST"
        op.attrs = {"values": op.attrs["values"]}


def _clean(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_")
    return s or "t"


def _name_outputs(graph: Graph) -> None:
    """Give output values names derived from their source tensors; guard inputs/consts/duplicates with IDENTITY."""
    seen: set[int] = set()
    outs: list[Value] = []
    for v in graph.outputs:
        if v.id in seen or v.producer is None or v.is_const:
            op = graph.add_op("tosa.IDENTITY", [v], [v.type], {}, [v.name + "_out"], location="output")
            op.result.source = v.source
            v = op.result
        seen.add(v.id)
        outs.append(v)
    graph.outputs = outs
    for v in graph.outputs:
        if v.source:
            want = _clean(v.source)
            if v.name != want:
                graph._names.discard(v.name)
                v.name = graph.unique_name(want)


def _rebuild_tensor_map(graph: Graph) -> None:
    """Source tensor -> TOSA value name, for the values that survived folding, merging and renaming.

    Source tensors whose value was folded or merged away are listed in ``meta["tensor_map_dropped"]``.
    """
    values = graph.values()
    alive = {v.name for v in values}
    old: dict[str, str] = graph.meta.get("tensor_map", {})
    tm = {k: n for k, n in old.items() if n in alive}
    for v in values:
        if v.source:
            tm[v.source] = v.name
    graph.meta["tensor_map"] = tm
    graph.meta["tensor_map_dropped"] = sorted(set(old) - set(tm))


def check_tosa(graph: Graph, file: str | None = None) -> None:
    """Every op is a TOSA op and every value has a TOSA type with a static shape."""
    for v in graph.inputs:
        if not v.dtype.is_tosa:
            raise InvalidGraphError(f"model input of type {v.dtype.value} has no TOSA type", file=file,
                                    tensor=v.source or v.name)
    for op in graph.topological_order():
        if not op.name.startswith("tosa."):
            raise InvalidGraphError(f"op {op.name} left after legalization", file=file, op=_op_label(op))
        for r in op.results:
            if not r.dtype.is_tosa or not r.type.is_static:
                raise InvalidGraphError(f"value of type {r.type} is not a static TOSA tensor", file=file,
                                        op=_op_label(op), tensor=r.source or r.name)


def convert_graph(graph: Graph, options: ConvertOptions | None = None, file: str | None = None) -> Graph:
    """Run the whole pipeline on a frontend graph; returns the same graph, now in TOSA form."""
    from ..tosa import profiles

    options = options or ConvertOptions()
    warnings = passes.resolve_input_shapes(graph, options.input_shapes, file=file)
    from ..quant.boundary import legalize_unsigned_io

    ctx = legalize_context(options, file)
    try:
        legalize_unsigned_io(graph, ctx)  # uint8 model inputs/outputs -> i8 tensors + unsigned RESCALE
    except Unsupported as e:
        raise UnsupportedOpsError({"uint8 model input/output": (1, e.reason)}, file=file) from None
    legalize_graph(graph, options, file=file, context=ctx)
    passes.refresh_shapes(graph)
    if options.fold:
        passes.fold_constants(graph)
    passes.remove_identities(graph)
    graph.remove_dead_ops()
    _name_outputs(graph)
    _rebuild_tensor_map(graph)
    check_tosa(graph, file)
    profs, exts = profiles.requirements(graph)
    warnings += [f"{e['op']} ({e['tensor']}) is not bit-exact with TFLite: {e['reason']}"
                 for e in graph.meta.get("inexact", [])]
    graph.meta.update(profiles=profs, extensions=exts, warnings=warnings)
    graph.meta.pop("subgraphs", None)  # the frontend's raw subgraphs; bodies that are used live in op.regions
    graph.meta.pop("tfl_resource_variables", None)
    return graph


def convert_tflite(source: str | bytes, options: ConvertOptions | None = None) -> Graph:
    """Load a ``.tflite`` file (path or bytes) and convert it; never imports TensorFlow."""
    from .tflite import load_tflite

    file = source if isinstance(source, str) else "<bytes>"
    return convert_graph(load_tflite(source), options, file=file)


__all__ = ["ConvertOptions", "check_tosa", "convert_graph", "convert_tflite", "legalize_graph", "DType"]
