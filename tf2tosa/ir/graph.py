"""The graph IR: operations over typed values, kept in a networkx.MultiDiGraph.

* A :class:`Value` is an SSA value with a :class:`TensorType`.  It is either a
  graph input (``producer is None``) or the ``index``-th result of an operation.
* An :class:`Operation` has an op name (``tfl.conv_2d``, ``tosa.CONV2D`` …),
  ordered operands and results, attributes, and optional nested ``regions``
  (sub-graphs, e.g. COND_IF / WHILE_LOOP bodies).
* Constants are operations (``tosa.CONST``, ``tosa.CONST_SHAPE``, ``tfl.const``)
  whose ``attrs["values"]`` is a numpy array; :meth:`Value.const` returns it.
* Variables that live across invocations (stateful-ops RFC) are recorded in
  :attr:`Graph.variables`; symbolic dimensions (dynamic-shape RFC) are strings
  in :attr:`TensorType.shape`.
* What is known about the graph besides its ops is in typed records (:mod:`.records`): :attr:`Graph.source`
  (what the frontend read), :attr:`Graph.record` (what the conversion did and decided) and :attr:`Graph.dims`
  (the symbols of a symbolic program).

The networkx graph has one node per operation id and one edge per use:
``producer_id -> consumer_id`` keyed ``(value_id, operand_index)``.  Graph inputs
are produced by the pseudo node ``INPUT``.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from .records import ConversionRecord, SourceInfo, SymbolicDims
from .symdim import SYM_VALUES
from .types import DType, TensorType, dtype_from_numpy, static_tensor_type

INPUT = -1  # pseudo node id of graph inputs

CONST_OPS = frozenset({"tosa.CONST", "tosa.CONST_SHAPE", "tfl.const", "tf.Const", "nnef.const", "const"})


class Value:
    """A typed SSA value."""

    __slots__ = ("id", "name", "type", "producer", "index", "graph", "source")

    def __init__(self, graph: Graph, vid: int, name: str, type: TensorType,
                 producer: Operation | None = None, index: int = 0) -> None:
        self.graph = graph
        self.id = vid
        self.name = name
        self.type = type
        self.producer = producer
        self.index = index
        #: name of the source-framework tensor this value stands for, if any
        self.source: str | None = None

    @property
    def shape(self) -> tuple[Any, ...]:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @property
    def is_const(self) -> bool:
        return self.producer is not None and self.producer.name in CONST_OPS

    def const(self) -> np.ndarray | None:
        """The constant's array if this value is produced by a constant op, else None."""
        if self.is_const:
            assert self.producer is not None
            arr = self.producer.attrs["values"]
            return np.asarray(arr)
        return None

    def sym_const(self) -> np.ndarray | None:
        """Like :meth:`const`, but an integer constant whose values carry dimension expressions is returned as
        its object array of ints and :class:`~tf2tosa.ir.symdim.SymDim` (``attrs["sym_values"]``)."""
        if self.is_const:
            assert self.producer is not None
            sym = self.producer.attrs.get(SYM_VALUES)
            if sym is not None:
                return np.asarray(sym, dtype=object)
        return self.const()

    @property
    def uses(self) -> list[tuple[Operation, int]]:
        """(consumer operation, operand index) pairs, in a deterministic order."""
        return self.graph.uses(self)

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


#: the opcode of each op name met so far (one entry per distinct name: the name's text after its dialect)
_OPCODES: dict[str, str] = {}
#: the start of the default result name of each op name met so far (its opcode in lower case and ``_``)
_NAME_PREFIXES: dict[str, str] = {}


class ResultCountError(ValueError):
    """:attr:`Operation.result` of an op with no result or several (a malformed model's op, for one)."""


@dataclass(eq=False)
class Operation:
    """An operation with ordered operands and results."""

    id: int
    name: str
    operands: list[Value]
    results: list[Value]
    attrs: dict[str, Any] = field(default_factory=dict)
    regions: list[Graph] = field(default_factory=list)
    #: where the op came from (source op name/index), for error messages and per-layer maps
    location: str | None = None

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ResultCountError(f"{self.name} has {len(self.results)} results, where one is expected")
        return self.results[0]

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def opcode(self) -> str:
        """The name without dialect prefix (``CONV2D`` for ``tosa.CONV2D``)."""
        got = _OPCODES.get(self.name)  # (the passes and the writer ask tens of thousands of times per model)
        if got is None:
            got = _OPCODES[self.name] = self.name.split(".", 1)[-1]
        return got

    def __repr__(self) -> str:
        return f"<{self.name}#{self.id} {self.location or ''}>"


class _Names(set[str]):
    """The graph's value names, with a per-base hint for :meth:`Graph.unique_name`: ``hint[base]`` is never above
    the smallest ``i >= 1`` whose ``base_i`` is free, so probing can start there instead of at 1 (same names, no
    quadratic walk over ``const_1, const_2, …``).  Freeing a name ``base_i`` lowers its base's hint."""

    def __init__(self, names: Iterable[str] = ()) -> None:  # (copy and pickle pass the names)
        super().__init__(names)
        self.hint: dict[str, int] = {}

    def _freed(self, name: object) -> None:
        if not isinstance(name, str):
            return
        base, sep, num = name.rpartition("_")
        if sep and num.isascii() and num.isdigit() and base in self.hint:
            self.hint[base] = min(self.hint[base], max(int(num), 1))

    def discard(self, name: object) -> None:
        super().discard(name)
        self._freed(name)

    def remove(self, name: str) -> None:
        super().remove(name)
        self._freed(name)

    def discard_all(self, names: list[str]) -> None:
        """:meth:`discard` of each name, in order (the same set and hints: a hint only goes down, to the smallest
        freed number of its base, whatever the order)."""
        self.difference_update(names)
        hint = self.hint
        for name in names:
            base, sep, num = name.rpartition("_")
            if sep and base in hint and num.isascii() and num.isdigit():
                i = int(num)
                if i < hint[base]:
                    hint[base] = max(i, 1)



def _clear_nx_cache(g: nx.MultiDiGraph) -> None:
    """What networkx's own mutators do after a change (``nx._clear_cache``): drop the conversions it caches for its
    backends in ``__networkx_cache__`` (networkx 3.3 on; absent before).  ``tests/test_ir_networkx.py`` holds the
    dicts the graph writes directly equal to what networkx's methods make."""
    cache = getattr(g, "__networkx_cache__", None)
    if cache:
        cache.clear()

class Graph:
    """A function-like graph: ordered inputs, ordered outputs, operations."""

    def __init__(self, name: str = "main") -> None:
        self.name = name
        self.nx = nx.MultiDiGraph()
        self.nx.add_node(INPUT)
        self.ops: dict[int, Operation] = {}
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        #: persistent variables (stateful-ops RFC): name -> initial value type / data
        self.variables: dict[str, dict[str, Any]] = {}
        #: what the frontend read (:class:`~tf2tosa.ir.records.SourceInfo`)
        self.source = SourceInfo()
        #: what the conversion did and decided (:class:`~tf2tosa.ir.records.ConversionRecord`)
        self.record = ConversionRecord()
        #: the dimension symbols of a symbolic program (:class:`~tf2tosa.ir.records.SymbolicDims`)
        self.dims = SymbolicDims()
        self._ids = itertools.count()
        self._names: _Names = _Names()
        #: bumped by every change of the ops or edges; the topological order is cached per version
        self._version = 0
        self._order: tuple[tuple[int, int], list[Operation]] | None = None

    # ------------------------------------------------------------------ records read across packages
    @property
    def unsigned_io(self) -> set[str]:
        """Names of the input/output values whose i8 arrays carry uint8 bits (``record.unsigned_io``)."""
        return set(self.record.unsigned_io)

    @property
    def tensor_map(self) -> dict[str, str]:
        """Source tensor name -> TOSA value name, a copy of ``record.tensor_map``."""
        return dict(self.record.tensor_map)

    @property
    def inexact(self) -> list[dict[str, Any]]:
        """Ops lowered by a path that is not bit-exact with TFLite (``record.inexact``), a copy."""
        return list(self.record.inexact)

    # ------------------------------------------------------------------ naming
    def unique_name(self, base: str) -> str:
        base = base or "v"
        names = self._names
        if base not in names:
            names.add(base)
            return base
        i = names.hint.get(base, 1)
        name = f"{base}_{i}"
        while name in names:
            i += 1
            name = f"{base}_{i}"
        names.hint[base] = i + 1
        names.add(name)
        return name

    # ---------------------------------------------------------------- building
    def add_input(self, name: str, type: TensorType) -> Value:
        v = Value(self, next(self._ids), self.unique_name(name), type)
        self.inputs.append(v)
        return v

    def add_op(self, name: str, operands: Iterable[Value], result_types: Iterable[TensorType],
               attrs: dict[str, Any] | None = None, result_names: Iterable[str] | None = None,
               regions: list[Graph] | None = None, location: str | None = None) -> Operation:
        return self._new_op(name, list(operands), result_types, dict(attrs) if attrs else {},
                            list(result_names) if result_names is not None else None,
                            list(regions) if regions else [], location)

    def _new_op(self, name: str, operands: list[Value], result_types: Iterable[TensorType], attrs: dict[str, Any],
                names: Sequence[str] | None, regions: list[Graph], location: str | None) -> Operation:
        """:meth:`add_op` of arguments the op keeps as they are: ``operands``, ``attrs`` and ``regions`` become the
        op's own (the builder's fresh list and dict: no copies), ``result_types`` and ``names`` are only read."""
        ids = self._ids
        op = Operation(next(ids), name, operands, [], attrs, regions, location)
        results = op.results
        n_names = len(names) if names is not None else 0
        for i, t in enumerate(result_types):
            if i < n_names and names[i]:  # type: ignore[index]
                base = names[i]  # type: ignore[index]
            else:  # the op's name hint: its opcode in lower case and its id
                prefix = _NAME_PREFIXES.get(name)
                if prefix is None:
                    prefix = _NAME_PREFIXES[name] = op.opcode.lower() + "_"
                base = f"{prefix}{op.id}"
            results.append(Value(self, next(ids), self.unique_name(base), t, op, i))
        self.ops[op.id] = op
        g = self.nx
        # networkx's add_node for a new node, written into its own dicts (``_succ``, ``_pred``, ``_node``; the
        # factories of a MultiDiGraph are dict): add_node's call and cache check cost as much as the op's records
        oid = op.id
        succ_all = g._succ
        pred: dict[int, dict[tuple[int, int], dict[str, Any]]] = {}
        succ_all[oid], g._pred[oid], g._node[oid] = {}, pred, {}
        _clear_nx_cache(g)
        self._version += 1
        for k, v in enumerate(operands):
            # _add_edge of an edge into the new node (each key (value id, operand index) is new): networkx's dicts
            p = v.producer
            src = p.id if p is not None else INPUT
            succ = succ_all.get(src)
            if succ is None:  # (a producer networkx does not know: _add_edge lets networkx add it)
                self._add_edge(v, op, k)
                continue
            keys = succ.get(oid)
            if keys is None:
                keys = succ[oid] = pred[src] = {}
            keys[(v.id, k)] = {"value": v, "index": k}
        self._version += len(operands)  # (one version per edge, as _add_edge counts)
        return op

    def add_const(self, values: np.ndarray, dtype: DType | None = None, name: str = "const",
                  op_name: str = "tosa.CONST", quant: Any = None) -> Value:
        arr = np.asarray(values)
        dt = dtype or dtype_from_numpy(arr.dtype)
        if dt is not DType.SHAPE and dt not in (DType.INT4, DType.INT48):
            want = dt.np_dtype()
            if arr.dtype is not want and arr.dtype != want:  # (the builder's constants come in their type)
                arr = arr.astype(want)
        return self._const_op(arr, dt, name, op_name, quant)

    def _const_op(self, arr: np.ndarray, dt: DType, name: str, op_name: str, quant: Any) -> Value:
        """:meth:`add_const` of an array already in ``dt``'s storage type (the builder's constants)."""
        shape: tuple[int, ...] = (len(arr),) if dt is DType.SHAPE else arr.shape
        # what add_op(op_name, [], [type], {"values": arr}, [name]) makes, without its general steps: a constant
        # has no operands and one result (thousands per conversion: a RESCALE alone takes four)
        ids = self._ids
        op = Operation(next(ids), op_name, [], [], {"values": arr}, [], None)
        oid = op.id
        t = static_tensor_type(shape, dt, quant) if dt.__class__ is DType else TensorType(shape, dt, quant)
        r = Value(self, next(ids), self.unique_name(name or f"{op.opcode.lower()}_{oid}"), t, op, 0)
        op.results.append(r)
        self.ops[oid] = op
        g = self.nx
        g._succ[oid], g._pred[oid], g._node[oid] = {}, {}, {}
        _clear_nx_cache(g)
        self._version += 1
        return r

    def _add_edge(self, v: Value, consumer: Operation, k: int) -> None:
        src = v.producer.id if v.producer is not None else INPUT
        g, dst = self.nx, consumer.id
        succ = g._succ.get(src)
        if succ is None or dst not in g._succ:  # (a node networkx would add itself: its own method)
            g.add_edge(src, dst, key=(v.id, k), value=v, index=k)
        else:  # MultiDiGraph.add_edge of a new key, into its dicts: one key dict shared by _succ and _pred
            keys = succ.get(dst)
            if keys is None:
                keys = succ[dst] = g._pred[dst][src] = {}
            data = keys.get((v.id, k))
            if data is None:
                keys[(v.id, k)] = {"value": v, "index": k}
            else:
                data.update(value=v, index=k)
            _clear_nx_cache(g)
        self._version += 1

    def _remove_edge(self, src: int, dst: int, key: tuple[int, int]) -> None:
        """MultiDiGraph.remove_edge of one keyed edge, in networkx's dicts (a missing edge: its method, which
        raises)."""
        g = self.nx
        keys = g._succ.get(src, {}).get(dst)
        if keys is None or key not in keys:
            g.remove_edge(src, dst, key=key)
            return
        del keys[key]
        if not keys:
            del g._succ[src][dst]
            del g._pred[dst][src]
        _clear_nx_cache(g)

    def set_operand(self, op: Operation, k: int, v: Value) -> None:
        old = op.operands[k]
        src = old.producer.id if old.producer is not None else INPUT
        self._remove_edge(src, op.id, (old.id, k))
        op.operands[k] = v
        self._add_edge(v, op, k)

    def truncate_operands(self, op: Operation, n: int) -> None:
        """Drop the operands of ``op`` from position ``n`` on."""
        for k in range(len(op.operands) - 1, n - 1, -1):
            w = op.operands[k]
            self._remove_edge(w.producer.id if w.producer is not None else INPUT, op.id, (w.id, k))
            op.operands.pop()
        self._version += 1

    def remove_op(self, op: Operation) -> None:
        """Remove an operation; its results must be unused."""
        for r in op.results:
            if self.uses(r) or r in self.outputs:
                raise ValueError(f"cannot remove {op}: result {r.name} still used")
            self._names.discard(r.name)
        self.discard_op(op)

    def discard_op(self, op: Operation) -> None:
        """Remove an operation and its edges without checking its uses (a caller removing a whole subgraph)."""
        self._discard_ops([op])

    def _discard_ops(self, dead: list[Operation]) -> None:
        """:meth:`discard_op` of each op in ``dead``, in networkx's dicts (``DiGraph.remove_node``'s steps, which a
        MultiDiGraph takes; its cache cleared once): a conversion drops its source constants a thousand at a time."""
        g, ops = self.nx, self.ops
        succ_all, pred_all, node = g._succ, g._pred, g._node
        for op in dead:
            n = op.id
            del node[n]
            for u in succ_all[n]:
                del pred_all[u][n]
            del succ_all[n]
            for u in pred_all[n]:
                del succ_all[u][n]
            del pred_all[n]
            del ops[n]
        _clear_nx_cache(g)
        self._version += len(dead)

    def rewrite_until_settled(self, rewrite: Callable[[Operation], bool],
                              after_round: Callable[[], object] | None = None) -> None:
        """Call ``rewrite`` (which returns whether it changed the graph) on every op still in the graph, in
        topological order, round after round until a round changes nothing; ``after_round`` runs after each."""
        changed = True
        while changed:
            changed = False
            for op in self.topological_order():
                if op.id in self.ops and rewrite(op):
                    changed = True
            if after_round is not None:
                after_round()

    # ---------------------------------------------------------------- queries
    def uses(self, v: Value) -> list[tuple[Operation, int]]:
        src = v.producer.id if v.producer is not None else INPUT
        vid, ops = v.id, self.ops
        # the producer's successors and their edge keys (value id, operand index), read off networkx's own successor
        # dict (``MultiDiGraph._succ``: node -> successor -> key -> edge data), which its ``succ`` view wraps
        out = [(ops[dst], key[1]) for dst, keys in self.nx._succ[src].items() for key in keys if key[0] == vid]
        if len(out) > 1:
            out.sort(key=lambda p: (p[0].id, p[1]))
        return out

    def replace_all_uses(self, old: Value, new: Value) -> None:
        """Make every consumer of ``old`` (and the graph outputs) use ``new``."""
        for op, k in self.uses(old):
            self.set_operand(op, k, new)
        self.outputs = [new if o is old else o for o in self.outputs]

    def merge_constants(self, pairs: Iterable[tuple[Value, Value]]) -> None:
        """``replace_all_uses(old, new)`` then ``remove_op(old.producer)`` for each pair, in networkx's dicts: each
        ``old`` is the one result of an op without operands and not a graph output (dedup_constants: thousands)."""
        g, ops, names = self.nx, self.ops, self._names
        succ, pred = g._succ, g._pred
        freed: list[str] = []
        for old, new in pairs:
            src, nsrc = old.producer.id, new.producer.id  # type: ignore[union-attr]
            to = succ[nsrc]
            for dst, keys in succ.pop(src).items():
                dpred, user = pred[dst], ops[dst]
                del dpred[src]
                nkeys = to.get(dst)
                if nkeys is None:
                    nkeys = to[dst] = dpred[nsrc] = {}
                for _, k in keys:
                    user.operands[k] = new
                    nkeys[(new.id, k)] = {"value": new, "index": k}
            del pred[src], g._node[src], ops[src]
            freed.append(old.name)
        names.discard_all(freed)
        _clear_nx_cache(g)
        self._version += 1

    def topological_order(self) -> list[Operation]:
        """Operations in a deterministic topological order (ties broken by creation id).

        The sort is done once per version of the graph (every change of its ops or edges through these methods
        makes a new version), so passes that only read the graph share one sort; the caller gets its own list."""
        key = (self._version, self.nx.number_of_nodes())
        if self._order is None or self._order[0] != key:
            self._order = (key, [self.ops[n] for n in self._smallest_id_first() if n != INPUT])
        return list(self._order[1])

    def _smallest_id_first(self) -> list[int]:
        """Kahn's sort taking the smallest ready node id each time: the order networkx's
        ``lexicographical_topological_sort`` gives on node ids (it is unique), read straight off networkx's own
        successor and predecessor dicts (``_succ`` / ``_pred``, which its ``succ`` / ``pred`` views wrap: the views
        cost a wrapper object per node read, a third of the sort's time) — a node is ready once every predecessor is
        out, so parallel edges need no count."""
        succ, pred = self.nx._succ, self.nx._pred
        # When the nodes are held in ascending id order and every edge goes to a larger id (a graph whose ops were
        # made producers first, as most are once legalized), that order is this sort's: the smallest node not yet
        # out always has all its predecessors out, so it is the smallest ready one
        last = INPUT - 1
        for n, s in succ.items():
            if n <= last:
                break
            for c in s:
                if c <= n:
                    break
            else:
                last = n
                continue
            break
        else:
            return list(succ)
        waiting = {n: len(p) for n, p in pred.items()}
        ready = [n for n, k in waiting.items() if k == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            n = heapq.heappop(ready)
            order.append(n)
            for c in succ[n]:
                waiting[c] -= 1
                if not waiting[c]:
                    heapq.heappush(ready, c)
        if len(order) != len(waiting):
            raise nx.NetworkXUnfeasible("Graph contains a cycle or graph changed during iteration")
        return order

    def __iter__(self) -> Iterator[Operation]:
        return iter(self.topological_order())

    def values(self) -> list[Value]:
        vals = list(self.inputs)
        for op in self.topological_order():
            vals.extend(op.results)
        return vals

    def remove_dead_ops(self) -> int:
        """Delete operations none of whose results reach an output.  Returns the count removed."""
        ops, pred = self.ops, self.nx._pred
        # the ops that reach a root, walked over networkx's predecessor dicts (one edge per use of an operand: the
        # producers of each op's operands, as node ids, without an attribute read per operand), a level at a time
        live: set[int] = set()
        level = {o.producer.id for o in self.outputs if o.producer is not None}
        while True:
            while level:
                live |= level
                up: set[int] = set()
                for n in level:
                    up.update(pred[n])
                level = up - live
            # the ops not reached (a set difference of the node ids, not a look per op): a side-effect op among them
            # is a root too, so it and what it reads live (only these are asked: most ops are reached)
            unreached = ops.keys() - live
            level = {n for n in unreached if ops[n].attrs.get("side_effect")}
            if not level:
                break
        # (removing a node leaves the order of every other node's edges and of ``ops`` as it was, whatever the order
        # of removal: in id order all the same)
        dead = [ops[n] for n in sorted(unreached)]
        if dead:
            self._discard_ops(dead)
        return len(dead)

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for op in self.ops.values():
            counts[op.name] = counts.get(op.name, 0) + 1
        return dict(sorted(counts.items()))

    # ------------------------------------------------------------------- dump
    def dump(self, max_const: int = 4) -> str:
        """A readable text form of the graph (not MLIR; see serializer.mlir for that)."""
        lines = [f"graph @{self.name}(" + ", ".join(repr(v) for v in self.inputs) + ") {"]
        for op in self.topological_order():
            res = ", ".join(f"%{r.name}" for r in op.results)
            args = ", ".join(f"%{v.name}" for v in op.operands)
            attrs = []
            for k, a in sorted(op.attrs.items()):
                if isinstance(a, np.ndarray):
                    flat = a.reshape(-1)
                    body = ", ".join(str(x) for x in flat[:max_const])
                    a = f"array<{a.dtype}{list(a.shape)}>[{body}{', …' if flat.size > max_const else ''}]"
                attrs.append(f"{k}={a}")
            types = ", ".join(str(r.type) for r in op.results)
            attr_s = " {" + ", ".join(attrs) + "}" if attrs else ""
            lines.append(f"  {res} = {op.name}({args}){attr_s} : {types}")
            for i, region in enumerate(op.regions):
                sub = region.dump(max_const).splitlines()
                lines.append(f"    region {i}:")
                lines.extend("    " + s for s in sub)
        lines.append("  return " + ", ".join(f"%{v.name}" for v in self.outputs))
        lines.append("}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.dump()


def has_value(v: Value) -> bool:
    """False for TFLite's omitted optional inputs (tensor index -1, a ``tfl.no_value`` producer)."""
    return not (v.producer is not None and v.producer.name == "tfl.no_value")
