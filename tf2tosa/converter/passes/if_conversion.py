"""If-conversion: a COND_IF whose branches have no side effects becomes both branches plus SELECT.

Runs only when the conversion is for a target without EXT-CONTROLFLOW (``--target vulkan-ml``, ``ethos-u55``,
``pro-int-8k``, ``pro-fp-8k``: :func:`wanted`), after legalization, before constant folding.

Before::

    %r0, %r1 = COND_IF(%cond, %a, %b) then {(%x, %y) -> (f(%x, %y), g(%x, %y))}
                                      else {(%x, %y) -> (h(%x, %y), k(%x, %y))}

After::

    %t0, %t1 = <the then ops, cloned with %x, %y bound to %a, %b>
    %e0, %e1 = <the else ops, cloned the same way>
    %c = RESHAPE(%cond, [1, …, 1])           (the size-1 condition at each output's rank)
    %r0 = SELECT(%c, %t0, %e0)
    %r1 = SELECT(%c, %t1, %e1)

Both branches now run on every invocation, so an op of a branch must not make the whole graph unpredictable on
the data of the branch not taken (a REQUIRE of the spec that depends on values, spec 4.1 Unpredictable).  The
operands that such a REQUIRE reads are masked with a harmless value unless the branch is taken —
``SELECT(%c, %divisor, 1)`` in the then branch, ``SELECT(%c, 1, %divisor)`` in the else branch — for INTDIV's
divisor (by zero, and INT_MIN / -1), the shift amount of ARITHMETIC_RIGHT_SHIFT / LOGICAL_LEFT_SHIFT /
LOGICAL_RIGHT_SHIFT, GATHER's indices, both POW operands and the input of a float-to-integer CAST (a NaN is
unpredictable there).  The taken branch reads its own values, so its results are the COND_IF's bit for bit.
(Integer ADD/SUB/MUL overflow is not masked: the converter's lowerings keep those in range for every input, as
they must outside a branch too.)

A COND_IF is left as it is, with the reason, when a branch holds an op with side effects or state
(VARIABLE_READ/VARIABLE_WRITE, CUSTOM), a WHILE_LOOP (it could run forever on the data of the branch not taken),
a nested COND_IF that could not be converted, a SCATTER with indices that are not constants (masked indices would
collide, a REQUIRE of its own), or when an output or an operand to mask has a type SELECT does not take (int4,
int48, fp8, shape).
A nested COND_IF inside a branch is inlined with it and converted in turn; the COND_IFs of a WHILE_LOOP body are
converted in the body (the loop stays, for ``--max-unroll`` or a target with EXT-CONTROLFLOW).

Reads the ``tosa.COND_IF`` ops of the top-level graph and of WHILE_LOOP bodies, and their branch regions (which it
does not change: a branch may be shared).  Writes the cloned ops, RESHAPE/SELECT ops, and
``graph.record.if_conversion``: ``converted`` (count) and ``refused`` (per COND_IF left: ``op``, ``tensor``,
``reason``; :func:`tf2tosa.tosa.targets.check` reads them).

Records (:mod:`tf2tosa.ir.records`): writes ``graph.record.if_conversion`` (and clears it on the WHILE_LOOP
bodies it recursed into).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import InputError
from ...ir import DType, Graph, Operation, TensorType, Value
from ...tosa.targets import TARGETS, takes_control_flow

__all__ = ["if_conversion", "wanted"]

#: element types SELECT takes (spec 2.7.1 SELECT, with EXT-BF16)
_SELECT_TYPES = frozenset({DType.BOOL, DType.INT8, DType.INT16, DType.INT32, DType.FP16, DType.FP32, DType.BF16})
#: ops with side effects or state: a branch holding one keeps its COND_IF
_STATEFUL = frozenset({"VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE", "CUSTOM"})
#: op -> (operand index, harmless value) for the operands whose values a REQUIRE reads (masked off the taken path)
_MASKED: dict[str, tuple[tuple[int, float], ...]] = {
    "INTDIV": ((1, 1),),
    "ARITHMETIC_RIGHT_SHIFT": ((1, 0),),
    "LOGICAL_LEFT_SHIFT": ((1, 0),),
    "LOGICAL_RIGHT_SHIFT": ((1, 0),),
    "GATHER": ((1, 0),),
    "POW": ((0, 1), (1, 1)),
}


def _masked(op: Operation) -> tuple[tuple[int, float], ...]:
    """(operand index, harmless value) for ``op``'s operands that a REQUIRE reads: :data:`_MASKED`, and the input
    of a float-to-integer CAST (a NaN there is unpredictable, spec 2.13.1 CAST)."""
    if op.opcode == "CAST" and op.operands[0].type.dtype.is_float and not op.result.type.dtype.is_float:
        return ((0, 0),)
    return _MASKED.get(op.opcode, ())


def wanted(target: str | None) -> bool:
    """Whether a conversion for ``target`` (a :data:`tf2tosa.tosa.targets.TARGETS` name, or None) if-converts:
    the target takes no EXT-CONTROLFLOW.  An unknown name is an :class:`~tf2tosa.errors.InputError`."""
    if target is None:
        return False
    if target not in TARGETS:
        raise InputError(f"unknown target {target!r} (choose from {', '.join(TARGETS)})")
    return not takes_control_flow(target)


def _label(op: Operation) -> str:
    return f"{op.name}#{op.id}" + (f" ({op.location})" if op.location else "")


def _refusal(op: Operation) -> str | None:
    """Why the COND_IF ``op`` cannot be if-converted, or None."""
    for r in op.results:
        if r.type.dtype not in _SELECT_TYPES:
            return f"output {r.name} is {r.type.dtype.value}, which SELECT does not take"
    for region in op.regions:
        for rop in region.topological_order():
            code = rop.opcode
            if rop.dialect != "tosa":
                return f"branch {region.name} holds {rop.name}, not a TOSA operator"
            if code in _STATEFUL or rop.attrs.get("side_effect"):
                return f"branch {region.name} has a side effect or state ({code})"
            if code == "WHILE_LOOP":
                return f"branch {region.name} holds a WHILE_LOOP (run on the branch not taken, it may not end)"
            if code == "COND_IF":
                inner = _refusal(rop)
                if inner is not None:
                    return f"nested COND_IF in branch {region.name}: {inner}"
            for k, _ in _masked(rop):
                v = rop.operands[k]
                if not v.is_const and v.type.dtype not in _SELECT_TYPES:
                    return (f"branch {region.name}: {code} reads {v.type.dtype.value}, which the mask on the branch "
                            "not taken (SELECT) cannot take")
            if code == "SCATTER" and not rop.operands[1].is_const:
                return (f"branch {region.name} holds a SCATTER with indices that are not constants (on the branch "
                        "not taken they could break its REQUIREs)")
    return None


class _Conds:
    """The COND_IF's condition, reshaped once per rank (a size-1 bool broadcast by SELECT)."""

    def __init__(self, graph: Graph, cond: Value) -> None:
        self.graph, self.cond = graph, cond
        self._by_rank: dict[int, Value] = {cond.type.rank: cond}

    def at_rank(self, rank: int) -> Value:
        got = self._by_rank.get(rank)
        if got is None:
            shape = self.graph.add_const(np.ones(rank, np.int64), DType.SHAPE, name=f"{self.cond.name}_shape",
                                         op_name="tosa.CONST_SHAPE")
            got = self.graph.add_op("tosa.RESHAPE", [self.cond, shape], [TensorType((1,) * rank, DType.BOOL)],
                                    result_names=[f"{self.cond.name}_r{rank}"]).result
            self._by_rank[rank] = got
        return got

    def select(self, taken: Value, other: Value, then_side: bool, name: str) -> Value:
        """``taken`` where this side's branch runs, else ``other``."""
        c = self.at_rank(taken.type.rank)
        a, b = (taken, other) if then_side else (other, taken)
        return self.graph.add_op("tosa.SELECT", [c, a, b], [taken.type], result_names=[name]).result


def _inline(graph: Graph, region: Graph, args: list[Value], conds: _Conds, then_side: bool) -> list[Value]:
    """Clone the ops of ``region`` into ``graph`` with its inputs bound to ``args``; REQUIRE-guarded operands are
    masked off the taken path.  Returns the values of the region's outputs."""
    env: dict[int, Value] = {v.id: a for v, a in zip(region.inputs, args)}
    for rop in region.topological_order():
        ins = [env[v.id] for v in rop.operands]
        for k, safe in _masked(rop):
            v = ins[k]
            if not v.is_const:
                harmless = graph.add_const(np.full((1,) * v.type.rank, safe, v.type.dtype.np_dtype()), v.type.dtype,
                                           name=f"{v.name}_untaken")
                ins[k] = conds.select(v, harmless, then_side, f"{v.name}_guarded")
        new = graph.add_op(rop.name, ins, [r.type for r in rop.results], dict(rop.attrs),
                           [r.name for r in rop.results], list(rop.regions), rop.location)
        for r, c in zip(rop.results, new.results):
            c.source = r.source
            env[r.id] = c
    return [env[v.id] for v in region.outputs]


def _convert_one(graph: Graph, op: Operation) -> None:
    cond, args = op.operands[0], list(op.operands[1:])
    conds = _Conds(graph, cond)
    then_outs = _inline(graph, op.regions[0], args, conds, True)
    else_outs = _inline(graph, op.regions[1], args, conds, False)
    renamed: list[tuple[Value, str, str | None]] = []
    for r, t, e in zip(op.results, then_outs, else_outs):
        if t is e and r not in graph.outputs:
            graph.replace_all_uses(r, t)
            continue
        new = conds.select(t, e, True, f"{r.name}_sel")
        graph.replace_all_uses(r, new)
        renamed.append((new, r.name, r.source))
    graph.remove_op(op)
    for new, name, source in renamed:  # the SELECT takes the COND_IF result's name (a graph output keeps its name)
        graph._names.discard(new.name)
        new.name, new.source = graph.unique_name(name), source


def if_conversion(graph: Graph, warn: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """If-convert every COND_IF of ``graph``'s top level (and those its branches bring in) whose branches allow it;
    returns (and stores in ``graph.record.if_conversion``) what it did."""
    converted, seen = 0, set()
    refused: list[dict[str, Any]] = []
    while True:
        todo = [op for op in graph.topological_order() if op.opcode == "COND_IF" and op.id not in seen]
        if not todo:
            break
        op = todo[0]
        seen.add(op.id)
        reason = _refusal(op)
        if reason is not None:
            tensor = op.results[0].name if op.results else None
            refused.append({"op": _label(op), "tensor": tensor, "reason": reason})
            if warn is not None:
                warn(f"{_label(op)} ({tensor}) is left a COND_IF (EXT-CONTROLFLOW): if-conversion: {reason}")
            continue
        _convert_one(graph, op)
        converted += 1
    for op in graph.topological_order():  # the COND_IFs of a loop body (the loop itself stays: EXT-CONTROLFLOW)
        if op.opcode == "WHILE_LOOP":
            for region in op.regions:
                inner = if_conversion(region, warn)
                converted += inner["converted"]
                refused += inner["refused"]
                region.record.if_conversion = None
    info = {"converted": converted, "refused": refused}
    if converted or refused:
        graph.record.if_conversion = info
    return info
