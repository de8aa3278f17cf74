"""Fakes for testing agents that use ARS - only the LLM provider is faked.

:class:`FakeToolChatModel` is a ``GenericFakeChatModel`` that works inside
``create_agent``: ``bind_tools`` returns the model itself, scripted replies may
carry tool calls (also when streamed), and every request is recorded with its
tags so a test can assert the exact messages the model received (and tell the
ARS summary call, tagged ``nostream``, from main calls).

A scripted reply is an ``AIMessage``, a string, an exception instance (raised),
or a callable ``f(messages) -> AIMessage | str`` (may raise). ``overflow_above``
makes a request whose text is longer than that many characters raise
langchain-core's ``ContextOverflowError``, like a provider would.

``provider`` (an :class:`ars_core.testing.ProviderTokenizer`) counts every
request as a provider would (its system message, the bound tools' schemas, its
messages): the count is recorded with the call (:attr:`RecordedCall.input_tokens`)
and, unless ``report_usage`` is false, reported as the reply's
``usage_metadata["input_tokens"]``.
"""

from __future__ import annotations

import contextvars
import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig, ensure_config
from langgraph.constants import TAG_NOSTREAM
from pydantic import ConfigDict, Field, PrivateAttr

from .convert import to_core, tool_schemas

__all__ = ["FakeToolChatModel", "RecordedCall", "message_chars", "tool_call"]

# the tags of the invoke() in progress: the streaming path hands _stream no run manager
_CALL_TAGS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "ars_fake_call_tags", default=None
)


def tool_call(name: str, args: dict[str, Any], id: str) -> dict[str, Any]:
    """A tool call for a scripted ``AIMessage(tool_calls=[...])``."""
    return {"name": name, "args": args, "id": id, "type": "tool_call"}


def message_chars(messages: Sequence[BaseMessage]) -> int:
    """Characters of a request: text content plus tool-call arguments."""
    total = 0
    for m in messages:
        total += len(m.text)
        for call in getattr(m, "tool_calls", None) or ():
            total += len(json.dumps(call.get("args") or {}, ensure_ascii=False))
    return total


class RecordedCall:
    """One request the fake received: ``messages`` and the run's ``tags``."""

    def __init__(
        self, messages: list[BaseMessage], tags: list[str], input_tokens: int | None = None
    ) -> None:
        self.messages = messages
        self.tags = tags
        #: the provider's count of this request (with a ``provider``), else ``None``
        self.input_tokens = input_tokens

    @property
    def is_summary(self) -> bool:
        """Whether this was a no-stream call (the ARS summary call)."""
        return TAG_NOSTREAM in self.tags

    def __repr__(self) -> str:
        return f"RecordedCall({len(self.messages)} messages, tags={self.tags})"


class FakeToolChatModel(GenericFakeChatModel):
    """A scripted chat model usable with ``create_agent`` and tools (see the module doc)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    messages: Iterator[Any] = Field(default_factory=lambda: iter(()))
    overflow_above: int | None = None
    provider: Any = None
    report_usage: bool = True
    model_name: str = "fake-tool-chat-model"
    _tools: list[Any] = PrivateAttr(default_factory=list)
    _script: list[Any] = PrivateAttr(default_factory=list)
    _next: int = PrivateAttr(default=0)
    _calls: list[RecordedCall] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, responses: Sequence[Any] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._script = list(responses)

    @property
    def _llm_type(self) -> str:
        return "fake-tool-chat-model"

    # ------------------------------------------------------------ script

    def add(self, *responses: Any) -> FakeToolChatModel:
        """Append scripted replies."""
        with self._lock:
            self._script.extend(responses)
        return self

    @property
    def calls(self) -> list[RecordedCall]:
        """Every request received, summary calls included."""
        return list(self._calls)

    @property
    def main_calls(self) -> list[list[BaseMessage]]:
        """The messages of every main-model request (summary calls excluded)."""
        return [c.messages for c in self._calls if not c.is_summary]

    @property
    def summary_calls(self) -> list[list[BaseMessage]]:
        return [c.messages for c in self._calls if c.is_summary]

    @property
    def main_sizes(self) -> list[int | None]:
        """The provider's count of every main-model request (with a ``provider``)."""
        return [c.input_tokens for c in self._calls if not c.is_summary]

    @property
    def remaining(self) -> int:
        return len(self._script) - self._next

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> FakeToolChatModel:
        self._tools = list(tools)
        return self

    def _provider_count(self, messages: list[BaseMessage]) -> int | None:
        if self.provider is None:
            return None
        core = [to_core(m) for m in messages]
        system = core.pop(0) if core and core[0].role == "system" else None
        tools = tool_schemas(self._tools) if self._tools else None
        return int(self.provider.count(core, system=system, tools=tools))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AIMessage:
        token = _CALL_TAGS.set(list(ensure_config(config).get("tags") or []))
        try:
            return super().invoke(input, config, **kwargs)
        finally:
            _CALL_TAGS.reset(token)

    async def ainvoke(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        token = _CALL_TAGS.set(list(ensure_config(config).get("tags") or []))
        try:
            return await super().ainvoke(input, config, **kwargs)
        finally:
            _CALL_TAGS.reset(token)

    def _reply(
        self, messages: list[BaseMessage], run_manager: CallbackManagerForLLMRun | None
    ) -> AIMessage:
        tags = list(run_manager.tags) if run_manager is not None else list(_CALL_TAGS.get() or [])
        tokens = self._provider_count(messages)
        with self._lock:
            self._calls.append(RecordedCall(list(messages), tags, tokens))
            if self.overflow_above is not None and TAG_NOSTREAM not in tags:
                size = message_chars(messages)
                if size > self.overflow_above:
                    raise ContextOverflowError(
                        f"prompt is too long: {size} characters > {self.overflow_above} maximum"
                    )
            if self._next >= len(self._script):
                raise RuntimeError(
                    f"FakeToolChatModel: script exhausted after {self._next} replies"
                )
            item = self._script[self._next]
            self._next += 1
        if isinstance(item, BaseException):
            raise item
        if callable(item) and not isinstance(item, BaseMessage):
            item = item(messages)
        if isinstance(item, str):
            item = AIMessage(content=item)
        if not isinstance(item, AIMessage):
            raise TypeError(
                f"FakeToolChatModel: a reply must be an AIMessage or str, not {type(item).__name__}"
            )
        if tokens is not None and self.report_usage and not item.usage_metadata:
            usage = {"input_tokens": tokens, "output_tokens": 1, "total_tokens": tokens + 1}
            item = item.model_copy(update={"usage_metadata": usage})
        return item

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, run_manager))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = self._reply(messages, run_manager)
        text = message.content if isinstance(message.content, str) else ""
        tokens = [t for t in re.split(r"(\s)", text) if t] if text else []
        calls = [
            {
                "name": c["name"],
                "args": json.dumps(c["args"], ensure_ascii=False),
                "id": c["id"],
                "index": i,
                "type": "tool_call_chunk",
            }
            for i, c in enumerate(message.tool_calls)
        ]
        if not tokens:
            tokens = [""]
        for i, token in enumerate(tokens):
            last = i == len(tokens) - 1
            chunk = AIMessageChunk(
                content=token
                if isinstance(message.content, str)
                else (message.content if last else ""),
                id=message.id,
                tool_call_chunks=calls if last else [],  # type: ignore[arg-type]
                usage_metadata=message.usage_metadata if last else None,
                response_metadata=message.response_metadata if last else {},
                additional_kwargs=message.additional_kwargs if last else {},
            )
            if last:
                chunk.chunk_position = "last"
            if run_manager is not None:
                run_manager.on_llm_new_token(token, chunk=ChatGenerationChunk(message=chunk))
            yield ChatGenerationChunk(message=chunk)


ReplyFn = Callable[[list[BaseMessage]], AIMessage | str]
