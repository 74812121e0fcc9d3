"""Rules for TFLite's reductions and arg_max / arg_min: float, bool, int32 and quantized i8/i16.

1.0 reductions take one axis and keep it as size 1 (spec 2.9.6 REDUCE_SUM, §4 #19): one REDUCE_* per axis, then a
RESHAPE when
keep_dims is false (lowering doc: lower_reduce_op).  REDUCE_SUM has only i32 and float modes (spec 2.9.6 REDUCE_SUM), so
quantized sums go through an exact RESCALE to i32 first.  The quantized rules reproduce LiteRT's reference
kernels (reduce.cc / reference_ops reduce.h); see each rule.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import NotYet, Unsupported
from ..ir import DType, Operation, Value
from ..ir.symdim import as_expr, is_symbolic
from ..quant import compute_scale_16, quantize_multiplier
from ..quant.common import per_tensor, qparams, to_i32
from ..quant.conv import require_act_type
from ..quant.elementwise import f32_div
from ..quant.rescale import rescale, rescale_raw
from ..tosa.builder import Builder
from .lowering.legalize_common import const_operand, float_zp, positive_axis
from .lowering.numeric import FLOAT_TYPES, axes_operand, fconst, reduce_axes, require_not_quantized, static_shape
from .registry import legalize

_QTYPES = ("fp32", "i8", "i16")


def _x_axes(op: Operation) -> tuple[Value, list[int]]:
    x = op.operands[0]
    return x, axes_operand(op, 1, x.type.rank)


def _keep(op: Operation) -> bool:
    return bool(op.attrs.get("keep_dims", False))


def _q_sum_i32(b: Builder, op: Operation, x: Value, axes: list[int]) -> tuple[Value, int]:
    """sum(x - zp_x) over ``axes`` as i32 (keep_dims), and the element count N."""
    require_act_type(op, x)
    shape = static_shape(x)
    count = math.prod(shape[a] for a in axes)  # a dimension expression under --dynamic
    _, zp = per_tensor(x, "input")
    return reduce_axes(b, "REDUCE_SUM", to_i32(b, x, zp), axes, True), count


def _keep_or_reshape(b: Builder, y: Value, x: Value, axes: list[int], keep: bool) -> Value:
    return y if keep else b.reshape(y, [d for i, d in enumerate(static_shape(x)) if i not in set(axes)])


#: largest spatial window summed as one DEPTHWISE_CONV2D (Vela's depthwise limits: ky <= 64, kx*ky <= 4096)
MAX_SUM_WINDOW = 64
#: smallest H·W summed by REDUCE_SUMs (over W, then H) instead of the all-ones DEPTHWISE_CONV2D, for at most
#: :data:`REDUCE_SUM_MAX_C` channels (see :func:`_reduce_sum_is_cheaper`)
REDUCE_SUM_MIN_WINDOW = 256
REDUCE_SUM_MAX_C = 16
#: largest H·W summed by REDUCE_SUMs when there are 8 channels or fewer
REDUCE_SUM_MAX_WINDOW_NARROW = 48 * 48


def _reduce_sum_is_cheaper(h: int, w: int, c: int) -> bool:
    """Whether Vela (5.2, Ethos-U85-256) runs sum(x) over H and W of an int8 [N, H, W, C] cheaper as REDUCE_SUM
    over W, then over H, than as one all-ones H×W DEPTHWISE_CONV2D.

    The depthwise sum costs about 21 cycles per window tap per 16 channels, whatever the tensor; a REDUCE_SUM
    costs a transpose of its input (none for the one over W when Vela writes it straight from the producing
    convolution) and a cheap reduction along the channels, so it wins on large windows with few channels.
    Measured on a 1x1 CONV2D → sum → RESCALE graph, with the conv output read by the sum alone and by the sum and
    a second output (``benchmarks/bench_npu.py`` fingerprint_cnn: 42x42x16, 36.5 k → 3.7 k cycles for the
    sum): the REDUCE_SUM pair wins on every measured window of at least 16x16 with 9-16 channels (16x16 to
    64x64) and with 4-8 channels up to 48x48 (above, Vela's schedule of the pair degrades by up to 2x); at 12x12
    it is mixed, below and above 16 channels the depthwise sum wins (6x6x96: 4.3 k against 8.9 k).  The order W
    then H is cheaper than H then W (Arm's converter's order) on every measured window: the second REDUCE_SUM
    then transposes an H x C tensor instead of H x W x C."""
    if c > REDUCE_SUM_MAX_C or h * w < REDUCE_SUM_MIN_WINDOW:
        return False
    return c > 8 or h * w <= REDUCE_SUM_MAX_WINDOW_NARROW


def _spatial_sum_i32(b: Builder, op: Operation, x: Value, axes: list[int]) -> tuple[Value, int] | None:
    """sum(x - zp_x) over H and W of an int8 NHWC ``x`` (keep_dims shape [N, 1, 1, C]) in the form Vela runs
    cheaper, or None when ``x`` is not int8 NHWC reduced over exactly axes 1 and 2 (or its window is too large
    for a depthwise sum).

    Mostly one DEPTHWISE_CONV2D with an all-ones [H, W, C, 1] filter: the same value as RESCALE → REDUCE_SUM →
    REDUCE_SUM, since every tap multiplies ``x - zp_x`` by 1 and the i32 accumulator adds H·W terms of at most
    255 in magnitude (spec 2.3.5 DEPTHWISE_CONV2D), so nothing rounds or wraps.  Vela runs a REDUCE_SUM over H or
    W as a transpose and a channel reduction (997 k of 7.02 M cycles on MobileNetV2 1.0-224), a depthwise
    convolution with its RESCALE fused as one pass (what it makes of TFLite's own MEAN).  Large windows with few
    channels (:func:`_reduce_sum_is_cheaper`) sum as RESCALE to i32 → REDUCE_SUM over W → REDUCE_SUM over H
    instead: exact for the same reason (integer sums in i32 far from its range, in any order)."""
    if x.dtype is not DType.INT8 or x.type.rank != 4 or sorted(axes) != [1, 2]:
        return None
    n, h, w, c = static_shape(x)
    if h > MAX_SUM_WINDOW or w > MAX_SUM_WINDOW or h * w == 1:
        return None
    require_act_type(op, x)
    _, zp = per_tensor(x, "input")
    if _reduce_sum_is_cheaper(h, w, c):
        return reduce_axes(b, "REDUCE_SUM", to_i32(b, x, zp), [2, 1], True), h * w
    ones = b.const(np.ones((h, w, c, 1)), DType.INT8, name="sum_window")
    acc = b.depthwise_conv2d(x, ones, b.const(np.zeros([c]), DType.INT32, name="zero_bias"), b.zp(zp, DType.INT8),
                             b.zp(0, DType.INT8), pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1],
                             acc_type="INT32")
    return acc, h * w


def mean_multiplier(s_in: float, s_out: float, count: int) -> tuple[int, int]:
    """TOSA (multiplier, shift) of LiteRT's quantized mean: QuantizeMultiplier(s_in/s_out) = (m, e), then 1/N is
    folded in as ``sh = min(floor(log2 N), 32, 31 + e)``, ``m' = (m << sh) // N``, ``e' = e - sh``
    (reference_ops::QuantizedMeanOrSum and reference_integer_ops::Mean); TOSA's right shift is ``31 - e'``."""
    m, e = quantize_multiplier(s_in / s_out)
    sh = min(count.bit_length() - 1, 32, 31 + e)
    shift = 31 - (e - sh)
    if not 2 <= shift <= 62:
        raise Unsupported(f"mean rescale {s_in / s_out:.6g}/{count} outside RESCALE's shift range (S11745)")
    return (m << sh) // count, shift


def _mean_symbolic(b: Builder, op: Operation, x: Value, axes: list[int], shape: list[int]) -> Value:
    """Float mean over an axis whose size is a dimension expression (``--dynamic``): 1/N computed at run time as
    RECIPROCAL of the REDUCE_SUM of a TILE of a one-element ones CONST by the reduced sizes (N counted in the
    float type, exact below 2^24), then MUL."""
    rank = x.type.rank
    one = b.const(np.ones([1] * rank, dtype=x.dtype.np_dtype()), x.dtype, name="one")
    ones = b.tile(one, [shape[a] if a in axes else 1 for a in range(rank)])
    count = reduce_axes(b, "REDUCE_SUM", ones, axes, _keep(op))
    s = reduce_axes(b, "REDUCE_SUM", x, axes, _keep(op))
    return b.mul(s, b.reciprocal(count))


@legalize("tfl.mean", dtypes=_QTYPES, arity=2)
def mean(b: Builder, op: Operation) -> list[Value]:
    """REDUCE_SUM per axis, then MUL by 1/N (lowering doc: tfl.mean, float path).

    Quantized (lowering doc: tfl.mean, with its undefined %op1_rescale_in/%input_zp fixed, op_inventory §6.1): RESCALE
    i8/i16
    → i32 removing zp_in, REDUCE_SUM, one RESCALE to the output with LiteRT's folded multiplier
    :func:`mean_multiplier` (DOUBLE_ROUND = MultiplyByQuantizedMultiplier) and zp_out.  the tfl.mean lowering's
    compute_scale_32(div_scale·s_in/s_out) gives a different multiplier than TFLite's integer ``(m << sh) // N``.
    """
    x, axes = _x_axes(op)
    if x.type.is_quantized:
        out = op.results[0]
        acc, count = _spatial_sum_i32(b, op, x, axes) or _q_sum_i32(b, op, x, axes)
        if is_symbolic(count):
            raise NotYet(f"a quantized MEAN over a symbolic size (N = {as_expr(count)}): LiteRT folds 1/N into the "
                         "RESCALE multiplier ((m << sh) // N, sh from log2 N), and RESCALE takes its multiplier and "
                         "shift as constants")
        mult, shift = mean_multiplier(per_tensor(x)[0], per_tensor(out, "output")[0], count)
        zp_out = per_tensor(out)[1] if out.dtype is DType.INT8 else 0
        lim = (1 << (shift - 1)) - 1
        if int(count) * ((1 << x.dtype.bits) - 1) > lim:  # (|x - zp| < 2^bits: otherwise |acc| never reaches lim)
            # a large multiplier (output scale far below the input's): apply_scale_32 REQUIREs |acc| < 2^(shift-1);
            # from there on acc · mult / 2^shift is at least 2^29 in magnitude, so the output saturates either way
            # (as it does in TFLite, where its int32 product is defined); MINIMUM/MAXIMUM: CLAMP has no i32 row in
            # TOSA 1.0
            bound = np.full([1] * acc.type.rank, lim, np.int32)
            acc = b.binary("MINIMUM", acc, b.const(bound, DType.INT32))
            acc = b.binary("MAXIMUM", acc, b.const(-bound, DType.INT32))
        y = rescale_raw(b, acc, [mult], [shift], out.dtype, out_zp=zp_out, out_quant=qparams(out))
        return [_keep_or_reshape(b, y, x, axes, _keep(op))]
    if x.dtype not in FLOAT_TYPES:
        raise Unsupported(f"mean on {x.dtype.value} not supported")
    shape = static_shape(x)
    if any(is_symbolic(shape[a]) for a in axes):
        return [_mean_symbolic(b, op, x, axes, shape)]
    count = int(np.prod([shape[a] for a in axes])) if axes else 1
    s = reduce_axes(b, "REDUCE_SUM", x, axes, _keep(op))
    if count == 1:
        return [s]
    return [b.mul(s, fconst(b, 1.0 / count, s))]


@legalize("tfl.sum", dtypes=_QTYPES, arity=2)
def sum_(b: Builder, op: Operation) -> list[Value]:
    """REDUCE_SUM per axis (lowering doc: tfl.sum; float or i32, spec 2.9.6 REDUCE_SUM).

    Quantized (lowering doc: tfl.sum with %input_zp defined): RESCALE → i32 (−zp_in), REDUCE_SUM, then the rounding of
    LiteRT's default kernel.  LiteRT 2.3's BUILTIN_REF SUM is broken for quantized inputs (with a requantization
    the int8 kernel reads the data as uint8, a lone -1 summing as 255; with equal quantization, and for int16, it
    returns -1 everywhere), so the default kernel is the oracle: it scales the sum by the float32 ratio
    ``r = s_in/s_out`` and rounds ``v = (s - N·zp_in)·r`` half away from zero (int16), or rounds ``v + zp_out``
    half to even (int8), saturating.  ``r`` has 24 significant bits, so a 32-bit RESCALE multiplier holds it
    exactly: SINGLE_ROUND RESCALEs of ``acc`` and ``-acc`` give ``floor(v + 1/2)`` and ``ceil(v - 1/2)``, which
    differ exactly at ties, and SELECTs pick the kernel's side.  Exact ties need a ratio with few significant bits
    (0.5, 0.25, ...); beyond them only the kernel's own float32 rounding within ~2^-24 of a half-integer remains.
    """
    x, axes = _x_axes(op)
    if x.type.is_quantized:
        out = op.results[0]
        acc, _ = _q_sum_i32(b, op, x, axes)
        s_out, zp_out = per_tensor(out, "output")
        zp_out = zp_out if out.dtype is DType.INT8 else 0
        r = f32_div(per_tensor(x)[0], s_out)
        rank = acc.type.rank

        def c(v: int) -> Value:
            return b.const(np.full((1,) * rank, v), DType.INT32)

        up = rescale(b, acc, r, DType.INT32, double_round=False)
        down = b.binary("SUB", c(0), rescale(b, b.binary("SUB", c(0), acc), r, DType.INT32, double_round=False))
        if out.dtype is DType.INT8:
            odd = b.binary("EQUAL", b.binary("BITWISE_AND", b.binary("ADD", up, c(zp_out)), c(1)), c(1))
            use_down = b.binary("LOGICAL_AND", b.binary("GREATER", up, down), odd)
        else:
            use_down = b.binary("GREATER", c(1), acc)  # v <= 0: a tie rounds away from zero, i.e. down
        y = b.emit("SELECT", [use_down, down, up]).result
        y = rescale(b, y, 1.0, out.dtype, out_zp=zp_out, out_quant=qparams(out), double_round=False)
        return [_keep_or_reshape(b, y, x, axes, _keep(op))]
    if x.dtype not in FLOAT_TYPES and x.dtype is not DType.INT32:
        raise Unsupported(f"sum on {x.dtype.value} not supported")
    return [reduce_axes(b, "REDUCE_SUM", x, axes, _keep(op))]


def _minmax(opcode: str) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x, axes = _x_axes(op)
        if x.type.is_quantized:
            # max/min commute with a positive-scale affine map: same quantization in and out needed
            out_q = op.results[0].type.quant
            if out_q != x.type.quant:
                raise Unsupported(f"quantized {op.name} with different input/output quantization")
        if x.dtype not in FLOAT_TYPES and x.dtype not in (DType.INT8, DType.INT16, DType.INT32):
            raise Unsupported(f"{op.name} on {x.dtype.value} not supported")
        return [reduce_axes(b, opcode, x, axes, _keep(op), quant=x.type.quant, nan_mode="PROPAGATE")]

    rule.__doc__ = (f"{opcode} per axis (lowering doc: tfl.reduce_max, tfl.reduce_min; i8/i16/i32/float, "
                    "spec 2.9.3 REDUCE_MAX); quantized: equal input/output "
                    f"quantization (TFLite requires it), the stored values reduce directly.")
    legalize(f"tfl.{opcode.lower()}", dtypes=_QTYPES, arity=2)(rule)


_minmax("REDUCE_MAX")
_minmax("REDUCE_MIN")


#: longest quantized reduce_prod chain we unroll (one MUL and one RESCALE per element)
MAX_PROD_CHAIN = 64


def _int32_prod(b: Builder, x: Value, axes: list[int], keep: bool) -> Value:
    """int32 reduce_prod: TFLite multiplies in C int32, which wraps modulo 2^32; MUL i32 with shift 0 keeps exactly
    the low 32 bits (spec 2.5.14 MUL) and multiplication modulo 2^32 is associative and commutative, so a pairwise tree
    of
    MULs over a [kept, reduced] view (ceil(log2 N) levels) gives TFLite's result bit for bit.  REDUCE_PRODUCT itself
    is float only (spec 2.9.5 REDUCE_PRODUCT)."""
    shape = static_shape(x)
    kept = [a for a in range(len(shape)) if a not in axes]
    n = int(np.prod([shape[a] for a in axes])) if axes else 1
    k = int(np.prod([shape[a] for a in kept])) if kept else 1
    y = b.reshape(b.transpose(x, kept + axes), [k, n])
    while n > 1:
        h = n // 2
        p = b.mul(b.slice(y, [0, 0], [k, h]), b.slice(y, [0, h], [k, h]))
        y = b.concat([p, b.slice(y, [0, 2 * h], [k, 1])], 1) if n % 2 else p
        n = h + n % 2
    keep_shape = [1 if a in axes else d for a, d in enumerate(shape)]
    return b.reshape(y, keep_shape if keep else [shape[a] for a in kept])


@legalize("tfl.reduce_prod", dtypes=("fp32", "i8", "i16", "i32"), arity=2)
def reduce_prod(b: Builder, op: Operation) -> list[Value]:
    """REDUCE_PRODUCT (the 1.0 name of REDUCE_PROD, §4 #18); float only (spec 2.9.5 REDUCE_PRODUCT).

    Quantized: LiteRT's QuantizedReduceProd rescales after every step to stay in int32: with N reduced elements
    and ``g = s_in / s_out^(1/N)``, ``p = x0 - zp``, then ``p = MBQM64(p·(x_j - zp), g)`` in row-major order, and
    ``out = MBQM64(p, g) + zp_out`` (MBQM64 = the int64 MultiplyByQuantizedMultiplier: RESCALE scale32=false with
    compute_scale_16, spec 4.5.5: apply_scale_16).  Unrolled as SLICE/MUL/RESCALE on a [kept, reduced] view; MUL i32
    keeps only the
    low 32 bits (spec 2.5.14 MUL), so the rule raises Unsupported unless a static bound proves every product fits i32.
    """
    x, axes = _x_axes(op)
    if not x.type.is_quantized:
        require_not_quantized(op, x)
        if x.dtype is DType.INT32:
            return [_int32_prod(b, x, axes, _keep(op))]
        if x.dtype not in FLOAT_TYPES:
            raise Unsupported(f"reduce_prod on {x.dtype.value} (REDUCE_PRODUCT is float only)")
        return [reduce_axes(b, "REDUCE_PRODUCT", x, axes, _keep(op))]
    require_act_type(op, x)
    out = op.results[0]
    shape = static_shape(x)
    kept = [a for a in range(len(shape)) if a not in axes]
    n = int(np.prod([shape[a] for a in axes])) if axes else 1
    k = int(np.prod([shape[a] for a in kept])) if kept else 1
    if n > MAX_PROD_CHAIN:
        raise Unsupported(f"quantized reduce_prod over {n} elements (> {MAX_PROD_CHAIN} unrolled steps)")
    (s_in, zp), (s_out, zp_out) = per_tensor(x), per_tensor(out, "output")
    g = s_in / s_out ** (1.0 / n)
    m16, sh16 = compute_scale_16(g)
    lo, hi = x.dtype.range()
    dmax = max(abs(lo - zp), abs(hi - zp))
    bound, fits = dmax, True
    for _ in range(n - 1):
        if bound * dmax >= 1 << 31:
            fits = False
            break
        bound = math.ceil(bound * dmax * m16 / 2.0**sh16) + 1
    xt = b.reshape(b.transpose(to_i32(b, x, zp), kept + axes), [k, n])
    acc = b.slice(xt, [0, 0], [k, 1])
    zp_o = zp_out if out.dtype is DType.INT8 else 0
    if fits:
        for j in range(1, n):
            acc = rescale_raw(b, b.mul(acc, b.slice(xt, [0, j], [k, 1])), [m16], [sh16], DType.INT32, scale32=False)
        y = rescale_raw(b, acc, [m16], [sh16], out.dtype, out_zp=zp_o, out_quant=qparams(out), scale32=False)
    else:
        y = _exact_prod_chain(b, xt, acc, n, m16, sh16, out, zp_o)
    keep_shape = [1 if a in axes else d for a, d in enumerate(shape)]
    return [b.reshape(y, keep_shape if _keep(op) else [shape[a] for a in kept])]


def _exact_prod_chain(b: Builder, xt: Value, acc: Value, n: int, m16: int, sh16: int, out: Value, zp_out: int
                      ) -> Value:
    """The chain of QuantizedReduceProd when a running product may leave i32: each step's 64-bit product
    ``p·(x_j - zp)`` is formed exactly in base-2^15 limbs (:mod:`.exact_round`), scaled by TFLite's int64 MBQM
    (16-bit multiplier, ``floor(v·m/2^s + 1/2)``) and cast to int32 keeping the low 32 bits, as C does."""
    from ..quant import exact_round as X

    g = m16 * 2.0 ** -sh16
    k = static_shape(acc)[0]
    for j in range(1, n):
        neg_c, lc = X.limbs_of_signed(b, acc)
        neg_d, ld = X.limbs_of_signed(b, b.slice(xt, [0, j], [k, 1]))
        prod = X.mul_limbs(b, lc, ld[:2])  # |x - zp| <= 2^16
        acc = X.round_scaled(b, b.binary("LOGICAL_XOR", neg_c, neg_d), prod, [g], half_up=True, wrap32=True)
    neg, limbs = X.limbs_of_signed(b, acc)
    y = X.round_scaled(b, neg, limbs, [g], half_up=True, wrap32=True)
    lim = 1 << 24  # saturates anyway; keeps the RESCALE ×1 within spec 4.5.5: apply_scale_32's value range
    y = b.binary("MINIMUM", y, b.const(np.full((1, 1), lim), DType.INT32), nan_mode="PROPAGATE")
    y = b.binary("MAXIMUM", y, b.const(np.full((1, 1), -lim), DType.INT32), nan_mode="PROPAGATE")
    return rescale(b, y, 1.0, out.dtype, out_zp=zp_out, out_quant=qparams(out), double_round=False)


def _bool_reduce(name: str, opcode: str) -> None:
    def rule(b: Builder, op: Operation) -> list[Value]:
        x, axes = _x_axes(op)
        if x.dtype is not DType.BOOL:
            raise Unsupported(f"{op.name} on {x.dtype.value}")
        return [reduce_axes(b, opcode, x, axes, _keep(op))]

    rule.__doc__ = f"{opcode} per axis (bool)."
    legalize(name, arity=2)(rule)


_bool_reduce("tfl.reduce_any", "REDUCE_ANY")
_bool_reduce("tfl.reduce_all", "REDUCE_ALL")


def _arg_axis(op: Operation, x: Value) -> int:
    arr = np.asarray(const_operand(op, 1, "axis")).reshape(-1)
    if arr.size != 1:
        raise Unsupported(f"{op.name} axis must be a single value, got {arr.tolist()}")
    return positive_axis(int(arr[0]), x.type.rank)


def _check_arg_input(op: Operation, x: Value) -> None:
    # ARGMAX inputs: i8 (PRO-INT), i16 (EXT-INT16), fp16/fp32 (PRO-FP) — no i32 (spec 2.3.1 ARGMAX).
    if x.dtype not in FLOAT_TYPES and x.dtype not in (DType.INT8, DType.INT16):
        raise Unsupported(f"{op.name} on {x.dtype.value} (TOSA ARGMAX has no {x.dtype.value} mode)")
    if x.type.rank == 0:
        raise Unsupported(f"{op.name} of a rank-0 tensor")


@legalize("tfl.arg_max", dtypes=_QTYPES, arity=2)
def arg_max(b: Builder, op: Operation) -> list[Value]:
    """ARGMAX, i32 result (lowering doc: tfl.arg_max).  TFLite's i64 output is narrowed to i32 (§6.7; indices < 2^31).

    Quantized i8 (PRO-INT) and i16 (EXT-INT16) inputs are fine: a positive-scale affine map keeps the argmax.
    """
    x = op.operands[0]
    _check_arg_input(op, x)
    axis = _arg_axis(op, x)
    return [b.argmax(x, axis=axis, nan_mode="PROPAGATE", out_dtype=DType.INT32)]


@legalize("tfl.arg_min", dtypes=_QTYPES, arity=2)
def arg_min(b: Builder, op: Operation) -> list[Value]:
    """ARGMAX of an order-reversing map (1.0 has no ARGMIN): NEGATE for floats, BITWISE_NOT (-x-1, no overflow
    at -128 unlike NEGATE) for integers; the first minimum maps to the first maximum."""
    x = op.operands[0]
    _check_arg_input(op, x)
    axis = _arg_axis(op, x)
    if x.dtype.is_float:
        r = b.negate(x, float_zp(b, x.dtype), float_zp(b, x.dtype))
    else:
        r = b.bitwise_not(x)
    return [b.argmax(r, axis=axis, nan_mode="PROPAGATE", out_dtype=DType.INT32)]
