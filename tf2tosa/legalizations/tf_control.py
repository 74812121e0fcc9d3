"""Rules for TensorFlow's functional control flow and the TensorList ops of its loops (``tf.*``).

``tf.While`` / ``tf.StatelessWhile`` / ``tf.If`` / ``tf.StatelessIf`` / ``tf.(Stateful)PartitionedCall``
    The frontend gives them their FunctionDefs as region graphs (cond, body / then, else); they are lowered by the
    ``tfl.while`` / ``tfl.if`` rules (:mod:`.tfl_control`, through :func:`delegate.via`): a while loop with a trip
    count known at conversion time is unrolled (counters folded to constants in every copy), otherwise it becomes
    ``WHILE_LOOP``; a constant condition inlines its branch, otherwise ``COND_IF`` (EXT-CONTROLFLOW); a call that
    survived freezing is inlined.

TensorLists (``TensorListReserve``, ``TensorListFromTensor``, ``TensorListGetItem``, ``TensorListSetItem``,
``TensorListStack``, ``TensorListLength``, ``TensorListElementShape``)
    A list of ``n`` elements of a static shape ``s`` is carried as one tensor of shape ``[n, *s]``: reserve is a
    zero CONST, from-tensor and stack are that tensor, get-item a SLICE (+ RESHAPE) and set-item a CONCAT of the
    slices around the index and the new element (the "tensor-list write" the ``tfl.while`` unroller flattens into
    one CONCAT of the step outputs).  The index must be a compile-time constant: TensorLists are lowered only in
    the *unrolled* form; a loop whose trip count is not static over a TensorList is reported unsupported (TOSA
    SLICE starts are constants, and there is no dynamic-update op).  Lists that grow (``TensorListPushBack``) are
    not lowered.
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, Value
from ..tosa.builder import Builder
from . import delegate
from .lowering.layout import data_operand, static_shape, tosa_dtype
from .lowering.legalize_common import const_operand
from .registry import legalize

_ANY = ("fp32", "i32", "bool")


# ------------------------------------------------------------------------------------------------ control flow
@legalize("tf.While", "tf.StatelessWhile", dtypes=_ANY)
def while_(b: Builder, op: Operation) -> list[Value]:
    """tfl.while's lowering: unrolled when the trip count is static (≤ max_unroll), else WHILE_LOOP."""
    if len(op.regions) != 2:
        raise Unsupported(f"{op.name} without its cond/body functions")
    try:
        return delegate.via(b, op, "tfl.while", regions=op.regions)
    except Unsupported as e:
        if any(v.dtype is DType.VARIANT for v in op.regions[1].inputs) and "[as a WHILE_LOOP" in e.reason:
            raise e.reworded("a loop over TensorLists is lowered only unrolled (a trip count known at conversion "
                             f"time, at most max_unroll={b.context.max_unroll}); this one is not ({e.reason})"
                             ) from None
        raise


@legalize("tf.If", "tf.StatelessIf", dtypes=_ANY)
def if_(b: Builder, op: Operation) -> list[Value]:
    """tfl.if's lowering: a constant condition inlines its branch, else COND_IF."""
    if len(op.regions) != 2:
        raise Unsupported(f"{op.name} without its then/else functions")
    return delegate.via(b, op, "tfl.if", regions=op.regions)


@legalize("tf.PartitionedCall", "tf.StatefulPartitionedCall", dtypes=_ANY)
def call(b: Builder, op: Operation) -> list[Value]:
    """A call the freezing inliner left (a callee marked not to inline, e.g. Keras 3's jit-compiled grouped
    convolution): its FunctionDef, given by the frontend as the op's region, inlined (tfl.call's lowering)."""
    if len(op.regions) != 1:
        raise Unsupported(f"{op.name} without its function")
    return delegate.via(b, op, "tfl.call", regions=op.regions)


# --------------------------------------------------------------------------------------------------- TensorLists
def _element_shape(op: Operation, k: int) -> list[int] | None:
    """The constant element_shape operand ``k`` (None when unknown: rank -1)."""
    arr = np.asarray(const_operand(op, k, "element_shape")).reshape(-1)
    if arr.size == 1 and int(arr[0]) == -1 and np.asarray(op.operands[k].const()).ndim == 0:
        return None
    return [int(d) for d in arr]


def _reserved(v: Value) -> tuple[int, list[int] | None, DType] | None:
    """(size, element shape with -1 for unknown dimensions or None for an unknown rank, element type) of a list
    that TensorListReserve made without a static element shape (kept as that op until the first
    TensorListSetItem shows the shape)."""
    p = v.producer
    if p is None or p.name != "tf.TensorListReserve":
        return None
    elem = _element_shape(p, 0)
    n = int(np.asarray(const_operand(p, 1, "num_elements")).reshape(-1)[0])
    dt = p.attrs.get("element_dtype")
    if n <= 0 or not isinstance(dt, DType) or not dt.is_tosa:
        raise Unsupported(f"TensorListReserve of {n} elements of shape {elem} and type {dt}: the list needs a "
                          "known size, rank and element type")
    return n, elem, tosa_dtype(dt)


def _list(op: Operation, k: int = 0) -> Value:
    """Operand ``k`` as a list tensor ``[n, *element]`` (a TensorList the rules below made)."""
    v = op.operands[k]
    if _reserved(v) is not None:
        raise Unsupported(f"TensorList {v.source or v.name} is read before an element is set, and its element "
                          "shape is not static")
    if v.dtype is DType.VARIANT or not v.type.is_static or v.type.rank < 1:
        raise Unsupported(f"TensorList {v.source or v.name} does not come from TensorListReserve or "
                          "TensorListFromTensor with static shapes")
    return v


def _index(op: Operation, k: int, n: int) -> int:
    c = op.operands[k].const()
    if c is None:
        raise Unsupported("TensorList index is not a compile-time constant (TensorLists are lowered only in "
                          "unrolled loops: the trip count must be static)")
    i = int(np.asarray(c).reshape(-1)[0])
    if not 0 <= i < n:
        raise Unsupported(f"TensorList index {i} is outside the list of {n} elements")
    return i


@legalize("tf.TensorListReserve", dtypes=_ANY)
def list_reserve(b: Builder, op: Operation) -> list[Value]:
    """A zero CONST of shape [num_elements, *element_shape] (unknown dimensions: from the first write).

    With unknown dimensions in the element shape (a dynamic batch when traced, a TensorArray without
    element_shape) the op stays until TensorListSetItem writes the first element, whose shape fixes the list's."""
    got = _reserved(op.result)
    assert got is not None
    n, elem, out = got
    if elem is None or any(d < 0 for d in elem):
        return [op.result]
    return [b.const(np.zeros([n, *elem], out.np_dtype()), out, name=b.name_hint or "tensor_list")]


@legalize("tf.TensorListFromTensor", dtypes=_ANY)
def list_from_tensor(b: Builder, op: Operation) -> list[Value]:
    """The tensor itself (its leading axis indexes the list)."""
    x = data_operand(b, op.operands[0])
    if not x.type.is_static or x.type.rank < 1:
        raise Unsupported(f"TensorListFromTensor of a tensor of shape {list(x.shape)}")
    return [x]


@legalize("tf.TensorListStack", dtypes=_ANY)
def list_stack(b: Builder, op: Operation) -> list[Value]:
    """The list tensor itself."""
    x = _list(op)
    n = int(op.attrs.get("num_elements", -1) or -1)
    if n >= 0 and n != static_shape(x)[0]:
        raise Unsupported(f"TensorListStack of {n} elements from a list of {static_shape(x)[0]}")
    return [x]


@legalize("tf.TensorListGetItem", dtypes=_ANY)
def list_get_item(b: Builder, op: Operation) -> list[Value]:
    """SLICE of element ``index`` (a compile-time constant), RESHAPE to the element shape."""
    x = _list(op)
    shape = static_shape(x)
    i = _index(op, 1, shape[0])
    part = b.slice(x, [i] + [0] * (len(shape) - 1), [1, *shape[1:]])
    return [b.reshape(part, shape[1:])]


@legalize("tf.TensorListSetItem", dtypes=_ANY)
def list_set_item(b: Builder, op: Operation) -> list[Value]:
    """CONCAT of the elements before ``index``, the new one and those after (``index`` a compile-time constant)."""
    item = data_operand(b, op.operands[2])
    reserved = _reserved(op.operands[0])
    if reserved is not None:  # the first write into a list of unknown element shape: zeros around the item
        n, elem, dt = reserved
        got = static_shape(item)
        if elem is not None and (len(got) != len(elem) or any(e not in (-1, d) for e, d in zip(elem, got))):
            raise Unsupported(f"TensorListSetItem of an element of shape {got} into a list of {elem}")
        x = b.const(np.zeros([n, *got], dt.np_dtype()), dt, name="tensor_list")
    else:
        x = _list(op)
    shape = static_shape(x)
    i = _index(op, 1, shape[0])
    if not item.type.is_static or int(np.prod(static_shape(item))) != int(np.prod(shape[1:])):
        raise Unsupported(f"TensorListSetItem of an element of shape {list(item.shape)} into a list of "
                          f"{shape[1:]}")
    if item.dtype is not x.dtype:
        raise Unsupported(f"TensorListSetItem of a {item.dtype.value} element into a {x.dtype.value} list")
    parts: list[Value] = []
    rest = [0] * (len(shape) - 1)
    if i > 0:
        parts.append(b.slice(x, [0, *rest], [i, *shape[1:]]))
    parts.append(b.reshape(item, [1, *shape[1:]]))
    if i + 1 < shape[0]:
        parts.append(b.slice(x, [i + 1, *rest], [shape[0] - i - 1, *shape[1:]]))
    if len(parts) == 1:
        return parts
    return [b.emit("CONCAT", parts, {"axis": 0}).result]


@legalize("tf.TensorListLength", dtypes=_ANY)
def list_length(b: Builder, op: Operation) -> list[Value]:
    """The number of elements as a rank-0 i32 CONST."""
    return [b.const(np.asarray(static_shape(_list(op))[0], np.int32), DType.INT32)]


@legalize("tf.TensorListElementShape", dtypes=_ANY)
def list_element_shape(b: Builder, op: Operation) -> list[Value]:
    """The element shape as an i32 CONST (an int64 shape_type narrowed)."""
    return [b.const(np.asarray(static_shape(_list(op))[1:], np.int32), DType.INT32)]


# ------------------------------------------------------------------------------------------ resource variables
@legalize("tf.VarHandleOp", dtypes=_ANY)
def var_handle(b: Builder, op: Operation) -> list[Value]:
    """A variable kept by ``--keep-variables`` (the frontend's handle): tfl.var_handle's lowering."""
    return delegate.via(b, op, "tfl.var_handle", [])


@legalize("tf.ReadVariableOp", dtypes=_ANY)
def read_variable(b: Builder, op: Operation) -> list[Value]:
    """tfl.read_variable's lowering: VARIABLE_READ (EXT-VARIABLE) of an assigned variable, else a CONST.

    A variable the model never assigns is read as a CONST of its value at load time."""
    return delegate.via(b, op, "tfl.read_variable", op.operands[:1])


@legalize("tf.AssignVariableOp", dtypes=_ANY)
def assign_variable(b: Builder, op: Operation) -> list[Value]:
    """tfl.assign_variable's lowering: VARIABLE_WRITE (EXT-VARIABLE)."""
    return delegate.via(b, op, "tfl.assign_variable", op.operands[:2])


@legalize("tf.AssignAddVariableOp", "tf.AssignSubVariableOp", dtypes=_ANY)
def assign_update_variable(b: Builder, op: Operation) -> list[Value]:
    """The variable read (tfl.read_variable's lowering), ADD / SUB of the value, written back (VARIABLE_WRITE)."""
    handle, x = op.operands[0], op.operands[1]
    x = data_operand(b, x)
    old = delegate.via(b, op, "tfl.read_variable", [handle], results=[x])[0]
    if old.dtype is not x.dtype:
        raise Unsupported(f"{op.name} of a {x.dtype.value} value to a {old.dtype.value} variable")
    new = b.binary("ADD" if op.name == "tf.AssignAddVariableOp" else "SUB", old, x)
    return delegate.via(b, op, "tfl.assign_variable", [handle, new])
