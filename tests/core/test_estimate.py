"""Estimators count system, tools and messages; approx tracks o200k; caching."""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import json.decoder
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ars_core import (
    ApproxEstimator,
    ContentPart,
    Message,
    TiktokenEstimator,
    ToolCall,
    from_openai,
    read_messages,
)
from ars_core._tiktoken_offline import load_encoding
from ars_core.approx_features import APPROX_CHUNK, APPROX_FEATURES, approx_features

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

    @staticmethod
    def _rebuilt() -> list[Message]:
        """Messages as a store reloaded each call gives them: new objects, equal texts."""
        text = "the same words " * 20
        return [
            Message(role="user", content=text),
            Message(role="assistant", content=text),
            Message(role="tool", content=text, name="bash", tool_call_id="c1"),
            Message(role="tool", content=text, name="bash", tool_call_id="c2"),
            Message(role="tool", content=text, tool_call_id="c1"),
            Message(role="user", content=text, name="ann"),
        ]

    def test_an_equal_message_rebuilt_as_a_new_object_takes_its_count(self) -> None:
        """A plain-text message equal to one counted before (role, name, tool-call id
        and text) takes that count, not counted again; one differing in any of them is
        counted as itself (an estimator whose count depends on the role included)."""

        class ByRole(CountingEstimator):
            def measure(self, message: Message) -> int:
                return super().measure(message) + 10 * len(message.role)

        est = ByRole()
        first = [est.count_message(m) for m in self._rebuilt()]
        assert first == [ByRole().measure(m) for m in self._rebuilt()]
        n = est.texts
        assert [est.count_message(m) for m in self._rebuilt()] == first and est.texts == n

    def test_counts_kept_by_content_are_bounded(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The counts kept by content are forgotten together when they reach their
        bound: the next equal message is counted again, the same."""
        from ars_core import estimate

        monkeypatch.setattr(estimate, "CONTENT_CACHE_SIZE", 4)
        est = CountingEstimator()
        first = [est.count_message(m) for m in self._rebuilt()[:4]]
        n = est.texts
        assert [est.count_message(m) for m in self._rebuilt()[:4]] == first and est.texts == n
        fifth = est.count_message(self._rebuilt()[4])  # the bound reached: all forgotten
        n = est.texts
        again = [est.count_message(m) for m in self._rebuilt()[:5]]
        assert again == [*first, fifth] and est.texts > n
        n = est.texts
        assert est.count_message(self._rebuilt()[4]) == fifth and est.texts == n

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


def traced_peak(setup: str, data: str, work: str) -> int:
    """Peak bytes traced by tracemalloc while ``work`` runs, in a fresh interpreter."""
    import subprocess
    import sys

    code = "\n".join(
        [
            setup,
            data,
            "import tracemalloc",
            "tracemalloc.start()",
            work,
            "print(tracemalloc.get_traced_memory()[1])",
        ]
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


# ------------------------------------------------------------------ content blocks (R57)


def png(width: int, height: int) -> str:
    """A PNG header (signature + IHDR) as base64: enough for the size to be read."""
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    body = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk
    body += struct.pack(">I", zlib.crc32(chunk)) + b"\x00" * 64
    return base64.b64encode(body).decode()


def jpeg(width: int, height: int) -> str:
    import struct

    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return base64.b64encode(b"\xff\xd8" + app0 + sof + b"\x00" * 32).decode()


def gif(width: int, height: int) -> str:
    import struct

    return base64.b64encode(b"GIF89a" + struct.pack("<HH", width, height) + b"\x00" * 16).decode()


ESTIMATORS = [ApproxEstimator, lambda: TiktokenEstimator("o200k_base")]


@pytest.mark.spec("R57")
@pytest.mark.parametrize("make", ESTIMATORS, ids=["approx", "o200k"])
class TestContentBlocks:
    def test_tool_call_ids_and_names_are_counted(self, make: Any) -> None:
        """A tool call costs its id, type and name besides its arguments."""
        est = make()
        args = {"command": "ls -la"}
        bare = Message(role="assistant", tool_calls=(ToolCall(id="", name="", args=args),))
        call_id, name = "toolu_01A09q90qw90lq917835lq9", "str_replace_based_edit_tool"
        full = Message(role="assistant", tool_calls=(ToolCall(id=call_id, name=name, args=args),))
        assert est.count_message(full) == (
            est.count_message(bare) + est.count_text(call_id) + est.count_text(name)
        )
        result = Message(role="tool", content="ok", tool_call_id=call_id)
        assert est.count_message(result) == est.count_message(
            Message(role="tool", content="ok")
        ) + est.count_text(call_id)

    def test_tool_use_block_and_tool_calls_count_one_call_once(self, make: Any) -> None:
        """langchain-anthropic keeps a call both as a ``tool_use`` block and in ``tool_calls``."""
        est = make()
        call = ToolCall(id="toolu_1", name="bash", args={"command": "pytest -q " * 20})
        block = ContentPart(
            type="tool_use",
            data={"type": "tool_use", "id": "toolu_1", "name": "bash", "input": dict(call.args)},
        )
        text = ContentPart(type="text", text="Running the tests.")
        both = Message(role="assistant", content=(text, block), tool_calls=(call,))
        calls_only = Message(role="assistant", content=(text,), tool_calls=(call,))
        block_only = Message(role="assistant", content=(text, block))
        assert est.count_message(both) == est.count_message(calls_only)
        assert est.count_message(block_only) == est.count_message(calls_only)

    @pytest.mark.parametrize(
        "block",
        [
            {"type": "thinking", "thinking": "THOUGHT", "signature": "sig"},
            {"type": "reasoning", "reasoning": "THOUGHT"},
            {"type": "redacted_thinking", "data": "THOUGHT"},
        ],
    )
    def test_thinking_is_counted_by_its_text(self, make: Any, block: dict[str, str]) -> None:
        """A long thinking block is not a flat charge: it costs its text."""
        est = make()
        thought = "Let me check the failing assertion in test_views.py first. " * 200
        data = {k: (thought if v == "THOUGHT" else v) for k, v in block.items()}
        msg = Message(role="assistant", content=(ContentPart(type=block["type"], data=data),))
        expected = est.count_text(thought)
        assert expected * 0.98 <= est.count_message(msg) - 4 <= expected * 1.02 + 5
        assert est.count_message(msg) > 765 * 2

    def test_small_blocks_are_not_charged_like_images(self, make: Any) -> None:
        """40 small Claude tool turns cost about what the OpenAI form of them costs."""
        est = make()
        claude, openai = [], []
        for i in range(40):
            cid = f"toolu_{i:04d}"
            claude += [
                Message(
                    role="assistant",
                    content=(
                        ContentPart(
                            type="tool_use",
                            data={"type": "tool_use", "id": cid, "name": "ls", "input": {}},
                        ),
                    ),
                ),
                Message(
                    role="user",
                    content=(
                        ContentPart(
                            type="tool_result",
                            data={"type": "tool_result", "tool_use_id": cid, "content": "a.py"},
                        ),
                    ),
                ),
            ]
            call = ToolCall(id=cid, name="ls", args={})
            openai += [
                Message(role="assistant", tool_calls=(call,)),
                Message(role="tool", content="a.py", tool_call_id=cid),
            ]
        assert est.count(claude) <= est.count(openai) * 1.2
        assert est.count(claude) < 40 * 100

    def test_images_are_charged_by_size_and_detail(self, make: Any) -> None:
        est = make()

        def openai_image(url: str, detail: str | None = None) -> Message:
            image_url: dict[str, str] = {"url": url}
            if detail:
                image_url["detail"] = detail
            return from_openai(
                {"role": "user", "content": [{"type": "image_url", "image_url": image_url}]}
            )

        def anthropic_image(data: str) -> Message:
            source = {"type": "base64", "media_type": "image/png", "data": data}
            return from_openai({"role": "user", "content": [{"type": "image", "source": source}]})

        def tokens(m: Message) -> int:
            return est.count_message(m) - 4

        # OpenAI: 85 at low detail; else 85 + 170 per 512px tile after scaling
        assert tokens(openai_image(f"data:image/png;base64,{png(4000, 4000)}", "low")) == 85
        assert tokens(openai_image(f"data:image/png;base64,{png(1024, 1024)}")) == 85 + 170 * 4
        assert tokens(openai_image(f"data:image/png;base64,{png(2048, 4096)}")) == 85 + 170 * 6
        assert tokens(openai_image(f"data:image/jpeg;base64,{jpeg(500, 300)}")) == 85 + 170
        assert tokens(openai_image(f"data:image/gif;base64,{gif(600, 200)}")) == 85 + 170 * 2
        # Anthropic: width * height / 750
        assert tokens(anthropic_image(png(1000, 1000))) == 1334
        assert tokens(anthropic_image(png(200, 150))) == 40
        # the size unknown: a flat charge
        assert tokens(openai_image("https://example.com/cat.png")) == 765

    def test_unusual_tool_arguments_never_raise(self, make: Any) -> None:
        """Tuple keys, cycles and 5,000 levels of nesting: a count, never RecursionError."""
        est = make()
        cyclic: dict[str, Any] = {"name": "loop"}
        cyclic["self"] = cyclic
        deep: Any = "bottom"
        for _ in range(5000):
            deep = {"d": [deep]}
        odd = {(1, 2): "tuple key", "obj": object(), "bytes": b"\x00\xff"}
        for args in (cyclic, deep, odd):
            msg = Message(role="assistant", tool_calls=(ToolCall(id="c1", name="f", args=args),))
            assert est.count_message(msg) > 5
        assert (
            est.count_message(
                Message(
                    role="assistant", tool_calls=(ToolCall(id="c", name="f", args={"d": deep}),)
                )
            )
            >= 5000 * 2
        )
        assert est.count([], tools=[deep, cyclic]) > 5000


# ------------------------------------------------------------------ the approximate estimator


def char_class(c: str) -> str:
    """The class the approximate estimator reads for one character (by code point)."""
    cp = ord(c)
    if cp < 128:
        if c.isalpha():
            return "upper" if c.isupper() else "lower"
        if c.isdigit():
            return "digit"
        if c in "\n\r":
            return "newline"
        if c in " \t\f\v":
            return "space"
        return "punct" if 33 <= cp < 127 else "other"
    if cp < 0x800:
        return "lower"  # two-byte scripts: Latin, Greek, Cyrillic, Hebrew, Arabic...
    if 0x3000 <= cp <= 0xDFFF:
        return "cjk"  # CJK punctuation, kana, ideographs, Hangul (and lone surrogates)
    return "other"


def features_one_by_one(text: str) -> tuple[int, ...]:
    """``approx_features`` read one character at a time (each chunk on its own)."""
    counts = dict.fromkeys(APPROX_FEATURES, 0)
    for start in range(0, len(text), APPROX_CHUNK):
        chunk = text[start : start + APPROX_CHUNK]
        before, prev_char = "none", ""
        for c in chunk:
            k = char_class(c)
            letter, was_letter = k in ("upper", "lower"), before in ("upper", "lower")
            counts["chars"] += 1
            counts["word_starts"] += letter and not was_letter
            counts["case_changes"] += k == "upper" and before == "lower"
            counts["digit_starts"] += k == "digit" and before != "digit"
            counts["punct"] += k == "punct"
            counts["punct_repeats"] += k == "punct" and c == prev_char
            counts["line_breaks"] += k == "newline" and before != "newline"
            counts["cjk"] += k == "cjk"
            # an all-ASCII chunk counts no "other" (its control characters: NUL, ESC...)
            counts["other"] += k == "other" and not chunk.isascii()
            before, prev_char = k, c
    return tuple(counts.values())


@pytest.mark.spec("R3", "R57")
class TestApproxRebuilt:
    def test_features_are_what_a_character_by_character_reading_finds(
        self, trajectories_dir: Path
    ) -> None:
        """The bit tricks of the one-pass reading count exactly what reading the text
        one character at a time counts: on agent messages, on random text mixing every
        class (case changes, digit runs, repeated punctuation, CRLF, CJK, emoji, a lone
        surrogate) and across a chunk boundary."""
        rnd = random.Random(11)
        alphabet = ["a", "Z", "7", "=", "-", "==", "\n", "\r\n", " ", "\t", "中", "é", "😀", "\x00"]
        texts = [m.text for m in read_messages(trajectories_dir / "django__django-11133.jsonl.gz")]
        texts += ["".join(rnd.choices(alphabet, k=rnd.randint(0, 400))) for _ in range(300)]
        texts += ["a\ud800B", "=" * 1000, "aB" * (APPROX_CHUNK // 2 + 3), "é=" * APPROX_CHUNK]
        for text in texts:
            assert approx_features(text) == features_one_by_one(text), text[:80]

    def test_long_punctuation_runs_hex_and_base64_track_o200k(self) -> None:
        enc = load_encoding("o200k_base")
        rnd = random.Random(7)
        cases = {
            "rule": "=" * 1000,
            "pytest": ("=" * 30 + " 3 failed, 120 passed in 4.2s " + "=" * 30 + "\n") * 20,
            "hex": "\n".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(200)),
            "base64": base64.b64encode(rnd.randbytes(6000)).decode(),
        }
        est = ApproxEstimator()
        assert abs(est.count_text(cases["rule"]) - 16) <= 2
        for kind, text in cases.items():
            exact = len(enc.encode_ordinary(text))
            assert abs(est.count_text(text) - exact) <= exact * 0.15, kind

    @pytest.mark.parametrize("kind", ["chinese", "chinese_mixed", "code", "json"])
    def test_chinese_json_and_python_within_10_percent(
        self, trajectories_dir: Path, kind: str
    ) -> None:
        text = samples(trajectories_dir)[kind]
        exact = len(load_encoding("o200k_base").encode_ordinary(text))
        assert abs(ApproxEstimator().count_text(text) - exact) <= exact * 0.10

    def test_held_out_runs_error(self, trajectories_dir: Path) -> None:
        """On the runs the weights were not fitted on (every other run by name):
        mean abs error per run <= 3%, worst run <= 10%, messages of >= 20 tokens <= 5%."""
        approx, exact = ApproxEstimator(), TiktokenEstimator("o200k_base")
        runs = sorted(trajectories_dir.glob("*.jsonl.gz"))[1::2]
        run_errors, message_errors = [], []
        for path in runs:
            msgs = read_messages(path)
            a = [approx.count_message(m) for m in msgs]
            e = [exact.count_message(m) for m in msgs]
            run_errors.append(abs(sum(a) - sum(e)) / sum(e))
            message_errors += [abs(x - y) / y for x, y in zip(a, e, strict=True) if y >= 20]
        assert sum(run_errors) / len(run_errors) <= 0.03
        assert max(run_errors) <= 0.10
        assert sum(message_errors) / len(message_errors) <= 0.05

    def test_counting_memory_stays_small_for_a_large_text(self) -> None:
        """Counting 10 MB reads it in chunks: the extra memory is far below the text's size
        (measured in a fresh process, where nothing else allocates)."""
        peak = traced_peak(
            "from ars_core import ApproxEstimator",
            'text = ("def f(x):\\n    return x == 42  # the answer\\n" * 250_000)[:10_000_000]',
            "ApproxEstimator().count_text(text)",
        )
        assert peak < 2_000_000


@pytest.mark.spec("R3")
def test_tools_counted_again_when_a_list_of_the_same_length_changes() -> None:
    """The tools' count is remembered by value: another list of as many tools (at the
    address a freed one had, say) or the same list refilled in place is counted again."""
    estimator = ApproxEstimator()
    small = [{"name": "a", "description": "x", "parameters": {}}]
    large = [{"name": "b", "description": "word " * 400, "parameters": {}}]
    tools = list(small)
    first = estimator.count_tools(tools)
    tools[0] = large[0]  # the same list object, the same length
    assert estimator.count_tools(tools) > first + 300
    assert estimator.count_tools(list(small)) == first


def weighted_count_one_by_one(text: str) -> int:
    """``ApproxEstimator.count_text`` as first written: ``sum`` over the weighted
    features read one character at a time, rounded, at least 1."""
    if not text:
        return 0
    total = sum(
        w * f for w, f in zip(ApproxEstimator.WEIGHTS, features_one_by_one(text), strict=True)
    )
    return max(1, round(total))


_PIECES = st.sampled_from(
    [
        "a",
        "Z",
        "7",
        "=",
        "-",
        "==",
        "\n",
        "\r\n",
        " ",
        "\t",
        "中",
        "é",
        "😀",
        "\x00",
        "\ud800",
        "\udfff",
    ]
)


@pytest.mark.spec("R3")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.one_of(_PIECES, st.text(max_size=20)), max_size=200),
    rule=st.sampled_from(["", "=" * 300, "-" * 70 + "\n"]),
    pad=st.sampled_from([0, APPROX_CHUNK - 3, APPROX_CHUNK + 5]),
)
def test_count_text_equals_the_per_character_weighted_sum(
    pieces: list[str], rule: str, pad: int
) -> None:
    """The fast count is exactly the weighted sum of the per-character features,
    added in order and rounded: surrogates, NUL, CJK, emoji, punctuation runs and
    texts crossing the chunk size included."""
    text = "x" * pad + rule + "".join(pieces) + rule
    assert ApproxEstimator().count_text(text) == weighted_count_one_by_one(text)
