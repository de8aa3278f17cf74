"""The per-call flow (R1-R5, R14, R20-R27, R30-R32, R40-R43), written once.

:meth:`Compressor.call` and :meth:`Compressor.acall` wrap one main-model call.
The decision logic is a generator (:meth:`Compressor._flow`) that *yields
effects* — call the model, write files, archive-and-summarize, emit a stream
event — and receives their results. It does no I/O itself. Two thin shells
run the effects: the sync one in order (archive, then summary), the async one
with an anyio task group (archive and summary concurrently, R26).

One call, as data::

    effective = summary + state[cutoff:]          (or state)
    estimate(system + tools + effective)
    below T ............................... call_model(effective)            R1
    at/above T: started, L1 on a copy
    L1 view <= T*ratio ..................... call_model(L1 view)             R14
    else, or on overflow: cutoff, archive || summarize, new event
    [summary] + kept tail (trimmed if still too big) ... call_model          R20-R25, R43
    completed / failed                                                       R30-R32

The outcome carries the model response, the view that was sent, the state
update to persist (a new :class:`~ars_core.events.SummarizationEvent` and any
tail messages replaced under overflow) and the stream events.
"""

from __future__ import annotations

import functools
import inspect
import logging
import uuid
import weakref
from collections.abc import Awaitable, Callable, Collection, Generator, Sequence
from typing import Any

import anyio
import anyio.to_thread
import attrs

from .config import SummaryConfig
from .errors import is_context_overflow
from .estimate import ApproxEstimator, Estimator, Tools, message_tokens
from .events import (
    CompressionEvent,
    EventEmitter,
    Level,
    Phase,
    SummarizationEvent,
    effective_messages,
    to_global_cutoff,
)
from .files import FileBackend, FsspecBackend
from .l1 import ARG_CHAR_LIMIT, TRUNCATE_TOOLS, FileWrite, plan_l1
from .l2 import build_summary_message, history_file, select_cutoff, trim_tail
from .messages import Message
from .summarize import (
    ExtractiveSummarizer,
    Summarizer,
    SummaryResult,
    condense_history,
)

__all__ = ["CallOutcome", "Compressor", "StateUpdate", "deliver_event"]

log = logging.getLogger("ars")

ModelCall = Callable[[list[Message]], Any]


@attrs.frozen
class StateUpdate:
    """What to persist after a call (R5): the new event, and tail messages
    replaced under overflow as ``(state index, new message)`` (R43)."""

    event: SummarizationEvent | None = None
    replaced: tuple[tuple[int, Message], ...] = ()


@attrs.frozen
class CallOutcome:
    """The result of one wrapped model call."""

    response: Any
    view: Sequence[Message]
    update: StateUpdate | None
    events: tuple[CompressionEvent, ...]
    level: Level | None
    forced: bool
    tokens_before: int
    tokens_after: int


# ------------------------------------------------------------------ effects


@attrs.frozen
class _CallModel:
    messages: list[Message]


@attrs.frozen
class _Write:
    writes: tuple[FileWrite, ...]


@attrs.frozen
class _ArchiveAndSummarize:
    archive: FileWrite
    history: list[Message]
    prompt: str


@attrs.frozen
class _Emit:
    event: CompressionEvent


@attrs.frozen
class _ModelResult:
    response: Any = None
    error: BaseException | None = None


_Effect = _CallModel | _Write | _ArchiveAndSummarize | _Emit
_Flow = Generator[_Effect, Any, CallOutcome]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class Compressor:
    """ARS's engine: wraps main-model calls with two-level compression.

    ``config`` holds the five Context fields (R35). ``estimator`` defaults to
    :class:`~ars_core.estimate.ApproxEstimator`; ``backend`` to an in-memory
    fsspec backend; ``summarizer`` to the deterministic
    :class:`~ars_core.summarize.ExtractiveSummarizer` (adapters pass the main
    model). ``emitter`` receives every stream event. ``arg_char_limit`` and
    ``truncate_tools`` are L1's internal constants (R11);
    ``summary_input_tokens`` bounds what the summary model reads (default:
    half the entry threshold); ``is_overflow`` classifies model errors (R4).
    """

    def __init__(
        self,
        config: SummaryConfig | None = None,
        *,
        estimator: Estimator | None = None,
        backend: FileBackend | None = None,
        summarizer: Summarizer | Any = None,
        emitter: EventEmitter | None = None,
        arg_char_limit: int = ARG_CHAR_LIMIT,
        truncate_tools: Collection[str] = TRUNCATE_TOOLS,
        summary_input_tokens: int | None = None,
        is_overflow: Callable[[BaseException], bool] = is_context_overflow,
    ) -> None:
        self.config = config or SummaryConfig()
        self.estimator: Estimator = estimator or ApproxEstimator()
        self.backend: FileBackend = (
            backend if backend is not None else FsspecBackend("memory://ars")
        )
        self.summarizer = summarizer if summarizer is not None else ExtractiveSummarizer()
        self.emitter = emitter
        self.arg_char_limit = arg_char_limit
        self.truncate_tools = tuple(truncate_tools)
        self.summary_input_tokens = summary_input_tokens
        self.is_overflow = is_overflow
        # paths already written, per backend: L1 re-offloads the same results every
        # call (state is never rewritten), so each file is written once per process
        self._written: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------ public API

    def call(
        self,
        messages: Sequence[Message],
        call_model: ModelCall,
        *,
        event: SummarizationEvent | None = None,
        system: Message | str | None = None,
        tools: Tools | None = None,
        summarizer: Summarizer | Any = None,
        backend: FileBackend | None = None,
        emitter: EventEmitter | None = None,
        thread: str | None = None,
    ) -> CallOutcome:
        """Run one model call through ARS, synchronously.

        ``messages`` are the state messages, ``event`` the current
        ``_summarization_event``; ``call_model(view)`` calls the main model.
        Exceptions of the main model propagate (after a ``failed`` event when a
        compression round had started); overflow errors trigger forced
        compression first (R4).
        """
        flow = self._flow(messages, event, system, tools, thread=thread)
        return self._run_sync(flow, call_model, *self._resolve(summarizer, backend, emitter))

    async def acall(
        self,
        messages: Sequence[Message],
        call_model: Callable[[list[Message]], Awaitable[Any]] | ModelCall,
        *,
        event: SummarizationEvent | None = None,
        system: Message | str | None = None,
        tools: Tools | None = None,
        summarizer: Summarizer | Any = None,
        backend: FileBackend | None = None,
        emitter: EventEmitter | None = None,
        thread: str | None = None,
    ) -> CallOutcome:
        """Async twin of :meth:`call`: archive and summary run concurrently (R26)."""
        flow = self._flow(messages, event, system, tools, thread=thread)
        return await self._run_async(flow, call_model, *self._resolve(summarizer, backend, emitter))

    def compact(
        self,
        messages: Sequence[Message],
        *,
        event: SummarizationEvent | None = None,
        system: Message | str | None = None,
        tools: Tools | None = None,
        force: bool = False,
        summarizer: Summarizer | Any = None,
        backend: FileBackend | None = None,
        emitter: EventEmitter | None = None,
        thread: str | None = None,
        hold_events: bool = False,
    ) -> CallOutcome:
        """Build the view for the next model call without calling a model.

        For runtimes that fetch the context and call the model themselves (a
        LlamaIndex memory's ``get``). ``force=True`` is the forced path after a
        context overflow (R4). ``response`` is ``None``. With ``hold_events``
        nothing is delivered: the caller delivers ``outcome.events`` with
        :func:`deliver_event` once its own model call has succeeded or failed.
        """
        flow = self._flow(messages, event, system, tools, thread=thread, forced=force)
        return self._run_sync(flow, None, *self._resolve(summarizer, backend, emitter, hold_events))

    async def acompact(
        self,
        messages: Sequence[Message],
        *,
        event: SummarizationEvent | None = None,
        system: Message | str | None = None,
        tools: Tools | None = None,
        force: bool = False,
        summarizer: Summarizer | Any = None,
        backend: FileBackend | None = None,
        emitter: EventEmitter | None = None,
        thread: str | None = None,
        hold_events: bool = False,
    ) -> CallOutcome:
        """Async twin of :meth:`compact`."""
        flow = self._flow(messages, event, system, tools, thread=thread, forced=force)
        return await self._run_async(
            flow, None, *self._resolve(summarizer, backend, emitter, hold_events)
        )

    def _resolve(
        self,
        summarizer: Any,
        backend: FileBackend | None,
        emitter: EventEmitter | None,
        hold_events: bool = False,
    ) -> tuple[Any, FileBackend, Callable[[CompressionEvent], None]]:
        """The per-call overrides, falling back to the engine's own."""
        emitter = emitter if emitter is not None else self.emitter
        return (
            summarizer if summarizer is not None else self.summarizer,
            backend if backend is not None else self.backend,
            _hold if hold_events else functools.partial(deliver_event, emitter=emitter),
        )

    # ------------------------------------------------------------ the flow

    def _flow(
        self,
        state: Sequence[Message],
        event: SummarizationEvent | None,
        system: Message | str | None,
        tools: Tools | None,
        *,
        thread: str | None,
        forced: bool = False,
    ) -> _Flow:
        cfg, est = self.config, self.estimator
        # thresholds in estimate units: a calibrated estimator (provider usage) scales them
        scale = getattr(est, "scale", 1.0) or 1.0
        threshold = int(cfg.threshold_tokens / scale)
        l2_threshold = int(cfg.l2_threshold_tokens / scale)
        # with no event the effective messages are the state itself: no O(history) copy on
        # the hot path (views that differ from it are always new lists)
        effective = (
            state if event is None and isinstance(state, list) else effective_messages(state, event)
        )
        extra = _count_extra(est, system, tools)
        count_history = getattr(est, "count_history", None)
        history_tokens = count_history(effective) if count_history else est.count(effective)
        tokens_before = history_tokens + extra
        round_id = ""
        started = False
        reached: Level = "L1"

        def record(phase: Phase, level: Level, **kw: Any) -> _Emit:
            nonlocal round_id
            round_id = round_id or uuid.uuid4().hex[:12]
            return _Emit(
                CompressionEvent(
                    phase=phase,
                    level=level,
                    round_id=round_id,
                    forced=forced,
                    tokens_before=tokens_before,
                    threshold=cfg.threshold_tokens,
                    **kw,
                )
            )

        emitted: list[CompressionEvent] = []

        def emit(effect: _Emit) -> _Emit:
            emitted.append(effect.event)
            return effect

        def outcome(
            response: Any,
            view: Sequence[Message],
            update: StateUpdate | None,
            level: Level | None,
            tokens_after: int,
        ) -> CallOutcome:
            return CallOutcome(
                response=response,
                view=view,
                update=update,
                events=tuple(emitted),
                level=level,
                forced=forced,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
            )

        # R1: below the entry threshold, straight through
        if not forced and tokens_before < threshold:
            result = yield _CallModel(effective)
            if result.error is None:
                return outcome(result.response, effective, None, None, tokens_before)
            if not self.is_overflow(result.error):
                raise result.error
            forced = True  # R4: overflow below threshold -> forced path
        elif not forced:
            started = True  # R2
            yield emit(record("started", "L1"))

        # L1 on a copy (R10-R13)
        plan = plan_l1(
            effective,
            estimator=est,
            tool_token_limit=cfg.summary_tool_result_token_limit,
            arg_char_limit=self.arg_char_limit,
            truncate_tools=self.truncate_tools,
        )
        failed_writes: set[str] = (yield _Write(plan.writes)) if plan.writes else set()
        view, offloaded = plan.finalize(failed_writes)
        l1_tokens = tokens_before + sum(
            message_tokens(est, view[i]) - message_tokens(est, orig)
            for i, orig in plan.replaced.items()
        )
        l1_fields = {"offloaded": offloaded, "truncated_args": plan.truncated_args}
        l1_sent = False

        try:
            # R14: L1 is enough
            if not forced and l1_tokens <= l2_threshold:
                result = yield _CallModel(view)
                l1_sent = True
                if result.error is None:
                    yield emit(record("completed", "L1", tokens_after=l1_tokens, **l1_fields))
                    return outcome(result.response, view, None, "L1", l1_tokens)
                if not self.is_overflow(result.error):
                    raise result.error
                forced = True

            # L2 (R20): above the L2 threshold, or forced by an overflow
            start = 1 if event is not None else 0
            local_cut = select_cutoff(effective, cfg.summary_keep_messages, start=start)
            if local_cut is None:  # R42: fall back to the L1 view
                log.warning(
                    "ARS: no valid cutoff for L2 (%d effective messages); sending the L1 view",
                    len(effective),
                )
                if l1_sent:
                    raise result.error
                result = yield _CallModel(view)
                if result.error is not None:
                    if not started:  # R42 over R4: a failing forced round is reported
                        started = True
                        yield emit(record("started", "L1"))
                    raise result.error
                if started:
                    yield emit(record("completed", "L1", tokens_after=l1_tokens, **l1_fields))
                return outcome(result.response, view, None, "L1" if started else None, l1_tokens)

            reached = "L2"
            if not started:  # R4: the forced path announces itself when L2 begins
                started = True
                yield emit(record("started", "L2"))

            global_cut = to_global_cutoff(local_cut, event)
            previous_cut = event.cutoff if event is not None else 0
            archive = history_file(
                effective[start:local_cut], start=previous_cut, end=global_cut, thread=thread
            )
            budget = self.summary_input_tokens or max(1024, threshold // 2)
            cleaned = condense_history(view[:local_cut], budget, est)
            archive_error, summary = yield _ArchiveAndSummarize(
                archive, cleaned, cfg.summary_prompt
            )

            file_path = None if archive_error is not None else archive.path
            if archive_error is not None:  # R26, R40
                log.warning(
                    "ARS: history archive write failed (%s); summarizing anyway, file_path=None",
                    _describe(archive_error),
                )
            error_text = None
            usage = None
            if isinstance(summary, BaseException):  # R41: never raised
                error_text = _describe(summary)
                log.error("ARS: summary model failed: %s", error_text)
                fallback = ExtractiveSummarizer().summarize(cleaned, cfg.summary_prompt).text
                summary_msg = build_summary_message(
                    None,
                    cutoff=global_cut,
                    file_path=file_path,
                    error=error_text,
                    fallback=fallback,
                )
            else:
                usage = summary.usage
                summary_msg = build_summary_message(
                    summary.text, cutoff=global_cut, file_path=file_path
                )
            new_event = SummarizationEvent(
                cutoff=global_cut,
                summary_message=summary_msg,
                file_path=file_path,
                previous_cutoff=previous_cut,
                summary_usage=usage,
                summary_error=error_text,
            )

            # R22/R43: the kept window still too big -> trim the tail sent (and persist it by id)
            tail = view[local_cut:]
            new_view = [summary_msg, *tail]
            tokens_after = extra + sum(message_tokens(est, m) for m in new_view)
            capacity = l2_threshold if forced else threshold
            replaced: tuple[tuple[int, Message], ...] = ()
            if tokens_after > capacity:
                trim = trim_tail(
                    effective[local_cut:],
                    tail,
                    budget=capacity,
                    fixed_tokens=extra + message_tokens(est, summary_msg),
                    estimator=est,
                    preview_tokens=cfg.summary_tool_result_token_limit,
                )
                failed = (yield _Write(trim.writes)) if trim.writes else set()
                ok = {
                    j
                    for j, w in zip(trim.trimmed, trim.writes, strict=True)
                    if w.path not in failed
                }
                if ok:
                    tail = [trim.tail[j] if j in ok else m for j, m in enumerate(tail)]
                    new_view = [summary_msg, *tail]
                    tokens_after = extra + sum(message_tokens(est, m) for m in new_view)
                    replaced = tuple((global_cut + j, trim.tail[j]) for j in sorted(ok))

            update = StateUpdate(event=new_event, replaced=replaced)
            result = yield _CallModel(new_view)
            if result.error is not None:
                raise result.error
            yield emit(
                record(
                    "completed",
                    "L2",
                    tokens_after=tokens_after,
                    cutoff=global_cut,
                    file_path=file_path,
                    summary_usage=usage,
                    **l1_fields,
                )
            )
            return outcome(result.response, new_view, update, "L2", tokens_after)
        except Exception as exc:  # R32: compression had started and an exception escapes
            if started:
                yield emit(record("failed", reached, error=_describe(exc)))
            raise

    # ------------------------------------------------------------ shells

    def _pending(
        self, backend: FileBackend, writes: Sequence[FileWrite]
    ) -> tuple[set[str], list[FileWrite]]:
        try:
            done = self._written.setdefault(backend, set())
        except TypeError:  # not weak-referenceable: no cache
            done = set()
        return done, [w for w in writes if w.path not in done]

    def _write_all(self, backend: FileBackend, writes: Sequence[FileWrite]) -> set[str]:
        done, todo = self._pending(backend, writes)
        failed: set[str] = set()
        for w in todo:
            try:
                backend.write_text(w.path, w.text)
                done.add(w.path)
            except Exception as exc:
                log.warning("ARS: could not write %s: %s", w.path, _describe(exc))
                failed.add(w.path)
        return failed

    def _run_sync(
        self,
        flow: _Flow,
        call_model: ModelCall | None,
        summarizer: Any,
        backend: FileBackend,
        deliver: Callable[[CompressionEvent], None],
    ) -> CallOutcome:
        value: Any = None
        try:
            while True:
                effect = flow.send(value)
                value = None
                if isinstance(effect, _CallModel):
                    try:
                        value = _ModelResult(call_model(effect.messages) if call_model else None)
                    except Exception as exc:
                        value = _ModelResult(error=exc)
                elif isinstance(effect, _Write):
                    value = self._write_all(backend, effect.writes)
                elif isinstance(effect, _ArchiveAndSummarize):
                    failed = self._write_all(backend, (effect.archive,))
                    archive_error = (
                        None if not failed else OSError(f"could not write {effect.archive.path}")
                    )
                    value = (archive_error, _summarize_sync(summarizer, effect))
                elif isinstance(effect, _Emit):
                    deliver(effect.event)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def _run_async(
        self,
        flow: _Flow,
        call_model: Any,
        summarizer: Any,
        backend: FileBackend,
        deliver: Callable[[CompressionEvent], None],
    ) -> CallOutcome:
        value: Any = None
        try:
            while True:
                effect = flow.send(value)
                value = None
                if isinstance(effect, _CallModel):
                    try:
                        response = call_model(effect.messages) if call_model else None
                        if inspect.isawaitable(response):
                            response = await response
                        value = _ModelResult(response)
                    except Exception as exc:
                        value = _ModelResult(error=exc)
                elif isinstance(effect, _Write):
                    value = await self._awrite_all(backend, effect.writes)
                elif isinstance(effect, _ArchiveAndSummarize):
                    value = await self._archive_and_summarize(backend, summarizer, effect)
                elif isinstance(effect, _Emit):
                    deliver(effect.event)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def _awrite_all(self, backend: FileBackend, writes: Sequence[FileWrite]) -> set[str]:
        awrite = getattr(backend, "awrite_text", None)
        if awrite is None:
            return await anyio.to_thread.run_sync(self._write_all, backend, writes)
        done, todo = self._pending(backend, writes)
        failed: set[str] = set()
        for w in todo:
            try:
                await awrite(w.path, w.text)
                done.add(w.path)
            except Exception as exc:
                log.warning("ARS: could not write %s: %s", w.path, _describe(exc))
                failed.add(w.path)
        return failed

    async def _archive_and_summarize(
        self, backend: FileBackend, summarizer: Any, effect: _ArchiveAndSummarize
    ) -> tuple[BaseException | None, Any]:
        results: dict[str, Any] = {}

        async def archive() -> None:
            failed = await self._awrite_all(backend, (effect.archive,))
            results["archive"] = (
                OSError(f"could not write {effect.archive.path}") if failed else None
            )

        async def summarize() -> None:
            try:
                asummarize = getattr(summarizer, "asummarize", None)
                if asummarize is not None:
                    results["summary"] = _check_summary(
                        await asummarize(effect.history, effect.prompt)
                    )
                else:
                    results["summary"] = await anyio.to_thread.run_sync(
                        _summarize_sync, summarizer, effect
                    )
            except Exception as exc:
                results["summary"] = exc

        async with anyio.create_task_group() as tg:  # R26: both at once
            tg.start_soon(archive)
            tg.start_soon(summarize)
        return results["archive"], results["summary"]


def _count_extra(est: Estimator, system: Message | str | None, tools: Tools | None) -> int:
    count_extra = getattr(est, "count_extra", None)
    if count_extra is not None:
        return int(count_extra(system=system, tools=tools))
    return est.count([], system=system, tools=tools)


def _check_summary(result: Any) -> SummaryResult:
    if isinstance(result, SummaryResult):
        return result
    if isinstance(result, str):
        return SummaryResult(text=result)
    raise TypeError(f"a summarizer must return SummaryResult or str, not {type(result).__name__}")


def _summarize_sync(summarizer: Any, effect: _ArchiveAndSummarize) -> SummaryResult | BaseException:
    try:
        return _check_summary(summarizer.summarize(effect.history, effect.prompt))
    except Exception as exc:
        return exc


def _hold(event: CompressionEvent) -> None:
    """Deliver nothing now (``hold_events``): the caller delivers later."""


def deliver_event(event: CompressionEvent, emitter: EventEmitter | None = None) -> None:
    """Send ``event`` to ``emitter`` and to every plugin observing compression
    events; an observer's exception is logged, never raised."""
    from .plugins import emit_to_plugins

    for deliver in (emitter, emit_to_plugins):
        if deliver is None:
            continue
        try:
            deliver(event)
        except Exception as exc:  # an observer never breaks the call
            log.warning("ARS: event observer failed: %s", _describe(exc))
