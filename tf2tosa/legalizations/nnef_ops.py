"""Rules for the NNEF standard operations (``nnef.*`` ops of :mod:`tf2tosa.converter.nnef`).

Semantics are the NNEF 1.0 specification's (the seed document, chapter 4): NCHW data, OIHW filters, ``groups = 0``
for depthwise, ``border`` modes, explicit or automatic (``padding = []``) padding, broadcasting that aligns the
*leading* dimensions, ``reshape`` with 0 (copy the dimension) and -1 (infer it).

Every rule lowers through the rule of the TFLite op with the same meaning (:func:`.delegate.via`), so the float
and the quantized arithmetic (RESCALE, TABLE, bias and accumulator types) is the one the ``tfl.*`` rules use and is
bit-exact with LiteRT's reference kernels where those are.  Spatial operations run in NHWC: the layout pass
(:mod:`tf2tosa.converter.passes.layout`) marks them ``layout = "NHWC"`` and moves the transposes; without the
mark a rule transposes its own input and output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import wraps
from typing import Any

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, QuantParams, TensorType, Value
from ..tosa.builder import Builder
from .delegate import via
from .lowering.layout import dilate_axis, resolve_reshape, take_every
from .lowering.legalize_common import positive_axis
from .lowering.numeric import fconst, float_divide, require_float, static_shape
from .lowering.padding import same_padding
from .registry import RULES, legalize

_ANY = ("fp32", "i8", "i32", "bool")
_Q = ("fp32", "i8")
TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)


# ----------------------------------------------------------------------------------------------------- helpers
def permute_type(t: TensorType, perm: Sequence[int]) -> TensorType:
    """The type of ``transpose(x, perm)`` for ``x`` of type ``t`` (a per-channel axis follows its dimension)."""
    q = t.quant
    if q is not None and q.axis is not None:
        q = QuantParams(q.scale, q.zero_point, list(perm).index(q.axis))
    return TensorType(tuple(t.shape[p] for p in perm), t.dtype, q)


def transpose(b: Builder, x: Value, perm: Sequence[int]) -> Value:
    """TRANSPOSE keeping a per-channel quantization axis attached to its dimension."""
    y = b.transpose(x, list(perm))
    if y is not x and x.type.quant is not None and x.type.quant.axis is not None:
        y.type = permute_type(x.type, perm)
    return y


def _detached(b: Builder, t: TensorType, name: str = "nnef_result") -> Value:
    """A result value for a :func:`via` proxy op (never added to the graph)."""
    return Value(b.graph, -1, name, t)


def _const(b: Builder, values: Any, dtype: DType = DType.INT32) -> Value:
    return b.const(np.asarray(values), dtype, name="nnef_param")


def _literal(v: Value) -> float | int | bool | None:
    """The value of a rank-0 (or single-element) constant operand, else None."""
    arr = v.const()
    if arr is None or np.asarray(arr).size != 1:
        return None
    return np.asarray(arr).reshape(-1)[0].item()


def _is_zero(v: Value) -> bool:
    lit = _literal(v)
    return lit is not None and lit == 0 and v.type.rank == 0


def _leading(b: Builder, v: Value, rank: int) -> Value:
    """NNEF broadcasting aligns leading dimensions: append trailing 1s up to ``rank``."""
    if v.type.rank >= rank:
        return v
    if v.is_const:
        arr = np.asarray(v.const())
        return b.const(arr.reshape(arr.shape + (1,) * (rank - arr.ndim)), v.dtype, quant=v.type.quant,
                       name="nnef_broadcast")
    return b.reshape(v, tuple(v.shape) + (1,) * (rank - v.type.rank))


def _nhwc(b: Builder, op: Operation, x: Value) -> Value:
    """The NHWC form of the rule's 4-D data input."""
    if x.type.rank != 4:
        raise Unsupported(f"{op.name} on a rank-{x.type.rank} tensor (1-D and 2-D windows; 3-D for conv and "
                          "deconv only)")
    return x if op.attrs.get("layout") == "NHWC" else transpose(b, x, TO_NHWC)


def _out(b: Builder, op: Operation, y: Value) -> Value:
    return y if op.attrs.get("layout") == "NHWC" else transpose(b, y, TO_NCHW)


def _out_nhwc_type(op: Operation) -> TensorType:
    t = op.results[0].type
    return t if op.attrs.get("layout") == "NHWC" else permute_type(t, TO_NHWC)


def _pairs(padding: Any) -> list[tuple[int, int]]:
    return [(int(p[0]), int(p[1])) for p in (padding or [])]


def _spatial_pads(op: Operation, in_hw: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                  dilation: Sequence[int], full_rank: bool) -> list[int]:
    """[top, bottom, left, right]; ``padding = []`` is the spec's automatic padding (as TF's SAME)."""
    pads = _pairs(op.attrs.get("padding"))
    if not pads:
        out: list[int] = []
        for i in range(2):
            out += list(same_padding(in_hw[i], kernel[i], stride[i], dilation[i]))
        return out
    if full_rank:  # pooling: one pair per dimension (NCHW, or NHWC after the layout pass)
        nhwc = op.attrs.get("layout") == "NHWC"
        batch_chan = [pads[0], pads[3]] if nhwc else [pads[0], pads[1]]
        if any(p != (0, 0) for p in batch_chan):
            raise Unsupported(f"{op.name} pads the batch or channel dimension: {pads}")
        pads = pads[1:3] if nhwc else pads[2:4]
    if len(pads) != 2:
        raise Unsupported(f"padding {pads} for a 2-D window")
    return [pads[0][0], pads[0][1], pads[1][0], pads[1][1]]


def _window_padding(b: Builder, x: Value, pads: list[int], in_hw: Sequence[int], kernel: Sequence[int],
                    stride: Sequence[int], dilation: Sequence[int], pad_value: float | int) -> tuple[Value, str]:
    """The TFLite padding name for ``pads``; pads neither SAME nor VALID are applied with a PAD first."""
    same: list[int] = []
    for i in range(2):
        same += list(same_padding(in_hw[i], kernel[i], stride[i], dilation[i]))
    if pads == same:
        return x, "SAME"
    if not any(pads):
        return x, "VALID"
    if min(pads) < 0:
        raise Unsupported(f"negative padding {pads}")
    return b.pad(x, [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0], pad_value), "VALID"


#: the border modes that extend the input with its own values (spec 4.3 "Border Modes")
EXTENDING_BORDERS = ("replicate", "reflect", "reflect-even")


def _border_index(i: int, z: int, border: str) -> int:
    """The input index the spec's extended input takes at position ``i`` (−p ≤ i < z + q)."""
    if 0 <= i < z:
        return i
    if border == "replicate":
        return 0 if i < 0 else z - 1
    if border == "reflect":
        j = -i if i < 0 else z - 1 - (i - z + 1)
    else:  # reflect-even: the edge is duplicated
        j = -i - 1 if i < 0 else z - 1 - (i - z)
    if not 0 <= j < z:
        raise Unsupported(f"border '{border}' padding of {-i if i < 0 else i - z + 1} on a dimension of {z}")
    return j


def border_pad(b: Builder, x: Value, axes: Sequence[int], pads: Sequence[int], border: str) -> Value:
    """``x`` extended along ``axes`` by (before, after) = ``pads[2k], pads[2k+1]`` with the values of ``border``
    ('replicate', 'reflect', 'reflect-even'): one-element SLICEs of the input CONCATenated around it."""
    y = x
    for k, axis in enumerate(axes):
        lo, hi = int(pads[2 * k]), int(pads[2 * k + 1])
        if not lo and not hi:
            continue
        if lo < 0 or hi < 0:
            raise Unsupported(f"negative padding {list(pads)}")
        shape = static_shape(y)
        z = shape[axis]
        size = list(shape)
        size[axis] = 1

        def row(i: int, y: Value = y, z: int = z, axis: int = axis, size: list[int] = size) -> Value:
            start = [0] * len(size)
            start[axis] = _border_index(i, z, border)
            return b.slice(y, start, size)

        parts = [row(i) for i in range(-lo, 0)] + [y] + [row(i) for i in range(z, z + hi)]
        y = b.concat(parts, axis)
    return y


def _lowest(x: Value) -> float | int:
    """The lowest value of ``x``'s element type (a padding no maximum picks)."""
    if x.dtype.is_float:
        return float(np.finfo(np.float32).min)
    return int(x.dtype.range()[0])


def _zero_of(x: Value) -> float | int:
    q = x.type.quant
    return int(q.zero_point[0]) if q is not None else 0


def _ints(v: Any, n: int, default: int = 1) -> list[int]:
    vals = [int(a) for a in (v or [])]
    return vals if vals else [default] * n


# ------------------------------------------------------------------------------------------------ 1-D windows
_Rule = Callable[[Builder, Operation], list[Value]]


def _unit_h(b: Builder, v: Value, nwc: bool = False) -> Value:
    """[N, C, W] → [N, C, 1, W], or [N, W, C] → [N, 1, W, C] (constants refolded, so a quantized filter stays a
    constant)."""
    shape = tuple(static_shape(v))
    u = 1 if nwc else 2
    new = shape[:u] + (1,) + shape[u:]
    arr = v.const()
    if arr is not None:
        return b.const(np.asarray(arr).reshape(new), v.dtype, quant=v.type.quant, name="nnef_unit_h")
    return b.reshape(v, new)


def one_d(full_rank: bool) -> Callable[[_Rule], _Rule]:
    """Lift a 2-D window rule to NNEF's rank-3 (NCW, or NWC after the layout pass) form: a unit spatial dimension
    H is inserted in the data (NCHW / NHWC; and in the filter of ``conv``/``deconv``, the index of ``sample`` /
    ``desample``), the window attributes gain their H entry (size/stride/dilation 1, padding (0, 0)) and the 2-D
    result is reshaped back.  ``full_rank``: the window attributes have one entry
    per dimension (pools), else per spatial dimension (convolutions, resampling ``factor``)."""

    def deco(rule: _Rule) -> _Rule:
        @wraps(rule)
        def lifted(b: Builder, op: Operation) -> list[Value]:
            x = op.operands[0]
            if x.type.rank != 3:
                return rule(b, op)
            nwc = op.attrs.get("layout") == "NHWC"  # the layout pass made it [N, W, C]: H goes before W
            at = (1 if nwc else 2) if full_rank else 0
            attrs = dict(op.attrs)
            for key in ("size", "stride", "dilation", "factor"):
                v = [int(a) for a in (attrs.get(key) or [])]
                if v:
                    attrs[key] = v[:at] + [1] + v[at:]
            pads = _pairs(attrs.get("padding"))
            if pads:
                attrs["padding"] = pads[:at] + [(0, 0)] + pads[at:]
            if attrs.get("output_shape"):
                out = [int(d) for d in attrs["output_shape"]]
                attrs["output_shape"] = out[:2] + [1] + out[2:]
            operands = [_unit_h(b, x, nwc)]
            if op.opcode in ("conv", "deconv", "sample", "desample"):  # the filter / the index
                operands.append(_unit_h(b, op.operands[1]) if op.operands[1].type.rank == 3 else op.operands[1])
            operands += op.operands[len(operands):]
            results = []
            for r in op.results:
                s = tuple(r.type.shape)
                u = 1 if nwc else 2
                results.append(_detached(b, TensorType(s[:u] + (1,) + s[u:], r.type.dtype, r.type.quant)))
            proxy = Operation(-1, op.name, operands, results, attrs, [], op.location)
            return [b.reshape(y, r.shape) for y, r in zip(rule(b, proxy), op.results)]

        return lifted

    return deco


# ------------------------------------------------------------------------------------------------ constants
@legalize("nnef.const", dtypes=_ANY)
def const(b: Builder, op: Operation) -> list[Value]:
    """CONST of a variable (``.dat``), ``constant`` or literal; quantized data as stored (graph.quant)."""
    t = op.results[0].type
    # (not b.const, which copies: a variable's data stays the read-only view of its mapped .dat file)
    return [b.graph.add_const(np.asarray(op.attrs["values"]), t.dtype, name=b.name_hint or "const", quant=t.quant)]


@legalize("nnef.copy", dtypes=_ANY)
def copy(b: Builder, op: Operation) -> list[Value]:
    """``copy``: the identity (a RESCALE when graph.quant gives the copy another quantization)."""
    return via(b, op, "tfl.reshape", [op.operands[0]], {"new_shape": list(op.results[0].shape)})


# ------------------------------------------------------------------------------------------------ elementwise
_UNARY = {"exp": "tfl.exp", "log": "tfl.log", "sin": "tfl.sin", "cos": "tfl.cos", "abs": "tfl.abs",
          "neg": "tfl.neg", "sign": "tfl.sign", "floor": "tfl.floor", "ceil": "tfl.ceil", "not": "tfl.logical_not",
          "sqrt": "tfl.sqrt", "rsqrt": "tfl.rsqrt", "sqr": "tfl.square", "relu": "tfl.relu", "sigmoid": "tfl.logistic",
          "tanh": "tfl.tanh"}
_BINARY = {"add": "tfl.add", "sub": "tfl.sub", "mul": "tfl.mul", "div": "tfl.div", "pow": "tfl.pow",
           "min": "tfl.minimum", "max": "tfl.maximum", "lt": "tfl.less", "gt": "tfl.greater", "le": "tfl.less_equal",
           "ge": "tfl.greater_equal", "eq": "tfl.equal", "ne": "tfl.not_equal", "and": "tfl.logical_and",
           "or": "tfl.logical_or"}


def _operands_ranked(b: Builder, op: Operation) -> list[Value]:
    """The tensor operands with NNEF's leading-aligned broadcasting made explicit (equal ranks)."""
    rank = max(v.type.rank for v in op.operands)
    return [_leading(b, v, rank) for v in op.operands]


def _unary(nnef_name: str, tfl_name: str) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        return via(b, op, tfl_name, op.operands[:1])

    rule.__doc__ = f"``{nnef_name}``: {tfl_name}'s lowering."
    legalize(f"nnef.{nnef_name}", dtypes=_Q)(rule)


def _binary(nnef_name: str, tfl_name: str) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        return via(b, op, tfl_name, _operands_ranked(b, op))

    rule.__doc__ = f"``{nnef_name}``: {tfl_name}'s lowering, NNEF broadcasting (leading dimensions aligned)."
    legalize(f"nnef.{nnef_name}", dtypes=_Q)(rule)


for _n, _t in _UNARY.items():
    _unary(_n, _t)
for _n, _t in _BINARY.items():
    _binary(_n, _t)


@legalize("nnef.round")
def round_(b: Builder, op: Operation) -> list[Value]:
    """``round``: nearest integer, halves away from zero (sign(x)·floor(|x| + 0.5))."""
    x = op.operands[0]
    require_float(op, x)
    mag = b.emit("FLOOR", [b.binary("ADD", b.emit("ABS", [x]).result, fconst(b, 0.5, x))]).result
    pos = b.binary("GREATER_EQUAL", x, fconst(b, 0.0, x))
    return [b.emit("SELECT", [pos, mag, b.emit("NEGATE", [mag, b.zp(0, x.dtype), b.zp(0, x.dtype)]).result]).result]


@legalize("nnef.rcp")
def rcp(b: Builder, op: Operation) -> list[Value]:
    """``rcp``: 1 / x (RECIPROCAL)."""
    require_float(op, op.operands[0])
    return [b.emit("RECIPROCAL", [op.operands[0]]).result]


def _float_unary(name: str, doc: str, fn: Any) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x = op.operands[0]
        require_float(op, x)
        return [fn(b, x)]

    rule.__doc__ = doc
    legalize(f"nnef.{name}")(rule)


def _exp(b: Builder, x: Value) -> Value:
    return b.emit("EXP", [x]).result


def _log(b: Builder, x: Value) -> Value:
    return b.emit("LOG", [x]).result


def _neg(b: Builder, x: Value) -> Value:
    return b.mul(x, fconst(b, -1.0, x))


def _sqrt(b: Builder, x: Value) -> Value:
    return b.emit("POW", [x, fconst(b, 0.5, x)]).result


_float_unary("tan", "``tan``: SIN / COS.",
             lambda b, x: float_divide(b, b.emit("SIN", [x]).result, b.emit("COS", [x]).result))
_float_unary("sinh", "``sinh``: (e^x − e^−x) / 2.",
             lambda b, x: b.mul(b.binary("SUB", _exp(b, x), _exp(b, _neg(b, x))), fconst(b, 0.5, x)))
_float_unary("cosh", "``cosh``: (e^x + e^−x) / 2.",
             lambda b, x: b.mul(b.binary("ADD", _exp(b, x), _exp(b, _neg(b, x))), fconst(b, 0.5, x)))
_float_unary("asinh", "``asinh``: log(x + sqrt(x² + 1)).",
             lambda b, x: _log(b, b.binary("ADD", x, _sqrt(b, b.binary("ADD", b.mul(x, x), fconst(b, 1.0, x))))))
_float_unary("acosh", "``acosh``: log(x + sqrt(x² − 1)).",
             lambda b, x: _log(b, b.binary("ADD", x, _sqrt(b, b.binary("SUB", b.mul(x, x), fconst(b, 1.0, x))))))
_float_unary("atanh", "``atanh``: log((1 + x) / (1 − x)) / 2.",
             lambda b, x: b.mul(_log(b, float_divide(b, b.binary("ADD", fconst(b, 1.0, x), x),
                                                     b.binary("SUB", fconst(b, 1.0, x), x))), fconst(b, 0.5, x)))
_float_unary("log2", "``log2``: LOG(x) / ln 2.", lambda b, x: b.mul(_log(b, x), fconst(b, 1.0 / np.log(2.0), x)))
_float_unary("rsqr", "``rsqr``: 1 / x².", lambda b, x: b.emit("RECIPROCAL", [b.mul(x, x)]).result)
_float_unary("silu", "``silu``: x · sigmoid(x).", lambda b, x: b.mul(x, b.emit("SIGMOID", [x]).result))
_float_unary("softplus", "``softplus``: log(exp(x) + 1).",
             lambda b, x: _log(b, b.binary("ADD", _exp(b, x), fconst(b, 1.0, x))))


@legalize("nnef.softabs")
def softabs(b: Builder, op: Operation) -> list[Value]:
    """``softabs(x, epsilon)``: sqrt(x² + ε)."""
    x = op.operands[0]
    require_float(op, x)
    return [_sqrt(b, b.binary("ADD", b.mul(x, x), fconst(b, float(op.attrs.get("epsilon", 0.0)), x)))]


@legalize("nnef.elu", dtypes=_Q)
def elu(b: Builder, op: Operation) -> list[Value]:
    """``elu(x, alpha)``: select(x < 0, alpha·(exp(x) − 1), x); quantized (alpha 1): tfl.elu's TABLE."""
    x = op.operands[0]
    alpha = float(op.attrs.get("alpha", 1.0))
    if x.type.is_quantized:
        if alpha != 1.0:
            raise Unsupported(f"quantized elu with alpha {alpha}")
        return via(b, op, "tfl.elu", [x])
    require_float(op, x)
    neg = b.mul(b.binary("SUB", _exp(b, x), fconst(b, 1.0, x)), fconst(b, alpha, x))
    return [b.emit("SELECT", [b.binary("GREATER", fconst(b, 0.0, x), x), neg, x]).result]


def _atan2(b: Builder, op: Operation, y: Value, x: Value) -> Value:
    return via(b, op, "tfl.atan2", [y, x], results=[_detached(b, op.results[0].type)])[0]


@legalize("nnef.atan")
def atan(b: Builder, op: Operation) -> list[Value]:
    """``atan``: atan2(x, 1) (tfl.atan2's lowering)."""
    x = op.operands[0]
    require_float(op, x)
    return [_atan2(b, op, x, b.const(np.ones(static_shape(x)), x.dtype))]


@legalize("nnef.asin")
def asin(b: Builder, op: Operation) -> list[Value]:
    """``asin``: atan2(x, sqrt(1 − x²))."""
    x = op.operands[0]
    require_float(op, x)
    return [_atan2(b, op, x, _sqrt(b, b.binary("SUB", fconst(b, 1.0, x), b.mul(x, x))))]


@legalize("nnef.acos")
def acos(b: Builder, op: Operation) -> list[Value]:
    """``acos``: atan2(sqrt(1 − x²), x)."""
    x = op.operands[0]
    require_float(op, x)
    return [_atan2(b, op, _sqrt(b, b.binary("SUB", fconst(b, 1.0, x), b.mul(x, x))), x)]


@legalize("nnef.select", dtypes=_Q)
def select(b: Builder, op: Operation) -> list[Value]:
    """``select(c, t, f)``: tfl.select_v2's lowering, NNEF broadcasting."""
    return via(b, op, "tfl.select_v2", _operands_ranked(b, op))


@legalize("nnef.clamp", dtypes=_Q)
def clamp(b: Builder, op: Operation) -> list[Value]:
    """``clamp(x, a, b)``: CLAMP for scalar bounds (quantized: tfl.relu / relu6 / relu_n1_to_1 when the bounds are
    theirs, else CLAMP at the quantized bounds); tensor bounds: MAXIMUM then MINIMUM."""
    x, lo_v, hi_v = op.operands[:3]
    lo, hi = _literal(lo_v), _literal(hi_v)
    if lo is None or hi is None:
        mx = via(b, op, "tfl.maximum", _operands_ranked(b, op)[:2],
                 results=[_detached(b, op.results[0].type)])[0]
        return via(b, op, "tfl.minimum", [mx, _leading(b, hi_v, x.type.rank)])
    if x.type.is_quantized:
        for name, bounds in (("tfl.relu6", (0.0, 6.0)), ("tfl.relu_n1_to_1", (-1.0, 1.0))):
            if (float(lo), float(hi)) == bounds:
                return via(b, op, name, [x])
        out = op.results[0].type
        assert out.quant is not None
        q = via(b, op, "tfl.reshape", [x], {"new_shape": list(out.shape)})[0]
        s, z = out.quant.scale[0], out.quant.zero_point[0]
        qlo, qhi = out.dtype.range()
        lo_q = max(qlo, int(np.round(float(lo) / s)) + z)
        hi_q = min(qhi, int(np.round(float(hi) / s)) + z)
        return [b.clamp(q, lo_q, hi_q)]
    require_float(op, x)
    return [b.clamp(x, float(lo), float(hi))]


@legalize("nnef.leaky_relu", dtypes=_Q)
def leaky_relu(b: Builder, op: Operation) -> list[Value]:
    """``leaky_relu(x, alpha)``: tfl.leaky_relu's lowering."""
    return via(b, op, "tfl.leaky_relu", op.operands[:1], {"alpha": float(op.attrs.get("alpha", 0.0))})


@legalize("nnef.prelu", dtypes=_Q)
def prelu(b: Builder, op: Operation) -> list[Value]:
    """``prelu(x, alpha)``: select(x < 0, alpha·x, x), alpha broadcast NNEF-style (tfl.prelu's lowering)."""
    return via(b, op, "tfl.prelu", _operands_ranked(b, op))


@legalize("nnef.gelu")
def gelu(b: Builder, op: Operation) -> list[Value]:
    """``gelu``: x · sigmoid(1.702 x), the parser's standard-library definition."""
    x = op.operands[0]
    require_float(op, x)
    return [b.mul(x, b.emit("SIGMOID", [b.mul(x, fconst(b, 1.702, x))]).result)]


@legalize("nnef.softmax", dtypes=_Q)
def softmax(b: Builder, op: Operation) -> list[Value]:
    """``softmax(x, axes)`` over the last axis: tfl.softmax's lowering; other single axes are transposed last;
    several axes: float, the fragment's exp(x − max) / sum; quantized, tfl.softmax over the axes moved last and
    merged into one (a softmax over several axes is one over their flattened elements)."""
    x = op.operands[0]
    axes = sorted(positive_axis(int(a), x.type.rank) for a in op.attrs.get("axes", [1]))
    if len(axes) != 1 and x.type.is_quantized:  # one softmax over the axes moved last and merged into one
        r = x.type.rank
        perm = [i for i in range(r) if i not in axes] + axes
        xt = transpose(b, x, perm)
        kept = [int(d) for d in xt.shape[:r - len(axes)]]
        merged = b.reshape(xt, kept + [int(np.prod(xt.shape[r - len(axes):]))])
        out_t = op.results[0].type
        y = via(b, op, "tfl.softmax", [merged], {"beta": 1.0},
                results=[_detached(b, TensorType(tuple(merged.shape), out_t.dtype, out_t.quant))])[0]
        y = b.reshape(y, [int(d) for d in xt.shape])
        return [transpose(b, y, [perm.index(i) for i in range(r)])]
    if len(axes) != 1:  # the fragment's body: e / sum(e), e = exp(x − max), reductions over every axis
        require_float(op, x)
        m = x
        for a in axes:
            m = b.emit("REDUCE_MAX", [m], {"axis": a}).result
        e = _exp(b, b.binary("SUB", x, m))
        total = e
        for a in axes:
            total = b.emit("REDUCE_SUM", [total], {"axis": a}).result
        return [float_divide(b, e, total)]
    a, r = axes[0], x.type.rank
    if a == r - 1:
        return via(b, op, "tfl.softmax", [x], {"beta": 1.0})
    perm = [i for i in range(r) if i != a] + [a]
    inv = [perm.index(i) for i in range(r)]
    y = via(b, op, "tfl.softmax", [transpose(b, x, perm)], {"beta": 1.0},
            results=[_detached(b, permute_type(op.results[0].type, perm))])[0]
    return [transpose(b, y, inv)]


@legalize("nnef.logarithmic_quantize")
def logarithmic_quantize(b: Builder, op: Operation) -> list[Value]:
    """``logarithmic_quantize(x, max, bits)`` (spec 4.9.5), also what a ``graph.quant`` logarithmic entry adds:
    sign(x) · 2^round(clamp(log2|x|, m − r, m)), m = ceil(log2 max), r = 2^bits − 1; a float result (TOSA has no
    logarithmic integer type)."""
    x = op.operands[0]
    require_float(op, x)
    mx = op.attrs.get("max")
    if mx is None:
        mx = _literal(op.operands[1]) if len(op.operands) > 1 else None
    if mx is None:
        raise Unsupported("logarithmic_quantize with a tensor 'max'")
    m = float(np.ceil(np.log2(float(mx))))
    r = float(2 ** int(op.attrs["bits"]) - 1)
    lg = b.mul(_log(b, b.emit("ABS", [x]).result), fconst(b, 1.0 / np.log(2.0), x))
    q = b.clamp(lg, m - r, m)
    # round half away from zero, as the rule for ``round``
    mag = b.emit("FLOOR", [b.binary("ADD", b.emit("ABS", [q]).result, fconst(b, 0.5, q))]).result
    q = b.emit("SELECT", [b.binary("GREATER_EQUAL", q, fconst(b, 0.0, q)), mag,
                          b.mul(mag, fconst(b, -1.0, q))]).result
    p2 = b.emit("EXP", [b.mul(q, fconst(b, float(np.log(2.0)), q))]).result
    sign = via(b, op, "tfl.sign", [x], results=[_detached(b, x.type)])[0]
    return [b.mul(sign, p2)]


# ------------------------------------------------------------------------------------------------ reductions
_REDUCE = {"sum_reduce": "tfl.sum", "mean_reduce": "tfl.mean", "max_reduce": "tfl.reduce_max",
           "min_reduce": "tfl.reduce_min", "any_reduce": "tfl.reduce_any", "all_reduce": "tfl.reduce_all"}


def _reduce(nnef_name: str, tfl_name: str) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x = op.operands[0]
        axes = sorted({positive_axis(int(a), x.type.rank) for a in op.attrs.get("axes", [])})
        if not axes:
            return via(b, op, "tfl.reshape", [x], {"new_shape": list(op.results[0].shape)})
        name = "tfl.mean" if nnef_name == "sum_reduce" and op.attrs.get("normalize") else tfl_name
        return via(b, op, name, [x, _const(b, axes)], {"keep_dims": True})

    rule.__doc__ = f"``{nnef_name}`` (reduced dimensions kept as 1): {tfl_name}'s lowering" + (
        " (tfl.mean's with ``normalize = true``)." if nnef_name == "sum_reduce" else ".")
    legalize(f"nnef.{nnef_name}", dtypes=_Q)(rule)


for _n, _t in _REDUCE.items():
    _reduce(_n, _t)


def _arg_reduce(nnef_name: str, tfl_name: str) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x = op.operands[0]
        axes = sorted({positive_axis(int(a), x.type.rank) for a in op.attrs.get("axes", [])})
        if len(axes) != 1:
            raise Unsupported(f"{nnef_name} over {len(axes)} axes (one is supported)")
        shape = list(op.results[0].shape)
        squeezed = TensorType(tuple(d for i, d in enumerate(shape) if i != axes[0]), DType.INT32)
        y = via(b, op, tfl_name, [x, _const(b, axes)], {"output_type": "INT32"},
                results=[_detached(b, squeezed)])[0]
        return [b.reshape(y, shape)]

    rule.__doc__ = f"``{nnef_name}`` over one axis (kept as 1): {tfl_name}'s lowering."
    legalize(f"nnef.{nnef_name}", dtypes=("fp32", "i8"))(rule)


_arg_reduce("argmax_reduce", "tfl.arg_max")
_arg_reduce("argmin_reduce", "tfl.arg_min")


# ------------------------------------------------------------------------------------------------ layout
@legalize("nnef.reshape", "nnef.squeeze", "nnef.unsqueeze", dtypes=_ANY)
def reshape(b: Builder, op: Operation) -> list[Value]:
    """``reshape`` (0 copies a dimension, -1 is inferred; ``axis_start``/``axis_count`` honoured through the
    inferred result shape), ``squeeze``, ``unsqueeze``: RESHAPE (tfl.reshape's lowering)."""
    x = op.operands[0]
    target = [int(d) for d in op.results[0].shape]
    if op.opcode == "reshape" and "shape" in op.attrs and not op.attrs.get("axis_count", -1) >= 0:
        spec = [int(d) for d in op.attrs["shape"]]
        dims = [int(x.shape[i]) if d == 0 and i < x.type.rank else d for i, d in enumerate(spec)]
        resolved = resolve_reshape(int(np.prod(static_shape(x))), dims)
        if resolved != target:
            raise Unsupported(f"reshape to {spec} gives {resolved}, the graph declares {target}")
    return via(b, op, "tfl.reshape", [x], {"new_shape": target})


@legalize("nnef.transpose", dtypes=_ANY)
def transpose_(b: Builder, op: Operation) -> list[Value]:
    """``transpose(x, axes)`` (trailing axes not listed stay): tfl.transpose's lowering."""
    x = op.operands[0]
    axes = [int(a) for a in op.attrs["axes"]]
    axes += list(range(len(axes), x.type.rank))
    return via(b, op, "tfl.transpose", [x, _const(b, axes)])


@legalize("nnef.concat", dtypes=_ANY)
def concat(b: Builder, op: Operation) -> list[Value]:
    """``concat(values, axis)``: tfl.concatenation's lowering."""
    return via(b, op, "tfl.concatenation", list(op.operands), {"axis": int(op.attrs["axis"])})


@legalize("nnef.stack", dtypes=_ANY)
def stack(b: Builder, op: Operation) -> list[Value]:
    """``stack(values, axis)``: tfl.pack's lowering."""
    return via(b, op, "tfl.pack", list(op.operands), {"axis": int(op.attrs["axis"]), "values_count":
                                                      len(op.operands)})


@legalize("nnef.unstack", dtypes=_ANY)
def unstack(b: Builder, op: Operation) -> list[Value]:
    """``unstack(value, axis)``: tfl.unpack's lowering."""
    return via(b, op, "tfl.unpack", op.operands[:1], {"axis": int(op.attrs["axis"]), "num": len(op.results)})


@legalize("nnef.split", dtypes=_ANY)
def split(b: Builder, op: Operation) -> list[Value]:
    """``split(value, axis, ratios)``: tfl.split_v's lowering with sizes from the ratios."""
    x = op.operands[0]
    axis = positive_axis(int(op.attrs["axis"]), x.type.rank)
    sizes = [int(r.shape[axis]) for r in op.results]
    return via(b, op, "tfl.split_v", [x, _const(b, sizes), _const(b, [axis])], {"num_splits": len(sizes)})


@legalize("nnef.slice", dtypes=_ANY)
def slice_(b: Builder, op: Operation) -> list[Value]:
    """``slice(x, axes, begin, end, stride)`` (end 0 = to the end, negatives from the end): tfl.strided_slice's
    lowering."""
    x = op.operands[0]
    shape = static_shape(x)
    r = len(shape)
    begin, end, strides = [0] * r, list(shape), [1] * r
    steps = list(op.attrs.get("stride") or [])
    for k, a in enumerate(op.attrs["axes"]):
        a = positive_axis(int(a), r)
        s = int(steps[k]) if k < len(steps) else 1
        lo, hi = int(op.attrs["begin"][k]), int(op.attrs["end"][k])
        if lo < 0:
            lo += shape[a]
        if hi <= 0 and not (s < 0 and hi == -shape[a] - 1):
            hi = hi + shape[a] if (hi != 0 or s < 0) else shape[a]
        begin[a], end[a], strides[a] = lo, hi, s
    return via(b, op, "tfl.strided_slice", [x, _const(b, begin), _const(b, end), _const(b, strides)],
               {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0,
                "offset": False})


@legalize("nnef.tile", dtypes=_ANY)
def tile(b: Builder, op: Operation) -> list[Value]:
    """``tile(x, repeats)``: TILE."""
    return via(b, op, "tfl.tile", [op.operands[0], _const(b, [int(r) for r in op.attrs["repeats"]])])


@legalize("nnef.pad", dtypes=_ANY)
def pad(b: Builder, op: Operation) -> list[Value]:
    """``pad(x, padding, border, value)``: constant → tfl.pad/padv2, reflect → tfl.mirror_pad REFLECT,
    replicate → edge rows repeated with CONCAT."""
    x = op.operands[0]
    pads = _pairs(op.attrs["padding"])
    pads += [(0, 0)] * (x.type.rank - len(pads))
    border = str(op.attrs.get("border", "constant"))
    arr = _const(b, np.asarray(pads, np.int32).reshape(-1, 2))
    if border == "constant":
        value = float(op.attrs.get("value", 0.0))
        if value == 0.0:
            return via(b, op, "tfl.pad", [x, arr])
        if x.type.is_quantized:
            raise Unsupported("a non-zero pad value on a quantized tensor")
        return via(b, op, "tfl.padv2", [x, arr, b.const(np.array([value]), x.dtype)])
    if border == "reflect":
        return via(b, op, "tfl.mirror_pad", [x, arr], {"mode": "REFLECT"})
    if border == "replicate":
        y = x
        for axis, (lo, hi) in enumerate(pads):
            n = int(y.shape[axis])
            parts = []
            size = list(y.shape)
            size[axis] = 1
            if lo:
                first = b.slice(y, [0] * y.type.rank, size)
                parts.append(b.tile(first, [lo if i == axis else 1 for i in range(y.type.rank)]))
            parts.append(y)
            if hi:
                start = [0] * y.type.rank
                start[axis] = n - 1
                last = b.slice(y, start, size)
                parts.append(b.tile(last, [hi if i == axis else 1 for i in range(y.type.rank)]))
            y = b.concat(parts, axis) if len(parts) > 1 else y
        return [y]
    raise Unsupported(f"pad border '{border}'")


@legalize("nnef.gather", dtypes=_ANY)
def gather(b: Builder, op: Operation) -> list[Value]:
    """``gather(input, indices, axis)``: tfl.gather's lowering."""
    return via(b, op, "tfl.gather", op.operands[:2], {"axis": int(op.attrs.get("axis", 0)), "batch_dims": 0})


@legalize("nnef.cast", dtypes=_ANY)
def cast(b: Builder, op: Operation) -> list[Value]:
    """``cast``: tfl.cast's lowering."""
    return via(b, op, "tfl.cast", op.operands[:1])


# ------------------------------------------------------------------------------------------------ linear
@legalize("nnef.linear", dtypes=_Q)
def linear(b: Builder, op: Operation) -> list[Value]:
    """``linear(input, filter, bias)`` = input · filterᵀ + bias: tfl.fully_connected's lowering."""
    x, w, bias = op.operands[:3]
    if x.type.rank != 2:
        raise Unsupported(f"linear input of rank {x.type.rank}")
    ops = [x, w] if _is_zero(bias) else [x, w, bias]
    return via(b, op, "tfl.fully_connected", ops, {"keep_num_dims": False})


@legalize("nnef.matmul", dtypes=_Q)
def matmul(b: Builder, op: Operation) -> list[Value]:
    """``matmul(A, B, transposeA, transposeB)``: tfl.batch_matmul's lowering."""
    return via(b, op, "tfl.batch_matmul", op.operands[:2], {"adj_x": bool(op.attrs.get("transposeA")),
                                                            "adj_y": bool(op.attrs.get("transposeB"))})


@legalize("nnef.batch_normalization")
def batch_normalization(b: Builder, op: Operation) -> list[Value]:
    """``offset + scale · (x − mean) / sqrt(variance + ε)``, parameters broadcast NNEF-style (channel = axis 1)."""
    x, mean, var, offset, scale = _operands_ranked(b, op)[:5]
    require_float(op, x)
    eps = fconst(b, float(op.attrs.get("epsilon", 0.0)), x)
    inv = b.emit("RSQRT", [b.binary("ADD", var, eps)]).result
    return [b.binary("ADD", offset, b.mul(b.mul(scale, b.binary("SUB", x, mean)), inv))]


@legalize("nnef.l1_normalization", "nnef.l2_normalization")
def lp_normalization(b: Builder, op: Operation) -> list[Value]:
    """``x / max(sum(|x|) + bias, ε)`` (l1) or ``x / max(sqrt(sum(x²)) + bias, ε)`` (l2) over ``axes``."""
    x = op.operands[0]
    require_float(op, x)
    axes = sorted({positive_axis(int(a), x.type.rank) for a in op.attrs["axes"]})
    t = b.emit("ABS", [x]).result if op.opcode == "l1_normalization" else b.mul(x, x)
    for a in axes:
        t = b.emit("REDUCE_SUM", [t], {"axis": a}).result
    if op.opcode == "l2_normalization":
        t = _sqrt(b, t)
    t = b.binary("ADD", t, fconst(b, float(op.attrs.get("bias", 0.0)), x))
    t = b.binary("MAXIMUM", t, fconst(b, float(op.attrs.get("epsilon", 0.0)), x))
    return [float_divide(b, x, t)]


@legalize("nnef.local_response_normalization")
def local_response_normalization(b: Builder, op: Operation) -> list[Value]:
    """``x / (bias + alpha · box(x², size, normalize))^beta`` (box over the ``size`` window, zero border)."""
    x = op.operands[0]
    require_float(op, x)
    size = [int(s) for s in op.attrs["size"]]
    sq = b.mul(x, x)
    pads: list[int] = []
    for s in size:
        pads += [(s - 1) // 2, s - 1 - (s - 1) // 2]
    padded = b.pad(sq, pads, 0.0)
    total: Value | None = None  # a windowed sum as a sum of shifted slices (small windows only)
    shape = static_shape(x)
    for idx in np.ndindex(*size):
        part = b.slice(padded, list(idx), shape)
        total = part if total is None else b.binary("ADD", total, part)
    assert total is not None
    n = float(np.prod(size))
    sigma = b.binary("ADD", fconst(b, float(op.attrs.get("bias", 1.0)), x),
                     b.mul(total, fconst(b, float(op.attrs.get("alpha", 1.0)) / n, x)))
    return [float_divide(b, x, b.emit("POW", [sigma, fconst(b, float(op.attrs.get("beta", 0.5)), x)]).result)]


# ------------------------------------------------------------------------------------------------ convolution
@legalize("nnef.conv", dtypes=_Q)
@one_d(full_rank=False)
def conv(b: Builder, op: Operation) -> list[Value]:
    """``conv`` (2-D; ``groups`` 1, 0 = depthwise, or n): tfl.conv_2d / tfl.depthwise_conv_2d's lowering on the NHWC
    form, OIHW filters transposed to OHWI / [1, KH, KW, C·M]; padding the automatic one (SAME), none (VALID) or an
    explicit PAD with the input zero point (``border = 'constant'``) or the input's own values ('replicate',
    'reflect', 'reflect-even': :func:`border_pad`)."""
    if op.operands[0].type.rank == 5:
        return _conv_3d(b, op)
    x = _nhwc(b, op, op.operands[0])
    w, bias = op.operands[1], op.operands[2]
    if w.type.rank != 4:
        raise Unsupported(f"conv filter of rank {w.type.rank} on a rank-{x.type.rank} input")
    _, ih, iw, c = static_shape(x)
    o, ig, kh, kw = static_shape(w)
    groups = int(op.attrs.get("groups", 1)) or c
    stride, dil = _ints(op.attrs.get("stride"), 2), _ints(op.attrs.get("dilation"), 2)
    pads = _spatial_pads(op, [ih, iw], [kh, kw], stride, dil, False)
    border = str(op.attrs.get("border", "constant"))
    if any(pads) and border in EXTENDING_BORDERS:
        x, pads = border_pad(b, x, (1, 2), pads, border), [0, 0, 0, 0]
        ih, iw = static_shape(x)[1:3]
    elif any(pads) and border != "constant":
        raise Unsupported(f"conv border '{border}' with padding {pads}")
    x, padding = _window_padding(b, x, pads, [ih, iw], [kh, kw], stride, dil, _zero_of(x))
    attrs = {"stride_h": stride[0], "stride_w": stride[1], "dilation_h_factor": dil[0],
             "dilation_w_factor": dil[1], "padding": padding, "fused_activation_function": "NONE"}
    res = [_detached(b, _out_nhwc_type(op))]
    rest = [] if _is_zero(bias) else [bias]
    if groups == c and ig == 1 and groups > 1:
        wd = transpose(b, w, (1, 2, 3, 0))
        y = via(b, op, "tfl.depthwise_conv_2d", [x, wd, *rest], dict(attrs, depth_multiplier=o // c), results=res)
    elif c == ig * groups:
        y = via(b, op, "tfl.conv_2d", [x, transpose(b, w, TO_NHWC), *rest], attrs, results=res)
    else:
        raise Unsupported(f"conv filter {[o, ig, kh, kw]} with {groups} groups on {c} channels")
    return [_out(b, op, y[0])]


def _check_window_3d(op: Operation, what: str, filter_c_axis: int) -> tuple[list[int], list[int]]:
    """The checks 3-D ``conv``/``deconv`` share (float, a rank-5 filter, one group: the filter's axis
    ``filter_c_axis`` holds the input channels); returns (stride, dilation)."""
    x, w = op.operands[:2]
    require_float(op, x)
    if w.type.rank != 5:
        raise Unsupported(f"{what} filter of rank {w.type.rank} on a rank-5 input")
    c = static_shape(x)[1]
    ws = static_shape(w)
    groups = int(op.attrs.get("groups", 1)) or c
    if groups != 1 or ws[filter_c_axis] != c:
        raise Unsupported(f"3-D {what} with {groups} groups (filter {list(ws)} on {c} channels)")
    return _ints(op.attrs.get("stride"), 3), _ints(op.attrs.get("dilation"), 3)


def _attrs_3d(padding: str, stride: list[int], dil: list[int]) -> dict[str, Any]:
    """tfl.conv_3d / tfl.conv_3d_transpose attributes."""
    return {"padding": padding, "stride_d": stride[0], "stride_h": stride[1], "stride_w": stride[2],
            "dilation_d_factor": dil[0], "dilation_h_factor": dil[1], "dilation_w_factor": dil[2],
            "fused_activation_function": "NONE"}


def _conv_3d(b: Builder, op: Operation) -> list[Value]:
    """3-D ``conv`` (NCDHW, float, ``groups`` 1): tfl.conv_3d's lowering (TOSA CONV3D) on the NDHWC form, the
    [O, C, KD, KH, KW] filter transposed to TFLite's [KD, KH, KW, C, O]; explicit padding applied first (PAD with
    0, or the input's own values for 'replicate'/'reflect'/'reflect-even'), the automatic one as SAME."""
    x, w, bias = op.operands[:3]
    stride, dil = _check_window_3d(op, "conv", 1)
    pads3 = _pairs(op.attrs.get("padding"))
    xt = transpose(b, x, (0, 2, 3, 4, 1))
    padding = "SAME" if not pads3 else "VALID"
    if pads3 and any(p_ for pair in pads3 for p_ in pair):
        flat = [p_ for pair in pads3 for p_ in pair]
        border = str(op.attrs.get("border", "constant"))
        if min(flat) < 0:
            raise Unsupported(f"negative padding {pads3}")
        if border in EXTENDING_BORDERS:
            xt = border_pad(b, xt, (1, 2, 3), flat, border)
        elif border == "constant":
            xt = b.pad(xt, [0, 0, *flat, 0, 0], 0.0)
        else:
            raise Unsupported(f"conv border '{border}' with padding {pads3}")
    attrs = _attrs_3d(padding, stride, dil)
    rest = [] if _is_zero(bias) else [bias]
    res = [_detached(b, permute_type(op.results[0].type, (0, 2, 3, 4, 1)))]
    y = via(b, op, "tfl.conv_3d", [xt, transpose(b, w, (2, 3, 4, 1, 0)), *rest], attrs, results=res)[0]
    return [transpose(b, y, (0, 4, 1, 2, 3))]


def _deconv_padding(op: Operation) -> tuple[list[tuple[int, int]], str]:
    """``deconv``'s explicit padding pairs and TFLite's padding mode: "SAME" for the automatic padding, "VALID" for
    none, "" for explicit pads (the caller checks they are SAME's); a border other than 'constant' is refused
    wherever there is padding."""
    pads = _pairs(op.attrs.get("padding"))
    border = str(op.attrs.get("border", "constant"))
    if border != "constant" and (not pads or any(a or e for a, e in pads)):
        raise Unsupported(f"deconv border '{border}' with padding {pads or 'automatic'}")
    if not pads:
        return pads, "SAME"
    return pads, "" if any(a or e for a, e in pads) else "VALID"


def _deconv_3d(b: Builder, op: Operation) -> list[Value]:
    """3-D ``deconv`` (NCDHW, float, ``groups`` 1): tfl.conv_3d_transpose's lowering (a stride-1 CONV3D over the
    zero-spread input) on the NDHWC form, the [C, O, KD, KH, KW] filter transposed to TFLite's [KD, KH, KW, O, C];
    the automatic padding is SAME on the output size, no padding VALID."""
    x, w, bias = op.operands[:3]
    stride, dil = _check_window_3d(op, "deconv", 0)
    _, _, d, h, wd = static_shape(x)
    _, _, kd, kh, kw = static_shape(w)
    out = [int(v) for v in op.results[0].shape]
    pads, padding = _deconv_padding(op)
    if not padding:
        for p_, size, k, s_, dl, osz in zip(pads, (d, h, wd), (kd, kh, kw), stride, dil, out[2:]):
            if p_[0] != max(0, (size - 1) * s_ + (k - 1) * dl + 1 - osz) // 2:
                raise Unsupported(f"deconv padding {pads}")
        padding = "SAME"
    attrs = _attrs_3d(padding, stride, dil)
    shape = _const(b, [out[0], out[2], out[3], out[4], out[1]])
    rest = [] if _is_zero(bias) else [bias]
    res = [_detached(b, permute_type(op.results[0].type, (0, 2, 3, 4, 1)))]
    y = via(b, op, "tfl.conv_3d_transpose", [shape, transpose(b, w, (2, 3, 4, 1, 0)),
                                             transpose(b, x, (0, 2, 3, 4, 1)), *rest], attrs, results=res)[0]
    return [transpose(b, y, (0, 4, 1, 2, 3))]


@legalize("nnef.deconv", dtypes=_Q)
@one_d(full_rank=False)
def deconv(b: Builder, op: Operation) -> list[Value]:
    """``deconv`` (1-D or 2-D, dilation 1): tfl.transpose_conv's lowering, one per group for ``groups`` > 1; the
    filter [C, O/groups, KH, KW] becomes [O/groups, KH, KW, C]; the automatic padding is TFLite's SAME on the output
    size, no padding VALID."""
    if op.operands[0].type.rank == 5:
        return _deconv_3d(b, op)
    x = _nhwc(b, op, op.operands[0])
    w, bias = op.operands[1], op.operands[2]
    _, ih, iw, c = static_shape(x)
    ci, o, kh, kw = static_shape(w)
    out_t = _out_nhwc_type(op)
    n, oh, ow, oc = (int(d) for d in out_t.shape)
    groups = int(op.attrs.get("groups", 1)) or c
    if _ints(op.attrs.get("dilation"), 2) != [1, 1]:
        raise Unsupported(f"deconv with dilation {op.attrs.get('dilation')}")
    if ci != c or c % groups or oc != o * groups:
        raise Unsupported(f"deconv filter {[ci, o, kh, kw]} with {groups} groups on {c} channels")
    stride = _ints(op.attrs.get("stride"), 2)
    pads, padding = _deconv_padding(op)
    if not padding:
        for p_, size, k, s in zip(pads, (oh, ow), (kh, kw), stride):
            if p_[0] != same_padding(size, k, s)[0]:
                raise Unsupported(f"deconv padding {pads}")
        padding = "SAME"
    attrs = {"padding": padding, "stride_h": stride[0], "stride_w": stride[1], "fused_activation_function": "NONE"}
    wt = transpose(b, w, (1, 2, 3, 0))  # [O/groups, KH, KW, C]: output channel j of group g is g·O/groups + j
    if groups == 1:
        rest = [] if _is_zero(bias) else [bias]
        y = via(b, op, "tfl.transpose_conv", [_const(b, [n, oh, ow, oc]), wt, x, *rest], attrs,
                results=[_detached(b, out_t)])[0]
        return [_out(b, op, y)]
    quantized = x.type.is_quantized
    if quantized and (w.type.quant is None or w.type.quant.per_channel):
        raise Unsupported("quantized grouped deconv with a per-channel (or unquantized) filter")
    cg = c // groups
    parts = []
    for g in range(groups):  # one TRANSPOSE_CONV2D per group, concatenated on the channels
        xg = b.slice(x, [0, 0, 0, g * cg], [n, ih, iw, cg])
        wg = b.slice(wt, [0, 0, 0, g * cg], [o, kh, kw, cg])
        tg = TensorType((n, oh, ow, o), out_t.dtype, out_t.quant)
        # quantized: each group's bias joins its int32 accumulator; float: one ADD after the CONCAT
        rest = [_group_bias(b, bias, g * o, o)] if quantized and not _is_zero(bias) else []
        parts.append(via(b, op, "tfl.transpose_conv", [_const(b, [n, oh, ow, o]), wg, xg, *rest], attrs,
                         results=[_detached(b, tg)])[0])
    y = b.concat(parts, 3)
    if not quantized and not _is_zero(bias):
        y = b.binary("ADD", y, b.reshape(bias, [1, 1, 1, oc]) if bias.type.rank != 0 else bias)
    return [_out(b, op, y)]


def _group_bias(b: Builder, bias: Value, start: int, size: int) -> Value:
    """Channels [start, start + size) of a constant ``[1, C]`` / ``[C]`` bias, with their quantization."""
    arr = bias.const()
    if arr is None:
        raise Unsupported("quantized grouped deconv with a computed bias")
    flat = np.asarray(arr).reshape(-1)
    if flat.size == 1:
        flat = np.repeat(flat, start + size)
    q = bias.type.quant
    if q is not None and q.per_channel:
        q = QuantParams(q.scale[start:start + size], q.zero_point[start:start + size], 0)
    return b.const(flat[start:start + size], bias.dtype, quant=q, name="nnef_group_bias")


# ------------------------------------------------------------------------------------------------ pooling
def _pool_window(op: Operation, x: Value) -> tuple[list[int], list[int], list[int]]:
    """(kernel, stride, dilation) over H, W; the batch and channel entries must be 1."""
    nhwc = op.attrs.get("layout") == "NHWC"
    size = _ints(op.attrs.get("size"), 4)
    stride = _ints(op.attrs.get("stride"), 4)
    dil = _ints(op.attrs.get("dilation"), 4)
    hw, bc = ((1, 2), (0, 3)) if nhwc else ((2, 3), (0, 1))
    for what, v in (("size", size), ("stride", stride), ("dilation", dil)):
        if len(v) != 4 or any(v[i] != 1 for i in bc):
            raise Unsupported(f"{op.opcode} {what} {v}: only windows over the two spatial dimensions")
    if any(dil[i] != 1 for i in hw):
        raise Unsupported(f"{op.opcode} dilation {dil}")
    return [size[i] for i in hw], [stride[i] for i in hw], [1, 1]


def _pool(b: Builder, op: Operation, tfl_name: str) -> Value:
    x = _nhwc(b, op, op.operands[0])
    _, ih, iw, _ = static_shape(x)
    kernel, stride, dil = _pool_window(op, x)
    pads = _spatial_pads(op, [ih, iw], kernel, stride, dil, True)
    border = str(op.attrs.get("border", "constant"))
    same = same_padding(ih, kernel[0], stride[0]) + same_padding(iw, kernel[1], stride[1])
    if any(pads) and border in ("ignore", "same") and (pads == list(same)):
        padding = "SAME"
    elif not any(pads):
        padding = "VALID"
    elif border == "constant":
        x = b.pad(x, [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0], _zero_of(x))
        padding = "VALID"
    elif border in EXTENDING_BORDERS:
        x, padding = border_pad(b, x, (1, 2), pads, border), "VALID"
    elif border == "ignore" and tfl_name == "tfl.max_pool_2d":  # left out of the max: padded with the lowest value
        x, padding = b.pad(x, [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0], _lowest(x)), "VALID"
    elif border == "ignore":  # AVG_POOL2D's own padding is left out of the count (explicit pads below the kernel)
        padding = "EXPLICIT"
    else:
        raise Unsupported(f"{op.opcode} border '{border}' with padding {pads}")
    attrs: dict[str, Any] = {"filter_height": kernel[0], "filter_width": kernel[1], "stride_h": stride[0],
                             "stride_w": stride[1], "padding": padding, "fused_activation_function": "NONE"}
    if padding == "EXPLICIT":
        attrs["explicit_paddings"] = list(pads)
    y = via(b, op, tfl_name, [x], attrs, results=[_detached(b, _out_nhwc_type(op))])
    return _out(b, op, y[0])


@legalize("nnef.max_pool", dtypes=_Q)
@one_d(full_rank=True)
def max_pool(b: Builder, op: Operation) -> list[Value]:
    """``max_pool`` over H, W: tfl.max_pool_2d's lowering (border 'ignore': TFLite's SAME or a PAD with the lowest
    value, 'constant' pads 0, 'replicate'/'reflect'/'reflect-even' an explicit extension of the input)."""
    return [_pool(b, op, "tfl.max_pool_2d")]


@legalize("nnef.avg_pool", dtypes=_Q)
@one_d(full_rank=True)
def avg_pool(b: Builder, op: Operation) -> list[Value]:
    """``avg_pool`` over H, W: tfl.average_pool_2d's lowering (border 'ignore' counts only the input: AVG_POOL2D's
    own padding; 'constant' counts the zero padding; 'replicate'/'reflect'/'reflect-even' average an explicit
    extension)."""
    return [_pool(b, op, "tfl.average_pool_2d")]


@legalize("nnef.box", dtypes=_Q)
@one_d(full_rank=True)
def box(b: Builder, op: Operation) -> list[Value]:
    """``box`` over H, W: the windowed mean (``normalize``) as tfl.average_pool_2d, or the windowed sum (float:
    that mean times the window size); border 'constant' counts the zero padding, 'ignore' does not."""
    y = _pool(b, op, "tfl.average_pool_2d")
    if op.attrs.get("normalize"):
        return [y]
    require_float(op, op.operands[0])
    kernel, _, _ = _pool_window(op, op.operands[0])
    if str(op.attrs.get("border", "constant")) == "ignore" and any(_pairs(op.attrs.get("padding"))):
        raise Unsupported("box without normalize and with border 'ignore'")
    return [b.mul(y, fconst(b, float(kernel[0] * kernel[1]), y))]


@legalize("nnef.argmax_pool", dtypes=_Q)
@one_d(full_rank=True)
def argmax_pool(b: Builder, op: Operation) -> list[Value]:
    """``argmax_pool`` over H, W (spec 4.4: the row-major index of the maximum within each window, padding with
    0 for border 'constant' and left out for 'ignore'): the window's kh·kw strided views stacked on a last axis,
    then ARGMAX (the first maximum, as the spec's arg max).  Quantized inputs compare as integers (padding: the
    zero point, or for 'ignore' int16's lowest after a CAST, so no int8 value ties with it)."""
    x = op.operands[0]
    if x.type.rank != 4:
        raise Unsupported(f"argmax_pool on a rank-{x.type.rank} tensor")
    if not x.dtype.is_float and not x.type.is_quantized:
        raise Unsupported(f"argmax_pool on a {x.dtype.value} tensor without quantization")
    n, c, h, w = static_shape(x)
    kernel, stride, _ = _pool_window(op, x)
    dil = _ints(op.attrs.get("dilation"), 4)[2:]
    pads = _spatial_pads(op, [h, w], kernel, stride, dil, True)
    border = str(op.attrs.get("border", "constant"))
    if border in EXTENDING_BORDERS:
        xp = border_pad(b, x, (2, 3), pads, border)
    elif border in ("constant", "ignore"):
        fill: float | int = float(np.finfo(np.float32).min) if border == "ignore" else 0.0
        if x.type.is_quantized:  # the order of the integers is that of the real values (positive scale)
            fill = _zero_of(x)
            if border == "ignore" and any(pads):  # below every int8 value: int16's lowest
                x, fill = b.cast(x, DType.INT16), int(DType.INT16.range()[0])
        xp = b.pad(x, [0, 0, 0, 0, pads[0], pads[1], pads[2], pads[3]], fill)
    else:
        raise Unsupported(f"argmax_pool border '{border}'")
    oh, ow = (int(d) for d in op.results[0].shape[2:])
    views = []
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            v = take_every(b, xp, 2, oh, stride[0], ky * dil[0])
            v = take_every(b, v, 3, ow, stride[1], kx * dil[1])
            views.append(b.reshape(v, [n, c, oh, ow, 1]))
    stacked = b.concat(views, 4)
    return [b.emit("ARGMAX", [stacked], {"axis": 4}, out_dtype=DType.INT32).result]


# ------------------------------------------------------------------------------------------------ index sampling
def _window_hw(op: Operation) -> tuple[list[int], list[int], list[int]]:
    """(size, stride, dilation) over H, W of a window operation on NCHW data; batch and channel entries must be 1."""
    size, stride, dil = (_ints(op.attrs.get(k), 4) for k in ("size", "stride", "dilation"))
    for what, v in (("size", size), ("stride", stride), ("dilation", dil)):
        if len(v) != 4 or v[0] != 1 or v[1] != 1:
            raise Unsupported(f"{op.opcode} {what} {v}: only windows over the two spatial dimensions of NCHW data")
    return size[2:], stride[2:], dil[2:]


def _index_is(b: Builder, index: Value, k: int) -> Value:
    return b.binary("EQUAL", index, b.const(np.full([1] * index.type.rank, k), index.dtype, name="nnef_offset"))


def _place_windows(b: Builder, parts: Sequence[Value], kernel: Sequence[int], stride: Sequence[int],
                   dil: Sequence[int], pads: Sequence[int], out_hw: Sequence[int]) -> Value:
    """The reverse of a window operation: ``parts[k]`` (window offset k = ky·kw + kx, down-scaled NCHW) added at
    the up-scaled positions i·s + k·d − p; each part is spread by its stride (zeros between), shifted by its
    offset with a PAD, the parts summed and the output's [p, p + X) window SLICEd (zeros past the end)."""
    n, c, ih, iw = static_shape(parts[0])
    span = [(ih - 1) * stride[0] + (kernel[0] - 1) * dil[0] + 1, (iw - 1) * stride[1] + (kernel[1] - 1) * dil[1] + 1]
    total: Value | None = None
    for k, v in enumerate(parts):
        ky, kx = divmod(k, kernel[1])
        v = dilate_axis(b, dilate_axis(b, v, 2, stride[0], 0.0), 3, stride[1], 0.0)
        v = b.pad(v, [0, 0, 0, 0, ky * dil[0], (kernel[0] - 1 - ky) * dil[0], kx * dil[1],
                      (kernel[1] - 1 - kx) * dil[1]], 0.0)
        total = v if total is None else b.binary("ADD", total, v)
    assert total is not None
    extra = [max(0, pads[0] + out_hw[0] - span[0]), max(0, pads[2] + out_hw[1] - span[1])]
    if any(extra):
        total = b.pad(total, [0, 0, 0, 0, 0, extra[0], 0, extra[1]], 0.0)
    return b.slice(total, [0, 0, pads[0], pads[2]], [n, c, int(out_hw[0]), int(out_hw[1])])


@legalize("nnef.sample")
@one_d(full_rank=True)
def sample(b: Builder, op: Operation) -> list[Value]:
    """``sample(input, index)`` (spec 4.3.3): output[i] = input~[i·s + index[i]·d − p], index the row-major offset
    in the window (argmax_pool's): the window's strided views of the extended input, one SELECTed per offset."""
    x, index = op.operands[:2]
    require_float(op, x)
    if x.type.rank != 4:
        raise Unsupported(f"sample on a rank-{x.type.rank} tensor (NCHW only)")
    n, c, h, w = static_shape(x)
    kernel, stride, dil = _window_hw(op)
    pads = _spatial_pads(op, [h, w], kernel, stride, dil, True)
    border = str(op.attrs.get("border", "constant"))
    if border in EXTENDING_BORDERS:
        xp = border_pad(b, x, (2, 3), pads, border)
    elif border == "constant":
        xp = b.pad(x, [0, 0, 0, 0, pads[0], pads[1], pads[2], pads[3]], 0.0)
    else:
        raise Unsupported(f"sample border '{border}'")
    oh, ow = (int(d) for d in op.results[0].shape[2:])
    y: Value | None = None
    for k in range(kernel[0] * kernel[1]):
        ky, kx = divmod(k, kernel[1])
        v = take_every(b, take_every(b, xp, 2, oh, stride[0], ky * dil[0]), 3, ow, stride[1], kx * dil[1])
        y = v if y is None else b.emit("SELECT", [_index_is(b, index, k), v, y]).result
    assert y is not None
    return [y]


@legalize("nnef.desample")
@one_d(full_rank=True)
def desample(b: Builder, op: Operation) -> list[Value]:
    """``desample(input, index)`` (spec 4.3.3): each input value added at the up-scaled position its index picks in
    its window, i·s + index[i]·d − p (values mapped to one position summed): per window offset k the values
    whose index is k (SELECT), placed by :func:`_place_windows`.  Border 'constant' only (the spec's rule)."""
    x, index = op.operands[:2]
    require_float(op, x)
    if x.type.rank != 4:
        raise Unsupported(f"desample on a rank-{x.type.rank} tensor (NCHW only)")
    if str(op.attrs.get("border", "constant")) != "constant":
        raise Unsupported(f"desample border '{op.attrs.get('border')}' (the spec allows 'constant' only)")
    kernel, stride, dil = _window_hw(op)
    out_hw = [int(d) for d in op.results[0].shape[2:]]
    pads = _spatial_pads(op, out_hw, kernel, stride, dil, True)
    zero = b.const(np.zeros([1] * 4), x.dtype, name="nnef_zero")
    parts = [b.emit("SELECT", [_index_is(b, index, k), x, zero]).result for k in range(kernel[0] * kernel[1])]
    return [_place_windows(b, parts, kernel, stride, dil, pads, out_hw)]


@legalize("nnef.debox")
@one_d(full_rank=True)
def debox(b: Builder, op: Operation) -> list[Value]:
    """``debox`` (spec 4.3.2): output[i] = Σ_j input[(i + p − j·d) / s] over the j where the division is exact
    (the reverse of box), divided by the window volume when ``normalize``: every window offset's copy of the
    input placed by :func:`_place_windows`.  Border 'constant' (or 'ignore' unnormalized: the same zeros)."""
    x = op.operands[0]
    require_float(op, x)
    if x.type.rank != 4:
        raise Unsupported(f"debox on a rank-{x.type.rank} tensor (NCHW only)")
    border = str(op.attrs.get("border", "constant"))
    normalize = bool(op.attrs.get("normalize"))
    if border != "constant" and not (border == "ignore" and not normalize):
        raise Unsupported(f"debox border '{border}'{' normalized' if normalize else ''}")
    kernel, stride, dil = _window_hw(op)
    out_hw = [int(d) for d in op.results[0].shape[2:]]
    pads = _spatial_pads(op, out_hw, kernel, stride, dil, True)
    y = _place_windows(b, [x] * (kernel[0] * kernel[1]), kernel, stride, dil, pads, out_hw)
    return [b.mul(y, fconst(b, 1.0 / (kernel[0] * kernel[1]), y)) if normalize else y]


@legalize("nnef.rms_pool")
@one_d(full_rank=True)
def rms_pool(b: Builder, op: Operation) -> list[Value]:
    """``rms_pool``: sqrt(avg_pool(x²))."""
    x = op.operands[0]
    require_float(op, x)
    sq = b.mul(x, x)
    proxy = Operation(-1, "nnef.avg_pool", [sq], list(op.results), dict(op.attrs), [], op.location)
    return [_sqrt(b, _pool(b, proxy, "tfl.average_pool_2d"))]


# ------------------------------------------------------------------------------------------------ resampling
def _resize(b: Builder, op: Operation, factor: Sequence[int], nearest: bool, half: bool, align: bool) -> Value:
    x = _nhwc(b, op, op.operands[0])
    _, ih, iw, _ = static_shape(x)
    if len(factor) != 2:
        raise Unsupported(f"{op.opcode} factor {list(factor)} (2-D only)")
    size = _const(b, [ih * int(factor[0]), iw * int(factor[1])])
    name = "tfl.resize_nearest_neighbor" if nearest else "tfl.resize_bilinear"
    y = via(b, op, name, [x, size], {"align_corners": align, "half_pixel_centers": half},
            results=[_detached(b, _out_nhwc_type(op))])
    return _out(b, op, y[0])


@legalize("nnef.nearest_upsample", dtypes=_Q)
@one_d(full_rank=False)
def nearest_upsample(b: Builder, op: Operation) -> list[Value]:
    """``nearest_upsample(x, factor)``: each pixel repeated factor times (tfl.resize_nearest_neighbor)."""
    return [_resize(b, op, [int(f) for f in op.attrs["factor"]], True, False, False)]


@legalize("nnef.multilinear_upsample", dtypes=_Q)
@one_d(full_rank=False)
def multilinear_upsample(b: Builder, op: Operation) -> list[Value]:
    """``multilinear_upsample`` with method 'symmetric' (half-pixel centres, border 'replicate') or 'aligned'
    (corners aligned): tfl.resize_bilinear's lowering."""
    method = str(op.attrs.get("method", "symmetric"))
    border = str(op.attrs.get("border", "replicate"))
    factor = [int(f) for f in op.attrs["factor"]]
    if method == "symmetric" and border == "replicate":
        return [_resize(b, op, factor, False, True, False)]
    if method == "aligned":
        return [_resize(b, op, factor, False, False, True)]
    raise Unsupported(f"multilinear_upsample method '{method}' with border '{border}'")


@legalize("nnef.nearest_downsample", dtypes=_Q)
@one_d(full_rank=False)
def nearest_downsample(b: Builder, op: Operation) -> list[Value]:
    """``nearest_downsample(x, factor)``: every factor-th pixel (a strided slice)."""
    x = _nhwc(b, op, op.operands[0])
    f = [int(v) for v in op.attrs["factor"]]
    n, h, w, c = static_shape(x)
    y = b.reshape(x, [n, h // f[0], f[0], w // f[1], f[1], c])
    y = b.slice(y, [0, 0, 0, 0, 0, 0], [n, h // f[0], 1, w // f[1], 1, c])
    return [_out(b, op, b.reshape(y, [n, h // f[0], w // f[1], c]))]


@legalize("nnef.area_downsample", dtypes=_Q)
@one_d(full_rank=False)
def area_downsample(b: Builder, op: Operation) -> list[Value]:
    """``area_downsample(x, factor)``: the mean of each factor × factor block (tfl.average_pool_2d VALID)."""
    x = _nhwc(b, op, op.operands[0])
    f = [int(v) for v in op.attrs["factor"]]
    y = via(b, op, "tfl.average_pool_2d", [x], {"filter_height": f[0], "filter_width": f[1], "stride_h": f[0],
                                                "stride_w": f[1], "padding": "VALID",
                                                "fused_activation_function": "NONE"},
            results=[_detached(b, _out_nhwc_type(op))])
    return [_out(b, op, y[0])]


#: operations whose quantized (i8) path the three-way zoo check exercises, bit-exact with LiteRT's reference kernels;
#: the support table (docs/ops.md) claims i8 for these only, whatever the tfl rule underneath accepts
I8_TESTED = frozenset("""
add avg_pool clamp concat const conv copy leaky_relu linear max_pool max_reduce mean_reduce mul multilinear_upsample
nearest_upsample pad relu reshape sigmoid softmax split squeeze tanh transpose unsqueeze unstack
""".split())
#: operations whose i8 path is judged in tests/test_nnef_ops.py against the spec's arithmetic on the dequantized
#: tensors (argmax_pool exactly, grouped deconv within one step) — no LiteRT model to be bit-exact with
I8_SPEC_TESTED = frozenset({"argmax_pool", "deconv"})
for _name, _info in RULES.items():
    if _name.startswith("nnef."):
        _info.dtypes = tuple(d for d in _info.dtypes if d != "i8" or _name[5:] in I8_TESTED | I8_SPEC_TESTED)


__all__ = ["I8_SPEC_TESTED", "I8_TESTED", "TO_NCHW", "TO_NHWC", "border_pad", "one_d", "permute_type", "transpose"]
