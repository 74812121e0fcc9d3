"""``--dynamic`` over strided windows whose length leaves a remainder (issue 30, deliverable 5).

A VALID window of kernel K, stride S over a symbolic length L reads the first (⌊(L - K)/S⌋)·S + K rows; the rest
(the remainder) is cut by a SLICE whose size is computed at run time, never a negative PAD.  Judged against LiteRT
resized to each length (float: within 1e-5 × max|ref|; int8: bit for bit against the BUILTIN_REF kernels), one
program run by our executor at lengths with and without a remainder.  The safety net's check sizes leave a
remainder in every division the sizes go through, so a lowering right only at remainder-free lengths is refused.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("ai_edge_litert")

import tf2tosa  # noqa: E402
from tests.modelgen import _tf, cached  # noqa: E402
from tests.modelgen_dyn import _to_tflite, _w  # noqa: E402
from tf2tosa.api import convert_dynamic  # noqa: E402
from tf2tosa.converter.dynamic import check_hints, divisions  # noqa: E402
from tf2tosa.executor import run_checked  # noqa: E402
from tf2tosa.ir.symdim import Expr, Guards, guards, symbol  # noqa: E402
from tf2tosa.tosa.optable import DRAFT_VERSION  # noqa: E402
from tf2tosa.verify import tosa_tools  # noqa: E402
from tf2tosa.verify.litert import run_tflite  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: (L - 512) mod 160 is 128, 0 and 45: a remainder, none, another
LENGTHS = (16000, 16032, 16237)
MEL = ROOT / ".cache" / "real_models" / "wyoming-openwakeword" / "melspectrogram.tflite"


def _front_end(quant: str | None = None, seed: int = 30) -> bytes:
    """[1, None] waveform → frames of 512 every 160 as a VALID conv1d (CONV_2D stride 160), then strided windows
    that each leave a remainder somewhere: depthwise 1x3 stride 2 VALID, conv1d k3 s2 VALID, max-pool 3/2 VALID,
    average pool 2/3 VALID, a 1x1 stride-2 SAME conv (TF's SAME with the kernel smaller than the stride), a 1x1
    conv as the dense layer → [1, T, 4]."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    w1, b1 = _w(rng, (512, 1, 16), 0.05), _w(rng, (16,), 0.1)
    wd = _w(rng, (1, 3, 16, 1), 0.4)
    w2, w3, w4 = _w(rng, (3, 16, 8), 0.3), _w(rng, (1, 8, 8), 0.4), _w(rng, (1, 8, 4), 0.4)

    def fn(x: Any) -> Any:
        y = tf.nn.relu(tf.nn.conv1d(x[:, :, None], w1, stride=160, padding="VALID") + b1)
        y = tf.nn.depthwise_conv2d(y[:, None], wd, [1, 1, 2, 1], "VALID")[:, 0]
        y = tf.nn.relu(tf.nn.conv1d(y, w2, stride=2, padding="VALID"))
        y = tf.nn.max_pool1d(y, 3, 2, "VALID")
        y = tf.nn.avg_pool1d(y, 2, 3, "VALID")
        y = tf.nn.relu(tf.nn.conv1d(y, w3, stride=2, padding="SAME"))
        return tf.nn.conv1d(y, w4, stride=1, padding="VALID")

    return _to_tflite(fn, [1, None], quant, [(1, 16000), (1, 16237), (1, 12345)], seed)


def _stride7(seed: int = 31) -> bytes:
    """[1, None] → conv1d kernel 16 stride 7 VALID → [1, T, 4]: frames (L - 16) // 7 + 1."""
    tf = _tf()
    w = _w(np.random.default_rng(seed), (16, 1, 4), 0.3)

    def fn(x: Any) -> Any:
        return tf.nn.conv1d(x[:, :, None], w, stride=7, padding="VALID")

    return _to_tflite(fn, [1, None], None, [], seed)


def _frames(quant: str | None = None, seed: int = 32) -> bytes:
    """[1, None] → tf.signal.frame(512, hop 160) (LiteRT: SPLIT_V into 32-sample subframes, a GATHER of indices
    5·i + j) → a Hann-windowed projection to 8 features and their squares → [1, T, 8]."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    win = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(512) / 512)).astype(np.float32)
    proj = _w(rng, (512, 8), 0.1) * win[:, None]

    def fn(x: Any) -> Any:
        y = tf.matmul(tf.signal.frame(x, 512, 160), proj)
        return y * y

    return _to_tflite(fn, [1, None], quant, [(1, 16005), (1, 16237), (1, 12345)], seed)


def _same_small_kernel(quant: str | None = None, seed: int = 34) -> bytes:
    """[1, None] → conv1d kernel 2 stride 3 SAME → conv1d kernel 3 stride 5 SAME → [1, ⌈⌈L/3⌉/5⌉, 4]: TF's SAME
    total max(0, (⌈n/s⌉ - 1)·s + k - n) with 1 < k < s is positive at some lengths and negative at others."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    w1, w2 = _w(rng, (2, 1, 4), 0.5), _w(rng, (3, 4, 4), 0.5)

    def fn(x: Any) -> Any:
        y = tf.nn.relu(tf.nn.conv1d(x[:, :, None], w1, stride=3, padding="SAME"))
        return tf.nn.conv1d(y, w2, stride=5, padding="SAME")

    return _to_tflite(fn, [1, None], quant, [(1, 400), (1, 401), (1, 77)], seed)


def _model(name: str, quant: str | None = None) -> bytes:
    if name in ("front_end", "frames", "same_small_kernel"):
        builder: Callable[..., bytes] = {"front_end": _front_end, "frames": _frames,
                                         "same_small_kernel": _same_small_kernel}[name]
        params: dict[str, Any] = {"quant": quant}
    else:
        builder, params = _stride7, {}
    return cached(f"dyn_rem/{name}" + (f"_{quant}" if quant else ""), builder, params, extra=(_to_tflite, _w))


def _input(length: int, quant: str | None, seed: int, batch: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if quant == "int8":
        return rng.integers(-128, 128, (batch, length)).astype(np.int8)
    return rng.uniform(-1.0, 1.0, (batch, length)).astype(np.float32)


def _matches_litert(data: bytes, g: Any, lengths: Sequence[int], quant: str | None, batch: int = 1) -> list[float]:
    """Run the one program at each length; compare with LiteRT resized to it; the worst relative errors."""
    worst = []
    for k, n in enumerate(lengths):
        x = _input(n, quant, seed=k, batch=batch)
        got = run_checked(g, {g.inputs[0].name: x}, level="NONE")
        assert got.status == "VALID", (n, got.message)
        refs = list(run_tflite(data, [x], reference_kernels=quant is not None).values())
        ours = list(got.outputs.values())
        assert len(ours) == len(refs)
        for a, r in zip(ours, refs):
            assert a.shape == r.shape, (n, a.shape, r.shape)
            assert np.abs(r.astype(np.float64)).max() > 0, n
            if quant:
                assert int(np.count_nonzero(a != r)) == 0, n
                worst.append(0.0)
            else:
                err = float(np.abs(a.astype(np.float64) - r).max()) / float(np.abs(r).max())
                assert err <= 1e-5, (n, err)
                worst.append(err)
    return worst


@pytest.mark.parametrize("quant", [None, "int8"])
def test_valid_strided_front_end_is_one_program_at_three_lengths(quant: str | None) -> None:
    data = _model("front_end", quant)
    dyn = convert_dynamic(data, hints={"d1": 16000})
    g = dyn.graph
    assert dyn.is_dynamic and set(g.dims.symbols) == {"d1"}
    ops = [op.opcode for op in g.topological_order()]
    assert "PAD" not in ops  # every remainder is a SLICE, no PAD (negative or not)
    cut = [op for op in g.ops.values() if op.opcode == "SLICE" and op.operands[2].producer is not None
           and op.operands[2].producer.opcode != "CONST_SHAPE"]
    assert len(cut) >= 5, ops  # the frames, depthwise, conv, both pools (the 1x1 SAME one may need no cut)
    _matches_litert(data, g, LENGTHS, quant)


@pytest.mark.parametrize("name, hint", [("front_end", 16000), ("frames", 16005), ("same_small_kernel", None)])
def test_symbolic_programs_are_valid_1_1_draft_mlir(name: str, hint: int | None) -> None:
    if not tosa_tools.available():
        pytest.skip("tosa-tools environment not available")
    dyn = convert_dynamic(_model(name), hints={"d1": hint} if hint else None)
    ok, msg = tosa_tools.validate_mlir(dyn.to_mlir(), dyn.profiles, dyn.extensions, level="none",
                                       version=DRAFT_VERSION)
    assert ok, msg


def test_remainder_frames_are_a_slice_of_the_read_rows() -> None:
    """The rows the 512/160 window reads, 512 + 160·((L - 512) // 160): the cut SLICE's size expression, and the
    frame count (L - 512) // 160 + 1, with no asserted remainder equality."""
    g = convert_dynamic(_model("front_end"), hints={"d1": 16000}).graph
    labels = {str(d) for v in g.values() for d in v.shape}
    assert "160*((d1 - 512) // 160) + 512" in labels and "(d1 - 512) // 160 + 1" in labels, sorted(labels)
    assert not any("% 160" in str(e) for e in g.dims.equalities)
    assert not any(op.opcode == "ASSERT_EQUAL_SHAPE" for op in g.ops.values())


@pytest.mark.parametrize("quant", [None, "int8"])
def test_same_with_a_kernel_smaller_than_the_stride(quant: str | None) -> None:
    """SAME with 1 < k < s over a symbolic length: pad total raw - min(raw, 0), the input cut to n + min(raw, 0)
    (no guard on raw's sign, so one program serves lengths of every residue mod 3 and mod 15)."""
    data = _model("same_small_kernel", quant)
    g = convert_dynamic(data).graph
    _matches_litert(data, g, (400, 401, 402, 406, 418), quant)  # L mod 3: 1, 2, 0, 1, 1; ⌈L/3⌉ mod 5: 4, 4, 4, 1, 0


@pytest.mark.parametrize("quant", [None, "int8"])
def test_strided_frame_extraction_at_three_lengths(quant: str | None) -> None:
    """tf.signal.frame with a hop of 160: the GATHER of subframes 5·i + j over a symbolic frame count is a strided
    run (SLICE, PAD of 4, RESHAPE [m, 5], SLICE of column 0) per static j, no index tensor.  The sample 16005 leaves
    a partial subframe (16000 is a multiple of 32: its empty SPLIT_V piece would make the two conversions differ)."""
    data = _model("frames", quant)
    g = convert_dynamic(data, hints={"d1": 16005}).graph
    assert not any(op.opcode == "GATHER" for op in g.ops.values())
    _matches_litert(data, g, LENGTHS, quant)


@pytest.mark.skipif(not MEL.is_file(), reason="the published openWakeWord mel front end is not in the cache")
def test_published_mel_front_end_at_three_lengths() -> None:
    """openWakeWord's melspectrogram.tflite (wyoming-openwakeword): a [-1, -1] waveform, STFT as two VALID
    CONV_2D of 512 taps stride 160.  Its --dynamic conversion ended in a negative PAD."""
    data = MEL.read_bytes()
    g = convert_dynamic(data, hints={"d1": 16000}).graph
    assert set(g.dims.symbols) == {"batch", "d1"}
    worst = _matches_litert(data, g, (16000, 16160, 16237), None, batch=2)
    assert max(worst) <= 1e-6


def test_divisions_and_check_sizes_leave_a_remainder() -> None:
    """divisions() finds the window's (d1 - 512) // 160 in the first conversion (at 16032, remainder-free);
    check_hints() picks check sizes that leave a remainder in every division, where the previous choice (the
    first offset keeping the guards) would not."""
    with guards() as recorded:  # the first conversion of convert_dynamic, before symbolise
        first = tf2tosa.convert(_model("front_end"), dims={"d1": symbol("d1", 16032)})
    divs = divisions(first.graph, recorded)
    assert (Expr.of(symbol("d1", 16032)) - Expr(512), 160) in divs
    env = check_hints(recorded, {"d1": 16032}, divs)
    assert env is not None and (env["d1"] - 512) % 160 != 0

    def without(e: dict[str, int]) -> int:
        return sum(n.evaluate(e) % d == 0 for n, d in divs)

    # the nested windows' divisions too: at least as many remainders as at the previous choice (offset 7)
    assert without(env) <= without({"d1": 16039}) and without(env) < len(divs)
    # a stride of 7 over d1 - 16: the sample 366 and the first offset 7 (373) are both remainder-free
    divs7 = [(Expr.of(symbol("d1", 366)) - Expr(16), 7)]
    env = check_hints(Guards(), {"d1": 366}, divs7)
    assert env is not None and (env["d1"] - 16) % 7 != 0
    assert check_hints(Guards(), {"d1": 366}) == {"d1": 373}  # without divisions: the first offset, as before


def _old_window_pads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lowering as it was: the remainder of a VALID window over a symbolic size as a negative bottom pad
    (an explicit PAD whose padding is -((L - K) mod S)), right only at remainder-free lengths."""
    padding = importlib.import_module("tf2tosa.legalizations.lowering.padding")
    tfl_nn = importlib.import_module("tf2tosa.legalizations.tfl_nn")
    real = padding.window_pads

    def old(pad: str, in_hw: Sequence[int], *args: Any, **kwargs: Any) -> list[int]:
        pads = real(pad, in_hw, *args, **kwargs)
        sizes = getattr(pads, "sizes", (None, None))
        out = list(pads)
        for i, s in enumerate(sizes):
            if s is not None:
                out[2 * i + 1] = s - in_hw[i]
        return out

    monkeypatch.setattr(tfl_nn, "window_pads", old)


@pytest.mark.parametrize("hint", [None, 366])  # the default sample 401 is remainder-free here too (385 = 7·55)
def test_safety_net_refuses_a_program_wrong_at_remainder_lengths(monkeypatch: pytest.MonkeyPatch,
                                                                  hint: int | None) -> None:
    """With the old lowering and a remainder-free sample ((L - 16) mod 7 = 0 at 366 and at the default 401), the
    PAD's padding -((L - 16) mod 7) is >= 0 only at remainder-free lengths: a guard the program does not assert.
    The net used to keep that guard (check at 373 / 408, remainder-free too) and let through a program whose PAD
    is negative at 6 lengths in 7; now the check runs where the division leaves a remainder: refused."""
    data = _model("stride7")
    hints = {"d1": hint} if hint else None
    n = hint or 401
    _old_window_pads(monkeypatch)
    with pytest.raises(tf2tosa.ConversionError, match=r"--dynamic: not yet: .*PAD.* must be >= 0") as err:
        convert_dynamic(data, hints=hints)
    assert "\n" not in str(err.value).strip()
    # the control: remainder-free check sizes (the previous choice) emit that program, and it fails at run time
    dynamic = importlib.import_module("tf2tosa.converter.dynamic")
    real_check = dynamic.check_hints
    monkeypatch.setattr(dynamic, "check_hints", lambda g, h, divs=(): real_check(g, h))
    g = convert_dynamic(data, hints=hints).graph
    ok = run_checked(g, {g.inputs[0].name: _input(n, None, 0)}, level="NONE")
    assert ok.status == "VALID"
    bad = run_checked(g, {g.inputs[0].name: _input(n + 4, None, 0)}, level="NONE")
    assert bad.status != "VALID" and "negative padding" in bad.message


@pytest.mark.parametrize("hint", [None, 366])
def test_stride7_now_right_at_every_remainder(hint: int | None) -> None:
    data = _model("stride7")
    g = convert_dynamic(data, hints={"d1": hint} if hint else None).graph
    n = hint or 401
    _matches_litert(data, g, [n + r for r in (0, 1, 3, 6)] + [16], None)  # remainders 0, 1, 3, 6; one frame


def test_saved_model_strided_windows_with_a_remainder(tmp_path: Path) -> None:
    """The TensorFlow frontend's tf.Conv2D / tf.DepthwiseConv2dNative / tf.MaxPool / tf.AvgPool take the same
    padding helper: a SavedModel [1, None] → conv1d 64/16 VALID, depthwise 1x3 stride 2 VALID, max-pool 3/2 VALID,
    average pool 2/3 VALID, judged by TensorFlow at three lengths with different remainders.  Its open symbols are
    found by a conversion at the --hint length (at the default length 1 the 64-sample window does not fit)."""
    import tensorflow as tf
    rng = np.random.default_rng(33)
    w1 = tf.constant(_w(rng, (64, 1, 8), 0.2))
    wd = tf.constant(_w(rng, (1, 3, 8, 1), 0.4))

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, None], tf.float32, name="x")])
        def __call__(self, x: tf.Tensor) -> tf.Tensor:
            y = tf.nn.relu(tf.nn.conv1d(x[:, :, None], w1, stride=16, padding="VALID"))
            y = tf.nn.depthwise_conv2d(y[:, None], wd, [1, 1, 2, 1], "VALID")[:, 0]
            y = tf.nn.max_pool1d(y, 3, 2, "VALID")
            return tf.nn.avg_pool1d(y, 2, 3, "VALID")

    m = M()
    tf.saved_model.save(m, str(tmp_path / "sm"), signatures=m.__call__)
    g = convert_dynamic(str(tmp_path / "sm"), hints={"d1": 1601}).graph
    assert not any(op.opcode == "PAD" for op in g.ops.values())
    for n in (1601, 1616, 2000):  # (n - 64) mod 16: 1, 0, 0 with the pools' remainders 1, 2, ...
        x = rng.uniform(-1.0, 1.0, (1, n)).astype(np.float32)
        got = run_checked(g, {g.inputs[0].name: x}, level="NONE")
        assert got.status == "VALID", got.message
        ref = m(tf.constant(x)).numpy()
        out = list(got.outputs.values())[0]
        assert out.shape == ref.shape and float(np.max(np.abs(out - ref))) <= 1e-5 * float(np.max(np.abs(ref))), n
