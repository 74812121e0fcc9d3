"""Read a TOSA flatbuffer (``.tosa``) back into the IR.

A small bounds-checked flatbuffer walker (no generated code): every offset and
vector length is checked against the buffer, so truncated or corrupt files end
in :class:`~tf2tosa.errors.ModelLoadError` naming the file instead of a raw
``struct.error`` or a garbage graph.

The result is a :class:`Graph` of ``tosa.*`` operations: CONST values become
``attrs["values"]`` arrays, CONST_SHAPE values int64 arrays, COND_IF /
WHILE_LOOP regions nested graphs (``op.regions``).  Reading a file written by
:mod:`.tosa_writer` and writing it again gives the same bytes.

TOSA 1.1-draft programs (Arm's draft schema, ``fbs_version 1.1.0d``, as ``convert --dynamic`` and
``tosa-opt --tosa-serialize`` write them) are read too: the draft's EXT-SHAPE operator codes (appended after
1.0's), ``-1`` for an unknown dimension, and shape values computed at run time (a ``TosaShape`` with a length and
no data).  Such a program gets ``graph.record.specification_version = "1.1.draft"`` and its unknown dimensions are
named by :func:`tf2tosa.tosa.symbolic.name_dimensions` (``batch``, ``d1``, ``2*batch``, ``?`` where unnamed).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ModelLoadError
from ..ir.graph import Graph, Value
from ..ir.types import DType, TensorType
from ..tosa.optable import DRAFT_VERSION, is_draft
from ..tosa.profiles import LEVEL_8K, LEVEL_NONE, NO_BUDGET, tensor_size_problem
from ..tosa.symbolic import UNKNOWN, name_dimensions
from .tosa_writer import (
    ACC,
    ATTR_FIELDS,
    B_INPUTS,
    B_NAME,
    B_OPERATORS,
    B_OUTPUTS,
    B_SHAPES,
    B_TENSORS,
    BOOL,
    BOUND,
    BYTES,
    DRAFT_OP_VALUE,
    FILE_IDENTIFIER,
    G_REGIONS,
    G_VERSION,
    I32,
    I32S,
    NAN,
    OP_ATTR,
    OP_ATTR_TYPE,
    OP_INPUTS,
    OP_LOCATION,
    OP_OP,
    OP_OUTPUTS,
    R_BLOCKS,
    R_NAME,
    RESIZE,
    ROUND,
    S_DATA,
    S_NAME,
    S_RANK,
    STR,
    T_DATA,
    T_NAME,
    T_SHAPE,
    T_TYPE,
    T_UNRANKED,
    T_VARIABLE,
    T_VARNAME,
    V_DRAFT,
    V_MAJOR,
    V_MINOR,
    V_PATCH,
    VALUE_ACC,
    VALUE_DTYPE,
    VALUE_NAN,
    VALUE_RESIZE,
    VALUE_ROUNDING,
    slot_offset,
)

MAX_NESTING = 64
#: operator code -> name: TOSA 1.0's ``enum Op`` and the 1.1 draft's EXT-SHAPE operators appended to it
OP_NAMES: dict[int, str] = {code: name for name, code in DRAFT_OP_VALUE.items() if code > 0}


class _Corrupt(Exception):
    """Internal: the buffer is not a well-formed TOSA flatbuffer."""


class _Buf:
    """Bounds-checked access to a flatbuffer."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.n = len(data)

    def _check(self, pos: int, size: int) -> None:
        if pos < 0 or size < 0 or pos + size > self.n:
            raise _Corrupt(f"offset {pos}+{size} outside the {self.n}-byte buffer")

    def u8(self, pos: int) -> int:
        self._check(pos, 1)
        return self.data[pos]

    def u16(self, pos: int) -> int:
        self._check(pos, 2)
        return int(struct.unpack_from("<H", self.data, pos)[0])

    def u32(self, pos: int) -> int:
        self._check(pos, 4)
        return int(struct.unpack_from("<I", self.data, pos)[0])

    def i32(self, pos: int) -> int:
        self._check(pos, 4)
        return int(struct.unpack_from("<i", self.data, pos)[0])

    # ---------------------------------------------------------------- tables
    def touch(self, table: int) -> int:
        """Check that the table at ``table`` and its vtable lie in the buffer; return the vtable length."""
        vtable = table - self.i32(table)
        vlen = self.u16(vtable)
        if vlen < 4 or vlen % 2:
            raise _Corrupt(f"bad vtable length {vlen} at {vtable}")
        self._check(vtable, vlen)
        self._check(table, max(4, self.u16(vtable + 2)))
        return vlen

    def field(self, table: int, slot: int) -> int | None:
        """Absolute position of field ``slot`` of the table at ``table``, or None if absent."""
        vlen = self.touch(table)
        vtable = table - self.i32(table)
        vo = slot_offset(slot)
        if vo + 2 > vlen:
            return None
        off = self.u16(vtable + vo)
        return table + off if off else None

    def deref(self, pos: int) -> int:
        return pos + self.u32(pos)

    def scalar(self, table: int, slot: int, kind: str, default: int = 0) -> int:
        p = self.field(table, slot)
        if p is None:
            return default
        return {"u8": self.u8, "u32": self.u32, "i32": self.i32}[kind](p)

    def table(self, table: int, slot: int) -> int | None:
        p = self.field(table, slot)
        return None if p is None else self.deref(p)

    def vector(self, table: int, slot: int, elem_size: int) -> tuple[int, int]:
        """(start, length) of a vector field; (0, 0) when absent."""
        p = self.field(table, slot)
        if p is None:
            return 0, 0
        v = self.deref(p)
        n = self.u32(v)
        self._check(v + 4, n * elem_size)
        return v + 4, n

    def bytes_(self, table: int, slot: int) -> bytes:
        start, n = self.vector(table, slot, 1)
        return bytes(self.data[start:start + n])

    def string(self, table: int, slot: int) -> str:
        p = self.field(table, slot)
        if p is None:
            return ""
        return self._string_at(self.deref(p))

    def _string_at(self, pos: int) -> str:
        n = self.u32(pos)
        self._check(pos + 4, n)
        try:
            return self.data[pos + 4:pos + 4 + n].decode("utf-8")
        except UnicodeDecodeError as e:
            raise _Corrupt(f"bad string: {e}") from e

    def tables(self, table: int, slot: int) -> list[int]:
        start, n = self.vector(table, slot, 4)
        return [self.deref(start + 4 * i) for i in range(n)]

    def strings(self, table: int, slot: int) -> list[str]:
        start, n = self.vector(table, slot, 4)
        return [self._string_at(self.deref(start + 4 * i)) for i in range(n)]

    def i32s(self, table: int, slot: int) -> list[int]:
        start, n = self.vector(table, slot, 4)
        return [int(x) for x in struct.unpack_from(f"<{n}i", self.data, start)] if n else []


# ----------------------------------------------------------------------------- raw structures
@dataclass
class _Tensor:
    name: str
    shape: tuple[int | str, ...]  # an unknown dimension (-1 in the file) is UNKNOWN
    dtype: DType
    data: bytes
    variable: str | None = None  # EXT-VARIABLE: the variable's name

    @property
    def static(self) -> tuple[int, ...]:
        """The shape of a constant or variable, which cannot have unknown dimensions."""
        if any(not isinstance(d, int) for d in self.shape):
            raise _Corrupt(f"constant tensor '{self.name}' has an unknown dimension")
        return tuple(int(d) for d in self.shape)


#: what a file may declare: rank up to level 8K's MAX_RANK (as the executor's ERROR_IF), sizes up to level none's
_READ_LIMITS = {**LEVEL_NONE, "MAX_RANK": LEVEL_8K["MAX_RANK"]}


@dataclass
class _Operator:
    op: str
    code: int
    attr_type: int
    attr: int | None
    inputs: list[str]
    outputs: list[str]
    location: str | None


@dataclass
class _Block:
    name: str
    operators: list[_Operator] = field(default_factory=list)
    tensors: dict[str, _Tensor] = field(default_factory=dict)
    shapes: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


def _parse_block(buf: _Buf, pos: int) -> _Block:
    blk = _Block(buf.string(pos, B_NAME))
    for t in buf.tables(pos, B_TENSORS):
        name = buf.string(t, T_NAME)
        code = buf.scalar(t, T_TYPE, "u32")
        if code not in VALUE_DTYPE:
            raise _Corrupt(f"tensor '{name}' has unsupported type code {code}")
        if buf.scalar(t, T_UNRANKED, "u8"):
            raise _Corrupt(f"tensor '{name}' is unranked")
        dims = tuple(buf.i32s(t, T_SHAPE))
        if any(d < -1 for d in dims):
            raise _Corrupt(f"tensor '{name}' has negative dimension in {dims}")
        data = buf.bytes_(t, T_DATA)
        if -1 in dims and data:
            raise _Corrupt(f"constant tensor '{name}' has an unknown dimension in {dims}")
        # -1: an unknown dimension (TOSA 1.1 draft, EXT-DYNAMIC), as Arm's draft serializer writes it
        shape: tuple[int | str, ...] = tuple(UNKNOWN if d == -1 else d for d in dims)
        # level 8K's rank, level none's size and no budget: reading allocates no tensor but a constant's bytes, which
        # are in the file (the execution budget is run's and verify's: inspect and load read what the format holds)
        too_big = tensor_size_problem(tuple(max(d, 1) for d in dims), VALUE_DTYPE[code].bits, _READ_LIMITS, NO_BUDGET)
        if too_big is not None:
            raise _Corrupt(f"tensor '{name}': {too_big}")
        var = buf.string(t, T_VARNAME) or name if buf.scalar(t, T_VARIABLE, "u8") else None
        if var is not None and -1 in dims:
            raise _Corrupt(f"variable tensor '{name}' has an unknown dimension in {dims}")
        blk.tensors[name] = _Tensor(name, shape, VALUE_DTYPE[code], data, var)
    for s in buf.tables(pos, B_SHAPES):
        blk.shapes[buf.string(s, S_NAME)] = (buf.scalar(s, S_RANK, "u32"), buf.bytes_(s, S_DATA))
    for o in buf.tables(pos, B_OPERATORS):
        code = buf.scalar(o, OP_OP, "u32")
        if code not in OP_NAMES:
            raise _Corrupt(f"unknown operator code {code} (neither TOSA 1.0 nor a 1.1-draft EXT-SHAPE operator)")
        attr_tab = buf.table(o, OP_ATTR)
        if attr_tab is not None:
            buf.touch(attr_tab)
        loc_tab = buf.table(o, OP_LOCATION)
        loc = buf.string(loc_tab, 0) if loc_tab is not None else None
        blk.operators.append(_Operator(OP_NAMES[code], code, buf.scalar(o, OP_ATTR_TYPE, "u8"), attr_tab,
                                       buf.strings(o, OP_INPUTS), buf.strings(o, OP_OUTPUTS), loc or None))
    blk.inputs = buf.strings(pos, B_INPUTS)
    blk.outputs = buf.strings(pos, B_OUTPUTS)
    return blk


@dataclass
class _File:
    version: tuple[int, int, int, bool]
    regions: dict[str, _Block]
    order: list[str]


def _parse(data: bytes) -> _File:
    if len(data) < 8:
        raise _Corrupt(f"only {len(data)} bytes")
    if data[4:8] != FILE_IDENTIFIER:
        raise _Corrupt(f"file identifier is {bytes(data[4:8])!r}, not {FILE_IDENTIFIER!r}")
    buf = _Buf(data)
    root = buf.deref(0)
    ver = buf.table(root, G_VERSION)
    if ver is None:
        raise _Corrupt("no version table")
    version = (buf.scalar(ver, V_MAJOR, "i32", -1), buf.scalar(ver, V_MINOR, "i32", -1),
               buf.scalar(ver, V_PATCH, "i32", -1), bool(buf.scalar(ver, V_DRAFT, "u8", 1)))
    if version[0] != 1:
        raise _Corrupt(f"unsupported TOSA version {version[0]}.{version[1]}.{version[2]}")
    regions: dict[str, _Block] = {}
    order: list[str] = []
    for r in buf.tables(root, G_REGIONS):
        rname = buf.string(r, R_NAME)
        blocks = buf.tables(r, R_BLOCKS)
        if len(blocks) != 1:
            raise _Corrupt(f"region '{rname}' has {len(blocks)} basic blocks (expected 1)")
        if rname in regions:
            raise _Corrupt(f"duplicate region name '{rname}'")
        regions[rname] = _parse_block(buf, blocks[0])
        order.append(rname)
    if not regions:
        raise _Corrupt("no regions")
    return _File(version, regions, order)


# ----------------------------------------------------------------------------- decoding
def decode_array(data: bytes, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Inverse of :func:`tosa_writer.encode_array` (extra trailing padding bytes are ignored)."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    need = {DType.BOOL: n, DType.INT4: (n + 1) // 2, DType.INT48: 6 * n, DType.SHAPE: 8 * n}.get(dtype)
    if need is None:
        need = n * (dtype.bits // 8)
    if len(data) < need:
        raise _Corrupt(f"constant data has {len(data)} bytes, {dtype} {list(shape)} needs {need}")
    raw = np.frombuffer(data, dtype=np.uint8, count=need)
    if dtype is DType.BOOL:
        arr: np.ndarray = raw != 0
    elif dtype is DType.INT4:
        nib = np.stack([raw & 0xF, raw >> 4], axis=1).reshape(-1)[:n].astype(np.int8)
        arr = np.where(nib >= 8, nib - 16, nib).astype(np.int8)
    elif dtype is DType.INT48:
        b = raw.reshape(n, 6)
        sign = np.where(b[:, 5:6] >= 0x80, np.uint8(0xFF), np.uint8(0))
        arr = np.concatenate([b, sign, sign], axis=1).copy().view("<i8").reshape(-1).astype(np.int64)
    elif dtype in (DType.BF16, DType.FP8E4M3, DType.FP8E5M2):
        arr = raw.copy().view("<u2" if dtype is DType.BF16 else np.uint8).view(dtype.np_dtype())
    else:
        le = {DType.INT8: "<i1", DType.INT16: "<i2", DType.INT32: "<i4", DType.FP16: "<f2", DType.FP32: "<f4",
              DType.SHAPE: "<i8"}[dtype]
        arr = raw.view(le).astype(dtype.np_dtype())
    return arr.reshape(shape)


def _decode_attrs(buf: _Buf, op: _Operator, in_dtype: DType | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    fields = ATTR_FIELDS.get(op.op, ())
    if op.attr is None or not fields or op.op in ("COND_IF", "WHILE_LOOP"):
        return attrs
    if op.attr_type != op.code:
        raise _Corrupt(f"{op.op} carries attribute type {op.attr_type}")
    t = op.attr
    for slot, (name, kind) in enumerate(fields):
        if kind == I32S:
            attrs[name] = buf.i32s(t, slot)
        elif kind == I32:
            attrs[name] = buf.scalar(t, slot, "i32")
        elif kind == BOOL:
            attrs[name] = bool(buf.scalar(t, slot, "u8"))
        elif kind == STR:
            attrs[name] = buf.string(t, slot)
        elif kind == BYTES:
            attrs[name] = buf.bytes_(t, slot)
        elif kind == BOUND:
            dt = in_dtype or DType.FP32
            val = decode_array(buf.bytes_(t, slot), dt, (1,))[0]
            attrs[name] = bool(val) if dt is DType.BOOL else (float(val) if dt.is_float else int(val))
        else:
            code = buf.scalar(t, slot, "u32")
            table = {ACC: VALUE_ACC, NAN: VALUE_NAN, ROUND: VALUE_ROUNDING, RESIZE: VALUE_RESIZE}[kind]
            if code in table:
                attrs[name] = table[code]
            elif code != 0:
                raise _Corrupt(f"{op.op} attribute {name} has unknown value {code}")
    return attrs


class _Builder:
    def __init__(self, buf: _Buf, file: _File) -> None:
        self.buf = buf
        self.file = file
        self.active: list[str] = []

    def build(self, region: str) -> Graph:
        if region not in self.file.regions:
            raise _Corrupt(f"reference to missing region '{region}'")
        if region in self.active or len(self.active) >= MAX_NESTING:
            raise _Corrupt(f"region '{region}' is nested recursively or too deeply")
        self.active.append(region)
        try:
            return self._build(region, self.file.regions[region])
        finally:
            self.active.pop()

    def _build(self, region: str, blk: _Block) -> Graph:
        g = Graph(region)
        values: dict[str, Value] = {}

        def operand(name: str) -> Value:
            if name in values:
                return values[name]
            # Constants stored as bare tensors (older writers) become explicit CONST ops.
            if name in blk.tensors and blk.tensors[name].data:
                t = blk.tensors[name]
                v = g.add_const(decode_array(t.data, t.dtype, t.static), t.dtype, name=name)
            elif name in blk.shapes and (blk.shapes[name][1] or not blk.shapes[name][0]):
                rank, data = blk.shapes[name]
                v = g.add_const(decode_array(data, DType.SHAPE, (rank,)), DType.SHAPE, name=name,
                                op_name="tosa.CONST_SHAPE")
            else:
                raise _Corrupt(f"tensor '{name}' is used before it is defined in block '{blk.name}'")
            values[name] = v
            return v

        variables = _declare_variables(g, blk)
        for name in blk.inputs:
            t = _declared(blk, name)
            values[name] = g.add_input(name, TensorType(t.shape, t.dtype))
        for op in blk.operators:
            if op.op == "IDENTITY" and len(op.inputs) == 1 and len(op.outputs) == 1:
                if op.inputs[0] in variables:
                    t = _declared(blk, op.outputs[0])
                    values[op.outputs[0]] = g.add_op("tosa.VARIABLE_READ", [], [TensorType(t.shape, t.dtype)],
                                                     {"name": variables[op.inputs[0]]}, result_names=op.outputs,
                                                     location=op.location).result
                    continue
                if op.outputs[0] in variables:
                    g.add_op("tosa.VARIABLE_WRITE", [operand(op.inputs[0])], [],
                             {"name": variables[op.outputs[0]]}, location=op.location)
                    continue
            if any(n in variables for n in op.inputs + op.outputs):
                raise _Corrupt(f"{op.op} uses a variable tensor directly (only IDENTITY reads/writes are supported)")
            operands = [operand(n) for n in op.inputs]
            attrs = _decode_attrs(self.buf, op, operands[0].type.dtype if operands else None)
            regions: list[Graph] = []
            if op.op in ("COND_IF", "WHILE_LOOP") and op.attr is not None:
                names = [self.buf.string(op.attr, 0), self.buf.string(op.attr, 1)]
                regions = [self.build(n) for n in names]
            types = _result_types(blk, op, attrs)
            if op.op in ("CONST", "CONST_SHAPE") and len(op.outputs) != 1:
                raise _Corrupt(f"{op.op} has {len(op.outputs)} outputs")
            new = g.add_op(f"tosa.{op.op}", operands, types, attrs, result_names=op.outputs, regions=regions,
                           location=op.location)
            for out, r in zip(op.outputs, new.results):
                if out in values:
                    raise _Corrupt(f"tensor '{out}' is defined twice in block '{blk.name}'")
                values[out] = r
        g.outputs = [operand(n) for n in blk.outputs]
        return g


def _declared(blk: _Block, name: str) -> _Tensor:
    """The tensor ``name`` declared in ``blk``."""
    if name not in blk.tensors:
        raise _Corrupt(f"tensor '{name}' is not declared in block '{blk.name}'")
    return blk.tensors[name]


def _declare_variables(g: Graph, blk: _Block) -> dict[str, str]:
    """A ``tosa.VARIABLE`` op in ``g`` (and an entry in ``g.variables``) for each variable tensor of ``blk``; returns
    tensor name -> variable name."""
    variables: dict[str, str] = {}  # tensor name -> variable name
    for t in blk.tensors.values():
        if t.variable is None:
            continue
        vtype = TensorType(t.shape, t.dtype)
        init = decode_array(t.data, t.dtype, t.static) if t.data else None
        attrs: dict[str, Any] = {"name": t.variable, "var_shape": list(t.shape), "type": t.dtype}
        if init is not None:
            attrs["initial_value"] = init
        g.add_op("tosa.VARIABLE", [], [], attrs)
        g.variables[t.variable] = {"type": vtype, "initial": init}
        variables[t.name] = t.variable
    return variables


def _result_types(blk: _Block, op: _Operator, attrs: dict[str, Any]) -> list[TensorType]:
    """The types of ``op``'s results as ``blk`` declares them; a CONST's or CONST_SHAPE's data goes into ``attrs``
    (``values``)."""
    types: list[TensorType] = []
    for out in op.outputs:
        if op.op == "CONST_SHAPE":
            if out not in blk.shapes:
                raise _Corrupt(f"shape '{out}' is not declared in block '{blk.name}'")
            rank, data = blk.shapes[out]
            attrs["values"] = decode_array(data, DType.SHAPE, (rank,))
            types.append(TensorType((rank,), DType.SHAPE))
        elif out in blk.shapes and out not in blk.tensors:
            # a shape value computed at run time (1.1 draft: DIM, CONCAT_SHAPE ...): its length only
            types.append(TensorType((blk.shapes[out][0],), DType.SHAPE))
        else:
            t = _declared(blk, out)
            types.append(TensorType(t.shape, t.dtype))
            if op.op == "CONST":
                attrs["values"] = decode_array(t.data, t.dtype, t.static)
    return types


def from_bytes(data: bytes, name: str = "<bytes>") -> Graph:
    """Parse TOSA flatbuffer ``data``; ``name`` (the file) is used in error messages."""
    try:
        data = bytes(data)
        f = _parse(data)
        main = "main" if "main" in f.regions else f.order[0]
        g = _Builder(_Buf(data), f).build(main)
        major, minor, patch, draft = f.version
        g.record.tosa_version = f"{major}.{minor}.{patch}{'d' if draft else ''}"
        if is_symbolic(g):
            # unknown dimensions or EXT-SHAPE operators: a TOSA 1.1-draft program (Arm writes fbs_version 1.1.0d
            # for 1.0 programs too, so the file's version does not tell)
            g.record.specification_version = DRAFT_VERSION
            name_dimensions(g)
        return g
    except ModelLoadError:
        raise
    except (_Corrupt, struct.error, IndexError, ValueError, KeyError, OverflowError, TypeError,
            RecursionError, MemoryError) as e:
        raise ModelLoadError(f"not a valid TOSA flatbuffer: {e}", file=name) from e


def is_symbolic(g: Graph) -> bool:
    """Whether ``g`` (regions included) has an unknown dimension or a 1.1-draft operator."""
    for op in g.ops.values():
        if op.dialect == "tosa" and is_draft(op.opcode):
            return True
        if any(not r.type.is_static for r in op.results if r.type.dtype is not DType.SHAPE):
            return True
        if any(is_symbolic(sub) for sub in op.regions):
            return True
    return any(not v.type.is_static for v in g.inputs)


def io_names(data: bytes, name: str = "<bytes>") -> tuple[list[str], list[str]]:
    """Names of the main block's inputs and outputs, in order (cheap: no graph is built)."""
    try:
        f = _parse(bytes(data))
        blk = f.regions["main"] if "main" in f.regions else f.regions[f.order[0]]
        return list(blk.inputs), list(blk.outputs)
    except (_Corrupt, struct.error, IndexError, ValueError, KeyError, OverflowError) as e:
        raise ModelLoadError(f"not a valid TOSA flatbuffer: {e}", file=name) from e


def load(path: str | os.PathLike[str]) -> Graph:
    """Read a ``.tosa`` file."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelLoadError(f"cannot read: {e.strerror or e}", file=p) from e
    return from_bytes(data, name=p)
