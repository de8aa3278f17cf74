"""Fitting a preview (the head of a text, or its head and tail) to a token budget.

With an estimator whose counts are a tiktoken encoding's (:class:`TiktokenEncoding`,
the exact BPE one) the text is encoded once for its head and once for its end, the
cut is placed on where those tokens end and confirmed by one count; any other
estimator is searched by counts (:func:`_longest`, a few counts per fit).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import cast

from ._tiktoken_offline import SUPPORTED_ENCODINGS, token_ends
from .capabilities import TiktokenEncoding, has
from .estimate import MESSAGE_OVERHEAD, Estimator

__all__ = [
    "CHARS_PER_TOKEN",
    "CONFIRMS",
    "FIT_SLACK",
    "GAP_LINE",
    "fit_head_and_tail",
    "fit_preview",
]

#: the line between a preview's head and tail (with the characters left out)
GAP_LINE = "\n[... {} characters not shown ...]\n"


def _longest(n: int, size: Callable[[int], int], room: int, first: int) -> int:
    """The largest ``m`` in ``[0, n]`` with ``size(m) <= room``, to within
    :data:`FIT_SLACK` of ``n`` (``size`` grows with ``m``, about linearly). Each
    guess is where the boundary should be by proportion (the characters per
    token across the range), set just past it from the side last moved so the
    range closes from both ends; every third guess halves the range, so a fit
    takes a few counts, not one per halving. ``first`` is ``size(0)``, which
    must fit (the caller has checked it)."""
    lo, c_lo = 0, first
    hi, c_hi = n, size(n)
    if c_hi <= room:
        return n
    slack, step, fitted = max(8, int(n * FIT_SLACK)), 0, True
    while hi - lo > slack:
        per_token = (hi - lo) / max(1, c_hi - c_lo)
        if step % 3 == 2:
            mid = (lo + hi) // 2
        elif fitted:  # from below: just past where the room runs out
            mid = lo + int((room - c_lo) * per_token) + slack // 2
        else:  # from above: just short of it
            mid = hi - int((c_hi - room) * per_token) - slack // 2
        mid = min(max(mid, lo + 1), hi - 1)
        c = size(mid)
        fitted = c <= room
        if fitted:
            lo, c_lo = mid, c
        else:
            hi, c_hi = mid, c
        step += 1
    return lo


#: how much shorter than the longest possible a fitted preview may be (a share of
#: the text searched): a few tokens, for a handful of counts instead of a dozen
FIT_SLACK = 1 / 256


def fit_preview(
    estimator: Estimator, text: str, budget: int, frame: str, *, overhead: int = MESSAGE_OVERHEAD
) -> str:
    """A head of ``text`` as long as fits (within :data:`FIT_SLACK`) such that
    ``frame + head`` (+ ``overhead``) fits ``budget``."""
    room = budget - overhead
    first = estimator.count_text(frame)
    if first >= room:
        return ""
    ends = _head_ends(estimator, text, room, first)
    if ends is None:
        window = min(len(text), room * 8)
        count = estimator.count_text
        return text[: _longest(window, lambda m: count(frame + text[:m]), room, first)]
    return text[: _fitted(estimator, lambda k: _head(ends, k), frame, text, room, first)]


#: characters per token a preview's text is first encoded for (more when that falls short)
CHARS_PER_TOKEN = 5


def _head_ends(estimator: Estimator, text: str, room: int, first: int) -> Sequence[int] | None:
    """The token ends of a head of ``text`` holding the ``room - first`` tokens a
    preview has (or the whole window a preview searches, ``room * 8`` characters), from
    one encoding pass; ``None`` for an estimator that is not a :class:`TiktokenEncoding`."""
    offsets = _offsets(estimator)
    if offsets is None:
        return None
    tokens, window = room - first, min(len(text), room * 8)
    # enough characters for the room at a few per token, more when that falls short
    size = min(window, tokens * CHARS_PER_TOKEN + 64)
    ends = offsets(text[:size])
    while len(ends) < tokens and size < window:
        size = min(window, size * 2)
        ends = offsets(text[:size])
    return ends


def _offsets(estimator: Estimator) -> Callable[[str], list[int]] | None:
    """Where each token of a text ends (:func:`~ars_core._tiktoken_offline.token_ends`)
    in the encoding of a :class:`TiktokenEncoding` estimator; ``None`` for any other."""
    if not has(estimator, TiktokenEncoding):
        return None
    name = cast(TiktokenEncoding, estimator).encoding_name
    return (lambda text: token_ends(name, text)) if name in SUPPORTED_ENCODINGS else None


def _head(ends: Sequence[int], k: int) -> int:
    """The characters the first ``k`` tokens hold (``ends`` as ``token_ends`` gives them)."""
    return ends[min(k, len(ends)) - 1] if k > 0 and ends else 0


#: confirming counts a preview fitted on token offsets may take before the fit falls
#: back to a search by counts (the offsets are off by a token or two at the seams)
CONFIRMS = 4


def _fitted(
    estimator: Estimator,
    length: Callable[[int], int],
    frame: str,
    text: str,
    room: int,
    first: int,
    render: Callable[[int], str] | None = None,
    counts: dict[str, int] | None = None,
) -> int:
    """The longest ``m`` such that ``frame + render(m)`` (a head of ``text`` by default)
    fits ``room``, where ``length(k)`` is the length that about ``k`` tokens of text
    hold: the guess is ``length(room - first)``, confirmed by one count and moved back
    by what it overshot (BPE merges at the seams); after :data:`CONFIRMS` counts, a
    search by counts below the last guess. A confirmed fit's count is kept in
    ``counts`` (by its text)."""
    show = render if render is not None else (lambda m: text[:m])
    k = room - first
    m = length(k)
    for _ in range(CONFIRMS):
        framed = frame + show(m)
        tokens = estimator.count_text(framed)
        over = tokens - room
        if over <= 0:
            if counts is not None:
                counts[framed] = tokens
            return m
        k -= over
        m = min(m - 1, length(k))
        if m <= 0:
            return 0
    return _longest(m, lambda n: estimator.count_text(frame + show(n)), room, first)


def fit_head_and_tail(
    estimator: Estimator,
    text: str,
    budget: int,
    frame: str,
    *,
    overhead: int = MESSAGE_OVERHEAD,
    counts: dict[str, int] | None = None,
) -> str:
    """Head and tail of ``text`` (two thirds head, one third tail, a gap line
    between) such that ``frame`` + preview (+ ``overhead``) fits ``budget``:
    the end of a test or build log, where the error usually is, stays in view.
    A budget too small for both gets the head alone. ``counts`` receives the count
    of ``frame`` + preview when the fit counted it (keyed by that text)."""
    room = budget - overhead
    first = estimator.count_text(frame)
    if first >= room:
        return ""
    ends = _head_ends(estimator, text, room, first)
    count = estimator.count_text
    if ends is None:  # the head alone, by a search by counts
        window = min(len(text), room * 8)
        longest = _longest(window, lambda m: count(frame + text[:m]), room, first)
    else:  # where the head alone would end; counted only if it is what is sent
        longest = _head(ends, room - first)
    confirmed = ends is None

    def head_only() -> str:
        if confirmed:
            return text[:longest]
        assert ends is not None
        fit = _fitted(estimator, lambda k: _head(ends, k), frame, text, room, first, None, counts)
        return text[:fit]

    if longest >= len(text) or not longest:
        return head_only()

    def preview(n: int) -> str:
        head = n * 2 // 3
        tail = n - head
        gap = GAP_LINE.format(len(text) - n)
        return text[:head] + gap + (text[-tail:] if tail else "")

    framed = count(frame + preview(0))  # the frame and the gap line
    if framed > room:
        return head_only()
    if ends is not None:
        offsets = _offsets(estimator)
        assert offsets is not None
        length = _head_and_tail_length(offsets, text, longest, ends)
        lo = _fitted(estimator, length, frame, text, room, framed, preview, counts)
    else:
        lo = _longest(longest, lambda m: count(frame + preview(m)), room, framed)
    # when the gap line would eat most of a small budget, the head alone says more
    return preview(lo) if lo * 2 >= longest else head_only()


def _head_and_tail_length(
    offsets: Callable[[str], list[int]], text: str, longest: int, head_ends: Sequence[int]
) -> Callable[[int], int]:
    """``length(k)`` for a head-and-tail preview of ``text`` (at most ``longest``
    characters): the longest ``n`` whose head (two thirds) and tail (one third) hold
    at most ``k`` tokens between them, on the token ends of the text's head
    (``head_ends``) and of one pass over its end."""
    size = longest - longest * 2 // 3 + 16  # the most a tail holds, and a few more
    tail = text[len(text) - size :]
    # where the tail's tokens start, counted back from the text's end (ascending)
    tail_starts = [size - e for e in reversed([0, *offsets(tail)[:-1]])]

    def tokens(n: int) -> int:  # the tokens that hold the head and the tail of n characters
        head, back = n * 2 // 3, n - n * 2 // 3
        held = bisect.bisect_left(head_ends, head) + 1 if head else 0
        return held + (bisect.bisect_left(tail_starts, back) + 1 if back else 0)

    def length(k: int) -> int:
        lo, hi = 0, longest
        while lo < hi:  # the largest n with tokens(n) <= k
            mid = (lo + hi + 1) // 2
            if tokens(mid) <= k:
                lo = mid
            else:
                hi = mid - 1
        return lo

    return length
