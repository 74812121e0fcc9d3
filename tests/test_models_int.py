"""Whole integer models, bit-exact with LiteRT's reference kernels (BUILTIN_REF) on 5 random inputs each:
int8 MobileNetV2 (calibrated, full-integer, int8 I/O), int8 MobileNetV2 with uint8 I/O, and a small int8 CNN.
The mismatch count against LiteRT's optimized default kernels is recorded for information."""

from __future__ import annotations

import pytest

pytest.importorskip("tensorflow")

from tests.e2e import check_tflite  # noqa: E402
from tests.modelgen import depthwise_net, mlp, mobilenet_v2, small_cnn  # noqa: E402

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


INT16X8 = {"small_cnn/int16x8": lambda: small_cnn(quant="int16x8"), "mlp/int16x8": lambda: mlp(quant="int16x8"),
           "depthwise_net/int16x8": lambda: depthwise_net(quant="int16x8")}


@pytest.mark.parametrize("name", sorted(INT16X8))
def test_int16x8_model_bit_exact(name: str) -> None:
    """int16x8 networks (float I/O around an int16 body): every output compared as int16 in the DEQUANTIZE's LSB,
    0 mismatches vs BUILTIN_REF (measured: 0 of 30 / 30 / 6144 elements; the optimized kernels differ in 4
    elements of depthwise_net, for information)."""
    res = check_tflite(name, INT16X8[name](), num=3, reference_kernels=True)
    assert res.int_elements > 0 and res.float_elements == 0, res
    assert res.litert_mismatches == 0 and "EXT-INT16" in res.extensions


def test_zoo_mobilenet_v2_int16x8_bit_exact() -> None:
    """The zoo's calibrated MobileNetV2 in int16x8 (deep 16x8 FULLY_CONNECTED and convolutions, exact since the
    i48 accumulator is requantized as TFLite's reference kernel rounds it): 0 mismatches vs BUILTIN_REF on 5 inputs
    (before: 107 of 2,000 outputs 1 LSB off)."""
    from models.zoo import REGISTRY
    from models.zoo.build import ensure_built
    from models.zoo.core import cache_path

    mdef = REGISTRY["mobilenet_v2"]
    failed = ensure_built(mdef, ["int16x8"])
    assert not failed, failed
    res = check_tflite("zoo/mobilenet_v2/int16x8", cache_path(mdef, "int16x8").read_bytes(), num=5,
                       reference_kernels=True)
    assert res.int_elements > 0 and res.float_elements == 0, res
    assert res.litert_mismatches == 0 and "EXT-INT16" in res.extensions


def test_single_rounding_stays_in_pro_int() -> None:
    """--rounding single: no EXT-DOUBLEROUND; the graph validates as plain PRO-INT and still runs in the reference
    model bit-exactly.  It differs from TFLite, whose requantization is double rounding: the conv/pool/FC layers by
    at most 1 LSB, but the int8 softmax's fixed-point exp/reciprocal chain compounds the rounding differences and the
    output probabilities move by up to 13 LSB (measured: 22 of 50 elements differ over 5 inputs)."""
    import tf2tosa
    from tf2tosa.verify import tosa_tools

    data = small_cnn(quant="int8")
    single = tf2tosa.convert(data, rounding="single")
    double = tf2tosa.convert(data)
    assert "EXT-DOUBLEROUND" not in single.extensions and "EXT-DOUBLEROUND" in double.extensions
    modes = {op.attrs.get("rounding_mode") for op in single.graph.ops.values() if op.opcode == "RESCALE"}
    assert modes == {"SINGLE_ROUND"}
    if tosa_tools.available():
        ok, msg = tosa_tools.validate(single.to_bytes(), single.profiles, single.extensions)
        assert ok, msg
    res = check_tflite("small_cnn/int8/single", data, num=5, reference_kernels=True, rounding="single", max_lsb=13)
    assert res.litert_mismatches > 0  # it really is a different rounding
