"""Estimators count system, tools and messages; approx tracks o200k; caching."""

from __future__ import annotations

import inspect
import json
import json.decoder
from pathlib import Path

import pytest

from ars_core import ApproxEstimator, Message, TiktokenEstimator, ToolCall, read_messages
from ars_core._tiktoken_offline import load_encoding

pytestmark = pytest.mark.spec("R3")

DATA = Path(__file__).resolve().parents[1] / "data"


def english(trajectories_dir: Path) -> str:
    msgs = read_messages(trajectories_dir / "django__django-11133.jsonl.gz")
    return "\n".join(m.text for m in msgs if m.role == "assistant")


def samples(trajectories_dir: Path) -> dict[str, str]:
    msgs = read_messages(trajectories_dir / "astropy__astropy-14369.jsonl.gz")
    return {
        "english": english(trajectories_dir),
        "chinese": (DATA / "chinese_prose.txt").read_text(encoding="utf-8"),
        "chinese_mixed": (DATA / "chinese.txt").read_text(encoding="utf-8"),
        "code": inspect.getsource(json.decoder),
        "json": json.dumps([{"role": m.role, "content": m.text[:400]} for m in msgs], indent=1),
        "tool_output": "\n".join(m.text for m in msgs if m.role == "tool"),
    }


class TestApproxAccuracy:
    @pytest.mark.parametrize(
        "kind", ["english", "chinese", "chinese_mixed", "code", "json", "tool_output"]
    )
    @pytest.mark.spec("R3")
    def test_approx_within_15_percent_of_o200k(self, trajectories_dir: Path, kind: str) -> None:
        text = samples(trajectories_dir)[kind]
        exact = len(load_encoding("o200k_base").encode_ordinary(text))
        approx = ApproxEstimator().count_text(text)
        assert abs(approx - exact) / exact <= 0.15, (kind, approx, exact)

    def test_chinese_is_not_undercounted_like_chars_over_4(self) -> None:
        text = (DATA / "chinese_prose.txt").read_text(encoding="utf-8")
        exact = len(load_encoding("o200k_base").encode_ordinary(text))
        assert len(text) / 4 < exact * 0.5  # the naive ratio is off by 2x or more
        assert ApproxEstimator().count_text(text) > exact * 0.85


class TestTiktoken:
    @pytest.mark.parametrize(
        ("name", "tokens"), [("o200k_base", [24912, 2375]), ("cl100k_base", [15339, 1917])]
    )
    def test_offline_encodings(self, name: str, tokens: list[int]) -> None:
        assert load_encoding(name).encode("hello world") == tokens

    def test_estimator_counts_exactly(self) -> None:
        est = TiktokenEstimator("o200k_base")
        assert est.count_text("hello world") == 2
        assert est.name == "tiktoken:o200k_base"

    def test_unknown_encoding(self) -> None:
        with pytest.raises(ValueError):
            load_encoding("p50k_nope")


class TestRequestCount:
    @pytest.mark.spec("R3")
    def test_system_and_tools_are_counted(self) -> None:
        est = ApproxEstimator()
        msgs = [Message(role="user", content="hello there")]
        tools = [
            {"name": "bash", "description": "run a shell command", "parameters": {"type": "object"}}
        ]
        base = est.count(msgs)
        assert est.count(msgs, system="You are a careful assistant.") == base + 4 + est.count_text(
            "You are a careful assistant."
        )
        assert est.count(msgs, tools=tools) > base
        assert est.count_extra(system="x", tools=tools) == est.count([], system="x", tools=tools)

    def test_tool_calls_and_images_are_counted(self) -> None:
        est = ApproxEstimator()
        plain = Message(role="assistant", content="x")
        with_call = Message(
            role="assistant",
            content="x",
            tool_calls=(ToolCall(id="1", name="bash", args={"command": "ls -la " * 50}),),
        )
        assert est.count_message(with_call) > est.count_message(plain) + 50


class CountingEstimator(ApproxEstimator):
    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def count_text(self, text: str) -> int:
        self.texts += 1
        return super().count_text(text)


class TestCaching:
    def test_per_message_counts_are_cached_on_the_message(self) -> None:
        est = CountingEstimator()
        m = Message(role="user", content="hello " * 100)
        first = est.count_message(m)
        n = est.texts
        assert est.count_message(m) == first and est.texts == n

    def test_count_history_only_counts_appended_messages(self) -> None:
        """Per-call work tracks the new messages, not the history length."""
        est = CountingEstimator()
        history = [Message(role="user", content=f"message {i}") for i in range(1000)]
        total = est.count_history(history)
        est.texts = 0
        # a fresh estimator's per-message caches are warm, so clear them to see real work
        for m in history:
            m._cache.clear()
        grown = [*history, Message(role="assistant", content="new one")]
        assert est.count_history(grown) == total + est.count_message(grown[-1])
        assert est.texts == 1  # only the appended message was counted

    def test_count_history_recounts_a_different_history(self) -> None:
        est = ApproxEstimator()
        a = [Message(role="user", content=f"a{i}") for i in range(10)]
        b = [Message(role="user", content=f"b{i} longer text here") for i in range(10)]
        assert est.count_history(a) == est.count_messages(a)
        assert est.count_history(b) == est.count_messages(b)
        assert est.count_history(a[:5]) == est.count_messages(a[:5])


def test_count_history_keeps_one_memo_per_conversation() -> None:
    """Two conversations sharing an estimator each stay incremental."""
    est = CountingEstimator()
    a = [Message(role="user", content=f"a {i}") for i in range(200)]
    b = [Message(role="user", content=f"b {i}") for i in range(200)]
    est.count_history(a)
    est.count_history(b)
    for m in a + b:
        m._cache.clear()
    est.texts = 0
    a2 = [*a, Message(role="user", content="a new")]
    b2 = [*b, Message(role="user", content="b new")]
    assert est.count_history(a2) == est.count_messages(a2)
    assert est.count_history(b2) == est.count_messages(b2)
    est.texts = 0
    est.count_history([*a2, Message(role="user", content="x")])
    est.count_history([*b2, Message(role="user", content="y")])
    assert est.texts == 2


def test_equal_messages_rebuilt_as_new_objects_are_not_recounted() -> None:
    """A store that rebuilds its messages each call still costs dictionary lookups."""
    est = CountingEstimator()
    first = [Message(role="tool", content=f"output {i} " * 50, name="bash") for i in range(100)]
    total = est.count_messages(first)
    est.texts = 0
    rebuilt = [Message(role="tool", content=m.content, name="bash") for m in first]
    assert est.count_messages(rebuilt) == total and est.texts == 0


def test_forget_history_after_an_edit_in_place() -> None:
    est = ApproxEstimator()
    history = [Message(role="user", content=f"m{i}") for i in range(300)]
    est.count_history(history)
    history[100] = Message(role="user", content="a much longer replacement " * 40)
    est.forget_history()
    assert est.count_history(history) == est.count_messages(history)


def test_edits_near_the_end_are_detected_without_forgetting() -> None:
    est = ApproxEstimator()
    history = [Message(role="user", content=f"m{i}") for i in range(300)]
    est.count_history(history)
    edited = [*history[:-3], Message(role="user", content="replaced " * 50), *history[-2:]]
    assert est.count_history(edited) == est.count_messages(edited)
