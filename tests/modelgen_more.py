"""One-op ``.tflite`` models for the ops of the "complete TFLite operator coverage" work (tfl_index, tfl_custom, the
new math/nn/type rules, and ops :mod:`tests.modelgen` does not cover), cached like :mod:`tests.modelgen`.

* ``MORE_SPECS[name]``: a TF-built model (``builder(tf, rng, **params) -> (fn, input specs)``), converted with
  :func:`tests.modelgen.convert` (float32, or ``"int8"`` / ``"int16x8"`` when ``quant`` lists the mode).
* ``HAND_BUILT[name]``: models TensorFlow's converter never emits (FAKE_QUANT, EMBEDDING_LOOKUP, DILATE, MediaPipe
  custom ops, constant WHERE …), written directly as flatbuffers by :func:`tflite_model`.
* ``more_model(name, quant=None) -> bytes`` for either kind; ``RANGES[name]`` is the input domain ``(lo, hi)``
  (int inputs draw integers from it).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np

from tests.modelgen import BuildResult, _tf, _w, cached, convert

I32, I8, I16, F32, BOOL = "int32", "int8", "int16", "float32", "bool"


# ------------------------------------------------------------------------------------------- TF-built models
def b_fn(tf: Any, rng: np.random.Generator, kind: str = "", specs: tuple[Any, ...] = ()) -> BuildResult:
    """Small functions of tensors, selected by ``kind``."""
    c = tf.constant
    dt = specs_dtype(specs)
    divisors = np.array([-3, -2, 2, 3, 5, -7] * 2, dt).reshape(2, 6)
    shifts = np.array([0, 1, 2, 3, 5, 7] * 2, dt).reshape(2, 6)
    fns: dict[str, Callable[..., Any]] = {
        # index / scan
        "one_hot": lambda x: tf.one_hot(x, 5, on_value=2.0, off_value=-1.0),
        "one_hot_axis0_i32": lambda x: tf.one_hot(x, 4, on_value=7, off_value=3, axis=0, dtype=tf.int32),
        "broadcast_to": lambda x: tf.broadcast_to(x, [2, 3, 4]),
        "cumsum": lambda x: tf.cumsum(x, axis=1),
        "cumsum_excl_rev": lambda x: tf.cumsum(x, axis=-1, exclusive=True, reverse=True),
        "topk": lambda x: tf.math.top_k(x, 3),
        "segment_sum": lambda x: tf.math.segment_sum(x, c([0, 0, 1, 2, 2])),
        "unsorted_segment_sum": lambda x: tf.math.unsorted_segment_sum(x, c([0, 2, 1, 2, 0]), 4),
        "unsorted_segment_prod": lambda x: tf.math.unsorted_segment_prod(x, c([0, 2, 1, 2, 0]), 4),
        "unsorted_segment_max": lambda x: tf.math.unsorted_segment_max(x, c([0, 2, 1, 2, 0]), 4),
        "unsorted_segment_min": lambda x: tf.math.unsorted_segment_min(x, c([3, 2, 1, 2, 3]), 4),
        "matrix_diag": lambda x: tf.linalg.diag(x),
        "matrix_set_diag": lambda x, d: tf.linalg.set_diag(x, d),
        "reverse_sequence": lambda x: tf.reverse_sequence(x, c([2, 5, 1]), seq_axis=1, batch_axis=0),
        "reverse_sequence_dyn": lambda x, n: tf.reverse_sequence(x, n, seq_axis=0, batch_axis=1),
        "scatter_nd": lambda x: tf.scatter_nd(c([[1], [3], [1]]), x, [6, 2]),
        "scatter_nd_unique": lambda x: tf.scatter_nd(c([[0, 1], [2, 0]]), x, [3, 2, 4]),
        "scatter_nd_dyn": lambda i, x: tf.scatter_nd(i, x, [6, 2]),
        "gather_nd": lambda x: tf.gather_nd(x, c([[1, 0], [2, 3], [0, 2]])),
        "sparse_to_dense": lambda x: tf.sparse.to_dense(tf.sparse.SparseTensor([[0, 1], [2, 3], [1, 0]], x, [3, 4]),
                                                        default_value=0.5),
        "sparse_to_dense_dyn": lambda i, v: tf.raw_ops.SparseToDense(sparse_indices=i, output_shape=[4, 4],
                                                                     sparse_values=v, default_value=c(7),
                                                                     validate_indices=False),
        "bucketize": lambda x: tf.raw_ops.Bucketize(input=x, boundaries=[-0.5, 0.0, 0.25, 0.5]),
        "range": lambda x: x + tf.cast(tf.range(tf.shape(x)[0]), tf.float32)[:, None],
        # math
        "floor_div": lambda x: tf.math.floordiv(x, c(divisors)),
        "floor_mod": lambda x: tf.math.floormod(x, c(divisors)),
        "floor_div_f": lambda x, y: tf.math.floordiv(x, y),
        "floor_mod_f": lambda x, y: tf.math.floormod(x, y),
        "round": lambda x: tf.round(tf.floor(x * 4.0) * 0.5),
        "sign": lambda x: tf.sign(x),
        "square": lambda x: tf.square(x),
        "cos": lambda x: tf.cos(x),
        "sin": lambda x: tf.sin(x),
        "ceil": lambda x: tf.math.ceil(x),
        "floor": lambda x: tf.math.floor(x),
        "pow": lambda x, y: tf.pow(x, y),
        "pow_const3": lambda x: tf.pow(x, 3.0),
        "atan2": lambda y, x: tf.math.atan2(y, x),
        "add_n": lambda x, y: tf.add_n([x, y, x]),
        "arg_min": lambda x: tf.argmin(x, axis=-1, output_type=tf.int32),
        "arg_max": lambda x: tf.argmax(x, axis=1, output_type=tf.int32),
        "bitwise_xor": lambda x, y: tf.bitwise.bitwise_xor(x, y),
        "right_shift": lambda x: tf.bitwise.right_shift(x, c(shifts)),
        "equal": lambda x, y: tf.math.equal(x, y),
        "not_equal": lambda x, y: tf.math.not_equal(x, y),
        "greater": lambda x, y: tf.math.greater(x, y),
        "greater_equal": lambda x, y: tf.math.greater_equal(x, y),
        "less": lambda x, y: tf.math.less(x, y),
        "less_equal": lambda x, y: tf.math.less_equal(x, y),
        "logical": lambda x, y: tf.cast(tf.logical_or(tf.logical_and(x > 0.0, y < 0.25), tf.logical_not(x > y)),
                                        tf.float32),
        "select_v2": lambda x, y: tf.where(x > y, x, y[:, :1] * 0.5),
        "relu_0_to_1": lambda x: tf.clip_by_value(x, 0.0, 1.0),
        "l2_normalization": lambda x: tf.math.l2_normalize(x, axis=-1),
        "local_response_normalization": lambda x: tf.nn.local_response_normalization(x, 2, 1.0, 0.5, 0.75),
        "elu": lambda x: tf.nn.elu(x),
        "hard_swish": lambda x: x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0),
        "square_diff_bcast": lambda x, y: tf.math.squared_difference(x, y),
        "rsqrt": lambda x: tf.math.rsqrt(x),
        "reduce_any": lambda x: tf.cast(tf.reduce_any(x > 0.5, axis=1), tf.float32),
        "reduce_all": lambda x: tf.cast(tf.reduce_all(x > -0.5, axis=[0, 2], keepdims=True), tf.float32),
        "zeros_like": lambda x: tf.zeros_like(x) + x * 2.0,
        # nn
        "transpose_conv_bias": lambda x: tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d_transpose(
            x, c(_w(rng, (3, 3, 4, 3))), [1, 10, 12, 4], 2, "SAME"), c(_w(rng, (4,))))),
        "conv_3d": lambda x: tf.nn.relu(tf.nn.conv3d(x, c(_w(rng, (2, 3, 3, 2, 4))), [1, 1, 2, 2, 1], "SAME")),
        "conv_3d_valid": lambda x: tf.nn.conv3d(x, c(_w(rng, (2, 2, 3, 2, 3))), [1, 2, 1, 2, 1], "VALID"),
        "conv_3d_transpose": lambda x: tf.nn.conv3d_transpose(x, c(_w(rng, (2, 3, 3, 4, 2))), [1, 6, 10, 10, 4],
                                                              [1, 2, 2, 2, 1], "SAME"),
        "conv_3d_transpose_strides": lambda x: tf.nn.conv3d_transpose(x, c(_w(rng, (3, 2, 3, 3, 2))),
                                                                      [1, 3, 8, 15, 3], [1, 1, 2, 3, 1], "SAME"),
    }
    g = fns[kind]

    def f(*xs: Any) -> Any:
        return g(*xs)

    return f, list(specs)


def specs_dtype(specs: tuple[Any, ...]) -> str:
    s = specs[0]
    return str(s[1]) if len(s) == 2 and isinstance(s[0], tuple) else F32


@dataclass(frozen=True)
class MoreSpec:
    """One TF-built model: ``b_fn`` of ``kind`` on inputs ``specs``; ``op`` is the tfl op it must contain."""

    name: str
    kind: str
    specs: tuple[Any, ...]
    op: str = ""
    quant: tuple[str, ...] = ()
    range: tuple[float, float] | None = None
    #: float results: tolerance relative to max |reference| (tests.e2e.check_tflite's rtol)
    rtol: float = 1e-5

    @property
    def tfl_op(self) -> str:
        return "tfl." + (self.op or self.name.split("/")[0])


Q8 = ("int8",)
Q = ("int8", "int16x8")


def _more_specs() -> list[MoreSpec]:
    S = MoreSpec
    f = lambda *s: tuple(s)  # noqa: E731
    return [
        S("one_hot", "one_hot", f(((4, 3), I32)), range=(-1.0, 6.0), quant=Q8),
        S("one_hot/axis0_int32", "one_hot_axis0_i32", f(((5,), I32)), range=(-1.0, 5.0)),
        S("broadcast_to", "broadcast_to", f((3, 1)), quant=Q),
        S("cumsum", "cumsum", f((2, 9))),
        S("cumsum/exclusive_reverse", "cumsum_excl_rev", f((3, 2, 5))),
        S("cumsum/int32", "cumsum", f(((2, 9), I32))),
        S("topk_v2", "topk", f((2, 7)), quant=Q8),
        S("topk_v2/int32_ties", "topk", f(((3, 8), I32)), range=(-3.0, 3.0)),
        S("segment_sum", "segment_sum", f((5, 3))),
        S("segment_sum/int32", "segment_sum", f(((5, 3), I32))),
        S("unsorted_segment_sum", "unsorted_segment_sum", f((5, 3))),
        S("unsorted_segment_sum/int32", "unsorted_segment_sum", f(((5, 3), I32))),
        S("unsorted_segment_prod", "unsorted_segment_prod", f((5, 3))),
        S("unsorted_segment_max", "unsorted_segment_max", f((5, 3))),
        S("unsorted_segment_max/int32", "unsorted_segment_max", f(((5, 3), I32))),
        S("unsorted_segment_min", "unsorted_segment_min", f((5, 3))),
        S("matrix_diag", "matrix_diag", f((2, 4)), quant=Q8),
        S("matrix_set_diag", "matrix_set_diag", f((2, 3, 4), (2, 3)), quant=Q8),
        S("matrix_set_diag/tall", "matrix_set_diag", f((4, 3), (3,))),
        S("reverse_sequence", "reverse_sequence", f((3, 5, 2))),
        S("reverse_sequence/dynamic_lengths", "reverse_sequence_dyn", f(((5, 3, 2), I32), ((3,), I32)),
          range=(0.0, 6.0)),
        S("scatter_nd", "scatter_nd", f((3, 2))),
        S("scatter_nd/unique", "scatter_nd_unique", f((2, 4))),
        S("scatter_nd/int32", "scatter_nd", f(((3, 2), I32))),
        S("scatter_nd/dynamic_indices", "scatter_nd_dyn", f(((4, 1), I32), ((4, 2), I32)), range=(0.0, 6.0)),
        S("gather_nd", "gather_nd", f((3, 4, 2)), quant=Q),
        S("sparse_to_dense", "sparse_to_dense", f((3,))),
        S("sparse_to_dense/dynamic_repeated_indices", "sparse_to_dense_dyn", f(((6, 2), I32), ((6,), I32)),
          range=(0.0, 4.0)),
        S("bucketize", "bucketize", f((2, 6))),
        S("bucketize/int32", "bucketize", f(((2, 6), I32)), range=(-2.0, 2.0)),
        S("range", "range", f((None, 3))),
        S("floor_div", "floor_div_f", f((2, 6), (2, 6)), range=(-4.0, 4.0)),
        S("floor_div/int32", "floor_div", f(((2, 6), I32))),
        S("floor_div/int8", "floor_div", f(((2, 6), I8))),
        S("floor_div/int16", "floor_div", f(((2, 6), I16))),
        S("floor_mod", "floor_mod_f", f((2, 6), (2, 6)), range=(-4.0, 4.0)),
        S("floor_mod/int32", "floor_mod", f(((2, 6), I32))),
        S("floor_mod/int8", "floor_mod", f(((2, 6), I8))),
        S("floor_mod/int16", "floor_mod", f(((2, 6), I16))),
        S("round", "round", f((3, 8)), range=(-4.0, 4.0)),
        S("sign", "sign", f((3, 4))),
        S("sign/int32", "sign", f(((3, 4), I32))),
        S("square", "square", f((3, 4))),
        S("cos", "cos", f((3, 4)), range=(-4.0, 4.0)),
        S("sin", "sin", f((3, 4)), range=(-4.0, 4.0)),
        S("ceil", "ceil", f((3, 4)), range=(-3.0, 3.0)),
        S("floor", "floor", f((3, 4)), range=(-3.0, 3.0)),
        S("pow", "pow", f((3, 4), (3, 4)), range=(0.1, 2.0)),
        S("pow/const3", "pow_const3", f((3, 4))),
        S("atan2", "atan2", f((4, 6), (4, 6))),
        S("add_n", "add_n", f((2, 3), (2, 3))),
        S("add_n/int32", "add_n", f(((2, 3), I32), ((2, 3), I32))),
        S("arg_min", "arg_min", f((3, 5)), quant=Q8),
        S("arg_max", "arg_max", f((3, 5)), quant=Q8),
        S("bitwise_xor", "bitwise_xor", f(((2, 6), I32), ((2, 6), I32))),
        S("bitwise_xor/int8", "bitwise_xor", f(((2, 6), I8), ((2, 6), I8))),
        S("bitwise_xor/int16", "bitwise_xor", f(((2, 6), I16), ((2, 6), I16))),
        S("right_shift", "right_shift", f(((2, 6), I32))),
        S("right_shift/int8", "right_shift", f(((2, 6), I8))),
        S("right_shift/int16", "right_shift", f(((2, 6), I16))),
        S("equal", "equal", f((2, 5), (2, 5)), quant=Q8),
        S("equal/int32", "equal", f(((2, 5), I32), ((2, 5), I32)), range=(-2.0, 2.0)),
        S("not_equal", "not_equal", f((2, 5), (2, 5)), quant=Q8),
        S("greater", "greater", f((2, 5), (2, 5)), quant=Q8),
        S("greater_equal", "greater_equal", f((2, 5), (2, 5)), quant=Q8),
        S("less", "less", f((2, 5), (2, 5)), quant=Q8),
        S("less_equal", "less_equal", f((2, 5), (2, 5)), quant=Q8),
        S("less/int32", "less", f(((2, 5), I32), ((2, 5), I32)), range=(-2.0, 2.0)),
        S("logical_and", "logical", f((2, 5), (2, 5)), op="logical_and"),
        S("select_v2", "select_v2", f((2, 5), (2, 5)), quant=Q8),
        S("l2_normalization", "l2_normalization", f((4, 32)), quant=Q8),
        S("local_response_normalization", "local_response_normalization", f((1, 2, 3, 8))),
        S("elu", "elu", f((2, 6)), range=(-3.0, 3.0)),
        S("hard_swish", "hard_swish", f((2, 6)), range=(-4.0, 4.0), quant=Q8),
        S("squared_difference", "square_diff_bcast", f((2, 6), (6,)), quant=Q8),
        S("rsqrt", "rsqrt", f((2, 6)), range=(0.1, 2.0), quant=Q),
        S("reduce_any", "reduce_any", f((2, 5, 3))),
        S("reduce_all", "reduce_all", f((2, 5, 3))),
        S("zeros_like", "zeros_like", f((None, 3))),
        S("transpose_conv/bias_relu", "transpose_conv_bias", f((1, 5, 6, 3)), quant=Q),
        S("conv_3d", "conv_3d", f((1, 3, 6, 6, 2))),
        S("conv_3d/valid_stride", "conv_3d_valid", f((1, 5, 7, 6, 2))),
        S("conv_3d_transpose", "conv_3d_transpose", f((1, 3, 5, 5, 2))),
        S("conv_3d_transpose/strides_1_2_3", "conv_3d_transpose_strides", f((1, 3, 4, 5, 2))),
    ]


MORE_SPECS: dict[str, MoreSpec] = {s.name: s for s in _more_specs()}


def _build_more(name: str, quant: str | None = None) -> bytes:
    spec = MORE_SPECS[name]
    tf = _tf()
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little"))
    fn, specs = b_fn(tf, rng, spec.kind, spec.specs)
    return convert(fn, specs, quant=quant, ranges=spec.range)


# ----------------------------------------------------------------------------------------- hand-built models
_TYPES = {F32: 0, I32: 2, "uint8": 3, "int64": 4, BOOL: 6, I16: 7, I8: 9}


@dataclass
class T:
    """A tensor of a hand-built model: ``data`` makes it a constant."""

    name: str
    shape: tuple[int, ...]
    dtype: str = F32
    data: np.ndarray | None = None
    quant: tuple[list[float], list[int], int] | None = None  # scales, zero points, axis


@dataclass
class Op:
    opcode: int  # BuiltinOperator code (32 = CUSTOM)
    inputs: list[int]
    outputs: list[int]
    custom_code: str | None = None
    custom_options: bytes | None = None
    #: (BuiltinOptions type code, fn(builder) -> table offset)
    options: tuple[int, Callable[[flatbuffers.Builder], int]] | None = None
    version: int = 1  # the OperatorCode version


def _vec(b: flatbuffers.Builder, xs: Any, dtype: Any = np.int32) -> int:
    return int(b.CreateNumpyVector(np.asarray(xs, dtype=dtype)))


def _tables(b: flatbuffers.Builder, offs: list[int]) -> int:
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return int(b.EndVector())


def tflite_model(tensors: list[T], ops: list[Op], inputs: list[int], outputs: list[int]) -> bytes:
    """A one-subgraph ``.tflite`` flatbuffer (schema v3)."""
    import tflite

    b = flatbuffers.Builder(1024)
    codes: list[tuple[int, str | None, int]] = []
    for o in ops:
        if (o.opcode, o.custom_code, o.version) not in codes:
            codes.append((o.opcode, o.custom_code, o.version))
    buffers: list[bytes] = [b""]
    t_offs = []
    for t in tensors:
        buf = 0
        if t.data is not None:
            buffers.append(np.ascontiguousarray(np.asarray(t.data, dtype=t.dtype)).tobytes())
            buf = len(buffers) - 1
        name = b.CreateString(t.name)
        shape = _vec(b, t.shape)
        q = None
        if t.quant is not None:
            sv, zv = _vec(b, t.quant[0], np.float32), _vec(b, t.quant[1], np.int64)
            tflite.QuantizationParametersStart(b)
            tflite.QuantizationParametersAddScale(b, sv)
            tflite.QuantizationParametersAddZeroPoint(b, zv)
            tflite.QuantizationParametersAddQuantizedDimension(b, t.quant[2])
            q = tflite.QuantizationParametersEnd(b)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape)
        tflite.TensorAddType(b, _TYPES[t.dtype])
        tflite.TensorAddBuffer(b, buf)
        tflite.TensorAddName(b, name)
        if q is not None:
            tflite.TensorAddQuantization(b, q)
        t_offs.append(tflite.TensorEnd(b))
    o_offs = []
    for o in ops:
        ins, outs = _vec(b, o.inputs), _vec(b, o.outputs)
        cust = _vec(b, list(o.custom_options), np.uint8) if o.custom_options is not None else None
        opt = o.options[1](b) if o.options is not None else None
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, codes.index((o.opcode, o.custom_code, o.version)))
        tflite.OperatorAddInputs(b, ins)
        tflite.OperatorAddOutputs(b, outs)
        if cust is not None:
            tflite.OperatorAddCustomOptions(b, cust)
        if o.options is not None and opt is not None:
            tflite.OperatorAddBuiltinOptionsType(b, o.options[0])
            tflite.OperatorAddBuiltinOptions(b, opt)
        o_offs.append(tflite.OperatorEnd(b))
    tv, ov = _tables(b, t_offs), _tables(b, o_offs)
    iv, outv = _vec(b, inputs), _vec(b, outputs)
    nm = b.CreateString("main")
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tv)
    tflite.SubGraphAddInputs(b, iv)
    tflite.SubGraphAddOutputs(b, outv)
    tflite.SubGraphAddOperators(b, ov)
    tflite.SubGraphAddName(b, nm)
    sg = tflite.SubGraphEnd(b)
    oc_offs = []
    for code, custom, version in codes:
        cs = b.CreateString(custom) if custom is not None else None
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
        tflite.OperatorCodeAddBuiltinCode(b, code)
        if cs is not None:
            tflite.OperatorCodeAddCustomCode(b, cs)
        tflite.OperatorCodeAddVersion(b, version)
        oc_offs.append(tflite.OperatorCodeEnd(b))
    buf_offs = []
    for data in buffers:
        dv = _vec(b, list(data), np.uint8) if data else None
        tflite.BufferStart(b)
        if dv is not None:
            tflite.BufferAddData(b, dv)
        buf_offs.append(tflite.BufferEnd(b))
    ocv, sgv, bv = _tables(b, oc_offs), _tables(b, [sg]), _tables(b, buf_offs)
    desc = b.CreateString("tests.modelgen_more")
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, ocv)
    tflite.ModelAddSubgraphs(b, sgv)
    tflite.ModelAddDescription(b, desc)
    tflite.ModelAddBuffers(b, bv)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _opts(cls: str, **fields: Any) -> tuple[int, Callable[[flatbuffers.Builder], int]]:
    """A builtin options table ``cls`` (e.g. "FakeQuantOptions") with scalar ``fields`` (schema names, CamelCase)."""
    import tflite

    def fn(b: flatbuffers.Builder) -> int:
        getattr(tflite, f"{cls}Start")(b)
        for k, v in fields.items():
            getattr(tflite, f"{cls}Add{k}")(b, v)
        return int(getattr(tflite, f"{cls}End")(b))

    return int(getattr(tflite.BuiltinOptions, cls)), fn


FAKE_QUANT, EMBEDDING_LOOKUP, CUSTOM, WHERE, DILATE, TRANSPOSE_CONV, ADD = 80, 7, 32, 109, 203, 67, 0
RELU_0_TO_1, DYNAMIC_UPDATE_SLICE = 152, 151


def h_fake_quant(lo: float = -1.0, hi: float = 2.0, bits: int = 8, narrow: bool = False) -> bytes:
    return tflite_model([T("x", (3, 7)), T("y", (3, 7))],
                        [Op(FAKE_QUANT, [0], [1], options=_opts("FakeQuantOptions", Min=lo, Max=hi, NumBits=bits,
                                                                 NarrowRange=narrow))], [0], [1])


def h_embedding_lookup(hybrid: bool = False) -> bytes:
    rng = np.random.default_rng(11)
    if hybrid:
        table = T("table", (10, 4), I8, rng.integers(-127, 128, (10, 4)).astype(np.int8), ([0.05], [0], 0))
    else:
        table = T("table", (10, 4), F32, rng.standard_normal((10, 4)).astype(np.float32))
    return tflite_model([T("ids", (5,), I32), table, T("y", (5, 4))], [Op(EMBEDDING_LOOKUP, [0, 1], [2])], [0], [2])


def h_where_const() -> bytes:
    cond = np.array([[True, False, True], [False, False, True]])
    return tflite_model([T("x", (2, 3)), T("cond", (2, 3), BOOL, cond), T("w", (3, 2), "int64"), T("z", (2, 3))],
                        [Op(WHERE, [1], [2]), Op(ADD, [0, 0], [3], options=_opts("AddOptions"))], [0], [2, 3])


def h_dilate(dil: tuple[int, ...] = (1, 2, 3), value: float = -1.5) -> bytes:
    shape = (2, 3, 4)
    out = tuple((d - 1) * k + 1 for d, k in zip(shape, dil))
    return tflite_model([T("x", shape), T("dil", (3,), I32, np.array(dil, np.int32)),
                         T("v", (), F32, np.array(value, np.float32)), T("y", out)],
                        [Op(DILATE, [0, 1, 2], [3])], [0], [3])


def transpose_conv_bias_options(padding: str, stride_h: int, stride_w: int) -> bytes:
    """MediaPipe's TfLiteTransposeConvParams: {padding (1 SAME, 2 VALID), stride_width, stride_height}."""
    return struct.pack("<3i", {"SAME": 1, "VALID": 2}[padding], stride_w, stride_h)


def pool_options(padding: str, stride: int, filt: int, act: int = 0) -> bytes:
    """TfLitePoolParams: {padding, stride_width, stride_height, filter_width, filter_height, activation} + the
    computed padding the runtime fills in."""
    return struct.pack("<6i", {"SAME": 1, "VALID": 2}[padding], stride, stride, filt, filt, act) + bytes(16)


def transpose_conv_bias_geometry(ih: int, k: int, s: int, padding: str) -> tuple[int, int]:
    """(output size, front pad) of MediaPipe's Convolution2DTransposeBias."""
    p = max(0, k - (ih - 1) % s - 1) if padding == "SAME" else 0
    return (ih - 1) * s + k - p, p // 2


def h_conv2d_transpose_bias(padding: str = "SAME", k: int = 4, s: int = 2, builtin: bool = False) -> bytes:
    """MediaPipe's custom Convolution2DTransposeBias on a 1x5x6x3 input (OHWI weights [2,k,k,3], bias [2]).

    ``builtin=True`` writes the same computation with TFLite builtins (TRANSPOSE_CONV with an explicit output
    shape, and its bias input), which LiteRT runs: the oracle of the custom op."""
    rng = np.random.default_rng(5)
    ih, iw, oc = 5, 6, 2
    w = rng.standard_normal((oc, k, k, 3)).astype(np.float32)
    bias = rng.standard_normal(oc).astype(np.float32)
    oh, _ = transpose_conv_bias_geometry(ih, k, s, padding)
    ow, _ = transpose_conv_bias_geometry(iw, k, s, padding)
    out = (1, oh, ow, oc)
    if not builtin:
        return tflite_model([T("x", (1, ih, iw, 3)), T("w", w.shape, F32, w), T("b", (oc,), F32, bias), T("y", out)],
                            [Op(CUSTOM, [0, 1, 2], [3], "Convolution2DTransposeBias",
                                transpose_conv_bias_options(padding, s, s))], [0], [3])
    pad = "SAME" if padding == "SAME" else "VALID"
    return tflite_model([T("os", (4,), I32, np.array(out, np.int32)), T("w", w.shape, F32, w),
                         T("x", (1, ih, iw, 3)), T("b", (oc,), F32, bias), T("y", out)],
                        [Op(TRANSPOSE_CONV, [0, 1, 2, 3], [4],
                            options=_opts("TransposeConvOptions", Padding=0 if pad == "SAME" else 1, StrideW=s,
                                          StrideH=s))], [2], [4])


def h_max_pool_argmax(padding: str = "VALID", stride: int = 2, filt: int = 2, unpool: bool = False) -> bytes:
    """MediaPipe's MaxPoolingWithArgmax2D on 1x6x8x3 (and, with ``unpool``, MaxUnpooling2D of its outputs)."""
    h, w, c = 6, 8, 3
    oh = -(-h // stride) if padding == "SAME" else (h - filt) // stride + 1
    ow = -(-w // stride) if padding == "SAME" else (w - filt) // stride + 1
    ts = [T("x", (1, h, w, c)), T("v", (1, oh, ow, c)), T("i", (1, oh, ow, c))]
    ops = [Op(CUSTOM, [0], [1, 2], "MaxPoolingWithArgmax2D", pool_options(padding, stride, filt))]
    outs = [1, 2]
    if unpool:
        ts.append(T("u", (1, oh * filt, ow * filt, c)))
        ops.append(Op(CUSTOM, [1, 2], [3], "MaxUnpooling2D", pool_options(padding, stride, filt)))
        outs = [3]
    return tflite_model(ts, ops, [0], outs)


def h_relu_0_to_1(quant: bool = False) -> bytes:
    qi = ([0.02], [-3], 0) if quant else None
    qo = ([1.0 / 255], [-128], 0) if quant else None
    dt = I8 if quant else F32
    return tflite_model([T("x", (2, 7), dt, quant=qi), T("y", (2, 7), dt, quant=qo)], [Op(RELU_0_TO_1, [0], [1])],
                        [0], [1])


def h_dynamic_update_slice(start: tuple[int, int] | None = (1, 4), quant: bool = False) -> bytes:
    """DYNAMIC_UPDATE_SLICE of a [2, 3] update into a [4, 6] operand at a constant start (clamped by the kernel
    when it does not fit) or, with ``start=None``, at a start given as a model input."""
    q = ([0.05], [3], 0) if quant else None
    dt = I8 if quant else F32
    ts = [T("x", (4, 6), dt, quant=q), T("u", (2, 3), dt, quant=q)]
    if start is None:
        ts.append(T("start", (2,), I32))
        ins = [0, 1, 2]
    else:
        ts.append(T("start", (2,), I32, np.array(start, np.int32)))
        ins = [0, 1]
    ts.append(T("y", (4, 6), dt, quant=q))
    return tflite_model(ts, [Op(DYNAMIC_UPDATE_SLICE, [0, 1, 2], [3])], ins, [3])


@dataclass(frozen=True)
class HandSpec:
    name: str
    builder: Callable[..., bytes]
    params: dict[str, Any] = field(default_factory=dict)
    op: str = ""


HAND_BUILT: dict[str, HandSpec] = {s.name: s for s in [
    HandSpec("fake_quant", h_fake_quant),
    HandSpec("fake_quant/4bit", h_fake_quant, {"lo": -0.3, "hi": 1.7, "bits": 4}),
    HandSpec("fake_quant/16bit", h_fake_quant, {"lo": -2.0, "hi": 0.5, "bits": 16}),
    HandSpec("embedding_lookup", h_embedding_lookup),
    HandSpec("embedding_lookup/hybrid_int8", h_embedding_lookup, {"hybrid": True}),
    HandSpec("where/constant_condition", h_where_const, op="where"),
    HandSpec("dilate", h_dilate),
    HandSpec("relu_0_to_1", h_relu_0_to_1),
    HandSpec("relu_0_to_1/int8", h_relu_0_to_1, {"quant": True}),
    HandSpec("dynamic_update_slice", h_dynamic_update_slice),
    HandSpec("dynamic_update_slice/clamped_start", h_dynamic_update_slice, {"start": (3, 5)}),
    HandSpec("dynamic_update_slice/start_input", h_dynamic_update_slice, {"start": None}),
    HandSpec("dynamic_update_slice/int8_start_input", h_dynamic_update_slice, {"start": None, "quant": True}),
    HandSpec("custom/Convolution2DTransposeBias", h_conv2d_transpose_bias, op="custom"),
    HandSpec("custom/Convolution2DTransposeBias_k3_valid", h_conv2d_transpose_bias, {"padding": "VALID", "k": 3},
             op="custom"),
    HandSpec("custom/Convolution2DTransposeBias_k3_same", h_conv2d_transpose_bias, {"k": 3}, op="custom"),
    HandSpec("custom/MaxPoolingWithArgmax2D", h_max_pool_argmax, op="custom"),
    HandSpec("custom/MaxPoolingWithArgmax2D_same3", h_max_pool_argmax, {"padding": "SAME", "stride": 2, "filt": 3},
             op="custom"),
    HandSpec("custom/MaxUnpooling2D", h_max_pool_argmax, {"unpool": True}, op="custom"),
]}

#: quantized variants TFLite cannot produce or run (so only the listed modes are tested): name -> reason
QUANT_NOTES: dict[str, str] = {
    **{op: f"int16x8: converter: 'Quantization to 16x8-bit not yet supported for op: {op.upper()}'" for op in (
        "one_hot", "topk_v2", "matrix_diag", "matrix_set_diag", "arg_min", "arg_max", "equal", "not_equal", "greater",
        "greater_equal", "less", "less_equal", "select_v2", "l2_normalization", "hard_swish", "elu",
        "reverse_sequence")},
    "reverse_sequence": "int8: LiteRT: \"Type 'INT8' is not supported by reverse_sequence\"; int16x8: converter",
    "elu": "int8: the converter keeps ELU in float between DEQUANTIZE/QUANTIZE; int16x8: converter refuses",
    "squared_difference": "int16x8: LiteRT: SquaredDifference only supports FLOAT32, INT32 and INT8",
    "not_equal": "int8: the converter keeps NOT_EQUAL in float (still tested: a float op in an int8 model)",
    "cumsum": "float32/int32 only in TFLite", "segment_sum": "float32/int32 only in TFLite",
    "scatter_nd": "TF's quantizer leaves SCATTER_ND in float",
}

#: hand-built models LiteRT cannot run (MediaPipe custom ops): checked against a numpy port of the kernel
NOT_RUNNABLE = frozenset(n for n in HAND_BUILT if n.startswith("custom/"))

#: input domains of the TF-built and hand-built models (int inputs draw integers from it)
RANGES: dict[str, tuple[float, float]] = {
    **{s.name: s.range for s in MORE_SPECS.values() if s.range is not None},
    "embedding_lookup": (0.0, 10.0), "embedding_lookup/hybrid_int8": (0.0, 10.0),
    "fake_quant": (-1.5, 2.5), "fake_quant/4bit": (-0.5, 2.0), "fake_quant/16bit": (-2.5, 1.0),
    "where/constant_condition": (-50.0, 50.0), "relu_0_to_1": (-1.0, 2.0),
    "dynamic_update_slice/start_input": (-2.0, 6.0), "dynamic_update_slice/int8_start_input": (-2.0, 6.0),
}


def more_model(name: str, quant: str | None = None) -> bytes:
    """The cached ``.tflite`` of ``MORE_SPECS[name]`` (optionally quantized) or ``HAND_BUILT[name]``."""
    full = name if quant is None else f"{name}/{quant}"
    if name in HAND_BUILT:
        h = HAND_BUILT[name]
        return cached(f"more/{full}", h.builder, dict(h.params), extra=(tflite_model, T, Op, _opts),
                      key="hand")
    spec = MORE_SPECS[name]
    return cached(f"more/{full}", _build_more, {"name": name, "quant": quant}, extra=(b_fn, _w),
                  key=(spec.kind, spec.specs, spec.range))


def all_cases() -> list[tuple[str, str | None]]:
    """(name, quant) of every model: each TF-built one in float and its ``quant`` modes, each hand-built one."""
    out: list[tuple[str, str | None]] = []
    for s in MORE_SPECS.values():
        out += [(s.name, None)] + [(s.name, q) for q in s.quant]
    out += [(n, None) for n in HAND_BUILT]
    return out


def expected_op(name: str) -> str:
    if name in HAND_BUILT:
        return "tfl." + (HAND_BUILT[name].op or name.split("/")[0])
    return MORE_SPECS[name].tfl_op
