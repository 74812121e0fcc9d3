"""Elementwise ops between RESHAPEs run at the rank of the tensors they were reshaped from (``--target``
ethos-u85 / ethos-u55 only).

before (a 1-D convolution network: TFLite's CONV_2D on a ``[N, W, C]`` signal is RESHAPE → CONV2D → RESHAPE, the
residual sums between them stay 3-D)::

    a4 ──RESHAPE──► a3 ──RESCALE──┐
    b4 ──RESHAPE──► b3 ──RESCALE──┴─ADD──RESCALE──► s3 ──RESHAPE──► s4 ──► CONV2D
                                                     └──────────────► REDUCE_SUM / the next residual sum

after::

    a4 ──RESCALE──┐
    b4 ──RESCALE──┴─ADD──RESCALE──► s4 ──► CONV2D
                                     └──RESHAPE──► s3 ──► REDUCE_SUM / the next residual sum

An op of :data:`_LIFTED` is lifted when each of its data operands is either a RESHAPE of a tensor of one shape
``S4`` (the same for all of them) to the op's own result shape ``S3``, with ``S4`` being ``S3`` behind leading 1s;
or a constant (which takes the leading 1s too); or a tensor that can take them through a RESHAPE of its own that
Vela does not copy (one of one element, such as the scalar 1 of a ``1 - z``, or one with no other reader); when every
other reader of those RESHAPEs is a RESHAPE, a SLICE or an op that is lifted with it; and when a RESHAPE input has
other readers (the copy the lift removes) or the op's result reaches a RESHAPE back to ``S4`` through ops that are
lifted (which the lift removes).  The op then reads the RESHAPEs' inputs, its result becomes ``S4``, and one new
RESHAPE back to ``S3`` takes over its readers; it is moved on the same way through the ops that read it, and a
RESHAPE of such a RESHAPE reads the first one's input (one back to ``S4`` disappears).  A SLICE and a CONCAT are
lifted the same way (their operands' shapes are not their result's, so only the leading 1s must agree): the SLICE
with start 0 and size 1 on the new axes, the CONCAT with its axis moved by them.

The recurrent case: each step's fully connected layers are RESHAPE → CONV2D → RESHAPE, the gates SLICEs of the
[1, k·U] result, and the new [1, U] state feeds the next step's CONV2D (through a RESHAPE to [1, 1, 1, U]), its
gate arithmetic and, for a layer returning sequences, the CONCAT that stacks the states: one copy per step.  With
the SLICEs, the gate arithmetic, the scalar, the rank-1 recurrent term an LSTM adds (a RESHAPE of its own) and the
CONCAT lifted, the state is made 4-D and read directly.  Vela 5.2, ethos-u85-256: the zoo gru int8 as a fresh
clone's TensorFlow builds it 98,006 → 93,533 cycles (the `.tflite` 93,121), bidirectional_lstm 142,926 → 137,532
(137,795); every GRU tried (16 to 64 units) now costs what its `.tflite` does.

Exact: an elementwise op computes each element from the elements at the same position of its operands, a RESHAPE
keeps the row-major order of the elements (spec 2.10.3 RESHAPE), and leading 1s leave the broadcast of a constant and
the last axis (the per-channel multipliers and shifts of a RESCALE, spec 2.13.2) where they were, so
``op(reshape(a), reshape(b)) = reshape(op(a, b))`` element for element, bit for bit.

Why (measured with Vela 5.2, ethos-u85-256): its TOSA reader runs a RESHAPE whose input has other readers as a
memory copy.  The zoo's tcn converts each causal Conv1D to RESHAPE → CONV2D → RESHAPE, and its residual sums fed
both the next block's 4-D convolution and the next 3-D sum: 4 × 1,262 cycles of copies, 27,550 cycles against
the `.tflite`'s 23,410; lifted, 22,073 (int16x8: 82,713 → 75,702).  The conditions keep the rest as it was: a
shape that is not ``S3`` behind 1s changes what Vela runs (a LUT on [T, 1, 1, C] instead of [1, T, C]: 1,488
cycles against 912 in transformer_encoder), and a RESHAPE moved for nothing can land between an activation and the
CONCAT Vela writes it into in place (recommender: 4,654 → 4,736 before CONCATs were lifted; with them, 4,367).
Only targets that declare ``lift_reshapes`` (:data:`tf2tosa.tosa.targets.TARGETS`) get the rewrite, so every other
conversion keeps its bytes.

Only static shapes and per-tensor quantization are lifted, never an op whose result is a graph output.
Records (:mod:`tf2tosa.ir.records`): reads and writes none; only the graph's ops.
"""

from __future__ import annotations

import numpy as np

from ...ir import DType, Graph, Operation, Value

#: the ops lifted, with the positions of their data operands (the others are constants of shape [1] or [C]:
#: zero points, shifts, a RESCALE's per-channel multipliers, a TABLE's table)
_LIFTED: dict[str, tuple[int, ...]] = {
    "tosa.RESCALE": (0,),
    "tosa.CLAMP": (0,),
    "tosa.TABLE": (0,),
    "tosa.CAST": (0,),
    "tosa.ADD": (0, 1),
    "tosa.SUB": (0, 1),
    "tosa.MUL": (0, 1),
    "tosa.MAXIMUM": (0, 1),
    "tosa.MINIMUM": (0, 1),
    "tosa.SLICE": (0,),
    "tosa.CONCAT": (),  # (every operand: see _data)
}
#: lifted ops whose data operands' shapes are not their result's (only the operands' leading 1s must agree)
_RESHAPED = ("tosa.SLICE", "tosa.CONCAT")


def _data(op: Operation) -> tuple[int, ...]:
    """The positions of ``op``'s data operands (:data:`_LIFTED`; all of a CONCAT's)."""
    return tuple(range(len(op.operands))) if op.name == "tosa.CONCAT" else _LIFTED[op.name]


def wanted(target: str | None) -> bool:
    """Whether ``target`` wants the elementwise ops lifted."""
    if not target:
        return False
    from ...tosa.targets import TARGETS  # (loaded only with --target)

    t = TARGETS.get(target)
    return t is not None and t.lift_reshapes


def _per_tensor(v: Value) -> bool:
    return v.type.is_static and (v.type.quant is None or v.type.quant.axis is None)


def _follows(reader: Operation, shape: tuple[int, ...]) -> bool:
    """Whether ``reader`` of a RESHAPE to ``shape`` goes with the RESHAPE when the RESHAPE is lifted past its
    readers: another RESHAPE (merged with it), or an op that is lifted too.  (A RESHAPE left with a reader that stays,
    while its input gains the lifted op as a reader, is what Vela copies.)"""
    if reader.name in ("tosa.RESHAPE", "tosa.SLICE"):
        return True  # (a SLICE goes with it: once one reader is lifted, the RESHAPE's input is shared)
    return reader.name in _LIFTED and len(reader.results) == 1 and tuple(reader.result.shape) == shape


def _reaches(graph: Graph, v: Value, shape: tuple[int, ...], wide: tuple[int, ...], seen: set[int]) -> bool:
    """Whether ``v`` (of ``shape``) reaches a RESHAPE back to ``wide`` through ops that can be lifted: only then
    does the lift take a RESHAPE away; elsewhere it moves a RESHAPE onto the op's readers (between a CLAMP and the
    CONCAT that Vela would have it write into in place, for one)."""
    for reader, _ in graph.uses(v):
        if reader.id in seen or len(reader.results) != 1 or tuple(reader.result.shape) not in (shape, wide):
            continue
        seen.add(reader.id)
        if reader.name == "tosa.RESHAPE":
            if tuple(reader.result.shape) == wide:
                return True
        elif (
            reader.name in _LIFTED
            and tuple(reader.result.shape) == shape
            and _reaches(graph, reader.result, shape, wide, seen)
        ):
            return True
    return False


def _own(graph: Graph, v: Value, rank: int) -> bool:
    """Whether ``v``, a non-constant operand at the op's rank, can take the new leading 1s through a RESHAPE of its
    own that Vela does not copy: it has one element (a broadcast scalar, such as the 1 of a ``1 - z``) or no other
    reader."""
    if v.is_const or v.type.rank != rank or not _per_tensor(v):
        return False
    return all(d == 1 for d in v.type.static_shape) or len(graph.uses(v)) == 1


def _lead(x: Value) -> int | None:
    """How many leading 1s the tensor ``x`` is a RESHAPE of (a per-tensor one, ``x``'s shape behind them); else
    None."""
    src = x.producer
    if src is None or src.name != "tosa.RESHAPE" or not _per_tensor(src.operands[0]):
        return None
    wide, narrow = tuple(src.operands[0].type.static_shape), tuple(x.shape)
    lead = len(wide) - len(narrow)
    if not narrow or lead <= 0 or wide[lead:] != narrow or any(d != 1 for d in wide[:lead]):
        return None
    return lead


def _lift_source(graph: Graph, op: Operation) -> tuple[int, ...] | None:
    """The shape ``op``'s result takes when ``op`` can be lifted (its operands' RESHAPE sources have the leading
    1s it gains); else None."""
    if op.name not in _LIFTED or len(op.results) != 1 or op.result in graph.outputs or not _per_tensor(op.result):
        return None
    if op.name == "tosa.SLICE" and (op.operands[1].const() is None or op.operands[2].const() is None):
        return None
    shape = tuple(op.result.type.static_shape)
    leads: set[int] = set()
    shared = False
    for k in _data(op):
        x = op.operands[k]
        if op.name not in _RESHAPED and x.is_const and x.type.rank == len(shape) and _per_tensor(x):
            continue  # (a broadcast constant: it takes the new leading 1s)
        lead = _lead(x) if op.name in _RESHAPED or tuple(x.shape) == shape else None
        if lead is None:
            if op.name != "tosa.SLICE" and _own(graph, x, len(shape)):
                continue
            return None
        if not all(_follows(r, shape) for r, _ in graph.uses(x)):
            return None
        leads.add(lead)
        assert x.producer is not None
        shared |= len(graph.uses(x.producer.operands[0])) > 1
    if len(leads) != 1:
        return None
    wide = (1,) * leads.pop() + shape
    if not shared and not _reaches(graph, op.result, shape, wide, set()):
        return None
    return wide


def _shape_const(graph: Graph, dims: tuple[int, ...]) -> Value:
    return graph.add_const(np.asarray(dims, dtype=np.int64), DType.SHAPE, name="shape", op_name="tosa.CONST_SHAPE")


def _reshape(
    graph: Graph, x: Value, like: Value, shape: tuple[int, ...] | None = None, suffix: str = "_lifted"
) -> Operation:
    """A new RESHAPE of ``x`` to the type of ``like`` (with ``shape`` in place of its shape when given)."""
    t = like.type if shape is None else like.type.with_shape(shape)
    return graph.add_op(
        "tosa.RESHAPE",
        [x, _shape_const(graph, tuple(t.static_shape))],
        [t],
        result_names=[like.name + suffix],
        location=x.producer.location if x.producer is not None else None,
    )


def _lift(graph: Graph, op: Operation, made: set[int]) -> bool:
    wide = _lift_source(graph, op)
    if wide is None:
        return False
    readers = graph.uses(op.result)
    out = op.result
    lead = (1,) * (len(wide) - out.type.rank)
    for k in _data(op):
        x = op.operands[k]
        arr = x.const()
        if arr is not None:
            widened = graph.add_const(arr.reshape(lead + arr.shape), x.type.dtype, name=x.name, quant=x.type.quant)
            graph.set_operand(op, k, widened)
        elif _lead(x) == len(lead):
            assert x.producer is not None
            graph.set_operand(op, k, x.producer.operands[0])
        else:  # (_own)
            own = _reshape(graph, x, x, shape=lead + tuple(x.type.static_shape), suffix="_lifted")
            made.add(own.id)
            graph.set_operand(op, k, own.result)
    if op.name == "tosa.SLICE":
        for k, pad in ((1, 0), (2, 1)):
            dims = (pad,) * len(lead) + tuple(int(d) for d in np.asarray(op.operands[k].const()).reshape(-1))
            graph.set_operand(op, k, _shape_const(graph, dims))
    if op.name == "tosa.CONCAT":
        op.attrs["axis"] = int(op.attrs["axis"]) + len(lead)
    back = _reshape(graph, out, out)
    made.add(back.id)
    out.type = out.type.with_shape(wide)
    back.result.source, out.source = out.source, None
    for reader, k in readers:
        graph.set_operand(reader, k, back.result)
    return True


def _bypass_chain(graph: Graph, op: Operation, made: set[int]) -> bool:
    """A RESHAPE of a RESHAPE reads the first one's input, or is forwarded to it when that has its shape, where the
    first one is a lift's or has no other readers than RESHAPEs (a RESHAPE that stays for another reader while its
    input gains one is what Vela copies)."""
    x = op.operands[0]
    src = x.producer
    if src is None or src.name != "tosa.RESHAPE" or op.result in graph.outputs:
        return False
    if src.id not in made and not all(use.name == "tosa.RESHAPE" for use, _ in graph.uses(x)):
        return False
    inner = src.operands[0]
    if tuple(inner.shape) == tuple(op.result.shape):
        if op.result.source is not None and inner.source is None:
            inner.source = op.result.source
        graph.replace_all_uses(op.result, inner)
        graph.remove_op(op)
    else:
        graph.set_operand(op, 0, inner)
    return True


def lift_reshapes(graph: Graph) -> int:
    """Lift every elementwise op between RESHAPEs (see the module docstring) and merge the RESHAPE chains this
    leaves; returns how many ops were lifted (the RESHAPEs left unread go with the graph's next dead-op sweep)."""
    lifted = 0
    made: set[int] = set()

    def rewrite(op: Operation) -> bool:
        nonlocal lifted
        if op.name == "tosa.RESHAPE":
            return _bypass_chain(graph, op, made)
        if _lift(graph, op, made):
            lifted += 1
            return True
        return False

    graph.rewrite_until_settled(rewrite)
    return lifted
