"""NPU cost on Ethos-U85-256, in Vela's own estimate: our .tosa, Arm's pipeline's .tosa and the .tflite itself.

Per int8 model of the zoo (and the int8 samples and MobileNetV2 1.0-224), measured in one run:
  * ours:   ``tf2tosa.convert(model)`` (``io="int"`` when the model has float edges) → ``.tosa`` → Vela;
  * Arm's:  ``tosa-converter-for-tflite --bytecode`` → ``tosa-opt --tosa-serialize`` → ``.tosa`` → Vela;
  * tflite: the ``.tflite`` → Vela.
Vela runs with ``--accelerator-config ethos-u85-256 --config Arm/vela.ini --system-config Ethos_U85_SYS_DRAM_High
--memory-mode Dedicated_Sram_384KB`` (``tests/vela_tools.py``); the table gives its total cycle estimate, its SRAM use,
ops left off the NPU, and the ratios ours/Arm's and ours/tflite.  A model Vela rejects shows the reason instead.

    python benchmarks/bench_npu.py [--filter mobilenet] [--variant int8] [--json out.json]

Needs Vela (``.venv-vela``, built by ``make env``) and Arm's tools (``.venv-tosa``); without Vela it prints one line
and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.vela_tools import VelaError, VelaResult, arm_tosa, compile_for_npu, vela_bin  # noqa: E402


def _models(variant: str, pattern: str | None) -> list[tuple[str, Path]]:
    """(name, .tflite path) of every zoo model in ``variant`` (cached, or built with TensorFlow) and the samples."""
    from models.zoo import REGISTRY, build_tflite

    out: list[tuple[str, Path]] = []
    for name, mdef in sorted(REGISTRY.items()):
        if pattern and not re.search(pattern, name):
            continue
        if variant in mdef.unsupported or mdef.gap(variant):
            continue
        try:
            info = build_tflite(mdef, variant)
        except Exception as e:  # noqa: BLE001 - TFLite refuses some variants; the table says so
            print(f"  {name}: no {variant} .tflite ({str(e).splitlines()[0][:100]})", file=sys.stderr)
            continue
        out.append((name, Path(info.path)))
    if variant == "int8":
        for p in sorted((ROOT / "models" / "samples").glob("*_int8.tflite")):
            if not pattern or re.search(pattern, p.stem):
                out.append((f"sample:{p.stem}", p))
        if not pattern or re.search(pattern, MOBILENET_224):
            out.append((MOBILENET_224, _mobilenet_224()))
    return out


#: the issue's reference model: MobileNetV2 1.0-224 int8 (tests.modelgen.mobilenet_v2, as bench_convert.py uses it)
MOBILENET_224 = "mobilenet_v2_1.0_224"


def _mobilenet_224() -> Path:
    path = ROOT / ".cache" / "bench" / "mobilenet_v2_int8.tflite"
    if not path.exists():
        from tests.modelgen import mobilenet_v2

        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(mobilenet_v2(quant="int8"))
    return path


def _ours(tflite: Path, out: Path) -> Path:
    import tf2tosa
    from tf2tosa.errors import InputError

    try:
        m = tf2tosa.convert(str(tflite), io="int")
    except InputError:  # integer edges already
        m = tf2tosa.convert(str(tflite))
    m.save(out)
    return out


def _measure(fn: Any) -> VelaResult | str:
    try:
        return compile_for_npu(fn())
    except (VelaError, OSError) as e:
        return str(e).splitlines()[0][:60]
    except Exception as e:  # noqa: BLE001 - a conversion failure is a row of the table, not the end of the run
        return f"{type(e).__name__}: {str(e).splitlines()[0][:50]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="int8", choices=("int8", "int16x8"))
    ap.add_argument("--filter", default=None, help="regular expression on the model name")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if vela_bin() is None:
        print("bench_npu: Vela is not installed (expected .venv-vela/bin/vela; `make env` builds it from "
              "requirements-vela.txt)", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    head = (f"{'model':28s} {'ours cyc':>10s} {'Arm cyc':>10s} {'tflite cyc':>10s} {'ours/Arm':>8s} "
            f"{'ours/tfl':>8s} {'SRAM KiB ours/Arm/tfl':>22s} {'CPU ops':>7s}")
    print(f"Vela 5.2.0, ethos-u85-256, Ethos_U85_SYS_DRAM_High, Dedicated_Sram_384KB; {args.variant} models")
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory(prefix="bench-npu-") as tmp:
        for name, tfl in _models(args.variant, args.filter):
            d = Path(tmp) / re.sub(r"\W", "_", name)
            d.mkdir()
            ours = _measure(lambda t=tfl, o=d / "ours.tosa": _ours(t, o))
            arm = _measure(lambda t=tfl, o=d / "arm.tosa": arm_tosa(t, o))
            ref = _measure(lambda t=tfl: t)
            cyc = [r.cycles if isinstance(r, VelaResult) else None for r in (ours, arm, ref)]
            sram = [f"{r.sram_kib:.0f}" if isinstance(r, VelaResult) else "-" for r in (ours, arm, ref)]
            r_arm = cyc[0] / cyc[1] if cyc[0] and cyc[1] else None
            r_tfl = cyc[0] / cyc[2] if cyc[0] and cyc[2] else None
            cpu = ours.cpu_ops if isinstance(ours, VelaResult) else None
            row = {"model": name, "ours": cyc[0], "arm": cyc[1], "tflite": cyc[2], "ours_over_arm": r_arm,
                   "ours_over_tflite": r_tfl, "sram_kib": {k: (r.sram_kib if isinstance(r, VelaResult) else None)
                                                          for k, r in zip(("ours", "arm", "tflite"), (ours, arm, ref))},
                   "ours_cpu_ops": cpu,
                   "errors": {k: r for k, r in zip(("ours", "arm", "tflite"), (ours, arm, ref)) if isinstance(r, str)}}
            rows.append(row)

            def fmt(c: int | None) -> str:
                return f"{c:10d}" if c is not None else f"{'rejected':>10s}"

            print(f"{name[:28]:28s} {fmt(cyc[0])} {fmt(cyc[1])} {fmt(cyc[2])} "
                  f"{(f'{r_arm:.3f}' if r_arm else '-'):>8s} {(f'{r_tfl:.3f}' if r_tfl else '-'):>8s} "
                  f"{'/'.join(sram):>22s} {('-' if cpu is None else str(cpu)):>7s}", flush=True)
            for k, e in row["errors"].items():
                print(f"    {k}: {e}")
    both = [r for r in rows if r["ours_over_arm"]]
    if both:
        worse = [r["model"] for r in both if r["ours_over_arm"] > 1.0]
        print(f"ours <= Arm's on {len(both) - len(worse)} of {len(both)} models" +
              (f"; above: {', '.join(worse)}" if worse else ""))
    mnv2 = next((r for r in rows if r["model"] == MOBILENET_224 and r["ours_over_tflite"]), None)
    if mnv2:
        print(f"MobileNetV2 1.0-224 int8: ours {mnv2['ours_over_tflite']:.3f}x the .tflite through Vela")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
