"""Second process of the real-model restart test: continue a SQLite thread until L2.

Usage: ``python -m tests.e2e._resume_child <base url> <sqlite file> <thread id> <files dir>``.
Prints one JSON object: the summary calls' prompts and outputs.
"""

from __future__ import annotations

import json
import sys

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from ars_core import FsspecBackend
from ars_langchain import ArsSummarizationMiddleware
from tests.e2e.helpers import CONFIG, SYSTEM, Recorder, chat_model, user_turn
from tests.servers import LLAMA_MODEL


class _Server:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.model = LLAMA_MODEL


def main(base_url: str, db: str, thread_id: str, files: str) -> None:
    recorder = Recorder()
    middleware = ArsSummarizationMiddleware(CONFIG, backend=FsspecBackend(f"file://{files}"))
    config = {"configurable": {"thread_id": thread_id}}
    with SqliteSaver.from_conn_string(db) as saver:
        agent = create_agent(
            chat_model(_Server(base_url), recorder),  # type: ignore[arg-type]
            tools=[], system_prompt=SYSTEM, middleware=[middleware], checkpointer=saver,
        )  # fmt: skip
        for i in range(100, 106):
            agent.invoke({"messages": [HumanMessage(user_turn(i))]}, config)
            if recorder.summaries:
                break
    print(
        json.dumps(
            {
                "summary_prompts": [c.prompt[0].text for c in recorder.summaries],
                "summary_texts": [c.text.strip() for c in recorder.summaries],
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:5])
