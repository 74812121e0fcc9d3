"""Arm's Vela (Ethos-U85-256) compiles our integer .tosa files with every operator on the NPU.

Default suite: the int8 sample, an int16x8 model through ``--io int`` (its float edges are what keeps a model off
the NPU: Vela runs no PRO-FP op), and the benchmark's one-line answer when Vela is missing.  Behind ``slow``: every
int8 and int16x8 model of the zoo, each compiled by Vela with 0 CPU operators and verified in its ``--io int`` form
against LiteRT's reference kernels with 0 mismatches (espcn_x2's DEPTH_TO_SPACE run at the op version LiteRT's
reference resolver registers, :func:`tf2tosa.verify.litert.reference_resolver_model`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tf2tosa
from tests.vela_tools import VelaError, compile_for_npu, vela_bin
from tf2tosa.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "models" / "samples"

needs_vela = pytest.mark.skipif(vela_bin() is None, reason="Vela is not installed (.venv-vela; `make env` builds it)")


def _convert_int_io(source: str | bytes) -> tf2tosa.TosaModel:
    try:
        return tf2tosa.convert(source, io="int")
    except InputError:  # integer edges already
        return tf2tosa.convert(source)


@needs_vela
def test_int8_sample_all_on_npu(tmp_path: Path) -> None:
    m = tf2tosa.convert(SAMPLES / "small_cnn_int8.tflite")
    m.save(tmp_path / "m.tosa")
    res = compile_for_npu(tmp_path / "m.tosa")
    assert res.cpu_ops == 0 and res.npu_ops > 0 and res.cycles > 0, res


@needs_vela
def test_int16x8_float_edges_need_io_int(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    from tests.modelgen import small_cnn

    buf = small_cnn(quant="int16x8")
    tf2tosa.convert(buf).save(tmp_path / "float_io.tosa")
    with pytest.raises(VelaError):  # QUANTIZE/DEQUANTIZE at the edges become PRO-FP ops, which Vela refuses
        compile_for_npu(tmp_path / "float_io.tosa")
    tf2tosa.convert(buf, io="int").save(tmp_path / "int_io.tosa")
    res = compile_for_npu(tmp_path / "int_io.tosa")
    assert res.cpu_ops == 0 and res.npu_ops > 0, res


def test_bench_npu_without_vela_is_one_line() -> None:
    env = {**os.environ, "TF2TOSA_VELA": str(ROOT / "no-such-vela")}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_npu.py")], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Vela is not installed" in proc.stderr


def _zoo_integer_models() -> list[tuple[str, str]]:
    try:
        from models.zoo import REGISTRY
    except ImportError:
        return []
    return [(name, variant) for name, mdef in sorted(REGISTRY.items()) for variant in ("int8", "int16x8")
            if variant not in mdef.unsupported and not mdef.gap(variant)]


#: the zoo variants the sweep below cannot pass, and why (measured with Vela 5.2.0 and LiteRT 2.3 on 2026-11-25)
KNOWN: dict[tuple[str, str], str] = {
    ("lstm_while", "int16x8"): "TFLite's converter crashes (SIGSEGV) building this variant",
}


@pytest.mark.slow
@needs_vela
@pytest.mark.parametrize("name,variant", _zoo_integer_models(), ids=lambda v: str(v))
def test_zoo_model_all_on_npu_and_bit_exact(tmp_path: Path, name: str, variant: str) -> None:
    pytest.importorskip("tensorflow")
    from models.zoo import REGISTRY, build_tflite
    from models.zoo.core import TFLiteRefused

    if (name, variant) in KNOWN:
        pytest.xfail(KNOWN[name, variant])
    try:
        info = build_tflite(REGISTRY[name], variant)
    except TFLiteRefused as e:
        pytest.skip(f"TFLite cannot build {name} {variant}: {e}")
    m = _convert_int_io(info.data)
    m.save(tmp_path / "m.tosa")
    # the largest, the int16x8 bidirectional LSTM, compiles in ~4 s since its input FULLY_CONNECTEDs are stacked
    # (185 s before, on a loaded machine); the time-out only guards against a hang
    res = compile_for_npu(tmp_path / "m.tosa", timeout=600)
    assert res.cpu_ops == 0, res
    report = m.verify(num=2, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs if not o.is_float), report
