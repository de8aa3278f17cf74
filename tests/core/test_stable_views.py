"""Views that prompt caches can reuse.

A message, once sent to the model in a form, is sent in that form until an L2
round replaces the prefix: every request starts with the previous request's
messages byte for byte, except on a call where compression must change the
prefix (an L2 round, or the first call at or above T after a stretch below it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ars_core import (
    Compressor,
    FsspecBackend,
    Message,
    SummarizationEvent,
    ToolCall,
    message_to_dict,
)
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import memory_backend, small_config


def _bytes(view: Sequence[Message]) -> list[str]:
    return [json.dumps(message_to_dict(m), sort_keys=True) for m in view]


@st.composite
def turns(draw: st.DrawFn) -> list[list[Message]]:
    """Agent turns, each a user message or a tool call with its result; tool
    results are sometimes large enough for L1 to offload them."""
    out: list[list[Message]] = []
    for t in range(draw(st.integers(5, 40))):
        if draw(st.booleans()):
            size = draw(st.integers(1, 60))
            out.append([Message(role="user", content=f"u{t} " + "ask " * size, id=f"u{t}")])
            continue
        size = draw(st.sampled_from([5, 40, 150, 400]))
        call = ToolCall(id=f"c{t}", name="bash", args={"command": f"cat f{t}"})
        out.append(
            [
                Message(role="assistant", content="", tool_calls=(call,), id=f"a{t}"),
                Message(
                    role="tool",
                    content=f"r{t} " + "line of output " * size,
                    tool_call_id=call.id,
                    name="bash",
                    id=f"t{t}",
                ),
            ]
        )
    return out


def _replay(
    compressor: Compressor, backend: FsspecBackend, conversation: list[list[Message]]
) -> list[tuple[list[str], str | None, bool]]:
    """Every request sent: (its messages as bytes, the level, whether the
    call was at or above T)."""
    state: list[Message] = []
    event: SummarizationEvent | None = None
    sent: list[tuple[list[str], str | None, bool]] = []
    for turn in conversation:
        state.extend(turn)
        model = ScriptedModel()
        outcome = compressor.call(
            state, model, event=event, summarizer=FakeSummarizer(), backend=backend
        )
        above = outcome.level is not None
        sent.append((_bytes(model.calls[-1]), outcome.level, above))
        if outcome.update is not None and outcome.update.event is not None:
            event = outcome.update.event
    return sent


def _prefix_breaks(sent: list[tuple[list[str], str | None, bool]]) -> list[int]:
    breaks = []
    for i in range(1, len(sent)):
        previous, _, previous_above = sent[i - 1]
        view, level, above = sent[i]
        allowed = level == "L2" or (above and not previous_above)
        if view[: len(previous)] != previous and not allowed:
            breaks.append(i)
    return breaks


@pytest.mark.spec("R14", "R24")
@given(conversation=turns())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_request_starts_with_the_previous_one(conversation: list[list[Message]]) -> None:
    """Outside an L2 round and the first call at or above T after a stretch
    below it, a request's messages begin with the previous request's messages,
    byte for byte: offloaded tool results stay offloaded after an L2 round."""
    sent = _replay(Compressor(config=small_config()), memory_backend(), conversation)
    assert _prefix_breaks(sent) == []
