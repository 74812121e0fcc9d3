"""Sparse TFLite constants: densification at conversion time, and ``tfl.densify``.

TFLite stores a sparse constant as its non-zero values (plus whole dense blocks) in a 1-D buffer, and a
``SparsityParameters`` table that the frontend keeps on the ``tfl.const`` as the ``sparsity`` attribute::

    {"traversal_order": [...], "block_map": [...],
     "dim_metadata": [{"format": "DENSE" | "SPARSE_CSR", "dense_size": int,
                       "array_segments": [...] | None, "array_indices": [...] | None}, ...]}

Layout (TFLite's ``FormatConverter``): a rank-``n`` tensor with ``k = len(block_map)`` blocked dimensions is
viewed as ``n + k`` *expanded* dimensions - the block-level dimensions ``0..n-1`` (dimension ``block_map[j]``
divided by its block size) followed by the in-block dimensions ``n..n+k-1``.  ``traversal_order`` lists the
expanded dimension visited at each storage level; ``dim_metadata[level]`` describes that level: ``DENSE`` (all
``dense_size`` indices) or ``SPARSE_CSR`` (for the parent position ``p``, the indices
``array_indices[array_segments[p]:array_segments[p + 1]]``; the child position is the index into
``array_indices``).  A dense level's child position is ``p * dense_size + i``.  Stored values follow the
depth-first order of that tree.  The size of block ``j`` is ``dim_metadata[traversal_order[n + j]].dense_size``
(read exactly as LiteRT reads it).

TOSA has no sparse tensors: every sparse constant becomes a dense ``tosa.CONST``.  :func:`densify` is a pure
function of the stored values, the dense shape and the attribute; the ``densify`` graph pass
(:mod:`tf2tosa.converter.passes.densify`) rewrites the sparse ``tfl.const`` ops of a graph in place (for ops that
read sparse weights directly, e.g. FULLY_CONNECTED with 1x4 block-sparse weights); ``tfl.densify`` then just
forwards its operand.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import Unsupported
from ..ir import Operation, Value
from ..tosa.builder import Builder
from .registry import legalize


def _levels(sparsity: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    dims = sparsity.get("dim_metadata")
    if not isinstance(dims, Sequence) or not dims:
        raise ValueError("sparsity has no dim_metadata")
    return list(dims)


def _csr_children(parents: np.ndarray, segments: np.ndarray, indices: np.ndarray,
                  level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every parent position, the positions and indices of its children (in order), and each child's parent row.

    Like LiteRT, a parent whose segment pair lies past the end of ``array_segments`` has no children."""
    if len(segments) == 0:
        raise ValueError(f"array_segments of level {level} is empty")
    ok = parents + 1 < len(segments)
    starts = np.where(ok, segments[np.minimum(parents, len(segments) - 1)], 0)
    ends = np.where(ok, segments[np.minimum(parents + 1, len(segments) - 1)], 0)
    counts = np.maximum(ends - starts, 0)
    if np.any(ends > len(indices)):
        raise ValueError(f"array_segments of level {level} point past array_indices ({len(indices)} entries)")
    rows = np.repeat(np.arange(len(parents)), counts)
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    positions = np.repeat(starts, counts) + offsets
    return rows, positions.astype(np.int64), indices[positions].astype(np.int64)


def densify(values: np.ndarray, shape: Sequence[int], sparsity: Mapping[str, Any]) -> np.ndarray:
    """The dense tensor of ``shape`` that a TFLite sparse constant stands for (zeros where nothing is stored).

    ``values`` are the stored values (1-D, in storage order); the result has ``values``' dtype.  Raises
    ValueError for metadata that is inconsistent with the shape or the number of values.
    """
    shape = [int(d) for d in shape]
    n = len(shape)
    order = [int(t) for t in sparsity.get("traversal_order") or range(n)]
    block_map = [int(b) for b in sparsity.get("block_map") or []]
    levels = _levels(sparsity)
    total = n + len(block_map)
    if len(order) != total or sorted(order) != list(range(total)):
        raise ValueError(f"traversal_order {order} is not a permutation of {total} expanded dimensions")
    if len(levels) != total:
        raise ValueError(f"{len(levels)} dim_metadata entries for {total} expanded dimensions")
    if any(t >= n for t in order[:n]):
        raise ValueError(f"traversal_order {order}: the first {n} levels must visit the block-level dimensions")
    if any(not 0 <= bm < n for bm in block_map):
        raise ValueError(f"block_map {block_map} out of range for rank {n}")
    block_size = [int(levels[order[n + j]].get("dense_size") or 0) for j in range(len(block_map))]
    for j, bm in enumerate(block_map):
        if block_size[j] <= 0 or shape[bm] % block_size[j]:
            raise ValueError(f"block size {block_size[j]} does not divide dimension {bm} of {shape}")

    from ..tosa.profiles import MEMORY_BUDGET

    n_dense = 1
    for meta in levels:  # the dense levels alone must not promise more elements than the budget allows
        if str(meta.get("format", "DENSE")) == "DENSE":
            n_dense *= max(int(meta.get("dense_size") or 0), 0)
            if n_dense * 8 > MEMORY_BUDGET or n_dense > math.prod(int(d) for d in shape):
                raise ValueError(f"dense sizes of dim_metadata exceed the tensor's shape {list(shape)}")
    flat = np.asarray(values).reshape(-1)
    parents = np.zeros(1, dtype=np.int64)  # position of each partial path at the current level
    idx = np.zeros((1, 0), dtype=np.int64)  # the indices chosen so far, one row per path
    for lv, meta in enumerate(levels):
        fmt = str(meta.get("format", "DENSE"))
        if fmt == "DENSE":
            size = int(meta.get("dense_size") or 0)
            kids = np.arange(size, dtype=np.int64)
            rows = np.repeat(np.arange(len(parents)), size)
            new_parents = (parents[:, None] * size + kids[None, :]).reshape(-1)
            new_idx = np.tile(kids, len(parents))
        elif fmt == "SPARSE_CSR":
            segs = np.asarray(meta.get("array_segments") or [], dtype=np.int64)
            inds = np.asarray(meta.get("array_indices") or [], dtype=np.int64)
            rows, new_parents, new_idx = _csr_children(parents, segs, inds, lv)
        else:
            raise ValueError(f"dimension format {fmt!r} of level {lv}")
        idx = np.concatenate([idx[rows], new_idx[:, None]], axis=1)
        parents = new_parents
    if len(parents) != flat.size:
        raise ValueError(f"sparsity metadata describes {len(parents)} stored values, the buffer holds {flat.size}")

    orig = np.zeros((flat.size, n), dtype=np.int64)
    for lv in range(n):
        orig[:, order[lv]] = idx[:, lv]
    for lv in range(n, total):
        j = order[lv] - n
        dim = block_map[j]
        orig[:, dim] = orig[:, dim] * block_size[j] + idx[:, lv]
    if np.any(orig < 0) or np.any(orig >= np.asarray(shape, dtype=np.int64)[None, :]):
        raise ValueError(f"sparse indices fall outside the dense shape {shape}")
    dense = np.zeros(shape, dtype=flat.dtype)
    if flat.size:
        dense[tuple(orig.T)] = flat
    return dense


def is_sparse_const(v: Value) -> bool:
    p = v.producer
    return p is not None and p.name == "tfl.const" and p.attrs.get("sparsity") is not None


def densify_op(op: Operation) -> None:
    """Replace a sparse ``tfl.const``'s stored values by the dense tensor, in place (drops ``sparsity``)."""
    sparsity = op.attrs.get("sparsity")
    if sparsity is None:
        return
    r = op.result
    if not r.type.is_static:
        raise Unsupported(f"sparse constant {r.source or r.name} with a dynamic shape")
    try:
        dense = densify(op.attrs["values"], r.type.static_shape, sparsity)
    except ValueError as e:
        raise Unsupported(f"sparse constant {r.source or r.name}: {e}") from None
    op.attrs["values"] = dense
    op.attrs["sparsity_densified"] = True
    del op.attrs["sparsity"]


def dense_operand(v: Value) -> Value:
    """``v`` with its producer densified when it is a sparse constant (raises Unsupported for bad metadata)."""
    if is_sparse_const(v):
        assert v.producer is not None
        densify_op(v.producer)
    return v


@legalize("tfl.densify", dtypes=("fp32", "i8", "i16"), arity=1)
def densify_rule(b: Builder, op: Operation) -> list[Value]:
    """DENSIFY of a sparse constant: the dense tensor becomes a CONST at conversion time (TOSA has no sparse
    tensors).  The input must be a constant (TFLite's kernel requires it too)."""
    x = op.operands[0]
    if x.producer is None or x.producer.name not in ("tfl.const", "tosa.CONST"):
        raise Unsupported("densify of a non-constant tensor")
    dense_operand(x)
    arr = x.const()
    assert arr is not None
    out = op.results[0]
    if not out.type.is_static or list(arr.shape) != list(out.type.static_shape):
        raise Unsupported(f"densify: dense shape {list(arr.shape)} differs from the result's {out.shape}")
    return [x]
