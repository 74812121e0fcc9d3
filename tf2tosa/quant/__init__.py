"""Quantization helpers: scale → (multiplier, shift), RESCALE building, TABLE generation, activation bounds."""
