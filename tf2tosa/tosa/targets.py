"""Target checks: everything a TOSA program uses that a target (an NPU compiler or a spec profile) cannot take.

Targets (:data:`TARGETS`):

* ``pro-int-8k`` / ``pro-fp-8k``: the TOSA 1.0 profile alone (no extensions) at level 8K (spec 1.6 Profiles,
  1.7 Levels);
* ``ethos-u85``: what Vela 5.2 takes for Ethos-U85 from a ``.tosa`` file (Vela's SUPPORTED_OPS.md, "Ethos-U85
  TOSA Operator Support"): TOSA 1.0 PRO-INT at level 8K with EXT-INT16, EXT-INT4, EXT-DOUBLEROUND and
  EXT-CONTROLFLOW (and EXT-INEXACTROUND, which Vela compiles although its list leaves it out); not
  TRANSPOSE_CONV2D or CONV3D with weights or bias that are not constants.  EXT-VARIABLE is listed although Vela
  compiles it: Vela turns VARIABLE_READ/VARIABLE_WRITE into copies, so the state is lost between inferences;
* ``ethos-u55``: Vela's "Ethos-U55 and Ethos-U65 TOSA" section: PRO-INT 8K with EXT-INT16, EXT-INT4 and
  EXT-DOUBLEROUND, its list of unsupported operators and the per-operator data type, kernel and stride limits.
* ``vulkan-ml``: what Arm's ML SDK for Vulkan model converter 0.11.0 (``model-converter``, TOSA -> VGF) takes,
  measured on a graph per type row of every operator (``tests/test_vulkan_target.py``): PRO-INT and PRO-FP with
  every extension but EXT-CONTROLFLOW ("failed to legalize operation 'tosa.cond_if' that was explicitly marked
  illegal", the same for ``tosa.while_loop``) and EXT-VARIABLE ("'tosa.variable_read' op ... has not been declared
  by 'tosa.variable'"); no CUSTOM; non-constant operands (EXT-DYNAMIC) only where they are not zero points ("cannot
  retrieve the zero points from op"); level 8K.  Of the level's limits the converter itself refuses a rank above
  MAX_RANK (its SPIR-V tensors have rank 1..6); the others (kernel, stride, scale, size, list length) it passes on
  unchecked, and they are reported because the Vulkan ML extensions run TOSA at level 8K.

:func:`check` returns one :class:`Problem` per op and rule, naming the op and a tensor and, where one exists,
the option that fixes it (``--io int`` for float QUANTIZE/DEQUANTIZE at the model's edges, ``--rounding single``
for EXT-DOUBLEROUND, ``--input-shape`` for EXT-DYNAMIC, ``--max-unroll`` for a WHILE_LOOP, the if-conversion
(:mod:`tf2tosa.converter.passes.if_conversion`, run by a conversion for a target without EXT-CONTROLFLOW) for a
COND_IF).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidGraphError
from ..ir.graph import Graph, Operation, Value
from ..ir.types import DType
from .optable import bind_operands
from .profiles import LEVEL_8K, level_violations, op_requirements, walk

__all__ = ["TARGETS", "Problem", "Target", "check", "takes_control_flow"]

#: options the fixes name (kept in one place so the messages match the command line)
FIX_IO_INT = "--io int (integer inputs and outputs: the QUANTIZE/DEQUANTIZE at the model's edges move to the host)"
FIX_ROUNDING = "--rounding single"
FIX_STATE = "--state-io (each variable becomes a state input/output pair: the host carries the state)"
FIX_DYNAMIC = "--input-shape NAME=DIMS (static shapes)"
FIX_UNROLL = "--max-unroll N (unroll a loop with a static trip count)"
FIX_IF = ("convert the source model with --target {target} (if-conversion: a COND_IF whose branches have no side "
          "effects becomes both branches and SELECT)")


@dataclass(frozen=True)
class Problem:
    """One thing the target cannot take."""

    #: "profile" | "extension" | "level" | "operator"
    rule: str
    #: the op (``tosa.CONV2D#12 (CONV_2D#3)``), or ``graph input`` for a graph input
    op: str
    tensor: str | None
    message: str
    fix: str | None = None

    def __str__(self) -> str:
        where = f"{self.op}" + (f" [tensor {self.tensor}]" if self.tensor else "")
        return f"{where}: {self.message}" + (f" (fix: {self.fix})" if self.fix else "")

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "op": self.op, "tensor": self.tensor, "message": self.message, "fix": self.fix}


OpRule = Callable[[Operation], Iterator[str]]


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    profile: str
    extensions: frozenset[str]
    level: dict[str, int] = field(default_factory=lambda: dict(LEVEL_8K))
    #: per-operator limits of the target beyond the profile (yields one message per broken limit)
    op_rule: OpRule | None = None
    #: further profiles the target takes besides ``profile``
    more_profiles: frozenset[str] = frozenset()
    #: the largest convolution dilation the target runs natively (0: any); a larger one is rewritten for it
    #: (:mod:`tf2tosa.converter.passes.dilation`) as a smaller dilation of a kernel at most ``max_kernel`` wide
    max_dilation: int = 0
    max_kernel: int = 0
    #: an int8 row maximum (softmax's) runs cheaper as TRANSPOSE + MAX_POOL2D than as REDUCE_MAX
    #: (:func:`tf2tosa.quant.elementwise.row_max_index`)
    row_max_by_pool: bool = False
    #: an int8 transposed convolution runs cheaper as one CONV2D per output phase, interleaved
    #: (:func:`tf2tosa.legalizations.tfl_nn.transpose_conv`)
    split_transpose_conv: bool = False
    #: a 256-entry int32 lookup (the int8 softmax's exp) runs cheaper as two i16 TABLEs (EXT-INT16) than as four
    #: i8 TABLEs (:func:`tf2tosa.quant.elementwise.lookup_i32`)
    i16_tables: bool = False
    #: elementwise ops between RESHAPEs run at the rank of the tensors reshaped (a 1-D convolution network's
    #: residual sums kept 4-D: no RESHAPE copies; :mod:`tf2tosa.converter.passes.lift_reshapes`)
    lift_reshapes: bool = False
    #: DEPTH_TO_SPACE / SPACE_TO_DEPTH run cheaper as SLICE + CONCAT + RESHAPE (no TRANSPOSE), a DEPTH_TO_SPACE
    #: after a convolution as one convolution per row phase (:mod:`tf2tosa.legalizations.lowering.depth_space`)
    depth_space_by_concat: bool = False


def _label(op: Operation) -> str:
    return f"{op.name}#{op.id}" + (f" ({op.location})" if op.location else "")


def _tensor(op: Operation) -> str | None:
    if op.results:
        return op.results[0].name
    return op.operands[0].name if op.operands else None


# ------------------------------------------------------------------------------------------ Vela's limits
def _is_const(v: Value) -> bool:
    return v.producer is not None and v.producer.opcode in ("CONST", "CONST_SHAPE")


def _u85_rule(op: Operation) -> Iterator[str]:
    """Vela 5.2, Ethos-U85 TOSA: "Unsupported operators"."""
    if op.opcode in ("TRANSPOSE_CONV2D", "CONV3D"):
        for role, v in zip(("weights", "bias"), op.operands[1:3]):
            if not _is_const(v):
                yield f"{op.opcode} with {role} that are not a constant ({v.name}) is not supported by Vela"


_U55_UNSUPPORTED = frozenset({
    "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "BITWISE_NOT", "INTDIV", "LOGICAL_AND", "LOGICAL_RIGHT_SHIFT",
    "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_NOT", "SELECT", "EQUAL", "GREATER", "GREATER_EQUAL", "REDUCE_ALL",
    "REDUCE_ANY", "GATHER", "SCATTER"})
#: the operators of Vela's Ethos-U55/U65 TOSA summary table (any other is not supported)
_U55_SUPPORTED = frozenset({
    "ABS", "ADD", "ARGMAX", "ARITHMETIC_RIGHT_SHIFT", "AVG_POOL2D", "CAST", "CLAMP", "CLZ", "CONCAT", "CONST",
    "CONST_SHAPE", "CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "IDENTITY", "LOGICAL_LEFT_SHIFT", "MATMUL", "MAXIMUM",
    "MAX_POOL2D", "MINIMUM", "MUL", "NEGATE", "PAD", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_SUM", "RESCALE",
    "RESHAPE", "RESIZE", "REVERSE", "SLICE", "SUB", "TABLE", "TILE", "TRANSPOSE", "TRANSPOSE_CONV2D"})
_I8_16_32 = (DType.INT8, DType.INT16, DType.INT32)


def _ints(v: Any) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)] if v is not None else []


def _u55_rule(op: Operation) -> Iterator[str]:
    """Vela 5.2, Ethos-U55 and Ethos-U65 TOSA: the unsupported list and the specific operator constraints."""
    code, a = op.opcode, op.attrs
    ins = [v.type.dtype for v in op.operands]
    outs = [v.type.dtype for v in op.results]
    if code in _U55_UNSUPPORTED or code not in _U55_SUPPORTED:
        yield f"{code} is not supported by Vela on Ethos-U55"
        return
    if code in ("ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT") and (ins[0] is not DType.INT32):
        yield f"{code} takes int32 only on Ethos-U55"
    if code == "ARITHMETIC_RIGHT_SHIFT" and not a.get("round", False):
        yield "ARITHMETIC_RIGHT_SHIFT with round=false is not supported on Ethos-U55"
    if code == "TABLE" and ins[0] is not DType.INT8:
        yield "TABLE takes int8 only on Ethos-U55"
    if code in ("AVG_POOL2D", "MAX_POOL2D", "CONV2D", "DEPTHWISE_CONV2D", "CONV3D"):
        if any(s < 1 or s > 3 for s in _ints(a.get("stride"))[:2]):
            yield f"{code} stride {_ints(a.get('stride'))} is outside 1..3 on Ethos-U55"
    if code in ("AVG_POOL2D", "MAX_POOL2D"):
        ky, kx = (_ints(a.get("kernel")) + [1, 1])[:2]
        padded = any(_ints(a.get("pad")))
        if code == "AVG_POOL2D" and padded and not (1 <= kx <= 8 and 1 <= ky <= 8):
            yield f"AVG_POOL2D with padding takes kernels up to 8x8 on Ethos-U55 (kernel {ky}x{kx})"
        elif not (1 <= kx * ky <= 65536 and 1 <= ky <= 256):
            yield f"{code} kernel {ky}x{kx} is outside Vela's limits on Ethos-U55"
    if code in ("CONV2D", "DEPTHWISE_CONV2D") and len(op.operands) > 1:
        w = op.operands[1].type.static_shape
        ky, kx = (w[0], w[1]) if code == "DEPTHWISE_CONV2D" else (w[1], w[2])
        if not (1 <= kx * ky <= 4096 and 1 <= ky <= 64):
            yield f"{code} kernel {ky}x{kx} is outside Vela's limits on Ethos-U55 (kx*ky <= 4096, ky <= 64)"
    if code == "TRANSPOSE_CONV2D" and tuple(_ints(a.get("stride"))) not in ((1, 1), (2, 2), (1, 2), (2, 1)):
        yield f"TRANSPOSE_CONV2D stride {_ints(a.get('stride'))} is not supported on Ethos-U55"
    if code in ("TRANSPOSE_CONV2D", "CONV3D"):
        yield from _u85_rule(op)
    if code == "MATMUL" and (ins[0] is not DType.INT8):
        yield "MATMUL takes int8 x int8 only on Ethos-U55"
    if code in ("REDUCE_MAX", "REDUCE_MIN") and ins[0] not in (DType.INT8, DType.INT16):
        yield f"{code} takes int8/int16 only on Ethos-U55"
    if code in ("CONCAT", "RESHAPE", "SLICE", "TILE", "PAD") and ins and ins[0] not in _I8_16_32:
        yield f"{code} of {ins[0].value} is not supported on Ethos-U55"
    if code == "TRANSPOSE" and ins[0] not in _I8_16_32:
        yield f"TRANSPOSE of {ins[0].value} is not supported on Ethos-U55"
    if code == "TRANSPOSE" and ins[0] is DType.INT32 and op.operands[0].type.rank > 4:
        yield "TRANSPOSE of int32 takes rank <= 4 on Ethos-U55"
    if code == "REVERSE" and ins[0] not in (DType.INT8, DType.INT16):
        yield f"REVERSE of {ins[0].value} is not supported on Ethos-U55"
    if code == "CAST" and (DType.BOOL in ins + outs or (ins[0] is DType.INT32 and outs[0].bits < 32)):
        yield f"CAST {ins[0].value} -> {outs[0].value} is not supported on Ethos-U55"
    if code == "ARGMAX" and op.operands[0].type.rank and int(a.get("axis", -1)) != op.operands[0].type.rank - 1:
        yield "ARGMAX takes the channel axis only on Ethos-U55"
    if code == "RESCALE" and DType.INT48 in ins:
        producer = op.operands[0].producer
        if producer is None or producer.opcode not in ("CONV2D", "DEPTHWISE_CONV2D", "CONV3D", "TRANSPOSE_CONV2D"):
            yield "RESCALE of int48 that does not follow a convolution is not supported on Ethos-U55"


# ------------------------------------------------------------------------------------------ Vulkan ML
def _vulkan_rule(op: Operation) -> Iterator[str]:
    """Arm's model converter 0.11.0 (measured): no CUSTOM, no zero point that is not a constant."""
    if op.opcode == "CUSTOM":
        yield "CUSTOM is not supported by the model converter (failed to legalize operation 'tosa.custom')"
        return
    for arg, v in bind_operands(op.opcode, list(op.operands)):
        if arg.role == "zp" and not v.is_const:
            yield (f"{op.opcode} zero point {arg.name} ({v.name}) is not a constant: the model converter cannot "
                   "retrieve it")


TARGETS: dict[str, Target] = {
    # EXT-INEXACTROUND is not in Vela's list, but Vela 5.2 compiles an INEXACT_ROUND RESCALE (measured)
    "ethos-u85": Target("ethos-u85", "Arm Ethos-U85 through Vela 5.2 (TOSA 1.0 PRO-INT 8K input)", "PRO-INT",
                        frozenset({"EXT-INT16", "EXT-INT4", "EXT-DOUBLEROUND", "EXT-INEXACTROUND",
                                   "EXT-CONTROLFLOW"}),
                        op_rule=_u85_rule, max_dilation=2, max_kernel=64, row_max_by_pool=True,
                        split_transpose_conv=True, i16_tables=True, lift_reshapes=True,
                        depth_space_by_concat=True),
    "ethos-u55": Target("ethos-u55", "Arm Ethos-U55/U65 through Vela 5.2 (TOSA 1.0 PRO-INT 8K input)", "PRO-INT",
                        frozenset({"EXT-INT16", "EXT-INT4", "EXT-DOUBLEROUND"}), op_rule=_u55_rule,
                        max_dilation=2, max_kernel=64, row_max_by_pool=True,
                        split_transpose_conv=True, lift_reshapes=True),
    "vulkan-ml": Target("vulkan-ml", "Vulkan ML extensions through Arm's ML SDK model converter 0.11.0 (TOSA 1.0 "
                        "PRO-INT and PRO-FP 8K input, no EXT-CONTROLFLOW or EXT-VARIABLE)", "PRO-INT",
                        frozenset({"EXT-INT16", "EXT-INT4", "EXT-BF16", "EXT-FP8E4M3", "EXT-FP8E5M2", "EXT-FFT",
                                   "EXT-DOUBLEROUND", "EXT-INEXACTROUND", "EXT-DYNAMIC"}),
                        op_rule=_vulkan_rule, more_profiles=frozenset({"PRO-FP"})),
    "pro-int-8k": Target("pro-int-8k", "TOSA 1.0 PRO-INT at level 8K, no extensions", "PRO-INT", frozenset()),
    "pro-fp-8k": Target("pro-fp-8k", "TOSA 1.0 PRO-FP at level 8K, no extensions", "PRO-FP", frozenset()),
}


def takes_control_flow(name: str) -> bool:
    """Whether the target ``name`` takes EXT-CONTROLFLOW (COND_IF, WHILE_LOOP); an unknown name takes none."""
    target = TARGETS.get(name)
    return target is not None and "EXT-CONTROLFLOW" in target.extensions


#: opcodes TFLite's QUANTIZE/DEQUANTIZE lower to (float <-> integer conversion at a model's edge), for graphs
#: whose ops carry no source location
_EDGE_OPS = frozenset({"CAST", "MUL", "ADD", "SUB", "CLAMP", "RESHAPE", "IDENTITY", "FLOOR", "CEIL", "RECIPROCAL",
                       "MAXIMUM", "MINIMUM", "CONST", "CONST_SHAPE", "RESCALE", "ABS", "NEGATE", "SELECT",
                       "GREATER", "GREATER_EQUAL", "EQUAL"})
#: source ops (the ``location`` our converter records) that convert between float and integer
_EDGE_SOURCES = ("QUANTIZE#", "DEQUANTIZE#")


def _is_conversion(op: Operation) -> bool:
    if op.location:
        return op.location.startswith(_EDGE_SOURCES)
    return op.opcode in _EDGE_OPS


def _edge_float_ops(graph: Graph) -> set[int]:
    """ids of float ops that only convert between float graph inputs/outputs and an integer body: the float
    parts of the graph that touch a graph input or output and hold nothing but conversion arithmetic."""
    def is_float(op: Operation) -> bool:
        return any(v.type.dtype.is_float for v in (*op.operands, *op.results))

    float_ops = {op.id: op for op in graph.topological_order() if is_float(op) and op.opcode not in ("CONST",)}
    io = {v.id for v in (*graph.inputs, *graph.outputs)}
    seen: set[int] = set()
    edge: set[int] = set()
    for start in float_ops:
        if start in seen:
            continue
        comp, stack = set(), [start]
        while stack:
            oid = stack.pop()
            if oid in comp:
                continue
            comp.add(oid)
            op = float_ops[oid]
            for v in (*op.operands, *op.results):
                if not v.type.dtype.is_float:
                    continue
                neighbours = [v.producer] if v.producer is not None else []
                neighbours += [u for u, _ in v.uses]
                stack.extend(n.id for n in neighbours if n.id in float_ops and n.id not in comp)
        seen |= comp
        ops = [float_ops[i] for i in comp]
        touches_io = any(v.id in io for op in ops for v in (*op.operands, *op.results))
        if touches_io and all(_is_conversion(op) for op in ops):
            edge |= comp
    return edge


def _dtypes(op: Operation) -> list[str]:
    return sorted({v.type.dtype.value for v in (*op.operands, *op.results) if v.type.dtype is not DType.SHAPE})


def _extension_fix(ext: str, op: Operation) -> str | None:
    if ext == "EXT-DOUBLEROUND":
        return FIX_ROUNDING
    if ext == "EXT-VARIABLE":
        return FIX_STATE
    if ext == "EXT-DYNAMIC":
        return FIX_DYNAMIC
    if ext == "EXT-CONTROLFLOW" and op.opcode == "WHILE_LOOP":
        return FIX_UNROLL
    return None


def check(graph: Graph, target: str | Target) -> list[Problem]:
    """Everything in ``graph`` that ``target`` (a :data:`TARGETS` name or a :class:`Target`) cannot take, in
    program order: per op the profile, the extensions and the target's own operator limits, then the level."""
    if isinstance(target, str):
        if target not in TARGETS:
            raise InvalidGraphError(f"unknown target {target!r} (choose from {', '.join(TARGETS)})")
        target = TARGETS[target]
    problems: list[Problem] = []
    edge = _edge_float_ops(graph)
    other = "PRO-FP" if target.profile == "PRO-INT" else "PRO-INT"
    taken = {target.profile, *target.more_profiles}
    left_ifs = {(e["op"], e["tensor"]): e["reason"] for e in (graph.record.if_conversion or {}).get("refused", [])}
    for op, _depth in walk(graph):
        if op.dialect != "tosa":
            problems.append(Problem("profile", _label(op), _tensor(op), f"{op.name} is not a TOSA operator"))
            continue
        if op.opcode in ("CONST", "CONST_SHAPE"):
            # a constant takes the profile of the ops that read it; Vela checks it with them
            continue
        try:
            alts, required = op_requirements(op)
        except InvalidGraphError as e:
            problems.append(Problem("profile", _label(op), _tensor(op), e.message))
            continue
        profiles = {r for r in required if r.startswith("PRO-")}
        wrong_profile = not (taken & profiles) and bool(profiles or (alts and not taken & set(alts)))
        if wrong_profile:
            in_edge = op.id in edge
            problems.append(Problem(
                "profile", _label(op), _tensor(op),
                f"{op.opcode} on {', '.join(_dtypes(op))} "
                f"needs {other}; {target.name} takes {target.profile} only"
                + (" (a float conversion at the model's edge)" if in_edge else ""),
                FIX_IO_INT if in_edge and target.profile == "PRO-INT" else None))
        for ext in sorted(r for r in required if r.startswith("EXT-")):
            if ext not in target.extensions:
                lost = (" (Vela compiles VARIABLE_READ/VARIABLE_WRITE as copies: the state would be lost between "
                        "inferences)" if ext == "EXT-VARIABLE" and target.name.startswith("ethos") else "")
                fix = _extension_fix(ext, op)
                if ext == "EXT-CONTROLFLOW" and op.opcode == "COND_IF":
                    left = left_ifs.get((_label(op), _tensor(op)))
                    lost += f" (the if-conversion left it: {left})" if left else ""
                    fix = None if left else FIX_IF.format(target=target.name)
                problems.append(Problem("extension", _label(op), _tensor(op),
                                        f"{op.opcode} needs {ext}, which {target.name} does not take{lost}", fix))
        if target.op_rule is not None and not wrong_profile:
            for msg in target.op_rule(op):
                problems.append(Problem("operator", _label(op), _tensor(op), msg))
    for msg in level_violations(graph, target.level):
        where, _, what = msg.partition(": ")
        problems.append(Problem("level", where, None, f"level 8K: {what}"))
    return problems
