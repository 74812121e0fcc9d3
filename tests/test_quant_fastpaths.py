"""The quantization helpers' fast paths give what their general forms give.

``quant.scale._multiplier_arrays`` (many scales at once) against ``compute_scale_32`` / ``compute_scale_16`` per
scale, on scales that take its common-case path and on each edge it must leave to the general one: zero, negative,
infinite and NaN scales, mantissas that round up to 2^31, exponents at the flush (2^-32) and too-large (2^29) ends.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

from tf2tosa.errors import Unsupported
from tf2tosa.ir import DType, Graph, TensorType
from tf2tosa.quant.rescale import rescale
from tf2tosa.quant.scale import (
    FEW_SCALES,
    _multiplier_arrays,
    channel_pairs,
    compute_scale_16,
    compute_scale_32,
    quantize_multiplier_arrays,
)
from tf2tosa.tosa.builder import Builder
from tf2tosa.tosa.context import LegalizeContext

_EDGES = [0.0, -0.0, 2.0 ** -31, 2.0 ** -32, math.nextafter(2.0 ** -32, 0.0), 2.0 ** -33, 2.0 ** 28,
          math.nextafter(2.0 ** 29, 0.0), 2.0 ** 29, 1.0, 0.5, math.nextafter(1.0, 0.0),
          (1 - 2.0 ** -32) * 2.0 ** -5, (1 - 2.0 ** -33) * 2.0 ** -20, 1e-300, 5e-324]


def _reference(flat: np.ndarray, scale32: bool) -> tuple[np.ndarray, np.ndarray] | None:
    fn = compute_scale_32 if scale32 else compute_scale_16
    try:
        pairs = [fn(float(s)) for s in flat]
    except Unsupported:
        return None
    return (np.array([p[0] for p in pairs], dtype=np.int32 if scale32 else np.int16),
            np.array([p[1] for p in pairs], dtype=np.int8))


@pytest.mark.parametrize("scale32", [True, False])
def test_multiplier_arrays_match_per_scale(scale32: bool) -> None:
    rng = np.random.default_rng(7)
    sets = [rng.uniform(1e-6, 1e-1, 40), 2.0 ** rng.uniform(-34, 30, 64), rng.uniform(0.9, 1.1, FEW_SCALES + 1)]
    sets += [np.array([e] + list(rng.uniform(1e-4, 1e-2, FEW_SCALES))) for e in _EDGES]
    sets += [np.array(list(rng.uniform(1e-4, 1e-2, FEW_SCALES)) + [bad]) for bad in (-1e-3, math.inf, math.nan)]
    for flat in sets:
        flat = np.asarray(flat, dtype=np.float64)
        want = _reference(flat, scale32)
        got = _multiplier_arrays(flat, scale32)
        if got is None:  # (the general path then raises the scalar function's error)
            assert want is None or not np.all(np.isfinite(flat)) or np.any(flat < 0.0), flat
            continue
        assert want is not None, flat
        assert got[0].dtype == want[0].dtype and got[1].dtype == want[1].dtype
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("scale32", [True, False])
def test_channel_pairs_are_the_multiplier_arrays(scale32: bool) -> None:
    """``channel_pairs`` (a conv's per-channel requantization) gives ``quantize_multiplier_arrays``' pairs and
    errors, the largest shift and whether all channels share one pair, on the sets above and on equal scales."""
    rng = np.random.default_rng(9)
    sets = [rng.uniform(1e-6, 1e-1, 40), 2.0 ** rng.uniform(-34, 30, 64), np.full(FEW_SCALES + 3, 0.0123),
            np.array([0.5] * FEW_SCALES + [math.nextafter(0.5, 1.0)]), np.array([0.25] * FEW_SCALES + [0.5]),
            rng.uniform(0.9, 1.1, 3), np.full(2, 0.003)]
    sets += [np.array([e] + list(rng.uniform(1e-4, 1e-2, FEW_SCALES))) for e in _EDGES]
    sets += [np.array(list(rng.uniform(1e-4, 1e-2, FEW_SCALES)) + [bad]) for bad in (-1e-3, math.inf, math.nan)]
    for flat in sets:
        try:
            want = quantize_multiplier_arrays(flat, scale32)
        except Unsupported as e:
            with pytest.raises(Unsupported, match=re.escape(str(e))):
                channel_pairs(flat, scale32)
            continue
        mult, shift, top, same = channel_pairs(flat, scale32)
        assert mult.dtype == want[0].dtype and shift.dtype == want[1].dtype
        np.testing.assert_array_equal(mult, want[0])
        np.testing.assert_array_equal(shift, want[1])
        assert top == int(want[1].max())
        assert same == (len(set(want[0].tolist())) == 1 and len(set(want[1].tolist())) == 1), flat


def test_vouched_rescales_are_emitted_and_still_checked() -> None:
    """A RESCALE whose signature ``Builder.emit`` inferred and checked once gets the same result type without the
    checks (``Builder.emit_vouched``); values the validator refuses still go to it and are refused."""
    from tf2tosa.errors import InvalidGraphError
    from tf2tosa.ir import QuantParams
    from tf2tosa.quant.rescale import rescale_raw

    g = Graph()
    x = g.add_input("x", TensorType((1, 3, 5), DType.INT32))
    b = Builder(g, location="test")
    q = QuantParams((0.5,), (3,))
    ys = [rescale(b, x, s, DType.INT8, out_zp=3, out_quant=q) for s in (0.001, 0.002, 0.001)]
    ys.append(rescale_raw(b, x, [1 << 30], [40], DType.INT8, out_zp=-7, out_quant=q))
    for y in ys:
        assert y.type == TensorType((1, 3, 5), DType.INT8, q) and y.type.static_shape == (1, 3, 5)
    for bad in ({"in_zp": 2}, {"shift": [1]}, {"shift": [63]}, {"multiplier": [-1]}):
        args: dict[str, Any] = {"multiplier": [1 << 30], "shift": [40], **bad}
        with pytest.raises(InvalidGraphError):
            rescale_raw(b, x, args.pop("multiplier"), args.pop("shift"), DType.INT8, **args)
    with pytest.raises(InvalidGraphError, match="shape"):  # (a per-channel count the input does not have)
        rescale_raw(b, x, [1 << 30] * 4, [40] * 4, DType.INT8)


def test_add_sub_output_on_indexed_input_stages_is_add_sub_i8() -> None:
    """``_add_sub_singles`` reads TFLite's int8 ADD/SUB results as the output stage of the two inputs' stage values
    made once for the 256 codes and indexed: the same as ``add_sub_i8`` on every one of the 65,536 pairs."""
    from tf2tosa.quant import tflite_reference as R

    rng = np.random.default_rng(11)
    codes = R.codes(8)
    xs, ys = np.meshgrid(codes, codes, indexing="ij")
    for k in range(12):
        s1, s2 = (float(np.float32(np.exp(rng.uniform(np.log(1e-3), np.log(1.0))))) for _ in range(2))
        so = float(np.float32((s1 + s2) * rng.uniform(0.1, 4.0)))
        z1, z2, zo = (int(rng.integers(-128, 128)) for _ in range(3))
        bounds = (-128, 127) if k % 3 else (int(rng.integers(-128, 0)), int(rng.integers(0, 128)))
        subtract = bool(k % 2)
        m1, m2, (mo, eo) = R.add_sub_multipliers_i8(s1, s2, so)
        t1, t2 = R.mbqm((codes - z1) << 20, *m1), R.mbqm((codes - z2) << 20, *m2)
        got = R.add_sub_output_i8(t1[xs + 128], t2[ys + 128], mo, eo, zo, subtract, bounds)
        np.testing.assert_array_equal(got, R.add_sub_i8(xs, ys, s1, z1, s2, z2, so, zo, subtract, bounds))


def test_add_sub_stages_in_fewer_passes_are_the_reference() -> None:
    """``elementwise._input_stage`` and ``_output_stage`` (the int8 ADD/SUB search's TFLite stages without mbqm's
    wrap32 where it changes nothing) give ``R.mbqm`` and ``R.add_sub_output_i8``'s values, and the input stage's
    peak is its largest magnitude; outside their conditions they are the reference itself."""
    from tf2tosa.quant import elementwise as E
    from tf2tosa.quant import tflite_reference as R

    rng = np.random.default_rng(5)
    codes = R.codes(8)
    cases = [(float(np.float32(np.exp(rng.uniform(np.log(1e-4), np.log(2.0))))) for _ in range(3)) for _ in range(40)]
    cases += [(1.0, 1.0, 1e-6), (0.5, 0.5, 0.5), (1.0, 1e-3, 1.0 / (1 << 20)), (0.02, 0.02, 0.0001)]
    for k, (s1, s2, so) in enumerate(cases):
        z1, z2, zo = (int(rng.integers(-128, 128)) for _ in range(3))
        bounds = (-128, 127) if k % 3 else (int(rng.integers(-128, 0)), int(rng.integers(0, 128)))
        m1, m2, (mo, eo) = R.add_sub_multipliers_i8(s1, s2, so)
        (t1, p1), (t2, p2) = E._input_stage(z1, *m1), E._input_stage(z2, *m2)
        r1, r2 = R.mbqm((codes - z1) << 20, *m1), R.mbqm((codes - z2) << 20, *m2)
        np.testing.assert_array_equal(t1, r1)
        np.testing.assert_array_equal(t2, r2)
        assert (p1, p2) == (int(np.abs(r1).max()), int(np.abs(r2).max()))
        rows = codes[rng.permutation(256)[:40]]
        for subtract in (False, True):
            a, c = r1[rows[:, None] + 128], r2[codes[None, :] + 128]
            got = E._output_stage(a.copy(), c.copy(), mo, eo, zo, subtract, bounds, p1 + p2)
            np.testing.assert_array_equal(got, R.add_sub_output_i8(a, c, mo, eo, zo, subtract, bounds))
    # stage values whose sums leave int32 (wrap32 acts) and a left shift: the reference's path
    big = np.array([[(1 << 30) + 5], [-(1 << 30) - 7]], dtype=np.int64)
    np.testing.assert_array_equal(E._output_stage(big, big.T, 1 << 30, -3, 4, False, (-128, 127), 1 << 31),
                                  R.add_sub_output_i8(big, big.T, 1 << 30, -3, 4, False, (-128, 127)))
    np.testing.assert_array_equal(E._input_stage(3, 1 << 30, 2)[0], R.mbqm((codes - 3) << 20, 1 << 30, 2))


def _rescale_consts(scale: float | np.ndarray, dtype: DType, rounding: str) -> tuple[Any, ...]:
    """The multiplier and shift constants (values, element type) and the attributes of one RESCALE of a [1, 2]
    input of ``dtype`` by ``scale``."""
    g = Graph()
    x = g.add_input("x", TensorType((1, 2), dtype))
    b = Builder(g, location="test", context=LegalizeContext(rounding=rounding))
    y = rescale(b, x, scale, DType.INT8, out_zp=3)
    op = y.producer
    assert op is not None
    m, s = (op.operands[k].producer.attrs["values"] for k in (1, 2))  # type: ignore[union-attr]
    return m.tolist(), m.dtype.str, s.tolist(), s.dtype.str, sorted(op.attrs.items())


@pytest.mark.parametrize("dtype", [DType.INT32, DType.INT48])
@pytest.mark.parametrize("rounding", ["double", "single"])
def test_rescale_per_tensor_pairs_are_the_general_path(dtype: DType, rounding: str) -> None:
    """``quant.rescale.rescale`` of one scale (the pair kept per scale, its arrays copied per op) emits what the
    general path emits for two equal per-channel scales (collapsed to one pair), 32- and 16-bit multipliers, shifts
    either side of 31; each op gets its own arrays, and the kept ones stay read-only."""
    for scale in (1.0, 0.5, 3.9, 2.0 ** -20, 1e-9, 0.00123, 2.0 ** -33, math.nextafter(1.0, 0.0)):
        if dtype is DType.INT48 and scale < 2.0 ** -30:
            continue  # (a 16-bit multiplier's shift stops at 46: those flush in both paths alike, tested above)
        fast = _rescale_consts(scale, dtype, rounding)
        assert fast == _rescale_consts(np.array([scale, scale]), dtype, rounding), scale
        assert fast == _rescale_consts(scale, dtype, rounding)  # (the kept pair, again)
    g = Graph()
    x = g.add_input("x", TensorType((1, 2), dtype))
    b = Builder(g, location="test", context=LegalizeContext(rounding=rounding))
    first, second = (rescale(b, x, 0.25, DType.INT8).producer for _ in range(2))
    a1, a2 = (op.operands[1].producer.attrs["values"] for op in (first, second))  # type: ignore[union-attr]
    assert a1 is not a2 and a1.flags.writeable and not np.shares_memory(a1, a2)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
def test_abs_weight_sums_in_narrow_types_are_exact(dtype: Any) -> None:
    """``abs_weight_sums`` widens a byte weight to int16 only (int32 for int16 weights): the per-channel sums of
    ``|w - zp|`` are exact at the zero points' extremes, in one block and in several."""
    from tf2tosa.quant import conv

    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    for zp in (-256, -128, 0, 5, 127, 255, 256, 40000):
        w = rng.integers(info.min, info.max + 1, (37, 11, 3)).astype(dtype)
        want = np.abs(w.astype(np.int64) - zp).reshape(37, -1).sum(axis=1)
        np.testing.assert_array_equal(conv.abs_weight_sums(w, zp), want)
    w = np.full((5, 40), info.min, dtype)
    old = conv._SUM_BLOCK
    try:
        conv._SUM_BLOCK = 80  # (two channels a block)
        np.testing.assert_array_equal(conv.abs_weight_sums(w, 256), np.full(5, 40 * abs(int(info.min) - 256)))
    finally:
        conv._SUM_BLOCK = old
