"""The repository's scripts (``tools/``, ``benchmarks/``) loaded as modules by their path, for the tests that check
them (they are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script(relpath: str) -> ModuleType:
    """The script ``ROOT/relpath`` as a module named after its file (registered in ``sys.modules``, so that its
    dataclasses find their module)."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod
