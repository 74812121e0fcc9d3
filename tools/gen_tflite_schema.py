"""Write tf2tosa/converter/tflite_schema.py: the parts of the TFLite schema the .tflite frontend reads.

    .venv/bin/python tools/gen_tflite_schema.py            # rewrite the module
    .venv/bin/python tools/gen_tflite_schema.py --check    # exit 1 when the module differs from what it would write

The frontend reads the flatbuffer with its own accessors on the ``flatbuffers`` runtime (the ``tflite`` package
imports ~190 generated modules, ~25 ms of every start).  What it needs of the schema is data: the enum names
(builtin operators, the two options unions, the enum-valued option fields) and, for every builtin options table, its
fields in schema order with their vtable offset, type and default.  This tool takes them from the installed ``tflite``
package's generated accessors (the schema compiled by flatc) and writes them out as Python literals;
tests/test_tflite_schema.py runs ``--check`` and decodes every options table both ways.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tf2tosa" / "converter" / "tflite_schema.py"

#: builtin ops of newer schemas than the ``tflite`` package knows
EXTRA_OPS = {209: "STABLEHLO_CASE"}
#: BuiltinOptions2 tables of newer schemas, and their fields
EXTRA_OPTIONS2 = {23: "StablehloCaseOptions"}
EXTRA_TABLES: dict[str, tuple[tuple[str, int, str, Any], ...]] = {
    "StablehloCaseOptions": (("branch_subgraph_indices", 4, "[i", None),),
}

#: enum-valued option fields → the enum holding their names
ENUM_FIELDS = {
    "fused_activation_function": "ActivationFunctionType",
    "padding": "Padding",  # scalar only; Stablehlo* ``padding`` is a vector of ints
    "weights_format": "FullyConnectedOptionsWeightsFormat",
    "type": "LSHProjectionType",
    "combiner": "CombinerType",
    "kernel_type": "LSTMKernelType",
    "mode": "MirrorPadMode",
    "quantized_bias_type": "TensorType",
    "in_data_type": "TensorType",
    "out_data_type": "TensorType",
    "output_type": "TensorType",
    "out_type": "TensorType",
    "idx_out_type": "TensorType",
    "key_dtype": "TensorType",
    "value_dtype": "TensorType",
    "comparison_direction": "StablehloComparisonDirection",
    "compare_type": "StablehloComparisonType",
    "precision_config": "StablehloPrecisionConfig",
    "algorithm": "RngAlgorithm",
    "reduce_function": "ReduceWindowFunction",
    "composite_attributes_format": "CustomOptionsFormat",
}
#: other enums the frontend names
OTHER_ENUMS = ("DimensionType", "CustomOptionsFormat")

#: flatbuffers number type → struct format character
_FORMATS = {"Int8": "b", "Uint8": "B", "Int16": "h", "Uint16": "H", "Int32": "i", "Uint32": "I", "Int64": "q",
            "Uint64": "Q", "Float32": "f", "Float64": "d", "Bool": "?"}


def _members(enum_cls: type) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _default(src: str) -> Any:
    """The default of a scalar accessor: the literal its last line returns."""
    return ast.literal_eval(src.strip().splitlines()[-1].strip().removeprefix("return "))


def accessors(cls: type) -> list[tuple[str, Any]]:
    """(method name, function) of each field accessor of a generated table class, in schema order (not the
    ``…Length`` / ``…IsNone`` / ``…AsNumpy`` companions of a vector, nor the class's own helpers)."""
    members = vars(cls)
    out = []
    for m, fn in members.items():
        if not callable(fn) or m.startswith("_") or m == "Init" or m.startswith("GetRootAs") \
                or m.endswith("BufferHasIdentifier"):
            continue
        if any(m.endswith(s) and m[:-len(s)] in members for s in ("Length", "IsNone", "AsNumpy")):
            continue
        out.append((m, fn))
    return out


def _field(cls: type, m: str, fn: Any) -> tuple[int, str, Any]:
    """(vtable offset, kind, default) of accessor ``m``: kind a struct format character (a scalar), ``"s"`` (a
    string), ``"[" + format`` (a vector of numbers), ``"[t"`` / ``"[s"`` (of tables / strings), ``"t"`` (a table or
    union value)."""
    members = vars(cls)
    src = inspect.getsource(fn)
    voff = int(re.search(r"self\._tab\.Offset\((\d+)\)", src).group(1))  # type: ignore[union-attr]
    flags = [f for f in re.findall(r"number_types\.(\w+)Flags", src) if f != "UOffsetT"]
    if m + "Length" in members:
        if m + "AsNumpy" in members:
            return voff, "[" + _FORMATS[flags[0]], None
        return voff, "[t" if "Indirect" in src else "[s", None
    if "String" in fn.__code__.co_names:
        return voff, "s", None
    if "Indirect" in src or "Union" in src:
        return voff, "t", None
    if m == "BuiltinCode":  # (the package's accessor maps codes below 127 to deprecated_builtin_code)
        return voff, _FORMATS[flags[0]], 0
    return voff, _FORMATS[flags[0]], _default(src)


def _table_fields(cls: type) -> tuple[tuple[str, int, str, Any], ...]:
    """(snake name, vtable offset, kind, default) of each field of a generated options class, in schema order: only
    scalars, strings (default ``""``) and vectors of numbers occur."""
    out = []
    for m, fn in accessors(cls):
        voff, kind, default = _field(cls, m, fn)
        if kind in ("t", "[t", "[s"):
            raise SystemExit(f"{cls.__name__}.{m}: a {kind} field in an options table, not supported")
        out.append((_snake(m), voff, kind, "" if kind == "s" else default))
    return tuple(out)


#: the tables of the model's structure the frontend reads (its own accessors: tf2tosa/converter/tflite.py)
CORE_TABLES = ("Model", "OperatorCode", "SubGraph", "Tensor", "QuantizationParameters", "SparsityParameters",
               "DimensionMetadata", "Int32Vector", "Uint16Vector", "Uint8Vector", "Buffer", "Operator",
               "SignatureDef", "TensorMap", "Metadata")


def _core_fields(cls: type) -> dict[str, tuple[int, str, Any]]:
    """snake name → (vtable offset, kind, default) of each field of a generated table class (:func:`_field`)."""
    return {_snake(m): _field(cls, m, fn) for m, fn in accessors(cls)}


def tables() -> dict[str, Any]:
    import tflite

    ops = {**EXTRA_OPS, **_members(tflite.BuiltinOperator)}
    unions = {u: {k: v for k, v in _members(getattr(tflite, n)).items() if v != "NONE"}
              for u, n in ((1, "BuiltinOptions"), (2, "BuiltinOptions2"))}
    unions[2] = {**EXTRA_OPTIONS2, **unions[2]}
    fields = {name: EXTRA_TABLES.get(name) or _table_fields(getattr(tflite, name))
              for u in (1, 2) for name in unions[u].values()}
    enums = {e: _members(getattr(tflite, e)) for e in sorted({*ENUM_FIELDS.values(), *OTHER_ENUMS})}
    core = {name: _core_fields(getattr(tflite, name)) for name in CORE_TABLES}
    return {"CORE_FIELDS": core, "BUILTIN_OPERATORS": ops, "BUILTIN_OPTIONS": unions[1], "BUILTIN_OPTIONS2": unions[2],
            "OPTIONS_FIELDS": fields, "ENUMS": enums, "ENUM_FIELDS": ENUM_FIELDS}


def render() -> str:
    from importlib.metadata import version

    t = tables()
    lines = ['"""The parts of the TFLite schema the .tflite frontend reads (enum names, builtin options tables).',
             "",
             f"Written by tools/gen_tflite_schema.py from the tflite {version('tflite')} package's generated accessors "
             "(do not edit; run the tool).",
             "CORE_FIELDS: table of the model's structure → {snake_case field: (vtable offset, kind, default)};",
             "OPTIONS_FIELDS: options table → ((snake_case field, vtable offset, kind, default), …) in schema order;",
             'kind: a struct format character (a scalar), "s" (a string), "[" + format (a vector of numbers),',
             '"t" (a table or union value), "[t" (a vector of tables).',
             '"""', "", "from __future__ import annotations", "", "from typing import Any", ""]

    def mapping(name: str, typ: str, d: dict[Any, Any]) -> None:
        lines.append(f"{name}: {typ} = {{")
        for k, v in d.items():
            lines.append(f"    {k!r}: {v!r},")
        lines.append("}")
        lines.append("")

    mapping("BUILTIN_OPERATORS", "dict[int, str]", t["BUILTIN_OPERATORS"])
    mapping("BUILTIN_OPTIONS", "dict[int, str]", t["BUILTIN_OPTIONS"])
    mapping("BUILTIN_OPTIONS2", "dict[int, str]", t["BUILTIN_OPTIONS2"])
    lines.append("OPTIONS_FIELDS: dict[str, tuple[tuple[str, int, str, Any], ...]] = {")
    for name, fs in t["OPTIONS_FIELDS"].items():
        if not fs:
            lines.append(f"    {name!r}: (),")
            continue
        lines.append(f"    {name!r}: (")
        for f in fs:
            lines.append(f"        {f!r},")
        lines.append("    ),")
    lines.append("}")
    lines.append("")
    def nested(name: str, typ: str, d: dict[str, dict[Any, Any]]) -> None:
        lines.append(f"{name}: {typ} = {{")
        for outer, inner in d.items():
            lines.append(f"    {outer!r}: {{")
            lines.extend(f"        {k!r}: {v!r}," for k, v in inner.items())
            lines.append("    },")
        lines.append("}")
        lines.append("")

    nested("ENUMS", "dict[str, dict[int, str]]", t["ENUMS"])
    mapping("ENUM_FIELDS", "dict[str, str]", t["ENUM_FIELDS"])
    nested("CORE_FIELDS", "dict[str, dict[str, tuple[int, str, Any]]]", t["CORE_FIELDS"])
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the module instead of writing it")
    args = ap.parse_args()
    text = render()
    if args.check:
        same = OUT.read_text(encoding="utf-8") == text
        print(f"{OUT.relative_to(ROOT)} {'is up to date' if same else 'differs: run tools/gen_tflite_schema.py'}")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
