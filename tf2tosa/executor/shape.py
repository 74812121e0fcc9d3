"""§2.18 Shape operators (shape_t values are int64 1-D arrays at run time).

* TOSA 1.0: CONST_SHAPE.
* TOSA 1.1 draft, EXT-SHAPE (arm/tosa-specification main, chapters/shape.adoc, pseudocode/operators/*_SHAPE.tosac
  and DIM.tosac): DIM, the elementwise shape arithmetic (ADD/SUB/MUL/DIV_CEIL/DIV_FLOOR/MOD/MIN/MAX_SHAPE), the
  unary EXP2/LOG2_CEIL/LOG2_FLOOR_SHAPE, CONCAT_SHAPE, SLICE_SHAPE and ASSERT_EQUAL_SHAPE.  ERROR_IFs raise
  :class:`ErrorIfError`, REQUIREs :class:`UnpredictableError`, as for the 1.0 operators.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.graph import Operation
from .registry import ErrorIfError, UnpredictableError, kernel

#: tensor_size_t of the draft is a signed 64-bit value; MAX_LOG2_SIZE bounds EXP2_SHAPE (draft: 63 at level none)
_SIZE_MAX = (1 << 63) - 1
MAX_LOG2_SIZE = 63


@kernel("CONST_SHAPE")
def const_shape(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(op.attrs["values"], dtype=np.int64).reshape(-1)]


def _shape(values: list[int]) -> np.ndarray:
    for v in values:
        if not -_SIZE_MAX - 1 <= v <= _SIZE_MAX:
            raise UnpredictableError(f"shape value {v} does not fit tensor_size_t")
    return np.asarray(values, dtype=np.int64).reshape(-1)


def _ints(a: np.ndarray) -> list[int]:
    return [int(x) for x in np.asarray(a).reshape(-1)]


@kernel("DIM")
def dim(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    shape = ins[0].shape
    axis = int(op.attrs["axis"])
    if axis >= len(shape) or axis < 0:
        raise ErrorIfError(f"DIM: axis {axis} outside 0..{len(shape) - 1}")
    if shape[axis] <= 0:
        raise UnpredictableError(f"DIM: REQUIRE(shape[axis] > 0) fails: shape {list(shape)}")
    return [_shape([shape[axis]])]


def _same_length(name: str, a: list[int], b: list[int]) -> None:
    if len(a) != len(b):
        raise ErrorIfError(f"{name}: length(input1) {len(a)} != length(input2) {len(b)}")


def _divisor_checks(name: str, x: int, y: int) -> None:
    if x < 0:
        raise UnpredictableError(f"{name}: REQUIRE(input1 >= 0) fails: {x}")
    if y < 1:
        raise UnpredictableError(f"{name}: REQUIRE(input2 >= 1) fails: {y}")


def _div_floor(x: int, y: int) -> int:
    _divisor_checks("DIV_FLOOR_SHAPE", x, y)
    return x // y


def _div_ceil(x: int, y: int) -> int:
    _divisor_checks("DIV_CEIL_SHAPE", x, y)
    return x // y + (1 if x % y else 0)


def _mod(x: int, y: int) -> int:
    _divisor_checks("MOD_SHAPE", x, y)
    return x % y


_BINARY: dict[str, Callable[[int, int], int]] = {
    "ADD_SHAPE": lambda x, y: x + y,
    "SUB_SHAPE": lambda x, y: x - y,
    "MUL_SHAPE": lambda x, y: x * y,
    "DIV_FLOOR_SHAPE": _div_floor,
    "DIV_CEIL_SHAPE": _div_ceil,
    "MOD_SHAPE": _mod,
    "MIN_SHAPE": min,
    "MAX_SHAPE": max,
}


@kernel(*_BINARY)
def shape_binary(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    a, b = _ints(ins[0]), _ints(ins[1])
    _same_length(op.opcode, a, b)
    fn = _BINARY[op.opcode]
    return [_shape([fn(x, y) for x, y in zip(a, b)])]


def _log2_floor(name: str, x: int) -> int:
    if x < 1:
        raise UnpredictableError(f"{name}: REQUIRE(input >= 1) fails: {x}")
    return x.bit_length() - 1


def _exp2(x: int) -> int:
    if not 0 <= x < MAX_LOG2_SIZE:
        raise UnpredictableError(f"EXP2_SHAPE: REQUIRE(0 <= input < MAX_LOG2_SIZE) fails: {x}")
    return 1 << x


def _log2_ceil(x: int) -> int:
    f = _log2_floor("LOG2_CEIL_SHAPE", x)
    return f if x == 1 << f else f + 1


_UNARY: dict[str, Callable[[int], int]] = {
    "EXP2_SHAPE": _exp2,
    "LOG2_FLOOR_SHAPE": lambda x: _log2_floor("LOG2_FLOOR_SHAPE", x),
    "LOG2_CEIL_SHAPE": _log2_ceil,
}


@kernel(*_UNARY)
def shape_unary(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    fn = _UNARY[op.opcode]
    return [_shape([fn(x) for x in _ints(ins[0])])]


@kernel("CONCAT_SHAPE")
def concat_shape(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    if not ins:
        raise ErrorIfError("CONCAT_SHAPE: the input list is empty")
    out: list[int] = []
    for i, s in enumerate(ins):
        vals = _ints(s)
        if not vals:
            raise ErrorIfError(f"CONCAT_SHAPE: input {i} is an empty shape")
        out.extend(vals)
    return [_shape(out)]


@kernel("SLICE_SHAPE")
def slice_shape(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    vals = _ints(ins[0])
    start, size = _ints(ins[1])[0], _ints(ins[2])[0]
    if size <= 0:
        raise ErrorIfError(f"SLICE_SHAPE: size {size} must be > 0")
    if start < 0:
        raise ErrorIfError(f"SLICE_SHAPE: start {start} must be >= 0")
    if start + size > len(vals):
        raise ErrorIfError(f"SLICE_SHAPE: start {start} + size {size} > length(input) {len(vals)}")
    return [_shape(vals[start:start + size])]


@kernel("ASSERT_EQUAL_SHAPE")
def assert_equal_shape(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """errata: the draft's pseudo-code compares ``input2[index] != input[index]`` under allow_broadcast; read
    ``input`` as ``input1`` (the only shape it can mean)."""
    a, b = _ints(ins[0]), _ints(ins[1])
    _same_length("ASSERT_EQUAL_SHAPE", a, b)
    broadcast = bool(op.attrs.get("allow_broadcast", False))
    for i, (x, y) in enumerate(zip(a, b)):
        bad = (x != 1 and y != 1 and y != x) if broadcast else x != y
        if bad:
            how = "broadcast-compatible with" if broadcast else "equal to"
            raise ErrorIfError(f"ASSERT_EQUAL_SHAPE: {a} is not {how} {b} (index {i}: {x} vs {y})")
    return []
