"""``tf2tosa specialize``: a symbolic TOSA 1.1-draft program folded into a static TOSA 1.0 program at given sizes.

before: a program with unknown dimensions (``convert --dynamic``, or any 1.1-draft ``.tosa`` / ``.mlir`` read
back: :mod:`tf2tosa.tosa.symbolic` names them ``batch``, ``d1`` …) whose shape operands are computed at run time by
the EXT-SHAPE operators; after: the same program with every input shape bound, every shape value a CONST_SHAPE,
every ASSERT_EQUAL_SHAPE checked and dropped, every value's shape static (the TOSA 1.0 shape rules of
:mod:`tf2tosa.tosa.shapes`), what became dead removed, and ``graph.record`` declaring a TOSA 1.0 program with the
profiles and extensions it needs (:func:`tf2tosa.tosa.profiles.requirements`, as the static conversion declares them).

Sizes come from ``input_shapes`` (a whole shape per input name) and ``dims`` (a size per symbol, for every input
dimension named by it).  Bad sizes are one :class:`~tf2tosa.errors.InputError`: an unknown input or symbol, a shape
of the wrong rank, a size below 1, a shape that contradicts a known dimension, a symbol bound to two values, an
unknown dimension left unbound; so is a program that the sizes make invalid (a violated ASSERT_EQUAL_SHAPE naming
the op and both values, a shape operator's ERROR_IF or REQUIRE, a shape rule's ERROR_IF such as a RESHAPE whose
element counts differ), naming the op.  A size guard of the conversion (``graph.dims.guards``, carried by the
``.mlir`` file, not by a ``.tosa``) that does not hold at these sizes is a warning in ``graph.record.warnings``, one per
guard (:func:`tf2tosa.converter.dynamic.guard_warning_lines`), not an error.  A program with nothing symbolic is
refused (:func:`specialize` says so): it is already static, and its sizes cannot change.

Records (:mod:`tf2tosa.ir.records`): reads ``graph.record.specification_version`` and ``graph.dims``; writes
``graph.record`` (``fixed_dims``, ``profiles``, ``extensions``, ``warnings``, ``specialized``; the declared version
and target cleared) and empties ``graph.dims`` but for its ``shape_values``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ConversionError, InputError, InvalidGraphError
from ..executor import evaluate_op
from ..executor.registry import ExecutionError
from ..ir import Graph
from ..ir.graph import Operation, Value
from ..ir.records import SymbolicDims
from ..ir.types import DType
from ..tosa import profiles, shapes, validation
from ..tosa.optable import DRAFT_VERSION, is_draft
from ..tosa.symbolic import input_symbol
from .dynamic import guard_warning_lines
from .pipeline import check_sizes

__all__ = ["specialize_graph", "bind_input_shapes"]


def _where(op: Operation) -> str:
    return op.location or f"{op.opcode}#{op.id}"


def bind_input_shapes(graph: Graph, input_shapes: Mapping[str, Sequence[int]] | None = None,
                      dims: Mapping[str, int] | None = None, file: str | None = None
                      ) -> tuple[dict[str, tuple[int, ...]], list[dict[str, Any]]]:
    """The static shape of every input of ``graph`` from ``input_shapes`` and ``dims`` (see the module docstring),
    and the ``fixed_dims`` entries saying which symbol got which size from where; raises one InputError."""
    shapes_in = {k: tuple(int(d) for d in v) for k, v in (input_shapes or {}).items()}
    dims = {k: int(v) for k, v in (dims or {}).items()}
    by_name = {v.name: v for v in graph.inputs}
    for name in shapes_in:
        if name not in by_name:
            raise InputError(f"no model input named {name!r} (inputs: {', '.join(by_name)})", file=file,
                             tensor=name)

    def symbol(d: Any, k: int) -> str | None:
        return None if isinstance(d, int) else (d if d != "?" else input_symbol(k))

    known = sorted({s for v in graph.inputs for k, d in enumerate(v.shape) if (s := symbol(d, k)) is not None})
    for name, size in dims.items():
        if name not in known:
            raise InputError(f"--dim {name}={size}: the program has no unknown dimension named {name!r} (symbols: "
                             f"{', '.join(known) or 'none'})", file=file, tensor=name)
        if size < 1:
            raise InputError(f"--dim {name}={size}: a dimension size must be at least 1", file=file, tensor=name)
        if size > profiles.INT32_MAX:
            raise InputError(f"--dim {name}={size}: more than {profiles.INT32_MAX}, the largest dimension a TOSA "
                             f"shape holds (int32); give a smaller --dim {name}", file=file, tensor=name)
    bound: dict[str, tuple[int, str]] = {s: (n, f"--dim {s}={n}") for s, n in dims.items()}
    result: dict[str, tuple[int, ...]] = {}
    fixed: list[dict[str, Any]] = []
    for v in graph.inputs:
        want = shapes_in.get(v.name)
        entry: dict[str, Any] = {"input": v.name, "shape": [], "dims": []}
        if want is not None and len(want) != v.type.rank:
            raise InputError(f"input {v.name!r} has rank {v.type.rank} (shape {_text(v.shape)}), --input-shape gives "
                             f"rank {len(want)} {list(want)}", file=file, tensor=v.name)
        out: list[int] = []
        for k, d in enumerate(v.shape):
            sym = symbol(d, k)
            given: str
            if want is not None:
                size = want[k]
                if size < 1:
                    raise InputError(f"input {v.name!r}: --input-shape {list(want)} has size {size} at dimension {k}; "
                                     "every size must be at least 1", file=file, tensor=v.name)
                if size > profiles.INT32_MAX:
                    raise InputError(f"input {v.name!r}: --input-shape {list(want)} has size {size} at dimension {k}, "
                                     f"more than {profiles.INT32_MAX}, the largest a TOSA shape holds (int32); give a "
                                     "smaller --input-shape", file=file, tensor=v.name)
                if sym is None and size != d:
                    raise InputError(f"input {v.name!r} has shape {_text(v.shape)}, got {list(want)} (dimension {k} "
                                     f"is fixed at {d})", file=file, tensor=v.name)
                how = "input-shape"
                given = f"--input-shape {v.name}={','.join(map(str, want))} (dimension {k} is {size})"
            elif sym is None:
                out.append(int(d))
                continue
            elif sym in dims:
                size, how, given = dims[sym], "dim", f"--dim {sym}={dims[sym]}"
            else:
                hint = ",".join("N" if j == k else (str(x) if isinstance(x, int) else "?")
                                for j, x in enumerate(v.shape))
                raise InputError(f"input {v.name!r} dimension {k} ({sym}) has no size: pass --input-shape "
                                 f"{v.name}={hint} or --dim {sym}=N", file=file, tensor=v.name)
            if sym is not None:
                if sym in bound and bound[sym][0] != size:
                    raise InputError(f"symbol {sym!r} bound to two values: {bound[sym][1]} and {given}", file=file,
                                     tensor=v.name)
                bound.setdefault(sym, (size, given))
                entry["dims"].append({"dim": k, "symbol": sym, "value": size, "from": how})
            out.append(size)
        result[v.name] = tuple(out)
        if entry["dims"]:
            entry["shape"] = list(out)
            fixed.append(entry)
    return result, fixed


def _text(shape: Sequence[Any]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _bindings(fixed: Sequence[Mapping[str, Any]]) -> str:
    pairs = {d["symbol"]: d["value"] for e in fixed for d in e["dims"]}
    return ", ".join(f"{s}={n}" for s, n in pairs.items()) or "these sizes"


def is_symbolic(graph: Graph) -> bool:
    """Whether ``graph`` is a symbolic program: declared 1.1.draft, or with an unknown dimension or a draft op."""
    if graph.record.specification_version == DRAFT_VERSION:
        return True
    return any(not v.type.is_static for v in graph.inputs) or any(
        is_draft(op.opcode) or any(not r.type.is_static for r in op.results) for op in graph.ops.values())


def specialize_graph(graph: Graph, input_shapes: Mapping[str, Sequence[int]] | None = None,
                     dims: Mapping[str, int] | None = None, file: str | None = None) -> Graph:
    """Specialize ``graph`` in place (see the module docstring) and return it."""
    if not is_symbolic(graph):
        raise InputError("not a symbolic program: it has no unknown dimension and no EXT-SHAPE operator (a static "
                         "TOSA 1.0 program already; its sizes are fixed)", file=file)
    static, fixed = bind_input_shapes(graph, input_shapes, dims, file)
    at = _bindings(fixed)
    violated = guard_warning_lines(graph.dims, static)
    for v in graph.inputs:
        v.type = v.type.with_shape(static[v.name])
    values: dict[int, np.ndarray] = {}  # shape values (computed at these sizes) by value id
    counts = {"shape_ops": 0, "assertions": 0}

    def operand_value(v: Value) -> np.ndarray | None:
        if v.id in values:
            return values[v.id]
        return v.const()

    for op in graph.topological_order():
        if op.dialect != "tosa":
            raise InvalidGraphError(f"{op.name} is not a TOSA operator", file=file, op=_where(op))
        if op.regions and any(not r.type.is_static for sub in op.regions for o in sub.ops.values()
                              for r in o.results):
            raise ConversionError("specialize: not yet: control flow (COND_IF / WHILE_LOOP) with symbolic shapes "
                                  "inside its regions", file=file, op=_where(op))
        if op.opcode == "CONST_SHAPE":
            values[op.result.id] = np.asarray(op.attrs["values"], np.int64).reshape(-1)
            continue
        if op.opcode == "CONST":
            continue
        if is_draft(op.opcode):
            counts["assertions" if op.opcode == "ASSERT_EQUAL_SHAPE" else "shape_ops"] += 1
            _shape_op(graph, op, values, at, file)
            continue
        _static_result(op, operand_value, at, file)
    graph.remove_dead_ops()
    graph.record.specification_version = graph.record.tosa_version = graph.record.declared_target = None
    graph.dims = SymbolicDims(shape_values=graph.dims.shape_values)
    for op in graph.topological_order():  # a TOSA 1.0 program now: every op as the builder would check it
        try:
            validation.validate_op(op)
        except InvalidGraphError as e:
            raise InvalidGraphError(f"specialize at {at}: {e.message}", file=file, op=_where(op),
                                    tensor=e.tensor) from None
    graph.record.fixed_dims = fixed
    check_sizes(graph, file)  # the static program at level 8K, as convert checks it
    profs, exts = profiles.requirements(graph)
    graph.record.profiles, graph.record.extensions, graph.record.fixed_dims = profs, exts, fixed
    if violated:  # recorded as a conversion's warnings are (convert/verify print them; inspect of the result)
        graph.record.warnings = [*graph.record.warnings, *violated]
    graph.record.specialized = {"shape_ops_folded": counts["shape_ops"],
                                 "assertions_checked": counts["assertions"]}
    return graph


def _shape_op(graph: Graph, op: Operation, values: dict[int, np.ndarray], at: str, file: str | None) -> None:
    """Evaluate an EXT-SHAPE operator at these sizes: DIM reads the (now static) operand shape; the others run the
    executor's kernels (the draft's pseudo-code, ERROR_IF/REQUIRE included).  Its result becomes a CONST_SHAPE;
    an ASSERT_EQUAL_SHAPE is checked and dropped."""
    if op.opcode == "DIM":
        x = op.operands[0]
        axis = int(op.attrs.get("axis", -1))
        if not 0 <= axis < x.type.rank:
            raise InvalidGraphError(f"DIM: axis {axis} outside 0..{x.type.rank - 1}", file=file, op=_where(op))
        out = [np.asarray([x.type.static_shape[axis]], np.int64)]
    else:
        args = []
        for v in op.operands:
            a = values.get(v.id) if v.dtype is DType.SHAPE else v.const()
            if a is None:
                raise InvalidGraphError(f"{op.opcode}: operand {v.name!r} is not known before run time", file=file,
                                        op=_where(op), tensor=v.name)
            args.append(a)
        try:
            out = evaluate_op(op, args)
        except ExecutionError as e:  # the draft's ERROR_IF (ASSERT_EQUAL_SHAPE: the two values) or REQUIRE
            names = " and ".join(repr(v.name) for v in op.operands if v.dtype is DType.SHAPE)
            raise InputError(f"at {at}, {e.message} (operands {names})", file=file, op=_where(op)) from None
        if op.opcode == "ASSERT_EQUAL_SHAPE":  # holds at these sizes: nothing left to check at run time
            graph.remove_op(op)
            return
    old = op.result
    name = old.name
    new = graph.add_const(out[0], DType.SHAPE, name=f"{name}_static", op_name="tosa.CONST_SHAPE")
    graph.replace_all_uses(old, new)
    graph.remove_op(op)  # (frees its result's name for the constant that stands for it)
    new.name = graph.unique_name(name)
    values[new.id] = np.asarray(out[0], np.int64).reshape(-1)


def _static_result(op: Operation, operand_value: Any, at: str, file: str | None) -> None:
    """Give ``op``'s results their static shapes by the TOSA 1.0 shape rules, with the shape values computed at
    these sizes; a result the rule cannot infer keeps its declared shape, which must then be static."""
    types = [v.type for v in op.operands]
    consts = [operand_value(v) for v in op.operands]
    try:
        got: list[Any] = shapes.result_shapes(op.opcode, types, dict(op.attrs), consts)
    except InvalidGraphError as e:
        if "cannot be inferred" not in e.message:
            raise InputError(f"at {at}, the program is invalid: {e.message}", file=file, op=_where(op)) from None
        got = [r.type.shape for r in op.results]
    for r, shape in zip(op.results, got):
        if any(not isinstance(d, int) for d in shape):
            raise InputError(f"at {at}, the shape of {r.name!r} ({_text(shape)}) is not known", file=file,
                             op=_where(op), tensor=r.name)
        declared = r.type.shape
        if len(declared) != len(shape) or any(isinstance(d, int) and d != s for d, s in zip(declared, shape)):
            raise InputError(f"at {at}, {op.opcode} gives {r.name!r} the shape {_text(shape)}, the program declares "
                             f"{_text(declared)}", file=file, op=_where(op), tensor=r.name)
        r.type = r.type.with_shape(tuple(int(d) for d in shape))
