"""What a command prints: text for people, or with ``--json`` one JSON object for programs.

Every ``--json`` object has the same envelope (``docs/schemas/envelope.json``)::

    {"tf2tosa": "0.1.0", "command": "convert", "ok": true, "exit_code": 0, "error": null, "warnings": [], ...}

plus the command's own keys (``docs/schemas/<command>.json``).  On failure ``ok`` is false and ``error`` holds
``class``, ``message``, ``file``, ``op``, ``tensor`` and ``details`` (see :meth:`ConversionError.to_dict`).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import typer

#: exit codes, documented in ``tf2tosa --help`` and the README
EXIT_OK = 0
EXIT_USER = 1  # a user error: bad model, bad option value, missing file or extra
EXIT_USAGE = 2  # the command line itself is wrong (unknown option, missing argument)
EXIT_VERIFY = 3  # the conversion ran but verification failed
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = ("Exit codes: 0 ok; 1 user error (bad model, input or option value, missing extra);\n"
                   "2 usage error; 3 verification failed; 130 interrupted.")


#: the opcodes counted as constants rather than operators in every op count we print
CONSTANT_OPCODES = frozenset({"CONST", "CONST_SHAPE"})


def op_counts(ops: Any) -> tuple[int, int]:
    """(operators, constants) of a TOSA graph's ops (``graph.ops.values()``): ``convert``, ``specialize`` and
    ``demo`` all print these two figures, in the words of :func:`ops_text`."""
    n_ops = n_const = 0
    for op in ops:
        if op.opcode in CONSTANT_OPCODES:
            n_const += 1
        else:
            n_ops += 1
    return n_ops, n_const


def ops_text(ops: Any) -> str:
    """``51 TOSA operators + 38 constants``: the one wording of a program's size (``inspect`` lists both kinds)."""
    n_ops, n_const = op_counts(ops)
    return f"{n_ops} TOSA operators + {n_const} constants"


def _version() -> str:
    from . import __version__

    return __version__


def _jsonable(o: Any) -> Any:
    import math

    import numpy as np

    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, np.generic):
        o = o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


class Out:
    """The output channel of one command invocation."""

    def __init__(self, command: str, *, json: bool = False, quiet: bool = False, verbose: bool = False) -> None:
        self.command = command
        self.json = json
        self.quiet = quiet and not verbose
        self.verbose = verbose
        self.warnings: list[str] = []
        self.exit_code = EXIT_OK

    @property
    def progress(self) -> bool:
        """Whether progress may be shown (not with --json or --quiet)."""
        return not (self.json or self.quiet)

    def echo(self, text: str = "") -> None:
        """A line of the command's normal output (stdout; not with --json or --quiet)."""
        if not (self.json or self.quiet):
            typer.echo(text)

    def result(self, text: str) -> None:
        """The command's one-line result: printed even with --quiet, not with --json."""
        if not self.json:
            typer.echo(text)

    def warn(self, text: str) -> None:
        """One of our own warnings: always on stderr, and in the JSON ``warnings`` list."""
        self.warnings.append(text)
        typer.echo(f"warning: {text}", err=True)

    def info(self, text: str) -> None:
        """A note on stderr (not with --quiet or --json)."""
        if not (self.json or self.quiet):
            typer.echo(text, err=True)

    def warn_once(self, text: str) -> None:
        """:meth:`warn`, unless this warning was already given (the converter both logs and records some)."""
        if text not in self.warnings:
            self.warn(text)

    def envelope(self, payload: dict[str, Any] | None, error: dict[str, Any] | None, code: int) -> dict[str, Any]:
        return {"tf2tosa": _version(), "command": self.command, "ok": code == EXIT_OK, "exit_code": code,
                "error": error, "warnings": list(self.warnings), **(payload or {})}

    def emit(self, payload: dict[str, Any] | None, error: dict[str, Any] | None, code: int) -> None:
        """Print the JSON object (with --json)."""
        if self.json:
            import json  # (only here: a command without --json does not load it)

            sys.stdout.write(json.dumps(_jsonable(self.envelope(payload, error, code)), indent=2, default=str) + "\n")
            sys.stdout.flush()


#: control characters as the escapes a reader can see (a model's names may hold any of them)
_CONTROL = {c: f"\\x{c:02x}" for c in range(32)} | {10: "\\n", 13: "\\r", 9: "\\t", 127: "\\x7f"}


def one_line(text: str) -> str:
    """``text`` on one line: a newline or other control character (from a tensor, region or file name the model
    chose) is shown escaped, so an error stays the one line the CLI promises."""
    return text.strip().translate(_CONTROL)


def error_dict(exc: BaseException, cls: str | None = None) -> dict[str, Any]:
    """The ``error`` object for any exception (ConversionError carries file/op/tensor)."""
    to_dict = getattr(exc, "to_dict", None)
    if callable(to_dict):
        d = dict(to_dict())
    else:
        d = {"class": type(exc).__name__, "message": str(exc) or type(exc).__name__, "file": None, "op": None,
             "tensor": None, "details": None}
        if isinstance(exc, OSError) and exc.filename is not None:
            d["file"] = str(exc.filename)
            d["message"] = exc.strerror or d["message"]
    if cls is not None:
        d["class"] = cls
    return d


class OurLogHandler(logging.Handler):
    """Routes the ``tf2tosa`` logger into a command's output: warnings as ``warning:`` lines (and the JSON
    ``warnings`` list), information as ``note:`` lines."""

    def __init__(self, out: Out) -> None:
        super().__init__(logging.INFO)
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:  # pragma: no cover - a bad format string must not end the command
            msg = str(record.msg)
        if record.levelno >= logging.WARNING:
            self.out.warn_once(msg)
        else:
            self.out.info(f"note: {msg}")


class routed_logging:  # noqa: N801 - used as a context manager
    """``with routed_logging(out):`` the ``tf2tosa`` logger goes to ``out`` (and not to Python's last-resort
    handler, which would print each warning a second time)."""

    def __init__(self, out: Out) -> None:
        self.out = out
        self.logger = logging.getLogger("tf2tosa")
        self.handler = OurLogHandler(out)
        self.saved = (self.logger.propagate, self.logger.level)

    def __enter__(self) -> routed_logging:
        self.logger.addHandler(self.handler)
        self.logger.propagate = False
        if self.logger.level == logging.NOTSET or self.logger.level > logging.INFO:
            self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.propagate, level = self.saved
        self.logger.setLevel(level)
