"""What a summary round's retention audit says in the log: one INFO line, or a
WARNING when the model no longer sees the task (or the newest request)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .call_state import Cut
from .messages import Message
from .retention import Retention, is_user_request, task_retention

__all__ = ["log_retention"]

log = logging.getLogger("ars")


def log_retention(cut: Cut, view: Sequence[Message], text: str, retention: Retention) -> None:
    """The retention audit of the view this round sends (the task: every user
    request up to the cutoff, and what the agent may need from the newly summarized
    messages: files, commands, errors, tool-call ids), in the log: one INFO line,
    and a WARNING only when the model no longer sees the task at all, or the
    newest request (nothing left of it in the view)."""
    if not retention.missing:
        return
    total = len(retention.missing) + len(retention.found)
    lost = _lost_requests(cut, view, text, retention)
    if lost:
        log.warning(
            "ARS: after summarizing, the model no longer sees %s; the summary left it "
            "out (the full messages stay in the state and the history archive)",
            lost,
        )
    else:
        log.info(
            "ARS: summary round: the view keeps %d of %d things the agent may need "
            "(%.0f%% of the task statement); only in the archived history: %s",
            len(retention.found),
            total,
            100 * retention.task_fraction,
            "; ".join(retention.missing),
        )


def _lost_requests(cut: Cut, view: Sequence[Message], text: str, retention: Retention) -> str:
    """What the model no longer sees of the user's requests, in words ("" when
    nothing): the whole task statement, or the newest request when it was
    summarized (no later request kept) and nothing of it is in the view (whose
    :func:`~ars_core.retention.view_text` is ``text``)."""
    if not cut.task:
        return ""
    if retention.task_fraction == 0:
        return "the task (none of the user's requests up to the cutoff)"
    if any(is_user_request(m) for m in view[1:]):
        return ""  # a newer request is kept whole
    if task_retention(cut.task[-1], text, collapsed=True) == 0:
        return "the user's newest request"
    return ""
