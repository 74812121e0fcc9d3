"""Conversion speed and scale (issue 16): the cached topological order, constants read in place from the mapped
.tflite and written once, the file-mapped writer, fp16 weights kept as fp16 + CAST, the 2 GiB limit.

Oracles: networkx's own sort for the order; TFLite's scalar QuantizeMultiplier (``compute_scale_32/16``) for the
vectorized multipliers; LiteRT (``verify``) and Arm's reference model for the fp16-weight programs; the in-memory
writer's bytes for the file-mapped writer.  Timings are not asserted here (benchmarks/bench_convert.py and
benchmarks/bench_scale.py measure them).
"""

from __future__ import annotations

import mmap
import subprocess
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest

import tf2tosa
from tf2tosa.errors import InvalidGraphError
from tf2tosa.executor import run
from tf2tosa.ir.graph import INPUT, Graph
from tf2tosa.ir.types import DType, TensorType
from tf2tosa.quant.conv import abs_weight_sums
from tf2tosa.quant.scale import compute_scale_16, compute_scale_32, quantize_multiplier_arrays
from tf2tosa.serializer import tosa_writer
from tf2tosa.verify import tosa_tools

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "models" / "samples").glob("*.tflite"))
needs_tools = pytest.mark.skipif(not tosa_tools.available(), reason="tosa-tools environment not available")


def _networkx_order(g: Graph) -> list[int]:
    return [n for n in nx.lexicographical_topological_sort(g.nx) if n != INPUT]


def test_topological_order_follows_every_change() -> None:
    g = Graph()
    x = g.add_input("x", TensorType((2,), DType.FP32))
    a = g.add_op("tosa.ABS", [x], [x.type]).result
    b = g.add_op("tosa.NEGATE", [a], [x.type]).result
    g.outputs = [b]
    first = g.topological_order()
    assert [op.id for op in first] == _networkx_order(g)
    first.clear()  # the caller's list is its own
    assert len(g.topological_order()) == 2
    c = g.add_op("tosa.EXP", [x], [x.type])  # a new op
    g.set_operand(b.producer, 0, c.result)  # type: ignore[arg-type]  # an edge moved
    assert [op.id for op in g.topological_order()] == _networkx_order(g)
    g.remove_op(a.producer)  # type: ignore[arg-type]
    assert [op.id for op in g.topological_order()] == _networkx_order(g)
    cat = g.add_op("tosa.CONCAT", [c.result, b, b], [TensorType((6,), DType.FP32)], {"axis": 0})
    g.truncate_operands(cat, 1)
    assert cat.operands == [c.result] and [op.id for op in g.topological_order()] == _networkx_order(g)
    g.discard_op(cat)
    assert cat.id not in g.ops and [op.id for op in g.topological_order()] == _networkx_order(g)


def test_vectorized_multipliers_equal_tflite_scalar() -> None:
    rng = np.random.default_rng(16)
    scales = np.concatenate([np.exp(rng.uniform(-45.0, 9.0, 20000)),
                             [0.0, 2.0**-31, 2.0**-32, 2.0**-40, 2.0**-48, 2.0**-49, 1.0, np.nextafter(1.0, 0.0)]])
    for scale32, fn in ((True, compute_scale_32), (False, compute_scale_16)):
        mult, shift = quantize_multiplier_arrays(scales, scale32)
        ref = [fn(float(s)) for s in scales]
        assert mult.tolist() == [m for m, _ in ref]
        assert shift.tolist() == [s for _, s in ref]
        for k in (1, 7, 16, 17):  # few scales take the scalar functions, more the array pass: the same pairs
            m_k, s_k = quantize_multiplier_arrays(scales[-k:], scale32)
            assert m_k.tolist() == mult.tolist()[-k:] and s_k.tolist() == shift.tolist()[-k:]
            assert m_k.dtype == mult.dtype and s_k.dtype == shift.dtype


@pytest.mark.skipif(not SAMPLES, reason="no sample models")
@pytest.mark.parametrize("in_memory", [0, tosa_writer.IN_MEMORY_BYTES])
def test_constants_are_views_of_the_mapped_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                in_memory: int) -> None:
    """A converted .tflite's weights are read-only views of the file's map (never copied), and the file-mapped
    writer (and the in-memory one of small programs) gives the bytes of to_bytes."""
    monkeypatch.setattr(tosa_writer, "IN_MEMORY_BYTES", in_memory)
    sample = next(p for p in SAMPLES if "small_cnn_f32" in p.name)
    m = tf2tosa.convert(sample)
    big = [np.asarray(op.attrs["values"]) for op in m.graph.ops.values()
           if op.opcode == "CONST" and op.result.type.size >= 64]
    assert big
    mapped = [tosa_writer._file_region(a) for a in big]
    assert all(r is not None and isinstance(r[0], mmap.mmap) for r in mapped)
    assert not any(a.flags.writeable for a in big)
    out = tmp_path / "m.tosa"
    m.save(out)
    assert out.read_bytes() == m.to_bytes()
    assert not list(tmp_path.glob(".*")), "no scratch or temporary file is left"
    assert m.source == sample.read_bytes()  # the source bytes for verify, read from the map when asked for


def test_file_writer_writes_mapped_constants_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large program is built in a scratch file's map without its constants of a page or more: each is written to
    the file from its own memory, in pieces, and one read in place from a file map (here at an offset that is not a
    page boundary) has all its whole pages but the first and the last released once written; the bytes do not
    change."""
    from tf2tosa.ir.mapped import PAGE, page_up

    monkeypatch.setattr(tosa_writer, "IN_MEMORY_BYTES", 0)  # (12 MiB: built in memory otherwise)
    released: list[tuple[Any, int, int]] = []
    drop = tosa_writer._drop
    monkeypatch.setattr(tosa_writer, "_drop", lambda mm, lo, hi: (released.append((mm, lo, hi)), drop(mm, lo, hi)))
    deferred: list[int] = []
    copy = tosa_writer._copy_pieces
    monkeypatch.setattr(tosa_writer, "_copy_pieces", lambda src, f, start, size, d: (
        deferred.extend(r.nbytes for _, r in d), copy(src, f, start, size, d)))
    n = 3 * 1024 * 1024 + 5
    source = tmp_path / "w.bin"
    source.write_bytes(bytes(100) + np.random.default_rng(3).standard_normal(n).astype(np.float32).tobytes())
    with open(source, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    w = np.frombuffer(mm, np.float32, n, 100).reshape(1, n)  # type: ignore[call-overload]
    g = Graph()
    x = g.add_input("x", TensorType((1, n), DType.FP32))
    c = g.add_const(w, DType.FP32, name="w")
    g.outputs = [g.add_op("tosa.ADD", [x, c], [x.type]).result]
    path = tmp_path / "big.tosa"
    tosa_writer.save(g, path)
    assert path.read_bytes() == tosa_writer.to_bytes(g)
    assert deferred == [w.nbytes]
    ranges = [(lo, hi) for m, lo, hi in released if m is mm]
    assert len(ranges) >= 3 and all(hi - lo <= tosa_writer._PIECE for lo, hi in ranges)
    whole = sum(max(0, hi // PAGE * PAGE - page_up(lo)) for lo, hi in ranges)
    assert whole >= w.nbytes - 2 * PAGE, (whole, w.nbytes)


def test_in_memory_writer_writes_constants_from_their_own_memory(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A small program is built in an anonymous map; constants of a page or more are written to the file from
    their arrays (not copied into the map), each in its place: the file is to_bytes's."""
    deferred: list[int] = []
    pieces = tosa_writer._write_pieces
    monkeypatch.setattr(tosa_writer, "_write_pieces",
                        lambda f, fb, d: (deferred.extend(r.nbytes for _, r in d), pieces(f, fb, d)))
    g = Graph()
    x = g.add_input("x", TensorType((1, 3001), DType.FP32))
    rng = np.random.default_rng(5)
    y = x
    for k, n in enumerate((3001, 1, 3001)):  # two deferred constants around a small one (12004 bytes: padded)
        c = g.add_const(rng.standard_normal((1, n)).astype(np.float32), DType.FP32, name=f"w{k}")
        y = g.add_op("tosa.ADD", [y, c], [x.type]).result
    g.outputs = [y]
    path = tmp_path / "small.tosa"
    tosa_writer.save(g, path)
    assert path.read_bytes() == tosa_writer.to_bytes(g)
    assert deferred == [3001 * 4, 3001 * 4]


def test_over_two_gib_is_refused_before_building(tmp_path: Path) -> None:
    g = Graph()
    huge = np.broadcast_to(np.float32(1.0), (2**29 + 1,))  # 2 GiB + 4 bytes described, 4 bytes allocated
    g.source.file = "huge.tflite"
    c = g.add_op("tosa.CONST", [], [TensorType(huge.shape, DType.FP32)], {"values": huge}, ["huge_weights"]).result
    g.outputs = [c]
    with pytest.raises(InvalidGraphError) as e:
        tosa_writer.to_bytes(g)
    msg = str(e.value)
    assert "2 GiB" in msg and "huge_weights" in msg and "huge.tflite" in msg
    with pytest.raises(InvalidGraphError, match="2 GiB"):
        tosa_writer.save(g, tmp_path / "x.tosa")
    with pytest.raises(InvalidGraphError, match="2 GiB"):
        tf2tosa.TosaModel(g).save(tmp_path / "y.tosa")
    assert not list(tmp_path.iterdir()), "no output, temporary or scratch file is left"


# ------------------------------------------------------------------------------------------------ fp16 weights
def _fp16_conv_bytes(width: int = 24, seed: int = 16) -> bytes:
    from tests import modelgen

    tf = modelgen._tf()
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((3, 3, width, width)).astype(np.float32) * 0.2
    w2 = rng.standard_normal((1, 1, width, width)).astype(np.float32) * 0.2
    bias = rng.standard_normal(width).astype(np.float32)

    def f(x: Any) -> Any:
        y = tf.nn.relu(tf.nn.conv2d(x, w1, 1, "SAME") + bias)
        return tf.nn.conv2d(y, w2, 1, "SAME")

    return modelgen.convert(f, [(1, 8, 8, width)], fp16_weights=True)


@pytest.fixture(scope="module")
def fp16_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("tensorflow")
    from tests import modelgen

    data = modelgen.cached("fp16_conv_weights", _fp16_conv_bytes, {"width": 24, "seed": 16})
    path = tmp_path_factory.mktemp("fp16") / "fp16_conv.tflite"
    path.write_bytes(data)
    return path


def test_fp16_weights_kept_as_fp16_and_cast(fp16_model: Path, tmp_path: Path) -> None:
    size = fp16_model.stat().st_size
    keep = tf2tosa.convert(fp16_model)  # keep is the default
    expand = tf2tosa.convert(fp16_model, fp16_weights="expand")
    casts = [op for op in keep.graph.ops.values() if op.opcode == "CAST"]
    assert len(casts) >= 2 and all(op.operands[0].dtype is DType.FP16 and op.operands[0].is_const for op in casts)
    assert not any(op.opcode == "CAST" for op in expand.graph.ops.values())
    keep_bytes, expand_bytes = keep.to_bytes(), expand.to_bytes()
    assert len(keep_bytes) <= 1.1 * size < 1.5 * size < len(expand_bytes)
    assert keep.profiles == ["PRO-FP"] and not keep.extensions
    for m in (keep, expand):  # LiteRT is the oracle
        report = m.verify(seed=3)
        assert report.ok, report
    keep.save(tmp_path / "keep.tosa")  # (the .tosa hook validates and runs the written files too)
    expand.save(tmp_path / "expand.tosa")
    if tosa_tools.available():  # Arm's reference model: fp16 + CAST is exactly the fp32 program
        x = np.random.default_rng(5).standard_normal((1, 8, 8, 24)).astype(np.float32)
        a = tosa_tools.run_reference(tmp_path / "keep.tosa", [x])
        b = tosa_tools.run_reference(tmp_path / "expand.tosa", [x])
        assert [v.tobytes() for v in a.values()] == [v.tobytes() for v in b.values()]


def _fp16_deep_bytes(width: int = 256, layers: int = 6, seed: int = 17) -> bytes:
    from tests import modelgen

    tf = modelgen._tf()
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal((3, 3, width, width)).astype(np.float32) * 0.05 for _ in range(layers)]

    def f(x: Any) -> Any:
        for w in ws:
            x = tf.nn.relu(tf.nn.conv2d(x, w, 1, "SAME"))
        return x

    return modelgen.convert(f, [(1, 8, 8, width)], fp16_weights=True)


def test_fp16_weights_are_not_all_expanded_at_once(tmp_path: Path) -> None:
    """TFLite lists the DEQUANTIZE ops of fp16 weights first.  Each is legalized right before its reader and its fp32
    expansion narrowed back once the reader is legalized, so a conversion holds one fp32 weight at a time: with six
    2.4 MB fp32 weights (a 7 MB file), the Python heap's peak stays below half of ``--fp16-weights expand``'s (which
    keeps all six) and below the file's size; the programs compute the same (executor, bit for bit)."""
    import tracemalloc

    pytest.importorskip("tensorflow")
    from tests import modelgen

    path = tmp_path / "deep_fp16.tflite"
    path.write_bytes(modelgen.cached("fp16_deep_weights", _fp16_deep_bytes, {"width": 256, "layers": 6, "seed": 17}))
    peaks = {}
    models = {}
    for mode in ("expand", "keep", "expand", "keep"):
        tracemalloc.start()
        models[mode] = tf2tosa.convert(path, fp16_weights=mode)
        peaks[mode] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks["keep"] < 0.5 * peaks["expand"] and peaks["keep"] < path.stat().st_size, peaks
    assert sum(op.opcode == "CAST" for op in models["keep"].graph.ops.values()) >= 6
    x = np.random.default_rng(2).standard_normal((1, 8, 8, 256)).astype(np.float32)
    a, b = (list(run(m.graph, [x]).values())[0] for m in (models["keep"], models["expand"]))
    assert np.array_equal(a, b)


def _fp16_dense_bytes(width: int = 256, units: int = 128, seed: int = 19) -> bytes:
    from tests import modelgen

    tf = modelgen._tf()
    rng = np.random.default_rng(seed)
    wc = rng.standard_normal((3, 3, width, width)).astype(np.float32) * 0.05
    wd = rng.standard_normal((64 * width, units)).astype(np.float32) * 0.02

    def f(x: Any) -> Any:
        y = tf.nn.relu(tf.nn.conv2d(x, wc, 1, "SAME"))
        return tf.matmul(tf.reshape(y, (1, 64 * width)), wd)  # a FULLY_CONNECTED: its weight is RESHAPEd

    return modelgen.convert(f, [(1, 8, 8, width)], fp16_weights=True)


def test_fp16_weights_are_never_widened_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``--fp16-weights keep``, no float32 copy of an fp16 weight is made: the folded CAST (and the FULLY_CONNECTED
    weight's RESHAPE of it) hold a ``Widened``, whose float32 values no rule of this model reads.  The largest
    weight is 8 MiB as float32 (4 MiB in the file); the Python heap's peak stays below 1 MiB more than a float32
    conversion of the same structure needs.  The pages of the file's fp16 weights are released once checked (the
    serializer reads them again a piece at a time).  Same program as ``expand`` (executor, bit for bit)."""
    import tracemalloc

    from tf2tosa.converter.passes import fp16_weights

    pytest.importorskip("tensorflow")
    from tests import modelgen

    path = tmp_path / "dense_fp16.tflite"
    path.write_bytes(modelgen.cached("fp16_dense_weights", _fp16_dense_bytes, {"width": 256, "units": 128,
                                                                                "seed": 19}))
    released: list[int] = []
    drop = fp16_weights.drop_pages
    monkeypatch.setattr(fp16_weights, "drop_pages", lambda mm, lo, hi: (released.append(hi - lo), drop(mm, lo, hi)))
    tf2tosa.convert(path)  # (warm: imports and first-use caches)
    released.clear()
    tracemalloc.start()
    keep = tf2tosa.convert(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    weights = 64 * 256 * 128 + 9 * 256 * 256
    assert peak < (1 << 20), peak  # a float32 copy of the dense weight alone: 8 MiB
    assert sum(released) >= 2 * weights - 4 * 4096, (sum(released), 2 * weights)
    halves = [op for op in keep.graph.ops.values() if op.opcode == "CONST" and op.result.dtype is DType.FP16]
    assert sorted(op.result.type.size for op in halves)[-2:] == [9 * 256 * 256, 64 * 256 * 128]
    assert not any(type(op.attrs.get("values")).__name__ == "Widened" for op in keep.graph.ops.values())
    expand = tf2tosa.convert(path, fp16_weights="expand")
    x = np.random.default_rng(4).standard_normal((1, 8, 8, 256)).astype(np.float32)
    a, b = (list(run(m.graph, [x]).values())[0] for m in (keep, expand))
    assert np.array_equal(a, b)


def test_fp16_weight_with_nan_stays_float32(tmp_path: Path) -> None:
    """A kept fp16 weight is narrowed only when it holds no NaN (a NaN's payload need not survive fp16 -> fp32 ->
    fp16): with a NaN and an infinity written into the source's weight, that weight stays an fp32 constant (an
    array, not a ``Widened``) and the program computes what ``expand``'s does, NaN for NaN."""
    pytest.importorskip("tensorflow")
    from tests import modelgen
    from tf2tosa.converter.tflite import load_tflite
    from tf2tosa.ir.mapped import file_region

    data = bytearray(modelgen.cached("fp16_dense_weights", _fp16_dense_bytes, {"width": 256, "units": 128,
                                                                                "seed": 19}))
    path = tmp_path / "clean.tflite"
    path.write_bytes(bytes(data))
    g = load_tflite(path)
    big = max((op.attrs["values"] for op in g.ops.values()
               if isinstance(op.attrs.get("values"), np.ndarray) and op.attrs["values"].dtype == np.float16),
              key=lambda a: a.size)
    region = file_region(big)
    assert region is not None
    off = region[1]
    data[off + 10:off + 12] = np.array([np.nan], np.float16).tobytes()
    data[off + 20:off + 22] = np.array([np.inf], np.float16).tobytes()
    del g, big, region
    bad = tmp_path / "nan.tflite"
    bad.write_bytes(bytes(data))
    keep, expand = tf2tosa.convert(bad), tf2tosa.convert(bad, fp16_weights="expand")
    consts = [op for op in keep.graph.ops.values() if op.opcode == "CONST" and op.result.type.size >= 9 * 256 * 256]
    assert sorted(op.result.dtype.name for op in consts) == ["FP16", "FP32"]  # the NaN weight alone stays fp32
    assert all(type(op.attrs["values"]) is np.ndarray for op in consts)
    x = np.random.default_rng(6).standard_normal((1, 8, 8, 256)).astype(np.float32)
    a, b = (list(run(m.graph, [x]).values())[0] for m in (keep, expand))
    assert np.isnan(a).any() and np.array_equal(a, b, equal_nan=True)


def test_widened_reads_as_the_float32_values() -> None:
    """A ``Widened`` is the float32 constant of its float16 array: shape, dtype, values (NaN and infinities
    included), reshape as a view; a read that asks for no copy is refused."""
    from tf2tosa.ir.widened import Widened, materialize

    half = np.array([[0.5, -2.0, np.inf], [np.nan, 65504.0, 6e-8]], np.float16)
    w = Widened(half)
    assert (w.shape, w.dtype, w.size, w.ndim, w.nbytes, len(w)) == ((2, 3), np.float32, 6, 2, 24, 2)
    assert np.array_equal(np.asarray(w), half.astype(np.float32), equal_nan=True)
    assert np.asarray(w).dtype == np.float32 and np.asarray(w, np.float64).dtype == np.float64
    r = w.reshape(3, 2)
    assert isinstance(r, Widened) and np.shares_memory(r.half, half) and r.shape == (3, 2)
    assert np.array_equal(materialize(w), np.asarray(w), equal_nan=True) and materialize(half) is half
    assert w.tobytes() == half.astype(np.float32).tobytes()
    with pytest.raises(ValueError):
        np.asarray(w, copy=False)
    with pytest.raises(TypeError):
        Widened(half.astype(np.float32))


def _fp16_lstm_bytes(steps: int = 6, units: int = 16, seed: int = 18) -> bytes:
    from tests import modelgen

    keras = modelgen._seeded_keras(seed)
    model = keras.Sequential([keras.Input((steps, 8), batch_size=1),
                              keras.layers.LSTM(units, unroll=True, return_sequences=True), keras.layers.Dense(4)])
    return modelgen.convert(model, [(1, steps, 8)], fp16_weights=True)


def test_fp16_weights_of_a_recurrent_layer_are_cast_once(tmp_path: Path) -> None:
    """An unrolled LSTM (Keras ``unroll=True``) reads its fp16 weights at every time step.  The kept program casts
    each fp16 constant once, whatever the number of steps (the per-step reads share that CAST); without the sharing
    it had one CAST per read.
    LiteRT is the oracle, and the kept program computes exactly what ``expand``'s does (executor and, where
    installed, Arm's reference model)."""
    pytest.importorskip("tensorflow")
    from tests import modelgen

    path = tmp_path / "lstm_fp16.tflite"
    path.write_bytes(modelgen.cached("fp16_lstm", _fp16_lstm_bytes, {"steps": 6, "units": 16, "seed": 18}))
    keep, expand = tf2tosa.convert(path), tf2tosa.convert(path, fp16_weights="expand")
    ops = list(keep.graph.ops.values())
    casts = [op for op in ops if op.opcode == "CAST"]
    fp16 = [op for op in ops if op.opcode == "CONST" and op.result.dtype is DType.FP16]
    assert fp16 and len(casts) == len(fp16), (len(casts), len(fp16))
    assert {op.operands[0].id for op in casts} == {op.result.id for op in fp16}
    assert max(len(op.result.uses) for op in casts) >= 6  # read at every step
    assert len(keep.to_bytes()) < len(expand.to_bytes())
    report = keep.verify(seed=4)
    assert report.ok, report
    x = np.random.default_rng(6).standard_normal((1, 6, 8)).astype(np.float32)
    a, b = (list(run(m.graph, [x]).values())[0] for m in (keep, expand))
    assert np.array_equal(a, b)
    keep.save(tmp_path / "keep.tosa")
    expand.save(tmp_path / "expand.tosa")
    if tosa_tools.available():
        ra = tosa_tools.run_reference(tmp_path / "keep.tosa", [x])
        rb = tosa_tools.run_reference(tmp_path / "expand.tosa", [x])
        assert [v.tobytes() for v in ra.values()] == [v.tobytes() for v in rb.values()]


def test_fp16_weights_bad_choice_is_one_line(fp16_model: Path, tmp_path: Path) -> None:
    cli = [str(Path(sys.executable).with_name("tf2tosa"))]
    out = tmp_path / "x.tosa"
    proc = subprocess.run([*cli, "convert", str(fp16_model), "-o", str(out), "--fp16-weights", "half"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "--fp16-weights" in lines[0] and str(fp16_model) in lines[0], proc.stderr
    assert not out.exists()


def test_file_writer_fallbacks_give_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the kernel copy, and when the map is too small (the builder then grows in memory), the file still
    holds the in-memory writer's bytes."""
    g = Graph()
    x = g.add_input("x", TensorType((1, 600_000), DType.FP32))
    c = g.add_const(np.arange(600_000, dtype=np.float32).reshape(1, -1), DType.FP32, name="w")
    g.outputs = [g.add_op("tosa.ADD", [x, c], [x.type]).result]
    expected = tosa_writer.to_bytes(g)

    def no_kernel_copy(*args: Any) -> int:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(tosa_writer.os, "copy_file_range", no_kernel_copy, raising=False)
    tosa_writer.save(g, tmp_path / "a.tosa")
    assert (tmp_path / "a.tosa").read_bytes() == expected
    monkeypatch.setattr(tosa_writer, "_size_estimate", lambda graph: 1024)
    tosa_writer.save(g, tmp_path / "b.tosa")
    assert (tmp_path / "b.tosa").read_bytes() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tosa", "b.tosa"]


# ------------------------------------------------------------------------------------- integer weight bounds
def test_abs_weight_sums_match_the_formula_without_a_wide_copy() -> None:
    """The accumulator bounds of int8/int16 convolutions sum |w - zp| per output channel.  They equal the plain
    int64 formula, and a 4096x4096 int8 weight (16.8 MB) is summed with a small working set: the full int64 copy
    (134 MB, VGG16 int8's fully-connected layers) made the conversion's peak RSS 216 MB for a 44 MB model."""
    import tracemalloc

    rng = np.random.default_rng(3)
    cases = [(rng.integers(-128, 128, (70, 3, 3, 5)).astype(np.int8), 0),
             (rng.integers(-128, 128, (9, 300_000)).astype(np.int8), -7),  # blocks of one channel
             (rng.integers(-32768, 32768, (33, 17)).astype(np.int16), 12),
             (rng.integers(0, 256, (5, 4)).astype(np.uint8), 128),
             (rng.integers(-(1 << 40), 1 << 40, (6, 3)), 5)]
    for w, zp in cases:
        want = np.abs(w.astype(np.int64) - zp).reshape(w.shape[0], -1).sum(axis=1)
        np.testing.assert_array_equal(abs_weight_sums(w, zp), want)
    big = rng.integers(-128, 128, (4096, 4096)).astype(np.int8)
    tracemalloc.start()
    sums = abs_weight_sums(big, 0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert sums.shape == (4096,) and peak < big.nbytes, peak  # the int32 or int64 copy alone is 4x or 8x it


def test_abs_weight_sums_release_the_pages_of_a_mapped_weight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """A weight read in place from a mapped model file has its pages released as it is summed (so a conversion
    does not keep the whole file resident: VGG16 int8, a 44 MB file, peaked at 116 MB with every weight page
    resident, 69 MB with them released); the sums are those of an in-memory copy."""
    from tf2tosa.quant import conv

    rng = np.random.default_rng(5)
    w = rng.integers(-128, 128, (512, 4096)).astype(np.int8)
    path = tmp_path / "w.bin"
    path.write_bytes(b"\0" * 4096 + w.tobytes())
    released: list[tuple[int, int]] = []
    drop = conv.drop_pages
    monkeypatch.setattr(conv, "drop_pages", lambda mm, lo, hi: (released.append((lo, hi)), drop(mm, lo, hi)))
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = np.frombuffer(mm, np.int8, count=w.size, offset=4096).reshape(w.shape)
        np.testing.assert_array_equal(abs_weight_sums(view, 3), abs_weight_sums(w, 3))
        assert released and released[0][0] == 4096 and released[-1][1] == 4096 + w.nbytes
        assert sum(hi - lo for lo, hi in released) == w.nbytes
        del view
    released.clear()
    abs_weight_sums(w, 3)  # an in-memory array: nothing to release
    assert not released


def test_fully_connected_exactness_search_memory_does_not_grow_with_channels() -> None:
    """The one-RESCALE exactness check of an int8 FULLY_CONNECTED's output stage looks at every half-integer of
    the output range for each channel: a few channels at a time (a 4096-channel layer at once made 37 MB of
    float64 arrays); the verdicts are those of one channel at a time."""
    import tracemalloc

    from tf2tosa.quant.fully_connected import single_rescale_exact

    rng = np.random.default_rng(9)
    scales = [float(s) for s in np.exp(rng.uniform(np.log(2e-5), np.log(1e-4), 4096))]
    bound = 1 << 20
    got = single_rescale_exact(scales, bound, -3)
    tracemalloc.start()
    again = single_rescale_exact(scales, bound, -3)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert got is not None and got == again
    assert peak < 8 << 20, peak
    some = [0, 1, 2047, 4095]
    assert [single_rescale_exact([scales[i]], bound, -3) for i in some] == \
        [([got[0][i]], [got[1][i]]) for i in some]
