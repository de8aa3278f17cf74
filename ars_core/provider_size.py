"""The provider's own count of a request, read back from the history.

A model's answer comes with the input tokens the provider counted for the
request that produced it (LangChain's ``usage_metadata["input_tokens"]``; a
provider's raw usage). That reading measures the request ARS *sent* for that
call: its view (after L1 offloads, after a summary), the system message and
the tool schemas; not the history as it is stored. Read alone it cannot be
compared with anything ARS measures later, so the adapter that receives the
answer stamps it (:func:`stamp`, under :data:`MARK_PROVIDER_COUNT` in the
answer's metadata, JSON-safe, so a checkpointer keeps it and a cold process
reads it back) with the estimator's own count of that same request and the
estimator's name.

On a later call the newest assistant message's stamp gives the provider
tokens per estimate unit of that request (:func:`provider_ratio`); the engine
multiplies its estimator's scale by it (:func:`ars_core.budget.in_estimate_units`),
so every budget of the call (T, the L2 threshold, the kept tail, the summary)
is in the provider's tokens as that request measured them.

Why a ratio and not "the reading plus what was appended since": when the
history is that request plus the messages appended after it, both give the
same size (``reading + ratio x appended`` = ``ratio x (sent + appended)``).
When ARS's view differed from the history (an offloaded tool result, a
summary), the reading says nothing of what the view left out, while the
ratio sizes it too. A ratio is a property of the two tokenizers on the text,
so a history edited since (messages removed or replaced, a new summary) does
not make it stale: it still measured what it measured. What does make a
stamp unusable: another estimator counted it (other units), or it holds no
usable figures; then the call is sized by the estimator alone, as it is for
a history without usage (an OpenAI-style dict history carries none).

Safety: only a ratio above 1 is used (the provider counts more than the
estimator), so a reading can make ARS compress earlier and keep less, never
send more than the estimator alone allows. A ratio above
:data:`MAX_PROVIDER_RATIO` is taken as that bound (a provider that adds much
hidden context to a small request would otherwise shrink every budget to
nothing). The ratio assumes the messages appended since the reading tokenize
as the request before them did; the estimator's margin (its measured
undercount) stays on top of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .known_size import NOT_AN_ANSWER, STAMP_REACH, estimator_name
from .known_size import newest_stamp as newest_answer_stamp
from .messages import Message

__all__ = [
    "MARK_PROVIDER_COUNT",
    "MAX_PROVIDER_RATIO",
    "STAMP_REACH",
    "newest_stamp",
    "provider_ratio",
    "ratio_of",
    "stamp",
    "stamped",
]

#: metadata key of an assistant message: the provider's count of the request that
#: produced it, beside the estimator's count of the same request (see :func:`stamp`)
MARK_PROVIDER_COUNT = "ars_provider_count"
#: the largest provider/estimator ratio used (a larger one is taken as this)
MAX_PROVIDER_RATIO = 4.0


def stamp(input_tokens: int, estimated: int, estimator: Any) -> dict[str, Any]:
    """The JSON-safe record of one request: ``input_tokens`` the provider counted,
    ``estimated`` the estimator's count of the same request (system, tools and the
    view sent) and the estimator's name."""
    return {
        "input_tokens": int(input_tokens),
        "estimated": int(estimated),
        "estimator": estimator_name(estimator),
    }


def stamped(message: Message, input_tokens: int, estimated: int, estimator: Any) -> Message:
    """A copy of the answer ``message`` carrying :func:`stamp` under
    :data:`MARK_PROVIDER_COUNT`."""
    return message.with_content(
        message.content, **{MARK_PROVIDER_COUNT: stamp(input_tokens, estimated, estimator)}
    )


def ratio_of(record: Any, estimator: Any) -> float:
    """Provider tokens per estimate unit of a stamped request: above 1 (at most
    :data:`MAX_PROVIDER_RATIO`) when the provider counted more than ``estimator``
    did; 1.0 when it counted no more, when ``record`` is not a stamp, or when another
    estimator made it."""
    if not isinstance(record, Mapping):
        return 1.0
    if record.get("estimator") != estimator_name(estimator):
        return 1.0
    try:
        actual, estimated = int(record["input_tokens"]), int(record["estimated"])
    except (KeyError, TypeError, ValueError):
        return 1.0
    if actual <= estimated or estimated <= 0:
        return 1.0
    return min(MAX_PROVIDER_RATIO, actual / estimated)


def newest_stamp(messages: Sequence[Message]) -> Any:
    """The stamp of the newest assistant message of ``messages`` (``None`` when it has
    none: only the newest answer is read, and only among the last
    :data:`STAMP_REACH` messages, so a history without usage costs a few steps from
    its end)."""
    found = newest_answer_stamp(messages, _usage_stamp)
    return found[1] if found is not None else None


def _usage_stamp(message: Any) -> Any:
    if isinstance(message, Mapping):  # an OpenAI-style dict: it carries no usage
        return None if message.get("role") == "assistant" else NOT_AN_ANSWER
    if message.role != "assistant":
        return NOT_AN_ANSWER
    return message.metadata.get(MARK_PROVIDER_COUNT)


def provider_ratio(messages: Sequence[Message], estimator: Any) -> float:
    """:func:`ratio_of` the newest assistant message's stamp in ``messages``."""
    return ratio_of(newest_stamp(messages), estimator)
