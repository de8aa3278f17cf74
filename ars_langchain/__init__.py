"""ARS for LangChain v1 agents and LangGraph (extra ``ars[langchain]``).

Add :class:`ArsSummarizationMiddleware` to ``create_agent(..., middleware=[...])``
(or ``create_deep_agent``, where it replaces the built-in summarization by
name). See ``docs/langchain.md``.

The package loads its modules (and LangChain) on first use of a name, so the
``ars`` plugin it contributes (:mod:`ars_langchain.plugin`) loads without LangChain.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backends import BackendResolver, DeepAgentsFileBackend
    from .compaction import COMPACTION_TOOL_NAME, acompact_now, compact_now
    from .convert import from_core, to_core
    from .history import HistoryConverter
    from .langchain_args import model_view
    from .middleware import (
        EVENT_KEY,
        ArsState,
        ArsSummarizationMiddleware,
        event_from_state,
        event_to_state,
    )
    from .redirect import ArsFileRedirectMiddleware
    from .store import StoreFileBackend
    from .stream import (
        DEFAULT_STREAM_MODES,
        asse_frames,
        chunk_to_sse,
        is_compression_event,
        sse_frames,
    )
    from .summarizer import ChatModelSummarizer

#: public name -> the module defining it
_LAZY: dict[str, str] = {
    "ArsFileRedirectMiddleware": "redirect",
    "ArsState": "middleware",
    "ArsSummarizationMiddleware": "middleware",
    "BackendResolver": "backends",
    "COMPACTION_TOOL_NAME": "compaction",
    "ChatModelSummarizer": "summarizer",
    "DEFAULT_STREAM_MODES": "stream",
    "DeepAgentsFileBackend": "backends",
    "EVENT_KEY": "middleware",
    "HistoryConverter": "history",
    "StoreFileBackend": "store",
    "acompact_now": "compaction",
    "asse_frames": "stream",
    "compact_now": "compaction",
    "chunk_to_sse": "stream",
    "event_from_state": "middleware",
    "event_to_state": "middleware",
    "from_core": "convert",
    "is_compression_event": "stream",
    "model_view": "langchain_args",
    "sse_frames": "stream",
    "to_core": "convert",
}

__all__ = [
    "COMPACTION_TOOL_NAME",
    "DEFAULT_STREAM_MODES",
    "EVENT_KEY",
    "ArsFileRedirectMiddleware",
    "ArsState",
    "ArsSummarizationMiddleware",
    "BackendResolver",
    "ChatModelSummarizer",
    "DeepAgentsFileBackend",
    "HistoryConverter",
    "StoreFileBackend",
    "acompact_now",
    "asse_frames",
    "chunk_to_sse",
    "compact_now",
    "event_from_state",
    "event_to_state",
    "from_core",
    "is_compression_event",
    "model_view",
    "sse_frames",
    "to_core",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
