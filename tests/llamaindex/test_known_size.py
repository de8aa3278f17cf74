"""An ``ArsMemory`` resumed on its chat store sizes the history from the last view's known size.

A conversation in the zone (its UTF-8 bound above T, its count below): the memory's
view is counted exactly and its stamp kept in the chat store; the agent puts the
answer and the next question; a new memory (a new process: a new estimator, nothing
cached) on the same store builds the same view as counting the whole history, and
encodes only the answer and the question. An edited store (a message removed) makes
the stamp stale: ignored.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store import SimpleChatStore

import ars_core.known_size
from ars_core import ExtractiveSummarizer, FsspecBackend
from ars_core.testing import RecordingTiktoken
from ars_llamaindex import ArsMemory
from tests.core.helpers import words

pytestmark = pytest.mark.spec("R1", "R3")

KEY = "known-thread"
TURNS = 14


def memory(store: SimpleChatStore) -> tuple[ArsMemory, RecordingTiktoken]:
    est = RecordingTiktoken()
    built = ArsMemory.from_defaults(
        chat_store=store,
        chat_store_key=KEY,
        file_backend=FsspecBackend("memory://known-size-li"),
        summarizer=ExtractiveSummarizer(),
        estimator=est,
        summary_threshold=4,
        summary_keep_messages=4,
    )
    return built, est


def store(mode: str = "sync") -> SimpleChatStore:
    """A conversation of ``TURNS`` turns (~2.8K o200k tokens, ~15 KB) and its view
    built once (the view's stamp kept), then the answer to it and a new question."""
    chat = SimpleChatStore()
    first, _ = memory(chat)
    for i in range(TURNS):
        first.put(ChatMessage(role="user", content=f"question {i}: " + words(30, f"q{i}")))
        if i < TURNS - 1:
            first.put(ChatMessage(role="assistant", content=f"answer {i}: " + words(100, f"a{i}")))
    first.get() if mode == "sync" else anyio.run(first.aget)
    first.put(ChatMessage(role="assistant", content="the last answer: " + words(100, "last")))
    first.put(ChatMessage(role="user", content="and the next question?"))
    return chat


def resumed(
    chat: SimpleChatStore, ignore: bool, monkeypatch: Any, mode: str = "sync"
) -> tuple[list[Any], list[str]]:
    built, est = memory(chat)
    with monkeypatch.context() as m:
        if ignore:
            m.setattr(ars_core.known_size, "known_history", lambda size, *args: size)
        view = built.get() if mode == "sync" else anyio.run(built.aget)
    return [(v.role, v.content) for v in view], est.texts


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_new_memory_counts_only_the_answer_and_the_question(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    view, texts = resumed(store(mode), False, monkeypatch, mode)
    counted, all_texts = resumed(store(mode), True, monkeypatch, mode)
    assert view == counted and len(view) == 2 * TURNS + 1  # the whole history (R1)
    contents = {c for _, c in view}
    assert contents <= set(all_texts)
    assert contents & set(texts) == {view[-2][1], view[-1][1]}


def test_a_stamp_of_an_edited_store_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    chats = store(), store()
    for chat in chats:
        messages = chat.get_messages(KEY)
        chat.set_messages(KEY, messages[2:])
    view, texts = resumed(chats[0], False, monkeypatch)
    counted, all_texts = resumed(chats[1], True, monkeypatch)
    assert view == counted and texts == all_texts
    assert {c for _, c in view} <= set(texts)
