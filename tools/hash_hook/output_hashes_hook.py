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
import re
import sys
import tempfile
from typing import Any

_TMPDIR = tempfile.gettempdir()
#: a temporary directory: pytest's (``/tmp/pytest-of-USER/pytest-N/[popen-gwK/]test_name0/``) or one made by
#: ``tempfile.mkdtemp`` (``/tmp/tf2tosa-ser-XXXX/``).  It differs from run to run, and the op locations of a
#: graph read back from a file name it.
_TMP = re.compile(re.escape(_TMPDIR) + r"/(?:pytest-of-[^/]+/pytest-\d+/(?:popen-gw\d+/)?[^/]*?\d+/|[^/\"']+/)")

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


def _ops(graph: Any) -> list[Any]:
    ops = []
    ops_ = graph.ops.values() if isinstance(graph.ops, dict) else graph.ops
    for op in ops_:
        ops.append(op)
        for r in getattr(op, "regions", None) or ():
            ops.extend(_ops(r))
    return ops


def _normalized(graph: Any, data: bytes, write: Any) -> bytes:
    """``data``, or when its op locations name a temporary directory, the bytes written with that
    directory replaced by ``<tmp>/`` (hashed instead, so that the hash does not depend on the run)."""
    if _TMPDIR.encode() + b"/" not in data:
        return data
    saved = []
    for op in _ops(graph):
        loc = getattr(op, "location", None)
        if loc and _TMP.search(loc):
            saved.append((op, loc))
            op.location = _TMP.sub("<tmp>/", loc)
    try:
        return write(graph)
    finally:
        for op, loc in saved:
            op.location = loc


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
        # bytes(): a file-mapped write returns a memoryview of the map (tosa_writer.write_file)
        record("tosa", bytes(_normalized(self.main, bytes(data), lambda g: orig_write(tosa_writer._Writer(g)))))
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
