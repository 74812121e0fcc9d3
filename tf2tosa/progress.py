"""Progress for long commands: a rich progress bar on a terminal once the work has taken about a second, plain
``tf2tosa: …`` lines on a non-terminal stderr with ``--verbose``, and nothing otherwise."""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType
from typing import IO, Any

#: seconds of work before a bar appears (short commands stay silent)
DELAY = 1.0


class Progress:
    """``with Progress("converting m.tflite") as p: p.update(step, total, "running LiteRT")``.

    The bar goes to a duplicate of the original stderr, so it keeps working while fd 2 is filtered
    (:func:`tf2tosa.quiet.filtered_stderr`).  ``enabled=False`` (``--quiet``, ``--json``) makes it a no-op.
    """

    def __init__(self, title: str, *, enabled: bool = True, verbose: bool = False, delay: float = DELAY,
                 stream: IO[str] | None = None) -> None:
        self.title = title
        self.delay = delay
        self.verbose = verbose
        self._stream = stream
        self._own_stream = False
        self._bar: Any = None
        self._task: Any = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._state: tuple[int, int, str] = (0, 0, title)
        self._t0 = time.perf_counter()
        self.enabled = enabled
        self.tty = False
        if enabled:
            if self._stream is None:
                try:
                    self._stream = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
                    self._own_stream = True
                except (AttributeError, OSError, ValueError):
                    self._stream = sys.stderr
            self.tty = bool(getattr(self._stream, "isatty", lambda: False)())

    def __enter__(self) -> Progress:
        self._t0 = time.perf_counter()
        if self.enabled and self.tty:
            self._timer = threading.Timer(self.delay, self._show)
            self._timer.daemon = True
            self._timer.start()
        elif self.enabled and self.verbose:
            self._line(self.title)
        return self

    def _line(self, text: str) -> None:
        assert self._stream is not None
        self._stream.write(f"tf2tosa: {text} ({time.perf_counter() - self._t0:.1f}s)\n")
        self._stream.flush()

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        with self._lock:
            if self._timer is None:  # already finished
                return
            step, total, text = self._state
            bar = RichProgress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                               TextColumn("{task.fields[step]}"), TimeElapsedColumn(),
                               console=Console(file=self._stream, stderr=True), transient=True)
            self._task = bar.add_task(f"{self.title}: {text}" if text != self.title else text,
                                      total=total or None, completed=step, step="")
            bar.start()
            self._bar = bar

    def update(self, step: int, total: int, text: str) -> None:
        """Step ``step`` of ``total`` (0 when unknown) is now ``text``."""
        if not self.enabled:
            return
        with self._lock:
            self._state = (step, total, text)
            if self._bar is not None:
                self._bar.update(self._task, completed=step, total=total or None, description=f"{self.title}: {text}",
                                 step=f"{step}/{total}" if total else "")
        if not self.tty and self.verbose:
            self._line(text)

    def __call__(self, step: int, total: int, text: str) -> None:
        self.update(step, total, text)

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._bar is not None:
                self._bar.stop()
                self._bar = None
        if self._own_stream and self._stream is not None:
            self._stream.close()
            self._stream = None
