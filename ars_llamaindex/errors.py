"""Context-length errors of LlamaIndex LLM integrations (R4).

:func:`is_context_length_error` is the core's
:func:`~ars_core.is_context_overflow` (ARS's own ``ContextOverflowError``,
langchain-core's, and the common provider texts: OpenAI/Azure/vLLM "maximum
context length", ``context_length_exceeded``, Anthropic "prompt is too long",
Gemini "exceeds the maximum number of tokens", Bedrock "input is too long",
Mistral, Groq, Cohere...) plus what LlamaIndex integrations add on top:

* an ``code``/``body["error"]["code"]`` of ``context_length_exceeded``
  (``openai.BadRequestError`` as raised by ``llama-index-llms-openai``);
* Anthropic's "input length and `max_tokens` exceed context limit", Ollama's
  "exceeds the context length"/"context size";
* errors wrapped by retries or re-raised: the ``__cause__`` chain (``raise ...
  from``) and tenacity's ``RetryError.last_attempt`` are followed.
"""

from __future__ import annotations

import re
from typing import Any

from ars_core import ContextOverflowError, is_context_overflow

__all__ = ["ContextOverflowError", "is_context_length_error"]

_EXTRA_TEXT = re.compile(
    r"exceeds? (?:the )?context (?:limit|window|length|size)|context limit|"
    r"input tokens? (?:count )?exceeds?|too large for model with \d+ maximum context",
    re.IGNORECASE,
)
_CODES = frozenset({"context_length_exceeded", "context_window_exceeded"})


def _code(exc: BaseException) -> Any:
    code = getattr(exc, "code", None)
    if code is None:
        body = getattr(exc, "body", None)
        if isinstance(body, dict):
            err = body.get("error", body)
            code = err.get("code") if isinstance(err, dict) else None
    return code


def _one(exc: BaseException) -> bool:
    if is_context_overflow(exc):
        return True
    if _code(exc) in _CODES:
        return True
    status = getattr(exc, "status_code", None) or getattr(exc, "status", None)
    if status not in (None, 400, 413):
        return False
    return bool(_EXTRA_TEXT.search(str(exc)))


def is_context_length_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it wraps) says the request exceeds the
    model's context window."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if _one(e):
            return True
        todo.append(e.__cause__)
        attempt = getattr(e, "last_attempt", None)  # tenacity.RetryError
        if attempt is not None:
            try:
                todo.append(attempt.exception())
            except Exception:  # pragma: no cover - a broken future
                pass
    return False
