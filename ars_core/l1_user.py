"""L1 for user messages: a user message larger than the entry threshold ``T`` (it
could never be sent whole) is made smaller in the view, its inline media moved to
files and, when still too large, its text offloaded like a large tool result
(:mod:`ars_core.l1`): ``outputs/large_user_messages/user-<sha256>.txt`` and a preview,
in the view only."""

from __future__ import annotations

from collections.abc import Callable

from . import memo
from .estimate import Estimator, message_tokens
from .l1 import FileWrite, L1Plan, _above, _offload
from .memo import L1_USER, estimator_key
from .messages import MARK_SUMMARY, Message

__all__ = ["offload_oversized_user_messages"]


def _offload_user_message(
    m: Message,
    estimator: Estimator,
    threshold: int,
    preview_tokens: int,
    media: Callable[[Message], tuple[Message, dict[str, str]]] | None,
) -> tuple[Message, tuple[FileWrite, ...]]:
    """One user message above ``threshold``: its inline media moved to files
    first (``media``); its text offloaded only when the message is still above
    ``threshold`` without them, with a preview of the text."""
    size = message_tokens(estimator, m)
    new, writes = media(m) if media is not None else (m, {})
    files = tuple(FileWrite(p, t) for p, t in writes.items())
    if m.text and message_tokens(estimator, new) > threshold:
        offloaded, write = _offload(m, estimator, preview_tokens, user=True)
        new, writes = media(offloaded) if media is not None else (offloaded, {})
        files = (write, *(FileWrite(p, t) for p, t in writes.items()))
    if new is m or message_tokens(estimator, new) >= size:
        return m, ()
    return new, files


class _Oversized:
    """Where a view's user messages L1 makes smaller (per ``key``) are; how far it was read."""

    __slots__ = ("at", "key", "read")

    def __init__(self, key: object = None) -> None:
        self.key, self.at, self.read = key, list[int](), 0


def offload_oversized_user_messages(
    plan: L1Plan,
    *,
    estimator: Estimator,
    threshold: int,
    preview_tokens: int,
    media: Callable[[Message], tuple[Message, dict[str, str]]] | None = None,
) -> L1Plan:
    """``plan`` with every user message above ``threshold`` tokens (the entry
    threshold: such a message can never be sent whole) made smaller in the
    view: its inline media moved to files first (``media``, see
    :func:`ars_core.l1_media.offload_media`), answered or not; then, when it is
    still above ``threshold``, its text offloaded like a large tool result: to
    ``outputs/large_user_messages/user-<sha256>.txt``, a head-and-tail preview
    within ``preview_tokens`` in the view. The state keeps the original; the same
    text always maps to the same file. Where such messages are is kept as the
    history grows (a longer view has only its appended messages looked at)."""
    if not plan.view:
        return plan
    key, view = L1_USER.key(threshold, preview_tokens, estimator_key(estimator), media), plan.view

    def offloaded(m: Message) -> tuple[Message, tuple[FileWrite, ...]]:
        cached = L1_USER.get(m, key)
        if cached is None:
            cached = (m, ())
            if not m.metadata.get(MARK_SUMMARY) and _above(estimator, m, threshold):
                cached = _offload_user_message(m, estimator, threshold, preview_tokens, media)
            L1_USER.put(m, cached, key)
        return cached

    remembered = memo.current().prefix("l1-user:offloaded", _Oversized)
    with remembered.lock:
        seen, known = remembered.grown(view, key, _Oversized)
        found = seen.state
        users = (i for i in range(found.read, len(view)) if view[i].role == "user")
        found.at += [i for i in users if offloaded(view[i])[1]]
        found.read = len(view)
        remembered.extend(seen, view, known)
        at = list(found.at)
    # this view's own messages (a remembered one may hold equal, other objects)
    return plan.replacing([(i, *offloaded(view[i])) for i in at if i not in plan.replaced])
