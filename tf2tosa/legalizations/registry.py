"""Legalization registry: rules keyed by source op name (``tfl.conv_2d``, ``tf.Conv2D`` …).

A rule is ``rule(b: Builder, op: Operation) -> list[Value]``: it emits TOSA ops with the
builder and returns one replacement value per result of ``op``.  A rule that cannot handle
a case raises :class:`tf2tosa.errors.Unsupported` with a reason; the pipeline collects the
reasons of every op before failing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir import DType, Operation, Value
from ..tosa.builder import Builder

Rule = Callable[[Builder, Operation], list[Value]]


@dataclass
class RuleInfo:
    name: str
    fn: Rule
    #: dtypes the rule is tested for (for the support table), e.g. ("fp32",) or ("fp32", "i8", "i16")
    dtypes: tuple[str, ...] = ("fp32",)
    doc: str = ""
    notes: dict[str, str] = field(default_factory=dict)


RULES: dict[str, RuleInfo] = {}


def legalize(*names: str, dtypes: tuple[str, ...] = ("fp32",)) -> Callable[[Rule], Rule]:
    """Register ``fn`` as the rule for each op name in ``names``."""

    def deco(fn: Rule) -> Rule:
        for n in names:
            if n in RULES:
                raise ValueError(f"duplicate legalization rule for {n}")
            RULES[n] = RuleInfo(n, fn, dtypes, (fn.__doc__ or "").strip().split("\n")[0])
        return fn

    return deco


def get_rule(name: str) -> RuleInfo | None:
    _load_rule_modules()
    return RULES.get(name)


_LOADED = False


def _load_rule_modules() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import importlib
    import pkgutil

    from .. import legalizations

    for m in sorted(pkgutil.iter_modules(legalizations.__path__), key=lambda m: m.name):
        if m.name not in ("registry", "common"):
            importlib.import_module(f"{legalizations.__name__}.{m.name}")


def all_rules() -> dict[str, RuleInfo]:
    _load_rule_modules()
    return dict(sorted(RULES.items()))


__all__ = ["RULES", "Rule", "RuleInfo", "all_rules", "get_rule", "legalize", "DType"]
