"""TOSA serialization: the ``.tosa`` flatbuffer writer and reader, and the MLIR text printer."""

from __future__ import annotations

from .mlir import to_mlir
from .tosa_reader import from_bytes, load
from .tosa_writer import save, to_bytes

__all__ = ["from_bytes", "load", "save", "to_bytes", "to_mlir"]
