"""Float/bool/int32 rules for TFLite's reductions and arg_max / arg_min.

1.0 reductions take one axis and keep it as size 1 (S7663, §4 #19): one REDUCE_* per axis, then a RESHAPE when
keep_dims is false (lower_reduce_op, L507-544).  Quantized inputs raise Unsupported except where the result
does not depend on the scale (reduce_max/min, arg_max/arg_min).
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from .common import const_operand, float_zp, positive_axis
from .nn_helpers import FLOAT_TYPES, axes_operand, fconst, reduce_axes, require_not_quantized, static_shape
from .registry import legalize


def _x_axes(op: Operation) -> tuple[Value, list[int]]:
    x = op.operands[0]
    return x, axes_operand(op, 1, x.type.rank)


def _keep(op: Operation) -> bool:
    return bool(op.attrs.get("keep_dims", False))


@legalize("tfl.mean")
def mean(b: Builder, op: Operation) -> list[Value]:
    """REDUCE_SUM per axis, then MUL by 1/N (L3747-3771, float path)."""
    x, axes = _x_axes(op)
    require_not_quantized(op, x)
    if x.dtype not in FLOAT_TYPES:
        raise Unsupported(f"mean on {x.dtype.value} not supported")
    shape = static_shape(x)
    count = int(np.prod([shape[a] for a in axes])) if axes else 1
    s = reduce_axes(b, "REDUCE_SUM", x, axes, _keep(op))
    if count == 1:
        return [s]
    return [b.mul(s, fconst(b, 1.0 / count, s))]


@legalize("tfl.sum")
def sum_(b: Builder, op: Operation) -> list[Value]:
    """REDUCE_SUM per axis (L4347; float or i32, S7680-7700)."""
    x, axes = _x_axes(op)
    require_not_quantized(op, x)
    if x.dtype not in FLOAT_TYPES and x.dtype is not DType.INT32:
        raise Unsupported(f"sum on {x.dtype.value} not supported")
    return [reduce_axes(b, "REDUCE_SUM", x, axes, _keep(op))]


def _minmax(opcode: str) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x, axes = _x_axes(op)
        if x.type.is_quantized:
            # max/min commute with a positive-scale affine map: same quantization in and out needed
            out_q = op.results[0].type.quant
            if out_q != x.type.quant:
                raise Unsupported(f"quantized {op.name} with different input/output quantization")
        if x.dtype not in FLOAT_TYPES and x.dtype not in (DType.INT8, DType.INT16, DType.INT32):
            raise Unsupported(f"{op.name} on {x.dtype.value} not supported")
        return [reduce_axes(b, opcode, x, axes, _keep(op), quant=x.type.quant, nan_mode="PROPAGATE")]

    rule.__doc__ = f"{opcode} per axis (L3951-3977; i8/i16/i32/float, S7336-7352)."
    legalize(f"tfl.{opcode.lower()}")(rule)


_minmax("REDUCE_MAX")
_minmax("REDUCE_MIN")


@legalize("tfl.reduce_prod")
def reduce_prod(b: Builder, op: Operation) -> list[Value]:
    """REDUCE_PRODUCT (the 1.0 name of REDUCE_PROD, §4 #18); float only (S7578-7596)."""
    x, axes = _x_axes(op)
    require_not_quantized(op, x)
    if x.dtype not in FLOAT_TYPES:
        raise Unsupported(f"reduce_prod on {x.dtype.value} (REDUCE_PRODUCT is float only)")
    return [reduce_axes(b, "REDUCE_PRODUCT", x, axes, _keep(op))]


def _bool_reduce(name: str, opcode: str) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x, axes = _x_axes(op)
        if x.dtype is not DType.BOOL:
            raise Unsupported(f"{op.name} on {x.dtype.value}")
        return [reduce_axes(b, opcode, x, axes, _keep(op))]

    rule.__doc__ = f"{opcode} per axis (bool)."
    legalize(name)(rule)


_bool_reduce("tfl.reduce_any", "REDUCE_ANY")
_bool_reduce("tfl.reduce_all", "REDUCE_ALL")


def _arg_axis(op: Operation, x: Value) -> int:
    arr = np.asarray(const_operand(op, 1, "axis")).reshape(-1)
    if arr.size != 1:
        raise Unsupported(f"{op.name} axis must be a single value, got {arr.tolist()}")
    return positive_axis(int(arr[0]), x.type.rank)


def _check_arg_input(op: Operation, x: Value) -> None:
    # ARGMAX inputs: i8 (PRO-INT), i16 (EXT-INT16), fp16/fp32 (PRO-FP) — no i32 (S1028-1086).
    if x.dtype not in FLOAT_TYPES and x.dtype not in (DType.INT8, DType.INT16):
        raise Unsupported(f"{op.name} on {x.dtype.value} (TOSA ARGMAX has no {x.dtype.value} mode)")
    if x.type.rank == 0:
        raise Unsupported(f"{op.name} of a rank-0 tensor")


@legalize("tfl.arg_max", dtypes=("fp32", "i8"))
def arg_max(b: Builder, op: Operation) -> list[Value]:
    """ARGMAX, i32 result (L2975-2985).  TFLite's i64 output is narrowed to i32 (§6.7; indices < 2^31).

    Quantized i8 input is fine: a positive-scale affine map keeps the argmax.
    """
    x = op.operands[0]
    _check_arg_input(op, x)
    axis = _arg_axis(op, x)
    return [b.argmax(x, axis=axis, nan_mode="PROPAGATE", out_dtype=DType.INT32)]


@legalize("tfl.arg_min", dtypes=("fp32", "i8"))
def arg_min(b: Builder, op: Operation) -> list[Value]:
    """ARGMAX of an order-reversing map (1.0 has no ARGMIN): NEGATE for floats, BITWISE_NOT (-x-1, no overflow
    at -128 unlike NEGATE) for integers; the first minimum maps to the first maximum."""
    x = op.operands[0]
    _check_arg_input(op, x)
    axis = _arg_axis(op, x)
    if x.dtype.is_float:
        r = b.negate(x, float_zp(b, x.dtype), float_zp(b, x.dtype))
    else:
        r = b.bitwise_not(x)
    return [b.argmax(r, axis=axis, nan_mode="PROPAGATE", out_dtype=DType.INT32)]
