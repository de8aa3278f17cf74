"""The example chat service runs one run per thread at a time, and a run outlives
its client (examples/sse_chat_service.py, ``ThreadRuns``): concurrent messages on
one thread all reach the checkpoint, and a client that disconnects during a tool
call leaves no call without a result."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.test_chat_page import ServedApp
from tests.langchain.test_sse_service import answer, load_example, post_chat

pytestmark = pytest.mark.spec("R33", "R44", "R62")


@pytest.mark.anyio
async def test_four_concurrent_messages_on_one_thread_are_all_kept() -> None:
    """Four ``POST /chat`` at once on one thread: each stream ends with ``end`` and
    its own answer (three of them opened with ``queued``), and the checkpoint holds
    all four user turns, each followed by its own run (one run at a time)."""
    example = load_example()
    app = example.create_app(example.build_demo())
    transport = httpx.ASGITransport(app=app)
    questions = [f"question {i}" for i in range(4)]
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        results = await asyncio.gather(*(post_chat(client, "busy", q) for q in questions))
        history = (await client.get("/threads/busy/messages")).json()
    for question, (resp, frames) in zip(questions, results, strict=True):
        assert resp.status_code == 200
        names = [name for name, _ in frames]
        assert names[-1] == "end"
        text = "".join(json.loads(d)["content"] for name, d in frames if name == "token")
        assert text == answer(question)
    assert sum(1 for _, frames in results if frames[0][0] == "queued") == 3
    humans = [m["text"] for m in history if m["role"] == "human"]
    assert sorted(humans) == questions
    # one run at a time: every user turn is followed by its tool call, result and answer
    for i, m in enumerate(history):
        if m["role"] == "human":
            assert [h["role"] for h in history[i + 1 : i + 4]] == ["ai", "tool", "ai"]
            assert history[i + 3]["text"] == answer(m["text"])


def test_a_client_that_disconnects_during_a_tool_call_leaves_no_call_without_a_result() -> None:
    """The client goes away while a tool runs: the run is not cancelled with the
    response; the tool's result and the final answer reach the checkpoint, and the
    next message on the thread is answered normally."""
    started, release = threading.Event(), threading.Event()

    @tool
    def slow_build(target: str) -> str:
        """Build a target (slow)."""
        started.set()
        release.wait(30)
        return f"{target}: built"

    model = FakeToolChatModel(
        [
            AIMessage("", id="a-call", tool_calls=[tool_call("slow_build", {"target": "x"}, "c1")]),
            AIMessage("built it", id="a-done"),
            AIMessage("still here", id="a-next"),
        ]
    )
    agent = create_agent(
        model,
        tools=[slow_build],
        middleware=[ArsSummarizationMiddleware(read_tool=False)],
        checkpointer=InMemorySaver(),
    )
    example = load_example()
    config = {"configurable": {"thread_id": "gone"}}
    with ServedApp(example.create_app(agent)) as served:
        with httpx.stream(
            "POST", f"{served.url}/chat", json={"thread_id": "gone", "message": "build x"}
        ) as resp:
            assert resp.status_code == 200
            assert started.wait(30)
        # the client is gone; the tool finishes after that
        time.sleep(0.3)
        release.set()
        deadline = time.monotonic() + 30
        while agent.get_state(config).values["messages"][-1].id != "a-done":
            assert time.monotonic() < deadline, "the run did not finish after the disconnect"
            time.sleep(0.05)
        messages: list[Any] = agent.get_state(config).values["messages"]
        assert [type(m) for m in messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
        assert messages[2].tool_call_id == "c1" and messages[2].text == "x: built"
        nxt = httpx.post(f"{served.url}/chat", json={"thread_id": "gone", "message": "and?"})
        assert nxt.status_code == 200 and "event: end" in nxt.text
    assert model.main_calls[-1][-1].text == "and?"
