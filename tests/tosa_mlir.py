"""tosa-opt as a test oracle for our MLIR text: what it prints for a ``.tosa`` file, and MLIR text re-printed
in its own canonical form (tests compare our printer with Arm's view of the same program)."""

from __future__ import annotations

import os
import tempfile

from tf2tosa.verify import tosa_tools as T


def deserialize_to_mlir(model: bytes | str | os.PathLike[str], timeout: float = 120.0) -> str:
    """The MLIR text tosa-opt prints for a ``.tosa`` flatbuffer (Arm's view of the file)."""
    T._require()
    with tempfile.TemporaryDirectory(prefix="tf2tosa-des-") as tmp:
        path = T.tosa_file(model, tmp)
        proc = T._run([str(T.tosa_opt_exe()), f"--tosa-deserialize=tosa-flatbuffer-filename={path}"], timeout)
    if proc.returncode != 0:
        raise T.ToolError(f"tosa-opt could not deserialize: {T._strip_warnings(proc.stderr)}")
    return "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("WARNING: ")) + "\n"


def canonical_mlir(text: str, timeout: float = 120.0) -> str:
    """``text`` re-printed by tosa-opt (its own SSA numbering and formatting), module attributes dropped.

    Two programs that are the same up to SSA names and module attributes give equal strings.
    """
    T._require()
    with tempfile.TemporaryDirectory(prefix="tf2tosa-mlir-") as tmp:
        path = os.path.join(tmp, "model.mlir")
        with open(path, "w") as f:
            f.write(text)
        proc = T._run([str(T.tosa_opt_exe()), path], timeout)
    if proc.returncode != 0:
        raise T.ToolError(f"tosa-opt could not parse the MLIR text: {T._strip_warnings(proc.stderr)}")
    lines = proc.stdout.strip().splitlines()
    if lines and lines[0].startswith("module"):
        lines[0] = "module {"
    return "\n".join(lines) + "\n"
