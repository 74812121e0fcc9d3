"""Delegation: lower an op with the rule registered for another op.

:func:`via` runs the registered rule of another op (``tfl.gather`` …) on this op's operands with the
attributes that op expects.  A ``tf.*`` op with the same semantics as a ``tfl.*`` op is lowered by the very
same code, so a fix in one place fixes both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import Unsupported
from ..ir import Graph, Operation, Value
from ..tosa.builder import Builder
from . import driver


def via(b: Builder, op: Operation, name: str, operands: Sequence[Value] | None = None,
        attrs: Mapping[str, object] | None = None, results: Sequence[Value] | None = None,
        regions: Sequence[Graph] | None = None) -> list[Value]:
    """Lower ``op`` with the rule registered for ``name``, seeing ``operands`` / ``attrs`` / ``results`` /
    ``regions`` (none unless given: a control-flow op hands on its region graphs).

    The rule gets a detached :class:`Operation` (never added to the graph); its result types are ``op``'s, so
    rules that read the result element type (cast) or quantization see the source op's.  Reasons of
    :class:`Unsupported` are reported under ``op``'s name.
    """
    proxy = Operation(-1, name, list(op.operands if operands is None else operands),
                      list(op.results if results is None else results), dict(attrs or {}), list(regions or []),
                      op.location)
    if driver.missing_rule(proxy) is not None:
        raise Unsupported(f"no rule for {name}")
    try:
        return driver.legalize_op(b, proxy, exact_results=False)
    except Unsupported as e:
        raise e.reworded(e.reason.replace(name, op.name)) from None


__all__ = ["via"]
