"""The graph's typed records (tf2tosa/ir/records.py) replace the free-form ``graph.meta``: no such dict is left, and
a conversion fills the records the CLI and the verify report read.  ``tools/meta_keys.py`` (which counted 58 keys in
173 places before) finds none in the package, and would find one a change brings back."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import tf2tosa
from tests.scripts import load_script
from tf2tosa.ir import Graph
from tf2tosa.ir.records import ConversionRecord, SourceInfo, SymbolicDims

ROOT = Path(__file__).resolve().parents[1]


def _meta_keys() -> ModuleType:
    return load_script("tools/meta_keys.py")


def test_no_free_form_metadata_left(tmp_path: Path) -> None:
    scan = _meta_keys().scan
    keys, uses, files = scan(str(ROOT / "tf2tosa"))
    assert (dict(keys), uses, files) == ({}, 0, set())
    assert not hasattr(Graph(), "meta")
    # the counter sees a use brought back (so the zero above is not a blind spot)
    pkg = tmp_path / "tf2tosa"
    shutil.copytree(ROOT / "tf2tosa", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    with open(pkg / "converter" / "pipeline.py", "a", encoding="utf-8") as f:
        f.write('\n\ndef _back(graph):\n    return graph.meta.get("warnings", [])\n')
    keys, uses, _ = scan(str(pkg))
    assert dict(keys) == {"warnings": 1} and uses == 1


def test_conversion_fills_the_records() -> None:
    path = ROOT / "models" / "samples" / "small_cnn_int8.tflite"
    g = tf2tosa.convert(str(path)).graph
    assert isinstance(g.source, SourceInfo) and isinstance(g.record, ConversionRecord)
    assert isinstance(g.dims, SymbolicDims) and g.dims == SymbolicDims()  # a static program
    assert g.source.format == "tflite" and g.source.file == str(path)
    assert g.source.subgraphs == []  # the frontend's raw subgraphs are dropped once converted
    assert g.record.profiles == ["PRO-INT"] and g.record.specification_version is None
    assert set(g.record.tensor_map.values()) <= {v.name for v in g.values()}
