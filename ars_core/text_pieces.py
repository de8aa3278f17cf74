"""Where a long text may be cut for counting: pieces an exact (BPE) count can
encode one at a time and add up, because the cut falls where the tokenizer's
pre-tokenizer splits anyway."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence

from .recent import Recent

__all__ = [
    "TIKTOKEN_CHUNK",
    "FramedCounts",
    "collapsed",
    "collapsed_framed",
    "frame_cuts",
    "holds",
    "piece_end",
]

#: characters tiktoken encodes at a time
TIKTOKEN_CHUNK = 1 << 16


def piece_end(text: str, start: int, limit: int) -> int:
    """Where to cut ``text[start:]`` at or before ``limit`` without splitting a BPE
    pre-token: right after a line break followed by a letter, before the space
    between two letters (`` word``), or between punctuation and a digit; at
    ``limit`` only when none is found."""
    if limit >= len(text):
        return len(text)
    cut = limit
    for _ in range(64):
        brk = text.rfind("\n", start + 1, cut)
        if brk < 0:
            break
        nxt, prev = text[brk + 1], text[brk - 1]
        if nxt.isascii() and nxt.isalpha() and prev not in " \t\r\n":
            return brk + 1
        cut = brk
    cut = limit
    for _ in range(256):
        space = text.rfind(" ", start + 1, cut)
        if space < 0:
            break
        nxt, prev = text[space + 1], text[space - 1]
        if nxt.isascii() and nxt.isalpha() and prev.isascii() and prev.isalpha():
            return space
        cut = space
    for end in range(limit, max(start + 1, limit - 4096), -1):  # "...,|123": a digit run starts
        nxt, prev = text[end], text[end - 1]
        if nxt.isascii() and nxt.isdigit() and prev in ",;:=()[]{}<>|+*":
            return end
    return limit


#: texts from this many characters on are counted by :class:`FramedCounts`
FRAMED_MIN = 4096
#: how far into a text its first line may end, and how far from its end its last begins
FRAME_REACH = 1024
#: middles whose counts :class:`FramedCounts` keeps
FRAMED_SLOTS = 8


def _opens(c: str) -> bool:
    """Whether a pre-token of ``cl100k_base`` and ``o200k_base`` starts at ``c`` after
    a line break: only whitespace (and, in ``o200k_base``, a ``/``) continues a
    pre-token past a line break, and one ending in line breaks ends the same way
    whether or not the text goes on."""
    return not c.isspace() and c != "/"


def frame_cuts(text: str) -> tuple[int, int] | None:
    """Where ``text``'s first line (with the line breaks after it) ends and its last
    line begins, when both are cuts a BPE count can add up across (see
    :func:`_opens`) and something lies between them; else None."""
    n = len(text)
    head = text.find("\n", 0, FRAME_REACH)
    tail = text.rfind("\n", n - FRAME_REACH) + 1
    if head < 0 or tail <= 0 or tail >= n:
        return None
    while head < n and text[head] == "\n":
        head += 1
    if head >= tail or not (_opens(text[head]) and _opens(text[tail])):
        return None
    return head, tail


class FramedCounts:
    """Counts of long texts as their first line, the middle and their last line
    (:func:`frame_cuts`; ``encode`` a BPE encoding's ``encode_ordinary``), the
    middles' counts kept for the next text with the same middle: a summary message
    whose header and archive line change from round to round while the task and
    summary between them do not is counted from those two lines."""

    def __init__(self, encode: Callable[[str], Sequence[int]]) -> None:
        self._encode = encode
        self._middles: dict[str, int] = {}
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        """The tokens of ``text`` (exactly ``len(encode(text))``)."""
        cuts = frame_cuts(text) if len(text) >= FRAMED_MIN else None
        if cuts is None:
            return len(self._encode(text))
        head, tail = cuts
        middle = text[head:tail]
        kept = self._middles.get(middle)
        if kept is None:
            kept = len(self._encode(middle))
            with self._lock:
                if len(self._middles) >= FRAMED_SLOTS:
                    self._middles.pop(next(iter(self._middles)))
                self._middles[middle] = kept
        return len(self._encode(text[:head])) + kept + len(self._encode(text[tail:]))


def collapsed(text: str) -> str:
    """``text``'s words joined by single spaces (its whitespace collapsed)."""
    return " ".join(text.split())


def collapsed_framed(text: str, middles: Recent[str]) -> str:
    """:func:`collapsed` of ``text``; a long text's middle (between its first and last
    line, :func:`frame_cuts`) collapsed once while ``middles`` keeps it: a summary
    message whose header and archive line change from round to round while the task
    and summary between them do not is collapsed from those two lines. The same
    string: each cut follows a line break, so it splits no word."""
    cuts = frame_cuts(text) if len(text) >= FRAMED_MIN else None
    if cuts is None:
        return collapsed(text)
    head, tail = cuts
    middle = text[head:tail]
    pieces = (
        collapsed(text[:head]),
        middles.get(middle, functools.partial(collapsed, middle)),
        collapsed(text[tail:]),
    )
    return " ".join(piece for piece in pieces if piece)


#: parts from this many characters on are looked for by their first LONG_PART // 2
LONG_PART = 100
#: places of a long part's first characters :func:`holds` compares before a plain search
HOLDS_TRIES = 64


def holds(text: str, part: str) -> bool:
    """``part in text``. A long ``part`` (a request, a heredoc command) is looked for by
    its first characters, each place found compared whole: CPython's search for a
    part of 100 characters or more first prepares a table as long as the part (about
    as costly as reading the text), a short one's does not. Many places of those first
    characters: a plain search."""
    if len(part) < LONG_PART:
        return part in text
    first = part[: LONG_PART // 2]
    at = text.find(first)
    for _ in range(HOLDS_TRIES):
        if at < 0:
            return False
        if text.startswith(part, at):
            return True
        at = text.find(first, at + 1)
    return part in text
