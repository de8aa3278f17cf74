"""Invariants over random conversations (hypothesis).

* a view never holds a tool result without its call, nor a call without its results;
* cutoffs only grow across chained summaries;
* L1 is idempotent and maps the same content to the same file;
* state messages are never mutated.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ars_core import ApproxEstimator, Compressor, Message, ToolCall, message_to_dict
from ars_core.l1 import plan_l1
from ars_core.l2 import select_cutoff
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import small_config

EST = ApproxEstimator()


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Valid agent histories: turns of user text, assistant text, or assistant
    calls (1-3 in parallel) each followed by all its results."""
    out: list[Message] = []
    n_turns = draw(st.integers(1, 25))
    k = 0
    for t in range(n_turns):
        kind = draw(st.sampled_from(["user", "assistant", "tools"]))
        size = draw(st.integers(0, 400))
        text = ("word " * size).strip()
        if kind == "user":
            out.append(Message(role="user", content=f"u{t} {text}", id=f"u{t}"))
        elif kind == "assistant":
            out.append(Message(role="assistant", content=f"a{t} {text}", id=f"a{t}"))
        else:
            n = draw(st.integers(1, 3))
            calls = []
            for _ in range(n):
                k += 1
                name = draw(st.sampled_from(["bash", "write_file", "edit_file"]))
                args = (
                    {"content": "x" * draw(st.integers(0, 3000))}
                    if name != "bash"
                    else {"command": "ls"}
                )
                calls.append(ToolCall(id=f"c{k}", name=name, args=args))
            out.append(Message(role="assistant", content="", tool_calls=tuple(calls), id=f"a{t}"))
            for c in calls:
                out.append(
                    Message(
                        role="tool",
                        content=f"r{c.id} {text}",
                        tool_call_id=c.id,
                        name=c.name,
                        id=f"t{c.id}",
                    )
                )
    return out


def assert_paired(view: list[Message]) -> None:
    called = {c.id for m in view for c in m.tool_calls}
    answered = {m.tool_call_id for m in view if m.role == "tool"}
    assert answered <= called, "tool result without its call"
    assert called <= answered, "tool call without its results"


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(conversations(), st.integers(1, 8))
@pytest.mark.spec("R21")
def test_cutoff_never_separates_calls_from_results(history: list[Message], keep: int) -> None:
    cut = select_cutoff(history, keep)
    if cut is not None:
        assert 0 < cut < len(history)
        assert_paired(history[:cut])
        assert_paired(history[cut:])


@FAST
@given(conversations(), st.integers(1, 6), st.sampled_from([0.3, 0.6, 1.0]))
def test_views_are_paired_cutoffs_grow_and_state_is_never_mutated(
    history: list[Message], keep: int, ratio: float
) -> None:
    engine = Compressor(
        small_config(summary_keep_messages=keep, summary_l2_trigger_ratio=ratio),
        summarizer=FakeSummarizer("S"),
    )
    before = [message_to_dict(m) for m in history]
    event = None
    cutoffs = [0]
    for end in range(1, len(history) + 1):
        state = history[:end]
        if state[-1].tool_calls or (
            state[-1].role == "tool" and end < len(history) and history[end].role == "tool"
        ):
            continue  # a model is only called once every call has its results
        model = ScriptedModel()
        out = engine.call(state, model, event=event)
        assert_paired([m for m in model.calls[-1] if m.role in ("assistant", "tool")])
        if out.update is not None and out.update.event is not None:
            event = out.update.event
            cutoffs.append(event.cutoff)
    assert cutoffs == sorted(cutoffs)
    assert [message_to_dict(m) for m in history] == before


@FAST
@given(conversations())
def test_l1_is_idempotent_and_content_addressed(history: list[Message]) -> None:
    once = plan_l1(history, estimator=EST, tool_token_limit=50)
    twice = plan_l1(list(once.view), estimator=EST, tool_token_limit=50)
    assert [message_to_dict(m) for m in twice.view] == [message_to_dict(m) for m in once.view]
    assert twice.writes == ()
    again = plan_l1(
        [Message(**{**message_to_dict(m), "tool_calls": m.tool_calls}) for m in history],
        estimator=EST,
        tool_token_limit=50,
    )
    assert {w.path for w in again.writes} == {w.path for w in once.writes}
