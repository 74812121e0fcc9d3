"""SavedModels whose object graph cannot be revived still convert: the frontend then reads the MetaGraph and the
variables directly (TF's v1 loader in a session, frozen from there).

The model: a small audio-style network saved with ``tf.saved_model.save``, whose saved object graph then gets what a
Keras-2-era training checkpoint leaves there: an optimizer user object holding slot variables (``m`` for each
weight).  Current TensorFlow revives that optimizer as a ``_UserObject`` and fails on its slots with
"'_UserObject' object has no attribute 'add_slot'", the error the real audio package's SavedModel gives.  The oracle is
TensorFlow running the SavedModel (the v1 session loader, independent of our loader's freezing) and, separately,
TensorFlow running the unmodified model object.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import tf2tosa  # noqa: E402


def _model() -> Any:
    class AudioNet(tf.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            r = np.random.default_rng(0)
            self.conv = tf.Variable(r.standard_normal((5, 1, 4)).astype(np.float32) * 0.5, name="conv1d/kernel")
            self.w = tf.Variable(r.standard_normal((4 * 30, 8)).astype(np.float32) * 0.2, name="dense/kernel")
            self.b = tf.Variable(r.standard_normal(8).astype(np.float32), name="dense/bias")

        @tf.function(input_signature=[tf.TensorSpec([1, 64], tf.float32, name="waveform")])
        def __call__(self, x: Any) -> Any:
            h = tf.nn.conv1d(tf.reshape(x, [1, 64, 1]), self.conv, stride=2, padding="VALID")
            h = tf.nn.relu(h)
            e = tf.matmul(tf.reshape(h, [1, -1]), self.w) + self.b
            return {"scores": tf.nn.softmax(e), "embedding": e}

    return AudioNet()


def _add_keras2_optimizer_slots(path: Path) -> None:
    """Add an optimizer user object with slot variables (one ``m`` per weight) to the saved object graph."""
    from tensorflow.core.protobuf import saved_model_pb2

    pb = path / "saved_model.pb"
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString(pb.read_bytes())
    og = sm.meta_graphs[0].object_graph_def
    weights = [i for i, n in enumerate(og.nodes) if n.HasField("variable")]
    assert len(weights) == 3
    opt_id = len(og.nodes)
    opt = og.nodes.add()
    opt.user_object.identifier = "_generic_user_object"  # an optimizer class TF cannot find revives as this
    opt.user_object.version.producer = 1
    opt.user_object.version.min_consumer = 1
    ref = og.nodes[0].children.add()
    ref.node_id, ref.local_name = opt_id, "optimizer"
    for var_id in weights:
        slot_id = len(og.nodes)
        slot = og.nodes.add()
        slot.variable.CopyFrom(og.nodes[var_id].variable)
        slot.variable.name = f"Adam/{og.nodes[var_id].variable.name}/m"
        sv = opt.slot_variables.add()
        sv.original_variable_node_id, sv.slot_name, sv.slot_variable_node_id = var_id, "m", slot_id
    pb.write_bytes(sm.SerializeToString())


@pytest.fixture(scope="module")
def keras2_saved_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    m = _model()
    path = tmp_path_factory.mktemp("sm") / "audio"
    tf.saved_model.save(m, str(path), signatures=m.__call__.get_concrete_function())
    _add_keras2_optimizer_slots(path)
    return path, m


def _tf_session_outputs(path: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    """TensorFlow running the SavedModel's serving signature (v1 loader, own session)."""
    g = tf.Graph()
    with tf.compat.v1.Session(graph=g) as sess:
        meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], str(path))
        sig = meta.signature_def["serving_default"]
        keys = sorted(sig.outputs)
        res = sess.run([sig.outputs[k].name for k in keys], {sig.inputs["waveform"].name: x})
    return dict(zip(keys, res))


def test_revival_fails_like_the_real_model(keras2_saved_model: tuple[Path, Any]) -> None:
    path, _ = keras2_saved_model
    with pytest.raises(AttributeError, match="'_UserObject' object has no attribute 'add_slot'"):
        tf.saved_model.load(str(path))


def test_keras2_saved_model_converts_and_matches_tf(keras2_saved_model: tuple[Path, Any]) -> None:
    path, original = keras2_saved_model
    model = tf2tosa.convert(str(path))
    g = model.graph
    assert "object graph not revived" in g.source.loader and "add_slot" in g.source.loader
    assert any("MetaGraph + variables" in w for w in g.record.warnings)  # told to the user (the CLI prints it)
    assert [g.source.signature_names[v.name] for v in g.outputs] == ["embedding", "scores"]
    assert "tosa.CONV2D" in g.op_counts() or "tosa.MATMUL" in g.op_counts()
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.standard_normal((1, 64)).astype(np.float32)
        got = model.run({g.inputs[0].name: x})
        want = _tf_session_outputs(path, x)
        direct = {k: np.asarray(v) for k, v in original(tf.constant(x)).items()}
        for v in g.outputs:
            key = g.source.signature_names[v.name]
            scale = float(np.abs(want[key]).max())
            np.testing.assert_allclose(got[v.name], want[key], rtol=0, atol=1e-5 * scale)
            np.testing.assert_allclose(got[v.name], direct[key], rtol=0, atol=1e-5 * scale)
    rep = model.verify(num=2)  # against TensorFlow running the SavedModel through the same fallback
    assert rep.ok, str(rep)


def test_fallback_reports_both_failures(keras2_saved_model: tuple[Path, Any]) -> None:
    path, _ = keras2_saved_model
    with pytest.raises(tf2tosa.ModelLoadError, match=r"add_slot.*MetaGraph.*no signature 'nope'"):
        tf2tosa.convert(str(path), signature="nope")
