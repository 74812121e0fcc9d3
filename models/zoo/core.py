"""The machinery behind the model zoo: definitions, deterministic builds, calibration, TFLite variants, caching.

A :class:`ModelDef` names a builder ``build(seed) -> keras.Model`` (random, seeded weights; no downloads), its
inputs and the variants to produce.  :func:`build_tflite` turns a definition into ``.tflite`` bytes for one
variant and caches them under ``.cache/zoo/<name>-<variant>-<hash>.tflite``; the hash covers the builder's source
and every module-level helper it calls (transitively), the definition's fields, this module's conversion and
calibration code and the TensorFlow version, so editing one model rebuilds just that model.

Variants:

* ``float32``  - the float model;
* ``int8``     - full-integer quantization, int8 inputs and outputs (int32 inputs such as token ids stay int32);
* ``int16x8``  - 16-bit activations, 8-bit weights, float inputs and outputs;
* ``fp16``     - float16 weights (DEQUANTIZE to float32 at run time), float compute.

Random weights give useless models unless they are calibrated: :func:`calibrate` sets every BatchNormalization's
statistics to those of the seeded input distribution the tests feed, rescales a classifier's last Dense layer so
its logits spread (the softmax then depends on the input) and measures how much each output varies across inputs.
TensorFlow is imported lazily, so importing this module (and reading cached models) is cheap.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import io
import json
import os
import re
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("TF2TOSA_ZOO_CACHE", REPO / ".cache" / "zoo"))
REAL_MODELS_DIR = Path(os.environ.get("TF2TOSA_REAL_MODELS", REPO / ".cache" / "real_models"))

VARIANTS: tuple[str, ...] = ("float32", "int8", "int16x8", "fp16")
#: variants whose arithmetic is integer: checked bit for bit against LiteRT's reference kernels
INTEGER_VARIANTS = frozenset({"int8", "int16x8"})
FAMILIES = ("classification", "detection", "segmentation", "audio", "sequence", "transformer", "other", "real")

Builder = Callable[[int], Any]


@dataclass(frozen=True)
class InputSpec:
    """One model input: name, static shape (batch 1), dtype and the range random inputs are drawn from.

    Float inputs are uniform in ``[low, high)``; integer inputs (token ids) are integers in ``[low, high)``.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    low: float = -1.0
    high: float = 1.0

    @property
    def is_float(self) -> bool:
        return np.dtype(self.dtype).kind == "f"


@dataclass(frozen=True)
class ModelDef:
    """A zoo model: how to build it and which variants to check."""

    name: str
    family: str
    build: Builder | None
    inputs: tuple[InputSpec, ...]
    variants: tuple[str, ...] = VARIANTS
    description: str = ""
    #: ``"classifier"``: rescale the last Dense layer so the logits spread; ``None``: BatchNorm statistics only
    head: str | None = None
    seed: int = 0
    #: variant -> why TensorFlow Lite cannot produce it (reported as SKIP, never built)
    unsupported: Mapping[str, str] = field(default_factory=dict)
    #: a known gap in tf2tosa: a failure is reported as XFAIL with this reason, a pass as XPASS
    known_gap: str | None = None
    #: the same, for single variants: variant -> reason
    known_gaps: Mapping[str, str] = field(default_factory=dict)

    def gap(self, variant: str) -> str | None:
        """The known-gap reason that applies to ``variant``, if any."""
        return self.known_gaps.get(variant) or self.known_gap
    #: real models: variant -> the ``.tflite`` file (``build`` is None)
    paths: Mapping[str, Path] = field(default_factory=dict)

    def key(self, variant: str) -> str:
        return f"{self.name}/{variant}"


class TFLiteRefused(RuntimeError):
    """The TFLite converter cannot produce this variant (remembered in the cache as ``<name>.refused``)."""


def _refusal(e: BaseException) -> str:
    """The distinct message lines of a converter failure, most informative first (at most three)."""
    lines: list[str] = []
    for ln in str(e).replace(".; ", ".\n").splitlines():
        ln = ln.strip()
        while re.match(r"^[A-Za-z_.]*(Error|Exception): ", ln):
            ln = ln.split(": ", 1)[1].strip()
        if ln and ln not in lines and not ln.startswith(("W0000", "I0000", "WARNING:", "<unknown>:")):
            lines.append(ln)
    return "; ".join(lines[:3]) or type(e).__name__


@dataclass
class BuildInfo:
    """The result of :func:`build_tflite`."""

    data: bytes
    path: Path | None
    cached: bool
    seconds: float
    meta: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ TensorFlow
def tf_module() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    return tf


def seeded_keras(seed: int) -> Any:
    """``tf.keras`` with a fresh session (layer names restart) and all random generators seeded."""
    tf = tf_module()
    tf.keras.backend.clear_session()
    tf.keras.utils.set_random_seed(seed)
    return tf.keras


def _tf_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "unknown"


# ------------------------------------------------------------------------------------------------ inputs
def sample_inputs(specs: Sequence[InputSpec], seed: int, n: int) -> list[list[np.ndarray]]:
    """``n`` seeded input sets (lists in spec order) drawn from each spec's range."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        sample = []
        for s in specs:
            if s.is_float:
                sample.append(rng.uniform(s.low, s.high, size=s.shape).astype(s.dtype))
            else:
                sample.append(rng.integers(int(s.low), int(s.high), size=s.shape).astype(s.dtype))
        out.append(sample)
    return out


def _batch(specs: Sequence[InputSpec], seed: int, n: int) -> list[np.ndarray]:
    sets = sample_inputs(specs, seed, n)
    return [np.concatenate([s[i] for s in sets], axis=0) for i in range(len(specs))]


def _call(model: Any, arrays: Sequence[Any], training: bool = False) -> Any:
    return model(arrays[0] if len(arrays) == 1 else list(arrays), training=training)


def _as_list(out: Any) -> list[np.ndarray]:
    if isinstance(out, Mapping):
        return [np.asarray(out[k]) for k in sorted(out)]
    if isinstance(out, list | tuple):
        return [np.asarray(o) for o in out]
    return [np.asarray(out)]


# ------------------------------------------------------------------------------------------------ calibration
def calibrate(model: Any, mdef: ModelDef, batch: int = 8, logit_std: float = 2.0) -> dict[str, Any]:
    """Make a randomly initialised model input-sensitive (in place); returns figures of merit.

    1. One training-mode pass with every BatchNormalization's momentum at 0 sets its moving statistics to the
       batch statistics of seeded inputs from the specs' ranges, so every layer sees normalised activations.
    2. ``head == "classifier"``: the last Dense layer is rescaled and re-biased so that the logits of those
       inputs have zero mean and standard deviation ``logit_std`` (global pooling of noise otherwise gives nearly
       the same features, and the same softmax, for every input).
    3. The spread of every output across a fresh batch (mean over elements of std across the batch, relative
       to the mean magnitude) is measured: ``min_spread`` near 0 means an output ignores its input.
    """
    tf = tf_module()
    x = _batch(mdef.inputs, mdef.seed + 101, batch)
    bns = [layer for layer in _all_layers(model) if type(layer).__name__ == "BatchNormalization"]
    saved = [layer.momentum for layer in bns]
    for layer in bns:
        layer.momentum = 0.0
    if bns:
        _call(model, x, training=True)
    for layer, m in zip(bns, saved):
        layer.momentum = m
    report: dict[str, Any] = {"batchnorms": len(bns)}
    if mdef.head == "classifier":
        # the classifier: the last Dense layer or 1x1 convolution (MobileNet, SqueezeNet heads)
        head = [layer for layer in _all_layers(model) if type(layer).__name__ in ("Dense", "Conv2D")][-1]
        feats = _as_list(tf.keras.Model(model.inputs, head.input)(x[0] if len(x) == 1 else x, training=False))[0]
        feats = feats.reshape(-1, feats.shape[-1])
        w, _ = (np.asarray(v) for v in head.get_weights())
        w2d = w.reshape(-1, w.shape[-1])
        centred = (feats - feats.mean(axis=0)) @ w2d
        scale = logit_std / float(centred.std() + 1e-12)
        w2 = (w2d * scale).astype(np.float32)
        head.set_weights([w2.reshape(w.shape), (-(feats.mean(axis=0) @ w2)).astype(np.float32)])
        report["classifier_scale"] = scale
    probe = _batch(mdef.inputs, mdef.seed + 202, 4)
    outs = _as_list(_call(model, probe))
    spreads = []
    for o in outs:
        o = o.astype(np.float64)
        spreads.append(float(o.std(axis=0).mean() / (np.abs(o).mean() + 1e-12)))
    report["spread"] = spreads
    report["min_spread"] = min(spreads) if spreads else 0.0
    return report


def _all_layers(model: Any) -> list[Any]:
    """Every layer, nested models included (Keras applications nest none, our builders may)."""
    out: list[Any] = []
    for layer in model.layers:
        if hasattr(layer, "layers") and layer.layers:
            out.extend(_all_layers(layer))
        else:
            out.append(layer)
    return out


# ------------------------------------------------------------------------------------------------ conversion
def to_tflite(model: Any, mdef: ModelDef, variant: str, n_rep: int = 16) -> bytes:
    """Convert a (calibrated) Keras model to ``.tflite`` bytes for ``variant``, with a batch-1 signature."""
    tf = tf_module()
    keras = tf.keras
    # a batch-1 functional wrapper sharing the calibrated layers; from_keras_model freezes the variables
    inputs = [keras.Input(s.shape[1:], batch_size=s.shape[0], dtype=s.dtype, name=s.name) for s in mdef.inputs]
    # a fixed name: tensor names (and so the bytes) must not depend on how many wrappers this process has built
    wrapper = keras.Model(inputs, _call(model, inputs), name="zoo")
    conv = tf.lite.TFLiteConverter.from_keras_model(wrapper)
    if variant == "fp16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif variant in INTEGER_VARIANTS:
        data: list[Any] = sample_inputs(mdef.inputs, mdef.seed + 7919, n_rep)
        if len(mdef.inputs) > 1:  # the signature orders inputs by name: key the samples by input name
            data = [{s.name: a for s, a in zip(mdef.inputs, sample)} for sample in data]

        def rep() -> Any:
            yield from data

        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = rep
        if variant == "int8":
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            conv.inference_input_type = tf.int8
            conv.inference_output_type = tf.int8
        else:
            conv.target_spec.supported_ops = [
                tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    elif variant != "float32":
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    return bytes(conv.convert())


def _to_tflite_16x8_float_fallback(model: Any, mdef: ModelDef, n_rep: int = 16) -> bytes:
    """int16x8 with ``TFLITE_BUILTINS`` allowed as well: the ops TFLite cannot quantize to 16x8 stay float, fed by
    DEQUANTIZE and followed by QUANTIZE (TFLite's documented mixed 16x8 mode); everything else is as
    :func:`to_tflite` builds it."""
    tf = tf_module()
    keras = tf.keras
    inputs = [keras.Input(s.shape[1:], batch_size=s.shape[0], dtype=s.dtype, name=s.name) for s in mdef.inputs]
    wrapper = keras.Model(inputs, _call(model, inputs), name="zoo")
    conv = tf.lite.TFLiteConverter.from_keras_model(wrapper)
    data: list[Any] = sample_inputs(mdef.inputs, mdef.seed + 7919, n_rep)
    if len(mdef.inputs) > 1:
        data = [{s.name: a for s, a in zip(mdef.inputs, sample)} for sample in data]

    def rep() -> Any:
        yield from data

    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8,
                                      tf.lite.OpsSet.TFLITE_BUILTINS]
    return bytes(conv.convert())


# ------------------------------------------------------------------------------------------------ hashing
def _fingerprint(obj: Any) -> str:
    """A text fingerprint of a function's code: bytecode, names, constants and nested code, defaults; no line
    numbers, so it is the same whether taken before or after an unrelated edit moved the function in its file."""
    code = getattr(obj, "__code__", obj)
    if not isinstance(code, types.CodeType):
        return repr(obj)

    def const(c: Any) -> str:
        if isinstance(c, types.CodeType):
            return "{" + _fingerprint(c) + "}"
        if isinstance(c, frozenset):
            return "frozenset(" + ",".join(sorted(repr(x) for x in c)) + ")"
        if isinstance(c, tuple):
            return "(" + ",".join(const(x) for x in c) + ")"
        return repr(c)

    parts = [code.co_code.hex(), repr(code.co_names), repr(code.co_varnames), repr(code.co_freevars),
             ",".join(const(c) for c in code.co_consts)]
    if not isinstance(obj, types.CodeType):
        parts.append(const(tuple(getattr(obj, "__defaults__", None) or ())))
    return "|".join(parts)


def _code_deps(fn: Any, seen: dict[str, str] | None = None) -> dict[str, str]:
    """Fingerprints of ``fn`` and of every function of the same module it refers to by name, transitively."""
    seen = {} if seen is None else seen
    key = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    if key in seen:
        return seen
    seen[key] = _fingerprint(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return seen
    names: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    glb = getattr(fn, "__globals__", {})
    for n in sorted(names):
        obj = glb.get(n)
        if inspect.isfunction(obj) and obj.__module__ == fn.__module__:
            _code_deps(obj, seen)
    return seen


def definition_hash(mdef: ModelDef) -> str:
    """A hash of everything that determines the Keras model and its calibration (not the variant)."""
    h = hashlib.sha256()
    parts = [mdef.name, repr(mdef.inputs), repr(mdef.head), repr(mdef.seed), _tf_version(),
             f"python{sys.version_info[0]}.{sys.version_info[1]}"]
    if mdef.build is not None:
        parts += [f"{k}\n{v}" for k, v in sorted(_code_deps(mdef.build).items())]
    for helper in (calibrate, _batch, sample_inputs, _call, _all_layers, seeded_keras):
        parts.append(_fingerprint(helper))
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def cache_path(mdef: ModelDef, variant: str) -> Path:
    h = hashlib.sha256()
    h.update(definition_hash(mdef).encode())
    h.update(_fingerprint(to_tflite).encode())
    h.update(variant.encode())
    return CACHE_DIR / f"{mdef.name}-{variant}-{h.hexdigest()[:16]}.tflite"


# ------------------------------------------------------------------------------------------------ building
@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence Keras' export chatter and TensorFlow's native logging (file descriptors 1 and 2) while building;
    a failure re-raises with the tail of what was printed."""
    if os.environ.get("TF2TOSA_ZOO_VERBOSE"):
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile(mode="w+b") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                yield
        except Exception as e:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            log.seek(0)
            tail = log.read().decode("utf-8", "replace").strip().splitlines()[-5:]
            raise RuntimeError(f"{type(e).__name__}: {e}" + ("\n" + "\n".join(tail) if tail else "")) from e
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


_KERAS: dict[str, tuple[Any, dict[str, Any], float]] = {}


def keras_model(mdef: ModelDef) -> tuple[Any, dict[str, Any], float]:
    """The built and calibrated Keras model (memoised per process), its calibration report and build seconds."""
    if mdef.build is None:
        raise ValueError(f"{mdef.name} has no builder")
    key = definition_hash(mdef)
    hit = _KERAS.get(key)
    if hit is not None:
        return hit
    _KERAS.clear()  # one model at a time: Keras models hold their graphs and weights
    t0 = time.perf_counter()
    model = mdef.build(mdef.seed)
    report = calibrate(model, mdef)
    report["params"] = int(model.count_params())
    _KERAS[key] = (model, report, time.perf_counter() - t0)
    return _KERAS[key]


def build_tflite(mdef: ModelDef, variant: str, *, use_cache: bool = True) -> BuildInfo:
    """The ``.tflite`` bytes of ``mdef`` in ``variant``: from the cache, or built, calibrated and cached."""
    if mdef.paths:
        path = mdef.paths[variant]
        return BuildInfo(path.read_bytes(), path, True, 0.0, {})
    if variant in mdef.unsupported:
        raise ValueError(f"{mdef.key(variant)}: {mdef.unsupported[variant]}")
    path = cache_path(mdef, variant)
    meta_path = path.with_suffix(".json")
    refused_path = path.with_suffix(".refused")
    if use_cache and path.exists():
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        return BuildInfo(path.read_bytes(), path, True, 0.0, meta)
    if use_cache and refused_path.exists():
        raise TFLiteRefused(refused_path.read_text())
    t0 = time.perf_counter()
    with _quiet():
        model, report, _ = keras_model(mdef)
    fallback: list[str] = []
    try:
        with _quiet():
            try:
                data = to_tflite(model, mdef, variant)
            except Exception as e:
                if variant != "int16x8" or "not yet supported for op" not in str(e):
                    raise
                # TFLite cannot quantize some ops to 16x8 (HARD_SWISH, NEG, DEPTH_TO_SPACE ...); its own other
                # path keeps exactly those ops in float between DEQUANTIZE and QUANTIZE
                fallback = sorted(set(re.findall(r"not yet supported for op: '(\w+)'", str(e))))
                data = _to_tflite_16x8_float_fallback(model, mdef)
    except Exception as e:  # the TFLite converter refuses this variant: remember it, it is deterministic
        reason = _refusal(e)
        refused_path.parent.mkdir(parents=True, exist_ok=True)
        refused_path.write_text(reason)
        raise TFLiteRefused(reason) from e
    seconds = time.perf_counter() - t0
    meta = {**report, "build_s": seconds, "variant": variant}
    if fallback:
        meta["float_fallback_ops"] = fallback
    path.parent.mkdir(parents=True, exist_ok=True)
    for p, blob in ((path, data), (meta_path, json.dumps(meta, indent=1).encode())):
        tmp = p.with_name(f".{p.name}.tmp{os.getpid()}")
        tmp.write_bytes(blob)
        os.replace(tmp, p)
    return BuildInfo(data, path, False, seconds, meta)
