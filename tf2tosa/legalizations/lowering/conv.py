"""Convolution-family lowering math shared by the ``tf.*`` and ``tfl.*`` rules: grouped convolution (one
DEPTHWISE_CONV2D when every group has one input channel, else one CONV2D per group), and the out-pads of a
transposed convolution.

The callers keep what differs between the frontends (zero points, accumulator type, how a [1] bias is widened);
the geometry lives here once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...errors import Unsupported
from ...ir import Operation, Value
from ...tosa.builder import Builder
from .layout import prod


def grouped_conv2d(b: Builder, x: Value, w: Value, bias: Value, conv: Callable[[Value, Value, Value], Value],
                   full_bias: Callable[[Value], Value], what: str,
                   depthwise: Callable[[Value, Value, Value], Value] | None = None) -> Value:
    """A grouped convolution of NHWC ``x`` (C channels, already padded) with an OHWI filter of IC = C / groups
    input channels, OC split evenly between the groups.

    One input channel per group (groups = C, as ConvNeXt's 7x7 ``Conv2D(groups=C)``) is a depthwise convolution:
    output channel ``g·M + m`` of group ``g`` is DEPTHWISE_CONV2D's ``c·M + m`` (spec 2.3.5), so the filter
    [C·M, KH, KW, 1] transposed to [KH, KW, 1, C·M] and reshaped to [KH, KW, C, M] gives one
    ``depthwise(x, w, bias)`` with the same sums, per-channel scales and bias order.  Otherwise one
    ``conv(x_g, w_g, bias_g)`` per group, then CONCAT.

    ``full_bias`` widens a [1] bias to [OC] (called only for a [1] bias); ``what`` names the op in errors.
    """
    n, h, wd, c = (int(d) for d in x.shape)
    oc, kh, kw, ic = (int(d) for d in w.shape)
    if c % ic or oc % (c // ic):
        raise Unsupported(f"{what} input channels {c} vs filter channels {ic}")
    groups = c // ic
    ocg = oc // groups
    if int(bias.shape[0]) == 1:
        bias = full_bias(bias)
    if ic == 1 and depthwise is not None:
        return depthwise(x, b.reshape(b.transpose(w, [1, 2, 3, 0]), [kh, kw, c, ocg]), bias)
    parts = []
    for g in range(groups):
        xg = b.slice(x, [0, 0, 0, g * ic], [n, h, wd, ic])
        wg = b.slice(w, [g * ocg, 0, 0, 0], [ocg, kh, kw, ic])
        bg = b.slice(bias, [g * ocg], [ocg])
        parts.append(conv(xg, wg, bg))
    return b.concat(parts, 3)


def transpose_conv_out_pads(out_hw: Sequence[int], in_hw: Sequence[int], kernel: Sequence[int],
                            stride: Sequence[int], pad_before: Sequence[int]) -> tuple[list[int], list[int]]:
    """TRANSPOSE_CONV2D's ``out_pad`` [top, bottom, left, right] for an output of ``out_hw``, where the forward
    convolution padded ``pad_before`` = (top, left), and the rows/columns to crop from its result.

    TOSA writes input pixel iy to output rows iy·s + out_pad_top + ky, the forward convolution reads input rows
    iy·s − pad_top + ky: out_pad_top = −pad_top, and out_pad_bottom follows from
    OH = (IH−1)·s + out_pad_top + out_pad_bottom + KH (spec: TRANSPOSE_CONV2D).  Out-pads ≤ −K are an ERROR_IF,
    so they are computed wider (1 − K) and the excess is returned in ``crop`` to SLICE off (op_inventory §6.2).
    """
    out_pad: list[int] = []
    crop: list[int] = []
    for i in range(2):
        k, s = int(kernel[i]), int(stride[i])
        top = -int(pad_before[i])
        bottom = int(out_hw[i]) - (int(in_hw[i]) - 1) * s - k - top
        for p in (top, bottom):
            q = max(p, 1 - k)
            out_pad.append(q)
            crop.append(q - p)
    return out_pad, crop


def crop_output(b: Builder, y: Value, crop: Sequence[int]) -> Value:
    """SLICE [top, bottom, left, right] rows/columns off an NHWC result (the ``crop`` of
    :func:`transpose_conv_out_pads`); ``y`` itself when there is nothing to crop."""
    if not any(crop):
        return y
    n, h, w, c = (int(d) for d in y.shape)
    return b.slice(y, [0, crop[0], crop[2], 0], [n, h - crop[0] - crop[1], w - crop[2] - crop[3], c])


@dataclass(frozen=True)
class TransposePhase:
    """One output phase ``p`` of a transposed convolution along one axis: the outputs ``s·q + p`` (q < ``size``)
    are a stride-1 convolution of the input rows [``start``, ``end``) padded by ``pad`` (before, after) with the
    kernel taps ``taps`` (indices into the transposed convolution's kernel, in convolution order)."""

    taps: tuple[int, ...]
    start: int
    end: int
    pad: tuple[int, int]
    size: int


def transpose_conv_phases(in_size: int, kernel: int, stride: int, out_pad_before: int,
                          out_size: int) -> list[TransposePhase] | None:
    """TRANSPOSE_CONV2D along one axis as ``stride`` stride-1 convolutions, one per output phase; None when some
    phase has no kernel tap (kernel < stride), the phases differ in length (out_size not a multiple of stride) or
    a phase reads no input row.

    The transposed convolution adds input row iy times tap k at output row ``iy·s + out_pad_before + k`` (spec
    2.3.10 TRANSPOSE_CONV2D).  Output row ``s·q + p`` therefore gathers the taps ``k = r + s·j`` (``r = (p −
    out_pad_before) mod s``) from the input rows ``q − δ − j`` (``δ = (r − p + out_pad_before) / s``): a
    convolution of the input padded by ``δ + J − 1`` before, with those J taps in reverse order.  Positions
    outside the input add nothing in both forms, so each phase has the same terms as the transposed one."""
    if out_size % stride:
        return None
    phases = []
    q = out_size // stride
    for p in range(stride):
        r = (p - out_pad_before) % stride
        taps = tuple(reversed(range(r, kernel, stride)))
        if not taps:
            return None
        before = (r - p + out_pad_before) // stride + len(taps) - 1
        after = q + len(taps) - 1 - in_size - before
        start, end = max(0, -before), in_size - max(0, -after)
        if end <= start:
            return None
        phases.append(TransposePhase(taps, start, end, (max(0, before), max(0, after)), q))
    return phases


__all__ = ["TransposePhase", "crop_output", "grouped_conv2d", "transpose_conv_out_pads", "transpose_conv_phases"]


def fully_connected_rows(xs: Sequence[int], ws: Sequence[int]) -> tuple[int, int, int]:
    """(OC, IC, N) of a FULLY_CONNECTED: weights [OC, IC], and the input [..., IC] flattened to N rows of IC."""
    if len(ws) != 2:
        raise Unsupported(f"fully_connected weights of rank {len(ws)}")
    oc, ic = ws
    total = prod(xs) if xs else 1
    if total % ic:
        raise Unsupported(f"fully_connected input {list(xs)} not divisible into rows of {ic}")
    return oc, ic, total // ic


def stride_dilation(op: Operation) -> tuple[list[int], list[int]]:
    """A TFLite 2-D convolution's (stride, dilation), [H, W] each, from its options (1 where absent)."""
    a = op.attrs
    stride = [int(a.get("stride_h", 1)), int(a.get("stride_w", 1))]
    dil = [int(a.get("dilation_h_factor", 1)), int(a.get("dilation_w_factor", 1))]
    return stride, dil
