"""The ``.tflite`` route of :func:`tf2tosa.convert` below the API layer, so the verify layer can convert without
importing :mod:`tf2tosa.api` (see docs/architecture.md, "Layers")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..ir import Graph
from .pipeline import ConvertOptions, convert_graph
from .tflite import load_tflite


def convert_options(*, input_shapes: Mapping[str, Sequence[int]] | None = None, rounding: str = "double",
                    fold: bool = True, signature: str = "serving_default", io: str = "float",
                    **extra: Any) -> ConvertOptions:
    """The :class:`ConvertOptions` for :func:`tf2tosa.convert`'s keyword arguments (``signature`` only selects a
    TensorFlow signature)."""
    return ConvertOptions(input_shapes=input_shapes, fold=fold, rounding=rounding, io=io, extra=dict(extra))


def convert_tflite_data(data: bytes, path: str, options: ConvertOptions) -> Graph:
    """Load and convert a ``.tflite`` read from ``path`` (``"<bytes>"`` when it came as bytes)."""
    graph = load_tflite(data, name=Path(path).stem if path != "<bytes>" else None,
                        file=path if path != "<bytes>" else None)
    graph.meta["file"] = path
    convert_graph(graph, options, file=path)
    return graph
