"""SparseIndex: where something is in a history, kept as the history grows."""

from __future__ import annotations

import pytest

from ars_core import Message
from ars_core.prefix import SparseIndex

from .helpers import assistant, user

pytestmark = pytest.mark.spec("R51")


class Reader:
    """Marks user messages (their text); records every message it is asked about."""

    def __init__(self) -> None:
        self.read: list[Message] = []

    def __call__(self, m: Message) -> str:
        self.read.append(m)
        return m.text if m.role == "user" else ""


def _history(n: int) -> list[Message]:
    return [user(f"q{i}") if i % 3 == 0 else assistant(f"a{i}") for i in range(n)]


class TestSparseIndex:
    def test_a_grown_history_reads_only_what_was_appended(self) -> None:
        """The positions and values are those of a full reading; the longer history
        costs one read per appended message, and a prefix costs none."""
        reader = Reader()
        index = SparseIndex(reader)
        history = _history(30)
        assert index(history[:20]) == ([0, 3, 6, 9, 12, 15, 18], [f"q{i}" for i in range(0, 20, 3)])
        assert reader.read == history[:20]
        reader.read.clear()
        assert index(history) == (list(range(0, 30, 3)), [f"q{i}" for i in range(0, 30, 3)])
        assert reader.read == history[20:]
        reader.read.clear()
        assert index(history[:10]) == ([0, 3, 6, 9], ["q0", "q3", "q6", "q9"])
        assert reader.read == []

    def test_an_edited_history_is_read_whole_again(self) -> None:
        """A message replaced anywhere (a new object) makes the history a new one."""
        reader = Reader()
        index = SparseIndex(reader)
        history = _history(30)
        index(history)
        edited = [*history[:14], user("edited"), *history[15:]]
        reader.read.clear()
        positions, values = index(edited)
        assert reader.read == edited
        assert positions == [0, 3, 6, 9, 12, 14, 15, 18, 21, 24, 27]
        assert values[5] == "edited"

    def test_histories_sharing_their_first_message_are_each_remembered(self) -> None:
        """A history and its view (the same first message, other objects later) are
        both kept: alternating between them reads nothing again."""
        reader = Reader()
        index = SparseIndex(reader)
        history = _history(30)
        view = [*history[:5], assistant("a5 in the view"), *history[6:]]
        index(history)
        index(view)
        reader.read.clear()
        assert index([*history, user("q30")])[1][-1] == "q30"
        assert index([*view, user("q30 in the view")])[1][-1] == "q30 in the view"
        assert len(reader.read) == 2


class TestRemember:
    def test_a_reading_made_elsewhere_is_kept_and_extended(self) -> None:
        """A full reading the caller made is kept: the index then knows the history (and
        its prefixes and extensions, not an edited one), answers it with that reading
        without reading anything, and reads only what is appended to it."""
        reader = Reader()
        index = SparseIndex(reader)
        history = _history(30)
        edited = [*history[:14], user("edited"), *history[15:]]
        assert not index.knows(history)
        positions = list(range(0, 30, 3))
        index.remember(history, positions, [f"q{i}" for i in positions])
        assert index.knows(history) and index.knows(history[:10])
        assert index.knows([*history, user("q30")]) and not index.knows(edited)
        assert index(history) == (positions, [f"q{i}" for i in positions])
        assert reader.read == []
        grown = [*history, user("q30"), assistant("a31")]
        assert index(grown)[1][-2:] == ["q27", "q30"]
        assert reader.read == grown[30:]
