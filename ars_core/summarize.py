"""Summarizers: turn older history into one summary text.

A :class:`Summarizer` takes the *cleaned* history (L1 previews instead of huge
tool results) and the ``summary_prompt`` template, and returns the summary text
with the summary call's own token usage, kept apart from the main model's.
:class:`AsyncSummarizer` is the async twin; the engine runs a sync one
in a worker thread on the async path.

:func:`condense_history` bounds what the summary model reads: when the history
is larger than its budget, older middle parts are shortened while the previous
summary and the user's requests (the task) stay whole within their share. The
summarizer is always called; ARS never stores a placeholder instead of a summary.

:class:`ExtractiveSummarizer` is a deterministic summarizer that needs no model
(every user request, files created, edited and touched, tool calls, errors
seen, latest conclusions): the engine's default, the fallback when a summary
model fails, and the embedded default of the CLI.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, Protocol, overload, runtime_checkable

import attrs

from . import memo
from ._workers import run_abandonable
from .budget import (
    INPUT_REST_FLOOR,
    TASK_SHARE,
    TASK_SHARE_MAX,
    large_task_ceiling,
    summary_budget,
    summary_input_budget,
    task_budget,
)
from .capabilities import BudgetedSummarizer, has
from .estimate import (
    ApproxEstimator,
    Estimator,
    is_incremental,
    message_sizes,
    message_tokens,
)
from .extractive import ExtractiveSummarizer
from .floors import floors_reach_of
from .memo import KEPT_KIND, SHORTENED, TOKENS
from .messages import ContentPart, Message
from .pending_form import is_pending
from .per_call import once_per_call
from .prompt import media_reference, render_history, render_prompt
from .retention import (
    MARK_NOTE,
    edited_files,
    is_earlier_summary,
    is_user_request,
    leading_requests,
    newest_error_lines,
)
from .summary_text import (
    MARK_OMITTED,
    OMITTED_ITEMS,
    REQUEST_ELIDED,
    SECTION_MARK,
    SHORTENED_TEXT,
    clip,
    fair_shares,
    parse_summary,
    share_chars,
    shorten_text,
)
from .totals import no_bound
from .usage import SummaryResult, Usage

__all__ = [
    "INPUT_REST_FLOOR",
    "MARK_OMITTED",
    "SECTION_MARK",
    "TASK_SHARE",
    "TASK_SHARE_MAX",
    "AsyncSummarizer",
    "CallableSummarizer",
    "ExtractiveSummarizer",
    "MessageSizes",
    "Summarizer",
    "SummaryResult",
    "Usage",
    "bound_summarizer",
    "condense_history",
    "history_exceeds",
    "history_total",
    "large_task_ceiling",
    "media_reference",
    "parse_summary",
    "render_history",
    "render_prompt",
    "summary_budget",
    "summary_input_budget",
    "task_budget",
    "turn_messages",
    "turn_tokens",
    "whole_tokens",
]


@runtime_checkable
class Summarizer(Protocol):
    """Synchronous summarizer.

    One that computes in this process and cannot hang (no model, no network)
    may set a class attribute ``runs_inline = True``: the sync path then calls
    it in the calling thread, without the worker thread that enforces
    ``summary_timeout`` (the extractive summarizer does)."""

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        """Summarize ``messages`` with the ``prompt`` template (it holds ``{messages}``)."""
        ...


@runtime_checkable
class AsyncSummarizer(Protocol):
    """Asynchronous summarizer."""

    async def asummarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        """Async twin of :meth:`Summarizer.summarize`."""
        ...


def _shorten_message(m: Message, max_chars: int, what: str = SHORTENED_TEXT) -> Message:
    calls = tuple(
        attrs.evolve(
            c,
            args={
                k: (shorten_text(v, max_chars // 2) if isinstance(v, str) else v)
                for k, v in c.args.items()
            },
        )
        for c in m.tool_calls
    )
    text = shorten_text(m.text, max_chars, what)
    if isinstance(m.content, str):
        return attrs.evolve(m, content=text, tool_calls=calls)
    # media parts stay (the prompt names them by reference, never copies them)
    media = tuple(p for p in m.content if p.text is None)
    parts = (ContentPart(type="text", text=text), *media) if text else media
    return attrs.evolve(m, content=parts, tool_calls=calls)


def _omitted_note(omitted: int) -> Message:
    return Message(
        role="user",
        content=f"[{omitted} older messages omitted here to fit the summary budget; "
        "their full text is in the conversation history file]",
        metadata={MARK_NOTE: True},
    )


def condense_history(
    messages: Sequence[Message],
    budget: int,
    estimator: Estimator | None = None,
    *,
    shortened_chars: int = 600,
    task_tokens: int | None = None,
) -> list[Message]:
    """Fit ``messages`` into ``budget`` tokens for the summary model.

    The previous summary, system messages, the task's requests (the ones that
    set the work, unless a previous summary carries them, and the newest one;
    see :func:`~ars_core.retention.task_statement`) and the newest message
    stay whole; when the requests alone take more than their room
    (``task_tokens``, by default :data:`TASK_SHARE` of the budget), each large
    one keeps its head and tail, with a marker saying how much was left out
    and that the whole is in the history file: neither the first request nor
    the newest is ever dropped. The other user turns are conversation content,
    like the rest. The rest is taken
    newest first: whole while it fits, then shortened (head and tail of each
    message), and the oldest that fit not even shortened are replaced by one
    note saying how many were omitted (their text is in the archive file).
    Returns a new list (the input is untouched); the same list content when it
    already fits. Work is proportional to what is kept, and shortened forms
    are cached.
    """
    est = estimator or ApproxEstimator()
    n = len(messages)
    if not history_exceeds(messages, est, budget):
        return list(messages)
    sizes = MessageSizes(est, messages, 0)  # counted when read: the kept ones
    fixed, requests = _kept_whole(messages)
    out: list[Message | None] = [None] * n
    for i in fixed:
        out[i] = messages[i]
    if task_tokens is None:
        room = int(budget * TASK_SHARE)
    else:  # the task's text, and each request's own frame (role, separators)
        room = task_tokens + len(requests) * message_tokens(est, _EMPTY_REQUEST)
    _fit_requests(messages, requests, out, sizes, room, est)
    # room for the note that stands for omitted messages, reserved up front
    room = budget - sum(sizes[i] for i in fixed) - message_tokens(est, _omitted_note(n))
    room = _fill_newest_first(messages, fixed, out, sizes, room, est, shortened_chars)
    result = _noting_omissions(out, messages)
    if room < 0:  # the fixed messages alone are too big: shorten the largest of them too,
        # except what carries the task (the previous summary, the requests: already bounded)
        task = {id(out[i]) for i in requests}
        result = [
            _shortened(m, max(200, budget * 2))
            if message_tokens(est, m) > budget // 4
            and not is_earlier_summary(m)
            and id(m) not in task
            else m
            for m in result
        ]
    return result


def _fill_newest_first(
    messages: Sequence[Message],
    fixed: set[int],
    out: list[Message | None],
    sizes: MessageSizes,
    room: int,
    est: Estimator,
    shortened_chars: int,
) -> int:
    """Fill ``out`` (in place) with the messages not kept whole, newest first: whole
    while they fit ``room``, then shortened, until one does not fit even shortened.
    Returns the room left (negative when the fixed messages alone overflow it)."""
    shortening = False
    for i in reversed(range(len(messages))):
        if i in fixed:
            continue
        if not shortening and sizes[i] <= room:
            out[i], room = messages[i], room - sizes[i]
            continue
        shortening = True
        short = _shortened(messages[i], shortened_chars)
        size = message_tokens(est, short)
        if size > room:
            break
        out[i], room = short, room - size
    return room


@once_per_call
def _kept_whole(messages: Sequence[Message]) -> tuple[set[int], list[int]]:
    """Positions :func:`condense_history` keeps whole — the previous summary, system
    messages, the task's requests (those that set the work when no previous summary
    carries them, and the newest; first of each text) and the newest message — and,
    of those, the requests. What each message is, is kept on it (messages are
    immutable): a round over a history the last round saw is a lookup per message."""
    fixed: set[int] = set()
    every: list[int] = []
    # only the messages that are not "other" (kept by the engine as the history grows)
    positions, kinds = memo.current().index("summarize:kinds", _cached_kind)(messages)
    for i, kind in zip(positions, kinds, strict=True):
        if kind == _FIXED:
            fixed.add(i)
        else:
            every.append(i)
    carried = any(is_earlier_summary(messages[i]) for i in fixed)
    lead = 0 if carried else leading_requests(every)
    seen: set[str] = set()
    requests: list[int] = []
    for i in dict.fromkeys([*every[:lead], *every[-1:]]):
        if messages[i].text not in seen:
            seen.add(messages[i].text)
            requests.append(i)
    fixed.update(requests)
    fixed.add(len(messages) - 1)
    return fixed, requests


_EMPTY_REQUEST = Message(role="user", content="")

_OTHER, _FIXED, _REQUEST = 0, 1, 2


def _kind(m: Message) -> int:
    """The previous summary or a system message (kept whole), a user request, or other."""
    if is_earlier_summary(m) or m.role == "system":
        return _FIXED
    return _REQUEST if is_user_request(m) else _OTHER


def _cached_kind(m: Message) -> int:
    """:func:`_kind`, kept on the message."""
    return KEPT_KIND.of(m, _kind)


def _fit_requests(
    messages: Sequence[Message],
    requests: Sequence[int],
    out: list[Message | None],
    sizes: MessageSizes,
    room: int,
    est: Estimator,
) -> None:
    """Shorten the requests (head and tail) to fair shares of ``room``, in place."""
    shares = fair_shares([sizes[i] for i in requests], room)
    for i, share in zip(requests, shares, strict=True):
        if share < sizes[i]:
            chars = share_chars(messages[i].text, share, sizes[i], len(REQUEST_ELIDED))
            short = _shortened(messages[i], chars, REQUEST_ELIDED)
            out[i], sizes[i] = short, message_tokens(est, short)


def _noting_omissions(out: list[Message | None], messages: Sequence[Message]) -> list[Message]:
    """The kept messages, with one note where the omitted ones (``None``) were; the
    note names the files the omitted messages created or edited, their latest
    commands and errors (in its text and its metadata)."""
    kept: list[Message] = list(filter(None, out))  # a message is never false
    omitted = len(out) - len(kept)
    if not omitted:
        return kept
    first = out.index(None)
    last = len(out) - 1 - out[::-1].index(None)
    # the omitted messages are every message up to the last of them but the ones kept
    # whole (summary, system, requests), which create no files and report no errors
    note = _anchored_note(messages[: last + 1], omitted)
    at = first - out[:first].count(None)
    return [*kept[:at], note, *kept[at:]]


def _anchored_note(before: Sequence[Message], omitted: int) -> Message:
    """The note for ``omitted`` messages, all of them in ``before``, with the files and
    errors of ``before``."""
    note = _omitted_note(omitted)
    files = edited_files(before, last=OMITTED_ITEMS)
    errors = [clip(line, 120) for line in newest_error_lines(before, 3)]
    if not (files or errors):
        return note
    lines = [note.text[:-1] + "; what they did:"]
    lines += [f"- created or edited: {path}" for path in files]
    lines += [f"- error: {e}" for e in errors]
    lines.append("]")
    meta = {**note.metadata, MARK_OMITTED: {"files": files, "errors": errors}}
    return attrs.evolve(note, content="\n".join(lines), metadata=meta)


def _shortened(m: Message, max_chars: int, what: str = SHORTENED_TEXT) -> Message:
    return SHORTENED.of(
        m, lambda m: _shorten_message(m, max_chars, what), SHORTENED.key(max_chars, what)
    )


class CallableSummarizer:
    """Wrap ``fn(rendered_prompt) -> str`` (or an async one) as a summarizer."""

    def __init__(
        self,
        fn: Callable[[str], str] | None = None,
        *,
        afn: Callable[[str], Awaitable[str]] | None = None,
        estimator: Estimator | None = None,
        model: str | None = None,
    ) -> None:
        if fn is None and afn is None:
            raise TypeError("CallableSummarizer needs fn or afn")
        self._fn = fn
        self._afn = afn
        self._est = estimator or ApproxEstimator()
        self.model = model

    def _result(self, prompt_text: str, text: str) -> SummaryResult:
        usage = Usage(
            input_tokens=self._est.count_text(prompt_text), output_tokens=self._est.count_text(text)
        )
        return SummaryResult(text=text, usage=usage, model=self.model)

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        if self._fn is None:
            raise TypeError("this CallableSummarizer has only an async function")
        rendered = render_prompt(prompt, messages)
        return self._result(rendered, self._fn(rendered))

    async def asummarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        """``afn``, or ``fn`` in a worker thread (the event loop never waits on it)."""
        rendered = render_prompt(prompt, messages)
        if self._afn is not None:
            return self._result(rendered, await self._afn(rendered))
        fn = self._fn
        assert fn is not None
        text = await run_abandonable(functools.partial(fn, rendered))  # bounded if it hangs
        return self._result(rendered, text)


def whole_tokens(messages: Sequence[Message], estimator: Estimator) -> int:
    """Tokens of what :func:`condense_history` keeps whole in ``messages``: the
    previous summary, system messages, the task's requests and the newest
    message (the summary input budget is sized from them)."""
    fixed, _ = _kept_whole(messages)
    return sum(message_sizes(estimator, [messages[i] for i in fixed]))


def turn_tokens(messages: Sequence[Message], estimator: Estimator) -> int:
    """Tokens of the conversation's own turns in ``messages`` (:func:`turn_messages`).
    The summary input budget reads them whole (see
    :func:`~ars_core.budget.summary_input_budget`)."""
    return sum(message_sizes(estimator, turn_messages(messages)))


def turn_messages(messages: Sequence[Message]) -> list[Message]:
    """The conversation's own turns in ``messages`` that :func:`condense_history` does
    not keep whole: user requests besides the task's, and assistant messages that call
    no tool (what the people said; a chat is made of them, an agent run has few)."""
    fixed, _ = _kept_whole(messages)
    # only the turns are looked at (where they are is kept by the engine as the history grows)
    positions, _ = memo.current().index("summarize:turns", _is_turn)(messages)
    return [messages[i] for i in positions if i not in fixed]


def _is_turn(m: Message) -> bool:
    """What a person said: an assistant message calling no tool, or a user request."""
    return (m.role == "assistant" and not m.tool_calls) or _cached_kind(m) == _REQUEST


def history_total(history: Sequence[Message], estimator: Estimator) -> int:
    """The tokens of ``history``, message by message: for an incremental estimator the
    engine's running total of it (a history that grew counts its new messages only)."""
    if is_incremental(estimator):
        return memo.current().history_tokens(history, estimator.cache_key, estimator.count_message)
    return sum(message_sizes(estimator, history))


def history_exceeds(history: Sequence[Message], estimator: Estimator, limit: int) -> bool:
    """Whether :func:`history_total` of ``history`` is above ``limit``, counting no more
    than that takes: the engine's running total when it has it (a history that grew); else
    the counts its messages hold, newest first, then the others' (newest first; an offload
    whose form is not made yet last: making it fits its preview) until they pass ``limit``;
    all of them when they do not (the total, then kept)."""
    if not is_incremental(estimator):
        return sum(message_sizes(estimator, history)) > limit
    count, key = estimator.count_message, estimator.cache_key
    # no bound: nothing is counted up front, only newest first as far as the limit needs
    size = memo.current().history_size(history, key, count, no_bound)
    if size.exact:
        return size.tokens > limit
    if held_counts_exceed(history, key, limit):  # what the first pass below finds first
        return True
    running, uncounted = 0, []
    for m, known in zip(reversed(history), TOKENS.get_many(history[::-1], key), strict=True):
        if known is None:
            uncounted.append(m)
        else:
            running += known
            if running > limit:
                return True
    reach = floors_reach_of(estimator)
    if reach is not None and reach(uncounted, limit - running + 1):
        return True  # their floors tell, counting none of them
    for m in sorted(uncounted, key=is_pending):
        running += count(m)
        if running > limit:
            return True
    size.counted()  # every message counted: the total is kept for the rounds after
    return False


class HeldSums:
    """What the counts of one history's messages add up to, as far as they were held:
    ``sums[i]``, the counts the first ``i`` messages held when first read, then the
    counts found later on the messages that held none then (``late``, by position;
    ``missing``: those that still held none when last looked at); the counts of the
    estimator of ``key``."""

    __slots__ = ("key", "late", "late_total", "missing", "sums")

    def __init__(self) -> None:
        self.sums: list[int] = [0]
        self.missing: list[int] = []
        self.late: dict[int, int] = {}
        self.late_total = 0
        self.key: Hashable = None

    def reset(self, key: Hashable = None) -> None:
        del self.sums[1:]
        self.missing.clear()
        self.late.clear()
        self.late_total = 0
        self.key = key

    def read(self, history: Sequence[Message], key: Hashable) -> None:
        """Take the held counts of the messages appended since the last read."""
        running, start = self.sums[-1], len(self.sums) - 1
        for i, held in enumerate(TOKENS.get_many(history[start:], key), start):
            if held is None:
                self.missing.append(i)
            else:
                running += held
            self.sums.append(running)

    def look_again(self, history: Sequence[Message], key: Hashable) -> None:
        """Take the counts found since on the messages that held none."""
        n, still = len(history), []
        for i in self.missing:
            held = TOKENS.get(history[i], key) if i < n else None
            if held is None:
                still.append(i)
            else:
                self.late[i] = held
                self.late_total += held
        self.missing[:] = still

    def total(self, n: int) -> int:
        """At most the exact total of the history's first ``n`` messages."""
        if n >= len(self.sums) - 1:
            return self.sums[-1] + self.late_total
        return self.sums[n] + sum(c for i, c in self.late.items() if i < n)


def held_counts_exceed(history: Sequence[Message], key: Hashable, limit: int) -> bool:
    """Whether the counts the messages of ``history`` hold for the estimator of ``key``
    add up to more than ``limit`` (then so does the history's exact total), read as the
    history grows (:meth:`~ars_core.memo.Memo.prefix`): a round reads the appended
    messages' counts, and those of the ones that held none only when the rest is not
    above ``limit``, not every message's."""
    found = memo.current().prefix("summarize:held", HeldSums)
    with found.lock:
        sums = found.follow(history, HeldSums.reset)
        if sums.key != key:  # another estimator's counts: read from the first message
            sums.reset(key)
        sums.read(history, key)
        n = len(history)
        if sums.total(n) <= limit and sums.missing:
            sums.look_again(history, key)
        return sums.total(n) > limit


class MessageSizes(Sequence[int]):
    """The size of each of ``messages[start:]`` as it will be sent, counted when read:
    a round reads the newest ones (the kept tail) and the few kept whole, not every
    message of the history. A size may be set (a message replaced by a shorter form)."""

    def __init__(self, estimator: Estimator, messages: Sequence[Message], start: int) -> None:
        self._estimator, self._messages, self._start = estimator, messages, start
        self._known: dict[int, int] = {}

    def __len__(self) -> int:
        return max(0, len(self._messages) - self._start)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self._size(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._size(index)

    def __setitem__(self, index: int, size: int) -> None:
        self._known[index] = size

    def _size(self, i: int) -> int:
        size = self._known.get(i)
        if size is None:
            size = self._known[i] = message_tokens(self._estimator, self._messages[self._start + i])
        return size


def bound_summarizer(
    summarizer: Any,
    summary_tokens: int,
    task_tokens: int | None = None,
    task: Sequence[str] | None = None,
) -> Any:
    """``summarizer`` bounded to ``summary_tokens`` when it takes a bound (it has a
    ``with_budget(tokens)`` method returning the bounded summarizer); otherwise
    ``summarizer`` itself. Wrappers of a summarizer forward ``with_budget``.

    ``task_tokens``, the task's own room in the summary (see
    :func:`task_budget`), is passed as ``with_budget(tokens, task_tokens=...)``
    to a ``with_budget`` that takes it (:class:`ExtractiveSummarizer`'s does);
    one that does not is bounded by ``summary_tokens`` alone. So is ``task``,
    the requests the engine writes beside the summary (the summarizer leaves
    them out), as ``task=...``."""
    if not has(summarizer, BudgetedSummarizer):
        return summarizer
    with_budget = summarizer.with_budget
    extra: dict[str, Any] = {}
    if task_tokens is not None and _takes(with_budget, "task_tokens"):
        extra["task_tokens"] = task_tokens
    if task is not None and _takes(with_budget, "task"):
        extra["task"] = tuple(task)
    return with_budget(summary_tokens, **extra)


def _takes(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin)
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)
