"""How far an independent float32 implementation of a program may stray from the program's fp64 value.

The bound the verifier (:func:`.compare.judge`) and the test suite judge float outputs by, past the plain relative
tolerance.  Why it has this form, and its factor, measured:

Where the float spread comes from (measured on MobileNetV2 224, tests/modelgen.py): LiteRT with 1 or 2 threads
gives bit-identical outputs, so does our executor with OPENBLAS_NUM_THREADS 1 or 2, and building the model twice
gives the same bytes.  The spread is fp32 rounding: a deterministic function of the weights and the inputs
(seed 0: our fp32 run vs LiteRT 1.09e-4 of max|output|, seed 2: 2.9e-5), so a fixed 1e-4 sat inside it, and a
model built on another machine (TF's calibration pass runs CPU-specific kernels) moves it.

Both sides are therefore compared with an fp64 anchor instead of with each other: our executor's precise run (fp64
on the same fp32 inputs and constants), itself checked against the Arm reference model's precise run within
``PRECISE_REL`` (tests/e2e.py). An fp32 implementation I of the same graph may then differ from the anchor by its
own rounding noise. Its size is measured on the spot by our own fp32 evaluation of this very graph, whose every op
is within its spec accuracy bound (checked by the per-op spec check): eps = the largest max|ours_fp32 - ours_fp64|
over three samples, the given inputs and the inputs moved by one ulp up and down (fp32_noise). One sample alone is a
poor estimate: on some inputs our fp32 run happens to be very accurate, and the ratio max|I - fp64| / eps then
reached 23 (small_cnn, 40 seeds). With three samples the ratio over 40 seeds each of small_cnn, mobilenet_v2_small
and depthwise_net, and 12 of mobilenet_v2 (224), for LiteRT's default and BUILTIN_REF kernels and the Arm reference
model's fp32 mode (396 comparisons) was at most 6.3 (small_cnn; mobilenet_v2: 2.1; median about 1);
FP32_NOISE_FACTOR = 24 leaves a margin of 3.8. Over the suite's float models the largest use of the bound is 0.22
(resize/tf2_bilinear).
The floor FP32_FLOOR_ULP units in the last place of max|fp64| covers graphs our fp32 run evaluates exactly (data
movement, one correctly rounded op: eps = 0) while another runtime uses approximations: XNNPACK's fp32
sigmoid/tanh/exp/log are within a few ulp; 16 ulp is above the spec's largest ULP allowance (5 ulp: ERF, LOG)
and its SIGMOID/TANH bounds for |x| <= 1 (2-8 ulp).  Bound: max(24 eps, 16 ulp(max|fp64|)).
A real error does not hide in this: a weight perturbed by 1e-3 or a kernel off by 1e-3 moves a one-op output by
about 50-300 times the bound (tests/test_fault_injection.py shows each op family failing).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..executor import ExecutionError, run
from ..executor.compliance import normal_frac
from ..ir import DType, Graph

FP32_NOISE_FACTOR = 24.0
FP32_FLOOR_ULP = 16.0


def fp32_bound(ours32: np.ndarray, ours64: np.ndarray, dtype: DType | None = None, noise: float = 0.0) -> float:
    """Largest admissible max|I - ours64| for an independent fp32 (or fp16/bf16) implementation I of the graph.

    ``noise``: our fp32 noise on re-rounded inputs (:func:`fp32_noise`), joined to ``|ours32 - ours64|``."""
    frac = normal_frac(dtype) if dtype is not None and dtype.is_float else 23
    a64 = np.asarray(ours64, np.float64)
    fin = np.isfinite(a64)
    if not fin.any():
        return 0.0
    eps = max(float(np.abs(np.asarray(ours32, np.float64)[fin] - a64[fin]).max()), noise)
    floor = FP32_FLOOR_ULP * 2.0 ** -frac * float(np.abs(a64[fin]).max())
    return max(FP32_NOISE_FACTOR * eps, floor)


def fp32_noise(graph: Graph, feed: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Our fp32 noise per float output: max|fp32 - fp64| of our executor with every float input moved one ulp up,
    and one ulp down (two more samples of the rounding noise of this graph near these inputs)."""
    noise: dict[str, float] = {}
    if not any(np.issubdtype(np.asarray(a).dtype, np.floating) for a in feed.values()):
        return noise
    for direction in (np.inf, -np.inf):
        moved = {k: (np.nextafter(a, a.dtype.type(direction)).astype(a.dtype)
                     if np.issubdtype(a.dtype, np.floating) else a) for k, a in feed.items()}
        try:
            a32 = run(graph, moved)
            a64 = run(graph, moved, precise=True)
        except ExecutionError:  # moved outside the graph's domain: no sample
            continue
        for v in graph.outputs:
            if v.dtype.is_float:
                x, y = np.asarray(a32[v.name], np.float64), np.asarray(a64[v.name], np.float64)
                fin = np.isfinite(x) & np.isfinite(y)
                if fin.any():
                    noise[v.name] = max(noise.get(v.name, 0.0), float(np.abs(x[fin] - y[fin]).max()))
    return noise
