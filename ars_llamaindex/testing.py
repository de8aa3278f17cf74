"""Test doubles for LlamaIndex code that uses ARS — only the LLM provider is faked.

:class:`ScriptedLLM` is a function-calling LLM (a ``MockFunctionCallingLLM``,
so ``FunctionAgent``/``AgentWorkflow`` accept it) that

* answers from a script: a string (assistant text), :func:`tool_call` /
  :func:`tool_calls` (an assistant message calling tools), a ``ChatMessage``,
  an exception instance (raised), or a callable ``(messages, tools) -> any of
  those``; the last item repeats;
* records every request in :attr:`ScriptedLLM.requests` (deep copies of the
  messages, the tool names, the instrumentation tags — ARS summary calls carry
  ``{"ars": "summary"}`` — and whether it overflowed);
* raises :class:`ContextLengthExceededError` (an OpenAI-like 400 error with
  code ``context_length_exceeded``) when a request is larger than
  ``max_context_tokens`` estimated tokens (messages + tool schemas), like a
  provider would; an overflowing request consumes no script item;
* answers ARS summary calls with ``summary_reply`` when given (without
  consuming the script), so one scripted LLM can be both the agent's model and
  its summary model.

``context_window`` is what ``metadata.context_window`` reports (ARS's T
follows it when ``summary_threshold`` is not set).

``provider`` (an :class:`ars_core.testing.ProviderTokenizer`) counts every request
as a provider would (messages, system message, tool schemas): the count is kept in
:attr:`ScriptedRequest.provider_tokens` and, unless ``report_usage`` is false,
reported in each response's ``raw["usage"]["input_tokens"]``.

``tool_call_style="blocks"`` puts calls in ``ToolCallBlock`` blocks (what
LlamaIndex's newer integrations do); ``"openai"`` puts OpenAI-style dicts in
``additional_kwargs["tool_calls"]``.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    LLMMetadata,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms.llm import ToolSelection
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index_instrumentation.dispatcher import active_instrument_tags

from ars_core import Estimator, default_estimator

from .convert import to_core_messages, tool_schemas

__all__ = [
    "ContextLengthExceededError",
    "ScriptedLLM",
    "ScriptedRequest",
    "ToolCallSpec",
    "tool_call",
    "tool_calls",
]


class ContextLengthExceededError(Exception):
    """What a provider raises for a too-long request (shaped like
    ``openai.BadRequestError``: ``status_code`` 400, ``code``, ``body``)."""

    def __init__(self, tokens: int, limit: int) -> None:
        self.tokens = tokens
        self.limit = limit
        self.status_code = 400
        self.code = "context_length_exceeded"
        message = (
            f"This model's maximum context length is {limit} tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages."
        )
        self.body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        }
        super().__init__(f"Error code: 400 - {self.body}")


@attrs.frozen
class ToolCallSpec:
    name: str
    args: dict[str, Any]
    id: str | None = None


@attrs.frozen
class _ToolCalls:
    calls: tuple[ToolCallSpec, ...]
    text: str = ""


def tool_call(
    tool: str,
    args: Mapping[str, Any] | None = None,
    /,
    *,
    call_id: str | None = None,
    **kwargs: Any,
) -> _ToolCalls:
    """A script item: the assistant calls one tool, with ``args`` and/or keyword
    arguments (``tool_call("bash", cmd="ls")``, ``tool_call("f", {"name": "x"})``);
    ``call_id`` fixes the call's id (default ``call_<n>``)."""
    return _ToolCalls((ToolCallSpec(tool, {**(args or {}), **kwargs}, call_id),))


def tool_calls(*calls: ToolCallSpec | tuple[str, dict[str, Any]], text: str = "") -> _ToolCalls:
    """A script item: the assistant calls several tools at once (parallel calls)."""
    specs = tuple(
        c if isinstance(c, ToolCallSpec) else ToolCallSpec(c[0], dict(c[1])) for c in calls
    )
    return _ToolCalls(specs, text)


@attrs.frozen
class ScriptedRequest:
    """One request the LLM received."""

    messages: list[ChatMessage]
    tools: list[str]
    tags: dict[str, Any]
    tokens: int
    overflowed: bool
    provider_tokens: int | None = None

    @property
    def is_summary(self) -> bool:
        return self.tags.get("ars") == "summary"

    @property
    def texts(self) -> list[str]:
        """Each message's text content (``""`` for none)."""
        return [m.content or "" for m in self.messages]


#: str | tool_call(...) | ChatMessage | BaseException | Callable[[messages, tools], Reply]
Reply = Any


class ScriptedLLM(MockFunctionCallingLLM):
    """A scripted function-calling LLM (see the module docstring)."""

    _script: list[Any] = PrivateAttr(default_factory=list)
    _next: int = PrivateAttr(default=0)
    _max_tokens: int | None = PrivateAttr(default=None)
    _estimator: Estimator = PrivateAttr(default_factory=default_estimator)
    _style: str = PrivateAttr(default="blocks")
    _summary_reply: Any = PrivateAttr(default=None)
    _ids: Any = PrivateAttr(default=None)
    _requests: list[ScriptedRequest] = PrivateAttr(default_factory=list)
    _context_window: int | None = PrivateAttr(default=None)
    _provider: Any = PrivateAttr(default=None)
    _report_usage: bool = PrivateAttr(default=True)

    def __init__(
        self,
        script: Sequence[Reply] = ("ok",),
        *,
        max_context_tokens: int | None = None,
        estimator: Estimator | None = None,
        tool_call_style: Literal["blocks", "openai"] = "blocks",
        summary_reply: str | Callable[[list[ChatMessage]], str] | None = None,
        context_window: int | None = None,
        provider: Any = None,
        report_usage: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._context_window = context_window
        self._provider, self._report_usage = provider, report_usage
        self._script = list(script) or ["ok"]
        self._max_tokens = max_context_tokens
        self._estimator = estimator or default_estimator()
        self._style = tool_call_style
        self._summary_reply = summary_reply
        self._ids = itertools.count(1)
        self._requests = []
        self._response_generator = self._respond

    @classmethod
    def class_name(cls) -> str:
        return "ScriptedLLM"

    @property
    def metadata(self) -> LLMMetadata:
        """A function-calling chat model; ``context_window`` as given (else
        LlamaIndex's placeholder for an unknown window)."""
        meta = super().metadata
        if self._context_window is not None:
            meta = meta.model_copy(update={"context_window": self._context_window})
        return meta

    # ------------------------------------------------------------ inspection

    @property
    def requests(self) -> list[ScriptedRequest]:
        """Every request received, in order (overflowing and summary ones included)."""
        return self._requests

    @property
    def agent_requests(self) -> list[ScriptedRequest]:
        """Requests that were not ARS summary calls."""
        return [r for r in self._requests if not r.is_summary]

    @property
    def summary_requests(self) -> list[ScriptedRequest]:
        return [r for r in self._requests if r.is_summary]

    def count_tokens(
        self, messages: Sequence[ChatMessage], tools: Sequence[Any] | None = None
    ) -> int:
        """The request size this LLM compares with ``max_context_tokens``."""
        return self._estimator.count(to_core_messages(messages), tools=tool_schemas(tools))

    # ------------------------------------------------------------ answering

    def _respond(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        tools = list(kwargs.get("tools") or [])
        tags = dict(active_instrument_tags.get())
        tokens = self.count_tokens(messages, tools)
        provider_tokens = None
        if self._provider is not None:
            core = to_core_messages(messages)
            system = core.pop(0) if core and core[0].role == "system" else None
            schemas = tool_schemas(tools) or None
            provider_tokens = int(self._provider.count(core, system=system, tools=schemas))
        over = self._max_tokens is not None and tokens > self._max_tokens
        self._requests.append(
            ScriptedRequest(
                messages=[m.model_copy(deep=True) for m in messages],
                tools=[
                    getattr(getattr(t, "metadata", None), "name", None) or str(t) for t in tools
                ],
                tags=tags,
                tokens=tokens,
                overflowed=over,
                provider_tokens=provider_tokens,
            )
        )
        if over:
            assert self._max_tokens is not None
            raise ContextLengthExceededError(tokens, self._max_tokens)
        if tags.get("ars") == "summary" and self._summary_reply is not None:
            reply = self._summary_reply
            text = reply(list(messages)) if callable(reply) else reply
            return ChatMessage(role="assistant", content=text)
        item = self._script[min(self._next, len(self._script) - 1)]
        self._next += 1
        if callable(item) and not isinstance(item, (ChatMessage, _ToolCalls)):
            item = item(list(messages), tools)
        return self._message(item)

    def _with_usage(self, response: ChatResponse) -> ChatResponse:
        """``response`` reporting the provider's count of the last request (with a
        ``provider`` and ``report_usage``)."""
        tokens = self._requests[-1].provider_tokens if self._requests else None
        if tokens is not None and self._report_usage:
            response.raw = {"usage": {"input_tokens": tokens, "output_tokens": 1}}
        return response

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._with_usage(super().chat(messages, **kwargs))

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        return (self._with_usage(r) for r in super().stream_chat(messages, **kwargs))

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        stream = await super().astream_chat(messages, **kwargs)

        async def responses() -> Any:
            async for response in stream:
                yield self._with_usage(response)

        return responses()

    def _message(self, item: Any) -> ChatMessage:
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, ChatMessage):
            return item.model_copy(deep=True)
        if isinstance(item, str):
            return ChatMessage(role="assistant", content=item)
        if isinstance(item, _ToolCalls):
            specs = [attrs.evolve(s, id=s.id or f"call_{next(self._ids)}") for s in item.calls]
            if self._style == "openai":
                return ChatMessage(
                    role="assistant",
                    content=item.text or None,
                    additional_kwargs={
                        "tool_calls": [
                            {
                                "id": s.id,
                                "type": "function",
                                "function": {"name": s.name, "arguments": json.dumps(s.args)},
                            }
                            for s in specs
                        ]
                    },
                )
            blocks: list[Any] = [TextBlock(text=item.text)] if item.text else []
            blocks += [
                ToolCallBlock(
                    tool_call_id=s.id, tool_name=s.name, tool_kwargs=copy.deepcopy(s.args)
                )
                for s in specs
            ]
            return ChatMessage(role="assistant", blocks=blocks)
        raise TypeError(f"unsupported script item: {item!r}")

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = False, **kwargs: Any
    ) -> list[ToolSelection]:
        raw = response.message.additional_kwargs.get("tool_calls")
        if raw:  # OpenAI style
            return [
                ToolSelection(
                    tool_id=c["id"],
                    tool_name=c["function"]["name"],
                    tool_kwargs=json.loads(c["function"]["arguments"] or "{}"),
                )
                for c in raw
            ]
        return super().get_tool_calls_from_response(
            response, error_on_no_tool_call=error_on_no_tool_call
        )
