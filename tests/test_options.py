"""The conversion options (issue 33): one typed record, misspelled keywords refused, one frontend table.

* a misspelled keyword on ``convert``, ``convert_dynamic``, ``verify`` and ``TosaModel.verify`` is a TypeError
  naming the closest valid name (before any conversion runs);
* ``convert``'s keywords are the fields of :class:`ConvertOptions`, and the command line builds the same record;
* docs/api-options.md is what tools/options_doc.py writes from the fields;
* the frontend table picks each format's frontend; the ``--dynamic`` look-up conversions mute their warnings in
  their own context only, leaving the logger's level alone.
"""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tf2tosa
from tf2tosa.options import ConvertOptions

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "models" / "samples"
INT8 = SAMPLES / "small_cnn_int8.tflite"


@pytest.mark.parametrize(("keyword", "closest"), [("stat_io", "state_io"), ("roundng", "rounding"),
                                                   ("io_", "io"), ("fp16_weight", "fp16_weights"),
                                                   ("maxunroll", "max_unroll")])
def test_convert_refuses_a_misspelled_keyword(keyword: str, closest: str) -> None:
    with pytest.raises(TypeError, match=rf"unexpected keyword argument '{keyword}'.*'{closest}'"):
        tf2tosa.convert(str(INT8), **{keyword: True})


def test_convert_refuses_the_issue_example() -> None:
    """The three typos of the issue: the first one named, nothing converted."""
    with pytest.raises(TypeError, match="'stat_io'; did you mean 'state_io'"):
        tf2tosa.convert(str(INT8), stat_io=True, roundng="single", io_="int")


def test_convert_dynamic_refuses_a_misspelled_keyword() -> None:
    with pytest.raises(TypeError, match="'hint'; did you mean 'hints'"):
        tf2tosa.convert_dynamic(str(INT8), hint={"batch": 2})
    with pytest.raises(TypeError, match="'dim'; did you mean 'dims'"):
        tf2tosa.api.convert_dynamic(str(INT8), dim={"batch": 2})


def test_verify_refuses_a_misspelled_keyword() -> None:
    # in a fresh interpreter: once anything imports the subpackage tf2tosa.verify, the attribute tf2tosa.verify is
    # that subpackage, no longer the function (a name clash older than this test)
    code = ("import tf2tosa\n"
            "for kw in ({'sed': 1}, {'roundng': 'single'}):\n"
            "    try:\n"
            f"        tf2tosa.verify({str(INT8)!r}, **kw)\n"
            "    except TypeError as e:\n"
            "        print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)},
                       timeout=300)
    assert p.stdout.splitlines() == ["verify() got an unexpected keyword argument 'sed'; did you mean 'seed'?",
                                     "verify() got an unexpected keyword argument 'roundng'; did you mean "
                                     "'rounding' or 'npu_rounding'?"], p.stderr
    model = tf2tosa.convert(str(INT8))
    with pytest.raises(TypeError, match="nmu"):
        model.verify(nmu=2)


def test_unknown_keyword_without_a_close_name() -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'zzzz'$"):
        tf2tosa.convert(str(INT8), zzzz=1)


def test_dynamic_only_options_need_dynamic() -> None:
    """hints= / symbol= without dynamic=True would be ignored: refused instead."""
    with pytest.raises(tf2tosa.InputError, match="apply with dynamic=True"):
        tf2tosa.convert(str(INT8), hints={"batch": 2})


def test_keywords_are_the_fields() -> None:
    """Every field is a keyword of convert (no other), documented and with a default."""
    names = ConvertOptions.names()
    assert len(names) == len(set(names)) >= 25
    for f in dataclasses.fields(ConvertOptions):
        assert f.metadata["doc"], f.name
        assert f.default is not dataclasses.MISSING, f.name
    opts = ConvertOptions.from_keywords("convert", rounding="single", state_io=True)
    assert (opts.rounding, opts.state_io, opts.io) == ("single", True, "float")
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.rounding = "double"  # type: ignore[misc]
    with pytest.raises(TypeError, match="'stateio'"):
        opts.replace(stateio=False)


def test_options_record_and_keywords_agree() -> None:
    """An options record, keywords on top of one, and plain keywords convert to the same bytes."""
    a = tf2tosa.convert(str(INT8), rounding="single").to_bytes()
    b = tf2tosa.convert(str(INT8), ConvertOptions(rounding="single")).to_bytes()
    c = tf2tosa.convert(str(INT8), ConvertOptions(rounding="double"), rounding="single").to_bytes()
    assert a == b == c != tf2tosa.convert(str(INT8)).to_bytes()


def test_cli_builds_the_same_record(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``tf2tosa convert`` hands the API one ConvertOptions whose fields are its flags."""
    import tf2tosa.api
    from tf2tosa.cli import main

    seen: list[Any] = []

    def record(source: Any, options: ConvertOptions | None = None, /, **keywords: Any) -> Any:
        seen.append((source, options, keywords))
        raise KeyboardInterrupt

    monkeypatch.setattr(tf2tosa.api, "convert", record)
    with pytest.raises(SystemExit):
        main(["convert", str(INT8), "-o", str(tmp_path / "o.tosa"), "--rounding", "single", "--state-io",
              "--max-unroll", "7", "--custom-ops", "--dim", "batch=2", "--qat", "float", "--target", "vulkan-ml"])
    (source, options, keywords), = seen
    assert source == str(INT8) and keywords == {}
    assert options == ConvertOptions(input_shapes={}, rounding="single", state_io=True, max_unroll=7, custom_ops=True,
                                     dims={"batch": 2}, qat="float", target="vulkan-ml")


def test_generated_docs_are_current() -> None:
    """docs/api-options.md lists each option once, as tools/options_doc.py writes it from the fields."""
    p = subprocess.run([sys.executable, str(ROOT / "tools" / "options_doc.py"), "--check"], capture_output=True,
                       text=True, env={"PYTHONPATH": str(ROOT)}, timeout=120)
    assert p.returncode == 0, p.stderr
    page = (ROOT / "docs" / "api-options.md").read_text(encoding="utf-8")
    for name in ConvertOptions.names():
        assert page.count(f"| `{name}` |") == 1, name


def test_frontend_table(tmp_path: Path) -> None:
    from tf2tosa.converter.frontends import FRONTENDS, frontend_of

    assert [f.name for f in FRONTENDS] == ["tflite", "nnef", "tensorflow"]
    assert frontend_of(INT8.read_bytes()).name == "tflite"
    assert frontend_of(str(INT8)).name == "tflite"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "graph.nnef").write_text("version 1.0;\n")
    assert frontend_of(str(tmp_path / "m")).name == "nnef"
    assert frontend_of(str(tmp_path / "model.keras")).name == "tensorflow"
    assert frontend_of(str(tmp_path / "model.bin")).name == "tflite"  # (the fallback)


def test_lookup_conversions_mute_warnings_in_their_context_only(caplog: pytest.LogCaptureFixture) -> None:
    """The --dynamic look-up conversion's warnings are dropped without touching the logger's level."""
    from tf2tosa.converter.dynamic_convert import _defaults_muted

    log = logging.getLogger("tf2tosa")
    level = log.level
    with caplog.at_level(logging.WARNING, logger="tf2tosa"):
        with _defaults_muted():
            assert log.level == logging.WARNING  # (the old toggle set ERROR here)
            log.warning("muted")
            log.error("shown")
        log.warning("after")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["shown", "after"]
    assert log.level == level


def test_no_extra_dict_left() -> None:
    from tf2tosa.tosa.context import LegalizeContext

    ctx = LegalizeContext()
    assert not hasattr(ctx, "extra") and ctx.options == ConvertOptions()
