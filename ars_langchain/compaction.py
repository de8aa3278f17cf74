"""On-demand compaction for LangChain agents and LangGraph threads.

* The ``compact_conversation`` tool (``ArsSummarizationMiddleware(compaction_tool=True)``,
  the name deepagents uses): the agent calls it when it moves on to a new
  task or its context is getting long. The tool records the request in the
  private state key ``_ars_compaction_requested``; the middleware's next model
  call runs an L2 round first (archive, summary, the latest
  ``summary_keep_messages`` kept), persists the event with the model response
  and clears the request. With nothing to summarize the tool says so and
  requests nothing.
* :func:`compact_now` / :func:`acompact_now`: the same round for an
  application, between turns, on a checkpointed thread: run on the thread's
  state, the event persisted with ``update_state`` (as the model node when the
  thread's next step is the model, e.g. after a failed model call, so the
  event is kept and ``invoke(None, config)`` resumes with the summary).

Both emit the ``started``/``completed``/``failed`` events of an automatic
round (``requested`` is true in them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.constants import START
from langgraph.types import Command, StateUpdate

from ars_core import ArsError, Compaction, effective_messages
from ars_core.adapter import can_compact, check_event

from .convert import to_core
from .sessions import COMPACT_REQUEST_KEY, EVENT_KEY, event_from_state

if TYPE_CHECKING:  # the middleware imports this module; this one uses its public methods only
    from .middleware import ArsSummarizationMiddleware

__all__ = ["COMPACTION_TOOL_NAME", "acompact_now", "compact_now", "make_compaction_tool"]

#: the tool's name: deepagents' own, so prompts written for it work
COMPACTION_TOOL_NAME = "compact_conversation"

_DESCRIPTION = (
    "Compact the conversation: older messages are replaced by a summary (the full "
    "history is archived to a file you can read back), the most recent ones are kept. "
    "Use it when moving on to a new, unrelated task, or when the conversation is "
    "getting long and its older part is no longer needed. Takes no arguments."
)


def make_compaction_tool(middleware: ArsSummarizationMiddleware) -> BaseTool:
    """The ``compact_conversation`` tool of ``middleware`` (sync and async)."""

    def compact_conversation(runtime: ToolRuntime) -> Command[Any]:
        return _request(middleware, runtime)

    async def acompact_conversation(runtime: ToolRuntime) -> Command[Any]:
        return _request(middleware, runtime)

    return StructuredTool.from_function(
        func=compact_conversation,
        coroutine=acompact_conversation,
        name=COMPACTION_TOOL_NAME,
        description=_DESCRIPTION,
    )


def _request(middleware: ArsSummarizationMiddleware, runtime: ToolRuntime) -> Command[Any]:
    """Request an L2 round for the next model call, or say there is nothing to compact."""
    state: Mapping[str, Any] = runtime.state or {}
    keep = middleware.sessions.config_for(runtime.context).summary_keep_messages
    messages = [to_core(m) for m in state.get("messages") or ()]
    event = check_event(messages, event_from_state(state.get(EVENT_KEY))).event
    update: dict[str, Any] = {}
    if can_compact(effective_messages(messages, event), event, keep):
        update[COMPACT_REQUEST_KEY] = True
        text = (
            "Compaction scheduled: before your next step the older messages are summarized "
            f"(the full history is archived to a file) and the {keep} most recent are kept."
        )
    else:
        text = Compaction.nothing_to_compact(keep)
    update["messages"] = [ToolMessage(text, tool_call_id=runtime.tool_call_id or "")]
    return Command(update=update)


def compact_now(
    graph: Any,
    config: Mapping[str, Any],
    *,
    middleware: ArsSummarizationMiddleware,
    model: Any = None,
    context: Any = None,
) -> Compaction:
    """Run an L2 round now on the checkpointed thread of ``config`` (a
    ``thread_id``) of ``graph`` (a compiled agent using ``middleware``), and
    persist the new event with ``graph.update_state``: the next ``invoke``
    sends the summary and the kept messages. ``model`` summarizes (default: the
    middleware's ``model``, else the thread's last main model in this
    process); ``context`` is the run's context (``summary_*`` fields, file
    backend). With nothing to summarize nothing changes and the result says so."""
    values = graph.get_state(config).values
    call = middleware.between_turns(values, config, model, context, _store(graph))
    result = call.session.compressor.compact_now(
        call.messages, options=call.options(middleware.emit)
    )
    if update := call.state_update(result.update):
        written = graph.update_state(config, update)
        if not _stored(graph.get_state(written).values, update):
            graph.bulk_update_state(config, _as_the_model(update))
            _check_stored(graph.get_state(config).values, update)
    return result


async def acompact_now(
    graph: Any,
    config: Mapping[str, Any],
    *,
    middleware: ArsSummarizationMiddleware,
    model: Any = None,
    context: Any = None,
) -> Compaction:
    """Async twin of :func:`compact_now` (archive and summary run concurrently)."""
    values = (await graph.aget_state(config)).values
    call = middleware.between_turns(values, config, model, context, _store(graph))
    result = await call.session.compressor.acompact_now(
        call.messages, options=call.options(middleware.emit)
    )
    if update := call.state_update(result.update):
        written = await graph.aupdate_state(config, update)
        if not _stored((await graph.aget_state(written)).values, update):
            await graph.abulk_update_state(config, _as_the_model(update))
            _check_stored((await graph.aget_state(config)).values, update)
    return result


def _store(graph: Any) -> Any:
    """The graph's store (``create_agent(..., store=...)``), where its files go."""
    return getattr(graph, "store", None)


def _stored(values: Mapping[str, Any], update: Mapping[str, Any]) -> bool:
    """Whether the thread's state holds the event ``update`` wrote."""
    return EVENT_KEY not in update or values.get(EVENT_KEY) == update[EVENT_KEY]


def _as_the_model(update: dict[str, Any]) -> list[list[StateUpdate]]:
    """``update`` written by the model node, then the thread's pending step put back.

    ``update_state`` writes as the node that ran last. When that is the run's input
    (``__start__``: the model call after it failed, say with a 503), the write goes
    through the input schema, which has no private keys, and the event is dropped.
    Written as the model node it is kept; an empty input write after it makes the
    pending step the same as before, so ``invoke(None, config)`` resumes the run."""
    return [[StateUpdate(update, "model")], [StateUpdate({}, START)]]


def _check_stored(values: Mapping[str, Any], update: Mapping[str, Any]) -> None:
    if not _stored(values, update):
        raise ArsError(
            "compact_now could not persist the new summarization event in the thread's "
            "state (update_state dropped it): the summary is not in effect"
        )
