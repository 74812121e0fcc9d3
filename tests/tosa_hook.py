"""One check for every ``.tosa`` the test suite produces (installed by ``tests/conftest.py``).

The serializer's ``to_bytes`` is wrapped for the whole session: every flatbuffer any test writes (through the API,
``TosaModel.save``, ``tfgen.run_case``, the e2e harness ...) is recorded, and so is every one a subprocess writes
(the CLI tests: ``tests/spool/sitecustomize.py`` copies them into a spool directory), and the executor's
``run`` is wrapped so that the inputs a test fed a graph travel with the graph's bytes.  After each test, every new
(by SHA-256) file is checked by Arm's tools, independently of anything the test itself asserted:

1. ``tosa-opt`` strict TOSA 1.0 validation with exactly the declared profiles and extensions (the graph's
   ``graph.record.profiles`` / ``extensions`` from the converter, else what :func:`tf2tosa.tosa.profiles.requirements`
   derives for a hand-built graph);
2. when the graph has inputs and fits (see :data:`MAX_ELEMENTS`), a run in the Arm reference model on the inputs
   the test gave our executor (or seeded inputs when the test never ran it), in both modes, and our fp32 run
   checked op by op against the spec's accuracy bounds (fp64 re-evaluation, as ``verify`` does):

   * integer outputs bit-exact against our executor (fp32 and precise runs alike);
   * float outputs: the reference model's precise (fp64) run within ``PRECISE_REL`` of our executor's precise run
     (both evaluate the same graph in fp64: only fp64 rounding separates them), and its fp32 run within the
     fp32 bound of :func:`tests.e2e.fp32_bound` of our fp64 result, or within the largest dot-product allowance
     of the spec in the graph (relative to the output's magnitude) when that is larger (see :func:`_spec_check`).

A failed check fails the test that produced the file (an error in its teardown).  A test that serializes a graph
on purpose invalid opts out with ``@pytest.mark.tosa_unchecked("reason")``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: at most this many new files are checked per test (a fuzzing test may convert thousands of mutated models); the
#: rest are counted, with this reason, in the session summary.  TF2TOSA_HOOK_MAX_PER_TEST overrides it.
MAX_PER_TEST = int(os.environ.get("TF2TOSA_HOOK_MAX_PER_TEST", "50"))
#: graphs whose values hold more elements than this in total are validated but not run in the reference model
#: (its fp32 and precise runs of such a graph take minutes)
MAX_ELEMENTS = 40_000_000


@dataclass
class Entry:
    sha: str
    data: bytes
    profiles: list[str]
    extensions: list[str]
    graph_id: int
    #: "1.0", or "1.1.draft" for a symbolic --dynamic program (validated as such; the reference model cannot run it)
    version: str = "1.0"


@dataclass
class Stats:
    checked: set[str] = field(default_factory=set)       # validated with tosa-opt
    ran: set[str] = field(default_factory=set)           # also run in the reference model (both modes)
    not_run: dict[str, str] = field(default_factory=dict)  # sha -> why not run in the reference model
    fp32_only: dict[str, str] = field(default_factory=dict)  # sha -> why run in fp32 mode only
    capped: dict[str, str] = field(default_factory=dict)  # sha -> not checked at all: the per-test cap
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"checked": sorted(self.checked), "ran": sorted(self.ran), "not_run": dict(self.not_run),
                "fp32_only": dict(self.fp32_only), "capped": dict(self.capped), "seconds": self.seconds}


class Recorder:
    def __init__(self) -> None:
        self.pending: dict[str, Entry] = {}
        self.inputs: dict[int, list[np.ndarray]] = {}     # id(graph) -> first inputs the executor was given
        self.sha_of_graph: dict[int, str] = {}            # graph read back from recorded bytes -> their sha
        self.keep: list[Any] = []                          # graphs kept alive so their ids stay unique
        self.stats = Stats()
        self.busy = False
        self.spool: Path | None = None  # where subprocesses copy the .tosa files they write (conftest)

    # ------------------------------------------------------------------ wrappers
    def wrap_to_bytes(self, orig: Callable[..., bytes]) -> Callable[..., bytes]:
        @functools.wraps(orig)
        def to_bytes(graph: Any, *args: Any, **kwargs: Any) -> bytes:
            data = orig(graph, *args, **kwargs)
            if not self.busy:
                self._record(graph, data)
            return data

        return to_bytes

    def wrap_write_file(self, orig: Callable[..., None]) -> Callable[..., None]:
        """Saving writes the file through a map (``tosa_writer.write_file``), not through ``to_bytes``."""
        @functools.wraps(orig)
        def write_file(graph: Any, path: Any, *args: Any, **kwargs: Any) -> None:
            orig(graph, path, *args, **kwargs)
            if not self.busy:
                self._record(graph, Path(path).read_bytes())

        return write_file

    def wrap_run(self, orig: Callable[..., dict[str, np.ndarray]]) -> Callable[..., dict[str, np.ndarray]]:
        @functools.wraps(orig)
        def run(graph: Any, inputs: Any, *args: Any, **kwargs: Any) -> dict[str, np.ndarray]:
            out = orig(graph, inputs, *args, **kwargs)
            if not self.busy and kwargs.get("variables") is None and id(graph) not in self.inputs:
                try:
                    arrs = _ordered(graph, inputs)
                except (KeyError, TypeError, ValueError):
                    arrs = None
                if arrs is not None:
                    self.inputs[id(graph)] = arrs
                    self.keep.append(graph)
            return out

        return run

    def wrap_from_bytes(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(orig)
        def from_bytes(data: bytes, *args: Any, **kwargs: Any) -> Any:
            graph = orig(data, *args, **kwargs)
            if not self.busy:
                self.sha_of_graph[id(graph)] = hashlib.sha256(bytes(data)).hexdigest()
                self.keep.append(graph)
            return graph

        return from_bytes

    def _record(self, graph: Any, data: bytes) -> None:
        sha = hashlib.sha256(data).hexdigest()
        if sha in self.pending or sha in self.stats.checked:
            return
        profs = graph.record.profiles
        exts = graph.record.extensions
        if profs is None or exts is None:
            from tf2tosa.errors import ConversionError
            from tf2tosa.tosa.profiles import requirements

            try:
                profs, exts = requirements(graph)
            except ConversionError:  # not a valid TOSA graph: validation (with every profile) will say why
                profs, exts = [], []
        self.pending[sha] = Entry(sha, bytes(data), list(profs), list(exts), id(graph),
                                  (graph.record.specification_version or "1.0"))
        self.keep.append(graph)

    # ------------------------------------------------------------------ checking
    def _collect_spool(self) -> None:
        """Pick up the files subprocesses wrote (tests/spool/sitecustomize.py)."""
        if self.spool is None or not self.spool.is_dir():
            return
        for path in sorted(self.spool.glob("*.tosa")):
            sha = path.stem
            meta_path = path.with_suffix(".json")
            try:
                data = path.read_bytes()
                meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
            except (OSError, ValueError):
                continue
            path.unlink(missing_ok=True)
            meta_path.unlink(missing_ok=True)
            if sha in self.pending or sha in self.stats.checked:
                continue
            profs, exts = meta.get("profiles"), meta.get("extensions")
            if profs is None or exts is None:
                from tf2tosa.errors import ConversionError
                from tf2tosa.serializer.tosa_reader import from_bytes
                from tf2tosa.tosa.profiles import requirements

                try:
                    profs, exts = requirements(from_bytes(data))
                except ConversionError:
                    profs, exts = [], []
            self.pending[sha] = Entry(sha, data, list(profs), list(exts), -1,
                                      meta.get("specification_version", "1.0"))

    def drain(self, exempt: str | None) -> list[str]:
        """Check every pending file; returns the failure messages (and forgets the test's graphs)."""
        self._collect_spool()
        pending, self.pending = self.pending, {}
        inputs_by_sha: dict[str, list[np.ndarray]] = {}
        for gid, arrs in self.inputs.items():
            sha = self.sha_of_graph.get(gid)
            if sha is not None:
                inputs_by_sha.setdefault(sha, arrs)
        failures: list[str] = []
        if exempt is None:
            t0 = time.perf_counter()
            self.busy = True
            try:
                for k, e in enumerate(pending.values()):
                    if k >= MAX_PER_TEST:
                        self.stats.capped[e.sha] = f"beyond the per-test cap of {MAX_PER_TEST} files"
                        continue
                    arrs = self.inputs.get(e.graph_id) or inputs_by_sha.get(e.sha)
                    msg = self._check(e, arrs)
                    if msg:
                        failures.append(msg)
            finally:
                self.busy = False
                self.stats.seconds += time.perf_counter() - t0
        self.inputs.clear()
        self.sha_of_graph.clear()
        self.keep.clear()
        return failures

    def _check(self, e: Entry, arrs: list[np.ndarray] | None) -> str:
        from tf2tosa.verify import tosa_tools

        if not tosa_tools.available():
            return ""
        tag = f".tosa {e.sha[:12]} (profiles {e.profiles}, extensions {e.extensions})"
        if e.version != "1.0":  # a 1.1-draft program: tosa-opt validates it; the reference model does not run it
            ok, msg = tosa_tools.validate(e.data, e.profiles, e.extensions, level="none", version=e.version)
            self.stats.checked.add(e.sha)
            if not ok:
                return f"{tag}: tosa-opt strict {e.version} validation failed:\n{msg}"
            self.stats.not_run[e.sha] = f"a TOSA {e.version} program (the reference model runs 1.0 only)"
            return ""
        ok, msg = tosa_tools.validate(e.data, e.profiles, e.extensions)
        self.stats.checked.add(e.sha)
        if not ok:
            return f"{tag}: tosa-opt strict 1.0 validation failed:\n{msg}"
        why = _cannot_run(e.data)
        if why:
            self.stats.not_run[e.sha] = why
            return ""
        return self._compare(e, tag, arrs)

    def _compare(self, e: Entry, tag: str, arrs: list[np.ndarray] | None, spec: bool = True) -> str:
        """The reference-model half of the check (``spec=False``: without the per-op spec check of our run)."""
        import tf2tosa.executor as ex
        from tests.e2e import PRECISE_REL, fp32_bound, fp32_noise, inputs_for
        from tf2tosa.serializer.tosa_reader import from_bytes
        from tf2tosa.verify import tosa_tools

        g = from_bytes(e.data)
        given = arrs is not None and len(arrs) == len(g.inputs) and all(
            tuple(a.shape) == tuple(v.type.static_shape) for a, v in zip(arrs, g.inputs))
        feed = {v.name: a for v, a in zip(g.inputs, arrs)} if given and arrs is not None else inputs_for(g, 0)
        try:
            trace = ex.run(g, feed, trace=True)
            ours32 = {v.name: trace[v.name] for v in g.outputs}
            ours64 = ex.run(g, feed, precise=True)
        except ex.ExecutionError as err:
            if given:
                return f"{tag}: our executor fails on the inputs the test gave it: {err}"
            self.stats.not_run[e.sha] = f"our executor refuses it on seeded inputs: {str(err)[:120]}"
            return ""
        # precise mode only changes float arithmetic: an all-integer graph is run once; and the tosa_reference_model
        # command (precise mode) reads no bf16/fp8 .npy inputs: fp32 mode only for those
        has_float = any(r.dtype.is_float for op in g.ops.values() for r in op.results)
        precise = has_float and not any(v.dtype.name.startswith(("BF16", "FP8")) for v in g.inputs)
        try:
            ref32 = tosa_tools.run_reference(e.data, feed)
            ref64 = tosa_tools.run_reference(e.data, feed, precise=True) if precise else None
        except tosa_tools.ToolError as err:
            return f"{tag}: the reference model fails where our executor runs: {err}"
        self.stats.ran.add(e.sha)
        spec_bad, spec_rel = _spec_check(g, trace) if spec else ("", 0.0)
        noise = fp32_noise(g, feed)
        if spec_bad:
            return f"{tag}: our executor's fp32 run is outside the spec's per-op accuracy bounds: {spec_bad}"
        if not precise and has_float:
            self.stats.fp32_only[e.sha] = "bf16/fp8 graph inputs: the precise-mode command cannot read them"
        bad: list[str] = []
        for v in g.outputs:
            a32, a64 = ours32[v.name], ours64[v.name]
            r32 = np.asarray(ref32[v.name]).reshape(a32.shape)
            r64 = np.asarray((ref64 or ref32)[v.name]).reshape(a32.shape)
            if not v.dtype.is_float:
                for mode, r, a in (("fp32", r32, a32), ("precise", r64, a64))[:2 if ref64 else 1]:
                    n = int(np.count_nonzero(np.asarray(r).astype(np.int64) != np.asarray(a).astype(np.int64)))
                    if n:
                        bad.append(f"{v.name}: {n} of {a.size} integer elements differ ({mode} run)")
                continue
            x64 = np.asarray(a64, np.float64)
            err64 = _float_gap(np.asarray(r64, np.float64), x64) if ref64 else 0.0
            lim64 = PRECISE_REL * _scale(x64)
            if not err64 <= lim64:
                bad.append(f"{v.name}: precise run differs by {err64:.3g} > {lim64:.3g}")
            lim32 = max(fp32_bound(np.asarray(a32), x64, v.dtype, noise.get(v.name, 0.0)), spec_rel * _scale(x64))
            err32 = _float_gap(np.asarray(r32).astype(np.float64), x64)
            if not err32 <= lim32:
                bad.append(f"{v.name}: fp32 run differs from fp64 by {err32:.3g} > bound {lim32:.3g}")
        return f"{tag} vs the Arm reference model: " + "; ".join(bad) if bad else ""


def _spec_check(g: Any, trace: Mapping[str, np.ndarray]) -> tuple[str, float]:
    """Every float op of our fp32 run (``trace``) against its fp64 re-evaluation with the spec's bound.

    Returns the failures ("" when compliant) and the largest dot-product allowance relative to the op's output
    magnitude: accumulation order is where fp32 implementations legitimately differ by more than a few ulp, and
    the spec's dot-product bound (§1.10.3) says by how much, so another fp32 implementation's output may be that
    far (relative to its scale) from the fp64 result even where our own kernel is far more accurate (an RFFT2D
    done with an FFT in fp64 vs the reference model's direct fp32 DFT)."""
    from tf2tosa.executor.compliance import check_op, op_accuracy
    from tf2tosa.verify.spec_check import evaluate_fp64 as fp64

    bad: list[str] = []
    rel = 0.0
    for op in g.topological_order():
        if op.opcode in _NO_SPEC_CHECK or not any(r.dtype.is_float for r in op.results):
            continue
        if any(v.name not in trace for v in (*op.operands, *op.results)):
            continue  # inside a control-flow region: the trace holds the top-level graph
        ins = [trace[v.name] for v in op.operands]
        refs = fp64(op, ins)
        dot = op_accuracy(op).mode == "dot_product"
        for i, r in enumerate(op.results):
            if not r.dtype.is_float:
                continue
            res = check_op(op, refs[i], trace[r.name], ins, result_index=i,
                           bound_fn=lambda op=op, ins=ins: fp64(op, [np.abs(x) if np.issubdtype(
                               np.asarray(x).dtype, np.floating) else x for x in ins])[0])
            if not res.ok:
                bad.append(f"{op.opcode} {r.name}: {res}")
            scale = _scale(np.asarray(refs[i], np.float64))
            if dot and scale > 0:
                rel = max(rel, res.allowed / scale)
    return "; ".join(bad[:5]), rel


_NO_SPEC_CHECK = frozenset({"CONST", "CONST_SHAPE", "COND_IF", "WHILE_LOOP", "CUSTOM", "VARIABLE", "VARIABLE_READ",
                            "VARIABLE_WRITE"})


def _ordered(graph: Any, inputs: Mapping[str, Any] | Sequence[Any]) -> list[np.ndarray] | None:
    names = [v.name for v in graph.inputs]
    if isinstance(inputs, Mapping):
        if set(inputs) != set(names):
            return None
        return [np.array(inputs[n], copy=True) for n in names]
    arrs = [np.array(a, copy=True) for a in inputs]
    return arrs if len(arrs) == len(names) else None


def _scale(x: np.ndarray) -> float:
    fin = x[np.isfinite(x)]
    return float(np.abs(fin).max()) if fin.size else 0.0


def _float_gap(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| over finite elements; inf when non-finite values (inf/NaN) do not agree."""
    fw, fg = np.isfinite(want), np.isfinite(got)
    if not np.array_equal(fw, fg) or not np.array_equal(np.isnan(want), np.isnan(got)):
        return float("inf")
    if not np.array_equal(want[~fw & ~np.isnan(want)], got[~fg & ~np.isnan(got)]):
        return float("inf")
    return float(np.abs(got[fw] - want[fw]).max()) if fw.any() else 0.0


def _cannot_run(data: bytes) -> str:
    """Why the reference model is not run on this file ("" when it is)."""
    from tf2tosa.serializer.tosa_reader import from_bytes

    g = from_bytes(data)
    if not g.inputs:
        return "no graph inputs"
    if any(v.type.static_shape is None or any(d is None or d < 0 for d in v.type.static_shape)
           for v in (*g.inputs, *g.outputs)):
        return "dynamic input/output shape"
    total = 0
    for op in g.ops.values():
        for r in op.results:
            shape = r.type.static_shape
            if shape is not None:
                total += int(np.prod([max(int(d), 1) for d in shape], dtype=np.int64))
    if total > MAX_ELEMENTS:
        return f"too large for the reference model: {total:,} elements in its values (limit {MAX_ELEMENTS:,})"
    return ""
