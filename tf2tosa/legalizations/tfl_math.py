"""Float (and plain int32) rules for TFLite's elementwise math, comparison, logical and select ops.

Binary ops broadcast numpy-style; TOSA 1.0 needs equal ranks (S809, op_inventory §4 #30), so every binary
op goes through ``Builder.binary`` / ``Builder.mul`` which prepend 1-dims.  Integer ADD/SUB/MUL/MAXIMUM/
MINIMUM/compare exist for i32 only (S3821-3825, S6831-6837): plain (non-quantized) i32 tensors are
handled, quantized ones raise Unsupported (the integer path is separate).
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from .common import float_zp, fused_activation
from .nn_helpers import FLOAT_TYPES, fconst, float_divide, require_float, require_not_quantized, select
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
        _kind(op, x, y)
        return [_act(b, op, b.binary(opcode, x, y, **attrs))]

    rule.__doc__ = f"{opcode} with rank broadcasting (+ fused activation)."
    legalize(f"tfl.{opcode.lower()}")(rule)


_binary_rule("ADD")
_binary_rule("SUB")
_binary_rule("MAXIMUM", nan_mode="PROPAGATE")
_binary_rule("MINIMUM", nan_mode="PROPAGATE")


@legalize("tfl.mul")
def mul(b: Builder, op: Operation) -> list[Value]:
    """MUL with shift 0 (the 1.0 shift operand, S4962-4972, §4 #11)."""
    x, y = op.operands[0], op.operands[1]
    _kind(op, x, y)
    return [_act(b, op, b.mul(x, y))]


@legalize("tfl.div")
def div(b: Builder, op: Operation) -> list[Value]:
    """float: x * RECIPROCAL(y) (L3220-3233, within ~1.5 ulp); i32: INTDIV (truncating, S4198-4268)."""
    x, y = op.operands[0], op.operands[1]
    dt = _kind(op, x, y)
    if dt is DType.INT32:
        return [_act(b, op, b.binary("INTDIV", x, y))]
    return [_act(b, op, float_divide(b, x, y))]


@legalize("tfl.squared_difference")
def squared_difference(b: Builder, op: Operation) -> list[Value]:
    """(x - y)^2 as SUB then MUL (L4304-4317)."""
    x, y = op.operands[0], op.operands[1]
    _kind(op, x, y)
    d = b.binary("SUB", x, y)
    return [b.mul(d, d)]


@legalize("tfl.square")
def square(b: Builder, op: Operation) -> list[Value]:
    """x * x (L4280-4302, float/i32 part)."""
    x = op.operands[0]
    _kind(op, x)
    return [b.mul(x, x)]


def _unary_rule(name: str, opcode: str, ints: bool = False) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x = op.operands[0]
        _kind(op, x, ints=ints)
        return [b.emit(opcode, [x]).result]

    rule.__doc__ = f"{opcode} (trivial lowering)."
    legalize(name)(rule)


for _name, _opcode in (("exp", "EXP"), ("log", "LOG"), ("rsqrt", "RSQRT"), ("floor", "FLOOR"), ("ceil", "CEIL"),
                       ("sin", "SIN"), ("cos", "COS")):
    _unary_rule(f"tfl.{_name}", _opcode)
_unary_rule("tfl.abs", "ABS", ints=True)


@legalize("tfl.neg")
def neg(b: Builder, op: Operation) -> list[Value]:
    """NEGATE with its 1.0 zero-point inputs (0 for float/i32, S6187-6209, §4 #26)."""
    x = op.operands[0]
    dt = _kind(op, x)
    return [b.negate(x, float_zp(b, dt), float_zp(b, dt))]


@legalize("tfl.sqrt")
def sqrt(b: Builder, op: Operation) -> list[Value]:
    """RECIPROCAL(RSQRT(x)): sqrt(0) = 1/inf = 0, sqrt(inf) = 1/0 = inf, sqrt(<0) = NaN (S6393-6520 tables).

    x * RSQRT(x) would give 0 * inf = NaN at 0; POW(x, 0.5) REQUIREs x >= 0 (S5178).
    """
    x = op.operands[0]
    require_float(op, x)
    return [b.reciprocal(b.rsqrt(x))]


@legalize("tfl.pow")
def pow_(b: Builder, op: Operation) -> list[Value]:
    """POW needs base >= 0 (REQUIRE, S5178).  A constant integer exponent is done without that limit:
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


@legalize("tfl.floor_div")
def floor_div(b: Builder, op: Operation) -> list[Value]:
    """float: FLOOR(x * RECIPROCAL(y)) (L395-404; can be off by one within 1.5 ulp of an integer quotient);
    i32: INTDIV corrected toward -inf (1.0 INTDIV truncates, S4256-4268)."""
    x, y = op.operands[0], op.operands[1]
    dt = _kind(op, x, y)
    if dt is DType.INT32:
        return [_floor_div_int(b, x, y)[0]]
    return [b.floor(float_divide(b, x, y))]


@legalize("tfl.floor_mod")
def floor_mod(b: Builder, op: Operation) -> list[Value]:
    """x - floor(x / y) * y (the document's L406-415 returns frac(x/y): wrong, §6.1); i32 via INTDIV."""
    x, y = op.operands[0], op.operands[1]
    dt = _kind(op, x, y)
    if dt is DType.INT32:
        return [_floor_div_int(b, x, y)[1]]
    q = b.floor(float_divide(b, x, y))
    r = b.binary("SUB", x, b.mul(q, y))
    # rounding of x*(1/y) can leave r one |y| outside [0, y): fold it back (sign must follow y)
    zero = fconst(b, 0.0, r)
    y_pos = b.binary("GREATER", y, fconst(b, 0.0, y))
    bad = b.binary("LOGICAL_OR",
                   b.binary("LOGICAL_AND", y_pos, b.binary("GREATER", zero, r)),
                   b.binary("LOGICAL_AND", b.logical_not(y_pos), b.binary("GREATER", r, zero)))
    return [select(b, bad, b.binary("ADD", r, y), r)]


@legalize("tfl.round")
def round_(b: Builder, op: Operation) -> list[Value]:
    """Round half to even (TFLite), not the document's FLOOR(x + 0.5) (L619-628, §6.1).

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
    require_not_quantized(op, x, y)
    if x.dtype != y.dtype:
        raise Unsupported(f"{op.name} with mixed element types {x.dtype.value}/{y.dtype.value}")
    dt = x.dtype
    if dt in (DType.INT8, DType.INT16):  # compares exist for i32 only (S6831-6837): widen exactly
        x, y, dt = b.cast(x, DType.INT32), b.cast(y, DType.INT32), DType.INT32
    if dt not in FLOAT_TYPES and dt not in (DType.INT32, DType.BOOL):
        raise Unsupported(f"{op.name} on {dt.value} not supported")
    return x, y, dt


def _equal(b: Builder, x: Value, y: Value, dt: DType) -> Value:
    if dt is DType.BOOL:  # EQUAL has no bool row: NOT(XOR)
        return b.logical_not(b.binary("LOGICAL_XOR", x, y))
    return b.binary("EQUAL", x, y)


@legalize("tfl.equal")
def equal(b: Builder, op: Operation) -> list[Value]:
    """EQUAL (NaN compares unequal)."""
    x, y, dt = _cmp_operands(b, op)
    return [_equal(b, x, y, dt)]


@legalize("tfl.not_equal")
def not_equal(b: Builder, op: Operation) -> list[Value]:
    """LOGICAL_NOT(EQUAL) (L3824-3850): true for NaN, as x != y is."""
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
                    "(L3555-3610, S6880)." if swap else f"{opcode}.")
    legalize(name)(rule)


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
    legalize(name)(rule)


_logical("tfl.logical_and", "LOGICAL_AND")
_logical("tfl.logical_or", "LOGICAL_OR")


@legalize("tfl.logical_not")
def logical_not(b: Builder, op: Operation) -> list[Value]:
    """LOGICAL_NOT (bool)."""
    x = op.operands[0]
    if x.dtype is not DType.BOOL:
        raise Unsupported(f"{op.name} on {x.dtype.value}")
    return [b.logical_not(x)]


@legalize("tfl.select", "tfl.select_v2")
def select_op(b: Builder, op: Operation) -> list[Value]:
    """SELECT with all three ranks equalised (S6732; L630-649 fixes only the condition).

    tfl.select (v1) also allows a rank-1 condition choosing whole rows of higher-rank x/y: reshape it to
    [n, 1, ..., 1] so it broadcasts along dim 0 instead of the last dim.
    """
    c, x, y = op.operands[0], op.operands[1], op.operands[2]
    require_not_quantized(op, x, y)
    if c.dtype is not DType.BOOL:
        raise Unsupported(f"{op.name} condition of type {c.dtype.value}")
    if x.dtype != y.dtype:
        raise Unsupported(f"{op.name} with mixed element types {x.dtype.value}/{y.dtype.value}")
    if op.name == "tfl.select" and c.type.rank == 1 and x.type.rank > 1 and c.shape[0] == x.shape[0] != 1:
        c = b.reshape(c, [int(c.shape[0])] + [1] * (x.type.rank - 1))
    return [select(b, c, x, y)]


@legalize("tfl.add_n")
def add_n(b: Builder, op: Operation) -> list[Value]:
    """A chain of ADDs (L2928-2941); float or i32."""
    xs = list(op.operands)
    _kind(op, *xs)
    acc = xs[0]
    for v in xs[1:]:
        acc = b.binary("ADD", acc, v)
    if len(xs) == 1:
        acc = b.identity(acc)
    return [acc]


@legalize("tfl.sign")
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
