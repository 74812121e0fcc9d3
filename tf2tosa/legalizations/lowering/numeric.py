"""Helpers shared by the float rules of tfl_nn / tfl_math / tfl_activation / tfl_reduce.

Everything here emits TOSA 1.0 ops through the :class:`Builder`; line references are to the TOSA 1.0
specification seed (``S<line>``) and to the lowering document (``L<line>``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ConversionError, Unsupported
from ...ir import DType, Operation, QuantParams, Value
from ...ir.symdim import is_symbolic, size
from ...tosa import shapes as tosa_shapes
from ...tosa.builder import Builder
from .legalize_common import const_operand, float_zp, positive_axis, scalar_const

#: element types the float rules accept (TOSA PRO-FP, spec 1.9 Supported Number Formats)
FLOAT_TYPES = (DType.FP32, DType.FP16, DType.BF16)


def require_float(op: Operation, *values: Value) -> DType:
    """The common float element type of ``values``; Unsupported for quantized or non-float inputs."""
    for v in values:
        if v.type.is_quantized:
            raise Unsupported(f"quantized {op.name} not yet supported")
    dts = {v.dtype for v in values}
    if len(dts) != 1 or next(iter(dts)) not in FLOAT_TYPES:
        raise Unsupported(f"{op.name} on element type(s) {sorted(d.value for d in dts)} not supported")
    return next(iter(dts))


def require_not_quantized(op: Operation, *values: Value) -> None:
    for v in values:
        if v.type.is_quantized:
            raise Unsupported(f"quantized {op.name} not yet supported")


def static_shape(v: Value) -> list[int]:
    """The static shape of an (already legalized) operand."""
    if not v.type.is_static:
        raise Unsupported(f"operand {v.name} has a dynamic shape {v.shape}")
    return [size(d) for d in v.shape]


def operands(op: Operation, *ranks: int | None) -> list[Value]:
    """The first ``len(ranks)`` operands of ``op``, each present and of the given rank (None: any rank).

    A malformed model (too few operands, a filter of the wrong rank) raises Unsupported instead of failing
    inside the rule."""
    if len(op.operands) < len(ranks):
        raise Unsupported(f"{op.name} has {len(op.operands)} operand(s), needs at least {len(ranks)}")
    out = list(op.operands[:len(ranks)])
    for k, (v, r) in enumerate(zip(out, ranks)):
        if r is not None and v.type.rank != r:
            raise Unsupported(f"operand {k} of {op.name} has rank {v.type.rank}, expected {r}")
        if 0 in v.type.shape:
            raise Unsupported(f"operand {k} of {op.name} has a zero-sized dimension {list(v.type.shape)}")
    return out


def fconst(b: Builder, value: float, like: Value) -> Value:
    """A float scalar broadcastable to ``like`` (rank(like) dims of 1), in ``like``'s element type."""
    return scalar_const(b, value, like)


def axes_operand(op: Operation, k: int, rank: int) -> list[int]:
    """Sorted, de-duplicated, non-negative axes from constant operand ``k`` (scalar or 1-D)."""
    arr = np.asarray(const_operand(op, k, "axis"))
    if arr.dtype.kind not in "iu":
        raise Unsupported(f"malformed: the axes (operand {k}) of {op.name} are {arr.dtype}, not integers")
    axes = sorted({positive_axis(int(a), rank) for a in arr.reshape(-1)})
    return axes


def reduce_axes(b: Builder, opcode: str, x: Value, axes: Sequence[int], keep_dims: bool,
                quant: QuantParams | None = None, **attrs: object) -> Value:
    """REDUCE_<op> once per axis (1.0 takes a single axis and keeps the dim as 1, spec 2.9.6 REDUCE_SUM), then RESHAPE.

    With no axes the input is returned through IDENTITY (the lower_reduce_op lowering's IDENTITY branch).
    """
    shape = static_shape(x)
    if not axes:
        return b.identity(x)
    if x.type.rank == 0:
        raise Unsupported("reduction of a rank-0 tensor")
    y = x
    for a in axes:
        y = b.emit(opcode, [y], {"axis": int(a), **attrs}, quant=quant).result
    if not keep_dims:
        y = b.reshape(y, [d for i, d in enumerate(shape) if i not in set(axes)])
    return y


def broadcast_shape(*shapes: Sequence[int]) -> list[int]:
    """numpy broadcast of static shapes; Unsupported when incompatible.  Sizes that carry dimension expressions
    (``--dynamic``) broadcast as the dynamic-shape RFC says (:func:`tf2tosa.tosa.shapes.broadcast_shape`)."""
    if any(is_symbolic(d) for s in shapes for d in s):
        rank = max((len(s) for s in shapes), default=0)
        out: tuple[Any, ...] = (1,) * rank
        try:
            for s in shapes:
                out = tosa_shapes.broadcast_shape("broadcast", out, (1,) * (rank - len(s)) + tuple(s))
        except ConversionError:
            raise Unsupported(f"shapes {[list(s) for s in shapes]} do not broadcast") from None
        return list(out)
    try:
        return [int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes])]
    except ValueError:
        raise Unsupported(f"shapes {[list(s) for s in shapes]} do not broadcast") from None


def expm1(b: Builder, x: Value) -> Value:
    """exp(x) - 1 without the cancellation of EXP-then-SUB near 0.

    For |x| < 0.35 a degree-7 Taylor polynomial (truncation < 2e-9 relative); elsewhere EXP(x) - 1.
    """
    one = fconst(b, 1.0, x)
    big = b.binary("SUB", b.exp(x), one)
    # Horner: x*(1 + x/2*(1 + x/3*(1 + x/4*(1 + x/5*(1 + x/6*(1 + x/7))))))
    p = one
    for k in (7, 6, 5, 4, 3, 2):
        p = b.binary("ADD", one, b.mul(b.mul(x, fconst(b, 1.0 / k, x)), p))
    small = b.mul(x, p)
    ax = b.abs(x)
    near0 = b.binary("GREATER", fconst(b, 0.35, x), ax)
    return b.emit("SELECT", [near0, small, big]).result


def float_divide(b: Builder, num: Value, den: Value) -> Value:
    """num / den as num * RECIPROCAL(den) (lowering doc: tfl.div); RECIPROCAL is within 1 ulp (spec 2.6.11
    RECIPROCAL)."""
    return b.mul(num, b.reciprocal(den))


def select(b: Builder, cond: Value, on_true: Value, on_false: Value) -> Value:
    """SELECT with equal-rank broadcasting of all three inputs (spec 2.7.1 SELECT)."""
    c, t, f = b.broadcast_ranks(cond, on_true, on_false)
    return b.emit("SELECT", [c, t, f]).result


#: atan(z)/z ≈ Σ c_k z^(2k) on |z| <= tan(π/8): least squares on Chebyshev nodes, |error| < 3e-10 rad
ATAN_COEFFS = (0.9999999993919576, -0.3333330748848136, 0.19998210528382793, -0.14239977898209727,
               0.10572776853314421, -0.06033144244005776)


def float_atan2(b: Builder, y: Value, x: Value) -> Value:
    """atan2(y, x) of float values without an ATAN operator (tfl.atan2's lowering, also MediaPipe's landmark rotation
    and NNEF's atan/asin/acos): octant reduction to |z| <= tan(π/8), the odd polynomial :data:`ATAN_COEFFS`, the
    octant fixes; atan2(0, 0) = 0."""

    def k(v: float, like: Value) -> Value:
        return fconst(b, v, like)

    ax, ay = b.abs(x), b.abs(y)
    mx = b.binary("MAXIMUM", ax, ay, nan_mode="PROPAGATE")
    mn = b.binary("MINIMUM", ax, ay, nan_mode="PROPAGATE")
    zero_den = b.binary("EQUAL", mx, k(0.0, mx))
    a = select(b, zero_den, k(0.0, mx), float_divide(b, mn, mx))
    far = b.binary("GREATER", a, k(float(np.tan(np.pi / 8)), a))
    z = select(b, far, float_divide(b, b.binary("SUB", a, k(1.0, a)), b.binary("ADD", a, k(1.0, a))), a)
    z2 = b.mul(z, z)
    p = k(ATAN_COEFFS[-1], z)
    for c in reversed(ATAN_COEFFS[:-1]):
        p = b.binary("ADD", b.mul(p, z2), k(c, z))
    r = b.mul(p, z)
    r = select(b, far, b.binary("ADD", r, k(np.pi / 4, r)), r)
    r = select(b, b.binary("GREATER", ay, ax), b.binary("SUB", k(np.pi / 2, r), r), r)
    r = select(b, b.binary("GREATER", k(0.0, x), x), b.binary("SUB", k(np.pi, r), r), r)
    neg = b.binary("GREATER", k(0.0, y), y)
    return select(b, neg, b.negate(r, float_zp(b, r.dtype), float_zp(b, r.dtype)), r)


__all__ = ["ATAN_COEFFS", "FLOAT_TYPES", "axes_operand", "broadcast_shape", "expm1", "fconst", "float_atan2",
           "float_divide", "reduce_axes", "require_float", "require_not_quantized", "select", "static_shape"]
