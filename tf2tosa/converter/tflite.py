"""The ``.tflite`` frontend: a TFLite flatbuffer → the IR (``tfl.*`` ops).

Only ``flatbuffers`` and numpy are used (the tables are read in place by :mod:`.tflite_reader`, with the schema's
field layout from :mod:`.tflite_schema`); TensorFlow is never imported.  Entry point: :func:`load_tflite`.

Graphs
------
Every subgraph becomes a :class:`~tf2tosa.ir.graph.Graph`; ``graph.source.subgraphs``
lists them all (index = TFLite subgraph index).  The returned graph is the main one:
the subgraph named by the first SignatureDef, else subgraph 0.  Its inputs/outputs
keep the subgraph's order (LiteRT's ``get_input_details()`` / ``get_output_details()``
order), not the SignatureDef's sorted key order.  (When the main subgraph is itself the
body of a control-flow op, the returned graph is a separate copy so that the
region keeps the subgraph order.)

Values
------
* Value names are the TFLite tensor names with every character outside
  ``[A-Za-z0-9_]`` replaced by ``_`` (made unique); ``Value.source`` is the original
  tensor name.  Unnamed tensors are called ``t<index>``.
* Shapes come from ``shape_signature`` when present: a ``-1`` becomes the symbol
  ``"batch"`` at dim 0 and ``"d<k>"`` at dim k.  The concrete ``shape`` stored in the
  file for such values is kept in ``graph.source.stored_shapes[value_name]``.
* Element types: FLOAT32→fp32, FLOAT16→fp16, BFLOAT16→bf16, FLOAT64→fp64, INT4→i4,
  INT8→i8, INT16→i16, INT32→i32, INT64→i64, UINT8→u8, UINT16→u16, UINT32→u32,
  UINT64→u64, BOOL→bool, STRING→string, COMPLEX64/128, RESOURCE, VARIANT, and from
  newer schemas FLOAT8_E4M3FN→fp8e4m3, FLOAT8_E5M2→fp8e5m2 (INT2 / UINT4 and
  tensors in external weight files raise ModelLoadError).  Op code 209 is
  STABLEHLO_CASE (``branch_subgraph_indices`` → regions).
* Quantization: ``QuantParams(scale, zero_point, axis)``; ``axis`` is
  ``quantized_dimension`` when there is more than one scale, else None.  No scale →
  no quantization.  A single zero point with several scales is broadcast.

Operations (op name → attrs)
----------------------------
* ``tfl.<builtin name in lower case>`` (``tfl.conv_2d``, ``tfl.fully_connected`` …), the
  builtin code being ``max(deprecated_builtin_code, builtin_code)``.  A code the
  schema does not know gives ``tfl.builtin_<code>``.  Attributes: every field of the
  builtin options table(s) (see :mod:`tf2tosa.converter.tflite_options`; a missing
  table gives the defaults of the op's usual table), plus:

  - ``op_version`` (int): the OperatorCode version;
  - ``intermediates`` (list[str]): tensor names of the operator's intermediates, when any;
  - ``intermediate_quant``: their quantization, ``[scales, zero points]`` or None each (the integer LSTM reads
    its effective hidden scale there);
  - ``custom_options`` (bytes) when a builtin op carries them;
  - ``side_effect`` (True) for ops without results, ops that update a variable
    tensor in place, and ASSIGN_VARIABLE / CALL_ONCE / HASHTABLE_IMPORT … ;
  - ``unknown_options_type`` (int) when the options union type is not in the schema.

  Operand order is TFLite's; an absent optional input (index -1, also trailing)
  is the result of a ``tfl.no_value`` op (no operands, type ``fp32[]``, one per
  graph).  An absent output gives a result named ``no_value``.
* Locations: ``"<BUILTIN NAME>#<operator index>"`` (``"CONV_2D#3"``, ``"CUSTOM#0"``);
  constants ``"CONST#<tensor index>"``, variables ``"VARIABLE#<tensor index>"``,
  ``"NO_VALUE"``.
* ``tfl.custom``: ``custom_code`` (str), ``custom_options`` (bytes),
  ``custom_options_format`` (str, ``"FLEXBUFFERS"``), ``custom_options_decoded``
  (the decoded FlexBuffer, only when decoding succeeds), ``op_version``.
* Ops referencing subgraphs (``*_subgraph_index`` fields, CALL's ``subgraph``,
  STABLEHLO_CUSTOM_CALL's ``called_computations``) keep those attrs and get
  ``op.regions`` = the referenced graphs, in field order.
* ``tfl.const``: ``values`` (ndarray in the tensor's dtype and stored shape; i4 is
  unpacked from nibbles into int8; bf16 / fp8 use ml_dtypes when installed, else the
  raw uint16 / uint8 bits; strings → object array of ``bytes``, plus ``raw`` = the buffer
  bytes), ``sparsity`` (for sparse tensors: ``{"traversal_order", "block_map",
  "dim_metadata": [{"format", "dense_size", "array_segments", "array_indices"}]}``;
  ``values`` then holds the stored, compressed values as a 1-D array).
* ``tfl.variable``: ``name`` (value name) for each ``is_variable`` tensor;
  ``graph.variables[name] = {"type", "initial" (ndarray or None), "source"}``.

Source record (``graph.source``, :class:`~tf2tosa.ir.records.SourceInfo`)
----------------------------------------------------------------------------
``format`` ("tflite"), ``file`` (path or None), ``tflite_version``,
``description``, ``signatures`` (list of ``{"signature_key", "subgraph_index",
"inputs": [(name, tensor_name)], "outputs": [...]}``), ``subgraphs``,
``main_subgraph_index``, ``subgraph_index``, ``stored_shapes``, ``tensor_indices``
(value name → TFLite tensor index in its subgraph, for per-layer comparisons), ``metadata``
(model metadata name → bytes), ``signature_names`` (value name → signature key name,
for the main graph's inputs/outputs).

Errors
------
Anything wrong with the file raises :class:`~tf2tosa.errors.ModelLoadError` with a
one-line message naming the file.
"""

from __future__ import annotations

import math
import mmap
import os
import re
import struct
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from ..errors import ModelLoadError
from ..ir.graph import Graph, Value
from ..ir.types import DType, QuantParams, TensorType, static_tensor_type
from ..tosa.profiles import NO_BUDGET, tensor_size_problem
from . import tflite_options as topt
from .tflite_reader import SCALARS, VECTOR_DTYPES, Field, Table, Tables, fields, gather
from .tflite_schema import OPTIONS_FIELDS

_MODEL, _OPCODE, _SUBGRAPH, _TENSOR = fields("Model"), fields("OperatorCode"), fields("SubGraph"), fields("Tensor")
_QUANT, _SPARSITY, _DIM = fields("QuantizationParameters"), fields("SparsityParameters"), fields("DimensionMetadata")
_BUFFER, _OPERATOR, _SIGNATURE = fields("Buffer"), fields("Operator"), fields("SignatureDef")
_TENSOR_MAP, _METADATA = fields("TensorMap"), fields("Metadata")
#: Tensor.external_buffer of newer schemas (field 10): names data in a separate weights file
EXTERNAL_BUFFER = Field(24, "I", 0, "ExternalBuffer")
#: the sparse index vector tables (Int32Vector, Uint16Vector, Uint8Vector) by their union type: (values field,
#: element kind, element size)
_SPARSE_VECTORS = {1: (fields("Int32Vector")["values"], "i", 4), 2: (fields("Uint16Vector")["values"], "H", 2),
                   3: (fields("Uint8Vector")["values"], "B", 1)}

__all__ = ["load_tflite", "TFLITE_DTYPES"]

#: TFLite TensorType enum value → IR dtype
TFLITE_DTYPES: dict[int, DType] = {
    0: DType.FP32, 1: DType.FP16, 2: DType.INT32, 3: DType.UINT8, 4: DType.INT64, 5: DType.STRING,
    6: DType.BOOL, 7: DType.INT16, 8: DType.COMPLEX64, 9: DType.INT8, 10: DType.FP64, 11: DType.COMPLEX128,
    12: DType.UINT64, 13: DType.RESOURCE, 14: DType.VARIANT, 15: DType.UINT32, 16: DType.UINT16,
    17: DType.INT4, 18: DType.BF16, 21: DType.FP8E4M3, 22: DType.FP8E5M2,
}
#: element types of newer schemas that the IR has no type for
_UNSUPPORTED_TYPES = {19: "INT2", 20: "UINT4"}

#: little-endian storage type of constant data
_STORAGE: dict[DType, str] = {
    DType.FP32: "<f4", DType.FP16: "<f2", DType.FP64: "<f8", DType.INT8: "i1", DType.INT16: "<i2",
    DType.INT32: "<i4", DType.INT64: "<i8", DType.UINT8: "u1", DType.UINT16: "<u2", DType.UINT32: "<u4",
    DType.UINT64: "<u8", DType.BOOL: "?", DType.COMPLEX64: "<c8", DType.COMPLEX128: "<c16", DType.BF16: "<u2",
    DType.FP8E4M3: "u1", DType.FP8E5M2: "u1",
}
#: :data:`_STORAGE` as numpy dtypes, and each in the machine's byte order (the constants' arrays)
_STORAGE_DTYPES: dict[DType, np.dtype[Any]] = {k: np.dtype(v) for k, v in _STORAGE.items()}
_NATIVE_DTYPES: dict[DType, np.dtype[Any]] = {k: v.newbyteorder("=") for k, v in _STORAGE_DTYPES.items()}
#: bits of one stored element of each :data:`_STORAGE` type (a tensor's size check, without a dtype call per tensor)
_STORAGE_BITS: dict[DType, int] = {k: np.dtype(v).itemsize * 8 for k, v in _STORAGE.items()}
#: the zero points each integer type can hold (int64 tensors are not checked)
_ZERO_POINT_RANGE: dict[DType, tuple[int, int]] = {d: d.range() for d in TFLITE_DTYPES.values()
                                                  if d.is_int and d is not DType.INT64}
#: by TFLite type code (as a byte): whether tf2tosa reads the type; the lowest and highest zero point it can hold
_KNOWN_TYPE = np.zeros(256, bool)
_KNOWN_TYPE[list(TFLITE_DTYPES)] = True
_ZP_LOW, _ZP_HIGH = np.full(256, np.iinfo(np.int64).min), np.full(256, np.iinfo(np.int64).max)
for _code, _dtype in TFLITE_DTYPES.items():
    if _dtype in _ZERO_POINT_RANGE:
        _ZP_LOW[_code] = _ZERO_POINT_RANGE[_dtype][0]
        _ZP_HIGH[_code] = min(_ZERO_POINT_RANGE[_dtype][1], _ZP_HIGH[_code])  # (uint64's: int64's, zero points')
#: tensors (buffers) read together (:meth:`_Loader._tensors`, :meth:`_Loader._buffer_data`): a few MB of arrays at
#: most
_TENSOR_CHUNK = 4096
#: the fields of a Tensor and its QuantizationParameters read for every tensor
_T_NAME, _T_SHAPE, _T_SIGNATURE = _TENSOR["name"], _TENSOR["shape"], _TENSOR["shape_signature"]
_T_TYPE = _TENSOR["type"]
_T_BUFFER, _T_IS_VARIABLE, _T_QUANTIZATION = _TENSOR["buffer"], _TENSOR["is_variable"], _TENSOR["quantization"]
_Q_SCALE, _Q_ZERO_POINT, _Q_AXIS = _QUANT["scale"], _QUANT["zero_point"], _QUANT["quantized_dimension"]
#: readers of short vectors of int32 (shapes), by length
_I32_VECTORS = tuple(struct.Struct(f"<{n}i") for n in range(9))
#: a table's soffset to its vtable; a vtable's size and its table's size
_SOFFSET, _VTABLE_SIZES = struct.Struct("<i"), struct.Struct("<HH")
#: the option fields that can name subgraphs (tflite_options.subgraph_fields looks for these names only): an op's
#: attributes without any of them reference none
_SUBGRAPH_KEYS = frozenset(f[0] for fs in OPTIONS_FIELDS.values() for f in fs if f[0].endswith("subgraph_index")
                           or f[0] in ("subgraph", "called_computations", "branch_subgraph_indices"))
#: a character that :func:`sanitize_name` replaces
_UNSAFE_CHARACTER = re.compile(r"[^A-Za-z0-9_]")
#: each byte that :data:`_UNSAFE_CHARACTER` matches as a character mapped to ``_``, the others to themselves
_SAFE_BYTES = bytes(b if re.fullmatch(rb"[A-Za-z0-9_]", bytes([b])) else ord("_") for b in range(256))

#: builtin ops that always have side effects
_SIDE_EFFECT_OPS = frozenset({"ASSIGN_VARIABLE", "CALL_ONCE", "HASHTABLE_IMPORT", "VAR_HANDLE", "HASHTABLE"})

_NO_VALUE_TYPE = TensorType((), DType.FP32)


def _oneline(text: str, limit: int) -> str:
    """``text`` with control characters escaped, cut to ``limit`` characters."""
    out = text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def _q(name: str) -> str:
    """A tensor name quoted for a message (escaped and shortened)."""
    return "'" + _oneline(name, 80) + "'"


class _Quoted:
    """``prefix``, the quoted name (:func:`_q`) and ``suffix``, as a message names a table or what is being read:
    made into text only for a message."""

    __slots__ = ("prefix", "name", "suffix")

    def __init__(self, prefix: str, name: str, suffix: str = "") -> None:
        self.prefix, self.name, self.suffix = prefix, name, suffix

    def __str__(self) -> str:
        return self.prefix + _q(self.name) + self.suffix

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def sanitize_name(name: str) -> str:
    """Keep ``[A-Za-z0-9_]``, replace every other character by ``_``."""
    if name.isascii():  # (the usual name: its bytes translated, several times faster than the pattern's sub)
        return name.encode().translate(_SAFE_BYTES).decode()
    return _UNSAFE_CHARACTER.sub("_", name)


#: up to this many scales a tensor's quantization is checked in Python (one numpy pass costs ~10 µs a call)
_FEW_SCALES = 16
#: readers of up to :data:`_FEW_SCALES` float32 scales, by count
_F32_VECTORS = tuple(struct.Struct(f"<{n}f") for n in range(_FEW_SCALES + 1))
#: readers of up to :data:`_FEW_SCALES` int64 zero points, by count
_I64_VECTORS = tuple(struct.Struct(f"<{n}q") for n in range(_FEW_SCALES + 1))


def _scales_at_least(arr: np.ndarray | None, scale: list[float], low: float) -> bool:
    """Every scale is finite and ``>= low`` (compared in float64: a float32 compare would round ulp(0.0) to 0)."""
    if len(scale) <= _FEW_SCALES or arr is None:
        return all(math.isfinite(s) and s >= low for s in scale)
    if min(scale) >= low and math.isfinite(sum(scale)):  # (a NaN or an infinity makes the sum one: then numpy)
        return True
    wide = np.asarray(arr, np.float64)
    return bool(np.isfinite(wide).all() and (wide >= low).all())


def _dims_of(shape: list[int], sig: list[int]) -> list[int | str]:
    """A tensor's dimensions from its stored ``shape`` and its ``shape_signature``: a dimension unknown in either
    (-1) becomes the symbol ``batch`` at dim 0, ``d<k>`` at dim k (``shape`` itself when none is unknown)."""
    if len(sig) == len(shape) and sig != shape or shape and min(shape) < 0:
        if len(sig) != len(shape):
            sig = shape
        dims: list[int | str] = []
        for k, (d, s) in enumerate(zip(shape, sig)):
            if s < 0 or d < 0:
                dims.append("batch" if k == 0 else f"d{k}")
            else:
                dims.append(int(d))
        return dims
    return shape  # type: ignore[return-value]  # (the stored dimensions when none is unknown)


def _runs(u8: np.ndarray, start: np.ndarray, count: np.ndarray, kind: str) -> tuple[np.ndarray, ...]:
    """The numbers of ``kind`` of many vectors, ``count[j]`` of them at ``start[j]`` of the bytes ``u8`` (each
    vector checked to lie in them): (all numbers in one array, the vector each belongs to, the index of each
    vector's first number)."""
    first = np.cumsum(count) - count
    owner = np.repeat(np.arange(len(count)), count)
    at = start[owner] + VECTOR_DTYPES[kind].itemsize * (np.arange(len(owner)) - first[owner])
    return gather(u8, at, kind, np.ones(len(owner), bool)), owner, first


class _Tensor:
    """One tensor of a subgraph as read.  (Plain classes, these two, not dataclasses: building a dataclass costs
    ~0.6 ms when the module is imported, inside every conversion; nothing compares or prints them.)"""
    __slots__ = ("index", "name", "type", "stored_shape", "tfl_type", "buffer", "is_variable", "sparsity")

    def __init__(self, index: int, name: str, type: TensorType, stored_shape: tuple[int, ...], tfl_type: int,
                 buffer: int, is_variable: bool, sparsity: dict[str, Any] | None) -> None:
        self.index = index
        self.name = name
        self.type = type
        self.stored_shape = stored_shape
        self.tfl_type = tfl_type
        self.buffer = buffer
        self.is_variable = is_variable
        self.sparsity = sparsity


class _Subgraph:
    """One subgraph while it is read: its graph, its tensors and the values made for them so far."""
    __slots__ = ("k", "g", "tensors", "stored", "tensor_indices", "values", "producers", "no_value")

    def __init__(self, k: int, g: Graph, tensors: list[_Tensor], stored: dict[str, tuple[int, ...]],
                 tensor_indices: dict[str, int]) -> None:
        self.k = k
        self.g = g
        self.tensors = tensors
        self.stored = stored  # the graph's stored_shapes
        self.tensor_indices = tensor_indices  # the graph's tensor_indices
        self.values: dict[int, Value] = {}
        self.producers: dict[int, int] = {}  # tensor index -> index of the operator writing it
        self.no_value: Value | None = None


def load_tflite(source: str | os.PathLike[str] | bytes | bytearray | memoryview | mmap.mmap, name: str | None = None,
                file: str | None = None) -> Graph:
    """Load a ``.tflite`` model (a path or the file's bytes) into the IR.

    ``name`` names the returned graph (default: the file's stem, or ``"main"``).  ``file`` is the path the
    bytes were read from, for error messages.
    Raises :class:`ModelLoadError` for a missing, truncated or corrupt file.
    """
    data: bytes | mmap.mmap
    if isinstance(source, (bytes, mmap.mmap)):
        data = source  # read in place: constants become read-only views of these bytes
        label = file or name or "<bytes>"
    elif isinstance(source, (bytearray, memoryview)):
        data = bytes(source)  # a mutable buffer is copied once, so the graph cannot change under it
        label = file or name or "<bytes>"
    else:
        file = os.fspath(source)
        label = file
        try:
            data = map_file(file)
        except OSError as e:
            raise ModelLoadError(f"cannot read TFLite model: {e.strerror or e}", file=label) from e
    loader = _Loader(data, file, label, name)
    try:
        return loader.load()
    except ModelLoadError:
        raise
    except RecursionError as e:
        raise ModelLoadError(f"corrupt TFLite model: structure nested too deeply (reading {loader.where})",
                             file=label) from e
    except MemoryError as e:
        raise ModelLoadError(f"corrupt TFLite model: implausible sizes (reading {loader.where})", file=label) from e
    except (struct.error, ValueError, IndexError, OverflowError) as e:
        raise ModelLoadError(f"corrupt or truncated TFLite model: data of {loader.where} lies outside the file "
                             f"({len(data)} bytes)", file=label) from e
    except Exception as e:  # any other malformed flatbuffer ends here
        msg = str(e).splitlines()[0][:200] if str(e) else ""
        raise ModelLoadError(f"corrupt TFLite model ({type(e).__name__}: {msg}) reading {loader.where}",
                             file=label) from e


def map_file(path: str | os.PathLike[str]) -> bytes | mmap.mmap:
    """The file's bytes as a read-only memory map (pages are read when touched, never copied), or ``b""`` for an
    empty file (which cannot be mapped).  Raises OSError."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


class _Loader:
    def __init__(self, buf: bytes | mmap.mmap, file: str | None, label: str, name: str | None) -> None:
        self.buf = buf
        self.n = len(buf)
        self.file = file
        self.label = label
        self.name = name
        self.opcodes: list[tuple[str, str, int]] = []  # (builtin NAME, custom code, version)
        #: (union, options type, builtin NAME) whose options table the op's own check accepted (see _attrs)
        self.options_ok: set[tuple[int, int, str]] = set()
        self.buffers: list[Any] = []
        #: :meth:`_options`: where the fields of an options table of scalars end, by (table name, vtable position);
        #: the decoded tables, by (table name, vtable position, the bytes from the soffset's end to there)
        self.option_extents: dict[tuple[str, int], int] = {}
        self.options_seen: dict[tuple[str, int, bytes], dict[str, Any]] = {}
        #: the file's bytes, of which :meth:`_buffer_bytes` gives views
        self.view = memoryview(buf)
        #: :meth:`_buffer_data`'s rows of the buffers read so far, by chunk
        self.buffer_rows: dict[int, list[tuple[int, int] | None]] = {}
        self.model: Table = Table(buf, 0)
        #: what is being read, for error messages
        self.where: str | _Quoted = "the model header"

    #: whether :meth:`_tensors` reads a subgraph's tensors together (tools/fuzz.py turns it off while it traces the
    #: fields each accessor reads)
    bulk = True
    #: ... when there are this many (tensors of a subgraph, buffers) at least: below, the NumPy calls of a bulk read
    #: (~0.7 ms for a model's tensors and buffers) cost about as much as reading each one (measured: even at ~60-100
    #: tensors, 0.6-0.7x at 170 and more)
    bulk_min = 96

    # ------------------------------------------------------------ checking
    def fail(self, msg: str, tensor: str | None = None, op: str | None = None) -> NoReturn:
        raise ModelLoadError(_oneline(msg, 400), file=self.label,
                             tensor=_oneline(tensor, 80) if tensor is not None else None,
                             op=_oneline(op, 80) if op is not None else None)

    def table(self, tab: Table | None, what: str | _Quoted) -> Table:
        """Check that a table's position and vtable lie inside the buffer."""
        if tab is None:
            self.fail(f"corrupt TFLite model: {what} is missing")
        pos = int(tab.pos)
        n = self.n
        if pos < 0 or pos + 4 > n:
            self.fail(f"corrupt TFLite model: {what} table at offset {pos} is outside the file ({n} bytes)")
        vt = pos - _SOFFSET.unpack_from(self.buf, pos)[0]
        if vt < 0 or vt + 4 > n:
            self.fail(f"corrupt TFLite model: {what} vtable at offset {vt} is outside the file ({n} bytes)")
        vt_size, t_size = _VTABLE_SIZES.unpack_from(self.buf, vt)
        if vt_size < 4 or vt_size % 2 or vt + vt_size > n or pos + t_size > n:
            self.fail(f"corrupt TFLite model: {what} table extends past the end of the file")
        tab.vtable_read(vt, vt_size)
        return tab

    # Every field is read through get / sub / vec / elem / string with its entry of tflite_schema.CORE_FIELDS
    # (tools/fuzz.py traces the fields a model's loading reads by wrapping these).
    @staticmethod
    def get(tab: Table, field: Field) -> Any:
        """A scalar field (its default when absent)."""
        return tab.scalar(field.voff, field.kind, field.default)

    @staticmethod
    def sub(tab: Table, field: Field) -> Table | None:
        """A table or union value field (None when absent)."""
        return tab.table(field[0])

    @staticmethod
    def vec(tab: Table, field: Field) -> tuple[int, int] | None:
        """(position of the first element, length) of a vector field (None when absent)."""
        return tab.vector(field[0])

    @staticmethod
    def elem(tab: Table, field: Field, j: int) -> Table | None:
        """Element ``j`` of a vector of tables (None when the vector is absent)."""
        v = tab.vector(field[0])
        return None if v is None else tab.table_at(v[0], j)

    def count(self, tab: Table, field: Field) -> int:
        """The length of a vector field (0 when absent)."""
        v = self.vec(tab, field)
        return v[1] if v is not None else 0

    def vlen(self, count: int, what: str, elem: int = 4) -> int:
        if count < 0 or count * elem > self.n:
            self.fail(f"corrupt TFLite model: {what} has an impossible length {count}")
        return int(count)

    def ivec(self, tab: Table, field: Field, what: str) -> list[int]:
        """An int vector field (``inputs``, ``shape`` …) as a list, bounds-checked."""
        v = self.vec(tab, field)
        if v is None:
            return []
        n = self.vlen(v[1], what)
        if n < len(_I32_VECTORS):  # (an op's inputs, outputs …: one struct read; past the file's end struct.error)
            return list(_I32_VECTORS[n].unpack_from(self.buf, v[0]))
        return np.frombuffer(self.buf, "<i4", n, v[0]).tolist()  # type: ignore[no-any-return]  # (Python ints)

    def string(self, tab: Table, field: Field) -> str:
        s = self.bytes_of(tab, field)
        return "" if s is None else s.decode("utf-8", "replace")

    @staticmethod
    def bytes_of(tab: Table, field: Field) -> bytes | None:
        """A string field's bytes (None when absent)."""
        return tab.string(field[0])

    # ------------------------------------------------------------- loading
    def load(self) -> Graph:
        buf, n = self.buf, self.n
        if n == 0:
            self.fail("empty file: not a TFLite model")
        if n < 8:
            self.fail(f"file too small to be a TFLite model ({n} bytes)")
        ident = buf[4:8]
        if ident != b"TFL3":
            self.fail(f"not a TFLite model: file identifier is {ident!r}, expected b'TFL3'")
        root = SCALARS["I"].unpack_from(buf, 0)[0]
        if root < 8 or root + 4 > n:
            self.fail(f"corrupt TFLite model: root table offset {root} is outside the file ({n} bytes)")
        self.where = "the Model table"
        model = self.table(Table(buf, root), "Model")
        self.model = model
        version = int(self.get(model, _MODEL["version"]))
        if version != 3:
            self.fail(f"unsupported TFLite schema version {version} (expected 3)")

        # operator codes
        names = topt.builtin_op_names()
        self.where = "the operator codes"
        for i in range(self.vlen(self.count(model, _MODEL["operator_codes"]), "operator_codes")):
            oc = self.table(self.elem(model, _MODEL["operator_codes"], i), f"OperatorCode {i}")
            deprecated = int(self.get(oc, _OPCODE["deprecated_builtin_code"]))
            code = int(self.get(oc, _OPCODE["builtin_code"]))
            # max(deprecated_builtin_code, builtin_code) as TFLite takes it; a builtin_code below
            # PLACEHOLDER_FOR_GREATER_OP_CODES (127) defers to deprecated_builtin_code, as the tflite package reads it
            code = deprecated if code < 127 else max(deprecated, code)
            bname = names.get(code, f"BUILTIN_{code}")
            self.opcodes.append((bname, self.string(oc, _OPCODE["custom_code"]), int(self.get(oc, _OPCODE["version"]))))

        self.buffers = [None] * self.vlen(self.count(model, _MODEL["buffers"]), "buffers")

        n_sub = self.vlen(self.count(model, _MODEL["subgraphs"]), "subgraphs")
        if n_sub == 0:
            self.fail("TFLite model has no subgraphs")
        self.where = "the signature defs"
        signatures = self._signatures(n_sub)
        main_index = signatures[0]["subgraph_index"] if signatures else 0

        graphs: list[Graph] = []
        refs: list[list[int]] = []
        for k in range(n_sub):
            g, r = self._subgraph(k)
            graphs.append(g)
            refs.append(r)
        self._link_regions(graphs)
        self._check_cycles(refs)

        main_is_region = any(main_index in r for r in refs)
        main = self._subgraph(main_index)[0] if main_is_region else graphs[main_index]
        if main_is_region:
            self._link_regions([main], graphs)
        if self.name:
            main.name = self.name
        elif self.file:
            main.name = sanitize_name(Path(self.file).stem) or "main"
        if signatures:
            self._apply_signature(main, signatures[0])

        src = main.source
        src.format = "tflite"
        src.file = self.file
        src.tflite_version = version
        src.description = self.string(model, _MODEL["description"])
        src.signatures = signatures
        src.subgraphs = graphs
        src.main_subgraph_index = main_index
        self.where = "the metadata"
        src.metadata = self._metadata()
        for g in graphs:
            if g is not main:
                g.source.format, g.source.file = "tflite", self.file
        return main

    def _signatures(self, n_sub: int) -> list[dict[str, Any]]:
        model = self.model
        out: list[dict[str, Any]] = []
        for i in range(self.vlen(self.count(model, _MODEL["signature_defs"]), "signature_defs")):
            sd = self.table(self.elem(model, _MODEL["signature_defs"], i), f"SignatureDef {i}")
            sub = int(self.get(sd, _SIGNATURE["subgraph_index"]))
            if not 0 <= sub < n_sub:
                self.fail(f"SignatureDef {i} references subgraph {sub}, but the model has {n_sub}")
            st = self.table(self.elem(model, _MODEL["subgraphs"], sub), f"SubGraph {sub}")
            out.append({
                "signature_key": self.string(sd, _SIGNATURE["signature_key"]),
                "subgraph_index": sub,
                "inputs": self._tensor_maps(st, sub, i, sd, _SIGNATURE["inputs"], "input"),
                "outputs": self._tensor_maps(st, sub, i, sd, _SIGNATURE["outputs"], "output"),
            })
        return out

    def _tensor_maps(self, st: Table, sub: int, i: int, sd: Table, field: Field,
                     kind: str) -> list[tuple[str, str]]:
        n_t = self.vlen(self.count(st, _SUBGRAPH["tensors"]), "tensors")
        res = []
        for j in range(self.vlen(self.count(sd, field), f"signature {kind}s")):
            tm = self.table(self.elem(sd, field, j), f"TensorMap {kind} {j}")
            ti = int(self.get(tm, _TENSOR_MAP["tensor_index"]))
            if not 0 <= ti < n_t:
                self.fail(f"SignatureDef {i} {kind} {j} references tensor {ti}, but subgraph {sub} has {n_t} tensors")
            tname = self.string(self.table(self.elem(st, _SUBGRAPH["tensors"], ti), f"Tensor {ti}"), _TENSOR["name"])
            res.append((self.string(tm, _TENSOR_MAP["name"]), tname))
        return res

    def _metadata(self) -> dict[str, bytes]:
        model = self.model
        out: dict[str, bytes] = {}
        for i in range(self.vlen(self.count(model, _MODEL["metadata"]), "metadata")):
            md = self.table(self.elem(model, _MODEL["metadata"], i), f"Metadata {i}")
            b = int(self.get(md, _METADATA["buffer"]))
            data = self._buffer_bytes(b) if 0 <= b < len(self.buffers) else None
            out[self.string(md, _METADATA["name"])] = bytes(data) if data is not None else b""
        return out

    # ------------------------------------------------------------- buffers
    def _buffer_bytes(self, index: int) -> memoryview | None:
        """The data of buffer ``index`` (None when it holds none)."""
        if not 0 <= index < len(self.buffers):
            self.fail(f"buffer index {index} out of range (model has {len(self.buffers)} buffers)")
        got = self._buffer_data(index) if self.bulk and len(self.buffers) >= self.bulk_min else None
        if got is not None:
            return self.view[got[0]:got[0] + got[1]] if got[1] > 0 else None  # (a view of the file, checked)
        b = self.table(self.elem(self.model, _MODEL["buffers"], index), f"Buffer {index}")
        offset, size = int(self.get(b, _BUFFER["offset"])), int(self.get(b, _BUFFER["size"]))
        if offset > 1:
            if offset + size > self.n:
                self.fail(f"buffer {index} data [{offset}, {offset + size}) lies outside the file ({self.n} bytes)")
            return memoryview(self.buf)[offset:offset + size]
        vec = self.vec(b, _BUFFER["data"])
        if vec is None:
            return None
        length = self.vlen(vec[1], f"buffer {index}", 1)
        if length == 0:
            return None
        # a view of the file, not a copy (raises when the vector runs past the end of the file)
        return memoryview(np.frombuffer(self.buf, np.uint8, length, vec[0]))  # type: ignore[arg-type]

    def _buffer_data(self, index: int) -> tuple[int, int] | None:
        """(position, length; -1 when absent) of buffer ``index``'s data vector as the tables of its
        :data:`_TENSOR_CHUNK` buffers, read together, give it; None when that read cannot vouch for it (a read
        outside the file, data kept at an ``offset``): then :meth:`_buffer_bytes` reads the buffer itself."""
        k = index // _TENSOR_CHUNK
        rows = self.buffer_rows.get(k)
        if rows is None:
            lo = k * _TENSOR_CHUNK
            v = self.vec(self.model, _MODEL["buffers"])
            assert v is not None
            u8 = np.frombuffer(self.buf, np.uint8)
            at = v[0] + 4 * np.arange(lo, min(len(self.buffers), lo + _TENSOR_CHUNK), dtype=np.int64)
            t = Tables(u8, at + gather(u8, at, "I", ok := np.ones(len(at), bool)), ok)
            offset = t.scalar(_BUFFER["offset"].voff, "q", 0)  # (as int64: an offset from 2^63 is not 0 or 1)
            t.scalar(_BUFFER["size"].voff, "q", 0)
            data_at, data_n = t.vector(_BUFFER["data"].voff, 1)
            good = t.ok & (offset >= 0) & (offset <= 1)
            rows = self.buffer_rows[k] = [(a, n) if g else None
                                          for g, a, n in zip(good.tolist(), data_at.tolist(), data_n.tolist())]
        return rows[index - k * _TENSOR_CHUNK]

    def _holds_data(self, index: int) -> bool:
        """Whether buffer ``index`` holds data (a constant tensor), without reading the data."""
        if not 0 < index < len(self.buffers):
            return False
        b = self.table(self.elem(self.model, _MODEL["buffers"], index), f"Buffer {index}")
        if int(self.get(b, _BUFFER["offset"])) > 1:
            return int(self.get(b, _BUFFER["size"])) > 0
        return self.count(b, _BUFFER["data"]) > 0

    # ------------------------------------------------------------- tensors
    def _tensors(self, st: Table, n_t: int) -> list[_Tensor]:
        """The ``n_t`` tensors of a subgraph, their tables read :data:`_TENSOR_CHUNK` at a time (:meth:`_tensor_rows`).
        A tensor that read cannot vouch for (a read outside the file, a value the checks refuse, sparsity …) is read
        again by :meth:`_tensor`, whose checks give the message: the tensors before it were read in full either way."""
        if not self.bulk or n_t < self.bulk_min:
            return [self._tensor(st, i) for i in range(n_t)]
        #: (shape, shape signature, type code) -> (dimensions, whether static) of the tensors read so far (their
        #: sizes checked): tensors of one shape and type are many
        shapes: dict[tuple[tuple[int, ...], tuple[int, ...], int], tuple[tuple[Any, ...], bool]] = {}
        out: list[_Tensor] = []
        for lo in range(0, n_t, _TENSOR_CHUNK):
            hi = min(n_t, lo + _TENSOR_CHUNK)
            rows = self._tensor_rows(st, lo, hi)
            if rows is None:
                out.extend(self._tensor(st, i) for i in range(lo, hi))
            else:
                self._tensors_of_rows(st, lo, rows, shapes, out)
        return out

    def _tensors_of_rows(self, st: Table, lo: int, rows: tuple[list[float], list[int], list[list[Any]]],
                         shapes: dict[Any, tuple[tuple[Any, ...], bool]], out: list[_Tensor]) -> None:
        """The tensors of :meth:`_tensor_rows` from ``lo`` on, appended to ``out``."""
        scales, zero_points, columns = rows
        buf, vectors = self.buf, _I32_VECTORS
        for i, (good, ns, nn, ss, sn, gs, gn, tt, bi, var, qn, qi, zn, zi, axis) in enumerate(zip(*columns), lo):
            if not good:
                out.append(self._tensor(st, i))
                continue
            self.where = f"tensor {i}"
            name = buf[ns:ns + nn].decode("utf-8", "replace") if nn >= 0 else ""
            shape = vectors[sn].unpack_from(buf, ss) if sn >= 0 else ()
            key = (shape, vectors[gn].unpack_from(buf, gs) if gn >= 0 else (), tt)
            dtype = TFLITE_DTYPES[tt]
            known = shapes.get(key)
            if known is None:
                dims = _dims_of(list(shape), list(key[1]))
                self._check_size(name, dims, list(shape), dtype)
                known = shapes[key] = (tuple(dims), dims == list(shape))
            quant = None
            if qn:
                zp = tuple(zero_points[zi:zi + zn]) if zn else (0,) * qn
                if zn == 1 and qn > 1:
                    zp *= qn
                quant = QuantParams(tuple(scales[qi:qi + qn]), zp, axis if qn > 1 else None)
            ttype = static_tensor_type(known[0], dtype, quant) if known[1] else TensorType(known[0], dtype, quant)
            out.append(_Tensor(i, name, ttype, shape, tt, bi, var != 0, None))

    def _tensor_rows(self, st: Table, lo: int, hi: int) -> tuple[list[float], list[int], list[list[Any]]] | None:
        """The fields :meth:`_tensor` reads, of tensors ``lo`` to ``hi - 1`` of a subgraph at once (:class:`Tables`):
        the scales and the zero points of all, and a column of each field (a row per tensor: whether it was read in
        full and passed the checks, name, shape and shape signature (position, length), type, buffer, is_variable,
        scales and zero points (count, first index), quantized dimension).  None when the tensors' scales or zero
        points together outnumber the file's bytes (a file that names the same vector again and again)."""
        v = self.vec(st, _SUBGRAPH["tensors"])
        assert v is not None
        u8 = np.frombuffer(self.buf, np.uint8)
        at = v[0] + 4 * np.arange(lo, hi, dtype=np.int64)
        t = Tables(u8, at + gather(u8, at, "I", ok := np.ones(hi - lo, bool)), ok)
        name_at, name_n = t.vector(_T_NAME.voff, 1)
        shape_at, shape_n = t.vector(_T_SHAPE.voff, 4)
        sig_at, sig_n = t.vector(_T_SIGNATURE.voff, 4)
        tt = t.scalar(_T_TYPE.voff, "b", 0)
        external = t.scalar(EXTERNAL_BUFFER.voff, "I", 0)
        buffer = t.scalar(_T_BUFFER.voff, "I", 0)
        variable = t.scalar(_T_IS_VARIABLE.voff, "B", 0)
        has_sparsity = t.table(_TENSOR["sparsity"].voff)[1]
        q_at, has_q = t.table(_T_QUANTIZATION.voff)
        ok = t.ok & (external == 0) & ~has_sparsity & (shape_n < len(_I32_VECTORS)) \
            & (sig_n < len(_I32_VECTORS)) & _KNOWN_TYPE[tt & 0xFF]
        q = Tables(u8, q_at, has_q)
        scale_at, scale_n = q.vector(_Q_SCALE.voff, 4)
        ok &= q.ok | ~has_q
        qn = np.where(ok, np.maximum(scale_n, 0), 0)  # (0: no quantization)
        z_ok = ok & (qn > 0)
        zp_at, zp_n = q.vector(_Q_ZERO_POINT.voff, 8, z_ok)
        zn = np.where(z_ok, np.maximum(zp_n, 0), 0)
        ok &= (z_ok | (qn == 0)) & ((zn <= 1) | (zn == qn))
        axis_ok = ok & (qn > 1)
        axis = q.scalar(_Q_AXIS.voff, "i", 0, axis_ok)
        ok &= axis_ok | (qn <= 1)
        qn, zn = np.where(ok, qn, 0), np.where(ok, zn, 0)
        if qn.sum() > self.n or zn.sum() > self.n:
            return None
        with np.errstate(invalid="ignore"):  # (a signalling NaN, widened: the tensor is read again)
            scales, owner, q_first = _runs(u8, scale_at, qn, "f")
            ok[owner[~(np.isfinite(scales) & (scales >= math.ulp(0.0)))]] = False  # (a scale 0: _tensor decides)
        zps, owner, z_first = _runs(u8, zp_at, zn, "q")
        ok[owner[(zps < _ZP_LOW[tt & 0xFF][owner]) | (zps > _ZP_HIGH[tt & 0xFF][owner])]] = False
        return scales.tolist(), zps.tolist(), [c.tolist() for c in (
            ok, name_at, name_n, shape_at, shape_n, sig_at, sig_n, tt, buffer, variable, qn, q_first, zn, z_first,
            axis)]

    def _tensor(self, st: Table, i: int) -> _Tensor:
        self.where = f"tensor {i}"
        t = self.table(self.elem(st, _SUBGRAPH["tensors"], i), f"Tensor {i}")
        name = self.string(t, _T_NAME)
        shape = self._dims(t, _T_SHAPE, "shape", name)
        sig = self._dims(t, _T_SIGNATURE, "shape_signature", name)
        dims = _dims_of(shape, sig)
        tt = int(self.get(t, _T_TYPE))
        if tt not in TFLITE_DTYPES:
            kind = _UNSUPPORTED_TYPES.get(tt, f"unknown element type {tt}")
            self.fail(f"tensor {_q(name)} has element type {kind}, which tf2tosa does not support", tensor=name)
        if self.get(t, EXTERNAL_BUFFER):
            self.fail(f"tensor {_q(name)} keeps its data in an external weights file, which tf2tosa does not "
                      f"read yet", tensor=name)
        dtype = TFLITE_DTYPES[tt]
        self._check_size(name, dims, shape, dtype)
        quant = self._quant(t, name)
        if quant is not None and dtype in _ZERO_POINT_RANGE:
            lo, hi = _ZERO_POINT_RANGE[dtype]
            zps = quant.zero_point
            if min(zps) < lo or max(zps) > hi:
                bad = [z for z in zps if not lo <= z <= hi]
                self.fail(f"quantization of tensor {_q(name)} has zero point {bad[0]} outside the {dtype.value} range",
                          tensor=name)
        sparsity = None
        sp = self.sub(t, _TENSOR["sparsity"])
        if sp is not None:
            sparsity = self._sparsity(self.table(sp, f"SparsityParameters of {_q(name)}"), name)
        ttype = TensorType(tuple(dims), dtype, quant)
        return _Tensor(i, name, ttype, tuple(shape), tt, int(self.get(t, _T_BUFFER)),
                       bool(self.get(t, _T_IS_VARIABLE)), sparsity)

    def _check_size(self, name: str, dims: list[int | str], shape: list[int], dtype: DType) -> None:
        """Refuse a tensor too large for level 8K, before anything of its size is allocated."""
        bits = _STORAGE_BITS.get(dtype, 8)
        # the stored shape too: it sizes dynamic dimensions for LiteRT (verify) and for constants.  Level 8K only: a
        # constant's bytes are in the file, and the execution budget is run's and verify's, not conversion's (a
        # stored shape equal to the dimensions, the usual case, is the same check again: not repeated)
        too_big = tensor_size_problem(dims, bits, budget=NO_BUDGET)
        if too_big is None and dims != shape:
            too_big = tensor_size_problem([max(d, 0) for d in shape], bits, budget=NO_BUDGET)
        if too_big is not None:
            self.fail(f"tensor {_q(name)}: {too_big}", tensor=name)

    def _dims(self, t: Table, field: Field, what: str, name: str) -> list[int]:
        """:meth:`ivec` of a tensor's ``shape`` or ``shape_signature`` (the tensor's name quoted in a message only
        when there is one to give)."""
        v = self.vec(t, field)
        if v is None:
            return []
        n = v[1]
        if n < 0 or n * 4 > self.n:
            self.fail(f"corrupt TFLite model: {what} of tensor {_q(name)} has an impossible length {n}")
        if n < len(_I32_VECTORS):
            return list(_I32_VECTORS[n].unpack_from(self.buf, v[0]))
        return np.frombuffer(self.buf, "<i4", n, v[0]).tolist()  # type: ignore[no-any-return]  # (Python ints)

    def _quant(self, t: Table, name: str) -> QuantParams | None:
        q = self.sub(t, _T_QUANTIZATION)
        if q is None:
            return None
        q = self.table(q, _Quoted("QuantizationParameters of ", name))
        vec = self.vec(q, _Q_SCALE)
        if vec is None or self.vlen(vec[1], "scale") == 0:
            return None
        n = vec[1]
        scale_arr = None if n <= _FEW_SCALES else np.frombuffer(self.buf, "<f4", n, vec[0])
        # (Python floats: float64, exact)
        scale: list[float] = scale_arr.tolist() if scale_arr is not None else list(
            _F32_VECTORS[n].unpack_from(self.buf, vec[0]))
        # TFLite's converter gives an all-zero channel (or tensor) of constant weights the scale 0.0: every value of
        # it dequantizes to 0 whatever the scale, and its RESCALE multiplier becomes 0 (quant.scale).  A scale of 0
        # on a computed tensor has no meaning (TFLite would divide by it), so only constants may carry it.  Scales
        # that are all positive pass either way: only otherwise is the buffer looked up.
        low = math.ulp(0.0)
        if not _scales_at_least(scale_arr, scale, low):  # (checked again only when the bound is lowered)
            low = 0.0 if self._holds_data(int(self.get(t, _T_BUFFER))) else low
            if not _scales_at_least(scale_arr, scale, low):
                bad = next(s for s in scale if not (math.isfinite(s) and s >= low))
                what = ("scales of constants must be finite and >= 0" if low == 0.0
                        else "scales must be positive and finite")
                self.fail(f"quantization of tensor {_q(name)} has scale {bad} ({what})", tensor=name)
        zp: list[int] = []
        zvec = self.vec(q, _Q_ZERO_POINT)
        if zvec is not None and self.vlen(zvec[1], "zero_point", 8):
            zn = zvec[1]  # (Python ints; past the file's end: struct.error or ValueError, one message for both)
            zp = list(_I64_VECTORS[zn].unpack_from(self.buf, zvec[0])) if zn <= _FEW_SCALES else \
                np.frombuffer(self.buf, "<i8", zn, zvec[0]).tolist()
        if not zp:
            zp = [0] * len(scale)
        elif len(zp) == 1 and len(scale) > 1:
            zp = zp * len(scale)
        elif len(zp) != len(scale):
            self.fail(f"quantization of tensor {_q(name)} has {len(scale)} scales but {len(zp)} zero points",
                      tensor=name)
        axis = int(self.get(q, _Q_AXIS)) if len(scale) > 1 else None
        return QuantParams(tuple(scale), tuple(zp), axis)

    def _sparsity(self, sp: Table, name: str) -> dict[str, Any]:
        dims = []
        for j in range(self.vlen(self.count(sp, _SPARSITY["dim_metadata"]), "dim_metadata")):
            dm = self.table(self.elem(sp, _SPARSITY["dim_metadata"], j), f"DimensionMetadata {j} of {_q(name)}")
            dims.append({
                "format": topt.enum_name("DimensionType", int(self.get(dm, _DIM["format"]))),
                "dense_size": int(self.get(dm, _DIM["dense_size"])),
                "array_segments": self._sparse_index_vector(int(self.get(dm, _DIM["array_segments_type"])),
                                                            self.sub(dm, _DIM["array_segments"]), name),
                "array_indices": self._sparse_index_vector(int(self.get(dm, _DIM["array_indices_type"])),
                                                           self.sub(dm, _DIM["array_indices"]), name),
            })
        return {
            "traversal_order": self.ivec(sp, _SPARSITY["traversal_order"], "traversal_order"),
            "block_map": self.ivec(sp, _SPARSITY["block_map"], "block_map"),
            "dim_metadata": dims,
        }

    def _sparse_index_vector(self, kind: int, tab: Table | None, name: str) -> list[int] | None:
        if tab is None or kind == 0:
            return None
        if kind not in _SPARSE_VECTORS:
            self.fail(f"tensor {_q(name)} has an unknown sparse index vector type {kind}", tensor=name)
        field, elem, size = _SPARSE_VECTORS[kind]
        self.table(tab, "sparse index vector")
        vec = self.vec(tab, field)
        if vec is None:
            return []
        self.vlen(vec[1], "sparse index vector", size)
        return np.frombuffer(self.buf, "<" + elem, vec[1], vec[0]).tolist()  # type: ignore[no-any-return]

    def _const_values(self, t: _Tensor, data: memoryview) -> tuple[np.ndarray, dict[str, Any]]:
        """Decode a constant tensor's buffer into (values, extra attrs)."""
        dtype = t.type.dtype
        shape = t.stored_shape
        count = math.prod(shape)
        extra: dict[str, Any] = {}
        nbytes = len(data)
        if t.sparsity is not None:
            # stored (compressed) values; densify comes later
            if dtype is DType.INT4 or dtype not in _STORAGE:
                self.fail(f"sparse tensor {_q(t.name)} of type {dtype.value} is not supported", tensor=t.name)
            st = np.dtype(_STORAGE[dtype])
            if nbytes % st.itemsize:
                self.fail(f"sparse tensor {_q(t.name)}: buffer size {nbytes} is not a multiple of {st.itemsize}",
                          tensor=t.name)
            arr = np.frombuffer(data, dtype=st).copy()
            return self._native(arr, dtype), extra
        if dtype is DType.STRING:
            return self._strings(t, data, count), {"raw": bytes(data)}
        if dtype is DType.INT4:
            raw = np.frombuffer(data, dtype=np.uint8)
            if nbytes == (count + 1) // 2:
                vals = np.empty(nbytes * 2, dtype=np.int8)
                vals[0::2] = (raw & 0x0F).astype(np.int8)
                vals[1::2] = (raw >> 4).astype(np.int8)
                vals = np.where(vals >= 8, vals - 16, vals).astype(np.int8)[:count]
            elif nbytes == count:
                vals = raw.view(np.int8).copy()
            else:
                self.fail(f"int4 tensor {_q(t.name)} of shape {list(shape)} has a {nbytes}-byte buffer", tensor=t.name)
            return vals.reshape(shape), extra
        if dtype not in _STORAGE:
            # resource / variant constants: keep the raw bytes
            return np.frombuffer(data, dtype=np.uint8).copy(), extra
        st = _STORAGE_DTYPES[dtype]
        if nbytes != count * st.itemsize:
            self.fail(f"constant tensor {_q(t.name)} of shape {list(shape)} and type {dtype.value} needs "
                      f"{count * st.itemsize} bytes but its buffer has {nbytes}", tensor=t.name)
        # a read-only view of the file's bytes: constants are not copied (they go to the .tosa from here)
        arr = np.frombuffer(data, dtype=st).reshape(shape)
        return self._native(arr, dtype), extra

    @staticmethod
    def _native(arr: np.ndarray, dtype: DType) -> np.ndarray:
        if dtype in (DType.BF16, DType.FP8E4M3, DType.FP8E5M2):
            try:
                return arr.view(dtype.np_dtype())
            except ImportError:  # no ml_dtypes: keep the raw bits
                return arr
        native = _NATIVE_DTYPES.get(dtype)
        if native is None or arr.dtype != _STORAGE_DTYPES[dtype]:
            native = arr.dtype.newbyteorder("=")
        return arr.astype(native, copy=False)

    def _strings(self, t: _Tensor, data: memoryview, count: int) -> np.ndarray:
        raw = bytes(data)
        if len(raw) < 4:
            self.fail(f"string tensor {_q(t.name)} has a malformed buffer", tensor=t.name)
        n = int(np.frombuffer(raw, "<i4", 1)[0])
        if n < 0 or 4 * (n + 2) > len(raw):
            self.fail(f"string tensor {_q(t.name)} has a malformed buffer", tensor=t.name)
        offs = np.frombuffer(raw, "<i4", n + 1, 4)
        if n != count or np.any(np.diff(offs) < 0) or offs[0] < 4 * (n + 2) or offs[-1] > len(raw):
            self.fail(f"string tensor {_q(t.name)} has a malformed buffer", tensor=t.name)
        out = np.empty(n, dtype=object)
        for j in range(n):
            out[j] = raw[int(offs[j]):int(offs[j + 1])]
        return out.reshape(t.stored_shape)

    # ----------------------------------------------------------- subgraphs
    def _subgraph(self, k: int) -> tuple[Graph, list[int]]:
        """Build subgraph ``k``; also return the subgraph indices its ops reference."""
        self.where = f"subgraph {k}"
        st = self.table(self.elem(self.model, _MODEL["subgraphs"], k), f"SubGraph {k}")
        gname = sanitize_name(self.string(st, _SUBGRAPH["name"])) or f"subgraph{k}"
        g = Graph(gname)
        g.source.subgraph_index = k
        stored: dict[str, tuple[int, ...]] = {}
        g.source.stored_shapes = stored
        n_t = self.vlen(self.count(st, _SUBGRAPH["tensors"]), "tensors")
        tensors = self._tensors(st, n_t)
        tensor_indices: dict[str, int] = {}
        g.source.tensor_indices = tensor_indices
        sub = _Subgraph(k, g, tensors, stored, tensor_indices)
        self._subgraph_inputs(sub, st)
        self._variables(sub)
        refs: list[int] = []
        for i, (o, ins, outs) in enumerate(self._operator_tables(sub, st)):
            self._operator(sub, i, o, ins, outs, refs)
        self.where = f"the outputs of subgraph {k}"
        for ti in self.ivec(st, _SUBGRAPH["outputs"], "subgraph outputs"):
            g.outputs.append(self._value_of(sub, ti, f"subgraph {k} outputs"))
        return g, refs

    def _check_index(self, sub: _Subgraph, ti: int, what: str) -> _Tensor:
        if not 0 <= ti < len(sub.tensors):
            self.fail(f"{what} references tensor {ti}, but subgraph {sub.k} has {len(sub.tensors)} tensors")
        return sub.tensors[ti]

    @staticmethod
    def _sym(sub: _Subgraph, v: Value, t: _Tensor) -> Value:
        """``v`` as the value of TFLite tensor ``t``: its source name, tensor index and stored shape recorded."""
        v.source = t.name
        sub.tensor_indices[v.name] = t.index
        if not v.type.is_static:
            sub.stored[v.name] = t.stored_shape
        return v

    def _subgraph_inputs(self, sub: _Subgraph, st: Table) -> None:
        for ti in self.ivec(st, _SUBGRAPH["inputs"], "subgraph inputs"):
            t = self._check_index(sub, ti, f"subgraph {sub.k} input")
            if ti in sub.values:
                sub.g.inputs.append(sub.values[ti])
                continue
            sub.values[ti] = self._sym(sub, sub.g.add_input(sanitize_name(t.name) or f"t{ti}", t.type), t)

    def _variables(self, sub: _Subgraph) -> None:
        """A ``tfl.variable`` op for each variable tensor (with its initial value when it has a buffer)."""
        g = sub.g
        for t in sub.tensors:
            if t.is_variable and t.index not in sub.values:
                data = self._buffer_bytes(t.buffer) if t.buffer else None
                init = self._const_values(t, data)[0] if data is not None else None
                op = g.add_op("tfl.variable", [], [t.type], {}, [sanitize_name(t.name) or f"t{t.index}"],
                              location=f"VARIABLE#{t.index}")
                vname = op.result.name
                op.attrs["name"] = vname
                g.variables[vname] = {"type": t.type, "initial": init, "source": t.name}
                sub.values[t.index] = self._sym(sub, op.result, t)

    def _operator_tables(self, sub: _Subgraph, st: Table) -> list[tuple[Table, list[int], list[int]]]:
        """Each operator's table, inputs and outputs; records which operator writes each tensor (one writer each,
        and none for a subgraph input)."""
        k, tensors, producers, values = sub.k, sub.tensors, sub.producers, sub.values
        ops_raw = []
        n_ops = self.vlen(self.count(st, _SUBGRAPH["operators"]), "operators")
        for i in range(n_ops):
            self.where = f"operator {i} of subgraph {k}"
            o = self.table(self.elem(st, _SUBGRAPH["operators"], i), f"Operator {i}")
            ins = self.ivec(o, _OPERATOR["inputs"], f"inputs of operator {i}")
            outs = self.ivec(o, _OPERATOR["outputs"], f"outputs of operator {i}")
            for ti in outs:
                if ti >= 0:
                    self._check_index(sub, ti, f"operator {i} output")
                    if ti in producers or (ti in values and values[ti].producer is None):
                        self.fail(f"tensor {_q(tensors[ti].name)} is written by more than one operator or is also a "
                                  f"subgraph input (subgraph {k}, operator {i})", tensor=tensors[ti].name)
                    producers[ti] = i
            ops_raw.append((o, ins, outs))
        return ops_raw

    def _value_of(self, sub: _Subgraph, ti: int, user: str) -> Value:
        """The value of tensor ``ti`` read by ``user``: made so far, a constant (made now), or the no-value."""
        if ti < 0:
            if sub.no_value is None:
                sub.no_value = sub.g.add_op("tfl.no_value", [], [_NO_VALUE_TYPE], {}, ["no_value"],
                                            location="NO_VALUE").result
            return sub.no_value
        t = self._check_index(sub, ti, user)
        if ti in sub.values:
            return sub.values[ti]
        self.where = _Quoted("constant tensor ", t.name, f" (buffer {t.buffer})")
        data = self._buffer_bytes(t.buffer) if t.buffer else None
        if data is None and t.sparsity is None and t.type.is_static and t.type.size == 0 \
                and t.type.dtype in _STORAGE:
            data = memoryview(b"")
        if data is None:
            if ti in sub.producers:
                self.fail(f"tensor {_q(t.name)} is read by {user} before operator {sub.producers[ti]} writes it "
                          f"(subgraph {sub.k} is not in execution order)", tensor=t.name)
            self.fail(f"tensor {_q(t.name)} read by {user} has no producer, no data and is not a subgraph input",
                      tensor=t.name)
        vals, extra = self._const_values(t, data)
        attrs: dict[str, Any] = {"values": vals, **extra}
        ctype = t.type if t.type.is_static else t.type.with_shape(t.stored_shape)
        if t.sparsity is not None:
            attrs["sparsity"] = t.sparsity
        op = sub.g.add_op("tfl.const", [], [ctype], attrs, [sanitize_name(t.name) or f"t{ti}"],
                          location=f"CONST#{ti}")
        sub.values[ti] = self._sym(sub, op.result, t)
        return sub.values[ti]

    def _operator(self, sub: _Subgraph, i: int, o: Table, ins: list[int], outs: list[int], refs: list[int]) -> None:
        """Operator ``i`` as a ``tfl.*`` op; appends the subgraphs it references to ``refs``."""
        k, tensors = sub.k, sub.tensors
        oi = int(self.get(o, _OPERATOR["opcode_index"]))
        if not 0 <= oi < len(self.opcodes):
            self.fail(f"operator {i} of subgraph {k} uses opcode index {oi}, "
                      f"but the model has {len(self.opcodes)} operator codes")
        bname, custom_code, op_version = self.opcodes[oi]
        loc = f"{bname}#{i}"
        self.where = f"operator {loc} of subgraph {k}"
        attrs = self._attrs(o, bname, custom_code, op_version, loc)
        for f in topt.subgraph_fields(attrs) if not _SUBGRAPH_KEYS.isdisjoint(attrs) else ():
            idxs = attrs[f] if isinstance(attrs[f], list) else [attrs[f]]
            for s in idxs:
                n_sub = self.vlen(self.count(self.model, _MODEL["subgraphs"]), "subgraphs")
                if not 0 <= s < n_sub:
                    self.fail(f"{loc} field {f} references subgraph {s}, but the model has {n_sub}", op=loc)
                refs.append(int(s))
        inter = self.ivec(o, _OPERATOR["intermediates"], f"intermediates of operator {i}")
        if inter:
            its = [self._check_index(sub, ti, f"{loc} intermediates") for ti in inter]
            attrs["intermediates"] = [t.name for t in its]
            attrs["intermediate_quant"] = [
                None if t.type.quant is None else [list(t.type.quant.scale), list(t.type.quant.zero_point)]
                for t in its]
        operands = [self._value_of(sub, ti, loc) for ti in ins]
        if any(v.producer is not None and v.producer.name == "tfl.variable" for v in operands) \
                or bname in _SIDE_EFFECT_OPS or not outs:
            attrs["side_effect"] = True
        rtypes = [tensors[ti].type if ti >= 0 else _NO_VALUE_TYPE for ti in outs]
        rnames = [(sanitize_name(tensors[ti].name) or f"t{ti}") if ti >= 0 else "no_value" for ti in outs]
        opname = "tfl.custom" if bname == "CUSTOM" else f"tfl.{bname.lower()}"
        op = sub.g.add_op(opname, operands, rtypes, attrs, rnames, location=loc)
        for ti, r in zip(outs, op.results):
            if ti >= 0:
                sub.values[ti] = self._sym(sub, r, tensors[ti])

    def _attrs(self, o: Table, bname: str, custom_code: str, op_version: int, loc: str) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        found = False
        for union, typ_field, tab_field in ((1, _OPERATOR["builtin_options_type"], _OPERATOR["builtin_options"]),
                                            (2, _OPERATOR["builtin_options2_type"], _OPERATOR["builtin_options2"])):
            typ = int(self.get(o, typ_field))
            if typ == 0:
                continue
            cls_name = topt.options_table_names(union).get(typ)
            if cls_name is None:
                attrs["unknown_options_type"] = typ
                continue
            if (union, typ, bname) not in self.options_ok:
                expected = topt.options_class_for_op(bname)
                if expected is not None and cls_name != expected and union == 1 and bname != "CUSTOM" \
                        and expected in topt.options_table_names(1).values():
                    # rules would read the fields of another table (e.g. a Pool2D without filter sizes)
                    self.fail(f"operator {loc} carries {cls_name}, but {bname} takes {expected}", op=loc)
                self.options_ok.add((union, typ, bname))
            tab = self.sub(o, tab_field)
            if tab is None:
                continue
            self.table(tab, f"{cls_name} of {loc}")
            attrs.update(self._options(cls_name, tab))
            found = True
        if not found:
            cls = topt.options_class_for_op(bname)
            if cls is not None:
                attrs.update(topt.default_options(cls))
        attrs["op_version"] = op_version
        custom = self._custom_options(o, loc)
        if bname == "CUSTOM":
            attrs["custom_code"] = custom_code
            attrs["custom_options"] = custom
            attrs["custom_options_format"] = topt.enum_name("CustomOptionsFormat",
                                                            int(self.get(o, _OPERATOR["custom_options_format"])))
            if custom and attrs["custom_options_format"] == "FLEXBUFFERS":
                try:
                    attrs["custom_options_decoded"] = topt.decode_flexbuffer(custom)
                except Exception:  # not a flexbuffer after all: keep the bytes only
                    pass
        elif custom:
            attrs["custom_options"] = custom
        return attrs

    def _options(self, cls_name: str, tab: Table) -> dict[str, Any]:
        """The options table ``tab`` (checked) decoded: a table of scalars like one decoded before (the same vtable,
        the same bytes where its fields lie) gives that one's dict (not to be changed: attrs copy it)."""
        fields = topt.scalar_fields(cls_name) if self.bulk else None
        if fields is None:
            return topt.decode_options(cls_name, self.buf, tab.pos)
        vt = tab.vtable()[0]
        extent = self.option_extents.get((cls_name, vt))
        if extent is None:  # (the bytes the fields span, after the table's soffset; -1: a field overlaps that)
            spans = [(o, o + size) for o, size in ((tab.offset(voff), size) for voff, size in fields) if o]
            extent = max([e for _, e in spans], default=4) if all(o >= 4 for o, _ in spans) else -1
            self.option_extents[(cls_name, vt)] = extent
        if extent < 0:
            return topt.decode_options(cls_name, self.buf, tab.pos)
        key = (cls_name, vt, self.buf[tab.pos + 4:tab.pos + extent])  # (cut short past the file's end: never found)
        got = self.options_seen.get(key)
        if got is None:
            got = self.options_seen[key] = topt.decode_options(cls_name, self.buf, tab.pos)
        return got

    def _custom_options(self, o: Table, loc: str) -> bytes:
        off = int(self.get(o, _OPERATOR["large_custom_options_offset"]))
        size = int(self.get(o, _OPERATOR["large_custom_options_size"]))
        if off > 1:
            if off + size > self.n:
                self.fail(f"{loc}: large custom options [{off}, {off + size}) lie outside the file", op=loc)
            return bytes(self.buf[off:off + size])
        vec = self.vec(o, _OPERATOR["custom_options"])
        if vec is None:
            return b""
        n = self.vlen(vec[1], f"custom options of {loc}", 1)
        return np.frombuffer(self.buf, np.uint8, n, vec[0]).tobytes()

    # --------------------------------------------------------- regions etc.
    @staticmethod
    def _link_regions(targets: list[Graph], graphs: list[Graph] | None = None) -> None:
        pool = graphs if graphs is not None else targets
        for g in targets:
            for op in g.ops.values():
                if _SUBGRAPH_KEYS.isdisjoint(op.attrs):
                    continue
                fields = topt.subgraph_fields(op.attrs)
                if not fields:
                    continue
                regions: list[Graph] = []
                for f in fields:
                    v = op.attrs[f]
                    for s in v if isinstance(v, list) else [v]:
                        regions.append(pool[s])
                op.regions = regions

    def _check_cycles(self, refs: list[list[int]]) -> None:
        state = [0] * len(refs)  # 0 new, 1 on stack, 2 done
        for start in range(len(refs)):
            if state[start]:
                continue
            stack: list[tuple[int, int]] = [(start, 0)]
            state[start] = 1
            while stack:
                node, j = stack[-1]
                if j < len(refs[node]):
                    stack[-1] = (node, j + 1)
                    nxt = refs[node][j]
                    if state[nxt] == 1:
                        self.fail(f"subgraph {nxt} references itself through control-flow ops (recursion)")
                    if state[nxt] == 0:
                        state[nxt] = 1
                        stack.append((nxt, 0))
                else:
                    state[node] = 2
                    stack.pop()

    def _apply_signature(self, g: Graph, sig: dict[str, Any]) -> None:
        """Record the SignatureDef keys of the main graph's inputs/outputs (``source.signature_names``).

        The order stays the subgraph's: it is what LiteRT's ``get_input_details()`` / ``get_output_details()``
        return, while a SignatureDef lists its keys sorted by name (``output_0, output_1 …``), which need not be the
        subgraph order (a Keras model's outputs can come out as ``:1, :0, :2``)."""
        names: dict[str, str] = {}
        for kind in ("inputs", "outputs"):
            by_source: dict[str, Value] = {}
            for v in getattr(g, kind):
                if v.source is not None:
                    by_source.setdefault(v.source, v)
            for key, tname in sig[kind]:
                found = by_source.get(tname)
                if found is not None:
                    names[found.name] = key
        g.source.signature_names = names
