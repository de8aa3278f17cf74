"""The example chat service (examples/sse_chat_service.py) over ASGI, no sockets:
a run streamed as SSE carries the model's tokens and ``event: context_compression``
frames; the checkpoint endpoints serve the persisted event they announce, the
thread's messages and the files ARS wrote; every thread has its own scripted
model; bad requests get JSON errors. The page in a real browser: test_chat_page.py."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from ars_core import ApproxEstimator, message_from_dict, read_history
from ars_core.l1 import sha256_text
from ars_langchain import ArsSummarizationMiddleware, to_core
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.helpers import parse_frames
from tests.servers import LOCALHOST, free_port

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sse_chat_service.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sse_chat_service", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
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


def answer(question: str) -> str:
    """The demo's scripted answer to ``question`` (one search_logs call, then this)."""
    return f"The logs for {question!r} show 300 requests, all served in under 90 ms."


@pytest.mark.spec("R27", "R30", "R31", "R33", "R44")
@pytest.mark.anyio
async def test_sse_chat_service_streams_compression_frames() -> None:
    """A run streamed as SSE: the answer's tokens, the tool result, the compression
    rounds (L1, then L1 -> L2 on the second message, `completed` after the answer),
    and the checkpoint endpoint serving the event they announce with the thread's
    token count against T."""
    example = load_example()
    setup = example.build_demo()
    app = example.create_app(setup)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        resp, frames = await post_chat(client, "th", "run the unit tests")
        assert resp.status_code == 200 and resp.headers["content-type"].startswith(
            "text/event-stream"
        )
        names = [ev for ev, _ in frames]
        tokens = "".join(json.loads(d)["content"] for ev, d in frames if ev == "token")
        assert tokens == answer("run the unit tests")
        compression = [json.loads(d) for ev, d in frames if ev == "context_compression"]
        log = example.search_logs.invoke({"query": "run the unit tests"})
        path = f"outputs/large_tool_results/search_logs-{sha256_text(log)}.txt"
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
            "name": "search_logs",
            "tool_call_id": "call-1",
        }
        # `completed` is sent after the model call succeeded: after the answer's tokens
        last_token = max(i for i, n in enumerate(names) if n == "token")
        assert (
            names.index("context_compression", names.index("context_compression") + 1) > last_token
        )
        # the offloaded file opens through the service, scoped to the thread
        opened = await client.get(f"/threads/th/files/{path}")
        assert opened.status_code == 200 and opened.text == log
        assert opened.headers["content-type"].startswith("text/plain")

        _, frames2 = await post_chat(client, "th", "and the payment API?")
        tokens2 = "".join(json.loads(d)["content"] for ev, d in frames2 if ev == "token")
        assert tokens2 == answer("and the payment API?")  # the summary call is not streamed
        compression2 = [json.loads(d) for ev, d in frames2 if ev == "context_compression"]
        assert [(c["phase"], c["level"]) for c in compression2] == [
            ("started", "L1"),
            ("completed", "L1"),
            ("started", "L1"),
            ("completed", "L2"),
        ]

        state = (await client.get("/threads/th/compression")).json()
        event = state["summarization_event"]
        assert state["messages"] == 8 and state["threshold"] == 1024
        assert event["cutoff"] == compression2[-1]["cutoff"] == 5
        assert event["file_path"] == compression2[-1]["file_path"]
        assert event["summary_message"]["content"].startswith(
            "Summary of the earlier conversation (messages 1-5; they are no longer shown):\n\n"
            "⟦ARS⟧ Task, user request 1 of 2\nrun the unit tests"
        )
        snapshot = await setup.agent_for("th").aget_state({"configurable": {"thread_id": "th"}})
        after_cutoff = [to_core(m) for m in snapshot.values["messages"][5:]]
        summary = message_from_dict(event["summary_message"])
        assert state["tokens"] == ApproxEstimator().count_messages([summary, *after_cutoff])
        everything = [to_core(m) for m in snapshot.values["messages"]]
        assert state["conversation_tokens"] == ApproxEstimator().count_messages(everything)
        assert state["summary"] == summary.text
        archive = await client.get(f"/threads/th/files/{event['file_path']}")
        header, archived = read_history(archive.text)
        assert (header["start"], header["end"]) == (0, 5)
        assert [m.text for m in archived] == [
            to_core(m).text for m in snapshot.values["messages"][:5]
        ]
        listed = (await client.get("/threads/th/messages")).json()
        assert [m["role"] for m in listed] == ["human", "ai", "tool", "ai"] * 2
        assert listed[3]["text"] == answer("run the unit tests")


@pytest.mark.spec("R36", "R44")
@pytest.mark.anyio
async def test_each_thread_has_its_own_conversation_model_and_files() -> None:
    """Interleaved threads each get the answers to their own questions (a fresh
    scripted model per thread), their own checkpoint, and files only they can open."""
    example = load_example()
    app = example.create_app(example.build_demo())
    transport = httpx.ASGITransport(app=app)
    questions = {t: [f"{t} latency", f"{t} errors", f"{t} disk"] for t in ("a", "b", "c")}
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        for turn in range(3):
            for thread, asked in questions.items():
                _, frames = await post_chat(client, thread, asked[turn])
                tokens = "".join(json.loads(d)["content"] for ev, d in frames if ev == "token")
                assert tokens == answer(asked[turn]), frames
        for thread, asked in questions.items():
            listed = (await client.get(f"/threads/{thread}/messages")).json()
            assert [m["text"] for m in listed if m["role"] == "human"] == asked
            state = (await client.get(f"/threads/{thread}/compression")).json()
            assert state["messages"] == 12
            path = state["summarization_event"]["file_path"]
            assert (await client.get(f"/threads/{thread}/files/{path}")).status_code == 200
        a_path = (await client.get("/threads/a/compression")).json()["summarization_event"][
            "file_path"
        ]
        b_path = (await client.get("/threads/b/compression")).json()["summarization_event"][
            "file_path"
        ]
        assert a_path != b_path  # content-addressed: each thread archived its own history
        other = await client.get(f"/threads/b/files/{a_path}")
        assert other.status_code == 404 and other.json()["error"].endswith("no such file")


@pytest.mark.anyio
async def test_bad_requests_get_a_json_error_and_no_traceback() -> None:
    """Malformed bodies, missing or bad fields, unknown routes, wrong methods and
    paths that leave the thread's file space are 4xx answers with a JSON error."""
    example = load_example()
    app = example.create_app(example.build_demo())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        page = await client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'id="chat-form"' in page.text and 'id="events"' in page.text

        async def error(resp: httpx.Response) -> tuple[int, str]:
            assert resp.headers["content-type"] == "application/json", resp.text
            return resp.status_code, resp.json()["error"]

        status, text = await error(await client.post("/chat", content=b"not json"))
        assert status == 400 and text.startswith("the body is not JSON")
        assert await error(await client.post("/chat", content=b"\xff\xfe")) == (
            400,
            "the body is not JSON (Expecting value: line 1 column 1 (char 0))",
        )
        assert await error(await client.post("/chat", json=["th", "hi"])) == (
            400,
            'expected a JSON object {"thread_id": ..., "message": ...}',
        )
        bad_thread = "thread_id must be 1-128 characters of letters, digits, '.', '_', ':', '-'"
        assert await error(await client.post("/chat", json={"message": "no thread"})) == (
            400,
            bad_thread,
        )
        assert await error(
            await client.post("/chat", json={"thread_id": "a/b", "message": "hi"})
        ) == (400, bad_thread)
        assert await error(await client.post("/chat", json={"thread_id": "t", "message": " "})) == (
            400,
            "message must be a non-empty string",
        )
        assert await error(
            await client.post("/chat", json={"thread_id": "t", "message": "x" * 100_001})
        ) == (413, "message is longer than 100,000 characters")
        assert await error(await client.get("/chat")) == (405, "Method Not Allowed")
        assert await error(await client.get("/nowhere")) == (404, "Not Found")
        status, text = await error(await client.get("/threads/t/files/outputs/%2E%2E/%2E%2E/x"))
        assert status == 400 and "'..' segments are not allowed" in text
        status, text = await error(await client.get("/threads/t/files//etc/passwd"))
        assert status == 400 and "absolute paths are not allowed" in text
        status, text = await error(await client.get("/threads/t/files/outputs/missing.txt"))
        assert status == 404 and text.endswith("no such file")
        assert await error(await client.get("/threads/a%20b/compression")) == (
            404,
            "no such thread id",
        )
        # nothing above reached an agent: no thread has a checkpoint
        assert (await client.get("/threads/t/compression")).json()["messages"] == 0


@pytest.mark.anyio
@pytest.mark.spec("R32", "R33")
async def test_sse_error_frame_when_the_run_fails() -> None:
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


def test_the_example_runs_as_its_docstring_says(tmp_path: Path) -> None:
    """``python examples/sse_chat_service.py --port N`` serves the page and the chat on
    127.0.0.1 (stopped by the test); ``--demo`` prints two requests' frames."""
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
    env.pop("ARS_CHAT_MODEL_URL", None)
    demo = subprocess.run(
        [sys.executable, str(EXAMPLE), "--demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.count("event: end\n") == 2
    assert '"phase":"completed","level":"L2"' in demo.stdout
    port = free_port()
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--port", str(port)], stdout=log, stderr=log, env=env
    )
    try:
        base = f"http://{LOCALHOST}:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                page = httpx.get(f"{base}/", timeout=5)
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, (
                    tmp_path / "server.log"
                ).read_text()
                time.sleep(0.2)
        assert page.status_code == 200 and 'id="chat-form"' in page.text
        with httpx.stream(
            "POST", f"{base}/chat", json={"thread_id": "cli", "message": "disk usage"}, timeout=60
        ) as resp:
            text = "".join(resp.iter_text())
        frames = parse_frames([f + "\n\n" for f in text.split("\n\n") if f])
        tokens = "".join(json.loads(d)["content"] for ev, d in frames if ev == "token")
        assert tokens == answer("disk usage") and frames[-1] == ("end", "{}")
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
