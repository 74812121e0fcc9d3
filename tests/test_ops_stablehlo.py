"""StableHLO builtins in a ``.tflite`` (``tfl.stablehlo_*``, from JAX / StableHLO exports), one row per op and type:
the hand-built one-op model converted, run by our executor and compared with LiteRT (reference kernels) on seeded
inputs plus the IEEE edge values, every element bit for bit; ``check_tflite`` adds the chain's own checks (tosa-opt,
the Arm reference model, the spec's accuracy bound)."""

from __future__ import annotations

import numpy as np
import pytest

import tf2tosa
from tests.modelgen_more import F32, I32, Op, T, tflite_model
from tf2tosa.errors import UnsupportedOpsError

pytest.importorskip("ai_edge_litert")

#: op name → (BuiltinOperator code, number of operands, element types LiteRT and the rule support)
TABLE: dict[str, tuple[int, int, tuple[str, ...]]] = {
    "stablehlo_add": (163, 2, (F32, I32)),
}
CASES = [(name, dt) for name, (_, _, dts) in TABLE.items() for dt in dts]
SHAPE = (4, 4, 5)


def _model(name: str, dtype: str) -> bytes:
    code, arity, _ = TABLE[name]
    tensors = [T(f"x{i}", SHAPE, dtype) for i in range(arity)] + [T("out", SHAPE, dtype)]
    return tflite_model(tensors, [Op(code, list(range(arity)), [arity])], list(range(arity)), [arity])


def _inputs(dtype: str, arity: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    if dtype == I32:
        return {f"x{i}": rng.integers(-(1 << 30), 1 << 30, SHAPE).astype(np.int32) for i in range(arity)}
    out = {f"x{i}": (rng.standard_normal(SHAPE) * 10.0 ** rng.integers(-3, 4, SHAPE)).astype(np.float32)
           for i in range(arity)}
    edge = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 3.4e38, -3.4e38], np.float32)
    for i in range(arity):  # every pair of edge values somewhere in the first rows
        a = np.tile(edge, len(edge)) if i == 0 else np.repeat(edge, len(edge))
        out[f"x{i}"].reshape(-1)[: a.size] = a
    return out


@pytest.mark.parametrize("name,dtype", CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_stablehlo_op_matches_litert_bit_for_bit(name: str, dtype: str) -> None:
    from tests.e2e import check_tflite
    from tf2tosa.verify.litert import run_tflite_many

    data = _model(name, dtype)
    model = tf2tosa.convert(data)
    assert {op.name for op in model.graph.ops.values()} - {"tosa.CONST"} == {"tosa.ADD"}
    arity = TABLE[name][1]
    sets = [_inputs(dtype, arity, seed) for seed in range(3)]
    refs = run_tflite_many(data, sets, reference_kernels=True)
    for s, ref in zip(sets, refs):
        got, want = model.run(s)["out"], ref["out"]
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    res = check_tflite(f"stablehlo/{name}/{dtype}", data, reference_kernels=True)
    assert res.litert_mismatches == 0


def test_stablehlo_add_refuses_other_types() -> None:
    """A type the rule does not lower (int16, where TOSA's ADD has no i16 mode) is refused with its reason."""
    data = tflite_model([T("x0", SHAPE, "int16"), T("x1", SHAPE, "int16"), T("out", SHAPE, "int16")],
                        [Op(163, [0, 1], [2])], [0, 1], [2])
    with pytest.raises(UnsupportedOpsError, match="tfl.stablehlo_add x1: tfl.stablehlo_add on i16 not supported"):
        tf2tosa.convert(data)
