"""Constants deduplicated and shared.

before: a TOSA graph in which several CONST / CONST_SHAPE ops hold the same data (the zero points, shifts and
multipliers of every RESCALE, the shapes of every RESHAPE …, one op per use as the rules emit them); after: one op
per distinct constant, read by all its former users.  Then the ``CAST`` ops of one constant to one type (float16
weights kept as float16, see :mod:`.fp16_weights`: an unrolled recurrent layer reads its weights once per time
step, each read narrowed to its own fp16 ``CONST`` + ``CAST``) become one ``CAST`` read by all of them: the value is
the same, computed once per run instead of once per reader.

Two constants are merged when their op, element type, shape, quantization and data are equal (compared by bytes,
so -0.0 and 0.0, or two NaN payloads, stay apart).  The first in the graph's deterministic topological order is
kept, so the output is the same for the same input.  A constant that is a graph output keeps its own op.  Fewer
tensors mean a smaller file and fewer constant tensors for a compiler such as Vela to place.

Records (:mod:`tf2tosa.ir.records`): reads and writes none; only the graph's ops.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import numpy as np

from ...ir import Graph, Operation, QuantParams, Value
from ...ir.symdim import SYM_AFFINE, SYM_VALUES

_CONSTS = ("tosa.CONST", "tosa.CONST_SHAPE")
_ID = attrgetter("id")
_OPERANDS = attrgetter("operands")


#: constants up to this many bytes are keyed by their whole data; larger ones by their first and last bytes, and
#: compared in full only with the earlier constants that share that key (no copy of every weight tensor).  Either
#: way each constant is merged into the first earlier one of equal key fields and data, so the bound only weighs a
#: copy and a hash of the data against a bucket's comparisons: the per-channel scales, shifts and biases of a
#: convolution (a few hundred int32) are keyed whole
_WHOLE_KEY_BYTES = 1024


def dedup_constants(graph: Graph) -> int:
    """Merge equal constants (see the module docstring); returns how many ops were merged away."""
    kept: dict[Any, Any] = {}  # key -> the first value (a whole-data key) or [(data, value)] (a partial one)
    pairs: list[tuple[Value, Value]] = []
    outputs = {id(o) for o in graph.outputs}
    dtype_str: dict[int, str] = {}  # numpy dtype (by id: each is held by its array) -> its .str, made once
    for op in _constants(graph):
        results = op.results
        if len(results) != 1:
            continue
        v = results[0]
        if id(v) in outputs:
            continue
        attrs = op.attrs
        vals = attrs.get("values")
        # --dynamic: constants holding size expressions are equal only when the expressions are
        sym = tuple(repr(attrs[k]) for k in (SYM_VALUES, SYM_AFFINE) if k in attrs) \
            if SYM_VALUES in attrs or SYM_AFFINE in attrs else ()
        # the type as its fields (equal exactly when the types are): a TensorType's hash is a Python function, and
        # so is a QuantParams' (its fields instead, with its class: what its __eq__ compares)
        t = v.type
        q = t.quant
        quant = (q.__class__, q.scale, q.zero_point, q.axis) if q.__class__ is QuantParams else q
        key: tuple[Any, ...]
        if vals.__class__ is np.ndarray and vals.nbytes <= _WHOLE_KEY_BYTES and not vals.dtype.hasobject:
            # keyed by its whole bytes, as its contiguous copy's (a 0-d array's shape as the 1-d copy's)
            dt = vals.dtype
            ds = dtype_str.get(id(dt))
            if ds is None:
                ds = dtype_str[id(dt)] = dt.str
            key = (op.name, t.shape, t.dtype, quant, ds, vals.shape or (1,), vals.tobytes(), sym)
            w = kept.setdefault(key, v)
            if w is v:  # the first of its key: the one merged into
                continue
        else:
            arr = np.ascontiguousarray(vals)
            raw = arr.reshape(-1).view(np.uint8)
            if raw.size <= _WHOLE_KEY_BYTES:
                key = (op.name, t.shape, t.dtype, quant, arr.dtype.str, arr.shape, raw.tobytes(), sym)
                w = kept.setdefault(key, v)
                if w is v:
                    continue
            else:
                key = (op.name, t.shape, t.dtype, quant, arr.dtype.str, arr.shape, raw[:64].tobytes(),
                       raw[-64:].tobytes(), sym)
                bucket = kept.get(key)
                if bucket is None:
                    kept[key] = [(raw, v)]
                    continue
                found = next((w for data, w in bucket if np.array_equal(data, raw)), None)
                if found is None:
                    bucket.append((raw, v))
                    continue
                w = found
        pairs.append((v, w))
    # (the keys read no edges, so the merges can wait: each is the replace_all_uses + remove_op it was, in one step)
    graph.merge_constants(pairs)
    return len(pairs) + _share_casts(graph)


def _constants(graph: Graph) -> list[Operation]:
    """The CONST and CONST_SHAPE ops in the graph's topological order: in the order of their ids when none has an
    operand (each is then ready from the start of the smallest-id-first sort, so it comes before every constant of
    a larger id), without sorting the graph."""
    consts = [op for op in graph.ops.values() if op.name in _CONSTS]
    if any(map(_OPERANDS, consts)):
        return [op for op in graph.topological_order() if op.name in _CONSTS]
    consts.sort(key=_ID)
    return consts


def _share_casts(graph: Graph) -> int:
    """One ``CAST`` per (constant, result type): later casts of the same constant to the same type are replaced by
    the first (in the deterministic topological order); returns how many were merged away."""
    if not any(op.name == "tosa.CAST" for op in graph.ops.values()):
        return 0  # (no CAST at all, as in most integer graphs: no sort of the graph for them)
    first: dict[tuple[int, Any], Any] = {}
    merged = 0
    for op in graph.topological_order():
        if op.name != "tosa.CAST" or len(op.operands) != 1 or not op.operands[0].is_const:
            continue
        r = op.results[0]
        if r in graph.outputs:
            continue
        key = (op.operands[0].id, r.type)
        kept = first.setdefault(key, r)
        if kept is r:
            continue
        graph.replace_all_uses(r, kept)
        graph.remove_op(op)
        merged += 1
    return merged
