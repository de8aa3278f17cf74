"""One process of the write-once test (``test_files_restart``): run one turn of an
agent on a SQLite checkpoint, with ARS's files on an fsspec root, and count writes.

Usage: ``python -m tests.langchain._restart_child TURN DB THREAD URL OPTIONS_JSON``.
``TURN`` 1 calls ``big_output`` three times at once (three offloads); ``TURN`` 2
asks again, so L1 offloads the same three results. Prints one JSON object:
``writes`` (the files this process wrote, in order) and ``sent`` (the tool
messages the model received on its last call).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from fsspec.asyn import AsyncFileSystem
from fsspec.core import url_to_fs
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from ars_core import FsspecBackend, SummaryConfig
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.helpers import big_output, build_agent

CONFIG = SummaryConfig(
    summary_threshold=2, summary_l2_trigger_ratio=1.0, summary_tool_result_token_limit=200
)
SIZES = (150, 151, 152)


def counting(fs: Any, writes: list[str]) -> Any:
    """The same filesystem, recording every write (stream, PUT or rename target)."""

    class Counting(type(fs)):  # type: ignore[misc]
        def open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
            if "w" in mode or "a" in mode:
                writes.append(f"open {path}")
            return super().open(path, mode, **kwargs)

        def mv(self, path1: str, path2: str, **kwargs: Any) -> Any:
            writes.append(f"mv {path2}")
            return super().mv(path1, path2, **kwargs)

    if isinstance(fs, AsyncFileSystem):  # s3fs: its sync pipe_file runs this coroutine

        class CountingAsync(Counting):
            async def _pipe_file(self, path: str, data: bytes, **kwargs: Any) -> Any:
                writes.append(f"put {path}")
                return await super()._pipe_file(path, data, **kwargs)

        return CountingAsync(**fs.storage_options)

    class CountingSync(Counting):
        def pipe_file(self, path: str, value: bytes, **kwargs: Any) -> Any:
            writes.append(f"put {path}")
            return super().pipe_file(path, value, **kwargs)

    return CountingSync(**fs.storage_options)


def main(turn: str, db: str, thread_id: str, url: str, options: str) -> None:
    storage_options = json.loads(options)
    writes: list[str] = []
    fs, _ = url_to_fs(url, **storage_options)
    backend = FsspecBackend(url, storage_options=storage_options, fs=counting(fs, writes))
    if turn == "1":
        calls = [tool_call("big_output", {"n": n}, f"c{n}") for n in SIZES]
        script = [AIMessage("", id="a1", tool_calls=calls), AIMessage("first done", id="a2")]
        message = HumanMessage("build everything", id="h1")
    else:
        script = [AIMessage("second done", id="a3")]
        message = HumanMessage("and once more", id="h2")
    model = FakeToolChatModel(script)
    mw = ArsSummarizationMiddleware(
        CONFIG, backend=backend, compressor_options={"lean_rounds": False}
    )
    with SqliteSaver.from_conn_string(db) as saver:
        agent = build_agent(model, mw, tools=[big_output])(saver)
        agent.invoke({"messages": [message]}, {"configurable": {"thread_id": thread_id}})
    sent = [m.text for m in model.main_calls[-1] if m.type == "tool"]
    print(json.dumps({"writes": writes, "sent": sent}))


if __name__ == "__main__":
    main(*sys.argv[1:6])
