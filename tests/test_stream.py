"""Streaming models (issue 12): the RFC's variable memory model, sessions, ``--state-io``, step-by-step verification.

Oracles: LiteRT's interpreter invoked N times in one process (BUILTIN_REF kernels: its resource variables carry
state exactly as a deployed interpreter's), the Arm reference model (one invocation per call: it streams the
``--state-io`` form with the state fed back by the test), tosa-opt (both forms, with exactly the declared profiles
and extensions), and the spec's memory-model text (the statuses of the unit tests below).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf2tosa
from tests.conftest import HAVE_LITERT, HAVE_TF
from tf2tosa.errors import ConversionError, InputError
from tf2tosa.executor import ERROR, UNPREDICTABLE, VALID, run, run_checked
from tf2tosa.ir import DType as D
from tf2tosa.ir import Graph, TensorType

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "tf2tosa.cli"]
STEPS = 20
needs_tf = pytest.mark.skipif(not (HAVE_TF and HAVE_LITERT), reason="needs tensorflow and ai_edge_litert")


# ------------------------------------------------------------------------------------------ the memory model
def _counter(init: np.ndarray | None = None, name: str = "acc", shape: tuple[int, ...] = (2,),
             dtype: D = D.FP32, declare: int = 1, read: bool = True, write: bool = True) -> Graph:
    """out = state + x; state := out (a declaration ``declare`` times)."""
    t = TensorType(shape, dtype)
    g = Graph()
    x = g.add_input("x", t)
    for _ in range(declare):
        attrs: dict[str, Any] = {"name": name, "var_shape": list(shape), "type": dtype}
        if init is not None:
            attrs["initial_value"] = init
        g.add_op("tosa.VARIABLE", [], [], attrs)
    new = x
    if read:
        old = g.add_op("tosa.VARIABLE_READ", [], [t], {"name": name}, result_names=["old"]).result
        new = g.add_op("tosa.ADD", [old, x], [t], result_names=["new"]).result
    if write:
        g.add_op("tosa.VARIABLE_WRITE", [new], [], {"name": name})
    if read:
        g.outputs = [new]
    else:
        g.outputs = [g.add_op("tosa.IDENTITY", [x], [t], result_names=["y"]).result]
    return g


ONES = {"x": np.ones(2, np.float32)}


def test_seen_is_cleared_between_invocations() -> None:
    """One declaration per invocation is valid any number of times (spec: seen is cleared by tosa_execute_graph)."""
    g = _counter(np.array([0.5, -1.0], np.float32))
    store: dict[str, np.ndarray] = {}
    for k in range(1, 4):
        res = run_checked(g, ONES, variables=store)
        assert res.status == VALID
        assert res.outputs["new"].tolist() == [0.5 + k, -1.0 + k]


def test_double_declaration_in_one_invocation_is_unpredictable() -> None:
    res = run_checked(_counter(np.zeros(2, np.float32), declare=2), ONES, validate=False)
    assert res.status == UNPREDICTABLE and "acc" in res.message and "declared twice" in res.message


def test_read_before_any_write_is_unpredictable() -> None:
    res = run_checked(_counter(None), ONES, validate=False)
    assert res.status == UNPREDICTABLE and "acc" in res.message and "before any write" in res.message
    with pytest.raises(ConversionError, match="variable acc read before any write"):
        run(_counter(None), ONES)


def test_is_written_persists_across_invocations() -> None:
    """A variable without initial value written by one invocation is readable by the next (RFC: is_written)."""
    writer = _counter(None, read=False)  # acc := x
    reader = _counter(None)  # out = acc + x
    store: dict[str, np.ndarray] = {}
    assert run_checked(reader, ONES, variables=dict(store), validate=False).status == UNPREDICTABLE
    assert run_checked(writer, {"x": np.array([3.0, 4.0], np.float32)}, variables=store, validate=False).status == VALID
    res = run_checked(reader, ONES, variables=store, validate=False)
    assert res.status == VALID and res.outputs["new"].tolist() == [4.0, 5.0]


@pytest.mark.parametrize("change", ["shape", "type"])
def test_shape_or_type_change_is_unpredictable(change: str) -> None:
    """The persistent variable keeps its shape and type; a program reading it as another is a failed REQUIRE."""
    store: dict[str, np.ndarray] = {}
    assert run_checked(_counter(np.zeros(2, np.float32)), ONES, variables=store).status == VALID
    if change == "shape":
        other = _counter(np.zeros(3, np.float32), shape=(3,))
        feed = {"x": np.ones(3, np.float32)}
    else:
        other = _counter(np.zeros(2, np.int8), dtype=D.INT8)
        feed = {"x": np.ones(2, np.int8)}
    res = run_checked(other, feed, variables=store, validate=False)
    assert res.status == UNPREDICTABLE and "acc" in res.message and change in res.message


def test_write_without_declaration_is_unpredictable() -> None:
    g = _counter(np.zeros(2, np.float32))
    decl = next(op for op in g.ops.values() if op.opcode == "VARIABLE")
    g.remove_op(decl)
    res = run_checked(g, ONES, variables={"acc": np.zeros(2, np.float32)}, validate=False)
    assert res.status == UNPREDICTABLE and "acc" in res.message


def test_initial_value_of_the_wrong_shape_is_unpredictable() -> None:
    g = _counter(np.zeros(3, np.float32))
    res = run_checked(g, ONES, validate=False)
    assert res.status in (UNPREDICTABLE, ERROR) and "acc" in res.message


def test_sessions_are_isolated_and_reset() -> None:
    from tf2tosa.executor.session import Session

    g = _counter(np.array([1.0, 2.0], np.float32))
    a, b = Session(g), Session(g)
    seq = [np.full(2, k, np.float32) for k in range(5)]
    alone = Session(g)
    expect = [alone.run({"x": x})["new"] for x in seq]
    got_a = []
    for k, x in enumerate(seq):
        got_a.append(a.run({"x": x})["new"])
        if k % 2 == 0:
            b.run({"x": -x})  # interleaved: must not disturb a
    assert all(np.array_equal(p, q) for p, q in zip(got_a, expect))
    assert a.state["acc"].tolist() == (np.array([1.0, 2.0]) + sum(seq)).tolist()
    a.reset()
    assert a.run({"x": seq[0]})["new"].tolist() == [1.0, 2.0]
    a.state["acc"] = np.array([10.0, 20.0], np.float32)
    assert a.run({"x": ONES["x"]})["new"].tolist() == [11.0, 21.0]
    with pytest.raises(InputError, match="'acc'.*shape"):
        a.state["acc"] = np.zeros(3, np.float32)
    with pytest.raises(InputError, match="no state variable named 'nope'"):
        a.state["nope"] = np.zeros(2, np.float32)


def test_state_io_pass_before_after() -> None:
    """Each variable becomes NAME_state_in / NAME_state_out; the session streams both forms identically."""
    from tf2tosa.converter.passes import state_io
    from tf2tosa.executor.session import Session

    g_var = _counter(np.array([1.0, 2.0], np.float32))
    g_io = _counter(np.array([1.0, 2.0], np.float32))
    pairs = state_io(g_io)
    assert [(p["variable"], p["input"], p["output"]) for p in pairs] == [("acc", "acc_state_in", "acc_state_out")]
    assert [v.name for v in g_io.inputs] == ["x", "acc_state_in"]
    assert [v.name for v in g_io.outputs] == ["new", "acc_state_out"]
    assert not any(op.opcode.startswith("VARIABLE") for op in g_io.ops.values())
    s_var, s_io = Session(g_var), Session(g_io)
    assert s_io.state_io and s_io.input_names == ["x"] and s_io.output_names == ["new"]
    for k in range(4):
        x = {"x": np.full(2, k - 1.5, np.float32)}
        assert s_var.run(x)["new"].tolist() == s_io.run(x)["new"].tolist()
    assert s_var.state["acc"].tolist() == s_io.state["acc"].tolist()
    # without a known initial value the state must be set first
    g_none = _counter(None)
    state_io(g_none)
    with pytest.raises(InputError, match="variable 'acc' is read before any write"):
        Session(g_none).run(ONES)


# ------------------------------------------------------------------------------------- the acceptance models
def _frames(graph: Graph, session: Any, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(STEPS):
        s = {}
        for v in graph.inputs:
            if v.name not in session.input_names:
                continue
            if v.dtype.is_float:
                s[v.name] = rng.uniform(-1, 1, v.type.static_shape).astype(np.float32)
            else:
                s[v.name] = rng.integers(-128, 128, v.type.static_shape).astype(v.dtype.np_dtype())
        out.append(s)
    return out


def _litert_steps(data: bytes, graph: Graph, frames: list[dict[str, np.ndarray]]) -> list[list[np.ndarray]]:
    """LiteRT (BUILTIN_REF), one interpreter invoked once per frame; outputs in our output order (by source name)."""
    from tf2tosa.verify.litert import run_tflite_many

    by_name = {v.name: v.source for v in graph.inputs}
    refs = run_tflite_many(data, [{by_name[k]: a for k, a in f.items()} for f in frames], reference_kernels=True,
                           stream=True)
    return [[r[v.source] for v in graph.outputs if v.source in r] for r in refs]


STREAM_MODELS = {"kws": ["ema", "ring"], "rnn": ["lstm_h", "gru_h", "lstm_c"]}


@needs_tf
@pytest.mark.parametrize("quant", [None, "int8"])
@pytest.mark.parametrize("kind", sorted(STREAM_MODELS))
def test_streaming_model_like_litert(kind: str, quant: str | None, tmp_path: Path) -> None:
    """20 invocations of a streaming model: ``kws``, a keyword spotter (ring buffer + streaming conv front end + a
    smoothed-output state), ``rnn``, an LSTM cell feeding a GRU cell with their states (h, c; h) in resource
    variables.  Every step equals LiteRT's (ints: 0 mismatches; floats: within 1e-5 x max|ref| and within the
    suite's derived bound around our fp64 run); the --state-io form, streamed through the Arm reference model with
    its own state fed back, equals our executor; tosa-opt validates both forms with exactly their profiles and
    extensions.  (The int8 models keep float32 state: TFLite's converter leaves resource variables float and
    quantizes around them; its variable quantization fails on these models.)"""
    from tests import modelgen_stream as ms
    from tests.e2e import fp32_bound
    from tf2tosa.verify import tosa_tools

    data = ms.kws_model(quant) if kind == "kws" else ms.stateful_rnn_model(quant)
    m_var = tf2tosa.convert(data)
    m_io = tf2tosa.convert(data, state_io=True)
    assert "EXT-VARIABLE" in m_var.extensions and "EXT-VARIABLE" not in m_io.extensions
    assert set(m_var.extensions) - {"EXT-VARIABLE"} == set(m_io.extensions)
    names = STREAM_MODELS[kind]
    assert [v.name for v in m_var.state_variables] == names
    assert [(v.input, v.output) for v in m_io.state_variables] == [(f"{n}_state_in", f"{n}_state_out")
                                                                 for n in names]
    assert any("--state-io" in w for w in m_var.graph.record.warnings)
    assert not any("--state-io" in w for w in m_io.graph.record.warnings)

    s_var, s_io = m_var.session(), m_io.session()
    frames = _frames(m_var.graph, s_var, seed=2026)
    refs = _litert_steps(data, m_var.graph, frames)
    store64: dict[str, np.ndarray] = {}
    ours: list[dict[str, np.ndarray]] = []
    ours64: list[dict[str, np.ndarray]] = []
    for k, (f, ref) in enumerate(zip(frames, refs)):
        got = s_var.run(f)
        ours.append(got)
        got_io = s_io.run(f)
        assert all(np.array_equal(got[n], got_io[n]) for n in got), f"step {k}: the two forms differ"
        assert len(ref) == len(got) == len(m_var.graph.outputs)
        if quant is None:
            got64 = run(m_var.graph, f, variables=store64, precise=True)
            ours64.append(got64)
        for v, r in zip(m_var.graph.outputs, ref):
            a = got[v.name]
            if quant is None:
                rel = float(np.abs(a.astype(np.float64) - r).max() / np.abs(r).max())
                assert rel <= 1e-5, f"step {k} {v.name}: {rel:.3g} x max|ref|"
                b64 = np.asarray(got64[v.name], np.float64)
                assert float(np.abs(b64 - r).max()) <= fp32_bound(a, b64, v.dtype), f"step {k} {v.name}"
            else:
                assert int(np.count_nonzero(a != r.reshape(a.shape))) == 0, f"step {k} {v.name}"
    # the state after 20 steps: the ring buffer holds the last 4 frames exactly (float state, quantized model too)
    if kind == "kws" and quant is None:
        ring = s_var.state["ring"]
        assert np.array_equal(ring[0], np.concatenate([f[m_var.input_names[0]][0] for f in frames[-4:]]))

    # the --state-io form in the Arm reference model: one invocation per call, the state fed back
    if not tosa_tools.available():
        pytest.skip("Arm tools not installed")
    for m in (m_var, m_io):
        ok, msg = tosa_tools.validate(m.to_bytes(), m.profiles, m.extensions)
        assert ok, msg
    path = tmp_path / f"{kind}_io.tosa"
    m_io.save(path)
    state = {v.input: v.initial for v in m_io.state_variables}
    for k, f in enumerate(frames):
        out = tosa_tools.run_reference(path, {**f, **state})
        for v in m_io.state_variables:
            state[v.input] = out.pop(v.output)
        for name, a in ours[k].items():
            if quant is None:  # the reference model in fp32 against our fp64 run, by the suite's derived bound
                b64 = np.asarray(ours64[k][name], np.float64)
                assert float(np.abs(out[name].astype(np.float64) - b64).max()) <= fp32_bound(a, b64), \
                    f"step {k} {name}"
            else:
                assert np.array_equal(out[name], a), f"step {k} {name}"
    if quant is not None:  # the reference model's own state after 20 steps is ours, bit for bit
        for v in m_io.state_variables:
            assert np.array_equal(state[v.input], s_io.state[v.name])


@needs_tf
def test_verify_steps_api_and_cli(tmp_path: Path) -> None:
    """TosaModel.verify_steps and `verify --steps` (both forms) judge every step against LiteRT."""
    from tests import modelgen_stream as ms

    data = ms.kws_model("int8")
    for sio in (False, True):
        rep = tf2tosa.convert(data, state_io=sio).verify_steps(STEPS, seed=4)
        assert rep.ok and rep.runs == STEPS and rep.steps is not None and len(rep.steps) == STEPS
        assert all(o.mismatches == 0 for o in rep.outputs)
    # plain verify of a stateful model compares its input sets as consecutive steps (LiteRT keeps the state)
    rep = tf2tosa.convert(ms.kws_model(None)).verify(num=3)
    assert rep.ok and rep.steps is not None and len(rep.steps) == 3
    model = tmp_path / "kws_int8.tflite"
    model.write_bytes(data)
    for extra in ([], ["--state-io"]):
        proc = subprocess.run([*CLI, "verify", str(model), "--steps", "5", "--json", *extra], capture_output=True,
                              text=True, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        obj = json.loads(proc.stdout)
        assert obj["report"]["runs"] == 5 and len(obj["report"]["steps"]) == 5
        assert all(st["ok"] and st["mismatches"] == 0 for st in obj["report"]["steps"])


# ------------------------------------------------------------------------------------------------ the CLI
def _cli(*args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=ROOT)


def _one_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture(scope="module")
def counter_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The counter program as a .tosa, in both forms (a state-as-I/O .tosa does not carry the initial value).

    (A VARIABLE without initial value is not written to a file here: tosa-opt 1.0's deserializer asserts on it.)"""
    from tf2tosa.api import TosaModel
    from tf2tosa.converter.passes import state_io
    from tf2tosa.tosa import profiles

    d = tmp_path_factory.mktemp("stream")
    paths = []
    for name, init, io_form in (("var", np.array([1.0, 2.0], np.float32), False),
                                ("io", np.array([1.0, 2.0], np.float32), True)):
        g = _counter(init)
        if io_form:
            state_io(g)
        profs, exts = profiles.requirements(g)
        g.record.profiles, g.record.extensions = profs, exts
        p = d / f"counter_{name}.tosa"
        TosaModel(g).save(p)
        paths.append(p)
    return paths[0], paths[1]


def test_cli_run_steps_inspect_and_bad_input(counter_files: tuple[Path, Path], tmp_path: Path) -> None:
    var, io_form = counter_files
    frames = tmp_path / "frames.npy"
    np.save(frames, np.arange(12, dtype=np.float32).reshape(6, 2))
    out_dir = tmp_path / "out"
    proc = _cli("run", var, "--steps", 6, "--input", f"x={frames}", "--output-dir", out_dir)
    assert proc.returncode == 0, proc.stderr
    stacked = np.load(out_dir / "new.npy")
    expect = np.array([1.0, 2.0]) + np.cumsum(np.arange(12, dtype=np.float64).reshape(6, 2), axis=0)
    assert stacked.shape == (6, 2) and stacked.tolist() == expect.tolist()
    assert np.load(out_dir / "state_acc.npy").tolist() == expect[-1].tolist()
    # continue the stream from the saved state, in the state-as-I/O form
    proc = _cli("run", io_form, "--steps", 1, "--input", f"x={frames}", "--state", f"acc={out_dir / 'state_acc.npy'}",
                "--json")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert obj["steps"] == 1 and obj["outputs"][0]["max"] == expect[-1][1] + 1.0
    insp = _cli("inspect", io_form)
    assert "acc: tensor<2xfp32>: input acc_state_in -> output acc_state_out" in insp.stdout
    assert "acc: tensor<2xfp32>: EXT-VARIABLE" in _cli("inspect", var).stdout
    # the --json objects follow their schemas
    jsonschema = pytest.importorskip("jsonschema")
    schemas = ROOT / "docs" / "schemas"
    jsonschema.validate(obj, json.loads((schemas / "run.json").read_text()))
    obj = json.loads(_cli("inspect", io_form, "--json").stdout)
    jsonschema.validate(obj, json.loads((schemas / "inspect.json").read_text()))
    assert obj["state"] == [{"variable": "acc", "type": "tensor<2xfp32>", "input": "acc_state_in",
                             "output": "acc_state_out", "initial": False}]

    # bad input: one line naming the input / the variable
    _one_error(_cli("run", var, "--steps", 7, "--input", f"x={frames}"), "--steps 7", "'x'", "6 step(s)")
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros(3, np.float32))
    _one_error(_cli("run", var, "--steps", 2, "--state", f"acc={wrong}"), "variable 'acc'", "shape [3]")
    _one_error(_cli("run", io_form, "--steps", 2), "variable 'acc' is read before any write")
    _one_error(_cli("run", io_form, "--steps", 2, "--state", f"nope={wrong}"), "no state variable named 'nope'")


@needs_tf
def test_state_types_and_call_once_initialisers() -> None:
    """int32, int8, uint8 and float32 resource variables with non-trivial CALL_ONCE initial values, all read and
    written every step: 20 steps equal LiteRT's (0 mismatches; the float accumulator too), in both forms; the
    int32 state (i8 bytes) and the uint8 state (i8 holding u - 128) round-trip exactly; the Arm reference model
    streams the --state-io form with its own state fed back, equal to our executor."""
    from tests import modelgen_stream as ms
    from tf2tosa.verify import tosa_tools

    data = ms.state_types_model()
    m_var = tf2tosa.convert(data)
    m_io = tf2tosa.convert(data, state_io=True)
    types = {v.name: v.type for v in m_var.state_variables}
    assert {k: (t.dtype, tuple(t.shape)) for k, t in types.items()} == {
        "count": (D.INT8, (2, 4)), "ring8": (D.INT8, (1, 4)), "ring_u8": (D.INT8, (1, 4)), "acc": (D.FP32, (1, 4))}
    for m in (m_var, m_io):
        rep = m.verify_steps(STEPS, seed=7)
        assert rep.ok and all(o.mismatches == 0 and o.max_abs == 0 for o in rep.outputs), str(rep)
    # exact round trips: the decoded state after each step is the value the step returned
    s = m_var.session()
    init = {v.name: v.initial for v in m_var.state_variables}
    count0 = init["count"].astype(np.int64)
    decoded0 = sum(((count0[..., j] + 128) << (8 * j)) for j in range(3)) + (count0[..., 3] << 24)
    assert decoded0.tolist() == [2_000_000_007, -1_234_567_891]
    assert (init["ring_u8"].astype(np.int16) + 128).tolist() == [[200, 3, 255, 128]]
    names = {v.source: v.name for v in m_var.graph.outputs}
    frames = _frames(m_var.graph, s, seed=11)
    assert s.state["count"].dtype == np.int32 and s.state["count"].tolist() == [2_000_000_007, -1_234_567_891]
    assert s.state["ring_u8"].dtype == np.uint8 and s.state["ring_u8"].tolist() == [[200, 3, 255, 128]]
    for f in frames:
        out = s.run(f)
        # session.state shows the source's values, decoded from the stored form
        assert s.state["count"].tolist() == out[names["StatefulPartitionedCall:1"]].tolist()
        assert s.state["ring_u8"].tolist() == out[names["StatefulPartitionedCall:3"]].view(np.uint8).tolist()
    for value in (np.array([-2**31, 2**31 - 1], np.int32), np.array([0, -1], np.int32)):
        s.state["count"] = value  # set, encoded, read back, and the next step counts on from it
        assert s.state["count"].tolist() == value.tolist()
        out = s.run(frames[0])
        assert out[names["StatefulPartitionedCall:1"]].tolist() == (value + np.array([1, -2], np.int32)).tolist()
    with pytest.raises(InputError, match="'ring_u8'.*int8"):
        s.state["ring_u8"] = np.zeros((1, 4), np.int8)
    if not tosa_tools.available():
        pytest.skip("Arm tools not installed")
    for m in (m_var, m_io):
        ok, msg = tosa_tools.validate(m.to_bytes(), m.profiles, m.extensions)
        assert ok, msg
    s_io = m_io.session()
    state = {v.input: v.initial for v in m_io.state_variables}
    data_io = m_io.to_bytes()
    for k, f in enumerate(frames):
        ours = s_io.run(f)
        out = tosa_tools.run_reference(data_io, {**f, **state})
        for v in m_io.state_variables:
            state[v.input] = out.pop(v.output)
        for name, a in ours.items():
            assert np.array_equal(out[name], a), f"step {k} {name}"


def test_int16_int32_byte_state_round_trip() -> None:
    """The i8 byte form of int16/int32 state (tfl_control._to_bytes/_from_bytes) is exact for every int16 value and
    for int32 extremes, in our executor and (when installed) the Arm reference model."""
    from tf2tosa.legalizations.tfl_control import _bytes_np, _from_bytes, _to_bytes
    from tf2tosa.tosa.builder import Builder
    from tf2tosa.verify import tosa_tools

    cases = {D.INT16: np.arange(-32768, 32768, dtype=np.int16).reshape(256, 256),
             D.INT32: np.array([[-2**31, -2**31 + 1, -65536, -257, -256, -129, -128, -1],
                                [0, 1, 127, 128, 255, 256, 2**24 + 3, 2**31 - 1]], np.int32)}
    for dt, x in cases.items():
        g = Graph()
        v = g.add_input("x", TensorType(x.shape, dt))
        b = Builder(g, location="test", fold=False)
        enc = _to_bytes(b, v)
        g.outputs = [_from_bytes(b, enc, dt), enc]
        outs = list(run(g, {"x": x}).values())
        assert outs[0].dtype == x.dtype and np.array_equal(outs[0], x)
        assert np.array_equal(outs[1], _bytes_np(x, dt))
        if tosa_tools.available():
            from tf2tosa.api import TosaModel
            from tf2tosa.tosa import profiles

            g.record.profiles, g.record.extensions = profiles.requirements(g)
            ref = list(tosa_tools.run_reference(TosaModel(g).to_bytes(), {"x": x}).values())
            assert np.array_equal(ref[0], x) and np.array_equal(ref[1], outs[1])
