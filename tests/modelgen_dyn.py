"""Models with unknown dimensions (issue 13, specialisation): built with TensorFlow from fixed seeds and cached like
:mod:`tests.modelgen`.  Each builder returns ``.tflite`` bytes; ``quant="int8"`` gives a fully int8 model (int8
inputs and outputs) calibrated on representative data at several sizes of the unknown dimensions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tests.modelgen import _tf, cached, full_int8


def _to_tflite(fn: Callable[..., Any], shape: Sequence[int | None], quant: str | None,
               rep_shapes: Sequence[tuple[int, ...]], seed: int) -> bytes:
    tf = _tf()
    tfn = tf.function(fn, input_signature=[tf.TensorSpec(list(shape), tf.float32, name="x")], autograph=False)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([tfn.get_concrete_function()], tfn)
    if quant == "int8":
        rng = np.random.default_rng(seed + 7919)
        data = [[rng.uniform(-1.0, 1.0, s).astype(np.float32)] for s in rep_shapes for _ in range(4)]
        full_int8(conv, data)
    elif quant is not None:
        raise ValueError(f"unknown quant mode {quant!r}")
    return bytes(conv.convert())


def _w(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def b_cnn(quant: str | None = None, seed: int = 0) -> bytes:
    """A small CNN over a dynamic batch: [None, 16, 16, 3] → conv/relu/maxpool/conv/relu/mean/dense → [None, 5]."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    w1, w2, wd = _w(rng, (3, 3, 3, 8), 0.3), _w(rng, (3, 3, 8, 8), 0.3), _w(rng, (8, 5), 0.3)

    def fn(x: Any) -> Any:
        y = tf.nn.relu(tf.nn.conv2d(x, w1, 1, "SAME"))
        y = tf.nn.max_pool2d(y, 2, 2, "VALID")
        y = tf.nn.relu(tf.nn.conv2d(y, w2, 1, "SAME"))
        return tf.matmul(tf.reduce_mean(y, axis=[1, 2]), wd)

    return _to_tflite(fn, [None, 16, 16, 3], quant, [(2, 16, 16, 3), (5, 16, 16, 3)], seed)


def b_audio(quant: str | None = None, seed: int = 1) -> bytes:
    """A log-mel front end over a fully dynamic [None, None] waveform: tf.signal.frame (64 samples, hop 16), a
    Hann-windowed DFT as two matmuls (real, imaginary), power, a mel matrix, log."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    n, hop, mels = 64, 16, 8
    k = np.arange(n)
    win = 0.5 - 0.5 * np.cos(2 * np.pi * k / n)
    f = n // 2 + 1
    ang = 2 * np.pi * np.outer(k, np.arange(f)) / n
    re_m = (np.cos(ang) * win[:, None]).astype(np.float32)
    im_m = (-np.sin(ang) * win[:, None]).astype(np.float32)
    mel = (np.abs(rng.standard_normal((f, mels))) * 0.1).astype(np.float32)

    def fn(x: Any) -> Any:
        frames = tf.signal.frame(x, n, hop)
        re, im = tf.matmul(frames, re_m), tf.matmul(frames, im_m)
        return tf.math.log(tf.matmul(re * re + im * im, mel) + 1e-3)

    return _to_tflite(fn, [None, None], quant, [(1, 400), (2, 256)], seed)


def _encoder_layer(rng: np.random.Generator, dim: int, heads: int, act: str) -> Callable[..., Any]:
    """One transformer encoder layer over [batch, time, dim], weights drawn from ``rng``: multi-head
    self-attention whose head split/merge reshapes take their targets from tf.shape (an optional additive score
    bias [batch, 1, 1, time]), residual, layer norm, an MLP with ``act`` (tf.nn.relu / tf.nn.gelu), residual, norm."""
    tf = _tf()
    dh = dim // heads
    wq, wk, wv, wo = (_w(rng, (dim, dim), dim ** -0.5) for _ in range(4))
    w1, w2 = _w(rng, (dim, 2 * dim), dim ** -0.5), _w(rng, (2 * dim, dim), (2 * dim) ** -0.5)
    g1, b1 = (1 + _w(rng, (dim,), 0.1)), _w(rng, (dim,), 0.1)

    def norm(y: Any) -> Any:
        mean = tf.reduce_mean(y, axis=-1, keepdims=True)
        var = tf.reduce_mean(tf.square(y - mean), axis=-1, keepdims=True)
        return (y - mean) * tf.math.rsqrt(var + 1e-5) * g1 + b1

    def layer(x: Any, score_bias: Any = None) -> Any:
        s = tf.shape(x)
        b, t = s[0], s[1]

        def split(y: Any) -> Any:
            return tf.transpose(tf.reshape(y, tf.stack([b, t, heads, dh])), [0, 2, 1, 3])

        q, k, v = split(tf.matmul(x, wq)), split(tf.matmul(x, wk)), split(tf.matmul(x, wv))
        bias = None if score_bias is None else score_bias(b, t)
        scores = tf.matmul(q, k, transpose_b=True) * dh ** -0.5
        att = tf.nn.softmax(scores if bias is None else scores + bias, axis=-1)
        o = tf.reshape(tf.transpose(tf.matmul(att, v), [0, 2, 1, 3]), tf.stack([b, t, dim]))
        y = norm(x + tf.matmul(o, wo))
        return norm(y + tf.matmul(getattr(tf.nn, act)(tf.matmul(y, w1)), w2))

    return layer


def b_transformer(quant: str | None = None, seed: int = 2, dim: int = 16, heads: int = 2) -> bytes:
    """One transformer encoder layer over a dynamic sequence length, [1, None, dim]: multi-head self-attention
    whose head split/merge reshapes take their targets from tf.shape, residual, layer norm, a ReLU MLP."""
    layer = _encoder_layer(np.random.default_rng(seed), dim, heads, "relu")

    def fn(x: Any) -> Any:
        return layer(x)

    return _to_tflite(fn, [1, None, dim], quant, [(1, 5, dim), (1, 12, dim)], seed)


def b_shape_reshape(quant: str | None = None, seed: int = 3) -> bytes:
    """RESHAPE targets computed from SHAPE/STRIDED_SLICE/PACK arithmetic: [None, None, 4] → [b*n, 4] → matmul →
    [b, n // 2, 12] → tanh (n must be even)."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    w = _w(rng, (4, 6), 0.3)

    def fn(x: Any) -> Any:
        s = tf.shape(x)
        b, n = s[0], s[1]
        y = tf.matmul(tf.reshape(x, tf.stack([b * n, 4])), w)
        return tf.nn.tanh(tf.reshape(y, tf.stack([b, n // 2, 12])))

    return _to_tflite(fn, [None, None, 4], quant, [(1, 6, 4), (3, 10, 4)], seed)


def b_shape_ops(quant: str | None = None, seed: int = 4) -> bytes:
    """Every shape-fed op of the specialisation pass on a [None, None] input (n = length, b = batch): RANGE with
    a computed start (the last 3 positions), WHERE on a computed condition (the even positions), SLICE with a
    computed size, FILL, BROADCAST_TO, TILE and PAD with computed multiples/paddings."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    w = _w(rng, (1,), 1.0)

    def fn(x: Any) -> Any:
        s = tf.shape(x)
        b, n = s[0], s[1]
        tail = tf.gather(x, tf.range(n - 3, n), axis=1)  # [b, 3]
        even = tf.gather(x, tf.reshape(tf.cast(tf.where(tf.equal(tf.range(n) % 2, 0)), tf.int32), [-1]),
                         axis=1)  # [b, ceil(n/2)]
        head = tf.slice(x, [0, 0], tf.stack([b, n // 2]))  # [b, n // 2]
        ones = tf.fill(tf.stack([b, 3]), 0.5) + tf.broadcast_to(w, tf.stack([b, 3]))
        tiled = tf.tile(tail * ones, tf.stack([1, n // 4 + 1]))  # [b, 3 (n // 4 + 1)]
        padded = tf.pad(head, tf.stack([tf.stack([0, 0]), tf.stack([1, n % 3])]))
        return tf.concat([tiled, even, padded], axis=1)

    return _to_tflite(fn, [None, None], quant, [(1, 8), (2, 13)], seed)


def b_audio_cnn(quant: str | None = None, seed: int = 5) -> bytes:
    """A keyword-spotting style CNN over a fully dynamic [None, None, 8] feature sequence: conv1d stride 2 SAME,
    max-pool SAME, conv1d VALID, mean and max over time (the mean divides by a length the input decides), dense."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    w1, w2, wd = _w(rng, (3, 8, 16), 0.3), _w(rng, (5, 16, 16), 0.2), _w(rng, (32, 4), 0.3)

    def fn(x: Any) -> Any:
        y = tf.nn.relu(tf.nn.conv1d(x, w1, 2, "SAME"))
        y = tf.nn.max_pool1d(y, 2, 2, "SAME")
        y = tf.nn.conv1d(y, w2, 1, "VALID")
        return tf.matmul(tf.concat([tf.reduce_mean(y, axis=1), tf.reduce_max(y, axis=1)], axis=1), wd)

    return _to_tflite(fn, [None, None, 8], quant, [(2, 41, 8), (3, 64, 8)], seed)


def _to_tflite_n(fn: Callable[..., Any], shapes: Sequence[Sequence[int | None]], names: Sequence[str],
                 quant: str | None, rep: Callable[[np.random.Generator], list[np.ndarray]], seed: int) -> bytes:
    """:func:`_to_tflite` for several float inputs; ``rep`` draws one representative input list."""
    tf = _tf()
    specs = [tf.TensorSpec(list(s), tf.float32, name=n) for s, n in zip(shapes, names)]
    tfn = tf.function(fn, input_signature=specs, autograph=False)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([tfn.get_concrete_function()], tfn)
    if quant == "int8":
        rng = np.random.default_rng(seed + 7919)
        full_int8(conv, [rep(rng) for _ in range(8)])
    elif quant is not None:
        raise ValueError(f"unknown quant mode {quant!r}")
    return bytes(conv.convert())


def b_mobilenet(quant: str | None = None, seed: int = 6) -> bytes:
    """A MobileNet-style block stack over a dynamic batch, [None, 16, 16, 3]: conv 3x3 stride 2 SAME, ReLU6,
    depthwise 3x3 SAME, pointwise 1x1, depthwise 3x3 stride 2 SAME, global average pool, dense."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    w1, d1, p1 = _w(rng, (3, 3, 3, 8), 0.3), _w(rng, (3, 3, 8, 1), 0.3), _w(rng, (1, 1, 8, 16), 0.3)
    d2, wd = _w(rng, (3, 3, 16, 1), 0.3), _w(rng, (16, 5), 0.3)

    def fn(x: Any) -> Any:
        y = tf.nn.relu6(tf.nn.conv2d(x, w1, 2, "SAME"))
        y = tf.nn.relu6(tf.nn.depthwise_conv2d(y, d1, [1, 1, 1, 1], "SAME"))
        y = tf.nn.relu6(tf.nn.conv2d(y, p1, 1, "VALID"))
        y = tf.nn.relu6(tf.nn.depthwise_conv2d(y, d2, [1, 2, 2, 1], "SAME"))
        return tf.matmul(tf.reduce_mean(y, axis=[1, 2]), wd)

    return _to_tflite(fn, [None, 16, 16, 3], quant, [(2, 16, 16, 3), (5, 16, 16, 3)], seed)


def b_bert(quant: str | None = None, seed: int = 7, dim: int = 16, heads: int = 2) -> bytes:
    """A BERT-style encoder layer over a dynamic batch AND sequence: x [None, None, dim] and an attention mask
    [None, None] (1 keep, 0 padding, added as -1e4 to the scores), heads split by reshapes from tf.shape, layer norm,
    a GELU MLP."""
    tf = _tf()
    layer = _encoder_layer(np.random.default_rng(seed), dim, heads, "gelu")

    def fn(x: Any, mask: Any) -> Any:
        return layer(x, lambda b, t: tf.reshape((1.0 - mask) * -1e4, tf.stack([b, 1, 1, t])))

    def rep(rng: np.random.Generator) -> list[np.ndarray]:
        b, t = int(rng.integers(1, 4)), int(rng.integers(3, 13))
        return [rng.uniform(-1.0, 1.0, (b, t, dim)).astype(np.float32),
                (rng.uniform(size=(b, t)) < 0.8).astype(np.float32)]

    return _to_tflite_n(fn, [[None, None, dim], [None, None]], ["x", "mask"], quant, rep, seed)


def b_tcn(quant: str | None = None, seed: int = 8) -> bytes:
    """A dilated causal 1-D TCN over dynamic time, [None, None, 4]: two blocks of left PAD (k-1)·d + conv1d VALID
    with dilation d (1, then 2), ReLU, a 1x1 residual; an output per time step."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    ws = [_w(rng, (3, 4, 8), 0.4), _w(rng, (3, 8, 8), 0.3)]
    res = [_w(rng, (1, 4, 8), 0.4), None]
    wo = _w(rng, (1, 8, 3), 0.3)

    def fn(x: Any) -> Any:
        y = x
        for d, w, r in zip((1, 2), ws, res):
            z = tf.pad(y, [[0, 0], [2 * d, 0], [0, 0]])
            z = tf.nn.relu(tf.nn.conv1d(z, w, 1, "VALID", dilations=d))
            y = z + (tf.nn.conv1d(y, r, 1, "VALID") if r is not None else y)
        return tf.nn.conv1d(y, wo, 1, "VALID")

    return _to_tflite(fn, [None, None, 4], quant, [(2, 17, 4), (1, 40, 4)], seed)


def b_gru(quant: str | None = None, seed: int = 9, units: int = 8) -> bytes:
    """A GRU over dynamic time, [None, None, 4] → the last state [None, units], written as a tf.while_loop over
    the time steps (control flow: tfl.while)."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    wz, wr, wh = (_w(rng, (4 + units, units), 0.4) for _ in range(3))

    def fn(x: Any) -> Any:
        t = tf.shape(x)[1]
        h0 = tf.zeros(tf.stack([tf.shape(x)[0], units]))

        def step(i: Any, h: Any) -> Any:
            xi = tf.gather(x, i, axis=1)
            xh = tf.concat([xi, h], axis=1)
            z, r = tf.sigmoid(tf.matmul(xh, wz)), tf.sigmoid(tf.matmul(xh, wr))
            c = tf.tanh(tf.matmul(tf.concat([xi, r * h], axis=1), wh))
            return i + 1, (1 - z) * h + z * c

        _, h = tf.while_loop(lambda i, h: i < t, step, [tf.constant(0), h0])
        return h

    return _to_tflite(fn, [None, None, 4], quant, [(2, 5, 4), (1, 9, 4)], seed)


def b_pool_same(quant: str | None = None, seed: int = 10, pool: str = "avg") -> bytes:
    """Depthwise 3x3 stride 2 SAME then a 2x2 stride 2 SAME pool over a fully dynamic [None, None, None, 4] image
    (both spatial sizes symbolic)."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    dw = _w(rng, (3, 3, 4, 1), 0.4)

    def fn(x: Any) -> Any:
        y = tf.nn.relu(tf.nn.depthwise_conv2d(x, dw, [1, 2, 2, 1], "SAME"))
        return (tf.nn.avg_pool2d if pool == "avg" else tf.nn.max_pool2d)(y, 2, 2, "SAME")

    return _to_tflite(fn, [None, None, None, 4], quant, [(1, 9, 12, 4), (2, 16, 7, 4)], seed)


def b_max_pool_same(quant: str | None = None, seed: int = 10) -> bytes:
    """:func:`b_pool_same` with a max-pool."""
    return b_pool_same(quant, seed, pool="max")


BUILDERS: dict[str, Callable[..., bytes]] = {"cnn": b_cnn, "audio": b_audio, "transformer": b_transformer,
                                             "shape_reshape": b_shape_reshape, "shape_ops": b_shape_ops,
                                             "audio_cnn": b_audio_cnn, "mobilenet": b_mobilenet, "bert": b_bert,
                                             "tcn": b_tcn, "gru": b_gru, "avg_pool_same": b_pool_same,
                                             "max_pool_same": b_max_pool_same}


def model(name: str, quant: str | None = None) -> bytes:
    """The cached ``.tflite`` of ``BUILDERS[name]`` (built on first use)."""
    return cached(f"dyn/{name}" + (f"_{quant}" if quant else ""), BUILDERS[name], {"quant": quant},
                  extra=(_to_tflite, _to_tflite_n, _w, _encoder_layer))
