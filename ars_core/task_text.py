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

import attrs

from . import memo
from .estimate import Estimator
from .memo import estimator_key
from .messages import Message
from .retention import is_earlier_summary, request_texts
from .summary_text import (
    MIN_REQUEST_CHARS,
    REQUEST_ELIDED,
    SECTION_MARK,
    SHORTENED_TEXT,
    fair_shares,
    read_earlier,
    section,
    share_chars,
    shorten_text,
)

__all__ = [
    "TaskSection",
    "earlier_task",
    "fit_text",
    "summary_task",
    "task_header",
    "task_sections",
]


def fit_text(est: Estimator, text: str, share: int, size: int, what: str = SHORTENED_TEXT) -> str:
    """Head and tail of ``text`` (``size`` tokens) within ``share`` tokens; the
    marker in the middle says how many characters (``what``) were left out."""
    chars = share_chars(text, share, size, len(what))
    short = shorten_text(text, chars, what)
    for _ in range(4):  # the character model is close; correct it by what is left over
        over = est.count_text(short) - share
        if over <= 0 or chars <= MIN_REQUEST_CHARS:
            break
        chars = max(MIN_REQUEST_CHARS, chars - over * len(text) // max(size, 1) - 8)
        short = shorten_text(text, chars, what)
    return short


def task_header(index: int, total: int, sent: int = 1) -> str:
    """The header of the ``index``-th (from 0) of ``total`` task sections."""
    header = "Task" if total == 1 else f"Task, user request {index + 1} of {total}"
    return header + (f", sent {sent} times" if sent > 1 else "")


def task_sections(requests: Mapping[str, int], room: int, est: Estimator) -> list[str]:
    """One ``Task`` section per request (``requests``: text -> times sent), whole
    while they fit ``room`` tokens; otherwise the small ones whole and each large
    one its head and tail (a fair share each), with a marker saying how much was
    left out and that the whole request is in the conversation history file."""
    texts = list(requests)
    sizes = [est.count_text(t) for t in texts]
    shares = fair_shares(sizes, room)
    out: list[str] = []
    for i, (text, size, share) in enumerate(zip(texts, sizes, shares, strict=True)):
        if share < size:  # never dropped: the head and tail, and where the whole is
            text = fit_text(est, text, share, size, REQUEST_ELIDED)
        out.append(section(task_header(i, len(texts), requests[texts[i]]), text))
    return out


@attrs.frozen
class TaskSection:
    """The task sections of a summary message and the tokens they take."""

    sections: tuple[str, ...] = ()
    tokens: int = 0


def summary_task(
    history: Sequence[Message], task: Sequence[str], room: int, est: Estimator
) -> TaskSection:
    """The task sections the engine writes for a round whose summary stands for
    ``history`` (the state up to the cutoff): the task of any earlier summary in
    it, then ``task`` (its requests), each with the times it was sent, within
    ``room`` tokens. Each request is counted once per estimator (the task is the
    same round after round and can be long): again only when it must be shortened."""
    earlier = [t for tasks in earlier_task(history) for t in tasks]
    texts = list(dict.fromkeys([*earlier, *task]))
    if not texts:
        return TaskSection()
    wanted = set(texts)
    sent = Counter(t for t in request_texts(history) if t in wanted)
    requests = {t: max(1, sent[t]) for t in texts}
    whole = memo.current().text_tokens(texts, estimator_key(est), est.count_text)
    if whole > room:
        sections = task_sections(requests, room, est)
        return TaskSection(tuple(sections), est.count_text("\n\n".join(sections) + "\n\n"))
    headers = [task_header(i, len(texts), requests[t]) for i, t in enumerate(texts)]
    sections = [section(h, t) for h, t in zip(headers, texts, strict=True)]
    frame = est.count_text("".join(f"{SECTION_MARK} {h}\n\n\n" for h in headers))
    return TaskSection(tuple(sections), whole + frame)


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
