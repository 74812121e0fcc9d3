"""TFLite's FFT and complex-number ops: ``tfl.rfft2d``, ``tfl.complex_abs``, ``tfl.real``, ``tfl.imag``.

TOSA 1.0 has no complex element type.  RFFT2D (EXT-FFT, fp32, spec 2.3.9 RFFT2D) returns the real and imaginary parts as
two fp32 tensors, so a complex64 value lives only *inside* the conversion, as a pair: the rule of
``tfl.rfft2d`` returns the result of a ``tf2tosa.complex`` marker op whose operands are (real, imag).  Every
consumer of a complex value takes the pair apart (:func:`complex_parts`):

* ``tfl.complex_abs`` → SQRT(re·re + im·im) (as RECIPROCAL(RSQRT(.)); exact 0 at 0, like sqrt);
* ``tfl.real`` → re, ``tfl.imag`` → im.

A complex value that passes through other ops first (RESHAPE, SQUEEZE, TRANSPOSE, SLICE, CONCATENATION, GATHER,
MUL … - BirdNET's RFFT2D → SQUEEZE → CAST) is split into its parts before the rules run
(:mod:`tf2tosa.converter.passes.complex_pairs`): the rfft2d rule then sees REAL and IMAG only, and that pass refuses,
op by op, the complex arithmetic that has no real/imaginary form.  A complex tensor that would have to exist in
the TOSA program - a model *output* of type complex64 - cannot be represented: the rfft2d rule refuses it with
``Unsupported`` ("TOSA 1.0 has no complex tensors …"), so the whole-graph error lists it with every other
problem.  (Complex64 model *inputs* are refused by the pipeline's type check.)

TFLite's RFFT2D (input ``[..., H, W]`` fp32, ``fft_length`` = constant ``[FH, FW]``) crops or zero-pads the
two innermost dimensions to ``FH × FW`` and returns ``[..., FH, FW/2 + 1]``; TOSA's RFFT2D wants rank 3 and
power-of-two H, W (spec 2.3.9 RFFT2D), so leading dimensions are folded into N and FH, FW must be powers of two (TFLite
requires that too).  The DFT convention (e^{-2πi(…)}, no normalisation) is the same on both sides.
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from .lowering.legalize_common import const_operand
from .lowering.numeric import static_shape
from .registry import legalize

#: the internal op that carries a complex value as its (real, imag) parts until its consumers are lowered
COMPLEX_PAIR = "tf2tosa.complex"
#: ops that know how to consume a complex pair
COMPLEX_CONSUMERS = frozenset({"tfl.complex_abs", "tfl.real", "tfl.imag"})

_NO_COMPLEX = "TOSA 1.0 has no complex tensors"


def _pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _check_consumers(b: Builder, op: Operation) -> None:
    """Refuse a complex result that a non-complex-aware op reads or that is a graph output."""
    r = op.results[0]
    g = b.graph
    if any(v is r for v in g.outputs):
        raise Unsupported(f"{op.name} result {r.source or r.name} is a complex64 model output: {_NO_COMPLEX} "
                          f"(output real/imag or complex_abs instead)")
    for user, _ in g.uses(r):
        if user.name not in COMPLEX_CONSUMERS:
            raise Unsupported(f"{op.name} result feeds {user.name} ({user.location}), which would need a complex64 "
                              f"tensor: {_NO_COMPLEX} (supported consumers: "
                              f"{', '.join(sorted(COMPLEX_CONSUMERS))})")


def make_complex(b: Builder, re: Value, im: Value, like: Value) -> Value:
    """The internal complex value standing for (re, im), typed like ``like`` (a complex64 result)."""
    op = b.graph.add_op(COMPLEX_PAIR, [re, im], [like.type], {}, [like.name + "_pair"], location=b.location)
    return op.result


def complex_parts(b: Builder, v: Value) -> tuple[Value, Value]:
    """(real, imag) fp32 values of a complex operand: a :data:`COMPLEX_PAIR` or a complex constant."""
    p = v.producer
    if p is not None and p.name == COMPLEX_PAIR:
        return p.operands[0], p.operands[1]
    arr = v.const()
    if arr is not None and np.iscomplexobj(arr):
        return (b.const(np.real(arr).astype(np.float32), DType.FP32, name="real"),
                b.const(np.imag(arr).astype(np.float32), DType.FP32, name="imag"))
    where = p.name if p is not None else "a model input"
    raise Unsupported(f"complex operand {v.source or v.name} comes from {where}: {_NO_COMPLEX}")


def _require_fp32_result(op: Operation) -> None:
    dt = op.results[0].dtype
    if dt is not DType.FP32:
        raise Unsupported(f"{op.name} with a {dt.value} result (complex64 → fp32 only)")


@legalize("tfl.rfft2d", arity=2)
def rfft2d(b: Builder, op: Operation) -> list[Value]:
    """RFFT2D on the [N, FH, FW] view after cropping / zero-padding to ``fft_length`` (EXT-FFT)."""
    x = op.operands[0]
    if x.dtype is not DType.FP32 or x.type.is_quantized:
        raise Unsupported(f"rfft2d of {x.type} (EXT-FFT RFFT2D is fp32 only)")
    if op.results[0].dtype is not DType.COMPLEX64:
        raise Unsupported(f"rfft2d with a {op.results[0].dtype.value} result")
    _check_consumers(b, op)
    shape = static_shape(x)
    if len(shape) < 2:
        raise Unsupported(f"rfft2d of a rank-{len(shape)} tensor")
    fl = [int(d) for d in np.asarray(const_operand(op, 1, "fft_length")).reshape(-1)]
    if len(fl) != 2:
        raise Unsupported(f"rfft2d fft_length {fl} must have 2 elements")
    fh, fw = fl
    if not (_pow2(fh) and _pow2(fw)):
        raise Unsupported(f"rfft2d fft_length {fl}: TOSA RFFT2D needs powers of two (S2957-2958)")
    lead, (h, w) = shape[:-2], shape[-2:]
    n = int(np.prod(lead)) if lead else 1
    x3 = b.reshape(x, [n, h, w])
    if h > fh or w > fw:
        x3 = b.slice(x3, [0, 0, 0], [n, min(h, fh), min(w, fw)])
    if h < fh or w < fw:
        x3 = b.pad(x3, [0, 0, 0, max(0, fh - h), 0, max(0, fw - w)], 0.0)
    fft = b.emit("RFFT2D", [x3], {"local_bound": False})
    out_shape = [*lead, fh, fw // 2 + 1]
    re, im = (b.reshape(r, out_shape) for r in fft.results)
    return [make_complex(b, re, im, op.results[0])]


@legalize("tfl.complex_abs", arity=1)
def complex_abs(b: Builder, op: Operation) -> list[Value]:
    """|z| = sqrt(re² + im²), as RECIPROCAL(RSQRT(re² + im²)) (TOSA 1.0 has no SQRT; 0 → 1/inf = 0)."""
    _require_fp32_result(op)
    re, im = complex_parts(b, op.operands[0])
    s = b.binary("ADD", b.mul(re, re), b.mul(im, im))
    return [b.reciprocal(b.rsqrt(s))]


@legalize("tfl.real", arity=1)
def real(b: Builder, op: Operation) -> list[Value]:
    """The real part of a complex value (a float input is returned as it is)."""
    _require_fp32_result(op)
    x = op.operands[0]
    if x.dtype is DType.FP32:
        return [x]
    return [complex_parts(b, x)[0]]


@legalize("tfl.imag", arity=1)
def imag(b: Builder, op: Operation) -> list[Value]:
    """The imaginary part of a complex value (zeros for a float input)."""
    _require_fp32_result(op)
    x = op.operands[0]
    if x.dtype is DType.FP32:
        return [b.const(np.zeros(static_shape(x), np.float32), DType.FP32, name="zero_imag")]
    return [complex_parts(b, x)[1]]
