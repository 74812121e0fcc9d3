"""The legalization's fast paths decide what their general forms decide.

``validation.infer_and_validate`` (the builder's inference and checks of each op it emits) keeps, per op signature
(shapes, element types, attributes with their Python types, which operands are constants, and the constants a shape
rule reads), the result types and type row of an op that passed, and on a second op of that signature checks only
its constants' values again: a bad zero point or shift behind a kept signature must still be refused with the same
message, attribute values equal but of another type (``True`` / ``1``) must not share a signature, and a RESHAPE's
result follows its shape operand's values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tf2tosa.errors import InvalidGraphError
from tf2tosa.ir import DType, Graph, QuantParams, TensorType
from tf2tosa.tosa import validation

I8, I32 = DType.INT8, DType.INT32


def _rescale_args(shift: int, in_zp: int, out_zp: int) -> tuple[Any, ...]:
    x = TensorType((1, 4, 4, 8), I32)
    ops = [x, TensorType((1,), I32), TensorType((1,), I8), TensorType((1,), I32), TensorType((1,), I8)]
    attrs = {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False, "input_unsigned": False,
             "output_unsigned": False}
    consts = [None, np.array([1 << 30], np.int32), np.array([shift], np.int8), np.array([in_zp], np.int32),
              np.array([out_zp], np.int8)]
    return "RESCALE", ops, attrs, consts, I8


def _general(args: tuple[Any, ...], quant: QuantParams | None = None) -> list[TensorType] | str:
    """infer_result_types then validate, as the builder called them."""
    name, types, attrs, consts, out_dtype = args
    try:
        rts = validation.infer_result_types(name, types, attrs, out_dtype=out_dtype, operand_consts=consts,
                                            quant=quant)
        validation.validate(name, types, rts, attrs, consts, inferred=True)
    except InvalidGraphError as e:
        return str(e)
    return rts


def _kept(args: tuple[Any, ...], quant: QuantParams | None = None) -> list[TensorType] | str:
    try:
        return validation.infer_and_validate(*args, quant=quant)
    except InvalidGraphError as e:
        return str(e)


@pytest.mark.parametrize("shift, in_zp, out_zp", [(30, 0, 3), (70, 0, 3), (1, 0, 0), (30, 5, 0), (30, 0, 0)])
def test_kept_signature_still_checks_constant_values(shift: int, in_zp: int, out_zp: int) -> None:
    q = QuantParams((0.5,), (out_zp,))
    validation._CHECKED.clear()
    good = _rescale_args(30, 0, 3)
    assert _kept(good, q) == _general(good, q)
    args = _rescale_args(shift, in_zp, out_zp)
    assert validation._signature(*args) in validation._CHECKED  # the same signature as the good one's
    got = _kept(args, q)
    assert got == _general(args, q)
    assert isinstance(got, str) == (shift != 30 or in_zp != 0)
    if not isinstance(got, str):
        assert all(t.quant is q for t in got)


def test_attribute_type_is_part_of_the_signature() -> None:
    t = TensorType((2, 3), I8)
    validation._CHECKED.clear()
    assert _kept(("CONCAT", [t, t], {"axis": 0}, [None, None], None)) == [TensorType((4, 3), I8)]
    for axis in (False, 0.0):
        args = ("CONCAT", [t, t], {"axis": axis}, [None, None], None)
        got = _kept(args)
        assert isinstance(got, str) and "axis" in got and got == _general(args)


def test_shape_rule_constants_are_part_of_the_signature() -> None:
    t = TensorType((2, 6), I8)
    validation._CHECKED.clear()
    for new in ([3, 4], [12, 1], [4, 3], [3, 4], [5, 3]):
        args = ("RESHAPE", [t, TensorType((2,), DType.SHAPE)], {}, [None, np.array(new, np.int64)], None)
        assert _kept(args) == _general(args)
    assert len(validation._CHECKED) == 3  # (the refused [5, 3] kept nothing)


def test_signature_needs_plain_shapes_and_attributes() -> None:
    t = TensorType((2, 3), I8)
    assert validation._signature("CONCAT", [t], {"axis": 0}, [None], None) is not None
    assert validation._signature("CONCAT", [TensorType(("n", 3), I8)], {"axis": 0}, [None], None) is None
    assert validation._signature("CONCAT", [t], {"axis": np.int64(0)}, [None], None) is None
    assert validation._signature("PAD", [t], {"pads": [1, True]}, [None], None) is None
    assert validation._signature("PAD", [t], {"pads": [1, 2]}, [None], None) is not None
    assert validation._signature("CONST", [], {}, [], None) is None


def test_remove_dead_ops_leaves_networkx_dicts_as_its_methods_do() -> None:
    """Graph.remove_dead_ops deletes the dead ops from networkx's dicts itself (DiGraph.remove_node's steps)."""
    import random

    import networkx as nx

    from tf2tosa.ir.graph import INPUT, Graph

    rng = random.Random(3)
    g = Graph()
    t = TensorType((2,), I32)
    values = [g.add_input("x", t)]
    for step in range(200):
        operands = [rng.choice(values) for _ in range(rng.randint(0, 3))]
        values.append(g.add_op("tosa.CONCAT", operands, [t], {"axis": 0}, [f"v{step}"]).result)
    g.outputs = [values[150], values[90]]
    g.ops[values[40].producer.id].attrs["side_effect"] = True  # type: ignore[union-attr]
    mirror = g.nx.copy()
    roots = [v.producer.id for v in (*g.outputs, values[40]) if v.producer is not None]
    live = {n for r in roots for n in nx.ancestors(g.nx, r) | {r}}
    dead = [n for n in g.ops if n not in live]
    for n in dead:
        mirror.remove_node(n)
    assert g.remove_dead_ops() == len(dead) > 0
    assert sorted(g.ops) == sorted(n for n in mirror.nodes if n != INPUT)

    def adjacency(d: dict[int, dict[int, dict[Any, Any]]]) -> dict[int, dict[int, set[Any]]]:
        return {n: {m: set(keys) for m, keys in nb.items()} for n, nb in d.items()}

    assert adjacency(g.nx._succ) == adjacency(mirror._succ) and adjacency(g.nx._pred) == adjacency(mirror._pred)
    assert set(g.nx._node) == set(mirror._node)
    assert [op.id for op in g.topological_order()] == [n for n in nx.lexicographical_topological_sort(mirror)
                                                      if n != INPUT]


def test_value_plan_passes_only_what_the_checks_pass() -> None:
    """A kept signature's constants are checked by its value plan (``validation._plan_holds``); where the plan holds,
    ``_check_zero_points`` and ``_check_values`` pass too, and every set the checks refuse fails the plan (the op then
    goes to the checks, which raise)."""
    rng = np.random.default_rng(3)
    x8, x32 = TensorType((1, 4, 4, 3), I8), TensorType((1, 4, 4, 3), DType.INT32)
    rescales = [({"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": pc, "input_unsigned": False,
                  "output_unsigned": False}, it, ot) for pc in (False, True) for it, ot in ((x8, x32), (x32, x8))]
    values = [np.array([v], np.int64) for v in (0, 1, -1, 2, 62, 63, 127, 128, -128, -129, 5)]
    values += [np.array([v], np.int8) for v in (0, 1, -1, 2, 62, 63, 127, -128, 5)]
    values += [np.array([0.0]), np.array([np.nan]), np.array([True]), np.array([], np.int64), np.array([2, 3, 70]),
               np.array([2, 30, 62]), np.array([-1, 4])]
    checked = 0
    for attrs, it, ot in rescales:
        nc = 3 if attrs["per_channel"] else 1
        types = [it, TensorType((nc,), DType.INT32), TensorType((nc,), I8), TensorType((1,), it.dtype),
                 TensorType((1,), ot.dtype)]
        spec = validation.get("RESCALE")
        good = [None, np.full(nc, 1 << 30, np.int64), np.full(nc, 30, np.int64), np.zeros(1, np.int64),
                np.zeros(1, np.int64)]
        row = validation.validate("RESCALE", types, [ot], attrs, good, inferred=True)
        pairs = validation.bind_operands("RESCALE", types)
        plan = validation._value_plan(spec, row, pairs, good, attrs)
        assert plan is not None and validation._plan_holds(plan, good)
        for _ in range(300):
            consts = list(good)
            for i in rng.choice(4, size=int(rng.integers(1, 3)), replace=False):
                consts[int(i) + 1] = values[int(rng.integers(len(values)))]
            try:
                validation._check_zero_points(spec, pairs, consts, attrs)
                validation._check_values(spec, row, pairs, consts, attrs)
                passes = True
            except InvalidGraphError:
                passes = False
            holds = validation._plan_holds(plan, consts)
            assert passes or not holds, consts
            checked += holds
    assert checked > 100
    for shift, in_t in ((0, DType.INT32), (63, DType.INT32), (64, DType.INT32), (1, I8), (0, I8), (-1, DType.INT32)):
        t = TensorType((2, 3), in_t)
        types = [t, t, TensorType((1,), I8)]
        row = validation.validate("MUL", types, [TensorType((2, 3), DType.INT32)], {}, [None, None, np.array([0])])
        pairs = validation.bind_operands("MUL", types)
        plan = validation._value_plan(validation.get("MUL"), row, pairs, [None, None, np.array([0])], {})
        consts = [None, None, np.array([shift], np.int64)]
        try:
            validation._check_values(validation.get("MUL"), row, pairs, consts, {})
            passes = True
        except InvalidGraphError:
            passes = False
        assert plan is not None and validation._plan_holds(plan, consts) == passes
    for dt in (I8, DType.INT32, DType.INT16):
        t = TensorType((2, 3), dt)
        types = [t, TensorType((1,), dt), TensorType((1,), dt)]
        zero = [None, np.array([0]), np.array([0])]
        row = validation.validate("NEGATE", types, [t], {}, zero)
        pairs = validation.bind_operands("NEGATE", types)
        plan = validation._value_plan(validation.get("NEGATE"), row, pairs, zero, {})
        assert plan is not None and len(plan) == 2
        for v in values:
            consts = [None, v, np.array([0])]
            try:
                validation._check_zero_points(validation.get("NEGATE"), pairs, consts, {})
                passes = True
            except InvalidGraphError:
                passes = False
            assert validation._plan_holds(plan, consts) == passes, (dt, v)


def test_static_tensor_type_is_the_constructors_type() -> None:
    """``types.static_tensor_type`` (constants, results of a kept signature) makes the instance the constructor makes
    for a shape of plain ints >= 0: the same dict, in the same order, equal, with the same hash and text."""
    from tf2tosa.ir.types import static_tensor_type

    rng = np.random.default_rng(2)
    quants = [None, QuantParams((0.5,), (3,)), QuantParams((0.1, 0.2), (0, 0), 1)]
    for k in range(200):
        shape = tuple(int(d) for d in rng.integers(0, 9, size=int(rng.integers(0, 6))))
        dt = list(DType)[k % len(DType)]
        q = quants[k % 3]
        got, want = static_tensor_type(shape, dt, q), TensorType(shape, dt, q)
        assert list(got.__dict__.items()) == list(want.__dict__.items())
        assert got == want and hash(got) == hash(want) and str(got) == str(want) and repr(got) == repr(want)
        assert got.is_static and got.static_shape == shape and got.size == want.size


def test_zero_point_arrays_kept_per_value_are_consts_arrays() -> None:
    """``Builder.zp`` of an int hands each constant its own copy of the array kept for (value, type): the array, type
    and name ``const`` makes; a float or bool zero point (-0.0 is not 0.0) goes through ``const``."""
    from tf2tosa.tosa.builder import Builder

    g = Graph()
    b = Builder(g)
    for value in (0, 3, -128, 127, 128, 32768, -1, 0.0, -0.0, 1.5, True):
        for dt in (I8, DType.INT16, DType.INT32, DType.FP32, DType.FP16, DType.BOOL):
            got, want = b.zp(value, dt), b.const(np.array([value]), dt, name="zp")
            a, w = got.producer.attrs["values"], want.producer.attrs["values"]  # type: ignore[union-attr]
            assert a.dtype == w.dtype and a.shape == w.shape and a.tobytes() == w.tobytes() and got.type == want.type
            assert got.name.split("_")[0] == "zp" and got.producer.name == want.producer.name  # type: ignore[union-attr]
            a[...] = 1
            again = b.zp(value, dt).producer.attrs["values"]  # type: ignore[union-attr]
            assert again.tobytes() == w.tobytes()


def test_remove_dead_ops_keeps_what_reaches_an_output_through_operands() -> None:
    """Graph.remove_dead_ops walks the graph's edges: the ops it keeps are those that reach an output or a
    side-effect op through operands, after operands are rewired (set_operand, replace_all_uses, truncate_operands)."""
    import random

    from tf2tosa.ir.graph import Graph

    for seed in range(20):
        rng = random.Random(seed)
        g = Graph()
        t = TensorType((2,), I32)
        values = [g.add_input("x", t), g.add_input("y", t)]
        for step in range(120):
            operands = [rng.choice(values) for _ in range(rng.randint(0, 3))]
            values.append(g.add_op("tosa.CONCAT", operands, [t], {"axis": 0}, [f"v{step}"]).result)
        for _ in range(30):
            op = g.ops[rng.choice(values[2:]).producer.id]  # type: ignore[union-attr]
            if op.operands and rng.random() < 0.6:
                k = rng.randrange(len(op.operands))
                earlier = [v for v in values if v.producer is None or v.producer.id < op.id]
                g.set_operand(op, k, rng.choice(earlier))
            elif op.operands:
                g.truncate_operands(op, rng.randrange(len(op.operands)))
        g.outputs = [rng.choice(values[60:]) for _ in range(rng.randint(1, 3))]
        effect = rng.choice(values[2:60]).producer
        assert effect is not None
        effect.attrs["side_effect"] = True
        live: set[int] = set()
        stack = [v.producer for v in g.outputs if v.producer is not None] + [effect]
        while stack:
            op = stack.pop()
            if op.id not in live:
                live.add(op.id)
                stack += [v.producer for v in op.operands if v.producer is not None]
        dead = sorted(n for n in g.ops if n not in live)
        assert g.remove_dead_ops() == len(dead)
        assert sorted(g.ops) == sorted(live)


def _reshaped_weights(fast: bool, monkeypatch: pytest.MonkeyPatch, fp16_keep: bool) -> tuple[Any, ...]:
    """A graph whose constant weights are reshaped several times (names hinted and not, the same shapes again,
    one reshape of a computed value), its ops, values, names and networkx dicts as plain data."""
    from tf2tosa.tosa import builder as B

    if not fast:  # (no key is ever kept: every RESHAPE is emitted and folded)
        monkeypatch.setattr(B, "_FOLDED_RESHAPES", type("Never", (dict,), {"__setitem__": lambda *a: None})())
    else:
        monkeypatch.setattr(B, "_FOLDED_RESHAPES", {})
    g = Graph()
    b = B.Builder(g, location="loc")
    b.context.passes.of(g).fp16_keep = fp16_keep  # (what a conversion keeping fp16 weights sets: every model's)
    x = g.add_input("x", TensorType((2, 6), I8))
    outs = []
    for k in range(6):
        w = b.const(np.arange(24, dtype=np.int64).reshape(1, 2, 3, 4) + k, DType.FP32 if k > 3 else I8,
                    quant=QuantParams((0.5,), (1,)) if k % 2 else None)
        b.name_hint = "hinted" if k == 2 else None
        outs += [b.reshape(w, [2, 3, 4, 1]), b.reshape(w, [6, 4]), b.reshape(x, [3, 4])]
    g.outputs = outs
    ops = [(op.id, op.name, op.location, [v.id for v in op.operands],
            [(r.id, r.name, r.type, r.source) for r in op.results],
            {k: (v.tolist(), v.dtype.str) if isinstance(v, np.ndarray) else v for k, v in op.attrs.items()})
           for op in g.ops.values()]
    nxd = [{n: {m: {k: (e["value"].id, e["index"]) for k, e in keys.items()} for m, keys in d.items()}
            for n, d in part.items()} for part in (g.nx._succ, g.nx._pred)]
    return ops, nxd, sorted(g._names), dict(g._names.hint), next(g._ids)


@pytest.mark.parametrize("fp16_keep", [False, True])
def test_folded_reshapes_of_constants_are_what_emit_and_fold_make(monkeypatch: pytest.MonkeyPatch,
                                                                  fp16_keep: bool) -> None:
    """``Builder.reshape`` of a plain constant whose (shape, type, new shape) was emitted and folded before makes the
    folded constant directly: the same ids, names (the RESHAPE result's, reserved and freed), types, locations,
    values and networkx dicts as emitting the RESHAPE and folding it."""
    slow = _reshaped_weights(False, monkeypatch, fp16_keep)
    assert _reshaped_weights(True, monkeypatch, fp16_keep) == slow
    assert any(name.startswith("hinted") for name in slow[2])
