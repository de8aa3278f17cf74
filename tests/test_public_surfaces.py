"""The adapters' public surfaces are locked (the core's is in tests/core/test_public_api.py)."""

from __future__ import annotations

import importlib

import pytest

SURFACES = {
    "ars_langchain": [
        "ArsFileRedirectMiddleware",
        "ArsState",
        "ArsSummarizationMiddleware",
        "BackendResolver",
        "ChatModelSummarizer",
        "DEFAULT_STREAM_MODES",
        "DeepAgentsFileBackend",
        "EVENT_KEY",
        "HistoryConverter",
        "StoreFileBackend",
        "asse_frames",
        "chunk_to_sse",
        "event_from_state",
        "event_to_state",
        "from_core",
        "is_compression_event",
        "model_view",
        "sse_frames",
        "to_core",
        "COMPACTION_TOOL_NAME",
        "acompact_now",
        "compact_now",
    ],
    "ars_llamaindex": [
        "ArsCompressionCompletedEvent",
        "ArsCompressionEvent",
        "ArsCompressionFailedEvent",
        "ArsCompressionStartedEvent",
        "ArsFunctionAgent",
        "ArsMemory",
        "CompactionRound",
        "DISPATCHER_NAME",
        "EVENT_KEY_SUFFIX",
        "LLMSummarizer",
        "acall_with_compaction",
        "achat_with_compaction",
        "call_with_compaction",
        "chat_with_compaction",
        "from_core",
        "from_core_messages",
        "to_core",
        "to_core_messages",
        "tool_schemas",
    ],
}


@pytest.mark.parametrize("package", sorted(SURFACES))
def test_public_surface_is_locked(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(SURFACES[package])
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    assert importlib.import_module(f"{package}.testing") is not None  # the fakes ship too


def test_adapter_signatures_resolve_at_run_time() -> None:
    """The adapters' constructors take the core's summarizer protocols, and their
    annotations resolve (``typing.get_type_hints``)."""
    import typing

    from ars_core.summarize import AsyncSummarizer, Summarizer
    from ars_langchain import ArsSummarizationMiddleware
    from ars_llamaindex import ArsMemory

    expected = Summarizer | AsyncSummarizer | str | None
    for init in (ArsSummarizationMiddleware.__init__, ArsMemory.__init__):
        assert typing.get_type_hints(init)["summarizer"] == expected
