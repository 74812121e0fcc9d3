"""``take_every`` (lowering/layout.py), the strided selection shared by the tf, tfl and nnef rules: elements
``phase + k·stride`` along one axis, judged against numpy's basic slicing ``x[phase::stride][:count]``, in our
executor and in Arm's reference model — including phases of a stride or more (they used to emit an out-of-range
SLICE)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tf2tosa.api import TosaModel
from tf2tosa.errors import Unsupported
from tf2tosa.executor import run
from tf2tosa.ir import DType, Graph, TensorType
from tf2tosa.legalizations.lowering.layout import take_every
from tf2tosa.tosa.builder import Builder
from tf2tosa.verify import tosa_tools

SHAPE = (2, 11, 3)


@pytest.mark.parametrize("count,stride,phase", [
    (3, 3, 0), (3, 3, 2), (3, 3, 3), (3, 3, 4), (2, 4, 5), (4, 2, 3), (1, 5, 7), (5, 1, 6), (3, 2, 6), (2, 3, 7)])
def test_take_every_matches_numpy_slicing(tmp_path: Path, count: int, stride: int, phase: int) -> None:
    x = np.arange(np.prod(SHAPE), dtype=np.int32).reshape(SHAPE)
    want = x[:, phase::stride][:, :count]
    assert want.shape[1] == count  # the case is inside the axis
    g = Graph()
    v = g.add_input("x", TensorType(SHAPE, DType.INT32))
    g.outputs = [take_every(Builder(g, fold=False), v, 1, count, stride, phase)]
    model = TosaModel(g)
    model.save(tmp_path / "take_every.tosa")  # validated by the session's .tosa hook too
    np.testing.assert_array_equal(list(run(g, [x]).values())[0], want)
    if tosa_tools.available():
        np.testing.assert_array_equal(list(tosa_tools.run_reference(model.to_bytes(), [x]).values())[0], want)


def test_take_every_outside_the_axis_is_refused() -> None:
    g = Graph()
    v = g.add_input("x", TensorType(SHAPE, DType.INT32))
    with pytest.raises(Unsupported, match="take_every"):
        take_every(Builder(g, fold=False), v, 1, 3, 4, 3)  # 3 + 2·4 = 11 is past the last index 10
