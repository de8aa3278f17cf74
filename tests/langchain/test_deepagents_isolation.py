"""On a deepagents ``FilesystemBackend`` every thread shares, no file tool of
one thread reaches another thread's ARS files (R56): ``ls``, ``glob`` and
``grep`` from above leave them out, ``read_file``, ``edit_file`` and
``write_file`` inside them are refused, and the owner still sees its own.
A real ``create_deep_agent`` graph (fake chat model), two threads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ars_core.l1 import sha256_text
from ars_core.testing import FakeSummarizer
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.helpers import big_output
from tests.langchain.test_deepagents import DA_CONFIG
from tests.langchain.test_deepagents_threads import _run

BIG = big_output.invoke({"n": 150})
NAME = f"big_output-{sha256_text(BIG)}.txt"
PATH = f"outputs/large_tool_results/{NAME}"


def _script(top: str) -> list[AIMessage]:
    """Alice offloads a result and looks; Bob tries every file tool on her folder
    (``top``: the backend's root as the agent names it)."""
    threads = top.rstrip("/") + "/threads"
    alice = f"{threads}/thread-a"
    own = f"{threads}/thread-b"
    bob_calls = [
        ("ls", {"path": threads}),
        ("ls", {"path": alice + "/outputs/large_tool_results"}),
        ("glob", {"pattern": "**/*.txt", "path": top}),
        ("grep", {"pattern": "build step", "path": top}),
        ("grep", {"pattern": "build step", "path": alice}),
        ("read_file", {"file_path": f"{alice}/{PATH}"}),
        (
            "edit_file",
            {"file_path": f"{alice}/{PATH}", "old_string": "build step 0", "new_string": "HACKED"},
        ),
        ("write_file", {"file_path": f"{alice}/outputs/forged.txt", "content": "forged"}),
        ("write_file", {"file_path": f"{own}/notes.txt", "content": "bob's own"}),
    ]
    return [
        AIMessage("", id="a1", tool_calls=[tool_call("big_output", {"n": 150}, "a-big")]),
        AIMessage(
            "",
            id="a2",
            tool_calls=[tool_call("grep", {"pattern": "build step 0:", "path": top}, "a-grep")],
        ),
        AIMessage("A done", id="a3"),
        *[
            AIMessage("", id=f"b{i}", tool_calls=[tool_call(name, args, f"b-{i}")])
            for i, (name, args) in enumerate(bob_calls)
        ],
        AIMessage("B done", id="b-end"),
    ]


def shared_agent(model: FakeToolChatModel, backend: FilesystemBackend) -> Any:
    """A deep agent with ARS on ``backend`` (shared by its threads); summaries are fake."""
    mw = ArsSummarizationMiddleware(DA_CONFIG, backend=backend, summarizer=FakeSummarizer())
    return create_deep_agent(
        model,
        tools=[big_output],
        middleware=[mw],
        backend=backend,
        checkpointer=InMemorySaver(),
        subagents=[],
    )


def _texts(state: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}


@pytest.mark.spec("R56")
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("storage", ["filesystem-virtual", "filesystem-host"])
def test_no_file_tool_reaches_another_threads_files(
    storage: str, mode: str, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    virtual = storage == "filesystem-virtual"
    backend = FilesystemBackend(root_dir=root, virtual_mode=virtual)
    model = FakeToolChatModel(_script("/" if virtual else root.as_posix()))
    a, b = _run(shared_agent(model, backend), mode)
    alice_file = root / "threads" / "thread-a" / PATH
    assert alice_file.read_text(encoding="utf-8") == BIG  # unchanged

    # Alice finds her own file
    assert NAME in _texts(a)["a-grep"].text

    bob = _texts(b)
    for i in (0, 2, 3):  # listings and searches from above her folder: nothing of hers
        text = bob[f"b-{i}"].text
        assert "thread-a" not in text and NAME not in text and "compiled module" not in text
    assert "thread-b" in bob["b-0"].text or bob["b-0"].status != "error"
    for i in (1, 4, 5, 6, 7):  # inside her folder: refused
        assert bob[f"b-{i}"].status == "error", bob[f"b-{i}"].text
        assert (
            "permission denied" in bob[f"b-{i}"].text.lower()
            or "permission_denied" in bob[f"b-{i}"].text
        )
    assert not any("compiled module" in bob[f"b-{i}"].text for i in (1, 4, 5, 6, 7))
    assert not (root / "threads" / "thread-a" / "outputs" / "forged.txt").exists()
    # Bob's own folder is his
    assert bob["b-8"].status != "error"
    assert (root / "threads" / "thread-b" / "notes.txt").read_text() == "bob's own"


@pytest.mark.spec("R52", "R56")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_deepagents_listings_do_not_show_temporaries(mode: str, tmp_path: Path) -> None:
    """A live writer's temporary in the thread's folder is left alone and never
    listed: ``ls`` and ``glob`` leave it out."""
    from tests.core.test_stale_temporaries import leftovers

    root = tmp_path / "root"
    _, fresh = leftovers(root / "threads" / "thread-a" / "outputs" / "large_tool_results")
    listed = "/threads/thread-a/outputs/large_tool_results"
    model = FakeToolChatModel(
        [
            AIMessage("", id="a1", tool_calls=[tool_call("big_output", {"n": 150}, "a-big")]),
            AIMessage("", id="a2", tool_calls=[tool_call("ls", {"path": listed}, "a-ls")]),
            AIMessage("", id="a3", tool_calls=[tool_call("glob", {"pattern": "**/*"}, "a-glob")]),
            AIMessage("done", id="a4"),
            AIMessage("done", id="b1"),
        ]
    )
    agent = shared_agent(model, FilesystemBackend(root_dir=root, virtual_mode=True))
    a, _ = _run(agent, mode)
    results = {k: m.text for k, m in _texts(a).items()}
    assert fresh.exists()
    assert NAME in results["a-ls"] and "ars-tmp" not in results["a-ls"]
    assert NAME in results["a-glob"] and "ars-tmp" not in results["a-glob"]
