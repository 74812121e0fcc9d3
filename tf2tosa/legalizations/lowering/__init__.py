"""The lowering layer shared by the ``tf.*`` and ``tfl.*`` rules (the role TensorFlow's ``legalize_common.cc``
plays for its two dialects): one copy of each piece of lowering math, used by both frontends.

* :mod:`.padding` — SAME / VALID / EXPLICIT window padding for convolutions and pooling.
"""
