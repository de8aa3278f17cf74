"""One process of the read-back-after-restart test (``test_readback``): one turn of
a LangGraph agent on a SQLite checkpoint, with the middleware's defaults for
files (``./.ars`` in the working directory) or a SQLite store compiled into the
graph (``runtime.store``).

Usage: ``python -m tests.langchain._readback_child TURN DB THREAD STORAGE [PATH [OFFSET]]``.
``TURN`` 1: the model calls ``big_output(n=300)``, whose result L1 offloads; the
process prints the path the model was shown. ``TURN`` archive: the model calls
``big_output`` six times (300-305 lines), so an L2 round archives the oldest
messages (the extractive summarizer) and the summary names the archive. ``TURN`` 2
(a new process; ``2-archive`` after ``archive``): the model calls ``read_ars_file`` twice on ``PATH`` (the first
page, then the lines from ``OFFSET``, 298 unless given; ``PATH`` may be two paths
``A,B``: the first page of ``A``, then ``B`` from ``OFFSET``) and answers. Prints one JSON
object: ``sent`` (the tool messages of the model's last view), ``tools`` (the tool
names the model was offered), ``answers`` (the tool messages of the final state),
``archives`` (the history archives the model's last view names).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
from collections.abc import Iterator
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from ars_core import SummaryConfig
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.helpers import big_output

CONFIG = SummaryConfig(summary_threshold=2, summary_tool_result_token_limit=200)
#: the archive turn keeps 4 messages, so its six tool rounds leave the L2 round a cut
ARCHIVE_CONFIG = SummaryConfig(
    summary_threshold=2, summary_tool_result_token_limit=200, summary_keep_messages=4
)


class ToolNames(AgentMiddleware[Any, Any]):
    """Records the tool names of each model request (it runs inside ARS's middleware)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[list[str]] = []

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        self.seen.append(sorted(getattr(t, "name", str(t)) for t in request.tools))
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        self.seen.append(sorted(getattr(t, "name", str(t)) for t in request.tools))
        return await handler(request)


@contextlib.contextmanager
def store_of(storage: str, db: str) -> Iterator[Any]:
    if storage != "sqlite-store":
        yield None
        return
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(db + ".store") as store:
        store.setup()
        yield store


#: a history archive's path as a summary names it
ARCHIVE = re.compile(r"outputs/conversation_history/history-[0-9a-f-]+\.jsonl")


def main(
    turn: str, db: str, thread_id: str, storage: str, path: str = "", offset: str = "298"
) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
    summarizer, config = None, CONFIG
    if turn in ("archive", "2-archive"):  # the same agent before and after the restart
        summarizer, config = "extractive", ARCHIVE_CONFIG
    if turn == "archive":
        calls = [tool_call("big_output", {"n": 300 + i}, f"c{i}") for i in range(6)]
        script = [AIMessage("", id=f"b{i}", tool_calls=[c]) for i, c in enumerate(calls)]
        script.append(AIMessage("built", id="b6"))
        message = HumanMessage("build everything", id="h1")
    elif turn == "1":
        script = [
            AIMessage("", id="a1", tool_calls=[tool_call("big_output", {"n": 300}, "c1")]),
            AIMessage("built", id="a2"),
        ]
        message = HumanMessage("build everything", id="h1")
    else:
        head, _, tail = path.partition(",")
        reads = [
            tool_call("read_ars_file", {"path": head, "offset": 0, "limit": 3}, "r1"),
            tool_call("read_ars_file", {"path": "/" + (tail or head), "offset": int(offset)}, "r2"),
        ]
        script = [
            AIMessage("", id="a3", tool_calls=reads[:1]),
            AIMessage("", id="a4", tool_calls=reads[1:]),
            AIMessage("read it", id="a5"),
        ]
        message = HumanMessage("show me the build output again", id="h2")
    model = FakeToolChatModel(script)
    names = ToolNames()
    with SqliteSaver.from_conn_string(db) as saver, store_of(storage, db) as store:
        agent = create_agent(
            model,
            tools=[big_output],
            middleware=[ArsSummarizationMiddleware(config, summarizer=summarizer), names],
            checkpointer=saver,
            store=store,
        )
        state = agent.invoke({"messages": [message]}, {"configurable": {"thread_id": thread_id}})
    last = model.main_calls[-1]
    print(
        json.dumps(
            {
                "sent": [str(m.content) for m in last if isinstance(m, ToolMessage)],
                "tools": names.seen[-1],
                "answers": [
                    [m.status, str(m.content)]
                    for m in state["messages"]
                    if isinstance(m, ToolMessage) and m.name == "read_ars_file"
                ],
                "archives": sorted({p for m in last for p in ARCHIVE.findall(str(m.content))}),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
