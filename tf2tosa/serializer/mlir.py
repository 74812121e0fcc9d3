"""Print an IR graph of ``tosa.*`` operations as TOSA-dialect MLIR text, in one of two syntaxes.

``generic`` (the default): MLIR's generic operation form for every ``tosa.*`` op,
``%3 = "tosa.conv2d"(%a, %w, ...) <{acc_type = f32, pad = array<i64: ...>, ...}> : (types) -> type``,
with enumerations as ``#tosa.rounding_mode<DOUBLE_ROUND>``, regions as ``({ ^bb0(...): ... }, { ... })``
and module-level ``"tosa.variable"() <{sym_name = ..., var_shape = ..., type = ...}>``.  The generic form
does not depend on any op's custom assembly, so both ``tosa-opt`` (tosa-tools 2026.8.0) and IREE 3.13
read it, although their TOSA dialects print differently.

``upstream``: the custom assembly of today's upstream LLVM TOSA dialect (what IREE 3.13 prints):
keyword attributes in the spec's argument order, ``tosa.conv2d %a, %w, ... pad([1, 1, 1, 1]) stride([1, 1])
dilation([1, 1]) acc_type(f32) local_bound(false) : (types) -> type``, enumerations as
``rounding_mode<DOUBLE_ROUND>`` (``nan_mode`` left out when ``PROPAGATE``), ``tosa.const values(dense<...>)``
and ``tosa.const_shape values(dense<...>)``; ``tosa.cond_if`` / ``tosa.while_loop`` regions and the
``tosa.variable @name = ...`` declarations in their custom form.  tosa-opt 2026.8.0 (an older dialect
with ``{attr = ...}`` dictionaries) does not read this syntax.

Graph input/output names are kept as ``{tosa.tensor_name = "..."}`` argument/result
attributes (what ``tosa-opt --tosa-deserialize`` prints, and what
``--tosa-serialize=retain-graph-input-output-names`` reads).  Constants with more than
:data:`HEX_THRESHOLD` elements are printed as hex (``dense<"0x...">``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidGraphError
from ..ir.graph import Graph, Operation
from ..ir.types import DType, TensorType
from ..tosa import optable as catalogue
from .tosa_writer import encode_array, variable_name, variable_type

HEX_THRESHOLD = 16
#: the printable forms: MLIR's generic operation form, and the custom assembly of upstream LLVM's TOSA dialect
SYNTAXES = ("generic", "upstream")

_ELEM = {DType.BOOL: "i1", DType.INT4: "i4", DType.INT8: "i8", DType.INT16: "i16", DType.INT32: "i32",
         DType.INT48: "i48", DType.FP16: "f16", DType.BF16: "bf16", DType.FP32: "f32",
         DType.FP8E4M3: "f8E4M3FN", DType.FP8E5M2: "f8E5M2"}
_ACC = {"INT32": "i32", "INT48": "i48", "FP16": "f16", "FP32": "f32"}
#: ops whose i32-list attributes are ``array<i32: ...>`` (the others are ``array<i64: ...>``)
_I32_ARRAYS = {"perms"}
_PROFILES = {"PRO-INT": "pro_int", "PRO-FP": "pro_fp"}


def mlir_type(t: TensorType) -> str:
    if t.dtype is DType.SHAPE:
        return f"!tosa.shape<{t.static_shape[0]}>"
    if t.dtype not in _ELEM:
        raise InvalidGraphError(f"type {t.dtype} has no TOSA MLIR element type")
    # a dimension symbol ("batch") is an unknown dimension, ``?`` (TOSA 1.1 draft, EXT-DYNAMIC/EXT-SHAPE)
    dims = "".join(f"{int(d)}x" if isinstance(d, int) else "?x" for d in t.shape)
    return f"tensor<{dims}{_ELEM[t.dtype]}>"


def _types(ts: Sequence[TensorType]) -> str:
    return ", ".join(mlir_type(t) for t in ts)


def _results(ts: Sequence[TensorType]) -> str:
    return mlir_type(ts[0]) if len(ts) == 1 else f"({_types(ts)})"


def _string(s: str | bytes) -> str:
    data = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    out = []
    for b in data:
        ch = chr(b)
        if 0x20 <= b < 0x7F and ch not in '"\\':
            out.append(ch)
        else:
            out.append(f"\\{b:02X}")
    return '"' + "".join(out) + '"'


def _float(x: float, dtype: DType) -> str:
    """An MLIR float literal for ``x`` that parses back to the same ``dtype`` value."""
    if math.isfinite(x):
        r = repr(float(x))
        return r if ("e" in r or "." in r) else r + ".0"
    return "0x" + encode_array(np.array([x]), dtype)[::-1].hex().upper()


def _scalar(x: Any, dtype: DType) -> str:
    if dtype is DType.BOOL:
        return "true" if bool(x) else "false"
    if dtype.is_float:
        return _float(float(x), dtype)
    return str(int(x))


def _dense(values: np.ndarray, t: TensorType) -> str:
    """``dense<...> : T`` for constant ``values`` of type ``t``."""
    dtype = t.dtype
    tstr = f"tensor<{t.static_shape[0]}xindex>" if dtype is DType.SHAPE else mlir_type(t)
    arr = np.asarray(values)
    flat = arr.reshape(-1)
    if flat.size and dtype is not DType.SHAPE:
        first = flat[0]
        same = bool(np.all(flat == first)) if not dtype.is_float else bool(
            np.all(flat.astype(np.float64).view(np.int64) == np.float64(first).view(np.int64)))
        if same:
            return f"dense<{_scalar(first, dtype)}> : {tstr}"
    hexable = dtype in (DType.INT8, DType.INT16, DType.INT32, DType.FP16, DType.BF16, DType.FP32)
    if hexable and flat.size > HEX_THRESHOLD:
        return f'dense<"0x{encode_array(flat, dtype).hex().upper()}"> : {tstr}'
    shape = (flat.size,) if dtype is DType.SHAPE else t.static_shape
    sdt = DType.INT32 if dtype is DType.SHAPE else dtype
    items = [_scalar(v, sdt) for v in flat.tolist()] if sdt is not DType.BF16 and not sdt.name.startswith(
        "FP8") else [_scalar(float(v), sdt) for v in flat.astype(np.float32).tolist()]

    def nest(pos: int, dims: tuple[int, ...]) -> tuple[str, int]:
        if not dims:
            return items[pos], pos + 1
        parts = []
        for _ in range(dims[0]):
            s, pos = nest(pos, dims[1:])
            parts.append(s)
        return "[" + ", ".join(parts) + "]", pos

    body, _ = nest(0, tuple(shape))
    return f"dense<{body}> : {tstr}"


def _symbol(name: str) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name):
        return "@" + name
    return "@" + _string(name)


def _variables(graph: Graph, generic: bool) -> list[str]:
    """Module-level ``tosa.variable`` declarations for every variable the graph (or a region) uses."""
    decls: dict[str, str] = {}

    def visit(g: Graph) -> None:
        for op in g.topological_order():
            if op.opcode in ("VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE"):
                name = variable_name(op)
                if name not in decls:
                    vtype, init = variable_type(g, name, op)
                    if generic:
                        shape = _dense(np.asarray(vtype.static_shape, np.int64), TensorType((vtype.rank,), DType.SHAPE))
                        props = [("sym_name", _string(name)), ("type", _ELEM[vtype.dtype]), ("var_shape", shape)]
                        if init is not None:
                            props.append(("initial_value", _dense(init, vtype)))
                        decls[name] = f'  "tosa.variable"(){_properties(props)} : () -> ()'
                    else:
                        value = f" = {_dense(init, vtype)}" if init is not None else f" : {mlir_type(vtype)}"
                        decls[name] = f"  tosa.variable {_symbol(name)}{value}"
            for sub in op.regions:
                visit(sub)

    visit(graph)
    return list(decls.values())


def _properties(items: Sequence[tuple[str, str]]) -> str:
    """`` <{k = v, ...}>``: an op's properties in the generic form, sorted by name (none: empty)."""
    if not items:
        return ""
    return " <{" + ", ".join(f"{k} = {v}" for k, v in sorted(items)) + "}>"


def _block_args(names: Sequence[str], g: Graph) -> str:
    return ", ".join(f"{a}: {mlir_type(v.type)}" for a, v in zip(names, g.inputs))


class _Printer:
    def __init__(self, syntax: str = "generic", draft: bool = False) -> None:
        #: MLIR's generic operation form for every ``tosa.*`` op (``"tosa.conv2d"(...) <{...}>``)
        self.generic = syntax == "generic"
        #: the program declares the 1.1 draft: its EXT-SHAPE operators may be printed
        self.draft = draft
        self.lines: list[str] = []
        self.counter = 0
        self.args = 0

    def fresh(self) -> str:
        name = f"%{self.counter}"
        self.counter += 1
        return name

    def fresh_arg(self) -> str:
        name = f"%arg{self.args}"
        self.args += 1
        return name

    # ---------------------------------------------------------------- attributes
    def attrs(self, op: Operation) -> str:
        """The op's attributes: ``<{k = v, ...}>`` (generic form, sorted by name) or, in the upstream custom
        assembly, ``k(v)`` keywords (``k<V>`` for enumerations) in the spec's argument order; the upstream form
        leaves out ``nan_mode`` when it is the default ``PROPAGATE``."""
        items: list[tuple[str, str, str]] = []  # (name, generic value, upstream keyword)
        in_dtype = op.operands[0].type.dtype if op.operands else DType.FP32
        for a in catalogue.get(op.opcode).attrs:
            name, kind = a.name, a.kind
            if name not in op.attrs:
                continue
            v = op.attrs[name]
            if kind == "i32_list":
                elem = "i32" if name in _I32_ARRAYS else "i64"
                ints = ", ".join(str(int(x)) for x in np.asarray(v).reshape(-1))
                items.append((name, f"array<{elem}: {ints}>", f"{name}([{ints}])"))
            elif kind == "i32":
                items.append((name, f"{int(v)} : i32", f"{name}({int(v)})"))
            elif kind == "bool":
                items.append((name, "true" if v else "false", f"{name}({'true' if v else 'false'})"))
            elif kind == "acc_type":
                items.append((name, _ACC[str(v).upper()], f"{name}({_ACC[str(v).upper()]})"))
            elif kind in ("nan_mode", "rounding_mode", "resize_mode"):
                value = str(v).upper()
                value = "NEAREST_NEIGHBOR" if kind == "resize_mode" and value == "NEAREST" else value
                keyword = "" if kind == "nan_mode" and value == "PROPAGATE" else f"{name}<{value}>"
                items.append((name, f"#tosa.{kind}<{value}>", keyword))
            elif kind == "scalar":
                scalar = f"{_scalar(v, in_dtype)} : {_ELEM[in_dtype]}"
                items.append((name, scalar, f"{name}({scalar})"))
            elif kind in ("string", "bytes"):
                items.append((name, _string(v), f"{name}({_string(v)})"))
        if self.generic:
            return _properties([(k, v) for k, v, _ in items])
        return "".join(f" {kw}" for _, _, kw in items if kw)

    # ---------------------------------------------------------------- ops
    def block(self, g: Graph, env: dict[int, str], indent: str, terminator: str) -> None:
        for op in g.topological_order():
            self.op(op, env, indent)
        outs = [env[v.id] for v in g.outputs]
        types = ", ".join(mlir_type(v.type) for v in g.outputs)
        if self.generic and terminator.startswith("tosa."):
            self.lines.append(f'{indent}"{terminator}"({", ".join(outs)}) : ({types}) -> ()')
        else:
            self.lines.append(f"{indent}{terminator} {', '.join(outs)} : {types}" if outs else f"{indent}{terminator}")

    def op(self, op: Operation, env: dict[int, str], indent: str) -> None:
        if op.dialect == "tosa" and catalogue.is_draft(op.opcode):
            if not self.draft:
                raise InvalidGraphError(f"{op.opcode} is an operator of the TOSA {catalogue.DRAFT_VERSION} "
                                        "(EXT-SHAPE), not of 1.0: print with version=" + catalogue.DRAFT_VERSION,
                                        op=op.name)
            self.draft_op(op, env, indent)
            return
        if op.dialect != "tosa" or op.opcode not in catalogue.OPS:
            raise InvalidGraphError("not a TOSA 1.0 operation", op=op.name)
        code = op.opcode
        if code == "VARIABLE":  # declared at module level (see to_mlir)
            return
        if code == "VARIABLE_WRITE":
            if len(op.operands) != 1:
                raise InvalidGraphError("VARIABLE_WRITE takes one operand", op=op.name)
            v = op.operands[0]
            if self.generic:
                name_prop = _properties([("name", _string(variable_name(op)))])
                self.lines.append(f'{indent}"tosa.variable_write"({env[v.id]}){name_prop} : '
                                  f"({mlir_type(v.type)}) -> ()")
            else:
                self.lines.append(f"{indent}tosa.variable_write {_symbol(variable_name(op))}, {env[v.id]} : "
                                  f"{mlir_type(v.type)}")
            return
        name = self.fresh()
        n = len(op.results)
        for i, r in enumerate(op.results):
            env[r.id] = name if n == 1 else f"{name}#{i}"
        lhs = name if n == 1 else f"{name}:{n}"
        try:
            args = [env[v.id] for v in op.operands]
        except KeyError as e:
            raise InvalidGraphError("operand defined outside this graph", op=op.name) from e
        rtypes = [r.type for r in op.results]
        if self.generic and code not in ("COND_IF", "WHILE_LOOP"):
            if code == "VARIABLE_READ":
                attrs = _properties([("name", _string(variable_name(op)))])
            elif code in ("CONST", "CONST_SHAPE"):
                attrs = _properties([("values", _dense(op.attrs["values"], op.result.type))])
            else:
                attrs = self.attrs(op)
            self.lines.append(f'{indent}{lhs} = "tosa.{code.lower()}"({", ".join(args)}){attrs} : '
                              f"({_types([v.type for v in op.operands])}) -> {_results(rtypes)}")
        elif code == "VARIABLE_READ":
            self.lines.append(f"{indent}{lhs} = tosa.variable_read {_symbol(variable_name(op))} : "
                              f"{mlir_type(op.result.type)}")
        elif code in ("CONST", "CONST_SHAPE"):
            t = op.result.type
            self.lines.append(f"{indent}{lhs} = tosa.{code.lower()} values({_dense(op.attrs['values'], t)}) "
                              f": () -> {mlir_type(t)}")
        elif self.generic:  # COND_IF, WHILE_LOOP
            self.generic_regions(op, lhs, args, env, indent)
        elif code == "COND_IF":
            self.cond_if(op, lhs, args, env, indent)
        elif code == "WHILE_LOOP":
            self.while_loop(op, lhs, args, env, indent)
        else:
            self.lines.append(f"{indent}{lhs} = tosa.{code.lower()} {', '.join(args)}{self.attrs(op)} : "
                              f"({_types([v.type for v in op.operands])}) -> {_results(rtypes)}")

    def draft_op(self, op: Operation, env: dict[int, str], indent: str) -> None:
        """An EXT-SHAPE operator of the 1.1 draft, in the form tosa-opt 2026.8.0 prints (checked by trying it):
        ``%2 = tosa.dim %0 {axis = 0 : i32} : (tensor<?x8xf32>) -> !tosa.shape<1>``; ASSERT_EQUAL_SHAPE has no
        result.  The generic form is ``"tosa.dim"(%0) <{axis = 0 : i32}> : ...``."""
        try:
            args = [env[v.id] for v in op.operands]
        except KeyError as e:
            raise InvalidGraphError("operand defined outside this graph", op=op.name) from e
        items: list[tuple[str, str]] = []
        for a in catalogue.get(op.opcode).attrs:
            if a.name not in op.attrs:
                continue
            v = op.attrs[a.name]
            items.append((a.name, f"{int(v)} : i32" if a.kind == "i32" else ("true" if v else "false")))
        lhs = ""
        if op.results:
            name = self.fresh()
            env[op.result.id] = name
            lhs = f"{name} = "
        sig = f"({_types([v.type for v in op.operands])}) -> {_results([r.type for r in op.results]) or '()'}"
        code = op.opcode.lower()
        if self.generic:
            self.lines.append(f'{indent}{lhs}"tosa.{code}"({", ".join(args)}){_properties(items)} : {sig}')
        else:
            props = (" {" + ", ".join(f"{k} = {v}" for k, v in items) + "}") if items else ""
            self.lines.append(f"{indent}{lhs}tosa.{code} {', '.join(args)}{props} : {sig}")

    def _region_args(self, g: Graph, env: dict[int, str]) -> list[str]:
        names = []
        for v in g.inputs:
            a = self.fresh_arg()
            env[v.id] = a
            names.append(a)
        return names

    def generic_regions(self, op: Operation, lhs: str, args: list[str], env: dict[int, str], indent: str) -> None:
        """COND_IF (then, else) or WHILE_LOOP (cond, body) in the generic form: each region a block with arguments."""
        if len(op.regions) != 2 or (op.opcode == "COND_IF" and not op.operands):
            raise InvalidGraphError(f"{op.opcode} needs two regions" + (" and a condition" if op.opcode == "COND_IF"
                                                                       else ""), op=op.name)
        self.lines.append(f'{indent}{lhs} = "tosa.{op.opcode.lower()}"({", ".join(args)}) ({{')
        for i, g in enumerate(op.regions):
            genv = dict(env)
            gargs = self._region_args(g, genv)
            if i:
                self.lines.append(f"{indent}}}, {{")
            self.lines.append(f"{indent}^bb0({_block_args(gargs, g)}):" if gargs else f"{indent}^bb0:")
            self.block(g, genv, indent + "  ", "tosa.yield")
        self.lines.append(f"{indent}}}) : ({_types([v.type for v in op.operands])}) -> "
                          f"{_results([r.type for r in op.results])}")

    def cond_if(self, op: Operation, lhs: str, args: list[str], env: dict[int, str], indent: str) -> None:
        if len(op.regions) != 2 or not op.operands:
            raise InvalidGraphError("COND_IF needs a condition and two regions", op=op.name)
        then, els = op.regions
        inner = indent + "  "
        tenv = dict(env)
        targs = self._region_args(then, tenv)
        inputs = op.operands[1:]
        binding = ", ".join(f"{a} = {x}" for a, x in zip(targs, args[1:]))
        self.lines.append(f"{indent}{lhs} = tosa.cond_if {args[0]} ({binding}) : {mlir_type(op.operands[0].type)} "
                          f"({_types([v.type for v in inputs])}) -> {_results([r.type for r in op.results])} {{")
        self.lines.append(f"{indent}^bb0({_block_args(targs, then)}):")
        self.block(then, tenv, inner, "tosa.yield")
        self.lines.append(f"{indent}}} else {{")
        eenv = dict(env)
        eargs = self._region_args(els, eenv)
        self.lines.append(f"{indent}^bb0({_block_args(eargs, els)}):")
        self.block(els, eenv, inner, "tosa.yield")
        self.lines.append(f"{indent}}}")

    def while_loop(self, op: Operation, lhs: str, args: list[str], env: dict[int, str], indent: str) -> None:
        if len(op.regions) != 2:
            raise InvalidGraphError("WHILE_LOOP needs two regions", op=op.name)
        cond, body = op.regions
        inner = indent + "  "
        cenv = dict(env)
        cargs = self._region_args(cond, cenv)
        binding = ", ".join(f"{a} = {x}" for a, x in zip(cargs, args))
        types = _types([v.type for v in op.operands])
        self.lines.append(f"{indent}{lhs} = tosa.while_loop ({binding}) : ({types}) -> "
                          f"({_types([r.type for r in op.results])}) {{")
        self.block(cond, cenv, inner, "tosa.yield")
        self.lines.append(f"{indent}}} do {{")
        benv = dict(env)
        bargs = self._region_args(body, benv)
        self.lines.append(f"{indent}^bb0({_block_args(bargs, body)}):")
        self.block(body, benv, inner, "tosa.yield")
        self.lines.append(f"{indent}}}")


def to_mlir(graph: Graph, profiles: Sequence[str] | None = None, extensions: Sequence[str] | None = None,
            level: str = "8k", func_name: str = "main", syntax: str = "generic", version: str = "1.0",
            dim_guards: Sequence[str] = (), dim_hints: Mapping[str, int] | None = None) -> str:
    """TOSA-dialect MLIR text of ``graph``.

    ``syntax``: one of :data:`SYNTAXES` (see the module docstring).

    When ``profiles`` is given, the module carries a ``tosa.target_env`` attribute for ``version``
    with those profiles and ``extensions`` (spec names such as ``PRO-INT``, ``EXT-INT16``).

    ``version``: ``"1.0"`` (the default) or :data:`~tf2tosa.tosa.optable.DRAFT_VERSION` (``"1.1.draft"``),
    which allows the 1.1 draft's EXT-SHAPE operators; unknown dimensions (symbols) print as ``?`` either way.

    ``dim_guards`` / ``dim_hints`` (a symbolic program's size comparisons and sample sizes, ``graph.dims``) become
    the discardable module attributes ``tf2tosa.dim_guards = ["d1 // 16 >= 1", …]`` and
    ``tf2tosa.dim_hints = {"batch" = 3 : i64, …}``: tosa-opt accepts and ignores them, :func:`tf2tosa.load`
    reads them back (:func:`module_dim_facts`); a ``.tosa`` flatbuffer has no place for them.
    """
    if syntax not in SYNTAXES:
        raise InvalidGraphError(f"unknown MLIR syntax {syntax!r} (choose from {', '.join(SYNTAXES)})")
    if version not in ("1.0", catalogue.DRAFT_VERSION):
        raise InvalidGraphError(f"unknown TOSA specification version {version!r} (choose from 1.0, "
                                f"{catalogue.DRAFT_VERSION})")
    p = _Printer(syntax, draft=version == catalogue.DRAFT_VERSION)
    env: dict[int, str] = {}
    params = []
    for v in graph.inputs:
        a = p.fresh_arg()
        env[v.id] = a
        params.append(f"{a}: {mlir_type(v.type)} {{tosa.tensor_name = {_string(v.name)}}}")
    results = ", ".join(f"{mlir_type(v.type)} {{tosa.tensor_name = {_string(v.name)}}}" for v in graph.outputs)
    body_start = len(p.lines)
    p.block(graph, env, "    ", "return")
    body = p.lines[body_start:]
    attrs: list[str] = []
    if profiles is not None:
        profs = ", ".join(sorted({_PROFILES[x.upper()] for x in profiles}))
        exts = ", ".join(sorted({x.upper().removeprefix("EXT-").lower() for x in (extensions or ())}))
        attrs.append(f'tosa.target_env = #tosa.target_env<specification_version = "{version}", '
                     f'level = "{level}", profiles = [{profs}], extensions = [{exts}]>')
    if dim_guards:
        attrs.append(f"{GUARDS_ATTR} = [{', '.join(_string(g) for g in dim_guards)}]")
    if dim_hints:
        attrs.append(f"{HINTS_ATTR} = {{{', '.join(f'{_string(k)} = {int(v)} : i64' for k, v in dim_hints.items())}}}")
    header = f"module attributes {{{', '.join(attrs)}}} {{" if attrs else "module {"
    signature = f"  func.func @{func_name}({', '.join(params)}) -> ({results}) {{"
    lines = [header, *_variables(graph, p.generic), signature, *body, "  }", "}"]
    return "\n".join(lines) + "\n"


#: the discardable module attributes of a symbolic program's size guards and sample sizes (see :func:`to_mlir`)
GUARDS_ATTR = "tf2tosa.dim_guards"
HINTS_ATTR = "tf2tosa.dim_hints"

_STR = r'"((?:[^"\\]|\\.)*)"'


def _unstring(body: str) -> str:
    """The text of an MLIR string literal's body (escapes ``\\XX`` hex, ``\\\\``, ``\\"``)."""
    out = bytearray()
    i = 0
    raw = body.encode("utf-8")
    while i < len(raw):
        if raw[i] == 0x5C and i + 1 < len(raw):
            nxt = raw[i + 1:i + 3]
            if raw[i + 1] in b'"\\':
                out.append(raw[i + 1])
                i += 2
                continue
            try:
                out.append(int(nxt.decode("ascii"), 16))
                i += 3
                continue
            except ValueError:
                pass
        out.append(raw[i])
        i += 1
    return out.decode("utf-8", errors="replace")


def module_dim_facts(text: str) -> tuple[list[str] | None, dict[str, int] | None]:
    """The ``tf2tosa.dim_guards`` and ``tf2tosa.dim_hints`` module attributes of MLIR text (None for each one the
    module does not carry)."""
    guards = hints = None
    m = re.search(re.escape(GUARDS_ATTR) + r"\s*=\s*\[((?:\s*" + _STR + r"\s*,?)*)\]", text)
    if m is not None:
        guards = [_unstring(x) for x in re.findall(_STR, m.group(1))]
    m = re.search(re.escape(HINTS_ATTR) + r"\s*=\s*\{([^}]*)\}", text)
    if m is not None:
        hints = {_unstring(k): int(v) for k, v in re.findall(_STR + r"\s*=\s*(-?\d+)", m.group(1))}
    return guards, hints


__all__ = ["GUARDS_ATTR", "HINTS_ATTR", "module_dim_facts", "to_mlir", "mlir_type"]
