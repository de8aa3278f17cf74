"""ARS deployed on LangGraph's server (``langgraph dev``, in memory, 127.0.0.1).

The example graph (``examples/langgraph_server``) is served as it would be
deployed; a client drives one thread through ``langgraph_sdk`` until L2
happens, reading the ``context_compression`` events from the run stream and
the persisted event from the thread's state, and the history archive from the
folder ``ARS_FILES_URL`` points at.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import get_client, get_sync_client

from ars_core import FsspecBackend, read_history
from tests.e2e.conftest import LangGraphServer

pytestmark = pytest.mark.e2e

SUMMARY_PROMPT = "SUMMARIZE THE CONVERSATION BELOW\n{messages}"
CONTEXT = {
    "summary_threshold": 0.25,  # T = 256 tokens
    "summary_keep_messages": 2,
    "summary_l2_trigger_ratio": 0.5,
    "summary_prompt": SUMMARY_PROMPT,
}
MAX_TURNS = 6


def user_turn(i: int) -> dict[str, Any]:
    body = " ".join(f"fact {i}.{k}: the build of module {k} passed" for k in range(18))
    return {"messages": [{"role": "user", "content": f"turn {i}\n{body}"}]}


def compression_events(parts: list[Any]) -> list[dict[str, Any]]:
    return [
        p.data
        for p in parts
        if p.event == "custom"
        and isinstance(p.data, dict)
        and p.data.get("type") == "context_compression"
    ]


def check_l2(
    server: LangGraphServer, thread_id: str, events: list[dict[str, Any]], values: dict[str, Any]
) -> None:
    """The stream's L2 ``completed`` event, the thread state and the archive agree."""
    completed = [e for e in events if e["phase"] == "completed" and e.get("cutoff")]
    assert completed, f"no L2 round in {MAX_TURNS} turns: {events}"
    last = completed[-1]
    started = [e for e in events if e["phase"] == "started" and e["round_id"] == last["round_id"]]
    assert len(started) == 1 and events.index(started[0]) < events.index(last)
    assert not [e for e in events if e["phase"] == "failed"]
    assert last["tokens_after"] < last["tokens_before"] and last["threshold"] == 256

    event = values["_summarization_event"]
    assert (event["cutoff"], event["file_path"]) == (last["cutoff"], last["file_path"])
    summary = event["summary_message"]["content"]
    # the scripted model summarized: it read one message, the rendered prompt
    assert "(1 messages read) About: SUMMARIZE THE CONVERSATION BELOW" in summary
    state = values["messages"]
    # the archive holds exactly the state messages the summary covers
    backend = FsspecBackend(f"file://{server.files}").scoped(thread_id)
    header, archived = read_history(backend.read_text(event["file_path"]))
    assert (header["start"], header["end"]) == (event["previous_cutoff"], event["cutoff"])
    assert [m.text for m in archived] == [
        m["content"] for m in state[event["previous_cutoff"] : event["cutoff"]]
    ]
    # the main model's view was system + summary + state[cutoff:] (its reply counts them)
    sent = 2 + (len(state) - 1 - event["cutoff"])
    assert state[-1]["type"] == "ai"
    assert state[-1]["content"].startswith(f"({sent} messages read) About: turn ")


@pytest.mark.spec("R24", "R30", "R31", "R33", "R44")
def test_langgraph_server_thread_reaches_l2_with_events_on_the_run_stream(
    langgraph_server: LangGraphServer,
) -> None:
    """Sync client: turns on one thread until an L2 ``completed`` event arrives on the
    ``custom`` stream; the thread state holds the same event, the archive file holds
    the covered messages, and the model's reply shows it got summary + kept tail."""
    client = get_sync_client(url=langgraph_server.url)
    thread_id = client.threads.create()["thread_id"]
    events: list[dict[str, Any]] = []
    for i in range(MAX_TURNS):
        parts = list(
            client.runs.stream(
                thread_id, "agent", input=user_turn(i), context=CONTEXT,
                stream_mode=["custom", "values"],
            )
        )  # fmt: skip
        assert not [p for p in parts if p.event == "error"], parts
        events += compression_events(parts)
        if any(e["phase"] == "completed" and e.get("cutoff") for e in events):
            break
    values = client.threads.get_state(thread_id)["values"]
    check_l2(langgraph_server, thread_id, events, values)


@pytest.mark.spec("R24", "R25", "R30", "R31")
@pytest.mark.anyio
async def test_langgraph_server_chains_summaries_async_client(
    langgraph_server: LangGraphServer,
) -> None:
    """Async client, another thread: two L2 rounds chain (the second's
    ``previous_cutoff`` is the first's cutoff) and every round's events are paired."""
    client = get_client(url=langgraph_server.url)
    thread_id = (await client.threads.create())["thread_id"]
    events: list[dict[str, Any]] = []
    cutoffs: list[int] = []
    for i in range(MAX_TURNS + 2):
        parts = [
            p
            async for p in client.runs.stream(
                thread_id, "agent", input=user_turn(i), context=CONTEXT,
                stream_mode=["custom", "values"],
            )
        ]  # fmt: skip
        assert not [p for p in parts if p.event == "error"], parts
        events += compression_events(parts)
        state = await client.threads.get_state(thread_id)
        event = state["values"].get("_summarization_event")
        if event and (not cutoffs or event["cutoff"] != cutoffs[-1]):
            assert event["previous_cutoff"] == (cutoffs[-1] if cutoffs else 0)
            cutoffs.append(event["cutoff"])
        if len(cutoffs) >= 2:
            break
    assert len(cutoffs) >= 2 and cutoffs == sorted(cutoffs)
    rounds = {e["round_id"] for e in events}
    for round_id in rounds:
        assert [e["phase"] for e in events if e["round_id"] == round_id] == ["started", "completed"]
    check_l2(langgraph_server, thread_id, events, state["values"])
