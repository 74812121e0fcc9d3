"""IREE as a second runtime for our TOSA programs: compile the ``.mlir`` text, run it on the CPU.

IREE (``iree-base-compiler`` / ``iree-base-runtime``, the ``[iree]`` extra) compiles TOSA-dialect MLIR
(``--iree-input-type=tosa``) for its ``llvm-cpu`` backend; the runtime runs the ``.vmfb`` module it writes.
The text compiled is exactly what ``tf2tosa convert --mlir`` writes (:func:`tf2tosa.serializer.to_mlir`, the
generic syntax), so this also checks that IREE takes our output unchanged.

Compiled modules are cached by content: the sha256 of the MLIR text, the compiler version and the compile
flags names ``<cache>/<hash>.vmfb``, where ``<cache>`` is ``$TF2TOSA_IREE_CACHE`` or
``$XDG_CACHE_HOME/tf2tosa/iree`` (``~/.cache/tf2tosa/iree``).  A cache entry is written atomically.

The embedded executor stays the oracle: ``verify --backend iree`` compares IREE with it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConversionError
from ..ir.graph import Graph
from ..serializer.mlir import to_mlir

CACHE_ENV = "TF2TOSA_IREE_CACHE"
#: flags of every compile (the cache key includes them): TOSA input, the CPU backend for a generic x86-64/aarch64
#: CPU (so a cached module runs on any machine of the architecture)
COMPILE_FLAGS = ("--iree-input-type=tosa", "--iree-hal-target-device=local",
                 "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=generic")
#: the IREE runtime driver the modules run on
DRIVER = "local-task"


class IreeError(ConversionError):
    """IREE is missing, or could not compile or run a program."""


def available() -> bool:
    """Whether the IREE compiler and runtime Python packages are installed."""
    try:
        import iree.compiler  # noqa: F401
        import iree.runtime  # noqa: F401
    except ImportError:
        return False
    return True


def _require() -> None:
    if not available():
        raise IreeError("the IREE backend needs iree-base-compiler and iree-base-runtime: "
                        "pip install 'tf2tosa[iree]'")


def compiler_version() -> str:
    _require()
    from iree.compiler import version

    return str(getattr(version, "VERSION", "unknown"))


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tf2tosa" / "iree"


def cache_key(mlir: str) -> str:
    """sha256 of the MLIR text, the compiler version and the compile flags."""
    h = hashlib.sha256()
    for part in (compiler_version(), *COMPILE_FLAGS, mlir):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def compile_mlir(mlir: str, *, name: str = "model", use_cache: bool = True) -> bytes:
    """The ``.vmfb`` module IREE compiles from TOSA-dialect MLIR text (from the cache when it holds it).

    Raises :class:`IreeError` with IREE's first error line (and ``name``) when the text does not compile."""
    _require()
    path = cache_dir() / f"{cache_key(mlir)}.vmfb"
    if use_cache and path.is_file():
        return path.read_bytes()
    from iree.compiler.tools import CompilerToolError, compile_str

    try:
        vmfb = compile_str(mlir, extra_args=list(COMPILE_FLAGS))
    except CompilerToolError as e:
        lines = [ln for ln in str(e).splitlines() if "error:" in ln]
        raise IreeError(f"{name}: IREE could not compile the MLIR: {lines[0].strip() if lines else e}") from None
    assert isinstance(vmfb, bytes)
    if use_cache:
        try:
            cache_write(path, vmfb)
        except OSError:
            pass  # a cache that cannot be written only costs the next compile
    return vmfb


def cache_write(path: Path, data: bytes) -> None:
    """Write a cache entry through a temporary file in its folder and a rename (the temporary file is removed when
    the write fails); raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.suffix.lstrip('.') or 'cache'}-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class IreeProgram:
    """A compiled program, callable many times (one IREE context; EXT-VARIABLE state carries across calls)."""

    def __init__(self, graph: Graph, *, name: str = "model", use_cache: bool = True) -> None:
        import iree.runtime as rt

        self.graph = graph
        self.name = name
        self.vmfb = compile_mlir(to_mlir(graph), name=name, use_cache=use_cache)
        config = rt.Config(DRIVER)
        self._ctx = rt.SystemContext(config=config)
        self._ctx.add_vm_module(rt.VmModule.copy_buffer(self._ctx.instance, self.vmfb))
        self._main = self._ctx.modules.module["main"]

    def __call__(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        g = self.graph
        args = storage_arrays(g, inputs, self.name, IreeError)
        try:
            res: Any = self._main(*args)
        except Exception as e:  # the runtime raises plain RuntimeError/ValueError
            raise IreeError(f"{self.name}: IREE could not run the program: {str(e).splitlines()[0]}") from None
        outs = list(res) if isinstance(res, tuple | list) else [res]
        return {v.name: np.asarray(o.to_host() if hasattr(o, "to_host") else o).reshape(v.type.static_shape)
                for v, o in zip(g.outputs, outs)}


def storage_dtype(v: Any) -> Any:
    """The numpy dtype a backend takes graph input/output ``v`` in."""
    return v.type.dtype.np_dtype()


def storage_arrays(graph: Graph, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray], name: str,
                   error: type[ConversionError]) -> list[np.ndarray]:
    """``inputs`` (by graph-input name, or a list in graph-input order) as contiguous arrays of each input's static
    shape and storage dtype, in graph-input order; a missing name or a wrong count is one ``error``."""
    if isinstance(inputs, Mapping):
        try:
            arrays = [np.asarray(inputs[v.name]) for v in graph.inputs]
        except KeyError as e:
            raise error(f"{name}: no value for input {e.args[0]!r}") from None
    else:
        arrays = [np.asarray(a) for a in inputs]
        if len(arrays) != len(graph.inputs):
            raise error(f"{name}: {len(arrays)} input arrays for {len(graph.inputs)} inputs")
    return [np.ascontiguousarray(a.reshape(v.type.static_shape).astype(storage_dtype(v), copy=False))
            for a, v in zip(arrays, graph.inputs)]


#: float outputs agree when max|IREE - executor| <= FLOAT_TOLERANCE * max|executor|
FLOAT_TOLERANCE = 1e-5


def agreement(graph: Graph, ours: Mapping[str, np.ndarray], theirs: Mapping[str, np.ndarray],
              fp64: Mapping[str, np.ndarray] | None = None) -> list[dict[str, Any]]:
    """Per output: integer/bool outputs bit-exact (``mismatches``); float outputs within :data:`FLOAT_TOLERANCE`
    × max|ours| of the executor (``max_abs_err``, ``bound``).

    With ``fp64`` (the executor's float64 run of the same inputs) a float output that misses the bound still
    agrees when IREE is no farther from the float64 result than the executor is (``fp64_err`` of each, plus
    the bound): the difference is then the executor's own float32 rounding, not IREE's.  ``ok`` says whether
    the output agrees."""
    rows = []
    for v in graph.outputs:
        a = np.asarray(ours[v.name])
        b = np.asarray(theirs[v.name]).reshape(a.shape)
        if v.type.dtype.is_float:
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            finite = np.isfinite(a64)
            same_nonfinite = bool(np.array_equal(a64[~finite], b64[~finite], equal_nan=True))
            err = float(np.abs(a64[finite] - b64[finite]).max()) if finite.any() else 0.0
            bound = FLOAT_TOLERANCE * (float(np.abs(a64[finite]).max()) if finite.any() else 0.0)
            row: dict[str, Any] = {"name": v.name, "dtype": v.type.dtype.value, "mismatches": None,
                                   "max_abs_err": err, "bound": bound, "ok": same_nonfinite and err <= bound}
            if fp64 is not None and same_nonfinite and finite.any():
                r64 = np.asarray(fp64[v.name], np.float64).reshape(a.shape)[finite]
                ours_err = float(np.abs(a64[finite] - r64).max())
                theirs_err = float(np.abs(b64[finite] - r64).max())
                row["fp64_err"] = {"executor": ours_err, "iree": theirs_err}
                row["ok"] = row["ok"] or theirs_err <= ours_err + bound
            rows.append(row)
        else:
            n = int(np.count_nonzero(a != b))
            rows.append({"name": v.name, "dtype": v.type.dtype.value, "mismatches": n, "max_abs_err": None,
                         "bound": None, "ok": n == 0})
    return rows


def run(graph: Graph, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray], *, name: str = "model",
        use_cache: bool = True) -> dict[str, np.ndarray]:
    """Compile ``graph`` with IREE (cached) and run it once on ``inputs``."""
    return IreeProgram(graph, name=name, use_cache=use_cache)(inputs)


__all__ = ["CACHE_ENV", "COMPILE_FLAGS", "FLOAT_TOLERANCE", "IreeError", "IreeProgram", "agreement", "available",
           "cache_dir", "compile_mlir", "run"]
