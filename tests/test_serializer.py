"""The .tosa writer/reader and the MLIR printer, checked against Arm's tools (tosa-opt, reference model).

Every graph here is built by hand in the IR, serialized by our writer, and then
(a) validated by ``tosa-opt --tosa-validate``, (b) run by the Arm reference model and
compared with an independent numpy computation, (c) read back and re-written
byte-identically, (d) written twice identically.  MLIR text is parsed and validated
by tosa-opt too.  Tool-dependent tests skip when the tosa-tools environment is missing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from tests import tosa_mlir
from tf2tosa.errors import InvalidGraphError, ModelLoadError
from tf2tosa.ir.graph import Graph, Value
from tf2tosa.ir.types import DType, TensorType
from tf2tosa.serializer import from_bytes, load, save, to_bytes
from tf2tosa.serializer.mlir import to_mlir
from tf2tosa.serializer.tosa_reader import decode_array
from tf2tosa.serializer.tosa_writer import ATTR_FIELDS, OPS, encode_array
from tf2tosa.verify import tosa_tools

needs_tools = pytest.mark.skipif(not tosa_tools.available(), reason="tosa-tools environment not available")


def T(shape: tuple[int, ...], dtype: DType) -> TensorType:
    return TensorType(shape, dtype)


def shape_const(g: Graph, values: list[int], name: str = "shape") -> Value:
    return g.add_const(np.array(values, np.int64), DType.SHAPE, name=name, op_name="tosa.CONST_SHAPE")


# ----------------------------------------------------------------------------- test graphs
@dataclass
class Case:
    graph: Graph
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    profiles: list[str] = field(default_factory=lambda: ["PRO-FP"])
    extensions: list[str] = field(default_factory=list)
    exact: bool = True
    validate: bool = True  # tosa-opt can deserialize this .tosa (it crashes on i4 constants with 4+ elements)


def conv_case() -> Case:
    """CONV2D (fp32, zero points 0.0) + CLAMP + RESHAPE with a CONST_SHAPE."""
    rng = np.random.default_rng(1)
    g = Graph()
    x = g.add_input("x", T((1, 6, 6, 3), DType.FP32))
    wv = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bv = rng.standard_normal(4).astype(np.float32)
    w = g.add_const(wv, name="w")
    b = g.add_const(bv, name="b")
    z = g.add_const(np.zeros(1, np.float32), name="zp")
    c = g.add_op("tosa.CONV2D", [x, w, b, z, z], [T((1, 3, 3, 4), DType.FP32)],
                 {"pad": [1, 0, 1, 0], "stride": [2, 2], "dilation": [1, 1], "acc_type": "FP32",
                  "local_bound": False}).result
    r = g.add_op("tosa.CLAMP", [c], [c.type], {"min_val": 0.0, "max_val": 1.5, "nan_mode": "PROPAGATE"}).result
    y = g.add_op("tosa.RESHAPE", [r, shape_const(g, [1, 9, 4])], [T((1, 9, 4), DType.FP32)],
                 result_names=["y"]).result
    g.outputs = [y]
    xv = rng.standard_normal((1, 6, 6, 3)).astype(np.float32)
    xp = np.pad(xv.astype(np.float64), ((0, 0), (1, 0), (1, 0), (0, 0)))
    ref = np.zeros((1, 3, 3, 4))
    for oy in range(3):
        for ox in range(3):
            patch = xp[0, 2 * oy:2 * oy + 3, 2 * ox:2 * ox + 3, :]
            ref[0, oy, ox] = np.tensordot(wv.astype(np.float64), patch, axes=([1, 2, 3], [0, 1, 2])) + bv
    ref = np.clip(ref, 0.0, 1.5).reshape(1, 9, 4)
    return Case(g, {"x": xv}, {"y": ref.astype(np.float32)}, exact=False)


def shape_ops_case() -> Case:
    """ADD (broadcast), CONCAT, TRANSPOSE, PAD, SLICE, TILE, REDUCE_SUM and MAXIMUM on fp32."""
    rng = np.random.default_rng(2)
    g = Graph()
    a = g.add_input("a", T((2, 3), DType.FP32))
    b = g.add_input("b", T((1, 3), DType.FP32))
    s = g.add_op("tosa.ADD", [a, b], [T((2, 3), DType.FP32)]).result
    cat = g.add_op("tosa.CONCAT", [s, a, a], [T((6, 3), DType.FP32)], {"axis": 0}).result
    tr = g.add_op("tosa.TRANSPOSE", [cat], [T((3, 6), DType.FP32)], {"perms": [1, 0]}, result_names=["tr"]).result
    pc = g.add_const(np.array([-1.5], np.float32), name="pad_const")
    pad = g.add_op("tosa.PAD", [tr, shape_const(g, [1, 0, 0, 2], "padding"), pc], [T((4, 8), DType.FP32)],
                   result_names=["padded"]).result
    sl = g.add_op("tosa.SLICE", [pad, shape_const(g, [1, 2], "start"), shape_const(g, [2, 5], "size")],
                  [T((2, 5), DType.FP32)]).result
    ti = g.add_op("tosa.TILE", [sl, shape_const(g, [2, 1], "multiples")], [T((4, 5), DType.FP32)]).result
    rs = g.add_op("tosa.REDUCE_SUM", [ti], [T((4, 1), DType.FP32)], {"axis": 1}, result_names=["rsum"]).result
    mx = g.add_op("tosa.MAXIMUM", [ti, rs], [T((4, 5), DType.FP32)], {"nan_mode": "PROPAGATE"},
                  result_names=["mx"]).result
    g.outputs = [pad, rs, mx]
    av = rng.standard_normal((2, 3)).astype(np.float32)
    bv = rng.standard_normal((1, 3)).astype(np.float32)
    trv = np.concatenate([av + bv, av, av], 0).T
    padv = np.pad(trv, ((1, 0), (0, 2)), constant_values=-1.5)
    tiv = np.tile(padv[1:3, 2:7], (2, 1))
    rsv = tiv.sum(axis=1, keepdims=True)
    return Case(g, {"a": av, "b": bv}, {"padded": padv, "rsum": rsv, "mx": np.maximum(tiv, rsv)}, exact=False)


def _rescale(v: np.ndarray, mult: int, shift: int, in_zp: int, out_zp: int, lo: int, hi: int) -> np.ndarray:
    """Independent model of RESCALE with SINGLE_ROUND, scale32 (spec apply_scale_32)."""
    out = []
    for x in v.reshape(-1).tolist():
        acc = (x - in_zp) * mult + (1 << (shift - 1))
        out.append(min(hi, max(lo, (acc >> shift) + out_zp)))
    return np.array(out, np.int64).reshape(v.shape)


def int8_case() -> Case:
    """TABLE (i8), RESCALE i8->i8 and i8->i32, MUL i32 with shift, CLAMP i8, ARITHMETIC_RIGHT_SHIFT."""
    rng = np.random.default_rng(3)
    g = Graph()
    x = g.add_input("x", T((2, 8), DType.INT8))
    table = rng.integers(-128, 128, 256).astype(np.int8)
    tb = g.add_op("tosa.TABLE", [x, g.add_const(table, name="table")], [T((2, 8), DType.INT8)],
                  result_names=["looked_up"]).result
    mult, shift = 1518500250, 33
    rq = g.add_op("tosa.RESCALE", [tb, g.add_const(np.array([mult], np.int32), name="mult"),
                                   g.add_const(np.array([shift], np.int8), name="shift"),
                                   g.add_const(np.array([-3], np.int8), name="in_zp"),
                                   g.add_const(np.array([5], np.int8), name="out_zp")],
                  [T((2, 8), DType.INT8)],
                  {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False, "input_unsigned": False,
                   "output_unsigned": False}, result_names=["requant"]).result
    cl = g.add_op("tosa.CLAMP", [rq], [rq.type], {"min_val": -20, "max_val": 100, "nan_mode": "PROPAGATE"},
                  result_names=["clamped"]).result
    wide = g.add_op("tosa.RESCALE", [cl, g.add_const(np.array([1 << 30], np.int32), name="one"),
                                     g.add_const(np.array([30], np.int8), name="s30"),
                                     g.add_const(np.array([0], np.int8), name="zp8"),
                                     g.add_const(np.array([0], np.int32), name="zp32")],
                    [T((2, 8), DType.INT32)],
                    {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
                     "input_unsigned": False, "output_unsigned": False}).result
    k = rng.integers(-(1 << 20), 1 << 20, (1, 8)).astype(np.int32)
    mul = g.add_op("tosa.MUL", [wide, g.add_const(k, name="k"), g.add_const(np.array([7], np.int8), name="mshift")],
                   [T((2, 8), DType.INT32)], result_names=["product"]).result
    sh = g.add_op("tosa.ARITHMETIC_RIGHT_SHIFT", [mul, g.add_const(np.full((1, 1), 3, np.int32), name="three")],
                  [T((2, 8), DType.INT32)], {"round": True}, result_names=["shifted"]).result
    g.outputs = [cl, sh]
    xv = rng.integers(-128, 128, (2, 8)).astype(np.int8)
    tv = table[xv.astype(np.int64) + 128].astype(np.int64)
    rqv = _rescale(tv, mult, shift, -3, 5, -128, 127)
    clv = np.clip(rqv, -20, 100)
    prod = clv * k.astype(np.int64)
    mulv = (prod + (1 << 6)) >> 7
    shv = (mulv >> 3) + ((mulv >> 2) & 1)
    return Case(g, {"x": xv}, {"clamped": clv.astype(np.int8), "shifted": shv.astype(np.int32)},
                profiles=["PRO-INT"])


def int4_int48_case() -> Case:
    """CONV2D i8 x i4 -> i32 (EXT-INT4 packed weights) and RESCALE of an i48 constant (EXT-INT16)."""
    rng = np.random.default_rng(4)
    g = Graph()
    x = g.add_input("x", T((1, 3, 3, 5), DType.INT8))
    wv = rng.integers(-8, 8, (3, 1, 1, 5)).astype(np.int8)  # 15 nibbles: odd count exercises the padding nibble
    c = g.add_op("tosa.CONV2D", [x, g.add_const(wv, DType.INT4, name="w4"),
                                 g.add_const(np.array([7, -7, 100], np.int32), name="bias"),
                                 g.add_const(np.array([2], np.int8), name="x_zp"),
                                 g.add_const(np.array([0], np.int8), DType.INT4, name="w_zp")],
                 [T((1, 3, 3, 3), DType.INT32)],
                 {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT32",
                  "local_bound": False}, result_names=["conv"]).result
    big = np.array([-(2 ** 31), 2 ** 31 - 1, -5, 123456789, -(2 ** 30) - 7], np.int64)
    c48 = g.add_const(big * 256, DType.INT48, name="c48")
    r = g.add_op("tosa.RESCALE", [c48, g.add_const(np.array([1 << 14], np.int16), name="m16"),
                                  g.add_const(np.array([22], np.int8), name="s22"),
                                  g.add_const(np.array([0], np.int64), DType.INT48, name="zp48"),
                                  g.add_const(np.array([0], np.int32), name="zp32")],
                 [T((5,), DType.INT32)],
                 {"scale32": False, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
                  "input_unsigned": False, "output_unsigned": False}, result_names=["from48"]).result
    g.outputs = [c, r]
    xv = rng.integers(-128, 128, (1, 3, 3, 5)).astype(np.int8)
    conv = np.einsum("nhwc,oc->nhwo", xv.astype(np.int64) - 2, wv[:, 0, 0, :].astype(np.int64)) + [7, -7, 100]
    return Case(g, {"x": xv}, {"conv": conv.astype(np.int32), "from48": big.astype(np.int32)},
                profiles=["PRO-INT"], extensions=["EXT-INT4", "EXT-INT16"], validate=False)


def cond_if_case() -> Case:
    """COND_IF with then = x + y, else = x * y (bodies as nested regions)."""
    g = Graph()
    p = g.add_input("p", T((), DType.BOOL))
    x = g.add_input("x", T((4,), DType.INT32))
    y = g.add_input("y", T((4,), DType.INT32))
    then = Graph("then_add")
    tx, ty = then.add_input("tx", x.type), then.add_input("ty", y.type)
    then.outputs = [then.add_op("tosa.ADD", [tx, ty], [x.type]).result]
    els = Graph("else_mul")
    ex, ey = els.add_input("ex", x.type), els.add_input("ey", y.type)
    sh = els.add_const(np.zeros(1, np.int8), name="zero_shift")
    els.outputs = [els.add_op("tosa.MUL", [ex, ey, sh], [x.type]).result]
    out = g.add_op("tosa.COND_IF", [p, x, y], [x.type], regions=[then, els], result_names=["out"]).result
    g.outputs = [out]
    xv = np.array([1, -2, 3, 40000], np.int32)
    yv = np.array([5, 6, -7, 3], np.int32)
    return Case(g, {"p": np.array(False), "x": xv, "y": yv}, {"out": xv * yv}, profiles=["PRO-INT"],
                extensions=["EXT-CONTROLFLOW"])


def while_case() -> Case:
    """WHILE_LOOP: while i < 5: i += 1; acc = acc * 2 + 1."""
    g = Graph()
    i0 = g.add_input("i0", T((1,), DType.INT32))
    a0 = g.add_input("a0", T((3,), DType.INT32))
    cond = Graph("loop_cond")
    ci, _ = cond.add_input("ci", i0.type), cond.add_input("ca", a0.type)
    five = cond.add_const(np.array([5], np.int32), name="five")
    cond.outputs = [cond.add_op("tosa.GREATER", [five, ci], [T((1,), DType.BOOL)]).result]
    body = Graph("loop_body")
    bi, ba = body.add_input("bi", i0.type), body.add_input("ba", a0.type)
    one = body.add_const(np.array([1], np.int32), name="one")
    ni = body.add_op("tosa.ADD", [bi, one], [i0.type]).result
    dbl = body.add_op("tosa.ADD", [ba, ba], [a0.type]).result
    na = body.add_op("tosa.ADD", [dbl, one], [a0.type]).result
    body.outputs = [ni, na]
    loop = g.add_op("tosa.WHILE_LOOP", [i0, a0], [i0.type, a0.type], regions=[cond, body],
                    result_names=["i_out", "a_out"])
    g.outputs = list(loop.results)
    iv, av = np.array([1], np.int32), np.array([0, 1, -3], np.int32)
    a = av.astype(np.int64)
    for _ in range(4):
        a = a * 2 + 1
    return Case(g, {"i0": iv, "a0": av}, {"i_out": np.array([5], np.int32), "a_out": a.astype(np.int32)},
                profiles=["PRO-INT"], extensions=["EXT-CONTROLFLOW"])


def float_misc_case() -> Case:
    """fp16 DEPTHWISE_CONV2D, AVG_POOL2D, MAX_POOL2D, RESIZE, CAST and bf16 constant."""
    rng = np.random.default_rng(5)
    g = Graph()
    x = g.add_input("x", T((1, 4, 4, 2), DType.FP32))
    z32 = g.add_const(np.zeros(1, np.float32), name="z32")
    mp = g.add_op("tosa.MAX_POOL2D", [x], [T((1, 2, 2, 2), DType.FP32)],
                  {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0], "nan_mode": "PROPAGATE"},
                  result_names=["maxpool"]).result
    ap = g.add_op("tosa.AVG_POOL2D", [x, z32, z32], [T((1, 2, 2, 2), DType.FP32)],
                  {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0], "acc_type": "FP32"},
                  result_names=["avgpool"]).result
    rz = g.add_op("tosa.RESIZE", [mp, shape_const(g, [4, 2, 4, 2], "scale"), shape_const(g, [-1, -1], "offset"),
                                  shape_const(g, [1, 1], "border")], [T((1, 4, 4, 2), DType.FP32)],
                  {"mode": "NEAREST_NEIGHBOR"}, result_names=["resized"]).result
    bf = g.add_const(np.array([[[[1.5, -0.25]]]], np.float32), DType.BF16, name="bf")
    bfc = g.add_op("tosa.CAST", [bf], [T((1, 1, 1, 2), DType.FP32)]).result
    prod = g.add_op("tosa.MUL", [ap, bfc, g.add_const(np.zeros(1, np.int8), name="s0")],
                    [T((1, 2, 2, 2), DType.FP32)], result_names=["scaled"]).result
    g.outputs = [rz, prod]
    xv = rng.standard_normal((1, 4, 4, 2)).astype(np.float32)
    blocks = xv.reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 3, 2, 4, 5).reshape(1, 2, 2, 4, 2)
    mpv = blocks.max(axis=3)
    apv = blocks.astype(np.float64).mean(axis=3)
    rzv = mpv.repeat(2, axis=1).repeat(2, axis=2)
    return Case(g, {"x": xv}, {"resized": rzv, "scaled": apv * np.array([1.5, -0.25])},
                profiles=["PRO-FP"], extensions=["EXT-BF16"], exact=False)


def variable_case() -> Case:
    """EXT-VARIABLE: declare with an initial value, read, add the input, write, read again."""
    g = Graph()
    x = g.add_input("x", T((2,), DType.FP32))
    init = np.array([1.5, -2.0], np.float32)
    g.add_op("tosa.VARIABLE", [], [], {"name": "state", "var_shape": [2], "type": DType.FP32, "initial_value": init})
    r1 = g.add_op("tosa.VARIABLE_READ", [], [x.type], {"name": "state"}, result_names=["before"]).result
    s = g.add_op("tosa.ADD", [r1, x], [x.type]).result
    g.add_op("tosa.VARIABLE_WRITE", [s], [], {"name": "state"})
    r2 = g.add_op("tosa.VARIABLE_READ", [], [x.type], {"name": "state"}, result_names=["after"]).result
    g.outputs = [r1, r2]
    xv = np.array([0.25, 4.0], np.float32)
    return Case(g, {"x": xv}, {"before": init, "after": init + xv}, extensions=["EXT-VARIABLE"])


def attribute_zoo() -> Graph:
    """Ops with every attribute kind (enums, bounds, strings, bytes, multi-result), for format checks."""
    g = Graph()
    x = g.add_input("x", T((2, 3), DType.FP32))
    i = g.add_input("i", T((1, 4, 4, 2), DType.INT8))
    re_, im = g.add_input("re", T((1, 4, 4), DType.FP32)), g.add_input("im", T((1, 4, 4), DType.FP32))
    a = g.add_op("tosa.CLAMP", [x], [x.type], {"min_val": -1.0, "max_val": float("inf"), "nan_mode": "IGNORE"}).result
    b = g.add_op("tosa.MAXIMUM", [a, x], [x.type], {"nan_mode": "IGNORE"}).result
    c = g.add_op("tosa.ARGMAX", [b], [T((2,), DType.INT32)], {"axis": 1, "nan_mode": "IGNORE"}).result
    d = g.add_op("tosa.CUSTOM", [b, x], [x.type], {"operator_name": "my.op", "domain_name": "dom \"q\"",
                                                   "implementation_attrs": b"ab\x01\xff"}).result
    z = g.add_const(np.zeros(1, np.int8), name="z")
    e = g.add_op("tosa.AVG_POOL2D", [i, z, z], [T((1, 2, 2, 2), DType.INT8)],
                 {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0], "acc_type": "INT32"}).result
    f = g.add_op("tosa.FFT2D", [re_, im], [T((1, 4, 4), DType.FP32)] * 2, {"inverse": True, "local_bound": True})
    h = g.add_op("tosa.RESIZE", [i, shape_const(g, [4, 2, 4, 2], "sc"), shape_const(g, [0, 0], "off"),
                                 shape_const(g, [2, 2], "bo")], [T((1, 8, 8, 2), DType.INT32)],
                 {"mode": "BILINEAR"}).result
    tc = g.add_op("tosa.TRANSPOSE_CONV2D", [i, g.add_const(np.ones((3, 2, 2, 2), np.int8), name="tw"),
                                            g.add_const(np.zeros(3, np.int32), name="tb"), z, z],
                  [T((1, 5, 5, 3), DType.INT32)],
                  {"out_pad": [0, 0, 0, 0], "stride": [1, 1], "acc_type": "INT32", "local_bound": False}).result
    k = g.add_op("tosa.REDUCE_MIN", [i], [T((1, 4, 4, 1), DType.INT8)], {"axis": 3, "nan_mode": "PROPAGATE"}).result
    g.outputs = [c, d, e, *f.results, h, tc, k]
    return g


def test_attribute_zoo_round_trip() -> None:
    g = attribute_zoo()
    data = to_bytes(g)
    g2 = from_bytes(data)
    assert to_bytes(g2) == data
    ops = {op.opcode: op for op in g2.topological_order()}
    assert ops["CLAMP"].attrs == {"min_val": -1.0, "max_val": float("inf"), "nan_mode": "IGNORE"}
    assert ops["CUSTOM"].attrs["implementation_attrs"] == b"ab\x01\xff"
    assert ops["CUSTOM"].attrs["domain_name"] == 'dom "q"'
    assert ops["RESIZE"].attrs == {"mode": "BILINEAR"}
    assert len(ops["FFT2D"].results) == 2


@needs_tools
def test_attribute_zoo_matches_arm() -> None:
    g = attribute_zoo()
    from_file = tosa_mlir.canonical_mlir(tosa_mlir.deserialize_to_mlir(to_bytes(g)))
    assert from_file == tosa_mlir.canonical_mlir(to_mlir(g))
    text = to_mlir(g, profiles=["PRO-INT", "PRO-FP"], extensions=["EXT-FFT"])
    assert "tosa.target_env" in text.splitlines()[0]
    assert tosa_tools.validate(to_bytes(g), ["PRO-INT", "PRO-FP"], ["EXT-FFT"]) == (True, "")
    assert tosa_mlir.canonical_mlir(text)


CASES: dict[str, Callable[[], Case]] = {
    "variable": variable_case,
    "conv": conv_case, "shape_ops": shape_ops_case, "int8": int8_case, "int4_int48": int4_int48_case,
    "cond_if": cond_if_case, "while": while_case, "float_misc": float_misc_case,
}


def _compare(case: Case, got: dict[str, np.ndarray]) -> None:
    assert list(got) == list(case.expected), f"outputs {list(got)} != {list(case.expected)}"
    for name, want in case.expected.items():
        arr = got[name]
        assert arr.shape == want.shape, name
        if case.exact:
            np.testing.assert_array_equal(arr, want, err_msg=name)
        else:
            np.testing.assert_allclose(arr.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-5,
                                       err_msg=name)


# ----------------------------------------------------------------------------- tool-free tests
@pytest.mark.parametrize("name", sorted(CASES))
def test_round_trip_and_determinism(name: str) -> None:
    g = CASES[name]().graph
    data = to_bytes(g)
    assert data[4:8] == b"TOSA"
    assert to_bytes(g) == data
    assert to_bytes(CASES[name]().graph) == data  # a freshly built equal graph: same bytes
    g2 = from_bytes(data)
    assert to_bytes(g2) == data
    assert [v.name for v in g2.inputs] == [v.name for v in g.inputs]
    assert [v.name for v in g2.outputs] == [v.name for v in g.outputs]
    assert g2.op_counts() == g.op_counts()
    for op, op2 in zip(g.topological_order(), g2.topological_order()):
        assert op.name == op2.name
        assert [r.type for r in op.results] == [r.type for r in op2.results]
        if "values" in op.attrs:
            np.testing.assert_array_equal(np.asarray(op2.attrs["values"]).astype(np.float64),
                                          np.asarray(op.attrs["values"]).astype(np.float64))
        for k, v in op.attrs.items():
            if isinstance(v, np.ndarray):
                np.testing.assert_array_equal(op2.attrs[k], v)
            elif k != "values":
                assert op2.attrs[k] == v, (op.name, k)
        assert len(op.regions) == len(op2.regions)


@pytest.mark.parametrize("dtype,values", [
    (DType.INT4, [-8, -1, 0, 7, 3]), (DType.INT48, [-(2 ** 47), 2 ** 47 - 1, -1, 0, 12345]),
    (DType.BOOL, [True, False, True]), (DType.INT8, [-128, 127]), (DType.INT16, [-32768, 1]),
    (DType.INT32, [-(2 ** 31), 2 ** 31 - 1]), (DType.FP16, [0.5, -65504.0]), (DType.FP32, [1e-30, -3.5]),
    (DType.SHAPE, [1, 2 ** 40]), (DType.BF16, [1.5, -2.0, 3.0]),
])
def test_encode_decode(dtype: DType, values: list[float]) -> None:
    arr = np.array(values, dtype.np_dtype())
    raw = encode_array(arr, dtype)
    back = decode_array(raw + b"\0" * 7, dtype, arr.shape)
    np.testing.assert_array_equal(back.astype(np.float64), arr.astype(np.float64))


def test_encodings_match_arm_layout() -> None:
    # i4: two per byte, first element in the low nibble; i48: six little-endian bytes
    assert encode_array(np.array([1, -2, 7], np.int8), DType.INT4) == bytes([0xE1, 0x07])
    assert encode_array(np.array([1, -2], np.int64), DType.INT48) == bytes([1, 0, 0, 0, 0, 0, 254, 255, 255, 255,
                                                                            255, 255])
    assert encode_array(np.array([1.5, -2.0], np.float32), DType.BF16) == bytes([0xC0, 0x3F, 0x00, 0xC0])


def test_schema_tables_match_tosa_fbs() -> None:
    """Our op enum and attribute field lists equal the ones in Arm's tosa.fbs."""
    fbs = tosa_tools.schema_path()
    if fbs is None:
        pytest.skip("tosa.fbs not available: the tosa-tools environment is not installed")
    FBS = str(fbs)
    import re

    text = open(FBS).read()
    body = re.search(r"enum Op:uint32 \{(.*?)\}", text, re.S)
    assert body is not None
    names = [n.strip().split("=")[0].strip() for n in body.group(1).split(",") if n.strip()]
    assert tuple(names[:len(OPS)]) == OPS
    union = re.search(r"union Attribute \{(.*?)\}", text, re.S)
    assert union is not None
    tables = [n.strip() for n in union.group(1).split(",") if n.strip()]
    for i, op in enumerate(OPS[1:]):
        m = re.search(r"table " + tables[i] + r" \{(.*?)\}", text, re.S)
        assert m is not None, tables[i]
        fields = [ln.split(":")[0].strip() for ln in m.group(1).splitlines() if ":" in ln and not
                  ln.strip().startswith("//")]
        assert fields == [f for f, _ in ATTR_FIELDS.get(op, ())], op


def test_corrupt_inputs_raise_model_load_error() -> None:
    data = to_bytes(conv_case().graph)
    bad = [b"", b"TOSA", b"\0" * 16, data[:4] + b"TFL3" + data[8:], data[:len(data) // 2], data[:9], data[:-1]]
    for n in range(0, len(data), max(1, len(data) // 97)):
        bad.append(data[:n])
    for blob in bad:
        with pytest.raises(ModelLoadError):
            from_bytes(blob, name="broken.tosa")
    rng = np.random.default_rng(0)
    for _ in range(300):  # random corruption: either a clean ModelLoadError or a graph, never another error
        arr = bytearray(data)
        for pos in rng.integers(8, len(arr), 4):
            arr[int(pos)] = int(rng.integers(0, 256))
        try:
            from_bytes(bytes(arr))
        except ModelLoadError as e:
            assert "not a valid TOSA flatbuffer" in str(e)


def test_error_names_the_file(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "model.tosa")
    with open(path, "wb") as f:
        f.write(b"garbage that is not a flatbuffer")
    with pytest.raises(ModelLoadError, match="model.tosa"):
        load(path)
    with pytest.raises(ModelLoadError, match="missing.tosa"):
        load(os.path.join(str(tmp_path), "missing.tosa"))


def test_save_is_atomic_and_loadable(tmp_path: object) -> None:
    g = int8_case().graph
    path = os.path.join(str(tmp_path), "out.tosa")
    save(g, path)
    assert os.listdir(str(tmp_path)) == ["out.tosa"]
    assert to_bytes(load(path)) == to_bytes(g)
    bad = Graph()
    x = bad.add_input("x", T((2,), DType.FP32))
    bad.outputs = [bad.add_op("tosa.CONV2D", [x], [x.type]).result]  # missing attributes
    with pytest.raises(InvalidGraphError):
        save(bad, path)
    assert os.listdir(str(tmp_path)) == ["out.tosa"]


# ----------------------------------------------------------------------------- Arm tools
@needs_tools
@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_model_matches_numpy(name: str) -> None:
    case = CASES[name]()
    data = to_bytes(case.graph)
    if case.validate:
        ok, msg = tosa_tools.validate(data, case.profiles, case.extensions)
        assert ok, msg
    _compare(case, tosa_tools.run_reference(data, case.inputs))


@needs_tools
def test_cond_if_both_branches() -> None:
    case = cond_if_case()
    data = to_bytes(case.graph)
    got = tosa_tools.run_reference(data, {**case.inputs, "p": np.array(True)})
    np.testing.assert_array_equal(got["out"], case.inputs["x"] + case.inputs["y"])


@needs_tools
@pytest.mark.parametrize("name", sorted(CASES))
def test_mlir_parses_and_validates(name: str) -> None:
    case = CASES[name]()
    text = to_mlir(case.graph)
    ok, msg = tosa_tools.validate_mlir(text, case.profiles, case.extensions)
    assert ok, msg + "\n" + text


@needs_tools
@pytest.mark.parametrize("name", ["conv", "int8", "shape_ops", "cond_if"])
def test_mlir_equals_arm_view_of_our_file(name: str) -> None:
    """tosa-opt's printout of our .tosa file and of our MLIR text are the same program."""
    case = CASES[name]()
    from_file = tosa_mlir.canonical_mlir(tosa_mlir.deserialize_to_mlir(to_bytes(case.graph)))
    from_text = tosa_mlir.canonical_mlir(to_mlir(case.graph))
    assert from_file == from_text


@needs_tools
@pytest.mark.parametrize("name", sorted(set(CASES) - {"int4_int48"}))  # Arm's serializer mis-packs int4
def test_reader_reads_files_written_by_arm(name: str) -> None:
    """Our MLIR -> Arm's serializer -> our reader -> our writer -> reference model == numpy."""
    case = CASES[name]()
    g = from_bytes(tosa_tools.serialize_mlir(to_mlir(case.graph)), name="arm.tosa")
    assert g.op_counts() == case.graph.op_counts()
    assert [v.name for v in g.inputs] == [v.name for v in case.graph.inputs]
    _compare(case, tosa_tools.run_reference(to_bytes(g), case.inputs))


@needs_tools
def test_each_name_is_stored_once() -> None:
    """A tensor name is read where the tensor is declared, by the op that makes it and by every op that reads it;
    the writer stores each distinct string once and points all of them at it.  With a 300-byte name read by five
    ops the name's bytes occur once in the file, which tosa-opt and the reference model read as before."""
    long = "block_13_depthwise_relu_Relu6;" * 10
    g = Graph()
    x = g.add_input("x", T((2, 3), DType.FP32))
    t = g.add_op("tosa.ABS", [x], [T((2, 3), DType.FP32)], result_names=[long]).result
    outs = [g.add_op("tosa.ADD", [t, t], [T((2, 3), DType.FP32)], result_names=[f"y{i}"]).result for i in range(5)]
    g.outputs = outs
    data = to_bytes(g)
    assert data.count(long.encode()) == 1
    back = from_bytes(data)
    assert to_bytes(back) == data
    assert [op.operands[0].name for op in back.topological_order() if op.name == "tosa.ADD"] == [long] * 5
    tosa_tools.validate(data, profiles=["PRO-FP"])
    xv = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)
    got = tosa_tools.run_reference(data, {"x": xv})
    for i in range(5):
        np.testing.assert_array_equal(np.asarray(got[f"y{i}"]), 2 * np.abs(xv))
