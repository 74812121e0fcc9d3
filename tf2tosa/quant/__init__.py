"""Quantization helpers: scale → (multiplier, shift), RESCALE building, TABLE generation, activation bounds.

* :mod:`.common` — what every quantized rule asks of a value (is it quantized, its scale and zero point).
* :mod:`.scale` — TFLite's QuantizeMultiplier as TOSA (multiplier, shift) pairs (32- and 16-bit multipliers).
* :mod:`.rescale` — ``tosa.RESCALE`` builders (rounding mode from the conversion options; explicit pairs with
  ``rescale_raw``) and the one-RESCALE searches of the ADD/SUB input stages.
* :mod:`.table` — 256-entry i8 and 513-entry i16 TABLE contents from a real function.
* :mod:`.activation` — quantized fused activations (CLAMP bounds like TFLite, TANH via TABLE).
* :mod:`.tflite_reference` — TFLite's reference integer kernels in numpy (table sources and test oracles) and the
  float32 kernels of float islands.
* :mod:`.elementwise` — TOSA building blocks of the quantized elementwise/activation rules (requantization,
  widening, lookup tables, gemmlowp fixed point as TOSA ops).
* :mod:`.conv` — conv-family requantization: multipliers, biases, zero points, the MBQM output stage.
* :mod:`.fully_connected` — fully_connected's output stage, LiteRT's double-precision requantization reproduced
  exactly.
* :mod:`.exact_round` — exact ``round(acc · s)`` for wide accumulators in multi-limb i32 arithmetic.
* :mod:`.hybrid` — dynamic-range ("hybrid") arithmetic: int8 weights, float activations quantized on the fly.
"""

from .activation import activation_bounds, fused_activation_q
from .rescale import requantize, rescale, rescale_from_i32, rescale_to_i32, rounding_mode
from .scale import compute_scale_16, compute_scale_32, quantize_multiplier, quantize_multiplier_arrays
from .table import apply_table_i8, apply_table_i16, table_i8, table_i16

__all__ = ["activation_bounds", "apply_table_i8", "apply_table_i16", "compute_scale_16", "compute_scale_32",
           "fused_activation_q", "quantize_multiplier", "quantize_multiplier_arrays",
           "requantize", "rescale", "rescale_from_i32", "rescale_to_i32", "rounding_mode", "table_i8", "table_i16"]
