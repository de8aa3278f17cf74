"""One flush for a whole file system (Linux ``syncfs``), where it is sound to use.

``syncfs(fd)`` writes back and commits everything dirty on ``fd``'s file system
at once: one journal commit and one cache flush for a batch of files, instead of
an ``fsync`` per file (each a flushing thread woken and the interpreter handed
back to it). It is offered only where its result says what went wrong: Linux 5.8
and later report a write-back error of any file of that file system since ``fd``
was opened (older kernels may not); a caller whose ``syncfs`` fails flushes each
file on its own, which reports each file's own error. It also writes back what
other programs left dirty, so a caller uses it only while that is little
(:func:`others_dirty` at most :data:`FOREIGN_DIRTY`).
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from collections.abc import Callable

__all__ = ["FOREIGN_DIRTY", "available", "others_dirty", "syncfs"]

#: data of other programs waiting to be written (bytes) up to which a batch is
#: flushed with one ``syncfs`` (it would wait for theirs too)
FOREIGN_DIRTY = 64 * 1024 * 1024


def _load() -> Callable[[int], int] | None:
    """libc's ``syncfs`` on Linux 5.8 or later, else ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    found = re.match(r"(\d+)\.(\d+)", os.uname().release)
    if found is None or (int(found[1]), int(found[2])) < (5, 8):
        return None
    try:
        call = ctypes.CDLL(None, use_errno=True).syncfs  # releases the GIL while it runs
    except (OSError, AttributeError):
        return None
    call.argtypes, call.restype = [ctypes.c_int], ctypes.c_int
    return call


_SYNCFS = _load()


def available() -> bool:
    """Whether :func:`syncfs` may be called here."""
    return _SYNCFS is not None


def syncfs(fd: int) -> OSError | None:
    """Flush the file system holding ``fd``: ``None`` when done, else the error
    (any write-back error on it since ``fd`` was opened)."""
    assert _SYNCFS is not None, "syncfs is not available here"
    if _SYNCFS(fd) == 0:
        return None
    code = ctypes.get_errno()
    return OSError(code, os.strerror(code))


def others_dirty(own: int) -> int | None:
    """Bytes waiting to be written on this machine (``Dirty`` and ``Writeback`` of
    /proc/meminfo) beyond ``own`` (the caller's); ``None`` when unknown."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    total = 0
    for line in lines:
        if line.startswith((b"Dirty:", b"Writeback:")):
            total += int(line.split()[1]) * 1024  # kB
    return max(0, total - own)
