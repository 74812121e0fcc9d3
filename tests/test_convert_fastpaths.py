"""The conversion's fast paths give what the slow definitions give (issue 16, conversion speed).

* ``Graph.topological_order`` (our smallest-id-first Kahn sort) against networkx's
  ``lexicographical_topological_sort`` — the oracle the order was defined by;
* ``Graph.unique_name`` (probing from a per-base hint) against the plain probing loop, with names freed between;
* ``quant.fully_connected.single_rescale_exact`` (every channel's first candidate checked in one array pass): every
  pair it returns reproduces LiteRT's double-precision requantization on every accumulator, checked exhaustively with
  numpy from the formula, and it equals the per-channel search; the first-candidate pass (one accumulator per
  half-integer on narrow windows) accepts a channel's first candidate exactly when the per-channel search does;
* ``dedup_constants`` merges equal large constants and keeps ones that differ anywhere;
* a ``.tflite`` conversion on the command line imports none of the TensorFlow / NNEF rules, the verifier, the MLIR
  printer, the ``.tosa`` reader or (when its only folds are RESHAPEs of constants) the executor;
* the builder's RESHAPE fold gives the executor kernel's array.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import tf2tosa
from tf2tosa.converter.passes import dedup_constants
from tf2tosa.ir.graph import INPUT, Graph
from tf2tosa.ir.types import DType, TensorType
from tf2tosa.quant.fully_connected import _first_candidates_pass, _single_rescale_channel, single_rescale_exact

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "models" / "samples"


def _random_dag(rng: random.Random) -> Graph:
    g = Graph()
    ids = rng.sample(range(1, 500), rng.randint(1, 60))
    for i in ids:
        g.nx.add_node(i)
    order = [INPUT, *rng.sample(ids, len(ids))]  # edges only forward in a random permutation: a DAG
    for _ in range(rng.randint(0, 3 * len(ids))):
        a, b = sorted(rng.sample(range(len(order)), 2)) if len(order) > 2 else (0, 1)
        g.nx.add_edge(order[a], order[b], key=rng.random())  # parallel edges too (a value read twice)
    return g


def test_topological_order_is_networkx_lexicographical_sort() -> None:
    rng = random.Random(16)
    for _ in range(200):
        g = _random_dag(rng)
        assert g._smallest_id_first() == list(nx.lexicographical_topological_sort(g.nx))
    model = tf2tosa.convert(str(SAMPLES / "small_cnn_int8.tflite"))
    g = model.graph
    assert [op.id for op in g.topological_order()] == [
        n for n in nx.lexicographical_topological_sort(g.nx) if n != INPUT]


def test_topological_order_refuses_a_cycle() -> None:
    g = Graph()
    g.nx.add_edge(1, 2, key=0)
    g.nx.add_edge(2, 1, key=0)
    with pytest.raises(nx.NetworkXUnfeasible):
        g._smallest_id_first()


def test_unique_name_equals_probing_from_one() -> None:
    def probe(names: set[str], base: str) -> str:
        base = base or "v"
        name, i = base, 1
        while name in names:
            name, i = f"{base}_{i}", i + 1
        names.add(name)
        return name

    rng = random.Random(3)
    for _ in range(50):
        g, ref = Graph(), set[str]()
        for _ in range(300):
            if rng.random() < 0.7 or not ref:
                base = rng.choice(["const", "x", "x_1", "const_2", "", "y_0", "a_b"])
                assert g.unique_name(base) == probe(ref, base)
            else:
                gone = rng.choice(sorted(ref))
                ref.discard(gone)
                g._names.discard(gone)
        assert set(g._names) == ref


def _litert_requant(acc: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """TFLite's double-precision requantization: ``clip(round_half_away(fl64(acc·s)) + zp, -128, 127)``."""
    prod = acc.astype(np.float64) * scale
    return np.clip((np.sign(prod) * np.floor(np.abs(prod) + 0.5)).astype(np.int64) + zp, -128, 127)


def _rescale(acc: np.ndarray, mult: int, shift: int, zp: int) -> np.ndarray:
    """The spec's SINGLE_ROUND apply_scale_32 plus the output zero point, saturated to int8."""
    return np.clip(((acc * mult + (1 << (shift - 1))) >> shift) + zp, -128, 127)


def test_single_rescale_exact_is_exact_and_equals_the_per_channel_search() -> None:
    rng = np.random.default_rng(7)
    found = 0
    for _ in range(40):
        bound = int(rng.choice([255, 4095, 1 << 14]))
        zp = int(rng.integers(-128, 128))
        scales = [float(s) for s in np.exp(rng.uniform(np.log(1e-4), np.log(0.45), int(rng.integers(1, 12))))]
        got = single_rescale_exact(scales, bound, zp)
        top = max(abs(-128 - zp), abs(127 - zp)) + 2
        half = np.arange(-top, top + 1, dtype=np.float64) + 0.5
        per_channel = [_single_rescale_channel(s, bound, zp, -128, 127, top, half) for s in scales]
        if any(p is None for p in per_channel):
            assert got is None
            continue
        assert got == ([p[0] for p in per_channel if p], [p[1] for p in per_channel if p])
        acc = np.arange(-bound, bound + 1, dtype=np.int64)
        for s, m, sh in zip(scales, got[0], got[1], strict=True):
            np.testing.assert_array_equal(_rescale(acc, m, sh, zp), _litert_requant(acc, s, zp))
        found += 1
    assert found > 20
    assert single_rescale_exact([0.25, 0.5], 100, 0) is None  # a scale of 1/2 keeps the multi-op form


def test_first_candidates_pass_accepts_what_the_per_channel_search_accepts_first() -> None:
    """Per channel, the array pass gives the first candidate (nearest multiplier at the largest shift) exactly when
    the per-channel window search also stops at it; bounds up to 2^31 make it fail often, dyadic scales give ties."""
    rng = np.random.default_rng(11)
    accepted = rejected = 0
    for it in range(300):
        zp = int(rng.integers(-128, 128))
        top = max(abs(-128 - zp), abs(127 - zp)) + 2
        half = np.arange(-top, top + 1, dtype=np.float64) + 0.5
        if it % 3 == 0:
            scales = [float(k) / 2 ** int(rng.integers(2, 20)) for k in rng.integers(1, 100, 8)]
            scales = [s for s in scales if 0 < s < 0.5] or [0.25]
        else:
            scales = [float(s) for s in np.exp(rng.uniform(np.log(1e-6), np.log(0.49), 12))]
        bound = int(rng.choice([255, 1 << 14, 22_332_499, 1 << 28, (1 << 31) - 1]))
        first = _first_candidates_pass(scales, bound, zp, -128, 127, top, half)
        for sc, hit in zip(scales, first, strict=True):
            shift = min(62, int(np.floor(np.log2(((1 << 31) - 1) / sc))))
            cand = (int(np.floor(sc * 2.0**shift + 0.5)), shift)
            search = _single_rescale_channel(sc, bound, zp, -128, 127, top, half)
            if hit is not None:
                assert hit == cand == search
                accepted += 1
            elif search == cand:  # the search takes the first candidate only when its window check passes
                raise AssertionError((sc, bound, zp))
            else:
                rejected += 1
    assert accepted > 1000 and rejected > 200, (accepted, rejected)


def test_tflite_reference_power_of_two_division_and_srdhm_shortcut() -> None:
    """``trunc_div`` by ``2^k`` (a shift) equals C's truncating division written out; ``srdhm`` with a scalar other
    than INT32_MIN (which skips the saturation test) equals gemmlowp's formula."""
    from tf2tosa.quant import tflite_reference as ref

    rng = np.random.default_rng(3)
    edges = [0, 1, -1, 2, -2, (1 << 31) - 1, -(1 << 31), 1 << 31, (1 << 62) + 12345, -(1 << 62) - 777, (1 << 63) - 1,
             -(1 << 63) + (1 << 40)]
    n = np.concatenate([np.array(edges, np.int64), rng.integers(-(1 << 62), 1 << 62, 20_000),
                        rng.integers(-(1 << 33), 1 << 33, 20_000)])
    for k in range(40):
        np.testing.assert_array_equal(ref.trunc_div(n, 1 << k), np.sign(n) * (np.abs(n) // (1 << k)))
    x = np.concatenate([np.array([-(1 << 31), (1 << 31) - 1, 0, 1, -1], np.int64),
                        rng.integers(-(1 << 31), 1 << 31, 20_000)])
    for q in [-(1 << 31), (1 << 31) - 1, 0, 1, -1, *rng.integers(-(1 << 31), 1 << 31, 20).tolist()]:
        ab = x * q
        want = np.sign(ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))) * (
            np.abs(ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))) // (1 << 31))
        want = np.where((x == q) & (x == -(1 << 31)), (1 << 31) - 1, want)
        np.testing.assert_array_equal(ref.srdhm(x, q), want)
        np.testing.assert_array_equal(ref.srdhm(q, x), want)


def test_tflite_reference_mbqm_scalar_path_equals_the_general_one() -> None:
    """``mbqm`` by one multiplier and shift (the in-place path the int8 ADD check runs 65,536 pairs through) gives
    the general path's values (per-element multipliers and shifts through srdhm and rdbpot), and the exact rational
    round-half-up then round-half-away-from-zero, for every shift TFLite uses, both signs, ties and the int32 edges."""
    from fractions import Fraction

    from tf2tosa.quant import tflite_reference as ref

    rng = np.random.default_rng(5)
    x = np.concatenate([np.array([-(1 << 31), (1 << 31) - 1, 0, 1, -1, 1 << 20, -(1 << 20)], np.int64),
                        rng.integers(-(1 << 31), 1 << 31, 4000), rng.integers(-300, 300, 2000)])
    qs = [(1 << 31) - 1, 1 << 30, 0, 1, -1, -(1 << 31) + 1, *rng.integers(-(1 << 31) + 1, 1 << 31, 6).tolist()]
    for q in qs:
        for shift in range(-31, 32):
            got = ref.mbqm(x, q, shift)
            general = ref.mbqm(x, np.full(x.shape, q), np.full(x.shape, shift))
            np.testing.assert_array_equal(got, general, err_msg=f"q={q} shift={shift}")
    for q, shift in [(1 << 30, -1), (1 << 30, -3), (1518500250, -7), (-1518500250, 2), ((1 << 31) - 1, -31)]:
        for v in x[:200].tolist():
            a = ((v << max(shift, 0)) + (1 << 31)) % (1 << 32) - (1 << 31)
            hi = Fraction(a * q, 1 << 31)
            r = (hi + Fraction(1, 2)).__floor__()
            e = max(-shift, 0)
            want = int(np.sign(r)) * (abs(Fraction(r, 1 << e)) + Fraction(1, 2)).__floor__()
            assert int(ref.mbqm(v, q, shift)) == want, (v, q, shift)


def test_dedup_constants_compares_large_constants_in_full() -> None:
    g = Graph()
    x = g.add_input("x", TensorType((4096,), DType.FP32))
    base = np.arange(4096, dtype=np.float32)
    middle = base.copy()
    middle[2000] = -1.0  # same first and last bytes, differs inside
    outs = []
    for arr in (base, base.copy(), middle, base.astype(np.float32).copy()):
        c = g.add_const(arr, DType.FP32, name="w")
        outs.append(g.add_op("tosa.ADD", [x, c], [TensorType((4096,), DType.FP32)]).result)
    g.outputs = outs
    assert dedup_constants(g) == 2
    consts = [op for op in g.ops.values() if op.name == "tosa.CONST"]
    assert len(consts) == 2
    kept = {bytes(np.asarray(op.attrs["values"]).tobytes()) for op in consts}
    assert kept == {base.tobytes(), middle.tobytes()}


_CHILD = """
import json, sys
from tf2tosa.cli import main
sys.argv = ["tf2tosa", "convert", sys.argv[1], "-o", sys.argv[2], "-q"]
try:
    main()
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def test_tflite_convert_imports_only_what_it_needs(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(SAMPLES / "small_cnn_int8.tflite"),
                           str(tmp_path / "m.tosa")], capture_output=True, text=True, cwd=ROOT, check=True)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] in (0, None) and (tmp_path / "m.tosa").stat().st_size > 0
    loaded = set(report["modules"])
    # (the empty tf2tosa.verify package itself is imported by tf2tosa/__init__.py, so that the name tf2tosa.verify
    # stays the function; none of its modules is)
    assert not [m for m in loaded if m.startswith("tf2tosa.verify.")], sorted(loaded)
    for unwanted in ("tensorflow", "tf2tosa.legalizations.tf_math", "tf2tosa.legalizations.tf_nn",
                     "tf2tosa.legalizations.nnef_ops", "tf2tosa.serializer.mlir", "tf2tosa.serializer.tosa_reader",
                     "tf2tosa.executor", "tf2tosa.converter.nnef", "tf2tosa.converter.tensorflow",
                     "pydantic",  # (typer 0.29 coerces through pydantic; tf2tosa.cli_coercion spares it)
                     # (loaded for an op without a rule or with custom options only: legalizations.driver,
                     # serializer.flexbuffer)
                     "tf2tosa.legalizations.tfl_custom", "flatbuffers.flexbuffers",
                     "tflite"):  # (the frontend reads the flatbuffer itself: converter/tflite_reader.py)
        assert unwanted not in loaded, unwanted
    assert "tf2tosa.legalizations.tfl_nn" in loaded and "tf2tosa.serializer.tosa_writer" in loaded


def _fp16_convs_bytes(seed: int = 7) -> bytes:
    """Three float convolutions with relu, fp16 weights (bench_scale.py's conv_fp16_27mb, small)."""
    from tests import modelgen

    tf = modelgen._tf()
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal((3, 3, 16, 16)).astype(np.float32) * 0.1 for _ in range(3)]

    def f(x: object) -> object:
        for w in ws:
            x = tf.nn.relu(tf.nn.conv2d(x, w, 1, "SAME"))
        return x

    return modelgen.convert(f, [(1, 8, 8, 16)], fp16_weights=True)


def test_float_conv_convert_leaves_the_integer_and_rare_paths_unloaded(tmp_path: Path) -> None:
    """A float convolution model with fp16 weights (the shape of bench_convert's 27 MB model) loads no module of
    the integer arithmetic (elementwise, tflite_reference, exact_round), of a pass or a rule it does not reach:
    each is loaded where it is used (the process's peak memory)."""
    pytest.importorskip("tensorflow")
    from tests import modelgen

    model = tmp_path / "convs_fp16.tflite"
    model.write_bytes(modelgen.cached("fp16_convs", _fp16_convs_bytes, {"seed": 7}))
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(model), str(tmp_path / "m.tosa")],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] in (0, None) and (tmp_path / "m.tosa").stat().st_size > 0
    loaded = set(report["modules"])
    for unwanted in ("tf2tosa.quant.elementwise", "tf2tosa.quant.tflite_reference", "tf2tosa.quant.exact_round",
                     "tf2tosa.tosa.targets",  # (--target only)
                     "tf2tosa.converter.passes.complex_pairs", "tf2tosa.converter.passes.if_conversion",
                     "tf2tosa.converter.passes.dilation", "tf2tosa.converter.passes.lift_reshapes",  # (--target)
                     "tf2tosa.converter.passes.state_io",  # (--state-io)
                     "tf2tosa.legalizations.tfl_sparse", "tf2tosa.legalizations.lowering.tf_ops",
                     # (the quantized branches' helpers: quant.NAME in tfl_nn, a requantizing QUANTIZE in tfl_types)
                     "tf2tosa.quant.activation", "tf2tosa.quant.conv", "tf2tosa.quant.fully_connected",
                     "tf2tosa.quant.rescale", "tf2tosa.quant.scale", "tf2tosa.quant.table",
                     "tf2tosa.legalizations.tfl_hybrid", "tf2tosa.quant.hybrid",  # (int8 weights of a float op)
                     # (a graph with a quantized or uint8 value, or io="int", only: pipeline.integer_values)
                     "tf2tosa.converter.passes.integer_io", "tf2tosa.converter.passes.unsigned_io",
                     "tf2tosa.converter.passes.integer_islands", "tf2tosa.converter.passes.batch_fully_connected",
                     "tf2tosa.cli_commands"):  # (the commands other than convert: cli.app_for)
        assert unwanted not in loaded, unwanted
    assert "tf2tosa.legalizations.tfl_nn" in loaded and "tf2tosa.serializer.tosa_writer" in loaded


_SHARED_NAMES = """
import importlib, sys
for package, name in (("tf2tosa.converter.passes", "state_io"), ("tf2tosa.converter.passes", "integer_io"),
                      ("tf2tosa.converter.passes", "lift_reshapes"), ("tf2tosa.quant", "rescale")):
    module = importlib.import_module(package + "." + name)  # (by its path first, as the pipeline imports it)
    got = getattr(importlib.import_module(package), name)
    assert callable(got) and not isinstance(got, type(sys)), (package, name, got)
    assert got is getattr(module, name) and sys.modules[package + "." + name] is module
print("ok")
"""


def test_a_lazily_loaded_name_shared_with_its_module_stays_the_function() -> None:
    """``from tf2tosa.converter.passes import state_io`` gives the pass even when its module was first imported by
    its path (the pipeline's ``--state-io`` branch): the import system sets the package's attribute to the module
    after loading it, which hid the pass (a clean-clone CI run's tests/test_stream.py fixture, after a worker's
    earlier ``state_io=True`` conversion).  In a fresh interpreter, so nothing is loaded before."""
    proc = subprocess.run([sys.executable, "-c", _SHARED_NAMES], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_reshape_fold_equals_the_executor_kernel() -> None:
    from tf2tosa.executor import evaluate_op
    from tf2tosa.tosa.builder import Builder, _reshaped

    for dtype, arr in ((DType.FP32, np.arange(24, dtype=np.float32)), (DType.INT8, np.arange(24, dtype=np.int8)),
                       (DType.BOOL, np.arange(24) % 3 == 0)):
        g = Graph()
        b = Builder(g, fold=False)
        y = b.reshape(g.add_const(arr.reshape(2, 3, 4), dtype), (4, 6))
        op = y.producer
        assert op is not None and op.opcode == "RESHAPE"
        mine = _reshaped(op)
        assert mine is not None
        (theirs,) = evaluate_op(op, [np.asarray(v.const()) for v in op.operands])
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape and mine.tobytes() == theirs.tobytes()
    ml_dtypes = pytest.importorskip("ml_dtypes")
    g = Graph()  # storage types other than the plain ones are left to the executor
    y = Builder(g, fold=False).reshape(g.add_const(np.zeros((2, 2), ml_dtypes.bfloat16), DType.BF16), (4,))
    assert y.producer is not None and _reshaped(y.producer) is None


def test_slice_and_concat_folds_equal_the_executor_kernels() -> None:
    """builder._sliced_or_joined folds a SLICE or CONCAT of plain constants in numpy: the same array (type, shape,
    bytes) as the executor's kernel, and None (the kernel decides) where the window or the shapes do not fit."""
    from tf2tosa.executor import evaluate_op
    from tf2tosa.tosa.builder import Builder, _sliced_or_joined

    rng = np.random.default_rng(32)
    for dtype, arr in ((DType.FP32, rng.standard_normal((3, 4, 5)).astype(np.float32)),
                       (DType.INT8, rng.integers(-128, 128, (3, 4, 5)).astype(np.int8)),
                       (DType.INT32, rng.integers(-1000, 1000, (3, 4, 5)).astype(np.int32)),
                       (DType.BOOL, rng.random((3, 4, 5)) < 0.5)):
        g = Graph()
        b = Builder(g, fold=False)
        x = g.add_const(arr, dtype)
        made = [b.slice(x, [1, 0, 2], [2, 4, 3]), b.concat([x, g.add_const(arr[:, :2], dtype)], axis=1),
                b.concat([g.add_const(arr[:1], dtype), x], axis=0)]
        for y in made:
            op = y.producer
            assert op is not None and op.opcode in ("SLICE", "CONCAT")
            mine = _sliced_or_joined(op)
            assert mine is not None
            (theirs,) = evaluate_op(op, [np.asarray(v.const()) for v in op.operands])
            assert mine.dtype == theirs.dtype and mine.shape == theirs.shape and mine.tobytes() == theirs.tobytes()
        # a window past the end, and an operand of another storage type: left to the executor
        bad = b.slice(x, [2, 0, 0], [1, 4, 5])
        assert bad.producer is not None
        bad.producer.operands[1].producer.attrs["values"] = np.asarray([3, 0, 0])  # (start 3 of 3 rows)
        assert _sliced_or_joined(bad.producer) is None
    g = Graph()
    b = Builder(g, fold=False)
    other = g.add_const(np.zeros((2, 2), np.int32), DType.INT32)
    wide = b.concat([g.add_const(np.zeros((2, 2), np.int32), DType.INT32), other], axis=0)
    assert other.producer is not None and wide.producer is not None
    other.producer.attrs["values"] = np.zeros((2, 2), np.int64)  # (an array of another storage type)
    assert _sliced_or_joined(wide.producer) is None


def test_add_sub_reference_on_broadcast_codes_equals_every_pair() -> None:
    """quant.elementwise.add_sub_inputs evaluates TFLite's int8 ADD/SUB on codes[:, None] and codes[None, :]: the
    same table as on the 65536 pairs written out (each input's stage depends on its own code only)."""
    from tf2tosa.quant import tflite_reference as R

    rng = np.random.default_rng(16)
    codes = R.codes(8)
    xs, ys = np.meshgrid(codes, codes, indexing="ij")
    for subtract in (False, True):
        for _ in range(4):
            s1, s2, so = (float(v) for v in rng.uniform(1e-3, 0.2, 3))
            z1, z2, zo = (int(v) for v in rng.integers(-128, 128, 3))
            args = (s1, z1, s2, z2, so, zo, subtract, (-128, 127))
            full = R.add_sub_i8(xs, ys, *args)
            assert np.array_equal(R.add_sub_i8(codes[:, None], codes[None, :], *args), full)


def test_tfl_rule_index_names_the_modules_that_register_the_rules() -> None:
    """registry.TFL_RULE_MODULES (which module a .tflite conversion imports for an op) against the registrations:
    every listed op is registered by that module, and every tfl rule is listed (a missing one would only be slower)."""
    import inspect

    from tf2tosa.legalizations import registry

    registry.all_rules()
    where = {name: inspect.unwrap(info.fn).__module__.rsplit(".", 1)[1] for name, info in registry.RULES.items()}
    pairs = [(f"tfl.{op}", module) for module, ops in registry.TFL_RULE_MODULES.items() for op in ops]
    listed = dict(pairs)
    assert len(listed) == len(pairs), "an op listed under two modules"
    assert {n: where.get(n) for n in listed} == listed
    assert sorted(n for n in where if n.startswith("tfl.")) == sorted(listed)
