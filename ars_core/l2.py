"""L2: history summary, as pure functions.

* :func:`select_cutoff` picks where the summarized part ends in the effective
  messages: it keeps the latest ``summary_keep_messages`` and never separates
  an assistant's tool calls (parallel ones included) from their results.
* :func:`history_file` renders the *original* messages being summarized as a
  lossless JSONL archive under ``outputs/conversation_history/``;
  :func:`read_history` reads one back (both from :mod:`ars_core.archive`).
* :func:`build_summary_message` makes the summary message, including the
  error text when the summary model failed.
* :func:`validate_summary` validates a summarizer's output before it enters
  state: text, non-empty, bounded (longer output is cut with a
  marker); anything else is a summary failure. :func:`describe_error`
  is the model-visible text of an error: its type and a short message with
  host paths removed.
* :func:`trim_tail` shortens kept messages further when the window still
  exceeds capacity; each trimmed message's original goes to a file
  and its trimmed form is returned to be persisted by id.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from . import memo
from .archive import archive_line, history_file, read_history
from .errors import SummarizerError
from .estimate import Estimator, message_tokens
from .l1 import FileWrite, fit_preview, sha256_text
from .layout import HISTORY_DIR, TRIMMED_DIR
from .messages import MARK_SUMMARY, MARK_TRIMMED, Message, message_to_dict
from .summary_text import summary_body

__all__ = [
    "ERROR_TEXT_LIMIT",
    "HISTORY_DIR",
    "TRIMMED_DIR",
    "CheckedSummary",
    "archive_line",
    "build_summary_message",
    "describe_error",
    "forbidden_cuts",
    "history_file",
    "read_history",
    "select_cutoff",
    "tool_pairs",
    "trim_tail",
    "validate_summary",
    "warn_cut",
]

#: the longest error message shown to the model (characters, after the type name)
ERROR_TEXT_LIMIT = 300

log = logging.getLogger("ars")

# absolute host paths: POSIX (/home/alice/...), home (~/...), Windows (C:\\...,
# \\\\server\\share) and file: URLs; a slash inside a word or URL ("and/or",
# "https://host/x") is not one
_HOST_PATH = re.compile(
    r"file:/{1,3}[^\s'\"`<>]*"
    r"|(?<![\w.:/~-])~?/(?:[^\s/'\"`:;,()<>\[\]]+/?)+"
    r"|\b[A-Za-z]:[\\/][^\s'\"`<>]*"
    r"|\\\\[^\s'\"`<>]+"
)


def describe_error(exc: BaseException) -> str:
    """``"<ErrorType>: <message>"`` for the model and the checkpoint: host paths
    become ``<path>``, the message is one line of at most
    :data:`ERROR_TEXT_LIMIT` characters."""
    text = " ".join(str(exc).split())
    text = _HOST_PATH.sub("<path>", text)
    if len(text) > ERROR_TEXT_LIMIT:
        text = text[: ERROR_TEXT_LIMIT - 1] + "\u2026"
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


@attrs.frozen
class CheckedSummary:
    """A summarizer's output after :func:`check_summary`.

    Either ``text`` (valid, perhaps cut to the bound: then ``cut_from`` is its
    original size in tokens) or ``error`` (the model-visible failure text)."""

    text: str | None
    error: str | None = None
    usage: Any = None
    cut_from: int | None = None


def validate_summary(
    result: Any, *, limit: int, estimator: Estimator, warn: bool = True
) -> CheckedSummary:
    """Validate what a summarizer returned before it enters state.

    ``result`` is a ``SummaryResult``, a string, or the exception the
    summarizer raised. A summary that is not a string, or is empty, is a
    failure, as is an exception. A summary over ``limit`` tokens is cut
    to fit, with a marker saying so, and a warning is logged (unless ``warn`` is
    false: a caller that may cut again logs the last cut, :func:`warn_cut`). The cut summary
    is never empty: when ``limit`` leaves no room for the marker beside any of
    the text (a limit under the marker's 20 tokens or so), the head that fits
    is followed by an ellipsis alone, or stands alone when even that does not
    fit (a limit of a token or two; at least one token is kept).
    """
    if isinstance(result, BaseException):
        return CheckedSummary(None, error=describe_error(result))
    text = getattr(result, "text", result)
    usage = getattr(result, "usage", None)
    if not isinstance(text, str):
        problem = SummarizerError(
            f"the summarizer returned {type(text).__name__} instead of the summary text"
        )
        return CheckedSummary(None, error=describe_error(problem), usage=usage)
    if not text.strip():
        problem = SummarizerError("the summarizer returned an empty summary")
        return CheckedSummary(None, error=describe_error(problem), usage=usage)
    tokens = estimator.count_text(text)
    if tokens <= limit:
        return CheckedSummary(text, usage=usage)
    marker = f"\n[ARS: this summary was cut to {limit} tokens; the summary model wrote {tokens}.]"
    checked = CheckedSummary(
        _cut_head(estimator, text, limit, marker), usage=usage, cut_from=tokens
    )
    if warn:
        warn_cut(checked, limit)
    return checked


def warn_cut(checked: CheckedSummary, limit: int) -> None:
    """The one warning for a summary cut to ``limit`` tokens (none when it was not cut)."""
    if checked.cut_from is not None:
        log.warning(
            "ARS: the summary model returned %d tokens, more than the %d allowed; cut to fit",
            checked.cut_from,
            limit,
        )


def _cut_head(estimator: Estimator, text: str, limit: int, marker: str) -> str:
    """The head of ``text`` that fits ``limit`` tokens (at least 1) with ``marker``
    after it; with a bare ellipsis when the marker leaves no room for any text, and alone
    when neither does; never empty."""
    limit = max(1, limit)
    for mark in (marker, "…", ""):
        overhead = estimator.count_text(mark)
        for _ in range(3):  # the head and the mark counted apart may differ from the whole
            head = fit_preview(estimator, text, limit, "", overhead=overhead)
            over = estimator.count_text(head + mark) - limit
            if over <= 0 or not head.strip():
                break
            overhead += over
        if head.strip() and over <= 0:
            return head + mark
    return text.strip()[:1]


def tool_pairs(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """``(call_index, result_index)`` for every tool result whose call is in ``messages``."""
    calls: dict[str, int] = {}
    pairs: list[tuple[int, int]] = []
    for i, m in enumerate(messages):
        for c in m.tool_calls:
            calls[c.id] = i
        if m.role == "tool" and m.tool_call_id in calls:
            pairs.append((calls[m.tool_call_id], i))
    return pairs


def forbidden_cuts(messages: Sequence[Message]) -> list[bool]:
    """For each position ``0..len(messages)``, whether a cut there is invalid: it
    would separate a tool call from its results, or open the kept window with a
    tool result. Kept by the engine as the history grows: a history that extends
    one seen before reads only its appended messages."""
    if not messages:
        return [False]
    remembered = memo.current().prefix("l2:forbidden", _Forbidden)
    with remembered.lock:
        seen, known = remembered.track(messages)
        if len(messages) < len(seen.messages):  # a shorter one: read whole, not kept
            return _Forbidden().read(messages, 0)
        if not known:
            seen.messages.clear()
            seen.state = _Forbidden()
        found = seen.state.read(messages, len(seen.messages))
        remembered.extend(seen, messages, known)
        return found


class _Forbidden:
    """:func:`forbidden_cuts` of a history so far, and where each tool call is in it."""

    __slots__ = ("calls", "forbidden")

    def __init__(self) -> None:
        self.forbidden = [False]
        self.calls: dict[str | None, int] = {}

    def read(self, messages: Sequence[Message], start: int) -> list[bool]:
        """Read ``messages[start:]`` (the first ``start`` were read): the positions of
        ``messages``."""
        forbidden, calls = self.forbidden, self.calls
        for i in range(start, len(messages)):
            m = messages[i]
            forbidden.append(False)  # a cut after it
            for c in m.tool_calls:
                calls[c.id] = i
            if m.role == "tool":
                call_i = calls.get(m.tool_call_id, i)
                forbidden[call_i + 1 : i + 1] = [True] * (i - call_i)
                forbidden[i] = True
        return list(forbidden)


def select_cutoff(
    messages: Sequence[Message],
    keep: int,
    *,
    start: int = 0,
    budget: int | None = None,
    tokens: Callable[[int], int] | None = None,
    forbidden: Sequence[bool] | None = None,
) -> int | None:
    """The local cutoff: ``messages[start:cutoff]`` are summarized, ``messages[cutoff:]`` kept.

    ``start`` is 1 when ``messages[0]`` is the previous summary. Prefers keeping
    at least ``keep`` messages; moves the cut earlier so that no tool call is
    separated from its results, and only when that leaves nothing to summarize
    moves it later. ``None`` when no valid cutoff exists.

    With a ``budget`` (tokens the kept messages may take, ``tokens(i)`` being
    the size of message ``i`` as it will be sent), fewer than ``keep`` messages
    are kept when needed: the cut moves later, to the first valid cut whose
    kept messages fit the budget; when none fits, the kept part is the
    smallest valid one (the last message, or the last tool calls with their
    results). Then a cut exists even with ``keep`` or fewer messages, when
    they do not fit. Only the kept messages are counted. ``forbidden`` is
    :func:`forbidden_cuts` of ``messages``, when the caller already has it.
    """
    n = len(messages)
    if n - start <= (keep if budget is None or tokens is None else 1):
        return None
    if forbidden is None:
        forbidden = forbidden_cuts(messages)
    cut = _preferred_cut(forbidden, n - keep, start, n) if n - start > keep else None
    if budget is None or tokens is None:
        return cut
    # the earliest position whose suffix fits the budget (never the whole of it: n)
    lowest = cut if cut is not None else start
    fits, total = n, 0
    for i in range(n - 1, lowest - 1, -1):
        total += tokens(i)
        if total > budget:
            break
        fits = i
    if cut is None:
        if fits == start:  # keep or fewer messages, and they all fit: nothing to cut
            return None
        lowest = start + 1
    later = next((c for c in range(max(fits, lowest), n) if not forbidden[c]), None)
    if later is not None:
        return later
    # nothing from there keeps a valid window: the smallest valid kept part
    return next((c for c in range(n - 1, lowest - 1, -1) if not forbidden[c]), None)


def _preferred_cut(forbidden: Sequence[bool], target: int, start: int, n: int) -> int | None:
    for cut in range(target, start, -1):
        if not forbidden[cut]:
            return cut
    for cut in range(target + 1, n):
        if not forbidden[cut]:
            return cut
    return None


def build_summary_message(
    text: str | None,
    *,
    cutoff: int,
    file_path: str | None,
    continues: str | None = None,
    error: str | None = None,
    fallback: str | None = None,
    task: Sequence[str] = (),
) -> Message:
    """The summary message that stands for ``state[:cutoff]``.

    ``task`` holds the task sections the engine wrote (the user's requests,
    verbatim); the summarizer's ``text`` follows them. When the summary model
    failed, the message holds the error text, the task and the deterministic
    ``fallback`` summary when one was made, never nothing. ``continues`` is
    the archive file with the first of those messages when ``file_path``
    holds only the rest (a continuation).
    """
    parts = [
        f"Summary of the earlier conversation (messages 1-{cutoff}; they are no longer shown):"
    ]
    if error is not None:
        parts.append(f"[ARS: the summary model failed: {error}]")
        if fallback or task:
            parts.append(summary_body(task, fallback or ""))
    else:
        parts.append(summary_body(task, text or ""))
    if file_path and continues:
        parts.append(
            f"The full text of those messages is saved at {file_path}, which continues {continues}."
        )
    elif file_path:
        parts.append(f"The full text of those messages is saved at {file_path}.")
    meta: dict[str, Any] = {MARK_SUMMARY: True, "ars_cutoff": cutoff}
    if file_path:
        meta["ars_history_path"] = file_path
        if continues:
            meta["ars_history_continues"] = continues
    if error is not None:
        meta["ars_summary_error"] = error
    return Message(
        role="user", content="\n\n".join(parts), id=f"ars-summary-{cutoff}", metadata=meta
    )


@attrs.frozen
class TailTrim:
    """Result of :func:`trim_tail`: the new tail, the files to write and which
    tail positions were trimmed."""

    tail: tuple[Message, ...]
    writes: tuple[FileWrite, ...]
    trimmed: tuple[int, ...]


def trim_tail(
    originals: Sequence[Message],
    tail: Sequence[Message],
    *,
    budget: int,
    fixed_tokens: int,
    estimator: Estimator,
    preview_tokens: int,
) -> TailTrim:
    """Trim kept messages, oldest first, until ``fixed_tokens`` + tail fits ``budget``.

    ``originals`` are the state messages behind ``tail`` (the L1 view of
    them). A trimmed message keeps its id, role and tool-call ids (so pairing
    survives); its text becomes a path and a preview, and its tool-call
    arguments are emptied into the file. The file holds the original message
    as JSON, so nothing is lost.
    """
    new_tail = list(tail)
    sizes = [message_tokens(estimator, m) for m in new_tail]
    total = fixed_tokens + sum(sizes)
    writes: list[FileWrite] = []
    trimmed: list[int] = []
    for i in range(len(new_tail)):
        if total <= budget:
            break
        orig = originals[i]
        if orig.metadata.get(MARK_TRIMMED) or sizes[i] <= preview_tokens:
            continue
        record = json.dumps(message_to_dict(orig), ensure_ascii=False, default=str)
        path = f"{TRIMMED_DIR}/{orig.role}-{sha256_text(record)}.json"
        frame = (
            f"[ARS: this message was trimmed to fit the context window; the full message "
            f"({len(record)} characters) is saved at {path}.]\nPreview:\n"
        )
        calls = tuple(
            attrs.evolve(c, args={"ars_trimmed": f"arguments saved at {path}"})
            for c in orig.tool_calls
        )
        shell = message_tokens(estimator, attrs.evolve(orig, content="", tool_calls=calls))
        preview = fit_preview(estimator, orig.text, preview_tokens, frame, overhead=shell + 1)
        new = attrs.evolve(
            orig,
            content=frame + preview,
            tool_calls=calls,
            metadata={**orig.metadata, MARK_TRIMMED: path},
        )
        new_size = message_tokens(estimator, new)
        if new_size >= sizes[i]:
            continue
        writes.append(FileWrite(path, record))
        total += new_size - sizes[i]
        new_tail[i], sizes[i] = new, new_size
        trimmed.append(i)
    return TailTrim(tail=tuple(new_tail), writes=tuple(writes), trimmed=tuple(trimmed))
