"""The engine: :class:`Compressor` wraps main-model calls with two-level compression.

:meth:`Compressor.call` / :meth:`Compressor.acall` wrap one main-model call;
:meth:`Compressor.compact` / :meth:`Compressor.acompact` build the next view
for runtimes that call the model themselves. Each builds the pure generator
of :mod:`ars_core.flow` (the decisions, no I/O) and drives it with the
effect handlers of :mod:`ars_core.effects`: in order when synchronous,
archive and summary concurrently when asynchronous.

The outcome carries the model response, the view that was sent, the state
update to persist (a new :class:`~ars_core.checkpoint.SummarizationEvent` and any
tail messages replaced under overflow) and the stream events.
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, Literal, TypedDict, Unpack

import anyio
import anyio.to_thread
import attrs

from .archive import ArchiveLog
from .checkpoint import SummarizationEvent, reads_kept_part_only
from .config import SummaryConfig
from .effects import AsyncEffects, SyncEffects, WrittenPaths, describe, run_async, run_sync
from .errors import ConfigError, is_context_overflow
from .estimate import OFFLOAD_CHARS, Estimator, Tools, default_estimator, uncounted_chars
from .files import FileBackend
from .flow import CallOutcome, StateUpdate, flow
from .l1 import ARG_CHAR_LIMIT, TRUNCATE_TOOLS
from .memo import Memo, active
from .messages import Message, to_openai
from .options import CallOptions
from .resolve import (
    BackendLike,
    EstimatorLike,
    default_backend,
    resolve_backend,
    resolve_estimator,
    resolve_summarizer,
)
from .round import CompressionRound
from .stream import CompressionEvent, EventEmitter
from .summarize import AsyncSummarizer, ExtractiveSummarizer, Summarizer
from .typing import ModelCall, OverflowClassifier, SummarizerLike

__all__ = ["CallOutcome", "Compaction", "Compressor", "StateUpdate", "deliver_event"]

log = logging.getLogger("ars")

#: the form ``call_model`` gets the view in (see :class:`Compressor`)
ViewFormat = Literal["auto", "messages", "openai"]
VIEW_FORMATS: tuple[str, ...] = ("auto", "messages", "openai")


class CompactOptions(TypedDict, total=False):
    """The keyword arguments :meth:`Compressor.compact_round` passes on to
    :meth:`Compressor.compact` (one by one, or as one ``options``)."""

    event: SummarizationEvent | None
    system: Message | str | None
    tools: Tools | None
    force: bool
    summarizer: SummarizerLike | None
    backend: FileBackend | None
    thread: str | None
    options: CallOptions | None


class CompactNowOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`Compressor.compact_now` (one by one, or
    as one ``options``)."""

    event: SummarizationEvent | None
    system: Message | str | None
    tools: Tools | None
    summarizer: SummarizerLike | None
    backend: FileBackend | None
    emitter: EventEmitter | None
    thread: str | None
    options: CallOptions | None


@attrs.frozen
class Compaction:
    """What an on-demand compaction (:meth:`Compressor.compact_now`) did.

    ``compacted`` is true when an L2 round summarized older messages;
    ``message`` says what happened in words (what a compaction tool answers);
    ``update`` is what to persist (the new event; ``None`` when nothing
    changed); ``outcome`` the engine's full outcome (view, stream events)."""

    compacted: bool
    message: str
    outcome: CallOutcome

    @property
    def update(self) -> StateUpdate | None:
        return self.outcome.update

    @property
    def event(self) -> SummarizationEvent | None:
        """The new summarization event, when compacted."""
        update = self.outcome.update
        return update.event if self.compacted and update is not None else None

    @property
    def view(self) -> Sequence[Message]:
        """The view the next model call gets."""
        return self.outcome.view

    @classmethod
    def of(cls, outcome: CallOutcome, keep: int) -> Compaction:
        update = outcome.update
        event = update.event if update is not None else None
        if outcome.level == "L2" and event is not None:
            archived = f", history archived to {event.file_path}" if event.file_path else ""
            message = (
                f"Conversation compacted: messages 1-{event.cutoff} summarized "
                f"({outcome.tokens_before:,} -> {outcome.tokens_after:,} tokens){archived}."
            )
            return cls(True, message, outcome)
        return cls(False, cls.nothing_to_compact(keep), outcome)

    @staticmethod
    def nothing_to_compact(keep: int) -> str:
        """What a compaction with nothing to summarize says."""
        return (
            "Nothing to compact: there are no older messages to summarize besides the "
            f"{keep} most recent ones, which are always kept."
        )


class Compressor:
    """ARS's engine: wraps main-model calls with two-level compression.

    ``config`` holds the five Context fields. ``estimator`` defaults to
    :func:`~ars_core.estimate.default_estimator` (exact o200k with tiktoken
    installed, the approximate count otherwise); ``backend`` to
    :func:`~ars_core.default_backend` (the folder ``.ars`` in the current
    directory, or ``ARS_FILES_DIR``: files outlive the process); ``summarizer`` to the deterministic
    :class:`~ars_core.summarize.ExtractiveSummarizer` (adapters pass the main
    model). Each may also be named (``estimator="o200k"``,
    ``summarizer="extractive"``, ``backend="s3://bucket/ars"``): names resolve
    through the plugin registry (:mod:`ars_core.resolve`); ``estimator`` also
    takes an Estimator class or a plain counter ``messages -> int``.
    ``emitter`` receives every stream event. ``arg_char_limit`` and
    ``truncate_tools`` are L1's internal constants;
    ``summary_input_tokens`` bounds what the summary model reads (default:
    :func:`~ars_core.budget.default_input_budget`); ``is_overflow`` classifies
    model errors.
    ``stable_views`` (default on) keeps sending the kept messages in the form
    the last L2 request sent them, so prompt caches stay valid; ``False`` is
    the literal rule (below T every message goes out unchanged).
    ``lean_rounds`` (default on) sizes each L2 round from its task (the
    summary, its input and the kept tail, by the rules of
    :mod:`ars_core.budget`), and the cutoff keeps fewer than
    ``summary_keep_messages`` when needed so the new view falls under the L2
    threshold (the next round waits for new messages to fill the window);
    ``False`` gives the fixed rounds (the latest ``summary_keep_messages``, a
    summary bounded by ``summary_token_limit``).
    ``view_format`` is the form ``call_model`` gets the view in: ``"auto"``
    (default) the caller's own (OpenAI chat-completions dicts when the messages
    given to ``call``/``acall`` are dicts, else :class:`Message` records),
    ``"openai"`` always dicts (:func:`to_openai`), ``"messages"`` always records.
    ``CallOutcome.view`` is always :class:`Message` records.
    """

    def __init__(
        self,
        config: SummaryConfig | None = None,
        *,
        estimator: EstimatorLike | None = None,
        backend: BackendLike | None = None,
        summarizer: SummarizerLike | None = None,
        emitter: EventEmitter | None = None,
        arg_char_limit: int = ARG_CHAR_LIMIT,
        truncate_tools: Collection[str] = TRUNCATE_TOOLS,
        summary_input_tokens: int | None = None,
        is_overflow: OverflowClassifier = is_context_overflow,
        stable_views: bool = True,
        lean_rounds: bool = True,
        view_format: ViewFormat = "auto",
    ) -> None:
        self.config = config or SummaryConfig()
        # names, URLs, classes and plain counters go through the plugin registry
        self.estimator: Estimator = resolve_estimator(estimator) or default_estimator()
        self.backend: FileBackend = resolve_backend(backend) or default_backend()
        resolved = resolve_summarizer(summarizer)
        # the default summarizer counts as the engine does (its bound is in those units)
        self.summarizer: Summarizer | AsyncSummarizer = (
            resolved if resolved is not None else ExtractiveSummarizer(estimator=self.estimator)
        )
        self.emitter = emitter
        self.arg_char_limit = arg_char_limit
        self.truncate_tools = tuple(truncate_tools)
        self.summary_input_tokens = summary_input_tokens
        self.is_overflow = is_overflow
        self.stable_views = stable_views
        self.lean_rounds = lean_rounds
        if view_format not in VIEW_FORMATS:
            raise ConfigError("view_format", view_format, f"expected one of {VIEW_FORMATS}")
        self.view_format: ViewFormat = view_format
        #: where T comes from when an adapter set it from the model's window (events say so)
        self.threshold_source: str | None = None
        # paths already written, per backend: L1 re-offloads the same results every
        # call (state is never rewritten), so each file is written once per process
        self._written: WrittenPaths = weakref.WeakKeyDictionary()
        # the history archives written, per backend: a round that archives the same
        # first messages again writes only what is new (a continuation file)
        self._archives = ArchiveLog()
        #: what this engine remembers of the histories it saw (running token totals,
        #: histories checked to hold records, where requests are...): ``ars_core.memo``
        self.memo = Memo()
        # histories already found to hold only Message records: a call checks what was
        # appended since (dicts are converted with as_messages)
        self._as_messages = self.memo.checked

    # ------------------------------------------------------------ public API

    def follow_model(self, config: SummaryConfig, max_input_tokens: int | None) -> None:
        """Use ``config``, with T taken from the main model's input window when
        ``summary_threshold`` is not set (:meth:`SummaryConfig.following_model`);
        the stream events then say where T came from."""
        self.config = config.following_model(max_input_tokens)
        self.threshold_source = config.threshold_source(max_input_tokens)

    def call(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        call_model: ModelCall,
        *,
        event: SummarizationEvent | None = None,
        system: Message | str | None = None,
        tools: Tools | None = None,
        summarizer: SummarizerLike | None = None,
        backend: FileBackend | None = None,
        emitter: EventEmitter | None = None,
        thread: str | None = None,
        requested: bool = False,
        options: CallOptions | None = None,
    ) -> CallOutcome:
        """Run one model call through ARS, synchronously.

        ``messages`` are the state messages (:class:`Message` records, or
        OpenAI chat-completions dicts, read with :func:`from_openai`), ``event`` the current
        ``_summarization_event``; ``call_model(view)`` calls the main model.
        Exceptions of the main model propagate (after a ``failed`` event when a
        compression round had started); overflow errors trigger forced
        compression first. ``requested`` runs an L2 round before this call
        whatever the size (the compaction tool asked for it), when there is
        something to summarize. ``options`` holds any of these keyword
        arguments as one :class:`~ars_core.CallOptions` (a keyword given here
        wins over its field).
        """
        with active(self.memo):
            given = (event, system, tools, summarizer, backend, emitter, thread, requested)
            o = _merged(options, *given)
            msgs = self._records(messages, o.event)
            steps = flow(
                self, msgs, o.event, o.system, o.tools, thread=o.thread, requested=o.requested
            )
            call_model = self._in_callers_form(messages, call_model)
            return run_sync(steps, self._effects(call_model, o.summarizer, o.backend, o.emitter))

    async def acall(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        call_model: Callable[[list[Message]], Awaitable[Any]] | ModelCall,
        *,
        event: SummarizationEvent | None = None,
        system: Message | str | None = None,
        tools: Tools | None = None,
        summarizer: SummarizerLike | None = None,
        backend: FileBackend | None = None,
        emitter: EventEmitter | None = None,
        thread: str | None = None,
        requested: bool = False,
        options: CallOptions | None = None,
    ) -> CallOutcome:
        """Async twin of :meth:`call`: archive and summary run concurrently.
        Large new content is counted and trimmed in a worker thread, never on
        the event loop."""
        given = (event, system, tools, summarizer, backend, emitter, thread, requested)
        o = _merged(options, *given)
        call_model = self._in_callers_form(messages, call_model)
        effects = self._effects(call_model, o.summarizer, o.backend, o.emitter)
        return await self._arun(
            messages, o.event, o.system, o.tools, o.thread, False, effects, requested=o.requested
        )

    def compact(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        event: SummarizationEvent | None = None,
        system: Message | str | None = None,
        tools: Tools | None = None,
        force: bool = False,
        summarizer: SummarizerLike | None = None,
        backend: FileBackend | None = None,
        emitter: EventEmitter | None = None,
        thread: str | None = None,
        hold_events: bool = False,
        requested: bool = False,
        options: CallOptions | None = None,
    ) -> CallOutcome:
        """Build the view for the next model call without calling a model.

        For runtimes that fetch the context and call the model themselves (a
        LlamaIndex memory's ``get``). ``force=True`` is the forced path after a
        context overflow. ``response`` is ``None``. With ``hold_events``
        nothing is delivered: the caller delivers ``outcome.events`` with
        :func:`deliver_event` once its own model call has succeeded or failed
        (:meth:`compact_round` does that bookkeeping). ``requested`` runs L2
        now, whatever the size (see :meth:`compact_now`). ``options``: see
        :meth:`call`.
        """
        with active(self.memo):
            given = (event, system, tools, summarizer, backend, emitter, thread, requested, force)
            o = _merged(options, *given)
            msgs = self._records(messages, o.event)
            steps = flow(
                self,
                msgs,
                o.event,
                o.system,
                o.tools,
                thread=o.thread,
                forced=o.force,
                requested=o.requested,
            )
            effects = self._effects(None, o.summarizer, o.backend, o.emitter, hold_events)
            return run_sync(steps, effects)

    async def acompact(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        event: SummarizationEvent | None = None,
        system: Message | str | None = None,
        tools: Tools | None = None,
        force: bool = False,
        summarizer: SummarizerLike | None = None,
        backend: FileBackend | None = None,
        emitter: EventEmitter | None = None,
        thread: str | None = None,
        hold_events: bool = False,
        requested: bool = False,
        options: CallOptions | None = None,
    ) -> CallOutcome:
        """Async twin of :meth:`compact`."""
        given = (event, system, tools, summarizer, backend, emitter, thread, requested, force)
        o = _merged(options, *given)
        effects = self._effects(None, o.summarizer, o.backend, o.emitter, hold_events)
        return await self._arun(
            messages, o.event, o.system, o.tools, o.thread, o.force, effects, requested=o.requested
        )

    async def _arun(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        event: SummarizationEvent | None,
        system: Message | str | None,
        tools: Tools | None,
        thread: str | None,
        forced: bool,
        effects: Any,
        *,
        requested: bool = False,
    ) -> CallOutcome:
        """Run the flow for the async shells. When the newest messages hold more
        uncounted text than ``OFFLOAD_CHARS``, the flow's own work (counting,
        hashing, previews) runs in a worker thread; the effects stay on the loop."""
        with active(self.memo):
            msgs = self._records(messages, event)
            offload = uncounted_chars(self.estimator, msgs) >= OFFLOAD_CHARS
            build = functools.partial(
                flow,
                self,
                msgs,
                event,
                system,
                tools,
                thread=thread,
                forced=forced,
                requested=requested,
            )
            steps = await anyio.to_thread.run_sync(build) if offload else build()
            return await run_async(steps, AsyncEffects(effects), in_thread=offload)

    def compact_now(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        **kwargs: Unpack[CompactNowOptions],
    ) -> Compaction:
        """Run an L2 round now, whatever the size (between turns, on demand):
        the older messages are archived and summarized, the latest
        ``summary_keep_messages`` kept. Events are delivered at once (``started``,
        then ``completed`` or ``failed``); the caller persists
        ``result.update``. With nothing to summarize it is a no-op that says so
        (``result.compacted`` is false)."""
        outcome = self.compact(messages, requested=True, **kwargs)
        return Compaction.of(outcome, self.config.summary_keep_messages)

    async def acompact_now(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        **kwargs: Unpack[CompactNowOptions],
    ) -> Compaction:
        """Async twin of :meth:`compact_now`."""
        outcome = await self.acompact(messages, requested=True, **kwargs)
        return Compaction.of(outcome, self.config.summary_keep_messages)

    def compact_round(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        emitter: EventEmitter | None = None,
        **kwargs: Unpack[CompactOptions],
    ) -> CompressionRound:
        """:meth:`compact` (same keyword arguments), with the round's events held
        until the caller's own model call succeeded or failed, delivered to
        ``emitter`` (see :class:`~ars_core.CompressionRound`)."""
        outcome = self.compact(messages, hold_events=True, **kwargs)
        return CompressionRound(outcome, deliver=self._round_deliverer(emitter, kwargs))

    async def acompact_round(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        emitter: EventEmitter | None = None,
        **kwargs: Unpack[CompactOptions],
    ) -> CompressionRound:
        """Async twin of :meth:`compact_round`."""
        outcome = await self.acompact(messages, hold_events=True, **kwargs)
        return CompressionRound(outcome, deliver=self._round_deliverer(emitter, kwargs))

    # ------------------------------------------------------------ shells

    def _records(
        self, messages: Sequence[Any], event: SummarizationEvent | None
    ) -> Sequence[Message]:
        """``messages`` as records for a call with ``event``: when the call reads only
        the part the event keeps (:func:`~ars_core.checkpoint.reads_kept_part_only`)
        they are handed on as they are, the summarized part unchecked (an L2 round
        checks it before reading it); else checked, or converted, whole."""
        if reads_kept_part_only(messages, event):
            return messages
        return self._as_messages(messages)

    def _in_callers_form(self, messages: Sequence[Any], call_model: Any) -> Any:
        """``call_model`` fed the view as OpenAI dicts when the caller gave dicts
        (``view_format="auto"``: the first and last messages are mappings) or asked
        for them (``"openai"``); else as :class:`Message` records."""
        form = self.view_format
        # the last message first: a history of records is told by its kept part alone
        dicts = bool(messages) and isinstance(messages[-1], Mapping)
        dicts = dicts and isinstance(messages[0], Mapping)
        if form == "messages" or (form == "auto" and not dicts):
            return call_model
        return functools.partial(_call_with_dicts, call_model)

    def _round_deliverer(
        self, emitter: EventEmitter | None, kwargs: CompactOptions
    ) -> Callable[[CompressionEvent], None]:
        """A held round's delivery: to ``emitter``, else the ``options``' emitter."""
        options = kwargs.get("options")
        if emitter is None and options is not None:
            emitter = options.emitter
        return self._deliverer(emitter)

    def _deliverer(self, emitter: EventEmitter | None) -> Callable[[CompressionEvent], None]:
        """Delivery to ``emitter`` (or the engine's) and to the plugin observers."""
        return functools.partial(
            deliver_event, emitter=emitter if emitter is not None else self.emitter
        )

    def _effects(
        self,
        call_model: Callable[[list[Message]], Any] | None,
        summarizer: SummarizerLike | None,
        backend: FileBackend | None,
        emitter: EventEmitter | None,
        hold_events: bool = False,
    ) -> SyncEffects:
        """The effect handlers for one call: per-call overrides, falling back
        to the engine's own."""
        return SyncEffects(
            model=call_model,
            summarizer=resolve_summarizer(summarizer) or self.summarizer,
            backend=backend if backend is not None else self.backend,
            deliver=_hold if hold_events else self._deliverer(emitter),
            written=self._written,
            archives=self._archives,
        )


def _merged(
    options: CallOptions | None,
    event: SummarizationEvent | None,
    system: Message | str | None,
    tools: Tools | None,
    summarizer: SummarizerLike | None,
    backend: FileBackend | None,
    emitter: EventEmitter | None,
    thread: str | None,
    requested: bool,
    force: bool = False,
) -> CallOptions:
    """``options`` with the keyword arguments an entry point was given one by one."""
    return CallOptions.merge(
        options,
        event=event,
        system=system,
        tools=tools,
        summarizer=summarizer,
        backend=backend,
        emitter=emitter,
        thread=thread,
        requested=requested,
        force=force,
    )


def _call_with_dicts(call_model: Any, view: list[Message]) -> Any:
    """``call_model`` given the view as OpenAI chat-completions dicts."""
    return call_model(to_openai(view))


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
            log.warning("ARS: event observer failed: %s", describe(exc))
