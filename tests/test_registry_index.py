"""The generated rule index (tf2tosa/legalizations/rule_index.py, written by tools/gen_rule_index.py) against the
``@legalize`` registrations: a rule added, moved or removed without regenerating fails here."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts import load_script
from tf2tosa.ir import Operation, Value
from tf2tosa.legalizations import registry
from tf2tosa.tosa.builder import Builder

ROOT = Path(__file__).resolve().parent.parent


def _tool() -> ModuleType:
    return load_script("tools/gen_rule_index.py")


def test_rule_index_is_current() -> None:
    """Regenerate with ``tools/gen_rule_index.py`` (or ``make docs``) after adding a TFLite rule."""
    assert (ROOT / "tf2tosa" / "legalizations" / "rule_index.py").read_text() == _tool().render()


def test_rule_index_sees_a_new_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The staleness check can fail: one more registration changes the rendered index."""
    tool = _tool()
    before = tool.render()
    monkeypatch.setattr(registry, "RULES", dict(registry.all_rules()))

    def rule(b: Builder, op: Operation) -> list[Value]:
        return []

    rule.__module__ = "tf2tosa.legalizations.tfl_math"
    registry.legalize("tfl.zz_not_an_op", arity=1)(rule)
    after = tool.render()
    assert after != before and '"zz_not_an_op"' in after


def test_arity_is_checked_before_the_rule() -> None:
    """``@legalize(arity=N)``: fewer operands are refused with the kernel's count; the rule itself is not reached."""
    from tf2tosa.errors import Unsupported
    from tf2tosa.ir import Graph

    info = registry.get_rule("tfl.strided_slice")
    assert info is not None and info.arity == 4
    g = Graph("g")
    op = g.add_op("tfl.strided_slice", [], [])
    with pytest.raises(Unsupported, match="0 operand"):
        info.fn(Builder(g), op)
