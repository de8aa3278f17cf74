"""Helpers of the LlamaIndex adapter tests."""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.base import BaseEvent
from llama_index.core.tools import FunctionTool

from ars_llamaindex import ArsCompressionEvent

WORDS = (
    "river",
    "stone",
    "cloud",
    "maple",
    "ember",
    "quartz",
    "willow",
    "harbor",
    "copper",
    "meadow",
)


def prose(n_words: int, tag: str = "") -> str:
    """Deterministic English-like text of ``n_words`` words (about 1.1 tokens each)."""
    words = itertools.islice(itertools.cycle(WORDS), n_words)
    body = " ".join(words)
    return f"{tag} {body}" if tag else body


def log_text(lines: int) -> str:
    """A large, line-structured tool output."""
    return "".join(
        f"{WORDS[i % 10]} {WORDS[(i * 3) % 10]} served request at {WORDS[(i * 7) % 10]}\n"
        for i in range(lines)
    )


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def dumps(messages: Any) -> list[dict[str, Any]]:
    """Messages in JSON form, for exact comparison."""
    return [m.model_dump(mode="json") for m in messages]


class EventRecorder(BaseEventHandler):
    """Collects ARS instrumentation events (attached to LlamaIndex's root dispatcher)."""

    events: list[Any] = []  # noqa: RUF012 - a pydantic field (copied per instance)

    @classmethod
    def class_name(cls) -> str:
        return "EventRecorder"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, ArsCompressionEvent):
            self.events.append(event)

    @property
    def payloads(self) -> list[dict[str, Any]]:
        return [e.payload for e in self.events]

    @property
    def phases(self) -> list[tuple[str, str]]:
        return [(e.payload["phase"], e.payload["level"]) for e in self.events]


class Workspace:
    """What the agent's real tools act on."""

    def __init__(self) -> None:
        self.written: dict[str, str] = {}
        self.outputs: dict[str, str] = {}
        self.commands: list[str] = []

    def bash(self, cmd: str) -> str:
        """Run a shell command and return its output."""
        self.commands.append(cmd)
        return self.outputs.get(cmd, f"ran {cmd}")

    def write_file(self, path: str, content: str) -> str:
        """Write a file."""
        self.written[path] = content
        return f"wrote {len(content)} characters to {path}"

    def tools(self) -> list[FunctionTool]:
        return [FunctionTool.from_defaults(self.bash), FunctionTool.from_defaults(self.write_file)]
