"""The target check against Vela 5.2 on the zoo: every buildable model variant is converted, checked with
``tf2tosa.tosa.targets.check(..., "ethos-u85")`` and compiled by Vela for Ethos-U85-256 (the issue's command line);
prints one line per variant and the tally of (we report nothing, Vela accepts).  ``python -m tests.vela_check
[PATTERN]``; needs ``ROOT/.venv-vela``."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import tf2tosa
from tf2tosa.tosa.targets import check

ROOT = Path(__file__).resolve().parents[1]
VELA = ROOT / ".venv-vela" / "bin" / "vela"
VELA_ARGS = ("--accelerator-config", "ethos-u85-256", "--config", "Arm/vela.ini", "--system-config",
             "Ethos_U85_SYS_DRAM_High", "--memory-mode", "Dedicated_Sram_384KB")


def vela(tosa: bytes) -> tuple[bool, str]:
    """(accepted: exit 0 with every operator on the NPU, the last line of Vela's complaint)."""
    with tempfile.TemporaryDirectory(prefix="tf2tosa-vela-") as tmp:
        path = Path(tmp) / "m.tosa"
        path.write_bytes(tosa)
        proc = subprocess.run([str(VELA), *VELA_ARGS, "--output-dir", tmp, str(path)], capture_output=True,
                              text=True, timeout=1800, check=False)
    text = proc.stdout + proc.stderr
    ok = proc.returncode == 0 and "CPU operators = 0 " in text
    err = [ln for ln in text.splitlines() if "Error" in ln or "error" in ln]
    return ok, (err[0] if err else f"exit {proc.returncode}")[:160]


def main(argv: list[str]) -> int:
    from models.zoo import build_tflite
    from tests.iree_check import zoo_cases

    tally: Counter[tuple[bool, bool]] = Counter()
    for key, mdef, variant in zoo_cases(argv[0] if argv else None):
        try:
            model = tf2tosa.convert(build_tflite(mdef, variant).data)
        except Exception as e:  # noqa: BLE001 - a sweep reports every failure and goes on
            print(f"{key}: not converted ({type(e).__name__})", flush=True)
            continue
        problems = check(model.graph, "ethos-u85")
        accepted, why = vela(model.to_bytes())
        tally[(not problems, accepted)] += 1
        rules = Counter(p.rule for p in problems)
        first = f"; first: {problems[0]}"[:200] if problems else ""
        print(f"{key}: ours {'clean' if not problems else dict(rules)} | vela {'accepts' if accepted else why}"
              f"{first}", flush=True)
    print("tally (ours clean, vela accepts): " + ", ".join(f"{k}: {v}" for k, v in sorted(tally.items())))
    return 0 if all(a == b for a, b in tally) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
