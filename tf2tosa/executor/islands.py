"""Elementwise islands: integer ops that together compute a function of one 8-bit (or 16-bit) tensor, element by
element, found in a graph so that the runner can read them from a table.

An island is a set of elementwise integer ops (RESCALE, TABLE, MUL, ADD, shifts, CAST, CLAMP, ...) whose only
operand that is not a constant is one INT8 tensor X (or INT16, with no per-channel constant), directly or through
other ops of the island, every result having X's static shape.  Each element of every island value is then a
function of the same element of X, and of its channel where a constant varies along the last axis.  TFLite's int8
lowerings make such islands: ``x * sigmoid(x)`` as TABLE, two RESCALEs, MUL and RESCALE (EfficientNet's swish), a
BatchNorm left as MUL and ADD by per-channel constants (DenseNet).

Before (what the graph says)::

    X ─ RESCALE ──────────┐
    X ─ TABLE ─ RESCALE ─ MUL ─ RESCALE ─ Y        (four passes over the tensor, in int64)

After (what the runner does once the island has run twice through its kernels with the same constants)::

    Y = table[bit pattern of X]                    (per channel: table[bits, channel])

The table is made by the same kernels on every code (and channel), so it holds the spec's values; a code for which
some REQUIRE fails leaves no table, and the island keeps running through its kernels (see ``runner._run_island``).
This module only finds the islands; it changes nothing in the graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..ir.graph import Operation, Value
from ..ir.types import DType

#: ops whose result element is a function of the same element of each operand (after broadcasting), with no
#: float arithmetic: every data value of an island is an integer or a bool
ELEMENTWISE = frozenset({
    "ADD", "SUB", "MUL", "INTDIV", "MAXIMUM", "MINIMUM", "ABS", "NEGATE", "CLZ", "CLAMP", "CAST", "RESCALE", "TABLE",
    "SELECT", "ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR",
    "BITWISE_XOR", "BITWISE_NOT", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_NOT", "EQUAL", "GREATER",
    "GREATER_EQUAL",
})

#: root types: (table entries, whether a per-channel constant is allowed - 65,536 entries per channel is too many)
ROOTS = {DType.INT8: (256, True), DType.INT16: (65536, False)}


@dataclass(frozen=True)
class Island:
    """An elementwise island (see the module text)."""

    #: X, the one tensor the island reads that is not a constant
    root: Value
    #: the island's ops, in the graph's topological order
    ops: tuple[Operation, ...]
    #: the island values something outside the island reads (or the graph keeps), in op order
    exposed: tuple[Value, ...]
    #: the constant operands of the ops, in op and operand order (the run's arrays for them key the table)
    consts: tuple[Value, ...]
    #: C when a constant varies along the last axis (the table is then [codes, C]), else None
    channels: int | None


def _static(v: Value) -> tuple[int, ...] | None:
    dims = tuple(v.type.shape)
    shape = tuple(d for d in dims if isinstance(d, int) and d >= 0)
    return shape if len(shape) == len(dims) else None


def _const_kind(op: Operation, k: int, v: Value, root_shape: tuple[int, ...]) -> str | None:
    """How constant operand ``k`` of ``op`` broadcasts against the root's shape: "scalar" (one value for every
    element), "channel" (one value per last-axis index), or None (anything else: not an island op)."""
    shape = _static(v)
    if shape is None:
        return None
    if op.opcode == "TABLE" and k == 1:
        return "scalar"  # the lookup table itself
    size = 1
    for d in shape:
        size *= d
    if size == 1:
        return "scalar"  # zero points, shifts, per-tensor multipliers ([1]), one-element data constants
    if op.opcode == "RESCALE" and k in (1, 2):  # multiplier and shift: [C] with per_channel
        return "channel" if shape == (root_shape[-1],) and len(root_shape) >= 2 else None
    if len(shape) != len(root_shape):
        return None
    if len(root_shape) >= 2 and shape[:-1] == (1,) * (len(shape) - 1) and shape[-1] == root_shape[-1]:
        return "channel"
    return None


def _candidate(op: Operation, exclude: set[int]) -> bool:
    return (op.opcode in ELEMENTWISE and op.dialect == "tosa" and len(op.results) == 1 and not op.regions
            and op.id not in exclude and bool(op.operands) and not op.results[0].type.dtype.is_float
            and op.results[0].type.dtype is not DType.SHAPE)


def _shared_root(op: Operation, fixed: set[int], root_of: Mapping[int, Value]) -> Value | None:
    """The one root every non-constant operand of ``op`` comes from (an island value's root, or the operand itself
    when it can root an island), or None when an operand has none or two operands have different ones."""
    root: Value | None = None
    for v in op.operands:
        if v.id in fixed:
            continue
        r = root_of.get(v.id)
        if r is None and v.type.dtype in ROOTS and _static(v) and len(v.type.shape) >= 1:
            r = v
        if r is None or (root is not None and r is not root):
            return None
        root = r
    return root


def _constant_side_producers(ops: Sequence[Operation], const_side: Mapping[int, Operation]) -> dict[int, Operation]:
    """The constant-side ops ``ops`` read, and the ones those read in turn, by op id."""
    extra: dict[int, Operation] = {}
    todo = [v.id for op in ops for v in op.operands if v.id in const_side]
    while todo:
        vid = todo.pop()
        prod = const_side[vid]
        if prod.id not in extra:
            extra[prod.id] = prod
            todo.extend(v.id for v in prod.operands if v.id in const_side)
    return extra


def find_islands(order: Sequence[Operation], const_values: set[int], keep: set[int],
                 exclude: set[int]) -> dict[int, Island]:
    """The islands of ``order`` (a topological order), by the id of their first op.  ``const_values``: ids of the
    values single-result CONST ops make; ``keep``: ids of values the caller keeps (outputs); ``exclude``: ids of
    ops the runner runs otherwise (fused pairs, groups).

    An elementwise op of constants only (a RESCALE of a constant operand, as TFLite's int8 MUL by a constant
    lowers) joins the island whose ops alone read its result: the island then computes it too, and treats it as a
    constant operand.  A lone RESCALE or CAST is no island (the runner's RESCALE table and a cast already cost
    one pass)."""
    readers: dict[int, list[Operation]] = {}
    for op in order:
        for v in op.operands:
            readers.setdefault(v.id, []).append(op)
    # values computed from constants alone, elementwise, and the ops that compute them
    const_side: dict[int, Operation] = {}
    for op in order:
        if _candidate(op, exclude) and all(v.id in const_values or v.id in const_side for v in op.operands):
            const_side[op.results[0].id] = op
    fixed = const_values | set(const_side)
    root_of: dict[int, Value] = {}  # island value id -> its root
    members: dict[int, list[Operation]] = {}  # root value id -> its ops
    per_channel: dict[int, bool] = {}
    for op in order:
        if not _candidate(op, exclude) or op.results[0].id in const_side:
            continue
        root = _shared_root(op, fixed, root_of)
        root_shape = _static(root) if root is not None else None
        if root is None or root_shape is None or tuple(op.results[0].type.shape) != root_shape:
            continue
        kinds = [_const_kind(op, k, v, root_shape) for k, v in enumerate(op.operands) if v.id in fixed]
        if None in kinds:
            continue
        chan = "channel" in kinds
        if chan and not ROOTS[root.type.dtype][1]:
            continue
        root_of[op.results[0].id] = root
        members.setdefault(root.id, []).append(op)
        per_channel[root.id] = per_channel.get(root.id, False) or chan
    position = {op.id: i for i, op in enumerate(order)}
    islands: dict[int, Island] = {}
    for rid, ops in members.items():
        if len(ops) == 1 and ops[0].opcode in ("RESCALE", "CAST"):
            continue
        # the constant-side ops the island reads, and theirs in turn: each joins when only the island reads it
        extra = _constant_side_producers(ops, const_side)
        inside = {op.id for op in ops} | set(extra)
        if any(op.results[0].id in keep or any(r.id not in inside for r in readers.get(op.results[0].id, []))
               for op in extra.values()):
            continue  # a constant-side value something else reads too: computed where it stands
        exposed = tuple(op.results[0] for op in ops if op.results[0].id in keep
                        or any(r.id not in inside for r in readers.get(op.results[0].id, [])))
        if not exposed:
            continue
        # the island runs at its first op that reads the root (the root has a value there); a constant-side op
        # before it runs where it stands, and the island reads its value
        start = position[ops[0].id]
        joined = sorted([*ops, *extra.values()], key=lambda o: position[o.id])
        every = [o for o in joined if position[o.id] >= start]
        root = root_of[ops[0].results[0].id]
        consts = tuple(v for op in joined for v in op.operands if v.id in const_values)
        islands[every[0].id] = Island(root, tuple(every), exposed, consts,
                                      int(root.type.shape[-1]) if per_channel[rid] else None)
    return islands
