"""Conversations sharing one chat store and one file root stay apart (R36, R56):
a hashed scope name never equals a literal thread id's, and ARS's own keys in
the chat store cannot be opened as a conversation."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.storage.chat_store import SimpleChatStore

from ars_core import ConfigError, FileBackendError
from ars_core.testing import FakeSummarizer
from ars_llamaindex import ArsMemory
from tests.llamaindex.helpers import log_text, prose

MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def offloaded_path(memory: ArsMemory, mode: str) -> str:
    """Store a large tool result in ``memory``; the path its view quotes."""
    call = ToolCallBlock(tool_call_id="a", tool_name="bash", tool_kwargs={"cmd": "cat"})
    memory.set(
        [
            ChatMessage(role="assistant", blocks=[call]),
            ChatMessage(
                role="tool", content=log_text(250), additional_kwargs={"tool_call_id": "a"}
            ),
        ]
    )
    view = memory.get() if mode == "sync" else anyio.run(memory.aget)
    body = view[1].content or ""
    return body.split(" saved to ", 1)[1].split(". Read", 1)[0]


@pytest.mark.spec("R36", "R56")
@MODES
def test_a_literal_thread_id_never_opens_a_hashed_scope(mode: str, files_root: Path) -> None:
    """``team/alice`` is not a safe folder name, so its scope is hashed; the
    literal key ``team_alice-8b8fafbf563a`` (what the hashed name used to be)
    is another scope: it neither finds nor reads Alice's offloaded file."""
    root = f"file://{files_root}"
    options = {"file_backend": root, "summary_threshold": 1, "summary_l2_trigger_ratio": 0.9}
    alice = ArsMemory.from_defaults(chat_store_key="team/alice", **options)  # type: ignore[arg-type]
    path = offloaded_path(alice, mode)
    mallory = ArsMemory.from_defaults(chat_store_key="team_alice-8b8fafbf563a", **options)  # type: ignore[arg-type]
    assert alice.files.read_text(path) == log_text(250)
    assert not mallory.files.exists(path)
    with pytest.raises(FileBackendError):
        mallory.files.read_text(path)
    scopes = sorted(p.name for p in (files_root / "threads").iterdir())
    assert scopes == ["_team_alice-8b8fafbf563a"]


@pytest.mark.spec("R36", "R56")
@pytest.mark.parametrize("key", ["alice::ars_event", "alice::ars_anything"])
def test_a_memory_cannot_be_opened_on_ars_event_log(key: str) -> None:
    """Alice's summary lives under ``alice::ars_event`` in the shared store: a
    memory on that key is refused with a ConfigError naming the field, and her
    event log is untouched."""
    store = SimpleChatStore()
    alice = ArsMemory.from_defaults(
        chat_store=store,
        chat_store_key="alice",
        summarizer=FakeSummarizer("ALICE'S PRIVATE SUMMARY"),
        summary_threshold=1,
        summary_keep_messages=2,
    )
    for i in range(8):
        alice.put(ChatMessage(role="user", content=prose(130, tag=f"q{i}")))
        alice.put(ChatMessage(role="assistant", content=f"answer {i}"))
    view = alice.get()
    assert "ALICE'S PRIVATE SUMMARY" in (view[0].content or "")
    log_before = [m.model_dump() for m in store.get_messages("alice::ars_event")]
    assert log_before
    with pytest.raises(ConfigError, match="chat_store_key"):
        ArsMemory.from_defaults(chat_store=store, chat_store_key=key)
    with pytest.raises(ConfigError, match="chat_store_key"):
        ArsMemory(chat_store=store, chat_store_key=key)
    assert [m.model_dump() for m in store.get_messages("alice::ars_event")] == log_before
    assert [m.content for m in alice.get()] == [m.content for m in view]
