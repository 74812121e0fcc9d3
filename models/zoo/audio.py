"""Audio models: keyword spotting (DS-CNN) and a log-mel front end built from a DFT matrix product."""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import seeded_keras


def _ds_cnn_body(keras: Any, x: Any, width: int, blocks: int, classes: int) -> Any:
    L = keras.layers
    x = L.Conv2D(width, (10, 4), strides=2, padding="same", use_bias=False)(x)
    x = L.ReLU()(L.BatchNormalization()(x))
    for _ in range(blocks):
        x = L.DepthwiseConv2D(3, padding="same", use_bias=False)(x)
        x = L.ReLU()(L.BatchNormalization()(x))
        x = L.Conv2D(width, 1, use_bias=False)(x)
        x = L.ReLU()(L.BatchNormalization()(x))
    x = L.AveragePooling2D(pool_size=(int(x.shape[1]), int(x.shape[2])))(x)
    x = L.Flatten()(x)
    x = L.Dense(classes)(x)
    return L.Softmax()(x)


def ds_cnn(seed: int) -> Any:
    """MLPerf Tiny keyword spotting DS-CNN: 49x10 MFCC input, 10x4 stride-2 conv, 4 depthwise-separable blocks."""
    keras = seeded_keras(seed)
    inp = keras.Input((49, 10, 1), name="mfcc")
    return keras.Model(inp, _ds_cnn_body(keras, inp, 64, 4, 12), name="ds_cnn")


def mel_matrix(n_fft: int, n_mels: int, rate: float = 16000.0, fmin: float = 20.0, fmax: float = 7600.0
               ) -> np.ndarray:
    """HTK-style triangular mel filter bank, ``[n_fft // 2 + 1, n_mels]``."""
    def to_mel(f: np.ndarray) -> np.ndarray:
        return 1127.0 * np.log1p(f / 700.0)

    bins = np.linspace(0.0, rate / 2, n_fft // 2 + 1)
    edges = np.linspace(to_mel(np.array(fmin)), to_mel(np.array(fmax)), n_mels + 2)
    mel = to_mel(bins)[:, None]
    lo, mid, hi = edges[:-2][None], edges[1:-1][None], edges[2:][None]
    w = np.maximum(0.0, np.minimum((mel - lo) / (mid - lo), (hi - mel) / (hi - mid)))
    return w.astype(np.float32)


def dft_matrices(n_fft: int) -> tuple[np.ndarray, np.ndarray]:
    """Real and imaginary parts of the one-sided DFT, windowed by a periodic Hann window: ``[n_fft, n_fft//2+1]``."""
    n = np.arange(n_fft)[:, None]
    k = np.arange(n_fft // 2 + 1)[None]
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft))[:, None]
    ang = 2 * np.pi * n * k / n_fft
    return (window * np.cos(ang)).astype(np.float32), (-window * np.sin(ang)).astype(np.float32)


def _log_mel_layer(keras: Any, n_fft: int, n_mels: int) -> Any:
    ops = keras.ops
    re, im = dft_matrices(n_fft)
    mel = mel_matrix(n_fft, n_mels)

    class LogMel(keras.layers.Layer):  # type: ignore[misc, name-defined]
        """frames [B, T, n_fft] -> log(|DFT|^2 @ mel + eps), [B, T, n_mels]."""

        def call(self, frames: Any) -> Any:
            real, imag = ops.matmul(frames, re), ops.matmul(frames, im)
            power = real * real + imag * imag  # MUL, not SQUARE: TFLite has no 16x8 SQUARE
            return ops.log(ops.matmul(power, mel) + 1e-3)

    return LogMel()


def log_mel_frontend(seed: int) -> Any:
    """Log-mel spectrogram of 32 frames of 256 samples: Hann window and DFT as matrix products, power, 20-band mel
    filter bank, log."""
    keras = seeded_keras(seed)
    inp = keras.Input((32, 256), name="frames")
    return keras.Model(inp, _log_mel_layer(keras, 256, 20)(inp), name="log_mel_frontend")


def kws_end_to_end(seed: int) -> Any:
    """Keyword spotting from framed audio: the log-mel front end (49 frames, 10 bands) feeding a small DS-CNN."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((49, 256), name="frames")
    x = _log_mel_layer(keras, 256, 10)(inp)
    x = L.Reshape((49, 10, 1))(x)
    x = L.BatchNormalization()(x)
    return keras.Model(inp, _ds_cnn_body(keras, x, 32, 2, 12), name="kws_end_to_end")
