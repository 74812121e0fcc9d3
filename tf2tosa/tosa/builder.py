"""Builder: creates ``tosa.*`` operations in a Graph, checked against the catalogue.

Every TOSA op the converter emits goes through :meth:`Builder.emit`, which

* fills attribute defaults from the catalogue,
* infers result types (shape rule + type row) unless they are given,
* validates the op against the spec (type row, ranks, shape ERROR_IFs), and
* folds it to a constant when every operand is constant (``fold=True``),
  using the executor's kernel — this is how shape arithmetic and weight
  transforms disappear at conversion time.  The kernel is reached through
  :func:`set_evaluator` (the executor registers itself from the package root,
  ``tf2tosa/__init__.py``), so this layer does not import the executor.

Convenience methods (:meth:`reshape`, :meth:`transpose`, :meth:`slice`, …) create
the ``shape_t`` / zero-point operands the 1.0 operators need.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidGraphError
from ..ir import CONST_OPS, DType, Graph, Operation, QuantParams, TensorType, Value
from ..ir.pass_context import GraphPasses
from ..ir.symdim import (
    SYM_AFFINE,
    SYM_VALUES,
    Affine,
    affine_of_array,
    has_symbols,
    is_symbolic,
    no_guards,
    same_size,
    size,
    sym_max,
    sym_min,
    symbolic_array,
)
from ..ir.types import static_tensor_type
from ..ir.widened import Widened
from . import optable, validation
from .context import LegalizeContext

#: ops never folded (they have state, regions or are already constants)
_NO_FOLD = frozenset({"CONST", "CONST_SHAPE", "VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE", "COND_IF", "WHILE_LOOP",
                      "CUSTOM"})
#: folding skipped when the result would be larger than this many elements (keeps weights of
#: broadcast/tile ops from blowing up)
FOLD_LIMIT = 1 << 24

#: evaluates one op on constant operand arrays (``executor.evaluate_op``), set by :func:`set_evaluator`
Evaluator = Callable[[Operation, list[np.ndarray]], Sequence[Any]]
_evaluate: Evaluator | None = None


def set_evaluator(fn: Evaluator) -> None:
    """Register the function :func:`fold_op` evaluates ops with (the executor's ``evaluate_op``)."""
    global _evaluate
    _evaluate = fn


def fold_op(graph: Graph, op: Operation, passes: GraphPasses | None = None) -> Operation | None:
    """Evaluate ``op`` (a TOSA op whose operands are all constant) with the executor's kernel and replace it by a
    CONST / CONST_SHAPE op holding the value; returns the constant op, or None when ``op`` is not foldable.

    Reads ``passes`` (the conversion's state of ``graph``): ``keep_unfolded`` (ops left alone), ``fp16_keep``
    and ``fp16_sources``; a folded RESHAPE of an fp16 weight is added to ``fp16_sources`` and ``fp16_pending``."""
    passes = passes if passes is not None else GraphPasses()
    if op.opcode in _NO_FOLD or not op.operands or not all(v.is_const for v in op.operands):
        return None
    if op.id in passes.keep_unfolded:
        return None
    if len(op.results) != 1 or not op.result.type.is_static or op.result.type.size > FOLD_LIMIT:
        return None
    if op.opcode == "TILE" and any(is_symbolic(d) for d in op.result.shape):
        return None  # --dynamic: a tensor whose shape is a run-time size (zeros_like, fill) stays a TILE
    r = op.result
    with no_guards():  # the kernel's own checks of the sample values are not decisions of the lowering
        arr: Any = _widened(passes, op)
        if arr is None:
            arr = _reshaped(op)
        if arr is None:
            arr = _sliced_or_joined(op)
        if arr is None:
            if _evaluate is None:
                raise RuntimeError("no evaluator for constant folding: import tf2tosa (it registers the executor's)")
            (arr,) = _evaluate(op, [np.asarray(v.const()) for v in op.operands])
    name = "tosa.CONST_SHAPE" if r.dtype is DType.SHAPE else "tosa.CONST"
    attrs: dict[str, Any] = {"values": arr if isinstance(arr, Widened) else np.asarray(arr)}
    if any(v.producer is not None and SYM_AFFINE in v.producer.attrs for v in op.operands):
        aff = fold_affine(op)
        if aff is not None:
            attrs[SYM_AFFINE] = aff
    if any(v.producer is not None and SYM_VALUES in v.producer.attrs for v in op.operands):
        sym = fold_symbolic(op, [v.sym_const() for v in op.operands], np.asarray(arr))
        if sym is not None:
            attrs[SYM_VALUES] = sym
    c = graph.add_op(name, [], [r.type], attrs, [r.name + "_c"], location=op.location)
    c.result.source = r.source
    sources = passes.fp16_sources
    if sources and op.opcode == "RESHAPE" and op.operands[0].id in sources:
        # a reshaped fp16 weight (a FULLY_CONNECTED's or depthwise's) keeps its fp16 source: narrowed early too
        half = sources[op.operands[0].id]
        if half.size == r.type.size:
            sources[c.result.id] = half.reshape(r.type.static_shape)
            passes.fp16_pending.append(c.result)
    graph.replace_all_uses(r, c.result)
    graph.remove_op(op)
    return c


#: element types whose constants are stored as exactly their numpy type (no storage conversion to fold through)
_PLAIN_STORAGE = frozenset({DType.FP32, DType.FP16, DType.INT8, DType.INT16, DType.INT32, DType.BOOL})


def _widened(passes: GraphPasses, op: Operation) -> Widened | None:
    """While fp16 weights are kept (``passes.fp16_keep``): a CAST fp16 -> fp32 of a constant, or a RESHAPE of such a
    CAST's folded value, folded as a :class:`Widened` of the float16 array (no float32 copy; the same values when
    read: every float16 is a float32, which is what the CAST kernel computes).  None otherwise."""
    if not passes.fp16_keep or op.result.dtype is not DType.FP32:
        return None
    src = op.operands[0].producer
    vals = src.attrs.get("values") if src is not None else None
    if op.opcode == "CAST" and op.operands[0].dtype is DType.FP16 and isinstance(vals, np.ndarray):
        return Widened(vals) if vals.dtype == np.float16 and vals.shape == op.result.type.static_shape else None
    if op.opcode == "RESHAPE" and isinstance(vals, Widened):
        shape = op.result.type.static_shape
        return vals.reshape(shape) if vals.size == int(np.prod(shape, dtype=np.int64)) else None
    return None


#: each operator's attribute defaults (the catalogue's), copied by :meth:`Builder.emit` for each op it emits
_DEFAULTS: dict[str, dict[str, Any]] = {}
#: the result shape of each RESHAPE of a plain constant :meth:`Builder.reshape` has seen folded by :func:`fold_op`:
#: (input shape, element type, new shape) -> result shape
_FOLDED_RESHAPES: dict[tuple[Any, ...], tuple[int, ...]] = {}
#: the result (shape, element type) pairs of each op signature :meth:`Builder.emit_vouched` has had :meth:`Builder.emit`
#: infer and check: (opcode, which operands are constants, the caller's key) -> pairs
_VOUCHED: dict[tuple[Any, ...], tuple[tuple[tuple[int, ...], DType], ...]] = {}


def _reshaped(op: Operation) -> np.ndarray | None:
    """A RESHAPE of a plain constant folded as a view of its values in the result's shape (what the executor's
    kernel computes, spec 2.10.3: same element order), so the many weight reshapes of a conversion load no
    executor; None for any other op, or when the executor should judge (storage types, a size mismatch)."""
    if op.opcode != "RESHAPE" or op.result.dtype not in _PLAIN_STORAGE:
        return None
    x = np.asarray(op.operands[0].const())
    shape = op.result.type.static_shape
    n = math.prod(shape) if all(d.__class__ is int for d in shape) else int(np.prod(shape, dtype=np.int64))
    if (x.dtype != op.result.dtype.np_dtype() or x.size != n
            or min(shape, default=1) < 1):
        return None
    return x.reshape(shape)


def _sliced_or_joined(op: Operation) -> np.ndarray | None:
    """A SLICE or CONCAT of plain constants folded in numpy, as the executor's kernels compute them (spec 2.10.5
    SLICE: the window; spec 2.10.1 CONCAT: ``np.concatenate`` along the axis), so a conversion whose only other
    folds are these (EfficientNet's computed RESHAPE shapes) loads no executor; None for any other op, and where
    the kernel should judge (storage types, bounds, ranks)."""
    if op.opcode not in ("SLICE", "CONCAT") or op.result.dtype not in _PLAIN_STORAGE:
        return None
    want = op.result.dtype.np_dtype()
    if op.opcode == "SLICE":
        x, start, sz = (np.asarray(v.const()) for v in op.operands[:3])
        first, count = _ints(start), _ints(sz)
        if (x.dtype != want or len(op.operands) != 3 or len(first) != x.ndim or len(count) != x.ndim
                or any(s < 0 or n <= 0 or s + n > d for s, n, d in zip(first, count, x.shape))):
            return None
        return x[tuple(slice(s, s + n) for s, n in zip(first, count))]
    parts = [np.asarray(v.const()) for v in op.operands]
    axis = op.attrs.get("axis")
    if not parts or not isinstance(axis, int) or any(a.dtype != want or a.ndim != parts[0].ndim for a in parts):
        return None
    rank = parts[0].ndim
    if not 0 <= axis < rank or any(a.shape[:axis] + a.shape[axis + 1:] != parts[0].shape[:axis]
                                   + parts[0].shape[axis + 1:] for a in parts):
        return None
    return np.concatenate(parts, axis=axis)


def _ints(a: Any) -> list[int]:
    return [int(x) for x in np.asarray(a).reshape(-1)]


def _affine(v: Value) -> Affine | None:
    assert v.producer is not None
    aff = v.producer.attrs.get(SYM_AFFINE)
    return aff if aff is not None else affine_of_array(v.const())


def fold_affine(op: Operation) -> Affine | None:
    """The affine form (``SYM_AFFINE``) of ``op``'s folded value when an operand has one whose shape is symbolic
    (``--dynamic``): ADD / SUB of affine operands (broadcast), MUL by a scalar, RESHAPE adding or dropping size-1
    axes, CAST / IDENTITY; None otherwise (the safety net then reports the size-dependent constant)."""
    code = op.opcode
    if code in ("CAST", "IDENTITY") and not op.result.dtype.is_float:
        return _affine(op.operands[0])
    if code == "RESHAPE":
        aff = _affine(op.operands[0])
        new = op.result.shape
        if aff is None:
            return None
        shape, off, coefs = aff
        kept = [(n, c) for n, c in zip(shape, coefs) if not same_size(n, 1)]
        wide = [n for n in new if not same_size(n, 1)]
        if len(wide) != len(kept) or not all(same_size(n, m) for n, (m, _) in zip(wide, kept)):
            return None
        it = iter(kept)
        return tuple(new), off, tuple(0 if same_size(n, 1) else next(it)[1] for n in new)
    if code in ("ADD", "SUB", "MUL"):
        a, b = _affine(op.operands[0]), _affine(op.operands[1])
        if a is None or b is None or len(a[0]) != len(b[0]):
            return None
        if code == "MUL":
            if len(op.operands) > 2 and _ints(op.operands[2].const()) != [0]:
                return None
            if all(same_size(n, 1) for n in b[0]) and not any(b[2]):
                k = b[1]
                return a[0], a[1] * k, tuple(c * k for c in a[2])
            return None
        sign = 1 if code == "ADD" else -1
        dims: list[int] = []
        cs: list[int] = []
        for na, ca, nb, cb in zip(a[0], a[2], b[0], b[2]):
            if same_size(na, 1):
                dims.append(nb)
            elif same_size(nb, 1) or same_size(na, nb):
                dims.append(na)
            else:
                return None
            cs.append((0 if same_size(na, 1) else ca) + sign * (0 if same_size(nb, 1) else cb))
        return tuple(dims), a[1] + sign * b[1], tuple(cs)
    return None


def fold_symbolic(op: Operation, args: list[Any], numeric: np.ndarray) -> np.ndarray | None:
    """The folded value of ``op`` on integer constants that carry dimension expressions (``--dynamic``), as an
    object array of ints and ``SymDim``; None for an op this does not follow (the expressions are then lost, which
    the ``--dynamic`` safety net reports).  Only the integer data movement and arithmetic that shape computations
    lower to: ADD, SUB, MUL (shift 0), INTDIV, MINIMUM, MAXIMUM, SELECT, RESHAPE, SLICE, CONCAT, TRANSPOSE, TILE,
    REVERSE, CAST / IDENTITY between integer types; GREATER / GREATER_EQUAL / EQUAL of sizes give plain booleans
    and record the comparison as a guard."""
    code = op.opcode
    if any(a is None for a in args) or op.result.dtype.is_float:
        return None
    xs = [np.asarray(a, dtype=object) for a in args]
    out: Any
    try:
        if code in ("ADD", "SUB", "MINIMUM", "MAXIMUM", "INTDIV"):
            a, b = xs[0], xs[1]
            if code == "ADD":
                out = a + b
            elif code == "SUB":
                out = a - b
            elif code == "INTDIV":  # truncation = floor division for non-negative operands (compared: guards)
                if not all(x >= 0 for x in a.reshape(-1)) or not all(y > 0 for y in b.reshape(-1)):
                    return None
                out = a // b
            else:
                fn = sym_min if code == "MINIMUM" else sym_max
                a, b = np.broadcast_arrays(a, b)
                out = np.asarray([fn(x, y) for x, y in zip(a.reshape(-1), b.reshape(-1))], dtype=object)
        elif code == "MUL":
            if len(xs) > 2 and any(_ints(xs[2])):
                return None
            out = xs[0] * xs[1]
        elif code in ("GREATER", "GREATER_EQUAL", "EQUAL"):
            # a branch on sizes: each comparison is a guard (recorded by SymDim); the result is plain booleans
            a, b = np.broadcast_arrays(xs[0], xs[1])
            rel = {"GREATER": lambda x, y: x > y, "GREATER_EQUAL": lambda x, y: x >= y,
                   "EQUAL": lambda x, y: x == y}[code]
            for x, y in zip(a.reshape(-1), b.reshape(-1)):
                rel(x, y)
            return None
        elif code == "SELECT":
            out = np.where(np.asarray(xs[0], dtype=bool), xs[1], xs[2])
        elif code in ("RESHAPE", "CAST", "IDENTITY"):
            out = xs[0]
        elif code == "SLICE":
            idx = tuple(slice(s, s + n) for s, n in zip(_ints(xs[1]), _ints(xs[2])))
            out = xs[0][idx]
        elif code == "CONCAT":
            out = np.concatenate(xs, axis=int(op.attrs["axis"]))
        elif code == "TRANSPOSE":
            out = np.transpose(xs[0], [int(p) for p in op.attrs["perms"]])
        elif code == "TILE":
            out = np.tile(xs[0], _ints(xs[1]))
        elif code == "REVERSE":
            out = np.flip(xs[0], int(op.attrs["axis"]))
        else:
            return None
        out = np.asarray(out, dtype=object).reshape(numeric.shape)
    except (TypeError, ValueError, IndexError):
        return None
    if [int(x) for x in out.reshape(-1)] != _ints(numeric) or not has_symbols(out):
        return None  # a wrap-around or a narrowing the expressions do not model
    return symbolic_array(out)


#: the [1] array of each integer zero point :meth:`Builder.zp` has made, by (value, type): ``const``'s array for it
_ZP_ARRAYS: dict[tuple[int, DType], np.ndarray] = {}


class Builder:
    """Emits TOSA ops into ``graph``; ``location`` tags every op for error messages and per-layer maps."""

    def __init__(self, graph: Graph, location: str | None = None, fold: bool = True, validate: bool = True,
                 context: LegalizeContext | None = None) -> None:
        self.graph = graph
        self.location = location
        self.fold = fold
        self.validate = validate
        self.name_hint: str | None = None
        #: the conversion's options as rules read them (defaults when the builder is not the driver's)
        self.context = context if context is not None else LegalizeContext()

    # ------------------------------------------------------------------ core
    def emit(self, opcode: str, operands: Sequence[Value], attrs: dict[str, Any] | None = None,
             result_types: Sequence[TensorType] | None = None, *, out_dtype: DType | None = None,
             quant: QuantParams | None = None, names: Sequence[str] | None = None,
             regions: list[Graph] | None = None) -> Operation:
        """Create ``tosa.<opcode>``; returns the Operation (use ``.result`` / ``.results``)."""
        defaults = _DEFAULTS.get(opcode)
        if defaults is None:
            spec = optable.get(opcode)
            defaults = _DEFAULTS[opcode] = {a.name: a.default for a in spec.attrs if a.default is not None}
        full = dict(defaults)
        if attrs:
            full.update(attrs)
        operands = list(operands)
        types: list[TensorType] = []
        consts: list[Any] = []
        all_const = bool(operands)  # (a constant operand is one whose consts entry is not None)
        for v in operands:
            t = v.type
            types.append(t)
            p = v.producer
            if t.dtype is DType.SHAPE:  # shape operands whose values carry dimension expressions (--dynamic) are
                c = v.sym_const()      # read with them
            elif p is None or p.name not in CONST_OPS:
                c = None
            else:  # a constant's values as inference and validation read them: an array, or a Widened as it is
                c = p.attrs["values"]
                if c.__class__ is not np.ndarray and c.__class__ is not Widened:
                    c = np.asarray(c)
            if c is None:
                all_const = False
            consts.append(c)
        inferred = result_types is None
        if inferred and self.validate:  # (the two steps below, sharing what an op of the same signature passed)
            try:
                result_types = validation.infer_and_validate(opcode, types, full, consts, out_dtype, quant)
            except InvalidGraphError as e:
                raise InvalidGraphError(str(e), op=self.location) from None
        elif result_types is None:
            try:
                result_types = validation.infer_result_types(opcode, types, full, out_dtype=out_dtype,
                                                            operand_consts=consts, quant=quant)
            except InvalidGraphError as e:
                raise InvalidGraphError(str(e), op=self.location) from None
            if quant is not None and any(t.quant is not quant for t in result_types):  # (CONST, control flow …)
                result_types = [t.with_dtype(t.dtype, quant) for t in result_types]
        else:
            result_types = list(result_types)
        if self.validate and not inferred:
            try:
                validation.validate(opcode, types, result_types, full, consts, inferred=inferred)
            except InvalidGraphError as e:
                raise InvalidGraphError(str(e), op=self.location) from None
        if names is None and self.name_hint:
            names = [self.name_hint] * len(result_types)
        # (add_op without its copies: the operand list and the attribute dict are this call's own)
        op = self.graph._new_op("tosa." + opcode, operands, result_types, full, names, list(regions) if regions else [],
                                self.location)
        if all_const and self.fold and opcode not in _NO_FOLD:
            return self._fold(op)
        return op

    def emit_vouched(self, opcode: str, operands: list[Value], attrs: dict[str, Any], key: tuple[Any, ...], *,
                     out_dtype: DType | None = None, quant: QuantParams | None = None) -> Operation:
        """:meth:`emit` of an op whose caller vouches for it: ``key`` determines (with ``opcode`` and which operands
        are constants) everything the type inference and :func:`.validation.validate` read of the op but the values
        of its constant operands (the operand shapes and types, ``attrs``, ``out_dtype``), and those values pass
        the validator's value checks (zero points, RESCALE's multipliers and shifts).  The first op of a key goes
        through :meth:`emit`; the ops after it get its result shapes and element types (each with ``quant``)
        without inference or checks.  ``operands`` becomes the op's own; its attributes are the catalogue's
        defaults updated with ``attrs``, as :meth:`emit` makes them.  An op :meth:`emit` would fold (all operands
        constant), the first of its opcode, and a builder that does not validate go through :meth:`emit`."""
        consts = 0
        for v in operands:
            p = v.producer
            consts += consts + (p is not None and p.name in CONST_OPS)
        defaults = _DEFAULTS.get(opcode)
        if consts == (1 << len(operands)) - 1 or not self.validate or defaults is None:
            return self.emit(opcode, operands, attrs, out_dtype=out_dtype, quant=quant)
        full_key = (opcode, consts, key)
        kept = _VOUCHED.get(full_key)
        if kept is None:
            op = self.emit(opcode, operands, attrs, out_dtype=out_dtype, quant=quant)
            pairs = []
            for r in op.results:
                shape = r.type.__dict__.get("_static_shape")  # (kept by TensorType for a shape of plain ints >= 0)
                if shape is None:
                    return op
                pairs.append((shape, r.type.dtype))
            if len(_VOUCHED) < 1 << 14:
                _VOUCHED[full_key] = tuple(pairs)
            return op
        if defaults:
            attrs = {**defaults, **attrs}
        types = [static_tensor_type(shape, dt, quant) for shape, dt in kept]
        names = [self.name_hint] * len(types) if self.name_hint else None
        return self.graph._new_op("tosa." + opcode, operands, types, attrs, names, [], self.location)

    def _fold(self, op: Operation) -> Operation:
        """Replace ``op`` (all operands constant) by a CONST / CONST_SHAPE op holding its value."""
        return fold_op(self.graph, op, self.context.passes.of(self.graph)) or op

    def __getattr__(self, name: str) -> Any:
        """``b.conv2d(x, w, bias, izp, wzp, pad=…)`` → emit("CONV2D", …).result (single-result ops)."""
        if name.startswith("_"):
            raise AttributeError(name)
        opcode = name.upper()

        def call(*operands: Value, out_dtype: DType | None = None, quant: QuantParams | None = None,
                 **attrs: Any) -> Value:
            return self.emit(opcode, operands, attrs, out_dtype=out_dtype, quant=quant).result

        return call

    # ------------------------------------------------------------- constants
    def const(self, values: Any, dtype: DType | str | None = None, quant: QuantParams | None = None,
              name: str = "const") -> Value:
        """A ``tosa.CONST`` tensor."""
        arr = np.asarray(values)
        dt = dtype if dtype.__class__ is DType else DType(dtype) if dtype is not None else None
        if dt is None:
            dt = DType.FP32 if arr.dtype.kind == "f" else DType.BOOL if arr.dtype.kind == "b" else DType.INT32
        # (add_const's conversion to the storage type is this astype's: its tail directly)
        return self.graph._const_op(arr.astype(dt.np_dtype()), dt, name, "tosa.CONST", quant)

    def sizes(self, values: Any, dtype: DType = DType.INT32) -> Value:
        """An integer ``tosa.CONST`` of sizes (nested ints and :class:`~tf2tosa.ir.symdim.SymDim`): the sample values,
        and, when any is symbolic (``--dynamic``), their dimension expressions as ``sym_values``."""
        arr = symbolic_array(values)
        v = self.const(np.asarray([int(x) for x in arr.reshape(-1)], dtype=np.int64).reshape(arr.shape), dtype)
        if has_symbols(arr):
            assert v.producer is not None
            v.producer.attrs[SYM_VALUES] = arr
        return v

    def shape(self, dims: Sequence[int], name: str = "shape") -> Value:
        """A ``tosa.CONST_SHAPE`` value holding ``dims``."""
        arr = np.asarray([int(d) for d in dims], dtype=np.int64)
        v = self.graph.add_const(arr, DType.SHAPE, name=name, op_name="tosa.CONST_SHAPE")
        if any(is_symbolic(d) for d in dims):
            assert v.producer is not None
            v.producer.attrs[SYM_VALUES] = symbolic_array(dims)
        return v

    def zp(self, value: int | float, dtype: DType) -> Value:
        """A [1] zero-point tensor of the data type (0.0 for float types)."""
        if value.__class__ is int and dtype.__class__ is DType:  # (a copy of the array made once per value and type)
            key = (value, dtype)
            arr = _ZP_ARRAYS.get(key)
            if arr is None:
                arr = np.array([value]).astype(dtype.np_dtype())
                if len(_ZP_ARRAYS) < 1024:
                    _ZP_ARRAYS[key] = arr
            return self.graph._const_op(arr.copy(), dtype, "zp", "tosa.CONST", None)
        return self.const(np.array([value]), dtype, name="zp")

    # ------------------------------------------------------- common helpers
    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        shape = [size(d) for d in shape]
        if list(x.shape) == shape:
            return x
        shape_v = self.shape(shape)
        key = self._folded_reshape_key(x, shape)
        kept = _FOLDED_RESHAPES.get(key) if key is not None else None
        if kept is not None:
            return self._folded_reshape(x, kept)
        y = self.emit("RESHAPE", [x, shape_v], quant=x.type.quant).result
        p = y.producer
        if key is not None and p is not None and p.name == "tosa.CONST" and len(_FOLDED_RESHAPES) < 1 << 14:
            got = y.type.__dict__.get("_static_shape")  # (kept by TensorType for a shape of plain ints >= 0)
            if got is not None and y.dtype is x.dtype:
                _FOLDED_RESHAPES[key] = got
        return y

    def _folded_reshape_key(self, x: Value, shape: list[Any]) -> tuple[Any, ...] | None:
        """For a RESHAPE of a plain constant to ``shape`` that :func:`fold_op` folds by :func:`_reshaped` (a view of
        the values of an ndarray, not of a kept fp16 weight; no dimension expressions; within :data:`FOLD_LIMIT`):
        what its inference and checks read (the input's shape and type and the new shape), else None."""
        p = x.producer
        if p is None or p.name not in CONST_OPS or not self.fold or not self.validate:
            return None
        attrs = p.attrs
        vals = attrs.get("values")
        dt = x.dtype
        static = x.type.__dict__.get("_static_shape")
        if (vals.__class__ is not np.ndarray or static is None or dt not in _PLAIN_STORAGE
                or SYM_AFFINE in attrs or SYM_VALUES in attrs or vals.dtype != dt.np_dtype()):
            return None
        for d in shape:
            if d.__class__ is not int or d < 1:
                return None
        n = math.prod(shape)
        if n != vals.size or n > FOLD_LIMIT:
            return None
        if x.id in self.context.passes.of(self.graph).fp16_sources:  # (fold_op records the reshaped fp16 source;
            return None  # fp16_keep alone changes nothing here: _widened folds only a Widened, not an ndarray)
        return static, dt, tuple(shape)

    def _folded_reshape(self, x: Value, shape: tuple[int, ...]) -> Value:
        """What :meth:`emit` of the RESHAPE and its :func:`fold_op` leave, for a RESHAPE of a key
        (:meth:`_folded_reshape_key`) that went through them before: the same ids taken and names reserved and
        freed (the RESHAPE's result name, then its constant's ``<name>_c``, then the first freed again), one CONST
        of a view of the values in the new shape, with the RESHAPE's location."""
        graph = self.graph
        ids = graph._ids
        oid = next(ids)
        next(ids)  # (the RESHAPE's result)
        name = graph.unique_name(self.name_hint or f"reshape_{oid}")
        assert x.producer is not None
        arr = x.producer.attrs["values"].reshape(shape)
        c = graph._new_op("tosa.CONST", [], [static_tensor_type(shape, x.dtype, x.type.quant)], {"values": arr},
                          [name + "_c"], [], self.location)
        graph._names.discard(name)
        graph._version += 4  # (the RESHAPE, its two edges and its removal)
        return c.result

    def transpose(self, x: Value, perms: Sequence[int]) -> Value:
        perms = [int(p) for p in perms]
        if perms == list(range(len(perms))):
            return x
        return self.emit("TRANSPOSE", [x], {"perms": perms}, quant=x.type.quant).result

    def slice(self, x: Value, start: Sequence[int], size: Sequence[int]) -> Value:
        if list(start) == [0] * len(start) and list(size) == list(x.shape):
            return x
        return self.emit("SLICE", [x, self.shape(start), self.shape(size)], quant=x.type.quant).result

    def tile(self, x: Value, multiples: Sequence[int]) -> Value:
        if all(int(m) == 1 for m in multiples):
            return x
        return self.emit("TILE", [x, self.shape(multiples)], quant=x.type.quant).result

    def pad(self, x: Value, padding: Sequence[int], pad_const: float | int = 0) -> Value:
        """``padding`` in TOSA layout [start0, end0, start1, end1, …]."""
        if not any(int(p) for p in padding):
            return x
        pc = self.const(np.array([pad_const]), x.dtype, name="pad_const")
        return self.emit("PAD", [x, self.shape(padding), pc], quant=x.type.quant).result

    def concat(self, xs: Sequence[Value], axis: int) -> Value:
        if len(xs) == 1:
            return xs[0]
        return self.emit("CONCAT", list(xs), {"axis": int(axis)}, quant=xs[0].type.quant).result

    def cast(self, x: Value, dtype: DType) -> Value:
        if x.dtype is dtype:
            return x
        return self.emit("CAST", [x], out_dtype=dtype).result

    def mul(self, a: Value, b: Value, shift: int = 0) -> Value:
        a, b = self.broadcast_ranks(a, b)
        return self.emit("MUL", [a, b, self.const(np.array([shift]), DType.INT8, name="shift")]).result

    def clamp(self, x: Value, lo: float | int, hi: float | int, nan_mode: str = "PROPAGATE") -> Value:
        return self.emit("CLAMP", [x], {"min_val": lo, "max_val": hi, "nan_mode": nan_mode},
                         quant=x.type.quant).result

    def broadcast_ranks(self, *xs: Value) -> list[Value]:
        """Reshape lower-rank operands by prepending 1s so all have equal rank (1.0 needs equal ranks,
        spec 1.11.3 Broadcasting)."""
        rank = max(v.type.rank for v in xs)
        return [self.reshape(v, (1,) * (rank - v.type.rank) + tuple(v.shape)) if v.type.rank < rank else v
                for v in xs]

    def binary(self, opcode: str, a: Value, b: Value, **attrs: Any) -> Value:
        """An elementwise binary op with rank broadcasting."""
        a, b = self.broadcast_ranks(a, b)
        return self.emit(opcode, [a, b], attrs).result
