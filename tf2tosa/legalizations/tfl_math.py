"""Rules for TFLite's elementwise math, comparison, logical and select ops: float, plain int32, and quantized
int8 / int16 bit-exact with TFLite's reference kernels (LiteRT BUILTIN_REF).

Binary ops broadcast numpy-style; TOSA 1.0 needs equal ranks (spec 1.11.3 Broadcasting, op_inventory §4 #30), so every
binary
op goes through ``Builder.binary`` / ``Builder.mul`` which prepend 1-dims.  Integer ADD/SUB/MUL/MAXIMUM/
MINIMUM/compare exist for i32 only (spec 2.5.1 ADD, spec 2.8.1 EQUAL), so quantized operands are widened to i32 by an
exact RESCALE first (op_inventory §6.1 "missing type gating").  Quantized elementwise functions of one int8
operand are a TABLE built from TFLite's own integer kernel (:mod:`tf2tosa.quant.tflite_reference`), exact by
construction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..ir.symdim import SYM_VALUES, symbolic_array
from ..quant import activation_bounds, apply_table_i16, fused_activation_q
from ..quant import tflite_reference as R
from ..quant.common import is_quantized_i8_i16, scale_zp
from ..quant.elementwise import (
    add_sub_factors,
    add_sub_inputs,
    f32,
    f32_div,
    lut_pair8,
    out_quant,
    requant,
    saturate,
    table8,
    tag,
    widen,
    widen_kept,
    widen_scaled,
)
from ..tosa.builder import Builder
from .lowering.legalize_common import float_zp, fused_activation
from .lowering.numeric import (
    FLOAT_TYPES,
    fconst,
    float_atan2,
    float_divide,
    require_float,
    require_not_quantized,
    select,
)
from .registry import legalize


def _kind(op: Operation, *xs: Value, ints: bool = True, bools: bool = False) -> DType:
    """Common element type of ``xs``: float, i32 (when ``ints``) or bool (when ``bools``)."""
    require_not_quantized(op, *xs)
    dts = {x.dtype for x in xs}
    if len(dts) != 1:
        raise Unsupported(f"{op.name} with mixed element types {sorted(d.value for d in dts)}")
    dt = next(iter(dts))
    if dt in FLOAT_TYPES or (ints and dt is DType.INT32) or (bools and dt is DType.BOOL):
        return dt
    raise Unsupported(f"{op.name} on {dt.value} not supported")


def _act(b: Builder, op: Operation, y: Value) -> Value:
    act = op.attrs.get("fused_activation_function")
    if act not in (None, "NONE") and not y.dtype.is_float:
        raise Unsupported(f"fused {act} on {y.dtype.value} (TOSA CLAMP has no i32 mode, S3383-3413)")
    return fused_activation(b, y, act)


def _binary_rule(opcode: str, **attrs: object) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x, y = op.operands[0], op.operands[1]
        if is_quantized_i8_i16(x, y):
            return [_q_add_sub(b, op, opcode) if opcode in ("ADD", "SUB") else _q_max_min(b, op, opcode)]
        _kind(op, x, y)
        return [_act(b, op, b.binary(opcode, x, y, **attrs))]

    q_doc = ("TFLite's exact 2^20/2^15 input stage and RESCALEs (lowering doc: tfl.add, §6.3)."
             if opcode in ("ADD", "SUB")
             else "the raw codes widened to i32.")
    rule.__doc__ = f"{opcode} with rank broadcasting (+ fused activation); quantized: {q_doc}"
    legalize(f"tfl.{opcode.lower()}", dtypes=("fp32", "i8", "i16"), arity=2)(rule)


_binary_rule("ADD")
_binary_rule("SUB")
_binary_rule("MAXIMUM", nan_mode="PROPAGATE")
_binary_rule("MINIMUM", nan_mode="PROPAGATE")


@legalize("tfl.stablehlo_add", dtypes=("fp32", "i32"), arity=2)
def stablehlo_add(b: Builder, op: Operation) -> list[Value]:
    """ADD (spec 2.5.1 ADD) of StableHLO's add in a .tflite (JAX / StableHLO exports): operands of one shape and
    type, float or i32 (no quantized types, no fused activation); an i32 sum must not overflow, as for tfl.add."""
    x, y = op.operands[0], op.operands[1]
    _kind(op, x, y)
    return [b.binary("ADD", x, y)]


@legalize("tfl.mul", dtypes=("fp32", "i8", "i16"), arity=2)
def mul(b: Builder, op: Operation) -> list[Value]:
    """MUL with shift 0 (the 1.0 shift operand, spec 2.5.14 MUL, §4 #11)."""
    x, y = op.operands[0], op.operands[1]
    if is_quantized_i8_i16(x, y):
        return [_q_mul(b, op)]
    _kind(op, x, y)
    return [_act(b, op, b.mul(x, y))]


@legalize("tfl.div", dtypes=("fp32", "i8"), arity=2)
def div(b: Builder, op: Operation) -> list[Value]:
    """float: x * RECIPROCAL(y) (lowering doc: tfl.div, within ~1.5 ulp); i32: INTDIV (truncating, spec 2.5.6 INTDIV);
    int8: TFLite's DivElementwise (reciprocal + headroom) tabulated over all 65536 code pairs (GATHER)."""
    x, y = op.operands[0], op.operands[1]
    if is_quantized_i8_i16(x, y):
        return [_q_div(b, op)]
    dt = _kind(op, x, y)
    if dt is DType.INT32:
        return [_act(b, op, b.binary("INTDIV", x, y))]
    return [_act(b, op, float_divide(b, x, y))]


@legalize("tfl.squared_difference", dtypes=("fp32", "i8"), arity=2)
def squared_difference(b: Builder, op: Operation) -> list[Value]:
    """(x - y)^2 as SUB then MUL (lowering doc: tfl.squared_difference); int8 as TFLite: inputs ×2^7 and rescaled,
    squared in i32."""
    x, y = op.operands[0], op.operands[1]
    if is_quantized_i8_i16(x, y):
        return [_q_squared_difference(b, op)]
    _kind(op, x, y)
    d = b.binary("SUB", x, y)
    return [b.mul(d, d)]


@legalize("tfl.square", arity=1)
def square(b: Builder, op: Operation) -> list[Value]:
    """x * x (lowering doc: tfl.square, float/i32 part)."""
    x = op.operands[0]
    _kind(op, x)
    return [b.mul(x, x)]


_Q_UNARY_NAMES = frozenset({"tfl.exp", "tfl.log", "tfl.rsqrt", "tfl.abs"})


def _unary_rule(name: str, opcode: str, ints: bool = False) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x = op.operands[0]
        if is_quantized_i8_i16(x) and name in _Q_UNARY:
            return [_Q_UNARY[name](b, op)]
        _kind(op, x, ints=ints)
        return [b.emit(opcode, [x]).result]

    quantized = name in _Q_UNARY_NAMES
    rule.__doc__ = f"{opcode} (trivial lowering)" + ("; quantized: TFLite's kernel as TABLE (i8) / TABLE i16 or "
                                                      "i32 ABS (i16)." if quantized else ".")
    legalize(name, dtypes=("fp32", "i8", "i16") if quantized else ("fp32",), arity=1)(rule)


for _name, _opcode in (("exp", "EXP"), ("log", "LOG"), ("rsqrt", "RSQRT"), ("floor", "FLOOR"), ("ceil", "CEIL"),
                       ("sin", "SIN"), ("cos", "COS")):
    _unary_rule(f"tfl.{_name}", _opcode)
_unary_rule("tfl.abs", "ABS", ints=True)


@legalize("tfl.neg", dtypes=("fp32", "i8", "i16"), arity=1)
def neg(b: Builder, op: Operation) -> list[Value]:
    """NEGATE with its 1.0 zero-point inputs (0 for float/i32, spec 2.6.10 NEGATE, §4 #26; quantized: the tensors'
    zps)."""
    x = op.operands[0]
    if is_quantized_i8_i16(x):
        return [_q_neg(b, op)]
    dt = _kind(op, x)
    return [b.negate(x, float_zp(b, dt), float_zp(b, dt))]


@legalize("tfl.sqrt", dtypes=("fp32", "i8"), arity=1)
def sqrt(b: Builder, op: Operation) -> list[Value]:
    """RECIPROCAL(RSQRT(x)): sqrt(0) = 1/inf = 0, sqrt(inf) = 1/0 = inf, sqrt(<0) = NaN (spec 2.6.11 RECIPROCAL, 2.6.12
    RSQRT tables).

    x * RSQRT(x) would give 0 * inf = NaN at 0; POW(x, 0.5) REQUIREs x >= 0 (spec 2.5.15 POW).
    """
    x = op.operands[0]
    if is_quantized_i8_i16(x):
        return [_q_unary(b, op)]
    require_float(op, x)
    return [b.reciprocal(b.rsqrt(x))]


@legalize("tfl.pow", arity=2)
def pow_(b: Builder, op: Operation) -> list[Value]:
    """POW needs base >= 0 (REQUIRE, spec 2.5.15 POW).  A constant integer exponent is done without that limit:
    |n| <= 4 by repeated MUL (+RECIPROCAL), otherwise POW(|x|, n) with the sign restored for odd n."""
    x, y = op.operands[0], op.operands[1]
    dt = _kind(op, x, y, ints=False)
    yc = y.const()
    if yc is not None and yc.size and np.all(np.isfinite(yc)) and np.all(yc == np.round(yc)):
        flat = np.unique(yc.reshape(-1))
        out_shape = list(np.broadcast_shapes(tuple(x.shape), tuple(y.shape)))
        if flat.size == 1 and abs(int(flat[0])) <= 4:
            n = int(flat[0])
            if n == 0:
                return [b.const(np.ones(out_shape), dt)]
            r = x
            for _ in range(abs(n) - 1):
                r = b.mul(r, x)
            if n < 0:
                r = b.reciprocal(r)
            if list(r.shape) != out_shape:
                r = b.binary("ADD", r, b.const(np.zeros(out_shape), dt))
            return [r]
        ax = b.abs(x)
        p = b.binary("POW", ax, y)
        odd = b.const(np.mod(yc, 2) != 0, DType.BOOL)
        neg_base = b.binary("GREATER", fconst(b, 0.0, x), x)
        flip = b.binary("LOGICAL_AND", neg_base, odd)
        return [select(b, flip, b.negate(p, float_zp(b, dt), float_zp(b, dt)), p)]
    return [b.binary("POW", x, y)]


# ------------------------------------------------------------------------------------------- floor_div / mod
def _floor_div_int(b: Builder, x: Value, y: Value) -> tuple[Value, Value]:
    """(floor quotient, floor remainder) of i32 from truncating INTDIV: q -= 1 where r != 0 and sign(r) != sign(y)."""
    q = b.binary("INTDIV", x, y)
    r = b.binary("SUB", x, b.mul(q, y))
    zero = b.const(np.zeros((1,) * max(x.type.rank, y.type.rank), np.int32), DType.INT32)
    r_neg = b.binary("GREATER", zero, r)
    y_neg = b.binary("GREATER", zero, y)
    nz = b.logical_not(b.binary("EQUAL", r, zero))
    fix = b.binary("LOGICAL_AND", nz, b.binary("LOGICAL_XOR", r_neg, y_neg))
    one = b.const(np.ones((1,) * max(x.type.rank, y.type.rank), np.int32), DType.INT32)
    q = select(b, fix, b.binary("SUB", q, one), q)
    r = select(b, fix, b.binary("ADD", r, y), r)
    return q, r


def _narrow_ints(b: Builder, op: Operation, x: Value, y: Value) -> tuple[Value, Value, DType]:
    """Operands of an integer-or-float binary op: float, or i8/i16/i32 widened to i32 (exact); returns the
    source type so the i32 result can be CAST back (wrapping like the C kernels' static_cast)."""
    require_not_quantized(op, x, y)
    if x.dtype != y.dtype:
        raise Unsupported(f"{op.name} with mixed element types {x.dtype.value}/{y.dtype.value}")
    dt = x.dtype
    if dt in (DType.INT8, DType.INT16):
        return b.cast(x, DType.INT32), b.cast(y, DType.INT32), dt
    return x, y, _kind(op, x, y)


def _symbolic_ints(b: Builder, op: Operation, fn: Callable[[Any, Any], Any]) -> Value | None:
    """``--dynamic``: ``fn`` of two integer constants whose values carry dimension expressions, as one constant
    that keeps them (shape arithmetic folded into expressions); None otherwise."""
    syms = [s for s in (v.sym_const() for v in op.operands[:2]) if s is not None]
    if len(syms) < 2 or not any(s.dtype == object for s in syms):
        return None
    if op.results[0].dtype.is_float:
        return None
    a, c = (np.asarray(s, dtype=object) for s in syms)
    out = symbolic_array(np.asarray(fn(a, c), dtype=object))
    v = b.const(np.asarray([int(x) for x in out.reshape(-1)], np.int64).reshape(out.shape), DType.INT32)
    assert v.producer is not None
    v.producer.attrs[SYM_VALUES] = out
    return v


@legalize("tfl.floor_div", dtypes=("fp32", "i8", "i16", "i32"), arity=2)
def floor_div(b: Builder, op: Operation) -> list[Value]:
    """float: FLOOR(x * RECIPROCAL(y)) (lowering doc: lower_floor_div); int8/int16/int32: INTDIV corrected toward -inf.

    The float form can be off by one within 1.5 ulp of an integer quotient; 1.0 INTDIV truncates (spec 2.5.6 INTDIV),
    so the integer quotient is decremented where the remainder is non-zero and its sign differs from y's."""
    sym = _symbolic_ints(b, op, lambda p, q: p // q)
    if sym is not None:
        return [sym]
    x, y, dt = _narrow_ints(b, op, op.operands[0], op.operands[1])
    if not dt.is_float:
        return [b.cast(_floor_div_int(b, x, y)[0], dt)]
    return [b.floor(float_divide(b, x, y))]


@legalize("tfl.floor_mod", dtypes=("fp32", "i8", "i16", "i32"), arity=2)
def floor_mod(b: Builder, op: Operation) -> list[Value]:
    """x - floor(x / y) * y (the document's lowering doc: lower_floor_mod returns frac(x/y): wrong, §6.1); integers via
    INTDIV in i32."""
    sym = _symbolic_ints(b, op, lambda p, q: p % q)
    if sym is not None:
        return [sym]
    x, y, dt = _narrow_ints(b, op, op.operands[0], op.operands[1])
    if not dt.is_float:
        return [b.cast(_floor_div_int(b, x, y)[1], dt)]
    q = b.floor(float_divide(b, x, y))
    r = b.binary("SUB", x, b.mul(q, y))
    # rounding of x*(1/y) can leave r one |y| outside [0, y): fold it back (sign must follow y)
    zero = fconst(b, 0.0, r)
    y_pos = b.binary("GREATER", y, fconst(b, 0.0, y))
    bad = b.binary("LOGICAL_OR",
                   b.binary("LOGICAL_AND", y_pos, b.binary("GREATER", zero, r)),
                   b.binary("LOGICAL_AND", b.logical_not(y_pos), b.binary("GREATER", r, zero)))
    return [select(b, bad, b.binary("ADD", r, y), r)]


@legalize("tfl.round", arity=1)
def round_(b: Builder, op: Operation) -> list[Value]:
    """Round half to even (TFLite), not the document's FLOOR(x + 0.5) (lowering doc: lower_round_op, §6.1).

    f = FLOOR(x); d = x - f is exact in float; up when d > 0.5, or d == 0.5 and f is odd (f - 2*FLOOR(f/2) == 1).
    """
    x = op.operands[0]
    require_float(op, x)
    f = b.floor(x)
    d = b.binary("SUB", x, f)
    half = fconst(b, 0.5, x)
    one = fconst(b, 1.0, x)
    odd = b.binary("EQUAL", b.binary("SUB", f, b.mul(b.floor(b.mul(f, half)), fconst(b, 2.0, x))), one)
    up = b.binary("LOGICAL_OR", b.binary("GREATER", d, half),
                  b.binary("LOGICAL_AND", b.binary("EQUAL", d, half), odd))
    return [select(b, up, b.binary("ADD", f, one), f)]


# ---------------------------------------------------------------------------------------------- comparisons
def _cmp_operands(b: Builder, op: Operation) -> tuple[Value, Value, DType]:
    x, y = op.operands[0], op.operands[1]
    if is_quantized_i8_i16(x, y):
        return _q_cmp_operands(b, op)
    require_not_quantized(op, x, y)
    if x.dtype != y.dtype:
        raise Unsupported(f"{op.name} with mixed element types {x.dtype.value}/{y.dtype.value}")
    dt = x.dtype
    if dt in (DType.INT8, DType.INT16):  # compares exist for i32 only (spec 2.8.1 EQUAL): widen exactly
        x, y, dt = b.cast(x, DType.INT32), b.cast(y, DType.INT32), DType.INT32
    if dt not in FLOAT_TYPES and dt not in (DType.INT32, DType.BOOL):
        raise Unsupported(f"{op.name} on {dt.value} not supported")
    return x, y, dt


def _equal(b: Builder, x: Value, y: Value, dt: DType) -> Value:
    if dt is DType.BOOL:  # EQUAL has no bool row: NOT(XOR)
        return b.logical_not(b.binary("LOGICAL_XOR", x, y))
    return b.binary("EQUAL", x, y)


@legalize("tfl.equal", dtypes=("fp32", "i8", "i32"), arity=2)
def equal(b: Builder, op: Operation) -> list[Value]:
    """EQUAL (NaN compares unequal)."""
    x, y, dt = _cmp_operands(b, op)
    return [_equal(b, x, y, dt)]


@legalize("tfl.not_equal", dtypes=("fp32", "i8"), arity=2)
def not_equal(b: Builder, op: Operation) -> list[Value]:
    """LOGICAL_NOT(EQUAL) (lowering doc: tfl.not_equal): true for NaN, as x != y is."""
    x, y, dt = _cmp_operands(b, op)
    if dt is DType.BOOL:
        return [b.binary("LOGICAL_XOR", x, y)]
    return [b.logical_not(b.binary("EQUAL", x, y))]


def _ordered(name: str, opcode: str, swap: bool) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x, y, dt = _cmp_operands(b, op)
        if dt is DType.BOOL:
            raise Unsupported(f"{op.name} on bool")
        return [b.binary(opcode, y, x) if swap else b.binary(opcode, x, y)]

    rule.__doc__ = (f"{opcode} with swapped operands: NaN-correct, unlike the document's NOT({opcode}) "
                    "(lowering doc: tfl.less_equal, tfl.less, spec 2.8.2 GREATER)."
                    if swap else f"{opcode}.") + " int8: TFLite's scaled comparison."
    legalize(name, dtypes=("fp32", "i8", "i32"), arity=2)(rule)


_ordered("tfl.greater", "GREATER", False)
_ordered("tfl.greater_equal", "GREATER_EQUAL", False)
_ordered("tfl.less", "GREATER", True)
_ordered("tfl.less_equal", "GREATER_EQUAL", True)


def _logical(name: str, opcode: str) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        xs = op.operands[:2]
        _kind(op, *xs, ints=False, bools=True)
        if any(x.dtype is not DType.BOOL for x in xs):
            raise Unsupported(f"{op.name} on {xs[0].dtype.value}")
        return [b.binary(opcode, xs[0], xs[1])]

    rule.__doc__ = f"{opcode} (bool)."
    legalize(name, dtypes=("fp32", "bool"), arity=2)(rule)


_logical("tfl.logical_and", "LOGICAL_AND")
_logical("tfl.logical_or", "LOGICAL_OR")


@legalize("tfl.logical_not", dtypes=("fp32", "bool"), arity=1)
def logical_not(b: Builder, op: Operation) -> list[Value]:
    """LOGICAL_NOT (bool)."""
    x = op.operands[0]
    if x.dtype is not DType.BOOL:
        raise Unsupported(f"{op.name} on {x.dtype.value}")
    return [b.logical_not(x)]


@legalize("tfl.select", "tfl.select_v2", dtypes=("fp32", "i8", "i16"), arity=3)
def select_op(b: Builder, op: Operation) -> list[Value]:
    """SELECT with all three ranks equalised (spec 2.7.1 SELECT; lowering doc: lower_selectv2_op fixes only the
    condition).

    tfl.select (v1) also allows a rank-1 condition choosing whole rows of higher-rank x/y: reshape it to
    [n, 1, ..., 1] so it broadcasts along dim 0 instead of the last dim.
    """
    c, x, y = op.operands[0], op.operands[1], op.operands[2]
    # TFLite selects raw codes (lowering doc: tfl.select)
    q = op.results[0].type.quant if is_quantized_i8_i16(x, y) else None
    if q is None:
        require_not_quantized(op, x, y)
    if c.dtype is not DType.BOOL:
        raise Unsupported(f"{op.name} condition of type {c.dtype.value}")
    if x.dtype != y.dtype:
        raise Unsupported(f"{op.name} with mixed element types {x.dtype.value}/{y.dtype.value}")
    if op.name == "tfl.select" and c.type.rank == 1 and x.type.rank > 1 and c.shape[0] == x.shape[0] != 1:
        c = b.reshape(c, [int(c.shape[0])] + [1] * (x.type.rank - 1))
    return [tag(select(b, c, x, y), q)]


@legalize("tfl.add_n", dtypes=("fp32", "i32"))
def add_n(b: Builder, op: Operation) -> list[Value]:
    """A chain of ADDs (lowering doc: tfl.add_n); float or i32."""
    xs = list(op.operands)
    _kind(op, *xs)
    acc = xs[0]
    for v in xs[1:]:
        acc = b.binary("ADD", acc, v)
    if len(xs) == 1:
        acc = b.identity(acc)
    return [acc]


@legalize("tfl.sign", dtypes=("fp32", "i32"), arity=1)
def sign(b: Builder, op: Operation) -> list[Value]:
    """(x > 0) - (x < 0) as two SELECTs: 0 for 0 and NaN, like TFLite's float kernel; float or i32."""
    x = op.operands[0]
    dt = _kind(op, x)
    shape1 = (1,) * x.type.rank

    def k(v: float) -> Value:
        return b.const(np.full(shape1, v), dt)

    pos = b.binary("GREATER", x, k(0))
    neg_ = b.binary("GREATER", k(0), x)
    return [select(b, pos, k(1), select(b, neg_, k(-1), k(0)))]


# ------------------------------------------------------------------------------------------------ bitwise
def _int_operands(op: Operation) -> tuple[Value, Value]:
    x, y = op.operands[0], op.operands[1]
    require_not_quantized(op, x, y)
    if x.dtype != y.dtype or x.dtype not in (DType.INT8, DType.INT16, DType.INT32):
        raise Unsupported(f"{op.name} on {x.dtype.value}/{y.dtype.value} (TOSA bitwise ops: i8/i16/i32)")
    return x, y


@legalize("tfl.bitwise_xor", dtypes=("i8", "i16", "i32"), arity=2)
def bitwise_xor(b: Builder, op: Operation) -> list[Value]:
    """BITWISE_XOR with rank broadcasting (signed types; TOSA has no unsigned tensors)."""
    x, y = _int_operands(op)
    return [b.binary("BITWISE_XOR", x, y)]


@legalize("tfl.right_shift", dtypes=("i8", "i16", "i32"), arity=2)
def right_shift(b: Builder, op: Operation) -> list[Value]:
    """ARITHMETIC_RIGHT_SHIFT (round=false), the shift clamped to [0, bits-1] as TFLite's kernel does.

    Signed values only (TOSA has no unsigned tensors); the clamp also keeps to the range TOSA REQUIREs
    (spec 2.5.2 ARITHMETIC_RIGHT_SHIFT)."""
    x, y = _int_operands(op)
    hi = x.dtype.bits - 1
    c = y.const()
    if c is not None:
        y = b.const(np.clip(np.asarray(c), 0, hi), x.dtype)
    elif x.dtype is DType.INT32:
        rank1 = (1,) * y.type.rank
        y = b.binary("MINIMUM", b.binary("MAXIMUM", y, b.const(np.zeros(rank1), DType.INT32), nan_mode="PROPAGATE"),
                     b.const(np.full(rank1, hi), DType.INT32), nan_mode="PROPAGATE")
    else:
        y = b.clamp(y, 0, hi)
    return [b.binary("ARITHMETIC_RIGHT_SHIFT", x, y, round=False)]


@legalize("tfl.atan2", arity=2)
def atan2(b: Builder, op: Operation) -> list[Value]:
    """Octant reduction + odd polynomial for atan (TOSA 1.0 has no ATAN), within a few ulp of std::atan2.

    atan2(y, x) without an ATAN operator (none in TOSA 1.0): a = min(|x|,|y|)/max(|x|,|y|) in [0, 1], folded
    to |z| <= tan(π/8) by atan(a) = π/4 + atan((a-1)/(a+1)), an odd polynomial (error < 3e-10 rad), then the
    octant fixes π/2 - r (|y| > |x|), π - r (x < 0) and the sign of y.  Within a few ulp of std::atan2 (the
    divisions are RECIPROCAL·MUL, spec 2.6.11 RECIPROCAL); atan2(0, 0) = 0."""
    y, x = op.operands[0], op.operands[1]
    require_float(op, x, y)
    return [float_atan2(b, y, x)]


# ------------------------------------------------------------------------------------ quantized (int8 / int16)
def _same_types(op: Operation) -> DType:
    dts = {v.dtype for v in (*op.operands[:2], op.results[0])}
    if len(dts) != 1:
        raise Unsupported(f"{op.name} with mixed types {sorted(d.value for d in dts)}")
    return next(iter(dts))


def _is_pot(scale: float) -> bool:
    """TFLite CheckedLog2 (float32): the scale is a power of two within 1e-3 in log2."""
    lg = float(np.float32(np.log(np.float32(scale))) * (np.float32(1.0) / np.float32(np.log(np.float32(2.0)))))
    return abs(lg - float(np.sign(lg) * np.floor(abs(lg) + 0.5))) < 1e-3


def _q_add_sub(b: Builder, op: Operation, opcode: str) -> Value:
    """TFLite's quantized ADD/SUB (reference AddElementwise, lowering doc: tfl.add with op_inventory §6.1/§6.3's fixes).

    ``left_shift`` = 20 (int8) / 15 (int16): ``(x - zp)·2^left_shift`` exactly in i32, then one RESCALE per
    input by ``s_in / (2·max_s)``, ADD/SUB in i32, RESCALE by ``2·max_s / (2^left_shift·s_out)``, all with
    TFLite's multipliers and DOUBLE_ROUND.  Folding 2^left_shift into the input RESCALE is not bit-exact on every
    code in general; an int8 input gets one RESCALE where the ADD's int8 output stays TFLite's on all 65536 code
    pairs (:func:`add_sub_inputs`), which is always so for the input of the larger scale.
    """
    x, y, r = op.operands[0], op.operands[1], op.results[0]
    dt = _same_types(op)
    (s1, z1), (s2, z2), (so, zo) = scale_zp(op, x), scale_zp(op, y), scale_zp(op, r)
    if dt is DType.INT16 and op.attrs.get("pot_scale_int16", True) and all(map(_is_pot, (s1, s2, so))):
        raise Unsupported(f"{op.name}: int16 power-of-two-scale kernel (pot_scale_int16)")
    act = op.attrs.get("fused_activation_function")
    if dt is DType.INT8:
        try:
            bounds = activation_bounds(act, out_quant(op), dt) or (-128, 127)
        except Unsupported:  # TANH: a TABLE after the ADD, which sees every int8 code
            bounds = (-128, 127)
        a, c, fo = add_sub_inputs(b, x, y, (s1, z1), (s2, z2), (so, zo), bounds, opcode == "SUB")
    else:
        f1, f2, fo = add_sub_factors(s1, s2, so, 15)
        a, c = widen_scaled(b, x, z1, 15, f1), widen_scaled(b, y, z2, 15, f2)
    out = requant(b, b.binary(opcode, a, c), fo, dt, out_zp=zo, q=r.type.quant)
    return tag(fused_activation_q(b, out, act, out_quant(op)), r.type.quant)


def _q_mul(b: Builder, op: Operation) -> Value:
    """TFLite's quantized MUL as lowering doc: tfl.mul (RESCALE to i32, MUL, RESCALE), with the scale ``s1·s2 / s_out``
    computed in float32 as TFLite does and DOUBLE_ROUND; without zero points the i8/i16 MUL → i32 is used."""
    x, y, r = op.operands[0], op.operands[1], op.results[0]
    dt = _same_types(op)
    (s1, z1), (s2, z2), (so, zo) = scale_zp(op, x), scale_zp(op, y), scale_zp(op, r)
    if z1 == 0 and z2 == 0:  # MUL i8×i8 / i16×i16 → i32 has no zero points (spec 2.5.14 MUL)
        prod = b.emit("MUL", [*b.broadcast_ranks(x, y), b.const(np.array([0]), DType.INT8, name="shift")],
                      out_dtype=DType.INT32).result
    else:  # a constant operand stays an int8 constant + RESCALE (widen_kept): one int8 MUL on an NPU
        prod = b.mul(widen_kept(b, x, z1), widen_kept(b, y, z2))
    out = requant(b, prod, f32_div(f32(s1) * f32(s2), so), dt, out_zp=zo, q=r.type.quant)
    return tag(fused_activation_q(b, out, op.attrs.get("fused_activation_function"), out_quant(op)), r.type.quant)


def _q_div(b: Builder, op: Operation) -> Value:
    """int8 DIV (lowering doc: tfl.div is float only): TFLite's DivElementwise (GetReciprocal, headroom, two
    requantizations)
    depends on the two codes only, so all 65536 results form one i8 GATHER table (64 KiB, PRO-INT)."""
    x, y, r = op.operands[0], op.operands[1], op.results[0]
    if _same_types(op) is not DType.INT8:
        raise Unsupported(f"{op.name} on {x.dtype.value}: TFLite's int16 DIV is float-based, not reproduced")
    (s1, z1), (s2, z2), (so, zo) = scale_zp(op, x), scale_zp(op, y), scale_zp(op, r)
    act = activation_bounds(op.attrs.get("fused_activation_function"), out_quant(op), DType.INT8) or (-128, 127)
    xs, ys = np.meshgrid(R.codes(8), R.codes(8), indexing="ij")
    table = R.div_i8(xs.ravel(), ys.ravel(), s1, z1, s2, z2, so, zo, act)
    return lut_pair8(b, x, y, table, out_quant(op))


def _q_squared_difference(b: Builder, op: Operation) -> Value:
    """TFLite's int8 SQUARED_DIFFERENCE (lowering doc: tfl.squared_difference is float only): ``(x - zp)·2^7`` rescaled
    by
    ``s / (2·max_s)``, squared in i32 and rescaled by ``(2·max_s)^2 / (2^14·s_out)``."""
    x, y, r = op.operands[0], op.operands[1], op.results[0]
    if _same_types(op) is not DType.INT8:
        raise Unsupported(f"{op.name} on {x.dtype.value} (TFLite: int8 only)")
    (s1, z1), (s2, z2), (so, zo) = scale_zp(op, x), scale_zp(op, y), scale_zp(op, r)
    twice = 2.0 * max(f32(s1), f32(s2))
    a = widen_scaled(b, x, z1, 7, f32(s1) / twice)
    c = widen_scaled(b, y, z2, 7, f32(s2) / twice)
    d = b.binary("SUB", a, c)
    return requant(b, b.mul(d, d), twice * twice / ((1 << 14) * f32(so)), DType.INT8, out_zp=zo, q=r.type.quant)


def _q_max_min(b: Builder, op: Operation, opcode: str) -> Value:
    """TFLite's quantized MAXIMUM/MINIMUM (lowering doc: tfl.maximum, tfl.minimum: trivial) compare the
    raw codes (the converter gives all
    three tensors one quantization); the i32-only MAXIMUM/MINIMUM (spec 2.5.12 MAXIMUM) works on the widened codes."""
    x, y = op.operands[0], op.operands[1]
    dt = _same_types(op)
    m = b.binary(opcode, b.cast(x, DType.INT32), b.cast(y, DType.INT32), nan_mode="PROPAGATE")
    return b.emit("CAST", [m], out_dtype=dt, quant=op.results[0].type.quant).result


def _q_neg(b: Builder, op: Operation) -> Value:
    """Quantized NEG (lowering doc: tfl.neg trivial; TFLite has no such kernel): NEGATE with zero points when the scales
    agree
    (spec 2.6.10 NEGATE), otherwise ``-(x - zp_in)`` in i32 requantized to the output."""
    x, r = op.operands[0], op.results[0]
    dt = _same_types(op)
    (si, zi), (so, zo) = scale_zp(op, x), scale_zp(op, r)
    if f32(si) == f32(so):
        return b.emit("NEGATE", [x, b.zp(zi, dt), b.zp(zo, dt)], quant=r.type.quant).result
    x32 = widen(b, x, zi)
    neg = b.negate(x32, b.zp(0, DType.INT32), b.zp(0, DType.INT32))
    return requant(b, neg, si / so, dt, out_zp=zo, q=r.type.quant)


def _q_abs(b: Builder, op: Operation) -> Value:
    """int8: TABLE of TFLite's AbsEvalQuantized (the tfl.abs lowering's ABS has no i8 row, spec 2.6.1 ABS); int16: ABS
    in i32 then
    RESCALE (float32 ``s_in/s_out``, or a saturating copy when the scales are equal: TFLite's ``needs_rescale``)."""
    x, r = op.operands[0], op.results[0]
    dt = _same_types(op)
    (si, zi), (so, zo) = scale_zp(op, x), scale_zp(op, r)
    if dt is DType.INT8:
        return table8(b, x, R.abs_q(R.codes(8), si, zi, so, zo, 8), out_quant(op))
    a = b.abs(widen(b, x, zi))
    if f32(si) == f32(so):
        return saturate(b, a, dt, out_zp=zo, q=r.type.quant)
    return requant(b, a, f32_div(si, so), dt, out_zp=zo, q=r.type.quant)


def _q_unary(b: Builder, op: Operation) -> Value:
    """EXP / LOG / RSQRT / SQRT as TFLite computes them (the tfl.exp lowering's i16 exp table, lowering doc: tfl.log,
    lowering doc: tfl.rsqrt, tfl.sqrt).

    int8: one TABLE (256 entries, PRO-INT) from the kernel: LUTPopulate<int8> in float32 (EXP, LOG), the
    fixed-point GetInvSqrtQuantizedMultiplierExp (RSQRT), truncating float SQRT.  int16: TFLite's 513-entry
    LUTPopulate<int16> read by LUTLookup is exactly TABLE i16 (spec 1.12.5: apply_lookup_s) + RESCALE ×2^-7 rounding
    half up
    (EXT-INT16).
    """
    x, r = op.operands[0], op.results[0]
    dt = _same_types(op)
    (si, zi), (so, zo) = scale_zp(op, x), scale_zp(op, r)
    name = op.name.split(".")[1]
    if dt is DType.INT8:
        c = R.codes(8)
        tables = {"exp": lambda: R.lut_populate_i8(R.exp32, si, zi, so, zo),
                  "log": lambda: R.lut_populate_i8(R.log_lut_fn(so, zo, 8), si, zi, so, zo),
                  "rsqrt": lambda: R.rsqrt_i8(c, si, zi, so, zo),
                  "sqrt": lambda: R.sqrt_i8(c, si, zi, so, zo)}
        return table8(b, x, tables[name](), out_quant(op))
    fns = {"exp": R.exp32, "log": R.log_lut_fn(so, zo, 16), "rsqrt": R.rsqrt16_lut_fn(so)}
    if name not in fns:
        raise Unsupported(f"{op.name} on int16 (no TFLite kernel)")
    return apply_table_i16(b, x, R.lut_populate_i16(fns[name], si, zi, so, zo).astype(np.int16), out_quant(op))


_Q_UNARY = {"tfl.exp": _q_unary, "tfl.log": _q_unary, "tfl.rsqrt": _q_unary, "tfl.abs": _q_abs}


def _q_cmp_operands(b: Builder, op: Operation) -> tuple[Value, Value, DType]:
    """TFLite's quantized comparisons (ComparisonWithScaling, int8 only): ``(x - zp)·2^8`` rescaled by the
    input's own scale, compared in i32.  lowering doc: tfl.less_equal, tfl.less / lowering doc: tfl.not_equal assert
    equal quantizations and compare
    ``x - zp``: not TFLite's result when two codes round to one scaled value, nor for different scales."""
    x, y = op.operands[0], op.operands[1]
    if x.dtype is not DType.INT8 or y.dtype is not DType.INT8:
        raise Unsupported(f"{op.name} on quantized {x.dtype.value}/{y.dtype.value} (TFLite: int8 only)")
    (s1, z1), (s2, z2) = scale_zp(op, x), scale_zp(op, y)
    a = requant(b, widen(b, x, z1, 8), f32(s1), DType.INT32)
    c = requant(b, widen(b, y, z2, 8), f32(s2), DType.INT32)
    return a, c, DType.INT32
