"""Whole integer models, bit-exact with LiteRT's reference kernels (BUILTIN_REF) on 5 random inputs each:
int8 MobileNetV2 (calibrated, full-integer, int8 I/O), int8 MobileNetV2 with uint8 I/O, and a small int8 CNN.
The mismatch count against LiteRT's optimized default kernels is recorded for information."""

from __future__ import annotations

import pytest

pytest.importorskip("tensorflow")

from tests.e2e import check_tflite  # noqa: E402
from tests.modelgen import mobilenet_v2, small_cnn  # noqa: E402

MODELS = {
    "small_cnn/int8": lambda: small_cnn(quant="int8"),
    "mobilenet_v2/int8": lambda: mobilenet_v2(quant="int8"),
    "mobilenet_v2/uint8io": lambda: mobilenet_v2(quant="uint8io"),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_integer_model_bit_exact(name: str) -> None:
    res = check_tflite(name, MODELS[name](), num=5, reference_kernels=True)
    assert res.litert_mismatches == 0
    assert "PRO-INT" in res.profiles and "EXT-DOUBLEROUND" in res.extensions
