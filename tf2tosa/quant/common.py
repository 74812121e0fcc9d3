"""What every quantized rule asks of a value: is it quantized, with which parameters; shared by the conv-family
(:mod:`.conv`, :mod:`.fully_connected`) and elementwise (:mod:`.elementwise`) helpers and the rules themselves.

* :func:`is_quantized` — any value carries quantization parameters;
  :func:`is_quantized_i8_i16` — any value is an int8/int16 tensor with them (the elementwise rules' quantized path).
* :func:`qparams` — a value's :class:`~tf2tosa.ir.QuantParams` (per tensor or per channel);
  :func:`per_tensor` — its one (scale, zero point); :func:`scale_zp` — the same for an operand of an elementwise
  rule, which must be int8, or int16 with zero point 0 (TFLite's int16 is symmetric).
* :func:`is_hybrid` — a float op with an int8 constant weight (LiteRT's hybrid kernels, :mod:`.hybrid`), and
  :func:`check_mode` — the ``hybrid`` option checked: what every conversion asks, without loading :mod:`.hybrid`.
"""

from __future__ import annotations

from ..errors import InputError, Unsupported
from ..ir import DType, Operation, QuantParams, Value
from ..tosa.builder import Builder

#: the quantized activation types of the elementwise rules
QDTYPES = (DType.INT8, DType.INT16)


def is_quantized(*values: Value) -> bool:
    return any(v.type.is_quantized for v in values)


def is_quantized_i8_i16(*vs: Value) -> bool:
    return any(v.type.quant is not None and v.dtype in QDTYPES for v in vs)


#: values of the ``hybrid`` conversion option (``--hybrid``): LiteRT's hybrid kernels, or float weights
MODES = ("kernel", "dequantize")


def check_mode(value: object, file: str | None = None) -> str:
    mode = "kernel" if value is None else str(value)
    if mode not in MODES:
        raise InputError(f"hybrid (--hybrid) must be 'kernel' or 'dequantize', not {value!r}", file=file)
    return mode


def is_hybrid(x: Value, w: Value) -> bool:
    """A float32 activation with an int8 (or uint8) quantized constant weight: LiteRT's hybrid kernels."""
    return (x.dtype is DType.FP32 and not x.type.is_quantized and w.dtype in (DType.INT8, DType.UINT8)
            and w.type.quant is not None)


def qparams(v: Value, what: str = "tensor") -> QuantParams:
    """``v``'s quantization; Unsupported when it has none."""
    q = v.type.quant
    if q is None:
        raise Unsupported(f"{what} {v.name} is not quantized")
    return q


def per_tensor(v: Value, what: str = "tensor") -> tuple[float, int]:
    """(scale, zero point) of a per-tensor quantized value."""
    q = qparams(v, what)
    if q.per_channel:
        raise Unsupported(f"{what} {v.name} must be quantized per tensor")
    return float(q.s), int(q.zp)


def scale_zp(op: Operation, v: Value) -> tuple[float, int]:
    """(scale, zero point) of a per-tensor quantized i8/i16 value."""
    q = v.type.quant
    if q is None or v.dtype not in QDTYPES:
        raise Unsupported(f"{op.name}: {v.name} is {v.dtype.value} without int8/int16 quantization")
    if q.per_channel:
        raise Unsupported(f"{op.name}: per-channel quantized {v.name}")
    if v.dtype is DType.INT16 and q.zp != 0:
        raise Unsupported(f"{op.name}: int16 {v.name} with zero point {q.zp} (TFLite int16 is symmetric)")
    return float(q.s), int(q.zp)


def same_quant(a: Value, b_: Value) -> bool:
    qa, qb = a.type.quant, b_.type.quant
    return qa is not None and qb is not None and qa.scale == qb.scale and qa.zero_point == qb.zero_point


def to_i32(b: Builder, x: Value, zp: int = 0) -> Value:
    """x - zp as i32 (RESCALE ×1: multiplier 2^30, shift 30, exact; spec: RESCALE)."""
    from .rescale import rescale  # (what a float conversion reads here, is_quantized, loads no RESCALE builder)

    return rescale(b, x, 1.0, DType.INT32, in_zp=zp, double_round=False)


__all__ = ["MODES", "QDTYPES", "check_mode", "is_hybrid", "is_quantized", "is_quantized_i8_i16", "per_tensor",
           "qparams", "same_quant", "scale_zp", "to_i32"]
