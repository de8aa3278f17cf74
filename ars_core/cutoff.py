"""Where an L2 round cuts the history, and what its summary may take.

:func:`choose_cut` is the cutoff of one round (:class:`~ars_core.call_state.Cut`):
fixed rounds keep the latest ``summary_keep_messages`` and a summary at its
configured bound; lean rounds size the kept tail and the summary to share the
room under the L2 threshold (the rules are in :mod:`ars_core.budget`), without
separating a tool call from its results.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

from . import memo
from .budget import SUMMARY_TOKENS_FLOOR, kept_tail_room, lean_summary_budget, task_budget
from .call_state import CallState, Cut, L1View
from .capabilities import Utf8BoundedEstimator, has
from .checkpoint import to_global_cutoff
from .estimate import Estimator, message_sizes, message_tokens
from .l2 import build_summary_message, forbidden_cuts, select_cutoff
from .layout import HISTORY_DIR
from .memo import TOKENS
from .messages import Message
from .pending_form import is_pending
from .per_call import head, once_per_call
from .retention import is_user_request, task_statement
from .summarize import MessageSizes, history_exceeds, turn_messages
from .task_text import task_requests, whole_task_tokens

__all__ = ["choose_cut", "conversation_tokens", "kept_cut"]

#: an archive path of the length the engine writes: sizes the summary message's frame
_SAMPLE_PATH = f"{HISTORY_DIR}/history-{0:06d}-{0:06d}-{0:016x}.jsonl"

#: a history of more than this many times its turns' UTF-8 bytes is an agent run
#: (:func:`conversation_tokens`). The ratio of tokens to bytes differs between the parts
#: of a conversation: on the recorded agent runs and chats (2,304 histories, every fifth
#: message of each, and 4,070 lean rounds of the benchmarks) the history-to-turns ratio in
#: tokens was 0.71 to 1.37 times the one in bytes, so a history 4 times its turns in bytes
#: was over 2.8 times in tokens; a wrong answer takes text of under half the tokens per
#: byte of the turns'
AGENT_RUN_BYTES = 4


def choose_cut(r: CallState, l1: L1View) -> Cut | None:
    """Where the summarized part ends. Fixed rounds keep the latest ``keep``
    messages and a summary at its configured bound. Lean rounds keep at least
    the newest ``min(keep, the messages that fit half the L2 threshold)``
    verbatim (tool calls with their results; the newest user request among
    the latest ``keep`` too) and size the summary to share the room under the
    L2 threshold with them, so the next round waits for new messages to fill
    the window again. With ``keep`` or fewer messages, a cut is made only when
    they do not fit the window. ``None`` when no valid cutoff exists."""
    s = r.settings
    keep, start = s.config.summary_keep_messages, 1 if r.event is not None else 0
    forbidden = forbidden_cuts(r.effective)
    preferred = select_cutoff(r.effective, keep, start=start, forbidden=forbidden)
    if not s.lean_rounds:  # the latest `keep` messages, a summary at the configured bound
        if preferred is None:
            return None
        return _cut_at(r, preferred, start, r.budget.summary_token_limit)
    window = r.l2_threshold if r.forced else r.threshold  # an overflow: the real one is smaller
    if preferred is None and not l1.exceeds(window):
        return None  # keep or fewer messages that fit the window: sent as they are
    return _lean_cut(r, l1, keep, start, forbidden)


def _cut_at(r: CallState, local: int, start: int, limit: int, task_room: int | None = None) -> Cut:
    """The cut at ``local`` (in the effective messages), carrying every request before it."""
    global_ = to_global_cutoff(local, r.event)
    previous = r.event.cutoff if r.event is not None else 0
    task = task_statement(head(r.state, 0, global_))
    return Cut(local, start, previous, global_, task, limit, task_room)


def _lean_cut(
    r: CallState, l1: L1View, keep: int, start: int, forbidden: Sequence[bool]
) -> Cut | None:
    """A lean round's cut: the kept tail and the summary share the room under T2."""
    s = r.settings
    # the summary's frame, sized with a cutoff of as many digits (the same text round after
    # round: counted once)
    frame = build_summary_message("", cutoff=_nines(len(r.state)), file_path=_SAMPLE_PATH)
    fixed = r.extra + message_tokens(s.estimator, frame)
    room = r.l2_threshold - fixed
    sizes = MessageSizes(s.estimator, l1.view, start)
    tail_room = kept_tail_room(r.budget, room)
    local = kept_cut(
        r.effective, keep, start=start, tail_room=tail_room, room=room, sizes=sizes,
        forbidden=forbidden,
    )  # fmt: skip
    if local is None:
        return None
    summarized = head(r.state, 0, to_global_cutoff(local, r.event))
    requests = task_requests(summarized, task_statement(summarized))
    task_tokens = whole_task_tokens(requests, s.estimator)
    tail = sum(sizes[local - start :])
    # after a context overflow the real window is smaller than T: no growing for the task
    limit = lean_summary_budget(
        r.budget,
        room=room,
        tail=tail,
        task_tokens=task_tokens,
        fixed_tokens=None if r.forced else fixed,
        turns=conversation_tokens(l1.part(start, local), s.estimator),
    )
    left = r.threshold - r.threshold // 8 - fixed - limit  # what a grown summary leaves
    if tail > left > room - limit:  # a task too large for the room: the tail takes what is left
        local = kept_cut(
            r.effective, keep, start=start, tail_room=max(0, left),
            room=max(0, left) + SUMMARY_TOKENS_FLOOR, sizes=sizes, forbidden=forbidden,
        )  # fmt: skip
        if local is None:
            return None
    return _cut_at(r, local, start, limit, task_budget(r.budget, limit, task_tokens))


def kept_cut(
    messages: Sequence[Message],
    keep: int,
    *,
    start: int,
    tail_room: int,
    room: int,
    sizes: Sequence[int],
    forbidden: Sequence[bool],
) -> int | None:
    """A lean round's cut in ``messages`` (``messages[start:]`` may be summarized;
    ``sizes[i]`` is the size of ``messages[start + i]`` as it will be sent):
    the newest ``min(keep, the messages that fit tail_room)`` (see
    :func:`~ars_core.budget.kept_tail_room`; at least one) are kept; so is the
    newest user request among the latest ``keep`` messages, and the cut moves
    earlier so that no tool call is separated from its results, as long as the
    summary keeps its floor of ``room`` (the tokens under the L2 threshold
    beside the fixed part of the request): a tool call that does not fit moves
    the cut later instead. ``None`` when nothing is left to summarize."""
    n = len(messages)
    total, count = 0, 0
    while count < min(keep, n - start):
        total += sizes[n - 1 - count - start]
        if total > tail_room:
            break
        count += 1
    cut = n - max(1, count)
    newest = _newest_request(messages, max(start, n - keep), cut)
    if newest is not None and sum(sizes[newest - start :]) <= room - SUMMARY_TOKENS_FLOOR:
        cut = newest  # the newest request stays in the view as it is, when it fits
    if cut > start and not forbidden[cut]:
        return cut
    earlier = next((c for c in range(cut - 1, start, -1) if not forbidden[c]), None)
    if earlier is not None and sum(sizes[earlier - start :]) <= room - SUMMARY_TOKENS_FLOOR:
        return earlier
    later = next((c for c in range(cut + 1, n) if not forbidden[c]), None)
    return later if later is not None else earlier


def _newest_request(messages: Sequence[Message], low: int, cut: int) -> int | None:
    """The position of the newest user request in ``messages[low:]`` when it is before
    ``cut`` (it would be summarized), else ``None``."""
    for i in range(len(messages) - 1, low - 1, -1):
        if is_user_request(messages[i]):
            return i if i < cut else None
    return None


@once_per_call
def conversation_tokens(history: Sequence[Message], estimator: Estimator) -> int:
    """The tokens of what the people said in ``history`` (see
    :func:`~ars_core.summarize.turn_tokens`) when that is most of it (a chat:
    the history's tokens at most twice the turns'), else 0 (an agent run: its
    summary is sized from its task, its input from what it keeps whole).

    *An agent run by its bytes*: for an estimator whose count is bounded by UTF-8
    bytes (a byte-level BPE, :class:`~ars_core.capabilities.Utf8BoundedEstimator`),
    a history of more than :data:`AGENT_RUN_BYTES` times its turns' bytes is an
    agent run, nothing counted (the offloads whose form is not made yet left out);
    below that, the counts decide. When the engine holds every turn's count (a warm
    round), the counts decide: their sum costs less than the bytes. So do they when a
    turn holds media (an image's bound is its count, about a token a byte: the turns'
    bytes stand for far fewer tokens than text's would, and the two rules could part).
    The answer sizes the summary and what the summary model reads, never what is sent
    under T. The same messages read again in the call (the very sequence) take the
    first answer."""
    turns = turn_messages(history)
    if (
        has(estimator, Utf8BoundedEstimator)
        and not _counts_held(turns, estimator)
        and not any(map(_holds_media, turns))
        and _agent_run_by_bytes(history, turns, estimator)
    ):
        return 0
    tokens = sum(message_sizes(estimator, turns))
    return 0 if history_exceeds(history, estimator, 2 * tokens) else tokens


def _holds_media(m: Message) -> bool:
    """Whether ``m``'s content has a part that is not text (an image, a file)."""
    return not isinstance(m.content, str) and any(p.text is None for p in m.content)


def _counts_held(messages: Sequence[Message], estimator: Estimator) -> bool:
    """Whether ``estimator``'s count of every one of ``messages`` is kept on it."""
    key = getattr(estimator, "cache_key", None)
    return key is not None and None not in TOKENS.get_many(messages, key)


class _LastAnswer:
    """The answer :func:`_agent_run_by_bytes` gave last, with the messages it read (a
    round reads the same summarized part when it cuts and when it summarizes)."""

    def __init__(self) -> None:
        self.kept: tuple[Sequence[Message], object, bool] | None = None

    def of(self, history: Sequence[Message], utf8: object) -> bool | None:
        kept = self.kept
        if kept is None or kept[1] is not utf8 or len(kept[0]) != len(history):
            return None
        return kept[2] if all(map(operator.is_, kept[0], history)) else None


def _agent_run_by_bytes(
    history: Sequence[Message], turns: Sequence[Message], estimator: Estimator
) -> bool:
    """Whether ``history``'s UTF-8 bytes are above :data:`AGENT_RUN_BYTES` times its
    ``turns``' (see :func:`conversation_tokens`); the same messages read again (the very
    objects) get the answer the engine gave them last."""
    utf8 = estimator.utf8_bytes  # type: ignore[attr-defined]
    last = memo.current().single("cutoff:agent-run", _LastAnswer)
    answer = last.of(history, utf8)
    if answer is None:
        measure = getattr(utf8, "bytes_of", utf8.measure)  # kept for the call (Utf8Bytes)
        answer = _bytes_above(history, measure, AGENT_RUN_BYTES * sum(map(measure, turns)))
        last.kept = (tuple(history), utf8, answer)
    return answer


def _bytes_above(history: Sequence[Message], measure: Callable[[Message], int], limit: int) -> bool:
    """Whether the sizes ``measure`` gives ``history``'s messages add up to more than
    ``limit``, an offloaded result whose form is not made yet left out (it is made when
    read; leaving it out can only leave the answer to the counts)."""
    total = 0
    for m in history:
        if is_pending(m):
            continue
        total += measure(m)
        if total > limit:
            return True
    return False


def _nines(n: int) -> int:
    """The largest number with as many digits as ``n``."""
    return int("9" * len(str(n)))
