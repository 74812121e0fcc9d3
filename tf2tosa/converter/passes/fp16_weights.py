"""Float16 weights kept as float16.

before: a folded TOSA graph in which the source's float16 weights (TFLite's ``DEQUANTIZE`` of an fp16 constant,
recorded by the rule in ``graph.meta["fp16_weights"]``) became fp32 constants; after: every fp32 ``CONST`` of at
least :data:`MIN_ELEMENTS` elements whose values are all exactly float16 is an fp16 ``CONST`` followed by
``CAST`` to fp32 (spec 2.12.1 CAST: fp16 → fp32 is exact, in PRO-FP), so the file keeps about the source's size.

Folding has already run (so reshaped and transposed weights are narrowed too) and does not run again, so the
``CAST`` stays.  Graphs without fp16 weights are left as they are.
"""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...ir import DType, Graph
from ...tosa.builder import Builder

#: fp32 constants smaller than this stay fp32 (a CAST op and a tensor cost more than the bytes saved)
MIN_ELEMENTS = 64

#: ``--fp16-weights`` choices: keep fp16 constants + CAST, or expand them to fp32 constants
MODES = ("keep", "expand")


def fp16_weights_mode(value: object, file: str | None = None) -> str:
    """The ``fp16_weights`` option checked: ``"keep"`` (the default) or ``"expand"``."""
    mode = "keep" if value is None else str(value)
    if mode not in MODES:
        raise InputError(f"fp16_weights (--fp16-weights) must be 'keep' or 'expand', not {value!r}", file=file)
    return mode


def _fp16_exact(values: np.ndarray, piece: int = 1 << 20) -> np.ndarray | None:
    """``values`` as float16 when that is exact for every element (NaNs excluded), else None; checked piece by
    piece, so no fp32 temporary of the whole constant is made."""
    flat = values.reshape(-1)
    half = np.empty(flat.shape, np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        for lo in range(0, flat.size, piece):
            part = flat[lo:lo + piece]
            half[lo:lo + piece] = part
            if not np.array_equal(half[lo:lo + piece].astype(np.float32), part):
                return None
    return half.reshape(values.shape)


def keep_fp16_weights(graph: Graph) -> int:
    """Store the fp16-exact fp32 constants of a graph with fp16 weights as fp16 + CAST; returns how many."""
    sources: dict[int, np.ndarray] = graph.meta.pop("fp16_sources", {})
    if not graph.meta.pop("fp16_weights", 0):
        return 0
    count = 0
    for op in graph.topological_order():
        if op.name != "tosa.CONST" or op.result.dtype is not DType.FP32 or op.result.type.size < MIN_ELEMENTS:
            continue
        r = op.result
        src = sources.get(r.id)
        half: np.ndarray | None
        if src is not None and src.dtype == np.float16 and src.size == r.type.size and not np.isnan(src).any():
            half = src.reshape(r.type.static_shape)  # the source's own fp16 values, a view of the .tflite
        else:
            half = _fp16_exact(np.asarray(op.attrs["values"]))
        if half is None:
            continue
        c = graph.add_op("tosa.CONST", [], [r.type.with_dtype(DType.FP16)], {"values": half}, [f"{r.name}_fp16"],
                         location=op.location).result
        b = Builder(graph, location=op.location, fold=False)
        cast = b.emit("CAST", [c], out_dtype=DType.FP32, names=[f"{r.name}_f32"]).result
        cast.source = r.source
        graph.replace_all_uses(r, cast)
        graph.remove_op(op)
        count += 1
    return count
