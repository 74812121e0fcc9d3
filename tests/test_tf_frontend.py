"""The TensorFlow frontend: loading every source kind, signature naming, the IR it produces, and bad input ending
in one-line ConversionError subclasses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import tensorflow as tf  # noqa: E402

from tf2tosa.converter.pipeline import convert_graph  # noqa: E402
from tf2tosa.converter.tensorflow import load_source, load_tensorflow  # noqa: E402
from tf2tosa.errors import ConversionError, ModelLoadError, UnsupportedOpsError  # noqa: E402
from tf2tosa.executor import run  # noqa: E402


class TwoInOut(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0, name="dense_w")

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="features"),
                                  tf.TensorSpec([None, 3], tf.float32, name="bias")])
    def serve(self, features: Any, bias: Any) -> dict[str, Any]:
        y = tf.matmul(features, self.w) + bias
        return {"logits": y, "probs": tf.nn.softmax(y)}


class Writer(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.counter = tf.Variable(0.0, name="call_counter")
        self.scale = tf.Variable(2.0, name="scale")

    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32, name="x")])
    def serve(self, x: Any) -> Any:
        self.counter.assign_add(1.0)
        return x * self.scale


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("sm") / "two"
    m = TwoInOut()
    tf.saved_model.save(m, str(d), signatures={"serving_default": m.serve, "second": m.serve})
    return d


def _one_line(e: BaseException) -> str:
    msg = str(e)
    assert "\n" not in msg, msg
    return msg


# ------------------------------------------------------------------------------------------------ loading
def test_saved_model_signature_names_and_order(saved: Path) -> None:
    g = load_tensorflow(saved)
    assert [v.name for v in g.inputs] == ["bias", "features"]  # TF flattens signature keys sorted
    assert [v.name for v in g.outputs] == ["logits", "probs"]
    assert g.source.signature == "serving_default" and g.source.signatures == ["second", "serving_default"]
    assert g.source.kind == "saved_model"
    names = {op.name for op in g.ops.values()}
    assert "tf.MatMul" in names and "tf.Softmax" in names
    assert not names & {"tf.Identity", "tf.IdentityN", "tf.NoOp", "tf.ReadVariableOp", "tf.VarHandleOp"}
    convert_graph(g, None)
    feats = np.random.default_rng(0).uniform(-1, 1, (1, 4)).astype(np.float32)
    bias = np.ones((1, 3), np.float32)
    out = run(g, {"features": feats, "bias": bias})
    ref = feats @ (np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0) + bias
    np.testing.assert_allclose(out["logits"], ref, rtol=1e-6)
    e = np.exp(ref - ref.max())
    np.testing.assert_allclose(out["probs"], e / e.sum(), rtol=1e-6)


def test_other_signature(saved: Path) -> None:
    g = load_tensorflow(saved, signature="second")
    assert g.source.signature == "second"


def test_missing_signature_lists_available(saved: Path) -> None:
    with pytest.raises(ModelLoadError) as ei:
        load_tensorflow(saved, signature="predict")
    msg = _one_line(ei.value)
    assert "no signature 'predict'" in msg and "second, serving_default" in msg and str(saved) in msg


def test_directory_that_is_not_a_saved_model(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("hello")
    with pytest.raises(ModelLoadError) as ei:
        load_tensorflow(tmp_path)
    assert "not a SavedModel directory" in _one_line(ei.value)


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no such file"):
        load_tensorflow(tmp_path / "nope.keras")


def test_corrupt_saved_model(tmp_path: Path) -> None:
    d = tmp_path / "bad"
    d.mkdir()
    (d / "saved_model.pb").write_bytes(b"\x08\x01garbage that is not a SavedModel proto \xff\xfe")
    with pytest.raises(ModelLoadError) as ei:
        load_tensorflow(d)
    assert "cannot load SavedModel" in _one_line(ei.value)


def test_corrupt_graphdef_and_keras(tmp_path: Path) -> None:
    pb = tmp_path / "bad.pb"
    pb.write_bytes(b"\xff\xff\xff\xff not a protobuf")
    with pytest.raises(ModelLoadError) as ei:
        load_tensorflow(pb)
    _one_line(ei.value)
    k = tmp_path / "bad.keras"
    k.write_bytes(b"PK not really a zip")
    with pytest.raises(ModelLoadError) as ei:
        load_tensorflow(k)
    assert "cannot load Keras model" in _one_line(ei.value)


def test_unknown_suffix(tmp_path: Path) -> None:
    f = tmp_path / "model.onnx"
    f.write_bytes(b"x")
    with pytest.raises(ModelLoadError, match="unknown TensorFlow model format"):
        load_tensorflow(f)


def test_tf_function_needs_signature() -> None:
    @tf.function
    def f(x: Any) -> Any:
        return x + 1.0

    with pytest.raises(ModelLoadError, match="input_signature"):
        load_tensorflow(f)
    g = load_tensorflow(f.get_concrete_function(tf.TensorSpec([2], tf.float32, name="x")))
    assert [v.name for v in g.inputs] == ["x"]


def test_tf_function_with_signature_and_identities() -> None:
    @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32, name="a")])
    def f(a: Any) -> Any:
        return tf.identity(tf.stop_gradient(a)) * 3.0, tf.identity(a)

    g = load_tensorflow(f)
    assert [op.name for op in g.ops.values() if not op.name.endswith("Const")] == ["tf.Mul"]
    assert g.outputs[1] is g.inputs[0]  # an output that is an input keeps the input
    convert_graph(g)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    outs = list(run(g, {"a": x}).values())
    np.testing.assert_array_equal(outs[0], x * 3)
    np.testing.assert_array_equal(outs[1], x)


def test_variables_written_cannot_be_frozen(tmp_path: Path) -> None:
    m = Writer()
    with pytest.raises(ModelLoadError) as ei:
        load_tensorflow(m.serve)
    msg = _one_line(ei.value)
    assert "cannot be frozen" in msg and "call_counter" in msg and "scale" not in msg.split("writes them:")[1]
    d = tmp_path / "writer"
    tf.saved_model.save(m, str(d), signatures=m.serve)
    with pytest.raises(ModelLoadError) as ei:
        load_tensorflow(d)
    assert "cannot be frozen" in _one_line(ei.value)


def test_unsupported_ops_listed_with_counts() -> None:
    @tf.function(input_signature=[tf.TensorSpec([4, 6], tf.float32, name="x")])
    def f(x: Any) -> Any:
        a = tf.math.cumsum(x, axis=1) + tf.math.cumsum(x, axis=0)
        v, _ = tf.math.top_k(x, 2)
        return a, tf.linalg.matrix_transpose(v) * 2.0, tf.math.bessel_i0e(x)

    g = load_tensorflow(f)
    with pytest.raises(UnsupportedOpsError) as ei:
        convert_graph(g)
    msg = _one_line(ei.value)
    assert "tf.Cumsum x2: no legalization rule" in msg
    assert "tf.TopKV2 x1" in msg and "tf.BesselI0e x1" in msg
    assert set(ei.value.reasons) == {"tf.Cumsum", "tf.TopKV2", "tf.BesselI0e"}


def test_rule_reasons_are_gathered() -> None:
    """A rule that cannot handle a case reports why, under the tf op's name."""

    @tf.function(input_signature=[tf.TensorSpec([1, 4, 4, 2], tf.float32, name="x"),
                                  tf.TensorSpec([2], tf.int32, name="size")])
    def f(x: Any, size: Any) -> Any:
        return tf.compat.v1.image.resize_bilinear(x, size), tf.reduce_sum(x, tf.constant(1)) * 2.0

    with pytest.raises(UnsupportedOpsError) as ei:
        convert_graph(load_tensorflow(f))
    msg = _one_line(ei.value)
    assert "tf.ResizeBilinear x1: size" in msg and "compile-time constant" in msg


def test_control_flow_functions_become_regions() -> None:
    """If/While keep their FunctionDefs as region graphs (then/else); tests/test_tf_control.py checks the values."""
    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32, name="x")])
    def f(x: Any) -> Any:
        return tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: x - 1.0)

    g = load_tensorflow(f)
    (op,) = [op for op in g.ops.values() if op.name in ("tf.StatelessIf", "tf.If")]
    assert len(op.regions) == 2 and all(len(r.inputs) == 1 and len(r.outputs) == 1 for r in op.regions)
    assert {o.name for r in op.regions for o in r.ops.values()} >= {"tf.Mul", "tf.Sub"}
    convert_graph(g)
    assert g.op_counts().get("tosa.COND_IF") == 1


def test_frozen_graphdef_pb(tmp_path: Path) -> None:
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    m = TwoInOut()
    gd = convert_variables_to_constants_v2(m.serve.get_concrete_function()).graph.as_graph_def()
    pb = tmp_path / "frozen.pb"
    pb.write_bytes(gd.SerializeToString())
    g = load_tensorflow(pb)
    assert g.source.kind == "graphdef"
    assert [v.name for v in g.inputs] == ["features", "bias"]  # Placeholder nodes in node order
    assert len(g.outputs) == 2
    convert_graph(g)
    src = load_source(pb)
    feeds = [np.ones((1, 4), np.float32), np.zeros((1, 3), np.float32)]
    got = run(g, {"features": feeds[0], "bias": feeds[1]})
    refs = src.run(feeds)
    for o, r in zip(got.values(), refs):
        np.testing.assert_allclose(o, r, rtol=1e-6)
    with pytest.raises(ModelLoadError, match="no node"):
        load_tensorflow(pb, outputs=["missing_node"])


def test_keras_in_memory_names() -> None:
    import keras

    inp = keras.Input((5,), name="pixels")
    out = keras.layers.Dense(3, name="head")(inp)
    g = load_tensorflow(keras.Model(inp, out))
    assert [v.name for v in g.inputs] == ["pixels"] and [v.name for v in g.outputs] == ["head"]
    assert g.source.kind == "keras"


def test_int64_constants_and_outputs_narrowed() -> None:
    @tf.function(input_signature=[tf.TensorSpec([3, 5], tf.float32, name="x")])
    def f(x: Any) -> Any:
        i = tf.argmax(x, axis=1)  # int64
        return i + tf.constant([1, 2, 3], tf.int64)

    g = convert_graph(load_tensorflow(f))
    x = np.random.default_rng(0).uniform(-1, 1, (3, 5)).astype(np.float32)
    (out,) = run(g, {"x": x}).values()
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.argmax(x, 1) + [1, 2, 3])


def test_non_tosa_input_type_is_one_line_error() -> None:
    @tf.function(input_signature=[tf.TensorSpec([3], tf.float64, name="x")])
    def f(x: Any) -> Any:
        return x * 2.0

    with pytest.raises(ConversionError) as ei:
        convert_graph(load_tensorflow(f))
    _one_line(ei.value)


def test_tensorflow_not_imported_on_tflite_path() -> None:
    code = ("import sys, tf2tosa, tf2tosa.converter.tensorflow, tf2tosa.legalizations.registry as r; "
            "r.all_rules(); print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def test_tf_rule_count_against_the_document() -> None:
    """Every tf op the lowering document gives a lowering (op_inventory §1.2: 96) has a rule."""
    from tf2tosa.legalizations.registry import all_rules

    documented = ("Abs AddN Add AddV2 All Any ArgMax AvgPool BatchToSpaceND BiasAdd BitwiseAnd BitwiseOr Cast Ceil "
                  "ConcatV2 Const Conv2DBackpropInput Conv2D DepthToSpace DepthwiseConv2dNative Elu Equal Exp "
                  "ExpandDims FakeQuantWithMinMaxArgs FakeQuantWithMinMaxVars Fill FloorDiv FloorMod Floor "
                  "FusedBatchNorm FusedBatchNormV3 GatherNd Gather GatherV2 GreaterEqual Greater IdentityN Identity "
                  "Invert LeakyRelu LeftShift LessEqual Less Log LogSoftmax LogicalAnd LogicalNot LogicalOr MatMul "
                  "Max MaxPool Maximum Mean Min Minimum Mul Neg NotEqual OneHot Pack Pad Pow Prod Rank RealDiv "
                  "Reciprocal Relu6 Relu Reshape ResizeBilinear ResizeNearestNeighbor ReverseV2 RightShift Round "
                  "Rsqrt SelectV2 Shape Sigmoid Slice Softmax SpaceToBatchND SpaceToDepth Split SplitV Square "
                  "SquaredDifference Squeeze StridedSlice Sub Sum Tanh Tile Transpose Unpack ZerosLike").split()
    assert len(documented) == 96
    rules = all_rules()
    assert [n for n in documented if f"tf.{n}" not in rules] == []
    assert sum(1 for n in rules if n.startswith("tf.")) > 96


class _JitCalls(tf.Module):
    """Calls marked not to inline (``jit_compile=True``, as Keras 3 runs a grouped convolution on CPU): one reads a
    variable (a weight), one assigns another."""

    def __init__(self) -> None:
        super().__init__()
        rng = np.random.default_rng(9)
        self.w = tf.Variable(rng.standard_normal((3, 3, 1, 8)).astype(np.float32), name="dw_kernel")
        self.count = tf.Variable(0.0, name="jit_counter")

    @tf.function(jit_compile=True)
    def _grouped(self, x: Any) -> Any:
        return tf.nn.conv2d(x, self.w, 1, "SAME")  # filter I = 1 < C = 4: groups = 4

    @tf.function(jit_compile=True)
    def _shift(self, x: Any) -> Any:
        return x * 0.5 - 1.0  # no variable: a stateless call

    @tf.function(jit_compile=True)
    def _bump(self, x: Any) -> Any:
        self.count.assign_add(1.0)
        return x

    @tf.function(input_signature=[tf.TensorSpec([1, 6, 6, 4], tf.float32, name="x")])
    def reads(self, x: Any) -> Any:
        return self._grouped(self._shift(x))

    @tf.function(input_signature=[tf.TensorSpec([1, 6, 6, 4], tf.float32, name="x")])
    def writes(self, x: Any) -> Any:
        return self._bump(x) * 2.0


def test_calls_left_by_freezing_are_inlined_and_writes_still_refused() -> None:
    """A call the freezing inliner keeps (a ``_noinline`` / ``_XlaMustCompile`` callee) becomes the callee's ops; a
    variable it only reads is frozen (ConvNeXt from keras.applications was refused: "variable(s) cannot be frozen
    because the function writes them"), one it assigns is still reported.  Oracle: TensorFlow running the model."""
    m = _JitCalls()
    g = load_tensorflow(m.reads)
    assert {"tf.StatefulPartitionedCall", "tf.PartitionedCall"} <= {op.name for op in g.ops.values()}
    convert_graph(g)
    counts = g.op_counts()
    assert counts.get("tosa.DEPTHWISE_CONV2D") == 1 and not any("PartitionedCall" in k for k in counts), counts
    x = np.random.default_rng(4).standard_normal((1, 6, 6, 4)).astype(np.float32)
    got = list(run(g, {"x": x}).values())[0]
    np.testing.assert_allclose(got, m.reads(tf.constant(x)).numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ModelLoadError) as ei:
        load_tensorflow(m.writes)
    msg = _one_line(ei.value)
    assert "cannot be frozen" in msg and "jit_counter" in msg.split("writes them:")[1], msg
