"""Whole models: small CNN and MobileNetV2 (keras.applications, weights=None, calibrated BatchNorm).

Each converts; every float op of our fp32 run is within the spec's accuracy bound of its fp64 re-evaluation; LiteRT's
outputs lie within the derived fp32 bound of our fp64 run (tests/e2e.py: 16 x our measured fp32 noise, at least
16 ulp); the session hook validates the .tosa with tosa-opt and runs it in the Arm reference model (fp32 and precise).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from tests.e2e import check_tflite  # noqa: E402
from tests.modelgen import depthwise_net, mlp, mobilenet_v2, small_cnn  # noqa: E402


@pytest.mark.parametrize("name,build", [("small_cnn", small_cnn), ("mlp", mlp), ("depthwise_net", depthwise_net)])
def test_small_networks(name: str, build: object) -> None:
    res = check_tflite(name, build())  # type: ignore[operator]
    assert res.ops.get("tosa.CONV2D", 0) + res.ops.get("tosa.MATMUL", 0) > 0


def test_mobilenet_v2() -> None:
    res = check_tflite("mobilenet_v2", mobilenet_v2(), num=2)
    assert res.ops["tosa.DEPTHWISE_CONV2D"] == 17
    assert res.ops["tosa.CONV2D"] >= 35


def test_mobilenet_v2_logits_vary_with_input() -> None:
    """The calibrated model is a meaningful test: different inputs give clearly different outputs."""
    import tf2tosa
    from tests.e2e import inputs_for

    m = tf2tosa.convert(mobilenet_v2())
    outs = [next(iter(m.run(inputs_for(m.graph, seed)).values())) for seed in (0, 1)]
    assert float(np.abs(outs[0] - outs[1]).max()) > 1e-3 * float(np.abs(outs[0]).max())
    assert len(np.unique(np.argmax(np.concatenate(outs), axis=-1))) >= 1
