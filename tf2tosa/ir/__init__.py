"""The tf2tosa intermediate representation."""

from .graph import CONST_OPS, INPUT, Graph, Operation, ResultCountError, Value, has_value
from .types import Dim, DType, QuantParams, TensorType, dtype_from_numpy, static_dims

__all__ = ["CONST_OPS", "INPUT", "Dim", "DType", "Graph", "Operation", "QuantParams", "ResultCountError", "TensorType",
           "Value", "dtype_from_numpy", "has_value", "static_dims"]
