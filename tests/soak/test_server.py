"""The soak driven through LangGraph's real server (``langgraph dev``).

The example graph (``examples/langgraph_server``) serves a few dozen threads at
once through ``langgraph_sdk``, streaming; some clients disconnect right after
their run starts and send the turn again once that run has ended (the same
message id). The invariants are read from the server's state API and the files
folder: every user turn in its thread's state exactly once; every event of any
checkpoint points at a whole archive in the thread's folder, and together they
hold every message before the cutoff; every file the summary names exists and
matches its hash; every ``started`` the clients saw ends; no temporary file.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from ars_core import FsspecBackend
from tests.soak.fleet import FILE_RE, archived_ids, content_ok

pytestmark = pytest.mark.soak

THREADS = 30
TURNS = 6
CONTEXT = {"summary_threshold": 0.5, "summary_keep_messages": 2, "summary_l2_trigger_ratio": 0.5}


def turn_text(thread: int, turn: int) -> str:
    facts = " ".join(
        f"fact {turn}.{k}: service s{k} answered in {k * 13 % 97} ms" for k in range(14)
    )
    return f"Thread {thread} turn {turn}. {facts}"


async def drive(client: Any, index: int, rng: random.Random, seen: dict[str, Any]) -> str:
    thread = await client.threads.create()
    thread_id = thread["thread_id"]
    for turn in range(TURNS):
        message = {"role": "user", "content": turn_text(index, turn), "id": f"t{index}-u{turn}"}
        disconnect = turn < TURNS - 1 and rng.random() < 0.15
        while True:
            run_id = None
            events: list[dict[str, Any]] = []
            stream = client.runs.stream(
                thread_id,
                "agent",
                input={"messages": [message]},
                context=CONTEXT,
                stream_mode=["custom", "values"],
            )
            async for part in stream:
                if part.event == "metadata":
                    run_id = part.data["run_id"]
                    if disconnect:
                        break  # the client goes away; the server decides what the run does
                elif part.event == "custom" and isinstance(part.data, dict):
                    events.append(part.data)
            if not disconnect:
                seen["events"].append(events)
                break
            seen["disconnects"] += 1
            if run_id is not None:
                await client.runs.join(thread_id, run_id)
            disconnect = False  # the client sends the same turn again
    return thread_id


async def soak(url: str) -> tuple[list[str], dict[str, Any]]:
    from langgraph_sdk import get_client

    client = get_client(url=url)
    rng = random.Random(7)
    seen: dict[str, Any] = {"events": [], "disconnects": 0}
    ids = await asyncio.gather(*(drive(client, i, rng, seen) for i in range(THREADS)))
    return list(ids), seen


@pytest.mark.spec("R24", "R52", "R55", "R56")
def test_langgraph_dev_serving_dozens_of_threads_loses_nothing(
    langgraph_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph_sdk import get_sync_client

    thread_ids, seen = asyncio.run(soak(langgraph_server.url))
    client = get_sync_client(url=langgraph_server.url)
    files = Path(langgraph_server.files)
    root = FsspecBackend(f"file://{files}")
    bad: list[str] = []
    checked: set[Path] = set()
    rounds = 0

    for index, thread_id in enumerate(thread_ids):
        scoped = root.scoped(thread_id)
        folder = files / "threads" / str(scoped.scope)

        def check_file(thread: str, path: str, where: str, folder: Path = folder) -> None:
            target = folder / path
            if not target.is_file():
                bad.append(f"{thread}: {where} names {path}, which its folder does not hold")
            elif target not in checked:
                checked.add(target)
                if not content_ok(path, target.read_bytes()):
                    bad.append(f"{thread}: {path} does not match its content hash")

        values = client.threads.get_state(thread_id)["values"]
        messages = values["messages"]
        for turn in range(TURNS):
            count = sum(1 for m in messages if m.get("id") == f"t{index}-u{turn}")
            if count != 1:
                bad.append(f"{thread_id}: user turn {turn} is in the state {count}x")
        event = values.get("_summarization_event")
        if not event:
            bad.append(f"{thread_id}: no L2 round in {TURNS} turns")
            continue
        history = client.threads.get_history(thread_id, limit=1000)
        events = [h["values"].get("_summarization_event") for h in history]
        rounds += len({e["file_path"] for e in events if e})
        covered = archived_ids(thread_id, events, scoped, check_file, bad)
        lost = [
            i for i, m in enumerate(messages[: event["cutoff"]]) if m.get("id") not in covered[i]
        ]
        if lost:
            bad.append(f"{thread_id}: messages {lost} are in no archive")
        summary = str(event["summary_message"].get("content", ""))
        for path in FILE_RE.findall(summary):
            check_file(thread_id, path, "the summary")

    for run_events in seen["events"]:
        phases: dict[str, set[str]] = defaultdict(set)
        for e in run_events:
            if e.get("type") == "context_compression":
                phases[str(e.get("round_id"))].add(str(e.get("phase")))
        for round_id, got in phases.items():
            if "started" in got and not {"completed", "failed"} & got:
                bad.append(f"round {round_id} started and never ended")
    temporaries = [p for p in files.rglob("*") if ".ars-tmp" in p.name]
    bad += [f"temporary file left behind: {p}" for p in temporaries]

    with capsys.disabled():
        print(
            f"\nlanggraph dev soak: {THREADS} threads x {TURNS} turns, "
            f"{seen['disconnects']} disconnects, {rounds} L2 rounds, "
            f"{len(checked)} files checked, violations {len(bad)}"
        )
        for line in bad[:20]:
            print(f"  violation: {line}")
    assert bad == []
    assert seen["disconnects"] > 0 and rounds >= THREADS
