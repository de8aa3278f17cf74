"""LangChain against a real model: ``ChatOpenAI(base_url=...)`` -> llama-cpp-python's
OpenAI-compatible server (SmolLM2-135M, a 2,048-token window) in ``create_agent``
with ``ArsSummarizationMiddleware``.

What the model says is not scripted, so the oracles compare ARS's outputs with
what the provider actually answered (recorded by a LangChain callback on the
model): the summary in the event is the summary call's own output, the usage
on the event and in calibration is the usage the server reported.
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
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from ars_core import (
    ApproxEstimator,
    FsspecBackend,
    SummaryConfig,
    is_context_overflow,
    read_history,
)
from ars_core.messages import message_from_dict
from ars_core.prompt import escape_text
from ars_langchain import ArsSummarizationMiddleware, from_core, is_compression_event
from tests.e2e.helpers import (
    CONFIG,
    MAX_TOKENS,
    SYSTEM,
    Call,
    Recorder,
    chat_model,
    holds_model_summary,
    user_turn,
)
from tests.servers import LlamaServer

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def build(model: Any, middleware: ArsSummarizationMiddleware, saver: Any) -> Any:
    return create_agent(
        model, tools=[], system_prompt=SYSTEM, middleware=[middleware], checkpointer=saver
    )


def events_of(history: list[Any]) -> list[dict[str, Any]]:
    """The distinct L2 events of a thread, oldest first, each with its checkpoint's messages."""
    events: list[dict[str, Any]] = []
    for snap in reversed(history):
        ev = snap.values.get("_summarization_event")
        if ev and (not events or ev["cutoff"] != events[-1]["cutoff"]):
            events.append({**ev, "_messages": snap.values["messages"]})
    return events


def check_real_summary(event: dict[str, Any], call: Call, backend: FsspecBackend) -> None:
    """The event's summary is the output of ``call`` (a real summary call), with the
    usage the server reported for it, and its archive holds exactly the messages it covers."""
    text = call.text.strip()
    assert text and holds_model_summary(event["summary_message"]["content"], text)
    assert ApproxEstimator().count_text(text) <= CONFIG.summary_token_limit  # the summary bound
    assert call.usage is not None and 0 < call.usage["output_tokens"] <= MAX_TOKENS
    assert event["summary_usage"]["input_tokens"] == call.usage["input_tokens"]
    assert event["summary_usage"]["output_tokens"] == call.usage["output_tokens"]
    assert not event.get("summary_error")
    header, archived = read_history(backend.read_text(event["file_path"]))
    state = event["_messages"]
    assert (header["start"], header["end"]) == (event["previous_cutoff"], event["cutoff"])
    assert [from_core(m) for m in archived] == state[event["previous_cutoff"] : event["cutoff"]]


@pytest.mark.spec("R23", "R24", "R25", "R44", "R54")
def test_real_summaries_chain_across_turns_and_a_process_restart_on_sqlite(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    """Turns on a SQLite checkpointer until two L2 rounds chained; then a second Python
    process (new model, new middleware, nothing in memory) continues the thread: its
    summary call starts from the first process's last summary and its event continues
    the cumulative cutoff. Every summary is the real model's output; every archive holds
    exactly the messages its event covers."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path / "checkpoints.sqlite"
    files = tmp_path / "files"
    backend = FsspecBackend(f"file://{files}")
    thread_id = "real-chain"
    config = {"configurable": {"thread_id": thread_id}}
    recorder = Recorder()
    middleware = ArsSummarizationMiddleware(CONFIG, backend=backend)
    with SqliteSaver.from_conn_string(str(db)) as saver:
        agent = build(chat_model(llama_server, recorder), middleware, saver)
        for i in range(6):
            agent.invoke({"messages": [HumanMessage(user_turn(i))]}, config)
            if len(events_of(list(agent.get_state_history(config)))) >= 2:
                break
        first = events_of(list(agent.get_state_history(config)))
    assert len(first) >= 2
    assert [e["previous_cutoff"] for e in first] == [0, *[e["cutoff"] for e in first[:-1]]]
    scoped = backend.scoped(thread_id)
    assert len(recorder.summaries) == len(first)  # one summary call per L2 round, in order
    for event, call in zip(first, recorder.summaries, strict=True):
        check_real_summary(event, call, scoped)
    # the chained summary call read the previous summary
    second_call = recorder.summaries[-1]
    # as the prompt renders it (lines that start like ARS's own are escaped)
    assert escape_text(first[-2]["summary_message"]["content"]) in second_call.prompt[0].text

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.e2e._resume_child", llama_server.base_url, str(db), thread_id, str(files)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    child = json.loads(proc.stdout.strip().splitlines()[-1])

    with SqliteSaver.from_conn_string(str(db)) as saver:
        agent = build(chat_model(llama_server), ArsSummarizationMiddleware(CONFIG), saver)
        history = list(agent.get_state_history(config))
    chain = events_of(history)
    assert chain[: len(first)] == first
    resumed = chain[len(first)]
    assert resumed["previous_cutoff"] == first[-1]["cutoff"] < resumed["cutoff"]
    # the child's summary call started from the parent's last summary (chained across processes)
    assert escape_text(first[-1]["summary_message"]["content"]) in child["summary_prompts"][0]
    assert child["summary_texts"][0] and holds_model_summary(
        resumed["summary_message"]["content"], child["summary_texts"][0]
    )
    _, archived = read_history(scoped.read_text(resumed["file_path"]))
    assert [from_core(m) for m in archived] == resumed["_messages"][
        resumed["previous_cutoff"] : resumed["cutoff"]
    ]


@pytest.mark.spec("R27", "R30", "R31")
def test_stream_messages_mode_carries_main_tokens_never_summary_tokens(
    llama_server: LlamaServer,
) -> None:
    """``astream(stream_mode=["messages", "custom"])`` until a run does L2: that run
    streams the main model's tokens (several chunks, joined they are the final answer)
    and none of the summary call's, although the summary call ran in the same run."""
    recorder = Recorder()
    middleware = ArsSummarizationMiddleware(CONFIG, backend=FsspecBackend("memory://e2e-stream"))
    agent = build(chat_model(llama_server, recorder), middleware, InMemorySaver())
    config = {"configurable": {"thread_id": "real-stream"}}

    async def run_turn(i: int) -> list[tuple[str, Any]]:
        return [
            item
            async for item in agent.astream(
                {"messages": [HumanMessage(user_turn(i))]},
                config,
                stream_mode=["messages", "custom"],
            )
        ]

    for i in range(6):
        before = len(recorder.summaries)
        items = asyncio.run(run_turn(i))
        if len(recorder.summaries) > before:
            break
    else:
        pytest.fail("no L2 round in 6 turns")
    summary = recorder.summaries[-1]
    custom = [c for mode, c in items if mode == "custom" and is_compression_event(c)]
    assert [c["phase"] for c in custom] == ["started", "completed"] and custom[-1]["cutoff"]
    chunks = [chunk_meta for mode, chunk_meta in items if mode == "messages"]
    assert all("ars_summary" not in (meta.get("tags") or []) for _, meta in chunks)
    assert all(meta.get("langgraph_node") == "model" for _, meta in chunks)
    tokens = [c for c, _ in chunks if isinstance(c, AIMessageChunk) and c.content]
    assert len(tokens) >= 2  # streamed token by token, not one blob
    final = agent.get_state(config).values["messages"][-1]
    assert isinstance(final, AIMessage)
    streamed = "".join(str(c.content) for c in tokens)
    assert streamed == final.content
    # the stream is the main call's own answer, token for token: the summary call's
    # answer is not in it (a 135M model may repeat the summary it was sent, so the
    # oracle is the recorded answer of each call, not the summary's words)
    main_call = recorder.main[-1]
    assert main_call.prompt and main_call.text == streamed
    order = [id(c) for c in recorder.calls]
    assert order.index(id(summary)) < order.index(id(main_call))
    assert summary.text.strip()


@pytest.mark.spec("R3", "R27")
def test_provider_usage_reaches_calibration_and_the_event(llama_server: LlamaServer) -> None:
    """The server's reported usage (not an estimate) is what ARS learns from and records:
    each main call's ``input_tokens`` reaches ``last_usage`` and moves the estimator's
    scale exactly as ``calibrate`` says; the summary call's usage is the event's
    ``summary_usage`` and the ``completed`` event's, and is kept out of the main usage."""
    recorder = Recorder()
    estimator = ApproxEstimator()
    records: list[dict[str, Any]] = []
    events: list[Any] = []
    middleware = ArsSummarizationMiddleware(
        CONFIG, backend=FsspecBackend("memory://e2e-usage"), estimator=estimator,
        on_model_usage=records.append, on_event=events.append,
    )  # fmt: skip
    agent = build(chat_model(llama_server, recorder), middleware, InMemorySaver())
    config = {"configurable": {"thread_id": "real-usage"}}
    expected_scale = 1.0
    for i in range(6):
        agent.invoke({"messages": [HumanMessage(user_turn(i))]}, config)
        main = recorder.main[-1]
        record = records[-1]
        assert main.usage is not None
        assert record["usage_metadata"]["input_tokens"] == main.usage["input_tokens"] > 0
        ratio = min(2.0, max(0.5, main.usage["input_tokens"] / record["estimated_tokens"]))
        expected_scale = 0.7 * expected_scale + 0.3 * ratio
        assert estimator.scale == pytest.approx(expected_scale)
        assert middleware.last_usage("real-usage") == record
        if recorder.summaries:
            break
    assert recorder.summaries, "no L2 round in 6 turns"
    summary_usage = recorder.summaries[-1].usage
    assert summary_usage is not None
    event = agent.get_state(config).values["_summarization_event"]
    assert (event["summary_usage"]["input_tokens"], event["summary_usage"]["output_tokens"]) == (
        summary_usage["input_tokens"], summary_usage["output_tokens"],
    )  # fmt: skip
    completed = [e for e in events if e.phase == "completed" and e.cutoff is not None][-1]
    assert completed.summary_usage is not None
    assert completed.summary_usage.input_tokens == summary_usage["input_tokens"]
    # the main usage of the L2 turn is the main call's alone
    assert records[-1]["usage_metadata"]["input_tokens"] == recorder.main[-1].usage["input_tokens"]  # type: ignore[index]
    assert records[-1]["usage_metadata"]["input_tokens"] != summary_usage["input_tokens"]


def overflowing_history(n_ctx: int) -> list[Any]:
    """Old turns whose real size is beyond the server's window (about 1.3x ``n_ctx``)."""
    history: list[Any] = []
    for i in range(n_ctx // 170):
        history.append(HumanMessage(user_turn(i, sentences=10), id=f"h-{i}"))
        history.append(AIMessage(f"Noted the notes of turn {i}.", id=f"a-{i}"))
    return history


@pytest.mark.spec("R4", "R20", "R30", "R31")
def test_server_context_overflow_error_drives_the_forced_path(llama_server: LlamaServer) -> None:
    """Below ARS's own threshold (T = 100 K), a history beyond the server's 2,048-token
    window makes llama-cpp's server refuse the request; the core classifier recognizes
    that error, ARS runs L2 (forced) and the retried call succeeds within the window."""
    recorder = Recorder()
    events: list[Any] = []
    config_fields = {**CONFIG.to_dict(), "summary_threshold": 100, "summary_keep_messages": 2}
    middleware = ArsSummarizationMiddleware(
        SummaryConfig(**config_fields),
        backend=FsspecBackend("memory://e2e-overflow"),
        on_event=events.append,
        # what the summary model reads must fit its own window too
        compressor_options={"summary_input_tokens": 600},
    )
    agent = build(chat_model(llama_server, recorder), middleware, InMemorySaver())
    config = {"configurable": {"thread_id": "real-overflow"}}
    history = overflowing_history(llama_server.n_ctx)
    agent.invoke({"messages": [*history, HumanMessage("What happened on day 3?", id="q")]}, config)

    refused = recorder.main[0]
    assert refused.error is not None and is_context_overflow(refused.error)
    assert recorder.summaries, "the forced L2 made no summary call"
    summary_text = recorder.summaries[-1].text.strip()
    retried = recorder.main[-1]
    assert retried.error is None and retried.usage is not None
    assert retried.usage["input_tokens"] + retried.usage["output_tokens"] <= llama_server.n_ctx
    assert [(e.phase, e.level, e.forced) for e in events] == [
        ("started", "L2", True),
        ("completed", "L2", True),
    ]
    state = agent.get_state(config).values
    event = state["_summarization_event"]
    assert event["cutoff"] == len(state["messages"]) - 1 - CONFIG.summary_keep_messages
    assert not event.get("summary_error") and summary_text
    assert summary_text in event["summary_message"]["content"]
    summary = from_core(message_from_dict(event["summary_message"]))
    assert retried.prompt == [
        SystemMessage(SYSTEM),
        summary,
        *state["messages"][event["cutoff"] : -1],
    ]
    assert isinstance(state["messages"][-1], AIMessage) and state["messages"][-1].content


@pytest.mark.spec("R4")
def test_llama_cpp_server_overflow_error_is_recognized_by_the_core_classifier(
    llama_server: LlamaServer,
) -> None:
    """The raw error of the OpenAI client, and the one ``ChatOpenAI`` raises, for a
    request beyond ``n_ctx`` are context overflows to ``is_context_overflow``; a
    refused request of another kind (a message with an unknown role) is not."""
    import openai

    client = openai.OpenAI(base_url=llama_server.base_url, api_key="no-key-needed", max_retries=0)
    long_text = user_turn(0, sentences=200)
    with pytest.raises(openai.APIStatusError) as raw:
        client.chat.completions.create(
            model=llama_server.model,
            messages=[{"role": "user", "content": long_text}],
            max_tokens=8,
        )
    assert is_context_overflow(raw.value), (raw.value.status_code, str(raw.value))
    with pytest.raises(Exception) as wrapped:
        chat_model(llama_server).invoke([HumanMessage(long_text)])
    assert is_context_overflow(wrapped.value)
    with pytest.raises(openai.APIStatusError) as other:
        client.chat.completions.create(
            model=llama_server.model,
            messages=[{"role": "narrator", "content": "hi"}],  # type: ignore[list-item]
            max_tokens=8,
        )
    assert not is_context_overflow(other.value)
