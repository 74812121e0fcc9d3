"""Numpy executor for TOSA 1.0 graphs: runs every operator of the specification's pseudo-code.

Public API: :func:`run`, :func:`evaluate_op`, :func:`run_with_profile`, :class:`ExecutionError`,
and the kernel registry :data:`KERNELS` (spec op name -> kernel).
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
from .registry import KERNELS, ExecutionError, Kernel, kernel
from .runner import evaluate_op, run, run_with_profile

__all__ = ["KERNELS", "ExecutionError", "Kernel", "kernel", "evaluate_op", "run", "run_with_profile"]
