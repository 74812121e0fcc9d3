"""Run the Arm TOSA reference model on one .tosa file (run by the tosa-tools interpreter).

Usage: ``python _tosa_worker.py DIR`` where DIR holds ``model.tosa``, ``request.json``
(``{"inputs": [{"file": "in_0.npy", "dtype": "bfloat16" | null}, ...], "options": {...}}``)
and the ``.npy`` input files.  Writes ``out_<i>.npy`` and ``result.json`` (status, outputs with
their ml_dtypes names).  Arrays whose dtype numpy cannot store in ``.npy`` (bfloat16, fp8) travel
as their raw unsigned-integer bit patterns plus the ml_dtypes name.

``python _tosa_worker.py --serve`` keeps running: it reads one DIR per line on stdin, handles it as above and
answers with the line ``@@tf2tosa-done@@ DIR`` on stdout (other stdout lines are the reference model's own
messages).  A request that raises leaves ``error.txt`` in DIR instead of ``result.json``.

This file must not import tf2tosa: it runs in a separate environment with other numpy /
flatbuffers versions.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def main(directory: str) -> int:
    import numpy as np

    with open(os.path.join(directory, "request.json")) as f:
        req = json.load(f)
    try:
        import ml_dtypes  # noqa: F401  (registers bfloat16/fp8 dtype names)

        have_ml_dtypes = True
    except ImportError:  # pragma: no cover - ml_dtypes ships with tosa-tools
        have_ml_dtypes = False

    def decode(entry: dict[str, Any]) -> Any:
        # bf16/fp8 inputs stay raw unsigned-integer bit patterns: that is what the reference model
        # accepts for them (it rejects ml_dtypes arrays)
        return np.ascontiguousarray(np.load(os.path.join(directory, entry["file"]), allow_pickle=False))

    inputs = [decode(e) for e in req["inputs"]]
    with open(os.path.join(directory, "model.tosa"), "rb") as fb:
        model = fb.read()

    import tosa_reference_model

    options = req.get("options", {})
    outputs, status = tosa_reference_model.run(model, inputs, **options)
    result: dict[str, Any] = {"status": status.name, "outputs": []}
    for i, out in enumerate(outputs or []):
        arr = np.asarray(out)
        entry: dict[str, Any] = {"file": f"out_{i}.npy", "dtype": None}
        if arr.dtype.kind == "V":  # bf16 / fp8 come back as raw void bytes; the caller knows the type
            arr = arr.view({1: np.uint8, 2: np.uint16}[arr.dtype.itemsize])
        elif have_ml_dtypes and arr.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "int4"):
            entry["dtype"] = arr.dtype.name
            arr = arr.view({1: np.uint8, 2: np.uint16}[arr.dtype.itemsize])
        np.save(os.path.join(directory, entry["file"]), arr, allow_pickle=False)
        result["outputs"].append(entry)
    with open(os.path.join(directory, "result.json"), "w") as f:
        json.dump(result, f)
    return 0


DONE = "@@tf2tosa-done@@"


def serve() -> int:
    for line in sys.stdin:
        directory = line.strip()
        if not directory:
            continue
        try:
            main(directory)
        except Exception as e:  # reported to the caller through error.txt; the worker stays up
            with open(os.path.join(directory, "error.txt"), "w") as f:
                f.write(f"{type(e).__name__}: {e}")
        sys.stdout.write(f"\n{DONE} {directory}\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[1:] == ["--serve"] else main(sys.argv[1]))
