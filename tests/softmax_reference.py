"""TFLite's int8/int16 SOFTMAX and int8 LOG_SOFTMAX reference kernels in numpy: the oracles of the quantized
softmax rules' tests (tests/test_rules_math_q.py), written from LiteRT's reference_ops::Softmax, SoftmaxInt16 and
reference_integer_ops::LogSoftmax on the gemmlowp primitives of :mod:`tf2tosa.quant.tflite_reference` (the rules
build their tables from those primitives and never call these whole kernels)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tf2tosa.quant.scale import quantize_multiplier
from tf2tosa.quant.tflite_reference import (
    I16_MAX,
    I16_MIN,
    I32_MIN,
    Arr,
    clamp,
    clz32,
    exp_on_negative_values,
    f32,
    get_reciprocal,
    i64,
    log_x_for_x_greater_than_or_equal_to_1,
    lut_lookup_i16,
    lut_populate_i16,
    mbqm,
    rdbpot,
    srdhm,
    wrap32,
)


def softmax_scaling(s_in: float, beta: float) -> tuple[int, int, int]:
    """PreprocessSoftmaxScaling(beta, s_in, 5) → (multiplier, left_shift, diff_min = -CalculateInputRadius)."""
    real = min(beta * s_in * float(1 << 26), float((1 << 31) - 1))
    q, ls = quantize_multiplier(real)
    return q, ls, -int(math.floor(31.0 * float(1 << 26) / float(1 << ls)))


def softmax_i8(x: Any, s_in: float, beta: float = 1.0) -> Arr:
    """reference_ops::Softmax for int8 in/out (output scale 1/256, zero point -128) over the last axis."""
    x = i64(x)
    q, ls, diff_min = softmax_scaling(float(f32(s_in)), float(f32(beta)))
    diff = x - x.max(axis=-1, keepdims=True)
    ok = diff >= diff_min
    e = np.where(ok, exp_on_negative_values(srdhm(wrap32(diff << ls), q), 5), 0)
    total = rdbpot(e, 12).sum(axis=-1, keepdims=True)
    recip, nbou = get_reciprocal(total, 12)
    out = rdbpot(srdhm(recip, e), nbou + 31 - 8) - 128
    return np.where(ok, np.clip(out, -128, 127), -128)


def softmax_i16(x: Any, s_in: float, beta: float = 1.0) -> Arr:
    """reference_ops::SoftmaxInt16 (output scale 2^-15, zero point 0) over the last axis."""
    x = i64(x)
    rng = 65535.0
    exp_lut = lut_populate_i16(np.exp, 10.0 / rng, 32767, 2.0 / rng, 0, dtype=np.float64)
    inv_lut = lut_populate_i16(lambda v: 1.0 / (1.0 + v), 1.0 / rng, -32768, 2.0 / rng, 0, dtype=np.float64)
    q, s = quantize_multiplier(float(f32(f32(s_in) * f32(beta))) / (10.0 / rng))
    diff = x - x.max(axis=-1, keepdims=True)
    e = lut_lookup_i16(clamp(mbqm(diff, q, s) + 32767, I16_MIN, I16_MAX), exp_lut)
    total = e.sum(axis=-1, keepdims=True)
    hp1 = clz32(total)
    shifted = ((total << (hp1 - 1)) + (1 << 13)) >> 14
    recip = lut_lookup_i16(clamp(shifted - (1 << 15) - (1 << 16), I16_MIN, I16_MAX), inv_lut)
    rs = 31 - hp1
    return np.clip((e * recip + (np.int64(1) << (rs - 1))) >> rs, 0, 32767)


def log_softmax_i8(x: Any, s_in: float) -> Arr:
    """reference_integer_ops::LogSoftmax (output scale 16/256, zero point 127) over the last axis."""
    x = i64(x)
    q, ls, diff_min = softmax_scaling(float(f32(s_in)), 1.0)
    rq, rs = quantize_multiplier((1 << (31 - ls)) / float(q))
    diff = x - x.max(axis=-1, keepdims=True)
    diff_q5 = mbqm(diff, q, ls)
    terms = np.where(diff >= diff_min, rdbpot(exp_on_negative_values(diff_q5, 5), 12), 0)
    log_sum = log_x_for_x_greater_than_or_equal_to_1(terms.sum(axis=-1, keepdims=True), 5, 12)
    adjusted = np.maximum(diff_min - 1, mbqm(wrap32(log_sum + I32_MIN), rq, rs))
    out = np.clip(rdbpot(wrap32(diff_q5 - log_sum), 31 - 5 - 4) + 127, -128, 127)
    return np.where(diff > adjusted, out, -128)
