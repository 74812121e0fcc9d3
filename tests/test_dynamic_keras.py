"""A Keras attention encoder over ``[None, None, 16]`` (batch and sequence length unknown), as users export it:
``Dense`` on a rank-3 tensor is a Tensordot whose reshape targets are computed from the input's SHAPE (a GATHER of
dimensions, an integer product: TFLite writes it as UNSORTED_SEGMENT_PROD, TensorFlow as Prod), and multi-head
attention is a BATCH_MATMUL over a broadcast batch.

- The default (specialising) conversion folds that shape arithmetic at the given size and matches LiteRT's
  reference kernels (it used to stop at "segment product of i32").
- ``--dynamic`` keeps batch and length symbolic through the gather, the product and the batch-matmul broadcast, and
  one program matches LiteRT at every size (it used to stop at "a lowering lost the symbol").
- The SavedModel of the same network, through the TensorFlow frontend, gives one program that matches TensorFlow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import tf2tosa  # noqa: E402
from tests.modelgen import _tf, cached  # noqa: E402
from tf2tosa.api import convert_dynamic  # noqa: E402
from tf2tosa.executor import run_checked  # noqa: E402
from tf2tosa.verify.litert import run_tflite  # noqa: E402

SIZES = [(1, 1, 16), (2, 7, 16), (3, 40, 16)]


def _encoder(seed: int = 11) -> Any:
    tf = _tf()
    tf.keras.backend.clear_session()  # tensor names restart from 0, whatever the process built before
    tf.keras.utils.set_random_seed(seed)
    inp = tf.keras.Input([None, 16])
    x = tf.keras.layers.MultiHeadAttention(2, 8)(inp, inp)
    x = tf.keras.layers.LayerNormalization()(x + inp)
    h = tf.keras.layers.Dense(32, activation="gelu")(x)
    x = tf.keras.layers.LayerNormalization()(x + tf.keras.layers.Dense(16)(h))
    return tf.keras.Model(inp, tf.keras.layers.Dense(3)(x[:, 0, :]))


def _tflite() -> bytes:
    tf = _tf()
    return bytes(tf.lite.TFLiteConverter.from_keras_model(_encoder()).convert())


def _saved_model() -> bytes:
    """The SavedModel directory, packed as one tar (the cache stores bytes)."""
    import io
    import tarfile
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        _encoder().export(str(Path(d) / "sm"), verbose=False)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(Path(d) / "sm"), arcname="sm")
        return buf.getvalue()


def _input_name(data: bytes) -> str:
    """The model's input tensor name (Keras numbers its tensors per process, so it is not written down here)."""
    from tf2tosa.converter.tflite import load_tflite

    return load_tflite(data).inputs[0].name


def _x(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(shape[1]).standard_normal(shape).astype(np.float32)


def _close(out: np.ndarray, ref: np.ndarray) -> None:
    assert out.shape == ref.shape
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


def test_default_conversion_folds_the_tensordot_shape_arithmetic() -> None:
    data = cached("dyn/keras_encoder", _tflite, {}, extra=(_encoder,))
    for shape in SIZES[1:]:
        m = tf2tosa.convert(data, input_shapes={_input_name(data): shape})
        out = list(m.run({m.graph.inputs[0].name: _x(shape)}).values())[0]
        _close(out, list(run_tflite(data, [_x(shape)], reference_kernels=True).values())[0])


def test_dynamic_keeps_batch_and_length_through_tensordot_and_attention() -> None:
    data = cached("dyn/keras_encoder", _tflite, {}, extra=(_encoder,))
    g = convert_dynamic(data).graph
    assert set(g.dims.symbols) == {"batch", "d1"}
    for shape in SIZES:
        out = list(run_checked(g, {g.inputs[0].name: _x(shape)}, level="NONE").outputs.values())[0]
        _close(out, list(run_tflite(data, [_x(shape)]).values())[0])


def test_saved_model_with_none_dims_through_the_tensorflow_frontend(tmp_path: Path) -> None:
    import io
    import tarfile

    tf = _tf()
    blob = cached("dyn/keras_encoder_sm", _saved_model, {}, extra=(_encoder,))
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(tmp_path, filter="data")
    fn = tf.saved_model.load(str(tmp_path / "sm")).signatures["serving_default"]
    g = convert_dynamic(str(tmp_path / "sm")).graph
    assert set(g.dims.symbols) == {"batch", "d1"}
    for shape in SIZES:
        out = list(run_checked(g, {g.inputs[0].name: _x(shape)}, level="NONE").outputs.values())[0]
        _close(out, list(fn(tf.constant(_x(shape))).values())[0].numpy())
