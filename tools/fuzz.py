"""Fuzz the readers, the converter, the executor and the CLI with mutated ``.tflite``, ``.tosa``, NNEF and Keras
``.keras`` models.

Four formats, run one after the other (``--formats``; by default ``tflite,tosa`` share half of ``-n``, NNEF 30%
and Keras 20% when all are asked for).  For ``.tflite`` and ``.tosa``, two kinds of mutation, half each:

* **structure-aware**: the seed is read once with a tracing reader that records every flatbuffer field the
  product's own reader touches (vtable entries, table/vector offsets, vector lengths, scalars such as tensor types,
  buffer / opcode / subgraph / tensor indices, shape dimensions, quantization scales and zero points, constant
  data words); a mutant rewrites one to three of those fields in place with values chosen for the field's role
  (boundary integers, off-by-one indices, huge or negative dimensions, NaN/inf/denormal scales, unknown enums).
* **bytes**: bit flips, random bytes, interesting integers at random positions, truncation, deletion,
  insertion and chunk duplication.

NNEF models (``tests/fuzz/corpus/*.nnef/``) are written as a folder, a ``.tgz`` or a ``.tar``; a structure-aware
mutant edits tokens of ``graph.nnef`` or ``graph.quant`` (numbers, labels that point outside the model, op names,
nesting up to 100,000 deep, huge shapes), a field of a ``.dat`` header (magic, version, data length, rank,
extents, bits, quantization) or the members (removed, renamed, a symlink to ``/dev/zero`` or outside, a hard
link, a FIFO, a device, two ``graph.nnef``, escaping or deeply nested names, 20,000 members, a ``.dat`` that
inflates to 256 MiB); a byte-level one mutates a member or the archive's own bytes.  Keras ``.keras`` zips
(``tests/fuzz/corpus/*.keras``) get ``config.json`` / ``metadata.json`` edits, renamed / duplicated / escaping /
20,000 members, a mutated or truncated weights file, a 256 MiB member of zeros, an 80 MiB ``config.json``, zip
header fields, or byte-level mutations of the zip.  Besides an uncaught exception, a crash or a hang, findings are
an ``inspect`` failure of more than one line (every format), and in the NNEF and Keras workers any file opened
outside the model (an audit hook sees every open: the sentinel ``outside/w.dat`` next to the model, ``/etc``)
and anything left in the worker's ``$TMPDIR``.  Each format's workers run under their own address-space limit
(RLIMIT_AS: 6 GiB for tflite/tosa, whose verify starts LiteRT, 2 GiB NNEF, 4 GiB Keras, which loads TensorFlow
once per worker, untimed) and time limit per input (5 s; Keras 15 s).

Each mutant goes through one target (``convert``, ``load``, ``inspect``, ``run`` or ``verify``; verify only on a
small share, it needs LiteRT) in a worker subprocess.  The parent gives each input 5 s: a worker that does not
answer in time is killed (a *hang*), one that dies is a *crash*; both are restarted.  In the worker, success and
any :class:`~tf2tosa.errors.ConversionError` subclass are the accepted outcomes; any other exception is a
*finding* (its traceback is kept).  Inputs that are not accepted are written to ``--findings``.

The workers run the product with three of its limits lowered so that every input can end within 5 s on a
busy 2-core machine; each limit is the product's own, set through its environment variable:
``TF2TOSA_MAX_TENSOR_BYTES`` = 4 MiB (default 1 GiB; the seeds' tensors are a few KB, so a mutant above it is
refused by the readers, which is itself under test), ``TF2TOSA_MAX_WHILE_ITERATIONS`` = 2000 (default 100000)
and ``TF2TOSA_MAX_RNN_STEPS`` = 256 (default 2048).  ``verify``'s LiteRT runs go to one persistent LiteRT child
per worker (the product's LiteRTWorker), so that interpreter start-up is not counted against each input.

``python tools/fuzz.py -n 10000 --seed 1 --jobs 2 --formats all`` (``make fuzz N=10000``).  Exit status 1 when
anything was found.  Everything is seeded: input ``i`` of seed ``s`` is the same mutant on every run.  The summary
counts inputs, outcomes, crashes, hangs, findings and the slowest input per format (``by_format``).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import os
import random
import re
import select
import shutil
import struct
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
TIMEOUT = 5.0
#: share of tflite inputs sent to ``verify`` (LiteRT; slow)
VERIFY_SHARE = 0.05
#: address-space cap of a worker (bytes): an allocation the product failed to refuse ends as MemoryError
WORKER_MEMORY = 6 << 30
#: per group of formats: the worker's address-space cap and the time limit of one input
GROUP_MEMORY = {"flat": WORKER_MEMORY, "nnef": 2 << 30, "keras": 4 << 30}
GROUP_TIMEOUT = {"flat": TIMEOUT, "nnef": TIMEOUT, "keras": 15.0}
#: the formats and the group (worker kind) each runs in; shares of -n when several groups run
FORMATS = ("tflite", "tosa", "nnef", "keras")
GROUP_OF = {"tflite": "flat", "tosa": "flat", "nnef": "nnef", "keras": "keras"}
GROUP_SHARE = {"flat": 0.5, "nnef": 0.3, "keras": 0.2}

TFLITE_TARGETS = ("convert", "inspect", "run")
TOSA_TARGETS = ("load", "inspect", "run")


# ------------------------------------------------------------------------------------------- field tracing
@dataclasses.dataclass(frozen=True)
class Field:
    """One place in a flatbuffer that the reader interprets."""

    pos: int
    size: int  # bytes: 1, 2, 4 or 8
    role: str  # vtable, offset, length, scalar, elem, data
    name: str  # the accessor that read it (e.g. ``Type``, ``ShapeAsNumpy``), for value choice
    is_float: bool = False


def _tflite_fields(data: bytes) -> list[Field]:
    """Every field :func:`tf2tosa.converter.tflite.load_tflite` reads from ``data``: traced through the loader's
    field accessors (``_Loader.get/sub/vec/elem/bytes_of``, each given its tflite_schema entry) and the options
    decoder, named as the schema's accessors are (``Type``, ``ShapeAsNumpy`` …)."""
    from tf2tosa.converter import tflite as fe
    from tf2tosa.converter import tflite_options as topt
    from tf2tosa.converter.tflite_reader import Table
    from tf2tosa.converter.tflite_schema import OPTIONS_FIELDS

    def camel(snake: str) -> str:
        return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))

    seen: dict[tuple[int, int], Field] = {}

    def add(pos: int, size: int, role: str, name: str, is_float: bool = False) -> None:
        if 0 <= pos and pos + size <= len(data):
            seen.setdefault((pos, size), Field(pos, size, role, name, is_float))

    def slot(tab: Any, voff: int) -> int:
        """The field's offset in its table, recording the soffset and vtable entries read to find it."""
        try:
            add(tab.pos, 4, "offset", "Offset")  # the table's soffset to its vtable
            vt = tab.pos - struct.unpack_from("<i", data, tab.pos)[0]
            add(vt, 2, "vtable", "Offset")
            add(vt + voff, 2, "vtable", "Offset")
            return int(tab.offset(voff))
        except (struct.error, ValueError, IndexError, OverflowError):
            return 0

    def trace_scalar(tab: Any, field: Any, name: str) -> None:
        o = slot(tab, field[0])
        if o:
            add(tab.pos + o, struct.calcsize("<" + field[1]), "scalar", name, field[1] in "fd")

    def trace_vec(tab: Any, field: Any, name: str) -> None:
        o = slot(tab, field[0])
        if not o:
            return
        add(tab.pos + o, 4, "offset", "vector")
        try:
            start, n = tab.vector(field[0])
        except (struct.error, ValueError, IndexError, OverflowError):
            return
        add(start - 4, 4, "length", name + "Length")
        kind = field[1][1:]
        if kind in ("t", "s"):
            return
        w = struct.calcsize("<" + kind)
        if name == "Data":  # constant data: 4-byte words
            for k in range(0, min(n, 256) // 4 * 4, 4):
                add(start + k, 4, "data", "DataAsNumpy")
        else:
            for k in range(min(n, 16)):
                add(start + k * w, w, "elem", name + "AsNumpy", kind in "fd")

    L = fe._Loader
    orig = {k: L.__dict__[k] for k in ("get", "sub", "vec", "elem", "bytes_of")}
    orig_decode = topt.decode_options

    def get(tab: Any, field: Any) -> Any:
        trace_scalar(tab, field, field.name)
        return orig["get"].__func__(tab, field)

    def sub(tab: Any, field: Any) -> Any:
        o = slot(tab, field[0])
        if o:
            add(tab.pos + o, 4, "offset", "indirect")
        return orig["sub"].__func__(tab, field)

    def vec(tab: Any, field: Any) -> Any:
        trace_vec(tab, field, field.name)
        return orig["vec"].__func__(tab, field)

    def elem(tab: Any, field: Any, j: int) -> Any:
        trace_vec(tab, field, field.name)
        v = tab.vector(field[0])
        if v is not None:
            add(v[0] + 4 * j, 4, "offset", "indirect")
        return orig["elem"].__func__(tab, field, j)

    def bytes_of(tab: Any, field: Any) -> Any:
        o = slot(tab, field[0])
        if o:
            add(tab.pos + o, 4, "offset", "string")
        return orig["bytes_of"].__func__(tab, field)

    def decode_options(cls_name: str, buf: Any, pos: int) -> Any:
        tab = Table(buf, pos)
        for fname, voff, kind, default in OPTIONS_FIELDS.get(cls_name, ()):
            if kind[0] == "[":
                trace_vec(tab, (voff, kind, default), camel(fname))
            elif kind == "s":
                o = slot(tab, voff)
                if o:
                    add(tab.pos + o, 4, "offset", "string")
            else:
                trace_scalar(tab, (voff, kind, default), camel(fname))
        return orig_decode(cls_name, buf, pos)

    patches = {"get": get, "sub": sub, "vec": vec, "elem": elem, "bytes_of": bytes_of}
    try:
        for k, f in patches.items():
            setattr(L, k, staticmethod(f))
        topt.decode_options = decode_options  # type: ignore[assignment]
        L.bulk = False  # (every tensor field through the accessors above)
        fe.load_tflite(data)
    finally:
        L.bulk = True
        for k, f in orig.items():
            setattr(L, k, f)
        topt.decode_options = orig_decode  # type: ignore[assignment]
    return sorted(seen.values(), key=lambda f: f.pos)


def _tosa_fields(data: bytes) -> list[Field]:
    """Every field :func:`tf2tosa.serializer.tosa_reader.from_bytes` reads from ``data``."""
    from tf2tosa.serializer import tosa_reader

    seen: dict[tuple[int, int], Field] = {}
    n = len(data)

    def add(pos: int, size: int, role: str, name: str, is_float: bool = False) -> None:
        if 0 <= pos and pos + size <= n:
            seen.setdefault((pos, size), Field(pos, size, role, name, is_float))

    base = tosa_reader._Buf

    class Tracing(base):  # type: ignore[valid-type,misc]
        def u8(self, pos: int) -> int:
            add(pos, 1, "scalar", sys._getframe(1).f_code.co_name)
            return super().u8(pos)  # type: ignore[no-any-return]

        def u16(self, pos: int) -> int:
            add(pos, 2, "vtable", "vtable")
            return super().u16(pos)  # type: ignore[no-any-return]

        def u32(self, pos: int) -> int:
            caller = sys._getframe(1).f_code.co_name
            role = {"deref": "offset", "vector": "length", "_string_at": "length"}.get(caller, "scalar")
            add(pos, 4, role, caller)
            return super().u32(pos)  # type: ignore[no-any-return]

        def i32(self, pos: int) -> int:
            caller = sys._getframe(1).f_code.co_name
            add(pos, 4, "offset" if caller in ("touch", "field") else "scalar", caller)
            return super().i32(pos)  # type: ignore[no-any-return]

        def i32s(self, table: int, slot: int) -> list[int]:
            start, count = self.vector(table, slot, 4)
            for k in range(min(count, 16)):
                add(start + 4 * k, 4, "elem", "ShapeAsNumpy" if slot == tosa_reader.T_SHAPE else "i32s")
            return super().i32s(table, slot)  # type: ignore[no-any-return]

        def bytes_(self, table: int, slot: int) -> bytes:
            start, count = self.vector(table, slot, 1)
            for k in range(0, min(count, 256) // 4 * 4, 4):
                add(start + k, 4, "data", "DataAsNumpy")
            return super().bytes_(table, slot)  # type: ignore[no-any-return]

    try:
        tosa_reader._Buf = Tracing  # type: ignore[misc]
        tosa_reader.from_bytes(data)
    finally:
        tosa_reader._Buf = base  # type: ignore[misc]
    return sorted(seen.values(), key=lambda f: f.pos)


def fields_of(data: bytes, kind: str) -> list[Field]:
    return _tflite_fields(data) if kind == "tflite" else _tosa_fields(data)


# ------------------------------------------------------------------------------------------- mutation
_INTS = [0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 100, 127, 128, 255, 256, 1000, 1024, 4095, 4096, 32767,
         32768, 65535, 65536, 1 << 20, 1 << 24, (1 << 31) - 1]
_DIMS = [0, 1, 2, 3, 5, 7, 64, 1000, 1 << 13, 1 << 16, 1 << 20, 1 << 31 - 1, -1, -2, -(1 << 31)]
_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-45, 1e-30, 1e-10, 1e10, 3.4e38, float("inf"), float("-inf"), float("nan")]
_FMT = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}
_SFMT = {1: "<b", 2: "<h", 4: "<i", 8: "<q"}


def _write_int(buf: bytearray, pos: int, size: int, value: int) -> None:
    value &= (1 << (8 * size)) - 1
    struct.pack_into(_FMT[size], buf, pos, value)


def _field_value(rng: random.Random, f: Field, buf: bytearray, size: int) -> int | float:
    old = struct.unpack_from(_SFMT[f.size], buf, f.pos)[0]
    if f.is_float:
        return rng.choice(_FLOATS + [rng.uniform(-10, 10)])
    r = rng.random()
    if f.role == "length":
        return rng.choice([0, 1, max(old - 1, 0), old + 1, old * 2, 7, 1 << 16, (1 << 31) - 1, (1 << 32) - 1])
    if f.role == "offset":
        return rng.choice([0, 4, old + 4, old - 4, old + rng.randint(-64, 64), size, size + 8, (1 << 31) - 1,
                           rng.randrange(max(size, 1))])
    if f.role == "vtable":
        return rng.choice([0, 2, 4, old + 2, old - 2, old + 4, 0xFFFF, rng.randrange(0x100)])
    if "Shape" in f.name or f.role == "data":
        return rng.choice(_DIMS) if r < 0.8 else old + rng.choice([-1, 1])
    if f.size == 1 or "Type" in f.name or "Code" in f.name or "Format" in f.name:
        return rng.choice([old + 1, old - 1, rng.randrange(256), 0, 255, rng.randrange(64)])
    if r < 0.4:  # indices and counts: off by one, absent, out of range
        return old + rng.choice([-1, 1, 2, -2])
    if r < 0.6:
        return rng.choice([-1, -2, 0])
    return rng.choice(_INTS) * rng.choice([1, -1])


def mutate_structured(rng: random.Random, data: bytes, fields: list[Field]) -> tuple[bytes, str]:
    buf = bytearray(data)
    what = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        # each role equally often (offsets would otherwise dominate), then a field of that role
        role = rng.choice(sorted({f.role for f in fields}))
        f = rng.choice([f for f in fields if f.role == role])
        v = _field_value(rng, f, buf, len(data))
        if f.is_float:
            struct.pack_into("<f" if f.size == 4 else "<d", buf, f.pos, v)
        else:
            _write_int(buf, f.pos, f.size, int(v))
        what.append(f"{f.role}:{f.name}@{f.pos}={v}")
    return bytes(buf), "struct " + " ".join(what)


def mutate_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    buf = bytearray(data)
    what = []
    for _ in range(rng.choice([1, 1, 2, 4, 8])):
        n = len(buf)
        if n < 16:
            break
        k = rng.randrange(7)
        p = rng.randrange(n)
        if k == 0:
            buf[p] ^= 1 << rng.randrange(8)
            what.append(f"flip@{p}")
        elif k == 1:
            buf[p] = rng.randrange(256)
            what.append(f"byte@{p}")
        elif k == 2 and p + 4 <= n:
            _write_int(buf, p, 4, rng.choice(_INTS) * rng.choice([1, -1]))
            what.append(f"int@{p}")
        elif k == 3:
            cut = rng.randrange(8, n)
            del buf[cut:]
            what.append(f"truncate@{cut}")
        elif k == 4:
            m = rng.randint(1, 16)
            del buf[p:p + m]
            what.append(f"delete@{p}+{m}")
        elif k == 5:
            m = rng.randint(1, 16)
            buf[p:p] = bytes(rng.randrange(256) for _ in range(m))
            what.append(f"insert@{p}+{m}")
        else:
            m = rng.randint(4, 64)
            q = rng.randrange(n)
            buf[q:q] = buf[p:p + m]
            what.append(f"dup@{p}+{m}->{q}")
    return bytes(buf), "bytes " + " ".join(what)


@dataclasses.dataclass
class Seed:
    path: Path
    kind: str  # tflite | tosa | nnef | keras
    data: bytes
    fields: list[Field]
    #: an NNEF folder's files, a .keras zip's members (name -> bytes, in order)
    members: dict[str, bytes] = dataclasses.field(default_factory=dict)


def load_corpus(folder: Path = CORPUS, formats: tuple[str, ...] = ("tflite", "tosa")) -> list[Seed]:
    """The seeds of ``formats`` in ``folder``: ``*.tflite``, ``*.tosa``, ``*.nnef/`` folders, ``*.keras`` zips."""
    import zipfile

    seeds = []
    for p in sorted(folder.iterdir()):
        kind = p.suffix.lstrip(".")
        if kind not in formats:
            continue
        if kind == "nnef":
            members = {f.name: f.read_bytes() for f in sorted(p.iterdir()) if f.is_file()}
            seeds.append(Seed(p, kind, b"", [], members))
        elif kind == "keras":
            data = p.read_bytes()
            with zipfile.ZipFile(p) as z:
                members = {n: z.read(n) for n in z.namelist()}
            seeds.append(Seed(p, kind, data, [], members))
        else:
            data = p.read_bytes()
            seeds.append(Seed(p, kind, data, fields_of(data, kind)))
    if not seeds:
        raise SystemExit(f"no {'/'.join(formats)} seeds in {folder}")
    return seeds


@dataclasses.dataclass
class Case:
    index: int
    seed: str
    kind: str  # tflite | tosa | nnef-dir | nnef-tgz | nnef-tar | keras
    mode: str  # struct | bytes
    target: str
    how: str
    data: bytes

    @property
    def format(self) -> str:
        return self.kind.split("-")[0]


def make_case(seeds: list[Seed], run_seed: int, i: int, verify_share: float = VERIFY_SHARE) -> Case:
    """Mutant ``i`` of run ``run_seed``: even ``i`` structure-aware, odd ``i`` byte-level."""
    rng = random.Random(f"{run_seed}:{i}")
    s = rng.choice(seeds)
    if i % 2 == 0:
        data, how = mutate_structured(rng, s.data, s.fields)
        mode = "struct"
    else:
        data, how = mutate_bytes(rng, s.data)
        mode = "bytes"
    if s.kind == "tflite":
        target = "verify" if rng.random() < verify_share else rng.choice(TFLITE_TARGETS)
    else:
        target = rng.choice(TOSA_TARGETS)
    return Case(i, s.path.name, s.kind, mode, target, how, data)


# ------------------------------------------------------------------------------------------- NNEF mutation
#: where a mutated NNEF label points: outside the model, at the worker's sentinel file (``outside/w.dat``), at a
#: system file, nowhere; a read of the sentinel or of /etc is a finding (the worker's audit hook sees every open)
_LABELS = ["'../../outside/w'", "'../outside/w'", "'../../../outside/w'", "'variable1/../../../outside/w'",
           "'/etc/hostname'", "'../../../../../../../../etc/hostname'", "''", "'.'", "'..'", "'/'",
           "'variable1.dat'", "'dir/variable1'", "'" + "x" * 300 + "'", "'a\\b'", "'graph'", "'graph.nnef'"]
_NUMBERS = ["0", "-1", "1", "2", "3", "7", "65536", "1000000", "2147483647", "2147483648", "4294967296",
            "-2147483648", "99999999999999999999", "1e38", "1e999", "-0.0", "0.5", "nan", "1.5"]
_IDENTS = ["add", "sub", "mul", "div", "conv", "deconv", "reshape", "transpose", "squeeze", "unsqueeze", "concat",
           "split", "slice", "pad", "matmul", "linear", "softmax", "max_pool", "avg_pool", "box", "external",
           "variable", "constant", "tile", "select", "clamp", "relu", "sigmoid", "tanh", "gt", "argmax_reduce",
           "sum_reduce", "copy", "scalar", "integer", "logical", "tensor", "graph", "fragment", "version",
           "extension", "shape", "label", "axes", "size", "stride", "dilation", "padding", "border", "groups",
           "true", "false", "undefined_op"]
_TOKEN = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|[A-Za-z_][A-Za-z0-9_]*|\d+\.\d*(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?"
                    r"|->|\S")
#: NNEF tensor-file header fields (spec 3.2.1 / the Khronos file format): offset, name
_DAT_FIELDS = [(0, "magic"), (2, "version"), (4, "data_length"), (8, "rank")] + [
    (12 + 4 * k, f"extent{k}") for k in range(8)] + [(44, "bits"), (48, "quant_code")] + [
    (52 + 4 * k, f"quant_param{k}") for k in range(8)] + [(84, "reserved")]


def _nest_depth(rng: random.Random) -> int:
    return rng.choice([16, 64, 200, 1000, 1000, 5000, 20000, 100000])


def mutate_nnef_text(rng: random.Random, text: str) -> tuple[str, str]:
    """One to three token-level edits of ``graph.nnef`` / ``graph.quant`` text: numbers, labels, identifiers,
    deleted / duplicated / swapped / inserted tokens, deep nesting, huge shapes, duplicated statements."""
    what = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        toks = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
        if not toks:
            break
        k = rng.choice(["num", "num", "label", "ident", "delete", "dup", "insert", "swap", "nest", "shape",
                        "stmt", "cut", "version"])
        if k == "num":
            nums = [t for t in toks if text[t[0]].isdigit()]
            if nums:
                a, b = rng.choice(nums)
                v = rng.choice(_NUMBERS)
                text = text[:a] + v + text[b:]
                what.append(f"num@{a}={v}")
        elif k == "label":
            strs = [t for t in toks if text[t[0]] in "'\""]
            if strs:
                a, b = rng.choice(strs)
                v = rng.choice(_LABELS + [text[c:d] for c, d in strs])
                text = text[:a] + v + text[b:]
                what.append(f"label@{a}={v[:40]}")
        elif k == "ident":
            ids = [t for t in toks if text[t[0]].isalpha() or text[t[0]] == "_"]
            if ids:
                a, b = rng.choice(ids)
                v = rng.choice(_IDENTS + [text[c:d] for c, d in ids])
                text = text[:a] + v + text[b:]
                what.append(f"ident@{a}={v}")
        elif k == "delete":
            a, b = rng.choice(toks)
            text = text[:a] + text[b:]
            what.append(f"del@{a}")
        elif k == "dup":
            a, b = rng.choice(toks)
            text = text[:b] + " " + text[a:b] + text[b:]
            what.append(f"dup@{a}")
        elif k == "insert":
            a, _ = rng.choice(toks)
            v = rng.choice("()[]{},;:=<>-+*/'\"")
            text = text[:a] + v + text[a:]
            what.append(f"ins@{a}={v}")
        elif k == "swap" and len(toks) > 1:
            (a, b), (c, d) = sorted(rng.sample(toks, 2))
            text = text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]
            what.append(f"swap@{a},{c}")
        elif k == "nest":
            stmts = [m for m in re.finditer(r"(?m)^(\s*[A-Za-z_]\w*\s*=\s*)([^;\n]+);", text)]
            if stmts:
                m = rng.choice(stmts)
                d = _nest_depth(rng)
                style = rng.choice(["call", "parens", "list"])
                expr = m.group(2)
                new = {"call": "add(" * d + expr + ", 0.0)" * d, "parens": "(" * d + expr + ")" * d,
                       "list": "[" * d + expr + "]" * d}[style]
                text = text[:m.start(2)] + new + text[m.end(2):]
                what.append(f"nest-{style}@{m.start(2)}x{d}")
        elif k == "shape":
            shapes = list(re.finditer(r"shape = \[[^\]]*\]", text))
            if shapes:
                m = rng.choice(shapes)
                v = rng.choice(["[1000000, 1000000]", "[2147483647, 2]", "[0, 3]", "[-1, 3]", "[]", "[1]",
                                "[65536, 65536, 65536]", "[" + ", ".join(["1"] * 40) + "]"])
                text = text[:m.start()] + "shape = " + v + text[m.end():]
                what.append(f"shape@{m.start()}={v[:30]}")
        elif k == "stmt":
            stmts = list(re.finditer(r"(?m)^\s*[A-Za-z_\"].*;\s*$", text))
            if stmts:
                m = rng.choice(stmts)
                text = text[:m.end()] + "\n" + m.group(0) + text[m.end():]
                what.append(f"stmt-dup@{m.start()}")
        elif k == "cut":
            cut = rng.randrange(len(text))
            text = text[:cut]
            what.append(f"cut@{cut}")
        elif k == "version":
            v = rng.choice(["version 2.0;", "version 1.0.0;", "version ;", "", "version 1.1;"])
            text = re.sub(r"version [^;]*;", v, text, count=1)
            what.append(f"version={v}")
    return text, " ".join(what) or "none"


def mutate_dat(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A tensor file with a header field rewritten, or its data cut or extended."""
    buf = bytearray(data)
    r = rng.random()
    if r < 0.6 and len(buf) >= 128:
        off, name = rng.choice(_DAT_FIELDS)
        if name == "magic":
            buf[0:2] = bytes(rng.choice([b"\x00\x00", b"\x4e\xee", b"\xef\x4e"]))
            return bytes(buf), "dat-magic"
        if name == "version":
            buf[2:4] = bytes([rng.randrange(256), rng.randrange(256)])
            return bytes(buf), "dat-version"
        old = struct.unpack_from("<I", buf, off)[0]
        v = rng.choice([0, 1, 2, 3, 8, 9, 16, 32, 64, old + 1, old - 1, old * 2, 1 << 16, 1 << 24, (1 << 31) - 1,
                        1 << 31, (1 << 32) - 1])
        _write_int(buf, off, 4, v)
        return bytes(buf), f"dat-{name}={v}"
    if r < 0.75:
        cut = rng.randrange(len(buf) + 1)
        return bytes(buf[:cut]), f"dat-cut@{cut}"
    if r < 0.85:
        extra = rng.choice([1, 4, 100, 4096])
        return bytes(buf) + bytes(extra), f"dat-extend+{extra}"
    if r < 0.92 and len(buf) >= 128:  # a header that declares far more data than present
        _write_int(buf, 4, 4, (1 << 31) - 1)
        _write_int(buf, 12, 4, 65536)
        _write_int(buf, 16, 4, 32768)
        return bytes(buf), "dat-declares-huge"
    return mutate_bytes(rng, data)[0], "dat-bytes"


#: one member of a materialized NNEF model: name, type (file, symlink, hardlink, fifo, chrdev, dir), data or target
Member = tuple[str, str, bytes]


def _nnef_members(seed: Seed) -> list[Member]:
    return [(name, "file", data) for name, data in seed.members.items()]


def mutate_nnef_members(rng: random.Random, members: list[Member], archive: bool) -> tuple[list[Member], str]:
    """Member-level edits: a member removed, renamed, added, replaced by a link, a FIFO, a device or a folder;
    in an archive also duplicated names, escaping names, nesting, many members."""
    ms = list(members)
    dats = [i for i, m in enumerate(ms) if m[0].endswith(".dat")]
    k = rng.choice(["remove", "rename", "add", "symlink", "hardlink", "fifo", "dir"]
                   + (["chrdev", "dup-graph", "escape", "nest", "two-tops", "many", "dup-dat"] if archive else []))
    pick = rng.choice(dats) if dats else rng.randrange(len(ms))
    name = ms[pick][0]
    if k == "remove":
        victim = rng.choice([pick, next((i for i, m in enumerate(ms) if m[0] == "graph.quant"), pick)])
        what = ms[victim][0]
        del ms[victim]
        return ms, f"remove {what}"
    if k == "rename":
        new = rng.choice(["x.dat", name.upper(), name + ".bak", "variable99.dat", "Graph.nnef"])
        ms[pick] = (new, ms[pick][1], ms[pick][2])
        return ms, f"rename {name}->{new}"
    if k == "add":
        ms.append((rng.choice(["junk.dat", "graph.quant", "notes.txt", "variable0.dat"]), "file",
                   bytes(rng.randrange(256) for _ in range(rng.choice([0, 3, 200])))))
        return ms, f"add {ms[-1][0]}"
    if k == "symlink":
        target = rng.choice(["/dev/zero", "../../outside/w.dat", "/etc/hostname", "variable1.dat", "missing.dat",
                             name, "../" * 12 + "etc/hostname"])
        ms[pick] = (name, "symlink", target.encode())
        return ms, f"symlink {name}->{target}"
    if k == "hardlink":
        other = rng.choice([m[0] for m in ms if m[0] != name and m[1] == "file"] or ["graph.nnef"])
        ms[pick] = (name, "hardlink", other.encode())
        return ms, f"hardlink {name}->{other}"
    if k == "fifo":
        ms[pick] = (name, "fifo", b"")
        return ms, f"fifo {name}"
    if k == "dir":
        victim = rng.choice([pick, 0])
        ms[victim] = (ms[victim][0], "dir", b"")
        return ms, f"dir {ms[victim][0]}"
    if k == "chrdev":  # a device member (/dev/zero's numbers): never created on disk by a safe extractor
        ms[pick] = (name, "chrdev", b"1,5")
        return ms, f"chrdev {name}"
    if k == "dup-graph":
        g = next((m for m in ms if m[0] == "graph.nnef"), None)
        if g is not None:
            ms.append(("graph.nnef", "file", g[2].replace(b"graph ", b"graph other_", 1)))
        return ms, "duplicate graph.nnef"
    if k == "dup-dat":
        ms.append((name, "file", bytes(64)))
        return ms, f"duplicate {name}"
    if k == "escape":
        new = rng.choice(["../" + name, "/tmp/" + name, "a/../../" + name, "./" + name])
        ms[pick] = (new, ms[pick][1], ms[pick][2])
        return ms, f"escape {new}"
    if k == "nest":
        depth = rng.choice([1, 1, 2, 50, 200])
        prefix = "".join(f"d{i}/" for i in range(depth))
        return [(prefix + m[0], m[1], m[2]) for m in ms], f"nest x{depth}"
    if k == "two-tops":
        return [("a/" + m[0], m[1], m[2]) for m in ms] + [("b/" + m[0], m[1], m[2]) for m in ms], "two tops"
    n = rng.choice([2000, 20000])
    return ms + [(f"junk{i}.dat", "file", b"") for i in range(n)], f"many +{n}"


def tar_bytes(members: list[Member], gz: bool) -> bytes:
    import gzip
    import io
    import tarfile

    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, kind, data in members:
            ti = tarfile.TarInfo(name)
            ti.mtime = 0
            if kind == "file":
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
                continue
            if kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, data.decode()
            elif kind == "hardlink":
                ti.type, ti.linkname = tarfile.LNKTYPE, data.decode()
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
            elif kind == "chrdev":
                ti.type = tarfile.CHRTYPE
                ti.devmajor, ti.devminor = (int(x) for x in data.decode().split(","))
            else:
                ti.type = tarfile.DIRTYPE
            tf.addfile(ti)
    raw = bio.getvalue()
    return gzip.compress(raw, mtime=0) if gz else raw


_BOMBS: dict[str, bytes] = {}


def _nnef_bomb(seed: Seed) -> bytes:
    """The seed's ``.tgz`` with its largest .dat padded with zeros to 256 MiB (inflates from ~256 KB): the
    extraction caps are under test.  Built once per seed."""
    key = seed.path.name
    if key not in _BOMBS:
        import gzip
        import io
        import tarfile

        big = max((n for n in seed.members if n.endswith(".dat")), key=lambda n: len(seed.members[n]))
        bio = io.BytesIO()
        with tarfile.open(fileobj=bio, mode="w", format=tarfile.GNU_FORMAT) as tf:
            for name, data in seed.members.items():
                ti = tarfile.TarInfo(name)
                ti.mtime = 0
                if name == big:
                    size = 256 << 20
                    ti.size = size
                    tf.addfile(ti, _ZeroPadded(data, size))
                else:
                    ti.size = len(data)
                    tf.addfile(ti, io.BytesIO(data))
        _BOMBS[key] = gzip.compress(bio.getvalue(), compresslevel=1, mtime=0)
    return _BOMBS[key]


class _ZeroPadded:
    """A file object: ``head`` then zeros up to ``size`` bytes."""

    def __init__(self, head: bytes, size: int) -> None:
        self.head, self.size, self.pos = head, size, 0

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.pos if n < 0 else min(n, self.size - self.pos)
        out = bytearray(n)
        if self.pos < len(self.head):
            chunk = self.head[self.pos:self.pos + n]
            out[:len(chunk)] = chunk
        self.pos += n
        return bytes(out)


def make_nnef_case(seeds: list[Seed], run_seed: int, i: int) -> Case:
    """NNEF mutant ``i``: a folder (``nnef-dir``), a ``.tgz`` or a ``.tar``; even ``i`` structure-aware (the graph
    text, ``graph.quant``, a ``.dat`` header, the members), odd ``i`` byte-level (a member, or the archive)."""
    rng = random.Random(f"{run_seed}:nnef:{i}")
    s = rng.choice(seeds)
    container = rng.choices(["nnef-dir", "nnef-tgz", "nnef-tar"], [40, 45, 15])[0]
    archive = container != "nnef-dir"
    members = _nnef_members(s)
    target = rng.choices(["convert", "run", "inspect"], [70, 20, 10])[0]
    if i % 2 == 0:
        mode = "struct"
        r = rng.random()
        if r < 0.35:
            j = next(k for k, m in enumerate(members) if m[0] == "graph.nnef")
            text, how = mutate_nnef_text(rng, members[j][2].decode())
            members[j] = ("graph.nnef", "file", text.encode())
            how = "graph " + how
        elif r < 0.45 and any(m[0] == "graph.quant" for m in members):
            j = next(k for k, m in enumerate(members) if m[0] == "graph.quant")
            text, how = mutate_nnef_text(rng, members[j][2].decode())
            members[j] = ("graph.quant", "file", text.encode())
            how = "quant " + how
        elif r < 0.7:
            j = rng.choice([k for k, m in enumerate(members) if m[0].endswith(".dat")])
            data, how = mutate_dat(rng, members[j][2])
            members[j] = (members[j][0], "file", data)
            how = f"{members[j][0]} {how}"
        elif r < 0.97 or not archive:
            members, how = mutate_nnef_members(rng, members, archive)
        else:
            if container == "nnef-tgz":
                return Case(i, s.path.name, container, mode, target, "bomb 256 MiB .dat", _nnef_bomb(s))
            members, how = mutate_nnef_members(rng, members, archive)
    else:
        mode = "bytes"
        if archive and rng.random() < 0.5:  # the archive's own bytes: gzip or tar structure, truncation
            data, how = mutate_bytes(rng, tar_bytes(members, container == "nnef-tgz"))
            if rng.random() < 0.1:
                data, how = rng.choice([b"", b"not a tar", bytes(rng.randrange(256) for _ in range(300))]), "not-a-tar"
            return Case(i, s.path.name, container, mode, target, "archive " + how, data)
        j = rng.randrange(len(members))
        data, how = mutate_bytes(rng, members[j][2]) if len(members[j][2]) >= 16 else (members[j][2], "")
        members[j] = (members[j][0], "file", data)
        how = f"{members[j][0]} {how}"
    if archive:
        return Case(i, s.path.name, container, mode, target, how, tar_bytes(members, container == "nnef-tgz"))
    return Case(i, s.path.name, container, mode, target, how, encode_members(members))


def encode_members(members: list[Member]) -> bytes:
    """A folder's members as bytes for the worker (it materializes them; see :func:`materialize`)."""
    import base64

    return json.dumps([[n, k, base64.b64encode(d).decode()] for n, k, d in members]).encode()


def materialize(data: bytes, dest: Path) -> None:
    """Create the NNEF folder ``dest`` from :func:`encode_members` bytes: files, symlinks, hard links, FIFOs and
    folders as listed (names that would leave ``dest`` are skipped: the harness never writes outside it)."""
    import base64

    dest.mkdir(parents=True)
    for name, kind, b64 in json.loads(data):
        if name.startswith("/") or ".." in name.split("/"):
            continue
        p = dest / name
        p.parent.mkdir(parents=True, exist_ok=True)
        raw = base64.b64decode(b64)
        try:
            if kind == "file":
                p.write_bytes(raw)
            elif kind == "symlink":
                os.symlink(raw.decode(), p)
            elif kind == "hardlink":
                os.link(dest / raw.decode(), p)
            elif kind == "fifo":
                os.mkfifo(p)
            elif kind == "dir":
                p.mkdir()
        except OSError:
            pass


# ------------------------------------------------------------------------------------------- Keras mutation
_KERAS_STRINGS = ["Lambda", "", "os", "builtins", "keras.layers", "__import__", "x" * 1000, "float64", "int8",
                  "bool", "string", "None", "Functional", "Sequential", "TFOpLambda", "keras.src.ops", "exec",
                  "InputLayer", "Dense", "Conv2D", "../config.json"]


def _json_paths(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _json_paths(v, path + (k,))
    elif isinstance(obj, list):
        for k, v in enumerate(obj):
            yield from _json_paths(v, path + (k,))


def _json_set(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = root
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return root


def mutate_keras_config(rng: random.Random, config: Any) -> tuple[Any, str]:
    """One to three edits of a Keras ``config.json``: numbers, strings, keys, lists, deep nesting, huge shapes."""
    import copy

    cfg = copy.deepcopy(config)
    what = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        paths = list(_json_paths(cfg))
        path, node = rng.choice(paths)
        where = "/".join(str(p) for p in path)[-60:]
        r = rng.random()
        if isinstance(node, bool) or node is None:
            v: Any = rng.choice([True, False, None, 0, "true", []])
        elif isinstance(node, (int, float)):
            v = rng.choice([0, -1, 1, 2, 7, 1 << 16, (1 << 31) - 1, 1 << 31, 1 << 62, -(1 << 31), 1e308, 0.5,
                            float("nan"), "3", None])
        elif isinstance(node, str):
            v = rng.choice(_KERAS_STRINGS + [s for _, s in paths if isinstance(s, str)][:50])
        elif isinstance(node, list):
            v = rng.choice([[], node + node, [None] * len(node), node[:1], [1000000] * max(len(node), 1),
                            "list", None])
        else:  # dict
            keys = list(node)
            if keys and r < 0.4:
                k = rng.choice(keys)
                node = dict(node)
                del node[k]
                v = node
                where += f" -{k}"
            elif r < 0.6:
                v = dict(node, class_name=rng.choice(["Lambda", "Unknown", "TFOpLambda"]))
            else:
                v = rng.choice([[], None, "dict", {}])
        if rng.random() < 0.05:  # deep nesting, for the JSON and config readers
            d = rng.choice([100, 1000, 100000])
            v = json.loads("[" * min(d, 900) + "0" + "]" * min(d, 900)) if d < 1000 else {"__deep__": d}
        cfg = _json_set(cfg, path, v)
        what.append(f"{where}={str(v)[:30]}")
    return cfg, " ".join(what)


def _zip_bytes(members: list[tuple[str, bytes]], stored: bool = False) -> bytes:
    import io
    import warnings
    import zipfile

    bio = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are a mutation
        with zipfile.ZipFile(bio, "w", zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED) as z:
            for name, data in members:
                zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                zi.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
                z.writestr(zi, data)
    return bio.getvalue()


def _dump_config(cfg: Any) -> bytes:
    """``config.json`` text; a ``{"__deep__": d}`` node becomes ``d`` nested lists (too deep to build as objects)."""
    text = json.dumps(cfg, allow_nan=True)
    m = re.search(r'\{"__deep__": (\d+)\}', text)
    if m:
        d = int(m.group(1))
        text = text[:m.start()] + "[" * d + "0" + "]" * d + text[m.end():]
    return text.encode()


def _zip_header_edit(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A field of a zip's central directory, local header or end record set to a hostile value."""
    buf = bytearray(data)
    heads = [(m.start(), "central") for m in re.finditer(b"PK\x01\x02", data)] + \
            [(m.start(), "local") for m in re.finditer(b"PK\x03\x04", data)] + \
            [(m.start(), "end") for m in re.finditer(b"PK\x05\x06", data)]
    if not heads:
        return bytes(buf), "zip-none"
    pos, kind = rng.choice(heads)
    fields = {"central": [(8, 2, "flags"), (10, 2, "method"), (20, 4, "csize"), (24, 4, "usize"), (28, 2, "nlen"),
                          (30, 2, "xlen"), (42, 4, "offset")],
              "local": [(6, 2, "flags"), (8, 2, "method"), (18, 4, "csize"), (22, 4, "usize"), (26, 2, "nlen"),
                        (28, 2, "xlen")],
              "end": [(8, 2, "entries"), (10, 2, "total"), (12, 4, "cdsize"), (16, 4, "cdoffset"),
                      (20, 2, "comment")]}[kind]
    off, size, name = rng.choice(fields)
    if pos + off + size > len(buf):
        return bytes(buf), "zip-short"
    v = rng.choice([0, 1, 8, 12, 14, 99, 0xFFFF, 0xFFFFFFFF, 1 << 30, 1 << 31]) & ((1 << (8 * size)) - 1)
    _write_int(buf, pos + off, size, v)
    return bytes(buf), f"zip-{kind}-{name}={v}"


_BIG: dict[tuple[str, str, int], bytes] = {}


def _keras_big(seed: Seed, kind: str, mib: int) -> bytes:
    """The seed's zip with a ``mib`` MiB member of zeros (``bomb``: inflates from a few hundred KB) or a
    ``config.json`` padded to ``mib`` MiB (``big-config``).  Built once per seed, kind and size."""
    key = (seed.path.name, kind, mib)
    if key not in _BIG:
        members = list(seed.members.items())
        if kind == "bomb":
            members.append(("assets/zeros.bin", bytes(mib << 20)))
        else:
            members = [(n, d + b" " * (mib << 20) if n == "config.json" else d) for n, d in members]
        _BIG[key] = _zip_bytes(members)
    return _BIG[key]


def make_keras_case(seeds: list[Seed], run_seed: int, i: int) -> Case:
    """Keras mutant ``i``: even ``i`` structure-aware (``config.json`` / ``metadata.json`` edits, member names and
    sizes, the weights file, zip header fields), odd ``i`` byte-level on the zip."""
    rng = random.Random(f"{run_seed}:keras:{i}")
    s = rng.choice(seeds)
    members = list(s.members.items())
    if i % 2:
        data, how = mutate_bytes(rng, s.data)
        return Case(i, s.path.name, "keras", "bytes", "convert", how, data)
    r = rng.random()
    stored = False
    if r < 0.4:
        j = next(k for k, m in enumerate(members) if m[0] == "config.json")
        cfg, how = mutate_keras_config(rng, json.loads(members[j][1]))
        members[j] = ("config.json", _dump_config(cfg))
        how = "config " + how
    elif r < 0.47:
        j = next((k for k, m in enumerate(members) if m[0] == "metadata.json"), 0)
        v = rng.choice([b'{"keras_version": "1.0.0"}', b'{"keras_version": "99.0"}', b"{", b"[]", b"",
                        b'{"keras_version": 3}'])
        members[j] = (members[j][0], v)
        how = f"metadata={v[:30]!r}"
    elif r < 0.62:
        k = rng.choice(["rename", "dup", "drop", "escape", "many", "dir"])
        j = rng.randrange(len(members))
        name = members[j][0]
        if k == "rename":
            new = rng.choice(["Config.json", "config.json/", "config.json ", "model.weights.h5.bak", "x"])
            members[j] = (new, members[j][1])
        elif k == "dup":
            members.append((name, members[j][1][: len(members[j][1]) // 2]))
        elif k == "drop":
            del members[j]
        elif k == "escape":
            members.append((rng.choice(["../evil.txt", "/tmp/evil.txt", "assets/../../evil", "a/" * 300 + "b"]),
                            b"x"))
        elif k == "many":
            members += [(f"assets/junk{n}", b"") for n in range(rng.choice([2000, 20000]))]
        else:
            members.append((name + "/", b""))
        how = f"member-{k} {name}"
    elif r < 0.8:
        j = next((k for k, m in enumerate(members) if m[0].endswith(".h5")), 0)
        data, how = (mutate_bytes(rng, members[j][1]) if rng.random() < 0.7 else
                     (members[j][1][: rng.randrange(len(members[j][1]))], "truncated"))
        members[j] = (members[j][0], data)
        how = "weights " + how
    elif r < 0.9:
        k = rng.choice(["bomb", "big-config", "stored"])
        if k == "stored":
            stored = True
        else:
            mib = rng.choice([64, 256] if k == "bomb" else [1, 80])
            return Case(i, s.path.name, "keras", "struct", "convert", f"size-{k} {mib} MiB", _keras_big(s, k, mib))
        how = f"size-{k}"
    else:
        data, how = _zip_header_edit(rng, _zip_bytes(members))
        return Case(i, s.path.name, "keras", "struct", "convert", how, data)
    return Case(i, s.path.name, "keras", "struct", "convert", how, _zip_bytes(members, stored))


# ------------------------------------------------------------------------------------------- the worker
class MultiLineError(Exception):
    """``inspect`` failed with more than its one ``error:`` line (warnings and notes aside)."""


def _check_cli_failure(exit_code: int, output: str) -> str:
    """``ok`` or ``cli-error`` for an ``inspect`` run: a failure must be exit 1 with exactly one line, ``error:``
    (besides ``warning:`` / ``note:`` lines)."""
    if exit_code == 0:
        return "ok"
    lines = [ln for ln in output.splitlines() if ln.strip() and not ln.startswith(("warning:", "note:"))]
    if exit_code != 1 or not lines or not lines[0].startswith("error:"):
        raise RuntimeError(f"inspect exited {exit_code}: {output[-300:]}")
    if len(lines) != 1:
        raise MultiLineError(output[-600:])
    return "cli-error"


def _input_path(kind: str, data: bytes, tmp: Path) -> Path:
    """Write the input where the product will read it: ``tmp/case/model.<suffix>`` (an NNEF folder is made
    member by member).  The sentinel ``tmp/outside/w.dat`` is two levels up from inside the model folder."""
    case = tmp / "case"
    if case.exists():
        shutil.rmtree(case)
    case.mkdir()
    if kind == "nnef-dir":
        path = case / "model.nnef"
        materialize(data, path)
        return path
    path = case / {"nnef-tgz": "model.tgz", "nnef-tar": "model.tar", "keras": "model.keras"}.get(kind, f"in.{kind}")
    path.write_bytes(data)
    return path


def _execute(kind: str, target: str, data: bytes, tmp: Path) -> str:
    """Run one input; return "ok" or the ConversionError subclass name.  Anything else propagates."""
    import typer
    from typer.testing import CliRunner

    from tf2tosa import api, cli
    from tf2tosa.errors import ConversionError
    from tf2tosa.verify.compare import random_inputs

    if target == "crash":  # for the harness's own test
        os._exit(9)
    if target == "hang":
        time.sleep(3600)
    if target == "read-outside":  # the harness's own test: the audit hook must see this
        with open(tmp / "outside" / "w.dat", "rb"):
            return "ok"
    if target == "leave-temp":  # ... and the $TMPDIR check this
        import tempfile

        tempfile.mkdtemp(prefix="left-")
        return "ok"
    try:
        if kind not in ("tflite", "tosa"):
            path = _input_path(kind, data, tmp)
            if target == "inspect":
                res = CliRunner().invoke(cli.app, ["inspect", str(path)])
                if res.exception is not None and not isinstance(res.exception, (SystemExit, typer.Exit)):
                    raise res.exception
                return _check_cli_failure(res.exit_code, res.output)
            m = api.convert(str(path))
            if target == "run":
                m.run(random_inputs(m.graph, 0))
            else:
                m.to_bytes()
            return "ok"
        if target == "inspect":
            path = tmp / f"in.{kind}"
            path.write_bytes(data)
            res = CliRunner().invoke(cli.app, ["inspect", str(path)])
            if res.exception is not None and not isinstance(res.exception, (SystemExit, typer.Exit)):
                raise res.exception
            return _check_cli_failure(res.exit_code, res.output)
        if kind == "tflite":
            m = api.convert(data)
            if target == "convert":
                m.to_bytes()
                m.to_mlir()
            elif target == "run":
                m.run(random_inputs(m.graph, 0))
            elif target == "verify":
                m.verify(num=1)
        else:
            m = api.load(data)
            if target == "load":
                m.to_bytes()
            elif target == "run":
                m.run(random_inputs(m.graph, 0))
        return "ok"
    except ConversionError as e:
        return type(e).__name__


def _prepare_group(group: str, tmp: Path) -> None:
    """The untimed start of a worker: imports, LiteRT (flat) or TensorFlow (keras), one seed of the group."""
    import tf2tosa.api  # (imported before the first timed input)

    if group == "flat":
        from tf2tosa.verify import litert

        # verify's LiteRT runs go to one persistent LiteRT child (the product's LiteRTWorker), started here,
        # untimed: a fresh interpreter process per input would spend ~2 s of each input's 5 s on start-up alone
        lite = litert.LiteRTWorker()
        one_shot = litert.run_tflite_many

        def run_tflite_many(*args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("worker", lite)
            return one_shot(*args, **kwargs)

        litert.run_tflite_many = run_tflite_many  # type: ignore[assignment]
        try:
            tf2tosa.api.convert(str(CORPUS / "depthwise_f32.tflite")).verify(num=1)
        except Exception:  # noqa: BLE001  (no LiteRT here: verify inputs then end in their own errors)
            pass
        return
    # the sentinel outside the model: a valid tensor file a label or a link may point at
    outside = tmp / "outside"
    outside.mkdir(exist_ok=True)
    dat = next(iter(sorted(CORPUS.glob("*.nnef/variable1.dat"))), None)
    (outside / "w.dat").write_bytes(dat.read_bytes() if dat is not None else b"")
    for seed in load_corpus(CORPUS, (group,))[:1]:
        kind = "nnef-dir" if group == "nnef" else "keras"
        data = encode_members(_nnef_members(seed)) if group == "nnef" else seed.data
        try:
            _execute(kind, "convert", data, tmp)
        except Exception:  # noqa: BLE001  (the timed inputs will show it)
            pass


def worker(group: str = "flat", memory: int = WORKER_MEMORY) -> None:
    """Read cases from stdin, answer on the original stdout: one JSON line per case."""
    import resource
    import tempfile

    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    except (ValueError, OSError):
        pass
    out = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    import warnings

    warnings.simplefilter("ignore")
    # the harness's own folder is not in $TMPDIR, which the product's temporary files go to (checked empty after
    # every NNEF and Keras input)
    tmp = Path(tempfile.mkdtemp(prefix="tf2tosa-fuzz-", dir=os.environ.get("TF2TOSA_FUZZ_HOME")))
    product_tmp = Path(tempfile.gettempdir())
    check_tmp = group != "flat" and product_tmp.resolve() != tmp.parent.resolve()
    outside = str((tmp / "outside").resolve())
    opened: list[str] = []
    watching = [False]

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if watching[0] and event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            try:
                path = os.fsdecode(args[0])
                flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
                # O_NOFOLLOW: a symlink at the end is refused by the open itself, not followed
                real = (os.path.join(os.path.realpath(os.path.dirname(path) or "."), os.path.basename(path))
                        if flags & getattr(os, "O_NOFOLLOW", 0) else os.path.realpath(path))
            except (TypeError, ValueError):
                return
            if real.startswith((outside + os.sep, "/etc/")):
                opened.append(real)

    if group != "flat":
        sys.addaudithook(audit)
    _prepare_group(group, tmp)
    inp = sys.stdin.buffer
    while True:
        head = inp.readline()
        if not head:
            break
        meta = json.loads(head)
        data = inp.read(meta["size"])
        t0 = time.perf_counter()
        opened.clear()
        watching[0] = True
        try:
            outcome, detail = _execute(meta["kind"], meta["target"], data, tmp), ""
        except BaseException as e:  # noqa: BLE001  a finding: report it and go on
            outcome = f"finding:{type(e).__name__}"
            tb = traceback.extract_tb(e.__traceback__)
            site = next((f"{Path(fr.filename).name}:{fr.lineno}" for fr in reversed(tb) if "tf2tosa" in fr.filename),
                        "?")
            detail = f"{type(e).__name__} at {site}: {str(e)[:300]}\n" + "".join(traceback.format_exception(e))[-4000:]
        watching[0] = False
        secs = time.perf_counter() - t0
        if opened and not outcome.startswith("finding"):
            outcome, detail = "finding:ReadOutside", f"opened outside the model: {sorted(set(opened))[:5]}"
        if check_tmp:
            left = sorted(p.name for p in product_tmp.iterdir())
            if left:
                if not outcome.startswith("finding"):
                    outcome, detail = "finding:TempLeft", f"left in $TMPDIR: {left[:5]}"
                for name in left:
                    q = product_tmp / name
                    shutil.rmtree(q, ignore_errors=True) if q.is_dir() and not q.is_symlink() else q.unlink(
                        missing_ok=True)
        out.write(json.dumps({"outcome": outcome, "detail": detail, "secs": secs}) + "\n")
        out.flush()


class Worker:
    """A worker subprocess of one group of formats (``flat``: .tflite/.tosa, ``nnef``, ``keras``), restarted after
    a crash or a hang; ``home`` holds its own ``$TMPDIR`` and scratch folder."""

    def __init__(self, group: str = "flat", home: Path | None = None) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.group = group
        self.home = home

    def start(self) -> None:
        extra: dict[str, str] = {}
        if self.home is not None:
            product_tmp = self.home / f"tmp-{id(self)}"
            # what a killed worker (a hang) had in $TMPDIR is not the next input's leftover
            shutil.rmtree(product_tmp, ignore_errors=True)
            product_tmp.mkdir(parents=True, exist_ok=True)
            extra = {"TMPDIR": str(product_tmp), "TF2TOSA_FUZZ_HOME": str(self.home)}
        env = dict(os.environ, **extra, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3",
                   # an endless WHILE_LOOP gives up after this many iterations (default 100000: too many for 5 s)
                   TF2TOSA_MAX_WHILE_ITERATIONS="2000", TF2TOSA_MAX_RNN_STEPS="256",
                   # the seeds' tensors are a few KB: a 4 MiB tensor budget keeps every run well inside 5 s, and
                   # mutants with larger tensors exercise the refusal (the product's default budget is 1 GiB)
                   TF2TOSA_MAX_TENSOR_BYTES=str(4 << 20))
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", "--group",
                                      self.group, "--memory", str(GROUP_MEMORY[self.group])],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.buffer = b""
        self.warm()

    def warm(self) -> None:
        # the first answer includes the imports; it is not timed
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"kind": "tosa", "target": "load", "size": 0}).encode() + b"\n")
        self.proc.stdin.flush()
        self.proc.stdout.readline()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def send(self, case: Case) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.restarts += self.proc is not None
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        head = {"kind": case.kind, "target": case.target, "size": len(case.data)}
        try:
            self.proc.stdin.write(json.dumps(head).encode() + b"\n" + case.data)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        self.sent = time.monotonic()

    def fileno(self) -> int:
        assert self.proc is not None and self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def receive(self) -> dict[str, Any] | None:
        """The answer, or None while it is incomplete.  A dead worker answers ``crash``."""
        chunk = os.read(self.fileno(), 1 << 16)
        if not chunk:
            code = self.proc.wait() if self.proc is not None else None
            self.proc = None
            return {"outcome": "crash", "detail": f"worker died (exit status {code})",
                    "secs": time.monotonic() - self.sent}
        self.buffer += chunk
        if b"\n" not in self.buffer:
            return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)  # type: ignore[no-any-return]


@dataclasses.dataclass
class Result:
    case: Case
    outcome: str
    detail: str
    secs: float

    @property
    def accepted(self) -> bool:
        return self.outcome in ("ok", "cli-error") or not (self.outcome.startswith("finding")
                                                           or self.outcome in ("crash", "hang"))


def run_cases(cases: Iterator[Case], jobs: int = 1, timeout: float = TIMEOUT, group: str = "flat"
              ) -> Iterator[Result]:
    """Run ``cases`` on ``jobs`` workers of ``group``; yield each result (in completion order)."""
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="tf2tosa-fuzz-run-"))
    workers = [Worker(group, home) for _ in range(jobs)]
    busy: dict[int, tuple[Worker, Case]] = {}
    it = iter(cases)
    done = False
    try:
        while True:
            for w in workers:
                if not done and all(w is not b for b, _ in busy.values()):
                    case = next(it, None)
                    if case is None:
                        done = True
                        break
                    w.send(case)
                    busy[id(w)] = (w, case)
            if not busy:
                return
            now = time.monotonic()
            wait = max(0.0, min(w.sent + timeout - now for w, _ in busy.values()))
            ready, _, _ = select.select([w for w, _ in busy.values()], [], [], wait)
            for w in ready:
                ans = w.receive()
                if ans is None:
                    continue
                _, case = busy.pop(id(w))
                yield Result(case, ans["outcome"], ans["detail"], ans["secs"])
            now = time.monotonic()
            for key, (w, case) in list(busy.items()):
                if now - w.sent > timeout:
                    w.stop()
                    w.restarts += 1
                    del busy[key]
                    yield Result(case, "hang", f"no answer within {timeout:.0f} s", now - w.sent)
    finally:
        for w in workers:
            w.stop()
        shutil.rmtree(home, ignore_errors=True)


def _groups(formats: tuple[str, ...], n: int) -> list[tuple[str, int]]:
    """(group, inputs) for ``formats``: ``n`` shared by GROUP_SHARE among the groups asked for."""
    groups = [g for g in ("flat", "nnef", "keras") if any(GROUP_OF[f] == g for f in formats)]
    total = sum(GROUP_SHARE[g] for g in groups)
    counts = [int(n * GROUP_SHARE[g] / total) for g in groups]
    counts[0] += n - sum(counts)
    return list(zip(groups, counts))


def fuzz(n: int, seed: int = 0, jobs: int = 1, corpus: Path = CORPUS, findings: Path | None = None,
         verify_share: float = VERIFY_SHARE, timeout: float | None = None, progress: bool = False,
         formats: tuple[str, ...] = ("tflite", "tosa")) -> dict[str, Any]:
    """Run ``n`` mutants of ``formats``, one group of formats after the other; return the tallies and the
    findings (overall and per format).  ``timeout`` overrides every group's time limit."""
    t0 = time.monotonic()
    tally: collections.Counter[str] = collections.Counter()
    by_mode: collections.Counter[str] = collections.Counter()
    by_target: collections.Counter[str] = collections.Counter()
    per: dict[str, dict[str, Any]] = {}
    bad: list[dict[str, Any]] = []
    slowest = 0.0
    k = 0
    first = 0
    for group, count in _groups(formats, n):
        seeds = load_corpus(corpus, tuple(f for f in formats if GROUP_OF[f] == group))
        base = first
        if group == "flat":
            cases: Iterator[Case] = (make_case(seeds, seed, i, verify_share) for i in range(count))
        elif group == "nnef":
            cases = (make_nnef_case(seeds, seed, base + i) for i in range(count))
        else:
            cases = (make_keras_case(seeds, seed, base + i) for i in range(count))
        first += count
        limit = timeout if timeout is not None else GROUP_TIMEOUT[group]
        for r in run_cases(cases, jobs, limit, group):
            k += 1
            tally[r.outcome] += 1
            by_mode[r.case.mode] += 1
            by_target[r.case.target] += 1
            slowest = max(slowest, r.secs)
            f = per.setdefault(r.case.format, {"inputs": 0, "ok": 0, "refused": 0, "crashes": 0, "hangs": 0,
                                               "findings": 0, "slowest_seconds": 0.0, "slowest": None,
                                               "outcomes": collections.Counter()})
            f["inputs"] += 1
            f["outcomes"][r.outcome] += 1
            f["ok"] += r.outcome == "ok"
            f["refused"] += r.accepted and r.outcome != "ok"
            f["crashes"] += r.outcome == "crash"
            f["hangs"] += r.outcome == "hang"
            f["findings"] += r.outcome.startswith("finding")
            if r.secs > f["slowest_seconds"]:
                f["slowest_seconds"] = round(r.secs, 2)
                f["slowest"] = f"#{r.case.index} {r.case.kind} {r.case.target} {r.case.seed}: {r.case.how[:120]}"
            if not r.accepted:
                entry = {"index": r.case.index, "seed": r.case.seed, "kind": r.case.kind, "target": r.case.target,
                         "how": r.case.how, "outcome": r.outcome, "detail": r.detail}
                bad.append(entry)
                if findings is not None:
                    save_finding(findings, r.case, entry)
            if progress and (k % 200 == 0 or not r.accepted):
                print(f"[{k}/{n}] {time.monotonic() - t0:.0f}s {dict(tally)}", flush=True)
                if not r.accepted:
                    print(f"  {r.outcome} #{r.case.index} {r.case.kind} {r.case.target} {r.case.seed} "
                          f"{r.case.how[:200]}\n  {r.detail.splitlines()[0] if r.detail else ''}", flush=True)
    for f in per.values():
        f["outcomes"] = dict(f["outcomes"])
    return {"inputs": k, "seed": seed, "seconds": round(time.monotonic() - t0, 1), "by_mode": dict(by_mode),
            "by_target": dict(by_target), "outcomes": dict(tally), "slowest_seconds": round(slowest, 2),
            "crashes": tally["crash"], "hangs": tally["hang"],
            "findings": sum(v for key, v in tally.items() if key.startswith("finding")), "by_format": per,
            "bad": bad}


def save_finding(folder: Path, case: Case, entry: dict[str, Any]) -> Path:
    """Keep a mutant that was not accepted: the input as the product read it (an NNEF folder is made again,
    links and FIFOs included) and a JSON note of what happened."""
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(case.data).hexdigest()[:12]
    stem = folder / f"{case.index}-{digest}"
    if case.kind == "nnef-dir":
        path = stem.with_suffix(".nnef")
        if path.exists():
            shutil.rmtree(path)
        materialize(case.data, path)
    else:
        path = stem.with_suffix({"nnef-tgz": ".tgz", "nnef-tar": ".tar", "keras": ".keras"}.get(case.kind,
                                                                                               f".{case.kind}"))
        path.write_bytes(case.data)
    stem.with_suffix(".json").write_text(json.dumps(entry, indent=1))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1000, help="number of mutated inputs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", "-j", type=int, default=1)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--findings", type=Path, default=ROOT / "out" / "fuzz")
    ap.add_argument("--verify-share", type=float, default=VERIFY_SHARE)
    ap.add_argument("--timeout", type=float, default=None,
                    help=f"seconds per input (default {TIMEOUT:g}; Keras {GROUP_TIMEOUT['keras']:g})")
    ap.add_argument("--formats", default="tflite,tosa",
                    help="comma-separated: tflite, tosa, nnef, keras, or all (default tflite,tosa)")
    ap.add_argument("--group", default="flat", help=argparse.SUPPRESS)
    ap.add_argument("--memory", type=int, default=WORKER_MEMORY, help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, help="also write the summary here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.group, args.memory)
        return 0
    formats = FORMATS if args.formats == "all" else tuple(f.strip() for f in args.formats.split(",") if f.strip())
    unknown = set(formats) - set(FORMATS)
    if unknown:
        ap.error(f"unknown format(s) {', '.join(sorted(unknown))}; choose from {', '.join(FORMATS)} or all")
    summary = fuzz(args.n, args.seed, args.jobs, args.corpus, args.findings, args.verify_share, args.timeout,
                   progress=True, formats=formats)
    text = json.dumps({k: v for k, v in summary.items() if k != "bad"}, indent=1)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1))
    return 1 if summary["crashes"] or summary["hangs"] or summary["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
