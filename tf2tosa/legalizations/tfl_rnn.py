"""Recurrent TFLite ops, unrolled over their static time dimension (float32, hybrid int8 weights, full integer).

* ``tfl.unidirectional_sequence_lstm`` (24 operands: peephole, CIFG, projection, layer norm, diagonal "indy"
  recurrent weights), ``tfl.bidirectional_sequence_lstm`` (48 operands: two cells, auxiliary input),
* ``tfl.unidirectional_sequence_rnn`` and ``tfl.bidirectional_sequence_rnn``,
* ``tfl.lstm`` (FULL kernel) and ``tfl.rnn``: one step of the same cells,
* ``tfl.variable``: the state tensors those ops read (TFLite ``is_variable`` tensors).

The lowering follows LiteRT's float kernels (``lstm_eval.cc``: ``CalculateLstmGateFloat``,
``UpdateLstmCellFloat``, ``CalculateLstmOutputFloat``; ``RnnBatchStep``), step by step:

    gate_g  = W_g·x_t + R_g·h + (peephole) p_g⊙c  [→ layer norm: LN(.)·γ_g] + b_g ,  g ∈ {i, f, c, o}
    i, f, o = sigmoid(.)        c̃ = act(gate_c)        (CIFG, no input weights: i = 1 - f)
    c       = clip(f⊙c + i⊙c̃, ±cell_clip)              (the output gate's peephole reads this new c)
    h       = o ⊙ act(c)        [→ projection: clip(P·h + b_p, ±proj_clip)]
    RNN:  h = act(W·x_t + R·h + b)

``act`` is the op's fused activation (TANH for Keras models).  The input projections of all time steps are one
MATMUL before the loop (rows = time × batch, columns = the gates side by side, bias added there when there is
no layer norm); each step is one MATMUL for the recurrent weights, SLICEs per gate, and the elementwise ops.
The per-step outputs are CONCATenated along time, TRANSPOSEd back for batch-major (``time_major=false``) ops.
Layer norm is LiteRT's ``MeanStddevNormalization``: (x - mean)·RSQRT(E[x²] - mean²), with the variance floored
at 1e-8 (LiteRT uses 1e-8 only for an exactly zero variance).

State: operands 18/19 (LSTM) or 4 (RNN) are ``is_variable`` tensors.  The TOSA program is one inference from
their initial value (zeros unless the file stores one): ``tfl.variable`` becomes that CONST.  LiteRT keeps the
final state across ``invoke()`` calls; TOSA programs are stateless, so a caller that wants streaming must feed
the state itself (the state is not an output of these TFLite ops either).

Bidirectional ops: the backward cell runs from the last step to the first and its output at step t is written at
t.  ``merge_outputs`` concatenates [fw, bw] on the last axis (one result).  Auxiliary input (operand 39 / 9):
with aux weights, both cells add W_aux·aux_t to their input gates (``stack_bidirectional_rnn`` with cross
links); without aux weights, the backward cell reads the aux input *instead of* the input (LiteRT's
"non-stacking mode").

LiteRT 2.3's float kernels disagree with these semantics in two batch-major corners (``tests/modelgen_rnn.py``):
BIDIRECTIONAL_SEQUENCE_LSTM with ``merge_outputs`` and batch > 1 offsets each batch's state by the merged width
(reading past the state tensor), and BIDIRECTIONAL_SEQUENCE_RNN in non-stacking mode feeds the backward cell
``input`` instead of ``aux_input``; the time-major paths agree with the lowering.

Integer forms, each following LiteRT's kernel for it:

* full-integer UNIDIRECTIONAL_SEQUENCE_LSTM (int8 activations, int16 cell state): :mod:`.tfl_rnn_int`;
* hybrid ops (int8 weights, float32 activations; LiteRT's only int8 form of the other recurrent ops, which have
  no full-integer kernel): every weight product goes through :mod:`.tfl_rnn_hybrid` (rows quantized on the fly,
  int8 MATMUL, float scaling); peephole weights are dequantized as the kernel does.  Time-major hybrid
  BIDIRECTIONAL_SEQUENCE_RNN is refused: LiteRT's kernel wraps its time loop in a second loop over time.

Not lowered (``Unsupported`` with the reason): full-integer forms of the ops LiteRT has no full-integer kernel
for, asymmetric hybrid input quantization, the SIGN_BIT activation, dynamic shapes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value, has_value
from ..tosa.builder import Builder
from .lowering.legalize_common import fused_activation
from .lowering.numeric import static_shape
from .registry import legalize
from .tfl_rnn_hybrid import Weights, dequantized, stack, weight_scale, wmatmul
from .tfl_rnn_int import integer_lstm_direction

GATES = ("i", "f", "c", "o")
_LN_EPS = 1e-8


# ------------------------------------------------------------------------------------------------ operands
def _opt(op: Operation, k: int) -> Value | None:
    """Operand ``k`` when present (TFLite's optional inputs are -1, i.e. tfl.no_value, or missing)."""
    if k >= len(op.operands):
        return None
    v = op.operands[k]
    return v if has_value(v) else None


def _req(op: Operation, k: int, what: str) -> Value:
    v = _opt(op, k)
    if v is None:
        raise Unsupported(f"{op.name}: required operand {k} ({what}) is missing")
    return v


def _check_float(op: Operation, *values: Value | None, weights: tuple[Value | None, ...] = ()) -> None:
    """Float32 operands; ``weights`` may also be per-tensor symmetric int8 (hybrid, :mod:`.tfl_rnn_hybrid`)."""
    for w in weights:
        if w is not None:
            weight_scale(op, w)
    for v in values:
        if v is None:
            continue
        if v.type.is_quantized or v.dtype is not DType.FP32:
            kind = "hybrid (quantized weights, float activations)" if op.operands[0].dtype is DType.FP32 \
                else "quantized"
            raise Unsupported(f"{kind} {op.name} ({v.source or v.name}: {v.type}); only float32 is lowered")


def _activation(op: Operation) -> str:
    act = str(op.attrs.get("fused_activation_function", "TANH") or "NONE")
    if act not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH"):
        raise Unsupported(f"{op.name} with fused activation {act}")
    return act


@dataclass
class LstmCell:
    """The weights of one LSTM cell (None = absent optional operand)."""

    w_x: dict[str, Value | None]  # input-to-gate [n_cell, n_input]
    w_h: dict[str, Value | None]  # recurrent-to-gate [n_cell, n_output] (diagonal: [n_cell])
    peep: dict[str, Value | None]  # cell-to-gate [n_cell] (i, f, o)
    bias: dict[str, Value | None]  # [n_cell]
    ln: dict[str, Value | None]  # layer-norm coefficients [n_cell]
    w_aux: dict[str, Value | None]  # aux-input-to-gate [n_cell, n_aux]
    proj_w: Value | None  # [n_output, n_cell]
    proj_b: Value | None  # [n_output]
    h0: Value  # [batch, n_output]
    c0: Value  # [batch, n_cell]

    @property
    def cifg(self) -> bool:
        return self.w_x["i"] is None

    @property
    def layer_norm(self) -> bool:
        return any(v is not None for v in self.ln.values())

    def gates(self) -> list[str]:
        return [g for g in GATES if not (g == "i" and self.cifg)]

    def values(self) -> list[Value | None]:
        """The operands that must be float32 (weights aside)."""
        out: list[Value | None] = [self.proj_b]
        for d in (self.bias, self.ln):
            out += list(d.values())
        return out

    def weights(self) -> tuple[Value | None, ...]:
        """The weight operands (float32, or int8 in a hybrid op)."""
        out: list[Value | None] = [self.proj_w]
        for d in (self.w_x, self.w_h, self.peep, self.w_aux):
            out += list(d.values())
        return tuple(out)


def _lstm_cell(op: Operation, base: int, peep_base: int, bias_base: int, proj: int, state: int,
               ln_base: int | None, aux_base: int | None) -> LstmCell:
    """Collect a cell's operands: gate operands are 4 consecutive indices (i, f, c, o); peepholes are 3 (i, f, o)."""
    w_x = {g: _opt(op, base + k) for k, g in enumerate(GATES)}
    w_h = {g: _opt(op, base + 4 + k) for k, g in enumerate(GATES)}
    peep = {g: _opt(op, peep_base + k) for k, g in enumerate(("i", "f", "o"))}
    bias = {g: _opt(op, bias_base + k) for k, g in enumerate(GATES)}
    ln = {g: (_opt(op, ln_base + k) if ln_base is not None else None) for k, g in enumerate(GATES)}
    w_aux = {g: (_opt(op, aux_base + k) if aux_base is not None else None) for k, g in enumerate(GATES)}
    cell = LstmCell(w_x, w_h, peep, bias, ln, w_aux, _opt(op, proj), _opt(op, proj + 1),
                    _req(op, state, "output state"), _req(op, state + 1, "cell state"))
    for g in cell.gates():
        for what, d in (("input", w_x), ("recurrent", w_h), ("bias", bias)):
            if d[g] is None:
                raise Unsupported(f"{op.name}: {what} weights of gate {g} missing")
    if cell.cifg and w_h["i"] is not None:
        raise Unsupported(f"{op.name}: CIFG (no input-gate weights) but recurrent input-gate weights present")
    if cell.layer_norm and any(ln[g] is None for g in cell.gates()):
        raise Unsupported(f"{op.name}: layer norm coefficients missing for some gates")
    aux_given = [g for g in cell.gates() if w_aux[g] is not None]
    if aux_given and len(aux_given) != len(cell.gates()):
        raise Unsupported(f"{op.name}: auxiliary weights given for some gates only")
    _check_float(op, *cell.values(), cell.h0, cell.c0, weights=cell.weights())
    return cell


# ------------------------------------------------------------------------------------------- builders
#: time steps a recurrent op may have: each step is unrolled into its own ops (environment variable
#: TF2TOSA_MAX_RNN_STEPS)
MAX_STEPS = int(os.environ.get("TF2TOSA_MAX_RNN_STEPS", "2048"))


def _check_steps(op: Operation, t_len: int) -> None:
    if t_len > MAX_STEPS:
        raise Unsupported(f"{op.name}: {t_len} time steps (recurrent ops are unrolled; at most {MAX_STEPS}, "
                          f"TF2TOSA_MAX_RNN_STEPS)")


def _vec3(b: Builder, vs: list[Value]) -> Value:
    """[n] vectors concatenated → [1, 1, G·n]."""
    cat = b.concat([b.reshape(v, [static_shape(v)[0]]) for v in vs], 0)
    return b.reshape(cat, [1, 1, static_shape(cat)[0]])


def _add(b: Builder, x: Value, y: Value) -> Value:
    return b.binary("ADD", x, y)


def _fconst(b: Builder, value: float) -> Value:
    return b.const(np.full([1, 1, 1], value, np.float32), DType.FP32)


def _input_projection(b: Builder, op: Operation, xs: Value, ws: list[Value], bias: Value | None) -> Value:
    """xs [T, B, I] → [1, T·B, G·n] = x·Wᵀ (+ bias) for every step at once (hybrid: each row quantized)."""
    t, batch, n_in = static_shape(xs)
    y = wmatmul(b, b.reshape(xs, [1, t * batch, n_in]), stack(b, op, ws))
    return _add(b, y, bias) if bias is not None else y


def _step_rows(b: Builder, proj: Value, t: int, batch: int) -> Value:
    width = static_shape(proj)[2]
    return b.slice(proj, [0, t * batch, 0], [1, batch, width])


def _layer_norm(b: Builder, x: Value, gamma: Value, beta: Value | None, n: int) -> Value:
    """LiteRT's MeanStddevNormalization over the last axis of [1, B, n], then ·γ (+ β)."""
    inv_n = _fconst(b, 1.0 / n)
    mean = b.mul(b.reduce_sum(x, axis=2), inv_n)
    mean_sq = b.mul(b.reduce_sum(b.mul(x, x), axis=2), inv_n)
    var = b.binary("SUB", mean_sq, b.mul(mean, mean))
    var = b.binary("MAXIMUM", var, _fconst(b, _LN_EPS), nan_mode="PROPAGATE")
    y = b.mul(b.binary("SUB", x, mean), b.rsqrt(var))
    y = b.mul(y, b.reshape(gamma, [1, 1, n]))
    return _add(b, y, b.reshape(beta, [1, 1, n])) if beta is not None else y


def _time_major(b: Builder, x: Value, time_major: bool) -> Value:
    if len(static_shape(x)) != 3:
        raise Unsupported(f"recurrent op input of rank {len(static_shape(x))} (rank 3 expected)")
    return x if time_major else b.transpose(x, [1, 0, 2])


def _stack_steps(b: Builder, outs: list[Value], time_major: bool) -> Value:
    """Per-step [1, B, n] values → [T, B, n] (time-major) or [B, T, n]."""
    y = b.concat(outs, 0)
    return y if time_major else b.transpose(y, [1, 0, 2])


def lstm_direction(b: Builder, op: Operation, cell: LstmCell, xs: Value, aux: Value | None, act: str,
                   cell_clip: float, proj_clip: float, diagonal: bool, reverse: bool) -> list[Value]:
    """Run one LSTM cell over xs [T, B, I] (aux [T, B, A] when the cell has aux weights); per-step [1, B, n_out]
    outputs in time order."""
    if xs.type.rank != 3 or cell.h0.type.rank == 0 or cell.c0.type.rank == 0:
        raise Unsupported(f"{op.name}: input of rank {xs.type.rank} (expected 3) or rank-0 state")
    t_len, batch, _ = static_shape(xs)
    _check_steps(op, t_len)
    gates = cell.gates()
    n_cell = static_shape(_gate_w(cell, gates[0]))[0]
    n_out = static_shape(cell.proj_w)[0] if cell.proj_w is not None else n_cell
    if static_shape(cell.h0)[-1] != n_out or static_shape(cell.c0)[-1] != n_cell:
        raise Unsupported(f"{op.name}: state shapes {cell.h0.shape}, {cell.c0.shape} vs n_output {n_out}, "
                          f"n_cell {n_cell}")
    width = len(gates) * n_cell
    pre_bias = None if cell.layer_norm else _vec3(b, [_gate_b(cell, g) for g in gates])
    proj_x = _input_projection(b, op, xs, [_gate_w(cell, g) for g in gates], pre_bias)
    if aux is not None and cell.w_aux[gates[0]] is not None:
        aux_ws = [cell.w_aux[g] for g in gates]
        proj_x = _add(b, proj_x, _input_projection(b, op, aux, [w for w in aux_ws if w is not None], None))
    rec: Value | None = None
    rec_w: Weights | None = None
    if diagonal:
        if n_out != n_cell:
            raise Unsupported(f"{op.name}: diagonal recurrent weights need n_output == n_cell")
        if any(weight_scale(op, w) is not None for w in cell.weights() if w is not None):
            raise Unsupported(f"hybrid {op.name} with diagonal recurrent weights")
        rec = _vec3(b, [_gate_r(cell, g) for g in gates])
    else:
        rec_w = stack(b, op, [_gate_r(cell, g) for g in gates])
    h = b.reshape(cell.h0, [1, batch, n_out])
    c = b.reshape(cell.c0, [1, batch, n_cell])
    one = _fconst(b, 1.0)
    peep = {g: b.reshape(dequantized(b, op, v), [1, 1, n_cell]) for g, v in cell.peep.items() if v is not None}
    outs: list[Value | None] = [None] * t_len
    for t in (range(t_len - 1, -1, -1) if reverse else range(t_len)):
        if rec is not None:
            z = _add(b, _step_rows(b, proj_x, t, batch), b.mul(b.concat([h] * len(gates), 2), rec))
        else:
            assert rec_w is not None
            z = _add(b, _step_rows(b, proj_x, t, batch), wmatmul(b, h, rec_w))
        pre = {g: (b.slice(z, [0, 0, k * n_cell], [1, batch, n_cell]) if width != n_cell else z)
               for k, g in enumerate(gates)}

        def finish(g: str, v: Value) -> Value:
            if cell.layer_norm:
                ln = cell.ln[g]
                assert ln is not None
                v = _layer_norm(b, v, ln, cell.bias[g], n_cell)
            return v

        f_pre = pre["f"]
        if "f" in peep:
            f_pre = _add(b, f_pre, b.mul(peep["f"], c))
        f = b.sigmoid(finish("f", f_pre))
        if cell.cifg:
            i = b.binary("SUB", one, f)
        else:
            i_pre = pre["i"]
            if "i" in peep:
                i_pre = _add(b, i_pre, b.mul(peep["i"], c))
            i = b.sigmoid(finish("i", i_pre))
        g_act = fused_activation(b, finish("c", pre["c"]), act)
        c = _add(b, b.mul(f, c), b.mul(i, g_act))
        if cell_clip > 0:
            c = b.clamp(c, -cell_clip, cell_clip)
        o_pre = pre["o"]
        if "o" in peep:
            o_pre = _add(b, o_pre, b.mul(peep["o"], c))
        o = b.sigmoid(finish("o", o_pre))
        h = b.mul(o, fused_activation(b, c, act))
        if cell.proj_w is not None:
            h = wmatmul(b, h, stack(b, op, [cell.proj_w]))
            if cell.proj_b is not None:
                h = _add(b, h, b.reshape(cell.proj_b, [1, 1, n_out]))
            if proj_clip > 0:
                h = b.clamp(h, -proj_clip, proj_clip)
        outs[t] = h
    return [v for v in outs if v is not None]


def _gate_w(cell: LstmCell, g: str) -> Value:
    v = cell.w_x[g]
    assert v is not None
    return v


def _gate_r(cell: LstmCell, g: str) -> Value:
    v = cell.w_h[g]
    assert v is not None
    return v


def _gate_b(cell: LstmCell, g: str) -> Value:
    v = cell.bias[g]
    assert v is not None
    return v


def _clip(op: Operation, name: str) -> float:
    v = float(op.attrs.get(name, 0.0) or 0.0)
    if v < 0:
        raise Unsupported(f"{op.name} with negative {name} {v}")
    return v


def _require_float_io(op: Operation) -> None:
    x = op.operands[0]
    if x.type.is_quantized or x.dtype is not DType.FP32:
        why = "LiteRT's kernel for it is float32 or hybrid only (no full-integer kernel to be bit-exact with)" \
            if op.name != "tfl.lstm" else "only float32 is lowered"
        raise Unsupported(f"quantized {op.name} (input {x.type}): {why}")


# ------------------------------------------------------------------------------------------------ rules
@legalize("tfl.unidirectional_sequence_lstm", dtypes=("fp32", "i8"), arity=1)
def unidirectional_sequence_lstm(b: Builder, op: Operation) -> list[Value]:
    """LSTM unrolled over time: one MATMUL for all input projections, then per step a recurrent MATMUL, gate
    SLICEs, SIGMOID/activation, the cell update (CLAMP for cell_clip) and the optional projection; hybrid int8
    weights quantize each product's rows on the fly; int8 (int16 cell state) follows LiteRT's integer kernel
    bit-exactly (gemmlowp int16 sigmoid/tanh as GATHER tables)."""
    time_major = bool(op.attrs.get("time_major", False))
    if op.operands[0].dtype in (DType.INT8, DType.INT16):
        xs = _time_major(b, op.operands[0], time_major)
        _check_steps(op, static_shape(xs)[0])
        return [_stack_steps(b, integer_lstm_direction(b, op, xs), time_major)]
    _require_float_io(op)
    act = _activation(op)
    cell = _lstm_cell(op, base=1, peep_base=9, bias_base=12, proj=16, state=18, ln_base=20, aux_base=None)
    xs = _time_major(b, op.operands[0], time_major)
    outs = lstm_direction(b, op, cell, xs, None, act, _clip(op, "cell_clip"), _clip(op, "proj_clip"),
                          bool(op.attrs.get("diagonal_recurrent_tensors", False)), reverse=False)
    return [_stack_steps(b, outs, time_major)]


@legalize("tfl.lstm", arity=1)
def lstm(b: Builder, op: Operation) -> list[Value]:
    """One LSTM step (the non-sequence LSTM op, FULL kernel): the sequence lowering with one time step."""
    _require_float_io(op)
    if str(op.attrs.get("kernel_type", "FULL")) != "FULL":
        raise Unsupported(f"tfl.lstm kernel_type {op.attrs.get('kernel_type')} (only FULL is lowered)")
    if len(op.results) != 1:
        raise Unsupported(f"tfl.lstm with {len(op.results)} results (the 4-output form of op version 1)")
    act = _activation(op)
    x = op.operands[0]
    shape = static_shape(x)
    if len(shape) != 2:
        raise Unsupported(f"tfl.lstm input of rank {len(shape)} (rank 2 expected)")
    cell = _lstm_cell(op, base=1, peep_base=9, bias_base=12, proj=16, state=18, ln_base=20, aux_base=None)
    xs = b.reshape(x, [1, *shape])
    (h,) = lstm_direction(b, op, cell, xs, None, act, _clip(op, "cell_clip"), _clip(op, "proj_clip"), False,
                          reverse=False)
    return [b.reshape(h, static_shape(op.results[0]))]


@legalize("tfl.rnn", arity=5)
def rnn(b: Builder, op: Operation) -> list[Value]:
    """One basic RNN step: h = act(W·x + R·h + b)."""
    _require_float_io(op)
    act = _activation(op)
    x = op.operands[0]
    shape = static_shape(x)
    if len(shape) != 2:
        raise Unsupported(f"tfl.rnn input of rank {len(shape)} (rank 2 expected)")
    w, r, bias, h0 = (_req(op, k, n) for k, n in ((1, "weights"), (2, "recurrent weights"), (3, "bias"),
                                                   (4, "hidden state")))
    _check_float(op, bias, h0, weights=(w, r))
    (h,) = rnn_direction(b, op, w, r, bias, h0, b.reshape(x, [1, *shape]), None, None, act, reverse=False)
    return [b.reshape(h, static_shape(op.results[0]))]


def _aux_mode(op: Operation, aux: Value | None, has_aux_weights: bool) -> tuple[bool, bool]:
    """(backward cell reads aux instead of the input, cells add aux projections) - LiteRT's stacking modes."""
    non_stacking = aux is not None and not has_aux_weights
    return non_stacking, aux is not None and has_aux_weights


def _merge_or_split(b: Builder, op: Operation, fw: list[Value], bw: list[Value], time_major: bool) -> list[Value]:
    merge = bool(op.attrs.get("merge_outputs", False))
    if merge:
        return [_stack_steps(b, [b.concat([f, w], 2) for f, w in zip(fw, bw)], time_major)]
    results = [_stack_steps(b, fw, time_major), _stack_steps(b, bw, time_major)]
    return results[:len(op.results)]


@legalize("tfl.bidirectional_sequence_lstm", arity=1)
def bidirectional_sequence_lstm(b: Builder, op: Operation) -> list[Value]:
    """Two LSTM cells, the backward one over reversed time; merge_outputs concatenates [fw, bw] (axis -1); hybrid
    int8 weights as LiteRT's hybrid kernel (rows quantized on the fly)."""
    _require_float_io(op)
    act = _activation(op)
    time_major = bool(op.attrs.get("time_major", True))
    fw = _lstm_cell(op, base=1, peep_base=9, bias_base=12, proj=16, state=35, ln_base=None, aux_base=40)
    bw = _lstm_cell(op, base=18, peep_base=26, bias_base=29, proj=33, state=37, ln_base=None, aux_base=44)
    aux = _opt(op, 39)
    _check_float(op, aux)
    non_stacking, use_aux = _aux_mode(op, aux, fw.w_aux["f"] is not None)
    xs = _time_major(b, op.operands[0], time_major)
    aux_t = _time_major(b, aux, time_major) if aux is not None else None
    cc, pc = _clip(op, "cell_clip"), _clip(op, "proj_clip")
    fw_out = lstm_direction(b, op, fw, xs, aux_t if use_aux else None, act, cc, pc, False, reverse=False)
    bw_in = aux_t if non_stacking and aux_t is not None else xs
    bw_out = lstm_direction(b, op, bw, bw_in, aux_t if use_aux else None, act, cc, pc, False, reverse=True)
    return _merge_or_split(b, op, fw_out, bw_out, time_major)


def rnn_direction(b: Builder, op: Operation, w: Value, r: Value, bias: Value, h0: Value, xs: Value,
                  aux: Value | None, w_aux: Value | None, act: str, reverse: bool) -> list[Value]:
    """h_t = act(W·x_t (+ W_aux·aux_t) + R·h_{t-1} + b) over xs [T, B, I]; per-step [1, B, units] outputs."""
    if xs.type.rank != 3 or w.type.rank != 2 or h0.type.rank == 0:
        raise Unsupported(f"{op.name}: input rank {xs.type.rank} (expected 3), weight rank {w.type.rank} "
                          f"(expected 2), state rank {h0.type.rank}")
    t_len, batch, _ = static_shape(xs)
    _check_steps(op, t_len)
    units = static_shape(w)[0]
    if static_shape(r) != [units, units] or static_shape(h0)[-1] != units:
        raise Unsupported(f"{op.name}: recurrent weights {r.shape} / state {h0.shape} vs {units} units")
    proj_x = _input_projection(b, op, xs, [w], _vec3(b, [bias]))
    if aux is not None and w_aux is not None:
        proj_x = _add(b, proj_x, _input_projection(b, op, aux, [w_aux], None))
    rec = stack(b, op, [r])
    h = b.reshape(h0, [1, batch, units])
    outs: list[Value | None] = [None] * t_len
    for t in (range(t_len - 1, -1, -1) if reverse else range(t_len)):
        h = fused_activation(b, _add(b, _step_rows(b, proj_x, t, batch), wmatmul(b, h, rec)), act)
        outs[t] = h
    return [v for v in outs if v is not None]


@legalize("tfl.unidirectional_sequence_rnn", arity=1)
def unidirectional_sequence_rnn(b: Builder, op: Operation) -> list[Value]:
    """Basic RNN cell unrolled over time: h_t = act(W·x_t + R·h_{t-1} + b) (LiteRT's RnnBatchStep, float or
    hybrid int8 weights)."""
    _require_float_io(op)
    act = _activation(op)
    time_major = bool(op.attrs.get("time_major", False))
    w, r, bias, h0 = (_req(op, k, n) for k, n in ((1, "weights"), (2, "recurrent weights"), (3, "bias"),
                                                   (4, "hidden state")))
    _check_float(op, bias, h0, weights=(w, r))
    xs = _time_major(b, op.operands[0], time_major)
    outs = rnn_direction(b, op, w, r, bias, h0, xs, None, None, act, reverse=False)
    return [_stack_steps(b, outs, time_major)]


@legalize("tfl.bidirectional_sequence_rnn", arity=1)
def bidirectional_sequence_rnn(b: Builder, op: Operation) -> list[Value]:
    """Forward and backward RNN cells (the backward one over reversed time); merge_outputs → [fw, bw] on axis -1."""
    _require_float_io(op)
    act = _activation(op)
    time_major = bool(op.attrs.get("time_major", False))
    fw = [_req(op, k, n) for k, n in ((1, "fw weights"), (2, "fw recurrent weights"), (3, "fw bias"),
                                      (4, "fw hidden state"))]
    bw = [_req(op, k, n) for k, n in ((5, "bw weights"), (6, "bw recurrent weights"), (7, "bw bias"),
                                      (8, "bw hidden state"))]
    aux, fw_aux_w, bw_aux_w = _opt(op, 9), _opt(op, 10), _opt(op, 11)
    _check_float(op, fw[2], fw[3], bw[2], bw[3], aux, weights=(fw[0], fw[1], bw[0], bw[1], fw_aux_w, bw_aux_w))
    if time_major and weight_scale(op, fw[0]) is not None:
        raise Unsupported(f"hybrid time-major {op.name}: LiteRT's hybrid kernel runs the whole sequence once per "
                          f"time step (an extra outer loop over time), which the lowering does not reproduce")
    non_stacking, use_aux = _aux_mode(op, aux, fw_aux_w is not None)
    xs = _time_major(b, op.operands[0], time_major)
    aux_t = _time_major(b, aux, time_major) if aux is not None else None
    fw_out = rnn_direction(b, op, fw[0], fw[1], fw[2], fw[3], xs, aux_t if use_aux else None, fw_aux_w, act,
                           reverse=False)
    bw_in = aux_t if non_stacking and aux_t is not None else xs
    bw_out = rnn_direction(b, op, bw[0], bw[1], bw[2], bw[3], bw_in, aux_t if use_aux else None, bw_aux_w, act,
                           reverse=True)
    return _merge_or_split(b, op, fw_out, bw_out, time_major)


@legalize("tfl.variable", dtypes=("fp32", "i8", "i16"))
def variable(b: Builder, op: Operation) -> list[Value]:
    """A TFLite ``is_variable`` tensor (the state of LSTM/RNN ops): its initial value (zeros - an int8 tensor's zero
    point - unless the file stores one) as a CONST - the TOSA program is one inference from the initial state."""
    r = op.results[0]
    if not r.type.is_static:
        raise Unsupported(f"variable tensor {r.source or r.name} with a dynamic shape")
    info = b.graph.variables.get(str(op.attrs.get("name", r.name)), {})
    init = info.get("initial") if isinstance(info, dict) else None
    shape = r.type.static_shape
    if init is not None and np.asarray(init).size != int(np.prod(shape, dtype=np.int64)):
        raise Unsupported(f"variable tensor {r.source or r.name}: initial value of {np.asarray(init).size} "
                          f"elements for shape {list(shape)}")
    # LiteRT's ResetVariableTensor fills an int8 variable with its zero point (every other type with zero bytes)
    fill = r.type.quant.zero_point[0] if r.dtype is DType.INT8 and r.type.quant is not None else 0
    arr = np.full(shape, fill, r.dtype.np_dtype()) if init is None else np.asarray(init).reshape(shape)
    if not r.dtype.is_tosa:
        raise Unsupported(f"variable tensor {r.source or r.name} of type {r.dtype.value}")
    return [b.const(arr, r.dtype, quant=r.type.quant, name=r.name)]
