"""One process of the LlamaIndex read-back-after-restart test (``test_readback``): one
run of an ``ArsFunctionAgent`` whose ``ArsMemory`` has no backend (its files go to
``./.ars`` in the working directory) over a SQLite chat store.

Usage: ``python -m tests.llamaindex._readback_child TURN DB_URL TABLE [PATH]``. ``TURN``
1: the agent runs ``bash("make")``, whose 300-line result L1 offloads; ``TURN`` 2 (a new
process): the agent calls ``read_ars_file`` on ``PATH`` (the last two lines) and
answers. Prints one JSON object: ``sent`` (the texts of the model's last request),
``answers`` (the tool results of the memory's last two tool messages).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys

from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from ars_llamaindex import ArsFunctionAgent, ArsMemory
from ars_llamaindex.testing import ScriptedLLM, tool_call
from tests.llamaindex.helpers import Workspace

KEY = "thread-readback"
#: the build output the first run offloads
OUTPUT = "".join(f"line {i}: compiled module {i}\n" for i in range(300))


async def main(turn: str, url: str, table: str, path: str = "") -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
    workspace = Workspace()
    workspace.outputs["make"] = OUTPUT
    memory = ArsMemory.from_defaults(
        chat_store=SQLAlchemyChatStore(table_name=table, async_database_uri=url),
        chat_store_key=KEY,
        summary_threshold=1,
        summary_tool_result_token_limit=100,
    )
    if turn == "1":
        llm = ScriptedLLM([tool_call("bash", cmd="make"), "built"])
        question = "build it"
    else:
        llm = ScriptedLLM([tool_call("read_ars_file", path=path, offset=298), "read it"])
        question = "show the end of the build output"
    agent = ArsFunctionAgent(tools=[*workspace.tools(), memory.read_tool()], llm=llm)
    await agent.run(question, memory=memory)
    tools = [m.content for m in memory.get_all() if m.role.value == "tool"]
    print(json.dumps({"sent": llm.agent_requests[-1].texts, "answers": tools[-1:]}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
