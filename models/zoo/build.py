"""Build zoo models in a child process, so that a crash of the TensorFlow Lite converter (it segfaults on some
models, e.g. quantizing a WHILE loop) costs one variant, not the run.

``python -m models.zoo.build NAME VARIANT...`` builds the listed variants of one model into the cache;
``python -m models.zoo.build --prune`` deletes cache files no current definition uses.
:func:`ensure_built` runs it for the variants that are neither cached nor known to be refused; when the child dies,
the variant it was building is recorded as refused with the signal, and the rest are retried.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .core import CACHE_DIR, REPO, ModelDef, TFLiteRefused, build_tflite, cache_path

BUILD_TIMEOUT = 1800.0


def _pending(mdef: ModelDef, variants: Sequence[str]) -> list[str]:
    out = []
    for v in variants:
        if v in mdef.unsupported:
            continue
        p = cache_path(mdef, v)
        if not p.exists() and not p.with_suffix(".refused").exists():
            out.append(v)
    return out


def _signal_name(rc: int) -> str:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def ensure_built(mdef: ModelDef, variants: Sequence[str], timeout: float = BUILD_TIMEOUT) -> dict[str, str]:
    """Build the missing variants of ``mdef`` in child processes; returns {variant: reason} for the variants that
    could not be built because the child failed.

    A child killed by a signal (the converter crashed) marks the variant it was building as refused in the cache
    (it is deterministic) and the remaining variants are retried in a fresh child.  A Python error in the builder
    or a timeout is returned for the first unbuilt variant and every later one, without caching anything.
    """
    if mdef.paths or mdef.build is None:
        return {}
    failed: dict[str, str] = {}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    todo = _pending(mdef, variants)
    while todo:
        try:
            proc = subprocess.run([sys.executable, "-m", "models.zoo.build", mdef.name, *todo], cwd=str(REPO),
                                  env=env, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            for v in _pending(mdef, todo):
                failed[v] = f"building the model timed out after {timeout:.0f}s"
            break
        left = _pending(mdef, todo)
        if proc.returncode == 0 or not left:
            break
        victim = left[0]  # variants are built in order: the first one missing is the one that died
        if proc.returncode < 0:
            why = f"the TFLite converter crashed building this variant ({_signal_name(proc.returncode)})"
            cache_path(mdef, victim).with_suffix(".refused").write_text(why)
            todo = left[1:]
            continue
        tail = [ln for ln in (proc.stderr or "").strip().splitlines() if ln.strip()][-2:]
        for v in left:
            failed[v] = f"model build failed ({_signal_name(proc.returncode)}): {' | '.join(tail)[-300:]}"
        break
    return failed


def stale_cache_files() -> list[Path]:
    """Files in the zoo cache that no current definition uses (left behind by edited builders)."""
    from . import REGISTRY

    keep: set[str] = set()
    for m in REGISTRY.values():
        for v in m.variants:
            p = cache_path(m, v)
            keep.update({p.name, p.with_suffix(".json").name, p.with_suffix(".refused").name})
    if not CACHE_DIR.is_dir():
        return []
    return sorted(f for f in CACHE_DIR.iterdir()
                  if f.is_file() and f.suffix in (".tflite", ".json", ".refused") and f.name not in keep)


def main(argv: Sequence[str]) -> int:
    from . import all_models

    if list(argv) == ["--prune"]:
        stale = stale_cache_files()
        for f in stale:
            f.unlink()
        print(f"removed {len(stale)} stale file(s) from {CACHE_DIR}")
        return 0
    if len(argv) < 2:
        print("usage: python -m models.zoo.build NAME VARIANT... | --prune", file=sys.stderr)
        return 2
    mdef = all_models(include_real=False)[argv[0]]
    for v in argv[1:]:
        try:
            info = build_tflite(mdef, v)
            print(f"built {mdef.key(v)} ({len(info.data)} bytes, {info.seconds:.1f}s)", flush=True)
        except TFLiteRefused as e:
            print(f"refused {mdef.key(v)}: {e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
