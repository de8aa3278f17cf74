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
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

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
from .conversation import (
    CONVERSATION_HEADER,
    Utterance,
    conversation_section,
    is_conversation,
    read_conversation,
    utterances,
)
from .errors import ConfigError
from .estimate import ApproxEstimator, Estimator, message_sizes, message_tokens
from .memo import KEPT_KIND, SHORTENED
from .messages import ContentPart, Message
from .prompt import media_reference, render_history, render_prompt
from .retention import (
    MARK_NOTE,
    command_text,
    edited_files,
    error_lines,
    is_earlier_summary,
    is_user_request,
    leading_requests,
)
from .summary_text import (
    SECTION_MARK,
    archives_section,
    bullets,
    clip,
    end_mark,
    items,
    one_line,
    parse_summary,
    read_earlier,
    section,
)
from .usage import Usage

__all__ = [
    "INPUT_REST_FLOOR",
    "MARK_OMITTED",
    "SECTION_MARK",
    "TASK_SHARE",
    "TASK_SHARE_MAX",
    "AsyncSummarizer",
    "CallableSummarizer",
    "ExtractiveSummarizer",
    "Summarizer",
    "SummaryResult",
    "Usage",
    "bound_summarizer",
    "condense_history",
    "large_task_ceiling",
    "media_reference",
    "parse_summary",
    "render_history",
    "render_prompt",
    "summary_budget",
    "summary_input_budget",
    "task_budget",
    "turn_tokens",
    "whole_tokens",
]


@attrs.frozen
class SummaryResult:
    """What a summarizer returns: the text, the call's usage, and the model used."""

    text: str
    usage: Usage | None = None
    model: str | None = None


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


#: what the marker in a shortened text says was left out
SHORTENED_TEXT = "characters shortened"
#: ... in a shortened request of the task: how much, and where the whole of it is
REQUEST_ELIDED = (
    "characters of this request left out here; the whole request is in the "
    "conversation history file"
)


def _shorten(text: str, max_chars: int, what: str = SHORTENED_TEXT) -> str:
    if len(text) <= max_chars:
        return text
    head = max_chars * 3 // 4
    tail = max_chars - head
    end = text[-tail:] if tail else ""
    return f"{text[:head]}\n[... {len(text) - max_chars} {what} ...]\n{end}"


def _shorten_message(m: Message, max_chars: int, what: str = SHORTENED_TEXT) -> Message:
    calls = tuple(
        attrs.evolve(
            c,
            args={
                k: (_shorten(v, max_chars // 2) if isinstance(v, str) else v)
                for k, v in c.args.items()
            },
        )
        for c in m.tool_calls
    )
    text = _shorten(m.text, max_chars, what)
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
    sizes = message_sizes(est, messages)
    if sum(sizes) <= budget:
        return list(messages)
    fixed, requests = _kept_whole(messages)
    out: list[Message | None] = [messages[i] if i in fixed else None for i in range(n)]
    if task_tokens is None:
        room = int(budget * TASK_SHARE)
    else:  # the task's text, and each request's own frame (role, separators)
        room = task_tokens + len(requests) * message_tokens(est, _EMPTY_REQUEST)
    _fit_requests(messages, requests, out, sizes, room, est)
    # room for the note that stands for omitted messages, reserved up front
    room = budget - sum(sizes[i] for i in fixed) - message_tokens(est, _omitted_note(n))
    shortening = False
    for i in reversed(range(n)):
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


def _kept_whole(messages: Sequence[Message]) -> tuple[set[int], list[int]]:
    """Positions :func:`condense_history` keeps whole — the previous summary,
    system messages, the task's requests (those that set the work when no
    previous summary carries them, and the newest; first of each text) and the
    newest message — and, of those, the requests. What each message is, is
    kept on it (messages are immutable), so a round over a history the last
    round saw is a lookup per message."""
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
    sizes: list[int],
    room: int,
    est: Estimator,
) -> None:
    """Shorten the requests (head and tail) to fair shares of ``room``, in place."""
    shares = _fair_shares([sizes[i] for i in requests], room)
    for i, share in zip(requests, shares, strict=True):
        if share < sizes[i]:
            chars = _share_chars(messages[i].text, share, sizes[i], len(REQUEST_ELIDED))
            short = _shortened(messages[i], chars, REQUEST_ELIDED)
            out[i], sizes[i] = short, message_tokens(est, short)


def _noting_omissions(out: list[Message | None], messages: Sequence[Message]) -> list[Message]:
    """The kept messages, with one note where the omitted ones (``None``) were; the
    note names the files the omitted messages created or edited, their latest
    commands and errors (in its text and its metadata)."""
    kept = [m for m in out if m is not None]
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
    errors = [clip(line, 120) for line in error_lines(before, last=3)]
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


_PATH = re.compile(
    r"(?<![\w/.-])((?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.\w{1,8}|[\w-]+\.(?:py|js|ts|md|txt|json|toml|yaml|yml|cfg|ini|rs|go|java|c|h|cpp|sh|html|css))\b"
)

_TASK_HEADER = re.compile(r"^Task\b.*?(?:, sent (\d+) times)?$")
_COUNT = re.compile(r" \(×(\d+)\)$")
#: metadata key of an omitted-messages note: the anchors of what it stands for
MARK_OMITTED = "ars_omitted"
#: files an omitted-messages note names at most
OMITTED_ITEMS = 20
#: fewest characters a shortened request keeps (head and tail)
MIN_REQUEST_CHARS = 80
#: characters the shortening note itself takes
_NOTE_CHARS = 48
#: the modes of :class:`ExtractiveSummarizer`
_MODES = ("auto", "agent", "conversation")


def whole_tokens(messages: Sequence[Message], estimator: Estimator) -> int:
    """Tokens of what :func:`condense_history` keeps whole in ``messages``: the
    previous summary, system messages, the task's requests and the newest
    message (the summary input budget is sized from them)."""
    fixed, _ = _kept_whole(messages)
    return sum(message_sizes(estimator, [messages[i] for i in fixed]))


def turn_tokens(messages: Sequence[Message], estimator: Estimator) -> int:
    """Tokens of the conversation's own turns in ``messages`` that
    :func:`condense_history` does not keep whole: user requests besides the
    task's, and assistant messages that call no tool (what the people said;
    a chat is made of them, an agent run has few). The summary input budget
    reads them whole (see :func:`~ars_core.budget.summary_input_budget`)."""
    fixed, _ = _kept_whole(messages)
    turns = [
        m
        for i, m in enumerate(messages)
        if i not in fixed
        and ((m.role == "assistant" and not m.tool_calls) or _cached_kind(m) == _REQUEST)
    ]
    return sum(message_sizes(estimator, turns))


def bound_summarizer(summarizer: Any, summary_tokens: int, task_tokens: int | None = None) -> Any:
    """``summarizer`` bounded to ``summary_tokens`` when it takes a bound (it has a
    ``with_budget(tokens)`` method returning the bounded summarizer); otherwise
    ``summarizer`` itself. Wrappers of a summarizer forward ``with_budget``.

    ``task_tokens``, the task's own room in the summary (see
    :func:`task_budget`), is passed as ``with_budget(tokens, task_tokens=...)``
    to a ``with_budget`` that takes it (:class:`ExtractiveSummarizer`'s does);
    one that does not is bounded by ``summary_tokens`` alone."""
    if not has(summarizer, BudgetedSummarizer):
        return summarizer
    with_budget = summarizer.with_budget
    if task_tokens is not None and _takes_task_tokens(with_budget):
        return with_budget(summary_tokens, task_tokens=task_tokens)
    return with_budget(summary_tokens)


def _takes_task_tokens(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin)
        return False
    return any(p.name == "task_tokens" or p.kind is p.VAR_KEYWORD for p in params)


def _share_chars(text: str, share: int, size: int, note: int = _NOTE_CHARS) -> int:
    """Characters of ``text`` (``size`` tokens) that fit ``share`` tokens, its shortening
    note (``note`` characters) included."""
    return max(MIN_REQUEST_CHARS, len(text) * share // max(size, 1) - note)


def _said(found: _Found, messages: Sequence[Message], first: str | None) -> list[Utterance]:
    """What was said, in order, for a conversation's summary: the sentences an earlier
    conversation summary kept (or, after an earlier agent summary, the requests it
    held that the task no longer does), then those of ``messages`` (all but the
    first request, which the task keeps whole; the newest request is there too:
    it leaves the task when a newer one comes, and its sentences keep their place)."""
    said = list(found.said)
    if not said:
        here = {m.text.strip() for m in messages if is_user_request(m)}
        older = [t for t in list(found.requests)[1:-1] if t not in here]
        said = utterances(
            [Message(role="user", content=t) for t in older], first_turn=-1 - len(older)
        )
    return [*said, *utterances(messages, skip=[first] if first else [])]


def _first_and_newest(requests: dict[str, int]) -> dict[str, int]:
    """The requests a conversation's summary keeps whole: the first and the newest."""
    texts = list(requests)
    return {t: requests[t] for t in dict.fromkeys(texts[:1] + texts[-1:])}


def _fair_shares(sizes: Sequence[int], budget: int) -> list[int]:
    """Split ``budget`` over items of ``sizes``: small items whole, the large ones an
    equal share of what is left (water filling)."""
    shares = list(sizes)
    if sum(sizes) <= budget:
        return shares
    left, order = budget, sorted(range(len(sizes)), key=lambda i: sizes[i])
    for n, i in enumerate(order):
        share = left // (len(order) - n)
        shares[i] = min(sizes[i], share)
        left -= shares[i]
    return shares


@attrs.define
class _Found:
    """What the extractive summarizer found: the requests and the lists, with
    counts, merged from a previous summary and the new messages."""

    requests: dict[str, int] = attrs.field(factory=dict)
    files: dict[str, None] = attrs.field(factory=dict)
    edited: dict[str, None] = attrs.field(factory=dict)
    commands: dict[str, int] = attrs.field(factory=dict)
    errors: dict[str, None] = attrs.field(factory=dict)
    conclusions: list[str] = attrs.field(factory=list)
    previous_free_text: list[str] = attrs.field(factory=list)
    #: sections of an earlier summary the lists do not cover (a model's "## Decisions"), by header
    carried: dict[str, str] = attrs.field(factory=dict)
    #: (cutoff, path) of the archive files earlier summaries name, oldest first
    archives: list[tuple[int | None, str]] = attrs.field(factory=list)
    #: the sentences an earlier conversation summary kept
    said: list[Utterance] = attrs.field(factory=list)

    @staticmethod
    def add(seen: dict[str, Any], item: str, count: int | None = None) -> None:
        """Move ``item`` to the end of ``seen`` (newest), adding ``count``."""
        old = seen.pop(item, 0)
        seen[item] = None if count is None else (old or 0) + count

    def merge_summary(self, message: Message) -> None:
        """What a previous summary said (:func:`~ars_core.summary_text.read_earlier`):
        ARS's sections into the lists, a model's prose as text and its other
        sections as they are, the archive files it names."""
        earlier = read_earlier(message)
        self.archives += earlier.archives
        if earlier.free:
            self.previous_free_text.append(earlier.free)
        for header, body in earlier.sections:
            task = _TASK_HEADER.match(header)
            if task:
                self.add(self.requests, body, int(task.group(1) or 1))
            elif header.startswith("Files created or edited"):
                for item in items(body):
                    self.add(self.edited, item)
            elif header.startswith("Files touched"):
                for item in items(body):
                    self.add(self.files, item)
            elif header.startswith("Tool calls"):
                for item in items(body):
                    c = _COUNT.search(item)
                    self.add(
                        self.commands, item[: c.start()] if c else item, int(c.group(1)) if c else 1
                    )
            elif header.startswith("Errors seen"):
                for item in items(body):
                    self.add(self.errors, item)
            elif header.startswith("Latest conclusions"):
                self.conclusions.extend(items(body))
            elif header.startswith("Earlier summary"):
                self.previous_free_text.append(body)
            elif header == CONVERSATION_HEADER:
                self.said += read_conversation(body)
            elif body:  # a model's own section: carried on as it is
                self.carried.pop(header, None)
                self.carried[header] = body

    def gather(self, messages: Sequence[Message]) -> None:
        """Files edited, conclusions, tool calls, files named and errors of ``messages``
        (and the anchors of an omitted-messages note)."""
        for m in messages:
            omitted = m.metadata.get(MARK_OMITTED) if m.metadata.get(MARK_NOTE) else None
            if isinstance(omitted, dict):
                for path in omitted.get("files", ()):
                    self.add(self.edited, path)
                for line in omitted.get("errors", ()):
                    self.add(self.errors, line)
        for path in edited_files(messages):
            self.add(self.edited, path)
        for m in messages:
            if m.role != "assistant":
                continue
            if m.text.strip():
                self.conclusions.append(one_line(m.text, 400))
            for call in m.tool_calls:
                arg_text = command_text(call)
                self.add(self.commands, f"{call.name}: {clip(arg_text, 200)}", 1)
                for path in _PATH.findall(arg_text):
                    if path not in self.edited:
                        self.add(self.files, path)
        for line in error_lines(messages):
            self.add(self.errors, clip(line, 200))


class ExtractiveSummarizer:
    """A deterministic summarizer that needs no model.

    Keeps the task statement — every user request, whole while the task
    budget allows, then head and tail of each — and lists the files created
    or edited and the other files touched, the latest tool calls (identical
    ones once, with a count), the errors seen and the latest assistant
    conclusions. Sections open with :data:`SECTION_MARK` lines that message
    text cannot produce, so a chained summary reads the previous one back
    exactly, whatever markdown the task holds.

    A conversation (``mode="auto"``, the default, picks it when the history
    has at least three user requests and fewer tool calls than requests, or
    an earlier summary kept a conversation; ``mode="conversation"`` always,
    ``mode="agent"`` never) keeps the first and the newest request whole and
    then the sentences of both speakers most likely to be asked about later
    (:mod:`ars_core.conversation`), with a chat's few tool calls listed in a
    quarter of what is left.

    An earlier summary is merged, whoever wrote it: ARS's sections into the
    new ones, a model's prose (``Earlier summary``) and its own ``## ``
    sections as they are (head and tail of each when they do not fit half of
    what the task left), the archive files it names (``Earlier messages are
    saved at``), a conversation's sentences among the new ones.

    ``summary_tokens`` bounds the summary (the task may take
    :data:`TASK_SHARE` of it, or ``task_tokens`` when given: the engine gives
    a task too large for that share a room of its own, see
    :func:`task_budget`); without it the bound is the input's size (the
    engine already bounds that by the summary budget), at least 2,048 tokens,
    and the task is kept as whole as the input holds it. The engine passes its own bound through
    :meth:`with_budget`. The prompt template is not sent anywhere; its
    rendered size is reported as the call's input usage.
    """

    name = "extractive"
    #: deterministic and in process: the sync path calls it without a worker thread
    runs_inline = True

    def __init__(
        self,
        *,
        summary_tokens: int | None = None,
        max_items: int = 15,
        estimator: Estimator | None = None,
        task_tokens: int | None = None,
        mode: str = "auto",
    ) -> None:
        if mode not in _MODES:
            raise ConfigError("mode", mode, f"must be one of {', '.join(_MODES)}")
        self.mode = mode
        self.summary_tokens = summary_tokens
        self.task_tokens = task_tokens
        self.max_items = max_items
        self._est = estimator or ApproxEstimator()

    def reads_whole_history(self, history: Sequence[Message]) -> bool:
        """Whether the engine hands it ``history`` whole rather than condensed: for
        a conversation (no model window bounds it, and every turn may hold a fact
        asked about later); an agent run reads the condensed input, as a summary
        model would."""
        return self.mode == "conversation" or (self.mode == "auto" and is_conversation(history))

    def with_budget(
        self, summary_tokens: int, *, task_tokens: int | None = None
    ) -> ExtractiveSummarizer:
        """A copy bounded to ``summary_tokens`` (the engine's summary budget), the
        task given ``task_tokens`` of it when set, unless this one was given its
        own bound."""
        if self.summary_tokens is not None:
            return self
        return ExtractiveSummarizer(
            summary_tokens=summary_tokens,
            max_items=self.max_items,
            estimator=self._est,
            task_tokens=task_tokens,
            mode=self.mode,
        )

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        rendered = render_prompt(prompt, messages)
        input_tokens = self._est.count_text(rendered)
        if self.summary_tokens is not None:
            budget = self.summary_tokens
            task_room = min(budget, self.task_tokens or int(budget * TASK_SHARE))
        else:  # the input is already bounded: never shorten the task below what it holds
            budget = max(2048, input_tokens)
            task_room = max(int(2048 * TASK_SHARE), input_tokens)
        text = self._extract(messages, budget, task_room)
        usage = Usage(input_tokens=input_tokens, output_tokens=self._est.count_text(text))
        return SummaryResult(text=text, usage=usage, model="ars-extractive")

    async def asummarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        return self.summarize(messages, prompt)

    # ------------------------------------------------------------ extraction

    def _extract(self, messages: Sequence[Message], budget: int, task_budget: int) -> str:
        found = _Found()
        for m in messages:
            if is_earlier_summary(m):  # merged section by section, not nested
                found.merge_summary(m)
            elif is_user_request(m):
                found.add(found.requests, m.text.strip(), 1)
        found.gather(messages)
        chat = self.mode == "conversation" or (
            self.mode == "auto" and (bool(found.said) or is_conversation(messages))
        )
        requests = _first_and_newest(found.requests) if chat else found.requests
        out: list[str] = []
        out += self._task_sections(requests, task_budget)
        # a margin: the engine may count with another estimator than this one
        room = budget * 19 // 20 - sum(self._est.count_text(x) for x in out)
        out += self._earlier_sections(found, max(100, room // 2))
        archives = archives_section(found.archives)
        if archives:
            out.append(archives)
        room = budget * 19 // 20 - sum(self._est.count_text(x) for x in out)
        if chat:  # the lists (a chat's few tool calls) take a quarter at most; then what was said
            out += self._fitted_lists(found, max(0, room // 4), conclusions=False)
            room = budget * 19 // 20 - sum(self._est.count_text(x) for x in out)
            said = _said(found, messages, first=next(iter(requests), None))
            if self.summary_tokens is None:  # unbounded: a quarter of the input, not all of it
                room = min(room, budget // 4)
            kept = conversation_section(said, room, self._est)
            out += [kept] if kept else []
        else:
            out += self._fitted_lists(found, room)
        if not out:
            return ""
        return "\n\n".join([*out, end_mark()])

    def _earlier_sections(self, found: _Found, room: int) -> list[str]:
        """What an earlier summary said that no list holds — a model's prose and its
        own sections — whole while they fit ``room`` tokens, else head and tail of each."""
        bodies = {"Earlier summary": "\n\n".join(found.previous_free_text)}
        bodies.update(found.carried)
        bodies = {h: b for h, b in bodies.items() if b.strip()}
        sizes = [self._est.count_text(b) for b in bodies.values()]
        shares = _fair_shares(sizes, room)
        out = []
        for (header, body), size, share in zip(bodies.items(), sizes, shares, strict=True):
            out.append(section(header, body if share >= size else self._fit(body, share, size)))
        return out

    def _fitted_lists(self, found: _Found, room: int, *, conclusions: bool = True) -> list[str]:
        """The lists of ``found`` within ``room`` tokens, the newest items first."""
        n = self.max_items
        while True:
            lists = self._lists(
                found.edited,
                found.files,
                found.commands,
                found.errors,
                found.conclusions if conclusions else [],
                n,
            )
            if n <= 1 or sum(self._est.count_text(x) for x in lists) <= room:
                return lists
            n //= 2

    def _fit(self, text: str, share: int, size: int, what: str = SHORTENED_TEXT) -> str:
        """Head and tail of ``text`` (``size`` tokens) within ``share`` tokens; the
        marker in the middle says how many characters (``what``) were left out."""
        chars = _share_chars(text, share, size, len(what))
        short = _shorten(text, chars, what)
        for _ in range(4):  # the character model is close; correct it by what is left over
            over = self._est.count_text(short) - share
            if over <= 0 or chars <= MIN_REQUEST_CHARS:
                break
            chars = max(MIN_REQUEST_CHARS, chars - over * len(text) // max(size, 1) - 8)
            short = _shorten(text, chars, what)
        return short

    @staticmethod
    def _lists(
        edited: dict[str, None],
        files: dict[str, None],
        commands: dict[str, int],
        errors: dict[str, None],
        conclusions: list[str],
        n: int,
    ) -> list[str]:
        out: list[str] = []
        if edited:
            out.append(section("Files created or edited", bullets(list(edited)[-n:])))
        if files:
            out.append(section("Files touched", bullets(list(files)[-n:])))
        if commands:
            latest = [f"{c} (×{k})" if k > 1 else c for c, k in list(commands.items())[-n:]]
            out.append(section("Tool calls (latest)", bullets(latest)))
        if errors:
            out.append(section("Errors seen", bullets(list(errors)[-n:])))
        if conclusions:
            out.append(section("Latest conclusions", bullets(conclusions[-min(n, 3) :])))
        return out

    def _task_sections(self, requests: dict[str, int], budget: int) -> list[str]:
        texts = list(requests)
        sizes = [self._est.count_text(t) for t in texts]
        shares = _fair_shares(sizes, budget)
        out: list[str] = []
        for i, (text, size, share) in enumerate(zip(texts, sizes, shares, strict=True)):
            if share < size:  # never dropped: the head and tail, and where the whole is
                text = self._fit(text, share, size, REQUEST_ELIDED)
            header = "Task" if len(texts) == 1 else f"Task, user request {i + 1} of {len(texts)}"
            if requests[texts[i]] > 1:
                header += f", sent {requests[texts[i]]} times"
            out.append(section(header, text))
        return out
