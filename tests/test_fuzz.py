"""A seeded, bounded fuzz run (tools/fuzz.py): mutated .tflite/.tosa files through convert, load, inspect, run
and verify end in success or a ConversionError subclass, within the time limit, without killing the process.
``make fuzz N=...`` runs the long version."""

from __future__ import annotations

import os
import random
import struct
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import fuzz  # noqa: E402

N = 400


@pytest.mark.slow
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
    # an ADD of a real and a complex64 tensor typed fp32: complex_pairs removed it while LOG still read it (seed 7)
    "add_complex_real_result.tflite": "tfl.add x1: complex64 operand 'rfft2d' with the fp32 result 'add'",
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


# ------------------------------------------------------------------------------------------------ NNEF and Keras
@pytest.mark.slow
def test_nnef_and_keras_fuzz_smoke() -> None:
    """A few dozen NNEF (folder, .tgz, .tar) and Keras mutants, structure-aware and byte-level, each in its
    group's worker (Keras: one TensorFlow start, untimed): no crash, no hang, no finding."""
    summary = fuzz.fuzz(60, seed=20261129, jobs=1, formats=("nnef", "keras"))
    bad = "\n".join(f"#{b['index']} {b['kind']} {b['target']} {b['seed']} {b['how']}: {b['outcome']}\n"
                    f"{b['detail'][:1500]}" for b in summary["bad"])
    per = summary["by_format"]
    assert per["nnef"]["inputs"] == 36 and per["keras"]["inputs"] == 24, per
    assert summary["crashes"] == 0 and summary["hangs"] == 0, bad
    assert not summary["bad"], bad
    assert summary["by_mode"] == {"struct": 30, "bytes": 30}
    for fmt in ("nnef", "keras"):
        assert per[fmt]["ok"] > 0 and per[fmt]["refused"] > 0, per[fmt]  # some convert, some are refused


@pytest.mark.slow
def test_nnef_mutants_reach_every_structure() -> None:
    """Over a few hundred seeded NNEF mutants: all three containers, graph text / graph.quant / .dat header /
    member mutations, labels pointing outside, deep nesting, links, FIFOs, devices and duplicate members."""
    seeds = fuzz.load_corpus(formats=("nnef",))
    cases = [fuzz.make_nnef_case(seeds, 7, i) for i in range(600)]
    assert {c.kind for c in cases} == {"nnef-dir", "nnef-tgz", "nnef-tar"}
    hows = " ".join(c.how for c in cases)
    for want in ("graph ", "quant ", "dat-", "outside/w", "nest-", "symlink", "hardlink", "fifo", "chrdev",
                 "duplicate graph.nnef", "escape", "bomb", "archive "):
        assert want in hows, want
    again = fuzz.make_nnef_case(seeds, 7, 11)
    assert again.data == cases[11].data  # seeded


def test_materialize_makes_links_and_fifos(tmp_path: Path) -> None:
    import stat

    members = [("graph.nnef", "file", b"version 1.0;"), ("a.dat", "symlink", b"/dev/zero"),
               ("b.dat", "hardlink", b"graph.nnef"), ("c.dat", "fifo", b""), ("../escape", "file", b"x")]
    fuzz.materialize(fuzz.encode_members(members), tmp_path / "m.nnef")
    m = tmp_path / "m.nnef"
    assert os.readlink(m / "a.dat") == "/dev/zero"
    assert (m / "b.dat").stat().st_ino == (m / "graph.nnef").stat().st_ino
    assert stat.S_ISFIFO((m / "c.dat").lstat().st_mode)
    assert not (tmp_path / "escape").exists()  # the harness itself never writes outside the model


@pytest.mark.slow
def test_keras_mutants_reach_every_structure() -> None:
    seeds = fuzz.load_corpus(formats=("keras",))
    cases = [fuzz.make_keras_case(seeds, 7, i) for i in range(400)]
    hows = " ".join(c.how for c in cases)
    for want in ("config ", "metadata=", "member-rename", "member-dup", "member-escape", "weights ",
                 "size-bomb", "size-big-config", "zip-central", "flip@"):
        assert want in hows, want


def test_worker_sees_reads_outside_and_leftovers() -> None:
    """The NNEF/Keras worker's own checks: an open of the sentinel outside the model and a folder left in
    $TMPDIR are findings."""
    cases = [fuzz.Case(0, "x", "nnef-dir", "struct", "read-outside", "", b"[]"),
             fuzz.Case(1, "x", "nnef-dir", "struct", "leave-temp", "", b"[]"),
             fuzz.Case(2, "x", "nnef-dir", "struct", "convert", "", fuzz.encode_members([]))]
    results = list(fuzz.run_cases(iter(cases), jobs=1, timeout=20.0, group="nnef"))
    assert [r.outcome for r in results] == ["finding:ReadOutside", "finding:TempLeft", "ModelLoadError"]
