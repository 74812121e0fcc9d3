"""Measure the ``--dynamic`` figures (issue 13 items 2-4 groundwork) on the test suite's dynamic models.

For each case of tests/test_dynamic_output.py: one symbolic 1.1-draft program (``convert_dynamic``), tosa-opt
validation as 1.1.draft with its declared profiles/extensions, and at batch 1, 4, 16 our executor's run of that one
program against LiteRT resized to the batch (float: max |ours - ref| / max |ref|; int8: mismatches against
BUILTIN_REF) and against the static conversion at that batch (bit-identical or not).

    PYTHONPATH=$PWD .venv/bin/python tools/dynamic_figures.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    import tf2tosa
    from tests.modelgen_dyn import model
    from tests.test_dynamic_output import BATCHES, CASES, _input
    from tf2tosa.api import convert_dynamic
    from tf2tosa.executor import run_checked
    from tf2tosa.tosa.optable import DRAFT_VERSION
    from tf2tosa.verify import tosa_tools
    from tf2tosa.verify.litert import run_tflite

    bad = 0
    for case, (name, quant, fixed, shape_at) in CASES.items():
        data = model(name, quant)
        t0 = time.perf_counter()
        dyn = convert_dynamic(data, dims=fixed)
        secs = time.perf_counter() - t0
        ok, msg = tosa_tools.validate_mlir(dyn.to_mlir(), dyn.profiles, dyn.extensions, level="none",
                                           version=DRAFT_VERSION)
        shape_ops = sum(1 for op in dyn.graph.ops.values() if op.opcode in ("DIM", "MUL_SHAPE", "CONCAT_SHAPE",
                                                                            "ASSERT_EQUAL_SHAPE"))
        print(f"{case}: converted in {secs:.2f}s; {shape_ops} EXT-SHAPE ops; tosa-opt 1.1.draft "
              f"{'valid' if ok else 'INVALID: ' + msg}; extensions {', '.join(dyn.extensions)}")
        bad += not ok
        for b in BATCHES:
            x = _input(shape_at(b), quant, seed=b)
            g = dyn.graph
            ours = list(run_checked(g, {g.inputs[0].name: x}, level="NONE").outputs.values())
            st = tf2tosa.convert(data, input_shapes={"x": shape_at(b)}).graph
            static = list(run_checked(st, {st.inputs[0].name: x}, level="NONE").outputs.values())
            same = all(np.array_equal(a, c) for a, c in zip(ours, static))
            ref = list(run_tflite(data, [x], reference_kernels=quant is not None).values())
            if quant is None:
                rel = max(float(np.max(np.abs(a.astype(np.float64) - r))) / float(np.max(np.abs(r)))
                          for a, r in zip(ours, ref))
                fig = f"max rel err {rel:.2e}"
                bad += rel > 1e-5
            else:
                mism = sum(int(np.count_nonzero(a != r)) for a, r in zip(ours, ref))
                n = sum(r.size for r in ref)
                fig = f"{mism} mismatches / {n}"
                bad += mism != 0
            bad += not same
            print(f"  batch {b:2d}: vs LiteRT {fig}; vs static conversion {'bit-identical' if same else 'DIFFERS'}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
