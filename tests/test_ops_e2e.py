"""Every one-op model: .tflite → TOSA, executor vs LiteRT, tosa-opt validation, Arm reference model."""

from __future__ import annotations

import pytest

pytest.importorskip("tensorflow")

from tests.e2e import check_tflite  # noqa: E402
from tests.modelgen import INPUT_RANGES, ONE_OP_MODELS  # noqa: E402


@pytest.mark.parametrize("name", sorted(ONE_OP_MODELS))
def test_one_op(name: str) -> None:
    lo, hi = INPUT_RANGES.get(name, (-1.0, 1.0))
    res = check_tflite(name, ONE_OP_MODELS[name](), lo=lo, hi=hi)
    assert res.ops, f"{name}: no TOSA ops emitted"
    assert res.float_elements + res.int_elements > 0, f"{name}: no output element was compared with LiteRT"
