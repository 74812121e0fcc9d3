"""TOSA building blocks for the quantized math and activation rules (bit-exact with TFLite's reference kernels).

* Requantization is :func:`tf2tosa.quant.rescale` (RESCALE, DOUBLE_ROUND under ``rounding="double"``), which is
  TFLite's ``MultiplyByQuantizedMultiplier`` when given the very scale TFLite quantizes (op_inventory §5.2, §7).
  TFLite computes many of those scales in float32 (``input->params.scale / output->params.scale``): :func:`f32`.
* :func:`widen` gives ``(x - zp)·2^k`` exactly in i32 (RESCALE by 2^k for i8, op_inventory §6.3; CAST + MUL for i16,
  whose 2^15 scaling would break apply_scale_32's value-range REQUIRE, spec: apply_scale_32).
* Lookup tables: ``TABLE`` i8 (spec: TABLE) for any int8 elementwise function, ``GATHER`` (spec: GATHER, PRO-INT for
  i8/i16/i32) for tables wider than 8 bits — 65536 int16 entries, 65536 int8 code pairs, 256 int32 entries.
* :class:`Fx`: gemmlowp's int32 fixed-point primitives as TOSA ops, for the data-dependent parts of softmax and
  log_softmax (reciprocal and log of a row sum) that no table can hold.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, QuantParams, Value
from ..tosa.builder import Builder
from . import tflite_reference as R
from .rescale import (
    joint_add_rescales,
    merged_widen_rescale,
    multiplier32,
    rescale,
    rescale_raw,
    rounding_mode,
    two_step_codes,
)
from .table import apply_table_i8


def f32(x: float) -> float:
    """A value as TFLite's ``float`` holds it."""
    return float(np.float32(x))


def f32_div(a: float, b: float) -> float:
    """``float / float`` in float32, as TFLite computes most requantization scales (inf or NaN where float32
    overflows or divides by zero, as in TFLite: the callers' scale checks refuse those with their own message)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return float(np.float32(np.float32(a) / np.float32(b)))


def out_quant(op: Operation) -> QuantParams:
    q = op.results[0].type.quant
    if q is None:
        raise Unsupported(f"{op.name}: quantized inputs but an unquantized result")
    return q


def tag(v: Value, q: QuantParams | None) -> Value:
    """Give a freshly built result the op's output quantization (downstream rules read it)."""
    if q is not None and v.type.quant != q:
        v.type = v.type.with_dtype(v.dtype, q)
    return v


def const(b: Builder, value: int, like: Value, dtype: DType = DType.INT32) -> Value:
    """A constant broadcastable against ``like`` (all dims 1, equal rank, spec: broadcasting)."""
    return b.const(np.full((1,) * like.type.rank, value), dtype)


def requant(b: Builder, x: Value, scale: float, out_dtype: DType, *, in_zp: int = 0, out_zp: int = 0,
            q: QuantParams | None = None) -> Value:
    """``clip(MBQM(x - in_zp, QuantizeMultiplier(scale)) + out_zp)``: one RESCALE (rounding from the options)."""
    return rescale(b, x, scale, out_dtype, in_zp=in_zp, out_zp=out_zp, out_quant=q)


def saturate(b: Builder, x: Value, out_dtype: DType, *, out_zp: int = 0, q: QuantParams | None = None) -> Value:
    """``clip(x + out_zp)`` to ``out_dtype`` (RESCALE by exactly 1.0: multiplier 2^30, shift 30, spec: RESCALE)."""
    return rescale(b, x, 1.0, out_dtype, out_zp=out_zp, out_quant=q, double_round=False)


def widen(b: Builder, x: Value, zp: int = 0, left_shift: int = 0) -> Value:
    """``(x - zp)·2^left_shift`` in i32, exactly (no rounding)."""
    if x.dtype is DType.INT8:
        return rescale(b, x, float(2 ** left_shift), DType.INT32, in_zp=zp, double_round=False)
    if zp:
        raise Unsupported(f"{x.dtype.value} with zero point {zp}")
    x32 = b.cast(x, DType.INT32)
    return b.mul(x32, const(b, 1 << left_shift, x32)) if left_shift else x32


def widen_kept(b: Builder, x: Value, zp: int) -> Value:
    """``x - zp`` in i32; for a constant i8 ``x`` kept as a RESCALE of the int8 constant instead of folded into an
    i32 constant.  The value is the same; an NPU compiler (Vela) runs RESCALE(i8 → i32, zp) → MUL → RESCALE as one
    int8 MUL with zero points, and a MUL by a folded i32 constant as costlier 32-bit passes."""
    if x.dtype is not DType.INT8 or not x.is_const:
        return widen(b, x, zp)
    return _unfolded(b, lambda: rescale(b, x, 1.0, DType.INT32, in_zp=zp, double_round=False))


def _unfolded(b: Builder, make: Callable[[], Value]) -> Value:
    """The op ``make`` emits, built and kept as an op although its operands are constants (``keep_unfolded``)."""
    fold, b.fold = b.fold, False
    try:
        r = make()
    finally:
        b.fold = fold
    assert r.producer is not None
    b.context.passes.of(b.graph).keep_unfolded.append(r.producer.id)
    return r


def widen_scaled(b: Builder, x: Value, zp: int, left_shift: int, scale: float,
                 single: tuple[int, int, str] | None = None) -> Value:
    """``RESCALE((x - zp)·2^left_shift, scale)`` to i32, TFLite's ADD/SUB input stage (spec: RESCALE).

    For an i8 input one RESCALE does both steps when some (multiplier, shift) gives the same result on all 256
    codes (:func:`.rescale.merged_widen_rescale` checks every code): always for the input of the larger scale,
    whose factor ``s / (2·max_s)`` is exactly 1/2.  ``single`` gives that one RESCALE's parameters instead (found
    by :func:`add_sub_inputs`, exact on the ADD's output).  Otherwise the two RESCALEs stay.
    """
    if x.dtype is DType.INT8:
        merged = single or merged_widen_rescale(np.arange(-128, 128), zp, left_shift, scale, rounding_mode(b))
        if merged is not None:
            mult, shift, mode = merged
            return rescale_raw(b, x, [mult], [shift], DType.INT32, in_zp=zp, double_round=mode == "DOUBLE_ROUND")
    return requant(b, widen(b, x, zp, left_shift), scale, DType.INT32)


def add_sub_inputs(b: Builder, x: Value, y: Value, q1: tuple[float, int], q2: tuple[float, int],
                   qo: tuple[float, int], bounds: tuple[int, int], subtract: bool) -> tuple[Value, Value, float]:
    """The two i32 inputs of TFLite's int8 ADD/SUB (``(x - zp)·2^20`` by ``s_i / (2·max_s)``) and the output
    factor ``2·max_s / (2^20·s_out)``.

    Each input is one RESCALE where :func:`.rescale.joint_add_rescales` finds one that keeps the int8 output equal
    to TFLite's reference (:func:`.tflite_reference.add_sub_i8`, clamped to ``bounds``) on all 65536 code pairs;
    an NPU compiler (Vela) fuses a pair of such RESCALEs into the ADD.  Otherwise the input keeps the two steps.
    When both inputs are one RESCALE, that of a constant input (a BatchNorm's offset) stays a RESCALE of the int8
    constant rather than an i32 constant: Vela fuses an ADD's input RESCALEs only when both inputs have one
    (densenet_mini: each BatchNorm ADD's other RESCALE ran as its own pass, 1.096 M -> 0.795 M cycles).
    """
    f1, f2, fo = add_sub_factors(q1[0], q2[0], qo[0], 20)
    singles = _add_sub_singles(q1, q2, qo, tuple(bounds), subtract, rounding_mode(b))
    both = singles[0] is not None and singles[1] is not None

    def stage(v: Value, zp: int, f: float, single: tuple[int, int, str] | None) -> Value:
        if both and v.dtype is DType.INT8 and v.is_const:
            return _unfolded(b, lambda: widen_scaled(b, v, zp, 20, f, single))
        return widen_scaled(b, v, zp, 20, f, single)

    return stage(x, q1[1], f1, singles[0]), stage(y, q2[1], f2, singles[1]), fo


@functools.lru_cache(maxsize=4096)
def add_sub_factors(s1: float, s2: float, so: float, left_shift: int) -> tuple[float, float, float]:
    """TFLite's quantized ADD/SUB factors (in float32 scales): each input's ``s_i / (2·max_s)`` and the output's
    ``2·max_s / (2^left_shift·s_out)`` (left_shift 20 for int8, 15 for int16), kept per argument (the ADDs of a
    model share a few quantizations; each factor is a few numpy scalar operations)."""
    twice = 2.0 * max(f32(s1), f32(s2))
    return f32(s1) / twice, f32(s2) / twice, twice / ((1 << left_shift) * f32(so))


@functools.lru_cache(maxsize=4096)
def _add_sub_singles(q1: tuple[float, int], q2: tuple[float, int], qo: tuple[float, int], bounds: tuple[int, int],
                     subtract: bool, mode: str) -> tuple[tuple[int, int, str] | None, tuple[int, int, str] | None]:
    """The one-RESCALE input stages of :func:`add_sub_inputs` (None: the input keeps two steps), a function of the
    quantizations only, so ADDs that share them share the 65,536-pair search (the BatchNorm ADDs of one DenseNet
    block: 62 ADDs, 13 distinct quantizations)."""
    (s1, z1), (s2, z2), (so, zo) = q1, q2, qo
    if mode != "DOUBLE_ROUND":
        return None, None
    f1, f2, fo = add_sub_factors(s1, s2, so, 20)
    multipliers = R.add_sub_multipliers_i8(s1, s2, so)
    m1, m2, (mo, eo) = multipliers
    # TFLite's input stages on every code, made once: R.add_sub_i8 on a grid is its output stage on these, indexed
    (t1, p1), (t2, p2) = _input_stage(z1, *m1), _input_stage(z2, *m2)
    stages = (t1, t2)

    def want(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
        """TFLite's results on a grid of code pairs (a column of first-input codes, a row of second-input codes)."""
        return _output_stage(t1[xs + 128], t2[ys + 128], mo, eo, zo, subtract, bounds, p1 + p2)

    holds = two_step_is_tflite_add((s1, z1), (s2, z2), so, (f1, f2), fo, stages=stages, multipliers=multipliers,
                                   peaks=(p1, p2))
    found = joint_add_rescales((z1, z2), (f1, f2), 20, fo, zo, bounds, subtract, want, mode, two_step_holds=holds)
    return (found[0], found[1]) if found else (None, None)


#: the 256 int8 codes (:func:`_input_stage`)
_CODES = np.arange(-128, 128, dtype=np.int64)
_CODES.flags.writeable = False


def _input_stage(zp: int, q: int, shift: int) -> tuple[np.ndarray, int]:
    """TFLite's int8 ADD/SUB input stage on the 256 codes, ``R.mbqm((code - zp) << 20, q, shift)``, and the largest
    magnitude among its values.  For a multiplier below one (``0 < q < 2^31``, ``shift <= 0``: every ADD/SUB input's,
    ``s_i / (2·max_s) <= 1/2``) and ``|code - zp| < 2^11`` in fewer passes with the same values (``tests/
    test_quant_fastpaths.py`` holds it to ``R.mbqm``): ``(code - zp)·2^20`` fits int32, so mbqm's wrap32 leaves it as
    it is, and ``(code - zp)·2^20·q`` fits int64; srdhm and rdbpot as ``R._mbqm_scalar`` makes them.  Those values
    are nondecreasing in the code (each step is, for ``q > 0``): the largest magnitude is at an end."""
    d = _CODES - zp
    if not (0 < q < 1 << 31 and -31 <= shift <= 0 and -1900 < zp < 1900):
        v = R.mbqm(d << 20, q, shift)
        return v, int(np.abs(v).max())
    v = d * (q << 20)
    v += 1 << 30  # srdhm: floor((x·q + 2^30) / 2^31)
    v >>= 31
    e = -shift
    if e:  # rdbpot by e: (v + 2^(e-1) - [v < 0]) >> e
        v += v >> 63
        v += 1 << (e - 1)
        v >>= e
    return v, max(-int(v[0]), int(v[-1]), 0)


def _output_stage(a: np.ndarray, c: np.ndarray, q: int, shift: int, zp: int, subtract: bool,
                  bounds: tuple[int, int], peak: int) -> np.ndarray:
    """``R.add_sub_output_i8(a, c, q, shift, zp, subtract, bounds)`` for input stage values of magnitude at most
    ``peak`` together (``|a| + |c| <= peak``), broadcast.  With ``peak < 2^31``, ``0 < q < 2^31`` and ``shift <= 0``
    in fewer passes with the same values (``tests/test_quant_fastpaths.py`` holds it to the reference): the sum fits
    int32 (wrap32 leaves it), ``sum·q`` fits int64, and ``zp`` is added inside rdbpot's shift as ``zp·2^e`` (a
    multiple of 2^e moves the floor by ``zp`` exactly)."""
    if not (peak < 1 << 31 and 0 < q < 1 << 31 and -31 <= shift <= 0):
        return R.add_sub_output_i8(a, c, q, shift, zp, subtract, bounds)
    v = a - c if subtract else a + c
    v *= q
    v += 1 << 30  # srdhm
    v >>= 31
    e = -shift
    if e:  # rdbpot, with zp
        v += v >> 63
        v += (1 << (e - 1)) + (zp << e)
        v >>= e
    else:
        v += zp
    np.maximum(v, bounds[0], out=v)
    return np.minimum(v, bounds[1], out=v)


def two_step_is_tflite_add(q1: tuple[float, int], q2: tuple[float, int], so: float, factors: tuple[float, float],
                           fo: float, *, stages: tuple[np.ndarray, np.ndarray] | None = None,
                           multipliers: tuple[tuple[int, int], ...] | None = None,
                           peaks: tuple[int, int] | None = None) -> bool:
    """Whether the DOUBLE_ROUND two-step form of an int8 ADD/SUB (each input ``(x - zp)·2^20`` then RESCALE by its
    factor, the i32 sum or difference, RESCALE by ``fo``) gives TFLite's result on all 65,536 code pairs, shown
    without them; False when this cheap proof does not apply (the caller then checks the pairs).

    Each input stage is compared with TFLite's on its 256 codes.  TFLite's output stage (MBQM by ``q``, shift
    ``-e`` with ``e`` in 1..31: srdhm, then rdbpot by ``e``) equals apply_scale_32's DOUBLE_ROUND by ``q`` and
    ``31 + e`` on every int32 sum ``s``: nesting the two floor divisions, both are ``floor((s·q + 2^30 + 2^(30+e)
    - 2^31·[t < 0]) / 2^(31+e))``, with ``t`` the srdhm result in TFLite and ``s`` itself in TOSA; for
    ``2^30 < q < 2^31``, ``t < 0`` exactly when ``s < 0``, and for ``q = 2^30`` they differ only at ``s = -1``,
    where both numerators lie in ``[0, 2^(31+e))`` (both results 0).  The sums fit int32 (no wrap) when the
    largest input values do; the out_zp and the clamp are the same in both.  ``stages``: TFLite's input stages on
    the 256 codes (``mbqm((code - zp) << 20, q, e)`` per input) when the caller has them, ``multipliers``
    ``R.add_sub_multipliers_i8(q1[0], q2[0], so)`` and ``peaks`` the largest magnitude of each stage's values."""
    (m1, m2, (qo, eo)) = multipliers or R.add_sub_multipliers_i8(q1[0], q2[0], so)
    om, osh = multiplier32(fo)
    if om != qo or not 1 <= -eo <= 31 or osh != 31 - eo or not (1 << 30) <= qo < (1 << 31):
        return False
    codes = R.codes(8)
    peak = 0
    for i, ((_, zp), (q, e), f) in enumerate(zip((q1, q2), (m1, m2), factors)):
        tfl = R.mbqm((codes - zp) << 20, q, e) if stages is None else stages[i]
        if not np.array_equal(two_step_codes(int(zp), 20, float(f), "DOUBLE_ROUND"), tfl):
            return False
        peak += int(np.abs(tfl).max()) if peaks is None else peaks[i]
    return peak < 1 << 31


def table8(b: Builder, x: Value, table: np.ndarray, q: QuantParams) -> Value:
    """``TABLE`` i8 with entry ``v + 128`` for code ``v`` (spec: TABLE)."""
    return apply_table_i8(b, x, np.asarray(table).astype(np.int8), q)


def gather_table(b: Builder, index: Value, values: np.ndarray, dtype: DType, q: QuantParams | None = None) -> Value:
    """``values[index]`` elementwise for an i32 ``index`` tensor: GATHER over a [1, K, 1] table (spec: GATHER)."""
    shape = [int(d) for d in index.shape]
    n = int(np.prod(shape)) if shape else 1
    table = b.const(np.asarray(values).reshape(1, -1, 1), dtype, name="lut")
    g = b.emit("GATHER", [table, b.reshape(index, [1, n])]).result
    return tag(b.reshape(g, shape), q)


#: below this many elements one GATHER costs an NPU less than the ~17 elementwise ops of :func:`table_i32_bytes`
#: (Vela 5.2 on ethos-u85-256: GATHER ~40 cycles per element, an elementwise op ~80 cycles plus ~1 per element)
BYTE_TABLE_MIN_ELEMENTS = 64


#: from this many elements on, two i16 TABLEs cost an Ethos-U85 less than four i8 TABLEs (Vela 5.2: a 100-element
#: softmax row 1.5 k cycles more, 512 elements 4.6 k fewer, 20,480 elements 84 k fewer)
I16_TABLE_MIN_ELEMENTS = 256


def lookup_i32(b: Builder, d: Value, values: np.ndarray, idx: Value | None = None) -> tuple[Value, Value | None]:
    """``values[d]`` for an i32 index ``d`` in [0, 256): byte-split TABLEs on large tensors (from
    ``I16_TABLE_MIN_ELEMENTS`` on, two i16 TABLEs for a target with ``i16_tables``), one GATHER on small ones (all
    exact; the cheaper per case).  Returns the result and the TABLE index to reuse for another lookup of the same
    ``d`` (i8 for the byte TABLEs, i16 for the halves; None with GATHER)."""
    n = int(np.prod([int(x) for x in d.shape])) if d.shape else 1
    if n < BYTE_TABLE_MIN_ELEMENTS:
        return gather_table(b, d, values, DType.INT32), None
    target = b.context.target()
    if target is not None and target.i16_tables and n >= I16_TABLE_MIN_ELEMENTS:
        x16 = idx if idx is not None else index16(b, d)
        return table_i32_halves(b, x16, values), x16
    idx8 = idx if idx is not None else byte_index(b, d)
    return table_i32_bytes(b, idx8, values), idx8


#: from this many elements on, :func:`index16` builds a row-maximum index from the int8 tensors by RESCALEs (Vela
#: 5.2 on ethos-u85-256: 20,480 elements 15.4 k cycles fewer, 3,402 5.3 k fewer; 1,024 228 more, 512 362 more, where
#: Vela runs the i16 RESCALE in the first TABLE's pass, reading i32)
INDEX_PAIR_MIN_ELEMENTS = 2048


def index16(b: Builder, d: Value) -> Value:
    """An i32 index ``d`` in [0, 256) as the i16 TABLE input ``(d - 128)·256`` (:func:`table_i32_halves` reads
    entry ``2·d`` of it with fraction 0).

    For a ``d`` made by :func:`row_max_index` of an int8 tensor (``SUB(CAST(max), CAST(x))``) of at least
    ``INDEX_PAIR_MIN_ELEMENTS`` elements it is
    ``RESCALE_i16(SUB(RESCALE(max, input_zp 64), RESCALE(x, input_zp -64)), ×256)``: the two i8 → i32 RESCALEs
    of scale 1 give ``max - 64`` and ``x + 64``, so the SUB gives ``d - 128`` in [-128, 127] and the last
    RESCALE multiplies by 256 (all exact).  Vela fuses RESCALEs into both inputs of a SUB and onto its output, so
    the index is one pass reading the int8 tensors, as its own softmax's subtraction is (deeplab_v3_mini
    457,962 → 442,526 cycles: the CASTs and the ADD of :func:`offset_index` go).  Otherwise
    ``RESCALE_i16(offset_index(d), ×256)``."""
    sources = _int8_row_max_sources(d)
    if sources is not None and int(np.prod([int(v) for v in d.shape])) >= INDEX_PAIR_MIN_ELEMENTS:
        top, x = sources
        off = b.binary("SUB", rescale_raw(b, top, [1 << 30], [30], DType.INT32, in_zp=64, double_round=False),
                       rescale_raw(b, x, [1 << 30], [30], DType.INT32, in_zp=-64, double_round=False))
    else:
        off = offset_index(b, d)
    return rescale_raw(b, off, [1 << 30], [22], DType.INT16, double_round=False)


def _int8_row_max_sources(d: Value) -> tuple[Value, Value] | None:
    """(max, x), the int8 tensors of a :func:`row_max_index` ``d = SUB(CAST(max), CAST(x))``; else None."""
    if not _is_row_max_index(d):
        return None
    assert d.producer is not None
    sources = []
    for v in d.producer.operands[:2]:
        cast = v.producer
        if cast is None or cast.opcode != "CAST" or cast.operands[0].dtype is not DType.INT8:
            return None
        sources.append(cast.operands[0])
    return sources[0], sources[1]


def table_i32_halves(b: Builder, x16: Value, values: np.ndarray) -> Value:
    """``values[x16 / 256 + 128]`` (256 int32 entries) as two i16 TABLEs (EXT-INT16), one per 16-bit half.

    The index ``x16`` is a multiple of 256 (:func:`index16`), so the TABLE reads entry ``x16 / 128 + 256``
    with fraction 0 and returns ``entry << 7`` (spec 1.12.5 apply_lookup_s); each value is stored twice in a row,
    so the slope of every pair a lookup reads is 0 (apply_lookup_s REQUIREs it to fit int16, which two random low
    halves need not).  The high half (signed) comes back by LOGICAL_LEFT_SHIFT 9, the low half by an exact
    ARITHMETIC_RIGHT_SHIFT 7 and BITWISE_AND 0xFFFF, joined by BITWISE_OR: the same bits as
    :func:`table_i32_bytes`' four i8 TABLEs, in half the lookups (deeplab_v3_mini on Vela: 655 k → 480 k cycles).
    """
    u = _int32_table(values, "a two-half table") & 0xFFFFFFFF

    def half(v: np.ndarray) -> Value:
        entries = np.append(np.repeat(((v ^ 0x8000) - 0x8000).astype(np.int16), 2), np.int16(0))  # 513
        return b.emit("TABLE", [x16, b.const(entries, DType.INT16, name="table")]).result

    high, low = half(u >> 16), half(u & 0xFFFF)
    top = b.binary("LOGICAL_LEFT_SHIFT", high, const(b, 9, high))
    low = b.emit("ARITHMETIC_RIGHT_SHIFT", [low, const(b, 7, low)], {"round": False}).result
    return b.binary("BITWISE_OR", top, b.binary("BITWISE_AND", low, const(b, 0xFFFF, low)))


def byte_index(b: Builder, d: Value) -> Value:
    """An i32 index ``d`` in [0, 256) as the i8 input ``d - 128`` of :func:`table_i32_bytes` (ADD, CAST).

    A ``d`` made by :func:`row_max_index` (``SUB(max, x)``, the maximum broadcast over its row) is rebuilt as
    ``SUB(max - 128, x)``: the -128 is added to the row maxima instead of to every element (both in [-256, 255],
    exact), and the SUB of ``d`` itself goes unless something else reads it (deeplab_v3_mini's softmax: one i32
    pass over 20,480 elements, 20 k cycles on Vela)."""
    return b.cast(offset_index(b, d), DType.INT8)


def offset_index(b: Builder, d: Value) -> Value:
    """``d - 128`` in i32, built as :func:`byte_index` describes (the -128 on the row maxima where it can)."""
    if _is_row_max_index(d):
        assert d.producer is not None
        top, x = d.producer.operands
        return b.binary("SUB", b.binary("ADD", top, const(b, -128, top)), x)
    return b.binary("ADD", d, const(b, -128, d))


def _is_row_max_index(d: Value) -> bool:
    """``d`` is ``SUB(CAST(max), x)`` with the maximum a narrow (≤ 16-bit) tensor broadcast over ``d``'s rows, as
    :func:`row_max_index` makes it (so ``max - 128`` cannot leave int32)."""
    sub = d.producer
    if sub is None or sub.opcode != "SUB" or not d.type.is_static:
        return False
    top = sub.operands[0]
    cast = top.producer
    return cast is not None and cast.opcode == "CAST" and cast.operands[0].dtype.bits <= 16 and top.type.is_static \
        and int(np.prod([int(v) for v in top.shape])) < int(np.prod([int(v) for v in d.shape]))


def _int32_table(values: np.ndarray, what: str) -> np.ndarray:
    """``values`` as 256 int64 entries, each an int32 value (else Unsupported naming ``what``)."""
    vals = np.asarray(values, dtype=np.int64).reshape(-1)
    if vals.shape != (256,) or vals.min() < -(1 << 31) or vals.max() >= 1 << 31:
        raise Unsupported(f"{what} needs 256 int32 entries, got shape {list(vals.shape)}")
    return vals


def table_i32_bytes(b: Builder, idx8: Value, values: np.ndarray, q: QuantParams | None = None) -> Value:
    """``values[idx8 + 128]`` (256 int32 entries) for an i8 index, as PRO-INT TABLEs, one per byte of the values.

    Same result as :func:`gather_table` over ``d = idx8 + 128``, in ops an NPU runs as lookups rather than as a
    gather (Vela's GATHER on Ethos-U85 costs ~100 cycles per element).  The values are split into ``n`` bytes, the
    fewest that hold them as ``n``-byte two's complement numbers: the top byte is a signed i8 table (CAST
    sign-extends it, exact), the others unsigned (CAST then BITWISE_AND 255); LOGICAL_LEFT_SHIFT by ``8k`` and
    BITWISE_OR put them together (bit operations: no overflow, spec: LOGICAL_LEFT_SHIFT, BITWISE_OR).
    """
    vals = _int32_table(values, "a byte-split table")
    n = next(k for k in (1, 2, 3, 4) if vals.min() >= -(1 << (8 * k - 1)) and vals.max() < 1 << (8 * k - 1))
    u = vals & 0xFFFFFFFF
    acc: Value | None = None
    for k in range(n):
        byte = (u >> (8 * k)) & 0xFF
        if k < n - 1 and not byte.any():
            continue
        part = b.cast(apply_table_i8(b, idx8, (byte ^ 0x80).astype(np.int64) - 0x80, None), DType.INT32)
        if k < n - 1:
            part = b.binary("BITWISE_AND", part, const(b, 0xFF, part))
        if k:
            part = b.binary("LOGICAL_LEFT_SHIFT", part, const(b, 8 * k, part))
        acc = part if acc is None else b.binary("BITWISE_OR", acc, part)
    if acc is None:  # every entry 0
        acc = b.binary("BITWISE_AND", b.cast(idx8, DType.INT32), const(b, 0, idx8))
    return tag(acc, q)


def lut16(b: Builder, x: Value, table: np.ndarray, q: QuantParams) -> Value:
    """An int16 elementwise function as one 65536-entry lookup: ``table[x + 32768]``."""
    idx = b.binary("ADD", b.cast(x, DType.INT32), const(b, 32768, x))
    return gather_table(b, idx, table, DType.INT16, q)


def lut_pair8(b: Builder, x: Value, y: Value, table: np.ndarray, q: QuantParams) -> Value:
    """An int8 binary function of (x, y) as one 65536-entry lookup ``table[(x + 128)·256 + y + 128]``."""
    x32, y32 = b.cast(x, DType.INT32), b.cast(y, DType.INT32)
    hi = b.binary("ADD", b.mul(x32, const(b, 256, x32)), const(b, 128 * 256 + 128, x32))
    return gather_table(b, b.binary("ADD", hi, y32), table, DType.INT8, q)


# --------------------------------------------------------------------------------- fixed-point in TOSA ops
class Fx:
    """gemmlowp int32 fixed-point primitives as TOSA ops; each mirrors the numpy one in :mod:`.tflite_reference`."""

    def __init__(self, b: Builder, rank: int) -> None:
        self.b = b
        self.shape1 = (1,) * rank

    def c(self, v: int | Sequence[int] | np.ndarray) -> Value:
        """An i32 constant broadcast to the rank: a scalar, or per-channel values along the last axis ([rows,
        channels]: per row along the first axis too)."""
        arr = np.asarray(v, np.int64)
        if arr.ndim == 0:
            return self.b.const(np.full(self.shape1, int(arr)), DType.INT32)
        if arr.ndim == 2:
            return self.b.const(arr.reshape(arr.shape[:1] + self.shape1[1:-1] + arr.shape[1:]), DType.INT32)
        return self.b.const(arr.reshape(self.shape1[:-1] + (arr.size,)), DType.INT32)

    def _v(self, v: Value | int) -> Value:
        return v if isinstance(v, Value) else self.c(v)

    def add(self, a: Value | int, c: Value | int) -> Value:
        return self.b.binary("ADD", self._v(a), self._v(c))

    def sub(self, a: Value | int, c: Value | int) -> Value:
        return self.b.binary("SUB", self._v(a), self._v(c))

    def mul(self, a: Value, c: Value | int) -> Value:
        """MUL with shift 0 (the low 32 bits of the product, spec: MUL)."""
        return self.b.mul(a, self._v(c), 0)

    def band(self, x: Value, m: int) -> Value:
        return self.b.binary("BITWISE_AND", x, self.c(m))

    def lt0(self, x: Value) -> Value:
        return self.gt(0, x)

    def mulhi(self, a: Value | int, c: Value | int) -> Value:
        """srdhm: MUL with shift 31 rounds ``a·c / 2^31`` half up, as the nudge does (spec: MUL)."""
        return self.b.mul(self._v(a), self._v(c), 31)

    def shr(self, x: Value, k: Value | int, rnd: bool = False) -> Value:
        """ARITHMETIC_RIGHT_SHIFT (``rnd``: half up, spec: ARITHMETIC_RIGHT_SHIFT)."""
        return self.b.binary("ARITHMETIC_RIGHT_SHIFT", x, self._v(k), round=rnd)

    def rdbpot(self, x: Value, e: Value | int, nonneg: bool = False) -> Value:
        """RoundingDivideByPOT (half away from zero) = ARS-with-round of ``x - (x < 0)``."""
        if isinstance(e, int) and e == 0:
            return x
        if not nonneg:
            x = self.add(x, self.shr(x, 31))
        return self.shr(x, e, rnd=True)

    def where(self, cond: Value, a: Value | int, c: Value | int) -> Value:
        c_, t, f = self.b.broadcast_ranks(cond, self._v(a), self._v(c))
        return self.b.emit("SELECT", [c_, t, f]).result

    def gt(self, a: Value | int, c: Value | int) -> Value:
        return self.b.binary("GREATER", self._v(a), self._v(c))

    def sat_shl(self, x: Value, k: Value | int) -> Value:
        """SaturatingRoundingMultiplyByPOT(Param) for an exponent ``k >= 0``."""
        if isinstance(k, int):
            if k == 0:
                return x
            thr: Value = self.c((1 << (31 - k)) - 1)
        else:
            thr = self.shr(self.c(R.I32_MAX), k)  # (2^31 - 1) >> k == 2^(31-k) - 1
        shifted = self.b.binary("LOGICAL_LEFT_SHIFT", x, self._v(k))
        low = self.where(self.gt(self.sub(0, thr), x), R.I32_MIN, shifted)
        return self.where(self.gt(x, thr), R.I32_MAX, low)

    def clz(self, x: Value) -> Value:
        return self.b.clz(x)

    def rounding_half_sum(self, a: Value, c: Value | int) -> Value:
        """(a + c + sign) / 2 without a 64-bit sum: halves, then the carry of the two low bits."""
        c = self._v(c)
        s = self.add(self.shr(a, 1), self.shr(c, 1))
        la = self.b.binary("BITWISE_AND", a, self.c(1))
        lc = self.b.binary("BITWISE_AND", c, self.c(1))
        carry = self.where(self.gt(0, s), self.b.binary("BITWISE_AND", la, lc),
                           self.b.binary("BITWISE_OR", la, lc))
        return self.add(s, carry)


def one_over_one_plus_x(fx: Fx, a: Value, in_0_1: bool = False) -> Value:
    """gemmlowp one_over_one_plus_x_for_x_in_0_1 (Newton-Raphson, 3 iterations), see tflite_reference.

    ``in_0_1``: the caller guarantees ``0 <= a < 2^31`` (the kernel's own precondition, which GetReciprocal meets).
    Then, checked exhaustively over all 2^31 values of ``a`` (``tests/test_rules_math_q.py``, slow marker), none of
    the saturating steps saturates except the last one at ``x = 2^30``, and their SELECTs go:

    * RoundingHalfSum(a, 2^31 - 1) = (a + 2^31) / 2 = (a >> 1) + 2^30 (the sum is positive, the carry always 1);
    * the three ``Rescale<2>`` of ``x · (1 - d·x)`` see values in [-11296864, 14861479], far inside ±2^29, so a
      plain LOGICAL_LEFT_SHIFT by 2 is exact;
    * the final x lies in [2^29 - 2, 2^30]: the doubling saturates only at 2^30 (a = 0, a sum of exps that is a
      power of two), where ``x << 1`` is the bit pattern -2^31; ``s XOR (s >> 31)`` maps that one value to
      2^31 - 1 and leaves every non-negative ``s`` alone, no comparison.

    Vela runs each SELECT as 3–4 elementwise passes plus its GREATER; the int8 softmax loses 9 SELECTs.
    """
    if in_0_1:
        half_den = fx.add(fx.shr(a, 1), 1 << 30)
    else:
        half_den = fx.rounding_half_sum(a, R.I32_MAX)
    x = fx.add(1515870810, fx.mulhi(half_den, -1010580540))
    for _ in range(3):
        one_minus = fx.sub(1 << 29, fx.mulhi(half_den, x))
        step = fx.mulhi(x, one_minus)
        x = fx.add(x, fx.b.binary("LOGICAL_LEFT_SHIFT", step, fx.c(2)) if in_0_1 else fx.sat_shl(step, 2))
    if in_0_1:
        doubled = fx.b.binary("LOGICAL_LEFT_SHIFT", x, fx.c(1))  # the bit pattern 2^31 exactly when x = 2^30
        return fx.b.binary("BITWISE_XOR", doubled, fx.shr(doubled, 31))  # ... which XOR -1 turns into 2^31 - 1
    return fx.sat_shl(x, 1)


def get_reciprocal(fx: Fx, x: Value, integer_digits: int) -> tuple[Value, Value]:
    """TFLite GetReciprocal of a positive i32 ``x``: (Q0.31 reciprocal, num_bits_over_unit)."""
    hp1 = fx.clz(x)
    # (uint32)x << hp1 has its top bit set; minus 2^31 is the i32 pattern plus 2^31 (no overflow), in [0, 2^31)
    shifted_minus_one = fx.sub(fx.b.binary("LOGICAL_LEFT_SHIFT", x, hp1), R.I32_MIN)
    return one_over_one_plus_x(fx, shifted_minus_one, in_0_1=True), fx.sub(integer_digits, hp1)


def log_x_ge_1(fx: Fx, x: Value, out_bits: int, in_bits: int) -> Value:
    """TFLite log_x_for_x_greater_than_or_equal_to_1_impl<out_bits, in_bits> (see tflite_reference)."""
    log_2, sqrt_sqrt_half, sqrt_half, one_quarter = 1488522236, 1805811301, 1518500250, 536870912
    alpha_n, alpha_d, alpha_i, alpha_f = 117049297, 127690142, 1057819769, 638450708
    accum = out_bits + 1
    shifted_quarter = int(R.rdbpot(one_quarter, accum))
    hp1 = fx.clz(x)
    r_a = fx.sat_shl(fx.mulhi(fx.sat_shl(x, fx.sub(hp1, 1)), sqrt_half), 1)
    # the saturating adds of z_a_adj / z_b_adj cannot saturate: |in_bits - clz| <= 32, shifted by 31 - accum
    z_a_adj = fx.add(fx.sat_shl(fx.sub(in_bits, hp1), 31 - accum), shifted_quarter)
    z_b_headroom = fx.sub(fx.clz(fx.mulhi(x, sqrt_half)), 1)
    r_b = fx.sat_shl(x, z_b_headroom)
    z_b_adj = fx.sub(fx.sat_shl(fx.sub(in_bits, z_b_headroom), 31 - accum), shifted_quarter)
    r = fx.b.binary("MINIMUM", r_a, r_b)
    z_adj = fx.b.binary("MAXIMUM", z_a_adj, z_b_adj)
    p = fx.rounding_half_sum(r, sqrt_sqrt_half)
    q = fx.sub(r, sqrt_sqrt_half)
    q = fx.add(q, q)
    common_sq = fx.mulhi(q, q)
    num = fx.add(fx.mulhi(q, r), fx.mulhi(fx.mulhi(q, common_sq), alpha_n))
    denom = fx.add(fx.mulhi(p, fx.add(fx.add(alpha_i, q), fx.mulhi(alpha_d, common_sq))), fx.mulhi(alpha_f, q))
    recip = one_over_one_plus_x(fx, denom)
    num_scaled = fx.rdbpot(num, accum)
    return fx.sat_shl(fx.add(fx.mulhi(z_adj, log_2), fx.mulhi(num_scaled, recip)), 1)


def row_max_index(b: Builder, x: Value, axis: int) -> tuple[Value, Value]:
    """(``max - x`` in i32 in [0, 2^bits), the row max) for softmax-like kernels over ``axis``."""
    m = _row_max(b, x, axis)
    return b.binary("SUB", b.cast(m, DType.INT32), b.cast(x, DType.INT32)), m


#: the longest row (MAX_POOL2D kernel height) :func:`_row_max` pools: Vela's limit for a pool's kernel height
POOLED_ROW_MAX_C = 256


def _row_max(b: Builder, x: Value, axis: int) -> Value:
    """The max over ``axis`` with the axis kept (size 1): REDUCE_MAX, or, for a target whose
    ``row_max_by_pool`` is set (Ethos-U) and an int8 ``x`` of several rows over its last axis, the rows as
    channels: RESHAPE [1, N, C] → TRANSPOSE [1, C, N] → RESHAPE [1, C, 1, N] → MAX_POOL2D kernel [C, 1] (for
    a [1, H, W, C] ``x``, TRANSPOSE [1, C, H, W] → MAX_POOL2D kernel [C, 1], without the RESHAPEs).  The same
    maximum (spec 2.3.8 MAX_POOL2D); Vela runs the pool over N channels at once where its REDUCE_MAX over a short
    last axis walks the rows (Vela's own softmax transposes the same way): deeplab_v3_mini 709,862 → 655,339
    cycles, vit_tiny 704,029 → 628,134.  A single row keeps REDUCE_MAX (the transpose costs more there)."""
    shape = [int(d) for d in x.shape] if x.type.is_static else []
    target = b.context.target()
    if shape and target is not None and target.row_max_by_pool and x.dtype is DType.INT8 \
            and axis == len(shape) - 1 and 1 < shape[-1] <= POOLED_ROW_MAX_C and int(np.prod(shape[:-1])) > 1:
        n, c = int(np.prod(shape[:-1])), shape[-1]
        if len(shape) == 4 and shape[0] == 1:
            # [1, H, W, C] → TRANSPOSE [1, C, H, W] → MAX_POOL2D kernel [C, 1]: no RESHAPE of x, which Vela runs
            # as a memory copy when x has other readers (deeplab_v3_mini 472,379 → 457,962 cycles, vit_tiny
            # 491,383 → 478,155)
            planes = b.transpose(x, [0, 3, 1, 2])
            pooled = b.max_pool2d(planes, kernel=[c, 1], stride=[1, 1], pad=[0, 0, 0, 0], nan_mode="PROPAGATE",
                                  quant=x.type.quant)
            return b.reshape(pooled, shape[:-1] + [1])
        rows = b.transpose(b.reshape(x, [1, n, c]), [0, 2, 1])
        pooled = b.max_pool2d(b.reshape(rows, [1, c, 1, n]), kernel=[c, 1], stride=[1, 1], pad=[0, 0, 0, 0],
                              nan_mode="PROPAGATE", quant=x.type.quant)
        return b.reshape(pooled, shape[:-1] + [1])
    return b.emit("REDUCE_MAX", [x], {"axis": axis, "nan_mode": "PROPAGATE"}).result


def broadcast_to(b: Builder, v: Value, shape: Sequence[int]) -> Value:
    """Materialise numpy broadcasting of ``v`` to ``shape`` (ADD of zeros keeps every type; used for i32)."""
    if list(v.shape) == list(shape):
        return v
    return b.binary("ADD", v, b.const(np.zeros(shape, np.int32), DType.INT32))
