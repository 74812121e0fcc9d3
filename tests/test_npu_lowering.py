"""The NPU-efficient lowerings stay bit-exact (issue 15 item 3): each is checked against LiteRT's reference kernels
(BUILTIN_REF) on models that exercise it, and the emitted op mix is asserted so the test fails if the lowering
goes back to the costlier form.

* explicit PAD of the input zero point folded into CONV2D / DEPTHWISE_CONV2D padding (``passes/fold_pad.py``),
  not into pools (TFLite counts the padded positions of an explicit PAD, the spec's pools do not);
* int8 ADD/SUB: one input RESCALE where the ADD's int8 output stays exact on all 65536 code pairs
  (``quant.rescale.joint_add_rescales``);
* int8 bilinear resize: one DOUBLE_ROUND RESCALE for TFLite's rounding where the weights make every sum even;
* int8 softmax exp tables as byte-split TABLEs instead of GATHER on large tensors (``quant.elementwise``);
* int8 MEAN over H and W summed by one all-ones DEPTHWISE_CONV2D instead of REDUCE_SUMs (``tfl_reduce.mean``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tf2tosa
from tf2tosa.quant.rescale import apply_scale_32, merged_widen_rescale
from tf2tosa.quant.tflite_reference import mbqm

pytest.importorskip("tensorflow")

from tests import modelgen  # noqa: E402

RNG = np.random.default_rng(15)


def _model(name: str, fn: Any, shape: tuple[int, ...], quant: str | None, maker: Any) -> bytes:
    """A cached .tflite of ``fn`` (``maker``, the function that built ``fn``, enters the cache key)."""
    return modelgen.cached(f"npu_lowering/{name}-{quant}", lambda q: modelgen.convert(
        fn, [(shape, "float32")], quant=q, ranges=(-1.0, 1.0)), {"q": quant}, extra=(maker,))


def _pad_conv(kind: str) -> Any:
    tf = modelgen._tf()
    rng = np.random.default_rng(3)
    w = rng.normal(0, 0.4, (3, 3, 4, 6)).astype(np.float32)
    w_dw = rng.normal(0, 0.4, (3, 3, 4, 1)).astype(np.float32)

    def fn(x: Any) -> Any:
        y = tf.pad(x, [[0, 0], [2, 1], [0, 3], [0, 0]])
        if kind == "conv":
            return tf.nn.conv2d(y, w, 1, "VALID")
        if kind == "depthwise":
            return tf.nn.depthwise_conv2d(y, w_dw, [1, 1, 1, 1], "VALID")
        if kind == "pad_one":  # a pad value that is not the zero point: stays a PAD
            return tf.nn.conv2d(tf.pad(x, [[0, 0], [2, 1], [0, 3], [0, 0]], constant_values=0.75), w, 1, "VALID")
        return tf.nn.avg_pool2d(y, 3, 1, "VALID")  # "avgpool": stays a PAD
    return fn


@pytest.mark.parametrize("quant", ["int8", None])
@pytest.mark.parametrize("kind", ["conv", "depthwise", "avgpool", "pad_one"])
def test_pad_folding_bit_exact(kind: str, quant: str | None) -> None:
    buf = _model(f"pad_{kind}", _pad_conv(kind), (1, 8, 8, 4), quant, _pad_conv)
    m = tf2tosa.convert(buf)
    pads = m.graph.op_counts().get("tosa.PAD", 0)
    if kind in ("conv", "depthwise"):
        assert pads == 0, m.graph.op_counts()
        conv = next(op for op in m.graph.topological_order() if op.opcode in ("CONV2D", "DEPTHWISE_CONV2D"))
        assert list(conv.attrs["pad"]) == [2, 1, 0, 3]
    else:
        assert pads == 1, m.graph.op_counts()
    report = m.verify(num=3, oracle="ref")
    assert report.ok, report
    if quant:
        assert all(o.mismatches == 0 for o in report.outputs), report


def test_merged_add_input_rescale_is_exact_on_every_code() -> None:
    """The one-RESCALE form equals TFLite's ``MBQM((x - zp)·2^20, m, e)`` (numpy from the reference kernel) on all
    256 codes, for the larger-scale input (factor 1/2) of random scale pairs; a refusal keeps the two steps."""
    from tf2tosa.quant.scale import quantize_multiplier

    codes = np.arange(-128, 128)
    merged_big = 0
    for _ in range(50):
        s1, s2 = (float(np.float32(s)) for s in RNG.uniform(0.002, 0.2, 2))
        zp = int(RNG.integers(-128, 128))
        twice = 2.0 * max(s1, s2)
        for s in (s1, s2):
            got = merged_widen_rescale(codes, zp, 20, s / twice, "DOUBLE_ROUND")
            if got is None:
                continue
            m, e = quantize_multiplier(s / twice)
            want = mbqm((codes - zp) << 20, m, e)
            mult, shift, mode = got
            assert np.array_equal(apply_scale_32(codes - zp, mult, shift, mode == "DOUBLE_ROUND"), want)
            merged_big += s == max(s1, s2)
    assert merged_big == 50


#: the quantization (s1, zp1, s2, zp2, s_out, zp_out) of MobileNetV2 1.0-224's first residual ADD, whose smaller-scale
#: input has no one-RESCALE form exact on every code (``merged_widen_rescale`` refuses it)
MNV2_ADD = (0.044561393558979034, 6, 0.06744753569364548, 7, 0.06744753569364548, 7)


def _joint_case(subtract: bool, rng: np.random.Generator) -> tuple[float, int, float, int, float, int]:
    s1, s2 = (float(np.float32(s)) for s in rng.uniform(0.002, 0.2, 2))
    so = float(np.float32((s1 + s2) * rng.uniform(0.4, 1.6)))
    return s1, int(rng.integers(-128, 128)), s2, int(rng.integers(-128, 128)), so, int(rng.integers(-128, 128))


def _add_pipeline(case: tuple[float, int, float, int, float, int], subtract: bool, bounds: tuple[int, int],
                  singles: list[Any]) -> np.ndarray:
    """The emitted int8 ADD/SUB on all 65536 code pairs, from the spec's apply_scale_32: one RESCALE per input
    where ``singles`` gives one, else ``(x - zp)·2^20`` then TFLite's multiplier (DOUBLE_ROUND); i32 ADD/SUB;
    the output RESCALE; CLAMP."""
    from tf2tosa.quant.scale import compute_scale_32

    s1, z1, s2, z2, so, zo = case
    twice = 2.0 * max(s1, s2)
    codes = np.arange(-128, 128, dtype=np.int64)
    vals = []
    for zp, s, one in ((z1, s1, singles[0]), (z2, s2, singles[1])):
        if one is not None:
            vals.append(apply_scale_32(codes - zp, one[0], one[1], one[2] == "DOUBLE_ROUND"))
        else:
            m, sh = compute_scale_32(s / twice)
            vals.append(apply_scale_32((codes - zp) << 20, m, sh, sh > 31))
    acc = vals[0][:, None] - vals[1][None, :] if subtract else vals[0][:, None] + vals[1][None, :]
    m, sh = compute_scale_32(twice / ((1 << 20) * so))
    return np.clip(apply_scale_32(acc, m, sh, sh > 31) + zo, *bounds)


@pytest.mark.parametrize("subtract", [False, True])
def test_joint_add_rescales_exact_on_every_pair(subtract: bool) -> None:
    """``joint_add_rescales``: the one-RESCALE inputs it returns give TFLite's int8 ADD/SUB (numpy from the
    reference kernel, ``tflite_reference.add_sub_i8``) on all 65536 code pairs, recomputed here from the spec's
    apply_scale_32; over random quantizations (and MobileNetV2's residual ADD) it finds one for both inputs far
    more often than the per-code check does for the smaller-scale input."""
    from tf2tosa.quant import tflite_reference as R
    from tf2tosa.quant.rescale import joint_add_rescales

    rng = np.random.default_rng(20 + subtract)
    xs, ys = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    both = per_code = 0
    cases = [MNV2_ADD] + [_joint_case(subtract, rng) for _ in range(60)]
    for k, case in enumerate(cases):
        s1, z1, s2, z2, so, zo = case
        bounds = (-128, 127) if k % 3 else (int(rng.integers(-128, 0)), int(rng.integers(0, 128)))
        want = R.add_sub_i8(xs, ys, *case, subtract, bounds)
        twice = 2.0 * max(s1, s2)
        singles = joint_add_rescales((z1, z2), (s1 / twice, s2 / twice), 20, twice / ((1 << 20) * so), zo, bounds,
                                     subtract, want, "DOUBLE_ROUND")
        assert singles is not None
        np.testing.assert_array_equal(_add_pipeline(case, subtract, bounds, singles), want, err_msg=str(case))
        both += all(one is not None for one in singles)
        small = min((s1, z1), (s2, z2))
        per_code += merged_widen_rescale(np.arange(-128, 128), small[1], 20, small[0] / twice,
                                         "DOUBLE_ROUND") is not None
    print(f"both inputs one RESCALE: {both} of {len(cases)}; per-code check on the smaller-scale input: {per_code}")
    assert both >= 55 and both > per_code, (both, per_code)
    # a target the two-step form itself misses (one pair off by one) is refused: nothing is chosen
    s1, z1, s2, z2, so, zo = MNV2_ADD
    twice = 2.0 * s2
    off = R.add_sub_i8(xs, ys, *MNV2_ADD, subtract)
    off[3, 5] += 1
    assert joint_add_rescales((z1, z2), (s1 / twice, s2 / twice), 20, twice / ((1 << 20) * so), zo, (-128, 127),
                              subtract, off, "DOUBLE_ROUND") is None


def _add_model(case: tuple[float, int, float, int, float, int], opcode: int, act: int) -> bytes:
    """A hand-built int8 ADD (0) / SUB (41) over [1, 256, 256, 1] inputs with quantization ``case``."""
    from tests.modelgen_more import Op, T, _opts, tflite_model

    s1, z1, s2, z2, so, zo = case
    shape = (1, 256, 256, 1)
    opts = _opts("AddOptions" if opcode == 0 else "SubOptions", FusedActivationFunction=act)
    return tflite_model([T("x", shape, "int8", quant=([s1], [z1], 0)), T("y", shape, "int8", quant=([s2], [z2], 0)),
                         T("z", shape, "int8", quant=([so], [zo], 0))], [Op(opcode, [0, 1], [2], options=opts)],
                        [0, 1], [2])


@pytest.mark.parametrize("kind", ["mnv2_add", "sub_relu6", "add_relu"])
def test_int8_add_one_rescale_per_input_vs_litert(kind: str, tmp_path: Any) -> None:
    """int8 ADD/SUB whose smaller-scale input has no per-code exact one-RESCALE form: both inputs are now one
    RESCALE of the int8 tensor (Vela fuses the pair into the ADD), and LiteRT's BUILTIN_REF kernel agrees on all
    65536 input code pairs (the executor's result; the .tosa hook runs the file in the Arm reference model)."""
    from tf2tosa.quant.rescale import merged_widen_rescale as merged
    from tf2tosa.verify.litert import run_tflite

    rng = np.random.default_rng(7)
    case = MNV2_ADD if kind == "mnv2_add" else _joint_case(True, rng)
    while kind != "mnv2_add":  # a quantization the per-code check refuses
        s1, z1, s2, z2 = case[:4]
        small, tw = min((s1, z1), (s2, z2)), 2 * max(s1, s2)
        if merged(np.arange(-128, 128), small[1], 20, small[0] / tw, "DOUBLE_ROUND") is None:
            break
        case = _joint_case(True, rng)
    opcode, act = {"mnv2_add": (0, 0), "sub_relu6": (41, 3), "add_relu": (0, 1)}[kind]
    buf = _add_model(case, opcode, act)
    m = tf2tosa.convert(buf)
    add = next(op for op in m.graph.topological_order() if op.opcode in ("ADD", "SUB"))
    for o in add.operands:
        assert o.producer is not None and o.producer.opcode == "RESCALE", str(o.type)
        assert o.producer.operands[0].dtype.value == "i8", "a two-step input RESCALE"
    xs, ys = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    feed = {"x": xs.reshape(1, 256, 256, 1).astype(np.int8), "y": ys.reshape(1, 256, 256, 1).astype(np.int8)}
    ref = next(iter(run_tflite(buf, feed, reference_kernels=True).values()))
    got = m.run({m.input_names[0]: feed["x"], m.input_names[1]: feed["y"]})[m.output_names[0]]
    np.testing.assert_array_equal(np.asarray(got).reshape(ref.shape), ref)
    m.save(tmp_path / "add.tosa")  # the .tosa hook: tosa-opt validates it, the Arm reference model runs it


@pytest.mark.slow
def test_resize_rounding_rescale_is_exact_on_every_even_sum() -> None:
    """RESCALE by 2^30 / 2^50 with DOUBLE_ROUND (the spec's apply_scale_32) equals TFLite's ResizeBilinearInteger
    rounding ``(v ± 2^19) / 2^20`` (C division, sign of v) on every even v an int8 bilinear RESIZE can give
    (|v| <= 128·2^20), and misses odd ones (so the even-weight condition is needed)."""
    for start in range(-(128 << 20), 128 << 20, 1 << 24):
        v = np.arange(start, start + (1 << 24), 2, dtype=np.int64)
        want = np.sign(v + np.where(v > 0, 1 << 19, -(1 << 19))) * (np.abs(v + np.where(v > 0, 1 << 19, -(1 << 19)))
                                                                   >> 20)
        np.testing.assert_array_equal(apply_scale_32(v, 1 << 30, 50, True), want, err_msg=f"from {start}")
    odd = np.array([(1 << 19) - 1], dtype=np.int64)
    assert apply_scale_32(odd, 1 << 30, 50, True)[0] == 1 and ((odd[0] + (1 << 19)) >> 20) == 0


@pytest.mark.parametrize("case", [((8, 8), (64, 64), True), ((4, 5), (8, 12), False), ((3, 3), (5, 5), True)],
                         ids=["8to64_half_pixel", "4x5to8x12", "3to5_odd_weights"])
def test_int8_bilinear_resize_rounds_in_one_rescale(case: tuple[Any, Any, bool], tmp_path: Any) -> None:
    """int8 bilinear resize: where one axis has only even weights, one DOUBLE_ROUND RESCALE after the RESIZE (no
    ARITHMETIC_RIGHT_SHIFT/ADD); otherwise the general form; LiteRT's BUILTIN_REF agrees on random inputs and on
    inputs at the int8 extremes."""
    tf = modelgen._tf()
    (ih, iw), size, half = case

    def fn(x: Any) -> Any:
        return tf.raw_ops.ResizeBilinear(images=x, size=list(size), half_pixel_centers=half)

    buf = _model(f"resize_{ih}x{iw}_{size[0]}x{size[1]}_{half}", fn, (1, ih, iw, 3), "int8",
                 test_int8_bilinear_resize_rounds_in_one_rescale)
    m = tf2tosa.convert(buf)
    resize = next(op for op in m.graph.topological_order() if op.opcode == "RESIZE")
    readers = [u for u, _ in m.graph.uses(resize.results[0])]
    if case[0] != (3, 3):
        assert [u.opcode for u in readers] == ["RESCALE"] and readers[0].attrs["rounding_mode"] == "DOUBLE_ROUND"
    else:
        assert "ARITHMETIC_RIGHT_SHIFT" in [u.opcode for u in readers]
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report
    x = np.where(RNG.random((1, ih, iw, 3)) < 0.5, -128, 127).astype(np.int8)
    report = m.verify([{m.input_names[0]: x}], oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report
    m.save(tmp_path / "resize.tosa")  # the .tosa hook: tosa-opt validates it, the Arm reference model runs it
    single = tf2tosa.convert(buf, rounding="single").graph  # no DOUBLE_ROUND asked for: the general form
    assert single.op_counts().get("tosa.ARITHMETIC_RIGHT_SHIFT", 0) >= 1, single.op_counts()


def test_int8_add_and_softmax_models_bit_exact() -> None:
    """An int8 residual ADD and a softmax over 96 positions: one input RESCALE less per ADD, no GATHER."""
    tf = modelgen._tf()
    w = RNG.normal(0, 0.3, (1, 1, 8, 8)).astype(np.float32)

    def fn(x: Any) -> Any:
        y = x + 0.5 * tf.nn.conv2d(x, w, 1, "SAME")
        return tf.nn.softmax(tf.reshape(y, (1, 12, 8 * 8)), axis=-1), tf.nn.softmax(tf.reshape(y, (1, 96, 8)))

    buf = _model("add_softmax", fn, (1, 12, 8, 8), "int8", test_int8_add_and_softmax_models_bit_exact)
    m = tf2tosa.convert(buf)
    counts = m.graph.op_counts()
    assert counts.get("tosa.GATHER", 0) == 0 and counts.get("tosa.TABLE", 0) >= 4, counts
    adds = [op for op in m.graph.topological_order() if op.opcode == "ADD" and
            all(o.producer is not None and o.producer.opcode == "RESCALE" for o in op.operands)]
    assert adds
    for add in adds:  # the larger-scale input's RESCALE reads the i8 tensor directly
        assert any(o.producer.operands[0].dtype.value == "i8" for o in add.operands)
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


@pytest.mark.parametrize("keep", [False, True])
def test_int8_spatial_mean_is_one_depthwise_sum(keep: bool) -> None:
    """A global average pool (tfl.mean over axes 1, 2) sums with one all-ones DEPTHWISE_CONV2D and no REDUCE_SUM
    (Vela transposes an i32 REDUCE_SUM over H or W); LiteRT's reference MEAN agrees on every element, also on
    inputs at the int8 extremes (the largest sums)."""
    tf = modelgen._tf()

    def fn(x: Any) -> Any:
        return tf.reduce_mean(tf.nn.relu6(x * 3.0), axis=[1, 2], keepdims=keep)

    buf = _model(f"mean_hw_{keep}", fn, (1, 7, 9, 16), "int8", test_int8_spatial_mean_is_one_depthwise_sum)
    m = tf2tosa.convert(buf)
    counts = m.graph.op_counts()
    assert counts.get("tosa.REDUCE_SUM", 0) == 0 and counts.get("tosa.DEPTHWISE_CONV2D", 0) == 1, counts
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report
    for fill in (-128, 127):
        report = m.verify([{m.input_names[0]: np.full((1, 7, 9, 16), fill, np.int8)}], oracle="ref")
        assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def test_int8_dense_relu_clamps_after_the_reshape() -> None:
    """An int8 fully_connected with a fused RELU feeding a CONCAT: the activation's CLAMP reads the reshaped 2-D
    result (the CONCAT reads the CLAMP directly, which Vela writes into the CONCAT without a copy); LiteRT's
    reference kernels agree on every element."""
    tf = modelgen._tf()
    keras = tf.keras
    keras.utils.set_random_seed(5)
    inp = keras.Input((12,), batch_size=1)
    h = keras.layers.Dense(16, activation="relu")(inp)
    out = keras.layers.Dense(4)(keras.layers.Concatenate()([h, inp]))
    model = keras.Model(inp, out)
    buf = _model("dense_relu_concat", model, (1, 12), "int8", test_int8_dense_relu_clamps_after_the_reshape)
    m = tf2tosa.convert(buf)
    concat = next(op for op in m.graph.topological_order() if op.opcode == "CONCAT")
    producers = [o.producer.opcode for o in concat.operands if o.producer is not None]
    assert "CLAMP" in producers, producers
    clamp = next(o.producer for o in concat.operands if o.producer is not None and o.producer.opcode == "CLAMP")
    assert clamp.operands[0].producer.opcode == "RESHAPE"
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def test_float_island_of_int8_layer_norm_becomes_a_table() -> None:
    """TFLite leaves LayerNorm's NEG in float (DEQUANTIZE → NEG → QUANTIZE); it becomes one i8 TABLE, so the graph
    is PRO-INT only, and stays bit-exact."""
    tf = modelgen._tf()
    keras = tf.keras
    keras.utils.set_random_seed(4)
    inp = keras.Input((16, 8), batch_size=1)
    out = keras.layers.LayerNormalization()(keras.layers.Dense(8)(inp))
    model = keras.Model(inp, out)
    buf = _model("layer_norm", model, (1, 16, 8), "int8", test_float_island_of_int8_layer_norm_becomes_a_table)
    from tf2tosa.converter.tflite import load_tflite

    names = [op.name for op in load_tflite(buf).ops.values()]
    assert "tfl.neg" in names and "tfl.dequantize" in names  # the float island is in the source
    m = tf2tosa.convert(buf)
    assert m.profiles == ["PRO-INT"], (m.profiles, m.graph.op_counts())
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def _moved_island(move: str, dtype: str) -> bytes:
    """A hand-built island through an element-moving op, as TensorFlow leaves a recurrent layer's first step:
    x [1, 256·k] (every code once per row) → DEQUANTIZE → SPLIT in 4 (one part unread) → QUANTIZE per part to a
    new scale (``move="split"``), or → RESHAPE → NEG → QUANTIZE (``move="reshape"``)."""
    from tests.modelgen_more import Op, T, _opts, tflite_model

    n = 256 if dtype == "int8" else 65536
    sx, zx, sy, zy = (0.0213, -7, 0.0137, 10) if dtype == "int8" else (0.00031, 0, 0.00047, 0)
    x = T("x", (1, 4 * n), dtype, quant=([sx], [zx], 0))
    f = T("f", (1, 4 * n))
    if move == "reshape":
        tensors = [x, f, T("shape", (2,), "int32", data=np.array([4, n], np.int32)), T("r", (4, n)), T("neg", (4, n)),
                   T("y", (4, n), dtype, quant=([sy], [zy], 0))]
        ops = [Op(6, [0], [1]), Op(22, [1, 2], [3]), Op(59, [3], [4]), Op(114, [4], [5])]
        return tflite_model(tensors, ops, [0], [5])
    parts = [T(f"p{k}", (1, n)) for k in range(4)]
    outs = [T(f"y{k}", (1, n), dtype, quant=([sy * (k + 1)], [zy], 0)) for k in (0, 2, 3)]
    tensors = [x, f, T("axis", (), "int32", data=np.array(1, np.int32)), *parts, *outs]
    ops = [Op(6, [0], [1]), Op(49, [2, 1], [3, 4, 5, 6], options=_opts("SplitOptions", NumSplits=4)),
           Op(114, [3], [7]), Op(114, [5], [8]), Op(114, [6], [9])]
    return tflite_model(tensors, ops, [0], [7, 8, 9])


@pytest.mark.parametrize("move,dtype", [("split", "int8"), ("reshape", "int8"), ("split", "int16")])
def test_float_island_past_an_element_move_becomes_tables(move: str, dtype: str, tmp_path: Any) -> None:
    """DEQUANTIZE → SPLIT/RESHAPE (→ NEG) → QUANTIZE: the SPLIT or RESHAPE moves into the integer domain and each
    QUANTIZE becomes one table of the codes, so the graph has no float op (Vela refuses them: the zoo's gru and lstm
    did not compile) and matches LiteRT's reference kernels on every input code."""
    from tf2tosa.verify.litert import run_tflite

    buf = _moved_island(move, dtype)
    m = tf2tosa.convert(buf)
    counts = m.graph.op_counts()
    assert m.profiles == ["PRO-INT"], (m.profiles, counts)
    assert counts.get("tosa.TABLE" if dtype == "int8" else "tosa.GATHER") == (1 if move == "reshape" else 3), counts
    codes = np.arange(-128, 128) if dtype == "int8" else np.arange(-32768, 32768)
    xv = np.tile(np.roll(codes, 3), 4).reshape(1, -1).astype(np.int8 if dtype == "int8" else np.int16)
    ref = run_tflite(buf, {"x": xv}, reference_kernels=True)
    got = m.run({m.input_names[0]: xv})
    for name in m.output_names:
        np.testing.assert_array_equal(np.asarray(got[name]), ref[name], err_msg=name)
    m.save(tmp_path / f"island_{move}_{dtype}.tosa")  # (validated by tosa-opt and run in the reference model)


def test_constants_deduplicated_and_the_file_runs(tmp_path: Any) -> None:
    """No two CONST/CONST_SHAPE ops of the int8 sample hold the same data; the shared constants still give a file
    that tosa-opt validates and the Arm reference model runs bit-exactly like LiteRT (the .tosa hook and verify)."""
    from pathlib import Path

    sample = Path(__file__).resolve().parent.parent / "models" / "samples" / "small_cnn_int8.tflite"
    m = tf2tosa.convert(sample)
    seen: set[Any] = set()
    shared = 0
    for op in m.graph.topological_order():
        if op.opcode in ("CONST", "CONST_SHAPE"):
            arr = np.asarray(op.attrs["values"])
            key = (op.opcode, op.results[0].type, arr.dtype.str, arr.shape, arr.tobytes())
            assert key not in seen, op.results[0].name
            seen.add(key)
            shared += len(m.graph.uses(op.results[0])) > 1
    assert shared > 0
    m.save(tmp_path / "m.tosa")
    assert (tmp_path / "m.tosa").read_bytes() == tf2tosa.convert(sample).to_bytes()
    report = m.verify(num=2, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def test_int8_mul_by_constant_keeps_the_int8_constant() -> None:
    """x · c (a per-channel constant, as an unfused BatchNorm): the constant stays int8 behind a RESCALE (i8 → i32,
    zero point), which Vela runs as one int8 MUL, instead of being folded into an i32 constant; still bit-exact."""
    c = np.linspace(-1.5, 2.0, 8).astype(np.float32)

    def fn(x: Any) -> Any:
        return x * c

    buf = _model("mul_const", fn, (1, 6, 6, 8), "int8", test_int8_mul_by_constant_keeps_the_int8_constant)
    m = tf2tosa.convert(buf)
    muls = [op for op in m.graph.topological_order() if op.opcode == "MUL"]
    assert muls
    for mul in muls:
        producers = [o.producer for o in mul.operands[:2]]
        producers = [p.operands[0].producer if p is not None and p.opcode == "RESHAPE" else p for p in producers]
        assert any(p is not None and p.opcode == "RESCALE" and p.operands[0].is_const and
                   p.operands[0].dtype.value == "i8" for p in producers), [str(o.type) for o in mul.operands]
    report = m.verify(num=3, oracle="ref")
    assert report.ok and all(o.mismatches == 0 for o in report.outputs), report


def test_single_rescale_for_fully_connected_matches_the_double_rounding() -> None:
    """The window check of ``single_rescale_exact`` agrees with a brute force over every accumulator: whenever it
    accepts a RESCALE, ``clip(round_half_away(fl64(acc·s)) + zp)`` (LiteRT's double requantization, numpy) equals
    the RESCALE on all ``|acc| <= bound``, also with exact ties (s = 1/4: half away from zero needs the multiplier
    one above 2^30, which nudges negative ties down)."""
    from tf2tosa.quant.fully_connected import single_rescale_exact

    assert single_rescale_exact([0.25], 1000, 0) == ([(1 << 30) + 1], [32])
    accepted = 0
    cases = [(0.25, 0, 1000), (0.125, 5, 4000)] + [
        (float(RNG.uniform(1e-4, 0.3)), int(RNG.integers(-128, 128)), int(RNG.integers(100, 200_000)))
        for _ in range(120)]
    for s, zp, bound in cases:
        got = single_rescale_exact([s], bound, zp)
        if got is None:
            continue
        accepted += 1
        (mult,), (shift,) = got
        acc = np.arange(-bound, bound + 1, dtype=np.int64)
        prod = acc * s
        want = np.clip((np.sign(prod) * np.floor(np.abs(prod) + 0.5)).astype(np.int64) + zp, -128, 127)
        np.testing.assert_array_equal(np.clip(apply_scale_32(acc, mult, shift, False) + zp, -128, 127), want)
    assert accepted > 100
