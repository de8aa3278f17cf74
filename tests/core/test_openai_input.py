"""`Compressor.call` / `acall` / `compact` take OpenAI chat-completions dicts, as
`read_messages` does: the model sees exactly what it sees for the same messages
as `Message` records. Anything else is a `MessageFormatError` naming `from_openai`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from ars_core import (
    CompressionEvent,
    Compressor,
    FsspecBackend,
    Message,
    MessageFormatError,
    SummaryConfig,
    from_openai,
    message_to_dict,
)

LOG = "".join(f"step {i}: compiled module_{i}.c without warnings\n" for i in range(300))


def conversation() -> list[dict[str, Any]]:
    """Three build turns in OpenAI format: a tool call, its huge result, an answer."""
    out: list[dict[str, Any]] = []
    for turn in range(3):
        out += [
            {"role": "user", "content": f"build target {turn} and report"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{turn}",
                        "type": "function",
                        "function": {"name": "build", "arguments": json.dumps({"t": turn})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{turn}", "content": LOG},
            {"role": "assistant", "content": f"target {turn} built"},
        ]
    return out


def engine(events: list[CompressionEvent]) -> Compressor:
    return Compressor(
        SummaryConfig(
            summary_threshold=1,
            summary_keep_messages=2,
            summary_tool_result_token_limit=100,
            summary_l2_trigger_ratio=0.2,
        ),
        backend=FsspecBackend("memory://ars-openai-input").scoped(f"t{id(events)}"),
        emitter=events.append,
    )


def strip_times(events: list[CompressionEvent]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in e.to_dict().items() if k not in ("timestamp", "round_id")} for e in events
    ]


@pytest.mark.spec("R1", "R2")
def test_call_with_openai_dicts_sends_the_same_view_as_with_messages() -> None:
    """Sync: dicts and `from_openai` records give the same view, events and update."""
    dicts = conversation()
    seen: dict[str, list[list[Message]]] = {"dicts": [], "records": []}
    events: dict[str, list[CompressionEvent]] = {"dicts": [], "records": []}
    outcomes = {}
    for kind, messages in (("dicts", dicts), ("records", [from_openai(d) for d in dicts])):
        outcomes[kind] = engine(events[kind]).call(
            messages, lambda view, k=kind: seen[k].append(view) or "ok", system="You build."
        )
    assert [[message_to_dict(m) for m in v] for v in seen["dicts"]] == [
        [message_to_dict(m) for m in v] for v in seen["records"]
    ]
    assert [(e.phase, e.level) for e in events["dicts"]] == [("started", "L1"), ("completed", "L2")]
    assert strip_times(events["dicts"]) == strip_times(events["records"])
    update_d, update_r = outcomes["dicts"].update, outcomes["records"].update
    assert update_d is not None and update_r is not None
    # the L2 threshold (204 tokens) leaves no room beside the summary's bound: the
    # smallest kept part, the last message, is kept
    assert update_d.event.cutoff == update_r.event.cutoff == 11
    assert outcomes["dicts"].response == "ok"


@pytest.mark.spec("R1", "R2")
@pytest.mark.anyio
async def test_acall_and_acompact_with_openai_dicts_send_the_same_view_as_with_messages() -> None:
    """Async: the same for `acall`, and `compact`/`acompact` build the same view."""
    dicts = conversation()
    records = [from_openai(d) for d in dicts]
    views: list[list[dict[str, Any]]] = []

    async def model(view: list[Message]) -> str:
        views.append([message_to_dict(m) for m in view])
        return "ok"

    await engine([]).acall(dicts, model)
    await engine([]).acall(records, model)
    assert views[0] == views[1] and views[0][0]["content"].startswith("Summary of the earlier")
    compacted = [
        (await engine([]).acompact(dicts)).view,
        (await engine([]).acompact(records)).view,
        engine([]).compact(dicts).view,
    ]
    dumped = [[message_to_dict(m) for m in v] for v in compacted]
    assert dumped[0] == dumped[1] == dumped[2] == views[0]


def test_call_rejects_what_is_not_a_message_naming_from_openai() -> None:
    """A string, a LangChain-like object or a malformed dict is a typed error saying
    which message and how to convert it; the model is never called."""
    calls: list[Any] = []
    with pytest.raises(MessageFormatError) as info:
        engine([]).call([{"role": "user", "content": "hi"}, "just text"], calls.append)
    assert info.value.index == 1
    assert str(info.value) == (
        "<messages>: message 1: a str is not a message: pass ars_core.Message records "
        "or OpenAI-format dicts (ars_core.from_openai reads one)"
    )
    with pytest.raises(MessageFormatError, match="unknown or missing role 'robot'"):
        engine([]).call([{"role": "robot", "content": "beep"}], calls.append)
    assert calls == []


def growing_history(n: int) -> list[Message]:
    return [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"turn {i}", id=f"m{i}")
        for i in range(n)
    ]


@pytest.mark.spec("R1")
def test_a_growing_history_is_checked_only_where_it_grew() -> None:
    """Below T a call looks only at the messages appended since the last call (a
    history of records costs the same at 300 messages as at 3): a dict appended to it
    is still read with `from_openai`, and a history edited in the middle reaches the
    model exactly as it now is."""
    compressor = Compressor(SummaryConfig(summary_threshold=100))
    seen: list[list[dict[str, Any]]] = []

    def model(view: Sequence[Message]) -> str:
        seen.append([message_to_dict(m) for m in view])
        return "ok"

    history = growing_history(300)
    compressor.call(history, model)
    assert compressor._as_messages.checked == 300
    history = [*history, Message(role="user", content="one more", id="m300")]
    compressor.call(history, model)
    assert compressor._as_messages.checked == 301  # only the new message was looked at
    appended = {"role": "assistant", "content": "an OpenAI dict", "id": "d1"}
    compressor.call([*history, appended], model)
    assert seen[-1] == [message_to_dict(m) for m in history] + [
        message_to_dict(from_openai(appended))
    ]
    edited = [*history[:150], Message(role="user", content="edited", id="m150"), *history[151:]]
    compressor.call(edited, model)
    assert seen[-1] == [message_to_dict(m) for m in edited]
    assert seen[-1][150]["content"] == "edited"


@pytest.mark.spec("R1")
@pytest.mark.anyio
async def test_a_growing_history_is_checked_only_where_it_grew_async() -> None:
    """The same through `acall`: one appended message, one message looked at; an
    appended dict is read with `from_openai`."""
    compressor = Compressor(SummaryConfig(summary_threshold=100))
    seen: list[list[dict[str, Any]]] = []

    async def model(view: Sequence[Message]) -> str:
        seen.append([message_to_dict(m) for m in view])
        return "ok"

    history = growing_history(300)
    await compressor.acall(history, model)
    history = [*history, Message(role="user", content="one more", id="m300")]
    await compressor.acall(history, model)
    assert compressor._as_messages.checked == 301
    appended = {"role": "user", "content": "from a dict", "id": "d2"}
    await compressor.acall([*history, appended], model)
    assert seen[-1][-1] == message_to_dict(from_openai(appended))
    assert seen[-1][:-1] == [message_to_dict(m) for m in history]
