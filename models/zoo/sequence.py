"""Sequence models: recurrent networks (unrolled and looped), a temporal convolution network, point clouds."""

from __future__ import annotations

from typing import Any

from .core import seeded_keras


def _rnn_model(seed: int, name: str, make: Any) -> Any:
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((16, 12), name="sequence")
    x = make(L)(inp)
    x = L.Dense(8)(x)
    return keras.Model(inp, L.Softmax()(x), name=name)


def lstm(seed: int) -> Any:
    """LSTM(32) over 16 steps of 12 features, unrolled (FULLY_CONNECTED, LOGISTIC, TANH, MUL per step)."""
    return _rnn_model(seed, "lstm", lambda L: L.LSTM(32, unroll=True))


def gru(seed: int) -> Any:
    """GRU(32) over 16 steps, unrolled (reset-after gates)."""
    return _rnn_model(seed, "gru", lambda L: L.GRU(32, unroll=True))


def bidirectional_lstm(seed: int) -> Any:
    """Bidirectional LSTM(16) returning sequences, global average pooling over time."""
    def make(L: Any) -> Any:
        def f(x: Any) -> Any:
            y = L.Bidirectional(L.LSTM(16, unroll=True, return_sequences=True))(x)
            return L.GlobalAveragePooling1D()(y)

        return f

    return _rnn_model(seed, "bidirectional_lstm", make)


def lstm_while(seed: int) -> Any:
    """LSTM(16) that is not unrolled: TensorFlow Lite keeps the recurrence as a WHILE loop over the time steps."""
    return _rnn_model(seed, "lstm_while", lambda L: L.LSTM(16))


def tcn(seed: int) -> Any:
    """Temporal convolution network: causal dilated Conv1D residual blocks (rates 1, 2, 4, 8)."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((64, 8), name="sequence")
    x = L.Conv1D(24, 1)(inp)
    for rate in (1, 2, 4, 8):
        y = L.Conv1D(24, 3, padding="causal", dilation_rate=rate)(x)
        y = L.ReLU()(L.BatchNormalization()(y))
        y = L.Conv1D(24, 3, padding="causal", dilation_rate=rate)(y)
        x = L.ReLU()(L.Add()([x, y]))
    x = L.GlobalAveragePooling1D()(x)
    return keras.Model(inp, L.Softmax()(L.Dense(6)(x)), name="tcn")


def pointnet_mini(seed: int) -> Any:
    """PointNet-style classifier: shared per-point MLP (1x1 Conv1D + BN + ReLU), global max pooling, dense head."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((128, 3), name="points")
    x = inp
    for c in (32, 64, 128):
        x = L.ReLU()(L.BatchNormalization()(L.Conv1D(c, 1)(x)))
    x = L.GlobalMaxPooling1D()(x)
    x = L.Dense(64, activation="relu")(x)
    return keras.Model(inp, L.Softmax()(L.Dense(10)(x)), name="pointnet_mini")
