"""Other models: a dense anomaly-detection autoencoder and a two-tower-ish recommender with embeddings."""

from __future__ import annotations

from typing import Any

from .core import seeded_keras


def dense_autoencoder(seed: int) -> Any:
    """MLPerf Tiny anomaly detection autoencoder: 640 -> 128 x4 -> 8 -> 128 x4 -> 640, Dense-BN-ReLU."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((640,), name="features")
    x = inp
    for units in (128, 128, 128, 128, 8, 128, 128, 128, 128):
        x = L.ReLU()(L.BatchNormalization()(L.Dense(units)(x)))
    return keras.Model(inp, L.Dense(640)(x), name="dense_autoencoder")


def recommender(seed: int) -> Any:
    """Wide-and-deep style click model: user and item ids (int32, embedding GATHERs), dense features, an MLP and a
    sigmoid."""
    keras = seeded_keras(seed)
    L = keras.layers
    user = keras.Input((1,), dtype="int32", name="user_id")
    item = keras.Input((1,), dtype="int32", name="item_id")
    dense = keras.Input((8,), name="dense_features")
    u = L.Flatten()(L.Embedding(64, 16, embeddings_initializer=keras.initializers.RandomNormal(stddev=0.5))(user))
    i = L.Flatten()(L.Embedding(64, 16, embeddings_initializer=keras.initializers.RandomNormal(stddev=0.5))(item))
    dot = L.Dot(axes=1)([u, i])
    x = L.Concatenate()([u, i, dense])
    x = L.Dense(32, activation="relu")(x)
    x = L.Dense(16, activation="relu")(x)
    x = L.Concatenate()([x, dot])
    out = L.Dense(1, activation="sigmoid")(x)
    return keras.Model([user, item, dense], out, name="recommender")
