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
    to_openai,
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
    # dicts in, dicts out (view_format="auto"): the same view, in the caller's form
    assert seen["dicts"] == [to_openai(v) for v in seen["records"]]
    assert all(isinstance(m, dict) and "role" in m for v in seen["dicts"] for m in v)
    assert all(isinstance(m, Message) for v in seen["records"] for m in v)
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

    async def model(view: list[Any]) -> str:
        views.append(to_openai(view))  # dicts for dicts, records for records
        return "ok"

    await engine([]).acall(dicts, model)
    await engine([]).acall(records, model)
    assert views[0] == views[1] and views[0][0]["content"].startswith("Summary of the earlier")
    compacted = [
        (await engine([]).acompact(dicts)).view,
        (await engine([]).acompact(records)).view,
        engine([]).compact(dicts).view,
    ]
    dumped = [to_openai(v) for v in compacted]
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


@pytest.mark.spec("R1")
def test_view_format_and_to_openai_on_a_view() -> None:
    """``to_openai`` takes one message or a list (a view; a dict in it is copied);
    ``view_format="openai"`` gives records' callers dicts, ``"messages"`` gives dicts'
    callers records; anything else is a ConfigError."""
    records = [from_openai(d) for d in conversation()]
    assert to_openai(records) == [to_openai(m) for m in records]
    assert to_openai([records[0], {"role": "user", "content": "hi"}])[1] == {
        "role": "user",
        "content": "hi",
    }
    with pytest.raises(MessageFormatError):
        to_openai("not a message")  # type: ignore[call-overload]
    seen: list[Any] = []
    Compressor(view_format="openai").call(records[:1], lambda v: seen.append(v) or "ok")
    Compressor(view_format="messages").call(conversation()[:1], lambda v: seen.append(v) or "ok")
    assert seen[0] == [to_openai(records[0])]
    assert seen[1] == [records[0]] and isinstance(seen[1][0], Message)
    with pytest.raises(ValueError, match="view_format"):
        Compressor(view_format="langchain")  # type: ignore[arg-type]


def test_a_compression_event_reads_like_its_dict() -> None:
    """The observer's event: attributes, ``to_dict()``, and dict access equal to it;
    ``from_dict`` reads a stream / SSE payload back."""
    events: list[CompressionEvent] = []
    engine(events).call(conversation(), lambda view: "ok", system="You build.")
    completed = events[-1]
    payload = completed.to_dict()
    assert completed["phase"] == completed.phase == "completed"
    assert completed.get("cutoff") == payload["cutoff"] and completed.get("missing", 7) == 7
    assert "file_path" in completed and dict(completed) == payload
    assert sorted(completed.keys()) == sorted(payload) and len(completed) == len(payload)
    assert CompressionEvent.from_dict(json.loads(json.dumps(payload))) == completed
    with pytest.raises(MessageFormatError):
        CompressionEvent.from_dict({"type": "something else"})


@pytest.mark.spec("R53")
def test_a_jsonl_run_whose_texts_hold_unicode_line_separators_reads_whole(
    tmp_path: Any,
) -> None:
    """JSON writes U+2028, U+2029 and U+0085 unescaped in a string: a record holding
    them is one line of a JSONL file, read as one message (CRLF lines read too)."""
    from ars_core import read_messages

    texts = ["one\u2028two", "three\u0085four\u2029five", "plain"]
    roles = ["user", "assistant", "user"]
    lines = [
        json.dumps({"role": r, "content": t}, ensure_ascii=False)
        for r, t in zip(roles, texts, strict=True)
    ]
    path = tmp_path / "run.jsonl"
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    assert [(m.role, m.text) for m in read_messages(path)] == list(zip(roles, texts, strict=True))
