"""int16x8 FULLY_CONNECTEDs that share weights on independent rows become one stacked op (passes/batch_fully_connected).

The oracle is LiteRT's reference kernels (BUILTIN_REF): every intermediate integer tensor of the model, each row's
FULLY_CONNECTED output included, must equal LiteRT's bit for bit (``verify_layers``), and so must the outputs.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import tf2tosa


def _shared_dense_rows() -> bytes:
    """x [1, 6, 5] → UNPACK → 6 rows through one Dense(7) (shared weights and bias), as an unrolled RNN's input
    kernel: each row's FULLY_CONNECTED output gets its own calibrated scale; then a second Dense on the tanh of
    the first row's output (other weights: stays apart)."""
    pytest.importorskip("tensorflow")
    from tests import modelgen

    def build() -> bytes:
        tf = modelgen._tf()
        rng = np.random.default_rng(21)
        w = tf.constant(rng.normal(0, 0.5, (5, 7)).astype(np.float32))
        b = tf.constant(rng.normal(0, 0.2, (7,)).astype(np.float32))
        u = tf.constant(rng.normal(0, 0.5, (7, 5)).astype(np.float32))

        def fn(x: object) -> object:
            rows = tf.unstack(x, axis=1)
            ys = [tf.matmul(r, w) + b for r in rows]
            ys.append(tf.matmul(tf.tanh(ys[0]), u))
            return tf.concat(ys, axis=1)

        return modelgen.convert(fn, [(1, 6, 5)], quant="int16x8", seed=3)

    return modelgen.cached("batch_fc/shared_dense_rows", build, {})


def _fc_output_scales(buf: bytes) -> list[float]:
    import tflite

    m = tflite.Model.GetRootAsModel(buf, 0)
    sg = m.Subgraphs(0)
    out = []
    for j in range(sg.OperatorsLength()):
        op = sg.Operators(j)
        if m.OperatorCodes(op.OpcodeIndex()).BuiltinCode() == tflite.BuiltinOperator.FULLY_CONNECTED:
            out.append(float(sg.Tensors(op.Outputs(0)).Quantization().Scale(0)))
    return out


def test_shared_weight_rows_stacked_bit_exact() -> None:
    from tf2tosa.verify.layers import verify_layers

    buf = _shared_dense_rows()
    m = tf2tosa.convert(buf, io="int")
    ops = Counter(op.name for op in m.graph)
    assert len(set(_fc_output_scales(buf))) > 2  # the rows' own output scales (what must be kept)
    assert ops["tosa.CONV2D"] == 2, ops  # the 6 rows stacked into one CONV2D, and the Dense by u
    report = m.verify(num=4, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report
    for seed in range(3):
        layers = verify_layers(buf, seed=seed)
        ints = [e for e in layers.layers if e.metric == "lsb"]
        assert len(ints) > 10 and sum(e.mismatches for e in ints) == 0, [e for e in ints if e.mismatches][:3]
