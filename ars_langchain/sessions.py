"""The LangChain adapter's sessions and state: what it remembers per thread, and
what it writes back to the agent's state.

* :class:`ArsState`, :data:`EVENT_KEY`, :data:`COMPACT_REQUEST_KEY`: ARS's
  private state keys (kept in the checkpoint, absent from ``invoke()`` output);
  :func:`event_to_state` / :func:`event_from_state` convert the event.
* :class:`Session`: one thread's (and graph namespace's) engine, converter and
  cached event, system message and tool schemas.
* :class:`Call`: what one model call (or compaction) gives the engine
  (:meth:`Call.options`), and :meth:`Call.state_update`: the state values
  persisting the engine's :class:`~ars_core.StateUpdate`.
* :class:`Sessions`: the bounded registry of sessions, the configuration each
  call runs with (:meth:`Sessions.config_for`) and the main model's last
  usage per thread.

The middleware (:mod:`ars_langchain.middleware`) and the on-demand compaction
(:mod:`ars_langchain.compaction`) both use these public methods.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired, Protocol

from langchain.agents.middleware.types import AgentState, PrivateStateAttr
from langchain_core.messages import BaseMessage
from langgraph.config import get_config

from ars_core import (
    ArsError,
    CallOptions,
    Compressor,
    Estimator,
    Message,
    StateUpdate,
    SummarizationEvent,
    SummaryConfig,
)
from ars_core.adapter import (
    CONFIG_FIELDS,
    MARK_SUMMARY,
    CallableEstimator,
    EstimatorLike,
    EventEmitter,
    OverflowClassifier,
    SummarizerLike,
)

from .convert import from_core, to_core
from .history import HistoryConverter
from .passthrough import Passthrough

__all__ = [
    "COMPACT_REQUEST_KEY",
    "EVENT_KEY",
    "SCOPE_FIELD",
    "ArsState",
    "Call",
    "Session",
    "SessionSettings",
    "Sessions",
    "event_from_state",
    "event_to_state",
    "file_scope",
    "model_window",
    "scope_parts",
]

log = logging.getLogger("ars.langchain")

#: the private state key of the L2 event (shared with deepagents' middleware)
EVENT_KEY = "_summarization_event"
#: the Context field naming a file scope other than the thread id
SCOPE_FIELD = "ars_file_scope"
#: the private state key the compaction tool sets: the next model call runs an L2 round first
COMPACT_REQUEST_KEY = "_ars_compaction_requested"

_DEFAULT_CONFIG = SummaryConfig()


def _latest_request(current: bool | None, new: bool | None) -> bool | None:
    """The compaction request's reducer: the latest write wins, and several
    ``compact_conversation`` calls of one model message (run in one step) are one
    request instead of LangGraph's ``InvalidUpdateError`` for a second write."""
    return new


class ArsState(AgentState[Any]):
    """Agent state with ARS's private event (kept in the checkpoint, not in the output)."""

    _summarization_event: Annotated[NotRequired[dict[str, Any] | None], PrivateStateAttr]
    _ars_compaction_requested: Annotated[
        NotRequired[bool | None], PrivateStateAttr, _latest_request
    ]


def event_to_state(event: SummarizationEvent) -> dict[str, Any]:
    """The event as stored in state: a plain JSON dict."""
    return event.to_dict()


def event_from_state(raw: Any) -> SummarizationEvent | None:
    """Read ``_summarization_event`` from state: ARS's dict, or deepagents' layout
    (``cutoff_index`` + a LangChain ``summary_message``)."""
    if not raw:
        return None
    if isinstance(raw, SummarizationEvent):
        return raw
    if not isinstance(raw, Mapping):
        log.warning("ARS: ignoring a malformed %s of type %s", EVENT_KEY, type(raw).__name__)
        return None
    data = dict(raw)
    summary = data.get("summary_message")
    if isinstance(summary, BaseMessage):
        core = to_core(summary)
        data["summary_message"] = core.with_content(core.content, **{MARK_SUMMARY: True})
    if "cutoff" not in data and "cutoff_index" in data:
        data["cutoff"] = data["cutoff_index"]
    try:
        return SummarizationEvent.from_dict(data)
    except ArsError as exc:
        log.warning("ARS: ignoring a malformed %s: %s", EVENT_KEY, exc)
        return None


def model_window(model: Any) -> int | None:
    """The main model's input window: ``model.profile["max_input_tokens"]``
    (langchain-core's model profile), ``None`` when the model has no profile
    or the profile does not say."""
    profile = getattr(model, "profile", None)
    if not isinstance(profile, Mapping):
        return None
    window = profile.get("max_input_tokens")
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        return None
    return window


def file_scope(context: Any, thread: str) -> str:
    """The file scope of a call: the context's ``ars_file_scope``, else the thread id."""
    return str(_config_value(context, SCOPE_FIELD) or thread)


def _config_value(context: Any, name: str) -> Any:
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(name)
    return getattr(context, name, None)


def scope_parts() -> tuple[str, str]:
    """``(thread_id, namespace)`` of the current run; task ids are dropped from the
    last namespace segment (it changes every step) so a thread's calls share a session."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:
        return "default", ""
    thread = str(configurable.get("thread_id") or "default")
    ns = str(configurable.get("checkpoint_ns") or "")
    parts = ns.split("|") if ns else []
    if parts:
        parts[-1] = parts[-1].split(":", 1)[0]
    return thread, "|".join(parts)


@dataclass
class Session:
    """What the middleware remembers about one thread (and graph namespace)."""

    compressor: Compressor
    converter: HistoryConverter = field(default_factory=HistoryConverter)
    #: the history last measured for a call sent as it came (no conversion)
    passthrough: Passthrough = field(default_factory=Passthrough)
    lock: threading.Lock = field(default_factory=threading.Lock)
    event_raw: Any = None
    event: SummarizationEvent | None = None
    system_src: Any = None
    system: Message | None = None
    tools_key: tuple[int, ...] = ()
    tools: list[Any] = field(default_factory=list)
    configured: SummaryConfig | None = None  # the config before T follows the model
    window: int | None = None  # the main model's input window it followed
    model: Any = None  # the main model of the last call (summarizes for compact_now)
    agent_tools: Sequence[Any] = ()  # the agent's tools of the last call (its file backend)


@dataclass
class Call:
    """One model call (or on-demand compaction) of a session."""

    session: Session
    messages: Sequence[Message]
    event: SummarizationEvent | None
    system: Message | None
    tools: list[Any]
    summarizer: SummarizerLike | None
    backend: Any
    thread: str
    requested: bool = False  # the compaction tool asked for an L2 round
    request: Any = None  # the model request, without tools the agent does not need
    converted: bool = True  # whether ``messages`` are the request's (else not converted yet)
    known: Any = None  # a request sent as it came decided by its known size (KnownRequest)

    def options(self, emitter: EventEmitter) -> CallOptions:
        """What the engine gets for this call (``call``, ``compact_now``...)."""
        return CallOptions(
            event=self.event,
            system=self.system,
            tools=self.tools,
            summarizer=self.summarizer,
            backend=self.backend,
            emitter=emitter,
            thread=self.thread,
            requested=self.requested,
        )

    def state_update(self, update: StateUpdate | None) -> dict[str, Any]:
        """The state values persisting ``update`` (and clearing a compaction request)."""
        values: dict[str, Any] = {COMPACT_REQUEST_KEY: None} if self.requested else {}
        if update is None or (update.event is None and not update.clear_event):
            return values
        # a new or re-anchored event, or None: the stored one no longer matched the history
        event_dict = event_to_state(update.event) if update.event is not None else None
        values[EVENT_KEY] = event_dict
        replaced: list[BaseMessage] = []
        for index, message in update.replaced:
            lc = from_core(message)
            if lc.id is None:  # add_messages can only replace by id
                log.warning(
                    "ARS: overflow tail trim: message %d has no id; its trimmed form is not "
                    "persisted",
                    index,
                )
                continue
            replaced.append(lc)
        if replaced:
            values["messages"] = replaced
        with self.session.lock:  # the next call reads this dict back from state
            self.session.event_raw = event_dict
            self.session.event = update.event
        return values


class SessionSettings(Protocol):
    """What :class:`Sessions` reads from its middleware (at each use, so a
    changed attribute takes effect)."""

    config: SummaryConfig | None
    use_context: bool
    estimator: EstimatorLike | Callable[[], Estimator] | None
    is_overflow: OverflowClassifier
    compressor_options: dict[str, Any]
    max_sessions: int


class Sessions:
    """The sessions of one middleware, at most ``settings.max_sessions`` of them
    (the least recently used go first), and the main model's last usage per thread."""

    def __init__(self, settings: SessionSettings) -> None:
        self.settings = settings
        self.lock = threading.Lock()
        self.by_key: OrderedDict[tuple[str, str], Session] = OrderedDict()
        self._config_cache: tuple[tuple[Any, ...], SummaryConfig] | None = None
        self._last_usage: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def config_for(self, context: Any) -> SummaryConfig:
        """The configured fields: ``config``, overridden by the context's ``summary_*``."""
        base = self.settings.config
        if not self.settings.use_context or context is None:
            return base or _DEFAULT_CONFIG
        values = tuple(_config_value(context, f) for f in CONFIG_FIELDS)
        if all(v is None for v in values):
            return base or _DEFAULT_CONFIG
        cached = self._config_cache
        if cached is not None and cached[0] == (id(base), *values):
            return cached[1]
        merged = (base or _DEFAULT_CONFIG).to_dict()
        merged.update({f: v for f, v in zip(CONFIG_FIELDS, values, strict=False) if v is not None})
        config = SummaryConfig(**merged)
        self._config_cache = ((id(base), *values), config)
        return config

    def known(self, key: tuple[str, str]) -> Session | None:
        """The session of ``(thread, namespace)`` when there is one, untouched."""
        with self.lock:
            return self.by_key.get(key)

    def get(self, key: tuple[str, str], config: SummaryConfig, window: int | None) -> Session:
        """The session of ``(thread, namespace)``, made on first use; its engine
        runs ``config`` with T following the main model's ``window``."""
        with self.lock:
            session = self.by_key.get(key)
            if session is None:
                session = self._new(config)
                self.by_key[key] = session
                while len(self.by_key) > self.settings.max_sessions:
                    self.by_key.popitem(last=False)
            else:
                self.by_key.move_to_end(key)
            if session.configured is not config or session.window != window:
                # T follows the main model's input window unless summary_threshold is set
                session.compressor.follow_model(config, window)
                session.configured, session.window = config, window
            return session

    def _new(self, config: SummaryConfig) -> Session:
        converter = HistoryConverter()
        compressor = Compressor(
            config,
            estimator=self._new_estimator(converter),
            is_overflow=self.settings.is_overflow,
            **self.settings.compressor_options,
        )
        return Session(compressor=compressor, converter=converter)

    def _new_estimator(self, converter: HistoryConverter) -> EstimatorLike | None:
        """The estimator of a new session: names and classes are built per session by the
        core; a zero-argument factory is called; a LangChain ``token_counter``
        (``messages -> int``) counts the request as LangChain messages: the agent's own
        objects where the session's ``converter`` made the core ones (a count converts
        only what ARS changed or added, not the whole history)."""
        est: Any = self.settings.estimator
        if est is None or isinstance(est, str | type):
            return est  # the core default / resolves it, one per session
        if isinstance(est, Estimator) or not callable(est):
            value: EstimatorLike = est  # an instance (shared), or a bad value the core rejects
            return value
        if _takes_no_arguments(est):
            made: Estimator = est()
            return made
        counter: Callable[[list[BaseMessage]], int] = est
        return CallableEstimator(
            lambda messages: int(counter(converter.back_all(messages))),
            name=f"callable:{getattr(counter, '__qualname__', type(counter).__name__)}",
        )

    def record_usage(self, thread: str, record: dict[str, Any]) -> None:
        """Keep ``record`` as ``thread``'s last main-model usage."""
        with self.lock:
            self._last_usage[thread] = record
            self._last_usage.move_to_end(thread)
            while len(self._last_usage) > self.settings.max_sessions:
                self._last_usage.popitem(last=False)

    def last_usage(self, thread: str) -> dict[str, Any] | None:
        """``thread``'s last main-model usage record, if any."""
        return self._last_usage.get(thread)


def _takes_no_arguments(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` can be called with no argument (an estimator factory), as opposed
    to a token counter taking the messages."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    try:
        signature.bind()
    except TypeError:
        return False
    return True
