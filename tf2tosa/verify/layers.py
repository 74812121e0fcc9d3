"""Per-layer comparison: find the first layer where the TOSA program drifts from LiteRT.

LiteRT runs the ``.tflite`` with every intermediate tensor preserved (:func:`.litert.run_tflite_tensors`); the
executor runs the converted graph with ``trace=True``.  The converter's ``graph.record.tensor_map`` (TFLite tensor
name -> TOSA value name, completed by the ``source`` of each value) pairs them up.  Every operator output of the
``.tflite`` that has a TOSA value is compared:

* float tensors: relative error ``max |tosa - litert| / max |litert|``, diverging above ``float_threshold``;
* integer tensors: ``max |tosa - litert|`` in LSB and the mismatch count, diverging above ``int_threshold``
  (0: bit-exact, the right bound against LiteRT's reference kernels).

The layers are ordered by the position of their TOSA producer in the graph's topological order, so the first
diverging one is upstream of every other divergence a single fault causes.

Float drift is classified per layer (:func:`classify_drift`): the TOSA ops the layer was lowered to (the ops whose
location is the layer's ``"CONV_2D#3"``) are re-run on LiteRT's own input tensors of that layer, in fp32 and in fp64,
which isolates what this layer adds from what it inherits.  Both fp32 results (ours and LiteRT's) are measured against
the fp64 one with the bound the spec gives the layer's operation as a single TOSA op: the dot-product bound of §1.10.3
(KS of the dot-product op) for convolutions, fully-connected, matmul, pooling and sums, the op's ULP / absolute bound
for a one-op layer.  ``within`` means our result stays inside that bound (the difference from LiteRT is accumulation
order or rounding the spec allows), ``beyond`` that it does not (the lowering adds rounding steps a single op would
not have), ``composite`` a layer lowered to several rounding ops with no single TOSA op to take a bound from (its
error is reported in units of the output's ulp), ``exact`` a layer equal to LiteRT's.  :func:`verify_layers` returns a
:class:`LayerReport`; ``out_html`` writes a self-contained page with the error-by-layer plot (and ``out_png`` a
screenshot of it through headless Chromium when one is installed).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..converter.source import convert_tflite_data
from ..errors import OutputError
from ..executor import evaluate_op, run
from ..executor.compliance import (
    abs_bound,
    calc_abs_error_bound,
    kernel_size,
    normal_frac,
    normal_min,
    op_accuracy,
    ulp_error_bound,
)
from ..executor.registry import PRECISE
from ..ir import DType, Graph, Operation, Value
from ..options import ConvertOptions
from ..outputs import write_files
from .compare import random_inputs
from .litert import run_tflite_tensors
from .report import render_layer_page, screenshot

FLOAT_THRESHOLD = 1e-4
INT_THRESHOLD = 0.0


@dataclass
class LayerEntry:
    """One compared TFLite tensor and its TOSA value."""

    position: int  # index of the TOSA producer in topological order
    tensor: str  # TFLite tensor name
    tensor_index: int
    op: str  # producing TFLite operator, "CONV_2D#3" (the converter's op location format)
    tosa_value: str
    tosa_op: str  # producing TOSA op, "tosa.CLAMP"
    shape: tuple[int, ...]
    dtype: str
    metric: str  # "rel" (float) or "lsb" (integer)
    error: float
    mismatches: int
    size: int
    diverged: bool = False
    note: str = ""
    #: float drift class (see the module docstring): "exact" | "within" | "beyond" | "composite" | "" (unclassified)
    drift: str = ""
    #: max |ours - fp64| / spec bound on LiteRT's inputs of the layer (<= 1: within); LiteRT's own ratio
    bound_ratio: float | None = None
    litert_bound_ratio: float | None = None
    #: the bound used ("dot-product KS=27", "0.5 ulp", "composite of 4 ops: ulp of the output")
    bound: str = ""
    #: max |ours - LiteRT| / max |LiteRT| with both on LiteRT's inputs of the layer (what this layer adds)
    local_error: float | None = None


@dataclass
class LayerReport:
    """The per-layer comparison of one model on one input set."""

    model: str
    reference_kernels: bool
    float_threshold: float
    int_threshold: float
    layers: list[LayerEntry] = field(default_factory=list)
    #: TFLite operator outputs that have no TOSA value to compare with (fused away, or not mapped)
    unmapped: list[str] = field(default_factory=list)
    outputs_ok: bool = True

    @property
    def first_divergent(self) -> LayerEntry | None:
        """The first diverging layer in topological order (None when every layer agrees)."""
        return next((e for e in self.layers if e.diverged), None)

    @property
    def diverged(self) -> list[LayerEntry]:
        return [e for e in self.layers if e.diverged]

    @property
    def drift_counts(self) -> dict[str, int]:
        """How many float layers fall in each drift class."""
        out: dict[str, int] = {}
        for e in self.layers:
            if e.drift:
                out[e.drift] = out.get(e.drift, 0) + 1
        return out

    def drift_summary(self) -> str:
        """One line: are the float differences accumulation order (every layer within the spec bound) or not."""
        c = self.drift_counts
        if not c:
            return "float drift: no float layers classified"
        beyond = [e for e in self.layers if e.drift == "beyond"]
        parts = [f"{c[k]} {k}" for k in ("exact", "within", "beyond", "composite") if c.get(k)]
        if beyond:
            w = max(beyond, key=lambda e: e.bound_ratio or 0.0)
            verdict = (f"{len(beyond)} layer(s) beyond the spec bound: a lowering choice adds rounding (worst "
                       f"{w.op}, {w.bound_ratio:.3g}x its {w.bound} bound)")
        else:
            verdict = "every layer with a spec bound is within it: the differences are accumulation order"
        if c.get("composite"):
            verdict += f"; {c['composite']} composite layer(s) have no single-op bound (error shown in ulp)"
        return f"float drift: {', '.join(parts)} - {verdict}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        first = self.first_divergent
        d["first_divergent"] = None if first is None else asdict(first)
        return d

    def summary(self) -> str:
        first = self.first_divergent
        lines = [f"layers {self.model}: {len(self.layers)} compared, {len(self.unmapped)} unmapped, "
                 f"{len(self.diverged)} diverging ({'BUILTIN_REF' if self.reference_kernels else 'default'} kernels; "
                 f"thresholds rel {self.float_threshold:g}, {self.int_threshold:g} LSB)"]
        if first is None:
            lines.append("  no diverging layer")
        else:
            lines.append(f"  first divergent: {first.op} -> {first.tensor!r} (TOSA {first.tosa_op} "
                         f"{first.tosa_value}): {_fmt_err(first)}")
        if self.drift_counts:
            lines.append("  " + self.drift_summary())
        return "\n".join(lines)

    def __str__(self) -> str:
        out = [self.summary()]
        for e in self.layers:
            flag = "DIVERGED" if e.diverged else ""
            out.append(f"  {e.position:5d} {e.op:28s} {e.tosa_op:22s} {_fmt_err(e):24s} {_fmt_drift(e):34s} {flag} "
                       f"{e.note}".rstrip())
        return "\n".join(out)


def _fmt_drift(e: LayerEntry) -> str:
    if not e.drift or e.drift == "exact":
        return e.drift
    if e.bound_ratio is None:
        return e.drift
    lit = f", LiteRT {e.litert_bound_ratio:.2g}" if e.litert_bound_ratio is not None else ""
    if e.drift == "composite":
        return f"composite {e.bound_ratio:.3g} ulp{lit}"
    return f"{e.drift} {e.bound_ratio:.3g}x bound{lit}"


def _fmt_err(e: LayerEntry) -> str:
    if e.metric == "rel":
        return f"rel {e.error:.3g} ({e.mismatches}/{e.size} above)"
    return f"{e.error:g} LSB ({e.mismatches}/{e.size} differ)"


# ------------------------------------------------------------------------------------------------ TFLite side
@dataclass
class _TflOp:
    index: int
    name: str  # "CONV_2D"
    inputs: list[int]
    outputs: list[int]


def _read_tflite(buf: bytes) -> tuple[list[str], set[int], list[_TflOp]]:
    """Tensor names, constant tensor indices and operators (execution order) of the main subgraph."""
    import tflite

    m = tflite.Model.GetRootAsModel(buf, 0)
    sg = m.Subgraphs(0)
    builtin = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)}
    codes = []
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
        name = builtin.get(code, f"BUILTIN_{code}")
        if name == "CUSTOM" and oc.CustomCode():
            name = f"CUSTOM:{oc.CustomCode().decode()}"
        codes.append(name)
    names: list[str] = []
    consts: set[int] = set()
    for t in range(sg.TensorsLength()):
        ten = sg.Tensors(t)
        names.append(ten.Name().decode("utf-8") if ten.Name() else f"tensor_{t}")
        b = ten.Buffer()
        if b > 0 and b < m.BuffersLength() and m.Buffers(b).DataLength() > 0:
            consts.add(t)
    ops = []
    for i in range(sg.OperatorsLength()):
        o = sg.Operators(i)
        ins = [int(x) for x in o.InputsAsNumpy()] if o.InputsLength() else []
        outs = [int(x) for x in o.OutputsAsNumpy()] if o.OutputsLength() else []
        ops.append(_TflOp(i, codes[o.OpcodeIndex()], ins, outs))
    return names, consts, ops


# ------------------------------------------------------------------------------------------------ comparison
def _compare(ref: np.ndarray, got: np.ndarray, float_threshold: float) -> tuple[str, float, int]:
    r = np.asarray(ref)
    g = np.asarray(got)
    if r.dtype == np.bool_ or g.dtype == np.bool_:
        mism = int(np.count_nonzero(r.astype(bool) != g.astype(bool)))
        return "lsb", float(mism > 0), mism
    diff = np.abs(g.astype(np.float64) - r.astype(np.float64))
    if np.issubdtype(r.dtype, np.floating):
        nan_diff = np.isnan(r) != np.isnan(g)
        diff = np.where(np.isnan(diff), 0.0, diff)
        scale = float(np.abs(np.nan_to_num(r.astype(np.float64))).max()) if r.size else 0.0
        rel = float(diff.max() / scale) if scale and diff.size else float(diff.max() if diff.size else 0.0)
        if nan_diff.any():
            rel = float("inf")
        mism = int(np.count_nonzero(diff > float_threshold * max(scale, 1e-30))) + int(np.count_nonzero(nan_diff))
        return "rel", rel, mism
    return "lsb", float(diff.max()) if diff.size else 0.0, int(np.count_nonzero(diff))


def _value_index(graph: Graph) -> tuple[dict[str, int], dict[str, str], dict[str, str]]:
    """value name -> topological position of its producer, value name -> producing op, source -> value name."""
    pos: dict[str, int] = {}
    producer: dict[str, str] = {}
    by_source: dict[str, str] = {}
    for v in graph.inputs:
        pos[v.name] = -1
        producer[v.name] = "input"
        if v.source:
            by_source.setdefault(v.source, v.name)
    for i, op in enumerate(graph.topological_order()):
        for r in op.results:
            pos[r.name] = i
            producer[r.name] = op.name
            if r.source:
                by_source[r.source] = r.name  # the last value carrying a source is the one the rule returned
    for v in graph.outputs:  # outputs are renamed after legalization; their source is authoritative
        if v.source:
            by_source[v.source] = v.name
    return pos, producer, by_source


def compare_layers(tflite: bytes, graph: Graph, litert_tensors: Mapping[int, np.ndarray],
                   trace: Mapping[str, np.ndarray], *, model: str = "<model>", reference_kernels: bool = False,
                   float_threshold: float = FLOAT_THRESHOLD, int_threshold: float = INT_THRESHOLD) -> LayerReport:
    """Compare LiteRT's tensors (by index) with the executor's trace (by value name); see the module docstring."""
    names, consts, ops = _read_tflite(tflite)
    tmap: dict[str, str] = graph.tensor_map
    pos, producer, by_source = _value_index(graph)
    unsigned = graph.unsigned_io
    report = LayerReport(model, reference_kernels, float_threshold, int_threshold)
    seen_values: set[str] = set()
    entries: list[tuple[int, int, LayerEntry]] = []
    for op in ops:
        if all(i < 0 or i in consts for i in op.inputs) and op.inputs:
            continue  # a constant expression (DEQUANTIZE of fp16 weights): folded away, not a layer
        for t in op.outputs:
            if t < 0:
                continue
            name = names[t]
            vname = tmap.get(name)
            if vname is None or vname not in trace:
                vname = by_source.get(name)
            if vname is None or vname not in trace:
                report.unmapped.append(f"{op.name}#{op.index}:{name}")
                continue
            ref = litert_tensors.get(t)
            if ref is None:
                report.unmapped.append(f"{op.name}#{op.index}:{name} (LiteRT kept no value)")
                continue
            got = np.asarray(trace[vname])
            if vname in unsigned and got.dtype == np.int8:
                got = got.view(np.uint8)
            note = ""
            if got.shape != ref.shape:
                if got.size != ref.size:
                    report.unmapped.append(f"{op.name}#{op.index}:{name} (shape {list(ref.shape)} vs TOSA "
                                           f"{list(got.shape)})")
                    continue
                got = got.reshape(ref.shape)
            if producer.get(vname) == "tosa.CONST":
                continue
            metric, err, mism = _compare(ref, got, float_threshold)
            thr = float_threshold if metric == "rel" else int_threshold
            if vname in seen_values:
                note = "same TOSA value as an earlier tensor"
            seen_values.add(vname)
            entries.append((pos.get(vname, -1), op.index, LayerEntry(
                position=pos.get(vname, -1), tensor=name, tensor_index=t, op=f"{op.name}#{op.index}",
                tosa_value=vname, tosa_op=producer.get(vname, "?"), shape=tuple(int(d) for d in ref.shape),
                dtype=str(ref.dtype), metric=metric, error=err, mismatches=mism, size=int(ref.size),
                diverged=bool(err > thr), note=note)))
    entries.sort(key=lambda x: (x[0], x[1]))
    report.layers = [e for _, _, e in entries]
    out_names = {v.name for v in graph.outputs}
    report.outputs_ok = not any(e.diverged for e in report.layers if e.tosa_value in out_names)
    return report


# ------------------------------------------------------------------------------------------------ float drift

#: TFLite ops that are one dot product (the spec's §1.10.3 bound applies to them as a whole)
_DOT_LAYERS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL", "TRANSPOSE_CONV",
                         "AVERAGE_POOL_2D", "MEAN", "SUM", "CONV_3D", "CONV_3D_TRANSPOSE",
                         "CUSTOM:Convolution2DTransposeBias"})


def _layer_ops(graph: Graph) -> dict[str, list[Operation]]:
    """TOSA ops (constants aside) by the location of the TFLite op they were lowered from, in topological order."""
    out: dict[str, list[Operation]] = {}
    for op in graph.topological_order():
        if op.opcode in ("CONST", "CONST_SHAPE") or not op.location:
            continue
        out.setdefault(op.location, []).append(op)
    return out


def _ancestors_within(ops: list[Operation], target: str) -> list[Operation]:
    """The ops of ``ops`` that ``target`` depends on (through ops of the list), in order."""
    by_result = {r.name: op for op in ops for r in op.results}
    need: set[int] = set()
    stack = [target]
    while stack:
        op = by_result.get(stack.pop())
        if op is None or op.id in need:
            continue
        need.add(op.id)
        stack.extend(v.name for v in op.operands)
    return [op for op in ops if op.id in need]


def _eval_chain(ops: list[Operation], ext: Mapping[str, np.ndarray], precise: bool,
                abs_inputs: bool = False) -> dict[str, np.ndarray]:
    """Evaluate ``ops`` in order from the external values ``ext`` (fp64 per op when ``precise``)."""
    env: dict[str, np.ndarray] = {}
    token = PRECISE.set(precise)
    try:
        for op in ops:
            ins = []
            for v in op.operands:
                a = env[v.name] if v.name in env else ext[v.name]
                if abs_inputs and v.type.dtype.is_float:
                    a = np.abs(a)
                ins.append(a)
            if abs_inputs and op.results[0].type.dtype.is_float and op.opcode in ("CLAMP", "SUB", "MINIMUM"):
                # the bound evaluation (§1.10.3: the operation on absolute values) of a layer: a fused activation
                # does not shrink the accumulation's error bound, and differences add magnitudes
                shape = tuple(int(d) for d in op.results[0].shape)
                out = ins[0] if op.opcode == "CLAMP" else ins[0] + ins[1] if op.opcode == "SUB" else \
                    np.maximum(ins[0], ins[1])
                env[op.results[0].name] = np.broadcast_to(np.asarray(out, np.float64), shape)
                continue
            for r, a in zip(op.results, evaluate_op(op, ins)):
                env[r.name] = a
    finally:
        PRECISE.reset(token)
    return env


def _single_op_bound(op: Operation, ins: list[np.ndarray], ref64: np.ndarray) -> tuple[np.ndarray, str] | None:
    """The spec's elementwise error bound of ``op``'s result (an ULP or absolute bound; fp64 reference ``ref64``),
    and its name."""
    acc = op_accuracy(op)
    dt = op.results[0].type.dtype
    ref = np.asarray(ref64, np.float64)
    if acc.mode == "ulp":
        return ulp_error_bound(ref, dt, float(acc.ulp or 0)), f"{acc.ulp:g} ulp"
    if acc.mode == "abs":
        return abs_bound(op.opcode, dt, ref, ins[0], ins[1] if len(ins) > 1 else None), f"{op.opcode} abs"
    if acc.mode == "resize":  # spec 2.12.1 RESIZE
        m = float(np.max(np.abs(np.asarray(ins[0], np.float64)))) if np.size(ins[0]) else 0.0
        rb = max(float(calc_abs_error_bound(dt, m, 20.0, 0, 1)), m * 0.006)
        return np.full(ref.shape, rb), "RESIZE"
    if acc.mode == "reduce_product":  # spec 2.9.5 REDUCE_PRODUCT
        n = int(np.shape(ins[0])[int(op.attrs["axis"])])
        pb = np.maximum(np.abs(ref), normal_min(dt)) * ((1 + 2.0 ** (-normal_frac(dt) - 1)) ** n - 1)
        return pb, f"REDUCE_PRODUCT n={n}"
    return None


def _dot_layer_bound(ops: list[Operation], dots: list[Operation], ext: Mapping[str, np.ndarray], target: str
                     ) -> tuple[np.ndarray, str]:
    """The dot-product bound (§1.10.3) of a layer computed by the dot-product ops ``dots`` (nested ones, like the two
    REDUCE_SUMs of a MEAN, form one dot product of length ΠKS), judged as one op: ``ksb · max(B · 2^(-1-frac),
    normal_min)`` with B the layer on the absolute values of its inputs (fused activations passed through) and one
    more ulp when a bias is added."""
    env_abs = _eval_chain(ops, ext, precise=True, abs_inputs=True)
    # KS of the whole layer: the number of products summed into an output; nested sums multiply, partial sums
    # joined by ADD/SUB add, constants contribute no products
    terms: dict[str, int] = {}
    for op in ops:
        ts = [terms.get(v.name, 0 if v.is_const else 1) for v in op.operands]
        if op in dots:
            t = kernel_size(op) * max(ts[0], 1)
        elif op.opcode in ("ADD", "SUB"):
            t = ts[0] + ts[1]
        else:
            t = max(ts, default=1)
        for r in op.results:
            terms[r.name] = t
    ks = max(terms.get(target, 1), 1)
    dt = next(r for r in ops[-1].results if r.name == target).type.dtype
    dt = dt if dt.is_float else DType.FP32
    last = dots[-1]
    acc_t = {"FP16": DType.FP16, "FP32": DType.FP32}.get(str(last.attrs.get("acc_type", "")).upper(), dt)

    def value(v: Value) -> np.ndarray:
        return np.asarray(ext[v.name] if v.name in ext else env_abs[v.name], np.float64)

    has_bias = any(d.opcode in ("CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D") and len(d.operands) > 2
                   and bool(np.any(value(d.operands[2]) != 0)) for d in dots) or \
        any(op.opcode == "ADD" and any(v.name in ext for v in op.operands) for op in ops if op not in dots)
    ksb = int(np.ceil(ks / 2.0 ** ((normal_frac(acc_t) - normal_frac(dt)) / 2))) + (1 if has_bias else 0)
    b = np.asarray(env_abs[target], np.float64).reshape(-1)
    return ksb * np.maximum(b * 2.0 ** (-1 - normal_frac(dt)), normal_min(dt)), f"dot-product KS={ks}"


def classify_drift(tflite: bytes, graph: Graph, report: LayerReport, litert_tensors: Mapping[int, np.ndarray],
                   trace: Mapping[str, np.ndarray]) -> None:
    """Fill ``drift`` / ``bound_ratio`` / ``litert_bound_ratio`` / ``bound`` / ``local_error`` of the float layers
    of ``report`` (see the module docstring)."""
    names, _, _ = _read_tflite(tflite)
    index = {n: i for i, n in enumerate(names)}
    tensor_of = _tensor_sources(graph)
    consts = {r.name: op for op in graph.ops.values() if op.opcode in ("CONST", "CONST_SHAPE") for r in op.results}
    layer_ops = _layer_ops(graph)

    def external(v: Value) -> np.ndarray:
        t = index.get(tensor_of.get(v.name, ""))
        ref = litert_tensors.get(t) if t is not None else None
        if ref is not None and v.type.dtype.is_float and np.asarray(ref).size == int(np.prod(v.shape)):
            return np.asarray(ref).reshape(tuple(int(d) for d in v.shape)).astype(v.type.dtype.np_dtype())
        if v.name in trace:
            return np.asarray(trace[v.name])
        op = consts.get(v.name)
        if op is not None:
            return evaluate_op(op, [])[0]
        raise KeyError(v.name)

    for e in report.layers:
        if e.metric != "rel" or not np.issubdtype(np.dtype(e.dtype), np.floating):
            continue
        if e.error == 0.0:
            e.drift = "exact"
            continue
        ops = _ancestors_within(layer_ops.get(e.op, []), e.tosa_value)
        if not ops or not any(r.name == e.tosa_value for r in ops[-1].results):
            continue
        produced = {r.name for op in ops for r in op.results}
        try:
            ext = {v.name: external(v) for op in ops for v in op.operands if v.name not in produced}
            env32 = _eval_chain(ops, ext, precise=False)
            env64 = _eval_chain(ops, ext, precise=True)
        except Exception:  # noqa: BLE001 - a layer that cannot be isolated stays unclassified
            continue
        ours = np.asarray(env32[e.tosa_value], np.float64).reshape(-1)
        ref64 = np.asarray(env64[e.tosa_value], np.float64).reshape(-1)
        lit_raw = litert_tensors.get(e.tensor_index)
        if lit_raw is None or np.asarray(lit_raw).size != ours.size:
            continue
        lit = np.asarray(lit_raw, np.float64).reshape(-1)
        scale = float(np.abs(lit).max()) if lit.size else 0.0
        e.local_error = float(np.abs(ours - lit).max() / scale) if scale else float(np.abs(ours - lit).max())
        _classify_layer(e, ops, ext, env64, ours, ref64, lit)


def _tensor_sources(graph: Graph) -> dict[str, str]:
    """The TFLite tensor name of each TOSA value that has one: the graph's tensor map, then the source recorded on
    op results and graph inputs."""
    tmap: dict[str, str] = graph.tensor_map
    tensor_of: dict[str, str] = {v: t for t, v in tmap.items()}
    for op in graph.topological_order():
        for r in op.results:
            if r.source and r.name not in tensor_of:
                tensor_of[r.name] = r.source
    for v in graph.inputs:
        if v.source:
            tensor_of.setdefault(v.name, v.source)
    return tensor_of


def _classify_layer(e: LayerEntry, ops: list[Operation], ext: Mapping[str, np.ndarray],
                    env64: Mapping[str, np.ndarray], ours: np.ndarray, ref64: np.ndarray, lit: np.ndarray) -> None:
    """Fill the drift fields of the float layer ``e`` computed by ``ops``: its bound, and our and LiteRT's errors
    against the fp64 result in units of that bound."""
    rounding = [op for op in ops if any(r.type.dtype.is_float for r in op.results)
                and op_accuracy(op).mode not in ("exact", "none")]
    narrowing = [op for op in ops if op.opcode == "CAST" and op.operands[0].type.dtype.is_float
                 and op.results[0].type.dtype.is_float
                 and op.results[0].type.dtype.bits < op.operands[0].type.dtype.bits]
    dots = [op for op in rounding if op_accuracy(op).mode == "dot_product"]
    if not rounding:  # data movement, max pooling …: the spec wants the exact result
        e.bound = "exact ops"
        e.bound_ratio = 0.0 if np.array_equal(ours, ref64, equal_nan=True) else float("inf")
        e.litert_bound_ratio = 0.0 if np.array_equal(lit, ref64, equal_nan=True) else float("inf")
        e.drift = "within" if e.bound_ratio == 0.0 else "beyond"
        return
    bound = _rounding_bound(e, ops, rounding, dots, ext, env64, ours.size)
    if bound is None:  # several rounding ops and no dot product: in units of the output's ulp

        dt = ops[-1].results[0].type.dtype if ops[-1].results[0].type.dtype.is_float else DType.FP32
        bound = (np.asarray(ulp_error_bound(ref64, dt, 1.0), np.float64).reshape(-1),
                 f"composite of {len(rounding)} rounding ops: ulp of the output")
        e.drift = "composite"
    b, e.bound = bound
    fin = np.isfinite(ref64) & np.isfinite(b) & (b > 0)
    with np.errstate(all="ignore"):
        e.bound_ratio = float(np.max(np.abs(ours[fin] - ref64[fin]) / b[fin])) if fin.any() else 0.0
        e.litert_bound_ratio = float(np.max(np.abs(lit[fin] - ref64[fin]) / b[fin])) if fin.any() else 0.0
    if not e.drift:
        e.drift = "within" if e.bound_ratio <= 1.0 else "beyond"
        steps = len(rounding) + len(narrowing)
        if e.drift == "beyond" and steps > 1:
            e.note = (e.note + "; " if e.note else "") + f"{steps} rounding steps where one op would do"


def _rounding_bound(e: LayerEntry, ops: list[Operation], rounding: list[Operation], dots: list[Operation],
                    ext: Mapping[str, np.ndarray], env64: Mapping[str, np.ndarray], size: int
                    ) -> tuple[np.ndarray, str] | None:
    """The error bound of a layer whose ops round: the dot-product bound of a dot layer, or the bound of its one
    rounding op; None when neither applies."""
    bound: tuple[np.ndarray, str] | None = None
    if dots and e.op.split("#")[0] in _DOT_LAYERS:
        bound = _dot_layer_bound(ops, dots, ext, e.tosa_value)
    elif len(rounding) == 1 and not dots:
        main = rounding[0]
        main_ins = [env64[v.name] if v.name in env64 else ext[v.name] for v in main.operands]
        got = _single_op_bound(main, main_ins, env64[main.results[0].name])
        if got is not None and np.asarray(got[0]).size == size:
            bound = (np.asarray(got[0], np.float64).reshape(-1), got[1])
    return bound


# ------------------------------------------------------------------------------------------------ entry point
def _feed(graph: Graph, inputs: Mapping[str, np.ndarray] | None, seed: int) -> dict[str, np.ndarray]:
    """Inputs keyed by TOSA input name; ``inputs`` may use TOSA names or TFLite tensor names."""
    feed = random_inputs(graph, seed)
    if inputs:
        for v in graph.inputs:
            for key in (v.name, v.source):
                if key is not None and key in inputs:
                    arr = np.asarray(inputs[key])
                    feed[v.name] = arr.view(np.int8) if arr.dtype == np.uint8 else arr
    return feed


def is_quantized_tflite(buf: bytes) -> bool:
    """True when operators of the ``.tflite`` produce int8/uint8/int16 tensors (a quantized model, even with float
    inputs and outputs): its oracle is LiteRT's reference kernels."""
    import tflite

    m = tflite.Model.GetRootAsModel(buf, 0)
    sg = m.Subgraphs(0)
    quantized = {tflite.TensorType.INT8, tflite.TensorType.UINT8, tflite.TensorType.INT16}
    for i in range(sg.OperatorsLength()):
        o = sg.Operators(i)
        for t in (o.OutputsAsNumpy() if o.OutputsLength() else []):
            if 0 <= t < sg.TensorsLength() and sg.Tensors(int(t)).Type() in quantized:
                return True
    return False


def verify_layers(model_path_or_bytes: str | os.PathLike[str] | bytes, inputs: Mapping[str, np.ndarray] | None = None,
                  seed: int = 0, out_html: str | os.PathLike[str] | None = None, *, graph: Graph | None = None,
                  reference_kernels: bool | None = None, float_threshold: float = FLOAT_THRESHOLD,
                  int_threshold: float = INT_THRESHOLD, worker: Any = None,
                  out_png: str | os.PathLike[str] | None = None,
                  convert_options: Mapping[str, Any] | None = None) -> LayerReport:
    """Convert a ``.tflite`` (unless ``graph``, an already converted — possibly modified — graph, is given), run it
    in LiteRT with all tensors preserved and in the executor with a trace, and compare layer by layer.

    ``inputs`` (by TOSA or TFLite input name) default to seeded random inputs.  ``reference_kernels`` defaults to
    True for quantized models (LiteRT's BUILTIN_REF kernels, the bit-exact oracle).  ``worker`` is an optional
    :class:`.litert.LiteRTWorker`; ``convert_options`` are passed to :func:`tf2tosa.convert` (``input_shapes``,
    ``rounding``).
    """
    if isinstance(model_path_or_bytes, bytes | bytearray):
        data, label = bytes(model_path_or_bytes), "<bytes>"
    else:
        data, label = Path(model_path_or_bytes).read_bytes(), os.fspath(model_path_or_bytes)
    if graph is None:
        options = ConvertOptions.from_keywords("convert", **dict(convert_options or {}))
        graph = convert_tflite_data(data, "<bytes>", options)
    if reference_kernels is None:
        reference_kernels = is_quantized_tflite(data)
    feed = _feed(graph, inputs, seed)
    unsigned = graph.unsigned_io
    src = {(v.source or v.name): (feed[v.name].view(np.uint8) if v.name in unsigned and feed[v.name].dtype == np.int8
                                  else feed[v.name]) for v in graph.inputs}
    tensors = run_tflite_tensors(data, src, reference_kernels=reference_kernels, worker=worker)
    trace = run(graph, feed, trace=True)
    report = compare_layers(data, graph, tensors, trace, model=label if label != "<bytes>" else graph.name,
                            reference_kernels=reference_kernels, float_threshold=float_threshold,
                            int_threshold=int_threshold)
    classify_drift(data, graph, report, tensors, trace)
    if out_html is not None or out_png is not None:
        if out_html is not None:
            html_path = Path(out_html)
        else:
            assert out_png is not None
            html_path = Path(out_png).with_suffix(".html")

        page = render_layer_page(report).encode("utf-8")
        files: dict[str | os.PathLike[str], bytes | Callable[[Path], None]] = {html_path: page}
        if out_png is not None:
            def shot(tmp: Path) -> None:  # the staged PNG is taken of the page's final content
                with tempfile.TemporaryDirectory(prefix="tf2tosa-page-") as d:
                    src = Path(d) / "page.html"
                    src.write_bytes(page)
                    try:
                        screenshot(src, tmp, width=1200, height=900)
                    except RuntimeError as e:
                        raise OutputError(f"cannot write {out_png}: {str(e).splitlines()[0][:200]}") from None

            files[Path(out_png)] = shot
        write_files(files)  # the page and its PNG: both or neither
    return report
