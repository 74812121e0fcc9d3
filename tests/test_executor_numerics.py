"""Bit-exact integer helpers vs independent brute-force Python-int versions of the spec pseudo-code."""

from __future__ import annotations

import numpy as np
import pytest

from tf2tosa.executor import ExecutionError
from tf2tosa.executor import numerics as nm

RNG = np.random.default_rng(7)


def py_scale_32(value: int, multiplier: int, shift: int, double_round: bool) -> int:
    """S11743-11756 with Python's unbounded ints (>> is floor = arithmetic shift)."""
    rnd = 1 << (shift - 1)
    if double_round and shift > 31:
        rnd += (1 << 30) if value >= 0 else -(1 << 30)
    return (value * multiplier + rnd) >> shift


def py_scale_16(value: int, multiplier: int, shift: int) -> int:
    return (value * multiplier + (1 << (shift - 1))) >> shift


def gemmlowp_mbqm(x: int, quantized_multiplier: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier (SaturatingRoundingDoublingHighMul + RoundingDivideByPOT).

    ``shift`` is TFLite's exponent (negative = right shift).  Independent oracle for DOUBLE_ROUND.
    """
    left = max(shift, 0)
    right = max(-shift, 0)
    a = x * (1 << left)
    a = max(min(a, 2**31 - 1), -(2**31))
    b = quantized_multiplier
    if a == b == -(2**31):
        high = 2**31 - 1
    else:
        ab = a * b
        nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
        t = ab + nudge
        high = abs(t) // (1 << 31) * (1 if t >= 0 else -1)  # C division truncates
    mask = (1 << right) - 1
    remainder = high & mask
    threshold = (mask >> 1) + (1 if high < 0 else 0)
    return (high >> right) + (1 if remainder > threshold else 0)


@pytest.mark.parametrize("double_round", [False, True])
def test_apply_scale_32_random(double_round: bool) -> None:
    n = 20000
    shifts = RNG.integers(2, 63, n)
    mults = RNG.integers(0, 2**31, n)
    vals = np.array([int(RNG.integers(-(1 << min(int(s) - 1, 31)), 1 << min(int(s) - 1, 31) - 0)) for s in shifts])
    vals = np.clip(vals, -(2**31), 2**31 - 1)
    got = nm.apply_scale_32(vals, mults, shifts, double_round)
    ref = [py_scale_32(int(v), int(m), int(s), double_round) for v, m, s in zip(vals, mults, shifts)]
    assert got.tolist() == ref


def test_apply_scale_32_edges() -> None:
    cases = []
    for s in range(2, 63):
        lim = min(1 << (s - 1), 2**31)
        for v in (-lim, -lim + 1, -1, 0, 1, lim - 1, -(lim // 2), lim // 2):
            v = max(min(v, 2**31 - 1), -(2**31))
            for m in (0, 1, (1 << 30), (1 << 31) - 1, 1518500250):
                cases.append((v, m, s))
    v, m, s = (np.array(c) for c in zip(*cases))
    for dr in (False, True):
        got = nm.apply_scale_32(v, m, s, dr).tolist()
        assert got == [py_scale_32(*c, dr) for c in cases]


def test_double_vs_single_round_differ_and_double_matches_tflite() -> None:
    # scale 0.3 with shift > 31: ties at bit 31 round differently
    diffs = 0
    mults = RNG.integers(1 << 30, 1 << 31, 3000)
    exps = RNG.integers(-20, 1, 3000)
    xs = RNG.integers(-(2**20), 2**20, 3000)
    for m, e, x in zip(mults.tolist(), exps.tolist(), xs.tolist()):
        shift = 31 - e
        single = int(nm.apply_scale_32(np.array([x]), m, shift, False)[0])
        double = int(nm.apply_scale_32(np.array([x]), m, shift, True)[0])
        assert double == gemmlowp_mbqm(x, m, e)
        diffs += single != double
    assert diffs > 0
    # a hand-checked tie: value*m = 3 * 2^31 exactly at 2^-32 below half, shift 33
    # single: (x*m + 2^32) >> 33 ; double first rounds at bit 31
    x, m, s = -3, 1 << 30, 33  # x*m = -3*2^30 -> /2^33 = -0.375
    assert int(nm.apply_scale_32(np.array([x]), m, s, False)[0]) == 0
    assert int(nm.apply_scale_32(np.array([x]), m, s, True)[0]) == 0
    x = 3  # 0.375: single rounds to 0
    assert int(nm.apply_scale_32(np.array([x]), m, s, False)[0]) == 0
    # 2^31 * 1.5 / 2^33 = 0.375 with double round: (3*2^30 + 2^32 + 2^30) >> 33 = 0 ; value 5: 0.625 -> 1
    assert int(nm.apply_scale_32(np.array([5]), m, s, True)[0]) == 1


def test_apply_scale_32_requires() -> None:
    with pytest.raises(ExecutionError, match="shift"):
        nm.apply_scale_32(np.array([1]), 1 << 30, 1)
    with pytest.raises(ExecutionError, match="shift"):
        nm.apply_scale_32(np.array([1]), 1 << 30, 63)
    with pytest.raises(ExecutionError, match="multiplier"):
        nm.apply_scale_32(np.array([1]), -5, 10)
    with pytest.raises(ExecutionError, match="value"):
        nm.apply_scale_32(np.array([1 << 9]), 1 << 30, 10)


def test_apply_scale_16_random() -> None:
    n = 5000
    shifts = RNG.integers(2, 63, n)
    mults = RNG.integers(0, 2**15, n)
    vals = RNG.integers(-(2**47), 2**47, n)
    ok = [(-(2**31) <= py_scale_16(int(v), int(m), int(s)) <= 2**31 - 1) for v, m, s in zip(vals, mults, shifts)]
    sel = np.array(ok)
    got = nm.apply_scale_16(vals[sel], mults[sel], shifts[sel])
    assert got.tolist() == [py_scale_16(int(v), int(m), int(s)) for v, m, s in zip(vals[sel], mults[sel], shifts[sel])]
    bad = np.flatnonzero(~sel)[:1]
    if bad.size:
        with pytest.raises(ExecutionError):
            nm.apply_scale_16(vals[bad], mults[bad], shifts[bad])


def test_reciprocal_scale() -> None:
    vals = np.array(list(range(1, 600)) + [2**20 + 3, 2**31 - 1])
    m, s = nm.reciprocal_scale(vals)
    for v, mm, ss in zip(vals.tolist(), m.tolist(), s.tolist()):
        k = (v - 1).bit_length()
        assert (mm, ss) == ((((1 << 30) + 1) << k) // v, 30 + k)
        assert (1 << 30) <= mm < (1 << 31) or v == 1


def test_clz_shifts_wrap_lookup() -> None:
    x = np.array([0, 1, -1, 2**31 - 1, -(2**31), 12345, 1 << 20])
    assert nm.count_leading_zeros32(x).tolist() == [32 - (int(v) & 0xFFFFFFFF).bit_length() for v in x]
    assert nm.wrap(np.array([128, 255, 256, -129, 300]), 8).tolist() == [-128, -1, 0, 127, 44]
    assert nm.logical_rshift(np.array([-1, -128, 64]), np.array([1, 7, 2]), 8).tolist() == [127, 1, 16]
    assert nm.shift_round_half_up(np.array([5, -5, 6, -6, 7]), 1).tolist() == [3, -2, 3, -3, 4]
    big = np.array([2**62, -(2**62)])
    assert nm.shift_round_half_up(big, 63).tolist() == [1, 0]
    table = RNG.integers(-2000, 2000, 513)
    v = np.arange(-32768, 32768, 37)
    got = nm.lookup_i16(table, v)
    for vv, gg in zip(v.tolist(), got.tolist()):
        idx, frac = (vv + 32768) >> 7, vv & 0x7F
        base, nxt = int(table[idx]), int(table[idx + 1])
        assert gg == (base << 7) + (nxt - base) * frac
    assert nm.idiv_trunc(np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2])).tolist() == [3, -3, -3, 3]
