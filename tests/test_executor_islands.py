"""Elementwise islands of one 8- or 16-bit tensor (tf2tosa.executor.islands): from their third run the runner reads
them from tables the kernels made on every code.  Every run is checked against the ops written out on Python
integers from the spec's pseudo-code (apply_scale_32, MUL's rounding shift, TABLE), element by element."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.executor_testing import Const, GraphBuilder, In
from tf2tosa.executor import run, run_checked
from tf2tosa.executor.runner import _plan
from tf2tosa.ir.types import DType as D

_RESCALE = {"scale32": True, "per_channel": False, "input_unsigned": False, "output_unsigned": False}


def _scale_32(v: int, m: int, s: int, double: bool) -> int:
    """spec apply_scale_32 on Python integers."""
    r = 1 << (s - 1)
    if double and s > 31:
        r += (1 << 30) if v >= 0 else -(1 << 30)
    return (v * m + r) >> s


def _rescale(x: int, m: int, s: int, izp: int, ozp: int, bits: int, double: bool = False) -> int:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return min(max(_scale_32(x - izp, m, s, double) + ozp, lo), hi)


def _mul(a: int, b: int, shift: int) -> int:
    """spec MUL, i32 with shift > 0: the 64-bit product rounded half up by the shift."""
    return (a * b + (1 << (shift - 1))) >> shift


def _rescale_op(b: GraphBuilder, x: Any, m: int | list[int], s: int | list[int], izp: int, ozp: int, in_t: D,
                out_t: D, double: bool = False) -> Any:
    per_channel = isinstance(m, list)
    zp_t = {D.INT8: D.INT8, D.INT16: D.INT16, D.INT32: D.INT32}
    (r,) = b.add("RESCALE", [x, Const(np.array(m if per_channel else [m]), D.INT32),
                             Const(np.array(s if isinstance(s, list) else [s]), D.INT8),
                             Const(np.array([izp]), zp_t[in_t]), Const(np.array([ozp]), zp_t[out_t])], out_t,
                 dict(_RESCALE, per_channel=per_channel, rounding_mode="DOUBLE_ROUND" if double else "SINGLE_ROUND"),
                 output=False)
    return r


def _all_codes(shape: tuple[int, ...], bits: int = 8) -> np.ndarray:
    n = 1 << bits
    codes = np.arange(-(n // 2), n // 2, dtype=np.int64)
    return np.resize(codes, shape).astype(np.int8 if bits == 8 else np.int16)


def _three_runs(b: GraphBuilder) -> list[dict[str, np.ndarray]]:
    return [run(b.graph, b.feed) for _ in range(3)]


def test_swish_island_is_one_table_and_equals_the_ops_on_every_code() -> None:
    """x * sigmoid(x) as TFLite's int8 lowering emits it (TABLE, RESCALE, RESCALE, MUL, RESCALE): one island of
    five ops; the TABLE's result is also a graph output (an exposed intermediate).  Every run, the table's too,
    equals the five ops on Python integers for all 256 codes."""
    rng = np.random.default_rng(3)
    x = _all_codes((1, 4, 64, 3))
    table = rng.integers(-128, 128, 256).astype(np.int8)
    b = GraphBuilder("swish")
    xv = b._operand(In(x, D.INT8, name="x"))
    (t,) = b.add("TABLE", [xv, Const(table, D.INT8)], D.INT8, output=True)
    a = _rescale_op(b, xv, 1_431_655_765, 21, -3, 0, D.INT8, D.INT32)
    c = _rescale_op(b, t, 1_879_048_192, 22, 5, 0, D.INT8, D.INT32)
    (p,) = b.add("MUL", [a, c, Const(np.array([13]), D.INT8)], D.INT32, output=False)
    y = _rescale_op(b, p, 1_518_500_250, 42, 0, -7, D.INT32, D.INT8, double=True)
    b.graph.outputs = [t, y]
    want_t, want_y = [], []
    for v in x.reshape(-1).tolist():
        tv = int(table[v + 128])
        pv = _mul(_rescale(v, 1_431_655_765, 21, -3, 0, 32), _rescale(tv, 1_879_048_192, 22, 5, 0, 32), 13)
        want_t.append(tv)
        want_y.append(_rescale(pv, 1_518_500_250, 42, 0, -7, 8, True))
    runs = _three_runs(b)
    (island,) = _plan(b.graph).islands.values()
    assert [op.opcode for op in island.ops] == ["TABLE", "RESCALE", "RESCALE", "MUL", "RESCALE"]
    assert island.channels is None and [v.name for v in island.exposed] == [t.name, y.name]
    assert [e[2] is not None for e in _plan(b.graph).chains.values()] == [True]  # the tables were made
    for res in runs:
        assert res[t.name].reshape(-1).tolist() == want_t
        assert res[y.name].reshape(-1).tolist() == want_y
    assert len(set(want_y)) > 100


@pytest.mark.parametrize("constant_first", [False, True])
def test_per_channel_island_takes_in_a_rescaled_constant(constant_first: bool) -> None:
    """A BatchNorm left as int8 MUL and ADD by per-channel constants (DenseNet): the MUL's constant operand is a
    RESCALE of a CONST, which only the island reads, so the island computes it too (or, when that RESCALE comes
    before the island's first op, reads the value it made); the table is [256, C]."""
    rng = np.random.default_rng(5)
    ch = 6
    x = _all_codes((1, 8, 32, ch))
    scale = rng.integers(-128, 128, (1, 1, 1, ch)).astype(np.int8)
    offset = rng.integers(-(1 << 12), 1 << 12, (1, 1, 1, ch)).astype(np.int32)
    b = GraphBuilder("batchnorm")
    xv = b._operand(In(x, D.INT8, name="x"))
    if constant_first:
        k = _rescale_op(b, b._operand(Const(scale, D.INT8)), 1 << 30, 20, -2, 0, D.INT8, D.INT32)
    a = _rescale_op(b, xv, 1 << 30, 20, 4, 0, D.INT8, D.INT32)
    if not constant_first:
        k = _rescale_op(b, b._operand(Const(scale, D.INT8)), 1 << 30, 20, -2, 0, D.INT8, D.INT32)
    (p,) = b.add("MUL", [a, k, Const(np.array([17]), D.INT8)], D.INT32, output=False)
    mid = _rescale_op(b, p, [1_431_655_765 + 1000 * i for i in range(ch)], [38 + i % 3 for i in range(ch)], 0, 9,
                      D.INT32, D.INT8)
    wide = _rescale_op(b, mid, 1 << 30, 18, 9, 0, D.INT8, D.INT32)
    (s,) = b.add("ADD", [wide, Const(offset, D.INT32)], D.INT32, output=False)
    y = _rescale_op(b, s, 1_717_986_918, 42, 0, -1, D.INT32, D.INT8, double=True)
    b.graph.outputs = [y]
    xs = x.reshape(-1, ch)
    want = np.empty(xs.shape, np.int64)
    for r in range(xs.shape[0]):
        for c in range(ch):
            av = _rescale(int(xs[r, c]), 1 << 30, 20, 4, 0, 32)
            kv = _rescale(int(scale[0, 0, 0, c]), 1 << 30, 20, -2, 0, 32)
            mv = _rescale(_mul(av, kv, 17), 1_431_655_765 + 1000 * c, 38 + c % 3, 0, 9, 8)
            sv = _rescale(mv, 1 << 30, 18, 9, 0, 32) + int(offset[0, 0, 0, c])
            want[r, c] = _rescale(sv, 1_717_986_918, 42, 0, -1, 8, True)
    runs = _three_runs(b)
    (island,) = _plan(b.graph).islands.values()
    assert island.channels == ch and len(island.ops) == (6 if constant_first else 7)
    assert (k.producer in island.ops) != constant_first
    assert _plan(b.graph).chains[island.ops[0].id][2] is not None  # the tables were made
    for res in runs:
        assert res[y.name].reshape(-1, ch).tolist() == want.tolist()
    assert len(set(want.reshape(-1).tolist())) > 100


def _square_island(x: np.ndarray) -> GraphBuilder:
    """RESCALE x by 2^20, square it with MUL shift 15 (x^2 * 2^25: an i32 only while |x| <= 7), RESCALE to i8."""
    b = GraphBuilder("square")
    xv = b._operand(In(x, D.INT8, name="x"))
    a = _rescale_op(b, xv, 1 << 30, 10, 0, 0, D.INT8, D.INT32)
    (p,) = b.add("MUL", [a, a, Const(np.array([15]), D.INT8)], D.INT32, output=False)
    y = _rescale_op(b, p, 1 << 30, 50, 0, 0, D.INT32, D.INT8)
    b.graph.outputs = [y]
    return b


def test_island_without_table_when_a_code_fails_a_require() -> None:
    """Codes above 7 break the MUL's i32 REQUIRE, so no table is made: data without them runs on every run (and
    gives the ops' values), data with one is UNPREDICTABLE at the MUL on every run."""
    ok = np.resize(np.arange(-7, 8, dtype=np.int8), (1, 6, 10))
    b = _square_island(ok)
    for _ in range(3):
        res = run_checked(b.graph, b.feed, validate=False)
        assert res.ok
        got = res.outputs[b.graph.outputs[0].name].reshape(-1).tolist()
        assert got == [min(max(_scale_32(_mul(v << 20, v << 20, 15), 1 << 30, 50, False), -128), 127)
                       for v in ok.reshape(-1).tolist()]
    assert len(_plan(b.graph).islands) == 1
    assert [e[2] for e in _plan(b.graph).chains.values()] == [None]
    bad = {"x": np.full((1, 6, 10), 100, np.int8)}
    for _ in range(2):
        res = run_checked(b.graph, bad, validate=False)
        assert res.status == "UNPREDICTABLE" and "MUL" in str(res.op)


def test_int16_island_reads_a_65536_entry_table() -> None:
    """An int16 root with per-tensor constants: RESCALE to i32, ARITHMETIC_RIGHT_SHIFT with rounding, MAXIMUM,
    RESCALE back to i16, against Python integers on all 65536 codes."""
    x = _all_codes((1, 256, 256), bits=16)
    b = GraphBuilder("int16")
    xv = b._operand(In(x, D.INT16, name="x"))
    a = _rescale_op(b, xv, 1_518_500_250, 28, 0, 0, D.INT16, D.INT32)
    (sh,) = b.add("ARITHMETIC_RIGHT_SHIFT", [a, Const(np.array([[[3]]]), D.INT32)], D.INT32, {"round": True},
                  output=False)
    (mx,) = b.add("MAXIMUM", [sh, Const(np.array([[[-1000]]]), D.INT32)], D.INT32, output=False)
    y = _rescale_op(b, mx, 1_717_986_918, 30, 0, 0, D.INT32, D.INT16)
    b.graph.outputs = [y]

    def one(v: int) -> int:
        av = _scale_32(v, 1_518_500_250, 28, False)
        sv = (av >> 3) + ((av >> 2) & 1)  # spec ARITHMETIC_RIGHT_SHIFT with round: add the last bit shifted out
        return _rescale(max(sv, -1000), 1_717_986_918, 30, 0, 0, 16)

    want = [one(v) for v in range(-32768, 32768)]
    runs = _three_runs(b)
    (island,) = _plan(b.graph).islands.values()
    assert [op.opcode for op in island.ops] == ["RESCALE", "ARITHMETIC_RIGHT_SHIFT", "MAXIMUM", "RESCALE"]
    assert [e[2] is not None for e in _plan(b.graph).chains.values()] == [True]
    for res in runs:
        assert res[y.name].reshape(-1).tolist() == want


def test_no_island_across_two_tensors_or_a_reshape() -> None:
    """An op reading two data tensors, or a shape change, ends an island: only the single-input parts remain."""
    x = _all_codes((1, 4, 64))
    b = GraphBuilder("two")
    xv, zv = b._operand(In(x, D.INT8, name="x")), b._operand(In(x[:, ::-1].copy(), D.INT8, name="z"))
    a = _rescale_op(b, xv, 1 << 30, 20, 0, 0, D.INT8, D.INT32)
    c = _rescale_op(b, zv, 1 << 30, 20, 0, 0, D.INT8, D.INT32)
    (s,) = b.add("ADD", [a, c], D.INT32, output=False)
    y = _rescale_op(b, s, 1 << 30, 31, 0, 0, D.INT32, D.INT8)
    b.graph.outputs = [y]
    assert _plan(b.graph).islands == {}
    want = [_rescale(((u << 10) + (v << 10)), 1 << 30, 31, 0, 0, 8) for u, v in
            zip(x.reshape(-1).tolist(), x[:, ::-1].reshape(-1).tolist())]
    for res in _three_runs(b):
        assert res[y.name].reshape(-1).tolist() == want
