"""Per-layer comparison (tf2tosa.verify.layers): clean conversions agree layer by layer, and an injected fault —
one perturbed weight in a copy of the converted graph — is reported as the first diverging layer."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import requires_litert

import tf2tosa
from tf2tosa.ir import Graph, Operation
from tf2tosa.verify.layers import compare_layers, verify_layers  # noqa: F401 (the import checks the export)

pytestmark = requires_litert


def _weight_op(graph: Graph, op: Operation) -> Operation:
    w = op.operands[1]
    assert w.producer is not None and w.is_const, f"{op.location}: weight is not a constant"
    return w.producer


def _perturb(graph: Graph, target_location: str) -> Graph:
    """A copy of ``graph`` with one weight of the CONV2D at ``target_location`` changed."""
    g = copy.deepcopy(graph)
    conv = next(op for op in g.topological_order() if op.name == "tosa.CONV2D" and op.location == target_location)
    const = _weight_op(g, conv)
    w = np.array(const.attrs["values"], copy=True)
    flat = w.reshape(-1)
    k = int(np.argmax(np.abs(flat.astype(np.float64))))
    if np.issubdtype(w.dtype, np.floating):
        flat[k] = -3.0 * flat[k] if flat[k] else 1.0
    else:
        info = np.iinfo(w.dtype)
        flat[k] = info.min + 1 if flat[k] > 0 else info.max
    const.attrs["values"] = w
    return g


@pytest.mark.parametrize("quant", [None, "int8"])
def test_injected_fault_is_first_divergent(tflite_model: Callable[..., bytes], quant: str | None) -> None:
    data = tflite_model("small_cnn", quant=quant)
    model = tf2tosa.convert(data)
    clean = verify_layers(data, graph=model.graph, seed=0)
    assert clean.first_divergent is None, clean.summary()
    assert len(clean.layers) >= 6
    assert clean.reference_kernels == (quant is not None)

    convs = [op for op in model.graph.topological_order() if op.name == "tosa.CONV2D"]
    target = convs[1].location  # the second convolution: its upstream layers must still agree
    assert target is not None
    faulty = _perturb(model.graph, target)
    rep = verify_layers(data, graph=faulty, seed=0)
    first = rep.first_divergent
    assert first is not None, rep.summary()
    assert first.op == target, f"first divergent {first.op}, fault injected in {target}\n{rep}"
    upstream = [e for e in rep.layers if e.position < first.position]
    assert upstream and not any(e.diverged for e in upstream)
    assert not rep.outputs_ok or quant is not None  # float outputs drift; an int8 softmax may saturate
    # the original graph was not touched
    assert verify_layers(data, graph=model.graph, seed=0).first_divergent is None


def test_layer_page_marks_the_first_divergent(tflite_model: Callable[..., bytes], tmp_path: Path) -> None:
    data = tflite_model("small_cnn")
    model = tf2tosa.convert(data)
    target = [op for op in model.graph.topological_order() if op.name == "tosa.CONV2D"][0].location
    assert target is not None
    out = tmp_path / "layers.html"
    rep = verify_layers(data, graph=_perturb(model.graph, target), out_html=out)
    assert rep.first_divergent is not None and rep.first_divergent.op == target
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert f"first divergent: {target}" in page
    assert rep.to_dict()["first_divergent"]["op"] == target


def test_every_op_output_is_mapped(tflite_model: Callable[..., bytes]) -> None:
    """The converter's tensor map (plus value sources) covers every operator output of a plain CNN."""
    data = tflite_model("small_cnn")
    rep = verify_layers(data, seed=1)
    assert rep.unmapped == [], rep.unmapped
    from tf2tosa.verify.litert import model_op_names

    assert len(rep.layers) == len(model_op_names(data))


def test_compare_layers_thresholds() -> None:
    """A float error just above the threshold diverges; integer tensors need exact equality by default."""
    from tf2tosa.verify.layers import _compare

    ref = np.array([1.0, -2.0, 4.0], np.float32)
    metric, err, mism = _compare(ref, ref + np.float32(1e-3), 1e-4)
    assert metric == "rel" and err == pytest.approx(2.5e-4, rel=1e-3) and mism == 3
    metric, err, mism = _compare(np.array([1, 2, 3], np.int8), np.array([1, 2, 5], np.int8), 1e-4)
    assert (metric, err, mism) == ("lsb", 2.0, 1)


def test_layers_summary_and_page(tflite_model: Callable[..., bytes], tmp_path: Path) -> None:
    """What ``tf2tosa verify --layers --layers-html`` prints and writes for a clean model: a summary naming the
    LiteRT oracle, no diverging layer, and an HTML page with its one error plot."""
    from tf2tosa.verify.layers import verify_layers

    path = tmp_path / "m.tflite"
    path.write_bytes(tflite_model("small_cnn", quant="int8"))
    rep = verify_layers(str(path), out_html=str(tmp_path / "l.html"))
    text = rep.summary()
    assert rep.first_divergent is None and "no diverging layer" in text and "BUILTIN_REF" in text
    assert (tmp_path / "l.html").read_text().count("<svg") == 1
