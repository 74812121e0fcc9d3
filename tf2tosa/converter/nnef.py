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
  entry of every tensor is kept in ``graph.meta["quantization"][name]``.

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

Metadata (``graph.meta``)
-------------------------
``source_format`` ("nnef"), ``file``, ``nnef_version`` (e.g. "1.0"), ``extensions``,
``graph_name``, ``quantization``, ``expanded`` (the fragment names given to the parser),
``kept`` (compound operations left whole).

Errors
------
Everything wrong with the input raises :class:`~tf2tosa.errors.ModelLoadError`, one line
naming the file and, where there is one, the operation and tensor.
"""

from __future__ import annotations

import math
import mmap
import os
import re
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingExtraError, ModelLoadError
from ..ir.graph import Graph, Value
from ..ir.types import DType, QuantParams, TensorType

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
    item, packed most significant bit first).  Raises ModelLoadError naming the file.
    """
    p = Path(path)

    def fail(msg: str) -> ModelLoadError:
        return ModelLoadError(msg, file=str(p), tensor=tensor)

    raw: bytes | mmap.mmap
    try:
        # mapped, not read: the weights are views of the file (no copy), as a .tflite's are, and the serializer
        # releases their pages as it writes them out
        with p.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            mapped = size >= _MAP_MIN_BYTES and (budget is None or budget.take())
            raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if mapped else f.read()
    except FileNotFoundError:
        raise fail("missing tensor file") from None
    except (OSError, ValueError) as e:
        raise fail(f"cannot read tensor file: {getattr(e, 'strerror', None) or e}") from None
    if len(raw) < _HEADER:
        raise fail(f"tensor file is {len(raw)} bytes, shorter than its 128-byte header")
    if raw[0] != 0x4E or raw[1] != 0xEF:
        raise fail("not an NNEF tensor file (bad magic number)")
    version = (raw[2], raw[3])
    if version[0] != 1 or version[1] != 0:
        raise fail(f"unsupported tensor file version {version[0]}.{version[1]}")
    words = np.frombuffer(raw[4:_HEADER], dtype="<u4")
    data_length, rank = int(words[0]), int(words[1])
    if rank > _MAX_RANK:
        raise fail(f"tensor rank {rank} exceeds {_MAX_RANK}")
    shape = tuple(int(d) for d in words[2:2 + rank])
    bits, code = int(words[10]), int(words[11])
    signed_flag = int(words[12])
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
    body = len(raw) - _HEADER
    if body < data_length:
        raise fail(f"tensor file is short: {body} of {data_length} data bytes present")
    if body > data_length:
        raise fail(f"tensor file has {body - data_length} bytes after its data")
    if bits == 1:
        data = np.unpackbits(np.frombuffer(raw, dtype=np.uint8, offset=_HEADER))[:count].astype(np.bool_)
    else:
        data = np.frombuffer(raw, dtype=np.dtype(np_type).newbyteorder("<"), count=count, offset=_HEADER)
        data = data.astype(np_type, copy=False)  # a read-only view of the map (a copy only on a big-endian host)
    return DatTensor(data.reshape(shape), code, bits, version)


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


def load_nnef(path: str | os.PathLike[str], *, keep: Iterable[str] = ()) -> Graph:
    """Load an NNEF model (directory, ``.tgz``/``.tar`` archive or ``graph.nnef``) as ``nnef.*`` ops.

    ``keep``: standard compound operations (names in :data:`COMPOUND_OPS`) to leave
    unexpanded; everything else compound is expanded to primitives.
    """
    p = Path(path)
    if not p.exists():
        raise ModelLoadError("no such file or directory", file=str(p))
    if p.is_file() and (p.name.endswith((".tgz", ".tar.gz", ".tar")) or tarfile.is_tarfile(p)):
        with tempfile.TemporaryDirectory(prefix="tf2tosa-nnef-") as tmp:
            try:
                with tarfile.open(p) as tar:
                    _extract(tar, Path(tmp))
            except (tarfile.TarError, OSError, EOFError) as e:
                raise ModelLoadError(f"cannot unpack archive: {e}", file=str(p)) from None
            root = Path(tmp)
            if not (root / "graph.nnef").is_file():
                subs = [d for d in root.iterdir() if d.is_dir() and (d / "graph.nnef").is_file()]
                if len(subs) != 1:
                    raise ModelLoadError("archive holds no graph.nnef", file=str(p))
                root = subs[0]
            g = _load_dir(root / "graph.nnef", set(keep), display=p, inner=root)
        return g
    graph_file = p / "graph.nnef" if p.is_dir() else p
    if not graph_file.is_file():
        raise ModelLoadError("directory holds no graph.nnef", file=str(p))
    return _load_dir(graph_file, set(keep), display=p, inner=graph_file.parent)


def _extract(tar: tarfile.TarFile, dest: Path) -> None:
    """Unpack regular files and folders only, never outside ``dest``."""
    root = dest.resolve()
    for m in tar.getmembers():
        target = (dest / m.name).resolve()
        if root != target and root not in target.parents:
            raise tarfile.TarError(f"member {m.name!r} points outside the archive")
        if m.isdir():
            target.mkdir(parents=True, exist_ok=True)
        elif m.isfile():
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(m)
            if src is not None:
                target.write_bytes(src.read())


def _load_dir(graph_file: Path, keep: set[str], *, display: Path, inner: Path) -> Graph:
    nnef = _import_nnef()
    unknown_keep = keep - COMPOUND_OPS
    if unknown_keep:
        raise ValueError(f"keep names non-compound operations: {sorted(unknown_keep)}")

    def shown(f: Path) -> str:
        """A file name as the user knows it (inside the archive, if any)."""
        if display.is_dir() or display == graph_file:
            return str(f)
        return f"{display}:{f.relative_to(inner)}"

    gname = shown(graph_file)
    try:
        text = graph_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ModelLoadError(f"cannot read graph: {e}", file=gname) from None
    quant_path = graph_file.parent / "graph.quant"
    quant_text = quant_path.read_text(encoding="utf-8") if quant_path.is_file() else None
    qname = shown(quant_path) if quant_text is not None else None
    version, extensions, own = _header_info(text)
    lowered = sorted((COMPOUND_OPS - keep) | set(own))
    try:
        ng = nnef.parse_string(text, quant_text, lowered=lowered)
    except nnef.Error as e:
        raise _parse_error(e, gname, qname) from None

    shape_funcs = nnef.shapes._StandardShapeFuncs
    custom: dict[str, int] = {}
    for op in ng.operations:
        if op.name not in shape_funcs:
            custom[op.name] = custom.get(op.name, 0) + 1
    if custom:
        items = ", ".join(f"{k} x{n}" for k, n in sorted(custom.items()))
        raise ModelLoadError(f"operations without a definition (custom fragments): {items}", file=gname,
                             op=sorted(custom)[0])
    try:
        _infer_shapes(nnef, ng)
    except nnef.Error as e:
        raise ModelLoadError(f"shape inference failed: {e}", file=gname) from None
    return _build(ng, graph_file.parent, shown, gname, version, extensions, lowered, keep)


def _infer_shapes(nnef: Any, ng: Any) -> None:
    """``nnef.infer_shapes`` with ``sample`` fixed: nnef 1.0.10 wants its index shaped like the
    input, but the spec's ``sample`` (what ``max_pool`` expands to) takes the pooled index shape."""
    funcs = nnef.shapes._StandardShapeFuncs
    original = funcs["sample"]

    def sample_shape(input: list[int], index: list[int], size: list[int], **kw: Any) -> list[int]:
        pooled = nnef.shapes.pool_shape(input, size, kw.get("border"), kw.get("padding", []),
                                        kw.get("stride", []), kw.get("dilation", []))
        assert list(index) == list(pooled), f"'index' shape {index} does not match pooled shape {pooled}"
        return list(index)

    funcs["sample"] = sample_shape
    try:
        nnef.infer_shapes(ng)
    except AssertionError:
        # Raised only by the closing check that per-channel quantization arrays broadcast
        # (NNEF-style, leading dimensions) against their tensor, after every shape is set.
        # nnef-tools writes a [C] array for a [1, H, W, C] filter; _quant_type finds the axis.
        pass
    finally:
        funcs["sample"] = original


def _build(ng: Any, folder: Path, shown: Any, gname: str, version: str | None, extensions: list[str],
           lowered: list[str], keep: set[str]) -> Graph:
    graph = Graph(str(ng.name))
    graph.meta.update(source_format="nnef", file=gname, nnef_version=version, extensions=extensions,
                      graph_name=str(ng.name), expanded=lowered, kept=sorted(keep), quantization={})
    values: dict[str, Value] = {}
    literals: dict[tuple[str, Any], Value] = {}
    literal_name = "literal"
    while any(n == literal_name or n.startswith(literal_name + "_") for n in ng.tensors):
        literal_name = "_" + literal_name  # keep the document's names for its own tensors

    def base_type(name: str, op_name: str | None) -> tuple[TensorType, bool]:
        """The value type of a tensor; second: True when graph.quant is logarithmic."""
        t = ng.tensors[name]
        shape = tuple(int(d) for d in (t.shape or []))
        q = t.quantization
        if q:
            graph.meta["quantization"][name] = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                                                for k, v in q.items()}
        if t.dtype not in _NNEF_TYPES:
            raise ModelLoadError(f"unknown tensor type '{t.dtype}'", file=gname, op=op_name, tensor=name)
        dt = _NNEF_TYPES[t.dtype]
        if q:
            if dt is not DType.FP32:
                raise ModelLoadError(f"quantization of a {t.dtype} tensor", file=gname, op=op_name, tensor=name)
            qt = _quant_type(name, q, shape, shown(folder / "graph.quant"), op_name)
            if qt is None:
                return TensorType(shape, dt), True
            return TensorType(shape, qt[0], qt[1]), False
        return TensorType(shape, dt), False

    def log_quant(v: Value, name: str) -> Value:
        q = ng.tensors[name].quantization
        op = graph.add_op("nnef.logarithmic_quantize", [v], [v.type],
                          {"max": float(np.asarray(q["max"]).reshape(-1)[0]), "bits": int(q["bits"]),
                           "input_names": ["x"], "output_names": ["y"]},
                          [name + "_quantized"], location="QUANT:" + name)
        op.result.source = name
        return op.result

    def literal(value: Any) -> Value:
        if isinstance(value, bool):
            dt = DType.BOOL
        elif isinstance(value, int):
            dt = DType.INT32
        else:
            dt = DType.FP32
        key = (dt.value, value)
        if key not in literals:
            arr = np.asarray(value, dtype=dt.np_dtype())
            v = graph.add_op("nnef.const", [], [TensorType((), dt)], {"values": arr, "kind": "literal"},
                             [literal_name], location="LITERAL").result
            literals[key] = v
        return literals[key]

    budget = MapBudget()  # (the .dat files this load may keep mapped)
    for index, op in enumerate(ng.operations):
        name = op.name
        loc = f"{name}#{index}"
        if name == "external":
            out = op.outputs["output"]
            t, is_log = base_type(out, name)
            v = graph.add_input(out, t)
            v.source = out
            values[out] = log_quant(v, out) if is_log else v
            continue
        if name in ("variable", "constant"):
            out = op.outputs["output"]
            t, is_log = base_type(out, name)
            if name == "variable":
                label = str(op.attribs["label"])
                arr = _variable_data(folder, label, out, t, ng.tensors[out], shown, loc, budget)
                cattrs: dict[str, Any] = {"values": arr, "kind": "variable", "label": label}
                location = "VARIABLE:" + label
            else:
                arr = _constant_data(op, t, out, gname, loc)
                cattrs = {"values": arr, "kind": "constant"}
                location = f"CONSTANT#{index}"
            v = graph.add_op("nnef.const", [], [t], cattrs, [out], location=location).result
            v.source = out
            values[out] = log_quant(v, out) if is_log else v
            continue
        operands: list[Value] = []
        input_names: list[str] = []
        for pname, arg in op.inputs.items():
            items = arg if isinstance(arg, list) else [arg]
            for i, a in enumerate(items):
                label = f"{pname}[{i}]" if isinstance(arg, list) else pname
                if isinstance(a, str):
                    if a not in values:
                        raise ModelLoadError(f"tensor '{a}' is used before it is defined", file=gname,
                                             op=loc, tensor=a)
                    operands.append(values[a])
                else:
                    operands.append(literal(a))
                input_names.append(label)
        out_names: list[str] = []
        out_tensors: list[str] = []
        for pname, res in op.outputs.items():
            items = res if isinstance(res, list) else [res]
            for i, r in enumerate(items):
                out_names.append(f"{pname}[{i}]" if isinstance(res, list) else pname)
                out_tensors.append(r)
        typed = [base_type(r, loc) for r in out_tensors]
        attrs: dict[str, Any] = dict(op.attribs)
        attrs.update(input_names=input_names, output_names=out_names)
        if op.dtype is not None:
            attrs["dtype"] = str(op.dtype)
        if name == "update":
            attrs["side_effect"] = True
        new = graph.add_op(f"nnef.{name}", operands, [t for t, _ in typed], attrs, out_tensors, location=loc)
        for r, tname, (_, is_log) in zip(new.results, out_tensors, typed):
            r.source = tname
            values[tname] = log_quant(r, tname) if is_log else r

    externals = [v.source for v in graph.inputs]
    for name in ng.inputs:
        if name not in externals:
            raise ModelLoadError(f"graph input '{name}' is not an external tensor", file=gname, tensor=name)
    order = list(ng.inputs)
    graph.inputs.sort(key=lambda v: order.index(v.source) if v.source in order else len(order))
    graph.outputs = [values[o] for o in ng.outputs]
    return graph


def _variable_data(folder: Path, label: str, name: str, t: TensorType, nt: Any, shown: Any,
                   loc: str, budget: MapBudget | None = None) -> np.ndarray:
    """The data of a variable, checked against the graph's shape and type and quantized if needed."""
    f = folder / (label.lstrip("/") + ".dat")
    fname = shown(f)
    try:
        dat = read_dat(f, tensor=name, budget=budget)
    except ModelLoadError as e:  # name the variable operation too
        raise ModelLoadError(e.message, file=fname, op=loc, tensor=name) from None

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
        return (p / "graph.nnef").is_file()
    return p.name.endswith((".nnef", ".tgz", ".tar.gz", ".tar"))
