"""ArsMemory as a BaseMemory: storage contract, budget, config, files, the
sync path, the forced-path helpers, events."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.memory import BaseMemory
from llama_index.core.storage.chat_store import SimpleChatStore
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from ars_core import ConfigError, FsspecBackend, SummaryConfig
from ars_core.paths import scope_name
from ars_core.testing import FailingBackend, FakeSummarizer
from ars_llamaindex import (
    ArsFunctionAgent,
    ArsMemory,
    acall_with_compaction,
    call_with_compaction,
    chat_with_compaction,
    to_core_messages,
)
from ars_llamaindex.testing import ContextLengthExceededError, ScriptedLLM, tool_call
from tests.llamaindex.helpers import EventRecorder, Workspace, dumps, log_text, prose

KEY = "conv"


def conversation(turns: int, words: int = 130) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for i in range(turns):
        out.append(ChatMessage(role="user", content=prose(words, tag=f"q{i}")))
        out.append(ChatMessage(role="assistant", content=f"answer {i}"))
    return out


# ---------------------------------------------------------------- storage contract


@pytest.mark.spec("R5")
def test_is_a_base_memory_and_stores_messages_unchanged() -> None:
    """Put/set store every message as given; get_all returns them untouched;
    callers cannot mutate the stored copies through what they get back."""
    memory = ArsMemory.from_defaults(chat_store_key=KEY)
    assert isinstance(memory, BaseMemory)
    msg = ChatMessage(role="user", content="hello")
    memory.put(msg)
    msg.blocks[0].text = "mutated by the caller"  # type: ignore[union-attr]
    memory.put_messages(
        [
            ChatMessage(
                role="assistant",
                blocks=[
                    ToolCallBlock(tool_call_id="a", tool_name="bash", tool_kwargs={"cmd": "ls"})
                ],
            ),
            ChatMessage(role="tool", content="out", additional_kwargs={"tool_call_id": "a"}),
        ]
    )
    got = memory.get_all()
    assert [m.content for m in got] == ["hello", None, "out"]
    view = memory.get()
    view[0].blocks[0].text = "FunctionAgent formats state into the last message"  # type: ignore[union-attr]
    assert dumps(memory.get_all()) == dumps(got)
    memory.reset()
    assert memory.get_all() == [] and memory.get() == []


def test_from_defaults_chat_history_and_llm_like_llamaindex_memories() -> None:
    history = conversation(2)
    llm = ScriptedLLM(["S"])
    memory = ArsMemory.from_defaults(history, llm)
    assert dumps(memory.get_all()) == dumps(history)
    assert type(memory.summarizer).__name__ == "LLMSummarizer" and memory.summarizer.llm is llm


def test_set_keeps_the_event_only_while_the_summarized_prefix_is_unchanged(
    file_backend: FsspecBackend,
) -> None:
    """``set`` replaces the history; the event survives when the messages it
    summarizes are unchanged, and is dropped otherwise (never applied to a
    different history)."""
    store = SimpleChatStore()
    memory = ArsMemory.from_defaults(
        chat_store=store,
        chat_store_key=KEY,
        file_backend=file_backend,
        summarizer=FakeSummarizer("S"),
        summary_threshold=1,
        summary_keep_messages=4,
    )
    history = conversation(8)
    memory.set(history)
    memory.get()
    event = memory.get_event()
    assert event is not None
    memory.set([*history, ChatMessage(role="user", content="more")])
    assert memory.get_event() == event
    memory.set(conversation(8, words=131))
    assert memory.get_event() is None and store.get_messages(KEY + "::ars_event") == []
    memory.get()
    memory.reset()
    assert store.get_keys() == [] or all(store.get_messages(k) == [] for k in store.get_keys())


def test_event_ignored_when_the_store_was_changed_behind_its_back(
    file_backend: FsspecBackend,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = SimpleChatStore()
    memory = ArsMemory.from_defaults(
        chat_store=store,
        chat_store_key=KEY,
        file_backend=file_backend,
        summarizer=FakeSummarizer("S"),
        summary_threshold=1,
        summary_keep_messages=4,
    )
    memory.set(conversation(8))
    memory.get()
    store.set_messages(KEY, conversation(8, words=20))  # not through the memory
    with caplog.at_level(logging.WARNING, logger="ars.llamaindex"):
        view = memory.get()
    assert "no longer matches" in caplog.text
    assert dumps(view) == dumps(conversation(8, words=20))


# ---------------------------------------------------------------- budget


@pytest.mark.spec("R3")
def test_system_prompt_and_tool_schemas_count_toward_the_threshold(
    recorder: EventRecorder,
) -> None:
    """The same messages are below the threshold alone and at/above it
    once the system prompt and tool schemas are counted."""
    memory = ArsMemory.from_defaults(
        chat_store_key=KEY, summary_threshold=1, summarizer=FakeSummarizer()
    )
    history = [ChatMessage(role="user", content=prose(800))]
    memory.set(history)
    est = memory.compressor.estimator
    alone = est.count(to_core_messages(history))
    tools = Workspace().tools()
    system = prose(300)
    assert alone < 1024 <= est.count(to_core_messages(history), system=system)
    memory.get()
    assert recorder.events == []
    memory.get(system_prompt=system)
    assert recorder.phases[0] == ("started", "L1")
    tool_tokens = est.count([], tools=memory.tools or [])  # none bound yet
    assert tool_tokens == 0
    with_tools = ArsMemory.from_defaults(chat_store_key="t", summary_threshold=1, tools=tools)
    assert with_tools.tools is not None and with_tools.tools[0]["function"]["name"] == "bash"
    needed = 1024 - alone
    schema_tokens = est.count([], tools=with_tools.tools)
    assert schema_tokens > 0
    n_tools = -(-needed // schema_tokens) + 1
    with_tools.set(history)
    recorder.events.clear()
    with_tools.get(tools=tools * n_tools)
    assert recorder.phases[0] == ("started", "L1")


@pytest.mark.spec("R35", "R50")
def test_config_from_defaults_context_and_overrides() -> None:
    """The five fields come from a SummaryConfig, a mapping or an agent
    Context object; keyword fields override; invalid values are rejected."""
    assert ArsMemory.from_defaults().config == SummaryConfig()
    ctx = SimpleNamespace(
        summary_threshold=2,
        summary_keep_messages=6,
        summary_prompt=None,
        summary_tool_result_token_limit=None,
        summary_l2_trigger_ratio=0.5,
    )
    memory = ArsMemory.from_defaults(config=ctx, summary_keep_messages=3)
    assert (
        memory.config.threshold_tokens,
        memory.config.summary_keep_messages,
        memory.config.summary_l2_trigger_ratio,
    ) == (2048, 3, 0.5)
    assert ArsMemory.from_defaults(config={"summary_threshold": 4}).config.threshold_tokens == 4096
    assert (
        ArsMemory.from_defaults(
            config=SummaryConfig(summary_keep_messages=2), summary_threshold=3
        ).config.summary_keep_messages
        == 2
    )
    with pytest.raises(ConfigError, match="summary_prompt"):
        ArsMemory.from_defaults(summary_prompt="no placeholder")
    with pytest.raises(ConfigError, match="summary_keep_messages"):
        ArsMemory.from_defaults(config={"summary_keep_messages": 0})
    with pytest.raises(TypeError, match="summary_treshold"):
        ArsMemory.from_defaults(summary_treshold=1)


# ---------------------------------------------------------------- files


@pytest.mark.spec("R36", "R37")
def test_files_are_scoped_per_chat_store_key(files_root: Path) -> None:
    """Each conversation key has its own file scope under one root; a new
    memory with the same key sees the same files. A hostile key cannot
    leave the root; the model only ever sees virtual paths."""
    big = log_text(250)
    root = f"file://{files_root}"
    seen = {}
    for key in ("alice", "../../etc"):
        memory = ArsMemory.from_defaults(
            chat_store_key=key, file_backend=root, summary_threshold=1, summary_l2_trigger_ratio=0.9
        )
        memory.set(
            [
                ChatMessage(
                    role="assistant",
                    blocks=[
                        ToolCallBlock(
                            tool_call_id="a", tool_name="bash", tool_kwargs={"cmd": "cat"}
                        )
                    ],
                ),
                ChatMessage(role="tool", content=big, additional_kwargs={"tool_call_id": "a"}),
            ]
        )
        body = memory.get()[1].content or ""
        assert str(files_root) not in body
        path = body.split(" saved to ", 1)[1].split(". Read", 1)[0]
        assert path.startswith("outputs/large_tool_results/bash-")
        seen[key] = path
        assert (
            ArsMemory.from_defaults(chat_store_key=key, file_backend=root).files.read_text(path)
            == big
        )
    files = sorted(p.relative_to(files_root).as_posix() for p in files_root.rglob("*.txt"))
    assert files == sorted(
        [
            f"threads/alice/{seen['alice']}",
            f"threads/{scope_name('../../etc')}/{seen['../../etc']}",
        ]
    )
    # sanitised, and never the same scope as "etc" (nor any other safe name)
    assert scope_name("../../etc").startswith("_etc-")


# ---------------------------------------------------------------- sync path


@pytest.mark.spec("R26", "R40")
def test_sync_path_writes_history_first_then_summarizes(
    file_backend: FsspecBackend,
    recorder: EventRecorder,
) -> None:
    """Sync path: the archive write happens before the summary call (and its
    failure does not stop it); on SQLAlchemyChatStore through the sync API."""
    backend = FailingBackend(fail_prefixes=("outputs/conversation_history",), inner=file_backend)
    order: list[str] = []

    def summarize(prompt: str) -> str:
        order.append(f"summary after {len(backend.failed)} failed write(s)")
        return "SYNC-SUMMARY"

    store = SQLAlchemyChatStore(
        table_name="sync_conv", async_database_uri="sqlite+aiosqlite:///:memory:"
    )
    memory = ArsMemory.from_defaults(
        chat_store=store,
        chat_store_key=KEY,
        file_backend=backend,
        summarizer=FakeSummarizer(summarize),
        summary_threshold=1,
        summary_keep_messages=4,
        summary_max_tokens=32,  # a tiny summary: the kept window keeps its 4 messages
    )
    history = conversation(8)
    memory.put_messages(history)
    view = memory.get()
    assert order == ["summary after 1 failed write(s)"]
    assert "SYNC-SUMMARY" in (view[0].content or "")
    event = memory.get_event()
    assert event is not None and event.file_path is None and event.cutoff == 12
    assert dumps(view[1:]) == dumps(history[12:])
    assert dumps(memory.get_all()) == dumps(history)
    assert recorder.phases == [("started", "L1"), ("completed", "L2")]


# ---------------------------------------------------------------- forced-path helpers


@pytest.mark.spec("R4")
def test_call_with_compaction_sync_helper(
    file_backend: FsspecBackend, recorder: EventRecorder
) -> None:
    """Forced compression for chat engines / custom loops: the helper catches the LLM's
    context-length error, forces L2 and retries once; events after success."""
    llm = ScriptedLLM(
        ["fine"], max_context_tokens=560
    )  # the retry: summary (with its task) + 2 kept
    memory = ArsMemory.from_defaults(
        chat_store_key=KEY,
        file_backend=file_backend,
        summarizer=FakeSummarizer("HELPER-SUMMARY"),
        summary_keep_messages=2,
    )
    memory.set(conversation(4))
    seen_events: list[int] = []

    def call(messages: list[ChatMessage]) -> Any:
        seen_events.append(len(recorder.events))
        return llm.chat(messages)

    response = call_with_compaction(memory, call, system_prompt="sys")
    assert response.message.content == "fine"
    over, ok = llm.requests
    assert over.overflowed and not ok.overflowed
    assert over.messages[0].content == "sys" and ok.messages[0].content == "sys"
    assert "HELPER-SUMMARY" in (ok.messages[1].content or "")
    assert dumps(ok.messages[2:]) == dumps(conversation(4)[6:])
    assert seen_events == [0, 0]  # nothing announced before the retry answered
    assert recorder.phases == [("started", "L2"), ("completed", "L2")]
    assert all(p["forced"] for p in recorder.payloads)


@pytest.mark.spec("R4")
def test_chat_with_compaction_passes_tools_and_other_errors_propagate(
    file_backend: FsspecBackend,
) -> None:
    llm = ScriptedLLM([tool_call("bash", cmd="ls")])
    memory = ArsMemory.from_defaults(chat_store_key=KEY, file_backend=file_backend)
    memory.put(ChatMessage(role="user", content="list"))
    tools = Workspace().tools()
    response = chat_with_compaction(llm, memory, tools=tools)
    assert llm.get_tool_calls_from_response(response)[0].tool_name == "bash"
    assert llm.requests[0].tools == ["bash", "write_file"]
    broken = ScriptedLLM([ValueError("bad request: invalid tool schema")])
    with pytest.raises(ValueError, match="invalid tool schema"):
        chat_with_compaction(broken, memory)
    assert len(broken.requests) == 1  # not an overflow: no retry


@pytest.mark.anyio
@pytest.mark.spec("R4")
async def test_acall_with_compaction_failed_when_retry_overflows(
    file_backend: FsspecBackend,
    recorder: EventRecorder,
) -> None:
    llm = ScriptedLLM(["never"], max_context_tokens=10)
    memory = ArsMemory.from_defaults(
        chat_store_key=KEY,
        file_backend=file_backend,
        summarizer=FakeSummarizer("S"),
        summary_keep_messages=2,
    )
    await memory.aset(conversation(4))
    with pytest.raises(ContextLengthExceededError):
        await acall_with_compaction(memory, llm.achat)
    assert [r.overflowed for r in llm.requests] == [True, True]
    assert recorder.phases == [("started", "L2"), ("failed", "L2")]
    assert "maximum context length is 10 tokens" in recorder.payloads[1]["error"]


# ---------------------------------------------------------------- OpenAI-style tool calls


@pytest.mark.anyio
@pytest.mark.spec("R11", "R12")
async def test_openai_style_tool_calls_through_a_real_agent(
    file_backend: FsspecBackend,
    recorder: EventRecorder,
) -> None:
    """L1 with tool calls in ``additional_kwargs["tool_calls"]`` (OpenAI
    style, as the OpenAI integration stores them): the view truncates the
    argument inside the ``arguments`` JSON string; the store keeps it whole."""
    ws = Workspace()
    big = log_text(220)
    ws.outputs["cat log"] = big
    content = "w" * 2600
    llm = ScriptedLLM(
        [
            tool_call("write_file", path="a.txt", content=content),
            tool_call("bash", cmd="cat log"),
            "done",
        ],
        tool_call_style="openai",
    )
    memory = ArsMemory.from_defaults(
        chat_store_key=KEY,
        file_backend=file_backend,
        summary_threshold=1,
        summary_l2_trigger_ratio=0.9,
    )
    await ArsFunctionAgent(tools=ws.tools(), llm=llm, system_prompt="s").run("go", memory=memory)
    assert ws.written == {"a.txt": content}
    sent = llm.requests[2].messages
    args = json.loads(sent[2].additional_kwargs["tool_calls"][0]["function"]["arguments"])
    assert args["path"] == "a.txt" and args["content"].startswith(
        "[ARS: 2600 characters of the write_file"
    )
    assert (sent[5].content or "").startswith("[ARS: tool result offloaded")
    stored = memory.get_all()
    assert (
        json.loads(stored[1].additional_kwargs["tool_calls"][0]["function"]["arguments"])["content"]
        == content
    )
    assert stored[4].content == big
    assert recorder.phases[:2] == [("started", "L1"), ("completed", "L1")]


# ---------------------------------------------------------------- events


@pytest.mark.spec("R30", "R33")
def test_instrumentation_and_callback_payloads_match_the_core(
    file_backend: FsspecBackend,
    recorder: EventRecorder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One round = started then completed, as LlamaIndex
    instrumentation events whose payload is the core event's ``to_dict()``
    (what an SSE ``context_compression`` frame carries); a failing callback
    never breaks the call."""
    got: list[dict[str, Any]] = []

    def callback(payload: dict[str, Any]) -> None:
        got.append(payload)
        raise RuntimeError("observer bug")

    memory = ArsMemory.from_defaults(
        chat_store_key=KEY,
        file_backend=file_backend,
        on_event=callback,
        summarizer=FakeSummarizer("S"),
        summary_threshold=1,
        summary_keep_messages=4,
    )
    memory.set(conversation(8))
    with caplog.at_level(logging.WARNING, logger="ars.llamaindex"):
        memory.get()
    assert "observer bug" in caplog.text
    assert [type(e).__name__ for e in recorder.events] == [
        "ArsCompressionStartedEvent",
        "ArsCompressionCompletedEvent",
    ]
    assert got == recorder.payloads
    started, done = recorder.payloads
    assert started["type"] == "context_compression" and started["phase"] == "started"
    assert set(done) >= {
        "type",
        "phase",
        "level",
        "round_id",
        "forced",
        "tokens_before",
        "tokens_after",
        "threshold",
        "timestamp",
        "cutoff",
        "file_path",
        "summary_usage",
    }
    assert done["summary_usage"] == {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
    assert recorder.events[1].level == "L2" and recorder.events[1].round_id == started["round_id"]
    assert recorder.events[1].class_name() == "ArsCompressionCompletedEvent"
