"""The effects the flow asks for, and the two shells that carry them out.

:mod:`ars_core.flow` decides; it does no I/O. It *yields* one of seven effects
and receives its result:

* :class:`CallModel` -> a :class:`ModelResult` (the response, or the error),
* :class:`Write` -> the set of paths whose write failed (``None`` when the
  write runs ``beside`` the round's next steps on a local folder),
* :class:`SettleWrites` -> the set of paths whose write started beside failed,
  once the others are durable,
* :class:`ArchiveAndSummarize` -> ``(Archived, SummaryResult or
  the :class:`~ars_core.errors.SummarizerError` the summary failed with)``;
  the summary call's retries and timeout are :mod:`ars_core.summary_call`'s;
  on a local folder the flush of the archive's folder may still be running
  (``Archived.pending``: where the archive is once that succeeds),
* :class:`BeginArchive` -> nothing: on a local folder the archive's write starts
  (a large one in a writing thread beside the round's next steps: the summary's
  input is built meanwhile); :class:`ArchiveAndSummarize` waits until the file is
  whole under its name before it asks for the summary,
* :class:`SettleArchive` -> the final :class:`Archived` of that pending write
  (``forget``: waited for and dropped, the round chose its cutoff again),
* :class:`Emit` -> nothing (the stream event is delivered).

:class:`Write` ``beside`` (a round's offloads) on a local folder is staged
where it is carried out (whole files under temporary names); their barrier,
renames and folders' flush run in a writing thread, which mostly waits on the
disk, until the flow settles it, before anything naming those files is sent.
:func:`dispatch` maps an effect to its handler, once, for both shells.
:class:`SyncEffects` runs them in order (archive, then summary; on a local
folder the archive is written as :class:`BeginArchive` asks, before the flow builds
the summary's input: a large file (a cold round's whole history) in a writing
thread while the input is built, a small one by the round's thread; the summary is
asked for once the file is whole under its name, its bytes flushed, and the flush
of its folder, which makes its name durable, runs on beside the summary and the
flow's next steps until the flow settles it, before the view naming it is sent);
:class:`AsyncEffects` awaits them and runs archive and summary concurrently in an
anyio task group (a large archive begun beside the input's build as well).
:func:`run_sync` / :func:`run_async` drive a flow to its return value.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import Future, wait
from typing import Any, Protocol, TypeVar, cast

import anyio
import anyio.to_thread
import attrs

from ._local_files import in_background
from .archive import ArchiveLog, ArchivePlan, HistoryArchive
from .capabilities import (
    AsyncBackend,
    AsyncBytesBackend,
    BatchBackend,
    has,
)
from .errors import SummarizerError
from .files import FileBackend, FsspecBackend
from .l1 import FileWrite
from .messages import Message
from .stream import CompressionEvent
from .summarize import AsyncSummarizer, Summarizer, SummaryResult
from .summary_call import SummaryCall, call_async, call_sync, check_summary, summary_failure
from .write_ledger import (
    BesideArchive,
    Ledger,
    WrittenPaths,
    barrier_beside,
    describe,
    done_future,
    finish_writes,
    store,
    write_all,
    write_archive,
)

__all__ = [
    "ArchiveAndSummarize",
    "Archived",
    "AsyncEffects",
    "BeginArchive",
    "CallModel",
    "Effect",
    "Emit",
    "ModelResult",
    "SettleArchive",
    "SettleWrites",
    "SyncEffects",
    "Write",
    "WrittenPaths",
    "check_summary",
    "describe",
    "dispatch",
    "run_async",
    "run_sync",
    "store",
    "summary_failure",
]

log = logging.getLogger("ars")

T = TypeVar("T")
#: a history archive file of this size or more is written in a writing thread beside
#: the round's next steps (a cold round's whole history); a smaller one (a round's
#: continuation of a few messages) by the round's thread, its folder's flush beside
BESIDE_ARCHIVE_BYTES = 256 * 1024


@attrs.frozen
class CallModel:
    """Call the main model with ``messages``."""

    messages: list[Message]


@attrs.frozen
class Write:
    """Write files (offloaded tool results, trimmed originals)."""

    writes: tuple[FileWrite, ...]
    #: the flow may go on while the files are written (:func:`barrier_beside`): the
    #: handler then gives ``None``, and :class:`SettleWrites` the failed paths
    beside: bool = False


@attrs.frozen
class SettleWrites:
    """Wait for the files of the :class:`Write` started ``beside`` the flow."""


@attrs.frozen
class BeginArchive:
    """Start writing the history archive beside the round's next steps (on a local
    folder; elsewhere :class:`ArchiveAndSummarize` writes it)."""

    archive: HistoryArchive


@attrs.frozen
class ArchiveAndSummarize:
    """Write the history archive and make the summary call (retries included)."""

    archive: HistoryArchive
    call: SummaryCall


@attrs.frozen
class Archived:
    """Where the history archive went: its ``path`` (``None`` when the write
    failed, with the ``error``), and the earlier file it continues."""

    path: str | None
    continues: str | None = None
    error: BaseException | None = None
    #: the last step of the write (the flush of the archive's folder) is still
    #: running: ``path`` is the archive's when it succeeds; :class:`SettleArchive`
    #: gives the outcome
    pending: bool = False


@attrs.frozen
class SettleArchive:
    """Wait for the pending history archive write (the flush of its folder); with
    ``forget``, a write begun by :class:`BeginArchive` is waited for and dropped (the
    round chose its cutoff again: nothing names that file)."""

    forget: bool = False


@attrs.frozen
class Emit:
    """Deliver one stream event."""

    event: CompressionEvent


@attrs.frozen
class ModelResult:
    """What the main model did: a response, or the exception it raised."""

    response: Any = None
    error: BaseException | None = None


Effect = (
    CallModel | Write | SettleWrites | BeginArchive | ArchiveAndSummarize | SettleArchive | Emit
)
SummaryOutcome = tuple[Archived, SummaryResult | SummarizerError]


class _Handlers(Protocol):
    def call_model(self, effect: CallModel) -> Any: ...
    def write(self, effect: Write) -> Any: ...
    def begin_archive(self, effect: BeginArchive) -> Any: ...
    def archive_and_summarize(self, effect: ArchiveAndSummarize) -> Any: ...
    def settle_archive(self, effect: SettleArchive) -> Any: ...
    def settle_writes(self, effect: SettleWrites) -> Any: ...
    def emit(self, effect: Emit) -> None: ...


def dispatch(effect: Effect, handlers: _Handlers) -> Any:
    """The one mapping from an effect to the handler that carries it out."""
    if isinstance(effect, CallModel):
        return handlers.call_model(effect)
    if isinstance(effect, Write):
        return handlers.write(effect)
    if isinstance(effect, BeginArchive):
        return handlers.begin_archive(effect)
    if isinstance(effect, ArchiveAndSummarize):
        return handlers.archive_and_summarize(effect)
    if isinstance(effect, SettleArchive):
        return handlers.settle_archive(effect)
    if isinstance(effect, SettleWrites):
        return handlers.settle_writes(effect)
    handlers.emit(effect)
    return None


def run_sync(flow: Generator[Effect, Any, T], handlers: SyncEffects) -> T:
    """Drive ``flow`` to its return value, one effect at a time."""
    value: Any = None
    while True:
        try:
            effect = flow.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            value = dispatch(effect, handlers)
        except BaseException as exc:
            _interrupt(flow, exc, handlers)
            raise


async def run_async(
    flow: Generator[Effect, Any, T], handlers: AsyncEffects, *, in_thread: bool = False
) -> T:
    """Async twin of :func:`run_sync`: a handler's awaitable result is awaited.

    With ``in_thread`` the flow's own steps (counting, L1, building views) run
    in a worker thread, so large new content never blocks the event loop; the
    effects still run here."""
    value: Any = None
    while True:
        if in_thread:
            done, effect = await anyio.to_thread.run_sync(_step, flow, value)
        else:
            done, effect = _step(flow, value)
        if done:
            return effect  # type: ignore[no-any-return]
        try:
            value = dispatch(effect, handlers)
            if inspect.isawaitable(value):
                value = await value
        except BaseException as exc:
            _interrupt(flow, exc, handlers)
            raise


def _interrupt(flow: Generator[Effect, Any, Any], exc: BaseException, handlers: Any) -> None:
    """An effect was cancelled or failed outside the flow (a cancelled summary,
    an interrupt in the model call): hand ``exc`` to the flow so that a started
    round still reports ``failed``; the caller then re-raises ``exc``."""
    try:
        effect = flow.throw(exc)
        while isinstance(effect, Emit):
            handlers.emit(effect)
            effect = flow.send(None)
    except BaseException:  # the flow re-raised (``exc`` itself): the caller raises it
        return
    flow.close()


def _step(flow: Generator[Effect, Any, Any], value: Any) -> tuple[bool, Any]:
    """One step of ``flow``: ``(False, effect)``, or ``(True, its return value)``."""
    try:
        return False, flow.send(value)
    except StopIteration as stop:
        return True, stop.value


def _archived(
    log_: ArchiveLog,
    backend: FileBackend,
    archive: HistoryArchive,
    plan: ArchivePlan,
    failed: set[str],
) -> Archived:
    if failed:
        return Archived(None, error=OSError(f"could not write {plan.path}"))
    log_.record(backend, archive, plan)
    return Archived(plan.path, plan.continues)


@attrs.define
class SyncEffects:
    """Carries out effects in the calling thread, in order."""

    model: Callable[[list[Message]], Any] | None
    summarizer: Summarizer | AsyncSummarizer
    backend: FileBackend
    deliver: Callable[[CompressionEvent], None]
    written: WrittenPaths
    archives: ArchiveLog = attrs.field(factory=ArchiveLog)
    #: the history archive being written in a writing thread (:meth:`begin_archive`)
    beside: BesideArchive | None = attrs.field(default=None, init=False)
    #: the files of a :class:`Write` ``beside`` the flow, being written in a writing thread
    writing: Future[set[str]] | None = attrs.field(default=None, init=False)

    def call_model(self, effect: CallModel) -> ModelResult:
        try:
            return ModelResult(self.model(effect.messages) if self.model else None)
        except Exception as exc:
            return ModelResult(error=exc)

    def write(self, effect: Write) -> set[str] | None:
        ledger = Ledger(self.written, self.backend, effect.writes)
        if not ledger.todo:  # every file already written by this process: no batch at all
            return ledger.failed
        if effect.beside and barrier_beside(self.backend):
            # staged here; their barrier, renames and folders' flush in a writing thread
            # (which mostly waits on the disk) while the flow goes on
            finish = cast(FsspecBackend, self.backend).stage_files(
                (w.path, w.pieces) for w in ledger.todo
            )
            self.writing = in_background(finish_writes, ledger, finish)
            return None
        return self._write_now(ledger)

    def _write_now(self, ledger: Ledger) -> set[str]:
        if has(self.backend, BatchBackend):
            # all at once, one durability barrier; each file encoded as it is reached
            return write_all(ledger, cast(BatchBackend, self.backend))
        for w in ledger.todo:
            try:
                store(self.backend, w)
            except Exception as exc:
                ledger.record(w, exc)
            else:
                ledger.record(w, None)
        return ledger.failed

    def summarize(self, effect: ArchiveAndSummarize) -> SummaryResult | SummarizerError:
        return call_sync(self.summarizer, effect.call)

    def begin_archive(self, effect: BeginArchive) -> None:
        """On a local folder (:func:`barrier_beside`), start writing ``effect.archive``
        while the round goes on: a large file in a writing thread (its file, the
        barrier, its name, its folder's flush), a small one here with only its folder's
        flush in a writing thread (see :data:`BESIDE_ARCHIVE_BYTES`); elsewhere
        :meth:`start_archive` writes it."""
        if barrier_beside(self.backend):
            self.write_beside(effect.archive, small_here=True)

    def write_beside(self, archive: HistoryArchive, small_here: bool) -> BesideArchive | None:
        """Start writing ``archive`` to the local folder; ``None`` (nothing started) for
        a small file when not ``small_here``."""
        # planned here: a local folder keeps its writes, so the plan asks it nothing
        plan = self.archives.plan(self.backend, archive)
        ledger = Ledger(self.written, self.backend, (plan.write,) if plan.write else ())
        backend = cast(FsspecBackend, self.backend)
        named: Future[ArchivePlan] = done_future(plan)
        done: Future[set[str]]
        if not ledger.todo:  # nothing to write: no writing thread to wait for
            done = done_future(set())
        elif sum(map(len, ledger.todo[0].pieces)) < BESIDE_ARCHIVE_BYTES:
            if not small_here:
                return None
            # whole under its name here (handing a short write over costs more than it
            # saves); only the flush of its folder runs in a writing thread
            finish = backend.begin_files((w.path, w.pieces) for w in ledger.todo)
            done = in_background(finish_writes, ledger, finish)
        else:
            named = Future()
            done = in_background(write_archive, backend, ledger, plan, named)
        self.beside = BesideArchive(archive, named, done)
        return self.beside

    def begun(self, archive: HistoryArchive) -> BesideArchive | None:
        """The write of ``archive`` begun beside the round, if it was."""
        beside = self.beside
        return beside if beside is not None and beside.archive is archive else None

    def wait_named(self, beside: BesideArchive) -> ArchivePlan:
        """Wait until the archive written beside is whole under its name: its plan."""
        return beside.named.result()

    def start_archive(self, archive: HistoryArchive) -> Archived:
        """Plan ``archive`` and write it. On a local folder (:func:`barrier_beside`) the
        file is whole under its name, its bytes on disk, when this returns (written in a
        writing thread, begun by :meth:`begin_archive`); the flush of its folder (the
        name made durable) runs there while the round goes on: the result is
        ``pending`` until :meth:`settle_archive`."""
        if not barrier_beside(self.backend):
            plan = self.archives.plan(self.backend, archive)
            todo = Ledger(self.written, self.backend, (plan.write,)) if plan.write else None
            failed = self._write_now(todo) if todo is not None else set()
            return _archived(self.archives, self.backend, archive, plan, failed)
        beside = self.begun(archive) or self.write_beside(archive, small_here=True)
        assert beside is not None
        plan = self.wait_named(beside)
        if plan.write is None:  # this process already wrote it: nothing is pending
            self.beside = None
            return _archived(self.archives, self.backend, archive, plan, set())
        return Archived(plan.path, plan.continues, pending=True)

    def settle_archive(self, effect: SettleArchive) -> Archived | None:
        """The outcome of the pending archive write, once it is durable (or failed);
        ``None`` for a write the round forgets (``effect.forget``), once it is over."""
        beside, self.beside = self.beside, None
        if effect.forget:
            if beside is not None:
                wait([beside.done])
            return None
        assert beside is not None, "no archive write is pending"
        failed = beside.done.result()
        return _archived(self.archives, self.backend, beside.archive, beside.named.result(), failed)

    def settle_writes(self, effect: SettleWrites) -> set[str]:
        """The paths whose write started beside the flow failed, once the others are
        durable (nothing when no write is pending)."""
        writing, self.writing = self.writing, None
        return writing.result() if writing is not None else set()

    def archive_and_summarize(self, effect: ArchiveAndSummarize) -> SummaryOutcome:
        return self.start_archive(effect.archive), self.summarize(effect)

    def emit(self, effect: Emit) -> None:
        self.deliver(effect.event)


@attrs.define
class AsyncEffects:
    """Carries out effects on the event loop: archive and summary at once."""

    sync: SyncEffects

    async def call_model(self, effect: CallModel) -> ModelResult:
        try:
            response = self.sync.model(effect.messages) if self.sync.model else None
            if inspect.isawaitable(response):
                response = await response
            return ModelResult(response)
        except Exception as exc:
            return ModelResult(error=exc)

    async def write(self, effect: Write) -> set[str] | None:
        backend = self.sync.backend
        ledger = Ledger(self.sync.written, backend, effect.writes)
        if not ledger.todo:  # every file already written by this process: no thread hop
            return ledger.failed
        awrite_bytes: Callable[[str, bytes], Awaitable[Any]] | None = (
            cast(AsyncBytesBackend, backend).awrite_bytes
            if has(backend, AsyncBytesBackend)
            else None
        )
        awrite: Callable[[str, str], Awaitable[Any]] | None = (
            cast(AsyncBackend, backend).awrite_text if has(backend, AsyncBackend) else None
        )
        if awrite_bytes is None and awrite is None:
            return await anyio.to_thread.run_sync(self.sync.write, effect)
        for w in ledger.todo:
            try:
                if awrite_bytes is not None:
                    await awrite_bytes(w.path, w.data)
                else:
                    assert awrite is not None
                    await awrite(w.path, w.text)
            except Exception as exc:
                ledger.record(w, exc)
            else:
                ledger.record(w, None)
        return ledger.failed

    async def summarize(self, effect: ArchiveAndSummarize) -> SummaryResult | SummarizerError:
        return await call_async(self.sync.summarizer, effect.call)

    async def archive(self, archive: HistoryArchive) -> Archived:
        backend = self.sync.backend
        # the plan checks that the files it continues exist: backend I/O, off the loop
        plan = await anyio.to_thread.run_sync(self.sync.archives.plan, backend, archive)
        failed = (await self.write(Write((plan.write,))) if plan.write else None) or set()
        return _archived(self.sync.archives, backend, archive, plan, failed)

    def begin_archive(self, effect: BeginArchive) -> None:
        # a large file only: handed to a writing thread (nothing waits on the loop); a
        # small one is written beside the summary (archive_and_summarize)
        if barrier_beside(self.sync.backend):
            self.sync.write_beside(effect.archive, small_here=False)

    async def archive_and_summarize(self, effect: ArchiveAndSummarize) -> SummaryOutcome:
        results: dict[str, Any] = {}

        async def archive() -> None:
            if barrier_beside(self.sync.backend):  # waited for (or written) off the loop
                begun = self.sync.begun(effect.archive)
                if begun is None:
                    start = self.sync.start_archive
                    results["archive"] = await anyio.to_thread.run_sync(start, effect.archive)
                    return
                if not begun.named.done():
                    await anyio.to_thread.run_sync(wait, [begun.named])
                results["archive"] = self.sync.start_archive(effect.archive)
            else:
                results["archive"] = await self.archive(effect.archive)

        async def summarize() -> None:
            results["summary"] = await self.summarize(effect)

        async with anyio.create_task_group() as tg:  # history write and summary at once
            tg.start_soon(archive)
            tg.start_soon(summarize)
        return results["archive"], results["summary"]

    async def settle_archive(self, effect: SettleArchive) -> Archived | None:
        beside = self.sync.beside
        if beside is not None and not beside.done.done():  # wait off the loop
            await anyio.to_thread.run_sync(wait, [beside.done])
        return self.sync.settle_archive(effect)

    async def settle_writes(self, effect: SettleWrites) -> set[str]:
        writing = self.sync.writing
        if writing is not None and not writing.done():  # wait off the loop
            await anyio.to_thread.run_sync(wait, [writing])
        return self.sync.settle_writes(effect)

    def emit(self, effect: Emit) -> None:
        self.sync.emit(effect)
