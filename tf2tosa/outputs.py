"""Writing output files safely: all of a command's files or none of them.

:func:`write_files` stages every file as a hidden temporary file next to its target, then renames the staged
files into place.  When anything fails (a missing directory, no permission, a read-only file system, a target
that is a directory, a full disk, Ctrl-C), the staged files are deleted, targets already renamed get their
previous content back, directories it created are removed, and an :class:`~tf2tosa.errors.OutputError` names
the path (``KeyboardInterrupt`` is re-raised after the clean-up).  A ``.tosa`` and its ``.mlir``, the
``run --output-dir`` arrays and the three zoo reports are each written this way.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from .errors import OutputError

#: a file's content: the bytes, or a function that writes the file at the (temporary) path it is given
Content = bytes | bytearray | memoryview | Callable[[Path], None]

_REASONS = {
    errno.ENOENT: "the directory does not exist",
    errno.ENOTDIR: "a parent of it is not a directory",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
    errno.EISDIR: "it is a directory",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EFBIG: "the file is too large",
}


def output_error(path: str | os.PathLike[str], e: OSError) -> OutputError:
    """An :class:`OutputError` for ``e`` (raised while writing ``path``): one line naming the path."""
    reason = _REASONS.get(e.errno or -1) or (e.strerror or str(e)).lower()
    err = OutputError(f"cannot write {os.fspath(path)}: {reason}")
    err.file = os.fspath(path)  # structured (--json); the message already names it, so str(err) stays one clean line
    return err


def _make_dirs(d: Path, created: list[Path]) -> None:
    """``mkdir -p d``, recording each directory it creates (outermost first)."""
    missing = []
    p = d
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for m in reversed(missing):
        m.mkdir()
        created.append(m)


def write_files(files: Mapping[str | os.PathLike[str], Content], *, make_dirs: bool = False) -> list[Path]:
    """Write every file of ``files`` (path → content) or none of them; return the paths written.

    ``make_dirs`` creates missing parent directories (and removes them again when the write fails); without
    it a missing directory is an error.  Raises :class:`OutputError` naming the path on any OSError.
    """
    targets = [(Path(p), c) for p, c in files.items()]
    staged: list[tuple[Path, Path]] = []  # (temporary file, target)
    created: list[Path] = []
    commits: list[tuple[Path, Path, Path | None]] = []  # (staged file, target, backup of the old target or None)
    current: Path = targets[0][0] if targets else Path(".")
    try:
        for target, content in targets:
            current = target
            if target.is_dir():
                raise IsADirectoryError(errno.EISDIR, "Is a directory", str(target))
            if make_dirs:
                _make_dirs(target.parent, created)
            fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                            suffix=".tmp" + target.suffix)
            tmp = Path(tmp_name)
            staged.append((tmp, target))
            if callable(content):
                os.close(fd)
                content(tmp)
            else:
                with os.fdopen(fd, "wb") as f:
                    f.write(content)
                    f.flush()
                    os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~_umask())
        for tmp, target in staged:
            # each step is recorded before it is taken; the roll-back tells from the files how far it got
            current = target
            backup = None
            if target.exists():
                fd, b = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".old")
                os.close(fd)
                backup = Path(b)
            commits.append((tmp, target, backup))
            if backup is not None:
                os.replace(target, backup)
            os.replace(tmp, target)
    except BaseException as e:
        _roll_back(staged, commits, created)
        if isinstance(e, OSError):
            raise output_error(current, e) from None  # the target, not its temporary file
        raise
    for _, _, backup in commits:
        if backup is not None:
            backup.unlink(missing_ok=True)
    return [t for t, _ in targets]


def _roll_back(staged: list[tuple[Path, Path]], commits: list[tuple[Path, Path, Path | None]],
               created: list[Path]) -> None:
    for tmp, target, backup in reversed(commits):
        placed = not tmp.exists()  # the new file was renamed into place
        try:
            if backup is not None:
                if placed or not target.exists():  # the old file had been moved to the backup: bring it back
                    os.replace(backup, target)
                else:
                    backup.unlink(missing_ok=True)
            elif placed:
                target.unlink(missing_ok=True)
        except OSError:
            pass
    for tmp, _ in staged:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
    for d in reversed(created):
        try:
            d.rmdir()
        except OSError:
            pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_file(path: str | os.PathLike[str], content: Content, *, make_dirs: bool = False) -> Path:
    """:func:`write_files` for one file."""
    return write_files({path: content}, make_dirs=make_dirs)[0]


def preflight(directory: str | os.PathLike[str]) -> None:
    """Fail early (OutputError naming ``directory``) when files cannot be written into it, e.g. before a long run
    whose reports go there.  Creates and removes a probe file and the directories it needed: leaves nothing."""
    d = Path(directory)
    created: list[Path] = []
    try:
        if d.exists() and not d.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(d))
        _make_dirs(d, created)
        fd, probe = tempfile.mkstemp(dir=d, prefix=".tf2tosa-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise output_error(d, e) from None
    finally:
        for c in reversed(created):
            try:
                c.rmdir()
            except OSError:
                pass
