"""Rules for TensorFlow's elementwise math, comparison, logical, bitwise and reduction ops (``tf.*``).

Most have exactly the semantics of a TFLite op and run that op's rule (:func:`delegate.via`): numpy broadcasting
by RESHAPE to equal ranks (spec 1.11.3 Broadcasting), float or plain i32.  The document's mistakes are not copied
(op_inventory
§6.1): tf.Minimum is MINIMUM (lowering doc: tf.Minimum says MAXIMUM), FloorMod is x − floor(x/y)·y (lowering doc:
lower_floor_mod returns frac(x/y)),
Round is half-to-even (lowering doc: lower_round_op rounds half up), Less/LessEqual compare with swapped operands
(NOT(GREATER…)
in lowering doc: tf.LessEqual, tf.Less is wrong for NaN).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..ir.symdim import has_symbols
from ..tosa.builder import Builder
from . import delegate
from .lowering import tf_ops
from .lowering.layout import narrow_array, tosa_dtype
from .lowering.legalize_common import positive_axis
from .lowering.numeric import FLOAT_TYPES, expm1, fconst, float_divide, require_float, require_not_quantized, select
from .registry import legalize
from .tfl_types import truncate_toward_zero


def _same_as(tf_names: tuple[str, ...], tfl_name: str, n: int, attrs: Mapping[str, object] | None = None,
             note: str = "") -> None:
    """Register ``tf_names`` as running ``tfl_name``'s rule on their first ``n`` operands."""

    def rule(b: Builder, op: Operation) -> list[Value]:
        return delegate.via(b, op, tfl_name, op.operands[:n], attrs)

    rule.__doc__ = f"{tfl_name}'s lowering{note}."
    legalize(*tf_names)(rule)


# ------------------------------------------------------------------------------------------------ binary
def _fusing(tf_names: tuple[str, ...], tfl_name: str, kind: str, note: str) -> None:
    """Like :func:`_same_as`, but a per-channel constant applied to a convolution's result folds into it."""

    def rule(b: Builder, op: Operation) -> list[Value]:
        x, y = op.operands[0], op.operands[1]
        fused = tf_ops.fold_into_conv(b, x, y, kind)
        if fused is None and kind != "sub":
            fused = tf_ops.fold_into_conv(b, y, x, kind)
        return [fused] if fused is not None else delegate.via(b, op, tfl_name, op.operands[:2])

    rule.__doc__ = f"{tfl_name}'s lowering{note}; a per-channel constant folds into a preceding convolution."
    legalize(*tf_names)(rule)


_fusing(("tf.Add", "tf.AddV2"), "tfl.add", "add", " (ADD with rank broadcasting, lowering doc: tf.Add, tf.Addv2)")
_fusing(("tf.Sub",), "tfl.sub", "sub", " (SUB, lowering doc: tf.Sub)")
_fusing(("tf.Mul",), "tfl.mul", "mul", " (MUL, shift 0, lowering doc: tf.Mul)")
_same_as(("tf.RealDiv",), "tfl.div", 2, note=" (x·RECIPROCAL(y), lowering doc: tf.RealDiv; i32 INTDIV)")
_same_as(("tf.Maximum",), "tfl.maximum", 2, note=" (MAXIMUM, lowering doc: tf.Maximum)")
_same_as(("tf.Minimum",), "tfl.minimum", 2, note=" (MINIMUM; the tf.Minimum lowering's MAXIMUM is a document error)")
_same_as(("tf.Pow",), "tfl.pow", 2, note=" (POW; constant integer exponents without POW's base >= 0 limit)")
_same_as(("tf.SquaredDifference",), "tfl.squared_difference", 2, note=" ((x−y)², lowering doc: tf.SquareDifference)")
_same_as(("tf.FloorDiv",), "tfl.floor_div", 2, note=" (FLOOR(x·RECIPROCAL(y)); i32 INTDIV corrected to floor)")
_same_as(("tf.FloorMod",), "tfl.floor_mod", 2,
         note=" (x − floor(x/y)·y; lowering doc: lower_floor_mod computes frac(x/y))")
_same_as(("tf.AddN",), "tfl.add_n", 1 << 30, note=" (ADD chain, lowering doc: tf.AddN)")


@legalize("tf.Div")
def div(b: Builder, op: Operation) -> list[Value]:
    """Float: x·RECIPROCAL(y) (as RealDiv); i32: INTDIV, which truncates like TF's integer Div (lowering doc: tf.Div
    none)."""
    return delegate.via(b, op, "tfl.div", op.operands[:2])


@legalize("tf.TruncateDiv")
def truncate_div(b: Builder, op: Operation) -> list[Value]:
    """i32: INTDIV (truncating, spec 2.5.6 INTDIV); float: x/y truncated toward zero (no lowering in lowering doc:
    tf.TruncateDiv)."""
    x, y = op.operands[0], op.operands[1]
    require_not_quantized(op, x, y)
    if x.dtype is DType.INT32 and y.dtype is DType.INT32:
        return [b.binary("INTDIV", x, y)]
    require_float(op, x, y)
    return [truncate_toward_zero(b, float_divide(b, x, y))]


@legalize("tf.DivNoNan")
def div_no_nan(b: Builder, op: Operation) -> list[Value]:
    """y == 0 ? 0 : x / y (SELECT; no lowering in lowering doc: tf.DivNoNan)."""
    x, y = op.operands[0], op.operands[1]
    require_float(op, x, y)
    zero = fconst(b, 0.0, y)
    q = float_divide(b, x, y)
    return [select(b, b.binary("EQUAL", y, zero), fconst(b, 0.0, q), q)]


@legalize("tf.MulNoNan")
def mul_no_nan(b: Builder, op: Operation) -> list[Value]:
    """y == 0 ? 0 : x·y (SELECT; no lowering in lowering doc: tf.MulNoNan)."""
    x, y = op.operands[0], op.operands[1]
    require_float(op, x, y)
    p = b.mul(x, y)
    return [select(b, b.binary("EQUAL", y, fconst(b, 0.0, y)), fconst(b, 0.0, p), p)]


# ------------------------------------------------------------------------------------------------- unary
for _tf, _tfl, _doc in (
        ("tf.Abs", "tfl.abs", " (ABS, lowering doc: tf.Abs)"),
        ("tf.Neg", "tfl.neg", " (NEGATE with zero points 0, lowering doc: tf.Neg)"),
        ("tf.Exp", "tfl.exp", " (EXP, lowering doc: tf.Exp)"), ("tf.Log", "tfl.log", " (LOG, lowering doc: tf.Log)"),
        ("tf.Floor", "tfl.floor", " (FLOOR, lowering doc: tf.Floor)"),
        ("tf.Ceil", "tfl.ceil", " (CEIL, lowering doc: tf.Ceil)"),
        ("tf.Rsqrt", "tfl.rsqrt", " (RSQRT, lowering doc: tf.Rsqrt)"),
        ("tf.Sqrt", "tfl.sqrt", " (RECIPROCAL(RSQRT(x)); no SQRT)"),
        ("tf.Square", "tfl.square", " (x·x, lowering doc: tf.Square)"), ("tf.Sin", "tfl.sin", " (SIN)"),
        ("tf.Cos", "tfl.cos", " (COS)"),
        ("tf.Round", "tfl.round", " (half to even; lowering doc: lower_round_op rounds half up)"),
        ("tf.Sign", "tfl.sign", " (two SELECTs; 0 for 0 and NaN)"), ("tf.LogicalNot", "tfl.logical_not", "")):
    _same_as((_tf,), _tfl, 1, note=_doc)


@legalize("tf.Reciprocal", "tf.Inv")
def reciprocal(b: Builder, op: Operation) -> list[Value]:
    """RECIPROCAL (lowering doc: tf.Reciprocal)."""
    x = op.operands[0]
    require_float(op, x)
    return [b.reciprocal(x)]


@legalize("tf.Log1p")
def log1p(b: Builder, op: Operation) -> list[Value]:
    """log(1 + x) accurate near 0 (:func:`tf_ops.log1p`; no lowering in lowering doc: tf.Log1p)."""
    x = op.operands[0]
    require_float(op, x)
    return [tf_ops.log1p(b, x)]


@legalize("tf.Expm1")
def expm1_(b: Builder, op: Operation) -> list[Value]:
    """exp(x) − 1 accurate near 0 (the helper tfl.elu uses)."""
    x = op.operands[0]
    require_float(op, x)
    return [expm1(b, x)]


@legalize("tf.IsFinite")
def is_finite(b: Builder, op: Operation) -> list[Value]:
    """x − x == 0 (NaN for ±inf and NaN; no lowering in lowering doc: tf.IsFinite)."""
    x = op.operands[0]
    require_float(op, x)
    return [b.binary("EQUAL", b.binary("SUB", x, x), fconst(b, 0.0, x))]


@legalize("tf.IsNan")
def is_nan(b: Builder, op: Operation) -> list[Value]:
    """NOT(x == x)."""
    x = op.operands[0]
    require_float(op, x)
    return [b.logical_not(b.binary("EQUAL", x, x))]


@legalize("tf.IsInf")
def is_inf(b: Builder, op: Operation) -> list[Value]:
    """|x| == inf."""
    x = op.operands[0]
    require_float(op, x)
    return [b.binary("EQUAL", b.abs(x), fconst(b, float("inf"), x))]


@legalize("tf.ClipByValue")
def clip_by_value(b: Builder, op: Operation) -> list[Value]:
    """CLAMP for constant scalar bounds, else MINIMUM(MAXIMUM(x, lo), hi) with broadcasting."""
    x, lo, hi = op.operands[0], op.operands[1], op.operands[2]
    require_not_quantized(op, x)
    lc, hc = lo.const(), hi.const()
    if (x.dtype in FLOAT_TYPES and lc is not None and hc is not None and lc.size == 1 and hc.size == 1
            and float(lc.reshape(-1)[0]) <= float(hc.reshape(-1)[0])):
        return [b.clamp(x, float(lc.reshape(-1)[0]), float(hc.reshape(-1)[0]))]
    if x.dtype not in FLOAT_TYPES and x.dtype is not DType.INT32:
        raise Unsupported(f"{op.name} on {x.dtype}")
    y = b.binary("MAXIMUM", x, lo, nan_mode="PROPAGATE")
    return [b.binary("MINIMUM", y, hi, nan_mode="PROPAGATE")]


# ------------------------------------------------------------------------------------- comparisons / logic
for _tf, _tfl in (("tf.Equal", "tfl.equal"), ("tf.NotEqual", "tfl.not_equal"), ("tf.Greater", "tfl.greater"),
                  ("tf.GreaterEqual", "tfl.greater_equal"), ("tf.Less", "tfl.less"),
                  ("tf.LessEqual", "tfl.less_equal"), ("tf.LogicalAnd", "tfl.logical_and"),
                  ("tf.LogicalOr", "tfl.logical_or")):
    _same_as((_tf,), _tfl, 2)

_INT = (DType.INT8, DType.INT16, DType.INT32)


def _ints(op: Operation, *xs: Value) -> None:
    dts = {x.dtype for x in xs}
    if len(dts) != 1 or next(iter(dts)) not in _INT:
        raise Unsupported(f"{op.name} on {sorted(d.value for d in dts)} (TOSA has i8/i16/i32 only)")


def _bitwise(tf_name: str, opcode: str, **attrs: object) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x, y = op.operands[0], op.operands[1]
        _ints(op, x, y)
        return [b.binary(opcode, x, y, **attrs)]

    rule.__doc__ = f"{opcode} on i8/i16/i32 with rank broadcasting."
    legalize(tf_name)(rule)


_bitwise("tf.BitwiseAnd", "BITWISE_AND")
_bitwise("tf.BitwiseOr", "BITWISE_OR")
_bitwise("tf.BitwiseXor", "BITWISE_XOR")
_bitwise("tf.LeftShift", "LOGICAL_LEFT_SHIFT")
_bitwise("tf.RightShift", "ARITHMETIC_RIGHT_SHIFT", round=False)  # signed types only: TOSA has no unsigned


@legalize("tf.Invert")
def invert(b: Builder, op: Operation) -> list[Value]:
    """BITWISE_NOT (lowering doc: tf.Invert)."""
    x = op.operands[0]
    _ints(op, x)
    return [b.bitwise_not(x)]


# ---------------------------------------------------------------------------------------------- reductions
_HOST_REDUCE: dict[str, Callable[..., Any]] = {"tf.Mean": np.mean, "tf.Sum": np.sum, "tf.Max": np.max,
                                               "tf.Min": np.min, "tf.Prod": np.prod, "tf.All": np.all,
                                               "tf.Any": np.any}


def _host_reduce(b: Builder, op: Operation) -> Value | None:
    """A reduction of a constant (shape arithmetic such as Keras' Tensordot: Prod of a Shape) computed on the
    host, in the source type narrowed to a TOSA type; TOSA has no integer REDUCE_PRODUCT or mean."""
    x, axes_v = op.operands[0], op.operands[1]
    c, a = x.const(), axes_v.const()
    if c is None or a is None:
        return None
    rank = c.ndim
    axes = tuple(sorted({positive_axis(int(i), rank) for i in np.asarray(a).reshape(-1)})) if rank else ()
    keep = bool(op.attrs.get("keep_dims", False))
    out = op.results[0].dtype
    sym = x.sym_const()
    if op.name in ("tf.Prod", "tf.Sum") and out.is_int and sym is not None and has_symbols(sym):
        # --dynamic: a product or sum of sizes keeps their dimension expressions (Python ints, no wrap-around)
        folded = np.asarray(_HOST_REDUCE[op.name](np.asarray(sym, dtype=object), axis=axes, keepdims=keep),
                            dtype=object)
        return b.sizes(folded, tosa_dtype(out))
    res = _HOST_REDUCE[op.name](c, axis=axes, keepdims=keep)
    arr = np.asarray(res)
    if out.is_int:
        arr = np.trunc(arr) if arr.dtype.kind == "f" else arr
    return b.const(narrow_array(arr.astype(out.np_dtype()), out), tosa_dtype(out))


for _tf, _tfl in (("tf.Mean", "tfl.mean"), ("tf.Sum", "tfl.sum"), ("tf.Max", "tfl.reduce_max"),
                  ("tf.Min", "tfl.reduce_min"), ("tf.Prod", "tfl.reduce_prod"), ("tf.All", "tfl.reduce_all"),
                  ("tf.Any", "tfl.reduce_any")):

    def _reduce_rule(b: Builder, op: Operation, _name: str = _tfl) -> list[Value]:
        host = _host_reduce(b, op)
        if host is not None:
            return [host]
        return delegate.via(b, op, _name, op.operands[:2], {"keep_dims": bool(op.attrs.get("keep_dims", False))})

    _reduce_rule.__doc__ = f"{_tfl}'s lowering: one REDUCE per axis (1.0 takes one axis, spec 2.9.6 REDUCE_SUM), " \
                           "RESHAPE without " \
                           "keep_dims (lowering doc: lower_reduce_op); constant inputs reduced on the host."
    legalize(_tf)(_reduce_rule)


@legalize("tf.ArgMax")
def arg_max(b: Builder, op: Operation) -> list[Value]:
    """ARGMAX with an i32 result (TF's int64 output type narrowed, §6.7; lowering doc: tf.ArgMax)."""
    return delegate.via(b, op, "tfl.arg_max", op.operands[:2])


@legalize("tf.ArgMin")
def arg_min(b: Builder, op: Operation) -> list[Value]:
    """ARGMAX of the negated input (tfl.arg_min's lowering; 1.0 has no ARGMIN)."""
    return delegate.via(b, op, "tfl.arg_min", op.operands[:2])

