"""The example chat service with a real model: every thread talks to SmolLM2
behind llama-cpp-python's OpenAI-compatible server (the ``llama_server``
fixture), which writes the answers streamed to the page and the summary ARS
persists; the summary call's tokens never reach the stream."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.langchain.test_sse_service import load_example, post_chat
from tests.servers import LlamaServer

pytestmark = pytest.mark.e2e


def turn(i: int) -> str:
    """A user message of about 300 estimated tokens, numbered ``i``."""
    notes = " ".join(
        f"Note {i}.{k}: on day {i * 10 + k} the billing service moved to cluster {k}."
        for k in range(16)
    )
    return f"Turn {i}. Please remember these notes. {notes}"


@pytest.mark.spec("R27", "R31", "R33")
@pytest.mark.anyio
async def test_chat_service_with_a_real_model_streams_its_answers_and_persists_its_summary(
    llama_server: LlamaServer,
) -> None:
    """T = 512: the first message is answered as is; the second is over T, so the
    round goes to L2, the real model summarizes the first exchange (archived, its
    usage reported), and the answer streamed is the answer stored, token for token."""
    example = load_example()
    setup = example.build_demo(
        llama_server.base_url, model_name=llama_server.model, max_tokens=16, threshold_k=0.5
    )
    transport = httpx.ASGITransport(app=example.create_app(setup))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://test", timeout=600
    ) as client:
        streamed: list[str] = []
        rounds: list[list[dict[str, Any]]] = []
        for i in range(2):
            _, frames = await post_chat(client, "real", turn(i))
            assert frames[-1] == ("end", "{}"), frames
            streamed.append("".join(json.loads(d)["content"] for ev, d in frames if ev == "token"))
            rounds.append([json.loads(d) for ev, d in frames if ev == "context_compression"])
        assert rounds[0] == []
        assert [(e["phase"], e["level"]) for e in rounds[1]] == [
            ("started", "L1"),
            ("completed", "L2"),
        ]
        started, completed = rounds[1]
        assert started["tokens_before"] >= started["threshold"] == 512
        assert completed["tokens_after"] < completed["tokens_before"]

        listed = (await client.get("/threads/real/messages")).json()
        assert [m["role"] for m in listed] == ["human", "ai", "human", "ai"]
        # what the page showed is what the checkpoint holds: no summary token leaked
        assert streamed == [listed[1]["text"], listed[3]["text"]] and all(streamed)

        state = (await client.get("/threads/real/compression")).json()
        event = state["summarization_event"]
        assert (
            event["cutoff"] == completed["cutoff"] and event["file_path"] == completed["file_path"]
        )
        header, _, body = event["summary_message"]["content"].partition("\n\n")
        assert header.startswith("Summary of the earlier conversation (messages 1-")
        summary = body.split("\n\nThe full text of those messages is saved at")[0].strip()
        assert (
            summary and "## Task" not in summary
        )  # the model's words, not the extractive fallback
        assert event["summary_usage"]["input_tokens"] > 0  # reported by the provider
        archive = await client.get(f"/threads/real/files/{event['file_path']}")
        assert archive.status_code == 200 and turn(0) in archive.text
