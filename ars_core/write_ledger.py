"""The bookkeeping of a step's writes and the helpers that carry them out.

A :class:`Ledger` is one batch of writes: what is still to write (each path once per
backend and process) and which writes failed. :func:`write_all` writes a batch with
one barrier; :func:`finish_writes` records a batch whose last step ran elsewhere;
:func:`write_archive` is a writing thread's job for a large history archive
(:class:`BesideArchive`: its name, then its folder's flush).
"""

from __future__ import annotations

import logging
import operator
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar, cast

import attrs

from .archive import ArchivePlan, HistoryArchive
from .capabilities import BatchBackend, BytesBackend, has, keeps_writes
from .files import FileBackend, FsspecBackend
from .l1 import FileWrite

__all__ = [
    "BesideArchive",
    "Ledger",
    "WrittenPaths",
    "barrier_beside",
    "describe",
    "done_future",
    "finish_writes",
    "store",
    "write_all",
    "write_archive",
]

log = logging.getLogger("ars")

T = TypeVar("T")
#: per backend, the paths already written by this process
WrittenPaths = weakref.WeakKeyDictionary[Any, set[str]]


def describe(exc: BaseException) -> str:
    """``"TypeName: message"``, how errors appear in logs and events."""
    return f"{type(exc).__name__}: {exc}"


_path = operator.attrgetter("path")


class Ledger:
    """One batch of writes: what is still to write, and which writes failed.
    Each path is written once per backend and process (L1 offloads the same
    results on every call, since state is never rewritten)."""

    def __init__(self, written: WrittenPaths, backend: FileBackend, writes: Sequence[FileWrite]):
        try:
            # a backend whose files live in the agent's state (deepagents' StateBackend)
            # loses a write when the step that made it fails: nothing is taken as written
            cached = keeps_writes(backend)
            self.done = written.setdefault(backend, set()) if cached else set()
        except TypeError:  # not weak-referenceable: no cache
            self.done = set()
        # every path already written (a warm round's offloads): found at C speed
        done = self.done
        self.todo = (
            [] if done.issuperset(map(_path, writes)) else [w for w in writes if w.path not in done]
        )
        self.failed: set[str] = set()

    def record(self, write: FileWrite, error: BaseException | None) -> None:
        if error is None:
            self.done.add(write.path)
        else:
            log.warning("ARS: could not write %s: %s", write.path, describe(error))
            self.failed.add(write.path)


def barrier_beside(backend: FileBackend) -> bool:
    """Whether ``backend``'s writes end with a local disk barrier that a round runs
    beside its other steps (ARS's own local folders; any other backend is written
    where the effect is carried out, as it always was)."""
    return isinstance(backend, FsspecBackend) and backend.local_barrier


def store(backend: FileBackend, write: FileWrite) -> None:
    """Write one file: as bytes when the backend takes them (a
    :class:`~ars_core.capabilities.BytesBackend`), else as text."""
    if has(backend, BytesBackend):
        cast(BytesBackend, backend).write_bytes(write.path, write.data)
    else:
        backend.write_text(write.path, write.text)


def write_all(ledger: Ledger, backend: BatchBackend) -> set[str]:
    """Write the files of ``ledger`` at once (one barrier); the paths that failed."""
    errors = backend.write_files((w.path, w.pieces) for w in ledger.todo)
    for w in ledger.todo:
        ledger.record(w, errors.get(w.path))
    return ledger.failed


def finish_writes(ledger: Ledger, finish: Callable[[], dict[str, Exception]]) -> set[str]:
    """The paths of ``ledger`` whose write failed, once ``finish`` (the last step of
    their write) is done."""
    errors = finish()
    for w in ledger.todo:
        ledger.record(w, errors.get(w.path))
    return ledger.failed


@attrs.frozen
class BesideArchive:
    """A history archive being written beside the round: ``named`` gives its plan once
    the file is whole under its name, its bytes on disk; ``done`` the paths whose write
    failed once its folder is flushed too."""

    archive: HistoryArchive
    named: Future[ArchivePlan]
    done: Future[set[str]]


def write_archive(
    backend: FsspecBackend, ledger: Ledger, plan: ArchivePlan, named: Future[ArchivePlan]
) -> set[str]:
    """Write the archive file of ``ledger`` to the local folder ``backend`` (a writing
    thread's job): ``named`` is set to ``plan`` (or fails) once the file is whole under
    its name; the paths that failed, once its folder is flushed."""
    try:
        finish = backend.begin_files((w.path, w.pieces) for w in ledger.todo)
    except BaseException as exc:
        named.set_exception(exc)
        raise
    named.set_result(plan)
    return finish_writes(ledger, finish)


def done_future(value: T) -> Future[T]:
    """A future already holding ``value``."""
    future: Future[T] = Future()
    future.set_result(value)
    return future
