"""LlamaIndex adapter for ARS context compression.

Install with ``pip install "ars[llamaindex]"``. One memory object gives a
LlamaIndex agent or chat engine ARS's two-level compression::

    from ars_llamaindex import ArsFunctionAgent, ArsMemory

    memory = ArsMemory.from_defaults(chat_store=store, chat_store_key="thread-1",
                                     file_backend="file:///srv/ars", summary_threshold=100)
    agent = ArsFunctionAgent(tools=tools, llm=llm, system_prompt="...")
    await agent.run("hello", memory=memory)

See ``docs/llamaindex.md``.
"""

from __future__ import annotations

from .agent import (
    ArsFunctionAgent,
    acall_with_compaction,
    achat_with_compaction,
    call_with_compaction,
    chat_with_compaction,
)
from .convert import from_core, from_core_messages, to_core, to_core_messages, tool_schemas
from .events import (
    DISPATCHER_NAME,
    ArsCompressionCompletedEvent,
    ArsCompressionEvent,
    ArsCompressionFailedEvent,
    ArsCompressionStartedEvent,
)
from .memory import EVENT_KEY_SUFFIX, ArsMemory, CompactionRound
from .summarizer import LLMSummarizer

__all__ = [
    "DISPATCHER_NAME",
    "EVENT_KEY_SUFFIX",
    "ArsCompressionCompletedEvent",
    "ArsCompressionEvent",
    "ArsCompressionFailedEvent",
    "ArsCompressionStartedEvent",
    "ArsFunctionAgent",
    "ArsMemory",
    "CompactionRound",
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
]
