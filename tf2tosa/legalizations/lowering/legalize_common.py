"""Helpers shared by the legalization rules (the lowering document's "common legalization functions").

Float paths only here; quantized helpers live in :mod:`tf2tosa.quant`.
"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ...ir import DType, Operation, Value
from ...tosa.builder import Builder


def positive_axis(axis: int, rank: int) -> int:
    """Map a possibly negative axis into [0, rank) (lowering doc: common legalization functions, positive axis)."""
    if not -rank <= axis < max(rank, 1):
        raise Unsupported(f"axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def const_operand(op: Operation, k: int, what: str = "operand") -> np.ndarray:
    """The constant array of operand ``k``; raises Unsupported when it is absent or not constant."""
    if not 0 <= k < len(op.operands):
        raise Unsupported(f"{what} (operand {k}) is missing: {op.name} has {len(op.operands)} operand(s)")
    v = op.operands[k]
    c = v.const()
    if c is None:
        raise Unsupported(f"{what} ({v.name}) must be a compile-time constant")
    return c


def fused_activation(b: Builder, x: Value, act: str | None) -> Value:
    """Apply a TFLite fused activation (float path; lowering doc: fused activation, with RELUN → CLAMP)."""
    if act in (None, "NONE"):
        return x
    if x.type.is_quantized:
        raise Unsupported("quantized fused activation")  # the quantized path lives in tf2tosa.quant
    big = float(np.finfo(x.dtype.np_dtype()).max) if x.dtype.is_float else float(np.finfo(np.float32).max)
    bounds = {"RELU": (0.0, big), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}
    if act in bounds:
        lo, hi = bounds[act]
        return b.clamp(x, lo, hi)
    if act == "TANH":
        return b.tanh(x)
    raise Unsupported(f"fused activation {act}")


def float_zp(b: Builder, dtype: DType) -> Value:
    """The zero-point tensor a float CONV/POOL/MATMUL/NEGATE needs (value 0)."""
    return b.zp(0.0 if dtype.is_float else 0, dtype)


def acc_type_for(dtype: DType) -> str:
    """Accumulator type for convolution-like ops of input type ``dtype``."""
    return {DType.FP32: "FP32", DType.FP16: "FP32", DType.BF16: "FP32", DType.INT8: "INT32",
            DType.INT16: "INT48"}[dtype]


def scalar_const(b: Builder, value: float | int, like: Value) -> Value:
    """A constant of ``like``'s dtype and rank with every dim 1 (for equal-rank broadcasting)."""
    arr = np.full((1,) * like.type.rank, value, dtype=like.dtype.np_dtype())
    return b.const(arr, like.dtype)
