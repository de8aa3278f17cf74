"""LlamaIndex against a real model: ``OpenAILike`` -> llama-cpp-python's
OpenAI-compatible server (SmolLM2-135M, a 2,048-token window) with ``ArsMemory``
on a SQLite chat store (``SQLAlchemyChatStore`` + aiosqlite).

The provider's answers are recorded through LlamaIndex instrumentation
(``LLMChatEndEvent``: the tags, the response and the usage the server reported),
so ARS's event is compared with what the model actually said.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from ars_core import FsspecBackend, is_context_overflow, read_history
from ars_core.prompt import escape_text
from ars_llamaindex import ArsMemory, acall_with_compaction, achat_with_compaction
from tests.e2e.helpers import CONFIG, MAX_TOKENS, SYSTEM, holds_model_summary, user_turn
from tests.servers import LlamaServer

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

KEY = "real-conversation"


@dataclass
class Answer:
    summary: bool
    prompt: str
    text: str
    usage: dict[str, Any]


class ChatRecorder(BaseEventHandler):  # type: ignore[misc]
    """Every chat response of the LLM, with ARS's summary tag and the raw usage."""

    answers: list[Any] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "ChatRecorder"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, LLMChatEndEvent) and event.response is not None:
            raw = event.response.raw
            usage = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
            usage_dict = usage if isinstance(usage, dict) else usage.model_dump() if usage else {}
            self.answers.append(
                Answer(
                    summary=(event.tags or {}).get("ars") == "summary",
                    prompt="\n".join(m.content or "" for m in event.messages),
                    text=event.response.message.content or "",
                    usage=usage_dict,
                )
            )

    @property
    def summaries(self) -> list[Answer]:
        return [a for a in self.answers if a.summary]


@pytest.fixture
def recorder() -> Any:
    dispatcher = get_dispatcher()
    handler = ChatRecorder()
    dispatcher.add_event_handler(handler)
    try:
        yield handler
    finally:
        dispatcher.event_handlers.remove(handler)


def llm_for(server: LlamaServer) -> Any:
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(
        model=server.model, api_base=server.base_url, api_key="no-key-needed",
        is_chat_model=True, context_window=server.n_ctx, max_tokens=MAX_TOKENS,
        temperature=0, max_retries=0, timeout=300,
    )  # fmt: skip


def memory_for(server: LlamaServer, db: Path, files: Path, **kwargs: Any) -> ArsMemory:
    store = SQLAlchemyChatStore(table_name="chats", async_database_uri=f"sqlite+aiosqlite:///{db}")
    return ArsMemory.from_defaults(
        llm=llm_for(server), chat_store=store, chat_store_key=KEY, config=CONFIG,
        file_backend=FsspecBackend(f"file://{files}"), system_prompt=SYSTEM, **kwargs,
    )  # fmt: skip


async def turn(memory: ArsMemory, llm: Any, i: int) -> None:
    await memory.aput(ChatMessage(role="user", content=user_turn(i)))
    response = await achat_with_compaction(llm, memory, system_prompt=SYSTEM)
    await memory.aput(response.message)


def check_summary(
    event: Any, recorder: ChatRecorder, stored: list[ChatMessage], files: FsspecBackend
) -> None:
    answer = recorder.summaries[-1]
    text = answer.text.strip()
    assert text and holds_model_summary(event.summary_message.text, text)
    assert 0 < answer.usage["completion_tokens"] <= MAX_TOKENS
    assert event.summary_usage is not None
    assert (event.summary_usage.input_tokens, event.summary_usage.output_tokens) == (
        answer.usage["prompt_tokens"], answer.usage["completion_tokens"],
    )  # fmt: skip
    header, archived = read_history(files.read_text(event.file_path))
    assert (header["start"], header["end"]) == (event.previous_cutoff, event.cutoff)
    assert [m.text for m in archived] == [
        m.content for m in stored[event.previous_cutoff : event.cutoff]
    ]


@pytest.mark.spec("R23", "R24", "R25", "R44")
async def test_openai_like_summaries_chain_across_a_restart_on_a_sqlite_chat_store(
    llama_server: LlamaServer, recorder: ChatRecorder, tmp_path: Path
) -> None:
    """Turns until L2: the event in the SQLite chat store holds the real model's summary
    and the server-reported usage, its archive the covered messages. A new memory on a
    new store object over the same database (a restart) builds the same view from the
    stored event, and its next L2 continues the cutoff from the stored summary."""
    db, files = tmp_path / "chats.sqlite", tmp_path / "files"
    memory = memory_for(llama_server, db, files)
    llm = llm_for(llama_server)
    for i in range(6):
        await turn(memory, llm, i)
        if await memory.aget_event() is not None:
            break
    first = await memory.aget_event()
    assert first is not None and first.previous_cutoff == 0
    stored = await memory.aget_all()
    check_summary(first, recorder, stored, memory.files)
    view = await memory.aget()
    # at T = 256 the summary (within its bound) and the two kept turns (about 80 tokens
    # each) still fill the window, so this get() may have summarized again: the stored event
    latest = await memory.aget_event()
    assert latest is not None and latest.cutoff >= first.cutoff

    restarted = memory_for(llama_server, db, files)  # nothing shared but the database
    assert await restarted.aget_event() == latest
    assert [(m.role, m.content) for m in await restarted.aget()] == [
        (m.role, m.content) for m in view
    ]
    summaries_before = len(recorder.summaries)
    for i in range(10, 16):
        await turn(restarted, llm, i)
        if len(recorder.summaries) > summaries_before:
            break
    second = await restarted.aget_event()
    assert second is not None and second.previous_cutoff == latest.cutoff < second.cutoff
    check_summary(second, recorder, await restarted.aget_all(), restarted.files)
    # the summary call after the restart read the stored summary (chained, R25)
    assert escape_text(latest.summary_message.text) in recorder.summaries[-1].prompt


@pytest.mark.spec("R4", "R20")
async def test_openai_like_context_overflow_from_the_server_forces_compaction(
    llama_server: LlamaServer, recorder: ChatRecorder, tmp_path: Path
) -> None:
    """A stored history beyond the server's window, below ARS's threshold: the server
    refuses the first request, ``ArsMemory`` recognizes its error, compacts (L2, forced)
    and the retried request is answered within the window."""
    errors: list[BaseException] = []
    events: list[dict[str, Any]] = []
    memory = memory_for(
        llama_server, tmp_path / "chats.sqlite", tmp_path / "files",
        summary_threshold=100, on_event=events.append,
    )  # fmt: skip
    memory.compressor.summary_input_tokens = 600  # what the summary model reads fits its window
    llm = llm_for(llama_server)
    history = []
    for i in range(llama_server.n_ctx // 170):
        history += [
            ChatMessage(role="user", content=user_turn(i, sentences=10)),
            ChatMessage(role="assistant", content=f"Noted the notes of turn {i}."),
        ]
    await memory.aset([*history, ChatMessage(role="user", content="What happened on day 3?")])

    async def call(messages: list[ChatMessage]) -> Any:
        try:
            return await llm.achat(messages)
        except Exception as exc:
            errors.append(exc)
            raise

    response = await acall_with_compaction(memory, call, system_prompt=SYSTEM)
    assert len(errors) == 1 and is_context_overflow(errors[0])
    assert memory.is_context_length_error(errors[0])
    assert [(e["phase"], e["level"], e["forced"]) for e in events] == [
        ("started", "L2", True), ("completed", "L2", True),
    ]  # fmt: skip
    event = await memory.aget_event()
    assert event is not None and event.cutoff > 0 and not event.summary_error
    assert recorder.summaries and recorder.summaries[-1].text.strip() in event.summary_message.text
    main = [a for a in recorder.answers if not a.summary][-1]
    assert main.text == response.message.content
    assert main.usage["prompt_tokens"] + main.usage["completion_tokens"] <= llama_server.n_ctx
