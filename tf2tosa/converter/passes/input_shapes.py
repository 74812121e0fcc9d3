"""Static input shapes (specialisation).

before: a frontend graph whose inputs may have unknown dimensions, each named by a symbol (the ``.tflite`` and
TensorFlow loaders name them ``batch`` at dim 0 and ``d<k>`` at dim k); after: every input has a static shape.

Each unknown dimension is fixed, in this order, from ``input_shapes`` (``--input-shape NAME=DIMS``), from ``dims``
(``--dim SYMBOL=VALUE``, every dimension named by that symbol), or from a stated default: the size stored in the
``.tflite`` for that tensor when it has one, else 1; a default is always reported as a warning.  What was fixed and
from where is kept in ``graph.record.fixed_dims`` (see :func:`fixed_dims_lines`).  Shape subgraphs then fold like
any other constant computation (the builder folds each op whose operands are constant, and
:func:`.fold.fold_constants` after legalization).

Records (:mod:`tf2tosa.ir.records`): reads ``graph.source.stored_shapes``; writes ``graph.record.fixed_dims``,
which :func:`explain_default_failure` reads.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ConversionError, InputError
from ...ir import Graph, Value
from ...ir.symdim import size as dim_size

log = logging.getLogger("tf2tosa")


#: the largest dimension a TOSA flatbuffer shape holds (``shape: [int32]``)
_INT32_MAX = (1 << 31) - 1


def _symbol(d: Any, k: int) -> str | None:
    """The symbol naming an unknown dimension (``None`` for a known one)."""
    if isinstance(d, str):
        return d
    if isinstance(d, int) and d >= 0:
        return None
    return "batch" if k == 0 else f"d{k}"


def dimension_symbols(graph: Graph) -> dict[str, list[str]]:
    """Per input with unknown dimensions: the symbol of each dimension, ``""`` for a known one."""
    out: dict[str, list[str]] = {}
    for v in graph.inputs:
        syms = [_symbol(d, k) or "" for k, d in enumerate(v.shape)]
        if any(syms):
            out[v.name] = syms
    return out


def _check_dims(graph: Graph, dims: Mapping[str, int], file: str | None) -> None:
    """One :class:`InputError` for a ``--dim`` symbol the graph's inputs do not name, or a size outside 1…int32."""
    symbols = dimension_symbols(graph)
    known = sorted({s for syms in symbols.values() for s in syms if s})
    for given, size in dims.items():
        if given not in known:
            raise InputError(f"--dim {given}={size}: the model has no unknown dimension named {given!r} "
                             f"(symbols: {', '.join(known) or 'none'})", file=file, tensor=given)
        if int(size) < 1:
            raise InputError(f"--dim {given}={size}: a dimension size must be at least 1", file=file, tensor=given)
        if int(size) > _INT32_MAX:
            raise InputError(f"--dim {given}={size}: more than {_INT32_MAX}, the largest dimension a TOSA shape "
                             f"holds (int32); give a smaller --dim {given}", file=file, tensor=given)


def _check_input_shape(v: Value, want: tuple[int, ...], syms: Sequence[str | None], dims: Mapping[str, int],
                       file: str | None) -> list[dict[str, Any]]:
    """Check the ``--input-shape`` ``want`` for input ``v`` (rank, sizes, known dimensions, agreement with
    ``dims``); returns the fixed-dims record of each of its symbolic dimensions."""
    fixed: list[dict[str, Any]] = []
    if len(want) != v.type.rank:
        raise InputError(f"input {v.name!r} has rank {v.type.rank} (shape {list(v.shape)}), "
                         f"--input-shape gives rank {len(want)} {list(want)}", file=file, tensor=v.name)
    for k, (have, new) in enumerate(zip(v.shape, want)):
        if new < 1:
            raise InputError(f"input {v.name!r}: --input-shape {list(want)} has size {new} at dimension "
                             f"{k}; every size must be at least 1", file=file, tensor=v.name)
        if new > _INT32_MAX:
            raise InputError(f"input {v.name!r}: --input-shape {list(want)} has size {new} at dimension "
                             f"{k}, more than {_INT32_MAX}, the largest a TOSA shape holds (int32); give a "
                             "smaller --input-shape", file=file, tensor=v.name)
        if syms[k] is None and have != new:
            raise InputError(f"input {v.name!r} has shape {list(v.shape)}, got {list(want)} "
                             f"(dimension {k} is fixed at {have})", file=file, tensor=v.name)
        sym = syms[k]
        if sym is not None and sym in dims and int(dims[sym]) != new:
            raise InputError(f"symbol {sym!r} bound to two values: --dim {sym}={dims[sym]} and "
                             f"--input-shape {v.name}={','.join(map(str, want))} (dimension {k} is {new})",
                             file=file, tensor=v.name)
        if sym is not None:
            fixed.append({"dim": k, "symbol": sym, "value": new, "from": "input-shape"})
    return fixed


def resolve_input_shapes(graph: Graph, input_shapes: Mapping[str, Sequence[int]] | None = None,
                         file: str | None = None, dims: Mapping[str, int] | None = None) -> list[str]:
    """Give every graph input a static shape; returns the warnings issued (one per defaulted dimension).

    ``input_shapes`` maps an input name (the IR name or the source tensor name) to a whole shape; ``dims`` maps a
    dimension symbol to a size.  One :class:`InputError` for: an unknown input or symbol, a shape of the wrong
    rank, a size below 1, a shape that contradicts a known dimension, and a symbol bound to two different sizes
    (by ``dims`` and by an ``input_shapes`` entry)."""
    shapes = dict(input_shapes or {})
    dims = dict(dims or {})
    by_name = {v.name: v for v in graph.inputs}
    by_name.update({v.source: v for v in graph.inputs if v.source})
    for name in shapes:
        if name not in by_name:
            valid = ", ".join(v.name for v in graph.inputs)
            raise InputError(f"no model input named {name!r} (inputs: {valid})", file=file, tensor=name)
    _check_dims(graph, dims, file)
    warnings: list[str] = []
    fixed: list[dict[str, Any]] = []
    stored = graph.source.stored_shapes
    for v in graph.inputs:
        want = shapes.get(v.name, shapes.get(v.source or "", None))
        syms = [_symbol(d, k) for k, d in enumerate(v.shape)]
        entry: dict[str, Any] = {"input": v.name, "shape": [], "dims": []}
        if want is not None:
            want = tuple(int(d) for d in want)
            entry["dims"].extend(_check_input_shape(v, want, syms, dims, file))
            v.type = v.type.with_shape(want)
        elif not v.type.is_static:
            out = []
            for k, d in enumerate(v.shape):
                sym = syms[k]
                if sym is None:
                    out.append(int(d))
                    continue
                if sym in dims:
                    size, how = dim_size(dims[sym]), "dim"
                else:
                    hint = stored.get(v.name)
                    size = hint[k] if hint and isinstance(hint[k], int) and hint[k] > 0 else 1
                    how = "default"
                    if k == 0 and sym == "batch":
                        msg = f"input {v.name!r}: batch dimension unset, using {size} (set it with --input-shape)"
                    else:
                        msg = (f"input {v.name!r}: dimension {k} ({sym}) unset, using {size} (set it with "
                               f"--input-shape {v.name}=… or --dim {sym}=…)")
                    warnings.append(msg)
                    log.warning(msg)
                out.append(size)
                entry["dims"].append({"dim": k, "symbol": sym, "value": size, "from": how})
            v.type = v.type.with_shape(tuple(out))
        if entry["dims"]:
            entry["shape"] = list(v.type.static_shape)
            fixed.append(entry)
    graph.record.fixed_dims = fixed
    return warnings


def fixed_dims_lines(fixed: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per input whose unknown dimensions were fixed: ``input 'x': [4, 16, 16, 3] (batch=4 from --dim)``."""
    how = {"input-shape": "from --input-shape", "dim": "from --dim", "default": "default"}
    lines = []
    for e in fixed:
        parts = ", ".join(f"{d['symbol']}={d['value']} {how[d['from']]}" for d in e["dims"])
        lines.append(f"input {e['input']!r}: shape {list(e['shape'])} ({parts})")
    return lines


def explain_default_failure(graph: Graph, err: ConversionError, file: str | None = None) -> ConversionError:
    """The error to raise when conversion failed with ``err`` after some non-batch dimension was defaulted: one
    :class:`InputError` line naming each defaulted input and dimension and the flag to pass; ``err`` itself when
    nothing but a batch dimension was defaulted (a batch of 1 is always a valid size)."""
    defaulted = [(e, d) for e in graph.record.fixed_dims for d in e["dims"]
                 if d["from"] == "default" and d["symbol"] != "batch"]
    if not defaulted:
        return err
    names = "; ".join(f"input {e['input']!r} dimension {d['dim']} ({d['symbol']}) was not given and defaulted to "
                      f"{d['value']}" for e, d in defaulted)
    e0 = defaulted[0][0]
    shape = ",".join("N" if any(d is dd for _, dd in defaulted) else str(s)
                     for s, d in zip(e0["shape"], _dims_by_index(e0)))
    syms = sorted({d["symbol"] for _, d in defaulted})
    hint = f"pass the real size with --input-shape {e0['input']}={shape} or --dim " + " --dim ".join(
        f"{s}=N" for s in syms)
    return InputError(f"{names}, and the model is invalid at that size ({err.message}); {hint}",
                      file=file or err.file, op=err.op, tensor=e0["input"])


def _dims_by_index(entry: Mapping[str, Any]) -> list[Any]:
    by_k = {d["dim"]: d for d in entry["dims"]}
    return [by_k.get(k) for k in range(len(entry["shape"]))]
