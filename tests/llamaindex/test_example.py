"""The LlamaIndex example runs as a user would run it, twice on the same store."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from ars_core import read_history
from ars_llamaindex import from_core_messages
from tests.llamaindex.helpers import dumps

ROOT = Path(__file__).resolve().parents[2]


def run(db: Path, files: Path) -> str:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples/llamaindex_agent.py"),
            "--db",
            str(db),
            "--files",
            str(files),
            "--turns",
            "3",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=120,
    )
    return proc.stdout


@pytest.mark.spec("R24", "R25", "R44")
def test_example_compresses_and_a_second_process_continues(tmp_path: Path) -> None:
    db, files = tmp_path / "chat.db", tmp_path / "files"
    first = run(db, files)
    assert "  completed L1: " in first and "  completed L2: " in first
    assert first.startswith(f"new conversation in {db}\n")
    assert "stored messages: 12 (none deleted)" in first
    last_cut = re.findall(r"summary covers messages 1-(\d+)", first)[-1]
    second = run(db, files)
    assert second.startswith(
        f"resumed: 12 stored messages in {db}; its summary covers messages 1-{last_cut} "
        "(history in outputs/conversation_history/"
    )
    assert "stored messages: 24 (none deleted)" in second
    rounds = re.findall(r"completed L2: .* summary covers messages 1-(\d+)", first + second)
    cuts = [int(c) for c in rounds]
    assert cuts == sorted(cuts) and len(set(cuts)) == len(cuts)  # cumulative across processes
    history: list[ChatMessage] = asyncio.run(
        SQLAlchemyChatStore(
            table_name="chats", async_database_uri=f"sqlite+aiosqlite:///{db}"
        ).get_messages("user-42", status=None)
    )
    assert len(history) == 24
    archives = sorted(files.rglob("conversation_history/*.jsonl"))
    assert archives
    for path in archives:  # every archive is exactly its slice of the stored conversation
        header, messages = read_history(path.read_text(encoding="utf-8"))
        assert dumps(from_core_messages(messages)) == dumps(
            history[header["start"] : header["end"]]
        )
