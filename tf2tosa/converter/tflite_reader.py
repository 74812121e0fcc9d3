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

__all__ = ["Buf", "Field", "Table", "fields"]

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
