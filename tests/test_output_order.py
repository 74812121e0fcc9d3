"""Model inputs and outputs keep the source model's order: the order LiteRT's ``get_input_details()`` /
``get_output_details()`` report (the subgraph's), not the SignatureDef's sorted keys.

Two models: a Keras model whose converted subgraph lists its outputs ``:1, :0, :2`` (TFLiteConverter's own order), and
the same file with the subgraph output vector rewritten to ``:2, :1, :0`` (the order of the real model in the issue).
Each is checked in the API (graph, ``output_names``, ``run``'s dict), the ``.mlir`` text, the ``.tosa`` flatbuffer
(read back, and through tosa-opt), and ``verify`` (two outputs share a shape, so pairing by position in the wrong order
would fail).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")
litert = pytest.importorskip("ai_edge_litert.interpreter")

import tf2tosa  # noqa: E402
from tests import tosa_mlir  # noqa: E402
from tf2tosa.serializer.tosa_reader import io_names  # noqa: E402


def _keras_model() -> bytes:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    tf.random.set_seed(3)
    keras = tf.keras
    a = keras.Input((4,), batch_size=1, name="zeta")
    b = keras.Input((4,), batch_size=1, name="alpha")
    x = keras.layers.Dense(3, name="d1", bias_initializer="random_normal")(a)
    y = keras.layers.Dense(2, name="d2", bias_initializer="random_normal")(b)
    z = keras.layers.Add()([x, keras.layers.Dense(3, name="d3")(b)])
    return bytes(tf.lite.TFLiteConverter.from_keras_model(keras.Model([a, b], [y, x, z])).convert())


def _subgraph_outputs_reversed(data: bytes) -> bytes:
    """``data`` with subgraph 0's output vector rewritten in place to ``:2, :1, :0`` (same length, so nothing else
    moves)."""
    import tflite

    buf = bytearray(data)
    sg = tflite.Model.GetRootAsModel(buf, 0).Subgraphs(0)
    o = sg._tab.Offset(8)  # SubGraph.outputs
    assert o
    pos, n = sg._tab.Vector(o), sg._tab.VectorLen(o)
    ids = np.frombuffer(bytes(buf[pos:pos + 4 * n]), "<i4")
    order = sorted(ids, key=lambda t: -int(sg.Tensors(int(t)).Name().decode().rsplit(":", 1)[1]))
    buf[pos:pos + 4 * n] = np.array(order, "<i4").tobytes()
    return bytes(buf)


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    base = _keras_model()
    return {"keras": base, "2-1-0": _subgraph_outputs_reversed(base)}


def _details(data: bytes) -> tuple[list[str], list[str], Any]:
    it = litert.Interpreter(model_content=data)
    return ([d["name"] for d in it.get_input_details()], [d["name"] for d in it.get_output_details()], it)


@pytest.mark.parametrize("which", ["keras", "2-1-0"])
def test_io_order_follows_litert(models: dict[str, bytes], which: str, tmp_path: Path) -> None:
    data = models[which]
    ins, outs, it = _details(data)
    if which == "2-1-0":
        assert [n.rsplit(":", 1)[1] for n in outs] == ["2", "1", "0"]
    # the point of the test: the subgraph order is not the SignatureDef's sorted one
    sig_outs = it.get_signature_runner().get_output_details()
    assert list(sig_outs) == sorted(sig_outs) and outs != sorted(outs)

    model = tf2tosa.convert(data)
    g = model.graph
    assert [v.source for v in g.inputs] == ins
    assert [v.source for v in g.outputs] == outs
    # SignatureDef keys are kept as names
    by_tensor = {d["name"]: k for k, d in sig_outs.items()}
    assert [g.source.signature_names[v.name] for v in g.outputs] == [by_tensor[n] for n in outs]

    rng = np.random.default_rng(0)
    feeds = {v.name: rng.uniform(-1, 1, (1, 4)).astype(np.float32) for v in g.inputs}
    got = model.run(feeds)
    assert list(got) == model.output_names == [v.name for v in g.outputs]
    it.allocate_tensors()
    for d, v in zip(it.get_input_details(), g.inputs):
        it.set_tensor(d["index"], feeds[v.name])
    it.invoke()
    for d, name in zip(it.get_output_details(), model.output_names):
        np.testing.assert_allclose(got[name], it.get_tensor(d["index"]), rtol=1e-5, atol=1e-6)

    # .tosa and .mlir carry the same order
    tosa_in, tosa_out = io_names(model.to_bytes())
    assert tosa_in == model.input_names and tosa_out == model.output_names
    sig = re.search(r"func\.func @\w+\((.*)\) -> \((.*)\) \{", model.to_mlir())
    assert sig is not None
    assert re.findall(r'tosa.tensor_name = "([^"]+)"', sig.group(1)) == model.input_names
    assert re.findall(r'tosa.tensor_name = "([^"]+)"', sig.group(2)) == model.output_names

    # verify pairs LiteRT's outputs with ours by name and order (two outputs are [1, 3])
    rep = model.verify(num=2)
    assert rep.ok, str(rep)
    assert [o.name for o in rep.outputs] == model.output_names


def test_tosa_opt_keeps_the_order(models: dict[str, bytes]) -> None:
    from tf2tosa.verify import tosa_tools

    if not tosa_tools.available():
        pytest.skip("tosa-tools not installed")
    model = tf2tosa.convert(models["2-1-0"])
    text = tosa_mlir.deserialize_to_mlir(model.to_bytes())
    sig = re.search(r"func\.func @\w+\((.*)\) -> \((.*)\)", text)
    assert sig is not None
    assert re.findall(r'tosa.tensor_name = "([^"]+)"', sig.group(2)) == model.output_names
    tosa_tools.validate(model.to_bytes(), model.profiles, model.extensions)


def test_verify_against_another_tflite_pairs_by_signature_key(tmp_path: Path) -> None:
    """A TensorFlow model verified against TFLite's own conversion of it (the QAT oracle's path): that .tflite lists
    its inputs and outputs in its own order, so they are paired through the SignatureDef keys."""
    import tensorflow as tf

    from tf2tosa.verify.compare import verify_tflite

    class Three(tf.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            r = np.random.default_rng(5)
            self.w = tf.Variable(r.standard_normal((4, 3)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32, name="zeta"),
                                      tf.TensorSpec([1, 4], tf.float32, name="alpha")])
        def __call__(self, z: Any, a: Any) -> Any:
            return {"c": tf.matmul(z, self.w), "b": tf.matmul(a, self.w) * 2.0, "a": tf.matmul(z - a, self.w)}

    m = Three()
    path = tmp_path / "three"
    tf.saved_model.save(m, str(path), signatures=m.__call__.get_concrete_function())
    ref = tf.lite.TFLiteConverter.from_saved_model(str(path)).convert()
    model = tf2tosa.convert(str(path))
    ins, outs, _ = _details(ref)
    keys = model.graph.source.signature_names
    assert [keys[v.name] for v in model.graph.outputs] == ["a", "b", "c"]
    rep = verify_tflite(model, num=2, tflite=ref)
    assert rep.ok, str(rep)
    assert [o.name for o in rep.outputs] == model.output_names
