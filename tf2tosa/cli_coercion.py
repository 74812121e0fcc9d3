"""Plain coercion of the command line's values, so a well-formed command does not load pydantic.

Typer 0.29 coerces every non-flag parameter value through a pydantic ``TypeAdapter`` (``typer._coercion``,
``typer._adapters``): building the first one imports pydantic, about 60 ms of a ``tf2tosa convert`` that takes
0.35 s, whatever the annotation (``str`` and ``Path`` included; no documented plain type avoids it).

:class:`PlainCoercionGroup` gives each parameter of the command it runs a runtime parameter that coerces the values
our commands take with typer's own pydantic-free helpers (``coerce_cli_choice``, ``coerce_cli_path``) or a plain
``str`` / ``int`` check, and hands every other value (a malformed number, an unknown choice, an empty path …) to
the runtime parameter typer itself builds, so its result and its error message are typer's.  The annotations it
takes are those of the CLI today: ``str``, ``int`` (without min/max), ``Path``, an ``Enum``, and ``list`` of those.

It relies on typer internals (``_TyperParameter._runtime_param``, ``typer._coercion.RuntimeParam``); when they are
absent (an older or newer typer) nothing is installed and typer coerces as usual.
``tests/test_cli_coercion.py`` checks every parameter of every command against typer's own coercion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

import typer.core

try:  # typer >= 0.29: coercion through runtime parameters
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_choice, coerce_cli_path
except ImportError:  # pragma: no cover - another typer: it coerces as it always does
    RuntimeParam = None  # type: ignore[assignment,misc]

__all__ = ["PlainCoercionGroup", "plain_coercion_installed"]

#: a decimal integer as pydantic reads it in lax mode (kept short of its 4300-digit limit)
_INT = re.compile(r"-?[0-9]{1,18}")


class _Defer(Exception):
    """The value is not one plain coercion takes: typer's own runtime parameter coerces it."""


def _plain_leaf(annotation: Any, info: Any, value: Any, param: Any, ctx: Any) -> Any:
    if info.parser is not None:
        raise _Defer
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise _Defer
    if annotation is str:
        if isinstance(value, str):
            return value
        raise _Defer
    if annotation is int:
        if info.min is not None or info.max is not None or info.clamp:
            raise _Defer
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and _INT.fullmatch(value):
            return int(value)
        raise _Defer
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        try:
            return coerce_cli_choice(value, choices=list(annotation), case_sensitive=info.case_sensitive, ctx=ctx)
        except ValueError:
            raise _Defer from None
    if isinstance(annotation, type) and issubclass(annotation, Path):
        path_type = info.path_type if info.path_type is not None else annotation
        if isinstance(value, Path) or not isinstance(value, str) or not value or "\0" in value or info.allow_dash \
                or not (isinstance(path_type, type) and issubclass(path_type, Path)):
            raise _Defer
        # typer turns the string into path_type (through pydantic: path_type(value)), then checks it; the checks
        # and their messages read the same on the string
        rv = coerce_cli_path(value, info, path_type=None, param=param, ctx=ctx)
        return rv if isinstance(rv, path_type) else path_type(rv)  # type: ignore[arg-type]  # (a str here)
    raise _Defer


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class _PlainRuntimeParam(RuntimeParam):
        """Plain coercion of the values :func:`_plain_leaf` takes; typer's runtime parameter for the rest."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            info, annotation = self.parameter_info, self.annotation
            try:
                if get_origin(annotation) is list:
                    (item,) = get_args(annotation)
                    if not isinstance(value, (list, tuple)):
                        raise _Defer
                    return [_plain_leaf(item, info, v, param, ctx) for v in value]
                if get_origin(annotation) is not None:
                    raise _Defer
                return _plain_leaf(annotation, info, value, param, ctx)
            except _Defer:
                return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)


def _install(command: Any, ctx: Any) -> None:
    """Give the command's typer parameters plain coercion (those that have no runtime parameter yet), its help
    option included.  ``ctx`` is the command's context or its parent's: a command without help_option_names of its
    own takes its parent's, so the help option comes out the same."""
    if RuntimeParam is None:
        return
    params = list(getattr(command, "params", ()))
    if "help_option_names" not in (getattr(command, "context_settings", None) or {}):
        params.append(command.get_help_option(ctx))
    for p in params:
        if getattr(p, "_runtime_param", False) is None and hasattr(p, "type_descriptor"):
            d = p.type_descriptor
            if d.file_annotation is None:
                p._runtime_param = _PlainRuntimeParam(parameter_info=d.parameter_info, annotation=d.annotation)


def plain_coercion_installed(command: Any) -> bool:
    """Whether any parameter of ``command`` coerces plainly (for tests)."""
    return RuntimeParam is not None and any(
        isinstance(getattr(p, "_runtime_param", None), _PlainRuntimeParam) for p in getattr(command, "params", ()))


class PlainCoercionGroup(typer.core.TyperGroup):
    """The app's command group: each command it resolves (to run, for help or for shell completion) coerces its
    parameter values plainly (module docstring)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        _install(self, ctx)  # the group's own options (--install-completion …)
        return super().parse_args(ctx, args)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None:
            _install(cmd, ctx)
        return cmd
