"""Published architectures: conversion time and memory against Arm's pipeline, and the verdict of ``verify``.

The architectures of ``keras.applications`` (ResNet50, EfficientNet-B0/V2-B0, MobileNetV3-Large, DenseNet121,
InceptionV3, Xception, NASNetMobile, ConvNeXt-Tiny, VGG16; ``--arch`` picks others of that module) and a
transformer encoder (``encoder``: MultiHeadAttention, LayerNormalization, GELU), built once
with TensorFlow from a fixed seed (random weights, BatchNorm statistics calibrated on seeded inputs, the classifier
made input-sensitive: ``tests.modelgen.calibrate_classifier``) at a small input size, as float32, int8 (full
integer, seeded representative data) and float32 with float16 weights; cached under ``.cache/bench/apps``.
No weights are downloaded.  For each model, in one run:

  * ours:  ``tf2tosa convert`` (whole process; the CLI's ``main`` timing its own conversion as in
           ``bench_convert.py``, so the conversion in process is reported apart) and ``tf2tosa verify --num 1``
           (LiteRT's reference kernels);
  * Arm:   ``tosa-converter-for-tflite`` then ``tosa-opt --tosa-serialize`` (time summed, peak = the larger);

and prints wall time and peak RSS of each, their ratios (whole process, and our conversion in process against
Arm's whole pipeline), the ``.tosa`` size over the model's, and the verdict.

    python benchmarks/bench_apps.py [--arch NAME ...] [--variant f32|int8|fp16|int16x8 ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_convert import OURS_CODE, arm_commands, ours_cli, ours_env  # noqa: E402
from benchmarks.bench_scale import MB, built, in_page_cache, measured  # noqa: E402

CACHE = ROOT / ".cache" / "bench" / "apps"

#: architecture -> (keras.applications constructor, keyword arguments, input size)
ARCHS: dict[str, tuple[str, dict[str, Any], int]] = {
    "resnet50": ("ResNet50", {}, 64),
    "efficientnetb0": ("EfficientNetB0", {}, 96),
    "efficientnetv2b0": ("EfficientNetV2B0", {}, 96),
    "mobilenetv3large": ("MobileNetV3Large", {}, 96),
    "densenet121": ("DenseNet121", {}, 64),
    "inceptionv3": ("InceptionV3", {}, 96),
    "xception": ("Xception", {}, 96),
    "nasnetmobile": ("NASNetMobile", {}, 96),
    "convnexttiny": ("ConvNeXtTiny", {}, 64),
    "vgg16": ("VGG16", {}, 64),
}
#: the default list: those and a transformer encoder (:func:`encoder`)
DEFAULT_ARCHS = (*ARCHS, "encoder")
VARIANTS = ("f32", "int8", "fp16")
SEED = 7


def encoder(keras: Any, layers: int = 6, seq: int = 64, features: int = 80, d: int = 256, heads: int = 4,
            ff: int = 1024) -> Any:
    """A transformer encoder over feature frames (an audio or sensor model's shape): a Dense projection, ``layers``
    blocks of MultiHeadAttention + residual + LayerNormalization and a GELU feed-forward + residual +
    LayerNormalization, then average pooling and a softmax classifier (4.8M parameters)."""
    L = keras.layers
    inp = keras.Input((seq, features), name="frames")
    x = L.Dense(d)(inp)
    for _ in range(layers):
        a = L.MultiHeadAttention(num_heads=heads, key_dim=d // heads)(x, x)
        x = L.LayerNormalization(epsilon=1e-6)(L.Add()([x, a]))
        f = L.Dense(d)(L.Dense(ff, activation="gelu")(x))
        x = L.LayerNormalization(epsilon=1e-6)(L.Add()([x, f]))
    out = L.Dense(10, activation="softmax")(L.GlobalAveragePooling1D()(x))
    return keras.Model(inp, out, name="encoder")


#: architectures that are not keras.applications: name -> (builder(keras), input shape)
OTHERS: dict[str, tuple[Any, tuple[int, ...]]] = {"encoder": (encoder, (1, 64, 80))}


def model_path(arch: str, variant: str) -> Path:
    ctor, kw, size = ARCHS.get(arch, (arch, {}, OTHERS[arch][1][1] if arch in OTHERS else 96))
    return CACHE / f"{arch}-{size}-{variant}-s{SEED}.tflite"


def build(arch: str, variant: str) -> bytes:
    """The .tflite of one architecture and variant (TensorFlow, seeded)."""
    from tests import modelgen

    ctor, kw, size = ARCHS.get(arch, (arch, {}, 96))
    keras = modelgen._seeded_keras(SEED)
    if arch in OTHERS:
        make, shape = OTHERS[arch]
        model = make(keras)
    else:
        model = getattr(keras.applications, ctor)(weights=None, input_shape=(size, size, 3), **kw)
        shape = (1, size, size, 3)
    try:
        modelgen.calibrate_classifier(model, shape, SEED)
    except IndexError:  # a 1x1-convolution head (MobileNet, MobileNetV3): the BatchNorm statistics are set already
        pass
    if variant == "fp16":
        return modelgen.convert(model, [shape], fp16_weights=True)
    return modelgen.convert(model, [shape], quant=None if variant == "f32" else variant, seed=SEED, n_rep=8)


def model_file(arch: str, variant: str) -> Path:
    return built(model_path(arch, variant), lambda: build(arch, variant))


def _verdict(path: Path) -> str:
    proc = subprocess.run([ours_cli(), "verify", str(path), "--num", "1", "--json"], capture_output=True,
                          text=True, env=ours_env())
    try:
        rep = json.loads(proc.stdout)["report"]
    except (ValueError, KeyError):
        return f"error: {(proc.stderr.strip().splitlines() or ['?'])[-1][:80]}"
    worst = max(rep["outputs"], key=lambda o: o["rel"] or 0.0, default=None)
    if worst is None:
        return "PASS" if rep["ok"] else "FAIL"
    what = f"{worst['max_abs']:g} LSB" if worst["bound"] == "exact" else f"rel {worst['rel']:.1e}"
    return f"{'PASS' if rep['ok'] else 'FAIL'} ({what})"


def bench(arch: str, variant: str) -> dict[str, Any]:
    path = model_file(arch, variant)
    size = in_page_cache(path)
    row: dict[str, Any] = {"arch": arch, "variant": variant, "model_bytes": size}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        try:
            times = out / "ours_times.txt"
            row["ours_s"], row["ours_rss"] = measured([sys.executable, "-c", OURS_CODE, str(times), "convert",
                                                       str(path), "-o", str(out / "o.tosa")], ours_env())
            row["ours_conv_s"] = float(times.read_text())
            row["ours_tosa_over_model"] = (out / "o.tosa").stat().st_size / size
        except RuntimeError as e:
            row["ours_error"] = str(e).strip().splitlines()[-1][:200]
        try:
            arm = [measured(c) for c in arm_commands(path, out)]
            row["arm_s"], row["arm_rss"] = sum(t for t, _ in arm), max(r for _, r in arm)
        except RuntimeError as e:
            row["arm_error"] = str(e).strip().splitlines()[-1][:200]
    row["verify"] = _verdict(path) if "ours_error" not in row else "-"
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", default=None,
                    help=f"architecture (default: {', '.join(DEFAULT_ARCHS)}); other keras.applications names are "
                         "built at 96x96")
    ap.add_argument("--variant", action="append", default=None, choices=(*VARIANTS, "int16x8"))
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    jobs = [(a, v) for a in (args.arch or list(DEFAULT_ARCHS)) for v in (args.variant or VARIANTS)]
    if args.build_only:
        for a, v in jobs:
            try:
                model_file(a, v)
            except Exception as e:  # TFLite's converter refuses some (e.g. int16x8 of HARD_SWISH): say so, go on
                print(f"  {a} {v}: TensorFlow could not build it: {str(e).strip().splitlines()[-1][:160]}")
        return 0
    if not all(model_path(a, v).exists() for a, v in jobs):
        # built in a child process: a child forked from a process holding TensorFlow would count its memory
        subprocess.run([sys.executable, __file__, "--build-only",
                        *sum((["--arch", a] for a in dict.fromkeys(a for a, _ in jobs)), []),
                        *sum((["--variant", v] for v in dict.fromkeys(v for _, v in jobs)), [])], check=True)
    rows = [bench(a, v) for a, v in jobs if model_path(a, v).exists()]
    print("keras.applications architectures and a transformer encoder (random seeded weights): .tflite -> .tosa, "
          "one run each")
    print(f"  {'model':<24} {'MB':>6} | {'ours s':>7} {'Arm s':>7} {'ratio':>6} | {'conv s':>6} {'conv/Arm':>8} | "
          f"{'ours MB':>7} {'Arm MB':>7} {'RSS/model':>9} | {'.tosa/model':>11} | verify")
    for r in rows:
        name = f"{r['arch']} {r['variant']}"
        ours = f"{r['ours_s']:>7.2f}" if "ours_s" in r else f"{'fails':>7}"
        arm = f"{r['arm_s']:>7.2f}" if "arm_s" in r else f"{'fails':>7}"
        ratio = f"{r['ours_s'] / r['arm_s']:>6.2f}" if "ours_s" in r and "arm_s" in r else f"{'-':>6}"
        conv = f"{r['ours_conv_s']:>6.2f}" if "ours_conv_s" in r else f"{'-':>6}"
        cratio = f"{r['ours_conv_s'] / r['arm_s']:>8.2f}" if "ours_conv_s" in r and "arm_s" in r else f"{'-':>8}"
        om = f"{r['ours_rss'] / MB:>7.0f}" if "ours_rss" in r else f"{'-':>7}"
        am = f"{r['arm_rss'] / MB:>7.0f}" if "arm_rss" in r else f"{'-':>7}"
        per = f"{r['ours_rss'] / r['model_bytes']:>9.2f}" if "ours_rss" in r else f"{'-':>9}"
        tosa = f"{r['ours_tosa_over_model']:>11.2f}" if "ours_tosa_over_model" in r else f"{'-':>11}"
        print(f"  {name:<24} {r['model_bytes'] / MB:>6.1f} | {ours} {arm} {ratio} | {conv} {cratio} | {om} {am} "
              f"{per} | {tosa} | {r['verify']}")
        for who in ("ours", "arm"):
            if f"{who}_error" in r:
                print(f"      {who}: {r[f'{who}_error']}")
    print("  ratio = ours/Arm wall time (<= 1: tf2tosa is not slower); conv = our conversion in process (the CLI's "
          "main, from its arguments to the written file), conv/Arm = that over Arm's whole pipeline; RSS = peak "
          "resident set of the process")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
