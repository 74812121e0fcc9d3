"""Model Explorer's TOSA adapter for the tests: ``tools/model_explorer_check.py`` run in its own environment,
``$TF2TOSA_ME_VENV`` or ``<repo>/.venv-me`` (``make env`` builds it from ``requirements-me.txt``)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ENV_VAR = "TF2TOSA_ME_VENV"
DRIVER = ROOT / "tools" / "model_explorer_check.py"
#: the skip reason when the environment is absent (tests/conftest.py turns it into a failure under CI=true)
MISSING = "Model Explorer adapter environment not installed ({}): make env"


def venv_dir() -> Path:
    return Path(os.environ.get(ENV_VAR) or ROOT / ".venv-me")


def python_exe() -> Path:
    return venv_dir() / "bin" / "python"


def available() -> bool:
    packages = (venv_dir() / "lib").glob("python*/site-packages/tosa_adapter_model_explorer")
    return python_exe().is_file() and any(packages)


def adapter_view(paths: Sequence[str | os.PathLike[str]], batch: int = 64) -> list[dict[str, Any]]:
    """The adapter's graphs of each file (see tools/model_explorer_check.py), in the order given."""
    out: list[dict[str, Any]] = []
    items = [os.fspath(p) for p in paths]
    for i in range(0, len(items), batch):
        proc = subprocess.run([str(python_exe()), str(DRIVER), *items[i:i + batch]], capture_output=True, text=True,
                              timeout=900, env={**os.environ, "PYTHONPATH": ""})
        if not proc.stdout.strip():
            raise RuntimeError(f"model_explorer_check.py failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        out.extend(json.loads(proc.stdout)["files"])
    return out
