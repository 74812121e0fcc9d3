"""The legalization's fast paths decide what their general forms decide.

``validation.validate`` keeps, per op signature (shapes, element types, attributes with their Python types, which
operands are constants), the type row of the checks that passed, and on a second op of that signature checks only
its constants' values again: a bad zero point or shift behind a kept signature must still be refused with the same
message, and attribute values equal but of another type (``True`` / ``1``) must not share a signature.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tf2tosa.errors import InvalidGraphError
from tf2tosa.ir import DType, TensorType
from tf2tosa.tosa import validation

I8, I32 = DType.INT8, DType.INT32


def _rescale_args(shift: int, in_zp: int, out_zp: int, **attrs: Any) -> tuple[Any, ...]:
    x, out = TensorType((1, 4, 4, 8), I32), TensorType((1, 4, 4, 8), I8)
    ops = [x, TensorType((1,), I32), TensorType((1,), I8), TensorType((1,), I32), TensorType((1,), I8)]
    full = {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False, "input_unsigned": False,
            "output_unsigned": False, **attrs}
    consts = [None, np.array([1 << 30], np.int32), np.array([shift], np.int8), np.array([in_zp], np.int32),
              np.array([out_zp], np.int8)]
    return "RESCALE", ops, [out], full, consts


def _message(args: tuple[Any, ...], memo: bool) -> str | None:
    if not memo:
        validation._CHECKED.clear()
    try:
        validation.validate(*args, inferred=True)
    except InvalidGraphError as e:
        return str(e)
    return None


@pytest.mark.parametrize("shift, in_zp, out_zp", [(30, 0, 3), (70, 0, 3), (1, 0, 0), (30, 5, 0), (30, 0, 0)])
def test_kept_signature_still_checks_constant_values(shift: int, in_zp: int, out_zp: int) -> None:
    good = _rescale_args(30, 0, 3)
    args = _rescale_args(shift, in_zp, out_zp)
    fresh = _message(args, memo=False)
    validation._CHECKED.clear()
    assert _message(good, memo=True) is None
    assert validation._checked_key(*args[:4], args[4], False) in validation._CHECKED  # the same signature
    assert _message(args, memo=True) == fresh
    assert (fresh is None) == (shift == 30 and in_zp == 0)


def test_attribute_type_is_part_of_the_signature() -> None:
    t = TensorType((2, 3), I8)
    validation._CHECKED.clear()
    validation.validate("CONCAT", [t, t], [TensorType((4, 3), I8)], {"axis": 0}, [None, None], inferred=True)
    for axis in (False, 0.0):
        with pytest.raises(InvalidGraphError, match="axis"):
            validation.validate("CONCAT", [t, t], [TensorType((4, 3), I8)], {"axis": axis}, [None, None],
                                inferred=True)


def test_signature_needs_plain_shapes_and_attributes() -> None:
    t = TensorType((2, 3), I8)
    assert validation._checked_key("CONCAT", [t], [t], {"axis": 0}, None, False) is not None
    assert validation._checked_key("CONCAT", [TensorType(("n", 3), I8)], [t], {"axis": 0}, None, False) is None
    assert validation._checked_key("CONCAT", [t], [t], {"axis": np.int64(0)}, None, False) is None
    assert validation._checked_key("PAD", [t], [t], {"pads": [1, True]}, None, False) is None
    assert validation._checked_key("PAD", [t], [t], {"pads": [1, 2]}, None, False) is not None
