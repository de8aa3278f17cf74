"""Any text survives (R53) in ``ArsMemory``: a lone surrogate or NUL in the
chat store never makes ``get()`` fail, and ARS's files give it back exactly."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from ars_core import FsspecBackend, read_history
from ars_core.testing import FakeSummarizer
from ars_llamaindex import ArsMemory
from tests.llamaindex.helpers import dumps, log_text, prose

HALF = json.loads('"\\ud83d"')  # a lone high surrogate, as json.loads makes it


def _history() -> list[ChatMessage]:
    result = log_text(200).replace("\n", f" {HALF}\x00\n")
    return [
        ChatMessage(role="user", content=prose(300, tag=f"first {HALF}\x00")),
        ChatMessage(role="assistant", content=f"noted {HALF}"),
        ChatMessage(role="user", content="run the tool"),
        ChatMessage(
            role="assistant",
            blocks=[ToolCallBlock(tool_call_id="c1", tool_name="bash", tool_kwargs={"cmd": "x"})],
        ),
        ChatMessage(role="tool", content=result, additional_kwargs={"tool_call_id": "c1"}),
    ]


@pytest.mark.spec("R53", "R12", "R24")
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.anyio
async def test_get_with_lone_surrogates_and_nul_offloads_and_archives_exactly(
    mode: str, tmp_path: Path
) -> None:
    """On a SQLAlchemy (SQLite) chat store: ``get()``/``aget()`` summarize the first
    two messages and offload the tool result; the archive and the offloaded file
    give back exactly the stored text, and ``get()`` keeps working afterwards."""
    files_root = tmp_path / "files"
    store = SQLAlchemyChatStore(
        table_name="any_text", async_database_uri=f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
    )
    memory = ArsMemory.from_defaults(
        chat_store=store,
        chat_store_key="conv",
        file_backend=FsspecBackend(files_root.as_uri()),
        summarizer=FakeSummarizer("SUMMARY"),
        summary_threshold=1,
        summary_keep_messages=3,
        summary_max_tokens=32,  # a tiny summary: the kept window keeps its 3 messages
        summary_l2_trigger_ratio=0.3,
        summary_tool_result_token_limit=100,
    )
    history = _history()
    result = history[-1].content or ""
    if mode == "sync":
        memory.put_messages(history)
        view = memory.get()
        again = memory.get()
        event = memory.get_event()
    else:
        await memory.aput_messages(history)
        view = await memory.aget()
        again = await memory.aget()
        event = await memory.aget_event()
    assert dumps(again) == dumps(view)
    assert event is not None and event.cutoff == 2 and event.file_path is not None
    # the archive: the two summarized messages, exactly
    _, archived = read_history(memory.files.read_text(event.file_path))
    assert [m.text for m in archived] == [history[0].content, history[1].content]
    # the view: summary, the kept user message and tool call, the offloaded result
    assert "SUMMARY" in (view[0].content or "")
    assert view[1].content == "run the tool"
    digest = hashlib.sha256(result.encode("utf-8", "surrogatepass")).hexdigest()
    path = f"outputs/large_tool_results/bash-{digest}.txt"
    body = view[-1].content or ""
    assert body.startswith(f"[ARS: tool result offloaded: {len(result)} characters")
    assert path in body
    assert memory.files.read_text(path) == result
    assert dumps(memory.get_all() if mode == "sync" else await memory.aget_all()) == dumps(history)
