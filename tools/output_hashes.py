"""Byte-identity harness: hash every ``.tosa`` and ``.mlir`` the test suite, the demo and the zoo produce.

    python tools/output_hashes.py run OUT.manifest [--no-tests] [--no-demo] [--no-zoo]
                                      [--zoo-filter PATTERN] [-- PYTEST ARGS...]
    python tools/output_hashes.py compare BEFORE.manifest AFTER.manifest

``run`` sets ``TF2TOSA_HASH_DIR`` and puts ``tools/hash_hook`` on ``PYTHONPATH``: the serializer's two
entry points (``_Writer.write`` for flatbuffers, ``to_mlir`` for text) are wrapped in every process
(pytest with ``-p tests.hash_plugin``, its xdist workers, CLI subprocesses, the zoo's spawned
workers), and each result's sha256 is recorded with a label: the pytest node id, ``demo`` or ``zoo``.
The manifest is the sorted multiset of ``kind sha256 label`` lines.  ``compare`` reports the counts
and every line present a different number of times in the two manifests (exit status 1 if any);
``--ignore REGEX`` leaves out the lines whose label matches.

Op locations naming a temporary directory (graphs read back from files Arm's tools wrote) are
normalised before hashing (``tools/hash_hook``).  Known run-to-run differences that are not the
converter's: ``tests/test_output_order.py`` builds its Keras model with unseeded initialisers (two
runs on the same commit differ), and a few tests name tensors from process-wide counters
(``transpose_conv2d_11``), so under xdist their hashes depend on which worker ran what before.
Re-run such labels the same way on both commits (``run OUT --no-zoo --no-demo -- NODEIDS``).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOOK_DIR = os.path.join(ROOT, "tools", "hash_hook")


def _env(hash_dir: str, label: str) -> dict[str, str]:
    env = dict(os.environ)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([HOOK_DIR, ROOT, *[p for p in parts if p not in (HOOK_DIR, ROOT)]])
    env["TF2TOSA_HASH_DIR"] = hash_dir
    env["TF2TOSA_HASH_LABEL"] = label
    return env


def _collect(hash_dir: str) -> list[str]:
    lines: list[str] = []
    for name in os.listdir(hash_dir):
        with open(os.path.join(hash_dir, name), encoding="utf-8") as f:
            lines.extend(" ".join(line.rstrip("\n").split("\t")) for line in f if line.strip())
    return sorted(lines)


def run(args: argparse.Namespace) -> int:
    hash_dir = tempfile.mkdtemp(prefix="tf2tosa-hashes-")
    py = sys.executable
    status = 0
    try:
        if not args.no_tests:
            cmd = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.hash_plugin", *args.pytest_args]
            print("+", " ".join(cmd), flush=True)
            status |= subprocess.call(cmd, cwd=ROOT, env=_env(hash_dir, "pytest"))
        if not args.no_demo:
            out = tempfile.mkdtemp(prefix="tf2tosa-demo-")
            cmd = [py, "-m", "tf2tosa.cli", "demo", "--out-dir", out]
            print("+", " ".join(cmd), flush=True)
            status |= subprocess.call(cmd, cwd=ROOT, env=_env(hash_dir, "demo"))
            shutil.rmtree(out, ignore_errors=True)
        if not args.no_zoo:
            out = tempfile.mkdtemp(prefix="tf2tosa-zoo-")
            cmd = [py, "-m", "tf2tosa.cli", "zoo", "--jobs", str(args.zoo_jobs), "--report", out]
            if args.zoo_filter:
                cmd += ["--filter", args.zoo_filter]
            print("+", " ".join(cmd), flush=True)
            status |= subprocess.call(cmd, cwd=ROOT, env=_env(hash_dir, "zoo"))
            shutil.rmtree(out, ignore_errors=True)
        lines = _collect(hash_dir)
    finally:
        shutil.rmtree(hash_dir, ignore_errors=True)
    with open(args.manifest, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    counts = collections.Counter(line.split(" ", 1)[0] for line in lines)
    print(f"{args.manifest}: {len(lines)} outputs ({counts['tosa']} .tosa, {counts['mlir']} .mlir); "
          f"commands exit status {status}")
    return 0


def _read(path: str, ignore: str | None = None) -> collections.Counter[str]:
    skip = re.compile(ignore) if ignore else None
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    return collections.Counter(ln for ln in lines if not (skip and skip.search(ln.split(" ", 2)[-1])))


def compare(args: argparse.Namespace) -> int:
    a, b = _read(args.before, args.ignore), _read(args.after, args.ignore)
    for name, m in (("before", a), ("after", b)):
        kinds = collections.Counter()
        for line, n in m.items():
            kinds[line.split(" ", 1)[0]] += n
        print(f"{name}: {sum(m.values())} outputs ({kinds['tosa']} .tosa, {kinds['mlir']} .mlir)")
    only_a, only_b = a - b, b - a
    for line, n in sorted(only_a.items()):
        print(f"- {line}" + (f" (x{n})" if n > 1 else ""))
    for line, n in sorted(only_b.items()):
        print(f"+ {line}" + (f" (x{n})" if n > 1 else ""))
    diff = sum(only_a.values()) + sum(only_b.values())
    print(f"{diff} differences")
    return 1 if diff else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the suite, demo and zoo and write a manifest")
    r.add_argument("manifest")
    r.add_argument("--no-tests", action="store_true")
    r.add_argument("--no-demo", action="store_true")
    r.add_argument("--no-zoo", action="store_true")
    r.add_argument("--zoo-filter", default=None)
    r.add_argument("--zoo-jobs", type=int, default=1)
    c = sub.add_parser("compare", help="compare two manifests")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--ignore", default=None, metavar="REGEX", help="leave out lines whose label matches")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    args = p.parse_args(argv)
    args.pytest_args = extra
    return run(args) if args.cmd == "run" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
