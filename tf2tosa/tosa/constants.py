"""Frontend constants as TOSA constants: the one place a constant's element type is narrowed to a TOSA type."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import DType, TensorType


def narrow_constant(arr: np.ndarray, dtype: DType) -> tuple[np.ndarray, DType]:
    """Narrow a 64-bit integer constant to i32 when its values fit (TOSA has no i64 tensors)."""
    if dtype in (DType.INT64, DType.UINT32, DType.UINT64):
        info = np.iinfo(np.int32)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            raise ValueError("constant does not fit in int32")
        return arr.astype(np.int32), DType.INT32
    return arr, dtype


def retype(t: TensorType, dtype: DType) -> TensorType:
    return TensorType(t.shape, dtype, t.quant)


def tosa_constant(values: Any, t: TensorType) -> tuple[Any, TensorType]:
    """``values`` and ``t`` of a frontend constant made TOSA: unchanged when ``t`` already has a TOSA element type,
    else narrowed (:func:`narrow_constant`).  Raises ValueError when the constant has no TOSA type."""
    if not t.dtype.is_tosa:
        values, dt = narrow_constant(values, t.dtype)
        t = retype(t, dt)
    if not t.dtype.is_tosa:
        raise ValueError(f"constant of type {t.dtype.value} has no TOSA type")
    return values, t


__all__ = ["narrow_constant", "retype", "tosa_constant"]
