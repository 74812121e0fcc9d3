"""TFLite type-conversion ops → TOSA 1.0: cast, quantize, dequantize, identity-like ops."""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, QuantParams, Value
from ..ir.symdim import size as size_of
from ..tosa.builder import Builder
from .lowering.layout import data_operand, keeps_values, prod, retag, tosa_dtype
from .lowering.legalize_common import scalar_const
from .registry import legalize

_INTS = (DType.INT8, DType.INT16, DType.INT32)
_FLOATS = (DType.FP16, DType.BF16, DType.FP32)


def truncate_toward_zero(b: Builder, x: Value) -> Value:
    """SELECT(x < 0, CEIL(x), FLOOR(x)): TFLite casts float→int by truncation, while TOSA CAST rounds to
    nearest-even (spec 2.13.1 CAST, op_inventory §5.8/§6.3), so make the value integral first."""
    zero = scalar_const(b, 0.0, x)
    neg = b.emit("GREATER", [zero, x]).result
    return b.emit("SELECT", [neg, b.ceil(x), b.floor(x)]).result


def convert(b: Builder, x: Value, out: DType) -> Value:
    """Value-convert ``x`` to ``out`` with TFLite cast semantics, using only CAST pairs TOSA 1.0 has
    (spec 2.13.1 CAST: no bool↔float, no i64)."""
    src = x.dtype
    if src is out:
        return x
    if src is DType.BOOL and out in _FLOATS:
        return b.cast(b.cast(x, DType.INT32), out)  # bool→i32 (PRO-INT) then i32→float (PRO-FP)
    if src in _FLOATS and out is DType.BOOL:
        ne = b.emit("EQUAL", [x, scalar_const(b, 0.0, x)]).result
        return b.logical_not(ne)
    if src in _FLOATS and out in _INTS:
        return b.cast(truncate_toward_zero(b, x), out)
    if src in _FLOATS + _INTS + (DType.BOOL,) and out in _FLOATS + _INTS + (DType.BOOL,):
        return b.cast(x, out)
    raise Unsupported(f"cast {src} -> {out}")


@legalize("tfl.cast", dtypes=("fp32", "i32", "i8", "i16", "bool"), arity=1)
def cast(b: Builder, op: Operation) -> list[Value]:
    """CAST (trivial in lowering doc: tfl.cast, but: float→int truncates in TFLite, int64 narrows to i32, bool↔float via
    i32).

    TFLite's cast kernel converts stored values and ignores quantization, so quantized operands/results are
    converted as plain integers (the result carries the output's quantization).
    """
    src = op.operands[0]
    if src.dtype in (DType.UINT8, DType.UINT16) or op.results[0].type.dtype in (DType.UINT8, DType.UINT16):
        raise Unsupported("cast to/from unsigned types")
    out = tosa_dtype(op.results[0].type.dtype)
    if src.dtype in (DType.INT64, DType.UINT32, DType.UINT64) and src.const() is None:
        raise Unsupported(f"cast from a non-constant {src.dtype} tensor")
    x = data_operand(b, src)
    return [retag(b, convert(b, x, out), op.results[0].type.quant, keep=[x])]


# ------------------------------------------------------------------------------------------------ quantize
def quantize_thresholds(scale: float, n: int) -> np.ndarray:
    """``thr[k]`` for k < n: the least float32 ``a >= 0`` with ``fl32(a / scale) >= k + 0.5``.

    TFLite's reference AffineQuantize stores ``round(x / scale) + zp`` with a float32 division and std::round (half
    away from zero); ``a -> fl32(a / scale)`` is monotone, so ``|round(x / scale)| > k`` exactly when
    ``|x| >= thr[k]``.  Found from ``fl32((k + ½)·scale)`` by stepping one ulp at a time with numpy's (IEEE) float32
    division, the same operation the kernel performs.
    """
    s = np.float32(scale)
    h = np.arange(n, dtype=np.float32) + np.float32(0.5)  # exact: n < 2^22
    with np.errstate(over="ignore", under="ignore"):
        c = (h.astype(np.float64) * float(s)).astype(np.float32)
        if not (np.all(np.isfinite(c)) and float(s) > 0.0):
            raise Unsupported(f"quantization scale {float(s):.6g} out of range")
        up = np.float32(np.inf)
        while np.any(low := c / s < h):
            c = np.where(low, np.nextafter(c, up), c)
        while np.any(ok := np.nextafter(c, np.float32(0)) / s >= h):
            c = np.where(ok, np.nextafter(c, np.float32(0)), c)
    return c


def reciprocal_below(scale: float) -> np.float32:
    """A float32 ``r < (1 − 2^-20)/scale``, so ``fl32(a·r) <= fl32(a/scale)`` for every a >= 0 and the two differ
    by less than ½ while ``a/scale < 2^18``."""
    want = (1.0 - 2.0 ** -20) / float(np.float32(scale))
    r = np.float32(want)
    if not np.isfinite(r) or r == 0:
        raise Unsupported(f"quantization scale {scale:.6g} out of range")
    return r if float(r) <= want else np.nextafter(r, np.float32(0))


def quantize_value(b: Builder, x: Value, q: QuantParams, out: DType) -> Value:
    """fp32 → i8/i16 bit-exact with TFLite's reference AffineQuantize: ``clamp(round(fl32(x / s)) + zp)``.

    lowering doc: tfl.quantize passes zp and scale to lower_quantize_op (lowering doc: lower_quantize_op) in swapped
    order, and that multiplies by the
    scale where 1/scale is meant; even fixed, CAST rounds half to even (spec 2.13.1 CAST) where std::round rounds half
    away from zero, and x·(1/s) differs from x/s in the last bit next to rounding thresholds.  So, with a = |x|
    clamped to where the result saturates anyway:

    1. ``m0 = CAST(a · r)`` with r just below 1/s (:func:`reciprocal_below`): m0 <= m <= m0 + 1 for the wanted
       magnitude m = round(fl32(a / s)).
    2. ``m = m0 + (a >= thr[m0])`` with ``thr`` from :func:`quantize_thresholds`, looked up by one fp32 GATHER.
    3. ``zp ± m`` by the sign of x, MAXIMUM/MINIMUM to the output range (1.0 has no i32 CLAMP), CAST.
       (NaN quantizes to zp; TFLite's ``static_cast<int32>`` of NaN/inf is undefined behaviour.)

    Needs PRO-FP (CAST fp32↔i32, fp32 GATHER) like every float → integer conversion.
    """
    if q.per_channel:
        raise Unsupported("per-channel quantization of a float tensor")
    lo, hi = out.range()
    zp = int(q.zp)
    j = max(hi - zp, zp - lo) + 1  # |round(x/s)| > j - 1 saturates on both sides
    thr = quantize_thresholds(q.s, j + 2)
    shape = [size_of(d) for d in x.shape]
    size = prod(shape)
    a = b.clamp(b.emit("ABS", [x]).result, 0.0, float(thr[j]), nan_mode="IGNORE")
    m0 = b.cast(b.mul(a, scalar_const(b, float(reciprocal_below(q.s)), x)), DType.INT32)
    values = b.const(thr.reshape(1, j + 2, 1), DType.FP32, name="quantize_thresholds")
    t = b.emit("GATHER", [values, b.reshape(m0, [1, size])]).result
    up = b.emit("GREATER_EQUAL", [a, b.reshape(t, shape)]).result
    m = b.binary("ADD", m0, b.cast(up, DType.INT32))
    zero = scalar_const(b, 0, m)
    neg = b.emit("GREATER", [scalar_const(b, 0.0, x), x]).result
    signed = b.emit("SELECT", [neg, b.binary("SUB", zero, m), m]).result
    y = b.binary("ADD", signed, scalar_const(b, zp, m))
    y = b.binary("MINIMUM", b.binary("MAXIMUM", y, scalar_const(b, lo, m)), scalar_const(b, hi, m))  # no i32 CLAMP
    return b.emit("CAST", [y], out_dtype=out, quant=q).result


@legalize("tfl.quantize", dtypes=("i8", "i16"), arity=1)
def quantize(b: Builder, op: Operation) -> list[Value]:
    """fp32 → i8/i16 (:func:`quantize_value`), or requantize i8/i16 → i8/i16 with one RESCALE by s_in/s_out
    (TFLite's Requantize: MultiplyByQuantizedMultiplier, i.e. DOUBLE_ROUND).  uint8 tensors were already turned into
    int8 with zp − 128 (the unsigned_io pass), so uint8 ↔ int8 is an int8 requantize (the identity when only the zero
    point moved by 128)."""
    x = op.operands[0]
    res = op.results[0].type
    q, out = res.quant, res.dtype
    if q is None or out not in (DType.INT8, DType.INT16):
        raise Unsupported(f"quantize to {out}{'' if q is not None else ' without quantization parameters'}")
    if x.dtype is DType.FP32 and not x.type.is_quantized:
        return [quantize_value(b, data_operand(b, x), q, out)]
    if x.dtype in (DType.INT8, DType.INT16) and x.type.quant is not None:
        from ..quant.rescale import requantize  # (the RESCALE builders: loaded by a quantized rule only)

        return [requantize(b, data_operand(b, x), q, out)]
    raise Unsupported(f"quantize from {x.dtype}")


@legalize("tfl.dequantize", dtypes=("fp32", "i8", "i16"), arity=1)
def dequantize(b: Builder, op: Operation) -> list[Value]:
    """fp16 → fp32 CAST; constant int8 weights dequantized on the host; int8/int16 tensors by CAST/SUB/MUL.

    A non-constant quantized int8/int16 input becomes CAST/SUB/MUL in PRO-FP (:func:`dequantize_value`).
    """
    x = op.operands[0]
    out = tosa_dtype(op.results[0].type.dtype)
    if x.dtype in _FLOATS and not x.type.is_quantized:
        y = b.cast(data_operand(b, x), out)
        if x.dtype is DType.FP16 and x.is_const:  # fp16 weights: the fp16_weights pass may store them as fp16
            passes = b.context.passes.of(b.graph)
            passes.fp16_weights += 1
            if y.is_const:  # the pass can reuse the source's fp16 array for this constant
                passes.fp16_sources[y.id] = x.const()  # type: ignore[assignment]
                passes.fp16_pending.append(y)  # (narrowed once its readers are legalized)
        return [y]
    c = x.const()
    q = x.type.quant
    if c is not None and q is not None:
        arr = np.asarray(c).astype(np.float64)
        scale = np.asarray(q.scale, dtype=np.float64)
        zp = np.asarray(q.zero_point, dtype=np.float64)
        if q.axis is not None and len(q.scale) > 1:
            shp = [1] * arr.ndim
            shp[q.axis] = len(q.scale)
            scale, zp = scale.reshape(shp), zp.reshape(shp)
        real = (arr - zp) * scale
        return [b.const(real.astype(out.np_dtype()), out)]
    if q is None or x.dtype not in (DType.INT8, DType.INT16):
        raise Unsupported(f"dequantize of {x.dtype}{' (no quantization)' if q is None else ''}")
    _fuse_float_island(b, op, x)
    return [dequantize_value(b, x, out)]


#: the float islands fused here, one op between a DEQUANTIZE and a QUANTIZE (the integer_islands pass, run before
#: legalization, fuses whole chains of any op of FLOAT_ISLAND_KERNELS)
_FUSED_HERE = ("tfl.hard_swish",)


def _fuse_float_island(b: Builder, op: Operation, x: Value) -> None:
    """DEQUANTIZE → float op → QUANTIZE, as TFLite's mixed 16x8 mode builds ops it cannot quantize (HARD_SWISH),
    becomes one lookup table over every input code: the float op's 1-ulp differences (e.g. our x·(1/6) against the
    kernel's x/6) would otherwise move results across a quantization threshold.  The table is the reference
    kernels' own float32 arithmetic: float(double(s_in)·(q - zp)), the float kernel, round(fl32(y / s_out)) + zp
    (half away from zero), clamped.  The intermediate float tensors are left unused and disappear."""
    g = b.graph
    q = x.type.quant
    if q is None or q.per_channel or x.is_const or op.results[0] in g.outputs:
        return
    uses = g.uses(op.results[0])
    if len(uses) != 1 or uses[0][0].name not in _FUSED_HERE:
        return
    fop = uses[0][0]
    fuses = g.uses(fop.results[0])
    if len(fuses) != 1 or fop.results[0] in g.outputs or fuses[0][0].name != "tfl.quantize":
        return
    qop = fuses[0][0]
    oq = qop.results[0].type.quant
    if oq is None or oq.per_channel or qop.results[0].dtype is not x.dtype:
        return
    from ..quant.elementwise import lut16, table8  # (the integer arithmetic modules: loaded when an island is)
    from ..quant.tflite_reference import FLOAT_ISLAND_KERNELS

    lo, hi = x.dtype.range()
    codes = np.arange(lo, hi + 1, dtype=np.int64)
    f = (float(np.float32(q.s)) * (codes - int(q.zp)).astype(np.float64)).astype(np.float32)
    with np.errstate(all="ignore"):
        y = FLOAT_ISLAND_KERNELS[fop.name](f).astype(np.float32)
        r = (y / np.float32(oq.s)).astype(np.float32).astype(np.float64)
    table = np.clip(np.sign(r) * np.floor(np.abs(r) + 0.5) + int(oq.zp), lo, hi).astype(np.int64)
    xv = data_operand(b, x)
    lut = table8(b, xv, table, oq) if x.dtype is DType.INT8 else lut16(b, xv, table, oq)
    old = qop.results[0]
    lut.source = old.source
    g.replace_all_uses(old, lut)


def dequantize_value(b: Builder, x: Value, out: DType = DType.FP32) -> Value:
    """(CAST(x) − zp) · scale in ``out`` (lowering doc: lower_dequantize_op, with its missing return fixed).

    TFLite computes float(double(scale)·(q − zp)); scale is a float32 and |q − zp| < 2^17, so that product is
    exact in double and the single rounding to float equals fp32 MUL's rounding: bit-exact.  CAST i8/i16→fp
    needs PRO-FP (spec 2.13.1 CAST); MUL takes a shift operand of 0 in 1.0 (§4 #11).
    """
    q = x.type.quant
    assert q is not None
    rank = x.type.rank
    f = b.emit("CAST", [x], out_dtype=out).result  # result carries no quantization
    cshape = [1] * rank
    if q.axis is not None and len(q.scale) > 1:
        cshape[q.axis] = len(q.scale)
    zp = np.asarray(q.zero_point, dtype=np.float64).reshape(cshape).astype(out.np_dtype())
    sc = np.asarray(q.scale, dtype=np.float32).reshape(cshape).astype(out.np_dtype())
    if np.any(zp != 0):
        f = b.binary("SUB", f, b.const(zp, out))
    return b.mul(f, b.const(sc, out))



@legalize("tfl.identity", dtypes=("fp32", "i8", "i16", "i32", "bool"), arity=1)
@keeps_values
def identity(b: Builder, op: Operation) -> list[Value]:
    """Identity-like ops forward their operand (no IDENTITY op needed; outputs get one from the pipeline)."""
    return [data_operand(b, op.operands[0])]


@legalize("tfl.fake_quant", arity=1)
def fake_quant(b: Builder, op: Operation) -> list[Value]:
    """Nudged min/max, then round((clamp(x) - nmin)/scale)·scale + nmin in fp32 as TFLite's kernel (bit-exact).

    TFLite's FAKE_QUANT (reference_ops::FakeQuant; lowering doc: tfl.fake_quant via lowering doc: lower_fake_quant_op,
    which has no
    nudging and whose %quantized_op is undefined, op_inventory §6.1): min/max nudged so 0 is exact (quant range
    [0, 2^num_bits - 1]; TFLite refuses narrow_range), then in fp32 and the kernel's order
    ``round((clamp(x) - nmin) · (1/scale)) · scale + nmin`` with round half away from zero (the shifted value is
    >= 0, so FLOOR plus a >= 0.5 test is exact).  No CAST is involved, so no PRO-INT op appears."""
    x = op.operands[0]
    if x.dtype is not DType.FP32 or x.type.is_quantized:
        raise Unsupported(f"fake_quant on {x.type}")
    lo, hi = float(op.attrs.get("min", 0.0)), float(op.attrs.get("max", 0.0))
    bits = int(op.attrs.get("num_bits", 8))
    if not lo <= 0.0 <= hi or not lo < hi or not 2 <= bits <= 16:
        raise Unsupported(f"fake_quant range [{lo}, {hi}] with {bits} bits (TFLite requires min <= 0 <= max)")
    if op.attrs.get("narrow_range"):
        raise Unsupported("fake_quant with narrow_range (TFLite's kernel refuses it at runtime: \"narrow_range "
                          "FakeQuant is not currently supported\")")
    from .lowering.tf_ops import fake_quant_params  # (the TensorFlow lowerings' module: loaded for FAKE_QUANT only)

    nmin, nmax, scale = fake_quant_params(lo, hi, bits, False)
    f32 = np.float32
    inv = f32(1.0) / f32(scale)

    def k(v: float) -> Value:
        return scalar_const(b, float(f32(v)), x)

    clamped = b.binary("MINIMUM", b.binary("MAXIMUM", x, k(nmin), nan_mode="IGNORE"), k(nmax), nan_mode="IGNORE")
    v = b.mul(b.binary("SUB", clamped, k(nmin)), k(float(inv)))
    fl = b.floor(v)
    up = b.emit("GREATER_EQUAL", [b.binary("SUB", v, fl), k(0.5)]).result
    r = b.emit("SELECT", [up, b.binary("ADD", fl, k(1.0)), fl]).result
    return [b.binary("ADD", b.mul(r, k(scale)), k(nmin))]
