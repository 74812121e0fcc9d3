"""Run Arm's TOSA conformance tests (generated locally, capped per operator x type) through our executor.

    python benchmarks/run_conformance.py                  # every operator (generates into .cache/conformance)
    python benchmarks/run_conformance.py --ops add conv2d # some operators
    python benchmarks/run_conformance.py --fast           # the quick subset of the default test suite
    python benchmarks/run_conformance.py --json out.json  # also write every outcome

Generation uses ``tosa_verif_build_tests`` and the reference model binary from ``.venv-tosa`` (no network);
cached tests are reused until the generation settings change (``--force`` regenerates).  Prints the pass
counts per operator and every failure with its reason.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import conformance as C  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", nargs="*", help="operators (generator names, e.g. conv2d cond_if); default: all")
    ap.add_argument("--fast", action="store_true", help="only the quick subset used by the default test suite")
    ap.add_argument("--root", type=Path, default=C.CACHE_DIR, help="cache directory (default .cache/conformance)")
    ap.add_argument("--maximum", type=int, default=2, help="tests per operator x data type (default 2)")
    ap.add_argument("--force", action="store_true", help="regenerate even when cached")
    ap.add_argument("--json", type=Path, help="write every outcome to this JSON file")
    ap.add_argument("--quiet", action="store_true", help="no per-failure lines")
    ap.add_argument("--arm-verify", action="store_true",
                    help="also judge every float output with Arm's tosa_verify and compare with our verdicts")
    args = ap.parse_args(argv)
    if not C.available():
        print("tosa-tools environment (.venv-tosa) with the generator and reference model not found", file=sys.stderr)
        return 2
    ops = list(C.FAST_OPERATORS) if args.fast else (args.ops or list(C.OPERATORS))
    unknown = [o for o in ops if o not in C.OPERATORS]
    if unknown:
        print(f"unknown operators: {unknown}; known: {' '.join(C.OPERATORS)}", file=sys.stderr)
        return 2
    cfg = C.GenConfig(maximum=1 if args.fast else args.maximum)
    root = args.root / "fast" if args.fast else args.root
    t0 = time.perf_counter()
    tests = C.generate(ops, root, cfg, force=args.force, log=lambda m: print("  generated " + m, flush=True))
    t_gen = time.perf_counter() - t0
    t1 = time.perf_counter()
    outcomes = C.run_all(tests, arm_verify=args.arm_verify)
    t_run = time.perf_counter() - t1
    table = C.summarize(outcomes)
    by_op: dict[str, list[C.Outcome]] = {}
    for o in outcomes:
        by_op.setdefault(o.op, []).append(o)
    print(f"\n{'operator':<24}{'tests':>6}{'passed':>8}{'positive':>10}{'ERROR_IF':>10}  notes")
    for op, row in table.items():
        outs = by_op[op]
        pos = [o for o in outs if o.kind == "positive"]
        neg = [o for o in outs if o.kind != "positive"]
        notes = sorted({o.note.split(" (")[0] for o in outs if o.note and o.passed and o.kind == "positive"})
        print(f"{op:<24}{row['tests']:>6}{row['passed']:>8}{sum(o.passed for o in pos):>5}/{len(pos):<4}"
              f"{sum(o.passed for o in neg):>5}/{len(neg):<4}  {'; '.join(notes)[:80]}")
    total = len(outcomes)
    passed = sum(o.passed for o in outcomes)
    missing = [o.upper() for o in C.OPERATORS if o.upper() not in table and not args.ops and not args.fast]
    print(f"\n{passed}/{total} passed over {len(table)} operators (generation {t_gen:.0f}s, "
          f"our executor {t_run:.1f}s)")
    if missing:
        print(f"no tests generated for: {', '.join(missing)}")
    if not args.fast and not args.ops:
        print(f"spec operators without generator tests: {', '.join(C.NOT_GENERATED)}")
    if args.arm_verify:
        verdicts = [d.split(":") for o in outcomes for d in o.details if d.startswith("arm:")]
        agree = sum((v[2] == "compliant") == (v[4] == "ok") for v in verdicts)
        arm_ok = sum(v[2] == "compliant" for v in verdicts)
        print(f"Arm's tosa_verify on {len(verdicts)} float outputs: {arm_ok} compliant; agrees with our compliance "
              f"checks on {agree}/{len(verdicts)}")
        for o in outcomes:
            for d in o.details:
                v = d.split(":")
                if d.startswith("arm:") and (v[2] == "compliant") != (v[4] == "ok"):
                    print(f"  disagreement: {o.op} {o.name} {v[1]}: Arm {v[2]}, ours {v[4]} {o.message[:200]}")
    failures = [o for o in outcomes if not o.passed]
    if failures and not args.quiet:
        print("\nfailures:")
        for o in failures:
            print(f"  {o.op} {o.name} [{o.kind}; reference {o.ref_status}, ours {o.status}] {o.message[:400]}")
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
