"""Executor speed on the published architectures of ``bench_apps.py``: ours against LiteRT's default kernels.

For each model of ``bench_apps`` (built from a fixed seed and cached under ``.cache/bench/apps``; float32 and int8
by default), in one run: the ``.tflite`` is converted in this process, then the executor runs the ``.tosa`` and
LiteRT (default kernels) runs the ``.tflite``, each in its own worker process with one thread (``_bench_workers.py``:
three untimed warm-up runs, then ``--repeat`` timed runs; ours checks its first two runs through the kernels and
takes its prepared paths from the third).  Prints the medians, their ratio (ours / LiteRT) and the largest
output difference between the two, in output units: a timing cross-check only - LiteRT's default int8 kernels round
differently from its reference kernels, which our integer results equal bit for bit (``bench_apps.py``'s
``verify`` column, on a first, checked run).  ``last run = first``: our last timed run, which takes the prepared
paths (tables, chains), gave the first run's output bit for bit.  MobileNetV2, the issue's own line, is
``bench_executor.py``.

    python benchmarks/bench_apps_executor.py [--arch NAME ...] [--variant f32|int8|fp16 ...] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_apps import DEFAULT_ARCHS, model_file, model_path  # noqa: E402
from benchmarks.bench_executor import ONE_THREAD, _inputs, _worker  # noqa: E402


def bench(arch: str, variant: str, repeat: int, tmp: Path) -> dict[str, Any]:
    import tf2tosa

    path = model_file(arch, variant)
    row: dict[str, Any] = {"model": f"{arch} {variant}"}
    data = path.read_bytes()
    model = tf2tosa.convert(data)
    tosa = tmp / "m.tosa"
    tosa.write_bytes(model.to_bytes())
    arrays = _inputs(data)
    graph_in = [v.type.dtype.np_dtype() for v in model.graph.inputs]
    np.savez(tmp / "ours.npz", **{f"i{k}": a.astype(d) for k, (a, d) in enumerate(zip(arrays, graph_in))})
    np.savez(tmp / "litert.npz", **{f"i{k}": a for k, a in enumerate(arrays)})
    ours = _worker(sys.executable, "ours", tosa, tmp / "ours.npz", repeat, "", env=ONE_THREAD)
    lit = _worker(sys.executable, "litert", path, tmp / "litert.npz", repeat, "default", env=ONE_THREAD)
    row["ours_ms"] = statistics.median(ours["times"]) * 1e3
    row["litert_ms"] = statistics.median(lit["times"]) * 1e3
    a, b = np.asarray(ours["output"], np.float64).reshape(-1), np.asarray(lit["output"], np.float64).reshape(-1)
    row["max_diff"] = float(np.max(np.abs(a - b))) if a.size == b.size and a.size else None
    row["prepared_exact"] = ours.get("last_equals_first")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", default=None)
    ap.add_argument("--variant", action="append", default=None, choices=("f32", "int8", "fp16"))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    jobs = [(a, v) for a in (args.arch or list(DEFAULT_ARCHS)) for v in (args.variant or ("f32", "int8"))]
    missing = [(a, v) for a, v in jobs if not model_path(a, v).exists()]
    if missing:
        print(f"{len(missing)} model(s) not built yet: run benchmarks/bench_apps.py first (it builds and caches them)")
    print("executor (one thread) vs LiteRT default kernels (one thread), median of runs")
    print(f"  {'model':<24} {'ours ms':>9} {'LiteRT ms':>10} {'ratio':>7} {'max|diff| vs default':>21} "
          f"{'last run = first':>17}")
    for a, v in jobs:
        if (a, v) in missing:
            continue
        with tempfile.TemporaryDirectory(prefix="tf2tosa-apps-exec-") as tmp:
            try:
                r = bench(a, v, args.repeat, Path(tmp))
            except Exception as e:  # noqa: BLE001 - report and go on with the other models
                print(f"  {a + ' ' + v:<24} failed: {str(e).strip().splitlines()[-1][:120]}")
                continue
        diff = "-" if r["max_diff"] is None else f"{r['max_diff']:.3g}"
        print(f"  {r['model']:<24} {r['ours_ms']:>9.1f} {r['litert_ms']:>10.1f} "
              f"{r['ours_ms'] / r['litert_ms']:>6.1f}x {diff:>21} {str(r['prepared_exact']):>17}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
