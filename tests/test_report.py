"""Verification reports: the zoo page's structure, its SVG plots, and rendering in headless Chromium (skipped when
no chromium is installed: ``apt-get install -y chromium``)."""

from __future__ import annotations

import math
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import html_dom
from tf2tosa.verify import report

ROOT = Path(__file__).resolve().parent.parent

requires_chromium = pytest.mark.skipif(report.chromium_path() is None,
                                       reason="chromium is not installed (apt-get install -y chromium)")


def _layers(n: int, first_bad: int | None, metric: str = "rel") -> dict[str, Any]:
    rows = []
    for i in range(n):
        bad = first_bad is not None and i >= first_bad
        err = (3e-2 if bad else 1e-7 * (1 + i % 3)) if metric == "rel" else (5.0 if bad else 0.0)
        rows.append({"position": i, "tensor": f"t{i}", "tensor_index": i, "op": f"CONV_2D#{i}",
                     "tosa_value": f"v{i}", "tosa_op": "tosa.CONV2D", "shape": [1, 4, 4, 8], "dtype": "float32",
                     "metric": metric, "error": err, "mismatches": 3 if bad else 0, "size": 128, "diverged": bad,
                     "note": ""})
    first = next((r for r in rows if r["diverged"]), None)
    return {"model": "m", "reference_kernels": metric == "lsb", "float_threshold": 1e-4, "int_threshold": 0.0,
            "layers": rows, "unmapped": [], "outputs_ok": first is None, "first_divergent": first}


def _results() -> list[dict[str, Any]]:
    base = {"family": "classification", "description": "a <small> & test model", "params": 12345, "converted": True,
            "validated": True, "compared": True, "ops": 42, "tflite_ops": 12, "convert_s": 0.12, "run_s": 0.03,
            "op_counts": {"tosa.CONV2D": 5, "tosa.CLAMP": 4}, "profiles": ["PRO-FP"], "extensions": [],
            "notes": [], "reason": "", "ref_ok": True, "ref_rel": 1e-9, "ref_mismatches": 0, "cached": True}
    return [
        {**base, "model": "net_a", "variant": "float32", "status": "PASS", "integer": False, "litert_ok": True,
         "max_rel": 2e-7, "mismatches": 0, "layers": _layers(30, None)},
        {**base, "model": "net_a", "variant": "int8", "status": "FAIL", "integer": True, "litert_ok": False,
         "max_rel": 0.1, "max_abs": 2.0, "mismatches": 7, "int_outputs": True,
         "reason": "7 of 100 output values differ from LiteRT BUILTIN_REF (max 2 LSB); first divergent layer "
                   "CONV_2D#11 (tosa.CLAMP)", "layers": _layers(25, 11, "lsb")},
        {**base, "model": "net_b", "variant": "float32", "status": "UNSUPPORTED", "integer": False, "compared": False,
         "validated": None, "reason": "1 unsupported op(s) of 1 kind(s): tfl.while x1: no legalization rule",
         "layers": None},
        {**base, "model": "net_b", "variant": "int16x8", "status": "SKIP", "integer": True, "compared": False,
         "converted": False, "ops": None, "reason": "TFLite converter: 16x8 not supported for SQUARED_DIFFERENCE",
         "layers": None},
        {**base, "model": "net_c", "variant": "fp16", "status": "INVALID", "integer": False, "litert_ok": True,
         "validated": False, "max_rel": math.inf, "reason": "tosa-opt: 'tosa.conv2d' op failed level check",
         "layers": _layers(8, 5)},
    ]


META = {"started": "2026-01-01 00:00:00 UTC", "wall_s": 12.5, "jobs": 2, "tensorflow": "2.x", "litert": "2.x",
        "tosa_tools": True, "filter": "net_*"}


def test_summary_counts() -> None:
    c = report.summary_counts(_results())
    assert c["variants"] == 5 and c["PASS"] == 1 and c["FAIL"] == 1 and c["SKIP"] == 1
    assert c["converted"] == 4 and c["validated"] == 3
    assert (c["bit_exact"], c["integer"]) == (0, 1) and (c["within_tol"], c["float"]) == (2, 2)


def test_zoo_html_structure(tmp_path: Path) -> None:
    paths = report.write_zoo_reports(_results(), tmp_path, META)
    page = paths["html"].read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<script src" not in page and "<link" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")  # self-contained
    assert page.count('<tr><td><a href="#m-net-a">') == 3  # two result rows, one under "Needs attention"
    attention = page[page.index("<h2>Needs attention</h2>"):page.index("<h2>Results</h2>")]
    assert attention.count("<tr><td>") == 4  # FAIL, UNSUPPORTED, INVALID, then the SKIP
    assert 'id="m-net-a"' in page and 'id="m-net-b"' in page and 'id="m-net-c"' in page
    for status in ("PASS", "FAIL", "UNSUPPORTED", "SKIP", "INVALID"):
        assert f">{status}</span>" in page
    assert page.count("<svg") == 3  # one plot per variant with a layer report
    assert "first divergent: CONV_2D#11" in page
    assert "a &lt;small&gt; &amp; test model" in page  # escaped
    md = paths["md"].read_text()
    assert "| net_a | int8 | 42 | FAIL | 7 mism. (max 2 LSB) |" in md
    results, meta = report.load_zoo_json(paths["json"])
    assert len(results) == 5 and meta["jobs"] == 2
    assert results[4]["max_rel"] == "inf"  # non-finite floats survive as strings


def test_svg_plot_edge_cases() -> None:
    pts = [{"x": 0, "error": 0.0, "diverged": False, "label": "a"},
           {"x": 1, "error": math.inf, "diverged": True, "label": "b"},
           {"x": 2, "error": 1e-12, "diverged": False, "label": "c"}]
    for metric in ("rel", "lsb"):
        svg = report.svg_error_plot(pts, metric=metric, threshold=1e-4 if metric == "rel" else 0.0)
        assert svg.startswith("<svg") and svg.endswith("</svg>") and "nan" not in svg.lower()
        assert svg.count("<circle") == 3 and "first divergent: b" in svg
    assert "<circle" not in report.svg_error_plot([], metric="rel", threshold=1e-4)


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", head[16:24])
    return int(w), int(h)


@requires_chromium
def test_report_renders_in_chromium(tmp_path: Path) -> None:
    paths = report.write_zoo_reports(_results(), tmp_path, META)
    dom = html_dom.dump_dom(paths["html"])
    assert 'class="js-ready"' in dom  # the page's script ran without an error
    assert dom.count("<svg") == 3 and dom.count('class="badge"') >= 10
    png = report.screenshot(paths["html"], tmp_path / "zoo.png", width=1200, height=1500)
    assert _png_size(png) == (1200, 1500)
    assert png.stat().st_size > 30_000  # a rendered page, not a blank canvas


@requires_chromium
def test_zoo_screenshot_tool(tmp_path: Path) -> None:
    paths = report.write_zoo_reports(_results(), tmp_path, META)
    out = tmp_path / "shot.png"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "zoo_screenshot.py"), str(paths["json"]), "-o",
                           str(out), "--width", "1000", "--height", "800"], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert _png_size(out) == (1000, 800)
