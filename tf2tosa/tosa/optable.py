"""The TOSA 1.0 operator catalogue: the table (validation lives in :mod:`.validation`).

One entry per operator of the TOSA 1.0 specification (cited by section, ``spec 2.3.3 CONV2D``;
``OpSpec.spec_line`` keeps the line of the op's heading in the text the table was transcribed from):
operands in the spec's order with their role, attributes with kinds and defaults, and every row of
the op's "Supported Data Types" table with its profile/extension.  The table was transcribed from
the spec's argument and type tables (the tests re-parse the spec text and compare); changes to the
spec's own text are marked ``errata`` with the section.

Readers: the builder (``infer_result_types`` / ``validate``), the serializer and MLIR printer
(operand order, attribute names), ``profiles.requirements`` (which profiles and extensions a
graph needs) and the executor (dispatch by op name).

Conventions of the IR (see ``tf2tosa/ir``): op name ``tosa.<SPEC NAME>``; zero points are ``[1]``
tensors of the data type; ``shape_t`` operands are values of dtype :attr:`DType.SHAPE` made by
``CONST_SHAPE``; a ``tensor_list`` argument takes all remaining operands (CONCAT, CUSTOM, COND_IF,
WHILE_LOOP); COND_IF/WHILE_LOOP bodies live in ``op.regions``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidGraphError
from ..ir.types import DType

__all__ = ["Arg", "Attr", "TypeRow", "OpSpec", "OPS", "get", "bind_operands", "ACC_TYPES", "TABLE_SIZE", "ENUMS",
           "ATTR_KINDS", "DRAFT_OPS", "DRAFT_VERSION", "is_draft"]


# --------------------------------------------------------------------------------------- data types
@dataclass(frozen=True)
class Arg:
    """An operand or a result of an operator."""

    name: str
    #: "tensor" | "tensor_list" | "shape" | "zp" | "multiplier" | "shift" | "table" | "pad_const"
    role: str
    #: the spec's type placeholder ("in_t", "out_t", "in_out_t", "weight_t", "i8_t", "shape_t" …)
    type_var: str
    #: must be a compile-time constant (CONST/CONST_SHAPE-fed) unless EXT-DYNAMIC (spec 2.1 Operator Arguments)
    ctc: bool = False
    #: fixed rank when the spec fixes it
    rank: int | None = None
    optional: bool = False
    #: smallest rank allowed ("1 to MAX_RANK" in the spec's argument table)
    min_rank: int = 0


@dataclass(frozen=True)
class Attr:
    """An attribute.  ``kind`` is one of ``ATTR_KINDS``."""

    name: str
    kind: str
    default: Any = None
    required: bool = True


ATTR_KINDS = frozenset({"i32", "bool", "i32_list", "acc_type", "rounding_mode", "nan_mode", "resize_mode", "graph",
                        "string", "bytes", "values", "dtype", "scalar"})
#: enumerations (spec 3 Enumerations); RESIZE's text says NEAREST, the enum NEAREST_NEIGHBOR
#: (errata: spec 2.12.1 RESIZE against spec 3.1 resize_mode_t)
ENUMS: dict[str, tuple[str, ...]] = {
    "acc_type": ("INT32", "FP16", "FP32", "INT48"),
    "nan_mode": ("PROPAGATE", "IGNORE"),
    "resize_mode": ("NEAREST_NEIGHBOR", "BILINEAR"),
    "rounding_mode": ("SINGLE_ROUND", "INEXACT_ROUND", "DOUBLE_ROUND"),
}
#: acc_type_t value -> the acc_t element type it names
ACC_TYPES: dict[str, DType] = {"INT32": DType.INT32, "INT48": DType.INT48, "FP16": DType.FP16, "FP32": DType.FP32}
#: TABLE_SIZE column of TABLE's type table (spec 2.5.17 TABLE)
TABLE_SIZE: dict[DType, int] = {DType.INT8: 256, DType.INT16: 513}


@dataclass(frozen=True)
class TypeRow:
    """One row of an op's "Supported Data Types" table."""

    #: alternatives: the row is available with any one of these (("PRO-INT", "PRO-FP") for "PRO-INT or PRO-FP")
    support: tuple[str, ...]
    #: type_var -> element type
    types: dict[str, DType]
    #: further profiles/extensions all needed as well ("EXT-VARIABLE and PRO-FP" -> support PRO-FP, also EXT-VARIABLE)
    also: tuple[str, ...] = ()
    #: the spec's Mode column where it matters (RESIZE: "signed 8, bilinear" …)
    mode: str = ""

    def __str__(self) -> str:
        types = ", ".join(f"{k}={v.value}" for k, v in self.types.items())
        need = " or ".join(self.support) + "".join(f" and {x}" for x in self.also)
        return f"{types or 'any'} ({need})"

    @property
    def requirements(self) -> tuple[str, ...]:
        return self.support + self.also


@dataclass(frozen=True)
class OpSpec:
    name: str
    section: str
    spec_line: int
    inputs: tuple[Arg, ...]
    outputs: tuple[Arg, ...]
    attrs: tuple[Attr, ...]
    rows: tuple[TypeRow, ...]
    attr_map: dict[str, Attr] = field(default_factory=dict, compare=False, repr=False)

    def attr(self, name: str) -> Attr | None:
        return self.attr_map.get(name)

    @property
    def has_list_input(self) -> bool:
        return any(a.role == "tensor_list" for a in self.inputs)

    @property
    def type_vars(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for r in self.rows:
            for k in r.types:
                seen.setdefault(k, None)
        return tuple(seen)


OPS: dict[str, OpSpec] = {}
#: operators of the TOSA 1.1 draft that are not in 1.0 (see the "TOSA 1.1 draft" part of the table); apart from
#: :data:`OPS` so that everything reading the 1.0 catalogue (serializer op codes, profiles, the spec-text tests)
#: is unchanged
DRAFT_OPS: dict[str, OpSpec] = {}
#: the ``specification_version`` a program using :data:`DRAFT_OPS` declares (tosa-opt's spelling)
DRAFT_VERSION = "1.1.draft"


# ------------------------------------------------------------------------------ declaration helpers
def T(name: str, type_var: str, role: str = "tensor", rank: int | None = None, min_rank: int = 0,
      ctc: bool = False, optional: bool = False) -> Arg:
    """A tensor operand/result."""
    if role in ("shift", "multiplier", "table", "pad_const") and rank is None:
        rank = 1
    return Arg(name, role, type_var, ctc, rank, optional, min_rank)


def ZP(name: str, type_var: str, ctc: bool = True) -> Arg:
    """A zero-point operand: a [1] tensor of the data type."""
    return Arg(name, "zp", type_var, ctc, 1)


def S(name: str, ctc: bool = False) -> Arg:
    """A shape_t operand (produced by CONST_SHAPE)."""
    return Arg(name, "shape", "shape_t", ctc, 1)


def L(name: str, type_var: str) -> Arg:
    """A tensor_list_t argument: takes all remaining operands/results."""
    return Arg(name, "tensor_list", type_var)


def A(name: str, kind: str, default: Any = None, required: bool | None = None) -> Attr:
    """An attribute; it is optional when it has a default unless ``required`` says otherwise."""
    assert kind in ATTR_KINDS, kind
    return Attr(name, kind, default, default is None if required is None else required)


#: DType by value: what ``DType(v)`` returns, without the enum call's machinery (~400 rows are built at import)
_DTYPES: dict[str, DType] = {d.value: d for d in DType}


def R(support: str, mode: str = "", **types: str) -> TypeRow:
    """A type row; ``support`` is the spec's Profile/Extension cell verbatim."""
    alts: tuple[str, ...]
    also: tuple[str, ...] = ()
    if " or " in support:
        alts = tuple(s.strip() for s in support.split(" or "))
    else:
        parts = [s.strip() for s in support.split(" and ")]
        profiles = [p for p in parts if p.startswith("PRO-")]
        first = profiles[0] if profiles else parts[0]
        alts, also = (first,), tuple(p for p in parts if p != first)
    return TypeRow(alts, {k: _DTYPES[v] for k, v in types.items() if v != "-"}, also, mode)


def _op(name: str, section: str, line: int, inputs: Sequence[Arg], outputs: Sequence[Arg], attrs: Sequence[Attr],
        rows: Sequence[TypeRow], table: dict[str, OpSpec] = OPS) -> None:
    assert name not in OPS and name not in DRAFT_OPS, name
    table[name] = OpSpec(name, section, line, tuple(inputs), tuple(outputs), tuple(attrs), tuple(rows),
                       {a.name: a for a in attrs})


# ======================================================================================= the table
# Section 2.3 tensor operators ------------------------------------------------------------------
_op("ARGMAX", "2.3.1", 958,
    inputs=[T("input", "in_t", min_rank=1)],
    outputs=[T("output", "out_t")],
    attrs=[A("axis", "i32"), A("nan_mode", "nan_mode", "PROPAGATE")],
    rows=[R("PRO-FP", in_t="fp16", out_t="i32"), R("PRO-FP", in_t="fp32", out_t="i32"),
          R("PRO-INT", in_t="i8", out_t="i32"), R("EXT-BF16", in_t="bf16", out_t="i32"),
          R("EXT-FP8E4M3", in_t="fp8e4m3", out_t="i32"), R("EXT-FP8E5M2", in_t="fp8e5m2", out_t="i32"),
          R("EXT-INT16", in_t="i16", out_t="i32")])
_op("AVG_POOL2D", "2.3.2", 1126,
    inputs=[T("input", "in_out_t", rank=4), ZP("input_zp", "in_out_t", ctc=True),
            ZP("output_zp", "in_out_t", ctc=True)],
    outputs=[T("output", "in_out_t", rank=4)],
    attrs=[A("kernel", "i32_list"), A("stride", "i32_list"), A("pad", "i32_list"), A("acc_type", "acc_type")],
    rows=[R("PRO-FP", in_out_t="fp16", acc_t="fp16"), R("PRO-FP", in_out_t="fp16", acc_t="fp32"),
          R("PRO-FP", in_out_t="fp32", acc_t="fp32"), R("PRO-INT", in_out_t="i8", acc_t="i32"),
          R("EXT-BF16", in_out_t="bf16", acc_t="fp32"), R("EXT-FP8E4M3", in_out_t="fp8e4m3", acc_t="fp16"),
          R("EXT-FP8E5M2", in_out_t="fp8e5m2", acc_t="fp16"), R("EXT-INT16", in_out_t="i16", acc_t="i32")])
_op("CONV2D", "2.3.3", 1376,
    inputs=[T("input", "in_t", rank=4), T("weight", "weight_t", rank=4), T("bias", "out_t", rank=1),
            ZP("input_zp", "in_t", ctc=True), ZP("weight_zp", "weight_t", ctc=True)],
    outputs=[T("output", "out_t", rank=4)],
    attrs=[A("pad", "i32_list"), A("stride", "i32_list"), A("dilation", "i32_list"), A("acc_type", "acc_type"),
           A("local_bound", "bool", False)],
    rows=[R("PRO-FP", in_t="fp16", weight_t="fp16", out_t="fp16", acc_t="fp16"),
          R("PRO-FP", in_t="fp16", weight_t="fp16", out_t="fp16", acc_t="fp32"),
          R("PRO-FP", in_t="fp32", weight_t="fp32", out_t="fp32", acc_t="fp32"),
          R("PRO-INT", in_t="i8", weight_t="i8", out_t="i32", acc_t="i32"),
          R("EXT-BF16", in_t="bf16", weight_t="bf16", out_t="bf16", acc_t="fp32"),
          R("EXT-FP8E4M3", in_t="fp8e4m3", weight_t="fp8e4m3", out_t="fp16", acc_t="fp16"),
          R("EXT-FP8E5M2", in_t="fp8e5m2", weight_t="fp8e5m2", out_t="fp16", acc_t="fp16"),
          R("EXT-INT16", in_t="i16", weight_t="i8", out_t="i48", acc_t="i48"),
          R("EXT-INT4", in_t="i8", weight_t="i4", out_t="i32", acc_t="i32")])
_op("CONV3D", "2.3.4", 1699,
    inputs=[T("input", "in_t", rank=5), T("weight", "weight_t", rank=5), T("bias", "out_t", rank=1),
            ZP("input_zp", "in_t", ctc=True), ZP("weight_zp", "weight_t", ctc=True)],
    outputs=[T("output", "out_t", rank=5)],
    attrs=[A("pad", "i32_list"), A("stride", "i32_list"), A("dilation", "i32_list"), A("acc_type", "acc_type"),
           A("local_bound", "bool", False)],
    rows=[R("PRO-FP", in_t="fp16", weight_t="fp16", out_t="fp16", acc_t="fp16"),
          R("PRO-FP", in_t="fp16", weight_t="fp16", out_t="fp16", acc_t="fp32"),
          R("PRO-FP", in_t="fp32", weight_t="fp32", out_t="fp32", acc_t="fp32"),
          R("PRO-INT", in_t="i8", weight_t="i8", out_t="i32", acc_t="i32"),
          R("EXT-BF16", in_t="bf16", weight_t="bf16", out_t="bf16", acc_t="fp32"),
          R("EXT-FP8E4M3", in_t="fp8e4m3", weight_t="fp8e4m3", out_t="fp16", acc_t="fp16"),
          R("EXT-FP8E5M2", in_t="fp8e5m2", weight_t="fp8e5m2", out_t="fp16", acc_t="fp16"),
          R("EXT-INT16", in_t="i16", weight_t="i8", out_t="i48", acc_t="i48"),
          R("EXT-INT4", in_t="i8", weight_t="i4", out_t="i32", acc_t="i32")])
_op("DEPTHWISE_CONV2D", "2.3.5", 2029,
    inputs=[T("input", "in_t", rank=4), T("weight", "weight_t", rank=4), T("bias", "out_t", rank=1),
            ZP("input_zp", "in_t", ctc=True), ZP("weight_zp", "weight_t", ctc=True)],
    outputs=[T("output", "out_t", rank=4)],
    attrs=[A("pad", "i32_list"), A("stride", "i32_list"), A("dilation", "i32_list"), A("acc_type", "acc_type"),
           A("local_bound", "bool", False)],
    rows=[R("PRO-FP", in_t="fp16", weight_t="fp16", out_t="fp16", acc_t="fp16"),
          R("PRO-FP", in_t="fp16", weight_t="fp16", out_t="fp16", acc_t="fp32"),
          R("PRO-FP", in_t="fp32", weight_t="fp32", out_t="fp32", acc_t="fp32"),
          R("PRO-INT", in_t="i8", weight_t="i8", out_t="i32", acc_t="i32"),
          R("EXT-BF16", in_t="bf16", weight_t="bf16", out_t="bf16", acc_t="fp32"),
          R("EXT-FP8E4M3", in_t="fp8e4m3", weight_t="fp8e4m3", out_t="fp16", acc_t="fp16"),
          R("EXT-FP8E5M2", in_t="fp8e5m2", weight_t="fp8e5m2", out_t="fp16", acc_t="fp16"),
          R("EXT-INT16", in_t="i16", weight_t="i8", out_t="i48", acc_t="i48"),
          R("EXT-INT4", in_t="i8", weight_t="i4", out_t="i32", acc_t="i32")])
_op("FFT2D", "2.3.6", 2352,
    inputs=[T("input_real", "in_out_t", rank=3), T("input_imag", "in_out_t", rank=3)],
    outputs=[T("output_real", "in_out_t", rank=3), T("output_imag", "in_out_t", rank=3)],
    attrs=[A("inverse", "bool"), A("local_bound", "bool", False)],
    rows=[R("EXT-FFT", in_out_t="fp32")])
# errata: spec 2.3.7 MATMUL writes the zero-point ERROR_IF inverted; read as "zero points only for i8"
_op("MATMUL", "2.3.7", 2502,
    inputs=[T("A", "in_t", rank=3), T("B", "in_t", rank=3), ZP("A_zp", "in_t", ctc=True), ZP("B_zp", "in_t", ctc=True)],
    outputs=[T("output", "out_t", rank=3)],
    attrs=[],
    rows=[R("PRO-FP", in_t="fp16", out_t="fp16"), R("PRO-FP", in_t="fp16", out_t="fp32"),
          R("PRO-FP", in_t="fp32", out_t="fp32"), R("PRO-INT", in_t="i8", out_t="i32"),
          R("EXT-BF16", in_t="bf16", out_t="fp32"), R("EXT-FP8E4M3", in_t="fp8e4m3", out_t="fp16"),
          R("EXT-FP8E5M2", in_t="fp8e5m2", out_t="fp16"), R("EXT-INT16", in_t="i16", out_t="i48")])
_op("MAX_POOL2D", "2.3.8", 2681,
    inputs=[T("input", "in_out_t", rank=4)],
    outputs=[T("output", "in_out_t", rank=4)],
    attrs=[A("kernel", "i32_list"), A("stride", "i32_list"), A("pad", "i32_list"),
           A("nan_mode", "nan_mode", "PROPAGATE")],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT", in_out_t="i8"),
          R("EXT-BF16", in_out_t="bf16"), R("EXT-FP8E4M3", in_out_t="fp8e4m3"), R("EXT-FP8E5M2", in_out_t="fp8e5m2"),
          R("EXT-INT16", in_out_t="i16")])
_op("RFFT2D", "2.3.9", 2866,
    inputs=[T("input_real", "in_out_t", rank=3)],
    outputs=[T("output_real", "in_out_t", rank=3), T("output_imag", "in_out_t", rank=3)],
    attrs=[A("local_bound", "bool", False)],
    rows=[R("EXT-FFT", in_out_t="fp32")])
_op("TRANSPOSE_CONV2D", "2.3.10", 2982,
    inputs=[T("input", "in_t", rank=4), T("weight", "weight_t", rank=4), T("bias", "out_t", rank=1),
            ZP("input_zp", "in_t", ctc=True), ZP("weight_zp", "weight_t", ctc=True)],
    outputs=[T("output", "out_t", rank=4)],
    attrs=[A("out_pad", "i32_list"), A("stride", "i32_list"), A("acc_type", "acc_type"),
           A("local_bound", "bool", False)],
    rows=[R("PRO-FP", in_t="fp16", weight_t="fp16", out_t="fp16", acc_t="fp16"),
          R("PRO-FP", in_t="fp16", weight_t="fp16", out_t="fp16", acc_t="fp32"),
          R("PRO-FP", in_t="fp32", weight_t="fp32", out_t="fp32", acc_t="fp32"),
          R("PRO-INT", in_t="i8", weight_t="i8", out_t="i32", acc_t="i32"),
          R("EXT-BF16", in_t="bf16", weight_t="bf16", out_t="bf16", acc_t="fp32"),
          R("EXT-FP8E4M3", in_t="fp8e4m3", weight_t="fp8e4m3", out_t="fp16", acc_t="fp16"),
          R("EXT-FP8E5M2", in_t="fp8e5m2", weight_t="fp8e5m2", out_t="fp16", acc_t="fp16"),
          R("EXT-INT16", in_t="i16", weight_t="i8", out_t="i48", acc_t="i48"),
          R("EXT-INT4", in_t="i8", weight_t="i4", out_t="i32", acc_t="i32")])
# Section 2.4 activation functions ----------------------------------------------------------------
_op("CLAMP", "2.4.1", 3295,
    inputs=[T("input", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    # min_val/max_val have the data type in_out_t (spec 2.4.1 CLAMP); there is no i32 row
    attrs=[A("min_val", "scalar"), A("max_val", "scalar"), A("nan_mode", "nan_mode", "PROPAGATE")],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT", in_out_t="i8"),
          R("EXT-BF16", in_out_t="bf16"), R("EXT-INT16", in_out_t="i16")])
_op("ERF", "2.4.2", 3426,
    inputs=[T("input", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
_op("SIGMOID", "2.4.3", 3516,
    inputs=[T("input", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
_op("TANH", "2.4.4", 3626,
    inputs=[T("input", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
# Section 2.5 elementwise binary operators --------------------------------------------------------
_op("ADD", "2.5.1", 3739,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT or PRO-FP", in_out_t="i32"),
          R("EXT-BF16", in_out_t="bf16")])
_op("ARITHMETIC_RIGHT_SHIFT", "2.5.2", 3846,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[A("round", "bool")],
    rows=[R("PRO-INT", in_out_t="i16"), R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8")])
_op("BITWISE_AND", "2.5.3", 3949,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-INT", in_out_t="i16"), R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8")])
_op("BITWISE_OR", "2.5.4", 4032,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-INT", in_out_t="i16"), R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8")])
_op("BITWISE_XOR", "2.5.5", 4115,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-INT", in_out_t="i16"), R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8")])
_op("INTDIV", "2.5.6", 4198,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-INT or PRO-FP", in_out_t="i32")])
_op("LOGICAL_AND", "2.5.7", 4270,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-INT or PRO-FP", in_out_t="bool")])
_op("LOGICAL_LEFT_SHIFT", "2.5.8", 4341,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-INT or PRO-FP", in_out_t="i16"), R("PRO-INT or PRO-FP", in_out_t="i32"),
          R("PRO-INT or PRO-FP", in_out_t="i8")])
_op("LOGICAL_RIGHT_SHIFT", "2.5.9", 4428,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-INT or PRO-FP", in_out_t="i16"), R("PRO-INT or PRO-FP", in_out_t="i32"),
          R("PRO-INT or PRO-FP", in_out_t="i8")])
_op("LOGICAL_OR", "2.5.10", 4518,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-INT or PRO-FP", in_out_t="bool")])
_op("LOGICAL_XOR", "2.5.11", 4589,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-INT or PRO-FP", in_out_t="bool")])
_op("MAXIMUM", "2.5.12", 4660,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[A("nan_mode", "nan_mode", "PROPAGATE")],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT", in_out_t="i32"),
          R("EXT-BF16", in_out_t="bf16")])
_op("MINIMUM", "2.5.13", 4783,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[A("nan_mode", "nan_mode", "PROPAGATE")],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT", in_out_t="i32"),
          R("EXT-BF16", in_out_t="bf16")])
_op("MUL", "2.5.14", 4906,
    inputs=[T("input1", "in_t"), T("input2", "in_t"), T("shift", "i8_t", role="shift", ctc=True)],
    outputs=[T("output", "out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_t="fp16", out_t="fp16"), R("PRO-FP", in_t="fp32", out_t="fp32"),
          R("PRO-INT", in_t="i16", out_t="i32"), R("PRO-INT or PRO-FP", in_t="i32", out_t="i32"),
          R("PRO-INT", in_t="i8", out_t="i32"), R("EXT-BF16", in_t="bf16", out_t="bf16")])
_op("POW", "2.5.15", 5072,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
_op("SUB", "2.5.16", 5186,
    inputs=[T("input1", "in_out_t"), T("input2", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT or PRO-FP", in_out_t="i32"),
          R("EXT-BF16", in_out_t="bf16")])
# TABLE_SIZE is 256 for i8 and 513 for i16 (spec 2.5.17 TABLE), see TABLE_SIZE
_op("TABLE", "2.5.17", 5291,
    inputs=[T("input1", "in_t"), T("table", "table_t", role="table", ctc=True)],
    outputs=[T("output", "out_t")],
    attrs=[],
    rows=[R("PRO-INT", in_t="i8", table_t="i8", out_t="i8"), R("EXT-INT16", in_t="i16", table_t="i16", out_t="i32")])
# Section 2.6 elementwise unary operators ---------------------------------------------------------
_op("ABS", "2.6.1", 5401,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT", in_out_t="i32"),
          R("EXT-BF16", in_out_t="bf16")])
_op("BITWISE_NOT", "2.6.2", 5502,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-INT", in_out_t="i16"), R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8")])
_op("CEIL", "2.6.3", 5569,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
_op("CLZ", "2.6.4", 5663,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-INT", in_out_t="i32")])
_op("COS", "2.6.5", 5718,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
_op("EXP", "2.6.6", 5814,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
_op("FLOOR", "2.6.7", 5910,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
_op("LOG", "2.6.8", 6004,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
_op("LOGICAL_NOT", "2.6.9", 6100,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-INT or PRO-FP", in_out_t="bool")])
_op("NEGATE", "2.6.10", 6155,
    inputs=[T("input1", "in_out_t"), ZP("input1_zp", "in_out_t", ctc=True), ZP("output_zp", "in_out_t", ctc=True)],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16", acc_t="fp16"), R("PRO-FP", in_out_t="fp32", acc_t="fp32"),
          R("PRO-INT", in_out_t="i16", acc_t="i32"), R("PRO-INT", in_out_t="i32", acc_t="i32"),
          R("PRO-INT", in_out_t="i8", acc_t="i32"), R("EXT-BF16", in_out_t="bf16", acc_t="bf16")])
_op("RECIPROCAL", "2.6.11", 6325,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
_op("RSQRT", "2.6.12", 6419,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
_op("SIN", "2.6.13", 6519,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
# Section 2.7 elementwise ternary operators -------------------------------------------------------
_op("SELECT", "2.7.1", 6617,
    inputs=[T("input1", "bool_t"), T("input2", "in_out_t"), T("input3", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT or PRO-FP", in_out_t="bool"),
          R("PRO-INT", in_out_t="i16"), R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8"),
          R("EXT-BF16", in_out_t="bf16")])
# Section 2.8 comparison operators ----------------------------------------------------------------
_op("EQUAL", "2.8.1", 6751,
    inputs=[T("input1", "in_t"), T("input2", "in_t")],
    outputs=[T("output", "out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_t="fp16", out_t="bool"), R("PRO-FP", in_t="fp32", out_t="bool"),
          R("PRO-INT", in_t="i32", out_t="bool"), R("EXT-BF16", in_t="bf16", out_t="bool")])
_op("GREATER", "2.8.2", 6864,
    inputs=[T("input1", "in_t"), T("input2", "in_t")],
    outputs=[T("output", "out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_t="fp16", out_t="bool"), R("PRO-FP", in_t="fp32", out_t="bool"),
          R("PRO-INT", in_t="i32", out_t="bool"), R("EXT-BF16", in_t="bf16", out_t="bool")])
_op("GREATER_EQUAL", "2.8.3", 6977,
    inputs=[T("input1", "in_t"), T("input2", "in_t")],
    outputs=[T("output", "out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_t="fp16", out_t="bool"), R("PRO-FP", in_t="fp32", out_t="bool"),
          R("PRO-INT", in_t="i32", out_t="bool"), R("EXT-BF16", in_t="bf16", out_t="bool")])
# Section 2.9 reduction operators -----------------------------------------------------------------
_op("REDUCE_ALL", "2.9.1", 7092,
    inputs=[T("input", "in_out_t", min_rank=1)],
    outputs=[T("output", "in_out_t", min_rank=1)],
    attrs=[A("axis", "i32")],
    rows=[R("PRO-INT or PRO-FP", in_out_t="bool")])
_op("REDUCE_ANY", "2.9.2", 7167,
    inputs=[T("input", "in_out_t", min_rank=1)],
    outputs=[T("output", "in_out_t", min_rank=1)],
    attrs=[A("axis", "i32")],
    rows=[R("PRO-INT or PRO-FP", in_out_t="bool")])
_op("REDUCE_MAX", "2.9.3", 7242,
    inputs=[T("input", "in_out_t", min_rank=1)],
    outputs=[T("output", "in_out_t", min_rank=1)],
    attrs=[A("axis", "i32"), A("nan_mode", "nan_mode", "PROPAGATE")],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT", in_out_t="i16"),
          R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8"), R("EXT-BF16", in_out_t="bf16")])
_op("REDUCE_MIN", "2.9.4", 7381,
    inputs=[T("input", "in_out_t", min_rank=1)],
    outputs=[T("output", "in_out_t", min_rank=1)],
    attrs=[A("axis", "i32"), A("nan_mode", "nan_mode", "PROPAGATE")],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT", in_out_t="i16"),
          R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8"), R("EXT-BF16", in_out_t="bf16")])
_op("REDUCE_PRODUCT", "2.9.5", 7520,
    inputs=[T("input", "in_out_t", min_rank=1)],
    outputs=[T("output", "in_out_t", min_rank=1)],
    attrs=[A("axis", "i32")],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("EXT-BF16", in_out_t="bf16")])
_op("REDUCE_SUM", "2.9.6", 7617,
    inputs=[T("input", "in_out_t", min_rank=1)],
    outputs=[T("output", "in_out_t", min_rank=1)],
    attrs=[A("axis", "i32")],
    rows=[R("PRO-FP", in_out_t="fp16", acc_t="fp16"), R("PRO-FP", in_out_t="fp32", acc_t="fp32"),
          R("PRO-INT", in_out_t="i32", acc_t="i32"), R("EXT-BF16", in_out_t="bf16", acc_t="fp32")])
# Section 2.10 data layout ------------------------------------------------------------------------
_op("CONCAT", "2.10.1", 7723,
    inputs=[L("input1", "in_out_t")],
    outputs=[T("output", "in_out_t", min_rank=1)],
    attrs=[A("axis", "i32")],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT or PRO-FP", in_out_t="bool"),
          R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8"), R("EXT-BF16", in_out_t="bf16"),
          R("EXT-FP8E4M3", in_out_t="fp8e4m3"), R("EXT-FP8E5M2", in_out_t="fp8e5m2"), R("EXT-INT16", in_out_t="i16")])
_op("PAD", "2.10.2", 7869,
    inputs=[T("input1", "in_out_t", min_rank=1), S("padding", ctc=True),
            T("pad_const", "in_out_t", role="pad_const", ctc=True)],
    outputs=[T("output", "in_out_t", min_rank=1)],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT or PRO-FP", in_out_t="bool"),
          R("PRO-INT", in_out_t="i16"), R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8"),
          R("EXT-BF16", in_out_t="bf16"), R("EXT-FP8E4M3", in_out_t="fp8e4m3"), R("EXT-FP8E5M2", in_out_t="fp8e5m2")])
_op("RESHAPE", "2.10.3", 8025,
    inputs=[T("input1", "in_out_t"), S("shape", ctc=True)],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT or PRO-FP", in_out_t="bool"),
          R("PRO-INT", in_out_t="i16"), R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8"),
          R("EXT-BF16", in_out_t="bf16"), R("EXT-FP8E4M3", in_out_t="fp8e4m3"), R("EXT-FP8E5M2", in_out_t="fp8e5m2")])
_op("REVERSE", "2.10.4", 8158,
    inputs=[T("input1", "in_out_t", min_rank=1)],
    outputs=[T("output", "in_out_t", min_rank=1)],
    attrs=[A("axis", "i32")],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT or PRO-FP", in_out_t="bool"),
          R("PRO-INT", in_out_t="i16"), R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8"),
          R("EXT-BF16", in_out_t="bf16"), R("EXT-FP8E4M3", in_out_t="fp8e4m3"), R("EXT-FP8E5M2", in_out_t="fp8e5m2")])
_op("SLICE", "2.10.5", 8273,
    inputs=[T("input1", "in_out_t", min_rank=1), S("start", ctc=True), S("size", ctc=True)],
    outputs=[T("output", "in_out_t", min_rank=1)],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT or PRO-FP", in_out_t="bool"),
          R("PRO-INT", in_out_t="i16"), R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8"),
          R("EXT-BF16", in_out_t="bf16"), R("EXT-FP8E4M3", in_out_t="fp8e4m3"), R("EXT-FP8E5M2", in_out_t="fp8e5m2")])
_op("TILE", "2.10.6", 8430,
    inputs=[T("input1", "in_out_t", min_rank=1), S("multiples", ctc=True)],
    outputs=[T("output", "in_out_t", min_rank=1)],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT or PRO-FP", in_out_t="bool"),
          R("PRO-INT", in_out_t="i16"), R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8"),
          R("EXT-BF16", in_out_t="bf16"), R("EXT-FP8E4M3", in_out_t="fp8e4m3"), R("EXT-FP8E5M2", in_out_t="fp8e5m2")])
_op("TRANSPOSE", "2.10.7", 8561,
    inputs=[T("input1", "in_out_t", min_rank=1)],
    outputs=[T("output", "in_out_t", min_rank=1)],
    attrs=[A("perms", "i32_list")],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT or PRO-FP", in_out_t="bool"),
          R("PRO-INT", in_out_t="i16"), R("PRO-INT", in_out_t="i32"), R("PRO-INT", in_out_t="i8"),
          R("EXT-BF16", in_out_t="bf16"), R("EXT-FP8E4M3", in_out_t="fp8e4m3"), R("EXT-FP8E5M2", in_out_t="fp8e5m2")])
# Section 2.11 scatter/gather ---------------------------------------------------------------------
_op("GATHER", "2.11.1", 8700,
    inputs=[T("values", "in_out_t", rank=3), T("indices", "index_t", rank=2)],
    outputs=[T("output", "in_out_t", rank=3)],
    attrs=[],
    rows=[R("PRO-FP", index_t="i32", in_out_t="fp16"), R("PRO-FP", index_t="i32", in_out_t="fp32"),
          R("PRO-INT", index_t="i32", in_out_t="i16"), R("PRO-INT", index_t="i32", in_out_t="i32"),
          R("PRO-INT", index_t="i32", in_out_t="i8"), R("EXT-BF16", index_t="i32", in_out_t="bf16"),
          R("EXT-FP8E4M3", index_t="i32", in_out_t="fp8e4m3"), R("EXT-FP8E5M2", index_t="i32", in_out_t="fp8e5m2")])
_op("SCATTER", "2.11.2", 8825,
    inputs=[T("values_in", "in_out_t", rank=3), T("indices", "index_t", rank=2), T("input", "in_out_t", rank=3)],
    outputs=[T("values_out", "in_out_t", rank=3)],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16", index_t="i32"), R("PRO-FP", in_out_t="fp32", index_t="i32"),
          R("PRO-INT", in_out_t="i16", index_t="i32"), R("PRO-INT", in_out_t="i32", index_t="i32"),
          R("PRO-INT", in_out_t="i8", index_t="i32"), R("EXT-BF16", in_out_t="bf16", index_t="i32"),
          R("EXT-FP8E4M3", in_out_t="fp8e4m3", index_t="i32"), R("EXT-FP8E5M2", in_out_t="fp8e5m2", index_t="i32")])
# Section 2.12 image ------------------------------------------------------------------------------
_op("RESIZE", "2.12.1", 8979,
    inputs=[T("input", "in_t", rank=4), S("scale", ctc=True), S("offset", ctc=True), S("border", ctc=True)],
    outputs=[T("output", "out_t", rank=4)],
    attrs=[A("mode", "resize_mode")],
    rows=[R("PRO-FP", resize_t="fp16", in_t="fp16", out_t="fp16", mode="fp16"),
          R("PRO-FP", resize_t="fp32", in_t="fp32", out_t="fp32", mode="fp32"),
          R("PRO-INT", resize_t="i16", in_t="i8", out_t="i32", mode="signed 8, bilinear"),
          R("PRO-INT", resize_t="i16", in_t="i8", out_t="i8", mode="signed 8, nearest"),
          R("EXT-BF16", resize_t="bf16", in_t="bf16", out_t="bf16", mode="bf16"),
          R("EXT-INT16", resize_t="i16", in_t="i16", out_t="i48", mode="signed 16, bilinear"),
          R("EXT-INT16", resize_t="i16", in_t="i16", out_t="i16", mode="signed 16, nearest")])
# Section 2.13 type conversion --------------------------------------------------------------------
_op("CAST", "2.13.1", 9290,
    inputs=[T("input", "in_t")],
    outputs=[T("output", "out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_t="fp16", out_t="fp32"), R("PRO-FP", in_t="fp16", out_t="i16"),
          R("PRO-FP", in_t="fp16", out_t="i32"), R("PRO-FP", in_t="fp16", out_t="i8"),
          R("PRO-FP", in_t="fp32", out_t="fp16"), R("PRO-FP", in_t="fp32", out_t="i16"),
          R("PRO-FP", in_t="fp32", out_t="i32"), R("PRO-FP", in_t="fp32", out_t="i8"),
          R("PRO-FP", in_t="i16", out_t="fp16"), R("PRO-FP", in_t="i16", out_t="fp32"),
          R("PRO-FP", in_t="i32", out_t="fp16"), R("PRO-FP", in_t="i32", out_t="fp32"),
          R("PRO-FP", in_t="i8", out_t="fp16"), R("PRO-FP", in_t="i8", out_t="fp32"),
          R("PRO-INT", in_t="bool", out_t="i16"), R("PRO-INT", in_t="bool", out_t="i32"),
          R("PRO-INT", in_t="bool", out_t="i8"), R("PRO-INT", in_t="i16", out_t="bool"),
          R("PRO-INT", in_t="i16", out_t="i32"), R("PRO-INT", in_t="i16", out_t="i8"),
          R("PRO-INT", in_t="i32", out_t="bool"), R("PRO-INT", in_t="i32", out_t="i16"),
          R("PRO-INT", in_t="i32", out_t="i8"), R("PRO-INT", in_t="i8", out_t="bool"),
          R("PRO-INT", in_t="i8", out_t="i16"), R("PRO-INT", in_t="i8", out_t="i32"),
          R("EXT-BF16", in_t="bf16", out_t="fp32"), R("EXT-BF16", in_t="bf16", out_t="i16"),
          R("EXT-BF16", in_t="bf16", out_t="i32"), R("EXT-BF16", in_t="bf16", out_t="i8"),
          R("EXT-BF16", in_t="fp32", out_t="bf16"), R("EXT-BF16", in_t="i16", out_t="bf16"),
          R("EXT-BF16", in_t="i32", out_t="bf16"), R("EXT-BF16", in_t="i8", out_t="bf16"),
          R("EXT-BF16 and EXT-FP8E4M3", in_t="bf16", out_t="fp8e4m3"),
          R("EXT-BF16 and EXT-FP8E4M3", in_t="fp8e4m3", out_t="bf16"),
          R("EXT-BF16 and EXT-FP8E5M2", in_t="bf16", out_t="fp8e5m2"),
          R("EXT-BF16 and EXT-FP8E5M2", in_t="fp8e5m2", out_t="bf16"), R("EXT-FP8E4M3", in_t="fp16", out_t="fp8e4m3"),
          R("EXT-FP8E4M3", in_t="fp32", out_t="fp8e4m3"), R("EXT-FP8E4M3", in_t="fp8e4m3", out_t="fp16"),
          R("EXT-FP8E4M3", in_t="fp8e4m3", out_t="fp32"), R("EXT-FP8E5M2", in_t="fp16", out_t="fp8e5m2"),
          R("EXT-FP8E5M2", in_t="fp32", out_t="fp8e5m2"), R("EXT-FP8E5M2", in_t="fp8e5m2", out_t="fp16"),
          R("EXT-FP8E5M2", in_t="fp8e5m2", out_t="fp32")])
# mul_t is i32 when scale32 else i16 (spec 2.13.2 RESCALE); unsigned data is only expressed through
# input/output_unsigned
_op("RESCALE", "2.13.2", 9770,
    inputs=[T("input", "in_t"), T("multiplier", "mul_t", role="multiplier", ctc=True),
            T("shift", "i8_t", role="shift", ctc=True), ZP("input_zp", "in_t", ctc=True),
            ZP("output_zp", "out_t", ctc=True)],
    outputs=[T("output", "out_t")],
    attrs=[A("scale32", "bool"), A("rounding_mode", "rounding_mode"), A("per_channel", "bool"),
           A("input_unsigned", "bool"), A("output_unsigned", "bool")],
    rows=[R("PRO-INT", in_t="i16", out_t="i16"), R("PRO-INT", in_t="i16", out_t="i32"),
          R("PRO-INT", in_t="i16", out_t="i8"), R("PRO-INT", in_t="i32", out_t="i16"),
          R("PRO-INT", in_t="i32", out_t="i32"), R("PRO-INT", in_t="i32", out_t="i8"),
          R("PRO-INT", in_t="i8", out_t="i16"), R("PRO-INT", in_t="i8", out_t="i32"),
          R("PRO-INT", in_t="i8", out_t="i8"), R("EXT-INT16", in_t="i48", out_t="i16"),
          R("EXT-INT16", in_t="i48", out_t="i32"), R("EXT-INT16", in_t="i48", out_t="i8")])
# Section 2.14 data nodes -------------------------------------------------------------------------
_op("CONST", "2.14.1", 10126,
    inputs=[],
    outputs=[T("output", "out_t", ctc=True)],
    attrs=[A("values", "values")],
    rows=[R("PRO-FP", out_t="fp16"), R("PRO-FP", out_t="fp32"), R("PRO-INT or PRO-FP", out_t="i16"),
          R("PRO-INT or PRO-FP", out_t="i32"), R("PRO-INT or PRO-FP", out_t="i8"),
          R("PRO-INT or PRO-FP", out_t="bool"), R("EXT-BF16", out_t="bf16"), R("EXT-FP8E4M3", out_t="fp8e4m3"),
          R("EXT-FP8E5M2", out_t="fp8e5m2"), R("EXT-INT16", out_t="i48"), R("EXT-INT4", out_t="i4")])
_op("IDENTITY", "2.14.2", 10248,
    inputs=[T("input1", "in_out_t")],
    outputs=[T("output", "in_out_t")],
    attrs=[],
    rows=[R("PRO-FP", in_out_t="fp16"), R("PRO-FP", in_out_t="fp32"), R("PRO-INT or PRO-FP", in_out_t="i16"),
          R("PRO-INT or PRO-FP", in_out_t="i32"), R("PRO-INT or PRO-FP", in_out_t="i8"),
          R("PRO-INT or PRO-FP", in_out_t="bool"), R("EXT-BF16", in_out_t="bf16"),
          R("EXT-FP8E4M3", in_out_t="fp8e4m3"), R("EXT-FP8E5M2", in_out_t="fp8e5m2"), R("EXT-INT16", in_out_t="i48"),
          R("EXT-INT4", in_out_t="i4")])
# Section 2.15 custom operators -------------------------------------------------------------------
_op("CUSTOM", "2.15.1", 10366,
    inputs=[L("input_list", "tensor_list_t")],
    outputs=[L("output_list", "tensor_list_t")],
    attrs=[A("operator_name", "string"), A("domain_name", "string"), A("implementation_attrs", "bytes")],
    rows=[R("PRO-INT or PRO-FP", tensor_list_t="-")])
# Section 2.16 control flow (bodies are op.regions) -----------------------------------------------
_op("COND_IF", "2.16.1", 10444,
    inputs=[T("condition", "cond_t"), L("input_list", "tensor_list_t")],
    outputs=[L("output_list", "tensor_list_t")],
    attrs=[A("then_graph", "graph", required=False), A("else_graph", "graph", required=False)],
    rows=[R("EXT-CONTROLFLOW", cond_t="bool")])
_op("WHILE_LOOP", "2.16.2", 10533,
    inputs=[L("input_list", "tensor_list_t")],
    outputs=[L("output_list", "tensor_list_t")],
    attrs=[A("cond_graph", "graph", required=False), A("body_graph", "graph", required=False)],
    rows=[R("EXT-CONTROLFLOW", cond_t="bool")])
# Section 2.17 variable operators -----------------------------------------------------------------
_op("VARIABLE", "2.17.1", 10624,
    inputs=[],
    outputs=[],
    # errata: the IR names a variable by ``name`` (as tosa.fbs does) where the spec has ``uid: i32_t``
    # (spec 2.17.1 VARIABLE)
    attrs=[A("name", "string"), A("var_shape", "i32_list"), A("type", "dtype"),
           A("initial_value", "values", required=False)],
    rows=[R("EXT-VARIABLE and PRO-FP", var_t="fp16"), R("EXT-VARIABLE and PRO-FP", var_t="fp32"),
          R("EXT-VARIABLE and PRO-INT", var_t="i8")])
_op("VARIABLE_WRITE", "2.17.2", 10729,
    # errata: the argument says T<in_t>, the type table var_t (spec 2.17.2 VARIABLE_WRITE, spec 2.17.2 VARIABLE_WRITE)
    inputs=[T("input1", "var_t")],
    outputs=[],
    attrs=[A("name", "string")],
    rows=[R("EXT-VARIABLE and PRO-FP", var_t="fp16"), R("EXT-VARIABLE and PRO-FP", var_t="fp32"),
          R("EXT-VARIABLE and PRO-INT", var_t="i8")])
_op("VARIABLE_READ", "2.17.3", 10807,
    # errata: the argument says T<out_t>, the type table var_t (spec 2.17.3 VARIABLE_READ, spec 2.17.3 VARIABLE_READ)
    inputs=[],
    outputs=[T("output1", "var_t")],
    attrs=[A("name", "string")],
    rows=[R("EXT-VARIABLE and PRO-FP", var_t="fp16"), R("EXT-VARIABLE and PRO-FP", var_t="fp32"),
          R("EXT-VARIABLE and PRO-INT", var_t="i8")])
# Section 2.18 shape operators --------------------------------------------------------------------
_op("CONST_SHAPE", "2.18.1", 10888,
    inputs=[],
    outputs=[S("output", ctc=True)],
    attrs=[A("values", "values")],
    rows=[R("PRO-INT or PRO-FP", shape_t="shape")])


# ============================================================== TOSA 1.1 draft: EXT-SHAPE (shape operators)
# Transcribed from the 1.1 draft (arm/tosa-specification, branch main: tosa.xml "version major=1 minor=1
# draft=true", chapters/shape.adoc, pseudocode/operators/*_SHAPE.tosac, DIM.tosac).  ``section`` names the draft
# chapter ("1.1-draft shape"), ``spec_line`` is 0 (no line of the 1.0 text).  Every shape operand is compile-time
# constant under PRO-INT/PRO-FP alone; EXT-SHAPE (with EXT-DYNAMIC for the tensors it feeds) lifts that.
_DRAFT_SHAPE = "1.1-draft shape"
_SHAPE_ROWS = [R("EXT-SHAPE", shape_t="shape")]


def _shape_binary(name: str) -> None:
    _op(name, _DRAFT_SHAPE, 0, inputs=[S("input1"), S("input2")], outputs=[S("output")], attrs=[],
        rows=_SHAPE_ROWS, table=DRAFT_OPS)


def _shape_unary(name: str) -> None:
    _op(name, _DRAFT_SHAPE, 0, inputs=[S("input")], outputs=[S("output")], attrs=[], rows=_SHAPE_ROWS,
        table=DRAFT_OPS)


for _name in ("ADD_SHAPE", "SUB_SHAPE", "MUL_SHAPE", "DIV_CEIL_SHAPE", "DIV_FLOOR_SHAPE", "MOD_SHAPE", "MIN_SHAPE",
              "MAX_SHAPE"):
    _shape_binary(_name)
for _name in ("EXP2_SHAPE", "LOG2_CEIL_SHAPE", "LOG2_FLOOR_SHAPE"):
    _shape_unary(_name)
del _name
_op("ASSERT_EQUAL_SHAPE", _DRAFT_SHAPE, 0,
    inputs=[S("input1"), S("input2")],
    outputs=[],
    attrs=[A("allow_broadcast", "bool")],
    rows=_SHAPE_ROWS, table=DRAFT_OPS)
# the draft's shape_list_t: all operands, each a shape_t
_op("CONCAT_SHAPE", _DRAFT_SHAPE, 0,
    inputs=[Arg("input", "tensor_list", "shape_t")],
    outputs=[S("output")],
    attrs=[],
    rows=_SHAPE_ROWS, table=DRAFT_OPS)
_op("SLICE_SHAPE", _DRAFT_SHAPE, 0,
    inputs=[S("input"), T("start", "i32_t", rank=1, ctc=True), T("size", "i32_t", rank=1, ctc=True)],
    outputs=[S("output")],
    attrs=[],
    rows=[R("EXT-SHAPE", shape_t="shape", i32_t="i32")], table=DRAFT_OPS)
# DIM's type rows are "<profile> and EXT-SHAPE" (tosa.xml, operator DIM)
_op("DIM", _DRAFT_SHAPE, 0,
    inputs=[T("input1", "in_t", min_rank=1)],
    outputs=[S("output")],
    attrs=[A("axis", "i32")],
    rows=[TypeRow(("PRO-INT", "PRO-FP"), {"in_t": DType.BOOL}, ("EXT-SHAPE",))]
    + [TypeRow((p,), {"in_t": DType(t)}, ("EXT-SHAPE",)) for p, t in (
        ("PRO-INT", "i8"), ("PRO-INT", "i16"), ("PRO-INT", "i32"), ("PRO-FP", "fp16"), ("PRO-FP", "fp32"),
        ("EXT-BF16", "bf16"), ("EXT-FP8E4M3", "fp8e4m3"), ("EXT-FP8E5M2", "fp8e5m2"))],
    table=DRAFT_OPS)



# ======================================================================================= lookup
def get(name: str) -> OpSpec:
    """The spec of ``name`` ("CONV2D" or "tosa.CONV2D"): the 1.0 catalogue, then the 1.1-draft operators
    (:data:`DRAFT_OPS`; writers that emit 1.0 check :func:`is_draft` themselves)."""
    spec = _SPEC_OF.get(name)
    if spec is not None:
        return spec
    key = name.split(".", 1)[1] if name.startswith("tosa.") else name
    spec = OPS.get(key) or DRAFT_OPS.get(key)
    if spec is None:
        raise InvalidGraphError(f"{name}: not a TOSA 1.0 operator (nor one of the 1.1 draft's EXT-SHAPE)", op=name)
    _SPEC_OF[name] = spec
    return spec


#: the spec :func:`get` found for each name asked (the tables are complete once this module is imported)
_SPEC_OF: dict[str, OpSpec] = {}


def is_draft(name: str) -> bool:
    """Whether ``name`` ("DIM" or "tosa.DIM") is an operator of the 1.1 draft only (:data:`DRAFT_OPS`)."""
    return (name.split(".", 1)[1] if name.startswith("tosa.") else name) in DRAFT_OPS



def _err(spec: OpSpec, msg: str, tensor: str | None = None) -> InvalidGraphError:
    return InvalidGraphError(f"{spec.name}: {msg} (spec {spec.section} {spec.name})", op=spec.name, tensor=tensor)


def bind_operands(name: str, types: Sequence[Any], outputs: bool = False) -> list[tuple[Arg, Any]]:
    """Pair each operand (or result) with its Arg; a tensor_list Arg takes the remaining ones.

    Raises InvalidGraphError when the count does not fit.
    """
    items = list(types)
    key = (name, len(items), outputs)
    seq = _BOUND.get(key)
    if seq is None:
        seq = _BOUND[key] = _bound_args(name, len(items), outputs)
    return list(zip(seq, items))


#: the arguments :func:`bind_operands` pairs ``n`` operands (or results) with, by (name, n, outputs)
_BOUND: dict[tuple[str, int, bool], tuple[Arg, ...]] = {}


def _bound_args(name: str, n: int, outputs: bool) -> tuple[Arg, ...]:
    """The argument of each of ``n`` operands (results) of ``name``; raises InvalidGraphError when ``n`` does not
    fit."""
    spec = get(name)
    args = spec.outputs if outputs else spec.inputs
    what = "results" if outputs else "operands"
    lst = [i for i, a in enumerate(args) if a.role == "tensor_list"]
    if lst:
        k = lst[0]
        n_fixed = len(args) - 1
        if n < n_fixed:
            raise _err(spec, f"expects at least {n_fixed} {what}, got {n}")
        return tuple(args[:k]) + (args[k],) * (n - n_fixed) + tuple(args[k + 1:])
    n_req = sum(1 for a in args if not a.optional)
    if not n_req <= n <= len(args):
        exp = str(len(args)) if n_req == len(args) else f"{n_req}..{len(args)}"
        names = ", ".join(a.name for a in args)
        raise _err(spec, f"expects {exp} {what} ({names}), got {n}")
    return tuple(args[:n])

