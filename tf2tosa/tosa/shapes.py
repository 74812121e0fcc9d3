"""Result-shape rules of the TOSA 1.0 operators and the spec's shape ERROR_IFs.

``result_shapes`` computes the output shapes of an op from its operand types, attributes and the
values of its constant ``shape_t`` operands (RESHAPE, SLICE, TILE, PAD, RESIZE).  Every ERROR_IF
of the spec's operation functions that can be decided from shapes, attributes and constants is
raised as :class:`InvalidGraphError` (``spec 2.3.3 CONV2D`` cites the spec's section).  ``check_shapes`` does the
same and compares with the result types an op declares.

Symbolic dimensions (strings, dynamic-shape RFC) pass through where the rule is the identity or a
broadcast; any arithmetic on them yields the symbol ``"?"``.  Where a rule needs two dimensions to match and one
of them is symbolic, the match cannot be decided statically: :func:`equalities` returns those pairs (the
program's run-time equalities, ``graph.dims.equalities``); a broadcast pair holds unless one side is 1 at run
time (the RFC's broadcast rule, ASSERT_EQUAL_SHAPE with allow_broadcast).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidGraphError
from ..ir.symdim import is_symbolic, same_size, size
from ..ir.types import Dim, TensorType
from ..ir.widened import Widened
from . import optable

Shape = tuple[Dim, ...]
Consts = Sequence[np.ndarray | None]
_Rule = Callable[[str, list[TensorType], dict[str, Any], Consts], list[Shape | None]]

#: ops whose single output has the shape of operand 0
_SAME_AS_INPUT = frozenset({
    "CLAMP", "ERF", "SIGMOID", "TANH", "TABLE", "ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS", "EXP", "FLOOR", "LOG",
    "LOGICAL_NOT", "NEGATE", "RECIPROCAL", "RSQRT", "SIN", "CAST", "RESCALE", "IDENTITY",
})
#: elementwise binary ops: output = broadcast_shape(shape1, shape2) (spec 4.4.6 broadcast_shape)
_BINARY = frozenset({
    "ADD", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "INTDIV", "LOGICAL_AND",
    "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "LOGICAL_OR", "LOGICAL_XOR", "MAXIMUM", "MINIMUM", "MUL", "POW",
    "SUB", "EQUAL", "GREATER", "GREATER_EQUAL",
})
_REDUCE = frozenset({"REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PRODUCT", "REDUCE_SUM"})
#: spec line of each op's shape ERROR_IFs, for messages
#: ops whose shape ERROR_IFs are cited with the op's spec section
_CITED = frozenset({"AVG_POOL2D", "MAX_POOL2D", "CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D", "FFT2D",
                    "RFFT2D", "ARGMAX", "CONCAT", "PAD", "RESHAPE", "REVERSE", "SLICE", "TILE", "TRANSPOSE", "RESIZE",
                    "SELECT", "COND_IF", "WHILE_LOOP"})


def _err(op: str, msg: str, tensor: str | None = None) -> InvalidGraphError:
    cited = op in _CITED and op not in _REDUCE
    where = f" (spec {optable.get(op).section} {op})" if cited and "(spec " not in msg else ""
    return InvalidGraphError(f"{op}: {msg}{where}", op=op, tensor=tensor)


def _sh(t: TensorType) -> tuple[Any, ...]:
    """A shape with dims typed Any (ints, or symbol strings that the rules check with _known)."""
    return tuple(t.shape)


def _int(d: Dim) -> bool:
    return isinstance(d, int)


def _known(*ds: Dim) -> bool:
    return all(isinstance(d, int) for d in ds)


def _ints(op: str, attrs: dict[str, Any], name: str, n: int) -> list[int]:
    v = attrs.get(name)
    if v is None:
        raise _err(op, f"missing attribute {name}")
    vals = [int(x) for x in np.asarray(v).reshape(-1)]
    if len(vals) != n:
        raise _err(op, f"attribute {name} must have {n} values, has {len(vals)}")
    return vals


def _axis(op: str, attrs: dict[str, Any], rank: int, limit: int | None = None) -> int:
    axis = attrs.get("axis")
    if axis is None:
        raise _err(op, "missing attribute axis")
    axis = int(axis)
    hi = rank if limit is None else limit
    if axis < 0 or axis >= hi:
        raise _err(op, f"axis={axis} out of range [0, {hi})")
    return axis


def idiv_check(op: str, a: int, b: int, what: str) -> int:
    """The spec's idiv_check (spec 4.5.4 idiv_check): exact division or ERROR_IF."""
    if a % b != 0:
        raise _err(op, f"{what}: {a} is not a multiple of {b} (idiv_check)")
    return a // b


def _const_list(c: np.ndarray | None) -> list[int] | None:
    if c is None:
        return None
    return [size(x) for x in np.asarray(c).reshape(-1)]


# ---------------------------------------------------------------------------------------- rules
#: the equalities noted while a rule runs under :func:`equalities`: (a, b, broadcast)
_NOTED: contextvars.ContextVar[list[tuple[Dim, Dim, bool]] | None] = contextvars.ContextVar("tf2tosa_dim_eq",
                                                                                            default=None)


def _note(a: Dim, b: Dim, broadcast: bool = False) -> None:
    """Record that ``a`` must equal ``b`` at run time (when it is not decidable now)."""
    noted = _NOTED.get()
    if noted is None or a == b or _known(a, b) or "?" in (a, b) or a is None or b is None:
        return
    pair = (a, b, broadcast)
    if pair not in noted:
        noted.append(pair)


def broadcast_shape(op: str, s1: Shape, s2: Shape) -> Shape:
    """broadcast_shape of spec 4.4.6 broadcast_shape: equal ranks, size-1 dims broadcast."""
    if len(s1) != len(s2):
        raise _err(op, f"operands must have equal rank: {list(s1)} vs {list(s2)} (spec 4.4.6 broadcast_shape)")
    out: list[Dim] = []
    for a, b in zip(s1, s2):
        if is_symbolic(a) or is_symbolic(b):
            # dynamic-shape RFC broadcast: a size against 1 is that size (no condition); two different expressions
            # must be equal at run time (the comparison records that equality as a guard)
            if same_size(b, 1) or same_size(a, b):
                out.append(a)
                continue
            if same_size(a, 1):
                out.append(b)
                continue
        if a == 1:
            out.append(b)
        elif b == 1 or a == b:
            out.append(a)
        elif _known(a, b):
            raise _err(op, f"shapes {list(s1)} and {list(s2)} do not broadcast (spec 4.4.6 broadcast_shape)")
        else:
            _note(a, b, broadcast=True)
            out.append(a if isinstance(a, int) else b)
    return tuple(out)


def _pool(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    n, ih, iw, c = _sh(ins[0])
    ky, kx = _ints(op, attrs, "kernel", 2)
    sy, sx = _ints(op, attrs, "stride", 2)
    pt, pb, pl, pr = _ints(op, attrs, "pad", 4)
    if ky < 1 or kx < 1:
        raise _err(op, f"kernel {[ky, kx]} must be >= 1")
    if sy < 1 or sx < 1:
        raise _err(op, f"stride {[sy, sx]} must be >= 1")
    if min(pt, pb, pl, pr) < 0:
        raise _err(op, f"pad {[pt, pb, pl, pr]} must be >= 0")
    if pr >= kx or pl >= kx or pt >= ky or pb >= ky:
        raise _err(op, f"pad {[pt, pb, pl, pr]} must be smaller than kernel {[ky, kx]}")
    oh: Dim = idiv_check(op, ih + pt + pb - ky, sy, "output height") + 1 if _int(ih) else "?"
    ow: Dim = idiv_check(op, iw + pl + pr - kx, sx, "output width") + 1 if _int(iw) else "?"
    return [(n, oh, ow, c)]


def _conv_out(op: str, i: Dim, k: Dim, pad0: int, pad1: int, d: int, s: int, what: str) -> Dim:
    if not _known(i, k):
        return "?"
    assert isinstance(i, int) and isinstance(k, int)
    return idiv_check(op, i - 1 + pad0 + pad1 - (k - 1) * d, s, what) + 1


def _conv_common(op: str, attrs: dict[str, Any], nd: int) -> tuple[list[int], list[int], list[int]]:
    pad = _ints(op, attrs, "pad", 2 * nd)
    stride = _ints(op, attrs, "stride", nd)
    dil = _ints(op, attrs, "dilation", nd)
    if min(pad) < 0:
        raise _err(op, f"pad {pad} must be >= 0")
    if min(stride) < 1:
        raise _err(op, f"stride {stride} must be >= 1")
    if min(dil) < 1:
        raise _err(op, f"dilation {dil} must be >= 1")
    return pad, stride, dil


def _match(op: str, a: Dim, b: Dim, what: str) -> None:
    if _known(a, b) and a != b:
        raise _err(op, f"{what}: {a} != {b}")
    _note(a, b)


def _bias(op: str, bc: Dim, oc: Dim) -> None:
    if _known(bc, oc) and bc != oc and bc != 1:
        raise _err(op, f"bias has {bc} channels; must be {oc} or 1")


def _conv2d(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    n, ih, iw, ic = _sh(ins[0])
    oc, kh, kw, wic = _sh(ins[1])
    (pt, pb, pl, pr), (sy, sx), (dy, dx) = _conv_common(op, attrs, 2)
    _match(op, ic, wic, "input channels of input and weight differ")
    _bias(op, _sh(ins[2])[0], oc)
    oh = _conv_out(op, ih, kh, pt, pb, dy, sy, "output height")
    ow = _conv_out(op, iw, kw, pl, pr, dx, sx, "output width")
    return [(n, oh, ow, oc)]


def _conv3d(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    n, id_, ih, iw, ic = _sh(ins[0])
    oc, kd, kh, kw, wic = _sh(ins[1])
    (p0, p1, pt, pb, pl, pr), (sd, sy, sx), (dd, dy, dx) = _conv_common(op, attrs, 3)
    _match(op, ic, wic, "input channels of input and weight differ")
    _bias(op, _sh(ins[2])[0], oc)
    od = _conv_out(op, id_, kd, p0, p1, dd, sd, "output depth")
    oh = _conv_out(op, ih, kh, pt, pb, dy, sy, "output height")
    ow = _conv_out(op, iw, kw, pl, pr, dx, sx, "output width")
    return [(n, od, oh, ow, oc)]


def _depthwise(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    n, ih, iw, c = _sh(ins[0])
    kh, kw, wc, m = _sh(ins[1])
    (pt, pb, pl, pr), (sy, sx), (dy, dx) = _conv_common(op, attrs, 2)
    _match(op, c, wc, "channels of input and weight [KH,KW,C,M] differ")
    cm: Dim = c * m if _known(c, m) else "?"
    _bias(op, _sh(ins[2])[0], cm)
    oh = _conv_out(op, ih, kh, pt, pb, dy, sy, "output height")
    ow = _conv_out(op, iw, kw, pl, pr, dx, sx, "output width")
    return [(n, oh, ow, cm)]


def _transpose_conv(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    n, ih, iw, ic = _sh(ins[0])
    oc, kh, kw, wic = _sh(ins[1])
    pt, pb, pl, pr = _ints(op, attrs, "out_pad", 4)
    sy, sx = _ints(op, attrs, "stride", 2)
    _match(op, ic, wic, "input channels of input and weight differ")
    _bias(op, _sh(ins[2])[0], oc)
    if _int(kh) and (pt <= -kh or pb <= -kh):
        raise _err(op, f"out_pad top/bottom {[pt, pb]} must be > -KH={-kh}")
    if _int(kw) and (pl <= -kw or pr <= -kw):
        raise _err(op, f"out_pad left/right {[pl, pr]} must be > -KW={-kw}")
    if sy < 1 or sx < 1:
        raise _err(op, f"stride {[sy, sx]} must be >= 1")
    oh: Dim = (ih - 1) * sy + pt + pb + kh if _known(ih, kh) else "?"  # spec 2.3.10 TRANSPOSE_CONV2D
    ow: Dim = (iw - 1) * sx + pl + pr + kw if _known(iw, kw) else "?"  # spec 2.3.10 TRANSPOSE_CONV2D
    return [(n, oh, ow, oc)]


def _pow2(op: str, d: Any, what: str) -> None:
    if _int(d) and (d < 1 or d & (d - 1)):
        raise _err(op, f"{what}={d} must be a power of two")


def _fft2d(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    s = _sh(ins[0])
    if len(ins) > 1:
        for a, b in zip(s, _sh(ins[1])):
            _match(op, a, b, "input_real and input_imag shapes differ")
    _pow2(op, s[1], "H")
    _pow2(op, s[2], "W")
    return [s, s]


def _rfft2d(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    n, h, w = _sh(ins[0])
    _pow2(op, h, "H")
    _pow2(op, w, "W")
    ow: Dim = w // 2 + 1 if _int(w) else "?"
    return [(n, h, ow), (n, h, ow)]


def _matmul(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    n, h, c = _sh(ins[0])
    n2, c2, w = _sh(ins[1])
    _match(op, n, n2, "batch of A and B differ")
    _match(op, c, c2, "A is [N,H,C] and B [N,C,W]: C differs")
    return [(n if _int(n) else n2, h, w)]


def _argmax(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    s = _sh(ins[0])
    axis = _axis(op, attrs, len(s))
    return [s[:axis] + s[axis + 1:]]


def _reduce(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    s = _sh(ins[0])
    axis = _axis(op, attrs, len(s))
    return [s[:axis] + (1,) + s[axis + 1:]]  # the reduced dim stays, with size 1


def _same(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    return [_sh(ins[0])]


def _binary(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    return [broadcast_shape(op, _sh(ins[0]), _sh(ins[1]))]


def _select(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    return [broadcast_shape(op, broadcast_shape(op, _sh(ins[0]), _sh(ins[1])), _sh(ins[2]))]


def _concat(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    if not ins:
        raise _err(op, "needs at least one input")
    s0 = _sh(ins[0])
    axis = _axis(op, attrs, len(s0), max(1, len(s0)))
    total: Any = 0
    for k, t in enumerate(ins):
        if t.rank != len(s0):
            raise _err(op, f"input {k} has rank {t.rank}, input 0 rank {len(s0)}")
        for i, (a, b) in enumerate(zip(t.shape, s0)):
            if i != axis:
                _match(op, a, b, f"input {k} dim {i} differs from input 0")
        d = _sh(t)[axis]
        total = total + d if _known(total, d) else "?"
    return [s0[:axis] + (total,) + s0[axis + 1:]]


def _pad(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    s = _sh(ins[0])
    p = _const_list(consts[1] if len(consts) > 1 else None)
    if p is None:
        return [None]
    if len(p) != 2 * len(s):
        raise _err(op, f"padding has {len(p)} values; must be 2*rank = {2 * len(s)}")
    if any(n < 0 for n in p):
        raise _err(op, f"padding {p} must be >= 0 (spec 2.10.2 PAD)")
    return [tuple(d + p[2 * i] + p[2 * i + 1] if _int(d) else "?" for i, d in enumerate(s))]


def _reshape(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    new = _const_list(consts[1] if len(consts) > 1 else None)
    if new is None:
        return [None]
    if any(d < 1 for d in new):
        raise _err(op, f"new shape {new} has a dimension < 1 (no -1 or 0 in TOSA 1.0, spec 1.11.1 Tensors)")
    s = _sh(ins[0])
    if all(_int(d) for d in s) and int(np.prod(s, dtype=np.int64)) != int(np.prod(new, dtype=np.int64)):
        raise _err(op, f"cannot reshape {list(s)} ({int(np.prod(s, dtype=np.int64))} elements) to {new} "
                       f"({int(np.prod(new, dtype=np.int64))} elements)")
    return [tuple(new)]


def _reverse(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    _axis(op, attrs, ins[0].rank)
    return [_sh(ins[0])]


def _slice(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    s = _sh(ins[0])
    start = _const_list(consts[1] if len(consts) > 1 else None)
    size = _const_list(consts[2] if len(consts) > 2 else None)
    for nm, v in (("start", start), ("size", size)):
        if v is not None and len(v) != len(s):
            raise _err(op, f"{nm} has {len(v)} values; input rank is {len(s)}")
    if start is not None and any(b < 0 for b in start):  # per element: a size compared with 0, not another size
        raise _err(op, f"start {start} must be >= 0")
    if size is not None and any(n <= 0 for n in size):
        raise _err(op, f"size {size} must be > 0")
    if start is not None and size is not None:
        for i, (b, n, d) in enumerate(zip(start, size, s)):
            if _int(d) and b + n > d:
                raise _err(op, f"start+size {b}+{n} exceeds dim {i} of size {d} (spec 2.10.5 SLICE)")
    return [tuple(size) if size is not None else None]


def _tile(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    s = _sh(ins[0])
    m = _const_list(consts[1] if len(consts) > 1 else None)
    if m is None:
        return [None]
    if len(m) != len(s):
        raise _err(op, f"multiples has {len(m)} values; input rank is {len(s)}")
    if any(k < 1 for k in m):  # per element (min() would compare sizes with each other: spurious guards)
        raise _err(op, f"multiples {m} must be >= 1")
    return [tuple(d * k if _int(d) else "?" for d, k in zip(s, m))]


def _transpose(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    s = _sh(ins[0])
    perms = attrs.get("perms")
    if perms is None:
        raise _err(op, "missing attribute perms")
    p = [int(x) for x in np.asarray(perms).reshape(-1)]
    if len(p) != len(s):
        raise _err(op, f"perms {p} must have rank(input1)={len(s)} entries")
    if sorted(p) != list(range(len(s))):
        raise _err(op, f"perms {p} is not a permutation of 0..{len(s) - 1} (spec 2.10.7 TRANSPOSE)")
    return [tuple(s[i] for i in p)]


def _gather(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    n, _k, c = _sh(ins[0])
    n2, w = _sh(ins[1])
    _match(op, n, n2, "N of values [N,K,C] and indices [N,W] differ")
    return [(n, w, c)]


def _scatter(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    n, k, c = _sh(ins[0])
    n2, w = _sh(ins[1])
    n3, w3, c3 = _sh(ins[2])
    _match(op, n, n2, "N of values_in and indices differ")
    _match(op, n, n3, "N of values_in and input differ")
    _match(op, w, w3, "W of indices and input differ")
    _match(op, c, c3, "C of values_in and input differ")
    return [(n, k, c)]


def _resize(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    n, ih, iw, c = _sh(ins[0])
    scale = _const_list(consts[1] if len(consts) > 1 else None)
    offset = _const_list(consts[2] if len(consts) > 2 else None)
    border = _const_list(consts[3] if len(consts) > 3 else None)
    if scale is None or offset is None or border is None:
        return [None]
    for nm, v, k in (("scale", scale, 4), ("offset", offset, 2), ("border", border, 2)):
        if len(v) != k:
            raise _err(op, f"{nm} must have {k} values, has {len(v)}")
    yn, yd, xn, xd = scale
    oy, ox = offset
    by, bx = border
    if min(scale) <= 0:
        raise _err(op, f"scale {scale} must be > 0 (spec 2.12.1 RESIZE)")
    if yn > (1 << 11) or xn > (1 << 11):
        raise _err(op, f"scale numerators {yn},{xn} must be <= 2048 (spec 2.12.1 RESIZE)")
    if yd >= 16 * yn or xd >= 16 * xn:
        raise _err(op, f"downscale by 16 or more is not allowed: scale {scale} (spec 2.12.1 RESIZE)")
    if oy < -yn or oy >= 16 * yn or ox < -xn or ox >= 16 * xn:
        raise _err(op, f"offset {offset} out of range for scale {scale} (spec 2.12.1 RESIZE)")
    if by < -16 * yn or by >= yn or bx < -16 * xn or bx >= xn:
        raise _err(op, f"border {border} out of range for scale {scale} (spec 2.12.1 RESIZE)")
    oh: Any = idiv_check(op, (ih - 1) * yn - oy + by, yd, "output height") + 1 if _int(ih) else "?"
    ow: Any = idiv_check(op, (iw - 1) * xn - ox + bx, xd, "output width") + 1 if _int(iw) else "?"
    if _known(oh, ow, ih, iw) and any(n >= 16384 for n in (oh, ow, ih, iw)):
        raise _err(op, f"sizes must be < 16384: input {ih}x{iw}, output {oh}x{ow} (spec 2.12.1 RESIZE)")
    if _known(oh, ow) and (oh < 1 or ow < 1):
        raise _err(op, f"output size {oh}x{ow} < 1")
    return [(n, oh, ow, c)]


def _cond_if(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    cond = ins[0]
    if cond.is_static and cond.size != 1:
        raise _err(op, f"condition must have exactly one element, has shape {list(cond.shape)}")
    return []


def _while(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    return [t.shape for t in ins]


def _none(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    return []


def _const(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    vals = attrs.get("values")
    if vals is None:
        return [None]
    arr = vals if isinstance(vals, Widened) else np.asarray(vals)  # (a Widened's shape without its values)
    return [(int(arr.size),) if op == "CONST_SHAPE" else tuple(arr.shape)]


_RULES: dict[str, _Rule] = {
    "ARGMAX": _argmax, "AVG_POOL2D": _pool, "MAX_POOL2D": _pool, "CONV2D": _conv2d, "CONV3D": _conv3d,
    "DEPTHWISE_CONV2D": _depthwise, "TRANSPOSE_CONV2D": _transpose_conv, "FFT2D": _fft2d, "RFFT2D": _rfft2d,
    "MATMUL": _matmul, "SELECT": _select, "CONCAT": _concat, "PAD": _pad, "RESHAPE": _reshape, "REVERSE": _reverse,
    "SLICE": _slice, "TILE": _tile, "TRANSPOSE": _transpose, "GATHER": _gather, "SCATTER": _scatter,
    "RESIZE": _resize, "CONST": _const, "CONST_SHAPE": _const, "COND_IF": _cond_if, "WHILE_LOOP": _while,
    "CUSTOM": _none, "VARIABLE": _none, "VARIABLE_WRITE": _none, "VARIABLE_READ": _none,
}
_RULES.update({k: _same for k in _SAME_AS_INPUT})

# TOSA 1.1 draft, EXT-SHAPE: a shape_t value's "shape" is (length,) (chapters/shape.adoc of the draft)
def _dim_rule(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    return [(1,)]


def _shape_same(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    return [tuple(ins[0].shape)]


def _concat_shape(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    lengths = [t.shape[0] if t.shape else None for t in ins]
    if any(not isinstance(n, int) for n in lengths):
        return [None]
    return [(sum(int(n) for n in lengths if isinstance(n, int)),)]


def _slice_shape(op: str, ins: list[TensorType], attrs: dict[str, Any], consts: Consts) -> list[Shape | None]:
    size = consts[2] if len(consts) > 2 else None
    return [(int(np.asarray(size).reshape(-1)[0]),)] if size is not None else [None]


_RULES.update({"DIM": _dim_rule, "CONCAT_SHAPE": _concat_shape, "SLICE_SHAPE": _slice_shape,
               "ASSERT_EQUAL_SHAPE": _none})
_RULES.update({k: _shape_same for k in ("ADD_SHAPE", "SUB_SHAPE", "MUL_SHAPE", "DIV_CEIL_SHAPE", "DIV_FLOOR_SHAPE",
                                        "MOD_SHAPE", "MIN_SHAPE", "MAX_SHAPE", "EXP2_SHAPE", "LOG2_CEIL_SHAPE",
                                        "LOG2_FLOOR_SHAPE")})
_RULES.update({k: _binary for k in _BINARY})
_RULES.update({k: _reduce for k in _REDUCE})


def _key(name: str) -> str:
    return name.split(".", 1)[1] if name.startswith("tosa.") else name


def _expected(name: str, operand_types: Sequence[TensorType], attrs: dict[str, Any],
              operand_consts: Consts | None) -> list[Shape | None]:
    op = _key(name)
    rule = _RULES.get(op)
    if rule is None:
        raise InvalidGraphError(f"{name}: no shape rule (not a TOSA 1.0 operator)", op=name)
    consts: Consts = list(operand_consts) if operand_consts is not None else [None] * len(operand_types)
    try:
        return rule(op, list(operand_types), attrs, consts)
    except ValueError as e:  # unpacking a shape of the wrong rank
        raise InvalidGraphError(f"{op}: operand ranks do not fit the spec ({e})", op=op) from None


def equalities(name: str, operand_types: Sequence[TensorType], attrs: dict[str, Any],
               operand_consts: Consts | None = None) -> list[tuple[Dim, Dim, bool]]:
    """The dimension equalities ``name`` relies on that involve a symbol: ``(a, b, broadcast)`` per pair, in the
    order the rule meets them (``broadcast``: holds unless one side is 1 at run time)."""
    token = _NOTED.set([])
    try:
        _expected(name, operand_types, attrs, operand_consts)
        return list(_NOTED.get() or [])
    finally:
        _NOTED.reset(token)


def graph_equalities(ops: Sequence[Any]) -> list[dict[str, Any]]:
    """``graph.dims.equalities`` entries of ``tosa.*`` operations ``ops``: ``{"a", "b", "broadcast", "op"}``."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[Dim, Dim, bool]] = set()
    for op in ops:
        if op.dialect != "tosa":
            continue
        for a, b, bc in equalities(op.opcode, [v.type for v in op.operands], dict(op.attrs),
                                   [v.const() for v in op.operands]):
            key = (a, b, bc)
            if key not in seen and (b, a, bc) not in seen:
                seen.add(key)
                out.append({"a": a, "b": b, "broadcast": bc, "op": op.location or op.name})
    return out


def result_shapes(name: str, operand_types: Sequence[TensorType], attrs: dict[str, Any],
                  operand_consts: Consts | None = None) -> list[tuple[Dim, ...]]:
    """The output shapes of ``name``; shape_t operands must be given in ``operand_consts``."""
    op = _key(name)
    out = _expected(op, operand_types, attrs, operand_consts)
    if op in ("CUSTOM", "COND_IF", "VARIABLE_READ"):
        raise InvalidGraphError(f"{op}: result shapes cannot be inferred from the operands", op=op)
    res: list[tuple[Dim, ...]] = []
    for s in out:
        if s is None:
            raise InvalidGraphError(f"{op}: the result shape needs the value of a shape_t operand; pass "
                                    "operand_consts (CONST_SHAPE values)", op=op)
        res.append(s)
    return res


def check_shapes(name: str, operand_types: Sequence[TensorType], result_types: Sequence[TensorType],
                 attrs: dict[str, Any], operand_consts: Consts | None = None, *, inferred: bool = False) -> None:
    """Raise InvalidGraphError for the spec's shape ERROR_IFs and result shapes that differ from the rule.

    ``inferred``: the result types were made by :func:`result_shapes` from these same operands, attributes and
    constants (``validation.infer_result_types``), so the rule has run on them (its ERROR_IFs passed) and gave
    these shapes: they are taken as its output instead of running it again."""
    op = _key(name)
    out: list[Shape | None]
    results = list(result_types)
    if inferred:  # (the rule's shapes are the results' own: nothing to compare)
        out = [tuple(t.shape) for t in results]
    else:
        out = _expected(op, operand_types, attrs, operand_consts)
        for i, (exp, got) in enumerate(zip(out, results)):
            if exp is None:
                continue
            if len(exp) != got.rank or any(_known(a, b) and a != b for a, b in zip(exp, got.shape)):
                raise _err(op, f"result {i} has shape {list(got.shape)}; the spec's rule gives {list(exp)}")
    ins = list(operand_types)
    if op == "RESHAPE" and results and out and out[0] is None:
        a, b = ins[0], results[0]
        if a.is_static and b.is_static and a.size != b.size:  # spec 2.10.3 RESHAPE
            raise _err(op, f"cannot reshape {list(a.shape)} ({a.size} elements) to {list(b.shape)} ({b.size})")
    if op in ("PAD", "SLICE", "TILE", "TRANSPOSE") and results and results[0].rank != ins[0].rank:
        raise _err(op, f"result rank {results[0].rank} must equal input rank {ins[0].rank}")
    if op == "SLICE" and results and out and out[0] is None:
        for i, (d, r) in enumerate(zip(_sh(ins[0]), results[0].shape)):
            if _known(d, r) and r > d:
                raise _err(op, f"result dim {i} ({r}) exceeds the input's ({d})")
    if op == "WHILE_LOOP":
        for i, (a, b) in enumerate(zip(ins, results)):
            if a.dtype is not b.dtype or len(a.shape) != len(b.shape) or any(
                    _known(x, y) and x != y for x, y in zip(a.shape, b.shape)):
                raise _err(op, f"output {i} ({b}) must match input {i} ({a})")
        if len(ins) != len(results):
            raise _err(op, f"{len(results)} outputs for {len(ins)} inputs")
