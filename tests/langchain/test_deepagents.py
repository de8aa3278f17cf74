"""ARS inside deepagents' ``create_deep_agent`` (file scopes, assembly; coexistence decision).

Decision: ARS's middleware is named ``"SummarizationMiddleware"``, so passing it
to ``create_deep_agent(middleware=[...])`` replaces deepagents' built-in
summarization *in place* (same slot: after the filesystem and the task
middleware), in the main agent and - by inheritance - in the general-purpose
sub-agent; a declarative sub-agent gets ``mw.for_subagent()`` in its spec. The
two never run together, so the shared ``_summarization_event`` key holds ARS's
layout only.
"""

from __future__ import annotations

from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import StateBackend
from deepagents.middleware.filesystem import FilesystemMiddleware
from deepagents.middleware.subagents import SubAgentMiddleware
from deepagents.middleware.summarization import SummarizationMiddleware as DeepSummarization
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ars_core import FsspecBackend, SummaryConfig
from ars_core.l1 import sha256_text
from ars_langchain import ArsSummarizationMiddleware, is_compression_event, sse_frames
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.helpers import big_output, parse_frames

pytestmark = pytest.mark.spec("R36", "R50")

# deepagents' tool schemas alone are ~2.2K approx tokens: 3K keeps plain calls below the
# threshold; a 150-line tool result lifts one call above it and L1 brings it back (ratio 1.0)
DA_CONFIG = SummaryConfig(
    summary_threshold=3, summary_l2_trigger_ratio=1.0, summary_tool_result_token_limit=200
)


@pytest.fixture
def stacks(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """The middleware list of every agent create_deep_agent builds (main + sub-agents)."""
    import deepagents.graph
    import deepagents.middleware.subagents as subagents_mod

    seen: list[list[Any]] = []
    for mod in (deepagents.graph, subagents_mod):
        original = mod.create_agent

        def spy(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            seen.append(list(kwargs.get("middleware") or ()))
            return _original(*args, **kwargs)

        monkeypatch.setattr(mod, "create_agent", spy)
    return seen


def _names(stack: list[Any]) -> list[str]:
    return [m.name for m in stack]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.spec("R5", "R36", "R50")
def test_deep_agent_subagent_writes_into_parent_scope(
    stacks: list[list[Any]], thread_id: str, mode: str
) -> None:
    """ARS replaces deepagents' summarization by name, right after the filesystem
    and task middleware, for the main agent, the general-purpose sub-agent and a
    declarative sub-agent. The sub-agent (running under the parent's thread)
    offloads a large tool result into the *parent's* file scope; its compression
    events reach the parent's custom stream with the sub-agent's namespace."""
    model = FakeToolChatModel(
        [
            AIMessage(
                "",
                id="a1",
                tool_calls=[
                    tool_call(
                        "task", {"description": "build it", "subagent_type": "builder"}, "c-task"
                    )
                ],
            ),
            AIMessage("", id="s1", tool_calls=[tool_call("big_output", {"n": 150}, "c-big")]),
            AIMessage("build finished", id="s2"),
            AIMessage("all done", id="a2"),
        ]
    )
    backend = FsspecBackend(f"memory://da-{thread_id}")
    events: list[Any] = []
    mw = ArsSummarizationMiddleware(DA_CONFIG, backend=backend, on_event=events.append)
    sub_mw = mw.for_subagent()
    agent = create_deep_agent(
        model,
        tools=[big_output],
        middleware=[mw],
        checkpointer=InMemorySaver(),
        subagents=[
            {
                "name": "builder",
                "description": "builds things",
                "system_prompt": "You build.",
                "middleware": [sub_mw],
            }
        ],
    )
    # --- the stacks (assembly order, coexistence)
    assert all(
        not isinstance(m, DeepSummarization) or isinstance(m, ArsSummarizationMiddleware)
        for stack in stacks
        for m in stack
    )
    ours = [[m for m in stack if isinstance(m, ArsSummarizationMiddleware)] for stack in stacks]
    assert all(len(o) == 1 for o in ours)  # every agent has exactly one summarizer: ARS
    main = stacks[-1]
    assert main.index(mw) == _names(main).index("SummarizationMiddleware")
    assert isinstance(main[0], FilesystemMiddleware)
    assert (
        isinstance(main[1], SubAgentMiddleware) and main.index(mw) > 1
    )  # task middleware before ARS
    sub_stacks = [
        s for s in stacks[:-1] if sub_mw in s
    ]  # (deepagents may compile a sub-agent twice)
    assert sub_stacks and all(_names(s) == _names(sub_stacks[0]) for s in sub_stacks)
    assert isinstance(sub_stacks[0][0], FilesystemMiddleware) and sub_stacks[0].index(sub_mw) == 1
    assert any(mw in s for s in stacks[:-1])  # the general-purpose sub-agent inherits ARS

    config = {"configurable": {"thread_id": thread_id}}
    items: list[Any] = []
    modes = ["custom", "updates"]
    if mode == "sync":
        items = list(
            agent.stream(
                {"messages": [HumanMessage("go", id="h")]},
                config,
                stream_mode=modes,
                subgraphs=True,
            )
        )
        state = agent.get_state(config).values
    else:
        import asyncio

        async def run() -> tuple[list[Any], dict[str, Any]]:
            got = [
                i
                async for i in agent.astream(
                    {"messages": [HumanMessage("go", id="h")]},
                    config,
                    stream_mode=modes,
                    subgraphs=True,
                )
            ]
            return got, (await agent.aget_state(config)).values

        items, state = asyncio.run(run())

    big_text = big_output.invoke({"n": 150})
    path = f"outputs/large_tool_results/big_output-{sha256_text(big_text)}.txt"
    # the sub-agent's file is in the parent's thread scope, byte for byte
    scoped = backend.scoped(thread_id)
    assert scoped.read_text(path) == big_text
    assert backend.fs.find(f"{backend.root}") == [
        f"/{backend.root}/threads/{thread_id}/{path}".replace("//", "/")
    ]
    # the sub-agent's model saw the offloaded body; the parent's messages are plain
    sub_view = model.main_calls[2]
    assert isinstance(sub_view[-1], ToolMessage) and sub_view[-1].tool_call_id == "c-big"
    assert sub_view[-1].content.startswith(
        f"[ARS: tool result offloaded: {len(big_text)} characters"
    )
    assert path in sub_view[-1].content
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    assert state["messages"][2].content == "build finished"
    assert "_summarization_event" not in state  # L1 only: nothing persisted
    # the events: one L1 round, from the sub-agent's namespace
    assert [(e.phase, e.level, e.offloaded) for e in events] == [
        ("started", "L1", ()),
        ("completed", "L1", (path,)),
    ]
    custom = [
        (ns, chunk) for ns, m, chunk in items if m == "custom" and is_compression_event(chunk)
    ]
    assert [c for _, c in custom] == [e.to_dict() for e in events]
    assert all(ns and ns[0].startswith("tools:") for ns, _ in custom)
    frames = parse_frames(list(sse_frames(items)))
    compression = [d for ev, d in frames if ev == "context_compression"]
    assert len(compression) == 2 and all('"namespace":["tools:' in d for d in compression)


@pytest.mark.spec("R36")
def test_files_land_where_deepagents_read_file_opens_them(thread_id: str) -> None:
    """With deepagents' own backend (StateBackend) as ARS's file backend, the
    offloaded result lands in the agent's `files`, and the agent's `read_file` tool
    opens the path quoted in the offload note."""
    big_text = big_output.invoke({"n": 150})
    path = f"outputs/large_tool_results/big_output-{sha256_text(big_text)}.txt"
    model = FakeToolChatModel(
        [
            AIMessage("", id="a1", tool_calls=[tool_call("big_output", {"n": 150}, "c-big")]),
            AIMessage(
                "",
                id="a2",
                tool_calls=[tool_call("read_file", {"file_path": path, "limit": 3}, "c-read")],
            ),
            AIMessage("done", id="a3"),
        ]
    )
    state_backend = StateBackend()
    mw = ArsSummarizationMiddleware(DA_CONFIG, backend=state_backend)
    agent = create_deep_agent(
        model,
        tools=[big_output],
        middleware=[mw],
        backend=state_backend,
        checkpointer=InMemorySaver(),
        subagents=[],
    )
    config = {"configurable": {"thread_id": thread_id}}
    agent.invoke({"messages": [HumanMessage("go", id="h")]}, config)
    state = agent.get_state(config).values

    stored = state["files"]["/" + path]
    content = stored["content"]
    assert (content if isinstance(content, str) else "\n".join(content)) == big_text
    read_result = state["messages"][4]
    assert isinstance(read_result, ToolMessage) and read_result.tool_call_id == "c-read"
    assert "build step 0: compiled module number 0 without warnings" in read_result.text
    assert "build step 2: compiled module number 2 without warnings" in read_result.text
    # the model was pointed at that path by the offload note
    assert path in model.main_calls[1][-1].text


def _file_text(stored: dict[str, Any]) -> str:
    content = stored["content"]
    return content if isinstance(content, str) else "\n".join(content)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.spec("R24", "R40", "R44", "R52")
def test_an_archive_dropped_with_a_failed_step_is_written_again_whole(
    thread_id: str, mode: str
) -> None:
    """deepagents with its default ``StateBackend``: the L2 round writes its archive
    into the step's state, then the main model fails (503), so the step and the
    archive are dropped. The re-sent turn's round writes the whole range again (not
    a continuation naming the missing file, nor nothing because "it was written"):
    every file the event names is in the thread's ``files`` and holds every
    summarized message."""
    from ars_core.archive import read_history
    from ars_core.testing import FakeSummarizer
    from tests.langchain.helpers import prose

    seed = [
        HumanMessage(prose(f"question {i}", 400), id=f"h{i}")
        if i % 2 == 0
        else AIMessage(prose(f"answer {i}", 400), id=f"a{i}")
        for i in range(9)
    ]
    model = FakeToolChatModel(
        [RuntimeError("503 Service Unavailable"), AIMessage("ok", id="r1"), AIMessage("ok2")]
    )
    mw = ArsSummarizationMiddleware(
        DA_CONFIG, summarizer=FakeSummarizer("SUMMARY"), read_tool=False
    )
    agent = create_deep_agent(
        model, tools=[], middleware=[mw], checkpointer=InMemorySaver(), subagents=[]
    )
    config = {"configurable": {"thread_id": thread_id}}
    again = {"messages": [HumanMessage("once more, please", id="h-again")]}

    def run_sync() -> dict[str, Any]:
        with pytest.raises(RuntimeError, match="503"):
            agent.invoke({"messages": seed}, config)
        agent.invoke(again, config)
        return dict(agent.get_state(config).values)

    async def run_async() -> dict[str, Any]:
        with pytest.raises(RuntimeError, match="503"):
            await agent.ainvoke({"messages": seed}, config)
        await agent.ainvoke(again, config)
        return dict((await agent.aget_state(config)).values)

    import asyncio

    state = run_sync() if mode == "sync" else asyncio.run(run_async())
    event = state["_summarization_event"]
    files = state["files"]
    path: str | None = event["file_path"]
    assert path is not None
    chain: list[Any] = []
    while path is not None:
        assert "/" + path in files, f"the event names {path}, which the thread does not have"
        header, messages = read_history(_file_text(files["/" + path]))
        chain[:0] = messages
        path = header.get("continues")
    assert [m.id for m in chain] == [m.id for m in state["messages"][: event["cutoff"]]]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.spec("R12", "R13", "R52")
def test_an_offload_dropped_with_a_failed_step_is_written_again(thread_id: str, mode: str) -> None:
    """deepagents with its default ``StateBackend``: L1 offloads a large tool result
    into the step's state, then the main model fails (503) and the step's writes
    are dropped. On the re-sent turn the same offload is written again (the process
    does not take it as written because it wrote it once): the path the preview
    names is in the thread's ``files`` with the whole result."""
    big_text = big_output.invoke({"n": 150})
    path = f"outputs/large_tool_results/big_output-{sha256_text(big_text)}.txt"
    model = FakeToolChatModel(
        [
            AIMessage("", id="a1", tool_calls=[tool_call("big_output", {"n": 150}, "c-big")]),
            RuntimeError("503 Service Unavailable"),
            AIMessage("done", id="a2"),
        ]
    )
    mw = ArsSummarizationMiddleware(DA_CONFIG, read_tool=False)
    agent = create_deep_agent(
        model,
        tools=[big_output],
        middleware=[mw],
        checkpointer=InMemorySaver(),
        subagents=[],
    )
    config = {"configurable": {"thread_id": thread_id}}
    again = {"messages": [HumanMessage("try again", id="h2")]}

    def run_sync() -> dict[str, Any]:
        with pytest.raises(RuntimeError, match="503"):
            agent.invoke({"messages": [HumanMessage("go", id="h")]}, config)
        agent.invoke(again, config)
        return dict(agent.get_state(config).values)

    async def run_async() -> dict[str, Any]:
        with pytest.raises(RuntimeError, match="503"):
            await agent.ainvoke({"messages": [HumanMessage("go", id="h")]}, config)
        await agent.ainvoke(again, config)
        return dict((await agent.aget_state(config)).values)

    import asyncio

    state = run_sync() if mode == "sync" else asyncio.run(run_async())
    assert path in model.main_calls[-1][3].text  # the preview names the file
    assert "/" + path in state["files"], "the preview names a file the thread does not have"
    assert _file_text(state["files"]["/" + path]) == big_text
