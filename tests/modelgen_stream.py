"""Streaming (stateful) ``.tflite`` test models built from fixed seeds (cached like :mod:`tests.modelgen`).

Each keeps state in TensorFlow resource variables, which TFLite (``experimental_enable_resource_variables``) keeps as
``VAR_HANDLE`` / ``READ_VARIABLE`` / ``ASSIGN_VARIABLE`` with a ``CALL_ONCE`` subgraph assigning the initial values.

* :func:`kws_model`: a keyword spotter: a ring buffer of the last ``K`` feature frames (state 1) feeding a streaming
  1-D convolution front end, a dense classifier and a softmax, and an exponential moving average of the class
  probabilities (state 2).  Both variables are read and written every step; their initial values are non-trivial.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.modelgen import _tf, cached, full_int8

#: feature bins per frame, frames in the ring buffer, conv channels, classes
FEAT, K, HID, CLASSES = 8, 4, 6, 5


def _kws_bytes(quant: str | None, seed: int) -> bytes:
    tf = _tf()
    rng = np.random.default_rng(seed)
    w_conv = (rng.standard_normal((3, FEAT, HID)) * 0.4).astype(np.float32)
    b_conv = (rng.standard_normal(HID) * 0.1).astype(np.float32)
    w_fc = (rng.standard_normal(((K - 2) * HID, CLASSES)) * 0.4).astype(np.float32)
    b_fc = (rng.standard_normal(CLASSES) * 0.1).astype(np.float32)
    ring0 = rng.uniform(-0.5, 0.5, (1, K, FEAT)).astype(np.float32)
    ema0 = np.full((1, CLASSES), 1.0 / CLASSES, np.float32)

    class KWS(tf.Module):  # type: ignore[name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.ring = tf.Variable(ring0, name="ring")
            self.ema = tf.Variable(ema0, name="ema")

        @tf.function(input_signature=[tf.TensorSpec((1, 1, FEAT), tf.float32, name="frame")])
        def __call__(self, frame: Any) -> Any:
            buf = tf.concat([self.ring[:, 1:, :], frame], axis=1)
            self.ring.assign(buf)
            h = tf.nn.relu(tf.nn.conv1d(buf, w_conv, stride=1, padding="VALID") + b_conv)
            logits = tf.matmul(tf.reshape(h, (1, (K - 2) * HID)), w_fc) + b_fc
            p = tf.nn.softmax(logits)
            ema = self.ema * 0.75 + p * 0.25
            self.ema.assign(ema)
            return {"probs": p, "smoothed": ema}

    m = KWS()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m)
    conv.experimental_enable_resource_variables = True
    if quant == "int8":
        rep_rng = np.random.default_rng(seed + 1)
        data = [[rep_rng.uniform(-1, 1, (1, 1, FEAT)).astype(np.float32)] for _ in range(32)]
        full_int8(conv, data)
    return bytes(conv.convert())


def kws_model(quant: str | None = None, seed: int = 12) -> bytes:
    """The streaming keyword spotter (float, or ``quant="int8"``)."""
    return cached(f"stream_kws-{quant or 'f32'}", _kws_bytes, {"quant": quant, "seed": seed})


def _types_bytes(seed: int) -> bytes:
    tf = _tf()
    rng = np.random.default_rng(seed)
    init = {"count": np.array([2_000_000_007, -1_234_567_891], np.int32),
            "ring8": rng.integers(-128, 128, (1, 4)).astype(np.int8),
            "ring_u8": np.array([[200, 3, 255, 128]], np.uint8),
            "acc": rng.uniform(-1, 1, (1, 4)).astype(np.float32)}

    class Types(tf.Module):  # type: ignore[name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.v = {k: tf.Variable(a, name=k) for k, a in init.items()}

        @tf.function(input_signature=[tf.TensorSpec((1, 1), tf.int8, name="x8"),
                                      tf.TensorSpec((1, 1), tf.uint8, name="xu8"),
                                      tf.TensorSpec((1, 4), tf.float32, name="xf")])
        def __call__(self, x8: Any, xu8: Any, xf: Any) -> Any:
            v = self.v
            count = v["count"] + tf.constant([1, -2], tf.int32)
            v["count"].assign(count)
            r8 = tf.concat([v["ring8"][:, 1:], x8], axis=1)
            v["ring8"].assign(r8)
            ru = tf.concat([v["ring_u8"][:, 1:], xu8], axis=1)
            v["ring_u8"].assign(ru)
            acc = v["acc"] * 0.5 + xf
            v["acc"].assign(acc)
            return {"count": count, "r8": r8, "ru8": ru, "acc": acc}

    m = Types()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m)
    conv.experimental_enable_resource_variables = True
    return bytes(conv.convert())


def state_types_model(seed: int = 21) -> bytes:
    """Resource variables of the state types streaming models use (int32 counter, int8 and uint8 ring buffers, a
    float32 accumulator), each with a non-trivial CALL_ONCE initial value, all read and written every step.

    (TFLite has no int16 resource variables: its converter refuses ``VarHandleOp`` of int16 as "neither a custom op
    nor a flex op".)"""
    return cached("stream_types-v2", _types_bytes, {"seed": seed})


def _rnn_bytes(quant: str | None, seed: int) -> bytes:
    tf = _tf()
    rng = np.random.default_rng(seed)
    units, gunits = 8, 6

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.4).astype(np.float32)

    lw, lu, lb = w(FEAT, 4 * units), w(units, 4 * units), w(4 * units)  # LSTM: gates i, f, g, o (Keras order)
    gw, gu, gb = w(units, 3 * gunits), w(gunits, 3 * gunits), w(3 * gunits)  # GRU: gates z, r, h
    hw, hb = w(gunits, CLASSES), w(CLASSES)
    h0 = rng.uniform(-0.5, 0.5, (1, units)).astype(np.float32)
    c0 = rng.uniform(-0.5, 0.5, (1, units)).astype(np.float32)

    class StatefulRNN(tf.Module):  # type: ignore[name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.h = tf.Variable(h0, name="lstm_h")
            self.c = tf.Variable(c0, name="lstm_c")
            self.g = tf.Variable(np.zeros((1, gunits), np.float32), name="gru_h")

        @tf.function(input_signature=[tf.TensorSpec((1, FEAT), tf.float32, name="frame")])
        def __call__(self, frame: Any) -> Any:
            z = tf.matmul(frame, lw) + tf.matmul(self.h, lu) + lb  # one LSTM step (Keras LSTMCell's equations)
            i, f, g, o = tf.split(z, 4, axis=1)
            c = tf.sigmoid(f) * self.c + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
            self.h.assign(h)
            self.c.assign(c)
            xz, xr, xh = tf.split(tf.matmul(h, gw) + gb, 3, axis=1)  # one GRU step (reset after the matmul)
            hz, hr, hh = tf.split(tf.matmul(self.g, gu), 3, axis=1)
            zt = tf.sigmoid(xz + hz)
            rt = tf.sigmoid(xr + hr)
            cand = tf.tanh(xh + rt * hh)
            gh = zt * self.g + (1.0 - zt) * cand
            self.g.assign(gh)
            return {"logits": tf.matmul(gh, hw) + hb}

    m = StatefulRNN()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m)
    conv.experimental_enable_resource_variables = True
    if quant == "int8":
        rep_rng = np.random.default_rng(seed + 1)
        data = [[rep_rng.uniform(-1, 1, (1, FEAT)).astype(np.float32)] for _ in range(32)]
        full_int8(conv, data)
    return bytes(conv.convert())


def stateful_rnn_model(quant: str | None = None, seed: int = 5) -> bytes:
    """A streaming LSTM cell feeding a GRU cell (Keras cells), one frame per invocation, their states (LSTM h and c,
    GRU h) in resource variables with non-trivial initial values, and a dense head (float, or ``quant="int8"``)."""
    return cached(f"stream_rnn-{quant or 'f32'}", _rnn_bytes, {"quant": quant, "seed": seed})
