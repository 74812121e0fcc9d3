"""Symbolic dimension sizes (dynamic-shape RFC: dimension symbols).

A :class:`SymDim` is an ``int`` whose value is a *sample* (hint) size and which carries an exact expression over
dimension symbols (``batch``, ``d1`` …).  Lowerings written for static shapes compute with it as with any int;
plain arithmetic (``+ - * // %``, ``min``/``max`` through :func:`sym_min` / :func:`sym_max`) keeps the
expression, so the sizes of a conversion at sample sizes carry the exact formula of every dimension.  What drops
the expression (``int(x)``, ``np.asarray``) gives a plain int, which the ``--dynamic`` safety net detects
(:mod:`tf2tosa.converter.dynamic`).

Expressions are kept canonical: an affine form ``c0 + Σ ci·ai`` whose atoms ``ai`` are symbols or non-affine
nodes (floor-div, ceil-div, mod, product, min, max) sorted by their printed form, so equal expressions compare
and print equal and output is deterministic.

A comparison whose outcome depends on a symbol (the lowering branched on the sample value) is a *guard*: it is
recorded in the active :class:`Guards` context (``with guards() as g``) as the relation that held for the
samples, e.g. ``d1 >= 64`` or ``d1 != 1``; equalities between two expressions are listed apart
(:attr:`Guards.equalities`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SYM_AFFINE", "SYM_VALUES", "Expr", "Guards", "SymDim", "affine_of_array", "as_expr", "guards",
           "has_symbols", "is_symbolic", "no_guards", "same_size", "size", "sym_max", "sym_min", "symbol",
           "symbolic_array"]

#: ("sym", name) | (kind, Expr, Expr) for kind in fdiv, cdiv, mod, mul, min, max
Atom = tuple[Any, ...]


def _key(atom: Atom) -> str:
    return _atom_str(atom)


@dataclass(frozen=True)
class Expr:
    """``const + Σ coef·atom`` with ``terms`` sorted by the atoms' printed form and no zero coefficient."""

    const: int = 0
    terms: tuple[tuple[Atom, int], ...] = ()

    # -------------------------------------------------------------- building
    @staticmethod
    def of(x: Any) -> Expr:
        return as_expr(x)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def symbols(self) -> set[str]:
        out: set[str] = set()
        for a, _ in self.terms:
            if a[0] == "sym":
                out.add(a[1])
            else:
                out |= a[1].symbols() | a[2].symbols()
        return out

    def __add__(self, other: Expr) -> Expr:
        acc: dict[Atom, int] = dict(self.terms)
        for a, c in other.terms:
            acc[a] = acc.get(a, 0) + c
        return _make(self.const + other.const, acc)

    def scale(self, k: int) -> Expr:
        if k == 0:
            return Expr()
        return Expr(self.const * k, tuple((a, c * k) for a, c in self.terms))

    def __neg__(self) -> Expr:
        return self.scale(-1)

    def __sub__(self, other: Expr) -> Expr:
        return self + (-other)

    def __mul__(self, other: Expr) -> Expr:
        if other.is_const:
            return self.scale(other.const)
        if self.is_const:
            return other.scale(self.const)
        if _monomial(self) and _monomial(other):  # c1*A × c2*B = (c1 c2)·(A·B)
            (a, ca), (b, cb) = self.terms[0], other.terms[0]
            pa, pb = Expr(0, ((a, 1),)), Expr(0, ((b, 1),))
            return _atom("mul", *sorted((pa, pb), key=str)).scale(ca * cb)
        return _atom("mul", *sorted((self, other), key=str))

    def floordiv(self, other: Expr) -> Expr:
        if other.is_const and other.const > 0:
            c = other.const
            if c == 1:
                return self
            if all(k % c == 0 for _, k in self.terms):
                return Expr(self.const // c, tuple((a, k // c) for a, k in self.terms))
        if self.is_const and other.is_const and other.const != 0:
            return Expr(self.const // other.const)
        return _atom("fdiv", self, other)

    def ceildiv(self, other: Expr) -> Expr:
        if other.is_const and other.const > 0 and all(k % other.const == 0 for _, k in self.terms):
            return -((-self).floordiv(other))
        if self.is_const and other.is_const and other.const != 0:
            return Expr(-((-self.const) // other.const))
        return _atom("cdiv", self, other)

    def mod(self, other: Expr) -> Expr:
        if other.is_const and other.const > 0 and all(k % other.const == 0 for _, k in self.terms):
            return Expr(self.const % other.const)
        if self.is_const and other.is_const and other.const != 0:
            return Expr(self.const % other.const)
        return _atom("mod", self, other)

    def minmax(self, other: Expr, kind: str) -> Expr:
        d = self - other
        if d.is_const:
            return (self if (d.const <= 0) == (kind == "min") else other)
        return _atom(kind, *sorted((self, other), key=str))

    # ------------------------------------------------------------ evaluating
    def evaluate(self, env: Mapping[str, int]) -> int:
        """The value at ``env`` (symbol → size); KeyError for a symbol ``env`` lacks."""
        total = self.const
        for a, c in self.terms:
            total += c * _eval_atom(a, env)
        return total

    def __str__(self) -> str:
        parts: list[str] = []
        for a, c in self.terms:
            s = _atom_str(a)
            mag = abs(c)
            body = s if mag == 1 else f"{mag}*{s}" if a[0] == "sym" else f"{mag}*({s})"
            if not parts and c < 0 and mag == 1 and a[0] != "sym":
                body = f"({body})"  # a leading unary minus binds tighter than // and %
            parts.append(("- " if c < 0 else "+ ") + body if parts else ("-" if c < 0 else "") + body)
        if self.const or not parts:
            parts.append((f"- {-self.const}" if self.const < 0 else f"+ {self.const}") if parts else str(self.const))
        return " ".join(parts)


def _make(const: int, acc: Mapping[Atom, int]) -> Expr:
    return Expr(const, tuple(sorted(((a, c) for a, c in acc.items() if c), key=lambda t: _key(t[0]))))


def _monomial(e: Expr) -> bool:
    return not e.const and len(e.terms) == 1


def _atom(kind: str, a: Expr, b: Expr) -> Expr:
    return Expr(0, (((kind, a, b), 1),))


def _paren(e: Expr) -> str:
    s = str(e)
    simple = (e.is_const and e.const >= 0) or (not e.const and len(e.terms) == 1 and e.terms[0][1] == 1
                                               and e.terms[0][0][0] in ("sym", "min", "max", "cdiv"))
    return s if simple else f"({s})"


_OPS = {"fdiv": "//", "mod": "%", "mul": "*"}


def _atom_str(a: Atom) -> str:
    if a[0] == "sym":
        return str(a[1])
    if a[0] in ("min", "max", "cdiv"):
        if a[0] == "cdiv":
            return f"ceildiv({a[1]}, {a[2]})"
        return f"{a[0]}({a[1]}, {a[2]})"
    return f"{_paren(a[1])} {_OPS[a[0]]} {_paren(a[2])}"


def _eval_atom(a: Atom, env: Mapping[str, int]) -> int:
    if a[0] == "sym":
        return int(env[a[1]])
    x, y = a[1].evaluate(env), a[2].evaluate(env)
    if a[0] == "fdiv":
        return x // y
    if a[0] == "cdiv":
        return -((-x) // y)
    if a[0] == "mod":
        return x % y
    if a[0] == "mul":
        return x * y
    return min(x, y) if a[0] == "min" else max(x, y)


# ------------------------------------------------------------------------------------------------ guards
@dataclass
class Guards:
    """The relations a conversion relied on: ``relations`` (``"d1 >= 64"``, ``"batch != 1"``) and
    ``equalities`` (pairs of expressions that must be equal), each once, in the order first met."""

    relations: list[str] = field(default_factory=list)
    equalities: list[tuple[Expr, Expr]] = field(default_factory=list)
    checks: list[tuple[Expr, str]] = field(default_factory=list)  # (e, rel): "e rel 0" held for the samples

    def record(self, diff: Expr, rel: str, lhs: Expr, rhs: Expr) -> None:
        if (diff, rel) in self.checks:
            return
        self.checks.append((diff, rel))
        if rel == "==":
            self.equalities.append((lhs, rhs))
        # printed as "non-constant part rel -constant"
        var = Expr(0, diff.terms)
        self.relations.append(f"{var} {rel} {-diff.const}")


_GUARDS: contextvars.ContextVar[Guards | None] = contextvars.ContextVar("tf2tosa_guards", default=None)


@contextmanager
def guards() -> Iterator[Guards]:
    """Record the guards of the comparisons made inside the ``with`` block."""
    g = Guards()
    token = _GUARDS.set(g)
    try:
        yield g
    finally:
        _GUARDS.reset(token)


@contextmanager
def no_guards() -> Iterator[None]:
    """Comparisons inside are not guards (numeric evaluation at the sample sizes, checked by other means)."""
    token = _GUARDS.set(None)
    try:
        yield
    finally:
        _GUARDS.reset(token)


def _compare(a: Any, b: Any, rel: str) -> bool:
    ea, eb = as_expr(a), as_expr(b)
    d = ea - eb
    x = int.__int__(a) if isinstance(a, int) else a
    y = int.__int__(b) if isinstance(b, int) else b
    res = {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[rel]
    if not d.is_const:
        g = _GUARDS.get()
        if g is not None:
            held = rel if res else {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}[rel]
            g.record(d, held, ea, eb)
    return bool(res)


# ------------------------------------------------------------------------------------------------ SymDim
class SymDim(int):
    """An int (the sample size) carrying the exact :class:`Expr` of a dimension."""

    expr: Expr

    def __new__(cls, hint: int, expr: Expr | str) -> SymDim:
        self = super().__new__(cls, int(hint))
        self.expr = Expr(0, ((("sym", expr), 1),)) if isinstance(expr, str) else expr
        return self

    def __reduce__(self) -> Any:  # pickled (multiprocessing) as the sample value
        return (int, (int.__int__(self),))

    @property
    def is_symbolic(self) -> bool:
        return not self.expr.is_const

    def __repr__(self) -> str:
        return f"SymDim({int.__int__(self)}, {str(self.expr)!r})"

    def __str__(self) -> str:  # the sample size, as printed for an int
        return str(int.__int__(self))

    # arithmetic keeps the expression
    def _bin(self, other: Any, fn: Any, efn: Any, swap: bool = False) -> Any:
        if not isinstance(other, int) or isinstance(other, bool):
            return NotImplemented
        x, y = int.__int__(self), int.__int__(other)
        ea, eb = self.expr, as_expr(other)
        if swap:
            x, y, ea, eb = y, x, eb, ea
        return _wrap(fn(x, y), efn(ea, eb))

    def __add__(self, o: Any) -> Any:
        return self._bin(o, lambda x, y: x + y, lambda a, b: a + b)

    def __radd__(self, o: Any) -> Any:
        return self._bin(o, lambda x, y: x + y, lambda a, b: a + b, True)

    def __sub__(self, o: Any) -> Any:
        return self._bin(o, lambda x, y: x - y, lambda a, b: a - b)

    def __rsub__(self, o: Any) -> Any:
        return self._bin(o, lambda x, y: x - y, lambda a, b: a - b, True)

    def __mul__(self, o: Any) -> Any:
        return self._bin(o, lambda x, y: x * y, lambda a, b: a * b)

    def __rmul__(self, o: Any) -> Any:
        return self._bin(o, lambda x, y: x * y, lambda a, b: a * b, True)

    def __floordiv__(self, o: Any) -> Any:
        return self._bin(o, lambda x, y: x // y, lambda a, b: a.floordiv(b))

    def __rfloordiv__(self, o: Any) -> Any:
        return self._bin(o, lambda x, y: x // y, lambda a, b: a.floordiv(b), True)

    def __mod__(self, o: Any) -> Any:
        return self._bin(o, lambda x, y: x % y, lambda a, b: a.mod(b))

    def __rmod__(self, o: Any) -> Any:
        return self._bin(o, lambda x, y: x % y, lambda a, b: a.mod(b), True)

    def __neg__(self) -> Any:
        return _wrap(-int.__int__(self), -self.expr)

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        return self if _compare(self, 0, ">=") else -self

    # comparisons that depend on a symbol are guards
    def __eq__(self, o: object) -> bool:
        if not isinstance(o, int):
            return NotImplemented
        return _compare(self, o, "==")

    def __ne__(self, o: object) -> bool:
        if not isinstance(o, int):
            return NotImplemented
        return _compare(self, o, "!=")

    def __lt__(self, o: Any) -> bool:
        return _compare(self, o, "<") if isinstance(o, int) else NotImplemented

    def __le__(self, o: Any) -> bool:
        return _compare(self, o, "<=") if isinstance(o, int) else NotImplemented

    def __gt__(self, o: Any) -> bool:
        return _compare(self, o, ">") if isinstance(o, int) else NotImplemented

    def __ge__(self, o: Any) -> bool:
        return _compare(self, o, ">=") if isinstance(o, int) else NotImplemented

    def __bool__(self) -> bool:
        return _compare(self, 0, "!=")

    __hash__ = int.__hash__


def _wrap(value: int, expr: Expr) -> int:
    return int(value) if expr.is_const else SymDim(value, expr)


def as_expr(x: Any) -> Expr:
    """The expression of a size: a :class:`SymDim`'s own, a constant for a plain int."""
    if isinstance(x, SymDim):
        return x.expr
    return Expr(int(x))


def size(x: Any) -> int:
    """``int(x)``, except that a :class:`SymDim` stays one (a dimension size read from a shape)."""
    return x if isinstance(x, SymDim) else int(x)


def is_symbolic(x: Any) -> bool:
    return isinstance(x, SymDim) and x.is_symbolic


def symbol(name: str, hint: int) -> SymDim:
    """The size of dimension symbol ``name`` with sample ``hint``."""
    return SymDim(hint, name)


def sym_min(a: int, b: int) -> int:
    """``min`` that keeps the expression (no guard)."""
    return _wrap(min(int(a), int(b)), as_expr(a).minmax(as_expr(b), "min"))


def sym_max(a: int, b: int) -> int:
    """``max`` that keeps the expression (no guard)."""
    return _wrap(max(int(a), int(b)), as_expr(a).minmax(as_expr(b), "max"))


#: attribute of a CONST / CONST_SHAPE op whose integer values carry dimension expressions: an object array of the
#: same shape as ``values`` holding ints and :class:`SymDim` (``values`` keeps the sample sizes); serializers
#: ignore it (they read the catalogue's attributes only)
SYM_VALUES = "sym_values"


def symbolic_array(items: Any) -> np.ndarray:
    """An object array of ``items`` (nested sequences of ints / :class:`SymDim`), the symbols kept."""
    arr = np.empty(np.shape(np.asarray(items, dtype=object)), dtype=object)
    flat = np.asarray(items, dtype=object).reshape(-1)
    arr.reshape(-1)[:] = [x if isinstance(x, SymDim) else int(x) for x in flat]
    return arr


def has_symbols(arr: Any) -> bool:
    """Whether an array (or sequence) holds a symbolic :class:`SymDim`."""
    return any(is_symbolic(x) for x in np.asarray(arr, dtype=object).reshape(-1))


#: attribute of an integer CONST whose *shape* carries dimension expressions and whose values are affine in the
#: element index (``tfl.range`` with a limit computed from a size, and what folding keeps affine):
#: ``(shape, offset, coefs)`` meaning ``values[i_0, …] = offset + Σ coefs[a]·i_a``
SYM_AFFINE = "sym_affine"

Affine = tuple[tuple[int, ...], int, tuple[int, ...]]


def affine_of_array(arr: Any) -> Affine | None:
    """The affine form of a (small, numeric) integer array, or None when it is not affine in the index."""
    a = np.asarray(arr)
    if a.dtype.kind not in "iu" or a.size == 0 or a.size > 1 << 16:
        return None
    offset = int(a.reshape(-1)[0])
    coefs = []
    for ax, n in enumerate(a.shape):
        idx = [0] * a.ndim
        if n > 1:
            idx[ax] = 1
        coefs.append(int(a[tuple(idx)]) - offset if n > 1 else 0)
    grid = np.indices(a.shape).reshape(a.ndim, -1) if a.ndim else np.zeros((0, 1), np.int64)
    want = offset + sum(c * grid[k] for k, c in enumerate(coefs))
    if not np.array_equal(np.asarray(want).reshape(-1), a.reshape(-1).astype(np.int64)):
        return None
    return tuple(int(n) for n in a.shape), offset, tuple(coefs)


def same_size(a: Any, b: Any) -> bool:
    """Whether two sizes are equal as expressions (no guard)."""
    return as_expr(a) == as_expr(b)
