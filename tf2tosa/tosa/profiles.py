"""Which TOSA profiles and extensions a graph needs, and the level limits it breaks.

* :func:`requirements` walks the ``tosa.*`` ops of a graph (and of its regions), finds each op's
  type row in the catalogue and gathers the row's profile/extension, choosing the smallest set:
  a row that is in both profiles ("PRO-INT or PRO-FP") is satisfied by a profile some other op
  already needs, else by PRO-FP when the op touches float data, else by PRO-INT.  RESCALE's
  rounding modes add EXT-DOUBLEROUND / EXT-INEXACTROUND; non-constant CTC operands add
  EXT-DYNAMIC; every extension brings a profile it is allowed with (Table 3, spec 1.6 Profiles).
* :func:`level_violations` applies the LEVEL_CHECKs of the operation functions with the level
  maxima of Table 4 (spec 1.7 Levels).
* :func:`tosa_opt_target` formats the result for ``tosa-opt --tosa-attach-target``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidGraphError
from ..ir.graph import CONST_OPS, Graph, Operation
from ..ir.types import DType
from . import optable, validation

#: Table 4 (spec 1.7 Levels)
LEVEL_8K: dict[str, int] = {"MAX_RANK": 6, "MAX_KERNEL": 8192, "MAX_STRIDE": 8192, "MAX_SCALE": 256,
                            "MAX_LOG2_SIZE": 31, "MAX_NESTING": 6, "MAX_TENSOR_LIST_SIZE": 64}
LEVEL_NONE: dict[str, int] = {"MAX_RANK": 32, "MAX_KERNEL": (1 << 31) - 1, "MAX_STRIDE": (1 << 31) - 1,
                              "MAX_SCALE": 2048, "MAX_LOG2_SIZE": 63, "MAX_NESTING": 256,
                              "MAX_TENSOR_LIST_SIZE": 256}

#: the largest tensor (bytes) tf2tosa allocates: the file readers and the executor refuse larger ones up front
#: (environment variable ``TF2TOSA_MAX_TENSOR_BYTES`` overrides it)
MEMORY_BUDGET = int(os.environ.get("TF2TOSA_MAX_TENSOR_BYTES", str(1 << 30)))
#: ``budget=`` for a size check that applies the level only (reading a file allocates none of its tensors)
NO_BUDGET = 1 << 63


def element_bits(dtype: Any) -> int:
    """Storage bits of one element of ``dtype`` (8 for types without a fixed width, e.g. strings)."""
    try:
        return int(dtype.bits)
    except (KeyError, AttributeError):
        return 8


def tensor_size_problem(shape: Sequence[Any], bits: int, level: dict[str, int] = LEVEL_8K,
                        budget: int | None = None) -> str | None:
    """Why a tensor of ``shape`` (symbolic dimensions are skipped) and ``bits``-wide elements is refused, or None.

    Refused: rank > MAX_RANK, more than 2^MAX_LOG2_SIZE - 1 elements (the level's tensor_size LEVEL_CHECK), or
    more bytes than the memory budget.  Computed from the shape alone, before anything is allocated."""
    if len(shape) > level["MAX_RANK"]:
        return f"rank {len(shape)} exceeds MAX_RANK {level['MAX_RANK']}"
    for d in shape:
        if d.__class__ is not int:
            count = math.prod([int(d) for d in shape if isinstance(d, (int, np.integer))])
            break
    else:  # (plain ints, the usual shape: their product as it is)
        count = math.prod(shape)
    if count > (1 << level["MAX_LOG2_SIZE"]) - 1:
        return f"shape {list(shape)} has {count} elements, more than 2^{level['MAX_LOG2_SIZE']}-1"
    budget = MEMORY_BUDGET if budget is None else budget
    nbytes = count * max(bits, 8) // 8
    if nbytes > budget:
        return (f"shape {list(shape)} needs {nbytes} bytes, more than the {budget}-byte tensor budget (the "
                "environment variable TF2TOSA_MAX_TENSOR_BYTES raises it)")
    return None


#: the largest dimension a TOSA flatbuffer shape holds (``shape: [int32]`` in the schema)
INT32_MAX = (1 << 31) - 1

#: :func:`_element_bytes` and :func:`_element_bits8` of the element types met
_ELEMENT_BYTES: dict[Any, int] = {}
_ELEMENT_BITS8: dict[Any, int] = {}


def _element_bytes(dtype: Any) -> int:
    """Bytes of one element for the level's size limit: :func:`element_bits` / 8, at least 1."""
    got = _ELEMENT_BYTES.get(dtype)
    if got is None:
        got = _ELEMENT_BYTES[dtype] = max(element_bits(dtype) // 8, 1)
    return got


def _element_bits8(dtype: Any) -> int:
    """Bits of one element for the memory budget: :func:`element_bits`, at least 8."""
    got = _ELEMENT_BITS8.get(dtype)
    if got is None:
        got = _ELEMENT_BITS8[dtype] = max(element_bits(dtype), 8)
    return got


def level_name(level: dict[str, int]) -> str:
    """``8K`` or ``none``: the name of a level table (Table 4)."""
    return "8K" if level == LEVEL_8K else "none" if level == LEVEL_NONE else "custom"


def plain_dim(d: Any) -> int | None:
    """A dimension as a plain int (a symbolic sample size without recording a size guard), None when unknown."""
    if isinstance(d, np.integer):
        return int(d)
    return int.__int__(d) if isinstance(d, int) and not isinstance(d, bool) else None


def _plain_dims(shape: Sequence[Any]) -> Sequence[int | None]:
    """:func:`plain_dim` of each dimension: the shape itself when every dimension is a plain int (most are)."""
    for d in shape:
        if d.__class__ is not int:
            return [plain_dim(d) for d in shape]
    return shape


def size_problems(graph: Graph, level: dict[str, int] = LEVEL_8K) -> Iterator[tuple[Any, Operation | None, str]]:
    """Every value of ``graph`` (inputs and op results, regions included) whose declared shape the file cannot hold
    or ``level`` forbids: a dimension above 2^31-1 (a shape is int32 in the flatbuffer) or more bytes than
    2^MAX_LOG2_SIZE - 1 (spec 1.11.1: "the number of tensor elements multiplied by the element size in bytes (which
    is taken to be 1 for elements smaller than a 8-bit) must be representable as a tensor_size_t", whose range
    ends at (1 << MAX_LOG2_SIZE) - 1; tosa-opt's level check is the same).  Yields (value, producing op or None
    for a graph input, reason); symbolic sizes count at their sample value, without recording a size guard."""
    limit = (1 << level["MAX_LOG2_SIZE"]) - 1

    def problem(v: Any) -> str | None:
        t = v.type
        dtype = t.dtype
        if dtype is DType.SHAPE:
            return None
        shape = t.shape
        dims = _plain_dims(shape)
        plain = dims is shape  # (a shape of plain ints: at most one pass)
        if not plain or shape and max(shape) > INT32_MAX:
            for k, d in enumerate(dims):
                if d is not None and d > INT32_MAX:
                    return f"dimension {k} is {d}, more than {INT32_MAX}, the largest a TOSA shape holds (int32)"
        count = math.prod(shape) if plain else math.prod(d for d in dims if d is not None)
        width = _element_bytes(dtype)
        if count * width > limit:
            return (f"{count} elements of {width} byte(s) = {count * width} bytes, more than level "
                    f"{level_name(level)} allows (2^{level['MAX_LOG2_SIZE']}-1 = {limit}: MAX_LOG2_SIZE "
                    f"{level['MAX_LOG2_SIZE']})")
        return None

    widths: dict[Any, int] = {}

    def visit(g: Graph) -> Iterator[tuple[Any, Operation | None, str]]:
        for v in g.inputs:
            why = problem(v)
            if why is not None:
                yield v, None, why
        for op in g.topological_order():
            for r in op.results:
                # a shape of plain ints >= 0 (what the type kept): no problem when it has elements, at most 2^31-1
                # (so does every dimension) and their bytes within the limit -- the usual case, without the call
                t = r.type
                shape = t.__dict__.get("_static_shape")
                if shape is not None:
                    dtype = t.dtype
                    width = widths.get(dtype)
                    if width is None:
                        width = widths[dtype] = _element_bytes(dtype)
                    count = math.prod(shape)
                    if 0 < count <= INT32_MAX and count * width <= limit:
                        continue
                why = problem(r)
                if why is not None:
                    yield r, op, why
            for region in op.regions:
                yield from visit(region)

    yield from visit(graph)


def over_budget(graph: Graph, budget: int | None = None) -> Iterator[tuple[Any, int]]:
    """(value, bytes) for every value of ``graph`` (regions included) larger than the executor's tensor budget."""
    budget = MEMORY_BUDGET if budget is None else budget

    bits: dict[Any, int] = {}

    def visit(g: Graph) -> Iterator[tuple[Any, int]]:
        ops = g.topological_order()
        for v in list(g.inputs) + [r for op in ops for r in op.results]:
            t = v.type
            dtype = t.dtype
            if dtype is DType.SHAPE:
                continue
            shape = t.__dict__.get("_static_shape")  # (a shape of plain ints, kept by the type)
            if shape is None:
                shape = t.shape
                dims = _plain_dims(shape)
                count = math.prod(dims) if dims is shape else math.prod(d for d in dims if d is not None)
            else:
                count = math.prod(shape)
            width = bits.get(dtype)
            if width is None:
                width = bits[dtype] = _element_bits8(dtype)
            nbytes = count * width // 8
            if nbytes > budget:
                yield v, nbytes
        for op in ops:
            if op.regions:
                for region in op.regions:
                    yield from visit(region)

    yield from visit(graph)


PROFILES = ("PRO-INT", "PRO-FP")
#: Table 3 (spec 1.6 Profiles): extension -> the profiles it may be used with
EXTENSION_PROFILES: dict[str, tuple[str, ...]] = {
    "EXT-INT16": ("PRO-INT",), "EXT-INT4": ("PRO-INT",), "EXT-BF16": ("PRO-FP",), "EXT-FP8E4M3": ("PRO-FP",),
    "EXT-FP8E5M2": ("PRO-FP",), "EXT-FFT": ("PRO-FP",), "EXT-VARIABLE": ("PRO-INT", "PRO-FP"),
    "EXT-CONTROLFLOW": ("PRO-INT", "PRO-FP"), "EXT-DYNAMIC": ("PRO-INT", "PRO-FP"),
    "EXT-DOUBLEROUND": ("PRO-INT",), "EXT-INEXACTROUND": ("PRO-INT",),
}
#: Table 2/3 status: experimental extensions may change (spec 1.8 Status)
EXPERIMENTAL = frozenset({"EXT-BF16", "EXT-FP8E4M3", "EXT-FP8E5M2", "EXT-VARIABLE", "EXT-CONTROLFLOW",
                          "EXT-DYNAMIC", "EXT-INEXACTROUND"})


def walk(graph: Graph, depth: int = 0) -> Iterator[tuple[Operation, int]]:
    """Every operation of ``graph`` and of its ops' regions, with its control-flow nesting depth."""
    for op in graph.topological_order():
        yield op, depth
        for region in op.regions:
            yield from walk(region, depth + 1)


def _tosa_op_list(graph: Graph, out: list[Operation]) -> list[Operation]:
    """The ``tosa`` ops of ``graph`` and of its ops' regions, in :func:`walk`'s order, appended to ``out`` (one list:
    no generator per op)."""
    for op in graph.topological_order():
        name = op.name
        if name.startswith("tosa.") or name == "tosa":  # (op.dialect == "tosa")
            out.append(op)
        if op.regions:
            for region in op.regions:
                _tosa_op_list(region, out)
    return out


def _touches_float(op: Operation) -> bool:
    return any(v.dtype.is_float for v in list(op.operands) + list(op.results))


def op_requirements(op: Operation) -> tuple[tuple[str, ...], set[str]]:
    """(alternatives, required): one of ``alternatives`` (may be empty) plus all of ``required``."""
    types_in = [v.type for v in op.operands]
    types_out = [v.type for v in op.results]
    row = validation.match_row(op.opcode, types_in, types_out, op.attrs)
    required = set(row.also)
    alts: tuple[str, ...] = ()
    if len(row.support) == 1:
        required.add(row.support[0])
    else:
        alts = row.support
    if op.opcode == "RESCALE":
        mode = str(op.attrs.get("rounding_mode", "SINGLE_ROUND"))
        if mode == "DOUBLE_ROUND":
            required.add("EXT-DOUBLEROUND")
        elif mode == "INEXACT_ROUND":
            required.add("EXT-INEXACTROUND")
    for arg, v in optable.bind_operands(op.opcode, list(op.operands)):
        if arg.ctc and not v.is_const:
            required.add("EXT-DYNAMIC")
    return alts, required


#: the attributes :func:`op_requirements` reads (through ``validation.match_row``'s type row and RESCALE's rounding)
_REQUIREMENT_ATTRS = ("acc_type", "mode", "type", "scale32", "rounding_mode")


def _requirements_key(op: Operation) -> tuple[Any, ...]:
    """All that :func:`op_requirements` reads of ``op``: its name, the element types of its operands and results,
    which operands are constants, and the attributes that choose its type row and rounding (each with its Python
    type, so that values equal across types stay apart).  (Hashing it raises TypeError for an unhashable
    attribute.)"""
    attrs, operands, results = op.attrs, op.operands, op.results
    if not operands and len(results) == 1 and len(attrs) == 1 and "values" in attrs:  # a constant: (name, type)
        return op.name, results[0].type.dtype
    get = attrs.get
    extra = [get(k) for k in _REQUIREMENT_ATTRS]
    # (Value.is_const of each operand, without its property call)
    return (op.name, tuple([v.type.dtype for v in operands]), tuple([r.type.dtype for r in results]),
            tuple([v.producer is not None and v.producer.name in CONST_OPS for v in operands]), *extra,
            *map(type, extra))


def requirements(graph: Graph) -> tuple[list[str], list[str]]:
    """(profiles, extensions) the graph needs, each sorted; see the module docstring for the rules."""
    needed: set[str] = set()
    deferred: list[tuple[Operation, tuple[str, ...]]] = []
    # ops of equal keys (_requirements_key) have equal requirements: only the first of each key is worked out, and
    # the others add nothing (its requirements are in ``needed`` already, and the profile chosen below for its
    # alternatives, from the element types its key holds, satisfies theirs)
    known: set[tuple[Any, ...]] = set()
    for op in _tosa_op_list(graph, []):
        key: tuple[Any, ...] | None = _requirements_key(op)
        try:
            if key in known:
                continue
        except TypeError:
            key = None
        try:
            alts, req = op_requirements(op)
        except InvalidGraphError as e:
            raise InvalidGraphError(str(e), op=op.location or op.name) from None
        if key is not None:
            known.add(key)
        needed |= req
        if alts:
            deferred.append((op, alts))
    for op, alts in deferred:
        if any(a in needed for a in alts):
            continue
        want = "PRO-FP" if _touches_float(op) else "PRO-INT"
        needed.add(want if want in alts else alts[0])
    for ext in sorted(n for n in needed if n.startswith("EXT-")):
        allowed = EXTENSION_PROFILES.get(ext, PROFILES)
        if not any(p in needed for p in allowed):
            needed.add(allowed[0])
    profiles = sorted(n for n in needed if n.startswith("PRO-"))
    extensions = sorted(n for n in needed if n.startswith("EXT-"))
    return profiles, extensions


# ------------------------------------------------------------------------------------------ levels
def _ints(v: Any) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)] if v is not None else []


def _op_level(op: Operation, level: dict[str, int]) -> list[str]:
    out: list[str] = []
    code = op.opcode
    a = op.attrs
    mk, ms = level["MAX_KERNEL"], level["MAX_STRIDE"]

    def check(cond: bool, what: str) -> None:
        if not cond:
            out.append(f"{code}: {what}")

    if code in ("AVG_POOL2D", "MAX_POOL2D"):
        for k in _ints(a.get("kernel")):
            check(k <= mk, f"kernel {k} > MAX_KERNEL {mk}")
        for s in _ints(a.get("stride")):
            check(s <= ms, f"stride {s} > MAX_STRIDE {ms}")
        for p in _ints(a.get("pad")):
            check(p <= mk, f"pad {p} > MAX_KERNEL {mk}")
    elif code in ("CONV2D", "CONV3D", "DEPTHWISE_CONV2D"):
        w = op.operands[1].shape if len(op.operands) > 1 else ()
        ks = list(w[:-2]) if code == "DEPTHWISE_CONV2D" else list(w[1:-1])
        for k, d in zip(ks, _ints(a.get("dilation"))):
            if isinstance(k, int):
                check(d * k <= mk, f"dilation*kernel {d}*{k} > MAX_KERNEL {mk}")
        for p in _ints(a.get("pad")):
            check(p <= mk, f"pad {p} > MAX_KERNEL {mk}")
        for s in _ints(a.get("stride")):
            check(s <= ms, f"stride {s} > MAX_STRIDE {ms}")
    elif code == "TRANSPOSE_CONV2D":
        w = op.operands[1].shape if len(op.operands) > 1 else ()
        for k in list(w[1:3]):
            if isinstance(k, int):
                check(k <= mk, f"kernel {k} > MAX_KERNEL {mk}")
        for p in _ints(a.get("out_pad")):
            check(p <= mk, f"out_pad {p} > MAX_KERNEL {mk}")
        for s in _ints(a.get("stride")):
            check(s <= ms, f"stride {s} > MAX_STRIDE {ms}")
    elif code in ("FFT2D", "RFFT2D"):
        for d in list(op.operands[0].shape[1:3]):
            if isinstance(d, int):
                check(d <= mk, f"H/W {d} > MAX_KERNEL {mk}")
    elif code == "RESIZE" and len(op.operands) > 1:
        sc = op.operands[1].const()
        if sc is not None and np.asarray(sc).size == 4:
            yn, yd, xn, xd = _ints(sc)
            if yd > 0 and xd > 0:  # integer division as in the pseudo-code (spec 2.12.1 RESIZE)
                check(yn // yd <= level["MAX_SCALE"], f"scale_y {yn}/{yd} > MAX_SCALE {level['MAX_SCALE']}")
                check(xn // xd <= level["MAX_SCALE"], f"scale_x {xn}/{xd} > MAX_SCALE {level['MAX_SCALE']}")
    if code in ("CONCAT", "CUSTOM", "COND_IF", "WHILE_LOOP"):
        n_in = len(op.operands) - (1 if code == "COND_IF" else 0)
        lim = level["MAX_TENSOR_LIST_SIZE"]
        check(n_in <= lim, f"{n_in} tensors in the input list > MAX_TENSOR_LIST_SIZE {lim}")
        if code != "CONCAT":
            check(len(op.results) <= lim, f"{len(op.results)} tensors in the output list > MAX_TENSOR_LIST_SIZE {lim}")
    return out


def level_violations(graph: Graph, level: dict[str, int] = LEVEL_8K) -> list[str]:
    """Messages for every LEVEL_CHECK the graph fails at ``level`` (empty when it conforms)."""
    msgs: list[str] = []
    max_rank, max_size = level["MAX_RANK"], (1 << level["MAX_LOG2_SIZE"]) - 1

    def value_checks(where: str, v: Any) -> None:
        t = v.type
        if t.rank > max_rank:
            msgs.append(f"{where}: {v.name} has rank {t.rank} > MAX_RANK {max_rank}")
        if t.is_static and t.dtype.value != "shape" and t.size * max(element_bits(t.dtype) // 8, 1) > max_size:
            # elements times the element size in bytes (spec 1.11.1)
            msgs.append(f"{where}: {v.name} has {t.size} elements, "
                        f"{t.size * max(element_bits(t.dtype) // 8, 1)} bytes > 2^MAX_LOG2_SIZE-1")

    def visit(g: Graph, depth: int) -> None:
        for v in g.inputs:
            value_checks(f"graph {g.name} input", v)
        for op in g.topological_order():
            where = f"{op.name}#{op.id}" + (f" ({op.location})" if op.location else "")
            for v in op.results:
                value_checks(where, v)
            if op.dialect == "tosa":
                msgs.extend(f"{where}: {m.split(': ', 1)[1]}" for m in _op_level(op, level))
                if op.opcode in ("COND_IF", "WHILE_LOOP") and depth >= level["MAX_NESTING"]:
                    msgs.append(f"{where}: nesting depth {depth} >= MAX_NESTING {level['MAX_NESTING']}")
            for region in op.regions:
                visit(region, depth + 1)

    visit(graph, 0)
    return msgs


def tosa_opt_target(profiles: list[str] | tuple[str, ...], extensions: list[str] | tuple[str, ...],
                    level: str = "8k") -> str:
    """The ``--tosa-attach-target`` option string, e.g.
    ``specification_version=1.0 profiles=pro_fp extensions=int16,doubleround level=8k``."""
    pro = ",".join(p.lower().replace("-", "_") for p in profiles) or "pro_int"
    parts = ["specification_version=1.0", f"profiles={pro}"]
    if extensions:
        parts.append("extensions=" + ",".join(e.lower().removeprefix("ext-") for e in extensions))
    parts.append(f"level={level}")
    return " ".join(parts)
