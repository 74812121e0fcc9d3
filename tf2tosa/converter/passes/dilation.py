"""Dilations above a target's native limit rewritten as a smaller dilation of a larger kernel (``--target``
ethos-u85 / ethos-u55 only).

before::

    x ──► CONV2D / DEPTHWISE_CONV2D (weight K × K, dilation d)

after (``d = e·f`` with ``e`` the largest dilation the target runs natively that divides ``d``)::

    x ──► CONV2D / DEPTHWISE_CONV2D (weight (K − 1)·f + 1 square, taps every f-th position, the rest weight_zp;
          dilation e)

The rewritten convolution reads the same input positions with the same weights: tap ``k`` of the old kernel sits
at ``k·d = (k·f)·e``, which is tap ``k·f`` of the new one, and every other tap holds ``weight_zp``, so it adds
``(value − input_zp)·(weight_zp − weight_zp) = 0`` (spec 2.3.3 CONV2D, 2.3.5 DEPTHWISE_CONV2D).  The accumulator
sees the same terms and the same zeros, so the result is equal bit for bit, in every type.  The dilated extent
``(K − 1)·d + 1`` is unchanged, and with it the output size and padding.

Why: Ethos-U runs dilation 1 and 2 in hardware.  Vela's `.tflite` reader widens a larger dilation's kernel this way
itself; its TOSA reader instead splits the convolution into one partial convolution per kernel phase
(deeplab_v3_mini's dilation-4 and -6 ASPP branches: 52 convolutions, 1.09 M against the `.tflite`'s 0.37 M cycles).
Only targets that declare ``max_dilation`` (:data:`tf2tosa.tosa.targets.TARGETS`) get the rewrite: on a CPU or GPU
the wider kernel costs ``((K − 1)·f + 1)² / K²`` times the multiplies.

Only constant weights are rewritten, and only where the wider kernel stays within the target's kernel limit.
Records (:mod:`tf2tosa.ir.records`): reads and writes none; only the graph's ops.
"""

from __future__ import annotations

import numpy as np

from ...ir import Graph, Operation

#: the axes of (KH, KW) in each convolution's weight (CONV2D: OHWI; DEPTHWISE_CONV2D: HWCM)
_KERNEL_AXES = {"tosa.CONV2D": (1, 2), "tosa.DEPTHWISE_CONV2D": (0, 1)}


def wanted(target: str | None) -> tuple[int, int] | None:
    """(largest native dilation, largest kernel side) of ``target`` when it wants the rewrite, else None."""
    if not target:
        return None
    from ...tosa.targets import TARGETS  # (loaded only with --target)

    t = TARGETS.get(target)
    return (t.max_dilation, t.max_kernel) if t is not None and t.max_dilation else None


def _native(d: int, limit: int) -> int:
    """The largest dilation in 1..limit that divides ``d``."""
    return max(e for e in range(1, limit + 1) if d % e == 0)


def _rewrite(graph: Graph, op: Operation, limit: int, max_kernel: int) -> bool:
    dil = [int(d) for d in op.attrs["dilation"]]
    w, wzp = op.operands[1].const(), op.operands[4].const()
    if max(dil) <= limit or w is None or wzp is None or np.asarray(wzp).size != 1:
        return False
    w = np.asarray(w)
    native = [_native(d, limit) for d in dil]
    factor = [d // e for d, e in zip(dil, native)]
    axes = _KERNEL_AXES[op.name]
    shape = list(w.shape)
    for ax, f in zip(axes, factor):
        shape[ax] = (shape[ax] - 1) * f + 1
    if max(shape[ax] for ax in axes) > max_kernel:
        return False
    wide = np.full(shape, np.asarray(wzp).ravel()[0], dtype=w.dtype)
    taps: list[slice] = [slice(None)] * w.ndim
    for ax, f in zip(axes, factor):
        taps[ax] = slice(None, None, f)
    wide[tuple(taps)] = w
    old = op.operands[1]
    graph.set_operand(op, 1, graph.add_const(wide, old.type.dtype, name=old.name + "_spread", quant=old.type.quant))
    op.attrs["dilation"] = native
    return True


def limit_dilation(graph: Graph, limit: int, max_kernel: int) -> int:
    """Rewrite every CONV2D/DEPTHWISE_CONV2D of constant weights whose dilation exceeds ``limit``; returns how many
    were rewritten (the old weights go with the graph's next dead-op sweep)."""
    return sum(_rewrite(graph, op, limit, max_kernel) for op in graph.topological_order() if op.name in _KERNEL_AXES)
