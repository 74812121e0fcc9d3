"""Conversion wall time: MobileNetV2 float32 .tflite → .tosa.

Side by side in one run:
  * ours:  ``tf2tosa convert model.tflite -o out.tosa`` (the CLI, process start included)
  * peer:  ``tosa-converter-for-tflite model.tflite -o out.mlirbc`` then ``tosa-opt --tosa-serialize``
Reports the median of N runs of each and the ratio peer / ours.

    python benchmarks/bench_convert.py [--repeat 5] [--model path.tflite] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return dt


def _tosa_bin(name: str) -> str:
    return str(ROOT / ".venv-tosa" / "bin" / name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", type=Path, default=None,
                    help="a .tflite (default: MobileNetV2 float32 from tests.modelgen)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.model is None:
        from tests.modelgen import mobilenet_v2

        data = mobilenet_v2()
        args.model = ROOT / ".cache" / "bench" / "mobilenet_v2_f32.tflite"
        args.model.parent.mkdir(parents=True, exist_ok=True)
        args.model.write_bytes(data)
    ours_cli = str(Path(sys.executable).with_name("tf2tosa"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        ours_cmd = [ours_cli, "convert", str(args.model), "-o", str(out / "ours.tosa")]
        peer1 = [_tosa_bin("tosa-converter-for-tflite"), str(args.model), "--bytecode", "-o", str(out / "peer.mlirbc")]
        peer2 = [_tosa_bin("tosa-opt"), str(out / "peer.mlirbc"),
                 f"--tosa-serialize=tosa-flatbuffer-filename={out / 'peer.tosa'}", "-o", "/dev/null"]
        _timed(ours_cmd), _timed(peer1), _timed(peer2)  # warm the file cache
        ours, peer = [], []
        for _ in range(args.repeat):  # interleaved, so both see the same machine load
            ours.append(_timed(ours_cmd))
            peer.append(_timed(peer1) + _timed(peer2))
        sizes = {"ours_tosa_bytes": (out / "ours.tosa").stat().st_size,
                 "peer_tosa_bytes": (out / "peer.tosa").stat().st_size}
    result = {
        "model": str(args.model), "repeat": args.repeat,
        "ours_median_s": statistics.median(ours), "peer_median_s": statistics.median(peer),
        "ratio_peer_over_ours": statistics.median(peer) / statistics.median(ours), **sizes,
    }
    print(f"MobileNetV2 float32 .tflite -> .tosa, median of {args.repeat}")
    print(f"  tf2tosa convert (CLI)                            {result['ours_median_s']:.3f} s")
    print(f"  tosa-converter-for-tflite + tosa-opt --serialize {result['peer_median_s']:.3f} s")
    print(f"  ratio peer/ours = {result['ratio_peer_over_ours']:.2f}  (>1 means tf2tosa is faster)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
