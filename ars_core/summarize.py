"""Summarizers: turn older history into one summary text.

A :class:`Summarizer` takes the *cleaned* history (L1 previews instead of huge
tool results) and the ``summary_prompt`` template, and returns the summary text
with the summary call's own token usage, kept apart from the main model's.
:class:`AsyncSummarizer` is the async twin; the engine runs a sync one
in a worker thread on the async path.

:func:`condense_history` bounds what the summary model reads: when the history
is larger than its budget, older middle parts are shortened while the previous
summary and the first user task stay whole. The summarizer is always called;
ARS never stores a placeholder instead of a summary.

:class:`ExtractiveSummarizer` is a deterministic summarizer that needs no model
(task, files and commands touched, errors seen, latest conclusions): the
embedded default of the CLI and a usable fallback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from .estimate import ApproxEstimator, Estimator, message_tokens
from .messages import MARK_SUMMARY, Message

__all__ = [
    "AsyncSummarizer",
    "CallableSummarizer",
    "ExtractiveSummarizer",
    "Summarizer",
    "SummaryResult",
    "Usage",
    "condense_history",
    "render_history",
    "render_prompt",
]


@attrs.frozen
class Usage:
    """Token usage of one model call, as the provider reported it (or estimated)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = attrs.field()

    @total_tokens.default
    def _total(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        return cls(
            input_tokens=int(data.get("input_tokens", 0)),
            output_tokens=int(data.get("output_tokens", 0)),
            total_tokens=int(data.get("total_tokens", 0)),
        )


@attrs.frozen
class SummaryResult:
    """What a summarizer returns: the text, the call's usage, and the model used."""

    text: str
    usage: Usage | None = None
    model: str | None = None


@runtime_checkable
class Summarizer(Protocol):
    """Synchronous summarizer."""

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        """Summarize ``messages`` with the ``prompt`` template (it holds ``{messages}``)."""
        ...


@runtime_checkable
class AsyncSummarizer(Protocol):
    """Asynchronous summarizer."""

    async def asummarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        """Async twin of :meth:`Summarizer.summarize`."""
        ...


def render_history(messages: Sequence[Message]) -> str:
    """The history as plain text for a summary prompt: one block a message,
    tool calls as ``-> name(args)``, tool results labelled with their tool."""
    blocks: list[str] = []
    for m in messages:
        if m.metadata.get(MARK_SUMMARY):
            head = "[previous summary]"
        elif m.role == "tool":
            head = f"[tool result: {m.name or 'tool'}]"
        else:
            head = f"[{m.role}]"
        lines = [head]
        if m.text:
            lines.append(m.text)
        for call in m.tool_calls:
            args = json.dumps(dict(call.args), ensure_ascii=False, default=str)
            lines.append(f"-> {call.name}({args})")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render_prompt(prompt: str, messages: Sequence[Message]) -> str:
    """Put the rendered history into ``prompt`` at ``{messages}`` (other braces are left alone)."""
    return prompt.replace("{messages}", render_history(messages))


def _shorten(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    head = max_chars * 3 // 4
    tail = max_chars - head
    end = text[-tail:] if tail else ""
    return f"{text[:head]}\n[... {len(text) - max_chars} characters shortened ...]\n{end}"


def _shorten_message(m: Message, max_chars: int) -> Message:
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
    return attrs.evolve(m, content=_shorten(m.text, max_chars), tool_calls=calls)


def condense_history(
    messages: Sequence[Message],
    budget: int,
    estimator: Estimator | None = None,
    *,
    shortened_chars: int = 600,
) -> list[Message]:
    """Fit ``messages`` into ``budget`` tokens for the summary model.

    The previous summary, system messages, the first user message (the task)
    and the newest message stay whole. The rest is taken newest first: whole
    while it fits, then shortened (head and tail of each message), and the
    oldest that fit not even shortened are replaced by one note saying how many
    were omitted (their text is in the archive file). Returns a new list (the
    input is untouched); the same list content when it already fits. Work is
    proportional to what is kept, and shortened forms are cached.
    """
    est = estimator or ApproxEstimator()
    n = len(messages)
    sizes = [message_tokens(est, m) for m in messages]
    if sum(sizes) <= budget:
        return list(messages)
    fixed = _kept_whole(messages)
    out: list[Message | None] = [messages[i] if i in fixed else None for i in range(n)]
    room = budget - sum(sizes[i] for i in fixed)
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
    result = _noting_omissions(out)
    if room < 0:  # the fixed messages alone are too big: shorten the largest of them too
        result = [
            _shortened(m, max(200, budget * 2)) if message_tokens(est, m) > budget // 4 else m
            for m in result
        ]
    return result


def _kept_whole(messages: Sequence[Message]) -> set[int]:
    """Positions :func:`condense_history` keeps whole: the previous summary,
    system messages, the first user message (the task) and the newest message."""
    fixed = {
        i for i, m in enumerate(messages) if m.metadata.get(MARK_SUMMARY) or m.role == "system"
    }
    first_user = next(
        (i for i, m in enumerate(messages) if m.role == "user" and i not in fixed), None
    )
    if first_user is not None:
        fixed.add(first_user)
    fixed.add(len(messages) - 1)
    return fixed


def _noting_omissions(out: list[Message | None]) -> list[Message]:
    """The kept messages, with one note where the omitted ones (``None``) were."""
    omitted = sum(1 for m in out if m is None)
    result: list[Message] = []
    noted = False
    for kept in out:
        if kept is not None:
            result.append(kept)
        elif not noted:
            noted = True
            result.append(
                Message(
                    role="user",
                    content=f"[{omitted} older messages omitted here to fit the summary budget; "
                    "their full text is in the conversation history file]",
                    metadata={MARK_NOTE: True},
                )
            )
    return result


def _shortened(m: Message, max_chars: int) -> Message:
    key = ("ars_shortened", max_chars)
    cached = m._cache.get(key)
    if cached is None:
        cached = m._cache[key] = _shorten_message(m, max_chars)
    return cached


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
        rendered = render_prompt(prompt, messages)
        if self._afn is not None:
            return self._result(rendered, await self._afn(rendered))
        assert self._fn is not None
        return self._result(rendered, self._fn(rendered))


_PATH = re.compile(
    r"(?<![\w/.-])((?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.\w{1,8}|[\w-]+\.(?:py|js|ts|md|txt|json|toml|yaml|yml|cfg|ini|rs|go|java|c|h|cpp|sh|html|css))\b"
)
#: metadata key of a note ARS inserted into a condensed history
MARK_NOTE = "ars_note"

_ERROR = re.compile(
    r"(Traceback|Error\b|Exception\b|error:|failed|FAILED|No such file)", re.IGNORECASE
)


class ExtractiveSummarizer:
    """A deterministic summarizer that needs no model.

    Extracts the task statement (the first user message and any previous
    summary), files and commands touched, errors seen and the latest
    assistant conclusions. The prompt template is not sent anywhere; its
    rendered size is reported as the call's input usage.
    """

    name = "extractive"

    def __init__(
        self, *, task_chars: int = 3000, max_items: int = 15, estimator: Estimator | None = None
    ) -> None:
        self.task_chars = task_chars
        self.max_items = max_items
        self._est = estimator or ApproxEstimator()

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        text = self._extract(messages)
        usage = Usage(
            input_tokens=self._est.count_text(render_prompt(prompt, messages)),
            output_tokens=self._est.count_text(text),
        )
        return SummaryResult(text=text, usage=usage, model="ars-extractive")

    async def asummarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        return self.summarize(messages, prompt)

    def _extract(self, messages: Sequence[Message]) -> str:
        # a previous summary is merged, section by section, not nested
        earlier = {}
        for m in messages:
            if m.metadata.get(MARK_SUMMARY):
                earlier = _sections(m.text)
        task = next(
            (
                m.text.strip()
                for m in messages
                if m.role == "user"
                and not (m.metadata.get(MARK_SUMMARY) or m.metadata.get(MARK_NOTE))
            ),
            "",
        )
        task = earlier.get("Task") or task  # the original task survives chained summaries
        files: dict[str, None] = dict.fromkeys(_items(earlier.get("Files touched", "")))
        commands: list[str] = _items(earlier.get("Tool calls (latest)", ""))
        errors: dict[str, None] = dict.fromkeys(_items(earlier.get("Errors seen", "")))
        conclusions: list[str] = _items(earlier.get("Latest conclusions", ""))
        for m in messages:
            if m.role == "assistant":
                if m.text.strip():
                    conclusions.append(_one_line(m.text, 400))
                for call in m.tool_calls:
                    arg_text = " ".join(str(v) for v in call.args.values())
                    commands.append(f"{call.name}: {_one_line(arg_text, 200)}")
                    for path in _PATH.findall(arg_text):
                        files[path] = None
            elif m.role == "tool":
                for line in m.text.splitlines():
                    if _ERROR.search(line):
                        errors[_one_line(line, 200)] = None
        sections: list[str] = []
        if task:
            sections.append("## Task\n" + _clip(task, self.task_chars))
        if files:
            sections.append(
                "## Files touched\n" + "\n".join(f"- {f}" for f in list(files)[-self.max_items :])
            )
        if commands:
            sections.append(
                "## Tool calls (latest)\n"
                + "\n".join(f"- {c}" for c in commands[-self.max_items :])
            )
        if errors:
            sections.append(
                "## Errors seen\n" + "\n".join(f"- {e}" for e in list(errors)[-self.max_items :])
            )
        if conclusions:
            sections.append(
                "## Latest conclusions\n" + "\n".join(f"- {c}" for c in conclusions[-3:])
            )
        return "\n\n".join(sections)


def _sections(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            out[current] = ""
        elif current is not None:
            out[current] += line + "\n"
    return {k: v.strip() for k, v in out.items()}


def _items(section: str) -> list[str]:
    return [ln[2:] for ln in section.splitlines() if ln.startswith("- ")]


def _one_line(text: str, limit: int) -> str:
    return _clip(" ".join(text.split()), limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
