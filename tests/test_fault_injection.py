"""The float checks fail on real errors: one injected fault per op family must be caught.

Two kinds of fault, each in one op family at a time:

* a broken kernel: our executor's kernel for the op returns channel 0 of its output off by 1e-3 of the output's
  largest magnitude (in fp32 and in precise mode alike, as a real kernel bug would be).  Both independent oracles must
  object: LiteRT through ``check_tflite``'s fp32 bound, and the Arm reference model through the session hook's
  comparison (``tests/tosa_hook.py``);
* a wrong weight: one element of the op's largest float constant moved by 1e-3 after conversion (a converter
  bug).  The reference model runs the same wrong graph, so LiteRT is the oracle that must object.

The per-op spec check re-evaluates our own graph with our own kernels in fp64, so it sees neither fault when the fault
hits the fp32 and fp64 runs alike; it guards the fp32 noise figure that scales the LiteRT bound (tests/e2e.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import tf2tosa  # noqa: E402
from tests import tosa_hook  # noqa: E402
from tests.e2e import check_tflite, inputs_for  # noqa: E402
from tests.modelgen import INPUT_RANGES, ONE_OP_MODELS  # noqa: E402
from tf2tosa.executor.registry import KERNELS  # noqa: E402
from tf2tosa.verify import tosa_tools  # noqa: E402

#: op family -> (one-op model, TOSA op whose kernel is broken)
KERNEL_FAULTS = {
    "conv": ("conv_2d", "CONV2D"),
    "depthwise": ("depthwise_conv_2d", "DEPTHWISE_CONV2D"),
    "transpose_conv": ("transpose_conv", "TRANSPOSE_CONV2D"),
    "fully_connected": ("fully_connected/no_act", "CONV2D"),
    "matmul": ("batch_matmul", "MATMUL"),
    "elementwise_add": ("add", "ADD"),
    "elementwise_mul": ("mul", "MUL"),
    "avg_pool": ("average_pool_2d", "AVG_POOL2D"),
    "max_pool": ("max_pool_2d", "MAX_POOL2D"),
    "reduction": ("sum", "REDUCE_SUM"),
    "sigmoid": ("logistic", "SIGMOID"),
    "tanh": ("tanh", "TANH"),
    "exp": ("exp", "EXP"),
    "resize": ("resize_bilinear", "RESIZE"),
}

#: op family -> (one-op model, TOSA op whose largest float constant gets one element moved by 1e-3)
WEIGHT_FAULTS = {
    "conv": ("conv_2d", "CONV2D"),
    "depthwise": ("depthwise_conv_2d", "DEPTHWISE_CONV2D"),
    "transpose_conv": ("transpose_conv", "TRANSPOSE_CONV2D"),
    "fully_connected": ("fully_connected/no_act", "CONV2D"),  # no ReLU that could clamp the moved output away
    "prelu": ("prelu", "MUL"),
}


def _broken(kernel: Callable[..., list[np.ndarray]]) -> Callable[..., list[np.ndarray]]:
    def bad(op: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
        outs = list(kernel(op, inputs))
        y = np.array(outs[0], copy=True)
        if y.size and np.issubdtype(y.dtype, np.floating):
            # channel 0 (last axis) moved down by 1e-3 of max|y|: at the same elements in fp32 and fp64, and an
            # activation clamp hides it only where the whole channel is clamped
            y[..., 0] -= y.dtype.type(1e-3 * max(float(np.abs(y).max()), 1.0))
        outs[0] = y
        return outs

    return bad


@pytest.fixture(autouse=True)
def _no_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Faulty runs stay out of .cache/e2e_results.jsonl (the record of real results)."""
    monkeypatch.setenv("TF2TOSA_RECORD", "0")


def _model(name: str) -> tuple[bytes, float, float]:
    lo, hi = INPUT_RANGES.get(name, (-1.0, 1.0))
    return ONE_OP_MODELS[name](), lo, hi


@pytest.mark.parametrize("family", sorted(KERNEL_FAULTS))
def test_broken_kernel_is_caught(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    name, opcode = KERNEL_FAULTS[family]
    tflite, lo, hi = _model(name)
    # sanity: the healthy chain passes, so a failure below is the fault's doing
    check_tflite(f"fault-free/{name}", tflite, num=1, lo=lo, hi=hi)
    monkeypatch.setitem(KERNELS, opcode, _broken(KERNELS[opcode]))
    # "fp32 bound": LiteRT objects; "spec accuracy": the fault hit our fp32 and fp64 runs at different elements, so
    # the fp32 noise that scales the LiteRT bound is not credible, and the per-op spec check (asserted first) says so
    with pytest.raises(AssertionError, match="fp32 bound|spec accuracy"):
        check_tflite(f"fault/{name}", tflite, num=1, lo=lo, hi=hi)
    if not tosa_tools.available():
        pytest.skip("tosa-tools environment not available: the reference-model half of this test needs it")
    model = tf2tosa.convert(tflite)
    assert opcode in {op.opcode for op in model.graph.ops.values()}, f"{name} has no {opcode}"
    data = model.to_bytes()
    entry = tosa_hook.Entry(hashlib.sha256(data).hexdigest(), data, model.profiles, model.extensions, 0)
    feed = [inputs_for(model.graph, 0, lo, hi)[v.name] for v in model.graph.inputs]
    # the reference-model comparison alone (the hook's per-op spec check may see the fault first, by rounding)
    msg = tosa_hook.Recorder()._compare(entry, name, feed, spec=False)
    assert "differs" in msg, f"the reference-model comparison did not see the broken {opcode} kernel: {msg!r}"


@pytest.mark.parametrize("family", sorted(WEIGHT_FAULTS))
def test_perturbed_weight_is_caught(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    name, opcode = WEIGHT_FAULTS[family]
    tflite, lo, hi = _model(name)
    convert = tf2tosa.convert
    moved: list[str] = []

    def faulty_convert(*args: Any, **kwargs: Any) -> Any:
        model = convert(*args, **kwargs)
        g = model.graph
        for op in g.topological_order():
            if op.opcode != opcode:
                continue
            consts = [v for v in op.operands if v.producer is not None and v.producer.opcode == "CONST"
                      and v.dtype.is_float]
            if not consts:
                continue
            w = max(consts, key=lambda v: int(np.prod(v.type.static_shape)))
            cop = w.producer
            arr = np.array(cop.attrs["values"], copy=True)
            arr.reshape(-1)[0] += arr.dtype.type(1e-3)
            cop.attrs["values"] = arr
            moved.append(w.name)
            break
        return model

    monkeypatch.setattr(tf2tosa, "convert", faulty_convert)
    with pytest.raises(AssertionError, match="fp32 bound"):
        check_tflite(f"fault/{name}/weight", tflite, num=1, lo=lo, hi=hi, spec_check=False)
    assert moved, f"no float constant feeds {opcode} in {name}"
