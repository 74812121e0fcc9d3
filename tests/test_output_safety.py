"""Every user-caused output failure ends in one line naming the path, exit code 1 (130 for Ctrl-C), no traceback,
and an unchanged directory: no partial file, no temporary file, no half of a .tosa/.mlir pair.

The CLI runs in-process (typer's CliRunner) so that failures the test machine cannot produce for real (no
permission when running as root, a read-only file system, a full disk, Ctrl-C) are injected at the system call
tf2tosa.outputs makes: ``tempfile.mkstemp`` (creating the staged file), ``os.fsync`` (the data reaching the disk)
and ``os.replace`` (the commit)."""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tf2tosa import outputs
from tf2tosa.cli import app

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "models" / "samples" / "depthwise_f32.tflite"


def listing(d: Path) -> dict[str, str]:
    """Every file and directory under ``d`` with a hash of its content."""
    out = {}
    for p in sorted(d.rglob("*")):
        out[str(p.relative_to(d))] = "dir" if p.is_dir() else hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def assert_one_line(res: Any, code: int, *needles: str) -> None:
    assert res.exit_code == code, (res.exit_code, res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    # one line; the zoo's progress bar ("[####...] 1/1 ...") may come before it
    err = [ln for ln in res.stderr.strip().splitlines() if not ln.startswith("[")]
    assert len(err) == 1, res.stderr
    assert "Traceback" not in res.output + res.stderr
    for n in needles:
        assert n in err[0], err[0]


def fail_on_call(k: int, exc: BaseException, real: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in for ``real`` that raises ``exc`` on its ``k``-th call (1-based) and calls through otherwise."""
    calls = [0]

    def fake(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == k:
            raise exc
        return real(*args, **kwargs)

    return fake


@pytest.fixture
def tosa_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("model")
    out = d / "m.tosa"
    assert invoke("convert", SAMPLE, "-o", out).exit_code == 0
    return out


# ------------------------------------------------------------------------------------------ convert
def test_convert_missing_directory(tmp_path: Path) -> None:
    before = listing(tmp_path)
    res = invoke("convert", SAMPLE, "-o", tmp_path / "nope" / "o.tosa")
    assert_one_line(res, 1, str(tmp_path / "nope" / "o.tosa"), "does not exist")
    assert listing(tmp_path) == before


def test_convert_output_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "out.tosa").mkdir()
    before = listing(tmp_path)
    res = invoke("convert", SAMPLE, "-o", tmp_path / "out.tosa")
    assert_one_line(res, 1, str(tmp_path / "out.tosa"), "is a directory")
    assert listing(tmp_path) == before


def test_convert_bad_mlir_path_leaves_no_tosa(tmp_path: Path) -> None:
    """The pair is written both or neither: a bad --mlir path leaves no .tosa behind."""
    before = listing(tmp_path)
    res = invoke("convert", SAMPLE, "-o", tmp_path / "ok.tosa", "--mlir", tmp_path / "nope" / "x.mlir")
    assert_one_line(res, 1, str(tmp_path / "nope" / "x.mlir"))
    assert listing(tmp_path) == before


@pytest.mark.parametrize("code,words", [(errno.EACCES, "permission denied"), (errno.EROFS, "read-only file system")])
def test_convert_unwritable_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, words: str) -> None:
    """No permission / read-only file system, injected where the staged file is created (the test may run as
    root, for whom a chmod-ed directory is still writable)."""
    monkeypatch.setattr(tempfile, "mkstemp", fail_on_call(1, OSError(code, os.strerror(code)), tempfile.mkstemp))
    before = listing(tmp_path)
    res = invoke("convert", SAMPLE, "-o", tmp_path / "o.tosa", "--mlir", tmp_path / "o.mlir")
    assert_one_line(res, 1, str(tmp_path / "o.tosa"), words)
    assert listing(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_convert_real_permission_denied(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        res = invoke("convert", SAMPLE, "-o", locked / "o.tosa")
        assert_one_line(res, 1, str(locked / "o.tosa"), "permission denied")
        assert listing(locked) == {}
    finally:
        locked.chmod(0o700)


def test_convert_disk_full_on_second_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC while the .mlir reaches the disk: the staged .tosa is removed too."""
    monkeypatch.setattr(os, "fsync", fail_on_call(2, OSError(errno.ENOSPC, "No space left on device"), os.fsync))
    before = listing(tmp_path)
    res = invoke("convert", SAMPLE, "-o", tmp_path / "o.tosa", "--mlir", tmp_path / "o.mlir")
    assert_one_line(res, 1, str(tmp_path / "o.mlir"), "no space left")
    assert listing(tmp_path) == before


def test_convert_interrupt_keeps_previous_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C after the .tosa was renamed into place: the old .tosa and .mlir come back, exit code 130."""
    (tmp_path / "o.tosa").write_bytes(b"old tosa")
    (tmp_path / "o.mlir").write_bytes(b"old mlir")
    before = listing(tmp_path)
    # os.replace calls: backup of o.tosa, o.tosa into place, backup of o.mlir (interrupted)
    monkeypatch.setattr(os, "replace", fail_on_call(3, KeyboardInterrupt(), os.replace))
    res = invoke("convert", SAMPLE, "-o", tmp_path / "o.tosa", "--mlir", tmp_path / "o.mlir")
    assert_one_line(res, 130, "interrupted")
    assert listing(tmp_path) == before


def test_save_api_raises_output_error(tmp_path: Path) -> None:
    from tf2tosa import convert
    from tf2tosa.errors import ConversionError, OutputError

    m = convert(str(SAMPLE))
    with pytest.raises(OutputError, match="does not exist") as e:
        m.save(tmp_path / "ok.tosa", mlir=tmp_path / "no" / "x.mlir")
    assert isinstance(e.value, ConversionError)
    assert listing(tmp_path) == {}


# ------------------------------------------------------------------------------------------ run --output-dir
def test_run_output_dir_is_a_file(tmp_path: Path, tosa_file: Path) -> None:
    (tmp_path / "outs").write_text("a file")
    before = listing(tmp_path)
    res = invoke("run", tosa_file, "--output-dir", tmp_path / "outs")
    assert_one_line(res, 1, str(tmp_path / "outs"), "not a directory")
    assert listing(tmp_path) == before


@pytest.mark.parametrize("exc,code,words", [
    (OSError(errno.ENOSPC, "No space left on device"), 1, "no space left"),
    (OSError(errno.EROFS, "Read-only file system"), 1, "read-only file system"),
    (KeyboardInterrupt(), 130, "interrupted"),
])
def test_run_output_dir_failure_leaves_nothing(tmp_path: Path, tosa_file: Path, monkeypatch: pytest.MonkeyPatch,
                                               exc: BaseException, code: int, words: str) -> None:
    """The failure comes after run created the missing output folders: they are removed again."""
    monkeypatch.setattr(os, "fsync", fail_on_call(1, exc, os.fsync))
    before = listing(tmp_path)
    res = invoke("run", tosa_file, "--output-dir", tmp_path / "a" / "b")
    assert_one_line(res, code, words)
    assert listing(tmp_path) == before


def test_run_output_dir_is_created(tmp_path: Path, tosa_file: Path) -> None:
    res = invoke("run", tosa_file, "--output-dir", tmp_path / "a" / "b")
    assert res.exit_code == 0, res.output
    assert [p.suffix for p in (tmp_path / "a" / "b").iterdir()] == [".npy"]


# ------------------------------------------------------------------------------------------ verify --layers-html
@pytest.mark.parametrize("case", ["missing", "directory", "disk-full"])
def test_layers_html_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    pytest.importorskip("ai_edge_litert", reason="verify --layers runs LiteRT")
    target = tmp_path / ("nope/page.html" if case == "missing" else "page.html")
    if case == "directory":
        target.mkdir()
    if case == "disk-full":
        monkeypatch.setattr(os, "fsync", fail_on_call(1, OSError(errno.ENOSPC, "No space left"), os.fsync))
    before = listing(tmp_path)
    res = invoke("verify", SAMPLE, "--layers", "--layers-html", target)
    words = {"missing": "does not exist", "directory": "is a directory", "disk-full": "no space left"}[case]
    assert_one_line(res, 1, str(target), words)
    assert listing(tmp_path) == before


# ------------------------------------------------------------------------------------------ zoo reports
@pytest.fixture
def quick_zoo(monkeypatch: pytest.MonkeyPatch) -> None:
    """The zoo with its model work replaced by a canned result: only the report writing is real."""
    from tf2tosa import zoo

    def check_model(name: str, variants: list[str], opts: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"model": name, "family": "test", "variant": v, "status": "PASS", "reason": "",
                 "description": "canned"} for v in variants]

    monkeypatch.setattr(zoo, "check_model", check_model)
    monkeypatch.setattr(zoo, "_versions", dict)


def _first_model() -> str:
    from tf2tosa.zoo import select

    (mdef, variants), *_ = select(None, include_real=False)
    return f"{mdef.name}/{variants[0]}"


@pytest.mark.parametrize("case", ["report-is-a-file", "read-only", "disk-full", "interrupt"])
def test_zoo_report_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quick_zoo: None, case: str) -> None:
    report = tmp_path / "zoo"
    if case == "report-is-a-file":
        report.write_text("x")
    before = listing(tmp_path)
    code, words = 1, {"report-is-a-file": "not a directory", "read-only": "read-only file system",
                      "disk-full": "no space left", "interrupt": "interrupted"}[case]
    if case == "read-only":
        monkeypatch.setattr(tempfile, "mkstemp", fail_on_call(1, OSError(errno.EROFS, "ro"), tempfile.mkstemp))
    elif case == "disk-full":  # the third report (zoo.html) does not fit: zoo.json and zoo.md go too
        monkeypatch.setattr(os, "fsync", fail_on_call(3, OSError(errno.ENOSPC, "full"), os.fsync))
    elif case == "interrupt":
        monkeypatch.setattr(os, "fsync", fail_on_call(2, KeyboardInterrupt(), os.fsync))
        code = 130
    res = invoke("zoo", "--filter", _first_model(), "--report", report)
    assert_one_line(res, code, words)
    assert listing(tmp_path) == before


def test_zoo_reports_written_together(tmp_path: Path, quick_zoo: None) -> None:
    res = invoke("zoo", "--filter", _first_model(), "--report", tmp_path / "r")
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["zoo.html", "zoo.json", "zoo.md"]


# ------------------------------------------------------------------------------------------ the writer itself
def test_write_files_restores_on_failed_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").write_bytes(b"A0")
    before = listing(tmp_path)
    # replace calls: backup a, a into place, b into place (fails)
    monkeypatch.setattr(os, "replace", fail_on_call(3, OSError(errno.EIO, "I/O error"), os.replace))
    with pytest.raises(outputs.OutputError, match="cannot write .*b: i/o error"):
        outputs.write_files({tmp_path / "a": b"A1", tmp_path / "b": b"B1"})
    assert listing(tmp_path) == before


def test_real_ctrl_c_during_write(tmp_path: Path) -> None:
    """A real SIGINT to a real process, delivered while the staged .tosa is being written: exit code 130, one line,
    no file left (the child slows its fsync down so the signal lands there)."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    out.mkdir()
    marker = tmp_path / "writing"
    # a child of a background job or of an xdist worker can inherit SIGINT as ignored, in which case Python keeps it
    # ignored; a process started from a terminal has Python's default handler, so the child sets that explicitly
    code = ("import os, signal, sys, time\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "real = os.fsync\n"
            "def slow(fd):\n"
            f"    open({str(marker)!r}, 'w').close()\n"
            "    time.sleep(60)\n"
            "os.fsync = slow\n"
            "from tf2tosa.cli import app\n"
            "sys.argv = ['tf2tosa', 'convert', sys.argv[1], '-o', sys.argv[2], '--mlir', sys.argv[3]]\n"
            "app()\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(SAMPLE), str(out / "o.tosa"), str(out / "o.mlir")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["error: interrupted"], err
    assert listing(out) == {}


@pytest.mark.skipif(os.geteuid() != 0, reason="device nodes need root (mknod)")
def test_write_files_device_failure_keeps_regular_files(tmp_path: Path) -> None:
    """A set with a regular file and a full device: the device is written first (after staging), so the regular
    file keeps its old content and no staged file is left."""
    import stat

    from tests.hostile import tree_hash

    (tmp_path / "a").write_bytes(b"old")
    full = tmp_path / "full"
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    before = tree_hash(tmp_path)
    def content(p: Path) -> None:  # a callable content: staged in the temporary folder, then copied in
        p.write_bytes(b"x" * 100)

    with pytest.raises(outputs.OutputError, match="cannot write .*full: no space left on device"):
        outputs.write_files({tmp_path / "a": b"new", full: content})
    assert tree_hash(tmp_path) == before
    assert (tmp_path / "a").read_bytes() == b"old"


def test_staged_names_stay_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The staged and backup files of a 255-byte target name stay well under NAME_MAX (they used to add 15)."""
    names: list[str] = []
    real = tempfile.mkstemp

    def recording(*args: Any, **kwargs: Any) -> tuple[int, str]:
        fd, name = real(*args, **kwargs)
        names.append(os.path.basename(name))
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", recording)
    target = tmp_path / ("é" * 125 + ".tosa")  # 255 bytes in UTF-8
    assert len(os.fsencode(target.name)) == 255
    outputs.write_file(target, b"1")
    outputs.write_file(target, b"2")  # the second write makes a backup of the first
    assert target.read_bytes() == b"2"
    assert len(names) == 3 and all(len(os.fsencode(n)) <= 80 for n in names), names
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
