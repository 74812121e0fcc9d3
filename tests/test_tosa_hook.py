"""The session's .tosa hook (tests/tosa_hook.py) fails on what it must fail on, and sees subprocess writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests import tosa_hook
from tf2tosa.executor.registry import KERNELS
from tf2tosa.ir.graph import Graph
from tf2tosa.ir.types import DType, TensorType
from tf2tosa.serializer import tosa_writer
from tf2tosa.verify import tosa_tools

needs_tools = pytest.mark.skipif(not tosa_tools.available(), reason="tosa-tools environment not available")
ROOT = Path(__file__).resolve().parent.parent


def _add_graph(bad_reshape: bool = False) -> Graph:
    g = Graph()
    x = g.add_input("x", TensorType((2, 3), DType.FP32))
    y = g.add_input("y", TensorType((2, 3), DType.FP32))
    s = g.add_op("tosa.ADD", [x, y], [TensorType((2, 3), DType.FP32)]).result
    if bad_reshape:
        shape = g.add_const(np.array([7], np.int64), DType.SHAPE, name="s", op_name="tosa.CONST_SHAPE")
        s = g.add_op("tosa.RESHAPE", [s, shape], [TensorType((7,), DType.FP32)]).result
    g.outputs = [s]
    return g


@needs_tools
def test_valid_file_passes_and_is_run_in_the_reference_model() -> None:
    rec = tosa_hook.Recorder()
    tosa_writer_to_bytes = rec.wrap_to_bytes(tosa_writer.to_bytes)
    tosa_writer_to_bytes(_add_graph())
    assert rec.drain(None) == []
    assert len(rec.stats.checked) == 1 and len(rec.stats.ran) == 1


@needs_tools
@pytest.mark.tosa_unchecked("writes an invalid RESHAPE on purpose: the recorder under test must reject it")
def test_invalid_file_fails() -> None:
    rec = tosa_hook.Recorder()
    rec.wrap_to_bytes(tosa_writer.to_bytes)(_add_graph(bad_reshape=True))
    failures = rec.drain(None)
    assert len(failures) == 1 and "tosa-opt strict 1.0 validation failed" in failures[0]


@needs_tools
def test_wrong_executor_result_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our executor disagreeing with the reference model (here: a broken ADD kernel) fails the check."""
    rec = tosa_hook.Recorder()
    rec.wrap_to_bytes(tosa_writer.to_bytes)(_add_graph())
    add = KERNELS["ADD"]
    monkeypatch.setitem(KERNELS, "ADD", lambda op, ins: [add(op, ins)[0] + np.float32(1e-3)])
    failures = rec.drain(None)
    assert len(failures) == 1 and ("reference model" in failures[0] or "spec" in failures[0]), failures


@pytest.mark.tosa_unchecked("writes an invalid RESHAPE on purpose: exemption is what is tested")
def test_exempt_test_checks_nothing() -> None:
    rec = tosa_hook.Recorder()
    rec.wrap_to_bytes(tosa_writer.to_bytes)(_add_graph(bad_reshape=True))
    assert rec.drain("invalid on purpose") == [] and not rec.stats.checked


def test_subprocess_writes_reach_the_spool(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    env = {**os.environ, "TF2TOSA_TOSA_SPOOL": str(spool),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "spool"), str(ROOT)])}
    code = ("import numpy as np\n"
            "from tf2tosa.ir.graph import Graph\n"
            "from tf2tosa.ir.types import DType, TensorType\n"
            "from tf2tosa.serializer import save\n"
            "g = Graph()\n"
            "x = g.add_input('x', TensorType((2,), DType.FP32))\n"
            "g.outputs = [g.add_op('tosa.NEGATE', [x, g.add_const(np.zeros(1, np.float32), DType.FP32), "
            "g.add_const(np.zeros(1, np.float32), DType.FP32)], [TensorType((2,), DType.FP32)]).result]\n"
            f"save(g, {str(tmp_path / 'm.tosa')!r})\n")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    written = list(spool.glob("*.tosa"))
    assert len(written) == 1 and written[0].read_bytes() == (tmp_path / "m.tosa").read_bytes()
    rec = tosa_hook.Recorder()
    rec.spool = spool
    rec.drain("only collecting")  # exempt: collects the spool without running the tools
    assert not list(spool.glob("*.tosa"))
