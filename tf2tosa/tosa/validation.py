"""Validation against the operator catalogue (:mod:`.optable`): type rows, result types, attributes,
zero points, compile-time values and control-flow regions.

Readers: the builder (``infer_result_types`` / ``validate``), the executor (``validate_op``),
``profiles.requirements`` (``match_row``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir.types import DType, QuantParams, TensorType, dtype_from_numpy, static_tensor_type
from . import shapes
from .optable import ACC_TYPES, ENUMS, TABLE_SIZE, Arg, Attr, OpSpec, TypeRow, _err, bind_operands, get

__all__ = ["candidate_rows", "match_row", "infer_result_types", "check_attrs", "validate", "validate_op",
           "infer_and_validate"]

_FIXED: dict[str, DType] = {"i8_t": DType.INT8, "i32_t": DType.INT32, "bool_t": DType.BOOL, "shape_t": DType.SHAPE}
#: ops whose output element type is a free choice among rows: the caller must say which (out_dtype)
_CHOOSE_OUT = frozenset({"CAST", "RESCALE"})
#: the element types TOSA 1.0 has tensors of (``DType.is_tosa``)
_TOSA_TYPES = frozenset(d for d in DType if d.is_tosa)


def _expected(tv: str, row: TypeRow, attrs: dict[str, Any]) -> DType | None:
    """The element type ``row`` gives type variable ``tv`` (None: unconstrained)."""
    if tv in row.types:
        return row.types[tv]
    if tv in _FIXED:
        return _FIXED[tv]
    if tv == "mul_t":  # spec 2.13.2 RESCALE: if (scale32) mul_t=i32_t else mul_t=i16_t
        return DType.INT32 if attrs.get("scale32", True) else DType.INT16
    return None


def _row_fits(spec: OpSpec, row: TypeRow, pairs: list[tuple[Arg, DType]], attrs: dict[str, Any]) -> bool:
    for arg, dt in pairs:
        exp = _expected(arg.type_var, row, attrs)
        if exp is not None and exp is not dt:
            return False
    if "acc_t" in row.types and "acc_type" in spec.attr_map:
        acc = attrs.get("acc_type")
        if acc is not None and ACC_TYPES.get(str(acc)) is not row.types["acc_t"]:
            return False
    if spec.name == "RESIZE" and row.mode and "," in row.mode:  # integer rows: "signed 8, bilinear"
        mode = str(attrs.get("mode", ""))
        if ("bilinear" in row.mode) != (mode == "BILINEAR"):
            return False
    if spec.name == "VARIABLE" and attrs.get("type") is not None:
        try:
            vt = DType(attrs["type"])
        except ValueError:
            return False
        if row.types.get("var_t") is not vt:
            return False
    return True


def _pairs(spec: OpSpec, operand_types: Sequence[TensorType], result_types: Sequence[TensorType] | None
           ) -> list[tuple[Arg, DType]]:
    pairs = [(a, t.dtype) for a, t in bind_operands(spec.name, operand_types)]
    if result_types is not None:
        pairs += [(a, t.dtype) for a, t in bind_operands(spec.name, result_types, outputs=True)]
    return pairs


def _describe(spec: OpSpec, pairs: list[tuple[Arg, DType]], attrs: dict[str, Any]) -> str:
    seen: dict[str, str] = {}
    for arg, dt in pairs:
        key = arg.type_var
        if key == "tensor_list_t":
            continue
        val = dt.value
        if key in seen and val not in seen[key].split("/"):
            seen[key] += f"/{val}({arg.name})"
        else:
            seen.setdefault(key, val)
    if "acc_type" in spec.attr_map and attrs.get("acc_type") is not None:
        seen["acc_type"] = str(attrs["acc_type"])
    if spec.name == "RESIZE":
        seen["mode"] = str(attrs.get("mode"))
    return ", ".join(f"{k}={v}" for k, v in seen.items())


#: the rows :func:`_fitting_rows` found, by everything they depend on (:func:`_rows_key`)
_ROWS: dict[tuple[Any, ...], tuple[TypeRow, ...]] = {}


def _rows_key(name: str, operand_types: Sequence[TensorType], result_types: Sequence[TensorType] | None,
              attrs: dict[str, Any]) -> tuple[Any, ...]:
    """What :func:`_row_fits` reads: the element types (their count binds the arguments) and the attributes
    acc_type, mode, type (each by its Python type and text; absent reads as None) and scale32 (as a truth value)."""
    get = attrs.get
    acc, mode, typ = get("acc_type"), get("mode"), get("type")
    return (name, tuple([t.dtype for t in operand_types]),
            None if result_types is None else tuple([t.dtype for t in result_types]),
            _ABSENT if acc is None else (type(acc), str(acc)), _ABSENT if mode is None else (type(mode), str(mode)),
            _ABSENT if typ is None else (type(typ), str(typ)), bool(get("scale32", True)))


#: an attribute :func:`_rows_key` reads that is absent (or None), as it keys it
_ABSENT = (type(None), "None")


def _fitting_rows(name: str, operand_types: Sequence[TensorType], result_types: Sequence[TensorType] | None,
                  attrs: dict[str, Any]) -> tuple[TypeRow, ...]:
    key = _rows_key(name, operand_types, result_types, attrs)
    rows = _ROWS.get(key)
    if rows is None:
        spec = get(name)
        pairs = _pairs(spec, operand_types, result_types)
        rows = _ROWS[key] = tuple(r for r in spec.rows if _row_fits(spec, r, pairs, attrs))
    return rows


def candidate_rows(name: str, operand_types: Sequence[TensorType], result_types: Sequence[TensorType] | None,
                   attrs: dict[str, Any]) -> list[TypeRow]:
    """All rows that fit the operand (and result) element types and the attributes."""
    return list(_fitting_rows(name, operand_types, result_types, attrs))


def match_row(name: str, operand_types: Sequence[TensorType], result_types: Sequence[TensorType] | None,
              attrs: dict[str, Any]) -> TypeRow:
    """The (first) supported-data-types row the operand/result element types fit.

    Raises InvalidGraphError naming the types and the allowed rows when none fits.
    """
    rows = _fitting_rows(name, operand_types, result_types, attrs)
    if not rows:
        spec = get(name)
        pairs = _pairs(spec, operand_types, result_types)
        allowed = "; ".join(str(r) for r in spec.rows)
        raise _err(spec, f"no type row for {_describe(spec, pairs, attrs)}; allowed: {allowed}")
    return rows[0]


def _out_dtype(spec: OpSpec, arg: Arg, rows: list[TypeRow], attrs: dict[str, Any]) -> set[DType]:
    return {d for r in rows if (d := _expected(arg.type_var, r, attrs)) is not None}


def infer_result_types(name: str, operand_types: Sequence[TensorType], attrs: dict[str, Any],
                       out_dtype: DType | None = None,
                       operand_consts: Sequence[np.ndarray | None] | None = None, *,
                       quant: QuantParams | None = None) -> list[TensorType]:
    """Result types from the shape rule (shapes.py) and the unique fitting type row.

    ``out_dtype`` picks the first result's element type where rows differ (CAST, RESCALE, MATMUL
    fp16->fp32, RESIZE …); without it an op other than CAST/RESCALE gets the result type equal to its
    first operand's when a row allows that, else the first row's.  ``operand_consts`` (the constant
    arrays of the operands, None where not constant) are needed for RESHAPE/SLICE/TILE/PAD/RESIZE.
    ``quant`` is every result's quantization (None: none).
    """
    spec = get(name)
    operand_types = list(operand_types)
    op = spec.name
    if op == "CONST" or op == "CONST_SHAPE":
        vals = np.asarray(attrs.get("values"))
        if op == "CONST_SHAPE":
            return [TensorType((int(vals.size),), DType.SHAPE)]
        return [TensorType(tuple(vals.shape), out_dtype or dtype_from_numpy(vals.dtype))]
    if op in ("VARIABLE", "VARIABLE_WRITE"):
        return []
    if op == "VARIABLE_READ":
        dt = out_dtype or attrs.get("type")
        if dt is None or attrs.get("var_shape") is None:
            raise _err(spec, "result type must be given (the variable's type and shape are declared by VARIABLE)")
        return [TensorType(tuple(int(d) for d in attrs["var_shape"]), DType(dt))]
    if op == "WHILE_LOOP":
        bind_operands(op, operand_types)
        return [TensorType(t.shape, t.dtype) for t in operand_types]
    if op == "COND_IF":
        then = attrs.get("then_graph")
        if then is None or not hasattr(then, "outputs"):
            raise _err(spec, "result types must be given (they are the then/else graphs' outputs)")
        return [TensorType(v.type.shape, v.type.dtype) for v in then.outputs]
    if op == "CUSTOM":
        raise _err(spec, "result types must be given for CUSTOM operators")

    key = _rows_key(op, operand_types, None, attrs)
    rows = _ROWS.get(key)
    if rows is None:
        rows = _fitting_rows(op, operand_types, None, attrs)
    if not rows:
        match_row(op, operand_types, None, attrs)  # raises with the message
    out_shapes = shapes.result_shapes(op, operand_types, attrs, operand_consts)
    # the element types are a function of what the rows depend on, out_dtype and the number of results
    dkey = (key, out_dtype, len(out_shapes))
    dts = _RESULT_DTYPES.get(dkey)
    if dts is None:
        dts = _RESULT_DTYPES[dkey] = _result_dtypes(spec, list(rows), operand_types, attrs, out_dtype,
                                                    len(out_shapes))
    return [TensorType(shape, dt, quant) for shape, dt in zip(out_shapes, dts)]


#: the element types :func:`_result_dtypes` chose, by the rows' key (:func:`_rows_key`), out_dtype and the number
#: of results
_RESULT_DTYPES: dict[tuple[Any, ...], tuple[DType, ...]] = {}


def _result_dtypes(spec: OpSpec, rows: list[TypeRow], operand_types: list[TensorType], attrs: dict[str, Any],
                   out_dtype: DType | None, n: int) -> tuple[DType, ...]:
    """The element type of each of the first ``n`` results (:func:`infer_result_types`' choice among ``rows``)."""
    op = spec.name
    results: list[DType] = []
    for i, arg in enumerate(spec.outputs[:n]):
        choices = _out_dtype(spec, arg, rows, attrs)
        if i == 0 and out_dtype is not None:
            want = out_dtype if out_dtype.__class__ is DType else DType(out_dtype)
            if want not in choices:
                allowed = ", ".join(sorted(d.value for d in choices))
                raise _err(spec, f"no type row gives {arg.name}={DType(out_dtype).value} for "
                                 f"{_describe(spec, _pairs(spec, operand_types, None), attrs)}; allowed: {allowed}")
            dt = want
            rows = [r for r in rows if _expected(arg.type_var, r, attrs) is dt]
        elif len(choices) == 1:
            dt = next(iter(choices))
        elif not choices:
            raise _err(spec, f"cannot infer the element type of {arg.name}")
        elif op in _CHOOSE_OUT:
            allowed = ", ".join(sorted(d.value for d in choices))
            raise _err(spec, f"out_dtype must be given: {arg.name} may be {allowed}")
        else:
            first = operand_types[0].dtype if operand_types else None
            dt = first if first in choices else _expected(arg.type_var, rows[0], attrs)  # type: ignore[assignment]
            assert dt is not None
        results.append(dt)
    return tuple(results)


# ---------------------------------------------------------------------------------- attribute checks
def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _check_attr(spec: OpSpec, a: Attr, v: Any) -> None:
    k = a.kind
    ok = True
    if k == "i32":
        ok = _is_int(v) and -(1 << 31) <= int(v) < (1 << 31)
    elif k == "bool":
        ok = isinstance(v, (bool, np.bool_))
    elif k == "i32_list":
        try:
            items = list(v)
        except TypeError:
            ok = False
        else:  # (plain ints, as the rules make pads and strides, without a call per element)
            ok = not [x for x in items if x.__class__ is not int] or all(_is_int(x) for x in items)
    elif k in ENUMS:
        ok = str(getattr(v, "value", v)) in ENUMS[k]
        if not ok:
            raise _err(spec, f"attribute {a.name}={v!r} is not one of {', '.join(ENUMS[k])}")
    elif k == "string":
        ok = isinstance(v, str)
    elif k == "bytes":
        ok = isinstance(v, (bytes, bytearray, str))
    elif k == "values":
        ok = isinstance(v, (np.ndarray, list, tuple, int, float, bool, np.generic))
    elif k == "dtype":
        try:
            DType(v)
        except ValueError:
            ok = False
    elif k == "scalar":
        ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
    if not ok:
        raise _err(spec, f"attribute {a.name}={v!r} is not a valid {k}")


#: attribute keys the IR may carry besides the spec's (bookkeeping, never serialized)
_EXTRA_ATTR_OK = frozenset({"side_effect"})


#: the classes of attribute values whose check :func:`check_attrs` keeps (hashable, and equal values of one class
#: pass or fail :func:`_check_attr` alike)
_PLAIN_ATTR = frozenset({str, bool, int, float})
#: (op, attribute, class, value) of the plain attribute values that passed :func:`_check_attr`
_ATTRS_OK: set[tuple[str, str, type, Any]] = set()


def check_attrs(name: str, attrs: dict[str, Any]) -> None:
    """Presence, kinds and enum values of the attributes; unknown attribute names are errors."""
    spec = get(name)
    for a in spec.attrs:
        v = attrs.get(a.name)
        if v is not None:
            cls = v.__class__
            if cls in _PLAIN_ATTR:  # (rounding modes, flags, axes: the same few values op after op)
                key = (spec.name, a.name, cls, v)
                if key not in _ATTRS_OK:
                    _check_attr(spec, a, v)
                    _ATTRS_OK.add(key)
            else:
                _check_attr(spec, a, v)
        elif a.required and a.default is None:
            raise _err(spec, f"missing required attribute {a.name} ({a.kind})")
    for k in attrs:
        if k not in spec.attr_map and k not in _EXTRA_ATTR_OK and not k.startswith("_"):
            known = ", ".join(spec.attr_map) or "none"
            raise _err(spec, f"unknown attribute {k!r} (the spec's attributes: {known})")


# ------------------------------------------------------------------------------------------ validate
def _scalar(arr: np.ndarray | None) -> int | float | None:
    if arr is None:
        return None
    a = np.asarray(arr).reshape(-1)
    if a.size != 1:
        return None
    return a[0].item()


def _check_zero_points(spec: OpSpec, pairs: list[tuple[Arg, TensorType]], consts: Sequence[np.ndarray | None],
                       attrs: dict[str, Any]) -> None:
    op = spec.name
    for (arg, t), c in zip(pairs, consts):
        if arg.role != "zp" or c is None:
            continue
        arr = c if isinstance(c, np.ndarray) else np.asarray(c)
        if arr.size != 1:
            raise _err(spec, f"{arg.name} must hold exactly one value, has {arr.size}", arg.name)
        zp = arr.item(0)
        dt = t.dtype
        if op == "RESCALE":
            # spec 2.13.2 RESCALE: non-zero only for i8 (signed or unsigned) and unsigned i16 (0 or 32768)
            unsigned = bool(attrs.get("input_unsigned" if arg.name == "input_zp" else "output_unsigned"))
            if dt is DType.INT8:
                continue
            if dt is DType.INT16 and unsigned:
                if zp not in (0, 32768, -32768):  # 32768 stored in an i16 tensor reads back as -32768
                    raise _err(spec, f"{arg.name}={zp}: an unsigned 16-bit zero point must be 0 or 32768", arg.name)
                continue
            if zp != 0:
                raise _err(spec, f"{arg.name}={zp}: zero point must be 0 for {dt.value}", arg.name)
            continue
        if dt is not DType.INT8 and zp != 0:
            raise _err(spec, f"{arg.name}={zp}: zero point must be zero for non-int8 types", arg.name)
        if dt is DType.INT8 and not -128 <= zp <= 127:
            raise _err(spec, f"{arg.name}={zp} is outside int8", arg.name)


def _bounds(arr: np.ndarray) -> tuple[Any, Any]:
    """(min, max) of a flat non-empty array (its one element as a Python number: no reductions for a size-1 array,
    the common per-tensor RESCALE); (0, 0) for an empty one (the callers test the size)."""
    if arr.size == 1:
        x = arr.item(0)
        return x, x
    if arr.size == 0:
        return 0, 0
    return arr.min(), arr.max()


#: the ops :func:`_check_values` has rules for
_VALUE_CHECKED = frozenset({"MUL", "TABLE", "CLAMP", "RESCALE", "PAD"})


def _check_values(spec: OpSpec, row: TypeRow, pairs: list[tuple[Arg, TensorType]],
                  consts: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> None:
    """Value-level rules on constant operands and attributes."""
    op = spec.name
    if op not in _VALUE_CHECKED:
        return
    by_name: dict[str, tuple[TensorType, np.ndarray | None]] = {a.name: (t, c) for (a, t), c in zip(pairs, consts)}
    if op == "MUL" and "shift" in by_name:
        c = by_name["shift"][1]
        s = _scalar(c)
        if s is not None:
            if not 0 <= s <= 63:  # spec 2.5.14 MUL
                raise _err(spec, f"shift={s} must be in [0, 63]", "shift")
            if s != 0 and row.types.get("in_t") is not DType.INT32:  # spec 2.5.14 MUL
                raise _err(spec, f"shift={s} must be 0 unless in_t is i32", "shift")
    if op == "TABLE":
        t_in = row.types["in_t"]
        table_t = by_name["table"][0]
        if table_t.is_static and table_t.shape != (TABLE_SIZE[t_in],):  # spec 2.5.17 TABLE
            raise _err(spec, f"table must have shape [{TABLE_SIZE[t_in]}] for {t_in.value} input, "
                             f"has {list(table_t.shape)}", "table")
    if op == "CLAMP":
        lo, hi = attrs.get("min_val"), attrs.get("max_val")
        if lo is not None and hi is not None:
            if isinstance(lo, float) and np.isnan(lo) or isinstance(hi, float) and np.isnan(hi):  # spec 2.4.1 CLAMP
                raise _err(spec, "min_val/max_val must not be NaN")
            if hi < lo:  # spec 2.4.1 CLAMP
                raise _err(spec, f"max_val={hi} < min_val={lo}")
            dt = row.types["in_out_t"]
            if dt.is_int:
                if not (float(lo).is_integer() and float(hi).is_integer()):
                    raise _err(spec, f"min_val/max_val must be integers for {dt.value}")
                rlo, rhi = dt.range()
                if not (rlo <= lo <= rhi and rlo <= hi <= rhi):
                    raise _err(spec, f"min_val={lo}/max_val={hi} outside the range of {dt.value}")
    if op == "RESCALE":
        scale32 = bool(attrs.get("scale32"))
        in_t, out_t = row.types["in_t"], row.types["out_t"]
        iu, ou = bool(attrs.get("input_unsigned")), bool(attrs.get("output_unsigned"))
        rm = str(attrs.get("rounding_mode"))
        if scale32 and in_t is DType.INT48:
            raise _err(spec, "scale32 must be false for i48 input (spec 2.13.2 RESCALE)")
        if not scale32 and rm == "DOUBLE_ROUND":
            raise _err(spec, "DOUBLE_ROUND needs scale32 (spec 2.13.2 RESCALE)")
        if iu and ou:
            raise _err(spec, "input_unsigned and output_unsigned cannot both be set (spec 2.13.2 RESCALE)")
        if out_t is DType.INT32 and iu:
            raise _err(spec, "input_unsigned is not allowed with an i32 output (spec 2.13.2 RESCALE)")
        if in_t in (DType.INT32, DType.INT48) and ou:
            raise _err(spec, f"output_unsigned is not allowed with {in_t.value} input (spec 2.13.2 RESCALE)")
        inp = by_name["input"][0]
        per_channel = bool(attrs.get("per_channel"))
        if per_channel and inp.rank < 1:
            raise _err(spec, "per_channel needs an input of rank >= 1 (spec 2.13.2 RESCALE)")
        nc: Any = inp.shape[-1] if per_channel else 1  # spec 2.13.2 RESCALE
        for nm in ("multiplier", "shift"):
            t = by_name[nm][0]
            if t.rank == 1 and isinstance(t.shape[0], int) and isinstance(nc, int) and t.shape[0] != nc:
                raise _err(spec, f"{nm} must have shape [{nc}] (per_channel={per_channel}), has {list(t.shape)}", nm)
        sh = by_name["shift"][1]
        if sh is not None:
            arr = np.asarray(sh).reshape(-1)
            lo, hi = _bounds(arr)
            if arr.size and (lo < 2 or hi > 62):  # REQUIRE of spec 4.5.5 apply_scale_32/16
                raise _err(spec, f"shift values must be in [2, 62], got [{arr.min()}, {arr.max()}]", "shift")
        mul = by_name["multiplier"][1]
        if mul is not None:
            arr = np.asarray(mul).reshape(-1)
            if arr.size and _bounds(arr)[0] < 0:  # spec 4.5.5 apply_scale_32, spec 4.5.5 apply_scale_16
                raise _err(spec, "multiplier values must be >= 0", "multiplier")
    if op == "PAD":
        pc = by_name["pad_const"][0]
        if pc.is_static and pc.size != 1:
            raise _err(spec, f"pad_const must hold one value, has shape {list(pc.shape)}", "pad_const")


def _sig(types: Sequence[TensorType]) -> list[tuple[tuple[Any, ...], DType]]:
    return [(tuple(t.shape), t.dtype) for t in types]


def _check_regions(spec: OpSpec, operand_types: list[TensorType], result_types: list[TensorType],
                   attrs: dict[str, Any]) -> None:
    """COND_IF / WHILE_LOOP graphs against the tensor lists (spec 2.16.1 COND_IF, spec 2.16.2 WHILE_LOOP)."""
    def io(key: str) -> tuple[list[TensorType], list[TensorType]] | None:
        g = attrs.get(key)
        if g is None or not hasattr(g, "inputs"):
            return None
        return [v.type for v in g.inputs], [v.type for v in g.outputs]

    if spec.name == "COND_IF":
        for key in ("then_graph", "else_graph"):
            got = io(key)
            if got is None:
                continue
            if _sig(got[0]) != _sig(operand_types[1:]):
                raise _err(spec, f"{key} inputs {[str(t) for t in got[0]]} do not match input_list")
            if _sig(got[1]) != _sig(result_types):
                raise _err(spec, f"{key} outputs {[str(t) for t in got[1]]} do not match output_list")
    if spec.name == "WHILE_LOOP":
        cond, body = io("cond_graph"), io("body_graph")
        if cond is not None:
            if _sig(cond[0]) != _sig(operand_types):
                raise _err(spec, "cond_graph inputs do not match input_list (spec 2.16.2 WHILE_LOOP)")
            outs = cond[1]
            if len(outs) != 1 or outs[0].dtype is not DType.BOOL or (outs[0].is_static and outs[0].size != 1):
                raise _err(spec, "cond_graph must return one bool of size 1 (spec 2.16.2 WHILE_LOOP)")
        if body is not None and (_sig(body[0]) != _sig(operand_types) or _sig(body[1]) != _sig(operand_types)):
            raise _err(spec, "body_graph inputs and outputs must match input_list (spec 2.16.2 WHILE_LOOP)")


def validate(name: str, operand_types: Sequence[TensorType], result_types: Sequence[TensorType],
             attrs: dict[str, Any], operand_consts: Sequence[np.ndarray | None] | None = None,
             dynamic: bool = False, *, inferred: bool = False) -> TypeRow:
    """Check one op against the spec; returns its type row.

    Checks operand/result counts, ranks, dims >= 1, the type row (with acc_type), attributes, that CTC
    operands are constants (when ``operand_consts`` is given and not ``dynamic`` i.e. EXT-DYNAMIC),
    zero points and other constant values, and the spec's shape ERROR_IFs (shapes.check_shapes; ``inferred``:
    the result types are :func:`infer_result_types`'s for these same arguments, whose shape rule has run).
    """
    spec = get(name)
    operand_types, result_types = list(operand_types), list(result_types)
    in_pairs = bind_operands(spec.name, operand_types)
    out_pairs = bind_operands(spec.name, result_types, outputs=True)
    if spec.name == "CONCAT" and not operand_types:
        raise _err(spec, "needs at least one input (spec 2.10.1 CONCAT)")
    check_attrs(spec.name, attrs)
    for arg, t in in_pairs + out_pairs:
        dt, shape = t.dtype, t.shape
        if dt not in _TOSA_TYPES:
            raise _err(spec, f"{arg.name} has type {dt.value}, which is not a TOSA 1.0 type", arg.name)
        rank = len(shape)
        if arg.rank is not None and rank != arg.rank:
            raise _err(spec, f"{arg.name} must have rank {arg.rank}, has shape {list(shape)}", arg.name)
        if rank < arg.min_rank:
            raise _err(spec, f"{arg.name} must have rank >= {arg.min_rank}, has rank {rank}", arg.name)
        # spec 1.11.1 Tensors: no empty tensors; a shape_t value of a rank-0 shape (spec 2.10.3 RESHAPE) has
        # length 0 and is fine.  (A static shape's dimensions are ints >= 0: one below 1 is a 0.)
        if dt is not DType.SHAPE and (0 in shape if t.is_static else any(isinstance(d, int) and d < 1
                                                                          for d in shape)):
            raise _err(spec, f"{arg.name} has a dimension < 1: {list(shape)}", arg.name)
        role = arg.role
        if role == "zp" and shape != (1,) and t.is_static:
            raise _err(spec, f"{arg.name} must have shape [1], has {list(shape)}", arg.name)
        if role == "shift" and spec.name == "MUL" and shape != (1,) and t.is_static:
            raise _err(spec, f"{arg.name} must have shape [1], has {list(shape)}", arg.name)
    row = match_row(spec.name, operand_types, result_types, attrs)
    consts: list[np.ndarray | None] = [None] * len(operand_types)
    if operand_consts is not None:
        consts = list(operand_consts)
        if len(consts) != len(operand_types):
            raise ValueError("operand_consts must have one entry per operand")
        if not dynamic:
            for (arg, _t), c in zip(in_pairs, consts):
                if arg.ctc and c is None:
                    what = "CONST_SHAPE" if arg.role == "shape" else "CONST"
                    raise _err(spec, f"operand {arg.name} must be a compile-time constant ({what}-fed) "
                                     "without EXT-DYNAMIC", arg.name)
    _check_zero_points(spec, in_pairs, consts, attrs)
    _check_values(spec, row, in_pairs, consts, attrs)
    shapes.check_shapes(spec.name, operand_types, result_types, attrs, consts, inferred=inferred)
    _check_regions(spec, operand_types, result_types, attrs)
    return row


#: what :func:`_check_zero_points` and :func:`_check_values` read of the constants of an op of a kept signature:
#: (operand index, lowest, highest, exactly one value) per constant whose every value must lie in [lowest, highest]
_Plan = tuple[tuple[int, float, float, bool], ...]
_ANY = float("inf")


def _value_plan(spec: OpSpec, row: TypeRow, pairs: list[tuple[Arg, TensorType]],
                consts: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> _Plan | None:
    """The value ranges under which :func:`_check_zero_points` and :func:`_check_values` pass for an op of this
    signature (its types and attributes as they are here; only constant values vary), or None where they are not
    ranges (an unsigned 16-bit RESCALE zero point: the two checks are run)."""
    op = spec.name
    plan: list[tuple[int, float, float, bool]] = []
    for i, ((arg, t), c) in enumerate(zip(pairs, consts)):
        if arg.role != "zp" or c is None:
            continue
        dt = t.dtype
        if op == "RESCALE":
            if dt is DType.INT8:
                plan.append((i, -_ANY, _ANY, True))
            elif dt is DType.INT16 and attrs.get("input_unsigned" if arg.name == "input_zp" else "output_unsigned"):
                return None
            else:
                plan.append((i, 0, 0, True))
        else:
            plan.append((i, -128, 127, True) if dt is DType.INT8 else (i, 0, 0, True))
    if op == "MUL" or op == "RESCALE":
        index = {a.name: i for i, (a, _) in enumerate(pairs)}
        for nm in ("shift", "multiplier"):
            i = index.get(nm, -1)
            if i < 0 or consts[i] is None:
                continue
            if op == "MUL":  # (a shift of one value: in [0, 63], 0 unless in_t is i32)
                plan.append((i, 0, 63 if row.types.get("in_t") is DType.INT32 else 0, True))
            else:
                plan.append((i, 2, 62, False) if nm == "shift" else (i, 0, _ANY, False))
    return tuple(plan)


def _plan_holds(plan: _Plan, consts: Sequence[np.ndarray | None]) -> bool:
    """Whether every constant of ``plan`` is an array whose values lie in their range (one value where it says so):
    then :func:`_check_zero_points` and :func:`_check_values` pass for the op.  False sends the op to them."""
    for i, lo, hi, one in plan:
        c = consts[i]
        if c.__class__ is not np.ndarray or c.dtype.kind not in "biuf":  # type: ignore[union-attr]
            return False
        n = c.size  # type: ignore[union-attr]
        if n == 1:
            x = c.item(0)  # type: ignore[union-attr]
            if not lo <= x <= hi:
                return False
        elif one or n and (lo != -_ANY and c.min() < lo or hi != _ANY and c.max() > hi):  # type: ignore[union-attr]
            return False  # (an open end needs no reduction: a multiplier's top, for one)
    return True


#: ops :func:`infer_and_validate` keeps nothing for (constants, state, regions, CUSTOM: results from elsewhere)
_NOT_KEPT = frozenset({"CONST", "CONST_SHAPE", "VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE", "COND_IF",
                       "WHILE_LOOP", "CUSTOM"})
#: the operands whose constant values the shape rule of an op reads (shapes.py: PAD's padding, RESHAPE's shape …)
_RULE_READS_CONSTS: dict[str, frozenset[int]] = {
    "PAD": frozenset({1}), "RESHAPE": frozenset({1}), "SLICE": frozenset({1, 2}), "TILE": frozenset({1}),
    "RESIZE": frozenset({1, 2, 3}), "SLICE_SHAPE": frozenset({2})}
#: the result (shape, element type) pairs and type row of each op signature :func:`infer_and_validate` inferred and
#: checked in full (:func:`_signature`)
_CHECKED: dict[tuple[Any, ...], tuple[tuple[tuple[tuple[int, ...], DType], ...], TypeRow, _Plan | None]] = {}
#: :data:`_CHECKED` holds at most this many signatures (NASNetMobile int8: about 250 among 1,430 ops)
_CHECKED_MAX = 1 << 14


def _signature(name: str, operand_types: list[TensorType], attrs: dict[str, Any],
               consts: list[np.ndarray | None], out_dtype: DType | None) -> tuple[Any, ...] | None:
    """Everything :func:`infer_result_types` and :func:`validate` read of an op but the values of its constant
    operands (but those :data:`_RULE_READS_CONSTS` names, which its shape rule reads): ``out_dtype``, each
    operand's shape (plain non-negative ints only) and element type and whether it is a constant, and each
    attribute by name, Python type and value (str / bool / int / float / None values and lists or tuples of plain
    ints only).  None for any other op."""
    name = get(name).name  # ("tosa.RESHAPE" is RESHAPE)
    if name in _NOT_KEPT:
        return None
    key: list[Any] = [name, out_dtype]
    reads = _RULE_READS_CONSTS.get(name, ())
    for i, (t, c) in enumerate(zip(operand_types, consts)):
        shape = t.__dict__.get("_static_shape")  # (kept by TensorType for a shape of plain ints >= 0)
        if shape is None:
            return None
        if c is None or i not in reads:
            key += (shape, t.dtype, c is None)
        elif c.__class__ is np.ndarray and c.dtype.kind in "iub" and c.size <= 64:  # (no SymDim: object arrays)
            key += (shape, t.dtype, (c.dtype, c.shape, c.tobytes()))
        else:
            return None
    for k, v in attrs.items():
        cls = v.__class__
        if cls in _PLAIN_ATTR or v is None:
            key += (k, cls, v)
        elif cls is list or cls is tuple:
            for x in v:
                if x.__class__ is not int:
                    return None
            key += (k, cls, tuple(v))
        else:
            return None
    return tuple(key)


def infer_and_validate(name: str, operand_types: list[TensorType], attrs: dict[str, Any],
                       consts: list[np.ndarray | None], out_dtype: DType | None = None,
                       quant: QuantParams | None = None) -> list[TensorType]:
    """:func:`infer_result_types` (every result given ``quant``) then :func:`validate` of the op with those results:
    the builder's checks of an op it emits.  An op whose :func:`_signature` passed both before gets the same result
    shapes and element types and has only its constants' values checked again (zero points, :func:`_check_values`):
    the rest would pass as it did.  Raises what the two raise."""
    key = _signature(name, operand_types, attrs, consts, out_dtype)
    kept = _CHECKED.get(key) if key is not None else None
    if kept is not None:
        plan = kept[2]
        if plan is None or not _plan_holds(plan, consts):  # (the checks themselves: they raise what they find)
            spec = get(name)
            in_pairs = bind_operands(spec.name, operand_types)
            _check_zero_points(spec, in_pairs, consts, attrs)
            _check_values(spec, kept[1], in_pairs, consts, attrs)
        return [static_tensor_type(shape, dt, quant) for shape, dt in kept[0]]  # (static shapes, DType members)
    result_types = infer_result_types(name, operand_types, attrs, out_dtype=out_dtype, operand_consts=consts,
                                      quant=quant)
    if quant is not None and any(t.quant is not quant for t in result_types):
        result_types = [t.with_dtype(t.dtype, quant) for t in result_types]
    row = validate(name, operand_types, result_types, attrs, consts, inferred=True)
    if key is not None and len(_CHECKED) < _CHECKED_MAX:
        pairs = []
        for t in result_types:
            shape = t.__dict__.get("_static_shape")
            if shape is None:
                return result_types
            pairs.append((shape, t.dtype))
        spec = get(name)
        _CHECKED[key] = (tuple(pairs), row,
                         _value_plan(spec, row, bind_operands(spec.name, operand_types), consts, attrs))
    return result_types


def validate_op(op: Any, dynamic: bool = False) -> TypeRow:
    """``validate`` for an IR Operation (``tosa.*``); constants come from the operands' producers."""
    attrs = dict(op.attrs)
    if op.opcode in ("COND_IF", "WHILE_LOOP") and op.regions:
        keys = ("then_graph", "else_graph") if op.opcode == "COND_IF" else ("cond_graph", "body_graph")
        for k, g in zip(keys, op.regions):
            attrs.setdefault(k, g)
    return validate(op.opcode, [v.type for v in op.operands], [v.type for v in op.results], attrs,
                    [v.const() for v in op.operands], dynamic=dynamic)
