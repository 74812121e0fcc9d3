"""The VGF backend against the embedded executor on one model: the shared body of tests/test_vgf.py's sample and
zoo tests (also runnable as ``python tests/vgf_check.py [PATTERN] [--jsonl FILE]`` to print the zoo sweep's
agreement table: variant, result, max difference or bit-exactness, timings)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tf2tosa  # noqa: E402
from tf2tosa.executor import run  # noqa: E402
from tf2tosa.verify import vgf  # noqa: E402
from tf2tosa.verify.compare import random_inputs  # noqa: E402

#: the emulation layer's crash on an RFFT2D whose result feeds another op (tests/test_vgf.py pins it)
RFFT_CRASH = "the ML SDK 0.11 emulation layer crashes (SIGSEGV) on an RFFT2D whose result feeds another op"


def check(data: bytes | str, name: str, seed: int = 0, io: str = "float") -> dict[str, Any]:
    """Convert, run the VGF and the executor on one seeded input set; the agreement rows and timings."""
    model = tf2tosa.convert(data, io=io)
    feed = model.quantize_inputs(random_inputs(model.graph, seed))
    t0 = time.perf_counter()
    prog = vgf.VgfProgram(model.graph, name=name, use_cache=False)
    t1 = time.perf_counter()
    try:
        theirs = prog(feed)
    finally:
        prog.close()
    t2 = time.perf_counter()
    ours = run(model.graph, feed)
    rows = vgf.agreement(model.graph, ours, theirs, fp64=run(model.graph, feed, precise=True))
    return {"name": name, "rows": rows, "ok": all(r["ok"] for r in rows), "convert_s": t1 - t0,
            "run_s": t2 - t1, "ops": sum(1 for op in model.graph.ops.values()
                                         if op.opcode not in ("CONST", "CONST_SHAPE"))}


def summary(rows: list[dict[str, Any]]) -> str:
    """``bit-exact`` / ``N mismatches`` for integer outputs, the largest float error and its bound."""
    ints = [r for r in rows if r["mismatches"] is not None]
    floats = [r for r in rows if r["mismatches"] is None]
    parts = []
    if ints:
        bad = sum(r["mismatches"] for r in ints)
        parts.append("bit-exact" if bad == 0 else f"{bad} mismatches")
    if floats:
        worst = max(floats, key=lambda r: r["max_abs_err"] / r["bound"] if r["bound"] else r["max_abs_err"])
        fp = worst.get("fp64_err")
        parts.append(f"max|diff| {worst['max_abs_err']:.3g} (bound {worst['bound']:.3g}"
                     + (f"; vs fp64 executor {fp['executor']:.3g}, vgf {fp['vgf']:.3g}" if fp else "") + ")")
    return "; ".join(parts)


def zoo_cases(pattern: str | None = None) -> list[tuple[str, Any, str]]:
    """(key, ModelDef, variant) of every buildable zoo model variant the pattern selects (real models included)."""
    from tf2tosa import zoo as tz

    return [(f"{m.name}/{v}", m, v) for m, vs in tz.select(pattern) for v in vs if v not in m.unsupported]


def sweep_one(key: str, mdef: Any, variant: str) -> dict[str, Any]:
    """One zoo variant through the VGF: ``result`` is agree / DISAGREE / refused (by the model converter) / crash /
    error (anything else), with the detail."""
    from models.zoo import build_tflite

    try:
        res = check(build_tflite(mdef, variant).data, key)
    except vgf.VgfError as e:
        kind = "refused" if "refused" in e.message else "crash" if "crashed" in e.message else "error"
        return {"key": key, "result": kind, "detail": e.message.split(": ", 1)[-1]}
    except Exception as e:  # noqa: BLE001 - a sweep reports every failure and goes on
        first = str(e).splitlines()[0] if str(e) else ""
        return {"key": key, "result": "error", "detail": f"{type(e).__name__}: {first}"}
    return {"key": key, "result": "agree" if res["ok"] else "DISAGREE", "detail": summary(res["rows"]),
            "ops": res["ops"], "convert_s": round(res["convert_s"], 2), "run_s": round(res["run_s"], 2)}


def main(argv: list[str]) -> int:
    out = None
    if "--jsonl" in argv:
        i = argv.index("--jsonl")
        out = Path(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    done = set()
    if out is not None and out.exists():
        done = {json.loads(ln)["key"] for ln in out.read_text().splitlines() if ln.strip()}
    bad = 0
    rank = {"int8": 0, "float32": 1, "fp16": 2, "int16x8": 3}  # the common variants of every model first
    cases = sorted(zoo_cases(argv[0] if argv else None), key=lambda c: rank.get(c[2], 4))
    for key, mdef, variant in cases:
        if key in done:
            continue
        r = sweep_one(key, mdef, variant)
        bad += r["result"] not in ("agree", "refused")
        print(f"| {key} | {r['result']} | {r['detail']} |", flush=True)
        if out is not None:
            with out.open("a") as f:
                f.write(json.dumps(r) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
