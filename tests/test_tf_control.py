"""TensorFlow control flow and kept resource variables, verified against TensorFlow.

* a Keras LSTM + GRU SavedModel (``tf.While`` over TensorLists, Keras' ``tf.Range`` of an empty axis list):
  unrolled, PRO-FP only;
* ``tf.cond`` (``COND_IF``) and ``tf.while_loop`` (unrolled for a static trip count, ``WHILE_LOOP`` otherwise)
  inside a ``tf.function``;
* a SavedModel whose resource variables every call updates, converted with ``keep_variables``: EXT-VARIABLE, and
  several consecutive calls match TensorFlow's.

Float outputs must lie within 1e-5 × max|TF| and within the suite's derived bound (``tests.e2e.fp32_bound`` of
our fp64 run: ``bound_use <= 1``).  Every ``.tosa`` serialized here is validated by tosa-opt and run in the Arm
reference model by the session hook (``tests/tosa_hook.py``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import tensorflow as tf  # noqa: E402

from tests import tfgen  # noqa: E402
from tests.e2e import fp32_bound, fp32_noise  # noqa: E402
from tf2tosa import convert  # noqa: E402
from tf2tosa.converter.pipeline import convert_graph  # noqa: E402
from tf2tosa.converter.tensorflow import load_tensorflow  # noqa: E402
from tf2tosa.errors import InvalidGraphError, ModelLoadError, UnsupportedOpsError  # noqa: E402
from tf2tosa.executor import run  # noqa: E402
from tf2tosa.serializer import to_bytes  # noqa: E402
from tf2tosa.verify import tosa_tools  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
REL = 1e-5  # the acceptance bound: max|ours - TF| <= REL * max|TF|


def _compare(graph: Any, feed: dict[str, np.ndarray], refs: list[np.ndarray],
             variables: dict[str, np.ndarray] | None = None) -> tuple[float, float]:
    """(max relative error, largest error / derived fp32 bound) of our fp32 run against TF's outputs."""
    got = list(run(graph, feed, variables=variables).values())
    rel, use = 0.0, 0.0
    if variables is None:  # the fp64 run only where no state would be advanced twice
        got64 = list(run(graph, feed, precise=True).values())
        noise = fp32_noise(graph, feed)
    for k, (o, r, v) in enumerate(zip(got, refs, graph.outputs)):
        r = np.asarray(r)
        assert o.size == r.size, f"output {v.name}: {o.shape} vs TF {r.shape}"
        o = o.reshape(r.shape)
        rel = max(rel, tfgen.rel_err(o, r))
        if variables is None:
            o64 = got64[k].reshape(r.shape)
            err = float(np.abs(o64 - r.astype(np.float64)).max())
            bound = fp32_bound(o, o64, v.dtype, noise.get(v.name, 0.0))
            use = max(use, err / bound if bound else (0.0 if err == 0 else float("inf")))
    assert len(got) == len(refs)
    return rel, use


def _validate(graph: Any) -> None:
    data = to_bytes(graph)  # (also checked by the session hook: tosa-opt + the Arm reference model)
    if tosa_tools.available():
        ok, msg = tosa_tools.validate(data, graph.record.profiles, graph.record.extensions)
        assert ok, msg


# ---------------------------------------------------------------------------------------------- Keras RNNs
def _lstm_gru(seed: int = 11) -> Any:
    import keras

    keras.utils.set_random_seed(seed)
    inp = keras.Input((7, 4), batch_size=2, name="frames")
    h = keras.layers.LSTM(6, return_sequences=True, name="lstm")(inp)
    out = keras.layers.GRU(5, name="gru")(h)
    return keras.Model(inp, out)


def test_keras_lstm_gru_savedmodel(tmp_path: Path) -> None:
    model = _lstm_gru()
    sm = tmp_path / "lstm_gru"
    model.export(str(sm), verbose=False)
    raw = load_tensorflow(sm)
    kinds = {op.name for op in raw.ops.values()}
    assert {"tf.While", "tf.TensorListReserve", "tf.TensorListFromTensor", "tf.TensorListStack",
            "tf.Range"} <= kinds | {"tf.StatelessWhile"} and ("tf.While" in kinds or "tf.StatelessWhile" in kinds)
    m = convert(str(sm), input_shapes={"frames": (2, 7, 4)})  # (the export's batch is dynamic)
    g = m.graph
    counts = g.op_counts()
    assert "tosa.WHILE_LOOP" not in counts and counts.get("tosa.MATMUL", 0) > 0  # unrolled: 7 steps per layer
    assert g.record.profiles == ["PRO-FP"] and g.record.extensions == []
    _validate(g)
    loaded = tf.saved_model.load(str(sm))
    fn = loaded.signatures["serving_default"]
    worst, use = 0.0, 0.0
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(-2, 2, (2, 7, 4)).astype(np.float32)
        ref = fn(**{g.source.signature_names[g.inputs[0].name]: tf.constant(x)})
        refs = [np.asarray(ref[k]) for k in sorted(ref)]
        r, u = _compare(g, {g.inputs[0].name: x}, refs)
        worst, use = max(worst, r), max(use, u)
    print(f"keras LSTM+GRU SavedModel: max rel err {worst:.3g}, derived-bound use {use:.3g}, ops {counts}")
    assert worst <= REL and use <= 1.0


# ------------------------------------------------------------------------------------ tf.cond / tf.while_loop
def test_tf_cond_in_function() -> None:
    def f(x: Any) -> Any:
        return tf.cond(tf.reduce_sum(x) > 0.0, lambda: tf.nn.relu(x) * 2.0 + 1.0, lambda: tf.tanh(x) - 1.0)

    case = tfgen.Case("cond", f, [tfgen.In((3, 4))], "StatelessIf")
    seeds = (0, 1, 2, 3)
    signs = {bool(tfgen.make_inputs(case.inputs, s)[0].sum() > 0) for s in seeds}
    assert signs == {True, False}, "the seeds must take both branches"
    res = tfgen.run_case(case, seeds)
    print(f"tf.cond: max rel err {res.rel:.3g}, derived-bound use {res.bound_use:.3g}, ops {res.tosa_ops}")
    assert res.tosa_ops.get("tosa.COND_IF") == 1 and res.extensions == ["EXT-CONTROLFLOW"]
    assert res.rel <= REL and res.bound_use <= 1.0


def test_tf_while_loop_static_trip_count_unrolls() -> None:
    def f(x: Any) -> Any:
        def body(i: Any, acc: Any, ta: Any) -> Any:
            acc = tf.tanh(acc * 0.75 + x * tf.cast(i + 1, tf.float32))
            return i + 1, acc, ta.write(i, acc)

        _, acc, ta = tf.while_loop(lambda i, a, t: i < 5, body,
                                   [tf.constant(0), x, tf.TensorArray(tf.float32, size=5)])
        return acc, ta.stack()

    case = tfgen.Case("while_static", f, [tfgen.In((2, 3))], "StatelessWhile")
    res = tfgen.run_case(case, (0, 1, 2))
    print(f"tf.while_loop (static): max rel err {res.rel:.3g}, derived-bound use {res.bound_use:.3g}, "
          f"ops {res.tosa_ops}")
    assert "tosa.WHILE_LOOP" not in res.tosa_ops and res.tosa_ops.get("tosa.TANH") == 5
    assert res.extensions == []
    assert res.rel <= REL and res.bound_use <= 1.0


def test_tf_while_loop_dynamic_trip_count() -> None:
    def f(x: Any) -> Any:
        def body(n: Any, a: Any) -> Any:
            return n + 1, a * 0.5 + 0.01

        return tf.while_loop(lambda n, a: tf.reduce_max(tf.abs(a)) > 0.1, body, [tf.constant(0), x])

    case = tfgen.Case("while_dynamic", f, [tfgen.In((2, 3), lo=-4.0, hi=4.0)], "StatelessWhile")
    res = tfgen.run_case(case, (0, 1, 2))
    print(f"tf.while_loop (dynamic): max rel err {res.rel:.3g}, mismatches {res.mismatches}, "
          f"derived-bound use {res.bound_use:.3g}, ops {res.tosa_ops}")
    assert res.tosa_ops.get("tosa.WHILE_LOOP") == 1 and res.extensions == ["EXT-CONTROLFLOW"]
    assert res.mismatches == 0 and res.rel <= REL and res.bound_use <= 1.0


def test_nested_cond_in_while_and_while_in_cond() -> None:
    """A tf.cond inside an unrolled loop body (one COND_IF per step); a data-dependent loop inside a branch."""

    def cond_in_while(x: Any) -> Any:
        def body(i: Any, a: Any) -> Any:
            return i + 1, tf.cond(tf.reduce_sum(a) > 0.0, lambda: a * 0.5 - 0.3, lambda: a + 0.7)

        return tf.while_loop(lambda i, a: i < 4, body, [0, x])[1]

    def while_in_cond(x: Any) -> Any:
        def grow(a: Any) -> Any:
            return tf.while_loop(lambda a: tf.reduce_max(a) < 3.0, lambda a: (a + 1.0,), [a])[0]

        return tf.cond(tf.reduce_sum(x) > 0.0, lambda: grow(x), lambda: x * 2.0)

    res = tfgen.run_case(tfgen.Case("cond_in_while", cond_in_while, [tfgen.In((2, 3))], "StatelessWhile"),
                         (0, 1, 2, 3))
    assert res.tosa_ops.get("tosa.COND_IF") == 4 and "tosa.WHILE_LOOP" not in res.tosa_ops
    assert res.rel <= REL and res.bound_use <= 1.0
    res = tfgen.run_case(tfgen.Case("while_in_cond", while_in_cond, [tfgen.In((2, 3))], "StatelessIf"),
                         (0, 1, 2, 3))
    assert res.tosa_ops.get("tosa.COND_IF") == 1 and res.extensions == ["EXT-CONTROLFLOW"]
    assert res.rel <= REL and res.bound_use <= 1.0


def test_dynamic_loop_over_tensor_list_is_reported() -> None:
    @tf.function(input_signature=[tf.TensorSpec([4, 3], tf.float32, name="x")])
    def f(x: Any) -> Any:
        def body(i: Any, ta: Any) -> Any:
            return i + 1, ta.write(i, x[i] * 2.0)

        n = tf.cast(tf.reduce_sum(tf.cast(x[:, 0] > 0, tf.int32)), tf.int32)
        _, ta = tf.while_loop(lambda i, t: i < n, body, [tf.constant(0), tf.TensorArray(tf.float32, size=4)])
        return ta.stack()

    with pytest.raises(UnsupportedOpsError) as ei:
        convert_graph(load_tensorflow(f))
    msg = str(ei.value).splitlines()[0]
    assert "While" in msg and "a loop over TensorLists is lowered only unrolled" in msg, msg


def test_empty_range_reduction_axes() -> None:
    """Keras' ``max(x, range(rank(x)))`` of a scalar reduces over no axes (TF: the scalar itself)."""

    def f(x: Any) -> Any:
        s = tf.reduce_sum(x)
        return x * tf.reduce_max(s, axis=tf.range(tf.rank(s)))

    res = tfgen.run_case(tfgen.Case("empty_range", f, [tfgen.In((2, 3))], "Range"), (0, 1))
    assert res.rel <= REL and res.bound_use <= 1.0


def test_empty_range_needed_at_run_time_is_one_error() -> None:
    @tf.function(input_signature=[tf.TensorSpec([3], tf.int32, name="n")])
    def f(n: Any) -> Any:
        return n * 2, tf.range(2, 2)

    with pytest.raises(InvalidGraphError) as ei:
        convert_graph(load_tensorflow(f))
    assert "no elements (TOSA has no empty tensors" in str(ei.value)


# ------------------------------------------------------------------------------------- kept resource variables
class _Stateful(tf.Module):
    """A recurrent state and a step counter updated on every call; ``w`` is only read (frozen)."""

    def __init__(self) -> None:
        rng = np.random.default_rng(12)
        self.state = tf.Variable(rng.uniform(-1, 1, (2, 3)).astype(np.float32), name="state")
        self.count = tf.Variable(np.zeros([1], np.float32), name="count")
        self.level = tf.Variable(np.full([3], 2.0, np.float32), name="level")
        self.w = tf.Variable(rng.standard_normal((3, 3)).astype(np.float32), name="w")

    @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32, name="x")])
    def serve(self, x: Any) -> Any:
        new = tf.tanh(tf.matmul(self.state, self.w) * 0.5 + x)
        y = new + self.state  # reads the state before the write below
        self.state.assign(new)
        self.count.assign_add(tf.ones([1]))
        self.level.assign_sub(tf.reduce_mean(x, axis=0) * 0.1)
        return {"y": y * self.level, "steps": self.count.read_value() * 1.0}  # reads both after their update


@pytest.fixture(scope="module")
def stateful_sm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    m = _Stateful()
    d = tmp_path_factory.mktemp("stateful") / "sm"
    tf.saved_model.save(m, str(d), signatures=m.serve)
    return d


def test_keep_variables_state_across_calls(stateful_sm: Path) -> None:
    m = convert(str(stateful_sm), keep_variables=["state", "count", "level"])
    g = m.graph
    counts = g.op_counts()
    assert counts.get("tosa.VARIABLE") == 3 and counts.get("tosa.VARIABLE_WRITE") == 3
    assert g.record.extensions == ["EXT-VARIABLE"]
    _validate(g)
    assert m.graph.source.signature_names
    fn = tf.saved_model.load(str(stateful_sm)).signatures["serving_default"]
    names = [g.source.signature_names[v.name] for v in g.outputs]
    state: dict[str, np.ndarray] = {}
    worst = 0.0
    steps = 6
    for step in range(steps):
        x = np.random.default_rng(100 + step).uniform(-1, 1, (2, 3)).astype(np.float32)
        ref = fn(x=tf.constant(x))
        rel, _ = _compare(g, {g.inputs[0].name: x}, [np.asarray(ref[k]) for k in names], variables=state)
        worst = max(worst, rel)
    print(f"--keep-variables: {steps} consecutive calls, max rel err {worst:.3g}")
    assert worst <= REL
    assert float(np.asarray(state["count"]).reshape(-1)[0]) == steps  # the executor's state after the calls


def test_keep_variables_all_and_errors(stateful_sm: Path) -> None:
    g = convert(str(stateful_sm), keep_variables="all").graph
    assert g.op_counts().get("tosa.VARIABLE") == 3  # w is kept but never assigned: read as a constant
    with pytest.raises(ModelLoadError) as ei:
        convert(str(stateful_sm), keep_variables=["state", "level"])  # count is written and not kept
    assert "count" in str(ei.value) and "--keep-variables" in str(ei.value)
    with pytest.raises(ModelLoadError, match="no variable nope"):
        convert(str(stateful_sm), keep_variables=["state", "count", "level", "nope"])


@pytest.mark.slow
def test_keep_variables_cli(stateful_sm: Path, tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "tf2tosa.cli", "convert", str(stateful_sm), "-o"]
    ok = subprocess.run([*cli, str(tmp_path / "a.tosa"), "--keep-variables", "state,count", "--keep-variables",
                         "level"], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr
    assert "EXT-VARIABLE" in ok.stdout + ok.stderr
    bad = subprocess.run([*cli, str(tmp_path / "b.tosa")], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    errors = [ln for ln in bad.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "--keep-variables" in errors[0], bad.stderr


def test_verify_steps_against_tensorflow(stateful_sm: Path, tmp_path: Path) -> None:
    """``verify --steps`` on a SavedModel with kept variables: TensorFlow called N times from its saved values
    against one session, step by step; both the EXT-VARIABLE and the state-as-I/O form."""
    for state_io in (False, True):
        m = convert(str(stateful_sm), keep_variables="all", state_io=state_io)
        report = m.verify_steps(20, seed=3)
        assert report.ok and report.oracle == "tensorflow", str(report)
        assert len(report.steps) == 20 and all(s["ok"] for s in report.steps)
        assert max(o.rel for o in report.outputs) <= REL
    # a session that does not carry state fails from the second step on: the comparison can fail
    m = convert(str(stateful_sm), keep_variables="all")
    fresh = m.session

    def forgetful() -> Any:
        s = fresh()
        run_once = s.run

        def run(inputs: Any) -> Any:
            s.reset()
            return run_once(inputs)

        s.run = run  # type: ignore[method-assign]
        return s

    m.session = forgetful  # type: ignore[method-assign]
    bad = m.verify_steps(4, seed=3)
    assert not bad.ok and bad.steps[0]["ok"] and not all(s["ok"] for s in bad.steps[1:])
    cli = [sys.executable, "-m", "tf2tosa.cli", "verify", str(stateful_sm), "--steps", "5", "--keep-variables", "all"]
    done = subprocess.run(cli, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout + done.stderr
