"""Reading and writing the files a command names: only regular inputs, no output over an input, and all of a
command's output files or none of them.

:func:`check_paths` runs before a command does any work: every input (the model, ``--input`` arrays,
``--reference``) must be a regular file or a directory (a FIFO, a device or a socket is refused with one line
before it is opened), and no output may resolve to an input or to another output of the same command (the same
path, the same inode, so a hard link counts, or a symlink to it).  It looks at nothing beyond ``stat``.

:func:`write_files` writes a set of files, and where each goes depends on what is there:

- a regular file (or nothing) is replaced atomically: the content is staged as a hidden temporary file next to
  it (a short name, so a legal target name never makes the staged one too long), flushed to disk and renamed
  over it;
- a symlink is written through: its final target is replaced atomically the same way and the link itself stays
  as it is (a dangling link creates its target when the target's directory exists; a symlink loop is an error);
- a character device or a FIFO is written in place, after every regular file of the set has been staged:
  ``-o /dev/null``-style discards work, a full device ends in "no space left on device", a FIFO with no reader
  is an error (never a hang);
- a block device or a socket is refused.

When anything fails (a missing directory, no permission, a read-only file system, a target that is a directory,
a full disk, Ctrl-C), the staged files are deleted, targets already renamed get their previous content back,
directories it created are removed, and an :class:`~tf2tosa.errors.OutputError` names the path
(``KeyboardInterrupt`` is re-raised after the clean-up).  The regular files of a set are renamed into place only
after the in-place writes succeeded, so they stay all-or-nothing.  A ``.tosa`` with its ``.mlir``, ``.json``
sidecar and ``.vgf``, the ``run --output-dir`` arrays, the ``verify`` pages and the three zoo reports are each
written this way.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .errors import ConversionError, InputError, OutputError

#: a file's content: the bytes, or a function that writes the file at the (temporary) path it is given
Content = bytes | bytearray | memoryview | Callable[[Path], None]

#: a path a command reads or writes, with what it is to the command ("the input model", "the --mlir output" …)
Role = tuple[str, "str | os.PathLike[str] | None"]

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
    errno.ELOOP: "a symlink loop (too many levels of symbolic links)",
    errno.ENXIO: "no process is reading the FIFO",
    errno.EPIPE: "the process reading the FIFO closed it",
}

#: the longest part of a target's name kept in the name of its staged file, in bytes: with the random part and
#: the suffix the staged name stays far below NAME_MAX (255) whatever the target's (legal) name
_STAGED_NAME_BYTES = 40

#: the suffixes of the files tf2tosa writes; an existing file with one of them inside an input folder may be replaced
OUR_SUFFIXES = frozenset({".tosa", ".mlir", ".json", ".npy", ".html", ".png", ".vgf"})

_KINDS = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFIFO: "a FIFO",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory", stat.S_IFREG: "a regular file",
          stat.S_IFLNK: "a symlink"}


def output_error(path: str | os.PathLike[str], e: OSError) -> OutputError:
    """An :class:`OutputError` for ``e`` (raised while writing ``path``): one line naming the path."""
    reason = _REASONS.get(e.errno or -1) or (e.strerror or str(e)).lower()
    return _output_error(path, f"cannot write {os.fspath(path)}: {reason}")


def _output_error(path: str | os.PathLike[str], message: str) -> OutputError:
    err = OutputError(message)
    err.file = os.fspath(path)  # structured (--json); the message already names it, so str(err) stays one clean line
    return err


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "a special file")


# ------------------------------------------------------------------------------------------ before the work
def check_input(path: str | os.PathLike[str], error: type[ConversionError] = InputError) -> None:
    """Refuse (``error``, one line) an input that exists but is neither a regular file nor a directory: a FIFO
    (reading it would wait for a writer), a device or a socket.  A missing path is left to the reader's own
    message.  Only ``stat`` is called: nothing is opened."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        err = error(f"{os.fspath(path)} is not a regular file (it is {_kind(st.st_mode)})")
        err.file = os.fspath(path)
        raise err


def check_output(path: str | os.PathLike[str]) -> None:
    """Refuse (:class:`OutputError`) an output that cannot be written whatever the content: a block device, a
    socket, a symlink loop.  A missing path, a regular file, a character device or a FIFO passes."""
    try:
        st = os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise output_error(path, e) from None
        return
    except ValueError:
        return
    if stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        raise _output_error(path, f"{os.fspath(path)} is {_kind(st.st_mode)}: refusing to write to it")


def _identity(path: str | os.PathLike[str]) -> set[tuple[object, ...]]:
    """What ``path`` is: its final path with every symlink followed, and (when it exists) its device and inode."""
    keys: set[tuple[object, ...]] = {("path", os.path.realpath(path))}
    try:
        st = os.stat(path)
        keys.add(("inode", st.st_dev, st.st_ino))
    except (OSError, ValueError):
        pass
    return keys


def _is_char_device(path: str | os.PathLike[str]) -> bool:
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def check_distinct(inputs: Sequence[Role], outputs: Sequence[Role]) -> None:
    """Refuse (:class:`OutputError`, one line) an output that is one of the ``inputs`` or another of the
    ``outputs``: the same path, the same file (device and inode: a hard link), or a symlink to it.  ``inputs`` and
    ``outputs`` are ``(what it is, path or None)`` pairs, e.g. ``("the input model", "m.tflite")`` and
    ``("the --mlir output", "m.mlir")``; None entries are skipped.  An input folder (a SavedModel, an NNEF model)
    holds inputs too: an existing file inside it is refused, unless it has a suffix of what tf2tosa writes
    (:data:`OUR_SUFFIXES`, which no folder format reads), so ``-o model_dir/m.tosa`` can be written again.  Two
    outputs that are the same character device (``-o /dev/null --mlir /dev/null``) are allowed: writing both into
    it destroys nothing."""
    seen_inputs = [(what, os.fspath(p), _identity(p)) for what, p in inputs if p is not None]
    folders = [(what, os.fspath(p), os.path.realpath(p)) for what, p in inputs if p is not None and os.path.isdir(p)]
    seen_outputs: list[tuple[str, str, set[tuple[object, ...]]]] = []
    for what, p in outputs:
        if p is None:
            continue
        name, ident = os.fspath(p), _identity(p)
        for in_what, in_name, in_ident in seen_inputs:
            if ident & in_ident:
                raise _output_error(name, f"refusing to write {name}: it is {in_what} ({in_name})")
        if os.path.lexists(p) and Path(name).suffix.lower() not in OUR_SUFFIXES:
            real = os.path.realpath(p)
            for in_what, in_name, in_real in folders:
                if os.path.commonpath([real, in_real]) == in_real:
                    raise _output_error(name, f"refusing to write {name}: it is a file of {in_what} ({in_name})")
        for _, out_name, out_ident in seen_outputs:
            if ident & out_ident and not _is_char_device(p):  # named as the earlier output, which comes first
                raise _output_error(out_name, f"refusing to write {out_name}: it is also {what} ({name})")
        seen_outputs.append((what, name, ident))


def check_paths(inputs: Sequence[Role], outputs: Sequence[Role]) -> None:
    """All of a command's path checks, before it does any work: every input a regular file or a directory
    (:func:`check_input`), every output writable in kind (:func:`check_output`) and no output the same file as an
    input or another output (:func:`check_distinct`).  An input whose role names a model gets a
    :class:`~tf2tosa.errors.ModelLoadError`, other inputs an :class:`~tf2tosa.errors.InputError`."""
    from .errors import ModelLoadError

    for what, p in inputs:
        if p is not None:
            check_input(p, ModelLoadError if "model" in what else InputError)
    for _, p in outputs:
        if p is not None:
            check_output(p)
    check_distinct(inputs, outputs)


# ------------------------------------------------------------------------------------------ writing
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


def _short(name: str, limit: int) -> str:
    """``name`` cut to at most ``limit`` bytes (as the file system counts them)."""
    while len(os.fsencode(name)) > limit:
        name = name[:-1]
    return name


def _stage(target: Path, suffix: str) -> tuple[int, str]:
    """A new hidden file next to ``target`` (``mkstemp``): its descriptor and path.  Its name keeps the start of
    the target's name, so a legal target name never makes it longer than NAME_MAX."""
    return tempfile.mkstemp(dir=target.parent, prefix=f".{_short(target.name, _STAGED_NAME_BYTES)}.", suffix=suffix)


def _resolve(target: Path) -> Path:
    """Where a write to ``target`` lands: ``target`` itself, or the final target of a symlink (which may not exist
    yet: a dangling link).  Raises OSError for a symlink loop."""
    if not target.is_symlink():
        return target
    try:
        os.stat(target)
    except FileNotFoundError:
        pass
    resolved = Path(os.path.realpath(target))
    if not resolved.parent.is_dir():
        raise _output_error(target, f"cannot write {target}: it is a symlink to {resolved}, whose directory does "
                                    "not exist")
    return resolved


def _special_kind(target: Path) -> str | None:
    """"chr" or "fifo" for a character device or a FIFO (written in place), else None.  Block devices and sockets
    raise OutputError."""
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISCHR(mode):
        return "chr"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        raise _output_error(target, f"{target} is {_kind(mode)}: refusing to write to it")
    return None


def _write_in_place(target: Path, kind: str, content: bytes | bytearray | memoryview | Path) -> None:
    """Write ``content`` (bytes, or a staged file's path) into the character device or FIFO ``target``: opened
    for writing without creating or truncating it.  A FIFO is opened without blocking first, so one that no
    process reads is ENXIO at once instead of a hang; the writes then block as usual."""
    flags = os.O_WRONLY | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(target, flags | (os.O_NONBLOCK if kind == "fifo" else 0))
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) if kind == "chr" else stat.S_ISFIFO(mode)):  # replaced since it was looked at
            raise _output_error(target, f"cannot write {target}: it changed while being written")
        os.set_blocking(fd, True)
        if isinstance(content, Path):
            with open(content, "rb") as src:
                while chunk := src.read(1 << 20):
                    _write_all(fd, chunk)
        else:
            _write_all(fd, content)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        if n <= 0:  # a device that takes nothing and reports no error
            raise OSError(errno.ENOSPC, "No space left on device")
        view = view[n:]


def write_files(files: Mapping[str | os.PathLike[str], Content], *, make_dirs: bool = False) -> list[Path]:
    """Write every file of ``files`` (path → content) or none of them; return the paths written.

    ``make_dirs`` creates missing parent directories (and removes them again when the write fails); without
    it a missing directory is an error.  Raises :class:`OutputError` naming the path on any OSError.  Where each
    file goes (a regular file, a symlink's target, a device or FIFO in place) is described in the module's
    docstring."""
    targets = [(Path(p), c) for p, c in files.items()]
    staged: list[tuple[Path, Path]] = []  # (temporary file, where the rename goes: the target or its link's target)
    names: list[Path] = []  # the target as the caller named it, for each staged file
    created: list[Path] = []
    commits: list[tuple[Path, Path, Path | None]] = []  # (staged file, target, backup of the old target or None)
    special: list[tuple[Path, str, bytes | bytearray | memoryview | Path]] = []  # (target, kind, content)
    scratch: list[Path] = []  # callable content for a special target, staged in the temporary directory
    current: Path = targets[0][0] if targets else Path(".")
    try:
        for target, content in targets:
            current = target
            kind = _special_kind(target)
            if kind is not None:
                if callable(content):
                    fd, name = tempfile.mkstemp(prefix="tf2tosa-out-")
                    os.close(fd)
                    scratch.append(Path(name))
                    content(Path(name))
                    special.append((target, kind, Path(name)))
                else:
                    special.append((target, kind, content))
                continue
            if target.is_dir():
                raise IsADirectoryError(errno.EISDIR, "Is a directory", str(target))
            if make_dirs:
                _make_dirs(target.parent, created)
            dest = _resolve(target)
            if dest.is_dir():
                raise IsADirectoryError(errno.EISDIR, "Is a directory", str(target))
            suffix = ".tmp" + (dest.suffix if len(os.fsencode(dest.suffix)) <= 16 else "")
            fd, tmp_name = _stage(dest, suffix)
            tmp = Path(tmp_name)
            staged.append((tmp, dest))
            names.append(target)
            if callable(content):
                os.close(fd)
                content(tmp)
            else:
                with os.fdopen(fd, "wb") as f:
                    f.write(content)
                    f.flush()
                    os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~_umask())
        for target, kind, data in special:  # every regular file is staged: now the ones that cannot be undone
            current = target
            _write_in_place(target, kind, data)
        for (tmp, dest), shown in zip(staged, names):
            # each step is recorded before it is taken; the roll-back tells from the files how far it got
            current = shown
            backup = None
            if dest.exists():
                fd, b = _stage(dest, ".old")
                os.close(fd)
                backup = Path(b)
            commits.append((tmp, dest, backup))
            if backup is not None:
                os.replace(dest, backup)
            os.replace(tmp, dest)
    except BaseException as e:
        _roll_back(staged, commits, created)
        _remove(scratch)
        if isinstance(e, OSError):
            raise output_error(current, e) from None  # the target, not its temporary file
        raise
    _remove(scratch)
    for _, _, backup in commits:
        if backup is not None:
            backup.unlink(missing_ok=True)
    return [t for t, _ in targets]


def _remove(paths: list[Path]) -> None:
    for p in paths:
        try:
            p.unlink(missing_ok=True)
        except OSError:
            pass


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
    _remove([tmp for tmp, _ in staged])
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
