"""Reading TFLite flatbuffer tables in place, with the field layout of :mod:`.tflite_schema`.

:class:`Table` reads a table of the file's buffer the way the ``tflite`` package's generated accessors do (the same
offset arithmetic, on the same ``struct`` primitives, so a corrupt file fails with the same exceptions), without
creating an accessor object per table or importing the package.  Vectors of numbers come back as NumPy views of the
buffer (``np.frombuffer``), not copies.
"""

from __future__ import annotations

import mmap
import struct
from typing import Any, NamedTuple

import numpy as np

from .tflite_schema import CORE_FIELDS

__all__ = ["Buf", "Field", "Table", "Tables", "fields", "gather"]

Buf = bytes | bytearray | mmap.mmap

_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
#: struct of each scalar kind of the schema (little-endian)
SCALARS: dict[str, struct.Struct] = {k: struct.Struct("<" + k) for k in "bBhHiIqQfd?"}
#: NumPy dtype of each vector element kind
VECTOR_DTYPES: dict[str, np.dtype[Any]] = {k: np.dtype("<" + k) for k in "bBhHiIqQfd?"}


class Field(NamedTuple):
    """A field of a table of the model's structure (tflite_schema.CORE_FIELDS)."""

    voff: int  # vtable offset
    kind: str  # a struct format character, "s", "[" + format, "t" or "[t"
    default: Any
    name: str  # the schema accessor's name (``Shape``, ``OpcodeIndex`` …), for messages and tracing


def _camel(snake: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))


_FIELDS = {table: {snake: Field(*f, _camel(snake)) for snake, f in fs.items()} for table, fs in CORE_FIELDS.items()}


def fields(table: str) -> dict[str, Field]:
    """snake name → :class:`Field` of a table of the model's structure."""
    return _FIELDS[table]


class Table:
    """A table at ``pos`` of ``buf``.  ``voff`` arguments are vtable offsets (``4 + 2 * field index``)."""

    __slots__ = ("buf", "pos", "_vt", "_vsize")

    def __init__(self, buf: Buf, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        #: the vtable's position and size, read by the first :meth:`offset` (a table reads several fields) unless
        #: given by :meth:`vtable_read` (-1: not read yet)
        self._vt = 0
        self._vsize = -1

    def vtable_read(self, vt: int, size: int) -> None:
        """The vtable's position and size as a check of the table has read them (so :meth:`offset` does not)."""
        self._vt, self._vsize = vt, size

    def vtable(self) -> tuple[int, int]:
        """The vtable's position and size."""
        if self._vsize < 0:
            self._read_vtable()
        return self._vt, self._vsize

    def offset(self, voff: int) -> int:
        """The field's offset from the table's start, 0 when the field is absent."""
        size = self._vsize
        if size < 0:
            size = self._read_vtable()
        if voff < size:
            return _U16.unpack_from(self.buf, self._vt + voff)[0]  # type: ignore[no-any-return]
        return 0

    def _read_vtable(self) -> int:
        """The vtable's position (kept) and size (kept and returned), read from the table's soffset."""
        vt = self._vt = self.pos - _I32.unpack_from(self.buf, self.pos)[0]
        size = self._vsize = _U16.unpack_from(self.buf, vt)[0]
        return size  # type: ignore[no-any-return]

    # (scalar, table, vector and string read the field's offset as :meth:`offset` does, without its call: a model's
    # loading reads tens of thousands of fields)
    def scalar(self, voff: int, kind: str, default: Any) -> Any:
        size = self._vsize
        if size < 0:
            size = self._read_vtable()
        o = _U16.unpack_from(self.buf, self._vt + voff)[0] if voff < size else 0
        return SCALARS[kind].unpack_from(self.buf, self.pos + o)[0] if o else default

    def table(self, voff: int) -> Table | None:
        """A table or union value field."""
        size = self._vsize
        if size < 0:
            size = self._read_vtable()
        o = _U16.unpack_from(self.buf, self._vt + voff)[0] if voff < size else 0
        if not o:
            return None
        at = self.pos + o
        return Table(self.buf, at + _U32.unpack_from(self.buf, at)[0])

    def vector(self, voff: int) -> tuple[int, int] | None:
        """(position of the first element, length) of a vector field, None when absent."""
        size = self._vsize
        if size < 0:
            size = self._read_vtable()
        o = _U16.unpack_from(self.buf, self._vt + voff)[0] if voff < size else 0
        if not o:
            return None
        at = self.pos + o
        at += _U32.unpack_from(self.buf, at)[0]
        return at + 4, _U32.unpack_from(self.buf, at)[0]  # (struct gives Python ints)

    def table_at(self, start: int, j: int) -> Table:
        """Element ``j`` of a vector of tables starting at ``start``."""
        at = start + 4 * j
        return Table(self.buf, at + _U32.unpack_from(self.buf, at)[0])

    def numbers(self, voff: int, kind: str) -> np.ndarray | None:
        """A vector of numbers as a view of the buffer (None when absent)."""
        v = self.vector(voff)
        if v is None:
            return None
        return np.frombuffer(self.buf, dtype=VECTOR_DTYPES[kind], count=v[1], offset=v[0])

    def string(self, voff: int) -> bytes | None:
        size = self._vsize
        if size < 0:
            size = self._read_vtable()
        o = _U16.unpack_from(self.buf, self._vt + voff)[0] if voff < size else 0
        if not o:
            return None
        at = self.pos + o
        at += _U32.unpack_from(self.buf, at)[0]
        n = _U32.unpack_from(self.buf, at)[0]
        return bytes(self.buf[at + 4:at + 4 + n])


#: byte offsets 0 … 7 of a number's bytes (the columns of :class:`Tables`' gathers)
_BYTE_COLUMNS = np.arange(8, dtype=np.int64)


def gather(u8: np.ndarray, at: np.ndarray, kind: str, ok: np.ndarray) -> np.ndarray:
    """The ``kind`` numbers (a struct format character of :data:`VECTOR_DTYPES` but ``Q``) at the positions ``at``
    (int64) of the bytes ``u8``, as int64 (float64 for ``f`` and ``d``); clears ``ok`` (in place) where a number
    does not lie in the bytes, and reads position 0 there."""
    dt = VECTOR_DTYPES[kind]
    size = dt.itemsize
    ok &= (at >= 0) & (at <= len(u8) - size)
    at = np.where(ok, at, 0)
    wide = np.float64 if kind in "fd" else np.int64
    if size == 1:
        return u8[at].view(dt).astype(wide)
    if not (at & (size - 1)).any():  # all aligned (flatbuffers aligns a vector to its elements): the bytes as numbers
        return u8[:len(u8) - len(u8) % size].view(dt)[at // size].astype(wide)
    raw = u8[at[:, None] + _BYTE_COLUMNS[:size]]  # (a fresh C-ordered array: its rows are the numbers' bytes)
    return raw.view(dt).reshape(-1).astype(wide)


class Tables:
    """The same field of many tables at once: the reads of :class:`Table` (and the checks of the loader's table
    check) as NumPy gathers over an array of table positions.

    Nothing here raises for a read outside the buffer: each read that would (a :class:`Table` read raising
    ``struct.error``) clears the table's entry in :attr:`ok` instead, and reads position 0 in its place.  A table
    whose entry is False is to be read again one field at a time, by the checked accessors.
    """

    __slots__ = ("u8", "n", "pos", "ok", "vt", "vsize")

    def __init__(self, u8: np.ndarray, pos: np.ndarray, ok: np.ndarray) -> None:
        """Tables at ``pos`` (int64) of the buffer ``u8`` (its bytes, uint8; at least 8 of them); ``ok``: which
        positions were read without fault.  The loader's table check is applied here: a table whose position,
        vtable or size does not lie in the buffer is not ``ok``."""
        self.u8 = u8
        n = self.n = len(u8)
        ok = ok & (pos >= 0) & (pos <= n - 4)
        soff = self.read(pos, "i", ok)
        vt = pos - soff
        ok &= (vt >= 0) & (vt <= n - 4)
        vsize = self.read(vt, "H", ok)
        tsize = self.read(vt + 2, "H", ok)
        ok &= (vsize >= 4) & (vsize % 2 == 0) & (vt + vsize <= n) & (pos + tsize <= n)
        self.pos, self.ok, self.vt, self.vsize = pos, ok, vt, vsize

    def read(self, at: np.ndarray, kind: str, ok: np.ndarray) -> np.ndarray:
        """:func:`gather` from this buffer."""
        return gather(self.u8, at, kind, ok)

    def offset(self, voff: int) -> np.ndarray:
        """Each table's offset of the field (0 when it is absent: the vtable is shorter, or says 0)."""
        has = self.ok & (voff < self.vsize)
        return np.where(has, self.read(self.vt + voff, "H", has.copy()), 0)

    def scalar(self, voff: int, kind: str, default: int, ok: np.ndarray | None = None) -> np.ndarray:
        """An integer scalar field of each table (``default`` when absent); a fault clears :attr:`ok`, or ``ok``
        when given (the field is read only where ``ok`` is set: a field the tables read only sometimes)."""
        o = self.offset(voff)
        mask = self.ok if ok is None else ok
        has = mask & (o != 0)
        got = has.copy()
        vals = self.read(self.pos + o, kind, got)
        mask &= got | ~has
        return np.where(has, vals, default)

    def table(self, voff: int) -> tuple[np.ndarray, np.ndarray]:
        """(position, present) of a table field of each table (a fault clears :attr:`ok`)."""
        o = self.offset(voff)
        has = self.ok & (o != 0)
        at = self.pos + o
        got = has.copy()
        rel = self.read(at, "I", got)
        self.ok &= got | ~has
        return at + rel, has

    def vector(self, voff: int, elem: int, ok: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(position of the first element, length; -1 when absent) of a vector field of each table, its length and
        its ``elem``-byte elements checked to lie in the buffer (a fault clears :attr:`ok`, or ``ok`` when given,
        as :meth:`scalar`)."""
        o = self.offset(voff)
        mask = self.ok if ok is None else ok
        has = mask & (o != 0)
        got = has.copy()
        at = self.pos + o
        at = at + self.read(at, "I", got)
        count = self.read(at, "I", got)
        got &= at + 4 + count * elem <= self.n
        mask &= got | ~has
        return at + 4, np.where(has, count, -1)
