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

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any, cast

import anyio.to_thread
from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

from ars_core import (
    CallOutcome,
    CompressionEvent,
    ConfigError,
    Estimator,
    Message,
    SummaryConfig,
    Usage,
    is_context_overflow,
)
from ars_core.adapter import (
    OFFLOAD_CHARS,
    READ_TOOL_NAME,
    EstimatorLike,
    EventEmitter,
    OverflowClassifier,
    SummarizerLike,
    is_calibrated,
)

from .backends import BackendResolver, BackendSource, reads_agent_files
from .convert import to_core, tool_schemas
from .known_count import KnownRequest, known_sendable, stamp_known
from .langchain_args import UNSET, Arguments, LangChainArgs, read_arguments
from .passthrough import Replay, TooMuch, sendable
from .provider_count import stamp_response
from .redirect import ArsFileRedirectMiddleware
from .sessions import (
    COMPACT_REQUEST_KEY,
    EVENT_KEY,
    ArsState,
    Call,
    Session,
    Sessions,
    event_from_state,
    event_to_state,
    file_scope,
    model_window,
    scope_parts,
)
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
    a factory called with the runtime; default: the graph's store
    (``runtime.store``), else :func:`ars_core.default_backend` (the folder
    ``.ars`` in the working directory, or ``ARS_FILES_DIR``).
    An unscoped fsspec backend is scoped to the thread id. A
    ``file_backend`` field of the runtime context wins over all of these.

    ``on_event`` receives every compression event (they also go to the custom
    stream when ``stream`` is true); ``on_summary_usage`` the summary call's
    usage; ``on_model_usage`` the main model's ``usage_metadata`` after each
    call, with the estimate that preceded it (see :meth:`last_usage`).

    With no ``summary_threshold`` configured, T is 85% of the main model's
    ``profile["max_input_tokens"]`` when the profile says, else 100K.
    ``read_tool`` (default on) gives the agent the ``read_ars_file`` tool, which
    reads the thread's offloaded results and archives back a page at a time
    (:mod:`ars_langchain.readback`); it is hidden from the model when the
    agent's own ``read_file`` reads ARS's files (deepagents).
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
        read_tool: bool = True,
        trigger: Any = None,
        keep: Any = None,
        token_counter: Callable[..., int] | None = None,
        summary_prompt: str | None = None,
        trim_tokens_to_summarize: int | None = UNSET,
        _resolver: BackendResolver | None = None,
        **deprecated: Any,
    ) -> None:
        super().__init__()
        read = read_arguments(
            config,
            model=model,
            summarizer=summarizer,
            estimator=estimator,
            token_counter=token_counter,
            summary_prompt=summary_prompt,
            trigger=trigger,
            keep=keep,
            trim_tokens_to_summarize=trim_tokens_to_summarize,
            compressor_options=compressor_options,
            deprecated=deprecated,
        )
        self._take(read, trigger, token_counter, trim_tokens_to_summarize)
        self.on_event = on_event
        self.on_summary_usage = on_summary_usage
        self.on_model_usage = on_model_usage
        self.is_overflow = is_overflow
        self.use_context = use_context
        self.stream = stream
        self.max_sessions = max_sessions
        self.compressor_options = read.compressor_options
        self.compaction_tool = compaction_tool
        self.read_tool = read_tool
        self.tools = self._own_tools()
        self._name = name
        self._resolver = _resolver or BackendResolver(backend)
        #: points the agent's own file tools at this thread's ARS files (a shared backend)
        self.file_redirect = ArsFileRedirectMiddleware(self._resolver)
        #: the threads' sessions (engine, converter, cached event), bounded by max_sessions
        self.sessions = Sessions(self)

    def _take(
        self,
        read: Arguments,
        trigger: Any,
        token_counter: Callable[..., int] | None,
        trim_tokens_to_summarize: int | None,
    ) -> None:
        """Keep the arguments :func:`read_arguments` read (LangChain's included)."""
        self.config = read.config
        self.model = read.model
        self.summarizer = read.summarizer
        self.estimator = read.estimator
        #: LangChain's trigger / keep / trim, applied before each call (None: not given)
        self.langchain: LangChainArgs | None = read.langchain
        self.trigger = trigger if read.langchain is None else read.langchain.trigger
        self.keep = None if read.langchain is None else read.langchain.keep
        self.token_counter = token_counter
        self.summary_prompt = self.config.summary_prompt if self.config else None
        self.trim_tokens_to_summarize = trim_tokens_to_summarize

    def _own_tools(self) -> list[Any]:
        """The tools this middleware gives the agent."""
        tools: list[Any] = []
        if self.compaction_tool:  # the agent can ask for an L2 round (deepagents' tool name)
            from .compaction import make_compaction_tool

            tools.append(make_compaction_tool(self))
        if self.read_tool:  # the agent can read back what ARS saved
            from .readback import make_read_tool

            tools.append(make_read_tool(self))
        return tools

    # ------------------------------------------------------------ factories

    @property
    def name(self) -> str:
        return self._name

    @property
    def _sessions(self) -> OrderedDict[tuple[str, str], Session]:
        return self.sessions.by_key

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
        sub = type(self)(
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
            read_tool=self.read_tool,
            _resolver=self._resolver,
        )
        sub.langchain = self.langchain  # LangChain's trigger / keep, as read here
        return sub

    # ------------------------------------------------------------ introspection

    def last_usage(self, thread_id: str = "default") -> dict[str, Any] | None:
        """The main model's last provider-reported ``usage_metadata`` on a thread
        (sub-agents included), with ARS's estimate of the request that produced it
        (calibration data): ``{"usage_metadata", "estimated_tokens", "view_messages"}``."""
        return self.sessions.last_usage(thread_id)

    # ------------------------------------------------------------ per-call setup

    def _summarizer_for(self, request: ModelRequest[Any]) -> SummarizerLike:
        if self.summarizer is not None:
            given: SummarizerLike = self.summarizer
            return given
        return ChatModelSummarizer(
            self.model if self.model is not None else request.model, on_usage=self.on_summary_usage
        )

    def emit(self, event: CompressionEvent) -> None:
        """Deliver a compression event: to the custom stream (``stream``) and ``on_event``."""
        if self.stream:
            stream_writer_emitter(event)
        if self.on_event is not None:
            self.on_event(event)

    def _prepare(self, request: ModelRequest[Any], *, convert: bool = True) -> Call:
        """The call's session, event, system, tools, file backend and (unless
        ``convert`` is false and nothing needs them yet) core messages."""
        runtime = request.runtime
        context = getattr(runtime, "context", None)
        config = self.sessions.config_for(context)
        thread, ns = scope_parts()
        session = self.sessions.get((thread, ns), config, model_window(request.model))
        backend = self._resolver.resolve(runtime, file_scope(context, thread), request.tools)
        request = self._visible_tools(request, backend)
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
        convert = convert or self.langchain is not None
        messages = session.converter.convert(request.messages) if convert else None
        requested = bool(state.get(COMPACT_REQUEST_KEY)) if state else False
        if (
            self.langchain is not None and messages is not None
        ):  # LangChain's trigger / keep, for this call
            lc = self.langchain
            window = lc.window(request.model)
            estimator = session.compressor.estimator
            config_now, asked = lc.for_call(config, window, messages, event, estimator)
            if config_now is not config:
                session = self.sessions.get((thread, ns), config_now, model_window(request.model))
            requested = requested or asked
        call = Call(
            session=session,
            messages=messages if messages is not None else [],
            event=event,
            system=system,
            tools=tools,
            summarizer=self._summarizer_for(request),
            backend=backend,
            thread=thread,
            requested=requested,
            request=request,
        )
        call.converted = messages is not None
        return call

    def _as_it_came(self, call: Call, limit: int | None = None) -> ModelRequest[Any] | None:
        """The request as it goes to the model without the engine (as it came, or with
        notes answering the last block's calls): no stored event, no compaction asked
        for, below T by its messages' bound, nothing else to pair (see
        :mod:`ars_langchain.passthrough`); ``None``: the engine must see the call.
        Raises ``TooMuch`` when more than ``limit`` characters of new text are to read."""
        if call.converted or call.event is not None or call.requested:
            return None
        session, request = call.session, call.request
        args = (session.compressor, session.passthrough, request.messages, call.system)
        notes = sendable(*args, call.tools, limit)
        if notes is None:  # above T by its bound: below it by its newest answer's count?
            call.known = known_sendable(*args, call.tools, limit)
            if call.known is None:
                return None
            notes = call.known.notes
        if not notes:
            as_it_came: ModelRequest[Any] = request
            return as_it_came
        with_notes: ModelRequest[Any] = request.override(messages=[*request.messages, *notes])
        return with_notes

    def _engine_call(self, call: Call) -> Call:
        """``call`` with its core messages (converted now when the request did not go
        out as it came; the summarized part compared only when a round reads it)."""
        if not call.converted:  # with an event anchored in place: the kept part alone
            call.messages = call.session.converter.convert_kept(call.request.messages, call.event)
            call.converted = True
        return call

    def _visible_tools(self, request: ModelRequest[Any], backend: Any) -> ModelRequest[Any]:
        """The request without ``read_ars_file`` when the agent's own ``read_file``
        reads ARS's files (the model needs one way to read them, not two)."""
        if not self.read_tool or not reads_agent_files(backend):
            return request
        mine = {id(t) for t in self.tools if getattr(t, "name", None) == READ_TOOL_NAME}
        tools = [t for t in request.tools if id(t) not in mine]
        return request if len(tools) == len(request.tools) else request.override(tools=tools)

    def tool_backend(self, runtime: Any) -> Any:
        """The file backend a tool call of this thread reads (what its model calls wrote)."""
        thread, _ = scope_parts()
        return self._resolver.resolve(
            runtime, file_scope(getattr(runtime, "context", None), thread)
        )

    def between_turns(
        self,
        values: Mapping[str, Any],
        config: Mapping[str, Any],
        model: Any,
        context: Any,
        store: Any = None,
    ) -> Call:
        """A call on a thread's checkpointed ``values`` outside any model call
        (``compact_now``): the thread's session, the summary model (``model``,
        the middleware's, else the thread's last main model), its file backend."""
        configurable = config.get("configurable") or {}
        thread = str(configurable.get("thread_id") or "default")
        ns = str(configurable.get("checkpoint_ns") or "")
        known = self.sessions.known((thread, ns))
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
        window = model_window(main) if main is not None else known.window if known else None
        session = self.sessions.get((thread, ns), self.sessions.config_for(context), window)
        messages = [to_core(m) for m in values.get("messages") or ()]
        agent_tools = session.agent_tools
        runtime = SimpleNamespace(context=context, store=store)
        backend = self._resolver.resolve(runtime, file_scope(context, thread), agent_tools)
        return Call(
            session=session,
            messages=messages,
            event=event_from_state(values.get(EVENT_KEY)),
            system=session.system,
            tools=session.tools,
            summarizer=summarizer,
            backend=backend,
            thread=thread,
        )

    def _finish(self, call: Call, outcome: CallOutcome) -> Any:
        response = self._record_usage(call, outcome.response, outcome)
        response = stamp_known(response, outcome.known)  # read after usage's count, if any
        values = call.state_update(outcome.update)
        if not values:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=values))

    def _sent_as_it_came(self, call: Call, response: ModelResponse[Any]) -> ModelResponse[Any]:
        """The answer to a request sent without the engine; decided by its known size, the
        answer stamped with it and any usage recorded against its estimate."""
        if call.known is None:
            return response
        answer = self._record_usage(call, response, call.known)
        return cast("ModelResponse[Any]", stamp_known(answer, call.known.known))

    def _record_usage(self, call: Call, response: Any, outcome: CallOutcome | KnownRequest) -> Any:
        """Record the main model's usage; the response, its answer stamped with the
        provider's count beside the estimator's (read back by later calls)."""
        session = call.session
        usage = _usage(response)
        if not usage:
            return response
        record = {
            "usage_metadata": dict(usage),
            "estimated_tokens": outcome.tokens_after,
            "view_messages": len(outcome.view),
        }
        self.sessions.record_usage(call.thread, record)
        estimator = session.compressor.estimator
        if is_calibrated(estimator) and usage.get("input_tokens"):
            estimator.calibrate(estimated=outcome.tokens_after, actual=int(usage["input_tokens"]))
        if self.on_model_usage is not None:
            self.on_model_usage(record)
        return stamp_response(response, outcome.tokens_after, estimator)

    def _view(
        self, request: ModelRequest[Any], call: Call, view: Sequence[Message]
    ) -> ModelRequest[Any]:
        if view is call.messages:  # below the threshold with no event: the request as it came
            return request
        messages: list[Any] = call.session.converter.back_all(view)
        return request.override(messages=messages)

    # ------------------------------------------------------------ the hooks

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        return self.file_redirect.wrap_tool_call(request, handler)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        return await self.file_redirect.awrap_tool_call(request, handler)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        call = self._prepare(request, convert=False)
        request = call.request
        replay: Replay | None = None
        direct = self._as_it_came(call)
        if direct is not None:
            try:
                response = handler(direct)
            except Exception as exc:
                if not call.session.compressor.is_overflow(exc):
                    raise  # what the engine does with it below T
                replay = Replay(error=exc)  # the forced path, as the engine takes it
            else:
                if not _usage(response) or call.known is not None:  # as the engine below T
                    return self._sent_as_it_came(call, response)
                replay = Replay(response)  # recorded against the engine's count
        call = self._engine_call(call)

        def call_model(view: list[Message]) -> ModelResponse[Any]:
            if replay is not None and replay.pending:  # the same first request
                return replay.take()  # type: ignore[no-any-return]
            return handler(self._view(request, call, view))

        outcome = call.session.compressor.call(
            call.messages, call_model, options=call.options(self.emit)
        )
        return self._finish(call, outcome)  # type: ignore[no-any-return]

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        call = self._prepare(request, convert=False)
        request = call.request
        replay: Replay | None = None
        try:
            direct = self._as_it_came(call, OFFLOAD_CHARS)
        except TooMuch:  # much new text: measured off the event loop
            direct = await anyio.to_thread.run_sync(self._as_it_came, call)
        if direct is not None:
            try:
                response = await handler(direct)
            except Exception as exc:
                if not call.session.compressor.is_overflow(exc):
                    raise
                replay = Replay(error=exc)
            else:
                if not _usage(response) or call.known is not None:
                    return self._sent_as_it_came(call, response)
                replay = Replay(response)
        call = self._engine_call(call)

        async def call_model(view: list[Message]) -> ModelResponse[Any]:
            if replay is not None and replay.pending:  # the same first request
                return replay.take()  # type: ignore[no-any-return]
            return await handler(self._view(request, call, view))

        outcome = await call.session.compressor.acall(
            call.messages, call_model, options=call.options(self.emit)
        )
        if not outcome.counted and _usage(outcome.response):
            # the estimate the usage is recorded against: counted off the event loop
            await anyio.to_thread.run_sync(lambda: outcome.tokens_after)
        return self._finish(call, outcome)  # type: ignore[no-any-return]


def _usage(response: Any) -> Mapping[str, Any] | None:
    """The main model's ``usage_metadata`` in a model response, if any."""
    messages = getattr(response, "result", None) or (
        [response] if isinstance(response, AIMessage) else []
    )
    return next(
        (
            m.usage_metadata
            for m in reversed(messages)
            if isinstance(m, AIMessage) and m.usage_metadata
        ),
        None,
    )
