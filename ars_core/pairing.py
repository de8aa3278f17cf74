"""Every view ARS sends pairs each tool call with its result.

Providers reject a request holding a tool result whose call is not in the
message right before its block of results (OpenAI: "messages with role 'tool'
must be a response to a preceding message with 'tool_calls'"; Anthropic:
"unexpected tool_use_id"), and one holding a tool call with no result. State
can hold both: a call removed by an edit, a run cancelled while a tool ran, a
result kept at a cut whose call was summarized. :func:`pair_tool_calls` is
the one check every view passes before it is sent:

* a tool result that does not answer a call of the assistant message heading
  its block (or answers a call a second time) is left out of the view;
* a call with no result in its block gets a synthetic result saying so.

Both happen in the view only: state is never changed. The round's
``completed``/``failed`` event counts them (``orphan_results``,
``unanswered_calls``) and a warning names them.

The check reads only the messages that hold tool calls or results, found by a
:class:`~ars_core.memo.SparseIndex` the engine keeps: a call whose view extends
the last one reads only what was appended.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs

from . import memo
from .messages import MARK_SUMMARY, Message, ToolCall

__all__ = [
    "MARK_SYNTHETIC_RESULT",
    "Pairing",
    "pair_tool_calls",
    "synthetic_result",
    "warn_unpaired",
]

log = logging.getLogger("ars")

#: metadata key of a tool result ARS added to a view for a call that has none
MARK_SYNTHETIC_RESULT = "ars_synthetic_result"

_CALL, _RESULT = 1, 2


def _kind(message: Message) -> int:
    if message.role == "tool":
        return _RESULT
    return _CALL if message.tool_calls else 0


@attrs.frozen
class Pairing:
    """A view after the check: ``view`` (the input itself when nothing changed),
    the ``tool_call_id`` of every result left out, the id of every call answered
    with a synthetic result, and those synthetic results (``added``)."""

    view: list[Message]
    orphans: tuple[str, ...] = ()
    unanswered: tuple[str, ...] = ()
    added: tuple[Message, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.orphans or self.unanswered)


def synthetic_result(call: ToolCall) -> Message:
    """The result a view gets for ``call`` when the history holds none."""
    return Message(
        role="tool",
        content=(
            f"[ARS: no result was recorded for this {call.name} call (the run was interrupted "
            "or its result was removed); this note stands in for it in this request only]"
        ),
        tool_call_id=call.id,
        name=call.name,
        metadata={MARK_SYNTHETIC_RESULT: True},
    )


class _Scan:
    """What the check found in a history's blocks before its last one (which appended
    results may still complete): rescanned from there when the history grows."""

    __slots__ = ("add", "drop", "orphans", "resume", "unanswered", "warned")

    def __init__(self) -> None:
        self.resume = 0  # index (in the sparse positions) of the last block read
        self.drop: list[int] = []  # positions of results left out
        self.add: list[tuple[int, list[Message]]] = []  # after this position: results
        self.orphans: list[str] = []
        self.unanswered: list[str] = []
        self.warned: set[tuple[str, str]] = set()  # problems already named in a warning


def _scan(scan: _Scan, messages: Sequence[Message], positions: list[int], kinds: list[int]) -> None:
    """Read the blocks from ``scan.resume`` on (``positions`` and ``kinds`` start there);
    ``scan`` keeps what they hold."""
    base, i, n = scan.resume, 0, len(positions)
    while i < n:
        scan.resume = base + i
        p, kind = positions[i], kinds[i]
        if kind == _RESULT:  # no call heads its block
            scan.drop.append(p)
            scan.orphans.append(messages[p].tool_call_id or "")
            i += 1
            continue
        calls = {c.id: c for c in messages[p].tool_calls if c.id}
        answered: set[str] = set()
        last, i = p, i + 1
        while i < n and positions[i] == last + 1 and kinds[i] == _RESULT:
            last += 1
            call_id = messages[last].tool_call_id or ""
            if call_id in calls and call_id not in answered:
                answered.add(call_id)
            else:
                scan.drop.append(last)
                scan.orphans.append(call_id)
            i += 1
        missing = [c for cid, c in calls.items() if cid not in answered]
        if missing:
            scan.add.append((last, [synthetic_result(c) for c in missing]))
            scan.unanswered += [c.id for c in missing]


def _rewind(scan: _Scan, positions: list[int]) -> None:
    """Forget what the last block read held (appended results may change it);
    ``positions`` start at that block."""
    if not positions:
        return
    first = positions[0]
    while scan.drop and scan.drop[-1] >= first:
        scan.drop.pop()
        scan.orphans.pop()
    while scan.add and scan.add[-1][0] >= first:
        _, added = scan.add.pop()
        del scan.unanswered[-len(added) :]


def pair_tool_calls(view: Sequence[Message], *, named: Pairing | None = None) -> Pairing:
    """``view`` with orphan tool results left out and unanswered calls answered
    (see the module doc). A view that needs neither comes back as it is.

    What the blocks before the last one hold is remembered with the history, so a
    call whose history only grew reads the last block and the appended messages.
    ``named`` is the pairing of the history ``view`` was made from (a round's view
    after a summary): what its warning named is not named again."""
    messages = view if isinstance(view, list) else list(view)
    skip = 1 if messages and messages[0].metadata.get(MARK_SUMMARY) else 0
    history = messages[skip:] if skip else messages
    if not history:
        return Pairing(messages)
    engine = memo.current()
    remembered = engine.prefix("pairing:scan", _Scan)
    with remembered.lock:
        seen, known = remembered.track(history)
        scan = seen.state
        if not known or len(history) < len(seen.messages):
            seen.messages.clear()
            seen.state = scan = _Scan()
        # the calls and results from the last block read on (the earlier ones are read)
        positions, kinds = engine.index("pairing:kinds", _kind)(history, scan.resume)
        if not scan.resume and not positions:  # no call nor result: nothing to pair
            remembered.extend(seen, history, known)
            return Pairing(messages)
        _rewind(scan, positions)
        _scan(scan, history, positions, kinds)
        remembered.extend(seen, history, known)
        drop, add = list(scan.drop), list(scan.add)
        orphans, unanswered = tuple(scan.orphans), tuple(scan.unanswered)
        told = _told(scan.warned, named)
        new_orphans = [i for i in orphans if ("orphan", i) not in told]
        new_unanswered = [i for i in unanswered if ("call", i) not in told]
        scan.warned.update([("orphan", i) for i in new_orphans])
        scan.warned.update([("call", i) for i in new_unanswered])
    if not drop and not add:
        return Pairing(messages)
    if new_orphans or new_unanswered:  # each named once per engine and history
        warn_unpaired(new_orphans, new_unanswered)
    added = tuple(m for _, results in add for m in results)
    return Pairing(_rebuilt(messages, skip, drop, add), orphans, unanswered, added)


def _told(warned: set[tuple[str, str]], named: Pairing | None) -> set[tuple[str, str]]:
    """``warned`` and what the warning of the pairing ``named`` named (see
    :func:`pair_tool_calls`); ``warned`` itself when that named nothing."""
    if named is None or not named.changed:
        return warned
    return warned | {("orphan", i) for i in named.orphans} | {("call", i) for i in named.unanswered}


def warn_unpaired(orphans: Sequence[str], unanswered: Sequence[str]) -> None:
    """The warning naming the tool results left out of a view (by ``tool_call_id``)
    and the calls answered with a note (by id): once per engine and history."""
    log.warning(
        "ARS: %d tool result(s) without their call left out of the view (%s) and %d "
        "tool call(s) without a result answered with a note in the request only (%s)",
        len(orphans),
        ", ".join(orphans) or "-",
        len(unanswered),
        ", ".join(unanswered) or "-",
    )


def _rebuilt(
    messages: list[Message], skip: int, drop: list[int], add: list[tuple[int, list[Message]]]
) -> list[Message]:
    """``messages`` without the results at ``drop`` and with ``add``'s results after
    their positions (history positions, ``skip`` messages after the view's start),
    built from slices."""
    edits = sorted([(p + skip, 0, None) for p in drop] + [(p + skip, 1, m) for p, m in add])
    out: list[Message] = []
    start = 0
    for i, (position, kind, added) in enumerate(edits):
        end = position if kind == 0 else position + 1  # a result left out, or kept
        if i:
            out += messages[start:end]
        else:  # the first stretch is the new list itself (one copy of it, not two)
            out = messages[start:end]
        out += added or ()  # the synthetic results follow their call's block
        start = position + 1
    out += messages[start:]
    return out
