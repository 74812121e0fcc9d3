"""Arrays read in place from a memory-mapped model file: where they lie in the map, and releasing their pages.

A constant of a ``.tflite`` is a numpy view of the file's read-only map (no copy).  Reading it brings its pages
into the process's resident memory, where they stay until released: a pass that reads every weight once (the
serializer copying them out, the fp16 pass checking them) releases each piece after reading it, so the whole file
is never resident at once.  A released page of a file map is read again from the file if touched again: nothing
is lost.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

PAGE = mmap.PAGESIZE


def page_up(n: int) -> int:
    """``n`` rounded up to a whole page."""
    return -(-n // PAGE) * PAGE


def drop_pages(mm: mmap.mmap, start: int, end: int) -> None:
    """Release the whole pages of ``mm[start:end]`` from memory."""
    lo, hi = page_up(start), end // PAGE * PAGE
    if hi > lo and hasattr(mmap, "MADV_DONTNEED"):  # (not on every platform: then the pages just stay)
        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def pieces(offset: int, count: int, itemsize: int, piece: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` element ranges covering ``count`` elements of ``itemsize`` bytes that start at byte ``offset`` of a
    map, each about ``piece`` bytes (a multiple of :data:`PAGE`), cut where the map's byte offset is a multiple of
    ``piece``: releasing each range's whole pages (:func:`drop_pages`) then releases every page but the first and the
    last (a cut at an arbitrary offset would leave the page it splits resident, one per piece)."""
    bounds = [0]
    k = offset // piece + 1
    while (cut := -(-(k * piece - offset) // itemsize)) < count:
        bounds.append(cut)
        k += 1
    bounds.append(count)
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def file_region(arr: np.ndarray) -> tuple[mmap.mmap, int] | None:
    """(map, offset) when ``arr``'s data lies in a memory-mapped file (a constant read in place from a .tflite)."""
    base: Any = arr
    for _ in range(16):  # arrays and memoryviews over one another, down to the map
        if isinstance(base, np.ndarray):
            base = base.base
        elif isinstance(base, memoryview):
            base = base.obj
        else:
            break
    if not isinstance(base, mmap.mmap):
        return None
    mm = base
    start = np.frombuffer(mm, dtype=np.uint8, count=1).ctypes.data
    offset = arr.ctypes.data - start
    return (mm, offset) if 0 <= offset and offset + arr.nbytes <= len(mm) else None


__all__ = ["PAGE", "drop_pages", "file_region", "page_up", "pieces"]
