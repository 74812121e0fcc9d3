"""Type coverage: every row of every operator's "Supported Data Types" table has a working kernel path.

For each catalogue row (PRO-INT, PRO-FP, EXT-INT16, EXT-INT4, EXT-BF16, EXT-FP8E4M3, EXT-FP8E5M2, EXT-FFT,
EXT-VARIABLE, EXT-CONTROLFLOW ...) a tiny graph is built from the row's element types, checked against the
catalogue (``static_check``), run with ``run_checked`` and the result dtypes compared with the row.  RESCALE
rows also run with DOUBLE_ROUND (EXT-DOUBLEROUND) and INEXACT_ROUND (EXT-INEXACTROUND).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.executor_testing import Const, GraphBuilder, In, Shape
from tf2tosa.executor import run_checked, static_check
from tf2tosa.ir.graph import Graph
from tf2tosa.ir.types import DType as D
from tf2tosa.ir.types import TensorType
from tf2tosa.tosa.optable import ACC_TYPES, OPS, TypeRow

ACC_NAME = {v: k for k, v in ACC_TYPES.items()}


def data(dt: D, shape: tuple[int, ...], rng: np.random.Generator, lo: float = -3, hi: float = 3) -> np.ndarray:
    """Small values of ``dt`` (integers in [lo, hi], floats in [lo, hi) rounded to the type)."""
    if dt is D.BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    if dt.is_int:
        return rng.integers(int(lo), int(hi) + 1, shape).astype(dt.np_dtype())
    return rng.uniform(lo, hi, shape).astype(np.float32).astype(dt.np_dtype())


def I(dt: D, shape: tuple[int, ...], rng: np.random.Generator, lo: float = -3, hi: float = 3) -> In:  # noqa: E743
    """A graph input of ``dt`` holding :func:`data`."""
    return In(data(dt, shape, rng, lo, hi), dt)


def zp(dt: D) -> Const:
    return Const(np.array([0]), dt)


def _conv(op: str, t: dict[str, D], rng: np.random.Generator) -> tuple[list[Any], dict[str, Any]]:
    it, wt, ot = t["in_t"], t["weight_t"], t["out_t"]
    acc = {"acc_type": ACC_NAME[t["acc_t"]], "local_bound": False}
    if op == "CONV2D":
        x, w, nb = data(it, (1, 5, 5, 2), rng), data(wt, (3, 3, 3, 2), rng), 3
        attrs = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1]}
    elif op == "CONV3D":
        x, w, nb = data(it, (1, 3, 4, 4, 2), rng), data(wt, (2, 2, 2, 2, 2), rng), 2
        attrs = {"pad": [0] * 6, "stride": [1] * 3, "dilation": [1] * 3}
    elif op == "DEPTHWISE_CONV2D":
        x, w, nb = data(it, (1, 5, 5, 2), rng), data(wt, (3, 3, 2, 2), rng), 4
        attrs = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1]}
    else:
        x, w, nb = data(it, (1, 3, 3, 2), rng), data(wt, (3, 2, 2, 2), rng), 3
        attrs = {"out_pad": [0, 0, 0, 0], "stride": [2, 2]}
    return [In(x, it), Const(w, wt), Const(data(ot, (nb,), rng), ot), zp(it), zp(wt)], attrs | acc


def recipe(op: str, row: TypeRow, rng: np.random.Generator) -> tuple[list[Any], dict[str, Any], list[D]]:
    """(operands, attributes, result dtypes) of a tiny valid instance of ``op`` with ``row``'s types."""
    t = row.types
    io = t.get("in_out_t")
    if op in ("CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D"):
        args, attrs = _conv(op, t, rng)
        return args, attrs, [t["out_t"]]
    if op == "ARGMAX":
        return [I(t["in_t"], (2, 3, 4), rng)], {"axis": 1, "nan_mode": "PROPAGATE"}, [t["out_t"]]
    if op in ("AVG_POOL2D", "MAX_POOL2D"):
        assert io is not None
        attrs: dict[str, Any] = {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0]}
        if op == "AVG_POOL2D":
            return [I(io, (1, 4, 4, 2), rng), zp(io), zp(io)], attrs | {"acc_type": ACC_NAME[t["acc_t"]]}, [io]
        return [I(io, (1, 4, 4, 2), rng)], attrs | {"nan_mode": "PROPAGATE"}, [io]
    if op == "FFT2D":
        return [I(io, (1, 4, 4), rng), I(io, (1, 4, 4), rng)], {"inverse": False}, [io, io]  # type: ignore[list-item]
    if op == "RFFT2D":
        return [I(io, (1, 4, 4), rng)], {}, [io, io]  # type: ignore[list-item]
    if op == "MATMUL":
        it = t["in_t"]
        return [I(it, (1, 2, 3), rng), I(it, (1, 3, 4), rng), zp(it), zp(it)], {}, [t["out_t"]]
    if op == "CLAMP":
        assert io is not None
        lo, hi = (-1, 2) if io.is_int else (-1.0, 1.5)
        return [I(io, (2, 3), rng)], {"min_val": lo, "max_val": hi, "nan_mode": "PROPAGATE"}, [io]
    if op in ("LOG", "RSQRT", "RECIPROCAL"):
        assert io is not None
        return [I(io, (2, 3), rng, 0.5, 3)], {}, [io]
    if op in ("ERF", "SIGMOID", "TANH", "CEIL", "COS", "EXP", "FLOOR", "SIN", "ABS", "BITWISE_NOT", "CLZ",
              "LOGICAL_NOT", "IDENTITY"):
        assert io is not None
        return [I(io, (2, 3), rng)], {}, [io]
    if op in ("ADD", "SUB", "MAXIMUM", "MINIMUM", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "LOGICAL_AND",
              "LOGICAL_OR", "LOGICAL_XOR", "POW", "INTDIV", "ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT",
              "LOGICAL_RIGHT_SHIFT"):
        assert io is not None
        a = data(io, (2, 3), rng, 0.5 if op == "POW" else -3, 3)
        b = data(io, (1, 3), rng, 0, 3) if "SHIFT" in op else data(io, (1, 3), rng, 1, 3)
        attrs = {"round": True} if op == "ARITHMETIC_RIGHT_SHIFT" else {}
        if op in ("MAXIMUM", "MINIMUM"):
            attrs = {"nan_mode": "PROPAGATE"}
        return [In(a, io), In(b, io)], attrs, [io]
    if op == "MUL":
        it = t["in_t"]
        return [I(it, (2, 3), rng), I(it, (2, 3), rng), Const(np.array([0]), D.INT8)], {}, [t["out_t"]]
    if op == "TABLE":
        it = t["in_t"]
        n = 256 if it is D.INT8 else 513
        return [I(it, (2, 3), rng, -100, 100), Const(data(t["table_t"], (n,), rng, -100, 100))], {}, [t["out_t"]]
    if op == "NEGATE":
        assert io is not None
        return [I(io, (2, 3), rng), zp(io), zp(io)], {}, [io]
    if op == "SELECT":
        assert io is not None
        return [I(D.BOOL, (2, 3), rng), I(io, (2, 3), rng), I(io, (2, 3), rng)], {}, [io]
    if op in ("EQUAL", "GREATER", "GREATER_EQUAL"):
        it = t["in_t"]
        return [I(it, (2, 3), rng), I(it, (2, 3), rng)], {}, [t["out_t"]]
    if op.startswith("REDUCE_"):
        assert io is not None
        attrs = {"axis": 1}
        if op in ("REDUCE_MAX", "REDUCE_MIN"):
            attrs["nan_mode"] = "PROPAGATE"
        return [I(io, (2, 3, 4), rng, -2, 2)], attrs, [io]
    assert io is not None or op in ("GATHER", "SCATTER", "RESIZE", "CAST", "RESCALE", "CONST", "CONST_SHAPE")
    if op == "CONCAT":
        return [I(io, (2, 3), rng), I(io, (1, 3), rng)], {"axis": 0}, [io]  # type: ignore[arg-type]
    if op == "PAD":
        return [I(io, (2, 3), rng), Shape([1, 0, 0, 2]), Const(np.array([0]), io)], {}, [io]  # type: ignore[arg-type]
    if op == "RESHAPE":
        return [I(io, (2, 3), rng), Shape([3, 2])], {}, [io]  # type: ignore[arg-type]
    if op == "REVERSE":
        return [I(io, (2, 3), rng)], {"axis": 1}, [io]  # type: ignore[arg-type]
    if op == "SLICE":
        return [I(io, (3, 4), rng), Shape([1, 1]), Shape([2, 2])], {}, [io]  # type: ignore[arg-type]
    if op == "TILE":
        return [I(io, (2, 3), rng), Shape([2, 1])], {}, [io]  # type: ignore[arg-type]
    if op == "TRANSPOSE":
        return [I(io, (2, 3), rng)], {"perms": [1, 0]}, [io]  # type: ignore[arg-type]
    if op == "GATHER":
        io = t["in_out_t"]
        idx = np.array([[3, 0, 2]], np.int32).astype(t["index_t"].np_dtype())
        return [I(io, (1, 4, 2), rng), In(idx)], {}, [io]
    if op == "SCATTER":
        io = t["in_out_t"]
        idx = np.array([[2, 0]], np.int32).astype(t["index_t"].np_dtype())
        return [I(io, (1, 4, 2), rng), In(idx), I(io, (1, 2, 2), rng)], {}, [io]
    if op == "RESIZE":
        mode = "NEAREST_NEIGHBOR" if "nearest" in row.mode else "BILINEAR"
        args = [I(t["in_t"], (1, 3, 3, 2), rng), Shape([2, 1, 2, 1]), Shape([0, 0]), Shape([0, 0])]
        return args, {"mode": mode}, [t["out_t"]]
    if op == "CAST":
        it = t["in_t"]
        return [I(it, (2, 3), rng, -3, 3)], {}, [t["out_t"]]
    if op == "RESCALE":
        it, ot = t["in_t"], t["out_t"]
        scale32 = it is not D.INT48
        mul = Const(np.array([1 << 30 if scale32 else 1 << 14]), D.INT32 if scale32 else D.INT16)
        shift = Const(np.array([31 if scale32 else 15]), D.INT8)
        attrs = {"scale32": scale32, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
                 "input_unsigned": False, "output_unsigned": False}
        return [I(it, (2, 3), rng, -100, 100), mul, shift, zp(it), zp(ot)], attrs, [ot]
    raise NotImplementedError(op)


ROWS = [(name, i, row) for name, spec in OPS.items() for i, row in enumerate(spec.rows)
        if name not in ("CUSTOM", "COND_IF", "WHILE_LOOP", "VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE", "CONST",
                        "CONST_SHAPE")]


def _check(g: Graph, feed: dict[str, np.ndarray], want: list[D]) -> None:
    bad = static_check(g, level="8K")
    assert bad is None, bad
    res = run_checked(g, feed)
    assert res.status == "VALID", res
    got = [res.outputs[v.name] for v in g.outputs]
    assert [a.dtype for a in got] == [d.np_dtype() for d in want]
    for a, v in zip(got, g.outputs):
        assert a.shape == v.type.static_shape


@pytest.mark.parametrize(("op", "i", "row"), ROWS, ids=[f"{n}-{i}-{'/'.join(d.value for d in r.types.values())}"
                                                       for n, i, r in ROWS])
def test_type_row_runs(op: str, i: int, row: TypeRow) -> None:
    rng = np.random.default_rng(i)
    args, attrs, outs = recipe(op, row, rng)
    b = GraphBuilder(op.lower())
    b.add(op, args, outs, attrs)
    _check(b.graph, b.feed, outs)


@pytest.mark.parametrize("mode", ["DOUBLE_ROUND", "INEXACT_ROUND"])
@pytest.mark.parametrize("row", [r for r in OPS["RESCALE"].rows if r.types["in_t"] is not D.INT48],
                         ids=lambda r: f"{r.types['in_t'].value}-{r.types['out_t'].value}")
def test_rescale_rounding_extensions(row: TypeRow, mode: str) -> None:
    """EXT-DOUBLEROUND / EXT-INEXACTROUND (scale32 only)."""
    args, attrs, outs = recipe("RESCALE", row, np.random.default_rng(0))
    b = GraphBuilder("rescale")
    b.add("RESCALE", args, outs, attrs | {"rounding_mode": mode})
    _check(b.graph, b.feed, outs)


def test_every_row_is_covered() -> None:
    names = {n for n, _, _ in ROWS} | {"CUSTOM", "COND_IF", "WHILE_LOOP", "VARIABLE", "VARIABLE_READ",
                                       "VARIABLE_WRITE", "CONST", "CONST_SHAPE"}
    assert names == set(OPS) and len(OPS) == 75
    assert sum(len(s.rows) for s in OPS.values()) == len(ROWS) + sum(
        len(OPS[n].rows) for n in ("CUSTOM", "COND_IF", "WHILE_LOOP", "VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE",
                                   "CONST", "CONST_SHAPE"))


@pytest.mark.parametrize("row", OPS["CONST"].rows, ids=lambda r: r.types["out_t"].value)
def test_const_rows(row: TypeRow) -> None:
    dt = row.types["out_t"]
    g = Graph("const")
    v = g.add_const(data(dt, (2, 2), np.random.default_rng(1)), dt, name="c")
    g.outputs = [g.add_op("tosa.IDENTITY", [v], [TensorType((2, 2), dt)], result_names=["out"]).result]
    _check(g, {}, [dt])


def test_const_shape_row() -> None:
    g = Graph("cs")
    x = g.add_input("x", TensorType((2, 3), D.FP32))
    s = g.add_const(np.array([3, 2], np.int64), D.SHAPE, name="s", op_name="tosa.CONST_SHAPE")
    g.outputs = [g.add_op("tosa.RESHAPE", [x, s], [TensorType((3, 2), D.FP32)], result_names=["out"]).result]
    _check(g, {"x": np.zeros((2, 3), np.float32)}, [D.FP32])


@pytest.mark.parametrize("row", OPS["VARIABLE"].rows, ids=lambda r: r.types["var_t"].value)
def test_variable_rows(row: TypeRow) -> None:
    """EXT-VARIABLE: declare, read, write (VARIABLE, VARIABLE_READ, VARIABLE_WRITE rows share the types)."""
    dt = row.types["var_t"]
    t = TensorType((2,), dt)
    g = Graph("var")
    x = g.add_input("x", t)
    g.add_op("tosa.VARIABLE", [], [], {"name": "v", "var_shape": [2], "type": dt,
                                       "initial_value": np.ones(2, dt.np_dtype())})
    old = g.add_op("tosa.VARIABLE_READ", [], [t], {"name": "v"}, result_names=["old"]).result
    g.add_op("tosa.VARIABLE_WRITE", [x], [], {"name": "v"})
    g.outputs = [old]
    assert {r.types["var_t"] for r in OPS["VARIABLE_READ"].rows} == {r.types["var_t"] for r in OPS["VARIABLE"].rows}
    state: dict[str, np.ndarray] = {}
    res = run_checked(g, {"x": np.full(2, 2, dt.np_dtype())}, variables=state)
    assert res.status == "VALID", res
    assert res.outputs["old"].dtype == dt.np_dtype() and res.outputs["old"].tolist() == [1, 1]
    assert run_checked(g, {"x": np.full(2, 3, dt.np_dtype())}, variables=state).outputs["old"].tolist() == [2, 2]


def test_control_flow_rows() -> None:
    """EXT-CONTROLFLOW: COND_IF (cond_t = bool) and WHILE_LOOP."""
    t = TensorType((1,), D.INT32)
    then_g = Graph("then")
    a = then_g.add_input("a", t)
    then_g.outputs = [then_g.add_op("tosa.ADD", [a, a], [t]).result]
    else_g = Graph("else")
    b = else_g.add_input("b", t)
    else_g.outputs = [else_g.add_op("tosa.NEGATE", [b, else_g.add_const(np.array([0], np.int32), D.INT32),
                                                    else_g.add_const(np.array([0], np.int32), D.INT32)], [t]).result]
    g = Graph("cf")
    c = g.add_input("c", TensorType((1,), D.BOOL))
    x = g.add_input("x", t)
    g.outputs = [g.add_op("tosa.COND_IF", [c, x], [t], regions=[then_g, else_g], result_names=["r"]).result]
    _check(g, {"c": np.array([False]), "x": np.array([4], np.int32)}, [D.INT32])
    cond = Graph("cond")
    ci = cond.add_input("i", t)
    cond.outputs = [cond.add_op("tosa.GREATER", [cond.add_const(np.array([5], np.int32), D.INT32), ci],
                                [TensorType((1,), D.BOOL)]).result]
    body = Graph("body")
    bi = body.add_input("i", t)
    body.outputs = [body.add_op("tosa.ADD", [bi, body.add_const(np.array([2], np.int32), D.INT32)], [t]).result]
    g2 = Graph("loop")
    i0 = g2.add_input("i0", t)
    g2.outputs = [g2.add_op("tosa.WHILE_LOOP", [i0], [t], regions=[cond, body], result_names=["i"]).result]
    _check(g2, {"i0": np.array([0], np.int32)}, [D.INT32])
    assert run_checked(g2, {"i0": np.array([0], np.int32)}).outputs["i"].tolist() == [6]
