"""Lookup tables for ``tosa.TABLE`` (spec 2.5.17 TABLE) built from a real function and the tensors' quantization.

* :func:`table_i8`: the 256-entry i8 table of PRO-INT TABLE, ``result = table[value + 128]`` (spec 2.5.17 TABLE),
computed in
  the real domain: ``out[i + 128] = clamp(round(f((i - zp_in)·s_in) / s_out) + zp_out)``, rounding half away from
  zero like TFLite's ``TfLiteRound``.  This is what op_inventory §6.3 recommends for int8 activations on PRO-INT
  (no EXT-INT16 and no 9.7 interpolation error).  ``precision="float32"`` reproduces TFLite's ``LUTPopulate``,
  which evaluates the same formula in float32 and multiplies by ``1/s_out`` instead of dividing.
* :func:`table_i16`: the 513-entry i16 table of EXT-INT16 TABLE.  apply_lookup_s (spec 1.12.5: apply_lookup_s) reads
entry
  ``j = (v + 32768) >> 7`` and interpolates to ``j + 1`` with the 7 low bits, returning the value ×2^7 in i32.
  Entry ``j`` therefore holds ``round(f((j·128 - 32768)·s_in) / s_out) + zp_out`` clipped to int16 (spec 1.12.5:
  generate_lookup_table); the
  last entry (j = 512) is the function at 32768, only used as an interpolation end point.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import Unsupported
from ..ir import DType, QuantParams, Value
from ..tosa.builder import Builder

RealFn = Callable[[np.ndarray], np.ndarray]


def round_half_away(x: np.ndarray) -> np.ndarray:
    """std::round / TfLiteRound: ties away from zero."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _per_tensor(q: QuantParams, what: str) -> tuple[float, int]:
    if q.per_channel:
        raise Unsupported(f"TABLE needs per-tensor {what} quantization")
    return float(q.s), int(q.zp)


def _quantize(y: np.ndarray, s_out: float, zp_out: int, lo: int, hi: int) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    q = round_half_away(y / s_out)
    q = np.nan_to_num(q, nan=0.0, posinf=float(hi) + 1.0, neginf=float(lo) - 1.0)
    return np.clip(q + zp_out, lo, hi).astype(np.int64)


def table_i8(f: RealFn, in_q: QuantParams, out_q: QuantParams, out_dtype: DType = DType.INT8, *,
             precision: str = "float64") -> np.ndarray:
    """256 entries ``out[i + 128]`` for inputs i = -128..127 (spec 2.5.17 TABLE); int8 (or ``out_dtype``'s storage
    range).

    ``f`` receives a float64 array.  ``precision="float32"`` mimics TFLite's LUTPopulate (float32 arithmetic).
    """
    s_in, zp_in = _per_tensor(in_q, "input")
    s_out, zp_out = _per_tensor(out_q, "output")
    lo, hi = out_dtype.range()
    i = np.arange(-128, 128, dtype=np.int64)
    if precision == "float64":
        y = f((i - zp_in).astype(np.float64) * s_in)
        q = _quantize(y, s_out, zp_out, lo, hi)
    elif precision == "float32":
        x32 = np.float32(s_in) * (i - zp_in).astype(np.float32)
        y32 = np.asarray(f(x32.astype(np.float64)), dtype=np.float32)
        inv = np.float32(1.0) / np.float32(s_out)
        r = round_half_away((y32 * inv).astype(np.float32))
        r = np.nan_to_num(r, nan=0.0, posinf=float(hi) + 1.0, neginf=float(lo) - 1.0)
        q = np.clip(r + zp_out, lo, hi).astype(np.int64)
    else:
        raise ValueError(f"precision must be 'float64' or 'float32', not {precision!r}")
    return q.astype(out_dtype.np_dtype())


def table_i16(f: RealFn, in_q: QuantParams, out_q: QuantParams) -> np.ndarray:
    """513 int16 entries for the EXT-INT16 TABLE (spec 2.5.17 TABLE, apply_lookup_s spec 1.12.5: apply_lookup_s, 1.12.5:
    generate_lookup_table), clipped to int16 (spec 1.12.5: generate_lookup_table).

    The TABLE result is the interpolated output ×2^7 (i32); RESCALE it by 2^-7 (see :func:`apply_table_i16`).
    """
    s_in, zp_in = _per_tensor(in_q, "input")
    s_out, zp_out = _per_tensor(out_q, "output")
    j = np.arange(513, dtype=np.int64) * 128 - 32768
    y = f((j - zp_in).astype(np.float64) * s_in)
    return _quantize(y, s_out, zp_out, -32768, 32767).astype(np.int16)


def table_slopes_ok(table: np.ndarray) -> bool:
    """apply_lookup_s REQUIREs each slope ``table[j+1] - table[j]`` to fit int16 (spec 1.12.5: apply_lookup_s)."""
    d = np.diff(np.asarray(table, dtype=np.int64))
    return bool(np.all((d >= -32768) & (d <= 32767)))


def apply_table_i8(b: Builder, x: Value, table: np.ndarray, out_quant: QuantParams | None) -> Value:
    """``tosa.TABLE`` on an i8 tensor with a 256-entry i8 table; the result carries ``out_quant``."""
    if x.dtype is not DType.INT8:
        raise Unsupported(f"apply_table_i8 needs an i8 input, got {x.dtype.value}")
    t = np.asarray(table)
    if t.shape != (256,):
        raise Unsupported(f"an i8 TABLE needs 256 entries, got shape {list(t.shape)}")
    return b.emit("TABLE", [x, b.const(t, DType.INT8, name="table")], quant=out_quant).result


def apply_table_i16(b: Builder, x: Value, table: np.ndarray, out_quant: QuantParams | None) -> Value:
    """``tosa.TABLE`` on an i16 tensor (513 entries, EXT-INT16) then RESCALE ×2^-7 (single round) to i16."""
    from .rescale import rescale

    if x.dtype is not DType.INT16:
        raise Unsupported(f"apply_table_i16 needs an i16 input, got {x.dtype.value}")
    t = np.asarray(table)
    if t.shape != (513,):
        raise Unsupported(f"an i16 TABLE needs 513 entries, got shape {list(t.shape)}")
    if not table_slopes_ok(t):
        raise Unsupported("i16 TABLE slope does not fit int16 (S851)")
    r = b.emit("TABLE", [x, b.const(t, DType.INT16, name="table")]).result
    return rescale(b, r, 2.0 ** -7, DType.INT16, out_quant=out_quant, double_round=False)
