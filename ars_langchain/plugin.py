"""ARS's LangChain plugin, contributed through the ``ars`` entry-point group.

It resolves summarizer specs of the form ``"provider:model"`` (LangChain's
``init_chat_model`` strings, e.g. ``"openai:gpt-4o-mini"``) to a
:class:`~ars_langchain.summarizer.ChatModelSummarizer`, wherever ARS takes a
summarizer by name: ``Compressor(summarizer="openai:gpt-4o-mini")``,
``ars replay --summarizer openai:gpt-4o-mini``.

Loading this module imports no framework: LangChain is imported when a spec is
resolved. Without LangChain installed the module refuses to load (an ImportError
naming the extra), so the plugin manager leaves it out and ``ars plugins`` says why.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from ars_core import ConfigError, hookimpl

__all__ = ["resolve_summarizer"]

# The plugin is useless without LangChain: without it (or without langchain-core, which
# it needs too) the import fails here (found, not imported), and ``ars plugins`` lists the
# plugin as skipped with this reason.
for _needed, _label in (("langchain", "LangChain"), ("langchain_core", "langchain-core")):
    if importlib.util.find_spec(_needed) is None:
        raise ImportError(
            f'the LangChain plugin needs {_label}: pip install "ars[langchain]"', name=_needed
        )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@hookimpl
def resolve_summarizer(spec: str) -> Any:
    """``"provider:model"`` -> a chat-model summarizer named ``spec``; other specs: ``None``."""
    provider, _, model = spec.partition(":")
    if not provider or not model or "/" in provider:
        return None
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise ConfigError(
            "summarizer",
            spec,
            'a "provider:model" summarizer needs LangChain: pip install "ars[langchain]"',
        ) from exc
    try:
        chat_model = init_chat_model(spec)
    except Exception as exc:  # provider packages raise anything: ImportError, ValueError...
        raise ConfigError("summarizer", spec, f"cannot load chat model: {_one_line(exc)}") from exc
    from .summarizer import ChatModelSummarizer

    summarizer = ChatModelSummarizer(chat_model)
    summarizer.name = spec  # type: ignore[attr-defined]  # how reports name it
    return summarizer
