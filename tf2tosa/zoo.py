"""The model-zoo regression run: build → convert → validate → run (executor, Arm reference model) → compare.

For every selected model variant of :mod:`models.zoo` (the synthetic registry plus the real ``.tflite`` models
cached in ``.cache/real_models``):

1. build the ``.tflite`` (or take it from the cache);
2. convert it with :func:`tf2tosa.convert` (timed);
3. validate the ``.tosa`` with ``tosa-opt --tosa-validate`` (:func:`.verify.tosa_tools.validate`);
4. run it in our executor and in the Arm reference model (precise fp64 mode for float graphs) and compare them;
5. compare with LiteRT on seeded inputs: integer variants against the reference kernels (BUILTIN_REF), where the
   mismatch count must be 0, as ``tf2tosa verify`` does (how far the optimized kernels differ goes into the notes,
   for information); float variants against the default kernels, max relative error within 1e-4;
6. compare layer by layer (:mod:`.verify.layers`), which names the first diverging layer of a failure.

Every variant ends with a status (``PASS``, ``FAIL``, ``INVALID``, ``UNSUPPORTED``, ``ERROR``, ``SKIP``,
``XFAIL``/``XPASS`` for known gaps) and a one-line reason for anything but a pass.  Models run in parallel worker
processes (``jobs``), or one job per model variant on a Dask distributed cluster (``cluster``, the ``[cluster]``
extra); results go to ``zoo.json``, ``zoo.md`` and ``zoo.html`` (:mod:`.verify.report`).
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import importlib
import importlib.machinery
import importlib.util
import logging
import os
import re
import socket
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import executor
from .api import convert
from .errors import ConversionError, InputError, MissingExtraError, UnsupportedOpsError
from .ir import Graph
from .verify import tosa_tools
from .verify.compare import FP64, judge
from .verify.layers import compare_layers
from .verify.litert import LiteRTError, model_op_names

REPO = Path(__file__).resolve().parents[1]
FLOAT_RTOL = 1e-4  # executor vs LiteRT, relative to max |reference|
REF_RTOL = 1e-6  # executor vs Arm reference model, both in fp64 (precise mode)
DEFAULT_REPORT_DIR = REPO / "out" / "zoo"
FAILING = ("FAIL", "INVALID", "UNSUPPORTED", "ERROR")


MODELS_ENV = "TF2TOSA_MODELS"  # the folder holding the ``models`` package (``tf2tosa zoo --models``)


def _models_module() -> Any:
    """``models.zoo``, the model definitions: importable as is when ``models`` is (a run from a checkout's root),
    else loaded from the folder holding ``models/``, ``$TF2TOSA_MODELS`` (set by ``tf2tosa zoo --models``) or by
    default the checkout beside ``tf2tosa``, without adding it to ``sys.path`` (so an installed wheel only needs
    the definitions' folder)."""
    root = os.environ.get(MODELS_ENV)
    if root is None:
        try:
            return importlib.import_module("models.zoo")
        except ModuleNotFoundError:
            root = str(REPO)
    if "models" not in sys.modules:
        spec = importlib.machinery.PathFinder.find_spec("models", [root])
        if spec is None or spec.loader is None:
            raise InputError(f"no model definitions (a models/ package) in {root}: pass --models DIR, a tf2tosa "
                             "checkout")
        module = importlib.util.module_from_spec(spec)
        sys.modules["models"] = module
        spec.loader.exec_module(module)
    return importlib.import_module("models.zoo")


@dataclass
class VariantResult:
    """The outcome of one model variant (stored as a dict in ``zoo.json``)."""

    model: str
    family: str
    variant: str
    status: str = "ERROR"
    reason: str = ""
    description: str = ""
    integer: bool = False
    params: int | None = None
    cached: bool = False
    build_s: float | None = None
    converted: bool = False
    convert_s: float | None = None
    ops: int | None = None
    tflite_ops: int | None = None
    op_counts: dict[str, int] = field(default_factory=dict)
    profiles: list[str] = field(default_factory=list)
    extensions: list[str] = field(default_factory=list)
    validated: bool | None = None
    compared: bool = False
    litert_ok: bool | None = None
    int_outputs: bool = False
    max_rel: float | None = None
    max_abs: float | None = None
    mismatches: int | None = None
    elements: int | None = None
    run_s: float | None = None
    ref_ok: bool | None = None
    ref_rel: float | None = None
    ref_mismatches: int | None = None
    layers: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.model}/{self.variant}"


# ------------------------------------------------------------------------------------------------ selection
def _matches(pattern: str, mdef: Any, variant: str) -> bool:
    key = f"{mdef.name}/{variant}"
    cands = (key, mdef.name, mdef.family, variant)
    if any(ch in pattern for ch in "*?["):
        return any(fnmatch.fnmatchcase(c, pattern) for c in cands)
    if "/" in pattern:
        name, _, var = pattern.partition("/")
        return (name in ("", mdef.name)) and (var in ("", variant))
    return pattern in cands or pattern in mdef.name


def select(filter: str | None = None, include_real: bool = True) -> list[tuple[Any, list[str]]]:
    """The (ModelDef, variants) pairs a filter selects, in registry order.

    ``filter`` is a comma-separated list of patterns; a variant is selected when any pattern matches its
    ``model/variant`` key, its model name, family or variant name (shell wildcards), or is a substring of the
    model name (``mobilenet``), or names ``model/variant`` exactly (either side may be empty: ``/int8``).
    Patterns starting with ``!`` exclude.
    """
    zoo = _models_module()
    pats = [p.strip() for p in (filter or "").split(",") if p.strip()]
    inc = [p for p in pats if not p.startswith("!")]
    exc = [p[1:] for p in pats if p.startswith("!")]
    out = []
    for mdef in zoo.all_models(include_real=include_real).values():
        vs = [v for v in mdef.variants
              if (not inc or any(_matches(p, mdef, v) for p in inc)) and not any(_matches(p, mdef, v) for p in exc)]
        if vs:
            out.append((mdef, vs))
    return out


# ------------------------------------------------------------------------------------------------ inputs
def _spec_for(v: Any, specs: Sequence[Any], i: int) -> Any:
    src = v.source or v.name
    for s in specs:
        if src in (s.name, f"serving_default_{s.name}:0"):
            return s
    hits = [s for s in specs if s.name in src]
    if len(hits) == 1:
        return hits[0]
    return specs[i] if i < len(specs) else None


def make_inputs(graph: Graph, specs: Sequence[Any], seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs keyed by TOSA input name.  Float specs are drawn from their range and quantized with the input's
    parameters for integer inputs; integer specs (token ids) are integers in their range.  Inputs without a spec
    (real models) are uniform [-1, 1] for floats and cover the whole range of 8/16-bit integers."""
    from .ir import DType

    rng = np.random.default_rng(seed)
    unsigned = graph.unsigned_io
    out: dict[str, np.ndarray] = {}
    for i, v in enumerate(graph.inputs):
        spec = _spec_for(v, specs, i)
        shape = v.type.static_shape
        dt = v.dtype
        npdt = dt.np_dtype()
        if dt.is_float:
            lo, hi = (spec.low, spec.high) if spec is not None and spec.is_float else (-1.0, 1.0)
            out[v.name] = rng.uniform(lo, hi, shape).astype(npdt)
        elif dt is DType.BOOL:
            out[v.name] = rng.integers(0, 2, shape).astype(bool)
        elif spec is not None and not spec.is_float:
            out[v.name] = rng.integers(int(spec.low), int(spec.high), shape).astype(npdt)
        elif spec is not None and v.type.quant is not None and not v.type.quant.per_channel:
            q = v.type.quant
            a, b = dt.range()
            zp = q.zp
            if v.name in unsigned:
                a, b, zp = 0, 255, zp + 128
            x = np.clip(np.round(rng.uniform(spec.low, spec.high, shape) / q.s) + zp, a, b)
            out[v.name] = (x.astype(np.uint8).view(np.int8) if v.name in unsigned else x.astype(npdt))
        elif dt is DType.INT32:
            out[v.name] = rng.integers(0, 4, shape).astype(np.int32)
        else:
            a, b = dt.range()
            out[v.name] = rng.integers(a, b + 1, shape).astype(npdt)
    return out


# ------------------------------------------------------------------------------------------------ one variant
def _one_line(e: BaseException | str, limit: int = 300) -> str:
    text = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    s = " | ".join(lines[:3]) if lines else (type(e).__name__ if not isinstance(e, str) else "")
    return s if len(s) <= limit else s[: limit - 1] + "\u2026"


def _litert_reason(e: BaseException) -> str:
    """The informative line of a LiteRT failure: the child's last exception message (``Didn't find op for builtin
    opcode 'TILE' version '4'``), else its last line mentioning a failure."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = re.match(r"^[A-Za-z_.]*(Error|Exception): (.*)$", ln)
        if m and not ln.startswith("LiteRT"):
            return _one_line(m.group(2).split(". An older")[0], 240)
    for ln in reversed(lines):
        if "error" in ln.lower() or "failed" in ln.lower():
            return _one_line(ln, 240)
    return _one_line(str(e), 240)


def check_variant(mdef: Any, variant: str, *, worker: Any = None, num_inputs: int = 2, layers: bool = True,
                  rtol: float = FLOAT_RTOL, build_error: str | None = None) -> VariantResult:
    """Build, convert, validate, run and compare one variant (never raises).

    ``build_error``: the variant could not be built (see ``models.zoo.build.ensure_built``); reported as ERROR."""
    zoo = _models_module()
    res = VariantResult(mdef.name, mdef.family, variant, description=mdef.description,
                        integer=variant.split("_")[0] in zoo.INTEGER_VARIANTS)
    try:
        if build_error and "No module named 'tensorflow'" in build_error:
            res.status, res.reason = "SKIP", "cannot build: tensorflow is not installed"
        elif build_error:
            res.status, res.reason = "ERROR", build_error
        else:
            _check(zoo, mdef, variant, res, worker=worker, num_inputs=num_inputs, layers=layers, rtol=rtol)
    except Exception as e:  # noqa: BLE001 - every failure becomes a status with a reason
        res.status, res.reason = "ERROR", _one_line(e)
        res.notes.append("".join(traceback.format_exception(e))[-1500:])
    gap = mdef.gap(variant)
    if gap:
        if res.status in FAILING:
            res.status, res.reason = "XFAIL", f"known gap: {gap} ({res.reason})"
        elif res.status == "PASS":
            res.status, res.reason = "XPASS", f"known gap passes now: {gap}"
    return res


def _check(zoo: Any, mdef: Any, variant: str, res: VariantResult, *, worker: Any, num_inputs: int, layers: bool,
           rtol: float) -> None:
    """The steps of :func:`check_variant`; each records what it found in ``res`` and the first that ends the
    check sets its status."""
    info = _build(zoo, mdef, variant, res)
    if info is None:
        return
    model = _convert(info.data, res)
    if model is None:
        return
    g = model.graph
    data = model.to_bytes()
    invalid = _validate(data, model, res)
    # 4. run: executor (traced on the first set) and LiteRT
    sets = [make_inputs(g, mdef.inputs, seed) for seed in range(num_inputs)]
    src_names = {v.name: (v.source or v.name) for v in g.inputs}
    src_sets = [{src_names[k]: _as_source(g, k, a) for k, a in s.items()} for s in sets]
    t0 = time.perf_counter()
    trace = executor.run(g, sets[0], trace=layers)
    res.run_s = time.perf_counter() - t0
    ours = [{v.name: trace[v.name] for v in g.outputs}] + [executor.run(g, s) for s in sets[1:]]
    try:
        refs = _litert_many(worker, info.data, src_sets, res.integer)
        tensors = _litert_tensors(worker, info.data, src_sets[0], res.integer) if layers else None
    except LiteRTError as e:
        res.status = "INVALID" if invalid else "SKIP"
        res.reason = invalid or f"LiteRT cannot run the .tflite: {_litert_reason(e)}"
        return
    # 5. compare with LiteRT (the fp64 evaluation of a set, when a float output needs it, is also step 7's)
    fp64s = [FP64(g, s) for s in sets]
    _compare_litert(g, refs, ours, res, rtol, fp64s)
    if res.integer:  # as `tf2tosa verify` does: how far LiteRT's optimized kernels differ, for information only
        note = _optimized_note(worker, info.data, src_sets, refs)
        if note:
            res.notes.append(note)
    # 6. per-layer comparison (first input set)
    first = None
    if tensors is not None:
        lrep = compare_layers(info.data, g, tensors, trace, model=mdef.key(variant), reference_kernels=res.integer)
        res.layers = lrep.to_dict()
        first = lrep.first_divergent
    # 7. the Arm reference model
    ref_reason = _reference_run(data, g, sets[0], ours[0], res, fp64s[0]) if tosa_tools.available() else ""
    _set_status(res, invalid, ref_reason, first, rtol)


def _build(zoo: Any, mdef: Any, variant: str, res: VariantResult) -> Any:
    """1. build (or take from the cache) the variant's ``.tflite``; None when it is skipped."""
    if variant in mdef.unsupported:
        res.status, res.reason = "SKIP", f"TFLite cannot produce this variant: {mdef.unsupported[variant]}"
        return None
    try:
        info = zoo.build_tflite(mdef, variant)
    except ModuleNotFoundError as e:
        res.status, res.reason = "SKIP", f"cannot build: {e.name} is not installed"
        return None
    except zoo.core.TFLiteRefused as e:
        res.status, res.reason = "SKIP", f"TFLite converter: {_one_line(str(e), 240)}"
        return None
    res.cached, res.build_s = info.cached, (info.meta.get("build_s") if info.cached else info.seconds)
    res.params = info.meta.get("params")
    spread = info.meta.get("min_spread")
    if spread is not None and spread < 1e-2:
        res.notes.append(f"calibration: an output barely varies with the input (spread {spread:.1e})")
    res.tflite_ops = len(model_op_names(info.data))
    return info


def _convert(data: bytes, res: VariantResult) -> Any:
    """2. convert; None (and the status set) when the converter refuses."""
    t0 = time.perf_counter()
    try:
        model = convert(data)
    except UnsupportedOpsError as e:
        res.convert_s = time.perf_counter() - t0
        res.status, res.reason = "UNSUPPORTED", _one_line(str(e).removeprefix("error: "))
        return None
    except ConversionError as e:
        res.convert_s = time.perf_counter() - t0
        res.status, res.reason = "ERROR", f"convert: {_one_line(e)}"
        return None
    res.convert_s = time.perf_counter() - t0
    res.converted = True
    g = model.graph
    res.op_counts = {k: v for k, v in g.op_counts().items() if k not in ("tosa.CONST", "tosa.CONST_SHAPE")}
    res.ops = sum(res.op_counts.values())
    res.profiles, res.extensions = model.profiles, model.extensions
    res.notes.extend(f"converter: {w}" for w in g.record.warnings)
    return model


def _validate(data: bytes, model: Any, res: VariantResult) -> str:
    """3. validate with tosa-opt; the reason it rejected the program, else ""."""
    invalid = ""
    if tosa_tools.available():
        ok, msg = tosa_tools.validate(data, model.profiles, model.extensions)
        res.validated = ok
        if not ok:
            invalid = _one_line(msg or "tosa-opt rejected the program")
    else:
        res.notes.append("tosa-tools environment missing: not validated, no reference-model run")
    return invalid


def _as_source(g: Graph, name: str, a: np.ndarray) -> np.ndarray:
    """An int8 array of an unsigned input/output of ``g`` as the source model's uint8."""
    return a.view(np.uint8) if name in g.unsigned_io and a.dtype == np.int8 else a


def _compare_litert(g: Graph, refs: Sequence[Mapping[str, Any]], ours: Sequence[Mapping[str, np.ndarray]],
                    res: VariantResult, rtol: float, fp64s: Sequence[FP64]) -> None:
    """5. compare every output set with LiteRT's (float outputs as ``verify`` judges them: within ``rtol``, or the
    oracle within the rounding bound of the program's fp64 value, ``fp64s`` per set); sets the comparison fields
    and ``litert_ok``."""
    max_rel = max_abs = 0.0
    mism = elements = 0
    judged_ok = True
    for ref, got, fp64 in zip(refs, ours, fp64s):
        ref_list = list(ref.values())
        for i, v in enumerate(g.outputs):
            r = ref.get(v.source or "", ref_list[i] if i < len(ref_list) else None)
            if r is None:
                continue
            o = _as_source(g, v.name, got[v.name])
            o = o.reshape(r.shape) if o.size == r.size else o
            rep = judge(v.name, o, r, rtol, fp64)
            judged_ok = judged_ok and rep.ok
            if not np.issubdtype(r.dtype, np.floating):
                res.int_outputs = True
            max_rel, max_abs = max(max_rel, rep.rel), max(max_abs, rep.max_abs)
            elements += int(r.size)
            if res.integer:
                mism += int(np.count_nonzero(o.astype(np.float64) != r.astype(np.float64))) if o.shape == r.shape \
                    else int(r.size)
            else:
                mism += rep.mismatches if rep.ok or rep.mismatches else int(r.size)
    res.compared = True
    res.max_rel, res.max_abs, res.mismatches, res.elements = max_rel, max_abs, mism, elements
    res.litert_ok = mism == 0 if res.integer else judged_ok and mism == 0


def _reference_run(data: bytes, g: Graph, feed: dict[str, np.ndarray], ours: Mapping[str, np.ndarray],
                   res: VariantResult, fp64: FP64) -> str:
    """7. run the Arm reference model on the first input set and compare with the executor (float models: its fp64
    evaluation ``fp64``, of the same set); the reason of a disagreement, else ""."""
    try:
        precise = not res.integer
        armed = tosa_tools.run_reference(data, feed, precise=precise)
        mine = fp64.outputs() if precise else ours
        rel, rm = 0.0, 0
        for v in g.outputs:
            a, b = np.asarray(armed[v.name]), np.asarray(mine[v.name])
            a = a.reshape(b.shape)
            if np.issubdtype(b.dtype, np.floating) and not res.integer:
                scale = float(np.abs(a.astype(np.float64)).max()) if a.size else 0.0
                d = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.size else 0.0
                rel = max(rel, d / scale if scale else d)
            else:
                rm += int(np.count_nonzero(a.astype(np.float64) != b.astype(np.float64)))
        res.ref_rel, res.ref_mismatches = rel, rm
        res.ref_ok = rel <= REF_RTOL and rm == 0
        if not res.ref_ok:
            return (f"executor vs Arm reference model: {rm} mismatches" if rm
                    else f"executor vs Arm reference model (fp64): rel {rel:.2e} > {REF_RTOL:g}")
    except Exception as e:  # noqa: BLE001
        res.ref_ok = False
        return f"Arm reference model: {_one_line(e, 200)}"
    return ""


def _set_status(res: VariantResult, invalid: str, ref_reason: str, first: Any, rtol: float) -> None:
    """The variant's status and reason from the findings of the steps."""
    where = ""
    if first is not None:
        where = f"; first divergent layer {first.op} ({first.tosa_op})"
    if invalid:
        res.status, res.reason = "INVALID", f"tosa-opt: {invalid}"
    elif not res.litert_ok:
        if res.integer:
            unit = " LSB" if res.int_outputs else ""
            res.reason = (f"{res.mismatches} of {res.elements} output values differ from LiteRT BUILTIN_REF (max "
                          f"{res.max_abs:g}{unit}){where}")
        else:
            res.reason = (f"max rel error {res.max_rel:.2e} > {rtol:g} vs LiteRT, and LiteRT is outside the "
                          f"rounding bound of the program's fp64 value{where}")
        res.status = "FAIL"
        if ref_reason:
            res.reason += f"; {ref_reason}"
    elif ref_reason:
        res.status, res.reason = "FAIL", ref_reason
    else:
        res.status = "PASS"


def _optimized_note(worker: Any, data: bytes, sets: list[dict[str, np.ndarray]],
                    refs: Sequence[Mapping[str, Any]]) -> str:
    """The information line on LiteRT's optimized kernels vs its reference kernels for an integer variant."""
    from .verify.compare import optimized_diff_text
    from .verify.litert import LiteRTError

    try:
        others = _litert_many(worker, data, sets, False)
    except LiteRTError:
        return ""
    top = n = total = 0
    for ref, other in zip(refs, others):
        for name, r in ref.items():
            o = other.get(name)
            r = np.asarray(r)
            if o is None or np.asarray(o).shape != r.shape or np.issubdtype(r.dtype, np.floating) or not r.size:
                continue
            d = np.abs(np.asarray(o).astype(np.int64) - r.astype(np.int64))
            top, n, total = max(top, int(d.max())), n + int(np.count_nonzero(d)), total + int(d.size)
    return optimized_diff_text(top, n, total) if total else ""


def _litert_many(worker: Any, data: bytes, sets: list[dict[str, np.ndarray]], ref: bool) -> list[dict[str, Any]]:
    from .verify.litert import run_tflite_many

    if worker is not None:
        return list(worker.run_many(data, sets, reference_kernels=ref, timeout=600.0))
    return run_tflite_many(data, sets, reference_kernels=ref, timeout=600.0)


def _litert_tensors(worker: Any, data: bytes, inputs: dict[str, np.ndarray], ref: bool) -> dict[int, np.ndarray]:
    from .verify.litert import run_tflite_tensors

    if worker is not None:
        return dict(worker.run_tensors(data, inputs, reference_kernels=ref, timeout=600.0))
    return run_tflite_tensors(data, inputs, reference_kernels=ref, timeout=600.0)


def check_model(name: str, variants: Sequence[str], options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every listed variant of one model, with one LiteRT worker (the unit of work of a zoo worker process)."""
    from .verify.litert import LiteRTWorker

    zoo = _models_module()
    opts = dict(options or {})
    mdef = zoo.all_models(include_real=name not in zoo.REGISTRY)[name]
    out = []
    logger = logging.getLogger("tf2tosa")
    level = logger.level
    logger.setLevel(logging.ERROR)  # conversion warnings go into each result's notes, not onto the progress line
    from models.zoo.build import ensure_built

    try:
        failed = ensure_built(mdef, variants)  # TensorFlow runs in a child: a converter crash costs one variant
        with LiteRTWorker() as worker:
            for v in variants:
                out.append(asdict(check_variant(mdef, v, worker=worker, num_inputs=int(opts.get("num_inputs", 2)),
                                                layers=bool(opts.get("layers", True)), build_error=failed.get(v))))
    finally:
        logger.setLevel(level)
    return out


# ------------------------------------------------------------------------------------------------ a cluster
#: how long connecting to a ``--cluster`` scheduler, and waiting for its first worker, may take (seconds)
CLUSTER_TIMEOUT = 10.0


def cluster_job(name: str, variant: str, options: Mapping[str, Any], models_root: str | None) -> list[dict[str, Any]]:
    """One model variant on a cluster worker: :func:`check_model` after pointing the worker at the model
    definitions (``models_root``, the ``--models`` folder, which must be readable on the worker)."""
    if models_root is not None:
        os.environ[MODELS_ENV] = models_root
    return check_model(name, [variant], options)


@dataclass
class _Unreachable:
    """The probe's answer when the scheduler cannot be reached at all, and why: the host name does not resolve, or
    nothing listens on the port (Dask would retry either until the time-out)."""

    why: str


def _probe_scheduler(address: str, timeout: float, host: str | None = None,
                     connection_args: Mapping[str, Any] | None = None, port: int | None = None) -> None:
    """Ask the server at ``address`` who it is (Dask's ``identity`` message) on one connection, within ``timeout``
    seconds in all: :class:`InputError` naming the address unless a Dask scheduler answers.

    A ``Client`` is only made after this answer: one made on an address where nothing listens, or where another
    service answers (an HTTP proxy intercepting outbound connections sends bytes that Dask's framing reads as an
    exabyte-long message), fails with whatever its handshake raised, and its ``__del__`` then stalls the exit for
    another 20 s closing itself.  The probe runs its own event loop in a thread, so a caller inside a running loop
    (a notebook) is not disturbed.  ``host``: the address's host name, resolved first (None: not a host name);
    ``connection_args``: Dask's client connection arguments (the TLS settings of a ``tls://`` address); ``port``:
    the address's port, tried with a plain TCP connection first (a refused one is reported at once)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect

    args: Mapping[str, Any] = connection_args or {}

    async def ask() -> Any:
        comm = await connect(address, timeout=timeout, **args)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    def probe() -> Any:
        if host is not None:  # a name that does not resolve: Dask would retry it until the time-out
            try:
                socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            except socket.gaierror as e:
                return _Unreachable(f"the host name {host!r} does not resolve ({e.strerror or e})")
        if host is not None and port is not None:  # a refused port: Dask would retry it for 10 s
            try:
                socket.create_connection((host, port), timeout=min(timeout, 3.0)).close()
            except ConnectionRefusedError:
                return _Unreachable(f"nothing listens on port {port} (connection refused)")
            except OSError:
                pass  # unroutable, slow, filtered: Dask's own connect says what, within the time-out
        return asyncio.run(asyncio.wait_for(ask(), timeout + 2.0))  # Dask's own connect error first, if any

    pool = ThreadPoolExecutor(1, thread_name_prefix="tf2tosa-cluster-probe")
    try:
        answer = pool.submit(probe).result(timeout + 5.0)
    except TimeoutError:  # asyncio's and concurrent.futures' time-outs are the builtin one since Python 3.11
        raise InputError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s: no answer") from None
    except OSError as e:  # refused, unresolvable, unroutable (Dask retries until the time-out)
        raise InputError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s: "
                         f"{_one_line(e, 160) or type(e).__name__}") from None
    except Exception as e:  # noqa: BLE001 - a server answered, but its bytes are not Dask messages
        raise InputError(f"the server at {address} does not speak Dask's protocol (not a Dask scheduler?): "
                         f"{_one_line(e, 120) or type(e).__name__}") from None
    finally:
        pool.shutdown(wait=False)
    if isinstance(answer, _Unreachable):
        raise InputError(f"cannot reach the Dask scheduler at {address}: {answer.why}")
    if not isinstance(answer, Mapping) or answer.get("type") != "Scheduler":
        what = answer.get("type") if isinstance(answer, Mapping) else type(answer).__name__
        raise InputError(f"the server at {address} is not a Dask scheduler (it answers as {what!r})")


def connect_cluster(address: str, timeout: float | None = None) -> Any:
    """A ``distributed.Client`` of the Dask scheduler at ``address`` with at least one worker; one-line
    :class:`InputError` naming the address when it cannot be reached within ``timeout`` seconds (default
    :data:`CLUSTER_TIMEOUT`), and :class:`MissingExtraError` without the ``[cluster]`` extra."""
    timeout = CLUSTER_TIMEOUT if timeout is None else timeout
    try:
        from distributed import Client
    except ImportError:
        raise MissingExtraError("--cluster needs Dask distributed: pip install 'tf2tosa[cluster]'") from None
    from distributed.comm import parse_address
    from distributed.comm.addressing import parse_host_port
    from distributed.comm.registry import get_backend
    from distributed.security import Security

    try:  # a malformed address fails here: a Client that fails on it would stall the exit closing itself
        scheme, location = parse_address(address)
        get_backend(scheme)
        if not location.strip(":/"):
            raise ValueError("no host")
        host: str | None = None
        port: int | None = None
        if scheme in ("tcp", "tls"):
            host, port = parse_host_port(location)  # (raises for a missing port)
            if not 0 < port < 65536:
                raise ValueError(f"port {port} is not in 1-65535")
    except (ValueError, TypeError) as e:
        raise InputError(f"not a Dask scheduler address: {address} ({_one_line(e, 160)}); expected "
                         "tcp://host:port") from None
    # TLS (tls://) takes its certificates from Dask's configuration, as a Client does by itself
    security = Security()
    connection_args = security.get_connection_args("client")
    if scheme == "tls" and connection_args.get("ssl_context") is None:
        raise InputError(f"{address} is a TLS address, and Dask's configuration has no TLS client settings "
                         "(distributed.comm.tls.ca-file, .client.cert, .client.key): set them, or use tcp://")
    _probe_scheduler(address, timeout, host, connection_args, port)
    try:
        client = Client(address, timeout=timeout, set_as_default=False, security=security)
    except Exception as e:  # noqa: BLE001 - whatever the connection raises is one line naming the address
        raise InputError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s: "
                         f"{_one_line(e, 160)}") from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (OSError, TimeoutError) as e:
        client.close()
        raise InputError(f"the Dask scheduler at {address} has no worker after {timeout:g} s: "
                         f"{_one_line(e, 160)}") from None
    return client


def _run_on_cluster(client: Any, chosen: Sequence[tuple[Any, list[str]]], opts: Mapping[str, Any],
                    take: Callable[[str, list[dict[str, Any]]], None]) -> None:
    """Submit one :func:`cluster_job` per model variant and hand each result to ``take`` as it arrives."""
    from distributed import as_completed

    root = os.environ.get(MODELS_ENV)
    futs: dict[Any, tuple[Any, str]] = {}
    for mdef, vs in chosen:
        for v in vs:
            f = client.submit(cluster_job, mdef.name, v, dict(opts), root, key=f"tf2tosa-zoo-{mdef.name}/{v}",
                              pure=False)
            futs[f] = (mdef, v)
    for f in as_completed(list(futs), loop=client.loop):
        mdef, v = futs[f]
        try:
            rs = f.result()
        except Exception as e:  # noqa: BLE001 - a worker died or could not import the project
            rs = [asdict(VariantResult(mdef.name, mdef.family, v, "ERROR", f"cluster worker failed: {_one_line(e)}",
                                       description=mdef.description))]
        take(mdef.name, rs)


# ------------------------------------------------------------------------------------------------ the run
@dataclass
class ZooRun:
    """The results of :func:`run_zoo` (dicts, as written to ``zoo.json``), run facts and the report files."""

    results: list[dict[str, Any]]
    meta: dict[str, Any]
    paths: dict[str, Path] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(r["status"] in FAILING for r in self.results)

    def summary(self) -> str:
        from .verify.report import STATUSES, summary_counts

        c = summary_counts(self.results)
        line = (f"{c['variants']} variants: {c['converted']} converted, {c['validated']} validated, "
                f"{c['bit_exact']}/{c['integer']} integer bit-exact, {c['within_tol']}/{c['float']} float within "
                f"tolerance; " + ", ".join(f"{s} {c[s]}" for s in STATUSES if c[s]))
        return line


def _versions() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    from .verify import tosa_tools
    from .verify.report import chromium_path

    def ver(*names: str) -> str:
        for n in names:
            try:
                return version(n)
            except PackageNotFoundError:
                continue
        return "-"

    return {"tensorflow": ver("tensorflow-cpu", "tensorflow"), "litert": ver("ai-edge-litert"),
            "tosa_tools": tosa_tools.available(), "python": sys.version.split()[0],
            "chromium": chromium_path() is not None}


class _Progress:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, 0, enabled
        self.counts: dict[str, int] = {}
        self.t0 = time.perf_counter()
        self.tty = sys.stderr.isatty()

    def update(self, name: str, results: Sequence[Mapping[str, Any]]) -> None:
        self.done += len(results)
        for r in results:
            self.counts[r["status"]] = self.counts.get(r["status"], 0) + 1
        if not self.enabled:
            return
        width = 28
        fill = int(width * self.done / max(self.total, 1))
        bar = "#" * fill + "." * (width - fill)
        stats = " ".join(f"{k.lower()} {v}" for k, v in sorted(self.counts.items()))
        marks = " ".join(f"{r['variant']}:{r['status']}" for r in results)
        line = (f"[{bar}] {self.done}/{self.total} {time.perf_counter() - self.t0:5.0f}s  {stats}  | {name} "
                f"{marks}")
        if self.tty:
            sys.stderr.write("\r\033[K" + line[:200])
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def run_zoo(filter: str | None = None, jobs: int = 1, report_dir: str | os.PathLike[str] | None = None,
            list_only: bool = False, *, layers: bool = True, num_inputs: int = 2, include_real: bool = True,
            progress: bool = True, on_result: Callable[[dict[str, Any]], None] | None = None,
            cluster: str | None = None) -> ZooRun:
    """Run the model zoo (see the module docstring).

    ``filter``: see :func:`select`.  ``jobs``: worker processes (1 runs in this process).  ``report_dir``: where
    ``zoo.json``/``zoo.md``/``zoo.html`` go (``out/zoo`` by default; nothing is written for ``list_only``).
    ``list_only`` returns the selection as results with status ``LISTED`` without building anything.
    ``cluster``: the address of a Dask scheduler (``tcp://host:8786``); one job per model variant runs on its
    workers instead of local processes (``jobs`` is then ignored).
    """
    chosen = select(filter, include_real=include_real)
    started = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    meta: dict[str, Any] = {"started": started, "filter": filter or "", "jobs": jobs, "num_inputs": num_inputs}
    if cluster is not None:
        meta["cluster"] = cluster
    if list_only:
        rows = [{"model": m.name, "family": m.family, "variant": v, "status": "LISTED", "description": m.description,
                 "known_gap": m.gap(v) or ""} for m, vs in chosen for v in vs]
        return ZooRun(rows, meta)
    if report_dir is not None:
        from .outputs import preflight

        preflight(report_dir)  # an unwritable report folder fails now, not after the whole run
    client = connect_cluster(cluster) if cluster is not None else None  # an unreachable one fails now too
    if client is not None:
        meta["jobs"] = len(client.scheduler_info().get("workers", {}))
    meta.update(_versions())
    opts = {"layers": layers, "num_inputs": num_inputs}
    total = sum(len(vs) for _, vs in chosen)
    bar = _Progress(total, progress)
    by_key: dict[str, dict[str, Any]] = {}
    t0 = time.perf_counter()

    def take(name: str, rs: list[dict[str, Any]]) -> None:
        for r in rs:
            by_key[f"{r['model']}/{r['variant']}"] = r
            if on_result is not None:
                on_result(r)
        bar.update(name, rs)

    try:
        if client is not None:
            _run_on_cluster(client, chosen, opts, take)
        elif jobs <= 1:
            for mdef, vs in chosen:
                take(mdef.name, check_model(mdef.name, vs, opts))
        else:
            import multiprocessing as mp

            with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as pool:
                futs: dict[Future[list[dict[str, Any]]], tuple[Any, list[str]]] = {
                    pool.submit(check_model, mdef.name, vs, opts): (mdef, vs) for mdef, vs in chosen}
                pending = set(futs)
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in done:
                        mdef, vs = futs[f]
                        try:
                            rs = f.result()
                        except Exception as e:  # noqa: BLE001 - a worker died (abort, out of memory)
                            rs = [asdict(VariantResult(mdef.name, mdef.family, v, "ERROR",
                                                       f"worker process failed: {_one_line(e)}",
                                                       description=mdef.description)) for v in vs]
                        take(mdef.name, rs)
    finally:
        bar.close()
        if client is not None:
            client.close()
    order = [f"{m.name}/{v}" for m, vs in chosen for v in vs]
    results = [by_key[k] for k in order if k in by_key]
    meta["wall_s"] = time.perf_counter() - t0
    run = ZooRun(results, meta)
    if report_dir is not None or not list_only:
        from .verify.report import write_zoo_reports

        run.paths = write_zoo_reports(results, Path(report_dir) if report_dir is not None else DEFAULT_REPORT_DIR,
                                      meta)
    return run


def zoo_command(list_only: bool = False, filter: str | None = None, jobs: int = 1, report: str | None = None,
                echo: Callable[[str], None] = print, on_run: Callable[[ZooRun], object] | None = None,
                models: str | None = None, cluster: str | None = None) -> int:
    """The body of ``tf2tosa zoo``: prints the selection (``--list``) or runs it; returns the exit code
    (0: no variant FAIL/INVALID/UNSUPPORTED/ERROR, 1 otherwise).  ``on_run`` receives the finished run.
    ``models``: the folder holding the ``models`` package (default: this checkout; worker processes inherit it,
    cluster workers get its path with each job).  ``cluster``: a Dask scheduler address (see :func:`run_zoo`)."""
    if models is not None:
        os.environ[MODELS_ENV] = os.path.abspath(models)
    run = run_zoo(filter=filter, jobs=jobs, report_dir=report, list_only=list_only, cluster=cluster)
    if on_run is not None:
        on_run(run)
    if list_only:
        for r in run.results:
            gap = f"  (known gap: {r['known_gap']})" if r.get("known_gap") else ""
            echo(f"{r['model'] + '/' + r['variant']:44s} {r['family']:15s} {r['description']}{gap}")
        echo(f"{len(run.results)} model variants")
        return 0
    from .verify.report import error_text

    for r in run.results:
        if r["status"] not in ("PASS",):
            echo(f"{r['status']:11s} {r['model'] + '/' + r['variant']:40s} {error_text(r):28s} {r['reason']}")
    echo(run.summary())
    for kind, p in run.paths.items():
        echo(f"wrote {p}" + ("" if kind != "html" else "  (tools/zoo_screenshot.py makes a PNG of it)"))
    return 0 if run.ok else 1
