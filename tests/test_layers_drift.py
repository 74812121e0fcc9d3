"""``verify --layers`` classifies float drift per layer: within the spec's bound for the layer's operation (the
differences from LiteRT are accumulation order) or beyond it (the lowering adds rounding steps).

The model is the repository's sample CNN (conv, max pool, conv, depthwise conv, mean, fully connected, softmax).
Against it as converted, every layer with a spec bound is within it.  Then the converted graph is edited inside one
layer, and LiteRT (which runs the unedited .tflite) stays the oracle:

* an extra rounding step (the convolution's result rounded through bfloat16 and back before its ReLU) must make that
  layer, and only that layer, "beyond" - the layers downstream inherit the error but are judged on LiteRT's inputs;
* the same convolution split into two half-channel convolutions plus an ADD (another summation order, one more
  rounding) must stay "within": the dot-product bound of §1.10.3 allows any order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import tf2tosa  # noqa: E402
from tf2tosa.ir import DType, Graph, Operation, TensorType  # noqa: E402
from tf2tosa.verify.layers import verify_layers  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[1] / "models" / "samples" / "small_cnn_f32.tflite"
LAYER = "CONV_2D#2"  # conv 3x3x16 -> 32, stride 2, fused ReLU


def _layer(graph: Graph, opcode: str, location: str) -> Operation:
    return next(op for op in graph.topological_order() if op.opcode == opcode and op.location == location)


def _converted() -> Graph:
    return tf2tosa.convert(SAMPLE.read_bytes()).graph


def _round_through_bf16(graph: Graph) -> None:
    conv = _layer(graph, "CONV2D", LAYER)
    relu = _layer(graph, "CLAMP", LAYER)
    t = conv.results[0].type
    down = graph.add_op("tosa.CAST", [conv.results[0]], [TensorType(t.shape, DType.BF16)], location=LAYER)
    up = graph.add_op("tosa.CAST", [down.results[0]], [TensorType(t.shape, DType.FP32)], location=LAYER)
    graph.set_operand(relu, 0, up.results[0])


def _split_input_channels(graph: Graph) -> None:
    """CONV2D(x, w, b) -> CONV2D(x[..., :8], w[..., :8], b) + CONV2D(x[..., 8:], w[..., 8:], 0)."""
    conv = _layer(graph, "CONV2D", LAYER)
    x, w, bias, izp, wzp = conv.operands
    wv = w.const()
    assert wv is not None and wv.shape[-1] == 16
    n, h, ww, _ = (int(d) for d in x.shape)
    halves = []
    for k, (lo, hi) in enumerate(((0, 8), (8, 16))):
        start = graph.add_const(np.array([0, 0, 0, lo], np.int64), DType.SHAPE, op_name="tosa.CONST_SHAPE")
        size = graph.add_const(np.array([n, h, ww, hi - lo], np.int64), DType.SHAPE, op_name="tosa.CONST_SHAPE")
        xs = graph.add_op("tosa.SLICE", [x, start, size], [TensorType((n, h, ww, hi - lo), DType.FP32)],
                          location=LAYER).results[0]
        wk = graph.add_const(np.ascontiguousarray(wv[..., lo:hi]), DType.FP32)
        bk = bias if k == 0 else graph.add_const(np.zeros(bias.shape, np.float32), DType.FP32)
        halves.append(graph.add_op("tosa.CONV2D", [xs, wk, bk, izp, wzp], [conv.results[0].type], dict(conv.attrs),
                                   location=LAYER).results[0])
    total = graph.add_op("tosa.ADD", halves, [conv.results[0].type], location=LAYER).results[0]
    graph.replace_all_uses(conv.results[0], total)
    graph.remove_op(conv)


def _by_op(rep: object) -> dict[str, object]:
    return {e.op: e for e in rep.layers}  # type: ignore[attr-defined]


def test_converted_model_is_within_the_spec_bound() -> None:
    rep = verify_layers(SAMPLE)
    layers = _by_op(rep)
    for op in ("CONV_2D#0", "CONV_2D#2", "DEPTHWISE_CONV_2D#3", "MEAN#4", "FULLY_CONNECTED#5", "MAX_POOL_2D#1"):
        e = layers[op]
        assert e.drift in ("exact", "within"), (op, e.drift, e.bound_ratio, e.bound)  # type: ignore[attr-defined]
    assert layers["CONV_2D#2"].bound.startswith("dot-product KS=144")  # type: ignore[attr-defined]
    assert layers["MEAN#4"].bound.startswith("dot-product KS=64")  # type: ignore[attr-defined]
    assert layers["SOFTMAX#6"].drift == "composite"  # type: ignore[attr-defined]
    assert "beyond" not in rep.drift_counts
    assert "accumulation order" in rep.summary()


def test_injected_rounding_step_is_beyond_the_bound(tmp_path: Path) -> None:
    graph = _converted()
    _round_through_bf16(graph)
    html = tmp_path / "layers.html"
    rep = verify_layers(SAMPLE, graph=graph, out_html=html)
    layers = _by_op(rep)
    e = layers[LAYER]
    assert e.drift == "beyond" and e.bound_ratio > 10  # type: ignore[attr-defined]
    assert e.litert_bound_ratio <= 1  # type: ignore[attr-defined]  # LiteRT's own conv is within
    assert "rounding steps" in e.note  # type: ignore[attr-defined]
    assert [op for op, x in layers.items() if x.drift == "beyond"] == [LAYER]  # type: ignore[attr-defined]
    # downstream layers inherit the error (their end-to-end error grows) but add none of their own
    down = layers["DEPTHWISE_CONV_2D#3"]
    assert down.error > 1e-4 and down.drift == "within"  # type: ignore[attr-defined]
    text = rep.summary()
    assert "beyond the spec bound" in text and LAYER in text
    page = html.read_text()
    assert 'data-drift="beyond"' in page and "BEYOND spec bound" in page and 'id="drift"' in page


def test_another_summation_order_stays_within() -> None:
    graph = _converted()
    _split_input_channels(graph)
    assert sum(1 for op in graph.ops.values() if op.opcode == "CONV2D" and op.location == LAYER) == 2
    rep = verify_layers(SAMPLE, graph=graph)
    e = _by_op(rep)[LAYER]
    assert e.drift in ("within", "exact"), (e.drift, e.bound_ratio)  # type: ignore[attr-defined]
    assert e.local_error is not None  # type: ignore[attr-defined]
    assert "beyond" not in rep.drift_counts


DEPTHWISE = SAMPLE.with_name("depthwise_f32.tflite")  # depthwise convs, bilinear / nearest resize, concat, add


def test_one_op_layers_use_their_own_bound() -> None:
    """ULP, RESIZE and exact-op layers of the converted model are within their bounds; a bfloat16 rounding of the
    ADD's input inside the ADD layer puts that layer beyond its 0.5 ulp bound."""
    rep = verify_layers(DEPTHWISE)
    layers = _by_op(rep)
    assert layers["ADD#7"].bound == "0.5 ulp"  # type: ignore[attr-defined]
    assert layers["RESIZE_BILINEAR#1"].bound == "RESIZE"  # type: ignore[attr-defined]
    assert layers["CONCATENATION#3"].bound == "exact ops"  # type: ignore[attr-defined]
    assert all(e.drift in ("exact", "within") for e in rep.layers), [(e.op, e.drift) for e in rep.layers]

    graph = tf2tosa.convert(DEPTHWISE.read_bytes()).graph
    add = _layer(graph, "ADD", "ADD#7")
    x = add.operands[0]
    down = graph.add_op("tosa.CAST", [x], [TensorType(x.type.shape, DType.BF16)], location="ADD#7")
    up = graph.add_op("tosa.CAST", [down.results[0]], [TensorType(x.type.shape, DType.FP32)], location="ADD#7")
    graph.set_operand(add, 0, up.results[0])
    e = _by_op(verify_layers(DEPTHWISE, graph=graph))["ADD#7"]
    assert e.drift == "beyond" and e.bound == "0.5 ulp" and e.bound_ratio > 100  # type: ignore[attr-defined]
    assert e.litert_bound_ratio <= 1  # type: ignore[attr-defined]
