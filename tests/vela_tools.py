"""Arm's Vela compiler (Ethos-U NPUs) as a subprocess, for the NPU interop tests and ``benchmarks/bench_npu.py``.

Vela lives in its own virtual environment, ``.venv-vela`` (``requirements-vela.txt``, built by ``make env``);
``$TF2TOSA_VELA`` names another executable.  :func:`compile_for_npu` compiles one ``.tosa`` or ``.tflite`` for the
Ethos-U85-256 configuration of the issue and reads Vela's own summary: the cycle and SRAM estimate and how many
operators stayed on the CPU; with ``layers=True`` also its per-layer report (``--verbose-performance`` makes Vela 5.2
write ``<name>_per-layer.csv`` to the output directory: one row per NPU/CPU operation after its graph optimisation,
whose ``Op Cycles`` add up to ``cycles_total``), read by :func:`read_per_layer`.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the Ethos-U85 configuration every NPU figure of the project uses (issue 15)
VELA_ARGS = ("--accelerator-config", "ethos-u85-256", "--config", "Arm/vela.ini",
             "--system-config", "Ethos_U85_SYS_DRAM_High", "--memory-mode", "Dedicated_Sram_384KB")


class VelaError(RuntimeError):
    """Vela rejected a model (its last lines of output are the message)."""


@dataclass(frozen=True)
class VelaResult:
    """Vela's estimate for one compiled network."""

    cycles: int          #: ``cycles_total`` of Vela's summary (NPU plus memory-access cycles)
    sram_kib: float      #: ``sram_memory_used`` (KiB)
    npu_ops: int         #: operators placed on the NPU
    cpu_ops: int         #: operators left to the CPU
    passes: int          #: ``passes_after_fusing``
    layers: tuple[VelaLayer, ...] = ()  #: the per-layer report (``compile_for_npu(..., layers=True)``)


@dataclass(frozen=True)
class VelaLayer:
    """One row of Vela's ``<name>_per-layer.csv``."""

    original: str        #: ``Original Operator``: the TFLite or TOSA operator it came from (``Conv2D``, ``Rescale``)
    op: str              #: ``NNG Operator``: what Vela runs (``Conv2D``, ``LUT``, ``MemoryCopy`` ...)
    target: str          #: ``NPU`` or ``CPU``
    cycles: int          #: ``Op Cycles`` (0 for an operation fused into the one before it)
    macs: int            #: ``MAC Count``
    name: str            #: ``Name``: the output tensor


def read_per_layer(path: Path) -> tuple[VelaLayer, ...]:
    """The rows of a Vela ``*_per-layer.csv`` (written with ``--verbose-performance``)."""
    with path.open(newline="") as f:
        return tuple(VelaLayer(original=r["Original Operator"].strip(), op=r["NNG Operator"].strip(),
                               target=r["Target"].strip(), cycles=int(float(r["Op Cycles"])),
                               macs=int(float(r["MAC Count"] or 0)), name=r["Name"].strip())
                     for r in csv.DictReader(f))


def vela_bin() -> Path | None:
    """The Vela executable, or None when it is not installed."""
    env = os.environ.get("TF2TOSA_VELA")
    cand = Path(env) if env else ROOT / ".venv-vela" / "bin" / "vela"
    return cand if cand.is_file() and os.access(cand, os.X_OK) else None


def compile_for_npu(model: Path, extra: tuple[str, ...] = (), timeout: float = 600, *,
                    layers: bool = False) -> VelaResult:
    """Compile ``model`` (``.tosa`` or ``.tflite``) with Vela for ethos-u85-256; raise :class:`VelaError` on failure.
    ``layers``: also read the per-layer report into :attr:`VelaResult.layers`."""
    exe = vela_bin()
    if exe is None:
        raise VelaError("Vela is not installed (expected .venv-vela/bin/vela; `make env` builds it)")
    with tempfile.TemporaryDirectory(prefix="vela-") as tmp:
        more = ("--verbose-performance",) if layers else ()
        proc = subprocess.run([str(exe), *VELA_ARGS, *more, *extra, "--output-dir", tmp, str(model)],
                              capture_output=True, text=True, timeout=timeout)
        text = proc.stdout + proc.stderr
        summaries = list(Path(tmp).glob("*_summary_*.csv"))
        if proc.returncode != 0 or not summaries:
            tail = "\n".join(text.strip().splitlines()[-8:])
            raise VelaError(f"Vela failed on {model.name} (exit {proc.returncode}): {tail}")
        with summaries[0].open(newline="") as f:
            row = next(csv.DictReader(f))
        per_layer = list(Path(tmp).glob("*_per-layer.csv")) if layers else []
        rows = read_per_layer(per_layer[0]) if per_layer else ()
    cpu = re.search(r"CPU operators = (\d+)", text)
    npu = re.search(r"NPU operators = (\d+)", text)
    return VelaResult(cycles=int(float(row["cycles_total"])), sram_kib=float(row["sram_memory_used"]),
                      npu_ops=int(npu.group(1)) if npu else 0, cpu_ops=int(cpu.group(1)) if cpu else 0,
                      passes=int(float(row["passes_after_fusing"])), layers=rows)


def arm_tosa(tflite: Path, out: Path, timeout: float = 600) -> Path:
    """Arm's pipeline: ``tosa-converter-for-tflite --bytecode`` then ``tosa-opt --tosa-serialize`` → ``out``."""
    bindir = ROOT / ".venv-tosa" / "bin"
    mlirbc = out.with_suffix(".mlirbc")
    for cmd in ([str(bindir / "tosa-converter-for-tflite"), str(tflite), "--bytecode", "-o", str(mlirbc)],
                [str(bindir / "tosa-opt"), str(mlirbc), f"--tosa-serialize=tosa-flatbuffer-filename={out}",
                 "-o", os.devnull]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise VelaError(f"{Path(cmd[0]).name} failed on {tflite.name}: {proc.stderr.strip()[-500:]}")
    return out
