"""Graph passes run around legalization: static shapes, constant folding, cleanup."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import InputError
from ..ir import DType, Graph, Operation, TensorType

log = logging.getLogger("tf2tosa")


def resolve_input_shapes(graph: Graph, input_shapes: Mapping[str, Sequence[int]] | None = None,
                         file: str | None = None) -> list[str]:
    """Give every graph input a static shape.

    ``input_shapes`` maps an input name (the IR name or the source tensor name) to a shape.  Unknown
    dims left unset: dim 0 (batch) defaults to 1 with a warning; any other unknown dim is an error.
    Returns the warnings issued.
    """
    shapes = dict(input_shapes or {})
    by_name = {v.name: v for v in graph.inputs}
    by_name.update({v.source: v for v in graph.inputs if v.source})
    for name in shapes:
        if name not in by_name:
            valid = ", ".join(v.name for v in graph.inputs)
            raise InputError(f"no model input named {name!r} (inputs: {valid})", file=file, tensor=name)
    warnings: list[str] = []
    stored = graph.meta.get("stored_shapes", {})
    for v in graph.inputs:
        want = shapes.get(v.name, shapes.get(v.source or "", None))
        if want is not None:
            want = tuple(int(d) for d in want)
            if len(want) != v.type.rank:
                raise InputError(f"input {v.name!r} has rank {v.type.rank} (shape {list(v.shape)}), "
                                 f"got shape {list(want)}", file=file, tensor=v.name)
            for have, new in zip(v.shape, want):
                if new < 1 or (isinstance(have, int) and have >= 0 and have != new):
                    raise InputError(f"input {v.name!r} has shape {list(v.shape)}, got {list(want)}",
                                     file=file, tensor=v.name)
            v.type = v.type.with_shape(want)
            continue
        if v.type.is_static:
            continue
        dims = []
        for i, d in enumerate(v.shape):
            if isinstance(d, int) and d >= 0:
                dims.append(d)
            elif i == 0:
                dims.append(1)
                msg = f"input {v.name!r}: batch dimension unset, using 1 (set it with --input-shape)"
                warnings.append(msg)
                log.warning(msg)
            else:
                hint = stored.get(v.name)
                if hint and isinstance(hint[i], int) and hint[i] > 0:
                    dims.append(hint[i])
                else:
                    raise InputError(f"input {v.name!r} has unknown dimension {i} (shape {list(v.shape)}); "
                                     f"set it with --input-shape {v.name}=…", file=file, tensor=v.name)
        v.type = v.type.with_shape(tuple(dims))
    return warnings


def fold_constants(graph: Graph) -> int:
    """Evaluate TOSA ops whose operands are all constant; returns the number folded."""
    from ..tosa.builder import fold_op

    return sum(1 for op in graph.topological_order() if op.name.startswith("tosa.") and fold_op(graph, op))


def _forward(graph: Graph, op: Operation, new: object) -> None:
    from ..ir import Value

    assert isinstance(new, Value)
    old = op.result
    if old in graph.outputs and (new in graph.inputs or new in graph.outputs or new.is_const):
        return  # keep an op between an input/constant and an output
    if new.source is None:
        new.source = old.source
    graph.replace_all_uses(old, new)


def remove_identities(graph: Graph) -> int:
    """Remove no-op RESHAPE/TRANSPOSE/IDENTITY ops and merge RESHAPE chains and TRANSPOSE pairs."""
    n = 0
    for op in graph.topological_order():
        if op.id not in graph.ops:
            continue
        x = op.operands[0] if op.operands else None
        if op.name == "tosa.RESHAPE" and x is not None:
            src = x.producer
            if tuple(x.shape) == tuple(op.result.shape):
                _forward(graph, op, x)
            elif src is not None and src.name == "tosa.RESHAPE" and len(graph.uses(x)) == 1 and x not in graph.outputs:
                graph.set_operand(op, 0, src.operands[0])
                n += 1
                continue
        elif op.name == "tosa.TRANSPOSE" and x is not None:
            perms = list(op.attrs["perms"])
            src = x.producer
            if perms == list(range(len(perms))):
                _forward(graph, op, x)
            elif src is not None and src.name == "tosa.TRANSPOSE" and x not in graph.outputs:
                inner = list(src.attrs["perms"])
                composed = [inner[p] for p in perms]
                if composed == list(range(len(composed))):
                    _forward(graph, op, src.operands[0])
                else:
                    graph.set_operand(op, 0, src.operands[0])
                    op.attrs["perms"] = composed
                    n += 1
                    continue
        elif op.name == "tosa.IDENTITY" and x is not None:
            _forward(graph, op, x)
        else:
            continue
        if not graph.uses(op.result) and op.result not in graph.outputs:
            graph.remove_op(op)
            n += 1
    graph.remove_dead_ops()
    return n


def refresh_shapes(graph: Graph) -> int:
    """Re-infer the shapes of TOSA ops created before their operands became static (e.g. the uint8 output
    RESCALE inserted ahead of legalization).  Element type and quantization are kept."""
    from ..tosa import catalogue

    n = 0
    for op in graph.topological_order():
        if not op.name.startswith("tosa.") or all(r.type.is_static for r in op.results):
            continue
        if not all(v.type.is_static for v in op.operands):
            continue
        types = catalogue.infer_result_types(op.opcode, [v.type for v in op.operands], op.attrs,
                                             out_dtype=op.results[0].dtype,
                                             operand_consts=[v.const() for v in op.operands])
        for r, t in zip(op.results, types):
            r.type = TensorType(t.shape, r.dtype, r.type.quant)
        n += 1
    return n


def narrow_constant(arr: np.ndarray, dtype: DType) -> tuple[np.ndarray, DType]:
    """Narrow a 64-bit integer constant to i32 when its values fit (TOSA has no i64 tensors)."""
    if dtype in (DType.INT64, DType.UINT32, DType.UINT64):
        info = np.iinfo(np.int32)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            raise ValueError("constant does not fit in int32")
        return arr.astype(np.int32), DType.INT32
    return arr, dtype


def retype(t: TensorType, dtype: DType) -> TensorType:
    return TensorType(t.shape, dtype, t.quant)
