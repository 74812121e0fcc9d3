"""Tests of the NNEF frontend's loading (tf2tosa.converter.nnef).

* nnef-tools' conversions of the bundled ``.tflite`` samples (cached by ``nnef_convert``),
  checked against the source model as our ``.tflite`` frontend reads it: inputs, outputs,
  every weight tensor's data and quantization, and the layer counts;
* hand-written NNEF text: nested user fragments, literals, constants, ``graph.quant``
  algorithms, archives and bare files, tensor files written here byte by byte;
* each bad input ending in one ModelLoadError naming file, op and tensor.
"""

from __future__ import annotations

import io
import os
import re
import struct
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import nnef_convert
import numpy as np
import pytest

from tf2tosa.converter.nnef import COMPOUND_OPS, PRIMITIVE_OPS, load_nnef, read_dat
from tf2tosa.converter.tflite import load_tflite
from tf2tosa.errors import MissingExtraError, ModelLoadError
from tf2tosa.ir.graph import Graph
from tf2tosa.ir.types import DType

nnef = pytest.importorskip("nnef")

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "models" / "samples"
requires_nnef_tools = pytest.mark.skipif(not nnef_convert.available(), reason="nnef-tools is not installed")


# --------------------------------------------------------------------------- writing models
def dat_bytes(arr: np.ndarray, code: int, bits: int, *, signed_flag: int = 0, length: int | None = None) -> bytes:
    """An NNEF tensor file: 128-byte header (spec §5.2, Khronos item-type codes), then the data."""
    arr = np.asarray(arr)
    data = np.packbits(arr.reshape(-1).astype(np.uint8)).tobytes() if bits == 1 else arr.tobytes()
    shape = list(arr.shape) + [0] * (8 - arr.ndim)
    head = bytes([0x4E, 0xEF, 1, 0]) + struct.pack("<II", len(data) if length is None else length, arr.ndim)
    head += struct.pack("<8I", *shape) + struct.pack("<III", bits, code, signed_flag)
    return head + bytes(128 - len(head)) + data


FLOAT, UINT, QUINT, QINT, INT, BOOL = range(6)


def write_model(folder: Path, text: str, tensors: dict[str, bytes] | None = None, quant: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text(text)
    if quant is not None:
        (folder / "graph.quant").write_text(quant)
    for label, data in (tensors or {}).items():
        f = folder / f"{label}.dat"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
    return folder


def opcodes(g: Graph) -> list[str]:
    return [op.opcode for op in g.topological_order() if op.opcode != "const"]


# --------------------------------------------------------------------------- nnef-tools output
def _tflite_weights(g: Graph) -> list[tuple[bytes, str, tuple[float, ...] | None, tuple[int, ...] | None]]:
    out = []
    for op in g.ops.values():
        if op.name == "tfl.const" and op.result.uses:
            v = op.result
            q = v.type.quant
            if q is None and v.dtype.is_int:  # shape operands (reshape): attributes in NNEF
                continue
            arr = np.ascontiguousarray(op.attrs["values"])
            out.append((arr.tobytes(), v.dtype.value, q.scale if q else None, q.zero_point if q else None))
    return sorted(out, key=repr)


def _nnef_weights(g: Graph) -> list[tuple[bytes, str, tuple[float, ...] | None, tuple[int, ...] | None]]:
    out = []
    for op in g.ops.values():
        if op.name == "nnef.const" and op.attrs["kind"] == "variable":
            v = op.result
            q = v.type.quant
            arr = np.ascontiguousarray(op.attrs["values"])
            out.append((arr.tobytes(), v.dtype.value, q.scale if q else None, q.zero_point if q else None))
    return sorted(out, key=repr)


def _close_scales(a: tuple[float, ...] | None, b: tuple[float, ...] | None) -> bool:
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and bool(np.all(np.asarray(a, np.float32) == np.asarray(b, np.float32)))


@requires_nnef_tools
@pytest.mark.parametrize("sample", ["small_cnn_f32", "small_cnn_int8", "depthwise_f32", "mlp_f32", "mlp_uint8io"])
def test_nnef_tools_sample_matches_source(sample: str) -> None:
    src = SAMPLES / f"{sample}.tflite"
    t = load_tflite(str(src))
    g = load_nnef(nnef_convert.tflite_to_nnef(src))
    assert g.source.format == "nnef" and g.source.nnef_version == "1.0"

    # inputs and outputs: nnef-tools keeps the NHWC interface and transposes inside the graph
    assert [v.shape for v in g.inputs] == [v.shape for v in t.inputs]
    assert [v.shape for v in g.outputs] == [v.shape for v in t.outputs]
    for ours, theirs in zip(g.inputs + g.outputs, t.inputs + t.outputs):
        assert ours.dtype == theirs.dtype
        assert (ours.type.quant is None) == (theirs.type.quant is None)
        if ours.type.quant is not None:
            assert _close_scales(ours.type.quant.scale, theirs.type.quant.scale)
            assert ours.type.quant.zero_point == theirs.type.quant.zero_point

    # every weight tensor: the same bytes, element type and quantization
    ow, tw = _nnef_weights(g), _tflite_weights(t)
    assert len(ow) == len(tw)
    unmatched = list(tw)
    for data, dt, scale, zp in ow:
        hit = [k for k, (d2, t2, s2, z2) in enumerate(unmatched)
               if d2 == data and t2 == dt and _close_scales(scale, s2) and zp == z2]
        assert hit, f"no source tensor matches an NNEF variable of type {dt}"
        unmatched.pop(hit[0])

    # layers: a conv per (depthwise) convolution, a matmul per fully-connected layer
    tc = Counter(op.name for op in t.ops.values())
    oc = Counter(op.name for op in g.ops.values())
    assert oc["nnef.conv"] == tc["tfl.conv_2d"] + tc["tfl.depthwise_conv_2d"]
    assert oc["nnef.matmul"] == tc["tfl.fully_connected"]
    for op in g.ops.values():
        assert op.dialect == "nnef"
        assert op.opcode in PRIMITIVE_OPS or op.opcode == "const"
    depthwise = [op for op in g.ops.values() if op.name == "nnef.conv" and op.attrs["groups"] == 0]
    assert len(depthwise) == tc["tfl.depthwise_conv_2d"]
    for op in depthwise:  # NCHW data, OIHW filter with one input channel per group (and a multiplier)
        x, f = op.operands[0], op.operands[1]
        assert f.shape[1] == 1 and f.shape[0] % x.shape[1] == 0 and op.result.shape[1] == f.shape[0]


@requires_nnef_tools
def test_nnef_tools_int8_activations_and_per_channel_axes() -> None:
    g = load_nnef(nnef_convert.tflite_to_nnef(SAMPLES / "small_cnn_int8.tflite"))
    by = {v.name: v for v in g.values()}
    assert by["external1"].type.quant is not None and by["external1"].dtype is DType.INT8
    # a conv output: int8, per tensor, read from graph.quant
    conv = by["conv1"]
    assert conv.dtype is DType.INT8 and conv.type.quant is not None
    q = g.source.quantization["conv1"]
    assert q["op-name"] == "zero_point_linear_quantize" and q["bits"] == 8
    assert conv.type.quant.zero_point == (int(q["zero_point"]),)
    assert np.float32(conv.type.quant.scale[0]) == np.float32(q["scale"])
    # per-channel: the [1, H, W, C] depthwise filter on its last axis, OHWI filters and biases on theirs
    for op in g.ops.values():
        if op.name == "nnef.const" and op.attrs["kind"] == "variable" and op.result.type.quant is not None:
            qp = op.result.type.quant
            if qp.per_channel:
                assert op.result.shape[qp.axis] == len(qp.scale)
    # every activation quantization of the source appears, and no other
    def acts(graph: Graph) -> set[tuple[str, float, int]]:
        return {(v.dtype.value, float(np.float32(v.type.quant.scale[0])), v.type.quant.zero_point[0])
                for v in graph.values() if not v.is_const and v.type.quant is not None and not v.type.quant.per_channel}

    assert acts(g) == acts(load_tflite(str(SAMPLES / "small_cnn_int8.tflite")))
    dw = [op for op in g.ops.values() if op.name == "nnef.conv" and op.attrs["groups"] == 0][0]
    filt = dw.operands[1].producer.operands[0]  # the variable under the transpose
    assert filt.shape[0] == 1 and filt.type.quant.axis == 3
    bias = [op for op in g.ops.values() if op.name == "nnef.conv"][0].operands[2]
    assert bias.dtype is DType.INT32 and bias.type.quant.axis == 1


@requires_nnef_tools
def test_keep_leaves_compound_ops_whole() -> None:
    path = nnef_convert.tflite_to_nnef(SAMPLES / "small_cnn_int8.tflite")
    g = load_nnef(path, keep={"relu", "max_pool", "softmax", "linear", "mean_reduce", "clamp"})
    codes = Counter(opcodes(g))
    assert codes["relu"] == 2 and codes["max_pool"] == 1 and codes["softmax"] == 1 and codes["linear"] == 1
    assert codes["clamp"] == 1 and codes["mean_reduce"] == 1
    assert "select" not in codes and "argmax_pool" not in codes
    sm = [op for op in g.ops.values() if op.opcode == "softmax"][0]
    assert sm.attrs["axes"] == [1] and sm.result.dtype is DType.INT8 and sm.result.type.quant is not None
    assert g.source.kept == ["clamp", "linear", "max_pool", "mean_reduce", "relu", "softmax"]
    with pytest.raises(ValueError, match="non-compound"):
        load_nnef(path, keep={"conv"})


def test_primitive_and_compound_lists_match_the_parser() -> None:
    """The two lists are the parser's standard library: bodiless fragments and fragments with a body."""
    header = Path(nnef.__file__).parent / "cpp" / "include" / "nnef" / "comp" / "stdlib_source.h"
    if not header.is_file():
        pytest.skip("the nnef package ships no stdlib source")
    src = header.read_text()
    body = "".join(re.findall(r'R"STDLIB\((.*?)\)STDLIB"', src, re.S))
    prims, comps = set(), set()
    for m in re.finditer(r"fragment\s+(\w+)", body):
        arrow = body.index("->", m.end())
        ends = [i for i in (body.find(";", arrow), body.find("{", arrow)) if i >= 0]
        (prims if body[min(ends)] == ";" else comps).add(m.group(1))
    assert prims == PRIMITIVE_OPS
    assert comps == COMPOUND_OPS


# --------------------------------------------------------------------------- hand-written text
NESTED = """version 1.0;
extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;

# a user fragment calling a standard compound (clamp) and used inside another one
fragment scaled_relu6( x: tensor<scalar>, a: scalar ) -> ( y: tensor<scalar> )
{
    y = clamp(x * a, 0.0, 6.0);
}

fragment block( x: tensor<scalar>, w: tensor<scalar> ) -> ( y: tensor<scalar>, z: tensor<scalar> )
{
    t = scaled_relu6(conv(x, w, groups = 1), a = 2.0);
    y = t + x;
    z = relu(t);
}

graph net( input ) -> ( out1, out2, mask )
{
    input = external<scalar>(shape = [1, 2, 4, 4]);
    w = variable<scalar>(shape = [2, 2, 1, 1], label = 'weights/w');
    k = constant<integer>(shape = [2], value = [3]);
    (out1, out2) = block(input, w);
    flag = variable<logical>(shape = [1, 2, 1, 1], label = 'flag');
    mask = and(flag, out2 > 1.0);
}
"""


def _nested_model(tmp_path: Path) -> Path:
    w = np.arange(4, dtype=np.float32).reshape(2, 2, 1, 1)
    flag = np.array([True, False]).reshape(1, 2, 1, 1)
    return write_model(tmp_path / "nested", NESTED, {"weights/w": dat_bytes(w, FLOAT, 32),
                                                     "flag": dat_bytes(flag, BOOL, 1)})


def test_nested_user_fragments_expand_to_primitives(tmp_path: Path) -> None:
    g = load_nnef(_nested_model(tmp_path))
    assert g.name == "net"
    assert g.source.nnef_extensions == ["KHR_enable_fragment_definitions", "KHR_enable_operator_expressions"]
    assert {"scaled_relu6", "block"} <= set(g.source.expanded)
    # conv, x*2, clamp → min/max → lt+select, gt+select, t + x, relu → gt+select, out2 > 1, and
    assert opcodes(g) == ["conv", "mul", "lt", "select", "gt", "select", "add", "gt", "select", "gt", "and"]
    assert [v.name for v in g.outputs] == ["out1", "out2", "mask"]
    assert [v.shape for v in g.outputs] == [(1, 2, 4, 4)] * 3
    assert [v.dtype for v in g.outputs] == [DType.FP32, DType.FP32, DType.BOOL]
    consts = {op.result.name: op for op in g.ops.values() if op.name == "nnef.const"}
    w = consts["w"]
    assert w.attrs["kind"] == "variable" and w.attrs["label"] == "weights/w" and w.location == "VARIABLE:weights/w"
    np.testing.assert_array_equal(w.attrs["values"], np.arange(4, dtype=np.float32).reshape(2, 2, 1, 1))
    np.testing.assert_array_equal(consts["flag"].attrs["values"].reshape(-1), [True, False])
    k = consts["k"]
    assert k.attrs["kind"] == "constant" and k.result.dtype is DType.INT32
    np.testing.assert_array_equal(k.attrs["values"], [3, 3])
    # conv's default bias and every literal scalar are rank-0 constants, one per distinct value
    lits = sorted(float(op.attrs["values"]) for op in g.ops.values() if op.attrs.get("kind") == "literal")
    assert lits == [0.0, 1.0, 2.0, 6.0]
    conv = [op for op in g.ops.values() if op.name == "nnef.conv"][0]
    assert conv.attrs["input_names"] == ["input", "filter", "bias"] and conv.operands[2].shape == ()
    assert conv.attrs["groups"] == 1 and conv.attrs["border"] == "constant"


def test_multi_output_and_list_operands(tmp_path: Path) -> None:
    text = """version 1.0;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [1, 6, 2]);
    [a, b, c] = split(x, axis = 1, ratios = [1, 1, 1]);
    y = concat([c, a, b], axis = 1);
}
"""
    g = load_nnef(write_model(tmp_path / "m", text) / "graph.nnef")  # a bare graph.nnef
    split = [op for op in g.ops.values() if op.opcode == "split"][0]
    assert split.attrs["output_names"] == ["values[0]", "values[1]", "values[2]"]
    assert [r.shape for r in split.results] == [(1, 2, 2)] * 3
    concat = [op for op in g.ops.values() if op.opcode == "concat"][0]
    assert concat.attrs["input_names"] == ["values[0]", "values[1]", "values[2]"]
    assert [v.name for v in concat.operands] == ["c", "a", "b"]
    assert g.outputs[0].shape == (1, 6, 2)


@pytest.mark.parametrize("wrapped", [True, False])
def test_archive(tmp_path: Path, wrapped: bool) -> None:
    folder = _nested_model(tmp_path)
    arc = tmp_path / "model.tgz"
    with tarfile.open(arc, "w:gz") as tar:
        for f in sorted(folder.rglob("*")):
            tar.add(f, arcname=str(Path("model") / f.relative_to(folder)) if wrapped else str(f.relative_to(folder)))
    g = load_nnef(arc)
    assert opcodes(g) == opcodes(load_nnef(folder))
    assert g.source.file == f"{arc}:graph.nnef"


def test_dat_formats_and_the_reference_writer(tmp_path: Path) -> None:
    """Our reader on files written by the Khronos package's own writer."""
    cases: list[tuple[np.ndarray, bool]] = [
        (np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4), False),
        (np.arange(-5, 5, dtype=np.int8).reshape(2, 5), True),
        (np.arange(7, dtype=np.uint8), True),
        (np.arange(-3, 3, dtype=np.int32), False),
        (np.array([[True, False, True], [False, False, True], [True, True, True]]), False),
        (np.arange(6, dtype=np.float16), False),
    ]
    for k, (arr, quantized) in enumerate(cases):
        f = tmp_path / f"t{k}.dat"
        with open(f, "wb") as fh:
            nnef.write_tensor(fh, arr, quantized=quantized)
        d = read_dat(f)
        assert d.data.dtype == arr.dtype and d.data.shape == arr.shape
        np.testing.assert_array_equal(d.data, arr)
        assert d.quantized == quantized


QUANT_TEXT = """version 1.0;
graph Q( x ) -> ( y, z )
{
    x = external<scalar>(shape = [1, 3]);
    w = variable<scalar>(shape = [2, 3], label = 'w');
    b = variable<scalar>(shape = [1, 2], label = 'b');
    y = linear(x, w, b);
    z = exp(y);
}
"""


def test_graph_quant_algorithms(tmp_path: Path) -> None:
    w = np.array([[0.5, -0.25, 0.125], [1.0, 0.0, -1.0]], dtype=np.float32)
    b = np.array([[3, -4]], dtype=np.int32)
    quant = "\n".join([
        '"x": linear_quantize(min = 0.0, max = 2.55, bits = 8);',
        # float data quantized on load: round(w / 0.25) + 0, halves away from zero
        '"w": zero_point_linear_quantize(zero_point = 0, scale = 0.25, bits = 8, signed = true, symmetric = true);',
        '"b": zero_point_linear_quantize(zero_point = [0, 0], scale = [0.5, 0.25], bits = 32, signed = true,'
        ' symmetric = false);',
        '"y": min_max_linear_quantize(min = -1.0, max = 1.0, bits = 8, signed = true, symmetric = true);',
        '"z": logarithmic_quantize(max = 8.0, bits = 4);',
    ]) + "\n"
    folder = write_model(tmp_path / "q", QUANT_TEXT, {"w": dat_bytes(w, FLOAT, 32),
                                                       "b": dat_bytes(b, QINT, 32)}, quant)
    g = load_nnef(folder, keep={"linear"})
    by = {v.name: v for v in g.values()}
    x = by["x"]
    assert x.dtype is DType.UINT8 and x.type.quant.zero_point == (0,)
    assert x.type.quant.scale[0] == pytest.approx(0.01, rel=1e-6)
    wv = by["w"]
    assert wv.dtype is DType.INT8 and wv.type.quant.scale == (0.25,)
    np.testing.assert_array_equal(wv.const(), [[2, -1, 1], [4, 0, -4]])
    bv = by["b"]
    assert bv.dtype is DType.INT32 and bv.type.quant.axis == 1 and bv.type.quant.scale == (0.5, 0.25)
    np.testing.assert_array_equal(bv.const(), b)
    y = by["y"]  # symmetric signed 8 bits over [-1, 1]: 254 steps, zero point 0
    assert y.dtype is DType.INT8 and y.type.quant.zero_point == (0,)
    assert y.type.quant.scale[0] == pytest.approx(2 / 254)
    # logarithmic: not affine, so the value stays float and an explicit op follows it
    logq = [op for op in g.ops.values() if op.opcode == "logarithmic_quantize"]
    assert len(logq) == 1 and logq[0].operands[0] is by["z"] and logq[0].attrs == {
        "max": 8.0, "bits": 4, "input_names": ["x"], "output_names": ["y"]}
    assert g.outputs[1] is logq[0].result and by["z"].dtype is DType.FP32
    assert set(g.source.quantization) == {"x", "w", "b", "y", "z"}


# --------------------------------------------------------------------------- bad input
def _err(path: Path, **kw: Any) -> ModelLoadError:
    with pytest.raises(ModelLoadError) as info:
        load_nnef(path, **kw)
    assert "\n" not in str(info.value)
    return info.value


def test_syntax_error_line_and_column(tmp_path: Path) -> None:
    text = "version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external(shape = [1]);\n    y = relu(x)\n}\n"
    e = _err(write_model(tmp_path / "s", text))
    assert e.message == "parse error at line 6, column 1: expected token ';', found '}'"
    assert e.file is not None and e.file.endswith("graph.nnef")


def test_quant_file_syntax_error_names_graph_quant(tmp_path: Path) -> None:
    text = "version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external(shape = [1]);\n    y = relu(x);\n}\n"
    e = _err(write_model(tmp_path / "s", text, quant='"x": linear_quantize(min = 0.0, max = 1.0);\n'))
    assert e.message.startswith("parse error at line 1, column 42: missing argument")
    assert e.file is not None and e.file.endswith("graph.quant")


W_TEXT = """version 1.0;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [1, 4]);
    w = variable<scalar>(shape = [2, 4], label = 'layer/w');
    y = matmul(x, w, transposeB = true);
}
"""


def test_missing_dat(tmp_path: Path) -> None:
    e = _err(write_model(tmp_path / "m", W_TEXT))
    assert e.message == "missing tensor file" and e.tensor == "w"
    assert e.file is not None and e.file.endswith("layer/w.dat")


@pytest.mark.parametrize("cut", [50, 128 + 20])
def test_short_dat(tmp_path: Path, cut: int) -> None:
    data = dat_bytes(np.zeros((2, 4), np.float32), FLOAT, 32)[:cut]
    e = _err(write_model(tmp_path / "m", W_TEXT, {"layer/w": data}))
    assert "short" in e.message and e.tensor == "w" and e.file is not None and e.file.endswith("w.dat")


def test_dat_header_shape_disagrees(tmp_path: Path) -> None:
    e = _err(write_model(tmp_path / "m", W_TEXT, {"layer/w": dat_bytes(np.zeros((4, 2), np.float32), FLOAT, 32)}))
    assert e.message == "tensor file shape [4, 2] differs from the graph's [2, 4]"
    assert e.op == "variable#1" and e.tensor == "w"


@pytest.mark.parametrize("data, code, bits, words", [
    (np.zeros((2, 4), bool), BOOL, 1, "logical items, the graph declares scalar"),
    (np.zeros((2, 4), np.int8), QINT, 8, "graph.quant gives no quantization"),
    (np.zeros((2, 4), np.int32), INT, 32, "graph.quant gives no quantization"),
])
def test_dat_header_type_disagrees(tmp_path: Path, data: np.ndarray, code: int, bits: int, words: str) -> None:
    e = _err(write_model(tmp_path / "m", W_TEXT, {"layer/w": dat_bytes(data, code, bits)}))
    assert words in e.message and e.tensor == "w"


def test_dat_length_field_disagrees(tmp_path: Path) -> None:
    data = dat_bytes(np.zeros((2, 4), np.float32), FLOAT, 32, length=16)
    e = _err(write_model(tmp_path / "m", W_TEXT, {"layer/w": data}))
    assert "header says 16 data bytes" in e.message


def test_dat_bad_magic(tmp_path: Path) -> None:
    data = b"XX" + dat_bytes(np.zeros((2, 4), np.float32), FLOAT, 32)[2:]
    assert "magic" in _err(write_model(tmp_path / "m", W_TEXT, {"layer/w": data})).message


def test_dat_bits_disagree_with_graph_quant(tmp_path: Path) -> None:
    quant = ('"w": zero_point_linear_quantize(zero_point = 0, scale = 0.5, bits = 8, signed = true, '
             'symmetric = false);\n')
    data = dat_bytes(np.zeros((2, 4), np.int16), QINT, 16)
    e = _err(write_model(tmp_path / "m", W_TEXT, {"layer/w": data}, quant))
    assert "16-bit" in e.message and "8-bit" in e.message and e.tensor == "w"


@pytest.mark.parametrize("entry, words", [
    ('"y": linear_quantize(min = -1.0, max = 1.0, bits = 8);', "is not an integer"),
    ('"y": zero_point_linear_quantize(zero_point = 0, scale = 0.5, bits = 12, signed = true, symmetric = false);',
     "no integer type for 12-bit signed"),
    ('"y": zero_point_linear_quantize(zero_point = [0, 0, 0], scale = [0.5, 0.5, 0.5], bits = 8, signed = true,'
     ' symmetric = false);', "match no dimension"),
])
def test_unrepresentable_quantization(tmp_path: Path, entry: str, words: str) -> None:
    data = {"layer/w": dat_bytes(np.zeros((2, 4), np.float32), FLOAT, 32)}
    e = _err(write_model(tmp_path / "m", W_TEXT, data, entry + "\n"))
    assert words in e.message and e.tensor == "y" and e.op == "matmul#2"
    assert e.file is not None and e.file.endswith("graph.quant")


def test_custom_operations_listed_at_once(tmp_path: Path) -> None:
    text = """version 1.0;
extension KHR_enable_fragment_definitions;
fragment foo( x: tensor<scalar> ) -> ( y: tensor<scalar> );
fragment bar( x: tensor<scalar> ) -> ( y: tensor<scalar> );
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [1, 4]);
    a = foo(x);
    b = bar(a);
    y = foo(b);
}
"""
    e = _err(write_model(tmp_path / "m", text))
    assert e.message == "operations without a definition (custom fragments): bar x1, foo x2"


def test_not_a_model(tmp_path: Path) -> None:
    assert _err(tmp_path / "absent").message == "no such file or directory"
    (tmp_path / "empty").mkdir()
    assert _err(tmp_path / "empty").message == "directory holds no graph.nnef"
    arc = tmp_path / "x.tgz"
    with tarfile.open(arc, "w:gz") as tar:
        info = tarfile.TarInfo("readme.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    assert _err(arc).message == "archive holds no graph.nnef"


def test_names_kept_and_literals_out_of_the_way(tmp_path: Path) -> None:
    text = """version 1.0;
graph G( b, literal ) -> ( literal_1 )
{
    literal = external<scalar>(shape = [1, 2]);
    b = external<scalar>(shape = [1, 2]);
    m = max(literal, 0.5);
    literal_1 = add(m, b);
}
"""
    g = load_nnef(write_model(tmp_path / "m", text), keep={"max"})
    assert [v.name for v in g.inputs] == ["b", "literal"]  # the graph's order, not the declarations'
    assert [v.name for v in g.outputs] == ["literal_1"]
    lit = [op.result for op in g.ops.values() if op.attrs.get("kind") == "literal"]
    assert [v.name for v in lit] == ["_literal"] and float(lit[0].const()) == 0.5


def test_missing_parser_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = write_model(tmp_path / "m", W_TEXT)
    monkeypatch.setitem(sys.modules, "nnef", None)
    with pytest.raises(MissingExtraError, match=r"tf2tosa\[nnef\]"):
        load_nnef(folder)


def test_loading_never_imports_tensorflow(tmp_path: Path) -> None:
    folder = _nested_model(tmp_path)
    code = ("import sys; from tf2tosa.converter.nnef import load_nnef; load_nnef(sys.argv[1]); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'ai_edge_litert')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- the zoo (marker "zoo")
#: zoo models whose nnef-tools output is not valid NNEF, with the parser's complaint
INVALID_NNEF_TOOLS_OUTPUT = {
    "gru-int8": "argument of type 'integer' cannot be cast",  # sub(127, sigmoid1): the quantized 1.0
    "kws_end_to_end-int8": "argument rank mismatch (3 vs 2)",  # linear on a rank-3 input
    "log_mel_frontend-int8": "argument rank mismatch (3 vs 2)",
    "recommender-float32": "'tensor<integer>' cannot be cast",  # lt on integer tensors
    "recommender-int8": "'tensor<integer>' cannot be cast",
    "shufflenet_v2_mini-int8": "shapes of 'values' must be identical",  # concat of NHWC and NCHW
}


def _zoo_models() -> list[Path]:
    zoo = ROOT / ".cache" / "zoo"
    return sorted({*zoo.glob("*-float32-*.tflite"), *zoo.glob("*-int8-*.tflite")})


@pytest.mark.zoo
@requires_nnef_tools
@pytest.mark.parametrize("src", _zoo_models(), ids=lambda p: p.stem.rsplit("-", 1)[0])
def test_zoo_model_through_nnef_tools(src: Path) -> None:
    key = src.stem.rsplit("-", 1)[0]
    try:
        path = nnef_convert.tflite_to_nnef(src)
    except nnef_convert.NNEFToolsError as e:
        pytest.skip(str(e))
    if key in INVALID_NNEF_TOOLS_OUTPUT:
        with pytest.raises(ModelLoadError, match=re.escape(INVALID_NNEF_TOOLS_OUTPUT[key])):
            load_nnef(path)
        return
    g = load_nnef(path)
    t = load_tflite(str(src))
    ow, tw = _nnef_weights(g), _tflite_weights(t)
    assert len(ow) == len(tw)
    for data, dt, scale, zp in ow:
        hit = [k for k, (d2, t2, s2, z2) in enumerate(tw)
               if d2 == data and t2 == dt and _close_scales(scale, s2) and zp == z2]
        assert hit
        tw.pop(hit[0])


def test_variables_are_views_of_their_mapped_files(tmp_path: Path) -> None:
    """A variable's data is a read-only view of its mapped ``.dat`` file, as a ``.tflite``'s weights are of the
    model file: converting a model with 8 MiB of float32 weights allocates well under that (before, each file was
    read, copied by ``astype`` and copied again as a TOSA constant: a 98 MB ResNet50 NNEF peaked at 270 MB RSS,
    75 MB now).  Inside a ``.tgz`` too (the unpacked files are removed; their maps stay valid).  Same program."""
    import tracemalloc

    import tf2tosa
    from tf2tosa.ir.mapped import file_region

    rng = np.random.default_rng(1)
    w = rng.standard_normal((1024, 2048)).astype(np.float32)
    folder = write_model(tmp_path / "m", "version 1.0;\ngraph G( x ) -> ( y )\n{\n"
                         "    x = external<scalar>(shape = [1, 2048]);\n"
                         "    w = variable<scalar>(shape = [1024, 2048], label = 'w');\n"
                         "    y = linear(x, w, 0.0);\n}\n", {"w": dat_bytes(w, FLOAT, 32)})
    g = load_nnef(folder)
    (data,) = [op.attrs["values"] for op in g.ops.values() if np.asarray(op.attrs.get("values", 0)).size == w.size]
    assert file_region(data) is not None and not data.flags.writeable
    np.testing.assert_array_equal(data, w)
    tf2tosa.convert(folder)  # (warm)
    tracemalloc.start()
    m = tf2tosa.convert(folder)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < w.nbytes // 4, peak
    arc = tmp_path / "m.tgz"
    with tarfile.open(arc, "w:gz") as tar:
        for f in sorted(folder.rglob("*")):
            tar.add(f, arcname=str(f.relative_to(folder)))
    assert tf2tosa.convert(arc).to_bytes() == m.to_bytes()
    x = rng.standard_normal((1, 2048)).astype(np.float32)
    from tf2tosa.executor import run

    got = list(run(m.graph, [x]).values())[0]
    np.testing.assert_allclose(got, x @ w.T, rtol=1e-4, atol=1e-3)


def test_many_weight_files_load_under_a_low_open_file_limit(tmp_path: Path) -> None:
    """A mapped ``.dat`` file holds a file descriptor while its weight is in use: a model with more large weight
    files than the process may open still loads (the files past the map budget are read), and converts to the same
    program as with every file mapped."""
    n = 150
    body = "".join(f"    w{i} = variable<scalar>(shape = [1, 16384], label = 'w{i}');\n"
                   f"    y{i + 1} = add(y{i}, w{i});\n" for i in range(n))
    text = f"version 1.0;\ngraph G( y0 ) -> ( y{n} )\n{{\n    y0 = external<scalar>(shape = [1, 16384]);\n{body}}}\n"
    rng = np.random.default_rng(2)
    folder = write_model(tmp_path / "m", text, {f"w{i}": dat_bytes(rng.standard_normal((1, 16384)).astype(np.float32),
                                                                    FLOAT, 32) for i in range(n)})
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
            "import tf2tosa\n"
            "sys.stdout.buffer.write(tf2tosa.convert(sys.argv[1]).to_bytes())\n")
    proc = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    import tf2tosa
    from tf2tosa.converter.nnef import MapBudget, read_dat

    assert proc.stdout == tf2tosa.convert(folder).to_bytes()
    budget = MapBudget(left=1)
    a, b = read_dat(folder / "w0.dat", budget=budget), read_dat(folder / "w1.dat", budget=budget)
    from tf2tosa.ir.mapped import file_region

    assert file_region(a.data) is not None and file_region(b.data) is None  # mapped, then read
    assert budget.left == 0 and np.array_equal(a.data, read_dat(folder / "w0.dat", budget=budget).data)
