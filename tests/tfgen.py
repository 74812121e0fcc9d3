"""Helpers for the TensorFlow-frontend tests: single-op tf.functions, conversion, comparison with TF eager,
and cached Keras / SavedModel builds of the test networks (``.cache/tf_models``)."""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("TF2TOSA_TF_CACHE", REPO / ".cache" / "tf_models"))


@dataclass
class In:
    """One input of a test function: shape, dtype name and value range (ints: [lo, hi) integers)."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    lo: float = -2.0
    hi: float = 2.0
    values: np.ndarray | None = None  # fixed values instead of random ones


@dataclass
class Case:
    """A single-op test: ``fn(*inputs)`` in TF, the op that must appear (``tf.<op>``) and the error bound."""

    name: str
    fn: Callable[..., Any]
    inputs: list[In]
    op: str
    #: None: TF's float outputs must lie within tests.e2e.fp32_bound of our fp64 run (the derived bound); a number
    #: pins a relative bound instead (0.0: exact), each with its reason at the case
    rtol: float | None = None
    #: run this instead of ``fn`` for the reference (CPU TF cannot run some NCHW kernels eagerly)
    ref: Callable[..., Any] | None = None
    atol: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def tf() -> Any:
    import tensorflow

    return tensorflow


def make_inputs(specs: Sequence[In], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        if s.values is not None:
            out.append(np.asarray(s.values).astype(s.dtype))
        elif s.dtype == "bool":
            out.append(rng.integers(0, 2, s.shape).astype(bool))
        elif s.dtype.startswith("int") or s.dtype.startswith("uint"):
            out.append(rng.integers(int(s.lo), int(s.hi), s.shape).astype(s.dtype))
        else:
            out.append(rng.uniform(s.lo, s.hi, s.shape).astype(s.dtype))
    return out


def concrete(fn: Callable[..., Any], specs: Sequence[In]) -> Any:
    t = tf()
    sig = [t.TensorSpec(s.shape, t.as_dtype(s.dtype), name=f"x{i}") for i, s in enumerate(specs)]
    return t.function(fn, input_signature=sig).get_concrete_function()


def rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    """max |got − ref| / max |ref| (max |got − ref| when ref is all zero); NaNs must coincide."""
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if g.shape != r.shape:
        return float("inf")
    if not np.array_equal(np.isnan(g), np.isnan(r)):
        return float("inf")
    finite = ~np.isnan(r)
    if not np.array_equal(np.isinf(g) & finite, np.isinf(r) & finite):
        return float("inf")
    ok = finite & ~np.isinf(r)
    diff = np.abs(g[ok] - r[ok])
    scale = float(np.abs(r[ok]).max()) if ok.any() else 0.0
    worst = float(diff.max()) if diff.size else 0.0
    return worst / scale if scale else worst


@dataclass
class Result:
    rel: float
    mismatches: int
    tosa_ops: dict[str, int]
    validated: bool
    profiles: list[str]
    extensions: list[str]
    #: largest max|TF - ours fp64| / fp32_bound over the float outputs (<= 1: within the derived bound)
    bound_use: float = 0.0


def run_case(case: Case, seeds: Sequence[int] = (0, 1), validate: bool = True) -> Result:
    """Convert ``case.fn`` through load_tensorflow + convert_graph, run it and TF eager on the same inputs."""
    from tf2tosa.converter.pipeline import convert_graph
    from tf2tosa.converter.tensorflow import load_tensorflow
    from tf2tosa.executor import run
    from tf2tosa.serializer import to_bytes
    from tf2tosa.verify import tosa_tools

    t = tf()
    cf = concrete(case.fn, case.inputs)
    g = load_tensorflow(cf)
    names = {op.name for op in g.ops.values()}
    assert f"tf.{case.op}" in names, f"{case.name}: the traced graph has no tf.{case.op} ({sorted(names)})"
    convert_graph(g)
    from tests.e2e import fp32_bound, fp32_noise

    rel, mism, use = 0.0, 0, 0.0
    for seed in seeds:
        xs = make_inputs(case.inputs, seed)
        feed = {v.name: x for v, x in zip(g.inputs, xs)}
        got = run(g, feed)
        got64 = run(g, feed, precise=True)
        noise = fp32_noise(g, feed)
        ref_fn = case.ref or case.fn
        ref = ref_fn(*[t.constant(x) for x in xs])
        refs = [np.asarray(r) for r in t.nest.flatten(ref)]
        outs = list(got.values())
        outs64 = list(got64.values())
        assert len(outs) == len(refs), f"{case.name}: {len(outs)} outputs vs {len(refs)}"
        for o, o64, r, v in zip(outs, outs64, refs, g.outputs):
            o = o.reshape(r.shape) if o.size == r.size else o
            if np.issubdtype(r.dtype, np.floating):
                e = rel_err(o, r)
                if case.atol and case.rtol is not None and e > case.rtol:
                    e = 0.0 if np.all(np.abs(o.astype(np.float64) - r) <= case.atol) else e
                rel = max(rel, e)
                if o.shape == r.shape:
                    o64 = o64.reshape(r.shape)
                    r64 = np.asarray(r, np.float64)
                    if not np.array_equal(np.isnan(r64), np.isnan(o64)) or not np.array_equal(
                            np.isinf(r64), np.isinf(o64)):
                        use = float("inf")
                        continue
                    fin = np.isfinite(r64)
                    err = float(np.abs(r64[fin] - o64[fin]).max()) if fin.any() else 0.0
                    bound = fp32_bound(o, o64, v.dtype, noise.get(v.name, 0.0))
                    use = max(use, err / bound if bound else (0.0 if err == 0 else float("inf")))
                else:
                    use = float("inf")
            else:
                mism += int(np.count_nonzero(o.astype(np.int64) != r.astype(np.int64))) if o.shape == r.shape \
                    else r.size
    data = to_bytes(g)  # always serialized: the session hook validates it and runs it in the reference model
    validated = False
    if validate and tosa_tools.available():
        ok, msg = tosa_tools.validate(data, g.record.profiles, g.record.extensions)
        assert ok, f"{case.name}: tosa-opt validation failed: {msg}"
        validated = True
    ops = {k: v for k, v in g.op_counts().items() if k not in ("tosa.CONST", "tosa.CONST_SHAPE")}
    return Result(rel, mism, ops, validated, list(g.record.profiles), list(g.record.extensions), use)


# ------------------------------------------------------------------------------------------- model cache
def _key(builder: Callable[..., Any], params: dict[str, Any]) -> str:
    src = inspect.getsource(builder) + repr(sorted(params.items())) + tf().__version__
    return hashlib.sha256(src.encode()).hexdigest()[:12]


def cached_keras(name: str, builder: Callable[..., Any], **params: Any) -> tuple[Path, Path]:
    """(``.keras`` file, SavedModel dir) of ``builder(**params)`` (a keras.Model), built once and cached."""
    base = CACHE / f"{name}-{_key(builder, params)}"
    kfile, smdir = base.with_suffix(".keras"), base.with_name(base.name + "_savedmodel")
    if kfile.exists() and (smdir / "saved_model.pb").exists():
        return kfile, smdir  # complete entries are never rewritten: read without the lock
    CACHE.mkdir(parents=True, exist_ok=True)
    # one builder per entry: parallel pytest workers that both miss it would otherwise build it twice, and one's
    # rmtree and replace of the SavedModel directory could run while the other (or a test) reads it - a SavedModel
    # mixing two builds, whose layer names differ with what each process built before, fails to restore
    with open(base.with_name(base.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if kfile.exists() and (smdir / "saved_model.pb").exists():
                return kfile, smdir  # built by another process while this one waited
            model = builder(**params)
            tmp_k = kfile.with_name(kfile.name + f".tmp{os.getpid()}.keras")
            model.save(tmp_k)
            os.replace(tmp_k, kfile)
            tmp_sm = smdir.with_name(smdir.name + f".tmp{os.getpid()}")
            shutil.rmtree(tmp_sm, ignore_errors=True)
            model.export(str(tmp_sm), format="tf_saved_model", verbose=False)
            shutil.rmtree(smdir, ignore_errors=True)  # an incomplete leftover (no saved_model.pb)
            os.replace(tmp_sm, smdir)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return kfile, smdir


def seeded_keras(seed: int) -> Any:
    import keras

    keras.utils.set_random_seed(seed)
    return keras


# ------------------------------------------------------------------------------------------ test networks
def mobilenet_v2_small(seed: int = 4) -> Any:
    """Keras MobileNetV2 alpha 0.35 at 96x96, 10 classes, BatchNorm calibrated so outputs vary with the input."""
    from tests.modelgen import calibrate_classifier

    keras = seeded_keras(seed)
    model = keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), alpha=0.35, classes=10)
    calibrate_classifier(model, (1, 96, 96, 3), seed)
    return model


def resnet_small(seed: int = 5, size: int = 64) -> Any:
    """ResNet50's structure (7x7/2 stem, max pool, bottleneck blocks with projection shortcuts, global pool,
    softmax) with 2 blocks in each of 3 stages and narrow widths; BatchNorm calibrated."""
    from tests.modelgen import calibrate_classifier

    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((size, size, 3), name="image")
    x = L.ZeroPadding2D(3)(inp)
    x = L.Conv2D(16, 7, strides=2)(x)
    x = L.BatchNormalization(epsilon=1.001e-5)(x)
    x = L.Activation("relu")(x)
    x = L.ZeroPadding2D(1)(x)
    x = L.MaxPooling2D(3, strides=2)(x)
    for filters, stride in ((16, 1), (32, 2), (64, 2)):
        for blk in range(2):
            s = stride if blk == 0 else 1
            shortcut = x
            if blk == 0:
                shortcut = L.BatchNormalization(epsilon=1.001e-5)(L.Conv2D(4 * filters, 1, strides=s)(x))
            y = L.Activation("relu")(L.BatchNormalization(epsilon=1.001e-5)(L.Conv2D(filters, 1, strides=s)(x)))
            y = L.Activation("relu")(L.BatchNormalization(epsilon=1.001e-5)(L.Conv2D(filters, 3, padding="same")(y)))
            y = L.BatchNormalization(epsilon=1.001e-5)(L.Conv2D(4 * filters, 1)(y))
            x = L.Activation("relu")(L.Add()([shortcut, y]))
    x = L.GlobalAveragePooling2D()(x)
    out = L.Dense(10, activation="softmax")(x)
    model = keras.Model(inp, out, name="resnet_small")
    calibrate_classifier(model, (1, size, size, 3), seed)
    return model


def transformer_block(seed: int = 6, seq: int = 16, dim: int = 32) -> Any:
    """One encoder block: MultiHeadAttention + residual + LayerNormalization, GELU feed-forward + residual +
    LayerNormalization."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((seq, dim), name="tokens")
    a = L.MultiHeadAttention(num_heads=4, key_dim=8)(inp, inp)
    x = L.LayerNormalization(epsilon=1e-6)(L.Add()([inp, a]))
    f = L.Dense(4 * dim, activation="gelu")(x)
    f = L.Dense(dim)(f)
    out = L.LayerNormalization(epsilon=1e-6)(L.Add()([x, f]))
    return keras.Model(inp, out, name="transformer_block")


def _custom_layers() -> dict[str, Any]:
    """Keras layers calling raw TF ops (NCHW convolutions, fake quantization), registered for .keras loading."""
    if _CUSTOM:
        return _CUSTOM
    import keras

    t = tf()

    @keras.saving.register_keras_serializable(package="tf2tosa_tests")
    class NCHWConvBlock(keras.layers.Layer):  # type: ignore[misc]
        """conv(+bias) → FusedBatchNorm → relu → depthwise conv → pool, all in NCHW (``nchw=True``) or the same
        computation in NHWC between transposes (``nchw=False``, what CPU TensorFlow can run)."""

        def __init__(self, filters: int = 8, pool: str = "max", **kw: Any) -> None:
            super().__init__(**kw)
            self.filters, self.pool, self.nchw = filters, pool, True

        def build(self, shape: Any) -> None:
            c = int(shape[1])
            self.w = self.add_weight(shape=(3, 3, c, self.filters), initializer="glorot_uniform", name="w")
            self.b = self.add_weight(shape=(self.filters,), initializer="random_normal", name="b")
            self.scale = self.add_weight(shape=(self.filters,), initializer="ones", name="scale")
            self.offset = self.add_weight(shape=(self.filters,), initializer="random_normal", name="offset")
            self.mean = self.add_weight(shape=(self.filters,), initializer="random_normal", name="mean")
            self.var = self.add_weight(shape=(self.filters,), initializer="ones", name="var")
            self.dw = self.add_weight(shape=(3, 3, self.filters, 2), initializer="glorot_uniform", name="dw")

        def _body(self, x: Any, fmt: str) -> Any:
            s4 = [1, 1, 2, 2] if fmt == "NCHW" else [1, 2, 2, 1]
            y = t.nn.conv2d(x, self.w, 1, "SAME", data_format=fmt)
            y = t.nn.bias_add(y, self.b, data_format=fmt)
            y = t.compat.v1.nn.fused_batch_norm(y, self.scale, self.offset, self.mean, self.var, epsilon=1e-3,
                                                data_format=fmt, is_training=False)[0]
            y = t.nn.relu(y)
            y = t.nn.depthwise_conv2d(y, self.dw, [1, 1, 1, 1], "SAME", data_format=fmt)
            if self.pool == "max":
                return t.nn.max_pool2d(y, 2, s4, "VALID", data_format=fmt)
            return t.nn.avg_pool2d(y, 2, s4, "VALID", data_format=fmt)

        def call(self, x: Any) -> Any:
            if self.nchw:
                return self._body(x, "NCHW")
            y = self._body(t.transpose(x, [0, 2, 3, 1]), "NHWC")
            return t.transpose(y, [0, 3, 1, 2])

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "filters": self.filters, "pool": self.pool}

    @keras.saving.register_keras_serializable(package="tf2tosa_tests")
    class FakeQuant(keras.layers.Layer):  # type: ignore[misc]
        """QAT-style activation fake quantization (FakeQuantWithMinMaxVars on fixed learned ranges)."""

        def __init__(self, lo: float = -1.0, hi: float = 1.0, **kw: Any) -> None:
            super().__init__(**kw)
            self.lo, self.hi = lo, hi

        def build(self, shape: Any) -> None:
            self.min_var = self.add_weight(shape=(), initializer=keras.initializers.Constant(self.lo), name="min")
            self.max_var = self.add_weight(shape=(), initializer=keras.initializers.Constant(self.hi), name="max")

        def call(self, x: Any) -> Any:
            return t.quantization.fake_quant_with_min_max_vars(x, self.min_var, self.max_var, num_bits=8)

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "lo": self.lo, "hi": self.hi}

    @keras.saving.register_keras_serializable(package="tf2tosa_tests")
    class QATConv(keras.layers.Layer):  # type: ignore[misc]
        """Conv2D whose kernel goes through per-channel FakeQuantWithMinMaxVarsPerChannel (symmetric ranges from
        the kernel itself, narrow range), as TF's QAT wrappers produce."""

        def __init__(self, filters: int = 8, strides: int = 1, **kw: Any) -> None:
            super().__init__(**kw)
            self.filters, self.strides = filters, strides

        def build(self, shape: Any) -> None:
            c = int(shape[-1])
            self.w = self.add_weight(shape=(3, 3, c, self.filters), initializer="glorot_uniform", name="w")
            self.b = self.add_weight(shape=(self.filters,), initializer="random_normal", name="b")

        def call(self, x: Any) -> Any:
            r = t.reduce_max(t.abs(self.w), axis=[0, 1, 2])
            wq = t.quantization.fake_quant_with_min_max_vars_per_channel(self.w, -r, r, num_bits=8, narrow_range=True)
            return t.nn.bias_add(t.nn.conv2d(x, wq, self.strides, "SAME"), self.b)

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "filters": self.filters, "strides": self.strides}

    _CUSTOM.update(NCHWConvBlock=NCHWConvBlock, FakeQuant=FakeQuant, QATConv=QATConv)
    return _CUSTOM


_CUSTOM: dict[str, Any] = {}


def nchw_net(seed: int = 7) -> Any:
    """Two NCHW conv blocks (Conv2D, BiasAdd, FusedBatchNormV3, Relu, DepthwiseConv2dNative, MaxPool/AvgPool, all
    with data_format NCHW) on a 1x3x16x16 input."""
    keras = seeded_keras(seed)
    layers = _custom_layers()
    inp = keras.Input((3, 16, 16), batch_size=1, name="image_nchw")
    x = layers["NCHWConvBlock"](8, "max")(inp)
    out = layers["NCHWConvBlock"](4, "avg")(x)
    return keras.Model(inp, out, name="nchw_net")


def set_nchw(model: Any, on: bool) -> None:
    """Switch every NCHWConvBlock of ``model`` between its NCHW and NHWC forms (same weights)."""
    for layer in model.layers:
        if hasattr(layer, "nchw"):
            layer.nchw = on


def qat_net(seed: int = 8) -> Any:
    """A QAT-style CNN: fake-quantized input, per-channel fake-quantized conv kernels, fake-quantized activations
    (FakeQuantWithMinMaxVars / ...PerChannel), global pooling and a dense head."""
    keras = seeded_keras(seed)
    layers = _custom_layers()
    L = keras.layers
    inp = keras.Input((16, 16, 3), name="image")
    x = layers["FakeQuant"](-1.0, 1.0)(inp)
    x = layers["QATConv"](8, 1)(x)
    x = L.ReLU(6.0)(x)
    x = layers["FakeQuant"](0.0, 6.0)(x)
    x = layers["QATConv"](16, 2)(x)
    x = L.ReLU(6.0)(x)
    x = layers["FakeQuant"](0.0, 6.0)(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(10)(x)
    out = layers["FakeQuant"](-4.0, 4.0)(x)
    return keras.Model(inp, out, name="qat_net")


# ------------------------------------------------------------------------------------ QAT (FakeQuant) networks
def _qat_layers() -> dict[str, Any]:
    """Keras layers of hand-built quantization-aware-trained models (tfmot needs Keras 2): fake-quantized
    weights (symmetric, narrow range, per output channel for Conv2D, per tensor for depthwise and dense, as tfmot's
    default 8-bit scheme) and FakeQuantWithMinMaxVars activation layers whose ranges are calibrated on data."""
    if _QAT:
        return _QAT
    import keras

    t = tf()
    pkg = "tf2tosa_qat"

    def qweights(w: Any, per_channel: bool) -> Any:
        if per_channel:
            r = t.reduce_max(t.abs(w), axis=list(range(len(w.shape) - 1)))
            return t.quantization.fake_quant_with_min_max_vars_per_channel(w, -r, r, num_bits=8, narrow_range=True)
        r = t.reduce_max(t.abs(w))
        return t.quantization.fake_quant_with_min_max_vars(w, -r, r, num_bits=8, narrow_range=True)

    def activate(y: Any, act: str | None) -> Any:
        return {"relu": t.nn.relu, "relu6": t.nn.relu6}[act](y) if act else y

    @keras.saving.register_keras_serializable(package=pkg)
    class QATFakeQuant(keras.layers.Layer):  # type: ignore[misc]
        """FakeQuantWithMinMaxVars with learned-style range variables; ``observe`` (not saved) passes values
        through and widens the range to what it sees (calibration); ``fixed`` ranges are never widened."""

        def __init__(self, lo: float = 0.0, hi: float = 0.0, fixed: bool = False, **kw: Any) -> None:
            super().__init__(**kw)
            self.lo, self.hi, self.fixed, self.observe = lo, hi, fixed, False

        def build(self, shape: Any) -> None:
            init = keras.initializers.Constant
            self.min_var = self.add_weight(shape=(), initializer=init(self.lo), name="min", trainable=False)
            self.max_var = self.add_weight(shape=(), initializer=init(self.hi), name="max", trainable=False)

        def call(self, x: Any) -> Any:
            if self.observe:
                if not self.fixed:
                    self.min_var.assign(t.minimum(self.min_var, t.reduce_min(x)))
                    self.max_var.assign(t.maximum(self.max_var, t.reduce_max(x)))
                return x
            return t.quantization.fake_quant_with_min_max_vars(x, self.min_var, self.max_var, num_bits=8)

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "lo": self.lo, "hi": self.hi, "fixed": self.fixed}

    @keras.saving.register_keras_serializable(package=pkg)
    class QATConv2D(keras.layers.Layer):  # type: ignore[misc]
        def __init__(self, filters: int = 8, kernel: int = 3, strides: int = 1, padding: str = "SAME",
                     act: str | None = None, **kw: Any) -> None:
            super().__init__(**kw)
            self.filters, self.kernel, self.strides, self.padding, self.act = filters, kernel, strides, padding, act

        def build(self, shape: Any) -> None:
            k, c = self.kernel, int(shape[-1])
            self.w = self.add_weight(shape=(k, k, c, self.filters), initializer="he_normal", name="kernel")
            self.b = self.add_weight(shape=(self.filters,), initializer="random_normal", name="bias")

        def call(self, x: Any) -> Any:
            y = t.nn.conv2d(x, qweights(self.w, True), self.strides, self.padding)
            return activate(t.nn.bias_add(y, self.b), self.act)

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "filters": self.filters, "kernel": self.kernel, "strides": self.strides,
                    "padding": self.padding, "act": self.act}

    @keras.saving.register_keras_serializable(package=pkg)
    class QATDepthwiseConv2D(keras.layers.Layer):  # type: ignore[misc]
        def __init__(self, kernel: int = 3, strides: int = 1, padding: str = "SAME", act: str | None = None,
                     **kw: Any) -> None:
            super().__init__(**kw)
            self.kernel, self.strides, self.padding, self.act = kernel, strides, padding, act

        def build(self, shape: Any) -> None:
            k, c = self.kernel, int(shape[-1])
            self.w = self.add_weight(shape=(k, k, c, 1), initializer="he_normal", name="depthwise_kernel")
            self.b = self.add_weight(shape=(c,), initializer="random_normal", name="bias")

        def call(self, x: Any) -> Any:
            s = [1, self.strides, self.strides, 1]
            y = t.nn.depthwise_conv2d(x, qweights(self.w, False), s, self.padding)
            return activate(t.nn.bias_add(y, self.b), self.act)

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "kernel": self.kernel, "strides": self.strides, "padding": self.padding,
                    "act": self.act}

    @keras.saving.register_keras_serializable(package=pkg)
    class QATDense(keras.layers.Layer):  # type: ignore[misc]
        def __init__(self, units: int = 10, act: str | None = None, **kw: Any) -> None:
            super().__init__(**kw)
            self.units, self.act = units, act

        def build(self, shape: Any) -> None:
            self.w = self.add_weight(shape=(int(shape[-1]), self.units), initializer="he_normal", name="kernel")
            self.b = self.add_weight(shape=(self.units,), initializer="random_normal", name="bias")

        def call(self, x: Any) -> Any:
            return activate(t.nn.bias_add(t.matmul(x, qweights(self.w, False)), self.b), self.act)

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "units": self.units, "act": self.act}

    _QAT.update(FQ=QATFakeQuant, Conv2D=QATConv2D, DepthwiseConv2D=QATDepthwiseConv2D, Dense=QATDense)
    return _QAT


_QAT: dict[str, Any] = {}


def calibrate_qat(model: Any, shape: Sequence[int], seed: int, num: int = 8) -> None:
    """Set every QATFakeQuant range (except fixed ones) to [min(0, seen min), max(0, seen max)] of the float model
    on ``num`` uniform [-1, 1) inputs."""
    fqs = [layer for layer in model.layers if type(layer).__name__ == "QATFakeQuant"]
    for layer in fqs:
        layer.observe = True
    rng = np.random.default_rng(seed)
    for _ in range(num):
        model(rng.uniform(-1, 1, tuple(shape)).astype(np.float32), training=False)
    for layer in fqs:
        layer.observe = False


def qat_cnn(seed: int = 11) -> Any:
    """QAT CNN: conv+relu, depthwise+relu6, max pool, strided conv+relu, average pool, flatten, dense; every
    activation fake-quantized."""
    keras = seeded_keras(seed)
    q = _qat_layers()
    inp = keras.Input((16, 16, 3), batch_size=1, name="image")
    x = q["FQ"](-1.0, 1.0, fixed=True)(inp)
    x = q["FQ"]()(q["Conv2D"](8, 3, act="relu")(x))
    x = q["FQ"]()(q["DepthwiseConv2D"](3, act="relu6")(x))
    x = keras.layers.MaxPooling2D(2)(x)
    x = q["FQ"]()(q["Conv2D"](16, 3, strides=2, act="relu")(x))
    x = keras.layers.AveragePooling2D(2)(x)
    x = keras.layers.Flatten()(x)
    out = q["FQ"]()(q["Dense"](10)(x))
    model = keras.Model(inp, out, name="qat_cnn")
    calibrate_qat(model, (1, 16, 16, 3), seed)
    return model


def qat_mlp(seed: int = 12) -> Any:
    """QAT MLP: three fake-quantized dense layers (relu, relu6, none), softmax with a [0, 1] FakeQuant."""
    keras = seeded_keras(seed)
    q = _qat_layers()
    inp = keras.Input((64,), batch_size=1, name="features")
    x = q["FQ"](-1.0, 1.0, fixed=True)(inp)
    x = q["FQ"]()(q["Dense"](32, act="relu")(x))
    x = q["FQ"]()(q["Dense"](32, act="relu6")(x))
    x = q["FQ"]()(q["Dense"](10)(x))
    out = q["FQ"](0.0, 1.0, fixed=True)(keras.layers.Softmax()(x))
    model = keras.Model(inp, out, name="qat_mlp")
    calibrate_qat(model, (1, 64), seed)
    return model


def qat_branches(seed: int = 13) -> Any:
    """QAT residual/branching net: conv → FQ, 1x1 conv → FQ, Add → ReLU → FQ, Concatenate → FQ,
    GlobalAveragePooling2D (Mean) → FQ, dense → FQ."""
    keras = seeded_keras(seed)
    q = _qat_layers()
    L = keras.layers
    inp = keras.Input((8, 8, 3), batch_size=1, name="image")
    x = q["FQ"](-1.0, 1.0, fixed=True)(inp)
    a = q["FQ"]()(q["Conv2D"](8, 3, act="relu")(x))
    b = q["FQ"]()(q["Conv2D"](8, 1)(a))
    c = q["FQ"]()(L.ReLU()(L.Add()([a, b])))
    d = q["FQ"]()(L.Concatenate()([c, a]))
    m = q["FQ"]()(L.GlobalAveragePooling2D()(d))
    out = q["FQ"]()(q["Dense"](6)(m))
    model = keras.Model(inp, out, name="qat_branches")
    calibrate_qat(model, (1, 8, 8, 3), seed)
    return model


def tflite_int8(smdir: Path, int8_io: bool) -> Path:
    """TFLiteConverter's integer conversion of a QAT SavedModel (Optimize.DEFAULT, no representative data: the
    FakeQuant ranges are the quantization), float or int8 inputs/outputs; cached beside the SavedModel."""
    out = smdir.with_name(smdir.name.replace("_savedmodel", "") + ("_int8io" if int8_io else "_floatio") + ".tflite")
    if out.exists():
        return out
    t = tf()
    conv = t.lite.TFLiteConverter.from_saved_model(str(smdir))
    conv.optimizations = [t.lite.Optimize.DEFAULT]
    if int8_io:
        conv.inference_input_type = t.int8
        conv.inference_output_type = t.int8
    data = conv.convert()
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, out)
    return out
