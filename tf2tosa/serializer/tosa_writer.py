"""Write an IR graph of ``tosa.*`` operations as a TOSA 1.0 flatbuffer (``.tosa``).

The byte layout follows the TOSA flatbuffer schema (``tosa.fbs`` from the
``tosa-tools`` wheel): root table ``TosaGraph`` (file identifier ``TOSA``) with
a ``Version`` and a list of ``TosaRegion``; each region holds one
``TosaBasicBlock`` with operators, tensors, shapes and the block's input and
output names.  The graph itself is region ``main`` (block ``main``); every
COND_IF / WHILE_LOOP body becomes one more region, referenced by name from the
operator's ``CondIfAttribute`` / ``WhileLoopAttribute``.

Facts about the format that the schema does not spell out, taken from files
written by Arm's own serializer (``tosa-opt --tosa-serialize``):

* constant data is little-endian, padded with zero bytes to a multiple of 8 and
  8-byte aligned; bool is one byte per element, i4 packs two elements per byte
  (first element in the low nibble), i48 is six bytes per element;
* ``TosaShape.data`` holds the CONST_SHAPE values as int64;
* CLAMP ``min_val``/``max_val`` are the bound's bytes in the input element type.

Spec references (sections of the TOSA 1.0 specification): shape_t values come only from
CONST_SHAPE (spec 2.18.1 CONST_SHAPE); COND_IF / WHILE_LOOP take their graphs as attributes (spec 2.16.1-2.16.2);
enumerations spec 3 Enumerations (the fbs enums are the spec's values + 1, 0 being UNKNOWN).  EXT-VARIABLE
(spec 2.17.1-2.17.3) is written as Arm's serializer does it: a ``variable`` tensor holding the initial
value, VARIABLE_READ / VARIABLE_WRITE as IDENTITY from / into that tensor.

Everything is written in a fixed order (graph inputs, then operations in
:meth:`Graph.topological_order`, attribute fields in schema order), so the same
graph always gives the same bytes.
"""

from __future__ import annotations

import errno
import math
import mmap
import os
import struct
import tempfile
from itertools import chain, compress
from operator import attrgetter
from typing import Any

import flatbuffers
import numpy as np

from ..errors import InvalidGraphError
from ..ir.graph import Graph, Operation, Value
from ..ir.mapped import PAGE as _PAGE
from ..ir.mapped import drop_pages as _drop
from ..ir.mapped import file_region as _file_region
from ..ir.mapped import page_up as _page_up
from ..ir.mapped import pieces as _pieces
from ..ir.types import DType, TensorType, static_dims
from ..tosa import optable as catalogue

FILE_IDENTIFIER = b"TOSA"
VERSION = (1, 0, 0, False)  # major, minor, patch, draft

# ----------------------------------------------------------------------------- schema facts
#: ``enum Op`` of tosa.fbs in declaration order (UNKNOWN = 0).  The ``union Attribute``
#: lists one table per op in the same order, so an op's attribute type equals its op value.
OPS: tuple[str, ...] = (
    "UNKNOWN", "ARGMAX", "AVG_POOL2D", "CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "FFT2D", "MATMUL",
    "MAX_POOL2D", "RFFT2D", "TRANSPOSE_CONV2D", "CLAMP", "ERF", "SIGMOID", "TANH", "ADD",
    "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "INTDIV", "LOGICAL_AND",
    "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "LOGICAL_OR", "LOGICAL_XOR", "MAXIMUM", "MINIMUM", "MUL",
    "POW", "SUB", "TABLE", "ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS", "EXP", "FLOOR", "LOG", "LOGICAL_NOT",
    "NEGATE", "RECIPROCAL", "RSQRT", "SIN", "SELECT", "EQUAL", "GREATER", "GREATER_EQUAL", "REDUCE_ALL",
    "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PRODUCT", "REDUCE_SUM", "CONCAT", "PAD", "RESHAPE",
    "REVERSE", "SLICE", "TILE", "TRANSPOSE", "GATHER", "SCATTER", "RESIZE", "CAST", "RESCALE", "CONST",
    "IDENTITY", "CUSTOM", "COND_IF", "WHILE_LOOP", "VARIABLE", "VARIABLE_WRITE", "VARIABLE_READ",
    "CONST_SHAPE",
)
OP_VALUE: dict[str, int] = {name: i for i, name in enumerate(OPS)}
#: the TOSA 1.1 draft's ``enum Op`` (the tosa.fbs of tosa-tools 2026.8.0, ``fbs_version 1.1.0d``): 1.0's values
#: unchanged, new operators appended; up to ASSERT_EQUAL_SHAPE (the ones after it are not written)
DRAFT_OPS_ENUM: tuple[str, ...] = OPS + (
    "MATMUL_T_BLOCK_SCALED", "CAST_FROM_BLOCK_SCALED", "CAST_TO_BLOCK_SCALED", "DIM", "CONCAT_SHAPE", "ADD_SHAPE",
    "SUB_SHAPE", "MUL_SHAPE", "SLICE_SHAPE", "EXP2_SHAPE", "LOG2_CEIL_SHAPE", "LOG2_FLOOR_SHAPE", "MAX_SHAPE",
    "MIN_SHAPE", "MOD_SHAPE", "DIV_CEIL_SHAPE", "DIV_FLOOR_SHAPE", "ASSERT_EQUAL_SHAPE",
)
#: the operators a 1.1-draft program (``graph.record.specification_version == "1.1.draft"``) may hold
DRAFT_OP_VALUE: dict[str, int] = {name: i for i, name in enumerate(DRAFT_OPS_ENUM)
                                  if name in OP_VALUE or catalogue.is_draft(name)}
#: ``Version`` of a 1.1-draft program
DRAFT_FB_VERSION = (1, 1, 0, True)

#: ``enum DType`` of tosa.fbs.
DTYPE_VALUE: dict[DType, int] = {
    DType.BOOL: 1, DType.INT4: 2, DType.INT8: 3, DType.INT16: 4, DType.INT32: 5, DType.INT48: 6,
    DType.FP32: 7, DType.FP16: 8, DType.BF16: 9, DType.SHAPE: 10, DType.FP8E4M3: 11, DType.FP8E5M2: 12,
}
VALUE_DTYPE: dict[int, DType] = {v: k for k, v in DTYPE_VALUE.items()}

#: IR ``acc_type`` strings (spec acc_type_t names) -> fbs DType values.
ACC_VALUE: dict[str, int] = {"INT32": 5, "INT48": 6, "FP32": 7, "FP16": 8}
VALUE_ACC: dict[int, str] = {v: k for k, v in ACC_VALUE.items()}
NAN_VALUE: dict[str, int] = {"PROPAGATE": 1, "IGNORE": 2}
VALUE_NAN: dict[int, str] = {v: k for k, v in NAN_VALUE.items()}
ROUNDING_VALUE: dict[str, int] = {"SINGLE_ROUND": 1, "INEXACT_ROUND": 2, "DOUBLE_ROUND": 3}
VALUE_ROUNDING: dict[int, str] = {v: k for k, v in ROUNDING_VALUE.items()}
RESIZE_VALUE: dict[str, int] = {"NEAREST_NEIGHBOR": 1, "BILINEAR": 2}
VALUE_RESIZE: dict[int, str] = {v: k for k, v in RESIZE_VALUE.items()}

# How a table field encodes an attribute value.
I32 = "i32"  # int32 scalar
I32S = "i32[]"  # [int32]
BOOL = "bool"
ACC = "acc"  # DType enum holding an accumulator type
NAN = "nan"  # NanPropagationMode
ROUND = "rounding"  # RoundingMode
RESIZE = "resize"  # ResizeMode
STR = "string"
BYTES = "ubyte[]"
BOUND = "bound"  # [ubyte] holding a value of the input's element type (CLAMP)

#: Field encoding of each catalogue attribute kind (``tosa.optable.ATTR_KINDS``) that has a table field.
KIND_ENCODING: dict[str, str] = {
    "i32": I32, "i32_list": I32S, "bool": BOOL, "acc_type": ACC, "nan_mode": NAN, "rounding_mode": ROUND,
    "resize_mode": RESIZE, "string": STR, "graph": STR, "bytes": BYTES, "scalar": BOUND,
}

_CONV = ("pad", "stride", "dilation", "local_bound", "acc_type")
_POOL = ("kernel", "stride", "pad")

#: Format data: the fields of each op's attribute table in schema declaration order (slot = position),
#: by their catalogue attribute names.  Kinds and defaults come from the catalogue (:data:`ATTR_FIELDS`).
#: Ops not listed have an empty attribute table.
ATTR_SLOTS: dict[str, tuple[str, ...]] = {
    "DIM": ("axis",),  # 1.1 draft: table DimAttribute
    "ASSERT_EQUAL_SHAPE": ("allow_broadcast",),  # 1.1 draft: table AssertEqualShapeAttribute
    "ARGMAX": ("axis", "nan_mode"),
    "AVG_POOL2D": _POOL + ("acc_type",),
    "CONV2D": _CONV,
    "CONV3D": _CONV,
    "DEPTHWISE_CONV2D": _CONV,
    "FFT2D": ("inverse", "local_bound"),
    "MAX_POOL2D": _POOL + ("nan_mode",),
    "RFFT2D": ("local_bound",),
    "TRANSPOSE_CONV2D": ("out_pad", "stride", "local_bound", "acc_type"),
    "CLAMP": ("min_val", "max_val", "nan_mode"),
    "ARITHMETIC_RIGHT_SHIFT": ("round",),
    "MAXIMUM": ("nan_mode",),
    "MINIMUM": ("nan_mode",),
    "REDUCE_ALL": ("axis",),
    "REDUCE_ANY": ("axis",),
    "REDUCE_MAX": ("axis", "nan_mode"),
    "REDUCE_MIN": ("axis", "nan_mode"),
    "REDUCE_PRODUCT": ("axis",),
    "REDUCE_SUM": ("axis",),
    "CONCAT": ("axis",),
    "REVERSE": ("axis",),
    "TRANSPOSE": ("perms",),
    "RESIZE": ("mode",),
    "RESCALE": ("scale32", "rounding_mode", "per_channel", "input_unsigned", "output_unsigned"),
    "CUSTOM": ("operator_name", "domain_name", "implementation_attrs"),
    "COND_IF": ("then_graph", "else_graph"),
    "WHILE_LOOP": ("cond_graph", "body_graph"),
}

#: (name, field encoding) of each op's attribute table in slot order, the encoding from the catalogue kind.
ATTR_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    op: tuple((name, KIND_ENCODING[catalogue.get(op).attr_map[name].kind]) for name in names)
    for op, names in ATTR_SLOTS.items()
}

#: the ops whose attribute tables hold scalars only
_SCALAR_ATTRS = frozenset(op for op, fields in ATTR_FIELDS.items() if fields and all(
    kind in (I32, BOOL, ACC, NAN, ROUND, RESIZE) for _, kind in fields))
#: an attribute the op leaves out (a key of :attr:`_Writer.scalar_tables`)
_ABSENT = object()
#: the ops whose attribute tables hold scalars and int32 vectors only, some vector among them (CONV2D, AVG_POOL2D,
#: TRANSPOSE …): with the table, its vectors right above it, all 4-byte aligned (see :meth:`_Writer._kept_block`)
_VECTOR_ATTRS = frozenset(op for op, fields in ATTR_FIELDS.items() if op not in _SCALAR_ATTRS and all(
    kind in (I32S, I32, BOOL, ACC, NAN, ROUND, RESIZE) for _, kind in fields))

#: Written for an attribute the IR leaves out that has no catalogue default (a required one, which
#: the builder's validation normally guarantees): the value Arm's serializer writes for an unset field.
ABSENT_VALUE: dict[str, Any] = {BOOL: False, ROUND: "SINGLE_ROUND", STR: "", BYTES: b""}


def attr_value(op: Operation, name: str, encoding: str) -> Any:
    """The value to write for attribute ``name`` of ``op``: the IR's, else the catalogue default, else
    :data:`ABSENT_VALUE`; raises InvalidGraphError when there is none."""
    if name in op.attrs:
        return op.attrs[name]
    a = catalogue.get(op.opcode).attr_map.get(name)
    if a is not None and a.default is not None:
        return a.default
    if encoding in ABSENT_VALUE:
        return ABSENT_VALUE[encoding]
    raise InvalidGraphError(f"missing attribute '{name}'", op=f"{op.name} {_loc(op)}")


# Slots (field indices) of the container tables.
V_MAJOR, V_MINOR, V_PATCH, V_DRAFT = 0, 1, 2, 3
T_NAME, T_SHAPE, T_TYPE, T_DATA, T_VARIABLE, T_UNRANKED, T_VARNAME = 0, 1, 2, 3, 4, 5, 6
S_NAME, S_RANK, S_DATA = 0, 1, 2
OP_OP, OP_ATTR_TYPE, OP_ATTR, OP_INPUTS, OP_OUTPUTS, OP_LOCATION = 0, 1, 2, 3, 4, 5
B_NAME, B_OPERATORS, B_TENSORS, B_INPUTS, B_OUTPUTS, B_SHAPES = 0, 1, 2, 3, 4, 5
R_NAME, R_BLOCKS = 0, 1
G_VERSION, G_REGIONS = 0, 1


def slot_offset(slot: int) -> int:
    """vtable offset of field number ``slot`` (what ``Table.Offset`` takes)."""
    return 4 + 2 * slot


# ----------------------------------------------------------------------------- data encoding
def _bf16_bits(arr: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns of ``arr`` (round to nearest even, NaN kept quiet)."""
    if arr.dtype.name == "bfloat16":
        return arr.view(np.uint16)
    f = np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (f + 0x7FFF + ((f >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(arr, dtype=np.float32))
    bits = np.where(nan, (f >> 16) | 0x40, rounded)
    return bits.astype(np.uint16)


def encode_array(values: Any, dtype: DType) -> bytes:
    """Raw little-endian bytes of constant ``values`` stored as ``dtype`` (no padding)."""
    arr = np.asarray(values)
    flat = arr.reshape(-1)
    if dtype is DType.BOOL:
        return flat.astype(bool).astype(np.uint8).tobytes()
    if dtype is DType.INT4:
        nib = (flat.astype(np.int64) & 0xF).astype(np.uint8)
        if nib.size % 2:
            nib = np.concatenate([nib, np.zeros(1, np.uint8)])
        return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()
    if dtype is DType.INT48:
        b = flat.astype("<i8").view(np.uint8).reshape(-1, 8)[:, :6]
        return b.tobytes()
    if dtype is DType.SHAPE:
        return flat.astype("<i8").tobytes()
    if dtype is DType.BF16:
        return _bf16_bits(flat).astype("<u2").tobytes()
    if dtype in (DType.FP8E4M3, DType.FP8E5M2):
        target = dtype.np_dtype()
        if flat.dtype != target:
            flat = flat.astype(np.float32).astype(target)
        return flat.view(np.uint8).tobytes()
    np_dt = {DType.INT8: "<i1", DType.INT16: "<i2", DType.INT32: "<i4", DType.FP16: "<f2",
             DType.FP32: "<f4"}.get(dtype)
    if np_dt is None:
        raise InvalidGraphError(f"cannot serialize constant data of type {dtype}")
    return flat.astype(np_dt).tobytes()


_PLAIN = {DType.INT8: "<i1", DType.INT16: "<i2", DType.INT32: "<i4", DType.FP16: "<f2", DType.FP32: "<f4"}
_PLAIN_DTYPES = {k: np.dtype(v) for k, v in _PLAIN.items()}

#: bytes per element of constant data (INT4 packs two per byte)
_ELEMENT_BYTES = {DType.BOOL: 1, DType.INT8: 1, DType.INT16: 2, DType.INT32: 4, DType.INT48: 6, DType.FP16: 2,
                  DType.BF16: 2, DType.FP32: 4, DType.FP8E4M3: 1, DType.FP8E5M2: 1, DType.SHAPE: 8}

#: the largest flatbuffer: offsets are 32-bit signed
MAX_FLATBUFFER_BYTES = 2**31 - 1


def _size(t: TensorType) -> int:
    """``t.size`` (see :func:`~tf2tosa.ir.types.static_dims`)."""
    dims = static_dims(t)
    return math.prod(dims) if dims is not None else t.size


def data_size(t: TensorType) -> int:
    """Bytes of a constant of type ``t`` in the file, padding to 8 included (from the type: nothing is encoded)."""
    dims = t.__dict__.get("_static_shape")  # (static_dims of a shape of plain ints, without its call)
    size = math.prod(dims) if dims is not None else _size(t)
    n = (size + 1) // 2 if t.dtype is DType.INT4 else size * _ELEMENT_BYTES.get(t.dtype, 8)
    return n + (-n % 8)


def constant_data(values: Any, dtype: DType) -> Any:
    """The little-endian bytes of constant ``values`` as ``dtype``: for the plain types a contiguous view of the
    array itself when it already has that layout (no copy), else :func:`encode_array`'s bytes."""
    np_dt = _PLAIN.get(dtype)
    if np_dt is None:
        return encode_array(values, dtype)
    if values.__class__ is np.ndarray and values.dtype == _PLAIN_DTYPES[dtype] and values.flags.c_contiguous \
            and values.size:
        return values  # (its bytes already in that layout, whatever its shape; memoryview casts it to bytes)
    return np.ascontiguousarray(np.asarray(values).reshape(-1).astype(np_dt, copy=False))


def _pad8(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 8)


# ----------------------------------------------------------------------------- writer
class _Region:
    """A region of the program: its name and graph.  (A plain class: a dataclass is made at import, ~0.5 ms of every
    conversion, which imports the writer.)"""

    __slots__ = ("name", "graph")

    def __init__(self, name: str, graph: Graph) -> None:
        self.name = name
        self.graph = graph


#: constant data of a page or more is written to the file in pieces of this size (see :func:`write_file`), and a
#: constant read in place from the model's map has each piece's pages released once written: at most about one
#: piece of the model's map is resident at a time (the written data goes to the page cache, not to this process)
_PIECE = 64 << 10
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
#: field kinds of :meth:`_Writer._table`: a uoffset, one byte (the 4-byte scalars are _U32 and _I32)
_OFF = struct.Struct("<I")
_U8 = struct.Struct("<B")
_ZEROS = (b"", b"\0", b"\0\0", b"\0\0\0")
#: the packers of up to 64 uint32, by count
_U32S = tuple(struct.Struct(f"<{n}I") for n in range(65))
#: the packers of a vector of up to 16 int32 with its length before it, by length
_LENGTH_I32S = tuple(struct.Struct(f"<I{n}i") for n in range(17))


class _Flat:
    """The layout of a table that :meth:`_Writer._flat_table` writes at once: its bytes from the soffset to the
    vtable (its lowest address) up to the first field written, for tables whose fields are all present (none holds
    its default).  ``keys[p]`` is the builder's vtable key of such a table written after ``p`` bytes of padding
    (:meth:`_Writer._end_object`: each field's distance from the soffset, from the last slot down, then the object
    size); ``offsets`` the positions above the soffset of the fields that are uoffsets (the rest are scalars)."""

    __slots__ = ("packer", "keys", "offsets")  # (not a dataclass: see _Region)

    def __init__(self, packer: struct.Struct, keys: tuple[tuple[int, ...], ...], offsets: tuple[int, ...]) -> None:
        self.packer = packer
        self.keys = keys
        self.offsets = offsets

    @staticmethod
    def of(fmt: str, key: tuple[int, ...], offsets: tuple[int, ...]) -> _Flat:
        packer = struct.Struct(fmt)
        return _Flat(packer, tuple(key + (packer.size + p,) for p in range(4)), offsets)


#: an operator (op, attribute type, attribute, inputs, outputs, location), from the soffset up: the four uoffsets,
#: three bytes of padding, the attribute type (a byte) and the op (a uint32)
_OP_FLAT = _Flat.of("<i4I3xBI", (4, 8, 12, 16, 23, 24), (4, 8, 12, 16))
#: an operator without a location
_OP_FLAT_NO_LOCATION = _Flat.of("<i3I3xBI", (4, 8, 12, 19, 20), (4, 8, 12))
#: a tensor (name, shape, type, data): data, type, shape, name
_TENSOR_FLAT = _Flat.of("<iIIII", (4, 8, 12, 16), (4, 12, 16))
#: a tensor without data: type, shape, name
_TENSOR_FLAT_NO_DATA = _Flat.of("<iIII", (4, 8, 12), (8, 12))
#: a location (its text)
_LOCATION_FLAT = _Flat.of("<iI", (4,), (4,))
#: a tensor without data (:data:`_TENSOR_FLAT_NO_DATA`) with its shape vector right above it, by rank
_SHAPED_TENSORS = tuple(struct.Struct(f"<iIIII{n}i") for n in range(9))
#: a table without fields
_EMPTY_FLAT = _Flat.of("<i", (), ())
#: an operator (:data:`_OP_FLAT`) with its location table and its one-element outputs vector (length, uoffset) right
#: above it, from the operator's soffset up (:meth:`_Writer._operator_with_output`)
_OP_LOC_OUT = struct.Struct("<i4I3xBIiIII")
#: an operator without a location (:data:`_OP_FLAT_NO_LOCATION`) with its one-element outputs vector right above it
_OP_OUT = struct.Struct("<i3I3xBIII")
#: a tensor with data (:data:`_TENSOR_FLAT`) and its data vector's length right above it
_TENSOR_LENGTH = struct.Struct("<iIIIII")
#: a field of :meth:`_Writer._table`: (slot, kind, value)
_Field = tuple[int, struct.Struct, int]
#: up to this size estimate :func:`write_file` builds the flatbuffer in memory and writes it with one call: for a
#: small program that is cheaper than the scratch file's map (file-backed page faults, fallocate, the kernel copy),
#: and the memory it takes is at most this much
IN_MEMORY_BYTES = 16 << 20


class _Writer:
    def __init__(self, graph: Graph, out: mmap.mmap | None = None, *, scratch: mmap.mmap | None = None) -> None:
        self.main = graph
        #: a symbolic TOSA 1.1-draft program (``--dynamic``): draft op codes, ``-1`` for unknown dimensions
        self.draft = graph.record.specification_version == catalogue.DRAFT_VERSION
        self.op_value = DRAFT_OP_VALUE if self.draft else OP_VALUE
        #: with ``scratch`` (an anonymous map) or ``out`` (a scratch file's map) the flatbuffer is built in that map,
        #: and the constants of a page or more are not copied into it but recorded here, (offset from the buffer's
        #: end, bytes), and written from their own memory by :func:`write_file`; their place in the map is never
        #: touched
        self.deferred: list[tuple[int, memoryview]] | None = None
        arena = scratch if scratch is not None else out
        if arena is not None:
            self.b = flatbuffers.Builder(0)
            self.b.Bytes = arena  # type: ignore[assignment]
            self.b.head = flatbuffers.number_types.UOffsetTFlags.py_type(len(arena))
            self.deferred = []
        else:  # (with an arena, write_file has made the estimate and checked the size)
            self.b = flatbuffers.Builder(_size_estimate(graph))  # sized up front: no regrowth, no copies
        #: a file map's written pages are released as the head passes them (the flatbuffer is written back to front
        #: and never changes what lies above its head), so memory does not grow with the program
        self.out = out
        self.released = len(out) if out is not None else 0
        #: each string written so far, by its offset from the buffer's end (see _string)
        self.shared: dict[str, int] = {}
        #: the op code of each op name met, when this program may hold it (see _opcode)
        self.opcodes: dict[str, str] = {}
        #: the fields of the scalar-only attribute tables written so far, by op code and values (see _attribute)
        self.scalar_tables: dict[tuple[Any, ...], list[_Field]] = {}
        #: the bytes above the soffset and the vtable's offset of a kept scalar table, by key and alignment
        self.kept_bodies: dict[tuple[tuple[Any, ...], int], tuple[bytes, int]] = {}
        self.used_tensor_names: set[str] = set()
        self.used_region_names: set[str] = {"main"}
        self.regions: list[_Region] = [_Region("main", graph)]
        # per graph (id): Value.id -> serialized tensor name
        self.names: dict[int, dict[int, str]] = {}
        # per op (id): names of its region graphs
        self.region_names: dict[tuple[int, int], list[str]] = {}
        # EXT-VARIABLE: variable name -> (tensor name, type, initial value or None), module-wide
        self.variables: dict[str, tuple[str, TensorType, np.ndarray | None]] = {}
        # per graph (id): variable names whose tensors live in that graph's block, in order
        self.block_variables: dict[int, list[str]] = {}

    # ------------------------------------------------------------ naming pass
    def _unique(self, base: str, used: set[str]) -> str:
        name, k = base, 1
        while name in used:
            name = f"{base}_{k}"
            k += 1
        used.add(name)
        return name

    def _declare_variable(self, g: Graph, name: str, op: Operation | None) -> None:
        if name in self.variables:
            if op is not None and op.opcode == "VARIABLE" and name in self.block_variables.get(id(g), []):
                raise InvalidGraphError(f"variable '{name}' declared twice", op=op.name)
            return
        vtype, init = variable_type(g, name, op)
        self.variables[name] = (self._unique(name, self.used_tensor_names), vtype, init)
        self.block_variables.setdefault(id(g), []).append(name)

    def _name_graph(self, g: Graph) -> None:
        names: dict[int, str] = {}
        self.names[id(g)] = names
        ops = g.topological_order()
        variable_ops = [op for op in ops if op.opcode in VARIABLE_OPS]
        for op in variable_ops:
            self._declare_variable(g, variable_name(op), op)
        for v in g.inputs:
            names[v.id] = self._unique(v.name, self.used_tensor_names)
        used = self.used_tensor_names
        results = list(chain.from_iterable(map(_RESULTS, ops)))
        result_names = list(map(_NAME, results))
        if not variable_ops and used.isdisjoint(result_names) and len(set(result_names)) == len(result_names):
            # no name taken twice (the usual case: a graph's value names are unique): each is its own, in one step
            names.update(zip(map(_ID, results), result_names))
            used.update(result_names)
        else:
            for op in ops:
                for r in op.results:
                    if op.opcode == "VARIABLE":  # a declaration's result (if any) is the variable tensor
                        names[r.id] = self.variables[variable_name(op)][0]
                    elif r.name not in used:  # (_unique of a name not taken yet: the name itself, without the call)
                        used.add(r.name)
                        names[r.id] = r.name
                    else:
                        names[r.id] = self._unique(r.name, used)
        for op in compress(ops, map(_REGIONS, ops)):
            rnames = []
            for i, sub in enumerate(op.regions):
                base = sub.name if sub.name and sub.name != g.name else f"{op.opcode.lower()}_{op.id}_{i}"
                rname = self._unique(base, self.used_region_names)
                rnames.append(rname)
                self.regions.append(_Region(rname, sub))
            self.region_names[(id(g), op.id)] = rnames
            for sub in op.regions:
                self._name_graph(sub)

    # ------------------------------------------------------------ primitives
    def _string(self, s: str) -> int:
        """``CreateString``'s bytes (length, UTF-8 bytes, a zero; aligned for the length) in fewer calls, each
        distinct string once (``CreateSharedString``): a tensor's name is read where it is declared, by the op that
        makes it and by every op that reads it, and names taken from TFLite run to hundreds of bytes."""
        b = self.b
        if b.nested or not isinstance(s, str):
            return int(b.CreateString(s))  # (raises as the builder does)
        off = self.shared.get(s)
        if off is not None:
            return off
        x = s.encode()
        n = len(x)
        head, buf = b.head, b.Bytes
        align = (head - len(buf) - n - 1) & 3  # Prep(4, n + 1): zero padding, in place when there is room
        if head < align + n + 5:
            b.Prep(4, n + 1)
            head, buf = b.head, b.Bytes
        else:
            if b.minalign < 4:
                b.minalign = 4
            if align:
                buf[head - align:head] = _ZEROS[align]
                head -= align
        head -= n + 1
        buf[head + n] = 0
        buf[head:head + n] = x
        head -= 4
        _U32.pack_into(buf, head, n)
        b.head = head
        off = self.shared[s] = len(buf) - head
        return off

    def _prep4(self, additional: int) -> None:
        """``Prep(4, additional)``: the builder's alignment of the head for a 4-byte element after ``additional``
        bytes (zero padding), in fewer calls; where the buffer must grow the builder's own ``Prep`` does it."""
        b = self.b
        if b.minalign < 4:
            b.minalign = 4
        head = b.head
        align = (head - len(b.Bytes) - additional) & 3
        if head < align + 4 + additional:
            b.Prep(4, additional)
        elif align:
            b.Bytes[head - align:head] = bytes(align)
            b.head = head - align

    def _offset_slot(self, slot: int, off: int) -> None:
        """``PrependUOffsetTRelativeSlot(slot, off, 0)`` inside a table, in fewer calls."""
        b = self.b
        if off == 0:
            return
        self._prep4(0)
        cur = len(b.Bytes) - b.head
        if off > cur:
            raise flatbuffers.builder.OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
        b.head -= 4
        _U32.pack_into(b.Bytes, b.head, cur - off + 4)
        b.current_vtable[slot] = cur + 4

    def _end_object(self) -> int:
        """``EndObject``: the table's soffset and its vtable (or the offset of an identical vtable written
        before: the builder's dedup dictionary), the same bytes in fewer calls."""
        b = self.b
        if not b.nested:
            return int(b.EndObject())  # (raises as the builder does)
        b.nested = False
        self._prep4(0)
        head = b.head - 4  # the soffset to the vtable, written below
        b.head = head
        object_offset = len(b.Bytes) - head
        vt = b.current_vtable
        key: list[int] = []
        trim = True
        for elem in reversed(vt):
            if elem == 0:
                if trim:
                    continue
            else:
                elem = object_offset - elem
                trim = False
            key.append(elem)
        object_size = object_offset - b.objectEnd
        key.append(object_size)
        vkey = tuple(key)
        found = b.vtables.get(vkey)
        if found is None:
            # key holds the fields from the last written one down to the first, then the object size: the vtable
            # is the vtable size, the object size and the fields in slot order
            fields = len(key) - 1
            b.Prep(2, 2 * (fields + 2) - 2)
            buf = b.Bytes
            h = b.head - 2 * (fields + 2)
            struct.pack_into(f"<{fields + 2}H", buf, h, 2 * (fields + 2), object_size, *reversed(key[:fields]))
            b.head = h
            start = len(buf) - object_offset
            _I32.pack_into(buf, start, (len(buf) - h) - object_offset)
            b.vtables[vkey] = len(buf) - h
        else:
            _I32.pack_into(b.Bytes, head, found - object_offset)
        b.current_vtable = None
        return object_offset

    def _table(self, nfields: int, fields: list[_Field]) -> int:
        """A whole table: ``StartObject(nfields)``, each ``(slot, kind, value)`` in order, then ``EndObject`` -- the
        bytes the builder's calls write, in one call.  ``kind`` :data:`_OFF` is a uoffset to ``value``
        (``PrependUOffsetTRelativeSlot``), :data:`_U32` / :data:`_I32` a 4-byte scalar, :data:`_U8` one byte
        (``Prepend*Slot``); the caller leaves out the fields holding their default (the builder skips those) and
        gives scalars in their type's range.  Where the buffer might have to grow, the builder's calls do it."""
        b = self.b
        buf, head = b.Bytes, b.head
        if b.nested or head < 8 * len(fields) + 2 * nfields + 16:  # (room for the padded fields and the vtable)
            return self._table_calls(nfields, fields)
        if b.minalign < 4:
            b.minalign = 4
        n = len(buf)
        vt = [0] * nfields
        object_end = n - head
        last = -1  # the highest slot written
        for slot, kind, value in fields:
            if slot > last:
                last = slot
            if kind is _U8:
                head -= 1
                buf[head] = value
            else:
                pad = (head - n) & 3
                if pad:
                    buf[head - pad:head] = _ZEROS[pad]
                    head -= pad
                if kind is _OFF:
                    cur = n - head
                    if value > cur:
                        raise flatbuffers.builder.OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
                    head -= 4
                    _U32.pack_into(buf, head, cur - value + 4)
                else:
                    head -= 4
                    kind.pack_into(buf, head, value)
            vt[slot] = n - head
        # EndObject where its vtable was written before (the usual case): the padding, the soffset to that vtable
        pad = (head - n) & 3
        object_offset = n - head + pad + 4
        # the builder's key: the fields from the last written one down to the first (each written field's entry
        # is not 0), then the object size
        key = [object_offset - e if e else 0 for e in vt[last::-1]] if last >= 0 else []
        key.append(object_offset - object_end)
        found = b.vtables.get(tuple(key))
        if found is None:  # (a new vtable: _end_object writes it)
            b.head, b.current_vtable, b.objectEnd, b.nested = head, vt, object_end, True
            return self._end_object()
        if pad:
            buf[head - pad:head] = _ZEROS[pad]
        head = n - object_offset
        _I32.pack_into(buf, head, found - object_offset)
        b.head = head
        return object_offset

    def _flat_table(self, flat: _Flat, values: list[int], nfields: int, fields: list[_Field]) -> int:
        """:meth:`_table` of ``fields`` (every one present, none holding its default) with one pack of ``values``,
        the same numbers in ``flat``'s order (from the lowest address up: each uoffset as its target's offset, then
        made relative here).  Where the builder has no vtable of this layout yet, or the buffer might have to
        grow, :meth:`_table` does it."""
        b = self.b
        head, buf = b.head, b.Bytes
        n = len(buf)
        pad = (head - n) & 3
        found = b.vtables.get(flat.keys[pad])
        if found is None or b.nested or head < 64:
            return self._table(nfields, fields)
        if b.minalign < 4:
            b.minalign = 4
        low = head - pad - flat.packer.size  # the soffset: the table's start
        at = n - low  # the table's offset (from the buffer's end)
        for pos in flat.offsets:
            i = (pos >> 2) - 1  # (the values from the soffset up are 4 bytes each, up to the last uoffset)
            rel = at - pos - values[i]  # (each uoffset points to higher addresses: at least past itself)
            if rel < 4:
                raise flatbuffers.builder.OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
            values[i] = rel
        if pad:
            buf[head - pad:head] = _ZEROS[pad]
        flat.packer.pack_into(buf, low, found - at, *values)
        b.head = low
        return at

    def _located_operator(self, text: int, code: int, attr_off: int, inputs_off: int, outputs_off: int) -> int:
        """An operator's location table (its ``text``) and then its table (:data:`_OP_FLAT`), the two
        :meth:`_flat_table` calls in one where the builder holds both vtables."""
        b = self.b
        head, buf = b.head, b.Bytes
        n = len(buf)
        pad = (head - n) & 3
        found_loc = b.vtables.get(_LOCATION_FLAT.keys[pad])
        found_op = b.vtables.get(_OP_FLAT.keys[0])  # (the location table leaves the head aligned)
        if found_loc is None or found_op is None or b.nested or head < 128:
            loc_off = self._flat_table(_LOCATION_FLAT, [text], 1, [(0, _OFF, text)])
            fields = [(OP_OP, _U32, code), (OP_ATTR_TYPE, _U8, code), (OP_ATTR, _OFF, attr_off),
                      (OP_INPUTS, _OFF, inputs_off), (OP_OUTPUTS, _OFF, outputs_off), (OP_LOCATION, _OFF, loc_off)]
            return self._flat_table(_OP_FLAT, [loc_off, outputs_off, inputs_off, attr_off, code, code], 6, fields)
        if b.minalign < 4:
            b.minalign = 4
        low = head - pad - 8  # the location table's soffset
        loc_off = n - low
        rels = [loc_off - 4 - text]
        op_low = low - 28  # the operator table's soffset
        op_off = n - op_low
        rels += [op_off - 4 - loc_off, op_off - 8 - outputs_off, op_off - 12 - inputs_off, op_off - 16 - attr_off]
        if min(rels) < 4:  # (each uoffset points to higher addresses: at least past itself)
            raise flatbuffers.builder.OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
        if pad:
            buf[head - pad:head] = _ZEROS[pad]
        _LOCATION_FLAT.packer.pack_into(buf, low, found_loc - loc_off, rels[0])
        _OP_FLAT.packer.pack_into(buf, op_low, found_op - op_off, rels[1], rels[2], rels[3], rels[4], code, code)
        b.head = op_low
        return op_off

    def _operator_with_output(self, out: int, text: int, code: int, attr_off: int, inputs_off: int) -> int:
        """An operator's outputs vector of one name (``out``), then its location table (``text``, 0: none) and its
        table: :meth:`_offset_vector` and :meth:`_located_operator` (or :meth:`_flat_table` of
        :data:`_OP_FLAT_NO_LOCATION`) in one pack, where the builder holds the tables' vtables; 0 otherwise (the
        caller then writes them as usual).  ``code``, ``attr_off`` and ``inputs_off`` are not 0."""
        b = self.b
        head, buf = b.head, b.Bytes
        n = len(buf)
        if text:
            found_loc = b.vtables.get(_LOCATION_FLAT.keys[0])  # (the vector leaves the head aligned)
            found_op = b.vtables.get(_OP_FLAT.keys[0])
        else:
            found_loc, found_op = 0, b.vtables.get(_OP_FLAT_NO_LOCATION.keys[0])
        if found_loc is None or found_op is None or b.nested or head < 128:
            return 0
        if b.minalign < 4:
            b.minalign = 4
        pad = (head - n) & 3  # (the vector's alignment, as _offset_vector makes it)
        vec = head - pad - 8  # the vector's length; its element above it
        outputs_off = n - vec
        rel_out = outputs_off - 4 - out  # (the element lies 4 bytes above the length)
        if text:
            loc_off = outputs_off + 8  # the location table's soffset right below the vector
            op_off = loc_off + 28  # the operator table's soffset right below the location table
            rels = [op_off - 4 - loc_off, op_off - 8 - outputs_off, op_off - 12 - inputs_off, op_off - 16 - attr_off,
                    loc_off - 4 - text, rel_out]
        else:
            op_off = outputs_off + 24
            rels = [op_off - 4 - outputs_off, op_off - 8 - inputs_off, op_off - 12 - attr_off, rel_out]
        if min(rels) < 4:  # (each uoffset points to higher addresses: at least past itself)
            raise flatbuffers.builder.OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
        if pad:
            buf[head - pad:head] = _ZEROS[pad]
        low = n - op_off
        if text:
            _OP_LOC_OUT.pack_into(buf, low, found_op - op_off, rels[0], rels[1], rels[2], rels[3], code, code,
                                  found_loc - loc_off, rels[4], 1, rel_out)
        else:
            _OP_OUT.pack_into(buf, low, found_op - op_off, rels[0], rels[1], rels[2], code, code, 1, rel_out)
        b.head = low
        return op_off

    def _table_calls(self, nfields: int, fields: list[_Field]) -> int:
        """:meth:`_table` through the builder's own calls."""
        b = self.b
        b.StartObject(nfields)
        for slot, kind, value in fields:
            if kind is _OFF:
                self._offset_slot(slot, value)
            elif kind is _U8:
                b.PrependUint8Slot(slot, value, 0)
            elif kind is _I32:
                b.PrependInt32Slot(slot, value, 0)
            else:
                self._u32_slot(slot, value)
        return self._end_object()

    def _u32_slot(self, slot: int, value: int) -> None:
        """``PrependUint32Slot(slot, value, 0)`` inside a table, in fewer calls."""
        b = self.b
        if not 0 <= value < 1 << 32:
            b.PrependUint32Slot(slot, value, 0)  # (raises as the builder does)
            return
        if value == 0:
            return
        self._prep4(0)
        b.head -= 4
        _U32.pack_into(b.Bytes, b.head, value)
        b.current_vtable[slot] = len(b.Bytes) - b.head

    def _offset_vector(self, offsets: list[int]) -> int:
        """A vector of offsets, the bytes ``PrependUOffsetTRelative`` would write element by element, packed at once
        (StartVector has aligned the head and made room for all of them)."""
        b, n = self.b, len(offsets)
        head, buf = b.head, b.Bytes
        size = len(buf)
        if b.nested or head < 4 * n + 12:  # (_vector_head, inline: most vectors are one or two names)
            head = self._vector_head(n)
            buf = b.Bytes
            size = len(buf)
        else:
            if b.minalign < 4:
                b.minalign = 4
            align = (head - size - 4 * n) & 3
            if align:
                buf[head - align:head] = _ZEROS[align]
                head -= align
        if n == 1:  # (an op's output, a single input: the length and the element in one pack)
            rel = size - head + 4 - offsets[0]
            if rel < 4:
                raise flatbuffers.builder.OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
            head -= 8
            _U32S[2].pack_into(buf, head, 1, rel)
            b.head, b.nested = head, False
            return size - head
        if n:
            # element j lies at head - 4 * (n - j) and points ``offsets[j]`` from the end: past itself
            top = size - head + 4 * n
            rel = [top - 4 * j - off for j, off in enumerate(offsets)]
            if min(rel) < 4:
                raise flatbuffers.builder.OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
            head -= 4 * n + 4  # (the length, then the elements: one pack)
            (_U32S[n + 1] if n < 64 else struct.Struct(f"<{n + 1}I")).pack_into(buf, head, n, *rel)
        else:
            head -= 4
            _U32.pack_into(buf, head, 0)
        b.head, b.nested = head, False
        return size - head

    def _vector_head(self, n: int) -> int:
        """:meth:`_start_vector4`, returning the head: where there is room, the alignment is written here (the
        same zero bytes) and the builder's ``nested`` flag, which :meth:`_offset_vector` and :meth:`_i32_vector`
        reset as their ``EndVector``, is not set."""
        b = self.b
        head = b.head
        if b.nested or head < 4 * n + 12:  # (room for the padding, the elements and the length)
            self._start_vector4(n)
            return b.head  # type: ignore[no-any-return]
        if b.minalign < 4:
            b.minalign = 4
        align = (head - len(b.Bytes) - 4 * n) & 3
        if align:
            b.Bytes[head - align:head] = _ZEROS[align]
            head -= align
        return head

    def _start_vector4(self, n: int) -> None:
        """``StartVector(4, n, 4)`` in fewer calls: room and alignment for the length and ``n`` 4-byte elements
        (its second ``Prep``, for the same alignment, has nothing left to do)."""
        b = self.b
        if b.nested:
            b.StartVector(4, n, 4)  # (raises as the builder does)
        self._prep4(4 * n)
        b.nested = True

    def _string_vector(self, items: list[str]) -> int:
        shared = self.shared  # (a string written before: _string's lookup, without the call)
        return self._offset_vector([shared.get(s) or self._string(s) for s in items])

    def _i32_vector(self, items: list[int] | tuple[int, ...]) -> int:
        """A vector of int32 from plain ints (an attribute's list, a static shape), packed at once."""
        b, n = self.b, len(items)
        head, buf = b.head, b.Bytes
        if b.nested or head < 4 * n + 12:  # (_vector_head, inline: most are shapes of a few dimensions)
            head = self._vector_head(n)
            buf = b.Bytes
        else:
            if b.minalign < 4:
                b.minalign = 4
            align = (head - len(buf) - 4 * n) & 3
            if align:
                buf[head - align:head] = _ZEROS[align]
                head -= align
        try:  # (the length, then the elements: one pack)
            (_LENGTH_I32S[n] if n < len(_LENGTH_I32S) else struct.Struct(f"<I{n}i")).pack_into(
                buf, head - 4 * n - 4, n, *items)
        except struct.error as e:  # as flatbuffers' own range check reports it
            raise TypeError(f"bad int32 vector: {e}") from None
        head -= 4 * n + 4
        b.head, b.nested = head, False
        return len(buf) - head

    def _byte_vector(self, data: bytes, align: int = 8) -> int:
        n = len(data)
        self.b.StartVector(1, n, align)
        self.b.head = self.b.head - n
        self.b.Bytes[self.b.head:self.b.head + n] = data
        return self.b.EndVector()

    def _data_vector(self, data: Any) -> int:
        """A ``[ubyte]`` of constant data (bytes or a contiguous array), zero-padded to 8 bytes and 8-byte aligned,
        copied once: from the array's buffer into the flatbuffer."""
        raw = memoryview(data).cast("B")
        n = raw.nbytes
        padded = n + (-n % 8)
        b = self.b
        head = b.head
        align = (head - len(b.Bytes)) & 7  # StartVector(1, padded, 8)'s two Preps: zeros up to 8-byte alignment
        if b.nested or head < align + padded + 8:
            b.StartVector(1, padded, 8)  # (where the buffer may grow, or raises as the builder does)
            head = b.head
        else:
            if b.minalign < 8:
                b.minalign = 8
            if align:
                b.Bytes[head - align:head] = bytes(align)
                head -= align
            b.nested = True
        head = b.head = head - padded
        buf = b.Bytes
        buf[head + n:head + padded] = bytes(padded - n)
        if self.deferred is None or n < _PAGE:
            buf[head:head + n] = raw
        else:
            self.deferred.append((len(buf) - head, raw))
            out = self.out if buf is self.out else None  # (None when the builder outgrew the map)
            if out is not None and self.released - head >= _PIECE:  # everything above the head is final
                _drop(out, head, self.released)
                self.released = min(self.released, _page_up(head))
        # EndVector: the length before the elements
        b.nested, b.vectorNumElems = False, None
        head -= 4
        _U32.pack_into(buf, head, padded)
        b.head = head
        return len(buf) - head

    # ------------------------------------------------------------ attributes
    def _attribute(self, g: Graph, op: Operation, opcode: str) -> int:
        fields = ATTR_FIELDS.get(opcode, ())
        if not fields:  # (most ops: an empty table)
            return self._flat_table(_EMPTY_FLAT, [], 0, [])
        if opcode not in _SCALAR_ATTRS:
            if opcode in _VECTOR_ATTRS:
                return self._vector_attribute(g, op, opcode, fields)
            return self._attribute_fields(g, op, opcode, fields, None)
        # a table of scalars only (RESCALE, CONCAT …): its fields worked out once per set of values (each value with
        # its Python type: values equal across types may encode differently), the table written for every op
        attrs = op.attrs
        values = [attrs.get(fname, _ABSENT) for fname, _ in fields]
        key = (opcode, *values, *map(type, values))
        try:
            table = self.scalar_tables.get(key)
        except TypeError:  # (an unhashable value: worked out as for any table)
            return self._attribute_fields(g, op, opcode, fields, None)
        if table is not None:
            return self._kept_table(key, len(fields), table)
        return self._attribute_fields(g, op, opcode, fields, key)

    def _vector_attribute(self, g: Graph, op: Operation, opcode: str, fields: tuple[tuple[str, str], ...]) -> int:
        """The attribute table of an op of :data:`_VECTOR_ATTRS`, kept by op code and values as :meth:`_attribute`
        keeps a scalar table (a list or tuple as the tuple of its items, each value and item with its Python type:
        what the table's encoding reads), with its vectors: the first one of each (values, alignment) is worked out
        and written by :meth:`_attribute_fields`, the next is its bytes again (:meth:`_kept_block`)."""
        attrs = op.attrs
        values = [attrs.get(fname, _ABSENT) for fname, _ in fields]
        parts: list[Any] = [opcode]
        for val in values:
            if val.__class__ is list or val.__class__ is tuple:
                parts += (val.__class__, len(val), *val, *map(type, val))
            else:
                parts += (val, val.__class__)
        key = tuple(parts)
        b = self.b
        head, buf = b.head, b.Bytes
        n = len(buf)
        try:
            got = self.kept_bodies.get((key, (head - n) & 3))
        except TypeError:  # (an unhashable value, an array: worked out as for any table)
            return self._attribute_fields(g, op, opcode, fields, None)
        if got is not None and not b.nested and head >= len(got[0]) + 64:
            return self._kept_block(got)
        at = self._attribute_fields(g, op, opcode, fields, None)
        buf = b.Bytes
        if len(buf) == n and not b.nested:  # (the buffer did not grow: the bytes lie where they were written)
            low = n - at
            self.kept_bodies[(key, (head - n) & 3)] = (bytes(buf[low + 4:head]), at + _I32.unpack_from(buf, low)[0])
        return at

    def _kept_block(self, got: tuple[bytes, int]) -> int:
        """A table kept by :meth:`_vector_attribute` or :meth:`_kept_table`: its bytes above the soffset (fields,
        padding and, for the former, its vectors with their padding: the same bytes at the same alignment, each
        uoffset relative) and an soffset to its vtable, in two writes."""
        b = self.b
        head, buf = b.head, b.Bytes
        body, found = got
        low = head - len(body) - 4  # the soffset
        at = len(buf) - low
        if b.minalign < 4:
            b.minalign = 4
        buf[low + 4:head] = body
        _I32.pack_into(buf, low, found - at)
        b.head = low
        return at

    def _kept_table(self, key: tuple[Any, ...], nfields: int, fields: list[_Field]) -> int:
        """:meth:`_table` of a scalar-only attribute table kept under ``key``: its bytes above the soffset depend on
        nothing but the head's alignment, so the first table of each (key, alignment) is written by :meth:`_table`
        and its bytes and vtable kept; the next is those bytes and an soffset to that vtable, in two writes."""
        b = self.b
        head, buf = b.head, b.Bytes
        n = len(buf)
        got = self.kept_bodies.get((key, (head - n) & 3))
        if got is None or b.nested or head < len(got[0]) + 64:
            return self._table_kept(key, nfields, fields)
        return self._kept_block(got)

    def _table_kept(self, key: tuple[Any, ...], nfields: int, fields: list[_Field]) -> int:
        """:meth:`_table`, keeping for :meth:`_kept_table` the table's bytes above its soffset and its vtable's
        offset under (``key``, the head's alignment) where the builder wrote them in place."""
        b = self.b
        head, n0 = b.head, len(b.Bytes)
        at = self._table(nfields, fields)
        buf = b.Bytes
        n = len(buf)
        if n == n0 and not b.nested:  # (the buffer did not grow: the bytes lie where they were written)
            low = n - at
            self.kept_bodies[(key, (head - n) & 3)] = (bytes(buf[low + 4:head]), at + _I32.unpack_from(buf, low)[0])
        return at

    def _attribute_fields(self, g: Graph, op: Operation, opcode: str, fields: tuple[tuple[str, str], ...],
                          key: tuple[Any, ...] | None) -> int:
        """The attribute table of ``fields``; with ``key``, its fields (all scalars) are kept under it."""
        # Create the referenced objects (vectors, strings) before starting the table.
        refs: dict[str, int] = {}
        scalars: dict[str, int | bool] = {}
        for fname, kind in fields:
            if opcode in ("COND_IF", "WHILE_LOOP"):
                rnames = self.region_names.get((id(g), op.id))
                if rnames is None or len(rnames) != 2:
                    raise InvalidGraphError(f"{opcode} needs exactly two regions", op=op.name)
                idx = 0 if fname in ("then_graph", "cond_graph") else 1
                refs[fname] = self._string(rnames[idx])
                continue
            val = attr_value(op, fname, kind)
            try:
                if kind == I32S:
                    # (a list or tuple of plain ints, as the rules give pad, stride, perms …: as it is; _i32_vector
                    # packs each as an int either way)
                    ints = (list(val) if val.__class__ in (list, tuple) and all(x.__class__ is int for x in val)
                            else [int(x) for x in np.asarray(val).reshape(-1)])
                    refs[fname] = self._i32_vector(ints)
                elif kind == STR:
                    refs[fname] = self._string(str(val))
                elif kind == BYTES:
                    data = val.encode() if isinstance(val, str) else bytes(val)
                    refs[fname] = self._byte_vector(data, 1)
                elif kind == BOUND:
                    dtype = op.operands[0].type.dtype if op.operands else DType.FP32
                    refs[fname] = self._byte_vector(_pad8(encode_array(np.asarray([val]), dtype)))
                elif kind == I32:
                    scalars[fname] = int(val)
                elif kind == BOOL:
                    scalars[fname] = bool(val)
                elif kind == ACC:
                    scalars[fname] = ACC_VALUE[str(val).upper()]
                elif kind == NAN:
                    scalars[fname] = NAN_VALUE[str(val).upper()]
                elif kind == ROUND:
                    scalars[fname] = ROUNDING_VALUE[str(val).upper()]
                elif kind == RESIZE:
                    mode = str(val).upper()
                    scalars[fname] = RESIZE_VALUE["NEAREST_NEIGHBOR" if mode == "NEAREST" else mode]
            except (KeyError, ValueError, TypeError) as e:
                raise InvalidGraphError(f"bad value {val!r} for attribute '{fname}'", op=op.name) from e
        table: list[_Field] = []
        for slot, (fname, kind) in enumerate(fields):
            if fname in refs:
                if refs[fname]:
                    table.append((slot, _OFF, refs[fname]))
                continue
            x = int(scalars[fname])
            if kind == I32:
                if not -(1 << 31) <= x < 1 << 31:
                    return self._attribute_calls(fields, refs, scalars)  # (the builder raises)
                if x:
                    table.append((slot, _I32, x))
            elif kind == BOOL:
                if scalars[fname]:
                    table.append((slot, _U8, 1))
            elif not 0 <= x < 1 << 32:
                return self._attribute_calls(fields, refs, scalars)
            elif x:
                table.append((slot, _U32, x))
        if key is not None:
            self.scalar_tables[key] = table
        return self._table(len(fields), table)

    def _attribute_calls(self, fields: tuple[tuple[str, str], ...], refs: dict[str, int],
                         scalars: dict[str, int | bool]) -> int:
        """The attribute table through the builder's own calls (which raise for a scalar out of its range)."""
        self.b.StartObject(len(fields))
        for slot, (fname, kind) in enumerate(fields):
            if fname in refs:
                self._offset_slot(slot, refs[fname])
            elif kind == I32:
                self.b.PrependInt32Slot(slot, int(scalars[fname]), 0)
            elif kind == BOOL:
                self.b.PrependBoolSlot(slot, bool(scalars[fname]), False)
            else:
                self._u32_slot(slot, int(scalars[fname]))
        return self._end_object()

    # ------------------------------------------------------------ tables
    def _tensor(self, name: str, v: Value, data: Any) -> int:
        t = v.type
        dims = static_dims(t)
        if dims is None and not self.draft:
            raise InvalidGraphError(f"tensor shape {t.shape} is not static", tensor=v.name)
        if t.dtype not in DTYPE_VALUE or t.dtype is DType.SHAPE:
            raise InvalidGraphError(f"type {t.dtype} has no TOSA tensor type", tensor=v.name)
        name_off = self.shared.get(name) or self._string(name)  # (written where the op making it names it)
        code = DTYPE_VALUE[t.dtype]
        if dims is not None:
            off = self._shaped_tensor(name_off, dims, code) if data is None else self._const_tensor(name_off, dims,
                                                                                                   code, data)
            if off:
                return off
        # an unknown dimension (a symbol) is -1, as Arm's 1.1-draft serializer writes it
        # (a static shape's dimensions are ints, which _i32_vector packs as such)
        shape_off = self._i32_vector(dims if dims is not None else [int(d) if isinstance(d, int) else -1
                                                                    for d in t.shape])
        fields = [(T_NAME, _OFF, name_off), (T_SHAPE, _OFF, shape_off), (T_TYPE, _U32, code)]
        if data is None:
            return self._flat_table(_TENSOR_FLAT_NO_DATA, [code, shape_off, name_off], 14, fields)
        data_off = self._data_vector(data)
        fields.append((T_DATA, _OFF, data_off))
        return self._flat_table(_TENSOR_FLAT, [data_off, code, shape_off, name_off], 14, fields)

    def _const_tensor(self, name_off: int, dims: tuple[int, ...], code: int, data: Any) -> int:
        """A tensor with data below a page: its shape vector (:meth:`_i32_vector`), its data vector
        (:meth:`_data_vector`) and its table (:data:`_TENSOR_FLAT`) in one call, the data vector's length and the
        table in one pack; 0 when the builder has no vtable of that layout yet, the buffer might have to grow, the
        rank is above 16 or the data is a page or more (then the caller writes them as usual)."""
        b, k = self.b, len(dims)
        head, buf = b.head, b.Bytes
        size = len(buf)
        found = b.vtables.get(_TENSOR_FLAT.keys[0])  # (the data vector's length leaves the head aligned)
        raw = memoryview(data).cast("B")
        n = raw.nbytes
        padded = n + (-n % 8)
        if found is None or k >= len(_LENGTH_I32S) or n >= _PAGE or b.nested or head < 4 * k + padded + 128:
            return 0
        if b.minalign < 8:
            b.minalign = 8
        align = (head - size - 4 * k) & 3  # the shape vector, as _i32_vector writes it
        if align:
            buf[head - align:head] = _ZEROS[align]
            head -= align
        try:
            _LENGTH_I32S[k].pack_into(buf, head - 4 * k - 4, k, *dims)
        except struct.error as e:  # as _i32_vector reports a dimension out of the int32 range
            raise TypeError(f"bad int32 vector: {e}") from None
        head -= 4 * k + 4
        shape_off = size - head
        align = (head - size) & 7  # the data vector, as _data_vector writes it: zeros up to 8-byte alignment
        if align:
            buf[head - align:head] = _ZEROS[align] if align < 4 else bytes(align)
            head -= align
        head -= padded
        buf[head + n:head + padded] = _ZEROS[padded - n] if padded - n < 4 else bytes(padded - n)
        buf[head:head + n] = raw
        low = head - 24  # the table's soffset; the vector's length 20 bytes above it
        at = size - low
        data_off = at - 20
        rels = (at - 4 - data_off, at - 12 - shape_off, at - 16 - name_off)
        if min(rels) < 4:  # (each uoffset points to higher addresses: at least past itself)
            raise flatbuffers.builder.OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
        _TENSOR_LENGTH.pack_into(buf, low, found - at, rels[0], code, rels[1], rels[2], padded)
        b.head, b.vectorNumElems = low, None  # (as _data_vector's EndVector leaves it)
        return at

    def _shaped_tensor(self, name_off: int, dims: tuple[int, ...], code: int) -> int:
        """A tensor without data: its shape vector (:meth:`_i32_vector`) and then its table
        (:data:`_TENSOR_FLAT_NO_DATA`, right below the vector: no padding between), packed in one call; 0 when the
        builder has no vtable of that layout yet, the buffer might have to grow or the rank is above 8 (then the
        caller writes them as usual)."""
        b, n = self.b, len(dims)
        head, buf = b.head, b.Bytes
        size = len(buf)
        found = b.vtables.get(_TENSOR_FLAT_NO_DATA.keys[0])
        if found is None or n >= len(_SHAPED_TENSORS) or b.nested or head < 4 * n + 64:
            return 0
        if b.minalign < 4:
            b.minalign = 4
        align = (head - size - 4 * n) & 3  # (the vector's alignment, as _i32_vector makes it)
        low = head - align - 4 * n - 20  # the table's soffset; the vector's length 16 bytes above it
        at = size - low
        rel_name = at - 12 - name_off
        if rel_name < 4:  # (a uoffset points past itself)
            raise flatbuffers.builder.OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
        try:  # soffset, type, shape (the vector right above: 8 bytes on), name; the vector's length and dimensions
            _SHAPED_TENSORS[n].pack_into(buf, low, found - at, code, 8, rel_name, n, *dims)
        except struct.error as e:  # as _i32_vector reports a dimension out of the int32 range
            raise TypeError(f"bad int32 vector: {e}") from None
        if align:
            buf[head - align:head] = _ZEROS[align]
        b.head = low
        return at

    def _variable_tensor(self, vname: str) -> int:
        tname, t, init = self.variables[vname]
        name_off = self._string(tname)
        shape_off = self._i32_vector(t.static_shape)
        data_off = self._byte_vector(_pad8(encode_array(init, t.dtype))) if init is not None else None
        vname_off = self._string(vname)
        self.b.StartObject(14)
        self._offset_slot(T_NAME, name_off)
        self._offset_slot(T_SHAPE, shape_off)
        self._u32_slot(T_TYPE, DTYPE_VALUE[t.dtype])
        if data_off is not None:
            self._offset_slot(T_DATA, data_off)
        self.b.PrependBoolSlot(T_VARIABLE, True, False)
        self._offset_slot(T_VARNAME, vname_off)
        return self._end_object()

    def _shape(self, name: str, v: Value, values: np.ndarray | None) -> int:
        """A shape value: CONST_SHAPE's with its data; in a 1.1-draft program one computed at run time (DIM,
        CONCAT_SHAPE ...) has its length only (an empty data vector, as Arm's serializer writes it)."""
        flat = np.asarray(values if values is not None else [], np.int64).reshape(-1)
        length = int(flat.size) if values is not None else int(v.type.shape[0])
        name_off = self._string(name)
        data_off = self._byte_vector(_pad8(encode_array(flat, DType.SHAPE)))
        self.b.StartObject(3)
        self._offset_slot(S_NAME, name_off)
        self._u32_slot(S_RANK, length)
        self._offset_slot(S_DATA, data_off)
        return self._end_object()

    def _opcode(self, op: Operation) -> str:
        """The op code of a TOSA operation this program may hold (kept by op name); raises for any other op."""
        dialect, _, opcode = op.name.rpartition(".")  # (op.dialect and op.opcode of a name with one dot)
        if op.name.count(".") != 1:
            dialect, opcode = op.dialect, op.opcode
        if dialect != "tosa" or opcode not in self.op_value or opcode == "UNKNOWN":
            if dialect == "tosa" and catalogue.is_draft(opcode):
                raise InvalidGraphError(f"{opcode} is an operator of the TOSA {catalogue.DRAFT_VERSION}, not of "
                                        "1.0 (convert with --dynamic)", op=op.name)
            raise InvalidGraphError("not a TOSA 1.0 operation", op=op.name)
        self.opcodes[op.name] = opcode
        return opcode

    def _operator(self, g: Graph, op: Operation) -> int | None:
        names = self.names[id(g)]
        opcode = self.opcodes.get(op.name) or self._opcode(op)
        try:  # (_value_name: a value of this graph that has a name)
            in_names = [names[v.id] if v.graph is g and v.id in names else self._value_name(g, v)
                        for v in op.operands]
        except KeyError as e:
            raise InvalidGraphError(f"operand {e} is not defined in this graph", op=op.name) from e
        out_names = [names[r.id] for r in op.results]
        own = opcode
        if opcode in VARIABLE_OPS:
            # As Arm's serializer does: the variable is a tensor (variable=true); a read is an
            # IDENTITY from it, a write an IDENTITY into it; the declaration has no operator.
            var_tensor = self.variables[variable_name(op)][0]
            if opcode == "VARIABLE":
                return None
            if opcode == "VARIABLE_READ":
                in_names = [var_tensor]
            else:
                if len(in_names) != 1 or op.results:
                    raise InvalidGraphError("VARIABLE_WRITE takes one operand and has no results", op=op.name)
                out_names = [var_tensor]
            opcode = "IDENTITY"
        attr_off = self._attribute(g, op, opcode) if opcode == own else self._empty_table()
        shared = self.shared  # (_string_vector's lookups, without its call)
        inputs_off = self._offset_vector([shared.get(s) or self._string(s) for s in in_names])
        out_offs = [shared.get(s) or self._string(s) for s in out_names]
        code = self.op_value[opcode]
        if len(out_offs) == 1 and code and attr_off and inputs_off:
            # one output, and a location already written (or none): the outputs vector and the tables in one pack
            text = shared.get(op.location) if op.location else 0
            if text is not None:
                got = self._operator_with_output(out_offs[0], text, code, attr_off, inputs_off)
                if got:
                    return got
        outputs_off = self._offset_vector(out_offs)
        loc_off = 0
        if op.location:
            text = shared.get(op.location) or self._string(op.location)
            if code and attr_off and inputs_off and outputs_off:
                return self._located_operator(text, code, attr_off, inputs_off, outputs_off)
            loc_off = self._flat_table(_LOCATION_FLAT, [text], 1, [(0, _OFF, text)])
        fields = [(OP_OP, _U32, code), (OP_ATTR_TYPE, _U8, code), (OP_ATTR, _OFF, attr_off),
                  (OP_INPUTS, _OFF, inputs_off), (OP_OUTPUTS, _OFF, outputs_off)]
        if not (code and attr_off and inputs_off and outputs_off):  # (a zero holds the default: not written)
            return self._table(6, [f for f in fields if f[2]] + ([(OP_LOCATION, _OFF, loc_off)] if loc_off else []))
        if not loc_off:
            return self._flat_table(_OP_FLAT_NO_LOCATION, [outputs_off, inputs_off, attr_off, code, code], 6, fields)
        fields.append((OP_LOCATION, _OFF, loc_off))
        return self._flat_table(_OP_FLAT, [loc_off, outputs_off, inputs_off, attr_off, code, code], 6, fields)

    def _empty_table(self) -> int:
        self.b.StartObject(0)
        return self._end_object()

    def _value_name(self, g: Graph, v: Value) -> str:
        names = self.names[id(g)]
        if v.graph is not g or v.id not in names:
            raise KeyError(v.name)
        return names[v.id]

    def _block(self, region: _Region) -> int:
        g = region.graph
        names = self.names[id(g)]
        ops = g.topological_order()
        op_offs = [off for off in (self._operator(g, op) for op in ops) if off is not None]
        tensor_offs: list[int] = []
        shape_offs: list[int] = []
        for vname in self.block_variables.get(id(g), []):
            tensor_offs.append(self._variable_tensor(vname))
        for v in g.inputs:
            tensor_offs.append(self._tensor(names[v.id], v, None))
        for op in ops:
            opcode = op.opcode
            for r in op.results:
                if opcode == "VARIABLE":
                    continue
                if r.type.dtype is DType.SHAPE:
                    if opcode == "CONST_SHAPE":
                        shape_offs.append(self._shape(names[r.id], r, np.asarray(op.attrs["values"])))
                    elif self.draft:
                        shape_offs.append(self._shape(names[r.id], r, None))
                    else:
                        raise InvalidGraphError("only CONST_SHAPE may produce shape values in TOSA 1.0",
                                                op=op.name)
                    continue
                data = None
                if opcode == "CONST":
                    vals = np.asarray(op.attrs["values"])
                    if vals.size != _size(r.type):
                        raise InvalidGraphError(f"CONST values have {vals.size} elements, type needs {r.type.size}",
                                                op=op.name, tensor=r.name)
                    data = constant_data(vals, r.type.dtype)
                tensor_offs.append(self._tensor(names[r.id], r, data))
        try:
            in_names = [names[v.id] for v in g.inputs]
            out_names = [self._value_name(g, v) for v in g.outputs]
        except KeyError as e:
            raise InvalidGraphError(f"graph output {e} is not defined in graph {g.name}") from e
        name_off = self._string(region.name)
        ops_vec = self._offset_vector(op_offs)
        tensors_vec = self._offset_vector(tensor_offs)
        inputs_vec = self._string_vector(in_names)
        outputs_vec = self._string_vector(out_names)
        shapes_vec = self._offset_vector(shape_offs)
        self.b.StartObject(6)
        self._offset_slot(B_NAME, name_off)
        self._offset_slot(B_OPERATORS, ops_vec)
        self._offset_slot(B_TENSORS, tensors_vec)
        self._offset_slot(B_INPUTS, inputs_vec)
        self._offset_slot(B_OUTPUTS, outputs_vec)
        self._offset_slot(B_SHAPES, shapes_vec)
        return self._end_object()

    def _region(self, region: _Region) -> int:
        block = self._block(region)
        name_off = self._string(region.name)
        blocks_vec = self._offset_vector([block])
        self.b.StartObject(2)
        self._offset_slot(R_NAME, name_off)
        self._offset_slot(R_BLOCKS, blocks_vec)
        return self._end_object()

    def write(self) -> bytearray:
        self._name_graph(self.main)
        region_offs = [self._region(r) for r in self.regions]
        regions_vec = self._offset_vector(region_offs)
        major, minor, patch, draft = DRAFT_FB_VERSION if self.draft else VERSION
        self.b.StartObject(4)
        self.b.PrependInt32Slot(V_MAJOR, major, -1)
        self.b.PrependInt32Slot(V_MINOR, minor, -1)
        self.b.PrependInt32Slot(V_PATCH, patch, -1)
        self.b.PrependBoolSlot(V_DRAFT, draft, True)
        version = self._end_object()
        self.b.StartObject(4)
        self._offset_slot(G_VERSION, version)
        self._offset_slot(G_REGIONS, regions_vec)
        root = self._end_object()
        self.b.Finish(root, file_identifier=FILE_IDENTIFIER)
        out = self.b.Bytes
        if not isinstance(out, bytearray):  # the file map: the flatbuffer is its tail
            return memoryview(out)[self.b.Head():]  # type: ignore[return-value]
        del out[:self.b.Head()]  # the unused front: CPython moves the buffer's start, the data is not copied
        return out


VARIABLE_OPS = frozenset({"VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE"})


def variable_name(op: Operation) -> str:
    for key in ("name", "uid"):
        if key in op.attrs:
            return str(op.attrs[key])
    raise InvalidGraphError("variable operation without a 'name' attribute", op=op.name)


def _as_dtype(x: Any) -> DType:
    if isinstance(x, DType):
        return x
    try:
        return DType(str(x).lower())
    except ValueError:
        pass
    try:
        return DType[str(x).upper()]
    except KeyError as e:
        raise InvalidGraphError(f"unknown variable type {x!r}") from e


def variable_type(g: Graph, name: str, op: Operation | None) -> tuple[TensorType, np.ndarray | None]:
    """Type and initial value of variable ``name`` from its VARIABLE op or ``graph.variables``."""
    attrs: dict[str, Any] = dict(op.attrs) if op is not None and op.opcode == "VARIABLE" else {}
    info = g.variables.get(name, {})
    init = next((attrs[k] for k in ("initial_value", "values") if attrs.get(k) is not None), info.get("initial"))
    vtype: TensorType | None = None
    if "type" in attrs and "var_shape" in attrs:
        vtype = TensorType(tuple(int(d) for d in np.asarray(attrs["var_shape"]).reshape(-1)),
                           _as_dtype(attrs["type"]))
    elif isinstance(info.get("type"), TensorType):
        vtype = info["type"]
    elif op is not None and op.results:
        vtype = op.results[0].type
    elif op is not None and op.operands:
        vtype = op.operands[0].type
    if vtype is None:
        raise InvalidGraphError(f"cannot tell the type of variable '{name}'", op=op.name if op else None)
    if init is not None:
        init = np.asarray(init)
        if init.size != vtype.size:
            raise InvalidGraphError(f"initial value of variable '{name}' has {init.size} elements, not {vtype.size}")
    return vtype.with_dtype(vtype.dtype), init


def _loc(op: Operation) -> str:
    return f"({op.location})" if op.location else ""


#: the ops whose result's data is in the file
_DATA_OPCODES = frozenset({"CONST", "CONST_SHAPE", "VARIABLE"})
_RESULTS, _REGIONS, _NAME, _ID = attrgetter("results"), attrgetter("regions"), attrgetter("name"), attrgetter("id")


def _size_estimate(graph: Graph) -> int:
    """An upper estimate of the flatbuffer's size, from the types (nothing is encoded); raises
    :class:`InvalidGraphError` naming the largest constant when the constants alone pass the 2 GiB limit."""
    data = 0
    other = 1024
    largest: tuple[int, str] = (0, "")
    stack = [graph]
    while stack:
        g = stack.pop()
        other += 256 * (len(g.inputs) + len(g.outputs)) + 512
        for op in g.ops.values():
            # tables, vtables, shape vectors; each name is written as a string where it is defined and where used
            loc, results, operands = op.location, op.results, op.operands
            other += 512 + 16 * len(operands)
            if loc:
                other += len(loc)
            for r in results:
                other += 256 + 2 * len(r.name)
            for v in operands:
                other += len(v.name)
            if op.regions:
                stack.extend(op.regions)
            if results and op.opcode in _DATA_OPCODES:
                r = results[0]
                n = data_size(r.type)
                data += n
                if n >= largest[0]:  # (max of (size, name) pairs, the pair made only where it may win)
                    largest = max(largest, (n, r.name))
    if data + other > MAX_FLATBUFFER_BYTES:
        raise InvalidGraphError(
            f"the program's constants take {data / 2**30:.2f} GiB, more than a TOSA flatbuffer can hold (2 GiB: "
            f"32-bit offsets); the largest is {largest[0] / 2**20:.1f} MiB", file=graph.source.file,
            tensor=largest[1])
    return data + other


def to_buffer(graph: Graph) -> bytearray:
    """Serialize ``graph`` (``tosa.*`` operations only) to a TOSA flatbuffer, returned as the builder's own buffer
    (no copy of the whole file; :func:`to_bytes` for immutable bytes)."""
    try:
        return _Writer(graph).write()
    except flatbuffers.builder.BuilderSizeError:
        raise _too_large(graph) from None


def _too_large(graph: Graph) -> InvalidGraphError:
    """The error of a program that a flatbuffer cannot hold (found while building it)."""
    return InvalidGraphError("the program is larger than a TOSA flatbuffer can hold (2 GiB: 32-bit offsets)",
                             file=graph.source.file)


def _copy_file(src: int, dst: int, offset: int, count: int) -> None:
    """Copy ``count`` bytes of file ``src`` from ``offset`` to the end of file ``dst`` (in the kernel if it can)."""
    done = 0
    in_kernel = hasattr(os, "copy_file_range")  # Linux
    while done < count:
        k = 0
        if in_kernel:
            try:
                k = os.copy_file_range(src, dst, count - done, offset + done)
            except OSError:  # e.g. a file system that cannot: copy through user space from here on
                in_kernel = False
        if not in_kernel:
            os.lseek(src, offset + done, os.SEEK_SET)
            k = os.write(dst, os.read(src, min(count - done, _PIECE)))
        if k <= 0:
            raise OSError(f"short copy ({done} of {count} bytes)")
        done += k


def write_file(graph: Graph, path: str | os.PathLike[str]) -> None:
    """Serialize ``graph`` into the file ``path`` without holding the whole flatbuffer in memory.

    A small program (size estimate up to :data:`IN_MEMORY_BYTES`) is built in an anonymous map.  A larger one is
    built in a memory map of a scratch file beside ``path`` (sparse, as large as the size estimate allows), whose
    pages are released as they are written; its tail, the finished flatbuffer, is then copied into ``path`` by the
    kernel.  Either way the constants of a page or more are not copied into the map: each is written to ``path``
    from its own memory, in its place (:func:`_write_constant`).  The bytes are those of :func:`to_bytes`.  Not
    atomic by itself: callers give a temporary path (:func:`tf2tosa.outputs.write_files` does)."""
    path = os.fspath(path)
    estimate = _size_estimate(graph)
    capacity = min(estimate + estimate // 8 + (1 << 20), flatbuffers.Builder.MAX_BUFFER_SIZE)
    if estimate <= IN_MEMORY_BYTES:
        with mmap.mmap(-1, capacity) as arena:  # anonymous: a page is zeroed only when first written
            writer = _Writer(graph, scratch=arena)
            try:
                built: Any = writer.write()
            except flatbuffers.builder.BuilderSizeError:
                raise _too_large(graph) from None
            view = memoryview(built)
            try:
                with open(path, "wb") as f:
                    _write_pieces(f, view, writer.deferred or [])
                    f.flush()
                    os.fsync(f.fileno())
            finally:
                view.release()
                if isinstance(built, memoryview):
                    built.release()
        return
    fd, scratch = tempfile.mkstemp(prefix=".scratch-", suffix=".tosa", dir=os.path.dirname(os.path.abspath(path)))
    try:
        os.ftruncate(fd, capacity)
        try:  # reserve the disk space: a full disk is then an OSError here, not a fault while writing the map
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(fd, 0, capacity)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
        with mmap.mmap(fd, capacity) as mm:
            writer = _Writer(graph, mm)
            try:
                data: Any = writer.write()
            except flatbuffers.builder.BuilderSizeError:
                raise _too_large(graph) from None
            with open(path, "wb") as f:
                if isinstance(data, memoryview) and data.obj is mm:
                    size = len(data)
                    data.release()
                    _copy_pieces(fd, f, capacity - size, size, writer.deferred or [])
                else:  # the builder outgrew the map and moved to memory
                    _write_pieces(f, memoryview(data), writer.deferred or [])
                f.flush()
                os.fsync(f.fileno())
    finally:
        os.close(fd)
        os.unlink(scratch)


def _write_pieces(f: Any, flatbuffer: memoryview, deferred: list[tuple[int, memoryview]]) -> None:
    """Write ``flatbuffer`` with each deferred constant, ``(offset from the end, bytes)``, written from its own
    memory in its place."""
    size = len(flatbuffer)
    pos = 0
    for from_end, raw in sorted(deferred, key=lambda d: -d[0]):
        at = size - from_end
        f.write(flatbuffer[pos:at])
        _write_constant(f, raw)
        pos = at + raw.nbytes
    f.write(flatbuffer[pos:])


def _copy_pieces(src: int, f: Any, start: int, size: int, deferred: list[tuple[int, memoryview]]) -> None:
    """:func:`_write_pieces` for a flatbuffer that lies in file ``src`` at ``start`` (``size`` bytes): its own bytes
    are copied by the kernel (:func:`_copy_file`), never read into this process."""
    pos = 0
    for from_end, raw in sorted(deferred, key=lambda d: -d[0]):
        at = size - from_end
        f.flush()
        _copy_file(src, f.fileno(), start + pos, at - pos)
        _write_constant(f, raw)
        pos = at + raw.nbytes
    f.flush()
    _copy_file(src, f.fileno(), start + pos, size - pos)


def _write_constant(f: Any, raw: memoryview) -> None:
    """Write a constant's bytes to ``f`` in pieces of :data:`_PIECE`; one read in place from a model's map has each
    piece's pages released once written (read from the file again if touched again), so that writing the weights
    does not make the whole model file resident."""
    base = raw.obj
    region = _file_region(base) if isinstance(base, np.ndarray) and base.flags.c_contiguous \
        and base.nbytes == raw.nbytes else None
    for lo, hi in _pieces(region[1] if region is not None else 0, raw.nbytes, 1, _PIECE):
        f.write(raw[lo:hi])
        if region is not None:
            _drop(region[0], region[1] + lo, region[1] + hi)


def to_bytes(graph: Graph) -> bytes:
    """Serialize ``graph`` (``tosa.*`` operations only) to TOSA flatbuffer bytes."""
    return bytes(to_buffer(graph))


def save(graph: Graph, path: str | os.PathLike[str]) -> None:
    """Write ``graph`` to ``path`` atomically (temporary file in the same directory, then rename)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".tosa", dir=directory)
    try:
        os.close(fd)
        write_file(graph, tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
