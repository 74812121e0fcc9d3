"""TensorFlow's real FFT and the ops reading its complex result (``tf.*``): ``tf.RFFT``, ``tf.ComplexAbs``,
``tf.Real``, ``tf.Imag``.

``tf.RFFT`` (``tf.signal.rfft``, what ``tf.signal.stft`` computes: YAMNet's and most audio front ends'
spectrogram) is a one-dimensional transform of the innermost axis, cropped or zero-padded to ``fft_length``; it is
TOSA's RFFT2D (EXT-FFT, spec 2.3.9) on the ``[N, 1, W]`` view, whose height-1 transform is the identity, with the
result's parts reshaped back to ``[..., fft_length/2 + 1]``.  The complex result is carried as the (real, imag) pair
of :mod:`.tfl_fft` and taken apart by its readers, which lower through the ``tfl.complex_abs`` / ``tfl.real`` /
``tfl.imag`` rules.  A complex result read by anything else (or a model output) is refused, as for ``tfl.rfft2d``.
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from . import delegate
from .lowering.legalize_common import const_operand
from .lowering.numeric import static_shape
from .registry import legalize
from .tfl_fft import make_complex

#: the TensorFlow ops that read a complex value off its (real, imag) pair
_READERS = frozenset({"tf.ComplexAbs", "tf.Real", "tf.Imag"})


@legalize("tf.RFFT")
def rfft(b: Builder, op: Operation) -> list[Value]:
    """RFFT2D on the [N, 1, W] view after cropping / zero-padding W to ``fft_length`` (EXT-FFT); no lowering in
    lowering doc: tf.RFFT."""
    x, r = op.operands[0], op.results[0]
    if x.dtype is not DType.FP32 or r.dtype is not DType.COMPLEX64:
        raise Unsupported(f"rfft of {x.dtype.value} to {r.dtype.value} (EXT-FFT RFFT2D is fp32 → complex64 only)")
    if any(v is r for v in b.graph.outputs) or any(u.name not in _READERS for u, _ in b.graph.uses(r)):
        raise Unsupported(f"rfft result {r.source or r.name} is read by an op that would need a complex64 tensor "
                          "or is a model output: TOSA 1.0 has no complex tensors (readers: "
                          f"{', '.join(sorted(_READERS))})")
    shape = static_shape(x)
    fl = [int(d) for d in np.asarray(const_operand(op, 1, "fft_length")).reshape(-1)]
    n = fl[0] if len(fl) == 1 else 0
    if not shape or n < 1 or n & (n - 1):
        raise Unsupported(f"rfft of shape {shape}, fft_length {fl}: TOSA RFFT2D needs one power of two "
                          "(S2957-2958)")
    lead, w = shape[:-1], shape[-1]
    x3 = b.reshape(x, [int(np.prod(lead)) if lead else 1, 1, w])
    if w > n:
        x3 = b.slice(x3, [0, 0, 0], [x3.shape[0], 1, n])
    elif w < n:
        x3 = b.pad(x3, [0, 0, 0, 0, 0, n - w], 0.0)
    fft = b.emit("RFFT2D", [x3], {"local_bound": False})
    re, im = (b.reshape(v, [*lead, n // 2 + 1]) for v in fft.results)
    return [make_complex(b, re, im, r)]


@legalize("tf.ComplexAbs")
def complex_abs(b: Builder, op: Operation) -> list[Value]:
    """tfl.complex_abs's lowering: SQRT(re² + im²) as RECIPROCAL(RSQRT(.))."""
    return delegate.via(b, op, "tfl.complex_abs")


@legalize("tf.Real")
def real(b: Builder, op: Operation) -> list[Value]:
    """tfl.real's lowering: the real part."""
    return delegate.via(b, op, "tfl.real")


@legalize("tf.Imag")
def imag(b: Builder, op: Operation) -> list[Value]:
    """tfl.imag's lowering: the imaginary part."""
    return delegate.via(b, op, "tfl.imag")
