"""Builders of dynamic-range ("hybrid") quantized test models for tests/test_hybrid.py (cached like
:mod:`tests.modelgen`).

Each builder makes a small float Keras model (or a ``tf.function``) from a fixed seed, converts it with
``TFLiteConverter`` and ``Optimize.DEFAULT`` and *no* representative dataset - TF's dynamic-range quantization:
weights of 1024 elements or more become int8 constants, activations stay float32 - and runs the float model on
fixed inputs.  The cached entry is an ``.npz`` holding the ``.tflite`` bytes, those inputs and the float model's
outputs on them (the distance of a conversion from the model it came from).
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from tests.modelgen import _tf, cached

#: input sets per model (fixed seeds 0, 1, 2)
NUM_SETS = 3


def _pack(tflite: bytes, inputs: list[dict[str, np.ndarray]], outputs: list[list[np.ndarray]]) -> bytes:
    arrays: dict[str, Any] = {"tflite": np.frombuffer(tflite, np.uint8)}
    for i, (xs, ys) in enumerate(zip(inputs, outputs)):
        for k, a in xs.items():
            arrays[f"in{i}:{k}"] = a
        for j, a in enumerate(ys):
            arrays[f"out{i}:{j}"] = a
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def unpack(data: bytes) -> tuple[bytes, list[dict[str, np.ndarray]], list[list[np.ndarray]]]:
    """(``.tflite`` bytes, input sets by input name, the float model's outputs per set in output order)."""
    z = np.load(io.BytesIO(data))
    tflite = z["tflite"].tobytes()
    inputs: list[dict[str, np.ndarray]] = [{} for _ in range(NUM_SETS)]
    outputs: list[list[np.ndarray]] = [[] for _ in range(NUM_SETS)]
    for key in sorted(z.files, key=lambda k: (k.split(":")[0], int(k.split(":")[1]) if k.startswith("out") else 0)):
        if key == "tflite":
            continue
        tag, name = key.split(":", 1)
        if tag.startswith("in"):
            inputs[int(tag[2:])][name] = z[key]
        else:
            outputs[int(tag[3:])].append(z[key])
    return tflite, inputs, outputs


def _convert_keras(model: Any, seed: int, int_input: tuple[int, int] | None = None) -> bytes:
    """The hybrid ``.tflite`` of a Keras model, and its float outputs on fixed inputs, packed."""
    tf = _tf()
    sig = [tf.TensorSpec(tuple(int(d) for d in t.shape), "int32" if int_input else "float32") for t in model.inputs]
    with tempfile.TemporaryDirectory() as d:
        model.export(os.path.join(d, "sm"), verbose=False, input_signature=sig)
        conv = tf.lite.TFLiteConverter.from_saved_model(os.path.join(d, "sm"))
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        tflite = bytes(conv.convert())
    from ai_edge_litert.interpreter import Interpreter

    names = [d["name"] for d in Interpreter(model_content=tflite).get_input_details()]
    inputs, outputs = [], []
    for s in range(NUM_SETS):
        rng = np.random.default_rng(1000 * seed + s)
        xs = []
        for t in model.inputs:
            shape = tuple(int(d) for d in t.shape)
            if int_input is not None:
                xs.append(rng.integers(int_input[0], int_input[1], shape).astype(np.int32))
            else:
                xs.append(rng.uniform(-1.0, 1.0, shape).astype(np.float32))
        ys = model(xs if len(xs) > 1 else xs[0])
        ys = ys if isinstance(ys, (list, tuple)) else [ys]
        inputs.append(dict(zip(names, xs)))
        outputs.append([np.asarray(y, np.float32) for y in ys])
    return _pack(tflite, inputs, outputs)


def _convert_fn(fn: Any, spec: Any, seed: int) -> bytes:
    """The hybrid ``.tflite`` of a ``tf.function`` with weights as ``tf.Variable``s, packed with its outputs."""
    tf = _tf()
    conc = fn.get_concrete_function(spec)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([conc], fn)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    tflite = bytes(conv.convert())
    from ai_edge_litert.interpreter import Interpreter

    name = Interpreter(model_content=tflite).get_input_details()[0]["name"]
    inputs, outputs = [], []
    for s in range(NUM_SETS):
        rng = np.random.default_rng(1000 * seed + s)
        x = rng.uniform(-1.0, 1.0, tuple(spec.shape)).astype(np.float32)
        inputs.append({name: x})
        outputs.append([np.asarray(fn(tf.constant(x)), np.float32)])
    return _pack(tflite, inputs, outputs)


def _keras(seed: int) -> Any:
    tf = _tf()
    tf.keras.utils.set_random_seed(seed)
    import keras

    return keras


def b_cnn(seed: int = 1) -> bytes:
    """Conv (SAME, stride 2), max pool, dense: batch 2 (LiteRT quantizes each image on its own)."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((16, 16, 4), batch_size=2)
    y = L.Conv2D(32, 3, padding="same", activation="relu")(x)
    y = L.Conv2D(32, 3, strides=2, padding="same", activation="relu")(y)
    y = L.MaxPooling2D(2)(y)
    y = L.Conv2D(16, 3, padding="valid", activation="relu6")(y)
    y = L.Flatten()(y)
    y = L.Dense(24, activation="relu")(y)
    y = L.Dense(10, activation="softmax")(y)
    return _convert_keras(keras.Model(x, y), seed)


def b_depthwise(seed: int = 2) -> bytes:
    """MobileNet-style: conv, depthwise (multiplier 4, SAME and VALID), pointwise conv, global pool, dense."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((12, 12, 4), batch_size=1)
    y = L.Conv2D(32, 3, padding="same", activation="relu")(x)
    y = L.DepthwiseConv2D(3, depth_multiplier=4, padding="same", activation="relu")(y)
    y = L.Conv2D(32, 1, activation="relu")(y)
    y = L.DepthwiseConv2D(3, depth_multiplier=1, strides=2, padding="valid")(y)
    y = L.DepthwiseConv2D(5, depth_multiplier=40, padding="valid")(y)
    y = L.GlobalAveragePooling2D()(y)
    y = L.Dense(8)(y)
    return _convert_keras(keras.Model(x, y), seed)


def b_mlp(seed: int = 3) -> bytes:
    """Three dense layers, batch 4."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((48,), batch_size=4)
    y = L.Dense(64, activation="relu")(x)
    y = L.Dense(64, activation="tanh")(y)
    y = L.Dense(32)(y)
    return _convert_keras(keras.Model(x, y), seed)


def b_conv1d(seed: int = 4) -> bytes:
    """An audio net: Conv1D (stride 2, dilation 2), global max pool, dense."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((100, 8), batch_size=1)
    y = L.Conv1D(32, 5, strides=2, activation="relu")(x)
    y = L.Conv1D(32, 3, dilation_rate=2, padding="same", activation="relu")(y)
    y = L.Conv1D(48, 3, activation="relu")(y)
    y = L.GlobalMaxPooling1D()(y)
    y = L.Dense(64, activation="relu")(y)
    y = L.Dense(12)(y)
    return _convert_keras(keras.Model(x, y), seed)


def b_lstm_text(seed: int = 5) -> bytes:
    """A text classifier: embedding (hybrid table), LSTM (TFLite's WHILE loop: hybrid FCs in its body), dense."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((12,), batch_size=1, dtype="int32")
    y = L.Embedding(500, 16)(x)
    y = L.LSTM(32)(y)
    y = L.Dense(40, activation="relu")(y)
    y = L.Dense(4, activation="softmax")(y)
    return _convert_keras(keras.Model(x, y), seed, int_input=(0, 500))


def b_transformer(seed: int = 6) -> bytes:
    """A transformer encoder block: multi-head attention, residual, layer norm, feed-forward network."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((10, 32), batch_size=1)
    a = L.MultiHeadAttention(num_heads=2, key_dim=16)(x, x)
    y = L.LayerNormalization()(x + a)
    f = L.Dense(64, activation="gelu")(y)
    f = L.Dense(32)(f)
    y = L.LayerNormalization()(y + f)
    return _convert_keras(keras.Model(x, y), seed)


def b_transpose_conv(seed: int = 7) -> bytes:
    """Conv2DTranspose (stride 2, SAME and VALID) after a conv."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((6, 6, 8), batch_size=1)
    y = L.Conv2DTranspose(16, 3, strides=2, padding="same", activation="relu")(x)
    y = L.Conv2DTranspose(8, 3, strides=2, padding="valid")(y)
    return _convert_keras(keras.Model(x, y), seed)


def b_batch_matmul(seed: int = 8, adj: bool = False) -> bytes:
    """``tf.matmul`` of a rank-3 float input by an int8 weight shared over the batch: TFLite's BATCH_MATMUL."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    w = tf.constant(rng.uniform(-0.5, 0.5, (2, 48, 40) if not adj else (2, 40, 48)).astype(np.float32))

    @tf.function
    def fn(x: Any) -> Any:
        return tf.matmul(x, w, adjoint_b=adj) + 0.25

    return _convert_fn(fn, tf.TensorSpec((2, 5, 48), tf.float32), seed)


def b_shared_input(seed: int = 9) -> bytes:
    """A signed tensor read by a SAME depthwise conv (its window pads the input) and by a 1x1 conv: one range."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((8, 8, 128), batch_size=1)
    a = L.DepthwiseConv2D(3, padding="same")(x)
    c = L.Conv2D(128, 1)(x)
    return _convert_keras(keras.Model(x, L.Add()([a, c])), seed)


def b_relu_dense(seed: int = 10) -> bytes:
    """A ReLU on the input, then a dense layer: a non-negative hybrid input (constant zero point), batch 4."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((48,), batch_size=4)
    return _convert_keras(keras.Model(x, L.Dense(64)(L.ReLU()(x))), seed)


# Models of the size users publish (hundreds of KB of int8 weights): the on-the-fly quantization's fixed cost per
# hybrid op (~25-30 TOSA ops) is then small against the weights, and the .tosa stays near its .tflite's size.

def r_cnn(seed: int = 11) -> bytes:
    """A CIFAR-style CNN on 32x32x3: three 3x3 conv blocks (32, 64, 128 channels) with max pools, dense 128, 10."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((32, 32, 3), batch_size=1)
    y = x
    for ch in (32, 64, 128):
        y = L.Conv2D(ch, 3, padding="same", activation="relu")(y)
        y = L.MaxPooling2D(2)(y)
    y = L.Flatten()(y)
    y = L.Dense(128, activation="relu")(y)
    y = L.Dense(10, activation="softmax")(y)
    return _convert_keras(keras.Model(x, y), seed)


def r_depthwise(seed: int = 12) -> bytes:
    """A MobileNet-like net on 64x64x3 (MobileNet v1 0.5's widths): a strided conv, seven depthwise-separable
    blocks (depthwise 3x3 + pointwise, 64 to 512 channels, four of them strided), global average pool, dense 10.
    He-normal initial weights (the depthwise ones over their 9 taps: Keras counts 9 x channels) keep the
    activations from dying out through the relu6 blocks."""
    keras = _keras(seed)
    L = keras.layers
    init = "he_normal"
    x = keras.Input((64, 64, 3), batch_size=1)
    y = L.Conv2D(32, 3, strides=2, padding="same", activation="relu6", kernel_initializer=init)(x)
    for ch, stride in ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 2)):
        y = L.DepthwiseConv2D(3, strides=stride, padding="same", activation="relu6",
                              depthwise_initializer=keras.initializers.RandomNormal(stddev=(2 / 9) ** 0.5))(y)
        y = L.Conv2D(ch, 1, activation="relu6", kernel_initializer=init)(y)
    y = L.GlobalAveragePooling2D()(y)
    y = L.Dense(10)(y)
    return _convert_keras(keras.Model(x, y), seed)


def r_mlp(seed: int = 13) -> bytes:
    """An MNIST MLP: 784-512-256-10."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((784,), batch_size=1)
    y = L.Dense(512, activation="relu")(x)
    y = L.Dense(256, activation="relu")(y)
    y = L.Dense(10, activation="softmax")(y)
    return _convert_keras(keras.Model(x, y), seed)


def r_conv1d(seed: int = 14, head: str = "flatten") -> bytes:
    """A keyword-spotting net on 49x40 MFCC frames: Conv1D 64, 128 (stride 2), 128 (stride 2), then a flattened
    dense 128 (``head="flatten"``, as the Speech Commands conv nets) or a global average pool (``"pool"``), 12."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((49, 40), batch_size=1)
    y = L.Conv1D(64, 3, padding="same", activation="relu")(x)
    y = L.Conv1D(128, 3, strides=2, padding="same", activation="relu")(y)
    y = L.Conv1D(128, 3, strides=2, padding="same", activation="relu")(y)
    y = L.Flatten()(y) if head == "flatten" else L.GlobalAveragePooling1D()(y)
    y = L.Dense(128, activation="relu")(y)
    y = L.Dense(12)(y)
    return _convert_keras(keras.Model(x, y), seed)


def r_conv1d_pool(seed: int = 14) -> bytes:
    """:func:`r_conv1d` with a global average pool: 99 KB of weights over 5 hybrid ops."""
    return r_conv1d(seed, head="pool")


def r_lstm_text(seed: int = 15, steps: int = 16) -> bytes:
    """A text classifier: embedding 5000 x 64, LSTM 64 over ``steps`` tokens, dense 64, 4."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((steps,), batch_size=1, dtype="int32")
    y = L.Embedding(5000, 64)(x)
    y = L.LSTM(64)(y)
    y = L.Dense(64, activation="relu")(y)
    y = L.Dense(4, activation="softmax")(y)
    return _convert_keras(keras.Model(x, y), seed, int_input=(0, 5000))


def r_transformer(seed: int = 16) -> bytes:
    """A transformer encoder block, d_model 128 over 32 positions: 4 heads, residuals, layer norms, FFN 512."""
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((32, 128), batch_size=1)
    a = L.MultiHeadAttention(num_heads=4, key_dim=32)(x, x)
    y = L.LayerNormalization()(x + a)
    f = L.Dense(512, activation="gelu")(y)
    f = L.Dense(128)(f)
    y = L.LayerNormalization()(y + f)
    return _convert_keras(keras.Model(x, y), seed)


BUILDERS: dict[str, Callable[..., bytes]] = {
    "cnn": b_cnn, "depthwise": b_depthwise, "mlp": b_mlp, "conv1d": b_conv1d, "lstm_text": b_lstm_text,
    "transformer": b_transformer, "transpose_conv": b_transpose_conv, "batch_matmul": b_batch_matmul,
    "shared_input": b_shared_input, "relu_dense": b_relu_dense,
    "real_cnn": r_cnn, "real_depthwise": r_depthwise, "real_mlp": r_mlp, "real_conv1d": r_conv1d,
    "real_lstm_text": r_lstm_text, "real_transformer": r_transformer,
    "real_conv1d_pool": r_conv1d_pool,
}


def model(name: str) -> tuple[bytes, list[dict[str, np.ndarray]], list[list[np.ndarray]]]:
    """The cached (``.tflite``, input sets, float outputs) of one model of :data:`BUILDERS`."""
    fn = BUILDERS[name]
    extra = (_pack, _convert_keras, _convert_fn, _keras) + ((r_conv1d,) if fn is r_conv1d_pool else ())
    return unpack(cached(f"hybrid-{name}", fn, {}, extra=extra))
