"""Verification against TensorFlow: run the original model (SavedModel signature, Keras model, tf.function or
GraphDef) and the converted TOSA program on the same inputs and compare every output.

Running the source runs whatever its graph does: a graph holding ops that touch the file system or the network, call
Python or can block on a queue (:data:`~tf2tosa.converter.tensorflow.REFUSED_EFFECTS`) is refused before anything
runs unless the caller trusts the model (``trust_model=True``, ``--trust-model``); see :func:`check_trusted`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..converter.tensorflow import REFUSED_EFFECTS, TFSource, describe_effects, load_source, source_effects
from ..errors import ConversionError, InputError
from ..executor import run
from ..ir import Graph
from .compare import FLOAT_RTOL, FP64, OutputReport, VerifyReport, judge, random_inputs, spec_check


def verify_tensorflow(model: Any, source: Any = None, inputs: Sequence[Mapping[str, np.ndarray]] | None = None, *,
                      seed: int = 0, num: int = 1, signature: str = "serving_default",
                      rtol: float = FLOAT_RTOL, trust_model: bool = False) -> VerifyReport:
    """Compare a converted model with TensorFlow running its source.

    ``model`` is a TosaModel or a converted Graph; ``source`` the TensorFlow model it came from (anything
    :func:`tf2tosa.converter.tensorflow.load_tensorflow` accepts, or an opened ``TFSource``); when omitted,
    ``model.tf_source``.  ``inputs``: input sets keyed by the graph's input names (default: ``num`` seeded random
    sets).  Float outputs pass within ``rtol`` × max |reference| (or as :func:`.compare.judge` says), integer
    outputs must match exactly (TF's int64 results are compared by value with our i32).  A source whose graph
    touches the file system, calls Python or uses queues is refused unless ``trust_model`` (:func:`check_trusted`).
    """
    graph: Graph = model if isinstance(model, Graph) else model.graph
    src = source if source is not None else getattr(model, "tf_source", None)
    if src is None:
        raise ConversionError("verify_tensorflow needs the TensorFlow source model")
    if not isinstance(src, TFSource):
        src = load_source(src, signature)
    check_trusted(src, trust_model)
    if len(src.input_names) != len(graph.inputs) or len(src.output_names) != len(graph.outputs):
        raise InputError(f"model has {len(graph.inputs)} inputs / {len(graph.outputs)} outputs, the TensorFlow "
                         f"source {len(src.input_names)} / {len(src.output_names)}", file=src.label)
    sets = [dict(s) for s in inputs] if inputs is not None else [random_inputs(graph, seed + i) for i in range(num)]
    worst: dict[str, OutputReport] = {}
    for s in sets:
        missing = [v.name for v in graph.inputs if v.name not in s]
        if missing:
            raise InputError(f"no value for input(s) {', '.join(missing)}", file=src.label)
        refs = _run_source(src, [np.asarray(s[v.name]) for v in graph.inputs])
        got = run(graph, s)
        fp64 = FP64(graph, s)
        for v, ref in zip(graph.outputs, refs):
            rep = judge(v.name, got[v.name], ref, rtol, fp64)
            prev = worst.get(v.name)
            worst[v.name] = rep if prev is None else prev.merge(rep)
    report = VerifyReport(src.label, len(sets), [worst[v.name] for v in graph.outputs if v.name in worst],
                          spec=spec_check(graph, sets[0]), oracle="tensorflow")
    dropped = graph.source.side_effect_ops
    if dropped:
        report.info.append(f"the program leaves out {len(dropped)} op(s) with side effects that TensorFlow ran: "
                           + ", ".join(f"{e['op']} ({e['node']})" for e in dropped))
    return report


def _run_source(src: TFSource, arrays: list[np.ndarray]) -> list[np.ndarray]:
    try:
        return src.run(arrays)
    except Exception as e:  # TensorFlow's own errors (e.g. NCHW kernels on CPU) end as one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConversionError(f"TensorFlow could not run the source model: {first[:300]}", file=src.label) from None


def check_trusted(src: TFSource, trust_model: bool = False) -> None:
    """Refuse (one :class:`InputError`) to run ``src`` in TensorFlow when its graph holds ops that reach outside the
    process, run Python or can block (:data:`REFUSED_EFFECTS`), unless ``trust_model`` (or ``src`` was opened
    with it)."""
    if trust_model or src.trusted:
        return
    refused = [e for e in source_effects(src) if e.kind in REFUSED_EFFECTS]
    if refused:
        raise InputError(f"verify runs the source model in TensorFlow, and its graph holds op(s) that touch the file "
                         f"system, call Python or wait on queues ({describe_effects(refused)}); not run: pass "
                         "--trust-model (API trust_model=True) if you trust this model", file=src.label)
