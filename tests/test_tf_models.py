"""Whole networks from Keras / SavedModel / frozen GraphDef through the TensorFlow frontend, verified against
TensorFlow on seeded inputs and validated with tosa-opt.

Every network is saved both as a ``.keras`` file and as a SavedModel (``model.export``), built once and cached in
``.cache/tf_models``; the NCHW and QAT networks are also converted from a frozen GraphDef ``.pb``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from tests import tfgen  # noqa: E402

RESULTS = tfgen.REPO / ".cache" / "tf_model_results.jsonl"

#: name -> builder; every float output must lie within tests.e2e.fp32_bound of our fp64 run
NETWORKS: dict[str, Callable[..., Any]] = {
    "mobilenet_v2_small": tfgen.mobilenet_v2_small,
    "resnet_small": tfgen.resnet_small,
    "transformer_block": tfgen.transformer_block,
    "nchw_net": tfgen.nchw_net,
    "qat_net": tfgen.qat_net,
}


@pytest.fixture(scope="module")
def built() -> dict[str, tuple[Path, Path]]:
    tfgen._custom_layers()
    return {name: tfgen.cached_keras(name, builder) for name, builder in NETWORKS.items()}


def _graphdef(smdir: Path) -> Path:
    """A frozen GraphDef of the SavedModel's serving signature (cached beside it)."""
    pb = smdir.with_name(smdir.name.replace("_savedmodel", "") + "_frozen.pb")
    if pb.exists():
        return pb
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    loaded = tf.saved_model.load(str(smdir))  # keep the variables alive while freezing
    gd = convert_variables_to_constants_v2(loaded.signatures["serving_default"]).graph.as_graph_def()
    tmp = pb.with_name(pb.name + f".tmp{os.getpid()}")
    tmp.write_bytes(gd.SerializeToString())
    os.replace(tmp, pb)
    return pb


def _reference(name: str, kfile: Path) -> Callable[[list[np.ndarray]], list[np.ndarray]] | None:
    """For the NCHW network: TF on CPU cannot run NCHW convolutions, so the reference is the same Keras model
    (same weights) switched to its NHWC form."""
    if name != "nchw_net":
        return None
    import keras
    import tensorflow as tf

    model = keras.models.load_model(kfile, compile=False)
    tfgen.set_nchw(model, False)
    return lambda xs: [np.asarray(t) for t in tf.nest.flatten(model(tf.constant(xs[0]), training=False))]


def _check(name: str, fmt: str, source: Any,
           ref: Callable[[list[np.ndarray]], list[np.ndarray]] | None = None) -> None:
    from tf2tosa.converter.pipeline import convert_graph
    from tf2tosa.converter.tensorflow import graph_from_source, load_source
    from tf2tosa.executor import run
    from tf2tosa.serializer import to_bytes
    from tf2tosa.verify import tosa_tools
    from tf2tosa.verify.compare import random_inputs

    t0 = time.perf_counter()
    src = load_source(source)
    g = graph_from_source(src)
    tf_ops = sorted({op.name for op in g.ops.values()})
    convert_graph(g)
    convert_s = time.perf_counter() - t0
    from tests.e2e import fp32_bound, fp32_noise

    rel = use = 0.0
    for seed in (0, 1):
        feed = random_inputs(g, seed)
        xs = [feed[v.name] for v in g.inputs]
        refs = ref(xs) if ref is not None else src.run(xs)
        got = run(g, feed)
        got64 = run(g, feed, precise=True)
        noise = fp32_noise(g, feed)
        assert len(refs) == len(g.outputs)
        for v, r in zip(g.outputs, refs):
            o, o64 = got[v.name].reshape(r.shape), got64[v.name].reshape(r.shape)
            rel = max(rel, tfgen.rel_err(o, r))
            err = float(np.abs(np.asarray(r, np.float64) - o64).max())
            use = max(use, err / fp32_bound(o, o64, v.dtype, noise.get(v.name, 0.0)))
            if seed == 1 and r.size > 1:
                assert float(np.ptp(r)) > 0, f"{name}: constant reference output"
    validated = False
    if tosa_tools.available():
        ok, msg = tosa_tools.validate(to_bytes(g), g.record.profiles, g.record.extensions)
        assert ok, f"{name} ({fmt}): tosa-opt validation failed: {msg}"
        validated = True
    ops = {k: n for k, n in g.op_counts().items() if k not in ("tosa.CONST", "tosa.CONST_SHAPE")}
    if os.environ.get("TF2TOSA_RECORD", "1") != "0":
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with open(RESULTS, "a") as f:
            f.write(json.dumps({"name": name, "format": fmt, "rel": rel, "bound_use": use, "validated": validated,
                                "convert_s": round(convert_s, 2), "tf_ops": tf_ops, "tosa_ops": ops}) + "\n")
    assert use <= 1.0, (f"{name} ({fmt}): TensorFlow vs our fp64 run is {use:.3g} x the fp32 bound "
                        f"(tests/e2e.py fp32_bound; max rel error {rel:.3g})")


@pytest.mark.parametrize("fmt", ["keras", "saved_model"])
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_network(name: str, fmt: str, built: dict[str, tuple[Path, Path]]) -> None:
    kfile, smdir = built[name]
    source = kfile if fmt == "keras" else smdir
    _check(name, fmt, source, _reference(name, kfile))


@pytest.mark.parametrize("name", ["nchw_net", "qat_net"])
def test_network_graphdef(name: str, built: dict[str, tuple[Path, Path]]) -> None:
    kfile, smdir = built[name]
    _check(name, "graphdef", _graphdef(smdir), _reference(name, kfile))


def test_nchw_ops_survive_freezing(built: dict[str, tuple[Path, Path]]) -> None:
    """The NCHW network really reaches the converter with NCHW data_format ops."""
    from tf2tosa.converter.tensorflow import load_tensorflow

    g = load_tensorflow(built["nchw_net"][1])
    fmts = {op.attrs.get("data_format") for op in g.ops.values()
            if op.name in ("tf.Conv2D", "tf.DepthwiseConv2dNative", "tf.MaxPool", "tf.AvgPool", "tf.BiasAdd",
                           "tf.FusedBatchNormV3")}
    assert fmts == {"NCHW"}, fmts


def test_qat_has_fake_quant(built: dict[str, tuple[Path, Path]]) -> None:
    from tf2tosa.converter.tensorflow import load_tensorflow

    names = {op.name for op in load_tensorflow(built["qat_net"][0]).ops.values()}
    assert {"tf.FakeQuantWithMinMaxVars", "tf.FakeQuantWithMinMaxVarsPerChannel"} <= names


def test_verify_tensorflow_report(built: dict[str, tuple[Path, Path]]) -> None:
    """verify_tensorflow runs the source in TensorFlow and reports per-output errors."""
    from tf2tosa.converter.pipeline import convert_graph
    from tf2tosa.converter.tensorflow import load_tensorflow
    from tf2tosa.verify.tf_verify import verify_tensorflow

    src = built["transformer_block"][1]
    g = convert_graph(load_tensorflow(src))
    report = verify_tensorflow(g, src, num=2, rtol=1e-4)
    assert report.ok, str(report)
    assert report.runs == 2 and len(report.outputs) == 1
