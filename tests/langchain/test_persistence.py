"""Persistence across turns and processes.

* chained summaries over many turns keep a growing, cumulative global cutoff,
  every archive holds exactly the state messages between two cutoffs, and every
  view is ``[latest summary] + state[cutoff:]``;
* a second Python process reading the same PostgreSQL thread continues from the
  persisted event.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, messages_from_dict

from ars_core import FsspecBackend, SummaryConfig, read_history
from ars_core.messages import message_from_dict
from ars_core.prompt import escape_text
from ars_core.testing import FakeSummarizer
from ars_langchain import ArsSummarizationMiddleware, from_core
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.conftest import SAVERS, async_saver, make_saver
from tests.langchain.helpers import SYSTEM, build_agent, prose

pytestmark = pytest.mark.spec("R24", "R25", "R44")

REPO = Path(__file__).resolve().parents[2]
CHAIN_CONFIG = SummaryConfig(
    summary_threshold=1, summary_l2_trigger_ratio=0.5, summary_keep_messages=2
)
RESUME_CONFIG = CHAIN_CONFIG


def check_chain(
    model: FakeToolChatModel,
    summarizer: FakeSummarizer,
    history: list[Any],
    final: dict[str, Any],
    backend: FsspecBackend,
    turns: int,
) -> None:
    state = final["messages"]
    assert len(state) == 2 * turns
    # the event as it evolved, oldest checkpoint first
    events = []
    for snap in reversed(history):
        ev = snap.values.get("_summarization_event")
        if ev and (not events or ev != events[-1]):
            events.append(ev)
    assert len(events) >= 3, "expected several chained summaries"
    cutoffs = [e["cutoff"] for e in events]
    assert cutoffs == sorted(set(cutoffs))  # strictly growing
    assert [e["previous_cutoff"] for e in events] == [0, *cutoffs[:-1]]  # cumulative chain
    # every archive holds exactly state[previous_cutoff:cutoff], losslessly
    for e in events:
        header, archived = read_history(backend.read_text(e["file_path"]))
        assert (header["start"], header["end"]) == (e["previous_cutoff"], e["cutoff"])
        assert [from_core(m) for m in archived] == state[e["previous_cutoff"] : e["cutoff"]]
    # every chained summary was made from the previous summary plus the new messages
    for (msgs, _), e_prev in zip(summarizer.calls[1:], events, strict=False):
        assert msgs[0].text == e_prev["summary_message"]["content"]
    # the last view is the latest summary + everything after its cutoff
    last = events[-1]
    summary = from_core(message_from_dict(last["summary_message"]))
    assert model.main_calls[-1] == [SystemMessage(SYSTEM), summary, *state[last["cutoff"] : -1]]
    assert final["_summarization_event"] == last


def chain_setup(
    tag: str,
) -> tuple[FakeToolChatModel, FakeSummarizer, ArsSummarizationMiddleware, FsspecBackend, int]:
    turns = 9
    model = FakeToolChatModel(
        [AIMessage(prose(f"answer {i}", 150), id=f"a-{i}") for i in range(turns)]
    )
    summarizer = FakeSummarizer(text=lambda rendered: f"summary of {len(rendered)} characters")
    backend = FsspecBackend(f"memory://chain-{tag}")
    mw = ArsSummarizationMiddleware(
        CHAIN_CONFIG,
        backend=backend,
        summarizer=summarizer,
        compressor_options={"lean_rounds": False},
    )
    return model, summarizer, mw, backend, turns


@pytest.mark.parametrize("kind", SAVERS)
@pytest.mark.spec("R24", "R25")
def test_chained_summaries_grow_global_cutoff_sync(
    kind: str, tmp_path: Path, thread_id: str, request: pytest.FixtureRequest
) -> None:
    """Chained summaries over nine turns on a sync graph."""
    model, summarizer, mw, backend, turns = chain_setup(f"{kind}-{thread_id}")
    config = {"configurable": {"thread_id": thread_id}}
    with make_saver(kind, tmp_path, request) as saver:
        agent = build_agent(model, mw)(saver)
        for i in range(turns):
            agent.invoke(
                {"messages": [HumanMessage(prose(f"question {i}", 150), id=f"h-{i}")]}, config
            )
        final = agent.get_state(config).values
        history = list(agent.get_state_history(config))
    check_chain(model, summarizer, history, final, backend.scoped(thread_id), turns)


@pytest.mark.parametrize("kind", SAVERS)
@pytest.mark.spec("R24", "R25", "R26")
def test_chained_summaries_grow_global_cutoff_async(
    kind: str, tmp_path: Path, thread_id: str, request: pytest.FixtureRequest
) -> None:
    """Chained summaries over nine turns on an async graph (archive and summary concurrently)."""
    model, summarizer, mw, backend, turns = chain_setup(f"a-{kind}-{thread_id}")
    config = {"configurable": {"thread_id": thread_id}}
    url = request.getfixturevalue("pg_setup") if kind == "postgres" else None

    async def main() -> tuple[dict[str, Any], list[Any]]:
        async with async_saver(kind, tmp_path, url) as saver:
            agent = build_agent(model, mw)(saver)
            for i in range(turns):
                await agent.ainvoke(
                    {"messages": [HumanMessage(prose(f"question {i}", 150), id=f"h-{i}")]}, config
                )
            final = (await agent.aget_state(config)).values
            return final, [s async for s in agent.aget_state_history(config)]

    final, history = asyncio.run(main())
    check_chain(model, summarizer, history, final, backend.scoped(thread_id), turns)


@pytest.mark.spec("R24", "R25", "R44")
def test_resume_in_a_new_process_from_postgres(
    pg_setup: str, tmp_path: Path, thread_id: str
) -> None:
    """Turn one runs here and persists an L2 event in PostgreSQL; a
    second Python process (new middleware, new model, nothing in memory) reads the
    same thread, rebuilds the view from the persisted event, runs L2 again and the
    new cutoff continues the chain (previous_cutoff == the first cutoff)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    root = tmp_path / "files"
    backend = FsspecBackend(f"file://{root}")
    seed: list[Any] = [
        # short requests: the first and the newest are the task every summary carries
        HumanMessage(prose(f"turn {i}", 30), id=f"m-{i}")
        if i % 2 == 0
        else AIMessage(prose(f"turn {i}", 270), id=f"m-{i}")
        for i in range(7)
    ]
    model = FakeToolChatModel(
        [AIMessage("SUMMARY-ONE", id="s1"), AIMessage(prose("answer one", 20), id="a1")]
    )
    # read_tool=False (here and in the child): the child's request sits within a few
    # tokens of T with the tool's schema (the archive's hashed name tokenizes to a
    # varying count), so its round would be forced in some runs and not in others
    mw = ArsSummarizationMiddleware(
        RESUME_CONFIG,
        backend=backend,
        compressor_options={"lean_rounds": False},
        read_tool=False,
    )
    config = {"configurable": {"thread_id": thread_id}}
    with PostgresSaver.from_conn_string(pg_setup) as saver:
        build_agent(model, mw)(saver).invoke({"messages": seed}, config)
    del mw, model

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.langchain._resume_child", pg_setup, thread_id, str(root)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    child = json.loads(proc.stdout.strip().splitlines()[-1])

    with PostgresSaver.from_conn_string(pg_setup) as saver:
        agent = build_agent(
            FakeToolChatModel(),
            ArsSummarizationMiddleware(
                RESUME_CONFIG, compressor_options={"lean_rounds": False}, read_tool=False
            ),
        )(saver)
        values = agent.get_state(config).values
        history = list(agent.get_state_history(config))
    state = values["messages"]
    first = next(
        s.values["_summarization_event"]
        for s in reversed(history)
        if s.values.get("_summarization_event")
    )
    second = values["_summarization_event"]
    assert first["cutoff"] == 5
    assert (second["previous_cutoff"], second["cutoff"]) == (5, 7)
    # the child's summary input started from the persisted summary (chained)
    summary_prompt = messages_from_dict(child["summary"][0])[0].text
    previous = escape_text(first["summary_message"]["content"])  # as the prompt renders it
    assert "[previous summary]\n" + previous in summary_prompt
    # the child's main call: the new summary + state[7:] (its own turn included)
    sent = messages_from_dict(child["main"][0])
    assert sent == [
        SystemMessage(SYSTEM),
        from_core(message_from_dict(second["summary_message"])),
        *state[7:9],
    ]
    assert len(state) == 10 and state[8].id == "h-2" and state[9].id == "a2"
    # both archives are on disk, written by two processes, holding state[0:5] and state[5:7]
    scoped = backend.scoped(thread_id)
    for ev in (first, second):
        _, archived = read_history(scoped.read_text(ev["file_path"]))
        assert [from_core(m) for m in archived] == state[ev["previous_cutoff"] : ev["cutoff"]]
