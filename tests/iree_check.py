"""IREE against the embedded executor on one model: the shared body of tests/test_iree.py's sample, zoo-subset and
zoo-sweep tests (also runnable as ``python -m tests.iree_check [PATTERN]`` to print the figures of the sweep)."""

from __future__ import annotations

import sys
import time
from typing import Any

import tf2tosa
from tf2tosa.executor import run
from tf2tosa.verify import iree
from tf2tosa.verify.compare import random_inputs


def check(data: bytes | str, name: str, seed: int = 0) -> dict[str, Any]:
    """Convert, compile our MLIR with IREE, run both on one seeded input set; the agreement rows and timings."""
    model = tf2tosa.convert(data)
    feed = random_inputs(model.graph, seed)
    t0 = time.perf_counter()
    prog = iree.IreeProgram(model.graph, name=name, use_cache=False)
    t1 = time.perf_counter()
    theirs = prog(feed)
    t2 = time.perf_counter()
    ours = model.run(feed)
    t3 = time.perf_counter()
    rows = iree.agreement(model.graph, ours, theirs, fp64=run(model.graph, feed, precise=True))
    return {"name": name, "rows": rows, "ok": all(r["ok"] for r in rows), "compile_s": t1 - t0,
            "iree_ms": (t2 - t1) * 1e3, "executor_ms": (t3 - t2) * 1e3}


def zoo_cases(pattern: str | None = None) -> list[tuple[str, Any, str]]:
    """(key, ModelDef, variant) of every buildable zoo model variant the pattern selects (real models included)."""
    from tf2tosa import zoo as tz

    return [(f"{m.name}/{v}", m, v) for m, vs in tz.select(pattern) for v in vs if v not in m.unsupported]


def main(argv: list[str]) -> int:
    from models.zoo import build_tflite

    bad = 0
    for key, mdef, variant in zoo_cases(argv[0] if argv else None):
        try:
            res = check(build_tflite(mdef, variant).data, key)
        except Exception as e:  # noqa: BLE001 - a sweep reports every failure and goes on
            bad += 1
            print(f"{key}: ERROR {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
            continue
        bad += not res["ok"]
        detail = "; ".join(f"{r['name']}: " + (f"{r['mismatches']} mismatches" if r["mismatches"] is not None else
                                                f"err {r['max_abs_err']:.3g} (bound {r['bound']:.3g}"
                                                + (", vs fp64: executor {executor:.3g} iree {iree:.3g}".format(
                                                    **r["fp64_err"]) if "fp64_err" in r else "") + ")")
                           for r in res["rows"])
        print(f"{key}: {'OK' if res['ok'] else 'FAIL'} compile {res['compile_s']:.1f}s iree {res['iree_ms']:.1f}ms "
              f"executor {res['executor_ms']:.1f}ms  {detail}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
