"""Step-by-step verification of streaming (stateful) models: N consecutive invocations, every step compared.

Our side is one :class:`~tf2tosa.executor.session.Session` (EXT-VARIABLE state, or the state inputs/outputs of the
state-as-I/O form, carried by the session); the oracle is LiteRT's interpreter, one interpreter invoked N times on
the same inputs (reference kernels by default, like ``verify``), so its resource variables carry their state exactly
as a deployed interpreter's do.  Each step's outputs are judged like ``verify``'s (integers exact, floats within the
relative bound); the report keeps the worst of every output over all steps and, per step, the largest error and the
mismatching elements.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import InputError
from ..executor.session import Session
from ..ir import Graph
from .compare import (
    ConvertedModel,
    OutputReport,
    VerifyReport,
    compare,
    random_inputs,
    require_litert,
    resolve_oracle,
)
from .litert import LiteRTWorker


def step_inputs(graph: Graph, session: Session, steps: int, frames: Mapping[str, np.ndarray] | None = None,
                seed: int = 0, file: str | None = None) -> list[dict[str, np.ndarray]]:
    """One input set per step: ``frames[name][k]`` for the inputs given (their leading axis is the step), seeded
    random data (seed + k) for the others.  An :class:`InputError` names an input with fewer frames than ``steps``,
    frames of the wrong shape, or a name that is not a step input."""
    if steps < 1:
        raise InputError(f"--steps must be at least 1, not {steps}", file=file)
    frames = dict(frames or {})
    wanted = {v.name: v for v in graph.inputs if v.name in session.input_names}
    for name, arr in frames.items():
        v = wanted.get(name)
        if v is None:
            raise InputError(f"no step input named {name!r} (inputs: {', '.join(sorted(wanted)) or 'none'})",
                             file=file, tensor=name)
        shape = tuple(v.type.shape)
        if arr.ndim != len(shape) + 1 or tuple(arr.shape[1:]) != shape:
            raise InputError(f"frames for input {name!r} have shape {list(arr.shape)}; expected [steps, "
                             f"{', '.join(str(d) for d in shape)}] (the leading axis is the step)", file=file,
                             tensor=name)
        if arr.shape[0] < steps:
            raise InputError(f"--steps {steps} but the frames for input {name!r} hold only {arr.shape[0]} step(s)",
                             file=file, tensor=name)
    sets = []
    for k in range(steps):
        rnd = random_inputs(graph, seed + k)
        sets.append({n: (frames[n][k] if n in frames else rnd[n]) for n in wanted})
    return sets


def verify_stream(model: ConvertedModel, steps: int, frames: Mapping[str, np.ndarray] | None = None, *, seed: int = 0,
                  oracle: str | None = None, state: Mapping[str, np.ndarray] | None = None,
                  progress: Any = None) -> VerifyReport:
    """Compare ``steps`` consecutive invocations of ``model`` (a ``.tflite`` conversion) with LiteRT's."""
    file = model.source_path
    if model.source is None and getattr(model, "tf_source", None) is not None:
        return _verify_stream_tensorflow(model, steps, frames, seed=seed, oracle=oracle, state=state,
                                         progress=progress)
    if model.source is None:
        raise InputError("verify --steps compares with LiteRT's interpreter (a .tflite source) or TensorFlow (a "
                         "SavedModel/Keras source converted with --keep-variables)", file=file)
    require_litert()
    chosen = resolve_oracle(oracle, None, tensorflow_source=False)
    tell = progress or (lambda *a: None)
    g = model.graph
    session = model.session()
    if state:
        session.state = state
    sets = step_inputs(g, session, steps, frames, seed, file)
    unsigned = g.unsigned_io

    def as_source(name: str, a: np.ndarray) -> np.ndarray:
        return a.view(np.uint8) if name in unsigned and a.dtype == np.int8 else a

    by_name = {v.name: v for v in g.inputs}
    named = [by_name[n].source for n in session.input_names]
    positional = not all(named) or len(set(named)) != len(named)
    litert_sets: list[Any] = (
        [[as_source(n, s[n]) for n in session.input_names] for s in sets] if positional
        else [{(by_name[n].source or n): as_source(n, a) for n, a in s.items()} for s in sets])
    tell(0, steps + 1, f"LiteRT, {chosen} kernels, {steps} invocations")
    with LiteRTWorker() as worker:
        refs = worker.run_many(model.source, litert_sets, reference_kernels=chosen == "ref")
    outputs = [v for v in g.outputs if v.name in session.output_names]
    worst: dict[str, OutputReport] = {}
    per_step: list[dict[str, Any]] = []
    for k, (s, ref) in enumerate(zip(sets, refs)):
        tell(k + 1, steps + 1, f"executor, step {k + 1}/{steps}")
        got = session.run(s)
        ref_list = list(ref.values())
        pairs = []
        for i, v in enumerate(outputs):
            r = ref.get(v.source or "", ref_list[i] if positional and i < len(ref_list) else None)
            if r is not None:
                pairs.append((v.name, as_source(v.name, got[v.name]), r))
        per_step.append(_judge_step(k, pairs, worst))
    report = VerifyReport(file or g.name, steps, [worst[v.name] for v in outputs if v.name in worst], oracle=chosen)
    report.steps = per_step
    if not report.outputs:
        report.info.append("no output could be paired with LiteRT's")
    report.inexact = g.inexact
    if session.state_io:
        report.info.append(f"state as graph inputs/outputs ({len(session.variables)} variable(s)), carried by the "
                           "session from step to step")
    return report



def _verify_stream_tensorflow(model: ConvertedModel, steps: int, frames: Mapping[str, np.ndarray] | None, *, seed: int,
                              oracle: str | None, state: Mapping[str, np.ndarray] | None,
                              progress: Any) -> VerifyReport:
    """``steps`` consecutive calls of the TensorFlow source (its resource variables advance with every call, from
    their saved values) against ``steps`` invocations of one session started from the same values."""
    from ..converter.tensorflow import load_source
    from .tf_verify import _run_source

    if oracle not in (None, "tensorflow"):
        raise InputError(f"--oracle {oracle}: a TensorFlow source is judged by TensorFlow", file=model.source_path)
    if state:
        raise InputError("--state sets a session's state; a TensorFlow source starts from its saved values",
                         file=model.source_path)
    src = model.tf_source
    if src.kind in ("saved_model", "keras") and src.label and not src.label.startswith("<"):
        # fresh variables (the saved values); a source converted with --trust-model loads as it did then
        src = load_source(src.label, src.signature or "serving_default", trust_model=src.trusted)
    tell = progress or (lambda *a: None)
    g = model.graph
    session = model.session()
    sets = step_inputs(g, session, steps, frames, seed, src.label)
    ins = [v for v in g.inputs if v.name in session.input_names]
    outs = [v for v in g.outputs if v.name in session.output_names]
    if len(ins) != len(src.input_names) or len(outs) != len(src.output_names):
        raise InputError(f"model has {len(ins)} inputs / {len(outs)} outputs per step, the TensorFlow source "
                         f"{len(src.input_names)} / {len(src.output_names)}", file=src.label)
    worst: dict[str, OutputReport] = {}
    per_step: list[dict[str, Any]] = []
    for k, s in enumerate(sets):
        tell(k, steps, f"TensorFlow and executor, step {k + 1}/{steps}")
        refs = _run_source(src, [np.asarray(s[v.name]) for v in ins])
        got = session.run(s)
        per_step.append(_judge_step(k, [(v.name, got[v.name], ref) for v, ref in zip(outs, refs)], worst))
    report = VerifyReport(src.label, steps, [worst[v.name] for v in outs if v.name in worst], oracle="tensorflow")
    report.steps = per_step
    report.inexact = g.inexact
    report.info.append(f"{steps} consecutive TensorFlow calls; state in {len(session.variables)} variable(s)")
    return report


def _judge_step(k: int, pairs: list[tuple[str, np.ndarray, np.ndarray]], worst: dict[str, OutputReport]
                ) -> dict[str, Any]:
    """Compare one step's (name, ours, reference) outputs; keeps each output's worst report in ``worst`` and
    returns the step's row (ok, largest error, mismatching elements)."""
    row: dict[str, Any] = {"step": k, "ok": True, "max_abs": 0.0, "mismatches": 0}
    for name, got, ref in pairs:
        rep = compare(name, got, ref)
        prev = worst.get(name)
        worst[name] = rep if prev is None else prev.merge(rep)
        row["ok"] = row["ok"] and rep.ok
        row["mismatches"] += rep.mismatches
        row["max_abs"] = max(row["max_abs"], rep.max_abs)
    return row
