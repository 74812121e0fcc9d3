"""Test tooling: a ``.tflite`` → NNEF model directory through Khronos' nnef-tools, cached.

``tflite_to_nnef(path)`` runs ``python -m nnef_tools.convert --input-format tflite
--output-format nnef`` in a subprocess (nnef-tools is a test dependency; it needs only
nnef, numpy, flatbuffers, six and future, so it shares the main environment) and keeps
the result under ``<repo>/.cache/nnef/<stem>-<hash>.nnef``; the hash covers the model's
bytes and the nnef-tools version.  A failed conversion raises :class:`NNEFToolsError`
with the tool's last error line; failures are cached too (``<stem>-<hash>.failed``).

``python -m tests.nnef_convert [--load] model.tflite …`` converts (and loads with
:func:`tf2tosa.converter.nnef.load_nnef`) and prints one line per model.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = Path(os.environ.get("TF2TOSA_NNEF_CACHE", ROOT / ".cache" / "nnef"))


class NNEFToolsError(RuntimeError):
    """nnef-tools could not convert a model."""


def available() -> bool:
    """True when nnef-tools is installed in this environment."""
    try:
        metadata.version("nnef-tools")
    except metadata.PackageNotFoundError:
        return False
    return True


def _key(tflite: Path) -> str:
    h = hashlib.sha256(tflite.read_bytes())
    h.update(metadata.version("nnef-tools").encode())
    return h.hexdigest()[:16]


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "error" in ln:
            return ln
    return lines[-1] if lines else "no output"


def tflite_to_nnef(tflite: str | os.PathLike[str], *, timeout: float = 600) -> Path:
    """The NNEF model directory nnef-tools makes of ``tflite`` (converted once, then cached)."""
    src = Path(tflite)
    if not available():
        raise NNEFToolsError("nnef-tools is not installed (pip install nnef-tools==1.0.11)")
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    stem = f"{src.stem}-{_key(src)}"
    out, failed = CACHE_DIR / f"{stem}.nnef", CACHE_DIR / f"{stem}.failed"
    if out.is_dir():
        return out
    if failed.is_file():
        raise NNEFToolsError(failed.read_text())
    with tempfile.TemporaryDirectory(dir=CACHE_DIR, prefix=".tmp-") as tmp:
        target = Path(tmp) / "model.nnef"
        cmd = [sys.executable, "-m", "nnef_tools.convert", "--input-format", "tflite", "--output-format", "nnef",
               "--input-model", str(src), "--output-model", str(target)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise NNEFToolsError(f"nnef-tools timed out after {timeout:.0f} s on {src.name}") from None
        if proc.returncode != 0 or not (target / "graph.nnef").is_file():
            msg = f"nnef-tools failed on {src.name}: {_last_error(proc.stderr + proc.stdout)}"
            failed.write_text(msg)
            raise NNEFToolsError(msg)
        try:
            os.replace(target, out)
        except OSError:  # another process got there first
            if not out.is_dir():
                raise
            shutil.rmtree(target, ignore_errors=True)
    return out


def main(argv: list[str]) -> int:
    """Convert each model; with ``--load`` also load the result with our frontend."""
    load = "--load" in argv
    models = [a for a in argv if a != "--load"]
    converted = loaded = 0
    for a in models:
        try:
            out = tflite_to_nnef(a)
        except NNEFToolsError as e:
            print(f"FAILED  {a}: {e}")
            continue
        converted += 1
        if not load:
            print(f"ok      {a} -> {out}")
            continue
        from tf2tosa.converter.nnef import load_nnef
        from tf2tosa.errors import ModelLoadError

        try:
            g = load_nnef(out)
        except ModelLoadError as e:
            print(f"NOLOAD  {a}: {e}")
            continue
        loaded += 1
        print(f"loaded  {a}: {len(g.ops)} ops")
    print(f"{converted} of {len(models)} converted" + (f", {loaded} loaded" if load else ""))
    return 0 if converted == len(models) and (not load or loaded == converted) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
