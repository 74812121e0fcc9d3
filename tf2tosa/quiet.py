"""Keep the dependencies' chatter (TensorFlow, absl, LiteRT, their Python warnings) off the user's terminal.

TensorFlow's C++ side writes ``I0000 …`` lines, the CPU-instructions notice and ``WARNING: All log messages before
absl::InitializeLog() …`` straight to file descriptor 2, some of it before any Python setting can reach it.  So the
command line does two things unless ``--verbose``:

* :func:`silence_dependencies` sets the environment variables TensorFlow reads at import (``TF_CPP_MIN_LOG_LEVEL``
  and friends), lowers the ``tensorflow``/``absl``/``keras`` Python loggers and ignores Python warnings raised
  outside tf2tosa;
* :func:`filtered_stderr` points fd 2 at a temporary file around the work that imports or runs TensorFlow, then
  replays what was written there *minus* the lines known to be dependency noise.  Our own warnings (defaulted
  batch, fallbacks, partial graphs, errors) are written through the same fd and come back intact.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator

#: environment read by TensorFlow / LiteRT / absl at import time
# (TF_ENABLE_ONEDNN_OPTS is left alone: it changes TensorFlow's numerics, and -v must not change a verdict)
QUIET_ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "3",  # C++ INFO, WARNING and ERROR
    "TF_CPP_MAX_VLOG_LEVEL": "-1",
    "GRPC_VERBOSITY": "ERROR",
    "GLOG_minloglevel": "3",
    "ABSL_MIN_LOG_LEVEL": "3",
}

_LOGGERS = ("tensorflow", "absl", "keras", "tf_keras", "h5py", "jax", "ai_edge_litert")

#: lines on fd 2 that come from a dependency, never from tf2tosa
NOISE = re.compile(
    r"^(?:"
    r"[IWEF]\d{4} [\d:. ]+\d+ \S+:\d+\]"  # absl / glog C++ log lines: I0000 00:00:1700000000.0 123 file.cc:12]
    r"|WARNING: All log messages before absl::InitializeLog\(\)"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] "  # TF's own C++ logger
    r"|To enable the following instructions:|This TensorFlow binary is optimized"
    r"|oneDNN custom operations are on|INFO: Created TensorFlow Lite"
    r"|(?:WARNING|INFO|ERROR|DEBUG):(?:absl|tensorflow|keras|h5py|root):"
    r"|WARNING:\S+:From "
    r"|(?!\S*tf2tosa/)\S+\.py:\d+: \w*Warning: "  # a Python warning raised in a dependency (source line follows)
    r"|  warnings\.warn\(|  _api_\w+ = "
    r"|W\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ "
    r")")


def silence_dependencies() -> None:
    """Quiet TensorFlow, absl and LiteRT (environment, Python loggers) and warnings raised outside tf2tosa.

    Call before TensorFlow is imported; variables the user has set are left alone.
    """
    for k, v in QUIET_ENV.items():
        os.environ.setdefault(k, v)
    for name in _LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    if "absl.logging" in sys.modules:
        sys.modules["absl.logging"].set_verbosity("error")
    warnings.filterwarnings("ignore")
    warnings.filterwarnings("default", module=r"tf2tosa(\.|$)")


def _is_noise(line: str, previous_noise: bool) -> bool:
    if NOISE.match(line):
        return True
    # the source line a Python warning prints after its message, indented
    return previous_noise and line.startswith("  ") and not line.strip().startswith(("error", "warning"))


def filter_noise(text: str) -> str:
    """``text`` without the dependency log lines (see :data:`NOISE`)."""
    kept: list[str] = []
    noise = False
    for line in text.splitlines(keepends=True):
        noise = _is_noise(line.rstrip("\n"), noise)
        if not noise:
            kept.append(line)
    return "".join(kept)


@contextlib.contextmanager
def filtered_stderr(enabled: bool = True) -> Iterator[None]:
    """Send fd 2 to a temporary file for the duration and replay it without dependency noise afterwards.

    Does nothing when ``enabled`` is false or stderr has no file descriptor.
    """
    try:
        fd = sys.stderr.fileno() if enabled else -1
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd < 0:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile(mode="w+b", prefix="tf2tosa-stderr-") as tmp:
        os.dup2(tmp.fileno(), fd)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os.dup2(saved, fd)
            os.close(saved)
            tmp.seek(0)
            text = filter_noise(tmp.read().decode("utf-8", "replace"))
            if text:
                sys.stderr.write(text)
                sys.stderr.flush()
