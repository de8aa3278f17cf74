"""``ArsMemory``: a LlamaIndex chat memory with ARS's two-level compression.

Storage layout in the chat store (one conversation = one ``chat_store_key``):

* ``<key>``: every message, exactly as ``put``/``set`` received it (the state
  messages). ARS never rewrites, trims or deletes them; ``get_all`` returns
  them untouched.
* ``<key>::ars_event``: an append-only log of ARS records, one
  ``ChatMessage(role="system")`` per L2 round with the record in
  ``additional_kwargs["ars_event"]``::

      {"ars_event_version": 1,
       "event": SummarizationEvent.to_dict(),       # cutoff, summary, anchor, file_path...
       "replaced": [{"index", "sha", "message"}]}    # tail trims, applied to the view only

  The last record is the current event; older ones stay as the chain of
  summaries. Keys holding ``::ars_`` are ARS's: a memory refuses one as its
  ``chat_store_key`` (a memory on ``alice::ars_event`` would read Alice's
  summary and forge her next view). A new process with the same store
  rebuilds the same view from it.
  The core checks the event's anchor against the stored messages on every
  call (:func:`ars_core.checkpoint.check_event`): after an edit a re-anchored
  event is appended, and when the summarized messages are gone a record with
  ``"event": null`` drops it. A corrupt record is skipped with a warning.

The stored messages are converted to core messages incrementally
(:class:`~ars_llamaindex.history.ChatHistory`): a call converts only what
changed since the last one, so its cost does not grow with the history.

``get`` (and ``aget``) returns the compressed view: effective messages
(summary + messages after the cutoff), L1 on a copy (large tool results moved
to files, huge ``write_file``/``edit_file`` arguments truncated), L2 when the
request is still too big — the new event is appended to the log before
``get`` returns. ``compact(force=True)`` is the forced path after the LLM
raised a context-length error.

With no ``summary_threshold`` configured, T is 85% of the agent's LLM's
``metadata.context_window`` (the memory's ``llm``, or the one
:meth:`ArsMemory.bind_agent` binds), else the default 100K.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.constants import DEFAULT_CONTEXT_WINDOW
from llama_index.core.llms import LLM
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY, BaseMemory
from llama_index.core.storage.chat_store import BaseChatStore, SimpleChatStore
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore

from ars_core import (
    AsyncSummarizer,
    CallOptions,
    CallOutcome,
    Compaction,
    CompressionEvent,
    CompressionRound,
    Compressor,
    ConfigError,
    Estimator,
    FileBackend,
    Message,
    SummarizationEvent,
    Summarizer,
    SummaryConfig,
    default_backend,
)
from ars_core.adapter import (
    CONFIG_FIELDS,
    EventEmitter,
    SummarizerLike,
    check_event,
    deliver_event,
    is_context_overflow,
    resolve_backend,
)

from .convert import system_text, to_core_messages, tool_schemas
from .eventlog import EVENT_KEY_SUFFIX, RESERVED_KEY_MARK, LoadedState, load_state, record_of
from .events import EventCallback, dispatch
from .history import ChatHistory
from .known_count import KNOWN_KEY_SUFFIX, KnownLog
from .provider_count import USAGE_KEY_SUFFIX, UsageLog
from .store import ChatStoreAdapter
from .summarizer import LLMSummarizer

__all__ = ["EVENT_KEY_SUFFIX", "ArsMemory", "CompactionRound"]

#: a system prompt as text or as a LlamaIndex message
SystemPrompt = str | ChatMessage | None

log = logging.getLogger("ars.llamaindex")


def _context_window(llm: LLM | None) -> int | None:
    """The LLM's input window, ``llm.metadata.context_window``; ``None`` when
    unknown, including LlamaIndex's placeholder ``DEFAULT_CONTEXT_WINDOW``
    (3,900), which is what an LLM reports when its window is not known."""
    if llm is None:
        return None
    try:
        window = llm.metadata.context_window
    except Exception as exc:  # a provider's metadata property may need settings it lacks
        log.warning("ARS: could not read the LLM's context window: %s", exc)
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        return None
    return None if window == DEFAULT_CONTEXT_WINDOW else window


@attrs.define
class CompactionRound(CompressionRound):
    """The core's :class:`~ars_core.CompressionRound` with the view as
    LlamaIndex messages: its stream events are held until the caller knows how
    the model call went (the forced path).

    ``view`` is what to send. Call :meth:`succeeded` after the model answered
    (delivers ``started``/``completed``), or :meth:`failed` when it raised
    (delivers ``started`` and a ``failed`` record instead of ``completed``);
    ``with round: ...`` does either.
    """

    view: list[ChatMessage] = attrs.field(kw_only=True)


class ArsMemory(BaseMemory):
    """Chat memory that stores everything and hands the model a compressed view.

    Build it with :meth:`from_defaults`. ``system_prompt`` and ``tools`` (the
    agent's, when known) count toward the request estimate;
    ``get(system_prompt=..., tools=...)`` overrides them for one call.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    chat_store: Any = Field(default_factory=SimpleChatStore)
    chat_store_key: str = Field(default=DEFAULT_CHAT_STORE_KEY)
    system_prompt: str | None = Field(default=None)

    _config: SummaryConfig = PrivateAttr()
    _compressor: Compressor = PrivateAttr()
    _files: FileBackend = PrivateAttr()
    _store: ChatStoreAdapter = PrivateAttr()
    _history: ChatHistory = PrivateAttr()
    _reread: bool = PrivateAttr(default=False)
    _tools: list[Any] | None = PrivateAttr(default=None)
    _summarizer_explicit: bool = PrivateAttr(default=False)
    _on_event: EventCallback | None = PrivateAttr(default=None)
    _is_overflow: Callable[[BaseException], bool] = PrivateAttr()
    _usage: UsageLog = PrivateAttr()
    _known_log: KnownLog = PrivateAttr()

    def __init__(
        self,
        *,
        chat_store: BaseChatStore | AsyncDBChatStore | None = None,
        chat_store_key: str = DEFAULT_CHAT_STORE_KEY,
        config: SummaryConfig | None = None,
        llm: LLM | None = None,
        summarizer: SummarizerLike | None = None,
        file_backend: FileBackend | str | None = None,
        estimator: Estimator | None = None,
        system_prompt: str | ChatMessage | None = None,
        tools: Sequence[Any] | None = None,
        on_event: EventCallback | None = None,
        is_overflow: Callable[[BaseException], bool] = is_context_overflow,
    ) -> None:
        if not isinstance(chat_store_key, str) or RESERVED_KEY_MARK in chat_store_key:
            raise ConfigError(
                "chat_store_key",
                chat_store_key,
                f"keys holding {RESERVED_KEY_MARK!r} are ARS's own (a conversation's event "
                f"log is <key>{EVENT_KEY_SUFFIX}); choose another key",
            )
        store = chat_store if chat_store is not None else SimpleChatStore()
        super().__init__(  # type: ignore[call-arg]  # pydantic fields of this class
            chat_store=store,
            chat_store_key=chat_store_key,
            system_prompt=system_text(system_prompt),
        )
        self._store = ChatStoreAdapter(store)
        self._history = ChatHistory()  # the stored messages converted, incrementally
        self._usage = UsageLog(self._store, f"{chat_store_key}{USAGE_KEY_SUFFIX}")
        self._known_log = KnownLog(self._store, f"{chat_store_key}{KNOWN_KEY_SUFFIX}")
        self._config = config or SummaryConfig()
        # a URL or a registered name resolves through the plugin registry
        root: FileBackend = resolve_backend(file_backend) or default_backend()
        scoped = getattr(root, "scoped", None)
        self._files = scoped(chat_store_key) if callable(scoped) else root  # one scope per key
        self._summarizer_explicit = summarizer is not None or llm is not None
        if summarizer is None and llm is not None:
            summarizer = LLMSummarizer(llm, estimator=estimator)
        self._compressor = Compressor(
            self._config,
            estimator=estimator,
            backend=self._files,
            summarizer=summarizer,
            is_overflow=is_overflow,
        )
        self._follow_model(llm)
        self._tools = tool_schemas(tools)
        self._on_event = on_event
        self._is_overflow = is_overflow

    @classmethod
    def class_name(cls) -> str:
        return "ArsMemory"

    @classmethod
    def from_defaults(
        cls,
        chat_history: list[ChatMessage] | None = None,
        llm: LLM | None = None,
        *,
        chat_store: BaseChatStore | AsyncDBChatStore | None = None,
        chat_store_key: str = DEFAULT_CHAT_STORE_KEY,
        config: SummaryConfig | Mapping[str, Any] | Any = None,
        summarizer: SummarizerLike | None = None,
        file_backend: FileBackend | str | None = None,
        estimator: Estimator | None = None,
        system_prompt: str | ChatMessage | None = None,
        tools: Sequence[Any] | None = None,
        on_event: EventCallback | None = None,
        **config_fields: Any,
    ) -> ArsMemory:
        """Build a memory.

        ``config`` is a :class:`~ars_core.SummaryConfig`, or a mapping / agent
        Context object with ``summary_*`` fields; ``summary_*``
        keyword arguments override single fields. ``llm`` is the summary model
        (LlamaIndex ``LLM``; pass the agent's own, or let :class:`ArsFunctionAgent`
        bind it); ``summarizer`` any core summarizer instead; with neither, the
        deterministic extractive summarizer. ``file_backend`` is a core file
        backend or an fsspec URL (default: :func:`ars_core.default_backend`, the
        folder ``.ars`` in the current directory or ``ARS_FILES_DIR``); it is
        scoped to ``chat_store_key``. ``on_event(payload)`` receives every
        compression event's ``to_dict()``.
        """
        unknown = set(config_fields) - set(CONFIG_FIELDS)
        if unknown:
            raise TypeError(f"unknown ArsMemory.from_defaults arguments: {sorted(unknown)}")
        if isinstance(config, SummaryConfig):
            cfg = attrs.evolve(config, **config_fields) if config_fields else config
        else:
            base = SummaryConfig.from_context(config) if config is not None else SummaryConfig()
            cfg = attrs.evolve(base, **config_fields) if config_fields else base
        memory = cls(
            chat_store=chat_store,
            chat_store_key=chat_store_key,
            config=cfg,
            llm=llm,
            summarizer=summarizer,
            file_backend=file_backend,
            estimator=estimator,
            system_prompt=system_prompt,
            tools=tools,
            on_event=on_event,
        )
        if chat_history is not None:
            memory.set(chat_history)
        return memory

    # ------------------------------------------------------------ properties

    @property
    def config(self) -> SummaryConfig:
        return self._config

    @property
    def compressor(self) -> Compressor:
        return self._compressor

    @property
    def files(self) -> FileBackend:
        """The file backend of this conversation (scoped to ``chat_store_key``)."""
        return self._files

    def read_tool(self) -> Any:
        """A ``read_ars_file(path, offset, limit)`` ``FunctionTool`` for the agent: it
        reads this conversation's offloaded results and archives back, a page of
        lines at a time (:mod:`ars_llamaindex.readback`). Give it to the agent with
        its other tools: ``ArsFunctionAgent(tools=[*tools, memory.read_tool()])``."""
        from .readback import make_read_tool

        return make_read_tool(self._files)

    @property
    def summarizer(self) -> Summarizer | AsyncSummarizer:
        return self._compressor.summarizer

    @property
    def tools(self) -> list[Any] | None:
        """Tool schemas counted in the estimate."""
        return self._tools

    @property
    def event_key(self) -> str:
        return self.chat_store_key + EVENT_KEY_SUFFIX

    def is_context_length_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the LLM saying the request is too long."""
        return self._is_overflow(exc)

    def bind_agent(
        self,
        *,
        llm: LLM | None = None,
        system_prompt: str | None = None,
        tools: Sequence[Any] | None = None,
    ) -> None:
        """Fill in what the agent knows and the memory was not given: the
        summary model (the agent's own LLM), the system prompt and the tool
        schemas counted in the estimate."""
        if llm is not None:  # T follows the agent's model, unless summary_threshold is set
            self._follow_model(llm)
        if llm is not None and not self._summarizer_explicit:
            self._compressor.summarizer = LLMSummarizer(llm, estimator=self._compressor.estimator)
            self._summarizer_explicit = True
        if system_prompt is not None and self.system_prompt is None:
            self.system_prompt = system_prompt
        if tools is not None and self._tools is None:
            self._tools = tool_schemas(tools)

    def _follow_model(self, llm: LLM | None) -> None:
        """T from ``llm.metadata.context_window`` when ``summary_threshold`` is not set."""
        self._compressor.follow_model(self._config, _context_window(llm))

    # ------------------------------------------------------------ state

    def _converted(self, stored: list[ChatMessage]) -> tuple[list[Message], list[ChatMessage]]:
        """The stored messages as core messages, converting only what changed."""
        # an edit is seen by the engine itself (it recounts any history that is not the
        # last one plus appended messages): nothing to tell it
        return self._history.update(stored)

    def _known(self) -> list[ChatMessage]:
        # a database store reads only the rows after the messages read last time, unless
        # this memory replaced or deleted them since (then every row is read once)
        if self._reread or not self._store.is_async:
            self._reread = False
            return []
        return self._history.known()

    def _load(self) -> LoadedState:
        core, chat = self._converted(self._store.peek(self.chat_store_key, self._known()))
        core = self._usage.apply(core)  # the last answer's usage stamp (provider_count)
        core = self._known_log.apply(core)  # its known size (known_count)
        return load_state(chat, core, self._store.peek(self.event_key), self.chat_store_key)

    async def _aload(self) -> LoadedState:
        stored = await self._store.apeek(self.chat_store_key, self._known())
        core, chat = self._converted(stored)
        core = await self._known_log.aapply(await self._usage.aapply(core))
        return load_state(chat, core, await self._store.apeek(self.event_key), self.chat_store_key)

    def _deliver(self, event: CompressionEvent) -> None:
        # the core's delivery (plugin observers too), with the instrumentation dispatch as emitter
        deliver_event(event, lambda e: dispatch(e, self.chat_store_key, self._on_event))

    def _extras(
        self, system_prompt: SystemPrompt, tools: Sequence[Any] | None
    ) -> tuple[str | None, list[Any] | None]:
        system = system_text(system_prompt) if system_prompt is not None else self.system_prompt
        schemas = tool_schemas(tools) if tools is not None else self._tools
        return system, schemas

    def _options(
        self,
        state: LoadedState,
        system_prompt: SystemPrompt,
        tools: Sequence[Any] | None,
        *,
        force: bool = False,
        emitter: EventEmitter | None = None,
    ) -> CallOptions:
        """What the engine gets for a round or a compaction, sync or async."""
        system, schemas = self._extras(system_prompt, tools)
        return CallOptions(
            event=state.event,
            system=system,
            tools=schemas,
            force=force,
            emitter=emitter,
            thread=self.chat_store_key,
        )

    def _round(
        self, state: LoadedState, outcome: CallOutcome, options: CallOptions
    ) -> CompactionRound:
        self._usage.sent(outcome, options.system, options.tools)  # what a usage measures
        self._known_log.keep(outcome, len(state.core))  # the answer lands after them
        return CompactionRound(
            outcome,
            deliver=self._deliver,
            view=self._history.back_all(outcome.view),
        )

    # ------------------------------------------------------------ rounds

    def compact_round(
        self,
        *,
        force: bool = False,
        system_prompt: SystemPrompt = None,
        tools: Sequence[Any] | None = None,
    ) -> CompactionRound:
        """Build the view (persisting a new event, if any) and hold its stream
        events back; see :class:`CompactionRound`."""
        state = self._load()
        options = self._options(state, system_prompt, tools, force=force)
        # the events are held: the CompactionRound delivers them after the model call
        outcome = self._compressor.compact(state.core, hold_events=True, options=options)
        rnd = self._round(state, outcome, options)
        with rnd.failing():  # the event could not be persisted: the round failed
            if (record := record_of(state, rnd.outcome)) is not None:
                self._store.add(self.event_key, [record])
        self._known_log.write()
        return rnd

    async def acompact_round(
        self,
        *,
        force: bool = False,
        system_prompt: SystemPrompt = None,
        tools: Sequence[Any] | None = None,
    ) -> CompactionRound:
        """Async twin of :meth:`compact_round` (archive and summary run concurrently)."""
        state = await self._aload()
        options = self._options(state, system_prompt, tools, force=force)
        outcome = await self._compressor.acompact(state.core, hold_events=True, options=options)
        rnd = self._round(state, outcome, options)
        with rnd.failing():
            if (record := record_of(state, rnd.outcome)) is not None:
                await self._store.aadd(self.event_key, [record])
        await self._known_log.awrite()
        return rnd

    def compact(
        self,
        *,
        force: bool = False,
        system_prompt: SystemPrompt = None,
        tools: Sequence[Any] | None = None,
    ) -> list[ChatMessage]:
        """The compressed view; ``force=True`` runs L2 now (after a
        context-length error). Events are delivered at once."""
        rnd = self.compact_round(force=force, system_prompt=system_prompt, tools=tools)
        rnd.succeeded()
        return rnd.view

    async def acompact(
        self,
        *,
        force: bool = False,
        system_prompt: SystemPrompt = None,
        tools: Sequence[Any] | None = None,
    ) -> list[ChatMessage]:
        """Async twin of :meth:`compact`."""
        rnd = await self.acompact_round(force=force, system_prompt=system_prompt, tools=tools)
        rnd.succeeded()
        return rnd.view

    def compact_now(
        self, *, system_prompt: SystemPrompt = None, tools: Sequence[Any] | None = None
    ) -> Compaction:
        """Run an L2 round now, whatever the size (between turns, on demand):
        the older messages are archived and summarized, the latest
        ``summary_keep_messages`` kept, and the event is appended to the log, so
        the next ``get`` returns the summary and the kept messages. Events are
        delivered at once. With nothing to summarize nothing changes and the
        result says so (``compacted`` is false)."""
        state = self._load()
        result = self._compressor.compact_now(
            state.core, options=self._now_options(state, system_prompt, tools)
        )
        if (record := record_of(state, result.outcome)) is not None:
            self._store.add(self.event_key, [record])
        return result

    async def acompact_now(
        self, *, system_prompt: SystemPrompt = None, tools: Sequence[Any] | None = None
    ) -> Compaction:
        """Async twin of :meth:`compact_now` (archive and summary run concurrently)."""
        state = await self._aload()
        options = self._now_options(state, system_prompt, tools)
        result = await self._compressor.acompact_now(state.core, options=options)
        if (record := record_of(state, result.outcome)) is not None:
            await self._store.aadd(self.event_key, [record])
        return result

    def _now_options(
        self, state: LoadedState, system_prompt: SystemPrompt, tools: Sequence[Any] | None
    ) -> CallOptions:
        """An on-demand round's options: its events are delivered at once."""
        emitter: EventEmitter = lambda e: dispatch(e, self.chat_store_key, self._on_event)  # noqa: E731
        return self._options(state, system_prompt, tools, emitter=emitter)

    # ------------------------------------------------------------ BaseMemory

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The compressed view for the next model call.

        Accepts ``system_prompt=`` and ``tools=`` to count in the estimate.
        """
        return self.compact(system_prompt=kwargs.get("system_prompt"), tools=kwargs.get("tools"))

    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        return await self.acompact(
            system_prompt=kwargs.get("system_prompt"), tools=kwargs.get("tools")
        )

    def get_all(self) -> list[ChatMessage]:
        """Every stored message, untouched (nothing is ever deleted by ARS)."""
        return self._store.get(self.chat_store_key)

    async def aget_all(self) -> list[ChatMessage]:
        return await self._store.aget(self.chat_store_key)

    def record_usage(self, answer: ChatMessage, input_tokens: int | None) -> None:
        """The provider counted ``input_tokens`` for the request built from the view this
        memory returned last, answered by ``answer``: kept for the next view's sizing
        (see :mod:`ars_llamaindex.provider_count`)."""
        self._usage.record(answer, input_tokens, self._compressor.estimator)

    async def arecord_usage(self, answer: ChatMessage, input_tokens: int | None) -> None:
        await self._usage.arecord(answer, input_tokens, self._compressor.estimator)

    def put(self, message: ChatMessage) -> None:
        self._store.add(self.chat_store_key, [message])

    async def aput(self, message: ChatMessage) -> None:
        await self._store.aadd(self.chat_store_key, [message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        self._store.add(self.chat_store_key, messages)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        await self._store.aadd(self.chat_store_key, messages)

    def _keeps_event(self, new: list[ChatMessage], records: list[ChatMessage]) -> bool:
        state = load_state(new, to_core_messages(new), records, self.chat_store_key)
        return check_event(state.core, state.event).event is not None

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the history. The summary event survives when the messages it
        summarizes are still there (it is re-anchored on the next ``get``);
        otherwise its log is dropped."""
        records = self._store.get(self.event_key)
        keep = bool(records) and self._keeps_event(messages, records)
        self._store.set(self.chat_store_key, messages)
        self._reread = True
        if records and not keep:
            self._store.delete(self.event_key)

    async def aset(self, messages: list[ChatMessage]) -> None:
        records = await self._store.aget(self.event_key)
        keep = bool(records) and self._keeps_event(messages, records)
        await self._store.aset(self.chat_store_key, messages)
        self._reread = True
        if records and not keep:
            await self._store.adelete(self.event_key)

    def reset(self) -> None:
        """Delete the conversation and its event log (files are kept)."""
        self._store.delete(self.chat_store_key)
        self._reread = True
        self._store.delete(self.event_key)
        self._usage.forget()
        self._known_log.forget()

    async def areset(self) -> None:
        await self._store.adelete(self.chat_store_key)
        self._reread = True
        await self._store.adelete(self.event_key)
        self._usage.forget()
        self._known_log.forget()

    # ------------------------------------------------------------ inspection

    def get_event(self) -> SummarizationEvent | None:
        """The current summarization event, if it still matches the history."""
        state = self._load()
        return check_event(state.core, state.event).event

    async def aget_event(self) -> SummarizationEvent | None:
        state = await self._aload()
        return check_event(state.core, state.event).event
