"""IREE 3.13 takes our ``.mlir`` unchanged: it compiles (``--iree-input-type=tosa``, llvm-cpu) and runs, and agrees
with the embedded executor (integers bit-exact, floats within 1e-5 × max|ref| or no farther from the float64 result
than the executor).  The executor is the oracle here; IREE is the independent second implementation.

Also: the generic MLIR parses in tosa-opt 2026.8.0, the upstream syntax is the same program to IREE, and IREE's
own wrong result on i16×i8 CONV2D + 16-bit-multiplier RESCALE is pinned (xfail strict) with a minimal graph.
The whole zoo is behind ``-m slow`` (``python -m tests.iree_check`` prints the same sweep's figures).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from iree_check import check, is_i48_rescale, zoo_cases

import tf2tosa
from tests import tosa_mlir
from tf2tosa.executor import run
from tf2tosa.ir.graph import Graph
from tf2tosa.ir.types import DType, TensorType
from tf2tosa.serializer.mlir import to_mlir
from tf2tosa.verify import iree, tosa_tools

pytestmark = pytest.mark.skipif(not iree.available(), reason="IREE (iree-base-compiler/runtime) is not installed")

SAMPLES = sorted((Path(__file__).resolve().parents[1] / "models" / "samples").glob("*.tflite"))
#: the default-suite subset of the zoo: a float CNN, an int8 CNN, an int16x8 model
SUBSET = ["mobilenet_v2/float32", "resnet8/int8", "lenet5/int16x8"]
#: zoo int16x8 models whose result IREE gets wrong (test_iree_i48_rescale_bug is the minimal case)
IREE_I48_BUG = "IREE 3.13 saturates RESCALE(scale32=false, shift > 15) of an i48 CONV2D result with a negative bias"
IREE_TCONV_BUG = ("IREE 3.13 cannot compile an i16xi8 TRANSPOSE_CONV2D with stride 2: its own decomposition makes an "
                  "i48 tosa.reshape that its TOSA validation then rejects")
IREE_RESIZE_BUG = ("IREE 3.13 cannot compile a BILINEAR RESIZE i16 -> i48 of a 1x1 image (\'arith.muli\' op "
                   "requires the same type for all operands)")


def _assert_agrees(res: dict) -> None:
    for r in res["rows"]:
        assert r["ok"], f"{res['name']}: {r}"


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_samples(path: Path) -> None:
    _assert_agrees(check(path.read_bytes(), path.stem))


def _zoo_case(key: str) -> tuple[str, bytes]:
    from models.zoo import build_tflite, cache_path

    cases = {k: (m, v) for k, m, v in zoo_cases(key)}
    mdef, variant = cases[key]
    if not cache_path(mdef, variant).exists():
        pytest.importorskip("tensorflow", reason="tensorflow is not installed (needed to build the zoo model)")
    return key, build_tflite(mdef, variant).data


@pytest.mark.parametrize("key", SUBSET)
def test_zoo_subset(key: str) -> None:
    name, data = _zoo_case(key)
    _assert_agrees(check(data, name))


@pytest.mark.slow
def test_zoo_int16x8_divergence_is_the_iree_bug() -> None:
    """resnet8/int16x8 disagrees, and the first value that differs is a 16-bit-multiplier RESCALE of an i48
    CONV2D result (the minimal case: test_i48_rescale_iree_bug)."""
    name, data = _zoo_case("resnet8/int16x8")
    res = check(data, name)
    assert not res["ok"] and is_i48_rescale(res["first_divergence"])


@pytest.mark.slow
@pytest.mark.parametrize("key", [k for k, _, _ in zoo_cases()])
def test_zoo_sweep(key: str) -> None:
    try:
        name, data = _zoo_case(key)
        res = check(data, name)
    except iree.IreeError as e:
        ops = tf2tosa.convert(data).graph.op_counts()
        if "'tosa.reshape' op illegal" in str(e) and "tosa.TRANSPOSE_CONV2D" in ops:
            pytest.xfail(IREE_TCONV_BUG)
        if "'arith.muli' op requires the same type" in str(e) and "tosa.RESIZE" in ops:
            pytest.xfail(IREE_RESIZE_BUG)
        raise
    except Exception as e:  # the zoo's build refusals and the converter's are other tests' business
        if type(e).__name__ in ("TFLiteRefused", "ModelLoadError", "UnsupportedOpsError"):
            pytest.skip(f"{key} does not convert: {type(e).__name__}")
        raise
    if not res["ok"] and is_i48_rescale(res["first_divergence"]):
        pytest.xfail(IREE_I48_BUG)
    _assert_agrees(res)


# ---------------------------------------------------------------------------------------- the known IREE bug
def _conv_rescale(bias: int, multiplier: int, shift: int) -> Graph:
    """x:i16 -> CONV2D (1x1 weight 1, i48 bias, acc INT48) -> RESCALE (16-bit multiplier) -> i16."""
    T = TensorType
    g = Graph()
    x = g.add_input("x", T((1, 1, 4, 1), DType.INT16))
    w = g.add_const(np.ones((1, 1, 1, 1), np.int8), name="w")
    b = g.add_const(np.array([bias], np.int64), DType.INT48, name="b")
    zi, zw = g.add_const(np.zeros(1, np.int16), name="zi"), g.add_const(np.zeros(1, np.int8), name="zw")
    c = g.add_op("tosa.CONV2D", [x, w, b, zi, zw], [T((1, 1, 4, 1), DType.INT48)],
                 {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT48",
                  "local_bound": False}).result
    m, s = g.add_const(np.array([multiplier], np.int16), name="m"), g.add_const(np.array([shift], np.int8), name="s")
    iz = g.add_const(np.zeros(1, np.int64), DType.INT48, name="iz")
    oz = g.add_const(np.zeros(1, np.int16), name="oz")
    g.outputs = [g.add_op("tosa.RESCALE", [c, m, s, iz, oz], [T((1, 1, 4, 1), DType.INT16)],
                          {"scale32": False, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
                           "input_unsigned": False, "output_unsigned": False}).result]
    return g


X16 = np.array([-1000, 0, 1000, 32767], np.int16).reshape(1, 1, 4, 1)


def _spec_rescale(bias: int, multiplier: int, shift: int) -> np.ndarray:
    """RESCALE from the spec text (apply_scale_16, SINGLE_ROUND): (v * m + 2^(shift-1)) >> shift, saturated."""
    v = X16.astype(np.int64) + bias
    return np.clip((v * multiplier + (1 << (shift - 1))) >> shift, -32768, 32767).astype(np.int16)


@pytest.mark.parametrize("bias,shift", [(1, 24), (-1, 15)])
def test_i48_rescale_where_iree_is_right(bias: int, shift: int) -> None:
    g = _conv_rescale(bias, 16780, shift)
    expect = _spec_rescale(bias, 16780, shift)
    assert np.array_equal(run(g, {"x": X16})[g.outputs[0].name], expect)
    assert np.array_equal(iree.run(g, {"x": X16}, use_cache=False)[g.outputs[0].name], expect)


@pytest.mark.xfail(strict=True, reason=IREE_I48_BUG + " (IREE gives -32768 everywhere; ours matches the spec)")
def test_i48_rescale_iree_bug() -> None:
    g = _conv_rescale(-1, 16780, 24)
    expect = _spec_rescale(-1, 16780, 24)
    assert np.array_equal(run(g, {"x": X16})[g.outputs[0].name], expect)  # the executor is right
    assert np.array_equal(iree.run(g, {"x": X16}, use_cache=False)[g.outputs[0].name], expect)


def _shape(g: Graph, vals: list[int], name: str) -> Any:
    return g.add_const(np.array(vals, np.int64), DType.SHAPE, name=name, op_name="tosa.CONST_SHAPE")


def _rescale16(g: Graph, v: Any, shift: int) -> Any:
    m, s = g.add_const(np.array([16384], np.int16), name="m"), g.add_const(np.array([shift], np.int8), name="s")
    iz, oz = g.add_const(np.zeros(1, np.int64), DType.INT48, name="iz"), g.add_const(np.zeros(1, np.int16), name="oz")
    return g.add_op("tosa.RESCALE", [v, m, s, iz, oz], [v.type.with_dtype(DType.INT16)],
                    {"scale32": False, "rounding_mode": "SINGLE_ROUND", "per_channel": False, "input_unsigned": False,
                     "output_unsigned": False}).result


def _tconv16(stride: int) -> Graph:
    g = Graph()
    x = g.add_input("x", TensorType((1, 2, 2, 1), DType.INT16))
    w = g.add_const(np.ones((1, 2, 2, 1), np.int8), name="w")
    b = g.add_const(np.zeros(1, np.int64), DType.INT48, name="b")
    zi, zw = g.add_const(np.zeros(1, np.int16), name="zi"), g.add_const(np.zeros(1, np.int8), name="zw")
    o = stride + 2
    y = g.add_op("tosa.TRANSPOSE_CONV2D", [x, w, b, zi, zw], [TensorType((1, o, o, 1), DType.INT48)],
                 {"out_pad": [0, 0, 0, 0], "stride": [stride, stride], "acc_type": "INT48",
                  "local_bound": False}).result
    g.outputs = [_rescale16(g, y, 14)]
    return g


def _resize16() -> Graph:
    g = Graph()
    x = g.add_input("x", TensorType((1, 1, 1, 1), DType.INT16))
    y = g.add_op("tosa.RESIZE", [x, _shape(g, [1024, 128, 1024, 128], "sc"), _shape(g, [-448, -448], "off"),
                                 _shape(g, [448, 448], "bo")], [TensorType((1, 8, 8, 1), DType.INT48)],
                 {"mode": "BILINEAR"}).result
    g.outputs = [_rescale16(g, y, 16)]
    return g


def test_i16_transpose_conv_stride1_compiles() -> None:
    g = _tconv16(1)
    x = (np.arange(4, dtype=np.int16) * 1000).reshape(1, 2, 2, 1)
    name = g.outputs[0].name
    assert np.array_equal(iree.run(g, {"x": x}, use_cache=False)[name], run(g, {"x": x})[name])


@pytest.mark.xfail(strict=True, raises=iree.IreeError, reason=IREE_TCONV_BUG)
def test_i16_transpose_conv_stride2_iree_bug() -> None:
    g = _tconv16(2)
    x = (np.arange(4, dtype=np.int16) * 1000).reshape(1, 2, 2, 1)
    ours = run(g, {"x": x})[g.outputs[0].name]  # a valid graph: the executor runs it
    assert np.array_equal(iree.run(g, {"x": x}, use_cache=False)[g.outputs[0].name], ours)


@pytest.mark.xfail(strict=True, raises=iree.IreeError, reason=IREE_RESIZE_BUG)
def test_i16_bilinear_resize_iree_bug() -> None:
    g = _resize16()
    x = np.full((1, 1, 1, 1), 1000, np.int16)
    ours = run(g, {"x": x})[g.outputs[0].name]
    assert np.array_equal(iree.run(g, {"x": x}, use_cache=False)[g.outputs[0].name], ours)


# ---------------------------------------------------------------------------------------- syntax and cache
def _iree_opt_generic(text: str) -> str:
    from iree.compiler.tools.binaries import find_tool

    proc = subprocess.run([find_tool("iree-opt"), "--mlir-print-op-generic", "-"], input=text, text=True,
                          capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_both_syntaxes_are_one_program_to_iree_and_generic_parses_in_tosa_opt() -> None:
    from tests.test_serializer import attribute_zoo

    g = attribute_zoo()
    generic, upstream = to_mlir(g), to_mlir(g, syntax="upstream")
    assert '"tosa.clamp"(' in generic and "nan_mode<IGNORE>" in upstream
    assert _iree_opt_generic(generic) == _iree_opt_generic(upstream)
    if tosa_tools.available():
        assert tosa_mlir.canonical_mlir(generic)
        ok, msg = tosa_tools.validate_mlir(generic, ["PRO-INT", "PRO-FP"], ["EXT-FFT"], strict=False)
        assert ok, msg
        with pytest.raises(tosa_tools.ToolError):  # tosa-opt 2026.8.0 predates the keyword syntax
            tosa_mlir.canonical_mlir(upstream)


def test_compiled_module_is_cached_by_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(iree.CACHE_ENV, str(tmp_path))
    m = tf2tosa.convert(str(SAMPLES[0]))
    text = m.to_mlir()
    vmfb = iree.compile_mlir(text)
    (entry,) = tmp_path.glob("*.vmfb")
    assert entry.name == f"{iree.cache_key(text)}.vmfb" and entry.read_bytes() == vmfb
    entry.write_bytes(b"marker")  # a second compile of the same text reads the cache
    assert iree.compile_mlir(text) == b"marker"


def test_bad_mlir_is_one_error() -> None:
    with pytest.raises(iree.IreeError, match="m.mlir: IREE could not compile"):
        iree.compile_mlir("module { func.func @main() { \"tosa.nope\"() : () -> () return } }", name="m.mlir",
                          use_cache=False)


# ---------------------------------------------------------------------------------------- the command line
def test_cli_run_and_verify_with_the_iree_backend(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`run --backend iree` gives IREE's outputs (equal to the executor's on this int8 model); `verify --backend
    iree` reports IREE's agreement with the executor on the first input set (JSON checked against its schema)."""
    pytest.importorskip("jsonschema")
    from test_cli_json import F32, INT8, call

    tosa = tmp_path / "m.tosa"
    assert call(capsys, "convert", INT8, "-o", tosa, "--mlir", tmp_path / "m.mlir", "--json")[0] == 0
    code, obj = call(capsys, "run", tosa, "--backend", "iree", "--json")
    assert code == 0 and obj["backend"] == "iree"
    _, ours = call(capsys, "run", tosa, "--json")
    assert [(o["min"], o["max"]) for o in obj["outputs"]] == [(o["min"], o["max"]) for o in ours["outputs"]]
    code, obj = call(capsys, "run", tosa, "--backend", "iree", "--profile-ops", "--json")
    assert code == 1 and "--profile-ops" in obj["error"]["message"]
    if __import__("importlib.util").util.find_spec("ai_edge_litert") is None:
        pytest.skip("LiteRT is not installed (verify needs it)")
    code, obj = call(capsys, "verify", F32, "--num", "1", "--backend", "iree", "--json")
    assert code == 0 and obj["backend"]["agree"] and obj["backend"]["outputs"][0]["max_abs_err"] is not None
    code, obj = call(capsys, "verify", F32, "--num", "1", "--json")
    assert obj["backend"] is None


def test_cli_unknown_backend_and_syntax_are_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from test_cli_json import INT8

    from tf2tosa.cli import main

    for argv in (["run", str(INT8), "--backend", "tpu"],
                 ["convert", str(INT8), "-o", str(tmp_path / "m.tosa"), "--mlir-syntax", "pretty"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    assert not list(tmp_path.iterdir())


def test_missing_iree_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                  tmp_path: Path) -> None:
    from tf2tosa.cli import main

    tf2tosa.convert(str(SAMPLES[0])).save(tmp_path / "m.tosa")
    monkeypatch.setattr(iree, "available", lambda: False)
    with pytest.raises(SystemExit) as exc:
        main(["run", str(tmp_path / "m.tosa"), "--backend", "iree"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 1 and len(err) == 1 and "pip install 'tf2tosa[iree]'" in err[0]
