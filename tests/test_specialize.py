"""Issue 13 items 4-5: symbolic TOSA 1.1-draft programs read back (``.tosa`` and ``.mlir``), run by the executor at
any size, and ``tf2tosa specialize`` folding them into static TOSA 1.0 programs.

Acceptance (c): for each ``convert --dynamic`` file (its ``.tosa`` and its ``.mlir``), ``specialize`` at each size
gives a program that ``tosa-opt`` validates strictly as TOSA 1.0 (level 8K, exactly the declared profiles and
extensions, which are the static conversion's) and that the Arm reference model runs bit-identically to the default
(static) conversion at that size; integer outputs are also bit-identical to our executor's run of the symbolic
program read back, float outputs within 1e-5 x max|ref| of it (our executor and the reference model accumulate
in different orders; ``tests/tosa_hook.py`` bounds that gap for every file).  New ``--dynamic`` models are added by
listing them in :data:`MODELS`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf2tosa
from tf2tosa.executor import run_checked
from tf2tosa.ir.graph import Graph
from tf2tosa.ir.types import DType as D
from tf2tosa.ir.types import TensorType as T
from tf2tosa.serializer import from_bytes, to_bytes
from tf2tosa.tosa.optable import DRAFT_VERSION
from tf2tosa.verify import tosa_tools

needs_tools = pytest.mark.skipif(not tosa_tools.available(), reason="tosa-tools environment not available")

#: the acceptance models (issue 13), every dynamic dimension kept symbolic: model -> the input shapes (of input
#: ``x``) to specialize at; each in float32 and int8 (:data:`MODELS`)
SHAPES: dict[str, list[tuple[int, ...]]] = {
    "cnn": [(1, 16, 16, 3), (4, 16, 16, 3), (16, 16, 16, 3)],  # batch
    "audio": [(1, 400), (3, 1000), (2, 4000)],  # [-1, -1]: batch and length
    "transformer": [(1, 5, 16), (1, 12, 16), (1, 33, 16)],  # the sequence length
    "shape_reshape": [(1, 6, 4), (4, 10, 4), (16, 2, 4)],  # RESHAPE targets from SHAPE/STRIDED_SLICE/PACK
}
#: case -> (modelgen_dyn model, quantisation, --dim values fixed at conversion, the input shapes (by input name) to
#: specialize at).  Add a model here once ``convert --dynamic`` supports it.
MODELS: dict[str, tuple[str, str | None, dict[str, int], list[dict[str, tuple[int, ...]]]]] = {
    f"{name}-{quant or 'f32'}": (name, quant, {}, [{"x": s} for s in sizes])
    for name, sizes in SHAPES.items() for quant in (None, "int8")}


def _data(shape: tuple[int, ...], dtype: D, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype is D.INT8:
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.uniform(-1.0, 1.0, shape).astype(np.float32)


def _labels(g: Graph) -> list[tuple[Any, ...]]:
    """Every value's symbolic shape, inputs first, then each op's results in program order."""
    out: list[tuple[Any, ...]] = [tuple(v.type.shape) for v in g.inputs]
    for op in g.topological_order():
        out += [(op.opcode, tuple(r.type.shape)) for r in op.results]
    return out


#: case -> the in-memory --dynamic program's guards, hints and value labels (filled by :func:`dynamic_files`)
dyn_meta: dict[str, dict[str, Any]] = {}


@pytest.fixture(scope="module")
def dynamic_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, bytes]]:
    """Each case's --dynamic .tosa and .mlir (written together) and its source .tflite."""
    pytest.importorskip("tensorflow")
    from tests.modelgen_dyn import model
    from tf2tosa.api import convert_dynamic

    out = {}
    root = tmp_path_factory.mktemp("dynamic")
    for case, (name, quant, fixed, _) in MODELS.items():
        data = model(name, quant)
        dyn = convert_dynamic(data, dims=fixed)
        fb, text = root / f"{case}.tosa", root / f"{case}.mlir"
        dyn.save(fb, mlir=text)
        out[case] = (fb, text, data)
        dyn_meta[case] = {"dim_guards": dyn.graph.dims.guards, "dim_hints": dyn.graph.dims.hints,
                          "labels": _labels(dyn.graph)}
    return out


@needs_tools
@pytest.mark.parametrize("kind", ["tosa", "mlir"])
@pytest.mark.parametrize("case", list(MODELS))
def test_specialize_each_dynamic_file_at_each_size(case: str, kind: str,
                                                   dynamic_files: dict[str, tuple[Path, Path, bytes]]) -> None:
    _, quant, _, sizes = MODELS[case]
    fb, text, source = dynamic_files[case]
    sym = tf2tosa.load(fb if kind == "tosa" else text)
    g = sym.graph
    assert g.record.specification_version == DRAFT_VERSION and sym.extensions[-2:] != []
    assert {"EXT-SHAPE", "EXT-DYNAMIC"} <= set(sym.extensions)
    assert any(isinstance(d, str) for v in g.inputs for d in v.shape)
    for k, shapes in enumerate(sizes):
        feed = {v.name: _data(shapes[v.name], v.dtype, seed=k) for v in g.inputs}
        ours = run_checked(g, feed, level="NONE")  # the symbolic program read back, run at this size
        assert ours.status == "VALID", ours.message
        static = tf2tosa.specialize(sym, input_shapes=shapes)
        assert static.graph.record.specification_version is None
        assert not any(op.opcode in ("DIM", "CONCAT_SHAPE", "MUL_SHAPE", "ASSERT_EQUAL_SHAPE")
                       for op in static.graph.ops.values())
        data = static.to_bytes()
        default = tf2tosa.convert(source, input_shapes=shapes)
        assert (static.profiles, static.extensions) == (default.profiles, default.extensions)
        ok, msg = tosa_tools.validate(data, static.profiles, static.extensions, level="8k")  # strict 1.0
        assert ok, msg
        ref = tosa_tools.run_reference(data, feed)
        ref_default = tosa_tools.run_reference(default.to_bytes(), feed)
        # our executor: the specialized program gives exactly what the symbolic one gave
        mine = run_checked(static.graph, feed)
        assert mine.status == "VALID", mine.message
        # and the symbolic program gives exactly what the default (static) conversion at this size gives
        theirs = run_checked(default.graph, feed, level="NONE")
        assert [np.asarray(a).tolist() for a in ours.outputs.values()] == [
            np.asarray(a).tolist() for a in theirs.outputs.values()], (case, kind, shapes)
        # the conversion's size guards hold at these sizes (the .mlir carries them; a .tosa cannot)
        assert static.graph.record.warnings == [], static.graph.record.warnings
        if kind == "mlir":
            assert g.dims.guards == dyn_meta[case]["dim_guards"]
            assert g.dims.hints == dyn_meta[case]["dim_hints"]
        else:
            assert g.dims.guards is None
        for name, a in ours.outputs.items():
            r = np.asarray(ref[name]).reshape(a.shape)
            assert np.array_equal(r, np.asarray(ref_default[name]).reshape(a.shape)), (case, kind, shapes)
            assert np.array_equal(mine.outputs[name], a), (case, kind, shapes)
            if quant is None:
                assert float(np.max(np.abs(r.astype(np.float64) - a))) <= 1e-5 * float(np.max(np.abs(r)))
            else:
                assert int(np.count_nonzero(r != a)) == 0, (case, kind, shapes)


def test_read_back_names_the_dimensions(dynamic_files: dict[str, tuple[Path, Path, bytes]]) -> None:
    g = tf2tosa.load(dynamic_files["audio-f32"][0]).graph
    assert g.inputs[0].shape == ("batch", "d1") and g.outputs[0].shape == ("batch", "max((d1 - 64) // 16 + 1, 0)", 8)
    assert g.dims.symbols == {"batch": {"input": "x", "dim": 0}, "d1": {"input": "x", "dim": 1}}
    assert "[batch]" in g.dims.shape_values.values()


@pytest.mark.parametrize("kind", ["tosa", "mlir"])
@pytest.mark.parametrize("case", list(MODELS))
def test_read_back_labels_values_as_the_conversion_did(case: str, kind: str,
                                                       dynamic_files: dict[str, tuple[Path, Path, bytes]]) -> None:
    """One expression type (tf2tosa.ir.symdim): a program read back from its file labels every value exactly as
    the in-memory ``--dynamic`` program did (same symbols, same canonical text)."""
    if kind == "mlir" and not tosa_tools.available():
        pytest.skip("reading MLIR needs tosa-opt")
    fb, text, _ = dynamic_files[case]
    want = dyn_meta[case]["labels"]
    got = _labels(tf2tosa.load(fb if kind == "tosa" else text).graph)
    assert len(got) == len(want) and [(i, g) for i, (g, w) in enumerate(zip(got, want)) if g != w] == []
    results = [lab[1] for lab in want if len(lab) == 2 and isinstance(lab[1], tuple)]  # (opcode, shape) entries
    assert any(isinstance(d, str) for shape in results for d in shape)  # the comparison covers symbolic labels


# --------------------------------------------------------------------------------- hand-built symbolic programs
def _guarded() -> Graph:
    """a: [batch, 6] → RESHAPE to [batch // 2, 12] (defined for an even batch only: RESHAPE's element-count
    ERROR_IF is the guard); b: [2, d1] is added to a's first row after asserting d1 = 6 (ASSERT_EQUAL_SHAPE)."""
    g = Graph()
    a = g.add_input("a", T(("batch", 6), D.FP32))
    b = g.add_input("b", T((2, "d1"), D.FP32))
    s1 = T((1,), D.SHAPE)
    n = g.add_op("tosa.DIM", [a], [s1], {"axis": 0}, ["n"]).result
    two = g.add_const(np.array([2], np.int64), D.SHAPE, op_name="tosa.CONST_SHAPE")
    half = g.add_op("tosa.DIV_FLOOR_SHAPE", [n, two], [s1], {}, ["half"]).result
    twelve = g.add_const(np.array([12], np.int64), D.SHAPE, op_name="tosa.CONST_SHAPE")
    target = g.add_op("tosa.CONCAT_SHAPE", [half, twelve], [T((2,), D.SHAPE)], {}, ["target"]).result
    r = g.add_op("tosa.RESHAPE", [a, target], [T(("?", 12), D.FP32)], {}, ["r"]).result
    d1 = g.add_op("tosa.DIM", [b], [s1], {"axis": 1}, ["d1_dim"]).result
    six = g.add_const(np.array([6], np.int64), D.SHAPE, op_name="tosa.CONST_SHAPE")
    g.add_op("tosa.ASSERT_EQUAL_SHAPE", [d1, six], [], {"allow_broadcast": False})
    y = g.add_op("tosa.ADD", [b, b], [T((2, "d1"), D.FP32)], {}, ["y"]).result
    g.outputs = [r, y]
    g.record.specification_version = DRAFT_VERSION
    return g


def _feed(batch: int, d1: int) -> dict[str, np.ndarray]:
    return {"a": _data((batch, 6), D.FP32, 1), "b": _data((2, d1), D.FP32, 2)}


def test_executor_error_if_on_assertion_and_guard() -> None:
    g = from_bytes(to_bytes(_guarded()))  # as a file gives it: dimensions named again by the reader
    assert g.record.specification_version == DRAFT_VERSION
    assert g.inputs[0].shape == ("batch", 6) and g.inputs[1].shape == (2, "d1")
    assert [r.shape for r in g.outputs] == [("batch // 2", 12), (2, "d1")]
    ok = run_checked(g, _feed(4, 6), level="NONE")
    assert ok.status == "VALID" and ok.outputs["r"].shape == (2, 12)
    assert np.array_equal(ok.outputs["r"], _feed(4, 6)["a"].reshape(2, 12))
    bad = run_checked(g, _feed(4, 5), level="NONE")
    assert bad.status == "ERROR" and "ASSERT_EQUAL_SHAPE" in bad.message and "[5]" in bad.message
    odd = run_checked(g, _feed(3, 6), level="NONE")  # 18 elements cannot be [1, 12]
    assert odd.status == "ERROR" and "RESHAPE" in (odd.op or "") + odd.message, odd


def test_specialize_checks_assertions_and_guards() -> None:
    data = to_bytes(_guarded())
    s = tf2tosa.specialize(data, dims={"batch": 4, "d1": 6})
    assert [v.shape for v in s.graph.outputs] == [(2, 12), (2, 6)]
    assert s.graph.record.specialized == {"shape_ops_folded": 4, "assertions_checked": 1}
    assert not any(op.opcode in ("DIM", "ASSERT_EQUAL_SHAPE") for op in s.graph.ops.values())
    out = s.run(_feed(4, 6))
    assert np.array_equal(out["r"], _feed(4, 6)["a"].reshape(2, 12))
    with pytest.raises(tf2tosa.InputError, match=r"at batch=4, d1=5, ASSERT_EQUAL_SHAPE: \[5\] is not equal to "
                                                 r"\[6\] .*\(operands 'd1_dim' and '.*'\)") as e:
        tf2tosa.specialize(data, dims={"batch": 4, "d1": 5})
    assert e.value.op and "ASSERT_EQUAL_SHAPE" in e.value.op
    with pytest.raises(tf2tosa.InputError, match=r"at batch=3, d1=6, the program is invalid: RESHAPE: cannot "
                                                 r"reshape \[3, 6\]") as e:
        tf2tosa.specialize(data, dims={"batch": 3, "d1": 6})
    assert e.value.op and "RESHAPE" in e.value.op


@pytest.mark.parametrize("shapes, dims, match", [
    ({"a": (4, 6, 1)}, {"d1": 6}, r"input 'a' has rank 2 .* rank 3"),
    ({"a": (0, 6)}, {"d1": 6}, r"size 0 at dimension 0"),
    ({"a": (-2, 6)}, {"d1": 6}, r"size -2 at dimension 0"),
    ({}, {"batch": 0, "d1": 6}, r"--dim batch=0: a dimension size must be at least 1"),
    ({"a": (4, 6)}, {"batch": 2, "d1": 6}, r"symbol 'batch' bound to two values: --dim batch=2 and --input-shape"),
    ({"a": (4, 7)}, {"d1": 6}, r"dimension 1 is fixed at 6"),
    ({"nope": (4, 6)}, {"d1": 6}, r"no model input named 'nope'"),
    ({}, {"batch": 4, "d7": 6}, r"no unknown dimension named 'd7'"),
    ({}, {"batch": 4}, r"input 'b' dimension 1 \(d1\) has no size: pass --input-shape b=2,N or --dim d1=N"),
])
def test_bad_sizes_are_one_input_error(shapes: dict[str, Any], dims: dict[str, int], match: str) -> None:
    with pytest.raises(tf2tosa.InputError, match=match):
        tf2tosa.specialize(to_bytes(_guarded()), input_shapes=shapes, dims=dims)


def test_a_static_program_is_refused() -> None:
    g = Graph()
    x = g.add_input("x", T((2, 3), D.FP32))
    g.outputs = [g.add_op("tosa.ABS", [x], [T((2, 3), D.FP32)], {}, ["y"]).result]
    with pytest.raises(tf2tosa.InputError, match="not a symbolic program"):
        tf2tosa.specialize(to_bytes(g))


# ----------------------------------------------------------------------------------------------------- CLI
def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tf2tosa", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@needs_tools
def test_cli_specialize_and_inspect(dynamic_files: dict[str, tuple[Path, Path, bytes]], tmp_path: Path) -> None:
    fb, text, _ = dynamic_files["cnn-int8"]
    proc = _cli("inspect", fb)
    assert proc.returncode == 0, proc.stderr
    assert "TOSA 1.1.draft" in proc.stdout and "x: [batch, 16, 16, 3] i8" in proc.stdout
    assert "batch: input 'x' dimension 0" in proc.stdout and "Identity: [batch, 5] i8" in proc.stdout
    assert "EXT-DYNAMIC, EXT-SHAPE" in proc.stdout and ": !shape<4> = [batch, 1, 1, 8]  (CONCAT_SHAPE)" in proc.stdout
    proc = _cli("run", fb, "--dim", "batch=3")  # random inputs of a symbolic program, sized by the symbol
    assert proc.returncode == 0 and "Identity: shape=[3, 5] dtype=int8" in proc.stdout, proc.stderr
    assert "--dim batch=N" in _one_error_line(_cli("run", fb))
    np.save(tmp_path / "x.npy", _data((2, 16, 16, 3), D.INT8, 0))
    proc = _cli("run", fb, "--input", f"x={tmp_path / 'x.npy'}")  # the size of the array given
    assert proc.returncode == 0 and "Identity: shape=[2, 5] dtype=int8" in proc.stdout, proc.stderr
    obj = json.loads(_cli("inspect", text, "--json").stdout)
    assert obj["format"] == "TOSA 1.1.draft" and obj["inputs"][0]["shape"] == ["batch", 16, 16, 3]
    assert obj["dim_symbols"] == {"batch": {"input": "x", "dim": 0}} and obj["tensors"]
    outs = []
    for k in range(2):
        o, m = tmp_path / f"s{k}.tosa", tmp_path / f"s{k}.mlir"
        proc = _cli("specialize", fb, "--dim", "batch=4", "-o", o, "--mlir", m)
        assert proc.returncode == 0, proc.stderr
        assert "TOSA 1.0" in proc.stdout and "input 'x': shape [4, 16, 16, 3] (batch=4 from --dim)" in proc.stdout
        outs.append((o.read_bytes(), m.read_bytes()))
    assert outs[0] == outs[1]  # same input, byte-identical output
    back = tf2tosa.load(tmp_path / "s0.tosa")
    assert back.graph.record.specification_version is None and back.graph.inputs[0].shape == (4, 16, 16, 3)
    spec = json.loads(_cli("specialize", text, "--input-shape", "x=2,16,16,3", "-o", tmp_path / "j.tosa",
                           "--json").stdout)
    assert spec["ok"] and spec["fixed_dims"][0]["dims"][0]["from"] == "input-shape" and spec["shape_ops_folded"] == 3
    jsonschema = pytest.importorskip("jsonschema")
    schemas = Path(__file__).resolve().parent.parent / "docs" / "schemas"
    jsonschema.validate(obj, json.loads((schemas / "inspect.json").read_text()))
    jsonschema.validate(spec, json.loads((schemas / "specialize.json").read_text()))


@pytest.mark.parametrize("args, match", [
    (("--input-shape", "x=4,16,16"), "has rank 4"),
    (("--input-shape", "x=0,16,16,3"), "size 0 at dimension 0"),
    (("--input-shape", "x=-1,16,16,3"), "size -1 at dimension 0"),
    (("--dim", "batch=2", "--dim", "batch=3"), "symbol 'batch' bound to two values"),
    (("--dim", "batch=2", "--input-shape", "x=3,16,16,3"), "symbol 'batch' bound to two values"),
    (("--input-shape", "y=4,16,16,3"), "no model input named 'y'"),
])
def test_cli_bad_input(args: tuple[str, ...], match: str, dynamic_files: dict[str, tuple[Path, Path, bytes]],
                       tmp_path: Path) -> None:
    out = tmp_path / "o.tosa"
    line = _one_error_line(_cli("specialize", dynamic_files["cnn-f32"][0], *args, "-o", out, "--mlir",
                                tmp_path / "o.mlir"))
    assert match in line and not out.exists() and not (tmp_path / "o.mlir").exists()


def test_cli_refuses_a_static_file(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parent.parent / "models" / "samples" / "small_cnn_f32.tflite"
    static = tmp_path / "static.tosa"
    tf2tosa.convert(src).save(static)
    line = _one_error_line(_cli("specialize", static, "--dim", "batch=2", "-o", tmp_path / "o.tosa"))
    assert "not a symbolic program" in line and str(static) in line


def test_inspect_shows_equalities_and_names(tmp_path: Path) -> None:
    path = tmp_path / "guarded.tosa"
    path.write_bytes(to_bytes(_guarded()))
    proc = _cli("inspect", path)
    assert proc.returncode == 0, proc.stderr
    assert "a: [batch, 6] fp32" in proc.stdout and "b: [2, d1] fp32" in proc.stdout
    assert "r: [batch // 2, 12] fp32" in proc.stdout and "d1: input 'b' dimension 1" in proc.stdout
    assert "[d1] == [6]  (ASSERT_EQUAL_SHAPE#" in proc.stdout
    assert "target: !shape<2> = [batch // 2, 12]  (CONCAT_SHAPE)" in proc.stdout


def test_specialized_model_verifies_against_its_source() -> None:
    """A symbolic program specialised from the converted model keeps its source: verify compares with LiteRT
    (BUILTIN_REF) resized to that batch."""
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("tensorflow")
    from tests.modelgen_dyn import model
    from tf2tosa.api import convert_dynamic

    dyn = convert_dynamic(model("cnn", "int8"))
    report = tf2tosa.specialize(dyn, dims={"batch": 4}).verify(num=2)
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


# ----------------------------------------------------------------------------------- size guards through the file
@needs_tools
def test_guards_travel_in_the_mlir_and_warn_where_they_fail(dynamic_files: dict[str, tuple[Path, Path, bytes]],
                                                             tmp_path: Path) -> None:
    """The conversion's size guards ride in the .mlir as the module attribute tf2tosa.dim_guards (tosa-opt
    validates the module with it), come back on load, and specialize / run warn naming each guard that fails at the
    bound sizes (the transformer's 'd1 != 1' at length 1) — a warning, the program still specialised and run."""
    fb, text, source = dynamic_files["transformer-f32"]
    mlir = text.read_text()
    assert 'tf2tosa.dim_guards = ["' in mlir.splitlines()[0] and '"d1" = 401 : i64' in mlir.splitlines()[0]
    sym = tf2tosa.load(text)
    ok, msg = tosa_tools.validate_mlir(mlir, sym.profiles, sym.extensions, level="none", version=DRAFT_VERSION)
    assert ok, msg  # tosa-opt 1.1.draft validation keeps accepting the module with the tf2tosa.* attributes
    assert "d1 != 1" in sym.graph.dims.guards
    assert sym.guard_warnings({"x": (1, 12, 16)}) == []
    [w] = sym.guard_warnings({"x": (1, 1, 16)})
    assert w == "size guard 'd1 != 1' does not hold at d1=1 (the conversion decided it at d1=401; the program may " \
        "still be right here)"
    static = tf2tosa.specialize(text, input_shapes={"x": (1, 1, 16)})
    assert static.graph.record.warnings == [w]
    feed = {"x": _data((1, 1, 16), D.FP32, 0)}
    default = tf2tosa.convert(source, input_shapes={"x": (1, 1, 16)})
    assert np.array_equal(list(static.run(feed).values())[0], list(default.run(feed).values())[0])
    assert tf2tosa.specialize(fb, input_shapes={"x": (1, 1, 16)}).graph.record.warnings == []  # .tosa
    # the CLI: one warning line naming the guard, exit 0, in --json's warnings
    proc = _cli("specialize", text, "--input-shape", "x=1,1,16", "-o", tmp_path / "s.tosa")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if "d1 != 1" in ln] == [f"warning: {w}"], proc.stderr
    obj = json.loads(_cli("run", text, "--input-shape", "x=1,1,16", "--json").stdout)
    assert obj["ok"] and obj["warnings"] == [w]
    assert json.loads(_cli("run", text, "--input-shape", "x=1,7,16", "--json").stdout)["warnings"] == []
    shown = _cli("inspect", text).stdout
    assert "size guards (comparisons the conversion made at d1=401" in shown and "\n  d1 != 1\n" in shown
    assert "a .tosa file cannot carry them" in _cli("inspect", fb).stdout
    info = json.loads(_cli("inspect", text, "--json").stdout)
    assert "d1 != 1" in info["dim_guards"] and info["dim_hints"] == {"d1": 401}
    assert json.loads(_cli("inspect", fb, "--json").stdout)["dim_guards"] is None


@needs_tools
@pytest.mark.parametrize("kind", ["tosa", "mlir"])
def test_cli_specialize_fully_dynamic_errors(kind: str, dynamic_files: dict[str, tuple[Path, Path, bytes]],
                                             tmp_path: Path) -> None:
    """The [-1, -1] audio front end: no sizes names the input, the dimension and the flags; bad sizes and a size
    at which the program is invalid (fewer samples than one 64-sample frame) are each one InputError line."""
    fb, text, _ = dynamic_files["audio-f32"]
    src = fb if kind == "tosa" else text
    out = tmp_path / "o.tosa"
    line = _one_error_line(_cli("specialize", src, "-o", out))
    assert "input 'x' dimension 0 (batch) has no size: pass --input-shape x=N,? or --dim batch=N" in line
    assert str(src) in line
    for args, needle in [(("--input-shape", "x=1,400,1"), "has rank 2"), (("--input-shape", "x=1,0"), "size 0"),
                         (("--input-shape", "x=-1,400"), "size -1"),
                         (("--dim", "d1=400", "--input-shape", "x=1,401"), "symbol 'd1' bound to two values"),
                         (("--dim", "d1=400", "--dim", "d1=401"), "symbol 'd1' bound to two values"),
                         (("--input-shape", "x=1,63"), "at batch=1, d1=63")]:
        line = _one_error_line(_cli("specialize", src, "-o", out, *args))
        assert needle in line and str(src) in line, (args, line)
    assert not out.exists()
    # run at a length shorter than one frame: the executor's ERROR_IF, one line naming the file and the op (after the
    # guard warnings an .mlir gives)
    proc = _cli("run", src, "--input-shape", "x=1,10")
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and len(errors) == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == errors[0] and str(src) in errors[0] and "SLICE" in errors[0]
    assert (kind == "mlir") == ("warning: size guard" in proc.stderr)
    # same input, byte-identical output: op locations read from MLIR name the file, not tosa-opt's temporary copy
    a, b = (tf2tosa.specialize(src, input_shapes={"x": (2, 400)}) for _ in range(2))
    assert a.to_bytes() == b.to_bytes() and a.to_mlir() == b.to_mlir()
    if kind == "mlir":
        assert all(op.location is None or op.location.startswith(f'loc("{src.name}":')
                   for op in a.graph.ops.values())
