"""``verify --report out.html``: a self-contained page per verify run, rendered in headless Chromium.

The rendering test saves a screenshot to out/verify_report.png (skipped without chromium:
``apt-get install -y chromium``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import html_dom
from tf2tosa.cli import main
from tf2tosa.verify import report as zoo_report

ROOT = Path(__file__).resolve().parent.parent
F32 = ROOT / "models" / "samples" / "small_cnn_f32.tflite"
INT8 = ROOT / "models" / "samples" / "small_cnn_int8.tflite"

pytest.importorskip("ai_edge_litert")
requires_chromium = pytest.mark.skipif(zoo_report.chromium_path() is None,
                                       reason="chromium is not installed (apt-get install -y chromium)")


def verify_page(tmp_path: Path, model: Path, *extra: str) -> tuple[int, str]:
    page = tmp_path / f"{model.stem}.html"
    with pytest.raises(SystemExit) as exc:
        main(["verify", str(model), "--num", "2", "--report", str(page), "-q", *extra])
    return int(exc.value.code or 0), page.read_text()


def plots(html: str) -> list[str]:
    return re.findall(r'<svg[^>]*class="plot" data-plot="([a-z-]+)"', html)


def test_integer_page(tmp_path: Path) -> None:
    code, html = verify_page(tmp_path, INT8, "--oracle", "optimized", "--layers")
    assert code == 3  # judged by the optimized kernels, int8 differs
    assert plots(html) == ["lsb-histogram", "layers"]
    assert "LiteRT optimized kernels" in html and "worst elements" in html and ">FAIL<" in html
    assert "<script" not in html and "http" not in html.split("<body>")[1].replace("http://www.w3.org", "")
    code, html = verify_page(tmp_path, INT8)
    assert code == 0 and "optimized kernels differ by ≤" in html and ">PASS<" in html


def test_float_page(tmp_path: Path) -> None:
    code, html = verify_page(tmp_path, F32)
    assert code == 0
    assert plots(html) == ["error-distribution", "spec-bounds"]
    assert "spec accuracy (TOSA 1.0 §1.10)" in html and "|err| &lt;= 0.0001 x max|ref|" in html


@requires_chromium
def test_page_renders_in_chromium(tmp_path: Path) -> None:
    _, html = verify_page(tmp_path, F32, "--layers")
    page = tmp_path / f"{F32.stem}.html"
    dom = html_dom.dump_dom(page)
    for kind in ("error-distribution", "spec-bounds", "layers"):
        m = re.search(rf'<svg[^>]*data-plot="{kind}".*?</svg>', dom, re.S)
        assert m is not None, kind
        assert m.group(0).count("<rect") + m.group(0).count("<circle") >= 3, kind
    out = ROOT / "out"
    out.mkdir(exist_ok=True)
    png = zoo_report.screenshot(page, out / "verify_report.png", width=1100, height=1600)
    data = Path(png).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
