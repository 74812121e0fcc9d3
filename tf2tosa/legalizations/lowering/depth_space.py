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
    """One CONV2D (+ RESCALE, CLAMPs) per row phase, output channels dy·k … (dy+1)·k of ``x``'s convolution;
    None when ``x`` is not such a convolution's output or ``source`` has another consumer."""
    if bs < 2 or len(source.uses) != 1 or source in source.graph.outputs:
        return None
    found = _chain(x)
    if found is None:
        return None
    conv, rescale, clamps = found
    parts = []
    for dy in range(bs):
        lo, hi = dy * k, (dy + 1) * k
        wv, bias = conv.operands[1], conv.operands[2]
        ops = [
            conv.operands[0],
            b.const(_channels(wv, lo, hi), wv.dtype),
            b.const(_channels(bias, lo, hi), bias.dtype),
            *conv.operands[3:],
        ]
        y = b.emit("CONV2D", ops, dict(conv.attrs), out_dtype=conv.result.dtype).result
        mul, shift = rescale.operands[1], rescale.operands[2]
        ops = [
            y,
            b.const(_channels(mul, lo, hi), mul.dtype),
            b.const(_channels(shift, lo, hi), shift.dtype),
            *rescale.operands[3:],
        ]
        y = b.emit(
            "RESCALE", ops, dict(rescale.attrs), out_dtype=rescale.result.dtype, quant=rescale.result.type.quant
        ).result
        for clamp in clamps:
            y = b.emit("CLAMP", [y], dict(clamp.attrs), quant=clamp.result.type.quant).result
        parts.append(y)
    return parts
