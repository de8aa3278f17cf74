"""Retention audit: does a summarized view still hold what the agent needs?

After every L2 round the engine checks the new view (summary message + kept
messages) for the *anchors* an agent needs to carry on:

* ``task`` — the task statement: the user request(s) that set the work and
  the newest one (not tool results, not ARS's own messages; other user turns
  are conversation content), measured by :func:`task_retention`; the
  anchor counts as kept when at least :data:`TASK_KEPT` of it is in the view;
* ``file:<path>`` — files the summarized part created or edited;
* ``command:<text>`` — the latest commands of the summarized part (their
  results are what the agent was acting on);
* ``error:<line>`` — the last errors seen in the summarized part;
* ``id:<tool call id>`` — tool calls that results in the kept tail answer.

Everything here is pure and deterministic, so the benchmark and ``ars replay``
measure exactly what the engine records. The result is a :class:`Retention`,
stored in the event as ``retention`` (see :meth:`Retention.to_dict`).
"""

from __future__ import annotations

import functools
import json
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from . import memo
from .latest import last_distinct, last_places, ordered_by_last
from .memo import COMMANDS, EDITED_FILES, ERROR_LINES, REQUEST_TEXT, SparseIndex
from .messages import MARK_SUMMARY, Message, ToolCall
from .pending_form import cannot_hold
from .recent import Recent
from .text_pieces import collapsed as _norm
from .text_pieces import collapsed_framed, holds

__all__ = [
    "MARK_NOTE",
    "TASK_KEPT",
    "Retention",
    "audit_retention",
    "command_text",
    "edited_files",
    "error_lines",
    "is_earlier_summary",
    "is_user_request",
    "leading_requests",
    "newest_error_lines",
    "request_texts",
    "task_retention",
    "task_statement",
    "view_text",
]

#: metadata key of a note ARS inserted into a condensed history (never a user request)
MARK_NOTE = "ars_note"
#: share of the task statement a view must hold for the ``task`` anchor to count as kept
TASK_KEPT = 0.9
#: words per shingle when measuring how much of a text a view holds
SHINGLE_WORDS = 5

#: the latest commands and errors of the summarized part that are audited
LATEST = 3
#: the latest files created or edited that are audited
LATEST_FILES = 20
#: characters of a command / error line that must appear in the view
COMMAND_CHARS = 48
ERROR_CHARS = 80

#: content part types that carry tool output inside a user message (Anthropic style)
_TOOL_PART_TYPES = frozenset({"tool_result", "function_call_output", "tool_output"})
#: tools whose arguments name a file they write
_EDIT_TOOLS = frozenset(
    {"write_file", "edit_file", "create_file", "str_replace_editor", "apply_patch", "write"}
)
_PATH_ARGS = ("file_path", "path", "filename", "file", "target_file")
_PATHLIKE = re.compile(r"^[\w.~/-]*[\w-]\.\w{1,8}$|^[\w.~-]*/[\w./~-]+$")
#: shell commands that write a file: (text every match holds, pattern); a command
#: without the text is not searched
_SHELL_WRITES = (
    (">", re.compile(r"(?<![<>&\d])>>?\s*['\"]?([^\s'\";|&<>()]+)")),  # redirections
    ("tee", re.compile(r"\btee\s+(?:-a\s+)?['\"]?([^\s'\";|&<>()]+)")),
    ("touch", re.compile(r"\btouch\s+['\"]?([^\s'\";|&<>()]+)")),
    (
        "sed",
        re.compile(
            r"\bsed\s+-i\S*\s+(?:-e\s+)?(?:'[^']*'|\"[^\"]*\"|\S+)\s+['\"]?([^\s'\";|&<>()]+)"
        ),
    ),
)
#: a line that reports an error. Searched once over a whole tool result first: no line
#: separator is a word character or part of a match, so the text matches iff a line does
#: (and no ``\w*`` prefix: the engine skips ahead instead of trying a word at every position)
_ERROR = re.compile(r"Traceback|Error\b|Exception\b|error:|\bfailed\b|FAILED|No such file")
#: a word each match of :data:`_ERROR` holds
_ERROR_WORDS = ("Traceback", "Error", "Exception", "error:", "failed", "FAILED", "No such file")


@attrs.frozen
class Retention:
    """What the audit found: anchors kept and missing, and the task share kept.

    Anchors are ``"task"`` or ``"<kind>:<value>"`` strings (kinds ``file``,
    ``command``, ``error``, ``id``).
    """

    found: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    task_fraction: float = 1.0

    @property
    def fraction(self) -> float:
        """Share of anchors kept (1.0 when there was nothing to keep)."""
        total = len(self.found) + len(self.missing)
        return len(self.found) / total if total else 1.0

    @property
    def task_kept(self) -> bool:
        """Whether the view holds at least :data:`TASK_KEPT` of the task statement."""
        return self.task_fraction >= TASK_KEPT

    def to_dict(self) -> dict[str, Any]:
        """``{"found": [...], "missing": [...], "fraction": f, "task_fraction": f}``."""
        return {
            "found": list(self.found),
            "missing": list(self.missing),
            "fraction": round(self.fraction, 4),
            "task_fraction": round(self.task_fraction, 4),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Retention:
        return cls(
            found=tuple(data.get("found") or ()),
            missing=tuple(data.get("missing") or ()),
            task_fraction=float(data.get("task_fraction", 1.0)),
        )


# ------------------------------------------------------------------ what the agent needs


def is_user_request(message: Message) -> bool:
    """A message the user wrote: role ``user``, not a tool result, not inserted by ARS
    (summary, note) nor by another harness's summarization."""
    if message.role != "user":
        return False
    meta = message.metadata  # most messages have none: one test, no look-up
    if meta and (meta.get(MARK_SUMMARY) or meta.get(MARK_NOTE) or _harness_inserted(meta)):
        return False
    if not isinstance(message.content, str):
        parts = message.content
        if parts and all(p.type in _TOOL_PART_TYPES for p in parts):
            return False
    return bool(message.text.strip())


def is_earlier_summary(message: Message) -> bool:
    """A summary already in the history: ARS's own, or one another harness inserted
    (LangChain marks its summaries with ``lc_source``). A later summary builds on it
    (merged, never dropped as if nobody wrote it)."""
    meta = message.metadata
    if not meta:  # most messages have none: one test, no look-up
        return False
    return bool(meta.get(MARK_SUMMARY)) or (message.role != "system" and _harness_inserted(meta))


def _harness_inserted(meta: Mapping[str, Any]) -> bool:
    """Marked as added by an agent harness (LangChain's ``lc_source``, kept by an
    adapter at the top level or inside the framework's ``additional_kwargs``)."""
    if meta.get("lc_source"):
        return True
    for value in meta.values():  # (a dict is told from a Mapping without the ABC's look)
        if isinstance(value, dict) or isinstance(value, Mapping):
            kwargs = value.get("additional_kwargs")
            if kwargs is not None and isinstance(kwargs, Mapping) and kwargs.get("lc_source"):
                return True
    return False


def task_statement(messages: Iterable[Message]) -> list[str]:
    """The task: the request(s) that set the work — the first user request and the ones
    sent right after it, before anything else — and the newest request, in order, each
    distinct text once. The other user turns are conversation content, not the task
    (for a one-request agent run the task is that request)."""
    if isinstance(messages, Sequence):  # a history: only its requests are looked at
        positions, texts = memo.current().index("retention:requests", _request_text)(messages)
    else:
        found = [(i, t) for i, t in enumerate(map(_request_text, messages)) if t]
        positions, texts = [i for i, _ in found], [t for _, t in found]
    return list(dict.fromkeys(texts[: leading_requests(positions)] + texts[-1:]))


def request_texts(messages: Sequence[Message]) -> list[str]:
    """The text of every user request in ``messages``, in order (kept as the history
    grows: a longer history reads only its new messages)."""
    return memo.current().index("retention:requests", _request_text)(messages)[1]


def leading_requests(positions: Sequence[int]) -> int:
    """How many of the requests at ``positions`` (ascending) set the work: the
    first and the ones right after it (no other message between them)."""
    n = min(1, len(positions))
    while n < len(positions) and positions[n] == positions[n - 1] + 1:
        n += 1
    return n


def _request_text(m: Message) -> str:
    """``m``'s text as a user request, "" when it is none (kept on the message)."""
    return REQUEST_TEXT.of(m, _find_request)


def _find_request(m: Message) -> str:
    return m.text.strip() if is_user_request(m) else ""


def _arg_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _pathlike(candidate: str) -> bool:
    return bool(_PATHLIKE.match(candidate)) and not candidate.startswith("/dev/")


def _latest(messages: Sequence[Message], reader: str, k: int) -> list[str]:
    """``ordered_by_last`` of what ``reader`` (``"edited"``, ``"errors"`` or
    ``"commands"``) finds in every message, last ``k`` only: read from the newest
    message back, stopping once ``k`` distinct items are found. A history that grew
    from one read before has only the messages that hold something looked at (and
    its new ones read); any other is read from its newest message back, no further
    than the ``k`` items take (kept for the next rounds when read to its start)."""
    index = _index(reader)
    if not messages:
        return []
    return last_places(index, messages, reader, k, lambda: _read_back(index, messages, reader))


#: messages whose kept values :func:`_read_back` looks up at once
READ_BACK_CHUNK = 64


def _read_back(
    index: SparseIndex[tuple[str, ...]], messages: Sequence[Message], reader: str
) -> Iterator[tuple[str, ...]]:
    """What ``reader`` finds in ``messages``, newest message first, read as the caller
    asks: the values kept on a stretch of messages are looked up at once (a message
    read before costs a dictionary lookup), the others read; a reading taken to the
    first message is kept by ``index``."""
    family, value_of = _KEPT[reader], _READERS[reader]
    positions: list[int] = []
    values: list[tuple[str, ...]] = []
    end = len(messages)
    while end:
        start = max(0, end - READ_BACK_CHUNK)
        kept = family.get_many(messages[start:end], family.name)
        for i in range(end - 1, start - 1, -1):
            value = kept[i - start]
            if value is None:
                value = value_of(messages[i])
            if value:
                positions.append(i)
                values.append(value)
                yield value
        end = start
    index.remember(messages, positions[::-1], values[::-1])


def _edited_in(m: Message) -> tuple[str, ...]:
    """The paths ``m``'s tool calls write, in order (kept on the message: the audit of
    every later round that covers it reads them again)."""
    return EDITED_FILES.of(m, lambda m: tuple(_find_edited(m)) if m.tool_calls else ())


def _find_edited(m: Message) -> list[str]:
    found: list[str] = []
    for call in m.tool_calls:
        if call.name in _EDIT_TOOLS:
            for key in _PATH_ARGS:
                value = call.args.get(key)
                if isinstance(value, str) and value.strip():
                    found.append(value.strip())
                    break
            continue
        for value in call.args.values():
            if not isinstance(value, str):
                continue
            for needed, pattern in _SHELL_WRITES:
                if needed in value:
                    found += [path for path in pattern.findall(value) if _pathlike(path)]
    return found


def edited_files(messages: Iterable[Message], *, last: int | None = None) -> list[str]:
    """Paths that assistant tool calls created or edited, oldest first, each once
    (ordered by their last edit; with ``last``, only the latest ``last`` of them,
    read from the newest message back).

    File-writing tools name them in a path argument; shell commands through
    redirections, ``tee``, ``touch`` and ``sed -i``.
    """
    if last is not None:
        return _latest(_sequence(messages), "edited", last)
    return ordered_by_last(path for m in messages for path in _edited_in(m))


def _sequence(messages: Iterable[Message]) -> Sequence[Message]:
    return messages if isinstance(messages, Sequence) else list(messages)


def _errors_in(m: Message) -> tuple[str, ...]:
    """The error lines of tool result ``m``, kept on it (later rounds' audit and note read
    them again); none for a pending offload form that cannot hold an error word."""
    return ERROR_LINES.of(m, _tool_errors)


def _tool_errors(m: Message) -> tuple[str, ...]:
    return () if m.role != "tool" or cannot_hold(m, _ERROR_WORDS) else _find_errors(m.text)


def _find_errors(text: str) -> tuple[str, ...]:
    """The lines of ``text`` :data:`_ERROR` finds something in, in order. Each match
    holds one of :data:`_ERROR_WORDS`, so only the lines holding one are searched:
    each word's next place is found by a C-speed scan (most results hold none), and
    the line (``\n`` to ``\n``, read as ``splitlines`` reads it) of the nearest one."""
    ahead = {w: i for w in _ERROR_WORDS if (i := text.find(w)) >= 0}
    found: list[str] = []
    search = _ERROR.search
    while ahead:
        at = min(ahead.values())
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        stretch = text[start:end]
        if search(stretch):
            found += [_norm(line) for line in stretch.splitlines() if search(line)]
        for word in [w for w, i in ahead.items() if i <= end]:  # past this stretch
            i = text.find(word, end + 1)
            if i < 0:
                del ahead[word]
            else:
                ahead[word] = i
    return tuple(found)


def error_lines(messages: Iterable[Message], *, last: int | None = None) -> list[str]:
    """Lines of tool results that report an error, oldest first, each distinct line once
    (whitespace collapsed; with ``last``, only the latest ``last`` of them)."""
    if last is not None:
        return _latest(_sequence(messages), "errors", last)
    return ordered_by_last(line for m in messages for line in _errors_in(m))


def newest_error_lines(messages: Sequence[Message], k: int) -> list[str]:
    """``error_lines(messages, last=k)`` read message by message from the newest back,
    no further than the ``k`` lines take: the older messages are not looked at (no
    index of ``messages`` is kept; for a history read once)."""
    return last_distinct(map(_errors_in, reversed(messages)), k)


def command_text(call: ToolCall) -> str:
    """A tool call's arguments as one line of text (how summaries and the audit quote it)."""
    return _norm(" ".join(_arg_text(v) for v in call.args.values()))


def _commands_in(m: Message) -> tuple[str, ...]:
    """The commands ``m``'s tool calls run, clipped (kept on the message)."""
    return COMMANDS.of(m, lambda m: tuple(_find_commands(m)) if m.tool_calls else ())


#: what each reader finds in a message; where in a history the messages holding
#: something are is kept by the engine's memo as the history grows
_READERS: dict[str, Callable[[Message], tuple[str, ...]]] = {
    "edited": lambda m: _edited_in(m),
    "errors": lambda m: _errors_in(m),
    "commands": lambda m: _commands_in(m),
}


#: where each reader's values are kept on a message
_KEPT = {"edited": EDITED_FILES, "errors": ERROR_LINES, "commands": COMMANDS}


def _index(reader: str) -> SparseIndex[tuple[str, ...]]:
    return memo.current().index(f"retention:{reader}", _READERS[reader])


def _find_commands(m: Message) -> list[str]:
    found: list[str] = []
    for call in m.tool_calls:
        if call.name not in _EDIT_TOOLS:
            text = command_text(call)[:COMMAND_CHARS].strip()
            if text:
                found.append(text)
    return found


# ------------------------------------------------------------------ measuring a view


def view_text(view: Iterable[Message]) -> str:
    """Everything a model reads in ``view``: message texts and tool-call arguments, whitespace
    collapsed (each message's words, then the next's). The running engine keeps the text of the last
    :data:`VIEW_TEXTS` messages read (the kept tail of one round is most of the next round's)."""
    texts: Recent[tuple[Message, str]] = memo.current().single(
        "retention:view-texts", lambda: Recent(VIEW_TEXTS)
    )
    return " ".join(t for m in view if (t := _text_of(texts, m)))


def _text_of(texts: Recent[tuple[Message, str]], m: Message) -> str:
    kept, text = texts.get(id(m), functools.partial(_message_text, m))
    return text if kept is m else _message_text(m)[1]


#: messages whose audit text an engine keeps (a view's kept tail and summary)
VIEW_TEXTS = 32


def _message_text(m: Message) -> tuple[Message, str]:
    """``m`` (kept with its text: no other object takes its id while it is kept) and
    its texts and tool-call arguments, whitespace collapsed."""
    chunks = [m.text]
    for call in m.tool_calls:
        chunks.append(call.name)
        chunks.extend(_arg_text(v) for v in call.args.values())
    middles: Recent[str] = memo.current().single("retention:middles", lambda: Recent(MIDDLES))
    return m, collapsed_framed("\n".join(chunks), middles)


#: middles of long message texts an engine keeps collapsed (a summary message's)
MIDDLES = 2


def task_retention(
    task: str | Sequence[str], view: Sequence[Message] | str, *, collapsed: bool = False
) -> float:
    """The share of the task statement that ``view`` holds, in ``[0, 1]``.

    ``task`` is one text or the list :func:`task_statement` returns; ``view`` is a message
    list or its :func:`view_text` (``collapsed``: a text spaced as that one, where a request
    holding other whitespace is not looked for verbatim). A word of the task counts as kept
    when it is part of a run of :data:`SHINGLE_WORDS` consecutive task words that appears
    verbatim (whitespace aside) in the view. Tasks shorter than that count as kept when
    they appear whole. An empty task is kept.

    Each task's runs are worked out once (:func:`_task_runs`, kept for the next
    rounds, whose task is mostly the same texts): a round makes the view's runs
    and looks each task run up in them. A request found verbatim in the view (as
    the engine writes the task into its summary) is kept whole without that
    lookup; the view's runs are made only when some request is not.
    """
    texts = (task,) if isinstance(task, str) else tuple(task)
    collapsed, text = (collapsed, view) if isinstance(view, str) else (True, view_text(view))
    indexes = _task_runs(texts)
    total = sum(index.words for index in indexes)
    if not total:
        return 1.0
    common: frozenset[int] | None = None
    padded: str | None = None
    kept = 0
    for source, index in zip(texts, indexes, strict=True):
        if index.whole is not None:
            kept += index.words if _whole_words_in(index.whole, text) else 0
        elif (index.spaced or not collapsed) and holds(text, source):  # verbatim: every run
            kept += index.words
        else:
            if padded is None:
                padded = f" {text} "
            if holds(padded, index.bordered):  # its words, in order, are some of the view's
                kept += index.words
                continue
            if common is None:
                common = frozenset(_runs(text.split()))
            kept += index.covered(common)
    return kept / total


def _runs(words: Sequence[str]) -> Iterable[int]:
    """Every run of :data:`SHINGLE_WORDS` consecutive words, as the hash of the run
    joined by a space (the words hold no whitespace, so equal strings are equal runs;
    a 64-bit hash stands for the run: what is kept of a task is 8 bytes a run)."""
    return map(hash, map(" ".join, zip(*(words[i:] for i in range(SHINGLE_WORDS)), strict=False)))


def _whole_words_in(words: str, text: str) -> bool:
    """Whether ``words`` is in ``text`` as whole words: an occurrence with whitespace
    (or the text's end) either side, so "fix it" is not found in "fix items"."""
    at = text.find(words)
    while at >= 0:
        end = at + len(words)
        if (not at or text[at - 1].isspace()) and (end == len(text) or text[end].isspace()):
            return True
        at = text.find(words, at + 1)
    return False


class _TaskIndex:
    """One task text's words: their count, the text itself when shorter than a run
    (``whole``), else its runs in order (``runs``, 8-byte hashes), and the last
    coverage worked out (the same runs are found in the view round after round).
    ``bordered`` is its words joined by single spaces, a space either side: found in
    a text so bordered, its words are consecutive words of that text (so every run
    of it is one of the text's), as when a summary holds the request whole."""

    __slots__ = ("bordered", "last", "runs", "spaced", "whole", "words")

    def __init__(self, task: str) -> None:
        words = task.split()
        self.words = len(words)
        joined = " ".join(words)
        self.spaced = "  " not in task and task.strip(" ") == joined  # only single spaces
        self.whole = joined if self.words < SHINGLE_WORDS else None
        self.bordered = f" {joined} "
        self.runs = array("q", _runs(words) if self.whole is None else ())
        self.last: tuple[frozenset[int], int] = (frozenset(), 0)

    def covered(self, in_view: frozenset[int]) -> int:
        """How many of the task's words a run found in ``in_view`` covers."""
        found = in_view.intersection(self.runs)
        last_found, last_covered = self.last
        if found == last_found:
            return last_covered
        covered = _covered(list(map(found.__contains__, self.runs)), SHINGLE_WORDS)
        self.last = (found, covered)
        return covered


#: task texts whose index an engine keeps
INDEXED_TEXTS = 16


def _task_runs(texts: tuple[str, ...]) -> list[_TaskIndex]:
    """The index of each task text, kept by the engine for the last
    :data:`INDEXED_TEXTS` texts (:class:`~ars_core.recent.Recent`): a request is
    indexed once, round after round, whichever request comes after it."""
    indexes: Recent[_TaskIndex] = memo.current().single(
        "retention:task-index", lambda: Recent(INDEXED_TEXTS)
    )
    return [indexes.get(text, functools.partial(_TaskIndex, text)) for text in texts]


def _covered(hits: list[bool], k: int) -> int:
    """How many words the shingles flagged in ``hits`` cover (shingle ``i`` covers words ``i`` to
    ``i + k - 1``). The flags are the bytes of one integer: shifting it by a byte spreads each hit
    over the next word, and the set bits are then the covered words."""
    flags = int.from_bytes(bytes(hits) + bytes(k - 1), "big")
    spread = flags
    for shift in range(1, k):
        spread |= flags >> (8 * shift)
    return spread.bit_count()


def audit_retention(
    summarized: Sequence[Message],
    view: Sequence[Message],
    *,
    task: Sequence[str] | None = None,
    tail: Sequence[Message] | None = None,
    text: str | None = None,
) -> Retention:
    """Check the anchors of ``summarized`` (the original messages an L2 round
    replaced) in ``view`` (summary message + kept messages).

    ``task`` defaults to :func:`task_statement` of ``summarized`` and ``view``
    (pass the one of the whole conversation when earlier rounds summarized its
    start). ``tail`` (default: ``view[1:]``) is where tool results whose calls
    must stay in the view are looked for. ``text`` is :func:`view_text` of
    ``view`` when the caller already made it (read here otherwise).
    """
    if text is None:
        text = view_text(view)
    if task is None:
        task = task_statement([*summarized, *view])
    kept_tail = view[1:] if tail is None else tail
    found: list[str] = []
    missing: list[str] = []

    def check(anchor: str, ok: bool) -> None:
        (found if ok else missing).append(anchor)

    task_fraction = task_retention(task, text, collapsed=True)
    if task:
        check("task", task_fraction >= TASK_KEPT)
    for path in _latest(summarized, "edited", LATEST_FILES):
        check(f"file:{path}", holds(text, path))
    for command in _latest(summarized, "commands", LATEST):
        check(f"command:{command}", holds(text, command))
    for line in _latest(summarized, "errors", LATEST):
        clipped = line[:ERROR_CHARS].strip()
        check(f"error:{clipped}", holds(text, clipped))
    calls = {c.id for m in view for c in m.tool_calls}
    for m in kept_tail:
        if m.role == "tool" and m.tool_call_id is not None:
            check(f"id:{m.tool_call_id}", m.tool_call_id in calls)
    return Retention(found=tuple(found), missing=tuple(missing), task_fraction=task_fraction)
