"""Specialisation of models with unknown dimensions (issue 13, item 1): every unknown dimension is fixed from
``--input-shape``, ``--dim SYMBOL=VALUE`` or a stated default, the shape subgraphs fold, ``convert`` reports what was
fixed, a default that makes the model invalid is explained in one line, and bad shapes are one InputError each.

The oracle is LiteRT resized to each size (``resize_tensor_input`` + ``allocate_tensors``, in
:mod:`tf2tosa.verify.litert`): float outputs within the suite's derived bound (:func:`tests.e2e.fp32_bound`) and
also within 1e-5 x max|ref|; int8 models with 0 mismatches against the BUILTIN_REF kernels (``shape_ops`` int8:
against the default kernels, BUILTIN_REF has no registration for one of its int8 ops).  Every ``.tosa`` is
validated and run in the Arm reference model by the session hook (tests/tosa_hook.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("ai_edge_litert")

import tf2tosa  # noqa: E402
from tests.e2e import check_tflite  # noqa: E402
from tests.modelgen_dyn import model  # noqa: E402
from tf2tosa.errors import InputError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

#: three sizes of the unknown dimensions of each model (its input is named "x")
SIZES: dict[str, list[tuple[int, ...]]] = {
    "cnn": [(1, 16, 16, 3), (4, 16, 16, 3), (16, 16, 16, 3)],  # dynamic batch
    "audio": [(1, 400), (2, 1000), (3, 257)],  # [-1, -1] waveform
    "transformer": [(1, 3, 16), (1, 10, 16), (1, 33, 16)],  # dynamic sequence length
    "shape_reshape": [(1, 6, 4), (2, 10, 4), (5, 2, 4)],  # RESHAPE targets from SHAPE/STRIDED_SLICE/PACK
    "shape_ops": [(1, 8), (2, 13), (3, 30)],  # RANGE/WHERE/SLICE/FILL/BROADCAST_TO/TILE/PAD fed by shapes
}
CASES = [(name, quant, shape) for name, shapes in SIZES.items() for quant in (None, "int8") for shape in shapes]


@pytest.mark.parametrize("name,quant,shape", CASES,
                         ids=[f"{n}-{q or 'f32'}-{'x'.join(map(str, s))}" for n, q, s in CASES])
def test_specialised_matches_litert(name: str, quant: str | None, shape: tuple[int, ...]) -> None:
    ref_kernels = quant is not None and name != "shape_ops"
    res = check_tflite(f"dynamic/{name}{'_' + quant if quant else ''}/{'x'.join(map(str, shape))}",
                       model(name, quant), input_shapes={"x": shape}, reference_kernels=ref_kernels)
    if quant is None:
        assert res.float_elements > 0 and res.litert_rel <= 1e-5, res
    else:
        assert res.int_elements > 0 and res.litert_mismatches == 0, res


def _shape_ops_left(m: tf2tosa.TosaModel) -> set[str]:
    """Ops (other than constants) with a non-float result: what is left of the shape computations."""
    return {op.opcode for op in m.graph.ops.values() if op.opcode not in ("CONST", "CONST_SHAPE")
            and not all(r.dtype.is_float for r in op.results)}


def test_shape_subgraphs_fold() -> None:
    """After specialisation no shape computation is left (these models compute only float data): SHAPE,
    STRIDED_SLICE, PACK, FLOOR_DIV … on shapes, and RANGE/WHERE/SLICE/FILL/BROADCAST_TO/TILE/PAD fed by them."""
    m = tf2tosa.convert(model("shape_reshape"), input_shapes={"x": (2, 10, 4)})
    assert not _shape_ops_left(m), m.graph.op_counts()
    assert m.graph.op_counts()["tosa.RESHAPE"] >= 2 and "tosa.TANH" in m.graph.op_counts()
    m = tf2tosa.convert(model("shape_ops"), dims={"batch": 2, "d1": 13})
    assert not _shape_ops_left(m), m.graph.op_counts()
    # without folding the shape-fed ops have no constant operands, and are refused
    with pytest.raises(tf2tosa.ConversionError) as e:
        tf2tosa.convert(model("shape_ops"), dims={"batch": 2, "d1": 13}, fold=False)
    for name in ("tfl.range", "tfl.fill", "tfl.broadcast_to", "tfl.slice"):
        assert name in str(e.value), str(e.value)


def test_dims_and_report() -> None:
    """``dims`` fixes every dimension named by the symbol; ``fixed_dims`` says what came from where."""
    m = tf2tosa.convert(model("audio"), input_shapes=None, dims={"batch": 2, "d1": 300})
    assert list(m.graph.inputs[0].shape) == [2, 300]
    assert m.graph.record.fixed_dims == [{"input": "x", "shape": [2, 300], "dims": [
        {"dim": 0, "symbol": "batch", "value": 2, "from": "dim"},
        {"dim": 1, "symbol": "d1", "value": 300, "from": "dim"}]}]
    m = tf2tosa.convert(model("cnn"))
    assert m.graph.record.fixed_dims[0]["dims"] == [{"dim": 0, "symbol": "batch", "value": 1, "from": "default"}]
    assert "input 'x': batch dimension unset, using 1 (set it with --input-shape)" in m.graph.record.warnings
    m = tf2tosa.convert(model("transformer"), input_shapes={"x": (1, 7, 16)})
    assert m.graph.record.fixed_dims[0]["dims"] == [{"dim": 1, "symbol": "d1", "value": 7, "from": "input-shape"}]


def test_default_that_breaks_the_model_is_explained() -> None:
    """The [-1, -1] front end with its length defaulted to 1 (shorter than one 64-sample frame): one InputError
    naming the input, the dimension and the flags to pass."""
    with pytest.raises(InputError) as e:
        tf2tosa.convert(model("audio"))
    msg = str(e.value)
    assert "\n" not in msg
    assert "input 'x' dimension 1 (d1) was not given and defaulted to 1" in msg, msg
    assert "--input-shape x=1,N" in msg and "--dim d1=N" in msg, msg
    # the same size given explicitly is the user's choice: the underlying error, not the hint about defaults
    with pytest.raises(tf2tosa.ConversionError) as e2:
        tf2tosa.convert(model("audio"), input_shapes={"x": (1, 1)})
    assert "defaulted" not in str(e2.value)


@pytest.mark.parametrize("kwargs,needle", [
    ({"input_shapes": {"x": (1, 400, 1)}}, "rank 2"),  # wrong rank
    ({"input_shapes": {"x": (1, 0)}}, "size 0 at dimension 1"),  # zero size
    ({"input_shapes": {"x": (-1, 400)}}, "size -1 at dimension 0"),  # negative size
    ({"dims": {"d1": 0}}, "at least 1"),
    ({"dims": {"batch": 2}, "input_shapes": {"x": (3, 400)}}, "symbol 'batch' bound to two values"),
    ({"dims": {"length": 5}}, "no unknown dimension named 'length' (symbols: batch, d1)"),
])
def test_bad_shapes_are_one_input_error(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(InputError) as e:
        tf2tosa.convert(model("audio"), **kwargs)  # type: ignore[arg-type]
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tf2tosa", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_cli_error_case_and_bad_input(tmp_path: Path) -> None:
    src = tmp_path / "audio.tflite"
    src.write_bytes(model("audio"))
    out = tmp_path / "o.tosa"
    proc = _cli("convert", src, "-o", out)
    line = _one_error_line(proc)
    assert "input 'x' dimension 1 (d1) was not given and defaulted to 1" in line and "--dim d1=N" in line, line
    assert proc.stderr.strip().splitlines()[-1] == line and str(src) in line  # the run ends in that one line
    for args, needle in [(("--input-shape", "x=400"), "rank 2"), (("--input-shape", "x=1,0"), "size 0"),
                         (("--input-shape", "x=1,-5"), "size -5"),
                         (("--dim", "batch=2", "--dim", "batch=3"), "symbol 'batch' bound to two values"),
                         (("--dim", "batch=2", "--input-shape", "x=3,400"), "symbol 'batch' bound to two values"),
                         (("--dim", "d1"), "bad --dim")]:
        for mode in ((), ("--dynamic",)):  # the same one line for convert and convert --dynamic
            line = _one_error_line(_cli("convert", src, "-o", out, *mode, *args))
            assert needle in line and str(src) in line, (mode, args, line)
    assert not out.exists()
    line = _one_error_line(_cli("convert", src, "-o", out, "--dynamic", "--input-shape", "x=2,480"))
    assert "--dynamic: the model has no unknown dimension left symbolic" in line, line  # valid sizes, nothing open
    ok = _cli("convert", src, "-o", out, "--dim", "d1=480", "--input-shape", "x=2,480")
    assert ok.returncode == 0, ok.stderr
    assert "input 'x': shape [2, 480] (batch=2 from --input-shape, d1=480 from --input-shape)" in ok.stdout
    cnn = tmp_path / "cnn.tflite"
    cnn.write_bytes(model("cnn"))
    ok = _cli("convert", cnn, "-o", out, "--dim", "batch=4")
    assert ok.returncode == 0 and "input 'x': shape [4, 16, 16, 3] (batch=4 from --dim)" in ok.stdout, ok
    insp = _cli("inspect", cnn)
    assert insp.returncode == 0, insp.stderr
    assert "dimension symbols" in insp.stdout and "x: dim 0 batch=1 (default)" in insp.stdout, insp.stdout
