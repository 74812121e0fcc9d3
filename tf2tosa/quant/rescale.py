"""Building ``tosa.RESCALE`` (spec 2.13.2 RESCALE) from real scales.

``rescale(b, x, scale, out_dtype, …)`` computes ``out = clip(apply_scale((x - in_zp), scale) + out_zp)``.

* The (multiplier, shift) pairs come from :mod:`.scale` (TFLite's QuantizeMultiplier; op_inventory §5.1).
* Rounding: DOUBLE_ROUND (EXT-DOUBLEROUND) reproduces TFLite's MultiplyByQuantizedMultiplier bit-exactly for
  scales < 1 (op_inventory §6.3).  It is chosen when the conversion option ``rounding == "double"`` and the 32-bit
  multiplier is used (DOUBLE_ROUND needs scale32, spec 2.13.2 RESCALE) and some shift exceeds 31; otherwise SINGLE_ROUND
  (PRO-INT core).  For scales >= 1 (shift <= 31) one rounding half up is exactly TFLite's
  SaturatingRoundingDoublingHighMul (nudge 2^30 / 1 - 2^30, then truncating division), ties included.
* ``scale32`` defaults to True, and to False for i48 inputs (spec 2.13.2 RESCALE).
* Zero points are ``[1]`` tensors of the input/output data types (spec 2.13.2 RESCALE).  A uint8 zero point
(``input_unsigned`` /
  ``output_unsigned``) is stored as its i8 bit pattern and zero-extended by the op (spec 2.13.2 RESCALE, spec 2.13.2
  RESCALE).
* The value-range REQUIRE of apply_scale_32 (spec 4.5.5: apply_scale_32: ``|x - in_zp| < 2^(shift-1)``) is the caller's
concern; for i8
  and i16 inputs it always holds (shift >= 2 … and a scale < 2^29 — see :func:`max_input_magnitude`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import Unsupported
from ..ir import DType, QuantParams, Value
from ..tosa.builder import Builder
from .scale import channel_pairs, quantize_multiplier_arrays

ScaleArg = float | int | Sequence[float] | np.ndarray


def rounding_mode(b: Builder, scale32: bool = True) -> str:
    """"DOUBLE_ROUND" when the conversion asks for TFLite-exact rounding and the multiplier is 32-bit."""
    return "DOUBLE_ROUND" if b.context.rounding == "double" and scale32 else "SINGLE_ROUND"


def _scales(scale: ScaleArg) -> list[float] | np.ndarray:
    """The scales as float64 values: a list of one, or a flat float64 array (the values ``float`` makes of them:
    :func:`.scale.quantize_multiplier_arrays` reads either alike, with no list of Python floats per channel)."""
    if isinstance(scale, (int, float, np.floating, np.integer)):
        return [float(scale)]
    flat = np.asarray(scale, dtype=np.float64).reshape(-1)
    if flat.size == 0:
        raise Unsupported("RESCALE needs at least one scale")
    return flat


def _zp_bits(value: int, dtype: DType, unsigned: bool) -> int:
    """A zero point as stored in a ``dtype`` tensor; unsigned ones become their signed bit pattern."""
    value = int(value)
    if not dtype.is_int:
        raise Unsupported(f"a zero point on a {dtype.value} tensor (quantized tensors hold integers)")
    bits = dtype.bits if dtype is not DType.INT48 else 48
    if unsigned:
        if not 0 <= value < (1 << bits):
            raise Unsupported(f"unsigned zero point {value} outside [0, {(1 << bits) - 1}]")
        return value - (1 << bits) if value >= (1 << (bits - 1)) else value
    lo, hi = dtype.range()
    if not lo <= value <= hi:
        raise Unsupported(f"zero point {value} outside the {dtype.value} range")
    return value


@functools.lru_cache(maxsize=4096)
def _one_pair(scale: float, scale32: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`.scale.quantize_multiplier_arrays` of one scale (read-only arrays of one element) and its shift as an
    int, kept per (scale, scale32): a conversion's per-tensor RESCALEs ask for a few scales many times, and each
    array pass costs more than the copy :func:`rescale` makes for its constant (the same values: errors are raised
    on every call, as they are not kept)."""
    mult, shift = quantize_multiplier_arrays([scale], scale32)
    mult.flags.writeable = False
    shift.flags.writeable = False
    return mult, shift, int(shift[0])


def rescale(b: Builder, x: Value, scale: ScaleArg, out_dtype: DType, *, in_zp: int = 0, out_zp: int = 0,
            out_quant: QuantParams | None = None, scale32: bool | None = None, double_round: bool | None = None,
            input_unsigned: bool = False, output_unsigned: bool = False) -> Value:
    """Emit ``tosa.RESCALE(x, multiplier, shift, input_zp, output_zp)``; returns its result (type quant = out_quant).

    ``scale`` is one factor or one per channel of the last dimension of ``x`` (``per_channel`` when more than one).
    ``double_round`` overrides the option-derived rounding mode; ``double_round=True`` with ``scale32=False`` raises.
    With the option-derived mode, DOUBLE_ROUND is emitted only when some shift exceeds 31 — below that both modes
    compute the same (spec 4.5.5: apply_scale_32) and SINGLE_ROUND keeps the op in the PRO-INT core.  Per-channel scales
    that all
    map to the same (multiplier, shift) give a per-tensor RESCALE.
    """
    scales = _scales(scale)
    if scale32 is None:
        scale32 = x.dtype is not DType.INT48
    if double_round is None:
        mode = rounding_mode(b, scale32)
    elif double_round:
        if not scale32:
            raise Unsupported("DOUBLE_ROUND needs a 32-bit multiplier (S10081)")
        mode = "DOUBLE_ROUND"
    else:
        mode = "SINGLE_ROUND"
    if len(scales) > 1:
        if x.type.rank < 1:
            raise Unsupported("per-channel RESCALE of a rank-0 tensor (S10086)")
        nc = x.shape[-1]
        if isinstance(nc, int) and nc != len(scales):
            raise Unsupported(f"{len(scales)} per-channel scales for a last dimension of {nc}")
    graph = b.graph
    if len(scales) == 1 and scales[0] > 0.0:  # per-tensor (most RESCALEs): the pair's arrays made once per scale
        mult, shift, top = _one_pair(float(scales[0]), scale32)
        mult, shift = mult.copy(), shift.copy()
    else:  # (new arrays in the storage types)
        mult, shift, top, same = channel_pairs(scales, scale32)
        if same and mult.size > 1:
            mult, shift = mult[:1].copy(), shift[:1].copy()  # identical channels: one per-tensor pair, same results
    per_channel = mult.size > 1
    m = graph._const_op(mult, DType.INT32 if scale32 else DType.INT16, "multiplier", "tosa.CONST", None)
    s = graph._const_op(shift, DType.INT8, "shift", "tosa.CONST", None)
    if double_round is None and mode == "DOUBLE_ROUND" and top <= 31:
        mode = "SINGLE_ROUND"  # spec 4.5.5: apply_scale_32 only differ for shift > 31: no EXT-DOUBLEROUND needed
    in_bits = _zp_bits(in_zp, x.dtype, input_unsigned)
    out_bits = _zp_bits(out_zp, out_dtype, output_unsigned)
    attrs = {"scale32": bool(scale32), "rounding_mode": mode, "per_channel": per_channel,
             "input_unsigned": bool(input_unsigned), "output_unsigned": bool(output_unsigned)}
    # (the pairs of channel_pairs and _one_pair hold the validator's ranges: multipliers >= 0, shifts in [2, 62])
    return _emit(b, [x, m, s, b.zp(in_bits, x.dtype), b.zp(out_bits, out_dtype)], attrs, out_dtype, out_quant,
                 in_bits, out_bits)


def _emit(b: Builder, operands: list[Value], attrs: dict[str, Any], out_dtype: DType, out_quant: QuantParams | None,
          in_zp: int, out_zp: int) -> Value:
    """``b.emit("RESCALE", operands, attrs, …).result`` for operands ``[x, multiplier, shift, input_zp, output_zp]``
    of which all but ``x`` are new constants (the zero points [1] tensors of x's and ``out_dtype``, holding
    ``in_zp`` and ``out_zp``), whose multipliers and shifts the caller has made in the validator's ranges.  Through
    :meth:`Builder.emit_vouched` (one full inference and check per signature) when its value checks pass as
    well, i.e. each zero point is an i8 one or 0 (spec 2.13.2 RESCALE), and x's shape is static and
    the attributes plain."""
    x, m, s = operands[0], operands[1], operands[2]
    shape = x.type.__dict__.get("_static_shape")  # (kept by TensorType for a shape of plain ints >= 0)
    if (shape is None or in_zp and x.dtype is not DType.INT8 or out_zp and out_dtype is not DType.INT8
            or any(v.__class__ is not bool and v.__class__ is not str for v in attrs.values())):
        return b.emit("RESCALE", operands, attrs, out_dtype=out_dtype, quant=out_quant).result
    key = (shape, x.dtype, out_dtype, m.type.shape, m.dtype, s.type.shape, *attrs.items())
    return b.emit_vouched("RESCALE", operands, attrs, key, out_dtype=out_dtype, quant=out_quant).result


def _zp_of(v: Value) -> int:
    q = v.type.quant
    if q is None or v.dtype is not DType.INT8:
        return 0
    return int(q.zero_point[0]) if not q.per_channel else 0


def rescale_to_i32(b: Builder, x: Value, scale: ScaleArg = 1.0, *, in_zp: int | None = None,
                   double_round: bool | None = None) -> Value:
    """i8/i16/i32/i48 → i32 with the input zero point removed (default: x's own zp for i8, else 0).

    With the default scale 1.0 (multiplier 2^30, shift 30) the result is exactly ``x - zp``; no rounding happens.
    """
    zp = _zp_of(x) if in_zp is None else int(in_zp)
    return rescale(b, x, scale, DType.INT32, in_zp=zp, double_round=double_round)


def rescale_from_i32(b: Builder, x: Value, scale: ScaleArg, out_quant: QuantParams, out_dtype: DType = DType.INT8, *,
                     double_round: bool | None = None) -> Value:
    """i32 (or i48) accumulator → quantized ``out_dtype`` with ``out_quant``'s zero point added."""
    ozp = int(out_quant.zero_point[0]) if out_dtype is DType.INT8 else 0
    return rescale(b, x, scale, out_dtype, out_zp=ozp, out_quant=out_quant, double_round=double_round)


def requantize(b: Builder, x: Value, out_quant: QuantParams, out_dtype: DType | None = None, *,
               in_quant: QuantParams | None = None, double_round: bool | None = None) -> Value:
    """Change a quantized tensor's (scale, zp): one RESCALE by ``s_in / s_out`` (per-tensor only).

    Returns ``x`` unchanged when types and parameters already agree.
    """
    iq = in_quant or x.type.quant
    if iq is None:
        raise Unsupported(f"{x.name} has no quantization parameters")
    od = out_dtype or x.dtype
    if iq.per_channel or out_quant.per_channel:
        raise Unsupported("requantize of a per-channel tensor")
    if od is x.dtype and iq.s == out_quant.s and iq.zp == out_quant.zp:
        return x
    izp = iq.zp if x.dtype is DType.INT8 else 0
    ozp = out_quant.zp if od is DType.INT8 else 0
    return rescale(b, x, iq.s / out_quant.s, od, in_zp=izp, out_zp=ozp, out_quant=out_quant,
                   double_round=double_round)


def max_input_magnitude(scale: float, scale32: bool = True) -> int:
    """Largest ``|x - in_zp|`` that satisfies apply_scale_32's value-range REQUIRE (spec 4.5.5: apply_scale_32) for
    ``scale``."""
    from .scale import compute_scale_32

    if not scale32:
        return (1 << 47) - 1
    _, shift = compute_scale_32(scale)
    return (1 << (shift - 1)) - 1


def apply_scale_32(value: np.ndarray, multiplier: int, shift: int, double_round: bool) -> np.ndarray:
    """The spec's apply_scale_32 (spec 4.5.5) in numpy int64, without its REQUIREs (callers keep to the ranges)."""
    v = np.asarray(value, dtype=np.int64)
    # a new array (also for a 0-d value: array arithmetic wraps without a scalar's overflow warning), then in place
    r = np.multiply(v, np.int64(multiplier), out=np.empty(v.shape, np.int64))
    if double_round and shift > 31:
        sign = v >> 63  # 0 where v >= 0, -1 where v < 0: the double-round term 2^30 - 2^31·[v < 0] is ±2^30
        sign <<= 31
        r += sign
        r += np.int64((1 << (shift - 1)) + (1 << 30))
    else:
        r += np.int64(1 << (shift - 1))
    r >>= shift
    return r if r.ndim else r[()]


@functools.lru_cache(maxsize=4096)
def multiplier32(scale: float) -> tuple[int, int]:
    """The 32-bit (multiplier, shift) of one scale (:func:`.scale.quantize_multiplier_arrays`), kept per scale: the
    ADD/SUB search asks for the same few scales many times."""
    mult, shift = (int(a[0]) for a in quantize_multiplier_arrays([scale], True))
    return mult, shift


@functools.lru_cache(maxsize=1024)
def _candidate_list(scale: float, left_shift: int, mode: str) -> tuple[tuple[int, int, str], ...]:
    """:func:`_widen_rescale_candidates` as a tuple, kept per argument (the search walks it more than once)."""
    return tuple(_widen_rescale_candidates(scale, left_shift, mode))


def _widen_rescale_candidates(scale: float, left_shift: int, mode: str) -> Iterator[tuple[int, int, str]]:
    """One-RESCALE ``(multiplier, shift, rounding_mode)`` candidates for ``(x - zp)·2^left_shift·scale``: the
    shifts 10..62 (apply_scale_32's value range needs ``|x - zp| < 2^(shift-1)``), multipliers next to
    ``multiplier·2^(shift + left_shift - shift_2)`` (the nearest first), SINGLE_ROUND before DOUBLE_ROUND (only
    above shift 31).  Generated in that order: the callers take the first that passes."""
    mult, shift2 = multiplier32(scale)
    for s in range(10, 63):
        base = mult * 2.0 ** (s + left_shift - shift2)  # finite: below 2^31 · 2^(62 + left_shift)
        if math.floor(base) - 1 >= 1 << 31:
            break  # no multiplier below 2^31 here, nor at the larger shifts (base doubles with each)
        near = math.floor(base + 0.5)  # the nearest multiplier first (exact when the scale is dyadic)
        for m in sorted({math.floor(base) + k for k in (-1, 0, 1, 2)}, key=lambda c: (abs(c - near), c)):
            if 0 <= m < 1 << 31:
                yield (m, s, "SINGLE_ROUND")
                if mode == "DOUBLE_ROUND" and s > 31:
                    yield (m, s, "DOUBLE_ROUND")


def _apply(v: np.ndarray, cand: tuple[int, int, str]) -> np.ndarray:
    return apply_scale_32(v, cand[0], cand[1], cand[2] == "DOUBLE_ROUND")


def _apply_int(v: int, cand: tuple[int, int, str]) -> int:
    """:func:`_apply` of one value as a Python int (the same floor of the same sum: numpy's int64 holds it without
    overflow where :func:`merged_widen_rescale` calls this, ``|v| < 2^31``)."""
    mult, shift, mode = cand
    if mode == "DOUBLE_ROUND" and shift > 31:
        return (v * mult + (1 << (shift - 1)) + (1 << 30) - ((1 << 31) if v < 0 else 0)) >> shift
    return (v * mult + (1 << (shift - 1))) >> shift


def merged_widen_rescale(codes: np.ndarray, zp: int, left_shift: int, scale: float,
                         mode: str, *, two_step: np.ndarray | None = None) -> tuple[int, int, str] | None:
    """One RESCALE ``(multiplier, shift, rounding_mode)`` that maps every input code ``x`` of ``codes`` exactly as
    the two steps ``(x - zp)·2^left_shift`` (exact) then RESCALE by ``scale`` with ``mode`` do, or None.

    TFLite's quantized ADD/SUB (and SQUARED_DIFFERENCE) scale each input by ``2^left_shift`` and then by a
    multiplier with rounding; the two roundings of the second step need not be one rounding of ``x - zp``.  This
    tries :func:`_widen_rescale_candidates` in order for a pair whose results on *every* code equal the two
    steps': the check over all codes is the proof.  ``two_step``: the two steps' values on ``codes`` when the caller
    has them.
    """
    v = np.asarray(codes, dtype=np.int64) - zp
    want = two_step_widen(v, left_shift, scale, mode) if two_step is None else two_step
    cands = _candidate_list(scale, left_shift, mode)
    if not cands:
        return None
    if v.ndim != 1 or int(np.abs(v).max(initial=0)) >= 1 << 31:
        return next((c for c in cands if np.array_equal(_apply(v, c), want)), None)
    if want.shape == v.shape:
        # each candidate in order on a few codes first (the two ends, where its rounding drifts furthest from the
        # two steps, and three between), in Python ints: one that misses any of them misses, and only one that hits
        # them all is checked on every code (most candidates miss at an end: no array pass for them)
        n = v.size
        probes = [(int(v[j]), int(want[j])) for j in sorted({0, n - 1, n // 2, n // 4, 3 * n // 4})] if n else []
        for c in cands:
            if all(_apply_int(x, c) == w for x, w in probes) and np.array_equal(_apply(v, c), want):
                return c
        return None
    # all candidates at once, one row each: apply_scale_32 with per-row multiplier, shift and rounding (|v·m| <
    # 2^62), then the first row equal to the two steps on every code
    m = np.array([c[0] for c in cands], dtype=np.int64)[:, None]
    sh = np.array([c[1] for c in cands], dtype=np.int64)[:, None]
    dbl = np.array([c[2] == "DOUBLE_ROUND" and c[1] > 31 for c in cands])[:, None]
    r = v * m
    r += np.where(dbl, (v >> 63) << 31, 0)
    r += (np.int64(1) << (sh - 1)) + np.where(dbl, np.int64(1 << 30), 0)
    r >>= sh
    ok = np.flatnonzero((r == want).all(axis=1))
    return cands[int(ok[0])] if ok.size else None


def two_step_widen(v: np.ndarray, left_shift: int, scale: float, mode: str) -> np.ndarray:
    """``RESCALE(v·2^left_shift, scale)`` to i32 as :func:`rescale` emits it under ``mode``."""
    mult, shift2 = multiplier32(scale)
    return apply_scale_32(np.asarray(v, dtype=np.int64) << left_shift, mult, shift2,
                          mode == "DOUBLE_ROUND" and shift2 > 31)


@functools.lru_cache(maxsize=1024)
def two_step_codes(zp: int, left_shift: int, scale: float, mode: str) -> np.ndarray:
    """:func:`two_step_widen` of the 256 int8 codes less ``zp``, kept per argument (read-only): an ADD/SUB's search
    reads each input's several times, and inputs of one quantization recur."""
    v = two_step_widen(np.arange(-128, 128, dtype=np.int64) - zp, left_shift, scale, mode)
    v.flags.writeable = False
    return v


@functools.lru_cache(maxsize=1024)
def _merged_codes(zp: int, left_shift: int, scale: float, mode: str) -> tuple[int, int, str] | None:
    """:func:`merged_widen_rescale` on the 256 int8 codes, kept per argument (the input of an ADD/SUB with the
    larger scale has the factor 1/2 exactly, and its zero point recurs)."""
    return merged_widen_rescale(np.arange(-128, 128, dtype=np.int64), zp, left_shift, scale, mode,
                                two_step=two_step_codes(zp, left_shift, scale, mode))


#: TFLite's int8 ADD/SUB results on a grid of code pairs: ``want(xs, ys)`` for a column of first-input codes and
#: a row of second-input codes (:func:`joint_add_rescales`)
PairResults = Callable[[np.ndarray, np.ndarray], np.ndarray]


def joint_add_rescales(zps: tuple[int, int], scales: tuple[float, float], left_shift: int, out_scale: float,
                       out_zp: int, bounds: tuple[int, int], subtract: bool, want: np.ndarray | PairResults,
                       mode: str, *, two_step_holds: bool = False) -> list[tuple[int, int, str] | None] | None:
    """One input RESCALE per int8 ADD/SUB input where the *ADD's int8 output* stays exact, or None.

    The ADD/SUB is emitted as ``RESCALE_i(x_i)`` (i8 → i32), ADD/SUB in i32, RESCALE by ``out_scale`` to i8 with
    ``out_zp``, clamped to ``bounds``.  ``want[x + 128, y + 128]`` is TFLite's int8 result for the code pair (x, y)
    (all 65536 pairs), or ``want`` is a function giving those results on a grid of pairs (:data:`PairResults`),
    asked only for the pairs a check reads.  An input's one-RESCALE form need not equal the two steps
    ``(x - zp)·2^left_shift`` then RESCALE by ``scales[i]`` on every code: a code whose i32 value moves by one
    changes the sum by one part in about 2^19 of an output step, which moves the rounded output only where the sum
    sits on a rounding boundary.
    Per input, in order, :func:`merged_widen_rescale`'s exact form is taken where there is one, else the first
    candidate of :func:`_widen_rescale_candidates` whose results, with the other input at its chosen (or two-step)
    values, give ``want`` on every pair: the exhaustive check is the proof.
    The result lists per input its ``(multiplier, shift, rounding_mode)``, or None where no candidate passes (that
    input keeps the two steps).  None overall when the two-step form itself does not give ``want`` (a rounding
    option other than TFLite's).  ``two_step_holds`` says the caller has shown that it does (that check is skipped).
    """
    codes = np.arange(-128, 128, dtype=np.int64)
    at: PairResults | None = want if callable(want) else None
    full = None if callable(want) else np.asarray(want, dtype=np.int64).reshape(256, 256)
    output = _add_output_stage(out_scale, out_zp, bounds, subtract, mode)
    vals = [two_step_codes(int(zp), left_shift, float(sc), mode) for zp, sc in zip(zps, scales)]
    if not two_step_holds:
        if full is None:
            assert at is not None
            full = np.asarray(at(codes[:, None], codes[None, :]), dtype=np.int64)
        if not np.array_equal(output(*vals), full):
            return None

    def wanted(i: int, moved: np.ndarray) -> np.ndarray:
        """``want`` on the rows (input 0) or columns (input 1) of the moved codes."""
        if full is not None:
            return full[moved, :] if i == 0 else full[:, moved]
        assert at is not None
        return at(codes[moved][:, None], codes[None, :]) if i == 0 else at(codes[:, None], codes[moved][None, :])

    chosen: list[tuple[int, int, str] | None] = [None, None]
    for i, (zp, sc) in enumerate(zip(zps, scales)):
        exact = _merged_codes(int(zp), left_shift, float(sc), mode)  # the same values on every code: kept first
        if exact:
            chosen[i] = exact  # (no code moves: every pair keeps its result)
            continue
        for cand in _candidate_list(sc, left_shift, mode):
            v = _apply(codes - zp, cand)
            moved = np.flatnonzero(v != vals[i])  # only pairs with a moved code can change
            got = output(v[moved], vals[1]) if i == 0 else output(vals[0], v[moved])
            if np.array_equal(got, wanted(i, moved)):
                chosen[i], vals[i] = cand, v
                break
    return chosen


def _add_output_stage(out_scale: float, out_zp: int, bounds: tuple[int, int], subtract: bool,
                      mode: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The int8 ADD/SUB output stage of :func:`joint_add_rescales` on the sums (or differences) of two i32 value
    vectors, every pair."""
    om, osh = multiplier32(out_scale)
    odbl = mode == "DOUBLE_ROUND" and osh > 31
    lo, hi = (int(v) for v in bounds)
    rnd = (1 << (osh - 1)) + ((1 << 30) if odbl else 0)  # apply_scale_32's rounding term (DOUBLE_ROUND: for acc >= 0)
    scratch = np.empty((2, 1 << 16), dtype=np.int64)  # the pair arrays, reused (no fresh pages per check)

    def output(a: np.ndarray, c: np.ndarray) -> np.ndarray:
        """The int8 outputs for the sums (or differences) ``a[i] ± c[j]``: apply_scale_32 (spec 4.5.5) by ``om``,
        ``osh`` with out_zp added and clamped to ``bounds``, in place on one int64 array.  ``acc·om`` is formed as
        ``a·om ± c·om`` (256 products each side) where no int64 overflow can happen; with om > 0 the sign of
        ``acc·om`` is the sign of ``acc`` (DOUBLE_ROUND's ±2^30 term)."""
        bound = (int(np.abs(a).max(initial=0)) + int(np.abs(c).max(initial=0))) * om + rnd + (1 << 31)
        if om <= 0 or bound >= 1 << 63:  # (no such scale or i32 value: apply_scale_32 on the sums as they are)
            acc = a[:, None] - c[None, :] if subtract else a[:, None] + c[None, :]
            return np.clip(apply_scale_32(acc, om, osh, odbl) + out_zp, lo, hi)
        am, cm = a * om, c * om
        r, neg = scratch[0][:am.size * cm.size].reshape(am.size, cm.size), scratch[1][:am.size * cm.size]
        (np.subtract if subtract else np.add).outer(am, cm, out=r)
        if odbl:
            neg = np.right_shift(r, 63, out=neg.reshape(r.shape))  # -1 where acc < 0: 2^30 - 2^31·[acc < 0]
            neg <<= 31
            r += neg
        # out_zp·2^osh added before ``>> osh`` is out_zp added after it (floor division), where int64 holds it
        big = bound + (abs(out_zp) << osh) >= 1 << 63
        r += rnd if big else rnd + (out_zp << osh)
        r >>= osh
        if big:
            r += out_zp
        np.maximum(r, lo, out=r)  # (the clamp in place; np.clip's argument checks cost more than the passes)
        return np.minimum(r, hi, out=r)

    return output


def rescale_raw(b: Builder, x: Value, multiplier: Sequence[int], shift: Sequence[int], out_dtype: DType, *,
                in_zp: int = 0, out_zp: int = 0, out_quant: QuantParams | None = None, scale32: bool = True,
                double_round: bool | None = None) -> Value:
    """RESCALE with explicit (multiplier, shift) pairs (for multipliers TFLite derives arithmetically, e.g. the
    folded 1/N of mean).  ``double_round`` None follows the conversion's rounding option (spec: RESCALE)."""
    mode = rounding_mode(b, scale32) if double_round is None else ("DOUBLE_ROUND" if double_round else "SINGLE_ROUND")
    m = b.const(np.asarray(multiplier, np.int64), DType.INT32 if scale32 else DType.INT16, name="multiplier")
    s = b.const(np.asarray(shift, np.int64), DType.INT8, name="shift")
    attrs = {"scale32": scale32, "rounding_mode": mode, "per_channel": len(multiplier) > 1,
             "input_unsigned": False, "output_unsigned": False}
    operands = [x, m, s, b.zp(in_zp, x.dtype), b.zp(out_zp, out_dtype)]
    if not _pairs_hold(m, s):  # (the validator says what is wrong with them)
        return b.emit("RESCALE", operands, attrs, out_dtype=out_dtype, quant=out_quant).result
    return _emit(b, operands, attrs, out_dtype, out_quant, in_zp, out_zp)


def _pairs_hold(m: Value, s: Value) -> bool:
    """Whether the multiplier and shift constants hold values in the validator's ranges (multipliers >= 0, shifts
    in [2, 62], spec 4.5.5 apply_scale_32 / apply_scale_16), one at least."""
    mult, shift = m.const(), s.const()
    if mult is None or shift is None or not mult.size or not shift.size:
        return False
    if mult.size <= 16 and shift.size <= 16:
        ms, ss = mult.tolist(), shift.tolist()
        return min(ms) >= 0 and min(ss) >= 2 and max(ss) <= 62
    return bool(mult.min() >= 0 and shift.min() >= 2 and shift.max() <= 62)
