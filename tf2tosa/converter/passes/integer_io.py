"""Integer model I/O (``--io int``): the QUANTIZE/DEQUANTIZE at a quantized model's edges move to the host.

before (a frontend graph, ``tfl`` ops)::

    input f32 ──tfl.quantize──► x i8 (scale s, zp z) ──► …body… ──► y i8 (s', z') ──tfl.dequantize──► output f32

after::

    input i8 (s, z) ──► …body… ──► output i8 (s', z')

The graph input keeps its name and source tensor and takes the quantized type of the QUANTIZE result; the graph
output becomes the DEQUANTIZE's operand, which takes the source tensor name of the float output (so it is named and
paired with the source runtime's output as before; :func:`integer_io_names` sets it after legalization, so the
rules name their intermediate values after the integer tensor).  ``graph.record.io_quantization`` records, per
converted input and output position, the integer type, scale and zero point: what a host must apply to
talk to the program (:func:`quantize` / :func:`dequantize` below do it the way TFLite's kernels do).

An input qualifies when it is float and every use is a ``tfl.quantize`` to the same per-tensor int8/int16/uint8
type; an output when it is produced by a ``tfl.dequantize`` of a per-tensor quantized int8/int16/uint8 value.
Other inputs and outputs stay as they are.  A graph with no qualifying edge (a float model, or an integer model whose
edges are already integer) is refused with one :class:`~tf2tosa.errors.InputError`.

First, each DEQUANTIZE moves past the pure data-movement ops behind it (:func:`commute_dequantize`).  TFLite's
int16x8 conversion leaves the ops it cannot quantize in float, e.g. the DEPTH_TO_SPACE that ends ESPCN; before::

    y i16 ──tfl.dequantize──► f32 ──tfl.depth_to_space──► output f32
    y i16 ──tfl.dequantize──► f32 ──tfl.depth_to_space──► f32 ──tfl.quantize (same type, scale, zp)──► z i16

after::

    y i16 ──tfl.depth_to_space──► i16 ──tfl.dequantize──► output f32     (then an edge DEQUANTIZE, as above)
    y i16 ──tfl.depth_to_space──► z i16

The rewrite is exact.  DEPTH_TO_SPACE, SPACE_TO_DEPTH, RESHAPE, TRANSPOSE, SQUEEZE, EXPAND_DIMS, SLICE,
STRIDED_SLICE, GATHER (constant indices), REVERSE_V2 and TILE copy elements of their data operand without computing
anything, and DEQUANTIZE maps each element by itself (``D(q) = scale·(q − zp)``), so moving the elements before or
after dequantizing gives the same floats: ``D(move(q)) = move(D(q))`` element for element; a CONCATENATION
commutes the same way when all its inputs are dequantized from one integer type, scale and zero point.  A QUANTIZE
back to that very type, scale and zero point undoes the DEQUANTIZE (``Q(D(q)) = q`` for every code: ``D(q)/scale``
is within float rounding of the integer ``q − zp``), so that pair goes away too.  Only single-reader chains are
moved; the default ``--io float`` conversion does not run this, so its output stays as it was.

Run before :mod:`.unsigned_io` (a uint8 QUANTIZE result becomes a uint8 graph input, which that pass handles) and
before legalization.

Records (:mod:`tf2tosa.ir.records`): :func:`integer_io` writes ``graph.record.io_quantization``;
:func:`integer_io_names` reads it (and drops each output entry's ``source``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import InputError
from ...ir import DType, Graph, Operation, TensorType, Value

#: the integer types a model edge can take
_INT_IO = (DType.INT8, DType.INT16, DType.UINT8)


def _per_tensor(v: Value) -> bool:
    q = v.type.quant
    return v.dtype in _INT_IO and q is not None and not q.per_channel


def _entry(index: int, v: Value, float_dtype: DType) -> dict[str, Any]:
    q = v.type.quant
    assert q is not None
    return {"index": index, "dtype": v.dtype.value, "scale": float(q.scale[0]), "zero_point": int(q.zero_point[0]),
            "float_dtype": float_dtype.value}


#: float ops that only move elements of their first operand (the others, when present, are constants);
#: tfl.concatenation moves elements of all its operands
_MOVES = frozenset({"tfl.depth_to_space", "tfl.space_to_depth", "tfl.reshape", "tfl.transpose", "tfl.squeeze",
                    "tfl.expand_dims", "tfl.slice", "tfl.strided_slice", "tfl.gather", "tfl.reverse_v2", "tfl.tile",
                    "tfl.concatenation"})


def _data_operands(op: Operation) -> list[int] | None:
    """Positions of the operands ``op`` moves elements of, or None when ``op`` is not a pure data movement."""
    if op.name not in _MOVES or len(op.results) != 1 \
            or op.attrs.get("fused_activation_function", "NONE") not in ("NONE", None):
        return None
    data = list(range(len(op.operands))) if op.name == "tfl.concatenation" else [0]
    if any(not op.operands[k].is_const for k in range(len(op.operands)) if k not in data):
        return None
    return data


def _lift(graph: Graph, v: Value) -> TensorType | None:
    """The integer type ``v`` (a float value) is the dequantization of, through data-movement ops only: a per-tensor
    int8/int16/uint8 DEQUANTIZE, or a movement op whose data operands all lift to one type and are read only by it."""
    op = v.producer
    if op is None or not v.dtype.is_float:
        return None
    if op.name == "tfl.dequantize":
        x = op.operands[0]
        return x.type if _per_tensor(x) else None
    data = _data_operands(op)
    if data is None:
        return None
    types = set()
    for k in data:
        w = op.operands[k]
        if w in graph.outputs or len(graph.uses(w)) != 1:
            return None
        t = _lift(graph, w)
        if t is None:
            return None
        types.add((t.dtype, t.quant))
    if len(types) != 1:
        return None
    (dtype, quant), = types
    return TensorType(v.shape, dtype, quant)


def _apply_lift(graph: Graph, v: Value) -> None:
    """Make the movement ops behind ``v`` (checked by :func:`_lift`) move the integer codes: each reads the
    DEQUANTIZE's operand instead of its result and produces the integer type."""
    op = v.producer
    assert op is not None
    if op.name == "tfl.dequantize":
        return
    data = _data_operands(op)
    assert data is not None
    for k in data:
        w = op.operands[k]
        _apply_lift(graph, w)
        if w.producer is not None and w.producer.name == "tfl.dequantize":
            graph.set_operand(op, k, w.producer.operands[0])
    t = op.operands[data[0]].type
    v.type = TensorType(v.shape, t.dtype, t.quant)


def commute_dequantize(graph: Graph) -> int:
    """Move DEQUANTIZEs past the data-movement ops that lead to a graph output or to a QUANTIZE of the same
    integer type, scale and zero point (see the module docstring); returns how many outputs and QUANTIZEs."""
    done = 0
    for op in graph.topological_order():
        if op.id not in graph.ops or _data_operands(op) is None or op.results[0] in graph.outputs:
            continue
        v = op.results[0]
        quants = [u for u, _ in graph.uses(v)]
        if not quants or any(u.name != "tfl.quantize" for u in quants):
            continue
        t = _lift(graph, v)
        if t is None or any(u.results[0].type != t for u in quants):
            continue
        _apply_lift(graph, v)
        v.source = quants[0].results[0].source or v.source
        for u in quants:
            graph.replace_all_uses(u.results[0], v)
            graph.remove_op(u)
        done += 1
    for i, w in enumerate(graph.outputs):
        if w.producer is None or w.producer.name == "tfl.dequantize" or graph.uses(w) or graph.outputs.count(w) != 1:
            continue
        if _lift(graph, w) is not None:
            _apply_lift(graph, w)
            dq = graph.add_op("tfl.dequantize", [w], [TensorType(w.shape, DType.FP32)], location=w.producer.location)
            graph.outputs[i] = dq.results[0]
            dq.results[0].source = w.source
            done += 1
    graph.remove_dead_ops()
    return done


def integer_io(graph: Graph, file: str | None = None) -> None:
    """Remove the edge QUANTIZE/DEQUANTIZE ops of ``graph`` (see the module docstring); refuse a graph without any.
    An NNEF graph has no such ops: :func:`integer_edges` records its integer edges instead."""
    if graph.source.format == "nnef":
        integer_edges(graph, file)
        return
    commute_dequantize(graph)
    ins: list[dict[str, Any]] = []
    outs: list[dict[str, Any]] = []
    for i, v in enumerate(graph.inputs):
        uses = graph.uses(v)
        if not v.dtype.is_float or not uses or v in graph.outputs:
            continue
        quants = [op for op, _ in uses]
        if any(op.name != "tfl.quantize" for op in quants):
            continue
        results = [op.results[0] for op in quants]
        if not all(_per_tensor(r) for r in results) or len({r.type for r in results}) != 1:
            continue
        float_dtype = v.dtype
        # the input's own shape, not the QUANTIZE result's: the input's dimensions are fixed already
        # (resolve_input_shapes) but the result keeps the frontend's symbols ('batch') until legalization
        # infers it, and it no longer exists then
        v.type = TensorType(v.shape, results[0].dtype, results[0].type.quant)
        for q_op, r in zip(quants, results):
            graph.replace_all_uses(r, v)
            graph.remove_op(q_op)
        ins.append(_entry(i, v, float_dtype))
    for i, w in enumerate(graph.outputs):
        dq = w.producer
        if dq is None or dq.name != "tfl.dequantize" or not w.dtype.is_float:
            continue
        u = dq.operands[0]
        if not _per_tensor(u):
            continue
        graph.outputs[i] = u
        if w not in graph.outputs and not graph.uses(w):
            graph.remove_op(dq)
            graph._names.discard(w.name)  # the integer output takes the float output's name
        outs.append({**_entry(i, u, w.dtype), "source": w.source})
    if not ins and not outs:
        raise InputError("--io int needs a quantized model with float inputs or outputs that it quantizes or "
                         "dequantizes at its edges; this model has none (a float model, or its I/O is integer "
                         "already)", file=file)
    graph.remove_dead_ops()
    graph.record.io_quantization = {"inputs": ins, "outputs": outs}


def integer_edges(graph: Graph, file: str | None = None) -> None:
    """``--io int`` of an NNEF model: ``graph.quant`` gives its quantized external inputs and outputs their integer
    type already, so nothing moves; ``meta["io_quantization"]`` records each per-tensor quantized int8/int16/uint8
    input and output (real = scale × (q − zero_point), fp32 on the host), which gives the host their scales and
    zero points (:attr:`tf2tosa.api.TosaModel.io_quantization`, the ``.json`` sidecar).  A graph without any (a
    float model) is refused as :func:`integer_io` refuses it."""
    ins = [_entry(i, v, DType.FP32) for i, v in enumerate(graph.inputs) if _per_tensor(v)]
    outs = [_entry(i, v, DType.FP32) for i, v in enumerate(graph.outputs) if _per_tensor(v)]
    if not ins and not outs:
        raise InputError("--io int needs a quantized model: this NNEF model has no quantized input or output "
                         "(graph.quant gives none an integer type)", file=file)
    graph.record.io_quantization = {"inputs": ins, "outputs": outs}


def integer_io_names(graph: Graph) -> None:
    """After legalization: each integer output takes the source tensor of the float output it replaced, so it is
    named (:mod:`.outputs`) and paired with the source runtime's output as the float one was."""
    for e in (graph.record.io_quantization or {}).get("outputs", []):
        source = e.pop("source", None)
        if source:
            graph.outputs[e["index"]].source = source


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """C's ``round``: halves away from zero (TFLite's ``TfLiteRound``)."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize(data: np.ndarray, dtype: str, scale: float, zero_point: int) -> np.ndarray:
    """Float → integer as TFLite's QUANTIZE reference kernel (``AffineQuantize``): ``round(x / scale) + zp`` with the
    division in float32 and C's ``round``, clamped to the type's range."""
    dt = DType(dtype)
    x = np.asarray(data, dtype=np.float32) / np.float32(scale)
    q = _round_half_away(x.astype(np.float64)) + zero_point
    lo, hi = (0, 255) if dt is DType.UINT8 else dt.range()
    return np.clip(q, lo, hi).astype(np.uint8 if dt is DType.UINT8 else dt.np_dtype())


def dequantize(data: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Integer → float32 as TFLite's DEQUANTIZE reference kernel: ``float(scale * (q - zp))`` (the product in
    double, one rounding to float32)."""
    return (np.float64(scale) * (np.asarray(data).astype(np.int64) - zero_point).astype(np.float64)).astype(np.float32)
