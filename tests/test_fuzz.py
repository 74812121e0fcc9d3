"""A seeded, bounded fuzz run (tools/fuzz.py): mutated .tflite/.tosa files through convert, load, inspect, run
and verify end in success or a ConversionError subclass, within the time limit, without killing the process.
``make fuzz N=...`` runs the long version."""

from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import fuzz  # noqa: E402

N = 400


def test_bounded_fuzz_run() -> None:
    summary = fuzz.fuzz(N, seed=20261124, jobs=1, verify_share=0.02)
    bad = "\n".join(f"#{b['index']} {b['target']} {b['seed']} {b['how']}: {b['outcome']}\n{b['detail'][:1500]}"
                    for b in summary["bad"])
    assert not summary["bad"], bad
    assert summary["by_mode"] == {"struct": N // 2, "bytes": N // 2}
    assert set(summary["by_target"]) >= {"convert", "load", "inspect", "run"}
    # the mutants are not all rejected at the door: some convert/run to the end, some fail later than loading
    assert summary["outcomes"].get("ok", 0) > N // 20
    assert sum(v for k, v in summary["outcomes"].items() if k not in ("ok", "ModelLoadError", "cli-error")) > 0


def test_structure_aware_mutation_hits_fields() -> None:
    """The traced fields of a seed include what the issue names: shapes, vector lengths, enums, indices,
    quantization arrays."""
    seeds = {s.path.name: s for s in fuzz.load_corpus()}
    names = {f.name for f in seeds["small_cnn_int8.tflite"].fields}
    for want in ("ShapeAsNumpy", "ScaleAsNumpy", "ZeroPointAsNumpy", "Type", "Buffer", "OpcodeIndex",
                 "InputsAsNumpy", "BuiltinOptionsType", "DataAsNumpy"):
        assert want in names, want
    roles = {f.role for f in seeds["small_cnn_int8.tosa"].fields}
    assert roles == {"vtable", "offset", "length", "scalar", "elem", "data"}
    rng = random.Random(0)
    s = seeds["depthwise_f32.tflite"]
    data, how = fuzz.mutate_structured(rng, s.data, s.fields)
    assert len(data) == len(s.data) and data != s.data and how.startswith("struct")


def test_worker_reports_crash_and_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness itself: a worker that dies is a crash, one that does not answer in time a hang, and the next
    input still runs (a restarted worker)."""
    cases = [fuzz.Case(i, "x", "tosa", "bytes", t, "", b"") for i, t in enumerate(["crash", "hang", "load"])]
    results = list(fuzz.run_cases(iter(cases), jobs=1, timeout=3.0))
    assert [r.outcome for r in results] == ["crash", "hang", "ModelLoadError"]


def test_oversized_shapes_refused_before_allocation(tmp_path: Path) -> None:
    """A tensor dimension raised to 2^30 is refused by the loader (level 8K tensor size / memory budget)."""
    from tf2tosa import api
    from tf2tosa.errors import ModelLoadError

    s = {s.path.name: s for s in fuzz.load_corpus()}["depthwise_f32.tflite"]
    dim = next(f for f in s.fields if f.name == "ShapeAsNumpy")
    data = bytearray(s.data)
    struct.pack_into("<i", data, dim.pos, 1 << 30)
    with pytest.raises(ModelLoadError, match="elements|bytes"):
        api.convert(bytes(data))


#: mutants an earlier long run (``tools/fuzz.py -n 30000 --seed 1234``) found, each a traceback then: file -> the
#: words of the one-line error now
FINDINGS = {
    "dequantize_no_operand.tflite": "tfl.dequantize x1: malformed: 0 operand(s)",  # a pass read operand 0
    "sum_float_axes.tflite": "the axes (operand 1) of tfl.sum are float32, not integers",  # int(NaN)
    "read_variable_two_results.tflite": "tfl.read_variable has 2 results",  # Operation.result's ValueError
    "concatenation_no_result.tflite": "tfl.concatenation x1: malformed: no result",  # op.results[0] (seed 999)
    # the arity table missed nine builtins (seed 5, -n 50000)
    "dynamic_update_slice_one_operand.tflite": "tfl.dynamic_update_slice x1: malformed: 1 operand(s)",
}


@pytest.mark.parametrize("name", sorted(FINDINGS))
def test_earlier_findings_are_one_line(name: str, tmp_path: Path) -> None:
    import subprocess

    model = ROOT / "tests" / "fuzz" / "findings" / name
    proc = subprocess.run([sys.executable, "-m", "tf2tosa", "convert", str(model), "-o", str(tmp_path / "x.tosa")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and FINDINGS[name] in lines[0] and str(model) in lines[0], proc.stderr
    assert not (tmp_path / "x.tosa").exists()
