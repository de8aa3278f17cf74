"""The example chat service (examples/sse_chat_service.py) over ASGI, no sockets (R33, R44):
a run streamed as SSE carries the model's tokens and ``event: context_compression``
frames; the checkpoint endpoint serves the persisted event they announce."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from ars_core.l1 import sha256_text
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.helpers import parse_frames

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sse_chat_service.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sse_chat_service", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def post_chat(
    client: httpx.AsyncClient, thread: str, message: str
) -> tuple[httpx.Response, list[Any]]:
    async with client.stream(
        "POST", "/chat", json={"thread_id": thread, "message": message}
    ) as resp:
        text = "".join([chunk async for chunk in resp.aiter_text()])
    frames = [f + "\n\n" for f in text.split("\n\n") if f]
    return resp, parse_frames(frames)


@pytest.mark.anyio
async def test_r33_r44_sse_chat_service_streams_compression_frames() -> None:
    example = load_example()
    app = example.create_app(example.build_demo_agent())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        resp, frames = await post_chat(client, "th", "run the unit tests")
        assert resp.status_code == 200 and resp.headers["content-type"].startswith(
            "text/event-stream"
        )
        names = [ev for ev, _ in frames]
        tokens = "".join(json.loads(d)["content"] for ev, d in frames if ev == "token")
        assert tokens == "All 400 unit tests pass."
        compression = [json.loads(d) for ev, d in frames if ev == "context_compression"]
        log = example.run_tests.invoke({"suite": "unit"})
        path = f"outputs/large_tool_results/run_tests-{sha256_text(log)}.txt"
        assert [(c["phase"], c["level"]) for c in compression] == [
            ("started", "L1"),
            ("completed", "L1"),
        ]
        assert compression[1]["offloaded"] == [path] and "cutoff" not in compression[1]
        assert names[-1] == "end" and set(names) == {
            "token",
            "tool",
            "context_compression",
            "update",
            "end",
        }
        (tool_frame,) = [json.loads(d) for ev, d in frames if ev == "tool"]
        assert tool_frame == {
            "content": log,
            "id": tool_frame["id"],
            "name": "run_tests",
            "tool_call_id": "call-1",
        }
        # `completed` is sent after the model call succeeded (R31): after the answer's tokens
        last_token = max(i for i, n in enumerate(names) if n == "token")
        assert (
            names.index("context_compression", names.index("context_compression") + 1) > last_token
        )

        ci_log = " ".join(f"job{i} ok" for i in range(200))
        _, frames2 = await post_chat(client, "th", f"anything else failing? The CI log: {ci_log}")
        tokens2 = "".join(json.loads(d)["content"] for ev, d in frames2 if ev == "token")
        assert tokens2 == "Nothing else is failing."  # the summary call is not streamed (R27)
        compression2 = [json.loads(d) for ev, d in frames2 if ev == "context_compression"]
        assert [(c["phase"], c["level"]) for c in compression2] == [
            ("started", "L1"),
            ("completed", "L2"),
        ]

        state = (await client.get("/threads/th/compression")).json()
        event = state["summarization_event"]
        assert state["messages"] == 6
        assert event["cutoff"] == compression2[1]["cutoff"] == 3
        assert event["file_path"] == compression2[1]["file_path"]
        assert event["summary_message"]["content"].startswith(
            "Summary of the earlier conversation (messages 1-3; they are no longer shown):\n\n"
            "Summary: the user ran the unit suite; all 400 tests passed."
        )

        bad = await client.post("/chat", json={"message": "no thread"})
        assert bad.status_code == 400


@pytest.mark.anyio
async def test_r32_r33_sse_error_frame_when_the_run_fails() -> None:
    """A model error that escapes ends the stream with `event: error`."""
    example = load_example()
    model = FakeToolChatModel([RuntimeError("provider down")])
    agent = create_agent(
        model, tools=[], middleware=[ArsSummarizationMiddleware()], checkpointer=InMemorySaver()
    )
    transport = httpx.ASGITransport(app=example.create_app(agent))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        _, frames = await post_chat(client, "e", "hello")
    assert frames == [
        ("error", json.dumps({"error": "RuntimeError: provider down"}, separators=(",", ":")))
    ]
