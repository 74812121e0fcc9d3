"""``--json``: every command prints one object that validates against its schema in docs/schemas/, on success and
for each error class the command can meet, and its ``exit_code``/``ok`` match the process's exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tf2tosa.cli import main

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "docs" / "schemas"
SAMPLES = ROOT / "models" / "samples"
F32 = SAMPLES / "small_cnn_f32.tflite"
INT8 = SAMPLES / "small_cnn_int8.tflite"
COMMANDS = ("convert", "inspect", "verify", "run", "ops", "zoo", "demo", "specialize")

needs_litert = pytest.mark.skipif(__import__("importlib.util").util.find_spec("ai_edge_litert") is None,
                                  reason="LiteRT is not installed")


def schema(command: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{command}.json").read_text())


def call(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, dict[str, Any]]:
    """Run the command line in-process; returns (exit code, the JSON object), validated against its schema."""
    argv = [str(a) for a in args]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    code = int(exc.value.code or 0)
    out = capsys.readouterr().out
    obj = json.loads(out)  # exactly one JSON document on stdout, nothing else
    jsonschema.validate(obj, schema(argv[0]))
    assert obj["exit_code"] == code and obj["ok"] == (code == 0) and obj["command"] == argv[0]
    return code, obj


def error_class(obj: dict[str, Any]) -> str:
    assert obj["error"] is not None
    return str(obj["error"]["class"])


@pytest.mark.parametrize("command", COMMANDS)
def test_schemas_are_valid_and_strict(command: str) -> None:
    s = schema(command)
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["additionalProperties"] is False and set(s["required"]) >= {"command", "ok", "exit_code", "error"}
    # a made-up key is refused: the keys are stable, and adding one means updating the schema
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"tf2tosa": "0", "command": command, "ok": False, "exit_code": 1, "warnings": [],
                             "error": {"class": "InputError", "message": "m", "file": None, "op": None,
                                       "tensor": None, "details": None}, "surprise": 1}, s)


@pytest.mark.parametrize("command", COMMANDS)
def test_usage_error(capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, obj = call(capsys, command, "--json", "--no-such-option")
    assert code == 2 and error_class(obj) == "UsageError" and "no-such-option" in obj["error"]["message"]


# ------------------------------------------------------------------------------------------------ convert
def test_convert_ok(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, obj = call(capsys, "convert", F32, "-o", tmp_path / "m.tosa", "--json")
    assert code == 0 and obj["error"] is None and obj["verify"] is None
    assert obj["profiles"] == ["PRO-FP"] and obj["ops"] > 0 and (tmp_path / "m.tosa").is_file()
    assert obj["fixed_dims"] == []  # a static model: nothing to fix


def test_convert_fixed_dims(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A dynamic-batch model: each fixed dimension, its symbol, size and origin; a bad size is an InputError."""
    pytest.importorskip("tensorflow")
    from tests.modelgen_dyn import model

    src = tmp_path / "cnn.tflite"
    src.write_bytes(model("cnn"))
    code, obj = call(capsys, "convert", src, "-o", tmp_path / "m.tosa", "--dim", "batch=3", "--json")
    assert code == 0 and obj["inputs"][0]["shape"] == [3, 16, 16, 3]
    assert obj["fixed_dims"] == [{"input": "x", "shape": [3, 16, 16, 3],
                                  "dims": [{"dim": 0, "symbol": "batch", "value": 3, "from": "dim"}]}]
    code, obj = call(capsys, "convert", src, "-o", tmp_path / "m.tosa", "--json")
    assert code == 0 and obj["fixed_dims"][0]["dims"][0]["from"] == "default" and obj["warnings"]
    code, obj = call(capsys, "convert", src, "-o", tmp_path / "m.tosa", "--input-shape", "x=0,16,16,3", "--json")
    assert code == 1 and error_class(obj) == "InputError" and obj["error"]["tensor"] == "x"


@needs_litert
def test_convert_verify_ok(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, obj = call(capsys, "convert", INT8, "-o", tmp_path / "m.tosa", "--verify", "--json")
    rep = obj["verify"]
    assert code == 0 and rep["ok"] and rep["oracle"] == "ref" and rep["outputs"][0]["bound"] == "exact"
    assert rep["optimized_diff"]["max_lsb"] > 0 and rep["optimized_diff"]["max_rel"] is None
    assert rep["info"][0].startswith("optimized kernels differ by ≤ ")


@needs_litert
def test_convert_verify_fails_with_exit_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # LiteRT's optimized kernels round differently from the reference kernels: judged by them, int8 fails
    code, obj = call(capsys, "convert", INT8, "-o", tmp_path / "m.tosa", "--verify", "--oracle", "optimized",
                     "--json")
    assert code == 3 and obj["error"] is None and not obj["verify"]["ok"]


def test_convert_model_load_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(F32.read_bytes()[:100])
    code, obj = call(capsys, "convert", bad, "-o", tmp_path / "o.tosa", "--json")
    assert code == 1 and error_class(obj) == "ModelLoadError" and obj["error"]["file"] == str(bad)


def test_convert_input_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, obj = call(capsys, "convert", F32, "-o", tmp_path / "o.tosa", "--input-shape", "nope=1,2", "--json")
    assert code == 1 and error_class(obj) == "InputError" and "nope" in obj["error"]["message"]


def test_convert_unsupported_ops(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from tests.modelgen import cached
    from tests.test_unsupported import _build

    try:
        data = cached("unsupported/mixed", _build, {}, key="v1")
    except Exception as e:  # no TensorFlow to build the model, and no cached copy
        pytest.skip(f"cannot build the model: {e}")
    path = tmp_path / "u.tflite"
    path.write_bytes(data)
    code, obj = call(capsys, "convert", path, "-o", tmp_path / "o.tosa", "--json")
    assert code == 1 and error_class(obj) == "UnsupportedOpsError"
    ops = {d["op"]: d["count"] for d in obj["error"]["details"]["unsupported"]}
    assert ops.get("tfl.unique") == 1 and ops.get("tfl.non_max_suppression_v4") == 2


def test_convert_os_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, obj = call(capsys, "convert", F32, "-o", tmp_path / "no" / "such" / "dir" / "o.tosa", "--json")
    # tf2tosa.outputs turns the OSError into OutputError, which names the path it could not write
    assert code == 1 and error_class(obj) == "OutputError" and "no/such/dir" in obj["error"]["file"]


def test_convert_missing_extra(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("ai_edge_litert") else real(name, *a))
    code, obj = call(capsys, "convert", F32, "-o", tmp_path / "o.tosa", "--verify", "--json")
    assert code == 1 and error_class(obj) == "MissingExtraError"
    assert obj["error"]["message"] == "verify needs LiteRT: pip install 'tf2tosa[tf]'"


def test_convert_interrupted(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    import tf2tosa.api

    def interrupt(*a: Any, **k: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(tf2tosa.api, "convert", interrupt)
    code, obj = call(capsys, "convert", F32, "-o", tmp_path / "o.tosa", "--json")
    assert code == 130 and error_class(obj) == "Interrupted"


def test_convert_internal_error(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    import tf2tosa.api

    def boom(*a: Any, **k: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(tf2tosa.api, "convert", boom)
    code, obj = call(capsys, "convert", F32, "-o", tmp_path / "o.tosa", "--json")
    assert code == 1 and error_class(obj) == "InternalError" and obj["error"]["message"] == "a bug"


# ------------------------------------------------------------------------------------------------ inspect
def test_inspect_ok_and_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, obj = call(capsys, "inspect", F32, "--json")
    assert code == 0 and obj["format"] == "TOSA 1.0" and obj["inputs"] and obj["op_counts"]
    bad = tmp_path / "bad.tosa"
    bad.write_bytes(b"\x00" * 64)
    code, obj = call(capsys, "inspect", bad, "--json")
    assert code == 1 and error_class(obj) == "ModelLoadError"
    code, obj = call(capsys, "inspect", tmp_path / "missing.tosa", "--json")
    assert code == 1 and error_class(obj) == "ModelLoadError"


# ------------------------------------------------------------------------------------------------ verify
@needs_litert
def test_verify_ok_float_states_its_bound(capsys: pytest.CaptureFixture[str]) -> None:
    code, obj = call(capsys, "verify", F32, "--num", "1", "--json")
    rep = obj["report"]
    assert code == 0 and rep["ok"] and rep["oracle"] == "ref" and rep["float_bound_source"]
    assert rep["outputs"][0]["bound"].startswith("|err| <=") and rep["outputs"][0]["bound_value"] > 0
    assert rep["spec"]["checked"] > 0
    diff = rep["optimized_diff"]  # the optimized kernels sum in another order: a tiny difference, for information
    assert diff["max_lsb"] is None and diff["total"] == 0 and 0 <= diff["max_rel"] < 1e-4
    assert any("float outputs" in line for line in rep["info"])


@needs_litert
def test_verify_failure_and_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, obj = call(capsys, "verify", INT8, "--oracle", "optimized", "--num", "1", "--json")
    assert code == 3 and obj["error"] is None and not obj["report"]["ok"]
    assert obj["report"]["outputs"][0]["mismatches"] > 0
    code, obj = call(capsys, "verify", INT8, "--oracle", "bogus", "--json")
    assert code == 1 and error_class(obj) == "InputError" and "bogus" in obj["error"]["message"]
    code, obj = call(capsys, "verify", INT8, "--oracle", "tensorflow", "--json")
    assert code == 1 and error_class(obj) == "InputError"
    code, obj = call(capsys, "verify", tmp_path / "missing.tflite", "--json")
    assert code == 1 and error_class(obj) == "ModelLoadError"
    npy = tmp_path / "x.npy"
    np.save(npy, np.zeros((1, 2), np.float32))
    code, obj = call(capsys, "verify", F32, "--input", f"nope={npy}", "--json")
    assert code == 1 and error_class(obj) == "InputError"
    name = obj_input_name(capsys, F32)
    np.save(npy, np.zeros((1, 32, 32, 3), np.int32))
    code, obj = call(capsys, "verify", F32, "--input", f"{name}={npy}", "--json")
    assert code == 1 and error_class(obj) == "InputError" and "dtype int32" in obj["error"]["message"]
    assert obj["error"]["tensor"] == name


def obj_input_name(capsys: pytest.CaptureFixture[str], model: Path) -> str:
    _, obj = call(capsys, "inspect", model, "--json")
    return str(obj["inputs"][0]["name"])


def test_verify_missing_extra(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("ai_edge_litert") else real(name, *a))
    code, obj = call(capsys, "verify", F32, "--json")
    assert code == 1 and error_class(obj) == "MissingExtraError"


# ------------------------------------------------------------------------------------------------ run
def test_run_ok_and_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    tosa = tmp_path / "m.tosa"
    call(capsys, "convert", F32, "-o", tosa, "--json")
    code, obj = call(capsys, "run", tosa, "--output-dir", tmp_path / "res", "--profile-ops", "--json")
    assert code == 0 and obj["outputs"][0]["file"] and obj["profile"]["total_ms"] > 0
    assert Path(obj["outputs"][0]["file"]).is_file()
    npy = tmp_path / "x.npy"
    np.save(npy, np.zeros((2, 2), np.float32))
    code, obj = call(capsys, "run", tosa, "--input", f"nope={npy}", "--json")
    assert code == 1 and error_class(obj) == "InputError" and obj["error"]["tensor"] == "nope"
    code, obj = call(capsys, "run", tmp_path / "missing.tosa", "--json")
    assert code == 1 and error_class(obj) == "ModelLoadError"


def test_run_repeat(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--repeat N: the last of N runs (the steady state, prepared forms from the third) gives the outputs and the
    profile; the outputs equal a single run's bit for bit."""
    tosa = tmp_path / "m.tosa"
    call(capsys, "convert", F32, "-o", tosa, "--json")
    code, one = call(capsys, "run", tosa, "--output-dir", tmp_path / "one", "--json")
    assert code == 0
    code, rep = call(capsys, "run", tosa, "--output-dir", tmp_path / "rep", "--repeat", "4", "--profile-ops", "--json")
    assert code == 0 and rep["profile"]["total_ms"] > 0
    for a, b in zip(one["outputs"], rep["outputs"]):
        assert np.load(a["file"]).tobytes() == np.load(b["file"]).tobytes()
    code, obj = call(capsys, "run", tosa, "--repeat", "0", "--json")
    assert code == 1 and error_class(obj) == "InputError" and "--repeat" in obj["error"]["message"]
    code, obj = call(capsys, "run", tosa, "--repeat", "2", "--steps", "2", "--json")
    assert code == 1 and error_class(obj) == "InputError"


# ------------------------------------------------------------------------------------------------ ops, zoo, demo
def test_ops_ok(capsys: pytest.CaptureFixture[str]) -> None:
    code, obj = call(capsys, "ops", "--json")
    assert code == 0 and obj["count"] == len(obj["ops"]) > 50
    assert any(o["op"] == "tfl.conv_2d" and o["dtypes"]["i8"] == "yes" for o in obj["ops"])


def test_zoo_list_ok(capsys: pytest.CaptureFixture[str]) -> None:
    code, obj = call(capsys, "zoo", "--list", "--filter", "mobilenet*", "--json")
    assert code == 0 and obj["list"] and obj["results"] and obj["summary"] is None
    assert all(r["model"].startswith("mobilenet") for r in obj["results"])


def test_demo_input_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, obj = call(capsys, "demo", "--samples", tmp_path, "--out-dir", tmp_path / "o", "--json")
    assert code == 1 and error_class(obj) in ("InputError", "MissingExtraError")


@needs_litert
def test_verify_layers_and_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, obj = call(capsys, "verify", INT8, "--num", "1", "--layers", "--report", tmp_path / "r.html", "--json")
    assert code == 0 and obj["layers"]["first_divergent"] is None and obj["layers"]["layers"]
    assert obj["html"] == str(tmp_path / "r.html") and (tmp_path / "r.html").is_file()


@needs_litert
def test_zoo_run_ok(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")  # builds the variant (or takes it from the cache)
    code, obj = call(capsys, "zoo", "--filter", "lenet5/int8", "--report", tmp_path, "--json")
    assert code == 0 and obj["results"][0]["status"] == "PASS" and "PASS 1" in obj["summary"]
    assert set(obj["paths"]) == {"json", "md", "html"}


@needs_litert
def test_demo_ok(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, obj = call(capsys, "demo", "--out-dir", tmp_path, "--json")
    assert code == 0 and len(obj["models"]) == len(list(SAMPLES.glob("*.tflite")))
    assert all(m["report"]["ok"] and m["report"]["oracle"] == "ref" and m["report"]["info"] for m in obj["models"])


def test_convert_invalid_graph_error_fields(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """InvalidGraphError needs a model TOSA cannot type (e.g. a string input); its file/op/tensor reach the JSON."""
    import tf2tosa.api
    from tf2tosa.errors import InvalidGraphError

    def invalid(*a: Any, **k: Any) -> Any:
        raise InvalidGraphError("model input of type str has no TOSA type", file="m.tflite", op="tfl.custom#3",
                                tensor="text")

    monkeypatch.setattr(tf2tosa.api, "convert", invalid)
    code, obj = call(capsys, "convert", F32, "-o", tmp_path / "o.tosa", "--json")
    assert code == 1 and error_class(obj) == "InvalidGraphError"
    assert (obj["error"]["file"], obj["error"]["op"], obj["error"]["tensor"]) == ("m.tflite", "tfl.custom#3", "text")
    assert obj["error"]["message"] == "model input of type str has no TOSA type"  # without the [where] suffix
