"""tf2tosa: TensorFlow Lite (and TensorFlow) models to TOSA 1.0, proven by running them.

>>> import tf2tosa
>>> model = tf2tosa.convert("model.tflite")          # doctest: +SKIP
>>> model.save("model.tosa"); print(model.to_mlir())  # doctest: +SKIP
>>> model.verify()                                     # doctest: +SKIP
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .api import TosaModel, convert, load, specialize
from .ir import Operation as _Operation
from .tosa.builder import set_evaluator as _set_evaluator


def _evaluate_op(op: _Operation, operands: list[np.ndarray]) -> Any:
    """The executor's ``evaluate_op``, imported on the first fold: a conversion that folds nothing (and the
    command line's start-up) does not load the executor's kernels."""
    from .executor import evaluate_op

    return evaluate_op(op, operands)


_set_evaluator(_evaluate_op)  # the builder folds constant ops with the executor's kernels (no tosa -> executor import)

from .errors import (  # noqa: E402
    ConversionError,
    InputError,
    InvalidGraphError,
    MissingExtraError,
    ModelLoadError,
    UnsupportedOpsError,
)

__version__ = "0.1.0"


def run(model: TosaModel, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Run a converted model in the embedded executor."""
    return model.run(inputs)


def verify(source: Any, *, oracle: str | None = None, **kwargs: Any) -> Any:
    """Convert ``source`` and compare it with its source runtime; returns the report.

    ``oracle`` defaults to ``"ref"`` (LiteRT's reference kernels) for a .tflite and ``"tensorflow"`` for a
    TensorFlow model; ``"optimized"`` picks LiteRT's default kernels.  Other keywords go to ``TosaModel.verify``.
    """
    return convert(source).verify(oracle=oracle, **kwargs)


__all__ = ["ConversionError", "InputError", "InvalidGraphError", "MissingExtraError", "ModelLoadError", "TosaModel",
           "UnsupportedOpsError", "__version__", "convert", "load", "run", "specialize", "verify"]
