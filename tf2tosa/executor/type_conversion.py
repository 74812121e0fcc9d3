"""§2.13 CAST (S9694-9768) and RESCALE (S10067-10122)."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from ..ir.types import DType
from . import numerics as nm
from .registry import error_if, in_dtype, kernel, out_dtype, scalar, to_out


@kernel("CAST")
def cast(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    x = ins[0]
    it, ot = in_dtype(op), out_dtype(op)
    if ot is DType.BOOL:
        return [to_out(x != 0, op)]
    if ot.is_float:
        if it is DType.BOOL:
            return [to_out(x.astype(np.float32), op)]
        if it.is_float:
            # fp -> fp: one IEEE round-to-nearest-even step (via fp32 only when exact)
            src = x if it in (DType.FP32, DType.FP64) else x.astype(np.float32)
            return [to_out(src, op)]
        # int -> float: int64 -> target rounds once to nearest
        return [to_out(x.astype(np.int64).astype(np.float64) if ot is DType.FP64 else x.astype(np.int64), op)]
    if it is DType.BOOL:
        return [to_out(x.astype(np.int64), op)]
    if it.is_float:
        xf = x.astype(np.float64)
        r = np.rint(xf)  # ties to even (S9730)
        lo, hi = ot.range()
        r = np.nan_to_num(r, nan=0.0, posinf=hi, neginf=lo)  # NaN is unpredictable (S9726)
        return [to_out(np.clip(r, lo, hi).astype(np.int64), op)]
    xi = x.astype(np.int64)
    if ot.bits >= it.bits:
        return [to_out(xi, op)]
    return [to_out(nm.wrap(xi, ot.bits), op)]  # truncate (S9764)


@kernel("RESCALE")
def rescale(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    x, mult, shift = ins[0], ins[1].reshape(-1), ins[2].reshape(-1)
    izp = int(scalar(ins[3])) if len(ins) > 3 else 0
    ozp = int(scalar(ins[4])) if len(ins) > 4 else 0
    it, ot = in_dtype(op), out_dtype(op)
    a = op.attrs
    scale32 = bool(a.get("scale32", True))
    rmode = str(a.get("rounding_mode", "SINGLE_ROUND")).upper()
    per_channel = bool(a.get("per_channel", False))
    in_u = bool(a.get("input_unsigned", False))
    out_u = bool(a.get("output_unsigned", False))
    # zero points are stored in the data type; unsigned ones are zero-extended (S10091-10093)
    if in_u:
        izp &= (1 << it.bits) - 1
    if out_u:
        ozp &= (1 << ot.bits) - 1
    error_if(it is not DType.INT8 and (it is not DType.INT16 or not in_u) and izp != 0, op, "input_zp must be 0")
    error_if(ot is not DType.INT8 and (ot is not DType.INT16 or not out_u) and ozp != 0, op, "output_zp must be 0")
    error_if(it is DType.INT16 and in_u and izp not in (0, 32768), op, "uint16 input_zp must be 0 or 32768")
    error_if(ot is DType.INT16 and out_u and ozp not in (0, 32768), op, "uint16 output_zp must be 0 or 32768")
    error_if(scale32 and it is DType.INT48, op, "scale32 with i48 input")
    error_if(not scale32 and rmode == "DOUBLE_ROUND", op, "DOUBLE_ROUND needs scale32")
    error_if(in_u and out_u, op, "input_unsigned and output_unsigned")
    error_if(ot is DType.INT32 and in_u, op, "input_unsigned with i32 output")
    error_if(it is DType.INT32 and out_u, op, "output_unsigned with i32 input")
    error_if(it is DType.INT48 and out_u, op, "output_unsigned with i48 input")
    error_if(per_channel and x.ndim < 1, op, "per_channel with rank 0")
    nc = x.shape[-1] if per_channel else 1
    error_if(mult.size != nc or shift.size != nc, op, f"multiplier/shift need {nc} entries")
    v = x.astype(np.int64)
    if in_u:
        v = v & ((1 << it.bits) - 1)
    v = v - izp
    m, s = (mult.astype(np.int64), shift.astype(np.int64)) if per_channel else (mult[0], shift[0])
    if scale32:
        r = nm.apply_scale_32(v, m, s, rmode == "DOUBLE_ROUND")
        r = nm.wrap(r, 32)
    else:
        r = nm.apply_scale_16(v, m, s)
    r = nm.apply_add_s(r, np.int64(ozp), DType.INT32)
    if out_u:
        r = np.clip(r, 0, (1 << ot.bits) - 1)
        return [to_out(nm.wrap(r, ot.bits), op)]
    lo, hi = ot.range()
    return [to_out(np.clip(r, lo, hi), op)]
