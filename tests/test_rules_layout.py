"""Layout / image / type rules on hand-built tfl graphs: legalize, run on the executor, compare with TF eager ops.

The oracle is TensorFlow (an independent implementation): exact equality for data movement, 1e-5 for bilinear.
Result types of the tfl ops are given with *symbolic* dims so the rules cannot read them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from tf2tosa.converter.pipeline import legalize_graph
from tf2tosa.errors import Unsupported
from tf2tosa.executor import run
from tf2tosa.ir import DType, Graph, QuantParams, TensorType, dtype_from_numpy
from tf2tosa.legalizations.lowering.layout import plan_strided_slice
from tf2tosa.legalizations.tfl_image import (
    resize_axis_params,
    tflite_nearest_indices,
    tosa_nearest_indices,
)

tf = pytest.importorskip("tensorflow")

RNG = np.random.default_rng(1234)


class In:
    """A graph input operand."""

    def __init__(self, arr: np.ndarray, quant: QuantParams | None = None) -> None:
        self.arr, self.quant = np.asarray(arr), quant


def _sym(shape: Sequence[int], tag: str) -> tuple[str, ...]:
    return tuple(f"{tag}{i}" for i in range(len(shape)))


def convert_and_run(opname: str, operands: Sequence[Any], attrs: dict[str, Any] | None = None,
                    out_dtypes: Sequence[DType] | None = None, n_results: int = 1,
                    out_ranks: Sequence[int] | None = None, out_quant: QuantParams | None = None
                    ) -> tuple[list[np.ndarray], Graph]:
    """Build ``opname`` over inputs (In) and constants (np arrays, as tfl.const), legalize, run."""
    g = Graph()
    vals = []
    feeds = []
    for k, o in enumerate(operands):
        if isinstance(o, In):
            v = g.add_input(f"in{k}", TensorType(o.arr.shape, dtype_from_numpy(o.arr.dtype), o.quant))
            feeds.append(o.arr)
        elif o is None:
            v = g.add_op("tfl.no_value", [], [TensorType((), DType.FP32)]).result
        else:
            arr = np.asarray(o)
            v = g.add_const(arr, op_name="tfl.const")
        vals.append(v)
    first_in = next(o for o in operands if isinstance(o, In))
    dts = list(out_dtypes or [dtype_from_numpy(first_in.arr.dtype)] * n_results)
    ranks = list(out_ranks or [first_in.arr.ndim] * n_results)
    rtypes = [TensorType(_sym([0] * r, f"r{i}_"), dt, out_quant) for i, (dt, r) in enumerate(zip(dts, ranks))]
    op = g.add_op(opname, vals, rtypes, attrs or {})
    g.outputs = list(op.results)
    legalize_graph(g)
    names = sorted({o.name for o in g.ops.values()})
    assert all(n.startswith("tosa.") for n in names), names
    res = run(g, feeds)
    return list(res.values()), g


def rand(shape: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return RNG.integers(0, 2, shape).astype(bool)
    return RNG.integers(-100, 100, shape).astype(dtype)


def exact(got: np.ndarray, want: Any) -> None:
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


def opcounts(g: Graph) -> dict[str, int]:
    return g.op_counts()


# --------------------------------------------------------------------------------------- reshape family
def test_reshape_with_minus_one_and_attr() -> None:
    x = rand([2, 3, 4])
    (y,), _ = convert_and_run("tfl.reshape", [In(x), np.array([4, -1], np.int64)], out_ranks=[2])
    exact(y, tf.reshape(x, [4, -1]).numpy())
    (y,), _ = convert_and_run("tfl.reshape", [In(x), None], {"new_shape": [6, 4]}, out_ranks=[2])
    exact(y, x.reshape(6, 4))


def test_reshape_to_rank0() -> None:
    (y,), _ = convert_and_run("tfl.reshape", [In(rand([1, 1])), np.array([], np.int32)], out_ranks=[0])
    assert y.shape == ()


@pytest.mark.parametrize("dims", [[], [0], [-1], [0, 2]])
def test_squeeze(dims: list[int]) -> None:
    x = rand([1, 3, 1, 1])
    want = tf.squeeze(x, axis=dims or None).numpy()
    (y,), _ = convert_and_run("tfl.squeeze", [In(x)], {"squeeze_dims": dims}, out_ranks=[want.ndim])
    exact(y, want)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_expand_dims(axis: int) -> None:
    x = rand([2, 3])
    (y,), _ = convert_and_run("tfl.expand_dims", [In(x), np.array(axis, np.int32)], out_ranks=[3])
    exact(y, tf.expand_dims(x, axis).numpy())


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 0, 1], [0, 1, 2]])
def test_transpose(perm: list[int]) -> None:
    x = rand([2, 3, 4])
    (y,), _ = convert_and_run("tfl.transpose", [In(x), np.array(perm, np.int64)])
    exact(y, tf.transpose(x, perm).numpy())


# ------------------------------------------------------------------------------------------ concat / pack
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenation(axis: int) -> None:
    xs = [rand([2, 3, 4]), rand([2, 3, 4]), rand([2, 3, 4])]
    (y,), _ = convert_and_run("tfl.concatenation", [In(a) for a in xs],
                              {"axis": axis, "fused_activation_function": "RELU"})
    exact(y, tf.nn.relu(tf.concat(xs, axis)).numpy())


def test_concatenation_with_const_operand() -> None:
    x, c = rand([2, 3]), rand([2, 2])
    (y,), _ = convert_and_run("tfl.concatenation", [In(x), c], {"axis": 1, "fused_activation_function": "NONE"})
    exact(y, np.concatenate([x, c], 1))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_pack(axis: int) -> None:
    xs = [rand([3, 4]), rand([3, 4])]
    (y,), _ = convert_and_run("tfl.pack", [In(a) for a in xs], {"values_count": 2, "axis": axis}, out_ranks=[3])
    exact(y, tf.stack(xs, axis).numpy())


def test_pack_scalars() -> None:
    xs = [np.array(1.5, np.float32), np.array(2.5, np.float32)]
    (y,), _ = convert_and_run("tfl.pack", [In(a) for a in xs], {"values_count": 2, "axis": 0}, out_ranks=[1])
    exact(y, tf.stack(xs).numpy())


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unpack(axis: int) -> None:
    x = rand([3, 2, 4])
    want = tf.unstack(x, axis=axis)
    ys, _ = convert_and_run("tfl.unpack", [In(x)], {"num": len(want), "axis": axis}, n_results=len(want),
                            out_ranks=[2] * len(want))
    for y, w in zip(ys, want):
        exact(y, w.numpy())


def test_split_and_split_v() -> None:
    x = rand([4, 6])
    ys, _ = convert_and_run("tfl.split", [np.array(1, np.int32), In(x)], {"num_splits": 3}, n_results=3)
    for y, w in zip(ys, tf.split(x, 3, axis=1)):
        exact(y, w.numpy())
    ys, _ = convert_and_run("tfl.split_v", [In(x), np.array([1, -1, 2], np.int32), np.array([-1], np.int32)],
                            {"num_splits": 3}, n_results=3)
    for y, w in zip(ys, tf.split(x, [1, 3, 2], axis=1)):
        exact(y, w.numpy())


# --------------------------------------------------------------------------------------------- slicing
def test_slice() -> None:
    x = rand([4, 5, 6])
    (y,), _ = convert_and_run("tfl.slice", [In(x), np.array([1, 0, 2], np.int32), np.array([2, -1, 3], np.int64)])
    exact(y, tf.slice(x, [1, 0, 2], [2, -1, 3]).numpy())


# (begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
SS_CASES: list[tuple[list[int], list[int], list[int], int, int, int, int, int]] = [
    ([0, 0, 0, 0], [2, 4, 6, 3], [1, 1, 1, 1], 0, 0, 0, 0, 0),
    ([1, 0, 1, 0], [2, 4, 6, 3], [1, 2, 3, 1], 0, 0, 0, 0, 0),
    ([0, 1, 0, 0], [0, 3, 5, 2], [1, 1, 2, 1], 0b0001, 0b0001, 0, 0, 0),
    ([0, -1, 0, 0], [0, 0, 0, 0], [1, -1, 1, 1], 0b1111, 0b1111, 0, 0, 0),
    ([1, 3, 5, 2], [0, 0, 0, 0], [-1, -1, -2, -1], 0, 0, 0, 0, 0),
    ([0, -2, 4, 0], [1, -5, -7, 3], [1, -1, -2, 2], 0, 0, 0, 0, 0),
    ([1, 0, 0, 0], [2, 4, 6, 3], [1, 1, 1, 1], 0, 0, 0, 0, 0b0001),
    ([-1, 2, 0, -1], [0, 3, 6, 0], [1, 1, 1, 1], 0, 0b0100, 0, 0, 0b1011),
    ([0, 1], [0, 3], [1, 1], 0, 0, 0b01, 0, 0),
    ([1, 0, 2], [2, 0, 5], [1, 1, 1], 0, 0, 0b010, 0, 0),
    ([0, 0, 1], [0, 0, 0], [1, 1, -1], 0, 0b100, 0b001, 0, 0b010),
    ([0, 0, 0], [1, 0, 4], [1, 1, 2], 0b010, 0b010, 0, 0b010, 0),
    ([0, 0, 0, 0], [1, 0, 0, 4], [1, 1, 1, 3], 0, 0, 0b0100, 0b0010, 0b0001),
    ([0, 1], [0, 2], [1, 1], 0, 0, 0b01, 0b10, 0b10),
    ([-3, 1, -100, 0], [100, 100, 100, 100], [1, 3, 5, 2], 0, 0, 0, 0, 0),
    ([5, 6, 9, 9], [-100, -100, -100, -100], [-2, -3, -4, -2], 0, 0, 0, 0, 0),
    ([0], [1], [1], 0, 0, 0, 0b1, 0),
    ([0, 0], [0, 0], [1, 1], 0, 0, 0b10, 0b01, 0),
    ([0, 0, 0, 0], [0, 0, 0, 0], [7, 5, 4, 2], 0b1111, 0b1111, 0, 0, 0),
]


@pytest.mark.parametrize("case", range(len(SS_CASES)))
def test_strided_slice_vs_tf(case: int) -> None:
    begin, end, strides, bm, em, elm, nam, sam = SS_CASES[case]
    x = rand([2, 4, 6, 3])
    want = tf.strided_slice(x, begin, end, strides, begin_mask=bm, end_mask=em, ellipsis_mask=elm,
                            new_axis_mask=nam, shrink_axis_mask=sam).numpy()
    (y,), g = convert_and_run("tfl.strided_slice",
                              [In(x), np.array(begin, np.int32), np.array(end, np.int32), np.array(strides, np.int32)],
                              {"begin_mask": bm, "end_mask": em, "ellipsis_mask": elm, "new_axis_mask": nam,
                               "shrink_axis_mask": sam, "offset": False}, out_ranks=[want.ndim])
    exact(y, want)
    assert all(len(v.shape) <= 6 for v in g.values())


def test_strided_slice_rank6_input_keeps_rank() -> None:
    x = rand([2, 3, 4, 3, 2, 5])
    want = x[:, ::2, 1::2, ::-1, :, ::3]
    (y,), g = convert_and_run("tfl.strided_slice",
                              [In(x), np.array([0, 0, 1, 0, 0, 0], np.int32), np.array([0] * 6, np.int32),
                               np.array([1, 2, 2, -1, 1, 3], np.int32)],
                              {"begin_mask": 0b111011, "end_mask": 0b111111})
    exact(y, want)
    assert max(len(v.shape) for v in g.values()) <= 6


def test_strided_slice_offset() -> None:
    x = rand([6, 5])
    (y,), _ = convert_and_run("tfl.strided_slice",
                              [In(x), np.array([1, 2], np.int32), np.array([3, 2], np.int32),
                               np.array([1, 1], np.int32)], {"offset": True})
    exact(y, x[1:4, 2:4])


def test_strided_slice_random_vs_tf() -> None:
    rng = np.random.default_rng(7)
    shape = [3, 5, 7]
    x = rand(shape)
    n_ok = 0
    for _ in range(200):
        begin = [int(rng.integers(-d - 1, d + 1)) for d in shape]
        end = [int(rng.integers(-d - 1, d + 1)) for d in shape]
        strides = [int(rng.choice([-3, -2, -1, 1, 2, 3])) for _ in shape]
        bm, em = int(rng.integers(0, 8)), int(rng.integers(0, 8))
        try:
            want = tf.strided_slice(x, begin, end, strides, begin_mask=bm, end_mask=em).numpy()
        except (tf.errors.InvalidArgumentError, ValueError):  # TF rejects the random parameters: draw again
            continue
        if want.size == 0:
            continue
        (y,), _ = convert_and_run("tfl.strided_slice", [In(x), np.array(begin, np.int32), np.array(end, np.int32),
                                                        np.array(strides, np.int32)],
                                  {"begin_mask": bm, "end_mask": em})
        exact(y, want)
        n_ok += 1
    assert n_ok > 50


def test_strided_slice_plan_empty_is_unsupported() -> None:
    with pytest.raises(Unsupported):
        plan_strided_slice([4], [3], [1], [1])


def test_reverse_v2() -> None:
    x = rand([2, 3, 4])
    (y,), g = convert_and_run("tfl.reverse_v2", [In(x), np.array([0, -1], np.int32)])
    exact(y, tf.reverse(x, [0, 2]).numpy())
    assert opcounts(g).get("tosa.REVERSE") == 2


# ------------------------------------------------------------------------------------------------ padding
def test_pad_and_padv2() -> None:
    x = rand([2, 3, 4])
    p = np.array([[0, 1], [2, 0], [1, 3]], np.int64)
    (y,), _ = convert_and_run("tfl.pad", [In(x), p])
    exact(y, tf.pad(x, p).numpy())
    (y,), _ = convert_and_run("tfl.padv2", [In(x), p.astype(np.int32), np.array(-2.5, np.float32)])
    exact(y, tf.pad(x, p, constant_values=-2.5).numpy())


def test_pad_quantized_uses_zero_point() -> None:
    x = RNG.integers(-128, 127, [1, 3, 3, 2]).astype(np.int8)
    q = QuantParams((0.1,), (-7,))
    p = np.array([[0, 0], [1, 1], [2, 0], [0, 0]], np.int32)
    (y,), _ = convert_and_run("tfl.pad", [In(x, q), p], out_quant=q)
    exact(y, np.pad(x, p, constant_values=-7))


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
@pytest.mark.parametrize("pads", [[[0, 0], [1, 2], [2, 1]], [[1, 1], [0, 0], [3, 0]], [[0, 0], [0, 0], [0, 0]]])
def test_mirror_pad(mode: str, pads: list[list[int]]) -> None:
    x = rand([2, 3, 4])
    (y,), _ = convert_and_run("tfl.mirror_pad", [In(x), np.array(pads, np.int32)], {"mode": mode})
    exact(y, tf.pad(x, pads, mode=mode).numpy())


def test_tile() -> None:
    x = rand([2, 1, 3])
    (y,), _ = convert_and_run("tfl.tile", [In(x), np.array([2, 3, 1], np.int64)])
    exact(y, tf.tile(x, [2, 3, 1]).numpy())


# ------------------------------------------------------------------------------------------------ gathers
@pytest.mark.parametrize("axis,batch_dims,ishape", [
    (0, 0, [5]), (1, 0, [2, 3]), (2, 0, []), (-1, 0, [4]), (1, 1, [2, 3]), (2, 1, [2, 2]), (2, 2, [2, 3, 2]),
])
def test_gather_vs_tf(axis: int, batch_dims: int, ishape: list[int]) -> None:
    x = rand([2, 3, 4, 2])
    k = x.shape[axis]
    idx = RNG.integers(0, k, ishape).astype(np.int64)
    want = tf.gather(x, idx, axis=axis, batch_dims=batch_dims).numpy()
    (y,), _ = convert_and_run("tfl.gather", [In(x), idx], {"axis": axis, "batch_dims": batch_dims},
                              out_ranks=[want.ndim])
    exact(y, want)
    # non-constant i32 indices
    (y,), _ = convert_and_run("tfl.gather", [In(x), In(idx.astype(np.int32))], {"axis": axis, "batch_dims": batch_dims},
                              out_ranks=[want.ndim])
    exact(y, want)


def test_gather_bool_and_int() -> None:
    x = rand([4, 3], np.bool_)
    idx = np.array([3, 0, 0], np.int32)
    (y,), _ = convert_and_run("tfl.gather", [In(x), idx], {"axis": 0})
    exact(y, tf.gather(x, idx).numpy())
    xi = rand([4, 3], np.int32)
    idx1 = np.array([2, 0, 0], np.int32)
    (y,), _ = convert_and_run("tfl.gather", [In(xi), idx1], {"axis": 1})
    exact(y, tf.gather(xi, idx1, axis=1).numpy())


@pytest.mark.parametrize("ishape", [[3, 1], [2, 2], [2, 2, 3], [2], [4, 3]])
def test_gather_nd_vs_tf(ishape: list[int]) -> None:
    x = rand([3, 4, 5])
    q = ishape[-1]
    idx = np.stack([RNG.integers(0, x.shape[i], ishape[:-1]) for i in range(q)], -1).astype(np.int32)
    want = tf.gather_nd(x, idx).numpy()
    (y,), _ = convert_and_run("tfl.gather_nd", [In(x), idx], out_ranks=[want.ndim])
    exact(y, want)
    (y,), _ = convert_and_run("tfl.gather_nd", [In(x), In(idx)], out_ranks=[want.ndim])
    exact(y, want)


# --------------------------------------------------------------------------------- space/depth/batch
@pytest.mark.parametrize("bs", [2, 3])
def test_depth_to_space_and_back(bs: int) -> None:
    x = rand([2, 3, 2, bs * bs * 2])
    (y,), _ = convert_and_run("tfl.depth_to_space", [In(x)], {"block_size": bs})
    want = tf.nn.depth_to_space(x, bs).numpy()
    exact(y, want)
    (z,), _ = convert_and_run("tfl.space_to_depth", [In(want)], {"block_size": bs})
    exact(z, tf.nn.space_to_depth(want, bs).numpy())


@pytest.mark.parametrize("shape,block,pads", [
    ([1, 4, 4, 3], [2, 2], [[0, 0], [0, 0]]),
    ([2, 5, 3, 2], [2, 3], [[1, 0], [1, 2]]),
    ([2, 6, 4], [3], [[0, 3]]),
    ([1, 4, 2, 2, 3], [2, 2], [[0, 0], [0, 0]]),
])
def test_space_to_batch_and_back(shape: list[int], block: list[int], pads: list[list[int]]) -> None:
    x = rand(shape)
    want = tf.space_to_batch_nd(x, block, pads).numpy()
    (y,), _ = convert_and_run("tfl.space_to_batch_nd", [In(x), np.array(block, np.int32), np.array(pads, np.int32)])
    exact(y, want)
    (z,), _ = convert_and_run("tfl.batch_to_space_nd", [In(want), np.array(block, np.int32), np.array(pads, np.int32)])
    exact(z, tf.batch_to_space(want, block, pads).numpy())
    exact(z, x)


# ----------------------------------------------------------------------------------------- shape / fill
def test_shape_fill_like() -> None:
    x = rand([2, 3, 4])
    (y,), _ = convert_and_run("tfl.shape", [In(x)], out_dtypes=[DType.INT64], out_ranks=[1])
    exact(y, np.array([2, 3, 4], np.int32))
    (y,), _ = convert_and_run("tfl.zeros_like", [In(x)])
    exact(y, np.zeros_like(x))
    (y,), _ = convert_and_run("tfl.ones_like", [In(x.astype(np.int32))])
    exact(y, np.ones(x.shape, np.int32))
    (y,), _ = convert_and_run("tfl.fill", [np.array([2, 3], np.int64), In(np.array(1.25, np.float32))],
                              out_ranks=[2])
    exact(y, tf.fill([2, 3], 1.25).numpy())


# ------------------------------------------------------------------------------------------------ cast
@pytest.mark.parametrize("src,dst", [
    (np.float32, np.int32), (np.float32, np.int8), (np.float32, np.bool_), (np.bool_, np.float32),
    (np.int32, np.float32), (np.int32, np.int8), (np.int8, np.int32), (np.bool_, np.int32), (np.int32, np.bool_),
    (np.float32, np.float16), (np.float16, np.float32),
])
def test_cast_vs_tf(src: Any, dst: Any) -> None:
    if np.dtype(src).kind == "f":
        x = (RNG.standard_normal([3, 7]) * 40).astype(src)
        x.flat[:6] = [2.5, -2.5, 0.5, -0.5, -3.7, 0.0]
    else:
        x = rand([3, 7], src)
    want = tf.cast(x, dst).numpy()
    (y,), _ = convert_and_run("tfl.cast", [In(x)], out_dtypes=[dtype_from_numpy(np.dtype(dst))])
    exact(y, want)


def test_cast_int64_const_and_output() -> None:
    x = rand([4], np.int32)
    (y,), _ = convert_and_run("tfl.cast", [In(x)], out_dtypes=[DType.INT64])
    exact(y, x)


def test_dequantize_fp16_weights_and_identity() -> None:
    w = rand([3, 4]).astype(np.float16)
    x = rand([3, 4])
    g = Graph()
    xin = g.add_input("x", TensorType((3, 4), DType.FP32))
    wc = g.add_const(w, op_name="tfl.const")
    dq = g.add_op("tfl.dequantize", [wc], [TensorType(("a", "b"), DType.FP32)])
    ident = g.add_op("tfl.identity", [xin], [TensorType(("a", "b"), DType.FP32)])
    cat = g.add_op("tfl.concatenation", [ident.result, dq.result], [TensorType(("a", "b"), DType.FP32)],
                   {"axis": 0, "fused_activation_function": "NONE"})
    g.outputs = [cat.result]
    legalize_graph(g)
    assert "tosa.CAST" not in g.op_counts()  # folded
    (y,) = run(g, [x]).values()
    exact(y, np.concatenate([x, w.astype(np.float32)], 0))


def test_dequantize_int8_constant_per_channel() -> None:
    w = RNG.integers(-127, 127, [2, 3]).astype(np.int8)
    q = QuantParams((0.5, 0.25), (0, 1), axis=0)
    g = Graph()
    xin = g.add_input("x", TensorType((2, 3), DType.FP32))
    wc = g.add_const(w, op_name="tfl.const", quant=q)
    dq = g.add_op("tfl.dequantize", [wc], [TensorType(("a", "b"), DType.FP32)])
    cat = g.add_op("tfl.concatenation", [xin, dq.result], [TensorType(("a", "b"), DType.FP32)],
                   {"axis": 0, "fused_activation_function": "NONE"})
    g.outputs = [cat.result]
    legalize_graph(g)
    x = rand([2, 3])
    (y,) = run(g, [x]).values()
    want = (w.astype(np.float64) - np.array([[0], [1]])) * np.array([[0.5], [0.25]])
    exact(y[2:], want.astype(np.float32))


# ------------------------------------------------------------------------------------------------ resize
RESIZE_SIZES = [(4, 4, 8, 8), (4, 6, 8, 3), (3, 5, 7, 11), (8, 8, 3, 5), (5, 7, 2, 2), (6, 4, 6, 9), (2, 3, 1, 1),
                (1, 3, 4, 5), (9, 10, 4, 7), (7, 7, 16, 29)]
RESIZE_MODES = [(False, False), (True, False), (False, True)]


@pytest.mark.parametrize("ih,iw,oh,ow", RESIZE_SIZES)
@pytest.mark.parametrize("align,half", RESIZE_MODES)
def test_resize_bilinear_vs_tf(ih: int, iw: int, oh: int, ow: int, align: bool, half: bool) -> None:
    x = rand([2, ih, iw, 3])
    want = tf.compat.v1.image.resize_bilinear(x, [oh, ow], align_corners=align, half_pixel_centers=half).numpy()
    (y,), g = convert_and_run("tfl.resize_bilinear", [In(x), np.array([oh, ow], np.int32)],
                              {"align_corners": align, "half_pixel_centers": half})
    assert y.shape == want.shape
    from tests.e2e import fp32_bound, fp32_noise

    (v,) = g.inputs
    feed = {v.name: x}
    y64 = np.asarray(next(iter(run(g, feed, precise=True).values())), np.float64)
    noise = fp32_noise(g, feed).get(g.outputs[0].name, 0.0)
    assert float(np.abs(want.astype(np.float64) - y64).max()) <= fp32_bound(y, y64, g.outputs[0].dtype, noise)


@pytest.mark.parametrize("ih,iw,oh,ow", RESIZE_SIZES)
@pytest.mark.parametrize("align,half", RESIZE_MODES)
def test_resize_nearest_vs_tf(ih: int, iw: int, oh: int, ow: int, align: bool, half: bool) -> None:
    x = rand([1, ih, iw, 2])
    want = tf.compat.v1.image.resize_nearest_neighbor(x, [oh, ow], align_corners=align,
                                                      half_pixel_centers=half).numpy()
    (y,), g = convert_and_run("tfl.resize_nearest_neighbor", [In(x), np.array([oh, ow], np.int32)],
                              {"align_corners": align, "half_pixel_centers": half})
    exact(y, want)


def test_resize_nearest_int8() -> None:
    x = RNG.integers(-128, 127, [1, 3, 4, 2]).astype(np.int8)
    q = QuantParams((0.05,), (3,))
    want = tf.compat.v1.image.resize_nearest_neighbor(x, [6, 8], half_pixel_centers=True).numpy()
    (y,), g = convert_and_run("tfl.resize_nearest_neighbor", [In(x, q), np.array([6, 8], np.int32)],
                              {"align_corners": False, "half_pixel_centers": True}, out_quant=q)
    exact(y, want)
    assert "tosa.RESIZE" in g.op_counts()


def test_resize_params_vs_tflite_index_rule_sweep() -> None:
    """The §4 #20 NEAREST parameters reproduce TFLite's index rule except at float ties (where we GATHER)."""
    total = ties = 0
    for ih, oh in itertools.product(range(1, 20), range(1, 40)):
        for align, half in RESIZE_MODES:
            try:
                p = resize_axis_params(ih, oh, align, half, True)
            except Unsupported:
                continue
            total += 1
            if not np.array_equal(tosa_nearest_indices(ih, oh, p), tflite_nearest_indices(ih, oh, align, half)):
                ties += 1
    assert total > 2000 and ties < total // 50


@pytest.mark.parametrize("ih,iw,oh,ow,align,half", [
    (2, 4, 41, 47, False, True),    # float ties in TFLite's index computation → GATHER fallback
    (6, 3, 74, 5, False, False),
    (4, 8, 75, 47, True, False),
    (17, 20, 1, 1, False, False),   # downscale beyond RESIZE's 1/16 limit → GATHER fallback
    (18, 5, 1, 2, False, True),
])
def test_resize_nearest_gather_fallback_vs_tf(ih: int, iw: int, oh: int, ow: int, align: bool, half: bool) -> None:
    x = rand([1, ih, iw, 2])
    want = tf.compat.v1.image.resize_nearest_neighbor(x, [oh, ow], align_corners=align,
                                                      half_pixel_centers=half).numpy()
    (y,), g = convert_and_run("tfl.resize_nearest_neighbor", [In(x), np.array([oh, ow], np.int32)],
                              {"align_corners": align, "half_pixel_centers": half})
    exact(y, want)
    assert "tosa.GATHER" in g.op_counts()


def test_resize_bilinear_beyond_limits_is_unsupported() -> None:
    from tf2tosa.errors import UnsupportedOpsError

    with pytest.raises(UnsupportedOpsError, match="RESIZE"):
        convert_and_run("tfl.resize_bilinear", [In(rand([1, 20, 4, 1])), np.array([1, 4], np.int32)],
                        {"align_corners": False, "half_pixel_centers": False})


# ------------------------------------------------------------------------------- dtype coverage (i8/i16/i32/bool)
DTYPES = [np.int8, np.int16, np.int32, np.bool_, np.float16]


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_layout_ops_all_dtypes(dt: Any) -> None:
    x = rand([2, 4, 6, 4], dt)
    q = QuantParams((0.02,), (5,)) if dt is np.int8 else None
    cases: list[tuple[str, list[Any], dict[str, Any], Any]] = [
        ("tfl.transpose", [In(x, q), np.array([3, 1, 2, 0])], {}, np.transpose(x, [3, 1, 2, 0])),
        ("tfl.strided_slice", [In(x, q), np.array([0, 3, 1, 0]), np.array([2, 0, 6, 4]), np.array([1, -2, 2, 3])],
         {}, x[0:2, 3:0:-2, 1:6:2, 0:4:3]),
        ("tfl.concatenation", [In(x, q), In(x, q)], {"axis": 2}, np.concatenate([x, x], 2)),
        ("tfl.padv2", [In(x, q), np.array([[0, 0], [1, 0], [0, 2], [0, 0]]), np.array(1, dt)], {},
         np.pad(x, [[0, 0], [1, 0], [0, 2], [0, 0]], constant_values=np.array(1, dt))),
        ("tfl.mirror_pad", [In(x, q), np.array([[0, 0], [1, 2], [2, 0], [0, 0]])], {"mode": "REFLECT"},
         np.pad(x, [[0, 0], [1, 2], [2, 0], [0, 0]], mode="reflect")),
        ("tfl.tile", [In(x, q), np.array([1, 2, 1, 2])], {}, np.tile(x, [1, 2, 1, 2])),
        ("tfl.gather", [In(x, q), np.array([3, 3, 0])], {"axis": 1}, np.take(x, [3, 3, 0], axis=1)),
        ("tfl.reverse_v2", [In(x, q), np.array([1, 3])], {}, x[:, ::-1, :, ::-1]),
        ("tfl.depth_to_space", [In(x, q)], {"block_size": 2}, tf.nn.depth_to_space(x.astype(np.float32), 2)
         .numpy().astype(dt)),
        ("tfl.space_to_batch_nd", [In(x, q), np.array([2, 3]), np.array([[0, 0], [0, 0]])], {},
         tf.space_to_batch_nd(x.astype(np.float32), [2, 3], [[0, 0], [0, 0]]).numpy().astype(dt)),
    ]
    for name, operands, attrs, want in cases:
        (y,), g = convert_and_run(name, operands, attrs, out_quant=q)
        exact(y, want)
        assert g.outputs[0].type.quant == q, name
        assert g.outputs[0].dtype is dtype_from_numpy(np.dtype(dt)), name


def test_dequantize_int8_activation() -> None:
    x = RNG.integers(-128, 128, [2, 5]).astype(np.int8)
    q = QuantParams((0.0372,), (-11,))
    (y,), g = convert_and_run("tfl.dequantize", [In(x, q)], out_dtypes=[DType.FP32])
    # TFLite reference: static_cast<float>(double(scale) * (q - zp))
    want = (np.float64(np.float32(0.0372)) * (x.astype(np.float64) + 11)).astype(np.float32)
    exact(y, want)


# --------------------------------------------------------------------- int8 resize vs LiteRT reference kernels
@pytest.mark.parametrize("method,size,align,half,shape", [
    ("bilinear", (8, 12), False, False, (1, 4, 5, 3)),
    ("bilinear", (9, 7), True, False, (1, 4, 5, 2)),
    ("bilinear", (3, 4), False, True, (1, 7, 9, 2)),
    ("bilinear", (13, 2), False, True, (1, 5, 3, 2)),
    ("nearest", (7, 11), False, False, (1, 3, 3, 2)),
])
def test_resize_int8_bit_exact_vs_litert_ref(method: str, size: tuple[int, int], align: bool, half: bool,
                                             shape: tuple[int, ...]) -> None:
    pytest.importorskip("ai_edge_litert")
    import modelgen

    import tf2tosa
    from tf2tosa.verify.litert import run_tflite

    params = {"method": method, "size": size, "align_corners": align, "half_pixel_centers": half, "shape": shape}

    def build(**p: Any) -> bytes:
        fn, specs = modelgen.b_resize(modelgen._tf(), np.random.default_rng(0), **p)
        return modelgen.convert(fn, specs, quant="int8", ranges=(-1.0, 1.0))

    buf = modelgen.cached(f"rules_layout/resize_int8_{method}", build, params)
    m = tf2tosa.convert(buf)
    g = m.graph
    assert "tosa.RESIZE" in g.op_counts()
    for seed in range(2):
        x = np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)
        ref = list(run_tflite(buf, {g.inputs[0].source or g.inputs[0].name: x}, reference_kernels=True).values())[0]
        ours = list(m.run({g.inputs[0].name: x}).values())[0]
        exact(ours.reshape(ref.shape), ref)


# ------------------------------------------------------------- more one-op .tflite models through the whole chain
def _extra_models() -> dict[str, tuple[Any, list[Any]]]:
    """name -> (tf function, input specs) for layout ops that tests/modelgen.py does not cover."""
    return {
        "gather_nd": (lambda x: tf.gather_nd(x, [[1, 2], [0, 3], [1, 0]]), [(2, 4, 3)]),
        "gather/batch_dims": (lambda x: tf.gather(x, [[2, 0], [1, 1]], axis=2, batch_dims=1), [(2, 3, 4, 2)]),
        "reverse_v2": (lambda x: tf.reverse(x, [1, 2]), [(1, 3, 4, 2)]),  # LiteRT: contiguous axes only
        "space_to_batch_nd": (lambda x: tf.space_to_batch_nd(x, [2, 2], [[1, 1], [0, 2]]), [(1, 4, 4, 3)]),
        "batch_to_space_nd": (lambda x: tf.batch_to_space(x, [2, 2], [[0, 1], [1, 0]]), [(4, 3, 3, 2)]),
        "shape": (lambda x: tf.shape(x, out_type=tf.int32) * 2, [(2, 3, 5)]),
        "fill": (lambda x: x + tf.fill([2, 3], 1.5), [(2, 3)]),
        "zeros_like": (lambda x: tf.zeros_like(x) - x, [(2, 3)]),
        "ones_like": (lambda x: tf.ones_like(x) + x, [(2, 3)]),
        "strided_slice/ellipsis_newaxis": (lambda x: x[..., tf.newaxis, 1:3, ::-2], [(2, 3, 4, 5)]),
        "strided_slice/neg_stride3": (lambda x: x[:, -1::-3, 5:0:-2], [(2, 8, 7)]),
        "cast/bool": (lambda x: tf.cast(tf.cast(x, tf.bool), tf.float32), [(2, 5)]),
        "cast/int8": (lambda x: tf.cast(x * 50.0, tf.int8), [(2, 5)]),
        "resize/tf2_bilinear": (lambda x: tf.image.resize(x, [7, 9]), [(1, 4, 5, 2)]),
        "resize/tf2_nearest": (lambda x: tf.image.resize(x, [7, 3], method="nearest"), [(1, 4, 5, 2)]),
        "split/negative_axis": (lambda x: tuple(tf.split(x, 2, axis=-2)), [(1, 4, 6)]),
        "tile/rank2": (lambda x: tf.tile(x, [3, 2]), [(2, 3)]),
    }


@pytest.mark.parametrize("name", sorted(_extra_models()))
def test_extra_one_op_models_e2e(name: str) -> None:
    pytest.importorskip("ai_edge_litert")
    import modelgen
    from e2e import check_tflite

    fn, specs = _extra_models()[name]
    buf = modelgen.cached(f"rules_layout/{name}", lambda: modelgen.convert(fn, specs), {}, extra=(_extra_models,),
                          key=name)
    check_tflite(name, buf)


def test_float16_shape_operand_checked_without_numpy_warnings() -> None:
    """A float16 shape constant (a fuzzed ``tfl.reshape``): whole values are read as ints, others refused with our
    message, and no numpy RuntimeWarning reaches the user (2**62 overflows float16: every finite value is below)."""
    import warnings

    from tf2tosa.legalizations.lowering.layout import const_ints

    g = Graph()
    x = g.add_input("x", TensorType((2, 3), DType.FP32))
    for values, want in (([3.0, 2.0], [3, 2]), ([60000.0, 1.0], [60000, 1]), ([2.5, 1.0], None)):
        c = g.add_const(np.array(values, np.float16))
        op = g.add_op("tfl.reshape", [x, c], [TensorType((3, 2), DType.FP32)])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            if want is None:
                with pytest.raises(Unsupported, match="must hold integers, not float16"):
                    const_ints(op, 1, "new shape")
            else:
                assert const_ints(op, 1, "new shape") == want
