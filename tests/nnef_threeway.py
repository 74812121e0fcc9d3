"""Test tooling: the three-way check of the NNEF frontend on one ``.tflite`` model.

``.tflite`` → NNEF with Khronos' nnef-tools (:func:`nnef_convert.tflite_to_nnef`) → TOSA with us, then:

* the TOSA program (our executor) against the original ``.tflite`` in LiteRT (BUILTIN_REF kernels for integer
  models): float outputs within 1e-5 × max|ref|, integer outputs bit-exact;
* ``tosa-opt`` strict validation for the program's profiles/extensions;
* the Arm reference model on the same inputs: integer outputs identical to ours, float outputs within the same
  tolerance of LiteRT.

``python -m tests.nnef_threeway model.tflite …`` prints one line per model and the counts.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

try:
    import nnef_convert  # pytest puts tests/ on the path
except ImportError:  # python -m tests.nnef_threeway
    from tests import nnef_convert

FLOAT_TOL = 1e-5


@dataclass
class Result:
    model: str
    #: nnef-tools | nnef-invalid (the Khronos parser rejects nnef-tools' output) | convert | run | litert |
    #: tosa-opt | reference | ok
    stage: str = "ok"
    detail: str = ""
    mismatches: int = 0
    max_rel: float = 0.0
    transposes: dict[str, int] = field(default_factory=dict)
    #: our outputs through NNEF equal (bit for bit) our outputs of the .tflite converted directly
    same_as_direct: bool | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.stage == "ok"


def _compare(ours: np.ndarray, ref: np.ndarray) -> tuple[int, float]:
    """(integer mismatches, max |diff| / max |ref| for floats)."""
    ours, ref = np.asarray(ours), np.asarray(ref)
    if ours.shape != ref.shape:
        ours = ours.reshape(ref.shape)
    if ref.dtype.kind == "f":
        scale = float(np.max(np.abs(ref))) or 1.0
        rel = float(np.max(np.abs(ours.astype(np.float64) - ref.astype(np.float64)))) / scale
        return 0, rel
    return int(np.count_nonzero(ours.astype(np.int64) != ref.astype(np.int64))), 0.0


def check(tflite: str | os.PathLike[str], *, reference: bool = True, seed: int = 0) -> Result:
    """Run the three-way check on one model; never raises for a model-level failure."""
    import tf2tosa
    from tf2tosa.errors import ConversionError
    from tf2tosa.verify import litert, tosa_tools

    path = Path(tflite)
    res = Result(path.name)
    t0 = time.monotonic()
    try:
        nnef_dir = nnef_convert.tflite_to_nnef(path)
    except nnef_convert.NNEFToolsError as e:
        res.stage, res.detail = "nnef-tools", str(e)
        return res
    try:
        model = tf2tosa.convert(nnef_dir)
    except ConversionError as e:
        msg = str(e).splitlines()[0]
        invalid = msg.startswith(("parse error", "shape inference failed"))
        res.stage, res.detail = ("nnef-invalid" if invalid else "convert"), msg[:400]
        return res
    res.transposes = dict(model.graph.record.layout or {})
    res.transposes["tosa"] = sum(1 for op in model.graph.ops.values() if op.name == "tosa.TRANSPOSE")
    data = path.read_bytes()
    inputs = litert.random_inputs(data, seed=seed)
    integer = any(np.dtype(d["dtype"]).kind in "iu" for d in litert.output_details(data))
    ref = litert.run_tflite(data, inputs, reference_kernels=integer)
    # uint8 model inputs/outputs travel as i8 tensors holding the uint8 bits (the unsigned_io pass)
    unsigned = model.graph.unsigned_io
    feed = [a.view(np.int8) if a.dtype == np.uint8 else a for a in inputs.values()]

    def as_source(outs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: (v.view(np.uint8) if k in unsigned and v.dtype == np.int8 else v) for k, v in outs.items()}

    try:
        ours = as_source(model.run(feed))
    except ConversionError as e:  # e.g. nnef-tools turned a uint8 model input into int8
        res.stage, res.detail = "run", str(e).splitlines()[0][:400]
        return res
    worst_rel, mism = 0.0, 0
    for r, o in zip(ref.values(), ours.values()):
        m, rel = _compare(o, r)
        mism += m
        worst_rel = max(worst_rel, rel)
    res.mismatches, res.max_rel = mism, worst_rel
    dm = tf2tosa.convert(str(path))
    direct = {k: (v.view(np.uint8) if k in dm.graph.unsigned_io and v.dtype == np.int8 else v)
              for k, v in dm.run(feed).items()}
    res.same_as_direct = all(np.array_equal(np.asarray(a).reshape(-1), np.asarray(b).reshape(-1))
                             for a, b in zip(direct.values(), ours.values()))
    if mism or worst_rel > FLOAT_TOL:
        res.stage, res.detail = "litert", f"{mism} integer mismatches, max rel diff {worst_rel:.3g}"
        return res
    if reference and tosa_tools.available():
        blob = model.to_bytes()
        ok, msg = tosa_tools.validate(blob, model.profiles, model.extensions)
        if not ok:
            res.stage, res.detail = "tosa-opt", msg.strip().splitlines()[0] if msg.strip() else "invalid"
            return res
        arm = as_source(tosa_tools.run_reference(blob, feed))
        for a, o, r in zip(arm.values(), ours.values(), ref.values()):
            if np.asarray(r).dtype.kind == "f":
                _, rel = _compare(a, r)
                if rel > FLOAT_TOL:
                    res.stage, res.detail = "reference", f"Arm reference model max rel diff {rel:.3g}"
                    return res
            elif _compare(a, o)[0]:
                res.stage, res.detail = "reference", f"Arm reference model: {_compare(a, o)[0]} mismatches"
                return res
    res.seconds = time.monotonic() - t0
    return res


def main(argv: list[str]) -> int:
    results = []
    for a in argv:
        r = check(a)
        results.append(r)
        print(f"{r.stage:10s} {r.model:60s} mism={r.mismatches} rel={r.max_rel:.2g} "
              f"direct={r.same_as_direct} {r.transposes} {r.detail}",
              flush=True)
    tools_failed = [r for r in results if r.stage in ("nnef-tools", "nnef-invalid")]
    converted = [r for r in results if r not in tools_failed]
    print(f"{len(results)} models; nnef-tools made valid NNEF of {len(converted)}; "
          f"we converted {sum(r.stage != 'convert' for r in converted)}; matched {sum(r.ok for r in results)}; "
          f"identical to the direct .tflite conversion {sum(bool(r.same_as_direct) for r in results)}")
    for r in tools_failed:
        print(f"  nnef-tools cannot convert {r.model}: {r.detail}")
    return 0 if all(r.ok for r in converted) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
