"""Measure the ``--dynamic`` figures (issue 13 items 2-4 groundwork) on the test suite's dynamic models.

For each case of tests/test_dynamic_output.py: one symbolic 1.1-draft program (``convert_dynamic``, every unknown
dimension symbolic), tosa-opt validation of its MLIR and of our ``.tosa`` as 1.1.draft with its declared
profiles/extensions, and at each of the case's input shapes our executor's run of that one program against LiteRT
resized to the shape (float: max |ours - ref| / max |ref|; int8: mismatches against BUILTIN_REF) and against the
static conversion at that shape (bit-identical or not).

    PYTHONPATH=$PWD .venv/bin/python tools/dynamic_figures.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    import tempfile

    import tf2tosa
    from tests.modelgen_dyn import model
    from tests.test_dynamic_output import CASES, SHAPES, _input
    from tf2tosa.api import convert_dynamic
    from tf2tosa.executor import run_checked
    from tf2tosa.tosa.optable import DRAFT_VERSION
    from tf2tosa.verify import tosa_tools
    from tf2tosa.verify.litert import run_tflite

    bad = 0
    from tf2tosa.tosa.optable import is_draft

    for case, (name, quant) in CASES.items():
        data = model(name, quant)
        t0 = time.perf_counter()
        dyn = convert_dynamic(data)
        secs = time.perf_counter() - t0
        ok, msg = tosa_tools.validate_mlir(dyn.to_mlir(), dyn.profiles, dyn.extensions, level="none",
                                           version=DRAFT_VERSION)
        with tempfile.TemporaryDirectory() as tmp:
            dyn.save(Path(tmp) / "m.tosa")
            ok_fb, msg_fb = tosa_tools.validate(Path(tmp) / "m.tosa", dyn.profiles, dyn.extensions, level="none",
                                                version=DRAFT_VERSION)
        shape_ops = sum(1 for op in dyn.graph.ops.values() if is_draft(op.opcode))
        g = dyn.graph
        print(f"{case}: converted in {secs:.2f}s; input {list(g.inputs[0].shape)} -> output "
              f"{list(g.outputs[0].shape)}; {shape_ops} EXT-SHAPE ops; tosa-opt 1.1.draft: MLIR "
              f"{'valid' if ok else 'INVALID: ' + msg}, .tosa {'valid' if ok_fb else 'INVALID: ' + msg_fb}; "
              f"extensions {', '.join(dyn.extensions)}; {len(g.dims.equalities)} equalities asserted, "
              f"{len(g.dims.guards)} guards listed")
        bad += (not ok) + (not ok_fb)
        for k, shape in enumerate(SHAPES[name]):
            x = _input(shape, quant, seed=k)
            ours = list(run_checked(g, {g.inputs[0].name: x}, level="NONE").outputs.values())
            st = tf2tosa.convert(data, input_shapes={"x": shape}).graph
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
            print(f"  {list(shape)}: vs LiteRT {fig}; vs static conversion {'bit-identical' if same else 'DIFFERS'}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
