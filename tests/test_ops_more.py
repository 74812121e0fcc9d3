"""The ops added for complete TFLite coverage (tfl_index, tfl_custom, the new math/nn/type rules and ops the original
one-op list lacked), each in every type TFLite supports for it: .tflite → TOSA, executor vs LiteRT, tosa-opt
validation, Arm reference model (tests.e2e.check_tflite).

Oracles and bounds:

* float results: LiteRT within ``tests.e2e.fp32_bound`` of our fp64 run (the compositions reorder float sums
  (cumsum's log-step scan, segment sums), use RECIPROCAL·MUL for division, or a polynomial (atan2): all within it);
* integer and quantized results: 0 mismatching elements; quantized models against LiteRT's reference kernels
  (BUILTIN_REF) unless ``DEFAULT_KERNEL_ORACLE`` says the reference resolver lacks the op.
* MediaPipe's custom ops (LiteRT cannot run them): against numpy ports of MediaPipe's kernels, and
  Convolution2DTransposeBias also against LiteRT running the same computation written with builtin TRANSPOSE_CONV.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import tf2tosa  # noqa: E402
import tf2tosa.executor  # noqa: E402
from tests.e2e import PRECISE_REL, check_tflite, fp32_bound, fp32_noise  # noqa: E402
from tests.modelgen_more import (  # noqa: E402
    HAND_BUILT,
    NOT_RUNNABLE,
    RANGES,
    all_cases,
    expected_op,
    h_conv2d_transpose_bias,
    h_max_pool_argmax,
    more_model,
    transpose_conv_bias_geometry,
)
from tf2tosa.converter.tflite import load_tflite  # noqa: E402
from tf2tosa.ir import DType, TensorType  # noqa: E402
from tf2tosa.ir.types import dtype_from_numpy  # noqa: E402

#: ops whose quantized models LiteRT's BUILTIN_REF resolver cannot load: the default kernels are the oracle
DEFAULT_KERNEL_ORACLE = {"elu": "BUILTIN_REF has no ELU kernel (the int8 model runs ELU in float between "
                                "DEQUANTIZE and QUANTIZE)"}

CASES = [(n, q) for n, q in all_cases() if n not in NOT_RUNNABLE]


@pytest.mark.parametrize("name,quant", CASES, ids=[f"{n}-{q or 'float'}" for n, q in CASES])
def test_more_op(name: str, quant: str | None) -> None:
    data = more_model(name, quant)
    ops = {op.name for op in load_tflite(data).topological_order()}
    assert expected_op(name) in ops, f"{name}: the model lost its {expected_op(name)} ({sorted(ops)})"
    lo, hi = RANGES.get(name, (-1.0, 1.0))
    quantized = quant is not None or "int8" in name.split("/")[-1] and name in HAND_BUILT
    ref = quantized and name.split("/")[0] not in DEFAULT_KERNEL_ORACLE
    res = check_tflite(f"more/{name}/{quant or 'float'}", data, lo=lo, hi=hi, reference_kernels=ref)
    assert res.litert_mismatches == 0
    assert res.ops


# --------------------------------------------------------------------------------- MediaPipe custom ops (numpy)
def _mp_transpose_conv_bias(x: np.ndarray, w: np.ndarray, bias: np.ndarray, padding: str, s: int) -> np.ndarray:
    """MediaPipe's Convolution2DTransposeBias kernel: scatter every input pixel through the OHWI filter."""
    n, ih, iw, _ = x.shape
    oc, kh, kw, _ = w.shape
    oh, ph = transpose_conv_bias_geometry(ih, kh, s, padding)
    ow, pw = transpose_conv_bias_geometry(iw, kw, s, padding)
    out = np.broadcast_to(bias.astype(np.float64), (n, oh, ow, oc)).copy()
    for y in range(ih):
        for xx in range(iw):
            for ky in range(kh):
                for kx in range(kw):
                    oy, ox = y * s - ph + ky, xx * s - pw + kx
                    if 0 <= oy < oh and 0 <= ox < ow:
                        out[:, oy, ox, :] += x[:, y, xx, :].astype(np.float64) @ w[:, ky, kx, :].T.astype(np.float64)
    return out


def _pool_geometry(h: int, f: int, s: int, padding: str) -> tuple[int, int]:
    out = -(-h // s) if padding == "SAME" else (h - f) // s + 1
    return out, max(0, ((out - 1) * s + f - h) // 2)


def _mp_max_pool_argmax(x: np.ndarray, padding: str, s: int, f: int) -> tuple[np.ndarray, np.ndarray]:
    """MediaPipe's MaxPoolingWithArgmax2D: first strict maximum of the in-bounds window, index y·f + x + 0.1."""
    n, h, w, c = x.shape
    oh, ph = _pool_geometry(h, f, s, padding)
    ow, pw = _pool_geometry(w, f, s, padding)
    vals = np.zeros((n, oh, ow, c), np.float32)
    idx = np.zeros((n, oh, ow, c), np.float32)
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    best, by, bx = np.float32(np.finfo(np.float32).min), 0, 0
                    for fy in range(f):
                        for fx in range(f):
                            iy, ix = oy * s - ph + fy, ox * s - pw + fx
                            if 0 <= iy < h and 0 <= ix < w and x[b, iy, ix, ch] > best:
                                best, by, bx = x[b, iy, ix, ch], fy, fx
                    vals[b, oy, ox, ch] = best
                    idx[b, oy, ox, ch] = np.float32(by * f + bx) + np.float32(0.1)
    return vals, idx


def _mp_max_unpool(v: np.ndarray, idx: np.ndarray, s: int, f: int) -> np.ndarray:
    """MediaPipe's MaxUnpooling2D (output = input size × filter, padding 0 here): write v at its window index."""
    n, h, w, c = v.shape
    out = np.zeros((n, h * f, w * f, c), np.float32)
    for b in range(n):
        for y in range(h):
            for xx in range(w):
                for ch in range(c):
                    k = int(idx[b, y, xx, ch])
                    out[b, y * s + k // f, xx * s + k % f, ch] = v[b, y, xx, ch]
    return out


@pytest.mark.parametrize("params", [{}, {"padding": "VALID", "k": 3}, {"k": 3}, {"k": 5, "s": 3},
                                    {"padding": "VALID", "k": 2, "s": 3}], ids=str)
def test_convolution_2d_transpose_bias(params: dict[str, object]) -> None:
    from tf2tosa.verify.litert import run_tflite_many

    data = h_conv2d_transpose_bias(**params)  # type: ignore[arg-type]
    model = tf2tosa.convert(data)
    assert "tosa.TRANSPOSE_CONV2D" in model.graph.op_counts()
    consts = {op.result.type.rank: op.attrs["values"] for op in load_tflite(data).topological_order()
              if op.name == "tfl.const"}
    w, bias = consts[4], consts[1]
    x = np.random.default_rng(1).uniform(-1, 1, (1, 5, 6, 3)).astype(np.float32)
    feed = {model.graph.inputs[0].name: x}
    out = model.graph.outputs[0]
    ours = model.run(feed)[out.name]
    ours64 = tf2tosa.executor.run(model.graph, feed, precise=True)[out.name]
    stride = params.get("s", 2)
    assert isinstance(stride, int)
    # MediaPipe's kernel ported to numpy in fp64: two fp64 evaluations of the same sums
    want = _mp_transpose_conv_bias(x, w, bias, str(params.get("padding", "SAME")), stride)
    assert float(np.abs(ours64 - want).max()) <= PRECISE_REL * float(np.abs(want).max())
    # LiteRT's builtin TRANSPOSE_CONV in fp32, and our own fp32 run: within the fp32 bound of the fp64 result
    builtin = next(iter(run_tflite_many(h_conv2d_transpose_bias(builtin=True, **params),  # type: ignore[arg-type]
                                        [{"x": x}])[0].values()))
    bound = fp32_bound(ours, ours64, out.dtype, fp32_noise(model.graph, feed).get(out.name, 0.0))
    assert float(np.abs(builtin.reshape(want.shape) - ours64).max()) <= bound
    assert float(np.abs(ours.astype(np.float64) - want).max()) <= bound


@pytest.mark.parametrize("padding,stride,filt", [("VALID", 2, 2), ("SAME", 2, 3), ("VALID", 1, 3)])
def test_max_pooling_with_argmax_2d(padding: str, stride: int, filt: int) -> None:
    model = tf2tosa.convert(h_max_pool_argmax(padding, stride, filt))
    rng = np.random.default_rng(2)
    for k in range(3):
        x = rng.uniform(-1, 1, (1, 6, 8, 3)).astype(np.float32)
        if k == 2:
            x = (np.round(x * 2) / 2).astype(np.float32)  # ties: the first maximum in scan order wins
        out = model.run({model.graph.inputs[0].name: x})
        vals, idx = (out[v.name] for v in model.graph.outputs)
        want_v, want_i = _mp_max_pool_argmax(x, padding, stride, filt)
        np.testing.assert_array_equal(vals, want_v)
        np.testing.assert_array_equal(idx, want_i)


def test_max_unpooling_2d() -> None:
    model = tf2tosa.convert(h_max_pool_argmax(unpool=True))
    x = np.random.default_rng(3).uniform(-1, 1, (1, 6, 8, 3)).astype(np.float32)
    got = model.run({model.graph.inputs[0].name: x})[model.graph.outputs[0].name]
    v, i = _mp_max_pool_argmax(x, "VALID", 2, 2)
    np.testing.assert_array_equal(got, _mp_max_unpool(v, i, 2, 2))


def test_custom_op_without_rule_names_its_code() -> None:
    from tests.modelgen_more import CUSTOM, Op, T, tflite_model

    data = tflite_model([T("x", (2, 3)), T("y", (2, 3))], [Op(CUSTOM, [0], [1], "MyFancyOp", b"\x01\x02")], [0], [1])
    with pytest.raises(tf2tosa.UnsupportedOpsError, match="custom op 'MyFancyOp' has no lowering"):
        tf2tosa.convert(data)
    flex = tflite_model([T("x", (2, 3)), T("y", (2, 3))], [Op(CUSTOM, [0], [1], "FlexErf", b"")], [0], [1])
    with pytest.raises(tf2tosa.UnsupportedOpsError, match="TensorFlow op 'Erf'.*Select TF ops"):
        tf2tosa.convert(flex)


def test_fake_quant_narrow_range_refused() -> None:
    from tests.modelgen_more import h_fake_quant

    with pytest.raises(tf2tosa.UnsupportedOpsError, match="narrow_range"):
        tf2tosa.convert(h_fake_quant(narrow=True))


# ------------------------------------------------------------------------------ IR-level checks (numpy oracles)
def _one_op(name: str, operands: list[tuple[np.ndarray, bool]], outs: list[TensorType], **attrs: Any) -> list[Any]:
    """Legalize and run a one-op tfl graph; operands are (array, is_constant); returns the outputs."""
    from tf2tosa.converter.pipeline import legalize_graph
    from tf2tosa.executor import run
    from tf2tosa.ir import Graph

    g = Graph()
    vals: list[Any] = []
    feeds: list[np.ndarray] = []
    for arr, is_const in operands:
        if is_const:
            vals.append(g.add_const(arr, None, name="c", op_name="tfl.const"))
        else:
            vals.append(g.add_input(f"in{len(feeds)}", TensorType(arr.shape, dtype_from_numpy(arr.dtype))))
            feeds.append(arr)
    g.outputs = list(g.add_op(name, vals, outs, attrs).results)
    legalize_graph(g)
    assert all(op.name.startswith("tosa.") for op in g.topological_order())
    return list(run(g, feeds).values())


def test_where_with_static_output_size() -> None:
    """A non-constant condition whose number of true elements is recorded in the result type."""
    rng = np.random.default_rng(4)
    for _ in range(5):
        cond = np.zeros((3, 4, 5), bool)
        cond.reshape(-1)[rng.choice(60, 7, replace=False)] = True
        (got,) = _one_op("tfl.where", [(cond, False)], [TensorType((7, 3), DType.INT64)])
        np.testing.assert_array_equal(got, np.argwhere(cond))


def test_where_dynamic_output_size_is_refused() -> None:
    with pytest.raises(tf2tosa.UnsupportedOpsError, match="output size depends on the data"):
        from tf2tosa.converter.pipeline import legalize_graph
        from tf2tosa.ir import Graph

        g = Graph()
        c = g.add_input("c", TensorType((4,), DType.BOOL))
        g.outputs = list(g.add_op("tfl.where", [c], [TensorType(("n", 1), DType.INT64)], {}).results)
        legalize_graph(g)


def test_range_float_and_broadcast_args() -> None:
    (got,) = _one_op("tfl.range", [(np.array(0.5, np.float32), True), (np.array(3.0, np.float32), True),
                                   (np.array(0.1, np.float32), True)], [TensorType(("n",), DType.FP32)])
    want = [np.float32(0.5)]  # TFLite accumulates value += delta in float32
    while len(want) < 25:
        want.append(np.float32(want[-1] + np.float32(0.1)))
    np.testing.assert_array_equal(got, np.array(want, np.float32))
    (got,) = _one_op("tfl.broadcast_args", [(np.array([2, 1, 3], np.int32), True), (np.array([4, 1], np.int32), True)],
                     [TensorType((3,), DType.INT32)])
    np.testing.assert_array_equal(got, [2, 4, 3])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8])
def test_topk_matches_a_stable_sort(dtype: Any) -> None:
    """Largest first, ties by lower index, for every input type (incl. many ties in narrow integer ranges)."""
    rng = np.random.default_rng(5)
    x = (rng.integers(-4, 5, (3, 2, 40)) if dtype != np.float32 else rng.standard_normal((3, 2, 40))).astype(dtype)
    vals, idx = _one_op("tfl.topk_v2", [(x, False), (np.array(9, np.int32), True)],
                        [TensorType((3, 2, 9), dtype_from_numpy(np.dtype(dtype))), TensorType((3, 2, 9), DType.INT32)])
    order = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")[..., :9]
    np.testing.assert_array_equal(idx, order)
    np.testing.assert_array_equal(vals, np.take_along_axis(x, order, -1))


def test_scatter_nd_duplicates_add_and_segment_edge_cases() -> None:
    upd = np.arange(12, dtype=np.int32).reshape(4, 3)
    idx = np.array([[2], [0], [2], [2]], np.int32)
    (got,) = _one_op("tfl.scatter_nd", [(idx, False), (upd, False), (np.array([5, 3], np.int32), True)],
                     [TensorType((5, 3), DType.INT32)])
    want = np.zeros((5, 3), np.int32)
    np.add.at(want, idx[:, 0], upd)
    np.testing.assert_array_equal(got, want)
    data = np.arange(10, dtype=np.float32).reshape(5, 2)
    ids = np.array([3, -1, 0, 9, 3], np.int32)  # negative and out-of-range ids are dropped; segments 1, 2 empty
    (got,) = _one_op("tfl.unsorted_segment_max", [(data, False), (ids, True), (np.array(4, np.int32), True)],
                     [TensorType((4, 2), DType.FP32)])
    low = np.finfo(np.float32).min
    np.testing.assert_array_equal(got, [[4, 5], [low, low], [low, low], [8, 9]])
