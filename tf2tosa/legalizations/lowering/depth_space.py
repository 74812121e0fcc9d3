"""DEPTH_TO_SPACE and SPACE_TO_DEPTH without a TRANSPOSE, for a target with ``depth_space_by_concat`` (Ethos-U).

The default lowering (``tfl_layout.depth_to_space``) is RESHAPE to rank 6, TRANSPOSE, RESHAPE.  Vela 5.2 runs
that TRANSPOSE as five ``Transpose`` passes (espcn_x2's [1,32,32,4] → [1,64,64,1]: 48.0 k of its 96.4 k cycles on
ethos-u85-256), and merging the axes that stay adjacent ([N·H, W, bs, bs·C'] with perms [0,2,1,3]) leaves the
same five passes and cycles.  The forms here move the same bytes with SLICE and CONCAT only; in NHWC order

    depth_to_space(x)[n, h·bs+dy, w·bs+dx, c] = x[n, h, w, (dy·bs+dx)·C' + c]

and the row-major bytes of ``y = CONCAT_axis2(x[..., dy·bs·C' : (dy+1)·bs·C'] for dy)``, shape
[N, H, bs·W, bs·C'], are exactly those of the [N, H·bs, W·bs, C'] result (``y[n, h, dy·W + w, dx·C' + c]`` sits
at ((n·H + h)·bs + dy)·W·bs·C' + w·bs·C' + dx·C' + c), so a RESHAPE finishes it.  SPACE_TO_DEPTH is the inverse:
RESHAPE x to [N, H/bs, bs·(W/bs), bs·C], SLICE the bs row phases along axis 2, CONCAT them on the channels.

When the DEPTH_TO_SPACE's input is a constant-weight CONV2D's RESCALE (with any CLAMP after it) used by nothing
else, the CONV2D itself is split into one convolution per row phase dy (its output channels
dy·bs·C' … (dy+1)·bs·C'), each with its own RESCALE and CLAMP: each output channel is computed from the same
terms as before, so the values are the same, and Vela writes each convolution straight into the CONCAT (no copy).

An integer row phase (weight zero point 0) with stride and dilation 1 along W, an even output width and at most 4
channels also pairs its columns: one convolution at stride 2 along W whose output channel wl·k + m (wl = 0, 1) is
channel m of column 2·w' + wl.  Its kernel is one column wider, channel wl·k + m holding the original taps shifted
wl columns right and 0 elsewhere (those taps add exact zeros to the integer accumulator; the padding is unchanged,
and the output width halves exactly).  The [N, H, W/2, 2k] result has the bytes of the [N, H, W, k] row phase, so
the CONCAT along W and the RESHAPE are unchanged.  Vela 5.2 costs a convolution of up to 8 channels by its output
positions, so the two row phases cost about what the `.tflite`'s one convolution does instead of twice (espcn_x2:
55,596 → 49,742 cycles on ethos-u85-256, its `.tflite` 48,886).
All of it is data movement or the same arithmetic: exact for every type.
"""

from __future__ import annotations

import numpy as np

from ...ir import Operation, Value
from ...tosa.builder import Builder

__all__ = ["depth_to_space_by_concat", "space_to_depth_by_concat"]


def depth_to_space_by_concat(b: Builder, x: Value, source: Value, shape: list[int], bs: int) -> Value:
    """``x`` [N,H,W,bs·bs·C'] (the lowered ``source``) as [N,H·bs,W·bs,C'] by SLICE/CONCAT/RESHAPE, or by one
    convolution per row phase when ``x`` is a single-use CONV2D's RESCALE (module doc)."""
    n, h, w, c = shape
    k = c // bs  # bs·C': the channels of one row phase
    parts = _split_conv(b, x, source, k, bs)
    if parts is None:
        parts = [b.slice(x, [0, 0, 0, dy * k], [n, h, w, k]) for dy in range(bs)]
    y = b.concat(parts, 2)
    return b.reshape(y, [n, h * bs, w * bs, c // (bs * bs)])


def space_to_depth_by_concat(b: Builder, x: Value, shape: list[int], bs: int) -> Value:
    """``x`` [N,H,W,C] as [N,H/bs,W/bs,bs·bs·C] by RESHAPE/SLICE/CONCAT (module doc)."""
    n, h, w, c = shape
    hb, wb = h // bs, w // bs
    y = b.reshape(x, [n, hb, bs * wb, bs * c])
    return b.concat([b.slice(y, [0, 0, dy * wb, 0], [n, hb, wb, bs * c]) for dy in range(bs)], 3)


def _chain(x: Value) -> tuple[Operation, Operation, list[Operation]] | None:
    """(CONV2D, RESCALE, CLAMPs) when ``x`` is CONV2D → RESCALE → CLAMP* with constant weights, bias and scales
    and every value in between used once; else None."""
    clamps: list[Operation] = []
    v = x
    while v.producer is not None and v.producer.opcode == "CLAMP":
        clamps.insert(0, v.producer)
        v = v.producer.operands[0]
        if len(v.uses) != 1 or v in v.graph.outputs:
            return None
    rescale = v.producer
    if rescale is None or rescale.opcode != "RESCALE" or not all(o.is_const for o in rescale.operands[1:]):
        return None
    acc = rescale.operands[0]
    conv = acc.producer
    if (
        conv is None
        or conv.opcode != "CONV2D"
        or len(acc.uses) != 1
        or acc in acc.graph.outputs
        or not all(o.is_const for o in conv.operands[1:])
    ):
        return None
    return conv, rescale, clamps


def _channels(v: Value, lo: int, hi: int) -> np.ndarray:
    """Channels lo:hi of a per-channel constant (a one-element constant applies to every channel)."""
    arr = np.asarray(v.const())
    return arr if arr.size == 1 else arr[lo:hi]


def _split_conv(b: Builder, x: Value, source: Value, k: int, bs: int) -> list[Value] | None:
    """One CONV2D (+ RESCALE, CLAMPs) per row phase, output channels dy·k … (dy+1)·k of ``x``'s convolution,
    column-paired when :func:`_column_phases` allows it; None when ``x`` is not such a convolution's output or
    ``source`` has another consumer."""
    if bs < 2 or len(source.uses) != 1 or source in source.graph.outputs:
        return None
    found = _chain(x)
    if found is None:
        return None
    conv, rescale, clamps = found
    q = _column_phases(conv, k)
    attrs = dict(conv.attrs)
    if q > 1:
        attrs["stride"] = [attrs["stride"][0], q]
    parts = []
    for dy in range(bs):
        lo, hi = dy * k, (dy + 1) * k
        wv, bias = conv.operands[1], conv.operands[2]
        weights = _channels(wv, lo, hi)
        if q > 1:
            weights = _paired_weights(weights, q)
        ops = [
            conv.operands[0],
            b.const(weights, wv.dtype),
            b.const(_tiled(bias, lo, hi, q), bias.dtype),
            *conv.operands[3:],
        ]
        y = b.emit("CONV2D", ops, attrs, out_dtype=conv.result.dtype).result
        mul, shift = rescale.operands[1], rescale.operands[2]
        ops = [
            y,
            b.const(_tiled(mul, lo, hi, q), mul.dtype),
            b.const(_tiled(shift, lo, hi, q), shift.dtype),
            *rescale.operands[3:],
        ]
        y = b.emit(
            "RESCALE", ops, dict(rescale.attrs), out_dtype=rescale.result.dtype, quant=rescale.result.type.quant
        ).result
        for clamp in clamps:
            y = b.emit("CLAMP", [y], dict(clamp.attrs), quant=clamp.result.type.quant).result
        parts.append(y)
    return parts


#: most output channels a column-paired row phase may have: Vela 5.2 costs a convolution of up to 8 output channels
#: by its output positions (tests/test_npu_depth_to_space.py), so pairing columns halves a narrow phase's cost base
_PAIRED_CHANNELS = 8


def _column_phases(conv: Operation, k: int) -> int:
    """2 when the row phase's convolution can compute two adjacent output columns per position (module doc), else 1:
    an integer convolution with weight zero point 0, stride 1 and dilation 1 along W, an even output width and at
    most ``_PAIRED_CHANNELS`` channels once paired (``k`` is the row phase's channel count)."""
    if not conv.operands[0].dtype.is_int or 2 * k > _PAIRED_CHANNELS or np.any(np.asarray(conv.operands[4].const())):
        return 1
    if conv.attrs["stride"][1] != 1 or conv.attrs["dilation"][1] != 1 or conv.result.type.shape[2] % 2:
        return 1
    return 2


def _paired_weights(w: np.ndarray, q: int) -> np.ndarray:
    """[k, KH, KW, IC] weights as [q·k, KH, KW+q-1, IC]: output channel wl·k + m is channel m shifted wl columns
    right, the other taps 0 (the weight zero point is 0: they add nothing)."""
    k, kh, kw, ic = w.shape
    out = np.zeros((q, k, kh, kw + q - 1, ic), dtype=w.dtype)
    for wl in range(q):
        out[wl, :, :, wl : wl + kw, :] = w
    return out.reshape(q * k, kh, kw + q - 1, ic)


def _tiled(v: Value, lo: int, hi: int, q: int) -> np.ndarray:
    """Channels lo:hi of a per-channel constant, repeated for ``q`` column phases (one element stays one)."""
    arr = _channels(v, lo, hi)
    return arr if arr.size == 1 or q == 1 else np.tile(arr, q)
