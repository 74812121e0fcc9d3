"""verify judges float results by the spec's accuracy rules: every float op's fp32 result against its fp64
re-evaluation with the op's bound (ULP, absolute, dot-product §1.10.3, exact).  A kernel that drifts is caught."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tf2tosa
from tf2tosa.executor.registry import KERNELS
from tf2tosa.verify.compare import random_inputs
from tf2tosa.verify.spec_check import check_graph

SAMPLE = Path(__file__).resolve().parent.parent / "models" / "samples" / "small_cnn_f32.tflite"


def test_compliant_model() -> None:
    m = tf2tosa.convert(str(SAMPLE))
    report = check_graph(m.graph, random_inputs(m.graph, 0))
    assert report.ok and report.checked == sum(1 for op in m.graph.ops.values()
                                               if op.opcode not in ("CONST", "CONST_SHAPE"))
    assert report.worst is not None and report.worst.worst <= 1.0


@pytest.mark.parametrize("opcode,drift", [("CONV2D", 1e-3), ("REDUCE_SUM", 1e-4), ("SUB", 1e-6)])
def test_drifting_kernel_is_caught(monkeypatch: pytest.MonkeyPatch, opcode: str, drift: float) -> None:
    """A kernel whose fp32 result is off by a relative ``drift`` breaks the spec bound and is named."""
    m = tf2tosa.convert(str(SAMPLE))
    assert any(op.opcode == opcode for op in m.graph.ops.values())
    good = KERNELS[opcode]

    def drifting(op, ins):  # type: ignore[no-untyped-def]
        out = good(op, ins)
        from tf2tosa.executor.registry import PRECISE

        if PRECISE.get():  # the fp64 reference stays right; only the fp32 run drifts
            return out
        return [np.asarray(o * (1 + drift), dtype=o.dtype) for o in out]

    monkeypatch.setitem(KERNELS, opcode, drifting)
    report = check_graph(m.graph, random_inputs(m.graph, 0))
    assert not report.ok
    assert any(f"tosa.{opcode}#" in f.op for f in report.failures)
    verify = tf2tosa.convert(str(SAMPLE)).verify(num=1)
    assert not verify.ok and "outside their bound" in str(verify)
