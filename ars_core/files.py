"""File backends: where offloaded tool results and archived history go.

Messages only ever see *virtual* paths such as
``outputs/large_tool_results/bash-<sha256>.txt``; a backend maps them onto a
real filesystem under its root and a per-thread scope, so no host path ever
reaches the model. Every path is checked: no absolute paths, no ``..``,
no writes into read-only areas (the public ``skills`` area by default).

File names are content hashes. Nothing is redacted or encrypted: the
files have the same sensitivity as the conversation itself.

Every file is written whole or not at all: on a local disk (and any
filesystem that can rename) the bytes go to a temporary name in the same folder
and are renamed into place; on object stores one PUT is already atomic. On a
local disk a file is also durable before a write returns: its temporary is
flushed to disk (``fsync``) before the rename, and its folder after it.
:meth:`FsspecBackend.write_files` writes the files of one round with one such
barrier for all of them (their temporaries flushed together, then renamed, then
their folders flushed), not one per file; :meth:`FsspecBackend.begin_files` leaves
the folders' flush to a later call, and :meth:`FsspecBackend.stage_files` the whole
barrier, so that it can run beside other work. A file
that already holds exactly the bytes to write is left alone, so a new process
does not rewrite what an earlier one wrote; a torn file left by an older version
(wrong size, or wrong content where comparing is cheap) is rewritten.

Text is stored as UTF-8 with the ``surrogatepass`` error handler: any
Python ``str``, lone surrogates included, is written and read back exactly;
text without surrogates is plain UTF-8.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import os
import posixpath
import stat
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from ._local_files import BATCH_FILES, CHUNK, Folders, LocalBatch, flush_folders
from .errors import FileBackendError, PathBoundaryError
from .paths import (
    DEFAULT_READ_ONLY,
    TMP_MARK,
    check_path,
    decode_text,
    default_files_place,
    encode_text,
    is_temporary,
    scope_name,
)

__all__ = ["FileBackend", "FsspecBackend"]

log = logging.getLogger("ars")

#: files up to this size are compared byte for byte before a write is skipped
VERIFY_LIMIT = 16 * 1024 * 1024
#: temporaries of interrupted writes older than this are removed (see FsspecBackend._sweep)
STALE_TMP_SECONDS = 600
#: thread-scoped backends a root keeps (the most recently used; see FsspecBackend.scoped)
MAX_SCOPED = 1024
#: fsspec protocols of object stores, where one PUT is atomic
OBJECT_STORES = frozenset(
    {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oci", "oss", "r2", "b2"}
)

#: roots already named in the log by this process
_ANNOUNCED: set[str] = set()
_ANNOUNCED_LOCK = threading.Lock()


@runtime_checkable
class FileBackend(Protocol):
    """Reads and writes text under virtual paths (``outputs/...``).

    Implementations check every path with :func:`check_path` and raise
    :class:`~ars_core.errors.FileBackendError` when the storage fails. A
    backend may also offer ``write_bytes(path, data)``, taking the text as
    :func:`encode_text` encodes it: the engine then hands it large files it
    built from encoded pieces (the history archive) as they are.
    """

    def write_text(self, path: str, text: str) -> str:
        """Write ``text`` at the virtual ``path``; return the virtual path written.

        A reader must see no file, the old one or the whole new one, never a
        part; writing what is already there may do nothing.
        """
        ...

    def read_text(self, path: str) -> str:
        """Read the text at the virtual ``path``."""
        ...

    def exists(self, path: str) -> bool:
        """Whether something is stored at the virtual ``path``."""
        ...


def _mtime(info: dict[str, Any]) -> float | None:
    """A listed file's modification time (seconds since the epoch), when fsspec gives one."""
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, datetime.datetime):
            return value.timestamp()
    return None


def _commit(
    batch: LocalBatch, norms: dict[str, str], errors: dict[str, Exception], folders: Folders
) -> None:
    """Write ``batch`` but for its folders' flush (they are added to ``folders``);
    each file that fails, in ``errors``."""
    failed, renamed = batch.commit_names()
    for folder, keys in renamed.items():
        folders.setdefault(folder, []).extend(keys)
    _failed(failed, norms, errors)


def _failed(
    failed: dict[Hashable, Exception], norms: dict[str, str], errors: dict[str, Exception]
) -> None:
    for key, exc in failed.items():
        path = str(key)
        errors[path] = FileBackendError(norms[path], f"{type(exc).__name__}: {exc}")


class FsspecBackend:
    """A :class:`FileBackend` over any fsspec filesystem.

    ``url`` is an fsspec URL naming the root (``file:///srv/ars``,
    ``s3://bucket/prefix``, ``memory://ars``...); ``storage_options`` go to the
    filesystem. Without one, files go where :func:`default_files_place` says (the
    local folder ``.ars``, or ``ARS_FILES_DIR``): they outlive the process;
    ``memory://`` only when asked for.
    :meth:`scoped` gives the backend of one conversation thread; a sub-agent
    uses its parent thread's scope so both see the same files.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        storage_options: dict[str, Any] | None = None,
        fs: Any = None,
        scope: str | None = None,
        read_only: Sequence[str] = DEFAULT_READ_ONLY,
        announce: str | None = None,
    ) -> None:
        import fsspec
        from fsspec.core import url_to_fs
        from fsspec.implementations.local import LocalFileSystem

        if url is None:
            url, why = default_files_place()
            announce = announce if announce is not None else why
        self.url = url
        self.storage_options = dict(storage_options or {})
        if fs is None:
            fs, root = url_to_fs(url, **self.storage_options)
        else:
            root = fs._strip_protocol(url)
        self.fs: fsspec.AbstractFileSystem = fs
        self.root: str = str(root).rstrip("/")
        self.scope = scope
        self.read_only = tuple(read_only)
        #: why this root was chosen, logged once per process with its first write
        #: (the default backend names itself; see :func:`ars_core.default_backend`)
        self.announce = announce
        self._children: OrderedDict[str, FsspecBackend] = OrderedDict()
        self._children_lock = threading.Lock()
        self._swept: OrderedDict[str, None] = OrderedDict()
        #: a local folder: files are written through a :class:`LocalBatch` (one barrier),
        #: with ``os`` calls unless the filesystem is of the application's own class
        self._local = bool(self._protocols() & {"file", "local"})
        self._own_fs = self._local and type(fs) is not LocalFileSystem

    @property
    def local_barrier(self) -> bool:
        """Whether :meth:`write_files` ends with a disk barrier on a local folder
        (temporaries flushed, renamed, folders flushed): a wait worth running beside
        other work (see :class:`~ars_core.effects.SyncEffects`)."""
        return self._local and type(self).write_bytes is FsspecBackend.write_bytes

    def scoped(self, scope: str) -> FsspecBackend:
        """The same storage, scoped to one thread (``threads/<scope>/``).

        The same scope gives the same backend object while it is among the
        :data:`MAX_SCOPED` most recently used, so what the engine remembers
        having written there is kept across calls; the least recently used
        beyond that are forgotten (a new object, the same files), so a
        process serving ever new threads keeps a bounded number of them.
        """
        with self._children_lock:
            child = self._children.get(scope)
            if child is not None:
                self._children.move_to_end(scope)
                return child
        child = FsspecBackend(
            self.url,
            storage_options=self.storage_options,
            fs=self.fs,
            scope=scope_name(scope),
            read_only=self.read_only,
            announce=self.announce,
        )
        with self._children_lock:
            child = self._children.setdefault(scope, child)
            self._children.move_to_end(scope)
            while len(self._children) > MAX_SCOPED:
                self._children.popitem(last=False)
        return child

    def _host(self, path: str) -> str:
        parts = [self.root] if self.root else []
        if self.scope:
            parts += ["threads", self.scope]
        return posixpath.join(*parts, path) if parts else path

    def write_text(self, path: str, text: str) -> str:
        """Write ``text`` atomically; nothing is written when the file already holds it."""
        return self.write_bytes(path, encode_text(text))

    def write_bytes(self, path: str, data: bytes) -> str:
        """:meth:`write_text` for a text already encoded (:func:`encode_text`)."""
        if self._local:
            error = self.write_files(((path, (data,)),)).get(path)
            if error is not None:
                raise error
            return check_path(path, write=True, read_only=self.read_only)
        norm = check_path(path, write=True, read_only=self.read_only)
        host = self._host(norm)
        if self.announce is not None:
            self._announce_root()
        try:
            if not self._holds(host, data):
                self._put(host, data)
        except Exception as exc:  # storage errors vary by filesystem
            raise FileBackendError(norm, f"{type(exc).__name__}: {exc}") from exc
        return norm

    def write_files(self, files: Iterable[tuple[str, Sequence[bytes]]]) -> dict[str, Exception]:
        """Write each ``(path, pieces)`` (the file's bytes, piece after piece) as
        :meth:`write_bytes` does and return once
        every file written is durable; the error of each file not written, by path
        (a :class:`~ars_core.errors.PathBoundaryError` or a
        :class:`~ars_core.errors.FileBackendError`).

        On a local folder the files share one barrier (see :mod:`ars_core._local_files`):
        their temporaries are written, flushed to disk together, renamed into place,
        and their folders flushed, instead of a flush per file. ``files`` is read
        one file at a time (a generator may encode each as it is reached), at most
        :data:`~ars_core._local_files.BATCH_FILES` of them held at once."""
        if self.local_barrier:
            return self.stage_files(files)()
        errors: dict[str, Exception] = {}
        for path, pieces in files:  # one at a time (a subclass's own write_bytes is kept)
            try:
                self.write_bytes(path, pieces[0] if len(pieces) == 1 else b"".join(pieces))
            except (PathBoundaryError, FileBackendError) as exc:
                errors[path] = exc
        return errors

    def begin_files(
        self, files: Iterable[tuple[str, Sequence[bytes]]]
    ) -> Callable[[], dict[str, Exception]]:
        """:meth:`write_files` up to its last step: on a local folder each file is
        whole under its name and its bytes on disk when this returns, and the
        returned ``finish()`` flushes their folders (the new names durable) and gives
        what :meth:`write_files` gives; elsewhere ``finish()`` only gives it."""
        return self._begin(files, staged_only=False)

    def stage_files(
        self, files: Iterable[tuple[str, Sequence[bytes]]]
    ) -> Callable[[], dict[str, Exception]]:
        """:meth:`begin_files` up to the barrier: on a local folder each file is whole
        under a temporary name when this returns (its bytes not yet flushed), and
        ``finish()`` does the rest (the barrier, the renames, the folders' flush; in
        a thread of its own if need be: it waits on the disk most of the time)."""
        return self._begin(files, staged_only=True)

    def _begin(
        self, files: Iterable[tuple[str, Sequence[bytes]]], staged_only: bool
    ) -> Callable[[], dict[str, Exception]]:
        if not self.local_barrier:
            written = self.write_files(files)
            return lambda: written
        errors: dict[str, Exception] = {}
        norms: dict[str, str] = {}
        batch, folders = LocalBatch(self.fs if self._own_fs else None), Folders()
        try:
            self._stage_all(files, batch, norms, errors, folders)
            if not staged_only:
                _commit(batch, norms, errors, folders)
        except BaseException:  # interrupted: no temporary is left behind
            batch.discard()
            raise

        def finish() -> dict[str, Exception]:
            _commit(batch, norms, errors, folders)  # nothing left when committed above
            flushed: dict[Hashable, Exception] = {}
            flush_folders(folders, flushed)
            _failed(flushed, norms, errors)
            return errors

        return finish

    def _stage_all(
        self,
        files: Iterable[tuple[str, Sequence[bytes]]],
        batch: LocalBatch,
        norms: dict[str, str],
        errors: dict[str, Exception],
        folders: Folders,
    ) -> None:
        for path, pieces in files:
            try:
                norm = check_path(path, write=True, read_only=self.read_only)
            except PathBoundaryError as exc:
                errors[path] = exc
                continue
            host, norms[path] = self._host(norm), norm
            if self.announce is not None:
                self._announce_root()
            try:
                parent = posixpath.dirname(host)
                # a folder the batch made held nothing then: its files need no look
                if parent in batch.made or not self._holds_pieces(host, pieces):
                    self._sweep(parent)
                    batch.stage(path, host, self._temporary(host), pieces)
            except Exception as exc:  # storage errors vary by filesystem
                errors[path] = FileBackendError(norm, f"{type(exc).__name__}: {exc}")
            if len(batch) >= BATCH_FILES:
                _commit(batch, norms, errors, folders)

    @staticmethod
    def _temporary(host: str) -> str:
        """A temporary name for ``host``, in its folder (``.<name>.ars-tmp-<random>``)."""
        parent, name = posixpath.split(host)
        return posixpath.join(parent, f".{name}{TMP_MARK}{uuid.uuid4().hex[:12]}")

    def _announce_root(self) -> None:
        """Name the root in one INFO line, the first time this process writes there;
        a local folder also gets a ``.gitignore`` (``*``), as tool caches do."""
        local = bool(self._protocols() & {"file", "local"})
        where = self.root if local else self.url
        with _ANNOUNCED_LOCK:
            if where in _ANNOUNCED:
                return
            _ANNOUNCED.add(where)
        log.info(
            "ARS: offloaded tool results and history archives go to %s (%s)", where, self.announce
        )
        if not local:
            return
        ignore = posixpath.join(self.root, ".gitignore")
        try:
            if not self.fs.exists(ignore):
                self.fs.makedirs(self.root, exist_ok=True)
                self.fs.pipe_file(ignore, b"# written by ARS: its files stay out of git\n*\n")
        except OSError as exc:  # a read-only folder: the write itself will say so
            log.info("ARS: could not write %s: %s", ignore, exc)

    def _protocols(self) -> set[str]:
        protocol = self.fs.protocol
        return {protocol} if isinstance(protocol, str) else set(protocol)

    def _holds(self, host: str, data: bytes) -> bool:
        """Whether ``host`` already holds exactly ``data`` (as far as is cheap to tell)."""
        try:
            info = self._local_info(host) if self._local else self.fs.info(host)
        except FileNotFoundError:
            return False
        if info.get("type") != "file":
            return False
        if info.get("size") != len(data):
            log.warning("ARS: %s has the wrong size (a torn write?); writing it again", host)
            return False
        etag = str(info.get("ETag") or info.get("etag") or "").strip('"')
        if etag and "-" not in etag and len(etag) == 32:  # a single-part object: the MD5
            return etag == hashlib.md5(data, usedforsecurity=False).hexdigest()
        if len(data) <= VERIFY_LIMIT and (self._local or "memory" in self._protocols()):
            same = bool(self._read_bytes(host) == data)
            if not same:
                log.warning("ARS: %s does not hold what its name says; writing it again", host)
            return same
        return True

    def _holds_pieces(self, host: str, pieces: Sequence[bytes]) -> bool:
        """:meth:`_holds` for a file given as pieces (joined only when it is there with
        the right size and small enough to compare)."""
        if len(pieces) == 1:
            return self._holds(host, pieces[0])
        try:
            info = self._local_info(host)
        except FileNotFoundError:
            return False
        size = info["size"]
        if info["type"] != "file":
            return False
        if size != sum(map(len, pieces)):
            log.warning("ARS: %s has the wrong size (a torn write?); writing it again", host)
            return False
        if size > VERIFY_LIMIT:
            return True
        return self._holds(host, b"".join(pieces))

    @staticmethod
    def _local_info(host: str) -> dict[str, Any]:
        """What :meth:`_holds` reads of a local file, from one ``stat``."""
        found = os.stat(host)
        kind = "file" if stat.S_ISREG(found.st_mode) else "other"
        return {"type": kind, "size": found.st_size}

    def _read_bytes(self, host: str) -> bytes:
        if self._local:
            with open(host, "rb") as fh:
                return fh.read()
        return bytes(self.fs.cat_file(host))

    def _put(self, host: str, data: bytes) -> None:
        parent = posixpath.dirname(host)
        if parent:
            self.fs.makedirs(parent, exist_ok=True)
        if self._protocols() & (OBJECT_STORES | {"memory"}):
            self.fs.pipe_file(host, data)  # one PUT: the object appears whole or not at all
            return
        self._sweep(parent)
        tmp = self._temporary(host)
        try:
            with self.fs.open(tmp, "wb") as fh:
                pieces = memoryview(data)  # slices of it are views, not copies
                for start in range(0, len(data), CHUNK):
                    fh.write(pieces[start : start + CHUNK])
                fh.flush()
                fileno = getattr(fh, "fileno", None)
                if fileno is not None:
                    try:
                        os.fsync(fileno())
                    except (OSError, ValueError, AttributeError):
                        pass  # not a real file descriptor
            self.fs.mv(tmp, host)
        except BaseException:
            try:
                if self.fs.exists(tmp):
                    self.fs.rm_file(tmp)
            except Exception:  # the original error matters more
                pass
            raise

    def _sweep(self, parent: str) -> None:
        """Remove the temporaries of interrupted writes (``.<name>.ars-tmp-<random>``,
        a writer killed between writing and renaming) older than
        :data:`STALE_TMP_SECONDS` from ``parent``: once per folder and process,
        before the first write there (a younger one may be another writer's)."""
        with self._children_lock:
            if parent in self._swept:
                return
            self._swept[parent] = None
            while len(self._swept) > MAX_SCOPED:
                self._swept.popitem(last=False)
        try:
            entries = self.fs.ls(parent, detail=True)
        except (OSError, ValueError):
            return
        now = time.time()
        for info in entries:
            name = str(info.get("name", ""))
            if not is_temporary(name) or info.get("type") != "file":
                continue
            mtime = _mtime(info)
            if mtime is None or now - mtime < STALE_TMP_SECONDS:
                continue
            try:
                self.fs.rm_file(name)
            except (OSError, ValueError):
                continue
            log.info("ARS: removed %s, left by an interrupted write", name)

    def read_text(self, path: str) -> str:
        norm = check_path(path, read_only=self.read_only)
        try:
            with self.fs.open(self._host(norm), "rb") as fh:
                data: bytes = fh.read()
        except FileNotFoundError as exc:
            raise FileBackendError(norm, "no such file") from exc
        except Exception as exc:
            raise FileBackendError(norm, f"{type(exc).__name__}: {exc}") from exc
        return decode_text(data)

    def exists(self, path: str) -> bool:
        norm = check_path(path, read_only=self.read_only)
        try:
            return bool(self.fs.exists(self._host(norm)))
        except Exception as exc:
            raise FileBackendError(norm, f"{type(exc).__name__}: {exc}") from exc

    def __repr__(self) -> str:
        return f"FsspecBackend({self.url!r}, scope={self.scope!r})"
