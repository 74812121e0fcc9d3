"""Conversion cost (issue 32 item 4): the cheaper int8 ADD/SUB input-rescale search decides exactly as the
exhaustive search it replaced.

``quant.rescale.joint_add_rescales`` and ``merged_widen_rescale`` were made cheaper (the output stage formed from
256 products per side, all candidates of an input checked in one array, the candidate list cut where no
multiplier fits).  The search they replaced is kept below, verbatim in its arithmetic, as the oracle: on a few
hundred random quantizations (both inputs, the output, the clamp bounds, ADD and SUB) both must choose the same
``(multiplier, shift, rounding_mode)`` per input, or both refuse.  The oracle's target is LiteRT's reference
arithmetic (``tflite_reference.add_sub_i8``) on all 65536 code pairs, as in the converter.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from tf2tosa.quant import tflite_reference as R
from tf2tosa.quant.rescale import joint_add_rescales, merged_widen_rescale
from tf2tosa.quant.scale import quantize_multiplier_arrays

Cand = tuple[int, int, str]


def _old_apply_scale_32(value: np.ndarray, multiplier: int, shift: int, double_round: bool) -> np.ndarray:
    """The spec's apply_scale_32 (4.5.5), written out in numpy int64 as the old search used it."""
    v = np.asarray(value, dtype=np.int64)
    r = v * np.int64(multiplier)
    if double_round and shift > 31:
        r = r + ((v >> 63) << 31) + np.int64((1 << (shift - 1)) + (1 << 30))
    else:
        r = r + np.int64(1 << (shift - 1))
    return r >> shift


def _old_candidates(scale: float, left_shift: int, mode: str) -> Iterator[Cand]:
    mult, shift2 = (int(a[0]) for a in quantize_multiplier_arrays([scale], True))
    for s in range(10, 63):
        base = mult * 2.0 ** (s + left_shift - shift2)
        near = math.floor(base + 0.5)
        for m in sorted({math.floor(base) + k for k in (-1, 0, 1, 2)}, key=lambda c: (abs(c - near), c)):
            if 0 <= m < 1 << 31:
                yield (m, s, "SINGLE_ROUND")
                if mode == "DOUBLE_ROUND" and s > 31:
                    yield (m, s, "DOUBLE_ROUND")


def _old_apply(v: np.ndarray, c: Cand) -> np.ndarray:
    return _old_apply_scale_32(v, c[0], c[1], c[2] == "DOUBLE_ROUND")


def _old_two_step(v: np.ndarray, left_shift: int, scale: float, mode: str) -> np.ndarray:
    mult, shift2 = (int(a[0]) for a in quantize_multiplier_arrays([scale], True))
    return _old_apply_scale_32(np.asarray(v, dtype=np.int64) << left_shift, mult, shift2,
                               mode == "DOUBLE_ROUND" and shift2 > 31)


def _old_merged(codes: np.ndarray, zp: int, left_shift: int, scale: float, mode: str) -> Cand | None:
    v = np.asarray(codes, dtype=np.int64) - zp
    want = _old_two_step(v, left_shift, scale, mode)
    return next((c for c in _old_candidates(scale, left_shift, mode) if np.array_equal(_old_apply(v, c), want)),
                None)


def _old_joint(zps: tuple[int, int], scales: tuple[float, float], left_shift: int, out_scale: float, out_zp: int,
               bounds: tuple[int, int], subtract: bool, want: np.ndarray, mode: str) -> list[Cand | None] | None:
    """The exhaustive search as it was: every pair through the whole output stage."""
    codes = np.arange(-128, 128, dtype=np.int64)
    om, osh = (int(a[0]) for a in quantize_multiplier_arrays([out_scale], True))
    odbl = mode == "DOUBLE_ROUND" and osh > 31
    want = np.asarray(want, dtype=np.int64).reshape(256, 256)

    def output(a: np.ndarray, c: np.ndarray) -> np.ndarray:
        acc = a[:, None] - c[None, :] if subtract else a[:, None] + c[None, :]
        return np.clip(_old_apply_scale_32(acc, om, osh, odbl) + out_zp, *bounds)

    vals = [_old_two_step(codes - zp, left_shift, sc, mode) for zp, sc in zip(zps, scales)]
    if not np.array_equal(output(*vals), want):
        return None
    chosen: list[Cand | None] = [None, None]
    for i, (zp, sc) in enumerate(zip(zps, scales)):
        exact = _old_merged(codes, zp, left_shift, sc, mode)
        for cand in [exact] if exact else _old_candidates(sc, left_shift, mode):
            v = _old_apply(codes - zp, cand)
            moved = np.flatnonzero(v != vals[i])
            got = output(v[moved], vals[1]) if i == 0 else output(vals[0], v[moved])
            if np.array_equal(got, want[moved, :] if i == 0 else want[:, moved]):
                chosen[i], vals[i] = cand, v
                break
    return chosen


def _case(rng: np.random.Generator) -> tuple[float, int, float, int, float, int, tuple[int, int], bool]:
    """Random int8 ADD/SUB quantizations: input scales over three decades, the output's around their sum."""
    s1, s2 = (float(np.float32(s)) for s in np.exp(rng.uniform(np.log(1e-3), np.log(1.0), 2)))
    so = float(np.float32((s1 + s2) * rng.uniform(0.3, 2.0)))
    z1, z2, zo = (int(z) for z in rng.integers(-128, 128, 3))
    lo = int(rng.integers(-128, 0)) if rng.random() < 0.3 else -128
    hi = int(rng.integers(0, 128)) if rng.random() < 0.3 else 127
    return s1, z1, s2, z2, so, zo, (lo, hi), bool(rng.random() < 0.4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_add_rescale_search_decides_as_the_exhaustive_one(seed: int) -> None:
    rng = np.random.default_rng(3200 + seed)
    xs, ys = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    singles = both_none = 0
    for k in range(100):
        s1, z1, s2, z2, so, zo, bounds, subtract = _case(rng)
        twice = 2.0 * max(s1, s2)
        args = ((z1, z2), (s1 / twice, s2 / twice), 20, twice / ((1 << 20) * so), zo, bounds, subtract)
        want = R.add_sub_i8(xs, ys, s1, z1, s2, z2, so, zo, subtract, bounds)
        if k % 10 == 9:  # a target the two-step form misses: both searches refuse it
            want = want.copy()
            want[int(rng.integers(256)), int(rng.integers(256))] += 1 if rng.random() < 0.5 else -1
        mode = "SINGLE_ROUND" if k % 17 == 16 else "DOUBLE_ROUND"
        new = joint_add_rescales(*args, want, mode)
        old = _old_joint(*args, want, mode)
        assert new == old, (s1, z1, s2, z2, so, zo, bounds, subtract, mode)
        singles += new is not None and all(c is not None for c in new)
        both_none += new is None
        for zp, sc in ((z1, s1 / twice), (z2, s2 / twice)):
            codes = np.arange(-128, 128)
            assert merged_widen_rescale(codes, zp, 20, sc, mode) == _old_merged(codes, zp, 20, sc, mode)
    # the comparison covered both outcomes: inputs given one RESCALE, and refused targets
    assert singles >= 50 and both_none >= 10, (singles, both_none)


def test_add_sub_reference_in_place_equals_the_general_form() -> None:
    """``tflite_reference.add_sub_i8`` now runs the output stage in place on its one pair array; the values are
    those of TFLite's general MultiplyByQuantizedMultiplier form (``srdhm`` then ``rdbpot``, with the int32
    wrap), written out here from the primitives."""
    rng = np.random.default_rng(3210)
    xs, ys = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")

    def general(x: np.ndarray, q: int, shift: int) -> np.ndarray:
        return R.rdbpot(R.srdhm(R.wrap32(R.i64(x) << max(shift, 0)), q), max(-shift, 0))

    for _ in range(40):
        s1, z1, s2, z2, so, zo, (lo, hi), subtract = _case(rng)
        twice = 2.0 * max(float(np.float32(s1)), float(np.float32(s2)))
        (q1, e1), (q2, e2) = R.to_qmultiplier(float(np.float32(s1)) / twice), \
            R.to_qmultiplier(float(np.float32(s2)) / twice)
        qo, eo = R.to_qmultiplier(twice / ((1 << 20) * float(np.float32(so))))
        a = general((R.i64(xs) - z1) << 20, q1, e1)
        c = general((R.i64(ys) - z2) << 20, q2, e2)
        want = np.clip(general(a - c if subtract else a + c, qo, eo) + zo, lo, hi)
        got = R.add_sub_i8(xs, ys, s1, z1, s2, z2, so, zo, subtract, (lo, hi))
        np.testing.assert_array_equal(got, want)


def _edge_cases(rng: np.random.Generator) -> Iterator[tuple[float, int, float, int, float, int, tuple[int, int], bool]]:
    """Quantizations at the edges of the cheap proof (``elementwise.two_step_is_tflite_add``): equal input scales,
    power-of-two ratios (a multiplier of exactly 2^30), output scales that put TFLite's output shift near or past
    its limits (the proof declines: the pairs are checked), extreme zero points and clamps."""
    zps = (-128, 127, 0, -1)
    for k in range(120):
        s1 = float(np.float32(np.exp(rng.uniform(np.log(1e-4), np.log(4.0)))))
        kind = k % 6
        s2 = s1 if kind == 0 else float(np.float32(s1 * 2.0 ** int(rng.integers(-6, 7)))) if kind in (1, 2) else \
            float(np.float32(s1 * rng.uniform(0.01, 100.0)))
        twice = 2.0 * max(s1, s2)
        if kind in (2, 3):  # an output factor 2·max_s / (2^20·s_out) that is a power of two
            so = float(np.float32(twice / 2.0 ** (20 + int(rng.integers(-12, 12)))))
        elif kind == 4:  # an output factor near 1 or above (TFLite's output shift 0 or a left shift)
            so = float(np.float32(twice / 2.0 ** 20 * rng.uniform(0.2, 1.5)))
        else:
            so = float(np.float32((s1 + s2) * rng.uniform(0.05, 20.0)))
        z1, z2, zo = (int(zps[int(rng.integers(4))]) if rng.random() < 0.5 else int(rng.integers(-128, 128))
                      for _ in range(3))
        bounds = (int(rng.integers(-128, 0)), int(rng.integers(0, 128))) if k % 5 == 4 else (-128, 127)
        yield s1, z1, s2, z2, so, zo, bounds, bool(k % 2)


@pytest.mark.parametrize("seed", [0, 1])
def test_add_singles_with_the_cheap_proof_decide_as_the_exhaustive_search(seed: int) -> None:
    """The converter's path (``elementwise._add_sub_singles``: the two-step form shown equal to TFLite by
    ``two_step_is_tflite_add`` without the 65,536 pairs where it can, TFLite's results computed only for the pairs
    a candidate changes) chooses what the old exhaustive search chooses, on random and edge-case quantizations; and
    wherever the cheap proof says the two-step form equals TFLite, it does on every pair."""
    from tf2tosa.quant import elementwise as E
    from tf2tosa.quant.rescale import _add_output_stage, two_step_widen

    rng = np.random.default_rng(3220 + seed)
    xs, ys = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    cases = [_case(rng) for _ in range(80)] + list(_edge_cases(rng))
    proven = declined = 0
    for s1, z1, s2, z2, so, zo, bounds, subtract in cases:
        f1, f2, fo = E.add_sub_factors(s1, s2, so, 20)
        want = R.add_sub_i8(xs, ys, s1, z1, s2, z2, so, zo, subtract, bounds)
        old = _old_joint((z1, z2), (f1, f2), 20, fo, zo, bounds, subtract, want, "DOUBLE_ROUND")
        new = E._add_sub_singles.__wrapped__((s1, z1), (s2, z2), (so, zo), bounds, subtract, "DOUBLE_ROUND")
        assert new == (tuple(old) if old else (None, None)), (s1, z1, s2, z2, so, zo, bounds, subtract)
        if E.two_step_is_tflite_add((s1, z1), (s2, z2), so, (f1, f2), fo):
            proven += 1
            codes = np.arange(-128, 128, dtype=np.int64)
            vals = [two_step_widen(codes - z, 20, f, "DOUBLE_ROUND") for z, f in ((z1, f1), (z2, f2))]
            got = _add_output_stage(fo, zo, bounds, subtract, "DOUBLE_ROUND")(*vals)
            np.testing.assert_array_equal(got, want)
        else:
            declined += 1
    assert proven >= 100 and declined >= 5, (proven, declined)
