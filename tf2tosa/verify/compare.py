"""Verification: run the source model and the TOSA program on the same inputs and compare outputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..ir import DType, Graph
from ..tosa.profiles import element_bits, tensor_size_problem
from .spec_check import ComplianceReport, check_graph

if TYPE_CHECKING:
    from ..api import TosaModel

#: float outputs pass when max |tosa - ref| <= FLOAT_RTOL * max |ref|
FLOAT_RTOL = 1e-4


@dataclass
class OutputReport:
    name: str
    shape: tuple[int, ...]
    dtype: str
    max_abs: float
    max_ref: float
    mismatches: int
    ok: bool

    @property
    def rel(self) -> float:
        """max |error| / max |reference|."""
        return self.max_abs / self.max_ref if self.max_ref else self.max_abs


@dataclass
class VerifyReport:
    model: str
    runs: int
    outputs: list[OutputReport] = field(default_factory=list)
    #: every float op judged by the spec's accuracy rules (None for graphs without float ops)
    spec: ComplianceReport | None = None

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs) and (self.spec is None or self.spec.ok)

    def __str__(self) -> str:
        lines = [f"verify {self.model}: {self.runs} input set(s), {'PASS' if self.ok else 'FAIL'}"]
        for o in self.outputs:
            lines.append(f"  {o.name} {list(o.shape)} {o.dtype}: max_abs={o.max_abs:.3g} max|ref|={o.max_ref:.3g} "
                         f"rel={o.rel:.3g} mismatches={o.mismatches} {'ok' if o.ok else 'FAIL'}")
        if self.spec is not None:
            lines.append("  " + str(self.spec).replace("\n", "\n  "))
        return "\n".join(lines)


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random inputs for the graph's inputs, keyed by input value name."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for v in graph.inputs:
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


def compare(name: str, got: np.ndarray, ref: np.ndarray, rtol: float = FLOAT_RTOL) -> OutputReport:
    """Compare one output; integers must match exactly, floats within ``rtol`` × max |ref|."""
    g = np.asarray(got)
    r = np.asarray(ref)
    if g.shape != r.shape and g.size == r.size:
        g = g.reshape(r.shape)
    if g.shape != r.shape:
        return OutputReport(name, tuple(r.shape), str(r.dtype), float("inf"), 0.0, int(r.size), False)
    diff = np.abs(g.astype(np.float64) - r.astype(np.float64))
    max_abs = float(diff.max()) if diff.size else 0.0
    max_ref = float(np.abs(r.astype(np.float64)).max()) if r.size else 0.0
    mismatches = int(np.count_nonzero(diff))
    if np.issubdtype(r.dtype, np.floating):
        nan_ok = bool(np.array_equal(np.isnan(g), np.isnan(r)))
        ok = nan_ok and max_abs <= rtol * max(max_ref, 1e-30)
        mismatches = int(np.count_nonzero(diff > rtol * max(max_ref, 1e-30)))
    else:
        ok = mismatches == 0
    return OutputReport(name, tuple(r.shape), str(r.dtype), max_abs, max_ref, mismatches, ok)


def verify_tflite(model: TosaModel, inputs: Sequence[Mapping[str, np.ndarray]] | None = None, *, seed: int = 0,
                  num: int = 1, reference_kernels: bool = False, rtol: float = FLOAT_RTOL,
                  tflite: bytes | None = None) -> VerifyReport:
    """Run ``model.source`` (a .tflite) in LiteRT and ``model`` in the executor; compare every output.

    ``tflite`` overrides the model to run in LiteRT (e.g. TFLite's own int8 conversion of a QAT model); its inputs
    and outputs are then matched by position.
    """
    from ..executor import run
    from .litert import run_tflite_many

    g = model.graph
    sets = [dict(s) for s in inputs] if inputs is not None else [random_inputs(g, seed + i) for i in range(num)]
    src_names = {v.name: (v.source or v.name) for v in g.inputs}
    unsigned = set(g.meta.get("unsigned_io", ()))

    def as_source(name: str, a: np.ndarray) -> np.ndarray:
        """uint8 model inputs/outputs travel as i8 tensors holding the uint8 bits (tf2tosa.quant.boundary)."""
        return a.view(np.uint8) if name in unsigned and a.dtype == np.int8 else a

    # by name, unless the TFLite names cannot identify the inputs (unnamed or repeated tensor names)
    named = [v.source for v in g.inputs]
    positional = tflite is not None or not all(named) or len(set(named)) != len(named)
    source = tflite if tflite is not None else model.source
    assert source is not None
    litert_sets: list[Any] = (
        [[as_source(v.name, s[v.name]) for v in g.inputs] for s in sets] if positional
        else [{src_names.get(k, k): as_source(k, a) for k, a in s.items()} for s in sets])
    refs = run_tflite_many(source, litert_sets, reference_kernels=reference_kernels)
    worst: dict[str, OutputReport] = {}
    for s, ref in zip(sets, refs):
        got = run(g, s)
        ref_list = list(ref.values())
        for i, v in enumerate(g.outputs):
            r = ref_list[i] if positional else ref.get(v.source or "", ref_list[i] if i < len(ref_list) else None)
            if r is None:
                continue
            rep = compare(v.name, as_source(v.name, got[v.name]), r, rtol)
            prev = worst.get(v.name)
            if prev is None or (not rep.ok and prev.ok) or rep.rel > prev.rel:
                if prev is not None:
                    rep.mismatches += prev.mismatches
                worst[v.name] = rep
            else:
                prev.mismatches += rep.mismatches
    report = VerifyReport(model.source_path or g.name, len(sets), [worst[v.name] for v in g.outputs if v.name in worst])
    report.spec = spec_check(g, sets[0])
    return report


def spec_check(graph: Graph, inputs: Mapping[str, np.ndarray]) -> ComplianceReport | None:
    """The spec-accuracy verdict of one run (None when the graph has no float op results)."""
    if not any(r.dtype.is_float for op in graph.ops.values() if op.opcode not in ("CONST", "CONST_SHAPE")
               for r in op.results):
        return None
    return check_graph(graph, inputs)
