"""The model zoo: registry facts, a fast subset through run_zoo (float32 and int8, serial and in worker processes),
and the full zoo behind ``-m zoo``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import requires_litert, requires_tf

from tf2tosa import zoo as tz

zoo = tz._models_module()

FAST = "lenet5/float32,lenet5/int8,resnet8/float32,resnet8/int8"


def test_registry() -> None:
    reg = zoo.REGISTRY
    assert len(reg) >= 30
    fams = {m.family for m in reg.values()}
    assert {"classification", "detection", "segmentation", "audio", "sequence", "transformer", "other"} <= fams
    for name, m in reg.items():
        assert m.name == name and m.build is not None and m.inputs
        assert set(m.variants) <= set(zoo.VARIANTS), name
        assert set(m.unsupported) <= set(m.variants), name
        assert all(s.shape[0] == 1 for s in m.inputs), name
    for required in ("mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_lite", "resnet8",
                     "densenet_mini", "squeezenet", "ssd_lite", "unet", "deeplab_v3_mini", "ds_cnn",
                     "log_mel_frontend", "lstm", "gru", "bidirectional_lstm", "transformer_encoder", "tiny_bert",
                     "dense_autoencoder", "espcn_x2"):
        assert required in reg


def test_definition_hash_follows_helpers() -> None:
    """The cache key covers the builder and the module helpers it calls."""
    from models.zoo import core, vision

    deps = core._code_deps(vision.resnet8)
    assert any(k.endswith("._basic_block") for k in deps) and any(k.endswith("._conv_bn") for k in deps)
    h = zoo.definition_hash(zoo.REGISTRY["resnet8"])
    assert h == zoo.definition_hash(zoo.REGISTRY["resnet8"]) and len(h) == 16
    assert h != zoo.definition_hash(zoo.REGISTRY["lenet5"])
    assert zoo.cache_path(zoo.REGISTRY["resnet8"], "int8") != zoo.cache_path(zoo.REGISTRY["resnet8"], "float32")


def test_select_patterns() -> None:
    keys = {f"{m.name}/{v}" for m, vs in tz.select(FAST, include_real=False) for v in vs}
    assert keys == set(FAST.split(","))
    mob = {m.name for m, _ in tz.select("mobilenet", include_real=False)}
    assert {"mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small"} <= mob
    only_int8 = tz.select("/int8", include_real=False)
    assert only_int8 and all(vs == ["int8"] for _, vs in only_int8)
    fam = tz.select("detection", include_real=False)
    assert {m.family for m, _ in fam} == {"detection"}
    assert not any(m.name == "lenet5" for m, _ in tz.select("lenet*,!lenet5", include_real=False))


def test_list_only_builds_nothing(tmp_path: Path) -> None:
    run = tz.run_zoo("resnet8", list_only=True, report_dir=tmp_path)
    assert [r["variant"] for r in run.results] == list(zoo.REGISTRY["resnet8"].variants)
    assert all(r["status"] == "LISTED" for r in run.results)
    assert not list(tmp_path.iterdir())


def test_real_model_names(tmp_path: Path) -> None:
    assert zoo.real_models(tmp_path / "absent") == {}
    from models.zoo import _real_name

    assert _real_name(Path("a__b__keyword_spotting_alexa.float32.tflite")) == ("keyword_spotting_alexa", "float32")
    assert _real_name(Path("x__mltk__image_example1.tflite")) == ("image_example1", None)


def _check(results: list[dict], expect: set[str]) -> None:
    got = {f"{r['model']}/{r['variant']}": r for r in results}
    assert set(got) == expect
    for key, r in got.items():
        assert r["status"] == "PASS", f"{key}: {r['status']} {r['reason']}"
        assert r["converted"] and r["compared"] and r["ops"] > 0 and r["convert_s"] >= 0
        if r["integer"]:
            assert r["mismatches"] == 0 and r["litert_ok"]
        else:  # within 1e-4, or LiteRT within the rounding bound of the fp64 value (verify's rule)
            assert r["litert_ok"] and r["mismatches"] == 0
        lay = r["layers"]
        assert lay and lay["layers"] and lay["first_divergent"] is None


@requires_litert
@requires_tf
def test_fast_subset_serial(tmp_path: Path) -> None:
    seen: list[str] = []
    run = tz.run_zoo(FAST, jobs=1, report_dir=tmp_path, progress=False,
                     on_result=lambda r: seen.append(r["variant"]))
    _check(run.results, set(FAST.split(",")))
    assert len(seen) == 4 and run.ok
    assert set(run.paths) == {"json", "md", "html"}
    data = json.loads(run.paths["json"].read_text())
    assert data["summary"]["PASS"] == 4 and data["summary"]["bit_exact"] == 2 and data["summary"]["within_tol"] == 2
    md = run.paths["md"].read_text()
    assert "| lenet5 | int8 |" in md and "bit-exact" in md
    html = run.paths["html"].read_text()
    assert html.count('class="badge"') >= 8 and "<svg" in html


@requires_litert
@requires_tf
def test_fast_subset_parallel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = tz.zoo_command(filter="lenet5/int8,resnet8/float32", jobs=2, report=str(tmp_path))
    out = capsys.readouterr()
    assert code == 0, out.out
    assert "2 variants: 2 converted" in out.out
    assert "2/2" in out.err  # the progress line
    results = json.loads((tmp_path / "zoo.json").read_text())["results"]
    _check(results, {"lenet5/int8", "resnet8/float32"})
    # integer variants are judged by the reference kernels; the optimized kernels' difference is a note
    lenet = next(r for r in results if r["model"] == "lenet5")
    assert any(n.startswith("optimized kernels ") for n in lenet["notes"]), lenet["notes"]


@pytest.mark.zoo
@requires_litert
@requires_tf
def test_full_zoo(tmp_path: Path) -> None:
    """Every synthetic model variant converts, validates and matches (known gaps are XFAIL)."""
    run = tz.run_zoo(None, jobs=2, report_dir=tmp_path / "zoo", include_real=True)
    bad = [f"{r['model']}/{r['variant']}: {r['status']} {r['reason']}" for r in run.results
           if r["status"] in tz.FAILING]
    assert not bad, "\n".join(bad)


def test_failure_reasons_are_one_line() -> None:
    err = RuntimeError("LiteRT child failed (exit status 1):\nTraceback (most recent call last):\n"
                       "  File \"x\", line 1\nValueError: Didn't find op for builtin opcode 'TILE' version '4'. "
                       "An older version of this builtin might be supported.\nRegistration failed.\n")
    assert tz._litert_reason(err) == "Didn't find op for builtin opcode 'TILE' version '4'"
    line = tz._one_line(ValueError("first\n\nsecond\nthird\nfourth"))
    assert "\n" not in line and line.startswith("ValueError: first | second")
    from models.zoo.core import _refusal

    assert _refusal(RuntimeError("ConverterError: op X.\nop X.")) == "op X."


@requires_litert
@requires_tf
def test_int16x8_zero_scale_channels(tmp_path: Path) -> None:
    """The int16x8 log-mel front ends hold a DFT matrix whose first sine row is all zero, which TFLite quantizes with
    the per-channel scale 0.0: they convert and are bit-exact with the reference kernels."""
    run = tz.run_zoo("log_mel_frontend/int16x8,kws_end_to_end/int16x8", jobs=1, report_dir=tmp_path, progress=False)
    assert [(r["variant"], r["status"]) for r in run.results] == [("int16x8", "PASS")] * 2, \
        [r["reason"] for r in run.results]
    assert all(r["compared"] and r["mismatches"] == 0 and r["ref_mismatches"] == 0 for r in run.results)
