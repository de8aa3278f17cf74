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
