"""``--dynamic``: one symbolic TOSA 1.1-draft program whose dimension symbols flow through the real lowerings.

before: a model converted (by the normal pipeline) with every kept-open input dimension a
:class:`~tf2tosa.ir.symdim.SymDim`: a sample (hint) size carrying the symbol (``batch``, ``d1``), so that the
lowerings' own shape arithmetic gives every dimension, shape operand and folded shape constant its exact expression
(``(d1 - 64) // 16 + 1``); plus the same model converted at other hints (the *check* conversion).
after (:func:`symbolise`): the first graph with ``?`` dimensions (values carry the expressions as labels), each shape
operand holding an expression computed at run time by the 1.1 draft's EXT-SHAPE operators (``DIM`` per symbol,
``ADD/SUB/MUL/DIV_FLOOR/DIV_CEIL/MOD/MIN/MAX_SHAPE`` per expression node, each expression once, ``CONCAT_SHAPE``
with ``CONST_SHAPE`` pieces), the equalities the conversion relied on as ``ASSERT_EQUAL_SHAPE``.

**Safety net.** Every integer of the graph (value dimensions, attributes, ``CONST_SHAPE`` values, constant tensors'
shapes and values) must be identical in the two conversions, or symbolic in the first with its expression evaluated
at the check hints equal to the check conversion's value.  Anything else means a lowering lost a symbol (an
``int(x)``, an ``np.array(shape)``) or a size-dependent constant that TOSA cannot compute at run time: one "not yet"
:class:`~tf2tosa.errors.ConversionError` naming the op and tensor, never a silently wrong program.  The check sizes
leave a remainder in as many divisions by a constant as possible (those the first conversion's size expressions hold, a
strided window's ``(d1 - 512) // 160``: :func:`divisions`), so a lowering that is right only for remainder-free
sizes (a pad that is negative at any remainder) is caught whatever the samples (:func:`check_hints`).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import NotYetError
from ..ir import Graph
from ..ir.graph import Operation, Value
from ..ir.records import SymbolicDims
from ..ir.symdim import SYM_VALUES, Expr, Guards, SymDim, as_expr, is_symbolic
from ..ir.types import DType, TensorType
from ..tosa.optable import DRAFT_VERSION
from ..tosa.shapes import graph_equalities

__all__ = ["CHECK_OFFSETS", "DEFAULT_HINTS", "REMAINDER_OFFSETS", "check_hints", "divisions", "equality_violations",
           "guard_violations", "guard_warning_lines", "symbolise"]

#: the sample sizes tried, in order, for symbols without a hint (``--hint``; the first at which the model converts):
#: distinct from each other and from common layer sizes; a non-batch dimension's is large enough for framing and
#: convolution windows, and prime first (no divisibility the lowerings could branch on), then even
DEFAULT_HINTS: dict[str, tuple[int, ...]] = {"batch": (3, 3, 3), "": (401, 402, 400)}
#: offsets tried, in order, for the check conversion's hints (the first that keeps every guard true)
CHECK_OFFSETS = (7, 6, 13, 12, 30, 60, 210)
#: further offsets (primes, up to about 2^11 so that nested strided windows' counts move too) tried for check sizes
#: that leave a remainder in more divisions than any of :data:`CHECK_OFFSETS`
REMAINDER_OFFSETS = (11, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 163, 331,
                     677, 1361, 2039)

_OPCODES = {"fdiv": "DIV_FLOOR_SHAPE", "cdiv": "DIV_CEIL_SHAPE", "mod": "MOD_SHAPE", "mul": "MUL_SHAPE",
            "min": "MIN_SHAPE", "max": "MAX_SHAPE"}


def _not_yet(msg: str, file: str | None, op: str | None = None, tensor: str | None = None) -> NotYetError:
    return NotYetError(f"--dynamic: not yet: {msg}", file=file, op=op, tensor=tensor)


def _holds(g: Guards, env: Mapping[str, int], equalities_only: bool = False) -> bool:
    ops = {"==": lambda x: x == 0, "!=": lambda x: x != 0, "<": lambda x: x < 0, "<=": lambda x: x <= 0,
           ">": lambda x: x > 0, ">=": lambda x: x >= 0}
    try:
        return all(ops[rel](e.evaluate(env)) for e, rel in g.checks if rel == "==" or not equalities_only)
    except (KeyError, ZeroDivisionError):
        return False


def check_hints(g: Guards, hints: Mapping[str, int],
                divs: Sequence[tuple[Expr, int]] = ()) -> dict[str, int] | None:
    """Hints for the check conversion: each hint plus an offset (the k-th symbol's offset, k from 0, is the
    (2k+1)-th multiple: distinct per symbol, and odd for every symbol when the offset is odd, so a lowering that
    depends on a size's parity, like SAME padding with stride 2, differs between the conversions) that keeps every
    recorded guard true, the first of :data:`CHECK_OFFSETS` (then :data:`REMAINDER_OFFSETS`) among those leaving a
    remainder in the most divisions of ``divs`` (:func:`divisions`); None when none keeps the guards.

    When sizes that keep only the equalities (the guards a program asserts at run time) leave a remainder in more
    divisions, those are returned instead: the other guards (not enforced) then held only at remainder-free sizes,
    a lowering decided on a remainder, and the check conversion there refuses the program."""
    offsets = CHECK_OFFSETS + (REMAINDER_OFFSETS if divs else ())
    envs = [{s: h + off * (2 * k + 1) for k, (s, h) in enumerate(sorted(hints.items()))} for off in offsets]
    kept = [env for env in envs if _holds(g, env)]
    if not kept:
        return None
    best = min(kept, key=lambda env: _without_remainder(divs, env))  # the first of the best
    if divs:
        asserted = [env for env in envs if _holds(g, env, equalities_only=True)]
        other = min(asserted, key=lambda env: _without_remainder(divs, env))
        if _without_remainder(divs, other) < _without_remainder(divs, best):
            return other
    return best


def _without_remainder(divs: Sequence[tuple[Expr, int]], env: Mapping[str, int]) -> int:
    """How many divisions (numerator, divisor) leave no remainder at ``env`` (one that cannot be evaluated counts)."""
    count = 0
    for n, d in divs:
        try:
            count += n.evaluate(env) % d == 0
        except (KeyError, ZeroDivisionError):
            count += 1
    return count


def divisions(graph: Graph, g: Guards | None = None) -> list[tuple[Expr, int]]:
    """The divisions by a constant > 1 (floor, ceiling and modulo atoms, nested ones too) in ``graph``'s size
    expressions: value dimensions, symbolic constants and attributes, and the guards ``g`` recorded; each once,
    in a stable order.  A strided window over a symbolic size gives one (``(d1 - 512) // 160``)."""
    found: dict[str, tuple[Expr, int]] = {}

    def walk(e: Expr) -> None:
        for atom, _ in e.terms:
            if atom[0] == "sym":
                continue
            walk(atom[1])
            walk(atom[2])
            if atom[0] in ("fdiv", "cdiv", "mod") and atom[2].is_const and atom[2].const > 1:
                found.setdefault(f"{atom[1]} % {atom[2].const}", (atom[1], atom[2].const))

    def visit(x: Any) -> None:
        if is_symbolic(x):
            walk(as_expr(x))

    for v in graph.values():
        for d in v.shape:
            visit(d)
    for op in graph.ops.values():
        for name, val in op.attrs.items():
            if name == SYM_VALUES:
                for x in np.asarray(val, dtype=object).reshape(-1):
                    visit(x)
            elif isinstance(val, (list, tuple)):
                for x in val:
                    visit(x)
            else:
                visit(val)
    for e, _ in (g.checks if g is not None else []):
        walk(e)
    return [found[k] for k in sorted(found)]


def _same_attr(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        return x.shape == y.shape and x.dtype == y.dtype and bool(np.array_equal(x, y))
    if isinstance(a, Graph) or isinstance(b, Graph):
        return False  # control-flow bodies: not yet compared
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_attr(x, y) for x, y in zip(a, b))
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
        return int.__int__(a) == int.__int__(b)
    return bool(a == b) if type(a) is type(b) else False


def _same_data(a: Any, b: Any) -> bool:
    """Two constants' data are equal: shape, element type and every element (a NaN equals a NaN)."""
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    return bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))


def _agrees(a: Any, b: Any, env: Mapping[str, int]) -> bool:
    """An integer of the first conversion against the check conversion's: equal, or an expression whose value at
    the check hints is the check value."""
    if is_symbolic(a):
        try:
            return as_expr(a).evaluate(env) == int(b)
        except (KeyError, ZeroDivisionError):
            return False
    if isinstance(a, (int, np.integer)) and isinstance(b, (int, np.integer)):
        return int(a) == int(b)
    return bool(a == b)  # never through int(): 0.0103 and 0.0099 would both be 0


def _where(op: Operation) -> str:
    return f"{op.opcode}#{op.id}"


def symbolise(base: Graph, check: Graph, hints: Mapping[str, int], check_env: Mapping[str, int],
              guards: Guards, file: str | None = None) -> Graph:
    """Turn ``base`` (converted with symbolic input dimensions at ``hints``) into the symbolic program, checked
    against ``check`` (the same conversion at ``check_env``); see the module docstring.  ``base`` is changed in
    place and returned with ``graph.record.specification_version = "1.1.draft"`` and ``graph.dims`` (where each
    symbol is read, the equalities, the size guards and the sample sizes)."""
    orders = [base.topological_order(), check.topological_order()]
    at1 = ", ".join(f"{s}={hints[s]}" for s in sorted(hints))
    at2 = ", ".join(f"{s}={check_env[s]}" for s in sorted(hints))
    pairs = _paired_values(base, check, orders, f"{at1} and at {at2}", file)
    _check_dims(pairs, check_env, at1, at2, file)  # 1. every value's dimensions
    rebuilt = _check_attrs(orders, check_env, file)  # 2. attributes and constants
    # 3. the symbols' sources: the first input dimension that is the symbol itself
    sources, extra = _symbol_sources(base)
    emitter = _Emitter(base, sources)
    equalities = _assert_equalities(base, emitter, sources, extra, guards)
    # 4. shape operands computed at run time
    for op0 in rebuilt:
        elems = list(np.asarray(op0.attrs[SYM_VALUES], dtype=object).reshape(-1))
        missing = set().union(*(as_expr(e).symbols() for e in elems)) - set(sources)
        if missing:
            raise _not_yet(f"no input dimension is {', '.join(sorted(missing))} itself", file, op=_where(op0))
        new = emitter.shape(elems, op0.result.type, op0.result.name)
        base.replace_all_uses(op0.result, new)
        base.remove_op(op0)
    _labels(base)  # 5. types: expressions become labels (printed ?), constant sizes plain ints
    base.record.specification_version = DRAFT_VERSION
    base.dims.symbols = {s: {"input": v.name, "dim": k} for s, (v, k) in sorted(sources.items())}
    base.dims.equalities = equalities + graph_equalities(base.topological_order())
    base.dims.guards = list(guards.relations)
    base.dims.hints = dict(sorted(hints.items()))
    return base


def _paired_values(base: Graph, check: Graph, orders: list[list[Operation]], at: str,
                   file: str | None) -> list[tuple[Value, Value]]:
    """Each value of ``base`` with the same value of ``check`` (inputs, then every op's results in topological
    order); NotYet when the two conversions differ in their operators or ``base`` has control flow."""
    for op0 in orders[0]:
        if op0.regions:  # their values are not compared nor relabelled yet
            raise _not_yet(f"control flow ({op0.opcode}) in a symbolic program", file, op=_where(op0),
                           tensor=op0.results[0].name if op0.results else None)
    if len(orders[0]) != len(orders[1]) or len(base.inputs) != len(check.inputs):
        first = next((a for a, b in zip(*orders) if a.name != b.name or a.location != b.location),
                     orders[0][min(len(orders[0]), len(orders[1])) - 1] if orders[0] else None)
        where = f" from {first.location or _where(first)} on" if first is not None else ""
        raise _not_yet(f"the conversions at {at} differ in their operators{where} (a lowering branched on a size, "
                       f"or unrolled a loop over it)", file, op=_where(first) if first is not None else None)
    pairs: list[tuple[Value, Value]] = list(zip(base.inputs, check.inputs))
    for op0, op1 in zip(*orders):
        if (op0.name != op1.name or len(op0.results) != len(op1.results) or len(op0.operands) != len(op1.operands)
                or set(op0.attrs) - {SYM_VALUES} != set(op1.attrs) - {SYM_VALUES}):
            raise _not_yet(f"the conversions at {at} differ at {_where(op0)} (a lowering branched on a size)", file,
                           op=_where(op0))
        pairs.extend(zip(op0.results, op1.results))
    return pairs


def _check_dims(pairs: list[tuple[Value, Value]], check_env: Mapping[str, int], at1: str, at2: str,
                file: str | None) -> None:
    """Every dimension of the first conversion is the check conversion's, or an expression worth it there."""
    for v0, v1 in pairs:
        if v0.type.rank != v1.type.rank or v0.type.dtype is not v1.type.dtype:
            raise _not_yet("a value changes rank or type with the size", file, tensor=v0.name)
        for k, (a, b) in enumerate(zip(v0.shape, v1.shape)):
            if not _agrees(a, b, check_env):
                what = f"expression {as_expr(a)}" if is_symbolic(a) else f"{int(a)}"
                raise _not_yet(f"dimension {k} of {v0.name!r} is {what} at {at1} but {int(b)} at {at2}: a "
                               f"lowering lost the symbol",
                               file, op=_where(v0.producer) if v0.producer else None, tensor=v0.name)


def _check_attrs(orders: list[list[Operation]], check_env: Mapping[str, int], file: str | None) -> list[Operation]:
    """Every attribute and constant agrees between the two conversions (a symbolic one at the check sizes);
    returns the CONST_SHAPEs whose values are computed from the sizes (to be built at run time)."""
    rebuilt: list[Operation] = []
    for op0, op1 in zip(*orders):
        tensor = op0.results[0].name if op0.results else None
        for name in op0.attrs:
            if name == SYM_VALUES:
                continue
            if name == "values" and op0.opcode in ("CONST", "CONST_SHAPE"):
                sym = op0.results[0].sym_const()
                if sym is None:  # a plain constant (weights, a float 1/N …): the same data at both sizes
                    if not _same_data(op0.attrs["values"], op1.attrs["values"]):
                        raise _not_yet(f"the constant {tensor!r} of {_where(op0)} depends on the sizes in a way the "
                                       f"conversion did not keep symbolic", file, op=_where(op0), tensor=tensor)
                    continue
                a0 = np.asarray(sym, dtype=object)
                a1 = np.asarray(op1.attrs["values"])
                if a0.shape != a1.shape or not all(_agrees(x, y, check_env)
                                                   for x, y in zip(a0.reshape(-1), a1.reshape(-1))):
                    raise _not_yet(f"the constant {tensor!r} of {_where(op0)} depends on the sizes in a way the "
                                   f"conversion did not keep symbolic", file, op=_where(op0), tensor=tensor)
                if any(is_symbolic(x) for x in a0.reshape(-1)):
                    if op0.opcode == "CONST":
                        raise _not_yet(f"the constant tensor {tensor!r} of {_where(op0)} holds values computed "
                                       f"from the sizes (TOSA 1.1 has no operator making a tensor of a shape)",
                                       file, op=_where(op0), tensor=tensor)
                    rebuilt.append(op0)
                continue
            if not _same_attr(op0.attrs[name], op1.attrs[name]):
                raise _not_yet(f"attribute {name} of {_where(op0)} depends on the sizes", file, op=_where(op0),
                               tensor=tensor)
    return rebuilt


def _symbol_sources(base: Graph) -> tuple[dict[str, tuple[Value, int]], list[tuple[str, Value, int]]]:
    """Per symbol the first input dimension that is the symbol itself (input, axis), and the other such
    dimensions (symbol, input, axis)."""
    sources: dict[str, tuple[Value, int]] = {}
    extra: list[tuple[str, Value, int]] = []
    for v in base.inputs:
        for k, d in enumerate(v.shape):
            if isinstance(d, SymDim) and len(d.expr.terms) == 1 and d.expr.terms[0] == (("sym", _name(d)), 1) \
                    and not d.expr.const:
                s = _name(d)
                if s in sources:
                    extra.append((s, v, k))
                else:
                    sources[s] = (v, k)
    return sources, extra


def _assert_equalities(base: Graph, emitter: _Emitter, sources: Mapping[str, tuple[Value, int]],
                       extra: list[tuple[str, Value, int]], guards: Guards) -> list[dict[str, Any]]:
    """An ASSERT_EQUAL_SHAPE for each further input dimension of a symbol and each guard equality over the
    symbols; returns them as ``dim_equalities`` entries."""
    equalities: list[dict[str, Any]] = []
    for s, v, k in extra:
        src, axis = sources[s]
        d2 = base.add_op("tosa.DIM", [v], [_SHAPE1], {"axis": k}, [f"{s}_dim"]).result
        base.add_op("tosa.ASSERT_EQUAL_SHAPE", [emitter.symbol(s), d2], [], {"allow_broadcast": False})
        equalities.append({"symbol": s, "a": [src.name, axis], "b": [v.name, k]})
    for a, b in guards.equalities:
        if not (a.symbols() | b.symbols()) <= set(sources):
            continue
        base.add_op("tosa.ASSERT_EQUAL_SHAPE", [emitter.emit(a), emitter.emit(b)], [], {"allow_broadcast": False})
        equalities.append({"expression": f"{a} == {b}"})
    return equalities


def _labels(base: Graph) -> None:
    """Symbolic dimensions of every value become labels (printed ?), constant sizes plain ints; symbolic
    attributes their ints."""
    for v in base.values():
        if any(isinstance(d, SymDim) for d in v.shape):
            v.type = v.type.with_shape(tuple(str(d.expr) if is_symbolic(d) else int(d) for d in v.shape))
    for op in base.ops.values():
        op.attrs.pop(SYM_VALUES, None)
        for name, val in op.attrs.items():
            if isinstance(val, SymDim):
                op.attrs[name] = int(val)


_BINOPS: dict[type, Callable[[int, int], int]] = {ast.Add: operator.add, ast.Sub: operator.sub,
                                                  ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
                                                  ast.Mod: operator.mod}
_CMPOPS: dict[type, Callable[[int, int], bool]] = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
                                                   ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
_CALLS: dict[str, Callable[[int, int], int]] = {"min": min, "max": max, "ceildiv": lambda a, b: -(-a // b)}


def _eval(node: ast.AST, env: Mapping[str, int]) -> Any:
    """A guard's text (the printed form of :mod:`tf2tosa.ir.symdim`: integers, symbols, ``+ - * // %``, ``min``,
    ``max``, ``ceildiv``, one comparison) evaluated at ``env``; ValueError for anything else."""
    if isinstance(node, ast.Expression):
        return _eval(node.body, env)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return int(env[node.id])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, env)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS \
            and len(node.args) == 2 and not node.keywords:
        return _CALLS[node.func.id](_eval(node.args[0], env), _eval(node.args[1], env))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
        return _CMPOPS[type(node.ops[0])](_eval(node.left, env), _eval(node.comparators[0], env))
    raise ValueError(f"not a dimension guard: {ast.dump(node)}")


def _sizes(dims: SymbolicDims, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """Each symbol's size when the program's inputs have ``shapes`` (read where ``dims.symbols`` says)."""
    env: dict[str, int] = {}
    for sym, where in dims.symbols.items():
        shape = shapes.get(where["input"])
        if shape is not None and where["dim"] < len(shape):
            env[sym] = int(shape[where["dim"]])
    return env


def guard_violations(dims: SymbolicDims, shapes: Mapping[str, Sequence[int]]) -> list[str]:
    """The guards of a symbolic program (``dims.guards``) that do not hold when its inputs have ``shapes``
    (input name → shape): sizes on the other side of a comparison the lowerings made at the sample sizes, which the
    conversion check did not cover (the program may still be right there: many such comparisons choose between
    two equivalent forms)."""
    env = _sizes(dims, shapes)
    out = []
    for text in dims.guards or []:
        try:
            ok = bool(_eval(ast.parse(text, mode="eval"), env))
        except (KeyError, ValueError, SyntaxError, ZeroDivisionError):
            continue
        if not ok:
            out.append(text)
    return out


def equality_violations(dims: SymbolicDims, shapes: Mapping[str, Sequence[int]]) -> list[str]:
    """The equalities a symbolic program asserts (``dims.equalities``, checked at run time by
    ``ASSERT_EQUAL_SHAPE`` and the operators' own shape checks) that do not hold when its inputs have ``shapes``,
    each as one phrase in terms of the symbols and the sizes (``(d1 - 1) % 2 == 0 does not hold at d1=20``)."""
    env = _sizes(dims, shapes)
    at = ", ".join(f"{k}={v}" for k, v in env.items())

    def value(label: Any) -> int | None:
        try:
            return int(label) if isinstance(label, int) else int(_eval(ast.parse(str(label), mode="eval"), env))
        except (KeyError, ValueError, SyntaxError, ZeroDivisionError):
            return None

    out = []
    for e in dims.equalities:
        if "expression" in e:
            text = str(e["expression"])
            try:
                ok = bool(_eval(ast.parse(text, mode="eval"), env))
            except (KeyError, ValueError, SyntaxError, ZeroDivisionError):
                continue
            if not ok:
                out.append(f"{text} does not hold at {at}")
        elif "symbol" in e:
            (ia, da), (ib, db) = e["a"], e["b"]
            sa, sb = shapes.get(ia), shapes.get(ib)
            if sa is not None and sb is not None and da < len(sa) and db < len(sb) and sa[da] != sb[db]:
                out.append(f"dimension {da} of {ia!r} and dimension {db} of {ib!r} are both {e['symbol']}, but "
                           f"{sa[da]} and {sb[db]}")
        elif "a" in e and "b" in e:
            va, vb = value(e["a"]), value(e["b"])
            if va is None or vb is None or va == vb or (e.get("broadcast") and 1 in (va, vb)):
                continue
            out.append(f"{e['a']} == {e['b']} (at {e.get('op')}) does not hold at {at}: {va} vs {vb}")
    if not out:  # a program read back from .mlir: its asserted equalities travel among the guards
        out = [f"{g} does not hold at {at}" for g in guard_violations(dims, shapes) if " == " in g]
    return out


def guard_warning_lines(dims: SymbolicDims, shapes: Mapping[str, Sequence[int]]) -> list[str]:
    """The warning lines of :meth:`TosaModel.guard_warnings` for ``dims`` at input ``shapes``."""
    env = _sizes(dims, shapes)
    at = ", ".join(f"{k}={v}" for k, v in env.items())
    hints = dims.hints or {}
    sample = ", ".join(f"{k}={v}" for k, v in hints.items())
    return [f"size guard '{g}' does not hold at {at} (the conversion decided it at {sample or 'its sample sizes'}; "
            "the program may still be right here)" for g in guard_violations(dims, shapes)]


def _name(d: SymDim) -> str:
    return str(d.expr.terms[0][0][1])


_SHAPE1 = TensorType((1,), DType.SHAPE)


class _Emitter:
    """EXT-SHAPE subgraphs for expressions, each (sub)expression computed once."""

    def __init__(self, graph: Graph, sources: Mapping[str, tuple[Value, int]]) -> None:
        self.g = graph
        self.sources = sources
        self.cache: dict[Any, Value] = {}

    def const(self, items: Sequence[int]) -> Value:
        key = ("const", tuple(items))
        if key not in self.cache:
            self.cache[key] = self.g.add_const(np.array(list(items), np.int64), DType.SHAPE, name="shape",
                                               op_name="tosa.CONST_SHAPE")
        return self.cache[key]

    def symbol(self, s: str) -> Value:
        key = ("sym", s)
        if key not in self.cache:
            v, k = self.sources[s]
            self.cache[key] = self.g.add_op("tosa.DIM", [v], [_SHAPE1], {"axis": k}, [f"{s}_dim"]).result
        return self.cache[key]

    def _op(self, opcode: str, a: Value, b: Value, name: str) -> Value:
        return self.g.add_op(f"tosa.{opcode}", [a, b], [_SHAPE1], {}, [name]).result

    def emit(self, e: Expr) -> Value:
        """The [1] shape value of ``e``."""
        if e.is_const:
            return self.const([e.const])
        if e in self.cache:
            return self.cache[e]
        if not e.const and len(e.terms) == 1 and e.terms[0][1] == 1:  # one atom
            atom = e.terms[0][0]
            if atom[0] == "sym":
                v = self.symbol(atom[1])
            else:
                v = self._op(_OPCODES[atom[0]], self.emit(atom[1]), self.emit(atom[2]), "dim")
            self.cache[e] = v
            return v
        pos = [(a, c) for a, c in e.terms if c > 0]
        neg = [(a, -c) for a, c in e.terms if c < 0]
        acc: Value | None = None
        for a, c in pos:
            t = self._term(a, c)
            acc = t if acc is None else self._op("ADD_SHAPE", acc, t, "dim")
        if acc is None:  # only negative terms: const - Σ
            acc = self.const([e.const])
            const = 0
        else:
            const = e.const
        for a, c in neg:
            acc = self._op("SUB_SHAPE", acc, self._term(a, c), "dim")
        if const > 0:
            acc = self._op("ADD_SHAPE", acc, self.const([const]), "dim")
        elif const < 0:
            acc = self._op("SUB_SHAPE", acc, self.const([-const]), "dim")
        self.cache[e] = acc
        return acc

    def _term(self, atom: Any, c: int) -> Value:
        key = ("term", atom, c)
        if key in self.cache:
            return self.cache[key]
        v = self.emit(Expr(0, ((atom, 1),)))
        if c != 1:
            v = self._op("MUL_SHAPE", v, self.const([c]), "dim")
        self.cache[key] = v
        return v

    def shape(self, elems: Sequence[Any], out_t: TensorType, name: str) -> Value:
        """CONCAT_SHAPE of the elements: runs of constants as one CONST_SHAPE, each expression computed; the same
        list of elements is built once."""
        key = ("shape", tuple(as_expr(e) for e in elems))
        if key in self.cache:
            return self.cache[key]
        self.cache[key] = self._shape(elems, out_t, name)
        return self.cache[key]

    def _shape(self, elems: Sequence[Any], out_t: TensorType, name: str) -> Value:
        parts: list[Value] = []
        run: list[int] = []
        for e in elems:
            if is_symbolic(e):
                if run:
                    parts.append(self.const(run))
                    run = []
                parts.append(self.emit(as_expr(e)))
            else:
                run.append(int(e))
        if run:
            parts.append(self.const(run))
        if len(parts) == 1:
            return parts[0]
        return self.g.add_op("tosa.CONCAT_SHAPE", parts, [out_t], {}, [name]).result
