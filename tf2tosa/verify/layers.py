"""Per-layer comparison: find the first layer where the TOSA program drifts from LiteRT.

LiteRT runs the ``.tflite`` with every intermediate tensor preserved (:func:`.litert.run_tflite_tensors`); the
executor runs the converted graph with ``trace=True``.  The converter's ``graph.meta["tensor_map"]`` (TFLite tensor
name -> TOSA value name, completed by the ``source`` of each value) pairs them up.  Every operator output of the
``.tflite`` that has a TOSA value is compared:

* float tensors: relative error ``max |tosa - litert| / max |litert|``, diverging above ``float_threshold``;
* integer tensors: ``max |tosa - litert|`` in LSB and the mismatch count, diverging above ``int_threshold``
  (0: bit-exact, the right bound against LiteRT's reference kernels).

The layers are ordered by the position of their TOSA producer in the graph's topological order, so the first
diverging one is upstream of every other divergence a single fault causes.  :func:`verify_layers` returns a
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

from ..ir import Graph

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
        return "\n".join(lines)

    def __str__(self) -> str:
        out = [self.summary()]
        for e in self.layers:
            flag = "DIVERGED" if e.diverged else ""
            out.append(f"  {e.position:5d} {e.op:28s} {e.tosa_op:22s} {_fmt_err(e):24s} {flag} {e.note}".rstrip())
        return "\n".join(out)


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
    tmap: dict[str, str] = dict(graph.meta.get("tensor_map", {}))
    pos, producer, by_source = _value_index(graph)
    unsigned = set(graph.meta.get("unsigned_io", ()))
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


# ------------------------------------------------------------------------------------------------ entry point
def _feed(graph: Graph, inputs: Mapping[str, np.ndarray] | None, seed: int) -> dict[str, np.ndarray]:
    """Inputs keyed by TOSA input name; ``inputs`` may use TOSA names or TFLite tensor names."""
    from .compare import random_inputs

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
    from ..executor import run
    from .litert import run_tflite_tensors

    if isinstance(model_path_or_bytes, bytes | bytearray):
        data, label = bytes(model_path_or_bytes), "<bytes>"
    else:
        data, label = Path(model_path_or_bytes).read_bytes(), os.fspath(model_path_or_bytes)
    if graph is None:
        from ..api import convert

        graph = convert(data, **dict(convert_options or {})).graph
    if reference_kernels is None:
        reference_kernels = is_quantized_tflite(data)
    feed = _feed(graph, inputs, seed)
    unsigned = set(graph.meta.get("unsigned_io", ()))
    src = {(v.source or v.name): (feed[v.name].view(np.uint8) if v.name in unsigned and feed[v.name].dtype == np.int8
                                  else feed[v.name]) for v in graph.inputs}
    tensors = run_tflite_tensors(data, src, reference_kernels=reference_kernels, worker=worker)
    trace = run(graph, feed, trace=True)
    report = compare_layers(data, graph, tensors, trace, model=label if label != "<bytes>" else graph.name,
                            reference_kernels=reference_kernels, float_threshold=float_threshold,
                            int_threshold=int_threshold)
    if out_html is not None or out_png is not None:
        from .report import render_layer_page, screenshot

        if out_html is not None:
            html_path = Path(out_html)
        else:
            assert out_png is not None
            html_path = Path(out_png).with_suffix(".html")
        from ..errors import OutputError
        from ..outputs import write_files

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


def layers_command(model: str, *, seed: int = 0, out_html: str | None = None, out_png: str | None = None,
                   float_threshold: float = FLOAT_THRESHOLD, int_threshold: float = INT_THRESHOLD,
                   show_all: bool = False, input_shapes: Mapping[str, Any] | None = None,
                   rounding: str = "double") -> tuple[str, int]:
    """The body of ``tf2tosa verify --layers MODEL``: (text to print, exit code: 0 agree, 2 a layer diverges).

    Raises :class:`~tf2tosa.errors.InputError` for a model that is not a ``.tflite`` file (the per-layer oracle is
    LiteRT's preserve-all-tensors mode)."""
    from ..errors import InputError

    p = Path(model)
    if p.is_dir() or not p.is_file() or p.read_bytes()[4:8] != b"TFL3":
        raise InputError(f"{model}: per-layer comparison needs a .tflite file")
    rep = verify_layers(model, seed=seed, out_html=out_html, out_png=out_png, float_threshold=float_threshold,
                        int_threshold=int_threshold,
                        convert_options={"input_shapes": input_shapes, "rounding": rounding})
    text = str(rep) if show_all else rep.summary()
    if out_html:
        text += f"\n  wrote {out_html}"
    if out_png:
        text += f"\n  wrote {out_png}"
    return text, 0 if rep.first_divergent is None else 2
