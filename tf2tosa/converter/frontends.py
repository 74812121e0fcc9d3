"""The frontends, in one table: each is a ``(detect, load)`` pair (:class:`Frontend`), tried in order by
:func:`convert_source`; a source no frontend claims is read as a ``.tflite``.

A new frontend is one entry of :data:`FRONTENDS` plus its module: ``detect`` says, without importing anything heavy,
whether the source is its format; ``load`` reads it and runs the pipeline (:func:`.pipeline.convert_graph`) with
the :class:`~tf2tosa.options.ConvertOptions` given, returning a :class:`Converted`.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InputError, ModelLoadError
from ..ir import Graph
from ..options import ConvertOptions


@dataclass(frozen=True)
class Converted:
    """A converted graph and the source it came from (what :class:`tf2tosa.api.TosaModel` wraps)."""

    graph: Graph
    #: the source ``.tflite``: its bytes, or the read-only map of the file (None for other formats)
    source: bytes | mmap.mmap | None = None
    source_path: str | None = None
    #: the opened TensorFlow model (:class:`.tensorflow.TFSource`) of a TensorFlow source
    tf_source: Any = None


@dataclass(frozen=True)
class Frontend:
    """One source format: ``detect(source)`` claims it, ``load(source, options)`` converts it."""

    name: str
    detect: Callable[[Any], bool]
    load: Callable[[Any, ConvertOptions], Converted]


def read_source(source: str | os.PathLike[str] | bytes) -> tuple[bytes, str]:
    """A model's bytes and its name (``"<bytes>"`` for bytes given as such)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), "<bytes>"
    path = str(source)
    try:
        with open(path, "rb") as f:
            return f.read(), path
    except OSError as e:
        raise ModelLoadError(f"cannot read model: {e.strerror}", file=path) from None


def map_source(source: str | os.PathLike[str] | bytes) -> tuple[bytes | mmap.mmap, str]:
    """A ``.tflite`` to convert: bytes as given, a file memory-mapped (its constants are read in place)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return read_source(source)
    from .tflite import map_file

    path = str(source)
    try:
        return map_file(path), path
    except OSError as e:
        raise ModelLoadError(f"cannot read model: {e.strerror}", file=path) from None


def _label(source: Any) -> str | None:
    return os.fspath(source) if isinstance(source, (str, os.PathLike)) else None


def tensorflow_only(options: ConvertOptions, source: Any) -> None:
    """Refuse the TensorFlow-only options (``tag``, ``inputs``, ``outputs``: a SavedModel's MetaGraph, a cut by
    tensor names) for a .tflite or NNEF source."""
    given = [k for k in ("tag", "inputs", "outputs") if getattr(options, k) is not None]
    if given:
        raise InputError(f"{'/'.join(given)}= (--{' --'.join(given)}) only apply to TensorFlow models (SavedModel, "
                         "Keras, GraphDef)", file=_label(source))


def is_plain_tflite(source: Any) -> bool:
    """Bytes, or a path to a regular file named ``*.tflite``: what neither ``is_nnef_source`` (a directory or a
    ``.nnef``/``.tgz``/``.tar.gz``/``.tar`` name) nor ``is_tensorflow_source`` (a directory, a ``.keras``/``.h5``/
    ``.hdf5``/``.pb``/``.graphdef`` name or a Keras/TensorFlow object) accepts."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return True
    path = _label(source)
    return isinstance(path, str) and path.lower().endswith(".tflite") and os.path.isfile(path)


def _load_tflite(source: Any, options: ConvertOptions) -> Converted:
    from .source import convert_tflite_data

    tensorflow_only(options, source)
    data, path = map_source(source)
    return Converted(convert_tflite_data(data, path, options), source=data, source_path=path)


def _is_nnef(source: Any) -> bool:
    from .nnef import is_nnef_source

    return is_nnef_source(source)


def _load_nnef(source: Any, options: ConvertOptions) -> Converted:
    from .source import convert_nnef_path

    tensorflow_only(options, source)
    path = os.fspath(source)
    return Converted(convert_nnef_path(path, options), source_path=path)


def _is_tensorflow(source: Any) -> bool:
    from .tensorflow import is_tensorflow_source

    return is_tensorflow_source(source)


def _load_tensorflow(source: Any, options: ConvertOptions) -> Converted:
    import importlib.util

    from .pipeline import convert_graph
    from .tensorflow import tensorflow_frontend

    if isinstance(source, (str, os.PathLike)) and importlib.util.find_spec("tensorflow") is None:
        from ..errors import MissingExtraError

        raise MissingExtraError("TensorFlow models need TensorFlow: pip install 'tf2tosa[tf]'", file=os.fspath(source))
    graph, src = tensorflow_frontend(source, options, signature=options.signature)
    convert_graph(graph, options, file=src.label)
    return Converted(graph, source_path=src.label, tf_source=src)


#: the frontends, tried in this order (bytes and ``*.tflite`` files are claimed before the others are imported)
FRONTENDS: tuple[Frontend, ...] = (
    Frontend("tflite", is_plain_tflite, _load_tflite),
    Frontend("nnef", _is_nnef, _load_nnef),
    Frontend("tensorflow", _is_tensorflow, _load_tensorflow),
)
#: what reads a source no frontend claims (a file of another name is read as a ``.tflite``)
FALLBACK = FRONTENDS[0]


def frontend_of(source: Any) -> Frontend:
    """The frontend that reads ``source``."""
    return next((f for f in FRONTENDS if f.detect(source)), FALLBACK)


def convert_source(source: Any, options: ConvertOptions) -> Converted:
    """Convert ``source`` (a path, bytes or a TensorFlow object) with its frontend and the pipeline."""
    from ..quant.common import check_mode

    options = options.replace(hybrid=check_mode(options.hybrid, _label(source)))
    if isinstance(source, (str, os.PathLike)):
        from ..outputs import check_input

        check_input(source, ModelLoadError)  # a FIFO, a device or a socket is refused before it is opened
    return frontend_of(source).load(source, options)


__all__ = ["FALLBACK", "FRONTENDS", "Converted", "Frontend", "convert_source", "frontend_of", "is_plain_tflite",
           "map_source", "read_source", "tensorflow_only"]
