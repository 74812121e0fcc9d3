"""Legalization registry: rules keyed by source op name (``tfl.conv_2d``, ``tf.Conv2D`` …).

A rule is ``rule(b: Builder, op: Operation) -> list[Value]``: it emits TOSA ops with the
builder and returns one replacement value per result of ``op``.  A rule that cannot handle
a case raises :class:`tf2tosa.errors.Unsupported` with a reason; the pipeline collects the
reasons of every op before failing.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from .rule_index import TFL_RULE_MODULES

Rule = Callable[[Builder, Operation], list[Value]]


class RuleInfo:
    """A registered rule.  (A plain class, not a dataclass: this module is imported inside every conversion, and
    making the dataclass took about half a millisecond of it.)"""

    __slots__ = ("name", "fn", "dtypes", "doc", "notes", "arity")

    def __init__(self, name: str, fn: Rule, dtypes: tuple[str, ...] = ("fp32",), doc: str = "",
                 notes: dict[str, str] | None = None, arity: int = 0) -> None:
        self.name = name
        self.fn = fn
        #: dtypes the rule is tested for (for the support table), e.g. ("fp32",) or ("fp32", "i8", "i16")
        self.dtypes = dtypes
        self.doc = doc
        self.notes: dict[str, str] = {} if notes is None else notes
        #: operands the source op requires (``@legalize(arity=...)``); 0: the rule checks its operands itself
        self.arity = arity

    def __repr__(self) -> str:
        return (f"RuleInfo(name={self.name!r}, fn={self.fn!r}, dtypes={self.dtypes!r}, doc={self.doc!r}, "
                f"notes={self.notes!r}, arity={self.arity!r})")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not RuleInfo:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # (as the dataclass had: mutable, compared by value)


def _checked(fn: Rule, need: int, produces: bool) -> Rule:
    """``fn`` behind the operand-count check of its ``@legalize(arity=...)``, for every caller (the pipeline and the
    control-flow regions)."""
    if not need:
        return fn

    def rule(b: Builder, op: Operation) -> list[Value]:
        if len(op.operands) < need:
            raise Unsupported(f"malformed: {len(op.operands)} operand(s); TFLite's kernel takes at least {need}")
        if not op.results and produces:
            raise Unsupported("malformed: no result; TFLite's kernel writes at least one")
        return fn(b, op)

    rule.__doc__ = fn.__doc__
    rule.__name__ = fn.__name__
    rule.__wrapped__ = fn  # type: ignore[attr-defined]  # (inspect.unwrap: the rule's own function and module)
    return rule


RULES: dict[str, RuleInfo] = {}


def legalize(*names: str, dtypes: tuple[str, ...] = ("fp32",), arity: int = 0,
             result_optional: bool = False) -> Callable[[Rule], Rule]:
    """Register ``fn`` as the rule for each op name in ``names``.

    ``arity``: the operands the source op's kernel requires (a TFLite builtin's ``NumInputs`` check, optional
    trailing ones not counted); a malformed model with fewer is reported instead of reaching the rule, and so is one
    whose op has no result unless ``result_optional`` (a side effect only, or branches that return nothing)."""

    def deco(fn: Rule) -> Rule:
        checked = _checked(fn, arity, not result_optional)
        for n in names:
            if n in RULES:
                raise ValueError(f"duplicate legalization rule for {n}")
            RULES[n] = RuleInfo(n, checked, dtypes, (fn.__doc__ or "").strip().split("\n")[0], arity=arity)
        return fn

    return deco


#: the module that registers each ``tfl.*`` rule (generated: rule_index.py); an op not listed there loads the whole
#: dialect as before
_RULE_MODULE = {f"tfl.{op}": module for module, ops in TFL_RULE_MODULES.items() for op in ops}


def get_rule(name: str) -> RuleInfo | None:
    module = _RULE_MODULE.get(name)
    if module is not None:
        if name not in RULES:
            import importlib

            importlib.import_module(f"{__package__}.{module}")
        if name in RULES:
            return RULES[name]
    _load_rule_modules(name.split(".", 1)[0] if "." in name else None)
    return RULES.get(name)


#: rule modules by the dialect of the op names they register (``tfl_*`` → ``tfl.*`` …); a conversion loads only its
#: source dialect's modules (a .tflite needs none of the TensorFlow or NNEF rules)
_DIALECT_PREFIXES = {"tfl": "tfl_", "tf": "tf_", "nnef": "nnef_"}
_LOADED: set[str] = set()


def _load_rule_modules(dialect: str | None = None) -> None:
    """Import the rule modules of ``dialect`` (every module when None or an unknown dialect)."""
    key = dialect if dialect in _DIALECT_PREFIXES else "*"
    if key in _LOADED or "*" in _LOADED:
        return
    _LOADED.add(key)
    import importlib
    import os
    import pkgutil

    prefix = _DIALECT_PREFIXES.get(key, "")
    for m in sorted(pkgutil.iter_modules([os.path.dirname(__file__)]), key=lambda m: m.name):
        if m.name != "registry" and m.name.startswith(prefix):
            importlib.import_module(f"{__package__}.{m.name}")


def all_rules() -> dict[str, RuleInfo]:
    _load_rule_modules()
    return dict(sorted(RULES.items()))


__all__ = ["RULES", "TFL_RULE_MODULES", "Rule", "RuleInfo", "all_rules", "get_rule", "legalize", "DType"]
