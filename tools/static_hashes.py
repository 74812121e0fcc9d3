"""Hash the default (static) conversion of every ``.tflite`` in models/samples and the shared caches.

    PYTHONPATH=CHECKOUT .venv/bin/python tools/static_hashes.py OUT.txt      # one line per model
    python tools/static_hashes.py --compare BEFORE.txt AFTER.txt             # counts; the differing lines

Each line is ``path sha256(.tosa)[:16] sha256(.mlir)[:16]``, or ``path ERR Class: message`` when the conversion is
refused.  Lighter than tools/output_hashes.py (no test suite, no zoo run): run it with the code of two commits
(e.g. ``git archive BASE | tar -x -C /tmp/base`` and ``PYTHONPATH=/tmp/base``) on the same caches and compare.
Models only one of the runs saw (caches shared with other checkouts grow) are counted apart.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _files() -> list[str]:
    pats = ["models/samples/*.tflite", ".cache/models/*.tflite", ".cache/zoo/**/*.tflite", ".cache/bench/**/*.tflite"]
    return sorted(f for p in pats for f in glob.glob(os.path.join(ROOT, p), recursive=True))


def run(out_path: str) -> int:
    logging.disable(logging.WARNING)
    import tf2tosa
    from tf2tosa.serializer.tosa_writer import to_bytes

    with open(out_path, "w", encoding="utf-8") as out:
        for f in _files():
            rel = os.path.relpath(f, ROOT)
            try:
                m = tf2tosa.convert(f)
                a = hashlib.sha256(to_bytes(m.graph)).hexdigest()[:16]
                b = hashlib.sha256(m.to_mlir().encode()).hexdigest()[:16]
                out.write(f"{rel} {a} {b}\n")
            except Exception as e:  # noqa: BLE001 - a refusal is a result too (compared by its message)
                out.write(f"{rel} ERR {type(e).__name__}: {str(e)[:80]}\n")
    return 0


def compare(before: str, after: str) -> int:
    def read(p: str) -> dict[str, str]:
        with open(p, encoding="utf-8") as f:
            return {ln.split()[0]: ln.strip() for ln in f if ln.strip()}

    b, a = read(before), read(after)
    common = sorted(set(a) & set(b))
    diff = [k for k in common if a[k] != b[k]]
    errs = sum(1 for k in common if a[k] == b[k] and " ERR " in a[k])
    print(f"{len(common)} models in both: {len(common) - len(diff)} identical ({errs} of them refused with the same "
          f"message), {len(diff)} differ; only before: {len(set(b) - set(a))}, only after: {len(set(a) - set(b))}")
    for k in diff:
        print(f"- {b[k]}\n+ {a[k]}")
    return 1 if diff else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "--compare":
        raise SystemExit(compare(args[1], args[2]))
    if len(args) == 1:
        raise SystemExit(run(args[0]))
    raise SystemExit(__doc__)
