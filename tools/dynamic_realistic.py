"""Issue 13 survey of realistic dynamic models (``tests/modelgen_dyn.py``) converted with ``--dynamic``; the one
symbolic program run by our executor at several sizes and compared with LiteRT resized to each size (float: worst
|ours - ref| / max|ref|; int8: mismatches against the BUILTIN_REF kernels), or the conversion's one error line.

    PYTHONPATH=$PWD .venv/bin/python tools/dynamic_realistic.py [MODEL ...]
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from tests.modelgen_dyn import model
from tf2tosa.api import convert_dynamic
from tf2tosa.errors import ConversionError
from tf2tosa.executor import run_checked
from tf2tosa.verify.litert import run_tflite

#: model → input shapes per size (one tuple per model input)
SIZES: dict[str, list[tuple[tuple[int, ...], ...]]] = {
    "audio_cnn": [((1, 21, 8),), ((2, 40, 8),), ((3, 203, 8),), ((1, 402, 8),)],
    "mobilenet": [((1, 16, 16, 3),), ((4, 16, 16, 3),), ((16, 16, 16, 3),)],
    "bert": [((1, 5, 16), (1, 5)), ((2, 12, 16), (2, 12)), ((3, 33, 16), (3, 33))],
    "tcn": [((1, 9, 4),), ((2, 40, 4),), ((3, 101, 4),)],
    "gru": [((1, 5, 4),), ((2, 12, 4),), ((1, 33, 4),)],
    "max_pool_same": [((1, 9, 12, 4),), ((2, 16, 7, 4),), ((1, 31, 30, 4),)],
    "avg_pool_same": [((1, 9, 12, 4),), ((2, 16, 7, 4),), ((1, 31, 30, 4),)],
}


def inputs(name: str, shapes: tuple[tuple[int, ...], ...], quant: str | None, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for k, s in enumerate(shapes):
        if name == "bert" and k == 1:  # the attention mask: 1 keep, 0 padding (the last quarter of each row)
            m = np.ones(s, np.float32)
            m[:, s[1] - s[1] // 4:] = 0
            out.append(m if quant is None else np.where(m > 0, 127, -128).astype(np.int8))
        elif quant:
            out.append(rng.integers(-128, 128, s).astype(np.int8))
        else:
            out.append(rng.uniform(-1.0, 1.0, s).astype(np.float32))
    return out


def survey(name: str, quant: str | None) -> dict[str, Any]:
    data = model(name, quant)
    try:
        g = convert_dynamic(data).graph
    except ConversionError as e:
        return {"outcome": "not yet" if "not yet" in str(e) else "error", "line": str(e).splitlines()[0]}
    worst, sizes = 0.0, []
    for k, shapes in enumerate(SIZES[name]):
        xs = inputs(name, shapes, quant, k)
        got = run_checked(g, {v.name: x for v, x in zip(g.inputs, xs)}, level="NONE")
        if got.status != "VALID":
            return {"outcome": f"run {got.status} at {shapes}", "line": got.message}
        outs = list(got.outputs.values())
        refs = list(run_tflite(data, xs, reference_kernels=quant is not None).values())
        for o, r in zip(outs, refs):
            if o.shape != r.shape:
                return {"outcome": f"shape {o.shape} vs {r.shape} at {shapes}", "line": ""}
            err = float((o != r).sum()) if quant else float(np.abs(o - r).max() / max(np.abs(r).max(), 1e-30))
            worst = max(worst, err)
        sizes.append("x".join(map(str, shapes[0])))
    return {"outcome": "matches", "sizes": sizes, "worst": worst}


def main(names: list[str]) -> None:
    print("| model | variant | outcome | sizes | worst (float: rel; int8: mismatches) |")
    print("|---|---|---|---|---|")
    for name in names or list(SIZES):
        for quant in (None, "int8"):
            try:
                r = survey(name, quant)
            except Exception as e:  # a model TFLite cannot build in this variant
                r = {"outcome": f"build/oracle failed: {type(e).__name__}", "line": str(e).splitlines()[0][:200]}
            if r["outcome"] == "matches":
                print(f"| {name} | {quant or 'f32'} | matches LiteRT | {', '.join(r['sizes'])} | {r['worst']:.3g} |")
            else:
                print(f"| {name} | {quant or 'f32'} | {r['outcome']} | | {r['line']} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
