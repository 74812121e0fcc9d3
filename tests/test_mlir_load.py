"""Reading MLIR back: ``tf2tosa.load("m.mlir")`` serializes the text with Arm's tosa-opt and reads the flatbuffer.
Oracle: the model the text was printed from (same ops, same outputs on the same inputs); the upstream keyword syntax
goes through IREE's iree-opt first."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tf2tosa
from tf2tosa.errors import ModelLoadError
from tf2tosa.verify import iree, tosa_tools
from tf2tosa.verify.compare import random_inputs

pytestmark = pytest.mark.skipif(not tosa_tools.available(), reason="tosa-tools (tosa-opt) is not installed")
SAMPLES = Path(__file__).resolve().parents[1] / "models" / "samples"


@pytest.mark.parametrize("syntax", ["generic", "upstream"])
@pytest.mark.parametrize("name", ["small_cnn_int8", "mlp_uint8io", "small_cnn_f32"])
def test_load_mlir_round_trip(name: str, syntax: str, tmp_path: Path) -> None:
    if syntax == "upstream" and not iree.available():
        pytest.skip("IREE is not installed (reading the upstream syntax needs iree-opt)")
    m = tf2tosa.convert(str(SAMPLES / f"{name}.tflite"))
    m.save(tmp_path / "m.tosa", mlir=tmp_path / "m.mlir", mlir_syntax=syntax)
    back = tf2tosa.load(str(tmp_path / "m.mlir"))
    assert dict(back.graph.op_counts()) == dict(m.graph.op_counts())
    assert [v.name for v in back.graph.inputs] == [v.name for v in m.graph.inputs]
    assert [v.name for v in back.graph.outputs] == [v.name for v in m.graph.outputs]
    feed = random_inputs(m.graph, 0)
    ours, theirs = m.run(feed), back.run(feed)
    assert all(np.array_equal(ours[k], theirs[k]) for k in ours)


def test_load_bad_mlir_is_one_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text("module { func.func @main() { \"tosa.nope\"() : () -> () return } }")
    with pytest.raises(ModelLoadError, match="not TOSA-dialect MLIR") as exc:
        tf2tosa.load(str(bad))
    assert exc.value.file == str(bad) and "\n" not in str(exc.value)
    with pytest.raises(ModelLoadError, match="cannot read"):
        tf2tosa.load(str(tmp_path / "missing.mlir"))
