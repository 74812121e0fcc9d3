"""Generic decoding of TFLite builtin-option tables into plain Python dicts.

Every table of the ``BuiltinOptions`` and ``BuiltinOptions2`` unions is decoded from its field list in
:mod:`.tflite_schema` (written by tools/gen_tflite_schema.py from the schema's generated accessors):

* keys are the schema's field names in snake_case (``stride_w``,
  ``fused_activation_function``, ``dilation_h_factor``, ``new_shape`` …);
* scalar numbers → ``int`` / ``float`` / ``bool``;
* enum-valued fields → the enum member's NAME (``"RELU6"``, ``"SAME"``, ``"INT32"`` …;
  a value unknown to the schema stays an ``int``);
* vectors of numbers → ``list[int]`` / ``list[float]`` / ``list[bool]``, vectors of
  ``ubyte`` → ``bytes``; an absent vector → ``None`` (so ``new_shape`` absent and
  ``new_shape == []`` stay distinguishable);
* strings → ``str``.

A field missing from the table, or a whole missing table, gives the schema default,
so e.g. ``fused_activation_function`` is always present for ops that have it.
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any

import flatbuffers

from ..serializer.flexbuffer import decode_flexbuffer
from .tflite_reader import Buf, Table
from .tflite_schema import BUILTIN_OPERATORS, BUILTIN_OPTIONS, BUILTIN_OPTIONS2, ENUMS, OPTIONS_FIELDS
from .tflite_schema import ENUM_FIELDS as _ENUM_FIELD_ENUMS

__all__ = [
    "ENUM_FIELDS",
    "OP_OPTIONS",
    "builtin_op_names",
    "decode_flexbuffer",
    "decode_options",
    "default_options",
    "enum_name",
    "options_class_for_op",
    "options_table_names",
    "scalar_fields",
    "subgraph_fields",
]


def builtin_op_names() -> dict[int, str]:
    """BuiltinOperator code → NAME (``3`` → ``"CONV_2D"``)."""
    return BUILTIN_OPERATORS


def options_table_names(union: int = 1) -> dict[int, str]:
    """Union type code → options class name for ``BuiltinOptions`` (1) or ``BuiltinOptions2`` (2)."""
    return BUILTIN_OPTIONS if union == 1 else BUILTIN_OPTIONS2


#: enum-valued option fields (snake_case name → value → member NAME)
ENUM_FIELDS: dict[str, dict[int, str]] = {f: ENUMS[e] for f, e in _ENUM_FIELD_ENUMS.items()}

#: options tables whose name is not ``CamelCase(op name) + "Options"``
OP_OPTIONS: dict[str, str] = {
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "L2_POOL_2D": "Pool2DOptions",
    "L2_NORMALIZATION": "L2NormOptions",
    "MEAN": "ReducerOptions",
    "SUM": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions",
    "REDUCE_ANY": "ReducerOptions",
    "REDUCE_ALL": "ReducerOptions",
    "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "RANDOM_STANDARD_NORMAL": "RandomOptions",
    "RANDOM_UNIFORM": "RandomOptions",
    "MULTINOMIAL": "RandomOptions",
}


def enum_name(enum: str, value: int) -> str | int:
    """The member NAME of the schema enum ``enum`` (``"DimensionType"`` …) for ``value``; the int itself when the
    schema does not know it."""
    return ENUMS[enum].get(int(value), int(value))


@cache
def _all_option_classes() -> dict[str, str]:
    """lower-case class name → class name, over both unions."""
    names = list(options_table_names(1).values()) + list(options_table_names(2).values())
    return {n.lower(): n for n in names}


@cache
def options_class_for_op(op: str) -> str | None:
    """The options table name an op uses (``"CONV_2D"`` → ``"Conv2DOptions"``), or None if it has none."""
    if op in OP_OPTIONS:
        return OP_OPTIONS[op]
    camel = "".join(p.capitalize() for p in op.split("_")) + "Options"
    return _all_option_classes().get(camel.lower())


def _value(field: str, kind: str, v: Any) -> Any:
    """A scalar as the frontend gives it: enum fields by NAME, float32 as a Python float."""
    if field in ENUM_FIELDS and isinstance(v, int) and not isinstance(v, bool):
        return ENUM_FIELDS[field].get(v, v)
    return float(v) if kind == "f" else v


def decode_options(cls_name: str, buf: Buf, pos: int) -> dict[str, Any]:
    """Decode the options table ``cls_name`` located at ``pos`` in ``buf``.

    The caller is responsible for checking that ``pos`` is a valid table position.
    """
    tab = Table(buf, pos)
    max_len = len(buf)
    out: dict[str, Any] = {}
    for field, voff, kind, default in OPTIONS_FIELDS[cls_name]:
        if kind[0] == "[":
            vec = tab.vector(voff)
            if vec is None:
                out[field] = None
                continue
            if vec[1] > max_len:
                raise ValueError(f"option vector {field} has an invalid length {vec[1]}")
            arr = tab.numbers(voff, kind[1])
            assert arr is not None
            if kind == "[B":
                out[field] = arr.tobytes()
            elif field in ENUM_FIELDS:
                out[field] = [ENUM_FIELDS[field].get(x, x) for x in arr.tolist()]
            else:
                out[field] = arr.tolist()
        elif kind == "s":
            s = tab.string(voff)
            out[field] = s.decode("utf-8", "replace") if s is not None else ""
        else:
            out[field] = _value(field, kind, tab.scalar(voff, kind, default))
    return out


@cache
def scalar_fields(cls_name: str) -> tuple[tuple[int, int], ...] | None:
    """(vtable offset, bytes) of each field of options table ``cls_name`` when all its fields are scalars (its
    decoding then depends on its vtable and the bytes its fields span alone), else None."""
    fields = OPTIONS_FIELDS[cls_name]
    if any(kind[0] == "[" or kind == "s" for _, _, kind, _ in fields):
        return None
    return tuple((voff, struct.calcsize("<" + kind)) for _, voff, kind, _ in fields)


@cache
def _empty_table() -> bytes:
    b = flatbuffers.Builder(16)
    b.StartObject(0)
    t = b.EndObject()
    b.Finish(t)
    return bytes(b.Output())


@cache
def _defaults(cls_name: str) -> tuple[tuple[str, Any], ...]:
    buf = _empty_table()
    pos = flatbuffers.encode.Get(flatbuffers.packer.uoffset, buf, 0)
    return tuple(decode_options(cls_name, buf, pos).items())


def default_options(cls_name: str) -> dict[str, Any]:
    """Every field of ``cls_name`` at its schema default (the decoding of an empty table)."""
    return {k: (list(v) if isinstance(v, list) else v) for k, v in _defaults(cls_name)}


def subgraph_fields(options: dict[str, Any]) -> list[str]:
    """Names of the option fields that hold subgraph indices, in schema order."""
    keys = []
    for k, v in options.items():
        if (k.endswith("subgraph_index") or k == "subgraph") and isinstance(v, int) and not isinstance(v, bool):
            keys.append(k)
        elif k in ("called_computations", "branch_subgraph_indices") and isinstance(v, list):
            keys.append(k)
    return keys
