"""Measure the ``specialize`` figures (issue 13 acceptance (c)) on the test suite's ``--dynamic`` models.

For each model of tests/test_specialize.py (``MODELS``: the four acceptance models, float32 and int8, every unknown
dimension symbolic) and each of its ``--dynamic`` files (``.tosa`` and ``.mlir``), read back; at each listed size:
``specialize``; tosa-opt's strict TOSA 1.0 validation at level 8K (declared profiles/extensions, compared with the
default conversion's); the Arm reference model's run of the specialised program against its run of the default
(static) conversion at that size, bit for bit; our executor's run of the symbolic program against its run of the
default conversion (bit for bit) and of the specialised program (bit for bit); and the reference model against our
executor on the symbolic program (int8: mismatches; float: max |diff| / max|ref|).  Also: whether every value of the
file read back is labelled as in the in-memory ``--dynamic`` program, and the size-guard warnings (a ``.mlir``
carries the guards, a ``.tosa`` cannot).  One row per (model, file, size); a summary line per check.

    PYTHONPATH=$PWD .venv/bin/python tools/specialize_figures.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    import tf2tosa
    from tests.modelgen_dyn import model
    from tests.test_specialize import MODELS, _data, _labels
    from tf2tosa.api import convert_dynamic
    from tf2tosa.executor import run_checked
    from tf2tosa.verify import tosa_tools

    checks = ["tosa-opt", "decl", "ref=ref(default)", "ours=ours(default)", "ours(spec)=ours", "labels"]
    totals = dict.fromkeys(checks, 0)
    rows = 0
    worst_gap = 0.0
    int_mismatches = 0
    print(f"{'case':20s} {'file':5s} {'input shape':16s} {'tosa-opt 1.0/8K':15s} {'decl':5s} {'ref=ref(def)':12s} "
          f"{'ours=ours(def)':14s} {'ours(spec)=ours':15s} {'labels':6s} {'ref vs ours':18s} {'guards':6s} "
          f"{'specialize':>10s}")
    with tempfile.TemporaryDirectory() as tmp:
        for case, (name, quant, fixed, sizes) in MODELS.items():
            source = model(name, quant)
            fb, text = Path(tmp) / f"{case}.tosa", Path(tmp) / f"{case}.mlir"
            dyn = convert_dynamic(source, dims=fixed)
            dyn.save(fb, mlir=text)
            want_labels = _labels(dyn.graph)
            for path in (fb, text):
                sym = tf2tosa.load(path)
                g = sym.graph
                labels_ok = _labels(g) == want_labels
                for k, shapes in enumerate(sizes):
                    feed = {v.name: _data(shapes[v.name], v.dtype, seed=k) for v in g.inputs}
                    ours = run_checked(g, feed, level="NONE")
                    t0 = time.perf_counter()
                    static = tf2tosa.specialize(sym, input_shapes=shapes)
                    secs = time.perf_counter() - t0
                    default = tf2tosa.convert(source, input_shapes=shapes)
                    data = static.to_bytes()
                    ok, _ = tosa_tools.validate(data, static.profiles, static.extensions, level="8k")
                    same_decl = (static.profiles, static.extensions) == (default.profiles, default.extensions)
                    ref = tosa_tools.run_reference(data, feed)
                    ref_default = tosa_tools.run_reference(default.to_bytes(), feed)
                    mine = run_checked(static.graph, feed)
                    theirs = run_checked(default.graph, feed, level="NONE")
                    eq_ref = eq_default = eq_spec = ours.ok and mine.ok and theirs.ok
                    gap = 0.0
                    mismatches = 0
                    for (out, a), b in zip(ours.outputs.items(), theirs.outputs.values()):
                        r = np.asarray(ref[out]).reshape(a.shape)
                        eq_ref &= bool(np.array_equal(r, np.asarray(ref_default[out]).reshape(a.shape)))
                        eq_spec &= bool(np.array_equal(mine.outputs[out], a))
                        eq_default &= bool(np.array_equal(a, b))
                        if quant is None:
                            gap = max(gap, float(np.max(np.abs(r.astype(np.float64) - a))) / float(np.max(np.abs(r))))
                        else:
                            mismatches += int(np.count_nonzero(r != a))
                    worst_gap = max(worst_gap, gap)
                    int_mismatches += mismatches
                    for key, good in zip(checks, [ok, same_decl, eq_ref, eq_default, eq_spec, labels_ok]):
                        totals[key] += bool(good)
                    rows += 1
                    vs_ours = f"{mismatches} mismatches" if quant else f"{gap:.2g} x max|ref|"
                    warned = len(static.graph.record.warnings)
                    shape = "x".join(map(str, shapes["x"]))
                    print(f"{case:20s} {path.suffix[1:]:5s} {shape:16s} {'ok' if ok else 'FAIL':15s} "
                          f"{'ok' if same_decl else 'FAIL':5s} {str(eq_ref):12s} {str(eq_default):14s} "
                          f"{str(eq_spec):15s} {str(labels_ok):6s} {vs_ours:18s} {warned:<6d} {secs * 1e3:8.1f} ms")
    for key in checks:
        print(f"{key}: {totals[key]} of {rows}")
    print(f"reference model vs our executor on the symbolic program: int8 {int_mismatches} mismatches; float "
          f"at most {worst_gap:.2g} x max|ref|")
    bad = sum(rows - n for n in totals.values())
    print(f"{rows} specialisations, {'every check holds' if not bad else f'{bad} failed checks'}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
