"""The .tflite frontend's own schema tables and table reader against the ``tflite`` package's generated accessors.

* tf2tosa/converter/tflite_schema.py is what tools/gen_tflite_schema.py writes from the installed package;
* every builtin options table, empty and with a value in every field, decodes to the same dict through
  :func:`tf2tosa.converter.tflite_options.decode_options` as through the package's accessor methods (read by
  reflection, as the frontend did before it had its own reader);
* the model structure of the sample models reads the same through :class:`tf2tosa.converter.tflite_reader.Table`
  as through the package (names, shapes, types, buffers, quantization, operators and their options).
"""

from __future__ import annotations

import random
import runpy
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import pytest

from tf2tosa.converter import tflite_options as topt
from tf2tosa.converter.tflite_reader import Field, Table, fields
from tf2tosa.converter.tflite_schema import ENUM_FIELDS, ENUMS, OPTIONS_FIELDS

tflite = pytest.importorskip("tflite")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "models" / "samples"


def test_schema_module_is_what_the_tool_writes() -> None:
    tool = runpy.run_path(str(ROOT / "tools" / "gen_tflite_schema.py"), run_name="gen_tflite_schema")
    assert tool["render"]() == (ROOT / "tf2tosa" / "converter" / "tflite_schema.py").read_text(encoding="utf-8")


# --- the package's accessors, read by reflection (the oracle) -------------------------------------------------------
def _methods(cls: type) -> list[tuple[str, str, str]]:
    """(snake name, accessor, kind) of each field accessor of a generated class (listed by the tool)."""
    tool = runpy.run_path(str(ROOT / "tools" / "gen_tflite_schema.py"), run_name="gen_tflite_schema")
    members = vars(cls)
    return [(tool["_snake"](m), m, "vector" if m + "Length" in members else
             "string" if "String" in fn.__code__.co_names else "scalar") for m, fn in tool["accessors"](cls)]


def _package_decode(cls_name: str, buf: bytes, pos: int) -> dict[str, Any]:
    obj = getattr(tflite, cls_name)()
    obj.Init(buf, pos)
    enums = {f: ENUMS[e] for f, e in ENUM_FIELDS.items()}
    out: dict[str, Any] = {}
    for field, m, kind in _methods(type(obj)):
        if kind == "vector":
            if getattr(obj, m + "IsNone")():
                out[field] = None
                continue
            arr = np.asarray(getattr(obj, m + "AsNumpy")())
            out[field] = (arr.tobytes() if arr.dtype == np.uint8 else
                          [enums[field].get(int(x), int(x)) for x in arr] if field in enums else arr.tolist())
        elif kind == "string":
            s = getattr(obj, m)()
            out[field] = s.decode("utf-8", "replace") if s is not None else ""
        else:
            v = getattr(obj, m)()
            if field in enums and isinstance(v, int) and not isinstance(v, bool):
                v = enums[field].get(v, v)
            out[field] = float(v) if isinstance(v, float) else v
    return out


def _value(kind: str, rng: random.Random) -> Any:
    if kind == "?":
        return rng.random() < 0.5
    if kind == "f":
        return float(np.float32(rng.uniform(-100, 100)))
    lo, hi = {"b": (-128, 127), "B": (0, 255), "i": (-2**31, 2**31 - 1), "I": (0, 2**32 - 1),
              "q": (-2**63, 2**63 - 1)}[kind]
    return rng.choice([rng.randint(lo, hi), rng.randint(0, 5)])  # small ones too: enum names


def _build(cls_name: str, rng: random.Random) -> tuple[bytes, int]:
    """A table of ``cls_name`` with a value in every field (laid out by vtable offset)."""
    b = flatbuffers.Builder(256)
    refs, scalars = {}, {}
    for field, voff, kind, _ in OPTIONS_FIELDS[cls_name]:
        if kind == "s":
            refs[voff] = b.CreateString(f"{field}-{rng.randint(0, 99)}")
        elif kind[0] == "[":
            vals = [_value(kind[1], rng) for _ in range(rng.randint(0, 4))]
            refs[voff] = b.CreateNumpyVector(np.asarray(vals, dtype="<" + kind[1]))
        else:
            scalars[voff] = (kind, _value(kind, rng))
    b.StartObject(max((f[1] - 4) // 2 + 1 for f in OPTIONS_FIELDS[cls_name]) if OPTIONS_FIELDS[cls_name] else 0)
    for voff, off in refs.items():
        b.PrependUOffsetTRelativeSlot((voff - 4) // 2, off, 0)
    prepend = {"?": b.PrependBoolSlot, "b": b.PrependInt8Slot, "B": b.PrependUint8Slot, "i": b.PrependInt32Slot,
               "I": b.PrependUint32Slot, "q": b.PrependInt64Slot, "f": b.PrependFloat32Slot}
    for voff, (kind, v) in scalars.items():
        prepend[kind]((voff - 4) // 2, v, not v if kind == "?" else v + 1)  # never the default: always written
    b.Finish(b.EndObject())
    buf = bytes(b.Output())
    return buf, flatbuffers.encode.Get(flatbuffers.packer.uoffset, buf, 0)


def test_every_options_table_decodes_as_the_package_reads_it() -> None:
    rng = random.Random(16)
    tables = [*topt.options_table_names(1).values(), *topt.options_table_names(2).values()]
    assert len(tables) > 140
    checked = 0
    for name in tables:
        if not hasattr(tflite, name):  # (newer-schema tables the package lacks: read raw)
            continue
        empty = topt.default_options(name)
        assert empty == _package_decode(name, *_build_empty()), name
        for _ in range(3):
            buf, pos = _build(name, rng)
            assert topt.decode_options(name, buf, pos) == _package_decode(name, buf, pos), name
            checked += 1
    assert checked > 400


def _build_empty() -> tuple[bytes, int]:
    b = flatbuffers.Builder(16)
    b.StartObject(0)
    b.Finish(b.EndObject())
    buf = bytes(b.Output())
    return buf, flatbuffers.encode.Get(flatbuffers.packer.uoffset, buf, 0)


def _structure(buf: bytes, mine: bool) -> list[Any]:
    """The model's structure read by our reader or by the package, as plain values."""
    out: list[Any] = []
    if mine:
        model = Table(buf, flatbuffers.encode.Get(flatbuffers.packer.uoffset, buf, 0))
        M, S, T, O, Q, B = (fields(n) for n in ("Model", "SubGraph", "Tensor", "Operator", "QuantizationParameters",
                                                "Buffer"))

        def sc(t: Table, f: Field) -> Any:
            return t.scalar(f.voff, f.kind, f.default)

        def vec(t: Table, f: Field) -> list[Any] | None:
            a = t.numbers(f[0], f[1][1])
            return None if a is None else a.tolist()

        def tables(t: Table, f: Field) -> list[Table]:
            v = t.vector(f[0])
            return [] if v is None else [t.table_at(v[0], j) for j in range(v[1])]

        out.append(sc(model, M["version"]))
        for sg in tables(model, M["subgraphs"]):
            out.append((sg.string(S["name"][0]), vec(sg, S["inputs"]), vec(sg, S["outputs"])))
            for t in tables(sg, S["tensors"]):
                q = t.table(T["quantization"][0])
                out.append((t.string(T["name"][0]), vec(t, T["shape"]), vec(t, T["shape_signature"]),
                            sc(t, T["type"]), sc(t, T["buffer"]), sc(t, T["is_variable"]),
                            None if q is None else (vec(q, Q["scale"]), vec(q, Q["zero_point"]),
                                                    sc(q, Q["quantized_dimension"]))))
            for o in tables(sg, S["operators"]):
                out.append((sc(o, O["opcode_index"]), vec(o, O["inputs"]), vec(o, O["outputs"]),
                            sc(o, O["builtin_options_type"]), vec(o, O["custom_options"])))
        for b in tables(model, M["buffers"]):
            out.append((vec(b, B["data"]) is not None, sc(b, B["offset"]), sc(b, B["size"])))
        return out
    model = tflite.Model.GetRootAs(buf, 0)

    def pv(obj: Any, m: str) -> list[Any] | None:
        return None if getattr(obj, m + "IsNone")() else np.asarray(getattr(obj, m + "AsNumpy")()).tolist()

    out.append(model.Version())
    for k in range(model.SubgraphsLength()):
        sg = model.Subgraphs(k)
        out.append((sg.Name(), pv(sg, "Inputs"), pv(sg, "Outputs")))
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            q = t.Quantization()
            out.append((t.Name(), pv(t, "Shape"), pv(t, "ShapeSignature"), t.Type(), t.Buffer(), t.IsVariable(),
                        None if q is None else (pv(q, "Scale"), pv(q, "ZeroPoint"), q.QuantizedDimension())))
        for i in range(sg.OperatorsLength()):
            o = sg.Operators(i)
            out.append((o.OpcodeIndex(), pv(o, "Inputs"), pv(o, "Outputs"), o.BuiltinOptionsType(),
                        pv(o, "CustomOptions")))
    for i in range(model.BuffersLength()):
        b = model.Buffers(i)
        out.append((not b.DataIsNone(), b.Offset(), b.Size()))
    return out


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.glob("*.tflite"))[:12])
def test_model_structure_reads_as_the_package_reads_it(name: str) -> None:
    buf = (SAMPLES / name).read_bytes()
    assert _structure(buf, mine=True) == _structure(buf, mine=False)
