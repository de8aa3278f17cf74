"""An engine that saw every earlier history behaves exactly as a fresh one.

Agent-shaped histories (tool calls that write, edit, read and run; results large
enough for L1 to offload, results with error lines; unanswered calls and orphan
results) edited between calls the way agents and users edit state: turns
appended, one, several or all messages removed by position, a message replaced
by id, a message turned into an OpenAI dict and back. After each edit the warm
engine (its caches full of the earlier histories) and a fresh engine given only
the current history and the persisted event must count, send, emit, ask to
persist and write the same things.

``ARS_WARM_EXAMPLES`` raises the example count for a local hunt."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ars_core import (
    ApproxEstimator,
    CallOutcome,
    CompressionEvent,
    Compressor,
    FsspecBackend,
    Message,
    SummarizationEvent,
    SummaryConfig,
    ToolCall,
    from_openai,
    message_to_dict,
    to_openai,
)
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import files_in, memory_backend, words
from .test_memo import persist, run

pytestmark = pytest.mark.spec("R51", "R58", "R62", "R3")

EXAMPLES = int(os.environ.get("ARS_WARM_EXAMPLES", "30"))

#: (tool, argument, values) of the calls an agent makes
CALLS = (
    ("write_file", "path", ("src/app.py", "src/util.py", "README.md")),
    ("edit_file", "path", ("src/app.py", "tests/test_app.py")),
    ("read_file", "path", ("setup.cfg", "src/util.py")),
    ("bash", "command", ("pytest -q tests/test_app.py", "ls -la src", "git diff")),
    ("shell", "command", ("python -m build", "make lint")),
)

ERRORS = (
    'Traceback (most recent call last):\n  File "src/app.py", line 3\nValueError: bad',
    "FAILED tests/test_app.py::test_run - AssertionError",
    "E   ValueError: invalid literal for int() with base 10: 'x'",
)

OPS = (
    "turn",
    "turn",
    "turn_big",
    "turn_error",
    "user",
    "unanswered",
    "orphan",
    "remove",
    "remove_some",
    "remove_all",
    "replace",
    "to_dict",
    "to_message",
)

Step = tuple[str, int, int]


def summary_text(rendered: str) -> str:
    """A summary that depends on what it summarizes (its first and last lines)."""
    lines = [line for line in rendered.splitlines() if line.strip()]
    digest = hashlib.sha256(rendered.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return "\n".join(["SUMMARY " + digest, *lines[:2], *lines[-2:]])


def engine(threshold: int, keep: int, summarizer: str) -> tuple[Compressor, FsspecBackend]:
    backend = memory_backend()
    compressor = Compressor(
        SummaryConfig(
            summary_threshold=threshold,
            summary_keep_messages=keep,
            summary_tool_result_token_limit=120,
        ),
        estimator=ApproxEstimator(),
        backend=backend,
        summarizer=FakeSummarizer(summary_text) if summarizer == "fake" else None,
    )
    return compressor, backend


def dicts(view: Sequence[Message | Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [dict(m) if isinstance(m, Mapping) else message_to_dict(m) for m in view]


def described(event: CompressionEvent) -> dict[str, Any]:
    """A stream record but for what differs run to run (its id and time)."""
    out = event.to_dict()
    del out["round_id"], out["timestamp"]
    return out


def persisted(outcome: CallOutcome) -> tuple[Any, ...] | None:
    """What an outcome asks to persist, but for the event's creation time."""
    update = outcome.update
    if update is None:
        return None
    event = None
    if update.event is not None:
        event = update.event.to_dict()
        del event["created_at"]
    return (
        event,
        dicts([m for _, m in update.replaced]),
        update.replaced and [i for i, _ in update.replaced],
        update.clear_event,
    )


class Agent:
    """Builds agent-shaped messages with ids unique to one example."""

    def __init__(self) -> None:
        self.serial = 0

    def next_id(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def call(self, a: int) -> ToolCall:
        name, arg, values = CALLS[a % len(CALLS)]
        return ToolCall(id=self.next_id("call_"), name=name, args={arg: values[a % len(values)]})

    def result(self, c: ToolCall, text: str) -> Message:
        return Message(
            role="tool", content=text, tool_call_id=c.id, name=c.name, id=self.next_id("t")
        )

    def user(self, b: int) -> Message:
        text = f"please fix step {self.serial} in src/app.py " + words(3 + b % 300, f"u{b}")
        return Message(role="user", content=text, id=self.next_id("u"))

    def turn(self, kind: str, a: int, b: int) -> list[Message]:
        c = self.call(a)
        if kind == "turn_big":
            body = "\n".join(f"line {i} of {c.name} output {b}" for i in range(60 + b % 400))
        elif kind == "turn_error":
            body = f"ran {c.name}\n" + ERRORS[b % len(ERRORS)]
        else:
            body = f"ok {c.name} " + words(10 + b % 250, f"r{b}")
        out = [
            Message(role="assistant", content="", tool_calls=(c,), id=self.next_id("a")),
            self.result(c, body),
        ]
        if b % 3 == 0:
            out.append(Message(role="assistant", content=f"done {b}", id=self.next_id("a")))
        return out


def apply(agent: Agent, history: list[Any], step: Step) -> None:
    op, a, b = step
    n = len(history)
    if op.startswith("turn"):
        history.extend(agent.turn(op, a, b))
    elif op == "user" or n == 0:
        history.append(agent.user(b))
    elif op == "unanswered":
        c = agent.call(a)
        history.append(
            Message(role="assistant", content="", tool_calls=(c,), id=agent.next_id("a"))
        )
    elif op == "orphan":
        history.append(agent.result(agent.call(a), f"late result {b}"))
    elif op == "remove":
        del history[a % n]
    elif op == "remove_some":
        start = a % n
        del history[start : start + 1 + b % 6]
    elif op == "remove_all":
        history.clear()
    elif op == "replace":
        replace(history, a % n, b)
    elif op == "to_dict":
        if isinstance(history[a % n], Message):
            history[a % n] = {**to_openai(history[a % n]), "id": history[a % n].id}
    elif op == "to_message":
        if not isinstance(history[a % n], Message):
            history[a % n] = from_openai(history[a % n])


def replace(history: list[Any], i: int, b: int) -> None:
    """The message at ``i`` replaced by id: same id, role and tool links, new text."""
    old = history[i] if isinstance(history[i], Message) else from_openai(history[i])
    size = 2 + b % 1_500
    text = words(size, f"e{b}") if b % 2 else f"Traceback\nE   KeyError: {b}\n" + words(size)
    history[i] = Message(
        role=old.role,
        content=text if old.role != "assistant" or not old.tool_calls else old.content,
        tool_calls=old.tool_calls,
        tool_call_id=old.tool_call_id,
        name=old.name,
        id=old.id,
    )


def check_step(
    label: Any,
    warm: tuple[CallOutcome, ScriptedModel, FsspecBackend],
    fresh: tuple[CallOutcome, ScriptedModel, FsspecBackend],
) -> None:
    (outcome, model, backend), (expected, fresh_model, fresh_backend) = warm, fresh
    assert outcome.tokens_before == expected.tokens_before, label
    assert outcome.tokens_after == expected.tokens_after, label
    assert outcome.level == expected.level, label
    assert dicts(model.calls[-1]) == dicts(fresh_model.calls[-1]), label
    assert [described(e) for e in outcome.events] == [described(e) for e in expected.events], label
    assert persisted(outcome) == persisted(expected), label
    assert files_in(backend) == files_in(fresh_backend), label


def given_the_archives(
    warm: Compressor, backend: FsspecBackend, fresh: Compressor, fresh_backend: FsspecBackend
) -> None:
    """What the warm engine archived, given to the fresh one: the files its backend
    holds and its archive log. The log is memory an engine keeps by design (a round
    that archives the same first messages again writes only a continuation, and its
    summary names the chain), not a cache a fresh engine must do without."""
    for path, text in files_in(backend).items():
        fresh_backend.write_text(path, text)
    log = warm._archives._by_backend.get(backend, {})
    fresh._archives._by_backend[fresh_backend] = dict(log)


def differential(
    mode: str, threshold: int, keep: int, summarizer: str, steps: Sequence[Step]
) -> None:
    agent = Agent()
    compressor, backend = engine(threshold, keep, summarizer)
    history: list[Any] = []
    for i in range(4):
        history.extend(agent.turn("turn", i, 3 * i + 1))
    event: SummarizationEvent | None = None
    for serial, step in enumerate([("user", 0, 0), *steps]):
        apply(agent, history, step)
        if not history:
            continue
        fresh_compressor, fresh_backend = engine(threshold, keep, summarizer)
        given_the_archives(compressor, backend, fresh_compressor, fresh_backend)
        outcome, model = run(compressor, history, mode, event)
        fresh, fresh_model = run(fresh_compressor, list(history), mode, event)
        check_step((serial, step), (outcome, model, backend), (fresh, fresh_model, fresh_backend))
        event = persist(history, event, outcome)


steps = st.lists(
    st.tuples(st.sampled_from(OPS), st.integers(0, 10_000), st.integers(0, 10_000)),
    min_size=6,
    max_size=30,
)


@pytest.mark.parametrize("mode", ["sync", "async"])
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    threshold=st.sampled_from([1, 2, 4]),
    keep=st.sampled_from([2, 4, 10]),
    summarizer=st.sampled_from(["fake", "extractive"]),
    steps=steps,
)
# a dict, the tail cut, a call appended: the engine took the cut history for a
# prefix of the converted records it sent and then for a prefix of the grown one
@example(
    threshold=1,
    keep=2,
    summarizer="fake",
    steps=[
        ("remove", 0, 0),
        ("to_dict", 6, 0),
        ("turn", 0, 1),
        ("remove_some", 136, 51),
        ("unanswered", 0, 0),
    ],
)
def test_every_call_of_an_agent_matches_a_fresh_engine(
    mode: str, threshold: int, keep: int, summarizer: str, steps: list[Step]
) -> None:
    """Agent turns, removals, replacements by id and dict/record swaps in any order:
    after each edit the warm engine counts, sends, emits (retention audit included),
    asks to persist and writes what a fresh engine given the same state does."""
    differential(mode, threshold, keep, summarizer, steps)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_history_cut_back_then_grown_otherwise_is_read_anew(mode: str) -> None:
    """A history holding a dict (read whole, not remembered as checked), then cut
    back to its first two messages, then grown by another call: the warm engine
    sends the new call (it sent the first history's converted records, and took the
    cut one for a prefix of them, before)."""
    agent = Agent()
    first = agent.turn("turn", 0, 1)  # a call, its result
    then = agent.turn("turn", 1, 1)
    request = agent.user(0)
    dict_result = {**to_openai(first[1]), "id": first[1].id}
    compressor, backend = engine(1, 2, "fake")
    event = None
    for history in (
        [request, first[0], dict_result, then[0]],
        [request, first[0]],
        [request, first[0], then[0]],
    ):
        fresh_compressor, fresh_backend = engine(1, 2, "fake")
        given_the_archives(compressor, backend, fresh_compressor, fresh_backend)
        outcome, model = run(compressor, history, mode, event)
        fresh, fresh_model = run(fresh_compressor, list(history), mode, event)
        check_step(len(history), (outcome, model, backend), (fresh, fresh_model, fresh_backend))
    assert [m.id for m in as_records(model.calls[-1])][-2] == then[0].id


def as_records(view: Sequence[Message | Mapping[str, Any]]) -> list[Message]:
    return [m if isinstance(m, Message) else from_openai(m) for m in view]
