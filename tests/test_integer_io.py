"""``--io int`` (``io="int"``): a quantized model's edge QUANTIZE/DEQUANTIZE move to the host.

The converted program takes and returns the integer tensors; the oracle is LiteRT's reference kernels (BUILTIN_REF)
running the unchanged ``.tflite`` with its own float edges: float data is quantized by TFLite itself, integer data
is given to it as its float value.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tf2tosa
from tf2tosa.converter.passes.integer_io import dequantize, quantize
from tf2tosa.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "models" / "samples"


def _float_io_int8() -> bytes:
    """A full-integer int8 model with float input and output (QUANTIZE → conv → add → DEQUANTIZE), zp ≠ 0."""
    pytest.importorskip("tensorflow")
    from tests import modelgen

    def build() -> bytes:
        tf = modelgen._tf()
        rng = np.random.default_rng(5)
        w = tf.constant(rng.normal(0, 0.4, (3, 3, 3, 4)).astype(np.float32))

        def fn(x: object) -> object:
            y = tf.nn.conv2d(x, w, 1, "SAME")
            return tf.nn.relu(y) + 0.25 * y

        f = tf.function(fn, input_signature=[tf.TensorSpec((1, 8, 8, 3), tf.float32)])
        conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        data = [[rng.uniform(-0.4, 1.0, (1, 8, 8, 3)).astype(np.float32)] for _ in range(8)]
        conv.representative_dataset = lambda: iter(data)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        return bytes(conv.convert())

    return modelgen.cached("integer_io/conv_add_float_io", build, {})


def test_int8_float_io_model_integer_edges_bit_exact() -> None:
    buf = _float_io_int8()
    base = tf2tosa.convert(buf)
    m = tf2tosa.convert(buf, io="int")
    assert [v.dtype.value for v in base.graph.inputs + base.graph.outputs] == ["fp32", "fp32"]
    assert [v.dtype.value for v in m.graph.inputs + m.graph.outputs] == ["i8", "i8"]
    assert m.input_names == base.input_names and m.output_names == base.output_names
    q = m.io_quantization
    assert q is not None and [e["name"] for e in q["inputs"]] == m.input_names
    assert q["inputs"][0]["zero_point"] != 0 and q["inputs"][0]["float_dtype"] == "fp32"
    assert m.profiles == ["PRO-INT"]  # nothing of PRO-FP is left
    report = m.verify(num=3, oracle="ref")  # integer data: LiteRT gets its float value
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report
    # float data at the rounding ties of the input's quantization: TFLite's QUANTIZE kernel rounds them itself
    e = q["inputs"][0]
    ks = np.random.default_rng(1).integers(-130, 130, (1, 8, 8, 3))
    x = ((ks + 0.5) * np.float32(e["scale"])).astype(np.float32)
    report = m.verify([{m.input_names[0]: x}], oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report
    # run() takes the float data too and quantizes it on the host
    got = m.run({m.input_names[0]: x})
    direct = m.run({m.input_names[0]: quantize(x, e["dtype"], e["scale"], e["zero_point"])})
    np.testing.assert_array_equal(got[m.output_names[0]], direct[m.output_names[0]])


def test_int16x8_model_integer_edges_bit_exact() -> None:
    pytest.importorskip("tensorflow")
    from tests.modelgen import small_cnn

    m = tf2tosa.convert(small_cnn(quant="int16x8"), io="int")
    assert [v.dtype.value for v in m.graph.inputs + m.graph.outputs] == ["i16", "i16"]
    assert m.profiles == ["PRO-INT"] and "EXT-INT16" in m.extensions
    report = m.verify(num=2, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def test_sidecar_written_with_the_pair_and_read_back(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    buf = _float_io_int8()
    m = tf2tosa.convert(buf, io="int")
    m.save(tmp_path / "m.tosa", mlir=tmp_path / "m.mlir")
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc == {"io_quantization": m.io_quantization}
    back = tf2tosa.load(tmp_path / "m.tosa")
    assert back.io_quantization == m.io_quantization
    # the default conversion writes no sidecar and stays as it was
    tf2tosa.convert(buf).save(tmp_path / "f.tosa")
    assert not (tmp_path / "f.json").exists()
    assert tf2tosa.convert(buf).to_bytes() != m.to_bytes()


def test_io_int_on_a_float_model_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--io int needs a quantized model"):
        tf2tosa.convert(SAMPLES / "mlp_f32.tflite", io="int")
    proc = subprocess.run([sys.executable, "-m", "tf2tosa", "convert", str(SAMPLES / "mlp_f32.tflite"), "-o",
                           str(tmp_path / "x.tosa"), "--io", "int"], capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "--io int needs a quantized model" in proc.stderr
    assert not list(tmp_path.iterdir())


def test_host_quantize_follows_tflite_rounding() -> None:
    """TFLite's QUANTIZE reference kernel: round(x / scale) with C's round (halves away from zero), + zp, clamp."""
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1000.0, -1000.0], np.float32)
    np.testing.assert_array_equal(quantize(x, "i8", 1.0, 0), [-3, -2, -1, 1, 2, 3, 127, -128])
    np.testing.assert_array_equal(quantize(x, "i8", 1.0, 3), [0, 1, 2, 4, 5, 6, 127, -128])
    # DEQUANTIZE then QUANTIZE gives back every int16 exactly (what verify relies on for integer data)
    q = np.arange(-32768, 32768, dtype=np.int16)
    for scale in (3.0517578125e-05, 0.0123456789, 7.3):
        np.testing.assert_array_equal(quantize(dequantize(q, scale, 0), "i16", scale, 0), q)


def _int16x8_depth_to_space() -> bytes:
    """int16x8 conv → DEPTH_TO_SPACE → conv → DEPTH_TO_SPACE, and a second conv → DEPTH_TO_SPACE → RESHAPE output;
    TFLite cannot quantize DEPTH_TO_SPACE to 16x8 and keeps both in float (DEQUANTIZE → f32
    DEPTH_TO_SPACE → QUANTIZE in the middle, DEQUANTIZE → f32 DEPTH_TO_SPACE at the output)."""
    pytest.importorskip("tensorflow")
    from tests import modelgen

    def build() -> bytes:
        tf = modelgen._tf()
        rng = np.random.default_rng(11)
        w1 = tf.constant(rng.normal(0, 0.4, (3, 3, 2, 8)).astype(np.float32))
        w2 = tf.constant(rng.normal(0, 0.4, (3, 3, 2, 8)).astype(np.float32))
        w3 = tf.constant(rng.normal(0, 0.4, (1, 1, 2, 4)).astype(np.float32))

        def fn(x: object) -> object:
            y = tf.nn.depth_to_space(tf.nn.conv2d(x, w1, 1, "SAME"), 2)
            z = tf.nn.depth_to_space(tf.nn.conv2d(y, w2, 1, "SAME"), 2)
            return z, tf.reshape(tf.nn.depth_to_space(tf.nn.conv2d(y, w3, 1, "SAME"), 2), (1, 32 * 32))

        f = tf.function(fn, input_signature=[tf.TensorSpec((1, 8, 8, 2), tf.float32)])
        conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        data = [[rng.uniform(-1.0, 1.0, (1, 8, 8, 2)).astype(np.float32)] for _ in range(8)]
        conv.representative_dataset = lambda: iter(data)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8,
                                          tf.lite.OpsSet.TFLITE_BUILTINS]
        return bytes(conv.convert())

    return modelgen.cached("integer_io/int16x8_depth_to_space", build, {})


def test_dequantize_commutes_past_data_movement_bit_exact() -> None:
    buf = _int16x8_depth_to_space()
    base = tf2tosa.convert(buf)
    assert "PRO-FP" in base.profiles  # the float DEPTH_TO_SPACEs (the test can fail: this is what is fixed)
    m = tf2tosa.convert(buf, io="int")
    assert [v.dtype.value for v in m.graph.inputs + m.graph.outputs] == ["i16", "i16", "i16"]
    assert m.profiles == ["PRO-INT"]  # integer only: every DEQUANTIZE went past the moves to the edge or its QUANTIZE
    q = m.io_quantization
    assert q is not None and [e["name"] for e in q["outputs"]] == m.output_names  # both moved to the host
    # LiteRT's reference kernels run the float moves; their outputs quantized on the host must equal our integer
    # outputs code for code (DEPTH_TO_SPACE at the version the reference resolver registers, see below)
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def test_reference_resolver_model_lowers_only_the_depth_to_space_version() -> None:
    import tflite

    from tf2tosa.verify.litert import reference_resolver_model

    buf = _int16x8_depth_to_space()
    patched = reference_resolver_model(buf)
    assert len(patched) == len(buf) and sum(a != b for a, b in zip(buf, patched)) == 1  # 2 → 1 in one int32
    m = tflite.Model.GetRootAsModel(patched, 0)
    versions = {m.OperatorCodes(i).BuiltinCode(): m.OperatorCodes(i).Version() for i in range(m.OperatorCodesLength())}
    assert versions[tflite.BuiltinOperator.DEPTH_TO_SPACE] == 1
    other = (SAMPLES / "small_cnn_int8.tflite").read_bytes()
    assert reference_resolver_model(other) is other
