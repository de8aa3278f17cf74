"""A core summarizer over any LlamaIndex ``LLM``.

:class:`LLMSummarizer` renders the cleaned history into ``summary_prompt``
(one user message; an optional system prompt before it) and calls
``llm.chat`` (sync path) or ``llm.achat`` (async path). The call runs under
LlamaIndex instrumentation tags ``{"ars": "summary", "nostream": True}`` so
handlers can tell it from the agent's own calls, and it is never part of the
agent's event stream (the memory calls the LLM directly, not through the
workflow). Its token usage is the provider's when the response reports it
(``raw["usage"]`` or ``additional_kwargs``), else an estimate; it goes into
the summarization event, never into the main model's usage.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ChatResponse
from llama_index.core.llms import LLM
from llama_index_instrumentation.dispatcher import active_instrument_tags, instrument_tags

from ars_core import ApproxEstimator, Estimator, Message, SummaryResult, Usage
from ars_core.adapter import render_prompt

__all__ = ["SUMMARY_TAGS", "LLMSummarizer", "response_usage"]

#: instrumentation tags on every summary call
SUMMARY_TAGS: dict[str, Any] = {"ars": "summary", "nostream": True}


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _usage_from(obj: Any) -> Usage | None:
    if obj is None:
        return None

    def get(key: str) -> Any:
        return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)

    inp = _int(get("prompt_tokens"))
    if inp is None:
        inp = _int(get("input_tokens"))
    out = _int(get("completion_tokens"))
    if out is None:
        out = _int(get("output_tokens"))
    if inp is None and out is None:
        return None
    total = _int(get("total_tokens"))
    inp, out = inp or 0, out or 0
    return Usage(
        input_tokens=inp, output_tokens=out, total_tokens=total if total is not None else inp + out
    )


def response_usage(response: ChatResponse) -> Usage | None:
    """The token usage a provider reported in a ``ChatResponse``, if any."""
    raw = response.raw
    usage = raw.get("usage") if isinstance(raw, Mapping) else getattr(raw, "usage", None)
    return _usage_from(usage) or _usage_from(response.additional_kwargs)


@contextmanager
def _tagged() -> Iterator[None]:
    with instrument_tags({**active_instrument_tags.get(), **SUMMARY_TAGS}):
        yield


class LLMSummarizer:
    """Summarize history with a LlamaIndex ``LLM`` (sync ``chat``, async ``achat``)."""

    def __init__(
        self,
        llm: LLM,
        *,
        system_prompt: str | None = None,
        estimator: Estimator | None = None,
        **chat_kwargs: Any,
    ) -> None:
        self.llm = llm
        self.system_prompt = system_prompt
        self.estimator = estimator or ApproxEstimator()
        self.chat_kwargs = chat_kwargs

    def _request(self, messages: Sequence[Message], prompt: str) -> tuple[list[ChatMessage], str]:
        rendered = render_prompt(prompt, messages)
        request = [ChatMessage(role="user", content=rendered)]
        if self.system_prompt:
            request.insert(0, ChatMessage(role="system", content=self.system_prompt))
        return request, rendered

    def _result(self, response: ChatResponse, rendered: str) -> SummaryResult:
        text = response.message.content or ""
        usage = response_usage(response) or Usage(
            input_tokens=self.estimator.count_text(rendered),
            output_tokens=self.estimator.count_text(text),
        )
        model = getattr(self.llm.metadata, "model_name", None)
        return SummaryResult(text=text, usage=usage, model=model)

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        request, rendered = self._request(messages, prompt)
        with _tagged():
            response = self.llm.chat(request, **self.chat_kwargs)
        return self._result(response, rendered)

    async def asummarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        request, rendered = self._request(messages, prompt)
        with _tagged():
            response = await self.llm.achat(request, **self.chat_kwargs)
        return self._result(response, rendered)

    def __repr__(self) -> str:
        return f"LLMSummarizer({type(self.llm).__name__})"
