"""``--dynamic`` on every ``.tflite`` with unknown dimensions in models/samples and the shared caches.

    PYTHONPATH=$PWD .venv/bin/python tools/dynamic_survey.py

For each model: ``convert_dynamic`` with the default samples: a symbolic program, a one-line "not yet"
``ConversionError``, or a crash (any other exception: a bug).  Each program is then run by our executor with every
symbolic dimension set to 1, 7 and 40 and compared with the static conversion at that shape on the same random
inputs (sizes at which the static conversion refuses the model are skipped).
"""

from __future__ import annotations

import glob
import logging
import os
import sys
import traceback
from collections import Counter

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> int:
    logging.disable(logging.WARNING)
    import tf2tosa
    from tf2tosa.api import convert_dynamic
    from tf2tosa.converter.passes.input_shapes import dimension_symbols
    from tf2tosa.converter.tflite import load_tflite
    from tf2tosa.executor import run_checked

    pats = ["models/samples/*.tflite", ".cache/models/*.tflite", ".cache/zoo/**/*.tflite"]
    files = sorted(f for p in pats for f in glob.glob(os.path.join(ROOT, p), recursive=True))
    outcome: Counter[str] = Counter()
    runs = same = skipped = 0
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        try:
            if not dimension_symbols(load_tflite(data, file=f)):
                continue
        except tf2tosa.ConversionError:
            continue
        name = os.path.basename(f)
        try:
            g = convert_dynamic(f).graph
        except tf2tosa.ConversionError as e:
            outcome["not yet"] += 1
            print(f"{name}: {str(e).splitlines()[0][:160]}")
            continue
        except Exception as e:  # noqa: BLE001 - counted and shown: a crash is a bug
            outcome["crash"] += 1
            where = traceback.extract_tb(e.__traceback__)[-1]
            print(f"{name}: CRASH {type(e).__name__}: {e} at {where.filename}:{where.lineno}")
            continue
        outcome["symbolic"] += 1
        for size in (1, 7, 40):
            shapes = {v.name: tuple(size if isinstance(d, str) else d for d in v.shape) for v in g.inputs}
            try:
                st = tf2tosa.convert(f, input_shapes=shapes).graph
            except tf2tosa.ConversionError:
                skipped += 1
                continue
            rng = np.random.default_rng(size)
            feeds = {}
            for v in g.inputs:
                dt = v.dtype.np_dtype()
                x = rng.integers(-100, 100, shapes[v.name]) if np.issubdtype(dt, np.integer) else \
                    rng.uniform(-1, 1, shapes[v.name])
                feeds[v.name] = x.astype(dt)
            a = run_checked(g, feeds, level="NONE")
            b = run_checked(st, {sv.name: feeds[v.name] for sv, v in zip(st.inputs, g.inputs)}, level="NONE")
            runs += 1
            ok = a.status == b.status == "VALID" and all(
                np.array_equal(x, y) for x, y in zip(a.outputs.values(), b.outputs.values()))
            same += ok
            if not ok:
                print(f"{name} at {size}: symbolic {a.status} {a.message or ''} / static {b.status}")
    print(f"{sum(outcome.values())} models with unknown dimensions: {outcome['symbolic']} symbolic, "
          f"{outcome['not yet']} not yet, {outcome['crash']} crashes; {runs} runs, {same} bit-identical to the static "
          f"conversion, {skipped} sizes the static conversion refuses")
    return 1 if outcome["crash"] or same != runs else 0


if __name__ == "__main__":
    raise SystemExit(main())
