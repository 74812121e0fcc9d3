"""Shared fixtures (the on-disk model cache, model builders), the session-wide check of every ``.tosa`` a test
produces (``tests/tosa_hook.py``), and CI strictness: with ``CI=true`` a missing tool fails the run instead of
skipping tests."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

# TensorFlow's own kernels are the oracle of many tests.  Its stock CPU kernels refuse some of the convolutions
# those tests build (a depthwise with unequal strides or dilation, a dilated conv2d_transpose) and TensorFlow
# turns its oneDNN kernels, which take them, on by default only on some processors (on Intel ones, not on AMD
# EPYC): ask for them everywhere, so the oracle is the same on every machine (children inherit it).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))  # make ``import modelgen`` work from any rootdir

import model_explorer  # noqa: E402
import modelgen  # noqa: E402
import tosa_hook  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HOOK_REPORT = ROOT / ".cache" / "tosa_hook.json"
CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
#: a skip whose reason says one of the tools CI must have (tosa-opt, the reference model, LiteRT, TensorFlow) is
#: absent fails under CI=true; other skips (Chromium, downloaded real models, the spec seed) stay skips
_CI_TOOLS = ("tensorflow", "keras", "litert", "tosa-tools", "tosa_tools", "tosa.fbs", "tosa-opt", "iree", "vela",
             "ml sdk for vulkan", "reference model", "tosa_reference_model", "tosa_verif_build_tests", "model explorer")
_ABSENT = ("not installed", "not available", "not found", "no module named", "could not import", "needs tensorflow",
           "cannot build the model")


def _have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


HAVE_TF = _have("tensorflow")
HAVE_LITERT = _have("ai_edge_litert")

requires_tf = pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not installed")
requires_litert = pytest.mark.skipif(not HAVE_LITERT, reason="ai_edge_litert is not installed")


@pytest.fixture(scope="session")
def model_cache_dir() -> Path:
    """Where built ``.tflite`` models are cached (``<repo>/.cache/models``)."""
    modelgen.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    return modelgen.CACHE_DIR


@pytest.fixture(scope="session")
def tflite_model() -> Callable[..., bytes]:
    """``tflite_model(name, quant=None) -> bytes`` for any ``ONE_OP_MODELS`` / ``NETWORKS`` name.

    A cached model is returned even without TensorFlow; building one needs TensorFlow (else the test skips).
    """

    def get(name: str, quant: str | None = None) -> bytes:
        try:
            return modelgen.get_model(name, quant=quant)
        except ModuleNotFoundError as e:
            if e.name is not None and e.name.split(".")[0] in ("tensorflow", "keras"):
                pytest.skip("tensorflow is not installed")
            raise

    return get


@pytest.fixture(scope="session")
def one_op_models(tflite_model: Callable[..., bytes]) -> dict[str, bytes]:
    """Every float ``ONE_OP_MODELS`` entry, built (or loaded from the cache) once per session."""
    return {name: tflite_model(name) for name in modelgen.ONE_OP_MODELS}


@pytest.fixture(scope="session")
def litert_worker() -> Iterator[Any]:
    """A persistent :class:`tf2tosa.verify.litert.LiteRTWorker` (skips if ai_edge_litert is missing)."""
    if not HAVE_LITERT:
        pytest.skip("ai_edge_litert is not installed")
    from tf2tosa.verify.litert import LiteRTWorker

    with LiteRTWorker() as worker:
        yield worker


# ----------------------------------------------------------------------------------------------- CI strictness
def _ci_missing_tools() -> list[str]:
    from tf2tosa.verify import tosa_tools

    missing = []
    if not tosa_tools.tosa_opt_exe().is_file():
        missing.append(f"tosa-opt ({tosa_tools.tosa_opt_exe()})")
    ref = tosa_tools.python_exe().with_name("tosa_reference_model")
    if not tosa_tools.python_exe().is_file() or not ref.is_file():
        missing.append(f"the Arm reference model ({ref})")
    if not HAVE_LITERT:
        missing.append("LiteRT (ai_edge_litert)")
    if not HAVE_TF:
        missing.append("TensorFlow")
    if not model_explorer.available():
        missing.append(f"Model Explorer's TOSA adapter ({model_explorer.venv_dir()})")
    from tf2tosa.verify import vgf

    if not vgf.available():  # the SDK in .venv-vgf and a Vulkan device (lavapipe): `make vgf`
        missing.append("Arm's ML SDK for Vulkan (.venv-vgf) with a Vulkan device (lavapipe)")
    return missing


def _fail_missing_skip(report: Any) -> None:
    """Under CI a skip that stands for a missing tool becomes a failure."""
    if not CI or not report.skipped or not isinstance(report.longrepr, tuple):
        return
    reason = str(report.longrepr[2])
    low = reason.lower()
    if any(m in low for m in _CI_TOOLS) and any(m in low for m in _ABSENT):
        report.outcome = "failed"
        report.longrepr = f"CI=true: a missing tool must fail, not skip: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    _fail_missing_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    _fail_missing_skip(outcome.get_result())


# ------------------------------------------------------------------------------------- the .tosa hook
RECORDER = tosa_hook.Recorder()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tosa_unchecked(reason): the .tosa files this test writes are on purpose "
                                       "invalid; the session hook does not validate them")
    # subprocesses (CLI tests) spool every .tosa they serialize for the hook: tests/spool/sitecustomize.py
    spool = tempfile.mkdtemp(prefix="tf2tosa-spool-")
    os.environ["TF2TOSA_TOSA_SPOOL"] = spool
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).parent / "spool"),
                                                          os.environ.get("PYTHONPATH", "")) if p)
    RECORDER.spool = Path(spool)
    if CI and not hasattr(config, "workerinput"):
        missing = _ci_missing_tools()
        if missing:
            raise pytest.UsageError("CI=true and these are missing: " + ", ".join(missing))
    import tf2tosa.executor
    import tf2tosa.executor.runner
    import tf2tosa.serializer
    import tf2tosa.serializer.tosa_reader
    import tf2tosa.serializer.tosa_writer

    wrapped_to_bytes = RECORDER.wrap_to_bytes(tf2tosa.serializer.tosa_writer.to_bytes)
    tf2tosa.serializer.tosa_writer.to_bytes = wrapped_to_bytes  # type: ignore[assignment]
    tf2tosa.serializer.to_bytes = wrapped_to_bytes  # type: ignore[assignment]
    tf2tosa.serializer.tosa_writer.write_file = RECORDER.wrap_write_file(  # type: ignore[assignment]
        tf2tosa.serializer.tosa_writer.write_file)
    wrapped_run = RECORDER.wrap_run(tf2tosa.executor.runner.run)
    tf2tosa.executor.runner.run = wrapped_run  # type: ignore[assignment]
    tf2tosa.executor.run = wrapped_run  # type: ignore[assignment]
    wrapped_from_bytes = RECORDER.wrap_from_bytes(tf2tosa.serializer.tosa_reader.from_bytes)
    tf2tosa.serializer.tosa_reader.from_bytes = wrapped_from_bytes  # type: ignore[assignment]
    if hasattr(tf2tosa.serializer, "from_bytes"):
        tf2tosa.serializer.from_bytes = wrapped_from_bytes  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _check_every_tosa(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test, validate (tosa-opt) and run (Arm reference model) every new .tosa it produced."""
    yield
    mark = request.node.get_closest_marker("tosa_unchecked")
    exempt = (str(mark.args[0]) if mark.args else "marked") if mark is not None else None
    failures = RECORDER.drain(exempt)
    if failures:
        pytest.fail("session .tosa check:\n" + "\n".join(failures), pytrace=False)


_WORKER_STATS: list[dict[str, Any]] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    if RECORDER.spool is not None:
        shutil.rmtree(RECORDER.spool, ignore_errors=True)
    stats = RECORDER.stats.as_dict()
    if hasattr(session.config, "workeroutput"):  # an xdist worker: hand the figures to the controller
        session.config.workeroutput["tosa_hook"] = json.dumps(stats)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    data = getattr(node, "workeroutput", {}).get("tosa_hook")
    if data:
        _WORKER_STATS.append(json.loads(data))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    parts = _WORKER_STATS or [RECORDER.stats.as_dict()]
    checked = set().union(*(set(p["checked"]) for p in parts))
    ran = set().union(*(set(p["ran"]) for p in parts))
    not_run: dict[str, str] = {}
    fp32_only: dict[str, str] = {}
    capped: set[str] = set()
    for p in parts:
        not_run.update(p["not_run"])
        fp32_only.update(p.get("fp32_only", {}))
        capped.update(p.get("capped", {}))
    capped -= checked
    seconds = sum(float(p["seconds"]) for p in parts)
    from tf2tosa.verify import tosa_tools

    reasons: dict[str, int] = {}
    for why in not_run.values():
        reasons[why.split(":")[0]] = reasons.get(why.split(":")[0], 0) + 1
    summary = {"checked": len(checked), "reference_model_runs": len(ran), "not_run": reasons,
               "fp32_mode_only": len(fp32_only), "not_checked_per_test_cap": len(capped),
               "not_run_detail": sorted(set(not_run.values())),
               "too_large": sorted(w for w in not_run.values() if w.startswith("too large")),
               "hook_seconds": round(seconds, 1), "tools_available": tosa_tools.available()}
    line = (f".tosa hook: {len(checked)} unique .tosa files validated by tosa-opt, {len(ran)} also run in the "
            f"Arm reference model (fp32 mode; float graphs also precise mode); not run: "
            + (", ".join(f"{n} {why}" for why, n in sorted(reasons.items())) or "none")
            + (f"; {len(fp32_only)} in fp32 mode only (bf16/fp8 inputs)" if fp32_only else "")
            + (f"; {len(capped)} NOT checked (beyond the per-test cap of {tosa_hook.MAX_PER_TEST})" if capped else "")
            + f"; {seconds:.1f}s spent in the hook")
    if not tosa_tools.available():
        line += " (tosa-tools environment missing: nothing checked)"
    terminalreporter.write_sep("-", "tosa hook")
    terminalreporter.write_line(line)
    try:
        HOOK_REPORT.parent.mkdir(parents=True, exist_ok=True)
        HOOK_REPORT.write_text(json.dumps(summary, indent=1) + "\n")
    except OSError:
        pass
