"""Builders of control-flow ``.tflite`` test models (cached like :mod:`tests.modelgen`).

What TensorFlow 2.21 / Keras 3 emits (checked when this file was written):

* ``keras.layers.LSTM`` / ``GRU`` / ``SimpleRNN`` (static sequence length, ``unroll=False``) give one ``WHILE`` whose
  cond compares a loop counter (starting at a constant 0) with the constant sequence length (and a second
  counter with the constant maximum-iterations bound); the body reads step ``t`` with ``GATHER`` on the time axis
  (index = the counter), runs the cell, and writes the step output with ``DYNAMIC_UPDATE_SLICE`` into a
  loop-carried ``[seq, batch, units]`` buffer.  ``Bidirectional(LSTM)`` is two such loops (the backward one
  reads a ``REVERSE_V2``-d input) and a ``CONCATENATION``.
* ``tf.while_loop`` with a counter bounded by a constant gives a ``WHILE`` the same way; a bound read from an input
  gives a loop whose trip count is data dependent.
* ``tf.cond`` on a predicate computed from an input gives ``IF`` with then/else subgraphs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tests.modelgen import _seeded_keras, _tf, cached, convert

SEQ, FEAT, UNITS = 8, 4, 8


# ---------------------------------------------------------------------------------------------------------------
# Keras recurrent layers
# ---------------------------------------------------------------------------------------------------------------
def _rnn_layer(keras: Any, kind: str, units: int, return_sequences: bool) -> Any:
    L = keras.layers
    if kind == "lstm":
        return L.LSTM(units, return_sequences=return_sequences)
    if kind == "gru":
        return L.GRU(units, return_sequences=return_sequences)
    if kind == "simple_rnn":
        return L.SimpleRNN(units, return_sequences=return_sequences)
    if kind == "bilstm":
        return L.Bidirectional(L.LSTM(units, return_sequences=return_sequences))
    raise ValueError(f"unknown recurrent layer kind {kind!r}")


def _rnn_bytes(kind: str, batch: int = 1, seq: int = SEQ, feat: int = FEAT, units: int = UNITS,
               return_sequences: bool = True, quant: str | None = None, seed: int = 3) -> bytes:
    keras = _seeded_keras(seed)
    inp = keras.Input((seq, feat), batch_size=batch, name="x0")
    out = _rnn_layer(keras, kind, units, return_sequences)(inp)
    model = keras.Model(inp, out)
    return convert(model, [(batch, seq, feat)], quant=quant, seed=seed)


def rnn_model(kind: str, batch: int = 1, seq: int = SEQ, feat: int = FEAT, units: int = UNITS,
              return_sequences: bool = True, quant: str | None = None) -> bytes:
    """A Keras 3 ``kind`` layer (lstm, gru, simple_rnn, bilstm) on a ``[batch, seq, feat]`` input."""
    params = {"kind": kind, "batch": batch, "seq": seq, "feat": feat, "units": units,
              "return_sequences": return_sequences, "quant": quant}
    name = f"cf_{kind}-{batch}x{seq}x{feat}-{units}{'-seq' if return_sequences else ''}-{quant}"
    return cached(name, _rnn_bytes, params, extra=(_seeded_keras, _rnn_layer))


# ---------------------------------------------------------------------------------------------------------------
# tf.while_loop / tf.cond
# ---------------------------------------------------------------------------------------------------------------
def _while_static_fn(tf: Any, n: int) -> Callable[..., Any]:
    w = tf.constant(np.linspace(-0.5, 0.5, 16, dtype=np.float32).reshape(4, 4))

    def fn(x: Any) -> Any:
        def cond(i: Any, acc: Any) -> Any:
            return i < n

        def body(i: Any, acc: Any) -> Any:
            return i + 1, tf.tanh(tf.matmul(acc, w) + x) * 0.5 + acc * 0.25

        _, y = tf.while_loop(cond, body, (tf.constant(0), x))
        return y

    return fn


def _while_static_bytes(n: int = 5, batch: int | None = 2) -> bytes:
    tf = _tf()
    return convert(_while_static_fn(tf, n), [(batch, 4)])


def while_static(n: int = 5, batch: int | None = 2) -> bytes:
    """``tf.while_loop`` with a constant trip count ``n`` on a ``[batch, 4]`` float input (None: dynamic batch)."""
    return cached(f"cf_while_static-{n}-{batch}", _while_static_bytes, {"n": n, "batch": batch},
                  extra=(_while_static_fn,))


def _while_dynamic_fn(tf: Any) -> Callable[..., Any]:
    def fn(x: Any, n: Any) -> Any:
        def cond(i: Any, acc: Any) -> Any:
            return i < n[0]

        def body(i: Any, acc: Any) -> Any:
            return i + 1, acc * 0.5 + tf.sin(acc)

        _, y = tf.while_loop(cond, body, (tf.constant(0), x))
        return y

    return fn


def _while_dynamic_bytes(batch: int | None = 2) -> bytes:
    tf = _tf()
    return convert(_while_dynamic_fn(tf), [(batch, 4), ((1,), "int32")])


def while_dynamic(batch: int | None = 2) -> bytes:
    """``tf.while_loop`` whose trip count is the int32 input ``x1[0]``: a TOSA WHILE_LOOP."""
    return cached(f"cf_while_dynamic-{batch}", _while_dynamic_bytes, {"batch": batch}, extra=(_while_dynamic_fn,))


def _while_cond_fn(tf: Any, static: bool) -> Callable[..., Any]:
    def fn(x: Any, n: Any) -> Any:
        bound = 4 if static else n[0]

        def cond(i: Any, acc: Any) -> Any:
            return i < bound

        def body(i: Any, acc: Any) -> Any:
            flip = tf.reduce_sum(acc) > 0.0
            acc = tf.cond(flip, lambda: acc * 0.5 - 0.3, lambda: tf.tanh(acc) + 0.2)
            return i + 1, acc

        _, y = tf.while_loop(cond, body, (tf.constant(0), x))
        return y

    return fn


def _while_cond_bytes(static: bool) -> bytes:
    tf = _tf()
    return convert(_while_cond_fn(tf, static), [(2, 4), ((1,), "int32")])


def while_cond(static: bool = True) -> bytes:
    """A ``tf.while_loop`` (4 iterations, or ``x1[0]``) whose body holds a data-dependent ``tf.cond``."""
    return cached(f"cf_while_cond-{'static' if static else 'dynamic'}", _while_cond_bytes, {"static": static},
                  extra=(_while_cond_fn,))


def _cond_fn(tf: Any) -> Callable[..., Any]:
    def fn(x: Any) -> Any:
        pred = tf.reduce_sum(x) > 0.0
        return tf.cond(pred, lambda: tf.nn.relu(x) * 2.0 + 1.0, lambda: tf.tanh(x) - x * 0.5)

    return fn


def _cond_bytes() -> bytes:
    tf = _tf()
    return convert(_cond_fn(tf), [(2, 3)])


def cond_model() -> bytes:
    """``tf.cond`` on ``reduce_sum(x) > 0`` choosing between two float expressions: IF."""
    return cached("cf_cond", _cond_bytes, {}, extra=(_cond_fn,))


# ---------------------------------------------------------------------------------------------------------------
# Resource variables (CALL_ONCE + VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE)
# ---------------------------------------------------------------------------------------------------------------
def _variable_bytes(assign: bool, twice: bool = False) -> bytes:
    tf = _tf()

    class M(tf.Module):  # type: ignore[name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable(np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(2, 4), name="w")
            self.acc = tf.Variable(np.full((2, 4), 0.25, np.float32), name="acc")

        @tf.function(input_signature=[tf.TensorSpec((2, 4), tf.float32, name="x0")])
        def __call__(self, x: Any) -> Any:
            y = x * self.w + self.acc
            if assign:
                self.acc.assign(self.acc * 0.5 + x)
            if twice:  # a read after a write, and a second write
                z = self.acc.read_value() * 2.0
                self.acc.assign_add(z * 0.1)
                y = y + z
            return y

    m = M()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m)
    conv.experimental_enable_resource_variables = True
    return bytes(conv.convert())


def variable_model(assign: bool = False, twice: bool = False) -> bytes:
    """A ``tf.Module`` reading two resource variables (and, with ``assign``, updating one of them; with ``twice``,
    reading it back and updating it again)."""
    name = f"cf_variable-{'assign' if assign else 'read'}{'-twice' if twice else ''}"
    return cached(name, _variable_bytes, {"assign": assign, "twice": twice})
