"""LlamaIndex integrations' context-length errors, as the core's one overflow
classifier sees them, and the LLM summarizer."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ChatResponse

from ars_core import ContextOverflowError, Message, Usage, is_context_overflow
from ars_llamaindex import LLMSummarizer
from ars_llamaindex.summarizer import response_usage
from ars_llamaindex.testing import ContextLengthExceededError, ScriptedLLM


class ProviderError(Exception):
    def __init__(
        self, message: str, status_code: int | None = 400, code: str | None = None, body: Any = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.body = body


class RetryError(Exception):  # shaped like tenacity.RetryError
    def __init__(self, inner: BaseException) -> None:
        super().__init__("RetryError[<Future state=finished raised>]")

        class Attempt:
            def exception(self) -> BaseException:
                return inner

        self.last_attempt = Attempt()


@pytest.mark.parametrize(
    "exc",
    [
        ContextLengthExceededError(5000, 4096),
        ContextOverflowError(),
        ProviderError(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130001 tokens."
        ),
        ProviderError("Error code: 400", code="context_length_exceeded"),
        ProviderError(
            "Error code: 400", body={"error": {"code": "context_length_exceeded", "message": "..."}}
        ),
        ProviderError("prompt is too long: 210000 tokens > 200000 maximum"),
        ProviderError("input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000"),
        ProviderError(
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
        ),
        ProviderError("Input is too long for requested model.", status_code=None),
        ProviderError(
            "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length"
        ),
        ProviderError("input length exceeds the context length", status_code=None),
        ProviderError("request too large", status_code=413),
    ],
)
@pytest.mark.spec("R4")
def test_context_length_errors_are_recognised(exc: BaseException) -> None:
    assert is_context_overflow(exc)


@pytest.mark.spec("R4")
def test_wrapped_errors_are_recognised() -> None:
    inner = ContextLengthExceededError(5000, 4096)
    try:
        try:
            raise inner
        except ContextLengthExceededError as e:
            raise RuntimeError("LLM call failed") from e
    except RuntimeError as outer:
        assert is_context_overflow(outer)
    assert is_context_overflow(RetryError(inner))


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("boom"),
        ProviderError("Rate limit reached: too many tokens per minute", status_code=429),
        ProviderError("internal error mentioning maximum context length", status_code=500),
        ProviderError("invalid api key", status_code=401),
    ],
)
@pytest.mark.spec("R4")
def test_other_errors_are_not_overflow(exc: BaseException) -> None:
    assert not is_context_overflow(exc)


@pytest.mark.spec("R4")
def test_an_error_raised_while_handling_an_overflow_is_not_one() -> None:
    try:
        try:
            raise ContextLengthExceededError(5000, 4096)
        except ContextLengthExceededError:
            raise KeyError("unrelated bug in a handler")  # noqa: B904
    except KeyError as exc:
        assert not is_context_overflow(exc)


def test_response_usage_from_provider_shapes() -> None:
    msg = ChatMessage(role="assistant", content="x")
    assert response_usage(
        ChatResponse(
            message=msg,
            raw={"usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}},
        )
    ) == Usage(7, 3, 10)

    class Raw:
        usage = type("U", (), {"input_tokens": 5, "output_tokens": 2})()

    assert response_usage(ChatResponse(message=msg, raw=Raw())) == Usage(5, 2, 7)
    assert response_usage(
        ChatResponse(message=msg, additional_kwargs={"prompt_tokens": 4, "completion_tokens": 1})
    ) == Usage(4, 1, 5)
    assert response_usage(ChatResponse(message=msg, raw={"content": "x"})) is None


@pytest.mark.spec("R23", "R27")
def test_llm_summarizer_sync_and_async() -> None:
    """The cleaned history goes into ``summary_prompt`` at ``{messages}``;
    The call is tagged and its usage returned apart (estimated when the
    provider reports none)."""
    import asyncio

    llm = ScriptedLLM(["SUM-1", "SUM-2"])
    summarizer = LLMSummarizer(llm, system_prompt="You summarize.")
    history = [
        Message(role="user", content="build the parser"),
        Message(role="assistant", content="done"),
    ]
    result = summarizer.summarize(history, "Summarize:\n{messages}\nEnd.")
    assert result.text == "SUM-1" and result.usage is not None and result.usage.input_tokens > 0
    (req,) = llm.requests
    assert [m.role.value for m in req.messages] == ["system", "user"]
    prompt = req.messages[1].content or ""
    assert prompt.startswith("Summarize:\n") and prompt.endswith("\nEnd.")
    assert "[user]\nbuild the parser" in prompt and "[assistant]\ndone" in prompt
    assert req.tags["ars"] == "summary" and req.tags["nostream"] is True
    result2 = asyncio.run(summarizer.asummarize(history, "{messages}"))
    assert result2.text == "SUM-2" and llm.requests[1].tags["ars"] == "summary"
