"""The NNEF frontend: an NNEF model → the IR (``nnef.*`` ops).

The Khronos parser (the ``nnef`` package, extra ``tf2tosa[nnef]``) parses ``graph.nnef``
and ``graph.quant`` and expands fragments; the tensor files (``.dat``) are read here.
TensorFlow is never imported.  Entry point: :func:`load_nnef`.

Input
-----
``path`` is a model directory (``graph.nnef``, optional ``graph.quant``, one ``.dat`` per
variable label), a ``.tgz`` / ``.tar.gz`` / ``.tar`` of such a directory (the archive may
hold the files at its root or in one top folder), or a bare ``graph.nnef`` file (its
``graph.quant`` and ``.dat`` files are looked up next to it).

Nothing outside the model is read (see :func:`load_nnef`): labels resolve inside the model folder, only regular
files are opened, ``.dat`` headers are checked against the bytes present, archives are unpacked member by member
under the caps of :mod:`.archive`, and ``graph.nnef`` is checked for what crashes the Khronos parser
(:data:`MAX_NESTING`, :data:`MAX_CHAIN`, recursive fragments) before it is parsed.

Fragments
---------
Every compound fragment is expanded by the parser (its ``lowered=`` list) down to the
standard primitive operations of :data:`PRIMITIVE_OPS`: the standard compound ones
(:data:`COMPOUND_OPS`, e.g. ``relu`` → ``gt`` + ``select``) and every fragment the document
defines itself, nested ones included.  ``keep`` names standard compound operations to
leave whole (a later rule may lower, say, ``softmax`` or ``avg_pool`` better than its
expansion).  A fragment the document only declares (no body) stays as a custom op; its
shape cannot be inferred, so loading fails listing all of them.

Values
------
* Value names are the NNEF tensor identifiers; ``Value.source`` is the identifier too.
* Types: ``scalar`` → fp32, ``integer`` → i32, ``logical`` → bool.  Shapes are NNEF's,
  unchanged (NCHW for images, filters OIHW, a bias ``[1, C]``; NNEF broadcasts by
  aligning the *leading* dimensions, not the trailing ones as numpy does).
* A tensor named in ``graph.quant`` with ``zero_point_linear_quantize``,
  ``linear_quantize`` or ``min_max_linear_quantize`` gets the integer type of its
  ``bits``/``signed`` (i8, u8, i16, u16, i32, u32, i4) and ``QuantParams`` with
  real = scale · (q − zero_point).  Per-channel parameters (arrays) get the axis whose
  extent equals their length (axis 0 when several do and 0 is one of them, else the last
  of them).  ``logarithmic_quantize`` is not affine: the tensor stays fp32 and is followed
  by an ``nnef.logarithmic_quantize`` op (the spec's reading of ``graph.quant``).  The raw
  entry of every tensor is kept in ``graph.source.quantization[name]``.

Operations
----------
* ``nnef.<name>`` for each primitive (or kept) operation, operands in the order of the
  operation's tensor parameters, list parameters flattened (``concat``'s ``values``).
  ``attrs`` holds the non-tensor arguments as the parser gives them (defaults filled in;
  ``padding`` a list of ``(before, after)`` tuples), plus ``input_names`` (one per operand:
  ``"input"``, ``"values[1]"`` …) and ``output_names`` (one per result).
* Constants are ``nnef.const`` ops (``attrs["values"]`` an ndarray of the value's dtype and
  shape; ``attrs["kind"]`` is ``"variable"`` with ``label``, ``"constant"``, or ``"literal"``
  for a literal tensor argument such as the ``0.0`` of ``max(x, 0.0)``, which is rank 0).
  ``external`` tensors are the graph inputs.  ``update`` ops are kept with
  ``side_effect``.
* Locations: ``"<op name>#<index in the expanded operation list>"``; constants
  ``"VARIABLE:<label>"``, ``"CONSTANT#<index>"``, ``"LITERAL"``.

Source record (``graph.source``, :class:`~tf2tosa.ir.records.SourceInfo`)
----------------------------------------------------------------------------
``format`` ("nnef"), ``file``, ``nnef_version`` (e.g. "1.0"), ``nnef_extensions``,
``graph_name``, ``quantization``, ``expanded`` (the fragment names given to the parser),
``kept`` (compound operations left whole).

Errors
------
Everything wrong with the input raises :class:`~tf2tosa.errors.ModelLoadError`, one line
naming the file and, where there is one, the operation and tensor.
"""

from __future__ import annotations

import contextlib
import faulthandler
import lzma
import math
import mmap
import os
import posixpath
import re
import shutil
import signal
import stat
import struct
import tarfile
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..errors import MissingExtraError, ModelLoadError
from ..ir.graph import Graph, Value
from ..ir.types import DType, QuantParams, TensorType
from .archive import MAX_MEMBERS, kind_of, max_extract_bytes, mib, too_big

__all__ = ["is_nnef_source", "load_nnef", "read_dat", "PRIMITIVE_OPS", "COMPOUND_OPS", "DatTensor"]

#: Standard operations without a body in the parser's standard library (nnef 1.0.10).
PRIMITIVE_OPS: frozenset[str] = frozenset("""
external variable constant update reshape transpose concat split slice squeeze unsqueeze stack unstack tile
pad gather cast add sub mul div pow exp log sin cos tan sinh cosh tanh asin acos atan asinh acosh atanh abs
sign rcp neg copy lt gt le ge eq ne and or not floor ceil round select matmul conv deconv box debox
argmax_pool sample desample multilinear_upsample sum_reduce max_reduce min_reduce argmax_reduce
argmin_reduce any_reduce all_reduce avg_roi_pool max_roi_pool roi_resample
""".split())

#: Standard operations defined as compound fragments in the parser's standard library.
COMPOUND_OPS: frozenset[str] = frozenset("""
sqr sqrt rsqr rsqrt log2 min max clamp nearest_downsample area_downsample nearest_upsample mean_reduce
moments relu sigmoid softabs softmax softplus elu selu gelu silu prelu leaky_relu max_pool_with_index
max_pool avg_pool rms_pool linear separable_conv separable_deconv local_response_normalization
local_mean_normalization local_variance_normalization local_contrast_normalization l1_normalization
l2_normalization batch_normalization avg_roi_align max_roi_align min_max_linear_quantize
zero_point_linear_quantize linear_quantize logarithmic_quantize copy_n add_n
""".split())

_NNEF_TYPES = {"scalar": DType.FP32, "integer": DType.INT32, "logical": DType.BOOL}
_QUANT_TYPES = {(8, True): DType.INT8, (8, False): DType.UINT8, (16, True): DType.INT16,
                (16, False): DType.UINT16, (32, True): DType.INT32, (32, False): DType.UINT32,
                (4, True): DType.INT4}

# ----------------------------------------------------------------------------- tensor files
#: item-type codes of the Khronos implementation (nnef 1.0.x ``binary.py``)
_FLOAT, _UINT, _QUINT, _QINT, _INT, _BOOL = range(6)
_CODE_NAMES = {_FLOAT: "float", _UINT: "unsigned integer", _QUINT: "quantized unsigned integer",
               _QINT: "quantized signed integer", _INT: "signed integer", _BOOL: "logical"}
_HEADER = 128
_MAX_RANK = 8


class DatTensor:
    """The contents of one ``.dat`` file."""

    def __init__(self, data: np.ndarray, code: int, bits: int, version: tuple[int, int]) -> None:
        self.data, self.code, self.bits, self.version = data, code, bits, version

    @property
    def quantized(self) -> bool:
        return self.code in (_QINT, _QUINT)

    @property
    def kind(self) -> str:
        return _CODE_NAMES[self.code]


#: .dat files of at least this many bytes are mapped (a view of the file, no copy), smaller ones read
_MAP_MIN_BYTES = 1 << 16


class MapBudget:
    """How many more ``.dat`` files one load may keep mapped.  Each map holds a file descriptor (Python's ``mmap``
    duplicates it) for as long as the weight is in use, so a load maps at most half of the process's open-file
    limit less a margin; the files beyond it are read into memory (a model with thousands of weight files still
    loads under the usual limit of 1024)."""

    def __init__(self, left: int | None = None) -> None:
        if left is None:
            try:
                import resource

                soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
                soft = 1 << 16 if soft == resource.RLIM_INFINITY else soft
            except (ImportError, OSError, ValueError):  # (no resource module: not a POSIX system)
                soft = 512
            left = soft // 2 - 64
        self.left = max(0, left)

    def take(self) -> bool:
        """One more map, if the budget allows it."""
        if self.left <= 0:
            return False
        self.left -= 1
        return True


def read_dat(path: str | os.PathLike[str], *, tensor: str | None = None,
             budget: MapBudget | None = None) -> DatTensor:
    """Read an NNEF tensor file (spec §5.2): a 128-byte little-endian header, then the data.

    Item types are the Khronos implementation's codes: float (16/32/64 bits), signed and
    unsigned integers (8–64), quantized signed/unsigned integers, and logical (1 bit per
    item, packed most significant bit first).  Only a regular file is read (a FIFO, a device
    or a folder is refused without reading it), and the header's sizes are checked against the
    file's size before any data is read.  Raises ModelLoadError naming the file.
    """
    p = Path(path)

    def fail(msg: str) -> ModelLoadError:
        return ModelLoadError(msg, file=str(p), tensor=tensor)

    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise fail("missing tensor file") from None
    except (OSError, ValueError) as e:
        raise fail(f"cannot read tensor file: {getattr(e, 'strerror', None) or e}") from None
    try:
        return _read_dat_fd(fd, fail, budget)
    finally:
        os.close(fd)


def _read_dat_fd(fd: int, fail: Any, budget: MapBudget | None) -> DatTensor:
    """:func:`read_dat` of an open file: the header checked against the file's size, then the data (mapped)."""
    raw: bytes | mmap.mmap
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise fail(f"tensor file is {kind_of(st.st_mode)}, not a regular file")
        size = st.st_size
        head = os.pread(fd, _HEADER, 0) if size else b""
        info = _dat_header(head, size, fail)
        # mapped, not read: the weights are views of the file (no copy), as a .tflite's are, and the serializer
        # releases their pages as it writes them out
        mapped = size >= _MAP_MIN_BYTES and (budget is None or budget.take())
        if mapped:
            raw = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        else:
            with os.fdopen(os.dup(fd), "rb") as f:
                raw = f.read(size + 1)
    except (OSError, ValueError) as e:
        raise fail(f"cannot read tensor file: {getattr(e, 'strerror', None) or e}") from None
    if len(raw) != size:
        raise fail(f"tensor file changed size while it was read ({size} then {len(raw)} bytes)")
    shape, code, bits, version, count = info
    if bits == 1:
        data = np.unpackbits(np.frombuffer(raw, dtype=np.uint8, offset=_HEADER))[:count].astype(np.bool_)
    else:
        np_type = _dat_dtype(code, bits)
        assert np_type is not None
        data = np.frombuffer(raw, dtype=np.dtype(np_type).newbyteorder("<"), count=count, offset=_HEADER)
        data = data.astype(np_type, copy=False)  # a read-only view of the map (a copy only on a big-endian host)
    return DatTensor(data.reshape(shape), code, bits, version)


def _dat_header(head: bytes, size: int, fail: Any) -> tuple[tuple[int, ...], int, int, tuple[int, int], int]:
    """Check a tensor file's 128-byte header against the file's ``size`` in bytes, before any data is read:
    (shape, item-type code, bits per item, version, item count)."""
    if size < _HEADER or len(head) < _HEADER:
        raise fail(f"tensor file is {size} bytes, shorter than its 128-byte header")
    if head[0] != 0x4E or head[1] != 0xEF:
        raise fail("not an NNEF tensor file (bad magic number)")
    version = (head[2], head[3])
    if version[0] != 1 or version[1] != 0:
        raise fail(f"unsupported tensor file version {version[0]}.{version[1]}")
    words = struct.unpack("<31I", head[4:_HEADER])
    data_length, rank = words[0], words[1]
    if rank > _MAX_RANK:
        raise fail(f"tensor rank {rank} exceeds {_MAX_RANK}")
    shape = tuple(int(d) for d in words[2:2 + rank])
    bits, code = words[10], words[11]
    signed_flag = words[12]
    if code == _UINT and signed_flag != 0:  # the spec's "uncompressed integer" with its signed flag
        code = _INT
    if code not in _CODE_NAMES:
        raise fail(f"unsupported item-type code {code:#x}")
    count = math.prod(shape)
    np_type = _dat_dtype(code, bits)
    if np_type is None:
        raise fail(f"unsupported {bits}-bit {_CODE_NAMES[code]} items")
    expected = (count + 7) // 8 if bits == 1 else count * (bits // 8)
    if data_length != expected:
        raise fail(f"header says {data_length} data bytes but shape {list(shape)} of {bits}-bit items "
                   f"needs {expected}")
    body = size - _HEADER
    if body < data_length:
        raise fail(f"tensor file is short: {body} of {data_length} data bytes present")
    if body > data_length:
        raise fail(f"tensor file has {body - data_length} bytes after its data")
    return shape, code, bits, version, count


def _dat_dtype(code: int, bits: int) -> type | None:
    if code == _BOOL:
        return np.bool_ if bits == 1 else None
    if code == _FLOAT:
        return {16: np.float16, 32: np.float32, 64: np.float64}.get(bits)
    signed = code in (_INT, _QINT)
    table = {8: (np.int8, np.uint8), 16: (np.int16, np.uint16), 32: (np.int32, np.uint32),
             64: (np.int64, np.uint64)}
    pair = table.get(bits)
    return None if pair is None else pair[0 if signed else 1]


# ----------------------------------------------------------------------------- text helpers
_COMMENT = re.compile(r"#[^\n]*")
_VERSION = re.compile(r"\bversion\s+(\d+)\.(\d+)\s*;")
_EXTENSION = re.compile(r"\bextension\s+([^;]*);")
_FRAGMENT = re.compile(r"\bfragment\s+([A-Za-z_]\w*)")
_POSITION = re.compile(r"^Parse error in '(\w+)' \[(\d+):(\d+)\]\s*(.*)$", re.S)


def _header_info(text: str) -> tuple[str | None, list[str], list[str]]:
    """(version, extensions, names of the fragments the document defines or declares)."""
    bare = _COMMENT.sub("", text)
    m = _VERSION.search(bare)
    version = f"{m.group(1)}.{m.group(2)}" if m else None
    exts = [e.strip() for m in _EXTENSION.finditer(bare) for e in m.group(1).split(",") if e.strip()]
    return version, exts, sorted(set(_FRAGMENT.findall(bare)))


def _parse_error(err: Exception, graph_file: str, quant_file: str | None) -> ModelLoadError:
    msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    m = _POSITION.match(msg)
    if m:
        which, line, col, rest = m.groups()
        file = quant_file if which == "quantization" and quant_file else graph_file
        return ModelLoadError(f"parse error at line {line}, column {col}: {rest}", file=file)
    return ModelLoadError(f"invalid NNEF document: {msg}", file=graph_file)


# ----------------------------------------------------------------------------- quantization
def _quant_type(name: str, q: Mapping[str, Any], shape: tuple[int, ...], file: str | None,
                op: str | None) -> tuple[DType, QuantParams] | None:
    """The integer type and QuantParams of a ``graph.quant`` entry; None for logarithmic."""
    alg = str(q.get("op-name"))

    def fail(msg: str) -> ModelLoadError:
        return ModelLoadError(f"quantization {alg} of tensor '{name}': {msg}", file=file, op=op, tensor=name)

    if alg == "logarithmic_quantize":
        return None
    bits = int(q.get("bits", 0))
    if alg == "zero_point_linear_quantize":
        signed = bool(q["signed"])
        scale = np.atleast_1d(np.asarray(q["scale"], dtype=np.float64)).reshape(-1)
        zp_f = np.atleast_1d(np.asarray(q["zero_point"], dtype=np.float64)).reshape(-1)
    elif alg in ("linear_quantize", "min_max_linear_quantize"):
        signed = bool(q.get("signed", False))
        symmetric = bool(q.get("symmetric", False))
        lo = np.atleast_1d(np.asarray(q["min"], dtype=np.float64)).reshape(-1)
        hi = np.atleast_1d(np.asarray(q["max"], dtype=np.float64)).reshape(-1)
        if np.any(hi <= lo):
            raise fail("max must exceed min")
        r = 2.0 ** bits - 1 - (1 if signed and symmetric else 0)
        p = (2.0 ** (bits - 1) - (1 if symmetric else 0)) if signed else 0.0
        scale = (hi - lo) / r
        zp_f = -p - lo / scale
    else:
        raise fail("unknown quantization algorithm")
    dtype = _QUANT_TYPES.get((bits, signed))
    if dtype is None:
        raise fail(f"no integer type for {bits}-bit {'signed' if signed else 'unsigned'} values")
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise fail("scale must be positive and finite")
    zp = np.round(zp_f)
    if np.any(np.abs(zp_f - zp) > 1e-3):
        raise fail(f"zero point {float(zp_f[np.argmax(np.abs(zp_f - zp))]):.6g} is not an integer")
    n = max(len(scale), len(zp))
    if len(scale) not in (1, n) or len(zp) not in (1, n):
        raise fail(f"{len(scale)} scales and {len(zp)} zero points")
    scale, zp = np.broadcast_to(scale, (n,)), np.broadcast_to(zp, (n,))
    axis: int | None = None
    if n > 1:
        axes = [i for i, d in enumerate(shape) if d == n]
        if not axes:
            raise fail(f"{n} per-channel parameters match no dimension of shape {list(shape)}")
        axis = 0 if 0 in axes else axes[-1]
    return dtype, QuantParams(tuple(float(s) for s in scale), tuple(int(z) for z in zp), axis)


def _quantize_array(x: np.ndarray, dtype: DType, qp: QuantParams) -> np.ndarray:
    """``zero_point_linear_quantize`` of float data, as integers (round half away from zero)."""
    scale = np.asarray(qp.scale, dtype=np.float64)
    zp = np.asarray(qp.zero_point, dtype=np.float64)
    if qp.axis is not None:
        bshape = [1] * x.ndim
        bshape[qp.axis] = -1
        scale, zp = scale.reshape(bshape), zp.reshape(bshape)
    v = x.astype(np.float64) / scale
    q = np.sign(v) * np.floor(np.abs(v) + 0.5) + zp
    lo, hi = dtype.range()
    return np.clip(q, lo, hi).astype(dtype.np_dtype())


# ----------------------------------------------------------------------------- loading
def _import_nnef() -> Any:
    try:
        import nnef  # the Khronos parser
    except ImportError:
        raise MissingExtraError("reading NNEF needs the Khronos parser: pip install 'tf2tosa[nnef]'") from None
    return nnef


#: the most bytes a ``graph.nnef`` or ``graph.quant`` may hold (the parser holds the text and its tree in memory;
#: the graphs nnef-tools writes for large networks are a few hundred KiB)
MAX_TEXT_BYTES = 64 << 20
#: how deeply brackets may nest in ``graph.nnef`` / ``graph.quant``, and how many operators one expression (the text
#: between two separators) may chain: the Khronos parser recurses for both and overflows its stack (SIGSEGV) at
#: about 10,000 levels, and it turns a list nested deeper than 64 into an array numpy refuses (also a SIGSEGV).
#: The parser runs in a child process anyway (:func:`_parse_isolated`); these checks name the line.
MAX_NESTING = 32
MAX_CHAIN = 1000


def load_nnef(path: str | os.PathLike[str], *, keep: Iterable[str] = ()) -> Graph:
    """Load an NNEF model (directory, ``.tgz``/``.tar`` archive or ``graph.nnef``) as ``nnef.*`` ops.

    ``keep``: standard compound operations (names in :data:`COMPOUND_OPS`) to leave
    unexpanded; everything else compound is expanded to primitives.

    Nothing outside the model is read: variable labels resolve inside the model's folder (or archive), only
    regular files are opened (no symlink, FIFO or device), and an archive is unpacked member by member into a
    temporary folder (``$TMPDIR/tf2tosa-nnef-*``, removed on every exit) under the caps of
    :mod:`tf2tosa.converter.archive` (``--max-extract-mb``), each ``.dat`` member's header checked first.
    """
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ModelLoadError("no such file or directory", file=str(p)) from None
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"cannot read model: {getattr(e, 'strerror', None) or e}", file=str(p)) from None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise ModelLoadError(f"not a model folder or file ({kind_of(st.st_mode)})", file=str(p))
    if stat.S_ISREG(st.st_mode) and (p.name.endswith((".tgz", ".tar.gz", ".tar")) or _is_tar(p)):
        with _terminate_raises():
            tmp: str | None = None
            try:
                with _signals_held():  # (a SIGTERM between making the folder and naming it would leave it behind)
                    tmp = tempfile.mkdtemp(prefix="tf2tosa-nnef-")
                dest = Path(os.path.realpath(tmp))
                skipped = _unpack(p, dest)
                root = _archive_root(dest, p)
                return _load_dir(root, "graph.nnef", set(keep), display=p, inner=root, archive=True,
                                 skipped=skipped)
            finally:
                if tmp is not None:
                    with _signals_held():
                        shutil.rmtree(tmp, ignore_errors=True)
    if stat.S_ISDIR(st.st_mode):
        folder = Path(os.path.realpath(p))
        if not (folder / "graph.nnef").exists() and not (folder / "graph.nnef").is_symlink():
            raise ModelLoadError("directory holds no graph.nnef", file=str(p))
        return _load_dir(folder, "graph.nnef", set(keep), display=p, inner=p, archive=False)
    # a bare graph.nnef named by the user: its folder is the model's
    real = Path(os.path.realpath(p))
    return _load_dir(real.parent, real.name, set(keep), display=p, inner=p.parent, archive=False)


def _is_tar(p: Path) -> bool:
    try:
        return tarfile.is_tarfile(p)
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def _terminate_raises() -> Iterator[None]:
    """While an archive is unpacked, SIGTERM (and SIGHUP) end the process through SystemExit, so the temporary
    folder is removed as on Ctrl-C; a handler someone else installed is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    old: dict[int, Any] = {}
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) == signal.SIG_DFL:
            old[sig] = signal.signal(sig, stop)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


_HELD = tuple(sig for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if sig is not None)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait (blocked, then delivered) until the end of the block."""
    can = hasattr(signal, "pthread_sigmask") and threading.current_thread() is threading.main_thread()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD) if can else None
    try:
        yield
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _member_path(name: str) -> str | None:
    """A member name as a relative path inside the archive ("" for its top); None when it leaves the archive."""
    if name.startswith("/") or "\0" in name:
        return None
    norm = posixpath.normpath(name)
    if norm == ".":
        return ""
    if norm == ".." or norm.startswith("../"):
        return None
    return norm


#: the most bytes of a GNU long-name or PAX extended header (tarfile reads one whole into memory)
_MAX_HEADER_DATA = 1 << 20


class _HeaderTooBig(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(f"an extended tar header of {mib(size)}, more than {mib(_MAX_HEADER_DATA)}")


#: what tarfile's stream reader raises on a damaged archive: its own errors, the decompressors', and TypeError /
#: ValueError / struct.error from header fields it reads without checking (a gzip header cut inside its extra
#: field: "ord() expected a character", found by tools/fuzz.py)
_UNPACK_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError, RecursionError, _HeaderTooBig,
                  TypeError, ValueError, struct.error)

class _CappedTarInfo(tarfile.TarInfo):
    """A TarInfo that refuses a long-name or PAX header whose data is larger than :data:`_MAX_HEADER_DATA` before
    tarfile reads that data into memory."""

    def _proc_member(self, tar: Any) -> Any:  # (tarfile's own dispatch, called for every header)
        if self.type in _EXTENDED_HEADERS and self.size > _MAX_HEADER_DATA:
            raise _HeaderTooBig(self.size)
        return super()._proc_member(tar)  # type: ignore[misc]


_EXTENDED_HEADERS = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
                     tarfile.SOLARIS_XHDTYPE)


def _unpack(p: Path, dest: Path) -> dict[Path, str]:
    """Unpack the members of the tar ``p`` the loader can use (``graph.nnef``, ``graph.quant``, ``*.dat``) into
    ``dest``, streaming (nothing is read twice, nothing is seeked back to), each member checked from its tar
    header before its data is read: a name inside the archive, its size and the running total within the
    extraction cap, a ``.dat``'s 128-byte header valid and matching the member's size.  Other regular members are
    skipped (their sizes still count).  Links, devices and FIFOs are never created: what each was is returned
    (by the path it would have had), so that a label naming one gets the real cause; a hard link to a regular
    member unpacked before it becomes a second name of that file."""
    file = str(p)
    skipped: dict[Path, str] = {}
    unpacked: set[str] = set()
    total = 0
    count = 0
    tar: tarfile.TarFile | None = None

    def unpack_error(e: BaseException) -> ModelLoadError:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if isinstance(e, (TypeError, struct.error)):  # (tarfile read a header field that is not there)
            first = "a header is damaged or cut short"
        if count == 0:
            return ModelLoadError(f"not a tar archive ({first})", file=file)
        return ModelLoadError(f"cannot unpack archive: {first}", file=file)

    try:
        try:
            tar = tarfile.open(p, "r|*", tarinfo=_CappedTarInfo)
        except _UNPACK_ERRORS as e:
            raise unpack_error(e) from None
        while True:
            try:
                m = tar.next()
            except _UNPACK_ERRORS as e:
                raise unpack_error(e) from None
            if m is None:
                break
            tar.members.clear()  # type: ignore[attr-defined]  # (tarfile keeps every header; one is enough)
            count += 1
            if count > MAX_MEMBERS:
                raise ModelLoadError(f"archive holds more than {MAX_MEMBERS} members", file=file)
            rel = _member_path(m.name)
            if rel is None:
                raise ModelLoadError(f"archive member '{m.name}' points outside the archive", file=file)
            if rel == "":
                continue
            if m.isdir():
                _mkdirs(dest, rel, file)
                continue
            if not m.isfile():
                _unpack_special(m, rel, dest, file, unpacked, skipped)
                continue
            total += m.size
            err = too_big(m.name, m.size, total, file)
            if err is not None:
                raise err
            if _wanted(m, posixpath.basename(rel), file):
                _extract_member(tar, m, rel, dest, file, unpacked, skipped, unpack_error)
        if count == 0:
            raise ModelLoadError("not a tar archive (no members)", file=file)
    finally:
        if tar is not None:
            try:
                tar.close()
            except (OSError, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError):
                pass
    return skipped


def _special_kind(m: tarfile.TarInfo) -> str:
    """What a member that is not a regular file is, in words."""
    return (f"a symlink to '{m.linkname}'" if m.issym() else f"a hard link to '{m.linkname}'"
            if m.islnk() else "a FIFO" if m.isfifo() else "a character device" if m.ischr()
            else "a block device" if m.isblk() else "not a regular file")


def _unpack_special(m: tarfile.TarInfo, rel: str, dest: Path, file: str, unpacked: set[str],
                    skipped: dict[Path, str]) -> None:
    """A member that is not a regular file: a hard link to a regular member unpacked before it becomes a second
    name of that file; anything else is only recorded in ``skipped`` (by the path it would have had)."""
    target = dest / rel
    link = _member_path(m.linkname) if m.islnk() else None
    if link is not None and link in unpacked and rel not in unpacked:
        _mkdirs(dest, posixpath.dirname(rel), file)
        try:
            os.link(dest / link, target, follow_symlinks=False)
        except OSError as e:
            raise ModelLoadError(f"cannot unpack archive member '{m.name}': {e.strerror or e}",
                                 file=file) from None
        unpacked.add(rel)
        skipped.pop(target, None)
    else:
        skipped[target] = _special_kind(m)


def _wanted(m: tarfile.TarInfo, base: str, file: str) -> bool:
    """Whether the loader uses the regular member ``m`` (``graph.nnef``, ``graph.quant``, ``*.dat``); a graph text
    larger than a graph may hold is refused."""
    if base in ("graph.nnef", "graph.quant"):
        cap = min(MAX_TEXT_BYTES, max_extract_bytes())
        if m.size > cap:
            raise ModelLoadError(f"{base} is {mib(m.size)}, more than the {mib(cap)} a graph may hold",
                                 file=f"{file}:{m.name}")
        return True
    return base.endswith(".dat")  # (not needed otherwise: the stream skips its data)


def _extract_member(tar: tarfile.TarFile, m: tarfile.TarInfo, rel: str, dest: Path, file: str, unpacked: set[str],
                    skipped: dict[Path, str], unpack_error: Callable[[BaseException], ModelLoadError]) -> None:
    """Write the regular member ``m`` to ``dest / rel`` (a ``.dat``'s header checked first), replacing a file or
    link an earlier member of the same name left there."""
    target = dest / rel
    base = posixpath.basename(rel)
    try:
        src = tar.extractfile(m)
        assert src is not None
        head = src.read(_HEADER) if base.endswith(".dat") else b""
        if base.endswith(".dat"):
            def fail(msg: str, name: str = m.name) -> ModelLoadError:
                return ModelLoadError(msg, file=f"{file}:{name}")

            _dat_header(head, m.size, fail)
        _mkdirs(dest, posixpath.dirname(rel), file)
        if rel in unpacked or target.exists() or target.is_symlink():
            if target.is_dir() and not target.is_symlink():
                raise ModelLoadError(f"archive member '{m.name}' is both a folder and a file", file=file)
            target.unlink()
        skipped.pop(target, None)
        _write_member(src, head, target, m, file)
        unpacked.add(rel)
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, TypeError, ValueError, struct.error) as e:
        raise unpack_error(e) from None
    except OSError as e:
        raise ModelLoadError(f"cannot unpack archive member '{m.name}': {e.strerror or e}",
                             file=file) from None


def _write_member(src: IO[bytes], head: bytes, target: Path, m: tarfile.TarInfo, file: str) -> None:
    """Create ``target`` (never through a link) and write ``head`` and the rest of the member's data to it, in
    chunks of at most 1 MiB; data shorter than the header's size is refused."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(head)
        written = len(head)
        while written < m.size:
            chunk = src.read(min(1 << 20, m.size - written))
            if not chunk:
                break
            out.write(chunk)
            written += len(chunk)
    if written != m.size:
        raise ModelLoadError(f"archive member '{m.name}' is cut short ({written} of {m.size} bytes)",
                             file=file)


def _mkdirs(dest: Path, rel: str, file: str) -> None:
    """The folders of ``rel`` under ``dest`` (only folders this unpacking made: no link is ever created)."""
    if not rel:
        return
    try:
        (dest / rel).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ModelLoadError(f"cannot unpack archive folder '{rel}': {e.strerror or e}", file=file) from None


def _archive_root(dest: Path, p: Path) -> Path:
    """The folder of the unpacked archive that holds ``graph.nnef``: its top or its one top folder."""
    found = sorted(str(f.relative_to(dest)) for f in dest.rglob("graph.nnef") if f.is_file())
    near = [f for f in found if f.count("/") <= 1]
    if len(near) == 1:
        return (dest / near[0]).parent
    if len(near) > 1:
        raise ModelLoadError(f"archive holds {len(near)} graph.nnef files: {', '.join(near)}", file=str(p))
    if found:
        raise ModelLoadError(f"archive holds no graph.nnef at its top or in one top folder (found "
                             f"{', '.join(found[:3])})", file=str(p))
    raise ModelLoadError("archive holds no graph.nnef", file=str(p))


def _open_inside(root: Path, parts: list[str], fail: Any, what: str) -> int:
    """Open the regular file ``root/parts…`` for reading, every step inside ``root``: no step may be a symlink
    (each folder is opened relative to the one before, without following links, so nothing can swap one in
    between the check and the open), and the file must be a regular one (checked before it is opened: a FIFO
    or a device is never opened).  ``what`` names the file in messages ("tensor file")."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    dfd = os.open(root, flags | getattr(os, "O_DIRECTORY", 0))
    try:
        for i, comp in enumerate(parts):
            last = i == len(parts) - 1
            shown = "/".join(parts[:i + 1])
            try:
                st = os.stat(comp, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                raise fail(f"missing {what}") from None
            if stat.S_ISLNK(st.st_mode):
                to = os.readlink(comp, dir_fd=dfd)
                real = os.path.realpath(root.joinpath(*parts[:i + 1]))
                inside = real == str(root) or real.startswith(str(root).rstrip(os.sep) + os.sep)
                if not inside:
                    raise fail(f"'{shown}' is a symlink to '{to}', outside the model")
                raise fail(f"{what} path '{shown}' is a symlink (to '{to}'); only regular files and folders inside "
                           "the model are read")
            if not last:
                if not stat.S_ISDIR(st.st_mode):
                    raise fail(f"missing {what} ('{shown}' is not a folder)")
                nfd = os.open(comp, flags | nofollow | getattr(os, "O_DIRECTORY", 0), dir_fd=dfd)
                os.close(dfd)
                dfd = nfd
                continue
            if not stat.S_ISREG(st.st_mode):
                raise fail(f"{what} is {kind_of(st.st_mode)}, not a regular file")
            fd = os.open(comp, flags | nofollow | os.O_NONBLOCK, dir_fd=dfd)
            now = os.fstat(fd)
            if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                os.close(fd)
                raise fail(f"{what} changed while it was opened")
            return fd
        raise fail(f"missing {what}")
    except OSError as e:
        raise fail(f"cannot read {what}: {e.strerror or e}") from None
    finally:
        os.close(dfd)


def _label_parts(label: str) -> list[str] | None:
    """The path of a variable's tensor file inside the model, as folder names and the file's; None when the
    label leaves the model folder (an absolute label, or ``..`` above the top)."""
    if not label or label.startswith(("/", "\\")) or "\0" in label:
        return None
    norm = posixpath.normpath(label + ".dat")
    if norm == ".." or norm.startswith("../") or norm.startswith("/"):
        return None
    return norm.split("/")


def _read_text(root: Path, name: str, fail: Any, bare: Path | None = None) -> str:
    """``graph.nnef`` / ``graph.quant``: a regular file inside the model (or the file the user named), at most
    :data:`MAX_TEXT_BYTES` (and the extraction cap), UTF-8."""
    if bare is not None:
        try:
            fd = os.open(bare, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise fail(f"cannot read graph: {e.strerror or e}") from None
    else:
        fd = _open_inside(root, [name], fail, name)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise fail(f"{name} is {kind_of(st.st_mode)}, not a regular file")
        cap = min(MAX_TEXT_BYTES, max_extract_bytes())
        if st.st_size > cap:
            raise fail(f"{name} is {mib(st.st_size)}, more than the {mib(cap)} a graph may hold")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(st.st_size + 1)  # (not cap + 1: read() allocates what it is asked for)
        if len(data) != st.st_size:
            raise fail(f"{name} changed size while it was read")
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise fail(f"cannot read graph: {e}") from None
    except OSError as e:
        raise fail(f"cannot read {name}: {e.strerror or e}") from None
    finally:
        os.close(fd)


_QUOTED = re.compile(rb"#[^\n]*|'[^'\n]*'|\"[^\"\n]*\"")
_ELSE = re.compile(rb"\belse\b")
_BYTE_CLASS = np.zeros(256, np.uint8)
for _chars, _cls in ((b"([{", 1), (b")]}", 2), (b",;:", 3), (b"-+*/^<>!=&|", 4)):
    _BYTE_CLASS[list(_chars)] = _cls


def _check_depth(text: str, fname: str, what: str) -> None:
    """Refuse text whose brackets nest deeper than :data:`MAX_NESTING`, or one of whose expressions (the text
    between two separators) holds more than :data:`MAX_CHAIN` operators, before the parser sees it (it recurses
    for both and would overflow its stack).  One line: "graph.nnef line L: expressions nested deeper than N".
    Vectorised over the bytes (a 20 MB document takes a fraction of a second)."""
    raw = text.encode("utf-8")
    blank = bytearray(raw)
    for m in _QUOTED.finditer(raw):  # comments and strings hold no brackets or operators
        blank[m.start():m.end()] = b" " * (m.end() - m.start())
    b = np.frombuffer(bytes(blank), dtype=np.uint8)
    if not b.size:
        return

    def line_at(pos: int) -> int:
        return raw.count(b"\n", 0, pos) + 1

    cls = _BYTE_CLASS[b]  # 1 opening bracket, 2 closing, 3 separator, 4 operator character, 0 anything else
    step = np.zeros(b.size, np.int32)
    step[cls == 1] = 1
    step[cls == 2] = -1
    depth = np.cumsum(step)
    deep = np.flatnonzero(depth > MAX_NESTING)
    if deep.size:
        raise ModelLoadError(f"{what} line {line_at(int(deep[0]))}: expressions nested deeper than {MAX_NESTING}",
                             file=fname)
    ops = (cls == 4).astype(np.int32)
    for m in _ELSE.finditer(bytes(blank)):
        ops[m.start()] += 1
    separators = np.flatnonzero((cls >= 1) & (cls <= 3))
    cum = np.concatenate(([0], np.cumsum(ops, dtype=np.int64)))
    bounds = np.concatenate(([0], separators, [b.size]))
    counts = cum[bounds[1:]] - cum[bounds[:-1]]
    long = np.flatnonzero(counts > MAX_CHAIN)
    if long.size:
        start = int(bounds[long[0]])
        end = int(bounds[long[0] + 1])
        where = start + int(np.flatnonzero(np.cumsum(ops[start:end]) > MAX_CHAIN)[0])
        raise ModelLoadError(f"{what} line {line_at(where)}: an expression of more than {MAX_CHAIN} operators",
                             file=fname)


_STRING = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
_BRACE = re.compile(r"[{}]")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^<>(){};]*>)?\s*\(")


def _check_recursion(text: str, fname: str) -> None:
    """Refuse a document whose own fragments call each other in a cycle: the parser expands every fragment
    and, for a cycle, recurses until its stack overflows (SIGSEGV)."""
    bare = _STRING.sub("''", _COMMENT.sub(lambda m: " " * len(m.group()), text))
    calls: dict[str, set[str]] = {}
    where: dict[str, int] = {}
    for m in _FRAGMENT.finditer(bare):
        name = m.group(1)
        i = m.end()
        brace, semi = bare.find("{", i), bare.find(";", i)
        if brace < 0 or (0 <= semi < brace):
            continue  # a declaration without a body
        depth, j = 0, len(bare)
        for b in _BRACE.finditer(bare, brace):
            depth += 1 if b.group() == "{" else -1
            if depth == 0:
                j = b.start()
                break
        calls.setdefault(name, set()).update(c.group(1) for c in _CALL.finditer(bare, brace, j))
        where.setdefault(name, m.start())
    own = set(calls)
    done: set[str] = set()
    for start in sorted(own):
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        todo: list[tuple[str, list[str]]] = [(start, sorted(calls[start] & own))]
        path.append(start)
        on_path.add(start)
        while todo:
            node, rest = todo[-1]
            if not rest:
                todo.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            nxt = rest.pop(0)
            if nxt in on_path:
                cycle = path[path.index(nxt):] + [nxt]
                line = text.count("\n", 0, where[nxt]) + 1
                raise ModelLoadError(f"graph.nnef line {line}: fragment '{nxt}' calls itself "
                                     f"({' -> '.join(cycle)}); recursive fragments are not supported", file=fname)
            if nxt in done:
                continue
            path.append(nxt)
            on_path.add(nxt)
            todo.append((nxt, sorted(calls[nxt] & own)))


def _load_dir(folder: Path, graph_name: str, keep: set[str], *, display: Path, inner: Path, archive: bool,
              skipped: Mapping[Path, str] | None = None) -> Graph:
    """Load the model whose files are in ``folder`` (a real path: the user's folder resolved, or the unpacked
    archive's); ``display`` and ``inner`` give the names the user knows (``inner`` is what ``folder`` is called,
    for a folder, or the archive's model folder)."""
    nnef = _import_nnef()
    unknown_keep = keep - COMPOUND_OPS
    if unknown_keep:
        raise ValueError(f"keep names non-compound operations: {sorted(unknown_keep)}")

    def shown(f: Path) -> str:
        """A file name as the user knows it (inside the archive, if any)."""
        rel = f.relative_to(folder)
        if archive:
            return f"{display}:{rel}"
        if not display.is_dir():  # a bare graph.nnef: its own name as given
            return str(display) if str(rel) == graph_name else str(inner / rel)
        return str(inner / rel)

    graph_file = folder / graph_name
    gname = shown(graph_file)

    def gfail(msg: str) -> ModelLoadError:
        return ModelLoadError(msg, file=gname)

    bare = display if not archive and not display.is_dir() else None
    text = _read_text(folder, graph_name, gfail, bare=bare)
    quant_path = folder / "graph.quant"
    qname = shown(quant_path)
    quant_text: str | None = None
    if quant_path.exists() or quant_path.is_symlink():
        quant_text = _read_text(folder, "graph.quant", lambda msg: ModelLoadError(msg, file=qname))
    _check_depth(text, gname, "graph.nnef" if graph_name == "graph.nnef" else graph_name)
    if quant_text is not None:
        _check_depth(quant_text, qname, "graph.quant")
    _check_recursion(text, gname)
    version, extensions, own = _header_info(text)
    lowered = sorted((COMPOUND_OPS - keep) | set(own))
    if "\0" in text or (quant_text is not None and "\0" in quant_text):
        which, doc = ("graph.quant", quant_text) if "\0" not in text else ("graph.nnef", text)
        assert doc is not None
        raise ModelLoadError(f"{which} line {doc.count(chr(10), 0, doc.index(chr(0))) + 1}: a NUL character",
                             file=gname if which == "graph.nnef" else qname)
    ng = _parse_isolated(nnef, text, quant_text, lowered, gname, qname if quant_text is not None else None)

    shape_funcs = nnef.shapes._StandardShapeFuncs
    custom: dict[str, int] = {}
    for op in ng.operations:
        if op.name not in shape_funcs:
            custom[op.name] = custom.get(op.name, 0) + 1
    if custom:
        items = ", ".join(f"{k} x{n}" for k, n in sorted(custom.items()))
        raise ModelLoadError(f"operations without a definition (custom fragments): {items}", file=gname,
                             op=sorted(custom)[0])
    _check_shapes(ng, gname, declared=True)
    _infer_shapes(nnef, ng, gname)
    _check_shapes(ng, gname)
    return _build(ng, folder, shown, gname, version, extensions, lowered, keep, skipped or {})


def _rebuild(kind: str, fields: tuple[Any, ...]) -> Any:
    """An ``nnef.Graph`` / ``Tensor`` / ``Operation`` from its fields (their classes cannot be pickled by name)."""
    return getattr(_import_nnef(), kind)(*fields)


def _parse_isolated(nnef: Any, text: str, quant_text: str | None, lowered: list[str], gname: str,
                    qname: str | None) -> Any:
    """``nnef.parse_string`` in a forked child, its result sent back pickled: the Khronos parser crashes the process
    on some malformed documents (a statement beginning ``-y = ...`` is a SIGSEGV in nnef 1.0.10), which the checks
    before it cannot all foresee; a crash is then one ModelLoadError.  Without ``os.fork`` it runs in-process."""
    if not hasattr(os, "fork"):
        try:
            return nnef.parse_string(text, quant_text, lowered=lowered)
        except nnef.Error as e:
            raise _parse_error(e, gname, qname) from None
    import pickle

    try:
        import resource
    except ImportError:  # (not a POSIX system)
        resource = None  # type: ignore[assignment]

    class Pickler(pickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            for kind in ("Graph", "Tensor", "Operation"):
                if type(obj) is getattr(nnef, kind):
                    return _rebuild, (kind, tuple(obj))
            return NotImplemented

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: parse, send, leave without running any of the parent's clean-up
        code = 0
        try:
            os.close(r)
            _quiet_crash(resource)
            result: tuple[str, Any]
            try:
                result = ("ok", nnef.parse_string(text, quant_text, lowered=lowered))
            except nnef.Error as e:
                result = ("error", str(e))
            except Exception as e:
                result = ("other", f"{type(e).__name__}: {e}")
            with os.fdopen(w, "wb") as f:
                Pickler(f, protocol=pickle.HIGHEST_PROTOCOL).dump(result)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    try:
        with os.fdopen(r, "rb") as back:
            data = back.read()
        _, status = os.waitpid(pid, 0)
        pid = 0
    finally:
        if pid:  # (interrupted while waiting: the child goes too)
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
    if os.WIFSIGNALED(status) or not data:
        why = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
               else f"exit {os.waitstatus_to_exitcode(status)}")
        raise ModelLoadError(f"invalid NNEF document: the Khronos NNEF parser crashed on it ({why})", file=gname)
    kind, value = pickle.loads(data)  # (our own child's bytes)
    if kind == "ok":
        return value
    if kind == "error":
        raise _parse_error(nnef.Error(value), gname, qname)
    raise ModelLoadError(f"invalid NNEF document: {value.splitlines()[0] if value else 'parser error'}", file=gname)


def _quiet_crash(resource: Any) -> None:
    """In the parsing child: a crash writes no core file and no faulthandler dump (the parent reports it).  (The
    modules are imported before the fork: the child imports nothing.)"""
    try:
        faulthandler.disable()
    except RuntimeError:
        pass
    if resource is not None:
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (OSError, ValueError):
            pass


#: the largest dimension a TOSA shape holds (shape_t is int32)
_MAX_DIM = 2**31 - 1


def _check_shapes(ng: Any, gname: str, declared: bool = False) -> None:
    """Refuse (one line naming the tensor) a shape TOSA cannot hold: a dimension below 1 (a zero-size tensor, or a
    literal too large for the parser, which it reads as -1) or above int32; an op's inferred result may have a 0
    (an empty slice, removed at conversion).  ``declared``: the ``shape`` attributes
    of external, variable and constant (before shape inference), else every tensor's inferred shape."""
    if declared:
        items = [(op.outputs.get("output"), op.attribs.get("shape")) for op in ng.operations
                 if op.name in ("external", "variable", "constant")]
    else:
        items = [(name, getattr(t, "shape", None)) for name, t in ng.tensors.items()]
    for name, shape in items:
        if shape is None:
            continue
        low = 1 if declared else 0  # (an op's empty result, e.g. a slice of size 0, is removed: lowering.zero_size)
        bad = [d for d in shape if not isinstance(d, int) or d < low or d > _MAX_DIM]
        if bad:
            raise ModelLoadError(f"tensor '{name}' has shape {list(shape)}: every dimension must be {low} ... "
                                 f"{_MAX_DIM}", file=gname, tensor=str(name))


def _infer_shapes(nnef: Any, ng: Any, gname: str) -> None:
    """``nnef.infer_shapes`` with ``sample`` fixed: nnef 1.0.10 wants its index shaped like the
    input, but the spec's ``sample`` (what ``max_pool`` expands to) takes the pooled index shape.

    The package's shape functions index and divide without checking their operands, so a shape that does not fit
    its op (a transpose's axes beyond the rank, a zero stride) raises IndexError, ZeroDivisionError and the like:
    each becomes one ModelLoadError naming the op whose shape function failed."""
    funcs = nnef.shapes._StandardShapeFuncs
    original = funcs["sample"]
    current: list[str] = [""]
    wrapped: dict[str, Any] = {}
    for op_name, func in funcs.items():
        def traced(*args: Any, _f: Any = func, _n: str = op_name, **kw: Any) -> Any:
            current[0] = _n
            return _f(*args, **kw)
        wrapped[op_name] = traced
    saved = dict(funcs)

    def sample_shape(input: list[int], index: list[int], size: list[int], **kw: Any) -> list[int]:
        pooled = nnef.shapes.pool_shape(input, size, kw.get("border"), kw.get("padding", []),
                                        kw.get("stride", []), kw.get("dilation", []))
        assert list(index) == list(pooled), f"'index' shape {index} does not match pooled shape {pooled}"
        return list(index)

    def traced_sample(*args: Any, **kw: Any) -> list[int]:
        current[0] = "sample"
        return sample_shape(*args, **kw)

    wrapped["sample"] = traced_sample
    funcs.update(wrapped)
    try:
        nnef.infer_shapes(ng)
    except AssertionError:
        # Raised only by the closing check that per-channel quantization arrays broadcast
        # (NNEF-style, leading dimensions) against their tensor, after every shape is set.
        # nnef-tools writes a [C] array for a [1, H, W, C] filter; _quant_type finds the axis.
        pass
    except nnef.Error as e:
        raise ModelLoadError(f"shape inference failed: {e}", file=gname) from None
    except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
        op = current[0] or None
        raise ModelLoadError(f"shape inference failed{f' in {op}' if op else ''}: the operands' shapes do not fit "
                             f"it ({type(e).__name__}: {e})", file=gname, op=op) from None
    finally:
        funcs.clear()
        funcs.update(saved)
        funcs["sample"] = original


def _build(ng: Any, folder: Path, shown: Any, gname: str, version: str | None, extensions: list[str],
           lowered: list[str], keep: set[str], skipped: Mapping[Path, str]) -> Graph:
    gb = _GraphBuilder(ng, folder, shown, gname, version, extensions, lowered, keep)
    budget = MapBudget()  # (the .dat files this load may keep mapped)
    for index, op in enumerate(ng.operations):
        if op.name == "external":
            gb.external(op)
        elif op.name in ("variable", "constant"):
            gb.data(index, op, budget, skipped)
        else:
            gb.operation(index, op)
    return gb.finish()


class _GraphBuilder:
    """The IR graph of one parsed NNEF graph (``ng``), built op by op: the values made so far by tensor name and
    the scalar literals (one constant per type and value)."""

    def __init__(self, ng: Any, folder: Path, shown: Any, gname: str, version: str | None, extensions: list[str],
                 lowered: list[str], keep: set[str]) -> None:
        self.ng, self.folder, self.shown, self.gname = ng, folder, shown, gname
        graph = Graph(str(ng.name))
        info = graph.source
        info.format, info.file, info.nnef_version, info.nnef_extensions = "nnef", gname, version, extensions
        info.graph_name, info.expanded, info.kept, info.quantization = str(ng.name), lowered, sorted(keep), {}
        self.graph = graph
        self.values: dict[str, Value] = {}
        self.literals: dict[tuple[str, Any], Value] = {}
        literal_name = "literal"
        while any(n == literal_name or n.startswith(literal_name + "_") for n in ng.tensors):
            literal_name = "_" + literal_name  # keep the document's names for its own tensors
        self.literal_name = literal_name

    def base_type(self, name: str, op_name: str | None) -> tuple[TensorType, bool]:
        """The value type of a tensor; second: True when graph.quant is logarithmic."""
        graph, gname = self.graph, self.gname
        t = self.ng.tensors[name]
        shape = tuple(int(d) for d in (t.shape or []))
        q = t.quantization
        if q:
            graph.source.quantization[name] = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                                                for k, v in q.items()}
        if t.dtype not in _NNEF_TYPES:
            raise ModelLoadError(f"unknown tensor type '{t.dtype}'", file=gname, op=op_name, tensor=name)
        dt = _NNEF_TYPES[t.dtype]
        if q:
            if dt is not DType.FP32:
                raise ModelLoadError(f"quantization of a {t.dtype} tensor", file=gname, op=op_name, tensor=name)
            qt = _quant_type(name, q, shape, self.shown(self.folder / "graph.quant"), op_name)
            if qt is None:
                return TensorType(shape, dt), True
            return TensorType(shape, qt[0], qt[1]), False
        return TensorType(shape, dt), False

    def log_quant(self, v: Value, name: str) -> Value:
        q = self.ng.tensors[name].quantization
        op = self.graph.add_op("nnef.logarithmic_quantize", [v], [v.type],
                               {"max": float(np.asarray(q["max"]).reshape(-1)[0]), "bits": int(q["bits"]),
                                "input_names": ["x"], "output_names": ["y"]},
                               [name + "_quantized"], location="QUANT:" + name)
        op.result.source = name
        return op.result

    def literal(self, value: Any) -> Value:
        if isinstance(value, bool):
            dt = DType.BOOL
        elif isinstance(value, int):
            dt = DType.INT32
        else:
            dt = DType.FP32
        key = (dt.value, value)
        if key not in self.literals:
            arr = np.asarray(value, dtype=dt.np_dtype())
            v = self.graph.add_op("nnef.const", [], [TensorType((), dt)], {"values": arr, "kind": "literal"},
                                  [self.literal_name], location="LITERAL").result
            self.literals[key] = v
        return self.literals[key]

    def external(self, op: Any) -> None:
        """A graph input."""
        out = op.outputs["output"]
        t, is_log = self.base_type(out, op.name)
        v = self.graph.add_input(out, t)
        v.source = out
        self.values[out] = self.log_quant(v, out) if is_log else v

    def data(self, index: int, op: Any, budget: MapBudget, skipped: Mapping[Path, str]) -> None:
        """A ``variable`` (its .dat file) or a ``constant`` (its values in the document) as an ``nnef.const``."""
        name = op.name
        loc = f"{name}#{index}"
        out = op.outputs["output"]
        t, is_log = self.base_type(out, name)
        if name == "variable":
            label = str(op.attribs["label"])
            arr = _variable_data(self.folder, label, out, t, self.ng.tensors[out], self.shown, loc, budget, skipped)
            cattrs: dict[str, Any] = {"values": arr, "kind": "variable", "label": label}
            location = "VARIABLE:" + label
        else:
            arr = _constant_data(op, t, out, self.gname, loc)
            cattrs = {"values": arr, "kind": "constant"}
            location = f"CONSTANT#{index}"
        v = self.graph.add_op("nnef.const", [], [t], cattrs, [out], location=location).result
        v.source = out
        self.values[out] = self.log_quant(v, out) if is_log else v

    def operation(self, index: int, op: Any) -> None:
        """Any other op as ``nnef.<name>``: its tensor and literal operands, results named after its tensors."""
        name = op.name
        loc = f"{name}#{index}"
        values = self.values
        operands: list[Value] = []
        input_names: list[str] = []
        for pname, arg in op.inputs.items():
            items = arg if isinstance(arg, list) else [arg]
            for i, a in enumerate(items):
                label = f"{pname}[{i}]" if isinstance(arg, list) else pname
                if isinstance(a, str):
                    if a not in values:
                        raise ModelLoadError(f"tensor '{a}' is used before it is defined", file=self.gname,
                                             op=loc, tensor=a)
                    operands.append(values[a])
                else:
                    operands.append(self.literal(a))
                input_names.append(label)
        out_names: list[str] = []
        out_tensors: list[str] = []
        for pname, res in op.outputs.items():
            items = res if isinstance(res, list) else [res]
            for i, r in enumerate(items):
                out_names.append(f"{pname}[{i}]" if isinstance(res, list) else pname)
                out_tensors.append(r)
        typed = [self.base_type(r, loc) for r in out_tensors]
        attrs: dict[str, Any] = dict(op.attribs)
        attrs.update(input_names=input_names, output_names=out_names)
        if op.dtype is not None:
            attrs["dtype"] = str(op.dtype)
        if name == "update":
            attrs["side_effect"] = True
        new = self.graph.add_op(f"nnef.{name}", operands, [t for t, _ in typed], attrs, out_tensors, location=loc)
        for r, tname, (_, is_log) in zip(new.results, out_tensors, typed):
            r.source = tname
            values[tname] = self.log_quant(r, tname) if is_log else r

    def finish(self) -> Graph:
        """The graph with its inputs in the document's order and its outputs."""
        graph, ng = self.graph, self.ng
        externals = [v.source for v in graph.inputs]
        for name in ng.inputs:
            if name not in externals:
                raise ModelLoadError(f"graph input '{name}' is not an external tensor", file=self.gname, tensor=name)
        order = list(ng.inputs)
        graph.inputs.sort(key=lambda v: order.index(v.source) if v.source in order else len(order))
        graph.outputs = [self.values[o] for o in ng.outputs]
        return graph


def _variable_data(folder: Path, label: str, name: str, t: TensorType, nt: Any, shown: Any,
                   loc: str, budget: MapBudget | None = None, skipped: Mapping[Path, str] | None = None) -> np.ndarray:
    """The data of a variable, checked against the graph's shape and type and quantized if needed.  Its tensor
    file is ``LABEL.dat`` inside the model folder: a label that leaves it, or a path through a symlink, is
    refused naming the label and the variable."""
    parts = _label_parts(label)
    if parts is None:
        raise ModelLoadError(f"label '{label}' of variable '{name}' leaves the model folder", file=shown(folder),
                             op=loc, tensor=name)
    f = folder.joinpath(*parts)
    fname = shown(f)

    def dat_fail(msg: str) -> ModelLoadError:
        if msg.startswith("missing") and skipped and f in skipped:
            msg = f"tensor file is {skipped[f]} in the archive; only regular files are read"
        elif msg.startswith("missing") and skipped:
            steps = [folder.joinpath(*parts[:i + 1]) for i in range(len(parts) - 1)]
            hit = next((i for i, step in enumerate(steps) if step in skipped), None)
            if hit is not None:
                msg = (f"label '{label}' of variable '{name}' passes through '{'/'.join(parts[:hit + 1])}', "
                       f"{skipped[steps[hit]]} in the archive; only regular files and folders are read")
        elif "outside the model" in msg:
            msg = f"label '{label}' of variable '{name}' leaves the model folder: {msg}"
        return ModelLoadError(msg, file=fname, op=loc, tensor=name)

    fd = _open_inside(folder, parts, dat_fail, "tensor file")
    try:
        dat = _read_dat_fd(fd, dat_fail, budget)
    finally:
        os.close(fd)

    def fail(msg: str) -> ModelLoadError:
        return ModelLoadError(msg, file=fname, op=loc, tensor=name)

    if tuple(dat.data.shape) != t.static_shape:
        raise fail(f"tensor file shape {list(dat.data.shape)} differs from the graph's {list(t.static_shape)}")
    declared = str(nt.dtype)
    if declared == "logical":
        if dat.code != _BOOL:
            raise fail(f"tensor file holds {dat.kind} items, the graph declares logical")
        return dat.data
    if declared == "integer":
        if dat.code not in (_INT, _UINT):
            raise fail(f"tensor file holds {dat.kind} items, the graph declares integer")
        info = np.iinfo(np.int32)
        if dat.data.size and (dat.data.min() < info.min or dat.data.max() > info.max):
            raise fail("integer data outside the 32-bit range")
        return dat.data.astype(np.int32, copy=False)
    # scalar
    if dat.code == _BOOL:
        raise fail("tensor file holds logical items, the graph declares scalar")
    if t.quant is None:
        if dat.code != _FLOAT:
            raise fail(f"tensor file holds {dat.kind} items but graph.quant gives no quantization for it")
        return dat.data.astype(np.float32, copy=False)  # (float32 data: the view of the file itself)
    if dat.code == _FLOAT:
        return _quantize_array(dat.data, t.dtype, t.quant)
    lo, hi = t.dtype.range()
    signed = dat.code in (_QINT, _INT)
    if dat.bits != t.dtype.bits or signed != (lo < 0):
        raise fail(f"tensor file holds {dat.bits}-bit {dat.kind} items, graph.quant says "
                   f"{t.dtype.bits}-bit {'signed' if lo < 0 else 'unsigned'}")
    return dat.data.astype(t.dtype.np_dtype(), copy=False)


def _constant_data(op: Any, t: TensorType, name: str, gname: str, loc: str) -> np.ndarray:
    value = list(op.attribs["value"])
    shape = t.static_shape
    n = math.prod(shape)
    if len(value) not in (1, n):
        raise ModelLoadError(f"constant has {len(value)} values for shape {list(shape)}", file=gname, op=loc,
                             tensor=name)
    nbytes = n * max(1, t.dtype.np_dtype().itemsize)
    if nbytes > max_extract_bytes():
        # one value repeated over a declared shape: the text is a few bytes, the array would not be
        raise ModelLoadError(f"constant of shape {list(shape)} would take {mib(nbytes)}, more than the "
                             f"{max_extract_bytes() >> 20} MiB a model may unpack (--max-extract-mb / "
                             "max_extract_mb= raises it)", file=gname, op=loc, tensor=name)
    storage = np.float64 if t.dtype.is_int and t.quant is not None else t.dtype.np_dtype()
    arr = np.broadcast_to(np.asarray(value, dtype=storage), (n,)).reshape(shape)
    if t.quant is not None:
        return _quantize_array(arr, t.dtype, t.quant)
    return np.array(arr, dtype=t.dtype.np_dtype())


def is_nnef_source(source: object) -> bool:
    """True for a path naming an NNEF model: a directory holding ``graph.nnef``, a ``.nnef`` file, or a
    ``.tgz`` / ``.tar.gz`` / ``.tar`` archive."""
    if not isinstance(source, (str, os.PathLike)):
        return False
    p = Path(source)
    if p.is_dir():
        return os.path.lexists(p / "graph.nnef")  # (whatever it is: the loader says what is wrong with it)
    return p.name.endswith((".nnef", ".tgz", ".tar.gz", ".tar"))
