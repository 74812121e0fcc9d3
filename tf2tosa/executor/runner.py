"""Graph interpreter: runs a TOSA graph with the registered kernels."""

from __future__ import annotations

import contextvars
import operator
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..errors import ConversionError, InputError, InvalidGraphError
from ..ir.graph import Graph, Operation, Value
from ..ir.types import DType, TensorType
from ..tosa import profiles, validation
from ..tosa.profiles import LEVEL_NONE, element_bits, tensor_size_problem
from . import chains
from .activation import clamp_inplace
from .islands import Island, find_islands
from .registry import (
    ERROR,
    KERNELS,
    PRECISE,
    UNPREDICTABLE,
    VALID,
    ExecutionError,
    UnpredictableError,
    kernels_as_registered,
    op_label,
)
from .tensor_ops import ACCUMULATORS


@dataclass
class ExecState:
    """Per-run state: persistent variables (EXT-VARIABLE) and nesting depth."""

    variables: dict[str, np.ndarray] = field(default_factory=dict)
    declared: set[str] = field(default_factory=set)
    #: per variable declared in this invocation: its var_shape and var_t (EXT-VARIABLE, spec 2.17.1 VARIABLE)
    declarations: dict[str, tuple[tuple[int, ...], DType | None]] = field(default_factory=dict)
    depth: int = 0
    #: MAX_NESTING of the level in force (COND_IF / WHILE_LOOP ERROR_IF, spec 2.16.1 COND_IF, spec 2.16.2 WHILE_LOOP)
    max_nesting: int = 256
    profile: dict[str, float] | None = None
    trace: dict[str, np.ndarray] | None = None


_STATE: contextvars.ContextVar[ExecState | None] = contextvars.ContextVar("tf2tosa_exec_state", default=None)


def current_state() -> ExecState:
    st = _STATE.get()
    if st is None:
        st = ExecState()
        _STATE.set(st)
    return st


#: storage numpy type per element type (what :func:`storage` casts to), filled as types are met
_STORAGE: dict[DType, np.dtype] = {}
_F64 = np.dtype(np.float64)


def _storage_dtype(dt: DType, precise: bool) -> np.dtype:
    """The numpy storage type of ``dt`` (float64 for a float type in precise mode)."""
    if precise and dt.is_float:
        return _F64
    got = _STORAGE.get(dt)
    if got is None:
        got = _STORAGE[dt] = dt.np_dtype()
    return got


def storage(arr: Any, t: TensorType) -> np.ndarray:
    """Cast ``arr`` to the storage numpy type of ``t``."""
    a = np.asarray(arr)
    dt = _storage_dtype(t.dtype, PRECISE.get())
    if a.dtype != dt:
        a = a.astype(dt)
    return a


def _check_result(op: Operation, i: int, arr: np.ndarray, precise: bool | None = None) -> np.ndarray:
    """Result ``i`` of ``op`` in its storage type, checked against the result's type (``precise``: the mode in
    force, read from :data:`PRECISE` when None)."""
    t = op.results[i].type
    if (arr.__class__ is np.ndarray and t.dtype is not DType.SHAPE and arr.shape == t.shape
            and arr.dtype == _storage_dtype(t.dtype, PRECISE.get() if precise is None else precise)):
        return arr  # (the common case: already of its storage type and its static shape)
    arr = storage(arr, t)
    if t.dtype is DType.SHAPE:
        arr = arr.reshape(-1)
        exp_len = t.shape[0] if t.shape else None
        if isinstance(exp_len, int) and arr.shape[0] != exp_len:
            raise ExecutionError(f"result {i} has {arr.shape[0]} shape elements, type says {exp_len}",
                                 op=op_label(op))
        return arr
    if len(t.shape) != arr.ndim or any(isinstance(d, int) and d != s for d, s in zip(t.shape, arr.shape)):
        raise ExecutionError(f"result {i} has shape {list(arr.shape)}, type says {list(t.shape)}",
                             op=op_label(op))
    return arr


def evaluate_op(op: Operation, inputs: Sequence[np.ndarray], precise: bool | None = None) -> list[np.ndarray]:
    """Run one operation on arrays (for constant folding, and by :func:`run_graph`).  Operands and results are cast
    to the storage types of their types; arrays already of those types (the usual case) are taken as they are.
    ``precise``: the mode in force, read from :data:`PRECISE` when None."""
    fn = KERNELS.get(op.opcode) if op.dialect == "tosa" else None
    if fn is None:
        raise ExecutionError(f"no executor kernel for {op.name}", op=op_label(op))
    if precise is None:
        precise = PRECISE.get()
    args = list(inputs)
    for a, v in zip(args, op.operands):
        if a.__class__ is not np.ndarray or a.dtype != _storage_dtype(v.type.dtype, precise):
            args = [storage(a, v.type) for a, v in zip(inputs, op.operands)]
            break
    outs = _call(op, fn, args)
    if len(outs) != len(op.results):
        raise ExecutionError(f"kernel returned {len(outs)} results, op has {len(op.results)}", op=op_label(op))
    return [_check_result(op, i, a, precise) for i, a in enumerate(outs)]


def _call(op: Operation, fn: Any, args: list[np.ndarray]) -> Any:
    """``fn(op, args)`` with a kernel's failures located at ``op``."""
    try:
        return fn(op, args)
    except ExecutionError as e:
        if e.op is None:
            raise e.at(op_label(op)) from None
        raise
    except (ValueError, IndexError, TypeError, KeyError, ZeroDivisionError, OverflowError) as e:
        raise ExecutionError(f"kernel failed: {type(e).__name__}: {e}", op=op_label(op)) from e


#: plan.chains entry of a pair, group or op checked once with an input shape and these operands: its prepared form
#: is made when a later checked run meets them again (a program run once pays nothing for it)
_PENDING = object()
#: no entry for this input shape and these operand arrays
_MISS = object()


def _prepared_for(plan: _Plan, op_id: int, key: Any, consts: tuple[np.ndarray, ...]) -> Any:
    """What the plan holds for ``op_id`` with this key and these very operand arrays: a prepared form, None (none
    can be made), _PENDING, or _MISS."""
    hit = plan.chains.get(op_id)
    if hit is not None and hit[0] == key and len(hit[1]) == len(consts) and all(map(operator.is_, hit[1], consts)):
        return hit[2]
    return _MISS


def _ready(state: Any) -> bool:
    return state is not None and state is not _PENDING and state is not _MISS


def _after_checked(plan: _Plan, op_id: int, key: Any, consts: tuple[np.ndarray, ...], state: Any, ok: bool,
                   make: Any) -> None:
    """After a checked run of ``op_id`` that succeeded: keep its operands (so their identity stays theirs) as pending
    the first time, make its prepared form (``make()``, or None) the second time.  Only for constant (read-only)
    operands."""
    if not ok or not all(not a.flags.writeable for a in consts):
        return
    if state is _PENDING:
        plan.chains[op_id] = (key, consts, make())
    elif state is _MISS:
        plan.chains[op_id] = (key, consts, _PENDING)


def _run_fused(conv: Operation, ins: list[np.ndarray], rescale: Operation, env: dict[int, np.ndarray],
               plan: _Plan) -> np.ndarray | None:
    """An integer convolution and the RESCALE that alone reads its result, run as one: the convolution's exact
    accumulator goes to the RESCALE without the cast to i32 and back (the same values: every REQUIRE on the way is
    checked as when run apart).  None when the RESCALE's other operands are not ready (then both run apart).

    Once the pair has run that way twice with an input shape and constant (read-only) operands, and
    :func:`chains.prepare` proves that no REQUIRE of it can depend on the data, later runs with the same shape and
    the very same operand arrays take the prepared blocked chain (see _after_checked)."""
    got = [env.get(v.id) for v in rescale.operands[1:]]
    rest = [a for a in got if a is not None]
    if len(rest) != len(got):
        return None
    consts = (*ins[1:], *rest)
    key = (ins[0].shape, ins[0].dtype)
    state = _prepared_for(plan, conv.id, key, consts)
    if _ready(state):
        done: np.ndarray | None = state.run(ins[0])
        if done is not None:
            return done
    acc = _call(conv, ACCUMULATORS[conv.opcode], [storage(a, v.type) for a, v in zip(ins, conv.operands)])
    t = conv.results[0].type
    if acc.shape != tuple(t.shape):
        return None  # run apart, where the shape error is reported
    r_args = [acc] + [storage(a, v.type) for a, v in zip(rest, rescale.operands[1:])]
    outs = _call(rescale, KERNELS["RESCALE"], r_args)
    if len(outs) != 1:  # pragma: no cover - RESCALE has one result
        raise ExecutionError("kernel returned more than one result", op=op_label(rescale))
    res = _check_result(rescale, 0, outs[0])
    _after_checked(plan, conv.id, key, consts, state, ins[0].dtype == conv.operands[0].type.dtype.np_dtype(),
                   lambda: chains.prepare(conv, ins, rescale, r_args[1:]))
    return res


def _after_float_checked(plan: _Plan, conv: Operation, ins: list[np.ndarray], key: Any, consts: tuple[np.ndarray, ...],
                         state: Any, clamp: Operation | None) -> None:
    """:func:`_after_checked` for a float32 convolution (with its CLAMP, or alone): prepared by
    :func:`chains.prepare_float` when its input was float32."""
    _after_checked(plan, conv.id, key, consts, state,
                   ins[0].dtype == np.float32 and conv.operands[0].type.dtype is DType.FP32,
                   lambda: chains.prepare_float(conv, ins, clamp))


def _run_fused_clamp(conv: Operation, ins: list[np.ndarray], clamp: Operation | None, plan: _Plan,
                     bordered: dict[int, tuple[np.ndarray, Any]]) -> np.ndarray:
    """A float convolution and the CLAMP that alone reads its fresh result (an in-place CLAMP of the plan), or a float
    convolution alone (``clamp`` None): through the kernels until they have met an input shape and constant operands
    twice, then, when :func:`chains.prepare_float` allows, as the prepared blocked chain (bias add and clip on each
    block of output rows right after it is computed)."""
    consts = tuple(ins[1:])
    key = (ins[0].shape, ins[0].dtype)
    state = _prepared_for(plan, conv.id, key, consts)
    if _ready(state):
        # a CONV2D whose result only a prepared depthwise reads writes it inside that depthwise's zero padding, and
        # the depthwise reads its bands from there (no padded copy of its input)
        pads = plan.pad_out.get(conv.id)
        src = bordered.pop(conv.operands[0].id, None)
        xp_full = src[0] if src is not None and src[1] == state.geometry[0] else None
        res, buf = state.run(ins[0], pads, xp_full)
        if buf is not None:
            bordered[(conv if clamp is None else clamp).results[0].id] = (buf, pads)
        return res  # type: ignore[no-any-return]
    (acc,) = evaluate_op(conv, ins)
    if clamp is None:  # a float convolution alone (plan.solo): the bias add in each block
        res = acc
    elif acc.flags.writeable and acc.dtype == np.float32:
        res = clamp_inplace(clamp, [acc])
    else:
        (res,) = evaluate_op(clamp, [acc])
    _after_float_checked(plan, conv, ins, key, consts, state, clamp)
    return res


#: the 256 codes of an 8-bit tensor, indexed by their bit pattern (an int8 array's uint8 view)
_CODES = np.arange(256, dtype=np.uint8).view(np.int8)
#: every pair of codes, pair (a, b) at index a_bits * 256 + b_bits
_PAIRS = (np.repeat(_CODES, 256), np.tile(_CODES, 256))


def _residual_add(conv: Operation, add: Operation) -> bool:
    """A float32 CONV2D whose result (read by nothing else) is one operand of the ADD run right after it, the other a
    float32 value of the same static shape as both results (a residual connection: the add goes into the
    convolution's blocks, see _run_fused_add)."""
    v = conv.results[0]
    if (conv.opcode != "CONV2D" or add.opcode != "ADD" or len(add.operands) != 2 or len(add.results) != 1
            or (add.operands[0] is v) == (add.operands[1] is v)):
        return False
    other = add.operands[1] if add.operands[0] is v else add.operands[0]
    types = (v.type, other.type, add.results[0].type)
    return (all(t.dtype is DType.FP32 for t in types) and len({tuple(t.shape) for t in types}) == 1
            and all(isinstance(d, int) for d in v.type.shape))


def _run_fused_add(conv: Operation, ins: list[np.ndarray], add: Operation, env: dict[int, np.ndarray],
                   plan: _Plan) -> np.ndarray | None:
    """A float32 CONV2D and the residual ADD right after it (see _residual_add): through the kernels until they have
    met an input shape and constant operands twice, then, when :func:`chains.prepare_float` allows, as the prepared
    convolution whose blocks get the bias and then the other operand added while in cache (the ADD's own
    ``np.add`` in its operand order, so the same bits).  None when the other operand has no value yet."""
    first = add.operands[0] is conv.results[0]
    other = env.get((add.operands[1] if first else add.operands[0]).id)
    if other is None:
        return None
    consts = tuple(ins[1:])
    key = (ins[0].shape, ins[0].dtype)
    state = _prepared_for(plan, conv.id, key, consts)
    if _ready(state) and other.dtype == np.float32 and other.shape == state.out_shape:
        res, _ = state.run(ins[0], residual=(other, first))
        return res  # type: ignore[no-any-return]
    (acc,) = evaluate_op(conv, ins)
    (res,) = evaluate_op(add, [acc, other] if first else [other, acc])
    _after_float_checked(plan, conv, ins, key, consts, state, None)
    return res


def _pad_out(order: list[Operation], fused: dict[int, Operation], solo: set[int], readers: dict[int, int],
             keep: set[int]) -> dict[int, tuple[int, int, int, int]]:
    """Float CONV2D + CLAMP pairs whose result only a float depthwise (fused or alone) reads, with its pads."""
    float_dw = set(solo) | {i for i, p in fused.items() if p.opcode == "CLAMP"}
    out: dict[int, tuple[int, int, int, int]] = {}
    reader_of: dict[int, Operation] = {}
    for op in order:
        for v in op.operands:
            reader_of[v.id] = op
    for op in order:
        clamp = fused.get(op.id)
        if op.opcode != "CONV2D" or clamp is None or clamp.opcode != "CLAMP":
            continue
        v = clamp.results[0]
        dw = reader_of.get(v.id)
        if (dw is None or dw.opcode != "DEPTHWISE_CONV2D" or dw.id not in float_dw or readers.get(v.id) != 1
                or v.id in keep or dw.operands[0] is not v):
            continue
        pad = np.asarray(dw.attrs.get("pad", [])).reshape(-1)
        if pad.size == 4 and int(pad.min()) >= 0:
            pt, pb, pl, pr = (int(p) for p in pad)
            out[op.id] = (pt, pb, pl, pr)
    return out


def _pair_groups(order: list[Operation], readers: dict[int, int], keep: set[int]) -> dict[int, list[Operation]]:
    """RESCALE(a), RESCALE(b), ADD or SUB, RESCALE run one after the other (CONSTs aside), on two 8-bit tensors of one
    static shape by one multiplier each, the intermediates read by nothing else: int8 ADD as TFLite lowers it.  By
    the group's first op id."""
    ops = [op for op in order if op.opcode != "CONST"]
    groups: dict[int, list[Operation]] = {}

    def single(v: Value) -> bool:
        return readers.get(v.id) == 1 and v.id not in keep

    for i in range(2, len(ops) - 1):
        ra, rb, add, rout = ops[i - 2:i + 2]
        if add.opcode not in ("ADD", "SUB") or rout.opcode != "RESCALE" or len(add.operands) != 2:
            continue
        if any(o.dialect != "tosa" or len(o.results) != 1 for o in (ra, rb, add, rout)):
            continue
        pro = [v.producer for v in add.operands]
        if {id(p) for p in pro} != {id(ra), id(rb)} or rout.operands[0] is not add.results[0]:
            continue
        if not all(single(v) for v in (*add.operands, add.results[0])):
            continue
        if any(r.opcode != "RESCALE" or r.operands[0].dtype is not DType.INT8 or r.attrs.get("per_channel", False)
               for r in (ra, rb)) or rout.attrs.get("per_channel", False):
            continue
        shapes = {tuple(v.type.shape) for v in (ra.operands[0], rb.operands[0], add.results[0], rout.results[0])}
        if len(shapes) != 1 or not all(isinstance(d, int) for d in next(iter(shapes))):
            continue
        inner = {ra.results[0].id, rb.results[0].id, add.results[0].id}
        if any(v.id in inner for r in (ra, rb, rout) for v in r.operands[1:]):
            continue
        groups[ra.id] = [ra, rb, add, rout]
    return groups


def _run_group(members: list[Operation], env: dict[int, np.ndarray], plan: _Plan) -> np.ndarray | None:
    """A RESCALE, RESCALE, ADD/SUB, RESCALE group (see _pair_groups) at its first op: through the four kernels in
    order (every ERROR_IF and REQUIRE on the data) until it has met its input shapes and constant operands twice;
    then, while the same operand arrays come, a 65536-entry table of its result on every pair of 8-bit codes - made
    by the same kernels, so by the spec's pseudo-code (a pair failing a REQUIRE leaves no table) - read at
    ``a_bits * 256 + b_bits``.  None when an input has no value yet (the ops then run one by one)."""
    add, rout = members[2], members[3]
    first, second = (v.producer for v in add.operands)
    assert first is not None and second is not None
    xa, xb = env.get(first.operands[0].id), env.get(second.operands[0].id)
    rest = [env.get(v.id) for r in (first, second, rout) for v in r.operands[1:]]
    consts = tuple(a for a in rest if a is not None)
    if xa is None or xb is None or len(consts) != len(rest):
        return None
    key = (xa.shape, xb.shape, xa.dtype, xb.dtype)
    state = _prepared_for(plan, add.id, key, consts)
    if _ready(state):
        idx = np.left_shift(xa.view(np.uint8), 8, dtype=np.uint16)
        idx |= xb.view(np.uint8)
        return np.take(state, idx)  # type: ignore[no-any-return]
    vals: dict[int, np.ndarray] = {}
    for m in members:
        (vals[m.results[0].id],) = evaluate_op(m, [vals[v.id] if v.id in vals else env[v.id] for v in m.operands])

    def make() -> np.ndarray | None:
        try:
            codes = {first.results[0].id: _kernel_result(first, [_PAIRS[0], *[env[v.id] for v in first.operands[1:]]]),
                     second.results[0].id: _kernel_result(second,
                                                          [_PAIRS[1], *[env[v.id] for v in second.operands[1:]]])}
            codes[add.results[0].id] = _kernel_result(add, [codes[v.id] for v in add.operands])
            return _kernel_result(rout, [codes[add.results[0].id], *[env[v.id] for v in rout.operands[1:]]])
        except ExecutionError:
            return None  # some pair fails a REQUIRE: keep checking the data

    _after_checked(plan, add.id, key, consts, state, xa.dtype == np.int8 and xb.dtype == np.int8, make)
    return vals[rout.results[0].id]


def _run_table_rescale(op: Operation, ins: list[np.ndarray], plan: _Plan) -> np.ndarray:
    """RESCALE of an 8-bit input by one multiplier and shift: through the kernel (every ERROR_IF and REQUIRE on the
    data) until it has met an input shape and constant operands twice; then its result on every one of the 256
    input codes - computed by the same kernel, so by the spec's apply_scale_32 - is a table read by the input's bit
    pattern, as long as the same operand arrays come (a code whose REQUIRE fails leaves no table)."""
    x, consts = ins[0], tuple(ins[1:])
    key = (x.shape, x.dtype)
    state = _prepared_for(plan, op.id, key, consts)
    if _ready(state):
        out: np.ndarray = np.take(state, x.view(np.uint8))  # (np.take: a quarter of fancy indexing's time)
        return out
    (res,) = evaluate_op(op, ins)

    def make() -> np.ndarray | None:
        try:
            return _kernel_result(op, [_CODES, *consts])
        except ExecutionError:
            return None  # some code fails a REQUIRE: keep checking the data

    _after_checked(plan, op.id, key, consts, state, x.dtype == np.int8, make)
    return res


#: every 16-bit code, indexed by its bit pattern
_CODES16 = np.arange(1 << 16, dtype=np.uint16).view(np.int16)


def _run_island(island: Island, env: dict[int, np.ndarray], plan: _Plan) -> list[np.ndarray] | None:
    """An elementwise island (see :mod:`.islands`) at its first op, its exposed values in order: through its kernels
    in order (every ERROR_IF and REQUIRE on the data) until it has met its root's shape and constant operands twice;
    then, while the same operand arrays come, tables of the exposed values on every code of the root (and channel),
    made by the same kernels, read at the root's bit pattern.  A code (or channel) failing a REQUIRE leaves no
    table.  None when an operand has no value yet (the ops then run one by one)."""
    x = env.get(island.root.id)
    arrays = [env.get(v.id) for v in island.consts]
    consts = tuple(a for a in arrays if a is not None)
    if x is None or len(consts) != len(arrays):
        return None
    first = island.ops[0]
    key = (x.shape, x.dtype)
    state = _prepared_for(plan, first.id, key, consts)
    if _ready(state):
        return [_look_up(t, x, island.channels) for t in state]
    vals: dict[int, np.ndarray] = {island.root.id: x}
    for m in island.ops:
        (vals[m.results[0].id],) = evaluate_op(m, [vals[v.id] if v.id in vals else env[v.id] for v in m.operands])

    def make() -> list[np.ndarray] | None:
        codes = _CODES if x.dtype == np.int8 else _CODES16
        shape = [codes.size] + [1] * (x.ndim - 1)
        c = codes.reshape(shape)
        if island.channels is not None:
            shape[-1] = island.channels
            c = np.ascontiguousarray(np.broadcast_to(c, shape))
        tv: dict[int, np.ndarray] = {island.root.id: c}
        try:
            for m in island.ops:
                tv[m.results[0].id] = _kernel_result(m, [tv[v.id] if v.id in tv else env[v.id] for v in m.operands])
        except ExecutionError:
            return None  # some code fails a REQUIRE: keep checking the data
        return [np.ascontiguousarray(tv[v.id].reshape(codes.size, -1) if island.channels else tv[v.id].reshape(-1))
                for v in island.exposed]

    _after_checked(plan, first.id, key, consts, state, x.dtype == island.root.type.dtype.np_dtype(), make)
    return [vals[v.id] for v in island.exposed]


#: 0..C-1 as int32, by C (the channel term of a per-channel table's index)
_CHANNEL_INDEX: dict[int, np.ndarray] = {}


def _look_up(table: np.ndarray, x: np.ndarray, channels: int | None) -> np.ndarray:
    """``table[bits of x]`` (a per-tensor table), or ``table[bits of x, channel]`` (a [codes, C] table)."""
    bits: np.ndarray[Any, np.dtype[np.unsignedinteger[Any]]] = x.view(np.uint8 if x.dtype.itemsize == 1 else np.uint16)
    if channels is None:
        return np.take(table, bits)
    ch = _CHANNEL_INDEX.get(channels)
    if ch is None:
        ch = _CHANNEL_INDEX[channels] = np.arange(channels, dtype=np.int32)
    idx = np.multiply(bits, channels, dtype=np.int32)
    idx += ch
    return np.take(table.reshape(-1), idx)  # type: ignore[no-any-return]


def _kernel_result(op: Operation, inputs: list[np.ndarray]) -> np.ndarray:
    """The first result of ``op``'s kernel on ``inputs`` in its storage type, whatever its shape."""
    fn = KERNELS[op.opcode]
    args = [storage(a, v.type) for a, v in zip(inputs, op.operands)]
    return storage(_call(op, fn, args)[0], op.results[0].type)


def _bind_inputs(graph: Graph, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[int, np.ndarray]:
    env: dict[int, np.ndarray] = {}
    if isinstance(inputs, Mapping):
        names = {v.name for v in graph.inputs}
        for k in inputs:
            if k not in names:
                raise InputError(f"unknown input name {k!r}; the graph inputs are {sorted(names)}", tensor=str(k))
        for v in graph.inputs:
            if v.name not in inputs:
                raise InputError(f"missing input {v.name!r}", tensor=v.name)
            env[v.id] = _check_input(v, inputs[v.name])
    else:
        seq = list(inputs)
        if len(seq) != len(graph.inputs):
            raise InputError(f"expected {len(graph.inputs)} inputs, got {len(seq)}")
        for v, a in zip(graph.inputs, seq):
            env[v.id] = _check_input(v, a)
    return env


def _check_input(v: Value, a: Any) -> np.ndarray:
    arr = np.asarray(a)
    t = v.type
    want = t.dtype.np_dtype()
    if arr.dtype == np.float64 and t.dtype.is_float and PRECISE.get():
        want = arr.dtype  # precise mode: COND_IF / WHILE_LOOP regions receive the fp64 values of the caller
    if arr.dtype != want:
        raise InputError(f"input {v.name!r} has dtype {arr.dtype}, expected {want} ({t.dtype.value})", tensor=v.name)
    shape = tuple(arr.shape)
    if t.dtype is DType.SHAPE:
        return arr
    ok = len(shape) == len(t.shape) and all(not isinstance(d, int) or d < 0 or d == s
                                             for d, s in zip(t.shape, shape))
    if not ok:
        raise InputError(f"input {v.name!r} has shape {list(shape)}, expected {list(t.shape)}", tensor=v.name)
    return arr


@dataclass
class _Plan:
    """How :func:`run_graph` runs a graph: the ops in topological order; per op, the values no later op reads
    (freed once it has run: a reference count per value, so peak memory follows the live set, not the whole graph);
    the single-result CONST ops (their values are put in the environment before the first op); and the CLAMPs that
    may overwrite their operand (a fresh convolution result read by nothing else)."""

    key: Any
    order: list[Operation]
    frees: list[list[int]]
    consts: list[Operation]
    inplace: set[int]
    #: integer convolution op id -> the RESCALE that alone reads its i32 result, right after it (see _run_fused); float
    #: convolution op id -> the in-place CLAMP right after it (see _run_fused_clamp), or the residual ADD right after
    #: it (see _run_fused_add)
    fused: dict[int, Operation]
    #: RESCALE op ids of an 8-bit input and one multiplier (see _run_table_rescale)
    tables: set[int]
    #: first op id of a RESCALE, RESCALE, ADD/SUB, RESCALE group of two 8-bit tensors -> the group (see _run_group)
    groups: dict[int, list[Operation]]
    #: (index, op) of the ops that are not single-result CONSTs (what a run walks once the constants are in place)
    body: list[tuple[int, Operation]]
    #: float32 CONV2D / DEPTHWISE_CONV2D op ids fused with nothing (prepared like a fused pair, without the CLAMP)
    solo: set[int]
    #: float CONV2D op id (fused with its CLAMP) -> the pads (top, bottom, left, right) of the float DEPTHWISE_CONV2D
    #: that alone reads the CLAMP's result (see _run_fused_clamp)
    pad_out: dict[int, tuple[int, int, int, int]]
    #: first op id of an elementwise island of one 8- or 16-bit tensor -> the island (see islands, _run_island)
    islands: dict[int, Island] = field(default_factory=dict)
    #: per CONST op id: (its values array, a read-only view of it) - kernels cannot write into the graph's
    #: constants, and their prepared forms (converted weights, bounds) are cached by the view's identity
    views: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: per fused pair, group or table op id: (input shapes and dtypes, the operand arrays it was checked with, the
    #: prepared form, None or _PENDING) - see _after_checked
    chains: dict[int, tuple[Any, tuple[np.ndarray, ...], Any]] = field(default_factory=dict)


_PLANS: weakref.WeakKeyDictionary[Graph, _Plan] = weakref.WeakKeyDictionary()

#: ops whose float result is a fresh array no other value shares (CLAMP may then work in place)
_FRESH = frozenset({"CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D"})


def _plan(graph: Graph) -> _Plan:
    """The :class:`_Plan` of ``graph``, cached while its ops and edges are unchanged."""
    # every change of ops or edges through the Graph's methods bumps its version; the op count and the outputs catch
    # the rest (a key of every op and edge cost 0.4 ms per run on MobileNetV2, and networkx's edge count walks
    # every node)
    key = (getattr(graph, "_version", None), len(graph.ops), graph.nx.number_of_nodes(),
           tuple(v.id for v in graph.outputs))
    hit = _PLANS.get(graph)
    if hit is not None and hit.key == key:
        return hit
    order = graph.topological_order()
    last: dict[int, int] = {}
    readers: dict[int, int] = {}
    for i, op in enumerate(order):
        for v in op.operands:
            last[v.id] = i
            readers[v.id] = readers.get(v.id, 0) + 1
    keep = {v.id for v in graph.outputs}
    frees: list[list[int]] = [[] for _ in order]
    for vid, i in last.items():
        if vid not in keep:
            frees[i].append(vid)
    consts = [op for op in order if op.opcode == "CONST" and op.dialect == "tosa" and len(op.results) == 1
              and not op.operands]
    inplace = set()
    for op in order:
        if op.opcode != "CLAMP" or op.dialect != "tosa" or not op.operands:
            continue
        v = op.operands[0]
        prod = v.producer
        if (prod is not None and prod.dialect == "tosa" and prod.opcode in _FRESH and readers.get(v.id) == 1
                and v.id not in keep and v.type == op.results[0].type and v.dtype is DType.FP32):
            inplace.add(op.id)
    fused: dict[int, Operation] = {}
    for i, op in enumerate(order):
        if op.opcode not in ACCUMULATORS or op.dialect != "tosa" or len(op.results) != 1:
            continue
        v = op.results[0]
        if readers.get(v.id) != 1 or v.id in keep:
            continue
        # the reader must come next (CONSTs aside): running it early then changes no order of effects
        nxt = next((o for o in order[i + 1:] if o.opcode != "CONST"), None)
        if nxt is None or nxt.dialect != "tosa" or not nxt.operands:
            continue
        if _residual_add(op, nxt):  # v is either operand
            fused[op.id] = nxt
            continue
        if nxt.operands[0] is not v:
            continue
        if (v.dtype is DType.INT32 and nxt.opcode == "RESCALE" and all(u is not v for u in nxt.operands[1:])) \
                or (nxt.id in inplace and len(nxt.operands) == 1):
            fused[op.id] = nxt
    # RESCALEs of an 8-bit input by one multiplier (ADD's input rescales): a 256-entry table once checked
    tables = {op.id for op in order if op.opcode == "RESCALE" and op.dialect == "tosa" and op.operands
              and op.operands[0].dtype is DType.INT8 and not op.attrs.get("per_channel", False)}
    const_ids = {op.id for op in consts}
    body = [(i, op) for i, op in enumerate(order) if op.id not in const_ids]
    solo = {op.id for op in order if op.opcode in ("CONV2D", "DEPTHWISE_CONV2D") and op.dialect == "tosa"
            and op.id not in fused and len(op.results) == 1 and op.results[0].dtype is DType.FP32}
    groups = _pair_groups(order, readers, keep)
    taken = {op.id for ms in groups.values() for op in ms} | set(fused) | {p.id for p in fused.values()}
    islands = find_islands(order, {op.results[0].id for op in consts}, keep, taken)
    plan = _Plan(key, order, frees, consts, inplace, fused, tables, groups, body, solo,
                 _pad_out(order, fused, solo, readers, keep), islands)
    _PLANS[graph] = plan
    return plan


def _const_view(plan: _Plan, op: Operation, precise: bool) -> np.ndarray | None:
    """The read-only view of a CONST op's values when they are already in the result's storage type and shape."""
    vals = op.attrs.get("values")
    t = op.results[0].type
    hit = plan.views.get(op.id)
    if hit is not None and hit[0] is vals and not (precise and t.dtype.is_float):
        return hit[1]  # checked when the view was made (the plan, and so its views, go when the graph changes)
    if not (isinstance(vals, np.ndarray) and vals.shape == t.shape and vals.dtype == t.dtype.np_dtype()
            and not (precise and t.dtype.is_float)):
        return None
    if hit is None or hit[0] is not vals:
        view = vals.view()
        view.flags.writeable = False
        hit = plan.views[op.id] = (vals, view)
    return hit[1]


def run_graph(graph: Graph, args: Sequence[np.ndarray] | Mapping[str, Any], state: ExecState) -> list[np.ndarray]:
    """Run ``graph`` (also used for COND_IF / WHILE_LOOP regions); returns the outputs in order."""
    env = _bind_inputs(graph, args)
    trace = state.trace if state.depth == 0 else None
    if trace is not None:
        for v in graph.inputs:
            trace[v.name] = env[v.id]
    prof = state.profile if state.depth == 0 else None
    precise = PRECISE.get()
    plan = _plan(graph)
    skip: set[int] = set()
    all_views = False
    if trace is None:
        skip, all_views = _bind_consts(plan, env, precise)
    const_ids = {op.id for op in plan.consts} if trace is not None else set()
    # the fused, prepared and table paths stand in for the registered kernels; while KERNELS holds anything else (a
    # kernel replaced by a test or a user), every op goes through KERNELS
    fast = trace is None and kernels_as_registered()
    paths = _Paths(plan.inplace, plan.fused, plan.tables, plan.groups, plan.solo, plan.islands, {}) if fast \
        else _Paths(set(), {}, set(), {}, set(), {}, {})
    # every constant already in the environment (the usual case): walk only the other ops (a CONST frees nothing)
    steps = plan.body if trace is None and all_views else list(enumerate(plan.order))
    for i, op in steps:
        if op.id in skip:
            if trace is None:
                for vid in plan.frees[i]:
                    env.pop(vid, None)
            continue
        if trace is not None and op.opcode == "CONST" and op.id in const_ids:
            view = _const_view(plan, op, precise)
            if view is not None:
                env[op.results[0].id] = trace[op.results[0].name] = view
                continue
        try:
            ins = [env[v.id] for v in op.operands]
        except KeyError:
            v = next(v for v in op.operands if v.id not in env)
            raise ExecutionError(f"operand {v.name} has no value (not produced in this graph)",
                                 op=op_label(op)) from None
        t0 = time.perf_counter() if prof is not None else 0.0
        island = paths.islands.get(op.id)
        if island is not None:
            looked = _run_island(island, env, plan)
            if looked is not None:
                for v, a in zip(island.exposed, looked):
                    env[v.id] = a
                skip.update(m.id for m in island.ops[1:])
                if prof is not None:
                    key = "+".join([op.name, *(m.opcode for m in island.ops[1:])]) + f"#{op.id}"
                    prof[key] = prof.get(key, 0.0) + time.perf_counter() - t0
                for vid in plan.frees[i]:
                    env.pop(vid, None)
                continue
        outs, partner, members = _evaluate(op, ins, env, plan, paths, skip, precise)
        if prof is not None:
            key = f"{op.name}#{op.id}"
            if members is not None:
                key = f"{op.name}+RESCALE+{members[2].name}+RESCALE#{op.id}"
            elif partner is not None:
                key = f"{op.name}+{partner.opcode}#{op.id}"
            prof[key] = prof.get(key, 0.0) + time.perf_counter() - t0
        for r, a in zip(op.results, outs):
            env[r.id] = a
            if trace is not None:
                trace[r.name] = a
        if trace is None:
            for vid in plan.frees[i]:
                env.pop(vid, None)
    out = []
    for v in graph.outputs:
        if v.id not in env:
            raise ExecutionError(f"graph output {v.name} is never computed")
        out.append(env[v.id])
    return out


def _bind_consts(plan: _Plan, env: dict[int, np.ndarray], precise: bool) -> tuple[set[int], bool]:
    """Put the constants' values in ``env`` before any op runs (a CONST reads nothing, so order does not matter):
    the view made on an earlier run of this plan when it is still of the op's values (see _const_view).  Returns
    the CONST op ids to skip and whether every constant is in place."""
    views = plan.views
    n_views = 0
    for op in plan.consts:
        hit = views.get(op.id)
        if hit is not None and not precise and hit[0] is op.attrs.get("values"):
            env[op.results[0].id] = hit[1]
            n_views += 1
            continue
        view = _const_view(plan, op, precise)
        if view is not None:
            env[op.results[0].id] = view
            n_views += 1
    all_views = n_views == len(plan.consts)
    skip = set() if all_views else {op.id for op in plan.consts if op.results[0].id in env}
    return skip, all_views


class _Paths(NamedTuple):
    """The plan's fast paths one run of :func:`run_graph` takes (all empty while tracing or while a kernel is
    replaced)."""

    inplace: set[int]
    fused: dict[int, Operation]
    tables: set[int]
    groups: dict[int, list[Operation]]
    solo: set[int]
    islands: dict[int, Island]
    #: value id -> (its zero-bordered array, the border) for the depthwise that reads it (see _run_fused_clamp)
    bordered: dict[int, tuple[np.ndarray, Any]]


def _evaluate(op: Operation, ins: list[np.ndarray], env: dict[int, np.ndarray], plan: _Plan, paths: _Paths,
              skip: set[int], precise: bool) -> tuple[list[np.ndarray], Operation | None, list[Operation] | None]:
    """``op``'s results: by a fused group or pair when one applies (the last op's result goes into ``env`` and the
    ops after ``op`` into ``skip``; returns no results, the partner op and the group), else by the in-place, table
    or prepared path, else by its kernel (returns the results, None, None)."""
    partner = paths.fused.get(op.id)
    done = None
    members = paths.groups.get(op.id)
    if members is not None:
        done = _run_group(members, env, plan)
        if done is not None:
            partner = members[-1]
            skip.update(m.id for m in members[1:])
    elif partner is not None:
        if partner.opcode == "RESCALE":
            done = _run_fused(op, ins, partner, env, plan)
        elif partner.opcode == "ADD":
            done = _run_fused_add(op, ins, partner, env, plan)
        else:
            done = _run_fused_clamp(op, ins, partner, plan, paths.bordered)
    if done is not None:
        assert partner is not None
        env[partner.results[0].id] = done
        skip.add(partner.id)
        return [], partner, members
    if op.id in paths.inplace and ins[0].flags.writeable and ins[0].dtype == np.float32:
        return [clamp_inplace(op, ins)], None, None
    if op.id in paths.tables:
        return [_run_table_rescale(op, ins, plan)], None, None
    if op.id in paths.solo:
        return [_run_fused_clamp(op, ins, None, plan, paths.bordered)], None, None
    return evaluate_op(op, ins, precise), None, None


def run(graph: Graph, inputs: Mapping[str, Any] | Sequence[Any], *, trace: bool = False,
        variables: dict[str, np.ndarray] | None = None, precise: bool = False) -> dict[str, np.ndarray]:
    """Run ``graph`` on ``inputs`` (by input name, or a list in input order).

    Returns the outputs keyed by output value name, in output order.  With
    ``trace=True`` every value of the top-level graph (inputs, intermediates,
    outputs) is returned by value name instead.  ``variables`` (name -> array) holds
    EXT-VARIABLE state and is updated in place, so passing the same dict to several
    runs keeps state across invocations.  ``precise=True`` computes float ops in fp64 (the reference
    model's precise mode); float outputs are then float64 arrays.
    """
    token = PRECISE.set(precise)
    try:
        res, _ = _run(graph, inputs, trace=trace, variables=variables, profile=False)
    finally:
        PRECISE.reset(token)
    return res


def run_with_profile(graph: Graph, inputs: Mapping[str, Any] | Sequence[Any]
                     ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Like :func:`run`, also returning seconds spent per op (``tosa.CONV2D#12`` keys)."""
    res, prof = _run(graph, inputs, trace=False, variables=None, profile=True)
    assert prof is not None
    return res, prof


_SIZED: weakref.WeakSet[Graph] = weakref.WeakSet()


def check_sizes(graph: Graph) -> None:
    """Refuse a graph with a tensor larger than the memory budget, before any kernel allocates it.

    Every input and every op result (also in COND_IF / WHILE_LOOP regions) is checked by its declared type."""
    if graph in _SIZED:
        return

    def visit(g: Graph) -> None:
        values = list(g.inputs) + [r for op in g.ops.values() for r in op.results]
        for v in values:
            too_big = tensor_size_problem(v.type.shape, element_bits(v.dtype), LEVEL_NONE)
            if too_big is not None:
                raise ExecutionError(f"{v.name}: {too_big}", op=op_label(v.producer) if v.producer else None)
        for op in g.ops.values():
            for region in op.regions:
                visit(region)

    visit(graph)
    _SIZED.add(graph)


def _run(graph: Graph, inputs: Mapping[str, Any] | Sequence[Any], *, trace: bool,
         variables: dict[str, np.ndarray] | None, profile: bool
         ) -> tuple[dict[str, np.ndarray], dict[str, float] | None]:
    check_sizes(graph)
    state = ExecState(variables=variables if variables is not None else {})
    state.trace = {} if trace else None
    state.profile = {} if profile else None
    token = _STATE.set(state)
    try:
        outs = run_graph(graph, inputs, state)
    finally:
        _STATE.reset(token)
    if trace:
        assert state.trace is not None
        return state.trace, state.profile
    return {v.name: a for v, a in zip(graph.outputs, outs)}, state.profile


# ------------------------------------------------------------------------------------ checked runs
#: levels by name (Table 4, spec 1.7 Levels)
def _level_table(level: str | None) -> dict[str, int] | None:
    if level is None:
        return None
    key = str(level).strip().upper().replace("_", "").replace("LEVEL", "")
    if key in ("8K", "EIGHTK"):
        return profiles.LEVEL_8K
    if key == "NONE":
        return profiles.LEVEL_NONE
    raise ValueError(f"unknown TOSA level {level!r} (use '8K', 'NONE' or None)")


@dataclass
class RunResult:
    """The outcome of :func:`run_checked`: the spec's graph result (spec 1.10.1) and the outputs.

    ``status`` is ``"VALID"`` (``outputs`` holds every graph output), ``"ERROR"`` (an ERROR_IF held, or the graph,
    an attribute or an input does not meet an operator's requirements) or ``"UNPREDICTABLE"`` (a REQUIRE or a
    LEVEL_CHECK failed).  For the last two ``message`` says which condition failed and ``op`` names the operator
    (``tosa.CONV2D#12 (location) -> result``) when one is to blame; ``tensor`` names an input when one is.
    """

    status: str
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    message: str = ""
    op: str | None = None
    tensor: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == VALID

    def __str__(self) -> str:
        where = "".join(f" [{k} {v}]" for k, v in (("op", self.op), ("tensor", self.tensor)) if v)
        return self.status + (f": {self.message}{where}" if self.message else "")


#: catalogue checks that stand for a REQUIRE of the spec (unpredictable, not an error)
_REQUIRE_CHECKS = ("shift values must be in [2, 62]", "multiplier values must be >= 0")


def plain_message(e: Exception) -> str:
    """The message of a ConversionError without the ``[file …; op …; tensor …]`` suffix it appends."""
    text = str(e)
    where = [f"{k} {v}" for k, v in (("file", getattr(e, "file", None)), ("op", getattr(e, "op", None)),
                                       ("tensor", getattr(e, "tensor", None))) if v]
    return text.removesuffix(f" [{'; '.join(where)}]") if where else text


def _walk_ops(graph: Graph) -> list[Operation]:
    ops: list[Operation] = []
    for op in graph.topological_order():
        ops.append(op)
        for region in op.regions:
            ops.extend(_walk_ops(region))
    return ops


def static_check(graph: Graph, level: str | None = "8K", dynamic: bool = True) -> RunResult | None:
    """The checks that need no input data: every op against the catalogue (operand/result counts, ranks, type
    rows, attributes, zero points, shape rules: ERROR_IFs of tosa_execute_graph, spec 2.2 Operator Graphs) and,
    when ``level`` is given, the LEVEL_CHECKs of its limits.  Returns None when the graph passes, else the failing
    result.

    ``dynamic`` accepts run-time values for compile-time-constant operands (EXT-DYNAMIC).
    """
    for op in _walk_ops(graph):
        if op.dialect != "tosa":
            return RunResult(ERROR, message=f"{op.name} is not a TOSA operator", op=op_label(op))
        try:
            validation.validate_op(op, dynamic=dynamic)
        except InvalidGraphError as e:
            msg = plain_message(e)
            status = UNPREDICTABLE if any(k in msg for k in _REQUIRE_CHECKS) else ERROR
            return RunResult(status, message=msg, op=op_label(op), tensor=e.tensor)
    table = _level_table(level)
    if table is not None:
        # nesting depth is an ERROR_IF checked while running (ExecState.max_nesting), not a LEVEL_CHECK
        msgs = [m for m in profiles.level_violations(graph, table) if "MAX_NESTING" not in m]
        # a rank above MAX_RANK also breaks the operator's argument table ("rank 0 to MAX_RANK"), an ERROR_IF
        # of tosa_execute_graph (spec 2.2 Operator Graphs) met before the operator's LEVEL_CHECK: stop there, as
        # Arm's model does
        ranks = [m for m in msgs if "MAX_RANK" in m]
        if ranks or msgs:
            first = ranks[0] if ranks else msgs[0]
            where, _, what = first.partition(": ")
            more = f" (and {len(msgs) - 1} more)" if len(msgs) > 1 else ""
            if ranks:
                return RunResult(ERROR, message=f"rank above MAX_RANK of level {level}: {what}{more}", op=where)
            return RunResult(UNPREDICTABLE, message=f"LEVEL_CHECK failed at level {level}: {what}{more}", op=where)
    return None


def run_checked(graph: Graph, inputs: Mapping[str, Any] | Sequence[Any], level: str | None = "8K", *,
                precise: bool = False, variables: dict[str, np.ndarray] | None = None,
                validate: bool = True, dynamic: bool = True, trace: bool = False) -> RunResult:
    """Run ``graph`` like the spec's ``tosa_execute_graph`` and return its graph result instead of raising.

    ``level``: ``"8K"`` (the default), ``"NONE"`` (the level-none maxima) or None (no LEVEL_CHECKs).  With
    ``validate`` every op is first checked against the catalogue (:func:`static_check`).  Execution stops at the
    first failed ERROR_IF (status ERROR, which the spec accepts even for a graph that is also unpredictable,
    spec 4.3) or REQUIRE (status UNPREDICTABLE).  Inputs of the wrong name, dtype or shape are an ERROR naming the
    tensor (spec 2.2 Operator Graphs).  With ``trace`` the outputs hold every value of the top-level graph by name (as
    :func:`run` with ``trace=True``).  :func:`run` keeps raising :class:`ExecutionError` instead.
    """
    table = _level_table(level)
    if validate:
        bad = static_check(graph, level, dynamic=dynamic)
        if bad is not None:
            return bad
    state = ExecState(variables=variables if variables is not None else {})
    state.trace = {} if trace else None
    if table is not None:
        state.max_nesting = table["MAX_NESTING"]
    p_token = PRECISE.set(precise)
    s_token = _STATE.set(state)
    try:
        outs = run_graph(graph, inputs, state)
    except UnpredictableError as e:
        return RunResult(UNPREDICTABLE, message=e.message, op=e.op, tensor=e.tensor)
    except ExecutionError as e:
        return RunResult(e.status, message=e.message, op=e.op, tensor=e.tensor)
    except InputError as e:
        return RunResult(ERROR, message=plain_message(e), tensor=e.tensor)
    except ConversionError as e:
        return RunResult(ERROR, message=plain_message(e), op=e.op, tensor=e.tensor)
    finally:
        _STATE.reset(s_token)
        PRECISE.reset(p_token)
    if state.trace is not None:
        return RunResult(VALID, state.trace)
    return RunResult(VALID, {v.name: a for v, a in zip(graph.outputs, outs)})
