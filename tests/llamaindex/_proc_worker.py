"""Run one phase of a conversation in its own process (persistence tests).

``python -m tests.llamaindex._proc_worker <db_uri> <table> <files_root> <phase>``

* ``write``: talk with an ArsFunctionAgent until an L2 round has happened,
  then one more turn; print JSON with the requests the LLM received after it.
* ``continue``: a fresh memory on the same store and files: talk one more
  turn; print the request the LLM received and how many summaries were made.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from ars_llamaindex import ArsFunctionAgent, ArsMemory
from ars_llamaindex.testing import ScriptedLLM
from tests.llamaindex.helpers import Workspace, prose

SYSTEM = "You are a careful assistant."
KEY = "proc-thread"


async def main(uri: str, table: str, files_root: str, phase: str) -> dict[str, Any]:
    store = SQLAlchemyChatStore(table_name=table, async_database_uri=uri)
    summary_llm = ScriptedLLM([f"SUMMARY-{phase.upper()}"])
    llm = ScriptedLLM([f"{phase} ack {i}" for i in range(30)])
    payloads: list[dict[str, Any]] = []
    memory = ArsMemory.from_defaults(
        chat_store=store,
        chat_store_key=KEY,
        file_backend=f"file://{files_root}",
        llm=summary_llm,
        summary_threshold=1,
        summary_keep_messages=4,
        on_event=payloads.append,
    )
    agent = ArsFunctionAgent(tools=Workspace().tools(), llm=llm, system_prompt=SYSTEM)
    if phase == "write":
        i = 0
        while not any(p["level"] == "L2" for p in payloads):
            await agent.run(prose(130, tag=f"turn{i}"), memory=memory)
            i += 1
        await agent.run(prose(20, tag="after"), memory=memory)
    else:
        await agent.run("what did we talk about?", memory=memory)
    return {
        "last_request": [m.model_dump(mode="json") for m in llm.requests[-1].messages],
        "summaries": len(summary_llm.requests),
        "events": payloads,
    }


if __name__ == "__main__":
    out = asyncio.run(main(*sys.argv[1:5]))
    print(json.dumps(out))
