"""Numpy executor for TOSA 1.0 graphs: runs every operator of the specification's pseudo-code.

Public API: :func:`run` (raises :class:`ExecutionError`), :func:`run_checked` (returns the spec's graph
result, :class:`RunResult`: VALID / ERROR / UNPREDICTABLE), :func:`evaluate_op`, :func:`run_with_profile`,
and the kernel registry :data:`KERNELS` (spec op name -> kernel).  Float accuracy checks live in
:mod:`.compliance`.
"""

from __future__ import annotations

from . import (  # noqa: F401  (importing registers the kernels)
    activation,
    comparison,
    control_flow,
    data_layout,
    data_nodes,
    elementwise_binary,
    elementwise_ternary,
    elementwise_unary,
    image,
    reduction,
    scatter_gather,
    shape,
    tensor_ops,
    type_conversion,
    variable,
)
from .registry import (
    ERROR,
    KERNELS,
    UNPREDICTABLE,
    VALID,
    ErrorIfError,
    ExecutionError,
    Kernel,
    UnpredictableError,
    kernel,
)
from .runner import RunResult, evaluate_op, run, run_checked, run_with_profile, static_check

__all__ = ["KERNELS", "ERROR", "UNPREDICTABLE", "VALID", "ErrorIfError", "ExecutionError", "Kernel", "RunResult",
           "UnpredictableError", "kernel", "evaluate_op", "run", "run_checked", "run_with_profile", "static_check"]
