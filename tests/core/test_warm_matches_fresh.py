"""An engine that saw every earlier history behaves exactly as a fresh one.

Agent-shaped histories (tool calls that write, edit, read and run; results large
enough for L1 to offload, results with error lines; unanswered calls and orphan
results; images inline, by URL and in tool results; Anthropic and LangChain v1
content blocks: thinking, tool_use, tool_result; user and assistant messages large
enough that the kept tail is trimmed) edited between calls the way agents and users
edit state: turns appended, one, several or all messages removed by position, a
message replaced by id, a message turned into an OpenAI dict and back, every message
made anew (equal, new objects), in the same list or a new one; the system message
and the tool schemas beside it changed, tools added, dropped or edited in place. Each call is
an ordinary one, a summary the caller asked for (``requested``), a model that
reports a context overflow (once, or above a size) or a forced compaction. After
each edit the warm engine (its caches and memos full of the earlier histories) and
a fresh engine given only the current history (new message objects: no per-message
value the warm engine kept) and the persisted event (read back from its record)
must count, send, emit, ask to persist, raise and write the same things, with the
approximate and with the exact o200k estimator.

``ARS_WARM_EXAMPLES`` raises the example count for a local hunt."""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import attrs
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ars_core import (
    ApproxEstimator,
    CallOutcome,
    CompressionEvent,
    Compressor,
    ContentPart,
    ContextOverflowError,
    FsspecBackend,
    Message,
    SummarizationEvent,
    SummaryConfig,
    TiktokenEstimator,
    ToolCall,
    from_openai,
    message_to_dict,
    to_openai,
)
from ars_core.testing import FakeSummarizer, RecordingEmitter, ScriptedModel
from tests.warm_fresh import DERANDOMIZE, cleared

from .helpers import files_in, memory_backend, words
from .test_memo import persist

pytestmark = pytest.mark.spec("R51", "R58", "R62", "R3", "R4", "R22", "R43", "R57")

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
    "turn_image",
    "turn_blocks",
    "user",
    "user_image",
    "user_big",
    "say_big",
    "unanswered",
    "orphan",
    "remove",
    "remove_some",
    "remove_all",
    "replace",
    "to_dict",
    "to_message",
    "renew",
    "system",
    "tool_add",
    "tool_add",
    "tool_drop",
    "tool_edit",
)

#: how the call after an edit is made: an ordinary call most often
HOWS = ("call", "call", "call", "call", "requested", "overflow", "overflow_above", "forced")

Step = tuple[str, int, int, str]


def summary_text(rendered: str) -> str:
    """A summary that depends on what it summarizes (its first and last lines)."""
    lines = [line for line in rendered.splitlines() if line.strip()]
    digest = hashlib.sha256(rendered.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return "\n".join(["SUMMARY " + digest, *lines[:2], *lines[-2:]])


def engine(
    threshold: int, keep: int, summarizer: str, estimator: str = "approx"
) -> tuple[Compressor, FsspecBackend]:
    backend = memory_backend()
    compressor = Compressor(
        SummaryConfig(
            summary_threshold=threshold,
            summary_keep_messages=keep,
            summary_tool_result_token_limit=120,
        ),
        estimator=ApproxEstimator() if estimator == "approx" else TiktokenEstimator(),
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


def payload(b: int, size: int) -> str:
    """Base64-looking text of ``size`` characters, distinct per ``b``."""
    return ("iVBORw0KGgo" + f"{b:x}" * (size // 4 + 1))[:size]


def image(b: int) -> ContentPart:
    """An image part as OpenAI, LangChain v1 and Anthropic send one: inline data
    (small or large enough for L1 to offload) or a URL."""
    kind, data = b % 4, payload(b, 40 + b % 6_000)
    if kind == 0:
        url = {"url": f"data:image/png;base64,{data}"}
        return ContentPart(type="image", data={"type": "image_url", "image_url": url})
    if kind == 1:
        return ContentPart(
            type="image", data={"type": "image", "base64": data, "mime_type": "image/png"}
        )
    if kind == 2:
        source = {"type": "base64", "media_type": "image/jpeg", "data": data}
        return ContentPart(type="image", data={"type": "image", "source": source})
    url = {"url": f"https://img.test/{b}.png"}
    return ContentPart(type="image", data={"type": "image_url", "image_url": url})


class Agent:
    """Builds agent-shaped messages with ids unique to one example; ``tokens`` is T
    (user and assistant messages are sized against it)."""

    def __init__(self, tokens: int = 1024) -> None:
        self.serial = 0
        self.tokens = tokens

    def next_id(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def call(self, a: int) -> ToolCall:
        name, arg, values = CALLS[a % len(CALLS)]
        return ToolCall(id=self.next_id("call_"), name=name, args={arg: values[a % len(values)]})

    def result(self, c: ToolCall, text: str | tuple[ContentPart, ...]) -> Message:
        return Message(
            role="tool", content=text, tool_call_id=c.id, name=c.name, id=self.next_id("t")
        )

    def user(self, b: int, kind: str = "user") -> Message:
        text = f"please fix step {self.serial} in src/app.py "
        if kind == "user_big":  # from a third of T to past T: offloaded, or kept and trimmed
            text += words(self.tokens * (30 + b % 90) // 100, f"u{b}")
        else:
            text += words(3 + b % 300, f"u{b}")
        if kind == "user_image":
            content = (ContentPart(type="text", text=text), image(b))
            return Message(role="user", content=content, id=self.next_id("u"))
        return Message(role="user", content=text, id=self.next_id("u"))

    def say(self, b: int) -> Message:
        """An assistant's long answer (no tool call): L1 leaves it whole."""
        text = f"answer {b}\n" + words(self.tokens * (20 + b % 80) // 100, f"s{b}")
        return Message(role="assistant", content=text, id=self.next_id("a"))

    def turn(self, kind: str, a: int, b: int) -> list[Message]:
        if kind == "turn_blocks":
            return self.block_turn(a, b)
        c = self.call(a)
        body: str | tuple[ContentPart, ...]
        if kind == "turn_big":
            body = "\n".join(f"line {i} of {c.name} output {b}" for i in range(60 + b % 400))
        elif kind == "turn_error":
            body = f"ran {c.name}\n" + ERRORS[b % len(ERRORS)]
        elif kind == "turn_image":
            text = f"screenshot of {c.name} " + words(5 + b % 400, f"i{b}")
            body = (ContentPart(type="text", text=text), image(b))
        else:
            body = f"ok {c.name} " + words(10 + b % 250, f"r{b}")
        out = [
            Message(role="assistant", content="", tool_calls=(c,), id=self.next_id("a")),
            self.result(c, body),
        ]
        if b % 3 == 0:
            out.append(Message(role="assistant", content=f"done {b}", id=self.next_id("a")))
        return out

    def block_turn(self, a: int, b: int) -> list[Message]:
        """A call as content blocks: langchain-anthropic's (thinking, text, tool_use
        beside ``tool_calls``), LangChain v1's (reasoning, tool_call block), or
        Anthropic's own (tool_use alone, answered by a user message's tool_result)."""
        c = self.call(a)
        thought = f"let me look at {c.name} " + words(5 + b % 600, f"th{b}")
        text = ContentPart(type="text", text=f"running {c.name}")
        result = f"ok {c.name} " + words(10 + b % 300, f"r{b}")
        if b % 3 == 0:
            think = {"type": "thinking", "thinking": thought, "signature": f"sig{b}"}
            use = {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.args)}
            parts = (
                ContentPart(type="thinking", data=think),
                text,
                ContentPart("tool_use", data=use),
            )
            ask = Message(role="assistant", content=parts, tool_calls=(c,), id=self.next_id("a"))
            return [ask, self.result(c, (ContentPart(type="text", text=result),))]
        if b % 3 == 1:
            reason = {"type": "reasoning", "reasoning": thought}
            call = {"type": "tool_call", "id": c.id, "name": c.name, "args": dict(c.args)}
            parts = (
                ContentPart("reasoning", data=reason),
                text,
                ContentPart("tool_call", data=call),
            )
            ask = Message(role="assistant", content=parts, tool_calls=(c,), id=self.next_id("a"))
            return [ask, self.result(c, result)]
        use = {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.args)}
        ask = Message(role="assistant", content=(text, ContentPart("tool_use", data=use)))
        answer = {"type": "tool_result", "tool_use_id": c.id, "content": result}
        reply = Message(role="user", content=(ContentPart("tool_result", data=answer),))
        return [attrs.evolve(ask, id=self.next_id("a")), attrs.evolve(reply, id=self.next_id("u"))]


def apply(agent: Agent, history: list[Any], step: Step) -> None:
    op, a, b, _ = step
    n = len(history)
    if op.startswith("turn"):
        history.extend(agent.turn(op, a, b))
    elif op.startswith("user") or n == 0:
        history.append(agent.user(b, op))
    elif op == "say_big":
        history.append(agent.say(b))
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
    elif op == "renew":  # equal messages, new objects (an adapter converting every call)
        history[:] = anew(history)


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


@attrs.define
class Request:
    """The system message and tool schemas a caller sends beside the history: one
    list of schema dicts, grown, shrunk or edited in place between calls."""

    system: str = "You are a coding agent."
    tools: list[dict[str, Any]] = attrs.field(factory=list)

    def edit(self, op: str, a: int, b: int) -> bool:
        """Apply ``op`` when it is a request op (``True``), else leave it."""
        if op == "system":
            self.system = f"You are a coding agent (rule {b}). " + words(b % 400, f"y{b}")
        elif op == "tool_add":
            name = CALLS[a % len(CALLS)][0] + f"_{len(self.tools)}"
            text = words(5 + b % 300, f"d{b}")
            self.tools.append({"type": "function", "function": {"name": name, "description": text}})
        elif op == "tool_drop" and self.tools:
            del self.tools[a % len(self.tools)]
        elif op == "tool_edit" and self.tools:  # the schema dict edited in place
            self.tools[a % len(self.tools)]["function"]["description"] = words(b % 600, f"d{b}")
        else:
            return op in ("tool_drop", "tool_edit")
        return True


def anew(history: Sequence[Any]) -> list[Any]:
    """The history as a process that never saw it reads it: new objects, so no value
    an engine kept on a message (its count, its L1 form...) comes along."""
    return [copy.deepcopy(m) if isinstance(m, Mapping) else attrs.evolve(m) for m in history]


def read_back(event: SummarizationEvent | None) -> SummarizationEvent | None:
    """The persisted event as a checkpointer reads it back (its record)."""
    return None if event is None else SummarizationEvent.from_dict(event.to_dict())


def overflow_once(view: Sequence[Any]) -> str:
    raise ContextOverflowError("prompt is too long: the fake model's window is full")


@attrs.define
class Call:
    """One call of an engine: what it returned or raised, and what it sent and emitted."""

    outcome: CallOutcome | None
    raised: str | None
    sent: list[list[dict[str, Any]]]
    emitted: list[dict[str, Any]]
    files: dict[str, str]


def call(
    compressor: Compressor,
    backend: FsspecBackend,
    history: Sequence[Any],
    mode: str,
    event: SummarizationEvent | None,
    how: str,
    request: Request | None = None,
) -> Call:
    """``history`` through ``compressor`` the way ``how`` says, sync or async, with
    ``request``'s system message and tool schemas."""
    window = compressor.config.summary_threshold * 1024 * 3 // 4
    replies: list[Any] = [overflow_once, "ok"] if how == "overflow" else ["ok"]
    above = window if how == "overflow_above" else None
    model = ScriptedModel(replies, overflow_above=above, estimator=ApproxEstimator())
    emitter = RecordingEmitter()
    kwargs: dict[str, Any] = {"event": event, "emitter": emitter}
    if request is not None:
        kwargs.update(system=request.system, tools=request.tools)
    outcome: CallOutcome | None = None
    raised = None
    try:
        if how == "forced" and mode == "sync":
            outcome = compressor.compact(history, force=True, **kwargs)
        elif how == "forced":
            outcome = anyio.run(lambda: compressor.acompact(history, force=True, **kwargs))
        elif mode == "sync":
            outcome = compressor.call(history, model, requested=how == "requested", **kwargs)
        else:
            go = compressor.acall(history, model.acall, requested=how == "requested", **kwargs)
            outcome = anyio.run(lambda: go)
    except ContextOverflowError as exc:  # the L1 view (no cutoff) or the L2 view still too big
        raised = repr(exc)
    sent = [dicts(view) for view in model.calls]
    if outcome is not None and how == "forced":
        sent = [dicts(outcome.view)]
    return Call(outcome, raised, sent, [described(e) for e in emitter.events], files_in(backend))


def check_step(label: Any, warm: Call, fresh: Call) -> None:
    assert warm.raised == fresh.raised, label
    assert warm.sent == fresh.sent, label
    assert warm.emitted == fresh.emitted, label
    assert warm.files == fresh.files, label
    outcome, expected = warm.outcome, fresh.outcome
    if outcome is None or expected is None:
        assert outcome is expected, label
        return
    assert outcome.tokens_before == expected.tokens_before, label
    assert outcome.tokens_after == expected.tokens_after, label
    assert outcome.level == expected.level, label
    assert dicts(outcome.view) == dicts(expected.view), label
    assert [described(e) for e in outcome.events] == [described(e) for e in expected.events]
    assert persisted(outcome) == persisted(expected), label


def given_the_archives(
    warm: Compressor, backend: FsspecBackend, fresh: Compressor, fresh_backend: FsspecBackend
) -> None:
    """What the warm engine archived, given to the fresh one: the files its backend
    holds and its archive log. The log is memory an engine keeps by design (a round
    that archives the same first messages again writes only a continuation, and its
    summary names the chain), not a cache a fresh engine must do without: an engine
    without it writes the whole range again and names that file instead."""
    for path, text in files_in(backend).items():
        fresh_backend.write_text(path, text)
    log = warm._archives._by_backend.get(backend, {})
    fresh._archives._by_backend[fresh_backend] = dict(log)


@attrs.frozen
class Setup:
    """An example's engine settings: T (K tokens), kept messages, summarizer, estimator."""

    threshold: int
    keep: int
    summarizer: str
    estimator: str = "approx"

    def engine(self) -> tuple[Compressor, FsspecBackend]:
        return engine(self.threshold, self.keep, self.summarizer, self.estimator)


def differential(mode: str, setup: Setup, steps: Sequence[Step]) -> None:
    agent = Agent(setup.threshold * 1024)
    compressor, backend = setup.engine()
    history: list[Any] = []
    for i in range(4):
        history.extend(agent.turn("turn", i, 3 * i + 1))
    request = Request()
    event: SummarizationEvent | None = None
    try:
        for serial, step in enumerate([("user", 0, 0, "call"), *steps]):
            if not request.edit(*step[:3]):
                apply(agent, history, step)
            if history:
                event = compare_step(
                    mode, setup, (compressor, backend), history, request, event, (serial, step)
                )
    finally:
        cleared(backend)


def compare_step(
    mode: str,
    setup: Setup,
    warm_engine: tuple[Compressor, FsspecBackend],
    history: list[Any],
    request: Request,
    event: SummarizationEvent | None,
    label: tuple[int, Step],
) -> SummarizationEvent | None:
    """One call of the warm engine and of a fresh one; the event to persist."""
    (compressor, backend), (_, step) = warm_engine, label
    fresh_compressor, fresh_backend = setup.engine()
    given_the_archives(compressor, backend, fresh_compressor, fresh_backend)
    how = step[3]
    given = history if step[1] % 2 else list(history)  # the same list object, or a new one
    warm = call(compressor, backend, given, mode, event, how, request)
    fresh = call(
        fresh_compressor,
        fresh_backend,
        anew(history),
        mode,
        read_back(event),
        how,
        copy.deepcopy(request),
    )
    cleared(fresh_backend)
    check_step(label, warm, fresh)
    return event if warm.outcome is None else persist(history, event, warm.outcome)


steps = st.lists(
    st.tuples(
        st.sampled_from(OPS),
        st.integers(0, 10_000),
        st.integers(0, 10_000),
        st.sampled_from(HOWS),
    ),
    min_size=6,
    max_size=30,
)


@pytest.mark.parametrize("mode", ["sync", "async"])
@settings(
    max_examples=EXAMPLES,
    derandomize=DERANDOMIZE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    threshold=st.sampled_from([1, 2, 4]),
    keep=st.sampled_from([2, 4, 10]),
    summarizer=st.sampled_from(["fake", "extractive"]),
    estimator=st.sampled_from(["approx", "o200k"]),
    steps=steps,
)
# a dict, the tail cut, a call appended: the engine took the cut history for a
# prefix of the converted records it sent and then for a prefix of the grown one
@example(
    threshold=1,
    keep=2,
    summarizer="fake",
    estimator="approx",
    steps=[
        ("remove", 0, 0, "call"),
        ("to_dict", 6, 0, "call"),
        ("turn", 0, 1, "call"),
        ("remove_some", 136, 51, "call"),
        ("unanswered", 0, 0, "call"),
    ],
)
def test_every_call_of_an_agent_matches_a_fresh_engine(
    mode: str, threshold: int, keep: int, summarizer: str, estimator: str, steps: list[Step]
) -> None:
    """Agent turns (media and content blocks among them), removals, replacements by
    id and dict/record swaps in any order, each call ordinary, requested, overflowing
    or forced: after each edit the warm engine counts, sends, emits (retention audit
    included), asks to persist, raises and writes what a fresh engine given the same
    state does."""
    differential(mode, Setup(threshold, keep, summarizer, estimator), steps)


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
    warm = None
    for history in (
        [request, first[0], dict_result, then[0]],
        [request, first[0]],
        [request, first[0], then[0]],
    ):
        fresh_compressor, fresh_backend = engine(1, 2, "fake")
        given_the_archives(compressor, backend, fresh_compressor, fresh_backend)
        warm = call(compressor, backend, history, mode, event, "call")
        fresh = call(fresh_compressor, fresh_backend, anew(history), mode, event, "call")
        check_step(len(history), warm, fresh)
    assert warm is not None and [m.get("id") for m in warm.sent[-1]][-2] == then[0].id


@pytest.mark.spec("R51")
def test_a_new_process_reads_a_stored_summary_over_a_dict_asynchronously() -> None:
    """A history summarized by one engine whose first message is an OpenAI dict
    since, read with its stored event by a new engine (a restarted process: no
    message counted yet): the async call sends and reports what the sync call
    does. It failed with an AttributeError: looking for the newest counted message
    it walked past the kept part into the summarized one, handed on unchecked."""
    agent = Agent()
    history: list[Any] = [agent.user(0)]
    for i in range(6):
        history += agent.turn("turn_big", i, i)
    history.append(agent.user(1))
    compressor, backend = engine(1, 2, "fake")
    first = call(compressor, backend, history, "sync", None, "call")
    assert first.outcome is not None and first.outcome.level == "L2"
    event = persist(history, None, first.outcome)
    history[0] = {**to_openai(history[0]), "id": history[0].id}
    calls = []
    for mode in ("sync", "async"):
        fresh, fresh_backend = engine(1, 2, "fake")
        calls.append(call(fresh, fresh_backend, anew(history), mode, read_back(event), "call"))
    check_step("async", calls[1], calls[0])
    assert calls[1].sent[0][0]["content"] == event.summary_message.text


@pytest.mark.spec("R3")
@pytest.mark.parametrize("estimator", ["approx", "o200k"])
def test_a_tool_schema_edited_in_place_is_counted_again(estimator: str) -> None:
    """One list of tool schemas, a description rewritten in place between two calls
    (about 500 tokens longer): the second call counts the new description, as a fresh
    engine does. It counted the old one: the copy of the list it kept held the same
    schema dicts, so the edited list still compared equal to it."""
    agent = Agent()
    history = [agent.user(0)]
    request = Request()
    request.edit("tool_add", 0, 5)
    compressor, backend = engine(1, 2, "fake", estimator)
    first = call(compressor, backend, history, "sync", None, "call", request)
    request.edit("tool_edit", 0, 500)
    warm = call(compressor, backend, history, "sync", None, "call", request)
    fresh_compressor, fresh_backend = engine(1, 2, "fake", estimator)
    fresh_request = copy.deepcopy(request)
    fresh = call(
        fresh_compressor, fresh_backend, anew(history), "sync", None, "call", fresh_request
    )
    check_step("edited", warm, fresh)
    assert first.outcome is not None and warm.outcome is not None
    assert warm.outcome.tokens_before > first.outcome.tokens_before + 400
