"""Conversion wall time: MobileNetV2 float32 and int8 .tflite → .tosa, ours against Arm's pipeline.

Side by side in one run, per model:
  * ours:  ``tf2tosa convert model.tflite -o out.tosa`` (the CLI, process start included)
  * Arm:   ``tosa-converter-for-tflite model.tflite -o out.mlirbc`` then ``tosa-opt --tosa-serialize``
Reports the median of N runs of each (interleaved, so both see the same machine load) and the ratio
ours / Arm (≤ 1 means tf2tosa is as fast or faster).  A third command runs interleaved with them: the floor,
``python -c 'import numpy, networkx'`` in our CLI's interpreter and environment — the two libraries the IR needs,
so no conversion by this package can start faster; its ratio to Arm's time is printed beside ours.

Our CLI runs this checkout's package (``PYTHONPATH``) with byte-compiled modules cached under
``.cache/bench/pycache`` (``PYTHONPYCACHEPREFIX``), as an installed package has them: an environment with
``PYTHONDONTWRITEBYTECODE`` set would otherwise recompile every module of the package on every start.

    python benchmarks/bench_convert.py [--repeat 5] [--model path.tflite ...] [--json out.json]
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def ours_env() -> dict[str, str]:
    """The environment our CLI runs in: this checkout first on the path, byte-code cached."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(ROOT / ".cache" / "bench" / "pycache")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return dt


def tosa_bin(name: str) -> str:
    return str(ROOT / ".venv-tosa" / "bin" / name)


def ours_cli() -> str:
    return str(Path(sys.executable).with_name("tf2tosa"))


def arm_commands(model: Path, out: Path) -> list[list[str]]:
    """Arm's pipeline: the converter to MLIR bytecode, then tosa-opt serializing it to a .tosa."""
    return [[tosa_bin("tosa-converter-for-tflite"), str(model), "--bytecode", "-o", str(out / "peer.mlirbc")],
            [tosa_bin("tosa-opt"), str(out / "peer.mlirbc"),
             f"--tosa-serialize=tosa-flatbuffer-filename={out / 'peer.tosa'}", "-o", "/dev/null"]]


def default_models() -> dict[str, Path]:
    """MobileNetV2 float32 and int8 from tests.modelgen (cached .tflite files; TensorFlow builds them once)."""
    from tests.modelgen import mobilenet_v2

    models = {}
    for label, quant in (("MobileNetV2 float32", None), ("MobileNetV2 int8", "int8")):
        path = ROOT / ".cache" / "bench" / f"mobilenet_v2_{quant or 'f32'}.tflite"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(mobilenet_v2(quant=quant))
        models[label] = path
    return models


FLOOR_CODE = "import numpy, networkx"


def floor_cmd() -> list[str]:
    """The start-up floor: our interpreter importing the two libraries the IR is built on, nothing else."""
    return [sys.executable, "-c", FLOOR_CODE]


def bench(label: str, model: Path, repeat: int) -> dict[str, object]:
    env = ours_env()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        ours_cmd = [ours_cli(), "convert", str(model), "-o", str(out / "ours.tosa")]
        arm = arm_commands(model, out)
        timed(ours_cmd, env), [timed(c) for c in arm], timed(floor_cmd(), env)  # warm the caches
        ours, peer, floor = [], [], []
        for _ in range(repeat):
            ours.append(timed(ours_cmd, env))
            peer.append(sum(timed(c) for c in arm))
            floor.append(timed(floor_cmd(), env))
        sizes = {"ours_tosa_bytes": (out / "ours.tosa").stat().st_size,
                 "peer_tosa_bytes": (out / "peer.tosa").stat().st_size}
    o, p, f = statistics.median(ours), statistics.median(peer), statistics.median(floor)
    return {"label": label, "model": str(model), "model_bytes": model.stat().st_size, "repeat": repeat,
            "ours_s": ours, "peer_s": peer, "floor_s": floor, "ours_median_s": o, "peer_median_s": p,
            "floor_median_s": f, "ratio_ours_over_peer": o / p, "ratio_floor_over_peer": f / p, **sizes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", type=Path, action="append", default=None,
                    help="a .tflite (repeatable; default: MobileNetV2 float32 and int8 from tests.modelgen)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    models = {m.name: m for m in args.model} if args.model else default_models()
    results = []
    print(f".tflite -> .tosa, whole process, median of {args.repeat} (interleaved)")
    print(f"  {'model':<22} {'tf2tosa':>9} {'Arm':>9} {'ours/Arm':>9} {'floor':>9} {'floor/Arm':>10}")
    for label, path in models.items():
        r = bench(label, path, args.repeat)
        results.append(r)
        print(f"  {label:<22} {r['ours_median_s']:>8.3f}s {r['peer_median_s']:>8.3f}s "
              f"{r['ratio_ours_over_peer']:>9.2f} {r['floor_median_s']:>8.3f}s {r['ratio_floor_over_peer']:>10.2f}")
    print("  Arm = tosa-converter-for-tflite + tosa-opt --tosa-serialize; ours/Arm <= 1 means tf2tosa is not slower")
    print(f"  floor = python -c '{FLOOR_CODE}' (same interpreter and environment as ours, same rounds)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
