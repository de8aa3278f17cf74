"""The extractive summarizer: a deterministic summary that needs no model.

:class:`ExtractiveSummarizer` keeps every user request (the task), the files
created, edited and touched, tool calls, errors seen and the latest
conclusions; for a conversation, what the people said. In the engine, which
writes the task beside the summary (:mod:`ars_core.task_text`), it is given
the task and leaves it out, listing an agent run's other requests instead.
It is the engine's default, the fallback when a summary model fails, and the
embedded default of the CLI. It merges an earlier summary it finds at the start of its input, so
round after round the summary stays one text.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

import attrs

from .budget import TASK_SHARE, task_share
from .conversation import (
    CONVERSATION_HEADER,
    Utterance,
    conversation_section,
    is_conversation,
    read_conversation,
    utterances,
)
from .errors import ConfigError
from .estimate import ApproxEstimator, Estimator
from .messages import Message
from .prompt import render_prompt
from .retention import (
    MARK_NOTE,
    command_text,
    edited_files,
    error_lines,
    is_earlier_summary,
    is_user_request,
)
from .summary_text import (
    MARK_OMITTED,
    OTHER_REQUESTS,
    archives_section,
    bullets,
    clip,
    end_mark,
    fair_shares,
    items,
    one_line,
    read_earlier,
    section,
)
from .task_text import fit_text, summary_frame, task_sections
from .usage import SummaryResult, Usage

__all__ = ["ExtractiveSummarizer"]

_PATH = re.compile(
    r"(?<![\w/.-])((?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.\w{1,8}|[\w-]+\.(?:py|js|ts|md|txt|json|toml|yaml|yml|cfg|ini|rs|go|java|c|h|cpp|sh|html|css))\b"
)

_TASK_HEADER = re.compile(r"^Task\b.*?(?:, sent (\d+) times)?$")
_COUNT = re.compile(r" \(×(\d+)\)$")
#: the modes of :class:`ExtractiveSummarizer`
_MODES = ("auto", "agent", "conversation")


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
    #: the user requests an earlier summary listed besides its task
    others: dict[str, None] = attrs.field(factory=dict)

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
            elif header == OTHER_REQUESTS:
                for item in items(body):
                    self.add(self.others, item)
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

    Given ``task`` (the engine passes it through :meth:`with_budget`: the
    requests it writes beside the summary), it writes no task sections; an
    agent run's other requests are listed (``Other user requests``).

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
        task: Sequence[str] | None = None,
    ) -> None:
        if mode not in _MODES:
            raise ConfigError("mode", mode, f"must be one of {', '.join(_MODES)}")
        self.mode = mode
        self.summary_tokens = summary_tokens
        self.task_tokens = task_tokens
        self.task = tuple(task) if task is not None else None
        self.max_items = max_items
        self._est = estimator or ApproxEstimator()

    def reads_whole_history(self, history: Sequence[Message]) -> bool:
        """Whether the engine hands it ``history`` whole rather than condensed: for
        a conversation (no model window bounds it, and every turn may hold a fact
        asked about later); an agent run reads the condensed input, as a summary
        model would."""
        return self.mode == "conversation" or (self.mode == "auto" and is_conversation(history))

    def with_budget(
        self,
        summary_tokens: int,
        *,
        task_tokens: int | None = None,
        task: Sequence[str] | None = None,
    ) -> ExtractiveSummarizer:
        """A copy bounded to ``summary_tokens`` (the engine's summary budget; this
        one's own bound when it was given one), the task given ``task_tokens`` of
        it when set. ``task``: the requests the engine writes beside the summary
        (the copy leaves them out)."""
        if self.summary_tokens is not None and task is None:
            return self
        bounded = copy.copy(self)  # a subclass stays one
        if self.summary_tokens is None:
            bounded.summary_tokens, bounded.task_tokens = summary_tokens, task_tokens
        bounded.task = tuple(task) if task is not None else None
        return bounded

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        rendered = render_prompt(prompt, messages)
        input_tokens = self._est.count_text(rendered)
        if self.summary_tokens is not None:
            # beside the engine's task, its sections (closed by its own end mark) take back
            # the header and end mark the engine's bound keeps for a model's prose
            frame = summary_frame(self._est) if self.task is not None else 0
            budget = self.summary_tokens + frame
            task_room = min(budget, self.task_tokens or task_share(budget))
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
        if self.task is None:
            out += task_sections(requests, task_budget, self._est)
        else:  # the engine writes the task beside the summary: the other requests are listed
            requests = {t: 1 for t in self.task[:1]}
            found.others.update((t, None) for t in found.requests if t not in self.task)
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
        if not out:  # nothing beside the task: a summary that says so, not an empty one
            return "" if self.task is None else end_mark()
        return "\n\n".join([*out, end_mark()])

    def _earlier_sections(self, found: _Found, room: int) -> list[str]:
        """What an earlier summary said that no list holds — a model's prose and its
        own sections — whole while they fit ``room`` tokens, else head and tail of each."""
        bodies = {"Earlier summary": "\n\n".join(found.previous_free_text)}
        bodies.update(found.carried)
        bodies = {h: b for h, b in bodies.items() if b.strip()}
        sizes = [self._est.count_text(b) for b in bodies.values()]
        shares = fair_shares(sizes, room)
        out = []
        for (header, body), size, share in zip(bodies.items(), sizes, shares, strict=True):
            if share < size:
                body = fit_text(self._est, body, share, size)
            out.append(section(header, body))
        return out

    def _fitted_lists(self, found: _Found, room: int, *, conclusions: bool = True) -> list[str]:
        """The lists of ``found`` within ``room`` tokens, the newest items first."""
        n = self.max_items
        while True:
            lists = self._lists(
                found.others if conclusions else {},
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

    @staticmethod
    def _lists(
        others: dict[str, None],
        edited: dict[str, None],
        files: dict[str, None],
        commands: dict[str, int],
        errors: dict[str, None],
        conclusions: list[str],
        n: int,
    ) -> list[str]:
        out: list[str] = []
        if others:
            latest = [one_line(t, 400) for t in list(others)[-n:]]
            out.append(section(OTHER_REQUESTS, bullets(latest)))
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
