"""NPU cost on Ethos-U85-256, in Vela's own estimate: our .tosa, Arm's pipeline's .tosa and the .tflite itself.

Per int8 model of the zoo (and the int8 samples, MobileNetV2 1.0-224 and a fingerprint-style CNN), measured in one
run:
  * ours:   ``tf2tosa.convert(model, target="ethos-u85")`` (``io="int"`` when the model has float edges) →
            ``.tosa`` → Vela (the target rewrites dilations above 2: ``tf2tosa.converter.passes.dilation``);
  * Arm's:  ``tosa-converter-for-tflite --bytecode`` → ``tosa-opt --tosa-serialize`` → ``.tosa`` → Vela;
  * tflite: the ``.tflite`` → Vela.
Vela runs with ``--accelerator-config ethos-u85-256 --config Arm/vela.ini --system-config Ethos_U85_SYS_DRAM_High
--memory-mode Dedicated_Sram_384KB --verbose-performance`` (``tests/vela_tools.py``); the table gives its total cycle
estimate, its SRAM use, ops left off the NPU, and the ratios ours/Arm's and ours/tflite.  A model Vela rejects shows
the reason instead.

Where the cycles go: Vela's per-layer report (``<name>_per-layer.csv``; its ``Op Cycles`` add up to the total) is
grouped by what the NPU runs (Vela's ``NNG Operator``; see :data:`GROUPS`).  The default output gives, per model,
ours − tflite per group in kilocycles; ``--layers`` prints each model's group table (ours, Arm's, tflite, ours −
tflite).

Every model that TensorFlow has to build (a zoo model not in ``.cache/zoo``, MobileNetV2 1.0-224 and the fingerprint
CNN when not cached) is built in a child process with its output captured: TensorFlow's logging stays out of the
table, and a crash while building skips only that model, with its reason in the table.

    python benchmarks/bench_npu.py [--filter mobilenet] [--variant int8] [--layers] [--json out.json]
                                   [--npu-rounding native]

``--npu-rounding native`` converts ours with ``npu_rounding="native"`` (the int8 softmax in the NPU's cheaper,
inexact form) and adds, under each model, ours in the default exact mode (Vela cycles) and the native program's
difference from LiteRT's BUILTIN_REF kernels: output elements that differ and the largest |LSB|, over
``NATIVE_SETS`` seeded input sets (``Model.verify``, seed 0).

Needs Vela (``.venv-vela``, built by ``make env``) and Arm's tools (``.venv-tosa``); without Vela it prints one line
and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.vela_tools import (  # noqa: E402
    VelaError,
    VelaLayer,
    VelaResult,
    arm_tosa,
    compile_for_npu,
    vela_bin,
)

#: the issue's reference model: MobileNetV2 1.0-224 int8 (tests.modelgen.mobilenet_v2, as bench_convert.py uses it)
MOBILENET_224 = "mobilenet_v2_1.0_224"
#: a fingerprint-signature CNN like the published one of issue 32: int8, 180x180x1 in, a 16-value embedding out
FINGERPRINT = "fingerprint_cnn"
#: what our conversions are for (``--target``)
TARGET = "ethos-u85"

#: operation groups of Vela's per-layer report, keyed by Vela's ``NNG Operator`` (what the NPU runs); a TOSA
#: RESCALE or CAST (``Original Operator``) counts as ``rescale`` whatever Vela runs it as
GROUPS: dict[str, frozenset[str]] = {
    "conv": frozenset({"Conv2D", "Conv3D", "TransposeConv2D", "FullyConnected", "MatMul"}),
    "depthwise": frozenset({"DepthwiseConv2D"}),
    "elementwise": frozenset({
        "Add", "Sub", "Mul", "Asr", "SHL", "SHR", "And", "AndNot", "Or", "Xor", "Not", "CLZ", "Clamp", "Relu",
        "Relu6", "ReluN", "LeakyRelu", "Minimum", "Maximum", "Abs", "Neg", "Select", "Equal", "NotEqual", "Greater",
        "GreaterEqual", "Less", "LessEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "SquaredDifference",
        "HardSwish", "Sigmoid", "Tanh"}),
    "rescale": frozenset({"Rescale"}),
    "resize": frozenset({"Resize", "ResizeBilinear", "ResizeNearestNeighbor"}),
    "table": frozenset({"LUT", "Table"}),
    "pooling": frozenset({"AvgPool", "MaxPool", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceAny", "ReduceAll",
                          "ArgMax", "Mean"}),
    "memory": frozenset({"MemoryCopy", "Transpose", "Reshape", "Concat", "Slice", "StridedSlice", "Pad", "Tile",
                         "Reverse", "Gather", "Scatter", "Identity", "Split", "SplitV", "Pack", "Unpack",
                         "SpaceToBatchND", "BatchToSpaceND", "SpaceToDepth", "DepthToSpace"}),
}
GROUP_NAMES: tuple[str, ...] = (*GROUPS, "other")
_RESCALE_ORIGINS = frozenset({"Rescale", "Cast"})


def op_group(layer: VelaLayer) -> str:
    """The group of one per-layer row (:data:`GROUPS`; ``other`` when none names its operation)."""
    if layer.original in _RESCALE_ORIGINS:
        return "rescale"
    return next((g for g, ops in GROUPS.items() if layer.op in ops), "other")


def group_cycles(layers: Iterable[VelaLayer]) -> dict[str, int]:
    """Cycles per group (every group of :data:`GROUP_NAMES`, zero when empty)."""
    out = dict.fromkeys(GROUP_NAMES, 0)
    for layer in layers:
        out[op_group(layer)] += layer.cycles
    return out


# ------------------------------------------------------------------------------------------------ models
def fingerprint_cnn(seed: int) -> Any:
    """A fingerprint-signature CNN shaped like Silicon Labs' published one: 180x180x1 → 5x5/2 depthwise conv with 8
    filters per channel → 2x2 average pool → 3x3 conv (16) → global average pool → a 16-value embedding."""
    from models.zoo.core import seeded_keras

    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((180, 180, 1), name="fingerprint")
    x = L.DepthwiseConv2D(5, strides=2, depth_multiplier=8, use_bias=False)(inp)
    x = L.ReLU()(L.BatchNormalization()(x))
    x = L.AveragePooling2D(2)(x)
    x = L.Conv2D(16, 3, use_bias=False)(x)
    x = L.ReLU()(L.BatchNormalization()(x))
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(16, name="embedding")(x)
    return keras.Model(inp, x, name=FINGERPRINT)


def _model_defs() -> dict[str, Any]:
    """The zoo's models and the fingerprint CNN, by name."""
    from models.zoo import REGISTRY, InputSpec, ModelDef

    fp = ModelDef(FINGERPRINT, "other", fingerprint_cnn, (InputSpec("fingerprint", (1, 180, 180, 1)),),
                  variants=("int8",), seed=32, description="fingerprint-signature CNN, 180x180x1, 16-value embedding")
    return {**REGISTRY, FINGERPRINT: fp}


def _mobilenet_224_path() -> Path:
    return ROOT / ".cache" / "bench" / "mobilenet_v2_int8.tflite"


def _build_in_process(name: str, variant: str) -> Path:
    """Build one model (the child's side of :func:`_build`); its ``.tflite`` path."""
    if name == MOBILENET_224:
        from tests.modelgen import mobilenet_v2

        path = _mobilenet_224_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        tmp.write_bytes(mobilenet_v2(quant="int8"))
        os.replace(tmp, path)
        return path
    from models.zoo import build_tflite

    built = build_tflite(_model_defs()[name], variant).path
    assert built is not None
    return Path(built)


#: the child's environment: TensorFlow's native logging (absl / glog) off, no oneDNN notice
_QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_CPP_MAX_VLOG_LEVEL": "-1", "GLOG_minloglevel": "3",
              "ABSL_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "PYTHONWARNINGS": "ignore"}


def _build(name: str, variant: str, timeout: float = 3600) -> Path | str:
    """The ``.tflite`` of one model, built in a child process (output captured); the reason when it fails."""
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--build", name, "--variant", variant],
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                              env={**os.environ, **_QUIET_ENV})
    except subprocess.TimeoutExpired:
        return f"build timed out after {timeout:.0f} s"
    last = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    if proc.returncode == 0 and last and last[0].startswith("{"):
        res = json.loads(last[0])
        return Path(res["path"]) if "path" in res else str(res["refused"])[:80]
    if proc.returncode < 0:
        try:
            sig = signal.Signals(-proc.returncode).name
        except ValueError:
            sig = f"signal {-proc.returncode}"
        return f"TensorFlow crashed building it ({sig})"
    tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-1:]
    return f"build failed (exit {proc.returncode}): {tail[0][:60] if tail else ''}"


def _models(variant: str, pattern: str | None) -> Iterator[tuple[str, Path | str]]:
    """(name, .tflite path or the reason it has none) of every model of the run, one at a time (a model is built
    when its turn comes, so the table grows as it goes): the zoo's models in ``variant`` (from ``.cache/zoo`` or
    built in a child), then, for int8, the samples, MobileNetV2 1.0-224 and the fingerprint CNN."""
    from models.zoo import cache_path

    defs = _model_defs()

    def zoo(name: str) -> Iterator[tuple[str, Path | str]]:
        if pattern and not re.search(pattern, name):
            return
        mdef = defs[name]
        if variant in mdef.unsupported or mdef.gap(variant) or variant not in mdef.variants:
            return
        cached = Path(mdef.paths[variant]) if mdef.paths else cache_path(mdef, variant)
        refused = cached.with_suffix(".refused")
        if cached.exists():
            yield name, cached
        elif refused.exists():
            yield name, "TFLite refuses it: " + refused.read_text().splitlines()[0][:60]
        else:
            yield name, _build(name, variant)

    for name in sorted(n for n in defs if n != FINGERPRINT):
        yield from zoo(name)
    if variant != "int8":
        return
    for p in sorted((ROOT / "models" / "samples").glob("*_int8.tflite")):
        if not pattern or re.search(pattern, p.stem):
            yield f"sample:{p.stem}", p
    if not pattern or re.search(pattern, MOBILENET_224):
        path = _mobilenet_224_path()
        yield MOBILENET_224, path if path.exists() else _build(MOBILENET_224, variant)
    yield from zoo(FINGERPRINT)


# ------------------------------------------------------------------------------------------------ measuring
def _convert_ours(tflite: Path, npu_rounding: str = "exact") -> Any:
    import tf2tosa
    from tf2tosa.errors import InputError

    try:
        return tf2tosa.convert(str(tflite), io="int", target=TARGET, npu_rounding=npu_rounding)
    except InputError:  # integer edges already
        return tf2tosa.convert(str(tflite), target=TARGET, npu_rounding=npu_rounding)


def _ours(tflite: Path, out: Path, npu_rounding: str = "exact") -> Path:
    _convert_ours(tflite, npu_rounding).save(out)
    return out


#: the seeded input sets ``--npu-rounding native`` compares with BUILTIN_REF
NATIVE_SETS = 10


def _native_figures(tflite: Path, exact: VelaResult | str) -> dict[str, Any]:
    """``--npu-rounding native``: ours in the exact mode (cycles) and the native program against BUILTIN_REF (the
    integer output elements that differ, of how many, and the largest difference in LSB)."""
    report = _convert_ours(tflite, "native").verify(num=NATIVE_SETS, seed=0, oracle="ref")
    ints = [o for o in report.outputs if not o.is_float]
    total = sum(int(np.prod(o.shape)) for o in ints) * report.runs
    return {"exact": exact.cycles if isinstance(exact, VelaResult) else None,
            "mismatches": sum(o.mismatches for o in ints), "elements": total,
            "max_lsb": max((int(o.max_abs) for o in ints), default=0), "inexact": len(report.inexact)}


def _measure(fn: Callable[[], Path]) -> VelaResult | str:
    try:
        return compile_for_npu(fn(), layers=True)
    except (VelaError, OSError) as e:
        return str(e).splitlines()[0][:60]
    except Exception as e:  # noqa: BLE001 - a conversion failure is a row of the table, not the end of the run
        return f"{type(e).__name__}: {str(e).splitlines()[0][:50]}"


def _native_line(tfl: Path, d: Path) -> dict[str, Any]:
    """The native mode's figures of one model (:func:`_native_figures`) and their line under its row."""
    try:
        fig = _native_figures(tfl, _measure(partial(_ours, tfl, d / "exact.tosa")))
    except Exception as e:  # noqa: BLE001 - a failed comparison is a line of the table, not the end of the run
        return {"text": f"native: {type(e).__name__}: {str(e).splitlines()[0][:60]}"}
    n, tot = fig["mismatches"], fig["elements"]
    fig["text"] = (f"native: exact mode {fig['exact'] or '-'} cycles; vs BUILTIN_REF ({NATIVE_SETS} input sets) "
                   f"{n} of {tot} output elements differ ({100.0 * n / max(tot, 1):.3f}%), max |LSB| "
                   f"{fig['max_lsb']}; {fig['inexact']} inexact op(s)")
    return fig


def _k(c: int) -> str:
    """Cycles in kilocycles, signed, one decimal."""
    return f"{c / 1000:+.1f}"


def _group_table(name: str, groups: dict[str, dict[str, int] | None]) -> list[str]:
    """The ``--layers`` table of one model: cycles per group of ours, Arm's and the tflite, and ours − tflite."""
    lines = [f"  {name}: cycles per group (Vela per-layer report)",
             f"    {'group':12s} {'ours':>10s} {'Arm':>10s} {'tflite':>10s} {'ours-tfl':>10s}"]
    for g in (*GROUP_NAMES, "total"):
        vals = {k: (sum(v.values()) if g == "total" else v[g]) if v else None for k, v in groups.items()}
        if g != "total" and not any(vals.values()):
            continue
        d = vals["ours"] - vals["tflite"] if vals["ours"] is not None and vals["tflite"] is not None else None
        lines.append(f"    {g:12s} " + " ".join(f"{'-' if v is None else v:>10}" for v in vals.values())
                     + f" {'-' if d is None else d:>10}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="int8", choices=("int8", "int16x8"))
    ap.add_argument("--filter", default=None, help="regular expression on the model name")
    ap.add_argument("--layers", action="store_true", help="print each model's cycles per operation group")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--npu-rounding", default="exact", choices=("exact", "native"),
                    help="ours' npu_rounding (native: also the exact mode's cycles and LSB vs BUILTIN_REF)")
    ap.add_argument("--build", default=None, help=argparse.SUPPRESS)  # the child: build one model, print its path
    args = ap.parse_args()
    if args.build:
        from models.zoo.core import TFLiteRefused

        try:
            print(json.dumps({"path": str(_build_in_process(args.build, args.variant))}))
        except TFLiteRefused as e:
            print(json.dumps({"refused": "TFLite refuses it: " + str(e).splitlines()[0]}))
        return 0
    if vela_bin() is None:
        print("bench_npu: Vela is not installed (expected .venv-vela/bin/vela; `make env` builds it from "
              "requirements-vela.txt)", file=sys.stderr)
        return 2
    logging.getLogger("tf2tosa").setLevel(logging.ERROR)  # a conversion's warnings (an unset batch) are not the table
    rows: list[dict[str, Any]] = []
    head = (f"{'model':28s} {'ours cyc':>10s} {'Arm cyc':>10s} {'tflite cyc':>10s} {'ours/Arm':>8s} "
            f"{'ours/tfl':>8s} {'SRAM KiB ours/Arm/tfl':>22s} {'CPU ops ours/tfl':>16s}")
    print(f"Vela 5.2.0, ethos-u85-256, Ethos_U85_SYS_DRAM_High, Dedicated_Sram_384KB; {args.variant} models")
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory(prefix="bench-npu-") as tmp:
        for name, tfl in _models(args.variant, args.filter):
            if isinstance(tfl, str):
                rows.append({"model": name, "skipped": tfl})
                print(f"{name[:28]:28s} skipped: {tfl}", flush=True)
                continue
            d = Path(tmp) / re.sub(r"\W", "_", name)
            d.mkdir()
            ours = _measure(partial(_ours, tfl, d / "ours.tosa", args.npu_rounding))
            arm = _measure(partial(arm_tosa, tfl, d / "arm.tosa"))
            ref = _measure(partial(Path, tfl))
            res = {"ours": ours, "arm": arm, "tflite": ref}
            cyc = [r.cycles if isinstance(r, VelaResult) else None for r in (ours, arm, ref)]
            sram = [f"{r.sram_kib:.0f}" if isinstance(r, VelaResult) else "-" for r in (ours, arm, ref)]
            r_arm = cyc[0] / cyc[1] if cyc[0] and cyc[1] else None
            r_tfl = cyc[0] / cyc[2] if cyc[0] and cyc[2] else None
            cpu = ours.cpu_ops if isinstance(ours, VelaResult) else None
            cpu_tfl = ref.cpu_ops if isinstance(ref, VelaResult) else None
            groups = {k: (group_cycles(r.layers) if isinstance(r, VelaResult) and r.layers else None)
                      for k, r in res.items()}
            errors = {k: r for k, r in res.items() if isinstance(r, str)}
            row: dict[str, Any] = {
                "model": name, "ours": cyc[0], "arm": cyc[1], "tflite": cyc[2], "ours_over_arm": r_arm,
                "ours_over_tflite": r_tfl,
                "sram_kib": {k: (r.sram_kib if isinstance(r, VelaResult) else None) for k, r in res.items()},
                "ours_cpu_ops": cpu, "tflite_cpu_ops": cpu_tfl, "groups": groups, "errors": errors}
            rows.append(row)

            def fmt(c: int | None) -> str:
                return f"{c:10d}" if c is not None else f"{'rejected':>10s}"

            print(f"{name[:28]:28s} {fmt(cyc[0])} {fmt(cyc[1])} {fmt(cyc[2])} "
                  f"{(f'{r_arm:.3f}' if r_arm else '-'):>8s} {(f'{r_tfl:.3f}' if r_tfl else '-'):>8s} "
                  f"{'/'.join(sram):>22s} {'/'.join('-' if c is None else str(c) for c in (cpu, cpu_tfl)):>16s}",
                  flush=True)
            for k, why in errors.items():
                print(f"    {k}: {why}")
            if args.npu_rounding == "native":
                row["native"] = _native_line(tfl, d)
                print(f"    {row['native']['text']}", flush=True)
            if args.layers:
                print("\n".join(_group_table(name, groups)), flush=True)
    both = [r for r in rows if r.get("ours_over_arm")]
    if both:
        worse = [r["model"] for r in both if r["ours_over_arm"] > 1.0]
        print(f"ours <= Arm's on {len(both) - len(worse)} of {len(both)} models" +
              (f"; above: {', '.join(worse)}" if worse else ""))
    tfl = [r for r in rows if r.get("ours_over_tflite")]
    if tfl:
        above = [r for r in tfl if r["ours_over_tflite"] > 1.05]
        print(f"ours/.tflite <= 1.05 on {len(tfl) - len(above)} of {len(tfl)} models" +
              (f"; above: {', '.join(r['model'] for r in above)}" if above else ""))
        cpu_side = [f"{r['model']} ({r['tflite_cpu_ops']})" for r in tfl if r.get("tflite_cpu_ops")]
        if cpu_side:
            print("the .tflite path leaves ops on the CPU (their cycles are not in its figure): " + ", ".join(cpu_side))
    mnv2 = next((r for r in rows if r["model"] == MOBILENET_224 and r.get("ours_over_tflite")), None)
    if mnv2:
        print(f"MobileNetV2 1.0-224 int8: ours {mnv2['ours_over_tflite']:.3f}x the .tflite through Vela")
    print("\n".join(_compact_groups(rows)))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


def _compact_groups(rows: list[dict[str, Any]]) -> list[str]:
    """Ours − tflite per group, in kilocycles, one line per model with both (the default group table)."""
    shown = [r for r in rows if r.get("groups") and r["groups"]["ours"] and r["groups"]["tflite"]]
    if not shown:
        return []
    used = [g for g in GROUP_NAMES if any(r["groups"]["ours"][g] or r["groups"]["tflite"][g] for r in shown)]
    head = f"{'ours - tflite, kcycles':28s} " + " ".join(f"{g[:9]:>9s}" for g in used) + f" {'total':>9s}"
    out = ["", "Where the cycles go: ours - .tflite per operation group (Vela's per-layer report; --layers: all "
           "three)", head, "-" * len(head)]
    for r in shown:
        o, t = r["groups"]["ours"], r["groups"]["tflite"]
        out.append(f"{r['model'][:28]:28s} " + " ".join(f"{_k(o[g] - t[g]):>9s}" for g in used)
                   + f" {_k(sum(o.values()) - sum(t.values())):>9s}")
    return out


if __name__ == "__main__":
    sys.exit(main())
