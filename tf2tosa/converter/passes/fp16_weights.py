"""Float16 weights kept as float16.

before: a folded TOSA graph in which the source's float16 weights (TFLite's ``DEQUANTIZE`` of an fp16 constant,
counted by the rule in ``GraphPasses.fp16_weights``) became fp32 constants; after: every fp32 ``CONST`` of at
least :data:`MIN_ELEMENTS` elements whose values are all exactly float16 is an fp16 ``CONST`` followed by
``CAST`` to fp32 (spec 2.12.1 CAST: fp16 → fp32 is exact, in PRO-FP), so the file keeps about the source's size.

Folding has already run (so reshaped and transposed weights are narrowed too) and does not run again, so the
``CAST`` stays.  Graphs without fp16 weights are left as they are.

Most weights are narrowed earlier, during legalization (:func:`keep_fp16_weights_early`): as soon as every reader
of an expanded weight is a TOSA op that also reads a run-time value, the weight becomes fp16 + ``CAST`` (the
``CAST`` kept from folding), so the fp32 expansions never pile up; the end pass takes the rest (weights that a
fold transformed, or that a constant-only reader may fold).  Both give the same constants and ops.

Reads and writes the conversion's :class:`~tf2tosa.ir.pass_context.GraphPasses` of the graph: reads ``fp16_weights``,
``fp16_sources`` and ``fp16_keep`` (set by the pipeline), takes ``fp16_pending`` (filled by the DEQUANTIZE rule and
``fold_op``), adds the CASTs it makes to ``keep_unfolded``; the end pass empties the fp16 fields.
"""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...ir import DType, Graph, Operation, Value
from ...ir.mapped import drop_pages, file_region, pieces
from ...ir.pass_context import GraphPasses
from ...ir.widened import Widened, materialize
from ...tosa.builder import Builder

#: fp32 constants smaller than this stay fp32 (a CAST op and a tensor cost more than the bytes saved)
MIN_ELEMENTS = 64

#: ``--fp16-weights`` choices: keep fp16 constants + CAST, or expand them to fp32 constants
MODES = ("keep", "expand")


def fp16_weights_mode(value: object, file: str | None = None) -> str:
    """The ``fp16_weights`` option checked: ``"keep"`` (the default) or ``"expand"``."""
    mode = "keep" if value is None else str(value)
    if mode not in MODES:
        raise InputError(f"fp16_weights (--fp16-weights) must be 'keep' or 'expand', not {value!r}", file=file)
    return mode


def _fp16_exact(values: np.ndarray, piece: int = 1 << 20) -> np.ndarray | None:
    """``values`` as float16 when that is exact for every element (NaNs excluded), else None; checked piece by
    piece, so no fp32 temporary of the whole constant is made."""
    flat = values.reshape(-1)
    half = np.empty(flat.shape, np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        for lo in range(0, flat.size, piece):
            part = flat[lo:lo + piece]
            half[lo:lo + piece] = part
            if not np.array_equal(half[lo:lo + piece].astype(np.float32), part):
                return None
    return half.reshape(values.shape)


def _no_nan(half: np.ndarray, piece: int = 1 << 16) -> bool:
    """No element of ``half`` is a NaN; checked piece by piece, and when ``half`` is read in place from the model
    file, each piece's pages are released once checked (the serializer reads them again, a piece at a time: the
    whole weight file is never resident at once)."""
    flat = half.reshape(-1)
    region = file_region(half) if half.flags.c_contiguous else None
    for lo, end in pieces(region[1] if region is not None else 0, flat.size, half.itemsize, piece * half.itemsize):
        if np.isnan(flat[lo:end]).any():
            return False
        if region is not None:
            drop_pages(region[0], region[1] + lo * half.itemsize, region[1] + end * half.itemsize)
    return True


def _narrow(graph: Graph, op: Operation, sources: dict[int, np.ndarray]) -> Operation | None:
    """Replace the fp32 ``CONST`` ``op`` by an fp16 ``CONST`` + ``CAST`` when its values are fp16-exact (the source's
    own fp16 array where it has one); returns the ``CAST``, or None when ``op`` stays."""
    if op.name != "tosa.CONST" or op.result.dtype is not DType.FP32 or op.result.type.size < MIN_ELEMENTS:
        return None
    r = op.result
    src = sources.get(r.id)
    half: np.ndarray | None
    vals = op.attrs["values"]
    if isinstance(vals, Widened) and src is None:
        src = vals.half  # (a fold of the source's array: its own fp16 values too)
    if src is not None and src.dtype == np.float16 and src.size == r.type.size and _no_nan(src):
        half = src.reshape(r.type.static_shape)  # the source's own fp16 values, a view of the .tflite
    else:
        vals = np.asarray(vals)  # (a Widened's float32 values, made once)
        half = _fp16_exact(vals)
    if half is None:
        op.attrs["values"] = vals  # stays fp32
        return None
    c = graph.add_op("tosa.CONST", [], [r.type.with_dtype(DType.FP16)], {"values": half}, [f"{r.name}_fp16"],
                     location=op.location).result
    b = Builder(graph, location=op.location, fold=False)
    cast = b.emit("CAST", [c], out_dtype=DType.FP32, names=[f"{r.name}_f32"]).result
    cast.source = r.source
    graph.replace_all_uses(r, cast)
    graph.remove_op(op)
    # the removed op may still be reachable (the source op that read ``r`` holds it as an operand until the
    # legalization loop ends): drop its fp32 array, which nothing reads any more
    op.attrs.pop("values", None)
    assert cast.producer is not None
    return cast.producer


def keep_fp16_weights_early(graph: Graph, passes: GraphPasses) -> int:
    """During legalization, after each source op: every fp32 constant expanded from a source fp16 weight (the rule
    lists them in ``passes.fp16_pending``) whose readers are all TOSA ops that also read a non-constant
    value (so no folding will want its fp32 values) becomes fp16 + CAST at once, its CAST kept from folding.  The
    fp32 copies then do not pile up until :func:`keep_fp16_weights`: a conversion's peak memory follows the
    source's size, not twice it.  Returns how many it narrowed; the others are left to the end pass."""
    pending: list[Value] = passes.fp16_pending
    if not pending:
        return 0
    sources: dict[int, np.ndarray] = passes.fp16_sources
    waiting: list[Value] = []
    count = 0
    for r in pending:
        op = r.producer
        if op is None or graph.ops.get(op.id) is not op or op.name != "tosa.CONST" or r in graph.outputs:
            continue
        users = [u for u, _ in graph.uses(r)]
        if not users:  # folded into other constants (a reshape: see fold_op) and read by nothing else
            graph.remove_op(op)
            op.attrs.pop("values", None)
            continue
        if any(not u.name.startswith("tosa.") for u in users):
            waiting.append(r)  # a source op still reads it (its rule may need the values)
            continue
        if any(all(v.is_const for v in u.operands) for u in users):
            continue  # a reader may fold: the end pass decides
        cast = _narrow(graph, op, sources)
        if cast is not None:
            passes.keep_unfolded.append(cast.id)
            count += 1
    passes.fp16_pending = waiting
    return count


def keep_fp16_weights(graph: Graph, passes: GraphPasses) -> int:
    """Store the fp16-exact fp32 constants of a graph with fp16 weights as fp16 + CAST; returns how many.  The
    fp32 constants left (too small, or not fp16-exact) then hold their values as arrays: a :class:`Widened` ends
    here (``passes.fp16_keep``)."""
    sources, passes.fp16_sources, passes.fp16_pending = passes.fp16_sources, {}, []
    narrowed = 0
    weights, passes.fp16_weights = passes.fp16_weights, 0
    if weights:
        narrowed = sum(1 for op in graph.topological_order() if _narrow(graph, op, sources) is not None)
    keep, passes.fp16_keep = passes.fp16_keep, False
    if keep:
        for op in graph.ops.values():
            if isinstance(op.attrs.get("values"), Widened):
                op.attrs["values"] = materialize(op.attrs["values"])
    return narrowed
