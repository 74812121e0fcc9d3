"""The DOM of a generated HTML page after headless Chromium has run its script: tests check what the pages' scripts
draw (the report and verify pages are static HTML plus a script)."""

from __future__ import annotations

import os
from pathlib import Path

from tf2tosa.verify import report


def dump_dom(html_path: str | os.PathLike[str], timeout: float = 120.0) -> str:
    """The DOM of ``html_path`` after headless Chromium has loaded it and run its script."""
    proc = report._chromium(["--dump-dom", "--virtual-time-budget=3000", Path(html_path).resolve().as_uri()], timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium --dump-dom failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
    return proc.stdout
