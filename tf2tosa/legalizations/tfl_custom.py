"""TFLite custom ops, ops that cannot be lowered, and the ``--custom-ops`` fallback.

* ``tfl.custom`` dispatches on ``custom_code`` to :data:`CUSTOM_RULES` (register more with
  :func:`custom_rule`).  MediaPipe's three custom ops are lowered here: ``Convolution2DTransposeBias``
  (lowering doc: tfl.convolution_2d_transpose_bias), ``MaxPoolingWithArgmax2D`` (lowering doc:
  tfl.max_pooling_with_argmax_2d) and
  ``MaxUnpooling2D`` (lowering doc: tfl.max_unpooling_2d).  Their options are C structs in the custom_options bytes, not
  FlexBuffers:
  TfLiteTransposeConvParams {padding, stride_width, stride_height} and TfLitePoolParams {padding, stride_width,
  stride_height, filter_width, filter_height, activation}, little-endian int32 each (TfLitePadding: 1 SAME,
  2 VALID).
* MediaPipe's landmark ops (face / pose landmark models) are lowered too: ``Landmarks2TransformMatrix`` (v2),
  ``TransformLandmarks`` (v1, v2) and ``TransformTensorBilinear`` (v2; v1 also under the code ``TransformTensor``).
  Their options are FlexBuffer maps; the version is the OperatorCode's (MediaPipe's resolver registers version 2
  of all three).  They become elementwise math, COS/SIN, atan2 (tfl.atan2's lowering), REDUCE_MAX/MIN and GATHER.
* :data:`UNLOWERABLE` gives the reason an op has no TOSA 1.0 lowering; :func:`unsupported_reason` is what the
  pipeline reports for an op without a rule (instead of a bare "no legalization rule").
* :func:`emit_custom` keeps an op the converter cannot lower as a TOSA ``CUSTOM`` operator (spec 2.15.1 CUSTOM) with the
  same inputs and outputs, so the rest of the graph still converts (``ConvertOptions.custom_ops``).
  The executor cannot run CUSTOM (it raises an error naming the operator); ``graph.record.custom_ops`` lists
  the names.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import Unsupported
from ..ir import DType, Operation, TensorType, Value, has_value
from ..serializer.flexbuffer import decode_flexbuffer
from ..tosa.builder import Builder
from .lowering import tf_ops
from .lowering.layout import data_operand, static_shape, take_every, tosa_dtype
from .lowering.legalize_common import float_zp, fused_activation
from .lowering.numeric import float_atan2, require_float, select
from .lowering.padding import same_padding
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
    """MediaPipe's custom ops by custom_code: transposed conv, argmax pooling/unpooling, landmark transforms.

    Convolution2DTransposeBias, MaxPoolingWithArgmax2D, MaxUnpooling2D, Landmarks2TransformMatrix, TransformLandmarks,
    TransformTensorBilinear (:data:`CUSTOM_RULES`)."""
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
    VALID: no pad, output (I - 1)·s + K.  TRANSPOSE_CONV2D with out_pad = -pad_front (:func:`.tf_ops.
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
    return [tf_ops.transpose_conv2d(b, op, x, w, bias, out_hw, front, [sh, sw])]


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


# ------------------------------------------------------------------------ MediaPipe landmark / transform ops
def _flex_options(op: Operation, what: str) -> dict[str, Any]:
    """The FlexBuffer map in the custom options (Landmarks2TransformMatrix, TransformLandmarks v1,
    TransformTensorBilinear)."""
    dec = op.attrs.get("custom_options_decoded")
    if dec is None and op.attrs.get("custom_options"):
        try:
            dec = decode_flexbuffer(bytes(op.attrs["custom_options"]))
        except ValueError as e:
            raise Unsupported(f"{what}: custom options are not a FlexBuffer map ({e})") from None
    if dec is None:
        return {}
    if not isinstance(dec, dict):
        raise Unsupported(f"{what}: custom options are a FlexBuffer {type(dec).__name__}, not a map")
    return dec


def _f32(v: Any, what: str) -> float:
    try:
        return float(np.float32(v))  # the kernels read FlexBuffer floats with AsFloat()
    except (TypeError, ValueError):
        raise Unsupported(f"{what} {v!r} is not a number") from None


def _flat_elements(b: Builder, m: Value, count: int, rank: int, what: str) -> list[Value]:
    """The first ``count`` elements of ``m`` (row-major), each a rank-``rank`` tensor of ones-shape."""
    n = int(np.prod(static_shape(m)))
    if n < count:
        raise Unsupported(f"{what}: transform matrix of {n} elements (the kernel reads {count})")
    flat = b.reshape(m, [1, n])
    return [b.reshape(b.slice(flat, [0, i], [1, 1]), [1] * rank) for i in range(count)]


def _madd(b: Builder, *terms: tuple[Value, Value]) -> Value:
    """Σ a·b summed left to right in the value type (each product and partial sum rounded, like the kernels'
    float loops)."""
    acc: Value | None = None
    for x, y in terms:
        p = b.mul(x, y)
        acc = p if acc is None else b.binary("ADD", acc, p)
    assert acc is not None
    return acc


@custom_rule("TransformLandmarks")
def transform_landmarks(b: Builder, op: Operation) -> list[Value]:
    """MediaPipe's TransformLandmarks: each landmark (x, y[, z]) becomes (m00·x + m01·y + m03·s, m10·x + m11·y +
    m13·s[, z]) with the first two rows of the 4x4 transform matrix (the m02·0 term is dropped).

    Version 2 (the MediaPipe resolver's): landmarks [1, N, D], D = the last dimension (2 or 3), s = 1.  Version 1:
    landmarks [1, H, W, C] holding C/D landmarks per pixel, ``dimensions`` D and ``scale`` s from the FlexBuffer
    options.  Slices, MUL and ADD on an [P, D] view."""
    lm, mat = data_operand(b, op.operands[0]), data_operand(b, op.operands[1])
    require_float(op, lm, mat)
    version = int(op.attrs.get("op_version", 1) or 1)
    shape = static_shape(lm)
    if version >= 2:
        if len(shape) != 3:
            raise Unsupported(f"TransformLandmarks v2 on a rank-{len(shape)} input (the kernel wants [1, N, D])")
        dims, scale = shape[-1], 1.0
    else:
        if len(shape) != 4:
            raise Unsupported(f"TransformLandmarks v1 on a rank-{len(shape)} input (the kernel wants [1, H, W, C])")
        opts = _flex_options(op, "TransformLandmarks")
        dims = int(opts.get("dimensions", 3))  # the attribute struct's defaults
        scale = _f32(opts.get("scale", 1.0), "TransformLandmarks scale")
        if scale == 0.0:
            raise Unsupported("TransformLandmarks v1 with scale 0 (the kernel refuses it)")
    if dims not in (2, 3) or shape[-1] % dims:
        raise Unsupported(f"TransformLandmarks with {dims} dimensions on a last axis of {shape[-1]}")
    if shape[0] != 1:
        raise Unsupported(f"TransformLandmarks with batch {shape[0]} (the kernel transforms batch 0 only)")
    m = _flat_elements(b, mat, 8, 2, "TransformLandmarks")
    if scale != 1.0:
        for i in (3, 7):
            m[i] = b.mul(m[i], b.const(np.full((1, 1), scale), m[i].dtype))
    p = int(np.prod(shape)) // dims
    pts = b.reshape(lm, [p, dims])
    x, y = b.slice(pts, [0, 0], [p, 1]), b.slice(pts, [0, 1], [p, 1])
    cols = [b.binary("ADD", _madd(b, (m[0], x), (m[1], y)), m[3]),
            b.binary("ADD", _madd(b, (m[4], x), (m[5], y)), m[7])]
    if dims == 3:
        cols.append(b.slice(pts, [0, 2], [p, 1]))
    return [b.reshape(b.concat(cols, 1), shape)]


@custom_rule("TransformTensorBilinear", "TransformTensor")
def transform_tensor_bilinear(b: Builder, op: Operation) -> list[Value]:
    """MediaPipe's TransformTensorBilinear: output pixel (x, y) samples the input bilinearly at (t_x, t_y) =
    (m00·x + m01·y + m03, m10·x + m11·y + m13); 0 where that point lies outside [0, W-1] x [0, H-1].

    Version 2 (custom code TransformTensorBilinear, the MediaPipe resolver's) first applies the align-corners
    correction m03 += (m00 + m01)/2 - 1/2 (likewise m13); version 1 (TransformTensor, or version 1 of the op code)
    does not.  The output size is the output tensor's ([1, OH, OW, C]).  Coordinates come from the runtime matrix,
    so the four corners are read with GATHER on the [1, H·W, C] input (indices clamped into the image: a corner
    outside it has weight 0 when the point is inside), then the kernel's blend (1-r)·q11 + r·q21 … and a SELECT of
    0 outside."""
    x, mat = data_operand(b, op.operands[0]), data_operand(b, op.operands[1])
    dt = require_float(op, x, mat)
    code = str(op.attrs.get("custom_code", ""))
    align = code == "TransformTensorBilinear" and int(op.attrs.get("op_version", 2) or 2) >= 2
    mode = _flex_options(op, code).get("mode", "bilinear") if code == "TransformTensor" else "bilinear"
    if mode != "bilinear":
        raise Unsupported(f"{code} with mode {mode!r} (the kernel supports only bilinear interpolation)")
    n, h, w, c = static_shape(x)
    res = op.results[0]
    out = [int(d) for d in res.shape] if res.type.is_static else []
    if len(out) != 4 or out[0] != 1 or out[3] != c:
        raise Unsupported(f"{code} output {res.type} for input {x.type} (needs a static [1, OH, OW, {c}])")
    if n != 1:
        raise Unsupported(f"{code} with batch {n} (the kernel samples batch 0 only)")
    if h * w >= 1 << 24:
        raise Unsupported(f"{code} on a {h}x{w} input (pixel indices are computed exactly in fp32 up to 2^24)")
    _, oh, ow, _ = out
    m = _flat_elements(b, mat, 8, 4, code)

    def k(v: float) -> Value:
        return b.const(np.full((1, 1, 1, 1), v), dt)

    if align:  # x_transform[3] += x_transform[0] * 0.5 + x_transform[1] * 0.5 - 0.5
        for i in (3, 7):
            corr = b.binary("SUB", _madd(b, (m[i - 3], k(0.5)), (m[i - 2], k(0.5))), k(0.5))
            m[i] = b.binary("ADD", m[i], corr)
    gx = b.const(np.arange(ow, dtype=np.float32).reshape(1, 1, ow, 1), dt)
    gy = b.const(np.arange(oh, dtype=np.float32).reshape(1, oh, 1, 1), dt)
    tx = b.binary("ADD", _madd(b, (m[0], gx), (m[1], gy)), m[3])  # [1, OH, OW, 1]
    ty = b.binary("ADD", _madd(b, (m[4], gx), (m[5], gy)), m[7])
    inside = b.binary("LOGICAL_AND",
                      b.binary("LOGICAL_AND", b.binary("GREATER_EQUAL", tx, k(0.0)),
                               b.binary("GREATER_EQUAL", k(float(w - 1)), tx)),
                      b.binary("LOGICAL_AND", b.binary("GREATER_EQUAL", ty, k(0.0)),
                               b.binary("GREATER_EQUAL", k(float(h - 1)), ty)))
    fx, fy = b.floor(tx), b.floor(ty)
    rc, lc = b.binary("SUB", tx, fx), b.binary("SUB", ty, fy)

    def cl(v: Value, hi: int) -> Value:  # integral floats, clamped into the image (NaN -> 0)
        return b.clamp(v, 0.0, float(hi), nan_mode="IGNORE")

    x0, x1 = cl(fx, w - 1), cl(b.binary("ADD", fx, k(1.0)), w - 1)
    y0, y1 = cl(fy, h - 1), cl(b.binary("ADD", fy, k(1.0)), h - 1)
    table = b.reshape(x, [1, h * w, c])

    def corner(yy: Value, xx: Value) -> Value:
        idx = b.cast(b.binary("ADD", b.mul(yy, k(float(w))), xx), DType.INT32)  # exact: integers < 2^24
        g = b.emit("GATHER", [table, b.reshape(idx, [1, oh * ow])]).result
        return b.reshape(g, [1, oh, ow, c])

    q11, q21, q12, q22 = corner(y0, x0), corner(y0, x1), corner(y1, x0), corner(y1, x1)
    one_r, one_l = b.binary("SUB", k(1.0), rc), b.binary("SUB", k(1.0), lc)
    upper = _madd(b, (one_r, q11), (rc, q21))
    lower = _madd(b, (one_r, q12), (rc, q22))
    blend = _madd(b, (lc, lower), (one_l, upper))
    return [select(b, inside, blend, k(0.0))]


def _pairs(v: Any, what: str) -> list[int]:
    if not isinstance(v, (list, tuple)) or not v or not all(isinstance(i, (int, np.integer)) for i in v):
        raise Unsupported(f"{what} {v!r} (expected a non-empty list of landmark indices)")
    return [int(i) for i in v]


@custom_rule("Landmarks2TransformMatrix")
def landmarks_to_transform_matrix(b: Builder, op: Operation) -> list[Value]:
    """MediaPipe's Landmarks2TransformMatrix (version 2, the MediaPipe resolver's): the 4x4 matrix mapping a crop
    of ``output_width`` x ``output_height`` onto the landmarks' rotated bounding box.

    rotation r = target_rotation_radians - atan2(y_R - y_L, x_R - x_L) from the two rotation landmarks; the
    ``subset_idxs`` landmarks rotated by r give the box (max - min) and its centre, rotated back by -r; with
    c = cos r, s = sin r, sx = scale_x·width/output_width, sy likewise and (hx, hy) = -(output size)/2 the
    kernel's product shift·rotation(-r)·scale·shift2 is [[c·sx, s·sy, 0, c·sx·hx + s·sy·hy + cx],
    [-s·sx, c·sy, 0, -s·sx·hx + c·sy·hy + cy], [0, 0, 1, 0], [0, 0, 0, 1]], summed in the kernel's order.
    atan2 is tfl.atan2's polynomial lowering, cos/sin are TOSA COS/SIN, the box is REDUCE_MAX/MIN over a GATHER of
    the subset; the division by the output size is a multiplication by its (constant) reciprocal."""
    lm = data_operand(b, op.operands[0])
    dt = require_float(op, lm)
    version = int(op.attrs.get("op_version", 1) or 1)
    if version < 2:
        raise Unsupported("Landmarks2TransformMatrix version 1 (input_hw / output_hw / landmarks_range options) "
                          "is not lowered; MediaPipe's resolver registers version 2")
    opts = _flex_options(op, "Landmarks2TransformMatrix")
    subset = _pairs(opts.get("subset_idxs"), "Landmarks2TransformMatrix subset_idxs")
    left, right = int(opts.get("left_rotation_idx", 0)), int(opts.get("right_rotation_idx", 0))  # absent key: 0
    out_h, out_w = int(opts.get("output_height", 0)), int(opts.get("output_width", 0))
    scale_x = _f32(opts.get("scale_x", 0.0), "Landmarks2TransformMatrix scale_x")
    scale_y = _f32(opts.get("scale_y", 0.0), "Landmarks2TransformMatrix scale_y")
    target = _f32(opts.get("target_rotation_radians", 0.0), "Landmarks2TransformMatrix target_rotation_radians")
    if min(out_h, out_w) <= 0 or min(scale_x, scale_y) <= 0:
        raise Unsupported(f"Landmarks2TransformMatrix output {out_h}x{out_w}, scale {scale_x}x{scale_y} "
                          "(the kernel refuses non-positive values)")
    total = int(np.prod(static_shape(lm)))
    count = total // 3
    if total % 3 or not all(0 <= i < count for i in (left, right, *subset)):
        raise Unsupported(f"Landmarks2TransformMatrix indices {left}, {right}, {subset} on {total // 3} landmarks "
                          f"of 3 values ({lm.type})")
    res = op.results[0]
    if not res.type.is_static or int(np.prod([int(d) for d in res.shape])) != 16:
        raise Unsupported(f"Landmarks2TransformMatrix output {res.type} (the kernel writes [1, 4, 4])")
    pts = b.reshape(lm, [1, count, 3])

    def k(v: float) -> Value:
        return b.const(np.full((1, 1, 1), v), dt)

    def coord(i: int, j: int) -> Value:
        return b.slice(pts, [0, i, j], [1, 1, 1])

    dy = b.binary("SUB", coord(right, 1), coord(left, 1))
    dx = b.binary("SUB", coord(right, 0), coord(left, 0))
    angle = float_atan2(b, dy, dx)
    r = b.binary("SUB", k(target), angle)
    cs, sn = b.cos(r), b.sin(r)
    neg_sn = b.negate(sn, float_zp(b, dt), float_zp(b, dt))
    idx = b.const(np.array([subset], np.int32), DType.INT32)
    sub = b.emit("GATHER", [pts, idx]).result  # [1, M, 3]
    m = len(subset)
    sx_, sy_ = b.slice(sub, [0, 0, 0], [1, m, 1]), b.slice(sub, [0, 0, 1], [1, m, 1])
    xr = _madd(b, (cs, sx_), (neg_sn, sy_))
    yr = _madd(b, (sn, sx_), (cs, sy_))

    def red(opcode: str, v: Value) -> Value:
        return b.emit(opcode, [v], {"axis": 1, "nan_mode": "PROPAGATE"}).result  # [1, 1, 1]

    max_x, min_x, max_y, min_y = red("REDUCE_MAX", xr), red("REDUCE_MIN", xr), red("REDUCE_MAX", yr), \
        red("REDUCE_MIN", yr)
    width, height = b.binary("SUB", max_x, min_x), b.binary("SUB", max_y, min_y)
    mid_x = b.mul(b.binary("ADD", min_x, max_x), k(0.5))
    mid_y = b.mul(b.binary("ADD", min_y, max_y), k(0.5))
    cx = _madd(b, (cs, mid_x), (sn, mid_y))
    cy = _madd(b, (neg_sn, mid_x), (cs, mid_y))
    sx = b.mul(b.mul(k(scale_x), width), k(1.0 / out_w))
    sy = b.mul(b.mul(k(scale_y), height), k(1.0 / out_h))
    hx, hy = k(-(out_w / 2.0)), k(-(out_h / 2.0))
    e00, e01 = b.mul(cs, sx), b.mul(sn, sy)
    e10, e11 = b.mul(neg_sn, sx), b.mul(cs, sy)
    e03 = b.binary("ADD", _madd(b, (e00, hx), (e01, hy)), cx)
    e13 = b.binary("ADD", _madd(b, (e10, hx), (e11, hy)), cy)
    zero, one = k(0.0), k(1.0)
    elems = [e00, e01, zero, e03, e10, e11, zero, e13, zero, zero, one, zero, zero, zero, zero, one]
    flat = b.concat([b.reshape(e, [1, 1]) for e in elems], 1)
    return [b.reshape(flat, [int(d) for d in res.shape])]


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
        stored = b.graph.source.stored_shapes.get(r.name)
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
    """Keep ``op`` as a TOSA CUSTOM operator (spec 2.15.1 CUSTOM): same inputs (omitted optional inputs dropped,
    constant
    int64 narrowed to i32) and outputs (static types from the op's results or the shapes stored in the file).

    operator_name = the custom code (tfl.custom) or the op name; domain_name = ``tf2tosa.tflite``
    (``tf2tosa.tensorflow`` for tf.* ops); implementation_attrs = the custom_options bytes (tfl.custom) or a JSON
    object of the op's attributes, the reason it was not lowered and ``placeholder_shapes``: the results whose
    shape is data-dependent in the source (their TOSA shape is the one stored in the file, e.g. [1] for unique's
    output).  Appends the name to ``graph.record.custom_ops``.  Raises Unsupported (with
    ``reason`` first) when an input or output has no static TOSA type.
    """
    name = custom_name(op)
    try:
        inputs = [data_operand(b, v) for v in op.operands if has_value(v)]
        types = [_result_type(b, r) for r in op.results]
    except Unsupported as e:
        raise e.reworded(f"{reason}; cannot be kept as a CUSTOM operator: {e.reason}") from None
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
    b.graph.record.custom_ops.append(name)
    return list(new.results)


__all__ = ["CUSTOM_DOMAIN", "CUSTOM_RULES", "UNLOWERABLE", "UNLOWERABLE_CUSTOM", "custom_name", "custom_rule",
           "emit_custom", "unsupported_reason"]
