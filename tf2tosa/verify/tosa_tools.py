"""Harness around Arm's TOSA tools, the independent oracle for our ``.tosa`` files.

The tools (``tosa-tools``: ``tosa-opt`` and the reference model module
``tosa_reference_model``) pin an older numpy/flatbuffers than TensorFlow needs, so they
live in their own virtual environment and are only ever called in a subprocess:

* :func:`validate` runs ``tosa-opt --tosa-deserialize ... --tosa-attach-target=...
  --tosa-validate=strict-op-spec-alignment`` on a ``.tosa`` file;
* :func:`validate_mlir` does the same for TOSA-dialect MLIR text;
* :func:`run_reference` runs the reference model on a ``.tosa`` file (in one persistent worker process per
  process, :mod:`tf2tosa.verify._tosa_worker`, arrays passed as ``.npy`` files; precise mode through the
  ``tosa_reference_model`` command).

The environment is ``$TF2TOSA_TOSA_VENV`` if set, otherwise ``<repo>/.venv-tosa``.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..ir.graph import Graph
from ..ir.types import DType
from ..serializer.tosa_reader import from_bytes

ENV_VAR = "TF2TOSA_TOSA_VENV"
_REPO = Path(__file__).resolve().parents[2]
_WORKER = Path(__file__).with_name("_tosa_worker.py")

#: spec profile / extension names -> tosa-opt ``--tosa-attach-target`` names
PROFILE_NAMES = {"PRO-INT": "pro_int", "PRO-FP": "pro_fp"}
EXTENSION_NAMES = {
    "EXT-INT16": "int16", "EXT-INT4": "int4", "EXT-BF16": "bf16", "EXT-FP8E4M3": "fp8e4m3",
    "EXT-FP8E5M2": "fp8e5m2", "EXT-FFT": "fft", "EXT-VARIABLE": "variable", "EXT-CONTROLFLOW": "controlflow",
    "EXT-DOUBLEROUND": "doubleround", "EXT-INEXACTROUND": "inexactround", "EXT-DYNAMIC": "dynamic",
}
ALL_PROFILES = ("PRO-INT", "PRO-FP")
ALL_EXTENSIONS = tuple(EXTENSION_NAMES)
#: extensions of the TOSA 1.1 draft only (``version="1.1.draft"``)
DRAFT_EXTENSION_NAMES = {"EXT-SHAPE": "shape"}


class ToolError(RuntimeError):
    """An Arm tool could not be run or reported a failure."""


class ReferenceModelError(ToolError):
    """The reference model did not return TOSA_VALID."""

    def __init__(self, status: str, log: str) -> None:
        self.status = status
        self.log = log
        super().__init__(f"reference model status {status}" + (f": {log.strip()[-2000:]}" if log.strip() else ""))


# ----------------------------------------------------------------------------- environment
def venv_dir() -> Path:
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else _REPO / ".venv-tosa"


def python_exe() -> Path:
    return venv_dir() / "bin" / "python"


def _bundled(name: str) -> Path:
    """The native ``name`` binary the tosa-tools wheel ships in its site-packages ``bin/`` folder, else the console
    script of the same name (a Python shim that finds and runs that binary: about 0.2 s of interpreter start-up
    per call, which the session hook's ~2,300 calls would pay)."""
    for native in sorted(venv_dir().glob(f"lib/python3*/site-packages/bin/{name}")):
        if native.is_file() and os.access(native, os.X_OK):
            return native
    return venv_dir() / "bin" / name


def tosa_opt_exe() -> Path:
    return _bundled("tosa-opt")


def available() -> bool:
    """True when the tosa-tools environment (python with the reference model, tosa-opt) exists."""
    return python_exe().is_file() and tosa_opt_exe().is_file() and os.access(tosa_opt_exe(), os.X_OK)


def schema_path(timeout: float = 60.0) -> Path | None:
    """Arm's ``tosa.fbs`` as installed with tosa-tools: asked of the tosa-tools interpreter (importlib.metadata
    lists the package's files), so no Python version or site-packages layout is assumed.  None when absent."""
    if not python_exe().is_file():
        return None
    code = ("import importlib.metadata as m\n"
            "for d in m.distributions():\n"
            "    for f in d.files or []:\n"
            "        if str(f).endswith('tosa.fbs'):\n"
            "            print(f.locate()); raise SystemExit\n")
    proc = _run([str(python_exe()), "-c", code], timeout)
    lines = proc.stdout.strip().splitlines()
    path = Path(lines[0]) if proc.returncode == 0 and lines else None
    return path if path is not None and path.is_file() else None


def _require() -> None:
    if not available():
        raise ToolError(f"tosa-tools environment not found at {venv_dir()} (set {ENV_VAR})")


def _short(name: str, table: Mapping[str, str]) -> str:
    key = name.strip().upper().replace("_", "-")
    if key in table:
        return table[key]
    for k in table:  # accept "INT16" for "EXT-INT16", "FP" for "PRO-FP"
        if k.split("-", 1)[1] == key:
            return table[k]
    low = name.strip().lower()
    if low in table.values():
        return low
    raise ValueError(f"unknown TOSA profile/extension name {name!r}")


def target_option(profiles: Sequence[str] | None = None, extensions: Sequence[str] | None = None,
                  level: str = "8k", version: str = "1.0") -> str:
    """The ``--tosa-attach-target=...`` option for spec ``version`` (``1.0`` or ``1.1.draft``, which also knows
    EXT-SHAPE) with the given profiles and extensions."""
    names = {**EXTENSION_NAMES, **DRAFT_EXTENSION_NAMES} if version == "1.1.draft" else EXTENSION_NAMES
    profs = sorted({_short(p, PROFILE_NAMES) for p in (profiles or ALL_PROFILES)})
    exts = sorted({_short(e, names) for e in (extensions or ())})
    opt = f"specification_version={version} profiles={','.join(profs)}"
    if exts:
        opt += f" extensions={','.join(exts)}"
    opt += f" level={level}"
    return f"--tosa-attach-target={opt}"


def _run(cmd: list[str], timeout: float, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              cwd=cwd)
    except subprocess.TimeoutExpired as e:
        raise ToolError(f"{Path(cmd[0]).name} timed out after {timeout:.0f}s") from e
    except OSError as e:
        raise ToolError(f"cannot run {cmd[0]}: {e}") from e


def _strip_warnings(text: str) -> str:
    """Tool output without the serializer-version warnings and crash stack dumps."""
    lines = []
    for line in text.splitlines():
        if line.startswith(("PLEASE submit a bug report", "Stack dump:")):
            break
        if not line.startswith("WARNING: "):
            lines.append(line)
    return "\n".join(lines).strip()


# ----------------------------------------------------------------------------- tosa-opt
def tosa_file(model: bytes | str | os.PathLike[str], tmp: str) -> str:
    """The path of ``model`` as a file for a tool: its own path, or ``tmp/model.tosa`` written from its bytes."""
    if not isinstance(model, bytes | bytearray):
        return os.fspath(model)
    path = os.path.join(tmp, "model.tosa")
    with open(path, "wb") as f:
        f.write(model)
    return path


def validate(model: bytes | str | os.PathLike[str], profiles: Sequence[str] | None = None,
             extensions: Sequence[str] | None = None, level: str = "8k", strict: bool = True,
             timeout: float = 120.0, version: str = "1.0") -> tuple[bool, str]:
    """Deserialize a ``.tosa`` flatbuffer (bytes or path) with tosa-opt and validate it for TOSA ``version`` (1.0,
    or 1.1.draft for a ``--dynamic`` program).

    Returns ``(ok, message)``; the message holds tosa-opt's diagnostics (empty when clean).
    """
    _require()
    with tempfile.TemporaryDirectory(prefix="tf2tosa-val-") as tmp:
        path = tosa_file(model, tmp)
        cmd = [str(tosa_opt_exe()), f"--tosa-deserialize=tosa-flatbuffer-filename={path}",
               target_option(profiles, extensions, level, version),
               "--tosa-validate=strict-op-spec-alignment" if strict else "--tosa-validate", "-o", os.devnull]
        proc = _run(cmd, timeout)
    msg = _strip_warnings(proc.stderr)
    return proc.returncode == 0, msg


def validate_mlir(text: str, profiles: Sequence[str] | None = None, extensions: Sequence[str] | None = None,
                  level: str = "8k", strict: bool = True, timeout: float = 120.0,
                  version: str = "1.0") -> tuple[bool, str]:
    """Parse TOSA-dialect MLIR text with tosa-opt and validate it for TOSA ``version`` (1.0 or 1.1.draft)."""
    _require()
    with tempfile.TemporaryDirectory(prefix="tf2tosa-val-") as tmp:
        path = os.path.join(tmp, "model.mlir")
        with open(path, "w") as f:
            f.write(text)
        cmd = [str(tosa_opt_exe()), path, target_option(profiles, extensions, level, version),
               "--tosa-validate=strict-op-spec-alignment" if strict else "--tosa-validate", "-o", os.devnull]
        proc = _run(cmd, timeout)
    return proc.returncode == 0, _strip_warnings(proc.stderr)


def serialize_mlir(text: str, timeout: float = 120.0) -> bytes:
    """Arm's own .tosa serialization of TOSA-dialect MLIR text (``tosa-opt --tosa-serialize``).

    Graph input/output names come from ``tosa.tensor_name`` attributes.  Each operator's location is the
    line and column of ``text`` it was read from, as ``loc("model.mlir":LINE:COL)`` (the file name relative, so the
    bytes do not depend on a temporary directory).  Note: this tosa-opt writes int4 constants with four or more
    elements wrongly (too few bytes).
    """
    _require()
    with tempfile.TemporaryDirectory(prefix="tf2tosa-ser-") as tmp:
        src = os.path.join(tmp, "model.mlir")
        dst = os.path.join(tmp, "model.tosa")
        with open(src, "w") as f:
            f.write(text)
        proc = _run([str(tosa_opt_exe()), "model.mlir", "--tosa-serialize=tosa-flatbuffer-filename=" + dst +
                     " retain-graph-input-output-names", "-o", os.devnull], timeout, cwd=tmp)
        if proc.returncode != 0 or not os.path.exists(dst):
            raise ToolError(f"tosa-opt could not serialize: {_strip_warnings(proc.stderr)}")
        return Path(dst).read_bytes()


# ----------------------------------------------------------------------------- reference model
_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "int4")


def _save(directory: str, fname: str, arr: np.ndarray) -> dict[str, str | None]:
    arr = np.ascontiguousarray(arr)
    entry: dict[str, str | None] = {"file": fname, "dtype": None}
    if arr.dtype.name in _ML_DTYPES:
        entry["dtype"] = arr.dtype.name
        arr = arr.view({1: np.uint8, 2: np.uint16}[arr.dtype.itemsize])
    np.save(os.path.join(directory, fname), arr, allow_pickle=False)
    return entry


def _load(directory: str, entry: Mapping[str, str | None]) -> np.ndarray:
    arr = np.load(os.path.join(directory, str(entry["file"])), allow_pickle=False)
    if entry.get("dtype"):
        import ml_dtypes

        arr = arr.view(getattr(ml_dtypes, str(entry["dtype"])))
    return arr


def run_reference(model: bytes | str | os.PathLike[str], inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
                  *, precise: bool = False, level: str = "NONE", timeout: float = 300.0) -> dict[str, np.ndarray]:
    """Run the Arm reference model on ``model`` (bytes or path).

    ``inputs`` maps graph input names to arrays (or is a list in graph-input order).  The arrays
    must already have the TOSA storage types (int8 for i8/i4, int64 for i48, bool, float16/32,
    ml_dtypes for bf16/fp8).  Returns the outputs keyed by output tensor name, in graph order.
    Raises :class:`ReferenceModelError` when the model does not report TOSA_VALID.
    """
    _require()
    data = model if isinstance(model, bytes | bytearray) else Path(model).read_bytes()
    graph = from_bytes(bytes(data))
    in_names = [v.name for v in graph.inputs]
    out_names = [v.name for v in graph.outputs]
    if isinstance(inputs, Mapping):
        missing = [n for n in in_names if n not in inputs]
        extra = sorted(set(inputs) - set(in_names))
        if missing or extra:
            raise ToolError(f"input names do not match the graph: missing {missing}, unexpected {extra}")
        arrays = [np.asarray(inputs[n]) for n in in_names]
    else:
        arrays = [np.asarray(a) for a in inputs]
        if len(arrays) != len(in_names):
            raise ToolError(f"graph has {len(in_names)} inputs, {len(arrays)} given")
    arrays = [_fix_input(v.name, v.type.dtype, v.type.static_shape, a) for v, a in zip(graph.inputs, arrays)]
    with tempfile.TemporaryDirectory(prefix="tf2tosa-ref-") as tmp:
        with open(os.path.join(tmp, "model.tosa"), "wb") as f:
            f.write(data)
        entries = [_save(tmp, f"in_{i}.npy", a) for i, a in enumerate(arrays)]
        if precise:
            return _run_reference_cli(tmp, graph, entries, level, timeout)
        options: dict[str, object] = {"precise_mode": int(precise), "tosa_level": level}
        with open(os.path.join(tmp, "request.json"), "w") as f:
            json.dump({"inputs": entries, "options": options}, f)
        log = _worker().request(tmp, timeout)
        result_path = os.path.join(tmp, "result.json")
        if not os.path.exists(result_path):
            err = Path(tmp, "error.txt")
            raise ReferenceModelError("worker error", (err.read_text() if err.exists() else "") + "\n" + log)
        with open(result_path) as f:
            result = json.load(f)
        if result["status"] != "TOSA_VALID":
            raise ReferenceModelError(result["status"], _strip_warnings(log))
        outs = [_load(tmp, e) for e in result["outputs"]]
    if len(outs) != len(out_names):
        raise ToolError(f"reference model returned {len(outs)} outputs, graph has {len(out_names)}")
    return {v.name: _fix_output(v.name, v.type.dtype, v.type.static_shape, a) for v, a in zip(graph.outputs, outs)}


class _Worker:
    """One persistent reference-model interpreter per process (``_tosa_worker.py --serve``): requests go as
    directory names on its stdin; it answers with a marker line on stdout.  A timed-out or dead worker is killed
    and the next request starts a new one."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.lock = threading.Lock()
        self.log = ""

    def _start(self) -> subprocess.Popen[str]:
        self.lines = queue.Queue()
        try:
            proc = subprocess.Popen([str(python_exe()), str(_WORKER), "--serve"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        except OSError as e:
            raise ToolError(f"cannot run {python_exe()}: {e}") from e
        lines = self.lines

        def pump() -> None:
            assert proc.stdout is not None
            with proc.stdout:
                for line in proc.stdout:
                    lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        return proc

    def request(self, directory: str, timeout: float) -> str:
        """Handle one request directory; returns the worker's messages for it."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write(directory + "\n")
                self.proc.stdin.flush()
            except OSError as e:
                self.close()
                raise ToolError(f"the reference-model worker died: {e}") from e
            out: list[str] = []
            marker = f"{_DONE} {directory}"
            while True:
                try:
                    line = self.lines.get(timeout=timeout)
                except queue.Empty:
                    self.close()
                    raise ToolError(f"the reference model timed out after {timeout:.0f}s") from None
                if line is None:
                    self.close()
                    raise ReferenceModelError("worker died", "".join(out))
                if line.strip() == marker:
                    return "".join(out)
                out.append(line)

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            if self.proc.stdin is not None:  # stdout is closed by its reader thread at end of file
                try:
                    self.proc.stdin.close()
                except OSError:  # the flush into a killed worker fails
                    pass
            self.proc = None


_DONE = "@@tf2tosa-done@@"
_WORKER_SINGLETON: _Worker | None = None


def _worker() -> _Worker:
    global _WORKER_SINGLETON
    if _WORKER_SINGLETON is None:
        _WORKER_SINGLETON = _Worker()
        atexit.register(_WORKER_SINGLETON.close)
    return _WORKER_SINGLETON


def _fix_input(name: str, dtype: DType, shape: tuple[int, ...], arr: np.ndarray) -> np.ndarray:
    """Convert an input to the graph's storage type (e.g. float64 -> float32) and check its shape."""
    if tuple(arr.shape) != tuple(shape):
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise ToolError(f"input '{name}' has shape {list(arr.shape)}, the graph expects {list(shape)}")
        arr = arr.reshape(shape)
    want = dtype.np_dtype()
    if arr.dtype != want:
        arr = arr.astype(np.float32).astype(want) if want.name in _ML_DTYPES else arr.astype(want)
    return arr


def _fix_output(name: str, dtype: DType, shape: tuple[int, ...], arr: np.ndarray) -> np.ndarray:
    """Give the reference model's output array the graph's element type and shape."""
    size = int(np.prod(shape, dtype=np.int64))
    if arr.size != size:
        raise ToolError(f"reference model returned {arr.size} elements for output '{name}' ({dtype} "
                        f"{list(shape)}); its Python API cannot return {dtype} outputs")
    want = dtype.np_dtype()
    if arr.dtype != want:
        if arr.dtype.kind in "uV" and arr.dtype.itemsize == want.itemsize and dtype.is_float:
            arr = np.ascontiguousarray(arr).view(want)  # raw bf16/fp8 bit patterns
        else:
            arr = arr.astype(want)
    return arr.reshape(shape)


def _run_reference_cli(tmp: str, graph: Graph, entries: list[dict[str, str | None]], level: str, timeout: float
                       ) -> dict[str, np.ndarray]:
    """Precise mode (fp64) through the ``tosa_reference_model`` command: its Python API returns no fp64 outputs."""
    exe = _bundled("tosa_reference_model")
    outs = [f"out_{i}.npy" for i in range(len(graph.outputs))]
    cmd = [str(exe), "--tosa_file", os.path.join(tmp, "model.tosa"), "--output_dir", tmp, "--precise_mode", "1",
           "--tosa_level", {"NONE": "NONE", "8K": "EIGHTK"}.get(level.upper(), level),
           "--ifm_name", ",".join(v.name for v in graph.inputs),
           "--ifm_file", ",".join(os.path.join(tmp, f"in_{i}.npy") for i in range(len(graph.inputs))),
           "--ofm_name", ",".join(v.name for v in graph.outputs), "--ofm_file", ",".join(outs)]
    proc = _run(cmd, timeout)
    missing = [o for o in outs if not os.path.exists(os.path.join(tmp, o))]
    if proc.returncode != 0 or missing:
        raise ReferenceModelError(f"exit code {proc.returncode}", _strip_warnings(proc.stderr + proc.stdout))
    return {v.name: np.load(os.path.join(tmp, o)).reshape(v.type.static_shape) for v, o in zip(graph.outputs, outs)}
