"""Recurrent, FFT/complex and sparse-weight TFLite ops: .tflite → TOSA, executor vs LiteRT, tosa-opt validation,
Arm reference model (``tests/modelgen_rnn.py`` builds the models), plus unit tests of the densification
algorithm."""

from __future__ import annotations

import numpy as np
import pytest

from tf2tosa.legalizations.tfl_sparse import densify

# ------------------------------------------------------------------------------------------ densify (pure)


def _csr_2d(dense: np.ndarray) -> tuple[np.ndarray, dict[str, object]]:
    """TFLite's encoding of a 2-D tensor: rows DENSE, columns SPARSE_CSR."""
    segs, idx, vals = [0], [], []
    for row in dense:
        nz = np.flatnonzero(row)
        idx += nz.tolist()
        vals += row[nz].tolist()
        segs.append(len(idx))
    meta = {"traversal_order": [0, 1], "block_map": [],
            "dim_metadata": [{"format": "DENSE", "dense_size": dense.shape[0], "array_segments": None,
                              "array_indices": None},
                             {"format": "SPARSE_CSR", "dense_size": 0, "array_segments": segs,
                              "array_indices": idx}]}
    return np.asarray(vals, dense.dtype), meta


def _block_1x4(dense: np.ndarray) -> tuple[np.ndarray, dict[str, object]]:
    """Rows DENSE, 1x4 blocks of columns SPARSE_CSR, the block's 4 values DENSE (FULLY_CONNECTED's format)."""
    rows, cols = dense.shape
    blocks = dense.reshape(rows, cols // 4, 4)
    segs, idx, vals = [0], [], []
    for r in range(rows):
        for k in range(cols // 4):
            if np.any(blocks[r, k]):
                idx.append(k)
                vals += blocks[r, k].tolist()
        segs.append(len(idx))
    meta = {"traversal_order": [0, 1, 2], "block_map": [1],
            "dim_metadata": [{"format": "DENSE", "dense_size": rows},
                             {"format": "SPARSE_CSR", "array_segments": segs, "array_indices": idx},
                             {"format": "DENSE", "dense_size": 4}]}
    return np.asarray(vals, dense.dtype), meta


def _sparse_matrix(rng: np.random.Generator, shape: tuple[int, int], density: float, dtype: type) -> np.ndarray:
    m: np.ndarray = rng.integers(1, 100, shape).astype(dtype) * (rng.random(shape) < density)
    m[1] = 0  # an empty row
    return m


def test_densify_csr_roundtrip() -> None:
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.int8):
        dense = _sparse_matrix(rng, (7, 9), 0.3, dtype)
        vals, meta = _csr_2d(dense)
        out = densify(vals, dense.shape, meta)
        assert out.dtype == dense.dtype
        np.testing.assert_array_equal(out, dense)


def test_densify_block_roundtrip() -> None:
    rng = np.random.default_rng(1)
    dense = np.repeat(rng.random((6, 3)) < 0.4, 4, axis=1) * rng.standard_normal((6, 12)).astype(np.float32)
    vals, meta = _block_1x4(dense)
    np.testing.assert_array_equal(densify(vals, dense.shape, meta), dense)


def test_densify_all_dense_levels_with_traversal_order() -> None:
    # a column-major traversal: values are stored transposed
    dense = np.arange(6, dtype=np.float32).reshape(2, 3)
    meta = {"traversal_order": [1, 0], "block_map": [],
            "dim_metadata": [{"format": "DENSE", "dense_size": 3}, {"format": "DENSE", "dense_size": 2}]}
    np.testing.assert_array_equal(densify(dense.T.reshape(-1), dense.shape, meta), dense)


@pytest.mark.parametrize("bad", ["count", "segments", "order"])
def test_densify_rejects_inconsistent_metadata(bad: str) -> None:
    dense = np.eye(4, dtype=np.float32)
    vals, meta = _csr_2d(dense)
    dims = meta["dim_metadata"]
    assert isinstance(dims, list)
    if bad == "count":
        vals = vals[:-1]
    elif bad == "segments":
        dims[1]["array_segments"] = [0, 1, 2, 3, 9]
    else:
        meta["traversal_order"] = [0, 0]
    with pytest.raises(ValueError):
        densify(vals, dense.shape, meta)


# ------------------------------------------------------------------------------------------------ end to end

tf = pytest.importorskip("tensorflow")

from tests.e2e import check_tflite, inputs_for  # noqa: E402
from tests.modelgen_rnn import INT_MODELS, MODELS, REFUSED, STATEFUL_PREFIXES  # noqa: E402

#: models that need tf2tosa's pipeline to densify sparse constants before legalization (ops reading sparse weights)


def _more_seeds(name: str, data: bytes, seeds: tuple[int, ...] = (1, 2)) -> float:
    """Executor vs LiteRT on further inputs, each in a fresh interpreter (the recurrent ops keep state in LiteRT):
    the largest max|LiteRT - ours fp64| / fp32_bound (tests/e2e.py) over the float outputs (<= 1 passes)."""
    import tf2tosa
    import tf2tosa.executor
    from tests.e2e import fp32_bound, fp32_noise
    from tf2tosa.verify.litert import run_tflite

    model = tf2tosa.convert(data)
    g = model.graph
    worst = 0.0
    for seed in seeds:
        x = inputs_for(g, seed)
        ref = run_tflite(data, {v.source or v.name: x[v.name] for v in g.inputs})
        ours = model.run(x)
        ours64 = tf2tosa.executor.run(g, x, precise=True)
        noise = fp32_noise(g, x)
        ref_list = list(ref.values())
        for i, v in enumerate(g.outputs):
            r = ref.get(v.source or "", ref_list[i])
            o, o64 = ours[v.name].reshape(r.shape), ours64[v.name].reshape(r.shape)
            err = float(np.abs(np.asarray(r, np.float64) - o64).max()) if r.size else 0.0
            worst = max(worst, err / fp32_bound(o, o64, v.dtype, noise.get(v.name, 0.0)))
    return worst


def _check_int(data: bytes) -> None:
    """Integer model: 0 mismatches vs LiteRT's reference kernels on 3 inputs, and tosa-opt validation.

    (check_tflite also runs the optimized kernels for information; XNNPack fails to prepare DENSIFY → int8
    FULLY_CONNECTED, so the comparison is written out here.)"""
    import tf2tosa
    from tests.e2e import to_source
    from tf2tosa.verify import tosa_tools
    from tf2tosa.verify.litert import run_tflite_many

    model = tf2tosa.convert(data)
    g = model.graph
    sets = [inputs_for(g, seed) for seed in range(3)]
    refs = run_tflite_many(data, [{v.source or v.name: s[v.name] for v in g.inputs} for s in sets],
                           reference_kernels=True)
    for s, ref in zip(sets, refs):
        ours = model.run(s)
        for v, r in zip(g.outputs, ref.values()):
            np.testing.assert_array_equal(to_source(g, v.name, ours[v.name]).reshape(r.shape), r)
    if tosa_tools.available():
        ok, msg = tosa_tools.validate(model.to_bytes(), model.profiles, model.extensions)
        assert ok, msg


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model(name: str) -> None:

    data = MODELS[name]()
    if name in INT_MODELS:
        _check_int(data)
        return
    stateful = name.startswith(STATEFUL_PREFIXES)
    res = check_tflite(name, data, num=1 if stateful else 3)
    assert res.ops
    if stateful:
        assert _more_seeds(name, data) <= 1.0


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused(name: str) -> None:
    import tf2tosa

    build, reason = REFUSED[name]
    with pytest.raises(tf2tosa.UnsupportedOpsError, match=reason):
        tf2tosa.convert(build())
