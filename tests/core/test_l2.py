"""L2's pure parts: cutoff selection, archive, summary input bounds, summary message."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from ars_core import (
    MARK_SUMMARY,
    ApproxEstimator,
    Compressor,
    FsspecBackend,
    Message,
    message_to_dict,
)
from ars_core import archive as archive_module
from ars_core.l2 import build_summary_message, history_file, read_history, select_cutoff
from ars_core.summarize import MARK_NOTE, MARK_OMITTED, ExtractiveSummarizer, condense_history
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import assistant, call, small_config, tool, user, words

pytestmark = pytest.mark.spec("R21", "R23")

EST = ApproxEstimator()


class TestSelectCutoff:
    @pytest.mark.spec("R21")
    def test_keeps_the_latest_messages(self) -> None:
        msgs = [user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(10)]
        assert select_cutoff(msgs, 4) == 6
        assert select_cutoff(msgs, 4, start=1) == 6

    @pytest.mark.spec("R21")
    def test_moves_back_to_the_calling_assistant(self) -> None:
        c1, c2 = call("a"), call("b")
        msgs = [
            user("u"),
            assistant("x"),
            user("v"),
            assistant("", c1, c2),
            tool(c1, "1"),
            tool(c2, "2"),
            assistant("end"),
        ]
        # keep 2 would start the window at the second tool result: the cut moves to index 3
        assert select_cutoff(msgs, 2) == 3

    @pytest.mark.spec("R21")
    def test_moves_forward_when_nothing_would_be_left_to_summarize(self) -> None:
        c1 = call("a")
        msgs = [assistant("", c1), tool(c1, "1"), user("u"), assistant("x")]
        assert select_cutoff(msgs, 3) == 2

    @pytest.mark.spec("R42")
    def test_no_valid_cutoff_when_too_few_messages(self) -> None:
        assert select_cutoff([user("a"), assistant("b")], 4) is None
        summary = Message(role="user", content="S", metadata={MARK_SUMMARY: True})
        assert select_cutoff([summary, user("a"), assistant("b")], 2, start=1) is None
        c1 = call("a")
        assert select_cutoff([assistant("", c1), tool(c1, "1")], 1) is None


class TestArchive:
    @pytest.mark.spec("R23")
    def test_archive_is_lossless_and_content_named(self) -> None:
        msgs = [user("héllo 世界"), assistant("", call("bash", command="ls"))]
        write = history_file(msgs, start=10, end=12, thread="t")
        header, back = read_history(write.text)
        assert header == {"ars_history": 1, "start": 10, "end": 12, "count": 2, "thread": "t"}
        assert [message_to_dict(m) for m in back] == [message_to_dict(m) for m in msgs]
        assert write.path.startswith("outputs/conversation_history/history-000010-000012-")
        assert history_file(msgs, start=10, end=12, thread="t").path == write.path


class TestSummaryInput:
    def test_small_history_is_passed_unchanged(self) -> None:
        msgs = [user("task"), assistant("ok")]
        assert condense_history(msgs, 1000, EST) == msgs

    @pytest.mark.spec("R23", "R59")
    def test_large_history_is_condensed_keeping_task_and_previous_summary_whole(self) -> None:
        """The task (the request that set the work, the newest request) and the previous
        summary stay whole; a request after a previous summary did not set the work (the
        summary carries the first one): it is content like the rest."""
        summary = Message(
            role="user", content="previous summary " + words(200), metadata={MARK_SUMMARY: True}
        )
        task = user("THE TASK: " + words(300))
        middle = [assistant(words(400, f"m{i}")) for i in range(20)]
        aside = user("AN ASIDE: " + words(300, "aside"))
        msgs = [task, *middle[:10], aside, *middle[10:], user("latest")]
        out = condense_history(msgs, 2000, EST)
        assert sum(EST.count_message(m) for m in out) <= 2000
        assert out[0] == task and out[-1] == msgs[-1]
        assert aside not in out  # other user turns are content, dropped like the rest
        assert any("characters shortened" in m.text or m.metadata.get(MARK_NOTE) for m in out)
        chained = condense_history([summary, task, *middle, user("latest")], 2000, EST)
        assert chained[0] == summary and chained[-1].text == "latest" and task not in chained

    @pytest.mark.spec("R23", "R58")
    def test_the_note_for_omitted_messages_names_their_files_and_errors(self) -> None:
        """Messages left out of the summary input still reach the summary: the note
        standing for them names the files they created or edited and their last
        errors, and the built-in summarizer lists them."""
        write = call("write_file", file_path="src/parser_fix.py", content="x = 1")
        bash = call("bash", command="pytest -q tests/test_parser.py")
        old = [
            assistant("", write),
            tool(write, "ok"),
            assistant("", bash),
            tool(bash, "E ValueError: empty input\nFAILED tests/test_parser.py::test_empty"),
        ]
        newer = [assistant(words(300, f"n{i}")) for i in range(4)]
        msgs = [user("TASK: fix the parser"), *old, *newer, user("go on")]
        out = condense_history(msgs, 800, EST)
        (note,) = [m for m in out if m.metadata.get(MARK_NOTE)]
        assert out[0] is msgs[0] and out[1] is note and out[-1] is msgs[-1]
        assert note.text == (
            "[6 older messages omitted here to fit the summary budget; their full text is in "
            "the conversation history file; what they did:\n"
            "- created or edited: src/parser_fix.py\n"
            "- error: E ValueError: empty input\n"
            "- error: FAILED tests/test_parser.py::test_empty\n"
            "]"
        )
        assert note.metadata[MARK_OMITTED] == {
            "files": ["src/parser_fix.py"],
            "errors": ["E ValueError: empty input", "FAILED tests/test_parser.py::test_empty"],
        }
        summary = ExtractiveSummarizer(summary_tokens=1000).summarize(out, "{messages}").text
        assert "Files created or edited\n- src/parser_fix.py" in summary
        assert "- E ValueError: empty input\n- FAILED tests/test_parser.py::test_empty" in summary

    def test_summarizer_is_always_called_on_a_bounded_input(self) -> None:
        """Never a placeholder instead of a summary: the summary model reads a condensed history."""
        task = user("TASK: fix the bug in parser.py " + words(100))
        state = [task] + [
            m
            for i in range(30)
            for m in (user(words(150, f"u{i}")), assistant(words(150, f"a{i}")))
        ]
        summarizer = FakeSummarizer("REAL SUMMARY")
        engine = Compressor(
            small_config(summary_threshold=4),
            estimator=EST,
            summarizer=summarizer,
            summary_input_tokens=1500,
        )
        out = engine.call(state, ScriptedModel())
        ((history, _),) = summarizer.calls
        # the task is the first request and the newest summarized one: both kept (head and
        # tail when they must); the other requests are content, shortened or left out
        cut = out.update.event.cutoff
        requests = [m for m in state[:cut] if m.role == "user"]
        kept = [m for m in history if m.role == "user" and not m.metadata.get(MARK_NOTE)]
        by_id = {m.id: m for m in kept}
        for orig in (requests[0], requests[-1]):
            short = by_id[orig.id]
            assert short.text.startswith(orig.text[:60]) and short.text.endswith(orig.text[-20:])
        assert len(kept) < len(requests)
        assert history[0].text.startswith("TASK: fix the bug in parser.py")
        assert sum(EST.count_message(m) for m in history) <= 1500
        assert "REAL SUMMARY" in out.update.event.summary_message.text


class TestSummaryMessage:
    @pytest.mark.spec("R24")
    def test_summary_message_marks_and_path(self) -> None:
        m = build_summary_message(
            "text", cutoff=12, file_path="outputs/conversation_history/h.jsonl"
        )
        assert m.role == "user" and m.id == "ars-summary-12"
        assert m.metadata == {
            MARK_SUMMARY: True,
            "ars_cutoff": 12,
            "ars_history_path": "outputs/conversation_history/h.jsonl",
        }
        assert "text" in m.text and "outputs/conversation_history/h.jsonl" in m.text

    @pytest.mark.spec("R41")
    def test_failed_summary_message_holds_error_text_and_fallback(self) -> None:
        m = build_summary_message(
            None, cutoff=3, file_path=None, error="TimeoutError: slow", fallback="## Task\nx"
        )
        assert "TimeoutError: slow" in m.text and "## Task" in m.text
        assert m.metadata["ars_summary_error"] == "TimeoutError: slow"


def _long_history(n: int = 40) -> list[Message]:
    """``n`` turns of prose above a 1,024-token T (L2 on any compaction)."""
    return [
        user(words(60, f"q{i}")) if i % 2 == 0 else assistant(words(60, f"a{i}")) for i in range(n)
    ]


class TestArchiveEncodedOnce:
    """Each message is encoded for the archive once, whatever the number of rounds
    that archive it; an edited message (a new object) is encoded anew."""

    @staticmethod
    def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
        encoded: list[str | None] = []
        real = archive_module._encoded

        def spy(m: Message) -> tuple[bytes, bytes]:
            encoded.append(m.id)
            return real(m)

        monkeypatch.setattr(archive_module, "_encoded", spy)
        return encoded

    @staticmethod
    def _archived(backend: FsspecBackend, outcome: Any) -> list[dict[str, Any]]:
        path = outcome.update.event.file_path
        header, messages = read_history(backend.read_text(path))
        assert header["count"] == len(messages)
        return [message_to_dict(m) for m in messages]

    @pytest.mark.spec("R23", "R51")
    def test_rounds_over_one_history_encode_each_message_once(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A round redone over the same history (its event was never persisted)
        encodes nothing again and names the same archive; after a message in the
        middle is replaced, only that message is encoded and the archive holds its
        new form, byte for byte."""
        encoded = self._spy(monkeypatch)
        backend = FsspecBackend("memory://ars-encoded-once")
        compressor = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        history = _long_history()
        first = compressor.compact(history)
        cutoff = first.update.event.cutoff
        assert sorted(encoded) == sorted(m.id for m in history[:cutoff])
        again = compressor.compact(history)
        assert again.update.event.file_path == first.update.event.file_path
        assert len(encoded) == cutoff  # nothing encoded twice
        edited = [
            *history[:5],
            user(
                "an edited question",
            ),
            *history[6:],
        ]
        third = compressor.compact(edited)
        assert encoded[cutoff:] == [edited[5].id]
        assert third.update.event.file_path != first.update.event.file_path
        assert self._archived(backend, third) == [message_to_dict(m) for m in edited[:cutoff]]
        assert self._archived(backend, third)[5]["content"] == "an edited question"

    @pytest.mark.spec("R23", "R26")
    @pytest.mark.anyio
    async def test_rounds_over_one_history_encode_each_message_once_async(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The same through ``acompact`` (archive and summary concurrently)."""
        encoded = self._spy(monkeypatch)
        backend = FsspecBackend("memory://ars-encoded-once-async")
        compressor = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        history = _long_history()
        first = await compressor.acompact(history)
        cutoff = first.update.event.cutoff
        await compressor.acompact(history)
        assert sorted(encoded) == sorted(m.id for m in history[:cutoff])
        assert self._archived(backend, first) == [message_to_dict(m) for m in history[:cutoff]]


def test_condensing_again_reuses_what_each_message_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the summary input keeps whole (summary, system, each request once, the
    newest) is worked out once per message: a later round over the same messages
    plus one works out only the new one, an edited (new) message is worked out
    again, and the input equals a first look at the same history."""
    from ars_core import summarize

    looked: list[Message] = []
    kind = summarize._kind

    def spy(m: Message) -> int:
        looked.append(m)
        return kind(m)

    monkeypatch.setattr(summarize, "_kind", spy)
    c = call("bash", "c1", command="ls")
    msgs = [
        Message(role="system", content="be brief"),
        user("fix the parser " + words(300, "task")),
        assistant("", c),
        tool(c, words(900, "out")),
        user("fix the parser " + words(300, "task")),  # the same request again
        assistant("looking " + words(400, "look")),
    ]
    first = condense_history(msgs, 700, EST)
    assert len(looked) == len(msgs)
    looked.clear()
    grown = [*msgs, user("also the lexer " + words(200, "lex"))]
    second = condense_history(grown, 700, EST)
    assert looked == [grown[-1]]
    edited = [*grown[:5], assistant("looking again " + words(400, "look")), grown[-1]]
    looked.clear()
    third = condense_history(edited, 700, EST)
    assert looked == [edited[5]]
    fresh = [attrs.evolve(m) for m in edited]  # new objects: nothing cached
    assert third == condense_history(fresh, 700, EST)
    assert second == condense_history([attrs.evolve(m) for m in grown], 700, EST)
    assert first[0] == msgs[0] and first[1] == msgs[1]
