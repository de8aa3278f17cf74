"""The budget policy: every token budget of a call, and the unit it is in.

One place for the rules the engine sizes a call by. ``T`` is the entry
threshold (:attr:`~ars_core.config.SummaryConfig.threshold_tokens`), ``T2``
the L2 threshold (``T`` x ``summary_l2_trigger_ratio``).

Units
-----
The configuration speaks *provider tokens* (what the model's API bills).
Every count made during a call is in *estimate units* (what the engine's
estimator returns), and so is every budget: :func:`in_estimate_units` gives
the call's configuration with its token sizes (``T``, and so ``T2`` and the
default summary bound, and ``summary_max_tokens``) divided once by the
estimator's calibrated ``scale`` (provider tokens per estimate unit, learnt
from usage reports) and by ``1 + margin`` (the estimator's measured worst
undercount, kept as a safety margin); :func:`thresholds` reads ``T`` and
``T2`` from it, and every rule below reads that configuration, so a request,
a summary and a kept tail that measure under their budgets stay under the
real window, and no rule subtracts one unit from the other. With an
uncalibrated exact estimator both factors are 1 and the two units coincide
(the configuration is used as it is). When the thread's last answer carries
the provider's count of its request and that count is above the estimator's
(:mod:`ars_core.provider_size`), that ratio stands for the scale if it is
larger. The summary's bound is what the
summarizer is told it may write (an LLM summarizer's ``max_tokens``): in
estimate units it is at most the provider tokens it stands for.

The rules
---------
- summary bound (:func:`summary_token_limit`): ``summary_max_tokens``, or
  ``T2`` at least :data:`SUMMARY_TOKENS_FLOOR` and at most ``T/2``.
- the kept tail (:func:`kept_tail_room`): a lean round keeps at least the
  newest ``min(keep, the messages that fit half the room under T2)``
  verbatim (the room: ``T2`` less the fixed part of the request: system,
  tools, the summary's frame), tool calls with their results and the newest
  user request among the latest ``keep``; with ``summary_max_tokens`` set,
  whatever of the room that budget leaves, if more.
- lean rounds' summary (:func:`lean_summary_budget`): the task's need
  (:func:`summary_budget`: the whole task at :data:`TASK_SHARE` of it plus
  ``T/8`` for files, tool calls, errors, conclusions) plus the conversation
  it summarizes (what the user and the assistant said, when that is most of
  the summarized part), never more than the kept tail leaves under ``T2``,
  always room for the whole task at its share; at least
  :data:`SUMMARY_TOKENS_FLOOR`, at most the summary bound. A task too large
  for that grows the bound to carry it at :data:`TASK_SHARE_MAX`, up to
  ``T - fixed - T/8`` (:func:`large_task_ceiling`; the kept tail then takes
  what is left under ``T - T/8``), and :func:`task_budget` is the task's room.
- the summary's parts (:func:`task_share`, :func:`rest_floor`): the task's
  sections (their headers included: ``task_tokens`` is what they take whole)
  have :data:`TASK_SHARE` of the bound, or their own room; either way the
  summarizer's part (its text, its header and the end mark) keeps
  :func:`rest_floor` of it: an eighth of the bound, at least
  :data:`SUMMARY_REST_FLOOR` tokens (at most half the bound), so at a tiny
  bound the task's middle is left out sooner rather than the summarizer's
  text cut to nothing. The summarizer is told the bound less what the task
  and that frame take.
- summary input: ``T/2`` (at least :data:`SUMMARY_INPUT_FLOOR`) for fixed
  rounds (:func:`default_input_budget`); for lean rounds what
  :func:`~ars_core.summarize.condense_history` keeps whole plus ``T/12`` of
  the rest (at least :data:`INPUT_REST_FLOOR`, at most ``T/8``), capped at
  ``T/2`` or the task's room plus that rest, and a chat's turns whole, up to
  ``T`` (:func:`summary_input_budget`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs

from .estimate import is_calibrated

if TYPE_CHECKING:
    from .config import SummaryConfig

__all__ = [
    "INPUT_REST_FLOOR",
    "SUMMARY_INPUT_FLOOR",
    "SUMMARY_REST_FLOOR",
    "SUMMARY_TOKENS_FLOOR",
    "TASK_SHARE",
    "TASK_SHARE_MAX",
    "default_input_budget",
    "estimate_scale",
    "in_estimate_units",
    "kept_tail_room",
    "large_task_ceiling",
    "lean_summary_budget",
    "rest_floor",
    "summary_budget",
    "summary_input_budget",
    "summary_token_limit",
    "task_budget",
    "task_share",
    "thresholds",
]

#: the default summary bound is the L2 threshold, at least this, and at most T/2
SUMMARY_TOKENS_FLOOR = 256
#: share of the summary budget the task statement may take
TASK_SHARE = 0.75
#: share of a summary a task too large for :data:`TASK_SHARE` of its bound may take
TASK_SHARE_MAX = 0.875
#: fewest tokens a lean round's summary input gives what is not kept whole
INPUT_REST_FLOOR = 1024
#: fewest tokens the summary model reads (its input bound is at least this)
SUMMARY_INPUT_FLOOR = 1024
#: fewest tokens a summary bound keeps for the summarizer's part beside the task
#: (its text, its header and the end mark; at most half the bound): at T = 256 the
#: bound is 128 to 171 and two requests with their headers could take it all; this
#: leaves a small model's two sentences (32 tokens of SmolLM2's) whole
SUMMARY_REST_FLOOR = 64
#: share of the L2 threshold the newest ``keep`` messages may take to be kept verbatim
TAIL_SHARE = 0.5


def estimate_scale(estimator: Any, provider_ratio: float = 1.0) -> float:
    """Provider tokens per estimate unit, with the safety margin: the
    estimator's calibrated ``scale`` times ``1 + margin`` (1 for an estimator
    that has neither). ``provider_ratio`` (at least 1: the provider's count of
    the thread's last request over the estimator's, see
    :mod:`ars_core.provider_size`) replaces the scale when it is larger: it can
    only shrink the budgets."""
    ratio = float(provider_ratio)
    if not is_calibrated(estimator):
        return max(1.0, ratio)
    scale = float(estimator.scale or 1.0)
    if ratio > 1.0:
        scale = max(scale, ratio)
    return scale * (1 + float(estimator.margin or 0.0))


def thresholds(config: SummaryConfig, estimator: Any) -> tuple[int, int]:
    """``(T, T2)`` of ``config`` in ``estimator``'s units (see the module's
    *Units*): the thresholds one call is measured against (those of
    :func:`in_estimate_units`)."""
    scaled = in_estimate_units(config, estimator)
    return scaled.threshold_tokens, scaled.l2_threshold_tokens


def in_estimate_units(
    config: SummaryConfig, estimator: Any, provider_ratio: float = 1.0
) -> SummaryConfig:
    """``config`` with its token sizes in ``estimator``'s units (see the module's
    *Units*): ``T`` (and so ``T2`` and the summary bound) and ``summary_max_tokens``
    divided by :func:`estimate_scale` (with the thread's ``provider_ratio``, when a
    provider counted more than the estimator). Every budget rule of a call reads
    this one; ``config`` itself when the scale is 1."""
    scale = estimate_scale(estimator, provider_ratio)
    if scale == 1.0:
        return config
    most = config.summary_max_tokens
    return attrs.evolve(
        config,
        # T in estimate units, whole (as a K figure that gives back exactly that)
        summary_threshold=int(config.threshold_tokens / scale) / 1024,
        summary_max_tokens=None if most is None else max(1, int(most / scale)),
    )


def summary_token_limit(
    threshold_tokens: int, l2_threshold_tokens: int, summary_max_tokens: int | None
) -> int:
    """The bound on a summary's size: ``summary_max_tokens``, or the L2
    threshold, at least :data:`SUMMARY_TOKENS_FLOOR` and at most ``T/2``, so a
    summary never triggers the next round on its own, the kept tail fits
    beside it, and a long task statement still fits in it."""
    if summary_max_tokens is not None:
        return summary_max_tokens
    floored = max(SUMMARY_TOKENS_FLOOR, l2_threshold_tokens)
    return min(threshold_tokens // 2, floored)


def summary_budget(
    config: Any, task_tokens: int | None = None, *, fixed_tokens: int | None = None
) -> int:
    """The tokens a summary may take under ``config`` (a
    :class:`~ars_core.config.SummaryConfig`): its ``summary_token_limit``.

    Sized from the task it carries (lean rounds), when that takes
    ``task_tokens``: ``summary_max_tokens`` when set; otherwise room for the
    whole task (at its :data:`TASK_SHARE` of the summary) plus ``T/8`` for
    the rest (files, tool calls, errors, conclusions), at least 256 tokens and
    never more than ``summary_token_limit``. A summary sized from its task is
    cheap to write and to resend, and leaves the kept messages room under the
    L2 threshold.

    A task too large for its share of that bound is never cut to fit it: given
    ``fixed_tokens`` (what the request holds beside the summary and the kept
    messages: system message, tools, the summary's frame), the bound grows to
    carry the whole task at :data:`TASK_SHARE_MAX` of the summary, up to what
    leaves ``T/8`` of the window for the kept messages and the next ones
    (:func:`large_task_ceiling`); :func:`task_budget` is then the task's room.
    """
    if task_tokens is None or config.summary_max_tokens is not None:
        return int(config.summary_token_limit)
    threshold = int(config.threshold_tokens)
    wanted = math.ceil(task_tokens / TASK_SHARE) + threshold // 8
    bound = min(int(config.summary_token_limit), max(SUMMARY_TOKENS_FLOOR, wanted))
    if fixed_tokens is None or task_tokens <= task_share(bound):
        return bound
    return max(bound, min(_grown(task_tokens), large_task_ceiling(threshold, fixed_tokens)))


def kept_tail_room(config: Any, room: int) -> int:
    """What the newest messages a lean round keeps verbatim are sized against:
    it keeps at least the newest ``min(keep, the messages that fit this)``.
    :data:`TAIL_SHARE` of ``room`` (the tokens under the L2 threshold ``T2``
    beside the fixed part of the request: system message, tools, the
    summary's frame; all of ``T2`` when there is none), the summary taking
    the rest; when the user sets a summary budget (``summary_max_tokens``),
    whatever of ``room`` it leaves, if that is more."""
    half = int(room * TAIL_SHARE)
    if config.summary_max_tokens is None:
        return half
    return max(half, room - int(config.summary_max_tokens))


def lean_summary_budget(
    config: Any,
    *,
    room: int,
    tail: int,
    task_tokens: int,
    fixed_tokens: int | None,
    turns: int = 0,
) -> int:
    """The bound on a lean round's summary, which shares ``room`` (the tokens
    under the L2 threshold beside the fixed part of the request: system
    message, tools, the summary's frame) with the kept tail (``tail``
    tokens): ``summary_max_tokens`` when set (the user's summary budget);
    otherwise what the task it carries needs (:func:`summary_budget`: the
    task and ``T/8`` for files, tool calls, errors and conclusions) plus
    room for the conversation it summarizes (``turns``: the tokens the user
    and the assistant said in the summarized part, see
    :func:`~ars_core.summarize.turn_tokens`), never more than what the tail
    leaves but always room for the whole task at its :data:`TASK_SHARE`; at
    least :data:`SUMMARY_TOKENS_FLOOR`, at most the summary bound. An agent
    run's summary stays sized from its task (cheap to write and to resend); a
    chat's takes the room the tail leaves. Summary and tail then fit under
    ``T2`` together, so the next call does not summarize again: churn is
    prevented by sizing the summary, never by dropping the kept tail.

    A task too large for its :data:`TASK_SHARE` of that bound grows it (given
    ``fixed_tokens``; not after a context overflow) to carry the whole task at
    :data:`TASK_SHARE_MAX`, up to :func:`large_task_ceiling`; the kept tail
    then gets what that summary leaves under ``T - T/8`` (the task comes
    first: a view without it is no use to the agent)."""
    if config.summary_max_tokens is not None:
        return int(config.summary_max_tokens)
    lean = summary_budget(config, task_tokens)
    task_room = math.ceil(task_tokens / TASK_SHARE)  # the task, whole, at its share
    shared = max(SUMMARY_TOKENS_FLOOR, task_room, min(lean + turns, room - tail))
    bound = min(int(config.summary_token_limit), shared)
    if fixed_tokens is None or task_tokens <= task_share(bound):
        return bound
    ceiling = large_task_ceiling(int(config.threshold_tokens), fixed_tokens)
    return max(bound, min(_grown(task_tokens), ceiling))


def _grown(task_tokens: int) -> int:
    """The smallest bound that carries a task of ``task_tokens`` whole in its own
    room: at most :data:`TASK_SHARE_MAX` of it, :func:`rest_floor` left beside it."""
    return max(math.ceil(task_tokens / TASK_SHARE_MAX), task_tokens + SUMMARY_REST_FLOOR)


def large_task_ceiling(threshold: int, fixed_tokens: int) -> int:
    """The largest summary a task too large for the ordinary bound may grow it
    to: the window ``threshold`` (T) less ``fixed_tokens`` and ``T/8`` left
    for the kept messages and the next ones."""
    return threshold - fixed_tokens - threshold // 8


def task_budget(config: Any, summary_tokens: int, task_tokens: int) -> int | None:
    """The task's room in a lean round's summary of ``summary_tokens`` (see
    :func:`summary_budget`) that must carry a task of ``task_tokens``: ``None``
    when the task fits its :data:`TASK_SHARE` or ``config`` sets
    ``summary_max_tokens`` (the summarizer's own rule holds); otherwise the
    whole task, at most :data:`TASK_SHARE_MAX` of the summary and never what
    :func:`rest_floor` keeps for the summarizer. The summary input keeps the
    task at this size too. ``task_tokens`` is what the task's sections take
    whole, their headers included (see
    :func:`~ars_core.task_text.whole_task_tokens`)."""
    if config.summary_max_tokens is not None or task_tokens <= task_share(summary_tokens):
        return None
    most = min(int(summary_tokens * TASK_SHARE_MAX), summary_tokens - rest_floor(summary_tokens))
    return min(task_tokens, most)


def rest_floor(summary_tokens: int) -> int:
    """The fewest tokens of a summary bound of ``summary_tokens`` kept for what
    the summarizer writes beside the task (its text, its header and the end
    mark): an eighth of the bound (what a task in a room of its own leaves, at
    :data:`TASK_SHARE_MAX`), at least :data:`SUMMARY_REST_FLOOR`, at most half
    the bound. From 512 tokens on this is the eighth; below, the task's middle is
    left out sooner so the summarizer still writes a few sentences."""
    return min(summary_tokens // 2, max(summary_tokens // 8, SUMMARY_REST_FLOOR))


def task_share(summary_tokens: int) -> int:
    """The task's room in a summary of ``summary_tokens`` when it has no room of
    its own (:func:`task_budget`), its sections' headers included:
    :data:`TASK_SHARE` of the bound, less what :func:`rest_floor` keeps when
    that is more than the rest (bounds under 256 tokens)."""
    return min(int(summary_tokens * TASK_SHARE), summary_tokens - rest_floor(summary_tokens))


def default_input_budget(threshold: int) -> int:
    """What the summary model reads in a fixed round (and in a lean one told
    ``summary_input_tokens``'s default): ``T/2``, at least
    :data:`SUMMARY_INPUT_FLOOR`."""
    return max(SUMMARY_INPUT_FLOOR, threshold // 2)


def summary_input_budget(
    threshold: int, whole: int, task_room: int | None = None, turns: int = 0
) -> int:
    """What the summary model reads in a lean round, in tokens: what
    :func:`~ars_core.summarize.condense_history` keeps whole (``whole``:
    previous summary, system messages, the task's requests, the newest message)
    plus ``T/12`` of the rest (at least :data:`INPUT_REST_FLOOR`, but not above
    ``T/8``: small windows summarize little at a time, and their anchors are in
    that rest), at most ``T/2`` (at least 1,024), or, when the task has a room
    of its own (``task_room``, see :func:`task_budget`), at most that room plus
    the rest. The conversation's own turns (``turns``: what the user and the
    assistant said, see :func:`~ars_core.summarize.turn_tokens`) are read
    whole too, up to ``T``: a chat's summary is made of them, and the part a
    round summarizes is what was added since the last one."""
    rest = max(threshold // 12, min(INPUT_REST_FLOOR, threshold // 8))
    cap = max(default_input_budget(threshold), (task_room or 0) + rest)
    if turns:
        cap = max(cap, min(threshold, whole + turns + rest))
    return min(cap, whole + turns + rest)
