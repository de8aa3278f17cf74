"""Files on a local disk written with one durability barrier for many.

Each file of a batch is written whole under a temporary name in its folder
(:meth:`LocalBatch.stage`); :meth:`LocalBatch.commit` then flushes every
temporary to disk at once (an ``fsync`` of each, issued together from a few
threads, so the file system commits them in one journal write instead of one
per file), renames each into place, and flushes each folder that received one
(so the new names survive a power loss too; :meth:`LocalBatch.commit_names`
leaves that last step to :func:`flush_folders`). A file is reported written only
once all of that succeeded for it; a file whose step failed has its temporary
removed and its error reported, the others are unaffected.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO, TypeVar, cast

from . import _syncfs

__all__ = [
    "BATCH_FILES",
    "CHUNK",
    "FLUSH_THREADS",
    "SYNCFS_FILES",
    "WRITE_THREADS",
    "Folders",
    "LocalBatch",
    "flush",
    "flush_folders",
    "in_background",
]

#: writes go out in pieces of this size
CHUNK = 1024 * 1024
#: temporaries of one batch held open at once (a larger set is committed in batches)
BATCH_FILES = 256
#: threads that flush the files of one batch at once
FLUSH_THREADS = 16
#: files of one batch from which its files are flushed with one ``syncfs`` per file
#: system where that is sound (:mod:`ars_core._syncfs`), not one ``fsync`` each
SYNCFS_FILES = 8
#: threads that write whole steps beside the caller's work (:func:`in_background`)
WRITE_THREADS = 8
#: ``fsync`` errors meaning the file system offers no flush for this file (it is as
#: durable as that file system makes it): not a failed write
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF})

T = TypeVar("T")
#: folders that received renamed files, with the keys of those files
Folders = dict[str, list[Hashable]]

_pools: dict[str, tuple[int, ThreadPoolExecutor]] = {}
_pool_lock = threading.Lock()


def _executor(name: str = "flush", workers: int = FLUSH_THREADS) -> ThreadPoolExecutor:
    """The ``name`` threads of this process (a forked child makes its own)."""
    with _pool_lock:
        pool = _pools.get(name)
        if pool is None or pool[0] != os.getpid():
            pool = _pools[name] = (
                os.getpid(),
                ThreadPoolExecutor(workers, thread_name_prefix=f"ars-{name}"),
            )
        return pool[1]


def in_background(fn: Callable[..., T], *args: Any) -> Future[T]:
    """``fn(*args)`` in a writing thread: a step's writes and their barrier run while
    the caller goes on (these threads only wait on the flushing ones, never the
    reverse, so a full pool only queues)."""
    return _executor("write", WRITE_THREADS).submit(fn, *args)


def flush(fd: int | None) -> OSError | None:
    """``fsync`` of ``fd``: ``None`` when done (or not supported there, or ``fd`` is
    ``None``: a file with no descriptor), else the error."""
    if fd is None:
        return None
    try:
        os.fsync(fd)
    except OSError as exc:
        return None if exc.errno in _UNSUPPORTED else exc
    return None


def _flush_all(
    fds: Sequence[int | None], folders: Sequence[str] | None = None, size: int = 0
) -> list[OSError | None]:
    """:func:`flush` of every ``fd``, all at once (:data:`FLUSH_THREADS` in flight,
    each thread flushing its share in turn); the error of each. Given the folder of
    each file (and their ``size`` in bytes), a batch of :data:`SYNCFS_FILES` or more
    is flushed with one ``syncfs`` per file system where that is sound."""
    if len(fds) <= 1:
        return [flush(fd) for fd in fds]
    if folders is not None and len(fds) >= SYNCFS_FILES and _flush_file_systems(fds, folders, size):
        return [None] * len(fds)
    shares = min(FLUSH_THREADS, len(fds))
    results: list[OSError | None] = [None] * len(fds)
    for share, errors in enumerate(
        _executor().map(_flush_each, [fds[i::shares] for i in range(shares)])
    ):
        results[share::shares] = errors
    return results


def _flush_file_systems(fds: Sequence[int | None], folders: Sequence[str], size: int) -> bool:
    """``syncfs`` of the file system of each folder, through the first file staged
    there (opened before the others: a write-back error of any of them is reported),
    once per file system; whether each succeeded. ``False`` (nothing known: each
    file is then flushed on its own, with its own error) where ``syncfs`` is not
    sound here or others have much waiting to be written."""
    if not _syncfs.available() or None in fds:
        return False
    waiting = _syncfs.others_dirty(size)
    if waiting is None or waiting > _syncfs.FOREIGN_DIRTY:
        return False
    firsts: dict[str, int] = {}
    for fd, folder in zip(fds, folders, strict=True):
        firsts.setdefault(folder, cast(int, fd))
    devices: set[int] = set()
    try:
        for fd in firsts.values():
            device = os.fstat(fd).st_dev
            if device not in devices:
                devices.add(device)
                if _syncfs.syncfs(fd) is not None:
                    return False
    except OSError:
        return False
    return True


def _flush_each(fds: Sequence[int | None]) -> list[OSError | None]:
    return [flush(fd) for fd in fds]


def _fileno(fh: Any) -> int | None:
    """The descriptor of an open file, ``None`` when it has none (not a real file)."""
    try:
        return int(fh.fileno())
    except (AttributeError, OSError, ValueError):
        return None


def _flush_folder(folder: str) -> OSError | None:
    """Flush ``folder`` (the names just renamed into it); ``None`` where a folder
    cannot be opened as a file (Windows) or offers no flush."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None
    try:
        return flush(fd)
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:  # the original error matters more
        pass


#: how a temporary is created: new (never an existing file), not inherited by children
_CREATE = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)


class _Staged:
    """A written temporary: its open descriptor (``fd``, ``None`` when it has none) or
    the file object of the application's filesystem (``fh``)."""

    __slots__ = ("fd", "fh", "host", "key", "tmp")

    def __init__(
        self, key: Hashable, host: str, tmp: str, fd: int | None, fh: BinaryIO | None
    ) -> None:
        self.key, self.host, self.tmp, self.fd, self.fh = key, host, tmp, fd, fh

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
        elif self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _write_fd(fd: int, pieces: Iterable[bytes]) -> int:
    """Write ``pieces`` whole to ``fd``: small ones gathered into writes of up to
    :data:`CHUNK`, a short write gone on with where it stopped; the bytes written."""
    gathered: list[bytes] = []
    size = total = 0
    for data in pieces:
        total += len(data)
        if size + len(data) > CHUNK and gathered:
            _write_whole(fd, b"".join(gathered))
            gathered, size = [], 0
        if len(data) >= CHUNK:
            _write_whole(fd, data)
        else:
            gathered.append(data)
            size += len(data)
    if gathered:
        _write_whole(fd, gathered[0] if len(gathered) == 1 else b"".join(gathered))
    return total


def _write_whole(fd: int, data: bytes) -> None:
    view, start, end = memoryview(data), 0, len(data)  # slices are views, not copies
    while start < end:
        start += os.write(fd, view[start : start + CHUNK])


class LocalBatch:
    """Temporaries written and not yet durable; :meth:`commit` makes them so.

    Files are opened, renamed and removed with ``os`` calls, or through ``fs`` when
    one is given (an fsspec local filesystem of the application's own class, which
    then sees every write)."""

    def __init__(self, fs: Any = None) -> None:
        self._staged: list[_Staged] = []
        self._fs = fs
        self._bytes = 0  # written to the staged temporaries
        #: the folders this batch made (empty when made: a file of the batch staged
        #: there needs no look whether it is already written)
        self.made: set[str] = set()

    def _open(self, tmp: str) -> BinaryIO:
        return cast(BinaryIO, self._fs.open(tmp, "wb"))  # kept open until the commit

    def _makedirs(self, folder: str) -> None:
        self._fs.makedirs(folder, exist_ok=True)

    def _rename(self, tmp: str, host: str) -> None:
        if self._fs is None:
            os.replace(tmp, host)
        else:
            self._fs.mv(tmp, host)

    def __len__(self) -> int:
        return len(self._staged)

    def stage(self, key: Hashable, host: str, tmp: str, pieces: Iterable[bytes]) -> None:
        """Write the file (its ``pieces`` one after the other) whole to the temporary
        ``tmp`` (its folder made when missing), to be renamed to ``host`` by
        :meth:`commit`; raises what the write raised (the temporary removed)."""
        if self._fs is None:
            self._stage_fd(key, host, tmp, pieces)
            return
        try:
            fh = self._open(tmp)
        except FileNotFoundError:
            self._makedirs(os.path.dirname(tmp))
            fh = self._open(tmp)
        try:
            for data in pieces:
                if len(data) <= CHUNK:
                    fh.write(data)
                    continue
                view = memoryview(data)  # slices of it are views, not copies
                for start in range(0, len(data), CHUNK):
                    fh.write(view[start : start + CHUNK])
            fh.flush()
        except BaseException:
            fh.close()
            _remove(tmp)
            raise
        self._staged.append(_Staged(key, host, tmp, _fileno(fh), fh))

    def _stage_fd(self, key: Hashable, host: str, tmp: str, pieces: Iterable[bytes]) -> None:
        """:meth:`stage` with ``os`` calls: one ``open`` and a ``write`` per piece."""
        try:
            fd = os.open(tmp, _CREATE, 0o666)
        except FileNotFoundError:
            folder = os.path.dirname(tmp)
            if _made_folder(folder):
                self.made.add(folder)
            fd = os.open(tmp, _CREATE, 0o666)
        try:
            self._bytes += _write_fd(fd, pieces)
        except BaseException:
            os.close(fd)
            _remove(tmp)
            raise
        self._staged.append(_Staged(key, host, tmp, fd, None))

    def commit(self) -> dict[Hashable, Exception]:
        """Flush every staged temporary at once, rename each into place, flush their
        folders; the error of each file that is not written (its temporary removed)."""
        errors, renamed = self.commit_names()
        flush_folders(renamed, errors)
        return errors

    def commit_names(self) -> tuple[dict[Hashable, Exception], Folders]:
        """:meth:`commit` but for the folders' flush: each file is whole under its name,
        its bytes on disk; the folders that received one (with their files' keys), for
        :func:`flush_folders` to make the new names durable."""
        staged, self._staged = self._staged, []
        size, self._bytes = self._bytes, 0
        errors: dict[Hashable, Exception] = {}
        try:
            folders = [os.path.dirname(s.tmp) for s in staged] if self._fs is None else None
            flushed = _flush_all([s.fd for s in staged], folders, size)
            renamed: dict[str, list[Hashable]] = {}
            for s, error in zip(staged, flushed, strict=True):
                s.close()
                try:
                    if error is not None:
                        raise error
                    self._rename(s.tmp, s.host)
                except Exception as exc:  # storage errors vary by filesystem
                    _remove(s.tmp)
                    errors[s.key] = exc
                    continue
                renamed.setdefault(os.path.dirname(s.host), []).append(s.key)
        except BaseException:  # interrupted: nothing half-done is left behind
            _discard(staged)
            raise
        return errors, renamed

    def discard(self) -> None:
        """Remove every staged temporary (the batch is given up)."""
        staged, self._staged = self._staged, []
        _discard(staged)


def _made_folder(folder: str) -> bool:
    """Make ``folder`` (and its missing parents); whether this call made it (a folder
    another writer made meanwhile is not this call's)."""
    try:
        os.mkdir(folder)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        try:
            os.mkdir(folder)
        except FileExistsError:
            return False
    except FileExistsError:
        return False
    return True


def _discard(staged: Sequence[_Staged]) -> None:
    for s in staged:
        s.close()
        if os.path.lexists(s.tmp):
            _remove(s.tmp)


def flush_folders(renamed: Folders, errors: dict[Hashable, Exception]) -> None:
    """Flush each folder of ``renamed`` (at once); a folder that fails fails its files
    (their errors added to ``errors``)."""
    folders = list(renamed)
    run: Callable[[str], OSError | None] = _flush_folder
    results = (
        [run(f) for f in folders] if len(folders) <= 1 else list(_executor().map(run, folders))
    )
    for folder, error in zip(folders, results, strict=True):
        if error is not None:
            for key in renamed[folder]:
                errors[key] = error
