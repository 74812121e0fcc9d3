"""Quantization-aware-trained (QAT) TensorFlow models → integer graphs, as TFLite's converter makes them.

A QAT model carries its quantization in ``FakeQuantWithMinMaxVars`` / ``…Args`` (activations) and
``FakeQuantWithMinMaxVarsPerChannel`` / ``…Vars`` on constants (weights).  :func:`apply_qat` rewrites the ``tf.*``
IR before legalization so that the values between FakeQuants become int8 values with :class:`QuantParams`, and the
ops on them become the quantized ops the existing ``tfl.*`` rules already lower bit-exactly with LiteRT's reference
kernels.  The TFLite converter's derivation is reproduced step by step (TensorFlow 2.21's MLIR converter: the
FakeQuant → QUANTIZE/DEQUANTIZE conversion, the quantize pass and the fusions):

* **Parameters** (:func:`tflite_qparams`): ranges narrower than 1e-6 widened to straddle ±1e-6; unsigned 8-bit
  storage [0, 255] ([1, 255] with ``narrow_range``), ``scale = (max − min)/(qmax − qmin)`` in double, the zero point
  from whichever of ``qmin − min/scale`` / ``qmax − max/scale`` carries the smaller rounding error, clamped to
  [qmin, qmax] and rounded half away from zero; then shifted by −128 to int8.  The file (and so every kernel) sees
  the scale rounded to float32; constants are quantized with the double scale.
* **Weights**: a FakeQuant on a constant is first folded by TensorFlow's own kernel (float32, TF's nudged range:
  :func:`~tf2tosa.legalizations.lowering.tf_ops.fake_quant_array`) and the result quantized with the double scale:
  ``clamp(round_half_away(fl64(v / s)) + zp)``.  Conv2D HWIO filters become OHWI, depthwise HWCM filters
  [1, KH, KW, C·M] (per-channel scales along M repeated per input channel), MatMul [IC, OC] weights [OC, IC].
* **Weights without FakeQuant** (:func:`ptq_weights`, listed in the report): quantized as TFLite's converter does
  with ``Optimize.DEFAULT`` — symmetric per output channel from the weights' own range, narrow range.
* **Biases**: BiasAdd (or an Add of a per-channel constant) after a weighted op becomes its int32 bias,
  ``round_half_away(b / (s_in·s_w[c]))`` with the double scales.
* **Fusion**: weighted op → [bias] → [Relu | Relu6] → FakeQuant becomes one ``tfl.conv_2d`` /
  ``tfl.depthwise_conv_2d`` / ``tfl.fully_connected`` with that fused activation and the FakeQuant's output
  parameters; Add/Sub/Mul → [Relu | Relu6] → FakeQuant likewise become ``tfl.add`` / ``tfl.sub`` / ``tfl.mul``.
  A FakeQuant between the op and the Relu is dropped, as TFLite's converter drops it.
* **Propagation**: MaxPool, AvgPool, Reshape, Squeeze, ExpandDims and Transpose keep their input's parameters
  (TFLite's same-scale ops; a following FakeQuant with other parameters becomes a requantizing QUANTIZE); Relu,
  Relu6, LeakyRelu, Mean, Maximum, Minimum and ConcatV2 take the parameters of the FakeQuant that consumes their
  result (Mean without one keeps its input's, as TFLite propagates them); Softmax and Sigmoid have TFLite's fixed
  int8 output (1/256, −128), Tanh (1/128, 0).
* **Boundaries**: a FakeQuant of a float value becomes ``tfl.quantize``; a quantized value read by an op that stays
  float (a *float island*, as in TFLite's output) goes through ``tfl.dequantize``; graph outputs are dequantized
  (``io="float"``, TFLite's default) or left int8 (``io="int8"``; inputs whose every use is a FakeQuant with the same
  parameters then become int8 inputs, TFLite's ``inference_input_type=tf.int8``).

Modes (``ConvertOptions.qat``):

* ``"auto"`` (default): integer when the FakeQuants cover the graph — every op between the graph inputs and
  outputs that does not compute on constants alone gets an integer lowering — else the float emulation of the
  FakeQuants (the reason is logged and kept in ``graph.record.qat``);
* ``"int8"``: integer wherever FakeQuants define the parameters; uncovered ops stay float islands between
  DEQUANTIZE and QUANTIZE, as in TFLite's conversion of the same model;
* ``"float"``: FakeQuants stay float emulation (bit-exact with TensorFlow's kernel).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConversionError, Unsupported
from ..ir import DType, Graph, Operation, QuantParams, TensorType, Value
from ..ir.graph import CONST_OPS
from ..options import ConvertOptions

log = logging.getLogger("tf2tosa")

MODES = ("auto", "int8", "float")
IO_MODES = ("float", "int8")

FAKE_QUANT = frozenset({"tf.FakeQuantWithMinMaxArgs", "tf.FakeQuantWithMinMaxVars",
                        "tf.FakeQuantWithMinMaxVarsPerChannel"})
#: TFLite's "same scale" ops: the result has the input's quantization (operand 0 is the data)
SAME_SCALE = frozenset({"tf.MaxPool", "tf.AvgPool", "tf.Reshape", "tf.Squeeze", "tf.ExpandDims", "tf.Transpose"})
#: ops whose int8 result takes the parameters of the FakeQuant reading it; value: indices of data operands
#: (None: all but the last, for ConcatV2's axis)
FROM_CONSUMER: dict[str, tuple[int, ...] | None] = {
    "tf.Relu": (0,), "tf.Relu6": (0,), "tf.LeakyRelu": (0,), "tf.Mean": (0,), "tf.Maximum": (0, 1),
    "tf.Minimum": (0, 1), "tf.ConcatV2": None,
}
#: of those, the ops whose result keeps the input's parameters when no FakeQuant reads it (TFLite propagates them)
PROPAGATE = frozenset({"tf.Mean"})
#: TFLite's fixed int8 output ranges (FixedOutputRangeInterface): (scale, zero point)
FIXED_OUTPUT = {"tf.Softmax": (1.0 / 256.0, -128), "tf.Sigmoid": (1.0 / 256.0, -128), "tf.Tanh": (1.0 / 128.0, 0)}
#: elementwise binaries fused with a following Relu/Relu6 into the tfl op
BINARY = {"tf.Add": "tfl.add", "tf.AddV2": "tfl.add", "tf.Sub": "tfl.sub", "tf.Mul": "tfl.mul"}
WEIGHTED = frozenset({"tf.Conv2D", "tf.DepthwiseConv2dNative", "tf.MatMul"})
#: ops that read only their operand's shape
SHAPE_OPS = frozenset({"tf.Shape", "tf.ShapeN", "tf.Size", "tf.Rank"})
ACTIVATIONS = {"tf.Relu": "RELU", "tf.Relu6": "RELU6"}

#: ranges narrower than this are widened (TFLite's kNearZeroTolerance)
NEAR_ZERO = 1.0e-6


# ------------------------------------------------------------------------------------------- numerics
def round_half_away(v: np.ndarray | float) -> np.ndarray:
    """Round half away from zero (``std::round`` / APFloat rmNearestTiesToAway), exactly: no ``x + 0.5``."""
    v = np.asarray(v, np.float64)
    t = np.trunc(v)
    return t + np.sign(v) * (np.abs(v - t) >= 0.5)


@dataclass(frozen=True)
class QParams:
    """TFLite-converter quantization of one FakeQuant: double scales (what constants are quantized with), signed
    int8 zero points and the storage range."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    qmin: int
    qmax: int

    def quant(self, axis: int | None = None) -> QuantParams:
        """The IR parameters: scales rounded to float32, as the ``.tflite`` file stores them."""
        per = axis if len(self.scale) > 1 else None
        return QuantParams(tuple(float(np.float32(s)) for s in self.scale), tuple(self.zero_point), per)


def tflite_qparams(lo: Sequence[float] | np.ndarray, hi: Sequence[float] | np.ndarray, num_bits: int = 8,
                   narrow_range: bool = False) -> QParams:
    """TFLite's converter parameters of a FakeQuant with float32 ``lo``/``hi`` (scalars or per-channel vectors).

    ExpandVerySmallRange, then fakeQuantAttrsToType with unsigned storage (the converter's FakeQuant conversion
    passes ``is_signed=false``) and the unsigned → int8 shift by 128; see the module docstring.
    """
    if num_bits != 8:
        raise Unsupported(f"FakeQuant with num_bits {num_bits} (integer QAT conversion is int8 only)")
    qmin, qmax = (1 if narrow_range else 0), 255
    scales: list[float] = []
    zps: list[int] = []
    for a, c in zip(np.asarray(lo, np.float32).reshape(-1), np.asarray(hi, np.float32).reshape(-1)):
        rmin, rmax = float(a), float(c)
        if not rmax - rmin > NEAR_ZERO:
            rmin, rmax = min(rmin, -NEAR_ZERO), max(rmax, NEAR_ZERO)
        if abs(rmax - rmin) < np.finfo(np.float64).eps:
            scales.append(1.0)
            zps.append(qmin - 128)
            continue
        scale = (rmax - rmin) / float(qmax - qmin)
        from_min, err_min = qmin - rmin / scale, abs(qmin) + abs(rmin / scale)
        from_max, err_max = qmax - rmax / scale, abs(qmax) + abs(rmax / scale)
        z = from_min if err_min < err_max else from_max
        zp = qmin if z < qmin else qmax if z > qmax else int(round_half_away(np.float64(z)))
        scales.append(scale)
        zps.append(zp - 128)
    if not scales:
        raise Unsupported("FakeQuant without a range")
    return QParams(tuple(scales), tuple(zps), qmin - 128, qmax - 128)


def quantize_weights(w: np.ndarray, lo: np.ndarray, hi: np.ndarray, num_bits: int, narrow_range: bool,
                     qp: QParams) -> np.ndarray:
    """int8 codes of a fake-quantized constant (channels on the last axis): TF's kernel, then the converter's
    quantization with the double scale (module docstring)."""
    from ..legalizations.lowering.tf_ops import fake_quant_array

    folded = fake_quant_array(w, lo, hi, num_bits, narrow_range).astype(np.float64)
    scale = np.asarray(qp.scale, np.float64)
    zp = np.asarray(qp.zero_point, np.float64)
    q = round_half_away(folded / scale) + zp
    return np.clip(q, qp.qmin, qp.qmax).astype(np.int8)


def ptq_weights(w: np.ndarray, axis: int) -> tuple[np.ndarray, QParams]:
    """TFLite's quantization of a float weight without FakeQuant (GetUniformQuantizedPerAxisTypeForWeight):
    symmetric per channel along ``axis``, narrow range, ``[-max|w|, max|w|]`` through :func:`tflite_qparams`;
    codes ``round_half_away(w / s)``.  Returns (int8 codes, parameters)."""
    w = np.asarray(w, np.float32)
    other = tuple(i for i in range(w.ndim) if i != axis)
    bound = np.abs(w).max(axis=other) if w.size else np.zeros(w.shape[axis], np.float32)
    qp = tflite_qparams(-bound, bound, 8, True)
    shape = [1] * w.ndim
    shape[axis] = -1
    scale = np.asarray(qp.scale, np.float64).reshape(shape)
    zp = np.asarray(qp.zero_point, np.float64).reshape(shape)
    q = np.clip(round_half_away(w.astype(np.float64) / scale) + zp, qp.qmin, qp.qmax)
    return q.astype(np.int8), qp


def quantize_bias(bias: np.ndarray, in_scale: float, w_scales: Sequence[float]) -> tuple[np.ndarray, list[float]]:
    """int32 bias ``round_half_away(b / (s_in·s_w[c]))`` (double scales) and its scales."""
    s = np.float64(in_scale) * np.asarray(w_scales, np.float64)
    q = round_half_away(np.asarray(bias, np.float64).reshape(-1) / s)
    info = np.iinfo(np.int32)
    return np.clip(q, info.min, info.max).astype(np.int32), [float(v) for v in np.broadcast_to(s, q.shape)]


# --------------------------------------------------------------------------------------- constant values
class _Consts:
    """Values computed from constants only (the weight cone: ReadVariableOp'd kernels, Abs/Max/Neg of ranges) and
    values computed from shapes only (Keras' Flatten: Shape → StridedSlice → Pack, static once the batch size is
    set): which ones, and the arrays of the former, evaluated by the registered rules on a scratch graph (TOSA
    constant folding)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.derived: set[int] = set()
        self.meta: set[int] = set()
        for op in graph.topological_order():
            if op.name in CONST_OPS or (op.operands and not op.regions
                                        and all(v.id in self.derived for v in op.operands)):
                self.derived.update(r.id for r in op.results)
            elif op.name in SHAPE_OPS or (op.operands and not op.regions and all(
                    v.id in self.derived or v.id in self.meta for v in op.operands)):
                self.meta.update(r.id for r in op.results)
        self.memo: dict[int, np.ndarray | None] = {}

    def is_const(self, v: Value) -> bool:
        return v.id in self.derived

    def is_static(self, v: Value) -> bool:
        """A constant, or a value computed from tensor shapes only."""
        return v.id in self.derived or v.id in self.meta

    def get(self, v: Value) -> np.ndarray | None:
        if v.id not in self.memo:
            self.memo[v.id] = self._eval(v) if v.id in self.derived else None
        return self.memo[v.id]

    def _eval(self, v: Value) -> np.ndarray | None:
        c = v.const()
        if c is not None:
            return np.asarray(c)
        op = v.producer
        if op is None or not op.name.startswith("tf."):
            return None
        args = [self.get(a) for a in op.operands]
        if any(a is None for a in args):
            return None
        if op.name in FAKE_QUANT:  # TF's kernel, as TF's constant folding runs it
            from ..legalizations.lowering.tf_ops import fake_quant_array

            lo, hi = (np.asarray(op.attrs.get(k, d), np.float32) for k, d in (("min", -6.0), ("max", 6.0))) \
                if op.name == "tf.FakeQuantWithMinMaxArgs" else (args[1], args[2])
            return fake_quant_array(np.asarray(args[0]), np.asarray(lo), np.asarray(hi),
                                    int(op.attrs.get("num_bits", 8)), bool(op.attrs.get("narrow_range", False)))
        from ..legalizations.driver import legalize_op, missing_rule
        from ..tosa.builder import Builder

        if missing_rule(op) is not None:
            return None
        scratch = Graph("fold")
        ins = []
        for i, (a, arr) in enumerate(zip(op.operands, args)):
            assert arr is not None
            ins.append(scratch.add_op("tf.Const", [], [TensorType(np.shape(arr), a.dtype)],
                                      {"values": np.asarray(arr), "dtype": a.dtype}, [f"c{i}"]).result)
        copy = scratch.add_op(op.name, ins, [TensorType(r.shape, r.dtype) for r in op.results], dict(op.attrs),
                              [f"r{i}" for i in range(len(op.results))], location=op.location)
        try:
            outs = legalize_op(Builder(scratch, location=op.location, fold=True), copy, exact_results=False)
        except (Unsupported, ConversionError, ValueError, TypeError, KeyError, IndexError):
            return None
        out = outs[v.index].const() if v.index < len(outs) else None
        return None if out is None else np.asarray(out)


# ------------------------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class _Q:
    """The int8 twin of a float value: IR parameters and the double scale constants are quantized with."""

    quant: QuantParams
    scale: float


@dataclass
class QatReport:
    """What :func:`apply_qat` did (also stored as ``graph.record.qat``)."""

    requested: str
    io: str
    mode: str = "float"  # what the graph became: "int8" or "float"
    fake_quants: int = 0
    quantized_ops: int = 0
    float_ops: list[str] = field(default_factory=list)
    #: weights without a FakeQuant, quantized per channel from their own range as TFLite does
    ptq_weights: list[str] = field(default_factory=list)
    #: output name -> (scale, zero point) of the int8 value it is (or dequantizes)
    outputs: dict[str, tuple[float, int]] = field(default_factory=dict)
    reason: str | None = None

    def as_meta(self) -> dict[str, Any]:
        return {"requested": self.requested, "io": self.io, "mode": self.mode, "fake_quants": self.fake_quants,
                "quantized_ops": self.quantized_ops, "float_ops": list(self.float_ops),
                "ptq_weights": list(self.ptq_weights), "outputs": dict(self.outputs), "reason": self.reason}


@dataclass
class _Action:
    kind: str  # fq | weighted | binary | same | consumer | fixed | float | shape
    op: Operation
    fq: Operation | None = None  # the FakeQuant whose result the action produces
    quant: _Q | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class _Planner:
    """Decides, in topological order, which ops get an integer lowering and the parameters of every int8 value."""

    def __init__(self, graph: Graph, io: str) -> None:
        self.graph = graph
        self.io = io
        self.consts = _Consts(graph)
        self.q: dict[int, _Q] = {}  # value id -> twin parameters
        self.actions: list[_Action] = []
        self.taken: set[int] = set()  # ops absorbed by an earlier action
        self.float_reasons: list[tuple[Operation, str]] = []
        self.int8_inputs: dict[int, _Q] = {}
        self.fq_params: dict[int, QParams] = {}
        self.ptq: list[str] = []  # weights without FakeQuant, quantized like TFLite's weight quantization

    # ----------------------------------------------------------------- helpers
    def fq_range(self, op: Operation) -> tuple[np.ndarray, np.ndarray, int, bool]:
        """(min, max, num_bits, narrow_range) of a FakeQuant op; Unsupported when min/max are not constant."""
        bits, narrow = int(op.attrs.get("num_bits", 8)), bool(op.attrs.get("narrow_range", False))
        if op.name == "tf.FakeQuantWithMinMaxArgs":
            lo = np.array([op.attrs.get("min", -6.0)], np.float32)
            hi = np.array([op.attrs.get("max", 6.0)], np.float32)
        else:
            lo_a, hi_a = self.consts.get(op.operands[1]), self.consts.get(op.operands[2])
            if lo_a is None or hi_a is None:
                raise Unsupported(f"{op.name} with min/max that are not constants")
            lo, hi = np.asarray(lo_a, np.float32).reshape(-1), np.asarray(hi_a, np.float32).reshape(-1)
        if lo.shape != hi.shape or np.any(lo > hi):
            raise Unsupported(f"{op.name} with min {lo.tolist()} / max {hi.tolist()}")
        return lo, hi, bits, narrow

    def params(self, op: Operation) -> QParams:
        if op.id not in self.fq_params:
            lo, hi, bits, narrow = self.fq_range(op)
            self.fq_params[op.id] = tflite_qparams(lo, hi, bits, narrow)
        return self.fq_params[op.id]

    def act_fq(self, v: Value) -> tuple[Operation, _Q] | None:
        """The activation FakeQuant that is ``v``'s only use (per tensor, constant range), with its parameters."""
        uses = self.graph.uses(v)
        if len(uses) != 1 or v in self.graph.outputs:
            return None
        op, k = uses[0]
        if op.name not in FAKE_QUANT or k != 0 or op.id in self.taken:
            return None
        try:
            qp = self.params(op)
        except Unsupported:
            return None
        if len(qp.scale) != 1:
            return None
        return op, _Q(qp.quant(), qp.scale[0])

    def sole_use(self, v: Value) -> Operation | None:
        uses = self.graph.uses(v)
        if len(uses) != 1 or v in self.graph.outputs:
            return None
        return uses[0][0]

    def act_chain(self, v: Value) -> tuple[Value, str, list[Operation]]:
        """A Relu/Relu6 that is ``v``'s only use: (its result, the fused activation name, [the ops absorbed]).

        A FakeQuant between ``v`` and the activation, when the activation's result has a FakeQuant of its own, is
        dropped as TFLite's converter drops it (op → FQ → Relu → FQ fuses into one op with the last parameters)."""
        nxt = self.sole_use(v)
        if nxt is not None and nxt.name in ACTIVATIONS and nxt.id not in self.taken:
            return nxt.result, ACTIVATIONS[nxt.name], [nxt]
        if nxt is not None and self.act_fq(v) is not None:
            act = self.sole_use(nxt.result)
            if act is not None and act.name in ACTIVATIONS and act.id not in self.taken \
                    and self.act_fq(act.result) is not None:
                return act.result, ACTIVATIONS[act.name], [nxt, act]
        return v, "NONE", []

    def float_op(self, op: Operation, reason: str) -> None:
        self.float_reasons.append((op, reason))
        self.actions.append(_Action("float", op))

    # --------------------------------------------------------------------- walk
    def run(self) -> None:
        if self.io == "int8":
            self._int8_inputs()
        for op in self.graph.topological_order():
            if op.id in self.taken or op.name in CONST_OPS or all(self.consts.is_const(r) for r in op.results):
                continue
            if op.name in SHAPE_OPS:  # reads the int8 twin's (equal) shape; keeps no float value alive
                self.actions.append(_Action("shape", op))
                continue
            if all(self.consts.is_static(r) for r in op.results):
                continue
            if op.name in FAKE_QUANT:
                reason = self._fake_quant(op)
            elif op.name in WEIGHTED:
                reason = self._weighted(op)
            elif op.name in BINARY:
                reason = self._binary(op)
            elif op.name in SAME_SCALE:
                reason = self._same_scale(op)
            elif op.name in FROM_CONSUMER:
                reason = self._from_consumer(op)
            elif op.name in FIXED_OUTPUT:
                reason = self._fixed(op)
            else:
                reason = "no integer lowering in QAT conversion"
            if reason is not None:
                self.float_op(op, reason)

    def _int8_inputs(self) -> None:
        for v in self.graph.inputs:
            uses = self.graph.uses(v)
            if not uses or v in self.graph.outputs or v.dtype is not DType.FP32:
                continue
            found: set[_Q] = set()
            for op, k in uses:
                if op.name not in FAKE_QUANT or k != 0:
                    break
                try:
                    qp = self.params(op)
                except Unsupported:
                    break
                if len(qp.scale) != 1:
                    break
                found.add(_Q(qp.quant(), qp.scale[0]))
            else:
                if len(found) == 1:
                    self.int8_inputs[v.id] = self.q[v.id] = found.pop()

    def _fake_quant(self, op: Operation) -> str | None:
        try:
            qp = self.params(op)
        except Unsupported as e:
            return e.reason
        if len(qp.scale) != 1:
            return "per-channel FakeQuant of an activation"
        self.q[op.result.id] = _Q(qp.quant(), qp.scale[0])
        self.actions.append(_Action("fq", op, op, self.q[op.result.id]))
        return None

    def _weight(self, v: Value) -> tuple[np.ndarray, QParams | None, np.ndarray | None] | str:
        """(float weights, parameters, int8 codes) in TF layout of a fake-quantized constant; parameters and codes
        are None for a constant without FakeQuant (quantized later like TFLite's weight quantization)."""
        fq = v.producer
        if fq is None or fq.name not in FAKE_QUANT:
            plain = self.consts.get(v)
            if plain is None or plain.dtype != np.float32:
                return "weights are not constant"
            return np.asarray(plain, np.float32), None, None
        w = self.consts.get(fq.operands[0])
        if w is None:
            return "weights are not constant"
        try:
            lo, hi, bits, narrow = self.fq_range(fq)
            qp = tflite_qparams(lo, hi, bits, narrow)
        except Unsupported as e:
            return e.reason
        if len(set(qp.zero_point)) != 1:
            return "per-channel weight zero points differ"
        if len(qp.scale) > 1 and (w.ndim == 0 or w.shape[-1] != len(qp.scale)):
            return f"{len(qp.scale)} weight ranges for weights of shape {list(w.shape)}"
        return np.asarray(w, np.float32), qp, quantize_weights(w, lo, hi, bits, narrow, qp)

    def _bias(self, v: Value, oc: int) -> tuple[np.ndarray | None, Value, list[Operation]]:
        """A BiasAdd / Add of a constant [OC] vector that is ``v``'s only use."""
        nxt = self.sole_use(v)
        if nxt is None or nxt.id in self.taken or nxt.name not in ("tf.BiasAdd", "tf.BiasAddV1", "tf.Add",
                                                                     "tf.AddV2"):
            return None, v, []
        if nxt.name == "tf.BiasAdd" and (nxt.attrs.get("data_format") or "NHWC") != "NHWC":
            return None, v, []
        other = nxt.operands[1] if nxt.operands[0] is v else nxt.operands[0]
        if nxt.name.startswith("tf.BiasAdd") and nxt.operands[0] is not v:
            return None, v, []
        arr = self.consts.get(other)
        if arr is None or arr.size != oc or arr.dtype != np.float32:
            return None, v, []
        if arr.ndim > 1 and any(d != 1 for d in arr.shape[:-1]):
            return None, v, []
        return arr.reshape(-1), nxt.result, [nxt]

    def _weighted(self, op: Operation) -> str | None:
        x, f = op.operands[0], op.operands[1]
        if x.id not in self.q:
            return "input is not quantized (no FakeQuant before it)"
        wt = self._weight(f)
        if isinstance(wt, str):
            return wt
        w, qp, codes = wt
        attrs: dict[str, Any] = {}
        layout: Callable[[np.ndarray], np.ndarray]
        if op.name == "tf.MatMul":
            if op.attrs.get("transpose_a") or x.type.rank != 2 or w.ndim != 2:
                return "MatMul with transpose_a or operands of rank other than 2"
            if op.attrs.get("transpose_b"):
                if qp is not None and len(qp.scale) > 1:
                    return "per-channel FakeQuant along the input axis of transposed MatMul weights"
                layout = np.asarray
            else:
                layout = np.transpose
            name, axis = "tfl.fully_connected", 0
            attrs.update(weights_format="DEFAULT", keep_num_dims=False)
        else:
            if (op.attrs.get("data_format") or "NHWC") != "NHWC":
                return "NCHW convolution"
            padding = str(op.attrs.get("padding", "VALID"))
            if padding not in ("SAME", "VALID"):
                return f"padding {padding}"
            from ..legalizations.lowering import tf_ops

            stride = tf_ops.spatial(op.attrs.get("strides"), False)
            dil = tf_ops.spatial(op.attrs.get("dilations"), False)
            attrs.update(padding=padding, stride_h=stride[0], stride_w=stride[1], dilation_h_factor=dil[0],
                         dilation_w_factor=dil[1])
            if w.ndim != 4:
                return f"convolution weights of rank {w.ndim}"
            if op.name == "tf.Conv2D":
                layout, name, axis = (lambda a: np.transpose(a, (3, 0, 1, 2))), "tfl.conv_2d", 0
            else:
                kh, kw, c, m = w.shape
                layout, name, axis = (lambda a: np.reshape(a, (1, kh, kw, c * m))), "tfl.depthwise_conv_2d", 3
                attrs["depth_multiplier"] = m
                if qp is not None and len(qp.scale) > 1:  # channel c·M + m has the scale of m
                    qp = QParams(tuple(np.tile(qp.scale, c)), tuple(np.tile(qp.zero_point, c)), qp.qmin, qp.qmax)
        ptq = qp is None or codes is None
        if qp is None or codes is None:
            tfl_w, qp = ptq_weights(layout(w), axis)
        else:
            tfl_w = layout(codes)
        oc = int(tfl_w.shape[axis])
        bias, cur, chain = self._bias(op.result, oc)
        cur, act, act_ops = self.act_chain(cur)
        found = self.act_fq(cur)
        if found is None:
            return "no FakeQuant on the result (after the bias and activation)"
        fq, out_q = found
        self.q[fq.result.id] = out_q
        for o in chain + act_ops + [fq]:
            self.taken.add(o.id)
        if ptq:
            self.ptq.append(f"{op.location or op.result.name}")
        attrs["fused_activation_function"] = act
        self.actions.append(_Action("weighted", op, fq, out_q, {
            "name": name, "attrs": attrs, "weights": tfl_w, "wq": qp, "axis": axis, "oc": oc, "bias": bias}))
        return None

    def _binary(self, op: Operation) -> str | None:
        x, y = op.operands[0], op.operands[1]
        if x.id not in self.q or y.id not in self.q:
            return "operands are not both quantized"
        cur, act, act_ops = self.act_chain(op.result)
        found = self.act_fq(cur)
        if found is None:
            return "no FakeQuant on the result"
        fq, out_q = found
        self.q[fq.result.id] = out_q
        for o in act_ops + [fq]:
            self.taken.add(o.id)
        self.actions.append(_Action("binary", op, fq, out_q, {"name": BINARY[op.name], "act": act}))
        return None

    def _others_const(self, op: Operation, data: Sequence[int]) -> bool:
        return all(self.consts.is_static(v) for k, v in enumerate(op.operands) if k not in data)

    def _same_scale(self, op: Operation) -> str | None:
        x = op.operands[0]
        if x.id not in self.q:
            return "input is not quantized"
        if not self._others_const(op, (0,)):
            return "non-constant parameters"
        if op.name in ("tf.MaxPool", "tf.AvgPool") and (
                op.attrs.get("padding") == "EXPLICIT" or (op.attrs.get("data_format") or "NHWC") != "NHWC"):
            return "EXPLICIT padding or NCHW pooling"
        self.q[op.result.id] = self.q[x.id]
        self.actions.append(_Action("same", op, None, self.q[x.id]))
        return None

    def _from_consumer(self, op: Operation) -> str | None:
        idx = FROM_CONSUMER[op.name]
        data = tuple(range(len(op.operands) - 1)) if idx is None else idx
        if not all(op.operands[k].id in self.q for k in data):
            return "input is not quantized"
        if not self._others_const(op, data):
            return "non-constant parameters"
        found = self.act_fq(op.result)
        if found is None:
            if op.name not in PROPAGATE or data[0] not in range(len(op.operands)):
                return "no FakeQuant on the result"
            out_q = self.q[op.operands[data[0]].id]
            self.q[op.result.id] = out_q
            self.actions.append(_Action("consumer", op, None, out_q))
            return None
        fq, out_q = found
        self.q[fq.result.id] = out_q
        self.taken.add(fq.id)
        self.actions.append(_Action("consumer", op, fq, out_q))
        return None

    def _fixed(self, op: Operation) -> str | None:
        x = op.operands[0]
        if x.id not in self.q:
            return "input is not quantized"
        scale, zp = FIXED_OUTPUT[op.name]
        out_q = _Q(QuantParams((scale,), (zp,)), scale)
        self.q[op.result.id] = out_q
        self.actions.append(_Action("fixed", op, None, out_q))
        return None


# ---------------------------------------------------------------------------------------------- rewrite
class _Rewriter:
    """Builds the integer graph from the plan: new ops on int8 twins, float islands rewired to DEQUANTIZEs."""

    def __init__(self, graph: Graph, plan: _Planner, io: str) -> None:
        self.graph = graph
        self.plan = plan
        self.io = io
        self.twins: dict[int, Value] = {}
        self.deq: dict[int, Value] = {}
        self.count = 0
        self.output_quant: dict[str, tuple[float, int]] = {}

    def float_of(self, v: Value) -> Value:
        t = self.twins.get(v.id)
        if t is None:
            return v
        d = self.deq.get(v.id)
        if d is None:
            d = self.graph.add_op("tfl.dequantize", [t], [TensorType(t.shape, DType.FP32)], {}, [v.name + "_dq"],
                                  location=v.producer.location if v.producer else v.name).result
            d.source = v.source
            self.deq[v.id] = d
        return d

    def _const(self, arr: np.ndarray, dtype: DType, quant: QuantParams | None, name: str) -> Value:
        return self.graph.add_op("tfl.const", [], [TensorType(arr.shape, dtype, quant)], {"values": arr},
                                 [name]).result

    def _new(self, name: str, operands: Sequence[Value], like: Value, q: _Q, attrs: dict[str, Any],
             location: str | None) -> Value:
        self.count += 1
        r = self.graph.add_op(name, operands, [TensorType(like.shape, DType.INT8, q.quant)], attrs, [like.name],
                              location=location).result
        r.source = like.source
        return r

    def run(self) -> None:
        for v in self.graph.inputs:
            if v.id in self.plan.int8_inputs:
                v.type = TensorType(v.shape, DType.INT8, self.plan.int8_inputs[v.id].quant)
                self.twins[v.id] = v
        handlers: dict[str, Callable[[_Action], None]] = {
            "fq": self._fq, "weighted": self._weighted, "binary": self._binary, "same": self._same,
            "consumer": self._consumer, "fixed": self._consumer, "float": self._float, "shape": self._shape}
        for act in self.plan.actions:
            handlers[act.kind](act)
        self._outputs()

    def _fq(self, act: _Action) -> None:
        op = act.op
        assert act.quant is not None
        x = op.operands[0]
        src = self.twins.get(x.id)
        res = op.result
        if src is not None and src.type.quant == act.quant.quant:
            self.twins[res.id] = src
            return
        arg = src if src is not None else self.float_of(x)
        self.twins[res.id] = self._new("tfl.quantize", [arg], res, act.quant, {}, op.location)

    def _weighted(self, act: _Action) -> None:
        op, fq, e = act.op, act.fq, act.extra
        assert fq is not None and act.quant is not None
        x = self.twins[op.operands[0].id]
        wq: QParams = e["wq"]
        w = self._const(np.ascontiguousarray(e["weights"]), DType.INT8, wq.quant(e["axis"]), op.operands[1].name + "_q")
        operands = [x, w]
        if e["bias"] is not None:
            in_scale = self.plan.q[op.operands[0].id].scale
            ws = list(wq.scale) * (e["oc"] if len(wq.scale) == 1 else 1)
            codes, bscales = quantize_bias(e["bias"], in_scale, ws)
            bq = QuantParams(tuple(float(np.float32(s)) for s in bscales), (0,) * len(bscales), 0)
            operands.append(self._const(codes, DType.INT32, bq, op.result.name + "_bias"))
        self.twins[fq.result.id] = self._new(e["name"], operands, fq.result, act.quant, e["attrs"], op.location)

    def _binary(self, act: _Action) -> None:
        op, fq = act.op, act.fq
        assert fq is not None and act.quant is not None
        xs = [self.twins[v.id] for v in op.operands[:2]]
        attrs = {"fused_activation_function": act.extra["act"]}
        self.twins[fq.result.id] = self._new(act.extra["name"], xs, fq.result, act.quant, attrs, op.location)

    def _operands(self, op: Operation) -> list[Value]:
        return [self.twins.get(v.id, v) for v in op.operands]

    def _same(self, act: _Action) -> None:
        op = act.op
        assert act.quant is not None
        self.twins[op.result.id] = self._new(op.name, self._operands(op), op.result, act.quant, dict(op.attrs),
                                             op.location)

    def _consumer(self, act: _Action) -> None:
        op = act.op
        assert act.quant is not None
        like = act.fq.result if act.fq is not None else op.result
        self.twins[like.id] = self._new(op.name, self._operands(op), like, act.quant, dict(op.attrs), op.location)

    def _shape(self, act: _Action) -> None:
        op = act.op
        for k, v in enumerate(list(op.operands)):
            if v.id in self.twins:
                self.graph.set_operand(op, k, self.twins[v.id])

    def _float(self, act: _Action) -> None:
        op = act.op
        for k, v in enumerate(list(op.operands)):
            if v.id in self.twins:
                self.graph.set_operand(op, k, self.float_of(v))

    def _outputs(self) -> None:
        g = self.graph
        renames: list[tuple[Value, Value]] = []
        outs = []
        for v in g.outputs:
            if v.id not in self.twins:
                outs.append(v)
                continue
            t = self.twins[v.id]
            new = t if self.io == "int8" else self.float_of(v)
            if new is not v:
                new.source = v.source
                renames.append((v, new))
            outs.append(new)
        g.outputs = outs
        g.remove_dead_ops()
        live = {r.id for op in g.ops.values() for r in op.results} | {v.id for v in g.inputs}
        for old, new in renames:
            if old.id not in live and new not in g.inputs:
                g._names.discard(old.name)
                g._names.discard(new.name)
                new.name = g.unique_name(old.name)
        for v in g.outputs:
            q = v.type.quant if v.dtype is DType.INT8 else None
            if q is None and v.producer is not None and v.producer.name == "tfl.dequantize":
                q = v.producer.operands[0].type.quant
            if q is not None and not q.per_channel:
                self.output_quant[v.name] = (float(q.s), int(q.zp))


# ---------------------------------------------------------------------------------------------- entry
def options_of(options: ConvertOptions | None) -> tuple[str, str]:
    """(qat mode, io) from :class:`~tf2tosa.options.ConvertOptions` (``qat``, ``qat_io``; None: the defaults),
    checked."""
    mode = str(options.qat) if options is not None else "auto"
    io = str(options.qat_io) if options is not None else "float"
    if mode not in MODES:
        raise ConversionError(f"qat must be one of {', '.join(MODES)}, not {mode!r}")
    if io not in IO_MODES:
        raise ConversionError(f"qat_io must be one of {', '.join(IO_MODES)}, not {io!r}")
    return mode, io


def apply_qat(graph: Graph, mode: str = "auto", io: str = "float") -> QatReport:
    """Rewrite a ``tf.*`` graph with FakeQuant ops into an integer graph (see the module docstring).

    Returns the report (also stored as ``graph.record.qat``); the graph is unchanged when the result is "float".
    """
    if mode not in MODES or io not in IO_MODES:
        raise ConversionError(f"qat mode {mode!r} / io {io!r}: expected one of {MODES} / {IO_MODES}")
    report = QatReport(requested=mode, io=io)
    fqs = [op for op in graph.ops.values() if op.name in FAKE_QUANT]
    report.fake_quants = len(fqs)
    if mode == "float" or not fqs:
        report.reason = "qat='float'" if mode == "float" else None
        graph.record.qat = report.as_meta()
        return report
    plan = _Planner(graph, io)
    plan.run()
    report.float_ops = [f"{op.name} ({op.location or op.results[0].name}): {why}" for op, why in plan.float_reasons]
    report.ptq_weights = list(plan.ptq)
    acts = sum(1 for a in plan.actions if a.kind == "fq")
    if not acts:
        report.reason = "no FakeQuant of an activation"
    elif mode == "auto" and plan.float_reasons:
        report.reason = (f"FakeQuants do not cover {len(plan.float_reasons)} op(s); first: {report.float_ops[0]}"
                         " (qat='int8' keeps them as float islands)")
    if report.reason is not None:
        log.info("QAT: keeping the float emulation of %d FakeQuant op(s): %s", len(fqs), report.reason)
        graph.record.qat = report.as_meta()
        return report
    rw = _Rewriter(graph, plan, io)
    rw.run()
    report.mode = "int8"
    report.quantized_ops = rw.count
    report.outputs = rw.output_quant
    graph.record.qat = report.as_meta()
    return report


__all__ = ["FAKE_QUANT", "IO_MODES", "MODES", "QParams", "QatReport", "apply_qat", "options_of", "ptq_weights",
           "quantize_bias", "quantize_weights", "round_half_away", "tflite_qparams"]
