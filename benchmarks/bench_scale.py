"""Conversion scaling: wall time and peak memory against model size, ours against Arm's pipeline.

Builds (once, with TensorFlow, from fixed seeds; cached under ``.cache/bench``) float32 models of about 5, 25, 50
and 100 MB: wide convolutional nets (3x3 convolutions on an 8x8 feature map) and an MLP, plus a ~27 MB
convolutional net with float16 weights (``target_spec.supported_types=[tf.float16]``).  For each model, in one
run, it converts with

  * ours:  ``tf2tosa convert model.tflite -o out.tosa`` (the CLI, whole process)
  * Arm:   ``tosa-converter-for-tflite`` then ``tosa-opt --tosa-serialize`` (time summed, peak = the larger)

and prints the wall time and peak RSS of each (``os.wait4``'s rusage of that child), their ratios, peak RSS /
model size, the ``.tosa`` size / model size, and the least-squares slope of conversion time against model size.

    python benchmarks/bench_scale.py [--only NAME ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_convert import arm_commands, ours_cli, ours_env  # noqa: E402

CACHE = ROOT / ".cache" / "bench"
MB = 1e6


@dataclass(frozen=True)
class ScaleModel:
    """A float model: ``layers`` 3x3 convolutions of ``width`` channels, or an MLP of ``layers`` dense layers."""

    name: str
    kind: str  # "conv" or "mlp"
    width: int
    layers: int
    seed: int
    fp16: bool = False

    @property
    def path(self) -> Path:
        return CACHE / f"scale-{self.name}-{self.kind}{self.width}x{self.layers}-s{self.seed}" \
                       f"{'-fp16' if self.fp16 else ''}.tflite"


MODELS = (
    ScaleModel("conv_5mb", "conv", 256, 2, seed=11),
    ScaleModel("conv_25mb", "conv", 480, 3, seed=12),
    ScaleModel("mlp_50mb", "mlp", 2048, 3, seed=13),
    ScaleModel("conv_100mb", "conv", 744, 5, seed=14),
    ScaleModel("conv_fp16_27mb", "conv", 612, 4, seed=15, fp16=True),
)


def build(spec: ScaleModel) -> bytes:
    """The model's ``.tflite``: weights from ``numpy.random.default_rng(seed)``, converted by TFLiteConverter."""
    import tensorflow as tf

    rng = np.random.default_rng(spec.seed)
    w = spec.width
    if spec.kind == "conv":
        weights = [(rng.standard_normal((3, 3, w, w), dtype=np.float32) * (1.0 / (3 * w ** 0.5)),
                    rng.standard_normal(w, dtype=np.float32) * 0.1) for _ in range(spec.layers)]
        shape = (1, 8, 8, w)

        def f(x: Any) -> Any:
            for k, b in weights:
                x = tf.nn.relu(tf.nn.conv2d(x, k, 1, "SAME") + b)
            return x
    else:
        weights = [(rng.standard_normal((w, w), dtype=np.float32) * (1.0 / w ** 0.5),
                    rng.standard_normal(w, dtype=np.float32) * 0.1) for _ in range(spec.layers)]
        shape = (1, w)

        def f(x: Any) -> Any:
            for k, b in weights:
                x = tf.nn.relu(tf.matmul(x, k) + b)
            return x

    fn = tf.function(f, input_signature=[tf.TensorSpec(shape, tf.float32, name="x")], autograph=False)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn)
    if spec.fp16:
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    return bytes(conv.convert())


def built(path: Path, make: Callable[[], bytes]) -> Path:
    """``path``, written (atomically) with ``make()``'s bytes unless it exists already."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(make())
        os.replace(tmp, path)
    return path


def in_page_cache(path: Path) -> int:
    """Read ``path`` once, in pieces, so both tools find it in the page cache (a child's ru_maxrss starts from this
    process's resident size when it is forked, so nothing is kept); returns its size."""
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    return path.stat().st_size


def model_file(spec: ScaleModel) -> Path:
    return built(spec.path, lambda: build(spec))


def measured(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    """(wall seconds, peak RSS in bytes) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{err.decode(errors='replace')[-2000:]}")
    return dt, usage.ru_maxrss * 1024  # Linux reports kilobytes


def bench(spec: ScaleModel) -> dict[str, Any]:
    path = model_file(spec)
    size = in_page_cache(path)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        ours_t, ours_rss = measured([ours_cli(), "convert", str(path), "-o", str(out / "ours.tosa")], ours_env())
        arm = [measured(c) for c in arm_commands(path, out)]
        arm_t, arm_rss = sum(t for t, _ in arm), max(r for _, r in arm)
        ours_out, arm_out = (out / "ours.tosa").stat().st_size, (out / "peer.tosa").stat().st_size
    return {"name": spec.name, "fp16_weights": spec.fp16, "model_bytes": size,
            "ours_s": ours_t, "arm_s": arm_t, "time_ratio": ours_t / arm_t,
            "ours_rss": ours_rss, "arm_rss": arm_rss, "rss_ratio": ours_rss / arm_rss,
            "ours_rss_over_model": ours_rss / size, "arm_rss_over_model": arm_rss / size,
            "ours_tosa_bytes": ours_out, "arm_tosa_bytes": arm_out, "ours_tosa_over_model": ours_out / size}


def slope(rows: list[dict[str, Any]], key: str) -> tuple[float, float, float]:
    """Least-squares fit of ``key`` seconds against model MB: (seconds per MB, intercept, R²)."""
    x = np.array([r["model_bytes"] / MB for r in rows])
    y = np.array([r[key] for r in rows])
    a, b = np.polyfit(x, y, 1)
    pred = a * x + b
    r2 = 1.0 - float(np.sum((y - pred) ** 2)) / max(float(np.sum((y - y.mean()) ** 2)), 1e-30)
    return float(a), float(b), r2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=None, help="model name(s) to run (default: all)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    specs = [m for m in MODELS if args.only is None or m.name in args.only]
    if args.build_only:
        for spec in specs:
            model_file(spec)
        return 0
    if not all(s.path.exists() for s in specs):
        # built in a child process: a child forked from a process holding TensorFlow's memory would count
        # that memory in its own peak RSS (ru_maxrss includes the time before exec)
        subprocess.run([sys.executable, __file__, "--build-only", *sum((["--only", s.name] for s in specs), [])],
                       check=True)
    rows = [bench(s) for s in specs]
    print("conversion .tflite -> .tosa, one run each; RSS = peak resident set of the process")
    print(f"  {'model':<16} {'MB':>6} | {'ours s':>7} {'Arm s':>7} {'t ratio':>7} | {'ours MB':>7} {'Arm MB':>7} "
          f"{'m ratio':>7} | {'ours RSS/model':>14} {'Arm RSS/model':>13} | .tosa/model ours Arm")
    for r in rows:
        print(f"  {r['name']:<16} {r['model_bytes'] / MB:>6.1f} | {r['ours_s']:>7.2f} {r['arm_s']:>7.2f} "
              f"{r['time_ratio']:>7.2f} | {r['ours_rss'] / MB:>7.0f} {r['arm_rss'] / MB:>7.0f} "
              f"{r['rss_ratio']:>7.2f} | "
              f"{r['ours_rss_over_model']:>14.2f} {r['arm_rss_over_model']:>13.2f} | {r['ours_tosa_over_model']:>5.2f} "
              f"{r['arm_tosa_bytes'] / r['model_bytes']:>5.2f}")
    fits: dict[str, Any] = {}
    f32 = [r for r in rows if not r["fp16_weights"]]
    if len(f32) >= 2:
        for who, key in (("ours", "ours_s"), ("Arm", "arm_s")):
            a, b, r2 = slope(f32, key)
            fits[who] = {"s_per_MB": a, "intercept_s": b, "r2": r2}
            print(f"  {who}: time = {a * 1000:.2f} ms/MB x size + {b:.3f} s (float32 models, R^2 = {r2:.3f})")
    print("  ratios are ours/Arm (<= 1: tf2tosa is not slower / not larger)")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "fits": fits}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
