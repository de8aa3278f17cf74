"""The summary model call: a LangChain chat model as a core summarizer.

The call is tagged ``TAG_NOSTREAM`` so none of its tokens reach
``stream_mode="messages"``; its ``usage_metadata`` becomes the
:class:`~ars_core.Usage` of the summary, reported on the event and through
``on_usage`` and never added to the main model's usage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from ars_core import ApproxEstimator, Message, SummaryResult, Usage
from ars_core.adapter import render_prompt

__all__ = ["SUMMARY_TAG", "ChatModel", "ChatModelSummarizer", "usage_from_metadata"]

#: a LangChain chat model (or any runnable that answers messages with a message)
ChatModel = Runnable[LanguageModelInput, BaseMessage]

#: tag on every summary call besides ``TAG_NOSTREAM`` (find them in traces)
SUMMARY_TAG = "ars_summary"


def usage_from_metadata(usage: Any) -> Usage | None:
    """A LangChain ``usage_metadata`` dict as a core :class:`~ars_core.Usage`."""
    if not usage:
        return None
    return Usage(
        input_tokens=int(usage.get("input_tokens", 0) or 0),
        output_tokens=int(usage.get("output_tokens", 0) or 0),
        total_tokens=int(usage.get("total_tokens", 0) or 0),
    )


def _model_name(model: Any) -> str | None:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str):
            return value
    return type(model).__name__


class ChatModelSummarizer:
    """Summarize with a LangChain chat model (the main agent's, or an explicit one).

    The rendered ``summary_prompt`` is sent as one human message. When the
    provider reports no usage, the usage is estimated with ``ApproxEstimator``.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        on_usage: Callable[[Usage], None] | None = None,
        tags: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.on_usage = on_usage
        self.tags = [TAG_NOSTREAM, SUMMARY_TAG, *tags]
        self._estimator = ApproxEstimator()

    def _config(self) -> RunnableConfig:
        return {"tags": list(self.tags), "run_name": "ars_summary", "metadata": {"ars": "summary"}}

    def _result(self, prompt: str, response: BaseMessage) -> SummaryResult:
        text = response.text
        usage = usage_from_metadata(getattr(response, "usage_metadata", None))
        if usage is None:
            usage = Usage(
                input_tokens=self._estimator.count_text(prompt),
                output_tokens=self._estimator.count_text(text),
            )
        if self.on_usage is not None:
            self.on_usage(usage)
        return SummaryResult(text=text, usage=usage, model=_model_name(self.model))

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        rendered = render_prompt(prompt, messages)
        response = self.model.invoke([HumanMessage(content=rendered)], config=self._config())
        return self._result(rendered, response)

    async def asummarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        rendered = render_prompt(prompt, messages)
        response = await self.model.ainvoke([HumanMessage(content=rendered)], config=self._config())
        return self._result(rendered, response)
