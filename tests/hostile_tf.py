"""Hostile and awkward TensorFlow / Keras inputs (issue 29, items 6-8), each through the real CLI in a child process
(:mod:`tests.hostile`): exit code, one line, no traceback, the folder as it was, and a peak RSS cap.

* ``--io int`` on a dynamic-batch int8 Keras -> TFLite export (float edges, batch ``-1``): converts once its batch is
  fixed (by default, ``--dim``, ``--input-shape``) and ``verify --io int`` matches LiteRT's reference kernels bit for
  bit; ``--dynamic`` keeps the batch symbolic.
* TensorFlow side effects: a SavedModel whose signature writes a file (``tf.io.write_file``), prints and asserts
  converts with a warning naming each dropped op; ``verify`` and ``convert --verify`` refuse to run it without
  ``--trust-model`` (the file is never written), and run it with the flag (the file is written: the refusal is what
  kept it away).  A SavedModel whose *loading* writes a file (a resource initializer) is refused before TensorFlow
  loads it.  A ``tf.py_function`` counts as a Python call.
* Keras: a ``Lambda`` layer refused by safe mode is named, with the opt-in; corrupt ``.keras`` / ``.h5`` files are
  "not a valid" archive, not "File not found".

The models are built by a child Python (so nothing they do while being built touches this process or the test
folders) from fixed seeds and cached under ``.cache/tf_models``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.hostile import ROOT, CliResult, assert_refused, run_cli, tree_hash

pytest.importorskip("tensorflow")

#: peak-RSS cap of a CLI process that imports TensorFlow (about 0.6-1.2 GiB measured) or runs LiteRT
TF_RSS_CAP_MB = 3000
#: the file the side-effect models write, relative to the working folder of the process that runs them
WRITTEN = "written_by_model.txt"
CACHE = Path(os.environ.get("TF2TOSA_TF_CACHE", ROOT / ".cache" / "tf_models"))

_BUILD = r'''
import os, sys, zipfile
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import tensorflow as tf
import keras

out = sys.argv[1]
WRITTEN = sys.argv[2]

# 1. a dynamic-batch int8 model with float edges: the default Keras -> TFLite full-integer export
keras.utils.set_random_seed(3)
L = keras.layers
inp = keras.Input((16, 16, 3))
x = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
x = L.MaxPooling2D(2)(x)
x = L.Conv2D(8, 3, padding="same", activation="relu")(x)
x = L.GlobalAveragePooling2D()(x)
m = keras.Model(inp, L.Dense(5)(x))
conv = tf.lite.TFLiteConverter.from_keras_model(m)
conv.optimizations = [tf.lite.Optimize.DEFAULT]
rng = np.random.default_rng(0)
data = [[rng.uniform(-1, 1, (1, 16, 16, 3)).astype(np.float32)] for _ in range(8)]
conv.representative_dataset = lambda: iter(data)
conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
open(os.path.join(out, "dyn_int8.tflite"), "wb").write(conv.convert())

# 2. a SavedModel whose signature writes a file, prints and asserts besides computing y = 2x + 1
class Effects(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec((1, 4), tf.float32, name="x")])
    def f(self, x):
        tf.io.write_file(WRITTEN, tf.strings.as_string(tf.reduce_sum(x)))
        tf.print("sum", tf.reduce_sum(x))
        tf.debugging.assert_all_finite(x, "finite")
        return {"y": x * 2.0 + 1.0}

e = Effects()
tf.saved_model.save(e, os.path.join(out, "sm_write"), signatures={"serving_default": e.f})

# 3. a SavedModel whose loading writes the file: a resource initializer (tf.saved_model.load runs it)
class Res(tf.saved_model.experimental.TrackableResource):
    def _create_resource(self):
        return tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[], shared_name="")

    def _initialize(self):
        tf.io.write_file(WRITTEN, "loaded")
        tf.raw_ops.AssignVariableOp(resource=self.resource_handle, value=1.0)

class AtLoad(tf.Module):
    def __init__(self):
        self.r = Res()

    @tf.function(input_signature=[tf.TensorSpec((1, 4), tf.float32, name="x")])
    def f(self, x):
        return {"y": x * 2.0}

a = AtLoad()
tf.saved_model.save(a, os.path.join(out, "sm_init"), signatures={"serving_default": a.f})

# 4. a Keras model with a Python Lambda layer, in both formats, and one without
keras.utils.set_random_seed(1)
inp = keras.Input((4,), name="x")
d = L.Dense(3)(inp)
lam = keras.Model(inp, L.Lambda(lambda t: t * 2.0 + 1.0, name="double_it")(d))
lam.save(os.path.join(out, "lambda.keras"))
lam.save(os.path.join(out, "lambda.h5"))
plain = keras.Model(inp, d)
plain.save(os.path.join(out, "plain.keras"))
plain.save(os.path.join(out, "plain.h5"))
'''


def _built() -> Path:
    """The folder of the models :data:`_BUILD` makes, built once per script and TensorFlow version."""
    import tensorflow as tf

    key = hashlib.sha256((_BUILD + tf.__version__ + WRITTEN).encode()).hexdigest()[:12]
    base = CACHE / f"hostile_tf-{key}"
    if (base / "done").exists():
        return base
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(base.with_name(base.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if (base / "done").exists():
                return base
            tmp = base.with_name(base.name + f".tmp{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            scratch = tmp / "scratch"  # the builder's working folder (whatever it writes stays there)
            scratch.mkdir(parents=True)
            env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
            proc = subprocess.run([sys.executable, "-c", _BUILD, str(tmp), WRITTEN], cwd=scratch, env=env,
                                  capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, proc.stderr[-3000:]
            shutil.rmtree(scratch)
            (tmp / "done").write_text("ok")
            shutil.rmtree(base, ignore_errors=True)
            os.replace(tmp, base)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return base


@pytest.fixture(scope="module")
def built() -> Path:
    return _built()


def _copy(built: Path, name: str, into: Path) -> Path:
    src = built / name
    dst = into / name
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)
    return dst


def _ok(res: CliResult) -> None:
    assert res.code == 0, (res.code, res.stdout, res.stderr)
    assert "Traceback" not in res.output, res.output
    assert res.peak_rss_mb < TF_RSS_CAP_MB, res.peak_rss_mb


# ---------------------------------------------------------------------------------- --io int, dynamic batch
def _verify_bit_exact(res: CliResult, batch: int) -> None:
    _ok(res)
    assert "BUILTIN_REF" in res.stdout and "PASS" in res.stdout, res.stdout
    rows = [ln for ln in res.stdout.splitlines() if "max_abs=" in ln]
    assert len(rows) == 1, res.stdout
    assert f"[{batch}, 5] int8" in rows[0] and "max_abs=0 " in rows[0] and "mismatches=0" in rows[0], rows[0]


@pytest.mark.parametrize("fix", [[], ["--dim", "batch=1"],
                                 ["--input-shape", "serving_default_keras_tensor_0=1,16,16,3"], ["--dim", "batch=3"]],
                         ids=["default", "dim", "input-shape", "batch3"])
def test_io_int_dynamic_batch_converts(built: Path, tmp_path: Path, fix: list[str]) -> None:
    import tf2tosa

    model = _copy(built, "dyn_int8.tflite", tmp_path)
    # the export has a dynamic batch and float edges (what the bug needed): independent of our reader
    Interpreter = pytest.importorskip("ai_edge_litert.interpreter").Interpreter

    det = Interpreter(model_path=str(model)).get_input_details()[0]
    assert list(det["shape_signature"]) == [-1, 16, 16, 3] and det["dtype"] == np.float32
    res = run_cli("convert", model, "-o", tmp_path / "m.tosa", "--io", "int", *fix)
    _ok(res)
    m = tf2tosa.load(tmp_path / "m.tosa")
    batch = 3 if "batch=3" in fix else 1
    assert [(v.dtype.value, tuple(v.shape)) for v in m.graph.inputs] == [("i8", (batch, 16, 16, 3))]
    assert [(v.dtype.value, tuple(v.shape)) for v in m.graph.outputs] == [("i8", (batch, 5))]
    side = json.loads((tmp_path / "m.json").read_text())["io_quantization"]
    assert [e["dtype"] for e in side["inputs"] + side["outputs"]] == ["i8", "i8"], side


@pytest.mark.parametrize("fix,batch", [([], 1), (["--dim", "batch=2"], 2)], ids=["default", "batch2"])
def test_io_int_dynamic_batch_verifies_bit_exact(built: Path, tmp_path: Path, fix: list[str], batch: int) -> None:
    model = _copy(built, "dyn_int8.tflite", tmp_path)
    before = tree_hash(tmp_path)
    res = run_cli("verify", model, "--io", "int", "--num", "2", *fix, cwd=tmp_path)
    _verify_bit_exact(res, batch)
    assert tree_hash(tmp_path) == before


def test_io_int_dynamic_keeps_the_batch_symbolic(built: Path, tmp_path: Path) -> None:
    model = _copy(built, "dyn_int8.tflite", tmp_path)
    res = run_cli("convert", model, "-o", tmp_path / "d.tosa", "--io", "int", "--dynamic")
    _ok(res)
    assert "symbolic: batch" in res.stdout, res.stdout
    # specialised at batch 2, it is the same program as the static conversion at batch 2
    res = run_cli("specialize", tmp_path / "d.tosa", "--dim", "batch=2", "-o", tmp_path / "s.tosa")
    _ok(res)
    import tf2tosa

    s = tf2tosa.load(tmp_path / "s.tosa")
    assert [(v.dtype.value, tuple(v.shape)) for v in s.graph.inputs] == [("i8", (2, 16, 16, 3))]


# ---------------------------------------------------------------------------------- TensorFlow side effects
def test_side_effects_convert_warns_and_writes_nothing(built: Path, tmp_path: Path) -> None:
    sm = _copy(built, "sm_write", tmp_path)
    run_dir = tmp_path / "cwd"
    run_dir.mkdir()
    res = run_cli("convert", sm, "-o", tmp_path / "o.tosa", cwd=run_dir)
    _ok(res)
    assert not (run_dir / WRITTEN).exists() and not (tmp_path / WRITTEN).exists()
    warn = [ln for ln in res.stderr.splitlines() if "side effects" in ln]
    assert len(warn) == 1, res.stderr
    for needle in ("dropped 3 op(s)", "WriteFile x1 (StatefulPartitionedCall/WriteFile)", "PrintV2 x1",
                   "CheckNumerics x1"):
        assert needle in warn[0], warn[0]
    # the drop is part of the conversion's record: inspect lists each op (--json: side_effect_ops)
    res = run_cli("inspect", sm, "--json", cwd=run_dir)
    _ok(res)
    facts = json.loads(res.stdout)
    assert sorted(e["op"] for e in facts["side_effect_ops"]) == ["CheckNumerics", "PrintV2", "WriteFile"], facts
    assert not (run_dir / WRITTEN).exists()


@pytest.mark.slow
def test_side_effects_verify_refused_without_trust(built: Path, tmp_path: Path) -> None:
    sm = _copy(built, "sm_write", tmp_path)
    run_dir = tmp_path / "cwd"
    run_dir.mkdir()
    before = tree_hash(tmp_path)
    res = run_cli("verify", sm, cwd=run_dir)
    assert_refused(res, "WriteFile", "--trust-model", str(sm), rss_cap_mb=TF_RSS_CAP_MB)
    assert tree_hash(tmp_path) == before  # the model did not write its file, nothing else appeared
    res = run_cli("convert", sm, "-o", tmp_path / "o.tosa", "--verify", cwd=run_dir)
    assert_refused(res, "WriteFile", "--trust-model", rss_cap_mb=TF_RSS_CAP_MB)
    assert tree_hash(tmp_path) == before  # refused before the .tosa was written


@pytest.mark.slow
def test_side_effects_verify_runs_with_trust(built: Path, tmp_path: Path) -> None:
    sm = _copy(built, "sm_write", tmp_path)
    run_dir = tmp_path / "cwd"
    run_dir.mkdir()
    res = run_cli("verify", sm, "--trust-model", "--num", "1", cwd=run_dir)
    _ok(res)
    assert "PASS" in res.stdout and "info: the program leaves out 3 op(s) with side effects" in res.stdout
    # TensorFlow ran the signature: the file is there, holding the sum of the input it was given
    assert (run_dir / WRITTEN).exists()
    float(Path(run_dir / WRITTEN).read_text())


def test_side_effects_at_load_refused_before_loading(built: Path, tmp_path: Path) -> None:
    sm = _copy(built, "sm_init", tmp_path)
    run_dir = tmp_path / "cwd"
    run_dir.mkdir()
    before = tree_hash(tmp_path)
    res = run_cli("convert", sm, "-o", tmp_path / "o.tosa", cwd=run_dir)  # (verify and inspect load it the same way)
    assert_refused(res, "loading this SavedModel", "WriteFile", "--trust-model", rss_cap_mb=TF_RSS_CAP_MB)
    assert tree_hash(tmp_path) == before
    # with the flag TensorFlow loads it, and its initializer writes the file: the check is what kept it away
    res = run_cli("convert", sm, "-o", tmp_path / "o.tosa", "--trust-model", cwd=run_dir)
    _ok(res)
    assert (run_dir / WRITTEN).read_text() == "loaded"


@pytest.mark.slow
def test_trusted_load_time_effects_verify_steps(built: Path, tmp_path: Path) -> None:
    """``verify --steps`` reloads the SavedModel for fresh variables: with --trust-model it loads as the conversion
    did (it was refused there, naming --trust-model, although the flag was given)."""
    sm = _copy(built, "sm_init", tmp_path)
    run_dir = tmp_path / "cwd"
    run_dir.mkdir()
    res = run_cli("verify", sm, "--steps", "2", "--trust-model", cwd=run_dir)
    _ok(res)
    assert "PASS" in res.stdout, res.stdout


def test_python_call_refused_by_verify_api(tmp_path: Path) -> None:
    """A tf.function calling Python (tf.py_function): converted with the call dropped, refused by verify unless
    trusted; trusted, TensorFlow runs it and the Python function is called."""
    import tensorflow as tf

    import tf2tosa
    from tf2tosa.errors import InputError

    calls: list[int] = []

    def note(x: object) -> object:
        calls.append(1)
        return x

    @tf.function(input_signature=[tf.TensorSpec((2, 3), tf.float32, name="x")])
    def fn(x: object) -> object:
        tf.py_function(note, [x], tf.float32)
        return x * 3.0

    m = tf2tosa.convert(fn)
    assert calls == []  # tracing and freezing did not run it
    assert any("EagerPyFunc" in w for w in m.graph.record.warnings), m.graph.record.warnings
    with pytest.raises(InputError, match="EagerPyFunc.*--trust-model"):
        m.verify()
    assert calls == []
    assert m.verify(trust_model=True).ok
    assert calls == [1]


def test_effect_table_kinds() -> None:
    """The table's kinds on hand-made NodeDefs: a queue and a Python call are refused by verify, a print is not,
    unless it prints to a file."""
    from tensorflow.core.framework import graph_pb2

    from tf2tosa.converter.tensorflow import REFUSED_EFFECTS, effect_ops

    gd = graph_pb2.GraphDef()
    for op, name in (("QueueDequeueV2", "dq"), ("PyFunc", "py"), ("PrintV2", "p"), ("PrintV2", "pf"),
                     ("Assert", "a"), ("AddV2", "add"), ("PartitionedCall", "call")):
        n = gd.node.add()
        n.op, n.name = op, name
    gd.node[3].attr["output_stream"].s = b"file:///tmp/x.log"
    gd.node[6].attr["f"].func.name = "body"
    for fname, op in (("body", "WriteFile"), ("uncalled", "ReadFile")):
        f = gd.library.function.add()
        f.signature.name = fname
        n = f.node_def.add()
        n.op, n.name = op, "w"
    got = {(e.node, e.kind) for e in effect_ops(gd)}
    assert got == {("dq", "queue"), ("py", "python"), ("p", "print"), ("pf", "file"), ("a", "assert"),
                   ("body/w", "file")}  # (a library function nothing calls does not run)
    assert {k for _, k in got} & REFUSED_EFFECTS == {"queue", "python", "file"}
    # with roots, only what they depend on counts
    gd.node[5].input.append("^pf")
    assert [(e.node, e.kind) for e in effect_ops(gd, ["add:0"])] == [("pf", "file")]
    gd.node[5].input.append("^call")
    assert [(e.node, e.kind) for e in effect_ops(gd, ["add:0"])] == [("pf", "file"), ("body/w", "file")]


# ------------------------------------------------------------------------------------------------ Keras
@pytest.mark.parametrize("name", ["lambda.keras", "lambda.h5"])
@pytest.mark.slow
def test_keras_lambda_refused_by_safe_mode(built: Path, tmp_path: Path, name: str) -> None:
    model = _copy(built, name, tmp_path)
    before = tree_hash(tmp_path)
    res = run_cli("convert", model, "-o", tmp_path / "o.tosa")
    assert_refused(res, "safe mode", "'double_it'", "--unsafe-deserialization", str(model),
                   rss_cap_mb=TF_RSS_CAP_MB)
    assert tree_hash(tmp_path) == before
    if name.endswith(".keras"):  # the opt-in loads it (its Lambda's code runs) and converts
        res = run_cli("convert", model, "-o", tmp_path / "o.tosa", "--unsafe-deserialization")
        _ok(res)
        assert (tmp_path / "o.tosa").exists()


def _corrupt(built: Path, tmp_path: Path, kind: str) -> Path:
    if kind == "truncated.keras":
        data = (built / "plain.keras").read_bytes()
        (tmp_path / kind).write_bytes(data[: len(data) // 2])
    elif kind == "random.keras":
        (tmp_path / kind).write_bytes(np.random.default_rng(0).bytes(3000))
    elif kind == "noconfig.keras":
        with zipfile.ZipFile(built / "plain.keras") as z, zipfile.ZipFile(tmp_path / kind, "w") as o:
            for n in z.namelist():
                if n != "config.json":
                    o.writestr(n, z.read(n))
    elif kind == "truncated.h5":
        data = (built / "plain.h5").read_bytes()
        (tmp_path / kind).write_bytes(data[: len(data) // 2])
    else:
        (tmp_path / kind).write_bytes(np.random.default_rng(1).bytes(3000))
    return tmp_path / kind


@pytest.mark.parametrize("kind,needle", [("truncated.keras", "not a zip"), ("random.keras", "not a zip"),
                                         ("noconfig.keras", "without config.json"), ("truncated.h5", "truncated"),
                                         ("random.h5", "signature")])
def test_corrupt_keras_files(built: Path, tmp_path: Path, kind: str, needle: str) -> None:
    model = _corrupt(built, tmp_path, kind)
    before = tree_hash(tmp_path)
    res = run_cli("convert", model, "-o", tmp_path / "o.tosa")
    line = assert_refused(res, "not a valid", needle, str(model), rss_cap_mb=TF_RSS_CAP_MB)
    assert "File not found" not in line
    assert tree_hash(tmp_path) == before
