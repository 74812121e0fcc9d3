"""Window padding for the convolution and pooling lowerings of both frontends (``tf.*`` and ``tfl.*`` rules).

TF and TFLite give SAME / VALID (TF also EXPLICIT) padding and floor the output size; TOSA 1.0 takes explicit
[top, bottom, left, right] pads and requires the output-size division to be exact (the ``idiv_check`` of the
spec's convolution and pooling operators).  :func:`window_pads` computes the pads, trimmed so the division is
exact; :func:`apply_window_padding` SLICEs off the trailing rows a negative pad stands for.

Over a symbolic size n (``--dynamic``) the remainder r = (n + before + after - eff_k) mod s is an expression, 0 at
some sizes and not at others, so it cannot choose between a smaller pad and a cut: :func:`window_pads` gives the
input rows the window reads, eff_k - before + s·((n + before + after - eff_k) // s), as a symbolic input size
(:attr:`WindowPads.sizes`) that :func:`apply_window_padding` cuts with a SLICE (unless ``after`` ≥ s - 1 covers
every remainder); no PAD is ever negative.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import NotYet, Unsupported
from ...ir import Value
from ...ir.symdim import is_symbolic, sym_max, sym_min
from ...tosa.builder import Builder


def same_padding(in_size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TF/TFLite SAME padding (extra pad at the end), §6.2."""
    if stride < 1 or kernel < 1 or dilation < 1:
        raise Unsupported(f"window of kernel {kernel}, stride {stride}, dilation {dilation}: each must be >= 1")
    eff_k = (kernel - 1) * dilation + 1
    out = -(-in_size // stride)
    if is_symbolic(in_size) and eff_k >= stride:
        out = (in_size + stride - 1) // stride  # the same ceil, as a floor of non-negative sizes (DIV_FLOOR_SHAPE)
        # --dynamic: (out - 1)·s ≥ n - s, so the total is ≥ eff_k - s ≥ 0 at every size: no max (a guard), and
        # the expression (it depends on n mod s) becomes a computed PAD (:func:`apply_window_padding`)
        total = (out - 1) * stride + eff_k - in_size
    elif is_symbolic(in_size) and eff_k == 1:
        total = 0  # (⌈n/s⌉ - 1)·s ≤ n - 1 at every size: TF's max(0, ·) is 0 (no guard); the remainder is cut
    else:
        total = max(0, (out - 1) * stride + eff_k - in_size)
    return total // 2, total - total // 2


class WindowPads(list[int]):
    """[top, bottom, left, right] of :func:`window_pads`, with ``sizes``: per spatial axis the input size the window
    reads when that is an expression shorter than the input (a symbolic size with a remainder), else None."""

    sizes: tuple[int | None, int | None] = (None, None)


#: :func:`window_pads` of plain-int arguments, by (padding, in_hw, kernel, stride, dilation, explicit) as tuples
_PADS: dict[tuple[Any, ...], list[int]] = {}


def window_pads(padding: str, in_hw: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                dilation: Sequence[int] = (1, 1), explicit: Sequence[int] | None = None) -> list[int]:
    """:func:`_window_pads` (a new list), kept per argument when they are plain ints (the convolutions of a model
    repeat a few geometries: NASNetMobile's 356 have about 40)."""
    parts = (in_hw, kernel, stride, dilation) if explicit is None else (in_hw, kernel, stride, dilation, explicit)
    key = (padding, *(tuple(p) for p in parts))
    for p in key[1:]:
        for d in p:
            if d.__class__ is not int:
                return _window_pads(padding, in_hw, kernel, stride, dilation, explicit)
    got = _PADS.get(key)
    if got is None:
        got = _window_pads(padding, in_hw, kernel, stride, dilation, explicit)
        if got.__class__ is not list:  # (a WindowPads, over symbolic sizes: not kept)
            return got
        if len(_PADS) < 1 << 12:
            _PADS[key] = list(got)
        return got
    return list(got)


def _window_pads(padding: str, in_hw: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                 dilation: Sequence[int] = (1, 1), explicit: Sequence[int] | None = None) -> list[int]:
    """[top, bottom, left, right] for SAME / VALID / EXPLICIT, trimmed so TOSA's exact output-size division holds.

    TF floors the output size; TOSA 1.0 raises ERROR_IF on a remainder (``idiv_check``, op_inventory §6.2).
    Cutting the remainder off the bottom/right pad gives the same outputs (those rows are never read).  A
    remainder larger than the pad is returned as a negative pad; :func:`apply_window_padding` turns it into a SLICE.
    Over a symbolic size whose remainder is an expression the result is a :class:`WindowPads` whose ``sizes``
    give the input rows read, ``eff_k - before + s·(span // s)`` (span = n + before + after - eff_k), and the
    bottom pad is what of ``after`` is read, ``max(0, after - span mod s)`` (0 for VALID): never negative.
    """
    for what, vals in (("kernel", kernel), ("stride", stride), ("dilation", dilation)):
        if any(int(v) < 1 for v in vals[:2]):
            raise Unsupported(f"{what} {list(vals)} must be >= 1")
    pads: list[int] = []
    sizes: list[int | None] = [None, None]
    for i in range(2):
        eff_k = (kernel[i] - 1) * dilation[i] + 1
        if padding == "SAME" and is_symbolic(in_hw[i]) and 1 < eff_k < stride[i]:
            # --dynamic: TF's total max(0, raw), raw = (⌈n/s⌉ - 1)·s + eff_k - n, is positive at some sizes and
            # negative at others: pad total = raw - min(raw, 0) and cut the input to n + min(raw, 0) (the rows
            # past the last window); the padded size n + raw keeps the output-size division exact
            raw = ((in_hw[i] + stride[i] - 1) // stride[i] - 1) * stride[i] + eff_k - in_hw[i]
            cut = sym_min(raw, 0)
            total = raw - cut
            sizes[i] = in_hw[i] + cut
            pads += [total // 2, total - total // 2]
            continue
        if padding == "SAME":
            before, after = same_padding(in_hw[i], kernel[i], stride[i], dilation[i])
        elif padding == "VALID":
            before, after = 0, 0
        elif padding == "EXPLICIT":
            if explicit is None or len(explicit) != 4:
                raise Unsupported("EXPLICIT padding without explicit_paddings")
            before, after = int(explicit[2 * i]), int(explicit[2 * i + 1])
            if before < 0 or after < 0:
                raise Unsupported(f"negative explicit padding {list(explicit)}")
        else:
            raise Unsupported(f"padding {padding!r}")
        if is_symbolic(before) or is_symbolic(after):  # SAME over a symbolic size: (out - 1)·s, exact
            pads += [before, after]
            continue
        span = in_hw[i] + before + after - eff_k
        if span < 0:
            raise Unsupported(f"window of {eff_k} larger than the padded input {in_hw[i] + before + after}")
        rem = span % stride[i]
        if is_symbolic(rem) and after < stride[i] - 1:  # --dynamic: cut the rows the window never reads
            read = eff_k - before + stride[i] * (span // stride[i])  # = n + after - rem
            sizes[i] = read if after == 0 else sym_min(in_hw[i], read)
            pads += [before, 0 if after == 0 else sym_max(0, after - rem)]
            continue
        pads += [before, after - rem]
    if any(s is not None for s in sizes):
        out = WindowPads(pads)
        out.sizes = (sizes[0], sizes[1])
        return out
    return pads


def apply_window_padding(b: Builder, x: Value, pads: list[int], pad_const: Value | None = None,
                         what: str = "this window") -> tuple[Value, list[int]]:
    """SLICE away trailing rows/columns that negative pads from :func:`window_padding` stand for.

    Pads that are dimension expressions (SAME over a symbolic size, ``--dynamic``) cannot be CONV2D/POOL
    attributes: they become an explicit PAD of ``pad_const`` (a one-element tensor of ``x``'s type: the input zero
    point for a convolution, the lowest value for a max-pool) whose padding operand is computed at run time, and
    the window op gets zero pads.  Without ``pad_const`` (an average pool, whose divisor must count only the real
    elements) that is one "not yet" error.  The input sizes of a :class:`WindowPads` (the rows a window over a
    symbolic size reads) are cut first, by a SLICE whose size operand is computed at run time."""
    sizes = getattr(pads, "sizes", (None, None))
    if any(s is not None for s in sizes):
        n, h, w, c = x.shape
        size = [n, h if sizes[0] is None else sizes[0], w if sizes[1] is None else sizes[1], c]
        # emitted as is: Builder.slice's "whole tensor?" test would record a guard that the size has a remainder
        x = b.emit("SLICE", [x, b.shape([0, 0, 0, 0]), b.shape(size)], quant=x.type.quant).result
        pads = list(pads)
    if any(is_symbolic(p) for p in pads):
        if pad_const is None:
            raise NotYet(f"SAME padding over a symbolic size for {what} (the pads depend on the size's residue and "
                         "its divisor must count only the real elements)")
        padding = [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0]
        y = b.emit("PAD", [x, b.shape(padding), pad_const], quant=x.type.quant).result
        return y, [0, 0, 0, 0]
    n, h, w, c = x.shape
    cut_h, cut_w = max(0, -pads[1]), max(0, -pads[3])
    if cut_h or cut_w:
        x = b.slice(x, [0, 0, 0, 0], [n, h - cut_h, w - cut_w, c])
    return x, [pads[0], max(0, pads[1]), pads[2], max(0, pads[3])]


__all__ = ["WindowPads", "apply_window_padding", "same_padding", "window_pads"]
