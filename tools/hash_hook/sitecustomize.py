"""Output-hash hook for subprocesses (see ``tools/output_hashes.py``).

Put this directory on ``PYTHONPATH`` and set ``TF2TOSA_HASH_DIR``: every Python process then records
the sha256 of each ``.tosa`` flatbuffer and ``.mlir`` text tf2tosa's serializer produces.  The patch
is applied lazily, when ``tf2tosa.serializer`` is first imported, so processes that never import
tf2tosa are not touched.
"""

from __future__ import annotations

import os
import sys

if os.environ.get("TF2TOSA_HASH_DIR"):
    import importlib.abc
    import importlib.machinery

    _TARGET = "tf2tosa.serializer"

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
            if fullname != _TARGET:
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is None or spec.loader is None:
                return spec
            loader = spec.loader
            exec_module = loader.exec_module

            def exec_and_patch(module):  # type: ignore[no-untyped-def]
                exec_module(module)
                try:
                    from output_hashes_hook import install
                except ImportError:
                    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
                    from output_hashes_hook import install
                install()

            loader.exec_module = exec_and_patch  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, _Finder())
