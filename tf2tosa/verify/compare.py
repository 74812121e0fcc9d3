"""Verification: run the source model and the TOSA program on the same inputs and compare outputs."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..converter.passes.integer_io import dequantize, quantize
from ..converter.tflite import load_tflite
from ..errors import InputError, MissingExtraError
from ..executor import run
from ..ir import DType, Graph
from ..tosa.profiles import element_bits, tensor_size_problem
from .litert import LiteRTError, LiteRTWorker
from .rounding import FP32_FLOOR_ULP, FP32_NOISE_FACTOR, fp32_bound, fp32_noise
from .spec_check import ComplianceReport, check_graph


class ConvertedModel(Protocol):
    """What verification reads of a converted model: :class:`tf2tosa.api.TosaModel`, named by its shape here since
    the API imports this package."""

    graph: Graph
    source_path: str | None
    tf_source: Any

    @property
    def source(self) -> bytes | None: ...

    @property
    def io_quantization(self) -> dict[str, list[dict[str, Any]]] | None: ...

    def session(self) -> Any: ...


#: float outputs pass when max |tosa - ref| <= FLOAT_RTOL * max |ref|, or past that when the oracle lies within
#: :func:`.rounding.fp32_bound` of the program's fp64 evaluation (see :func:`judge`)
FLOAT_RTOL = 1e-4

#: the oracles an output can be judged against
ORACLES = ("ref", "optimized", "tensorflow")

#: where the float output bound comes from, stated with every float verdict
FLOAT_BOUND_SOURCE = ("tf2tosa's output tolerance: the oracle sums in its own order, so results may differ by "
                      f"rounding; past {FLOAT_RTOL:g} x max|ref|, the oracle's output passes within "
                      f"max({FP32_NOISE_FACTOR:g} x the program's own fp32 rounding error, {FP32_FLOOR_ULP:g} ulp) of "
                      "the program's fp64 evaluation (the test suite's bound: deep or cancelling float models round "
                      "past 1e-4 in every fp32 runtime); every float op is also checked against the TOSA 1.0 spec's "
                      "own bound (§1.10)")

#: |error| / bound bin edges of the float error histogram (the last bin is "outside the bound")
RATIO_EDGES = (0.0, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)

ORACLE_TEXT = {"ref": "LiteRT reference kernels (BUILTIN_REF)", "optimized": "LiteRT optimized kernels",
               "tensorflow": "TensorFlow", "fp64": "the executor's fp64 evaluation (NNEF: no source runtime)"}


def require_litert() -> None:
    """Raise MissingExtraError unless LiteRT is importable (verify runs the source model in it)."""
    if importlib.util.find_spec("ai_edge_litert") is None:
        raise MissingExtraError("verify needs LiteRT: pip install 'tf2tosa[tf]'")


def resolve_oracle(oracle: str | None, reference_kernels: bool | None, *, tensorflow_source: bool) -> str:
    """The oracle to judge against: ``oracle`` if given, else the deprecated ``reference_kernels`` flag, else
    ``ref`` for a .tflite source and ``tensorflow`` for a TensorFlow one."""
    if oracle is None:
        if reference_kernels is not None:
            oracle = "ref" if reference_kernels else "optimized"
        else:
            oracle = "tensorflow" if tensorflow_source else "ref"
    if oracle not in ORACLES:
        raise InputError(f"unknown oracle {oracle!r}; choose one of {', '.join(ORACLES)}")
    if oracle == "tensorflow" and not tensorflow_source:
        raise InputError("--oracle tensorflow needs a TensorFlow model (SavedModel, Keras, GraphDef); a .tflite "
                         "file is judged by LiteRT: --oracle ref or optimized")
    return oracle


@dataclass
class OutputReport:
    name: str
    shape: tuple[int, ...]
    dtype: str
    max_abs: float
    max_ref: float
    mismatches: int
    ok: bool
    #: the bound the verdict used, in words (``exact`` for integers)
    bound: str = ""
    #: the bound as a number (0 for integers, the absolute float bound otherwise)
    bound_value: float = 0.0
    #: error distribution for the HTML report: ``lsb`` {|diff|: count} for integers, ``ratio`` counts over
    #: RATIO_EDGES (+ one bin above the bound) for floats, ``worst`` the largest errors, ``elements`` compared
    detail: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def rel(self) -> float:
        """max |error| / max |reference|."""
        return self.max_abs / self.max_ref if self.max_ref else self.max_abs

    @property
    def is_float(self) -> bool:
        try:
            return np.dtype(self.dtype).kind == "f"
        except TypeError:
            return False

    @property
    def constant_value(self) -> float | None:
        """The one value every oracle element of every input set had, when there is one and more than one element
        was compared (a comparison with such an oracle proves little); else None."""
        lo, hi = self.detail.get("ref_min"), self.detail.get("ref_max")
        if lo is None or hi is None or lo != hi or int(self.detail.get("elements", 0)) < 2:
            return None
        return float(lo)

    def merge(self, other: OutputReport) -> OutputReport:
        """Combine the reports of two input sets: the worse one's figures, summed counts and histograms.

        The worst elements of both are kept, each labelled with its input set (``set``, 0-based, in merge order)
        and carrying its own set's max |oracle| and bound, so a table of them never pairs one set's values with
        another set's maximum; ``worst_set`` is the input set the report's own figures come from."""
        worse = other if (not other.ok and self.ok) or other.rel > self.rel else self
        keep = OutputReport(worse.name, worse.shape, worse.dtype, worse.max_abs, worse.max_ref,
                            self.mismatches + other.mismatches, self.ok and other.ok, worse.bound, worse.bound_value,
                            dict(worse.detail))
        a, b = self.detail, other.detail
        n_a = int(a.get("sets", 1)) if a else 1
        if a or b:
            keep.detail["sets"] = n_a + (int(b.get("sets", 1)) if b else 1)
            keep.detail["worst_set"] = (int(b.get("worst_set", 0)) + n_a) if worse is other else int(
                a.get("worst_set", 0))
        if a and b:
            lows = [x for x in (a.get("ref_min"), b.get("ref_min")) if x is not None]
            highs = [x for x in (a.get("ref_max"), b.get("ref_max")) if x is not None]
            keep.detail["ref_min"] = min(lows) if lows else None
            keep.detail["ref_max"] = max(highs) if highs else None
            keep.detail["elements"] = a.get("elements", 0) + b.get("elements", 0)
            if "lsb" in a and "lsb" in b:
                lsb = dict(a["lsb"])
                for k, n in b["lsb"].items():
                    lsb[k] = lsb.get(k, 0) + n
                keep.detail["lsb"] = lsb
            if "ratio" in a and "ratio" in b and len(a["ratio"]) == len(b["ratio"]):
                keep.detail["ratio"] = [x + y for x, y in zip(a["ratio"], b["ratio"])]
            tagged = ([{**w, "set": w.get("set", 0)} for w in a.get("worst", [])]
                      + [{**w, "set": w.get("set", 0) + n_a} for w in b.get("worst", [])])
            keep.detail["worst"] = sorted(tagged, key=lambda w: -w["err"])[:10]
        return keep

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "ok": self.ok,
                "max_abs": _finite(self.max_abs), "max_ref": _finite(self.max_ref), "rel": _finite(self.rel),
                "mismatches": self.mismatches, "bound": self.bound, "bound_value": _finite(self.bound_value)}


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


@dataclass
class VerifyReport:
    model: str
    runs: int
    outputs: list[OutputReport] = field(default_factory=list)
    #: every float op judged by the spec's accuracy rules (None for graphs without float ops)
    spec: ComplianceReport | None = None
    #: ops lowered by a path that is not bit-exact with TFLite (graph.record.inexact, see quant.conv.note_inexact)
    inexact: list[dict[str, str]] = field(default_factory=list)
    #: what the outputs were judged against: ``ref``, ``optimized`` or ``tensorflow``
    oracle: str = "ref"
    #: information that does not change the verdict (e.g. how far LiteRT's optimized kernels differ)
    info: list[str] = field(default_factory=list)
    #: the optimized kernels' difference from the reference kernels, when measured: on integer outputs the largest
    #: difference in LSB, the elements that differ and the total (``max_lsb`` None without integer outputs), on
    #: float outputs max |optimized - reference| / max |reference| (``max_rel``, None without float outputs)
    optimized_diff: dict[str, Any] | None = None
    #: ``verify --steps``: per consecutive invocation (step), whether it passed, its largest error and mismatches
    steps: list[dict[str, Any]] | None = None

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs) and (self.spec is None or self.spec.ok)

    @property
    def warnings(self) -> list[str]:
        """What makes a passing verdict weak: an output the oracle gave as one constant value over every element of
        every input set (an all-zero softmax from random weights) matches a program that is wrong in many ways."""
        out = []
        for o in self.outputs:
            v = o.constant_value
            if v is not None:
                sets = "the input set" if self.runs == 1 else f"all {self.runs} input sets"
                out.append(f"output {o.name!r} is constant in the oracle (all {v:g} over {sets}): this comparison "
                           "proves little; try other inputs (--input, --num) or a trained model")
        return out

    def summary(self) -> str:
        """The verdict in one line (``-q``): PASS/FAIL, what was compared and the worst figure."""
        runs = (f"{self.runs} step(s)" if self.steps is not None else f"{self.runs} input set(s)")
        worst = max(self.outputs, key=lambda o: (not o.ok, o.rel), default=None)
        fig = ""
        if worst is not None:
            fig = (f"; worst {worst.name}: {worst.mismatches} mismatch(es)" if not worst.is_float or not worst.ok
                   else f"; worst {worst.name}: rel {worst.rel:.3g}")
        spec = "" if self.spec is None or self.spec.ok else f"; {len(self.spec.failures)} op(s) outside spec bounds"
        return (f"verify {self.model}: {'PASS' if self.ok else 'FAIL'} ({len(self.outputs)} output(s), {runs} "
                f"against {ORACLE_TEXT.get(self.oracle, self.oracle)}{fig}{spec})")

    def __str__(self) -> str:
        return self.text()

    def text(self, warnings: bool = True) -> str:
        """The full report; ``warnings=False`` leaves out the :attr:`warnings` lines (the CLI prints them itself,
        on stderr)."""
        runs = (f"{self.runs} consecutive step(s) of one stream" if self.steps is not None
                else f"{self.runs} input set(s)")
        lines = [f"verify {self.model}: {runs} against {ORACLE_TEXT.get(self.oracle, self.oracle)}, "
                 f"{'PASS' if self.ok else 'FAIL'}"]
        if warnings:
            lines.extend(f"  warning: {w}" for w in self.warnings)
        if self.steps is not None:
            bad = [st["step"] for st in self.steps if not st["ok"]]
            lines.append(f"  steps: {len(self.steps) - len(bad)} of {len(self.steps)} pass"
                         + (f"; first failing step {bad[0]}" if bad else ""))
        for o in self.outputs:
            lines.append(f"  {o.name} {list(o.shape)} {o.dtype}: max_abs={o.max_abs:.3g} max|ref|={o.max_ref:.3g} "
                         f"rel={o.rel:.3g} mismatches={o.mismatches} {'ok' if o.ok else 'FAIL'}"
                         + (f" (bound: {o.bound})" if o.bound else ""))
        if any(o.is_float for o in self.outputs):
            lines.append(f"  float bound: {FLOAT_BOUND_SOURCE}")
        if self.spec is not None:
            lines.append("  " + str(self.spec).replace("\n", "\n  "))
        for e in self.inexact:
            lines.append(f"  inexact lowering: {e['op']} ({e['tensor']}): {e['reason']}")
        lines.extend(f"  info: {i}" for i in self.info)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data (the ``verify --json`` object's ``report``)."""
        spec: dict[str, Any] | None = None
        if self.spec is not None:
            w = self.spec.worst
            spec = {"ok": self.spec.ok, "checked": self.spec.checked,
                    "failures": [{"op": f.op, "result": f.result, "worst": _finite(f.worst), "message": f.message}
                                 for f in self.spec.failures],
                    "worst": None if w is None else {"op": w.op, "result": w.result, "worst": _finite(w.worst)}}
        return {"model": self.model, "ok": self.ok, "oracle": self.oracle, "runs": self.runs,
                "outputs": [o.to_dict() for o in self.outputs], "spec": spec, "info": list(self.info),
                "optimized_diff": self.optimized_diff, "inexact": list(self.inexact), "steps": self.steps,
                "float_bound_source": FLOAT_BOUND_SOURCE if any(o.is_float for o in self.outputs) else None}


def random_inputs(graph: Graph, seed: int = 0, shapes: Mapping[str, tuple[int, ...]] | None = None
                  ) -> dict[str, np.ndarray]:
    """Seeded random inputs for the graph's inputs, keyed by input value name; ``shapes`` gives the shape of an
    input whose type has unknown dimensions (a symbolic program)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for v in graph.inputs:
        if shapes is not None and v.name in shapes:
            shape = tuple(shapes[v.name])
        elif not v.type.is_static:
            raise InputError(f"input {v.name!r} has unknown dimensions {list(v.type.shape)}: give its size (run "
                             "--dim SYMBOL=VALUE or --input-shape) or its data (--input)", tensor=v.name)
        else:
            shape = v.type.static_shape
        dt = v.dtype
        too_big = tensor_size_problem(shape, element_bits(dt))
        if too_big is not None:
            raise InputError(f"input {v.name!r}: {too_big}", tensor=v.name)
        if dt.is_float:
            arr = rng.uniform(-1.0, 1.0, shape).astype(dt.np_dtype())
        elif dt is DType.BOOL:
            arr = rng.integers(0, 2, shape).astype(bool)
        elif dt is DType.INT32:
            arr = rng.integers(-8, 8, shape).astype(np.int32)
        else:
            lo, hi = dt.range()
            arr = rng.integers(lo, hi + 1, shape).astype(dt.np_dtype())
        out[v.name] = arr
    return out


def compare(name: str, got: np.ndarray, ref: np.ndarray, rtol: float = FLOAT_RTOL,
            anchor: tuple[np.ndarray, float] | None = None) -> OutputReport:
    """Compare one output; integers must match exactly, floats within ``rtol`` × max |ref|.  Given ``anchor``
    (the program's fp64 evaluation of this output and :func:`.rounding.fp32_bound` for it), a float output is judged
    instead by the oracle's distance from that fp64 value (the figures reported stay |got - ref|)."""
    g = np.asarray(got)
    r = np.asarray(ref)
    if g.shape != r.shape and g.size == r.size:
        g = g.reshape(r.shape)
    if g.shape != r.shape:
        return OutputReport(name, tuple(r.shape), str(r.dtype), float("inf"), 0.0, int(r.size), False,
                            f"shape {list(g.shape)} differs from the oracle's {list(r.shape)}")
    diff = np.abs(g.astype(np.float64) - r.astype(np.float64))
    max_abs = float(np.nanmax(diff)) if diff.size and not np.all(np.isnan(diff)) else 0.0
    finite = np.abs(r[np.isfinite(r)].astype(np.float64))
    max_ref = float(finite.max()) if finite.size else 0.0  # an infinity in the oracle must not open the float bound
    mismatches = int(np.count_nonzero(diff))
    values = r[np.isfinite(r)]  # the oracle's range (a constant oracle output proves little: VerifyReport.warnings)
    detail: dict[str, Any] = {"elements": int(r.size), "ref_min": float(values.min()) if values.size else None,
                              "ref_max": float(values.max()) if values.size else None}
    if np.issubdtype(r.dtype, np.floating):
        limit = rtol * max(max_ref, 1e-30)
        nan_ok = bool(np.array_equal(np.isnan(g), np.isnan(r)))
        d = _distance(g, r, diff)
        bound = f"|err| <= {rtol:g} x max|ref| = {limit:.3g}"
        if anchor is not None:
            a64, limit = np.asarray(anchor[0], np.float64).reshape(r.shape), anchor[1]
            d = _distance(a64, r, np.abs(r.astype(np.float64) - a64))
            far = float(d.max()) if d.size else 0.0
            bound = (f"|ref - fp64| = {far:.3g} {'<=' if far <= limit else '>'} max({FP32_NOISE_FACTOR:g} x the "
                     f"program's fp32 rounding error, {FP32_FLOOR_ULP:g} ulp) = {limit:.3g}; "
                     f"{rtol:g} x max|ref| = {rtol * max(max_ref, 1e-30):.3g} exceeded")
        mismatches = int(np.count_nonzero(d > limit))
        ok = nan_ok and mismatches == 0
        ratio = d / limit
        idx = np.searchsorted(np.asarray(RATIO_EDGES[1:]), ratio.ravel(), side="left")
        # bin k < 7 counts |err|/bound in (edge[k], edge[k+1]] (bin 0 also exact matches); the last bin is > 1
        detail["ratio"] = [int(n) for n in np.bincount(idx, minlength=len(RATIO_EDGES))]
    else:
        limit = 0.0
        ok = mismatches == 0
        bound = "exact"
        vals, counts = np.unique(diff.astype(np.int64), return_counts=True)
        detail["lsb"] = {int(v): int(c) for v, c in zip(vals, counts)}
        d = diff
    if d.size:
        flat = d.ravel()
        n_top = min(10, flat.size)
        top = np.argpartition(-flat, n_top - 1)[:n_top]
        top = top[np.argsort(-flat[top], kind="stable")]
        detail["worst"] = [{"index": [int(i) for i in np.unravel_index(int(j), r.shape)], "got": g.ravel()[j].item(),
                            "ref": r.ravel()[j].item(), "err": float(flat[j]), "max_ref": max_ref, "bound": limit}
                           for j in top if flat[j] > 0]
    return OutputReport(name, tuple(r.shape), str(r.dtype), max_abs, max_ref, mismatches, ok, bound, limit, detail)


def _distance(a: np.ndarray, r: np.ndarray, diff: np.ndarray) -> np.ndarray:
    """|a - r| for the float verdict: 0 where both are NaN or the same infinity, inf where only one is NaN."""
    same = (a == r) | (np.isnan(a) & np.isnan(r))
    return np.where(same, 0.0, np.nan_to_num(diff, nan=np.inf))


def judge(name: str, got: np.ndarray, ref: np.ndarray, rtol: float,
          fp64: Callable[[str, np.ndarray], tuple[np.ndarray, float] | None]) -> OutputReport:
    """:func:`compare`; a float output past ``rtol`` is compared again against the program's fp64 value:
    ``fp64(name, got)`` gives (the fp64 evaluation of that output, its :func:`.rounding.fp32_bound`), and is
    called only then."""
    rep = compare(name, got, ref, rtol)
    if rep.ok or not rep.is_float or np.asarray(got).size != np.asarray(ref).size:
        return rep
    anchor = fp64(name, got)
    return rep if anchor is None else compare(name, got, ref, rtol, anchor)


class FP64:
    """The fp64 (``precise``) evaluation of a graph on one input set and its fp32 rounding error nearby
    (:func:`.rounding.fp32_noise`), computed on first use; called as ``fp64(output name, fp32 result)`` for
    :func:`judge`."""

    def __init__(self, graph: Graph, inputs: Mapping[str, np.ndarray]) -> None:
        self._graph, self._inputs = graph, inputs
        self._out: dict[str, np.ndarray] | None = None
        self._noise: dict[str, float] | None = None

    def outputs(self) -> dict[str, np.ndarray]:
        """The graph's outputs evaluated in fp64 (run once, on the first call)."""
        if self._out is None:
            self._out = run(self._graph, self._inputs, precise=True)
        return self._out

    def __call__(self, name: str, got: np.ndarray) -> tuple[np.ndarray, float] | None:
        if self._noise is None:
            self._noise = fp32_noise(self._graph, self._inputs)
        a64 = self.outputs().get(name)
        v = next((v for v in self._graph.outputs if v.name == name), None)
        if a64 is None or v is None or np.asarray(a64).size != np.asarray(got).size:
            return None
        a64 = np.asarray(a64).reshape(np.asarray(got).shape)
        return a64, fp32_bound(np.asarray(got), a64, v.dtype, self._noise.get(name, 0.0))


def verify_tflite(model: ConvertedModel, inputs: Sequence[Mapping[str, np.ndarray]] | None = None, *, seed: int = 0,
                  num: int = 1, reference_kernels: bool | None = None, rtol: float = FLOAT_RTOL,
                  tflite: bytes | None = None, oracle: str | None = None,
                  progress: Any = None) -> VerifyReport:
    """Run ``model.source`` (a .tflite) in LiteRT and ``model`` in the executor; compare every output.

    ``oracle`` is ``ref`` (LiteRT's reference kernels, the default: the truth for integer models) or ``optimized``
    (LiteRT's default kernels); ``reference_kernels`` is its older boolean spelling.  With ``ref``, the model is
    also run on the optimized kernels and how far those differ is reported as information (``report.info``).
    ``tflite`` overrides the model to run in LiteRT (e.g. TFLite's own int8 conversion of a QAT model); its inputs
    and outputs are then matched through its SignatureDef keys (our graph's ``signature_names``), by position when
    those do not cover them.  Otherwise outputs are matched by source tensor name, in the source model's order.
    ``progress(step, total, text)`` is told of each step.
    """
    require_litert()
    oracle = resolve_oracle(oracle, reference_kernels, tensorflow_source=False)
    tell = progress or (lambda *a: None)

    g = model.graph
    sets = [dict(s) for s in inputs] if inputs is not None else [random_inputs(g, seed + i) for i in range(num)]
    unsigned = g.unsigned_io
    # io="int": the source model quantizes/dequantizes at these edges itself (converter/passes/integer_io.py)
    io_q = model.io_quantization or {}
    q_out = {e["name"]: e for e in io_q.get("outputs", [])}
    source_sets = _integer_edge_inputs(sets, io_q)  # what LiteRT gets: float data for the integer edges

    def as_source(name: str, a: np.ndarray) -> np.ndarray:
        """uint8 model inputs/outputs travel as i8 tensors holding the uint8 bits (the unsigned_io pass)."""
        return a.view(np.uint8) if name in unsigned and a.dtype == np.int8 else a

    def as_ours(name: str, r: np.ndarray) -> np.ndarray:
        """A source output of an integer edge back to integers: TFLite's QUANTIZE of its DEQUANTIZE result, which
        recovers the integer exactly (|q - zp| < 2^16, relative error of the two float32 steps < 2^-22)."""
        e = q_out.get(name)
        return r if e is None or not np.issubdtype(r.dtype, np.floating) else quantize(
            r, e["dtype"], e["scale"], e["zero_point"])

    # by name, unless the TFLite names cannot identify the inputs (unnamed or repeated tensor names)
    named = [v.source for v in g.inputs]
    positional = tflite is not None or not all(named) or len(set(named)) != len(named)
    source = tflite if tflite is not None else model.source
    assert source is not None
    litert_sets, out_tensor = _litert_inputs(g, source_sets, tflite, positional, as_source)
    total = 2 + len(sets) + (oracle == "ref")
    refs, others, note = _run_litert(source, litert_sets, oracle, tell, total)

    worst: dict[str, OutputReport] = {}
    optimized = _OptimizedDiff()
    for k, (s, ref) in enumerate(zip(sets, refs)):
        tell(total - 1 - len(sets) + k, total, f"executor, input set {k + 1}/{len(sets)}")
        got = run(g, s)
        fp64 = FP64(g, s)
        for i, v in enumerate(g.outputs):
            r = _pick(ref, i, out_tensor.get(v.name) if positional else v.source)
            if r is None:
                continue
            r = as_ours(v.name, r)
            rep = judge(v.name, as_source(v.name, got[v.name]), r, rtol, fp64)
            prev = worst.get(v.name)
            worst[v.name] = rep if prev is None else prev.merge(rep)
            if others is not None:
                o = _pick(others[k], i, out_tensor.get(v.name) if positional else v.source)
                o = None if o is None else as_ours(v.name, o)
                if o is not None and o.shape == r.shape and o.size:
                    optimized.add(o, r)
    report = VerifyReport(model.source_path or g.name, len(sets), [worst[v.name] for v in g.outputs if v.name in worst],
                          oracle=oracle)
    if others is not None:
        optimized.record(report)
    if note:
        report.info.append(note)
    tell(total - 1, total, "spec bounds")
    report.spec = spec_check(g, sets[0])
    report.inexact = g.inexact
    return report


def _integer_edge_inputs(sets: list[dict[str, np.ndarray]], io_q: Mapping[str, Any]) -> list[dict[str, np.ndarray]]:
    """The input sets LiteRT gets for ``sets`` (the executor's, changed in place) when the model has integer
    edges (``io_q``: io="int"): float data there is quantized for the executor as TFLite's QUANTIZE would, and
    integers are given to LiteRT as the float values its QUANTIZE maps back to exactly those integers."""
    q_in = {e["name"]: e for e in io_q.get("inputs", [])}
    source_sets = [dict(s) for s in sets]
    for s, src in zip(sets, source_sets):
        for name, e in q_in.items():
            if name not in s:
                continue
            a = np.asarray(s[name])
            if np.issubdtype(a.dtype, np.floating):  # TFLite quantizes it; the executor gets the same integers
                s[name] = quantize(a, e["dtype"], e["scale"], e["zero_point"])
            else:  # integers: their float value, which TFLite's QUANTIZE maps back to exactly these integers
                src[name] = dequantize(a, e["scale"], e["zero_point"])
    return source_sets


def _litert_inputs(g: Graph, source_sets: list[dict[str, np.ndarray]], tflite: bytes | None, positional: bool,
                   as_source: Callable[[str, np.ndarray], np.ndarray]) -> tuple[list[Any], dict[str, str]]:
    """LiteRT's input sets (by tensor name, by SignatureDef key, or positional lists) and, for ``tflite``, our
    output names -> its output tensors (through the SignatureDef keys)."""
    src_names = {v.name: (v.source or v.name) for v in g.inputs}
    # another .tflite (TFLite's own conversion of a TF model): pair inputs and outputs through its SignatureDef keys,
    # which our graph records as signature_names; by position only when the keys do not cover them
    sig_in, sig_out = _signature_tensors(tflite) if tflite is not None else ({}, {})
    keys: dict[str, str] = dict(g.source.signature_names)
    by_key_in = positional and bool(g.inputs) and all(keys.get(v.name) in sig_in for v in g.inputs)
    litert_sets: list[Any] = (
        [{sig_in[keys[v.name]]: as_source(v.name, s[v.name]) for v in g.inputs} for s in source_sets] if by_key_in
        else [[as_source(v.name, s[v.name]) for v in g.inputs] for s in source_sets] if positional
        else [{src_names.get(k, k): as_source(k, a) for k, a in s.items()} for s in source_sets])
    out_tensor = {v.name: sig_out[keys[v.name]] for v in g.outputs if keys.get(v.name) in sig_out}
    return litert_sets, out_tensor


def _run_litert(source: bytes, litert_sets: list[Any], oracle: str, tell: Callable[..., Any], total: int
                ) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]] | None, str]:
    """LiteRT's outputs on ``oracle``'s kernels; with ``ref`` also on the optimized kernels (None, and a note
    saying why, when those cannot run the model)."""
    with LiteRTWorker() as worker:
        tell(0, total, f"LiteRT, {oracle} kernels")
        refs = worker.run_many(source, litert_sets, reference_kernels=oracle == "ref")
        others = None
        note = ""
        if oracle == "ref":
            tell(1, total, "LiteRT, optimized kernels")
            try:
                others = worker.run_many(source, litert_sets, reference_kernels=False)
            except LiteRTError as e:  # information only: the verdict does not depend on it
                note = f"optimized kernels could not run the model: {str(e).strip().splitlines()[-1][:200]}"
    return refs, others, note


def _pick(ref: Mapping[str, np.ndarray], i: int, name: str | None) -> np.ndarray | None:
    """Output ``name`` of a LiteRT run, else its ``i``-th output."""
    ref_list = list(ref.values())
    fallback = ref_list[i] if i < len(ref_list) else None
    return ref.get(name or "", fallback)


@dataclass
class _OptimizedDiff:
    """How far LiteRT's optimized kernels are from its reference kernels, over the outputs compared (information
    only: the verdict uses the reference kernels)."""
    diff_max: int = 0
    diff_n: int = 0
    diff_total: int = 0
    f_abs: float = 0.0
    f_ref: float = 0.0
    f_total: int = 0

    def add(self, o: np.ndarray, r: np.ndarray) -> None:
        """One output: ``o`` from the optimized kernels, ``r`` from the reference kernels."""
        if np.issubdtype(r.dtype, np.floating):
            fd = np.abs(o.astype(np.float64) - r.astype(np.float64))
            self.f_abs = max(self.f_abs, float(np.nanmax(fd)) if not np.all(np.isnan(fd)) else 0.0)
            self.f_ref = max(self.f_ref, float(np.nanmax(np.abs(r))) if not np.all(np.isnan(r)) else 0.0)
            self.f_total += int(r.size)
        else:
            d = np.abs(o.astype(np.int64) - r.astype(np.int64))
            self.diff_max = max(self.diff_max, int(d.max()))
            self.diff_n += int(np.count_nonzero(d))
            self.diff_total += int(d.size)

    def record(self, report: VerifyReport) -> None:
        """The figures as ``report.optimized_diff`` and lines of ``report.info`` (nothing when nothing compared)."""
        diff_max, diff_n, diff_total, f_abs, f_ref, f_total = (self.diff_max, self.diff_n, self.diff_total,
                                                               self.f_abs, self.f_ref, self.f_total)
        if not (diff_total or f_total):
            return
        rel = f_abs / f_ref if f_ref else f_abs
        report.optimized_diff = {"max_lsb": diff_max if diff_total else None, "elements": diff_n,
                                 "total": diff_total, "max_rel": rel if f_total else None}
        if diff_total:
            report.info.append(optimized_diff_text(diff_max, diff_n, diff_total))
        if f_total:
            report.info.append(f"optimized kernels differ by ≤ {rel:.2g} × max|ref| on float outputs (they sum in "
                               f"another order; the verdict uses the reference kernels)")


def verify_fp64(model: ConvertedModel, inputs: Sequence[Mapping[str, np.ndarray]] | None = None, *, seed: int = 0,
                num: int = 1, rtol: float = FLOAT_RTOL, progress: Any = None) -> VerifyReport:
    """Compare the executor with its own fp64 evaluation of the same program (``precise``: every float op in
    fp64, as the Arm reference model's precise mode), for sources without a runtime of their own (NNEF).

    Integer outputs must match exactly (integer arithmetic does not depend on the float precision); float ones
    within ``rtol`` x max |fp64|.  This checks the program's float rounding, not the conversion: give the
    source ``.tflite`` (``verify --reference``) for that."""
    tell = progress or (lambda *a: None)
    g = model.graph
    sets = [dict(s) for s in inputs] if inputs is not None else [random_inputs(g, seed + i) for i in range(num)]
    worst: dict[str, OutputReport] = {}
    for k, s in enumerate(sets):
        tell(k, len(sets) + 1, f"executor fp32 and fp64, input set {k + 1}/{len(sets)}")
        got, ref = run(g, s), run(g, s, precise=True)
        for v in g.outputs:
            r = np.asarray(ref[v.name])
            o = np.asarray(got[v.name])
            if r.dtype == np.float64 and o.dtype.kind == "f":
                r = r.astype(np.float64)
            rep = compare(v.name, o, r, rtol)
            prev = worst.get(v.name)
            worst[v.name] = rep if prev is None else prev.merge(rep)
    report = VerifyReport(model.source_path or g.name, len(sets), [worst[v.name] for v in g.outputs], oracle="fp64")
    tell(len(sets), len(sets) + 1, "spec bounds")
    report.spec = spec_check(g, sets[0])
    report.inexact = g.inexact
    return report


def _signature_tensors(tflite: bytes) -> tuple[dict[str, str], dict[str, str]]:
    """SignatureDef key -> tensor name for the inputs and outputs of the first signature of ``tflite``."""
    sigs = load_tflite(tflite).source.signatures
    if not sigs:
        return {}, {}
    return dict(sigs[0]["inputs"]), dict(sigs[0]["outputs"])


def optimized_diff_text(max_lsb: int, elements: int, total: int) -> str:
    """The information line on LiteRT's optimized kernels, which the verdict does not use."""
    if not elements:
        return f"optimized kernels agree with the reference kernels on all {total} integer output elements"
    return (f"optimized kernels differ by ≤ {max_lsb} LSB on {elements} of {total} elements (they round "
            f"differently; the verdict uses the reference kernels)")


def spec_check(graph: Graph, inputs: Mapping[str, np.ndarray]) -> ComplianceReport | None:
    """The spec-accuracy verdict of one run (None when the graph has no float op results)."""
    if not any(r.dtype.is_float for op in graph.ops.values() if op.opcode not in ("CONST", "CONST_SHAPE")
               for r in op.results):
        return None
    return check_graph(graph, inputs)
