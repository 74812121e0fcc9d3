"""End-to-end check of one .tflite: convert, run our executor vs LiteRT (integers exact, floats within a derived
bound of our fp64 run), check our fp32 run op by op against the spec's accuracy bounds.  tosa-opt validation and the
Arm reference model runs happen for every .tosa in the session hook (tests/tosa_hook.py).  Used by the per-op and
whole-model tests."""

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
from tf2tosa.verify.rounding import FP32_FLOOR_ULP, FP32_NOISE_FACTOR, fp32_bound, fp32_noise  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / ".cache" / "e2e_results.jsonl"

# ----------------------------------------------------------------------------------------- float bounds
# fp32_bound / fp32_noise: tf2tosa.verify.rounding (the verifier judges float outputs by the same bound; its
# docstring says where the factor comes from)
#: two fp64 evaluations of the same graph (ours precise vs the Arm reference model's precise mode) differ only by
#: fp64 rounding: at most ~depth x K x 2^-53 relative (measured 9e-14 on MobileNetV2); 2^-30 leaves 4 decades
PRECISE_REL = 2.0 ** -30


@dataclass
class E2EResult:
    name: str
    ops: dict[str, int] = field(default_factory=dict)
    litert_rel: float = 0.0
    litert_mismatches: int = 0
    litert_bound_use: float = 0.0  # float outputs: max |LiteRT - ours fp64| / fp32_bound (<= 1 passes)
    int_elements: int = 0  # output elements compared in the integer domain (integer or dequantized outputs)
    float_elements: int = 0  # output elements compared against the fp32 bound
    max_lsb: int = 0  # integer outputs: max |ours - LiteRT| in LSB
    default_kernel_mismatches: int = -1  # integer outputs vs LiteRT's optimized kernels (information only)
    convert_s: float = 0.0
    profiles: list[str] = field(default_factory=list)
    extensions: list[str] = field(default_factory=list)


def unsigned_io(graph: Graph) -> set[str]:
    """Names of graph inputs/outputs that carry uint8 bits in an i8 tensor (RESCALE input/output_unsigned)."""
    return set(graph.record.unsigned_io)


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
            if v.name in unsigned_io(graph):  # the i8 input carries zp - 128 (tf2tosa.converter.passes.unsigned_io)
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


def dequantized_outputs(tflite: bytes) -> list[float | None]:
    """Per source output: the scale of the per-tensor quantized tensor a final DEQUANTIZE turns into this float
    output (a quantized model with float I/O, e.g. TFLite's int16x8), else None."""
    from tf2tosa.converter.tflite import load_tflite

    scales: list[float | None] = []
    for v in load_tflite(tflite).outputs:
        p = v.producer
        q = p.operands[0].type.quant if p is not None and p.opcode.upper().endswith("DEQUANTIZE") else None
        scales.append(float(q.scale[0]) if q is not None and len(q.scale) == 1 else None)
    return scales


def check_tflite(name: str, tflite: bytes, *, num: int = 3, lo: float = -1.0, hi: float = 1.0,
                 reference_kernels: bool = False, max_lsb: int = 0, rounding: str = "double",
                 spec_check: bool = True, input_shapes: dict[str, tuple[int, ...]] | None = None) -> E2EResult:
    """Assert the whole chain for one model; returns the measured figures.

    * Integer outputs, and float outputs that are a DEQUANTIZE of an integer tensor (quantized models with float
      I/O, such as int16x8), are compared in the integer domain: they must match LiteRT exactly (or within
      ``max_lsb``, a pinned and documented bound).  With ``reference_kernels`` the oracle is LiteRT's BUILTIN_REF
      kernels, and the optimized kernels' mismatch count is recorded for information.
    * Other float outputs: LiteRT within :func:`fp32_bound` of our executor's fp64 run, and (``spec_check``) every
      float op of our fp32 run within the spec's accuracy bound of its fp64 re-evaluation.
    * tosa-opt validation and the Arm reference model runs are done for this and every other ``.tosa`` a test
      produces by the session hook in ``tests/tosa_hook.py``.
    * ``input_shapes`` specialises a model with unknown dimensions; LiteRT is then resized to the same shapes
      (``resize_tensor_input`` + ``allocate_tensors``, done by :mod:`tf2tosa.verify.litert` for inputs whose shape
      differs from the model's).
    """
    from tf2tosa.verify.litert import run_tflite_many

    t0 = time.perf_counter()
    model = tf2tosa.convert(tflite, rounding=rounding, input_shapes=input_shapes)
    res = E2EResult(name, convert_s=time.perf_counter() - t0, profiles=model.profiles, extensions=model.extensions)
    g = model.graph
    res.ops = {k: v for k, v in g.op_counts().items() if k not in ("tosa.CONST", "tosa.CONST_SHAPE")}
    sets = [inputs_for(g, seed, lo, hi) for seed in range(num)]
    src = {v.name: v.source or v.name for v in g.inputs}
    src_sets = [{src[k]: to_source(g, k, a) for k, a in s.items()} for s in sets]
    refs = run_tflite_many(tflite, src_sets, reference_kernels=reference_kernels)
    ours = [model.run(s) for s in sets]
    model.to_bytes()  # the .tosa the hook validates and runs in the Arm reference model
    is_int = any(not np.issubdtype(a.dtype, np.floating) for a in ours[0].values())
    scales = dequantized_outputs(tflite)
    has_float = any(np.issubdtype(a.dtype, np.floating) for a in ours[0].values())
    precise = [tf2tosa.executor.run(g, s, precise=True) for s in sets] if has_float else ours
    noises = [fp32_noise(g, s) for s in sets] if has_float else [{} for _ in sets]
    defaults = run_tflite_many(tflite, src_sets) if reference_kernels and (is_int or any(scales)) else None
    if defaults is not None:
        res.default_kernel_mismatches = 0
    n_out = len(g.outputs)
    worst = 0.0  # largest error / bound over float outputs
    for k, ((o, r, d), (o64, _, _)) in enumerate(zip(paired_outputs(g, refs, ours, defaults),
                                                     paired_outputs(g, refs, precise))):
        scale = scales[k % n_out] if k % n_out < len(scales) else None
        if np.issubdtype(r.dtype, np.floating) and scale is None:
            err = float(np.abs(np.asarray(r, np.float64) - np.asarray(o64, np.float64)).max()) if r.size else 0.0
            out = g.outputs[k % n_out]
            bound = fp32_bound(o, o64, out.dtype, noises[k // n_out].get(out.name, 0.0))
            res.litert_rel = max(res.litert_rel, rel_err(o64, r))
            res.float_elements += int(r.size)
            worst = max(worst, err / bound if bound else (0.0 if err == 0 else float("inf")))
            continue
        if scale is not None:  # dequantized integers: (q - zp) * scale on both sides, so the LSB gap is exact
            diff = np.rint(np.abs(o.astype(np.float64) - r.astype(np.float64)) / scale).astype(np.int64)
            dd = None if d is None else np.rint(np.abs(o.astype(np.float64) - d) / scale)
        else:
            diff = np.abs(o.astype(np.int64) - r.astype(np.int64))
            dd = None if d is None else np.abs(o.astype(np.int64) - d.astype(np.int64))
        res.litert_mismatches += int(np.count_nonzero(diff))
        res.int_elements += int(diff.size)
        res.max_lsb = max(res.max_lsb, int(diff.max()) if diff.size else 0)
        if dd is not None:
            res.default_kernel_mismatches += int(np.count_nonzero(dd))
    res.litert_bound_use = worst
    report = None
    if spec_check and has_float:
        from tf2tosa.verify.spec_check import check_graph

        report = check_graph(g, sets[0])
    _record(res)
    # first the spec check: it vouches for our fp32 noise figure, which scales the LiteRT bound
    assert report is None or report.ok, f"{name}: {report}"
    assert worst <= 1.0, (f"{name}: LiteRT vs our fp64 run is {worst:.3g} x the fp32 bound "
                          f"(max(24 x our fp32 noise, 16 ulp); see tests/e2e.py)")
    assert res.max_lsb <= max_lsb, (f"{name}: {res.litert_mismatches} integer mismatches vs LiteRT, "
                                    f"max {res.max_lsb} LSB (bound {max_lsb})")
    return res


def _record(res: E2EResult) -> None:
    if os.environ.get("TF2TOSA_RECORD", "1") == "0":
        return
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(json.dumps(asdict(res)) + "\n")


def exact_against_ref(m: tf2tosa.TosaModel, shape: tuple[int, ...], integer: bool = True) -> None:
    """``m`` verified against LiteRT's BUILTIN_REF (integer outputs with 0 mismatches) on random inputs and on its
    one input filled with the type's two extremes (for a softmax every row's maximum is every element, the largest
    sums); a float input takes -4 and 4."""
    report = m.verify(num=3, oracle="ref")
    assert report.ok and (not integer or all(o.mismatches == 0 for o in report.outputs)), report
    dt = m.graph.inputs[0].dtype.np_dtype()
    lo, hi = (-4.0, 4.0) if np.issubdtype(dt, np.floating) else (np.iinfo(dt).min, np.iinfo(dt).max)
    for fill in (lo, hi):
        report = m.verify([{m.input_names[0]: np.full(shape, fill, dt)}], oracle="ref")
        assert report.ok and (not integer or all(o.mismatches == 0 for o in report.outputs)), report
