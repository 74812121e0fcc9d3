"""The legalization driver: the one place a rule is looked up and run.

The pipeline (:func:`tf2tosa.converter.pipeline.legalize_graph`), the control-flow inliner
(:mod:`.tfl_control`), QAT's constant evaluation (:mod:`tf2tosa.converter.qat`) and tf→tfl forwarding
(:func:`.delegate.via`) all lower an op with :func:`legalize_op`.  Options travel on ``b.context``
(:class:`~tf2tosa.tosa.context.LegalizeContext`); :func:`failure_reason` is how a failure is worded when it
is gathered.
"""

from __future__ import annotations

from types import ModuleType

from ..errors import InvalidGraphError, Unsupported
from ..ir import Operation, ResultCountError, Value
from ..tosa.builder import Builder
from ..tosa.context import LegalizeContext
from .lowering import zero_size
from .registry import get_rule


def _custom() -> ModuleType:
    """The ``tfl_custom`` module, imported when an op has no rule or cannot be lowered (it loads the TF lowerings
    and the FlexBuffer reader, ~2.4 ms, which a conversion whose ops all lower never needs)."""
    from . import tfl_custom

    return tfl_custom


def missing_rule(op: Operation) -> str | None:
    """Why ``op`` cannot be lowered for want of a rule, or None when it has one."""
    return None if get_rule(op.name) is not None else _custom().unsupported_reason(op)


def legalize_op(b: Builder, op: Operation, *, custom: bool = False, exact_results: bool = True) -> list[Value]:
    """Lower ``op`` with the rule registered for its name; returns one replacement value per result.

    Raises :class:`Unsupported` when there is no rule, when the rule cannot handle the case, or (with
    ``exact_results``) when the rule returns another number of values than ``op`` has results.  With ``custom``
    (the pipeline, under ``--custom-ops``) an op that would be unsupported becomes a TOSA CUSTOM operator.
    :class:`InvalidGraphError` (the spec forbids a result) propagates; :func:`failure_reason` words it.  A rule
    that fails on a zero-size operand gets :func:`.lowering.zero_size.empty_results` instead.
    """
    info = get_rule(op.name)
    try:
        if info is None:
            raise Unsupported(_custom().unsupported_reason(op))
        try:
            new = info.fn(b, op)
        except ResultCountError as e:  # a rule asked for the one result of a malformed op
            raise Unsupported(f"malformed: {e}") from None
        except (Unsupported, InvalidGraphError):  # on a zero-size operand: empty results, or why not
            got = zero_size.empty_results(b, op)
            if got is None:
                raise
            new = got
    except Unsupported as e:
        if not custom:
            raise
        new = _custom().emit_custom(b, op, e.reason)  # kept as a TOSA CUSTOM operator (--custom-ops)
    if exact_results and len(new) != len(op.results):  # a malformed model: more (or fewer) results than defined
        raise Unsupported(f"malformed: {len(op.results)} result(s), the op defines {len(new)}")
    return new


def failure_reason(e: Unsupported | InvalidGraphError) -> str:
    """How a failed op's reason is recorded."""
    return e.reason if isinstance(e, Unsupported) else f"spec forbids the result: {e}"


__all__ = ["LegalizeContext", "failure_reason", "legalize_op", "missing_rule"]
