"""The TOSA 1.0 operator catalogue: the table (:mod:`.optable`) and its validation (:mod:`.validation`).

This module re-exports both, so ``from tf2tosa.tosa.catalogue import X`` works for either half; the
table's readers that need no validation (serializer, MLIR printer, executor binding) import
:mod:`.optable` directly.
"""

from __future__ import annotations

from .optable import (
                      ACC_TYPES,
                      ATTR_KINDS,
                      ENUMS,
                      OPS,
                      TABLE_SIZE,
                      ZP,
                      A,
                      Arg,
                      Attr,
                      L,
                      OpSpec,
                      R,
                      S,
                      T,
                      TypeRow,
                      bind_operands,
                      get,
)
from .validation import _expected, candidate_rows, check_attrs, infer_result_types, match_row, validate, validate_op

__all__ = ["Arg", "Attr", "TypeRow", "OpSpec", "OPS", "get", "match_row", "infer_result_types", "validate",
           "bind_operands", "ACC_TYPES", "TABLE_SIZE", "ENUMS", "ATTR_KINDS", "A", "L", "R", "S", "T", "ZP",
           "_expected", "candidate_rows", "check_attrs", "validate_op"]
