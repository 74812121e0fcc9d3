"""The TOSA 1.0 operator catalogue (``catalogue``), its shape rules (``shapes``), profile/extension and
level analysis (``profiles``) and the op builder (``builder``)."""

from __future__ import annotations

from . import catalogue, profiles, shapes
from .catalogue import OPS, Arg, Attr, OpSpec, TypeRow, get, infer_result_types, match_row, validate

__all__ = ["OPS", "Arg", "Attr", "OpSpec", "TypeRow", "catalogue", "get", "infer_result_types", "match_row",
           "profiles", "shapes", "validate"]
