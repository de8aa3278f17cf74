"""The summary's task section, written by the engine beside what the summarizer wrote.

The task (:func:`~ars_core.retention.task_statement`: the request(s) that set
the work and the newest request, and the task of any earlier summary found in
the history) goes into the summary message verbatim, one ``Task`` section per
request (:func:`task_sections`); when it does not fit its room, the short
requests stay whole and each long one keeps its head and tail around a marker
saying how much was left out and where the whole is, so neither the first
request nor the newest is ever dropped. The summarizer is told the task is
kept beside its summary and writes only the rest (:func:`~ars_core.summary_text.summary_body`
joins the two); it is never asked to write the task out again, round after round.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from . import memo
from .estimate import Estimator
from .l2 import CheckedSummary, validate_summary, warn_cut
from .memo import estimator_key
from .messages import Message
from .recent import Recent
from .retention import is_earlier_summary, request_texts
from .summary_text import (
    MIN_REQUEST_CHARS,
    REQUEST_ELIDED,
    SECTION_MARK,
    SHORTENED_TEXT,
    SUMMARY_HEADER,
    TEXT_LEFT_OUT,
    end_mark,
    fair_shares,
    read_earlier,
    section,
    share_chars,
    shorten_text,
    summary_body,
)

__all__ = [
    "TINY_REQUEST_CHARS",
    "TaskSection",
    "earlier_task",
    "fit_text",
    "fitted_summary",
    "summarizer_limit",
    "summary_frame",
    "summary_task",
    "task_header",
    "task_requests",
    "task_sections",
    "whole_task_tokens",
]


def fit_text(
    est: Estimator,
    text: str,
    share: int,
    size: int,
    what: str = SHORTENED_TEXT,
    least: int = MIN_REQUEST_CHARS,
) -> str:
    """Head and tail of ``text`` (``size`` tokens) within ``share`` tokens; the
    marker in the middle says how many characters (``what``) were left out. At
    least ``least`` characters of it are kept."""
    chars = max(least, share_chars(text, share, size, len(what)))
    short = shorten_text(text, chars, what)
    for _ in range(4):  # the character model is close; correct it by what is left over
        over = est.count_text(short) - share
        if over <= 0 or chars <= least:
            break
        chars = max(least, chars - over * len(text) // max(size, 1) - 8)
        short = shorten_text(text, chars, what)
    return short


def task_header(index: int, total: int, sent: int = 1) -> str:
    """The header of the ``index``-th (from 0) of ``total`` task sections."""
    header = "Task" if total == 1 else f"Task, user request {index + 1} of {total}"
    return header + (f", sent {sent} times" if sent > 1 else "")


def task_sections(requests: Mapping[str, int], room: int, est: Estimator) -> list[str]:
    """One ``Task`` section per request (``requests``: text -> times sent), whole
    while they fit ``room`` tokens (their headers, and the blank line after each,
    included); otherwise the small ones whole and each large one its head and tail
    (a fair share each), with a marker saying how much was left out and that the
    whole request is in the conversation history file. When even that does not fit
    (a tiny room), each request keeps what its share holds beside a short marker,
    at least :data:`TINY_REQUEST_CHARS` of head and tail: a room too small for
    that (some 30 tokens a request, its header included) is exceeded, no request
    is dropped."""
    texts = list(requests)
    headers = [task_header(i, len(texts), requests[t]) for i, t in enumerate(texts)]
    if whole_task_tokens(requests, est) <= room:  # as the budget measures it
        return [section(h, t) for h, t in zip(headers, texts, strict=True)]
    sizes = [est.count_text(t) for t in texts]
    text_room = room - _frame_tokens(headers, est)
    for what, least in ((REQUEST_ELIDED, MIN_REQUEST_CHARS), (TEXT_LEFT_OUT, TINY_REQUEST_CHARS)):
        budget = text_room
        for _ in range(4):  # correct the shares by what the rendered sections are over
            shares = fair_shares(sizes, max(0, budget))
            out = _sections(headers, texts, sizes, shares, est, what, least)
            over = _tokens(out, est) - room
            if over <= 0:
                return out
            budget -= over
    return out  # the smallest form, over a room too small for it: never dropped


def _sections(
    headers: Sequence[str],
    texts: Sequence[str],
    sizes: Sequence[int],
    shares: Sequence[int],
    est: Estimator,
    what: str,
    least: int,
) -> list[str]:
    out = []
    for header, text, size, share in zip(headers, texts, sizes, shares, strict=True):
        if share < size:  # never dropped: the head and tail, and where the whole is
            short = fit_text(est, text, share, size, what, least)
            text = short if est.count_text(short) < size else text  # a marker as long: whole
        out.append(section(header, text))
    return out


def _frame_tokens(headers: Sequence[str], est: Estimator) -> int:
    """What the task sections take beside their texts: each header line and the
    blank line that follows each section."""
    return _counted(est, "".join(f"{SECTION_MARK} {h}\n\n\n" for h in headers))


def _tokens(sections: Sequence[str], est: Estimator) -> int:
    """The tokens ``sections`` take in a summary message (the blank line after each)."""
    return est.count_text("\n\n".join(sections) + "\n\n") if sections else 0


#: fewest characters of head and tail a request keeps in a room too small for more
TINY_REQUEST_CHARS = 24


@attrs.frozen
class TaskSection:
    """The task sections of a summary message, the tokens they take, and whether
    that is within the task's room (``False``: a room too small for the smallest
    form of the requests, see :func:`task_sections`)."""

    sections: tuple[str, ...] = ()
    tokens: int = 0
    fits: bool = True


def task_requests(history: Sequence[Message], task: Sequence[str]) -> dict[str, int]:
    """The requests of the task sections of a summary standing for ``history``:
    the task of any earlier summary in it, then ``task`` (its requests), each
    text once with the times it was sent in ``history``."""
    earlier = [t for tasks in earlier_task(history) for t in tasks]
    texts = list(dict.fromkeys([*earlier, *task]))
    if not texts:
        return {}
    wanted = set(texts)
    sent = Counter(t for t in request_texts(history) if t in wanted)
    return {t: max(1, sent[t]) for t in texts}


def whole_task_tokens(requests: Mapping[str, int], est: Estimator) -> int:
    """The tokens the task sections of ``requests`` (see :func:`task_requests`)
    take whole in a summary message: their texts, their headers and the blank
    line after each. The budget sizes the task's room by this, and
    :func:`summary_task` keeps the requests whole when it fits that room. Each
    request is counted once per estimator (the task is the same round after round
    and can be long)."""
    texts = list(requests)
    if not texts:
        return 0
    whole = memo.current().text_tokens(texts, estimator_key(est), est.count_text)
    headers = [task_header(i, len(texts), requests[t]) for i, t in enumerate(texts)]
    return whole + _frame_tokens(headers, est)


def summary_task(
    history: Sequence[Message], task: Sequence[str], room: int, est: Estimator
) -> TaskSection:
    """The task sections the engine writes for a round whose summary stands for
    ``history`` (the state up to the cutoff): the task of any earlier summary in
    it, then ``task`` (its requests), each with the times it was sent, within
    ``room`` tokens, headers included (:func:`whole_task_tokens`; each request is
    counted again only when it must be shortened)."""
    requests = task_requests(history, task)
    if not requests:
        return TaskSection()
    whole = whole_task_tokens(requests, est)
    sections = task_sections(requests, room, est)
    tokens = whole if whole <= room else _tokens(sections, est)
    return TaskSection(tuple(sections), tokens, tokens <= room)


def summary_frame(est: Estimator) -> int:
    """The tokens :func:`~ars_core.summary_text.summary_body` puts around a
    summarizer's prose beside the task: its ``Summary`` header and the end mark.
    A summarizer writing ARS's own sections (closed by its own end mark) is
    framed by neither."""
    return _counted(est, f"{section(SUMMARY_HEADER, '')}\n\n{end_mark()}")


def summarizer_limit(bound: int, task: TaskSection, est: Estimator, *, framed: bool = True) -> int:
    """What the summarizer may write beside ``task`` in a summary of ``bound``
    tokens: the bound less the task sections and, for prose (``framed``), the
    frame :func:`summary_frame` puts around it; at least 1. The budget leaves the
    summarizer's part :func:`~ars_core.budget.rest_floor` of the bound. A
    summarizer is told the prose limit; one writing ARS's sections (the
    extractive one) takes the frame back. A task over its room (a bound too small
    for the requests' smallest form) still leaves the summarizer an eighth of the
    bound: that summary exceeds its bound."""
    if not task.sections:
        return bound
    left = bound - task.tokens - (summary_frame(est) if framed else 0)
    return max(1, left) if task.fits else max(1, bound // 8, left)


def fitted_summary(result: Any, task: TaskSection, bound: int, est: Estimator) -> CheckedSummary:
    """``result`` (what the summarizer returned) checked against what ``task``
    leaves of ``bound`` (:func:`summarizer_limit`, the frame counted for prose) and
    cut further when the summary message's body (``task``'s sections, then the
    text, framed or not) is still over ``bound`` (counts of parts and of the whole
    can differ by a token or two)."""
    text = getattr(result, "text", result)
    framed = not (isinstance(text, str) and text.startswith(SECTION_MARK + " "))
    limit = summarizer_limit(bound, task, est, framed=framed)
    checked = validate_summary(result, limit=limit, estimator=est, warn=False)
    for _ in range(4):
        if checked.text is None or not task.fits:  # (a task over its room: over the bound)
            break
        over = _counted(est, summary_body(task.sections, checked.text)) - bound
        if over <= 0:
            break
        limit = max(1, min(limit, est.count_text(checked.text)) - over)
        checked = validate_summary(result, limit=limit, estimator=est, warn=False)
    warn_cut(checked, limit)  # once, with the limit the summary was last cut to
    return checked


#: texts whose counts an engine keeps (a summary body is some thousands of characters)
COUNTED_TEXTS = 8


def _counted(est: Estimator, text: str) -> int:
    """``est.count_text(text)``, kept by the running engine for the last
    :data:`COUNTED_TEXTS` texts: the task's framing and a summary message's body come
    back round after round (:class:`~ars_core.recent.Recent`)."""
    counts: Recent[int] = memo.current().single("task:counts", lambda: Recent(COUNTED_TEXTS))
    return counts.get((estimator_key(est), text), lambda: est.count_text(text))


def earlier_task(history: Sequence[Message]) -> list[tuple[str, ...]]:
    """The task of every earlier summary in ``history`` (one another harness
    inserted, or ARS's own kept in the messages): the bodies of its ``Task``
    sections, oldest summary first."""
    return memo.current().index("task:earlier", _task_of_summary)(history)[1]


def _task_of_summary(m: Message) -> tuple[str, ...]:
    if not is_earlier_summary(m):
        return ()
    sections = read_earlier(m).sections
    return tuple(body for header, body in sections if _is_task(header) and body.strip())


def _is_task(header: str) -> bool:
    return header == "Task" or header.startswith("Task,")
