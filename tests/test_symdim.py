"""Symbolic dimension sizes (tf2tosa/ir/symdim.py): the expression a SymDim carries must evaluate, at any sizes of
its symbols, to what plain Python integer arithmetic gives (the oracle) for the same computation; equal expressions
print equal; comparisons on symbols are recorded as guards."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

from tf2tosa.ir.symdim import SymDim, guards, is_symbolic, sym_max, sym_min, symbol

#: computations the lowerings do on sizes (framing, strided slices, reshape targets, padding, attention)
COMPUTATIONS: dict[str, Callable[[int, int], int]] = {
    "frames": lambda b, n: (n - 64) // 16 + 1,
    "trim": lambda b, n: n // 16 * 16,
    "rows": lambda b, n: b * n,
    "half": lambda b, n: b * (n // 2) * 12,
    "ceil": lambda b, n: -(-n // 3),
    "negdiv": lambda b, n: b - (n // 3) - (-(n + b) // 2),
    "ceil2": lambda b, n: (n + 2) // 3 - (-(-n // 3)) + b,
    "mod": lambda b, n: (2 * n + 1) % 4 + b,
    "clamp": lambda b, n: sym_max(sym_min(n - 5, 3 * b), 1),
    "affine": lambda b, n: 3 * (n + 2 * b) - 2 * n - 6 * b + 7,
    "square": lambda b, n: (n + 1) * (n + 1) - n * n,
}


@pytest.mark.parametrize("name", list(COMPUTATIONS))
def test_expression_evaluates_like_int_arithmetic(name: str) -> None:
    fn = COMPUTATIONS[name]
    rng = random.Random(13)
    for hb, hn in [(3, 401), (1, 64), (7, 1000)]:
        r = fn(symbol("batch", hb), symbol("d1", hn))
        assert int(r) == fn(hb, hn)  # the sample value is the plain computation
        expr = r.expr if isinstance(r, SymDim) else None
        for _ in range(50):
            b, n = rng.randint(1, 40), rng.randint(64, 5000)
            got = expr.evaluate({"batch": b, "d1": n}) if expr is not None else int(r)
            assert got == fn(b, n), (name, b, n, str(expr))
            if expr is not None:  # the printed form (graph.dims.guards, value labels) reads back as Python
                env = {"batch": b, "d1": n, "ceildiv": lambda p, q: -(-p // q), "min": min, "max": max}
                assert eval(str(expr), {"__builtins__": {}}, env) == fn(b, n), (name, str(expr))


def test_canonical_forms() -> None:
    b, n = symbol("batch", 3), symbol("d1", 400)
    def e(x: int) -> str:
        assert isinstance(x, SymDim)
        return str(x.expr)

    assert e(b * n) == e(n * b) == "batch * d1" and (b * n).expr == (n * b).expr
    assert e(4 * b * n // 4) == "batch * d1"
    assert e((n + 16 - 16) // 16 * 16) == "16*(d1 // 16)"
    assert e(3 * (n + 2 * b) - 2 * n - 6 * b + 7) == "d1 + 7"
    assert not is_symbolic(n - n + 5) and int(n - n + 5) == 5 and type(n - n + 5) is int
    assert e((n - 64) // 16 + 1) == "(d1 - 64) // 16 + 1" and str(n) == "400"


def test_comparisons_on_symbols_are_guards() -> None:
    b, n = symbol("batch", 3), symbol("d1", 400)
    with guards() as g:
        assert n >= 64 and b != 1 and n == n and not (b * 2 == 7)
        assert n - n == 0  # constant: no guard
    assert g.relations == ["d1 >= 64", "batch != 1", "2*batch != 7"]
    with guards() as g:
        assert b * n == n * b and (n // 2) * 2 == n
    assert [(str(x), str(y)) for x, y in g.equalities] == [("2*(d1 // 2)", "d1")]


def test_sizes_behave_as_ints() -> None:
    n = symbol("d1", 400)
    assert list(range(n))[-1] == 399 and [0] * symbol("batch", 2) == [0, 0] and hash(n) == hash(400)
    assert all(int(x) == x for x in itertools.islice(iter([n, n + 1]), 2))
