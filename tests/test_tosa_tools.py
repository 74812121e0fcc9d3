"""The harness around Arm's TOSA tools (tosa-opt validation, reference model runs)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tf2tosa.ir.graph import Graph
from tf2tosa.ir.types import DType, TensorType
from tf2tosa.serializer import save, to_bytes
from tf2tosa.serializer.mlir import to_mlir
from tf2tosa.verify import tosa_tools

needs_tools = pytest.mark.skipif(not tosa_tools.available(), reason="tosa-tools environment not available")


def add_graph(dtype: DType = DType.FP32) -> Graph:
    g = Graph()
    a = g.add_input("a", TensorType((2, 3), dtype))
    b = g.add_input("b", TensorType((1, 3), dtype))
    g.outputs = [g.add_op("tosa.ADD", [a, b], [a.type], result_names=["sum"]).result]
    return g


def test_target_option_names() -> None:
    opt = tosa_tools.target_option(["PRO-FP", "pro_int"], ["EXT-INT16", "doubleround", "INT4"])
    assert opt == ("--tosa-attach-target=specification_version=1.0 profiles=pro_fp,pro_int "
                   "extensions=doubleround,int16,int4 level=8k")
    assert "profiles=pro_fp,pro_int" in tosa_tools.target_option()
    with pytest.raises(ValueError):
        tosa_tools.target_option(["PRO-XYZ"])


def test_available_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv(tosa_tools.ENV_VAR, os.path.join(str(tmp_path), "nowhere"))
    assert not tosa_tools.available()
    with pytest.raises(tosa_tools.ToolError, match="not found"):
        tosa_tools.validate(b"")


@needs_tools
@pytest.mark.tosa_unchecked("writes invalid graphs on purpose, to see tosa-opt reject them")
def test_validate_accepts_and_rejects() -> None:
    data = to_bytes(add_graph())
    assert tosa_tools.validate(data, ["PRO-FP"], []) == (True, "")
    ok, msg = tosa_tools.validate(data, ["PRO-INT"], [])  # fp32 ADD is not in PRO-INT
    assert not ok and "pro_fp" in msg
    ok, msg = tosa_tools.validate(to_bytes(add_graph(DType.INT8)), ["PRO-INT", "PRO-FP"], [])  # i8 ADD: no
    assert not ok and "tosa.add" in msg
    ok, msg = tosa_tools.validate(b"this is not a flatbuffer", ["PRO-FP"], [])
    assert not ok and msg


@needs_tools
def test_validate_path_and_mlir(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "add.tosa")
    save(add_graph(), path)
    assert tosa_tools.validate(path, ["PRO-FP"])[0]
    assert tosa_tools.validate_mlir(to_mlir(add_graph()), ["PRO-FP"]) == (True, "")
    ok, msg = tosa_tools.validate_mlir("func.func @main() { bogus }", ["PRO-FP"])
    assert not ok and "error" in msg


@needs_tools
def test_run_reference_by_name_and_order() -> None:
    data = to_bytes(add_graph())
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([[0.5, -1.0, 2.0]], np.float32)
    out = tosa_tools.run_reference(data, {"b": b, "a": a})
    assert list(out) == ["sum"]
    np.testing.assert_array_equal(out["sum"], a + b)
    np.testing.assert_array_equal(tosa_tools.run_reference(data, [a, b])["sum"], a + b)
    # float64 inputs are converted to the graph's fp32
    np.testing.assert_array_equal(tosa_tools.run_reference(data, [a.astype(np.float64), b])["sum"], a + b)
    with pytest.raises(tosa_tools.ToolError, match="shape"):
        tosa_tools.run_reference(data, [a[:1], b])
    with pytest.raises(tosa_tools.ToolError, match="missing"):
        tosa_tools.run_reference(data, {"a": a})


@needs_tools
def test_run_reference_bf16_and_bool_io() -> None:
    import ml_dtypes

    g = Graph()
    x = g.add_input("x", TensorType((4,), DType.BF16))
    y = g.add_input("y", TensorType((4,), DType.BF16))
    s = g.add_op("tosa.ADD", [x, y], [x.type], result_names=["s"]).result
    gt = g.add_op("tosa.GREATER", [x, y], [TensorType((4,), DType.BOOL)], result_names=["gt"]).result
    g.outputs = [s, gt]
    xv = np.array([1.5, -2.0, 3.0, 0.25], ml_dtypes.bfloat16)
    yv = np.array([0.5, 1.0, 4.0, 0.25], ml_dtypes.bfloat16)
    data = to_bytes(g)
    assert tosa_tools.validate(data, ["PRO-FP"], ["EXT-BF16"])[0]
    out = tosa_tools.run_reference(data, {"x": xv, "y": yv})
    assert out["s"].dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out["s"].astype(np.float32), [2.0, -1.0, 7.0, 0.5])
    np.testing.assert_array_equal(out["gt"], [True, False, False, False])


@needs_tools
@pytest.mark.tosa_unchecked("writes an invalid RESHAPE on purpose, to see the reference model reject it")
def test_reference_model_failure_is_reported() -> None:
    g = Graph()
    x = g.add_input("x", TensorType((2, 3), DType.FP32))
    shape = g.add_const(np.array([7], np.int64), DType.SHAPE, name="s", op_name="tosa.CONST_SHAPE")
    g.outputs = [g.add_op("tosa.RESHAPE", [x, shape], [TensorType((7,), DType.FP32)]).result]  # 6 != 7 elements
    with pytest.raises(tosa_tools.ReferenceModelError) as info:
        tosa_tools.run_reference(to_bytes(g), {"x": np.zeros((2, 3), np.float32)})
    assert info.value.status != "TOSA_VALID"
