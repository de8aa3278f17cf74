"""What an engine keeps on messages a stored summary covers (``ars_core.memo``'s
``UNTIL_SUMMARIZED``): the next round drops their L1 forms, shortened copies and
audit findings, so a long conversation does not keep a preview and a copy of every
result it ever offloaded; one needed again (the event dropped) is made again, the
same. A round whose summary is not stored drops nothing: its next round summarizes
the same messages again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from ars_core import Compressor, FsspecBackend, SummarizationEvent
from ars_core import flow as flow_module
from ars_core.memo import FAMILIES, UNTIL_SUMMARIZED
from ars_core.messages import Message, ToolCall, message_to_dict
from ars_core.summarize import SummaryResult

from .helpers import small_config, words

pytestmark = pytest.mark.spec("R10", "R12", "R51")


def _log(i: int) -> str:
    """A tool result well above the offload limit (120 tokens)."""
    return "\n".join(f"ERROR: step {i}.{n} failed in src/m{n}.py" for n in range(60))


def _turn(i: int) -> list[Message]:
    """One turn, the same messages (ids too) on every run."""
    c = ToolCall(id=f"call_{i}", name="bash", args={"command": f"make step{i}"})
    return [
        Message(role="user", content=f"request {i}: " + words(12), id=f"u{i}"),
        Message(role="assistant", tool_calls=(c,), id=f"a{i}"),
        Message(role="tool", content=_log(i), tool_call_id=c.id, name="bash", id=f"t{i}"),
        Message(role="assistant", content="ok", id=f"r{i}"),
    ]


class _Run:
    """One engine on its own folder, recording what it sends and summarizes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sent: list[list[dict[str, Any]]] = []
        self.inputs: list[list[dict[str, Any]]] = []
        self.engine = Compressor(
            small_config(summary_threshold=2, summary_keep_messages=4),
            backend=FsspecBackend(root.as_uri()),
            summarizer=self,
        )

    def summarize(self, messages: list[Message], prompt: str) -> SummaryResult:
        self.inputs.append([message_to_dict(m) for m in messages])
        return SummaryResult(text=f"summary of {len(messages)} messages")

    def model(self, view: list[Message]) -> Message:
        self.sent.append([message_to_dict(m) for m in view])
        return Message(role="assistant", content="done")

    def call(
        self, state: list[Message], event: SummarizationEvent | None
    ) -> tuple[str | None, SummarizationEvent | None]:
        outcome = self.engine.call(state, self.model, event=event, thread="t")
        update = outcome.update
        if update is not None:
            for index, message in update.replaced:
                state[index] = message
            if update.event is not None or update.clear_event:
                event = update.event
        return outcome.level, event

    def files(self) -> dict[str, bytes]:
        found = self.root.rglob("*")
        return {p.relative_to(self.root).as_posix(): p.read_bytes() for p in found if p.is_file()}


def _holds(message: Message, families: Any) -> list[str]:
    """The names of ``families`` with a value kept on ``message``."""
    names = {f.name for f in families}
    return sorted({k[0] if isinstance(k, tuple) else k for k in message._cache} & names)


def _grown(run: _Run, turns: int) -> tuple[list[Message], SummarizationEvent | None, int]:
    state: list[Message] = []
    event, rounds = None, 0
    for i in range(turns):
        state += _turn(i)
        level, event = run.call(state, event)
        rounds += level == "L2"
    return state, event, rounds


def test_summarized_messages_keep_only_what_the_whole_history_is_read_for(
    tmp_path: Path,
) -> None:
    run = _Run(tmp_path)
    cutoffs: list[int] = []
    state: list[Message] = []
    event: SummarizationEvent | None = None
    for i in range(40):
        state += _turn(i)
        level, event = run.call(state, event)
        if level == "L2" and event is not None:
            cutoffs.append(event.cutoff)
    assert len(cutoffs) >= 3 and event is not None
    # the round that stored the newest summary came with the one before it
    covered, newest = state[: cutoffs[-2]], state[cutoffs[-2] : cutoffs[-1]]
    assert not [
        (i, _holds(m, UNTIL_SUMMARIZED))
        for i, m in enumerate(covered)
        if _holds(m, UNTIL_SUMMARIZED)
    ]
    assert all("covered" in _holds(m, FAMILIES) for m in covered)
    # what the whole history is read for stays: every message's token count
    assert all("tokens" in _holds(m, FAMILIES) for m in covered)
    # what the newest round summarized waits for a round that comes with its summary
    assert all("l1" in _holds(m, FAMILIES) for m in newest)
    # the messages no summary covers keep their L1 plan (the next call's view)
    assert all("l1" in _holds(m, FAMILIES) for m in state[event.cutoff :])


def test_rounds_whose_summary_is_not_stored_keep_what_they_summarize(tmp_path: Path) -> None:
    """Calls that never store the event (each round summarizes the same messages
    again) drop nothing: the L1 forms of the first round are the very objects the
    later rounds read."""
    run = _Run(tmp_path)
    state: list[Message] = []
    for i in range(12):
        state += _turn(i)
    levels = []
    for i in range(12, 16):
        state += _turn(i)
        levels.append(run.call(state, None)[0])
    assert levels == ["L2"] * 4
    assert not any("covered" in _holds(m, FAMILIES) for m in state)
    plans = [{k: id(v) for k, v in m._cache.items()} for m in state[:40]]
    assert all("l1" in _holds(m, FAMILIES) for m in state[:40])
    run.call(state + _turn(16), None)
    assert [{k: id(v) for k, v in m._cache.items()} for m in state[:40]] == plans


def _whole_run(root: Path) -> tuple[_Run, list[Any]]:
    """30 turns with their rounds, then a call with the event dropped (the history
    read whole again): what the engine sent, summarized and reported."""
    run = _Run(root)
    state, event, rounds = _grown(run, 30)
    dropped = run.call(state, None)
    return run, [rounds, event and attrs.evolve(event, created_at=""), dropped[0]]


def test_an_event_dropped_after_rounds_makes_the_same_forms_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine that dropped its summarized messages' values sends, summarizes,
    writes and reports, round after round and when the history is read whole again,
    what the engine keeping them all does."""
    run, found = _whole_run(tmp_path / "dropping")
    with monkeypatch.context() as patch:
        patch.setattr(flow_module, "forget_covered", lambda messages, end: None)
        kept, expected = _whole_run(tmp_path / "keeping")
    assert found[0] >= 3 and found[2] == "L2" and found == expected
    assert run.sent == kept.sent and run.inputs == kept.inputs
    assert run.files() == kept.files()
    # the offloaded results of the summarized messages were written all the same
    assert sum("large_tool_results/" in p for p in run.files()) == 30


def test_a_covered_message_keeps_its_values_in_a_dict_of_their_size() -> None:
    """The values a covered message keeps take the dict a fresh dict of those values
    takes, whatever order they were written in (a dict begun with string keys and then
    given a tuple key is rebuilt larger: 352 bytes for three keys, not 224)."""
    from sys import getsizeof

    from ars_core.memo import COVERED, forget_covered

    token_key = ("tokens", "some-estimator", 1)
    messages = [Message(role="user", content=f"m{i}") for i in range(3)]
    for m in messages:
        m._cache["floor"] = 7  # written before the count, as a history's first read does
        m._cache[token_key] = 9
        m._cache["request-text"] = m.content
        m._cache[("l1", 120)] = "a plan"
    forget_covered(messages, 3)
    for m in messages:
        expected = {token_key: 9, "floor": 7, "request-text": m.content, COVERED.name: True}
        assert m._cache == expected
        assert (
            getsizeof(m._cache) == getsizeof(expected) < getsizeof(dict(reversed(expected.items())))
        )
