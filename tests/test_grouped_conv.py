"""ConvNeXt's building block: a 7x7 ``Conv2D(groups=C)`` after a LayerNorm, batch left unknown (Keras' default).

* A grouped convolution with one input channel per group is one DEPTHWISE_CONV2D (channel ``g·M + m``), not C
  SLICE + CONV2D pairs and a CONCAT: ConvNeXt-Tiny (keras.applications, 64x64) took 7.4 s to convert and gave
  ~20,000 SLICEs; now one op per block.  Groups of several input channels keep one CONV2D per group.
* In int8, TFLite leaves the LayerNorm's NEG in float (DEQUANTIZE → NEG → QUANTIZE); the island becomes a TABLE
  before the rules run, while the batch is still symbolic.  Its shape is re-inferred once its operand is static
  (the conversion refused the model before: "operand … has a dynamic shape ('batch', …)").

Oracle: LiteRT's reference kernels (``verify``): float within the verifier's bound, int8 bit-exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("ai_edge_litert")

import tf2tosa  # noqa: E402


def _block_bytes(quant: str | None = None, groups_in: int = 1, seed: int = 21) -> bytes:
    from tests import modelgen

    keras = modelgen._seeded_keras(seed)
    c = 16
    inp = keras.Input((10, 10, 8))  # batch None: a symbolic batch in the .tflite
    x = keras.layers.Conv2D(c, 1)(inp)
    x = keras.layers.LayerNormalization(epsilon=1e-6)(x)
    x = keras.layers.Conv2D(2 * c, 7 if groups_in == 1 else 3, padding="same", groups=c // groups_in)(x)
    out = keras.layers.Conv2D(4, 1)(keras.layers.Activation("gelu")(x))
    model = keras.Model(inp, out)
    return modelgen.convert(model, [(1, 10, 10, 8)], quant=quant, seed=seed)


def _model(quant: str | None, groups_in: int = 1) -> bytes:
    from tests import modelgen

    return modelgen.cached(f"convnext_block-{quant}-{groups_in}", _block_bytes,
                           {"quant": quant, "groups_in": groups_in, "seed": 21})


def _counts(m: Any) -> dict[str, int]:
    counts: dict[str, int] = m.graph.op_counts()
    return counts


@pytest.mark.parametrize("quant", [None, "int8"])
def test_one_input_channel_per_group_is_one_depthwise(quant: str | None) -> None:
    m = tf2tosa.convert(_model(quant))
    ops = _counts(m)
    assert ops.get("tosa.DEPTHWISE_CONV2D") == 1, ops
    assert "tosa.CONCAT" not in ops and "tosa.SLICE" not in ops, ops
    assert all(r.type.is_static for op in m.graph.ops.values() for r in op.results)
    report = m.verify(num=2)
    assert report.ok, report
    if quant:
        assert all(o.max_abs == 0 for o in report.outputs), report  # bit-exact with the reference kernels
        assert ops.get("tosa.TABLE"), ops  # the LayerNorm's float NEG island, as a table


def test_groups_of_several_channels_stay_one_conv_per_group() -> None:
    m = tf2tosa.convert(_model("int8", groups_in=2))
    ops = _counts(m)
    assert ops.get("tosa.CONV2D", 0) >= 8 and ops.get("tosa.CONCAT") == 1 and "tosa.DEPTHWISE_CONV2D" not in ops, ops
    report = m.verify(num=1)
    assert report.ok and all(o.max_abs == 0 for o in report.outputs), report


def test_depthwise_weight_layout_matches_the_grouped_filter() -> None:
    """Channel g·M + m of the grouped filter [C·M, KH, KW, 1] is [.., g, m] of the depthwise weight: a filter with a
    distinct value per output channel gives each output channel its own, in TFLite's order (float, exact sums)."""
    from tests import modelgen

    tf = modelgen._tf()
    c, mult = 3, 2
    w = np.zeros((1, 1, 1, c * mult), np.float32)  # HWIO, I = 1: groups = C
    w[0, 0, 0, :] = np.arange(1, c * mult + 1)

    def f(x: Any) -> Any:
        return tf.nn.conv2d(x, w, 1, "VALID")

    m = tf2tosa.convert(modelgen.convert(f, [(1, 2, 2, c)]))
    assert _counts(m).get("tosa.DEPTHWISE_CONV2D") == 1
    x = np.ones((1, 2, 2, c), np.float32) * np.array([10, 100, 1000], np.float32)
    (y,) = m.run({m.graph.inputs[0].name: x}).values()
    want = np.repeat(np.array([10, 100, 1000], np.float32), mult) * np.arange(1, c * mult + 1)
    np.testing.assert_array_equal(np.asarray(y)[0, 0, 0], want)
