"""The layering of docs/architecture.md is checked by ``lint-imports`` (contracts in pyproject.toml, run by
``make lint``): here, that the check passes on the package and fails once a lower layer imports a higher one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(root / "pyproject.toml")], cwd=root,
                          env={"PYTHONPATH": str(root), "PATH": ""}, capture_output=True, text=True, timeout=120)


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "tf2tosa", tmp_path / "tf2tosa", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_layers_kept(tmp_path: Path) -> None:
    res = _lint(_copy(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize(("module", "back_import", "edge"), [
    ("ir/types.py", "from ..api import convert", "tf2tosa.ir.types -> tf2tosa.api"),
    ("tosa/builder.py", "from ..executor import evaluate_op", "tf2tosa.tosa.builder -> tf2tosa.executor"),
    ("verify/compare.py", "from ..api import convert", "tf2tosa.verify.compare -> tf2tosa.api"),
])
def test_back_import_fails(tmp_path: Path, module: str, back_import: str, edge: str) -> None:
    root = _copy(tmp_path)
    path = root / "tf2tosa" / module
    # a function-level import counts as much as a module-level one
    path.write_text(path.read_text() + f"\n\ndef _back() -> object:\n    {back_import}\n\n    return None\n")
    res = _lint(root)
    assert res.returncode != 0, res.stdout
    assert "BROKEN" in res.stdout and edge in res.stdout, res.stdout
