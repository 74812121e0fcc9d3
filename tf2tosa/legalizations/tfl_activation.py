"""Rules for TFLite's activation ops: float, and quantized int8 / int16 bit-exact with TFLite's reference kernels.

1.0 has no RELUN: every ReLU variant is CLAMP (op_inventory §4 #1), after a RESCALE when the quantization
changes.  Other int8 activations are one TABLE (256 entries, PRO-INT, op_inventory §4 #12) built from TFLite's own
kernel (:mod:`tf2tosa.quant.tflite_reference`): LUTPopulate in float32 for LOGISTIC/TANH/GELU/ELU, the
fixed-point HardSwish and LeakyRelu.  int16 LOGISTIC/TANH (a 256-entry uint16 sigmoid table with 9/8-bit
interpolation) are one exact 65536-entry GATHER; softmax and log_softmax are integer compositions of TFLite's
algorithms.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value, symdim
from ..quant import apply_table_i16, fused_activation_q
from ..quant import tflite_reference as R
from ..quant.common import is_quantized_i8_i16, scale_zp
from ..quant.conv import note_inexact
from ..quant.elementwise import (
    Fx,
    f32,
    f32_div,
    get_reciprocal,
    index16,
    log_x_ge_1,
    lookup_i32,
    lut16,
    out_quant,
    requant,
    row_max_index,
    saturate,
    table8,
    tag,
    widen,
)
from ..quant.rescale import rescale_raw
from ..quant.scale import quantize_multiplier_arrays
from ..tosa.builder import Builder
from .lowering.numeric import expm1, fconst, float_divide, reduce_axes, require_float, select
from .registry import legalize

_BIG = float(np.finfo(np.float32).max)


def _clamp_rule(name: str, lo: float, hi: float) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x = op.operands[0]
        if is_quantized_i8_i16(x):
            return [_q_relu(b, op, name.split(".")[1].upper())]
        dt = require_float(op, x)
        # CLAMP bounds have the data type (spec 2.4.1 CLAMP): fp16's largest finite value is 65504
        top = min(hi, 65504.0) if dt is DType.FP16 else hi
        return [b.clamp(x, lo, top)]

    rule.__doc__ = (f"CLAMP [{lo}, {hi}] (RELUN → CLAMP, §4 #1; lowering doc: tfl.relu_n1_to_1, tfl.relu6, tfl.relu); "
                    "quantized: RESCALE if needed, CLAMP.")
    legalize(name, dtypes=("fp32", "i8", "i16"), arity=1)(rule)


_clamp_rule("tfl.relu", 0.0, _BIG)
_clamp_rule("tfl.relu6", 0.0, 6.0)
_clamp_rule("tfl.relu_n1_to_1", -1.0, 1.0)
_clamp_rule("tfl.relu_0_to_1", 0.0, 1.0)


@legalize("tfl.logistic", dtypes=("fp32", "i8", "i16"), arity=1)
def logistic(b: Builder, op: Operation) -> list[Value]:
    """SIGMOID (lowering doc: tfl.logistic); int8: TABLE of TFLite's LUT, int16: TFLite's sigmoid-table kernel as one
    GATHER."""
    x = op.operands[0]
    if is_quantized_i8_i16(x):
        return [_q_logistic_tanh(b, op, tanh=False)]
    require_float(op, x)
    return [b.sigmoid(x)]


@legalize("tfl.tanh", dtypes=("fp32", "i8", "i16"), arity=1)
def tanh(b: Builder, op: Operation) -> list[Value]:
    """TANH (lowering doc: tfl.tanh); int8: TABLE of TFLite's LUT, int16: TFLite's sigmoid-table kernel as one
    GATHER."""
    x = op.operands[0]
    if is_quantized_i8_i16(x):
        return [_q_logistic_tanh(b, op, tanh=True)]
    require_float(op, x)
    return [b.tanh(x)]


@legalize("tfl.leaky_relu", dtypes=("fp32", "i8", "i16"), arity=1)
def leaky_relu(b: Builder, op: Operation) -> list[Value]:
    """x > 0 ? x : alpha*x via GREATER + SELECT (lowering doc: tfl.leaky_relu), valid for every alpha; quantized:
    TFLite's two
    multipliers (int8 TABLE, int16 two RESCALEs + SELECT)."""
    x = op.operands[0]
    if is_quantized_i8_i16(x):
        return [_q_leaky_relu(b, op)]
    require_float(op, x)
    alpha = float(op.attrs.get("alpha", 0.2))
    pos = b.binary("GREATER", x, fconst(b, 0.0, x))
    return [select(b, pos, x, b.mul(x, fconst(b, alpha, x)))]


@legalize("tfl.prelu", dtypes=("fp32", "i8"), arity=2)
def prelu(b: Builder, op: Operation) -> list[Value]:
    """x >= 0 ? x : alpha*x with alpha broadcast (equal ranks, spec 1.11.3 Broadcasting; no lowering in lowering doc:
    tfl.prelu); int8: TFLite's kernel."""
    x, alpha = op.operands[0], op.operands[1]
    if is_quantized_i8_i16(x, alpha):
        return [_q_prelu(b, op)]
    require_float(op, x, alpha)
    pos = b.binary("GREATER_EQUAL", x, fconst(b, 0.0, x))
    return [select(b, pos, x, b.mul(x, alpha))]


@legalize("tfl.hard_swish", dtypes=("fp32", "i8"), arity=1)
def hard_swish(b: Builder, op: Operation) -> list[Value]:
    """x * relu6(x + 3) / 6 (lowering doc: tfl.hard_swish float path, RELUN → CLAMP); int8: TABLE of TFLite's
    fixed-point kernel.

    int8: a TABLE of TFLite's fixed-point reference HardSwish (not the tfl.hard_swish lowering's saturating i16 table,
    §6.1).
    """
    x = op.operands[0]
    if is_quantized_i8_i16(x):
        return [_q_table_act(b, op)]
    require_float(op, x)
    r6 = b.clamp(b.binary("ADD", x, fconst(b, 3.0, x)), 0.0, 6.0)
    return [b.mul(b.mul(x, r6), fconst(b, 1.0 / 6.0, x))]


@legalize("tfl.gelu", dtypes=("fp32", "i8", "i16"), arity=1)
def gelu(b: Builder, op: Operation) -> list[Value]:
    """0.5*x*(1 + erf(x/sqrt(2))) with ERF (spec 2.4.2 ERF) or the tanh approximation; int8/int16: TFLite's LUTs as
    TABLE.

    approximate: 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))).
    """
    x = op.operands[0]
    if is_quantized_i8_i16(x):
        return [_q_table_act(b, op)]
    require_float(op, x)
    one = fconst(b, 1.0, x)
    if op.attrs.get("approximate"):
        x3 = b.mul(b.mul(x, x), x)
        inner = b.binary("ADD", x, b.mul(x3, fconst(b, 0.044715, x)))
        t = b.tanh(b.mul(inner, fconst(b, math.sqrt(2.0 / math.pi), x)))
    else:
        t = b.erf(b.mul(x, fconst(b, 1.0 / math.sqrt(2.0), x)))
    return [b.mul(b.mul(x, fconst(b, 0.5, x)), b.binary("ADD", one, t))]


@legalize("tfl.elu", dtypes=("fp32", "i8"), arity=1)
def elu(b: Builder, op: Operation) -> list[Value]:
    """x < 0 ? expm1(x) : x (lowering doc: lower_elu_op with EXP-1 replaced by an accurate expm1 near 0); int8:
    TABLE."""
    x = op.operands[0]
    if is_quantized_i8_i16(x):
        return [_q_table_act(b, op)]
    require_float(op, x)
    neg = b.binary("GREATER", fconst(b, 0.0, x), x)
    return [select(b, neg, expm1(b, x), x)]


def _last_axis(op: Operation, x: Value) -> int:
    if x.type.rank == 0:
        raise Unsupported(f"{op.name} of a rank-0 tensor")
    return x.type.rank - 1


@legalize("tfl.softmax", dtypes=("fp32", "i8", "i16"), arity=1)
def softmax(b: Builder, op: Operation) -> list[Value]:
    """exp(beta*(x - max)) * RECIPROCAL(sum), last axis (lowering doc: tfl.softmax + max-subtraction); int: TFLite's
    kernels."""
    x = op.operands[0]
    if is_quantized_i8_i16(x):
        return [_q_softmax(b, op)]
    require_float(op, x)
    axis = _last_axis(op, x)
    beta = float(op.attrs.get("beta", 1.0))
    shifted = b.binary("SUB", x, reduce_axes(b, "REDUCE_MAX", x, [axis], True, nan_mode="PROPAGATE"))
    if beta != 1.0:
        shifted = b.mul(shifted, fconst(b, beta, x))
    e = b.exp(shifted)
    s = reduce_axes(b, "REDUCE_SUM", e, [axis], True)
    return [float_divide(b, e, s)]


@legalize("tfl.log_softmax", dtypes=("fp32", "i8"), arity=1)
def log_softmax(b: Builder, op: Operation) -> list[Value]:
    """(x - max) - LOG(sum(EXP(x - max))) over the last axis (lowering doc: lower_log_softmax_op lacks the max, §6.1);
    int8: TFLite's kernel."""
    x = op.operands[0]
    if is_quantized_i8_i16(x):
        return [_q_log_softmax(b, op)]
    require_float(op, x)
    axis = _last_axis(op, x)
    shifted = b.binary("SUB", x, reduce_axes(b, "REDUCE_MAX", x, [axis], True, nan_mode="PROPAGATE"))
    s = reduce_axes(b, "REDUCE_SUM", b.exp(shifted), [axis], True)
    return [b.binary("SUB", shifted, b.log(s))]


# ------------------------------------------------------------------------------------ quantized (int8 / int16)
def _types(op: Operation) -> DType:
    x, r = op.operands[0], op.results[0]
    if x.dtype is not r.dtype:
        raise Unsupported(f"{op.name} from {x.dtype.value} to {r.dtype.value}")
    return x.dtype


def _q_relu(b: Builder, op: Operation, act: str) -> Value:
    """TFLite's QuantizedReluX: RESCALE by float32 ``s_in/s_out`` when the quantization changes (an identity
    otherwise: TFLite's multiplier for 1.0 is exact), then CLAMP at ``zp + round(bound/s_out)`` (lowering doc:
    tfl.relu6, tfl.relu with
    op_inventory §4 #1 / §6.1: no i32 CLAMP, so rescale first and clamp the i8/i16 result)."""
    x, r = op.operands[0], op.results[0]
    dt = _types(op)
    (si, zi), (so, zo) = scale_zp(op, x), scale_zp(op, r)
    y = x if (f32(si), zi) == (f32(so), zo) else requant(b, x, f32_div(si, so), dt, in_zp=zi, out_zp=zo)
    y = fused_activation_q(b, y, act, out_quant(op))
    if y is x:  # nothing to do: keep the graph well-formed with an IDENTITY
        y = b.identity(x)
    return tag(y, r.type.quant)


def _q_logistic_tanh(b: Builder, op: Operation, tanh: bool) -> Value:
    """int8: TABLE of LUTPopulate<int8> (float32 sigmoid / tanh; lowering doc: tfl.logistic, tfl.tanh use
    saturating i16
    tables, EXT-INT16, op_inventory §4 #12 / §6.3);
    int16: TFLite's reference sigmoid-table interpolation (output scale 2^-15), one 65536-entry GATHER."""
    x, r = op.operands[0], op.results[0]
    dt = _types(op)
    (si, zi), (so, zo) = scale_zp(op, x), scale_zp(op, r)
    if dt is DType.INT8:
        return table8(b, x, R.lut_populate_i8(R.tanh32 if tanh else R.logistic32, si, zi, so, zo), out_quant(op))
    if f32(so) != 2.0 ** -15:
        raise Unsupported(f"{op.name}: int16 output scale {so:.6g} (TFLite requires 2^-15)")
    return lut16(b, x, R.logistic_tanh_i16(R.codes(16), si, tanh), out_quant(op))


def _q_table_act(b: Builder, op: Operation) -> Value:
    """int8 HARD_SWISH / GELU / ELU as one TABLE of TFLite's kernel (lowering doc: tfl.hard_swish, lowering doc:
    tfl.elu); int16 GELU as
    TABLE i16 (LUTPopulate<int16>, spec 1.12.5: apply_lookup_s) + RESCALE ×2^-7."""
    x, r = op.operands[0], op.results[0]
    dt = _types(op)
    (si, zi), (so, zo) = scale_zp(op, x), scale_zp(op, r)
    name = op.name.split(".")[1]
    gelu = R.gelu_approx32 if op.attrs.get("approximate") else R.gelu32
    if dt is DType.INT16:
        if name != "gelu":
            raise Unsupported(f"{op.name} on int16 (TFLite: int8 only)")
        return apply_table_i16(b, x, R.lut_populate_i16(gelu, si, zi, so, zo).astype(np.int16), out_quant(op))
    if name == "hard_swish":
        table = R.hard_swish_i8(R.codes(8), si, zi, so, zo)
    else:
        table = R.lut_populate_i8(gelu if name == "gelu" else R.elu32, si, zi, so, zo)
    return table8(b, x, table, out_quant(op))


def _q_leaky_relu(b: Builder, op: Operation) -> Value:
    """TFLite's QuantizeLeakyRelu: identity and alpha branches, each with its own float32 multiplier.

    int8: one TABLE.  int16: both RESCALEs and a SELECT on ``x >= 0`` (lowering doc: tfl.leaky_relu compares the raw
    input and a
    GREATER_EQUAL on i16 does not exist, op_inventory §6.1; i16 has zero point 0 so ``x`` itself is compared in i32).
    """
    x, r = op.operands[0], op.results[0]
    dt = _types(op)
    (si, zi), (so, zo) = scale_zp(op, x), scale_zp(op, r)
    alpha = float(op.attrs.get("alpha", 0.2))
    if dt is DType.INT8:
        return table8(b, x, R.leaky_relu_q(R.codes(8), si, zi, so, zo, alpha, 8), out_quant(op))
    alpha_scale = f32_div(f32(si) * f32(alpha), so)
    if alpha_scale < 0:
        raise Unsupported(f"{op.name}: int16 with negative alpha {alpha} (RESCALE multipliers are >= 0, S11744)")
    pos = requant(b, x, f32_div(si, so), dt)
    neg = requant(b, x, alpha_scale, dt)
    ge = b.binary("GREATER_EQUAL", b.cast(x, DType.INT32), b.const(np.zeros((1,) * x.type.rank, np.int32)))
    return tag(select(b, ge, pos, neg), r.type.quant)


def _q_prelu(b: Builder, op: Operation) -> Value:
    """TFLite's int8 PRELU: ``x - zp >= 0`` ? MBQM(x - zp, s_in/s_out) : MBQM((x - zp)·(alpha - zp_a),
    s_in·s_alpha/s_out), float32 scales, then + zp_out (no lowering in lowering doc: tfl.prelu)."""
    x, alpha, r = op.operands[0], op.operands[1], op.results[0]
    if x.dtype is not DType.INT8 or alpha.dtype is not DType.INT8 or r.dtype is not DType.INT8:
        raise Unsupported(f"{op.name} on {x.dtype.value} (TFLite: int8 only)")
    (si, zi), (sa, za), (so, zo) = scale_zp(op, x), scale_zp(op, alpha), scale_zp(op, r)
    x32, a32 = widen(b, x, zi), widen(b, alpha, za)
    pos = requant(b, x32, f32_div(si, so), DType.INT8, out_zp=zo)
    neg = requant(b, b.mul(x32, a32), f32_div(f32(si) * f32(sa), so), DType.INT8, out_zp=zo)
    ge = b.binary("GREATER_EQUAL", x32, b.const(np.zeros((1,) * x32.type.rank, np.int32)))
    return tag(select(b, ge, pos, neg), r.type.quant)


def _softmax_scaling(si: float, beta: float, what: str = "softmax") -> tuple[int, int, int]:
    """PreprocessSoftmaxScaling(beta, s_in, 5) and diff_min = -CalculateInputRadius(5, left_shift):
    (multiplier, left_shift, diff_min).

    TFLite's reference kernels take this path only for ``beta·s_in·2^26 > 1`` (QuantizeMultiplierGreaterThanOne
    aborts the interpreter below that; the optimized int8 kernels use a float table instead).  Below it the
    multiplier is a right shift (``left_shift < 0``): the scaled differences of 8-bit codes round to (nearly) 0,
    exp to (nearly) 1, which :func:`softmax_exp_table` computes exactly; ``diff_min`` is then below every
    8-bit difference.  ``what`` names the op for an error: the log_softmax lowering refuses that range."""
    if not (si > 0 and beta > 0 and math.isfinite(si * beta)):
        raise Unsupported(f"{what} of input scale {si:.3g} with beta {beta:.3g}: needs a positive finite scale")
    real = min(beta * si * float(1 << 26), float((1 << 31) - 1))
    q, ls = R.to_qmultiplier(real)
    radius = math.floor(31.0 * float(1 << 26) * 2.0 ** -ls)
    return q, ls, -min(radius, 1 << 31)


def softmax_exp_table(q: int, ls: int, diff_min: int) -> np.ndarray:
    """exp_on_negative_values(input_multiplier · (-k)) in Q0.31 for the 256 differences ``k = max - x`` of int8
    codes (0 where ``-k < diff_min``): TFLite's MultiplyByQuantizedMultiplierGreaterThanOne for ``ls >= 0``, the
    same product rounded down by ``2^-ls`` (RoundingDivideByPOT, exact in int64) below."""
    k = np.arange(256, dtype=np.int64)
    if ls >= 0:
        scaled = R.srdhm(R.wrap32(-k << ls), q)
    else:
        scaled = R.rdbpot(R.srdhm(-k, q), min(-ls, 62))
    return np.where(-k >= diff_min, R.exp_on_negative_values(scaled, 5), 0)


#: the longest int8 softmax row whose Q12.19 sum of exps (each term at most 2^19) stays in int32: TFLite's sum is a
#: plain int32 addition, TOSA's REDUCE_SUM REQUIREs no overflow
SOFTMAX_I8_MAX_ROW = ((1 << 31) - 1) >> 19
#: rows of at least this many terms can sum to 2^28 and more, where TFLite's output shift num_bits_over_unit + 23
#: passes 31 (gemmlowp's RoundingDivideByPOT asserts ``exponent <= 31``)
SOFTMAX_I8_WIDE_ROW = 1 << (28 - 19)


def _row_length(op: Operation, x: Value, axis: int) -> int | None:
    """The static length of the softmax row, None when it is symbolic (any length at run time)."""
    n = x.type.shape[axis]
    if not isinstance(n, int) or symdim.is_symbolic(n):
        return None
    return int.__int__(n)


def _check_row(op: Operation, x: Value, axis: int) -> int | None:
    """The static row length (None for a symbolic one, which a 1.1-draft program leaves to its run-time size);
    a static row too long for TFLite's int32 sum is refused."""
    n = _row_length(op, x, axis)
    if n is not None and n > SOFTMAX_I8_MAX_ROW:
        raise Unsupported(f"{op.name} over a row of {n} elements (tensor "
                          f"{x.source or x.name}): TFLite's int8 kernel sums the row's exps in int32 Q12.19, which "
                          f"overflows past {SOFTMAX_I8_MAX_ROW} elements")
    return n


def _q_softmax(b: Builder, op: Operation) -> Value:
    """TFLite's reference quantized softmax over the last axis.

    int8 (reference_ops::Softmax, gemmlowp fixed point): ``d = max - x`` in [0, 255] indexes two int32 tables
    holding ``exp_on_negative_values`` of the rescaled difference in Q0.31 and its Q12.19 form (i8 TABLEs, one per
    byte, or one GATHER on small tensors: :func:`lookup_i32`); the
    row sum (REDUCE_SUM i32) goes through GetReciprocal (CLZ + Newton-Raphson, :class:`Fx`); then
    ``rdbpot(recip·exp, nbits + 23) - 128``.  Replaces the tfl.softmax lowering's 16-bit tables (EXT-INT16, saturated,
    §6.1).
    int16 (SoftmaxInt16): TFLite's exp and 1/(1+x) 513-entry LUTs are TABLE i16 (spec 1.12.5: apply_lookup_s), the rest
    is i32
    arithmetic.
    """
    x, r = op.operands[0], op.results[0]
    dt = _types(op)
    (si, _), (so, zo) = scale_zp(op, x), scale_zp(op, r)
    axis = _last_axis(op, x)
    beta = f32(float(op.attrs.get("beta", 1.0)))
    d, m = row_max_index(b, x, axis)
    fx = Fx(b, x.type.rank)
    if dt is DType.INT16:
        return _q_softmax16(b, op, fx, d, axis, f32(f32(si) * beta) / (10.0 / 65535.0))
    if (zo, f32(so)) != (-128, 1.0 / 256):
        raise Unsupported(f"{op.name}: int8 output quantization ({so:.6g}, {zo}) (TFLite requires (1/256, -128))")
    n = _check_row(op, x, axis)
    q, ls, diff_min = _softmax_scaling(f32(si), beta)
    exp_q0 = softmax_exp_table(q, ls, diff_min)
    if b.context.options.npu_rounding == "native" and n is not None and n < SOFTMAX_I8_WIDE_ROW:
        return _q_softmax_native(b, op, fx, d, axis, exp_q0)
    exp_v, _ = lookup_i32(b, d, exp_q0)
    terms = fx.rdbpot(exp_v, 12, nonneg=True)  # exp_q0 >= 0: RoundingDivideByPOT is a rounding right shift
    total = b.emit("REDUCE_SUM", [terms], {"axis": axis}).result
    recip, bits_over_unit = get_reciprocal(fx, total, 12)
    prod = fx.mulhi(recip, exp_v)
    shift = fx.add(bits_over_unit, 31 - 8)
    if n is not None and n < SOFTMAX_I8_WIDE_ROW:  # the sum stays below 2^28: the shift is at most 31
        unsat = fx.rdbpot(prod, shift, nonneg=True)
    else:
        # a sum of 2^28 or more (512 terms near the row's maximum) asks for a shift of 32 to 35, where TFLite's
        # arithmetic is undefined (gemmlowp asserts exponent <= 31; LiteRT's x86 build shifts by the count mod 32).
        # ARITHMETIC_RIGHT_SHIFT REQUIREs a shift in [0, 31]: the product (< 2^31) divided by 2^32 or more rounds
        # to 0, which is what is kept there (each such probability is below 1/512, the output -128)
        capped = fx.rdbpot(prod, b.binary("MINIMUM", shift, fx.c(31)), nonneg=True)
        unsat = fx.where(fx.gt(shift, 31), 0, capped)
    return saturate(b, unsat, DType.INT8, out_zp=-128, q=r.type.quant)


def _q_softmax_native(b: Builder, op: Operation, fx: Fx, d: Value, axis: int, exp_q0: np.ndarray) -> Value:
    """``npu_rounding="native"``: the int8 softmax in the ops Vela runs cheapest, not bit-exact (recorded).

    The exp is one i16 TABLE of ``round(exp_q0 / 2^16)`` (at most 32767; each entry stored twice, so the slope
    is 0), read at ``x16 = (max - 128 - x)·256`` (:func:`~tf2tosa.quant.elementwise.index16`) and returning
    ``r = e16 << 7``, the exp over 2^9.  The row sum ``t`` of those (below ``n·2^22``: int32 for rows under 512,
    at least the row maximum's 2^22 - 128) is normalised by CLZ to ``m·2^30`` (m in [1, 2)) and a second i16
    TABLE, interpolated over 512 segments, gives ``2^22 / m``; shifted right by ``10 - clz(t)`` per row, one MUL
    (shift 35) makes ``256·r / t`` rounded once, and a saturating RESCALE adds the zero point -128.  That
    replaces TFLite's GetReciprocal (Newton-Raphson, ~20 i32 ops per row, which Vela runs at C = 1 slowly).
    Vela (ethos-u85-256): deeplab_v3_mini 443 k → 236 k cycles, the ``.tflite`` 370 k; each output within 1 LSB
    of TFLite's kernel (tests/test_npu_rounding.py)."""
    note_inexact(b, op, "npu_rounding='native': the exp from one i16 TABLE of its top 16 bits and the row sum's "
                 "reciprocal from an interpolated i16 TABLE (each output at most 1 LSB from TFLite's)")
    e16 = np.minimum((np.asarray(exp_q0, np.int64) + (1 << 15)) >> 16, 32767)
    entries = np.append(np.repeat(e16.astype(np.int16), 2), np.int16(0))  # 513 entries
    x16 = index16(b, d)
    r = b.emit("TABLE", [x16, b.const(entries, DType.INT16, name="table")]).result
    total = b.emit("REDUCE_SUM", [r], {"axis": axis}).result
    hp1 = fx.clz(total)  # in [1, 10]: 2^21 <= total < 2^31
    norm = b.binary("LOGICAL_LEFT_SHIFT", total, fx.sub(hp1, 1))  # m·2^30
    # index (m - 3/2)·2^16 in [-2^15, 2^15) (RESCALE by 2^-14, the top saturated to 32767): u = m - 1 in the TABLE
    idx = rescale_raw(b, fx.sub(norm, 3 << 29), [1 << 30], [44], DType.INT16, double_round=False)
    inv = np.minimum(np.round(32768.0 / (1.0 + np.arange(513) / 512.0)), 32767).astype(np.int16)
    recip = b.emit("TABLE", [idx, b.const(inv, DType.INT16, name="table")]).result  # about 2^22 / m
    # 256·r / t = r·recip / 2^(45 - hp1), split as a per-row shift by 10 - hp1 and the MUL's 35
    prod = b.mul(fx.shr(recip, fx.sub(10, hp1), rnd=True), r, 35)
    return saturate(b, prod, DType.INT8, out_zp=-128, q=op.results[0].type.quant)


def _q_softmax16(b: Builder, op: Operation, fx: Fx, d: Value, axis: int, scale: float) -> Value:
    """SoftmaxInt16: exp LUT on ``MBQM(-d) + 32767`` (saturated to i16), row sum, 1/(1+x) LUT on the sum
    normalised by CLZ, then ``(exp·recip + round) >> (31 - clz)`` clipped to [0, 32767]."""
    rng = 65535.0
    exp_lut = R.lut_populate_i16(np.exp, 10.0 / rng, 32767, 2.0 / rng, 0, dtype=np.float64)
    inv_lut = R.lut_populate_i16(lambda v: 1.0 / (1.0 + v), 1.0 / rng, -32768, 2.0 / rng, 0, dtype=np.float64)

    def lookup(v16: Value, lut: np.ndarray) -> Value:  # LUTLookup = TABLE i16 then >> 7 rounding half up
        t = b.emit("TABLE", [v16, b.const(lut.astype(np.int16), DType.INT16, name="table")]).result
        return fx.shr(t, 7, rnd=True)

    # a difference beyond the first one whose rescaled value saturates the exp LUT's index at -32768 gives that same
    # index: clamped there, the RESCALE's input stays in apply_scale_32's range for every scale (TFLite's
    # x * 2^left_shift overflows int32 for large scales and differences, where its result is undefined).  Only where
    # some difference needs it: the RESCALE of -d REQUIREs |d| < 2^(shift-1), and the saturating RESCALE after it
    # |scaled + 32767| < 2^29 (kept below 2^28 here, a margin for rounding)
    q, sh = R.to_qmultiplier(scale)
    k = np.arange(65536, dtype=np.int64)
    scaled_k = R.mbqm(-k, q, sh)
    sat = np.flatnonzero(scaled_k + 32767 <= -32768)
    _, rescale_shift = quantize_multiplier_arrays([scale], True)
    needed = 65535 >= 1 << (int(rescale_shift[0]) - 1) or scale * 65535.0 + 32767.0 >= float(1 << 28)
    if sat.size and needed:
        d = b.binary("MINIMUM", d, fx.c(int(sat[0])))
    scaled = requant(b, b.negate(d, b.zp(0, DType.INT32), b.zp(0, DType.INT32)), scale, DType.INT32)
    exps = lookup(saturate(b, fx.add(scaled, 32767), DType.INT16), exp_lut)
    total = b.emit("REDUCE_SUM", [exps], {"axis": axis}).result
    hp1 = fx.clz(total)
    shifted = fx.shr(b.binary("LOGICAL_LEFT_SHIFT", total, fx.sub(hp1, 1)), 14, rnd=True)
    recip = lookup(saturate(b, fx.sub(shifted, (1 << 15) + (1 << 16)), DType.INT16), inv_lut)
    out = fx.shr(b.mul(exps, recip), fx.sub(31, hp1), rnd=True)
    return saturate(b, out, DType.INT16, q=op.results[0].type.quant)


#: the largest log of a Q12.19 row sum (below 4096) in Q5.26, rounded up
_LOG_SUM_MAX_Q5 = math.ceil(math.log(4096.0) * (1 << 26)) + 1


def _q_log_softmax(b: Builder, op: Operation) -> Value:
    """TFLite's reference int8 log_softmax (lowering doc: tfl.log_softmax is float only): exp terms by table, the row
    sum's
    log by gemmlowp's log_x_for_x_greater_than_or_equal_to_1 in i32 ops (:func:`log_x_ge_1`), output
    ``rdbpot(diff_q5 - log_sum, 22) + 127`` where ``diff > adjusted_diff_min``, else -128 (output (16/256, 127))."""
    x, r = op.operands[0], op.results[0]
    if _types(op) is not DType.INT8:
        raise Unsupported(f"{op.name} on {x.dtype.value} (TFLite: int8 only)")
    (si, _), (so, zo) = scale_zp(op, x), scale_zp(op, r)
    if (zo, f32(so)) != (127, 16.0 / 256):
        raise Unsupported(f"{op.name}: output quantization ({so:.6g}, {zo}) (TFLite requires (1/16, 127))")
    axis = _last_axis(op, x)
    _check_row(op, x, axis)
    if not f32(si) * float(1 << 26) > 1.0:
        # PreprocessLogSoftmaxScalingExp: QuantizeMultiplierGreaterThanOne aborts TFLite's interpreter here, and the
        # reverse scaling (2^(31-ls)/multiplier) has no RESCALE that keeps the log-sum in range
        raise Unsupported(f"{op.name} of input scale {si:.3g} (tensor {x.source or x.name}): TFLite's int8 "
                          "log_softmax needs input scale · 2^26 > 1 (its reference kernel aborts below that)")
    q, ls, diff_min = _softmax_scaling(f32(si), 1.0, "log_softmax")
    rq, rs = R.to_qmultiplier((1 << (31 - ls)) / float(q))  # PreprocessLogSoftmaxScalingExp's reverse scaling
    k = np.arange(256)
    # differences rescaled to Q5.26; those below -2^31 + the largest log-sum (ln 4096 in Q5.26) are clamped there:
    # TFLite's (diff - log_sum) overflows int32 for them (and TOSA's SUB REQUIREs that it does not), and every
    # value from there down gives the output -128 (it is far below -128 · 2^22)
    diff_q5 = np.maximum(R.mbqm(-k, q, ls), R.I32_MIN + _LOG_SUM_MAX_Q5)
    terms = np.where(-k >= diff_min, R.rdbpot(R.exp_on_negative_values(diff_q5, 5), 12), 0)
    d, _ = row_max_index(b, x, axis)
    fx = Fx(b, x.type.rank)
    terms_v, idx = lookup_i32(b, d, terms)
    total = b.emit("REDUCE_SUM", [terms_v], {"axis": axis}).result
    log_sum = log_x_ge_1(fx, total, 5, 12)
    reverse = requant(b, fx.add(log_sum, R.I32_MIN), rq * 2.0 ** (rs - 31), DType.INT32)
    adjusted = b.binary("MAXIMUM", reverse, fx.c(diff_min - 1))
    keep = fx.gt(b.negate(d, b.zp(0, DType.INT32), b.zp(0, DType.INT32)), adjusted)
    val = fx.rdbpot(fx.sub(lookup_i32(b, d, diff_q5, idx)[0], log_sum), 31 - 5 - 4)
    out = saturate(b, val, DType.INT8, out_zp=127)
    return tag(select(b, keep, out, b.const(np.full((1,) * x.type.rank, -128), DType.INT8)), r.type.quant)
