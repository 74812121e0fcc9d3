"""Fuzz the readers, the converter, the executor and the CLI with mutated ``.tflite`` and ``.tosa`` files.

Two kinds of mutation, half each:

* **structure-aware**: the seed is read once with a tracing reader that records every flatbuffer field the
  product's own reader touches (vtable entries, table/vector offsets, vector lengths, scalars such as tensor types,
  buffer / opcode / subgraph / tensor indices, shape dimensions, quantization scales and zero points, constant
  data words); a mutant rewrites one to three of those fields in place with values chosen for the field's role
  (boundary integers, off-by-one indices, huge or negative dimensions, NaN/inf/denormal scales, unknown enums).
* **bytes**: bit flips, random bytes, interesting integers at random positions, truncation, deletion,
  insertion and chunk duplication.

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

``python tools/fuzz.py -n 10000 --seed 1 --jobs 2`` (``make fuzz N=10000``).  Exit status 1 when anything was
found.  Everything is seeded: input ``i`` of seed ``s`` is the same mutant on every run.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import os
import random
import select
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
        fe.load_tflite(data)
    finally:
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
    kind: str  # tflite | tosa
    data: bytes
    fields: list[Field]


def load_corpus(folder: Path = CORPUS) -> list[Seed]:
    seeds = []
    for p in sorted(folder.iterdir()):
        kind = p.suffix.lstrip(".")
        if kind not in ("tflite", "tosa"):
            continue
        data = p.read_bytes()
        seeds.append(Seed(p, kind, data, fields_of(data, kind)))
    if not seeds:
        raise SystemExit(f"no .tflite/.tosa seeds in {folder}")
    return seeds


@dataclasses.dataclass
class Case:
    index: int
    seed: str
    kind: str
    mode: str  # struct | bytes
    target: str
    how: str
    data: bytes


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


# ------------------------------------------------------------------------------------------- the worker
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
    try:
        if target == "inspect":
            path = tmp / f"in.{kind}"
            path.write_bytes(data)
            res = CliRunner().invoke(cli.app, ["inspect", str(path)])
            if res.exception is not None and not isinstance(res.exception, (SystemExit, typer.Exit)):
                raise res.exception
            if res.exit_code not in (0, 1) or (res.exit_code == 1 and "error:" not in res.output):
                raise RuntimeError(f"inspect exited {res.exit_code}: {res.output[-300:]}")
            return "ok" if res.exit_code == 0 else "cli-error"
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


def worker() -> None:
    """Read cases from stdin, answer on the original stdout: one JSON line per case."""
    import resource
    import tempfile

    try:
        resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))
    except (ValueError, OSError):
        pass
    out = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    import warnings

    warnings.simplefilter("ignore")
    import tf2tosa.api  # (imported before the first timed input)
    from tf2tosa.verify import litert

    # verify's LiteRT runs go to one persistent LiteRT child (the product's LiteRTWorker), started here, untimed:
    # a fresh interpreter process per input would spend ~2 s of each input's 5 s on start-up alone
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

    tmp = Path(tempfile.mkdtemp(prefix="tf2tosa-fuzz-"))
    inp = sys.stdin.buffer
    while True:
        head = inp.readline()
        if not head:
            break
        meta = json.loads(head)
        data = inp.read(meta["size"])
        t0 = time.perf_counter()
        try:
            outcome, detail = _execute(meta["kind"], meta["target"], data, tmp), ""
        except BaseException as e:  # noqa: BLE001  a finding: report it and go on
            outcome = f"finding:{type(e).__name__}"
            tb = traceback.extract_tb(e.__traceback__)
            site = next((f"{Path(fr.filename).name}:{fr.lineno}" for fr in reversed(tb) if "tf2tosa" in fr.filename),
                        "?")
            detail = f"{type(e).__name__} at {site}: {str(e)[:300]}\n" + "".join(traceback.format_exception(e))[-4000:]
        out.write(json.dumps({"outcome": outcome, "detail": detail, "secs": time.perf_counter() - t0}) + "\n")
        out.flush()


class Worker:
    """A worker subprocess, restarted after a crash or a hang."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3",
                   # an endless WHILE_LOOP gives up after this many iterations (default 100000: too many for 5 s)
                   TF2TOSA_MAX_WHILE_ITERATIONS="2000", TF2TOSA_MAX_RNN_STEPS="256",
                   # the seeds' tensors are a few KB: a 4 MiB tensor budget keeps every run well inside 5 s, and
                   # mutants with larger tensors exercise the refusal (the product's default budget is 1 GiB)
                   TF2TOSA_MAX_TENSOR_BYTES=str(4 << 20))
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"],
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


def run_cases(cases: Iterator[Case], jobs: int = 1, timeout: float = TIMEOUT) -> Iterator[Result]:
    """Run ``cases`` on ``jobs`` workers; yield each result (in completion order)."""
    workers = [Worker() for _ in range(jobs)]
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


def fuzz(n: int, seed: int = 0, jobs: int = 1, corpus: Path = CORPUS, findings: Path | None = None,
         verify_share: float = VERIFY_SHARE, timeout: float = TIMEOUT, progress: bool = False) -> dict[str, Any]:
    """Run ``n`` mutants; return the tallies and the findings."""
    seeds = load_corpus(corpus)
    t0 = time.monotonic()
    tally: collections.Counter[str] = collections.Counter()
    by_mode: collections.Counter[str] = collections.Counter()
    by_target: collections.Counter[str] = collections.Counter()
    bad: list[dict[str, Any]] = []
    slowest = 0.0
    cases = (make_case(seeds, seed, i, verify_share) for i in range(n))
    for k, r in enumerate(run_cases(cases, jobs, timeout), 1):
        tally[r.outcome] += 1
        by_mode[r.case.mode] += 1
        by_target[r.case.target] += 1
        slowest = max(slowest, r.secs)
        if not r.accepted:
            entry = {"index": r.case.index, "seed": r.case.seed, "target": r.case.target, "how": r.case.how,
                     "outcome": r.outcome, "detail": r.detail}
            bad.append(entry)
            if findings is not None:
                findings.mkdir(parents=True, exist_ok=True)
                digest = hashlib.sha1(r.case.data).hexdigest()[:12]
                (findings / f"{r.case.index}-{digest}.{r.case.kind}").write_bytes(r.case.data)
                (findings / f"{r.case.index}-{digest}.json").write_text(json.dumps(entry, indent=1))
        if progress and (k % 200 == 0 or not r.accepted):
            print(f"[{k}/{n}] {time.monotonic() - t0:.0f}s {dict(tally)}", flush=True)
            if not r.accepted:
                print(f"  {r.outcome} #{r.case.index} {r.case.target} {r.case.seed} {r.case.how}\n  "
                      f"{r.detail.splitlines()[0] if r.detail else ''}", flush=True)
    return {"inputs": n, "seed": seed, "seconds": round(time.monotonic() - t0, 1), "by_mode": dict(by_mode),
            "by_target": dict(by_target), "outcomes": dict(tally), "slowest_seconds": round(slowest, 2),
            "crashes": tally["crash"], "hangs": tally["hang"],
            "findings": sum(v for k, v in tally.items() if k.startswith("finding")), "bad": bad}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1000, help="number of mutated inputs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", "-j", type=int, default=1)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--findings", type=Path, default=ROOT / "out" / "fuzz")
    ap.add_argument("--verify-share", type=float, default=VERIFY_SHARE)
    ap.add_argument("--timeout", type=float, default=TIMEOUT)
    ap.add_argument("--json", type=Path, help="also write the summary here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker()
        return 0
    summary = fuzz(args.n, args.seed, args.jobs, args.corpus, args.findings, args.verify_share, args.timeout,
                   progress=True)
    text = json.dumps({k: v for k, v in summary.items() if k != "bad"}, indent=1)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1))
    return 1 if summary["crashes"] or summary["hangs"] or summary["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
