"""uint8 model inputs and outputs: the lowering document's convert_tfl_uint8 pass for TOSA 1.0.

before: a frontend graph whose quantized inputs/outputs (and internal values) may be uint8; after: every quantized
value is int8 (zero point - 128), with an unsigned RESCALE at each uint8 input and output
(``graph.record.unsigned_io`` names them).


TOSA 1.0 has no uint8 tensors; an i8 tensor can carry uint8 bits, and RESCALE reads/writes them as unsigned with
``input_unsigned`` / ``output_unsigned`` (zero-extended values and zero points, spec 2.13.2 RESCALE, spec 2.13.2
RESCALE).

Run before legalization (the values are still ``tfl``-typed):

1. Every quantized uint8 value inside the graph (including ``tfl.const`` data) becomes int8 with the same scale and
   ``zp - 128``; constants are remapped ``u - 128`` (lowering doc: convert_tfl_uint8).  This is exact: TFLite's uint8 ↔
   int8 relation is
   ``i = u - 128`` with the same real value.
2. A uint8 graph input keeps its name but becomes an i8 tensor carrying uint8 bits; a RESCALE
   ``i8 (input_unsigned, in_zp = zp_u8) → i8 (out_zp = zp_u8 - 128)`` by 1.0 (multiplier 1<<30, shift 30) replaces
   all its uses (lowering doc: convert_tfl_uint8).
3. A uint8 graph output is replaced by a RESCALE ``i8 (zp_u8 - 128) → i8 (output_unsigned, out_zp = zp_u8)`` by 1.0
   (lowering doc: convert_tfl_uint8).  The new output value takes the output's name (cleaned source tensor name); the
   producer value, now
   i8, is renamed ``<name>_i8`` and will be replaced by its rule's result.

With scale 1.0 both RESCALEs are exact (no rounding; |value| <= 255 < 2^29) and use SINGLE_ROUND (shift 30), so
they need nothing beyond PRO-INT.  The i8 graph input carries the int8 quantization (zp - 128) as the brief for the
pass asks; the i8 graph output carries the uint8 quantization (zp), describing the uint8 bits it holds.

``graph.record.unsigned_io`` lists the names of the input/output values whose i8 arrays carry uint8 bits; the
verifier views those arrays as uint8.

0. (first) Non-quantized uint8 values are read as quantized uint8 (scale 1, zero point 0) when every one of them only
   flows through ops that move elements (concatenation, slices, reshapes …, resource-variable reads and writes) and
   the model's inputs/outputs: TFLite's uint8 ring buffers.  Their variables then hold ``u - 128`` in an i8
   ``VARIABLE`` (TOSA 1.0 has no uint8 variables), and the initial values are shifted the same way
   (:mod:`tf2tosa.legalizations.tfl_control`).

Not handled: other non-quantized uint8 tensors (e.g. a uint8 image fed to ``tfl.cast``) — their rules see u8 values;
uint8 values inside nested regions (control-flow bodies).

Records (:mod:`tf2tosa.ir.records`): reads and writes ``graph.record.unsigned_io``.
"""

from __future__ import annotations

import re

import numpy as np

from ...errors import InvalidGraphError, Unsupported, UnsupportedOpsError
from ...ir import DType, Graph, QuantParams, TensorType, Value
from ...quant.rescale import rescale
from ...tosa.builder import Builder
from ...tosa.context import LegalizeContext


def _clean(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_")
    return s or "t"


def _to_i8_quant(q: QuantParams) -> QuantParams:
    return QuantParams(tuple(q.scale), tuple(int(z) - 128 for z in q.zero_point), q.axis)


def _u8_zp(v: Value) -> int:
    q = v.type.quant
    assert q is not None
    if q.per_channel:
        raise InvalidGraphError("per-channel quantized uint8 model input/output", tensor=v.source or v.name)
    return int(q.zero_point[0])


def _retype_internal(graph: Graph) -> None:
    """Quantized u8 values → i8 (zp - 128); u8 constants remapped u - 128 (lowering doc: convert_tfl_uint8)."""
    for op in graph.topological_order():
        for r in op.results:
            q = r.type.quant
            if r.dtype is not DType.UINT8 or q is None:
                continue
            if op.name in ("tfl.const", "tosa.CONST"):
                arr = np.asarray(op.attrs["values"])
                op.attrs["values"] = (arr.astype(np.int16) - 128).astype(np.int8)
            r.type = TensorType(r.shape, DType.INT8, _to_i8_quant(q))


#: ops that only move, select or store elements: a uint8 value flowing through them alone keeps its meaning when
#: every element is stored shifted by -128 (the resource-variable ops: TFLite's uint8 ring buffers)
_MOVE_OPS = frozenset({"tfl.concatenation", "tfl.strided_slice", "tfl.slice", "tfl.reshape", "tfl.transpose",
                       "tfl.squeeze", "tfl.expand_dims", "tfl.gather", "tfl.pack", "tfl.unpack", "tfl.split",
                       "tfl.tile", "tfl.reverse_v2", "tfl.read_variable", "tfl.assign_variable"})


def _plain_u8_as_quantized(graph: Graph) -> None:
    """Non-quantized uint8 values that only flow through element-moving ops (and the model's inputs/outputs, and
    resource variables) are read as quantized uint8 with scale 1 and zero point 0, so the steps below store them as
    i8 holding ``u - 128`` (zero point -128): exact, and a uint8 resource variable becomes a legal i8 VARIABLE."""
    plain: list[Value] = []
    for v in graph.values():
        if v.dtype is not DType.UINT8 or v.type.quant is not None:
            continue
        p = v.producer
        if p is not None and p.name not in _MOVE_OPS:
            return
        if any(op.name not in _MOVE_OPS for op, _ in graph.uses(v)):
            return
        plain.append(v)
    for v in plain:
        v.type = TensorType(v.shape, DType.UINT8, QuantParams((1.0,), (0,)))


def legalize_unsigned_io(graph: Graph, context: LegalizeContext | None = None) -> None:
    """Rewrite uint8 graph inputs/outputs as i8 tensors with unsigned RESCALEs (spec 2.13.2 RESCALE, lowering doc:
    convert_tfl_uint8)."""
    unsigned: list[str] = list(graph.record.unsigned_io)
    _plain_u8_as_quantized(graph)
    for v in list(graph.inputs) + list(graph.outputs):
        if v.dtype is DType.UINT8 and v.type.quant is None:
            raise InvalidGraphError("non-quantized uint8 model inputs/outputs are not supported",
                                    tensor=v.source or v.name)
    out_positions = [i for i, v in enumerate(graph.outputs) if v.dtype is DType.UINT8]
    out_zps = {i: _u8_zp(graph.outputs[i]) for i in out_positions}
    out_names: dict[int, tuple[str, str | None]] = {}
    for i in out_positions:
        src = graph.outputs[i].source
        out_names[i] = (_clean(src) if src else graph.outputs[i].name, src)
    in_list = [v for v in graph.inputs if v.dtype is DType.UINT8]
    in_zps = {v.id: _u8_zp(v) for v in in_list}
    if not out_positions and not in_list and not any(
            r.dtype is DType.UINT8 and r.type.quant is not None for op in graph.ops.values() for r in op.results):
        return
    _retype_internal(graph)

    b = Builder(graph, location="uint8 input", fold=False, context=context)
    for v in in_list:
        assert v.type.quant is not None
        zp = in_zps[v.id]
        q8 = _to_i8_quant(v.type.quant)
        v.type = TensorType(v.shape, DType.INT8, q8)
        uses = graph.uses(v)
        b.name_hint = v.name + "_i8"
        r = rescale(b, v, 1.0, DType.INT8, in_zp=zp, out_zp=zp - 128, out_quant=q8, input_unsigned=True)
        r.source = None
        for op, k in uses:
            graph.set_operand(op, k, r)
        graph.outputs = [r if o is v else o for o in graph.outputs]
        unsigned.append(v.name)

    b.location = "uint8 output"
    for i in out_positions:
        v = graph.outputs[i]
        zp = out_zps[i]
        if v.dtype is DType.UINT8:  # an input-less path, e.g. a non-retyped value; retype it here
            assert v.type.quant is not None
            v.type = TensorType(v.shape, DType.INT8, _to_i8_quant(v.type.quant))
        assert v.dtype is DType.INT8 and v.type.quant is not None
        want, source = out_names[i]
        if v.name == want and v.producer is not None and v not in graph.inputs:  # free the name for the new output
            graph._names.discard(v.name)
            v.name = graph.unique_name(want + "_i8")
        b.name_hint = None
        q_u8 = QuantParams(tuple(v.type.quant.scale), (zp,), v.type.quant.axis)
        r = rescale(b, v, 1.0, DType.INT8, in_zp=zp - 128, out_zp=zp, out_quant=q_u8, output_unsigned=True)
        graph._names.discard(r.name)
        r.name = graph.unique_name(want)
        r.source = source
        graph.outputs[i] = r
        unsigned.append(r.name)
    graph.record.unsigned_io = unsigned


def unsigned_io(graph: Graph, context: LegalizeContext) -> None:
    """uint8 model inputs/outputs -> i8 tensors + unsigned RESCALE; a failure is reported as an unsupported op."""
    try:
        legalize_unsigned_io(graph, context)
    except Unsupported as e:
        raise UnsupportedOpsError({"uint8 model input/output": (1, e.reason)}, file=context.file) from None
