"""Hostile NNEF models and Keras ``.keras`` zips (issue 29, items 3 and 8; deliverable 2): each case runs the real
CLI in a child process (tests/hostile.py) and checks the exit code, the one error line, no traceback, the model's
folder and its parent unchanged (tree_hash), nothing outside the model read (a sentinel ``w.dat`` outside it whose
access time must not move and whose values must not reach any output), ``$TMPDIR`` left empty, and the peak RSS.

The cases: variable labels that leave the model (``..``, absolute, through a symlinked folder) in folders and
archives; tensor files that are symlinks, FIFOs, devices or hard links; tar link members; ``.dat`` headers whose
sizes do not match; archive bombs (a member over the cap, a bad magic at the head of a large member, a tar header
declaring 4 GiB); an oversized ``graph.nnef``; nesting and recursion that crash the Khronos parser; two
``graph.nnef`` in one archive; a ``.tgz`` that is not a tar; a huge declared shape; SIGTERM during unpacking.
"""

from __future__ import annotations

import io
import os
import signal
import struct
import subprocess
import sys
import tarfile
import time
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from tests.hostile import ROOT, RSS_CAP_MB, CliResult, assert_refused, run_cli, tree_hash

pytest.importorskip("nnef")

SENTINEL = 1234.5  # the outside file's values: never in any output
INSIDE = 0.25  # the model's own weights


# --------------------------------------------------------------------------- building models
def dat(arr: np.ndarray, *, magic: bytes = b"\x4e\xef", length: int | None = None) -> bytes:
    """An NNEF float32 tensor file (spec §5.2): 128-byte header, then the data."""
    arr = np.asarray(arr, np.float32)
    data = arr.tobytes()
    dims = list(arr.shape) + [0] * (8 - arr.ndim)
    head = magic + bytes([1, 0]) + struct.pack("<II", len(data) if length is None else length, arr.ndim)
    head += struct.pack("<8I", *dims) + struct.pack("<III", 32, 0, 0)
    return head + bytes(128 - len(head)) + data


def graph_text(label: str = "w", shape: str = "[1, 4]") -> str:
    return ("version 1.0;\ngraph G( x ) -> ( y )\n{\n"
            f"    x = external<scalar>(shape = {shape});\n"
            f"    w = variable<scalar>(shape = [1, 4], label = '{label}');\n"
            "    y = add(x, w);\n}\n")


def write_model(folder: Path, label: str = "w", weights: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text(graph_text(label))
    if weights:
        (folder / "w.dat").write_bytes(dat(np.full((1, 4), INSIDE)))
    return folder


def tar_of(path: Path, members: Sequence[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w" if path.suffix == ".tar" else "w:gz") as t:
        for info, data in members:
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def reg(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


class Scene:
    """A test folder: ``outside/w.dat`` (the sentinel), the model beside it, an empty ``tmp`` for $TMPDIR and an
    empty ``out`` for outputs; :meth:`refused` runs a command and checks everything a refusal must leave."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.outside = base / "outside"
        self.outside.mkdir()
        self.sentinel = self.outside / "w.dat"
        self.sentinel.write_bytes(dat(np.full((1, 4), SENTINEL)))
        self.tmp = base / "tmp"
        self.tmp.mkdir()
        self.out = base / "out"
        self.out.mkdir()
        # an access time older than the modification time: any read moves it (also under relatime)
        os.utime(self.sentinel, (1_000_000, 2_000_000))

    def sentinel_read(self) -> bool:
        return os.stat(self.sentinel).st_atime != 1_000_000

    def run(self, *args: str | os.PathLike[str], timeout: float = 120) -> CliResult:
        return run_cli(*args, env={"TMPDIR": str(self.tmp)}, timeout=timeout)

    def refused(self, model: Path, *needles: str, extra: tuple[str, ...] = (), rss_cap_mb: float = RSS_CAP_MB,
                command: str = "convert") -> str:
        before = tree_hash(self.base)
        os.utime(self.sentinel, (1_000_000, 2_000_000))  # (tree_hash read it)
        args: list[str | os.PathLike[str]] = [command, model, *extra]
        if command == "convert":
            args += ["-o", self.out / "m.tosa"]
        res = self.run(*args)
        line = assert_refused(res, *needles, rss_cap_mb=rss_cap_mb)
        assert not self.sentinel_read(), "the file outside the model was read"
        assert tree_hash(self.base) == before  # the model, its parent, the outputs folder and $TMPDIR unchanged
        assert list(self.tmp.iterdir()) == []
        assert list(self.out.iterdir()) == []
        return line


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    s = Scene(tmp_path)
    probe = tmp_path / "probe"
    probe.write_bytes(b"x")
    os.utime(probe, (1_000_000, 2_000_000))
    probe.read_bytes()
    if os.stat(probe).st_atime == 1_000_000:  # a noatime mount: the access-time check cannot see a read
        s.sentinel_read = lambda: False  # type: ignore[method-assign]
    probe.unlink()
    return s


def converted_constants(tosa: Path) -> list[float]:
    """Every float value the written program's constants hold (to find the sentinel in an output)."""
    from tf2tosa import load

    m = load(str(tosa))
    vals: list[float] = []
    for op in m.graph.ops.values():
        v = op.attrs.get("values")
        if v is not None and np.asarray(v).dtype.kind == "f":
            vals += np.asarray(v, np.float64).reshape(-1).tolist()
    return vals


# --------------------------------------------------------------------------- labels
def test_label_above_the_folder_is_refused(scene: Scene) -> None:
    m = write_model(scene.base / "m", label="../outside/w", weights=False)
    scene.refused(m, "label '../outside/w' of variable 'w' leaves the model folder")


def test_label_deep_above_the_folder_is_refused(scene: Scene) -> None:
    m = write_model(scene.base / "a" / "b" / "m", label="../../../outside/w", weights=False)
    scene.refused(m, "label '../../../outside/w' of variable 'w' leaves the model folder")


def test_absolute_label_is_refused(scene: Scene) -> None:
    label = str(scene.sentinel)[:-len(".dat")]
    m = write_model(scene.base / "m", label=label, weights=False)
    scene.refused(m, f"label '{label}' of variable 'w' leaves the model folder")


def test_label_through_a_symlinked_folder_is_refused(scene: Scene) -> None:
    m = write_model(scene.base / "m", label="sub/w", weights=False)
    (m / "sub").symlink_to("../outside")
    scene.refused(m, "label 'sub/w' of variable 'w' leaves the model folder", "'sub' is a symlink")


@pytest.mark.parametrize("suffix", [".tgz", ".tar"])
def test_label_above_an_archive_is_refused(scene: Scene, suffix: str) -> None:
    tgz = tar_of(scene.base / f"m{suffix}", [reg("m/graph.nnef", graph_text("../../outside/w").encode())])
    scene.refused(tgz, "label '../../outside/w' of variable 'w' leaves the model folder")


def test_label_through_a_symlink_member_is_refused(scene: Scene) -> None:
    tgz = tar_of(scene.base / "m.tar", [reg("m/graph.nnef", graph_text("sub/w").encode()),
                                         link("m/sub", "../../outside")])
    line = scene.refused(tgz, "label 'sub/w' of variable 'w' passes through 'sub', a symlink to '../../outside' "
                              "in the archive")
    assert "missing" not in line


def test_label_inside_the_folder_still_converts(scene: Scene) -> None:
    """The control: the same model with its own label converts, and carries its own values, not the sentinel."""
    m = write_model(scene.base / "m", label="sub/../w")
    res = scene.run("convert", m, "-o", scene.out / "m.tosa")
    assert res.code == 0, res.output
    vals = converted_constants(scene.out / "m.tosa")
    assert INSIDE in vals and SENTINEL not in vals
    assert list(scene.tmp.iterdir()) == [] and not scene.sentinel_read()


# --------------------------------------------------------------------------- what a .dat is
def test_dat_symlink_to_a_zero_device_is_refused(scene: Scene) -> None:
    zero = scene.outside / "zero"
    os.mknod(zero, 0o666 | 0o020000, os.makedev(1, 5))  # a character device like /dev/zero, made here
    m = write_model(scene.base / "m", weights=False)
    (m / "w.dat").symlink_to(zero)
    scene.refused(m, "label 'w' of variable 'w' leaves the model folder", "symlink", "outside the model")


def test_dat_symlink_to_an_outside_file_is_refused(scene: Scene) -> None:
    m = write_model(scene.base / "m", weights=False)
    (m / "w.dat").symlink_to(scene.sentinel)
    scene.refused(m, "'w.dat' is a symlink", "outside the model")


def test_dat_symlink_inside_the_model_is_refused(scene: Scene) -> None:
    m = write_model(scene.base / "m", weights=False)
    (m / "real.dat").write_bytes(dat(np.full((1, 4), INSIDE)))
    (m / "w.dat").symlink_to("real.dat")
    line = scene.refused(m, "is a symlink (to 'real.dat')", "only regular files")
    assert "missing" not in line


def test_dat_fifo_is_refused_without_blocking(scene: Scene) -> None:
    m = write_model(scene.base / "m", weights=False)
    os.mkfifo(m / "w.dat")
    scene.refused(m, "tensor file is a FIFO, not a regular file")


def test_dat_device_is_refused(scene: Scene) -> None:
    m = write_model(scene.base / "m", weights=False)
    os.mknod(m / "w.dat", 0o666 | 0o020000, os.makedev(1, 5))
    scene.refused(m, "tensor file is a character device, not a regular file")


def test_graph_fifo_is_refused_without_blocking(scene: Scene) -> None:
    m = scene.base / "m"
    m.mkdir()
    os.mkfifo(m / "graph.nnef")
    scene.refused(m, "graph.nnef is a FIFO, not a regular file")


def test_hard_linked_dat_is_a_regular_file_and_is_read(scene: Scene) -> None:
    """A hard link is the file itself (no path to follow): read as any regular file."""
    m = write_model(scene.base / "m", weights=False)
    (m / "keep.dat").write_bytes(dat(np.full((1, 4), INSIDE)))
    os.link(m / "keep.dat", m / "w.dat")
    res = scene.run("convert", m, "-o", scene.out / "m.tosa")
    assert res.code == 0, res.output
    assert INSIDE in converted_constants(scene.out / "m.tosa")


# --------------------------------------------------------------------------- tar members
def test_tar_symlink_member_is_never_followed(scene: Scene) -> None:
    tgz = tar_of(scene.base / "m.tgz", [reg("m/graph.nnef", graph_text().encode()),
                                         link("m/w.dat", "../../outside/w.dat")])
    line = scene.refused(tgz, "tensor file is a symlink to '../../outside/w.dat' in the archive",
                         "only regular files")
    assert "missing" not in line


def test_tar_hard_link_to_a_member_is_read(scene: Scene) -> None:
    tgz = tar_of(scene.base / "m.tgz", [reg("m/graph.nnef", graph_text().encode()),
                                         reg("m/keep.dat", dat(np.full((1, 4), INSIDE))),
                                         link("m/w.dat", "m/keep.dat", tarfile.LNKTYPE)])
    res = scene.run("convert", tgz, "-o", scene.out / "m.tosa")
    assert res.code == 0, res.output
    assert INSIDE in converted_constants(scene.out / "m.tosa")
    assert list(scene.tmp.iterdir()) == []


def test_tar_hard_link_out_of_the_archive_is_refused(scene: Scene) -> None:
    tgz = tar_of(scene.base / "m.tgz", [reg("m/graph.nnef", graph_text().encode()),
                                         link("m/w.dat", str(scene.sentinel), tarfile.LNKTYPE)])
    line = scene.refused(tgz, f"tensor file is a hard link to '{scene.sentinel}' in the archive")
    assert "missing" not in line


def test_tar_member_outside_the_archive_is_refused(scene: Scene) -> None:
    tgz = tar_of(scene.base / "m.tgz", [reg("m/graph.nnef", graph_text().encode()),
                                         reg("../escape.dat", dat(np.ones((1, 4))))])
    scene.refused(tgz, "archive member '../escape.dat' points outside the archive")
    assert not (scene.base / "escape.dat").exists()


def test_tar_fifo_member_is_never_made(scene: Scene) -> None:
    info = tarfile.TarInfo("m/w.dat")
    info.type = tarfile.FIFOTYPE
    tgz = tar_of(scene.base / "m.tgz", [reg("m/graph.nnef", graph_text().encode()), (info, None)])
    scene.refused(tgz, "tensor file is a FIFO in the archive")


# --------------------------------------------------------------------------- .dat headers
def test_dat_header_length_must_match_its_shape(scene: Scene) -> None:
    m = write_model(scene.base / "m", weights=False)
    (m / "w.dat").write_bytes(dat(np.ones((1, 4)), length=1 << 31))
    scene.refused(m, "header says 2147483648 data bytes but shape [1, 4] of 32-bit items needs 16")


def test_dat_header_shape_beyond_the_file_is_refused_before_reading(scene: Scene) -> None:
    """A header declaring 2^32-1 x 2^32-1 floats over 16 bytes of data: refused from the header and the file's
    size, with nothing allocated."""
    m = write_model(scene.base / "m", weights=False)
    big = bytearray(dat(np.ones((1, 4))))
    struct.pack_into("<III", big, 4, 0, 2, 0xFFFFFFFF)  # length 0 (wraps), rank 2, dim 0 = 2^32-1
    struct.pack_into("<I", big, 16, 0xFFFFFFFF)
    (m / "w.dat").write_bytes(bytes(big))
    scene.refused(m, "header says 0 data bytes but shape [4294967295, 4294967295]", rss_cap_mb=200)


def test_dat_member_in_an_archive_shorter_than_its_header_says(scene: Scene) -> None:
    good = dat(np.ones((1, 4)))
    tgz = tar_of(scene.base / "m.tgz", [reg("m/graph.nnef", graph_text().encode()), reg("m/w.dat", good[:-4])])
    scene.refused(tgz, "tensor file is short: 12 of 16 data bytes present")


# --------------------------------------------------------------------------- bombs and caps
def _zero_bomb(path: Path, member: str, size: int, head: bytes, graph: bytes, kind: bytes = tarfile.REGTYPE) -> Path:
    """A .tgz holding ``m/graph.nnef`` and a ``size``-byte member of ``head`` then zeros, in well under a second
    per GiB: one 4 MiB block of zeros is deflated once and its self-contained output (ended by a full flush)
    repeated; the gzip trailer's CRC is computed over the zeros as they would inflate."""
    info = tarfile.TarInfo(member)
    info.size = size
    info.type = kind
    ginfo = tarfile.TarInfo("m/graph.nnef")
    ginfo.size = len(graph)
    first = ginfo.tobuf(tarfile.GNU_FORMAT) + graph + bytes(-len(graph) % 512) + info.tobuf(tarfile.GNU_FORMAT) + head
    block = bytes(1 << 22)
    reps, rest = divmod(size - len(head), len(block))
    tail = bytes(rest) + bytes(-size % 512) + bytes(1024)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    start = c.compress(first) + c.flush(zlib.Z_FULL_FLUSH)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    end = c.compress(tail) + c.flush()
    crc = zlib.crc32(first)
    for _ in range(reps):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(tail, crc)
    total = len(first) + reps * len(block) + len(tail)
    with open(path, "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + start)
        for _ in range(reps):
            f.write(chunk)
        f.write(end + struct.pack("<II", crc, total & 0xFFFFFFFF))
    return path


def test_zero_bomb_is_what_it_claims(tmp_path: Path) -> None:
    """The bomb builder itself: gzip inflates it to a tar whose member has the declared size and content."""
    tgz = _zero_bomb(tmp_path / "b.tgz", "m/w.dat", (9 << 20) + 5, b"HEAD", b"g")
    with tarfile.open(tgz, "r|gz") as t:
        names = []
        for m in t:
            names.append((m.name, m.size))
            if m.name == "m/w.dat":
                f = t.extractfile(m)
                assert f is not None
                data = f.read()
                assert data[:4] == b"HEAD" and len(data) == m.size and not any(data[4:])
    assert names == [("m/graph.nnef", 1), ("m/w.dat", (9 << 20) + 5)]


def test_member_over_the_extraction_cap_fails_fast(scene: Scene) -> None:
    head = dat(np.zeros((1, 4)))[:128]
    size = 512 << 20
    tgz = _zero_bomb(scene.base / "m.tgz", "m/w.dat", size, head, graph_text().encode())
    assert tgz.stat().st_size < size // 200  # a real bomb: it inflates more than 200-fold
    t0 = time.monotonic()
    scene.refused(tgz, "archive member 'm/w.dat' inflates to 512.0 MiB, more than the 64 MiB extraction limit",
                  extra=("--max-extract-mb", "64"), rss_cap_mb=200)
    assert time.monotonic() - t0 < 20


def test_bad_magic_in_a_large_member_fails_at_its_header(scene: Scene) -> None:
    """The .dat header is read from the stream first: a bad magic ends the load before the rest inflates."""
    head = dat(np.zeros((1, 4)), magic=b"XX")[:128]
    size = 512 << 20
    tgz = _zero_bomb(scene.base / "m.tgz", "m/w.dat", size, head, graph_text().encode())
    res = scene.run("convert", tgz, "-o", scene.out / "m.tosa", "--max-extract-mb", "4096")
    assert_refused(res, "not an NNEF tensor file (bad magic number)", rss_cap_mb=200)
    assert res.seconds < 15, res.seconds
    assert list(scene.tmp.iterdir()) == []


def test_tar_header_declaring_4_gib_is_refused_before_reading(scene: Scene) -> None:
    """A member whose tar header declares 4 GiB (its data never follows): refused from the header alone at the
    default cap (2048 MiB)."""
    info = tarfile.TarInfo("m/w.dat")
    info.size = 4 << 30
    graph = graph_text().encode()
    ginfo = tarfile.TarInfo("m/graph.nnef")
    ginfo.size = len(graph)
    raw = ginfo.tobuf(tarfile.GNU_FORMAT) + graph + bytes(-len(graph) % 512) + info.tobuf(tarfile.GNU_FORMAT)
    tgz = scene.base / "m.tgz"
    tgz.write_bytes(_gzip(raw + bytes(4096)))
    scene.refused(tgz, "archive member 'm/w.dat' inflates to 4.00 GiB, more than the 2048 MiB extraction limit",
                  "--max-extract-mb", rss_cap_mb=200)


def _gzip(data: bytes) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    return comp.compress(data) + comp.flush()


def test_long_name_header_bomb_is_refused_before_reading(scene: Scene) -> None:
    """A GNU long-name header whose data is 256 MiB: tarfile would read it whole into memory."""
    tgz = _zero_bomb(scene.base / "m.tgz", "././@LongLink", 256 << 20, b"", graph_text().encode(),
                     kind=tarfile.GNUTYPE_LONGNAME)
    scene.refused(tgz, "cannot unpack archive: an extended tar header of 256.0 MiB, more than 1.0 MiB",
                  rss_cap_mb=200)


def test_total_over_the_cap_is_refused(scene: Scene) -> None:
    members = [reg("m/graph.nnef", graph_text().encode())]
    members += [reg(f"m/pad{i}.bin", bytes(3 << 20)) for i in range(4)]
    tgz = tar_of(scene.base / "m.tgz", members)
    scene.refused(tgz, "archive inflates to more than the 10 MiB extraction limit at member 'm/pad3.bin'",
                  extra=("--max-extract-mb", "10"))


def test_graph_file_over_its_cap_is_refused_before_reading(scene: Scene) -> None:
    m = scene.base / "m"
    m.mkdir()
    with open(m / "graph.nnef", "wb") as f:  # a sparse 80 MiB file: nothing of it is on disk or read
        f.truncate(80 << 20)
    scene.refused(m, "graph.nnef is 80.0 MiB, more than the 64.0 MiB a graph may hold", rss_cap_mb=200)


def test_graph_member_over_its_cap_is_refused_before_reading(scene: Scene) -> None:
    graph = graph_text().encode()
    tgz = _zero_bomb(scene.base / "m.tgz", "m/other/graph.nnef", 100 << 20, b"", graph)
    scene.refused(tgz, "graph.nnef is 100.0 MiB, more than the 64.0 MiB a graph may hold", rss_cap_mb=200)


def test_a_declared_huge_constant_is_not_allocated(scene: Scene) -> None:
    m = scene.base / "m"
    m.mkdir()
    (m / "graph.nnef").write_text("version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1, 4]);\n"
                                  "    c = constant<scalar>(shape = [100000, 100000], value = [1.0]);\n"
                                  "    y = add(c, c);\n}\n")
    scene.refused(m, "constant of shape [100000, 100000] would take 37.25 GiB", rss_cap_mb=200)


def test_a_declared_huge_input_allocates_nothing(scene: Scene) -> None:
    """An external of [1e6, 1e6] floats: the loader allocates nothing for it; the conversion's size check (another
    part of issue 29) refuses it.  Here: no traceback, small RSS, quick, and nothing written."""
    m = scene.base / "m"
    m.mkdir()
    (m / "graph.nnef").write_text("version 1.0;\ngraph G( x ) -> ( y )\n{\n"
                                  "    x = external<scalar>(shape = [1000000, 1000000]);\n    y = relu(x);\n}\n")
    res = scene.run("convert", m, "-o", scene.out / "m.tosa")
    assert "Traceback" not in res.output
    assert res.peak_rss_mb < 200 and res.seconds < 60
    if res.code != 0:
        assert_refused(res, "x", rss_cap_mb=200)


# --------------------------------------------------------------------------- the parser
def test_deep_nesting_is_one_line_not_a_crash(scene: Scene) -> None:
    m = scene.base / "m"
    m.mkdir()
    n = 100_000
    (m / "graph.nnef").write_text("version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1]);\n"
                                  "    y = " + "add(" * n + "x" + ", x)" * n + ";\n}\n")
    scene.refused(m, "graph.nnef line 5: expressions nested deeper than 32")


def test_deep_nesting_in_an_archive_leaves_no_temporary_folder(scene: Scene) -> None:
    n = 100_000
    graph = ("version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1]);\n"
             "    y = " + "add(" * n + "x" + ", x)" * n + ";\n}\n").encode()
    tgz = tar_of(scene.base / "m.tgz", [reg("graph.nnef", graph)])
    scene.refused(tgz, "graph.nnef line 5: expressions nested deeper than 32")


@pytest.mark.parametrize("body", ["y = " + "-" * 50_000 + "x;", "y = x" + " + x" * 50_000 + ";",
                                  "y = " + "x if true else " * 50_000 + "x;"])
def test_long_operator_chains_in_a_fragment_are_one_line(scene: Scene, body: str) -> None:
    m = scene.base / "m"
    m.mkdir()
    (m / "graph.nnef").write_text(
        "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"
        "fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    " + body + "\n}\n"
        "graph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1]);\n    y = f(x);\n}\n")
    scene.refused(m, "graph.nnef line 5: an expression of more than 1000 operators")


def test_quant_nesting_is_one_line(scene: Scene) -> None:
    m = write_model(scene.base / "m")
    (m / "graph.quant").write_text('"x": linear_quantize(min = ' + "[" * 70 + "0.0" + "]" * 70
                                   + ", max = 1.0, bits = 8);\n")
    scene.refused(m, "graph.quant line 1: expressions nested deeper than 32")


def test_a_parser_crash_is_one_line(scene: Scene) -> None:
    """nnef 1.0.10's parser dies with SIGSEGV on a statement that begins with '-': it runs in a child process, so the
    crash is one line (and no core file is left in the working folder)."""
    m = scene.base / "m"
    m.mkdir()
    (m / "graph.nnef").write_text("version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1, 4]);\n"
                                  "    -y = copy(x);\n}\n")
    scene.refused(m, "invalid NNEF document: the Khronos NNEF parser crashed on it (signal SIGSEGV)")


def test_a_nul_character_is_one_line(scene: Scene) -> None:
    m = write_model(scene.base / "m")
    (m / "graph.nnef").write_text(graph_text().replace("add(", "add(\0", 1))
    scene.refused(m, "graph.nnef line 6: a NUL character")


def test_recursive_fragments_are_one_line(scene: Scene) -> None:
    m = scene.base / "m"
    m.mkdir()
    (m / "graph.nnef").write_text(
        "version 1.0;\nextension KHR_enable_fragment_definitions;\n"
        "fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    y = g(x);\n}\n"
        "fragment g( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    y = f(x);\n}\n"
        "graph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1]);\n    y = f(x);\n}\n")
    scene.refused(m, "fragment 'f' calls itself (f -> g -> f)")


@pytest.mark.parametrize("shape", ["[1, 4]", "[0, 4, 2, 3]"])
def test_a_shape_its_op_cannot_take_is_one_line(scene: Scene, shape: str) -> None:
    """The nnef package's shape functions index without checking (a transpose of more axes than its input has
    raised IndexError through the CLI, found by tools/fuzz.py): one line naming the op."""
    m = scene.base / "m"
    m.mkdir()
    (m / "graph.nnef").write_text("version 1.0;\ngraph G( x ) -> ( y )\n{\n"
                                  f"    x = external<scalar>(shape = {shape});\n"
                                  "    y = transpose(x, axes = [0, 3, 1, 2]);\n}\n")
    line = scene.refused(m, "graph.nnef")
    assert "transpose" in line or "[0, 4, 2, 3]" in line, line


def test_a_dimension_the_parser_cannot_hold_is_one_line(scene: Scene) -> None:
    """A literal beyond int64 comes out of the Khronos parser as -1 (found by tools/fuzz.py: a ValueError
    traceback): one line naming the tensor."""
    m = write_model(scene.base / "m")
    (m / "graph.nnef").write_text(graph_text(shape="[1, 99999999999999999999]"))
    scene.refused(m, "every dimension must be 1 ... 2147483647", "tensor x")


# --------------------------------------------------------------------------- messages (item 8)
def test_two_graphs_in_an_archive_are_named(scene: Scene) -> None:
    tgz = tar_of(scene.base / "m.tgz", [reg("a/graph.nnef", graph_text().encode()),
                                         reg("b/graph.nnef", graph_text().encode())])
    scene.refused(tgz, "archive holds 2 graph.nnef files: a/graph.nnef, b/graph.nnef")


def test_a_tgz_that_is_not_a_tar_is_one_line(scene: Scene) -> None:
    bad = scene.base / "m.tgz"
    bad.write_bytes(b"this is not an archive\n" * 100)
    scene.refused(bad, "not a tar archive")


def test_a_gzip_that_is_not_a_tar_is_one_line(scene: Scene) -> None:
    bad = scene.base / "m.tgz"
    bad.write_bytes(_gzip(b"hello, not a tar\n" * 1000))
    scene.refused(bad, "not a tar archive")


def test_inspect_and_verify_take_the_cap_too(scene: Scene) -> None:
    members = [reg("m/graph.nnef", graph_text().encode()), reg("m/w.dat", dat(np.full((1, 4), INSIDE))),
               reg("m/pad.bin", bytes(3 << 20))]
    tgz = tar_of(scene.base / "m.tgz", members)
    for command in ("inspect", "verify"):
        scene.refused(tgz, "archive member 'm/pad.bin' inflates to 3.0 MiB, more than the 2 MiB extraction limit",
                      extra=("--max-extract-mb", "2"), command=command)
    res = scene.run("inspect", tgz, "--max-extract-mb", "4")  # (and with room, the same archive loads)
    assert res.code == 0, res.output


def test_api_keyword_sets_the_cap(tmp_path: Path) -> None:
    import tf2tosa
    from tf2tosa.errors import InputError, ModelLoadError

    tgz = tar_of(tmp_path / "m.tgz", [reg("m/graph.nnef", graph_text().encode()),
                                       reg("m/w.dat", dat(np.full((1, 4), INSIDE))), reg("m/pad.bin", bytes(3 << 20))])
    with pytest.raises(ModelLoadError, match="more than the 2 MiB extraction limit"):
        tf2tosa.convert(tgz, max_extract_mb=2)
    assert tf2tosa.convert(tgz, max_extract_mb=4).graph is not None
    with pytest.raises(InputError, match="max_extract_mb"):
        tf2tosa.convert(tgz, max_extract_mb=0)


# --------------------------------------------------------------------------- signals
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_unpacking_removes_the_temporary_folder(tmp_path: Path, sig: signal.Signals) -> None:
    """SIGTERM or Ctrl-C as soon as the temporary folder appears (also the moment between making it and holding
    its name) or while the member is written: the folder goes."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    n = 1 << 28  # a valid header of a [1, 2^28] float tensor: a 1 GiB member, unpacking takes a while
    size = 128 + 4 * n
    head = bytearray(dat(np.zeros((1, 4)))[:128])
    struct.pack_into("<I", head, 4, 4 * n)
    struct.pack_into("<I", head, 16, n)
    tgz = _zero_bomb(tmp_path / "m.tgz", "m/w.dat", size, bytes(head), graph_text().encode())
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tf2tosa", "convert", str(tgz), "-o", str(tmp_path / "m.tosa"),
                             "--max-extract-mb", "4096"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(tmp.iterdir()):
            time.sleep(0.05)
        assert any(tmp.iterdir()), "the unpacking never started"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert b"Traceback" not in err
    assert list(tmp.iterdir()) == []


def test_a_gzip_header_cut_inside_its_extra_field_is_one_line(scene: Scene) -> None:
    """tarfile's stream reader raised TypeError ("ord() expected a character") on a gzip header whose FEXTRA
    length is missing (found by tools/fuzz.py)."""
    tgz = scene.base / "m.tgz"
    tgz.write_bytes(b"\x1f\x8b\x08\x04" + bytes(4) + b"\x00\x03")  # FLG.FEXTRA set, then the file ends
    scene.refused(tgz, "not a tar archive (a header is damaged or cut short)")


# --------------------------------------------------------------------------- Keras .keras zips
def _keras_zip(path: Path, members: dict[str, int]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, size in members.items():
            with z.open(name, "w", force_zip64=True) as f:
                block = bytes(1 << 20)
                left = size
                while left > 0:
                    f.write(block[:min(left, len(block))])
                    left -= len(block)
    return path


def _needs_tensorflow() -> None:
    """(Found, not imported: the refusal comes before TensorFlow is loaded, which the RSS cap checks.)"""
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed")


def test_keras_zip_member_over_the_cap_is_refused_before_keras(scene: Scene) -> None:
    _needs_tensorflow()
    k = _keras_zip(scene.base / "m.keras", {"config.json": 10, "model.weights.h5": 24 << 20})
    scene.refused(k, "archive member 'model.weights.h5' inflates to 24.0 MiB, more than the 16 MiB extraction limit",
                  extra=("--max-extract-mb", "16"))


def test_keras_zip_total_over_the_cap_is_refused(scene: Scene) -> None:
    _needs_tensorflow()
    k = _keras_zip(scene.base / "m.keras", {f"assets/a{i}": 6 << 20 for i in range(3)})
    scene.refused(k, "archive inflates to more than the 16 MiB extraction limit at member 'assets/a2'",
                  extra=("--max-extract-mb", "16"))


def test_keras_zip_with_too_many_members_is_refused_before_keras(scene: Scene) -> None:
    """A .keras of 20,000 members took Keras over a minute (tools/fuzz.py reported it as a hang)."""
    _needs_tensorflow()
    k = scene.base / "m.keras"
    with zipfile.ZipFile(k, "w") as z:
        z.writestr("config.json", "{}")
        for i in range(1_500):
            z.writestr(f"assets/a{i}", b"")
    scene.refused(k, "archive holds 1501 members, more than 1000")


def test_keras_zip_with_a_folder_named_like_a_member_is_refused(scene: Scene) -> None:
    """A folder entry 'config.json/' beside the file made Keras fail with 'File exists' on a path in its own
    temporary folder, which it left in $TMPDIR (found by tools/fuzz.py)."""
    _needs_tensorflow()
    k = scene.base / "m.keras"
    with zipfile.ZipFile(k, "w") as z:
        z.writestr("config.json", "{}")
        z.writestr("config.json/", b"")
    scene.refused(k, "archive holds two members named 'config.json'")


@pytest.mark.slow
def test_keras_failure_leaves_no_temporary_folder(scene: Scene) -> None:
    """Keras itself refusing a well-formed zip (its config is no model) leaves nothing in $TMPDIR (Keras's own
    scratch folder is a private one that the loader removes)."""
    _needs_tensorflow()
    k = scene.base / "m.keras"
    with zipfile.ZipFile(k, "w") as z:
        z.writestr("config.json", '{"class_name": "NoSuchLayer", "config": {}}')
        z.writestr("metadata.json", '{"keras_version": "3.0.0"}')
        z.writestr("model.weights.h5", b"\x89HDF\r\n\x1a\n" + bytes(64))
    scene.refused(k, "cannot load Keras model", rss_cap_mb=3000)


def test_keras_zip_of_a_version_zipfile_cannot_read_is_one_line(scene: Scene) -> None:
    """zipfile raises NotImplementedError for a central-directory entry that needs a newer zip version (a
    traceback through the CLI before, found by tools/fuzz.py seed 4)."""
    _needs_tensorflow()
    k = scene.base / "m.keras"
    with zipfile.ZipFile(k, "w") as z:
        z.writestr("config.json", "{}")
    data = bytearray(k.read_bytes())
    at = data.index(b"PK\x01\x02")  # the central directory entry: 'version needed to extract' at offset 6
    data[at + 6] = 255
    k.write_bytes(bytes(data))
    scene.refused(k, "cannot read this zip: zip file version 25.5")
