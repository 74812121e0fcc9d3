"""The install paths: ``python -m build`` makes an sdist and a wheel (from the sdist); both install into a clean
venv without extras, where ``convert``/``run``/``inspect`` work with no TensorFlow and ``verify`` names the extra.

Takes about 20 s with a local package index or pip cache (``make install-test`` runs it alone)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "models" / "samples" / "small_cnn_int8.tflite"

pytest.importorskip("build")


def _env() -> dict[str, str]:
    # nothing of this checkout may leak into the clean environment
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def _run(*cmd: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, env=_env(),
                          timeout=timeout)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    src = tmp_path_factory.mktemp("src") / "tf2tosa"
    # build from a clean copy of the tracked files, so stray build/ or egg-info folders play no part
    listed = _run("git", "ls-files", "-z", cwd=ROOT)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    files = listed.stdout.split("\0")
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            (src / f).write_bytes((ROOT / f).read_bytes())
    proc = _run(sys.executable, "-m", "build", "--outdir", out, src, cwd=src)  # sdist, then the wheel from it
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = tmp_path_factory.mktemp("venv") / "v"
    proc = _run(sys.executable, "-m", "venv", env, cwd=dist)
    assert proc.returncode == 0, proc.stderr
    wheel = next(dist.glob("tf2tosa-*.whl"))
    proc = _run(env / "bin" / "python", "-m", "pip", "install", "-q", wheel, cwd=dist)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return env


def test_sdist_and_wheel_contents(dist: Path) -> None:
    sdist = next(dist.glob("tf2tosa-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "tf2tosa/cli.py", "tf2tosa/__main__.py"} <= names
    assert next(dist.glob("tf2tosa-*-py3-none-any.whl"))


def test_no_extras_converts_and_runs_without_tensorflow(venv: Path, tmp_path: Path) -> None:
    py = venv / "bin" / "python"
    code = ("import sys\n"
            "from tf2tosa.cli import main\n"
            "for argv in (['convert', sys.argv[1], '-o', 'm.tosa'], ['run', 'm.tosa'], ['inspect', 'm.tosa']):\n"
            "    try:\n        main(argv)\n    except SystemExit as e:\n        assert not e.code, (argv, e.code)\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'ai_edge_litert', 'keras')]\n"
            "assert not bad, bad\n"
            "import tf2tosa; assert 'site-packages' in tf2tosa.__file__, tf2tosa.__file__\n"
            "print('no-tf-ok')\n")
    proc = _run(py, "-c", code, SAMPLE, cwd=tmp_path)
    assert proc.returncode == 0 and "no-tf-ok" in proc.stdout, proc.stdout + proc.stderr
    assert "wrote m.tosa" in proc.stdout and "StatefulPartitionedCall" in proc.stdout
    assert (tmp_path / "m.tosa").stat().st_size > 1000
    # the console script and python -m agree
    assert _run(venv / "bin" / "tf2tosa", "--version", cwd=tmp_path).stdout == \
        _run(py, "-m", "tf2tosa", "--version", cwd=tmp_path).stdout


def test_verify_without_the_extra_names_it(venv: Path, tmp_path: Path) -> None:
    for argv in (["verify", SAMPLE], ["convert", SAMPLE, "-o", tmp_path / "m.tosa", "--verify"]):
        proc = _run(venv / "bin" / "tf2tosa", *argv, cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr == "error: verify needs LiteRT: pip install 'tf2tosa[tf]'\n"
        assert proc.stdout == ""


def test_sdist_installs_too(venv: Path, dist: Path, tmp_path: Path) -> None:
    sdist = next(dist.glob("tf2tosa-*.tar.gz"))
    py = venv / "bin" / "python"
    proc = _run(py, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", sdist, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = _run(py, "-m", "tf2tosa", "convert", SAMPLE, "-o", tmp_path / "s.tosa", cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / "s.tosa").is_file(), proc.stderr
