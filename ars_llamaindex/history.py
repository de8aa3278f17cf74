"""The stored conversation as core messages, converted incrementally.

``ArsMemory`` reads its chat store on every ``get``. A :class:`ChatHistory`
remembers the messages it read last time with their core twins, so a call
converts only what changed:

* the stored messages are compared with the remembered ones as a whole list, at
  C speed (by identity first: ``SimpleChatStore`` hands out its own objects,
  so an unchanged history compares pointer by pointer; by value where the
  objects differ, as in a store that deserializes each read);
* a history that only grew has its new messages converted, nothing else;
* a cheap check guards against edits made in place: the stored message at the
  first, the middle and the last remembered positions must still equal ARS's
  copy of it; when one does not, everything is converted again;
* any other change (a message replaced, removed or inserted, ``set``,
  ``reset``) keeps the conversions of the unchanged messages before and after
  it and converts the ones in between.

The view goes back to LlamaIndex messages through :meth:`ChatHistory.back_all`:
the history's messages become copies of the stored ones, never the stored
objects. ARS's own copy of each message is made once, when it is converted,
and is shared by the views that hold it; the newest :data:`FRESH_TAIL`
messages of a view are copied afresh on every call, because agents edit them
in place (``FunctionAgent`` formats its state into the last message).

The last view is remembered with its LlamaIndex messages while the history only
grows: a view that holds the last one's messages in the same places (under the
core's :func:`~ars_core.memo.unchanged_prefix` rule, one list comparison) maps
back only what follows them, and when it does not, all but the last view's
newest :data:`VIEW_TAIL` messages are tried (where a result arriving replaces
the note that stood in for it). Any other view is mapped by slicing where it
ends with the history's end, else message by message. So a call costs about
the same at 500 messages and at 5,000.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage

from ars_core import Message
from ars_core.adapter import unchanged_prefix

from .convert import answered_tool, core_name, from_core, same_message, to_core

__all__ = ["FRESH_TAIL", "VIEW_HEAD", "VIEW_TAIL", "ChatHistory"]

#: the newest messages of a view, copied afresh from the stored ones on every call
FRESH_TAIL = 8
#: the messages at the start of a view mapped one by one when the rest is the
#: history's end (the summary, and kept messages sent in another form)
VIEW_HEAD = 32
#: the newest messages of the last view mapped again when the history grew (where
#: a result arriving replaces the note that stood in for it)
VIEW_TAIL = 32


class ChatHistory:
    """One conversation's stored messages, their core twins and ARS's copies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._chat: list[ChatMessage] = []  # the stored messages as last read
        self._core: list[Message] = []  # their core twins
        self._copies: list[ChatMessage] = []  # ARS's copies, handed out in views
        self._names: dict[str, str] = {}  # tool call id -> tool name, over the whole history
        self._pos: dict[int, int] = {}  # id(core twin) -> its position
        # LlamaIndex forms of the last view's other messages (the summary, L1's copies)
        self._made: dict[int, tuple[Message, ChatMessage]] = {}
        # the last view and its LlamaIndex forms (before the fresh newest copies), valid
        # while the history only grows: the epoch counts the histories taken whole
        self._view: tuple[list[Message], list[ChatMessage]] = ([], [])
        self._epoch = self._view_epoch = 0
        self.converted = 0  # messages converted so far (a cost counter tests read)
        self.mapped = 0  # view messages mapped back one by one (a cost counter tests read)
        self.rewritten = False  # whether the last update saw an edit, not just an append

    # ------------------------------------------------------------ to the core

    def known(self) -> list[ChatMessage]:
        """The stored messages as last read (the caller must not mutate them)."""
        return self._chat

    def update(self, stored: Sequence[ChatMessage]) -> tuple[list[Message], list[ChatMessage]]:
        """The core messages of ``stored`` and the stored messages as ARS remembers
        them (positions below ``len(stored)`` never change; the caller must not
        mutate either). The core list is this history's own, not a copy: it is
        grown in place by a later call only when nothing else holds it then (a
        view kept by the caller, a call still running), else that call starts a
        new list."""
        stored = stored if isinstance(stored, list) else list(stored)
        with self._lock:
            prev = self._chat
            n_prev = len(prev)
            grown = False
            if n_prev and len(stored) >= n_prev:
                # list equality compares by identity first, at C speed: nothing is copied
                prev.extend(stored[n_prev:])
                grown = stored == prev
                if not grown:
                    del prev[n_prev:]
            if grown and self._intact(n_prev):
                self._append(n_prev)
                self.rewritten = False
            elif n_prev or stored:
                self._rewrite(stored, reuse=not grown and self._intact(n_prev))
                self.rewritten = True
            return self._core, self._chat

    def _intact(self, n_prev: int) -> bool:
        """Whether the stored messages at the first, middle and last remembered
        positions still equal ARS's copies (an edit made in place shows here)."""
        for i in {0, n_prev // 2, n_prev - 1} if n_prev else ():
            if not same_message(self._chat[i], self._copies[i]):
                return False
        return True

    def _convert(self, message: ChatMessage) -> tuple[Message, ChatMessage]:
        core = to_core(message, tool_name=answered_tool(message, self._names))
        self.converted += 1
        return core, message.model_copy(deep=True)

    def _add(self, core: Message, copy: ChatMessage) -> None:
        for call in core.tool_calls:
            if call.id:
                self._names[call.id] = call.name
        self._pos[id(core)] = len(self._core)
        self._core.append(core)
        self._copies.append(copy)

    def _append(self, n_prev: int) -> None:
        if len(self._chat) > n_prev and (_ALONE < 0 or _references(self._core) > _ALONE):
            self._core = self._core.copy()  # still held elsewhere: theirs stays as it is
        for message in self._chat[n_prev:]:
            self._add(*self._convert(message))

    def _rewrite(self, stored: list[ChatMessage], *, reuse: bool) -> None:
        """Take ``stored`` as the history: the unchanged messages before and after
        what changed keep their conversions (when ``reuse``), the rest is converted."""
        old_chat, old_core, old_copies = self._chat, self._core, self._copies
        n, n_old = len(stored), len(old_chat)
        head = tail = 0
        if reuse:
            limit = min(n, n_old)
            while head < limit and same_message(stored[head], old_chat[head]):
                head += 1
            while tail < limit - head and same_message(stored[~tail], old_chat[~tail]):
                tail += 1
        self._epoch += 1  # the last view's forms may stand for messages no longer stored
        self._chat = list(stored)
        self._core, self._copies, self._names, self._pos = [], [], {}, {}
        for i in range(head):
            self._add(old_core[i], old_copies[i])
        for message in stored[head : n - tail]:
            self._add(*self._convert(message))
        for j in range(n_old - tail, n_old):
            message, core = stored[n - n_old + j], old_core[j]
            if core.name == core_name(message, core.role, self._names):
                self._add(core, old_copies[j])
            else:  # it answers a call renamed by the edit
                self._add(*self._convert(message))

    # ------------------------------------------------------------ back

    def back_all(self, view: Sequence[Message]) -> list[ChatMessage]:
        """The LlamaIndex messages of a view the core returned for this history."""
        view = view if isinstance(view, list) else list(view)
        with self._lock:
            chat, n = self._chat, len(view)
            kept = self._kept(view)
            if kept:  # the last view's messages up to ``kept`` again: map the rest
                made: dict[int, tuple[Message, ChatMessage]] = {}
                stable = self._view[1]
                del stable[kept:]
                stable += [self._back(m, made) for m in view[kept:]]
                if len(self._made) > n:  # forms of messages long gone: start over
                    self._made = made
                else:
                    self._made.update(made)
            else:
                stable = self._map_afresh(view)
                self._view = (list(view), stable)
            self._view_epoch = self._epoch
            out = stable.copy()
            # the newest messages, which agents edit in place, are new copies every call
            for i in range(max(0, n - FRESH_TAIL), n):
                out[i] = self._fresh(view[i], chat)
            return out

    def _kept(self, view: list[Message]) -> int:
        """How many first messages of ``view`` the last view held in the same places
        (the same objects, or equal ones), of the history as it was then, when this
        history only grew since: their LlamaIndex forms are the last ones, and the
        remembered view becomes ``view``. A history that grew usually changes the
        last view's newest messages only (a result arriving where a note stood in
        for it), so all but the last :data:`VIEW_TAIL` are compared. 0 when none is
        reused (the remembered view is then as it was)."""
        if self._view_epoch != self._epoch:
            return 0
        last_view, n = self._view[0], len(view)
        m = len(last_view)
        for kept in (m, m - VIEW_TAIL) if m <= n else (min(m - VIEW_TAIL, n),):
            if kept <= 0 or not _same(last_view[kept - 1], view[kept - 1]):
                continue  # the last message compared differs: no need to compare the rest
            # compared as whole lists (no copy of the view's first messages): the
            # remembered view takes the view's newer messages, and gets its own back if
            # the rest differs
            rest = last_view[kept:]
            del last_view[kept:]
            last_view += view[kept:]
            if unchanged_prefix(last_view, view):
                return kept
            del last_view[kept:]
            last_view += rest
        return 0

    def _map_afresh(self, view: list[Message]) -> list[ChatMessage]:
        """``view`` mapped afresh: the history's messages by slicing where the view
        holds them in a run, the others one by one."""
        core, copies = self._core, self._copies
        n_core, n = len(core), len(view)
        made: dict[int, tuple[Message, ChatMessage]] = {}
        out: list[ChatMessage] | None = None
        if view == core:  # no summary, nothing changed by L1: the history itself
            out = list(copies)
        for head in (1, VIEW_HEAD) if out is None else ():
            start = n_core - (n - head)
            if head < n and start >= 0 and view[head:] == core[start:]:
                out = [self._back(m, made) for m in view[:head]] + copies[start:]
                break
        if out is None:
            out = [self._back(m, made) for m in view]
        self._made = made
        return out

    def _back(self, message: Message, made: dict[int, tuple[Message, ChatMessage]]) -> ChatMessage:
        self.mapped += 1
        i = self._pos.get(id(message))
        if i is not None and i < len(self._core) and self._core[i] is message:
            return self._copies[i]
        hit = self._made.get(id(message))
        if hit is None or hit[0] is not message:
            hit = (message, from_core(message))
        made[id(message)] = hit
        return hit[1]

    def _fresh(self, message: Message, chat: list[ChatMessage]) -> ChatMessage:
        i = self._pos.get(id(message))
        if i is not None and i < len(self._core) and self._core[i] is message:
            return chat[i].model_copy(deep=True)
        return from_core(message)


def _references(items: list[Any]) -> int:
    """CPython's reference count of ``items`` (-1 where there is none)."""
    getrefcount = getattr(sys, "getrefcount", None)
    return -1 if getrefcount is None else int(getrefcount(items))


class _Holder:
    def __init__(self) -> None:
        self.items: list[Any] = []


_PROBE = _Holder()
#: what :func:`_references` gives for a list only one attribute refers to, read from it
_ALONE = _references(_PROBE.items)


def _same(a: Message, b: Message) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # metadata that cannot be compared (an array): not the same
        return False
