"""Time per inference through the VGF on a Vulkan device, beside our executor and IREE: MobileNetV2 1.0-224 float32
and int8 (batch 1, tests/modelgen.py), one run, for information.

* vgf      - our ``.tosa`` converted by Arm's model converter, run by the ML SDK's ``scenario_runner`` on the device
  :mod:`tf2tosa.verify.vgf` picks (here: the emulation layers over Mesa's lavapipe, a CPU device).  One scenario
  with ``--repeat 1`` and one with ``--repeat N+1`` (wall clock of each); per inference = the difference / N, so
  the runner's start-up and the pipeline set-up (the emulation layer builds its compute pipelines) are excluded and
  given on their own (``set-up``).
* executor - the tf2tosa numpy executor on the same program, in this process: one warm-up run, median of N.
* iree     - our ``.mlir`` compiled by IREE for ``llvm-cpu`` (compile cached, not timed), median of N calls after a
  warm-up call (the ``[iree]`` extra; "-" without it).

Each engine's first output is checked against the executor's (:func:`tf2tosa.verify.vgf.agreement`).  The models
are built (TensorFlow, cached in .cache/models) in a child process, so this process never imports TensorFlow.

    python benchmarks/bench_vgf.py [--repeat 5] [--models float int8] [--json out.json]

Without the ML SDK for Vulkan or a Vulkan device it prints the one line saying what to install and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_BUILD = """
import sys
sys.path.insert(0, {tests!r})
import modelgen
open({out!r}, "wb").write(modelgen.mobilenet_v2(quant={quant!r}))
"""


def _model_bytes(kind: str, tmp: Path) -> bytes:
    """MobileNetV2 1.0-224 (``kind`` float or int8), built or read from the cache by a child process."""
    out = tmp / f"mobilenet_v2_{kind}.tflite"
    code = _BUILD.format(tests=str(ROOT / "tests"), quant=None if kind == "float" else "int8", out=str(out))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600, cwd=str(ROOT))
    if proc.returncode != 0 or not out.is_file():
        raise RuntimeError(f"building MobileNetV2 {kind} failed: {proc.stderr[-800:]}")
    return out.read_bytes()


def _median_s(fn: Any, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _agrees(graph: Any, ours: dict[str, Any], theirs: dict[str, Any], fp64: dict[str, Any]) -> str:
    from tf2tosa.verify import vgf

    rows = vgf.agreement(graph, ours, theirs, fp64)
    if all(r["ok"] for r in rows):
        return "agree"
    return "DISAGREE " + "; ".join(f"{r['name']}: {r['mismatches']} mism / err {r['max_abs_err']}" for r in rows)


def bench(kind: str, repeat: int, tmp: Path) -> dict[str, Any]:
    import tf2tosa
    from tf2tosa.executor import run
    from tf2tosa.verify import iree, vgf
    from tf2tosa.verify.compare import random_inputs

    model = tf2tosa.convert(_model_bytes(kind, tmp))
    g = model.graph
    feed = random_inputs(g, 0)
    ours = run(g, feed)
    fp64 = run(g, feed, precise=True)
    res: dict[str, Any] = {"model": f"MobileNetV2 1.0-224 {kind}",
                           "ops": sum(1 for op in g.ops.values() if op.opcode not in ("CONST", "CONST_SHAPE"))}
    res["executor_ms"] = 1e3 * _median_s(lambda: run(g, feed), repeat)

    t0 = time.perf_counter()
    prog = vgf.VgfProgram(g, name=kind)
    res["vgf_convert_s"] = time.perf_counter() - t0
    res["vgf_device"] = prog.device.kind
    try:
        t0 = time.perf_counter()
        theirs = prog(feed)
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        prog(feed, repeat=repeat + 1)
        many = time.perf_counter() - t0
    finally:
        prog.close()
    res["vgf_ms"] = 1e3 * max(many - one, 0.0) / repeat
    res["vgf_setup_s"] = one - res["vgf_ms"] / 1e3
    res["vgf_agreement"] = _agrees(g, ours, theirs, fp64)

    if iree.available():
        t0 = time.perf_counter()
        ip = iree.IreeProgram(g, name=kind)
        res["iree_compile_s"] = time.perf_counter() - t0
        res["iree_ms"] = 1e3 * _median_s(lambda: ip(feed), repeat)
        res["iree_agreement"] = _agrees(g, ours, ip(feed), fp64)
    return res


def _table(results: list[dict[str, Any]], repeat: int) -> str:
    lines = [f"| model | TOSA ops | VGF on {results[0]['vgf_device'] if results else '?'} device, ms/inference "
             "(set-up s) | executor ms | IREE llvm-cpu ms | VGF / executor | VGF vs executor | IREE vs executor |",
             "|---|---:|---:|---:|---:|---:|---|---|"]
    for r in results:
        iree_ms = f"{r['iree_ms']:.1f}" if "iree_ms" in r else "-"
        lines.append(f"| {r['model']} | {r['ops']} | {r['vgf_ms']:.1f} ({r['vgf_setup_s']:.1f}) | "
                     f"{r['executor_ms']:.1f} | {iree_ms} | {r['vgf_ms'] / r['executor_ms']:.2f} | "
                     f"{r['vgf_agreement']} | {r.get('iree_agreement', '-')} |")
    lines.append(f"\nmedians of {repeat} runs (VGF: (wall({repeat + 1} repeats) - wall(1)) / {repeat}); one run, "
                 f"{os.cpu_count()} cores")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--models", nargs="+", default=["float", "int8"], choices=["float", "int8"])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tf2tosa.verify import vgf

    try:
        vgf.require()
    except vgf.VgfError as e:
        print(e.message, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        results = [bench(k, args.repeat, Path(tmp)) for k in args.models]
    print(_table(results, args.repeat))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
