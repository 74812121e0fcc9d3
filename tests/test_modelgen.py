"""The test-model builders emit the op they are named after, and LiteRT runs every one of them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import requires_litert
from modelgen import INPUT_RANGES, ONE_OP_MODELS, ONE_OP_SPECS, REPO, quant_unsupported_reason

from tf2tosa.verify.litert import (
    LiteRTWorker,
    input_details,
    model_op_names,
    output_details,
    random_inputs,
    run_tflite,
    run_tflite_many,
)

NAMES = sorted(ONE_OP_MODELS)
SAMPLES = REPO / "models" / "samples"


@pytest.mark.parametrize("name", NAMES)
def test_one_op_model_contains_op(name: str, one_op_models: dict[str, bytes]) -> None:
    spec = ONE_OP_SPECS[name]
    ops = model_op_names(one_op_models[name])
    assert spec.tfl_op in ops, f"{name}: expected {spec.tfl_op}, got {ops}"
    allowed = {spec.tfl_op} | spec.extra_ops
    assert set(ops) <= allowed, f"{name}: unexpected ops {set(ops) - allowed}"


@requires_litert
@pytest.mark.parametrize("name", NAMES)
def test_one_op_model_runs(name: str, one_op_models: dict[str, bytes], litert_worker: LiteRTWorker) -> None:
    model = one_op_models[name]
    x = random_inputs(model, seed=0, ranges=INPUT_RANGES.get(name))
    outs = output_details(model)
    fast = litert_worker.run(model, x)
    ref = litert_worker.run(model, x, reference_kernels=True)
    assert list(fast) == [o["name"] for o in outs] == list(ref)
    for o in outs:
        a, b = fast[o["name"]], ref[o["name"]]
        assert a.dtype == np.dtype(o["dtype"]) and a.shape == b.shape
        if a.dtype.kind == "f":
            assert np.isfinite(a).all(), name
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(a, b, err_msg=name)


def test_input_details_and_random_inputs(one_op_models: dict[str, bytes]) -> None:
    model = one_op_models["gather/indices_input"]
    d = input_details(model)
    assert [x["dtype"] for x in d] == ["float32", "int32"]
    x1 = random_inputs(model, seed=3, ranges=INPUT_RANGES["gather/indices_input"])
    x2 = random_inputs(d, seed=3, ranges=INPUT_RANGES["gather/indices_input"])
    for k in x1:
        np.testing.assert_array_equal(x1[k], x2[k])
    idx = x1[d[1]["name"]]
    assert idx.dtype == np.int32 and idx.min() >= 0 and idx.max() < 6
    assert np.abs(x1[d[0]["name"]]).max() <= 6


@pytest.fixture(scope="module")
def one_op_models_int8(tflite_model: Callable[..., bytes]) -> dict[str, bytes]:
    return {n: tflite_model(n, quant="int8") for n in NAMES if quant_unsupported_reason(n, "int8") is None}


@requires_litert
@pytest.mark.parametrize("name", NAMES)
def test_one_op_model_int8_runs(name: str, one_op_models_int8: dict[str, bytes],
                                litert_worker: LiteRTWorker) -> None:
    reason = quant_unsupported_reason(name, "int8")
    if reason is not None:
        pytest.skip(reason)
    model = one_op_models_int8[name]
    spec = ONE_OP_SPECS[name]
    assert spec.tfl_op in model_op_names(model)
    x = random_inputs(model, seed=0, ranges=INPUT_RANGES.get(name))
    out = litert_worker.run(model, x)
    for o in output_details(model):
        assert out[o["name"]].dtype == np.dtype(o["dtype"])
        assert out[o["name"]].shape == tuple(o["shape"])


def _sensitivity(model: bytes) -> float:
    """Largest output difference between two random inputs, as a fraction of the output magnitude."""
    a, b = run_tflite_many(model, [random_inputs(model, seed=s) for s in (0, 1)])
    return max(float(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)).max())
               / (float(np.abs(a[k].astype(np.float64)).max()) + 1e-12) for k in a)


@requires_litert
@pytest.mark.parametrize("name", ["small_cnn", "mlp", "depthwise_net", "mobilenet_v2_small"])
def test_networks_run_and_depend_on_input(name: str, tflite_model: Callable[..., bytes]) -> None:
    model = tflite_model(name)
    assert _sensitivity(model) > 0.2, name


@requires_litert
@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.tflite")), ids=lambda p: p.name)
def test_sample_models(path: Path) -> None:
    assert path.stat().st_size < 100_000
    outs = run_tflite(path, random_inputs(path, seed=0))
    assert outs and all(np.isfinite(v.astype(np.float64)).all() for v in outs.values())
