"""TFLite image ops → TOSA 1.0 RESIZE (resize_bilinear, resize_nearest_neighbor).

TOSA 1.0 RESIZE samples input row ``y = oy·d + offset`` in units of 1/n (spec 2.12.1 RESIZE) with
OH = ((IH−1)·n − offset + border) / d + 1 exactly (spec 2.12.1 RESIZE).  The parameters per axis follow op_inventory §4
#20
(checked by reference/checks/resize_params.py); the lowering doc's lower_resize_op uses the pre-1.0
stride/offset/shift form and is not followed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..quant.rescale import rescale, rescale_raw, rounding_mode
from ..tosa.builder import Builder
from .lowering.layout import const_ints, data_operand, keeps_values, static_shape
from .registry import legalize

#: enum name of nearest mode in TOSA 1.0 (text says NEAREST, the enum NEAREST_NEIGHBOR: spec 2.12.1 RESIZE vs spec 3.1
#: resize_mode_t)
NEAREST = "NEAREST_NEIGHBOR"
BILINEAR = "BILINEAR"


@dataclass(frozen=True)
class AxisParams:
    n: int
    d: int
    offset: int
    border: int


def resize_axis_params(in_size: int, out_size: int, align_corners: bool, half_pixel: bool,
                       nearest: bool) -> AxisParams:
    """scale_n, scale_d, offset, border for one axis so TOSA RESIZE matches TF/TFLite sampling (§4 #20).

    * align_corners (OH>1, IH>1): source = o·(IH−1)/(OH−1) → n=OH−1, d=IH−1, offset 0 (nearest rounds half up
      in both TFLite and TOSA's ``2·dy >= n`` rule, spec 2.12.1 RESIZE).
    * half_pixel_centers: source = (o+½)·IH/OH − ½ → n=OH/g, d=IH/g, offset=(d−n)/2 (doubled when odd).
      For NEAREST, TOSA's round-half-up of that equals TFLite's floor((o+½)·IH/OH).
    * default: source = o·IH/OH → n=OH/g, d=IH/g, offset 0; NEAREST floors, so offset −n/2 turns TOSA's
      round-half-up into a floor.
    * border = d·(OH−1) − n·(IH−1) + offset makes the output size exact (spec 2.12.1 RESIZE).
    """
    if align_corners and half_pixel:
        raise Unsupported("resize with both align_corners and half_pixel_centers")
    if align_corners and out_size > 1 and in_size > 1:
        g = math.gcd(out_size - 1, in_size - 1)
        n, d, off = (out_size - 1) // g, (in_size - 1) // g, 0
    else:
        g = math.gcd(out_size, in_size)
        n, d = out_size // g, in_size // g
        if half_pixel:
            if (d - n) % 2:
                n, d = 2 * n, 2 * d
            off = (d - n) // 2
        elif nearest:
            if n % 2:
                n, d = 2 * n, 2 * d
            off = -(n // 2)
        else:
            off = 0
    border = d * (out_size - 1) - n * (in_size - 1) + off
    # the spec's parameter ranges (spec 2.12.1 RESIZE)
    if n > 2048 or d >= 16 * n or not -n <= off < 16 * n or not -16 * n <= border < n:
        raise Unsupported(f"resize {in_size}->{out_size} needs scale {n}/{d}, offset {off}, border {border} "
                          "outside TOSA's RESIZE limits (S9224-9233)")
    if max(in_size, out_size) >= 16384:
        raise Unsupported("resize dimension >= 16384 (S9224)")
    return AxisParams(n, d, off, border)


def tosa_nearest_indices(in_size: int, out_size: int, p: AxisParams) -> np.ndarray:
    """Source index per output position under TOSA NEAREST (integer path of spec 2.12.1 RESIZE)."""
    y = np.arange(out_size, dtype=np.int64) * p.d + p.offset
    iy = np.floor_divide(y, p.n)
    ry = y - iy * p.n
    iy0, iy1 = np.maximum(iy, 0), np.minimum(iy + 1, in_size - 1)
    return np.where(2 * ry >= p.n, iy1, iy0)


def tflite_nearest_indices(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    """The source index TFLite's nearest kernel computes in float32 (GetNearestNeighbor; outside the seeds)."""
    f = np.float32
    if align_corners and out_size > 1:
        scale = f(in_size - 1) / f(out_size - 1)
    else:
        scale = f(in_size) / f(out_size)
    off = f(0.5) if half_pixel else f(0.0)
    v = (np.arange(out_size, dtype=np.float32) + off) * scale
    if align_corners:
        idx = np.floor(v + f(0.5)).astype(np.int64)  # round half away from zero (v >= 0)
    else:
        idx = np.floor(v).astype(np.int64)
    idx = np.minimum(idx, in_size - 1)
    return np.maximum(idx, 0)


def _gather_rows(b: Builder, x: Value, axis: int, idx: np.ndarray) -> Value:
    """Pick ``idx`` along axis 1 or 2 of an NHWC tensor with one GATHER (values [N', K, C'])."""
    n, h, w, c = static_shape(x)
    if axis == 1:
        outer, k, inner = n, h, w * c
    else:
        outer, k, inner = n * h, w, c
    values = b.reshape(x, [outer, k, inner])
    ind = b.const(np.tile(idx.astype(np.int32), (outer, 1)), DType.INT32)
    g = b.emit("GATHER", [values, ind], quant=x.type.quant).result
    shape = [n, h, w, c]
    shape[axis] = len(idx)
    return b.reshape(g, shape)


def _resize(b: Builder, op: Operation, nearest: bool) -> list[Value]:
    x = data_operand(b, op.operands[0])
    if x.type.rank != 4:
        raise Unsupported("resize input must be rank-4 NHWC")
    _, ih, iw, _ = static_shape(x)
    size = const_ints(op, 1, "size")
    if len(size) != 2 or min(size) < 1:
        raise Unsupported(f"resize size {size}")
    oh, ow = size
    align = bool(op.attrs.get("align_corners", False))
    half = bool(op.attrs.get("half_pixel_centers", False))
    if (oh, ow) == (ih, iw):
        return [x]  # every mode is the identity at equal sizes
    if x.dtype is DType.INT8 and not nearest:
        return [_resize_bilinear_i8(b, x, ih, iw, oh, ow, align, half)]
    if x.dtype is DType.INT16 and not nearest:
        return [_resize_bilinear_i16(b, x, ih, iw, oh, ow, align, half)]
    if x.dtype not in (DType.FP32, DType.FP16, DType.BF16) and not (nearest and x.dtype in (DType.INT8, DType.INT16)):
        raise Unsupported(f"resize of {x.dtype}")
    if nearest:
        # TFLite computes the source index in float32; where rounding makes it differ from the exact rational
        # index (ties, see op_inventory §7), or the ratio is outside RESIZE's limits, GATHERs along H and W
        # reproduce TFLite's indices exactly.
        iy_t, ix_t = tflite_nearest_indices(ih, oh, align, half), tflite_nearest_indices(iw, ow, align, half)
        try:
            py = resize_axis_params(ih, oh, align, half, True)
            px = resize_axis_params(iw, ow, align, half, True)
            exact = (np.array_equal(iy_t, tosa_nearest_indices(ih, oh, py))
                     and np.array_equal(ix_t, tosa_nearest_indices(iw, ow, px)))
        except Unsupported:
            exact = False
        if not exact:
            y = x if np.array_equal(iy_t, np.arange(ih)) else _gather_rows(b, x, 1, iy_t)
            y = y if np.array_equal(ix_t, np.arange(iw)) else _gather_rows(b, y, 2, ix_t)
            return [y]
    else:
        py = resize_axis_params(ih, oh, align, half, False)
        px = resize_axis_params(iw, ow, align, half, False)
    scale = b.shape([py.n, py.d, px.n, px.d], name="scale")
    offset = b.shape([py.offset, px.offset], name="offset")
    border = b.shape([py.border, px.border], name="border")
    y = b.emit("RESIZE", [x, scale, offset, border], {"mode": NEAREST if nearest else BILINEAR},
               quant=x.type.quant).result
    return [y]


def tflite_scale_10(in_size: int, out_size: int, align_corners: bool) -> int:
    """TFLite's integer bilinear step in 1/1024 pixels, rounded (ResizeBilinearInteger; outside the seeds)."""
    if align_corners and out_size > 1:
        return (1024 * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    return (1024 * in_size + out_size // 2) // out_size


def tflite_int_axis_params(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> AxisParams:
    """RESIZE parameters reproducing TFLite's integer bilinear grid exactly: n = 1024, d = scale_10,
    offset = scale_10/2 − 512 with half_pixel_centers (TFLite clamps negative positions to row 0 like
    TOSA's iy0/iy1 clamps, spec 2.12.1 RESIZE)."""
    if align_corners and half_pixel:
        raise Unsupported("resize with both align_corners and half_pixel_centers")
    d = tflite_scale_10(in_size, out_size, align_corners)
    n = 1024
    off = d // 2 - 512 if half_pixel else 0
    border = d * (out_size - 1) - n * (in_size - 1) + off
    if d < 1 or d >= 16 * n or not -n <= off < 16 * n or not -16 * n <= border < n:
        raise Unsupported(f"int8 resize {in_size}->{out_size} outside TOSA's RESIZE limits (S9224-9233)")
    return AxisParams(n, d, off, border)


def even_weights(p: AxisParams, out_size: int) -> bool:
    """Every interpolation weight of this axis is even: each ``dy = (o·d + offset) mod n`` (spec 2.12.1 RESIZE;
    ``n`` = 1024 is even, so ``n − dy`` has the parity of ``dy``)."""
    return all((o * p.d + p.offset) % 2 == 0 for o in range(out_size))


def _resize_bilinear_i8(b: Builder, x: Value, ih: int, iw: int, oh: int, ow: int, align: bool, half: bool) -> Value:
    """int8 bilinear, bit-exact with TFLite's ResizeBilinearInteger (10-bit positions, round half away from zero).

    RESIZE i8 → i32 gives Σ v·w with weights summing to n_y·n_x = 2^20 (spec 2.12.1 RESIZE).  TFLite
    divides by
    2^20 rounding half away from zero: floor((v + 2^19 − [v<0]) / 2^20).

    * When every weight of one axis is even (:func:`even_weights`: the products w_y·w_x, and so v, are even), one
      RESCALE i32 → i8 by 2^30 / 2^50 with DOUBLE_ROUND does it (spec 4.5.5 apply_scale_32: floor((v·2^30 + 2^49
      ± 2^30) / 2^50) = floor((v + 2^19 ± 1) / 2^20), + for v >= 0, − below): for v < 0 that is the formula
      above; for v >= 0 the extra 1 changes the floor only when v + 2^19 + 1 is a multiple of 2^20, which needs an
      odd v.  One pass on an NPU instead of ARITHMETIC_RIGHT_SHIFT + ADD + RESCALE.  Under ``--rounding single``
      (no DOUBLE_ROUND) the general form stays.
    * Otherwise: v + (v >> 31) (ARITHMETIC_RIGHT_SHIFT yields −1 for negatives), then a RESCALE i32 → i8 by
      2^11·2^-31 (SINGLE_ROUND, spec 4.5.5 apply_scale_32: floor((v'·2^11 + 2^30) / 2^31) = floor(v'/2^20 + ½),
      the values in range).
    The in/out quantization is the same (TFLite requires it), so no zero point is involved.
    """
    py = tflite_int_axis_params(ih, oh, align, half)
    px = tflite_int_axis_params(iw, ow, align, half)
    scale = b.shape([py.n, py.d, px.n, px.d], name="scale")
    offset = b.shape([py.offset, px.offset], name="offset")
    border = b.shape([py.border, px.border], name="border")
    acc = b.emit("RESIZE", [x, scale, offset, border], {"mode": BILINEAR}, out_dtype=DType.INT32).result
    if rounding_mode(b) == "DOUBLE_ROUND" and (even_weights(py, oh) or even_weights(px, ow)):
        return rescale_raw(b, acc, [1 << 30], [50], DType.INT8, out_quant=x.type.quant, double_round=True)
    sign = b.binary("ARITHMETIC_RIGHT_SHIFT", acc, b.const(np.full((1, 1, 1, 1), 31, np.int32), DType.INT32),
                    round=False)
    biased = b.binary("ADD", acc, sign)
    # RESCALE by 2^11 / 2^31, single rounding: floor((v' + 2^19) / 2^20), the rounding shift by 20, straight to i8
    # (in range, so no saturation); an NPU compiler fuses it into the ADD's output (Vela: one pass, not three)
    return rescale_raw(b, biased, [1 << 11], [31], DType.INT8, out_quant=x.type.quant, double_round=False)


def _resize_bilinear_i16(b: Builder, x: Value, ih: int, iw: int, oh: int, ow: int, align: bool,
                         half: bool) -> Value:
    """int16 bilinear, bit-exact with TFLite's ResizeBilinearInteger<int16_t> (same grid as int8, 64-bit sums).

    RESIZE i16 → i48 gives v = Σ w·x (weights sum to 2^20, EXT-INT16); RESCALE i48 → i32 by 2^-20 (16-bit
    multiplier 2^14, shift 34, spec 4.5.5: apply_scale_16) rounds half up: A = ⌊v/2^20 + ½⌋.  TFLite rounds half away
    from zero,
    which differs only at negative ties.  RESIZE of NOT x = −x − 1 gives −v − 2^20, so B = ⌊−v/2^20 − ½⌋ and
    NOT B = −B − 1 = ⌈v/2^20 − ½⌉ (half down).  The result is A where A > 0 (v > 0), else NOT B; the comparison and
    SELECT run in i32 (GREATER has no i16 row), then CAST to i16 (in range).
    """
    py = tflite_int_axis_params(ih, oh, align, half)
    px = tflite_int_axis_params(iw, ow, align, half)

    def interpolate(v: Value) -> Value:
        scale = b.shape([py.n, py.d, px.n, px.d], name="scale")
        offset = b.shape([py.offset, px.offset], name="offset")
        border = b.shape([py.border, px.border], name="border")
        acc = b.emit("RESIZE", [v, scale, offset, border], {"mode": BILINEAR}, out_dtype=DType.INT48).result
        return rescale(b, acc, 2.0 ** -20, DType.INT32, scale32=False)

    up = interpolate(x)
    down = b.emit("BITWISE_NOT", [interpolate(b.emit("BITWISE_NOT", [x]).result)]).result
    pos = b.emit("GREATER", [up, b.const(np.zeros((1, 1, 1, 1), np.int32), DType.INT32)]).result
    y = b.emit("SELECT", [pos, up, down]).result
    return b.emit("CAST", [y], out_dtype=DType.INT16, quant=x.type.quant).result


@legalize("tfl.resize_bilinear", dtypes=("fp32", "i8", "i16"), arity=2)
@keeps_values
def resize_bilinear(b: Builder, op: Operation) -> list[Value]:
    """RESIZE BILINEAR with scale/offset/border from align_corners / half_pixel_centers (§4 #20)."""
    return _resize(b, op, nearest=False)


@legalize("tfl.resize_nearest_neighbor", dtypes=("fp32", "i8", "i16"), arity=2)
@keeps_values
def resize_nearest_neighbor(b: Builder, op: Operation) -> list[Value]:
    """RESIZE NEAREST_NEIGHBOR; the default (floor) mode uses offset −n/2 (§4 #20), GATHER fallback at float ties."""
    return _resize(b, op, nearest=True)
