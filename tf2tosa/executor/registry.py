"""Kernel registry, execution errors and small helpers shared by the kernels.

Kernels are keyed by the TOSA 1.0 specification op name (``CONV2D``) and have the
signature ``fn(op, inputs) -> list[np.ndarray]``.  Array conventions: each value is
a numpy array in its :meth:`DType.np_dtype` storage type (i48 and shape_t in int64,
i4 in int8, bf16/fp8 through ml_dtypes).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ConversionError
from ..ir.graph import Operation
from ..ir.types import DType
from ..tosa import optable

Kernel = Callable[[Operation, list[np.ndarray]], list[np.ndarray]]

#: spec op name (``CONV2D``) -> kernel
KERNELS: dict[str, Kernel] = {}
#: the kernels as :func:`kernel` registered them: the runner's fused and prepared paths reproduce these, and are
#: taken only while :data:`KERNELS` still holds them (see :func:`kernels_as_registered`)
_REGISTERED: dict[str, Kernel] = {}


def kernels_as_registered() -> bool:
    """True while every entry of :data:`KERNELS` is the kernel :func:`kernel` registered (none replaced or added)."""
    return KERNELS == _REGISTERED


#: graph result states of the specification (spec 1.10.1 TOSA Graph Compliance)
VALID, ERROR, UNPREDICTABLE = "VALID", "ERROR", "UNPREDICTABLE"


class ExecutionError(ConversionError):
    """A graph could not be run: an ERROR_IF or REQUIRE of the specification failed, or a kernel failed.

    ``status`` is the spec's graph result the failure stands for: ``"ERROR"`` (tosa_error: an ERROR_IF,
    or a graph/attribute/input that does not meet the operator's requirements) or ``"UNPREDICTABLE"``
    (tosa_unpredictable: a REQUIRE or LEVEL_CHECK failed).  ``message`` is the text without the location.
    """

    status: str = ERROR

    def __init__(self, message: str, *, op: str | None = None, tensor: str | None = None,
                 file: str | None = None) -> None:
        self.message = message
        super().__init__(message, op=op, tensor=tensor, file=file)

    def at(self, op: str) -> ExecutionError:
        """The same error (same class) located at ``op``."""
        return type(self)(self.message, op=op, tensor=self.tensor, file=self.file)


class ErrorIfError(ExecutionError):
    """An ERROR_IF of the specification held: the graph is illegal (tosa_error)."""

    status = ERROR


class UnpredictableError(ExecutionError):
    """A REQUIRE (or LEVEL_CHECK) of the specification failed: the result is unpredictable."""

    status = UNPREDICTABLE


def kernel(*names: str) -> Callable[[Kernel], Kernel]:
    """Register ``fn`` as the kernel of each spec op name in ``names``."""

    def deco(fn: Kernel) -> Kernel:
        for n in names:
            if n in KERNELS:
                raise ValueError(f"kernel {n} registered twice")
            KERNELS[n] = _REGISTERED[n] = fn
        return fn

    return deco


def op_label(op: Operation) -> str:
    res = ",".join(r.name for r in op.results)
    return f"{op.name}#{op.id}" + (f" ({op.location})" if op.location else "") + (f" -> {res}" if res else "")


def error_if(cond: Any, op: Operation, msg: str) -> None:
    """Spec ERROR_IF: raise when ``cond`` holds (``cond`` may be an array: any element)."""
    if cond if isinstance(cond, bool) else bool(np.any(cond)):
        raise ErrorIfError(f"ERROR_IF violated: {msg}", op=op_label(op))


def require(cond: Any, op: Operation, msg: str) -> None:
    """Spec REQUIRE: raise unless ``cond`` holds for every element."""
    if not (cond if isinstance(cond, bool) else bool(np.all(cond))):
        raise UnpredictableError(f"REQUIRE violated (result unpredictable): {msg}", op=op_label(op))


def out_dtype(op: Operation, i: int = 0) -> DType:
    return op.results[i].type.dtype


def in_dtype(op: Operation, i: int = 0) -> DType:
    return op.operands[i].type.dtype


def np_out(op: Operation, i: int = 0) -> np.dtype:
    return out_dtype(op, i).np_dtype()


def attr(op: Operation, name: str, default: Any = None) -> Any:
    if name in op.attrs:
        return op.attrs[name]
    if default is None:
        raise ErrorIfError(f"missing attribute {name!r}", op=op_label(op))
    return default


def _operand_index(name: str) -> dict[str, int | slice]:
    spec = optable.get(name)
    index: dict[str, int | slice] = {}
    args = spec.inputs
    k = next((i for i, a in enumerate(args) if a.role == "tensor_list"), None)
    for i, a in enumerate(args):
        if k is None or i < k:
            index[a.name] = i
        elif i == k:
            n_after = len(args) - k - 1
            index[a.name] = slice(k, -n_after if n_after else None)
        else:
            index[a.name] = i - len(args)  # counted from the end
    return index


class Args:
    """An op's operands and attributes by their catalogue names (``args.input``, ``args.weight``,
    ``args.input_zp``, ``args.stride``).

    An operand name gives the array (an absent optional operand gives None; a tensor_list argument
    gives the list).  An attribute name gives the op's value, else the catalogue default; a missing
    attribute without a default raises :class:`ErrorIfError`, like :func:`attr`.  :func:`bind`
    returns an instance of a subclass made once per op, whose names are properties (fast to read).
    """

    __slots__ = ("_op", "_ins")

    def __init__(self, op: Operation, ins: list[np.ndarray]) -> None:
        self._op = op
        self._ins = ins

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"{self._op.opcode} has no operand or attribute {name!r}")

    def attr(self, name: str) -> Any:
        """Attribute ``name``: the op's value or the catalogue default."""
        return catalogue_attr(self._op, name)


def _operand(i: int) -> property:
    def get(self: Args) -> Any:
        ins = self._ins
        return ins[i] if -len(ins) <= i < len(ins) else None
    return property(get)


def _operand_list(sl: slice) -> property:
    return property(lambda self: self._ins[sl])


def _attribute(name: str) -> property:
    return property(lambda self: catalogue_attr(self._op, name))


#: per op name: the :class:`Args` subclass with one property per catalogue operand and attribute
_BINDERS: dict[str, type[Args]] = {}


def _binder(opcode: str) -> type[Args]:
    spec = optable.get(opcode)
    ns: dict[str, Any] = {"__slots__": ()}
    for name, idx in _operand_index(opcode).items():
        ns[name] = _operand_list(idx) if isinstance(idx, slice) else _operand(idx)
    for a in spec.attrs:
        ns.setdefault(a.name, _attribute(a.name))
    cls = type(f"{opcode}_Args", (Args,), ns)
    _BINDERS[opcode] = cls
    return cls


def catalogue_attr(op: Operation, name: str) -> Any:
    """Attribute ``name`` of ``op``: its value, else the catalogue default; a missing attribute without a
    default raises :class:`ErrorIfError` (like :func:`attr`)."""
    if name in op.attrs:
        return op.attrs[name]
    a = optable.get(op.opcode).attr_map.get(name)
    if a is None:
        raise AttributeError(f"{op.opcode} has no operand or attribute {name!r}")
    if a.default is None:
        raise ErrorIfError(f"missing attribute {name!r}", op=op_label(op))
    return a.default


def bind(op: Operation, ins: list[np.ndarray]) -> Args:
    """``op``'s operand arrays ``ins`` and its attributes, by catalogue name (see :class:`Args`)."""
    opcode = op.opcode
    return (_BINDERS.get(opcode) or _binder(opcode))(op, ins)


def int_list(v: Any) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)]


def scalar(a: np.ndarray) -> Any:
    """The single element of a [1] (or rank-0) array, as a Python number."""
    flat = np.asarray(a).reshape(-1)
    return flat[0].item()


def is_float(dt: DType) -> bool:
    return dt.is_float


#: precise mode: float ops compute and store in fp64, like the reference model's ``precise_mode``
PRECISE: contextvars.ContextVar[bool] = contextvars.ContextVar("tf2tosa_precise", default=False)


def fdt() -> type[np.floating[Any]]:
    """numpy float type kernels compute in: float32, or float64 in precise mode."""
    return np.float64 if PRECISE.get() else np.float32


def to_out(x: np.ndarray, op: Operation, i: int = 0) -> np.ndarray:
    """Cast a kernel result to the storage type of result ``i``."""
    dt = np_out(op, i)
    if PRECISE.get() and op.results[i].type.dtype.is_float:
        dt = np.dtype(np.float64)
    x = np.asarray(x)
    if x.dtype != dt:
        with np.errstate(over="ignore", invalid="ignore"):
            x = x.astype(dt)
    return x
