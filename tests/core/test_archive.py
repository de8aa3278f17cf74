"""The history archive: written once, and a round that archives the same first
messages again writes only what is new (a continuation naming the earlier file)."""

from __future__ import annotations

import asyncio
import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from attrs import fields as attrs_fields
from hypothesis import given, settings
from hypothesis import strategies as st

from ars_core import (
    ArchiveFormatError,
    ArsError,
    Compressor,
    FsspecBackend,
    Message,
    message_to_dict,
)
from ars_core.archive import (
    ArchivedRange,
    ArchivePlan,
    HistoryArchive,
    read_archive,
    read_history,
)
from ars_core.engine import CallOutcome
from ars_core.testing import FailingBackend, FakeSummarizer

from .helpers import assistant, memory_backend, small_config, user, words

pytestmark = pytest.mark.spec("R23", "R24")

MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def _history(n: int) -> list[Message]:
    """``n`` turns of prose above a 1,024-token T (L2 on any compaction)."""
    return [
        user(words(60, f"q{i}")) if i % 2 == 0 else assistant(words(60, f"a{i}")) for i in range(n)
    ]


def _compact(mode: str, compressor: Compressor, state: list[Message], **kw: Any) -> CallOutcome:
    if mode == "sync":
        return compressor.compact(state, **kw)
    return asyncio.run(compressor.acompact(state, **kw))


def _event(outcome: CallOutcome) -> Any:
    assert outcome.level == "L2" and outcome.update is not None
    assert outcome.update.event is not None
    return outcome.update.event


def _dicts(messages: list[Message]) -> list[dict[str, Any]]:
    return [message_to_dict(m) for m in messages]


class TestContinuation:
    """A round whose summary was not kept (a stateless caller resending the whole
    history, a retry) archives the same first messages again: the new file holds
    only the messages after the earlier archive, and names it."""

    @MODES
    def test_a_longer_history_writes_only_the_new_messages(self, mode: str) -> None:
        """The second file's header says where the earlier messages are, its lines are
        exactly the new messages' bytes, the chain reads back as the whole history,
        and the summary message names both files."""
        backend = memory_backend()
        compressor = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        history = _history(60)
        first = _event(_compact(mode, compressor, history[:40]))
        second = _event(_compact(mode, compressor, history))
        assert second.cutoff > first.cutoff
        header, own = read_history(backend.read_text(second.file_path))
        assert header == {
            "ars_history": 1,
            "start": first.cutoff,
            "end": second.cutoff,
            "count": second.cutoff - first.cutoff,
            "continues": first.file_path,
            "chain_start": 0,
        }
        assert _dicts(own) == _dicts(history[first.cutoff : second.cutoff])
        lines = backend.read_text(second.file_path).splitlines()[1:]
        assert lines == [
            json.dumps(message_to_dict(m), ensure_ascii=False)
            for m in history[first.cutoff : second.cutoff]
        ]
        assert _dicts(read_archive(backend, second.file_path)) == _dicts(history[: second.cutoff])
        assert second.summary_message.text.endswith(
            f"The full text of those messages is saved at {second.file_path}, "
            f"which continues {first.file_path}."
        )
        assert second.summary_message.metadata["ars_history_continues"] == first.file_path

    @MODES
    def test_the_same_range_again_names_the_same_file_and_writes_nothing(self, mode: str) -> None:
        """Archiving the same messages again writes nothing and names the same file."""
        backend = FailingBackend(fail_prefixes=["never/"])
        compressor = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        history = _history(40)
        first = _event(_compact(mode, compressor, history))
        stored = backend.inner.read_text(first.file_path)
        backend.fail_prefixes = ("outputs/conversation_history/",)  # a write would now fail
        again = _event(_compact(mode, compressor, history))
        assert again.file_path == first.file_path and backend.failed == []
        assert backend.inner.read_text(first.file_path) == stored
        assert "which continues" not in again.summary_message.text

    @MODES
    def test_an_edited_early_message_gets_a_whole_archive(self, mode: str) -> None:
        """When a message the earlier archive holds was edited, nothing is continued:
        the new archive holds every message, the edited one in its new form."""
        backend = memory_backend()
        compressor = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        history = _history(60)
        _event(_compact(mode, compressor, history[:40]))
        edited = [*history[:3], user("an edited question"), *history[4:]]
        event = _event(_compact(mode, compressor, edited))
        header, own = read_history(backend.read_text(event.file_path))
        assert header["start"] == 0 and "continues" not in header
        assert _dicts(own) == _dicts(edited[: event.cutoff])
        assert own[3].content == "an edited question"

    @MODES
    def test_another_thread_or_a_new_process_writes_a_whole_archive(self, mode: str) -> None:
        """Only what this process wrote for the same thread is continued."""
        backend = memory_backend()
        compressor = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        history = _history(60)
        _event(_compact(mode, compressor, history[:40], thread="a"))
        other = _event(_compact(mode, compressor, history, thread="b"))
        assert "continues" not in read_history(backend.read_text(other.file_path))[0]
        restarted = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        fresh = _event(_compact(mode, restarted, history, thread="a"))
        header, own = read_history(backend.read_text(fresh.file_path))
        assert "continues" not in header and _dicts(own) == _dicts(history[: fresh.cutoff])

    @MODES
    def test_a_failed_continuation_is_not_continued_from(self, mode: str) -> None:
        """A continuation whose write failed leaves ``file_path`` unset; the next round
        continues from the last archive that was written."""
        backend = FailingBackend(fail_prefixes=["never/"])
        compressor = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        history = _history(80)
        first = _event(_compact(mode, compressor, history[:40]))
        backend.fail_prefixes = ("outputs/conversation_history/",)
        failed = _event(_compact(mode, compressor, history[:60]))
        assert failed.file_path is None and len(backend.failed) == 1
        backend.fail_prefixes = ("never/",)
        third = _event(_compact(mode, compressor, history))
        header, _ = read_history(backend.inner.read_text(third.file_path))
        assert header["continues"] == first.file_path and header["start"] == first.cutoff
        assert _dicts(read_archive(backend.inner, third.file_path)) == _dicts(
            history[: third.cutoff]
        )


class _AskedBackend:
    """An in-memory backend that counts the ``exists`` questions it is asked; with
    ``follows_state`` its files live in the agent's state (deepagents' ``StateBackend``)."""

    def __init__(self, follows_state: bool) -> None:
        self.inner = memory_backend()
        self.follows_state = follows_state
        self.asked: list[str] = []

    @property
    def writes_follow_state(self) -> bool:
        return self.follows_state

    def write_text(self, path: str, text: str) -> Any:
        return self.inner.write_text(path, text)

    def read_text(self, path: str) -> str:
        return self.inner.read_text(path)

    def exists(self, path: str) -> bool:
        self.asked.append(path)
        return self.inner.exists(path)


class TestChainChecks:
    """How much a continued archive costs the backend as its chain grows."""

    @MODES
    def test_a_backend_that_keeps_its_writes_is_asked_nothing_however_long_the_chain(
        self, mode: str
    ) -> None:
        """Five rounds over a growing history continue one another, each naming the
        one before; the backend is never asked whether a file exists, and the chain
        reads back as the whole history."""
        backend = _AskedBackend(follows_state=False)
        compressor = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        history = _history(140)
        events = [_event(_compact(mode, compressor, history[:n])) for n in (40, 60, 80, 100, 120)]
        for earlier, later in pairwise(events):
            assert read_history(backend.read_text(later.file_path))[0]["continues"] == (
                earlier.file_path
            )
        assert backend.asked == []
        assert _dicts(read_archive(backend, events[-1].file_path)) == _dicts(
            history[: events[-1].cutoff]
        )

    @MODES
    def test_a_backend_whose_files_follow_the_state_has_the_whole_chain_checked(
        self, mode: str
    ) -> None:
        """Where a failed step can drop a file, each round checks every file of the
        chain it continues; one gone, the round writes the whole range again."""
        backend = _AskedBackend(follows_state=True)
        compressor = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        history = _history(140)
        events = [_event(_compact(mode, compressor, history[:n])) for n in (40, 60, 80)]
        paths = [e.file_path for e in events]
        assert backend.asked == [paths[0], paths[1], paths[0]]
        backend.inner.fs.rm(backend.inner._host(paths[0]))  # the step that wrote it failed
        again = _event(_compact(mode, compressor, history[:100]))
        header, own = read_history(backend.read_text(again.file_path))
        assert "continues" not in header and _dicts(own) == _dicts(history[: again.cutoff])


class TestOnLocalDisk:
    def test_a_continuation_is_a_file_of_its_own_next_to_the_first(self, tmp_path: Path) -> None:
        """On a local directory the first archive is untouched by the continuation
        (files are written once), and both are complete JSONL files."""
        backend = FsspecBackend(tmp_path.as_uri())
        compressor = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        history = _history(60)
        first = _event(compressor.compact(history[:40]))
        before = (tmp_path / first.file_path).read_bytes()
        second = _event(compressor.compact(history))
        assert (tmp_path / first.file_path).read_bytes() == before
        on_disk = sorted(p.name for p in (tmp_path / "outputs/conversation_history").iterdir())
        assert on_disk == sorted([Path(first.file_path).name, Path(second.file_path).name])
        assert _dicts(read_archive(backend, second.file_path)) == _dicts(history[: second.cutoff])


class TestHistoryArchive:
    def test_a_continuation_needs_the_same_first_messages(self) -> None:
        """``continuing`` refuses an earlier range that is not a strict prefix of this
        one in the same thread."""
        history = _history(6)
        whole = HistoryArchive.of(history, start=0, thread="t")

        def written(messages: list[Message], thread: str) -> ArchivedRange:
            return HistoryArchive.of(messages, start=0, thread=thread).written(
                ArchivePlan(None, "p")
            )

        assert whole.continuing(written(history[:4], "t")) is not None
        assert whole.continuing(written([history[1], *history[1:4]], "t")) is None
        assert whole.continuing(written(history[:4], "u")) is None
        assert whole.continuing(written(history, "t")) is None

    def test_text_with_the_line_breaks_json_leaves_unescaped_reads_back(self) -> None:
        """JSON escapes ``\\n`` and ``\\r`` but writes U+2028, U+2029, U+0085 as they
        are: a line holding them is still one line, and the archive reads back equal
        (a file with CRLF line ends too)."""
        texts = ["a\u2028b", "c\u2029d", "e\x85f", "g\x1ch\x1di\x1ej", "k\r\nl"]
        history = [user(t) for t in texts]
        write = HistoryArchive.of(history, start=3, thread="t").whole()
        header, back = read_history(write.text)
        assert (header["start"], header["end"], back) == (3, 8, history)
        assert read_history(write.text.replace("\n", "\r\n"))[1] == history


class TestBrokenArchives:
    """``read_archive`` checks what it reads: a malformed file or a broken chain of
    continued files raises ``ArchiveFormatError`` (an ``ArsError``) naming the file,
    never returns a history with messages missing or repeated."""

    @staticmethod
    def _chain(backend: FsspecBackend) -> tuple[Any, Any, list[Message]]:
        compressor = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S"))
        history = _history(60)
        first = _event(compressor.compact(history[:40]))
        second = _event(compressor.compact(history))
        assert read_history(backend.read_text(second.file_path))[0]["continues"] == first.file_path
        return first, second, history

    @staticmethod
    def _rewrite_header(backend: FsspecBackend, path: str, **changes: Any) -> None:
        lines = backend.read_text(path).splitlines()
        header = {**json.loads(lines[0]), **changes}
        backend.write_text(path, "\n".join([json.dumps(header), *lines[1:]]) + "\n")

    def test_a_valid_chain_reads_back_whole(self) -> None:
        backend = memory_backend()
        _, second, history = self._chain(backend)
        assert _dicts(read_archive(backend, second.file_path)) == _dicts(history[: second.cutoff])

    def test_a_file_continuing_itself_is_an_error(self) -> None:
        backend = memory_backend()
        _, second, _ = self._chain(backend)
        self._rewrite_header(backend, second.file_path, continues=second.file_path)
        with pytest.raises(ArchiveFormatError, match="loops back") as info:
            read_archive(backend, second.file_path)
        assert isinstance(info.value, ArsError) and info.value.source == second.file_path

    def test_a_cycle_of_two_files_is_an_error(self) -> None:
        backend = memory_backend()
        first, second, _ = self._chain(backend)
        self._rewrite_header(backend, first.file_path, continues=second.file_path)
        with pytest.raises(ArchiveFormatError, match="loops back"):
            read_archive(backend, second.file_path)

    def test_a_gap_between_the_files_is_an_error(self) -> None:
        backend = memory_backend()
        first, second, _ = self._chain(backend)
        lines = backend.read_text(first.file_path).splitlines()
        header = json.loads(lines[0])
        header.update(end=header["end"] - 1, count=header["count"] - 1)  # drop the last message
        backend.write_text(first.file_path, "\n".join([json.dumps(header), *lines[1:-1]]) + "\n")
        with pytest.raises(ArchiveFormatError, match="gap"):
            read_archive(backend, second.file_path)

    def test_a_chain_not_reaching_its_start_is_an_error(self) -> None:
        backend = memory_backend()
        _, second, _ = self._chain(backend)
        self._rewrite_header(backend, second.file_path, chain_start=3)
        with pytest.raises(ArchiveFormatError, match="starts at message 0, not at 3"):
            read_archive(backend, second.file_path)

    def test_a_header_count_that_disagrees_is_an_error(self) -> None:
        backend = memory_backend()
        first, second, _ = self._chain(backend)
        header = read_history(backend.read_text(first.file_path))[0]
        self._rewrite_header(backend, first.file_path, count=header["count"] + 1)
        with pytest.raises(ArchiveFormatError, match="does not hold its count"):
            read_archive(backend, second.file_path)
        self._rewrite_header(
            backend, first.file_path, count=header["count"] + 1, end=header["end"] + 1
        )
        with pytest.raises(ArchiveFormatError, match="file holds"):
            read_archive(backend, first.file_path)

    @pytest.mark.parametrize(
        ("text", "match"),
        [
            ("", "empty"),
            ("\n\n", "empty"),
            ("[1, 2]\n", "JSON list, not an object"),
            ('"header"\n', "JSON str, not an object"),
            ("{not json\n", "line 1 is not JSON"),
            ('{"ars_history": 1, "start": "0", "end": 1, "count": 1}\n{}\n', "'start'"),
            ('{"ars_history": 1, "start": 0, "end": 1, "count": 1}\n[]\n', "line 2"),
            (
                '{"ars_history": 1, "start": 0, "end": 1, "count": 1, "continues": 7}\n'
                '{"role": "user", "content": "x"}\n',
                "'continues'",
            ),
        ],
    )
    def test_a_malformed_file_is_an_error(self, text: str, match: str) -> None:
        backend = memory_backend()
        path = "outputs/conversation_history/history-000000-000001-broken.jsonl"
        backend.write_text(path, text)
        with pytest.raises(ArchiveFormatError, match=match) as info:
            read_archive(backend, path)
        assert info.value.source == path


def _reference_line(message: Message) -> bytes:
    """An archive line as the JSON encoder writes the whole message at once."""
    return json.dumps(message_to_dict(message), ensure_ascii=False, default=str).encode(
        "utf-8", "surrogatepass"
    )


#: texts that need every kind of escape: quotes, backslashes (one before a ``u``),
#: control characters, NUL, DEL, lone surrogates, text beyond ASCII and beyond the BMP
HOSTILE_TEXTS = (
    'plain "quoted" \\ back\\slash \\u0041 not an escape',
    "nul\x00 bell\x07 esc\x1b[31m red\x1b[0m tab\t cr\r lf\n ff\x0c bs\x08 vt\x0b",
    "del\x7f at the end of ASCII\x7f",
    "lone \ud800 high and \udfff low surrogates",
    "café, 中文, emoji \U0001f600, line sep \u2028 and bom \ufeff",
    "",
)


class _Opaque:
    def __str__(self) -> str:
        return "opaque\x7f \u00e9"


def _hostile_messages() -> list[Message]:
    from ars_core.messages import ContentPart, ToolCall

    out: list[Message] = []
    for i, text in enumerate(HOSTILE_TEXTS):
        call = ToolCall(
            id=f"c{i}\x7f",
            name="bash",
            args={"command": text, "n": i, "ratio": 0.1 * i, "flags": [True, None, text]},
        )
        out += [
            Message(role="user", content=text, id=f"u{i}", metadata={"k\u00e9": text}),
            Message(role="assistant", content=text, name=text, tool_calls=(call,)),
            Message(role="tool", content=text, tool_call_id=call.id, name="bash"),
        ]
    blocks = (  # Anthropic content blocks: text, thinking, tool use, a tool result
        ContentPart(type="thinking", data={"thinking": HOSTILE_TEXTS[3], "signature": "s\x00"}),
        ContentPart(type="text", text=HOSTILE_TEXTS[4]),
        ContentPart(type="tool_use", data={"id": "tu1", "name": "edit", "input": {"p": "a\x7f"}}),
        ContentPart(type="tool_result", text=HOSTILE_TEXTS[1], data={"tool_use_id": "tu1"}),
    )
    out.append(Message(role="assistant", content=blocks, metadata={"raw": {"x": [1.5, 2]}}))
    out.append(Message(role="user", content="obj", metadata={"o": _Opaque(), "t": (1, "\x7f")}))
    return out


class TestArchiveLines:
    def test_a_line_is_the_json_encoders_text_of_the_message(self) -> None:
        """Each archive line has the bytes (and digest) of the message's JSON written at
        once by the encoder (non-ASCII text kept as UTF-8, lone surrogates passed
        through), on texts needing every escape, content blocks, tool calls and
        metadata; read back, the lines give the same messages."""
        import hashlib

        from ars_core.archive import archive_line

        messages = _hostile_messages()
        fields = {key for m in messages for key in message_to_dict(m)}
        assert fields == {f.name for f in attrs_fields(Message) if f.init}  # every field
        lines = [archive_line(m) for m in messages]
        assert [line for line, _ in lines] == [_reference_line(m) for m in messages]
        assert [d for _, d in lines] == [hashlib.sha256(line).digest() for line, _ in lines]
        write = HistoryArchive.of(messages, start=0).whole()
        _, back = read_history(write.text)
        assert back[:-1] == messages[:-1]  # the opaque object is archived as its text
        assert back[-1].metadata == {"o": "opaque\x7f \u00e9", "t": [1, "\x7f"]}

    @settings(max_examples=200, deadline=None)
    @given(
        text=st.text(st.characters(blacklist_categories=())),
        value=st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(st.characters(codec=None)),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=3), inner, max_size=3)
            ),
            max_leaves=6,
        ),
    )
    def test_any_text_and_arguments_give_the_encoders_line(self, text: str, value: Any) -> None:
        """Any text (surrogates and controls included) as content, tool-call argument
        and metadata: the line is the encoder's text of the whole message."""
        from ars_core.archive import archive_line
        from ars_core.messages import ToolCall

        call = ToolCall(id=text, name="t", args={"a": text, "v": value})
        for m in (
            Message(role="assistant", content=text, tool_calls=(call,), metadata={text: value}),
            Message(role="tool", content=text, tool_call_id=text, name=text, id=text),
        ):
            assert archive_line(m)[0] == _reference_line(m)

    def test_string_arguments_and_empty_mappings_give_the_encoders_line(self) -> None:
        """Tool-call arguments of strings only and metadata of empty mappings (a dict
        subclass too, as an adapter keeps its fields in), on texts needing every
        escape, as keys and values: the line is the encoder's text of the message."""
        from ars_core.archive import archive_line
        from ars_core.messages import ToolCall

        class Fields(dict[str, Any]):
            pass

        for text in HOSTILE_TEXTS:
            call = ToolCall(id="c1", name="bash", args={"command": text, text or "k": "v"})
            metadata = {"lc": Fields(), text: {}, "m": Fields(k=text)}
            for meta in (metadata, {"lc": Fields()}, {text: text}):
                m = Message(role="assistant", content=text, tool_calls=(call,), metadata=meta)
                assert archive_line(m)[0] == _reference_line(m)
