"""Context-length errors of LlamaIndex LLM integrations (R4).

:func:`is_context_length_error` is the core's
:func:`~ars_core.is_context_overflow`, which covers what LlamaIndex
integrations raise: ARS's own and langchain-core's ``ContextOverflowError``;
the common provider texts (OpenAI/Azure/vLLM "maximum context length",
Anthropic "prompt is too long" and "exceed context limit", Gemini "input token
count ... exceeds", Bedrock "input is too long", Ollama "exceeds the context
length"/"context size"); a ``code`` / ``body["error"]["code"]`` of
``context_length_exceeded`` (``openai.BadRequestError``); and wrapped errors
(``raise ... from``, tenacity's ``RetryError.last_attempt``).
"""

from __future__ import annotations

from ars_core import ContextOverflowError, is_context_overflow

__all__ = ["ContextOverflowError", "is_context_length_error"]


def is_context_length_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it wraps) says the request exceeds the
    model's context window: the core's :func:`~ars_core.is_context_overflow`,
    which knows the provider texts and codes listed above."""
    return is_context_overflow(exc)
