"""Control flow: ``tfl.while``, ``tfl.if``, ``tfl.call``, ``tfl.call_once`` (and the resource variables they set up).

The subgraphs of these ops (``op.regions``, TFLite subgraphs) are legalized by **inlining**: every op of the region is
cloned into a target graph, with the region's inputs bound to the caller's values, and legalized at once with the
ordinary rules (so nested control flow recurses through these same rules).  A region graph is shared by every op
that references it and is never modified.

``tfl.while``
    *Unrolled* by default when its trip count is known at conversion time and at most ``max_unroll``
    (``ConvertOptions.max_unroll``, ``tf2tosa.convert(..., max_unroll=N)``; default 1024, 0 turns unrolling
    off) - but a loop whose body runs hybrid ops (int8 weights, float activations: :func:`.tfl_hybrid.keeps_loop`)
    stays a ``WHILE_LOOP`` unless ``max_unroll`` is given or the target has no EXT-CONTROLFLOW.
    :func:`trip_count` first simulates only the loop-carried values the condition depends on (the counters and
    bounds, which must start as constants: every Keras 3 ``LSTM``/``GRU``/``SimpleRNN`` loop counts from 0 to
    the sequence length).  Then cond and body are inlined iteration by iteration with constant folding, so inside
    each copy the counters are constants and ``GATHER``/``SLICE`` on the time axis and the slice + concatenation
    "tensor-list write" get static indices: no EXT-CONTROLFLOW, no EXT-DYNAMIC, the graph stays PRO-FP / PRO-INT.
    A zero-size slice (the empty head or tail of that write) is tracked as an empty tensor and dropped from the
    concatenation that consumes it (TOSA has no empty tensors, spec 1.11.1 Tensors).  Equal constants the copies
    re-derive (the
    transformed weights) are merged.

    Otherwise (data-dependent trip count, or more than ``max_unroll`` iterations) it becomes a TOSA ``WHILE_LOOP``
    (EXT-CONTROLFLOW) whose cond/body regions are the subgraphs legalized for the caller's static types (a dynamic
    batch takes the caller's size): each loop-carried value must keep its type through the body (spec 2.16.2 WHILE_LOOP)
    and the cond region returns one bool (any rank, size 1: spec 2.16.2 WHILE_LOOP).  A body that needs data-dependent
    slicing cannot be expressed that way (TOSA SLICE starts/sizes are compile-time constants and shapes static);
    the op is then reported unsupported with the body op's own reason.

``tfl.if``
    A constant condition inlines the branch taken; otherwise ``COND_IF`` (EXT-CONTROLFLOW) with the then/else
    subgraphs legalized for the operands' types; both branches must give the same static types (spec 2.16.1 COND_IF).

``tfl.call``
    The callee subgraph is inlined.

``tfl.call_once`` / ``tfl.var_handle`` / ``tfl.read_variable`` / ``tfl.assign_variable``
    (also the TensorFlow frontend's kept variables, :mod:`.tf_control`: ``tf.VarHandleOp`` handles whose initial
    values are ``graph.source.variable_values``, assigned by ``tf.AssignVariableOp`` and its add/sub forms.)
    The session-initialisation subgraph is *resolved at conversion time*: it may only assign constants to resource
    variables (anything else is reported); those become the variables' initial values and ``call_once`` itself
    disappears.  A variable nothing assigns outside that subgraph is read as a ``tosa.CONST`` of its initial value
    (the TFLite converter usually freezes such variables itself).  A variable the model assigns keeps its state
    across invocations, like in LiteRT: a ``VARIABLE`` declaration (with the initial value, in the top-level graph),
    ``VARIABLE_READ`` and ``VARIABLE_WRITE`` (EXT-VARIABLE; fp16, fp32 or i8 tensors, spec 2.17.1 VARIABLE).
    int16/int32 state, which TOSA 1.0 cannot declare, is kept as its bytes in an i8 variable of shape
    ``[*shape, 2 or 4]`` (byte j < n-1: ``((x >> 8j) & 255) - 128``; the last: the signed top byte), encoded before
    the write and decoded after the read with PRO-INT shifts, masks and CASTs: exact for every value.  uint8 state
    (TFLite's uint8 ring buffers) is stored as ``u - 128`` in an i8 variable (the unsigned_io pass).  The IR
    orders ops
    by data dependencies only, so the legalization keeps the order safe by construction: a read after a write
    takes the written value, and only the last write of an invocation is emitted; an assigned variable used inside
    a COND_IF / WHILE_LOOP region is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidGraphError, NotYet, Unsupported
from ..ir import DType, Graph, Operation, TensorType, Value
from ..ir.symdim import has_symbols
from ..tosa.builder import Builder
from ..tosa.constants import tosa_constant
from .driver import failure_reason, legalize_op, missing_rule
from .registry import legalize
from .tfl_hybrid import keeps_loop, kept_loop

_PASSIVE = frozenset({"tosa.CONST", "tosa.CONST_SHAPE"})


def _clean(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_")
    return s or "t"


def _short(source: str) -> str:
    """A value name from the last two components of a TF tensor name (``lstm_cell_1_MatMul_1``)."""
    return _clean("_".join(source.split(";")[0].split("/")[-2:]))


def _region(op: Operation, field: str, position: int) -> Graph:
    """The region referenced by ``op.attrs[field]`` (matched by subgraph index, else by position)."""
    want = op.attrs.get(field)
    for g in op.regions:
        if want is not None and g.source.subgraph_index == want:
            return g
    if position < len(op.regions):
        return op.regions[position]
    raise Unsupported(f"{field} {want} has no subgraph")


# ------------------------------------------------------------------------------------------------ the inliner
class _Empty:
    """A zero-size tensor produced inside a region (TOSA has none); only a concatenation may consume it."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape


class Inliner:
    """Clones region ops into ``graph`` and legalizes them one by one.

    Constants of a region are made once per target graph (an unrolled loop shares its weights across iterations).
    """

    def __init__(self, b: Builder, graph: Graph, fold: bool, tag: str = "") -> None:
        self.outer = b
        self.graph = graph
        self.fold = fold
        #: appended to the names of the values made (``_s3``: step 3 of an unrolled loop)
        self.tag = tag
        self._consts: dict[tuple[int, int], Value] = {}
        self._no_value: Value | None = None

    # ------------------------------------------------------------------ helpers
    def _builder(self, location: str, hint: str | None) -> Builder:
        nb = Builder(self.graph, location=location, fold=self.fold, context=self.outer.context)
        nb.name_hint = hint
        return nb

    def _const(self, region: Graph, rop: Operation) -> Value:
        key = (id(region), rop.id)
        got = self._consts.get(key)
        if got is not None:
            return got
        if rop.attrs.get("sparsity") is not None:
            raise Unsupported(f"sparse constant {rop.result.source or rop.result.name} inside a subgraph")
        r = rop.result
        try:
            arr, t = tosa_constant(np.asarray(rop.attrs["values"]), r.type)
        except ValueError:
            raise Unsupported(f"constant {r.source or r.name} of type {r.type.dtype.value} has no TOSA type") from None
        if not t.is_static:
            t = t.with_shape(arr.shape)
        op = self.graph.add_op("tosa.CONST", [], [t], {"values": arr}, [_clean(r.source or r.name)],
                               location=rop.location)
        op.result.source = r.source
        self._consts[key] = op.result
        return op.result

    def _get_no_value(self) -> Value:
        if self._no_value is None:
            self._no_value = self.graph.add_op("tfl.no_value", [], [TensorType((), DType.FP32)], {}, ["no_value"],
                                               location="NO_VALUE").result
        return self._no_value

    @staticmethod
    def _slice_shape(op: Operation, ins: list[Value | _Empty]) -> tuple[int, ...] | None:
        """The result shape of a ``tfl.slice`` with constant begin/size on a static input, else None."""
        x = ins[0]
        if isinstance(x, _Empty) or not x.type.is_static or len(ins) < 3:
            return None
        b, s = ins[1], ins[2]
        if isinstance(b, _Empty) or isinstance(s, _Empty):
            return None
        begin, size = b.const(), s.const()
        if begin is None or size is None:
            return None
        shape = x.type.static_shape
        begin_l, size_l = [int(v) for v in begin.reshape(-1)], [int(v) for v in size.reshape(-1)]
        if len(begin_l) != len(shape) or len(size_l) != len(shape):
            return None
        return tuple(d - bb if z == -1 else z for d, bb, z in zip(shape, begin_l, size_l))

    # --------------------------------------------------------------------- main
    def inline(self, region: Graph, args: Sequence[Value], where: str) -> list[Value]:
        """Legalize the ops of ``region`` into the target graph with its inputs bound to ``args``."""
        got = self.inline_some(region, args, where, range(len(region.outputs)))
        return [got[k] for k in range(len(region.outputs))]

    def inline_some(self, region: Graph, args: Sequence[Value], where: str, keep: Iterable[int],
                    side_effects: bool = True) -> dict[int, Value]:
        """Like :meth:`inline`, legalizing only the ops that outputs ``keep`` depend on (and, with
        ``side_effects``, the side-effecting ops)."""
        if len(args) != len(region.inputs):
            raise Unsupported(f"{where}: subgraph {region.name} takes {len(region.inputs)} inputs, "
                              f"got {len(args)}")
        keep = sorted(set(keep))
        live = _live_ops(region, keep, side_effects)
        env: dict[int, Value | _Empty] = {v.id: a for v, a in zip(region.inputs, args)}
        for name, info in region.variables.items():
            self.graph.variables.setdefault(name, info)
        for rop in region.topological_order():
            if rop.id not in live:
                continue
            if rop.name in ("tfl.const", "tosa.CONST"):
                env[rop.result.id] = self._const(region, rop)
                continue
            if rop.name == "tfl.no_value":
                env[rop.result.id] = self._get_no_value()
                continue
            ins: list[Value | _Empty] = [env[v.id] for v in rop.operands]
            label = f"{where}/{rop.location or rop.name}"
            outs = self._legalize(region, rop, ins, label)
            for r, v in zip(rop.results, outs):
                env[r.id] = v
        result: dict[int, Value] = {}
        for k in keep:
            got = env[region.outputs[k].id]
            if isinstance(got, _Empty):
                raise Unsupported(f"{where}: subgraph {region.name} returns an empty tensor")
            result[k] = got
        return result

    def _legalize(self, region: Graph, rop: Operation, ins: list[Value | _Empty],
                  label: str) -> list[Value | _Empty]:
        name = rop.name
        if name == "tfl.slice":
            shape = self._slice_shape(rop, ins)
            if shape is not None and 0 in shape:
                return [_Empty(shape)]
        operands = [v for v in ins if isinstance(v, Value)]
        if len(operands) != len(ins):
            if name != "tfl.concatenation":
                raise Unsupported(f"{label}: {name} reads an empty tensor (TOSA tensors have no zero-size dims)")
            if not operands:
                raise Unsupported(f"{label}: concatenation of empty tensors only")
            act = rop.attrs.get("fused_activation_function") or "NONE"
            if len(operands) == 1 and act == "NONE" and rop.result.type.quant == operands[0].type.quant:
                return [operands[0]]
        if name.startswith("tosa."):
            op = self.graph.add_op(name, operands, [r.type for r in rop.results], dict(rop.attrs),
                                   [r.name for r in rop.results], list(rop.regions), rop.location)
            return list(op.results)
        missing = missing_rule(rop)
        if missing is not None:
            raise Unsupported(f"{label}: {name}: {missing}")
        clone = self.graph.add_op(name, operands, [r.type for r in rop.results], dict(rop.attrs),
                                  [f"{r.name}_src" for r in rop.results], list(rop.regions), label)
        for r, c in zip(rop.results, clone.results):
            c.source = r.source
        src = rop.results[0].source if rop.results else None
        nb = self._builder(label, _short(src) + self.tag if src else None)
        try:
            new = legalize_op(nb, clone, exact_results=False)
        except (Unsupported, InvalidGraphError) as e:
            if not any(self.graph.uses(r) for r in clone.results):
                self.graph.remove_op(clone)
            why = f"{label}: {name}: {failure_reason(e)}"
            raise (e.reworded(why) if isinstance(e, Unsupported) else Unsupported(why)) from None
        if len(new) != len(rop.results):  # a malformed model: an op with more (or fewer) results than it defines
            raise Unsupported(f"{label}: {name}: malformed: {len(rop.results)} result(s), the op defines {len(new)}")
        if not any(v is r for v in new for r in clone.results):
            self.graph.remove_op(clone)  # nothing refers to the clone's results: they were never handed out
        return list(new)


def _live_ops(region: Graph, outputs: Sequence[int], side_effects: bool = True) -> set[int]:
    """Ids of the ops of ``region`` that its outputs ``outputs`` depend on (and the side-effecting ops)."""
    if any(not 0 <= k < len(region.outputs) for k in outputs):
        raise Unsupported(f"region {region.name} has {len(region.outputs)} outputs; output {max(outputs)} is used")
    stack = [region.outputs[k].producer for k in outputs]
    if side_effects:
        stack += [op for op in region.ops.values() if op.attrs.get("side_effect")]
    live: set[int] = set()
    while stack:
        op = stack.pop()
        if op is None or op.id in live:
            continue
        live.add(op.id)
        stack.extend(v.producer for v in op.operands)
    return live


def _input_deps(region: Graph, outputs: Sequence[int]) -> set[int]:
    """Indices of the inputs of ``region`` that its outputs ``outputs`` depend on."""
    live = _live_ops(region, outputs, side_effects=False)
    pos = {v.id: k for k, v in enumerate(region.inputs)}
    deps = {pos[region.outputs[k].id] for k in outputs if region.outputs[k].id in pos}
    for op in region.ops.values():
        if op.id in live:
            deps.update(pos[v.id] for v in op.operands if v.id in pos)
    return deps


def _rollback(graph: Graph, before: set[int]) -> None:
    """Remove every op added to ``graph`` since ``before`` (its op ids) was taken."""
    new = [op for op in graph.topological_order() if op.id not in before]
    for op in reversed(new):
        graph.discard_op(op)
        for r in op.results:
            graph._names.discard(r.name)


def _dedupe_constants(graph: Graph, before: set[int]) -> dict[int, Value]:
    """Merge the equal constants created since ``before`` (an unrolled body re-derives the same transformed weights
    in every iteration); returns the replacements (dropped value id -> kept value)."""
    seen: dict[tuple[Any, ...], Value] = {}
    replaced: dict[int, Value] = {}
    for op in graph.topological_order():
        if op.id in before or op.name not in _PASSIVE or len(op.results) != 1:
            continue
        r = op.result
        arr = np.ascontiguousarray(op.attrs["values"])
        key = (op.name, r.dtype, tuple(r.shape), repr(r.type.quant), arr.dtype.str, arr.shape, arr.tobytes())
        first = seen.setdefault(key, r)
        if first is r:
            continue
        graph.replace_all_uses(r, first)
        replaced[r.id] = first
        graph.remove_op(op)
    return replaced


def _slice_of_concat(b: Builder, op: Operation) -> Value | None:
    """SLICE of a CONCAT that keeps whole extents off the concat axis: the overlapping pieces, sliced."""
    x = op.operands[0]
    cat = x.producer
    if cat is None or cat.name != "tosa.CONCAT" or not x.type.is_static:
        return None
    start, size = op.operands[1].const(), op.operands[2].const()
    if start is None or size is None:
        return None
    axis = int(cat.attrs["axis"])
    shape = x.type.static_shape
    st, sz = [int(v) for v in start.reshape(-1)], [int(v) for v in size.reshape(-1)]
    if any(st[d] != 0 or sz[d] != shape[d] for d in range(len(shape)) if d != axis):
        return None
    lo, hi = st[axis], st[axis] + sz[axis]
    parts: list[Value] = []
    off = 0
    for piece in cat.operands:
        n = piece.type.static_shape[axis]
        a, e = max(lo, off), min(hi, off + n)
        if a < e:
            begin = [a - off if d == axis else 0 for d in range(len(shape))]
            extent = [e - a if d == axis else shape[d] for d in range(len(shape))]
            parts.append(b.slice(piece, begin, extent))
        off += n
    if not parts:
        return None
    new = parts[0] if len(parts) == 1 else b.emit("CONCAT", parts, {"axis": axis}, quant=op.result.type.quant).result
    return new if new.type == op.result.type else None


def _flatten_concat(b: Builder, op: Operation, limit: int) -> Value | None:
    """CONCAT whose operands are CONCATs on the same axis: one CONCAT of their operands (at most ``limit``)."""
    axis = int(op.attrs["axis"])
    flat: list[Value] = []
    changed = False
    ops = list(op.operands)
    for k, v in enumerate(ops):
        p = v.producer
        rest = len(ops) - k - 1
        if p is not None and p.name == "tosa.CONCAT" and int(p.attrs["axis"]) == axis \
                and all(u.type.quant == v.type.quant for u in p.operands) \
                and len(flat) + len(p.operands) + rest <= limit:
            flat.extend(p.operands)
            changed = True
        else:
            flat.append(v)
    if not changed:
        return None
    new = b.emit("CONCAT", flat, {"axis": axis}, quant=op.result.type.quant).result
    return new if new.type == op.result.type else None


def _simplify_list_writes(graph: Graph, before: set[int]) -> dict[int, Value]:
    """The tensor-list write of an unrolled loop (``concat(slice(buf, :t), step_t, slice(buf, t+1:))``) as one
    CONCAT of the step outputs: slices of CONCATs become the pieces, nested CONCATs are flattened (up to the 8K
    level's MAX_TENSOR_LIST_SIZE).  Without this every step copies the whole buffer.  Returns the replacements."""
    from ..tosa.profiles import LEVEL_8K

    limit = LEVEL_8K["MAX_TENSOR_LIST_SIZE"]
    replaced: dict[int, Value] = {}
    for op in graph.topological_order():
        if op.id in before or op.id not in graph.ops or len(op.results) != 1:
            continue
        b = Builder(graph, location=op.location, fold=True)
        b.name_hint = op.result.name
        if op.name == "tosa.SLICE":
            new = _slice_of_concat(b, op)
        elif op.name == "tosa.CONCAT":
            new = _flatten_concat(b, op, limit)
        else:
            continue
        if new is not None and new is not op.result:
            graph.replace_all_uses(op.result, new)
            replaced[op.result.id] = new
    return replaced


def _region_graph(b: Builder, region: Graph, types: Sequence[TensorType], where: str, name: str) -> Graph:
    """A standalone TOSA graph: ``region`` legalized for inputs of ``types``."""
    g = Graph(name)
    b.context.passes.of(g).resource_variables = _variables(b)  # one record of the model's variables
    args = [g.add_input(v.name, t) for v, t in zip(region.inputs, types)]
    for a, v in zip(args, region.inputs):
        a.source = v.source
    inl = Inliner(b, g, fold=b.context.fold)
    g.outputs = inl.inline(region, args, where)
    g.remove_dead_ops()
    for op in g.topological_order():
        if not op.name.startswith("tosa."):
            raise Unsupported(f"{where}: {op.name} left in subgraph {region.name}")
        for r in op.results:
            if not r.type.is_static or not r.dtype.is_tosa:
                raise Unsupported(f"{where}: value {r.source or r.name} of {region.name} has type {r.type}, "
                                  "not a static TOSA tensor")
    _guard_outputs(g)
    return g


def _guard_outputs(g: Graph) -> None:
    """Graph outputs that are inputs, constants or repeated get their own IDENTITY (one tensor per output)."""
    seen: set[int] = set()
    outs: list[Value] = []
    for v in g.outputs:
        if v.id in seen or v.producer is None or v.is_const:
            v = g.add_op("tosa.IDENTITY", [v], [v.type], {}, [v.name + "_out"], location="output").result
        seen.add(v.id)
        outs.append(v)
    g.outputs = outs


def _tosa_operand(b: Builder, v: Value, where: str) -> Value:
    from .lowering.layout import data_operand

    if not v.type.is_static:
        raise Unsupported(f"{where}: operand {v.source or v.name} has a dynamic shape {list(v.shape)}")
    return data_operand(b, v)


def _same_types(a: Sequence[TensorType], c: Sequence[TensorType]) -> bool:
    return len(a) == len(c) and all(tuple(x.shape) == tuple(y.shape) and x.dtype is y.dtype for x, y in zip(a, c))


# --------------------------------------------------------------------------------------------------- tfl.while
def trip_count(b: Builder, cond: Graph, body: Graph, vals: Sequence[Value], limit: int) -> int | None:
    """The number of iterations when it is known at conversion time (``limit + 1`` when it exceeds ``limit``), else
    None.

    Only the loop-carried values the condition depends on (through the body, transitively: the counters and
    bounds) are simulated, in a scratch graph with constant folding; they must start as constants.
    """
    need = set(_input_deps(cond, [0]))
    todo = list(need)
    while todo:
        for k in _input_deps(body, [todo.pop()]):
            if k not in need:
                need.add(k)
                todo.append(k)
    if any(not 0 <= k < len(vals) for k in need):
        raise Unsupported(f"while: its condition reads loop value {max(need)}, the op carries {len(vals)}")
    if any(vals[k].const() is None for k in need):
        return None
    g = Graph("trip_count")
    cur: list[Value] = []
    for k, v in enumerate(vals):
        if k in need:
            cur.append(g.add_op("tosa.CONST", [], [v.type], {"values": np.asarray(v.const())}, [v.name]).result)
        else:
            cur.append(g.add_input(v.name, v.type))
    inl = Inliner(b, g, fold=True)
    try:
        for it in range(limit + 1):
            flag = inl.inline_some(cond, cur, "trip count", [0], side_effects=False)[0].const()
            if flag is None or flag.size != 1:
                return None
            if not bool(flag.reshape(-1)[0]):
                return it
            new = inl.inline_some(body, cur, "trip count", need, side_effects=False)
            cur = [new.get(k, v) for k, v in enumerate(cur)]
    except Unsupported:
        return None  # the real conversion reports it
    return limit + 1


def _try_unroll(b: Builder, op: Operation, cond: Graph, body: Graph, vals: list[Value],
                limit: int) -> list[Value] | None:
    """Inline cond/body while the condition folds to a constant; None (and nothing added) when it does not."""
    g = b.graph
    before = set(g.ops)
    inl = Inliner(b, g, fold=True)  # unrolling relies on folding the counters
    where = op.location or op.name
    try:
        for it in range(limit + 1):
            inl.tag = f"_s{it}"
            c = inl.inline(cond, vals, f"{where}/cond#{it}")
            if len(c) != 1:
                raise Unsupported(f"{where}: cond subgraph returns {len(c)} values")
            flag = c[0].const()
            if flag is None:
                _rollback(g, before)
                return None
            if flag.size != 1:
                raise Unsupported(f"{where}: cond subgraph returns {flag.size} values")
            if not bool(flag.reshape(-1)[0]):
                for fix in (_simplify_list_writes, _dedupe_constants):
                    merged = fix(g, before)
                    vals = [merged.get(v.id, v) for v in vals]
                return vals
            if it == limit:
                break
            vals = inl.inline(body, vals, f"{where}/body#{it}")
    except Unsupported:
        _rollback(g, before)
        raise
    _rollback(g, before)
    return None


def _while_loop(b: Builder, op: Operation, cond: Graph, body: Graph, vals: list[Value]) -> list[Value]:
    where = op.location or op.name
    ins = [_tosa_operand(b, v, where) for v in vals]
    types = [TensorType(v.type.static_shape, v.dtype, v.type.quant) for v in ins]
    cg = _region_graph(b, cond, types, f"{where}/cond", cond.name)
    if len(cg.outputs) != 1 or cg.outputs[0].dtype is not DType.BOOL or cg.outputs[0].type.size != 1:
        raise Unsupported(f"{where}: cond subgraph must return one bool value (S10601-10602), returns "
                          f"{[str(v.type) for v in cg.outputs]}")
    bg = _region_graph(b, body, types, f"{where}/body", body.name)
    got = [v.type for v in bg.outputs]
    if not _same_types(got, types):
        diffs = [f"{k}: {t} -> {u}" for k, (t, u) in enumerate(zip(types, got)) if str(t) != str(u)]
        raise Unsupported(f"{where}: loop-carried values change type in the body ({'; '.join(diffs)}); TOSA "
                          "WHILE_LOOP needs equal types (S10598-10599) and the trip count is not static "
                          "(cannot unroll)")
    wl = b.emit("WHILE_LOOP", ins, regions=[cg, bg])
    _validate_regions(wl)
    return list(wl.results)


def _validate_regions(op: Operation) -> None:
    from ..tosa import validation

    try:
        validation.validate_op(op)
    except InvalidGraphError as e:
        raise Unsupported(f"{op.location}: {e}") from None


@legalize("tfl.while")
def while_(b: Builder, op: Operation) -> list[Value]:
    """Unrolled when the trip count folds to a constant (≤ max_unroll), else WHILE_LOOP (EXT-CONTROLFLOW)."""
    cond = _region(op, "cond_subgraph_index", 0)
    body = _region(op, "body_subgraph_index", 1)
    vals = list(op.operands)
    if any(has_symbols(c) for c in (v.sym_const() for v in vals) if c is not None):
        raise NotYet("a WHILE whose loop state holds a symbolic size (a loop over a dynamic time axis would be "
                     "unrolled at the sample size; a WHILE_LOOP over symbolic shapes is not implemented)")
    limit = b.context.max_unroll
    if limit > 0 and keeps_loop(b, body):  # a hybrid body: unrolled, each step repeats its quantizations
        try:
            return kept_loop(b, _while_loop(b, op, cond, body, vals), body)
        except Unsupported:
            pass
    n = trip_count(b, cond, body, vals, limit) if limit > 0 else None
    if n is not None and n <= limit:
        out = _try_unroll(b, op, cond, body, vals, limit)
        if out is not None:
            return out
    try:
        return kept_loop(b, _while_loop(b, op, cond, body, vals), body)
    except Unsupported as e:
        why = ("unrolling is off (max_unroll=0)" if limit <= 0 else
               f"more than max_unroll={limit} iterations" if n is not None else
               "the trip count is not known at conversion time")
        raise e.reworded(f"{e.reason} [as a WHILE_LOOP: not unrolled, {why}]") from None


# ------------------------------------------------------------------------------------------------------ tfl.if
@legalize("tfl.if", arity=1, result_optional=True)
def if_(b: Builder, op: Operation) -> list[Value]:
    """A constant condition inlines the branch taken; otherwise COND_IF (EXT-CONTROLFLOW)."""
    then_g = _region(op, "then_subgraph_index", 0)
    else_g = _region(op, "else_subgraph_index", 1)
    pred, *args = op.operands
    where = op.location or op.name
    c = pred.const()
    if c is not None:
        if c.size != 1:
            raise Unsupported(f"{where}: condition has {c.size} elements")
        taken = then_g if bool(c.reshape(-1)[0]) else else_g
        return Inliner(b, b.graph, fold=True).inline(taken, args, f"{where}/{taken.name}")
    if pred.dtype is not DType.BOOL:
        raise Unsupported(f"{where}: condition of type {pred.dtype.value} (COND_IF takes bool)")
    if not pred.type.is_static or pred.type.size != 1:
        raise Unsupported(f"{where}: condition of shape {list(pred.shape)} (COND_IF needs one element, S10513)")
    ins = [_tosa_operand(b, v, where) for v in args]
    types = [TensorType(v.type.static_shape, v.dtype, v.type.quant) for v in ins]
    tg = _region_graph(b, then_g, types, f"{where}/then", then_g.name)
    eg = _region_graph(b, else_g, types, f"{where}/else", else_g.name)
    tt, et = [v.type for v in tg.outputs], [v.type for v in eg.outputs]
    if not _same_types(tt, et):
        raise Unsupported(f"{where}: the branches give different types ({[str(t) for t in tt]} vs "
                          f"{[str(t) for t in et]}); COND_IF needs equal static types (S10521)")
    res = [TensorType(t.shape, t.dtype, r.type.quant) for t, r in zip(tt, op.results)]
    ci = b.emit("COND_IF", [pred, *ins], result_types=res, regions=[tg, eg])
    _validate_regions(ci)
    return list(ci.results)


# ---------------------------------------------------------------------------------------------------- tfl.call
@legalize("tfl.call")
def call(b: Builder, op: Operation) -> list[Value]:
    """The callee subgraph inlined."""
    if not op.regions:
        raise Unsupported("call without a subgraph")
    where = op.location or op.name
    return Inliner(b, b.graph, fold=b.context.fold).inline(
        op.regions[0], list(op.operands), f"{where}/{op.regions[0].name}")


# ------------------------------------------------------------------------------------------ resource variables
_VAR_TYPES = (DType.FP16, DType.FP32, DType.INT8)  # VARIABLE's var_t (spec 2.17.1 VARIABLE)
#: ops that make a resource handle: TFLite's VAR_HANDLE, and a variable the TensorFlow frontend kept
_HANDLES = frozenset({"tfl.var_handle", "tf.VarHandleOp"})
#: ops that assign the variable of their first operand
_ASSIGNS = frozenset({"tfl.assign_variable", "tf.AssignVariableOp", "tf.AssignAddVariableOp",
                      "tf.AssignSubVariableOp"})


class _Variables:
    """What the model's CALL_ONCE subgraphs initialise and which variables the other subgraphs assign."""

    def __init__(self, graph: Graph) -> None:
        #: the top-level graph: VARIABLE declarations go there, never into a COND_IF / WHILE_LOOP region
        self.home = graph
        subgraphs: list[Graph] = list(graph.source.subgraphs) or [graph]
        if graph not in subgraphs:
            subgraphs.append(graph)
        init_graphs: list[Graph] = []
        for g in subgraphs:
            for op in g.ops.values():
                if op.name == "tfl.call_once":
                    init_graphs.extend(r for r in op.regions if all(r is not x for x in init_graphs))
        self.initial: dict[str, np.ndarray] = {}
        self.problems: list[str] = []
        for ig in init_graphs:
            for op in ig.topological_order():
                if op.name in ("tfl.const", "tfl.var_handle", "tfl.no_value"):
                    continue
                if op.name != "tfl.assign_variable":
                    self.problems.append(f"init subgraph {ig.name} runs {op.name} (only constant assignments to "
                                         "resource variables are resolved at conversion time)")
                    continue
                if len(op.operands) < 2:
                    self.problems.append(f"init subgraph {ig.name}: assign_variable with {len(op.operands)} "
                                         "operand(s)")
                    continue
                name = _var_name(op.operands[0])
                arr = op.operands[1].const()
                if arr is None:
                    self.problems.append(f"init subgraph {ig.name} assigns variable {name} a computed value")
                    continue
                self.initial[name] = np.asarray(arr)
        # a TensorFlow variable kept by the frontend: its value when the model was loaded
        for name, arr in graph.source.variable_values.items():
            self.initial.setdefault(_clean(name), np.asarray(arr))
        self.assigned: set[str] = set()
        for g in subgraphs:
            if any(g is x for x in init_graphs):
                continue
            for op in g.ops.values():
                if op.name in _ASSIGNS and op.operands:
                    self.assigned.add(_var_name(op.operands[0]))

        #: per variable, the value its last VARIABLE_WRITE (in ``home``) stored and that op
        self.written: dict[str, tuple[Value, Operation]] = {}

    def last_write(self, name: str) -> tuple[Value, Operation] | None:
        got = self.written.get(name)
        if got is None or got[1].id not in self.home.ops:  # (dropped by a rolled-back unrolling)
            return None
        return got

    def check_home(self, b: Builder, name: str) -> None:
        if b.graph is not self.home and name in self.assigned:
            raise Unsupported(f"resource variable {name} is assigned and used inside a COND_IF / WHILE_LOOP region "
                              "(its reads and writes would not stay ordered against the region)")

    def declared(self, name: str) -> bool:
        return any(op.name == "tosa.VARIABLE" and op.attrs.get("name") == name for op in self.home.ops.values())


def _variables(b: Builder) -> _Variables:
    """The record of the model's variables (``GraphPasses.resource_variables`` of ``b.graph``), made once."""
    passes = b.context.passes.of(b.graph)
    state = passes.resource_variables
    if not isinstance(state, _Variables):
        state = passes.resource_variables = _Variables(b.graph)
    return state


def _var_name(handle: Value) -> str:
    p = handle.producer
    if p is None or p.name not in _HANDLES:
        raise Unsupported(f"resource handle {handle.source or handle.name} does not come from VAR_HANDLE")
    container = str(p.attrs.get("container") or "")
    shared = str(p.attrs.get("shared_name") or "") or (p.results[0].source or p.results[0].name)
    return _clean(f"{container}_{shared}" if container else shared)


#: variable types TOSA 1.0 cannot declare, kept as their bytes in an i8 VARIABLE of shape ``[*shape, bytes]``
_BYTE_STATE = {DType.INT16: 2, DType.INT32: 4}


def _storage_type(t: TensorType) -> TensorType:
    """The VARIABLE's type for a value of type ``t``: ``t`` itself, or the i8 byte form of an int16/int32 value."""
    n = _BYTE_STATE.get(t.dtype)
    return TensorType((*t.static_shape, n), DType.INT8) if n else t


def _const_like(b: Builder, rank: int, value: int) -> Value:
    return b.const(np.full((1,) * rank, value, np.int32), DType.INT32, name="c")


def _to_bytes(b: Builder, x: Value) -> Value:
    """int16/int32 ``x`` as i8 ``[*shape, n]``: byte j < n-1 holds ``((x >> 8j) & 255) - 128``, the last byte the
    signed top byte ``x >> 8(n-1)`` (every byte in [-128, 127], so each CAST to i8 is exact)."""
    n = _BYTE_STATE[x.dtype]
    shape = tuple(x.type.static_shape)
    r = len(shape)
    x32 = b.cast(x, DType.INT32)
    parts = []
    for j in range(n):
        v = x32 if j == 0 else b.binary("ARITHMETIC_RIGHT_SHIFT", x32, _const_like(b, r, 8 * j), round=False)
        if j < n - 1:
            v = b.binary("SUB", b.binary("BITWISE_AND", v, _const_like(b, r, 255)), _const_like(b, r, 128))
        parts.append(b.reshape(b.cast(v, DType.INT8), (*shape, 1)))
    return b.concat(parts, axis=r)


def _from_bytes(b: Builder, v: Value, dtype: DType) -> Value:
    """The inverse of :func:`_to_bytes`: OR of ``(byte_j + 128) << 8j`` and the sign-extended top byte shifted."""
    n = _BYTE_STATE[dtype]
    shape = tuple(v.type.static_shape[:-1])
    r = len(shape)
    v32 = b.cast(v, DType.INT32)
    acc: Value | None = None
    for j in range(n):
        p = b.reshape(b.slice(v32, [0] * r + [j], [*shape, 1]), shape)
        if j < n - 1:
            p = b.binary("ADD", p, _const_like(b, r, 128))
        if j:
            p = b.binary("LOGICAL_LEFT_SHIFT", p, _const_like(b, r, 8 * j))
        acc = p if acc is None else b.binary("BITWISE_OR", acc, p)
    assert acc is not None
    return b.cast(acc, dtype)


def _bytes_np(init: np.ndarray, dtype: DType) -> np.ndarray:
    """:func:`_to_bytes` of a constant (the initial value)."""
    n = _BYTE_STATE[dtype]
    x = init.astype(np.int64)
    parts = [((x >> (8 * j)) & 255) - 128 for j in range(n - 1)] + [x >> (8 * (n - 1))]
    return np.stack(parts, axis=-1).astype(np.int8)


def _initial_for(init: np.ndarray, t: TensorType) -> np.ndarray:
    """A CALL_ONCE initial value in the variable's storage type: uint8 data of a variable the unsigned_io pass stored
    as i8 (``u - 128``, zero point -128) is shifted likewise; anything else is converted as is."""
    if init.dtype == np.uint8 and t.dtype is DType.INT8 and t.quant is not None:
        return (init.astype(np.int16) - 128).astype(np.int8)
    return init.astype(t.dtype.np_dtype())


def _declare(b: Builder, state: _Variables, name: str, t: TensorType) -> None:
    if state.declared(name):
        return
    if not t.is_static or (t.dtype not in _VAR_TYPES and t.dtype not in _BYTE_STATE):
        raise Unsupported(f"resource variable {name} of type {t}: TOSA variables hold fp16, fp32 or i8 tensors "
                          "of static shape (spec 2.17.1 VARIABLE; int16/int32 state is kept as i8 bytes)")
    init = state.initial.get(name)
    st = _storage_type(t)
    attrs: dict[str, Any] = {"name": name, "var_shape": list(st.static_shape), "type": st.dtype}
    if init is not None:
        if init.size != t.size:
            raise Unsupported(f"initial value of resource variable {name} has {init.size} elements, not {t.size}")
        value = _initial_for(init, t).reshape(t.static_shape)
        attrs["initial_value"] = _bytes_np(value, t.dtype) if t.dtype in _BYTE_STATE else value
    home = Builder(state.home, location=b.location, fold=False)
    op = home.emit("VARIABLE", [], attrs, result_types=[])
    op.attrs["side_effect"] = True
    # how the stored form maps to the source's values (sessions show and take the source's values)
    if t.dtype in _BYTE_STATE:
        state.home.record.state_encoding[name] = f"{t.dtype.value}-bytes"
    elif t.dtype is DType.INT8 and t.quant is not None and init is not None and init.dtype == np.uint8:
        state.home.record.state_encoding[name] = "u8-offset"


@legalize("tfl.call_once")
def call_once(b: Builder, op: Operation) -> list[Value]:
    """Resolved at conversion time: the constants it assigns become the variables' initial values."""
    state = _variables(b)
    if state.problems:
        raise Unsupported("; ".join(sorted(set(state.problems))))
    return []


@legalize("tfl.var_handle")
def var_handle(b: Builder, op: Operation) -> list[Value]:
    """Kept until its readers/writers are legalized (they read its shared_name); then dead."""
    op.attrs.pop("side_effect", None)
    _var_name(op.result)
    return [op.result]


@legalize("tfl.read_variable", arity=1)
def read_variable(b: Builder, op: Operation) -> list[Value]:
    """The initial value as a CONST when nothing assigns the variable, else VARIABLE_READ (EXT-VARIABLE)."""
    state = _variables(b)
    name = _var_name(op.operands[0])
    t = op.result.type
    if name not in state.assigned:
        init = state.initial.get(name)
        if init is None:
            raise Unsupported(f"resource variable {name} is read but never initialised")
        if not t.is_static:
            t = t.with_shape(init.shape)
        return [b.const(_initial_for(init, t).reshape(t.static_shape), t.dtype, quant=t.quant, name=name)]
    state.check_home(b, name)
    last = state.last_write(name)
    if last is not None:  # read after write: the value written (a later READ could be scheduled before the WRITE)
        return [last[0]]
    _declare(b, state, name, t)
    got = b.emit("VARIABLE_READ", [], {"name": name}, result_types=[_storage_type(t)], names=[name]).result
    return [_from_bytes(b, got, t.dtype) if t.dtype in _BYTE_STATE else got]


@legalize("tfl.assign_variable", arity=2, result_optional=True)
def assign_variable(b: Builder, op: Operation) -> list[Value]:
    """VARIABLE_WRITE (EXT-VARIABLE); only the last write of an invocation is kept, later reads take its value."""
    state = _variables(b)
    name = _var_name(op.operands[0])
    state.check_home(b, name)
    x = op.operands[1]
    if not x.type.is_static:
        raise Unsupported(f"value assigned to resource variable {name} has a dynamic shape")
    _declare(b, state, name, x.type)
    last = state.last_write(name)
    if last is not None:
        b.graph.remove_op(last[1])
    w = b.emit("VARIABLE_WRITE", [_to_bytes(b, x) if x.dtype in _BYTE_STATE else x], {"name": name},
               result_types=[])
    w.attrs["side_effect"] = True
    state.written[name] = (x, w)
    return []
