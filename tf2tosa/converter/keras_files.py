"""Keras files as users have them: legacy Keras 2 files, custom layers, Python code in a file, training-only state.

Used by the TensorFlow frontend (:mod:`.tensorflow`) when it opens a ``.keras`` / ``.h5`` file; this module imports
no other part of the frontend (nor TensorFlow, Keras or ``tf_keras`` before a function needs them).

* **Custom objects** (:func:`custom_objects_of`): the classes and functions a file names that Keras does not have,
  given as a mapping ``name -> object`` or as the path of a Python module file (``--custom-objects module.py``,
  repeatable).  A module file is run (the user's explicit choice: it is their code) under a private module name
  that is removed from ``sys.modules`` again; its ``CUSTOM_OBJECTS`` mapping is used when it has one, else every
  public class and function it defines.  An error in it is one :class:`ModelLoadError` naming the file.  They are
  handed to Keras for the conversion in hand by :func:`custom_objects_scope`.
* **The legacy loader** (:func:`load_legacy`): when Keras 3 refuses a file (a Keras 2.x ``.h5`` whose
  ``DepthwiseConv2D`` config carries ``groups``, a functional model holding a nested ``Sequential`` that Keras 3
  calls "loops or disconnected nodes" …), the file is loaded with ``tf_keras`` (Keras 2, the ``[tf]`` extra),
  imported only then, and one info line on the ``tf2tosa`` logger says so.  Keras 2's ``.h5`` loader does not
  honour ``safe_mode`` by itself (it unmarshals a ``Lambda``'s bytecode): a file with a Python ``Lambda`` is
  refused before ``tf_keras`` sees it unless ``unsafe_deserialization``, and the load runs in Keras 2's safe-mode
  scope too.  A layer class neither Keras knows is refused naming ``--custom-objects``.
* **Inference tracing** (:func:`inference_trace`): Keras 3's recurrent cells draw their dropout masks from a seed
  generator (a variable the draw writes) even in inference, where the mask is not used; while the model is
  traced the cells' dropout rates are 0, so the inference function writes no variable and can be frozen.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import itertools
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ModelLoadError, first_line

log = logging.getLogger("tf2tosa")

#: what ``custom_objects=`` takes: a mapping name -> object, a module file path, or a list of either
CustomObjects = Mapping[str, Any] | str | os.PathLike[str] | Sequence[Any] | None

_module_ids = itertools.count()
_active: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("tf2tosa_custom_objects",
                                                                               default=None)


# ------------------------------------------------------------------------------------------- custom objects
def _module_objects(path: str) -> dict[str, Any]:
    """Run the module file ``path`` (under a private name, not left in ``sys.modules``) and return its custom
    objects: its ``CUSTOM_OBJECTS`` mapping, else its public classes and functions."""
    p = Path(path)
    if not p.is_file():
        raise ModelLoadError("--custom-objects: no such module file", file=path)
    name = f"_tf2tosa_custom_objects_{next(_module_ids)}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise ModelLoadError("--custom-objects: not a Python module file (a .py file)", file=path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (while it runs: decorators and dataclasses look their module up)
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:  # the user's code: any failure is one error naming the file
        raise ModelLoadError(f"--custom-objects: running the module failed: {type(e).__name__}: {first_line(e)}",
                             file=path) from None
    finally:
        sys.modules.pop(name, None)
    table = getattr(module, "CUSTOM_OBJECTS", None)
    if table is not None:
        if not isinstance(table, Mapping) or not all(isinstance(k, str) for k in table):
            raise ModelLoadError("--custom-objects: CUSTOM_OBJECTS must be a dict of name -> class or function",
                                 file=path)
        return dict(table)
    found = {k: v for k, v in vars(module).items() if not k.startswith("_") and getattr(v, "__module__", None) == name
             and (isinstance(v, type) or callable(v))}
    if not found:
        raise ModelLoadError("--custom-objects: the module defines no class or function (nor a CUSTOM_OBJECTS "
                             "dict)", file=path)
    return found


def custom_objects_of(spec: CustomObjects) -> dict[str, Any]:
    """The custom objects of ``spec``: a mapping name -> object, a module file path, or a list of these (later
    entries win)."""
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        bad = [k for k in spec if not isinstance(k, str)]
        if bad:
            raise ModelLoadError(f"custom_objects: the keys must be the names the file uses (strings), not {bad[0]!r}")
        return dict(spec)
    if isinstance(spec, (str, os.PathLike)):
        return _module_objects(os.fspath(spec))
    if isinstance(spec, Sequence):
        out: dict[str, Any] = {}
        for item in spec:
            if isinstance(item, Sequence) and not isinstance(item, (str, os.PathLike)):
                raise ModelLoadError("custom_objects: a list of module paths or mappings, not nested lists")
            out.update(custom_objects_of(item))
        return out
    raise ModelLoadError(f"custom_objects: a mapping name -> class or a module file path, not a {type(spec).__name__}")


@contextlib.contextmanager
def custom_objects_scope(spec: CustomObjects) -> Iterator[None]:
    """Within the block, :func:`active_custom_objects` returns the custom objects of ``spec`` (resolved here, so a
    broken module fails before any model is opened)."""
    token = _active.set(custom_objects_of(spec) if spec is not None else None)
    try:
        yield
    finally:
        _active.reset(token)


def active_custom_objects() -> dict[str, Any] | None:
    """The custom objects of the enclosing :func:`custom_objects_scope` (None: none were given)."""
    return _active.get()


#: the names Keras 3 and Keras 2 give an object they do not know
_UNKNOWN = (re.compile(r"Unknown (?:layer|object|class|activation|initializer|regularizer|constraint|loss|metric)"
                       r"[^:']*:\s*'?([A-Za-z_][\w>.]*)"),
            re.compile(r"Could not locate (?:class|function|object) '([^']+)'"))


def unknown_objects(text: str) -> list[str]:
    """The object names a Keras error message says it does not know."""
    return sorted({m.group(1) for rx in _UNKNOWN for m in rx.finditer(text)})


def refuse_unknown(path: str, names: Sequence[str], given: Mapping[str, Any] | None) -> ModelLoadError:
    """The error for a file using classes neither Keras has: it names ``--custom-objects``."""
    which = ", ".join(repr(n) for n in names)
    hint = "" if not given else f" (the custom objects given define {', '.join(sorted(given)) or 'nothing'})"
    return ModelLoadError(f"cannot load Keras model: it uses custom object(s) {which} that Keras does not have"
                          f"{hint}: give their code with --custom-objects module.py (API custom_objects=)", file=path)


# -------------------------------------------------------------------------------------------- the legacy loader
def refuse_code(path: str, layers: Sequence[str]) -> ModelLoadError:
    """The error for a file holding Python code (``Lambda``) without ``unsafe_deserialization``."""
    which = f"Lambda layer(s) {', '.join(repr(n) for n in layers)}" if layers else "a layer"
    return ModelLoadError(f"Keras safe mode refused the Python code in {which}; loading it would run that code: if "
                          "you trust this file, pass --unsafe-deserialization (API unsafe_deserialization=True)",
                          file=path)


def _tf_keras() -> Any:
    try:
        import tf_keras
    except ModuleNotFoundError:
        return None
    return tf_keras


def saved_by_keras2(path: str) -> bool:
    """Whether a Keras 2 (``tf_keras``) may read ``path``: an ``.h5`` not written by Keras 3 (its ``keras_version``
    attribute), a ``.keras`` whose ``metadata.json`` names Keras 2."""
    import json

    try:
        if path.lower().endswith(".keras"):
            import zipfile

            with zipfile.ZipFile(path) as z:
                if "metadata.json" not in z.namelist() or z.getinfo("metadata.json").file_size > 1 << 20:
                    return False
                version = str(json.loads(z.read("metadata.json")).get("keras_version", ""))
            return version.startswith("2.")
        import h5py

        with h5py.File(path, "r") as f:
            raw = f.attrs.get("keras_version", b"")
        version = raw.decode() if isinstance(raw, bytes) else str(raw)
        return not version.startswith("3.")
    except Exception:
        return False


def fallback(path: str, keras3_error: BaseException, unsafe_deserialization: bool, code_layers: Sequence[str],
             custom_objects: Mapping[str, Any] | None) -> Any:
    """What follows Keras 3's refusal ``keras3_error`` of ``path`` (not a safe-mode refusal): a Keras 2 file is
    loaded with ``tf_keras`` (:func:`load_legacy`; it may know a layer Keras 3 dropped); for another file, custom
    objects nobody gave are refused naming ``--custom-objects``, and anything else is one :class:`ModelLoadError`
    with Keras 3's reason."""
    if saved_by_keras2(path):
        return load_legacy(path, keras3_error, unsafe_deserialization, code_layers, custom_objects)
    cause = keras3_error.__cause__ or keras3_error.__context__
    k3_text = str(keras3_error) + (" " + str(cause) if cause is not None else "")
    unknown = [n for n in unknown_objects(k3_text) if not custom_objects or n not in custom_objects]
    if unknown:
        raise refuse_unknown(path, unknown, custom_objects)
    raise ModelLoadError(f"cannot load Keras model: {first_line(keras3_error)}", file=path)


def load_legacy(path: str, keras3_error: BaseException, unsafe_deserialization: bool, code_layers: Sequence[str],
                custom_objects: Mapping[str, Any] | None) -> Any:
    """Load ``path``, which Keras 3 refused with ``keras3_error``, with ``tf_keras`` (Keras 2); one info line says
    so.  ``code_layers``: the ``Lambda`` layers of its config (refused unless ``unsafe_deserialization``).
    Raises one :class:`ModelLoadError` when that fails too (a custom object neither Keras knows names
    ``--custom-objects``)."""
    k3 = first_line(keras3_error)
    if code_layers and not unsafe_deserialization:
        raise refuse_code(path, code_layers)
    tf_keras = _tf_keras()
    if tf_keras is None:
        raise ModelLoadError(f"cannot load Keras model: {k3} (Keras 3; a Keras 2 file loads with tf_keras: pip "
                             "install 'tf2tosa[tf]')", file=path)
    from tf_keras.src.saving.serialization_lib import SafeModeScope

    try:
        with SafeModeScope(safe_mode=not unsafe_deserialization):
            model = tf_keras.models.load_model(path, custom_objects=dict(custom_objects or {}), compile=False)
    except Exception as e:
        text = str(e)
        unknown = unknown_objects(text)
        if unknown:
            raise refuse_unknown(path, unknown, custom_objects) from None
        if not unsafe_deserialization and "safe_mode" in text:
            raise refuse_code(path, code_layers) from None
        if "marshal" in text and code_layers:
            raise ModelLoadError(f"cannot load Keras model: the Python bytecode of Lambda layer(s) "
                                 f"{', '.join(repr(n) for n in code_layers)} was written by another Python version "
                                 f"and cannot be read by this one ({first_line(e)})", file=path) from None
        raise ModelLoadError(f"cannot load Keras model: Keras 3: {k3}; tf_keras (Keras 2): {first_line(e)}",
                             file=path) from None
    log.info("%s: Keras 3 cannot read this file (%s); loaded with tf_keras (Keras 2) instead", path,
             first_line(keras3_error, 120))
    return model


# ----------------------------------------------------------------------------------------- inference tracing
def _dropout_cells(model: Any) -> list[Any]:
    """The Keras 3 recurrent cells of ``model`` with a dropout rate (their masks come from a seed generator)."""
    try:
        from keras.src.layers.rnn.dropout_rnn_cell import DropoutRNNCell
    except ImportError:  # pragma: no cover - another Keras
        return []
    flatten = getattr(model, "_flatten_layers", None)
    if flatten is None:
        return []
    cells: list[Any] = []
    for layer in flatten(include_self=True, recursive=True):
        cell = getattr(layer, "cell", None)
        for obj in (layer, cell, *(getattr(cell, "cells", None) or ())):
            rates = (float(getattr(obj, "dropout", 0.0) or 0.0), float(getattr(obj, "recurrent_dropout", 0.0) or 0.0))
            if isinstance(obj, DropoutRNNCell) and all(obj is not c for c in cells) and max(rates) > 0:
                cells.append(obj)
    return cells


@contextlib.contextmanager
def inference_trace(model: Any) -> Iterator[None]:
    """While tracing ``model(..., training=False)``: its Keras 3 recurrent cells have dropout rates 0, so they draw
    no dropout mask (which writes their seed generator's state even in inference, where the mask is unused).
    The rates are restored afterwards."""
    saved = [(c, c.dropout, c.recurrent_dropout) for c in _dropout_cells(model)]
    try:
        for c, _, _ in saved:
            c.dropout = 0.0
            c.recurrent_dropout = 0.0
        yield
    finally:
        for c, d, r in saved:
            c.dropout = d
            c.recurrent_dropout = r
