"""LangChain's ``SummarizationMiddleware`` arguments, read with their meaning.

``ArsSummarizationMiddleware(model=..., trigger=..., keep=..., token_counter=...,
summary_prompt=..., trim_tokens_to_summarize=...)`` takes what LangChain's
middleware takes, in the same forms:

* ``trigger``: ``("tokens", n)``, ``("fraction", f)`` of the model's input window
  (its profile's ``max_input_tokens``), ``("messages", n)``, a clause
  ``{"tokens": n, "messages": m}`` whose conditions must all hold, or a list of
  these (any one triggers). A single tokens or fraction condition becomes ARS's
  entry threshold T, and summarization then runs when the request is still at
  T after L1 has offloaded what it can (``summary_l2_trigger_ratio`` 1.0); a
  message count, or a clause of several conditions, is checked before each
  model call on the messages the model would get (summary + messages after
  it) and asks for a summarization round when it holds.
* ``keep``: ``("messages", n)`` is ``summary_keep_messages``; ``("tokens", n)``
  and ``("fraction", f)`` keep the newest messages that fit in that many
  tokens (counted before each call).
* ``token_counter`` is the estimator (``messages -> int``); ``summary_prompt``
  the summary prompt (``{messages}`` placeholder); ``trim_tokens_to_summarize``
  bounds what the summary model reads (``None``: everything).
* the deprecated ``max_tokens_before_summary`` / ``messages_to_keep`` as
  LangChain reads them, with the same ``DeprecationWarning``.

Bad values raise :class:`ars_core.ConfigError` (a ``ValueError``) with
LangChain's wording. What differs from LangChain's middleware is documented in
``docs/migrating.md``: state is never rewritten, ARS counts the whole request
(system prompt and tool schemas too), and ``trigger=None`` keeps ARS's own
threshold instead of turning summarization off.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ars_core import ConfigError, Estimator, Message, SummarizationEvent, SummaryConfig

__all__ = ["ContextSize", "LangChainArgs", "validate_size"]

ContextSize = tuple[str, float]
_KINDS = ("fraction", "tokens", "messages")
#: LangChain's default of ``keep`` (and of the deprecated ``messages_to_keep``)
DEFAULT_KEEP: ContextSize = ("messages", 20)
#: ``trim_tokens_to_summarize=None``: the summary model reads everything
NO_TRIM = sys.maxsize


def validate_size(size: Any, what: str) -> ContextSize:
    """A ``(kind, value)`` of ``trigger`` / ``keep``, checked as LangChain checks it."""
    if not isinstance(size, tuple) or len(size) != 2:
        raise ConfigError(what, size, f"expected a (kind, value) pair with kind in {_KINDS}")
    kind, value = size
    if kind not in _KINDS:
        raise ConfigError(what, size, f"Unsupported context size type {kind!r}")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(what, size, f"{what} values must be numeric, got {value!r}")
    if kind == "fraction":
        if not 0 < value <= 1:
            raise ConfigError(
                what, size, f"Fractional {what} values must be between 0 and 1, got {value}."
            )
    elif not isinstance(value, int):
        raise ConfigError(what, size, f"{kind} {what} values must be integers, got {value!r}")
    elif value <= 0:
        raise ConfigError(what, size, f"{what} thresholds must be greater than 0, got {value}.")
    return kind, value


def _clauses(trigger: Any) -> tuple[dict[str, float], ...]:
    """``trigger`` as clauses: all conditions of a clause hold (AND), any clause (OR)."""
    if trigger is None:
        return ()
    items = trigger if isinstance(trigger, list) else [trigger]
    clauses: list[dict[str, float]] = []
    for item in items:
        if isinstance(item, tuple):
            kind, value = validate_size(item, "trigger")
            clauses.append({kind: value})
        elif isinstance(item, Mapping):
            if not item:
                raise ConfigError(
                    "trigger",
                    item,
                    "a clause names at least one of 'tokens', 'messages', 'fraction'",
                )
            clauses.append(dict(validate_size((k, v), "trigger") for k, v in item.items()))
        else:
            raise ConfigError("trigger", item, f"Unsupported trigger item type: {type(item)}")
    return tuple(clauses)


def at_threshold(tokens: int) -> float:
    """The ``summary_l2_trigger_ratio`` that summarizes at ``tokens`` and above, as
    LangChain does (ARS summarizes when the view is strictly above ``T * ratio``)."""
    return (tokens - 0.5) / tokens if tokens > 1 else 1.0


def profile_window(model: Any) -> int | None:
    """``model.profile["max_input_tokens"]``, or ``None`` (no model, no profile, a
    profile that cannot be read or does not say)."""
    from .sessions import model_window

    try:
        return model_window(model)
    except Exception:  # a profile property that raises: no profile
        return None


_NEEDS_PROFILE = (
    "Model profile information is required to use fractional token limits, and is "
    "unavailable for the specified model. Please use absolute token counts instead, "
    'or pass ChatModel(..., profile={"max_input_tokens": ...}).'
)


@attrs.define
class LangChainArgs:
    """LangChain's ``trigger`` / ``keep`` / ``trim_tokens_to_summarize`` of one
    middleware, applied to its config before each model call."""

    trigger: Any
    keep: ContextSize
    clauses: tuple[dict[str, float], ...]
    trim_tokens_to_summarize: int | None
    model: Any = None  # the summary model, whose window a fraction refers to
    _cache: dict[tuple[Any, ...], SummaryConfig] = attrs.field(factory=dict, repr=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    @classmethod
    def read(
        cls,
        *,
        trigger: Any,
        keep: Any,
        trim_tokens_to_summarize: Any,
        model: Any,
        deprecated: Mapping[str, Any],
    ) -> LangChainArgs | None:
        """The LangChain arguments given, checked; ``None`` when none was given."""
        if "max_tokens_before_summary" in deprecated:
            value = deprecated["max_tokens_before_summary"]
            warnings.warn(
                "max_tokens_before_summary is deprecated. Use trigger=('tokens', value) instead.",
                DeprecationWarning,
                stacklevel=3,
            )
            if trigger is None and value is not None:
                trigger = ("tokens", value)
        if "messages_to_keep" in deprecated:
            value = deprecated["messages_to_keep"]
            warnings.warn(
                "messages_to_keep is deprecated. Use keep=('messages', value) instead.",
                DeprecationWarning,
                stacklevel=3,
            )
            if keep is None:
                keep = ("messages", value)
        if trigger is None and keep is None and trim_tokens_to_summarize is _UNSET:
            return None
        size = validate_size(keep if keep is not None else DEFAULT_KEEP, "keep")
        clauses = _clauses(trigger)
        fraction = size[0] == "fraction" or any("fraction" in c for c in clauses)
        if fraction and model is not None and profile_window(model) is None:
            raise ConfigError("trigger" if trigger is not None else "keep", model, _NEEDS_PROFILE)
        trim = None if trim_tokens_to_summarize is _UNSET else trim_tokens_to_summarize
        if trim is not None and (isinstance(trim, bool) or not isinstance(trim, int) or trim <= 0):
            raise ConfigError(
                "trim_tokens_to_summarize", trim, "expected a positive integer or None"
            )
        given_trim = trim_tokens_to_summarize is not _UNSET
        return cls(
            trigger=trigger,
            keep=size,
            clauses=clauses,
            trim_tokens_to_summarize=(trim if trim is not None else NO_TRIM)
            if given_trim
            else None,
            model=model,
        )

    # ------------------------------------------------------------ construction

    def base_config(self, config: SummaryConfig | None) -> SummaryConfig:
        """ARS's config for these arguments: ``keep`` by messages, T from one absolute
        token condition, summarization only when L1 is not enough (ratio 1.0)."""
        base = config or SummaryConfig()
        changes: dict[str, Any] = {}
        if self.keep[0] == "messages":
            changes["summary_keep_messages"] = int(self.keep[1])
        tokens = [int(c["tokens"]) for c in self.clauses if set(c) == {"tokens"}]
        if tokens and not self._fractions():
            changes["summary_threshold"] = min(tokens) / 1024  # exact: n x 1024 / 1024
            changes["summary_l2_trigger_ratio"] = at_threshold(min(tokens))
        return attrs.evolve(base, **changes) if changes else base

    def _fractions(self) -> list[float]:
        return [c["fraction"] for c in self.clauses if set(c) == {"fraction"}]

    # ------------------------------------------------------------ each call

    def window(self, main_model: Any) -> int | None:
        """The window a fraction refers to: the summary model's, else the agent's."""
        return profile_window(self.model if self.model is not None else main_model)

    def for_call(
        self,
        config: SummaryConfig,
        window: int | None,
        messages: Sequence[Message],
        event: SummarizationEvent | None,
        estimator: Estimator,
    ) -> tuple[SummaryConfig, bool]:
        """This call's config (T from a fraction of ``window``, the number of messages
        a token ``keep`` keeps) and whether a trigger clause asks for a summary now."""
        effective = [event.summary_message, *messages[event.cutoff :]] if event else messages
        threshold = self._threshold(config, window)
        keep = self._keep_count(effective, window, estimator)
        requested = any(self._holds(c, effective, window, estimator) for c in self._checked())
        key = (id(config), threshold, keep)
        with self._lock:
            made = self._cache.get(key)
            if made is None:
                changes: dict[str, Any] = {}
                if threshold is not None:
                    changes["summary_threshold"] = threshold / 1024
                    changes["summary_l2_trigger_ratio"] = at_threshold(threshold)
                if keep is not None:
                    changes["summary_keep_messages"] = keep
                made = attrs.evolve(config, **changes) if changes else config
                self._cache.clear()  # one entry: a thread's config changes rarely
                self._cache[key] = made
        return made, requested

    def _threshold(self, config: SummaryConfig, window: int | None) -> int | None:
        """T from the fraction conditions (the smallest wins), unless the call's
        config sets ``summary_threshold`` itself (a context field)."""
        fractions = self._fractions()
        if not fractions or config.summary_threshold is not None:
            return None
        if window is None:
            raise ConfigError("trigger", self.trigger, _NEEDS_PROFILE)
        tokens = [max(1, int(window * f)) for f in fractions]
        tokens += [int(c["tokens"]) for c in self.clauses if set(c) == {"tokens"}]
        return min(tokens)

    def _checked(self) -> list[dict[str, float]]:
        """The clauses checked before a call: all but a lone tokens/fraction condition
        (those are T)."""
        return [c for c in self.clauses if not (len(c) == 1 and ("tokens" in c or "fraction" in c))]

    def _holds(
        self,
        clause: Mapping[str, float],
        effective: Sequence[Message],
        window: int | None,
        estimator: Estimator,
    ) -> bool:
        if "messages" in clause and len(effective) < clause["messages"]:
            return False
        limits = []
        if "tokens" in clause:
            limits.append(int(clause["tokens"]))
        if "fraction" in clause:
            if window is None:
                return False  # as LangChain: a fraction without a window never holds
            limits.append(max(1, int(window * clause["fraction"])))
        return not limits or estimator.count(list(effective)) >= min(limits)

    def _keep_count(
        self, effective: Sequence[Message], window: int | None, estimator: Estimator
    ) -> int | None:
        """How many of the newest messages fit in a token ``keep`` (at least 1)."""
        kind, value = self.keep
        if kind == "messages":
            return None
        if kind == "fraction":
            if window is None:
                raise ConfigError("keep", self.keep, _NEEDS_PROFILE)
            budget = max(1, int(window * value))
        else:
            budget = int(value)
        used = kept = 0
        for message in reversed(effective):
            used += estimator.count([message])
            if used > budget:
                break
            kept += 1
        while 0 < kept < len(effective) and effective[-kept].role == "tool":
            kept -= 1  # a tool result is kept with its call or not at all (fewer tokens)
        return max(1, kept)


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


#: ``trim_tokens_to_summarize`` not given (``None`` means "do not trim")
_UNSET: Any = _Unset()
UNSET = _UNSET


@attrs.frozen
class Arguments:
    """The middleware's arguments once LangChain's forms are read."""

    config: SummaryConfig | None
    model: Any
    summarizer: Any
    estimator: Any
    langchain: LangChainArgs | None
    compressor_options: dict[str, Any]


def read_arguments(
    config: Any,
    *,
    model: Any,
    summarizer: Any,
    estimator: Any,
    token_counter: Any,
    summary_prompt: str | None,
    trigger: Any,
    keep: Any,
    trim_tokens_to_summarize: Any,
    compressor_options: Mapping[str, Any] | None,
    deprecated: Mapping[str, Any],
) -> Arguments:
    """Read the middleware's arguments: ARS's own (``config``, ``estimator``...) and
    LangChain's (the model first, ``trigger``, ``keep``, ``token_counter``,
    ``summary_prompt``, ``trim_tokens_to_summarize``)."""
    unknown = set(deprecated) - {"max_tokens_before_summary", "messages_to_keep"}
    if unknown:
        raise TypeError(f"unexpected keyword arguments: {sorted(unknown)}")
    if isinstance(config, str) or _is_chat_model(config):  # LangChain's first argument
        if model is not None:
            raise ConfigError(
                "model", model, "the model is given twice (first argument and model=)"
            )
        model, config = config, None
    if isinstance(config, Mapping):
        config = SummaryConfig.from_context(config)
    if isinstance(model, str):
        from langchain.chat_models import init_chat_model

        model = init_chat_model(model)
    if _is_chat_model(summarizer):  # LangChain's summarizer=: a chat model writes summaries
        from .summarizer import ChatModelSummarizer

        summarizer = ChatModelSummarizer(summarizer)
    if token_counter is not None:
        if estimator is not None:
            raise ConfigError("token_counter", token_counter, "pass token_counter or estimator")
        estimator = token_counter
    if summary_prompt is not None:
        config = attrs.evolve(config or SummaryConfig(), summary_prompt=summary_prompt)
    args = LangChainArgs.read(
        trigger=trigger,
        keep=keep,
        trim_tokens_to_summarize=trim_tokens_to_summarize,
        model=model,
        deprecated=deprecated,
    )
    options = dict(compressor_options or {})
    if args is not None:
        config = args.base_config(config)
        # LangChain's keep is exact: the fixed rounds keep what it says, where lean
        # rounds keep fewer when the kept messages would not fit under the threshold
        options.setdefault("lean_rounds", False)
        if args.trim_tokens_to_summarize is not None:
            options.setdefault("summary_input_tokens", args.trim_tokens_to_summarize)
    return Arguments(config, model, summarizer, estimator, args, options)


def _is_chat_model(obj: Any) -> bool:
    from langchain_core.language_models import BaseChatModel

    return isinstance(obj, BaseChatModel)


def model_view(values: Mapping[str, Any]) -> list[Any]:
    """What the model gets from a thread's state, as LangChain messages: the latest
    summary, then the messages after its cutoff (``graph.get_state(config).values``
    holds every message; the summary lives in ``_summarization_event``). L1 then
    shortens large tool results in each request on top of this (files named in the
    text). With no summary yet: the state's messages."""
    from .convert import from_core, to_core
    from .sessions import EVENT_KEY, event_from_state

    messages = list(values.get("messages") or ())
    event = event_from_state(values.get(EVENT_KEY))
    if event is None:
        return messages
    from ars_core.adapter import check_event

    checked = check_event([to_core(m) for m in messages], event).event
    if checked is None:
        return messages
    return [from_core(checked.summary_message), *messages[checked.cutoff :]]
