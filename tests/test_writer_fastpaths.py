"""The .tosa writer's own table, vector and string writing (``tosa_writer._Writer``) gives the bytes of flatbuffers'
Builder calls: random sequences of strings, vectors and tables, at every alignment and across buffer growth, are
built both ways and compared after every step."""

from __future__ import annotations

import mmap
import random
from collections.abc import Callable
from typing import Any

import flatbuffers
import numpy as np
import pytest

from tf2tosa.ir.graph import Graph
from tf2tosa.serializer import tosa_writer as tw

_Fields = list[tuple[int, Any, int]]


def _builder_table(b: flatbuffers.Builder, nfields: int, fields: _Fields) -> int:
    b.StartObject(nfields)
    for slot, kind, value in fields:
        if kind is tw._OFF:
            b.PrependUOffsetTRelativeSlot(slot, value, 0)
        elif kind is tw._U8:
            b.PrependUint8Slot(slot, value, 0)
        elif kind is tw._I32:
            b.PrependInt32Slot(slot, value, 0)
        else:
            b.PrependUint32Slot(slot, value, 0)
    return int(b.EndObject())


def _builder_vector(b: flatbuffers.Builder, items: list[int], put: Callable[[int], None]) -> int:
    b.StartVector(4, len(items), 4)
    for x in reversed(items):
        put(x)
    return int(b.EndVector())


def _builder_data(b: flatbuffers.Builder, data: bytes) -> int:
    padded = data + bytes(-len(data) % 8)
    b.StartVector(1, len(padded), 8)
    b.head = b.head - len(padded)
    b.Bytes[b.head:b.head + len(padded)] = padded
    return int(b.EndVector())


def _flat_case(rng: random.Random, made: list[int]) -> tuple[tw._Flat, list[int], int, _Fields]:
    """One of the writer's fixed layouts with random field values (uoffsets to objects made before)."""
    code, off = rng.randint(1, 255), lambda: rng.choice(made)
    kind = rng.randrange(5)
    if kind == 0:
        loc, outs, ins, attr = off(), off(), off(), off()
        fields = [(0, tw._U32, code), (1, tw._U8, code), (2, tw._OFF, attr), (3, tw._OFF, ins), (4, tw._OFF, outs),
                  (5, tw._OFF, loc)]
        return tw._OP_FLAT, [loc, outs, ins, attr, code, code], 6, fields
    if kind == 1:
        outs, ins, attr = off(), off(), off()
        fields = [(0, tw._U32, code), (1, tw._U8, code), (2, tw._OFF, attr), (3, tw._OFF, ins), (4, tw._OFF, outs)]
        return tw._OP_FLAT_NO_LOCATION, [outs, ins, attr, code, code], 6, fields
    if kind == 2:
        name, shape, data = off(), off(), off()
        fields = [(0, tw._OFF, name), (1, tw._OFF, shape), (2, tw._U32, code), (3, tw._OFF, data)]
        return tw._TENSOR_FLAT, [data, code, shape, name], 14, fields
    if kind == 3:
        name, shape = off(), off()
        fields = [(0, tw._OFF, name), (1, tw._OFF, shape), (2, tw._U32, code)]
        return tw._TENSOR_FLAT_NO_DATA, [code, shape, name], 14, fields
    text = off()
    return tw._LOCATION_FLAT, [text], 1, [(0, tw._OFF, text)]


def _step(rng: random.Random, w: tw._Writer, b: flatbuffers.Builder, made: list[int]) -> tuple[int, int]:
    """One random object written by the writer and by the builder's calls: (the writer's offset, the builder's)."""
    what = rng.randrange(14)
    if what == 0:  # a string, new or written before
        s = rng.choice(["", "a", "ab", "abc", "abcd", "é", "x" * rng.randrange(40), f"s{rng.randrange(30)}"])
        return w._string(s), int(b.CreateSharedString(s))
    if what == 1:
        items = [rng.choice(made) for _ in range(rng.randrange(6))]
        return w._offset_vector(items), _builder_vector(b, items, b.PrependUOffsetTRelative)
    if what == 2:
        names = [f"n{rng.randrange(20)}" for _ in range(rng.randrange(4))]
        offs = [int(b.CreateSharedString(s)) for s in names]
        return w._string_vector(names), _builder_vector(b, offs, b.PrependUOffsetTRelative)
    if what == 3:
        ints = [rng.randint(-(1 << 31), (1 << 31) - 1) for _ in range(rng.randrange(70))]
        return w._i32_vector(ints), _builder_vector(b, ints, b.PrependInt32)
    if what == 4:
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(30)))
        return w._data_vector(np.frombuffer(data, np.uint8)), _builder_data(b, data)
    if what == 5:  # a byte: the next object starts at another alignment
        x = rng.randrange(256)
        w.b.PrependUint8(x)
        b.PrependUint8(x)
        return 0, 0
    if what == 6:  # an attribute-like table of any fields
        nfields = rng.randrange(1, 7)
        fields: _Fields = []
        for slot in sorted(rng.sample(range(nfields), rng.randrange(nfields + 1))):
            kind = rng.choice([tw._OFF, tw._U8, tw._I32, tw._U32])
            value = (rng.choice(made) if kind is tw._OFF else rng.randint(1, 255) if kind is tw._U8
                     else rng.choice([-1, 1, 1 << 30]) if kind is tw._I32 else rng.randint(1, 1 << 31))
            fields.append((slot, kind, value))
        return w._table(nfields, fields), _builder_table(b, nfields, fields)
    if what == 7:
        return w._flat_table(tw._EMPTY_FLAT, [], 0, []), _builder_table(b, 0, [])
    if what == 9:  # a tensor without data: its shape vector and its table
        name, code = rng.choice(made), rng.randint(1, 12)
        dims = [rng.randrange(1, 300) for _ in range(rng.randrange(10))]
        shape = _builder_vector(b, dims, b.PrependInt32)
        fields = [(0, tw._OFF, name), (1, tw._OFF, shape), (2, tw._U32, code)]
        ours = w._shaped_tensor(name, tuple(dims), code) or w._flat_table(
            tw._TENSOR_FLAT_NO_DATA, [code, w._i32_vector(dims), name], 14, fields)
        return ours, _builder_table(b, 14, fields)
    if what == 8:  # a location table and the operator table after it
        text, attr, ins, outs, code = (rng.choice(made), rng.choice(made), rng.choice(made), rng.choice(made),
                                       rng.randint(1, 255))
        loc = _builder_table(b, 1, [(0, tw._OFF, text)])
        fields = [(0, tw._U32, code), (1, tw._U8, code), (2, tw._OFF, attr), (3, tw._OFF, ins), (4, tw._OFF, outs),
                  (5, tw._OFF, loc)]
        return w._located_operator(text, code, attr, ins, outs), _builder_table(b, 6, fields)
    if what == 13:  # a tensor with data: its shape vector, its data vector and its table
        name, code = rng.choice(made), rng.randint(1, 12)
        dims = [rng.randrange(1, 300) for _ in range(rng.randrange(18))]
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        shape = _builder_vector(b, dims, b.PrependInt32)
        fields = [(0, tw._OFF, name), (1, tw._OFF, shape), (2, tw._U32, code), (3, tw._OFF, _builder_data(b, data))]
        theirs = _builder_table(b, 14, fields)
        ours = w._const_tensor(name, tuple(dims), code, np.frombuffer(data, np.uint8))
        if not ours:
            shape_off = w._i32_vector(dims)
            data_off = w._data_vector(np.frombuffer(data, np.uint8))
            ours = w._flat_table(tw._TENSOR_FLAT, [data_off, code, shape_off, name], 14,
                                 fields[:3] + [(3, tw._OFF, data_off)])
        return ours, theirs
    if what >= 11:  # an operator's one-element outputs vector, then its location table (or none) and its table
        out, text, attr, ins, code = (rng.choice(made), rng.choice(made) if what == 11 else 0, rng.choice(made),
                                      rng.choice(made), rng.randint(1, 255))
        outs = _builder_vector(b, [out], b.PrependUOffsetTRelative)
        fields = [(0, tw._U32, code), (1, tw._U8, code), (2, tw._OFF, attr), (3, tw._OFF, ins), (4, tw._OFF, outs)]
        if text:
            fields.append((5, tw._OFF, _builder_table(b, 1, [(0, tw._OFF, text)])))
        theirs = _builder_table(b, 6, fields)
        ours = w._operator_with_output(out, text, code, attr, ins)
        if not ours:  # (no vtable of that layout yet, or near the buffer's start: the usual calls)
            outs = w._offset_vector([out])
            ours = w._located_operator(text, code, attr, ins, outs) if text else w._flat_table(
                tw._OP_FLAT_NO_LOCATION, [outs, ins, attr, code, code], 6, fields[:5])
        return ours, theirs
    flat, values, nfields, fields = _flat_case(rng, made)
    return w._flat_table(flat, values, nfields, fields), _builder_table(b, nfields, fields)


@pytest.mark.parametrize("arena", [None, 4096, 1 << 20])
def test_writer_primitives_write_the_builders_bytes(arena: int | None) -> None:
    """Without an arena the writer's builder starts small and grows (the builder's own calls where it must); with a
    small map it outgrows the map; with a large one everything is written in place."""
    for seed in range(40):
        rng = random.Random(seed)
        scratch = mmap.mmap(-1, arena) if arena else None
        w = tw._Writer(Graph(), scratch=scratch)
        b = flatbuffers.Builder(0)
        made = [w._string("root")]
        assert made == [b.CreateSharedString("root")]
        for _ in range(300):
            ours, theirs = _step(rng, w, b, made)
            assert ours == theirs
            assert bytes(w.b.Bytes[w.b.head:]) == bytes(b.Bytes[b.head:])
            if ours:
                made.append(ours)
        if scratch is not None:
            scratch.close()


@pytest.mark.tosa_unchecked("RESCALEs without their operands: only the attribute tables are compared")
def test_scalar_attribute_tables_kept_per_value_give_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """RESCALE / CONCAT / MAXIMUM attribute tables, whose fields the writer works out once per op code and values,
    are written as when each is worked out anew: every attribute (and a value's Python type) tells them apart."""
    from tf2tosa.ir.types import DType, TensorType

    g = Graph()
    x = g.add_input("x", TensorType((1, 4), DType.INT8))
    y = x
    combos = [{}, {"scale32": False}, {"scale32": True, "per_channel": True}, {"rounding_mode": "DOUBLE_ROUND"},
              {"rounding_mode": "SINGLE_ROUND", "input_unsigned": True}, {"output_unsigned": True},
              {"output_unsigned": 1}, {"scale32": 0}, {"rounding_mode": "INEXACT_ROUND", "scale32": True}, {}]
    for k, attrs in enumerate(combos + combos[::-1]):
        y = g.add_op("tosa.RESCALE", [y], [x.type], dict(attrs), [f"r{k}"], location=f"R#{k}").result
        y = g.add_op("tosa.MAXIMUM", [y, x], [x.type], {"nan_mode": ["PROPAGATE", "IGNORE"][k % 2]}).result
        y = g.add_op("tosa.CONCAT", [y], [x.type], {"axis": k % 2}).result
    g.outputs = [y]
    kept = tw.to_bytes(g)
    monkeypatch.setattr(tw, "_SCALAR_ATTRS", frozenset())
    assert tw.to_bytes(g) == kept


@pytest.mark.tosa_unchecked("RESCALEs without their operands: only the attribute tables are compared")
def test_kept_scalar_table_bytes_are_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scalar attribute table met again at an alignment seen before is written from the bytes kept for it
    (``_kept_table``): the file is the one written with each table worked out anew, at every alignment (names of
    every length in between)."""
    from tf2tosa.ir.types import DType, TensorType

    rng = random.Random(4)
    g = Graph()
    x = g.add_input("x", TensorType((1, 4), DType.INT8))
    y = x
    for k in range(300):
        attrs = {"scale32": rng.random() < 0.5, "rounding_mode": rng.choice(["SINGLE_ROUND", "DOUBLE_ROUND"]),
                 "per_channel": rng.random() < 0.3, "input_unsigned": rng.random() < 0.2}
        y = g.add_op("tosa.RESCALE", [y], [x.type], attrs, ["r" * rng.randrange(1, 9) + str(k)],
                     location="L" * rng.randrange(5)).result
        if rng.random() < 0.3:
            y = g.add_op("tosa.CONCAT", [y], [x.type], {"axis": rng.randrange(2)}).result
    g.outputs = [y]
    kept = tw.to_bytes(g)
    monkeypatch.setattr(tw._Writer, "_kept_table", lambda self, key, nfields, fields: self._table(nfields, fields))
    assert tw.to_bytes(g) == kept


@pytest.mark.tosa_unchecked("pools and transposes of one operand: only the attribute tables are compared")
def test_kept_vector_tables_are_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """An attribute table with int32 vectors (pools, convolutions, TRANSPOSE) met again with the same values at an
    alignment seen before is written from the bytes kept for it and its vectors (``_vector_attribute``): the file is
    the one written with each table worked out anew (lists, tuples, numpy items and arrays; names of every length in
    between)."""
    from tf2tosa.ir.types import DType, TensorType

    rng = random.Random(5)
    g = Graph()
    x = g.add_input("x", TensorType((1, 4, 4, 4), DType.INT8))
    y = x
    for k in range(300):
        pick = rng.randrange(4)
        kernel: Any = rng.choice([[1, 1], [2, 2], (3, 3), [np.int64(2), 2], np.array([3, 1])])
        pad = rng.choice([[0, 0, 0, 0], [1, 1, 1, 1], (0, 1, 0, 1)])
        if pick == 0:
            name, attrs = "tosa.AVG_POOL2D", {"kernel": kernel, "stride": [1, 1], "pad": pad,
                                              "acc_type": rng.choice(["INT32", "FP32"])}
        elif pick == 1:
            name, attrs = "tosa.MAX_POOL2D", {"kernel": kernel, "stride": rng.choice([[1, 1], [2, 2]]), "pad": pad}
        elif pick == 2:
            name, attrs = "tosa.TRANSPOSE", {"perms": rng.choice([[0, 2, 1, 3], (0, 3, 1, 2), [0, 1, 2, 3]])}
        else:
            name, attrs = "tosa.CONV2D", {"pad": pad, "stride": [1, 1], "dilation": kernel,
                                          "local_bound": rng.random() < 0.3, "acc_type": "INT32"}
        y = g.add_op(name, [y], [x.type], attrs, ["p" * rng.randrange(1, 9) + str(k)],
                     location="L" * rng.randrange(5)).result
    g.outputs = [y]
    kept = tw.to_bytes(g)
    monkeypatch.setattr(tw, "_VECTOR_ATTRS", frozenset())
    assert tw.to_bytes(g) == kept
