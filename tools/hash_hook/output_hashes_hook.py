"""Record the sha256 of every ``.tosa`` flatbuffer and ``.mlir`` text tf2tosa produces.

:func:`install` wraps the serializer's two entry points (``tosa_writer._Writer.write`` and
``mlir.to_mlir``, also where other modules imported it by name) so that each result is appended to
``$TF2TOSA_HASH_DIR/<pid>.tsv`` as ``kind<TAB>sha256<TAB>label``.  The label is the running pytest
test (``PYTEST_CURRENT_TEST``, inherited by subprocesses), else ``$TF2TOSA_HASH_LABEL``, else "?".
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from typing import Any

_installed = False


def _label() -> str:
    test = os.environ.get("PYTEST_CURRENT_TEST")
    if test:
        return test.rsplit(" (", 1)[0]
    return os.environ.get("TF2TOSA_HASH_LABEL", "?")


def record(kind: str, data: bytes) -> None:
    out = os.environ.get("TF2TOSA_HASH_DIR")
    if not out:
        return
    line = f"{kind}\t{hashlib.sha256(data).hexdigest()}\t{_label()}\n"
    with open(os.path.join(out, f"{os.getpid()}.tsv"), "a", encoding="utf-8") as f:
        f.write(line)


def install() -> None:
    """Patch the serializer (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    from tf2tosa.serializer import mlir, tosa_writer

    orig_write = tosa_writer._Writer.write

    @functools.wraps(orig_write)
    def write(self: Any) -> bytes:
        data = orig_write(self)
        record("tosa", data)
        return data

    tosa_writer._Writer.write = write  # type: ignore[method-assign]

    orig_mlir = mlir.to_mlir

    @functools.wraps(orig_mlir)
    def to_mlir(*args: Any, **kwargs: Any) -> str:
        text = orig_mlir(*args, **kwargs)
        record("mlir", text.encode("utf-8"))
        return text

    # Rebind every module-level name that already holds the original (``from .mlir import to_mlir``).
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not d:
            continue
        for k, v in list(d.items()):
            if v is orig_mlir:
                d[k] = to_mlir
