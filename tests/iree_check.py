"""IREE against the embedded executor on one model: the shared body of tests/test_iree.py's sample, zoo-subset and
zoo-sweep tests (also runnable as ``python -m tests.iree_check [PATTERN]`` to print the figures of the sweep)."""

from __future__ import annotations

import copy
import sys
import time
from typing import Any

import numpy as np

import tf2tosa
from tf2tosa.executor import run
from tf2tosa.ir.graph import Graph, Operation
from tf2tosa.ir.types import DType
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
    ok = all(r["ok"] for r in rows)
    first = None if ok else first_divergence(model.graph, feed)
    return {"name": name, "rows": rows, "ok": ok, "compile_s": t1 - t0, "iree_ms": (t2 - t1) * 1e3,
            "executor_ms": (t3 - t2) * 1e3, "first_divergence": first}


def first_divergence(graph: Graph, feed: dict[str, Any]) -> Operation | None:
    """The first op (in program order) whose result IREE computes differently from the executor: every
    intermediate (but i48 and shape values, which cannot be graph outputs) becomes an output of a copy of the
    graph, both run it, and the results are compared (integers exactly, floats to 1e-4 of their range)."""
    g = copy.deepcopy(graph)
    order = [op for op in g.topological_order() if op.opcode not in ("CONST", "CONST_SHAPE")]
    g.outputs = [r for op in order for r in op.results if r.type.dtype not in (DType.INT48, DType.SHAPE)]
    ours, theirs = run(g, feed), iree.run(g, feed, use_cache=False)
    for op in order:
        for r in op.results:
            if r.type.dtype in (DType.INT48, DType.SHAPE):
                continue
            a, b = np.asarray(ours[r.name]), np.asarray(theirs[r.name]).reshape(np.shape(ours[r.name]))
            if r.type.dtype.is_float:
                bad = bool(np.abs(a.astype(np.float64) - b).max(initial=0) > 1e-4 * max(1.0, float(np.abs(a).max(
                    initial=0))))
            else:
                bad = bool(np.any(a != b))
            if bad:
                return graph.ops[op.id]
    return None


def is_i48_rescale(op: Operation | None) -> bool:
    """The pattern IREE 3.13 gets wrong: a 16-bit-multiplier RESCALE of an i48 convolution result."""
    return (op is not None and op.opcode == "RESCALE" and op.operands[0].type.dtype is DType.INT48
            and not op.attrs.get("scale32", True))


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
        first = res["first_divergence"]
        why = "" if first is None else (f"  first divergence: {first.name}#{first.id}"
                                        + (" (the i48 RESCALE bug)" if is_i48_rescale(first) else ""))
        print(f"{key}: {'OK' if res['ok'] else 'FAIL'} compile {res['compile_s']:.1f}s iree {res['iree_ms']:.1f}ms "
              f"executor {res['executor_ms']:.1f}ms  {detail}{why}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
