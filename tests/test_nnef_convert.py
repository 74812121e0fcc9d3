"""End-to-end checks of the NNEF frontend: the three-way check, CLI/API wiring, and bad input.

* three-way (:mod:`nnef_threeway`): ``.tflite`` → NNEF with nnef-tools → TOSA with us, judged against the original
  ``.tflite`` in LiteRT (BUILTIN_REF for integer models: 0 mismatches; float ≤ 1e-5 × max|ref|), validated by
  tosa-opt and run in Arm's reference model.  The bundled samples run by default; every zoo model behind ``slow``.
* ``convert`` / ``verify`` / ``inspect`` on NNEF models, without TensorFlow.
* each bad input ends in one ConversionError line naming file, op and tensor.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nnef_convert
import nnef_threeway
import numpy as np
import pytest
from test_nnef_ops import dat, write_graph

import tf2tosa
from tf2tosa.errors import ConversionError, ModelLoadError, UnsupportedOpsError

pytest.importorskip("nnef")

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "models" / "samples"
ZOO = ROOT / ".cache" / "zoo"
requires_nnef_tools = pytest.mark.skipif(not nnef_convert.available(), reason="nnef-tools is not installed")

#: zoo models whose nnef-tools output is not the source model, with the defect (checked by hand, nnef-tools 1.0.11)
NNEF_TOOLS_DEFECTS = {
    "resnet8-float32": "drops the fused RELU of ADD",
    "resnet18_narrow-float32": "drops the fused RELU of ADD",
    "densenet_mini-float32": "drops the fused RELU of ADD",
    "tcn-float32": "drops the fused RELU of ADD",
    "conv_autoencoder-int8": "writes a 32-bit quantization (zero point -128) for the int8 input of TRANSPOSE_CONV",
    "unet-int8": "writes a 32-bit quantization (zero point -128) for the int8 input of TRANSPOSE_CONV",
}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tf2tosa", *args], capture_output=True, text=True, env=env,
                          timeout=300)


# --------------------------------------------------------------------------- three-way
@requires_nnef_tools
@pytest.mark.parametrize("sample", ["small_cnn_f32", "small_cnn_int8", "depthwise_f32", "mlp_f32", "mlp_uint8io"])
def test_three_way_samples(sample: str) -> None:
    r = nnef_threeway.check(SAMPLES / f"{sample}.tflite")
    assert r.ok, f"{r.stage}: {r.detail}"
    assert r.same_as_direct, "the NNEF route gives other outputs than the direct .tflite conversion"
    if sample.startswith("small_cnn"):
        assert r.transposes["tosa"] == 0 < r.transposes["transposes_before"]


def _zoo_models() -> list[Path]:
    return sorted(p for p in ZOO.glob("*.tflite") if "-float32-" in p.name or "-int8-" in p.name)


@pytest.mark.slow
@requires_nnef_tools
def test_three_way_zoo() -> None:
    """Every zoo model nnef-tools converts to a valid NNEF graph matches LiteRT (or, where nnef-tools' graph is
    not the model, is listed with the defect); float models that miss 1e-5 × max|ref| give outputs identical to our
    direct .tflite conversion (the NNEF route adds no error of its own)."""
    models = _zoo_models()
    if not models:
        pytest.skip("no zoo models built (tf2tosa zoo)")
    failures = []
    for m in models:
        r = nnef_threeway.check(m)
        key = m.name.rsplit("-", 1)[0]
        if r.stage in ("nnef-tools", "nnef-invalid") or key in NNEF_TOOLS_DEFECTS:
            continue
        if r.ok:
            continue
        if r.stage == "litert" and r.mismatches == 0 and r.same_as_direct and r.max_rel < 1e-4:
            continue  # fp32 accumulation order, the same through both routes
        if r.stage == "reference" and r.same_as_direct:
            continue
        failures.append(f"{m.name}: {r.stage}: {r.detail}")
    assert not failures, "\n".join(failures)


# --------------------------------------------------------------------------- CLI / API
@requires_nnef_tools
def test_cli_convert_verify_inspect(tmp_path: Path) -> None:
    src = SAMPLES / "small_cnn_int8.tflite"
    model = nnef_convert.tflite_to_nnef(src)
    out = tmp_path / "m.tosa"
    p = _cli("convert", str(model), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert out.is_file()
    p = _cli("verify", str(model), "--reference", str(src), "--num", "1")
    assert p.returncode == 0, p.stderr
    assert "LiteRT reference kernels" in p.stdout and "mismatches=0" in p.stdout
    p = _cli("verify", str(model), "--num", "1")
    assert p.returncode == 0, p.stderr
    assert "fp64" in p.stdout
    p = _cli("inspect", str(model))
    assert p.returncode == 0, p.stderr
    assert "NNEF frontend" in p.stdout and "transposes before the layout pass" in p.stdout


@requires_nnef_tools
def test_same_output_bytes_and_archive(tmp_path: Path) -> None:
    """Same input → byte-identical output; a .tgz of the model converts to the same bytes."""
    import tarfile

    model = nnef_convert.tflite_to_nnef(SAMPLES / "small_cnn_f32.tflite")
    a = tf2tosa.convert(model).to_bytes()
    assert a == tf2tosa.convert(model).to_bytes()
    tgz = tmp_path / "m.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(model, arcname="model.nnef")
    assert tf2tosa.convert(tgz).to_bytes() == a
    assert tf2tosa.convert(model / "graph.nnef").to_bytes() == a


def test_no_tensorflow_import(tmp_path: Path) -> None:
    folder = write_graph(tmp_path / "m.nnef", "out = relu(x);", {"x": ((1, 4), "scalar")}, ["out"])
    code = ("import sys, tf2tosa; tf2tosa.convert(sys.argv[1]); "
            "assert not any(m == 'tensorflow' or m.startswith('tensorflow.') for m in sys.modules), 'tf imported'")
    p = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert p.returncode == 0, p.stderr


# --------------------------------------------------------------------------- bad input
def test_syntax_error_cli(tmp_path: Path) -> None:
    folder = tmp_path / "bad.nnef"
    folder.mkdir()
    (folder / "graph.nnef").write_text("version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external(shape = [1]);\n"
                                       "    y = relu(x;\n}\n")
    p = _cli("convert", str(folder), "-o", str(tmp_path / "o.tosa"))
    assert p.returncode != 0
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "line 5, column" in lines[0] and "graph.nnef" in lines[0]
    assert not (tmp_path / "o.tosa").exists()


def _conv_graph(tmp_path: Path, w: bytes | None) -> Path:
    folder = write_graph(tmp_path / "m.nnef", "y = conv(x, w, 0.0);", {"x": ((1, 2, 4, 4), "scalar")}, ["y"])
    text = (folder / "graph.nnef").read_text().replace(
        "    y = conv", "    w = variable<scalar>(shape = [3, 2, 1, 1], label = 'w');\n    y = conv")
    (folder / "graph.nnef").write_text(text)
    if w is not None:
        (folder / "w.dat").write_bytes(w)
    return folder


@pytest.mark.parametrize("case,words", [
    ("missing", "missing tensor file"), ("short", "short"), ("shape", "differs from the graph's")])
def test_bad_tensor_files(tmp_path: Path, case: str, words: str) -> None:
    good = dat(np.ones((3, 2, 1, 1), np.float32))
    data = {"missing": None, "short": good[:-4], "shape": dat(np.ones((3, 2, 1, 2), np.float32))}[case]
    folder = _conv_graph(tmp_path, data)
    with pytest.raises(ModelLoadError) as e:
        tf2tosa.convert(folder)
    err = e.value
    assert words in str(err)
    assert err.file and err.file.endswith("w.dat") and err.tensor == "w" and err.op
    assert len(str(err).splitlines()) == 1


def test_unknown_operations_listed_at_once(tmp_path: Path) -> None:
    """Operations without a definition are all listed in one error; so are operations without a rule."""
    frag = ("fragment foo( x: tensor<scalar> ) -> ( y: tensor<scalar> );\n"
            "fragment bar( x: tensor<scalar> ) -> ( y: tensor<scalar> );")
    folder = write_graph(tmp_path / "u.nnef", "a = foo(x); b = bar(a); y = foo(b);", {"x": ((1, 4), "scalar")},
                         ["y"], fragments=frag)
    with pytest.raises(ModelLoadError) as e:
        tf2tosa.convert(folder)
    assert "bar x1" in str(e.value) and "foo x2" in str(e.value) and e.value.file and e.value.op
    folder = write_graph(tmp_path / "r.nnef",
                         "y = max_roi_pool(x, r, k, output_size = [2, 2]);"
                         " z = avg_roi_pool(x, r, k, output_size = [2, 2]);",
                         {"x": ((1, 1, 4, 4), "scalar"), "r": ((3, 4), "scalar"), "k": ((3,), "integer")}, ["y", "z"])
    with pytest.raises(UnsupportedOpsError) as u:
        tf2tosa.convert(folder)
    assert "nnef.max_roi_pool" in str(u.value) and "nnef.avg_roi_pool" in str(u.value)
    assert len(str(u.value).splitlines()) == 1


def test_quantization_tosa_cannot_express(tmp_path: Path) -> None:
    folder = write_graph(tmp_path / "q.nnef", "y = relu(x);", {"x": ((1, 4), "scalar")}, ["y"])
    (folder / "graph.quant").write_text(
        '"x": zero_point_linear_quantize(zero_point = 0, scale = 0.5, bits = 8, signed = true, symmetric = false);\n'
        '"y": zero_point_linear_quantize(zero_point = -7, scale = 0.5, bits = 32, signed = true, symmetric = false);\n')
    with pytest.raises(ConversionError) as e:
        tf2tosa.convert(folder)
    err = e.value
    assert "cannot express" in str(err) and err.tensor == "y" and err.op and str(err.file).endswith("graph.quant")
    p = _cli("convert", str(folder), "-o", str(tmp_path / "o.tosa"))
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert len([ln for ln in p.stderr.splitlines() if ln.strip()]) == 1


@requires_nnef_tools
def test_io_int(tmp_path: Path) -> None:
    """``io="int"`` reaches the NNEF frontend: a quantized NNEF model's integer edges are recorded with the scales
    and zero points of the .tflite it came from (LiteRT's own reading of that file), the program is the same, and the
    sidecar is written; a float NNEF model is refused as a float .tflite is."""
    from ai_edge_litert.interpreter import Interpreter

    src = SAMPLES / "small_cnn_int8.tflite"
    model = nnef_convert.tflite_to_nnef(src)
    plain, m = tf2tosa.convert(model), tf2tosa.convert(model, io="int")
    assert plain.io_quantization is None and m.to_bytes() == plain.to_bytes()
    it = Interpreter(str(src))
    q = m.io_quantization
    assert q is not None
    for role, details in (("inputs", it.get_input_details()), ("outputs", it.get_output_details())):
        assert [(e["dtype"], e["scale"], e["zero_point"]) for e in q[role]] == [
            ({np.int8: "i8", np.int16: "i16", np.uint8: "u8"}[d["dtype"]], *d["quantization"]) for d in details]
    m.save(tmp_path / "m.tosa")
    assert tf2tosa.load(tmp_path / "m.tosa").io_quantization == q  # read back from the sidecar
    with pytest.raises(tf2tosa.InputError, match="--io int needs a quantized model"):
        tf2tosa.convert(nnef_convert.tflite_to_nnef(SAMPLES / "small_cnn_f32.tflite"), io="int")
