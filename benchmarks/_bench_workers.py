"""Timing workers for ``bench_executor.py``: each runs one engine in its own process and times it inside.

    python _bench_workers.py ENGINE MODEL INPUTS.npz REPEAT [OPTION]

ENGINE is ``ours`` (tf2tosa executor on a .tosa; needs the main environment), ``refmodel`` (Arm's
``tosa_reference_model`` Python module on a .tosa; run with the .venv-tosa interpreter) or ``litert`` (LiteRT on
a .tflite, OPTION ``ref`` for BUILTIN_REF kernels or ``default``).  Inputs are the arrays of INPUTS.npz in
graph-input order (keys ``i0``, ``i1`` …).  Prints one JSON line: the seconds of every timed run (after
``WARMUP`` untimed warm-up runs, whose seconds are given too) and their CPU seconds (all threads), the resident-set
size before the first run (VmRSS) and its peak (VmHWM), in KiB, the first output for a cross-check, and whether the
last run's output equals it bit for bit (our executor's later runs take its prepared paths).  This file imports
nothing from tf2tosa at module level, so the tosa-tools interpreter can run it.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from collections.abc import Callable
from typing import Any


def _rss_kib(field: str = "VmHWM") -> int:
    """Peak (VmHWM) or current (VmRSS) resident set of this process in KiB (ru_maxrss as a fallback, which on
    Linux also counts the parent's peak from before exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _ours(model: str, arrays: list[Any], option: str) -> Callable[[], Any]:
    import numpy as np

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    from tf2tosa.executor import run
    from tf2tosa.serializer import load

    graph = load(model)
    feed = [np.asarray(a) for a in arrays]

    def go() -> Any:
        return next(iter(run(graph, feed).values()))

    return go


def _refmodel(model: str, arrays: list[Any], option: str) -> Callable[[], Any]:
    import numpy as np
    import tosa_reference_model

    with open(model, "rb") as f:
        data = f.read()
    feed = [np.ascontiguousarray(a) for a in arrays]

    def go() -> Any:
        outs, status = tosa_reference_model.run(data, feed, tosa_level="NONE")
        if status.name != "TOSA_VALID":
            raise RuntimeError(f"reference model status {status.name}")
        return outs[0]

    return go


def _litert(model: str, arrays: list[Any], option: str) -> Callable[[], Any]:
    import numpy as np
    from ai_edge_litert import interpreter as tfl

    resolver = tfl.OpResolverType.BUILTIN_REF if option == "ref" else tfl.OpResolverType.AUTO
    interp = tfl.Interpreter(model_path=model, num_threads=1, experimental_op_resolver_type=resolver)
    interp.allocate_tensors()
    ins = interp.get_input_details()
    out = interp.get_output_details()[0]["index"]
    for d, a in zip(ins, arrays):
        interp.set_tensor(d["index"], np.ascontiguousarray(a))

    def go() -> Any:
        interp.invoke()
        return interp.get_tensor(out)

    return go


ENGINES = {"ours": _ours, "refmodel": _refmodel, "litert": _litert}

#: untimed runs before the timed ones, the same for every engine: our executor checks its first two runs through the
#: kernels and takes its prepared paths from the third (docs/design-notes.md), and the C allocator's first-touch page
#: faults settle over the first few runs (MobileNetV2 float32: ~1,900, ~500, 0 and ~700 faults on runs 1-4, none
#: after); LiteRT and the reference model are steady from their first run.  Their times are reported too.
WARMUP = 3


def main(argv: list[str]) -> int:
    import numpy as np

    engine, model, inputs, repeat = argv[0], argv[1], argv[2], int(argv[3])
    option = argv[4] if len(argv) > 4 else ""
    with np.load(inputs, allow_pickle=False) as z:
        arrays = [z[f"i{k}"] for k in range(len(z.files))]
    t0 = time.perf_counter()
    go = ENGINES[engine](model, arrays, option)
    setup = time.perf_counter() - t0
    rss0 = _rss_kib("VmRSS")
    warmup = []
    for i in range(WARMUP):
        t = time.perf_counter()
        out = go()
        warmup.append(time.perf_counter() - t)
        if i == 0:
            first = np.asarray(out)
    times, cpu = [], []
    last = first
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        last = go()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    res = {"engine": engine, "option": option, "setup_s": setup, "warmup_times": warmup, "times": times,
           "cpu_times": cpu,
           "rss_before_kib": rss0,
           "rss_peak_kib": _rss_kib(), "output": first.astype(np.float64).reshape(-1)[:4096].tolist(),
           "output_dtype": str(first.dtype),
           # the last timed run against the first, bit for bit (ours: the prepared paths against the checked run)
           "last_equals_first": bool(np.array_equal(np.asarray(last), first))}
    sys.stdout.write(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
