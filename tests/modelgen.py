"""Deterministic builders of ``.tflite`` test models, cached on disk.

Every builder returns the ``.tflite`` flatbuffer as bytes.  Results are cached under
``<repo>/.cache/models/<name>-<hash>.tflite``; the hash covers the builder's source, its parameters, the
conversion helper's source and the TensorFlow version, so editing a builder rebuilds just that model.
TensorFlow is imported lazily, inside the functions, so importing this module is cheap.

* ``ONE_OP_MODELS[name](quant=None)`` - one small model per TFLite op; ``name`` is the TFLite op name,
  optionally with a variant (``"conv_2d/same_relu6"``).  ``INPUT_RANGES[name]`` gives ``(lo, hi)`` for
  inputs of models that need a restricted domain (sqrt, log, div...).
* ``small_cnn()``, ``mlp()``, ``depthwise_net()``, ``mobilenet_v2()``, ``mobilenet_v2_small()``.

``quant`` is ``None`` (float32), ``"int8"`` (full integer, int8 input/output) or ``"int16x8"`` (16-bit
activations, 8-bit weights; float input/output), calibrated with a seeded representative dataset.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
CACHE_DIR = Path(os.environ.get("TF2TOSA_MODEL_CACHE", REPO / ".cache" / "models"))

QUANT_MODES = (None, "int8", "int16x8")

# An input spec: a shape (float32) or (shape, dtype name); ``None`` marks a dynamic dimension.
Shape = tuple[int | None, ...]
Spec = Shape | tuple[Shape, str]
BuildResult = tuple[Callable[..., Any], list[Spec]]

BUILD_LOG: list[tuple[str, float]] = []  # (cache file name, seconds) for every model built by this process


def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    return tf


def full_int8(conv: Any, data: list[list[np.ndarray]]) -> None:
    """Set a TFLiteConverter to full-integer int8 (int8 inputs and outputs) calibrated on ``data`` (input sets)."""
    tf = _tf()

    def rep() -> Any:
        yield from data

    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8


def _w(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 0.5) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _spec_shape_dtype(spec: Spec) -> tuple[Shape, str]:
    if len(spec) == 2 and isinstance(spec[0], tuple):
        return spec[0], str(spec[1])
    return tuple(None if d is None else int(d) for d in spec), "float32"  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# Conversion and caching
# --------------------------------------------------------------------------------------------------

def _rep_data(specs: list[Spec], ranges: tuple[float, float] | None, seed: int, n: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed + 7919)
    lo, hi = ranges if ranges is not None else (-1.0, 1.0)
    out = []
    for _ in range(n):
        sample = []
        for s in specs:
            shape_, dt = _spec_shape_dtype(s)
            shape = tuple(1 if d is None else d for d in shape_)
            if np.dtype(dt).kind == "f":
                sample.append(rng.uniform(lo, hi, size=shape).astype(dt))
            else:
                sample.append(rng.integers(0, 4, size=shape).astype(dt))
        out.append(sample)
    return out


def convert(fn: Callable[..., Any], specs: list[Spec], *, quant: str | None = None,
            ranges: tuple[float, float] | None = None, seed: int = 0, n_rep: int = 16,
            fp16_weights: bool = False) -> bytes:
    """Convert a function of tensors, or a Keras model, to ``.tflite`` bytes.

    Keras models go through ``from_keras_model`` (which freezes their variables); plain functions are
    traced with an input signature built from ``specs``.
    """
    tf = _tf()
    if isinstance(fn, tf.keras.Model):
        conv = tf.lite.TFLiteConverter.from_keras_model(fn)
    else:
        sigs = [tf.TensorSpec(shape, getattr(tf, dt), name=f"x{i}")
                for i, (shape, dt) in enumerate(_spec_shape_dtype(s) for s in specs)]
        tfn = tf.function(fn, input_signature=sigs, autograph=False)
        conv = tf.lite.TFLiteConverter.from_concrete_functions([tfn.get_concrete_function()], tfn)
    if fp16_weights:
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    if quant is not None:
        if quant not in ("int8", "int16x8", "uint8io"):
            raise ValueError(f"unknown quant mode {quant!r}")
        data = _rep_data(specs, ranges, seed, n_rep)

        def rep() -> Any:
            yield from data

        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = rep
        if quant in ("int8", "uint8io"):  # uint8io: int8 inside, uint8 model inputs and outputs
            io = tf.uint8 if quant == "uint8io" else tf.int8
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            conv.inference_input_type = io
            conv.inference_output_type = io
        else:
            conv.target_spec.supported_ops = [
                tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    return bytes(conv.convert())


def _source(obj: Any) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return repr(obj)


def _tf_version() -> str:
    try:
        from importlib.metadata import version

        return version("tensorflow-cpu")
    except Exception:
        try:
            from importlib.metadata import version

            return version("tensorflow")
        except Exception:
            return "unknown"


def cache_path(name: str, builder: Any, params: dict[str, Any], extra: tuple[Any, ...] = (),
               key: Any = None) -> Path:
    """The cache file for a model: ``<name>-<hash>.tflite`` (``/`` in names becomes ``__``)."""
    h = hashlib.sha256()
    for part in (_source(builder), repr(sorted(params.items())), repr(key), _source(convert), _source(_rep_data),
                 _tf_version(), *(_source(e) for e in extra)):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return CACHE_DIR / f"{name.replace('/', '__')}-{h.hexdigest()[:16]}.tflite"


def cached(name: str, builder: Callable[..., bytes], params: dict[str, Any],
           extra: tuple[Any, ...] = (), key: Any = None) -> bytes:
    """Return the cached model or build it with ``builder(**params)`` and store it atomically.

    ``extra`` are further functions whose source enters the hash; ``key`` is further hashed data.
    """
    path = cache_path(name, builder, params, extra, key)
    if path.exists():
        return path.read_bytes()
    t0 = time.perf_counter()
    data = builder(**params)
    BUILD_LOG.append((path.name, time.perf_counter() - t0))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return data


# --------------------------------------------------------------------------------------------------
# One-op models
# --------------------------------------------------------------------------------------------------

def _act(tf: Any, y: Any, act: str | None) -> Any:
    if act == "relu":
        return tf.nn.relu(y)
    if act == "relu6":
        return tf.nn.relu6(y)
    return y


def b_conv_2d(tf: Any, rng: np.random.Generator, padding: str = "SAME", strides: int = 1, dilations: int = 1,
              act: str | None = "relu", shape: tuple[int, ...] = (1, 8, 8, 3), cout: int = 4,
              k: int = 3) -> BuildResult:
    w, b = _w(rng, (k, k, shape[-1], cout)), _w(rng, (cout,))

    def f(x: Any) -> Any:
        y = tf.nn.bias_add(tf.nn.conv2d(x, w, strides=strides, padding=padding, dilations=dilations), b)
        return _act(tf, y, act)

    return f, [shape]


def b_depthwise_conv_2d(tf: Any, rng: np.random.Generator, mult: int = 1, padding: str = "SAME",
                        strides: int = 1, act: str | None = "relu6",
                        shape: tuple[int, ...] = (1, 8, 8, 3)) -> BuildResult:
    w, b = _w(rng, (3, 3, shape[-1], mult)), _w(rng, (shape[-1] * mult,))

    def f(x: Any) -> Any:
        y = tf.nn.bias_add(tf.nn.depthwise_conv2d(x, w, strides=[1, strides, strides, 1], padding=padding), b)
        return _act(tf, y, act)

    return f, [shape]


def b_transpose_conv(tf: Any, rng: np.random.Generator, padding: str = "SAME", strides: int = 2,
                     shape: tuple[int, ...] = (1, 4, 4, 3), cout: int = 2) -> BuildResult:
    w = _w(rng, (3, 3, cout, shape[-1]))
    oh = shape[1] * strides if padding == "SAME" else (shape[1] - 1) * strides + 3
    ow = shape[2] * strides if padding == "SAME" else (shape[2] - 1) * strides + 3

    def f(x: Any) -> Any:
        return tf.nn.conv2d_transpose(x, w, output_shape=[shape[0], oh, ow, cout], strides=strides,
                                      padding=padding)

    return f, [shape]


def b_fully_connected(tf: Any, rng: np.random.Generator, shape: tuple[int, ...] = (1, 16), units: int = 8,
                      act: str | None = "relu", bias: bool = True) -> BuildResult:
    w, b = _w(rng, (shape[-1], units)), _w(rng, (units,))

    def f(x: Any) -> Any:
        y = tf.matmul(x, w) if len(shape) == 2 else tf.einsum("...i,io->...o", x, w)
        if bias:
            y = y + b
        return _act(tf, y, act)

    return f, [shape]


def b_batch_matmul(tf: Any, rng: np.random.Generator, a: tuple[int, ...] = (2, 3, 4),
                   b: tuple[int, ...] = (2, 4, 5), adj_y: bool = False) -> BuildResult:
    def f(x: Any, y: Any) -> Any:
        return tf.matmul(x, y, adjoint_b=adj_y)

    return f, [a, b]


def b_binary(tf: Any, rng: np.random.Generator, op: str = "add", a: tuple[int, ...] = (1, 4, 4, 3),
             b: tuple[int, ...] = (1, 4, 4, 3)) -> BuildResult:
    fns = {"add": tf.add, "sub": tf.subtract, "mul": tf.multiply, "div": tf.divide, "maximum": tf.maximum,
           "minimum": tf.minimum, "squared_difference": tf.math.squared_difference}
    g = fns[op]

    def f(x: Any, y: Any) -> Any:
        return g(x, y)

    return f, [a, b]


def b_unary(tf: Any, rng: np.random.Generator, op: str = "abs", shape: tuple[int, ...] = (1, 4, 4, 3)) -> BuildResult:
    fns: dict[str, Callable[[Any], Any]] = {
        "rsqrt": tf.math.rsqrt, "sqrt": tf.sqrt, "exp": tf.exp, "log": tf.math.log, "abs": tf.abs,
        "neg": tf.negative, "relu": tf.nn.relu, "relu6": tf.nn.relu6,
        "relu_n1_to_1": lambda x: tf.clip_by_value(x, -1.0, 1.0),
        "leaky_relu": lambda x: tf.nn.leaky_relu(x, alpha=0.2),
        "hard_swish": lambda x: x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0),
        "logistic": tf.sigmoid, "tanh": tf.tanh,
        "gelu": lambda x: tf.nn.gelu(x, approximate=False),
        "gelu_approx": lambda x: tf.nn.gelu(x, approximate=True),
        "softmax": tf.nn.softmax, "log_softmax": tf.nn.log_softmax,
    }
    g = fns[op]

    def f(x: Any) -> Any:
        return g(x)

    return f, [shape]


def b_prelu(tf: Any, rng: np.random.Generator, shape: tuple[int, ...] = (1, 4, 4, 3),
            shared_axes: tuple[int, ...] = (1, 2)) -> BuildResult:
    alpha_shape = tuple(1 if i + 1 in shared_axes else d for i, d in enumerate(shape[1:]))
    alpha = np.abs(_w(rng, alpha_shape, 0.3))
    keras = tf.keras
    inp = keras.Input(shape[1:], batch_size=shape[0], name="x0")
    layer = keras.layers.PReLU(shared_axes=list(shared_axes))
    model = keras.Model(inp, layer(inp))  # only the Keras layer (frozen) gives PRELU, not the raw pattern
    layer.set_weights([alpha])
    return model, [shape]


def b_pool(tf: Any, rng: np.random.Generator, op: str = "max", k: int = 2, strides: int = 2,
           padding: str = "VALID", shape: tuple[int, ...] = (1, 8, 8, 3)) -> BuildResult:
    g = tf.nn.max_pool2d if op == "max" else tf.nn.avg_pool2d

    def f(x: Any) -> Any:
        return g(x, ksize=k, strides=strides, padding=padding)

    return f, [shape]


def b_reduce(tf: Any, rng: np.random.Generator, op: str = "mean", axis: tuple[int, ...] = (1, 2),
             keepdims: bool = True, shape: tuple[int, ...] = (1, 4, 4, 3)) -> BuildResult:
    g = {"mean": tf.reduce_mean, "sum": tf.reduce_sum, "reduce_max": tf.reduce_max,
         "reduce_min": tf.reduce_min, "reduce_prod": tf.reduce_prod}[op]

    def f(x: Any) -> Any:
        return g(x, axis=list(axis), keepdims=keepdims)

    return f, [shape]


def b_shape_op(tf: Any, rng: np.random.Generator, op: str = "reshape",
               shape: tuple[int, ...] = (1, 4, 4, 3)) -> BuildResult:
    fns: dict[str, Callable[[Any], Any]] = {
        "reshape": lambda x: tf.reshape(x, [1, 12, 4]),
        "squeeze": lambda x: tf.squeeze(x, axis=[1]),
        "expand_dims": lambda x: tf.expand_dims(x, axis=2),
        "transpose": lambda x: tf.transpose(x, [0, 3, 1, 2]),
        "depth_to_space": lambda x: tf.nn.depth_to_space(x, 2),
        "space_to_depth": lambda x: tf.nn.space_to_depth(x, 2),
        "tile": lambda x: tf.tile(x, [1, 2, 3, 1]),
        "cast": lambda x: tf.cast(x, tf.int32),
        "cast_int": lambda x: tf.cast(x, tf.float32),
    }
    g = fns[op]

    def f(x: Any) -> Any:
        return g(x)

    if op == "cast_int":
        return f, [(shape, "int32")]
    # With static shapes the converter rewrites squeeze/expand_dims to RESHAPE; dynamic dims keep them.
    if op == "squeeze":
        return f, [(None, 1, None, 3)]
    if op == "expand_dims":
        return f, [(None, 4, 3)]
    if op == "depth_to_space":
        return f, [(1, 3, 4, 8)]
    return f, [shape]


def b_concatenation(tf: Any, rng: np.random.Generator, axis: int = 3, n: int = 3) -> BuildResult:
    shapes = [(1, 4, 4, 2 + i) if axis == 3 else (1, 2 + i, 4, 3) for i in range(n)]

    def f(*xs: Any) -> Any:
        return tf.concat(list(xs), axis=axis)

    return f, list(shapes)


def b_pack(tf: Any, rng: np.random.Generator, axis: int = 1, n: int = 3) -> BuildResult:
    def f(*xs: Any) -> Any:
        return tf.stack(list(xs), axis=axis)

    return f, [(2, 4, 3)] * n


def b_unpack(tf: Any, rng: np.random.Generator, axis: int = 1, shape: tuple[int, ...] = (2, 3, 4)) -> BuildResult:
    def f(x: Any) -> Any:
        return tuple(tf.unstack(x, axis=axis))

    return f, [shape]


def b_split(tf: Any, rng: np.random.Generator, sizes: tuple[int, ...] | int = 2, axis: int = 3,
            shape: tuple[int, ...] = (1, 4, 4, 6)) -> BuildResult:
    def f(x: Any) -> Any:
        parts = tf.split(x, list(sizes) if isinstance(sizes, tuple) else sizes, axis=axis)
        return tuple(parts)

    return f, [shape]


def b_slice(tf: Any, rng: np.random.Generator, shape: tuple[int, ...] = (1, 6, 6, 4)) -> BuildResult:
    def f(x: Any) -> Any:
        return tf.slice(x, [0, 1, 2, 0], [1, 3, -1, 2])

    return f, [shape]


def b_strided_slice(tf: Any, rng: np.random.Generator, variant: str = "stride",
                    shape: tuple[int, ...] = (1, 8, 8, 4)) -> BuildResult:
    def f(x: Any) -> Any:
        if variant == "stride":  # begin/end masks via open ranges, stride 2 and a negative index
            return x[:, 1::2, :-1:3, :]
        if variant == "shrink":  # shrink_axis on dims 0 and 3, ellipsis-free
            return x[0, 1:7:2, 2:, 1]
        if variant == "reverse":  # negative stride
            return x[:, ::-1, 1:6:2, :]
        raise ValueError(variant)

    return f, [shape]


def b_pad(tf: Any, rng: np.random.Generator, mode: str = "CONSTANT", value: float = 0.0,
          pads: tuple[tuple[int, int], ...] = ((0, 0), (1, 2), (2, 1), (0, 0)),
          shape: tuple[int, ...] = (1, 4, 4, 3)) -> BuildResult:
    def f(x: Any) -> Any:
        return tf.pad(x, [list(p) for p in pads], mode=mode, constant_values=value)

    return f, [shape]


def b_resize(tf: Any, rng: np.random.Generator, method: str = "bilinear", size: tuple[int, int] = (8, 12),
             align_corners: bool = False, half_pixel_centers: bool = False,
             shape: tuple[int, ...] = (1, 4, 5, 3)) -> BuildResult:
    g = tf.raw_ops.ResizeBilinear if method == "bilinear" else tf.raw_ops.ResizeNearestNeighbor

    def f(x: Any) -> Any:
        return g(images=x, size=list(size), align_corners=align_corners, half_pixel_centers=half_pixel_centers)

    return f, [shape]


def b_gather(tf: Any, rng: np.random.Generator, axis: int = 1, dynamic: bool = False,
             shape: tuple[int, ...] = (1, 6, 4)) -> BuildResult:
    idx = np.array([4, 0, 2, 2, 5], dtype=np.int32)
    if dynamic:
        def fd(x: Any, i: Any) -> Any:
            return tf.gather(x, i, axis=axis)

        return fd, [shape, ((3,), "int32")]

    def f(x: Any) -> Any:
        return tf.gather(x, idx, axis=axis)

    return f, [shape]


def b_fp16_const_add(tf: Any, rng: np.random.Generator, shape: tuple[int, ...] = (1, 4, 4, 3)) -> BuildResult:
    c = _w(rng, (1, 4, 4, 3))

    def f(x: Any) -> Any:
        return x + c

    return f, [shape]


@dataclass(frozen=True)
class OneOpSpec:
    """How to build one op model: a builder ``(tf, rng, **params) -> (fn, input specs)``."""

    name: str
    builder: Callable[..., BuildResult]
    params: dict[str, Any] = field(default_factory=dict)
    op: str = ""  # the TFLite op the model must contain (defaults to the name before "/")
    extra_ops: frozenset[str] = frozenset()  # other ops that may legitimately appear
    fp16_weights: bool = False

    @property
    def tfl_op(self) -> str:
        return self.op or self.name.split("/")[0]


def _specs() -> list[OneOpSpec]:
    S = OneOpSpec
    specs = [
        S("conv_2d", b_conv_2d, {}),
        S("conv_2d/valid", b_conv_2d, {"padding": "VALID"}),
        S("conv_2d/stride2", b_conv_2d, {"strides": 2, "act": None}),
        S("conv_2d/stride2_valid", b_conv_2d, {"strides": 2, "padding": "VALID", "shape": (1, 9, 9, 3)}),
        S("conv_2d/dilation2", b_conv_2d, {"dilations": 2}),
        S("conv_2d/same_relu6", b_conv_2d, {"act": "relu6"}),
        S("conv_2d/1x1", b_conv_2d, {"k": 1, "act": None, "cout": 5}),
        S("depthwise_conv_2d", b_depthwise_conv_2d, {}),
        S("depthwise_conv_2d/mult2", b_depthwise_conv_2d, {"mult": 2, "act": None}),
        S("depthwise_conv_2d/stride2_valid", b_depthwise_conv_2d, {"strides": 2, "padding": "VALID",
                                                                    "act": "relu"}),
        S("transpose_conv", b_transpose_conv, {}),
        S("transpose_conv/valid", b_transpose_conv, {"padding": "VALID"}),
        S("fully_connected", b_fully_connected, {}),
        S("fully_connected/no_act", b_fully_connected, {"act": None, "shape": (3, 16)}),
        S("fully_connected/keep_num_dims", b_fully_connected, {"shape": (1, 4, 16), "act": None}),
        S("batch_matmul", b_batch_matmul, {}),
        S("batch_matmul/adj_y_4d", b_batch_matmul, {"a": (1, 2, 3, 4), "b": (1, 2, 5, 4), "adj_y": True}),
    ]
    for op in ("add", "sub", "mul", "div", "maximum", "minimum", "squared_difference"):
        specs.append(S(op, b_binary, {"op": op}))
    specs += [
        S("add/broadcast", b_binary, {"op": "add", "b": (3,)}),
        S("mul/broadcast", b_binary, {"op": "mul", "a": (1, 4, 1, 3), "b": (1, 1, 4, 1)}),
        S("sub/broadcast", b_binary, {"op": "sub", "a": (2, 1, 3), "b": (4, 1)}),
    ]
    for op in ("rsqrt", "sqrt", "exp", "log", "abs", "neg", "relu", "relu6", "relu_n1_to_1", "leaky_relu",
               "hard_swish", "logistic", "tanh", "gelu", "softmax", "log_softmax"):
        specs.append(S(op, b_unary, {"op": op}))
    specs += [
        S("gelu/approximate", b_unary, {"op": "gelu_approx"}),
        S("prelu", b_prelu, {}),
        S("prelu/per_element", b_prelu, {"shared_axes": ()}),
        S("average_pool_2d", b_pool, {"op": "avg"}),
        S("average_pool_2d/same3x3", b_pool, {"op": "avg", "k": 3, "strides": 2, "padding": "SAME"}),
        S("max_pool_2d", b_pool, {"op": "max"}),
        S("max_pool_2d/same3x3", b_pool, {"op": "max", "k": 3, "strides": 2, "padding": "SAME"}),
        S("mean", b_reduce, {"op": "mean"}),
        S("mean/axis3", b_reduce, {"op": "mean", "axis": (3,), "keepdims": False}),
        S("sum", b_reduce, {"op": "sum", "axis": (1,)}),
        S("reduce_max", b_reduce, {"op": "reduce_max", "axis": (2,), "keepdims": False}),
        S("reduce_min", b_reduce, {"op": "reduce_min", "axis": (1, 3)}),
        S("reduce_prod", b_reduce, {"op": "reduce_prod", "axis": (3,)}),
    ]
    for op in ("reshape", "squeeze", "expand_dims", "transpose", "depth_to_space", "space_to_depth", "tile", "cast"):
        specs.append(S(op, b_shape_op, {"op": op}))
    specs += [
        S("cast/int32_to_float", b_shape_op, {"op": "cast_int"}),
        S("concatenation", b_concatenation, {}),
        S("concatenation/axis1", b_concatenation, {"axis": 1, "n": 2}),
        S("pack", b_pack, {}),
        S("unpack", b_unpack, {}),
        S("split", b_split, {}),
        S("split_v", b_split, {"sizes": (1, 2, 3)}),
        S("slice", b_slice, {}),
        S("strided_slice", b_strided_slice, {}),
        S("strided_slice/shrink", b_strided_slice, {"variant": "shrink"}),
        S("strided_slice/reverse", b_strided_slice, {"variant": "reverse"}),
        S("pad", b_pad, {}),
        S("padv2", b_pad, {"value": 1.5}),
        S("mirror_pad/reflect", b_pad, {"mode": "REFLECT"}),
        S("mirror_pad/symmetric", b_pad, {"mode": "SYMMETRIC"}),
    ]
    for method, op in (("bilinear", "resize_bilinear"), ("nearest", "resize_nearest_neighbor")):
        specs += [
            S(op, b_resize, {"method": method}),
            S(f"{op}/align_corners", b_resize, {"method": method, "align_corners": True}),
            S(f"{op}/half_pixel_centers", b_resize, {"method": method, "half_pixel_centers": True}),
            S(f"{op}/downscale", b_resize, {"method": method, "size": (3, 3), "half_pixel_centers": True}),
        ]
    specs += [
        S("gather", b_gather, {}),
        S("gather/indices_input", b_gather, {"dynamic": True, "axis": 0, "shape": (6, 4)}),
        S("dequantize", b_fp16_const_add, {}, extra_ops=frozenset({"add"}), fp16_weights=True),
    ]
    return specs


ONE_OP_SPECS: dict[str, OneOpSpec] = {s.name: s for s in _specs()}

# Input domains for models whose op is undefined or ill-conditioned on [-1, 1].
INPUT_RANGES: dict[str, tuple[float, float]] = {
    "rsqrt": (0.1, 2.0), "sqrt": (0.0, 2.0), "log": (0.1, 2.0), "div": (0.5, 2.0),
    "cast": (-10.0, 10.0), "exp": (-2.0, 2.0), "hard_swish": (-4.0, 4.0), "relu6": (-8.0, 8.0),
    "relu_n1_to_1": (-2.0, 2.0), "leaky_relu": (-2.0, 2.0), "gelu": (-3.0, 3.0), "gelu/approximate": (-3.0, 3.0),
    "logistic": (-4.0, 4.0), "tanh": (-3.0, 3.0), "softmax": (-3.0, 3.0), "log_softmax": (-3.0, 3.0),
    "cast/int32_to_float": (-100.0, 100.0), "gather/indices_input": (0.0, 6.0),
}

# How TF 2.21 had to be coaxed into emitting some ops (all ONE_OP_MODELS entries do emit their op).
PRODUCTION_NOTES: dict[str, str] = {
    "squeeze": "static shapes become RESHAPE; the model has dynamic dims (-1, 1, -1, 3)",
    "expand_dims": "static shapes become RESHAPE; the model has a dynamic batch (-1, 4, 3)",
    "prelu": "only a frozen Keras PReLU layer fuses; the raw relu/neg/mul pattern stays unfused",
    "dequantize": "float16 weights (supported_types=[float16]) feeding DEQUANTIZE, then ADD",
    "softmax": "softmax(beta * x) is never fused: beta is always 1",
}

# Quantized variants that TF cannot convert or LiteRT 2.3 cannot run: quant mode -> name or op -> reason.
QUANT_UNSUPPORTED: dict[str, dict[str, str]] = {
    "int8": {
        "dequantize": "float16 weights conflict with full-integer quantization (converter refuses)",
        "depth_to_space": "LiteRT: 'Registration failed' (op version not registered)",
        "tile": "LiteRT: 'Registration failed' (op version not registered)",
    },
    "int16x8": {
        **{op: f"converter: quantization to 16x8 not supported for {op.upper()}" for op in (
            "div", "sqrt", "neg", "relu_n1_to_1", "hard_swish", "log_softmax", "prelu", "depth_to_space",
            "space_to_depth", "cast")},
        "dequantize": "float16 weights are quantized away; no DEQUANTIZE of constants remains",
        "squared_difference": "LiteRT: SquaredDifference only supports FLOAT32 and INT32",
        "padv2": "LiteRT: PADV2 constant_values stays FLOAT32 against an INT16 input",
        "tile": "LiteRT: 'Registration failed' (op version not registered)",
    },
}

# Known LiteRT 2.3 differences between the default (optimized) and BUILTIN_REF kernels, quant mode -> op.
# int8 SUM: the reference kernel is wrong (the optimized kernel matches dequantize-sum-requantize).
# Other int8 ops differ by at most 1 LSB (rounding): depthwise_conv_2d, leaky_relu, resize_bilinear.
REF_KERNEL_MISMATCH: dict[str, dict[str, float]] = {
    "int8": {"sum": float("inf"), "depthwise_conv_2d": 1, "leaky_relu": 1, "resize_bilinear": 1},
    "int16x8": {"sum": float("inf"), "add": 1e-4, "sub": 1e-4, "mul": 1e-4, "minimum": 1e-4,
                "concatenation": 1e-4},
}


def quant_unsupported_reason(name: str, quant: str | None) -> str | None:
    """Why ``ONE_OP_MODELS[name]`` has no working ``quant`` variant (``None`` if it has one)."""
    if quant is None:
        return None
    table = QUANT_UNSUPPORTED.get(quant, {})
    return table.get(name) or table.get(name.split("/")[0])


def _build_one_op(name: str, quant: str | None = None) -> bytes:
    spec = ONE_OP_SPECS[name]
    tf = _tf()
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little"))
    fn, specs = spec.builder(tf, rng, **spec.params)
    return convert(fn, specs, quant=quant, ranges=INPUT_RANGES.get(name), fp16_weights=spec.fp16_weights)


def one_op_model(name: str, quant: str | None = None) -> bytes:
    """The cached ``.tflite`` for ``ONE_OP_MODELS[name]`` (optionally quantized)."""
    spec = ONE_OP_SPECS[name]
    full = name if quant is None else f"{name}/{quant}"
    return cached(full, _build_one_op, {"name": name, "quant": quant},
                  extra=(spec.builder, _w, _act),
                  key=(spec.params, spec.fp16_weights, INPUT_RANGES.get(name)))


ONE_OP_MODELS: dict[str, Callable[..., bytes]] = {n: partial(one_op_model, n) for n in ONE_OP_SPECS}


# --------------------------------------------------------------------------------------------------
# Small networks
# --------------------------------------------------------------------------------------------------

def _seeded_keras(seed: int) -> Any:
    tf = _tf()
    tf.keras.backend.clear_session()  # reset layer-name counters: names end up in the .tflite
    tf.keras.utils.set_random_seed(seed)
    return tf.keras


def _randomise_bn(model: Any, seed: int) -> None:
    """Give every BatchNormalization layer non-trivial, seeded statistics and affine parameters."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if type(layer).__name__ == "BatchNormalization":
            c = int(layer.moving_mean.shape[0])
            layer.gamma.assign(rng.uniform(0.5, 1.5, c).astype(np.float32))
            layer.beta.assign(rng.uniform(-0.2, 0.2, c).astype(np.float32))
            layer.moving_mean.assign(rng.uniform(-0.2, 0.2, c).astype(np.float32))
            layer.moving_variance.assign(rng.uniform(0.5, 2.0, c).astype(np.float32))


def _keras_to_tflite(model: Any, shape: tuple[int, ...], quant: str | None, seed: int) -> bytes:
    return convert(model, [shape], quant=quant, seed=seed)


def _small_cnn_bytes(size: int = 32, width: int = 16, quant: str | None = None, seed: int = 1) -> bytes:
    keras = _seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((size, size, 3), batch_size=1, name="input")
    x = L.Conv2D(width, 3, padding="same", use_bias=False)(inp)
    x = L.BatchNormalization()(x)
    x = L.ReLU()(x)
    x = L.MaxPooling2D(2)(x)
    x = L.Conv2D(width * 2, 3, strides=2, padding="same", activation="relu")(x)
    x = L.DepthwiseConv2D(3, padding="same", activation="relu6")(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(10)(x)
    out = L.Softmax()(x)
    model = keras.Model(inp, out)
    _randomise_bn(model, seed)  # non-trivial gamma/beta; the statistics are then calibrated
    CALIBRATION_REPORT[f"small_cnn-{size}-{width}"] = calibrate_classifier(model, (1, size, size, 3), seed)
    return _keras_to_tflite(model, (1, size, size, 3), quant, seed)


def small_cnn(size: int = 32, width: int = 16, quant: str | None = None) -> bytes:
    """conv-bn-relu-pool-conv-depthwise-fc-softmax on a ``1x{size}x{size}x3`` input."""
    params = {"size": size, "width": width, "quant": quant}
    return cached(f"small_cnn-{size}-{width}-{quant}", _small_cnn_bytes, params,
                  extra=(_seeded_keras, _randomise_bn, calibrate_classifier, _keras_to_tflite))


def _mlp_bytes(features: int = 32, hidden: tuple[int, ...] = (64, 32), classes: int = 10,
               quant: str | None = None, seed: int = 2) -> bytes:
    keras = _seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((features,), batch_size=1, name="input")
    x = inp
    for h in hidden:
        x = L.Dense(h, activation="relu")(x)
    x = L.Dense(classes)(x)
    out = L.Softmax()(x)
    return _keras_to_tflite(keras.Model(inp, out), (1, features), quant, seed)


def mlp(features: int = 32, hidden: tuple[int, ...] = (64, 32), classes: int = 10, quant: str | None = None) -> bytes:
    """Dense-relu stack with a softmax head."""
    params = {"features": features, "hidden": hidden, "classes": classes, "quant": quant}
    return cached(f"mlp-{features}-{quant}", _mlp_bytes, params, extra=(_seeded_keras, _keras_to_tflite))


def _depthwise_net_bytes(size: int = 16, quant: str | None = None, seed: int = 3) -> bytes:
    keras = _seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((size, size, 4), batch_size=1, name="input")
    a = L.DepthwiseConv2D(3, padding="same", depth_multiplier=2, activation="relu")(inp)
    b = L.DepthwiseConv2D(3, strides=2, padding="same")(inp)
    b = L.UpSampling2D(2, interpolation="bilinear")(b)
    c = L.Concatenate()([a, b])
    c = L.Conv2D(8, 1, activation="relu6")(c)
    d = L.AveragePooling2D(2)(c)
    d = L.Resizing(size, size, interpolation="nearest")(d)
    out = L.Add()([c, d])
    return _keras_to_tflite(keras.Model(inp, out), (1, size, size, 4), quant, seed)


def depthwise_net(size: int = 16, quant: str | None = None) -> bytes:
    """Depthwise convs, bilinear and nearest resizes, concatenation and a residual add."""
    return cached(f"depthwise_net-{size}-{quant}", _depthwise_net_bytes, {"size": size, "quant": quant},
                  extra=(_seeded_keras, _keras_to_tflite))


# --------------------------------------------------------------------------------------------------
# MobileNetV2 with calibrated BatchNorm statistics
# --------------------------------------------------------------------------------------------------

CALIBRATION_REPORT: dict[str, dict[str, float]] = {}


def calibrate_classifier(model: Any, shape: tuple[int, ...], seed: int, batch: int = 8,
                         logit_std: float = 2.0) -> dict[str, float]:
    """Make a randomly initialised classifier input-sensitive (in place); returns figures of merit.

    1. One training-mode forward pass with every BatchNorm's momentum at 0 sets ``moving_mean`` /
       ``moving_variance`` to the batch statistics of seeded uniform [-1, 1] inputs (the distribution
       the tests feed), so every layer sees normalised activations at inference.
    2. The last Dense layer is rescaled and re-biased so the logits of those inputs have zero mean and a
       standard deviation of ``logit_std`` across the batch: the softmax output then depends on the input
       (global pooling of i.i.d. noise otherwise gives nearly the same features for every input).
    """
    tf = _tf()
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(batch, *shape[1:])).astype(np.float32)
    bns = [layer for layer in model.layers if type(layer).__name__ == "BatchNormalization"]
    saved = [layer.momentum for layer in bns]
    for layer in bns:
        layer.momentum = 0.0
    if bns:
        model(x, training=True)
    for layer, m in zip(bns, saved):
        layer.momentum = m
    dense = [layer for layer in model.layers if type(layer).__name__ == "Dense"][-1]
    feats = np.asarray(tf.keras.Model(model.inputs, dense.input)(x, training=False))
    w, b = (np.asarray(v) for v in dense.get_weights())
    centred = (feats - feats.mean(axis=0)) @ w
    scale = logit_std / float(centred.std() + 1e-12)
    w2 = (w * scale).astype(np.float32)
    b2 = (-(feats.mean(axis=0) @ w2)).astype(np.float32)
    dense.set_weights([w2, b2])
    probe = np.random.default_rng(seed + 1).uniform(-1, 1, size=(2, *shape[1:])).astype(np.float32)
    p = np.asarray(model(probe, training=False))
    return {"max_abs_diff": float(np.abs(p[0] - p[1]).max()),
            "total_variation": float(0.5 * np.abs(p[0] - p[1]).sum()),
            "max_prob": float(p.max()), "top1_a": float(p[0].argmax()), "top1_b": float(p[1].argmax()),
            "classifier_scale": scale}


def _mobilenet_v2_bytes(alpha: float = 1.0, size: int = 224, quant: str | None = None, seed: int = 4) -> bytes:
    keras = _seeded_keras(seed)
    model = keras.applications.MobileNetV2(weights=None, input_shape=(size, size, 3), alpha=alpha, classes=1000)
    CALIBRATION_REPORT[f"mobilenet_v2-{alpha}-{size}"] = calibrate_classifier(model, (1, size, size, 3), seed)
    return _keras_to_tflite(model, (1, size, size, 3), quant, seed)


def mobilenet_v2(alpha: float = 1.0, size: int = 224, quant: str | None = None) -> bytes:
    """Keras MobileNetV2 (random seeded weights, calibrated BatchNorm), batch 1, 1000 classes."""
    return cached(f"mobilenet_v2-{alpha}-{size}-{quant}", _mobilenet_v2_bytes,
                  {"alpha": alpha, "size": size, "quant": quant},
                  extra=(_seeded_keras, calibrate_classifier, _keras_to_tflite))


def mobilenet_v2_small(quant: str | None = None) -> bytes:
    """MobileNetV2 alpha 0.35 at 96x96, for fast tests."""
    return mobilenet_v2(alpha=0.35, size=96, quant=quant)


NETWORKS: dict[str, Callable[..., bytes]] = {
    "small_cnn": small_cnn,
    "mlp": mlp,
    "depthwise_net": depthwise_net,
    "mobilenet_v2": mobilenet_v2,
    "mobilenet_v2_small": mobilenet_v2_small,
}


def get_model(name: str, quant: str | None = None) -> bytes:
    """Any model by name: a ``ONE_OP_MODELS`` key or a ``NETWORKS`` key."""
    if name in ONE_OP_MODELS:
        return ONE_OP_MODELS[name](quant=quant)
    if name in NETWORKS:
        return NETWORKS[name](quant=quant)
    raise KeyError(f"unknown model {name!r}")


def input_range(name: str) -> tuple[float, float] | None:
    """The input range a model wants (``None``: the default [-1, 1])."""
    return INPUT_RANGES.get(name)


if __name__ == "__main__":
    import sys

    from tf2tosa.verify.litert import model_op_names

    names = sys.argv[1:] or list(ONE_OP_MODELS)
    t0 = time.perf_counter()
    for n in names:
        try:
            ops = model_op_names(get_model(n))
            ok = ONE_OP_SPECS[n].tfl_op in ops if n in ONE_OP_SPECS else True
            print(f"{'ok ' if ok else 'BAD'} {n:40s} {ops}")
        except Exception as e:  # noqa: BLE001
            print(f"ERR {n:40s} {type(e).__name__}: {str(e)[:300]}")
    print(f"{time.perf_counter() - t0:.1f}s, built {len(BUILD_LOG)}")
