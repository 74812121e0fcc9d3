"""`inspect --target` / `convert --target`: everything a target cannot take, each item naming the op and tensor and
the option that fixes it.  For ethos-u85 the oracle is Vela 5.2 itself (``ROOT/.venv-vela/bin/vela``, the
issue's command line): one example per rule that Vela rejects, where our report names the failing op; files
Vela accepts, where our report is empty; and the two places where the two differ on purpose, pinned so that a
change in Vela shows up (EXT-VARIABLE: Vela compiles it but drops the state; level 8K: Vela does not check
MAX_STRIDE/MAX_SCALE).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import tf2tosa
from tf2tosa.errors import TargetError
from tf2tosa.ir.graph import Graph, Value
from tf2tosa.ir.types import DType, TensorType
from tf2tosa.serializer import to_bytes
from tf2tosa.tosa.targets import TARGETS, check

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "models" / "samples"
VELA = ROOT / ".venv-vela" / "bin" / "vela"
T = TensorType


def vela_accepts(tosa: Path, out_dir: Path) -> tuple[bool, str]:
    """Compile with Vela for Ethos-U85-256 (the issue's configuration): accepted when it exits 0 with every
    operator on the NPU."""
    if not VELA.exists():
        pytest.skip(f"vela is not installed at {VELA} (make the .venv-vela environment)")
    cmd = [str(VELA), "--accelerator-config", "ethos-u85-256", "--config", "Arm/vela.ini", "--system-config",
           "Ethos_U85_SYS_DRAM_High", "--memory-mode", "Dedicated_Sram_384KB", "--output-dir", str(out_dir), str(tosa)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    text = proc.stdout + proc.stderr
    return proc.returncode == 0 and "CPU operators = 0 " in text, text


# ------------------------------------------------------------------------------------------------ examples
def _shape(g: Graph, vals: list[int], name: str) -> Value:
    return g.add_const(np.array(vals, np.int64), DType.SHAPE, name=name, op_name="tosa.CONST_SHAPE")


def float_edge() -> Graph:
    """An integer body behind a float input conversion (what TFLite's QUANTIZE becomes)."""
    g = Graph()
    x = g.add_input("x", T((1, 4), DType.FP32))
    c = g.add_op("tosa.CAST", [x], [T((1, 4), DType.INT8)]).result
    g.outputs = [g.add_op("tosa.CLAMP", [c], [c.type], {"min_val": -100, "max_val": 100,
                                                         "nan_mode": "PROPAGATE"}).result]
    return g


def dynamic_rescale() -> Graph:
    """EXT-DYNAMIC: a RESCALE multiplier that is a graph input."""
    g = Graph()
    x, m = g.add_input("x", T((1, 4), DType.INT8)), g.add_input("m", T((1,), DType.INT32))
    s = g.add_const(np.array([31], np.int8), name="s")
    zi, zo = g.add_const(np.zeros(1, np.int8), name="zi"), g.add_const(np.zeros(1, np.int8), name="zo")
    g.outputs = [g.add_op("tosa.RESCALE", [x, m, s, zi, zo], [x.type],
                          {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
                           "input_unsigned": False, "output_unsigned": False}).result]
    return g


def dynamic_weights() -> Graph:
    """TRANSPOSE_CONV2D whose weights are a graph input (Vela: "with dynamic weights" unsupported)."""
    g = Graph()
    x, w = g.add_input("x", T((1, 4, 4, 2), DType.INT8)), g.add_input("w", T((3, 2, 2, 2), DType.INT8))
    b, z = g.add_const(np.zeros(3, np.int32), name="b"), g.add_const(np.zeros(1, np.int8), name="z")
    g.outputs = [g.add_op("tosa.TRANSPOSE_CONV2D", [x, w, b, z, z], [T((1, 5, 5, 3), DType.INT32)],
                          {"out_pad": [0, 0, 0, 0], "stride": [1, 1], "acc_type": "INT32",
                           "local_bound": False}).result]
    return g


def variable_state() -> Graph:
    """EXT-VARIABLE: return the state, store the (clamped) input."""
    g = Graph()
    x = g.add_input("x", T((1, 4), DType.INT8))
    g.add_op("tosa.VARIABLE", [], [], {"name": "state", "var_shape": [1, 4], "type": DType.INT8,
                                       "initial_value": np.zeros((1, 4), np.int8)})
    r = g.add_op("tosa.VARIABLE_READ", [], [x.type], {"name": "state"}).result
    s = g.add_op("tosa.CLAMP", [x], [x.type], {"min_val": -100, "max_val": 100, "nan_mode": "PROPAGATE"}).result
    g.add_op("tosa.VARIABLE_WRITE", [s], [], {"name": "state"})
    g.outputs = [r]
    return g


def big_stride() -> Graph:
    g = Graph()
    x = g.add_input("x", T((1, 1, 1, 4), DType.INT8))
    g.outputs = [g.add_op("tosa.MAX_POOL2D", [x], [x.type], {"kernel": [1, 1], "stride": [8193, 1],
                                                            "pad": [0, 0, 0, 0], "nan_mode": "PROPAGATE"}).result]
    return g


def big_scale() -> Graph:
    g = Graph()
    x = g.add_input("x", T((1, 2, 1, 4), DType.INT8))
    g.outputs = [g.add_op("tosa.RESIZE", [x, _shape(g, [512, 1, 1, 1], "sc"), _shape(g, [0, 0], "off"),
                                          _shape(g, [0, 0], "bo")], [T((1, 513, 1, 4), DType.INT8)],
                          {"mode": "NEAREST_NEIGHBOR"}).result]
    return g


def rank7() -> bytes:
    g = Graph()
    x = g.add_input("x", T((1, 2, 2, 2), DType.INT8))
    r = g.add_op("tosa.RESHAPE", [x, _shape(g, [1, 1, 1, 1, 2, 2, 2], "s7")], [T((1, 1, 1, 1, 2, 2, 2), DType.INT8)])
    g.outputs = [g.add_op("tosa.RESHAPE", [r.result, _shape(g, [1, 2, 2, 2], "s4")], [x.type]).result]
    return to_bytes(g)


def _sample(name: str) -> Callable[[], Graph]:
    return lambda: tf2tosa.convert(str(SAMPLES / f"{name}.tflite")).graph


def _zoo(key: str) -> Callable[[], Graph]:
    """A zoo model variant (float inputs/outputs around an integer body for int16x8); skipped when it is not in
    the zoo cache and TensorFlow is not there to build it."""
    def build() -> Graph:
        from models.zoo import all_models, build_tflite, cache_path

        name, variant = key.split("/")
        mdef = all_models()[name]
        if not mdef.paths and not cache_path(mdef, variant).exists():
            pytest.importorskip("tensorflow", reason="tensorflow is not installed (needed to build the zoo model)")
        return tf2tosa.convert(build_tflite(mdef, variant).data).graph

    return build


# ------------------------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("name", ["small_cnn_int8", "mlp_uint8io"])
def test_vela_accepts_what_we_pass(name: str, tmp_path: Path) -> None:
    g = _sample(name)()
    assert check(g, "ethos-u85") == []
    (tmp_path / "m.tosa").write_bytes(to_bytes(g))
    ok, log = vela_accepts(tmp_path / "m.tosa", tmp_path)
    assert ok, log


#: one example per rule Vela rejects: (builder, rule, the op our report names, a word of the fix or None)
REJECTED = {
    "profile (a float model)": (_sample("small_cnn_f32"), "profile", "tosa.CONV2D", None),
    "profile (float edge)": (float_edge, "profile", "tosa.CAST", "--io int"),
    "profile (int16x8 with float I/O)": (_zoo("resnet8/int16x8"), "profile", "tosa.", "--io int"),
    "extension (EXT-DYNAMIC)": (dynamic_rescale, "extension", "tosa.RESCALE", "--input-shape"),
    "operator (dynamic weights)": (dynamic_weights, "operator", "tosa.TRANSPOSE_CONV2D", None),
}


@pytest.mark.tosa_unchecked("an EXT-DYNAMIC RESCALE with a random multiplier input breaks the REQUIRE on purpose")
@pytest.mark.parametrize("case", list(REJECTED))
def test_vela_rejects_what_we_name(case: str, tmp_path: Path) -> None:
    build, rule, op, fix = REJECTED[case]
    g = build()
    problems = check(g, "ethos-u85")
    assert problems and any(p.rule == rule and p.op.startswith(op) and p.tensor for p in problems), problems
    if fix is not None:
        assert all(fix in (p.fix or "") for p in problems if p.rule == rule), problems
    (tmp_path / "m.tosa").write_bytes(to_bytes(g))
    ok, log = vela_accepts(tmp_path / "m.tosa", tmp_path)
    assert not ok, log


@pytest.mark.tosa_unchecked("a rank-7 tensor is above level 8K on purpose")
def test_rank_above_8k_is_refused_by_both(tmp_path: Path) -> None:
    """Our reader refuses the file with one error naming the tensor; so does Vela."""
    path = tmp_path / "m.tosa"
    path.write_bytes(rank7())
    with pytest.raises(tf2tosa.errors.ConversionError, match="rank 7 exceeds MAX_RANK 6") as exc:
        tf2tosa.load(str(path))
    assert exc.value.tensor is not None or "reshape" in str(exc.value)
    ok, log = vela_accepts(path, tmp_path)
    assert not ok, log


#: where we differ from Vela on purpose: (builder, rule, why)
DIFFERENT = {
    "EXT-VARIABLE": (variable_state, "extension", "Vela compiles VARIABLE_READ/WRITE as copies: the state is lost"),
    "MAX_STRIDE": (big_stride, "level", "Vela does not check the 8K level's MAX_STRIDE"),
    "MAX_SCALE": (big_scale, "level", "Vela does not check the 8K level's MAX_SCALE"),
}


@pytest.mark.tosa_unchecked("level 8K violations on purpose")
@pytest.mark.parametrize("case", list(DIFFERENT))
def test_where_we_are_stricter_than_vela(case: str, tmp_path: Path) -> None:
    build, rule, _why = DIFFERENT[case]
    g = build()
    problems = check(g, "ethos-u85")
    assert problems and all(p.rule == rule for p in problems), problems
    (tmp_path / "m.tosa").write_bytes(to_bytes(g))
    ok, log = vela_accepts(tmp_path / "m.tosa", tmp_path)
    assert ok, f"Vela now rejects the {case} example: make the target check agree ({log})"


def test_variable_names_the_state_option() -> None:
    problems = check(variable_state(), "ethos-u85")
    assert {p.op.split("#")[0] for p in problems} == {"tosa.VARIABLE", "tosa.VARIABLE_READ", "tosa.VARIABLE_WRITE"}
    assert all((p.fix or "").startswith("--state-io") for p in problems)


# ------------------------------------------------------------------------------------------------ other targets
def test_profile_targets() -> None:
    int8 = _sample("small_cnn_int8")()
    f32 = _sample("small_cnn_f32")()
    assert check(f32, "pro-fp-8k") == []
    rounding = check(int8, "pro-int-8k")
    assert rounding and all(p.rule == "extension" and "EXT-DOUBLEROUND" in p.message and p.fix == "--rounding single"
                            for p in rounding)
    single = tf2tosa.convert(str(SAMPLES / "small_cnn_int8.tflite"), rounding="single")
    assert check(single.graph, "pro-int-8k") == []
    assert any(p.rule == "profile" and "PRO-INT" in p.message for p in check(int8, "pro-fp-8k"))


def test_ethos_u55_names_vela_u55_limits() -> None:
    problems = check(_sample("small_cnn_int8")(), "ethos-u55")
    assert any(p.rule == "operator" and "not supported by Vela on Ethos-U55" in p.message for p in problems)
    assert set(TARGETS) == {"ethos-u85", "ethos-u55", "pro-int-8k", "pro-fp-8k", "vulkan-ml"}


# ------------------------------------------------------------------------------------------------ command line
def test_cli_inspect_and_convert_target(tmp_path: Path) -> None:
    import json
    import sys

    def cli(*argv: str) -> tuple[int, str]:
        proc = subprocess.run([sys.executable, "-m", "tf2tosa", *argv], capture_output=True, text=True, timeout=600,
                              check=False, cwd=ROOT)
        return proc.returncode, proc.stdout + proc.stderr
    code, text = cli("inspect", str(SAMPLES / "small_cnn_int8.tflite"), "--target", "ethos-u85")
    assert code == 0 and "target ethos-u85: takes the program" in text
    code, text = cli("inspect", str(SAMPLES / "small_cnn_f32.tflite"), "--target", "ethos-u85", "--json")
    obj = json.loads(text[text.index("{"):])
    assert code == 0 and obj["target"]["ok"] is False
    assert obj["target"]["problems"][0]["op"].startswith("tosa.") and obj["target"]["problems"][0]["tensor"]
    out = tmp_path / "m.tosa"
    code, text = cli("convert", str(SAMPLES / "small_cnn_f32.tflite"), "-o", str(out), "--target", "ethos-u85")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error: ") and "PRO-FP" in lines[0]
    assert "Traceback" not in text and not out.exists()
    code, text = cli("inspect", str(SAMPLES / "small_cnn_f32.tflite"), "--target", "ethos-u99")
    assert code == 2 and "ethos-u99" in text and "Traceback" not in text


def test_api_target_error() -> None:
    m = tf2tosa.convert(str(SAMPLES / "small_cnn_f32.tflite"))
    with pytest.raises(TargetError) as exc:
        m.require_target("ethos-u85")
    assert exc.value.details()["problems"] and exc.value.file
    with pytest.raises(tf2tosa.errors.InputError, match="unknown target"):
        m.check_target("npu")


def test_cli_target_json_matches_the_schemas(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("jsonschema")
    from test_cli_json import F32, INT8, call

    code, obj = call(capsys, "inspect", INT8, "--target", "pro-int-8k", "--json")
    assert code == 0 and obj["target"]["name"] == "pro-int-8k" and not obj["target"]["ok"]
    assert {p["fix"] for p in obj["target"]["problems"]} == {"--rounding single"}
    code, obj = call(capsys, "inspect", INT8, "--json")
    assert obj["target"] is None
    code, obj = call(capsys, "convert", F32, "-o", tmp_path / "m.tosa", "--target", "ethos-u85", "--json")
    assert code == 1 and obj["error"]["class"] == "TargetError"
    assert obj["error"]["details"]["target"] == "ethos-u85" and obj["error"]["details"]["problems"]
    assert not (tmp_path / "m.tosa").exists()


@pytest.mark.slow
@pytest.mark.parametrize("key", [k for k, _, _ in __import__("iree_check").zoo_cases()])
def test_zoo_vela_agrees(key: str, tmp_path: Path) -> None:
    """Every zoo model variant: our ethos-u85 report is empty exactly when Vela compiles it to 100% NPU
    (``python -m tests.vela_check`` prints the same sweep)."""
    try:
        graph = _zoo(key)()
    except Exception as e:  # noqa: BLE001 - the zoo's build refusals and the converter's are other tests' business
        if type(e).__name__ in ("TFLiteRefused", "ModelLoadError", "UnsupportedOpsError"):
            pytest.skip(f"{key} does not convert: {type(e).__name__}")
        raise
    problems = check(graph, "ethos-u85")
    (tmp_path / "m.tosa").write_bytes(to_bytes(graph))
    ok, log = vela_accepts(tmp_path / "m.tosa", tmp_path)
    assert ok == (not problems), (problems[:3], log[-500:])
