"""ARS in a LlamaIndex agent: one memory object, compression on, state in a SQL chat store.

Needs the ``llamaindex`` extra: ``pip install "ars[llamaindex]"``.

Runs offline with the scripted LLM from ``ars_llamaindex.testing``; to use a real
model, replace ``ScriptedLLM(...)`` with e.g. ``OpenAI(model="gpt-4.1")`` from
``llama-index-llms-openai`` (then the agent's own LLM also writes the summaries).

    python examples/llamaindex_agent.py [--db PATH] [--files DIR] [--turns N]

Run it twice with the same ``--db`` and ``--files``: the second process
continues from the summary the first one stored.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
from pathlib import Path
from typing import Any

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore
from llama_index.core.tools import FunctionTool

from ars_core import describe_event
from ars_llamaindex import ArsCompressionEvent, ArsFunctionAgent, ArsMemory
from ars_llamaindex.testing import ScriptedLLM, tool_call


def read_log(name: str) -> str:
    """Read a service log by name."""
    return "".join(
        f"{name} 2026-11-{i % 28 + 1:02d} worker served request {i} in {i % 90} ms\n"
        for i in range(300)
    )


def write_file(path: str, content: str) -> str:
    """Write a text file."""
    return f"wrote {len(content)} characters to {path}"


class PrintCompression(BaseEventHandler):
    """Prints ARS's compression events (what a chat service would send as SSE)."""

    @classmethod
    def class_name(cls) -> str:
        return "PrintCompression"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, ArsCompressionEvent):
            print("  " + describe_event(event.payload))


def scripted_summary(messages: list[Any]) -> str:
    """What a real model writes as the summary: the user's requests, then the outcome."""
    prompt = "\n".join(str(m.content or "") for m in messages)
    asked = dict.fromkeys(re.findall(r"Please check the logs of svc\d+\.", prompt))
    return f"The user asked: {' '.join(asked)} Every service checked was healthy."


async def main() -> None:
    parser = argparse.ArgumentParser()
    work = Path(tempfile.mkdtemp(prefix="ars-llamaindex-"))
    parser.add_argument("--db", default=str(work / "chat.db"))
    parser.add_argument("--files", default=str(work / "files"))
    parser.add_argument("--turns", type=int, default=6)
    args = parser.parse_args()
    Path(args.files).mkdir(parents=True, exist_ok=True)

    get_dispatcher().add_event_handler(PrintCompression())
    store = SQLAlchemyChatStore(
        table_name="chats", async_database_uri=f"sqlite+aiosqlite:///{args.db}"
    )
    memory = ArsMemory.from_defaults(
        chat_store=store,
        chat_store_key="user-42",
        file_backend=f"file://{Path(args.files).resolve()}",
        summary_threshold=2,  # K tokens; 100 in production (R35)
        summary_keep_messages=4,
    )
    stored = await memory.aget_all()
    if stored:  # a previous run left this conversation in the store
        event = await memory.aget_event()
        summary = (
            f"; its summary covers messages 1-{event.cutoff} (history in {event.file_path})"
            if event is not None
            else ""
        )
        print(f"resumed: {len(stored)} stored messages in {args.db}{summary}")
    else:
        print(f"new conversation in {args.db}")
    script: list[Any] = []
    for i in range(args.turns):
        script += [
            tool_call("read_log", name=f"svc{i}"),
            f"svc{i} looks healthy: no errors in 300 lines.",
        ]
    llm = ScriptedLLM(script, summary_reply=scripted_summary)
    agent = ArsFunctionAgent(
        tools=[FunctionTool.from_defaults(read_log), FunctionTool.from_defaults(write_file)],
        llm=llm,
        system_prompt="You are an SRE assistant. Read logs with read_log.",
    )
    for i in range(args.turns):
        print(f"turn {i}: check svc{i}")
        answer = await agent.run(f"Please check the logs of svc{i}.", memory=memory)
        print(f"  -> {answer}")

    stored = await memory.aget_all()
    view = await memory.aget()
    event = await memory.aget_event()
    print(f"\nstored messages: {len(stored)} (none deleted); next request: {len(view)} messages")
    if event is not None:
        print(f"summary covers messages 1-{event.cutoff}; history archived at {event.file_path}")
    print(f"files under {args.files}:")
    for path in sorted(Path(args.files).rglob("*")):
        if path.is_file():
            print(f"  {path.relative_to(args.files)}")


if __name__ == "__main__":
    asyncio.run(main())
