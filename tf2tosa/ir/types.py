"""Element types, quantization parameters and tensor types of the IR.

The names of :class:`DType` members follow the TOSA specification's type names
(``i8``, ``fp32`` …).  Source-framework-only types (``i64``, ``u8``, ``complex64``
…) also live here so that frontends can describe a model before legalization.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

import numpy as np

from .symdim import SymDim, size


class DType(str, Enum):
    """Element type of a tensor value."""

    BOOL = "bool"
    INT4 = "i4"
    INT8 = "i8"
    INT16 = "i16"
    INT32 = "i32"
    INT48 = "i48"
    INT64 = "i64"
    UINT8 = "u8"
    UINT16 = "u16"
    UINT32 = "u32"
    UINT64 = "u64"
    FP8E4M3 = "fp8e4m3"
    FP8E5M2 = "fp8e5m2"
    FP16 = "fp16"
    BF16 = "bf16"
    FP32 = "fp32"
    FP64 = "fp64"
    SHAPE = "shape"  # TOSA shape_t (a list of dimension sizes)
    COMPLEX64 = "complex64"
    COMPLEX128 = "complex128"
    STRING = "string"
    RESOURCE = "resource"
    VARIANT = "variant"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_int(self) -> bool:
        return self in _INTS

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def is_tosa(self) -> bool:
        """True when TOSA 1.0 has tensors of this type."""
        return self in _TOSA_TYPES

    def np_dtype(self) -> np.dtype:
        """numpy storage type used by the executor and constants.

        i4 is stored in int8, i48 in int64, shape_t in int64.  bf16/fp8 use
        ``ml_dtypes`` when it is installed.
        """
        got = _NP_DTYPES.get(self)
        if got is not None:
            return got
        import ml_dtypes  # optional, only for bf16/fp8

        return np.dtype({DType.BF16: ml_dtypes.bfloat16, DType.FP8E4M3: ml_dtypes.float8_e4m3fn,
                         DType.FP8E5M2: ml_dtypes.float8_e5m2}[self])

    def range(self) -> tuple[int, int]:
        """Inclusive integer range of the type."""
        got = _RANGES.get(self)  # (the rescale and bias helpers and the validation ask per op)
        if got is None:
            raise ValueError(f"{self} is not an integer type")
        return got


_FLOATS = {DType.FP8E4M3, DType.FP8E5M2, DType.FP16, DType.BF16, DType.FP32, DType.FP64}
_INTS = {DType.INT4, DType.INT8, DType.INT16, DType.INT32, DType.INT48, DType.INT64, DType.UINT8,
         DType.UINT16, DType.UINT32, DType.UINT64}
_TOSA_TYPES = {DType.BOOL, DType.INT4, DType.INT8, DType.INT16, DType.INT32, DType.INT48,
               DType.FP8E4M3, DType.FP8E5M2, DType.FP16, DType.BF16, DType.FP32, DType.SHAPE}
_BITS = {DType.BOOL: 1, DType.INT4: 4, DType.INT8: 8, DType.INT16: 16, DType.INT32: 32, DType.INT48: 48,
         DType.INT64: 64, DType.UINT8: 8, DType.UINT16: 16, DType.UINT32: 32, DType.UINT64: 64,
         DType.FP8E4M3: 8, DType.FP8E5M2: 8, DType.FP16: 16, DType.BF16: 16, DType.FP32: 32,
         DType.FP64: 64, DType.SHAPE: 64, DType.COMPLEX64: 64, DType.COMPLEX128: 128}
_NP = {DType.BOOL: np.bool_, DType.INT4: np.int8, DType.INT8: np.int8, DType.INT16: np.int16,
       DType.INT32: np.int32, DType.INT48: np.int64, DType.INT64: np.int64, DType.UINT8: np.uint8,
       DType.UINT16: np.uint16, DType.UINT32: np.uint32, DType.UINT64: np.uint64, DType.FP16: np.float16,
       DType.FP32: np.float32, DType.FP64: np.float64, DType.SHAPE: np.int64,
       DType.COMPLEX64: np.complex64, DType.COMPLEX128: np.complex128, DType.STRING: np.object_}

#: the inclusive range of each integer type (and bool)
_RANGES: dict[DType, tuple[int, int]] = {DType.BOOL: (0, 1)}
for _d in _INTS:
    _b = _BITS[_d]
    _RANGES[_d] = ((0, (1 << _b) - 1) if _d in (DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64)
                   else (-(1 << (_b - 1)), (1 << (_b - 1)) - 1))
del _d, _b

#: :data:`_NP` as numpy dtypes (what :meth:`DType.np_dtype` returns for them)
_NP_DTYPES: dict[DType, np.dtype] = {k: np.dtype(v) for k, v in _NP.items()}

#: the numpy dtypes :func:`dtype_from_numpy` has mapped, and its answers
_FROM_NP: dict[np.dtype, DType] = {}


def dtype_from_numpy(dt: np.dtype | type) -> DType:
    """Map a numpy dtype to the IR's :class:`DType`."""
    dt = np.dtype(dt)
    got = _FROM_NP.get(dt)
    if got is not None:
        return got
    for k, v in _NP.items():
        if k in (DType.INT4, DType.INT48, DType.SHAPE):
            continue
        if np.dtype(v) == dt:
            _FROM_NP[dt] = k
            return k
    name = dt.name
    for k, n in ((DType.BF16, "bfloat16"), (DType.FP8E4M3, "float8_e4m3fn"), (DType.FP8E5M2, "float8_e5m2")):
        if name == n:
            return k
    raise ValueError(f"no IR dtype for numpy dtype {dt}")


@dataclass(frozen=True)
class QuantParams:
    """Affine quantization: real = scale * (q - zero_point).

    Per-tensor when ``axis`` is None (one scale and zero point), otherwise one
    entry per index along ``axis`` (per-channel).
    """

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None = None

    def __post_init__(self) -> None:
        if len(self.scale) != len(self.zero_point):
            raise ValueError("scale and zero_point lengths differ")
        if not self.scale:
            raise ValueError("empty quantization parameters")

    @property
    def per_channel(self) -> bool:
        return self.axis is not None and len(self.scale) > 1

    @property
    def s(self) -> float:
        """The single scale of a per-tensor quantization."""
        if self.per_channel:
            raise ValueError("per-channel quantization has no single scale")
        return self.scale[0]

    @property
    def zp(self) -> int:
        """The single zero point of a per-tensor quantization."""
        if self.per_channel:
            raise ValueError("per-channel quantization has no single zero point")
        return self.zero_point[0]


#: A dimension: a static size, or a symbol name (dynamic-shape RFC) for an unknown size.
Dim = int | str


@dataclass(frozen=True)
class TensorType:
    """Type of a value: shape, element type and optional quantization."""

    shape: tuple[Dim, ...]
    dtype: DType
    quant: QuantParams | None = field(default=None)

    def __init__(self, shape: tuple[Dim, ...], dtype: DType, quant: QuantParams | None = None) -> None:
        # the dataclass's own __init__ and __post_init__ in one: the fields written into the instance's dict (what
        # the frozen dataclass's object.__setattr__ calls did; thousands of types per conversion).  A tuple of plain
        # ints is kept as it is, and with it is_static and static_shape are known at once (the shape itself)
        d = self.__dict__
        if shape.__class__ is not tuple or [x for x in shape if x.__class__ is not int]:
            d["shape"] = tuple(x if isinstance(x, (str, SymDim)) else int(x) for x in shape)
        else:
            d["shape"] = shape
            if not shape or min(shape) >= 0:  # type: ignore[operator]  # (plain ints here)
                d["is_static"] = True
                d["_static_shape"] = shape
            else:
                d["is_static"] = False
        d["dtype"] = dtype if dtype.__class__ is DType else DType(dtype)  # (a member: no enum call)
        d["quant"] = quant

    @property
    def rank(self) -> int:
        return len(self.shape)

    @cached_property
    def is_static(self) -> bool:
        # worked out once per type (a frozen dataclass: its shape never changes) and kept in the instance's dict,
        # off its fields, so equality, hashing and repr are the fields' as before; the passes, validation and the
        # writer ask often, and after the first read each is a plain attribute lookup (no Python call)
        return all(isinstance(d, int) and d >= 0 for d in self.shape)

    @property
    def static_shape(self) -> tuple[int, ...]:
        got = self.__dict__.get("_static_shape")  # (kept for a shape of plain ints, as is_static is)
        if got is not None:
            return got  # type: ignore[no-any-return]
        if not self.is_static:
            raise ValueError(f"shape {self.shape} is not static")
        shape = tuple(size(d) for d in self.shape)
        if all(d.__class__ is int for d in shape):
            object.__setattr__(self, "_static_shape", shape)
        return shape

    @property
    def size(self) -> int:
        got = self.__dict__.get("_size")  # (kept for a shape of plain ints)
        if got is not None:
            return got  # type: ignore[no-any-return]
        n = 1
        for d in self.static_shape:
            n *= d
        if n.__class__ is int and "_static_shape" in self.__dict__:
            object.__setattr__(self, "_size", n)
        return n

    @property
    def is_quantized(self) -> bool:
        return self.quant is not None

    def with_shape(self, shape: tuple[Dim, ...] | list[int]) -> TensorType:
        return TensorType(tuple(shape), self.dtype, self.quant)

    def with_dtype(self, dtype: DType, quant: QuantParams | None = None) -> TensorType:
        return TensorType(self.shape, dtype, quant)

    def __str__(self) -> str:
        dims = "x".join(str(d) for d in self.shape)
        q = ""
        if self.quant is not None:
            if self.quant.per_channel:
                q = f" q(axis={self.quant.axis}, n={len(self.quant.scale)})"
            else:
                q = f" q({self.quant.scale[0]:.6g}, {self.quant.zero_point[0]})"
        return f"tensor<{dims + 'x' if dims else ''}{self.dtype.value}{q}>"


_new_object = object.__new__


def static_tensor_type(shape: tuple[int, ...], dtype: DType, quant: QuantParams | None = None) -> TensorType:
    """``TensorType(shape, dtype, quant)`` for a ``shape`` already known to be a tuple of plain ints >= 0 (an array's
    shape, a static type's own) and a ``dtype`` that is a DType member: the same instance dict as the constructor
    makes for them, written without its checks (thousands per conversion: every constant, every result of an op of
    a kept signature)."""
    t = _new_object(TensorType)
    d = t.__dict__
    d["shape"] = shape
    d["is_static"] = True
    d["_static_shape"] = shape
    d["dtype"] = dtype
    d["quant"] = quant
    return t


def static_dims(t: TensorType) -> tuple[int, ...] | None:
    """``t.static_shape``, or None when ``t`` is not static.  A shape of plain ints is answered from what the type
    kept at its construction, with no property call: the passes, the checks and the writer ask per tensor."""
    got = t.__dict__.get("_static_shape")
    if got is not None:
        return got  # type: ignore[no-any-return]
    return t.static_shape if t.is_static else None
