"""§2.6 Elementwise unary operators."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from ..ir.types import DType
from . import numerics as nm
from .common import F32, float_unary, float_unary_wide
from .registry import bind, error_if, in_dtype, kernel, scalar, to_out


@kernel("ABS")
def abs_(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.6.1 ABS (float test read as value1 < 0, erratum §6.5)."""
    args = bind(op, ins)
    if in_dtype(op).is_float:
        return float_unary(op, args.input1, np.abs)
    r = np.abs(args.input1.astype(np.int64))
    nm.check_fits(r, in_dtype(op), "ABS result")
    return [to_out(r, op)]


@kernel("BITWISE_NOT")
def bitwise_not(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return [to_out(~args.input1.astype(np.int64), op)]


@kernel("CEIL")
def ceil(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary(op, args.input1, np.ceil)


@kernel("FLOOR")
def floor(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary(op, args.input1, np.floor)


@kernel("CLZ")
def clz(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.6.4 CLZ, count_leading_zeros spec 4.5.1 count_leading_zeros."""
    args = bind(op, ins)
    return [to_out(nm.count_leading_zeros32(args.input1), op)]


@kernel("COS")
def cos(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary_wide(op, args.input1, np.cos)


@kernel("SIN")
def sin(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary_wide(op, args.input1, np.sin)


@kernel("EXP")
def exp(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary_wide(op, args.input1, np.exp)


def _log(x: np.ndarray) -> np.ndarray:
    """apply_log (spec 4.5.1 apply_log): log(0) = -inf, log(<0) = NaN."""
    return np.where(x < 0, np.nan, np.log(x)).astype(x.dtype)


@kernel("LOG")
def log(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary_wide(op, args.input1, _log)


@kernel("LOGICAL_NOT")
def logical_not(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return [to_out(np.logical_not(args.input1.astype(bool)), op)]


@kernel("NEGATE")
def negate(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.6.10 NEGATE: out = clip(output_zp - (x - input1_zp)) computed in acc_t (i32)."""
    args = bind(op, ins)
    dt = in_dtype(op)
    izp = scalar(args.input1_zp) if args.input1_zp is not None else 0
    ozp = scalar(args.output_zp) if args.output_zp is not None else 0
    if dt.is_float:
        return float_unary(op, args.input1, np.negative)
    error_if(dt is not DType.INT8 and izp != 0, op, "input1_zp must be 0 unless i8")
    error_if(dt is not DType.INT8 and ozp != 0, op, "output_zp must be 0 unless i8")
    v = nm.apply_sub_s(args.input1, np.int64(izp), DType.INT32)
    v = nm.apply_sub_s(np.int64(0), v, DType.INT32)
    v = nm.apply_add_s(v, np.int64(ozp), DType.INT32)
    lo, hi = dt.range()
    return [to_out(np.clip(v, lo, hi), op)]


@kernel("RECIPROCAL")
def reciprocal(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary(op, args.input1, lambda x: (F32(1) / x).astype(x.dtype))


@kernel("RSQRT")
def rsqrt(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    return float_unary(op, args.input1, lambda x: (F32(1) / np.sqrt(x)).astype(x.dtype))
