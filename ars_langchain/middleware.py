"""``ArsSummarizationMiddleware``: ARS for LangChain v1 agents and LangGraph.

Add one middleware to ``langchain.agents.create_agent`` (or deepagents'
``create_deep_agent``) and every model call goes through
:class:`ars_core.Compressor`:

* below the entry threshold the model gets the effective messages and the
  middleware returns the model response unchanged;
* L1 trims a copy of the request; L2 summarizes older history and
  persists its event by returning ``ExtendedModelResponse(response,
  Command(update={"_summarization_event": {...}}))`` - state messages are
  never rewritten, except the tail messages trimmed under overflow,
  which are replaced *by id* so the next checkpoint matches what was sent;
* a ``ContextOverflowError`` (langchain-core's) or a provider 400/413
  "prompt is too long" error from the model is the forced-compression signal;
* ``started``/``completed``/``failed`` events go to the custom stream.

The event is a plain JSON dict (:meth:`ars_core.SummarizationEvent.to_dict`)
under the private state key ``_summarization_event``: kept in the checkpoint,
absent from ``invoke()`` output. deepagents' own summarization middleware uses
the same key with another layout, so the two must not run in one agent: this
middleware's ``name`` is ``"SummarizationMiddleware"``, which makes
``create_deep_agent(middleware=[ArsSummarizationMiddleware(...)])`` *replace*
deepagents' built-in one in place (and in the general-purpose sub-agent). An
event left by deepagents (``cutoff_index``) is read as a starting point.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
    ToolCallRequest,
)
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.config import get_config
from langgraph.types import Command

from ars_core import (
    ArsError,
    CallOptions,
    CallOutcome,
    CompressionEvent,
    Compressor,
    ConfigError,
    Estimator,
    Message,
    StateUpdate,
    SummarizationEvent,
    SummaryConfig,
    Usage,
    is_context_overflow,
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

from .backends import READ_TOOL_ARGS, BackendResolver, BackendSource
from .convert import HistoryConverter, from_core, to_core, tool_schemas
from .stream import stream_writer_emitter
from .summarizer import ChatModel, ChatModelSummarizer

__all__ = [
    "COMPACT_REQUEST_KEY",
    "EVENT_KEY",
    "ArsState",
    "ArsSummarizationMiddleware",
    "event_from_state",
    "event_to_state",
]

log = logging.getLogger("ars.langchain")

#: the private state key of the L2 event (shared with deepagents' middleware, see the module doc)
EVENT_KEY = "_summarization_event"
#: the Context field naming a file scope other than the thread id
SCOPE_FIELD = "ars_file_scope"
#: the private state key the compaction tool sets: the next model call runs an L2 round first
COMPACT_REQUEST_KEY = "_ars_compaction_requested"


class ArsState(AgentState[Any]):
    """Agent state with ARS's private event (kept in the checkpoint, not in the output)."""

    _summarization_event: Annotated[NotRequired[dict[str, Any] | None], PrivateStateAttr]
    _ars_compaction_requested: Annotated[NotRequired[bool | None], PrivateStateAttr]


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


_DEFAULT_CONFIG = SummaryConfig()


def _model_window(model: Any) -> int | None:
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


def _file_scope(context: Any, thread: str) -> str:
    """The file scope of a call: the context's ``ars_file_scope``, else the thread id."""
    return str(_config_value(context, SCOPE_FIELD) or thread)


def _config_value(context: Any, name: str) -> Any:
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(name)
    return getattr(context, name, None)


def _scope_parts() -> tuple[str, str]:
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
class _Session:
    """What the middleware remembers about one thread (and graph namespace)."""

    compressor: Compressor
    converter: HistoryConverter = field(default_factory=HistoryConverter)
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
class _Call:
    session: _Session
    messages: list[Message]
    event: SummarizationEvent | None
    system: Message | None
    tools: list[Any]
    summarizer: SummarizerLike | None
    backend: Any
    thread: str
    requested: bool = False  # the compaction tool asked for an L2 round

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


class ArsSummarizationMiddleware(AgentMiddleware[ArsState, Any]):
    """Two-level context compression (ARS) as a LangChain agent middleware.

    ``config`` fixes the five ``summary_*`` fields; when it is ``None``
    they come from the runtime context of each run (``context_schema`` with
    ``summary_*`` attributes, or a mapping), falling back to the defaults.
    Context fields always override ``config`` when ``use_context`` is true.

    ``model`` is the summary model; ``None`` uses the agent's current main
    model (``request.model``). ``summarizer`` replaces the model with any core
    summarizer. ``backend`` is where files go: a core backend, a deepagents
    ``BackendProtocol`` (files land where the agent's ``read_file`` reads), or
    a factory called with the runtime; default: an in-memory fsspec backend.
    An unscoped fsspec backend is scoped to the thread id. A
    ``file_backend`` field of the runtime context wins over all of these.

    ``on_event`` receives every compression event (they also go to the custom
    stream when ``stream`` is true); ``on_summary_usage`` the summary call's
    usage; ``on_model_usage`` the main model's ``usage_metadata`` after each
    call, with the estimate that preceded it (see :meth:`last_usage`).

    With no ``summary_threshold`` configured, T is 85% of the main model's
    ``profile["max_input_tokens"]`` when the profile says, else 100K.
    ``compaction_tool=True`` gives the agent the ``compact_conversation`` tool:
    calling it makes the next model call run an L2 round first (see
    :mod:`ars_langchain.compaction`, which also has ``compact_now`` for
    applications).
    """

    state_schema = ArsState

    def __init__(
        self,
        config: SummaryConfig | Mapping[str, Any] | None = None,
        *,
        model: ChatModel | None = None,
        summarizer: SummarizerLike | None = None,
        backend: BackendSource | None = None,
        estimator: EstimatorLike | Callable[[], Estimator] | None = None,
        on_event: EventEmitter | None = None,
        on_summary_usage: Callable[[Usage], None] | None = None,
        on_model_usage: Callable[[dict[str, Any]], None] | None = None,
        is_overflow: OverflowClassifier = is_context_overflow,
        use_context: bool = True,
        stream: bool = True,
        name: str = "SummarizationMiddleware",
        max_sessions: int = 256,
        compressor_options: Mapping[str, Any] | None = None,
        compaction_tool: bool = False,
        _resolver: BackendResolver | None = None,
    ) -> None:
        super().__init__()
        if isinstance(config, Mapping):
            config = SummaryConfig.from_context(config)
        self.config = config
        self.model = model
        self.summarizer = summarizer
        self.estimator = estimator
        self.on_event = on_event
        self.on_summary_usage = on_summary_usage
        self.on_model_usage = on_model_usage
        self.is_overflow = is_overflow
        self.use_context = use_context
        self.stream = stream
        self.max_sessions = max_sessions
        self.compressor_options = dict(compressor_options or {})
        self.compaction_tool = compaction_tool
        if compaction_tool:  # the agent can ask for an L2 round (deepagents' tool name)
            from .compaction import make_compaction_tool

            self.tools = [make_compaction_tool(self)]
        else:
            self.tools = []
        self._name = name
        self._resolver = _resolver or BackendResolver(backend)
        self._sessions: OrderedDict[tuple[str, str], _Session] = OrderedDict()
        self._sessions_lock = threading.Lock()
        self._config_cache: tuple[tuple[Any, ...], SummaryConfig] | None = None
        self._last_usage: OrderedDict[str, dict[str, Any]] = OrderedDict()

    # ------------------------------------------------------------ factories

    @property
    def name(self) -> str:
        return self._name

    @classmethod
    def from_context(
        cls, context: Any, *, model: Any = None, **kwargs: Any
    ) -> ArsSummarizationMiddleware:
        """Build from a Context object's ``summary_*`` fields and the main model
        (``model=None``: the agent's current main model at call time)."""
        return cls(SummaryConfig.from_context(context), model=model, **kwargs)

    def for_subagent(
        self, *, model: Any = None, config: SummaryConfig | None = None, name: str | None = None
    ) -> ArsSummarizationMiddleware:
        """The middleware of a sub-agent: same config, backend, estimator
        and callbacks; the sub-agent's own main model summarizes unless ``model``
        is given. Runs with the parent's ``thread_id`` share the parent's file scope."""
        return type(self)(
            config if config is not None else self.config,
            model=model if model is not None else self.model,
            summarizer=self.summarizer,
            estimator=self.estimator,
            on_event=self.on_event,
            on_summary_usage=self.on_summary_usage,
            on_model_usage=self.on_model_usage,
            is_overflow=self.is_overflow,
            use_context=self.use_context,
            stream=self.stream,
            name=name or self._name,
            max_sessions=self.max_sessions,
            compressor_options=self.compressor_options,
            compaction_tool=self.compaction_tool,
            _resolver=self._resolver,
        )

    # ------------------------------------------------------------ introspection

    def last_usage(self, thread_id: str = "default") -> dict[str, Any] | None:
        """The main model's last provider-reported ``usage_metadata`` on a thread
        (sub-agents included), with ARS's estimate of the request that produced it
        (calibration data): ``{"usage_metadata", "estimated_tokens", "view_messages"}``."""
        return self._last_usage.get(thread_id)

    # ------------------------------------------------------------ per-call setup

    def _config_for(self, context: Any) -> SummaryConfig:
        """The configured fields: ``config``, overridden by the context's ``summary_*``."""
        base = self.config
        if not self.use_context or context is None:
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

    def _new_estimator(self, converter: HistoryConverter) -> EstimatorLike | None:
        """The estimator of a new session: names and classes are built per session by the
        core; a zero-argument factory is called; a LangChain ``token_counter``
        (``messages -> int``) counts the request as LangChain messages: the agent's own
        objects where the session's ``converter`` made the core ones (a count converts
        only what ARS changed or added, not the whole history)."""
        est: Any = self.estimator
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

    def _session(self, key: tuple[str, str], config: SummaryConfig, window: int | None) -> _Session:
        with self._sessions_lock:
            session = self._sessions.get(key)
            if session is None:
                converter = HistoryConverter()
                compressor = Compressor(
                    config,
                    estimator=self._new_estimator(converter),
                    is_overflow=self.is_overflow,
                    **self.compressor_options,
                )
                session = _Session(compressor=compressor, converter=converter)
                self._sessions[key] = session
                while len(self._sessions) > self.max_sessions:
                    self._sessions.popitem(last=False)
            else:
                self._sessions.move_to_end(key)
            if session.configured is not config or session.window != window:
                # T follows the main model's input window unless summary_threshold is set
                session.compressor.follow_model(config, window)
                session.configured, session.window = config, window
            return session

    def _summarizer_for(self, request: ModelRequest[Any]) -> SummarizerLike:
        if self.summarizer is not None:
            return self.summarizer
        return ChatModelSummarizer(
            self.model if self.model is not None else request.model, on_usage=self.on_summary_usage
        )

    def _emit(self, event: CompressionEvent) -> None:
        if self.stream:
            stream_writer_emitter(event)
        if self.on_event is not None:
            self.on_event(event)

    def _prepare(self, request: ModelRequest[Any]) -> _Call:
        runtime = request.runtime
        context = getattr(runtime, "context", None)
        config = self._config_for(context)
        thread, ns = _scope_parts()
        session = self._session((thread, ns), config, _model_window(request.model))
        with session.lock:
            # the event: reuse the parsed one while the stored dict is unchanged
            state: Mapping[str, Any] = request.state
            raw = state.get(EVENT_KEY) if state else None
            if raw is not session.event_raw and raw != session.event_raw:
                session.event = event_from_state(raw)
                session.event_raw = raw
            # system message and tool schemas, cached while unchanged
            system_src = request.system_message
            if system_src is not session.system_src and system_src != session.system_src:
                session.system = to_core(system_src) if system_src is not None else None
                session.system_src = system_src
            tools_key = tuple(id(t) for t in request.tools)
            if tools_key != session.tools_key:
                session.tools = tool_schemas(request.tools)
                session.tools_key = tools_key
            session.model, session.agent_tools = request.model, request.tools
            event, system, tools = session.event, session.system, session.tools
        messages = session.converter.convert(request.messages)
        if session.converter.rewritten:
            # the core's incremental count_history samples a few positions to detect an
            # extension; after an edit in the middle, make it recount (per-message counts
            # stay cached on the unchanged messages, so this is cheap)
            forget_history = getattr(session.compressor.estimator, "forget_history", None)
            if forget_history is not None:
                forget_history()
        backend = self._resolver.resolve(runtime, _file_scope(context, thread), request.tools)
        return _Call(
            session=session,
            messages=messages,
            event=event,
            system=system,
            tools=tools,
            summarizer=self._summarizer_for(request),
            backend=backend,
            thread=thread,
            requested=bool(state.get(COMPACT_REQUEST_KEY)) if state else False,
        )

    def _between_turns(
        self, values: Mapping[str, Any], config: Mapping[str, Any], model: Any, context: Any
    ) -> _Call:
        """A call on a thread's checkpointed ``values`` outside any model call
        (``compact_now``): the thread's session, the summary model (``model``,
        the middleware's, else the thread's last main model), its file backend."""
        configurable = config.get("configurable") or {}
        thread = str(configurable.get("thread_id") or "default")
        ns = str(configurable.get("checkpoint_ns") or "")
        with self._sessions_lock:
            known = self._sessions.get((thread, ns))
        main = model if model is not None else known.model if known is not None else None
        summarizer = self.summarizer
        if summarizer is None:
            summary_model = self.model if self.model is not None else main
            if summary_model is None:
                raise ConfigError(
                    "model",
                    None,
                    "compact_now needs a summary model: pass model= (or build the middleware "
                    "with model= or summarizer=)",
                )
            summarizer = ChatModelSummarizer(summary_model, on_usage=self.on_summary_usage)
        window = _model_window(main) if main is not None else known.window if known else None
        session = self._session((thread, ns), self._config_for(context), window)
        messages = [to_core(m) for m in values.get("messages") or ()]
        agent_tools = session.agent_tools
        runtime = SimpleNamespace(context=context)
        backend = self._resolver.resolve(runtime, _file_scope(context, thread), agent_tools)
        return _Call(
            session=session,
            messages=messages,
            event=event_from_state(values.get(EVENT_KEY)),
            system=session.system,
            tools=session.tools,
            summarizer=summarizer,
            backend=backend,
            thread=thread,
        )

    def _finish(self, call: _Call, outcome: CallOutcome) -> Any:
        response = outcome.response
        self._record_usage(call, response, outcome)
        values = self._state_update(call, outcome.update)
        if not values:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=values))

    def _state_update(self, call: _Call, update: StateUpdate | None) -> dict[str, Any]:
        """The state values persisting ``update`` (and clearing a compaction request)."""
        values: dict[str, Any] = {COMPACT_REQUEST_KEY: None} if call.requested else {}
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
        with call.session.lock:  # the next call reads this dict back from state
            call.session.event_raw = event_dict
            call.session.event = update.event
        return values

    def _record_usage(self, call: _Call, response: Any, outcome: CallOutcome) -> None:
        session = call.session
        messages = getattr(response, "result", None) or (
            [response] if isinstance(response, AIMessage) else []
        )
        usage = next(
            (
                m.usage_metadata
                for m in reversed(messages)
                if isinstance(m, AIMessage) and m.usage_metadata
            ),
            None,
        )
        if not usage:
            return
        record = {
            "usage_metadata": dict(usage),
            "estimated_tokens": outcome.tokens_after,
            "view_messages": len(outcome.view),
        }
        with self._sessions_lock:
            self._last_usage[call.thread] = record
            self._last_usage.move_to_end(call.thread)
            while len(self._last_usage) > self.max_sessions:
                self._last_usage.popitem(last=False)
        calibrate = getattr(session.compressor.estimator, "calibrate", None)
        if callable(calibrate) and usage.get("input_tokens"):
            calibrate(estimated=outcome.tokens_after, actual=int(usage["input_tokens"]))
        if self.on_model_usage is not None:
            self.on_model_usage(record)

    def _view(
        self, request: ModelRequest[Any], call: _Call, view: Sequence[Message]
    ) -> ModelRequest[Any]:
        if view is call.messages:  # below the threshold with no event: the request as it came
            return request
        messages: list[Any] = call.session.converter.back_all(view)
        return request.override(messages=messages)

    def _tool_request(self, request: ToolCallRequest) -> ToolCallRequest:
        """Point the agent's own ``read_file``/``ls``/``glob``/``grep`` at this thread's
        copy of ARS's folders when ARS keeps them in a thread scope of a shared backend."""
        call = request.tool_call
        arg = READ_TOOL_ARGS.get(call.get("name", ""))
        args = call.get("args") or {}
        if arg is None or not isinstance(args.get(arg), str):
            return request
        path: str = args[arg]
        runtime = request.runtime
        thread, _ = _scope_parts()
        scope = _file_scope(getattr(runtime, "context", None), thread)
        target = self._resolver.agent_path(runtime, scope, request.tool, path)
        if target is None:
            return request
        return request.override(tool_call={**call, "args": {**args, arg: target}})

    # ------------------------------------------------------------ the hooks

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        return handler(self._tool_request(request))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        return await handler(self._tool_request(request))

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        call = self._prepare(request)

        def call_model(view: list[Message]) -> ModelResponse[Any]:
            return handler(self._view(request, call, view))

        outcome = call.session.compressor.call(
            call.messages, call_model, options=call.options(self._emit)
        )
        return self._finish(call, outcome)  # type: ignore[no-any-return]

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        call = self._prepare(request)

        async def call_model(view: list[Message]) -> ModelResponse[Any]:
            return await handler(self._view(request, call, view))

        outcome = await call.session.compressor.acall(
            call.messages, call_model, options=call.options(self._emit)
        )
        return self._finish(call, outcome)  # type: ignore[no-any-return]


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
