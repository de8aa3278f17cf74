"""Pieces shared by the real-model tests: the models, a recorder of what the
provider answered, and conversation turns of a known size."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from ars_core import SummaryConfig
from tests.servers import LlamaServer

#: a short English prompt: SmolLM2 follows it, and it leaves room in a 2,048-token window
SUMMARY_PROMPT = (
    "Summarize the conversation below in two short sentences. Keep names and numbers.\n\n"
    "{messages}\n\nSummary:"
)
#: every answer and every summary is at most this many tokens (2 CPU cores, a small model)
MAX_TOKENS = 32
#: T = 256 estimated tokens; L2 above 128; two messages kept
CONFIG = SummaryConfig(
    summary_threshold=0.25,
    summary_keep_messages=2,
    summary_l2_trigger_ratio=0.5,
    summary_prompt=SUMMARY_PROMPT,
)
SYSTEM = "You are a helpful assistant. Answer in one short sentence."
SUMMARY_TAG = "ars_summary"

_FACTS = [
    "the billing service moved to the new cluster",
    "the nightly backup took forty minutes",
    "Alice fixed the login bug in release 4.2",
    "the cache hit rate rose to ninety percent",
    "Bob scheduled the database upgrade for Friday",
    "the mobile app crashed on older phones",
    "the search index was rebuilt overnight",
    "Carol wrote the migration guide",
]


def user_turn(i: int, sentences: int = 4) -> str:
    """A user message of about ``15 * sentences`` words, numbered ``i``."""
    lines = [
        f"Note {i}.{k}: on day {i * 10 + k} {_FACTS[(i + k) % len(_FACTS)]}."
        for k in range(sentences)
    ]
    return f"Turn {i}. Please remember these notes.\n" + "\n".join(lines)


def chat_model(server: LlamaServer, recorder: Recorder | None = None, **kwargs: Any) -> Any:
    """``ChatOpenAI`` against the local server, as a user would configure it."""
    from langchain_openai import ChatOpenAI

    options: dict[str, Any] = {
        "base_url": server.base_url,
        "model": server.model,
        "api_key": "no-key-needed",
        "max_tokens": MAX_TOKENS,
        # langchain-openai sends max_tokens as `max_completion_tokens`, which
        # llama-cpp-python's server ignores (it would generate to the window's end)
        "extra_body": {"max_tokens": MAX_TOKENS},
        "temperature": 0,
        "max_retries": 0,
        "timeout": 300,
        "stream_usage": True,
        "callbacks": [recorder] if recorder is not None else None,
    }
    options.update(kwargs)
    return ChatOpenAI(**options)


@dataclass
class Call:
    """One request the provider answered (or refused)."""

    tags: list[str]
    prompt: list[BaseMessage]
    text: str = ""
    usage: dict[str, Any] | None = None
    error: BaseException | None = None

    @property
    def is_summary(self) -> bool:
        return SUMMARY_TAG in self.tags


@dataclass
class Recorder(BaseCallbackHandler):
    """Records every chat-model call: tags, the messages sent, the provider's answer
    and its reported usage, or the error it raised."""

    calls: list[Call] = field(default_factory=list)
    _open: dict[UUID, Call] = field(default_factory=dict)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        call = Call(tags=list(tags or []), prompt=list(messages[0]))
        self._open[run_id] = call
        self.calls.append(call)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._open.pop(run_id, None)
        if call is None:
            return
        generation = response.generations[0][0]
        call.text = generation.text
        message = getattr(generation, "message", None)
        call.usage = dict(getattr(message, "usage_metadata", None) or {}) or None

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._open.pop(run_id, None)
        if call is not None:
            call.error = error

    @property
    def summaries(self) -> list[Call]:
        return [c for c in self.calls if c.is_summary and c.error is None]

    @property
    def main(self) -> list[Call]:
        return [c for c in self.calls if not c.is_summary]


CUT_MARK = "\n[ARS: this summary was cut to "


def holds_model_summary(content: str, text: str) -> bool:
    """Whether a summary message holds the summary model's ``text`` whole, not cut:
    the engine writes the task beside the summary and leaves the summarizer at least
    a floor of the bound (at T = 256, 64 of its 128 to 171 tokens: SmolLM2's 32 fit)."""
    return text in content and CUT_MARK not in content
