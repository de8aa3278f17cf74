"""Second process of the restart test: reopen a PostgreSQL thread and run one turn.

Usage: ``python -m tests.langchain._resume_child <postgres url> <thread id> <files dir>``.
Prints one JSON object: the messages the main model and the summary model received.
"""

from __future__ import annotations

import json
import sys

from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict
from langgraph.checkpoint.postgres import PostgresSaver

from ars_core import FsspecBackend
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.helpers import build_agent, prose
from tests.langchain.test_persistence import RESUME_CONFIG


def main(url: str, thread_id: str, root: str) -> None:
    model = FakeToolChatModel(
        [AIMessage("SUMMARY-TWO", id="s2"), AIMessage(prose("answer two", 20), id="a2")]
    )
    mw = ArsSummarizationMiddleware(
        RESUME_CONFIG,
        backend=FsspecBackend(f"file://{root}"),
        compressor_options={"lean_rounds": False},
        read_tool=False,  # as in the parent test: sizes pinned for a request without it
    )
    with PostgresSaver.from_conn_string(url) as saver:
        agent = build_agent(model, mw)(saver)
        agent.invoke(
            {"messages": [HumanMessage(prose("turn two", 400), id="h-2")]},
            {"configurable": {"thread_id": thread_id}},
        )
    print(
        json.dumps(
            {
                "main": [messages_to_dict(c) for c in model.main_calls],
                "summary": [messages_to_dict(c) for c in model.summary_calls],
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
