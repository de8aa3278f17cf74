"""Calls sent as the agent's own messages: nothing converted while a history is below T.

A call the engine would send unchanged (no stored event, no compaction asked for,
the request below T, every tool call answered in its block) goes to the model as
the request came, and none of its messages is converted to a core message. The
history is bounded from the LangChain objects' own fields: the estimator's bound
of a message nothing counted yet is the message's UTF-8 bytes with the
estimator's overheads (:func:`ars_core.adapter.utf8_bound`), never below its
count, so a history bounded below T is below T for the engine too. A message in
another form (content blocks, a chunk, a ``ChatMessage``...) is converted and
bounded by the estimator itself. The tool calls are checked as
:func:`ars_core.pairing.pair_tool_calls` checks them, conservatively: whatever
might make it change the view (a result outside its call's block or answering a
call twice, a call without a result but in the last block, a call without an id, a
summary first) sends the call through the engine. The calls of the last block
without results are answered with the engine's own notes (a run interrupted while
its tools ran).

:class:`Passthrough` remembers the history it measured, and a call whose history
holds the same objects with messages appended measures only those (a warm
call reads what was appended; fresh objects, as a checkpointer's
deserialization builds, are measured whole).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ars_core import Compressor, Message, ToolCall
from ars_core.adapter import (
    MARK_SUMMARY,
    Tools,
    Utf8Bytes,
    fits_by_bound,
    fitting_bound,
    synthetic_result,
    utf8_bound,
    warn_unpaired,
)

from .convert import MARKERS_KEY, from_core, to_core
from .provider_count import history_ratio

__all__ = ["Passthrough", "Replay", "TooMuch", "grown_from", "sendable"]

# the classes whose fields are read directly: 0 plain, 1 may hold tool calls, 2 a result
_PLAIN, _CALLS, _RESULT = 0, 1, 2
_KINDS: dict[type, int] = {
    HumanMessage: _PLAIN,
    SystemMessage: _PLAIN,
    AIMessage: _CALLS,
    ToolMessage: _RESULT,
}
_NO_ARGS: dict[str, Any] = {}


class _Pairs:
    """The pairing of a history read so far: the calls of its last block still to be
    answered, whether its end is inside a call's block, whether the engine would
    change the view (``broken``: for good, whatever is appended)."""

    __slots__ = ("block", "broken", "in_block", "pending")

    def __init__(self, old: _Pairs | None = None, *, broken: bool = False) -> None:
        self.pending: set[str] = set(old.pending) if old else set()
        self.block: list[ToolCall] = old.block if old else []  # the last block's calls
        self.in_block: bool = old.in_block if old else False
        self.broken: bool = old.broken if old else broken

    def read(self, is_result: bool, call_id: str | None, calls: list[ToolCall] | None) -> None:
        """One more message: a result answering ``call_id``, or a message with ``calls``."""
        if is_result:
            if not self.in_block or call_id not in self.pending:
                self.broken = True  # outside its call's block, or answered twice
            else:
                self.pending.discard(call_id)
        elif calls:
            ids = {c.id for c in calls}
            if self.pending or "" in ids or len(ids) != len(calls):
                self.broken = True  # a call left unanswered, or one the engine skips
            self.pending, self.block, self.in_block = ids, calls, True
        else:
            if self.pending:
                self.broken = True
            self.in_block = False

    def unanswered(self) -> list[ToolCall]:
        """The calls of the last block without a result (the engine answers them with
        notes after the block, which ends the history), in their message's order."""
        return [c for c in self.block if c.id in self.pending]


def _converted(message: Any, estimator: Any) -> tuple[int, bool, str | None, list[ToolCall]]:
    """A message in another form: its bound by the estimator, as the engine reads it."""
    core = to_core(message)
    return (
        int(estimator.token_bound(core)),
        core.role == "tool",
        core.tool_call_id,
        list(core.tool_calls),
    )


def grown_from(prev: list[Any], messages: Sequence[Any]) -> bool:
    """Whether ``messages`` are ``prev`` (the same objects, or equal ones) with messages
    appended: ``prev`` grown by them and compared whole (by identity first, at C speed,
    no copy), then put back as it was."""
    n = len(prev)
    if not (0 < n <= len(messages) and messages[0] is prev[0]):
        return False
    prev.extend(messages[n:])
    try:
        return (messages if isinstance(messages, list) else list(messages)) == prev
    finally:
        del prev[n:]


class TooMuch(Exception):
    """More new text than an event loop measures: measure in a worker thread."""


class Passthrough:
    """The history a session last measured: the messages, their bound, their pairing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lc: list[Any] = []
        self._bound = 0
        self._pairs = _Pairs()
        self._warned: set[str] = set()  # the unanswered calls named in a warning
        self.measured = 0  # messages measured so far (a cost counter tests read)

    def measure(
        self,
        messages: Sequence[Any],
        counter: Utf8Bytes,
        estimator: Any,
        limit: int | None = None,
        stop_at: int | None = None,
    ) -> tuple[int, list[ToolCall]] | None:
        """The bound of ``messages`` (at least the estimator's count of their core
        forms) and the calls the engine would answer with notes, when that is all it
        would change; ``None`` when it might change more, or once the bound reaches
        ``stop_at`` (the rest is not read: a history above T is read no further than
        T's worth of its text, and what was read is remembered, so the next call on
        the same first messages reads only what lies past them). Raises :class:`TooMuch`
        (nothing remembered) once more than ``limit`` characters of new text would be
        read (an event loop measures only that much)."""
        with self._lock:
            prev = self._lc
            n_prev = len(prev)
            extends = grown_from(prev, messages)
            if extends:
                total, pairs, new = self._bound, _Pairs(self._pairs), messages[n_prev:]
            else:
                total, pairs, new = 0, _Pairs(broken=_summary_first(messages)), messages
            read = _read(
                new, pairs, counter, estimator, limit, None if stop_at is None else stop_at - total
            )
            self.measured += read[1]
            stopped = read[1] < len(new)  # the bound reached stop_at
            total += read[0]
            # what was read is remembered (a history above T: T's worth of its first
            # messages, which a longer call with the same first messages reads no more)
            same_first = bool(n_prev and messages) and _same(messages[0], prev[0])
            if extends:
                prev.extend(new[: read[1]] if stopped else new)
            elif not stopped:
                if not same_first:
                    self._warned = set()  # another history (a reloaded one keeps its warnings)
                self._lc = list(messages)
            elif same_first or not n_prev:  # (another history above T: nothing remembered)
                self._lc = list(messages[: read[1]])
            else:
                return None
            self._bound, self._pairs = total, pairs
        if stopped:  # no call goes out as it came
            return None
        return None if pairs.broken else (total, pairs.unanswered())

    def warn(self, calls: list[ToolCall]) -> None:
        """Name the calls answered with notes that no warning named yet (the engine's
        warning, once per history)."""
        with self._lock:
            new = [c.id for c in calls if c.id not in self._warned]
            self._warned.update(new)
        if new:
            warn_unpaired([], new)


def sendable(
    compressor: Compressor,
    passthrough: Passthrough,
    messages: Sequence[Any],
    system: Message | None,
    tools: Tools | None,
    limit: int | None = None,
) -> list[Any] | None:
    """The notes to send after ``messages`` when they go out as they came (the
    engine's decision for a call with no stored event and no compaction asked for:
    below T, nothing to pair but the last block's calls without results, which it
    answers with these notes); ``None`` when the engine must see the call. Raises
    :class:`TooMuch` once more than ``limit`` characters of new text would be read."""
    estimator = compressor.estimator
    counter = utf8_bound(estimator)
    if counter is None:  # only the engine can tell
        return None
    ratio = history_ratio(messages, estimator)  # as the engine reads it from the same answers
    reach = fitting_bound(compressor, ratio)
    measured = passthrough.measure(messages, counter, estimator, limit, reach)
    if measured is None:
        return None
    notes = [synthetic_result(c) for c in measured[1]]
    if not fits_by_bound(compressor, measured[0], system, tools, notes, ratio):
        return None
    passthrough.warn(measured[1])
    return [from_core(n) for n in notes]


class Replay:
    """The model's answer to a request sent as it came, given to the engine's first
    model call when the engine must see the call after all (the usage the model
    reported is recorded against the engine's count; a context overflow takes the
    forced path): that first call is the same request, the model is not called twice."""

    def __init__(self, response: Any = None, error: Exception | None = None) -> None:
        self.response = response
        self.error = error
        self.pending = True

    def take(self) -> Any:
        """The answer (raised when it was an error), once."""
        self.pending = False
        if self.error is not None:
            raise self.error
        return self.response


def _same(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b)


def _summary_first(messages: Sequence[Any]) -> bool:
    """Whether the first message may be an ARS summary (the engine's pairing skips one)."""
    if not messages:
        return False
    first = messages[0]
    if type(first) not in _KINDS:
        return bool(to_core(first).metadata.get(MARK_SUMMARY))
    meta = first.__dict__.get("response_metadata")
    return bool(meta) and MARKERS_KEY in meta


def _read(
    messages: Sequence[Any],
    pairs: _Pairs,
    counter: Utf8Bytes,
    estimator: Any,
    limit: int | None,
    stop_at: int | None = None,
) -> tuple[int, int]:
    """The bound of ``messages`` and how many were read, their pairing read into
    ``pairs``: all of them, or up to the one whose bound brings the total to
    ``stop_at``; raises :class:`TooMuch` past ``limit`` characters."""
    plain, count_call = counter.plain_fields, counter.count_tool_call
    total = chars = read = 0
    for m in messages:
        if stop_at is not None and total >= stop_at:
            break
        read += 1
        kind = _KINDS.get(type(m))
        values = m.__dict__
        content = values.get("content")
        if limit is not None:
            chars += _chars(content, values.get("tool_calls"))
            if chars > limit:
                raise TooMuch
        calls: list[ToolCall] | None = None
        call_id: str | None = None
        bound: int | None = None
        if kind is not None and type(content) is str:
            if kind == _RESULT:
                call_id = values.get("tool_call_id")
            bound = plain(content, values.get("name"), call_id)
            if kind == _CALLS and values.get("tool_calls"):
                bound, calls = _with_calls(bound, values["tool_calls"], count_call)
        if bound is None:
            bound, is_result, call_id, calls = _converted(m, estimator)
        else:
            is_result = kind == _RESULT
        total += bound
        pairs.read(is_result, call_id, calls)
    return total, read


def _with_calls(bound: int, calls: list[Any], count_call: Any) -> tuple[int | None, list[ToolCall]]:
    """``bound`` with LangChain's standard tool calls counted as the engine counts their
    core forms (the calls as it reads them); ``None`` for a call in another form."""
    out: list[ToolCall] = []
    for c in calls:
        args = c.get("args") or _NO_ARGS if type(c) is dict else None
        if type(args) is not dict or "name" not in c:
            return None, out
        call = ToolCall.of_fields(c.get("id") or "", c["name"], args)
        bound += count_call(call.id, call.name, args)
        out.append(call)
    return bound, out


def _chars(content: Any, calls: Any) -> int:
    """About how many characters measuring a message reads (its text and arguments)."""
    size = len(content) if type(content) is str else sum(map(_block_chars, content or ()))
    for c in calls or ():
        args = c.get("args") if isinstance(c, dict) else None
        if isinstance(args, dict):
            size += sum(len(v) if type(v) is str else 16 for v in args.values())
    return size


def _block_chars(block: Any) -> int:
    if type(block) is not dict:
        return len(block) if type(block) is str else len(str(block))
    return sum(len(v) if type(v) is str else len(str(v)) for v in block.values())
