"""tf2tosa.cli_coercion: the plain coercion of command-line values against typer's own (pydantic) coercion.

For every parameter of every command (and the group's options), values of each kind the parameter could be given
are coerced both ways; the results (value and type) or the error messages must be the same.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest

typer_coercion = pytest.importorskip("typer._coercion", reason="typer without runtime coercion: nothing installed")

import typer.main  # noqa: E402
from typer._click import Context  # noqa: E402

from tf2tosa import cli_coercion  # noqa: E402
from tf2tosa.cli import app  # noqa: E402


def _outcome(rp: Any, value: Any, param: Any, ctx: Any) -> tuple[Any, ...]:
    try:
        out = rp.coerce(value, param=param, ctx=ctx)
    except Exception as e:  # noqa: BLE001 - the error is the outcome compared
        msg = e.format_message() if hasattr(e, "format_message") else str(e)
        return ("error", type(e).__name__, msg)
    return ("ok", type(out).__name__, out if not isinstance(out, list) else [(type(x), x) for x in out])


def _samples(annotation: Any, tmp: Path) -> list[Any]:
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        leaves = _samples(item, tmp)
        return [(), tuple(v for v in leaves if isinstance(v, str))[:3], [leaves[0]], ("x", 5), "single", None]
    if annotation is bool:
        return [True, False, None, "true", "0", ""]
    if annotation is str:
        return ["abc", "", "a b", "ü=1,2", None, 7, b"raw"]
    if annotation is int:
        return ["0", "12", "-3", "007", " 5", "+5", "1_000", "abc", "1.5", "", 7, True, "9" * 30, None]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        members = list(annotation)
        return [*members, *(m.value for m in members), members[0].name.upper(), members[0].value.upper(),
                "bogus", "", None]
    if isinstance(annotation, type) and issubclass(annotation, Path):
        f = tmp / "model.tflite"
        f.write_bytes(b"x")
        return [str(f), str(tmp), "./a/../b/", "out.tosa", "", "-", "a\0b", f, None]
    raise AssertionError(f"no samples for {annotation!r}")


def _taken_plainly(annotation: Any, value: Any, param: Any, ctx: Any) -> bool:
    """Whether the plain coercion takes ``value`` itself (rather than handing it to typer's)."""
    leaf = cli_coercion._plain_leaf
    try:
        if get_origin(annotation) is list:
            if not isinstance(value, (list, tuple)):
                return False
            for v in value:
                leaf(get_args(annotation)[0], param.type_descriptor.parameter_info, v, param, ctx)
        else:
            leaf(annotation, param.type_descriptor.parameter_info, value, param, ctx)
    except cli_coercion._Defer:
        return False
    except Exception:  # noqa: BLE001 - a check of typer's (a path that is not readable …) failed: taken plainly
        return True
    return True


def _commands() -> list[tuple[str, Any, Any]]:
    group = typer.main.get_command(app)
    ctx = Context(group, info_name="tf2tosa")
    out = [("tf2tosa", group, ctx)]
    for name in sorted(group.commands):
        cmd = group.commands[name]
        out.append((name, cmd, Context(cmd, info_name=name, parent=ctx)))
    return out


def test_plain_coercion_equals_typers_for_every_parameter(tmp_path: Path) -> None:
    checked = plain = 0
    for name, cmd, ctx in _commands():
        params = [*cmd.params, cmd.get_help_option(ctx)]
        for p in params:
            if p is None or not hasattr(p, "type_descriptor"):
                continue
            d = p.type_descriptor
            theirs = typer_coercion.build_runtime_param(d)
            mine = cli_coercion._PlainRuntimeParam(parameter_info=d.parameter_info, annotation=d.annotation)
            for v in _samples(d.annotation, tmp_path):
                got, want = _outcome(mine, v, p, ctx), _outcome(theirs, v, p, ctx)
                assert got == want, f"{name} {p.name} {v!r}: plain {got} typer {want}"
                checked += 1
                plain += _taken_plainly(d.annotation, v, p, ctx)
    assert checked > 300 and plain > 100, (checked, plain)


def test_the_app_installs_plain_coercion_on_the_command_it_runs() -> None:
    group = typer.main.get_command(app)
    ctx = Context(group, info_name="tf2tosa")
    cmd = group.get_command(ctx, "convert")
    assert cli_coercion.plain_coercion_installed(cmd)
    assert isinstance(cmd.get_help_option(ctx)._runtime_param, cli_coercion._PlainRuntimeParam)


def test_deferred_values_keep_typers_messages(tmp_path: Path) -> None:
    from tf2tosa.cli import main

    with pytest.raises(SystemExit) as e:
        main(["convert", str(tmp_path / "m.tflite"), "-o", str(tmp_path / "o.tosa"), "--max-unroll", "many"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["convert", str(tmp_path / "m.tflite"), "-o", str(tmp_path / "o.tosa"), "--target", "npu"])
    assert e.value.code == 2
