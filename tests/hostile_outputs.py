"""Issue 29, items 1 and 2 (and two messages of item 8): what a command writes respects what is already there.

- a regular file is replaced atomically (tests/test_output_safety.py covers its failures);
- a character device or a FIFO is written in place: a null device discards, a full one ends in "no space left on
  device", a FIFO that no process reads is one line, never a hang; a block device or a socket is refused;
- a symlink is written through to its final target, atomically, and stays a link;
- an output that is an input, or another output of the same command (same path, hard link, symlink), is refused
  before any work, with nothing written;
- a legal output name of 240-255 characters is written (the staged file's name stays short);
- a FIFO or a device given as an input is refused before it is opened.

Every case runs the real command line in a child process (tests/hostile.py): exit code, one error line, no
traceback, the folder unchanged (by hash; a device node stays the same device) where the command is refused, and
a peak RSS under the cap.  Written bytes are compared with those of a plain conversion to a regular file (outputs
are deterministic).  Device nodes are made with ``os.mknod`` inside the test's folder, never the system's.
"""

from __future__ import annotations

import io
import os
import socket
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.hostile import SAMPLES, CliResult, assert_refused, run_cli, tree_hash

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="device nodes need root (mknod)")

SAMPLE = SAMPLES / "small_cnn_int8.tflite"  # int8: --io int writes a .json sidecar
OUT_NAME = "StatefulPartitionedCall_1_0"  # the sample's output, as `run --output-dir` names its file
#: peak RSS cap of every command here, in MiB: measured 51-56 MiB for refused and written small_cnn_int8 cases
#: (the interpreter with numpy); reading a device or a FIFO into memory would go far past it
RSS_CAP_MB = 150


def refused(res: CliResult, *needles: str) -> str:
    return assert_refused(res, *needles, rss_cap_mb=RSS_CAP_MB)


def null_device(path: Path) -> Path:
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return path


def full_device(path: Path) -> Path:
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    return path


def assert_ok(res: CliResult) -> None:
    assert res.code == 0, (res.code, res.stdout, res.stderr)
    assert "Traceback" not in res.output, res.output
    assert 0 < res.peak_rss_mb < RSS_CAP_MB, res.peak_rss_mb


def assert_device(path: Path, major: int, minor: int) -> None:
    st = path.lstat()
    assert stat.S_ISCHR(st.st_mode), f"{path} is no longer a character device"
    assert (os.major(st.st_rdev), os.minor(st.st_rdev)) == (major, minor)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The bytes of a plain conversion of the sample: .tosa, .mlir, and its .tosa as `run --output-dir` input."""
    d = tmp_path_factory.mktemp("reference")
    res = run_cli("convert", SAMPLE, "-o", d / "m.tosa", "--mlir", d / "m.mlir")
    assert_ok(res)
    res = run_cli("run", d / "m.tosa", "--output-dir", d / "arrays")
    assert_ok(res)
    return {"tosa": (d / "m.tosa").read_bytes(), "mlir": (d / "m.mlir").read_bytes(),
            "npy": (d / "arrays" / f"{OUT_NAME}.npy").read_bytes(), "tosa_path": str(d / "m.tosa").encode()}


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """The sample, copied into the test's folder."""
    m = tmp_path / "m.tflite"
    m.write_bytes(SAMPLE.read_bytes())
    return m


@pytest.fixture
def tosa(tmp_path: Path, reference: dict[str, bytes]) -> Path:
    t = tmp_path / "m.tosa"
    t.write_bytes(reference["tosa"])
    return t


# ------------------------------------------------------------------------------------------ devices and FIFOs
def test_null_device_is_written_in_place(tmp_path: Path, model: Path, reference: dict[str, bytes]) -> None:
    """--mlir into a null device: exit 0, the node is still the same device (nothing else changed in the folder),
    the regular .tosa of the set holds the plain conversion's bytes."""
    null = null_device(tmp_path / "fakenull")
    before = tree_hash(tmp_path)
    assert_ok(run_cli("convert", model, "-o", tmp_path / "o.tosa", "--mlir", null))
    assert (tmp_path / "o.tosa").read_bytes() == reference["tosa"]
    (tmp_path / "o.tosa").unlink()
    assert tree_hash(tmp_path) == before
    assert_device(null, 1, 3)


@pytest.mark.parametrize("where", ["-o", "--mlir"])
def test_full_device_is_no_space_left(tmp_path: Path, model: Path, where: str) -> None:
    """A full device ends in one line and exit 1; the regular file of the pair is not written either."""
    full = full_device(tmp_path / "fakefull")
    args: list[str | os.PathLike[str]] = ["-o", full] if where == "-o" else ["-o", tmp_path / "o.tosa", "--mlir", full]
    before = tree_hash(tmp_path)
    refused(run_cli("convert", model, *args), f"cannot write {full}: no space left on device")
    assert tree_hash(tmp_path) == before
    assert_device(full, 1, 7)


def test_fifo_without_reader_is_one_line(tmp_path: Path, model: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    before = tree_hash(tmp_path)
    res = run_cli("convert", model, "-o", tmp_path / "o.tosa", "--mlir", fifo, timeout=60)
    refused(res, f"cannot write {fifo}: no process is reading the FIFO")
    assert tree_hash(tmp_path) == before
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def _read_fifo(fifo: Path, got: list[bytes]) -> threading.Thread:
    """A reader of ``fifo`` in a thread (it opens it at once, blocking until the writer comes)."""
    def read() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def _release(fifo: Path) -> None:
    """Unblock a reader still waiting in open() for a writer that never came."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


def test_fifo_with_reader_gets_the_bytes(tmp_path: Path, model: Path, reference: dict[str, bytes]) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _read_fifo(fifo, got)
    try:
        res = run_cli("convert", model, "-o", fifo, timeout=60)
    finally:
        reader.join(5)
        _release(fifo)
    assert_ok(res)
    assert got == [reference["tosa"]]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.mark.parametrize("kind", ["block device", "socket"])
def test_block_device_and_socket_are_refused(tmp_path: Path, model: Path, kind: str) -> None:
    target = tmp_path / "target"
    sock = None
    if kind == "block device":
        os.mknod(target, 0o600 | stat.S_IFBLK, os.makedev(7, 0))  # a loop device's numbers: never opened
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(target))
    try:
        before = tree_hash(tmp_path)
        res = run_cli("convert", model, "-o", tmp_path / "o.tosa", "--mlir", target)
        refused(res, f"{target} is a {kind}: refusing to write to it")
        assert tree_hash(tmp_path) == before
    finally:
        if sock is not None:
            sock.close()


def test_run_output_dir_into_devices(tmp_path: Path, tosa: Path, reference: dict[str, bytes]) -> None:
    """run --output-dir: an array whose file is a null device is discarded; a full one fails, in one line."""
    arrays = tmp_path / "arrays"
    arrays.mkdir()
    null_device(arrays / f"{OUT_NAME}.npy")
    before = tree_hash(tmp_path)
    assert_ok(run_cli("run", tosa, "--output-dir", arrays))
    assert tree_hash(tmp_path) == before
    (arrays / f"{OUT_NAME}.npy").unlink()
    full = full_device(arrays / f"{OUT_NAME}.npy")
    before = tree_hash(tmp_path)
    refused(run_cli("run", tosa, "--output-dir", arrays), f"cannot write {full}: no space left on device")
    assert tree_hash(tmp_path) == before


def test_verify_report_into_full_device(tmp_path: Path, model: Path) -> None:
    pytest.importorskip("ai_edge_litert", reason="verify runs LiteRT")
    full = full_device(tmp_path / "report.html")
    before = tree_hash(tmp_path)
    res = run_cli("verify", model, "--num", "1", "--report", full)
    assert res.code == 1, res.output
    assert "Traceback" not in res.output
    assert res.error_lines()[-1] == f"error: cannot write {full}: no space left on device", res.stderr
    assert tree_hash(tmp_path) == before


# ------------------------------------------------------------------------------------------ symlinks
def test_symlink_is_written_through(tmp_path: Path, model: Path, reference: dict[str, bytes]) -> None:
    """-o and --mlir are links into another folder: their targets get the bytes, the links stay links."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "t.tosa").write_bytes(b"old content")
    (tmp_path / "o.tosa").symlink_to("real/t.tosa")
    (tmp_path / "o.mlir").symlink_to(real / "t.mlir")  # dangling (absolute): its target is created
    assert_ok(run_cli("convert", model, "-o", tmp_path / "o.tosa", "--mlir", tmp_path / "o.mlir"))
    assert os.readlink(tmp_path / "o.tosa") == "real/t.tosa"
    assert os.readlink(tmp_path / "o.mlir") == str(real / "t.mlir")
    assert (real / "t.tosa").read_bytes() == reference["tosa"]
    assert (real / "t.mlir").read_bytes() == reference["mlir"]
    assert sorted(p.name for p in real.iterdir()) == ["t.mlir", "t.tosa"]  # no staged file left


@pytest.mark.parametrize("case", ["loop", "missing-directory"])
def test_bad_symlinks_are_one_line(tmp_path: Path, model: Path, case: str) -> None:
    link = tmp_path / "o.tosa"
    if case == "loop":
        (tmp_path / "a").symlink_to("o.tosa")
        link.symlink_to("a")
        words = "symlink loop"
    else:
        link.symlink_to("nowhere/t.tosa")
        words = "whose directory does not exist"
    before = tree_hash(tmp_path)
    refused(run_cli("convert", model, "-o", link), f"cannot write {link}", words)
    assert tree_hash(tmp_path) == before


# ------------------------------------------------------------------------------------------ outputs that are inputs
@pytest.mark.parametrize("case", ["-o model", "--mlir model", "-o hard link", "-o symlink", "-o = --mlir",
                                  "--mlir = sidecar"])
def test_convert_output_is_an_input(tmp_path: Path, model: Path, case: str) -> None:
    t = tmp_path
    os.link(model, t / "hard.tflite")
    (t / "link.tosa").symlink_to("m.tflite")
    cases: dict[str, tuple[list[str | os.PathLike[str]], str]] = {
        "-o model": (["-o", model], f"refusing to write {model}: it is the input model ({model})"),
        "--mlir model": (["-o", t / "o.tosa", "--mlir", model], f"refusing to write {model}: it is the input model"),
        "-o hard link": (["-o", t / "hard.tflite"], f"refusing to write {t / 'hard.tflite'}: it is the input model"),
        "-o symlink": (["-o", t / "link.tosa"], f"refusing to write {t / 'link.tosa'}: it is the input model"),
        "-o = --mlir": (["-o", t / "s.tosa", "--mlir", t / "s.tosa"],
                        f"refusing to write {t / 's.tosa'}: it is also the --mlir output"),
        "--mlir = sidecar": (["-o", t / "q.tosa", "--io", "int", "--mlir", t / "q.json"],
                             f"refusing to write {t / 'q.json'}: it is also the --io int .json sidecar"),
    }
    args, needle = cases[case]
    before = tree_hash(t)
    refused(run_cli("convert", model, *args), needle)
    assert tree_hash(t) == before


def test_output_inside_model_folder(tmp_path: Path) -> None:
    """A folder model's files are inputs too: -o onto its .dat or graph.nnef is refused; a .tosa inside is written
    (and written again)."""
    nnef = tmp_path / "nn"
    nnef.mkdir()
    (nnef / "graph.nnef").write_text("version 1.0;\ngraph G(input) -> (output) {\n"
                                     "  input = external<scalar>(shape = [1, 4]);\n  output = relu(input);\n}\n")
    (nnef / "w.dat").write_bytes(b"not read by this graph")
    before = tree_hash(tmp_path)
    for member in ("w.dat", "graph.nnef"):
        refused(run_cli("convert", nnef, "-o", nnef / member),
                       f"refusing to write {nnef / member}: it is a file of the input model ({nnef})")
        assert tree_hash(tmp_path) == before
    assert_ok(run_cli("convert", nnef, "-o", nnef / "m.tosa"))
    assert_ok(run_cli("convert", nnef, "-o", nnef / "m.tosa"))


def test_specialize_onto_itself(tmp_path: Path, tosa: Path) -> None:
    before = tree_hash(tmp_path)
    refused(run_cli("specialize", tosa, "--dim", "batch=2", "-o", tosa),
                   f"refusing to write {tosa}: it is the input model")
    assert tree_hash(tmp_path) == before


def test_run_output_dir_over_inputs(tmp_path: Path, tosa: Path) -> None:
    """The array run would write is the --input file (a hard link to it), or the model itself."""
    import tf2tosa

    m = tf2tosa.load(str(tosa))
    x = m.graph.inputs[0]
    arrays = tmp_path / "arrays"
    arrays.mkdir()
    buf = io.BytesIO()
    np.save(buf, np.zeros([int(d) for d in x.type.shape], dtype=x.dtype.np_dtype()))
    (tmp_path / "x.npy").write_bytes(buf.getvalue())
    os.link(tmp_path / "x.npy", arrays / f"{OUT_NAME}.npy")
    before = tree_hash(tmp_path)
    res = run_cli("run", tosa, "--input", f"{x.name}={tmp_path / 'x.npy'}", "--output-dir", arrays)
    refused(res, f"refusing to write {arrays / (OUT_NAME + '.npy')}: it is the --input file")
    assert tree_hash(tmp_path) == before
    (arrays / f"{OUT_NAME}.npy").unlink()
    os.replace(tosa, arrays / f"{OUT_NAME}.npy")  # a model named like the array it makes
    before = tree_hash(tmp_path)
    res = run_cli("run", arrays / f"{OUT_NAME}.npy", "--output-dir", arrays)
    refused(res, "it is the input model")
    assert tree_hash(tmp_path) == before


def test_verify_pages_over_inputs(tmp_path: Path, model: Path) -> None:
    """verify --report onto the model, --report and --layers-html onto one file, --reference onto --report:
    refused before anything runs (no LiteRT needed to see it)."""
    page = tmp_path / "p.html"
    before = tree_hash(tmp_path)
    refused(run_cli("verify", model, "--report", model), f"refusing to write {model}: it is the input model")
    refused(run_cli("verify", model, "--report", page, "--layers-html", page),
                   f"refusing to write {page}: it is also the --layers-html page")
    assert tree_hash(tmp_path) == before


def test_api_save_refuses_its_source(tmp_path: Path, model: Path) -> None:
    import tf2tosa
    from tf2tosa.errors import OutputError

    m = tf2tosa.convert(str(model))
    before = tree_hash(tmp_path)
    with pytest.raises(OutputError, match="it is the input model"):
        m.save(model)
    with pytest.raises(OutputError, match="it is also the mlir output"):
        m.save(tmp_path / "a.tosa", mlir=tmp_path / "a.tosa")
    assert tree_hash(tmp_path) == before
    m.save(tmp_path / "a.tosa")
    loaded = tf2tosa.load(str(tmp_path / "a.tosa"))
    with pytest.raises(OutputError, match="it is the input model"):
        loaded.save(tmp_path / "a.tosa")


# ------------------------------------------------------------------------------------------ long names
@pytest.mark.parametrize("lengths", [(240, 255), (251, 247)])
def test_long_output_names(tmp_path: Path, model: Path, reference: dict[str, bytes], lengths: tuple[int, int]) -> None:
    """Names of 240-255 bytes (NAME_MAX) are written; the staged names never exceed it."""
    tosa = tmp_path / ("t" * (lengths[0] - 5) + ".tosa")
    mlir = tmp_path / ("m" * (lengths[1] - 5) + ".mlir")
    assert_ok(run_cli("convert", model, "-o", tosa, "--mlir", mlir))
    assert tosa.read_bytes() == reference["tosa"]
    assert mlir.read_bytes() == reference["mlir"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([model.name, tosa.name, mlir.name])


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory, reference: dict[str, bytes]) -> Iterator[Path]:
    """The sample's program with its output renamed, one .tosa per name (written through the API)."""
    import tf2tosa

    d = tmp_path_factory.mktemp("renamed")
    m = tf2tosa.load(reference["tosa_path"].decode())
    for stem, name in (("long", "o" * 251), ("escape", "../escaped")):
        m.graph.outputs[0].name = name
        m.save(d / f"{stem}.tosa")
    yield d


def test_long_output_dir_names(tmp_path: Path, renamed: Path, reference: dict[str, bytes]) -> None:
    """An output named with 251 characters: run --output-dir writes its 255-character .npy file."""
    res = run_cli("run", renamed / "long.tosa", "--output-dir", tmp_path / "arrays")
    assert_ok(res)
    assert [p.name for p in (tmp_path / "arrays").iterdir()] == ["o" * 251 + ".npy"]
    assert (tmp_path / "arrays" / ("o" * 251 + ".npy")).read_bytes() == reference["npy"]


def test_output_dir_name_cannot_escape(tmp_path: Path, renamed: Path) -> None:
    """An output named ../escaped would land outside --output-dir: refused, nothing written."""
    (tmp_path / "arrays").mkdir()
    before = tree_hash(tmp_path)
    res = run_cli("run", renamed / "escape.tosa", "--output-dir", tmp_path / "arrays")
    refused(res, "'../escaped.npy' is not a plain file name")
    assert tree_hash(tmp_path) == before


# ------------------------------------------------------------------------------------------ special inputs
def test_fifo_model_without_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.tflite"
    os.mkfifo(fifo)
    before = tree_hash(tmp_path)
    res = run_cli("convert", fifo, "-o", tmp_path / "o.tosa", timeout=60)
    refused(res, f"{fifo} is not a regular file (it is a FIFO)")
    assert tree_hash(tmp_path) == before


def test_fifo_model_with_writer(tmp_path: Path) -> None:
    """A writer waits on the FIFO with the model's bytes: the command still refuses it without opening it (the
    writer is left waiting, then released by the test)."""
    fifo = tmp_path / "fifo.tflite"
    os.mkfifo(fifo)
    opened: list[bool] = []

    def write() -> None:
        try:
            with open(fifo, "wb") as f:  # blocks until a reader opens the FIFO
                opened.append(True)
                f.write(SAMPLE.read_bytes())
        except OSError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    before = tree_hash(tmp_path)
    try:
        res = run_cli("convert", fifo, "-o", tmp_path / "o.tosa", timeout=60)
        assert not opened, "the command opened the FIFO"
    finally:
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # release the writer
        writer.join(5)
        os.close(fd)
    refused(res, f"{fifo} is not a regular file (it is a FIFO)")
    assert tree_hash(tmp_path) == before


@pytest.mark.parametrize("command", ["inspect", "run", "run --input", "verify --reference"])
def test_special_inputs_are_refused(tmp_path: Path, tosa: Path, model: Path, command: str) -> None:
    node = null_device(tmp_path / "dev.tosa")
    fifo = tmp_path / "x.npy"
    os.mkfifo(fifo)
    cases: dict[str, tuple[list[str | os.PathLike[str]], str]] = {
        "inspect": (["inspect", node], f"{node} is not a regular file (it is a character device)"),
        "run": (["run", node], f"{node} is not a regular file (it is a character device)"),
        "run --input": (["run", tosa, "--input", f"x={fifo}"], f"{fifo} is not a regular file (it is a FIFO)"),
        "verify --reference": (["verify", model, "--reference", fifo], f"{fifo} is not a regular file"),
    }
    args, needle = cases[command]
    before = tree_hash(tmp_path)
    refused(run_cli(*args, timeout=60), needle)
    assert tree_hash(tmp_path) == before
