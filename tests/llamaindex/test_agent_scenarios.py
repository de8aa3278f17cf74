"""The seed's verification scenarios with a real LlamaIndex agent.

Each test drives a real ``FunctionAgent`` (``ArsFunctionAgent``) with the
scripted function-calling LLM, real ``FunctionTool`` tools and a real chat store
(``SimpleChatStore`` and ``SQLAlchemyChatStore`` on SQLite), and checks what
the LLM received, what the store holds afterwards, the files (read back) and
the instrumentation events.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.storage.chat_store import SimpleChatStore
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from ars_core import FsspecBackend, read_history
from ars_core.testing import FailingBackend
from ars_llamaindex import ArsFunctionAgent, ArsMemory, from_core_messages
from ars_llamaindex.testing import ScriptedLLM, tool_call
from tests.llamaindex.helpers import EventRecorder, Workspace, dumps, log_text, prose, sha256

pytestmark = pytest.mark.anyio

SYSTEM = "You are a careful assistant. Use the tools when needed."
KEY = "thread-1"


@pytest.fixture(params=["simple", "sqlite"])
def chat_store(request: pytest.FixtureRequest, sqlite_url: str, table_name: str) -> Any:
    if request.param == "simple":
        return SimpleChatStore()
    return SQLAlchemyChatStore(table_name=table_name, async_database_uri=sqlite_url)


async def stored(store: Any, key: str) -> list[ChatMessage]:
    """What the chat store itself holds under ``key`` (read around ARS)."""
    if isinstance(store, SQLAlchemyChatStore):
        return list(await store.get_messages(key, status=None))
    return list(store.get_messages(key))


def agent_for(llm: ScriptedLLM, workspace: Workspace) -> ArsFunctionAgent:
    return ArsFunctionAgent(tools=workspace.tools(), llm=llm, system_prompt=SYSTEM)


def text_of(message: ChatMessage) -> str:
    return message.content or ""


# ----------------------------------------------------------------
@pytest.mark.spec("R1")
async def test_below_threshold_llm_gets_the_stored_messages_unchanged(
    chat_store: Any,
    workspace: Workspace,
    file_backend: FsspecBackend,
    files_root: Path,
    recorder: EventRecorder,
) -> None:
    """Below the entry threshold the LLM gets the effective messages; no
    L1, no event, no file, no stream event."""
    payloads: list[dict[str, Any]] = []
    llm = ScriptedLLM([tool_call("bash", cmd="ls"), "two files"])
    memory = ArsMemory.from_defaults(
        chat_store=chat_store,
        chat_store_key=KEY,
        file_backend=file_backend,
        on_event=payloads.append,
    )
    await agent_for(llm, workspace).run("list the files", memory=memory)

    first, second = llm.requests
    assert [(m.role.value, text_of(m)) for m in first.messages] == [
        ("system", SYSTEM),
        ("user", "list the files"),
    ]
    assert first.tools == ["bash", "write_file"]
    history = await stored(chat_store, KEY)
    assert [m.role.value for m in history] == ["user", "assistant", "tool", "assistant"]
    # the LLM's second request is exactly the system prompt + what the store holds
    assert dumps(second.messages) == dumps(
        [ChatMessage(role="system", content=SYSTEM), *history[:3]]
    )
    call = history[1].blocks[0]
    assert (
        isinstance(call, ToolCallBlock)
        and call.tool_name == "bash"
        and call.tool_kwargs == {"cmd": "ls"}
    )
    assert history[2].additional_kwargs == {"tool_call_id": call.tool_call_id}
    assert text_of(history[2]) == "ran ls" and text_of(history[3]) == "two files"
    assert dumps(await memory.aget_all()) == dumps(history)
    assert await stored(chat_store, KEY + "::ars_event") == []
    assert list(files_root.rglob("*")) == []
    assert recorder.events == [] and payloads == []


# ----------------------------------------------------------------
@pytest.mark.spec("R2", "R5", "R11", "R12", "R14", "R31", "R36")
async def test_l1_only_offloads_and_truncates_in_the_view_only(
    chat_store: Any,
    workspace: Workspace,
    file_backend: FsspecBackend,
    files_root: Path,
    recorder: EventRecorder,
) -> None:
    """At/above the threshold L1 runs on a copy; a large
    tool result goes to a content-addressed file, a >2,000-character
    ``write_file`` argument is truncated; the L1 view fits, so no L2 and no
    event in the store; ``completed`` carries no cutoff and no path."""
    big = log_text(220)
    content = "y" * 2500
    workspace.outputs["cat big.log"] = big
    payloads: list[dict[str, Any]] = []
    llm = ScriptedLLM(
        [
            tool_call("write_file", path="notes.md", content=content),
            tool_call("bash", cmd="cat big.log"),
            "the log looks healthy",
        ]
    )
    memory = ArsMemory.from_defaults(
        chat_store=chat_store,
        chat_store_key=KEY,
        file_backend=file_backend,
        summary_threshold=1,
        summary_l2_trigger_ratio=0.9,
        on_event=payloads.append,
    )
    await agent_for(llm, workspace).run("check the log", memory=memory)

    assert workspace.written == {"notes.md": content}
    history = await stored(chat_store, KEY)
    assert len(llm.requests) == 3
    sent = llm.requests[2]
    assert sent.tokens <= memory.config.l2_threshold_tokens
    assert (
        llm.count_tokens(
            [ChatMessage(role="system", content=SYSTEM), *history[:5]],
            llm.requests[2].tools and memory.tools,
        )
        >= memory.config.threshold_tokens
    )
    path = f"outputs/large_tool_results/bash-{sha256(big)}.txt"
    # what the LLM received: the write_file argument truncated, the log offloaded
    roles = [m.role.value for m in sent.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]
    wf = sent.messages[2].blocks[0]
    assert isinstance(wf, ToolCallBlock)
    assert wf.tool_kwargs["path"] == "notes.md"
    assert wf.tool_kwargs["content"].startswith(
        "[ARS: 2500 characters of the write_file argument 'content' truncated"
    )
    offloaded = text_of(sent.messages[5])
    assert offloaded.startswith(f"[ARS: tool result offloaded: {len(big)} characters")
    assert path in offloaded
    preview = offloaded.split("Preview:\n", 1)[1]
    head, gap, tail = re.fullmatch(
        r"(.*)\n\[\.\.\. (\d+) characters not shown \.\.\.\]\n(.*)", preview, re.S
    ).groups()  # type: ignore[union-attr]
    assert head and tail and big.startswith(head) and big.endswith(tail)  # head AND tail
    assert int(gap) == len(big) - len(head) - len(tail)
    assert (
        sent.messages[5].additional_kwargs == history[4].additional_kwargs
    )  # the tool_call_id pairing
    # the others exactly as stored
    assert dumps([sent.messages[1], sent.messages[3], sent.messages[4]]) == dumps(
        [history[0], history[2], history[3]]
    )
    # the file: exact bytes, under the conversation's scope
    host = files_root / "threads" / KEY / path
    assert host.read_bytes() == big.encode("utf-8")
    assert memory.files.read_text(path) == big
    # the store: everything unchanged, no event
    assert text_of(history[4]) == big
    assert history[1].blocks[0].tool_kwargs == {"path": "notes.md", "content": content}
    assert text_of(history[5]) == "the log looks healthy"
    assert await stored(chat_store, KEY + "::ars_event") == []
    # events: started, completed L1 without cutoff/file_path — once for the view
    # after the tool round, once more when FunctionAgent re-reads the memory
    # after its final answer (every get is a round)
    assert recorder.phases == [("started", "L1"), ("completed", "L1")] * 2
    for started, done in zip(recorder.payloads[::2], recorder.payloads[1::2], strict=True):
        assert "cutoff" not in done and "file_path" not in done
        assert done["offloaded"] == [path] and done["truncated_args"] == 1
        assert done["round_id"] == started["round_id"] and done["forced"] is False
        assert done["tokens_after"] < done["tokens_before"]
    assert payloads == recorder.payloads
    assert {e.chat_store_key for e in recorder.events} == {KEY}


@pytest.mark.spec("R13")
async def test_same_content_same_file_next_turn(
    workspace: Workspace,
    file_backend: FsspecBackend,
    files_root: Path,
    recorder: EventRecorder,
) -> None:
    """The next turn offloads the same result to the same path again
    (content hash); one file, same bytes; the store still holds the original."""
    big = log_text(220)
    workspace.outputs["cat big.log"] = big
    store = SimpleChatStore()
    llm = ScriptedLLM([tool_call("bash", cmd="cat big.log"), "healthy", "still healthy"])
    memory = ArsMemory.from_defaults(
        chat_store=store,
        chat_store_key=KEY,
        file_backend=file_backend,
        summary_threshold=1,
        summary_l2_trigger_ratio=0.9,
    )
    agent = agent_for(llm, workspace)
    await agent.run("check the log", memory=memory)
    await agent.run("and now?", memory=memory)
    body_1, body_2 = text_of(llm.requests[1].messages[3]), text_of(llm.requests[2].messages[3])
    assert body_1 == body_2 and body_1.startswith("[ARS: tool result offloaded")
    files = sorted(p.relative_to(files_root).as_posix() for p in files_root.rglob("*.txt"))
    assert files == [f"threads/{KEY}/outputs/large_tool_results/bash-{sha256(big)}.txt"]
    assert text_of(store.get_messages(KEY)[2]) == big
    assert recorder.phases == [("started", "L1"), ("completed", "L1")] * 4
    assert {tuple(p.get("offloaded", ())) for p in recorder.payloads[1::2]} == {
        (files[0].split("/", 2)[2],)
    }


# ----------------------------------------------------------------
async def run_turns(agent: ArsFunctionAgent, memory: ArsMemory, texts: list[str]) -> None:
    for text in texts:
        await agent.run(text, memory=memory)


@pytest.mark.spec("R20", "R21", "R22", "R23", "R24", "R25")
async def test_l2_summary_event_and_chained_cutoffs(
    chat_store: Any,
    workspace: Workspace,
    file_backend: FsspecBackend,
    files_root: Path,
    recorder: EventRecorder,
) -> None:
    """Above the L2 threshold older history is archived (lossless
    JSONL) and summarized by the summary LLM; the event (cutoff, summary, path)
    is appended to the store under ``<key>::ars_event``; the next request is
    [system, summary, *messages after the cutoff]; a second L2 converts its
    cutoff to a global one and summarizes the previous summary with the new
    messages (chained)."""
    summary_llm = ScriptedLLM(["SUMMARY-ONE", "SUMMARY-TWO"])
    llm = ScriptedLLM([f"ack {i}" for i in range(40)])
    marks: list[tuple[dict[str, Any], int]] = []  # (payload, requests the LLM had received by then)
    memory = ArsMemory.from_defaults(
        chat_store=chat_store,
        chat_store_key=KEY,
        file_backend=file_backend,
        llm=summary_llm,
        summary_threshold=1,
        summary_keep_messages=4,
        on_event=lambda p: marks.append((p, len(llm.requests))),
    )
    agent = agent_for(llm, workspace)
    turns = [prose(130, tag=f"turn{i}") for i in range(16)]

    def l2_rounds() -> list[tuple[dict[str, Any], int]]:
        return [(p, n) for p, n in marks if p["phase"] == "completed" and p["level"] == "L2"]

    i = 0
    while len(l2_rounds()) < 1:
        await agent.run(turns[i], memory=memory)
        i += 1
    await agent.run(turns[i], memory=memory)  # a request after the round, whichever get ran it
    i += 1
    assert recorder.phases[:2] == [("started", "L1"), ("completed", "L2")]
    ((done, n_before),) = l2_rounds()
    cut, path = done["cutoff"], done["file_path"]
    assert path.startswith("outputs/conversation_history/history-000000-")
    assert done["summary_usage"]["input_tokens"] > 0
    history = await stored(chat_store, KEY)
    assert len(history) == 2 * i
    # what the LLM received next: system, the summary, then the stored messages from the cutoff on
    sent = llm.requests[n_before]
    assert sent.messages[0].content == SYSTEM
    summary = text_of(sent.messages[1])
    assert sent.messages[1].role.value == "user"
    assert summary.startswith(f"Summary of the earlier conversation (messages 1-{cut};")
    assert "SUMMARY-ONE" in summary and summary.endswith(f"saved at {path}.")
    assert dumps(sent.messages[2:]) == dumps(history[cut : cut + len(sent.messages) - 2])
    # the view falls under the L2 threshold (409 tokens): of the latest summary_keep_messages
    # only the newest (a 130-word turn) fits beside the summary
    assert len(sent.messages) - 2 == 1
    # the summary model's request: the summarized turns, none of the kept ones
    (sreq,) = summary_llm.requests
    assert sreq.tags["ars"] == "summary" and sreq.tags["nostream"] is True and sreq.tools == []
    prompt = text_of(sreq.messages[0])
    assert "{messages}" not in prompt
    for m in history[:cut]:
        assert text_of(m) in prompt
    assert text_of(history[cut]) not in prompt
    # the archive: exactly the summarized messages, back to LlamaIndex losslessly
    archive = (files_root / "threads" / KEY / path).read_text("utf-8")
    header, archived = read_history(archive)
    assert header["start"] == 0 and header["end"] == cut and header["thread"] == KEY
    assert dumps(from_core_messages(archived)) == dumps(history[:cut])
    # the store: all messages untouched, one event record
    assert [text_of(m) for m in history if m.role.value == "user"] == turns[:i]
    (record,) = await stored(chat_store, KEY + "::ars_event")
    data = record.additional_kwargs["ars_event"]
    assert data["event"]["cutoff"] == cut and data["event"]["file_path"] == path
    assert data["event"]["summary_usage"] == done["summary_usage"]
    event = await memory.aget_event()
    assert event is not None and event.cutoff == cut and "SUMMARY-ONE" in event.summary_message.text

    # keep talking until the second L2
    while len(l2_rounds()) < 2:
        await agent.run(turns[i], memory=memory)
        i += 1
    await agent.run(turns[i], memory=memory)
    i += 1
    done2, n2 = l2_rounds()[1]
    cut2, path2 = done2["cutoff"], done2["file_path"]
    assert cut2 > cut
    history = await stored(chat_store, KEY)
    records = await stored(chat_store, KEY + "::ars_event")
    assert [r.additional_kwargs["ars_event"]["event"]["cutoff"] for r in records] == [cut, cut2]
    assert records[1].additional_kwargs["ars_event"]["event"]["previous_cutoff"] == cut
    header2, archived2 = read_history((files_root / "threads" / KEY / path2).read_text("utf-8"))
    assert (header2["start"], header2["end"]) == (cut, cut2)
    assert dumps(from_core_messages(archived2)) == dumps(history[cut:cut2])
    prompt2 = text_of(summary_llm.requests[1].messages[0])
    assert "[previous summary]" in prompt2 and "SUMMARY-ONE" in prompt2
    sent2 = llm.requests[n2]
    assert text_of(sent2.messages[1]).startswith(
        f"Summary of the earlier conversation (messages 1-{cut2};"
    )
    assert "SUMMARY-TWO" in text_of(sent2.messages[1])
    assert dumps(sent2.messages[2:]) == dumps(history[cut2 : cut2 + len(sent2.messages) - 2])
    # nothing ever deleted
    assert [text_of(m) for m in history if m.role.value == "user"] == turns[:i]
    assert dumps(await memory.aget_all()) == dumps(history)


# ----------------------------------------------------------------
@pytest.mark.spec("R26", "R40")
async def test_history_write_failure_still_summarizes_without_path(
    chat_store: Any,
    workspace: Workspace,
    file_backend: FsspecBackend,
    recorder: EventRecorder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The archive write fails: a warning is logged, the summary
    still runs, the event's ``file_path`` is None and the summary names no file."""
    backend = FailingBackend(fail_prefixes=("outputs/conversation_history",), inner=file_backend)
    summary_llm = ScriptedLLM(["SUMMARY-NO-FILE"])
    llm = ScriptedLLM(["ack"])
    memory = ArsMemory.from_defaults(
        chat_store=chat_store,
        chat_store_key=KEY,
        file_backend=backend,
        llm=summary_llm,
        summary_threshold=1,
        summary_keep_messages=4,
    )
    agent = agent_for(llm, workspace)
    with caplog.at_level(logging.WARNING, logger="ars"):
        i = 0
        while not recorder.events:
            await agent.run(prose(130, tag=f"turn{i}"), memory=memory)
            i += 1
    assert recorder.phases == [("started", "L1"), ("completed", "L2")]
    done = recorder.payloads[1]
    assert "file_path" not in done and done["cutoff"] > 0
    assert len(backend.failed) == 1 and backend.failed[0].startswith(
        "outputs/conversation_history/history-"
    )
    assert "history archive write failed" in caplog.text
    assert len(summary_llm.requests) == 1
    summary = text_of(llm.requests[-1].messages[1])
    assert "SUMMARY-NO-FILE" in summary and "saved at" not in summary
    (record,) = await stored(chat_store, KEY + "::ars_event")
    assert record.additional_kwargs["ars_event"]["event"]["file_path"] is None
    assert len(await stored(chat_store, KEY)) == 2 * i


# ----------------------------------------------------------------
@pytest.mark.spec("R41")
async def test_summary_model_exception_is_recorded_not_raised(
    chat_store: Any,
    workspace: Workspace,
    file_backend: FsspecBackend,
    files_root: Path,
    recorder: EventRecorder,
) -> None:
    """The summary LLM raises: the summary message holds the error text,
    nothing escapes the memory, the agent's call succeeds, ``completed``."""
    summary_llm = ScriptedLLM([RuntimeError("summary model down")])
    llm = ScriptedLLM(["ack"])
    memory = ArsMemory.from_defaults(
        chat_store=chat_store,
        chat_store_key=KEY,
        file_backend=file_backend,
        llm=summary_llm,
        summary_threshold=1,
        summary_keep_messages=4,
    )
    agent = agent_for(llm, workspace)
    i = 0
    while not recorder.events:
        result = await agent.run(prose(130, tag=f"turn{i}"), memory=memory)
        assert str(result) == "ack"
        i += 1
    assert recorder.phases == [("started", "L1"), ("completed", "L2")]
    summary = text_of(llm.requests[-1].messages[1])
    assert "[ARS: the summary model failed: RuntimeError: summary model down]" in summary
    event = await memory.aget_event()
    assert event is not None and event.summary_error == "RuntimeError: summary model down"
    assert (
        event.file_path is not None and (files_root / "threads" / KEY / event.file_path).is_file()
    )
    history = await stored(chat_store, KEY)
    assert text_of(history[-1]) == "ack" and len(history) == 2 * i


# ----------------------------------------------------------------
@pytest.mark.spec("R27")
async def test_agent_llm_is_the_default_summary_model_and_its_calls_are_tagged(
    workspace: Workspace,
    file_backend: FsspecBackend,
    recorder: EventRecorder,
) -> None:
    """Without a summary model, ArsFunctionAgent binds its own LLM; the
    summary call is tagged (``ars=summary``, ``nostream``) and its usage goes
    into the event, apart from the agent's calls."""
    llm = ScriptedLLM(["ack"], summary_reply="SUMMARY-BY-AGENT-LLM")
    memory = ArsMemory.from_defaults(
        chat_store_key=KEY, file_backend=file_backend, summary_threshold=1, summary_keep_messages=4
    )
    agent = agent_for(llm, workspace)
    i = 0
    while not recorder.events:
        await agent.run(prose(130, tag=f"turn{i}"), memory=memory)
        i += 1
    (sreq,) = llm.summary_requests
    assert sreq.tags["ars"] == "summary" and sreq.tags["nostream"] is True
    assert all("ars" not in r.tags for r in llm.agent_requests)
    assert len(llm.agent_requests) == i
    assert "SUMMARY-BY-AGENT-LLM" in text_of(llm.agent_requests[-1].messages[1])
    usage = recorder.payloads[1]["summary_usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0


# ----------------------------------------------------------------
@pytest.mark.spec("R4")
async def test_overflow_forces_compaction_and_retries(
    chat_store: Any,
    workspace: Workspace,
    file_backend: FsspecBackend,
    recorder: EventRecorder,
) -> None:
    """The LLM raises a context-length error below ARS's threshold; the
    agent asks the memory for a forced compaction and retries once. Events
    (forced; ``started`` only when L2 begins) arrive after the retry succeeded."""
    llm = ScriptedLLM([f"ack {i}" for i in range(20)], max_context_tokens=900)
    summary_llm = ScriptedLLM(["FORCED-SUMMARY"])
    memory = ArsMemory.from_defaults(
        chat_store=chat_store,
        chat_store_key=KEY,
        file_backend=file_backend,
        llm=summary_llm,
        summary_threshold=8,
        summary_keep_messages=2,
        summary_l2_trigger_ratio=0.1,
    )
    agent = agent_for(llm, workspace)
    i = 0
    while not any(r.overflowed for r in llm.requests):
        await agent.run(prose(110, tag=f"turn{i}"), memory=memory)
        i += 1
    over, retry = llm.requests[-2], llm.requests[-1]
    assert over.overflowed and not retry.overflowed
    assert over.tokens > 900 > retry.tokens
    history = await stored(chat_store, KEY)
    assert len(history) == 2 * i
    # the overflowing request was the plain view: everything stored (below ARS's threshold)
    assert dumps(over.messages[1:]) == dumps(history[:-1])
    assert recorder.phases == [("started", "L2"), ("completed", "L2")]
    started, done = recorder.payloads
    assert started["forced"] is True and done["forced"] is True
    cut = done["cutoff"]
    assert cut == len(history) - 1 - 2  # keep 2: both fit in half of the L2 threshold (819)
    assert text_of(retry.messages[1]).startswith(
        f"Summary of the earlier conversation (messages 1-{cut};"
    )
    assert "FORCED-SUMMARY" in text_of(retry.messages[1])
    assert dumps(retry.messages[2:]) == dumps(history[cut:-1])
    assert text_of(history[-1]) == f"ack {i - 1}"
    # the next turn continues from the event, without a new summary
    await agent.run("one more question", memory=memory)
    nxt = llm.requests[-1]
    assert not nxt.overflowed and len(summary_llm.requests) == 1
    history = await stored(chat_store, KEY)
    assert dumps(nxt.messages[2:]) == dumps(history[cut:-1])
    assert len(recorder.events) == 2


@pytest.mark.spec("R4", "R32", "R41")
async def test_retry_that_still_overflows_emits_failed_and_raises(
    workspace: Workspace,
    file_backend: FsspecBackend,
    recorder: EventRecorder,
) -> None:
    """When the LLM still overflows after forced compaction, the
    round ends with ``failed`` and the context-length error reaches the caller."""
    llm = ScriptedLLM(["ack"], max_context_tokens=5000)
    memory = ArsMemory.from_defaults(
        chat_store_key=KEY,
        file_backend=file_backend,
        summarizer=None,
        summary_threshold=100,
        summary_keep_messages=2,
    )
    agent = agent_for(llm, workspace)
    for i in range(3):
        await agent.run(prose(60, tag=f"turn{i}"), memory=memory)
    llm._max_tokens = 60  # the model shrinks: even the compacted view is too long
    with pytest.raises(Exception, match="maximum context length"):
        await agent.run(prose(60, tag="last"), memory=memory)
    assert [r.overflowed for r in llm.agent_requests[-2:]] == [True, True]
    assert (
        len(llm.summary_requests) == 1
    )  # the agent's own LLM summarized (and overflowed too: a summary failure)
    assert recorder.phases == [("started", "L2"), ("failed", "L2")]
    failed = recorder.payloads[1]
    assert failed["forced"] is True and "maximum context length" in failed["error"]
    assert failed["round_id"] == recorder.payloads[0]["round_id"]


@pytest.mark.spec("R22", "R43")
async def test_overflow_trims_the_kept_tail_in_the_view_not_in_the_store(
    chat_store: Any,
    workspace: Workspace,
    file_backend: FsspecBackend,
    files_root: Path,
    recorder: EventRecorder,
) -> None:
    """Under overflow the kept window is still too big: the tail
    sent is trimmed (original saved to a file), the trim is persisted with the
    event so the next request matches what was sent, and the stored transcript
    is untouched."""
    llm = ScriptedLLM([f"ack {i}" for i in range(20)], max_context_tokens=2600)
    memory = ArsMemory.from_defaults(
        chat_store=chat_store,
        chat_store_key=KEY,
        file_backend=file_backend,
        llm=ScriptedLLM(["TRIM-SUMMARY"]),
        summary_threshold=8,
        summary_keep_messages=2,
        summary_l2_trigger_ratio=0.2,
    )
    agent = agent_for(llm, workspace)
    for i in range(3):
        await agent.run(prose(300, tag=f"turn{i}"), memory=memory)
    huge = prose(2000, tag="paste")
    await agent.run(huge, memory=memory)
    over, retry = llm.requests[-2], llm.requests[-1]
    assert over.overflowed and not retry.overflowed
    history = await stored(chat_store, KEY)
    assert text_of(history[-2]) == huge  # stored unchanged
    trimmed = text_of(retry.messages[-1])
    assert trimmed.startswith("[ARS: this message was trimmed to fit the context window")
    (path,) = [p for p in trimmed.split() if p.startswith("outputs/trimmed_messages/")]
    original = (files_root / "threads" / KEY / path.rstrip(".]")).read_text("utf-8")
    assert huge in original
    record = (await stored(chat_store, KEY + "::ars_event"))[-1].additional_kwargs["ars_event"]
    assert [r["index"] for r in record["replaced"]] == [len(history) - 2]
    # the next request sends the same trimmed message again, from the persisted event
    view = await memory.aget()
    assert text_of(view[-2]) == trimmed
    assert dumps(await memory.aget_all()) == dumps(history)
    assert recorder.phases == [("started", "L2"), ("completed", "L2")]


# ---------------------------------------------------------------- stock agents


@pytest.mark.spec("R12")
async def test_plain_function_agent_with_ars_memory(
    workspace: Workspace, file_backend: FsspecBackend, recorder: EventRecorder
) -> None:
    """A stock ``FunctionAgent`` works with ArsMemory unchanged: its tool round
    reaches the memory at the end of the run, and from the next run on the
    large result is offloaded in what the LLM receives."""
    from llama_index.core.agent.workflow import FunctionAgent

    big = log_text(220)
    workspace.outputs["cat big.log"] = big
    llm = ScriptedLLM([tool_call("bash", cmd="cat big.log"), "healthy", "yes, healthy"])
    memory = ArsMemory.from_defaults(
        chat_store_key=KEY,
        file_backend=file_backend,
        summary_threshold=1,
        summary_l2_trigger_ratio=0.9,
    )
    agent = FunctionAgent(tools=workspace.tools(), llm=llm, system_prompt=SYSTEM)
    await agent.run("check the log", memory=memory)
    assert (
        text_of(llm.requests[1].messages[3]) == big
    )  # the scratchpad is out of the memory's reach
    await agent.run("sure?", memory=memory)
    sent = llm.requests[2].messages
    assert [m.role.value for m in sent] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert text_of(sent[3]).startswith("[ARS: tool result offloaded")
    assert memory.files.read_text(f"outputs/large_tool_results/bash-{sha256(big)}.txt") == big
    assert text_of(memory.get_all()[2]) == big


@pytest.mark.spec("R4")
async def test_agent_workflow_with_ars_function_agent(
    workspace: Workspace, file_backend: FsspecBackend, recorder: EventRecorder
) -> None:
    """Forced compression inside an ``AgentWorkflow``: the overflow is caught, L2 forced, the
    call retried, and the workflow answers."""
    from llama_index.core.agent.workflow import AgentWorkflow

    llm = ScriptedLLM([f"ack {i}" for i in range(10)], max_context_tokens=700)
    memory = ArsMemory.from_defaults(
        chat_store_key=KEY,
        file_backend=file_backend,
        llm=ScriptedLLM(["WF-SUMMARY"]),
        summary_keep_messages=2,
    )
    workflow = AgentWorkflow(agents=[agent_for(llm, workspace)])
    for i in range(6):
        result = await workflow.run(user_msg=prose(110, tag=f"turn{i}"), memory=memory)
        assert str(result) == f"ack {i}"
    assert any(r.overflowed for r in llm.requests)
    assert ("completed", "L2") in recorder.phases
    assert "WF-SUMMARY" in text_of(llm.requests[-1].messages[1])
    assert len(memory.get_all()) == 12
