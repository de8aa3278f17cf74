"""Estimators and summarizers named on the command line, built through the plugin registry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import PluginError
from ..estimate import Estimator
from ..messages import Message
from ..plugins import available, get_estimator, get_summarizer
from ..summarize import SummaryResult, Usage, render_prompt
from .common import CliError, one_line

__all__ = [
    "ESTIMATOR_ALIASES",
    "ChatModelSummarizer",
    "installed_estimators",
    "make_estimator",
    "make_summarizer",
    "summarizer_name",
]

#: other spellings ``--estimator`` accepts, mapped to registered estimator names
ESTIMATOR_ALIASES: dict[str, str] = {
    "o200k_base": "o200k",
    "tiktoken:o200k_base": "o200k",
    "cl100k_base": "cl100k",
    "tiktoken:cl100k_base": "cl100k",
}


def make_estimator(name: str) -> Estimator:
    """The estimator registered as ``name`` (built-ins: ``approx``, ``tiktoken``/``o200k``,
    ``cl100k``; plugins add more)."""
    key = name.strip()
    key = ESTIMATOR_ALIASES.get(key.lower(), key)
    try:
        estimator: Estimator = get_estimator(key)
    except PluginError as exc:
        raise CliError(f"--estimator: {one_line(exc)}", 2) from exc
    return estimator


def installed_estimators() -> list[Estimator]:
    """One of each installed estimator (aliases such as ``tiktoken``/``o200k`` once)."""
    found: dict[str, Estimator] = {}
    for factory in available("estimator").values():
        try:
            est = factory()
        except Exception:  # e.g. tiktoken not installed: that estimator is not available
            continue
        found.setdefault(str(getattr(est, "name", type(est).__name__)), est)
    return list(found.values())


class ChatModelSummarizer:
    """A summarizer over any LangChain chat model (``--summarizer provider:model``).

    Renders ``summary_prompt`` with the history, calls the model tagged
    ``nostream`` and reports the provider's usage when it gives one.
    """

    def __init__(self, model: Any, name: str) -> None:
        self.model = model
        self.name = name

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        response = self.model.invoke(render_prompt(prompt, messages), config={"tags": ["nostream"]})
        text = getattr(response, "text", None)
        if callable(text) and not isinstance(text, str):  # older langchain-core: a method
            text = text()
        if not isinstance(text, str):
            text = str(getattr(response, "content", response))
        meta = getattr(response, "usage_metadata", None) or {}
        usage = None
        if meta:
            usage = Usage(
                input_tokens=int(meta.get("input_tokens", 0)),
                output_tokens=int(meta.get("output_tokens", 0)),
            )
        return SummaryResult(text=text.strip(), usage=usage, model=self.name)


def make_summarizer(name: str) -> Any:
    """A registered summarizer (``extractive``, the built-in default, or a plugin's) or a
    LangChain chat-model string ``provider:model`` (needs the ``langchain`` extra)."""
    key = name.strip()
    if key.lower() in ("default", "builtin", "built-in"):
        key = "extractive"
    if key in available("summarizer"):
        try:
            return get_summarizer(key)
        except PluginError as exc:
            raise CliError(f"--summarizer: {one_line(exc)}") from exc
    if ":" not in key:
        names = ", ".join(sorted(available("summarizer")))
        raise CliError(
            f"--summarizer: unknown summarizer {name!r} (registered: {names}; or a LangChain "
            "chat-model string such as 'openai:gpt-4o-mini')",
            2,
        )
    return _chat_model_summarizer(name, key)


def _chat_model_summarizer(name: str, key: str) -> Any:
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise CliError(
            f'--summarizer {name!r} needs LangChain: pip install "ars[langchain]"'
        ) from exc
    try:
        model = init_chat_model(key)
    except Exception as exc:  # provider packages raise anything: ImportError, ValueError...
        raise CliError(f"--summarizer: cannot load chat model {name!r}: {one_line(exc)}") from exc
    try:  # the adapter's summarizer when it is installed (same contract)
        from ars_langchain.summarizer import ChatModelSummarizer as AdapterSummarizer
    except ImportError:
        return ChatModelSummarizer(model, key)
    summarizer = AdapterSummarizer(model)
    summarizer.name = key  # type: ignore[attr-defined]
    return summarizer


def summarizer_name(summarizer: Any) -> str:
    """How reports name ``summarizer``."""
    return str(getattr(summarizer, "name", None) or type(summarizer).__name__)
