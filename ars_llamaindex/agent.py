"""The forced path for LlamaIndex: compact on a context-length error, retry.

* :class:`ArsFunctionAgent` — a drop-in ``FunctionAgent`` for an
  :class:`~ars_llamaindex.ArsMemory`:

  - binds the agent's LLM as the summary model (unless the memory has one),
    and its system prompt and tool schemas into the request estimate;
  - writes each tool round (the assistant's tool calls and their results) to
    the memory as soon as it completes, instead of at the end of the run, so
    the tool results of the current run are compressed too (a plain
    ``FunctionAgent`` keeps them in its scratchpad, out of the memory's reach,
    until the run ends);
  - gives the memory the input tokens each step's raw response reports, so the
    next view is sized in the provider's tokens when it counts more than the
    estimator (:mod:`ars_llamaindex.provider_count`);
  - when the LLM raises a context-length error, asks the memory for a forced
    compaction (L1 + L2, ``compact(force=True)``) and retries once. The
    round's ``started``/``completed`` events are delivered after the retry
    succeeded; if it fails too, ``failed`` is delivered and the error raised.

* :func:`call_with_compaction` / :func:`acall_with_compaction` — the same
  forced path for a chat engine or a hand-written loop; :func:`chat_with_compaction`
  / :func:`achat_with_compaction` for an ``LLM`` directly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.agent.workflow.agent_context import AgentContext
from llama_index.core.agent.workflow.workflow_events import (
    AgentOutput,
    AgentWorkflowStartEvent,
    ToolCallResult,
)
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
from llama_index.core.llms import LLM
from llama_index.core.memory import BaseMemory
from llama_index.core.tools import AsyncBaseTool
from llama_index.core.workflow import Context

from .convert import system_text
from .memory import ArsMemory
from .provider_count import raw_input_tokens

__all__ = [
    "ArsFunctionAgent",
    "acall_with_compaction",
    "achat_with_compaction",
    "call_with_compaction",
    "chat_with_compaction",
]

T = TypeVar("T")


def _with_system(system_prompt: Any, view: list[ChatMessage]) -> list[ChatMessage]:
    text = system_text(system_prompt)
    return [ChatMessage(role="system", content=text), *view] if text else list(view)


def call_with_compaction(
    memory: ArsMemory,
    call: Callable[[list[ChatMessage]], T],
    *,
    system_prompt: str | ChatMessage | None = None,
    tools: Sequence[Any] | None = None,
) -> T:
    """``call(system + memory view)``; on a context-length error, force L2 and
    call once more with the new view. ``system_prompt`` and ``tools``
    count in the estimate; the system prompt is prepended to the view."""
    view = memory.get(system_prompt=system_prompt, tools=tools)
    try:
        return call(_with_system(system_prompt, view))
    except Exception as exc:
        if not memory.is_context_length_error(exc):
            raise
    with memory.compact_round(force=True, system_prompt=system_prompt, tools=tools) as rnd:
        return call(_with_system(system_prompt, rnd.view))


async def acall_with_compaction(
    memory: ArsMemory,
    call: Callable[[list[ChatMessage]], Awaitable[T]],
    *,
    system_prompt: str | ChatMessage | None = None,
    tools: Sequence[Any] | None = None,
) -> T:
    """Async twin of :func:`call_with_compaction`."""
    view = await memory.aget(system_prompt=system_prompt, tools=tools)
    try:
        return await call(_with_system(system_prompt, view))
    except Exception as exc:
        if not memory.is_context_length_error(exc):
            raise
    with await memory.acompact_round(force=True, system_prompt=system_prompt, tools=tools) as rnd:
        return await call(_with_system(system_prompt, rnd.view))


def chat_with_compaction(
    llm: LLM,
    memory: ArsMemory,
    *,
    system_prompt: str | ChatMessage | None = None,
    tools: Sequence[Any] | None = None,
    **kwargs: Any,
) -> ChatResponse:
    """``llm.chat`` (or ``chat_with_tools`` when ``tools`` are given) over the
    memory's view, with the forced path. The response is not stored: ``put`` it (its
    reported usage is kept by the memory, for the next view's sizing)."""

    def call(messages: list[ChatMessage]) -> ChatResponse:
        if tools:
            return llm.chat_with_tools(list(tools), chat_history=messages, **kwargs)  # type: ignore[attr-defined, no-any-return]
        return llm.chat(messages, **kwargs)

    response = call_with_compaction(memory, call, system_prompt=system_prompt, tools=tools)
    memory.record_usage(response.message, raw_input_tokens(response.raw))
    return response


async def achat_with_compaction(
    llm: LLM,
    memory: ArsMemory,
    *,
    system_prompt: str | ChatMessage | None = None,
    tools: Sequence[Any] | None = None,
    **kwargs: Any,
) -> ChatResponse:
    """Async twin of :func:`chat_with_compaction`."""

    async def call(messages: list[ChatMessage]) -> ChatResponse:
        if tools:
            return await llm.achat_with_tools(list(tools), chat_history=messages, **kwargs)  # type: ignore[attr-defined, no-any-return]
        return await llm.achat(messages, **kwargs)

    response = await acall_with_compaction(memory, call, system_prompt=system_prompt, tools=tools)
    await memory.arecord_usage(response.message, raw_input_tokens(response.raw))
    return response


class ArsFunctionAgent(FunctionAgent):
    """``FunctionAgent`` + :class:`ArsMemory`: see the module docstring.

    With any other memory it behaves exactly like ``FunctionAgent``.
    """

    async def _init_context(self, ctx: Context, ev: AgentWorkflowStartEvent) -> None:
        await super()._init_context(ctx, ev)
        memory = await ctx.store.get("memory", default=None)
        if isinstance(memory, ArsMemory):
            memory.bind_agent(
                llm=self.llm, system_prompt=self.system_prompt, tools=list(self.tools or ())
            )

    async def handle_tool_call_results(
        self, ctx: Context, results: list[ToolCallResult], memory: BaseMemory
    ) -> None:
        await super().handle_tool_call_results(ctx, results, memory)
        if isinstance(memory, ArsMemory):  # persist the tool round now: the next view compresses it
            scratchpad: list[ChatMessage] = await ctx.store.get(self.scratchpad_key, default=[])
            if scratchpad:
                await memory.aput_messages(scratchpad)
                await ctx.store.set(self.scratchpad_key, [])

    async def take_step(
        self,
        ctx: AgentContext,
        llm_input: list[ChatMessage],
        tools: Sequence[AsyncBaseTool],
        memory: BaseMemory,
    ) -> AgentOutput:
        if not isinstance(memory, ArsMemory):
            return await super().take_step(ctx, llm_input, tools, memory)
        try:
            return await self._answered(ctx, llm_input, tools, memory)
        except Exception as exc:
            if not memory.is_context_length_error(exc):
                raise
        # forced compaction, then one retry with the new view
        head = (
            llm_input[:1]
            if (
                self.system_prompt
                and llm_input
                and llm_input[0].role == MessageRole.SYSTEM
                and llm_input[0].content == self.system_prompt
            )
            else []
        )
        rnd = await memory.acompact_round(
            force=True, system_prompt=self.system_prompt, tools=list(tools)
        )
        with rnd:  # started/completed after the retry answered, failed if it raised
            return await self._answered(ctx, [*head, *rnd.view], tools, memory)

    async def _answered(
        self,
        ctx: AgentContext,
        llm_input: list[ChatMessage],
        tools: Sequence[AsyncBaseTool],
        memory: ArsMemory,
    ) -> AgentOutput:
        """One step; the provider's count of its request (in the raw response) kept by
        the memory beside its estimate of the view (see :mod:`.provider_count`)."""
        output = await super().take_step(ctx, llm_input, tools, memory)
        await memory.arecord_usage(output.response, raw_input_tokens(output.raw))
        return output
