"""Under CI=true a missing tool fails the run instead of skipping tests (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parent.parent


def test_noop() -> None:
    """The target of the subprocess run below."""


def test_ci_fails_at_session_start_without_the_tosa_tools(tmp_path: Path) -> None:
    env = {**os.environ, "CI": "true", "TF2TOSA_TOSA_VENV": str(tmp_path / "no-venv"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "tests/test_ci_strict.py::test_noop"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode != 0, proc.stdout
    assert "CI=true and these are missing" in proc.stdout + proc.stderr
    assert "tosa-opt" in proc.stdout + proc.stderr


def _skip(reason: str) -> SimpleNamespace:
    return SimpleNamespace(skipped=True, outcome="skipped", longrepr=("file.py", 1, f"Skipped: {reason}"))


@pytest.mark.parametrize("reason,fails", [
    ("could not import 'tensorflow': No module named 'tensorflow'", True),
    ("ai_edge_litert is not installed", True),
    ("tosa-tools environment not available", True),
    ("tosa.fbs not available: the tosa-tools environment is not installed", True),
    ("the cached model needs TensorFlow to build", True),
    ("Model Explorer adapter environment not installed (/x/.venv-me): make env", True),
    ("chromium is not installed (apt-get install -y chromium)", False),  # .ci/run installs it when it can
    ("LiteRT: 'Registration failed' (op version not registered)", False),  # a LiteRT limit, not a missing tool
    ("no real models: run `python tools/fetch_real_models.py` first", False),  # needs the network
])
def test_missing_tool_skips_fail_under_ci(reason: str, fails: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "CI", True)
    report = _skip(reason)
    conftest._fail_missing_skip(report)
    assert (report.outcome == "failed") == fails
    monkeypatch.setattr(conftest, "CI", False)
    report = _skip(reason)
    conftest._fail_missing_skip(report)
    assert report.outcome == "skipped"
