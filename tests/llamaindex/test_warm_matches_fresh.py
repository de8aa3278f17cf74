"""An ``ArsMemory`` that served every earlier ``get`` of a conversation returns exactly
what a new memory over the same chat store returns.

The warm memory keeps its converted history, its engine and its event across calls,
its store edited through it. The fresh one is a new memory for every ``get``, over
a copy of the store read back from its JSON (new message objects), as a process
that opens the conversation's store again is. Between calls the conversation is
edited the way agents and users edit it: turns appended (tool results large enough
for L1 to offload), a user message, the provider's usage recorded for an answer,
one or several messages removed, a message replaced, every message made anew. At
each ``get`` both must return the same view, hold the same event and write the
same files. The archive log (a later round writes a continuation naming the
earlier archive) is memory an engine keeps by design and is given to the fresh
memory too.

``ARS_WARM_EXAMPLES`` raises the example count for a local hunt."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock
from llama_index.core.storage.chat_store import SimpleChatStore

from ars_core import FsspecBackend, SummaryConfig
from ars_core.testing import FakeSummarizer
from ars_llamaindex import ArsMemory
from ars_llamaindex.known_count import KNOWN_KEY_SUFFIX
from tests.core.helpers import files_in, words
from tests.llamaindex.helpers import dumps
from tests.warm_fresh import adapter_config, adapter_hunt, cleared

pytestmark = pytest.mark.spec("R10", "R12", "R24", "R44", "R51", "R58")

KEY = "conv"

OPS = (
    "turn",
    "turn",
    "turn_big",
    "user",
    "usage",
    "remove",
    "remove_some",
    "replace",
    "renew",
)

Step = tuple[str, int, int]


def turn(serial: int, big: bool) -> list[ChatMessage]:
    output = words(2500 if big else 60, seed=f"o{serial}")
    call = ToolCallBlock(
        tool_call_id=f"c{serial}", tool_name="bash", tool_kwargs={"cmd": f"make step{serial}"}
    )
    return [
        ChatMessage(role="user", content=f"request {serial}: " + words(25, seed=f"r{serial}")),
        ChatMessage(role="assistant", blocks=[TextBlock(text=""), call]),
        ChatMessage(
            role="tool",
            content=f"output {serial}: {output}",
            additional_kwargs={"tool_call_id": f"c{serial}"},
        ),
        ChatMessage(role="assistant", content=f"answer {serial}: " + words(20, seed=f"n{serial}")),
    ]


def read_back(store: SimpleChatStore) -> SimpleChatStore:
    """A copy of ``store`` as its JSON reads back: new message objects, every key."""
    copy = SimpleChatStore()
    for key in store.get_keys():
        dicts = json.loads(json.dumps(dumps(store.get_messages(key))))
        copy.set_messages(key, [ChatMessage.model_validate(d) for d in dicts])
    return copy


def stored(store: SimpleChatStore) -> dict[str, Any]:
    """Every key of ``store`` and its messages, without the times events carry and
    without the known-size log: a ``get`` records the exact size of what it read only
    when it counted it, which a warm memory (a running total, bounds) and a new one
    (counts) may decide apart."""
    out = {}
    for key in sorted(store.get_keys()):
        if key.endswith(KNOWN_KEY_SUFFIX):
            continue
        out[key] = [_timeless(d) for d in dumps(store.get_messages(key))]
    return out


def _timeless(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "created_at"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    if isinstance(value, str) and value.startswith("{") and "created_at" in value:
        try:
            return _timeless(json.loads(value))
        except ValueError:
            return value
    return value


class Side:
    """One way of serving the conversation: its store, memory and files."""

    def __init__(self, config: SummaryConfig, estimator: str) -> None:
        self.config, self.estimator = config, estimator
        self.backend = FsspecBackend(f"memory://ars-test-{uuid.uuid4().hex}")
        self.store = SimpleChatStore()
        self.memory = self.make()

    def make(self) -> ArsMemory:
        return ArsMemory.from_defaults(
            chat_store=self.store,
            chat_store_key=KEY,
            config=self.config,
            summarizer=FakeSummarizer("SUMMARY of the earlier work"),
            file_backend=self.backend,
            estimator=self.estimator,  # type: ignore[arg-type]
        )

    def given(self, warm: Side) -> None:
        """A new memory over a copy of the warm side's store read back from JSON, with
        its files and archive log."""
        self.store = read_back(warm.store)
        for path, text in files_in(warm.backend).items():
            self.backend.write_text(path, text)
        self.memory = self.make()
        archives = warm.memory._compressor._archives._by_backend
        log = dict(archives.get(warm.memory._files, {}))
        self.memory._compressor._archives._by_backend[self.memory._files] = log

    def get(self, run_async: bool) -> dict[str, Any]:
        """The view and the event after it, or the error ``get`` raised."""
        try:
            if run_async:
                view = asyncio.run(self.memory.aget())
            else:
                view = self.memory.get()
        except Exception as exc:  # compared by type and message on both sides
            return {"raised": (type(exc).__name__, str(exc))}
        event = self.memory.get_event()
        data = None if event is None else {k: v for k, v in event.to_dict().items()}
        if data is not None:
            data.pop("created_at", None)
        return {"view": dumps(view), "event": json.loads(json.dumps(data, default=str))}

    def cleared(self) -> None:
        cleared(self.backend)


def apply(memory: ArsMemory, step: Step, serial: int, last_view: list[Any] | None) -> None:
    """Edit the warm memory's conversation by ``step``, through the memory."""
    op, a, b = step
    stored = memory.get_all()
    n = len(stored)
    if op in ("turn", "turn_big"):
        memory.put_messages(turn(serial, op == "turn_big"))
    elif op == "user":
        memory.put(ChatMessage(role="user", content="and also: " + words(12, seed=f"x{serial}")))
    elif op == "usage":  # the model answered the last view; the provider's count recorded
        answer = ChatMessage(role="assistant", content=f"done {serial}")
        memory.put(answer)
        size = len(json.dumps(last_view or [])) // 4
        memory.record_usage(answer, size or None)
    elif op == "remove" and n:
        memory.set([m for i, m in enumerate(stored) if i != a % n])
    elif op == "remove_some" and n:
        start = a % n
        memory.set(stored[:start] + stored[start + 1 + b % 3 :])
    elif op == "replace" and n:
        edited = list(stored)
        edited[a % n] = ChatMessage(role=stored[a % n].role, content=f"edited {serial}")
        memory.set(edited)
    elif op == "renew":
        memory.set([ChatMessage.model_validate(m.model_dump()) for m in stored])


def differential(
    steps: Sequence[Step], threshold: float, keep: int, estimator: str, run_async: bool
) -> None:
    config = adapter_config(threshold, keep)
    warm, fresh = Side(config, estimator), Side(config, estimator)
    for serial in range(3):
        warm.memory.put_messages(turn(serial, big=serial == 1))
    last_view: list[Any] | None = None
    try:
        for serial, step in enumerate(steps, start=10):
            apply(warm.memory, step, serial, last_view)
            if not warm.memory.get_all():
                continue
            fresh.given(warm)
            warm_out, fresh_out = warm.get(run_async), fresh.get(run_async)
            label = (serial, step)
            assert warm_out == fresh_out, label
            assert files_in(warm.backend) == files_in(fresh.backend), label
            # what each get stored (the event's records, the usage log): the same
            assert stored(warm.store) == stored(fresh.store), label
            fresh.cleared()
            last_view = warm_out.get("view")
    finally:
        warm.cleared()
        fresh.cleared()


@adapter_hunt(OPS)
def test_a_warm_memory_matches_a_fresh_one(
    steps: list[Step], threshold: float, keep: int, estimator: str, run_async: bool
) -> None:
    """At every ``get``, the warm memory and a new one over the stored conversation
    return the same view, hold the same event and write the same files."""
    differential(steps, threshold, keep, estimator, run_async)
