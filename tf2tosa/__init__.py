"""tf2tosa: TensorFlow Lite (and TensorFlow) models to TOSA 1.0, proven by running them.

>>> import tf2tosa
>>> model = tf2tosa.convert("model.tflite")          # doctest: +SKIP
>>> model.save("model.tosa"); print(model.to_mlir())  # doctest: +SKIP
>>> model.verify()                                     # doctest: +SKIP
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .api import TosaModel, convert, convert_dynamic, load, specialize
from .ir import Operation as _Operation
from .options import ConvertOptions
from .tosa.builder import set_evaluator as _set_evaluator


def _evaluate_op(op: _Operation, operands: list[np.ndarray]) -> Any:
    """The executor's ``evaluate_op``, imported on the first fold: a conversion that folds nothing (and the
    command line's start-up) does not load the executor's kernels."""
    from .executor import evaluate_op

    return evaluate_op(op, operands)


_set_evaluator(_evaluate_op)  # the builder folds constant ops with the executor's kernels (no tosa -> executor import)

from . import verify as _verify_package  # noqa: E402,F401  (see below)
from .errors import (  # noqa: E402
    ConversionError,
    InputError,
    InvalidGraphError,
    MissingExtraError,
    ModelLoadError,
    UnsupportedOpsError,
)

__version__ = "0.1.0"

# The subpackage tf2tosa.verify is imported above, before the function verify() below takes its name: importing
# the subpackage later (tf2tosa.verify.compare, by a verification) would otherwise rebind tf2tosa.verify to it.


def run(model: TosaModel, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Run a converted model in the embedded executor."""
    return model.run(inputs)


def verify(source: Any, *, oracle: str | None = None, **kwargs: Any) -> Any:
    """Convert ``source`` and compare it with its source runtime; returns the report.

    ``oracle`` defaults to ``"ref"`` (LiteRT's reference kernels) for a .tflite and ``"tensorflow"`` for a
    TensorFlow model; ``"optimized"`` picks LiteRT's default kernels.  The other keywords are :func:`convert`'s
    (:class:`ConvertOptions`) and :meth:`TosaModel.verify`'s (``trust_model`` goes to both); any other name is a
    :class:`TypeError` naming the closest valid ones.
    """
    import inspect

    from .options import check_keywords

    checks = [p for p in inspect.signature(TosaModel.verify).parameters if p not in ("self", "oracle")]
    check_keywords("verify", kwargs, [*ConvertOptions.names(), *checks])
    options = {k: v for k, v in kwargs.items() if k in ConvertOptions.names()}
    return convert(source, **options).verify(oracle=oracle, **{k: v for k, v in kwargs.items() if k in checks})


__all__ = ["ConversionError", "ConvertOptions", "InputError", "InvalidGraphError", "MissingExtraError",
           "ModelLoadError", "TosaModel", "UnsupportedOpsError", "__version__", "convert", "convert_dynamic", "load",
           "run", "specialize", "verify"]
