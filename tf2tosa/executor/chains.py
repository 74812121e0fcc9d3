"""Prepared chains: a convolution and the op that alone reads its result (an integer CONV2D / DEPTHWISE_CONV2D and its
RESCALE, a float32 one and its CLAMP, or a float32 one alone), run as one blocked pass once the program has shown, on
runs that checked everything, that no REQUIRE of the chain can depend on the data.

The runner (``runner._run_fused`` and ``_run_fused_clamp``) runs a pair through the kernels, with every ERROR_IF and
REQUIRE, while it has not met it twice with a given input shape and given constant operands; on the second such
run it calls :func:`prepare` / :func:`prepare_float`, and later runs with the same input shape and the very same
constant arrays call ``run`` of the prepared form.  For the integer pair (:class:`ConvRescale`):

* the convolution's accumulator is bounded by its weights (``_GemmWeights.plan``: ``|x - izp| * max_oc sum_k
  |w - wzp| + max|bias|``); that bound already proves the i32 accumulator and bias REQUIREs, and here also RESCALE's
  value REQUIRE ``|v| < 2^(shift-1)`` for the smallest shift (where it is too loose, each block's extremes are
  checked against the largest ``|v|`` for which everything below holds, and a failing block sends the run back
  through the kernels);
* with ``T = v * m + 2^(s-1) ± 2^30 (DOUBLE_ROUND, s > 31) + (output_zp - lo + d) * 2^s`` (``d = lo mod 2^bits``)
  bounded below 2^53 the RESCALE is exact in float64 (the argument of ``numerics._rescale_32_float``):
  ``floor(T * 2^-s)`` clipped to ``[d, d + hi - lo]`` and cast to the unsigned type (modulo 2^bits) is the bit
  pattern of ``clip(apply_scale_32(v, m, s) + output_zp, lo, hi)``;
* when ``output_zp == lo`` (a ReLU folded into the quantization: MobileNetV2's expansion and depthwise layers) the
  double-round sign term needs no data: for ``v < 0`` both ``floor(v * m * 2^-s + 1/2 ± 2^(30-s))`` are ``<= 0``,
  so the result is clipped to ``lo`` either way, and ``+2^(30-s)`` (the term of ``v >= 0``) joins the constant, with
  the bias term ``shift * m * 2^-s``.

Every pass works on a block of output rows that stays in cache: the GEMM of the block (``np.matmul(..., out=)``) or
the depthwise einsum band, the float64 scaling and constant, the clip and the narrowing cast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.graph import Operation
from ..ir.types import DType
from . import tensor_ops as to
from .numerics import EXACT64, SIGN_BIT
from .registry import bind, catalogue_attr, int_list, scalar

#: the clip ufunc itself (np.clip's Python wrapper costs more than a cached block's clip); numpy 1.x and 2.x
_uclip: Any = (getattr(np, "_core", None) or np.core).umath.clip

#: output elements per block of the chain (the float64 scratch of a block: 256 KiB, in L2 with the block's other
#: buffers; 32K measured ~2% faster than 64K on the MobileNetV2 int8 chains, sum of per-chain minima)
CHAIN_BLOCK = 1 << 15


@dataclass
class ConvRescale:
    """A CONV2D / DEPTHWISE_CONV2D → RESCALE pair proven to need no data-dependent check (see the module text)."""

    #: None when the weight bound proves the RESCALE exact and its REQUIREs, else the largest |v| for which they hold
    #: (checked on each block's extremes)
    vlimit: float | None
    op: Operation
    kind: str
    #: CONV2D: (pads for np.pad, kernel, stride, dilation, output spatial sizes, 1x1-stride-1-unpadded);
    #: DEPTHWISE_CONV2D: the geometry tuple of ``tensor_ops._depthwise_einsum``
    geometry: Any
    izp: int
    ft: Any
    wm: np.ndarray
    shift: np.ndarray  # per output channel, in ``ft``: bias - input_zp * sum_k (w - wzp)
    f: np.ndarray  # per channel m * 2^-s (float64), [C] or [1]
    c: np.ndarray  # per channel 1/2 + output_zp - lo + d (+ 2^(30-s) when folded), float64 [C] or [1]
    dbits: np.ndarray | None  # per channel bit pattern of 2^(30-s) (int64), when the sign term needs the data
    span: int  # hi - lo
    #: lo modulo 2^bits (``c`` holds it too): the narrowing clips to [d, d + span] and the cast to the unsigned type
    #: of the output's width, which keeps the value modulo 2^bits, gives the bits of ``value - d + lo`` at once
    d: int
    out_shape: tuple[int, ...]
    out_dtype: np.dtype
    #: 1x1 CONV2D with few input terms: [K + 1, OC] float64 ((w - wzp) * m * 2^-s, and the constant row), so that
    #: one float64 GEMM of [x, 1] gives v * m * 2^-s + the rounding constant exactly (see prepare)
    w64: np.ndarray | None = None
    #: ``c`` holds ``shift * m * 2^-s`` too (the raw accumulator is scaled without adding the shift first)
    folded: bool = False
    #: CONV2D whose sums need float64 as a whole: column ranges of ``wm`` (then the float32 matrix) over which
    #: float32 GEMMs are exact; their results are summed into the float64 accumulator (see _gemm)
    chunks: list[tuple[int, int]] | None = None
    #: the per-channel constants tiled for the blocks, made on the first run
    tiles: _Tiles | None = None

    def run(self, x: np.ndarray) -> np.ndarray | None:
        """The RESCALE's result for convolution input ``x`` (same shape and dtype as when prepared); None when a
        block's extremes leave the proven range (the caller then runs the kernels, which check every element)."""
        try:
            return self._run(x)
        except _Unproven:
            return None

    def _run(self, x: np.ndarray) -> np.ndarray:
        oc = self.shift.shape[0]
        out = np.empty(self.out_shape, self.out_dtype)
        o2 = out.reshape(-1, oc).view(np.dtype(f"u{self.out_dtype.itemsize}"))
        t = self.tiles
        if t is None:
            t = self.tiles = _Tiles(self, oc)
        rows = max(t.r, CHAIN_BLOCK // oc // t.r * t.r)  # a multiple of the tiles' rows
        if self.kind == "CONV2D" and self.w64 is not None:
            # 1x1, stride 1, no padding (prepare makes w64 for these only): [x, 1] made a block at a time, in cache
            m = o2.shape[0]
            k = self.w64.shape[0] - 1
            x2 = x.reshape(m, k)
            if rows < to.GEMM_ROWS:
                rows = to.GEMM_ROWS
            n = min(rows, m)
            cols = np.empty((n, k + 1), np.float64)
            cols[:, k] = 1.0
            scratch = _Scratch(t, n, oc)
            for i in range(0, m, rows):
                b = scratch.b[:min(rows, m - i)]
                c = cols[:b.shape[0]]
                np.copyto(c[:, :k], x2[i:i + rows])
                np.matmul(c, self.w64, out=b)
                scratch.narrow(b, o2[i:i + rows])
            return out
        if self.kind == "CONV2D":
            plain = self.geometry[-1]
            gt = np.float32 if self.chunks else self.ft  # the GEMM operands' type
            cols = x.reshape(-1, x.shape[-1]) if plain else self._cols(x, gt)
            if rows < to.GEMM_ROWS:
                rows = -(-to.GEMM_ROWS // t.r) * t.r
            n = min(rows, cols.shape[0])
            acc = np.empty((n, oc), self.ft)
            # a 1x1 CONV2D converts its raw input a block at a time, while in cache (no float copy of the whole input)
            cbuf = np.empty((n, cols.shape[1]), gt) if plain else None
            part = np.empty((n, oc), np.float32) if self.chunks else None
            scratch = _Scratch(t, n, oc)
            for i in range(0, cols.shape[0], rows):
                a = acc[:min(rows, cols.shape[0] - i)]
                if cbuf is not None:
                    cb = cbuf[:a.shape[0]]
                    np.copyto(cb, cols[i:i + rows], casting="unsafe")  # int8/int16 values: exact in ft
                    self._gemm(cb, a, part)
                else:
                    self._gemm(cols[i:i + rows], a, part)
                scratch.finish(a, o2[i:i + rows])
            return out
        scratch = _Scratch(t, min(rows, o2.shape[0]), oc)
        if x.shape[0] == 1:
            # each band of output rows is rescaled right after its einsum, while it is in cache
            o4 = o2.reshape(self.out_shape)

            def band(res: np.ndarray, r0: int, r1: int) -> None:
                a, ob = res[:, r0:r1].reshape(-1, oc), o4[:, r0:r1].reshape(-1, oc)
                for i in range(0, a.shape[0], rows):
                    scratch.finish(a[i:i + rows], ob[i:i + rows])

            to._depthwise_einsum(self.op, x, self.wm, self.izp, self.ft, self.geometry, band)
            return out
        acc = to._depthwise_einsum(self.op, x, self.wm, self.izp, self.ft, self.geometry).reshape(-1, oc)
        for i in range(0, acc.shape[0], rows):
            scratch.finish(acc[i:i + rows], o2[i:i + rows])
        return out

    def _gemm(self, c: np.ndarray, a: np.ndarray, part: np.ndarray | None) -> None:
        """``a = c @ wm``: one GEMM, or with ``chunks`` one float32 GEMM per column range (each exact) summed into
        the float64 ``a`` (exact: every partial sum is an integer below the plan's 2^53 bound)."""
        if self.chunks is None:
            np.matmul(c, self.wm, out=a)
        else:
            to.chunked_matmul(c, self.wm, self.chunks, a, None if part is None else part[:a.shape[0]])

    def _cols(self, x: np.ndarray, ft: Any) -> np.ndarray:
        pads, ks, stride, dil, outs, plain = self.geometry
        m = x.shape[0] * math.prod(outs)
        if plain:
            return x.astype(ft).reshape(m, x.shape[-1])
        return to.windows(to._padded(x, pads, self.izp, ft), ks, stride, dil, outs).reshape(m, -1)


#: most input terms (K) of a 1x1 CONV2D whose chain runs one float64 GEMM of scaled weights instead of float32 GEMM
#: and four float64 passes (a float64 GEMM costs about twice float32's per term: below ~32 terms that is less)
F64_GEMM_K = 32


class _Unproven(Exception):
    """A block's values leave the range in which the chain is proven exact."""


#: fewest elements of a tiled per-channel constant (the inner loop of a same-shape operation runs along them)
TILE = 1 << 10


class _Tiles:
    """A chain's per-channel constants tiled to ``r`` rows (at least :data:`TILE` elements; made once per chain):
    a block of rows is operated on as ``[k / r, r * C]`` against them, so numpy's inner loop runs along ``r * C``
    contiguous elements instead of C."""

    def __init__(self, p: ConvRescale, c: int) -> None:
        self.p = p
        self.r = max(1, -(-TILE // c))
        self.shift = self._tile(p.shift, c)
        self.f = self._tile(p.f, c)
        self.c = self._tile(p.c, c)
        self.dbits = self._tile(p.dbits, c) if p.dbits is not None else None

    def _tile(self, v: np.ndarray, c: int) -> Any:
        if v.size == 1:
            return v.reshape(())[()]  # a numpy scalar of v's type
        return _tile(v, self.r, c).reshape(-1)


def _per_channel(fn: Any, a: np.ndarray, t: Any, r: int, out: np.ndarray | None = None) -> None:
    """``fn(a, t, out=out)`` for a contiguous block ``a`` [k, C] and a constant tiled to ``r`` rows (or a scalar)."""
    o = a if out is None else out
    if not isinstance(t, np.ndarray):
        fn(a, t, out=o)
        return
    k, c = a.shape
    q = k - k % r
    if q:
        fn(a[:q].reshape(-1, r * c), t, out=o[:q].reshape(-1, r * c))
    if k > q:
        fn(a[q:], t[:(k - q) * c].reshape(k - q, c), out=o[q:])


class _Scratch:
    """The per-run scratch buffers of a chain's blocks."""

    def __init__(self, t: _Tiles, n: int, c: int) -> None:
        self.t = t
        self.b = np.empty((n, c), np.float64)
        self.sb = np.empty((n, c), np.int64) if t.dbits is not None else None
        self.i32 = np.empty((n, c), np.int32)

    def finish(self, a: np.ndarray, ob: np.ndarray) -> None:
        """``ob`` (unsigned view of the output rows) from the block's raw accumulator ``a`` (written over)."""
        k = a.shape[0]
        t = self.t
        p, r = t.p, t.r
        if not p.folded:
            _per_channel(np.add, a, t.shift, r)  # exact: the plan's bound holds the sum in ft
            if p.vlimit is not None and a.size and not (-a.min() <= p.vlimit and a.max() <= p.vlimit):
                raise _Unproven
        if a.dtype == np.float64:
            b = a
        else:
            b = self.b[:k]
            np.copyto(b, a)
        _per_channel(np.multiply, b, t.f, r)  # v * m * 2^-s, exact (|v * m| < 2^53)
        if t.dbits is not None:
            assert self.sb is not None
            sb = self.sb[:k]
            np.bitwise_and(b.view(np.int64), SIGN_BIT, out=sb)  # ±2^(30-s) with the sign of v * m
            _per_channel(np.bitwise_or, sb, t.dbits, r)
            b += sb.view(np.float64)
        _per_channel(np.add, b, t.c, r)
        self.narrow(b, ob)

    def narrow(self, b: np.ndarray, ob: np.ndarray) -> None:
        """``ob`` = the bit pattern of ``clip(floor(b) - d, 0, hi - lo) + lo`` (``b`` float64 holding the offset
        ``d = lo mod 2^bits``, written over)."""
        p = self.t.p
        # |b| < 2^30 + 2^17 + 2^16 < 2^31 (under the value REQUIRE apply_scale_32's result lies in (-2^30, 2^30],
        # and |1/2 + output_zp - lo| < 2^17, d < 2^16 for an 8- or 16-bit output): the cast to i32 truncates, and
        # truncation and floor differ only below 0 < d, which the clip makes d either way; the cast to the unsigned
        # type keeps the clipped value modulo 2^bits, and d = lo modulo 2^bits
        i = self.i32[:b.shape[0]]
        np.copyto(i, b, casting="unsafe")
        _uclip(i, p.d, p.d + p.span, out=i)
        np.copyto(ob, i, casting="unsafe")


def _geometry(opcode: str, w: np.ndarray, pad: list[int], stride: list[int], dil: list[int], outs: Any) -> Any:
    """A prepared convolution's geometry: for CONV2D (pads for np.pad, kernel, stride, dilation, output sizes,
    1x1-stride-1-unpadded), for DEPTHWISE_CONV2D the geometry tuple of ``tensor_ops._depthwise_einsum``."""
    if opcode == "CONV2D":
        pads = [(0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)]
        plain = all(k == 1 for k in w.shape[1:3]) and stride == [1, 1] and not any(pad)
        return (pads, list(w.shape[1:3]), stride, dil, list(outs), plain)
    return ((pad[0], pad[1], pad[2], pad[3]), tuple(stride), tuple(dil), tuple(outs))


def _tile(v: np.ndarray, n: int, c: int) -> np.ndarray:
    return np.ascontiguousarray(np.broadcast_to(v.reshape(-1) if v.size > 1 else v.reshape(()), (n, c)))


def prepare(conv: Operation, ins: list[np.ndarray], rescale: Operation, r_rest: list[np.ndarray]
            ) -> ConvRescale | None:
    """The prepared chain of ``conv`` (operands ``ins``) and ``rescale`` (operands after the first: ``r_rest``), or
    None when a bound does not prove it.  Call only after the pair ran through the kernels with these operands
    (every ERROR_IF and REQUIRE then held; this only reads the values)."""
    if conv.opcode not in ("CONV2D", "DEPTHWISE_CONV2D") or to.PRECISE.get():
        return None
    form = _plain_rescale(rescale, r_rest)
    if form is None:
        return None
    ot, ozp, double = form
    r = rescale.attrs
    mult, shift_v = r_rest[0], r_rest[1]
    args = bind(conv, ins)
    x, w, bias = args.input, args.weight, args.bias
    izp, wzp = int(scalar(args.input_zp)), int(scalar(args.weight_zp))
    in_t = conv.operands[0].type.dtype
    lo_i, hi_i = in_t.range()
    zpb = to._zp_bound(in_t, izp)
    oc, prep = _conv_weights(conv.opcode, w, wzp)
    plan = prep.plan(max(abs(lo_i), abs(hi_i), abs(izp)), zpb, izp, bias, conv.results[0].type.dtype)
    if plan is None:
        return None
    # with column ranges (a CONV2D whose sums need float64 as a whole) wm is float32: float32 GEMMs over ranges of K
    # whose sums stay below 2^24, summed in float64 - exact, at float32's speed
    ft, wm, shift, chunks = plan
    per_channel = bool(r.get("per_channel", False))
    m = np.asarray(mult).reshape(-1).astype(np.int64)
    s = np.asarray(shift_v).reshape(-1).astype(np.int64)
    if (m.size != (oc if per_channel else 1) or m.size != s.size or not bool(np.all(m >= 0))
            or not bool(np.all((s >= 2) & (s <= 62)))):
        return None
    lo, hi = ot.range()
    bmax = float(np.abs(bias).max()) if bias.size else 0.0
    bound = zpb * prep.abs_sum + bmax  # |v| for the i32 value v the RESCALE reads
    smax, mmax = int(s.max()), int(m.max())
    ut = np.dtype(f"u{ot.np_dtype().itemsize}")
    d = lo % (1 << (8 * ut.itemsize))  # the offset of the narrowing (see _Scratch.narrow)
    limit = _require_limit(s, m, ozp, lo, d)
    if limit < 0:
        return None
    # the bound proves it for every input, or each block's extremes are checked (a failing block sends the run back
    # through the kernels, which check every element)
    vlimit = None if bound <= limit else float(limit)
    big = s > 31
    dterm = np.ldexp(np.where(big, 1.0, 0.0), 30 - s) if double else np.zeros(s.shape)
    fold = not double or ozp == lo or not bool(np.any(big))
    c = 0.5 + float(ozp - lo + d) + (dterm if fold else 0.0)
    geometry = _geometry(conv.opcode, w, int_list(args.pad), int_list(args.stride), int_list(args.dilation),
                         conv.results[0].type.shape[1:3])
    dims = tuple(rescale.results[0].type.shape)
    out_shape = tuple(d for d in dims if isinstance(d, int))
    if dims != tuple(conv.results[0].type.shape) or len(out_shape) != len(dims):
        return None
    if x.shape[0] != out_shape[0]:
        return None
    f = np.ldexp(m.astype(np.float64), -s)
    c_arr = np.asarray(c, np.float64).reshape(-1)
    w64, folded = None, False
    shift_i = np.asarray(shift).reshape(-1)
    mm, ss = np.broadcast_to(m, (oc,)).astype(np.int64), np.broadcast_to(s, (oc,)).astype(np.int64)
    # every partial sum of x * (w - wzp) * m plus the constant (shift * m + 2^(s-1) + (output_zp - lo + d) * 2^s
    # (+ 2^30)), over 2^s: below 2^53 the raw accumulator times m * 2^-s plus the constant is exact in float64
    reach = (max(abs(lo_i), abs(hi_i), abs(izp)) * math.ceil(prep.abs_sum) + int(np.abs(shift_i).max())) * mmax \
        + (1 << (smax - 1)) + (1 << 30) + (abs(ozp) + abs(lo) + d + 1) * (1 << smax)
    if fold and vlimit is None and reach < EXACT64:
        # the sign term needs no data and the bound proves the REQUIREs: the bias term joins the constant
        const = _constant_row(shift_i, mm, ss, np.broadcast_to(c_arr, (oc,)))
        if conv.opcode == "CONV2D" and geometry[-1] and wm.shape[0] <= F64_GEMM_K:
            w64 = np.empty((wm.shape[0] + 1, oc), np.float64)
            np.multiply(prep.matrix(np.float64), np.ldexp(mm.astype(np.float64), -ss), out=w64[:-1])
            w64[-1] = const
        c_arr, folded = const, True
    return ConvRescale(
        vlimit, conv, conv.opcode, geometry, izp, ft, wm, np.asarray(shift, ft).reshape(-1), f, c_arr,
        None if fold else np.ldexp(np.where(big, 1.0, 0.0), 30 - s).view(np.int64),
        hi - lo, d, out_shape, ot.np_dtype(), w64, folded, chunks)


def _plain_rescale(rescale: Operation, r_rest: list[np.ndarray]) -> tuple[DType, int, bool] | None:
    """The output type, output zero point and double rounding of a RESCALE the prepared chain can do (scale32, signed,
    int32 to int8/int16, input zero point 0), or None."""
    r = rescale.attrs
    it, ot = rescale.operands[0].type.dtype, rescale.results[0].type.dtype
    if (not bool(r.get("scale32", True)) or bool(r.get("input_unsigned", False))
            or bool(r.get("output_unsigned", False)) or it is not DType.INT32 or ot not in (DType.INT8, DType.INT16)):
        return None
    r_izp, r_ozp = r_rest[2], r_rest[3]
    if int(scalar(r_izp)) != 0:
        return None
    ozp = int(scalar(r_ozp))
    double = str(r.get("rounding_mode", "SINGLE_ROUND")).upper() == "DOUBLE_ROUND"
    return ot, ozp, double


def _conv_weights(opcode: str, w: np.ndarray, wzp: int) -> tuple[int, to._GemmWeights]:
    """The output channels and the prepared (cached) weights of a CONV2D or DEPTHWISE_CONV2D weight ``w``."""
    if opcode == "CONV2D":
        oc = w.shape[0]
        kk = int(np.prod(w.shape[1:]))
        prep = to._prepared(w, ("gemm", wzp), lambda: to._GemmWeights(w.reshape(oc, kk), wzp))
    else:
        oc = w.shape[2] * w.shape[3]
        prep = to._prepared(w, ("dwsum", wzp), lambda: to._DepthwiseWeights(w, wzp))
    return oc, prep


def _require_limit(s: np.ndarray, m: np.ndarray, ozp: int, lo: int, d: int) -> int:
    """The largest |v| for which RESCALE's value REQUIRE holds whatever the shift and every float64 step is exact
    (negative when there is none)."""
    smin, smax, mmax = int(s.min()), int(s.max()), int(m.max())
    room = EXACT64 - 1 - (1 << (smax - 1)) - (1 << 30) - (abs(ozp) + abs(lo) + d + 1) * (1 << smax)
    return min((1 << (smin - 1)) - 1, room // mmax if mmax else room)


def _constant_row(shift: np.ndarray, m: np.ndarray, s: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per channel ``shift * m * 2^-s + c`` (``c`` = 1/2 + output_zp - lo + d (+ 2^(30-s))) from Python integers (the
    caller bounds it below 2^53 times 2^-s, so it is exact; ``shift * m`` alone may not be in float64)."""
    out = np.empty(m.shape[0], np.float64)
    for j in range(m.shape[0]):
        scaled = int(shift[j]) * int(m[j]) + int(np.ldexp(float(c[j]), int(s[j])))
        out[j] = np.ldexp(float(scaled), -int(s[j]))
    return out


@dataclass
class ConvClamp:
    """A float32 CONV2D / DEPTHWISE_CONV2D and the CLAMP that alone reads its result, as one pass per block of output
    rows (the GEMM or depthwise band, the bias add, the clip) - the same operations as the two kernels, in cache."""

    op: Operation
    kind: str
    geometry: Any
    w: np.ndarray  # CONV2D: [K, OC] float32; DEPTHWISE_CONV2D: [KH, KW, C, M] float32
    bias: np.ndarray  # float32 [OC] or [1]
    lo: np.float32 | None  # None: no CLAMP (a convolution alone: the bias add only)
    hi: np.float32 | None
    out_shape: tuple[int, ...]
    #: the bias tiled to a block's rows (see _bias_rows)
    tiled: np.ndarray | None = None

    def _bias_rows(self, n: int, c: int) -> np.ndarray:
        """The bias tiled to ``n`` rows of ``c`` channels (made on the first run, read-only)."""
        t = self.tiled
        if t is None or t.shape != (n, c):
            t = self.tiled = _tile(self.bias, n, c)
            t.flags.writeable = False
        return t

    def _clip(self, a: np.ndarray, bias: np.ndarray) -> None:
        a += bias  # bias tiled to the block: a same-shape add runs at full vector speed
        if self.lo is not None:
            _uclip(a, self.lo, self.hi, out=a)  # hi != 0: the spec's max-then-min order (activation._float_clamp)

    def run(self, x: np.ndarray, pads: tuple[int, int, int, int] | None = None, xp_full: np.ndarray | None = None,
            residual: tuple[np.ndarray, bool] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """(the result, None) for input ``x``.  A CONV2D of one image given ``pads`` (top, bottom, left, right)
        writes its result inside a zero border of those pads, a block of whole output rows at a time while in cache,
        and returns (the inner view, the bordered array): the padded input a following depthwise needs, without the
        depthwise's own padded copy.  A DEPTHWISE_CONV2D given ``xp_full`` (``x`` inside such a border) reads its
        bands from it.  A CONV2D given ``residual`` (the other operand of the ADD that alone reads its result, and
        whether the convolution is the ADD's first operand) adds it to each block after the bias (``np.add`` in the
        ADD's operand order) and returns the ADD's result."""
        if self.kind == "CONV2D":
            pads4, ks, stride, dil, outs, plain = self.geometry
            m = x.shape[0] * math.prod(outs)
            if plain:
                cols = x.reshape(m, x.shape[-1])
            else:
                cols = to.windows(to._padded(x, pads4, 0, np.float32), ks, stride, dil, outs).reshape(m, -1)
            oc, ow = self.w.shape[1], outs[-1]
            rows = -(-max(to.GEMM_ROWS, to.GEMM_BLOCK // oc) // ow) * ow  # gemm_rows's blocks
            bias = self._bias_rows(min(rows, m), oc)
            if residual is not None:
                r2, first = residual[0].reshape(m, oc), residual[1]

                def add(blk: np.ndarray, i: int) -> None:
                    self._clip(blk, bias[:blk.shape[0]])
                    rb = r2[i:i + blk.shape[0]]
                    if first:
                        np.add(blk, rb, out=blk)
                    else:
                        np.add(rb, blk, out=blk)

                return to.gemm_rows(cols, self.w, add, align=ow).reshape(self.out_shape), None
            if pads is None or x.shape[0] != 1:
                out = to.gemm_rows(cols, self.w, lambda blk, _i: self._clip(blk, bias[:blk.shape[0]]), align=ow)
                return out.reshape(self.out_shape), None
            buf, inner = _bordered(self.out_shape, pads)
            if ow >= to.GEMM_ROW_CALLS and m % ow == 0:
                # one BLAS call per output row, each written inside the border: no copy of the result
                bias3 = bias.reshape(-1, ow, oc)
                to.gemm_rows(cols, self.w, lambda blk, _i: self._clip(blk, bias3[:blk.shape[0]]), align=ow,
                             out=inner[0])
                return inner, buf

            def each(blk: np.ndarray, i: int) -> None:
                self._clip(blk, bias[:blk.shape[0]])
                k = blk.shape[0] // ow  # whole output rows (the blocks are aligned to them)
                inner[0, i // ow:i // ow + k] = blk.reshape(k, ow, oc)

            to.gemm_rows(cols, self.w, each, align=ow, keep=False)
            return inner, buf
        oc = self.out_shape[-1]
        bias = self._bias_rows(self.out_shape[2], oc)  # one output row: the add's inner loop runs along OW*C

        def band(res: np.ndarray, r0: int, r1: int) -> None:
            b = res[:, r0:r1]
            self._clip(b.reshape(*b.shape[:3], oc) if b.ndim == 5 else b, bias)  # channel c*M + m

        res = to._depthwise_einsum(self.op, x, self.w, 0, np.float32, self.geometry, band, xp_full)
        return res.reshape(self.out_shape), None


def _bordered(shape: tuple[int, ...], pads: tuple[int, int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """A float32 [N, H + top + bottom, W + left + right, C] array whose border is zero, and its inner [N, H, W, C]
    view (for the caller to fill)."""
    n, h, w, c = shape
    pt, pb, pl, pr = pads
    buf = np.empty((n, h + pt + pb, w + pl + pr, c), np.float32)
    buf[:, :pt] = 0
    buf[:, pt + h:] = 0
    buf[:, pt:pt + h, :pl] = 0
    buf[:, pt:pt + h, pl + w:] = 0
    return buf, buf[:, pt:pt + h, pl:pl + w]


def prepare_float(conv: Operation, ins: list[np.ndarray], clamp: Operation | None) -> ConvClamp | None:
    """The prepared float chain of ``conv`` (operands ``ins``) and ``clamp`` (or the convolution alone), or None where
    it would not do what the kernels do (padding with non-finite weights, NaN-ignoring or zero-topped clamps, other
    float types, precise mode).  Call only after the pair ran through the kernels with these operands."""
    if to.PRECISE.get() or conv.opcode not in ("CONV2D", "DEPTHWISE_CONV2D"):
        return None
    last = conv if clamp is None else clamp
    if any(v.type.dtype is not DType.FP32 for v in (*conv.operands[:3], conv.results[0], last.results[0])):
        return None
    lo = hi = None
    if clamp is not None:
        if str(clamp.attrs.get("nan_mode", "PROPAGATE")).upper() != "PROPAGATE":
            return None
        lo = np.float32(np.asarray(catalogue_attr(clamp, "min_val")).reshape(-1)[0])
        hi = np.float32(np.asarray(catalogue_attr(clamp, "max_val")).reshape(-1)[0])
        if hi == 0 or np.isnan(lo) or np.isnan(hi) or hi < lo:
            return None
    args = bind(conv, ins)
    x, w, bias = args.input, args.weight, args.bias
    pad, stride, dil = int_list(args.pad), int_list(args.stride), int_list(args.dilation)
    if any(pad) and not bool(np.isfinite(w).all()):
        return None  # the kernels sum tap by tap over the real inputs only
    dims = tuple(conv.results[0].type.shape)
    out_shape = tuple(d for d in dims if isinstance(d, int))
    if len(out_shape) != len(dims) or dims != tuple(last.results[0].type.shape) or x.shape[0] != out_shape[0]:
        return None
    if conv.opcode == "CONV2D":
        wm = to.float_weight_matrix(w, np.float32)  # the kernel's own GEMM operand
    else:
        n_, ih, iw, c = x.shape
        if to.tensor_size_problem([n_, ih + pad[0] + pad[1], iw + pad[2] + pad[3], c], 64, to.LEVEL_NONE) is not None:
            return None
        wm = w
    geometry = _geometry(conv.opcode, w, pad, stride, dil, out_shape[1:3])
    return ConvClamp(conv, conv.opcode, geometry, wm, np.asarray(bias, np.float32).reshape(-1), lo, hi, out_shape)
