"""``verify``'s float verdict past 1e-4: the oracle judged by its distance from the program's fp64 value.

A float model whose outputs cancel (the difference of two near-equal matrix products, as deep nets such as
EfficientNetV2-B0 do on a smaller scale) rounds past 1e-4 x max|ref| in every fp32 runtime: LiteRT's reference
kernels land further from the fp64 value than our fp32 run does.  ``verify`` must pass the correct conversion (it
reported FAIL under the fixed 1e-4 bound alone) and still fail a wrong weight or a broken kernel on the same model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("ai_edge_litert")

import tf2tosa  # noqa: E402
from tf2tosa.executor.registry import KERNELS  # noqa: E402
from tf2tosa.verify.compare import FLOAT_RTOL  # noqa: E402


def _cancelling_bytes(n: int = 256, seed: int = 0) -> bytes:
    from tests import modelgen

    tf = modelgen._tf()
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((n, n)).astype(np.float32)
    w2 = (-w1 + 0.003 * rng.standard_normal((n, n))).astype(np.float32)
    v = rng.standard_normal((n, 16)).astype(np.float32)

    def f(x: Any) -> Any:
        h = tf.matmul(x, w1) + tf.matmul(x, w2)  # ~300x smaller than either product
        return tf.matmul(tf.nn.relu(h), v)

    return modelgen.convert(f, [(1, n)])


@pytest.fixture(scope="module")
def cancelling() -> bytes:
    from tests import modelgen

    return modelgen.cached("verify_cancelling", _cancelling_bytes, {"n": 256, "seed": 0})


def test_rounding_past_the_plain_bound_passes(cancelling: bytes) -> None:
    report = tf2tosa.convert(cancelling).verify(num=3)
    (out,) = report.outputs
    assert out.rel > FLOAT_RTOL, "the model no longer rounds past the plain bound: it tests nothing"
    assert report.ok, report
    assert "fp64" in out.bound and out.mismatches == 0, out.bound
    assert "fp64 evaluation" in str(report)  # the report says what the bound is


def test_matching_nan_and_infinity_are_not_errors() -> None:
    from tf2tosa.verify.compare import compare

    ref = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    assert compare("y", ref.copy(), ref).ok and compare("y", ref.copy(), ref).mismatches == 0
    got = ref.copy()
    got[0] = 0.0  # a NaN the oracle has and we do not
    assert not compare("y", got, ref).ok
    got = ref.copy()
    got[3] = 2.0  # an infinity elsewhere in the output does not make the bound infinite
    assert not compare("y", got, ref).ok
    a64 = ref.astype(np.float64)
    rep = compare("y", ref.copy(), ref, anchor=(a64, 1e-6))  # the fp64 value has the same NaN and infinities
    assert rep.ok and rep.mismatches == 0, rep


def _faulty(cancelling: bytes, fault: Callable[[Any], None]) -> Any:
    model = tf2tosa.convert(cancelling)
    fault(model.graph)
    return model.verify(num=3)


def test_a_wrong_weight_still_fails(cancelling: bytes) -> None:
    def move(g: Any) -> None:
        w = max((op for op in g.ops.values() if op.opcode == "CONST" and op.result.dtype.is_float),
                key=lambda op: np.asarray(op.attrs["values"]).size)
        # a converter bug: a weight scaled by 1 + 1e-3 (a wrong scale); one element moved by 1e-3 of itself hides
        # in this model's rounding (the bound is ~2e-3 x max|ref| here, 24 times its fp32 noise)
        w.attrs["values"] = (np.asarray(w.attrs["values"]) * np.float32(1 + 1e-3)).astype(np.float32)

    report = _faulty(cancelling, move)
    assert not report.ok and "fp64" in report.outputs[0].bound, report


def test_a_broken_kernel_still_fails(cancelling: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = KERNELS["CONV2D"]  # FULLY_CONNECTED lowers to CONV2D

    def bad(op: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
        outs = list(kernel(op, inputs))
        y = np.array(outs[0], copy=True)
        y[..., 0] += y.dtype.type(1e-3 * float(np.abs(y).max()))  # in fp32 and fp64 alike
        return [y, *outs[1:]]

    monkeypatch.setitem(KERNELS, "CONV2D", bad)
    report = _faulty(cancelling, lambda g: None)
    assert not report.ok, report
