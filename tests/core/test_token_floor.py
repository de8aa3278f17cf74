"""Floors of exact counts (R1, R2, R3, R12, R20): a decision that only needs to know
that a count is above a limit reads, before encoding anything, a floor never above
the exact ``o200k_base`` count (:mod:`ars_core.floors`: the pieces the encoding's
pattern certainly makes). The oracles: the encoder itself and its pattern (the
floor is never above the tokens nor the pieces, for any text, any head of it, any
message), the pieces of plain prose (the floor finds every one: a rule that stops
firing fails), and the engine with floors turned off (the same views sent, files,
events and summarizer inputs, at thresholds on both sides of the decisions, while
fewer characters are encoded).
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import attrs
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from ars_core import Compressor, FsspecBackend, Message, message_to_dict
from ars_core import floors as floors_module
from ars_core import l1 as l1_module
from ars_core._tiktoken_offline import load_encoding
from ars_core.estimate import MESSAGE_OVERHEAD, ApproxEstimator, CachingEstimator, TiktokenEstimator
from ars_core.floors import (
    FLOOR_REACH,
    floor_of,
    floors_reach,
    floors_reach_of,
    message_floor,
    token_floor,
)
from ars_core.l1 import plan_l1
from ars_core.memo import FLOOR, TOKENS
from ars_core.messages import ContentPart, ToolCall
from ars_core.pending_form import is_pending
from ars_core.stream import CompressionEvent
from ars_core.summarize import SummaryResult
from ars_core.totals import HistorySize, NewestFirst, Totals

from .helpers import assistant, call, small_config, tool, user

ENCODINGS = ("o200k_base", "cl100k_base")
ESTIMATORS = {name: TiktokenEstimator(name) for name in ENCODINGS}
PATTERNS = {name: regex.compile(load_encoding(name)._pat_str) for name in ENCODINGS}

#: characters where the pattern's rules meet: ASCII classes, other scripts' letters,
#: marks, digits and spaces, control characters, a lone surrogate
TRICKY = [
    *"aZq09 '/\n\r\t\x0b\x0c.,;:-_()[]\"#!?$%&*+=<>|\\~`",
    *("é", "\u0301", "\u00a0", "\u3000", "汉", "🙂", "\x1c", "\x00", "\x85", "٣", "²"),
    *("\u2028", "ǅ", "ʰ", "\ud800", " x", "\n/", "1234", "'s", "ab"),
]
texts = st.lists(st.sampled_from(TRICKY), max_size=40).map("".join)


@pytest.mark.spec("R3")
@settings(max_examples=400, deadline=None)
@given(texts)
def test_the_floor_is_never_above_the_pieces_or_the_tokens(text: str) -> None:
    floor = token_floor(text)
    for name in ENCODINGS:
        assert floor <= len(PATTERNS[name].findall(text))
        assert floor <= ESTIMATORS[name].count_text(text)


@pytest.mark.spec("R3")
@settings(max_examples=200, deadline=None)
@given(texts, st.integers(min_value=0, max_value=40))
def test_the_floor_of_a_head_is_at_most_the_floor_of_the_text(text: str, cut: int) -> None:
    assert token_floor(text[:cut]) <= token_floor(text)


@pytest.mark.spec("R3")
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.from_regex(r"[A-Z]?[a-z]{1,8}", fullmatch=True),
            st.sampled_from([" ", ", ", ".\n", ": "]),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_the_floor_finds_every_piece_of_plain_prose(parts: list[tuple[str, str]]) -> None:
    text = "".join(sep + word for word, sep in parts)[1:]  # no space or break first
    assert token_floor(text) == len(PATTERNS["o200k_base"].findall(text))


def test_a_long_text_counted_in_parts_is_above_its_floor() -> None:
    rng = random.Random(5)
    text = "".join(rng.choice(TRICKY) for _ in range(150_000))  # counted in parts of 64K
    assert token_floor(text) <= ESTIMATORS["o200k_base"].count_text(text)


def _messages(draw: Any) -> Message:
    content: Any = draw(texts)
    if draw(st.booleans()):
        content = (
            ContentPart(type="text", text=draw(texts)),
            ContentPart(type="image", data={"type": "image_url", "image_url": {"url": "x"}}),
        )
    calls = tuple(
        ToolCall(id=draw(st.sampled_from(["", "c1"])), name=draw(st.sampled_from(["", "ls"])),
                 args=draw(st.sampled_from([{}, {"path": draw(texts)}])))
        for _ in range(draw(st.integers(0, 2)))
    )  # fmt: skip
    return Message(
        role=draw(st.sampled_from(["user", "assistant", "tool"])),
        content=content,
        tool_calls=calls,
        name=draw(st.sampled_from([None, "", "bash", "读"])),
        tool_call_id=draw(st.sampled_from([None, "", "c1"])),
    )


@pytest.mark.spec("R3")
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_messages_floor_is_never_above_its_count(data: st.DataObject) -> None:
    m = data.draw(st.composite(lambda draw: _messages(draw))())
    for est in ESTIMATORS.values():
        assert message_floor(m) <= est.measure(m)
        floor = floor_of(est)
        assert floor is not None and floor(m) <= est.count_message(m)


class _Recounted(TiktokenEstimator):
    def count_text(self, text: str) -> int:
        return 2 * super().count_text(text)


@pytest.mark.spec("R3")
def test_only_the_built_in_exact_counts_have_floors() -> None:
    class ExactOnly(CachingEstimator):
        def count_text(self, text: str) -> int:
            return ESTIMATORS["o200k_base"].count_text(text)

    for est in (ApproxEstimator(), ExactOnly(), _Recounted()):
        assert floor_of(est) is None and floors_reach_of(est) is None
    assert floors_reach_of(ESTIMATORS["o200k_base"]) is not None


def _sizes(n: int, seed: int) -> list[Message]:
    rng = random.Random(seed)
    pick = ["plain words here", "汉字の文章、テスト。" * 3, "x=1; y=[2,3]\n", "ok"]
    return [user(" ".join(rng.choice(pick) for _ in range(rng.randrange(1, 30)))) for _ in range(n)]


@pytest.mark.spec("R1", "R2", "R3")
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 10_000), st.integers(0, 900))
def test_sizes_decided_by_floors_answer_as_counts_do(n: int, seed: int, limit: int) -> None:
    est = ESTIMATORS["o200k_base"]
    history = _sizes(n, seed)
    exact = sum(est.measure(m) for m in history)
    reach = floors_reach_of(est)
    bound = sum(map(est.token_bound, history))
    counted: list[Message] = []

    def count(m: Message) -> int:
        counted.append(m)
        return est.measure(m)

    size = HistorySize.bound(bound, Totals(), history, count, threading.Lock())
    assert size.reaches(limit, reach) == (exact >= limit)
    newest = NewestFirst(history, count, 7, reach)
    assert newest.exceeds(limit) == (exact + 7 > limit)
    assert newest.total() == exact + 7


@pytest.mark.spec("R3")
def test_a_floor_pass_gives_up_on_text_its_floor_says_little_of() -> None:
    est = ESTIMATORS["o200k_base"]
    history = [user("汉字の文章、テスト。" * 40) for _ in range(200)]
    read: list[Message] = []

    def floor(m: Message) -> int:
        read.append(m)
        return message_floor(m)

    limit = 500
    assert sum(est.measure(m) for m in history) > limit  # above, but not by its floors
    assert not floors_reach(history, limit, floor, est.token_bound)
    assert sum(map(est.token_bound, read)) <= FLOOR_REACH * limit + est.token_bound(history[0])
    assert len(read) < len(history)


# ---------------------------------------------------------------- the engine, floors off


def _log(i: int, lines: int, cjk: bool) -> str:
    rng = random.Random(i)
    out = []
    for n in range(lines):
        if cjk and n % 2:
            out.append("汉字の文章、テスト。" * rng.randrange(1, 4))
        else:
            out.append(f"    at module_{i}.func_{n} (src/m{n}.py:{rng.randrange(900)}) ok")
    return "\n".join(out) + "\n"


def _history(cjk: bool) -> list[Message]:
    rng = random.Random(3)
    messages: list[Message] = [user("build the project and fix every failing test")]
    for i in range(24):
        c = call("bash", command=f"make step{i}")
        # results on both sides of the offload limit (120 tokens)
        messages += [assistant("", c), tool(c, _log(i, rng.randrange(1, 30), cjk))]
        messages.append(assistant(f"step {i} checked: " + "fine " * rng.randrange(0, 60)))
    messages.append(user("now run the whole suite"))
    return messages


class _Recording:
    def __init__(self) -> None:
        self.inputs: list[list[dict[str, Any]]] = []

    def summarize(self, messages: list[Message], prompt: str) -> SummaryResult:
        self.inputs.append([message_to_dict(m) for m in messages])
        return SummaryResult(text=f"summary of {len(messages)} messages")


def _round(root: Path, messages: list[Message], threshold: float) -> dict[str, Any]:
    summarizer = _Recording()
    events: list[CompressionEvent] = []
    sent: list[list[dict[str, Any]]] = []
    engine = Compressor(
        small_config(summary_threshold=threshold, summary_keep_messages=4),
        backend=FsspecBackend(root.as_uri()),
        summarizer=summarizer,
    )

    def model(view: list[Message]) -> Message:
        sent.append([message_to_dict(m) for m in view])
        return Message(role="assistant", content="ok")

    outcome = engine.call(messages, model, emitter=events.append, thread="t")
    return {
        "level": outcome.level,
        "tokens": (outcome.tokens_before, outcome.tokens_after),
        "sent": sent,
        "summarizer": summarizer.inputs,
        "files": {
            p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()
        },
        "events": [attrs.evolve(e, round_id="", timestamp="") for e in events],
    }


@pytest.mark.spec("R1", "R2", "R12", "R20")
@pytest.mark.parametrize("cjk", [False, True], ids=["ascii", "cjk"])
@pytest.mark.parametrize("threshold", [0.5, 1, 2, 4, 8, 16])
def test_a_call_decided_by_floors_is_the_call_counted_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cjk: bool, threshold: float
) -> None:
    encoding = load_encoding("o200k_base")
    encoded = [0]
    encode = encoding.encode_ordinary

    def counting(text: str) -> list[int]:
        encoded[0] += len(text)
        return encode(text)

    monkeypatch.setattr(encoding, "encode_ordinary", counting)
    messages = _history(cjk)
    floored = _round(tmp_path / "a", [attrs.evolve(m) for m in messages], threshold)
    with_floors = encoded[0]
    with monkeypatch.context() as patch:  # no floor anywhere: counts decide
        patch.setattr(floors_module, "counts_by_pieces", lambda est: False)
        patch.setattr(l1_module, "head_floor", lambda text, tokens: 0)
        encoded[0] = 0
        counted = _round(tmp_path / "b", [attrs.evolve(m) for m in messages], threshold)
    assert floored["level"] == counted["level"]
    assert floored["sent"] == counted["sent"]
    assert floored["summarizer"] == counted["summarizer"]
    assert floored["files"] == counted["files"]
    assert floored["events"] == counted["events"]
    assert floored["tokens"] == counted["tokens"]
    # floors never encode more; in the rounds far above the limits they spare encoding
    assert with_floors < encoded[0] if threshold <= 4 else with_floors <= encoded[0]


@pytest.mark.spec("R3", "R12")
def test_a_floor_is_kept_on_its_message_and_a_pending_form_is_not_made_for_one() -> None:
    est = ESTIMATORS["o200k_base"]
    floor = floor_of(est)
    assert floor is not None
    c = call("bash", command="make")
    m = tool(c, "    at module.func (src/m.py:12) ok\n" * 40)
    assert floor(m) == message_floor(m) == FLOOR.get(m) > MESSAGE_OVERHEAD
    assert TOKENS.get(m, est.cache_key) is None  # nothing was encoded for it
    est.count_message(m)
    assert floor(m) == est.count_message(m)  # once counted, the count itself
    form = plan_l1([tool(c, _log(1, 60, False))], estimator=est, tool_token_limit=120).view[0]
    assert is_pending(form)
    assert floor(form) == MESSAGE_OVERHEAD and is_pending(form) and FLOOR.get(form) is None
