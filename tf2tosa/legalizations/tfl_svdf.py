"""``tfl.svdf`` (singular value decomposition filter, the keyword spotters' streaming layer), float32 and full
integer, following LiteRT's kernels (``svdf.cc``, ``reference/svdf.h``: ``EvalFloatSVDF``, ``EvalIntegerSVDF``).

Operands: input [B, I], weights_feature [F, I], weights_time [F, M], bias [U] (optional, U = F / rank), state
[B, F·M] (an ``is_variable`` tensor: each filter's last M feature values, oldest first).  One invocation:

    s_new[b, f, :] = [s[b, f, 1:], (W_f·x_b)[f]]                 the memory shifts by one, the new feature enters
    y[b, u]        = act(Σ_r Σ_m W_t[u·rank + r, m]·s_new[b, u·rank + r, m] + bias[u])

The lowering: one MATMUL for the features, SLICE + CONCAT for the shifted memory, MUL + REDUCE_SUM over memory,
RESHAPE [B, U, rank] + REDUCE_SUM over rank, ADD bias, the fused activation (float).  The TOSA program is one
invocation from the state's initial value (``tfl.variable``: zeros, or the stored value); the state is not an
output of this TFLite op.

Integer (int8 input/output, int8 weights_feature, int16 weights_time and state, int32 bias), as
``EvalIntegerSVDF``:

    feature = sat16(MBQM(Σ (x - zp_x)·W_f, s_x·s_Wf / s_state))       MATMUL (A_zp = zp_x) + RESCALE → i16
    acc     = Σ_rank Σ_m W_t·s_new + bias                               CAST i32, MUL, REDUCE_SUM (exact in int32)
    y       = sat8(MBQM(acc, s_state·s_Wt / s_y) + zp_y)                RESCALE → i8

The scales are multiplied in float32 as Prepare does.  LiteRT requires the RELU activation for the integer kernel
but never applies it (the result is only saturated to int8); the lowering does the same, so the outputs match
LiteRT.  Hybrid SVDF (int8 weights, float input) is refused.
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value, has_value
from ..quant.rescale import rescale
from ..tosa.builder import Builder
from .lowering.legalize_common import fused_activation
from .lowering.numeric import static_shape
from .registry import legalize

_F32 = np.float32


def _per_tensor(op: Operation, v: Value, what: str, dtype: DType, symmetric: bool = False) -> tuple[float, int]:
    q = v.type.quant
    if v.dtype is not dtype or q is None or q.per_channel:
        raise Unsupported(f"integer {op.name}: {what} ({v.source or v.name}) is {v.type}, expected per-tensor "
                          f"quantized {dtype.value}")
    if symmetric and q.zero_point[0] != 0:
        raise Unsupported(f"integer {op.name}: {what} ({v.source or v.name}) has zero point {q.zero_point[0]}")
    return float(q.scale[0]), int(q.zero_point[0])


def _scale(a: float, c: float, d: float) -> float:
    """``a * c / d`` in float32 (the kernel's float parameters), widened to double for QuantizeMultiplier."""
    return float(_F32(_F32(_F32(a) * _F32(c)) / _F32(d)))


@legalize("tfl.svdf", dtypes=("fp32", "i8"))
def svdf(b: Builder, op: Operation) -> list[Value]:
    """SVDF: features into a shifting memory, weighted over time, summed over rank (see the module docstring)."""
    if len(op.operands) < 5:
        raise Unsupported(f"malformed: {len(op.operands)} operand(s); TFLite's SVDF kernel takes 5")
    x, w_f, w_t, bias, state = op.operands[:5]
    if not has_value(x) or not has_value(w_f) or not has_value(w_t) or not has_value(state):
        raise Unsupported(f"{op.name}: a required operand is missing")
    bias_v = bias if has_value(bias) else None
    rank = int(op.attrs.get("rank", 0) or 0)
    if x.type.rank != 2 or w_f.type.rank != 2 or w_t.type.rank != 2:
        raise Unsupported(f"{op.name}: input/weights of rank {x.type.rank}/{w_f.type.rank}/{w_t.type.rank} "
                          f"(rank 2 expected)")
    batch, n_in = static_shape(x)
    n_filter, n_in_w = static_shape(w_f)
    n_filter_t, memory = static_shape(w_t)
    if rank <= 0 or n_filter % rank or n_in_w != n_in or n_filter_t != n_filter \
            or int(np.prod(static_shape(state))) != batch * n_filter * memory:
        raise Unsupported(f"{op.name}: inconsistent shapes (input {x.shape}, weights_feature {w_f.shape}, "
                          f"weights_time {w_t.shape}, state {state.shape}, rank {rank})")
    n_unit = n_filter // rank
    act = str(op.attrs.get("fused_activation_function", "NONE") or "NONE")
    integer = x.dtype is DType.INT8
    if not integer and (x.dtype is not DType.FP32 or w_f.dtype is not DType.FP32):
        kind = "hybrid (int8 weights, float input)" if x.dtype is DType.FP32 else x.dtype.value
        raise Unsupported(f"{kind} {op.name} ({w_f.source or w_f.name}: {w_f.type}); float32 and full-integer "
                          f"int8 are lowered")
    y_q = op.results[0].type.quant
    # the new feature of every filter: [1, B, F]
    w_fT = b.reshape(b.transpose(w_f, [1, 0]), [1, n_in, n_filter])
    x3 = b.reshape(x, [1, batch, n_in])
    if integer:
        s_x, zp_x = _per_tensor(op, x, "input", DType.INT8)
        s_wf, _ = _per_tensor(op, w_f, "weights_feature", DType.INT8, symmetric=True)
        s_wt, _ = _per_tensor(op, w_t, "weights_time", DType.INT16, symmetric=True)
        s_st, _ = _per_tensor(op, state, "state", DType.INT16, symmetric=True)
        if y_q is None or y_q.per_channel:
            raise Unsupported(f"integer {op.name}: the output is not per-tensor quantized")
        s_y, zp_y = float(y_q.scale[0]), int(y_q.zero_point[0])
        acc = b.matmul(x3, w_fT, b.zp(zp_x, DType.INT8), b.zp(0, DType.INT8))
        feat = rescale(b, acc, _scale(s_x, s_wf, s_st), DType.INT16)
    else:
        zp = b.zp(0.0, DType.FP32)
        feat = b.matmul(x3, w_fT, zp, zp)
    feat = b.reshape(feat, [batch, n_filter, 1])
    mem = b.reshape(state, [batch, n_filter, memory])
    new_state = b.concat([b.slice(mem, [0, 0, 1], [batch, n_filter, memory - 1]), feat], 2) if memory > 1 else feat
    wt = b.reshape(w_t, [1, n_filter, memory])
    if integer:
        prod = b.mul(b.cast(new_state, DType.INT32), b.cast(wt, DType.INT32))
    else:
        prod = b.mul(new_state, wt)
    per_filter = b.reshape(b.reduce_sum(prod, axis=2), [batch, n_unit, rank])
    y = b.reshape(b.reduce_sum(per_filter, axis=2), [batch, n_unit])
    if bias_v is not None:
        if integer and bias_v.dtype is not DType.INT32:
            raise Unsupported(f"integer {op.name}: bias is {bias_v.type}, expected int32")
        y = b.binary("ADD", y, b.reshape(bias_v, [1, n_unit]))
    if integer:
        if act != "RELU":
            raise Unsupported(f"integer {op.name} with activation {act} (LiteRT's integer kernel requires RELU)")
        return [rescale(b, y, _scale(s_st, s_wt, s_y), DType.INT8, out_zp=zp_y, out_quant=y_q)]
    if act not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH"):
        raise Unsupported(f"{op.name} with fused activation {act}")
    return [fused_activation(b, y, act)]
