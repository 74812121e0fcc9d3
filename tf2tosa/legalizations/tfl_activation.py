"""Float rules for TFLite's activation ops (quantized inputs raise Unsupported; the TABLE path is separate).

1.0 has no RELUN: every ReLU variant is CLAMP (op_inventory §4 #1).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from .nn_helpers import expm1, fconst, float_divide, reduce_axes, require_float, select
from .registry import legalize

_BIG = float(np.finfo(np.float32).max)


def _clamp_rule(name: str, lo: float, hi: float) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x = op.operands[0]
        dt = require_float(op, x)
        # CLAMP bounds have the data type (S3341-3357): fp16's largest finite value is 65504
        top = min(hi, 65504.0) if dt is DType.FP16 else hi
        return [b.clamp(x, lo, top)]

    rule.__doc__ = f"CLAMP [{lo}, {hi}] (RELUN → CLAMP, §4 #1; L3995-4045)."
    legalize(name)(rule)


_clamp_rule("tfl.relu", 0.0, _BIG)
_clamp_rule("tfl.relu6", 0.0, 6.0)
_clamp_rule("tfl.relu_n1_to_1", -1.0, 1.0)
_clamp_rule("tfl.relu_0_to_1", 0.0, 1.0)


@legalize("tfl.logistic")
def logistic(b: Builder, op: Operation) -> list[Value]:
    """SIGMOID (L3649, float path)."""
    x = op.operands[0]
    require_float(op, x)
    return [b.sigmoid(x)]


@legalize("tfl.tanh")
def tanh(b: Builder, op: Operation) -> list[Value]:
    """TANH (L4369, float path)."""
    x = op.operands[0]
    require_float(op, x)
    return [b.tanh(x)]


@legalize("tfl.leaky_relu")
def leaky_relu(b: Builder, op: Operation) -> list[Value]:
    """x > 0 ? x : alpha*x via GREATER + SELECT (L3519-3535): valid for every alpha, unlike MAXIMUM(x, alpha*x)."""
    x = op.operands[0]
    require_float(op, x)
    alpha = float(op.attrs.get("alpha", 0.2))
    pos = b.binary("GREATER", x, fconst(b, 0.0, x))
    return [select(b, pos, x, b.mul(x, fconst(b, alpha, x)))]


@legalize("tfl.prelu")
def prelu(b: Builder, op: Operation) -> list[Value]:
    """x >= 0 ? x : alpha*x with alpha broadcast (equal ranks, S809) — no lowering in the document (L3868)."""
    x, alpha = op.operands[0], op.operands[1]
    require_float(op, x, alpha)
    pos = b.binary("GREATER_EQUAL", x, fconst(b, 0.0, x))
    return [select(b, pos, x, b.mul(x, alpha))]


@legalize("tfl.hard_swish")
def hard_swish(b: Builder, op: Operation) -> list[Value]:
    """x * relu6(x + 3) / 6 (L3465-3482 float path, RELUN → CLAMP)."""
    x = op.operands[0]
    require_float(op, x)
    r6 = b.clamp(b.binary("ADD", x, fconst(b, 3.0, x)), 0.0, 6.0)
    return [b.mul(b.mul(x, r6), fconst(b, 1.0 / 6.0, x))]


@legalize("tfl.gelu")
def gelu(b: Builder, op: Operation) -> list[Value]:
    """0.5*x*(1 + erf(x/sqrt(2))) with ERF (S3426); approximate: 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3)))."""
    x = op.operands[0]
    require_float(op, x)
    one = fconst(b, 1.0, x)
    if op.attrs.get("approximate"):
        x3 = b.mul(b.mul(x, x), x)
        inner = b.binary("ADD", x, b.mul(x3, fconst(b, 0.044715, x)))
        t = b.tanh(b.mul(inner, fconst(b, math.sqrt(2.0 / math.pi), x)))
    else:
        t = b.erf(b.mul(x, fconst(b, 1.0 / math.sqrt(2.0), x)))
    return [b.mul(b.mul(x, fconst(b, 0.5, x)), b.binary("ADD", one, t))]


@legalize("tfl.elu")
def elu(b: Builder, op: Operation) -> list[Value]:
    """x < 0 ? expm1(x) : x (L320-343 with EXP-1 replaced by an accurate expm1 near 0)."""
    x = op.operands[0]
    require_float(op, x)
    neg = b.binary("GREATER", fconst(b, 0.0, x), x)
    return [select(b, neg, expm1(b, x), x)]


def _last_axis(op: Operation, x: Value) -> int:
    if x.type.rank == 0:
        raise Unsupported(f"{op.name} of a rank-0 tensor")
    return x.type.rank - 1


@legalize("tfl.softmax")
def softmax(b: Builder, op: Operation) -> list[Value]:
    """exp(beta*(x - max)) * RECIPROCAL(sum) over the last axis (L4147-4164 plus the max-subtraction it lacks)."""
    x = op.operands[0]
    require_float(op, x)
    axis = _last_axis(op, x)
    beta = float(op.attrs.get("beta", 1.0))
    shifted = b.binary("SUB", x, reduce_axes(b, "REDUCE_MAX", x, [axis], True, nan_mode="PROPAGATE"))
    if beta != 1.0:
        shifted = b.mul(shifted, fconst(b, beta, x))
    e = b.exp(shifted)
    s = reduce_axes(b, "REDUCE_SUM", e, [axis], True)
    return [float_divide(b, e, s)]


@legalize("tfl.log_softmax")
def log_softmax(b: Builder, op: Operation) -> list[Value]:
    """(x - max) - LOG(sum(EXP(x - max))) over the last axis (L439-450 has no max-subtraction, §6.1)."""
    x = op.operands[0]
    require_float(op, x)
    axis = _last_axis(op, x)
    shifted = b.binary("SUB", x, reduce_axes(b, "REDUCE_MAX", x, [axis], True, nan_mode="PROPAGATE"))
    s = reduce_axes(b, "REDUCE_SUM", b.exp(shifted), [axis], True)
    return [b.binary("SUB", shifted, b.log(s))]
