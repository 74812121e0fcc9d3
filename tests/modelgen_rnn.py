"""Builders of recurrent, FFT and sparse ``.tflite`` test models (cached like :mod:`modelgen`).

What TensorFlow 2.21 emits for recurrent layers (checked when this file was written):

* Keras 3 ``LSTM`` / ``GRU`` / ``SimpleRNN`` / ``Bidirectional(...)`` through ``TFLiteConverter`` give a ``WHILE``
  loop (plus RESHAPE, REVERSE_V2, CONCATENATION for Bidirectional), never the fused ops: Keras 3 no longer marks
  its LSTM function with ``api_implements``.
* The fused ``UNIDIRECTIONAL_SEQUENCE_LSTM`` comes from a function carrying Keras 2's markers
  (``api_implements="lstm_<uuid>"``, ``time_major``, ``go_backwards``; 6 arguments, 5 results), converted from a
  SavedModel - :func:`tf_lstm` builds exactly that; Keras 2's ``Bidirectional(LSTM)`` is two such layers, the
  backward one with ``go_backwards`` (REVERSE_V2 around it) and a CONCATENATION (:func:`tf_bilstm`).
* No TF2 path emits ``UNIDIRECTIONAL_SEQUENCE_RNN``, ``BIDIRECTIONAL_SEQUENCE_LSTM`` or
  ``BIDIRECTIONAL_SEQUENCE_RNN``, nor the LSTM variants (peephole, CIFG, projection, layer norm, clipping):
  :func:`one_op_model` writes such one-op models directly with TFLite's schema object API; LiteRT runs them and is
  the oracle like for every other model.

LiteRT 2.3 float-kernel bugs that these models steer around (tf2tosa implements the ops' documented semantics,
which is what the time-major paths compute):

* BIDIRECTIONAL_SEQUENCE_LSTM, batch-major with ``merge_outputs`` and batch > 1: the kernel offsets each batch's
  state by the *merged* width (``b * output_batch_leading_dim``) and reads past the state tensor; batch-major
  auxiliary inputs are addressed with the main input's width.  The batch-major merged model uses batch 1.
* BIDIRECTIONAL_SEQUENCE_RNN, batch-major in "non-stacking" mode (aux input without aux weights): the backward
  cell reads ``input`` instead of ``aux_input`` (the time-major path reads ``aux_input``).  That model is
  time-major.

FFT: ``tf.signal.rfft2d`` → RFFT2D, ``tf.abs`` of complex → COMPLEX_ABS, ``tf.math.real/imag`` → REAL/IMAG.
Sparse: ``optimizations=[EXPERIMENTAL_SPARSITY]`` on mostly-zero weights gives a sparse constant + DENSIFY (random
sparsity), or - for FULLY_CONNECTED with 1x4 block sparsity - a block-sparse weight read directly by the op.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tests.modelgen import _tf, cached


# ---------------------------------------------------------------------------------------------------------------
# One-op models written with the TFLite schema's object API
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class _Net:
    """A single-subgraph model under construction."""

    tensors: list[Any] = field(default_factory=list)
    buffers: list[Any] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    intermediates: list[int] = field(default_factory=list)

    def tensor(self, name: str, shape: Sequence[int], data: np.ndarray | None = None, variable: bool = False,
               dtype: str = "FLOAT32", quant: tuple[float, int] | None = None) -> int:
        """``dtype``: a TensorType name (the data is stored as that type); ``quant``: per-tensor (scale, zp)."""
        from tensorflow.lite.python import schema_py_generated as s

        t = s.TensorT()
        t.name = name.encode()
        t.shape = [int(d) for d in shape]
        t.type = getattr(s.TensorType, dtype)
        t.buffer = 0
        t.isVariable = variable
        if quant is not None:
            qp = s.QuantizationParametersT()
            qp.scale = [float(quant[0])]
            qp.zeroPoint = [int(quant[1])]
            t.quantization = qp
        if data is not None:
            np_type = {"FLOAT32": np.float32, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32}[dtype]
            buf = s.BufferT()
            buf.data = np.frombuffer(np.ascontiguousarray(data, np_type).tobytes(), np.uint8)
            self.buffers.append(buf)
            t.buffer = len(self.buffers)  # buffer 0 is the empty sentinel
        self.tensors.append(t)
        return len(self.tensors) - 1

    def input(self, name: str, shape: Sequence[int]) -> int:
        k = self.tensor(name, shape)
        self.inputs.append(k)
        return k


def one_op_model(code_name: str, options_name: str, options: dict[str, Any],
                 build: Callable[[_Net], tuple[list[int], list[tuple[str, list[int]]]]]) -> bytes:
    """A model with one builtin op.  ``build(net)`` creates the tensors and returns (op inputs, [(output name,
    shape)]); ``options`` are fields of the ``<options_name>T`` object (snake_case → camelCase)."""
    import flatbuffers
    from tensorflow.lite.python import schema_py_generated as s

    net = _Net()
    op_inputs, outs = build(net)
    out_idx = [net.tensor(name, shape) for name, shape in outs]
    code = getattr(s.BuiltinOperator, code_name)
    oc = s.OperatorCodeT()
    oc.builtinCode = code
    oc.deprecatedBuiltinCode = min(code, 127)
    oc.version = 1
    opts = getattr(s, options_name + "T")()
    for k, v in options.items():
        camel = k.split("_")[0] + "".join(p.title() for p in k.split("_")[1:])
        if not hasattr(opts, camel):
            raise AttributeError(f"{options_name} has no field {k}")
        setattr(opts, camel, v)
    o = s.OperatorT()
    o.opcodeIndex = 0
    o.inputs = list(op_inputs)
    o.outputs = out_idx
    if net.intermediates:
        o.intermediates = list(net.intermediates)
    o.builtinOptionsType = getattr(s.BuiltinOptions, options_name)
    o.builtinOptions = opts
    sg = s.SubGraphT()
    sg.tensors = net.tensors
    sg.inputs = net.inputs
    sg.outputs = out_idx
    sg.operators = [o]
    sg.name = b"main"
    m = s.ModelT()
    m.version = 3
    m.description = b"tf2tosa test model"
    m.operatorCodes = [oc]
    m.subgraphs = [sg]
    m.buffers = [s.BufferT(), *net.buffers]
    fb = flatbuffers.Builder(1024)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())


def _act_code(act: str) -> int:
    from tensorflow.lite.python import schema_py_generated as s

    return int(getattr(s.ActivationFunctionType, act))


def _w(rng: np.random.Generator, *shape: int, scale: float = 0.5) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _lstm_cell_tensors(net: _Net, rng: np.random.Generator, prefix: str, n_in: int, n_cell: int, n_out: int,
                       batch: int, *, cifg: bool, peephole: bool, projection: bool, proj_bias: bool,
                       layer_norm: bool, n_aux: int = 0) -> dict[str, list[int]]:
    """The tensors of one LSTM cell, in TFLite's operand groups (-1 = absent)."""
    def w(name: str, *shape: int, present: bool = True) -> int:
        return net.tensor(f"{prefix}{name}", shape, _w(rng, *shape)) if present else -1

    gates = ("input", "forget", "cell", "output")
    return {
        "x": [w(f"{g}_w", n_cell, n_in, present=not (cifg and g == "input")) for g in gates],
        "h": [w(f"{g}_r", n_cell, n_out, present=not (cifg and g == "input")) for g in gates],
        "peep": [w(f"{g}_peep", n_cell, present=peephole and not (cifg and g == "input"))
                 for g in ("input", "forget", "output")],
        "bias": [w(f"{g}_b", n_cell, present=not (cifg and g == "input")) for g in gates],
        "proj": [w("proj_w", n_out, n_cell, present=projection), w("proj_b", n_out, present=projection and proj_bias)],
        "state": [net.tensor(f"{prefix}h_state", (batch, n_out), variable=True),
                  net.tensor(f"{prefix}c_state", (batch, n_cell), variable=True)],
        "ln": [w(f"{g}_ln", n_cell, present=layer_norm and not (cifg and g == "input")) for g in gates],
        "aux": [w(f"{g}_aux", n_cell, n_aux, present=n_aux > 0 and not (cifg and g == "input")) for g in gates],
    }


def _ulstm_bytes(batch: int = 2, steps: int = 5, n_in: int = 3, n_cell: int = 4, n_out: int = 4,
                 time_major: bool = False, act: str = "TANH", cell_clip: float = 0.0, proj_clip: float = 0.0,
                 cifg: bool = False, peephole: bool = False, projection: bool = False, proj_bias: bool = True,
                 layer_norm: bool = False, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)

    def build(net: _Net) -> tuple[list[int], list[tuple[str, list[int]]]]:
        xs = (steps, batch, n_in) if time_major else (batch, steps, n_in)
        x = net.input("x0", xs)
        c = _lstm_cell_tensors(net, rng, "", n_in, n_cell, n_out if projection else n_cell, batch, cifg=cifg,
                               peephole=peephole, projection=projection, proj_bias=proj_bias, layer_norm=layer_norm)
        ins = [x, *c["x"], *c["h"], *c["peep"], *c["bias"], *c["proj"], *c["state"], *c["ln"]]
        no = n_out if projection else n_cell
        return ins, [("y", [steps, batch, no] if time_major else [batch, steps, no])]

    return one_op_model("UNIDIRECTIONAL_SEQUENCE_LSTM", "UnidirectionalSequenceLSTMOptions",
                        {"fused_activation_function": _act_code(act), "cell_clip": cell_clip, "proj_clip": proj_clip,
                         "time_major": time_major}, build)


def _lstm_step_bytes(batch: int = 2, n_in: int = 3, n_cell: int = 4, peephole: bool = True,
                     layer_norm: bool = True, seed: int = 6) -> bytes:
    """The non-sequence LSTM op (FULL kernel): input [batch, n_in] → output [batch, n_cell]."""
    rng = np.random.default_rng(seed)

    def build(net: _Net) -> tuple[list[int], list[tuple[str, list[int]]]]:
        x = net.input("x0", (batch, n_in))
        c = _lstm_cell_tensors(net, rng, "", n_in, n_cell, n_cell, batch, cifg=False, peephole=peephole,
                               projection=False, proj_bias=False, layer_norm=layer_norm)
        return [x, *c["x"], *c["h"], *c["peep"], *c["bias"], *c["proj"], *c["state"], *c["ln"]], \
            [("y", [batch, n_cell])]

    return one_op_model("LSTM", "LSTMOptions", {"fused_activation_function": _act_code("TANH"), "cell_clip": 0.0,
                                                 "proj_clip": 0.0}, build)


def _rnn_step_bytes(batch: int = 2, n_in: int = 3, units: int = 4, act: str = "RELU", seed: int = 7) -> bytes:
    rng = np.random.default_rng(seed)

    def build(net: _Net) -> tuple[list[int], list[tuple[str, list[int]]]]:
        ins = [net.input("x0", (batch, n_in)), net.tensor("w", (units, n_in), _w(rng, units, n_in)),
               net.tensor("r", (units, units), _w(rng, units, units)), net.tensor("b", (units,), _w(rng, units)),
               net.tensor("h_state", (batch, units), variable=True)]
        return ins, [("y", [batch, units])]

    return one_op_model("RNN", "RNNOptions", {"fused_activation_function": _act_code(act)}, build)


def _bilstm_bytes(batch: int = 2, steps: int = 4, n_in: int = 3, n_cell: int = 4, time_major: bool = True,
                  merge: bool = False, act: str = "TANH", peephole: bool = False, cell_clip: float = 0.0,
                  aux: str = "none", seed: int = 1) -> bytes:
    """aux: "none", "cross" (aux input + aux weights) or "bw_input" (aux input, no weights: the bw cell reads it)."""
    rng = np.random.default_rng(seed)
    n_aux = 2

    def build(net: _Net) -> tuple[list[int], list[tuple[str, list[int]]]]:
        xs = (steps, batch, n_in) if time_major else (batch, steps, n_in)
        x = net.input("x0", xs)
        a = -1
        if aux != "none":
            a = net.input("x1", (steps, batch, n_in if aux == "bw_input" else n_aux) if time_major
                          else (batch, steps, n_in if aux == "bw_input" else n_aux))
        fw, bw = (_lstm_cell_tensors(net, rng, p, n_in, n_cell, n_cell, batch, cifg=False, peephole=peephole,
                                     projection=False, proj_bias=False, layer_norm=False,
                                     n_aux=n_aux if aux == "cross" else 0) for p in ("fw_", "bw_"))
        ins = [x]
        for c in (fw, bw):
            ins += [*c["x"], *c["h"], *c["peep"], *c["bias"], *c["proj"]]
        ins += [*fw["state"], *bw["state"], a, *fw["aux"], *bw["aux"]]
        width = 2 * n_cell if merge else n_cell
        shape = [steps, batch, width] if time_major else [batch, steps, width]
        outs = [("y_fw", shape)] if merge else [("y_fw", shape), ("y_bw", shape)]
        return ins, outs

    return one_op_model("BIDIRECTIONAL_SEQUENCE_LSTM", "BidirectionalSequenceLSTMOptions",
                        {"fused_activation_function": _act_code(act), "cell_clip": cell_clip, "proj_clip": 0.0,
                         "merge_outputs": merge, "time_major": time_major}, build)


def _urnn_bytes(batch: int = 2, steps: int = 5, n_in: int = 3, units: int = 4, time_major: bool = False,
                act: str = "TANH", seed: int = 2) -> bytes:
    rng = np.random.default_rng(seed)

    def build(net: _Net) -> tuple[list[int], list[tuple[str, list[int]]]]:
        x = net.input("x0", (steps, batch, n_in) if time_major else (batch, steps, n_in))
        ins = [x, net.tensor("w", (units, n_in), _w(rng, units, n_in)),
               net.tensor("r", (units, units), _w(rng, units, units)), net.tensor("b", (units,), _w(rng, units)),
               net.tensor("h_state", (batch, units), variable=True)]
        return ins, [("y", [steps, batch, units] if time_major else [batch, steps, units])]

    return one_op_model("UNIDIRECTIONAL_SEQUENCE_RNN", "SequenceRNNOptions",
                        {"fused_activation_function": _act_code(act), "time_major": time_major}, build)


def _birnn_bytes(batch: int = 2, steps: int = 4, n_in: int = 3, units: int = 4, time_major: bool = False,
                 merge: bool = True, act: str = "TANH", aux: str = "none", seed: int = 3) -> bytes:
    rng = np.random.default_rng(seed)
    n_aux = 2

    def build(net: _Net) -> tuple[list[int], list[tuple[str, list[int]]]]:
        x = net.input("x0", (steps, batch, n_in) if time_major else (batch, steps, n_in))
        a = -1
        if aux != "none":
            width = n_in if aux == "bw_input" else n_aux
            a = net.input("x1", (steps, batch, width) if time_major else (batch, steps, width))
        ins = [x]
        for p in ("fw_", "bw_"):
            ins += [net.tensor(p + "w", (units, n_in), _w(rng, units, n_in)),
                    net.tensor(p + "r", (units, units), _w(rng, units, units)),
                    net.tensor(p + "b", (units,), _w(rng, units)),
                    net.tensor(p + "h_state", (batch, units), variable=True)]
        ins.append(a)
        for p in ("fw_", "bw_"):
            ins.append(net.tensor(p + "aux_w", (units, n_aux), _w(rng, units, n_aux)) if aux == "cross" else -1)
        width = 2 * units if merge else units
        shape = [steps, batch, width] if time_major else [batch, steps, width]
        return ins, [("y_fw", shape)] if merge else [("y_fw", shape), ("y_bw", shape)]

    return one_op_model("BIDIRECTIONAL_SEQUENCE_RNN", "BidirectionalSequenceRNNOptions",
                        {"fused_activation_function": _act_code(act), "time_major": time_major,
                         "merge_outputs": merge}, build)


def _svdf_bytes(batch: int = 2, n_in: int = 6, n_filter: int = 8, memory: int = 5, rank: int = 2,
                int8: bool = False, act: str = "RELU", bias: bool = True, seed: int = 21) -> bytes:
    """A one-op SVDF model (no TF path emits SVDF).  ``int8``: the full-integer form LiteRT's ``EvalIntegerSVDF``
    runs - int8 input/output/weights_feature, int16 weights_time/state, int32 bias - with scales picked from the
    float weights' ranges; the state keeps its zero-filled initial value."""
    rng = np.random.default_rng(seed)
    wf, wt = _w(rng, n_filter, n_in), _w(rng, n_filter, memory)
    b = _w(rng, n_filter // rank)
    s_y, zp_y = 0.02, -5

    def build(net: _Net) -> tuple[list[int], list[tuple[str, list[int]]]]:
        if not int8:
            ins = [net.input("x", (batch, n_in)), net.tensor("weights_feature", wf.shape, wf),
                   net.tensor("weights_time", wt.shape, wt),
                   net.tensor("bias", b.shape, b) if bias else -1,
                   net.tensor("state", (batch, n_filter * memory), variable=True)]
            return ins, [("y", [batch, n_filter // rank])]
        s_x, zp_x = 1.0 / 127.0, 3
        s_wf = float(np.abs(wf).max()) / 127.0
        s_wt = float(np.abs(wt).max()) / 32767.0
        s_state = 2.0 ** -11
        x = net.tensor("x", (batch, n_in), dtype="INT8", quant=(s_x, zp_x))
        net.inputs.append(x)
        ins = [x,
               net.tensor("weights_feature", wf.shape, np.round(wf / s_wf), dtype="INT8", quant=(s_wf, 0)),
               net.tensor("weights_time", wt.shape, np.round(wt / s_wt), dtype="INT16", quant=(s_wt, 0)),
               net.tensor("bias", b.shape, np.round(b / (s_state * s_wt)), dtype="INT32",
                          quant=(s_state * s_wt, 0)) if bias else -1,
               net.tensor("state", (batch, n_filter * memory), variable=True, dtype="INT16", quant=(s_state, 0))]
        return ins, [("y", [batch, n_filter // rank])]

    data = one_op_model("SVDF", "SVDFOptions", {"rank": rank, "fused_activation_function": _act_code(act)}, build)
    if not int8:
        return data
    return _requantize_output(data, "INT8", (s_y, zp_y))


def _ulstm_int8_bytes(batch: int = 2, steps: int = 4, n_in: int = 5, n_cell: int = 6, n_out: int = 6,
                      cifg: bool = False, peephole: bool = False, projection: bool = False, proj_bias: bool = True,
                      cell_clip: float = 0.0, proj_clip: float = 0.0, time_major: bool = False,
                      x16: bool = False, layer_norm: bool = False, seed: int = 31) -> bytes:
    """A hand-quantized full-integer UNIDIRECTIONAL_SEQUENCE_LSTM (the variants TF's converter never emits: CIFG,
    peephole, projection, clipping, layer norm): int8 input/weights/output state, int16 cell state (2^-11) and
    peephole weights, int32 biases, five intermediates (without layer norm only the fifth, the effective hidden
    scale, is quantized - the kernel uses 2^-12 for the gates).  The scales keep the gates in the sigmoid/tanh's
    working range; LiteRT's integer kernel is the oracle whatever they are.  ``layer_norm``: int16 coefficients
    γ·2^14 (scale 2^-14), int32 biases β·2^24 (added inside ApplyLayerNorm), quantized gate intermediates.
    ``x16``: an int16 input (the "16x8" form, which LiteRT cannot run: for the refusal test)."""
    rng = np.random.default_rng(seed)
    s_x, zp_x = 0.01, 3
    s_h, zp_h = 1.0 / 128.0, -10
    s_hidden, zp_hidden = (0.0078, -7) if projection else (s_h, zp_h)
    n_rec = n_out if projection else n_cell

    def q8(name: str, *shape: int, scale: float = 0.01) -> int:
        return net_ref[0].tensor(name, shape, rng.integers(-127, 128, shape), dtype="INT8", quant=(scale, 0))

    def q32(name: str, n: int, lim: int) -> int:
        return net_ref[0].tensor(name, (n,), rng.integers(-lim, lim + 1, n), dtype="INT32", quant=(1e-4, 0))

    def q16(name: str, n: int, scale: float, lim: int) -> int:
        return net_ref[0].tensor(name, (n,), rng.integers(-lim, lim + 1, n), dtype="INT16", quant=(scale, 0))

    net_ref: list[_Net] = []

    def build(net: _Net) -> tuple[list[int], list[tuple[str, list[int]]]]:
        net_ref.append(net)
        xs = (steps, batch, n_in) if time_major else (batch, steps, n_in)
        x = net.tensor("x", xs, dtype="INT16" if x16 else "INT8", quant=(s_x, 0 if x16 else zp_x))
        net.inputs.append(x)
        gates = ("input", "forget", "cell", "output")
        has = {g: not (cifg and g == "input") for g in gates}
        ins = [x]
        ins += [q8(f"{g}_w", n_cell, n_in) if has[g] else -1 for g in gates]
        ins += [q8(f"{g}_r", n_cell, n_rec) if has[g] else -1 for g in gates]
        ins += [q16(f"{g}_peep", n_cell, 5e-5, 1000) if peephole and has[g] else -1
                for g in ("input", "forget", "output")]
        ins += [q32(f"{g}_b", n_cell, 3000) if has[g] else -1 for g in gates]
        ins += [q8("proj_w", n_out, n_cell) if projection else -1,
                q32("proj_b", n_out, 500) if projection and proj_bias else -1]
        ins += [net.tensor("h_state", (batch, n_out), variable=True, dtype="INT8", quant=(s_h, zp_h)),
                net.tensor("c_state", (batch, n_cell), variable=True, dtype="INT16", quant=(2.0 ** -11, 0))]
        if layer_norm:
            ins[12:16] = [net.tensor(f"{g}_ln_b", (n_cell,), rng.integers(-(1 << 23), 1 << 23, n_cell),
                                     dtype="INT32", quant=(1e-7, 0)) if has[g] else -1 for g in gates]
            ins += [net.tensor(f"{g}_ln", (n_cell,), rng.integers(8192, 24576, n_cell), dtype="INT16",
                               quant=(2.0 ** -14, 0)) if has[g] else -1 for g in gates]
            net.intermediates = [net.tensor(f"intermediate{k}", (0,), dtype="INT16", quant=(0.0007, 0))
                                 for k in range(4)]
        else:
            ins += [-1] * 4
            net.intermediates = [net.tensor(f"intermediate{k}", (0,)) for k in range(4)]
        net.intermediates.append(net.tensor("effective_hidden", (0,), dtype="INT8", quant=(s_hidden, zp_hidden)))
        return ins, [("y", [steps, batch, n_out] if time_major else [batch, steps, n_out])]

    data = one_op_model("UNIDIRECTIONAL_SEQUENCE_LSTM", "UnidirectionalSequenceLSTMOptions",
                        {"fused_activation_function": _act_code("TANH"), "cell_clip": cell_clip,
                         "proj_clip": proj_clip, "time_major": time_major}, build)
    return _requantize_output(data, "INT8", (s_h, zp_h))


def _hybrid_bytes(base: str, suffixes: tuple[str, ...] = ("_w", "_r", "_peep", "proj_w"), **params: Any) -> bytes:
    """``base(**params)`` (a builder of this module, by name) with its float weight tensors (names ending in
    ``suffixes``) quantized to symmetric per-tensor int8 (scale max|w| / 127): the hybrid form LiteRT runs for
    int8 recurrent weights with float activations."""
    import flatbuffers
    from tensorflow.lite.python import schema_py_generated as s

    m = s.ModelT.InitFromObj(s.Model.GetRootAsModel(globals()[base](**params), 0))
    for t in m.subgraphs[0].tensors:
        if not t.name.decode().endswith(suffixes) or t.buffer == 0:
            continue
        buf = m.buffers[t.buffer]
        w = np.frombuffer(bytes(bytearray(buf.data)), np.float32)
        scale = float(np.abs(w).max()) / 127.0
        buf.data = np.frombuffer(np.round(w / scale).astype(np.int8).tobytes(), np.uint8)
        t.type = s.TensorType.INT8
        qp = s.QuantizationParametersT()
        qp.scale, qp.zeroPoint = [scale], [0]
        t.quantization = qp
    fb = flatbuffers.Builder(1024)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())


def _requantize_output(data: bytes, dtype: str, quant: tuple[float, int]) -> bytes:
    """The model with its (single) output tensor retyped and quantized (one_op_model writes float outputs)."""
    import flatbuffers
    from tensorflow.lite.python import schema_py_generated as s

    m = s.ModelT.InitFromObj(s.Model.GetRootAsModel(data, 0))
    sg = m.subgraphs[0]
    t = sg.tensors[sg.outputs[0]]
    t.type = getattr(s.TensorType, dtype)
    qp = s.QuantizationParametersT()
    qp.scale, qp.zeroPoint = [float(quant[0])], [int(quant[1])]
    t.quantization = qp
    fb = flatbuffers.Builder(1024)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())


# ---------------------------------------------------------------------------------------------------------------
# TensorFlow-built models
# ---------------------------------------------------------------------------------------------------------------
def _keras2_lstm_fn(tf: Any, batch: int, steps: int, n_in: int, units: int, time_major: bool,
                    go_backwards: bool, tag: int) -> Any:
    """A tf.function with Keras 2's LSTM markers (TFLite's converter fuses it into UNIDIRECTIONAL_SEQUENCE_LSTM).

    Arguments (x, h0, c0, kernel [I, 4U], recurrent kernel [U, 4U], bias [4U]), results (last, sequence, h, c,
    runtime) - the layout ``ConvertKerasLSTMLayer`` expects.  The body is a plain unrolled LSTM (gates i, f, c, o)."""
    def body(x: Any, h0: Any, c0: Any, kernel: Any, rkernel: Any, bias: Any) -> Any:
        xs = tf.unstack(x, axis=0 if time_major else 1)
        if go_backwards:
            xs = xs[::-1]
        h, c, outs = h0, c0, []
        for xt in xs:
            i, f, g, o = tf.split(tf.matmul(xt, kernel) + tf.matmul(h, rkernel) + bias, 4, axis=1)
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
            outs.append(h)
        return h, tf.stack(outs, axis=0 if time_major else 1), h, c, tf.constant(0.0)

    xs = (steps, batch, n_in) if time_major else (batch, steps, n_in)
    sig = [tf.TensorSpec(xs), tf.TensorSpec((batch, units)), tf.TensorSpec((batch, units)),
           tf.TensorSpec((n_in, 4 * units)), tf.TensorSpec((units, 4 * units)), tf.TensorSpec((4 * units,))]
    attrs = {"api_implements": f"lstm_{uuid.UUID(int=tag)}", "api_preferred_device": "CPU",
             "time_major": time_major, "go_backwards": go_backwards}
    # one input signature = one trace: several traces with the same api_implements crash the converter
    return tf.function(body, experimental_attributes=attrs, autograph=False, input_signature=sig)


def _tf_lstm_bytes(batch: int = 2, steps: int = 5, n_in: int = 3, units: int = 4, time_major: bool = False,
                   go_backwards: bool = False, bidirectional: bool = False, seed: int = 4) -> bytes:
    tf = _tf()
    rng = np.random.default_rng(seed)
    n_dirs = 2 if bidirectional else 1

    class Lstm(tf.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.k = [tf.Variable(_w(rng, n_in, 4 * units)) for _ in range(n_dirs)]
            self.r = [tf.Variable(_w(rng, units, 4 * units)) for _ in range(n_dirs)]
            self.b = [tf.Variable(_w(rng, 4 * units)) for _ in range(n_dirs)]
            self.fns = [_keras2_lstm_fn(tf, batch, steps, n_in, units, time_major, go_backwards or d == 1, d + 1)
                        for d in range(n_dirs)]

        @tf.function(input_signature=[tf.TensorSpec((steps, batch, n_in) if time_major else (batch, steps, n_in),
                                                    tf.float32, name="x0")])
        def __call__(self, x: Any) -> Any:
            z = tf.zeros((batch, units))
            ys = [fn(x, z, z, self.k[d], self.r[d], self.b[d])[1] for d, fn in enumerate(self.fns)]
            if not bidirectional:
                return ys[0]
            # Keras 2 Bidirectional: the backward layer's sequence is reversed back to input order, then concatenated
            return tf.concat([ys[0], tf.reverse(ys[1], [0 if time_major else 1])], axis=-1)

    m = Lstm()
    with tempfile.TemporaryDirectory() as d:
        tf.saved_model.save(m, d, signatures=m.__call__.get_concrete_function())
        return bytes(tf.lite.TFLiteConverter.from_saved_model(d).convert())


def _tf_lstm_int8_bytes(batch: int = 1, steps: int = 5, n_in: int = 3, units: int = 4, time_major: bool = False,
                        classes: int = 0, dynamic_range: bool = False, seed: int = 4) -> bytes:
    """The Keras-2-marked LSTM of :func:`_tf_lstm_bytes`, full-integer quantized (int8 in/out, a representative
    dataset from ``seed``): TFLite emits an int8 UNIDIRECTIONAL_SEQUENCE_LSTM with an int16 cell state.
    ``classes`` > 0: a keyword-spotting head after it - the last step's output → FULLY_CONNECTED → SOFTMAX.
    ``dynamic_range``: TF's dynamic-range quantization instead (no dataset; int8 weights of >= 1024 elements,
    float activations): a hybrid LSTM with ``asymmetric_quantize_inputs``."""
    tf = _tf()
    rng = np.random.default_rng(seed)
    xs = (steps, batch, n_in) if time_major else (batch, steps, n_in)

    class Lstm(tf.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.k = tf.Variable(_w(rng, n_in, 4 * units))
            self.r = tf.Variable(_w(rng, units, 4 * units))
            self.b = tf.Variable(_w(rng, 4 * units))
            self.fc = tf.Variable(_w(rng, units, max(classes, 1)))
            self.fc_b = tf.Variable(_w(rng, max(classes, 1)))
            self.fn = _keras2_lstm_fn(tf, batch, steps, n_in, units, time_major, False, 1)

        @tf.function(input_signature=[tf.TensorSpec(xs, tf.float32, name="x0")])
        def __call__(self, x: Any) -> Any:
            z = tf.zeros((batch, units))
            seq = self.fn(x, z, z, self.k, self.r, self.b)[1]
            if not classes:
                return seq
            last = seq[-1] if time_major else seq[:, -1]
            return tf.nn.softmax(tf.matmul(last, self.fc) + self.fc_b)

    m = Lstm()
    data = [[rng.uniform(-1, 1, xs).astype(np.float32)] for _ in range(16)]
    with tempfile.TemporaryDirectory() as d:
        tf.saved_model.save(m, d, signatures=m.__call__.get_concrete_function())
        conv = tf.lite.TFLiteConverter.from_saved_model(d)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        if not dynamic_range:
            conv.representative_dataset = lambda: iter(data)
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            conv.inference_input_type = tf.int8
            conv.inference_output_type = tf.int8
        return bytes(conv.convert())


def _spectrogram_bytes(shape: tuple[int, ...] = (1, 16, 32), fft: tuple[int, int] | None = None,
                       kind: str = "log_abs") -> bytes:
    """kind: "log_abs" (log(|rfft2d(x)| + 1e-3)), "real_imag" (2·re + im) or "complex" (the complex64 itself)."""
    tf = _tf()

    def f(x: Any) -> Any:
        y = tf.signal.rfft2d(x, fft_length=list(fft) if fft else None)
        if kind == "log_abs":
            return tf.math.log(tf.abs(y) + 1e-3)
        if kind == "real_imag":
            return tf.math.real(y) * 2.0 + tf.math.imag(y)
        return y

    fn = tf.function(f, input_signature=[tf.TensorSpec(shape, tf.float32, name="x0")], autograph=False)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn)
    return bytes(conv.convert())


def _sparse_bytes(kind: str = "fc_block", density: float = 0.2, seed: int = 5, int8: bool = False) -> bytes:
    """A Keras layer with mostly-zero weights converted with EXPERIMENTAL_SPARSITY.

    kind: "conv" / "fc" (random sparsity → sparse const + DENSIFY) or "fc_block" (1x4 blocks along the input
    dimension → block-sparse weights read by FULLY_CONNECTED itself).  ``int8``: full-integer quantization too
    (int8 sparse weights; TF emits DENSIFY + FULLY_CONNECTED)."""
    tf = _tf()
    keras = tf.keras
    rng = np.random.default_rng(seed)
    keras.utils.set_random_seed(seed)
    inp = keras.Input((8, 8, 4) if kind == "conv" else (64,), batch_size=1)
    layer = keras.layers.Conv2D(16, 3, padding="same") if kind == "conv" else keras.layers.Dense(32)
    model = keras.Model(inp, layer(inp))
    w, b = layer.get_weights()
    if kind == "fc_block":  # Keras kernel [in, out]: TFLite's [out, in] gets blocks of 4 consecutive inputs
        mask = np.repeat(rng.random((w.shape[0] // 4, w.shape[1])) < density, 4, axis=0)
    else:
        mask = rng.random(w.shape) < density
    layer.set_weights([(w * mask).astype(np.float32), b])
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
    if int8:
        shape = (1, *inp.shape[1:])
        data = [[rng.uniform(-1, 1, shape).astype(np.float32)] for _ in range(8)]
        conv.optimizations = [tf.lite.Optimize.DEFAULT, tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
        conv.representative_dataset = lambda: iter(data)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return bytes(conv.convert())


# ---------------------------------------------------------------------------------------------------------------
# The catalogue
# ---------------------------------------------------------------------------------------------------------------
def _entry(name: str, fn: Callable[..., bytes], **params: Any) -> Callable[[], bytes]:
    extra: tuple[Any, ...] = (one_op_model, _lstm_cell_tensors, _keras2_lstm_fn, _Net, _requantize_output,
                              _ulstm_int8_bytes, _hybrid_bytes, _ulstm_bytes, _bilstm_bytes, _urnn_bytes,
                              _birnn_bytes)
    return lambda: cached(f"rnn-{name}", fn, params, extra=extra)


#: name → builder of the ``.tflite`` bytes; the part before ``/`` is the TFLite op under test
MODELS: dict[str, Callable[[], bytes]] = {
    # TensorFlow-built
    "unidirectional_sequence_lstm/tf_keras2": _entry("ulstm_tf", _tf_lstm_bytes),
    "unidirectional_sequence_lstm/tf_time_major": _entry("ulstm_tf_tm", _tf_lstm_bytes, time_major=True),
    "unidirectional_sequence_lstm/tf_go_backwards": _entry("ulstm_tf_back", _tf_lstm_bytes, go_backwards=True),
    "unidirectional_sequence_lstm/tf_bidirectional": _entry("ulstm_tf_bi", _tf_lstm_bytes, bidirectional=True),
    "unidirectional_sequence_lstm/int8": _entry("ulstm_int8", _tf_lstm_int8_bytes),
    "unidirectional_sequence_lstm/int8_batch2_time_major": _entry("ulstm_int8_tm", _tf_lstm_int8_bytes, batch=2,
                                                                   time_major=True, n_in=5, units=6, seed=11),
    "unidirectional_sequence_lstm/tf_dynamic_range_hybrid": _entry(
        "ulstm_dyn", _tf_lstm_int8_bytes, batch=2, steps=6, n_in=40, units=32, dynamic_range=True, seed=13),
    "unidirectional_sequence_lstm/int8_layer_norm": _entry(
        "ulstm_int8_ln", _ulstm_int8_bytes, n_cell=8, n_out=8, layer_norm=True, seed=34),
    "unidirectional_sequence_lstm/int8_layer_norm_cifg_peephole_projection": _entry(
        "ulstm_int8_lncpp", _ulstm_int8_bytes, n_cell=16, n_out=16, layer_norm=True, cifg=True, peephole=True,
        projection=True, cell_clip=2.0, seed=35),
    "unidirectional_sequence_lstm/int8_cifg_peephole_clip": _entry(
        "ulstm_int8_cpc", _ulstm_int8_bytes, cifg=True, peephole=True, cell_clip=3.0),
    "unidirectional_sequence_lstm/int8_peephole_projection": _entry(
        "ulstm_int8_pp", _ulstm_int8_bytes, peephole=True, projection=True, proj_clip=0.5, time_major=True,
        seed=32),
    "unidirectional_sequence_lstm/int8_projection_no_bias": _entry(
        "ulstm_int8_pnb", _ulstm_int8_bytes, projection=True, proj_bias=False, n_out=3, seed=33),
    "unidirectional_sequence_lstm/int8_keyword_spotter": _entry(
        "kws_lstm_int8", _tf_lstm_int8_bytes, steps=49, n_in=10, units=16, classes=12, seed=12),
    # written directly (variants no TF2 path emits)
    "unidirectional_sequence_lstm/peephole_clip_projection": _entry(
        "ulstm_pcp", _ulstm_bytes, peephole=True, cell_clip=0.8, proj_clip=0.6, projection=True, n_out=3),
    "unidirectional_sequence_lstm/projection_no_bias": _entry(
        "ulstm_pnb", _ulstm_bytes, projection=True, proj_bias=False, n_out=5),
    "unidirectional_sequence_lstm/cifg_layer_norm": _entry(
        "ulstm_cln", _ulstm_bytes, cifg=True, layer_norm=True, peephole=True),
    "unidirectional_sequence_lstm/layer_norm_time_major": _entry(
        "ulstm_lntm", _ulstm_bytes, layer_norm=True, time_major=True),
    "unidirectional_sequence_lstm/relu": _entry("ulstm_relu", _ulstm_bytes, act="RELU", cell_clip=2.0),
    "bidirectional_sequence_lstm/split_time_major": _entry("bilstm_split", _bilstm_bytes),
    "bidirectional_sequence_lstm/merge_batch_major": _entry(
        "bilstm_merge", _bilstm_bytes, merge=True, time_major=False, peephole=True, cell_clip=1.0, batch=1),
    "bidirectional_sequence_lstm/aux_cross": _entry("bilstm_aux", _bilstm_bytes, aux="cross", merge=True),
    "bidirectional_sequence_lstm/aux_bw_input": _entry("bilstm_auxbw", _bilstm_bytes, aux="bw_input"),
    "unidirectional_sequence_rnn/tanh": _entry("urnn_tanh", _urnn_bytes),
    "unidirectional_sequence_rnn/relu_time_major": _entry("urnn_relu", _urnn_bytes, act="RELU", time_major=True),
    "bidirectional_sequence_rnn/merge": _entry("birnn_merge", _birnn_bytes),
    "bidirectional_sequence_rnn/split_time_major": _entry("birnn_split", _birnn_bytes, merge=False,
                                                          time_major=True, act="RELU6"),
    "bidirectional_sequence_rnn/aux_cross": _entry("birnn_aux", _birnn_bytes, aux="cross"),
    "bidirectional_sequence_rnn/aux_bw_input": _entry("birnn_auxbw", _birnn_bytes, aux="bw_input", merge=False,
                                                      time_major=True),
    "svdf/float_rank2": _entry("svdf_f", _svdf_bytes),
    "svdf/float_rank1_no_bias_memory1": _entry("svdf_f1", _svdf_bytes, rank=1, memory=1, bias=False, act="NONE"),
    "svdf/int8_rank2": _entry("svdf_i8", _svdf_bytes, int8=True),
    "svdf/int8_rank1_batch1": _entry("svdf_i8_r1", _svdf_bytes, int8=True, rank=1, batch=1, n_filter=16,
                                     memory=10, seed=22),
    "unidirectional_sequence_rnn/hybrid_int8": _entry("urnn_hybrid", _hybrid_bytes, base="_urnn_bytes",
                                                      suffixes=("w", "r")),
    "bidirectional_sequence_rnn/hybrid_int8_split": _entry(
        "birnn_hybrid", _hybrid_bytes, base="_birnn_bytes", suffixes=("_w", "_r"), merge=False),
    "bidirectional_sequence_lstm/hybrid_int8_split_time_major": _entry("bilstm_hybrid", _hybrid_bytes,
                                                                       base="_bilstm_bytes"),
    "bidirectional_sequence_lstm/hybrid_int8_peephole_merge": _entry(
        "bilstm_hybrid_pm", _hybrid_bytes, base="_bilstm_bytes", merge=True, peephole=True, cell_clip=1.0),
    "unidirectional_sequence_lstm/hybrid_int8_peephole_projection": _entry(
        "ulstm_hybrid_pp", _hybrid_bytes, base="_ulstm_bytes", peephole=True, projection=True, n_out=3,
        proj_clip=0.6),
    "lstm/peephole_layer_norm": _entry("lstm_step", _lstm_step_bytes),
    "rnn/relu": _entry("rnn_step", _rnn_step_bytes),
    # FFT / complex
    "rfft2d/log_magnitude_spectrogram": _entry("spec_log", _spectrogram_bytes),
    "rfft2d/crop_pad_real_imag": _entry("spec_ri", _spectrogram_bytes, shape=(2, 3, 12, 6), fft=(8, 16),
                                        kind="real_imag"),
    # sparse weights
    "densify/conv_random": _entry("sparse_conv", _sparse_bytes, kind="conv", density=0.1),
    "densify/fc_random": _entry("sparse_fc", _sparse_bytes, kind="fc", density=0.1),
    "fully_connected/block_sparse_1x4": _entry("sparse_fc_block", _sparse_bytes, kind="fc_block"),
    "densify/fc_int8": _entry("sparse_fc_int8", _sparse_bytes, kind="fc", density=0.1, int8=True),
}

#: integer models: compared with LiteRT's reference kernels (BUILTIN_REF), 0 mismatches
INT_MODELS = frozenset({"densify/fc_int8", "unidirectional_sequence_lstm/int8",
                        "unidirectional_sequence_lstm/int8_batch2_time_major",
                        "unidirectional_sequence_lstm/int8_keyword_spotter", "svdf/int8_rank2",
                        "unidirectional_sequence_lstm/int8_cifg_peephole_clip",
                        "unidirectional_sequence_lstm/int8_layer_norm",
                        "unidirectional_sequence_lstm/int8_layer_norm_cifg_peephole_projection",
                        "unidirectional_sequence_lstm/int8_peephole_projection",
                        "unidirectional_sequence_lstm/int8_projection_no_bias",
                        "svdf/int8_rank1_batch1"})

#: models tf2tosa must refuse, with the expected reason
REFUSED: dict[str, tuple[Callable[[], bytes], str]] = {
    "unidirectional_sequence_lstm/int16x8": (_entry("ulstm_16x8", _ulstm_int8_bytes, x16=True),
                                             "16x8 tfl.unidirectional_sequence_lstm"),
    "bidirectional_sequence_rnn/hybrid_int8_time_major": (
        _entry("birnn_hybrid_tm", _hybrid_bytes, base="_birnn_bytes", suffixes=("_w", "_r"), merge=False,
               time_major=True),
        "hybrid time-major tfl.bidirectional_sequence_rnn: LiteRT's hybrid kernel runs the whole sequence once"),
    "unidirectional_sequence_lstm/int8_peephole_projection_narrow": (
        _entry("ulstm_int8_ppn", _ulstm_int8_bytes, peephole=True, projection=True, n_out=4, seed=32),
        "peephole and n_output 4 != n_cell 6"),
    "rfft2d/complex_output": (_entry("spec_complex", _spectrogram_bytes, kind="complex"),
                              "complex64 model output: TOSA 1.0 has no complex tensors"),
}

#: models whose ops carry state (``is_variable`` tensors): LiteRT must start each input set from a fresh interpreter
STATEFUL_PREFIXES = ("svdf/", "unidirectional_sequence_lstm", "bidirectional_sequence_lstm",
                     "unidirectional_sequence_rnn", "bidirectional_sequence_rnn", "lstm/", "rnn/")
