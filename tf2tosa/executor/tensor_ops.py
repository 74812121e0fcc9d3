"""§2.3 Tensor operators: ARGMAX, AVG_POOL2D, CONV2D, CONV3D, DEPTHWISE_CONV2D, FFT2D, MATMUL,
MAX_POOL2D, RFFT2D, TRANSPOSE_CONV2D.

Convolutions use im2col (strided windows) + BLAS matmul.  Float kernels compute in
float32.  Integer kernels subtract zero points first, then accumulate exactly: in
float64 BLAS when max|a|·max|w|·K < 2^53 (every partial sum is then an exactly
representable integer), otherwise in int64.  The accumulator REQUIRE (apply_add_s
overflow) is checked on the final sum.
"""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..ir.graph import Operation
from ..ir.types import DType
from ..tosa.profiles import LEVEL_NONE, tensor_size_problem
from . import numerics as nm
from .registry import (
    PRECISE,
    ExecutionError,
    bind,
    catalogue_attr,
    error_if,
    fdt,
    in_dtype,
    int_list,
    kernel,
    op_label,
    out_dtype,
    require,
    scalar,
    to_out,
)

_EXACT = float(2 ** 53)
_EXACT32 = float(2 ** 24)


#: elements of a depthwise accumulator block (fits in the L2 cache with its temporary)
DW_BLOCK = 1 << 16
#: most elements of a chunk of a merged output row (OW*C*M) in the stride-1 depthwise einsum: the weight tiled to a
#: chunk, [KH, KW, chunk], stays in the L1 cache while the taps run over it (see _dw_chunk; about 1K elements measured
#: 1.3-1.7x faster than tiling the weight along the whole row on MobileNetV2's layers)
DW_CHUNK = 1536
#: padded input elements per band of depthwise output rows
DW_BAND = 1 << 17

#: prepared forms of constant weights (zero-point-adjusted, converted, bounds), by the weight array's identity
_PREPARED: dict[tuple[int, Any], tuple[weakref.ref[np.ndarray], Any]] = {}


def _forget(key: tuple[int, Any], _ref: object) -> None:
    _PREPARED.pop(key, None)


def _prepared(w: np.ndarray, what: Any, make: Callable[[], Any]) -> Any:
    """``make()`` for weight ``w``, computed once while ``w`` lives (weights are read-only constants; an entry goes
    when its array does).  Arrays that are not constants (their base owns no weakref) are prepared each time."""
    key = (id(w), what)
    hit = _PREPARED.get(key)
    if hit is not None and hit[0]() is w:
        return hit[1]
    if w.flags.writeable or w.size < 64:
        return make()
    value = make()
    try:
        ref = weakref.ref(w, functools.partial(_forget, key))
    except TypeError:  # pragma: no cover - every ndarray takes weak references
        return value
    _PREPARED[key] = (ref, value)
    return value


def _idiv_check(op: Operation, a: int, b: int, what: str) -> int:
    error_if(a % b != 0, op, f"{what}: {a} is not a multiple of {b} (idiv_check)")
    return a // b


def windows(xp: np.ndarray, kernel_: list[int], stride: list[int], dilation: list[int],
            out: list[int]) -> np.ndarray:
    """View of ``xp`` [N, *spatial, C] as [N, *out, *kernel, C] sliding windows (no copy)."""
    s = xp.strides
    nd = len(kernel_)
    shape = (xp.shape[0], *out, *kernel_, xp.shape[-1])
    strides = (s[0], *(s[1 + i] * stride[i] for i in range(nd)), *(s[1 + i] * dilation[i] for i in range(nd)), s[-1])
    return as_strided(xp, shape=shape, strides=strides, writeable=False)


def _tap(k_off: int, pad: int, stride: int, in_size: int, out_size: int) -> tuple[int, int, int] | None:
    """For the kernel tap at offset ``k_off`` (already times the dilation): the outputs ``[o0, o1)`` whose input
    position ``o * stride + k_off - pad`` lies inside ``[0, in_size)``, and the first such input position."""
    o0 = max(0, -((k_off - pad) // stride))  # ceil((pad - k_off) / stride)
    o1 = min(out_size, (in_size - 1 + pad - k_off) // stride + 1)
    if o1 <= o0:
        return None
    return o0, o1, o0 * stride + k_off - pad


def _conv_by_taps(xc: np.ndarray, w: np.ndarray, pad: list[int], stride: list[int], dil: list[int],
                  outs: list[int]) -> np.ndarray:
    """Float convolution summed tap by tap over the in-bounds positions only: padding contributes nothing
    (im2col's zero padding would turn an infinite weight into NaN)."""
    nd = len(outs)
    n_, oc = xc.shape[0], w.shape[0]
    acc = np.zeros((n_, *outs, oc), xc.dtype)
    for tap in itertools.product(*(range(k) for k in w.shape[1:1 + nd])):
        found = [_tap(tap[i] * dil[i], pad[2 * i], stride[i], xc.shape[1 + i], outs[i]) for i in range(nd)]
        rng = [r for r in found if r is not None]
        if len(rng) != nd:
            continue
        all_: list[Any] = [slice(None)]
        src = tuple(all_ + [slice(i0, i0 + (o1 - o0 - 1) * st + 1, st) for (o0, o1, i0), st in zip(rng, stride)] + all_)
        dst = tuple(all_ + [slice(o0, o1) for o0, o1, _ in rng] + all_)
        wsel = tuple(all_ + list(tap) + all_)
        acc[dst] += xc[src] @ w[wsel].T
    return acc


def _zp_check(op: Operation, dt: DType, zp: int, what: str) -> None:
    error_if(dt is not DType.INT8 and zp != 0, op, f"{what} must be 0 for {dt.value} (zero point only for i8)")


def _zp_bound(dt: DType, zp: int) -> float:
    """Largest |value - zp| a tensor of ``dt`` can hold (bounds exact float accumulation without a data pass)."""
    lo, hi = dt.range()
    return float(max(abs(lo - zp), abs(hi - zp)))


def _abs_max(a: np.ndarray, zp: int = 0) -> float:
    """max|a - zp| from the extremes of ``a`` (no int64 copy of a large weight tensor)."""
    if not a.size:
        return 0.0
    return float(max(abs(int(a.min()) - zp), abs(int(a.max()) - zp)))


def _exact_float(bound: float) -> type[np.floating] | None:
    """A float type in which every partial sum bounded by ``bound`` is an exactly represented integer."""
    if bound < _EXACT32:
        return np.float32
    if bound < _EXACT:
        return np.float64
    return None


def exact_matmul(a: np.ndarray, b: np.ndarray, a_bound: float | None = None, b_bound: float | None = None
                 ) -> np.ndarray:
    """Exact integer a @ b (int64 result) using float64 BLAS when every partial sum is exact.

    ``a_bound``/``b_bound`` bound max|a| / max|b| (computed from the data when not given)."""
    k = a.shape[-1]
    amax = a_bound if a_bound is not None else _abs_max(a)
    bmax = b_bound if b_bound is not None else _abs_max(b)
    if amax * bmax * max(k, 1) < _EXACT:
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
    return np.matmul(a.astype(np.int64), b.astype(np.int64))


def _finish_int(op: Operation, acc: np.ndarray, bias: np.ndarray, bias_index: np.ndarray | None) -> np.ndarray:
    """static_cast<out_t>(acc) + bias with the accumulator/bias REQUIREs (``acc`` int64, or float32/float64 holding
    exact integers below 2^24/2^53, which is updated in place)."""
    ot = out_dtype(op)
    if acc.dtype.kind != "f":
        nm.check_fits(acc, ot, "accumulator")
    b = bias.reshape(-1)
    if acc.dtype.kind == "f":
        lo, hi = ot.range()
        bi = b if bias_index is None or b.size == 1 else b[bias_index]
        bmin, bmax = (int(bi.min()), int(bi.max())) if bi.size else (0, 0)
        amin, amax = (float(acc.min()), float(acc.max())) if acc.size else (0.0, 0.0)
        require(amin >= lo and amax <= hi, op, f"accumulator overflows {ot.value}")
        reach = max(abs(amin), abs(amax)) + max(abs(bmin), abs(bmax))
        if acc.dtype == np.float32 and reach >= _EXACT32:
            acc = acc.astype(np.float64)
        if reach >= _EXACT:  # pragma: no cover - i48 extremes
            return nm.apply_add_s(acc.astype(np.int64), bi.astype(np.int64), ot)
        bb = bi.astype(acc.dtype)
        acc += bb[0] if bb.size == 1 else bb  # acc is this kernel's own fresh accumulator; every sum is exact
        if acc.size and (amin + bmin < lo or amax + bmax > hi):  # only then can the add overflow: check exactly
            nm.check_fits(acc, ot, "add")
        return acc
    b = b.astype(np.int64)
    bb = b[0] if b.size == 1 else (b if bias_index is None else b[bias_index])
    return nm.apply_add_s(acc, bb, ot)


#: fewest rows of a float GEMM block (fewer make BLAS slower than the passes the blocking keeps in cache save)
GEMM_ROWS = 256
#: output elements per GEMM block beyond GEMM_ROWS rows (a block and its epilogue stay in cache)
GEMM_BLOCK = 1 << 15
#: output width (GEMM rows per image row) from which a float GEMM makes one BLAS call per image row instead of one
#: per block of rows: as fast or faster on MobileNetV2's 112-, 56- and 28-wide layers (OpenBLAS's small-matrix
#: kernels), and a prepared chain can then write each row straight into the next depthwise's zero border (rows of a
#: bordered array are not evenly spaced); narrower images keep blocks (7-wide rows against a large weight were 4x
#: slower as separate calls)
GEMM_ROW_CALLS = 28
#: largest float weight (elements) kept as a row-major [K, OC] copy (BLAS runs a row block faster on it)
SMALL_WEIGHT = 1 << 16
#: columns of an integer GEMM weight summed at a time when cutting K into float32-exact ranges (_GemmWeights.f32_chunks)
CHUNK_COLS = 64


def float_weight_matrix(w: np.ndarray, ft: Any) -> np.ndarray:
    """A float convolution weight [OC, ...] as the [K, OC] GEMM operand in ``ft``: a row-major copy for a small
    weight (made once per constant), else the transposed view (no copy of a large weight)."""
    oc = w.shape[0]

    def make() -> np.ndarray:
        wm = w.astype(ft, copy=False).reshape(oc, -1).T
        return np.ascontiguousarray(wm) if wm.size <= SMALL_WEIGHT else wm

    return _prepared(w, ("rows", np.dtype(ft).char), make)  # type: ignore[no-any-return]


def gemm_rows(cols: np.ndarray, wm: np.ndarray, each: Callable[[np.ndarray, int], None] | None = None,
              align: int = 1, keep: bool = True, out: np.ndarray | None = None) -> np.ndarray:
    """``cols @ wm`` (float, ``cols`` C-contiguous), computed a block of rows at a time (a multiple of ``align``
    rows: whole output rows of an image); ``each(block, first_row)``, when given, runs on each block right after it
    is computed, while it is in cache (with ``keep=False`` every block goes to one scratch block, which is returned:
    ``each`` takes the results away).  From :data:`GEMM_ROW_CALLS` columns of output (``align``) on, each output row
    of the image is its own BLAS call, and ``out``, a [rows / align, align, OC] view whose rows may be spaced
    apart (the inside of a zero-bordered array), may take the results (``each`` then gets 3-D blocks of it).  The
    kernel and the prepared chains both use this: the same calls, so the same sums, on every run."""
    m, oc = cols.shape[0], wm.shape[1]
    rows = max(GEMM_ROWS, GEMM_BLOCK // max(1, oc))
    rows = -(-rows // align) * align
    per_row = align >= GEMM_ROW_CALLS and m % align == 0
    if out is not None and not per_row:
        raise ValueError("gemm_rows: a target view needs one call per output row")
    target = out if out is not None else np.empty((m if keep else min(m, rows), oc), np.result_type(cols, wm))
    for i in range(0, m, rows):
        src = cols[i:i + rows]
        if out is not None:
            blk = out[i // align:(i + src.shape[0]) // align]
        else:
            blk = target[i:i + rows] if keep else target[:src.shape[0]]
        if per_row:  # a stack of [align, K] @ [K, OC] products
            k = src.shape[0] // align
            np.matmul(src.reshape(k, align, -1), wm, out=blk if out is not None else blk.reshape(k, align, oc))
        else:
            np.matmul(src, wm, out=blk)
        if each is not None:
            each(blk, i)
    return target


def _int_operand(a: np.ndarray, zp: int, ft: type[np.floating] | None) -> np.ndarray:
    """``a - zp`` in the exact accumulation type (``ft``, or int64)."""
    out = a.astype(ft if ft is not None else np.int64)
    if zp:
        out -= zp
    return out


def _float_bias(op: Operation, acc: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """out = static_cast<out_t>(acc) + bias, the add rounded in out_t (exact in fp32 for fp16/bf16 operands)."""
    ot = out_dtype(op).np_dtype()
    if ot != acc.dtype and not PRECISE.get():
        acc = acc.astype(ot).astype(fdt())
    if acc.dtype != fdt():
        return acc + bias.astype(fdt()).reshape(-1)
    acc += bias.astype(fdt()).reshape(-1)  # acc is the kernel's own fresh accumulator
    return acc


def _conv_nd(op: Operation, ins: list[np.ndarray], nd: int, raw: bool = False) -> np.ndarray:
    args = bind(op, ins)
    x, w, bias = args.input, args.weight, args.bias
    izp, wzp = scalar(args.input_zp), scalar(args.weight_zp)
    pad = int_list(args.pad)
    stride = int_list(args.stride)
    dil = int_list(args.dilation)
    error_if(len(pad) != 2 * nd or len(stride) != nd or len(dil) != nd, op, "pad/stride/dilation lengths")
    _zp_check(op, in_dtype(op, 0), izp, "input_zp")
    _zp_check(op, in_dtype(op, 1), wzp, "weight_zp")
    error_if(min(pad) < 0, op, "pad < 0")
    error_if(min(stride) < 1, op, "stride < 1")
    error_if(min(dil) < 1, op, "dilation < 1")
    n_, ic = x.shape[0], x.shape[-1]
    oc = w.shape[0]
    ks = list(w.shape[1:1 + nd])
    error_if(w.shape[-1] != ic, op, f"weight IC {w.shape[-1]} != input IC {ic}")
    outs = []
    for i in range(nd):
        num = x.shape[1 + i] - 1 + pad[2 * i] + pad[2 * i + 1] - (ks[i] - 1) * dil[i]
        error_if(num < 0, op, "kernel larger than padded input")
        outs.append(_idiv_check(op, num, stride[i], f"output size of spatial dim {i}") + 1)
    error_if(bias.size != oc and bias.size != 1, op, f"bias size {bias.size} is neither OC={oc} nor 1")
    pads = [(0, 0)] + [(pad[2 * i], pad[2 * i + 1]) for i in range(nd)] + [(0, 0)]
    _check_padded(op, [d + a + b for d, (a, b) in zip(x.shape, pads)])
    kk = int(np.prod(ks)) * ic
    m = n_ * int(np.prod(outs))
    if out_dtype(op).is_float:
        if any(pad) and not _prepared(w, "finite", lambda: bool(np.isfinite(w).all())):
            acc = _conv_by_taps(x.astype(fdt()), w.astype(fdt()), pad, stride, dil, outs)
            return to_out(_float_bias(op, acc, bias), op)
        wm = float_weight_matrix(w, fdt())
        if all(k == 1 for k in ks) and all(s == 1 for s in stride) and not any(pad):
            cols = x.astype(fdt(), copy=False).reshape(m, ic)
        else:
            cols = windows(_padded(x, pads, 0, fdt()), ks, stride, dil, outs).reshape(m, kk)
        acc = gemm_rows(cols, wm, align=outs[-1])
        return to_out(_float_bias(op, acc.reshape(n_, *outs, oc), bias), op)
    prep = _prepared(w, ("gemm", wzp), lambda: _GemmWeights(w.reshape(oc, kk), wzp))
    lo, hi = in_dtype(op, 0).range()
    zpb = _zp_bound(in_dtype(op, 0), izp)
    plan = prep.plan(max(abs(lo), abs(hi), abs(izp)), zpb, izp, bias, out_dtype(op))
    if plan is None:
        # the REQUIREs need the data: the zero points subtracted first, exact float (bound max|x - izp| *
        # max_oc sum|w - wzp|) or int64, then the checked bias add
        zft = _exact_float(zpb * prep.abs_sum)
        wm = prep.matrix(zft) if zft is not None else _int_operand(w, wzp, None).reshape(oc, kk).T
        if all(k == 1 for k in ks) and all(s_ == 1 for s_ in stride) and not any(pad):
            cols = _int_operand(x, izp, zft).reshape(m, ic)
        else:
            xp = np.pad(_int_operand(x, izp, zft), pads)
            cols = windows(xp, ks, stride, dil, outs).reshape(m, kk)
        acc = np.matmul(cols, wm).reshape(n_, *outs, oc)
        res = _finish_int(op, acc, bias, None)
        return res if raw else to_out(res, op)
    ft, wm, shift, chunks = plan
    # raw input values (padding with input_zp, which is 0 after the zero point is subtracted); the zero point's
    # share, input_zp * sum_k (w - wzp), goes into the per-channel ``shift`` with the bias
    gt = np.float32 if chunks else ft  # the GEMM operands' type
    if all(k == 1 for k in ks) and all(s_ == 1 for s_ in stride) and not any(pad):
        cols = x.astype(gt).reshape(m, ic)
    else:
        cols = windows(_padded(x, pads, izp, gt), ks, stride, dil, outs).reshape(m, kk)
    acc = chunked_matmul(cols, wm, chunks, np.empty((m, oc), ft)) if chunks else np.matmul(cols, wm)
    acc += shift
    res = acc.reshape(n_, *outs, oc)
    return res if raw else to_out(res, op)


#: an integer GEMM's plan: accumulator type, weight matrix, per-channel shift, column ranges (see _GemmWeights.plan)
Plan = tuple[type[np.floating], np.ndarray, np.ndarray, "list[tuple[int, int]] | None"]


def chunked_matmul(c: np.ndarray, wm: np.ndarray, chunks: list[tuple[int, int]], out: np.ndarray,
                   part: np.ndarray | None = None) -> np.ndarray:
    """``out`` (float64) = ``c @ wm`` for float32 ``c`` and ``wm``: one float32 GEMM per column range of
    :meth:`_GemmWeights.f32_chunks` (each exact), summed into ``out`` (exact: integers below 2^53).  ``part``: a
    float32 scratch of ``out``'s shape."""
    p = part if part is not None else np.empty(out.shape, np.float32)
    for j, (k0, k1) in enumerate(chunks):
        np.matmul(c[:, k0:k1], wm[k0:k1], out=p)
        if j:
            np.add(out, p, out=out)
        else:
            np.copyto(out, p)
    return out


class _GemmWeights:
    """A constant integer weight [OC, K] prepared for exact float GEMM: the largest per-channel sum of ``|w - wzp|``,
    the per-channel sums of ``w - wzp`` and, made when first needed, ``w - wzp`` as a [K, OC] float32 or float64
    matrix (only the type in use is kept: memory stays near the model's size).

    With ``|x| <= xmax`` for the raw input values, every partial sum of ``x @ (w - wzp)`` (in whatever order BLAS adds)
    is an integer of magnitude at most ``xmax * max_oc sum_k |w - wzp|``; below 2^24 float32 holds every one exactly,
    below 2^53 float64 does."""

    def __init__(self, w2: np.ndarray, wzp: int) -> None:
        self._w2, self._wzp = w2, wzp
        wi = w2.astype(np.int64) - wzp
        self.abs_sum = float(np.abs(wi).sum(axis=1).max()) if wi.size else 0.0
        self.col_sum = wi.sum(axis=1) if wi.size else np.zeros(w2.shape[0], np.int64)
        self._mats: dict[type, np.ndarray] = {}
        #: plan() results by (bias identity, arguments), with a weak reference to the bias
        self._plans: dict[tuple[Any, ...], tuple[weakref.ref[np.ndarray], Any]] = {}

    def matrix(self, ft: type[np.floating]) -> np.ndarray:
        """``(w - wzp).T`` in ``ft`` (exact: |w - wzp| < 2^16)."""
        m = self._mats.get(ft)
        if m is None:
            a = self._w2.astype(ft)
            if self._wzp:
                a -= self._wzp
            m = self._mats[ft] = np.ascontiguousarray(a.T)
        return m

    def f32_chunks(self, xmax: int) -> list[tuple[int, int]] | None:
        """Column ranges ``[k0, k1)`` of the [K, OC] GEMM operand, cut greedily :data:`CHUNK_COLS` columns at a
        time, over each of which every partial sum of ``x @ (w - wzp)`` (``|x| <= xmax``) is an integer below 2^24
        for every output channel: float32 GEMMs over the ranges are exact, and so is their sum in float64.  None
        when the whole K already fits (no need) or one block of columns may not (16-bit inputs)."""
        w2 = self._w2
        oc, k = w2.shape
        limit = _EXACT32 / max(1, xmax)  # per channel, sum |w - wzp| over a range must stay below this
        if self.abs_sum < limit or k == 0:
            return None
        chunks: list[tuple[int, int]] = []
        start = 0
        running = np.zeros(oc, np.int64)
        for k0 in range(0, k, CHUNK_COLS):
            blk = w2[:, k0:k0 + CHUNK_COLS].astype(np.int32)
            blk -= self._wzp
            sums = np.abs(blk).sum(axis=1, dtype=np.int64)
            if float(sums.max()) >= limit:
                return None
            running += sums
            if float(running.max()) >= limit:
                chunks.append((start, k0))
                start, running = k0, sums
        chunks.append((start, k))
        return chunks

    def plan(self, xmax: int, zp_bound: float, izp: int, bias: np.ndarray, ot: DType) -> Plan | None:
        """For raw inputs ``|x| <= xmax`` with ``|x - izp| <= zp_bound``: (float type, weight matrix, per-channel
        ``bias - izp * col_sum`` to add to ``x @ (w - wzp)``, column ranges or None), when that float type is exact
        for every partial sum and the bounds prove the accumulator and the bias add inside ``ot`` (the REQUIREs then
        hold without a data pass); else None.  With column ranges (:meth:`f32_chunks`) the matrix is float32 and
        the product is :func:`chunked_matmul`'s.  Made once per constant bias (read-only, by identity while it
        lives) and arguments."""
        if bias.flags.writeable:
            return self._plan(xmax, zp_bound, izp, bias, ot)
        key = (id(bias), xmax, zp_bound, izp, ot)
        hit = self._plans.get(key)
        if hit is not None and hit[0]() is bias:
            return hit[1]
        made = self._plan(xmax, zp_bound, izp, bias, ot)
        self._plans[key] = (weakref.ref(bias), made)
        return made

    def _plan(self, xmax: int, zp_bound: float, izp: int, bias: np.ndarray, ot: DType) -> Plan | None:
        lo, hi = ot.range()
        bmax = float(np.abs(bias).max()) if bias.size else 0.0
        # |acc| <= zp_bound * abs_sum and |acc + bias| <= that + max|bias|
        if zp_bound * self.abs_sum + bmax > min(-lo, hi):
            return None
        shift = bias.reshape(-1).astype(np.int64) - izp * self.col_sum
        ft = _exact_float(float(xmax) * self.abs_sum + (float(np.abs(shift).max()) if shift.size else 0.0))
        if ft is None:
            return None
        # a CONV2D weight whose sums need float64 as a whole: float32 GEMMs over ranges of K (the float32 matrix
        # only: no float64 copy of the weight)
        chunks = self.f32_chunks(xmax) if ft is np.float64 and type(self) is _GemmWeights else None
        return ft, self.matrix(np.float32 if chunks else ft), shift.astype(ft), chunks


@kernel("CONV2D")
def conv2d(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.3.3 CONV2D."""
    return [_conv_nd(op, ins, 2)]


@kernel("CONV3D")
def conv3d(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.3.4 CONV3D."""
    return [_conv_nd(op, ins, 3)]


@kernel("DEPTHWISE_CONV2D")
def depthwise_conv2d(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.3.5 DEPTHWISE_CONV2D: weight [KH,KW,C,M], output channel c*M+m."""
    return [_depthwise(op, ins, False)]


def _depthwise(op: Operation, ins: list[np.ndarray], raw: bool) -> np.ndarray:
    args = bind(op, ins)
    x, w, bias = args.input, args.weight, args.bias
    izp, wzp = scalar(args.input_zp), scalar(args.weight_zp)
    pt, pb, pl, pr = int_list(args.pad)
    sy, sx = int_list(args.stride)
    dy, dx = int_list(args.dilation)
    _zp_check(op, in_dtype(op, 0), izp, "input_zp")
    _zp_check(op, in_dtype(op, 1), wzp, "weight_zp")
    error_if(min(pt, pb, pl, pr) < 0, op, "pad < 0")
    error_if(min(sy, sx) < 1, op, "stride < 1")
    error_if(min(dy, dx) < 1, op, "dilation < 1")
    n_, ih, iw, c = x.shape
    kh, kw, wc, mm = w.shape
    error_if(wc != c, op, f"weight C {wc} != input C {c}")
    oh = _idiv_check(op, ih - 1 + pt + pb - (kh - 1) * dy, sy, "OH") + 1
    ow = _idiv_check(op, iw - 1 + pl + pr - (kw - 1) * dx, sx, "OW") + 1
    error_if(bias.size != c * mm and bias.size != 1, op, "bias size is neither C*M nor 1")
    is_float = out_dtype(op).is_float
    geo = ((pt, pb, pl, pr), (sy, sx), (dy, dx), (oh, ow))
    # the einsum pads (a band at a time); padding beyond the memory budget takes the tap-by-tap path, which pads
    # nothing
    pad_ok = tensor_size_problem([n_, ih + pt + pb, iw + pl + pr, c], 64, LEVEL_NONE) is None
    if is_float:
        if pad_ok and (not any((pt, pb, pl, pr)) or _prepared(w, "finite", lambda: bool(np.isfinite(w).all()))):
            # finite weights: zero padding contributes exactly nothing, so the padded sum of products is the spec's
            acc = _depthwise_einsum(op, x, w.astype(fdt(), copy=False), 0, fdt(), geo)
            return to_out(_float_bias(op, acc.reshape(n_, oh, ow, c * mm), bias), op)
        xc, wf = x.astype(fdt(), copy=False), w.astype(fdt(), copy=False)
    else:
        prep = _prepared(w, ("dwsum", wzp), lambda: _DepthwiseWeights(w, wzp))
        lo, hi = in_dtype(op, 0).range()
        plan = prep.plan(max(abs(lo), abs(hi), abs(izp)), _zp_bound(in_dtype(op, 0), izp), izp, bias, out_dtype(op))
        if plan is not None and pad_ok:
            # raw inputs (padding holds input_zp) times w - wzp, plus bias - input_zp * sum_taps (w - wzp) per channel:
            # every partial sum is an exact integer of the plan's float type and the REQUIREs hold by the bound
            ft, wm, shift, _ = plan  # (no column ranges for a depthwise weight)
            acc = _depthwise_einsum(op, x, wm, izp, ft, geo).reshape(n_, oh, ow, c * mm)
            acc += shift
            return acc if raw else to_out(acc, op)
        # every partial sum of an output is bounded by max|x - izp| * sum over the taps of |w - wzp| of its channel
        wf = _prepared(w, ("dw", wzp), lambda: _int_operand(w, wzp, np.float64))
        tap_sum = prep.abs_sum
        ft = _exact_float(_zp_bound(in_dtype(op, 0), izp) * tap_sum)
        if ft is np.float32:
            wf = _prepared(w, ("dw32", wzp), lambda: wf.astype(np.float32))
        elif ft is None:
            wf = _int_operand(w, wzp, None)
        xc = _int_operand(x, izp, ft)
    shape = (n_, oh, ow, c) if mm == 1 else (n_, oh, ow, c, mm)
    acc = np.empty(shape, xc.dtype)
    _depthwise_taps(xc, wf, acc, (pt, pl), (sy, sx), (dy, dx))
    acc2 = acc.reshape(n_, oh, ow, c * mm)
    if is_float:
        return to_out(_float_bias(op, acc2, bias), op)
    lo, hi = out_dtype(op).range()
    bmax = float(np.abs(bias).max()) if bias.size else 0.0
    reach = _zp_bound(in_dtype(op, 0), izp) * tap_sum + bmax
    if ft is not None and reach <= min(-lo, hi) and reach < (_EXACT32 if ft is np.float32 else _EXACT):
        # |acc| and |acc + bias| are bounded inside out_t (the REQUIREs hold) and every sum is exact: no data pass
        acc2 += bias.reshape(-1).astype(ft)
    else:
        acc2 = _finish_int(op, acc2, bias, None)
    return acc2 if raw else to_out(acc2, op)


#: integer convolutions whose result the runner may hand straight to a RESCALE: the kernel's work (every ERROR_IF
#: and REQUIRE included) without the final cast to the i32 storage type - exact integers in an int64 or float array
ACCUMULATORS: dict[str, Callable[[Operation, list[np.ndarray]], np.ndarray]] = {
    "CONV2D": lambda op, ins: _conv_nd(op, ins, 2, raw=True),
    "DEPTHWISE_CONV2D": lambda op, ins: _depthwise(op, ins, True),
}


def _padded(x: np.ndarray, pads: list[tuple[int, int]], value: float, dtype: Any) -> np.ndarray:
    """``x`` converted to ``dtype`` inside a border of ``value`` (one pass over ``x``; np.pad converts first)."""
    if not any(a or b for a, b in pads):
        return x.astype(dtype, copy=False)
    out = np.empty(tuple(d + a + b for d, (a, b) in zip(x.shape, pads)), dtype)
    inner: list[slice] = [slice(None)] * x.ndim
    for i, ((a, b), d) in enumerate(zip(pads, x.shape)):  # the border slabs only
        if a:
            out[(*inner[:i], slice(0, a))] = value
        if b:
            out[(*inner[:i], slice(a + d, None))] = value
        inner[i] = slice(a, a + d)
    np.copyto(out[tuple(inner)], x, casting="unsafe")
    return out


def _depthwise_einsum(op: Operation, x: np.ndarray, wm: np.ndarray, pad_value: int, ft: Any,
                      geo: tuple[tuple[int, ...], tuple[int, int], tuple[int, int], tuple[int, int]],
                      band_done: Callable[[np.ndarray, int, int], None] | None = None,
                      xp_full: np.ndarray | None = None) -> np.ndarray:
    """sum over the taps of x[n, oy*sy + ky*dy - pt, ox*sx + kx*dx - pl, c] * wm[ky, kx, c(, m)] on the input padded
    with ``pad_value``, as einsums over the strided windows of the padded input ([N, OH, OW, C] or
    [N, OH, OW, C, M] in ``ft``).  Used where padding provably adds nothing (zero padding and finite float weights;
    ``input_zp`` padding and zero-point-free integer products).  Output rows go in bands of about
    :data:`DW_BAND` padded input elements: only a band of the input is ever padded (peak memory stays near the
    input and output, not a padded copy of the whole input).  ``band_done(res, r0, r1)``, when given, is called after
    each band (output rows ``[r0, r1)``), while they are still in cache.  ``xp_full``, when given, is the whole input
    already padded with ``pad_value`` (the bands are then views of it, the same values a padded band copy holds)."""
    (pt, pb, pl, pr), (sy, sx), (dy, dx), (oh, ow) = geo
    n_, ih, iw, c = x.shape
    kh, kw, _, mm = wm.shape
    res = np.empty((n_, oh, ow, c) if mm == 1 else (n_, oh, ow, c, mm), ft)
    # stride 1 along W: output column ox, channel ci reads merged row element (ox + kx*dx)*C + ci, so (OW, C) is
    # one axis of OW*C contiguous elements; it is cut into OW/F chunks of F columns, and the einsum's inner loop runs
    # along a chunk's F*C elements against the weight tiled F times (prepared once per weight and F), the same
    # weight chunk for every chunk of the row (a stride-0 axis)
    merged = sx == 1
    if merged:
        f = _dw_chunk(ow, c * mm, DW_CHUNK)
        nq, q = ow // f, f * c
        wt = _prepared(wm, ("dw_chunk", f), lambda: np.ascontiguousarray(np.tile(wm, (1, 1, f, 1))))
        ws = wt.strides
        wb = as_strided(wt, shape=(nq, *wt.shape), strides=(0, *ws), writeable=False)
        res_m = res.reshape(n_, oh, nq, q, *res.shape[4:])
    band = max(1, DW_BAND // max(1, n_ * (iw + pl + pr) * c * sy))
    for r0 in range(0, oh, band):
        r1 = min(oh, r0 + band)
        top = r0 * sy - pt  # the band's first and one-past-last input rows (padding where outside [0, IH))
        bot = (r1 - 1) * sy + (kh - 1) * dy - pt + 1
        if xp_full is not None:
            xp = xp_full[:, top + pt:bot + pt]
        else:
            src = x[:, min(max(0, top), ih):max(0, min(ih, bot))]
            above, below = max(0, min(0, bot) - top), max(0, bot - max(top, ih))
            xp = _padded(src, [(0, 0), (above, below), (pl, pr), (0, 0)], pad_value, ft)
        st = xp.strides
        if merged and st[2] == c * st[3]:
            rows = as_strided(xp, shape=(n_, r1 - r0, nq, kh, kw, q), writeable=False,
                              strides=(st[0], st[1] * sy, q * st[3], st[1] * dy, st[2] * dx, st[3]))
            if mm == 1:
                np.einsum("nhaijq,aijq->nhaq", rows, wb[..., 0], out=res_m[:, r0:r1])
            else:
                np.einsum("nhaijq,aijqm->nhaqm", rows, wb, out=res_m[:, r0:r1])
        else:
            win = windows(xp, [kh, kw], [sy, sx], [dy, dx], [r1 - r0, ow])
            if mm == 1:
                np.einsum("nhwijc,ijc->nhwc", win, wm[..., 0], out=res[:, r0:r1])
            else:
                np.einsum("nhwijc,ijcm->nhwcm", win, wm, out=res[:, r0:r1])
        if band_done is not None:
            band_done(res, r0, r1)
    return res


@functools.lru_cache(maxsize=256)
def _dw_chunk(ow: int, row: int, limit: int) -> int:
    """F, the output columns of a chunk of the stride-1 depthwise einsum: the largest divisor of ``ow`` whose
    F * ``row`` elements (``row`` = C*M per column) stay within ``limit`` (:data:`DW_CHUNK`; 1 when one column is
    more).  Kept per shape: a run asks it once per depthwise."""
    return max([f for f in range(1, ow + 1) if ow % f == 0 and f * row <= limit] or [1])


class _DepthwiseWeights(_GemmWeights):
    """A constant integer depthwise weight [KH, KW, C, M] prepared for exact float accumulation: the largest
    per-channel sum over the taps of ``|w - wzp|``, the per-channel sums of ``w - wzp`` (index c*M + m) and, when
    first needed, ``w - wzp`` [KH, KW, C, M] in float32 or float64.  The bound argument (and :meth:`plan`) is
    :class:`_GemmWeights`'s with the taps of one channel in place of the K of one output channel."""

    def __init__(self, w: np.ndarray, wzp: int) -> None:
        # not super().__init__: that one reshapes the weight for a GEMM
        self._w2, self._wzp = w, wzp
        wi = w.astype(np.int64) - wzp
        self.abs_sum = float(np.abs(wi).sum(axis=(0, 1)).max()) if wi.size else 0.0
        self.col_sum = wi.sum(axis=(0, 1)).reshape(-1)
        self._mats = {}
        self._plans = {}

    def matrix(self, ft: type[np.floating]) -> np.ndarray:
        """``w - wzp`` in ``ft`` (exact: |w - wzp| < 2^16), in the weight's own layout."""
        m = self._mats.get(ft)
        if m is None:
            m = self._w2.astype(ft)
            if self._wzp:
                m -= self._wzp
            m.flags.writeable = False  # a constant: its own prepared forms (the tiled weight) are cached by identity
            self._mats[ft] = m
        return m


def _depthwise_taps(xc: np.ndarray, wf: np.ndarray, acc: np.ndarray, pad: tuple[int, int], stride: tuple[int, int],
                    dil: tuple[int, int]) -> None:
    """acc[n, oy, ox, c(, m)] = sum over the taps (ky, kx), in that order, of x[n, iy, ix, c] * w[ky, kx, c(, m)]
    for the input positions inside the tensor (no padded copy: padding contributes nothing, as in the pseudo-code,
    even for an infinite weight).  Output rows are done in blocks whose accumulator stays in cache."""
    n_, ih, iw, c = xc.shape
    kh, kw, _, mm = wf.shape
    oh, ow = acc.shape[1], acc.shape[2]
    (pt, pl), (sy, sx), (dy, dx) = pad, stride, dil
    row = max(1, n_ * ow * c * mm)
    step = max(1, DW_BLOCK // row)
    tmp = np.empty((n_, min(step, oh), ow, *acc.shape[3:]), acc.dtype)
    xtaps = [(kx, _tap(kx * dx, pl, sx, iw, ow)) for kx in range(kw)]
    w2 = [[wf[ky, kx, :, 0] if mm == 1 else wf[ky, kx] for kx in range(kw)] for ky in range(kh)]
    for r0 in range(0, oh, step):
        r1 = min(oh, r0 + step)
        a = acc[:, r0:r1]
        a.fill(0)
        for ky in range(kh):
            ys = _tap(ky * dy, pt, sy, ih, oh)
            if ys is None:
                continue
            oy0, oy1 = max(ys[0], r0), min(ys[1], r1)
            if oy1 <= oy0:
                continue
            iy = oy0 * sy + ky * dy - pt
            xrows = xc[:, iy:iy + (oy1 - oy0 - 1) * sy + 1:sy]
            for kx, xs_ in xtaps:
                if xs_ is None:
                    continue
                ox0, ox1, ix = xs_
                xs = xrows[:, :, ix:ix + (ox1 - ox0 - 1) * sx + 1:sx]
                t = tmp[:, :oy1 - oy0, ox0:ox1]
                if mm == 1:
                    np.multiply(xs, w2[ky][kx], out=t)
                else:
                    np.multiply(xs[..., None], w2[ky][kx], out=t)
                a[:, oy0 - r0:oy1 - r0, ox0:ox1] += t


@kernel("TRANSPOSE_CONV2D")
def transpose_conv2d(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.3.10 TRANSPOSE_CONV2D: out[oy = iy*stride + ky + out_pad_top] += in[iy] * w[ky] (scatter form)."""
    args = bind(op, ins)
    x, w, bias = args.input, args.weight, args.bias
    izp, wzp = scalar(args.input_zp), scalar(args.weight_zp)
    pt, pb, pl, pr = int_list(args.out_pad)
    sy, sx = int_list(args.stride)
    _zp_check(op, in_dtype(op, 0), izp, "input_zp")
    _zp_check(op, in_dtype(op, 1), wzp, "weight_zp")
    n_, ih, iw, ic = x.shape
    oc, kh, kw, wic = w.shape
    error_if(wic != ic, op, "weight IC != input IC")
    error_if(pt <= -kh or pb <= -kh or pl <= -kw or pr <= -kw, op, "out_pad <= -kernel")
    error_if(sy < 1 or sx < 1, op, "stride < 1")
    oh = (ih - 1) * sy + pt + pb + kh
    ow = (iw - 1) * sx + pl + pr + kw
    error_if(bias.size != oc and bias.size != 1, op, "bias size is neither OC nor 1")
    is_float = out_dtype(op).is_float
    if is_float:
        xm = x.astype(fdt()).reshape(-1, ic)
        wm = w.astype(fdt()).transpose(3, 1, 2, 0).reshape(ic, kh * kw * oc)
        contrib = (xm @ wm).reshape(n_, ih, iw, kh, kw, oc)
        out = np.zeros((n_, oh, ow, oc), fdt())
    else:
        xm = _int_operand(x, izp, np.float64).reshape(-1, ic)
        wm = (w.astype(np.int64) - wzp).transpose(3, 1, 2, 0).reshape(ic, kh * kw * oc)
        # partial sums of the scatter-add stay below max|x| * max|w| * KH*KW*IC as well
        contrib = exact_matmul(xm, wm, _zp_bound(in_dtype(op, 0), izp) * kh * kw,
                               _abs_max(wm)).reshape(n_, ih, iw, kh, kw, oc)
        out = np.zeros((n_, oh, ow, oc), np.int64)
    for ky in range(kh):
        y0 = ky + pt
        iy_lo, iy_hi = max(0, -(y0 // sy) if y0 < 0 else 0), min(ih - 1, (oh - 1 - y0) // sy)
        if iy_hi < iy_lo:
            continue
        for kx in range(kw):
            x0 = kx + pl
            ix_lo, ix_hi = max(0, -(x0 // sx) if x0 < 0 else 0), min(iw - 1, (ow - 1 - x0) // sx)
            if ix_hi < ix_lo:
                continue
            out[:, y0 + iy_lo * sy:y0 + iy_hi * sy + 1:sy, x0 + ix_lo * sx:x0 + ix_hi * sx + 1:sx, :] += \
                contrib[:, iy_lo:iy_hi + 1, ix_lo:ix_hi + 1, ky, kx, :]
    if is_float:
        return [to_out(_float_bias(op, out, bias), op)]
    return [to_out(_finish_int(op, out, bias, None), op)]


@kernel("MATMUL")
def matmul(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.3.7 MATMUL (ERROR_IF read per the erratum: zero points only for i8)."""
    args = bind(op, ins)
    a, b = args.A, args.B
    azp, bzp = scalar(args.A_zp), scalar(args.B_zp)
    error_if(a.ndim != 3 or b.ndim != 3, op, "MATMUL operands must be rank 3")
    error_if(a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1], op, f"shapes {a.shape} x {b.shape}")
    _zp_check(op, in_dtype(op, 0), azp, "A_zp")
    _zp_check(op, in_dtype(op, 1), bzp, "B_zp")
    if out_dtype(op).is_float:
        return [to_out(np.matmul(a.astype(fdt(), copy=False), b.astype(fdt(), copy=False)), op)]
    acc = exact_matmul(_int_operand(a, azp, np.float64), _int_operand(b, bzp, np.float64),
                       _zp_bound(in_dtype(op, 0), azp), _abs_max(b, bzp))
    nm.check_fits(acc, out_dtype(op), "accumulator")
    return [to_out(acc, op)]


def _check_padded(op: Operation, shape: list[int]) -> None:
    """Refuse a padded intermediate (conv/pool input) larger than the memory budget before np.pad allocates it:
    huge pads with matching strides can still declare a small output."""
    too_big = tensor_size_problem(shape, 64, LEVEL_NONE)
    if too_big is not None:
        raise ExecutionError(f"padded input: {too_big}", op=op_label(op))


def _pool_geometry(op: Operation, x: np.ndarray) -> tuple[list[int], list[int], list[int], int, int]:
    ky, kx = int_list(catalogue_attr(op, "kernel"))
    sy, sx = int_list(catalogue_attr(op, "stride"))
    pt, pb, pl, pr = int_list(catalogue_attr(op, "pad"))
    error_if(ky < 1 or kx < 1, op, "kernel < 1")
    error_if(sy < 1 or sx < 1, op, "stride < 1")
    error_if(min(pt, pb, pl, pr) < 0, op, "pad < 0")
    error_if(pr >= kx or pl >= kx or pt >= ky or pb >= ky, op, "pad >= kernel")
    _, ih, iw, _ = x.shape
    _check_padded(op, [x.shape[0], ih + pt + pb, iw + pl + pr, x.shape[3]])
    oh = _idiv_check(op, ih + pt + pb - ky, sy, "OH") + 1
    ow = _idiv_check(op, iw + pl + pr - kx, sx, "OW") + 1
    return [ky, kx], [sy, sx], [pt, pb, pl, pr], oh, ow


@kernel("AVG_POOL2D")
def avg_pool2d(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.3.2 AVG_POOL2D; integer division via reciprocal_scale + apply_scale_32 (single round)."""
    args = bind(op, ins)
    x = args.input
    izp, ozp = scalar(args.input_zp), scalar(args.output_zp)
    dt = in_dtype(op, 0)
    _zp_check(op, dt, izp, "input_zp")
    _zp_check(op, dt, ozp, "output_zp")
    ks, st, (pt, pb, pl, pr), oh, ow = _pool_geometry(op, x)
    pads = [(0, 0), (pt, pb), (pl, pr), (0, 0)]
    geo = (x.shape[1], x.shape[2], *ks, *st, pt, pb, pl, pr, oh, ow)
    if dt.is_float:
        # the spec's order: acc = 0, then each tap added in (ky, kx) order
        acc = _tap_sum(_padded(x, pads, 0, fdt()), ks, st, oh, ow, fdt(), ordered=True)
        return [to_out(np.divide(acc, _pool_counts(geo)[0].astype(fdt()), out=acc), op)]
    acc = _tap_sum(_padded(x, pads, izp, np.int64), ks, st, oh, ow, np.int64, ordered=False)
    if izp:  # padding holds input_zp: each of the KH*KW taps contributes x - input_zp, a padding tap nothing
        acc -= izp * ks[0] * ks[1]
    nm.check_fits(acc, DType.INT32, "accumulator")
    _, mult, shift = _pool_counts(geo)
    res = nm.apply_scale_32(acc, mult, shift, False) + ozp
    lo, hi = dt.range()
    return [to_out(np.clip(res, lo, hi, out=res), op)]


def _tap_sum(xp: np.ndarray, ks: list[int], st: list[int], oh: int, ow: int, dtype: Any,
             ordered: bool) -> np.ndarray:
    """The sum over the pooling window's taps of the padded input ``xp``: one add of a strided view per tap (each
    runs along OW*C when the stride along W is 1).  ``ordered``: from zero, in (ky, kx) order (the spec's float
    sum); else (exact integers) rows of the window first, then the rows' sums."""
    (kh, kw), (sy, sx) = ks, st

    def rows(a: np.ndarray, ky: int) -> np.ndarray:  # rows ky, ky + sy, ... of the output's
        return a[:, ky:ky + (oh - 1) * sy + 1:sy]

    def cols(a: np.ndarray, kx: int) -> np.ndarray:  # columns kx, kx + sx, ... of the output's
        return a[:, :, kx:kx + (ow - 1) * sx + 1:sx]

    if ordered:
        acc = np.zeros((xp.shape[0], oh, ow, xp.shape[3]), dtype)
        for ky in range(kh):
            for kx in range(kw):
                np.add(acc, cols(rows(xp, ky), kx), out=acc)
        return acc
    # the sum along each row of the window for every padded input row, then down the window's rows
    rsum = np.array(cols(xp, 0), dtype)
    for kx in range(1, kw):
        np.add(rsum, cols(xp, kx), out=rsum)
    acc = np.array(rows(rsum, 0))
    for ky in range(1, kh):
        np.add(acc, rows(rsum, ky), out=acc)
    return acc


@functools.lru_cache(maxsize=256)
def _pool_counts(geo: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For an input of IH x IW, kernel, stride, pads and output OH x OW (``_pool_geometry``'s): the number of real
    (not padding) taps of every output position, [1, OH, OW, 1] int64, and its reciprocal_scale (multiplier,
    shift).  Read-only, kept per geometry."""
    ih, iw, kh, kw, sy, sx, pt, pb, pl, pr, oh, ow = geo
    ones = np.pad(np.ones((1, ih, iw, 1), np.int64), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    count = windows(ones, [kh, kw], [sy, sx], [1, 1], [oh, ow]).sum(axis=(3, 4))
    mult, shift = nm.reciprocal_scale(count)
    out = (count, np.asarray(mult), np.asarray(shift))
    for a in out:
        a.flags.writeable = False
    return out


def _nan_mode(op: Operation) -> str:
    return str(catalogue_attr(op, "nan_mode")).upper()


@kernel("MAX_POOL2D")
def max_pool2d(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.3.8 MAX_POOL2D."""
    x = bind(op, ins).input
    ks, st, (pt, pb, pl, pr), oh, ow = _pool_geometry(op, x)
    pads = ((0, 0), (pt, pb), (pl, pr), (0, 0))
    if in_dtype(op, 0).is_float:
        ignore = _nan_mode(op) == "IGNORE"
        xp = np.pad(x.astype(fdt()), pads, constant_values=np.nan if ignore else -np.inf)
        win = windows(xp, ks, st, [1, 1], [oh, ow])
        red = np.fmax.reduce(win, axis=(3, 4)) if ignore else win.max(axis=(3, 4))
        return [to_out(red, op)]
    lo, _ = in_dtype(op, 0).range()
    xp = np.pad(x.astype(np.int64), pads, constant_values=lo)
    return [to_out(windows(xp, ks, st, [1, 1], [oh, ow]).max(axis=(3, 4)), op)]


@kernel("ARGMAX")
def argmax(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.3.1 ARGMAX: first maximum; PROPAGATE: first NaN wins; IGNORE: NaNs skipped (all-NaN -> 0)."""
    args = bind(op, ins)
    x = args.input
    axis = int(args.axis)
    error_if(axis < 0 or axis >= x.ndim, op, f"axis {axis} out of range for rank {x.ndim}")
    if in_dtype(op, 0).is_float:
        xf = x.astype(fdt())
        nan = np.isnan(xf)
        if _nan_mode(op) == "IGNORE":
            filled = np.where(nan, -np.inf, xf)
            idx = np.argmax(filled, axis=axis)
            # a slice whose non-NaN values are all -inf: the first non-NaN wins
            first_valid = np.argmax(~nan, axis=axis)
            allneg = np.all(nan | (filled == -np.inf), axis=axis)
            idx = np.where(allneg, first_valid, idx)
        else:
            idx = np.where(nan.any(axis=axis), np.argmax(nan, axis=axis), np.argmax(np.where(nan, 0, xf), axis=axis))
        return [to_out(idx, op)]
    return [to_out(np.argmax(x, axis=axis), op)]


def _check_pow2(op: Operation, h: int, w: int) -> None:
    error_if(h & (h - 1) or w & (w - 1), op, f"H={h}, W={w} must be powers of two")


@kernel("FFT2D")
def fft2d(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.3.6 FFT2D: unnormalised forward (inverse=False) or backward DFT, computed in float64."""
    args = bind(op, ins)
    re, im = args.input_real, args.input_imag
    _check_pow2(op, re.shape[1], re.shape[2])
    z = re.astype(np.float64) + 1j * im.astype(np.float64)
    if bool(op.attrs.get("inverse", False)):
        y = np.fft.ifft2(z, axes=(1, 2)) * (re.shape[1] * re.shape[2])
    else:
        y = np.fft.fft2(z, axes=(1, 2))
    return [to_out(y.real, op, 0), to_out(y.imag, op, 1)]


@kernel("RFFT2D")
def rfft2d(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    """spec 2.3.9 RFFT2D: forward real DFT, outputs [N,H,W/2+1]."""
    re = bind(op, ins).input_real
    _check_pow2(op, re.shape[1], re.shape[2])
    y = np.fft.rfft2(re.astype(np.float64), axes=(1, 2))
    require(np.isfinite(y).all() or not np.isfinite(re).all(), op, "finite")
    return [to_out(y.real, op, 0), to_out(y.imag, op, 1)]
