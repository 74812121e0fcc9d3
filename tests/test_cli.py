"""The CLI as a user meets it: bad input, determinism, no TensorFlow import, inspect/run/convert."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "models" / "samples").glob("*_f32.tflite"))
CLI = [sys.executable, "-m", "tf2tosa.cli"]


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=ROOT)


@pytest.fixture(scope="module")
def sample() -> Path:
    if not SAMPLES:
        pytest.skip("no sample models")
    return SAMPLES[0]


def assert_user_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_truncated_tflite(tmp_path: Path, sample: Path) -> None:
    data = sample.read_bytes()
    for cut in (16, len(data) // 3, len(data) - 7):
        bad = tmp_path / f"cut{cut}.tflite"
        bad.write_bytes(data[:cut])
        out = tmp_path / "o.tosa"
        assert_user_error(cli("convert", bad, "-o", out), str(bad))
        assert not out.exists() and not list(tmp_path.glob(".o.tosa*"))


def test_random_bytes(tmp_path: Path) -> None:
    bad = tmp_path / "noise.tflite"
    bad.write_bytes(np.random.default_rng(7).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    out = tmp_path / "o.tosa"
    assert_user_error(cli("convert", bad, "-o", out), str(bad))
    assert not out.exists()


def test_missing_file(tmp_path: Path) -> None:
    assert_user_error(cli("convert", tmp_path / "nope.tflite", "-o", tmp_path / "o.tosa"), "nope.tflite")


def test_wrong_input_shape_name(tmp_path: Path, sample: Path) -> None:
    out = tmp_path / "o.tosa"
    assert_user_error(cli("convert", sample, "-o", out, "--input-shape", "no_such_input=1,2"), "no_such_input")
    assert not out.exists()


def test_wrong_input_shape_rank(tmp_path: Path, sample: Path) -> None:
    import tf2tosa

    name = tf2tosa.convert(str(sample)).input_names[0]
    out = tmp_path / "o.tosa"
    assert_user_error(cli("convert", sample, "-o", out, "--input-shape", f"{name}=1,2"), name)
    assert not out.exists()


def test_run_wrong_input(tmp_path: Path, sample: Path) -> None:
    out = tmp_path / "m.tosa"
    assert cli("convert", sample, "-o", out).returncode == 0
    bad = tmp_path / "x.npy"
    np.save(bad, np.zeros((2, 2), np.float32))
    assert_user_error(cli("run", out, "--input", f"wrong_name={bad}"), "wrong_name")
    import tf2tosa

    name = tf2tosa.load(str(out)).input_names[0]
    assert_user_error(cli("run", out, "--input", f"{name}={bad}"), name)


def test_convert_is_deterministic_and_needs_no_tensorflow(tmp_path: Path, sample: Path) -> None:
    a, b = tmp_path / "a.tosa", tmp_path / "b.tosa"
    code = ("import sys, runpy; sys.argv = ['tf2tosa', 'convert', %r, '-o', %r, '--mlir', %r];\n"
            "from tf2tosa.cli import app\n"
            "try:\n    app()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n"
            "assert 'ai_edge_litert' not in sys.modules\nprint('no-tf-ok')")
    for out in (a, b):
        proc = subprocess.run([sys.executable, "-c", code % (str(sample), str(out), str(out.with_suffix(".mlir")))],
                              capture_output=True, text=True, cwd=ROOT)
        assert proc.returncode == 0 and "no-tf-ok" in proc.stdout, proc.stderr
    assert a.read_bytes() == b.read_bytes()
    assert a.with_suffix(".mlir").read_text() == b.with_suffix(".mlir").read_text()


def test_entry_point_collector_thresholds() -> None:
    """The console entry point tunes the cyclic collector for its command: ``convert`` (objects that live to its
    end) a young generation of 200,000, any other command 20,000; ``main(argv)`` called as a function leaves the
    process's own settings alone."""
    code = ("import gc, sys\nfrom tf2tosa.cli import main\ngc.set_threshold(700, 10, 10)\n"
            "sys.argv = ['tf2tosa', *sys.argv[1:]]\n"
            "try:\n    main(None if sys.argv[1] != 'as-function' else ['--help'])\nexcept SystemExit:\n    pass\n"
            "print('threshold', gc.get_threshold()[0])")
    for args, want in ((["convert", "--help"], 200_000), (["inspect", "--help"], 20_000), (["--help"], 20_000),
                       (["as-function"], 700)):
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
        assert f"threshold {want}" in proc.stdout, (args, proc.stdout[-300:], proc.stderr[-500:])


def test_inspect_and_run(tmp_path: Path, sample: Path) -> None:
    out = tmp_path / "m.tosa"
    assert cli("convert", sample, "-o", out).returncode == 0
    proc = cli("inspect", out)
    assert proc.returncode == 0 and "PRO-FP" in proc.stdout and "tosa." in proc.stdout, proc.stderr
    proc = cli("run", out, "--output-dir", tmp_path / "res")
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "res").glob("*.npy"))


def test_unsupported_ops_listed_at_once(tmp_path: Path) -> None:
    tf = pytest.importorskip("tensorflow")

    @tf.function(input_signature=[tf.TensorSpec([8], tf.float32)])
    def f(x):  # type: ignore[no-untyped-def]
        u1, _ = tf.unique(x)
        u2, _ = tf.unique(x * 2.0)
        w = tf.where(x > 0.0)
        return tf.reduce_sum(u1) + tf.reduce_sum(u2) + tf.cast(tf.reduce_sum(w), tf.float32)

    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    path = tmp_path / "unsupported.tflite"
    path.write_bytes(conv.convert())
    out = tmp_path / "o.tosa"
    proc = cli("convert", path, "-o", out)
    assert_user_error(proc, "tfl.unique x2", "tfl.where x1", str(path))
    assert not out.exists()
    # with --custom-ops the same model converts; the unlowerable ops stay as CUSTOM operators and inspect says so
    proc = cli("convert", path, "-o", out, "--custom-ops")
    assert proc.returncode == 0 and "CUSTOM" in proc.stderr, proc.stderr
    proc = cli("inspect", out)
    assert proc.returncode == 0 and "partial graph: 3 CUSTOM" in proc.stdout, proc.stdout


def test_convert_to_missing_directory_is_one_line(tmp_path: Path, sample: Path) -> None:
    """The issue's example, as a real process: no Rich traceback, nothing written (also not the .mlir's pair)."""
    proc = cli("convert", sample, "-o", tmp_path / "nonexistent" / "o.tosa")
    assert_user_error(proc, str(tmp_path / "nonexistent" / "o.tosa"), "does not exist")
    assert proc.returncode == 1
    proc = cli("convert", sample, "-o", tmp_path / "ok.tosa", "--mlir", tmp_path / "bad" / "x.mlir")
    assert_user_error(proc, str(tmp_path / "bad" / "x.mlir"))
    assert proc.returncode == 1
    assert list(tmp_path.iterdir()) == []
