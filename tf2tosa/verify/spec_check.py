"""Judge a float execution by the spec's own accuracy rules (§1.10) instead of a fixed tolerance.

Every float op of the graph is re-evaluated in fp64 on the same (fp32) inputs the run gave it, and its fp32 result
is checked against that reference with the bound the spec sets for the op: ULP bounds (ADD, MUL, RSQRT …), absolute
bounds (SIGMOID, TANH, EXP …), the dot-product bound of §1.10.3 (CONV2D, MATMUL, AVG_POOL2D, REDUCE_SUM …), or
exactness (data movement, MAXIMUM, CLAMP …).  See :mod:`tf2tosa.executor.compliance`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..executor import evaluate_op, run
from ..executor.compliance import check_op
from ..executor.registry import PRECISE
from ..ir import Graph, Operation

_SKIP = frozenset({"CONST", "CONST_SHAPE", "COND_IF", "WHILE_LOOP", "CUSTOM", "VARIABLE", "VARIABLE_READ",
                   "VARIABLE_WRITE"})


@dataclass
class OpVerdict:
    op: str
    result: str
    ok: bool
    worst: float  # largest |impl - ref| / bound (<= 1 when compliant)
    message: str


@dataclass
class ComplianceReport:
    checked: int = 0
    failures: list[OpVerdict] = field(default_factory=list)
    worst: OpVerdict | None = None
    #: every verdict, in topological order (for the HTML report's per-op plot)
    ops: list[OpVerdict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def __str__(self) -> str:
        if not self.checked:
            return "spec accuracy: no float ops to check"
        head = (f"spec accuracy: {self.checked} float op result(s) checked against fp64 with the spec's bounds: "
                + ("all compliant" if self.ok else f"{len(self.failures)} outside their bound"))
        if self.worst is not None:
            head += f" (largest error: {self.worst.op}, {bound_use(self.worst.worst)})"
        return "\n".join([head] + [f"  {f.op} {f.result}: {f.message}" for f in self.failures[:10]])


def bound_use(ratio: float) -> str:
    """|error| / bound of an op result in words: how much of the spec's bound the error uses (1 = all of it)."""
    if ratio <= 0:
        return "no error"
    if ratio > 1:
        return f"{ratio:.3g} times its bound (outside it)"
    if ratio >= 0.995:
        return "|error| equal to its bound, which the spec allows (the bound is inclusive)"
    if ratio >= 0.01:
        return f"{ratio:.0%} of its bound"
    return f"{100 * ratio:.2g}% of its bound"


def evaluate_fp64(op: Operation, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """``op``'s results re-evaluated in fp64 (the executor's precise mode): the reference of the spec's bounds."""
    token = PRECISE.set(True)
    try:
        return evaluate_op(op, inputs)
    finally:
        PRECISE.reset(token)


def check_graph(graph: Graph, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> ComplianceReport:
    """Run ``graph`` once in fp32 and check every float op result against the spec's accuracy bound."""
    trace = run(graph, inputs, trace=True)
    report = ComplianceReport()
    for op in graph.topological_order():
        if op.opcode in _SKIP or not any(r.dtype.is_float for r in op.results):
            continue
        ins = [trace[v.name] for v in op.operands]
        refs = evaluate_fp64(op, ins)

        def bound(ins: list[np.ndarray] = ins, op: Operation = op) -> np.ndarray:
            # §1.10.3: the same op on the absolute values of its float operands
            absolute = [np.abs(x) if np.issubdtype(np.asarray(x).dtype, np.floating) else x for x in ins]
            return evaluate_fp64(op, absolute)[0]

        for i, r in enumerate(op.results):
            if not r.dtype.is_float:
                continue
            res = check_op(op, refs[i], trace[r.name], ins, result_index=i, bound_fn=bound)
            verdict = OpVerdict(f"{op.name}#{op.id}" + (f" ({op.location})" if op.location else ""), r.name,
                                bool(res.ok), float(res.worst), str(res))
            report.checked += 1
            report.ops.append(verdict)
            if not verdict.ok:
                report.failures.append(verdict)
            if report.worst is None or verdict.worst > report.worst.worst:
                report.worst = verdict
    return report
