"""Global average pools on the NPU (issue 32): the form of a quantized MEAN over H and W is chosen by window size.

An int8 MEAN over axes 1, 2 sums its window with one all-ones DEPTHWISE_CONV2D, or, for windows of at least
``REDUCE_SUM_MIN_WINDOW`` positions with at most 16 channels, with REDUCE_SUM over W then over H
(``tfl_reduce._reduce_sum_is_cheaper``), which Vela runs cheaper there.  Both forms are checked at the threshold
against LiteRT's reference kernels (BUILTIN_REF), on random inputs and on saturating ones (the largest sums),
keep_dims true and false; int16x8 MEANs and AVERAGE_POOL_2D keep their forms and stay exact.  With Vela
installed, the premise is measured: Vela runs the whole graph on the NPU and the REDUCE_SUM form costs fewer
cycles than the depthwise one on a fingerprint-style 42x42x16 window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf2tosa
from tests.vela_tools import compile_for_npu, vela_bin
from tf2tosa.legalizations import tfl_reduce

pytest.importorskip("tensorflow")

from tests import modelgen  # noqa: E402

needs_vela = pytest.mark.skipif(vela_bin() is None, reason="Vela is not installed (.venv-vela)")


def _model(name: str, fn: Any, shape: tuple[int, ...], quant: str) -> bytes:
    return modelgen.cached(f"npu_avgpool/{name}-{quant}", lambda q: modelgen.convert(
        fn, [(shape, "float32")], quant=q, ranges=(-1.0, 1.0)), {"q": quant}, extra=(_means,))


def _means(keep: bool) -> Any:
    """Three MEANs over H, W of one input [1, 16, 16, 24]: the 16x16x16 window (256 positions, 16 channels: the
    REDUCE_SUM form), 15x15x16 (225 positions: depthwise) and 16x16x24 (24 channels: depthwise).  Each is scaled
    so the output scale differs from the input's, as in a real global pool."""
    tf = modelgen._tf()

    def fn(x: Any) -> Any:
        y = tf.nn.relu6(x * 4.0)
        return (tf.reduce_mean(y[:, :, :, :16], axis=[1, 2], keepdims=keep) * 0.5,
                tf.reduce_mean(y[:, :15, :15, :16], axis=[1, 2], keepdims=keep) * 0.25,
                tf.reduce_mean(y, axis=[1, 2], keepdims=keep))
    return fn


def _sum_forms(m: Any) -> list[tuple[str, tuple[int, ...]]]:
    """(opcode, input shape) of every DEPTHWISE_CONV2D and REDUCE_SUM, in graph order."""
    return [(op.opcode, tuple(op.operands[0].type.shape)) for op in m.graph.topological_order()
            if op.opcode in ("DEPTHWISE_CONV2D", "REDUCE_SUM")]


def _exact(m: Any, shape: tuple[int, ...]) -> None:
    """0 mismatches against BUILTIN_REF on random inputs and on the input type's extremes (a float input far
    outside the calibrated range saturates its QUANTIZE): the ReLU6 before the pools then gives the largest and
    the smallest sums."""
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report
    dt = m.graph.inputs[0].dtype.np_dtype()
    lo, hi = (-10.0, 10.0) if np.issubdtype(dt, np.floating) else (np.iinfo(dt).min, np.iinfo(dt).max)
    for fill in (lo, hi):
        report = m.verify([{m.input_names[0]: np.full(shape, fill, dt)}], oracle="ref")
        assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def test_threshold_rule() -> None:
    """The rule's corners: 256 positions and 16 channels in, 255 positions or 17 channels out; 8 channels or
    fewer only up to 48x48."""
    cheaper = tfl_reduce._reduce_sum_is_cheaper
    assert cheaper(16, 16, 16) and cheaper(42, 42, 16) and cheaper(64, 64, 16) and cheaper(48, 48, 8)
    assert not cheaper(15, 17, 16) and not cheaper(16, 16, 17) and not cheaper(49, 48, 8)
    assert not cheaper(7, 9, 16) and not cheaper(3, 3, 1280)


@pytest.mark.parametrize("keep", [False, True])
def test_int8_mean_forms_at_the_threshold_are_exact(keep: bool) -> None:
    shape = (1, 16, 16, 24)
    m = tf2tosa.convert(_model(f"means_{keep}", _means(keep), shape, "int8"))
    forms = _sum_forms(m)
    reduce_sums = [f for f in forms if f[0] == "REDUCE_SUM"]
    assert reduce_sums == [("REDUCE_SUM", (1, 16, 16, 16)), ("REDUCE_SUM", (1, 16, 1, 16))], forms  # W, then H
    assert sorted(f for f in forms if f[0] == "DEPTHWISE_CONV2D") == [
        ("DEPTHWISE_CONV2D", (1, 15, 15, 16)), ("DEPTHWISE_CONV2D", (1, 16, 16, 24))], forms
    _exact(m, shape)


def test_int16x8_mean_keeps_its_form_and_is_exact() -> None:
    shape = (1, 16, 16, 24)
    m = tf2tosa.convert(_model("means_False", _means(False), shape, "int16x8"))
    forms = _sum_forms(m)
    assert all(f[0] == "REDUCE_SUM" for f in forms) and len(forms) == 6, forms
    for first, second in zip(forms[::2], forms[1::2], strict=True):  # H, then W, as before
        assert first[1][1] > 1 and second[1][1] == 1 and second[1][2] == first[1][2] > 1, forms
    _exact(m, shape)


@pytest.mark.parametrize("quant", ["int8", "int16x8"])
def test_global_average_pool_stays_one_avg_pool(quant: str) -> None:
    """AVERAGE_POOL_2D over the whole 16x16 input stays AVG_POOL2D: Vela runs it cheaper than either sum form
    (16x16x16: 4.7 k cycles against 8.7 k depthwise, 4.7 k REDUCE_SUM; 25x5x64: 37 k against 45 k and 78 k)."""
    tf = modelgen._tf()

    def fn(x: Any) -> Any:
        return tf.nn.avg_pool2d(tf.nn.relu6(x * 4.0), 16, 1, "VALID")

    shape = (1, 16, 16, 16)
    m = tf2tosa.convert(_model("avg_pool_global", fn, shape, quant))
    counts = m.graph.op_counts()
    assert counts.get("tosa.AVG_POOL2D", 0) == 1 and "tosa.REDUCE_SUM" not in counts, counts
    _exact(m, shape)


@needs_vela
def test_vela_runs_the_reduce_sum_form_cheaper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A conv → global average pool → dense tail on a 44x44x8 input (a 42x42x16 MEAN, like the fingerprint CNN of
    bench_npu.py): all on the NPU, and Vela's cycle estimate of the REDUCE_SUM form below the depthwise one."""
    keras = modelgen._tf().keras
    keras.utils.set_random_seed(32)
    inp = keras.Input((44, 44, 8), batch_size=1)
    x = keras.layers.Conv2D(16, 3, activation="relu")(inp)
    out = keras.layers.Dense(16)(keras.layers.GlobalAveragePooling2D()(x))
    buf = _model("fingerprint_tail", keras.Model(inp, out), (1, 44, 44, 8), "int8")
    cycles = {}
    for form, window in (("reduce_sum", tfl_reduce.REDUCE_SUM_MIN_WINDOW), ("depthwise", 1 << 20)):
        monkeypatch.setattr(tfl_reduce, "REDUCE_SUM_MIN_WINDOW", window)
        m = tf2tosa.convert(buf)
        assert {f[0] for f in _sum_forms(m)} == {"REDUCE_SUM" if form == "reduce_sum" else "DEPTHWISE_CONV2D"}
        if form == "reduce_sum":
            _exact(m, (1, 44, 44, 8))
        path = tmp_path / f"{form}.tosa"
        m.save(path)
        res = compile_for_npu(path)
        assert res.cpu_ops == 0, res
        cycles[form] = res.cycles
    assert cycles["reduce_sum"] < cycles["depthwise"], cycles
