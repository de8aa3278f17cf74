"""Threads never see each other's files, and the agent opens what ARS wrote (R56).

Real ``create_deep_agent`` graphs (fake chat model), two threads on one agent.
Thread A's large tool result is offloaded; A's own ``read_file`` opens the path
quoted in the preview and A's ``ls`` lists it. Thread B asks for the very same
path and lists the same folder: nothing. With a ``FilesystemBackend`` every
file ARS writes is inside ``root_dir`` (``virtual_mode`` on or off); with the
default ``StateBackend`` it is in thread A's own state.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend, StateBackend
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ars_core.l1 import sha256_text
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.helpers import big_output
from tests.langchain.test_deepagents import DA_CONFIG

BIG = big_output.invoke({"n": 150})
PATH = f"outputs/large_tool_results/big_output-{sha256_text(BIG)}.txt"
LISTED = "/outputs/large_tool_results"


def _script() -> list[AIMessage]:
    return [
        # thread A
        AIMessage("", id="a1", tool_calls=[tool_call("big_output", {"n": 150}, "a-big")]),
        AIMessage(
            "",
            id="a2",
            tool_calls=[tool_call("read_file", {"file_path": PATH, "limit": 3}, "a-read")],
        ),
        AIMessage("", id="a3", tool_calls=[tool_call("ls", {"path": LISTED}, "a-ls")]),
        AIMessage("A done", id="a4"),
        # thread B
        AIMessage(
            "",
            id="b1",
            tool_calls=[tool_call("read_file", {"file_path": PATH, "limit": 3}, "b-read")],
        ),
        AIMessage("", id="b2", tool_calls=[tool_call("ls", {"path": LISTED}, "b-ls")]),
        AIMessage("B done", id="b3"),
    ]


def _tool_text(state: dict[str, Any], call_id: str) -> str:
    found = [
        m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == call_id
    ]
    assert len(found) == 1
    return found[0].text


def _run(agent: Any, mode: str) -> tuple[dict[str, Any], dict[str, Any]]:
    configs = [{"configurable": {"thread_id": t}} for t in ("thread-a", "thread-b")]
    if mode == "sync":
        for cfg in configs:
            agent.invoke({"messages": [HumanMessage("go", id="h")]}, cfg)
        a, b = (agent.get_state(cfg).values for cfg in configs)
        return a, b

    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        for cfg in configs:
            await agent.ainvoke({"messages": [HumanMessage("go", id="h")]}, cfg)
        return (await agent.aget_state(configs[0])).values, (
            await agent.aget_state(configs[1])
        ).values

    return asyncio.run(run())


@pytest.mark.spec("R56", "R36", "R37")
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("ars_backend", ["agent's (default)", "same backend passed to ARS"])
@pytest.mark.parametrize("storage", ["state", "filesystem-virtual", "filesystem-host"])
def test_two_threads_on_one_deep_agent_see_only_their_own_files(
    storage: str, ars_backend: str, mode: str, tmp_path: Path
) -> None:
    """Thread A reads and lists its offload at the preview's path; thread B, on the
    same agent and backend, finds nothing at that path or in that folder; every
    file ARS wrote is inside the backend's root (or thread A's state)."""
    root = tmp_path / "root"
    root.mkdir()
    explicit = ars_backend.startswith("same")
    backend: Any = StateBackend() if explicit else None  # None: deepagents' default
    if storage != "state":
        backend = FilesystemBackend(root_dir=root, virtual_mode=storage == "filesystem-virtual")
    model = FakeToolChatModel(_script())
    mw = ArsSummarizationMiddleware(DA_CONFIG, backend=backend if explicit else None)
    agent = create_deep_agent(
        model,
        tools=[big_output],
        middleware=[mw],
        backend=backend,
        checkpointer=InMemorySaver(),
        subagents=[],
    )
    host = Path("/" + PATH)  # where a write outside root_dir would land
    host_before = host.stat().st_mtime_ns if host.exists() else None
    a, b = _run(agent, mode)

    # the preview quotes the path; A's own read_file opens it, A's ls lists it
    offloaded = model.main_calls[1][-1]
    assert isinstance(offloaded, ToolMessage) and PATH in offloaded.text
    read_a = _tool_text(a, "a-read")
    assert "build step 0: compiled module number 0 without warnings" in read_a
    assert PATH.rsplit("/", 1)[1] in _tool_text(a, "a-ls")
    # B sees nothing of A's
    read_b = _tool_text(b, "b-read")
    assert "build step" not in read_b and "not found" in read_b.lower()
    assert sha256_text(BIG) not in _tool_text(b, "b-ls")

    if storage == "state":
        assert a["files"]["/" + PATH]["content"] in (BIG, BIG.splitlines())
        assert "/" + PATH not in (b.get("files") or {})
        assert [p for p in root.rglob("*")] == []
    else:
        on_disk = sorted(p for p in root.rglob("*") if p.is_file())
        assert on_disk == [root / "threads" / "thread-a" / PATH]
        assert on_disk[0].read_text(encoding="utf-8") == BIG
        # nothing written outside root_dir
        assert (host.stat().st_mtime_ns if host.exists() else None) == host_before


@pytest.mark.spec("R56", "R36")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_subagent_offloads_into_the_parents_scope_and_the_parent_reads_it(
    mode: str, tmp_path: Path
) -> None:
    """A declarative sub-agent's large tool result is offloaded (ARS's default: the
    agent's shared ``FilesystemBackend``) into the parent thread's scope; the
    parent's own ``read_file`` then opens the path the sub-agent's preview quoted."""
    root = tmp_path / "root"
    root.mkdir()
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    task = {"description": "build it", "subagent_type": "builder"}
    model = FakeToolChatModel(
        [
            AIMessage("", id="m1", tool_calls=[tool_call("task", task, "c-task")]),
            AIMessage("", id="s1", tool_calls=[tool_call("big_output", {"n": 150}, "c-big")]),
            AIMessage("build finished", id="s2"),
            AIMessage("", id="m2", tool_calls=[tool_call("read_file", {"file_path": PATH, "limit": 3}, "c-read")]),
            AIMessage("all done", id="m3"),
        ]
    )  # fmt: skip
    mw = ArsSummarizationMiddleware(DA_CONFIG)
    agent = create_deep_agent(
        model,
        tools=[big_output],
        middleware=[mw],
        backend=backend,
        checkpointer=InMemorySaver(),
        subagents=[
            {
                "name": "builder",
                "description": "builds things",
                "system_prompt": "You build.",
                "middleware": [mw.for_subagent()],
            }
        ],
    )
    config = {"configurable": {"thread_id": "parent-thread"}}
    turn = {"messages": [HumanMessage("go", id="h")]}
    if mode == "sync":
        agent.invoke(turn, config)
        state = agent.get_state(config).values
    else:

        async def run() -> dict[str, Any]:
            await agent.ainvoke(turn, config)
            return (await agent.aget_state(config)).values

        state = asyncio.run(run())
    assert PATH in model.main_calls[2][-1].text  # the sub-agent's preview
    on_disk = sorted(p for p in root.rglob("*") if p.is_file())
    assert on_disk == [root / "threads" / "parent-thread" / PATH]
    assert "build step 2: compiled module number 2 without warnings" in _tool_text(state, "c-read")
