"""The lowering layer shared by the ``tf.*`` and ``tfl.*`` rules (the role TensorFlow's ``legalize_common.cc``
plays for its two dialects): one copy of each piece of lowering math, used by both frontends.

* :mod:`.legalize_common` — the lowering document's "common legalization functions": positive axis,
  constant operands, fused activation, float zero points, accumulator types.
* :mod:`.numeric` — float-only checks and float helpers (fconst, float_divide, select, expm1, reductions).
* :mod:`.layout` — static shapes and constants, strided slicing, REVERSE / dilation / split helpers.
* :mod:`.conv` — grouped and transposed convolution geometry.
* :mod:`.padding` — SAME / VALID / EXPLICIT window padding for convolutions and pooling.
* :mod:`.tf_ops` — lowerings written for the ``tf.*`` rules (NCHW, conv, batch norm, einsum, fake quant …).
"""
