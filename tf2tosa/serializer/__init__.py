"""TOSA serialization: the ``.tosa`` flatbuffer writer and reader, and the MLIR text printer.

The names below are loaded from their module on first use (PEP 562), so writing a ``.tosa`` does not import the
MLIR printer or the reader (nor reading a TFLite custom op's flexbuffer any of the three).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .mlir import to_mlir
    from .tosa_reader import from_bytes, load
    from .tosa_writer import save, to_bytes

_HOME = {"to_mlir": "mlir", "from_bytes": "tosa_reader", "load": "tosa_reader", "save": "tosa_writer",
         "to_bytes": "tosa_writer"}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["from_bytes", "load", "save", "to_bytes", "to_mlir"]
