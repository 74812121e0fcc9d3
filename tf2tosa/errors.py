"""Errors raised to users.  Every user-caused failure is a ConversionError."""

from __future__ import annotations

from typing import Any


class ConversionError(Exception):
    """A conversion failed because of its input.  The message is one line for the user."""

    def __init__(self, message: str, *, file: str | None = None, op: str | None = None,
                 tensor: str | None = None) -> None:
        self.message, self.file, self.op, self.tensor = message, file, op, tensor
        where = [f"{k} {v}" for k, v in (("file", file), ("op", op), ("tensor", tensor)) if v]
        super().__init__(message + (f" [{'; '.join(where)}]" if where else ""))

    def to_dict(self) -> dict[str, Any]:
        """The structured form (the ``error`` object of the command line's ``--json`` output)."""
        return {"class": type(self).__name__, "message": self.message, "file": self.file, "op": self.op,
                "tensor": self.tensor, "details": self.details()}

    def details(self) -> dict[str, Any] | None:
        """Extra structured facts of this error class (None when it has none)."""
        return None


class ModelLoadError(ConversionError):
    """The model file is missing, truncated or not a model of the expected format."""


class InvalidGraphError(ConversionError):
    """An op or shape that the TOSA 1.0 specification forbids."""


class UnsupportedOpsError(ConversionError):
    """One or more ops have no legalization; ``reasons`` lists each with a count."""

    def __init__(self, reasons: dict[str, tuple[int, str]], file: str | None = None) -> None:
        self.reasons = reasons
        total = sum(n for n, _ in reasons.values())
        items = "; ".join(f"{name} x{n}: {why}" for name, (n, why) in sorted(reasons.items()))
        super().__init__(f"{total} unsupported op(s) of {len(reasons)} kind(s): {items}", file=file)

    def details(self) -> dict[str, Any] | None:
        return {"unsupported": [{"op": name, "count": n, "reason": why} for name, (n, why) in
                                sorted(self.reasons.items())]}


class TargetError(ConversionError):
    """The program uses something the chosen target (``--target``) cannot take; ``problems`` lists every item
    (:class:`tf2tosa.tosa.targets.Problem`: rule, op, tensor, message, fix)."""

    def __init__(self, target: str, problems: list[Any], file: str | None = None) -> None:
        self.target, self.problems = target, problems
        items = "; ".join(str(p) for p in problems)
        super().__init__(f"{len(problems)} thing(s) the target {target} cannot take: {items}", file=file)

    def details(self) -> dict[str, Any] | None:
        return {"target": self.target, "problems": [p.to_dict() for p in self.problems]}


class NotYetError(ConversionError):
    """``--dynamic`` cannot keep a size symbolic here yet: converting at other sample sizes would not change that
    (the message starts ``--dynamic: not yet:``)."""


class NotYetOpsError(UnsupportedOpsError, NotYetError):
    """An :class:`UnsupportedOpsError` in which at least one op's rule raised :class:`NotYet`."""


class InputError(ConversionError):
    """A user-supplied input (name, shape, dtype or file) does not match the model."""


class MissingExtraError(ConversionError):
    """A command needs an optional dependency group (an extra, e.g. ``tf2tosa[tf]``) that is not installed."""


class OutputError(ConversionError):
    """An output file could not be written (missing directory, no permission, read-only or full disk …)."""


class Unsupported(Exception):
    """Raised by a legalization rule that cannot handle an op; gathered by the pipeline."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def reworded(self, reason: str) -> Unsupported:
        """The same kind of failure with another wording (a :class:`NotYet` stays one)."""
        new = type(self).__new__(type(self))
        Unsupported.__init__(new, reason)
        return new


class NotYet(Unsupported):
    """Raised by a rule that cannot keep a symbolic size (``--dynamic``) yet: the reason reads
    ``--dynamic: not yet: WHAT``, and the conversion fails with a :class:`NotYetOpsError`."""

    def __init__(self, what: str) -> None:
        super().__init__(f"--dynamic: not yet: {what}")


def first_line(e: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (its class name when it has none), cut to ``limit`` characters:
    how a library's multi-line error is quoted in one error line of ours."""
    text = str(e).strip().splitlines()
    msg = text[0] if text else type(e).__name__
    return msg if len(msg) <= limit else msg[: limit - 1] + "…"
