"""Issue 29, item 9: the docs and the everyday output say what is true.

docs/ops.md has no description cut mid-sentence; ``convert``, ``specialize`` and ``demo`` count a program's ops in
the same words; ``-q`` keeps a verify run to one verdict line; a closed stdout (``| head -3``) ends quietly with
exit 0; the guide's ``inspect`` examples are what ``inspect`` prints; ``--help`` names NNEF; the HTML report's
worst-elements table pairs each element with its own input set's max |oracle|; the spec-bound wording says how much
of the bound an error uses; a constant oracle output is warned about.  Commands run in a child process
(tests/hostile.py).
"""

from __future__ import annotations

import inspect as pyinspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.hostile import ROOT, SAMPLES, run_cli, tree_hash

GUIDE = ROOT / "docs" / "guide.md"
OPS_MD = ROOT / "docs" / "ops.md"
#: peak RSS cap of these everyday commands (MiB): numpy, typer and, for verify, the LiteRT interpreter child's
#: parent (the interpreter runs in its own process)
RSS_CAP_MB = 600


def _cells(row: str) -> list[str]:
    """A Markdown table row's cells, split on the ``|`` that are not escaped."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


# ------------------------------------------------------------------------------------------------ docs/ops.md
def test_ops_md_rows_are_whole() -> None:
    """Every row of both tables has five cells, and each lowering cell is the rule's whole summary paragraph
    (taken here from the rule's own docstring), not its first line: nothing ends in "NCHW through"."""
    from tf2tosa.legalizations.registry import all_rules

    rules = all_rules()
    text = OPS_MD.read_text()
    rows = [ln for ln in text.splitlines() if ln.startswith("| `")]
    assert len(rows) == len(rules)
    dangling = ("through", "and", "or", "the", "of", "to", "with", "by", "via", "in", "a", "doc:", "(", ",")
    for row in rows:
        cells = _cells(row)
        assert len(cells) == 5, row
        name, doc = cells[0].strip("`"), cells[4].replace("\\|", "|")
        want = " ".join(pyinspect.cleandoc(rules[name].fn.__doc__ or "").split("\n\n")[0].split())
        assert doc == want, name
        assert not doc.endswith(dangling), (name, doc[-60:])
        assert doc.count("(") == doc.count(")") or "…" in doc, (name, doc)
    # the two rows the issue quoted
    dts = next(r for r in rows if r.startswith("| `tf.DepthToSpace`"))
    assert "NCHW through TRANSPOSEs." in dts
    isinf = next(r for r in rows if r.startswith("| `tf.IsInf`"))
    assert _cells(isinf)[4] == r"\|x\| == inf."


def test_ops_md_is_what_make_docs_writes(tmp_path: Path) -> None:
    res = run_cli("ops", timeout=120)
    assert res.code == 0 and res.stderr.strip() == "", res.stderr
    assert res.stdout == OPS_MD.read_text()


# ------------------------------------------------------------------------------------------------ op counts
def test_convert_and_demo_count_ops_alike(tmp_path: Path) -> None:
    """``convert`` and ``demo`` print the same two figures for one model, in the same words, and they are what
    ``inspect --json``'s op table adds up to (CONST and CONST_SHAPE counted as constants)."""
    pytest.importorskip("ai_edge_litert")
    model = SAMPLES / "small_cnn_int8.tflite"
    samples = tmp_path / "samples"
    samples.mkdir()
    (samples / model.name).write_bytes(model.read_bytes())
    ins = run_cli("inspect", model, "--json", timeout=120)
    assert ins.code == 0, ins.stderr
    counts = json.loads(ins.stdout)["op_counts"]
    consts = sum(n for k, n in counts.items() if k in ("tosa.CONST", "tosa.CONST_SHAPE"))
    operators = sum(counts.values()) - consts
    assert operators > 0 and consts > 0
    phrase = f"{operators} TOSA operators + {consts} constants"
    conv = run_cli("convert", model, "-o", tmp_path / "m.tosa", timeout=120)
    assert conv.code == 0 and phrase in conv.stdout, conv.stdout
    demo = run_cli("demo", "--samples", samples, "--out-dir", tmp_path / "demo", timeout=300)
    assert demo.code == 0 and phrase in demo.stdout, demo.stdout
    assert "ops=" not in demo.stdout


# ------------------------------------------------------------------------------------------------ -q
def test_quiet_verify_is_one_verdict_line(tmp_path: Path) -> None:
    """-q: ``convert --verify`` prints the ``wrote`` line and the verdict in one line, nothing on stderr; no report
    block, no float-bound paragraph."""
    pytest.importorskip("ai_edge_litert")
    model = SAMPLES / "small_cnn_f32.tflite"
    before = tree_hash(tmp_path)
    res = run_cli("convert", model, "-o", tmp_path / "m.tosa", "--verify", "-q", timeout=300)
    assert res.code == 0, res.stderr
    lines = sorted(res.stdout.splitlines())  # (the verdict comes first when the file is written after it)
    assert len(lines) == 2, res.stdout
    assert lines[1].startswith(f"wrote {tmp_path / 'm.tosa'} (")
    assert lines[0].startswith(f"verify {model}: PASS (1 output(s), 1 input set(s)"), lines[0]
    assert len(lines[0]) < 200 and "float bound" not in res.stdout and "spec accuracy" not in res.stdout
    assert res.error_lines() == [] and "Traceback" not in res.output
    assert res.peak_rss_mb < RSS_CAP_MB
    assert set(tree_hash(tmp_path)) - set(before) == {"m.tosa"}
    res = run_cli("verify", model, "-q", "--num", "2", timeout=300)
    assert res.code == 0 and res.stdout.count("\n") == 1 and res.error_lines() == [], res.output
    assert "2 input set(s)" in res.stdout


def test_quiet_failure_is_one_line(tmp_path: Path) -> None:
    """-q on a failing command: exit 1, the one error line, nothing on stdout."""
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\0" * 64)
    before = tree_hash(tmp_path)
    res = run_cli("convert", bad, "-o", tmp_path / "m.tosa", "--verify", "-q", timeout=120)
    assert res.code == 1 and res.stdout == "" and "Traceback" not in res.output
    assert len(res.error_lines()) == 1 and str(bad) in res.error_lines()[0]
    assert tree_hash(tmp_path) == before


# ------------------------------------------------------------------------------------------------ closed stdout
def _closed_stdout_run(*args: str) -> tuple[int, str]:
    """Run the CLI with a stdout pipe whose reader is already gone; (exit code, stderr)."""
    r, w = os.pipe()
    os.close(r)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    try:
        proc = subprocess.run([sys.executable, "-m", "tf2tosa", *args], stdout=w, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, env=env, timeout=120, text=True)
    finally:
        os.close(w)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("args", [("inspect", str(SAMPLES / "small_cnn_int8.tflite")), ("ops",), ("--help",),
                                  ("inspect", str(SAMPLES / "mlp_f32.tflite"), "--json")])
def test_closed_stdout_ends_quietly(args: tuple[str, ...]) -> None:
    code, err = _closed_stdout_run(*args)
    assert code == 0 and err.strip() == "", (code, err)


def test_guide_pipe_example_exits_0() -> None:
    """The guide's own ``tf2tosa inspect … | head -3``, through bash: the first command's status is 0."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    for _ in range(3):  # the reader may leave before or after our last write: either must end in 0
        proc = subprocess.run(["bash", "-c", f"{sys.executable} -m tf2tosa inspect "
                               f"{SAMPLES / 'small_cnn_int8.tflite'} | head -1; echo \"status=${{PIPESTATUS[0]}}\""],
                              capture_output=True, text=True, env=env, timeout=120)
        assert proc.stdout.splitlines()[-1] == "status=0", proc.stdout + proc.stderr
        assert proc.stderr.strip() == "", proc.stderr


# ------------------------------------------------------------------------------------------------ the guide
def _guide_inspect_examples() -> list[tuple[str, list[str]]]:
    """(command, shown lines) of every guide example that runs ``tf2tosa inspect`` on a bundled sample and is
    followed by the output it shows."""
    text = GUIDE.read_text()
    found = re.findall(r"```sh\n(tf2tosa inspect models/samples/[^\n]*)\n```\n+```\n(.*?)```", text, re.S)
    return [(cmd.split("#")[0].strip(), out.strip("\n").splitlines()) for cmd, out in found]


def test_guide_inspect_examples_are_real() -> None:
    """Each shown line is a line the command prints (the ``q(…)`` lines included), and the text's claim that a
    ``.tosa`` does not carry them holds."""
    examples = _guide_inspect_examples()
    assert len(examples) >= 2 and any("q(" in ln for _, shown in examples for ln in shown)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    for cmd, shown in examples:
        cmd = cmd.replace("tf2tosa ", f"{sys.executable} -m tf2tosa ", 1)
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, env=env,
                              cwd=ROOT, timeout=120)
        assert proc.returncode == 0, (cmd, proc.stderr)
        assert proc.stdout.splitlines() == shown, (cmd, proc.stdout)


def test_tosa_inspect_has_no_quantization(tmp_path: Path) -> None:
    conv = run_cli("convert", SAMPLES / "small_cnn_int8.tflite", "-o", tmp_path / "s.tosa", timeout=120)
    assert conv.code == 0, conv.stderr
    res = run_cli("inspect", tmp_path / "s.tosa", timeout=120)
    assert res.code == 0 and "  serving_default_input_0: tensor<1x32x32x3xi8>" in res.stdout.splitlines()
    assert "q(" not in res.stdout
    assert "`inspect out/s.tosa` of the same model lists `serving_default_input_0: tensor<1x32x32x3xi8>`" in \
        " ".join(GUIDE.read_text().split())


# ------------------------------------------------------------------------------------------------ --help
def test_help_names_every_format() -> None:
    res = run_cli("--help", timeout=60)
    assert res.code == 0
    head = " ".join(res.stdout.split("Options:")[0].split())
    for fmt in ("TensorFlow Lite", "TensorFlow", "NNEF", ".keras", ".tgz"):
        assert fmt in head, fmt


# ------------------------------------------------------------------------------------------------ HTML report
def _two_sets() -> object:
    """The report of one float output over two input sets of different magnitude: set 1 has the larger relative
    error (so it is "the worst" set) and small values; set 2 the larger absolute errors on values near 0.79."""
    from tf2tosa.verify.compare import compare

    rng = np.random.default_rng(0)
    ref_a = rng.uniform(0.0, 0.225, 64).astype(np.float32)
    ref_a[0] = 0.225
    got_a = ref_a.copy()
    got_a[:3] += np.float32(3e-4)  # rel 1.3e-3: the worse set, a failing one
    ref_b = rng.uniform(0.5, 0.79, 64).astype(np.float32)
    ref_b[0] = 0.79
    got_b = ref_b.copy()
    got_b[:5] += np.float32(5e-4)  # rel 6.3e-4, but larger |error| than set 1
    a, b = compare("y", got_a, ref_a), compare("y", got_b, ref_b)
    assert a.rel > b.rel and b.max_abs > a.max_abs
    return a.merge(b)


def test_worst_elements_carry_their_own_set() -> None:
    from tf2tosa.verify.compare import VerifyReport
    from tf2tosa.verify.verify_html import render_verify_html

    merged = _two_sets()
    html = render_verify_html(VerifyReport("m.tflite", 2, [merged]))  # type: ignore[list-item]
    table = html.split('<table class="worst">', 1)[1].split("</table>", 1)[0]
    heads = re.findall(r"<th>(.*?)</th>", table)
    col = {h: i for i, h in enumerate(heads)}
    assert "input set" in col and "max |oracle| of its set" in col, heads
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])]
    assert rows and {r[col["input set"]] for r in rows} == {"1", "2"}  # both sets listed
    for r in rows:
        oracle, top = abs(float(r[col["oracle"]])), float(r[col["max |oracle| of its set"]])
        assert oracle <= top + 1e-6, r  # never a value beside a smaller set's maximum
        assert (top < 0.3) == (r[col["input set"]] == "1"), r
    # the header's figures name the set they come from
    assert "max |oracle| <b>0.225</b> (input set 1 of 2, the worst)" in html


# ------------------------------------------------------------------------------------------------ bound wording
def test_bound_use_wording() -> None:
    from tf2tosa.verify.spec_check import ComplianceReport, OpVerdict, bound_use

    assert bound_use(0.5) == "50% of its bound"
    assert bound_use(3.2e-5) == "0.0032% of its bound"
    assert bound_use(0.0) == "no error"
    assert "equal to its bound" in bound_use(1.0) and "allows" in bound_use(1.0)
    assert "outside" in bound_use(2.0)
    rep = ComplianceReport(1, [], OpVerdict("tosa.SUB#93", "r", True, 0.25, ""))
    assert "of the bound" not in str(rep) and "tosa.SUB#93, 25% of its bound" in str(rep)


def test_verify_output_has_no_bare_ratio(tmp_path: Path) -> None:
    pytest.importorskip("ai_edge_litert")
    res = run_cli("verify", SAMPLES / "small_cnn_f32.tflite", timeout=300)
    assert res.code == 0, res.stderr
    assert not re.search(r"worst [0-9.e+-]+ of the bound", res.stdout), res.stdout
    assert re.search(r"largest error: \S+.*(% of its bound|equal to its bound|no error)", res.stdout), res.stdout


# ------------------------------------------------------------------------------------------------ constant oracle
CONSTANT_NNEF = """version 1.0;

graph G( input ) -> ( output )
{
    input = external<scalar>(shape = [1, 8]);
    shifted = sub(input, 1000.0);
    output = relu(shifted);
}
"""


def test_constant_oracle_output_is_warned(tmp_path: Path) -> None:
    """ReLU of the input minus 1000 (inputs in [-1, 1]) is 0 everywhere: verify passes and says it proves little,
    on stderr and in the JSON ``warnings``; the HTML report shows it too."""
    model = tmp_path / "m.nnef"
    model.mkdir()
    (model / "graph.nnef").write_text(CONSTANT_NNEF)
    res = run_cli("verify", model, "--num", "2", "--report", tmp_path / "r.html", timeout=120)
    assert res.code == 0 and "Traceback" not in res.output, res.output
    warn = [ln for ln in res.error_lines() if ln.startswith("warning:")]
    assert len(warn) == 1 and "'output' is constant in the oracle (all 0 over all 2 input sets)" in warn[0]
    assert "proves little" in warn[0]
    assert "constant in the oracle" in (tmp_path / "r.html").read_text()
    js = run_cli("verify", model, "--json", timeout=120)
    body = json.loads(js.stdout)
    assert js.code == 0 and any("constant in the oracle" in w for w in body["warnings"])
    assert res.peak_rss_mb < RSS_CAP_MB


def test_varying_oracle_output_is_not_warned() -> None:
    res = run_cli("verify", SAMPLES / "mlp_f32.tflite", "--json", timeout=300)
    if res.code == 1 and "LiteRT" in res.output:
        pytest.skip("no LiteRT")
    assert res.code == 0 and json.loads(res.stdout)["warnings"] == [], res.output


# ------------------------------------------------------------------------------------------------ one error line
def test_error_naming_a_newline_is_one_line(tmp_path: Path) -> None:
    """A name the model chose may hold a newline (an NNEF label, found by tools/fuzz.py): the error is still one
    line, the newline shown escaped."""
    model = tmp_path / "m.nnef"
    model.mkdir()
    (model / "graph.nnef").write_text("version 1.0;\n\ngraph G( input ) -> ( output )\n{\n"
                                      "    input = external<scalar>(shape = [1, 8]);\n"
                                      "    w = variable<scalar>(shape = [1, 8], label = 'w\nx');\n"
                                      "    output = add(input, w);\n}\n")
    before = tree_hash(tmp_path)
    res = run_cli("convert", model, "-o", tmp_path / "m.tosa", timeout=120)
    assert res.code == 1 and "Traceback" not in res.output, res.output
    lines = res.error_lines()
    assert len(lines) == 1 and "w\\nx" in lines[0], res.stderr
    assert tree_hash(tmp_path) == before
    assert res.peak_rss_mb < RSS_CAP_MB
