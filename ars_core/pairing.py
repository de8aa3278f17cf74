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

__all__ = ["MARK_SYNTHETIC_RESULT", "Pairing", "pair_tool_calls", "synthetic_result"]

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
    with a synthetic result."""

    view: list[Message]
    orphans: tuple[str, ...] = ()
    unanswered: tuple[str, ...] = ()

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


def pair_tool_calls(view: Sequence[Message]) -> Pairing:
    """``view`` with orphan tool results left out and unanswered calls answered
    (see the module doc). A view that needs neither comes back as it is."""
    messages = view if isinstance(view, list) else list(view)
    skip = 1 if messages and messages[0].metadata.get(MARK_SUMMARY) else 0
    positions, kinds = memo.current().index("pairing:kinds", _kind)(
        messages[skip:] if skip else messages
    )
    if not positions:
        return Pairing(messages)
    drop: list[int] = []  # view positions of results left out
    add: dict[int, list[Message]] = {}  # after this view position: synthetic results
    orphans: list[str] = []
    unanswered: list[str] = []
    i, n = 0, len(positions)
    while i < n:
        p, kind = positions[i] + skip, kinds[i]
        if kind == _RESULT:  # no call heads its block
            drop.append(p)
            orphans.append(messages[p].tool_call_id or "")
            i += 1
            continue
        calls = {c.id: c for c in messages[p].tool_calls if c.id}
        answered: set[str] = set()
        last, i = p, i + 1
        while i < n and positions[i] + skip == last + 1 and kinds[i] == _RESULT:
            last += 1
            call_id = messages[last].tool_call_id or ""
            if call_id in calls and call_id not in answered:
                answered.add(call_id)
            else:
                drop.append(last)
                orphans.append(call_id)
            i += 1
        missing = [c for cid, c in calls.items() if cid not in answered]
        if missing:
            add[last] = [synthetic_result(c) for c in missing]
            unanswered += [c.id for c in missing]
    if not drop and not add:
        return Pairing(messages)
    log.warning(
        "ARS: the view had %d tool result(s) without their call (left out: %s) and %d tool "
        "call(s) without a result (answered with a note in the request only: %s)",
        len(orphans),
        ", ".join(orphans) or "-",
        len(unanswered),
        ", ".join(unanswered) or "-",
    )
    dropped = set(drop)
    out: list[Message] = []
    for index, message in enumerate(messages):
        if index not in dropped:
            out.append(message)
        out.extend(add.get(index, ()))
    return Pairing(out, tuple(orphans), tuple(unanswered))
