"""Quantization-aware-trained TensorFlow models (FakeQuant ops) → integer TOSA, bit-exact with TFLite's int8
conversion of the same model run in LiteRT's reference kernels (BUILTIN_REF).

Each network (Keras, FakeQuant layers built by hand: tfmot needs Keras 2) is saved as ``.keras`` and SavedModel
(cached in ``.cache/tf_models``), converted by ``TFLiteConverter`` (``Optimize.DEFAULT``, float and int8 I/O) and by
``tf2tosa.convert(..., qat=...)``.  On seeded inputs the TOSA program (embedded executor and, when installed, the
Arm reference model) must equal LiteRT's outputs: the mismatch count and the largest difference in output LSBs are
recorded in ``.cache/tf_qat_results.jsonl`` and must be 0.  The integer constants (weights, biases) and the
quantization parameters must equal the ``.tflite`` file's.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import tfgen
from tf2tosa.converter.qat import QParams, ptq_weights, quantize_bias, round_half_away, tflite_qparams

RESULTS = Path(__file__).resolve().parent.parent / ".cache" / "tf_qat_results.jsonl"
NUM_INPUTS = 16


# ---------------------------------------------------------------------------------------- parameters (no TF)
def test_round_half_away() -> None:
    v = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999999999999994, -1.4999999999999998, 3.0])
    assert round_half_away(v).tolist() == [1, 2, 3, -1, -3, 0, -1, 3]


@pytest.mark.parametrize("lo, hi, narrow, scale, zp", [
    (-1.0, 1.0, False, 2.0 / 255, 0),  # zero point 127.5 from min (smaller error) rounds away to 128 → 0
    (0.0, 6.0, False, 6.0 / 255, -128),
    (-4.0, 4.0, False, 8.0 / 255, 0),
    (-0.5, 0.5, True, 1.0 / 254, 0),  # symmetric narrow range: [-127, 127], zero point 0
    (0.5, 2.0, False, 1.5 / 255, -128),  # a range above 0: zero point clamped to qmin
    (-3.0, -1.0, False, 2.0 / 255, 127),  # below 0: clamped to qmax
    (0.0, 0.0, False, 2e-6 / 255, -1),  # empty range widened to [-1e-6, 1e-6]; 1e-6/s rounds below 127.5
])
def test_tflite_qparams(lo: float, hi: float, narrow: bool, scale: float, zp: int) -> None:
    qp = tflite_qparams([lo], [hi], 8, narrow)
    assert qp.scale[0] == pytest.approx(scale, rel=1e-12)
    assert qp.zero_point == (zp,)
    assert (qp.qmin, qp.qmax) == ((-127, 127) if narrow else (-128, 127))
    assert qp.quant().scale == (float(np.float32(qp.scale[0])),)


def test_tflite_qparams_zero_point_from_max() -> None:
    """Near qmax the zero point from max carries the smaller error and is the one used."""
    qp = tflite_qparams([-5.0], [0.01], 8, False)
    s = 5.01 / 255
    assert qp.zero_point == (int(round_half_away(np.float64(255 - 0.01 / s))) - 128,)


def test_tflite_qparams_rejects_other_bit_widths() -> None:
    from tf2tosa.errors import Unsupported

    with pytest.raises(Unsupported, match="num_bits 4"):
        tflite_qparams([-1.0], [1.0], 4, False)


def test_bias_and_ptq_weights() -> None:
    codes, scales = quantize_bias(np.array([0.1, -0.25], np.float32), 0.5, [0.01, 0.02])
    assert codes.tolist() == [20, -25] and scales == pytest.approx([0.005, 0.01])
    w = np.array([[0.5, -1.0, 0.25], [0.0, 0.0, 0.0]], np.float32)
    q, qp = ptq_weights(w, 0)
    assert isinstance(qp, QParams) and qp.zero_point == (0, 0)
    assert q[0].tolist() == [64, -127, 32] and q[1].tolist() == [0, 0, 0]


# ------------------------------------------------------------------------------------------ whole networks
needs_tf = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs tensorflow")

NETWORKS: dict[str, Callable[..., Any]] = {
    "qat_cnn": tfgen.qat_cnn,
    "qat_mlp": tfgen.qat_mlp,
    "qat_branches": tfgen.qat_branches,
    "qat_net": tfgen.qat_net,  # test_tf_models' network: a Mean and a dense layer without FakeQuant
}


@pytest.fixture(scope="module")
def built() -> dict[str, tuple[Path, Path]]:
    tfgen._qat_layers()
    tfgen._custom_layers()
    return {name: tfgen.cached_keras(name, fn) for name, fn in NETWORKS.items()}


def _inputs(g: Any, io: str, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    sets = []
    for _ in range(NUM_INPUTS):
        feed = {}
        for v in g.inputs:
            shape = tuple(int(d) for d in v.shape)
            feed[v.name] = (rng.integers(-128, 128, shape).astype(np.int8) if io == "int8"
                            else rng.uniform(-1.0, 1.0, shape).astype(np.float32))
        sets.append(feed)
    return sets


def _consts(graph: Any) -> dict[str, list[tuple[tuple[int, ...], bytes, Any]]]:
    """int8 / int32 constants of a tfl-style graph (before legalization), by dtype: (shape, bytes, scales)."""
    out: dict[str, list[tuple[tuple[int, ...], bytes, Any]]] = {}
    for op in graph.ops.values():
        if op.name != "tfl.const" or op.result.dtype.value not in ("i8", "i32") or op.result.type.quant is None:
            continue
        arr = np.ascontiguousarray(op.attrs["values"])
        q = op.result.type.quant
        key = (tuple(q.scale), tuple(q.zero_point)) if op.result.dtype.value == "i8" else None
        out.setdefault(op.result.dtype.value, []).append((arr.shape, arr.tobytes(), key))
    return {k: sorted(v, key=repr) for k, v in out.items()}


def _check(name: str, source: Path, tflite: bytes, io: str, qat: str = "auto") -> dict[str, Any]:
    import tf2tosa
    from tf2tosa.converter.qat import apply_qat
    from tf2tosa.converter.tensorflow import load_tensorflow
    from tf2tosa.converter.tflite import load_tflite
    from tf2tosa.verify import tosa_tools
    from tf2tosa.verify.litert import run_tflite_many

    m = tf2tosa.convert(str(source), qat=qat, qat_io=io)
    g = m.graph
    meta = g.record.qat
    assert meta["mode"] == "int8" and not meta["float_ops"], meta
    # constants and parameters exactly as TFLite's converter made them
    pre = load_tensorflow(str(source))
    apply_qat(pre, qat, io)
    ours, theirs = _consts(pre), _consts(load_tflite(tflite))
    assert [c[:2] for c in ours.get("i8", [])] == [c[:2] for c in theirs.get("i8", [])], f"{name}: int8 weights"
    assert ours.get("i8") == theirs.get("i8"), f"{name}: weight scales / zero points"
    nonzero = [c for c in ours.get("i32", []) if any(np.frombuffer(c[1], np.int32))]
    assert [c[:2] for c in nonzero] == [c[:2] for c in theirs.get("i32", [])], f"{name}: int32 biases"
    sets = _inputs(g, io, seed=sum(map(ord, name)))
    refs = run_tflite_many(tflite, [[s[v.name] for v in g.inputs] for s in sets], reference_kernels=True)
    mism, max_lsb, total = 0, 0, 0
    outs = []
    for s, ref in zip(sets, refs):
        got = m.run(s)
        outs.append(got)
        for v, r in zip(g.outputs, ref.values()):
            o = got[v.name].reshape(r.shape)
            assert o.dtype == r.dtype, f"{name}: output type {o.dtype} vs TFLite {r.dtype}"
            diff = np.abs(o.astype(np.float64) - r.astype(np.float64))
            scale = 1.0 if io == "int8" else meta["outputs"][v.name][0]
            mism += int(np.count_nonzero(diff))
            max_lsb = max(max_lsb, int(np.rint(diff.max() / scale)) if diff.size else 0)
            total += r.size
            if r.size > 1:
                assert np.ptp(r.astype(np.float64)) > 0, f"{name}: constant TFLite output"
    if io == "int8":
        assert m.profiles == ["PRO-INT"], m.profiles
    validated = reference = False
    if tosa_tools.available():
        data = m.to_bytes()
        ok, msg = tosa_tools.validate(data, m.profiles, m.extensions)
        assert ok, f"{name} ({io}): tosa-opt validation failed: {msg}"
        validated = True
        for s, got in zip(sets[:2], outs[:2]):
            arm = tosa_tools.run_reference(data, s)
            for k, a in arm.items():
                assert np.array_equal(a, got[k]), f"{name} ({io}): Arm reference model differs on {k}"
        reference = True
    res = {"name": name, "io": io, "qat": qat, "source": Path(source).suffix or "saved_model",
           "inputs": len(sets), "elements": total, "mismatches": mism, "max_lsb": max_lsb,
           "profiles": m.profiles, "extensions": m.extensions, "validated": validated, "arm_reference": reference,
           "ptq_weights": len(meta["ptq_weights"]),
           "tosa_ops": {k: n for k, n in g.op_counts().items() if k not in ("tosa.CONST", "tosa.CONST_SHAPE")}}
    if os.environ.get("TF2TOSA_RECORD", "1") != "0":
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with open(RESULTS, "a") as f:
            f.write(json.dumps(res) + "\n")
    assert mism == 0, f"{name} ({io}): {mism} of {total} outputs differ from TFLite int8, max {max_lsb} LSB"
    return res


@pytest.mark.parametrize("io", ["float", "int8"])
@pytest.mark.parametrize("name", sorted(NETWORKS))
@needs_tf
def test_qat_network_bit_exact(name: str, io: str, built: dict[str, tuple[Path, Path]]) -> None:
    kfile, smdir = built[name]
    res = _check(name, smdir, tfgen.tflite_int8(smdir, io == "int8").read_bytes(), io)
    if name == "qat_net":
        assert res["ptq_weights"] == 1  # its dense kernel has no FakeQuant: quantized per channel as TFLite does


@pytest.mark.parametrize("name", ["qat_cnn", "qat_mlp"])
@needs_tf
def test_qat_keras_file(name: str, built: dict[str, tuple[Path, Path]]) -> None:
    """The .keras file converts to the same integer program as the SavedModel (same oracle)."""
    kfile, smdir = built[name]
    _check(name, kfile, tfgen.tflite_int8(smdir, True).read_bytes(), "int8", qat="int8")


@needs_tf
def test_qat_fused_ops(built: dict[str, tuple[Path, Path]]) -> None:
    """BiasAdd and Relu/Relu6 fold into the convolutions; the CNN is one integer chain between QUANTIZE and
    DEQUANTIZE."""
    from tf2tosa.converter.qat import apply_qat
    from tf2tosa.converter.tensorflow import load_tensorflow

    g = load_tensorflow(str(built["qat_cnn"][1]))
    apply_qat(g, "auto", "float")
    names = sorted(op.name for op in g.ops.values() if op.name not in ("tfl.const", "tf.Const")
                   and not op.name.startswith(("tf.Shape", "tf.StridedSlice", "tf.Pack")))
    assert names == ["tf.AvgPool", "tf.MaxPool", "tf.Reshape", "tfl.conv_2d", "tfl.conv_2d", "tfl.depthwise_conv_2d",
                     "tfl.dequantize", "tfl.fully_connected", "tfl.quantize"], names
    acts = sorted(op.attrs["fused_activation_function"] for op in g.ops.values()
                  if op.name in ("tfl.conv_2d", "tfl.depthwise_conv_2d"))
    assert acts == ["RELU", "RELU", "RELU6"]


# ------------------------------------------------------------------------------ float islands and the modes
def _fq(x: Any, lo: float, hi: float) -> Any:
    return tfgen.tf().quantization.fake_quant_with_min_max_vars(x, lo, hi)


def _qconv_weights(seed: int, scale: float = 1.0) -> Any:
    tf = tfgen.tf()
    w = tf.constant(np.random.default_rng(seed).normal(0, 0.3, (3, 3, 3, 8)).astype(np.float32))
    r = tf.reduce_max(tf.abs(w), axis=[0, 1, 2])
    wq = tf.quantization.fake_quant_with_min_max_vars_per_channel(w, -r, r, narrow_range=True)
    return wq * scale if scale != 1.0 else wq


def _elementwise_fn() -> Any:
    """Sigmoid/Tanh (TFLite's fixed output ranges, then a requantizing QUANTIZE), LeakyRelu, Mul, Sub, Relu6,
    MaxPool/AvgPool followed by FakeQuants with other ranges, Mean with keepdims, Maximum."""
    tf = tfgen.tf()

    @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 3], tf.float32, name="x")])
    def f(x: Any) -> Any:
        x = _fq(x, -1.0, 1.0)
        a = _fq(tf.nn.conv2d(x, _qconv_weights(1), 1, "SAME"), -3.0, 3.0)
        s = _fq(tf.math.sigmoid(a), 0.0, 1.0)
        t = _fq(tf.math.tanh(a), -1.0, 1.0)
        lr = _fq(tf.nn.leaky_relu(a, 0.1), -0.5, 3.0)
        d = _fq(tf.nn.relu6(_fq(lr - _fq(s * t, -1.0, 1.0), -2.0, 4.0)), 0.0, 6.0)
        p = _fq(tf.nn.max_pool2d(d, 2, 2, "VALID"), 0.0, 4.0)
        q = _fq(tf.nn.avg_pool2d(p, 2, 2, "VALID"), 0.0, 3.0)
        return _fq(tf.maximum(q, _fq(tf.reduce_mean(q, axis=[1, 2], keepdims=True), 0.0, 3.0)), 0.0, 3.0)

    return f.get_concrete_function()


def _mid_fake_quant_fn() -> Any:
    """op → FakeQuant → Relu → FakeQuant: TFLite drops the middle FakeQuant and fuses the Relu (conv and sub);
    weights computed from a fake-quantized constant (×0.5) are quantized like weights without FakeQuant."""
    tf = tfgen.tf()

    @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 3], tf.float32, name="x")])
    def f(x: Any) -> Any:
        x = _fq(x, -1.0, 1.0)
        a = _fq(tf.nn.relu(_fq(tf.nn.conv2d(x, _qconv_weights(2), 1, "SAME"), -3.0, 3.0)), 0.0, 2.5)
        c = _fq(tf.nn.conv2d(x, _qconv_weights(2, 0.5), 1, "SAME"), -1.5, 1.5)
        return _fq(tf.nn.relu6(_fq(a - c, -2.0, 4.0)), 0.0, 3.5)

    return f.get_concrete_function()


def _island_fn() -> Any:
    """A tf.function whose Sin has no integer lowering: TFLite keeps it float between DEQUANTIZE and QUANTIZE."""
    tf = tfgen.tf()
    w2 = tf.constant(np.random.default_rng(5).normal(0, 0.2, (8 * 8 * 8, 10)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 3], tf.float32, name="x")])
    def f(x: Any) -> Any:
        r2 = tf.reduce_max(tf.abs(w2))
        wq2 = tf.quantization.fake_quant_with_min_max_vars(w2, -r2, r2, narrow_range=True)
        x = _fq(x, -1.0, 1.0)
        a = _fq(tf.nn.conv2d(x, _qconv_weights(5), 1, "SAME"), -3.0, 3.0)
        s = _fq(tf.math.sin(a), -1.0, 1.0)
        return _fq(tf.matmul(tf.reshape(s, [1, -1]), wq2), -4.0, 4.0)

    return f.get_concrete_function()


def _check_function(cf: Any, io: str, qat: str = "auto") -> Any:
    """Convert ``cf`` with tf2tosa and TFLite; the outputs must be equal on NUM_INPUTS seeded inputs."""
    import tf2tosa
    from tf2tosa.converter.tensorflow import tflite_qat_reference
    from tf2tosa.verify.litert import run_tflite_many

    m = tf2tosa.convert(cf, qat=qat, qat_io=io)
    assert m.graph.record.qat["mode"] == "int8", m.graph.record.qat
    tflite = tflite_qat_reference(cf, io == "int8")
    sets = _inputs(m.graph, io, 9)
    refs = run_tflite_many(tflite, [[s[v.name] for v in m.graph.inputs] for s in sets], reference_kernels=True)
    for s, ref in zip(sets, refs):
        got = m.run(s)
        for v, r in zip(m.graph.outputs, ref.values()):
            diff = int(np.count_nonzero(got[v.name].reshape(r.shape) != r))
            assert diff == 0, f"{diff} of {r.size} outputs differ from TFLite int8"
    return m


@needs_tf
@pytest.mark.parametrize("io", ["float", "int8"])
def test_qat_elementwise_ops(io: str) -> None:
    m = _check_function(_elementwise_fn(), io)
    assert not m.graph.record.qat["float_ops"]


@needs_tf
def test_qat_fake_quant_before_relu_dropped() -> None:
    from tf2tosa.converter.qat import apply_qat
    from tf2tosa.converter.tensorflow import load_tensorflow

    cf = _mid_fake_quant_fn()
    m = _check_function(cf, "float")
    assert len(m.graph.record.qat["ptq_weights"]) == 1
    g = load_tensorflow(cf)
    apply_qat(g, "auto", "float")
    ops = {op.name: op for op in g.ops.values()}
    assert ops["tfl.sub"].attrs["fused_activation_function"] == "RELU6"
    assert not any(op.name.startswith("tf.Relu") for op in g.ops.values())


@needs_tf
def test_qat_float_island() -> None:
    import tf2tosa

    cf = _island_fn()
    auto = tf2tosa.convert(cf)
    assert auto.graph.record.qat["mode"] == "float" and "tf.Sin" in auto.graph.record.qat["reason"]
    m = _check_function(cf, "float", qat="int8")
    meta = m.graph.record.qat
    assert len(meta["float_ops"]) == 1 and meta["float_ops"][0].startswith("tf.Sin")
    assert {"PRO-INT", "PRO-FP"} <= set(m.profiles)


@needs_tf
def test_qat_float_mode_is_tf_emulation() -> None:
    """qat='float' keeps the FakeQuants as float emulation, bit-exact with TensorFlow."""
    import tf2tosa

    tf = tfgen.tf()
    cf = _island_fn()
    m = tf2tosa.convert(cf, qat="float")
    assert m.graph.record.qat["mode"] == "float" and m.profiles == ["PRO-FP"]
    for s in _inputs(m.graph, "float", 4)[:2]:
        ref = np.asarray(cf(tf.constant(s["x"])))
        got = m.run(s)[m.graph.outputs[0].name]
        assert np.array_equal(got.reshape(ref.shape), ref)


@needs_tf
def test_qat_options_checked() -> None:
    import tf2tosa
    from tf2tosa.errors import ConversionError

    with pytest.raises(ConversionError, match="qat must be one of"):
        tf2tosa.convert(_island_fn(), qat="int4")
    with pytest.raises(ConversionError, match="qat_io must be one of"):
        tf2tosa.convert(_island_fn(), qat="int8", qat_io="uint8")


@pytest.mark.parametrize("io", ["float", "int8"])
def test_verify_uses_tflite_int8_conversion(io: str, built: dict[str, tuple[Path, Path]]) -> None:
    """verify() on an integer QAT graph compares with TFLite's int8 conversion (BUILTIN_REF), bit for bit."""
    import tf2tosa

    saved, _ = built["qat_cnn"]
    m = tf2tosa.convert(str(saved), qat_io=io)
    assert m.graph.record.qat["mode"] == "int8"
    report = m.verify(num=3)
    assert report.ok, str(report)
    assert all(o.mismatches == 0 for o in report.outputs)
