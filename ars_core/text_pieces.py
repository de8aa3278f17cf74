"""Where a long text may be cut for counting: pieces an exact (BPE) count can
encode one at a time and add up, because the cut falls where the tokenizer's
pre-tokenizer splits anyway."""

from __future__ import annotations

__all__ = ["TIKTOKEN_CHUNK", "piece_end"]

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
