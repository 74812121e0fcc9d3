"""Complex64 values carried as (real, imaginary) pairs of fp32 tensors between an FFT and its magnitude.

TOSA 1.0 has no complex element type, but its RFFT2D returns the real and imaginary parts as two fp32 tensors.
TFLite keeps the spectrum as one complex64 tensor and moves it through shape ops before taking its magnitude
(BirdNET: RFFT2D → SQUEEZE → CAST; ``tf.signal.stft`` / ``rfft``: RFFT2D → RESHAPE → COMPLEX_ABS).

before (a frontend graph; ``z``, ``w`` complex64)::

    x f32 ──tfl.rfft2d──► z ──tfl.squeeze / reshape / mul …──► w ──tfl.complex_abs / real / imag / cast──► y f32

after (every op of the complex part doubled on the parts, the result read off the pair)::

    x f32 ──tfl.rfft2d──► z ──tfl.real──► zr ──tfl.squeeze──► wr ──┐
                            └─tfl.imag──► zi ──tfl.squeeze──► wi ──┴─ tfl.mul ×2, tfl.add, tfl.sqrt ──► y f32

The RFFT2D rule (:mod:`tf2tosa.legalizations.tfl_fft`) still sees its complex result read by REAL / IMAG only.

Carried as a pair: the shape ops RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, SLICE, STRIDED_SLICE, GATHER (complex
params), REVERSE_V2, TILE, BROADCAST_TO, PAD (zero padding), IDENTITY, CONCATENATION and PACK (TFLite makes every
input complex64: a complex constant input is split into two fp32 constants; a real input, which only a hand-made
graph has, counts as a zero imaginary part), UNPACK, SPLIT and
SPLIT_V; ADD, SUB and MUL (complex × complex as (ac − bd, ad + bc); a real factor, or a CAST of a real tensor to
complex64, is a pair with no imaginary part, so complex × real is (ac, bc)); NEG.  Read off the pair:
COMPLEX_ABS = SQRT(re² + im²) (the arithmetic of the COMPLEX_ABS rule), REAL, IMAG, and CAST to a real type (the
real part, as LiteRT's CAST kernel takes it).

Any other op reading a complex value (DIV, EXP, LOG, SQRT … of complex64; none has a TFLite builtin kernel) and a
complex model output are refused: each failure is recorded on the context (gathered with every other unsupported op,
counted per op kind, naming the tensor), and every op of the complex part is returned so that the pipeline skips it
without reporting it again.  A graph whose complex
values are RFFT2D results read only by COMPLEX_ABS / REAL / IMAG (or that has none) is left as it is.

Reads: the frontend graph (``tfl`` ops, before legalization).  Writes: the graph (new ``tfl`` ops on fp32 parts,
the complex ops removed) and the context's failures.  Returns the ids of the ops the pipeline must skip.

Records (:mod:`tf2tosa.ir.records`): reads and writes none.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir import DType, Graph, Operation, TensorType, Value
from ...tosa.context import LegalizeContext

_C = DType.COMPLEX64
#: ops that copy or rearrange elements: done on each part alone; value: the operand positions holding data
_LAYOUT: dict[str, tuple[int, ...] | None] = {
    "tfl.reshape": (0,), "tfl.squeeze": (0,), "tfl.expand_dims": (0,), "tfl.transpose": (0,), "tfl.slice": (0,),
    "tfl.strided_slice": (0,), "tfl.gather": (0,), "tfl.reverse_v2": (0,), "tfl.tile": (0,),
    "tfl.broadcast_to": (0,), "tfl.pad": (0,), "tfl.identity": (0,), "tfl.unpack": (0,), "tfl.split": (1,),
    "tfl.split_v": (0,), "tfl.concatenation": None, "tfl.pack": None,  # None: every operand
}
_ARITH = frozenset({"tfl.add", "tfl.sub", "tfl.mul", "tfl.neg"})
_TERMINAL = frozenset({"tfl.complex_abs", "tfl.real", "tfl.imag", "tfl.cast"})
#: what the legalization rules take as they are: RFFT2D results read only by these
_LEGACY_CONSUMERS = frozenset({"tfl.complex_abs", "tfl.real", "tfl.imag", "tf.ComplexAbs", "tf.Real", "tf.Imag"})
#: the FFTs whose (real, imaginary) result the rules give (tfl_fft, tf_fft)
_LEGACY_SOURCES = frozenset({"tfl.rfft2d", "tf.RFFT"})
_NO_COMPLEX = "TOSA 1.0 has no complex tensors"

Pair = tuple[Value, Value | None]  # (real, imaginary); None: an imaginary part of zeros


def _is_complex(v: Value) -> bool:
    return v.dtype is _C


def _name(v: Value) -> str:
    return v.source or v.name


def _fused_none(op: Operation) -> bool:
    return op.attrs.get("fused_activation_function", "NONE") in ("NONE", None)


def _complex_ops(graph: Graph) -> list[Operation]:
    """The ops (in topological order) with a complex64 operand or result, constants aside."""
    return [op for op in graph.topological_order() if not op.name.endswith(".const")
            and any(_is_complex(v) for v in (*op.operands, *op.results))]


def _legacy(graph: Graph, ops: list[Operation]) -> bool:
    """Every complex value is an RFFT2D (or tf.RFFT) result read only by COMPLEX_ABS / REAL / IMAG (what the rules
    take)."""
    for op in ops:
        if op.name in _LEGACY_SOURCES:
            if any(u.name not in _LEGACY_CONSUMERS for r in op.results for u, _ in graph.uses(r)):
                return False
        elif op.name not in _LEGACY_CONSUMERS or any(_is_complex(r) for r in op.results):
            return False
    return True


def _why_not(graph: Graph, op: Operation) -> str | None:
    """Why ``op`` (reading or making a complex64 value) cannot be carried on real/imaginary pairs, or None."""
    cin = [v for v in op.operands if _is_complex(v)]
    for r in op.results:
        if _is_complex(r) and r in graph.outputs:
            return f"result {_name(r)!r} is a complex64 model output: {_NO_COMPLEX} (output real/imag or " \
                   "complex_abs instead)"
    if not cin:
        if op.name in ("tfl.rfft2d", "tfl.cast"):
            return None
        return f"makes a complex64 tensor {_name(op.results[0])!r}: {_NO_COMPLEX}, and no real/imaginary form"
    where = f"complex64 operand {_name(cin[0])!r}"
    if any(v.dtype is DType.COMPLEX128 for v in (*op.operands, *op.results)):
        return f"{where} with complex128 values: {_NO_COMPLEX}"
    real = next((r for r in op.results if not _is_complex(r)), None)
    if real is not None and (op.name in _LAYOUT or op.name in _ARITH):  # (a malformed graph: TFLite types it c64)
        return f"{where} with the {real.dtype.value} result {_name(real)!r} (a malformed model: {op.name[4:]} of " \
               "complex64 gives complex64)"
    if op.name in _LAYOUT:
        data = _LAYOUT[op.name]
        if data is not None and any(_is_complex(op.operands[k]) for k in range(len(op.operands)) if k not in data):
            return f"{where} in an index position"
        if op.name == "tfl.concatenation" and not _fused_none(op):
            return f"{where} with a fused activation"
        return None
    if op.name in _ARITH:
        if not _fused_none(op):
            return f"{where} with a fused {op.attrs.get('fused_activation_function')} activation: no complex form"
        if any(v.dtype not in (_C, DType.FP32) or v.type.is_quantized for v in op.operands):
            return f"{where} combined with a {next(v.dtype.value for v in op.operands if v.dtype is not _C)} tensor"
        return None
    if op.name in _TERMINAL:
        return None
    return f"{op.name} of the {where}: {_NO_COMPLEX}, and this op is not carried on real/imaginary pairs " \
           "(carried: shape ops, add, sub, mul, neg; read off: complex_abs, real, imag, cast)"


class _Rewriter:
    """Builds the fp32 pair ops of a graph whose complex part is all supported."""

    def __init__(self, graph: Graph) -> None:
        self.g = graph
        self.pairs: dict[int, Pair] = {}

    def f32(self, like: Value) -> TensorType:
        return TensorType(like.type.shape, DType.FP32)

    def op(self, name: str, operands: list[Value], like: list[Value], attrs: dict[str, object] | None,
           at: Operation) -> list[Value]:
        return self.g.add_op(name, operands, [self.f32(v) for v in like], attrs, location=at.location).results

    def zeros(self, like: Value) -> Value:
        return self.g.add_const(np.zeros(like.type.static_shape, np.float32), DType.FP32, name="zero_imag",
                                op_name="tfl.const")

    def pair(self, v: Value) -> Pair:
        """The pair standing for operand ``v``: made before, a complex constant split, or a real tensor (x, 0)."""
        if v.id in self.pairs:
            return self.pairs[v.id]
        if not _is_complex(v):
            return (v, None)
        arr = v.const()
        assert arr is not None, f"complex value {v} has no pair"
        p = (self.g.add_const(np.real(arr).astype(np.float32), DType.FP32, name="real", op_name="tfl.const"),
             self.g.add_const(np.imag(arr).astype(np.float32), DType.FP32, name="imag", op_name="tfl.const"))
        self.pairs[v.id] = p
        return p

    def imag(self, p: Pair, like: Value) -> Value:
        return p[1] if p[1] is not None else self.zeros(like)

    def binary(self, name: str, a: Value, b: Value, like: Value, at: Operation) -> Value:
        return self.op(name, [a, b], [like], {"fused_activation_function": "NONE"}, at)[0]

    # ------------------------------------------------------------------ per op
    def rfft2d(self, op: Operation) -> None:
        z = op.results[0]
        self.pairs[z.id] = (self.op("tfl.real", [z], [z], None, op)[0], self.op("tfl.imag", [z], [z], None, op)[0])

    def layout(self, op: Operation) -> None:
        data = _LAYOUT[op.name]
        pos = [k for k in range(len(op.operands)) if data is None or k in data]
        pairs = {k: self.pair(op.operands[k]) for k in pos}
        reals = self.op(op.name, [pairs[k][0] if k in pairs else v for k, v in enumerate(op.operands)],
                        op.results, op.attrs, op)
        if all(p[1] is None for p in pairs.values()):
            ims: list[Value | None] = [None] * len(reals)
        else:
            ops = [self.imag(pairs[k], op.operands[k]) if k in pairs else v for k, v in enumerate(op.operands)]
            ims = list(self.op(op.name, ops, op.results, op.attrs, op))
        for r, re, im in zip(op.results, reals, ims):
            self.pairs[r.id] = (re, im)

    def arith(self, op: Operation) -> None:
        out = op.results[0]
        if op.name == "tfl.neg":
            a, b = self.pair(op.operands[0])
            self.pairs[out.id] = (self.op("tfl.neg", [a], [out], None, op)[0],
                                  None if b is None else self.op("tfl.neg", [b], [out], None, op)[0])
            return
        (a, b), (c, d) = self.pair(op.operands[0]), self.pair(op.operands[1])
        if op.name in ("tfl.add", "tfl.sub"):
            re = self.binary(op.name, a, c, out, op)
            if d is None:
                im = b
            elif b is None:
                im = d if op.name == "tfl.add" else self.op("tfl.neg", [d], [out], None, op)[0]
            else:
                im = self.binary(op.name, b, d, out, op)
            self.pairs[out.id] = (re, im)
            return

        def mul(x: Value, y: Value) -> Value:
            return self.binary("tfl.mul", x, y, out, op)

        if b is None and d is None:
            self.pairs[out.id] = (mul(a, c), None)
        elif d is None:
            self.pairs[out.id] = (mul(a, c), mul(b, c) if b is not None else None)
        elif b is None:
            self.pairs[out.id] = (mul(a, c), mul(a, d))
        else:  # (a + bi)(c + di) = (ac - bd) + (ad + bc)i
            self.pairs[out.id] = (self.binary("tfl.sub", mul(a, c), mul(b, d), out, op),
                                  self.binary("tfl.add", mul(a, d), mul(b, c), out, op))

    def source(self, op: Operation) -> None:
        """CAST of a real tensor to complex64: (x as fp32, 0)."""
        x, out = op.operands[0], op.results[0]
        re = x if x.dtype is DType.FP32 and not x.type.is_quantized else \
            self.op("tfl.cast", [x], [out], {"in_data_type": "", "out_data_type": "FLOAT32"}, op)[0]
        self.pairs[out.id] = (re, None)

    def terminal(self, op: Operation) -> Value:
        """The value that replaces ``op``'s (real) result."""
        out = op.results[0]
        re, im = self.pair(op.operands[0])
        if op.name == "tfl.real" or (op.name == "tfl.cast" and out.dtype is DType.FP32):
            return re
        if op.name == "tfl.imag":
            return self.imag((re, im), op.operands[0])
        if op.name == "tfl.cast":
            return self.g.add_op("tfl.cast", [re], [out.type], dict(op.attrs), location=op.location).result
        if im is None:
            return self.op("tfl.abs", [re], [out], None, op)[0]
        s = self.binary("tfl.add", self.binary("tfl.mul", re, re, out, op), self.binary("tfl.mul", im, im, out, op),
                        out, op)
        return self.op("tfl.sqrt", [s], [out], None, op)[0]


def complex_pairs(graph: Graph, context: LegalizeContext) -> frozenset[int]:
    """Carry the graph's complex64 values as real/imaginary pairs; returns the ids of ops the pipeline must skip
    (every op of the complex part, when one of them was refused: its failure is recorded on ``context``)."""
    ops = _complex_ops(graph)
    if not ops or _legacy(graph, ops):
        return frozenset()
    refused = [(op, why) for op in ops if (why := _why_not(graph, op)) is not None]
    if refused:
        for op, why in refused:
            context.fail(op.name, why)
        return frozenset(op.id for op in ops)
    rw = _Rewriter(graph)
    handlers: dict[str, Callable[[Operation], None]] = {"tfl.rfft2d": rw.rfft2d}
    replaced: list[tuple[Value, Value]] = []
    for op in ops:
        if op.name in handlers:
            handlers[op.name](op)
        elif op.name in _LAYOUT:
            rw.layout(op)
        elif op.name in _ARITH:
            rw.arith(op)
        elif op.name == "tfl.cast" and not _is_complex(op.operands[0]):
            rw.source(op)
        elif op.name == "tfl.cast" and _is_complex(op.results[0]):  # complex64 → complex64
            rw.pairs[op.results[0].id] = rw.pair(op.operands[0])
        else:
            replaced.append((op.results[0], rw.terminal(op)))
    for old, new in replaced:
        if new.source is None:
            new.source = old.source
        graph.replace_all_uses(old, new)
    for op in reversed(ops):
        if op.name != "tfl.rfft2d":
            graph.remove_op(op)
    for op in list(graph.ops.values()):  # complex constants split into pairs
        if op.name.endswith(".const") and _is_complex(op.results[0]) and not graph.uses(op.results[0]):
            graph.remove_op(op)
    return frozenset()


__all__ = ["complex_pairs"]
