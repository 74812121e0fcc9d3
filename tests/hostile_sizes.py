"""Issue 29, items 4 and 5: what ``convert`` writes, ``load`` reads; nothing converts that cannot run.

* Sizes: a ``--dim`` / ``--input-shape`` beyond int32, and a tensor of more bytes than TOSA level 8K allows
  (2^31 - 1: MAX_LOG2_SIZE 31, spec 1.7 Table 4; "elements multiplied by the element size in bytes must be
  representable as a tensor_size_t", spec 1.11.1; tosa-opt checks the same), are refused at conversion with one
  line naming the input and the dimension, before anything is written.  The largest shape the level allows
  converts, loads and inspects (the execution budget is ``run``'s: one line naming TF2TOSA_MAX_TENSOR_BYTES).
* Softmax: int8 / int16 softmax and int8 log_softmax over input scales 1e-10 … 1e3 (and beta != 1) either convert
  and run in the executor (no REQUIRE failure) - bit-exact with LiteRT's reference kernels wherever those run and
  TFLite's integer arithmetic is defined, within a code or two of the float softmax where LiteRT aborts - or are
  refused at conversion with the reason.
* ``convert --verify`` that fails writes nothing; a LiteRT reference-kernel abort names ``--oracle optimized``.

The models are hand-built ``.tflite`` flatbuffers (tests/modelgen_more.py): no TensorFlow, and no large array is
ever allocated - only the declared shapes are large.  CLI commands run in a child process (tests/hostile.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.hostile import assert_refused, run_cli, tree_hash
from tests.modelgen_more import I8, Op, T, _opts, tflite_model

#: TOSA 1.0 level 8K: MAX_LOG2_SIZE = 31 (spec 1.7 Table 4), so a tensor holds at most 2^31 - 1 bytes (spec 1.11.1)
LEVEL_8K_BYTES = (1 << 31) - 1
INT32_MAX = (1 << 31) - 1
#: the peak RSS cap of every command here (MiB): the interpreter with numpy and typer is ~100 MiB; a command that
#: allocated one of these declared tensors would need gigabytes
RSS_CAP_MB = 400
RELU, SOFTMAX, LOG_SOFTMAX = 19, 25, 50


def _relu(shape: tuple[int, ...]) -> bytes:
    """x -> RELU -> y, float32, ``shape`` with -1 for an unknown (``batch``, ``d1`` …) dimension."""
    return tflite_model([T("x", shape), T("y", shape)], [Op(RELU, [0], [1])], [0], [1])


@pytest.fixture
def models(tmp_path: Path) -> Path:
    d = tmp_path / "m"
    d.mkdir()
    (d / "pair.tflite").write_bytes(_relu((-1, 2)))  # [batch, 2] float32: the level's limit is batch = 2^28 - 1
    (d / "image.tflite").write_bytes(_relu((-1, 224, 224, 3)))
    (d / "open.tflite").write_bytes(_relu((-1, -1)))  # [batch, d1]
    return d


# ------------------------------------------------------------------------------------------------ int32 sizes
@pytest.mark.parametrize("flag", [["--dim", "batch=99999999999"], ["--input-shape", "x=99999999999,2"]])
def test_size_beyond_int32_is_one_input_error(models: Path, flag: list[str]) -> None:
    before = tree_hash(models)
    res = run_cli("convert", models / "pair.tflite", "-o", models / "o.tosa", *flag)
    line = assert_refused(res, flag[0], "99999999999", str(INT32_MAX), rss_cap_mb=RSS_CAP_MB)
    assert "batch" in line or "'x'" in line
    assert tree_hash(models) == before
    js = run_cli("convert", models / "pair.tflite", "-o", models / "o.tosa", *flag, "--json")
    assert js.code == 1
    err = json.loads(js.stdout)["error"]
    assert err["class"] == "InputError" and "99999999999" in err["message"], err
    assert tree_hash(models) == before


def test_dynamic_size_beyond_int32_is_refused(models: Path) -> None:
    before = tree_hash(models)
    res = run_cli("convert", models / "open.tflite", "--dynamic", "-o", models / "o.tosa", "--dim", "d1=3000000000")
    assert_refused(res, "--dim d1=3000000000", str(INT32_MAX), rss_cap_mb=RSS_CAP_MB)
    assert tree_hash(models) == before



@pytest.mark.parametrize("size,needles", [("99999999999", ["99999999999", str(INT32_MAX)]),
                                          (str(1 << 28), [f"{8 * (1 << 28)} bytes", "dimension 0"])])
def test_specialize_refuses_sizes_the_file_cannot_hold(models: Path, size: str, needles: list[str]) -> None:
    sym = models / "sym.tosa"
    res = run_cli("convert", models / "pair.tflite", "--dynamic", "-o", sym)
    assert res.code == 0, res.output
    before = tree_hash(models)
    res = run_cli("specialize", sym, "--dim", f"batch={size}", "-o", models / "s.tosa")
    assert_refused(res, "--dim", f"batch={size}", *needles, rss_cap_mb=RSS_CAP_MB)
    assert tree_hash(models) == before


# ------------------------------------------------------------------------------------------------ level 8K
def test_level_boundary_round_trip(models: Path) -> None:
    """[batch, 2] float32: batch = 2^28 - 1 is 2^31 - 8 bytes (the level allows it), 2^28 is 2^31 (one past; it has
    only 2^29 elements: the limit is in bytes)."""
    import tf2tosa

    largest = LEVEL_8K_BYTES // 8
    assert 8 * largest <= LEVEL_8K_BYTES < 8 * (largest + 1)
    out = models / "largest.tosa"
    res = run_cli("convert", models / "pair.tflite", "-o", out, "--dim", f"batch={largest}")
    assert res.code == 0, res.output
    assert "Traceback" not in res.output and res.peak_rss_mb < RSS_CAP_MB, res.peak_rss_mb
    assert "TF2TOSA_MAX_TENSOR_BYTES" in res.stderr  # (8 GiB tensors: run would refuse them; say so now)
    # load: the file's declared shapes, nothing allocated
    m = tf2tosa.load(out)
    assert [tuple(v.type.shape) for v in m.graph.inputs] == [(largest, 2)]
    # inspect reads it without the execution budget
    ins = run_cli("inspect", out)
    assert ins.code == 0, ins.output
    assert f"{largest}x2" in ins.stdout and ins.peak_rss_mb < RSS_CAP_MB
    # run: one line about the budget, naming the variable that raises it
    before = tree_hash(models)
    ran = run_cli("run", out)
    assert_refused(ran, "tensor budget", "TF2TOSA_MAX_TENSOR_BYTES", rss_cap_mb=RSS_CAP_MB)
    # one past: refused at conversion, naming the tensor, the input's dimension and the limit, nothing written
    res = run_cli("convert", models / "pair.tflite", "-o", models / "past.tosa", "--dim", f"batch={largest + 1}")
    line = assert_refused(res, "'x'", "dimension 0", f"batch={largest + 1}", str(LEVEL_8K_BYTES), "--dim",
                          rss_cap_mb=RSS_CAP_MB)
    assert f"{8 * (largest + 1)} bytes" in line
    assert tree_hash(models) == before


def test_input_shape_over_the_level(models: Path) -> None:
    before = tree_hash(models)
    res = run_cli("convert", models / "image.tflite", "-o", models / "o.tosa", "--input-shape", "x=100000,224,224,3")
    n = 100000 * 224 * 224 * 3 * 4
    assert n > LEVEL_8K_BYTES
    assert_refused(res, "'x'", f"{n} bytes", "--input-shape", "dimension 0", rss_cap_mb=RSS_CAP_MB)
    assert tree_hash(models) == before


def test_intermediate_tensor_over_the_level_names_its_op(tmp_path: Path) -> None:
    """The input fits, a CONCATENATION of it with itself does not: the line names the op that makes the tensor."""
    rows = LEVEL_8K_BYTES // 32 + 1  # [rows, 4] float32 fits; [2·rows, 4] is more than 2^31 - 1 bytes
    assert rows * 16 <= LEVEL_8K_BYTES < 2 * rows * 16
    concat = tflite_model([T("x", (-1, 4)), T("y", (-1, 4))],
                          [Op(2, [0, 0], [1], options=_opts("ConcatenationOptions", Axis=0))], [0], [1])
    (tmp_path / "c.tflite").write_bytes(concat)
    before = tree_hash(tmp_path)
    res = run_cli("convert", tmp_path / "c.tflite", "-o", tmp_path / "c.tosa", "--dim", f"batch={rows}")
    assert_refused(res, "CONCAT", f"{2 * rows * 16} bytes", f"batch={rows}", rss_cap_mb=RSS_CAP_MB)
    assert tree_hash(tmp_path) == before


def test_nnef_external_input_over_the_level(tmp_path: Path) -> None:
    model = tmp_path / "net"
    model.mkdir()
    (model / "graph.nnef").write_text("version 1.0;\ngraph G( input ) -> ( output )\n{\n"
                                      "    input = external<scalar>(shape = [1000000, 1000000]);\n"
                                      "    output = relu(input);\n}\n")
    before = tree_hash(tmp_path)
    res = run_cli("convert", model, "-o", tmp_path / "n.tosa")
    assert_refused(res, "'input'", f"{4 * 10 ** 12} bytes", str(LEVEL_8K_BYTES), rss_cap_mb=RSS_CAP_MB)
    assert tree_hash(tmp_path) == before


# ------------------------------------------------------------------------------------------------ softmax
def _softmax_model(si: float, n: int, kind: str, beta: float = 1.0) -> bytes:
    """tfl.softmax (``int8`` / ``int16``) or tfl.log_softmax (``log``, int8) of a [2, n] input of scale ``si``
    with the output quantization TFLite requires."""
    dt = "int16" if kind == "int16" else I8
    so, zo = {"int8": (1 / 256, -128), "int16": (1 / 32768, 0), "log": (16 / 256, 127)}[kind]
    tensors = [T("x", (2, n), dt, quant=([si], [0], 0)), T("y", (2, n), dt, quant=([so], [zo], 0))]
    if kind == "log":
        return tflite_model(tensors, [Op(LOG_SOFTMAX, [0], [1])], [0], [1])
    return tflite_model(tensors, [Op(SOFTMAX, [0], [1], options=_opts("SoftmaxOptions", Beta=beta))], [0], [1])


def _float_softmax(x: np.ndarray, si: float, beta: float, kind: str) -> np.ndarray:
    """The real-valued result in output codes (float64), from the definition (for int16, of TFLite's design: the
    differences clamped at -10, the end of its exp table)."""
    z = np.float64(si) * beta * (x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    if kind == "log":
        return (z - np.log(np.exp(z).sum(axis=-1, keepdims=True))) * 16.0 + 127
    if kind == "int16":  # TFLite's int16 kernel: exp from a table over [-10, 0] ("exp(-10) is negligible")
        z = np.maximum(z, -10.0)
    p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    return p * 256.0 - 128 if kind == "int8" else p * 32768.0


#: (kind, row length, beta): a short row, a 1000-class row (whose near-uniform sums pass 2^28, where TFLite's int8
#: output shift passes 31), beta != 1
SWEEP = [("int8", 16, 1.0), ("int8", 16, 0.3), ("int8", 1000, 1.0), ("int16", 16, 1.0), ("int16", 16, 2.5),
         ("int16", 1000, 1.0), ("log", 16, 1.0), ("log", 1000, 1.0)]
SCALES = [float(s) for s in np.logspace(-10, 3, 14)]


def _tflite_defined(kind: str, x: np.ndarray, si: float, beta: float) -> np.ndarray:
    """Per row: whether TFLite's integer arithmetic stays defined.  int16: MultiplyByQuantizedMultiplier's
    ``diff · 2^left_shift`` must fit int32 (it wraps for large scales); int8 softmax: the Q12.19 sum of exps must
    stay below 2^28 (else the output RoundingDivideByPOT exponent passes 31).  LiteRT's results where it is not
    defined are not the softmax, so they are not compared."""
    d = (x.max(axis=-1, keepdims=True) - x.astype(np.int64)).max(axis=-1)
    if kind == "int16":
        _, shift = math.frexp(si * beta / (10.0 / 65535.0))
        return d * 2.0 ** max(shift, 0) < 2.0 ** 31
    if kind == "int8":
        z = np.float64(si) * beta * (x.astype(np.float64) - x.max(axis=-1, keepdims=True))
        return np.exp(z).sum(axis=-1) < 2.0 ** 28 / 2.0 ** 19 * 0.999
    return np.ones(len(x), bool)


@pytest.fixture(scope="module")
def litert() -> Iterator[Any]:
    """One LiteRT worker process for the sweep (an abort ends it; the next request starts another)."""
    from tf2tosa.verify.litert import LiteRTWorker

    with LiteRTWorker() as w:
        yield w


@pytest.mark.parametrize("kind,n,beta", SWEEP, ids=[f"{k}-{n}-b{b}" for k, n, b in SWEEP])
def test_softmax_scale_sweep(kind: str, n: int, beta: float, litert: Any) -> None:
    import tf2tosa
    from tf2tosa.errors import ConversionError
    from tf2tosa.verify.litert import LiteRTError, run_tflite

    rng = np.random.default_rng(n)
    lo, hi = (-32768, 32767) if kind == "int16" else (-128, 127)
    outcomes: dict[str, list[str]] = {"exact": [], "refused": [], "litert aborts": [], "undefined rows": []}
    for si in SCALES:
        buf = _softmax_model(si, n, kind, beta)
        spread = rng.integers(lo, hi + 1, (2, n)).astype("int16" if kind == "int16" else "int8")
        flat = np.repeat(spread[:, :1], n, axis=1)  # uniform rows: the largest sum of exps
        try:
            m = tf2tosa.convert(buf)
        except ConversionError as e:  # a refusal is one line with the reason, naming the op
            msg = str(e)
            assert "\n" not in msg and "softmax" in msg and "scale" in msg, msg
            outcomes["refused"].append(f"{si:.0e}")
            continue
        for x in (spread, flat):  # (separate runs: LiteRT may abort on one and not the other)
            y = next(iter(m.run([x]).values())).astype(np.int64)  # raises on a REQUIRE failure
            want = _float_softmax(x, si, beta, kind)
            try:
                ref = run_tflite(buf, [x], reference_kernels=True, worker=litert)
                r = (next(iter(ref.values())) if isinstance(ref, dict) else ref[0]).astype(np.int64)
            except LiteRTError as e:
                assert "aborted" in str(e) and "--oracle optimized" in str(e), str(e)
                r = None
                outcomes["litert aborts"].append(f"{si:.0e}")
            ok = _tflite_defined(kind, x, si, beta)
            if kind == "int16" and r is not None and not ok.all():
                # where diff · 2^left_shift wraps, the definition saturates the exp table's index at its end:
                # the same as for the input whose differences stop just past that point, where TFLite is defined
                scale = si * beta / (10.0 / 65535.0)
                reach = math.ceil(65536.0 / scale) + 2
                x2 = np.maximum(x.astype(np.int64), x.max(axis=-1, keepdims=True).astype(np.int64) - reach)
                assert _tflite_defined(kind, x2, si, beta).all()
                ref2 = run_tflite(buf, [x2.astype(np.int16)], reference_kernels=True, worker=litert)
                r2 = (next(iter(ref2.values())) if isinstance(ref2, dict) else ref2[0]).astype(np.int64)
                for row in np.flatnonzero(~ok):
                    assert np.array_equal(y[row], r2[row]), (si, row, y[row][:8], r2[row][:8])
                    outcomes["undefined rows"].append(f"{si:.0e}")
                ok[:] = True
                r = np.where(np.isin(np.arange(2), np.flatnonzero(~_tflite_defined(kind, x, si, beta)))[:, None],
                             r2, r)
            for row in range(2):
                if r is not None and ok[row]:
                    assert np.array_equal(y[row], r[row]), (si, row, y[row][:8], r[row][:8])
                else:  # no oracle there: the definition, within the integer kernel's rounding and table error
                    tol = 2 if kind != "int16" else 64
                    err = np.abs(y[row] - np.clip(np.round(want[row]), lo, hi)).max()
                    assert err <= tol, (si, row, err, y[row][:8], want[row][:8])
                    if r is not None:
                        outcomes["undefined rows"].append(f"{si:.0e}")
            if r is not None and ok.all():
                outcomes["exact"].append(f"{si:.0e}")
    print(kind, n, beta, outcomes)
    assert outcomes["exact"], outcomes  # the sweep compared something bit for bit
    if kind == "log":  # TFLite's log_softmax scaling needs scale · 2^26 > 1: refused below, with the reason
        assert outcomes["refused"] == [f"{s:.0e}" for s in SCALES if s * 2 ** 26 <= 1], outcomes
    else:
        assert not outcomes["refused"], outcomes


# ------------------------------------------------------------------------------------------------ verify
def test_verify_failure_writes_nothing_and_names_the_oracle(tmp_path: Path) -> None:
    """The issue's case: an int8 1000-class softmax of input scale 7.8e-9.  LiteRT's reference kernels abort on it
    (QuantizeMultiplierGreaterThanOne): the line suggests --oracle optimized and says nothing was written; the
    program itself runs; with --oracle optimized it verifies and is written."""
    model = tmp_path / "sm.tflite"
    model.write_bytes(_softmax_model(7.8e-9, 1000, "int8"))
    before = tree_hash(tmp_path)
    res = run_cli("convert", model, "-o", tmp_path / "sm.tosa", "--mlir", tmp_path / "sm.mlir", "--verify")
    assert_refused(res, "reference kernels aborted", "signal 6", "--oracle optimized", "not written",
                   rss_cap_mb=600)
    assert tree_hash(tmp_path) == before
    res = run_cli("convert", model, "-o", tmp_path / "sm.tosa", "--verify", "--oracle", "optimized")
    assert res.code == 0, res.output
    ran = run_cli("run", tmp_path / "sm.tosa")
    assert ran.code == 0 and "REQUIRE" not in ran.output, ran.output


def test_verify_mismatch_writes_nothing(tmp_path: Path) -> None:
    """int16 softmax of input scale 10: LiteRT's reference wraps ``diff · 2^16`` in int32, the program saturates
    (the definition): verification fails, and neither output is written."""
    model = tmp_path / "sm16.tflite"
    model.write_bytes(_softmax_model(10.0, 16, "int16"))
    before = tree_hash(tmp_path)
    res = run_cli("convert", model, "-o", tmp_path / "s.tosa", "--mlir", tmp_path / "s.mlir", "--verify")
    assert res.code == 3, res.output
    assert "Traceback" not in res.output
    assert "not written: verification failed" in res.output
    assert tree_hash(tmp_path) == before


# ------------------------------------------------------------------------------------------------ other computed shifts
def _unary(code: int, dt: str, si: float, so: float, zo: int = 0, opts: Any = None,
           shape: tuple[int, ...] = (2, 4, 4, 8)) -> bytes:
    return tflite_model([T("x", shape, dt, quant=([si], [0], 0)), T("y", shape, dt, quant=([so], [zo], 0))],
                        [Op(code, [0], [1], options=opts)], [0], [1])


def _mean(dt: str, si: float, so: float) -> bytes:
    """MEAN over axes 1, 2 of a [2, 4, 4, 8] input (N = 16), keep_dims."""
    return tflite_model([T("x", (2, 4, 4, 8), dt, quant=([si], [0], 0)),
                         T("a", (2,), "int32", data=np.array([1, 2], np.int32)),
                         T("y", (2, 1, 1, 8), dt, quant=([so], [0], 0))],
                        [Op(40, [0, 1], [2], options=_opts("ReducerOptions", KeepDims=True))], [0], [2])


#: op -> (model builder (input scale, output scale), output scales to try, float definition in output codes or None)
OTHER_OPS: dict[str, tuple[Any, list[float | None], Any]] = {
    "tanh_i16": (lambda si, so: _unary(28, "int16", si, 1 / 32768), [None], lambda x, si, so: np.tanh(x * si) * 32768),
    "logistic_i16": (lambda si, so: _unary(14, "int16", si, 1 / 32768), [None],
                     lambda x, si, so: 32768 / (1 + np.exp(np.clip(-x * si, -700, 700)))),
    "tanh_i8": (lambda si, so: _unary(28, I8, si, 1 / 128), [None], None),
    "logistic_i8": (lambda si, so: _unary(14, I8, si, 1 / 256, -128), [None], None),
    "l2norm_i8": (lambda si, so: _unary(11, I8, si, 1 / 128, shape=(2, 8)), [None], None),
    "mean_i8": (lambda si, so: _mean(I8, si, so), [1e-10, 1e-3, 1.0, 1e3],
                lambda x, si, so: x.astype(np.float64).mean(axis=(1, 2), keepdims=True) * si / so),
    "mean_i16": (lambda si, so: _mean("int16", si, so), [1e-10, 1e-3, 1.0, 1e3],
                 lambda x, si, so: x.astype(np.float64).mean(axis=(1, 2), keepdims=True) * si / so),
    "hard_swish_i8": (lambda si, so: _unary(117, I8, si, so), [1e-10, 1e-3, 1.0, 1e3], None),
}


def _other_defined(name: str, si: float, so: float | None) -> bool | None:
    """Whether TFLite's integer arithmetic is defined at these scales (True), overflows int32 (False: LiteRT's
    result is then not compared), or neither is certain (None).  int16 tanh/logistic: the input multiplier
    ``scale · 3 · 4096`` must stay within int16 (it multiplies int16 codes); MEAN: ``sum · 2^left_shift`` must
    fit int32 (|sum| <= 16 codes of the input's range)."""
    if name in ("tanh_i16", "logistic_i16"):
        return si * 3 * 4096 <= 32767
    if name.startswith("mean") and so is not None:
        span = 16 * (65535 if name.endswith("i16") else 255)
        reach = span * 2.0 ** max(math.frexp(si / so / 16)[1], 0)
        return True if reach < 2 ** 29 else False if reach > 2 ** 32 else None
    return True


@pytest.mark.parametrize("name", list(OTHER_OPS))
def test_other_computed_shift_sweep(name: str, litert: Any) -> None:
    """Every input scale 1e-10 .. 1e3 (and output scale, where TFLite leaves it free) converts and runs without a
    REQUIRE failure, or is refused in one line with the reason; bit-exact with LiteRT's reference kernels where
    TFLite's arithmetic is defined and LiteRT runs, the float definition (±1 code) where it overflows.
    (hard_swish int8 is checked for running only: it is one code off LiteRT at some extreme scale ratios.)"""
    import tf2tosa
    from tf2tosa.errors import ConversionError
    from tf2tosa.verify.litert import LiteRTError, run_tflite

    build, out_scales, definition = OTHER_OPS[name]
    dt = np.int16 if name.endswith("i16") else np.int8
    rng = np.random.default_rng(7)
    counts = {"exact": 0, "definition": 0, "refused": 0, "litert fails": 0, "runs": 0}
    for si in SCALES:
        for so in out_scales:
            buf = build(si, so)
            try:
                m = tf2tosa.convert(buf)
            except ConversionError as e:
                assert "\n" not in str(e) and "outside" in str(e), str(e)
                counts["refused"] += 1
                continue
            shape = tuple(m.graph.inputs[0].type.shape)
            x = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, shape).astype(dt)
            y = next(iter(m.run([x]).values())).astype(np.int64)  # raises on a REQUIRE failure
            counts["runs"] += 1
            if name == "hard_swish_i8":
                continue
            defined = _other_defined(name, si, so)
            if defined is False:
                want = np.clip(np.round(definition(x, si, so)), np.iinfo(dt).min, np.iinfo(dt).max)
                assert np.abs(y - want).max() <= 1, (name, si, so)
                counts["definition"] += 1
                continue
            try:
                r = next(iter(run_tflite(buf, [x], reference_kernels=True, worker=litert).values()))
            except LiteRTError:
                counts["litert fails"] += 1
                continue
            if defined:
                assert np.array_equal(y, r.astype(np.int64)), (name, si, so, np.abs(y - r).max())
                counts["exact"] += 1
    print(name, counts)
    assert counts["runs"] and (counts["exact"] or name == "hard_swish_i8"), counts
