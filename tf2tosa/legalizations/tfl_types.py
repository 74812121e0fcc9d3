"""TFLite type-conversion ops → TOSA 1.0: cast, dequantize (fp16 / constant weights), identity-like ops."""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from .common import scalar_const
from .layout_helpers import data_operand, tosa_dtype
from .registry import legalize

_INTS = (DType.INT8, DType.INT16, DType.INT32)
_FLOATS = (DType.FP16, DType.BF16, DType.FP32)


def truncate_toward_zero(b: Builder, x: Value) -> Value:
    """SELECT(x < 0, CEIL(x), FLOOR(x)): TFLite casts float→int by truncation, while TOSA CAST rounds to
    nearest-even (S9728-9730, op_inventory §5.8/§6.3), so make the value integral first."""
    zero = scalar_const(b, 0.0, x)
    neg = b.emit("GREATER", [zero, x]).result
    return b.emit("SELECT", [neg, b.ceil(x), b.floor(x)]).result


def convert(b: Builder, x: Value, out: DType) -> Value:
    """Value-convert ``x`` to ``out`` with TFLite cast semantics, using only CAST pairs TOSA 1.0 has
    (S9290-9692: no bool↔float, no i64)."""
    src = x.dtype
    if src is out:
        return x
    if src is DType.BOOL and out in _FLOATS:
        return b.cast(b.cast(x, DType.INT32), out)  # bool→i32 (PRO-INT) then i32→float (PRO-FP)
    if src in _FLOATS and out is DType.BOOL:
        ne = b.emit("EQUAL", [x, scalar_const(b, 0.0, x)]).result
        return b.logical_not(ne)
    if src in _FLOATS and out in _INTS:
        return b.cast(truncate_toward_zero(b, x), out)
    if src in _FLOATS + _INTS + (DType.BOOL,) and out in _FLOATS + _INTS + (DType.BOOL,):
        return b.cast(x, out)
    raise Unsupported(f"cast {src} -> {out}")


@legalize("tfl.cast", dtypes=("fp32", "i32", "i8", "i16", "bool"))
def cast(b: Builder, op: Operation) -> list[Value]:
    """CAST (trivial in L3048, but: float→int truncates in TFLite, int64 narrows to i32, bool↔float via i32)."""
    src = op.operands[0]
    if src.type.is_quantized or op.results[0].type.is_quantized:
        raise Unsupported("cast of quantized tensors")
    if src.dtype in (DType.UINT8, DType.UINT16) or op.results[0].type.dtype in (DType.UINT8, DType.UINT16):
        raise Unsupported("cast to/from unsigned types")
    out = tosa_dtype(op.results[0].type.dtype)
    if src.dtype in (DType.INT64, DType.UINT32, DType.UINT64) and src.const() is None:
        raise Unsupported(f"cast from a non-constant {src.dtype} tensor")
    x = data_operand(b, src)
    return [convert(b, x, out)]


@legalize("tfl.dequantize", dtypes=("fp32",))
def dequantize(b: Builder, op: Operation) -> list[Value]:
    """fp16 → fp32 CAST (folded for constant weights); constant int8 weights dequantized on the host.

    A non-constant quantized int8/int16 input becomes CAST/SUB/MUL in PRO-FP (:func:`dequantize_value`).
    """
    x = op.operands[0]
    out = tosa_dtype(op.results[0].type.dtype)
    if x.dtype in _FLOATS and not x.type.is_quantized:
        return [b.cast(data_operand(b, x), out)]
    c = x.const()
    q = x.type.quant
    if c is not None and q is not None:
        arr = np.asarray(c).astype(np.float64)
        scale = np.asarray(q.scale, dtype=np.float64)
        zp = np.asarray(q.zero_point, dtype=np.float64)
        if q.axis is not None and len(q.scale) > 1:
            shp = [1] * arr.ndim
            shp[q.axis] = len(q.scale)
            scale, zp = scale.reshape(shp), zp.reshape(shp)
        real = (arr - zp) * scale
        return [b.const(real.astype(out.np_dtype()), out)]
    if q is None or x.dtype not in (DType.INT8, DType.INT16):
        raise Unsupported(f"dequantize of {x.dtype}{' (no quantization)' if q is None else ''}")
    return [dequantize_value(b, x, out)]


def dequantize_value(b: Builder, x: Value, out: DType = DType.FP32) -> Value:
    """(CAST(x) − zp) · scale in ``out`` (lower_dequantize_op L428-437, with its missing return fixed).

    TFLite computes float(double(scale)·(q − zp)); scale is a float32 and |q − zp| < 2^17, so that product is
    exact in double and the single rounding to float equals fp32 MUL's rounding: bit-exact.  CAST i8/i16→fp
    needs PRO-FP (S9390-9436); MUL takes a shift operand of 0 in 1.0 (§4 #11).
    """
    q = x.type.quant
    assert q is not None
    rank = x.type.rank
    f = b.emit("CAST", [x], out_dtype=out).result  # result carries no quantization
    cshape = [1] * rank
    if q.axis is not None and len(q.scale) > 1:
        cshape[q.axis] = len(q.scale)
    zp = np.asarray(q.zero_point, dtype=np.float64).reshape(cshape).astype(out.np_dtype())
    sc = np.asarray(q.scale, dtype=np.float32).reshape(cshape).astype(out.np_dtype())
    if np.any(zp != 0):
        f = b.binary("SUB", f, b.const(zp, out))
    return b.mul(f, b.const(sc, out))



@legalize("tfl.identity", dtypes=("fp32", "i8", "i16", "i32", "bool"))
def identity(b: Builder, op: Operation) -> list[Value]:
    """Identity-like ops forward their operand (no IDENTITY op needed; outputs get one from the pipeline)."""
    return [data_operand(b, op.operands[0])]
