"""Attention models: a transformer encoder, a tiny BERT, a tiny ViT and an MLP-Mixer."""

from __future__ import annotations

from typing import Any

from .core import seeded_keras


def _position_embedding(keras: Any) -> Any:
    class PositionEmbedding(keras.layers.Layer):  # type: ignore[misc, name-defined]
        """Adds a learned ``[T, D]`` table (random-normal 0.02, as BERT) to ``[B, T, D]``."""

        def build(self, shape: Any) -> None:
            self.table = self.add_weight(shape=(int(shape[1]), int(shape[2])), name="table",
                                         initializer=keras.initializers.RandomNormal(stddev=0.02))

        def call(self, x: Any) -> Any:
            return x + self.table[None]

    return PositionEmbedding()


def _encoder_block(keras: Any, x: Any, heads: int, key_dim: int, mlp: int, epsilon: float = 1e-6,
                   pre_norm: bool = False) -> Any:
    """Multi-head self-attention and a GELU feed-forward block with residuals (post-norm as BERT, or pre-norm)."""
    L = keras.layers
    d = int(x.shape[-1])
    y = L.LayerNormalization(epsilon=epsilon)(x) if pre_norm else x
    y = L.MultiHeadAttention(num_heads=heads, key_dim=key_dim)(y, y)
    x = L.Add()([x, y])
    if not pre_norm:
        x = L.LayerNormalization(epsilon=epsilon)(x)
    y = L.LayerNormalization(epsilon=epsilon)(x) if pre_norm else x
    y = L.Dense(mlp, activation="gelu")(y)
    y = L.Dense(d)(y)
    x = L.Add()([x, y])
    if not pre_norm:
        x = L.LayerNormalization(epsilon=epsilon)(x)
    return x


def transformer_encoder(seed: int) -> Any:
    """Two post-norm encoder layers (4 heads, width 32, GELU MLP 64) over 16 feature vectors; pooled classifier."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((16, 32), name="features")
    x = _position_embedding(keras)(inp)
    for _ in range(2):
        x = _encoder_block(keras, x, 4, 8, 64)
    x = L.GlobalAveragePooling1D()(x)
    return keras.Model(inp, L.Softmax()(L.Dense(4)(x)), name="transformer_encoder")


def tiny_bert(seed: int) -> Any:
    """A tiny BERT: token embedding (GATHER on int32 ids), learned positions, LayerNorm, 2 post-norm layers with
    GELU, a tanh pooler on the first token and a 2-way classifier.  Outputs the sequence output and the
    probabilities."""
    keras = seeded_keras(seed)
    L = keras.layers
    ids = keras.Input((16,), dtype="int32", name="input_ids")
    x = L.Embedding(128, 32, embeddings_initializer=keras.initializers.RandomNormal(stddev=0.5))(ids)
    x = _position_embedding(keras)(x)
    x = L.LayerNormalization(epsilon=1e-12)(x)
    for _ in range(2):
        x = _encoder_block(keras, x, 2, 16, 64, epsilon=1e-12)
    seq = L.Identity(name="sequence_output")(x)
    first = L.Lambda(lambda t: t[:, 0, :], output_shape=(32,))(x)
    pooled = L.Dense(32, activation="tanh")(first)
    probs = L.Softmax(name="probs")(L.Dense(2)(pooled))
    return keras.Model(ids, [seq, probs], name="tiny_bert")


def vit_tiny(seed: int) -> Any:
    """Vision transformer: 4x4 patch embedding (strided conv), learned positions, 2 pre-norm blocks, mean pooling."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((32, 32, 3), name="image")
    x = L.Conv2D(48, 4, strides=4)(inp)
    x = L.Reshape((64, 48))(x)
    x = _position_embedding(keras)(x)
    for _ in range(2):
        x = _encoder_block(keras, x, 3, 16, 96, pre_norm=True)
    x = L.LayerNormalization(epsilon=1e-6)(x)
    x = L.GlobalAveragePooling1D()(x)
    return keras.Model(inp, L.Softmax()(L.Dense(10)(x)), name="vit_tiny")


def mlp_mixer_tiny(seed: int) -> Any:
    """MLP-Mixer: 8x8 patches, token-mixing MLPs (over the transposed patch axis) and channel-mixing MLPs."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((32, 32, 3), name="image")
    x = L.Conv2D(32, 8, strides=8)(inp)
    x = L.Reshape((16, 32))(x)
    for _ in range(2):
        y = L.LayerNormalization(epsilon=1e-6)(x)
        y = L.Permute((2, 1))(y)
        y = L.Dense(32, activation="gelu")(y)
        y = L.Dense(16)(y)
        x = L.Add()([x, L.Permute((2, 1))(y)])
        y = L.LayerNormalization(epsilon=1e-6)(x)
        y = L.Dense(64, activation="gelu")(y)
        x = L.Add()([x, L.Dense(32)(y)])
    x = L.GlobalAveragePooling1D()(L.LayerNormalization(epsilon=1e-6)(x))
    return keras.Model(inp, L.Softmax()(L.Dense(10)(x)), name="mlp_mixer_tiny")
