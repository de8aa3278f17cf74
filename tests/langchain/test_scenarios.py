"""The seed's six verification scenarios, end to end: ``create_agent`` + the
scripted model + real tools, on InMemorySaver / SqliteSaver / PostgresSaver, sync and
async graphs.

Every test checks the exact messages the model received, the checkpoint
(``get_state``) after the run, the files written (read back through the
backend), and the custom-stream events and their SSE frames.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ars_core import (
    FsspecBackend,
    SummaryConfig,
    default_estimator,
    encode_sse,
    read_history,
)
from ars_core.l1 import offload_body, sha256_text, truncation_marker
from ars_core.messages import message_from_dict, message_to_dict
from ars_core.provider_size import MARK_PROVIDER_COUNT
from ars_core.testing import FailingBackend
from ars_langchain import ArsSummarizationMiddleware, from_core, to_core
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.conftest import SAVERS
from tests.langchain.helpers import (
    SYSTEM,
    Result,
    Runner,
    big_output,
    build_agent,
    parse_frames,
    prose,
)

USAGE = {"input_tokens": 321, "output_tokens": 12, "total_tokens": 333}


@pytest.fixture(params=SAVERS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["sync", "async"])
def runner(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Runner:
    return Runner(kind, request.param, tmp_path, request)


def cfg(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def files(backend: FsspecBackend) -> dict[str, str]:
    """Every file under the backend's root (and thread scope), by virtual path."""
    base = f"{backend.root}/threads/{backend.scope}" if backend.scope else backend.root
    if not backend.fs.exists(base):
        return {}
    prefix = base.strip("/") + "/"
    out = {}
    for host in backend.fs.find(base):
        virtual = host.strip("/").removeprefix(prefix)
        out[virtual] = backend.read_text(virtual)
    return out


def assert_frames(result: Result, run: int, expected_events: list[dict[str, Any]]) -> None:
    """The custom stream carried exactly these compression events, and the SSE
    frames carry each of them as ``event: context_compression`` in order."""
    out = result.runs[run]
    assert out.compression == expected_events
    frames = out.frames
    compression_frames = [f for f in frames if f.startswith("event: context_compression\n")]
    assert compression_frames == [
        encode_sse(e, id=f"{e['round_id']}:{e['phase']}") for e in expected_events
    ]
    parsed = parse_frames(frames)
    assert [json.loads(d) for ev, d in parsed if ev == "context_compression"] == expected_events
    assert parsed[-1] == ("end", "{}")


def preview_of(content: str, head: str, original: str) -> str:
    """The preview after ``head`` in a trimmed/offloaded body; checks it is a
    non-empty proper prefix of ``original`` (its exact length is the core's budget)."""
    assert content.startswith(head), content[:200]
    preview = content[len(head) :]
    assert preview and original.startswith(preview) and len(preview) < len(original)
    return preview


def head_and_tail_of(content: str, frame: str, original: str) -> str:
    """The offload preview after ``frame``: the head and the tail of ``original``
    around one gap line that counts exactly the characters left out."""
    assert content.startswith(frame), content[:200]
    preview = content[len(frame) :]
    head, gap, tail = re.fullmatch(
        r"(.*)\n\[\.\.\. (\d+) characters not shown \.\.\.\]\n(.*)", preview, re.S
    ).groups()  # type: ignore[union-attr]
    assert head and tail and original.startswith(head) and original.endswith(tail)
    assert int(gap) == len(original) - len(head) - len(tail)
    return preview


def strip_volatile(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in ("round_id", "timestamp")}


# --------------------------------------------------------------------- 1. below threshold


@pytest.mark.spec("R1", "R5", "R33")
def test_below_threshold_passes_effective_messages(runner: Runner, thread_id: str) -> None:
    """Below the entry threshold the model gets the state messages as they are;
    no event, no file, no stream event; state holds only the conversation."""
    model = FakeToolChatModel(
        [
            AIMessage(
                content="", id="ai-1", tool_calls=[tool_call("echo", {"text": "hi"}, "call-1")]
            ),
            AIMessage(content="all good", id="ai-2"),
        ]
    )
    backend = FsspecBackend(f"memory://r1-{thread_id}")
    mw = ArsSummarizationMiddleware(SummaryConfig(summary_threshold=4), backend=backend)
    result = runner.run(
        build_agent(model, mw), [{"messages": [HumanMessage("say hi", id="h-1")]}], cfg(thread_id)
    )

    state = result.state["messages"]
    assert [type(m) for m in state] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert state[2].content == "echo: hi" and state[2].tool_call_id == "call-1"
    sys = SystemMessage(SYSTEM)
    assert model.main_calls == [[sys, *state[:1]], [sys, *state[:3]]]
    assert model.summary_calls == []
    assert "_summarization_event" not in result.state
    assert not backend.fs.exists(f"{backend.root}/threads")
    assert_frames(result, 0, [])
    # the answer was streamed as tokens (the stream works; SSE frames carry them)
    assert (
        "".join(t[0].text for t in result.runs[0].tokens if t[1].get("langgraph_node") == "model")
        == "all good"
    )


# --------------------------------------------------------------------- 2. L1 only


@pytest.mark.spec("R2", "R5", "R10", "R11", "R12", "R13", "R14", "R31")
def test_l1_only_trims_view_and_keeps_state(runner: Runner, thread_id: str) -> None:
    """At the entry threshold L1 truncates a long write_file argument
    and offloads a large tool result to a content-hashed file; the L1 view is small
    enough, so the model gets it and state is unchanged (no event). The L1-only
    `completed` event has no cutoff and no file path."""
    long_content = "x = 1\n" * 500  # 3000 characters > 2000
    model = FakeToolChatModel(
        [
            AIMessage(
                content="",
                id="ai-1",
                tool_calls=[
                    tool_call(
                        "write_file", {"file_path": "app.py", "content": long_content}, "call-w"
                    ),
                    tool_call("big_output", {"n": 120}, "call-b"),
                ],
            ),
            AIMessage(content="finished", id="ai-2"),
        ]
    )
    backend = FsspecBackend(f"memory://r2-{thread_id}")
    config = SummaryConfig(
        summary_threshold=1, summary_l2_trigger_ratio=0.9, summary_tool_result_token_limit=200
    )
    mw = ArsSummarizationMiddleware(config, backend=backend)
    result = runner.run(
        build_agent(model, mw), [{"messages": [HumanMessage("build it", id="h-1")]}], cfg(thread_id)
    )

    state = result.state["messages"]
    human, ai, tool_w, tool_b, final = state
    big_text = big_output.invoke({"n": 120})
    assert tool_b.content == big_text  # state keeps the full result
    assert ai.tool_calls[0]["args"]["content"] == long_content
    assert final.content == "finished"
    assert "_summarization_event" not in result.state

    est = default_estimator()  # what the middleware counts with by default
    path = f"outputs/large_tool_results/big_output-{sha256_text(big_text)}.txt"
    tokens = est.count_text(big_text)
    sent_tool = model.main_calls[1][4]
    preview = head_and_tail_of(
        sent_tool.content, offload_body(path, big_text, "", tokens) + "\nPreview:\n", big_text
    )
    assert est.count_text(sent_tool.content) <= 200
    expected_tool = ToolMessage(
        content=offload_body(path, big_text, preview, tokens),
        id=tool_b.id,
        name="big_output",
        tool_call_id="call-b",
        response_metadata={"ars": {"ars_offloaded": path}},
    )
    expected_ai = AIMessage(
        content="",
        id="ai-1",
        tool_calls=[
            tool_call(
                "write_file",
                {
                    "file_path": "app.py",
                    "content": truncation_marker("write_file", "content", long_content),
                },
                "call-w",
            ),
            tool_call("big_output", {"n": 120}, "call-b"),
        ],
        response_metadata={"ars": {"ars_truncated_args": 1}},
    )
    sys = SystemMessage(SYSTEM)
    assert model.main_calls[0] == [sys, human]
    assert model.main_calls[1] == [sys, human, expected_ai, tool_w, expected_tool]
    assert model.main_calls[1][3] is not None and len(model.main_calls) == 2

    # the full text is in the content-hashed file, in the thread's scope
    assert files(backend.scoped(thread_id)) == {path: big_text}

    events = result.runs[0].compression
    assert [strip_volatile(e) for e in events] == [
        {
            "type": "context_compression",
            "phase": "started",
            "level": "L1",
            "forced": False,
            "tokens_before": events[0]["tokens_before"],
            "tokens_after": None,
            "threshold": 1024,
        },
        {
            "type": "context_compression",
            "phase": "completed",
            "level": "L1",
            "forced": False,
            "tokens_before": events[0]["tokens_before"],
            "tokens_after": events[1]["tokens_after"],
            "threshold": 1024,
            "offloaded": [path],
            "truncated_args": 1,
        },
    ]
    assert events[0]["tokens_before"] >= 1024 >= 0.9 * 1024 >= events[1]["tokens_after"]
    assert events[0]["round_id"] == events[1]["round_id"]
    assert_frames(result, 0, events)


# --------------------------------------------------------------------- 3-5. L2 (+ failures)

L2_CONFIG = SummaryConfig(
    summary_threshold=1, summary_l2_trigger_ratio=0.5, summary_keep_messages=2
)


def seeded_history() -> list[Any]:
    """Seven messages, above 1024 tokens together, L1 has nothing to trim: the user's three
    requests are short (~30 tokens, they are the task every summary keeps whole), the
    assistant's replies long (~310 tokens)."""
    out: list[Any] = []
    for i in range(7):
        if i % 2 == 0:
            out.append(HumanMessage(prose(f"turn {i}", 25), id=f"m-{i}"))
        else:
            out.append(AIMessage(prose(f"turn {i}", 236), id=f"m-{i}"))  # ~310 in o200k
    return out


def summary_header(cutoff: int) -> str:
    return f"Summary of the earlier conversation (messages 1-{cutoff}; they are no longer shown):"


@pytest.mark.parametrize("variant", ["ok", "archive_fails", "summary_fails"])
@pytest.mark.spec(
    "R5",
    "R20",
    "R21",
    "R22",
    "R23",
    "R24",
    "R25",
    "R26",
    "R27",
    "R30",
    "R31",
    "R33",
    "R40",
    "R41",
    "R44",
)
def test_l2_summary_event_and_files(
    runner: Runner, thread_id: str, variant: str, caplog: pytest.LogCaptureFixture
) -> None:
    """L2 end to end.

    ok: the older five messages go to a history file, the
    *main* model summarizes them in a no-stream call, the model gets
    [summary] + the two kept messages, and the event (cutoff 5, summary,
    file path, summary usage) is persisted in the checkpoint while state
    messages stay as they were. The next turn is rebuilt from the event.
    archive_fails: the history write fails, a warning is logged, the
    summary still runs and the event's file_path is None.
    summary_fails: an explicit summary model raises; the summary message
    holds the error and a deterministic fallback; nothing is raised; `completed`.
    """
    caplog.set_level(logging.WARNING, logger="ars")
    summary_reply = AIMessage(
        "SUMMARY-TEXT the user discussed greek letters", id="sum-1", usage_metadata=USAGE
    )
    answer_usage = {"input_tokens": 555, "output_tokens": 3, "total_tokens": 558}
    answer = AIMessage("first answer", id="ai-ans", usage_metadata=answer_usage)
    later = AIMessage("second answer", id="ai-ans2")
    inner = FsspecBackend(f"memory://l2-{variant}-{thread_id}")
    backend: Any = inner
    summary_model = None
    if variant == "ok":
        model = FakeToolChatModel([summary_reply, answer, later])
    elif variant == "archive_fails":
        model = FakeToolChatModel([summary_reply, answer, later])
        backend = FailingBackend(["outputs/conversation_history"], inner=inner)
    else:
        model = FakeToolChatModel([answer, later])
        summary_model = FakeToolChatModel([RuntimeError("summary service down")])
    usages: list[dict[str, Any]] = []
    mw = ArsSummarizationMiddleware(
        L2_CONFIG,
        backend=backend,
        model=summary_model,
        on_model_usage=usages.append,
        compressor_options={"lean_rounds": False},
        read_tool=False,  # the L2 sizes below are pinned for a request without its schema
    )
    seed = seeded_history()
    result = runner.run(
        build_agent(model, mw),
        [{"messages": seed}, {"messages": [HumanMessage("and now?", id="h-next")]}],
        cfg(thread_id),
    )

    state = result.state["messages"]
    assert state[:7] == seed  # state messages untouched
    # the answer carries the provider's count of its request beside ARS's (provider_size)
    record = state[7].response_metadata["ars"][MARK_PROVIDER_COUNT]
    assert record["input_tokens"] == 555 and record["estimated"] == usages[0]["estimated_tokens"]
    answer = answer.model_copy(update={"response_metadata": {"ars": {MARK_PROVIDER_COUNT: record}}})
    assert state[7:] == [answer, HumanMessage("and now?", id="h-next"), later]

    event = result.state["_summarization_event"]
    assert set(event) == {
        "cutoff",
        "summary_message",
        "file_path",
        "previous_cutoff",
        "summary_usage",
        "summary_error",
        "created_at",
        "anchor",
        "retention",
    }
    assert event["cutoff"] == 5 and event["previous_cutoff"] == 0
    # R51: anchored to the last summarized and the first kept message
    assert event["anchor"] == {"last": f"id:{seed[4].id}", "next": f"id:{seed[5].id}"}
    stored = files(inner if variant == "archive_fails" else inner.scoped(thread_id))
    if variant == "archive_fails":
        assert event["file_path"] is None
        assert backend.failed and backend.failed[0].startswith(
            "outputs/conversation_history/history-000000-000005-"
        )
        assert stored == {}
        assert any("history archive write failed" in r.getMessage() for r in caplog.records)
    else:
        path = event["file_path"]
        assert path.startswith(
            "outputs/conversation_history/history-000000-000005-"
        ) and path.endswith(".jsonl")
        assert list(stored) == [path]
        header, archived = read_history(stored[path])
        assert header == {"ars_history": 1, "start": 0, "end": 5, "count": 5, "thread": thread_id}
        assert archived == [to_core(m) for m in seed[:5]]
        assert [from_core(m) for m in archived] == seed[:5]  # lossless through the file

    # the summary call
    from ars_core import DEFAULT_SUMMARY_PROMPT
    from ars_core.summarize import ExtractiveSummarizer, render_prompt

    rendered = render_prompt(DEFAULT_SUMMARY_PROMPT, [to_core(m) for m in seed[:5]])
    # the task the engine writes into the summary message: the first request, the newest
    task = (
        f"⟦ARS⟧ Task, user request 1 of 2\n{seed[0].content}\n\n"
        f"⟦ARS⟧ Task, user request 2 of 2\n{seed[4].content}"
    )
    if variant == "summary_fails":
        assert summary_model is not None
        assert summary_model.summary_calls == [[HumanMessage(rendered)]]
        assert model.summary_calls == []
        fallback = (  # the rest: the engine writes the task before it
            ExtractiveSummarizer(task=[str(seed[0].content), str(seed[4].content)])
            .summarize([to_core(m) for m in seed[:5]], DEFAULT_SUMMARY_PROMPT)
            .text
        )
        body = (
            "[ARS: the summary model failed: RuntimeError: summary service down]\n\n"
            f"{task}\n\n{fallback}"
        )
        assert event["summary_error"] == "RuntimeError: summary service down"
        assert event["summary_usage"] is None
    else:
        assert model.summary_calls == [[HumanMessage(rendered)]]
        body = (
            f"{task}\n\n⟦ARS⟧ Summary\nSUMMARY-TEXT the user discussed greek letters\n\n"
            "⟦ARS⟧ end of summary"
        )
        assert event["summary_error"] is None
        assert event["summary_usage"] == USAGE
    content = f"{summary_header(5)}\n\n{body}"
    if event["file_path"]:
        content += f"\n\nThe full text of those messages is saved at {event['file_path']}."
    assert event["summary_message"]["content"] == content
    assert event["summary_message"]["role"] == "user"

    summary_lc = from_core(message_from_dict(event["summary_message"]))
    assert summary_lc.content == content and summary_lc.id == "ars-summary-5"
    # the model got the summary marked harness-inserted, the way LangChain marks its own
    sent_summary = model.main_calls[0][1]
    assert sent_summary.additional_kwargs == {"lc_source": "summarization"}
    from langchain_core.messages import get_notification_metadata

    assert get_notification_metadata(sent_summary) == {"source": "summarization"}
    sys = SystemMessage(SYSTEM)
    assert model.main_calls == [
        [sys, summary_lc, seed[5], seed[6]],
        [sys, summary_lc, seed[5], seed[6], answer, HumanMessage("and now?", id="h-next")],
    ]

    # stream events and frames; the second turn is below threshold: none
    events = result.runs[0].compression
    completed = {
        "type": "context_compression",
        "phase": "completed",
        "level": "L2",
        "forced": False,
        "tokens_before": events[0]["tokens_before"],
        "tokens_after": events[1]["tokens_after"],
        "threshold": 1024,
        "cutoff": 5,
    }
    if event["file_path"]:
        completed["file_path"] = event["file_path"]
    if event["summary_usage"]:
        completed["summary_usage"] = USAGE
    # the retention audit of the view the L2 request sent: summary + the two kept messages
    from ars_core import audit_retention, task_statement

    summarized = [to_core(m) for m in seed[:5]]
    sent_view = [message_from_dict(event["summary_message"]), *(to_core(m) for m in seed[5:7])]
    retention = audit_retention(summarized, sent_view, task=task_statement(summarized)).to_dict()
    assert event["retention"] == retention
    assert retention["fraction"] == 1.0  # the kept human turn repeats the requests' words
    completed["retention"] = retention
    assert [strip_volatile(e) for e in events] == [
        {
            "type": "context_compression",
            "phase": "started",
            "level": "L1",
            "forced": False,
            "tokens_before": events[0]["tokens_before"],
            "tokens_after": None,
            "threshold": 1024,
        },
        completed,
    ]
    assert events[0]["tokens_before"] > 1024 > events[1]["tokens_after"]
    assert_frames(result, 0, events)
    assert_frames(result, 1, [])

    # no summary token in stream_mode="messages"; the main usage is the main model's own
    tokens = [t[0].text for run in result.runs for t in run.tokens]
    assert not any("SUMMARY-TEXT" in t for t in tokens)
    assert "".join(t[0].text for t in result.runs[0].tokens) == "first answer"
    assert state[7].usage_metadata == answer_usage
    assert usages[0] == {
        "usage_metadata": answer_usage,
        "estimated_tokens": events[1]["tokens_after"],
        "view_messages": 3,
    }
    assert mw.last_usage(thread_id) == usages[-1]


# --------------------------------------------------------------------- 6. overflow tail trim


@pytest.mark.spec("R4", "R22", "R43")
def test_overflow_forces_l2_and_persists_tail_trim(runner: Runner, thread_id: str) -> None:
    """The model raises langchain-core's ContextOverflowError below the entry
    threshold -> forced L1 + L2; `started` is emitted only when L2 begins.
    The kept tail still exceeds capacity, so the huge kept message is trimmed in the
    view, its original saved to a file, and the trimmed form is persisted as a
    `messages` update that replaces it *by id* - the next checkpoint matches what
    was sent. The model is then called again and succeeds."""
    seed: list[Any] = [
        HumanMessage(prose("task", 20), id="m-0"),
        AIMessage(prose("plan", 20), id="m-1"),
        HumanMessage(prose("more", 20), id="m-2"),
        AIMessage(prose("ack", 20), id="m-3"),
        HumanMessage(prose("paste", 1500), id="m-4"),
    ]
    model = FakeToolChatModel(
        [AIMessage("SUMMARY-TEXT short", id="s"), AIMessage("final", id="ai-f")],
        overflow_above=4000,
    )
    backend = FsspecBackend(f"memory://r43-{thread_id}")
    config = SummaryConfig(summary_threshold=4, summary_keep_messages=2)
    mw = ArsSummarizationMiddleware(
        config, backend=backend, compressor_options={"lean_rounds": False}
    )
    result = runner.run(build_agent(model, mw), [{"messages": seed}], cfg(thread_id))
    assert result.runs[0].error is None

    event = result.state["_summarization_event"]
    assert event["cutoff"] == 3
    # the trimmed message: id, role kept; text -> frame + preview; original in a file
    record = json.dumps(message_to_dict(to_core(seed[4])), ensure_ascii=False, default=str)
    path = f"outputs/trimmed_messages/user-{sha256_text(record)}.json"
    frame = (
        f"[ARS: this message was trimmed to fit the context window; the full message "
        f"({len(record)} characters) is saved at {path}.]\nPreview:\n"
    )
    preview = preview_of(result.state["messages"][4].content, frame, seed[4].text)
    trimmed = HumanMessage(
        frame + preview, id="m-4", response_metadata={"ars": {"ars_trimmed": path}}
    )

    state = result.state["messages"]
    assert state == [
        *seed[:4],
        trimmed,
        AIMessage("final", id="ai-f"),
    ]  # replaced by id, in place
    summary_lc = from_core(message_from_dict(event["summary_message"]))
    sys = SystemMessage(SYSTEM)
    assert model.main_calls == [[sys, *seed], [sys, summary_lc, seed[3], trimmed]]
    assert state[event["cutoff"] : 5] == model.main_calls[1][2:]  # checkpoint == what was sent

    stored = files(backend.scoped(thread_id))
    assert set(stored) == {path, event["file_path"]}
    assert stored[path] == record
    assert from_core(message_from_dict(json.loads(stored[path]))) == seed[4]  # nothing lost
    _, archived = read_history(stored[event["file_path"]])
    assert [from_core(m) for m in archived] == seed[:3]

    events = result.runs[0].compression
    assert [(e["phase"], e["level"], e["forced"]) for e in events] == [
        ("started", "L2", True),
        ("completed", "L2", True),
    ]
    assert events[1]["cutoff"] == 3 and events[1]["file_path"] == event["file_path"]
    assert events[1]["tokens_after"] <= int(config.l2_threshold_tokens) < events[0]["tokens_before"]
    assert_frames(result, 0, events)


@pytest.mark.spec("R32", "R42")
def test_no_valid_cutoff_overflow_propagates_with_failed(runner: Runner, thread_id: str) -> None:
    """Above the threshold with nothing L2 can cut (one huge message), the
    L1 view is sent; it still overflows, so the error propagates from the graph,
    `failed` follows `started`, and no event is persisted. (The huge message is
    an assistant one: a user message above T would be offloaded by L1.)"""
    seed = [HumanMessage("notes follow", id="m-0"), AIMessage(prose("paste", 1500), id="m-1")]
    model = FakeToolChatModel([AIMessage("never")], overflow_above=4000)
    backend = FsspecBackend(f"memory://r42-{thread_id}")
    mw = ArsSummarizationMiddleware(
        SummaryConfig(summary_threshold=1, summary_keep_messages=2),
        backend=backend,
        compressor_options={"lean_rounds": False},
    )
    result = runner.run(build_agent(model, mw), [{"messages": seed}], cfg(thread_id))

    from langchain_core.exceptions import ContextOverflowError

    assert isinstance(result.runs[0].error, ContextOverflowError)
    assert model.main_calls == [[SystemMessage(SYSTEM), *seed]]
    assert result.state["messages"] == seed
    assert "_summarization_event" not in result.state
    events = result.runs[0].compression
    assert [(e["phase"], e["level"]) for e in events] == [("started", "L1"), ("failed", "L1")]
    assert events[1]["error"].startswith("ContextOverflowError: prompt is too long")
    assert files(backend.scoped(thread_id)) == {}
    frames = result.runs[0].frames
    assert [f for f in frames if f.startswith("event: context_compression")] == [
        encode_sse(e, id=f"{e['round_id']}:{e['phase']}") for e in events
    ]
