"""Arm's ML SDK for Vulkan as a runtime for our TOSA programs: convert the ``.tosa`` to a VGF, run it on a Vulkan
device.

The SDK (``requirements-vgf.txt``, in its own environment ``.venv-vgf`` as Vela's is) brings three tools:
``model-converter`` turns the TOSA 1.0 flatbuffer that ``tf2tosa convert`` writes, unchanged, into a VGF (the
Vulkan Graph Format); ``vgf_dump`` describes a VGF (its inputs, outputs and bindings, as a scenario template);
``scenario_runner`` runs a VGF from a JSON scenario on a device with the ``VK_ARM_tensors`` and
``VK_ARM_data_graph`` extensions.  It is found in ``$TF2TOSA_VGF_SDK`` (a folder: an environment or its ``bin``;
only there when set), else in the checkout's ``.venv-vgf``, else on ``PATH``.

The device is a native Vulkan driver exposing both extensions when ``vulkaninfo`` shows one; otherwise the SDK's
emulation layers over Mesa's lavapipe (a CPU device; ``apt-get install mesa-vulkan-drivers libvulkan1``).  The
Vulkan loader takes the two layers only when each manifest sits in its own folder and the graph layer's folder
comes first in ``VK_LAYER_PATH`` (it ignores the order of ``VK_INSTANCE_LAYERS``), so this module writes that
set-up itself, in a private folder of the cache, and gives it to the runner's process alone: a user never sets a
``VK_*`` variable.

The VGF names its tensors ``input_0…``/``output_0…`` in argument order: our inputs and outputs are bound by
position, and each binding's shape and element format are checked against our program before it runs.

Converted VGFs are cached by content: the sha256 of the ``.tosa`` bytes and the converter's version and flags
names ``<cache>/<hash>.vgf``, where ``<cache>`` is ``$TF2TOSA_VGF_CACHE`` or ``$XDG_CACHE_HOME/tf2tosa/vgf``
(``~/.cache/tf2tosa/vgf``).  A cache entry is written atomically.

The embedded executor stays the oracle: ``verify --backend vgf`` compares the device with it
(:func:`agreement`, the IREE backend's rule).  EXT-VARIABLE state does not carry across runs (the model converter
refuses variables; ``--state-io`` makes them inputs and outputs).
"""

from __future__ import annotations

import ctypes.util
import functools
import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConversionError
from ..ir.graph import Graph
from . import iree
from .rounding import fp32_bound

SDK_ENV = "TF2TOSA_VGF_SDK"
CACHE_ENV = "TF2TOSA_VGF_CACHE"
#: flags of every conversion (the cache key includes them): none, the converter's defaults
CONVERT_FLAGS: tuple[str, ...] = ()
#: the two extensions a device needs, natively or from the emulation layers
EXTENSIONS = ("VK_ARM_tensors", "VK_ARM_data_graph")
#: the emulation layers, in the order the loader must find them (the graph layer over the tensor layer)
LAYERS = (("graph", "VkLayer_Graph.json", "VK_LAYER_ML_Graph_Emulation"),
          ("tensor", "VkLayer_Tensor.json", "VK_LAYER_ML_Tensor_Emulation"))
#: the signals of a crash (a runner that exits with 256 or 128 minus one of these crashed)
_CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL})
#: how long one scenario may run, seconds
RUN_TIMEOUT = 1800.0
INSTALL_HINT = ("the VGF backend needs Arm's ML SDK for Vulkan and a Vulkan device: run `make vgf` (pip install -r "
                "requirements-vgf.txt into .venv-vgf, or point TF2TOSA_VGF_SDK at an environment holding it; "
                "apt-get install mesa-vulkan-drivers libvulkan1)")
_ROOT = Path(__file__).resolve().parents[2]
#: our element types → the Vulkan tensor formats the VGF may bind them as (unsigned: the same bytes read as unsigned)
_FORMATS = {"fp32": ("VK_FORMAT_R32_SFLOAT",), "fp16": ("VK_FORMAT_R16_SFLOAT",), "bool": ("VK_FORMAT_R8_BOOL_ARM",),
            "i8": ("VK_FORMAT_R8_SINT", "VK_FORMAT_R8_UINT"), "i16": ("VK_FORMAT_R16_SINT", "VK_FORMAT_R16_UINT"),
            "i32": ("VK_FORMAT_R32_SINT", "VK_FORMAT_R32_UINT"), "i64": ("VK_FORMAT_R64_SINT", "VK_FORMAT_R64_UINT")}
#: the numpy type of a Vulkan format's .npy file (the runner reads and writes the format's own type; a TOSA i8 input
#: that only an unsigned RESCALE reads is bound as R8_UINT: the same bytes)
_NPY = {"VK_FORMAT_R8_UINT": np.uint8, "VK_FORMAT_R16_UINT": np.uint16, "VK_FORMAT_R32_UINT": np.uint32,
        "VK_FORMAT_R64_UINT": np.uint64, "VK_FORMAT_R8_BOOL_ARM": np.uint8}


class VgfError(ConversionError):
    """The ML SDK for Vulkan or a Vulkan device is missing, or the SDK could not convert or run a program."""


# --------------------------------------------------------------------------------------------------- locating
@dataclass(frozen=True)
class Sdk:
    """The SDK's three tools, and the emulation layers' ``deploy`` folder (None when not installed)."""

    converter: Path
    dump: Path
    runner: Path
    layers: Path | None


def _tool_dirs() -> list[Path]:
    env = os.environ.get(SDK_ENV)
    if env is not None:
        return [Path(env) / "bin", Path(env)]
    return [_ROOT / ".venv-vgf" / "bin"]


def _find_tool(name: str, dirs: list[Path]) -> Path | None:
    for d in dirs:
        p = d / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    if os.environ.get(SDK_ENV) is None:
        found = shutil.which(name)
        if found:
            return Path(found)
    return None


def _layers_for(tool: Path) -> Path | None:
    """The emulation layers' ``deploy`` folder of the environment a tool is in."""
    env = tool.resolve().parent.parent
    for site in sorted(glob.glob(str(env / "lib" / "python3*" / "site-packages"))):
        deploy = Path(site) / "emulation_layer" / "deploy"
        if all((deploy / "share" / "vulkan" / "explicit_layer.d" / m).is_file() for _, m, _ in LAYERS):
            return deploy
    return None


def find_sdk() -> Sdk | None:
    """The SDK: ``$TF2TOSA_VGF_SDK`` (only there when set), else ``.venv-vgf``, else ``PATH``; None if absent."""
    dirs = _tool_dirs()
    tools = [_find_tool(n, dirs) for n in ("model-converter", "vgf_dump", "scenario_runner")]
    if any(t is None for t in tools):
        return None
    conv, dump, runner = (t for t in tools if t is not None)
    return Sdk(conv, dump, runner, _layers_for(runner))


@dataclass(frozen=True)
class Device:
    """Where a scenario runs: ``"native"`` (a driver with both extensions) or ``"emulation"`` (the SDK's layers
    over lavapipe), and the environment variables the runner's process gets for it."""

    kind: str
    env: Mapping[str, str]


def _lavapipe_icd() -> Path | None:
    for d in ("/usr/share/vulkan/icd.d", "/usr/local/share/vulkan/icd.d", "/etc/vulkan/icd.d"):
        found = sorted(glob.glob(os.path.join(d, "lvp_icd*.json")))
        if found:
            return Path(found[0])
    return None


def _clean_env() -> dict[str, str]:
    """The environment without any Vulkan loader variable a user may have set."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("VK_", "VULKAN_"))}


@functools.lru_cache(maxsize=1)
def _native_device() -> bool:
    """Whether ``vulkaninfo`` shows a device with both extensions of its own (no layers)."""
    exe = shutil.which("vulkaninfo")
    if exe is None:
        return False
    try:
        proc = subprocess.run([exe], capture_output=True, text=True, timeout=60, env=_clean_env())
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0 and all(e in proc.stdout for e in EXTENSIONS)


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tf2tosa" / "vgf"


def _layer_setup(deploy: Path) -> list[Path]:
    """The private layer folders (graph first): each manifest alone in its folder, naming its library by its
    absolute path.  Written once per SDK location and content, under the cache."""
    src = deploy / "share" / "vulkan" / "explicit_layer.d"
    manifests = []
    for _, name, _ in LAYERS:
        doc = json.loads((src / name).read_text())
        lib = Path(doc["layer"]["library_path"])
        if not lib.is_absolute():
            lib = deploy / "lib" / lib.name
        doc["layer"]["library_path"] = str(lib)
        manifests.append((name, json.dumps(doc, indent=2, sort_keys=True).encode()))
    key = hashlib.sha256(b"\0".join(m for _, m in manifests)).hexdigest()[:16]
    base = cache_dir() / "vulkan-layers" / key
    folders = []
    for (sub, _, _), (name, text) in zip(LAYERS, manifests):
        path = base / sub / name
        if not path.is_file() or path.read_bytes() != text:
            iree.cache_write(path, text)
        folders.append(path.parent)
    return folders


def find_device(sdk: Sdk) -> Device | None:
    """A native device with both extensions, else the emulation layers over lavapipe; None when neither is there
    (no Vulkan loader, or no lavapipe or layers)."""
    if ctypes.util.find_library("vulkan") is None:
        return None
    env = _clean_env()
    if _native_device():
        return Device("native", env)
    icd = _lavapipe_icd()
    if icd is None or sdk.layers is None:
        return None
    try:
        folders = _layer_setup(sdk.layers)
    except OSError as e:
        raise VgfError(f"cannot write the Vulkan layer set-up under {cache_dir()}: {e.strerror or e}") from None
    env.update({"VK_LAYER_PATH": os.pathsep.join(str(f) for f in folders),
                "VK_INSTANCE_LAYERS": ":".join(layer for _, _, layer in LAYERS),
                "VK_ICD_FILENAMES": str(icd), "VK_DRIVER_FILES": str(icd)})
    return Device("emulation", env)


def available() -> bool:
    """Whether the SDK and a Vulkan device to run it on are there."""
    sdk = find_sdk()
    return sdk is not None and find_device(sdk) is not None


def require_sdk() -> Sdk:
    """The SDK, or :class:`VgfError` (one line saying what to install)."""
    sdk = find_sdk()
    if sdk is None:
        raise VgfError(INSTALL_HINT)
    return sdk


def require() -> tuple[Sdk, Device]:
    """The SDK and a device, or :class:`VgfError` (one line saying what to install)."""
    sdk = require_sdk()
    device = find_device(sdk)
    if device is None:
        raise VgfError(INSTALL_HINT)
    return sdk, device


# --------------------------------------------------------------------------------------------------- converting
@functools.lru_cache(maxsize=4)
def _converter_version(converter: Path) -> str:
    try:
        proc = subprocess.run([str(converter), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise VgfError(f"cannot run {converter}: {e}") from None
    return proc.stdout.strip()


def cache_key(tosa: bytes, sdk: Sdk | None = None) -> str:
    """sha256 of the converter's version, its flags and the ``.tosa`` bytes."""
    sdk = sdk or require_sdk()
    h = hashlib.sha256()
    for part in (_converter_version(sdk.converter).encode(), *(f.encode() for f in CONVERT_FLAGS), tosa):
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower():
            return ln
    return lines[-1] if lines else "no message"


def convert_tosa(tosa: bytes, *, name: str = "model", use_cache: bool = True) -> bytes:
    """The VGF the model converter makes of a TOSA 1.0 flatbuffer (from the cache when it holds it).

    Raises :class:`VgfError` with the converter's first error line (and ``name``) when it refuses the program."""
    sdk = require_sdk()
    path = cache_dir() / f"{cache_key(tosa, sdk)}.vgf"
    if use_cache and path.is_file():
        return path.read_bytes()
    with tempfile.TemporaryDirectory(prefix="tf2tosa-vgf-") as d:
        src, dst = Path(d) / "model.tosa", Path(d) / "model.vgf"
        src.write_bytes(tosa)
        try:
            proc = subprocess.run([str(sdk.converter), *CONVERT_FLAGS, "-i", str(src), "-o", str(dst)],
                                  capture_output=True, text=True, timeout=RUN_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as e:
            raise VgfError(f"{name}: cannot run the model converter: {e}") from None
        if proc.returncode != 0 or not dst.is_file():
            raise VgfError(f"{name}: the model converter refused the program: "
                           f"{_first_error(proc.stderr + proc.stdout)}") from None
        vgf = dst.read_bytes()
    if use_cache:
        try:
            iree.cache_write(path, vgf)
        except OSError:
            pass  # a cache that cannot be written only costs the next conversion
    return vgf


def to_vgf(graph: Graph, *, name: str = "model", use_cache: bool = True) -> bytes:
    """The VGF of ``graph`` (its ``.tosa`` bytes through :func:`convert_tosa`)."""
    from ..serializer import to_bytes

    return convert_tosa(to_bytes(graph), name=name, use_cache=use_cache)


# --------------------------------------------------------------------------------------------------- running
def _tensor_resources(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["tensor"]["uid"]: r["tensor"] for r in template.get("resources", []) if "tensor" in r}


class VgfProgram:
    """A converted program, bound to our inputs and outputs by position and checked; each call runs one scenario
    on the device (a fresh session: no state carries across calls)."""

    def __init__(self, graph: Graph, *, name: str = "model", use_cache: bool = True) -> None:
        self.sdk, self.device = require()
        self.graph = graph
        self.name = name
        for v in (*graph.inputs, *graph.outputs):
            if not v.type.is_static:
                raise VgfError(f"{name}: the VGF backend runs static programs; {v.name!r} has shape "
                               f"{v.type}", tensor=v.name)
        self.vgf = to_vgf(graph, name=name, use_cache=use_cache)
        self._dir = tempfile.TemporaryDirectory(prefix="tf2tosa-vgf-run-")
        self.work = Path(self._dir.name)
        (self.work / "model.vgf").write_bytes(self.vgf)
        self.template = self._template()
        self._bind()

    def _dump(self, *args: str) -> dict[str, Any]:
        out = self.work / "dump.json"
        proc = subprocess.run([str(self.sdk.dump), "-i", str(self.work / "model.vgf"), "-o", str(out), *args],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0 or not out.is_file():
            raise VgfError(f"{self.name}: vgf_dump could not read the VGF: {_first_error(proc.stderr + proc.stdout)}")
        doc: dict[str, Any] = json.loads(out.read_text())
        out.unlink()
        return doc

    def _template(self) -> dict[str, Any]:
        return self._dump("--scenario-template")

    def _bind(self) -> None:
        """Check that the VGF's ``input_i``/``output_i`` are our i-th input/output: same count, shape, format."""
        seq = self._dump().get("model_sequence", {})
        tensors = _tensor_resources(self.template)
        self.bindings: dict[str, str] = {}  # our name -> the scenario resource uid
        self.formats: dict[str, str] = {}  # our name -> the Vulkan format it is bound as
        for kind, ours in (("input", self.graph.inputs), ("output", self.graph.outputs)):
            theirs = sorted(seq.get(f"{kind}s", []), key=lambda e: int(e["index"]))
            if [e["name"] for e in theirs] != [f"{kind}_{i}" for i in range(len(ours))]:
                raise VgfError(f"{self.name}: the VGF has {kind}s {[e['name'] for e in theirs]}, our program "
                               f"{len(ours)} ({', '.join(v.name for v in ours)})")
            for i, v in enumerate(ours):
                uid = f"{kind}_{i}_ref"
                t = tensors.get(uid)
                want = _FORMATS.get(v.type.dtype.value)
                dims = [int(d) for d in t["dims"]] if t is not None else None
                if t is None or dims != list(v.type.static_shape) or (want is not None and t["format"] not in want):
                    got = "nothing" if t is None else f"{dims} {t['format']}"
                    raise VgfError(f"{self.name}: the VGF's {kind}_{i} ({got}) is not our {kind} {v.name!r} "
                                   f"({list(v.type.static_shape)} {' or '.join(want or ('?',))})", tensor=v.name)
                self.bindings[v.name] = uid
                self.formats[v.name] = str(t["format"])

    def scenario(self, inputs: Mapping[str, str], outputs: Mapping[str, str]) -> dict[str, Any]:
        """The scenario JSON: the template with our input files (by our name) and output files filled in."""
        doc = json.loads(json.dumps(self.template))
        for cmd in doc.get("commands", []):
            if "dispatch_graph" in cmd:  # the template's name is deprecated in the 0.11 runner
                cmd["dispatch_vgf"] = cmd.pop("dispatch_graph")
        uid_to_name = {uid: n for n, uid in self.bindings.items()}
        for r in doc.get("resources", []):
            if "graph" in r:
                r["graph"]["src"] = str(self.work / "model.vgf")
            elif "tensor" in r:
                t = r["tensor"]
                n = uid_to_name.get(t["uid"])
                if n is None:
                    continue
                if "src" in t:
                    t["src"] = inputs[n]
                if "dst" in t:
                    t["dst"] = outputs[n]
        return doc

    def _command(self, scenario: Path, repeat: int = 1) -> list[str]:
        cmd = [str(self.sdk.runner), "--scenario", str(scenario), "--output", str(scenario.parent),
               "--log-level", "error"]
        return cmd + (["--repeat", str(repeat)] if repeat > 1 else [])

    def __call__(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray], *,
                 repeat: int = 1) -> dict[str, np.ndarray]:
        g = self.graph
        arrays = iree.storage_arrays(g, inputs, self.name, VgfError)
        with tempfile.TemporaryDirectory(prefix="run-", dir=self.work) as d:
            ins, outs = {}, {}
            for i, (a, v) in enumerate(zip(arrays, g.inputs)):
                path = Path(d) / f"in{i}.npy"
                np.save(path, a.view(_NPY.get(self.formats[v.name], a.dtype)))
                ins[v.name] = str(path)
            for i, v in enumerate(g.outputs):
                outs[v.name] = str(Path(d) / f"out{i}.npy")
            scen = Path(d) / "scenario.json"
            scen.write_text(json.dumps(self.scenario(ins, outs), indent=1))
            try:
                proc = subprocess.run(self._command(scen, repeat), capture_output=True, text=True,
                                      timeout=RUN_TIMEOUT, env=dict(self.device.env), cwd=d)
            except subprocess.TimeoutExpired:
                raise VgfError(f"{self.name}: the scenario runner did not finish in {RUN_TIMEOUT:.0f}s") from None
            except OSError as e:
                raise VgfError(f"{self.name}: cannot run the scenario runner: {e}") from None
            crash = _crash_signal(proc.returncode)
            if crash is not None:
                raise VgfError(f"{self.name}: the scenario runner crashed ({crash}) on the {self.device.kind} device")
            missing = [n for n, p in outs.items() if not os.path.isfile(p)]
            if proc.returncode != 0 or missing:
                raise VgfError(f"{self.name}: the scenario runner failed on the {self.device.kind} device: "
                               f"{_first_error(proc.stderr + proc.stdout)}")
            return {v.name: _read_output(outs[v.name], v) for v in g.outputs}

    def close(self) -> None:
        self._dir.cleanup()


def _crash_signal(code: int) -> str | None:
    """The signal a process was killed by, or that its exit status encodes (the runner returns ``-SIGSEGV`` from a
    crash, status 245; a shell reports 128 + n); None for a plain exit status."""
    if code < 0:
        n = -code
    elif code > 128 and code - 128 in _CRASH_SIGNALS:
        n = code - 128
    elif code > 128 and 256 - code in _CRASH_SIGNALS:
        n = 256 - code
    else:
        return None
    try:
        name = signal.Signals(n).name
    except ValueError:
        name = f"signal {n}"
    return f"{name}, exit status {code}"


def _read_output(path: str, v: Any) -> np.ndarray:
    a = np.load(path)
    want = np.dtype(iree.storage_dtype(v))
    if a.dtype != want:
        a = a.view(want) if a.dtype.itemsize == want.itemsize else a.astype(want)
    return np.asarray(a).reshape(v.type.static_shape)


def agreement(graph: Graph, ours: Mapping[str, np.ndarray], theirs: Mapping[str, np.ndarray],
              fp64: Mapping[str, np.ndarray] | None = None) -> list[dict[str, Any]]:
    """Per output, the IREE backend's rule (:func:`tf2tosa.verify.iree.agreement`): integers bit-exact, floats
    within 1e-5 × max|executor| or no farther from the float64 result than the executor.  With ``fp64`` a float
    output also agrees within the test suite's derived bound for an independent fp32 implementation
    (:func:`tf2tosa.verify.rounding.fp32_bound` of the executor's fp32 and fp64 results, ``derived_bound``): the
    device's distance from the float64 result, ``fp64_err["vgf"]``, at most that."""
    rows = iree.agreement(graph, ours, theirs, fp64)
    for r, v in zip(rows, graph.outputs):
        if "fp64_err" not in r:
            continue
        r["fp64_err"] = {"executor": r["fp64_err"]["executor"], "vgf": r["fp64_err"]["iree"]}
        if fp64 is not None:
            bound = fp32_bound(np.asarray(ours[v.name]), np.asarray(fp64[v.name]), v.type.dtype)
            r["derived_bound"] = bound
            r["ok"] = r["ok"] or r["fp64_err"]["vgf"] <= bound
    return rows


def run(graph: Graph, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray], *, name: str = "model",
        use_cache: bool = True) -> dict[str, np.ndarray]:
    """Convert ``graph`` to a VGF (cached) and run it once on ``inputs`` on the Vulkan device."""
    prog = VgfProgram(graph, name=name, use_cache=use_cache)
    try:
        return prog(inputs)
    finally:
        prog.close()


__all__ = ["CACHE_ENV", "SDK_ENV", "Device", "Sdk", "VgfError", "VgfProgram", "agreement", "available",
           "cache_dir", "cache_key", "convert_tosa", "find_device", "find_sdk", "require", "require_sdk", "run",
           "to_vgf"]
