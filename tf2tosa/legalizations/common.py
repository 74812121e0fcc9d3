"""Helpers shared by the legalization rules (the lowering document's "common legalization functions").

Float paths only here; quantized helpers live in :mod:`tf2tosa.quant`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder


def positive_axis(axis: int, rank: int) -> int:
    """Map a possibly negative axis into [0, rank) (L137-146)."""
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


def same_padding(in_size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TF/TFLite SAME padding (extra pad at the end), §6.2."""
    if stride < 1 or kernel < 1 or dilation < 1:
        raise Unsupported(f"window of kernel {kernel}, stride {stride}, dilation {dilation}: each must be >= 1")
    eff_k = (kernel - 1) * dilation + 1
    out = -(-in_size // stride)
    total = max(0, (out - 1) * stride + eff_k - in_size)
    return total // 2, total - total // 2


def window_padding(padding: str, in_hw: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                   dilation: Sequence[int] = (1, 1)) -> list[int]:
    """[top, bottom, left, right] for SAME/VALID, adjusted so TOSA's exact output-size division holds.

    TF floors the output size; TOSA 1.0 raises ERROR_IF on a remainder (idiv_check, S11682).  Reducing the
    bottom/right pad by the remainder gives the same outputs (those rows are never read).  A remainder larger
    than the pad is returned as a negative pad; :func:`apply_window_padding` turns it into a SLICE.
    """
    for what, vals in (("kernel", kernel), ("stride", stride), ("dilation", dilation)):
        if any(int(v) < 1 for v in vals[:2]):
            raise Unsupported(f"{what} {list(vals)} must be >= 1")
    pads: list[int] = []
    for i in range(2):
        if padding == "SAME":
            before, after = same_padding(in_hw[i], kernel[i], stride[i], dilation[i])
        elif padding == "VALID":
            before, after = 0, 0
        else:
            raise Unsupported(f"padding {padding!r}")
        eff_k = (kernel[i] - 1) * dilation[i] + 1
        r = (in_hw[i] + before + after - eff_k) % stride[i]
        pads += [before, after - r]
    return pads


def apply_window_padding(b: Builder, x: Value, pads: list[int]) -> tuple[Value, list[int]]:
    """SLICE away trailing rows/columns that negative pads from :func:`window_padding` stand for."""
    n, h, w, c = x.shape
    cut_h, cut_w = max(0, -pads[1]), max(0, -pads[3])
    if cut_h or cut_w:
        x = b.slice(x, [0, 0, 0, 0], [n, h - cut_h, w - cut_w, c])
    return x, [pads[0], max(0, pads[1]), pads[2], max(0, pads[3])]


def fused_activation(b: Builder, x: Value, act: str | None) -> Value:
    """Apply a TFLite fused activation (float path; L1001-1044 with RELUN → CLAMP)."""
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
