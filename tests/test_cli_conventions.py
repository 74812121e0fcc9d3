"""The conventions of a Python command line: --version, ``python -m tf2tosa``, flags shown as ``--x / --no-x``,
documented exit codes, -q/-v, shell completion, progress only on a terminal, and a quiet TensorFlow."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tf2tosa

ROOT = Path(__file__).resolve().parent.parent
F32 = ROOT / "models" / "samples" / "small_cnn_f32.tflite"
INT8 = ROOT / "models" / "samples" / "small_cnn_int8.tflite"

needs_litert = pytest.mark.skipif(__import__("importlib.util").util.find_spec("ai_edge_litert") is None,
                                  reason="LiteRT is not installed")


def tf2tosa_cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tf2tosa", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=600)


def test_version_and_module_entry() -> None:
    proc = tf2tosa_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"tf2tosa {tf2tosa.__version__}"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{tf2tosa.__version__}"' in pyproject


def test_help_shows_flags_and_exit_codes() -> None:
    top = tf2tosa_cli("--help", env={"COLUMNS": "120"})
    assert top.returncode == 0
    assert "Exit codes: 0 ok; 1 user error" in top.stdout and "3 verification failed" in top.stdout
    assert "--install-completion" in top.stdout
    conv = tf2tosa_cli("convert", "--help", env={"COLUMNS": "120"}).stdout
    assert "--verify / --no-verify" in conv and "-q, --quiet" in conv and "-v, --verbose" in conv
    assert "<bool>" not in conv  # bare flags take no value
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"\| *3 *\| *verification failed", readme), "README documents the exit codes"


def test_exit_codes(tmp_path: Path) -> None:
    assert tf2tosa_cli("convert", "--no-such-option").returncode == 2
    assert tf2tosa_cli().returncode == 2  # no command: usage
    proc = tf2tosa_cli("convert", tmp_path / "missing.tflite", "-o", tmp_path / "o.tosa")
    assert proc.returncode == 1 and proc.stderr.startswith("error: ")
    ok = tf2tosa_cli("convert", F32, "-o", tmp_path / "o.tosa", "--no-verify")
    assert ok.returncode == 0 and ok.stdout.startswith("wrote ")


@needs_litert
def test_verification_failure_exits_3(tmp_path: Path) -> None:
    proc = tf2tosa_cli("verify", INT8, "--oracle", "optimized", "--num", "1")
    assert proc.returncode == 3 and "FAIL" in proc.stdout
    # the deprecated spelling still works, and says so
    proc = tf2tosa_cli("verify", INT8, "--reference-kernels", "--num", "1")
    assert proc.returncode == 0 and "PASS" in proc.stdout and "deprecated" in proc.stderr


def test_quiet_and_verbose(tmp_path: Path) -> None:
    quiet = tf2tosa_cli("inspect", F32, "-q")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""
    loud = tf2tosa_cli("inspect", F32)
    assert "profiles:" in loud.stdout
    # -v on a non-terminal: plain progress lines on stderr
    verbose = tf2tosa_cli("convert", F32, "-o", tmp_path / "o.tosa", "-v")
    assert verbose.returncode == 0 and "tf2tosa: convert small_cnn_f32.tflite" in verbose.stderr


def test_shell_completion() -> None:
    script = tf2tosa_cli("--show-completion", "bash")
    assert script.returncode == 0 and "_tf2tosa_completion" in script.stdout
    proc = tf2tosa_cli(env={"_TF2TOSA_COMPLETE": "complete_bash", "COMP_WORDS": "tf2tosa ver", "COMP_CWORD": "1"})
    assert proc.returncode == 0 and proc.stdout.split() == ["verify"]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal_and_only_when_slow() -> None:
    from tf2tosa.progress import Progress

    tty = _Tty()
    with Progress("converting m", stream=tty, delay=0.05) as p:
        p.update(1, 3, "legalizing")
        time.sleep(0.4)
    assert "converting m" in tty.getvalue()
    fast = _Tty()
    with Progress("converting m", stream=fast, delay=5.0) as p:
        p.update(1, 3, "legalizing")
    assert fast.getvalue() == ""  # work under the delay shows nothing
    pipe = io.StringIO()
    with Progress("converting m", stream=pipe, delay=0.0) as p:
        p.update(1, 3, "legalizing")
        time.sleep(0.1)
    assert pipe.getvalue() == ""  # not a terminal, not verbose: nothing
    with Progress("converting m", stream=pipe, delay=0.0, verbose=True) as p:
        p.update(1, 3, "legalizing")
    assert "tf2tosa: legalizing" in pipe.getvalue() and "\x1b" not in pipe.getvalue()


def test_noise_filter_keeps_our_lines() -> None:
    from tf2tosa.quiet import filter_noise

    text = ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
            "I0000 00:00:1795562147.987193   31669 port.cc:153] oneDNN custom operations are on.\n"
            "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow.\n"
            "W0000 00:00:1795562149.1 31669 loader.cc:12] something\n"
            "WARNING:absl:Found untraced functions\n"
            "/x/site-packages/keras/src/layer.py:12: UserWarning: do not do that\n"
            "  warnings.warn(\n"
            "warning: input 'x': batch dimension unset, using 1 (set it with --input-shape)\n"
            "/x/tf2tosa/converter/passes.py:9: UserWarning: ours\n"
            "error: cannot read model\n")
    assert filter_noise(text) == ("warning: input 'x': batch dimension unset, using 1 (set it with --input-shape)\n"
                                  "/x/tf2tosa/converter/passes.py:9: UserWarning: ours\n"
                                  "error: cannot read model\n")


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("tensorflow")
    path = tmp_path_factory.mktemp("sm") / "model"
    code = (
        "import sys, tensorflow as tf\n"
        "class M(tf.Module):\n"
        "    def __init__(self):\n"
        "        self.w = tf.Variable(tf.random.normal([8, 4], seed=1))\n"
        "    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32)])\n"
        "    def __call__(self, x):\n"
        "        return tf.nn.relu(tf.matmul(x, self.w))\n"
        "m = M()\n"
        "tf.saved_model.save(m, sys.argv[1], signatures=m.__call__.get_concrete_function())\n")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return path


@pytest.mark.slow
def test_saved_model_conversion_prints_only_our_lines(saved_model: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_CPP", "GLOG", "ABSL"))}
    proc = subprocess.run([sys.executable, "-m", "tf2tosa", "convert", str(saved_model), "-o",
                           str(tmp_path / "m.tosa"), "--verify"], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.splitlines()
    # our one warning (the SavedModel's batch dimension is unset), once, and nothing from TensorFlow
    assert err == ["warning: input 'x': batch dimension unset, using 1 (set it with --input-shape)"], proc.stderr
    # (with --verify the file is written, and its line printed, once verification passes)
    assert "\nwrote " in "\n" + proc.stdout and "against TensorFlow, PASS" in proc.stdout
    # with --verbose the dependencies may speak again (the warning is still there)
    loud = subprocess.run([sys.executable, "-m", "tf2tosa", "convert", str(saved_model), "-o",
                           str(tmp_path / "m.tosa"), "-v"], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=600)
    assert loud.returncode == 0 and "warning: input 'x'" in loud.stderr
    assert len(loud.stderr.splitlines()) > len(err)


SAMPLE_MODELS = sorted((ROOT / "models" / "samples").glob("*.tflite"))


@needs_litert
@pytest.mark.parametrize("sample", SAMPLE_MODELS, ids=[p.stem for p in SAMPLE_MODELS])
def test_every_sample_passes_by_default(sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The verdict with default options is PASS, judged by the reference kernels, and the optimized kernels'
    difference is reported as information."""
    from tf2tosa.cli import main

    for argv in (["verify", str(sample)], ["convert", str(sample), "-o", str(tmp_path / "m.tosa"), "--verify"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        out = capsys.readouterr().out
        assert exc.value.code == 0, out
        assert "against LiteRT reference kernels (BUILTIN_REF), PASS" in out
        assert re.search(r"info: optimized kernels (differ by ≤ \S+|agree with the reference kernels)", out), out


def test_a_command_runs_with_only_its_own_click_command(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``main`` builds the click command of the command that runs only (``cli.app_for``): every command shows the
    same --help as in the whole app, and takes the same parameters; an option, a name that is not a command and no
    argument get the whole app (its help, its errors)."""
    import typer.main

    from tf2tosa import cli

    def shown(args: list[str], whole: bool) -> str:
        with monkeypatch.context() as m:
            m.setenv("COLUMNS", "100")
            if whole:
                m.setattr(cli, "app_for", lambda a: cli.app)
            with pytest.raises(SystemExit):
                cli.main(args)
        out = capsys.readouterr()
        return out.out + out.err

    def params(cmd: object) -> list[tuple[object, ...]]:
        return [(p.name, tuple(p.opts), tuple(p.secondary_opts), repr(p.default), getattr(p, "help", None),
                 p.required, p.multiple) for p in cmd.params]  # type: ignore[attr-defined]

    full = typer.main.get_command(cli.app)
    for name, cmd in full.commands.items():  # type: ignore[attr-defined]
        one = typer.main.get_command(cli.app_for([name, "--help"]))
        assert list(one.commands) == [name]  # type: ignore[attr-defined]
        assert params(one.commands[name]) == params(cmd)  # type: ignore[attr-defined]
        assert shown([name, "--help"], whole=False) == shown([name, "--help"], whole=True)
    assert shown(["convert"], whole=False) == shown(["convert"], whole=True)  # (missing MODEL: a usage error)
    for args in ([], ["--help"], ["--version"], ["conver"], ["convert-"]):
        assert cli.app_for(args) is cli.app
