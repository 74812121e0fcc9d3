"""Tests of the .tflite frontend (tf2tosa.converter.tflite).

Two kinds of models:

* built with TensorFlow (session fixture ``tf_models``, cached under a tmp dir): checked
  against the Keras weights and against ai_edge_litert's ``get_tensor_details()``;
* built by hand with ``flatbuffers`` (``_tfl_model``) for what TensorFlow does not emit
  easily: int4 / string / sparse / external constants, custom ops, absent optional
  inputs, variables, BuiltinOptions2, bad indices.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import pytest
import tflite

from tf2tosa.converter.tflite import load_tflite
from tf2tosa.errors import ModelLoadError
from tf2tosa.ir.types import DType

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- TF-built models
def _build_tf_models(out: Path) -> dict[str, Path]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    tf.random.set_seed(0)
    np.random.seed(0)
    keras = tf.keras
    paths: dict[str, Path] = {}

    def save(name: str, data: bytes) -> None:
        paths[name] = out / f"{name}.tflite"
        paths[name].write_bytes(data)

    # conv + relu + fc, float
    conv = keras.Sequential([
        keras.Input((8, 8, 3), batch_size=1),
        keras.layers.Conv2D(4, 3, strides=(2, 1), padding="same", activation="relu",
                            bias_initializer="random_normal", name="conv"),
        keras.layers.Flatten(),
        keras.layers.Dense(5, bias_initializer="random_normal", name="fc"),
    ])
    np.save(out / "conv_kernel.npy", conv.get_layer("conv").get_weights()[0])
    np.save(out / "conv_bias.npy", conv.get_layer("conv").get_weights()[1])
    np.save(out / "fc_kernel.npy", conv.get_layer("fc").get_weights()[0])
    np.save(out / "fc_bias.npy", conv.get_layer("fc").get_weights()[1])
    save("conv", tf.lite.TFLiteConverter.from_keras_model(conv).convert())

    # the same, full-integer int8 with per-channel weights
    def rep():  # type: ignore[no-untyped-def]
        r = np.random.default_rng(0)
        for _ in range(8):
            yield [r.standard_normal((1, 8, 8, 3)).astype(np.float32)]

    c = tf.lite.TFLiteConverter.from_keras_model(conv)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = rep
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    c.inference_input_type = tf.int8
    c.inference_output_type = tf.int8
    save("conv_int8", c.convert())

    # two inputs (signature order differs from the subgraph's), three outputs
    a = keras.Input((4,), batch_size=1, name="zeta")
    b = keras.Input((4,), batch_size=1, name="alpha")
    x = keras.layers.Dense(3, name="d1")(a)
    y = keras.layers.Dense(2, name="d2")(b)
    multi = keras.Model([a, b], [y, x, keras.layers.Add()([x, x])])
    save("multi", tf.lite.TFLiteConverter.from_keras_model(multi).convert())

    # a while loop with a dynamic batch
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def loop(x):  # type: ignore[no-untyped-def]
        i = tf.constant(0)
        _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0 + 1.0), [i, x])
        return y

    c = tf.lite.TFLiteConverter.from_concrete_functions([loop.get_concrete_function()], loop)
    save("while", c.convert())

    # int16 activations, int8 weights, int64 bias
    c = tf.lite.TFLiteConverter.from_keras_model(conv)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = rep
    c.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    c.inference_input_type = tf.int16
    c.inference_output_type = tf.int16
    save("conv_16x8", c.convert())

    # a resource variable: CALL_ONCE + VAR_HANDLE / ASSIGN_VARIABLE / READ_VARIABLE
    class Acc(tf.Module):
        def __init__(self) -> None:
            self.v = tf.Variable(tf.ones([3]))

        @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
        def __call__(self, x):  # type: ignore[no-untyped-def]
            self.v.assign_add(x)
            return self.v * 2.0

    acc = Acc()
    c = tf.lite.TFLiteConverter.from_concrete_functions([acc.__call__.get_concrete_function()], acc)
    c.experimental_enable_resource_variables = True
    save("resvar", c.convert())
    return paths


@pytest.fixture(scope="session")
def tf_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("tensorflow")
    out = tmp_path_factory.mktemp("tflite_models")
    return _build_tf_models(out)


def _interpreter(path: Path) -> Any:
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    return litert.Interpreter(model_path=str(path))


def test_conv_float_ops_options_and_weights(tf_models: dict[str, Path]) -> None:
    path = tf_models["conv"]
    g = load_tflite(path)
    counts = g.op_counts()
    assert counts["tfl.conv_2d"] == 1
    assert counts["tfl.fully_connected"] == 1
    assert counts["tfl.reshape"] == 1
    assert set(counts) <= {"tfl.conv_2d", "tfl.fully_connected", "tfl.reshape", "tfl.const", "tfl.no_value"}

    conv = next(op for op in g.ops.values() if op.name == "tfl.conv_2d")
    assert conv.attrs["stride_w"] == 1 and conv.attrs["stride_h"] == 2
    assert conv.attrs["padding"] == "SAME"
    assert conv.attrs["fused_activation_function"] == "RELU"
    assert conv.attrs["dilation_w_factor"] == 1 and conv.attrs["dilation_h_factor"] == 1
    assert conv.location == "CONV_2D#0"
    assert conv.operands[0] is g.inputs[0]
    kernel = np.load(path.parent / "conv_kernel.npy")  # HWIO
    np.testing.assert_array_equal(conv.operands[1].const(), kernel.transpose(3, 0, 1, 2))  # OHWI
    np.testing.assert_array_equal(conv.operands[2].const(), np.load(path.parent / "conv_bias.npy"))
    assert conv.result.type.shape == (1, 4, 8, 4)

    fc = next(op for op in g.ops.values() if op.name == "tfl.fully_connected")
    assert fc.attrs["fused_activation_function"] == "NONE"
    assert fc.attrs["keep_num_dims"] is False
    assert fc.attrs["weights_format"] == "DEFAULT"
    np.testing.assert_array_equal(fc.operands[1].const(), np.load(path.parent / "fc_kernel.npy").T)
    np.testing.assert_array_equal(fc.operands[2].const(), np.load(path.parent / "fc_bias.npy"))
    assert g.outputs == [fc.result]

    assert g.source.format == "tflite"
    assert g.source.file == str(path)
    assert g.source.tflite_version == 3
    sig = g.source.signatures[0]
    assert sig["signature_key"] == "serving_default" and sig["subgraph_index"] == 0
    assert g.source.subgraphs == [g]
    assert "min_runtime_version" in g.source.metadata

    it = _interpreter(path)
    assert [v.source for v in g.inputs] == [d["name"] for d in it.get_input_details()]
    assert [v.source for v in g.outputs] == [d["name"] for d in it.get_output_details()]
    assert g.inputs[0].name == it.get_input_details()[0]["name"].replace(":", "_")


def test_int8_quantization_matches_interpreter(tf_models: dict[str, Path]) -> None:
    path = tf_models["conv_int8"]
    g = load_tflite(path)
    details = {d["index"]: d for d in _interpreter(path).get_tensor_details()}
    index = g.source.tensor_indices
    values = g.values()
    checked = 0
    for v in values:
        if v.name not in index:
            continue
        d = details[index[v.name]]
        assert v.source == d["name"]
        assert v.type.shape == tuple(int(x) for x in d["shape"])
        assert v.type.dtype.np_dtype() == np.dtype(d["dtype"])
        qp = d["quantization_parameters"]
        if len(qp["scales"]) == 0:
            assert v.type.quant is None
            continue
        q = v.type.quant
        assert q is not None
        np.testing.assert_array_equal(np.asarray(q.scale, np.float32), qp["scales"])
        np.testing.assert_array_equal(np.asarray(q.zero_point), qp["zero_points"])
        if len(qp["scales"]) > 1:
            assert q.axis == qp["quantized_dimension"]
        else:
            assert q.axis is None
        checked += 1
    assert checked >= 6
    conv = next(op for op in g.ops.values() if op.name == "tfl.conv_2d")
    w = conv.operands[1]
    assert w.dtype is DType.INT8 and w.type.quant is not None and w.type.quant.per_channel
    assert w.type.quant.axis == 0 and len(w.type.quant.scale) == 4
    assert conv.operands[2].dtype is DType.INT32
    assert g.inputs[0].dtype is DType.INT8 and g.outputs[0].dtype is DType.INT8


def test_multi_io_order_and_names(tf_models: dict[str, Path]) -> None:
    path = tf_models["multi"]
    g = load_tflite(path)
    it = _interpreter(path)
    sig = g.source.signatures[0]
    # the subgraph order (zeta, alpha), which is LiteRT's get_input_details() order, not the SignatureDef's sorted keys
    assert [v.source for v in g.inputs] == [d["name"] for d in it.get_input_details()]
    assert [k for k, _ in sig["inputs"]] == it.get_signature_list()["serving_default"]["inputs"]
    assert [k for k, _ in sig["outputs"]] == it.get_signature_list()["serving_default"]["outputs"]
    assert [v.source for v in g.outputs] == [d["name"] for d in it.get_output_details()]
    keys = dict((t, k) for k, t in sig["inputs"] + sig["outputs"])
    assert [g.source.signature_names[v.name] for v in g.inputs] == [keys[v.source] for v in g.inputs] \
        == ["zeta", "alpha"]
    assert [g.source.signature_names[v.name] for v in g.outputs] == [keys[v.source] for v in g.outputs]
    assert sorted(g.source.signature_names[v.name] for v in g.outputs) == ["output_0", "output_1", "output_2"]
    assert g.op_counts()["tfl.fully_connected"] == 2
    for v in g.inputs:
        assert all(c.isalnum() or c == "_" for c in v.name)


def test_while_loop_regions_and_dynamic_batch(tf_models: dict[str, Path]) -> None:
    g = load_tflite(tf_models["while"])
    subs = g.source.subgraphs
    assert len(subs) == 3 and subs[0] is g
    wh = next(op for op in g.ops.values() if op.name == "tfl.while")
    assert wh.attrs["cond_subgraph_index"] == 1 and wh.attrs["body_subgraph_index"] == 2
    assert wh.regions == [subs[1], subs[2]]
    assert len(subs[1].outputs) == 1 and subs[1].outputs[0].dtype is DType.BOOL
    assert len(subs[2].inputs) == len(subs[2].outputs) == len(wh.operands)
    x = g.inputs[0]
    assert x.type.shape == ("batch", 3)
    assert g.source.stored_shapes[x.name] == (1, 3)
    assert subs[2].op_counts()["tfl.add"] == 2


@pytest.mark.parametrize("model", ["conv", "conv_int8", "conv_16x8", "multi", "while", "resvar"])
def test_every_tensor_matches_interpreter(tf_models: dict[str, Path], model: str) -> None:
    """Names, shape signatures, dtypes, quantization and constant data of every tensor, in every subgraph."""
    path = tf_models[model]
    g = load_tflite(path)
    it = _interpreter(path)
    it.allocate_tensors()
    details = {d["index"]: d for d in it.get_tensor_details()}  # subgraph 0 only
    main = g.source.subgraphs[0]
    index = main.source.tensor_indices
    seen = 0
    for v in main.values():
        if v.name not in index:
            assert v.producer is not None and v.producer.name == "tfl.no_value" or not v.source
            continue
        d = details[index[v.name]]
        seen += 1
        assert v.source == d["name"]
        sig = tuple(-1 if isinstance(x, str) else x for x in v.type.shape)
        assert sig == tuple(int(x) for x in d["shape_signature"]), v
        if v.type.dtype not in (DType.RESOURCE, DType.VARIANT):
            assert v.type.dtype.np_dtype() == np.dtype(d["dtype"]), v
        qp = d["quantization_parameters"]
        if len(qp["scales"]) == 0:
            assert v.type.quant is None
        else:
            q = v.type.quant
            assert q is not None
            np.testing.assert_array_equal(np.asarray(q.scale, np.float32), qp["scales"])
            np.testing.assert_array_equal(np.asarray(q.zero_point), qp["zero_points"])
            assert q.axis == (qp["quantized_dimension"] if len(qp["scales"]) > 1 else None)
        c = v.const()
        if c is not None:
            np.testing.assert_array_equal(c, it.get_tensor(index[v.name]))
    assert seen >= 3
    for k, sub in enumerate(g.source.subgraphs):
        assert sub.source.subgraph_index == k
        for op in sub.ops.values():
            assert op.location is not None and op.name.startswith("tfl.")


def test_int16x8_and_resource_variables(tf_models: dict[str, Path]) -> None:
    g = load_tflite(tf_models["conv_16x8"])
    conv = next(op for op in g.ops.values() if op.name == "tfl.conv_2d")
    assert conv.operands[0].dtype is DType.INT16 and conv.operands[1].dtype is DType.INT8
    assert conv.operands[2].dtype is DType.INT64
    assert conv.attrs["quantized_bias_type"] == "INT64"
    assert conv.operands[0].type.quant is not None and conv.operands[0].type.quant.zp == 0

    g = load_tflite(tf_models["resvar"])
    once = next(op for op in g.ops.values() if op.name == "tfl.call_once")
    init = g.source.subgraphs[once.attrs["init_subgraph_index"]]
    assert once.regions == [init] and once.results == [] and once.attrs["side_effect"] is True
    assert init.op_counts()["tfl.assign_variable"] == 1
    vh = next(op for op in g.ops.values() if op.name == "tfl.var_handle")
    assert vh.result.dtype is DType.RESOURCE and vh.attrs["shared_name"] == "Variable"
    assert g.op_counts()["tfl.read_variable"] == 2
    assign = next(op for op in g.ops.values() if op.name == "tfl.assign_variable")
    assert assign.attrs["side_effect"] is True and assign.results == []


def test_does_not_import_tensorflow(tf_models: dict[str, Path]) -> None:
    code = (
        "import sys\n"
        "from tf2tosa.converter.tflite import load_tflite\n"
        f"g = load_tflite({str(tf_models['while'])!r})\n"
        "assert g.op_counts()['tfl.while'] == 1\n"
        "bad = [m for m in sys.modules if m == 'tensorflow' or m.startswith(('tensorflow.', 'keras', 'ai_edge'))]\n"
        "assert not bad, bad\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


# --------------------------------------------------------------------------- bad files
def _expect_load_error(path: Path) -> str:
    with pytest.raises(ModelLoadError) as ei:
        load_tflite(path)
    msg = str(ei.value)
    assert str(path) in msg
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("frac", [0.0005, 0.01, 0.1, 0.3, 0.5, 0.75, 0.9, 0.99, 0.9995])
def test_truncated_file(tf_models: dict[str, Path], tmp_path: Path, frac: float) -> None:
    data = tf_models["conv_int8"].read_bytes()
    p = tmp_path / f"cut_{frac}.tflite"
    p.write_bytes(data[: max(1, int(len(data) * frac))])
    _expect_load_error(p)


def test_truncated_every_cut_point_small_model(tmp_path: Path) -> None:
    data = _small_model()
    load_tflite(data)
    # (the last 4 bytes are a string's NUL terminator and padding, which no reader needs)
    for cut in range(0, len(data) - 4, 3):
        with pytest.raises(ModelLoadError):
            load_tflite(data[:cut])


def test_random_bytes_empty_and_wrong_identifier(tmp_path: Path) -> None:
    rng = np.random.default_rng(1234)
    for i in range(20):
        p = tmp_path / f"random{i}.tflite"
        p.write_bytes(rng.integers(0, 256, int(rng.integers(1, 5000)), dtype=np.uint8).tobytes())
        _expect_load_error(p)
    p = tmp_path / "empty.tflite"
    p.write_bytes(b"")
    assert "empty" in _expect_load_error(p)
    data = bytearray(_small_model())
    data[4:8] = b"TOSA"
    p = tmp_path / "ident.tflite"
    p.write_bytes(bytes(data))
    assert "TFL3" in _expect_load_error(p)
    # random bytes behind a valid identifier
    for _ in range(50):
        b = bytearray(rng.integers(0, 256, int(rng.integers(8, 3000)), dtype=np.uint8).tobytes())
        b[4:8] = b"TFL3"
        with pytest.raises(ModelLoadError):
            load_tflite(bytes(b))
    _expect_load_error(tmp_path / "does_not_exist.tflite")


def test_bit_flips_never_escape(tf_models: dict[str, Path]) -> None:
    data = tf_models["conv_int8"].read_bytes()
    rng = np.random.default_rng(7)
    for _ in range(300):
        b = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        try:
            load_tflite(bytes(b))
        except ModelLoadError as e:
            assert "\n" not in str(e)


# --------------------------------------------------------------------------- hand-built models
def _ivec(b: flatbuffers.Builder, xs: list[int], dtype: Any = np.int32) -> int:
    return int(b.CreateNumpyVector(np.asarray(xs, dtype=dtype)))


def _tables(b: flatbuffers.Builder, offs: list[int]) -> int:
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return int(b.EndVector())


def _tfl_model(subgraphs: list[dict[str, Any]], opcodes: list[Any],
               buffers: list[Any], signatures: list[dict[str, Any]] | None = None,
               external_offset: int | None = None, version: int = 3, _probe: bool = False) -> bytes:
    """Build a .tflite flatbuffer.

    tensors: dict(name, shape, type, buffer=0, shape_signature=None, quant=(scales, zps, axis), variable,
    sparsity=dict(traversal_order, block_map, dims=[(format, dense_size, segments, indices)])).
    ops: dict(opcode, inputs, outputs, options=(union 1|2, type code, fn(builder) -> offset), custom=bytes,
    intermediates).  buffers: bytes | None | ("ext", bytes) (data stored after the flatbuffer, >2GB style).
    opcodes: (code, custom code) or (code, custom, deprecated code).
    """
    if external_offset is None and any(isinstance(x, tuple) for x in buffers):
        probe = _tfl_model(subgraphs, opcodes, buffers, signatures, external_offset=1 << 40, version=version,
                           _probe=True)
        external_offset = (len(probe) + 15) // 16 * 16
    b = flatbuffers.Builder(1024)
    sub_offs = []
    for sg in subgraphs:
        t_offs = []
        for t in sg["tensors"]:
            name = b.CreateString(t["name"])
            shape = _ivec(b, t["shape"])
            sig = _ivec(b, t["shape_signature"]) if t.get("shape_signature") is not None else None
            q = None
            if t.get("quant") is not None:
                scales, zps, axis = t["quant"]
                sv = _ivec(b, scales, np.float32)
                zv = _ivec(b, zps, np.int64)
                tflite.QuantizationParametersStart(b)
                tflite.QuantizationParametersAddScale(b, sv)
                tflite.QuantizationParametersAddZeroPoint(b, zv)
                tflite.QuantizationParametersAddQuantizedDimension(b, axis)
                q = tflite.QuantizationParametersEnd(b)
            sp = None
            if t.get("sparsity") is not None:
                s = t["sparsity"]
                dms = []
                for fmt, dense, segs, idxs in s["dims"]:
                    seg_off = idx_off = None
                    if segs is not None:
                        v = _ivec(b, segs)
                        tflite.Int32VectorStart(b)
                        tflite.Int32VectorAddValues(b, v)
                        seg_off = tflite.Int32VectorEnd(b)
                    if idxs is not None:
                        v = _ivec(b, idxs, np.uint8)
                        tflite.Uint8VectorStart(b)
                        tflite.Uint8VectorAddValues(b, v)
                        idx_off = tflite.Uint8VectorEnd(b)
                    tflite.DimensionMetadataStart(b)
                    tflite.DimensionMetadataAddFormat(b, fmt)
                    tflite.DimensionMetadataAddDenseSize(b, dense)
                    if seg_off is not None:
                        tflite.DimensionMetadataAddArraySegmentsType(b, 1)
                        tflite.DimensionMetadataAddArraySegments(b, seg_off)
                    if idx_off is not None:
                        tflite.DimensionMetadataAddArrayIndicesType(b, 3)
                        tflite.DimensionMetadataAddArrayIndices(b, idx_off)
                    dms.append(tflite.DimensionMetadataEnd(b))
                trav = _ivec(b, s["traversal_order"])
                bmap = _ivec(b, s["block_map"])
                dmv = _tables(b, dms)
                tflite.SparsityParametersStart(b)
                tflite.SparsityParametersAddTraversalOrder(b, trav)
                tflite.SparsityParametersAddBlockMap(b, bmap)
                tflite.SparsityParametersAddDimMetadata(b, dmv)
                sp = tflite.SparsityParametersEnd(b)
            tflite.TensorStart(b)
            tflite.TensorAddShape(b, shape)
            if sig is not None:
                tflite.TensorAddShapeSignature(b, sig)
            tflite.TensorAddType(b, t["type"])
            tflite.TensorAddBuffer(b, t.get("buffer", 0))
            tflite.TensorAddName(b, name)
            if q is not None:
                tflite.TensorAddQuantization(b, q)
            if sp is not None:
                tflite.TensorAddSparsity(b, sp)
            tflite.TensorAddIsVariable(b, bool(t.get("variable", False)))
            t_offs.append(tflite.TensorEnd(b))
        o_offs = []
        for op in sg["ops"]:
            ins = _ivec(b, op["inputs"])
            outs = _ivec(b, op["outputs"])
            inter = _ivec(b, op["intermediates"]) if op.get("intermediates") else None
            cust = _ivec(b, list(op["custom"]), np.uint8) if op.get("custom") is not None else None
            opt = op["options"][2](b) if op.get("options") else None
            tflite.OperatorStart(b)
            tflite.OperatorAddOpcodeIndex(b, op["opcode"])
            tflite.OperatorAddInputs(b, ins)
            tflite.OperatorAddOutputs(b, outs)
            if inter is not None:
                tflite.OperatorAddIntermediates(b, inter)
            if cust is not None:
                tflite.OperatorAddCustomOptions(b, cust)
            if opt is not None:
                union, code, _ = op["options"]
                if union == 1:
                    tflite.OperatorAddBuiltinOptionsType(b, code)
                    tflite.OperatorAddBuiltinOptions(b, opt)
                else:
                    tflite.OperatorAddBuiltinOptions2Type(b, code)
                    tflite.OperatorAddBuiltinOptions2(b, opt)
            o_offs.append(tflite.OperatorEnd(b))
        tv = _tables(b, t_offs)
        ov = _tables(b, o_offs)
        iv = _ivec(b, sg["inputs"])
        outv = _ivec(b, sg["outputs"])
        nm = b.CreateString(sg.get("name", ""))
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tv)
        tflite.SubGraphAddInputs(b, iv)
        tflite.SubGraphAddOutputs(b, outv)
        tflite.SubGraphAddOperators(b, ov)
        tflite.SubGraphAddName(b, nm)
        sub_offs.append(tflite.SubGraphEnd(b))
    oc_offs = []
    for oc in opcodes:
        code, custom = oc[0], oc[1]
        deprecated = oc[2] if len(oc) > 2 else min(code, 127)
        cs = b.CreateString(custom) if custom is not None else None
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, deprecated)
        tflite.OperatorCodeAddBuiltinCode(b, code)
        if cs is not None:
            tflite.OperatorCodeAddCustomCode(b, cs)
        tflite.OperatorCodeAddVersion(b, 1)
        oc_offs.append(tflite.OperatorCodeEnd(b))
    buf_offs = []
    ext = b""
    for data in buffers:
        if isinstance(data, tuple):
            assert external_offset is not None
            off = external_offset + len(ext)
            ext += data[1]
            tflite.BufferStart(b)
            tflite.BufferAddOffset(b, off)
            tflite.BufferAddSize(b, len(data[1]))
            buf_offs.append(tflite.BufferEnd(b))
            continue
        dv = _ivec(b, list(data), np.uint8) if data else None
        tflite.BufferStart(b)
        if dv is not None:
            tflite.BufferAddData(b, dv)
        buf_offs.append(tflite.BufferEnd(b))
    sig_offs = []
    for s in signatures or []:
        maps = {}
        for kind in ("inputs", "outputs"):
            tms = []
            for nm_, ti in s[kind]:
                n_ = b.CreateString(nm_)
                tflite.TensorMapStart(b)
                tflite.TensorMapAddName(b, n_)
                tflite.TensorMapAddTensorIndex(b, ti)
                tms.append(tflite.TensorMapEnd(b))
            maps[kind] = _tables(b, tms)
        key = b.CreateString(s["key"])
        tflite.SignatureDefStart(b)
        tflite.SignatureDefAddInputs(b, maps["inputs"])
        tflite.SignatureDefAddOutputs(b, maps["outputs"])
        tflite.SignatureDefAddSignatureKey(b, key)
        tflite.SignatureDefAddSubgraphIndex(b, s.get("subgraph", 0))
        sig_offs.append(tflite.SignatureDefEnd(b))
    ocv, sgv, bv = _tables(b, oc_offs), _tables(b, sub_offs), _tables(b, buf_offs)
    sigv = _tables(b, sig_offs) if signatures else None
    desc = b.CreateString("hand-built")
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, version)
    tflite.ModelAddOperatorCodes(b, ocv)
    tflite.ModelAddSubgraphs(b, sgv)
    tflite.ModelAddDescription(b, desc)
    tflite.ModelAddBuffers(b, bv)
    if sigv is not None:
        tflite.ModelAddSignatureDefs(b, sigv)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    out = bytes(b.Output())
    if external_offset is not None and not _probe:
        assert len(out) <= external_offset
        out = out + b"\0" * (external_offset - len(out)) + ext
    return out


F32, I32, U8, I8, STR, I4, BOOL = 0, 2, 3, 9, 5, 17, 6
ADD, CONV_2D, CUSTOM, WHILE, RESHAPE, FC, LSTM_UNI = 0, 3, 32, 119, 22, 9, 44


def _add_opts(act: int) -> Any:
    def fn(b: flatbuffers.Builder) -> int:
        tflite.AddOptionsStart(b)
        tflite.AddOptionsAddFusedActivationFunction(b, act)
        return int(tflite.AddOptionsEnd(b))
    return (1, tflite.BuiltinOptions.AddOptions, fn)


def _small_model() -> bytes:
    """x + c with RELU6, c a constant."""
    return _tfl_model(
        [{"tensors": [{"name": "x", "shape": [1, 2], "type": F32},
                      {"name": "c", "shape": [1, 2], "type": F32, "buffer": 1},
                      {"name": "y", "shape": [1, 2], "type": F32}],
          "ops": [{"opcode": 0, "inputs": [0, 1], "outputs": [2], "options": _add_opts(3)}],
          "inputs": [0], "outputs": [2], "name": "main"}],
        [(ADD, None)], [b"", np.array([1.5, -2], np.float32).tobytes()])


def test_small_model_basics() -> None:
    g = load_tflite(_small_model(), name="m")
    assert g.name == "m"
    add = next(op for op in g.ops.values() if op.name == "tfl.add")
    assert add.attrs["fused_activation_function"] == "RELU6"
    assert add.attrs["pot_scale_int16"] is True  # schema default (field not written)
    np.testing.assert_array_equal(add.operands[1].const(), np.array([[1.5, -2]], np.float32))
    assert add.location == "ADD#0"
    assert g.source.description == "hand-built"
    assert g.source.file is None


def test_constants_of_many_types_and_symbolic_dims() -> None:
    int4_vals = np.array([-8, -1, 0, 7, 3], np.int8)
    nib = (int4_vals & 0xF).astype(np.uint8)
    packed = bytes([int(nib[0] | nib[1] << 4), int(nib[2] | nib[3] << 4), int(nib[4])])
    strings = [b"ab", b"", b"xyz"]
    sbuf = np.array([3, 20, 22, 22, 25], "<i4").tobytes() + b"".join(strings)
    tensors = [
        {"name": "x:0", "shape": [1, 3], "shape_signature": [-1, 3], "type": F32},
        {"name": "i4", "shape": [5], "type": I4, "buffer": 1},
        {"name": "s", "shape": [3], "type": STR, "buffer": 2},
        {"name": "b", "shape": [2], "type": BOOL, "buffer": 3},
        {"name": "y", "shape": [1, 3], "shape_signature": [-1, -1], "type": F32},
        {"name": "z", "shape": [1, 3], "type": F32},
        {"name": "z2", "shape": [1, 3], "type": F32},
        {"name": "w8", "shape": [3, 1], "type": I8, "buffer": 4,
         "quant": ([0.5, 0.25, 0.125], [0], 0)},
    ]
    custom = _tfl_model(
        [{"tensors": tensors,
          "ops": [{"opcode": 0, "inputs": [0, 1, 2, 3], "outputs": [4]},
                  {"opcode": 0, "inputs": [4, 7], "outputs": [5, 6]}],
          "inputs": [0], "outputs": [4, 5]}],
        [(CUSTOM, "Foo")],
        [b"", packed, sbuf, b"\x01\x00", np.array([1, -2, 3], np.int8).tobytes()])
    g = load_tflite(custom)
    op0, op1 = sorted((op for op in g.ops.values() if op.name == "tfl.custom"), key=lambda o: o.id)
    np.testing.assert_array_equal(op0.operands[1].const(), int4_vals)
    assert op0.operands[1].dtype is DType.INT4
    s = op0.operands[2].const()
    assert s is not None and list(s) == strings and op0.operands[2].dtype is DType.STRING
    np.testing.assert_array_equal(op0.operands[3].const(), np.array([True, False]))
    x = g.inputs[0]
    assert x.name == "x_0" and x.source == "x:0"
    assert x.type.shape == ("batch", 3)
    assert op0.result.type.shape == ("batch", "d1")
    assert g.source.stored_shapes[op0.result.name] == (1, 3)
    assert op0.attrs["custom_code"] == "Foo" and op0.attrs["custom_options"] == b""
    assert len(op1.results) == 2 and g.outputs == [op0.result, op1.results[0]]
    q = op1.operands[1].type.quant
    assert q is not None and q.axis == 0 and q.zero_point == (0, 0, 0) and q.scale == (0.5, 0.25, 0.125)


def test_custom_options_flexbuffer_and_optional_inputs() -> None:
    from flatbuffers import flexbuffers

    opts = flexbuffers.Dumps({"alpha": 3, "name": "hi", "vals": [1, 2]})
    model = _tfl_model(
        [{"tensors": [{"name": "x", "shape": [2], "type": F32}, {"name": "y", "shape": [2], "type": F32},
                      {"name": "i", "shape": [2], "type": F32}],
          "ops": [{"opcode": 0, "inputs": [0, -1, 0, -1], "outputs": [1], "custom": bytes(opts),
                   "intermediates": [2]}],
          "inputs": [0], "outputs": [1]}],
        [(CUSTOM, "MyOp")], [b""])
    g = load_tflite(model)
    op = next(op for op in g.ops.values() if op.name == "tfl.custom")
    assert op.attrs["custom_options"] == bytes(opts)
    assert op.attrs["custom_options_decoded"] == {"alpha": 3, "name": "hi", "vals": [1, 2]}
    assert op.attrs["custom_options_format"] == "FLEXBUFFERS"
    assert op.attrs["intermediates"] == ["i"]
    assert len(op.operands) == 4
    assert op.operands[0] is g.inputs[0] and op.operands[2] is g.inputs[0]
    for k in (1, 3):
        nv = op.operands[k]
        assert nv.producer is not None and nv.producer.name == "tfl.no_value" and nv.type.shape == ()


def test_variables_external_buffers_and_deprecated_codes() -> None:
    w = np.arange(6, dtype=np.float32)
    state0 = np.array([0.5, 0.25], np.float32)
    spec = [{"tensors": [{"name": "x", "shape": [2], "type": F32},
                         {"name": "state", "shape": [2], "type": F32, "variable": True, "buffer": 2},
                         {"name": "w", "shape": [6], "type": F32, "buffer": 1},
                         {"name": "y", "shape": [2], "type": F32}],
             "ops": [{"opcode": 0, "inputs": [0, 1, 2], "outputs": [3]}],
             "inputs": [0], "outputs": [3]}]
    # CONV_2D via the deprecated field only (builtin_code 0), as old converters wrote it
    opcodes: list[Any] = [(0, None, CONV_2D)]
    model = _tfl_model(spec, opcodes, [b"", ("ext", w.tobytes()), state0.tobytes()])
    g = load_tflite(model)
    conv = next(op for op in g.ops.values() if op.name == "tfl.conv_2d")
    np.testing.assert_array_equal(conv.operands[2].const(), w)
    var = conv.operands[1]
    assert var.producer is not None and var.producer.name == "tfl.variable"
    name = var.producer.attrs["name"]
    assert name == var.name and g.variables[name]["source"] == "state"
    np.testing.assert_array_equal(g.variables[name]["initial"], state0)
    assert conv.attrs["side_effect"] is True
    assert conv.attrs["fused_activation_function"] == "NONE" and conv.attrs["padding"] == "SAME"
    assert conv.attrs["stride_w"] == 0 and conv.attrs["dilation_w_factor"] == 1  # defaults of an empty table
    # external data cut off → error
    with pytest.raises(ModelLoadError, match="outside the file"):
        load_tflite(model[:-4])


def test_builtin_options2_and_large_codes() -> None:
    def rw(b: flatbuffers.Builder) -> int:
        tflite.ReduceWindowOptionsStart(b)
        tflite.ReduceWindowOptionsAddReduceFunction(b, tflite.ReduceWindowFunction.MAXIMUM)
        return int(tflite.ReduceWindowOptionsEnd(b))

    def rs(b: flatbuffers.Builder) -> int:
        ns = _ivec(b, [2, -1])
        tflite.ReshapeOptionsStart(b)
        tflite.ReshapeOptionsAddNewShape(b, ns)
        return int(tflite.ReshapeOptionsEnd(b))

    model = _tfl_model(
        [{"tensors": [{"name": "x", "shape": [4], "type": F32}, {"name": "y", "shape": [4], "type": F32},
                      {"name": "z", "shape": [2, 2], "type": F32}],
          "ops": [{"opcode": 0, "inputs": [0], "outputs": [1],
                   "options": (2, tflite.BuiltinOptions2.ReduceWindowOptions, rw)},
                  {"opcode": 1, "inputs": [1], "outputs": [2],
                   "options": (1, tflite.BuiltinOptions.ReshapeOptions, rs)}],
          "inputs": [0], "outputs": [2]}],
        [(tflite.BuiltinOperator.REDUCE_WINDOW, None, 127), (RESHAPE, None)], [b""])
    g = load_tflite(model)
    rw_op = next(op for op in g.ops.values() if op.name == "tfl.reduce_window")
    assert rw_op.attrs["reduce_function"] == "MAXIMUM"
    assert rw_op.location == "REDUCE_WINDOW#0"
    rs_op = next(op for op in g.ops.values() if op.name == "tfl.reshape")
    assert rs_op.attrs["new_shape"] == [2, -1]


def test_sparsity_is_kept() -> None:
    sparse = {"traversal_order": [0, 1], "block_map": [],
              "dims": [(0, 2, None, None), (1, 0, [0, 1, 3], [2, 0, 3])]}
    vals = np.array([1.0, 2.0, 3.0], np.float32)
    model = _tfl_model(
        [{"tensors": [{"name": "x", "shape": [1, 4], "type": F32},
                      {"name": "w", "shape": [2, 4], "type": F32, "buffer": 1, "sparsity": sparse},
                      {"name": "y", "shape": [1, 2], "type": F32}],
          "ops": [{"opcode": 0, "inputs": [0, 1, -1], "outputs": [2]}],
          "inputs": [0], "outputs": [2]}],
        [(FC, None)], [b"", vals.tobytes()])
    g = load_tflite(model)
    fc = next(op for op in g.ops.values() if op.name == "tfl.fully_connected")
    w = fc.operands[1]
    assert w.producer is not None
    np.testing.assert_array_equal(w.const(), vals)
    assert w.type.shape == (2, 4)
    sp = w.producer.attrs["sparsity"]
    assert sp["traversal_order"] == [0, 1] and sp["block_map"] == []
    assert sp["dim_metadata"][0] == {"format": "DENSE", "dense_size": 2, "array_segments": None,
                                     "array_indices": None}
    assert sp["dim_metadata"][1]["format"] == "SPARSE_CSR"
    assert sp["dim_metadata"][1]["array_segments"] == [0, 1, 3]
    assert sp["dim_metadata"][1]["array_indices"] == [2, 0, 3]
    assert fc.operands[2].producer is not None and fc.operands[2].producer.name == "tfl.no_value"


def _while_opts(cond: int, body: int) -> Any:
    def fn(b: flatbuffers.Builder) -> int:
        tflite.WhileOptionsStart(b)
        tflite.WhileOptionsAddCondSubgraphIndex(b, cond)
        tflite.WhileOptionsAddBodySubgraphIndex(b, body)
        return int(tflite.WhileOptionsEnd(b))
    return (1, tflite.BuiltinOptions.WhileOptions, fn)


def _one_op(ins: list[int], outs: list[int], opcode: int = 0, n_tensors: int = 2, **kw: Any) -> dict[str, Any]:
    return {"tensors": [{"name": f"t{i}", "shape": [2], "type": F32} for i in range(n_tensors)],
            "ops": [{"opcode": opcode, "inputs": ins, "outputs": outs, **kw}], "inputs": [0], "outputs": outs}


@pytest.mark.parametrize("case", ["tensor", "opcode", "buffer", "subgraph", "recursion", "unproduced",
                                  "const_size", "version", "signature"])
def test_bad_indices_raise_model_load_error(case: str) -> None:
    buffers: list[Any] = [b""]
    opcodes: list[Any] = [(ADD, None)]
    subs = [_one_op([0, 0], [1])]
    sigs = None
    version = 3
    if case == "tensor":
        subs = [_one_op([0, 7], [1])]
    elif case == "opcode":
        subs = [_one_op([0, 0], [1], opcode=3)]
    elif case == "buffer":
        subs[0]["tensors"][0]["buffer"] = 9
        subs[0]["inputs"] = []
    elif case == "subgraph":
        opcodes = [(WHILE, None)]
        subs = [_one_op([0], [1], options=_while_opts(1, 5))]
    elif case == "recursion":
        opcodes = [(WHILE, None)]
        subs = [_one_op([0], [1], options=_while_opts(1, 1)), _one_op([0], [1], options=_while_opts(0, 1))]
    elif case == "unproduced":
        subs = [_one_op([0, 2], [1], n_tensors=3)]
    elif case == "const_size":
        subs = [_one_op([0, 2], [1], n_tensors=3)]
        subs[0]["tensors"][2]["buffer"] = 1
        buffers = [b"", b"\0" * 5]
    elif case == "version":
        version = 2
    elif case == "signature":
        sigs = [{"key": "s", "inputs": [("x", 99)], "outputs": []}]
    model = _tfl_model(subs, opcodes, buffers, signatures=sigs, version=version)
    with pytest.raises(ModelLoadError) as ei:
        load_tflite(model, name="bad.tflite")
    assert "bad.tflite" in str(ei.value) and "\n" not in str(ei.value)


def test_signature_selects_main_subgraph_and_regions() -> None:
    body = _one_op([0, 0], [1])
    cond = {"tensors": [{"name": "a", "shape": [2], "type": F32}, {"name": "c", "shape": [], "type": BOOL}],
            "ops": [{"opcode": 2, "inputs": [0], "outputs": [1]}], "inputs": [0], "outputs": [1]}
    main = {"tensors": [{"name": "in_b", "shape": [2], "type": F32}, {"name": "in_a", "shape": [2], "type": F32},
                        {"name": "out", "shape": [2], "type": F32}],
            "ops": [{"opcode": 1, "inputs": [0], "outputs": [2], "options": _while_opts(1, 0)}],
            "inputs": [0, 1], "outputs": [2], "name": "entry"}
    model = _tfl_model([body, cond, main], [(ADD, None), (WHILE, None), (CUSTOM, "Cond")], [b""],
                       signatures=[{"key": "run", "subgraph": 2, "inputs": [("a", 1), ("b", 0)],
                                    "outputs": [("o", 2)]}])
    g = load_tflite(model)
    assert g.source.main_subgraph_index == 2 and g.source.subgraphs[2] is g
    # the subgraph's own order (what an interpreter of that subgraph reports), the SignatureDef keys as names
    assert [v.source for v in g.inputs] == ["in_b", "in_a"]
    assert [g.source.signature_names[v.name] for v in g.inputs] == ["b", "a"]
    wh = next(op for op in g.ops.values() if op.name == "tfl.while")
    assert wh.regions == [g.source.subgraphs[1], g.source.subgraphs[0]]
    assert g.source.signatures[0]["inputs"] == [("a", "in_a"), ("b", "in_b")]


def test_main_subgraph_used_as_region_is_copied(tmp_path: Path) -> None:
    # subgraph 0 is both the entry point and the body of a WHILE in subgraph 1
    body = _one_op([0, 0], [1])
    other = _one_op([0], [1], opcode=1, options=_while_opts(2, 0))
    cond = {"tensors": [{"name": "a", "shape": [2], "type": F32}, {"name": "c", "shape": [], "type": BOOL}],
            "ops": [{"opcode": 2, "inputs": [0], "outputs": [1]}], "inputs": [0], "outputs": [1]}
    model = _tfl_model([body, other, cond], [(ADD, None), (WHILE, None), (CUSTOM, "Cond")], [b""])
    p = tmp_path / "my-model.v1.tflite"
    p.write_bytes(model)
    g = load_tflite(p)
    assert g.name == "my_model_v1"
    subs = g.source.subgraphs
    assert g is not subs[0] and g.source.subgraphs is subs
    wh = next(op for op in subs[1].ops.values() if op.name == "tfl.while")
    assert wh.regions == [subs[2], subs[0]]
    assert g.op_counts() == subs[0].op_counts() == {"tfl.add": 1}
    assert load_tflite(p, name="other").name == "other"


def test_unknown_builtin_code_bad_flexbuffer_and_fp16_bf16_constants() -> None:
    f16 = np.array([1.5, -0.25], np.float16)
    bf16_bits = np.array([0x3FC0, 0xBE80], "<u2")  # 1.5, -0.25
    model = _tfl_model(
        [{"tensors": [{"name": "x", "shape": [2], "type": F32}, {"name": "h", "shape": [2], "type": 1, "buffer": 1},
                      {"name": "bf", "shape": [2], "type": 18, "buffer": 2},
                      {"name": "y", "shape": [2], "type": F32}, {"name": "z", "shape": [2], "type": F32}],
          "ops": [{"opcode": 0, "inputs": [0, 1, 2], "outputs": [3]},
                  {"opcode": 1, "inputs": [3], "outputs": [4], "custom": b"\xff\xff\xff"}],
          "inputs": [0], "outputs": [4]}],
        [(999, None, 127), (CUSTOM, "Odd")], [b"", f16.tobytes(), bf16_bits.tobytes()])
    g = load_tflite(model)
    op = next(op for op in g.ops.values() if op.name == "tfl.builtin_999")
    assert op.location == "BUILTIN_999#0"
    h = op.operands[1].const()
    assert h is not None and h.dtype == np.float16
    np.testing.assert_array_equal(h, f16)
    bf = op.operands[2].const()
    assert bf is not None and op.operands[2].dtype is DType.BF16
    np.testing.assert_array_equal(bf.astype(np.float32), np.array([1.5, -0.25], np.float32))
    odd = next(op for op in g.ops.values() if op.name == "tfl.custom")
    assert odd.attrs["custom_options"] == b"\xff\xff\xff" and "custom_options_decoded" not in odd.attrs


def test_options_decoding_is_generic() -> None:
    from tf2tosa.converter import tflite_options as topt

    assert topt.options_class_for_op("CONV_2D") == "Conv2DOptions"
    assert topt.options_class_for_op("MAX_POOL_2D") == "Pool2DOptions"
    assert topt.options_class_for_op("MEAN") == "ReducerOptions"
    assert topt.options_class_for_op("STABLEHLO_COMPOSITE") == "StableHLOCompositeOptions"
    assert topt.options_class_for_op("RELU") is None
    d = topt.default_options("DepthwiseConv2DOptions")
    assert d == {"padding": "SAME", "stride_w": 0, "stride_h": 0, "depth_multiplier": 0,
                 "fused_activation_function": "NONE", "dilation_w_factor": 1, "dilation_h_factor": 1}
    assert topt.default_options("StridedSliceOptions")["offset"] is False
    assert topt.default_options("ReshapeOptions") == {"new_shape": None}
    assert topt.default_options("StablehloDotGeneralOptions")["precision_config"] is None
    assert topt.default_options("CastOptions") == {"in_data_type": "FLOAT32", "out_data_type": "FLOAT32"}
    assert topt.default_options("ResizeBilinearOptions") == {"align_corners": False, "half_pixel_centers": False}
    # every options table of both unions decodes to defaults without error
    for union in (1, 2):
        for cls in topt.options_table_names(union).values():
            assert isinstance(topt.default_options(cls), dict)


def _rich_model() -> bytes:
    """Sparse, string, variable, per-channel, external-buffer constants, a custom op and a signature."""
    from flatbuffers import flexbuffers

    sparse = {"traversal_order": [0, 1], "block_map": [], "dims": [(0, 2, None, None), (1, 0, [0, 1, 3], [2, 0, 3])]}
    sbuf = np.array([3, 20, 22, 22, 25], "<i4").tobytes() + b"abxyz"
    tensors = [
        {"name": "x", "shape": [1, 4], "shape_signature": [-1, 4], "type": F32},
        {"name": "w", "shape": [2, 4], "type": F32, "buffer": 1, "sparsity": sparse},
        {"name": "y", "shape": [1, 2], "type": F32},
        {"name": "s", "shape": [3], "type": STR, "buffer": 2},
        {"name": "v", "shape": [2], "type": F32, "variable": True, "buffer": 3},
        {"name": "q", "shape": [3, 1], "type": I8, "buffer": 4, "quant": ([0.5, 0.25, 0.125], [0, 1, 2], 0)},
        {"name": "z", "shape": [1, 2], "type": F32},
    ]
    ops = [{"opcode": 0, "inputs": [0, 1, -1], "outputs": [2]},
           {"opcode": 1, "inputs": [2, 3, 4, 5, -1], "outputs": [6], "intermediates": [2],
            "custom": bytes(flexbuffers.Dumps({"a": [1, 2], "b": "c"}))}]
    return _tfl_model([{"tensors": tensors, "ops": ops, "inputs": [0], "outputs": [6]}],
                      [(FC, None), (CUSTOM, "X")],
                      [b"", np.array([1, 2, 3], np.float32).tobytes(), sbuf, np.array([1, 2], np.float32).tobytes(),
                       ("ext", np.array([1, 2, 3], np.int8).tobytes())],
                      signatures=[{"key": "k", "inputs": [("x", 0)], "outputs": [("z", 6)]}])


def test_rich_model_loads_and_mutations_never_escape() -> None:
    data = _rich_model()
    g = load_tflite(data)
    custom = next(op for op in g.ops.values() if op.name == "tfl.custom")
    assert custom.attrs["custom_options_decoded"] == {"a": [1, 2], "b": "c"}
    assert [o.producer.name for o in custom.operands if o.producer is not None] == [
        "tfl.fully_connected", "tfl.const", "tfl.variable", "tfl.const", "tfl.no_value"]
    q = custom.operands[3].const()
    assert q is not None and q.tolist() == [[1], [2], [3]]
    rng = np.random.default_rng(11)
    for _ in range(600):
        b = bytearray(data)
        if rng.random() < 0.5:
            for _ in range(int(rng.integers(1, 4))):
                b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        else:
            p = int(rng.integers(8, len(b) - 4))
            b[p:p + 4] = rng.integers(0, 256, 4, dtype=np.uint8).tobytes()
        try:
            load_tflite(bytes(b))
        except ModelLoadError as e:
            assert "\n" not in str(e) and len(str(e)) < 1000
    from tf2tosa.converter.tflite_options import decode_flexbuffer

    base = bytes(custom.attrs["custom_options"])
    for _ in range(300):
        b = bytearray(base)
        b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        try:
            decode_flexbuffer(bytes(b))
        except ValueError:  # the documented error for malformed data; anything else is a bug
            pass


def test_newer_schema_case_op_fp8_and_unsupported_types() -> None:
    def case_opts(b: flatbuffers.Builder) -> int:
        v = _ivec(b, [1, 2])
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, v, 0)
        return int(b.EndObject())

    branch = _one_op([0, 0], [1])
    fp8 = np.array([0x38, 0xB8], np.uint8)  # e4m3fn: 1.0, -1.0
    main = {"tensors": [{"name": "i", "shape": [], "type": I32}, {"name": "x", "shape": [2], "type": F32},
                        {"name": "y", "shape": [2], "type": F32}, {"name": "c8", "shape": [2], "type": 21, "buffer": 1},
                        {"name": "z", "shape": [2], "type": F32}],
            "ops": [{"opcode": 1, "inputs": [0, 1], "outputs": [2], "options": (2, 23, case_opts)},
                    {"opcode": 2, "inputs": [2, 3], "outputs": [4]}],
            "inputs": [0, 1], "outputs": [4]}
    model = _tfl_model([main, branch, branch], [(ADD, None), (209, None, 127), (CUSTOM, "Use")],
                       [b"", fp8.tobytes()])
    g = load_tflite(model)
    case = next(op for op in g.ops.values() if op.name == "tfl.stablehlo_case")
    assert case.attrs["branch_subgraph_indices"] == [1, 2]
    assert case.regions == g.source.subgraphs[1:3]
    use = next(op for op in g.ops.values() if op.name == "tfl.custom")
    c8 = use.operands[1].const()
    assert use.operands[1].dtype is DType.FP8E4M3 and c8 is not None
    np.testing.assert_array_equal(c8.astype(np.float32), np.array([1.0, -1.0], np.float32))

    for code, word in ((19, "INT2"), (20, "UINT4"), (77, "unknown")):
        bad = _tfl_model([{"tensors": [{"name": "x", "shape": [2], "type": code}], "ops": [],
                           "inputs": [0], "outputs": [0]}], [], [b""])
        with pytest.raises(ModelLoadError, match=word):
            load_tflite(bad)


def test_zero_scale_only_on_constants() -> None:
    """TFLite gives an all-zero channel of per-channel weights the scale 0.0 (int16x8 DFT matrices do); that loads.
    The same scale on a computed tensor is refused, naming the tensor."""
    def model(zero_on: str) -> bytes:
        tensors = [
            {"name": "x", "shape": [1, 3], "type": I8, "quant": ([0.0 if zero_on == "x" else 0.5], [0], 0)},
            {"name": "w", "shape": [3, 1], "type": I8, "buffer": 1,
             "quant": ([0.25, 0.0 if zero_on == "w" else 0.5, 0.125], [0], 0)},
            {"name": "y", "shape": [1, 3], "type": I8, "quant": ([0.5], [0], 0)},
        ]
        return _tfl_model(
            [{"tensors": tensors, "ops": [{"opcode": 0, "inputs": [0, 1], "outputs": [2]}],
              "inputs": [0], "outputs": [2]}],
            [(CUSTOM, "Foo")], [b"", np.array([1, 0, 3], np.int8).tobytes()])

    g = load_tflite(model("w"))
    op = next(op for op in g.ops.values() if op.name == "tfl.custom")
    q = op.operands[1].type.quant
    assert q is not None and q.scale == (0.25, 0.0, 0.125)
    with pytest.raises(ModelLoadError, match=r"tensor 'x' has scale 0\.0 \(scales must be positive and finite\)"):
        load_tflite(model("x"))
