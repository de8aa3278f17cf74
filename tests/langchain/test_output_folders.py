"""Every folder ARS writes is routed to the calling thread on a shared deepagents backend.

The folders come from one place (:mod:`ars_core.layout`). A real
``create_deep_agent`` graph on one shared ``FilesystemBackend`` (virtual mode on
and off): a file in each of the five folders is written for thread A through
the backend ARS resolves for that thread (the one the engine writes through).
Thread A's own ``read_file`` and ``ls`` open and list each of them at the
virtual path ARS quotes; thread B, on the same agent, finds none of them.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

import ars_core
from ars_core import SummaryConfig
from ars_core.layout import OUTPUT_FOLDERS, output_folder
from ars_langchain import ArsFileRedirectMiddleware, ArsSummarizationMiddleware
from ars_langchain.backends import ARS_FOLDERS, BackendResolver
from ars_langchain.testing import FakeToolChatModel, tool_call


def _path(folder: str) -> str:
    return f"{folder}/probe-{folder.rsplit('/', 1)[1]}.txt"


def _text(folder: str) -> str:
    return f"the file ARS wrote in {folder} for thread A"


def _script(thread: str) -> list[AIMessage]:
    reads = [
        tool_call("read_file", {"file_path": _path(f)}, f"{thread}-read-{i}")
        for i, f in enumerate(OUTPUT_FOLDERS)
    ]
    lists = [
        tool_call("ls", {"path": "/" + f}, f"{thread}-ls-{i}") for i, f in enumerate(OUTPUT_FOLDERS)
    ]
    return [
        AIMessage("", id=f"{thread}1", tool_calls=reads),
        AIMessage("", id=f"{thread}2", tool_calls=lists),
        AIMessage(f"{thread} done", id=f"{thread}3"),
    ]


def _tool_text(state: dict[str, Any], call_id: str) -> str:
    found = [
        m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == call_id
    ]
    assert len(found) == 1
    return found[0].text


def _run(agent: Any, mode: str) -> list[dict[str, Any]]:
    configs = [{"configurable": {"thread_id": t}} for t in ("thread-a", "thread-b")]
    turn = {"messages": [HumanMessage("go", id="h")]}
    if mode == "sync":
        for cfg in configs:
            agent.invoke(turn, cfg)
        return [agent.get_state(cfg).values for cfg in configs]

    async def run() -> list[dict[str, Any]]:
        for cfg in configs:
            await agent.ainvoke(turn, cfg)
        return [(await agent.aget_state(cfg)).values for cfg in configs]

    return asyncio.run(run())


@pytest.mark.spec("R56", "R36")
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("virtual", [True, False], ids=["virtual", "host"])
@pytest.mark.parametrize("middleware", ["summarization", "redirect alone"])
def test_every_output_folder_is_routed_to_the_calling_thread(
    middleware: str, virtual: bool, mode: str, tmp_path: Path
) -> None:
    """The summarization middleware routes the reads itself (its redirect); an agent
    without it gets the same routing from ``ArsFileRedirectMiddleware`` alone."""
    root = tmp_path / "root"
    root.mkdir()
    backend = FilesystemBackend(root_dir=root, virtual_mode=virtual)
    # what the engine writes through for thread A: the resolver's backend of that thread
    for_a = BackendResolver(backend).resolve(None, "thread-a")
    for folder in OUTPUT_FOLDERS:
        assert for_a.write_text(_path(folder), _text(folder)) == _path(folder)
    model = FakeToolChatModel([*_script("a"), *_script("b")])
    mw: Any = ArsFileRedirectMiddleware()  # the agent's own backend, as ARS's default
    if middleware == "summarization":
        mw = ArsSummarizationMiddleware(SummaryConfig(summary_threshold=64))  # no round
    agent = create_deep_agent(
        model,
        middleware=[mw],
        backend=backend,
        checkpointer=InMemorySaver(),
        subagents=[],
    )
    a, b = _run(agent, mode)

    on_disk = sorted(p for p in root.rglob("*") if p.is_file())
    assert on_disk == sorted(root / "threads" / "thread-a" / _path(f) for f in OUTPUT_FOLDERS)
    for i, folder in enumerate(OUTPUT_FOLDERS):
        assert _text(folder) in _tool_text(a, f"a-read-{i}"), folder
        assert _path(folder).rsplit("/", 1)[1] in _tool_text(a, f"a-ls-{i}"), folder
        read_b = _tool_text(b, f"b-read-{i}")
        assert _text(folder) not in read_b and "not found" in read_b.lower(), folder
        assert "probe-" not in _tool_text(b, f"b-ls-{i}"), folder


def test_the_output_folders_have_one_home() -> None:
    """The five folders are :mod:`ars_core.layout`'s, the LangChain backend routes
    exactly those, and no other module of the core spells an ``outputs/`` folder."""
    assert OUTPUT_FOLDERS == (
        "outputs/large_tool_results",
        "outputs/large_user_messages",
        "outputs/media",
        "outputs/conversation_history",
        "outputs/trimmed_messages",
    )
    assert ARS_FOLDERS == OUTPUT_FOLDERS
    assert output_folder("/outputs/media/image-1.png.b64") == "outputs/media"
    assert output_folder("outputs/media") == "outputs/media"
    assert output_folder("outputs/mediax/a") is None
    assert output_folder("skills/a.md") is None
    package = Path(ars_core.__file__).parent
    spelled = []
    for source in sorted(package.rglob("*.py")):
        if source.name == "layout.py":
            continue
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value.startswith(("outputs/", "/outputs/")):
                    spelled.append((source.name, node.value))
    assert spelled == []
