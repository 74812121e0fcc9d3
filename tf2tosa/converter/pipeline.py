"""The conversion pipeline: a frontend graph → static shapes → legalize (through the driver) → fold/cleanup → check.

Every frontend (``.tflite``: :func:`.tflite.load_tflite`; TensorFlow: :func:`.tensorflow.tensorflow_frontend`) produces
a graph and :func:`convert_graph` runs the same passes (:mod:`.passes`) on it.

Records (:mod:`tf2tosa.ir.records`): the passes and rules of one conversion hand each other per-graph state through
the context's :class:`~tf2tosa.ir.pass_context.PassContext` (``LegalizeContext.passes``); :func:`legalize_graph` sets
``fp16_keep`` there and writes ``graph.record.tensor_map``; :func:`convert_graph` reads ``graph.record.fixed_dims``
(a size refusal names the user's sizes) and ``graph.record.inexact``, takes ``graph.source.warnings``, writes
``graph.record.profiles`` / ``extensions`` / ``warnings`` and empties ``graph.source.subgraphs``.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import (
    ConversionError,
    InputError,
    InvalidGraphError,
    NotYet,
    NotYetOpsError,
    Unsupported,
    UnsupportedOpsError,
)
from ..ir import DType, Graph, Operation, static_dims, symdim
from ..ir.records import inexact_warning
from ..legalizations.driver import failure_reason, legalize_op, missing_rule
from ..options import ConvertOptions
from ..tosa import profiles
from ..tosa.builder import Builder
from ..tosa.context import MAX_UNROLL, LegalizeContext
from . import passes
from .passes.input_shapes import explain_default_failure
from .passes.outputs import clean_name
from .passes.zero_size import remove_zero_size

#: frontend ops that legalization leaves alone (constants are retyped at the end, no_value dies)
_PASSIVE = frozenset({"tfl.const", "tfl.no_value", "tosa.CONST", "tosa.CONST_SHAPE"})



def legalize_context(options: ConvertOptions, file: str | None = None) -> LegalizeContext:
    """The typed context the legalization rules read ``options`` from."""
    unroll = MAX_UNROLL if options.max_unroll is None else int(options.max_unroll)  # (None: not given)
    return LegalizeContext(fold=options.fold, rounding=options.rounding, custom_ops=bool(options.custom_ops),
                           max_unroll=unroll, options=options, file=file)


def _op_label(op: Any) -> str:
    return f"{op.name}" + (f" ({op.location})" if op.location else "")


def _complex_pairs(graph: Graph, ctx: LegalizeContext) -> frozenset[int]:
    """:func:`.passes.complex_pairs.complex_pairs`, loaded only for a graph with a complex64 value (the few models
    with an FFT)."""
    if not any(v.dtype is DType.COMPLEX64 for v in graph.values()):
        return frozenset()
    from .passes.complex_pairs import complex_pairs

    return complex_pairs(graph, ctx)


def _if_conversion_wanted(target: str | None) -> bool:
    """:func:`.passes.if_conversion.wanted`, loaded only when a target is given."""
    if target is None:
        return False
    from .passes.if_conversion import wanted

    return wanted(target)


def integer_values(graph: Graph) -> bool:
    """Whether a value of ``graph`` is quantized or uint8: what :func:`_integer_passes` rewrite (a float graph has
    none, its fp16 weights included)."""
    return any(v.type.quant is not None or v.dtype is DType.UINT8
               for v in (*graph.inputs, *(r for op in graph.ops.values() for r in op.results)))


def _integer_passes(graph: Graph, ctx: LegalizeContext) -> None:
    """The passes of a graph with quantized or uint8 values, before legalization (taken from their modules: each
    shares its name with its pass, see :mod:`.passes`)."""
    from .passes.batch_fully_connected import batch_fully_connected
    from .passes.integer_islands import integer_islands
    from .passes.unsigned_io import unsigned_io

    unsigned_io(graph, ctx)  # uint8 model inputs/outputs -> i8 tensors + unsigned RESCALE
    integer_islands(graph, ctx)  # int8 DEQUANTIZE -> NEG/ABS -> QUANTIZE as one TABLE
    batch_fully_connected(graph)  # int16x8 FCs of one weight on independent rows: one stacked op


def _fp16_weight(graph: Graph, op: Operation) -> bool:
    """A TFLite DEQUANTIZE of a constant fp16 weight whose result only non-passive source ops read."""
    if op.name != "tfl.dequantize" or len(op.operands) != 1 or len(op.results) != 1:
        return False
    x, r = op.operands[0], op.results[0]
    users = graph.uses(r)
    return (x.dtype is DType.FP16 and x.is_const and r not in graph.outputs and bool(users)
            and all(u.name not in _PASSIVE and not u.name.startswith("tosa.") for u, _ in users))


def legalize_graph(graph: Graph, options: ConvertOptions | None = None, file: str | None = None,
                   context: LegalizeContext | None = None) -> Graph:
    """Rewrite every framework op of ``graph`` into TOSA ops, in place.

    Every op without a rule, and every op whose rule raises :class:`Unsupported`, is collected; if there are any,
    one :class:`UnsupportedOpsError` lists them all with counts and reasons.
    """
    options = options or ConvertOptions()
    if options.rounding not in ("double", "single"):
        raise ConversionError(f"rounding must be 'double' or 'single', not {options.rounding!r}")
    if options.npu_rounding not in ("exact", "native"):
        raise ConversionError(f"npu_rounding must be 'exact' or 'native', not {options.npu_rounding!r}")
    ctx = context if context is not None else legalize_context(options, file)
    tensor_map: dict[str, str] = graph.record.tensor_map
    passes.densify(graph, ctx)  # sparse weights (TFLite sparsity) become dense constants first
    # fp16 weights kept as fp16: each one's fp32 expansion is narrowed back as soon as its readers are legalized
    narrow_early = passes.fp16_weights_mode(options.fp16_weights, file) == "keep"
    state = ctx.passes.of(graph)  # what the passes and rules hand each other about this graph
    if narrow_early:  # folded fp16 -> fp32 CASTs of weights stay float16 underneath (see ir.widened)
        state.fp16_keep = True
    not_yet: set[str] = set()  # ops whose rule cannot keep a symbolic size yet (--dynamic)
    blocked: set[int] = set()  # results of ops that failed: their consumers are not reported again
    # complex64 values as real/imaginary pairs; when it refuses one (failure recorded), every complex op is skipped
    skip = _complex_pairs(graph, ctx)

    def legalize_one(op: Operation) -> None:
        if op.id in skip or any(v.id in blocked for v in op.operands) and missing_rule(op) is None:
            blocked.update(r.id for r in op.results)
            return
        b = Builder(graph, location=op.location or op.name, fold=options.fold, context=ctx)
        b.name_hint = clean_name(op.results[0].source) if op.results and op.results[0].source else None
        try:
            new = legalize_op(b, op, custom=ctx.custom_ops)
        except (Unsupported, InvalidGraphError) as e:
            ctx.fail(op.name, failure_reason(e))
            if isinstance(e, NotYet):
                not_yet.add(op.name)
            blocked.update(r.id for r in op.results)
            return
        for old, val in zip(op.results, new):
            if val.source is None:
                val.source = old.source
            if old.source:
                tensor_map[old.source] = val.name
            graph.replace_all_uses(old, val)
        if not any(graph.uses(r) for r in op.results):
            graph.remove_op(op)
        if narrow_early and state.fp16_pending:
            passes.keep_fp16_weights_early(graph, state)

    # TFLite lists the DEQUANTIZE ops of fp16 weights first: each is legalized right before its first reader instead,
    # so that only one weight at a time is expanded to fp32 (see keep_fp16_weights_early)
    deferred: dict[int, Operation] = {}
    for op in graph.topological_order():
        if op.name.startswith("tosa."):  # made by a pass ahead of the rules: its operands may be static by now
            passes.refresh_op(op)
            continue
        if op.name in _PASSIVE:
            continue
        if narrow_early and _fp16_weight(graph, op):
            deferred[op.results[0].id] = op
            continue
        for v in op.operands:
            d = deferred.pop(v.id, None)
            if d is not None:
                legalize_one(d)
        legalize_one(op)
    for d in deferred.values():  # (read by nothing that was legalized)
        legalize_one(d)
    failures = ctx.failures
    if failures:
        reasons = {name: (len(rs), "; ".join(sorted(set(rs)))) for name, rs in failures.items()}
        raise (NotYetOpsError if not_yet else UnsupportedOpsError)(reasons, file=file)
    passes.finish_constants(graph, file)
    return graph


def check_tosa(graph: Graph, file: str | None = None) -> None:
    """Every op is a TOSA op and every value has a TOSA type with a static shape and at least one element."""
    for v in graph.inputs:
        if not v.dtype.is_tosa:
            raise InvalidGraphError(f"model input of type {v.dtype.value} has no TOSA type", file=file,
                                    tensor=v.source or v.name)
    for op in graph.topological_order():
        if not op.name.startswith("tosa."):
            raise InvalidGraphError(f"op {op.name} left after legalization", file=file, op=_op_label(op))
        for r in op.results:
            t = r.type
            dims = static_dims(t)
            if dims is None or not t.dtype.is_tosa:
                raise InvalidGraphError(f"value of type {r.type} is not a static TOSA tensor", file=file,
                                        op=_op_label(op), tensor=r.source or r.name)
            if 0 in dims and t.dtype is not DType.SHAPE:  # (an empty tf.Range / tf.Const needed)
                raise InvalidGraphError(f"value of type {r.type} has no elements (TOSA has no empty tensors, spec "
                                        "1.11.1 Tensors)", file=file, op=_op_label(op), tensor=r.source or r.name)


def _input_cause(graph: Graph) -> tuple[str, bool]:
    """Which input sizes make the graph's tensors as large as they are, for a size refusal: the dimensions set by
    --dim / --input-shape (True: the user's), else the largest input's largest dimension (False)."""
    set_by_user = [f"input {e['input']!r} dimension {d['dim']} ({d['symbol']}={d['value']} from --{d['from']})"
                   for e in graph.record.fixed_dims for d in e["dims"] if d["from"] in ("dim", "input-shape")]
    if set_by_user:
        return "; ".join(set_by_user), True
    sized = [([profiles.plain_dim(d) or 0 for d in v.type.shape], v) for v in graph.inputs
             if v.type.dtype is not DType.SHAPE]
    if not sized:
        return "the model's own constants", False
    dims, v = max(sized, key=lambda e: math.prod(e[0]))
    k = max(range(len(dims)), key=lambda i: dims[i]) if dims else 0
    return f"input {(v.source or v.name)!r} {dims} dimension {k} ({dims[k] if dims else 1})", False


def check_sizes(graph: Graph, file: str | None = None) -> None:
    """Refuse, before anything is written, a graph with a tensor the TOSA file cannot hold or its level forbids
    (:func:`profiles.size_problems`): level 8K for a static program, level none (what a symbolic 1.1-draft program
    declares) when some input size is symbolic.  One line naming the tensor, the op making it, the limit, the input
    size behind it and the fix: an :class:`InputError` when --dim / --input-shape set that size, else an
    :class:`InvalidGraphError` (the model's own sizes)."""
    symbolic = any(symdim.is_symbolic(d) for v in graph.inputs for d in v.type.shape)
    level = profiles.LEVEL_NONE if symbolic else profiles.LEVEL_8K
    for v, op, why in profiles.size_problems(graph, level):
        made = f"made by {_op_label(op)}" if op is not None else "a graph input"
        cause, by_user = _input_cause(graph)
        dims = ", ".join(str(d if profiles.plain_dim(d) is None else profiles.plain_dim(d)) for d in v.type.shape)
        tensor = v.source or v.name
        fix = ("give a smaller --dim / --input-shape" if by_user else
               f"the model's own sizes are too large for a TOSA level-{profiles.level_name(level)} program (where a "
               "dimension is unknown in the model, --dim / --input-shape set it)")
        msg = f"tensor {tensor!r} [{dims}] {v.dtype.value} ({made}) has {why}; from {cause}: {fix}"
        err = InputError if by_user else InvalidGraphError
        raise err(msg, file=file, op=_op_label(op) if op is not None else None, tensor=tensor)


def budget_warnings(graph: Graph) -> list[str]:
    """One warning for the largest tensor above the executor's tensor budget: the file is valid, but ``run`` and
    ``verify`` refuse it unless the budget is raised."""
    big = sorted(profiles.over_budget(graph), key=lambda e: -e[1])
    if not big:
        return []
    v, nbytes = big[0]
    more = f" (and {len(big) - 1} more)" if len(big) > 1 else ""
    return [f"tensor {(v.source or v.name)!r} needs {nbytes} bytes{more}, more than the executor's "
            f"{profiles.MEMORY_BUDGET}-byte tensor budget: tf2tosa run / verify refuse it unless "
            "TF2TOSA_MAX_TENSOR_BYTES raises the budget"]


def convert_graph(graph: Graph, options: ConvertOptions | None = None, file: str | None = None) -> Graph:
    """Run the whole pipeline on a frontend graph (every frontend's: ``.tflite`` and TensorFlow); returns the same
    graph, now in TOSA form.  The passes are :mod:`.passes`, in the order listed there."""
    options = options or ConvertOptions()
    fp16_mode = passes.fp16_weights_mode(options.fp16_weights, file)
    if_convert = _if_conversion_wanted(options.target)
    dilation_limits = passes.dilation_wanted(options.target) if options.target else None
    lift = bool(options.target) and passes.lift_reshapes_wanted(options.target)
    warnings = passes.resolve_input_shapes(graph, options.input_shapes, file=file, dims=options.dims)
    try:
        ctx = legalize_context(options, file)
        if options.io not in ("float", "int"):
            raise InputError(f"io must be 'float' or 'int', not {options.io!r}", file=file)
        if options.io == "int":
            from .passes.integer_io import integer_io

            integer_io(graph, file)  # edge QUANTIZE/DEQUANTIZE -> integer model I/O (record.io_quantization)
        if integer_values(graph):  # (else the three passes have nothing to do: a float model does not load them)
            _integer_passes(graph, ctx)
        legalize_graph(graph, options, file=file, context=ctx)
        remove_zero_size(graph, file)  # the rules' zero-size tensors: unread ones go, an empty output is refused
        if if_convert:  # a target without EXT-CONTROLFLOW: side-effect-free COND_IFs become SELECTs
            from .passes.if_conversion import if_conversion

            if_conversion(graph, warn=warnings.append)
        passes.refresh_shapes(graph)
        if options.fold:
            passes.fold_constants(graph, ctx.passes.of(graph))
        if fp16_mode == "keep":
            passes.keep_fp16_weights(graph, ctx.passes.of(graph))
        ctx.passes.of(graph).fp16_sources = {}
        passes.remove_identities(graph)  # (it ends with remove_dead_ops)
        folded = passes.fold_pad(graph)  # (0: the graph as it was)
        if dilation_limits is not None:  # an NPU target that runs dilation <= 2 only (Ethos-U)
            passes.limit_dilation(graph, *dilation_limits)
        if lift:  # an NPU target that copies a RESHAPE between a 3-D residual sum and a 4-D convolution (Ethos-U)
            from .passes.lift_reshapes import lift_reshapes

            lift_reshapes(graph)
        if folded or dilation_limits is not None or lift:  # (else no op has died since remove_identities)
            graph.remove_dead_ops()
        passes.dedup_constants(graph)
        for region in (r for op in graph.ops.values() for r in op.regions if ctx.passes.of(r).share_constants):
            passes.dedup_constants(region)  # (a hybrid loop kept as a WHILE_LOOP: tfl_hybrid.kept_loop)
        if graph.record.io_quantization:  # (io="int", or a sidecar read back)
            from .passes.integer_io import integer_io_names

            integer_io_names(graph)
        passes.name_outputs(graph)
        if options.state_io:
            from .passes.state_io import state_io

            state_io(graph, file)
        passes.rebuild_tensor_map(graph)
        check_tosa(graph, file)
    except InputError:
        raise
    except ConversionError as e:  # a defaulted dimension may be the cause: say which, and what to pass
        explained = explain_default_failure(graph, e, file)
        if explained is e:
            raise
        raise explained from e
    check_sizes(graph, file)
    warnings += budget_warnings(graph)
    profs, exts = profiles.requirements(graph)
    if "EXT-VARIABLE" in exts:
        names = sorted({str(op.attrs.get("name")) for op in graph.ops.values() if op.opcode == "VARIABLE"})
        warnings.append(f"the graph keeps state across invocations in {len(names)} EXT-VARIABLE variable(s) "
                        f"({', '.join(names)}); a runtime or NPU compiler without EXT-VARIABLE loses it (Vela turns "
                        "VARIABLE ops into identities): convert with --state-io (state_io=True) to carry the state "
                        "as graph inputs/outputs instead")
    warnings += [inexact_warning(e) for e in graph.inexact]
    warnings += graph.source.warnings  # what the frontend has to tell (e.g. how it loaded)
    graph.source.warnings = []
    graph.record.profiles, graph.record.extensions, graph.record.warnings = profs, exts, warnings
    graph.source.subgraphs = []  # the frontend's raw subgraphs; bodies that are used live in op.regions
    return graph


__all__ = ["ConvertOptions", "check_tosa", "convert_graph", "legalize_graph", "DType"]
