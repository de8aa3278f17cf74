"""Components by name or by form: how ``Compressor(estimator=..., summarizer=...,
backend=...)`` turns what it is given into an estimator, a summarizer and a
file backend, through the plugin registry (:mod:`ars_core.plugins`).

::

    Compressor(estimator="o200k", summarizer="extractive", backend="s3://bucket/ars")
    Compressor(estimator=TiktokenEstimator)             # a class: built with no arguments
    Compressor(estimator=lambda messages: 4 * len(messages))   # a plain counter

- ``estimator``: an :class:`~ars_core.estimate.Estimator` instance, an
  Estimator class, a registered name (``approx``, ``o200k``, ``cl100k``, a
  plugin's), or a plain callable ``messages -> int`` (LangChain's
  ``token_counter`` convention; it receives core
  :class:`~ars_core.messages.Message` objects).
- ``summarizer``: a summarizer object, a registered name (``extractive``, a
  plugin's), or a spec a plugin resolves through the ``resolve_summarizer``
  hook (``"openai:gpt-4o-mini"`` with the LangChain adapter installed).
- ``backend``: a :class:`~ars_core.files.FileBackend`, a registered backend
  name, or a URL (``s3://bucket/prefix``, ``file:///srv/ars``,
  ``memory://ars``): a backend registered under the URL's scheme builds it,
  else the built-in fsspec backend.

Anything else raises :class:`~ars_core.errors.ConfigError` at construction.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import ConfigError, PluginError
from .estimate import Estimator, Tools
from .files import FileBackend, FsspecBackend
from .messages import Message
from .paths import FILES_DIR_ENV, default_files_place
from .plugins import (
    available,
    get_estimator,
    get_file_backend,
    get_plugin_manager,
    get_summarizer,
)
from .summarize import AsyncSummarizer, Summarizer
from .typing import BackendLike, EstimatorLike, SummarizerLike, TokenCounter

__all__ = [
    "ESTIMATOR_ALIASES",
    "SUMMARIZER_ALIASES",
    "BackendLike",
    "CallableEstimator",
    "EstimatorLike",
    "default_backend",
    "resolve_backend",
    "resolve_estimator",
    "resolve_summarizer",
]


#: other spellings of registered estimator names
ESTIMATOR_ALIASES: dict[str, str] = {
    "o200k_base": "o200k",
    "tiktoken:o200k_base": "o200k",
    "cl100k_base": "cl100k",
    "tiktoken:cl100k_base": "cl100k",
}
#: other spellings of the built-in summarizer
SUMMARIZER_ALIASES: dict[str, str] = {
    "default": "extractive",
    "builtin": "extractive",
    "built-in": "extractive",
}
_ESTIMATOR_FORMS = (
    "an Estimator instance or class, a registered name, or a callable messages -> int"
)


class CallableEstimator:
    """An :class:`~ars_core.estimate.Estimator` over a plain counter ``messages -> int``
    (LangChain's ``token_counter`` convention).

    A request is counted as one list (the system message first); a bare text
    is counted as one user message; tool schemas as their JSON text.
    """

    def __init__(self, counter: TokenCounter, name: str | None = None) -> None:
        self.counter = counter
        qualname = getattr(counter, "__qualname__", None) or type(counter).__name__
        self.name = name or f"callable:{qualname}"

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        return int(self.counter([Message(role="user", content=text)]))

    def count(
        self,
        messages: Sequence[Message],
        *,
        system: Message | str | None = None,
        tools: Tools | None = None,
    ) -> int:
        request = list(messages)
        if isinstance(system, str):
            system = Message(role="system", content=system)
        if system is not None:
            request.insert(0, system)
        total = int(self.counter(request)) if request else 0
        for tool in tools or ():
            text = (
                json.dumps(tool, ensure_ascii=False, sort_keys=True, default=str)
                if isinstance(tool, Mapping)
                else str(tool)
            )
            total += self.count_text(text)
        return total


def _registered(build: Callable[..., Any], name: str, field: str, **options: Any) -> Any:
    """``build(name, **options)`` (a ``get_*`` of the registry), a failure as a ConfigError."""
    try:
        return build(name, **options)
    except PluginError as exc:
        raise ConfigError(field, name, exc.reason) from exc


def resolve_estimator(value: EstimatorLike | None) -> Estimator | None:
    """The estimator ``value`` names or is (``None`` stays ``None``: the caller's default)."""
    if value is None:
        return None
    if isinstance(value, str):
        key = value.strip()
        made: Estimator = _registered(
            get_estimator, ESTIMATOR_ALIASES.get(key.lower(), key), "estimator"
        )
        return made
    if isinstance(value, type):
        try:
            built = value()
        except Exception as exc:
            raise ConfigError(
                "estimator", value, f"the class could not be built without arguments: {exc}"
            ) from exc
        if not isinstance(built, Estimator):
            raise ConfigError(
                "estimator", value, f"not an Estimator class; expected {_ESTIMATOR_FORMS}"
            )
        return built
    if isinstance(value, Estimator):
        return value
    if callable(value):
        return CallableEstimator(value)
    raise ConfigError("estimator", value, f"expected {_ESTIMATOR_FORMS}")


def resolve_summarizer(value: SummarizerLike | None) -> Summarizer | AsyncSummarizer | None:
    """The summarizer ``value`` names or is (``None`` stays ``None``: the caller's default).

    A name registered through ``register_summarizers`` is built; any other
    string goes to the plugins' ``resolve_summarizer`` hook (the LangChain
    adapter resolves ``provider:model``)."""
    if not isinstance(value, str):
        return value
    key = value.strip()
    key = SUMMARIZER_ALIASES.get(key.lower(), key)
    if key in available("summarizer"):
        return _summarizer(_registered(get_summarizer, key, "summarizer"), value)
    resolved = get_plugin_manager().hook.resolve_summarizer(spec=key)
    if resolved is not None:
        return _summarizer(resolved, value)
    names = ", ".join(sorted(available("summarizer")))
    hint = (
        "a LangChain chat-model string such as 'openai:gpt-4o-mini' needs the langchain extra "
        'and its plugin (pip install "ars[langchain]")'
        if ":" in key
        else f"registered: {names}; or a LangChain chat-model string 'provider:model'"
    )
    raise ConfigError("summarizer", value, f"unknown summarizer ({hint})")


def _summarizer(built: object, value: str) -> Summarizer | AsyncSummarizer:
    if isinstance(built, Summarizer | AsyncSummarizer):
        return built
    reason = f"the plugin built {type(built).__name__}, which has no summarize/asummarize"
    raise ConfigError("summarizer", value, reason)


def resolve_backend(value: BackendLike | None) -> FileBackend | None:
    """The file backend ``value`` names or is (``None`` stays ``None``: the caller's default).

    A URL is built by the backend registered under its scheme when there is
    one, else by the built-in ``fsspec`` backend; a registered name is built
    with no options; any other string is a local folder."""
    if value is None:
        return None
    if isinstance(value, str):
        registered = available("file_backend")
        scheme = value.split("://", 1)[0] if "://" in value else None
        backend: FileBackend
        if scheme is not None and scheme in registered:
            backend = _registered(get_file_backend, scheme, "backend", url=value)
        elif scheme is None and value in registered:
            backend = _registered(get_file_backend, value, "backend")
        else:
            backend = _registered(get_file_backend, "fsspec", "backend", url=value)
        return backend
    if isinstance(value, FileBackend):
        return value
    raise ConfigError(
        "backend", value, "expected a FileBackend, a registered backend name, or a URL"
    )


def default_backend() -> FileBackend:
    """Where ARS keeps its files when no backend is given: files that outlive the process.

    ``ARS_FILES_DIR`` names a local folder or any backend URL (``s3://bucket/ars``;
    ``memory://ars`` only when asked for it, it is lost with the process); unset,
    the folder ``.ars`` in the current directory. A relative folder is made
    absolute now, so a later ``chdir`` does not move the files. The first file
    written names the place in one INFO log line (logger ``ars``), and a local
    folder gets a ``.gitignore``.
    """
    url, why = default_files_place()
    if os.environ.get(FILES_DIR_ENV, "").strip() == url:
        # a URL named by the environment: a backend registered for its scheme builds it
        backend = resolve_backend(url)
        if isinstance(backend, FsspecBackend) and backend.announce is None:
            backend.announce = why
        assert backend is not None
        return backend
    return FsspecBackend(url, announce=why)
