"""Measure the ``specialize`` figures (issue 13 items 4-5) on the test suite's ``--dynamic`` models.

For each model of tests/test_specialize.py (``MODELS``) and each of its ``--dynamic`` files (``.tosa`` and
``.mlir``), read back; at each listed size: our executor's run of the symbolic program, ``specialize``, tosa-opt's
strict TOSA 1.0 validation at level 8K (declared profiles/extensions, compared with the static conversion's), the
Arm reference model's run of the specialised program against its run of the default conversion at that size (bit
for bit), and against our executor on the symbolic program (integers: mismatches; floats: max |diff|).

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
    from tests.test_specialize import MODELS, _data
    from tf2tosa.api import convert_dynamic
    from tf2tosa.executor import run_checked
    from tf2tosa.verify import tosa_tools

    bad = 0
    rows = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case, (name, quant, fixed, sizes) in MODELS.items():
            source = model(name, quant)
            fb, text = Path(tmp) / f"{case}.tosa", Path(tmp) / f"{case}.mlir"
            convert_dynamic(source, dims=fixed).save(fb, mlir=text)
            for path in (fb, text):
                sym = tf2tosa.load(path)
                g = sym.graph
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
                    equal_default = equal_sym = True
                    gap = 0.0
                    mismatches = 0
                    for out, a in ours.outputs.items():
                        r = np.asarray(ref[out]).reshape(a.shape)
                        equal_default &= bool(np.array_equal(r, np.asarray(ref_default[out]).reshape(a.shape)))
                        equal_sym &= bool(np.array_equal(mine.outputs[out], a))
                        if quant is None:
                            gap = max(gap, float(np.max(np.abs(r.astype(np.float64) - a))))
                        else:
                            mismatches += int(np.count_nonzero(r != a))
                    good = ok and same_decl and equal_default and equal_sym and ours.ok and mine.ok and (
                        mismatches == 0)
                    bad += not good
                    rows += 1
                    vs_ours = f"mismatches={mismatches}" if quant else f"max|ref-ours|={gap:.3g}"
                    print(f"{case:24s} {path.suffix:6s} {shapes}  tosa-opt 1.0/8K {'ok' if ok else 'FAIL'}  "
                          f"profiles/extensions as static: {same_decl}  ref == ref(default): {equal_default}  "
                          f"executor(specialized) == executor(symbolic): {equal_sym}  ref vs executor(symbolic): "
                          f"{vs_ours}  specialize {secs * 1e3:.1f} ms")
    print(f"{rows - bad} of {rows} specialisations hold every check")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
