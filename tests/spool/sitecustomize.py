"""Loaded by the test session's subprocesses (``tests/conftest.py`` puts this directory first on ``PYTHONPATH`` and
sets ``TF2TOSA_TOSA_SPOOL``): when tf2tosa's ``.tosa`` writer is imported, every flatbuffer it serializes is also
copied into the spool directory, where the session's ``.tosa`` hook (``tests/tosa_hook.py``) checks it after the
test.  This is how files written by a CLI subprocess reach the hook.  Without the variable, or in an interpreter
without tf2tosa (the tosa-tools environment), nothing happens."""

from __future__ import annotations

import os
import sys
from typing import Any

_SPOOL = os.environ.get("TF2TOSA_TOSA_SPOOL")
_TARGET = "tf2tosa.serializer.tosa_writer"


def _wrap(module: Any, spool: str) -> None:
    import hashlib
    import json

    orig = module.to_bytes
    orig_write_file = module.write_file

    def to_bytes(graph: Any, *args: Any, **kwargs: Any) -> bytes:
        data: bytes = orig(graph, *args, **kwargs)
        _spool(graph, data)
        return data

    def write_file(graph: Any, path: Any, *args: Any, **kwargs: Any) -> None:
        """Saving writes the file through a map (``tosa_writer.write_file``), not through ``to_bytes``."""
        orig_write_file(graph, path, *args, **kwargs)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return
        _spool(graph, data)

    def _spool(graph: Any, data: bytes) -> None:
        try:
            sha = hashlib.sha256(data).hexdigest()
            path = os.path.join(spool, sha + ".tosa")
            if not os.path.exists(path):
                meta = {"profiles": graph.record.profiles, "extensions": graph.record.extensions,
                        "specification_version": (graph.record.specification_version or "1.0")}
                tmp = f"{path}.{os.getpid()}.tmp"
                with open(path[:-5] + ".json", "w") as f:
                    json.dump(meta, f)
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
        except (OSError, TypeError, ValueError):  # the spool is best effort; the product's write is unaffected
            pass

    module.to_bytes = to_bytes
    module.write_file = write_file


if _SPOOL:
    import importlib.abc
    import importlib.machinery

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            if name != _TARGET:
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            loader: Any = spec.loader
            exec_module = loader.exec_module

            def exec_and_wrap(module: Any) -> None:
                exec_module(module)
                _wrap(module, str(_SPOOL))

            loader.exec_module = exec_and_wrap
            return spec

    sys.meta_path.insert(0, _Finder())
