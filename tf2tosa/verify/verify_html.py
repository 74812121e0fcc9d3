"""The HTML page of one ``tf2tosa verify`` run (``verify --report out.html``).

Self-contained (inline CSS and SVG, no script needed).  Per output: the verdict and the bound it used; for integer
outputs a histogram of |difference| in LSB; for float outputs the error distribution as |error| / bound; the worst
elements.  For float graphs, the spec-accuracy check (every float op against its TOSA 1.0 bound); the information
lines (e.g. how far LiteRT's optimized kernels differ); and, when a per-layer comparison ran, its error plot.
Each plot is an ``<svg class="plot" data-plot="…">`` so tests (and people) can find them.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .compare import FLOAT_BOUND_SOURCE, ORACLE_TEXT, RATIO_EDGES, OutputReport, VerifyReport
from .report import layer_plots
from .spec_check import bound_use

if TYPE_CHECKING:
    from .layers import LayerReport

_E = html.escape

_CSS = """
:root { --ink:#1d2433; --muted:#6b778c; --line:#dde3ec; --card:#fff; --ok:#1f9d55; --bad:#d64545; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--ink);
       background:#f3f5f9; }
header { background:#1d2433; color:#fff; padding:18px 32px; }
header h1 { margin:0; font-size:20px; } header .sub { color:#b8c2d6; font-size:13px; margin-top:4px; }
main { padding:8px 32px 24px; max-width:1100px; }
section { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:14px 18px;
          margin:14px 0; }
h2 { font-size:16px; margin:0 0 6px; } h3 { font-size:13px; margin:12px 0 4px; color:#34425a; }
.badge { display:inline-block; padding:1px 9px; border-radius:10px; color:#fff; font-size:11px; font-weight:700; }
.ok { background:var(--ok); } .bad { background:var(--bad); }
.kv { color:var(--muted); font-size:12.5px; overflow-wrap:anywhere; } .kv b { color:var(--ink); }
table { border-collapse:collapse; font-size:12.5px; margin:4px 0; }
th, td { border-bottom:1px solid #eef1f5; padding:3px 10px; text-align:left; }
td.num { text-align:right; font-variant-numeric:tabular-nums; }
svg.plot { display:block; max-width:760px; margin:6px 0 4px; }
.ptitle { fill:#34425a; font-size:12px; font-weight:600; } .tick { fill:#6b778c; font-size:10px; }
.axis { fill:#6b778c; font-size:11px; } .thr { fill:#c77c00; font-size:10px; } .first { fill:#d64545; font-size:11px; }
.info { background:#eef6ff; border-left:3px solid #2a6fdb; padding:5px 10px; margin:6px 0; font-size:13px; }
.why { background:#fff6f5; border-left:3px solid var(--bad); padding:5px 10px; margin:6px 0; font-size:13px; }
footer { color:var(--muted); font-size:12px; padding:0 32px 24px; }
"""


def _num(x: float) -> str:
    if isinstance(x, int):
        return str(x)
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    return f"{x:.3g}" if 1e-3 <= abs(x) < 1e4 else f"{x:.2e}"


def svg_bars(labels: Sequence[str], counts: Sequence[int], *, title: str, xlabel: str, kind: str,
             bad_from: int | None = None, width: int = 720, height: int = 210) -> str:
    """A bar chart of ``counts`` (log-scaled heights, the count written on each bar).  Bars from index
    ``bad_from`` on are drawn red (outside the bound)."""
    ml, mr, mt, mb = 48, 12, 26, 40
    pw, ph = width - ml - mr, height - mt - mb
    n = max(len(counts), 1)
    top = math.log10(1 + max(list(counts) + [1])) * 1.12  # headroom for the count above the tallest bar
    bw = pw / n
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-plot="{_E(kind)}" viewBox="0 0 {width} '
           f'{height}" width="100%" role="img" aria-label="{_E(title)}">',
           f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#fbfcfe" stroke="#d9dee7"/>',
           f'<text x="{ml}" y="16" class="ptitle">{_E(title)}</text>']
    for k in range(-1, int(math.ceil(top)) + 1):
        c = 0 if k < 0 else 10 ** k
        y = mt + ph * (1 - math.log10(1 + c) / top) if top else mt + ph
        if y < mt - 0.5:
            break
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e8ecf2"/>')
        out.append(f'<text x="{ml - 5}" y="{y + 3:.1f}" text-anchor="end" class="tick">{c}</text>')
    for i, (lab, c) in enumerate(zip(labels, counts)):
        h = ph * math.log10(1 + c) / top if top else 0
        x = ml + i * bw + bw * 0.12
        color = "#d64545" if bad_from is not None and i >= bad_from else "#3b7dd8"
        out.append(f'<rect class="bar" x="{x:.1f}" y="{mt + ph - h:.1f}" width="{bw * 0.76:.1f}" height="{h:.1f}" '
                   f'fill="{color}"><title>{_E(lab)}: {c}</title></rect>')
        if c:
            out.append(f'<text x="{x + bw * 0.38:.1f}" y="{mt + ph - h - 3:.1f}" text-anchor="middle" '
                       f'class="tick">{c}</text>')
        out.append(f'<text x="{x + bw * 0.38:.1f}" y="{mt + ph + 13}" text-anchor="middle" class="tick">'
                   f'{_E(lab)}</text>')
    if bad_from is not None and 0 < bad_from <= n:
        bx = ml + bad_from * bw
        out.append(f'<line x1="{bx:.1f}" x2="{bx:.1f}" y1="{mt}" y2="{mt + ph}" stroke="#f0a020" '
                   f'stroke-dasharray="5 4" stroke-width="1.3"/>')
        out.append(f'<text x="{bx + 4:.1f}" y="{mt + ph - 4}" text-anchor="start" class="thr">outside the bound →'
                   f'</text>')
    out.append(f'<text x="{ml + pw / 2:.1f}" y="{height - 6}" text-anchor="middle" class="axis">{_E(xlabel)}</text>')
    out.append(f'<text transform="translate(12,{mt + ph / 2:.1f}) rotate(-90)" text-anchor="middle" class="axis">'
               f'elements (log)</text>')
    out.append("</svg>")
    return "\n".join(out)


def _lsb_plot(o: OutputReport) -> str:
    lsb: dict[int, int] = {int(k): int(v) for k, v in o.detail.get("lsb", {}).items()}
    top = max(list(lsb) + [1])
    if top <= 15:
        keys = list(range(top + 1))
        labels = [str(k) for k in keys]
        counts = [lsb.get(k, 0) for k in keys]
    else:
        keys = list(range(15))
        labels = [str(k) for k in keys] + [f"≥15 (max {top})"]
        counts = [lsb.get(k, 0) for k in keys] + [sum(v for k, v in lsb.items() if k >= 15)]
    return svg_bars(labels, counts, title=f"{o.name}: |TOSA − oracle| in LSB (the bound is 0: exact)",
                    xlabel="difference (LSB)", kind="lsb-histogram", bad_from=1)


def _ratio_plot(o: OutputReport) -> str:
    counts = list(o.detail.get("ratio", [0] * len(RATIO_EDGES)))
    labels = [f"≤{e:g}" for e in RATIO_EDGES[1:]] + [">1"]
    return svg_bars(labels, counts, title=f"{o.name}: |error| / bound (bound {_num(o.bound_value)})",
                    xlabel="|error| as a fraction of the bound", kind="error-distribution",
                    bad_from=len(RATIO_EDGES) - 1)


def _worst_table(o: OutputReport) -> str:
    """The largest errors, each row with its input set and that set's own max |oracle| and bound (the sets of a
    run can differ in magnitude: one set's maximum beside another set's values would mislead)."""
    rows = o.detail.get("worst", [])
    if not rows:
        return '<div class="kv">every element matches the oracle exactly</div>'
    unit = "" if o.is_float else " LSB"
    with_ratio = o.is_float and any(w.get("bound", o.bound_value) for w in rows)

    def ratio(w: dict[str, Any]) -> str:
        bound = float(w.get("bound", o.bound_value) or 0.0)
        return f"<td class=num>{_num(w['err'] / bound) if bound else '-'}</td>" if with_ratio else ""

    body = "".join(f"<tr><td class=num>{int(w.get('set', 0)) + 1}</td><td>{_E(str(tuple(w['index'])))}</td>"
                   f"<td class=num>{_num(w['got'])}</td><td class=num>{_num(w['ref'])}</td>"
                   f"<td class=num>{_num(w['err'])}{unit}</td>"
                   f"<td class=num>{_num(w.get('max_ref', o.max_ref))}</td>{ratio(w)}</tr>" for w in rows)
    head = ("<tr><th>input set</th><th>index</th><th>TOSA</th><th>oracle</th><th>|error|</th>"
            "<th>max |oracle| of its set</th>" + ("<th>|error| / its set's bound</th>" if with_ratio else "")
            + "</tr>")
    return f'<table class="worst"><thead>{head}</thead><tbody>{body}</tbody></table>'


def _output_section(o: OutputReport, oracle: str) -> str:
    badge = '<span class="badge ok">ok</span>' if o.ok else '<span class="badge bad">FAIL</span>'
    sets = int(o.detail.get("sets", 1))
    which = f" (input set {int(o.detail.get('worst_set', 0)) + 1} of {sets}, the worst)" if sets > 1 else ""
    kv = (f'<div class="kv">shape <b>{list(o.shape)}</b> · dtype <b>{_E(o.dtype)}</b> · oracle '
          f'<b>{_E(ORACLE_TEXT.get(oracle, oracle))}</b> · elements compared <b>{o.detail.get("elements", "?")}</b>'
          f' · max |error| <b>{_num(o.max_abs)}</b> · max |oracle| <b>{_num(o.max_ref)}</b>{_E(which)} · mismatches '
          f'<b>{o.mismatches}</b></div><div class="kv">bound{_E(which)}: <b>{_E(o.bound)}</b>'
          + (f" — {_E(FLOAT_BOUND_SOURCE)}" if o.is_float else " — integer outputs must match bit for bit")
          + "</div>")
    plot = _ratio_plot(o) if o.is_float else _lsb_plot(o)
    return (f'<section class="output"><h2>{badge} output {_E(o.name)}</h2>{kv}{plot}<h3>worst elements</h3>'
            f"{_worst_table(o)}</section>")


def _spec_section(report: VerifyReport) -> str:
    spec = report.spec
    if spec is None:
        return ""
    badge = '<span class="badge ok">ok</span>' if spec.ok else '<span class="badge bad">FAIL</span>'
    ops = list(getattr(spec, "ops", []) or [])
    parts = [f'<section class="spec"><h2>{badge} spec accuracy (TOSA 1.0 §1.10)</h2>',
             f'<div class="kv">every float op result re-evaluated in fp64 on the same inputs and checked against '
             f'the bound the specification sets for that op (ULP, absolute, dot-product or exact): <b>{spec.checked}'
             f'</b> checked, <b>{len(spec.failures)}</b> outside their bound</div>']
    if ops:
        worst = sorted(ops, key=lambda v: -v.worst)[:24]
        parts.append(_spec_plot(worst))
    if spec.worst is not None:
        parts.append(f'<div class="kv">largest error: <b>{_E(spec.worst.op)}</b>, '
                     f'{_E(bound_use(spec.worst.worst))}</div>')
    for f in spec.failures[:20]:
        parts.append(f'<div class="why">{_E(f.op)} {_E(f.result)}: {_E(f.message)}</div>')
    parts.append("</section>")
    return "".join(parts)


def _spec_plot(verdicts: Sequence[Any], width: int = 720) -> str:
    """Horizontal bars: each op's worst |error| / bound (log scale, 1 = the bound)."""
    row = 16
    ml, mr, mt = 290, 60, 24
    height = mt + row * len(verdicts) + 22
    pw = width - ml - mr
    lo, hi = -8.0, 1.0

    def x_of(r: float) -> float:
        v = lo if r <= 0 else min(max(math.log10(r), lo), hi)
        return ml + pw * (v - lo) / (hi - lo)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-plot="spec-bounds" viewBox="0 0 {width} '
           f'{height}" width="100%" role="img" aria-label="float ops against their spec bound">',
           f'<text x="{ml}" y="14" class="ptitle">float ops: worst |error| / spec bound (log; the bound is 1)</text>']
    for i, v in enumerate(verdicts):
        y = mt + i * row
        color = "#d64545" if not v.ok else "#1f9d55"
        label = v.op if len(v.op) <= 44 else v.op[:43] + "…"
        out.append(f'<text x="{ml - 6}" y="{y + 11}" text-anchor="end" class="tick">{_E(label)}</text>')
        out.append(f'<rect class="bar" x="{ml}" y="{y + 2}" width="{max(x_of(v.worst) - ml, 1):.1f}" height="{row - 5}"'
                   f' fill="{color}"><title>{_E(v.op)}: {_E(bound_use(v.worst))}</title></rect>')
        out.append(f'<text x="{x_of(v.worst) + 4:.1f}" y="{y + 11}" class="tick">{_num(v.worst)}</text>')
    bx = x_of(1.0)
    out.append(f'<line x1="{bx:.1f}" x2="{bx:.1f}" y1="{mt}" y2="{height - 20}" stroke="#f0a020" '
               f'stroke-dasharray="5 4" stroke-width="1.3"/>')
    for k in range(int(lo), int(hi) + 1, 2):
        out.append(f'<text x="{x_of(10.0 ** k):.1f}" y="{height - 6}" text-anchor="middle" class="tick">1e{k}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _layers_section(layers: LayerReport | None) -> str:
    if layers is None:
        return ""

    d = layers.to_dict()
    first = layers.first_divergent
    head = ("no diverging layer" if first is None else
            f"first divergent: {first.op} → {first.tensor!r} (TOSA {first.tosa_op})")
    plots = layer_plots(d["layers"], layers.float_threshold, layers.int_threshold, width=760)
    plots = plots.replace('class="plot"', 'class="plot" data-plot="layers"')
    return (f'<section class="layers"><h2>per-layer comparison</h2><div class="kv">{len(layers.layers)} layers '
            f'compared · {len(layers.unmapped)} unmapped · <b>{_E(head)}</b></div>{plots}</section>')


def render_verify_html(report: VerifyReport, layers: LayerReport | None = None) -> str:
    """The page for one verify run (and its per-layer comparison, if any)."""
    verdict = "PASS" if report.ok and (layers is None or layers.first_divergent is None) else "FAIL"
    title = f"tf2tosa verify: {report.model}"
    oracle = _E(ORACLE_TEXT.get(report.oracle, report.oracle))
    sub = f"{verdict} · {report.runs} input set(s) · judged against {oracle} · {len(report.outputs)} output(s)"
    body = [f'<section class="summary"><h2><span class="badge {"ok" if verdict == "PASS" else "bad"}">{verdict}'
            f"</span> {_E(report.model)}</h2>"]
    body += [f'<div class="why">warning: {_E(line)}</div>' for line in report.warnings]
    body += [f'<div class="info">{_E(line)}</div>' for line in report.info]
    body.append("</section>")
    body += [_output_section(o, report.oracle) for o in report.outputs]
    body.append(_spec_section(report))
    body.append(_layers_section(layers))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
            f"content=\"width=device-width, initial-scale=1\"><title>{_E(title)}</title><style>{_CSS}</style></head>"
            f"<body>\n<header><h1>{_E(title)}</h1><div class=\"sub\">{sub}</div></header>\n<main>\n"
            + "\n".join(b for b in body if b)
            + "\n</main>\n<footer>Generated by tf2tosa verify --report. Self-contained: inline CSS and SVG.</footer>"
              "\n</body></html>\n")
