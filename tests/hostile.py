"""Helpers for the hostile-input tests (``tests/test_hostile_inputs.py``): run the real CLI in a child process
and check what a user sees and what is left on disk.

:func:`run_cli` runs ``python -m tf2tosa ARGS`` in its own process (so a crash, a hang or a runaway allocation
shows as what it is: a signal, a time-out, a peak RSS) and returns its exit code, its output and its peak
resident set size.  :func:`tree_hash` fingerprints a folder (names, kinds and content) so a test can assert that a
refused command left it as it was; :func:`assert_refused` bundles the checks every hostile case makes.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "models" / "samples"

#: the default peak-RSS cap for a refused input, in MiB: the interpreter with numpy, networkx and typer loaded is
#: about 100 MiB; a command that reads a hostile size into memory goes far past this
RSS_CAP_MB = 400


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str
    peak_rss_mb: float
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def error_lines(self) -> list[str]:
        """The lines of standard error, without progress-bar lines."""
        return [ln for ln in self.stderr.strip().splitlines() if ln.strip() and not ln.startswith("[")]


def run_cli(*args: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None, timeout: float = 300,
            env: dict[str, str] | None = None) -> CliResult:
    """``python -m tf2tosa ARGS`` in a child process: its exit code (negative for a signal), output and peak RSS.

    The CLI runs under a small Python wrapper that waits for it with ``os.wait4`` and reports its own
    ``ru_maxrss``, so the figure is this command's and not the largest of every child so far.  A time-out is a
    test failure naming the command (a hang)."""
    full_env = dict(os.environ)
    full_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    if env:
        full_env.update(env)
    wrapper = (
        "import os, subprocess, sys\n"
        "p = subprocess.Popen(sys.argv[1:])\n"
        "_, status, ru = os.wait4(p.pid, 0)\n"
        "code = os.waitstatus_to_exitcode(status)\n"
        "sys.stderr.write(f'\\n@@rss_kb={ru.ru_maxrss}\\n')\n"
        "sys.exit(code if code >= 0 else 128 - code)\n"
    )
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "tf2tosa", *map(str, args)],
                              cwd=cwd, env=full_env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"tf2tosa {' '.join(map(str, args))} hung for {timeout} s") from e
    err, _, tail = proc.stderr.rpartition("\n@@rss_kb=")
    rss_kb = int(tail.strip() or 0) if tail else 0
    code = proc.returncode
    if code > 128:  # the wrapper's encoding of "killed by signal N"
        code = 128 - code
    return CliResult(code, proc.stdout, err if tail else proc.stderr, rss_kb / 1024.0, time.monotonic() - t0)


def tree_hash(d: str | os.PathLike[str]) -> dict[str, str]:
    """Every entry under ``d`` (not following symlinks): its kind and, for a regular file, a hash of its bytes;
    for a symlink, where it points.  Device nodes and FIFOs are named, never opened."""
    root = Path(d)
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        rel = str(p.relative_to(root))
        if stat.S_ISLNK(st.st_mode):
            out[rel] = "link:" + os.readlink(p)
        elif stat.S_ISDIR(st.st_mode):
            out[rel] = "dir"
        elif stat.S_ISREG(st.st_mode):
            out[rel] = "file:" + hashlib.sha256(p.read_bytes()).hexdigest()
        elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            out[rel] = f"dev:{stat.S_IFMT(st.st_mode):o}:{os.major(st.st_rdev)},{os.minor(st.st_rdev)}"
        else:
            out[rel] = f"special:{stat.S_IFMT(st.st_mode):o}"
    return out


def assert_refused(res: CliResult, *needles: str, code: int = 1, rss_cap_mb: float = RSS_CAP_MB) -> str:
    """The command failed cleanly: exit ``code``, one error line holding every needle, no traceback, no crash,
    and (when measured) a peak RSS under ``rss_cap_mb``.  Returns the error line."""
    assert res.code == code, (res.code, res.stdout, res.stderr)
    assert "Traceback" not in res.output, res.output
    lines = res.error_lines()
    assert len(lines) == 1, res.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    if res.peak_rss_mb:
        assert res.peak_rss_mb < rss_cap_mb, f"peak RSS {res.peak_rss_mb:.0f} MiB >= {rss_cap_mb} MiB"
    return lines[0]
