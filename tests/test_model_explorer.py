"""Model Explorer's TOSA adapter (``tosa-adapter-model-explorer``, in ``.venv-me``) reads our ``.tosa`` files: for
every file its ``convert`` returns one graph per region, with a node for every operator of the region, in order,
and every edge between nodes that exist.  The operators are compared with tf2tosa's own reading of the file.

The sample models a fixed set of zoo variants and two control-flow models (WHILE_LOOP, COND_IF) run by default;
every zoo variant, and the real models when cached, behind ``-m slow``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import model_explorer
import pytest
from conftest import requires_tf

from tf2tosa import convert
from tf2tosa import zoo as tz
from tf2tosa.errors import ConversionError
from tf2tosa.serializer import tosa_reader

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "models" / "samples").glob("*.tflite"))
ZOO_SUBSET = "lenet5,resnet8,ds_cnn,mobilenet_v2/int8,tiny_bert/float32"


@pytest.fixture(scope="module", autouse=True)
def _adapter() -> None:
    if not model_explorer.available():
        pytest.skip(model_explorer.MISSING.format(model_explorer.venv_dir()))


def our_ops(path: Path) -> dict[str, list[str]]:
    """{region name: its operators in order} as tf2tosa's reader sees the file."""
    f = tosa_reader._parse(path.read_bytes())
    return {name: [op.op for op in f.regions[name].operators] for name in f.order}


def check_files(paths: list[Path]) -> int:
    """Run the adapter on ``paths`` and compare each with our reading; returns the number of operators seen."""
    views = model_explorer.adapter_view(paths)
    assert [v["file"] for v in views] == [str(p) for p in paths]
    problems, total = [], 0
    for p, v in zip(paths, views):
        if not v["ok"]:
            problems.append(f"{p.name}: the adapter failed: {v['error']}")
            continue
        ours = our_ops(p)
        theirs = {g["id"]: g["ops"] for g in v["graphs"]}
        if theirs != ours:
            diff = {r: (len(ours.get(r, [])), len(theirs.get(r, []))) for r in set(ours) | set(theirs)
                    if ours.get(r) != theirs.get(r)}
            problems.append(f"{p.name}: ops differ per region (ours, adapter's): {diff}")
        for g in v["graphs"]:
            if g["dangling"] or not g["unique_ids"]:
                problems.append(f"{p.name}: region {g['id']}: {g['dangling']} edges from missing nodes, "
                                f"unique ids {g['unique_ids']}")
        main = next((g for g in v["graphs"] if g["id"] == next(iter(ours))), None)
        if main is None or not (main["inputs"] and main["outputs"]):
            problems.append(f"{p.name}: the main graph has no GraphInputs/GraphOutputs node")
        total += sum(len(o) for o in ours.values())
    assert not problems, "\n".join(problems)
    return total


def _write(model: Any, path: Path) -> Path:
    model.save(path)
    return path


def test_samples(tmp_path: Path) -> None:
    assert SAMPLES
    files = [_write(convert(p), tmp_path / f"{p.stem}.tosa") for p in SAMPLES]
    assert check_files(files) > 100


def _zoo_files(filter: str | None, tmp_path: Path, include_real: bool) -> tuple[list[Path], list[str]]:
    """The selected zoo variants converted to .tosa (cached .tflite files; built with TensorFlow when missing).
    Returns the files and the variants left out (not buildable or not convertible, as the zoo reports them)."""
    zoo = tz._models_module()
    files, left = [], []
    for mdef, variants in tz.select(filter, include_real=include_real):
        for v in variants:
            if v in mdef.unsupported:
                continue
            try:
                data = zoo.build_tflite(mdef, v).data
                model = convert(data)
            except ModuleNotFoundError:
                pytest.skip("the zoo models are not cached and tensorflow is not installed")
            except (ConversionError, zoo.core.TFLiteRefused, ValueError) as e:
                left.append(f"{mdef.name}/{v}: {type(e).__name__}")
                continue
            files.append(_write(model, tmp_path / f"{mdef.name}.{v}.tosa"))
    return files, left


@requires_tf
def test_zoo_subset(tmp_path: Path) -> None:
    files, left = _zoo_files(ZOO_SUBSET, tmp_path, include_real=False)
    assert len(files) >= 10 and not left, left
    check_files(files)


@requires_tf
def test_control_flow_regions(tmp_path: Path) -> None:
    """WHILE_LOOP and COND_IF: their cond/body/then/else regions are graphs too (a loop whose trip count is an
    input, with a data-dependent tf.cond in its body, and a tf.cond)."""
    from tests import modelgen_cf as mg

    files = [_write(convert(mg.while_cond(False)), tmp_path / "while_cond.tosa"),
             _write(convert(mg.cond_model()), tmp_path / "cond.tosa")]
    regions = [our_ops(p) for p in files]
    assert len(regions[0]) >= 3 and any("WHILE_LOOP" in ops for ops in regions[0].values())
    assert any("COND_IF" in ops for ops in regions[0].values()) and len(regions[1]) >= 3
    check_files(files)


@pytest.mark.slow
@requires_tf
def test_every_zoo_tosa(tmp_path: Path) -> None:
    """Every zoo variant that converts (the real models too when cached) loads in the adapter."""
    files, left = _zoo_files(None, tmp_path, include_real=True)
    assert files
    n_ops = check_files(files)
    print(f"\nModel Explorer adapter: {len(files)} zoo .tosa files ({n_ops} operators) converted; "
          f"{len(left)} variants do not convert to .tosa: {left}")
