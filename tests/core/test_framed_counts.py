"""A long text is counted as its first line, the middle and its last line, the
middle's count kept: the count stays exactly tiktoken's, and a summary message whose
header and archive line change is counted from those lines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ars_core import TiktokenEstimator
from ars_core._tiktoken_offline import load_encoding
from ars_core.text_pieces import FRAMED_MIN, FramedCounts, frame_cuts

pytestmark = pytest.mark.spec("R3")

ENCODINGS = ("o200k_base", "cl100k_base")
# what sits around a line break: the characters a pre-token may or may not carry across
SEAM = st.lists(
    st.sampled_from([*"ab Z9/\n\t\r.,:)(⟦é漢-#<>'\" \u00a0\u2028", "'s", "//", "\r\n"]), max_size=12
).map("".join)
BODY = "⟦ARS⟧ Task, user request 1 of 1\nFix the parser: it fails on `a/b`.\n" * 80


@settings(max_examples=150, deadline=None)
@given(head=SEAM, left=SEAM, right=SEAM, tail=SEAM, name=st.sampled_from(ENCODINGS))
def test_a_framed_count_is_exactly_tiktokens(
    head: str, left: str, right: str, tail: str, name: str
) -> None:
    text = f"Summary {head}\n{left}{BODY}{right}\n{tail}"
    assert TiktokenEstimator(name).count_text(text) == len(
        load_encoding(name).encode_ordinary(text)
    )


def test_a_summary_message_with_a_new_header_and_archive_line_is_counted_from_them() -> None:
    encoding = load_encoding("o200k_base")
    encoded: list[str] = []

    def encode(text: str) -> list[int]:
        encoded.append(text)
        return encoding.encode_ordinary(text)

    counts = FramedCounts(encode)

    def message(cutoff: int, path: str) -> str:
        return (
            f"Summary of the earlier conversation (messages 1-{cutoff}):\n\n{BODY}\n"
            f"⟦ARS⟧ end of summary\n\nThe full text is saved at {path}."
        )

    first, second = message(1000, "history-1.jsonl"), message(1002, "history-2.jsonl")
    assert len(first) >= FRAMED_MIN and frame_cuts(second) is not None
    assert counts.count(first) == len(encoding.encode_ordinary(first))
    encoded.clear()
    assert counts.count(second) == len(encoding.encode_ordinary(second))
    assert max(map(len, encoded)) < 100  # only the changed first and last lines


@pytest.mark.parametrize("seam", ["\n/", "\n ", "\n\n\n\t"])
def test_no_cut_where_a_pre_token_may_go_on_past_the_line_break(seam: str) -> None:
    assert frame_cuts(f"header\n{BODY}The end.") is not None
    assert frame_cuts(f"header{seam}{BODY}The end.") is None


# whitespace of every kind around and inside the words of a long text
SPACES = st.lists(st.sampled_from([" ", "\n", "\t", "\r\n", "\u00a0", "\u2028", "  ", "\n\n"]))
WORDS = st.lists(st.sampled_from(["a", "Z9", "⟦ARS⟧", "é漢", "x/y", ".", "'s", "-"]))


@settings(max_examples=200, deadline=None)
@given(head=SPACES, words=WORDS, tail=SPACES, pad=st.integers(0, 3))
def test_a_text_collapsed_by_its_frame_is_the_text_collapsed(
    head: list[str], words: list[str], tail: list[str], pad: int
) -> None:
    """A long text's whitespace collapsed as its first line, its middle (kept) and its
    last line is the whole text's: each cut follows a line break."""
    from ars_core.recent import Recent
    from ars_core.text_pieces import collapsed, collapsed_framed

    seam = "".join(head) + " ".join(words) + "".join(tail)
    text = f"Summary{seam}\n" + f"{seam}{BODY}{seam}" * (1 + pad) + f"\n{seam}end{seam}"
    middles: Recent[str] = Recent(2)
    assert collapsed_framed(text, middles) == collapsed(text) == " ".join(text.split())
    assert collapsed_framed(text, middles) == collapsed(text)  # its middle kept now


def test_a_summary_message_with_a_new_header_and_archive_line_is_collapsed_from_them() -> None:
    """The middle of a summary message read again under a new header and archive line
    is not split again: only those two lines are."""
    from ars_core import text_pieces
    from ars_core.recent import Recent

    split: list[int] = []
    real = text_pieces.collapsed

    def collapsed(text: str) -> str:
        split.append(len(text))
        return real(text)

    def message(cutoff: int, path: str) -> str:
        return (
            f"Summary of the earlier conversation (messages 1-{cutoff}):\n\n{BODY}\n"
            f"⟦ARS⟧ end of summary\n\nThe full text is saved at {path}."
        )

    middles: Recent[str] = Recent(2)
    first, second = message(1000, "history-1.jsonl"), message(1002, "history-2.jsonl")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_pieces, "collapsed", collapsed)
        assert text_pieces.collapsed_framed(first, middles) == " ".join(first.split())
        assert max(split) > len(BODY)
        split.clear()
        assert text_pieces.collapsed_framed(second, middles) == " ".join(second.split())
    assert split and max(split) < 100  # only the changed first and last lines


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(["ab", "a", "b", " ", "⟦", "abab" * 30]), max_size=80),
    start=st.integers(0, 400),
    length=st.integers(0, 300),
    change=st.booleans(),
)
def test_a_text_holds_a_part_exactly_when_in_finds_it(
    pieces: list[str], start: int, length: int, change: bool
) -> None:
    """Long parts (looked for by their first characters) and short ones: the answer
    is ``part in text``, also where the first characters stand in many places."""
    from ars_core.text_pieces import holds

    text = "".join(pieces)
    part = text[start : start + length]
    if change and part:
        part = part[:-1] + ("b" if part[-1] != "b" else "a")
    assert holds(text, part) == (part in text)
    many = "x" * 30 + "y" * 30  # its first characters everywhere before the one full place
    assert holds(f"{many[:-1]}z " * 100 + many, many)
    assert not holds(f"{many[:-1]}z " * 100, many)


def test_a_long_part_is_looked_for_by_its_first_characters() -> None:
    """A part of LONG_PART characters or more is not searched for whole (CPython's
    search prepares a table as long as it): found, or not, from its first characters."""
    from ars_core.text_pieces import LONG_PART, holds

    searched: list[str] = []

    class Text(str):
        def __contains__(self, part: object) -> bool:
            searched.append(str(part))
            return str.__contains__(self, part)

    request = " ".join(f"word{i}" for i in range(LONG_PART))
    text = Text(f"summary: {request} then more")
    assert holds(text, request)
    assert not holds(text, request + " absent")
    assert not holds(text, "absent " + request)
    assert searched == []
    assert holds(text, "then more") and searched == ["then more"]  # a short part: in
