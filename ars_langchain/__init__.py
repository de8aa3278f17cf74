"""ARS for LangChain v1 agents and LangGraph (extra ``ars[langchain]``).

Add :class:`ArsSummarizationMiddleware` to ``create_agent(..., middleware=[...])``
(or ``create_deep_agent``, where it replaces the built-in summarization by
name). See ``docs/langchain.md``.
"""

from __future__ import annotations

from .backends import BackendResolver, DeepAgentsFileBackend
from .convert import HistoryConverter, from_core, to_core
from .middleware import (
    EVENT_KEY,
    ArsState,
    ArsSummarizationMiddleware,
    event_from_state,
    event_to_state,
    is_overflow_error,
)
from .stream import (
    DEFAULT_STREAM_MODES,
    asse_frames,
    chunk_to_sse,
    is_compression_event,
    sse_frames,
)
from .summarizer import ChatModelSummarizer

__all__ = [
    "DEFAULT_STREAM_MODES",
    "EVENT_KEY",
    "ArsState",
    "ArsSummarizationMiddleware",
    "BackendResolver",
    "ChatModelSummarizer",
    "DeepAgentsFileBackend",
    "HistoryConverter",
    "asse_frames",
    "chunk_to_sse",
    "event_from_state",
    "event_to_state",
    "from_core",
    "is_compression_event",
    "is_overflow_error",
    "sse_frames",
    "to_core",
]
