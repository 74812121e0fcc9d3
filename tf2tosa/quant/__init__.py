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

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import on_first_use

if TYPE_CHECKING:
    from .activation import activation_bounds, fused_activation_q
    from .conv import (
        ACC,
        conv_output,
        conv_scale_array,
        conv_scales,
        note_inexact,
        quant_bias,
        requantize_acc,
        require_act_type,
        tfl_product_scale,
        weight_zp,
    )
    from .fully_connected import acc_bound, fc_output, fc_output_rows
    from .rescale import requantize, rescale, rescale_from_i32, rescale_to_i32, rounding_mode
    from .scale import compute_scale_16, compute_scale_32, quantize_multiplier, quantize_multiplier_arrays
    from .table import apply_table_i8, apply_table_i16, table_i8, table_i16

#: the helpers this package names, loaded on first use: name -> its module.  A float conversion imports
#: :mod:`.common` and :mod:`.hybrid` only (the fp16 model's peak RSS is held to twice its file by bench_convert); the
#: quantized branches of a rule module that float models also use (``tfl_nn``) reach the others as ``quant.NAME``.
#: ``rescale`` is also its module's name, so the package's attribute is that module once the module was imported by
#: its path: take the function from there (``from .rescale import rescale``), as this package's own modules do
_ON_USE = {**dict.fromkeys(("activation_bounds", "fused_activation_q"), "activation"),
           **dict.fromkeys(("ACC", "conv_output", "conv_scale_array", "conv_scales", "note_inexact", "quant_bias",
                            "requantize_acc", "require_act_type", "tfl_product_scale", "weight_zp"), "conv"),
           **dict.fromkeys(("acc_bound", "fc_output", "fc_output_rows"), "fully_connected"),
           **dict.fromkeys(("requantize", "rescale", "rescale_from_i32", "rescale_to_i32", "rounding_mode"), "rescale"),
           **dict.fromkeys(("compute_scale_16", "compute_scale_32", "quantize_multiplier",
                            "quantize_multiplier_arrays"), "scale"),
           **dict.fromkeys(("apply_table_i8", "apply_table_i16", "table_i8", "table_i16"), "table")}


__getattr__ = on_first_use(__name__, globals(), {name: (module, name) for name, module in _ON_USE.items()})

__all__ = ["ACC", "acc_bound", "activation_bounds", "apply_table_i8", "apply_table_i16", "compute_scale_16",
           "compute_scale_32", "conv_output", "conv_scale_array", "conv_scales", "fc_output", "fc_output_rows",
           "fused_activation_q", "note_inexact", "quant_bias", "quantize_multiplier", "quantize_multiplier_arrays",
           "requantize", "requantize_acc", "require_act_type", "rescale", "rescale_from_i32", "rescale_to_i32",
           "rounding_mode", "table_i8", "table_i16", "tfl_product_scale", "weight_zp"]
