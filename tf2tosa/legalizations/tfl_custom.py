"""TFLite custom ops, ops that cannot be lowered, and the ``--custom-ops`` fallback.

* ``tfl.custom`` dispatches on ``custom_code`` to :data:`CUSTOM_RULES` (register more with
  :func:`custom_rule`).  MediaPipe's three custom ops are lowered here: ``Convolution2DTransposeBias`` (the
  document's tfl.convolution_2d_transpose_bias, L3133), ``MaxPoolingWithArgmax2D`` (L3735) and
  ``MaxUnpooling2D`` (L3739).  Their options are C structs in the custom_options bytes, not FlexBuffers:
  TfLiteTransposeConvParams {padding, stride_width, stride_height} and TfLitePoolParams {padding, stride_width,
  stride_height, filter_width, filter_height, activation}, little-endian int32 each (TfLitePadding: 1 SAME,
  2 VALID).
* :data:`UNLOWERABLE` gives the reason an op has no TOSA 1.0 lowering; :func:`unsupported_reason` is what the
  pipeline reports for an op without a rule (instead of a bare "no legalization rule").
* :func:`emit_custom` keeps an op the converter cannot lower as a TOSA ``CUSTOM`` operator (S10366) with the
  same inputs and outputs, so the rest of the graph still converts (``ConvertOptions.extra["custom_ops"]``).
  The executor cannot run CUSTOM (it raises an error naming the operator); ``graph.meta["custom_ops"]`` lists
  the names.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, TensorType, Value
from ..tosa.builder import Builder
from . import shared
from .common import fused_activation, has_value, same_padding
from .layout_helpers import data_operand, static_shape, take_every, tosa_dtype
from .nn_helpers import require_float
from .registry import Rule, legalize

#: domain_name of the CUSTOM operators :func:`emit_custom` creates, by source dialect
CUSTOM_DOMAIN = "tf2tosa.tflite"
_DOMAINS = {"tfl": CUSTOM_DOMAIN, "tf": "tf2tosa.tensorflow"}

#: why an op has no TOSA 1.0 lowering (reported when no rule exists; rules for data-dependent cases raise
#: Unsupported with their own reason)
UNLOWERABLE: dict[str, str] = {
    "tfl.non_max_suppression_v4": "greedy suppression over score-sorted boxes: a data-dependent loop with a "
                                  "data-dependent output size (unless padded); no TOSA 1.0 lowering",
    "tfl.non_max_suppression_v5": "greedy (soft-)NMS over score-sorted boxes: a data-dependent loop with a "
                                  "data-dependent output size (unless padded); no TOSA 1.0 lowering",
    "tfl.unique": "output size (number of distinct values) depends on the data; TOSA 1.0 graphs have static "
                  "shapes",
    "tfl.random_uniform": "random number generation: TOSA 1.0 has no RNG operator (results would not be "
                          "reproducible against TFLite)",
    "tfl.random_standard_normal": "random number generation: TOSA 1.0 has no RNG operator",
    "tfl.multinomial": "random sampling: TOSA 1.0 has no RNG operator",
    "tfl.hashtable": "string/int hash tables: TOSA 1.0 has no string tensors or table resources",
    "tfl.hashtable_find": "hash-table lookup: TOSA 1.0 has no table resources",
    "tfl.hashtable_import": "hash-table initialisation: TOSA 1.0 has no table resources",
    "tfl.hashtable_size": "hash-table size: TOSA 1.0 has no table resources",
    "tfl.hashtable_lookup": "hash-table lookup over string keys: TOSA 1.0 has no string tensors",
    "tfl.lsh_projection": "locality-sensitive hashing (farmhash of the input bytes): no TOSA 1.0 equivalent",
    "tfl.skip_gram": "string n-gram extraction: TOSA 1.0 has no string tensors",
    "tfl.concat_embeddings": "deprecated sparse embedding op with no kernel in TFLite",
    "tfl.bitcast": "bit reinterpretation between types: TOSA 1.0 has no bitcast operator",
    "tfl.delegate": "a delegate placeholder, not an op",
    "tfl.placeholder_for_greater_op_codes": "a schema placeholder, not an op",
    "tfl.stablehlo_rng_bit_generator": "random number generation: TOSA 1.0 has no RNG operator",
    "tfl.stablehlo_custom_call": "an opaque StableHLO custom call",
    "tfl.max_pooling_with_argmax_2d": "the document's name for MediaPipe's MaxPoolingWithArgmax2D custom op, "
                                      "which appears in .tflite files as tfl.custom (lowered there)",
    "tfl.max_unpooling_2d": "the document's name for MediaPipe's MaxUnpooling2D custom op (tfl.custom)",
    "tfl.convolution_2d_transpose_bias": "the document's name for MediaPipe's Convolution2DTransposeBias custom "
                                         "op (tfl.custom)",
    "tfl.NumericVerify": "a debugging op of the TFLite quantizer (compares float and quantized tensors)",
    "tfl.embedding_lookup_sparse": "sparse ids and weights with a data-dependent number of entries per row; TOSA 1.0 "
                                   "graphs have static shapes",
    # ops a rule may cover later; the reason is only reported while none exists
    "tfl.reduce_window": "StableHLO-style generic windowed reduction (a reduction body subgraph) is not lowered",
    "tfl.svdf": "SVDF (stateful rank-decomposed filter) is not lowered",
    "tfl.external_const": "constants in an external file are not loaded",
}

#: reasons for well-known custom codes that cannot be lowered
UNLOWERABLE_CUSTOM: dict[str, str] = {
    "TFLite_Detection_PostProcess": "SSD box decoding + non-max suppression: the number of detections kept "
                                    "depends on the data (greedy suppression); TOSA 1.0 graphs have static shapes "
                                    "and no sort",
    "AudioSpectrogram": "FFT-based audio feature extraction with no TOSA 1.0 lowering here",
    "Mfcc": "MFCC audio features with no TOSA 1.0 lowering here",
}


def unsupported_reason(op: Operation) -> str:
    """Why ``op`` (which has no rule) cannot be converted: a specific reason when one is known."""
    if op.name == "tfl.custom":
        code = str(op.attrs.get("custom_code", ""))
        if code.startswith("Flex"):
            return f"TensorFlow op {code[4:]!r} embedded through Select TF ops (Flex delegate): not a TFLite builtin"
        return UNLOWERABLE_CUSTOM.get(code, f"custom op {code!r} has no lowering")
    if op.name.startswith("tfl.stablehlo_"):
        return UNLOWERABLE.get(op.name, "StableHLO ops inside .tflite files are not lowered")
    return UNLOWERABLE.get(op.name, "no legalization rule")


# ------------------------------------------------------------------------------------------------- tfl.custom
CUSTOM_RULES: dict[str, Rule] = {}


def custom_rule(*codes: str) -> Callable[[Rule], Rule]:
    """Register ``fn`` as the lowering of ``tfl.custom`` ops with one of ``codes``."""

    def deco(fn: Rule) -> Rule:
        for c in codes:
            if c in CUSTOM_RULES:
                raise ValueError(f"duplicate custom-op rule for {c}")
            CUSTOM_RULES[c] = fn
        return fn

    return deco


@legalize("tfl.custom")
def custom(b: Builder, op: Operation) -> list[Value]:
    """Dispatch on custom_code (MediaPipe's Convolution2DTransposeBias, MaxPoolingWithArgmax2D, MaxUnpooling2D)."""
    code = str(op.attrs.get("custom_code", ""))
    fn = CUSTOM_RULES.get(code)
    if fn is None:
        raise Unsupported(unsupported_reason(op))
    return fn(b, op)


def _struct_ints(op: Operation, count: int, what: str) -> list[int]:
    """The first ``count`` little-endian int32 fields of the custom_options C struct."""
    raw = bytes(op.attrs.get("custom_options") or b"")
    if len(raw) < 4 * count:
        raise Unsupported(f"{what} custom options of {len(raw)} bytes (expected a {4 * count}-byte C struct)")
    return list(struct.unpack_from(f"<{count}i", raw))


_PADDING = {1: "SAME", 2: "VALID"}
_ACTIVATION = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH"}


@custom_rule("Convolution2DTransposeBias")
def convolution_2d_transpose_bias(b: Builder, op: Operation) -> list[Value]:
    """MediaPipe's transposed convolution with bias (inputs input, OHWI weights, bias [OC]), float32.

    MediaPipe's kernel: SAME pads p = max(0, K - (I - 1) % s - 1) (p // 2 in front), output (I - 1)·s + K - p;
    VALID: no pad, output (I - 1)·s + K.  TRANSPOSE_CONV2D with out_pad = -pad_front (:func:`.shared.
    transpose_conv2d`), bias added by the operator."""
    x, w, bias = (data_operand(b, v) for v in op.operands[:3])
    require_float(op, x, w, bias)
    padding, sw, sh = _struct_ints(op, 3, "Convolution2DTransposeBias")
    if padding not in _PADDING or sw < 1 or sh < 1:
        raise Unsupported(f"Convolution2DTransposeBias padding {padding}, strides {sh}x{sw}")
    _, ih, iw, _ = static_shape(x)
    _, kh, kw, _ = static_shape(w)
    out_hw, front = [], []
    for i, k, s in ((ih, kh, sh), (iw, kw, sw)):
        p = max(0, k - (i - 1) % s - 1) if _PADDING[padding] == "SAME" else 0
        out_hw.append((i - 1) * s + k - p)
        front.append(p // 2)
    return [shared.transpose_conv2d(b, op, x, w, bias, out_hw, front, [sh, sw])]


def _pool_params(op: Operation, what: str) -> tuple[str, int, int, int, int, str]:
    padding, sw, sh, fw, fh, act = _struct_ints(op, 6, what)
    if padding not in _PADDING or min(sw, sh, fw, fh) < 1 or act not in _ACTIVATION:
        raise Unsupported(f"{what} options padding={padding} stride={sh}x{sw} filter={fh}x{fw} activation={act}")
    return _PADDING[padding], sh, sw, fh, fw, _ACTIVATION[act]


@custom_rule("MaxPoolingWithArgmax2D")
def max_pooling_with_argmax_2d(b: Builder, op: Operation) -> list[Value]:
    """Max pool and, per output, the window position y·fw + x (+0.1, as a float) of the first maximum.

    The fh·fw window taps are strided SLICEs of the (−inf padded) input stacked on a new last axis; ARGMAX picks the
    first maximum in the kernel's scan order (y, then x) and REDUCE_MAX the value, then the fused activation."""
    x = data_operand(b, op.operands[0])
    dt = require_float(op, x)
    padding, sh, sw, fh, fw, act = _pool_params(op, "MaxPoolingWithArgmax2D")
    n, h, w, c = static_shape(x)
    if padding == "SAME":
        oh, ow = -(-h // sh), -(-w // sw)
        ph, pw = same_padding(h, fh, sh)[0], same_padding(w, fw, sw)[0]
    else:
        oh, ow = (h - fh) // sh + 1, (w - fw) // sw + 1
        ph = pw = 0
    if oh < 1 or ow < 1:
        raise Unsupported(f"MaxPoolingWithArgmax2D window {fh}x{fw} larger than the input {h}x{w}")
    need_h, need_w = (oh - 1) * sh + fh, (ow - 1) * sw + fw
    xp = b.pad(x, [0, 0, ph, max(0, need_h - h - ph), pw, max(0, need_w - w - pw), 0, 0], float("-inf"))
    taps = []
    for ky in range(fh):
        for kx in range(fw):
            t = b.slice(xp, [0, ky, kx, 0], [n, (oh - 1) * sh + 1, (ow - 1) * sw + 1, c])
            t = take_every(b, take_every(b, t, 1, oh, sh), 2, ow, sw)
            taps.append(b.reshape(t, [n, oh, ow, c, 1]))
    stack = b.concat(taps, 4)
    vals = b.reshape(b.emit("REDUCE_MAX", [stack], {"axis": 4, "nan_mode": "IGNORE"}).result, [n, oh, ow, c])
    idx = b.argmax(stack, axis=4, nan_mode="IGNORE", out_dtype=DType.INT32)
    fidx = b.binary("ADD", b.cast(idx, dt), b.const(np.full((1, 1, 1, 1), 0.1), dt))
    return [fused_activation(b, vals, act), fidx]


@custom_rule("MaxUnpooling2D")
def max_unpooling_2d(b: Builder, op: Operation) -> list[Value]:
    """Scatter each input value to the window position its (float) index names, zeros elsewhere; output size =
    input size · filter size.  Non-overlapping windows (stride = filter, no padding: the SegNet/MediaPipe use)
    make it an EQUAL against the window iota + SELECT on a [N, H, fh, W, fw, C] view."""
    x, idx = data_operand(b, op.operands[0]), data_operand(b, op.operands[1])
    dt = require_float(op, x, idx)
    _, sh, sw, fh, fw, _ = _pool_params(op, "MaxUnpooling2D")
    n, h, w, c = static_shape(x)
    pad_h = max(0, ((h - 1) * sh + fh - h * fh) // 2)
    pad_w = max(0, ((w - 1) * sw + fw - w * fw) // 2)
    if (sh, sw) != (fh, fw) or pad_h or pad_w:
        raise Unsupported(f"MaxUnpooling2D with stride {sh}x{sw} != filter {fh}x{fw} (overlapping windows)")
    if static_shape(idx) != [n, h, w, c]:
        raise Unsupported(f"MaxUnpooling2D indices {idx.type} for input {x.type}")
    pos = (np.arange(fh)[:, None] * fw + np.arange(fw)[None, :]).astype(np.float32).reshape(1, 1, fh, 1, fw, 1)
    k = b.reshape(b.floor(idx), [n, h, 1, w, 1, c])  # the kernel truncates the float index (>= 0) to int
    hit = b.binary("EQUAL", k, b.const(pos, dt))
    y = b.emit("SELECT", [hit, b.reshape(x, [n, h, 1, w, 1, c]), b.const(np.zeros((1,) * 6), dt)]).result
    return [b.reshape(y, [n, h * fh, w * fw, c])]


# ------------------------------------------------------------------------------------------------ CUSTOM fallback
def _jsonable(v: Any) -> Any:
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray) and v.size <= 64:
        return v.tolist()
    return repr(type(v).__name__)


def _result_type(b: Builder, r: Value) -> TensorType:
    """A static TOSA type for result ``r``: its own shape when static, else the shape stored in the file."""
    t = r.type
    shape: tuple[Any, ...] = tuple(t.shape)
    if not t.is_static:
        stored = b.graph.meta.get("stored_shapes", {}).get(r.name)
        if stored is None:
            raise Unsupported(f"result {r.source or r.name} has a dynamic shape {list(t.shape)}")
        shape = tuple(int(d) for d in stored)
    if any(int(d) < 1 for d in shape):
        raise Unsupported(f"result {r.source or r.name} has an empty or unknown shape {list(shape)}")
    return TensorType(shape, tosa_dtype(t.dtype), t.quant)


def custom_name(op: Operation) -> str:
    """operator_name of the CUSTOM op standing for ``op``: the custom code, else the tfl op name."""
    return str(op.attrs.get("custom_code") or op.name) if op.name == "tfl.custom" else op.name


def emit_custom(b: Builder, op: Operation, reason: str) -> list[Value]:
    """Keep ``op`` as a TOSA CUSTOM operator (S10366-10440): same inputs (omitted optional inputs dropped, constant
    int64 narrowed to i32) and outputs (static types from the op's results or the shapes stored in the file).

    operator_name = the custom code (tfl.custom) or the op name; domain_name = ``tf2tosa.tflite``
    (``tf2tosa.tensorflow`` for tf.* ops); implementation_attrs = the custom_options bytes (tfl.custom) or a JSON
    object of the op's attributes, the reason it was not lowered and ``placeholder_shapes``: the results whose
    shape is data-dependent in the source (their TOSA shape is the one stored in the file, e.g. [1] for unique's
    output).  Appends the name to ``graph.meta["custom_ops"]``.  Raises Unsupported (with
    ``reason`` first) when an input or output has no static TOSA type.
    """
    name = custom_name(op)
    try:
        inputs = [data_operand(b, v) for v in op.operands if has_value(v)]
        types = [_result_type(b, r) for r in op.results]
    except Unsupported as e:
        raise Unsupported(f"{reason}; cannot be kept as a CUSTOM operator: {e.reason}") from None
    dynamic = [i for i, r in enumerate(op.results) if not r.type.is_static]
    if op.name == "tfl.custom":
        impl = bytes(op.attrs.get("custom_options") or b"")
    else:
        attrs = {k: _jsonable(v) for k, v in sorted(op.attrs.items()) if k not in ("custom_options",)}
        info: dict[str, Any] = {"attrs": attrs, "reason": reason}
        if dynamic:
            info["placeholder_shapes"] = dynamic  # results whose source shape is data-dependent
        impl = json.dumps(info, sort_keys=True, separators=(",", ":")).encode()
    domain = _DOMAINS.get(op.name.split(".")[0], CUSTOM_DOMAIN)
    new = b.emit("CUSTOM", inputs, {"operator_name": name, "domain_name": domain,
                                    "implementation_attrs": impl}, result_types=types)
    b.graph.meta.setdefault("custom_ops", []).append(name)
    return list(new.results)


__all__ = ["CUSTOM_DOMAIN", "CUSTOM_RULES", "UNLOWERABLE", "UNLOWERABLE_CUSTOM", "custom_name", "custom_rule",
           "emit_custom", "unsupported_reason"]
