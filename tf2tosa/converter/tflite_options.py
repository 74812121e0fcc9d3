"""Generic decoding of TFLite builtin-option tables into plain Python dicts.

Every table of the ``BuiltinOptions`` and ``BuiltinOptions2`` unions is decoded by
reflecting over the accessor methods of the ``tflite`` package's generated class:

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

import mmap
import re
from functools import cache
from typing import Any

import flatbuffers
import numpy as np
import tflite

from ..serializer.flexbuffer import decode_flexbuffer

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
    "subgraph_fields",
]


def _enum_members(enum_cls: type) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


#: builtin ops of newer schemas than the ``tflite`` package knows
_EXTRA_OPS = {209: "STABLEHLO_CASE"}
#: BuiltinOptions2 tables of newer schemas
_EXTRA_OPTIONS2 = {23: "StablehloCaseOptions"}
#: layout of those tables: class name → ((field, vtable offset, kind), …); kind "i32vec" only
_RAW_TABLES: dict[str, tuple[tuple[str, int, str], ...]] = {
    "StablehloCaseOptions": (("branch_subgraph_indices", 4, "i32vec"),),
}


@cache
def builtin_op_names() -> dict[int, str]:
    """BuiltinOperator code → NAME (``3`` → ``"CONV_2D"``)."""
    return {**_EXTRA_OPS, **_enum_members(tflite.BuiltinOperator)}


@cache
def options_table_names(union: int = 1) -> dict[int, str]:
    """Union type code → options class name for ``BuiltinOptions`` (1) or ``BuiltinOptions2`` (2)."""
    enum_cls = tflite.BuiltinOptions if union == 1 else tflite.BuiltinOptions2
    names = {k: v for k, v in _enum_members(enum_cls).items() if v != "NONE"}
    return {**_EXTRA_OPTIONS2, **names} if union == 2 else names


#: enum-valued option fields (snake_case name → the ``tflite`` enum class holding the names)
ENUM_FIELDS: dict[str, type] = {
    "fused_activation_function": tflite.ActivationFunctionType,
    "padding": tflite.Padding,  # scalar only; Stablehlo* ``padding`` is a vector of ints
    "weights_format": tflite.FullyConnectedOptionsWeightsFormat,
    "type": tflite.LSHProjectionType,
    "combiner": tflite.CombinerType,
    "kernel_type": tflite.LSTMKernelType,
    "mode": tflite.MirrorPadMode,
    "quantized_bias_type": tflite.TensorType,
    "in_data_type": tflite.TensorType,
    "out_data_type": tflite.TensorType,
    "output_type": tflite.TensorType,
    "out_type": tflite.TensorType,
    "idx_out_type": tflite.TensorType,
    "key_dtype": tflite.TensorType,
    "value_dtype": tflite.TensorType,
    "comparison_direction": tflite.StablehloComparisonDirection,
    "compare_type": tflite.StablehloComparisonType,
    "precision_config": tflite.StablehloPrecisionConfig,
    "algorithm": tflite.RngAlgorithm,
    "reduce_function": tflite.ReduceWindowFunction,
    "composite_attributes_format": tflite.CustomOptionsFormat,
}

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


@cache
def enum_name_map(enum_cls: type) -> dict[int, str]:
    return _enum_members(enum_cls)


def enum_name(enum_cls: type, value: int) -> str | int:
    """The enum member NAME for ``value``; the int itself when the schema does not know it."""
    return enum_name_map(enum_cls).get(int(value), int(value))


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


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


# field kinds
_SCALAR, _VECTOR, _STRING = "scalar", "vector", "string"


@cache
def _fields(cls_name: str) -> tuple[tuple[str, str, str], ...]:
    """(snake name, accessor method name, kind) for each field, in schema order."""
    cls = getattr(tflite, cls_name)
    members = vars(cls)
    methods = [k for k, v in members.items() if callable(v) and not k.startswith("_")]
    skip = {"Init"}
    out: list[tuple[str, str, str]] = []
    for m in methods:
        if m in skip or m.startswith("GetRootAs") or m.endswith("BufferHasIdentifier"):
            continue
        if m.endswith("Length") and m[:-6] in members:
            continue
        if m.endswith("IsNone") and m[:-6] in members:
            continue
        if m.endswith("AsNumpy") and m[:-7] in members:
            continue
        if m + "Length" in members:
            kind = _VECTOR
        else:
            code = getattr(members[m], "__code__", None)
            kind = _STRING if code is not None and "String" in code.co_names else _SCALAR
        out.append((_snake(m), m, kind))
    return tuple(out)


def _vector_value(obj: Any, method: str, field: str, max_len: int) -> Any:
    if getattr(obj, method + "IsNone")():
        return None
    n = int(getattr(obj, method + "Length")())
    if n < 0 or n > max_len:
        raise ValueError(f"option vector {field} has an invalid length {n}")
    if hasattr(obj, method + "AsNumpy"):
        arr = getattr(obj, method + "AsNumpy")()
        if isinstance(arr, int):
            return []
        arr = np.asarray(arr)
        if arr.dtype == np.uint8:
            return bytes(arr.tobytes())
        if field in ENUM_FIELDS:
            return [enum_name(ENUM_FIELDS[field], int(x)) for x in arr]
        return arr.tolist()
    vals = []
    for j in range(n):
        v = getattr(obj, method)(j)
        vals.append(v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
    return vals


def _read_fields(cls_name: str, obj: Any, max_len: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, method, kind in _fields(cls_name):
        if kind == _VECTOR:
            out[field] = _vector_value(obj, method, field, max_len)
        elif kind == _STRING:
            s = getattr(obj, method)()
            out[field] = s.decode("utf-8", "replace") if isinstance(s, bytes) else (s or "")
        else:
            v = getattr(obj, method)()
            if field in ENUM_FIELDS and isinstance(v, int) and not isinstance(v, bool):
                v = enum_name(ENUM_FIELDS[field], v)
            elif isinstance(v, float):
                v = float(v)
            out[field] = v
    return out


def decode_options(cls_name: str, buf: bytes | bytearray | mmap.mmap, pos: int) -> dict[str, Any]:
    """Decode the options table ``cls_name`` located at ``pos`` in ``buf``.

    The caller is responsible for checking that ``pos`` is a valid table position.
    """
    if cls_name in _RAW_TABLES:
        return _read_raw(cls_name, buf, pos)
    cls = getattr(tflite, cls_name)
    obj = cls()
    obj.Init(buf, pos)
    return _read_fields(cls_name, obj, len(buf))


def _read_raw(cls_name: str, buf: bytes | bytearray | mmap.mmap, pos: int) -> dict[str, Any]:
    tab = flatbuffers.table.Table(buf, pos)
    out: dict[str, Any] = {}
    for field, voff, _kind in _RAW_TABLES[cls_name]:
        o = tab.Offset(voff)
        if not o:
            out[field] = None
            continue
        n = int(tab.VectorLen(o))
        if n < 0 or 4 * n > len(buf):
            raise ValueError(f"option vector {field} has an invalid length {n}")
        out[field] = np.frombuffer(buf, "<i4", n, tab.Vector(o)).tolist()
    return out


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
