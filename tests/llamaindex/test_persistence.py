"""The summary event lives in the chat store, so a new process with
the same store continues from it — SQLAlchemyChatStore on SQLite and on a real
PostgreSQL server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from ars_core import read_history
from ars_llamaindex import ArsMemory, from_core_messages
from tests.llamaindex.helpers import dumps

pytestmark = pytest.mark.spec("R24", "R44")

REPO = Path(__file__).resolve().parents[2]
KEY = "proc-thread"


def run_phase(uri: str, table: str, files_root: Path, phase: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.llamaindex._proc_worker", uri, table, str(files_root), phase],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_continuation(uri: str, table: str, files_root: Path) -> None:
    first = run_phase(uri, table, files_root, "write")
    assert first["summaries"] == 1
    done = next(p for p in first["events"] if p["phase"] == "completed" and p["level"] == "L2")
    cut, path = done["cutoff"], done["file_path"]

    second = run_phase(uri, table, files_root, "continue")
    # the new process made no summary: it rebuilt [summary + messages after the cutoff]
    assert second["summaries"] == 0 and second["events"] == []

    async def read() -> tuple[list[ChatMessage], list[ChatMessage]]:
        store = SQLAlchemyChatStore(table_name=table, async_database_uri=uri)
        return (
            list(await store.get_messages(KEY, status=None)),
            list(await store.get_messages(KEY + "::ars_event", status=None)),
        )

    history, records = asyncio.run(read())
    sent = [ChatMessage.model_validate(m) for m in second["last_request"]]
    assert sent[0].content == "You are a careful assistant."
    assert sent[1].content is not None and "SUMMARY-WRITE" in sent[1].content
    assert sent[1].content.startswith(f"Summary of the earlier conversation (messages 1-{cut};")
    assert dumps(sent[2:]) == dumps(history[cut:-1])
    assert sent[-1].content == "what did we talk about?"
    assert history[-1].content == "continue ack 0"
    # one event record, written by the first process
    (record,) = records
    assert record.additional_kwargs["ars_event"]["event"]["cutoff"] == cut
    # the first process's archive is on disk, lossless
    header, archived = read_history((files_root / "threads" / KEY / path).read_text("utf-8"))
    assert header["end"] == cut and dumps(from_core_messages(archived)) == dumps(history[:cut])
    # and this process sees the same state through a memory (sync API: its own loop)
    memory = ArsMemory.from_defaults(
        chat_store=SQLAlchemyChatStore(table_name=table, async_database_uri=uri),
        chat_store_key=KEY,
        summary_threshold=1,
        summary_keep_messages=4,
    )
    event = memory.get_event()
    assert event is not None and event.cutoff == cut and event.file_path == path
    assert dumps(memory.get_all()) == dumps(history)


@pytest.mark.spec("R24", "R44")
def test_new_process_continues_from_the_event_sqlite(tmp_path: Path) -> None:
    """Continuing from the persisted event on SQLite (``sqlite+aiosqlite`` file database)."""
    files_root = tmp_path / "files"
    files_root.mkdir()
    check_continuation(f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}", "ars_persist", files_root)


@pytest.mark.spec("R24", "R44")
def test_new_process_continues_from_the_event_postgres(postgres_url: str, tmp_path: Path) -> None:
    """Continuing from the persisted event on the PostgreSQL server the other integration tests use (asyncpg)."""
    files_root = tmp_path / "files"
    files_root.mkdir()
    uri = postgres_url.replace("postgresql://", "postgresql+asyncpg://", 1)
    check_continuation(
        uri, f"ars_persist_{os.getpid()}_{tmp_path.name[-8:]}".replace("-", "_"), files_root
    )
