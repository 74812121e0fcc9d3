"""§2.5 Elementwise binary operators."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from ..ir.types import DType
from . import numerics as nm
from .common import broadcast_shape, float_binary
from .registry import bind, error_if, in_dtype, kernel, out_dtype, require, scalar, to_out

_SHIFT_MAX = {DType.INT8: 7, DType.INT16: 15, DType.INT32: 31}


def _ints(op: Operation, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    broadcast_shape(op, a, b)
    return a.astype(np.int64), b.astype(np.int64)


@kernel("ADD")
def add(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.5.1 ADD; integer overflow is a REQUIRE (spec 4.5.1 apply_add_s)."""
    args = bind(op, ins)
    if in_dtype(op).is_float:
        return float_binary(op, args.input1, args.input2, np.add)
    a, b = _ints(op, args.input1, args.input2)
    return [to_out(nm.apply_add_s(a, b, in_dtype(op)), op)]


@kernel("SUB")
def sub(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.5.16 SUB."""
    args = bind(op, ins)
    if in_dtype(op).is_float:
        return float_binary(op, args.input1, args.input2, np.subtract)
    a, b = _ints(op, args.input1, args.input2)
    return [to_out(nm.apply_sub_s(a, b, in_dtype(op)), op)]


def _shift_amount(op: Operation, b: np.ndarray) -> None:
    hi = _SHIFT_MAX.get(in_dtype(op), 31)
    require((b >= 0) & (b <= hi), op, f"shift amount in [0, {hi}]")


@kernel("ARITHMETIC_RIGHT_SHIFT")
def arithmetic_right_shift(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.5.2 ARITHMETIC_RIGHT_SHIFT: with round, add 1 when bit (shift-1) of the input is set."""
    args = bind(op, ins)
    a, b = _ints(op, args.input1, args.input2)
    _shift_amount(op, b)
    res = nm.arith_rshift(a, b)
    if bool(op.attrs.get("round", False)):
        bit = nm.arith_rshift(a, np.maximum(b - 1, 0)) & 1
        res = res + np.where(b > 0, bit, 0)
    return [to_out(nm.wrap(res, in_dtype(op).bits), op)]


@kernel("LOGICAL_LEFT_SHIFT")
def logical_left_shift(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.5.8 LOGICAL_LEFT_SHIFT: result = value1 << value2 (low bits kept)."""
    args = bind(op, ins)
    a, b = _ints(op, args.input1, args.input2)
    _shift_amount(op, b)
    return [to_out(nm.wrap(a << b, in_dtype(op).bits), op)]


@kernel("LOGICAL_RIGHT_SHIFT")
def logical_right_shift(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.5.9 LOGICAL_RIGHT_SHIFT: zero-filling shift at the type's width."""
    args = bind(op, ins)
    a, b = _ints(op, args.input1, args.input2)
    _shift_amount(op, b)
    return [to_out(nm.logical_rshift(a, b, in_dtype(op).bits), op)]


def _bitwise(op: Operation, ins: list[np.ndarray], fn: np.ufunc) -> list[np.ndarray]:
    args = bind(op, ins)
    a, b = _ints(op, args.input1, args.input2)
    return [to_out(fn(a, b), op)]


@kernel("BITWISE_AND")
def bitwise_and(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    return _bitwise(op, ins, np.bitwise_and)


@kernel("BITWISE_OR")
def bitwise_or(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    return _bitwise(op, ins, np.bitwise_or)


@kernel("BITWISE_XOR")
def bitwise_xor(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    return _bitwise(op, ins, np.bitwise_xor)


def _logical(op: Operation, ins: list[np.ndarray], fn: np.ufunc) -> list[np.ndarray]:
    args = bind(op, ins)
    x, y = args.input1, args.input2
    broadcast_shape(op, x, y)
    return [to_out(fn(x.astype(bool), y.astype(bool)), op)]


@kernel("LOGICAL_AND")
def logical_and(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    return _logical(op, ins, np.logical_and)


@kernel("LOGICAL_OR")
def logical_or(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    return _logical(op, ins, np.logical_or)


@kernel("LOGICAL_XOR")
def logical_xor(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    return _logical(op, ins, np.logical_xor)


@kernel("INTDIV")
def intdiv(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.5.6 INTDIV: truncating division, REQUIRE divisor != 0 and result fits."""
    args = bind(op, ins)
    a, b = _ints(op, args.input1, args.input2)
    require(b != 0, op, "divisor != 0")
    q = nm.idiv_trunc(a, b)
    nm.check_fits(q, in_dtype(op), "quotient")
    return [to_out(q, op)]


def _minmax(op: Operation, ins: list[np.ndarray], is_max: bool) -> list[np.ndarray]:
    args = bind(op, ins)
    if in_dtype(op).is_float:
        ignore = str(args.nan_mode).upper() == "IGNORE"
        fn: np.ufunc = (np.fmax if is_max else np.fmin) if ignore else (np.maximum if is_max else np.minimum)
        return float_binary(op, args.input1, args.input2, fn)
    a, b = _ints(op, args.input1, args.input2)
    return [to_out(np.maximum(a, b) if is_max else np.minimum(a, b), op)]


@kernel("MAXIMUM")
def maximum(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.5.12 MAXIMUM (apply_max_s with nan_mode)."""
    return _minmax(op, ins, True)


@kernel("MINIMUM")
def minimum(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.5.13 MINIMUM."""
    return _minmax(op, ins, False)


@kernel("MUL")
def mul(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.5.14 MUL: i32 with shift>0 rounds half up the 64-bit product; otherwise low 32 bits."""
    args = bind(op, ins)
    shift = int(scalar(args.shift)) if args.shift is not None else 0
    dt = in_dtype(op)
    if dt.is_float:
        return float_binary(op, args.input1, args.input2, np.multiply)
    require(0 <= shift <= 63, op, f"0 <= shift <= 63 (got {shift})")
    require(dt is DType.INT32 or shift == 0, op, "shift must be 0 unless in_t is i32")
    a, b = _ints(op, args.input1, args.input2)
    prod = a * b  # |a*b| <= 2^62: exact in int64
    if dt is DType.INT32 and shift > 0:
        res = nm.shift_round_half_up(prod, shift)
        nm.check_fits(res, DType.INT32, "MUL result")
    else:
        res = nm.wrap(prod, out_dtype(op).bits)
    return [to_out(res, op)]


@kernel("POW")
def pow_(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.5.15 POW."""
    args = bind(op, ins)
    # evaluated in fp64 and rounded once, like the unary transcendental functions (common.float_unary_wide)
    return float_binary(op, args.input1, args.input2, lambda a, b: np.power(a.astype(np.float64), b.astype(np.float64)))


@kernel("TABLE")
def table(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.5.17 TABLE: i8 -> table[v+128]; i16 -> apply_lookup_s (spec 1.12.5 General Unary Functions)."""
    args = bind(op, ins)
    x, tab = args.input1, args.table.reshape(-1)
    if in_dtype(op) is DType.INT8:
        error_if(tab.size != 256, op, f"i8 TABLE needs 256 entries, got {tab.size}")
        return [to_out(tab[x.astype(np.int64) + 128], op)]
    require(tab.size == 513, op, f"i16 TABLE needs 513 entries, got {tab.size}")
    return [to_out(nm.lookup_i16(tab, x), op)]
