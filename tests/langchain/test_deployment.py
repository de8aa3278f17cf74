"""Several workers on one thread: the production shape of ``docs/deployment.md``.

A LangGraph server runs each thread's runs on whichever worker picks them up;
the workers share a PostgreSQL checkpointer and an S3 bucket and nothing else.
Here each worker is its own agent with its own ``ArsSummarizationMiddleware``
(its own in-memory sessions), its own PostgreSQL connection and its own S3
client, over one thread:

* taking turns (the server's queue): every turn continues the chain the other
  worker left in the checkpoint;
* racing (two runs of one thread at the same moment, from the same checkpoint,
  as with double-texting): both archive the same history, and the file is whole.

Oracles: every event in every checkpoint of the thread points at an archive
that exists and holds exactly that checkpoint's ``messages[previous_cutoff:cutoff]``
(no lost file); every object in the bucket parses completely (no torn archive);
the next call on the thread sends exactly ``[system, summary] + messages[cutoff:]``
of the checkpoint it runs on (consistent cutoff).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ars_core import FsspecBackend, SummaryConfig, read_history
from ars_core.messages import message_from_dict
from ars_core.testing import FakeSummarizer
from ars_langchain import ArsSummarizationMiddleware, from_core
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.helpers import SYSTEM, build_agent, prose
from tests.servers import S3Server

CONFIG = SummaryConfig(summary_threshold=1, summary_l2_trigger_ratio=0.5, summary_keep_messages=2)
PREFIX = "ars"


@dataclass
class Race:
    """While ``on`` is set, a worker's model call waits for the other worker's."""

    on: threading.Event
    barrier: threading.Barrier


@dataclass
class Worker:
    """One server worker: its own model, middleware, S3 client and checkpointer."""

    name: str
    model: FakeToolChatModel
    summarizer: FakeSummarizer
    middleware: ArsSummarizationMiddleware


def make_worker(name: str, bucket: str, s3: S3Server, race: Race | None = None) -> Worker:
    options = {**s3.storage_options(), "skip_instance_cache": True}  # a client of its own
    backend = FsspecBackend(f"s3://{bucket}/{PREFIX}", storage_options=options)

    def answer(messages: list[BaseMessage]) -> AIMessage:
        if race is not None and race.on.is_set():
            race.barrier.wait(timeout=60)  # both runs have read the checkpoint and done L2
        return AIMessage(prose(f"{name} answers", 150))

    model = FakeToolChatModel([answer] * 50)
    summarizer = FakeSummarizer(text=lambda rendered: f"summary by {name} of {len(rendered)} chars")
    # the fixed rounds: every raced turn runs L2 over the same history (lean rounds leave
    # room after a round, so a raced turn could fit below T)
    middleware = ArsSummarizationMiddleware(
        CONFIG,
        backend=backend,
        summarizer=summarizer,
        compressor_options={"lean_rounds": False},
    )
    return Worker(name, model, summarizer, middleware)


def turn(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(prose(f"turn {i}", 150), id=f"h-{i}")]}


def check_thread(
    agent: Any, config: dict[str, Any], s3: S3Server, bucket: str, thread_id: str
) -> list[dict[str, Any]]:
    """No lost file, no torn archive (see the module doc); returns the events of all checkpoints."""
    fs = s3.client()
    keys = [
        o["Key"]
        for page in fs.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{PREFIX}/")
        for o in page.get("Contents", [])
    ]
    archives = {k: fs.get_object(Bucket=bucket, Key=k)["Body"].read().decode("utf-8") for k in keys}
    assert archives, "nothing was archived"
    for key, text in archives.items():
        assert f"/threads/{thread_id}/outputs/conversation_history/" in key
        header, messages = read_history(text)  # every line parses: the file is whole
        assert header["count"] == len(messages) == header["end"] - header["start"]
    events = []
    for snap in agent.get_state_history(config):
        event = snap.values.get("_summarization_event")
        if not event:
            continue
        events.append(event)
        key = f"{PREFIX}/threads/{thread_id}/{event['file_path']}"
        assert key in archives, f"lost archive {key}"
        header, archived = read_history(archives[key])
        state = snap.values["messages"]
        assert (header["start"], header["end"]) == (event["previous_cutoff"], event["cutoff"])
        assert [from_core(m) for m in archived] == state[event["previous_cutoff"] : event["cutoff"]]
    return events


def check_view(model: FakeToolChatModel, values: dict[str, Any]) -> None:
    """The last main call sent ``[system, summary] + messages[cutoff:]`` of its checkpoint."""
    event = values["_summarization_event"]
    summary = from_core(message_from_dict(event["summary_message"]))
    state = values["messages"]
    assert model.main_calls[-1] == [SystemMessage(SYSTEM), summary, *state[event["cutoff"] : -1]]


@pytest.mark.spec("R24", "R25", "R44", "R52", "R56")
def test_two_workers_take_turns_on_one_thread_postgres_s3(
    pg_setup: str, s3_endpoint: S3Server, thread_id: str
) -> None:
    """Turns alternate between two workers; each continues the chain the other left:
    cutoffs grow, ``previous_cutoff`` is always the previous event's cutoff, and each
    worker's view is built from the checkpoint, not from its own memory."""
    from langgraph.checkpoint.postgres import PostgresSaver

    bucket = s3_endpoint.create_bucket()
    workers = [make_worker(n, bucket, s3_endpoint) for n in ("worker-a", "worker-b")]
    config = {"configurable": {"thread_id": thread_id}}
    chain: list[dict[str, Any]] = []
    with (
        PostgresSaver.from_conn_string(pg_setup) as saver_a,
        PostgresSaver.from_conn_string(pg_setup) as saver_b,
    ):
        agents = [
            build_agent(w.model, w.middleware)(s)
            for w, s in zip(workers, (saver_a, saver_b), strict=True)
        ]
        for i in range(8):
            k = (i // 2) % 2  # a, a, b, b, ...: L2 rounds land on both workers
            agents[k].invoke(turn(i), config)
            values = agents[k].get_state(config).values
            event = values.get("_summarization_event")
            if event and (not chain or event != chain[-1]):
                assert event["previous_cutoff"] == (chain[-1]["cutoff"] if chain else 0)
                chain.append(event)
            if event:
                check_view(workers[k].model, values)
        assert len(chain) >= 3
        contents = [e["summary_message"]["content"] for e in chain]
        for worker in workers:  # both workers summarized, each continuing the other's chain
            assert any(f"summary by {worker.name} of" in c for c in contents)
        firsts = [msgs[0].text for w in workers for msgs, _ in w.summarizer.calls]
        for previous in contents[:-1]:
            assert previous in firsts
        events = check_thread(agents[0], config, s3_endpoint, bucket, thread_id)
    assert {e["cutoff"] for e in events} == {e["cutoff"] for e in chain}


@pytest.mark.spec("R24", "R44", "R52")
def test_two_workers_racing_on_one_thread_leave_whole_archives_and_a_consistent_cutoff(
    pg_setup: str, s3_endpoint: S3Server, thread_id: str
) -> None:
    """Two runs of one thread start from the same checkpoint at once (each waits for
    the other inside its model call), both run L2 over the same history and write the
    same content-addressed archive; the thread keeps one of the two branches, whose
    event matches its messages, and the next turn builds its view from it."""
    from langgraph.checkpoint.postgres import PostgresSaver

    bucket = s3_endpoint.create_bucket()
    race = Race(threading.Event(), threading.Barrier(2))
    racers = [make_worker(n, bucket, s3_endpoint, race) for n in ("worker-a", "worker-b")]
    config = {"configurable": {"thread_id": thread_id}}
    with (
        PostgresSaver.from_conn_string(pg_setup) as saver_a,
        PostgresSaver.from_conn_string(pg_setup) as saver_b,
    ):
        agents = [
            build_agent(w.model, w.middleware)(s)
            for w, s in zip(racers, (saver_a, saver_b), strict=True)
        ]
        for i in range(4):  # a few turns first, into L2, one worker at a time
            agents[i % 2].invoke(turn(i), config)
        before = agents[0].get_state(config).values
        assert before.get("_summarization_event"), "the race should start from an existing summary"

        # both runs start from this checkpoint (its id given: neither reads the other's
        # input, whichever LangGraph saves first)
        start = agents[0].get_state(config).config
        race.on.set()
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(agents[k].invoke, turn(10 + k), start) for k in range(2)]
            results = [f.result(timeout=120) for f in futures]
        race.on.clear()
        # both raced from the same checkpoint: each summarized the same history
        covered = [w.summarizer.calls[-1][0] for w in racers]
        assert covered[0] == covered[1]
        assert all(len(r["messages"]) == len(before["messages"]) + 2 for r in results)

        after = agents[0].get_state(config).values
        event = after["_summarization_event"]
        assert event["previous_cutoff"] == before["_summarization_event"]["cutoff"]
        assert event["cutoff"] <= len(after["messages"]) - CONFIG.summary_keep_messages
        assert after["messages"][-2].id in {"h-10", "h-11"}  # the branch the thread kept
        events = check_thread(agents[0], config, s3_endpoint, bucket, thread_id)
        # both branches' events point at one whole archive of the same range
        raced = [
            e for e in events if e["previous_cutoff"] == before["_summarization_event"]["cutoff"]
        ]
        assert len(raced) == 2 and len({e["file_path"] for e in raced}) == 1

        # the next turn, on the worker whose branch may have been dropped, continues the kept one
        loser = 0 if after["messages"][-2].id == "h-11" else 1
        agents[loser].invoke(turn(20), config)
        final = agents[loser].get_state(config).values
        assert [m.id for m in final["messages"][: len(after["messages"])]] == [
            m.id for m in after["messages"]
        ]
        check_view(racers[loser].model, final)
        check_thread(agents[0], config, s3_endpoint, bucket, thread_id)
