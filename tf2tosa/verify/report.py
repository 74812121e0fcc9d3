"""Verification reports: JSON, Markdown and self-contained HTML with inline SVG plots; PNG via headless Chromium.

The model-zoo report (:func:`write_zoo_reports`) takes the zoo's results as plain dicts (as stored in
``zoo.json``), so a report can be re-rendered from a saved run.  :func:`render_layer_page` renders one
:class:`~tf2tosa.verify.layers.LayerReport`.  Plots are SVG written here (no plotting library): error by layer,
log-scaled for relative float errors, linear in LSB for integer tensors, with the threshold and the first
diverging layer marked.  :func:`screenshot` saves a PNG of a page with Chromium in headless mode.
"""

from __future__ import annotations

import html
import json
import math
import os
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..outputs import write_files


class LayerPage(Protocol):
    """What :func:`render_layer_page` reads of a :class:`~tf2tosa.verify.layers.LayerReport` (named by its shape
    here: the layers module imports this one)."""

    model: str

    @property
    def drift_counts(self) -> dict[str, int]: ...

    def drift_summary(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


STATUSES = ("PASS", "FAIL", "INVALID", "UNSUPPORTED", "ERROR", "XFAIL", "XPASS", "SKIP")
STATUS_COLORS = {
    "PASS": "#1f9d55", "FAIL": "#d64545", "INVALID": "#e67e22", "UNSUPPORTED": "#8e44ad", "ERROR": "#a61b1b",
    "XFAIL": "#c9a227", "XPASS": "#16a2b8", "SKIP": "#8a94a6",
}
STATUS_HELP = {
    "PASS": "converted, valid TOSA, matches LiteRT and the Arm reference model",
    "FAIL": "converted and valid, but the numbers differ",
    "INVALID": "tosa-opt rejects the program",
    "UNSUPPORTED": "the converter refuses an op",
    "ERROR": "the converter or the executor crashed",
    "XFAIL": "a known gap failed as expected",
    "XPASS": "a known gap now passes",
    "SKIP": "TFLite cannot build the variant or LiteRT cannot run it",
}

_E = html.escape


def _attr(s: object) -> str:
    return html.escape(str(s), quote=True)


# ------------------------------------------------------------------------------------------------ SVG plots
def _fmt_num(x: float) -> str:
    if x == 0:
        return "0"
    if x == math.inf:
        return "inf"
    if abs(x) >= 1000 or abs(x) < 0.01:
        return f"{x:.1e}"
    return f"{x:.3g}"


def _nice_step(x: float) -> float:
    """1, 2 or 5 times a power of ten, at least ``x`` (and at least 1)."""
    if x <= 1:
        return 1.0
    p = 10 ** math.floor(math.log10(x))
    return float(next(m * p for m in (1, 2, 5, 10) if m * p >= x))


def _y_axis(metric: str, finite: list[float], threshold: float, mt: int,
            ph: int) -> tuple[Callable[[float], float], list[tuple[float, str]], str]:
    """The y axis of :func:`svg_error_plot` for ``metric`` over the errors ``finite`` and ``threshold``, the plot area
    starting at ``mt`` and ``ph`` high: the error-to-y map, the ticks (y and label) and the axis title."""
    if metric == "rel":
        lo = -9.0
        top = max(finite + [threshold, 1e-3])
        hi = float(math.ceil(math.log10(top) + 1e-9))
        hi = max(hi, lo + 3)

        def y_of(e: float) -> float:
            v = lo if e <= 0 else (hi if not math.isfinite(e) else min(max(math.log10(e), lo), hi))
            return mt + ph * (1 - (v - lo) / (hi - lo))

        step = 1 if hi - lo <= 8 else 2
        ticks = [(mt + ph * (1 - (k - lo) / (hi - lo)), "0" if k == lo else f"1e{int(k)}")
                 for k in range(int(lo), int(hi) + 1, step)]
        return y_of, ticks, "relative error"
    top = max(finite + [threshold, 1.0])
    step_i = _nice_step(top / 4)
    hi = float(step_i * math.ceil(top / step_i + 0.05))

    def y_lsb(e: float) -> float:
        v = hi if not math.isfinite(e) else min(max(e, 0.0), hi)
        return mt + ph * (1 - v / hi)

    ticks = [(y_lsb(k * step_i), _fmt_num(k * step_i)) for k in range(int(round(hi / step_i)) + 1)]
    return y_lsb, ticks, "error (LSB)"


def svg_error_plot(points: Sequence[Mapping[str, Any]], *, metric: str, threshold: float, width: int = 900,
                   height: int = 200, title: str = "") -> str:
    """An SVG line-and-dot plot of ``points`` (dicts with ``x``, ``error``, ``diverged``, ``label``).

    ``metric`` ``"rel"``: log y axis from 1e-9 (exact zeros sit on the bottom line); ``"lsb"``: linear y axis.
    The threshold is a dashed line; the first diverging point gets a marker and a label.
    """
    ml, mr, mt, mb = 62, 16, 26 if title else 12, 34
    pw, ph = width - ml - mr, height - mt - mb
    xs = [int(p["x"]) for p in points]
    xmax = max(xs + [1])
    errs = [float(p["error"]) for p in points]
    finite = [e for e in errs if math.isfinite(e)]
    y_of, ticks, ylabel = _y_axis(metric, finite, threshold, mt, ph)

    def x_of(x: int) -> float:
        return ml + pw * (x / xmax if xmax else 0.5)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {width} {height}" '
           f'width="100%" preserveAspectRatio="xMidYMid meet" role="img" aria-label="{_attr(title or ylabel)}">',
           f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#fbfcfe" stroke="#d9dee7"/>']
    if title:
        out.append(f'<text x="{ml}" y="16" class="ptitle">{_E(title)}</text>')
    for y, lab in ticks:
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e8ecf2"/>')
        out.append(f'<text x="{ml - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_E(lab)}</text>')
    xstep = max(1, int(_nice_step(xmax / 8)))
    for xv in range(0, xmax + 1, xstep):
        out.append(f'<text x="{x_of(xv):.1f}" y="{mt + ph + 15}" text-anchor="middle" class="tick">{xv}</text>')
    out.append(f'<text x="{ml + pw / 2:.1f}" y="{height - 4}" text-anchor="middle" class="axis">'
               f'layer (topological order)</text>')
    out.append(f'<text transform="translate(13,{mt + ph / 2:.1f}) rotate(-90)" text-anchor="middle" '
               f'class="axis">{_E(ylabel)}</text>')
    ty = y_of(threshold) if threshold > 0 or metric == "lsb" else None
    if ty is not None:
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#f0a020" '
                   f'stroke-dasharray="5 4" stroke-width="1.3"/>')
        out.append(f'<text x="{ml + pw - 4}" y="{ty - 4:.1f}" text-anchor="end" class="thr">threshold '
                   f'{_fmt_num(threshold)}</text>')
    if points:
        path = " ".join(f"{x_of(x):.1f},{y_of(e):.1f}" for x, e in zip(xs, errs))
        out.append(f'<polyline points="{path}" fill="none" stroke="#7b8cb0" stroke-width="1.1" '
                   f'stroke-opacity="0.7"/>')
    first = next((i for i, p in enumerate(points) if p.get("diverged")), None)
    r = 2.6 if len(points) < 150 else 1.9
    for i, (p, x, e) in enumerate(zip(points, xs, errs)):
        color = "#d64545" if p.get("diverged") else "#1f9d55"
        tip = f"#{x} {p.get('label', '')}: {_fmt_num(e)}{'' if metric == 'rel' else ' LSB'}"
        out.append(f'<circle cx="{x_of(x):.1f}" cy="{y_of(e):.1f}" r="{r if i != first else 5}" fill="{color}" '
                   f'stroke="#fff" stroke-width="0.6"><title>{_E(tip)}</title></circle>')
    if first is not None:
        fx = x_of(xs[first])
        out.append(f'<line x1="{fx:.1f}" x2="{fx:.1f}" y1="{mt}" y2="{mt + ph}" stroke="#d64545" '
                   f'stroke-dasharray="3 3"/>')
        anchor = "start" if fx < ml + pw * 0.7 else "end"
        dx = 6 if anchor == "start" else -6
        out.append(f'<text x="{fx + dx:.1f}" y="{mt + 13}" text-anchor="{anchor}" class="first">first divergent: '
                   f'{_E(str(points[first].get("label", "")))}</text>')
    out.append("</svg>")
    return "\n".join(out)


def layer_plots(layers: Sequence[Mapping[str, Any]], float_threshold: float, int_threshold: float,
                width: int = 900) -> str:
    """One plot per metric present in a layer report's ``layers`` (as dicts)."""
    parts = []
    for metric, thr, title in (("rel", float_threshold, "float tensors: relative error vs LiteRT"),
                               ("lsb", int_threshold, "integer tensors: |difference| vs LiteRT")):
        pts = [{"x": i, "error": e["error"], "diverged": e["diverged"], "label": e["op"]}
               for i, e in enumerate(layers) if e["metric"] == metric]
        if pts:
            parts.append(svg_error_plot(pts, metric=metric, threshold=thr, width=width, title=title))
    return "\n".join(parts)


# ------------------------------------------------------------------------------------------------ page chrome
_CSS = """
:root { --ink:#1c2430; --muted:#5d6b82; --line:#e3e8ef; --bg:#f4f6fa; --card:#fff; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color:var(--ink); background:var(--bg); }
header.top { background:linear-gradient(120deg,#1d2b4a,#2f4d84); color:#fff; padding:26px 36px 22px; }
header.top h1 { margin:0 0 4px; font-size:26px; font-weight:650; letter-spacing:.2px; }
header.top .sub { color:#c9d6f2; font-size:13px; }
header.top code { background:rgba(255,255,255,.14); color:#fff; }
main { padding:22px 36px 40px; max-width:1500px; }
.cards { display:flex; flex-wrap:wrap; gap:12px; margin:0 0 16px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:10px 14px; min-width:100px;
        box-shadow:0 1px 2px rgba(20,30,50,.05); }
.card .n { font-size:26px; font-weight:700; line-height:1.1; }
.card .l { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.6px; }
.card.wide { min-width:220px; }
.bar { display:flex; height:12px; border-radius:6px; overflow:hidden; margin:4px 0 18px; background:#e6e9ef; }
.bar span { display:block; height:100%; }
.legend { display:flex; flex-wrap:wrap; gap:14px; color:var(--muted); font-size:12px; margin-bottom:18px; }
.legend i { display:inline-block; width:10px; height:10px; border-radius:3px; margin-right:5px; vertical-align:-1px; }
h2 { font-size:18px; margin:28px 0 10px; }
table.results { width:100%; border-collapse:separate; border-spacing:0; background:var(--card);
                border:1px solid var(--line); border-radius:10px; overflow:hidden; font-size:13px; }
table.results th { background:#eef2f8; text-align:left; padding:8px 10px; font-weight:600; color:#34425a;
                   cursor:pointer; user-select:none; white-space:nowrap; border-bottom:1px solid var(--line); }
table.results th::after { content:" \\2195"; color:#9aa6bb; font-size:11px; }
table.results th.asc::after { content:" \\25B2"; color:#34425a; }
table.results th.desc::after { content:" \\25BC"; color:#34425a; }
table.results td { padding:6px 10px; border-bottom:1px solid #f0f2f6; vertical-align:top; }
table.results tr:nth-child(even) td { background:#fafbfd; }
table.results tr:hover td { background:#eef5ff; }
td.num { text-align:right; font-variant-numeric: tabular-nums; white-space:nowrap; }
td.reason { color:#4a5568; max-width:520px; }
a { color:#2456b3; text-decoration:none; } a:hover { text-decoration:underline; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; color:#fff; font-size:11px; font-weight:700;
         letter-spacing:.5px; }
.fam { color:var(--muted); font-size:12px; }
section.model { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:14px 18px;
                margin:14px 0; }
section.model h3 { margin:0 0 2px; font-size:16px; }
section.model .desc { color:var(--muted); font-size:13px; margin-bottom:8px; }
.variants { display:grid; grid-template-columns:repeat(auto-fill, minmax(560px, 1fr)); gap:4px 28px; }
.variant { border-top:1px solid #eef1f5; padding:10px 0 6px; min-width:0; }
.variant .head { display:flex; flex-wrap:wrap; align-items:center; gap:10px; margin-bottom:4px; }
.variant .head b { font-size:14px; }
.kv { color:var(--muted); font-size:12px; }
.kv b { color:var(--ink); font-weight:600; }
.why { background:#fff6f5; border-left:3px solid #d64545; padding:5px 10px; margin:6px 0; font-size:13px;
       white-space:pre-wrap; word-break:break-word; }
.why.soft { background:#f6f7fa; border-left-color:#8a94a6; }
.first { fill:#d64545; font-size:11px; font-weight:600; }
.ptitle { fill:#34425a; font-size:12px; font-weight:600; }
.tick { fill:#6b778c; font-size:10px; } .axis { fill:#6b778c; font-size:11px; } .thr { fill:#c77c00; font-size:10px; }
svg.plot { display:block; max-width:980px; margin:4px 0 8px; }
.opsline { font-size:12px; color:var(--muted); overflow-wrap:anywhere; }
.opsline code { word-break:break-all; }
code { background:#eef2f8; padding:0 4px; border-radius:4px; font-size:12px; }
footer { color:var(--muted); font-size:12px; padding:0 36px 30px; }
"""

_SORT_JS = """
document.querySelectorAll('table.results').forEach(function (t) {
  t.querySelectorAll('th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var body = t.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var asc = !th.classList.contains('asc');
      t.querySelectorAll('th').forEach(function (h) { h.classList.remove('asc', 'desc'); });
      th.classList.add(asc ? 'asc' : 'desc');
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute('data-v') || a.cells[col].textContent;
        var y = b.cells[col].getAttribute('data-v') || b.cells[col].textContent;
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
document.body.classList.add('js-ready');
"""


def _page(title: str, subtitle: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{_E(title)}</title>"
            f"<style>{_CSS}</style></head><body>\n<header class=\"top\"><h1>{_E(title)}</h1>"
            f"<div class=\"sub\">{subtitle}</div></header>\n<main>\n{body}\n</main>\n"
            f"<footer>Generated by tf2tosa. Self-contained page: inline CSS, SVG and script.</footer>\n"
            f"<script>{_SORT_JS}</script>\n</body></html>\n")


def badge(status: str) -> str:
    color = STATUS_COLORS.get(status, "#8a94a6")
    return (f'<span class="badge" style="background:{color}" title="{_attr(STATUS_HELP.get(status, ""))}">'
            f'{_E(status)}</span>')


# ------------------------------------------------------------------------------------------------ zoo report
def error_text(r: Mapping[str, Any]) -> str:
    """The error column: relative error (float) or mismatch count and LSB (integer)."""
    if not r.get("compared"):
        return "-"
    if r.get("integer"):
        mism = int(r.get("mismatches") or 0)
        if mism == 0:
            return "bit-exact"
        unit = " LSB" if r.get("int_outputs") else ""
        return f"{mism} mism. (max {_fmt_num(float(r.get('max_abs') or 0.0))}{unit})"
    return f"rel {float(r.get('max_rel') or 0.0):.2e}"


def _error_sort(r: Mapping[str, Any]) -> float:
    if not r.get("compared"):
        return -1.0
    return float(r.get("mismatches") or 0) if r.get("integer") else float(r.get("max_rel") or 0.0)


def summary_counts(results: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Status counts plus ``variants``, ``converted``, ``validated``, ``bit_exact`` (integer variants whose outputs
    match LiteRT's reference kernels exactly), ``integer``, ``within_tol`` (float variants within tolerance) and
    ``float``."""
    c: dict[str, int] = {s: 0 for s in STATUSES}
    c.update(Counter(str(r["status"]) for r in results))
    c["variants"] = len(results)
    c["converted"] = sum(1 for r in results if r.get("converted"))
    c["validated"] = sum(1 for r in results if r.get("validated"))
    ran = [r for r in results if r.get("compared")]
    c["integer"] = sum(1 for r in ran if r.get("integer"))
    c["float"] = sum(1 for r in ran if not r.get("integer"))
    c["bit_exact"] = sum(1 for r in ran if r.get("integer") and r.get("litert_ok"))
    c["within_tol"] = sum(1 for r in ran if not r.get("integer") and r.get("litert_ok"))
    c["ref_ok"] = sum(1 for r in ran if r.get("ref_ok"))
    return c


def render_markdown(results: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    c = summary_counts(results)
    lines = ["# tf2tosa model zoo", ""]
    if meta:
        lines.append(f"Run {meta.get('started', '')}, {meta.get('wall_s', 0):.0f} s wall, jobs {meta.get('jobs', 1)}; "
                     f"TensorFlow {meta.get('tensorflow', '?')}, LiteRT {meta.get('litert', '?')}, "
                     f"Arm tools {'yes' if meta.get('tosa_tools') else 'no'}.")
        lines.append("")
    lines.append(f"**{c['variants']} variants**: {c['converted']} converted, {c['validated']} validated by tosa-opt, "
                 f"{c['bit_exact']}/{c['integer']} integer bit-exact vs BUILTIN_REF, {c['within_tol']}/{c['float']} "
                 f"float within tolerance, {c['ref_ok']} agree with the Arm reference model.")
    lines.append("")
    shown = [s for s in STATUSES if c[s]]
    lines.append("| " + " | ".join(shown) + " |")
    lines.append("|" + "---:|" * len(shown))
    lines.append("| " + " | ".join(str(c[s]) for s in shown) + " |")
    lines.append("")
    lines.append("| model | variant | ops | status | max error / mismatches | convert s | run s | reason |")
    lines.append("|---|---|---:|---|---|---:|---:|---|")
    for r in results:
        reason = str(r.get("reason") or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['model']} | {r['variant']} | {r.get('ops') or '-'} | {r['status']} | {error_text(r)} | "
                     f"{_secs(r.get('convert_s'))} | {_secs(r.get('run_s'))} | {reason} |")
    return "\n".join(lines) + "\n"


def _secs(x: Any) -> str:
    return "-" if x is None else f"{float(x):.2f}"


def render_zoo_html(results: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None = None) -> str:
    """The zoo report page: summary cards and status bar, a sortable results table, one section per model."""
    meta = meta or {}
    c = summary_counts(results)
    sub = (f"{_E(str(meta.get('started', '')))} &middot; {c['variants']} model variants &middot; "
           f"{float(meta.get('wall_s', 0)):.0f} s wall with {meta.get('jobs', 1)} job(s) &middot; "
           f"TensorFlow {_E(str(meta.get('tensorflow', '?')))} &middot; LiteRT {_E(str(meta.get('litert', '?')))}"
           f" &middot; Arm TOSA tools {'available' if meta.get('tosa_tools') else 'missing'}")
    if meta.get("filter"):
        sub += f" &middot; filter <code>{_E(str(meta['filter']))}</code>"
    b: list[str] = []
    cards = [(c["variants"], "variants", "#1c2430"), (c["converted"], "converted", "#2456b3"),
             (c["validated"], "tosa-opt valid", "#2456b3"),
             (f"{c['bit_exact']}/{c['integer']}", "integer bit-exact", STATUS_COLORS["PASS"]),
             (f"{c['within_tol']}/{c['float']}", "float within tol.", STATUS_COLORS["PASS"])]
    cards += [(c[s], s.lower(), STATUS_COLORS[s]) for s in STATUSES if c[s]]
    b.append('<div class="cards">' + "".join(
        f'<div class="card"><div class="n" style="color:{col}">{_E(str(n))}</div><div class="l">{_E(lab)}</div></div>'
        for n, lab, col in cards) + "</div>")
    total = max(c["variants"], 1)
    b.append('<div class="bar">' + "".join(
        f'<span style="width:{100 * c[s] / total:.2f}%;background:{STATUS_COLORS[s]}" title="{s} {c[s]}"></span>'
        for s in STATUSES if c[s]) + "</div>")
    b.append('<div class="legend">' + "".join(
        f'<span><i style="background:{STATUS_COLORS[s]}"></i>{s}: {_E(STATUS_HELP[s])}</span>'
        for s in STATUSES if c[s]) + "</div>")
    # what needs attention, before the long table
    attention = [r for r in results if r["status"] not in ("PASS", "SKIP")]
    skipped = [r for r in results if r["status"] == "SKIP"]
    if attention or skipped:
        b.append('<h2>Needs attention</h2><table class="results"><thead><tr><th>model</th><th>variant</th>'
                 "<th>status</th><th>reason</th></tr></thead><tbody>")
        for r in attention + skipped:
            b.append(f'<tr><td><a href="#{_anchor(str(r["model"]))}">{_E(str(r["model"]))}</a></td>'
                     f'<td>{_E(str(r["variant"]))}</td><td>{badge(str(r["status"]))}</td>'
                     f'<td class="reason">{_E(_short(str(r.get("reason") or ""), 220))}</td></tr>')
        b.append("</tbody></table>")
    # results table
    b.append("<h2>Results</h2>")
    b.append('<table class="results"><thead><tr><th>model</th><th>family</th><th>variant</th><th>ops</th>'
             "<th>status</th><th>max error / mismatches</th><th>convert s</th><th>run s</th><th>reason</th>"
             "</tr></thead><tbody>")
    order = {s: i for i, s in enumerate(STATUSES)}
    for r in results:
        anchor = _anchor(str(r["model"]))
        b.append(
            f'<tr><td><a href="#{anchor}">{_E(str(r["model"]))}</a></td>'
            f'<td class="fam">{_E(str(r.get("family", "")))}</td><td>{_E(str(r["variant"]))}</td>'
            f'<td class="num" data-v="{r.get("ops") or 0}">{r.get("ops") or "-"}</td>'
            f'<td data-v="{order.get(str(r["status"]), 99)}">{badge(str(r["status"]))}</td>'
            f'<td class="num" data-v="{_error_sort(r)}">{_E(error_text(r))}</td>'
            f'<td class="num" data-v="{r.get("convert_s") or 0}">{_secs(r.get("convert_s"))}</td>'
            f'<td class="num" data-v="{r.get("run_s") or 0}">{_secs(r.get("run_s"))}</td>'
            f'<td class="reason">{_E(_short(str(r.get("reason") or ""), 160))}</td></tr>')
    b.append("</tbody></table>")
    # per-model sections
    b.append("<h2>Models</h2>")
    by_model: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        by_model.setdefault(str(r["model"]), []).append(r)
    for name, rs in by_model.items():
        first = rs[0]
        params = first.get("params")
        b.append(f'<section class="model" id="{_anchor(name)}"><h3>{_E(name)} '
                 f'<span class="fam">&middot; {_E(str(first.get("family", "")))}</span></h3>')
        desc = _E(str(first.get("description") or ""))
        if params:
            desc += f" &middot; {int(params):,} parameters"
        b.append(f'<div class="desc">{desc}</div>')
        b.append('<div class="variants">')
        for r in rs:
            b.append(_variant_block(r))
        b.append("</div></section>")
    return _page("tf2tosa model zoo", sub, "\n".join(b))


def _variant_block(r: Mapping[str, Any]) -> str:
    out = ['<div class="variant"><div class="head">'
           f'<b>{_E(str(r["variant"]))}</b> {badge(str(r["status"]))}']
    kv = [("ops", r.get("ops")), ("TFLite ops", r.get("tflite_ops")), ("error", error_text(r)),
          ("vs reference model", _ref_text(r)), ("convert", _s(r.get("convert_s"))), ("run", _s(r.get("run_s"))),
          ("build", "cached" if r.get("cached") else _s(r.get("build_s")))]
    out.append(" ".join(f'<span class="kv">{_E(k)} <b>{_E(str(v))}</b></span>' for k, v in kv
                        if v not in (None, "", "-")))
    out.append("</div>")
    if r.get("profiles") or r.get("extensions"):
        out.append(f'<div class="opsline">profiles {_E(", ".join(r.get("profiles") or []) or "-")}; extensions '
                   f'{_E(", ".join(r.get("extensions") or []) or "-")}</div>')
    counts = r.get("op_counts") or {}
    if counts:
        top = sorted(counts.items(), key=lambda kv: -kv[1])[:10]
        out.append('<div class="opsline">' + ", ".join(f"{_E(k.replace('tosa.', ''))}&times;{v}" for k, v in top)
                   + ("&hellip;" if len(counts) > 10 else "") + "</div>")
    if r.get("reason"):
        soft = r["status"] in ("SKIP", "XFAIL", "PASS", "XPASS")
        out.append(f'<div class="why{" soft" if soft else ""}">{_E(str(r["reason"]))}</div>')
    for note in r.get("notes") or []:
        out.append(f'<div class="why soft">{_E(str(note))}</div>')
    lay = r.get("layers")
    if lay and lay.get("layers"):
        first = lay.get("first_divergent")
        head = (f"per-layer comparison: {len(lay['layers'])} tensors compared, {len(lay.get('unmapped') or [])} "
                f"unmapped, {sum(1 for e in lay['layers'] if e['diverged'])} diverging")
        if first:
            head += (f"; first divergent <code>{_E(first['op'])}</code> &rarr; <code>{_E(first['tensor'])}</code> "
                     f"({_E(first['tosa_op'])})")
        out.append(f'<div class="opsline">{head}</div>')
        out.append(layer_plots(lay["layers"], lay["float_threshold"], lay["int_threshold"], width=700))
    out.append("</div>")
    return "\n".join(out)


def _ref_text(r: Mapping[str, Any]) -> str:
    if r.get("ref_ok") is None:
        return "-"
    if r.get("integer"):
        return "bit-exact" if r.get("ref_ok") else f"{r.get('ref_mismatches')} mism."
    return f"rel {float(r.get('ref_rel') or 0):.1e}"


def _s(x: Any) -> str:
    return "-" if x is None else f"{float(x):.2f} s"


def _short(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "\u2026"


def _anchor(name: str) -> str:
    return "m-" + "".join(ch if ch.isalnum() else "-" for ch in name)


def write_zoo_reports(results: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike[str],
                      meta: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """Write ``zoo.json``, ``zoo.md`` and ``zoo.html`` into ``out_dir``; returns their paths by kind."""
    d = Path(out_dir)
    paths = {"json": d / "zoo.json", "md": d / "zoo.md", "html": d / "zoo.html"}
    payload = {"meta": dict(meta or {}), "summary": summary_counts(results), "results": list(results)}
    write_files({  # all three or none (OutputError naming the path)
        paths["json"]: json.dumps(_finite(payload), indent=1, default=_json_default, allow_nan=False).encode(),
        paths["md"]: render_markdown(results, meta).encode(),
        paths["html"]: render_zoo_html(results, meta).encode(),
    }, make_dirs=True)
    return paths


def _finite(o: Any) -> Any:
    """``o`` with non-finite floats as the strings ``"inf"``, ``"-inf"``, ``"nan"`` (strict JSON has no Infinity)."""
    if isinstance(o, float):
        return o if math.isfinite(o) else str(o)
    if isinstance(o, Mapping):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_finite(v) for v in o]
    return o


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def load_zoo_json(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(results, meta) of a saved ``zoo.json``."""
    data = json.loads(Path(path).read_text())
    return list(data["results"]), dict(data.get("meta", {}))


# ------------------------------------------------------------------------------------------------ layer page
def render_layer_page(report: LayerPage) -> str:
    """A self-contained page for one :class:`LayerReport`: summary, plots, the diverging layers."""
    d = report.to_dict()
    first = d["first_divergent"]
    ndiv = sum(1 for e in d["layers"] if e["diverged"])
    sub = (f"{len(d['layers'])} tensors compared &middot; {len(d['unmapped'])} unmapped &middot; {ndiv} diverging "
           f"&middot; LiteRT {'BUILTIN_REF' if d['reference_kernels'] else 'default'} kernels &middot; thresholds "
           f"rel {d['float_threshold']:g}, {d['int_threshold']:g} LSB")
    b = ['<div class="cards">',
         f'<div class="card"><div class="n">{len(d["layers"])}</div><div class="l">layers compared</div></div>',
         f'<div class="card"><div class="n" style="color:{STATUS_COLORS["FAIL" if ndiv else "PASS"]}">{ndiv}</div>'
         '<div class="l">diverging</div></div>',
         f'<div class="card wide"><div class="n" style="font-size:16px">'
         f'{_E(first["op"]) if first else "none"}</div><div class="l">first divergent layer</div></div>', "</div>"]
    if first:
        b.append(f'<div class="why">first divergent: {_E(first["op"])} &rarr; {_E(first["tensor"])} '
                 f'(TOSA {_E(first["tosa_op"])} {_E(first["tosa_value"])}), '
                 f'{_E(_entry_err(first))}</div>')
    if report.drift_counts:
        b.append(f'<div class="why" id="drift">{_E(report.drift_summary())}</div>')
    b.append('<section class="model">' + layer_plots(d["layers"], d["float_threshold"], d["int_threshold"], 1100)
             + "</section>")
    b.append("<h2>Layers</h2>")
    b.append('<table class="results"><thead><tr><th>#</th><th>TFLite op</th><th>tensor</th><th>TOSA op</th>'
             "<th>shape</th><th>error</th><th>mismatches</th><th>float drift vs spec bound</th></tr></thead><tbody>")
    for i, e in enumerate(d["layers"]):
        style = ' style="color:#d64545;font-weight:600"' if e["diverged"] else ""
        b.append(f'<tr><td class="num">{i}</td><td{style}>{_E(e["op"])}</td><td>{_E(_short(e["tensor"], 70))}</td>'
                 f'<td>{_E(e["tosa_op"])}</td><td>{_E(str(list(e["shape"])))}</td>'
                 f'<td class="num" data-v="{e["error"]}">{_E(_entry_err(e))}</td>'
                 f'<td class="num">{e["mismatches"]}/{e["size"]}</td>{_drift_cell(e)}</tr>')
    b.append("</tbody></table>")
    if d["unmapped"]:
        b.append("<h2>Unmapped TFLite tensors</h2><div class=\"opsline\">" +
                 "<br>".join(_E(u) for u in d["unmapped"][:200]) + "</div>")
    return _page(f"Per-layer comparison: {report.model}", sub, "\n".join(b))


_DRIFT_COLORS = {"exact": "#2e9e5b", "within": "#2e9e5b", "beyond": "#d64545", "composite": "#b7791f"}


def _drift_cell(e: Mapping[str, Any]) -> str:
    """The drift class of a layer: within / beyond the spec bound (ratio, LiteRT's ratio, which bound)."""
    drift = e.get("drift") or ""
    if not drift:
        return "<td></td>"
    text = drift if drift != "beyond" else "BEYOND spec bound"
    ratio = e.get("bound_ratio")
    if drift != "exact" and ratio is not None:
        unit = " ulp" if drift == "composite" else "x"
        text += f" {_fmt_num(ratio)}{unit}"
        if e.get("litert_bound_ratio") is not None:
            text += f" (LiteRT {_fmt_num(e['litert_bound_ratio'])})"
    title = _E(str(e.get("bound") or ""))
    color = _DRIFT_COLORS.get(drift, "inherit")
    return f'<td class="drift" data-drift="{_E(drift)}" title="{title}" style="color:{color}">{_E(text)}</td>'


def _entry_err(e: Mapping[str, Any]) -> str:
    return f"rel {_fmt_num(e['error'])}" if e["metric"] == "rel" else f"{_fmt_num(e['error'])} LSB"


# ------------------------------------------------------------------------------------------------ Chromium
_CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def chromium_path() -> str | None:
    """The headless browser to use: ``$TF2TOSA_CHROMIUM`` or the first of chromium/chrome on PATH."""
    env = os.environ.get("TF2TOSA_CHROMIUM")
    if env:
        return env if Path(env).is_file() else shutil.which(env)
    for name in _CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _chromium(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    exe = chromium_path()
    if exe is None:
        raise FileNotFoundError("no chromium/chrome on PATH (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="tf2tosa-chromium-") as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def screenshot(html_path: str | os.PathLike[str], png_path: str | os.PathLike[str], *, width: int = 1400,
               height: int = 2000, timeout: float = 120.0) -> Path:
    """Save a PNG of ``html_path`` rendered by headless Chromium; raises if none is installed or it fails."""
    src = Path(html_path).resolve()
    out = Path(png_path).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.unlink()
    proc = _chromium([f"--screenshot={out}", f"--window-size={width},{height}", "--virtual-time-budget=3000",
                      src.as_uri()], timeout)
    if not out.exists() or out.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
    return out
