"""Constant values widened when read: the float32 values of a float16 array, not stored.

A TFLite float16 weight reaches the rules as ``DEQUANTIZE(fp16 constant)``: a float32 tensor.  Folded eagerly, that
CAST makes a float32 copy of the weight (twice the source's bytes) which ``--fp16-weights keep`` then narrows back
to the source's float16 array.  For a large weight the copy is most of a conversion's peak memory (VGG16's
4096x4096 fully-connected weight: 64 MiB).  While the weights are kept as float16, the folded CAST holds a
:class:`Widened` instead: it has the float32 constant's shape and type, and ``np.asarray`` of it computes the values
(exactly: every float16 is a float32), for a rule that reads them, and drops them after.  A RESHAPE of it folds to
another :class:`Widened` (a view of the source), and the narrowing pass takes the float16 array straight from it.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Widened:
    """The float32 values of ``half`` (a float16 array), computed on each read."""

    __slots__ = ("half",)

    dtype = np.dtype(np.float32)

    def __init__(self, half: np.ndarray) -> None:
        if half.dtype != np.float16:
            raise TypeError(f"Widened holds a float16 array, not {half.dtype}")
        self.half = half

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.half.shape)

    @property
    def ndim(self) -> int:
        return int(self.half.ndim)

    @property
    def size(self) -> int:
        return int(self.half.size)

    @property
    def nbytes(self) -> int:
        return 4 * int(self.half.size)

    def __len__(self) -> int:
        return len(self.half)

    def reshape(self, *shape: Any) -> Widened:
        return Widened(self.half.reshape(*shape))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:
            raise ValueError("the float32 values of a Widened constant are made when read (a copy)")
        out = self.half.astype(np.float32)
        return out if dtype is None else out.astype(dtype, copy=False)

    def __getattr__(self, name: str) -> Any:
        # any other ndarray attribute (tobytes, min, ...) reads the float32 values
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(np.asarray(self), name)

    def __repr__(self) -> str:
        return f"Widened(float16 -> float32, shape={self.shape})"


def materialize(values: Any) -> Any:
    """``values`` as an ndarray when it is a :class:`Widened`, else unchanged."""
    return np.asarray(values) if isinstance(values, Widened) else values


__all__ = ["Widened", "materialize"]
