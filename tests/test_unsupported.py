"""Ops without a TOSA 1.0 lowering: one error listing them all (counts and reasons), and the ``custom_ops`` fallback
that keeps them as TOSA CUSTOM operators so the rest of the graph converts.

tosa-opt accepts CUSTOM operators (``--tosa-validate="strict-op-spec-alignment"`` passes: the 1.0 spec allows
CUSTOM in any profile, S10366); the executor and the Arm reference model cannot run them (implementation defined),
so such a graph is checked structurally, and running it raises an error naming the operator.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import tf2tosa
from tf2tosa.converter.tflite import load_tflite
from tf2tosa.legalizations.tfl_custom import CUSTOM_DOMAIN, UNLOWERABLE, emit_custom, unsupported_reason
from tf2tosa.tosa.builder import Builder

#: the pipeline calls tfl_custom.emit_custom when ConvertOptions.extra["custom_ops"] is set, and reports
#: tfl_custom.unsupported_reason for ops without a rule

#: tfl op -> how many the model has
EXPECTED = {"tfl.non_max_suppression_v4": 2, "tfl.non_max_suppression_v5": 1, "tfl.unique": 1,
            "tfl.random_uniform": 1, "tfl.where": 1}


def _build() -> bytes:
    from tests.modelgen import _tf, convert

    tf = _tf()

    def f(boxes: Any, scores: Any, x: Any) -> Any:
        i1, n1 = tf.raw_ops.NonMaxSuppressionV4(boxes=boxes, scores=scores, max_output_size=3, iou_threshold=0.5,
                                                score_threshold=0.0, pad_to_max_output_size=True)
        i1b, _ = tf.raw_ops.NonMaxSuppressionV4(boxes=boxes, scores=scores * 0.5, max_output_size=4,
                                                iou_threshold=0.3, score_threshold=0.1, pad_to_max_output_size=True)
        i2, _, _ = tf.raw_ops.NonMaxSuppressionV5(boxes=boxes, scores=scores * 2.0, max_output_size=2,
                                                  iou_threshold=0.5, score_threshold=0.0, soft_nms_sigma=0.0,
                                                  pad_to_max_output_size=True)
        u = tf.unique(tf.cast(x * 3.0, tf.int32))[0]
        r = tf.random.uniform([2, 3], seed=1)
        w = tf.where(x > 0.0)
        return i1 + n1, i1b, i2 + 1, tf.reduce_sum(u), r + 1.0, w, x * 2.0

    return convert(f, [(6, 4), (6,), (8,)])


@pytest.fixture(scope="module")
def model() -> bytes:
    from tests.modelgen import cached

    try:
        return cached("unsupported/mixed", _build, {}, key="v1")
    except ModuleNotFoundError as e:  # building needs TensorFlow; a cached model does not
        pytest.skip(f"cannot build the model: {e}")


def test_one_error_lists_every_unsupported_op(model: bytes) -> None:
    with pytest.raises(tf2tosa.UnsupportedOpsError) as ei:
        tf2tosa.convert(model)
    err = ei.value
    for name, count in EXPECTED.items():
        assert name in err.reasons, f"{name} missing from {sorted(err.reasons)}"
        n, why = err.reasons[name]
        assert n == count, f"{name}: counted {n}, expected {count}"
        assert f"{name} x{count}: " in str(err)
    assert all(why != "no legalization rule" for name, (_, why) in err.reasons.items() if name in EXPECTED)
    assert "depends on the data" in err.reasons["tfl.unique"][1]
    assert "data-dependent loop" in err.reasons["tfl.non_max_suppression_v4"][1]
    assert "RNG" in err.reasons["tfl.random_uniform"][1]
    assert "output size depends on the data" in err.reasons["tfl.where"][1]


def test_unsupported_reasons_table() -> None:
    g = load_tflite(_custom_model("TFLite_Detection_PostProcess"))
    op = next(o for o in g.topological_order() if o.name == "tfl.custom")
    assert "non-max suppression" in unsupported_reason(op)
    assert all(k.startswith("tfl.") and v for k, v in UNLOWERABLE.items())


def _custom_model(code: str, options: bytes = b"\x07\x00") -> bytes:
    from tests.modelgen_more import CUSTOM, Op, T, tflite_model

    return tflite_model([T("x", (2, 3)), T("y", (2, 3)), T("z", (2, 3))],
                        [Op(CUSTOM, [0], [1], code, options), Op(0, [1, 0], [2])], [0], [2])


def test_emit_custom_keeps_inputs_outputs_and_options() -> None:
    """emit_custom on its own (no pipeline involved): operands, static result types, attributes, meta."""
    g = load_tflite(_custom_model("MyOp", b"\x01\x02\x03"))
    op = next(o for o in g.topological_order() if o.name == "tfl.custom")
    b = Builder(g, location=op.location)
    (y,) = emit_custom(b, op, "no lowering")
    custom = y.producer
    assert custom is not None and custom.name == "tosa.CUSTOM"
    assert custom.attrs == {"operator_name": "MyOp", "domain_name": CUSTOM_DOMAIN,
                            "implementation_attrs": b"\x01\x02\x03"}
    assert [v.name for v in custom.operands] == [op.operands[0].name]
    assert y.type.static_shape == (2, 3) and y.dtype.value == "fp32"
    assert g.record.custom_ops == ["MyOp"]


def test_custom_ops_keep_the_graph_usable(model: bytes, tmp_path: Any) -> None:
    m = tf2tosa.convert(model, custom_ops=True)
    g = m.graph
    customs = [op for op in g.topological_order() if op.name == "tosa.CUSTOM"]
    names = sorted(op.attrs["operator_name"] for op in customs)
    assert names == sorted(n for n, k in EXPECTED.items() for _ in range(k))
    assert sorted(g.record.custom_ops) == names
    for op in customs:
        assert op.attrs["domain_name"] == CUSTOM_DOMAIN
        info = json.loads(op.attrs["implementation_attrs"])
        assert info["reason"] and "attrs" in info
        assert all(r.type.is_static for r in op.results)
    nms = next(op for op in customs if op.attrs["operator_name"] == "tfl.non_max_suppression_v4")
    assert [list(r.shape) for r in nms.results] == [[3], []]
    unique = next(op for op in customs if op.attrs["operator_name"] == "tfl.unique")
    assert json.loads(unique.attrs["implementation_attrs"])["placeholder_shapes"] == [0]
    # everything else was lowered
    assert all(op.name.startswith("tosa.") for op in g.topological_order())
    # the flatbuffer round-trips the CUSTOM attributes
    path = tmp_path / "m.tosa"
    m.save(str(path))
    back = tf2tosa.load(str(path))
    got = sorted((op.attrs["operator_name"], bytes(op.attrs["implementation_attrs"]))
                 for op in back.graph.topological_order() if op.name == "tosa.CUSTOM")
    assert got == sorted((op.attrs["operator_name"], bytes(op.attrs["implementation_attrs"])) for op in customs)
    assert "tosa.custom" in m.to_mlir()


def test_custom_ops_validate_but_do_not_run(model: bytes) -> None:
    from tf2tosa.verify import tosa_tools

    m = tf2tosa.convert(model, custom_ops=True)
    if tosa_tools.available():
        ok, msg = tosa_tools.validate(m.to_bytes(), m.profiles, m.extensions)
        assert ok, msg
    inputs = {v.name: np.zeros(v.type.static_shape, np.float32) for v in m.graph.inputs}
    with pytest.raises(Exception, match="CUSTOM operator '.*' is implementation defined"):
        m.run(inputs)


def test_custom_ops_for_unknown_custom_code() -> None:
    m = tf2tosa.convert(_custom_model("MyOp", b"\x05"), custom_ops=True)
    (op,) = [o for o in m.graph.topological_order() if o.name == "tosa.CUSTOM"]
    assert op.attrs["operator_name"] == "MyOp" and op.attrs["implementation_attrs"] == b"\x05"
    assert "tosa.ADD" in m.graph.op_counts()


def test_without_custom_ops_nothing_is_emitted(model: bytes) -> None:
    with pytest.raises(tf2tosa.UnsupportedOpsError):
        tf2tosa.convert(model, custom_ops=False)
