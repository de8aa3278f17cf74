"""Nothing offloaded is out of the agent's reach: files persist by default, and the
middleware's ``read_ars_file`` tool reads them back, in a new process too.

Two processes (``tests.langchain._readback_child``) run turns of the same agent
on one SQLite checkpoint, with no backend configured: the files go to ``./.ars``
in the working directory, or to the SQLite store compiled into the graph.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ars_core.l1 import sha256_text
from ars_core.readback import LINE_CHARS
from tests.langchain.helpers import big_output
from tests.procs import repo_env, run_module

OUTPUT = big_output.invoke({"n": 300})
LINES = OUTPUT.splitlines()


def _turn(folder: Path, *args: str) -> tuple[dict[str, Any], str]:
    env = repo_env()
    env.pop("ARS_FILES_DIR", None)  # the default folder, ./.ars in the working directory
    result = run_module("tests.langchain._readback_child", *args, cwd=folder, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1]), result.stderr


@pytest.mark.spec("R61", "R12")
@pytest.mark.parametrize("storage", ["local-default", "sqlite-store"])
def test_an_agent_reads_back_after_a_restart_what_was_offloaded_before_it(
    storage: str, tmp_path: Path
) -> None:
    """Process 1 offloads a 300-line tool result (no backend configured). Process 2,
    a restart on the same SQLite checkpoint, is asked about it: the model calls
    ``read_ars_file`` with the path its preview names and gets the first page, then
    (the path written with a leading ``/``) the last two lines: the original text."""
    db, thread = str(tmp_path / "checkpoints.sqlite"), "thread-readback"
    path = f"outputs/large_tool_results/big_output-{sha256_text(OUTPUT)}.txt"

    first, log1 = _turn(tmp_path, "1", db, thread, storage)
    assert any(f"saved to {path}." in text for text in first["sent"]), first["sent"]
    assert "read_ars_file" in first["tools"]

    second, log2 = _turn(tmp_path, "2", db, thread, storage, path)
    first_page = "\n".join(f"{n:>6}\t{LINES[n - 1]}" for n in (1, 2, 3))
    last_page = "\n".join(f"{n:>6}\t{LINES[n - 1]}" for n in (299, 300))
    assert second["answers"] == [
        ["success", first_page + "\n[lines 1-3 of 300; read on with offset=3]"],
        ["success", last_page],
    ]

    local = tmp_path / ".ars"
    if storage == "local-default":
        on_disk = local / "threads" / thread / path
        assert on_disk.read_text(encoding="utf-8") == OUTPUT
        assert (local / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"
        named = [line for line in log1.splitlines() if str(local) in line]
        assert named == [
            f"INFO ARS: offloaded tool results and history archives go to {local} (the "
            "default; set ARS_FILES_DIR or pass a backend to choose another place)"
        ]
    else:  # in the store: nothing on disk
        assert not local.exists()
        from langgraph.store.sqlite import SqliteStore

        with SqliteStore.from_conn_string(db + ".store") as store:
            item = store.get(("ars", "threads", thread), path)
        assert item is not None and item.value == {"text": OUTPUT}
    assert "WARNING" not in log1 + log2


@pytest.mark.spec("R61", "R12")
@pytest.mark.parametrize("storage", ["local-default", "sqlite-store"])
def test_an_agent_reads_back_after_a_restart_the_history_archives_its_summary_names(
    storage: str, tmp_path: Path
) -> None:
    """Process 1 runs six tool rounds: L2 rounds archive the oldest messages and the
    summary names the archives of its chain (no backend configured). Process 2, a
    restart on the same checkpoint, reads them with ``read_ars_file``: the first page
    of the oldest archive and the last two lines of the newest are those files' own
    lines (the header, the user's request, ...)."""
    db, thread = str(tmp_path / "checkpoints.sqlite"), "thread-archive"
    first, log1 = _turn(tmp_path, "archive", db, thread, storage)
    assert "read_ars_file" in first["tools"]
    archives = first["archives"]  # sorted: the oldest range first
    assert len(archives) >= 1

    def text_of(path: str) -> list[str]:
        if storage == "local-default":
            folder = tmp_path / ".ars" / "threads" / thread
            return (folder / path).read_text(encoding="utf-8").splitlines()
        from langgraph.store.sqlite import SqliteStore

        with SqliteStore.from_conn_string(db + ".store") as store:
            item = store.get(("ars", "threads", thread), path)
        assert item is not None
        return str(item.value["text"]).splitlines()

    def pieces(lines: list[str]) -> list[str]:  # a page shows a long line in pieces
        return [ln[i : i + LINE_CHARS] for ln in lines for i in range(0, len(ln) or 1, LINE_CHARS)]

    oldest_lines = text_of(archives[0])
    assert json.loads(oldest_lines[0])["thread"] == thread
    assert json.loads(oldest_lines[1]) == {
        "role": "user",
        "content": "build everything",
        "id": "h1",
    }
    oldest, newest = pieces(oldest_lines), pieces(text_of(archives[-1]))

    count = len(newest)
    both = f"{archives[0]},{archives[-1]}"
    second, log2 = _turn(tmp_path, "2-archive", db, thread, storage, both, str(count - 2))
    first_page = "\n".join(f"{n:>6}\t{oldest[n - 1]}" for n in (1, 2, 3))
    last_page = "\n".join(f"{n:>6}\t{newest[n - 1]}" for n in (count - 1, count))
    assert second["answers"] == [
        ["success", first_page + f"\n[lines 1-3 of {len(oldest)}; read on with offset=3]"],
        ["success", last_page],
    ]
    assert "WARNING" not in log1 + log2


def _agent(model: Any, mw: Any, **kwargs: Any) -> tuple[Any, Any]:
    from langchain.agents import create_agent

    from tests.langchain._readback_child import ToolNames

    names = ToolNames()
    agent = create_agent(model, tools=[big_output], middleware=[mw, names], **kwargs)
    return agent, names


def _script(path: str) -> list[Any]:
    from langchain_core.messages import AIMessage

    from ars_langchain.testing import tool_call

    return [
        AIMessage("", id="a1", tool_calls=[tool_call("big_output", {"n": 300}, "c1")]),
        AIMessage(
            "",
            id="a2",
            tool_calls=[tool_call("read_ars_file", {"path": path, "offset": 299}, "r1")],
        ),
        AIMessage(
            "",
            id="a3",
            tool_calls=[tool_call("read_ars_file", {"path": "outputs/none.txt"}, "r2")],
        ),
        AIMessage("done", id="a4"),
    ]


def _answers(state: dict[str, Any]) -> list[list[str]]:
    from langchain_core.messages import ToolMessage

    return [
        [str(m.status), str(m.content)]
        for m in state["messages"]
        if isinstance(m, ToolMessage) and m.name == "read_ars_file"
    ]


@pytest.mark.spec("R61", "R36")
@pytest.mark.parametrize("store_kind", ["memory", "postgres"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_graph_with_a_store_keeps_the_files_in_it_per_thread(
    store_kind: str, mode: str, request: pytest.FixtureRequest, thread_id: str
) -> None:
    """``create_agent(..., store=...)`` and no backend: the offloaded result is an item
    of ``("ars", "threads", <thread>)`` in the store (InMemoryStore, PostgresStore /
    AsyncPostgresStore), the default folder stays empty, ``read_ars_file`` reads it
    back (sync and async), a missing file is the tool's error, and another thread
    cannot see it."""
    import asyncio
    import os

    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from ars_core import SummaryConfig
    from ars_langchain import ArsSummarizationMiddleware
    from ars_langchain.testing import FakeToolChatModel

    path = f"outputs/large_tool_results/big_output-{sha256_text(OUTPUT)}.txt"
    config = SummaryConfig(summary_threshold=2, summary_tool_result_token_limit=200)
    files_dir = Path(os.environ["ARS_FILES_DIR"])
    before = sorted(files_dir.rglob("*"))
    thread = thread_id
    expected = [
        ["success", f"   300\t{LINES[299]}"],
        [
            "error",
            "There is no saved file at outputs/none.txt: pass the path exactly as the "
            "preview or summary names it.",
        ],
    ]

    def check(item: Any, other: Any, state: dict[str, Any]) -> None:
        assert item is not None and item.value == {"text": OUTPUT}
        assert other is None
        assert _answers(state) == expected

    def run_sync(store: Any) -> None:
        model = FakeToolChatModel(_script(path))
        agent, names = _agent(
            model, ArsSummarizationMiddleware(config), checkpointer=InMemorySaver(), store=store
        )
        cfg: Any = {"configurable": {"thread_id": thread}}
        state = agent.invoke({"messages": [HumanMessage("build", id="h1")]}, cfg)
        assert all("read_ars_file" in seen for seen in names.seen)
        check(
            store.get(("ars", "threads", thread), path),
            store.get(("ars", "threads", "other-thread"), path),
            state,
        )

    async def run_async(store: Any) -> None:
        model = FakeToolChatModel(_script(path))
        agent, _ = _agent(
            model, ArsSummarizationMiddleware(config), checkpointer=InMemorySaver(), store=store
        )
        cfg: Any = {"configurable": {"thread_id": thread}}
        state = await agent.ainvoke({"messages": [HumanMessage("build", id="h1")]}, cfg)
        check(
            await store.aget(("ars", "threads", thread), path),
            await store.aget(("ars", "threads", "other-thread"), path),
            state,
        )

    if store_kind == "memory":
        from langgraph.store.memory import InMemoryStore

        store = InMemoryStore()
        run_sync(store) if mode == "sync" else asyncio.run(run_async(store))
    elif mode == "sync":
        from langgraph.store.postgres import PostgresStore

        url = request.getfixturevalue("postgres_url")
        with PostgresStore.from_conn_string(url) as pg:
            pg.setup()
            run_sync(pg)
    else:
        from langgraph.store.postgres import AsyncPostgresStore

        url = request.getfixturevalue("postgres_url")

        async def main() -> None:
            async with AsyncPostgresStore.from_conn_string(url) as pg:
                await pg.setup()
                await run_async(pg)

        asyncio.run(main())
    assert sorted(files_dir.rglob("*")) == before  # nothing went to the local folder


@pytest.mark.spec("R61")
def test_the_tool_is_hidden_where_the_agents_own_read_file_reads_ars_files(
    thread_id: str,
) -> None:
    """deepagents: ARS writes where the agent's ``read_file`` reads, so the model is
    offered ``read_file`` and not ``read_ars_file``; ``read_tool=False`` leaves the tool
    out of a plain agent."""
    from deepagents import create_deep_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from ars_langchain import ArsSummarizationMiddleware
    from ars_langchain.testing import FakeToolChatModel
    from tests.langchain._readback_child import ToolNames

    names = ToolNames()
    agent = create_deep_agent(
        model=FakeToolChatModel([AIMessage("hi", id="a1")]),
        middleware=[ArsSummarizationMiddleware(), names],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": thread_id}})
    assert "read_file" in names.seen[-1] and "read_ars_file" not in names.seen[-1]

    assert [t.name for t in ArsSummarizationMiddleware(read_tool=False).tools] == []
    assert [t.name for t in ArsSummarizationMiddleware(compaction_tool=True).tools] == [
        "compact_conversation",
        "read_ars_file",
    ]
