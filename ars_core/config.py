"""Configuration: the ``summary_*`` fields of an agent's Context.

Every field carries ``metadata={"admin_only": True, ...}`` so a settings UI can
restrict who may change it. Values are validated on construction and raise
:class:`~ars_core.errors.ConfigError` naming the field.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import attrs

from .budget import summary_token_limit
from .errors import ConfigError

__all__ = [
    "CHINESE_SUMMARY_PROMPT",
    "CONFIG_FIELDS",
    "DEFAULT_SUMMARY_PROMPT",
    "DEFAULT_THRESHOLD_K",
    "MODEL_WINDOW_SHARE",
    "SUMMARY_PROMPTS",
    "SummaryConfig",
]

#: the built-in summary prompt: what a summary must keep for the agent (or the
#: chat) to go on, written in the conversation's own language
DEFAULT_SUMMARY_PROMPT = """You compress the context of a long conversation. Below is the earlier part of a conversation between an agent and its user (tool calls and tool results included).
Write a concise but complete summary that replaces this history while the agent goes on. The user's requests that set the work and the newest request are kept verbatim beside your summary: do not restate them. The summary must keep:

1. every requirement and constraint the user stated later in the conversation;
2. the steps already done, the decisions made and why;
3. the files, paths, commands, identifiers and key values involved (verbatim);
4. the errors met and how they were handled;
5. the work still open and the next steps;
6. the facts either side stated that may be asked about later: names, dates and times, numbers, places, preferences, commitments and changes of plan.

Do not invent anything the history does not say. Write the summary in the language of the conversation.

<messages>
{messages}
</messages>"""

#: the Chinese summary prompt (the default of earlier versions); ``summary_prompt="zh"`` selects it
CHINESE_SUMMARY_PROMPT = """你是一个负责压缩长对话上下文的助手。下面是智能体与用户之间较早的对话历史（包括工具调用和工具结果）。
请生成一份简洁而完整的摘要，供智能体继续工作时替代这段历史。用户设定任务的请求和最新的请求会原文保留在摘要旁边，不要复述它们。摘要必须保留：

1. 用户在对话中后来提出的所有明确要求和约束；
2. 已经完成的步骤、做出的决定及其理由；
3. 涉及的文件、路径、命令、标识符和关键数值（原样保留）；
4. 遇到的错误及其处理方式；
5. 尚未完成的工作和下一步计划。

不要编造历史中没有的内容。使用与对话相同的语言。

<messages>
{messages}
</messages>"""

#: the built-in prompts by name: ``summary_prompt`` accepts a name as well as a template
SUMMARY_PROMPTS: Mapping[str, str] = {"en": DEFAULT_SUMMARY_PROMPT, "zh": CHINESE_SUMMARY_PROMPT}


#: ``summary_threshold`` (K tokens) when it is not set and the model's window is unknown
DEFAULT_THRESHOLD_K = 100
#: with no ``summary_threshold``, T is this share of the model's input window (as deepagents)
MODEL_WINDOW_SHARE = 0.85


def _int_at_least(field: str, low: int) -> Any:
    """A validator: ``field`` is an ``int`` (not a ``bool``) of at least ``low``."""
    wanted = "a positive integer" if low == 1 else f"an integer >= {low}"

    def check(_: Any, __: Any, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(field, value, f"must be {wanted}")

    return check


def _positive_int(field: str) -> Any:
    return _int_at_least(field, 1)


def _threshold(_: Any, __: Any, value: Any) -> None:
    if value is None:  # follow the model's window, else DEFAULT_THRESHOLD_K
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not value > 0
        or not math.isfinite(value * 1024)
    ):
        raise ConfigError(
            "summary_threshold", value, "must be a finite, positive number of K tokens (x1024)"
        )


def _seconds(field: str, *, zero: bool) -> Any:
    def check(_: Any, __: Any, value: Any) -> None:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
            or (value == 0 and not zero)
        ):
            bound = ">= 0" if zero else "> 0"
            raise ConfigError(field, value, f"must be a finite number of seconds {bound}")

    return check


def _optional_positive_int(field: str) -> Any:
    check = _positive_int(field)

    def optional(instance: Any, attribute: Any, value: Any) -> None:
        if value is not None:
            check(instance, attribute, value)

    return optional


def _named_prompt(value: Any) -> Any:
    """A built-in prompt's name (:data:`SUMMARY_PROMPTS`) becomes its text."""
    return SUMMARY_PROMPTS.get(value, value) if isinstance(value, str) else value


def _prompt(_: Any, __: Any, value: Any) -> None:
    if not isinstance(value, str) or "{messages}" not in value:
        names = ", ".join(repr(n) for n in SUMMARY_PROMPTS)
        raise ConfigError(
            "summary_prompt",
            value if not isinstance(value, str) else value[:60],
            f"must be a string containing the {{messages}} placeholder, or a built-in "
            f"prompt's name ({names})",
        )


def _ratio(_: Any, __: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value <= 1):
        raise ConfigError("summary_l2_trigger_ratio", value, "must be a number in (0, 1]")
    if value < 0.1:
        warnings.warn(
            f"summary_l2_trigger_ratio={value} is below the recommended range 0.1-1.0",
            UserWarning,
            stacklevel=4,
        )


def _meta(description: str) -> dict[str, Any]:
    return {"admin_only": True, "description": description}


@attrs.frozen
class SummaryConfig:
    """The summary fields of an agent's Context: the seed's five, with the
    seed's defaults, ``summary_max_tokens``, the bound on a summary, and the
    controls of the summary call (timeout, transient retries with backoff,
    retries with a halved input after an overflow).

    ``summary_threshold`` left unset (``None``) follows the model: the adapters
    set T to 85% of the main model's input window when they know it
    (:meth:`following_model`), and to the seed's 100K otherwise. A value that
    is set always wins."""

    summary_threshold: float | None = attrs.field(
        default=None,
        validator=_threshold,
        metadata=_meta(
            "entry threshold in K tokens; x1024 gives the token threshold; unset: 85% of "
            "the main model's input window when known, else 100"
        ),
    )
    summary_keep_messages: int = attrs.field(
        default=10,
        validator=_positive_int("summary_keep_messages"),
        metadata=_meta("recent messages kept after L2, besides the summary message"),
    )
    summary_prompt: str = attrs.field(
        default=DEFAULT_SUMMARY_PROMPT,
        converter=_named_prompt,
        validator=_prompt,
        metadata=_meta(
            "summary model prompt; must contain {messages}, or name a built-in one "
            '("en", the default; "zh", Chinese)'
        ),
    )
    summary_tool_result_token_limit: int = attrs.field(
        default=300,
        validator=_positive_int("summary_tool_result_token_limit"),
        metadata=_meta(
            "approximate token limit above which L1 offloads a tool result, and its preview budget"
        ),
    )
    summary_l2_trigger_ratio: float = attrs.field(
        default=0.4,
        validator=_ratio,
        metadata=_meta(
            "share of the entry threshold above which, after L1, L2 runs (recommended 0.1-1.0)"
        ),
    )

    summary_max_tokens: int | None = attrs.field(
        default=None,
        validator=_optional_positive_int("summary_max_tokens"),
        metadata=_meta(
            "largest summary kept, in tokens (longer ones are cut with a marker); the "
            "task a summary keeps is sized from it; default: the L2 threshold, at least "
            "256 and at most half the entry threshold, and a round whose task is larger "
            "than its share of that bound may exceed it to keep the task whole"
        ),
    )

    summary_timeout: float = attrs.field(
        default=300.0,
        validator=_seconds("summary_timeout", zero=False),
        metadata=_meta(
            "seconds a summary may take, retries and their waits included; then the "
            "summary fails (recorded, with a fallback summary)"
        ),
    )
    summary_max_retries: int = attrs.field(
        default=2,
        validator=_int_at_least("summary_max_retries", 0),
        metadata=_meta(
            "retries of a summary call that failed with a transient error "
            "(rate limit, server or connection error)"
        ),
    )
    summary_retry_delay: float = attrs.field(
        default=1.0,
        validator=_seconds("summary_retry_delay", zero=True),
        metadata=_meta(
            "seconds before the first transient retry; each further retry waits twice as long"
        ),
    )
    summary_overflow_retries: int = attrs.field(
        default=3,
        validator=_int_at_least("summary_overflow_retries", 0),
        metadata=_meta(
            "retries of a summary call that overflowed the summary model's window, "
            "each with the input halved"
        ),
    )

    @property
    def summary_token_limit(self) -> int:
        """The bound on a summary's size (the summary budget): ``summary_max_tokens``,
        or the L2 threshold, at least 256 tokens and at most ``T/2``
        (:func:`ars_core.budget.summary_token_limit`, beside every other budget
        rule)."""
        return summary_token_limit(
            self.threshold_tokens, self.l2_threshold_tokens, self.summary_max_tokens
        )

    @property
    def threshold_tokens(self) -> int:
        """The entry threshold ``T`` in tokens (``summary_threshold`` x 1024, 100K
        when it is not set)."""
        k = self.summary_threshold if self.summary_threshold is not None else DEFAULT_THRESHOLD_K
        return int(k * 1024)

    def following_model(self, max_input_tokens: int | None) -> SummaryConfig:
        """This config with T set from the main model's input window
        (``max_input_tokens``: a LangChain profile's, a LlamaIndex LLM's
        ``context_window``): ``MODEL_WINDOW_SHARE`` of it, when
        ``summary_threshold`` is not set and the window is a positive integer.
        A configured ``summary_threshold`` always wins (``self`` is returned)."""
        window = max_input_tokens
        if (
            self.summary_threshold is not None
            or isinstance(window, bool)
            or not isinstance(window, int)
            or window <= 0
        ):
            return self
        tokens = max(1, int(window * MODEL_WINDOW_SHARE))
        return attrs.evolve(self, summary_threshold=tokens / 1024)  # exact: tokens x 1024 / 1024

    def threshold_source(self, max_input_tokens: int | None) -> str | None:
        """Where :meth:`following_model` takes T from, in words (``None`` when
        the window is not used)."""
        if self.following_model(max_input_tokens) is self:
            return None
        share = round(MODEL_WINDOW_SHARE * 100)
        return f"{share}% of the model's {max_input_tokens:,}-token input window"

    @property
    def l2_threshold_tokens(self) -> int:
        """``T * summary_l2_trigger_ratio``."""
        return int(self.threshold_tokens * self.summary_l2_trigger_ratio)

    @classmethod
    def from_context(cls, context: Any) -> SummaryConfig:
        """Build from an agent Context: a mapping or any object with ``summary_*``
        attributes. Fields that are absent or ``None`` take their defaults."""
        values: dict[str, Any] = {}
        for name in CONFIG_FIELDS:
            if isinstance(context, Mapping):
                value = context.get(name)
            else:
                value = getattr(context, name, None)
            if value is not None:
                values[name] = value
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


CONFIG_FIELDS: tuple[str, ...] = tuple(f.name for f in attrs.fields(SummaryConfig))
