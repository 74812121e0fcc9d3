"""§2.10 Data layout: CONCAT, PAD, RESHAPE, REVERSE, SLICE, TILE, TRANSPOSE."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from .registry import bind, error_if, int_list, kernel, scalar, to_out


@kernel("CONCAT")
def concat(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.10.1 CONCAT: operands are the tensor list."""
    args = bind(op, ins)
    axis = int(args.axis)
    inputs = args.input1
    first = inputs[0]
    rank = first.ndim
    error_if(any(a.ndim != rank for a in inputs), op, "CONCAT inputs differ in rank")
    error_if(axis < 0 or axis >= max(1, rank), op, f"axis {axis} out of range")
    for a in inputs:
        error_if(any(a.shape[i] != first.shape[i] for i in range(rank) if i != axis), op,
                 f"shapes {[list(t.shape) for t in inputs]} differ off the axis")
    return [to_out(np.concatenate(inputs, axis=axis), op)]


@kernel("PAD")
def pad(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.10.2 PAD: padding shape_t [start0,end0,start1,end1,…], pad_const [1]."""
    args = bind(op, ins)
    x = args.input1
    p = int_list(args.padding)
    error_if(len(p) != 2 * x.ndim, op, f"padding has {len(p)} values for rank {x.ndim}")
    error_if(min(p, default=0) < 0, op, "negative padding")
    value = scalar(args.pad_const) if args.pad_const is not None else 0
    widths = [(p[2 * i], p[2 * i + 1]) for i in range(x.ndim)]
    want = [d + a + b for d, (a, b) in zip(x.shape, widths)]
    declared = list(op.results[0].type.shape)
    error_if(len(declared) == len(want) and all(isinstance(d, int) for d in declared) and declared != want, op,
             f"padded shape {want} differs from the result's {declared}")  # checked before np.pad allocates it
    return [to_out(np.pad(x, widths, constant_values=value), op)]


@kernel("RESHAPE")
def reshape(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.10.3 RESHAPE: element counts equal, dims >= 1."""
    args = bind(op, ins)
    x = args.input1
    shape = int_list(args.shape) if args.shape is not None else list(op.results[0].type.static_shape)
    error_if(any(d < 1 for d in shape), op, f"shape {shape} has a dim < 1")
    error_if(int(np.prod(shape, dtype=np.int64)) != x.size, op, f"cannot reshape {list(x.shape)} to {shape}")
    return [to_out(x.reshape(shape), op)]


@kernel("REVERSE")
def reverse(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    x = args.input1
    axis = int(args.axis)
    error_if(axis < 0 or axis >= x.ndim, op, f"axis {axis} out of range")
    return [to_out(np.flip(x, axis=axis), op)]


@kernel("SLICE")
def slice_(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.10.5 SLICE."""
    args = bind(op, ins)
    x = args.input1
    start, size = int_list(args.start), int_list(args.size)
    error_if(len(start) != x.ndim or len(size) != x.ndim, op, "start/size length != rank")
    for i in range(x.ndim):
        error_if(start[i] < 0 or size[i] <= 0 or start[i] + size[i] > x.shape[i], op,
                 f"dim {i}: start {start[i]} size {size[i]} outside {x.shape[i]}")
    idx = tuple(slice(s, s + n) for s, n in zip(start, size))
    return [to_out(x[idx], op)]


@kernel("TILE")
def tile(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    x = args.input1
    mult = int_list(args.multiples)
    error_if(len(mult) != x.ndim or min(mult, default=1) < 1, op, f"bad multiples {mult}")
    return [to_out(np.tile(x, mult), op)]


@kernel("TRANSPOSE")
def transpose(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.10.7 TRANSPOSE: output dim i = input dim perms[i]."""
    args = bind(op, ins)
    x = args.input1
    perms = int_list(args.perms)
    error_if(sorted(perms) != list(range(x.ndim)), op, f"perms {perms} is not a permutation of rank {x.ndim}")
    return [to_out(np.transpose(x, perms), op)]
