"""Custom Keras layers of Silicon Labs' MLTK models, for ``tf2tosa convert --custom-objects`` (Keras 3).

``MultiScaleTemporalConvolution`` (the keyword-spotting models ``keyword_spotting_alexa``, ``..._on_off_v3``,
``..._pacman_v3``): a temporal-efficient-network block, a depthwise convolution along the time axis (axis 1 of an
NHWC ``[batch, time, 1, channels]`` tensor) with ``same`` padding, no bias, stride ``stride`` (on the width axis
too, whose size is 1: TensorFlow's CPU kernel takes equal strides only).  With several ``scales`` (kernel
lengths) it is one such branch per scale, their outputs summed (the branches' batch norms fold into the kernels
at inference).  Reconstructed from the layer config the files store (``{"stride": 1|2, "scales": [9]}``), their
weights (one ``depthwise_kernel`` of shape ``[9, 1, C, 1]`` per layer) and the published description of the
block; the published files all use a single scale.  Not MLTK's code: a model converted with it computes what this
layer computes, which is what verify checks.

Usage::

    tf2tosa verify --custom-objects tools/custom_objects/mltk_layers.py siliconlabs__keyword_spotting_alexa.h5
"""

from __future__ import annotations

from typing import Any

import keras


class MultiScaleTemporalConvolution(keras.layers.Layer):
    """A sum of depthwise temporal convolutions, one per kernel length in ``scales`` (see the module docstring)."""

    def __init__(self, stride: int = 1, scales: list[int] | tuple[int, ...] = (9,), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stride = int(stride)
        self.scales = [int(s) for s in scales]

    def build(self, input_shape: Any) -> None:
        channels = int(input_shape[-1])
        self.kernels = [self.add_weight(name="depthwise_kernel" if i == 0 else f"depthwise_kernel_{i}",
                                        shape=(k, 1, channels, 1), initializer="glorot_uniform")
                        for i, k in enumerate(self.scales)]

    def call(self, x: Any) -> Any:
        out = None
        for kernel in self.kernels:
            y = keras.ops.depthwise_conv(x, kernel, strides=self.stride, padding="same")
            out = y if out is None else out + y
        return out

    def compute_output_shape(self, input_shape: Any) -> tuple[Any, ...]:
        t = input_shape[1]
        return (input_shape[0], None if t is None else -(-t // self.stride), input_shape[2], input_shape[3])

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "stride": self.stride, "scales": list(self.scales)}


CUSTOM_OBJECTS = {"MultiScaleTemporalConvolution": MultiScaleTemporalConvolution}
