"""The TOSA 1.0 operator catalogue (``optable``: the table; ``validation``: its checks), its shape rules
(``shapes``), profile/extension and level analysis (``profiles``) and the op builder (``builder``)."""

from __future__ import annotations

from . import optable, profiles, shapes, validation
from .optable import OPS, Arg, Attr, OpSpec, TypeRow, get
from .validation import infer_result_types, match_row, validate

__all__ = ["OPS", "Arg", "Attr", "OpSpec", "TypeRow", "get", "infer_result_types", "match_row", "optable",
           "profiles", "shapes", "validate", "validation"]
