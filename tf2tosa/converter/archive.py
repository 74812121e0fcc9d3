"""How much a model archive may unpack, and the check of a Keras ``.keras`` zip against it.

An NNEF ``.tgz`` / ``.tar`` is unpacked member by member (:mod:`.nnef`), and a Keras ``.keras`` file is a zip that
Keras inflates itself; both are capped before anything is inflated, from the sizes their headers declare:

* each member and the total of all members at most :func:`max_extract_bytes` — by default
  :data:`DEFAULT_MAX_EXTRACT_MB` (2048 MiB), raised or lowered by ``--max-extract-mb N`` on the commands that
  load models, or ``max_extract_mb=N`` on :func:`tf2tosa.convert` (both through :func:`extract_limit`);
* at most :data:`MAX_MEMBERS` members.

A tar member's header gives the exact size of its data, so the cap holds whatever the data inflates from; a zip's
central directory gives each member's inflated size, and Python's ``zipfile`` (which Keras reads through) stops a
member at that size.  A refusal is one :class:`~tf2tosa.errors.ModelLoadError` naming the member.
"""

from __future__ import annotations

import contextvars
import os
import stat
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import InputError, ModelLoadError

__all__ = ["DEFAULT_MAX_EXTRACT_MB", "MAX_KERAS_MEMBERS", "MAX_MEMBERS", "extract_limit", "max_extract_bytes",
           "check_zip", "mib", "too_big", "kind_of"]

#: the default cap of one archive member and of all of them together, in MiB
DEFAULT_MAX_EXTRACT_MB = 2048
#: the most members an archive may hold (each costs a header's worth of memory while it is read)
MAX_MEMBERS = 100_000
#: the most members a Keras ``.keras`` zip may hold: Keras writes three (config.json, metadata.json,
#: model.weights.h5) plus its assets; it reads a zip member by member, and 20,000 members took it over a minute
MAX_KERAS_MEMBERS = 1_000

_LIMIT_MB: contextvars.ContextVar[int | None] = contextvars.ContextVar("tf2tosa_max_extract_mb", default=None)


def max_extract_bytes() -> int:
    """The cap in force: the innermost :func:`extract_limit`, else the default."""
    mb = _LIMIT_MB.get()
    return (DEFAULT_MAX_EXTRACT_MB if mb is None else mb) << 20


@contextmanager
def extract_limit(mb: int | None) -> Iterator[None]:
    """Loads inside this block unpack at most ``mb`` MiB per member and in total (None: leave the cap as it is)."""
    if mb is None:
        yield
        return
    if isinstance(mb, bool) or not isinstance(mb, int) or mb < 1:
        raise InputError(f"--max-extract-mb (max_extract_mb=) must be a whole number of MiB >= 1, not {mb!r}")
    token = _LIMIT_MB.set(mb)
    try:
        yield
    finally:
        _LIMIT_MB.reset(token)


def mib(n: int) -> str:
    """A byte count as the messages give it."""
    return f"{n / (1 << 20):.1f} MiB" if n < (1 << 30) else f"{n / (1 << 30):.2f} GiB"


def too_big(member: str, size: int, total: int, file: str) -> ModelLoadError | None:
    """The refusal of a member of ``size`` bytes that brings the archive's running total to ``total``; None when
    both are within the cap."""
    cap = max_extract_bytes()
    hint = "--max-extract-mb / max_extract_mb= raises it"
    if size > cap:
        return ModelLoadError(f"archive member '{member}' inflates to {mib(size)}, more than the {cap >> 20} MiB "
                              f"extraction limit ({hint})", file=file)
    if total > cap:
        return ModelLoadError(f"archive inflates to more than the {cap >> 20} MiB extraction limit at member "
                              f"'{member}' ({hint})", file=file)
    return None


def check_zip(path: str | os.PathLike[str], max_members: int = MAX_MEMBERS) -> None:
    """Refuse a zip (a Keras ``.keras`` file) whose members declare more than the cap, before anything inflates.

    Only a regular file is opened (a FIFO would block, a device would never end).  A file that is not a zip is
    left to the reader that follows, which names it."""
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except OSError:
        return  # (the loader names a missing file)
    if not stat.S_ISREG(st.st_mode):
        raise ModelLoadError(f"not a regular file ({kind_of(st.st_mode)})", file=p)
    try:
        with zipfile.ZipFile(p) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return
    except NotImplementedError as e:  # (a zip format version or feature zipfile does not read)
        raise ModelLoadError(f"cannot read this zip: {e}", file=p) from None
    if len(infos) > max_members:
        raise ModelLoadError(f"archive holds {len(infos)} members, more than {max_members}", file=p)
    seen: set[str] = set()
    for info in infos:
        name = info.filename.rstrip("/")
        if name in seen:
            raise ModelLoadError(f"archive holds two members named '{name}' (a file and a folder, or a file twice)",
                                 file=p)
        seen.add(name)
    total = 0
    for info in infos:
        total += info.file_size
        err = too_big(info.filename, info.file_size, total, p)
        if err is not None:
            raise err


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, for a message ("a FIFO", "a character device" …)."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"
