"""End-to-end check of one .tflite: convert, run our executor vs LiteRT, validate with tosa-opt,
run the Arm reference model.  Used by the per-op and whole-model tests."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

import tf2tosa
import tf2tosa.executor
from tf2tosa.ir import DType, Graph

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / ".cache" / "e2e_results.jsonl"
REF_RTOL = 1e-6  # executor vs Arm reference model (float)
LITERT_RTOL = 1e-4  # executor vs LiteRT, relative to max |reference|


@dataclass
class E2EResult:
    name: str
    ops: dict[str, int] = field(default_factory=dict)
    litert_rel: float = 0.0
    litert_mismatches: int = 0
    validated: bool = False
    ref_rel: float = 0.0
    ref_mismatches: int = 0
    max_lsb: int = 0  # integer outputs: max |ours - LiteRT| in LSB
    default_kernel_mismatches: int = -1  # integer outputs vs LiteRT's optimized kernels (information only)
    convert_s: float = 0.0
    profiles: list[str] = field(default_factory=list)
    extensions: list[str] = field(default_factory=list)


def unsigned_io(graph: Graph) -> set[str]:
    """Names of graph inputs/outputs that carry uint8 bits in an i8 tensor (RESCALE input/output_unsigned)."""
    return set(graph.meta.get("unsigned_io", ()))


def to_source(graph: Graph, name: str, arr: np.ndarray) -> np.ndarray:
    """Our array as the source framework sees it (i8 bits of a uint8 boundary viewed as uint8)."""
    return arr.view(np.uint8) if name in unsigned_io(graph) and arr.dtype == np.int8 else arr


def inputs_for(graph: Graph, seed: int, lo: float = -1.0, hi: float = 1.0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for v in graph.inputs:
        shape = v.type.static_shape
        if v.dtype.is_float:
            out[v.name] = rng.uniform(lo, hi, shape).astype(v.dtype.np_dtype())
        elif v.dtype is DType.BOOL:
            out[v.name] = rng.integers(0, 2, shape).astype(bool)
        elif v.dtype is DType.INT32 and (lo, hi) != (-1.0, 1.0):
            out[v.name] = rng.integers(int(lo), int(hi), shape).astype(np.int32)
        elif v.type.quant is not None and not v.type.quant.per_channel and (lo, hi) != (-1.0, 1.0):
            # a float input domain given for the model: quantize it with the input's parameters
            q = v.type.quant
            a, b = v.dtype.range()
            zp = q.zp
            if v.name in unsigned_io(graph):  # the i8 input carries zp - 128 (tf2tosa.quant.boundary)
                a, b, zp = 0, 255, zp + 128
            x = np.round(rng.uniform(lo, hi, shape) / q.s) + zp
            out[v.name] = np.clip(x, a, b).astype(np.uint8 if v.name in unsigned_io(graph) else v.dtype.np_dtype())
            if v.name in unsigned_io(graph):
                out[v.name] = out[v.name].view(np.int8)
        else:
            a, b = v.dtype.range() if v.dtype is not DType.INT32 else (-100, 100)
            out[v.name] = rng.integers(a, b + 1, shape).astype(v.dtype.np_dtype())
    return out


def rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    diff = np.abs(np.asarray(got, np.float64) - np.asarray(ref, np.float64))
    scale = float(np.abs(np.asarray(ref, np.float64)).max()) if ref.size else 0.0
    return float(diff.max() / scale) if scale else float(diff.max() if diff.size else 0.0)


def paired_outputs(graph: Graph, refs: list[dict[str, np.ndarray]], ours: list[dict[str, np.ndarray]],
                   defaults: list[dict[str, np.ndarray]] | None = None
                   ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """(ours, LiteRT, LiteRT default kernels or None) for every output of every input set, ours viewed and shaped
    as the source framework sees it; LiteRT outputs are matched by source tensor name, else by position."""
    for k, (s_ref, s_ours) in enumerate(zip(refs, ours)):
        ref_list = list(s_ref.values())
        for i, v in enumerate(graph.outputs):
            r = s_ref.get(v.source or "", ref_list[i])
            o = to_source(graph, v.name, s_ours[v.name]).reshape(r.shape)
            d = list(defaults[k].values())[i].reshape(r.shape) if defaults is not None else None
            yield o, r, d


def check_tflite(name: str, tflite: bytes, *, num: int = 3, lo: float = -1.0, hi: float = 1.0,
                 reference_model: bool = True, rtol: float = LITERT_RTOL, reference_kernels: bool = False,
                 max_lsb: int = 0, rounding: str = "double") -> E2EResult:
    """Assert the whole chain for one model; returns the measured figures.

    Integer outputs must match LiteRT exactly (or within ``max_lsb``, a pinned and documented bound); with
    ``reference_kernels`` the oracle is LiteRT's BUILTIN_REF kernels, and the optimized kernels' mismatch count is
    recorded for information.
    """
    from tf2tosa.verify import tosa_tools
    from tf2tosa.verify.litert import run_tflite_many

    t0 = time.perf_counter()
    model = tf2tosa.convert(tflite, rounding=rounding)
    res = E2EResult(name, convert_s=time.perf_counter() - t0, profiles=model.profiles, extensions=model.extensions)
    g = model.graph
    res.ops = {k: v for k, v in g.op_counts().items() if k not in ("tosa.CONST", "tosa.CONST_SHAPE")}
    sets = [inputs_for(g, seed, lo, hi) for seed in range(num)]
    src = {v.name: v.source or v.name for v in g.inputs}
    src_sets = [{src[k]: to_source(g, k, a) for k, a in s.items()} for s in sets]
    refs = run_tflite_many(tflite, src_sets, reference_kernels=reference_kernels)
    ours = [model.run(s) for s in sets]
    is_int = any(not np.issubdtype(a.dtype, np.floating) for a in ours[0].values())
    defaults = run_tflite_many(tflite, src_sets) if reference_kernels and is_int else None
    if defaults is not None:
        res.default_kernel_mismatches = 0
    for o, r, d in paired_outputs(g, refs, ours, defaults):
        if np.issubdtype(r.dtype, np.floating):
            res.litert_rel = max(res.litert_rel, rel_err(o, r))
        else:
            diff = np.abs(o.astype(np.int64) - r.astype(np.int64))
            res.litert_mismatches += int(np.count_nonzero(diff))
            res.max_lsb = max(res.max_lsb, int(diff.max()) if diff.size else 0)
            if d is not None:
                res.default_kernel_mismatches += int(np.count_nonzero(o != d))
    data = model.to_bytes()
    if tosa_tools.available():
        ok, msg = tosa_tools.validate(data, model.profiles, model.extensions)
        assert ok, f"{name}: tosa-opt validation failed: {msg}"
        res.validated = True
        if reference_model:
            # Both sides in fp64 ("precise mode"): fp32 summation-order noise alone reaches ~1e-5 on deep
            # networks, so only a precise run can check that the two implement the same semantics to 1e-6.
            armed = tosa_tools.run_reference(data, sets[0], precise=True)
            mine = tf2tosa.executor.run(g, sets[0], precise=True)
            for v in g.outputs:
                a, b = armed[v.name], mine[v.name]
                if np.issubdtype(b.dtype, np.floating):
                    res.ref_rel = max(res.ref_rel, rel_err(b, a.reshape(b.shape)))
                else:
                    res.ref_mismatches += int(np.count_nonzero(b != a.reshape(b.shape)))
    _record(res)
    assert res.litert_rel <= rtol, f"{name}: executor vs LiteRT rel error {res.litert_rel:.3g} > {rtol}"
    assert res.max_lsb <= max_lsb, (f"{name}: {res.litert_mismatches} integer mismatches vs LiteRT, "
                                    f"max {res.max_lsb} LSB (bound {max_lsb})")
    assert res.ref_rel <= REF_RTOL, f"{name}: executor vs reference model rel error {res.ref_rel:.3g}"
    assert res.ref_mismatches == 0, f"{name}: {res.ref_mismatches} mismatches vs reference model"
    return res


def _record(res: E2EResult) -> None:
    if os.environ.get("TF2TOSA_RECORD", "1") == "0":
        return
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(json.dumps(asdict(res)) + "\n")
