"""Full-integer ``tfl.unidirectional_sequence_lstm`` (int8 activations, int8 weights, int16 cell state), bit-exact
with LiteRT's integer kernel (``lstm_eval.cc`` ``EvalInteger8x8_16`` / ``LstmStepInteger8x8_16``, scales from
``unidirectional_sequence_lstm.cc`` ``PopulateQuantizedLstmParams8x8_16``).

Per time step and gate g ∈ {i, f, c, o} (all int32 tensors holding the kernel's int16/int8 values):

    x_g  = sat16(MBQM(Σ (x - zp_x)·W_g + bias_g, s_xg))           one MATMUL + RESCALE (i16) for every step at once
    z_g  = sat16(MBQM(Σ (h - zp_h)·R_g, s_hg) + x_g)              MATMUL + per-channel RESCALE (i32) + ADD + CLAMP
    z_g  = sat16(MBQM(p_g·c, s_pg) + z_g)                         (peephole; i, f read the old c, o the new one)
    z_g  = LayerNorm(z_g)·γ_g + β_g                               (layer norm, ``ApplyLayerNorm``, below)
    i, f, o = logistic(z as Q3.12) in Q0.15, c̃ = tanh(z as Q3.12)  (CIFG: i = 32767 - f)
    c    = clip(sat16(RDBPOT(f·c, 15) + RDBPOT(i·c̃, 30 + log2(s_c))), ±quantized cell_clip)
    h    = sat8(MBQM(o·tanh(c as Q(15 + log2 s_c)), 2^-30 / s_hidden) + zp_hidden)
    (projection: h = clip(sat8(MBQM(Σ (sat8(MBQM(o·tanh c, ·) - zp_hidden) + zp_hidden)·P + b_P, s_P) + zp_h)))

with ``s_xg = s_W·s_x / s_ig`` and ``s_hg = s_R·s_h / s_ig`` computed in float32 as the kernel does (the
intermediate scale s_ig is 2^-12 without layer norm, the gate intermediate's scale with it; with layer norm the
bias moves into the normalisation), MBQM = TFLite's MultiplyByQuantizedMultiplier = RESCALE
(DOUBLE_ROUND where the shift exceeds 31, :mod:`tf2tosa.quant.rescale`), RDBPOT = round half away from zero
(:class:`tf2tosa.quant.elementwise.Fx`).

The int16 activations are gemmlowp's ``logistic``/``tanh`` on ``FixedPoint<int16_t, k>`` (``ApplySigmoid``,
``ApplyTanh``).  They are not piecewise linear on 128-wide segments, so an interpolating TOSA ``TABLE`` i16 cannot
reproduce them; they are one ``GATHER`` from a 65536-entry int16 table per function, computed by the numpy
re-implementation in :mod:`tf2tosa.quant.tflite_reference` (``logistic16``, ``tanh16``) — exact by construction.
All tables of an op live in one constant (sigmoid, tanh Q3.12, tanh of the cell format), indexed with an offset.

Layer norm (``ApplyLayerNorm``) per row of n = 2^k gate values: mean = Σz·2^(10-k), the kernel's int64 variance
computed exactly in int32 pieces (see ``_IntLstm._layer_norm``; below 1 it becomes ``max(1, 10000·s_γ)``), its inverse
square root by ``GetInvSqrtQuantizedMultiplierExp`` as TOSA ops (CLZ, data-dependent shifts, 5 Newton steps in
gemmlowp Q3.28), then ``sat16(MBQM(RDBPOT(MBQM(1024·z - mean, inv, -shift)·γ + β, 10), s_γ·2^12))``.

The initial state is the ``tfl.variable`` value: LiteRT's ``ResetVariableTensor`` fills an int8 state with its
zero point.

Refused with the reason (``Unsupported``): int16 activations ("16x8": LiteRT has no such kernel for this op and
TF's converter refuses to build one), layer norm with n_cell not a power of two or above 1024 (LiteRT's
``2^20 / n_cell`` is only right for powers of two), diagonal recurrent weights (no integer kernel), asymmetric
weights, cell-state scales that are not a power of two or whose tanh format the kernel does not dispatch (integer
bits outside 0…6), peephole with projection when n_output != n_cell (LiteRT's ``CalculateLstmGateInteger8x8_16``
passes n_output as the peephole vector length, so its result is not the documented cell).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, QuantParams, Value, has_value
from ..quant import tflite_reference as R
from ..quant.elementwise import Fx
from ..quant.rescale import rescale
from ..tosa.builder import Builder
from .lowering.numeric import static_shape

GATES = ("i", "f", "c", "o")
_F32 = np.float32


def _opt(op: Operation, k: int) -> Value | None:
    if k >= len(op.operands):
        return None
    v = op.operands[k]
    return v if has_value(v) else None


def _qp(op: Operation, v: Value, what: str, dtype: DType) -> tuple[float, int]:
    q = v.type.quant
    if v.dtype is not dtype or q is None or q.per_channel:
        raise Unsupported(f"integer {op.name}: {what} ({v.source or v.name}) is {v.type}, expected per-tensor "
                          f"quantized {dtype.value}")
    return float(q.scale[0]), int(q.zero_point[0])


def _sym(op: Operation, v: Value, what: str, dtype: DType) -> float:
    s, zp = _qp(op, v, what, dtype)
    if zp != 0:
        raise Unsupported(f"integer {op.name}: {what} ({v.source or v.name}) has zero point {zp} (the kernel "
                          f"assumes symmetric weights)")
    return s


@functools.lru_cache(maxsize=8)
def activation_tables(cell_bits: int) -> np.ndarray:
    """[sigmoid Q3.12, tanh Q3.12, tanh Q``cell_bits``] of every int16 code (index ``code + 32768``)."""
    codes = np.arange(-32768, 32768, dtype=np.int64)
    parts = [R.logistic16(codes, 3), R.tanh16(codes, 3)]
    if cell_bits != 3:
        parts.append(R.tanh16(codes, cell_bits))
    return np.concatenate(parts).astype(np.int16)


def _f32_scale(*factors: float, divide: float) -> float:
    """``a * b / c`` evaluated in float32 left to right, as the kernel's Prepare does."""
    acc = _F32(factors[0])
    for f in factors[1:]:
        acc = _F32(acc * _F32(f))
    return float(_F32(acc / _F32(divide)))


class _IntLstm:
    """The TOSA emission of one integer LSTM cell."""

    def __init__(self, b: Builder, op: Operation) -> None:
        self.b, self.op = b, op
        self.fx = Fx(b, 3)
        x = op.operands[0]
        if x.dtype is DType.INT16:
            raise Unsupported(f"16x8 {op.name} (int16 activations): LiteRT has no integer kernel for it (only int8 "
                              f"activations with an int16 cell state), so there is nothing to be bit-exact with")
        self.s_x, self.zp_x = _qp(op, x, "input", DType.INT8)
        self.w_x = {g: _opt(op, 1 + k) for k, g in enumerate(GATES)}
        self.w_h = {g: _opt(op, 5 + k) for k, g in enumerate(GATES)}
        self.peep = {g: _opt(op, 9 + k) for k, g in enumerate(("i", "f", "o"))}
        self.bias = {g: _opt(op, 12 + k) for k, g in enumerate(GATES)}
        self.proj_w, self.proj_b = _opt(op, 16), _opt(op, 17)
        h0, c0 = _opt(op, 18), _opt(op, 19)
        if h0 is None or c0 is None:
            raise Unsupported(f"integer {op.name}: output or cell state operand missing")
        self.h0, self.c0 = h0, c0
        self.ln = {g: _opt(op, 20 + k) for k, g in enumerate(GATES)}
        if bool(op.attrs.get("diagonal_recurrent_tensors", False)):
            raise Unsupported(f"integer {op.name} with diagonal recurrent weights (LiteRT has no integer kernel)")
        self.cifg = self.w_x["i"] is None
        self.gates = [g for g in GATES if not (g == "i" and self.cifg)]
        for g in self.gates:
            for what, d in (("input", self.w_x), ("recurrent", self.w_h), ("bias", self.bias)):
                if d[g] is None:
                    raise Unsupported(f"integer {op.name}: {what} weights of gate {g} missing")
        self.peephole = self.peep["o"] is not None
        if self.peephole and any(self.peep[g] is None for g in ("f", "o") + (() if self.cifg else ("i",))):
            raise Unsupported(f"integer {op.name}: peephole weights given for some gates only")
        self.s_h, self.zp_h = _qp(op, h0, "output state", DType.INT8)
        s_c, _ = _qp(op, c0, "cell state", DType.INT16)
        cell_scale = int(round(np.log2(s_c)))
        if float(_F32(2.0 ** cell_scale)) != float(_F32(s_c)):
            raise Unsupported(f"integer {op.name}: cell state scale {s_c} is not a power of two (the kernel "
                              f"requires one)")
        self.cell_scale = cell_scale
        self.cell_bits = 15 + cell_scale
        if not 0 <= self.cell_bits <= 6 or 30 + cell_scale < 15:
            raise Unsupported(f"integer {op.name}: cell state scale 2^{cell_scale} (tanh of the cell state has "
                              f"{self.cell_bits} integer bits; LiteRT dispatches 0…6)")
        inter = op.attrs.get("intermediate_quant") or []
        if len(inter) < 5 or inter[4] is None:
            raise Unsupported(f"integer {op.name}: the effective hidden scale (intermediate tensor 4) is missing")
        self.s_hidden, self.zp_hidden = float(inter[4][0][0]), int(inter[4][1][0])
        self.layer_norm = self.ln["f"] is not None
        self.ln_scale: dict[str, float] = {}
        inter_s = self._intermediate_scales(inter)
        self.s_xg = {g: _f32_scale(_sym(op, self._w(self.w_x, g), f"input weights {g}", DType.INT8), self.s_x,
                                   divide=inter_s[k]) for k, g in enumerate(GATES) if g in self.gates}
        self.s_hg = {g: _f32_scale(_sym(op, self._w(self.w_h, g), f"recurrent weights {g}", DType.INT8),
                                   self.s_h, divide=inter_s[k]) for k, g in enumerate(GATES) if g in self.gates}
        self.s_pg = self._peephole_scales(inter_s)
        self.s_out_hidden = float(_F32(2.0 ** -15 / float(_F32(self.s_hidden)) * 2.0 ** -15))
        for g in self.gates:
            bv = self._w(self.bias, g)
            if bv.dtype is not DType.INT32:
                raise Unsupported(f"integer {op.name}: bias {g} is {bv.type}, expected int32")
        if self.proj_w is not None:
            ps = _sym(op, self.proj_w, "projection weights", DType.INT8)
            self.s_proj = _f32_scale(ps, self.s_hidden, divide=self.s_h)
            if not -128 <= -self.zp_hidden <= 127:
                raise Unsupported(f"integer {op.name}: hidden zero point {self.zp_hidden} (its negation is the "
                                  f"projection's input zero point)")
        s_c32 = _F32(s_c)
        cell_clip = float(op.attrs.get("cell_clip", 0.0) or 0.0)
        self.cell_clip = int(np.trunc(min(max(float(_F32(_F32(cell_clip) / s_c32)), -32768.0), 32767.0))) \
            if cell_clip > 0 else 0
        proj_clip = float(op.attrs.get("proj_clip", 0.0) or 0.0)
        self.proj_clip = int(np.trunc(min(max(float(_F32(_F32(proj_clip) / _F32(self._out_scale()))), -128.0),
                                          127.0))) if proj_clip > 0 else 0
        self.table: Value | None = None

    def _intermediate_scales(self, inter: Sequence[Any]) -> list[float]:
        """The gate intermediates' scales (i, f, c, o): fixed at 2^-12 without layer norm, else read from the
        quantized intermediates, filling :attr:`ln_scale` with the layer norm coefficients' scales."""
        op = self.op
        inter_s = [2.0 ** -12] * 4  # without layer norm the kernel's intermediate scales are fixed
        if self.layer_norm:
            if any(self.ln[g] is None for g in self.gates):
                raise Unsupported(f"integer {op.name}: layer norm coefficients missing for some gates")
            for k in range(4):
                if len(inter) < 4 or inter[k] is None:
                    raise Unsupported(f"integer layer-norm {op.name}: intermediate {k} is not quantized")
                inter_s[k] = float(_F32(inter[k][0][0]))
            for g in self.gates:
                self.ln_scale[g] = _sym(op, self._w(self.ln, g), f"layer norm coefficients {g}", DType.INT16)
        return inter_s

    def _peephole_scales(self, inter_s: Sequence[float]) -> dict[str, float]:
        """Per gate with peephole weights: the float32 scale of its cell-state product, as the kernel's Prepare
        computes it (empty without peepholes)."""
        s_pg: dict[str, float] = {}
        if self.peephole:
            for k, g in ((0, "i"), (1, "f"), (3, "o")):
                p = self.peep[g]
                if p is not None:
                    ps = _sym(self.op, p, f"peephole weights {g}", DType.INT16)
                    s_pg[g] = float(_F32(2.0 ** self.cell_scale * float(_F32(ps)) / float(_F32(inter_s[k]))))
        return s_pg

    def _out_scale(self) -> float:
        q = self.op.results[0].type.quant
        if q is None:
            raise Unsupported(f"integer {self.op.name}: the output is not quantized")
        return float(q.scale[0])

    @staticmethod
    def _w(d: dict[str, Value | None], g: str) -> Value:
        v = d[g]
        assert v is not None
        return v

    # -------------------------------------------------------------------------------------------- pieces
    def _rows3(self, ws: list[Value]) -> Value:
        """Gate weights [n, k] side by side as the [1, k, G·n] right operand of MATMUL."""
        b = self.b
        cat = b.concat(ws, 0)
        r, c = static_shape(cat)
        return b.reshape(b.transpose(cat, [1, 0]), [1, c, r])

    def _matmul(self, a: Value, w: Value, a_zp: int) -> Value:
        b = self.b
        return b.matmul(a, w, b.zp(a_zp, DType.INT8), b.zp(0, DType.INT8))

    def _clip(self, v: Value, lo: int, hi: int) -> Value:
        """clip to [lo, hi] on int32 (CLAMP has no i32 row: MAXIMUM then MINIMUM, spec: MAXIMUM/MINIMUM)."""
        b, fx = self.b, self.fx
        return b.binary("MINIMUM", b.binary("MAXIMUM", v, fx.c(lo)), fx.c(hi))

    def _clamp16(self, v: Value) -> Value:
        return self._clip(v, R.I16_MIN, R.I16_MAX)

    def _act(self, z: Value, which: int) -> Value:
        """Table ``which`` (0 sigmoid, 1 tanh Q3.12, 2 tanh of the cell format) of an int32 [1, B, n] tensor."""
        b = self.b
        if self.table is None:
            self.table = b.const(activation_tables(self.cell_bits).reshape(1, -1, 1), DType.INT16, name="lstm_lut")
        if which == 2 and self.cell_bits == 3:
            which = 1
        shape = static_shape(z)
        idx = self.fx.add(z, 32768 + 65536 * which)
        g = b.emit("GATHER", [self.table, b.reshape(idx, [1, int(np.prod(shape))])]).result
        return b.cast(b.reshape(g, shape), DType.INT32)

    def _ln(self, z: Value, g: str) -> Value:
        return self._layer_norm(z, g) if self.layer_norm else z

    def _layer_norm(self, z: Value, g: str) -> Value:
        """ApplyLayerNorm over the last axis of z [1, B, n] (int16 values in int32), n = 2^k <= 1024.

        The kernel's int64 variance ``trunc((Σz²·2^(20-k) - mean²) / 2^20)`` (mean = Σz·2^(10-k)) equals
        ``floor(D / n²)`` with ``D = n·Σz² - (Σz)²``.  With q = floor(Σz / n), r = Σz - q·n and d = z - q:
        ``D = n·Σd² - r²``, and ``floor(D / n²) = e1 - [e0·n < r²]`` where e1, e0 are the quotient and remainder
        of Σd² by n.  Σd² (up to 2^42) is kept as ``2^16·H + L`` from d = 2^8·dh + dl, so every intermediate
        fits in int32."""
        b, fx = self.b, self.fx
        n = static_shape(z)[2]
        k = n.bit_length() - 1
        w = self._w(self.ln, g)
        bias = self._w(self.bias, g)
        ssum = b.reduce_sum(z, axis=2)
        q = fx.shr(ssum, k)
        r = b.binary("BITWISE_AND", ssum, fx.c(n - 1))
        d = fx.sub(z, q)
        dh = fx.shr(d, 8)
        dl = b.binary("BITWISE_AND", d, fx.c(255))
        a = b.reduce_sum(b.mul(dh, dh), axis=2)
        bb = b.reduce_sum(b.mul(dh, dl), axis=2)
        c = b.reduce_sum(b.mul(dl, dl), axis=2)
        # Σd² = 2^16·a + 2^9·bb + c = 2^16·(a + bh) + (2^9·bl + c), bb = 2^7·bh + bl
        bh = fx.shr(bb, 7)
        low = fx.add(b.mul(b.binary("BITWISE_AND", bb, fx.c(127)), fx.c(1 << 9)), c)
        high = fx.add(fx.add(a, bh), fx.shr(low, 16))
        low = b.binary("BITWISE_AND", low, fx.c(0xFFFF))
        e1 = fx.add(b.mul(high, fx.c(1 << (16 - k))), fx.shr(low, k))
        e0 = b.binary("BITWISE_AND", low, fx.c(n - 1))
        var = fx.sub(e1, fx.where(fx.gt(b.mul(r, r), b.mul(e0, fx.c(n))), 1, 0))
        limit = max(1, int(np.trunc(float(_F32(10000.0 * _F32(self.ln_scale[g]))))))
        var = fx.where(fx.gt(1, var), limit, var)
        inv, shift = self._inv_sqrt(var)
        mean = b.mul(ssum, fx.c(1 << (10 - k)))
        shifted = fx.sub(b.mul(z, fx.c(1024)), mean)
        rescaled = fx.mulhi(shifted, inv)
        rescaled = fx.add(rescaled, fx.where(fx.gt(shift, 0), fx.shr(rescaled, 31), 0))
        rescaled = fx.shr(rescaled, shift, rnd=True)
        val3 = fx.add(b.mul(rescaled, b.reshape(b.cast(w, DType.INT32), [1, 1, n])),
                      b.reshape(bias, [1, 1, n]))
        val4 = fx.rdbpot(val3, 10)
        val5 = rescale(b, val4, float(self.ln_scale[g]) * 4096.0, DType.INT32)
        return self._clamp16(val5)

    def _inv_sqrt(self, v: Value) -> tuple[Value, Value]:
        """GetInvSqrtQuantizedMultiplierExp(v, -1) elementwise on int32 v >= 1: (multiplier, right shift >= 0)."""
        b, fx = self.b, self.fx
        one = fx.gt(2, v)  # the kernel's input <= 1 case
        big = fx.gt(v, (1 << 29) - 1)
        v = fx.where(big, fx.shr(v, 2), v)
        shift = fx.where(big, 12, 11)
        pairs = fx.sub(fx.shr(fx.sub(b.clz(v), 1), 1), 1)
        shift = fx.sub(shift, pairs)
        v = b.binary("LOGICAL_LEFT_SHIFT", v, b.mul(pairs, fx.c(2)))
        half_input = fx.rdbpot(fx.shr(v, 1), 1, nonneg=True)
        x: Value = fx.c(1 << 28)
        for _ in range(5):
            x3 = fx.sat_shl(fx.mulhi(fx.mulhi(x, x), x), 6)
            x = fx.sat_shl(fx.sub(fx.mulhi((1 << 28) + (1 << 27), x), fx.mulhi(half_input, x3)), 3)
        x = fx.mulhi(x, 1518500250)
        neg = fx.gt(0, shift)
        x = fx.where(neg, b.binary("LOGICAL_LEFT_SHIFT", x, fx.sub(0, fx.where(neg, shift, 0))), x)
        shift = fx.where(neg, 0, shift)
        return fx.where(one, R.I32_MAX, x), fx.where(one, 0, shift)

    def _peep(self, z: Value, g: str, c: Value) -> Value:
        p = self.peep[g]
        if p is None:
            return z
        b = self.b
        n = static_shape(p)[0]
        pc = b.mul(c, b.reshape(b.cast(p, DType.INT32), [1, 1, n]))
        return self._clamp16(self.fx.add(z, rescale(b, pc, self.s_pg[g], DType.INT32)))

    # --------------------------------------------------------------------------------------------- cell
    def run(self, xs: Value) -> list[Value]:
        """xs [T, B, I] int8 → per-step [1, B, n_out] int8 outputs in time order."""
        b, fx, op = self.b, self.fx, self.op
        t_len, batch, n_in = static_shape(xs)
        n_cell = static_shape(self._w(self.w_x, self.gates[0]))[0]
        n_out = static_shape(self._w(self.w_h, self.gates[0]))[1]
        if self.peephole and n_out != n_cell:
            raise Unsupported(f"integer {op.name} with peephole and n_output {n_out} != n_cell {n_cell}: LiteRT's "
                              f"integer kernel runs the peephole product over n_output elements per batch (not the "
                              f"documented n_cell), which the lowering does not reproduce")
        if self.layer_norm and (n_cell & (n_cell - 1) or n_cell > 1024):
            raise Unsupported(f"integer layer-norm {op.name} with n_cell {n_cell}: LiteRT's ApplyLayerNorm is only "
                              f"right for a power of two (its 2^20 / n_cell), lowered up to 1024")
        if static_shape(self.h0)[-1] != n_out or static_shape(self.c0)[-1] != n_cell:
            raise Unsupported(f"{op.name}: state shapes {self.h0.shape}, {self.c0.shape} vs n_output {n_out}, "
                              f"n_cell {n_cell}")
        gates = self.gates
        width = len(gates) * n_cell
        # input contributions of every step: sat16(MBQM(Σ(x - zp)·W + bias)) per gate column
        acc = self._matmul(b.reshape(xs, [1, t_len * batch, n_in]), self._rows3([self._w(self.w_x, g)
                                                                                 for g in gates]), self.zp_x)
        if not self.layer_norm:  # with layer norm the bias is added inside ApplyLayerNorm
            bias = b.concat([self._w(self.bias, g) for g in gates], 0)
            acc = fx.add(acc, b.reshape(bias, [1, 1, width]))
        x_scales = np.repeat([self.s_xg[g] for g in gates], n_cell)
        gx = b.cast(rescale(b, acc, x_scales, DType.INT16), DType.INT32)
        rec = self._rows3([self._w(self.w_h, g) for g in gates])
        h_scales = np.repeat([self.s_hg[g] for g in gates], n_cell)
        h = b.reshape(self.h0, [1, batch, n_out])
        c = b.cast(b.reshape(self.c0, [1, batch, n_cell]), DType.INT32)
        out_q = self.op.results[0].type.quant
        outs: list[Value] = []
        for t in range(t_len):
            gx_t = b.slice(gx, [0, t * batch, 0], [1, batch, width])
            zh = rescale(b, self._matmul(h, rec, self.zp_h), h_scales, DType.INT32)
            z = self._clamp16(fx.add(zh, gx_t))
            pre = {g: b.slice(z, [0, 0, k * n_cell], [1, batch, n_cell]) if len(gates) > 1 else z
                   for k, g in enumerate(gates)}
            f = self._act(self._ln(self._peep(pre["f"], "f", c), "f"), 0)
            i = fx.sub(R.I16_MAX, f) if self.cifg else self._act(self._ln(self._peep(pre["i"], "i", c), "i"), 0)
            g_act = self._act(self._ln(pre["c"], "c"), 1)
            fc = fx.rdbpot(b.mul(f, c), 15)
            ig = fx.rdbpot(b.mul(i, g_act), 30 + self.cell_scale)
            c = self._clamp16(fx.add(fc, ig))
            if self.cell_clip > 0:
                c = self._clip(c, -self.cell_clip, self.cell_clip)
            o = self._act(self._ln(self._peep(pre["o"], "o", c), "o"), 0)
            ot = b.mul(o, self._act(c, 2))
            if self.proj_w is None:
                h = rescale(b, ot, self.s_out_hidden, DType.INT8, out_zp=self.zp_hidden, out_quant=out_q)
            else:
                h = self._project(ot, out_q)
            outs.append(h)
        return outs

    def _project(self, ot: Value, out_q: QuantParams | None) -> Value:
        """CalculateLstmOutputInteger8x8_16 with projection (the kernel's ``-hidden_zp`` included)."""
        b = self.b
        assert self.proj_w is not None
        s1 = rescale(b, ot, self.s_out_hidden, DType.INT8, out_zp=-self.zp_hidden)
        acc = self._matmul(s1, self._rows3([self.proj_w]), -self.zp_hidden)
        if self.proj_b is not None:
            if self.proj_b.dtype is not DType.INT32:
                raise Unsupported(f"integer {self.op.name}: projection bias is {self.proj_b.type}, expected int32")
            n = static_shape(self.proj_b)[0]
            acc = self.fx.add(acc, b.reshape(self.proj_b, [1, 1, n]))
        h = rescale(b, acc, self.s_proj, DType.INT8, out_zp=self.zp_h, out_quant=out_q)
        if self.proj_clip > 0:
            h = b.clamp(h, -self.proj_clip, self.proj_clip)
        return h


def integer_lstm_direction(b: Builder, op: Operation, xs: Value) -> list[Value]:
    """The integer LSTM over time-major xs [T, B, I] (int8): per-step [1, B, n_out] int8 outputs."""
    return _IntLstm(b, op).run(xs)
