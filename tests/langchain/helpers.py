"""Shared pieces of the LangChain adapter tests: tools, an agent builder and a
runner that drives a real graph (sync or async) and collects every stream
output (custom events, message tokens, SSE frames) and the checkpoint."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool

from ars_langchain import asse_frames, is_compression_event, sse_frames
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.conftest import async_saver, make_saver

SYSTEM = "You are a careful coding agent."
STREAM_MODES = ["messages", "custom", "updates"]


@tool
def big_output(n: int) -> str:
    """Print n lines of build output."""
    return "".join(
        f"build step {i}: compiled module number {i} without warnings\n" for i in range(n)
    )


@tool
def write_file(file_path: str, content: str) -> str:
    """Write content to a file."""
    return f"wrote {len(content)} characters to {file_path}"


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


TOOLS = [big_output, write_file, echo]


def prose(tag: str, words: int = 180) -> str:
    """A message body of about ``words`` words (~1.1 approx tokens each)."""
    base = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    return f"{tag}: " + " ".join(base[i % len(base)] for i in range(words))


@dataclass
class RunOutput:
    """Everything one run streamed."""

    items: list[Any] = field(default_factory=list)
    error: BaseException | None = None

    @property
    def custom(self) -> list[Any]:
        return [chunk for mode, chunk in self.items if mode == "custom"]

    @property
    def compression(self) -> list[dict[str, Any]]:
        return [c for c in self.custom if is_compression_event(c)]

    @property
    def tokens(self) -> list[tuple[Any, dict[str, Any]]]:
        return [chunk for mode, chunk in self.items if mode == "messages"]

    @property
    def frames(self) -> list[str]:
        return list(sse_frames(self.items, stream_mode=STREAM_MODES))


@dataclass
class Result:
    runs: list[RunOutput]
    state: dict[str, Any]
    history: list[Any]


class Runner:
    """Runs turns of an agent on one checkpointer kind, in sync or async mode."""

    def __init__(
        self, kind: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        self.kind = kind
        self.mode = mode
        self.tmp_path = tmp_path
        self.request = request

    def run(
        self,
        build: Callable[[Any], Any],
        turns: Sequence[dict[str, Any]],
        config: dict[str, Any],
        context: Any = None,
    ) -> Result:
        if self.mode == "sync":
            return self._run_sync(build, turns, config, context)
        url = self.request.getfixturevalue("pg_setup") if self.kind == "postgres" else None
        return asyncio.run(self._run_async(build, turns, config, context, url))

    def _run_sync(
        self,
        build: Callable[[Any], Any],
        turns: Sequence[dict[str, Any]],
        config: dict[str, Any],
        context: Any,
    ) -> Result:
        with make_saver(self.kind, self.tmp_path, self.request) as saver:
            agent = build(saver)
            runs = []
            for turn in turns:
                out = RunOutput()
                try:
                    for item in agent.stream(
                        turn, config, context=context, stream_mode=STREAM_MODES
                    ):
                        out.items.append(item)
                except Exception as exc:
                    out.error = exc
                runs.append(out)
            snapshot = agent.get_state(config)
            history = list(agent.get_state_history(config))
            return Result(runs, dict(snapshot.values), history)

    async def _run_async(
        self,
        build: Callable[[Any], Any],
        turns: Sequence[dict[str, Any]],
        config: dict[str, Any],
        context: Any,
        url: str | None,
    ) -> Result:
        async with async_saver(self.kind, self.tmp_path, url) as saver:
            agent = build(saver)
            runs = []
            for turn in turns:
                out = RunOutput()
                try:
                    async for item in agent.astream(
                        turn, config, context=context, stream_mode=STREAM_MODES
                    ):
                        out.items.append(item)
                except Exception as exc:
                    out.error = exc
                runs.append(out)
            snapshot = await agent.aget_state(config)
            history = [s async for s in agent.aget_state_history(config)]
            return Result(runs, dict(snapshot.values), history)


def build_agent(
    model: FakeToolChatModel,
    middleware: Any,
    *,
    tools: Sequence[Any] = TOOLS,
    context_schema: Any = None,
) -> Callable[[Any], Any]:
    def build(saver: Any) -> Any:
        return create_agent(
            model,
            tools=list(tools),
            system_prompt=SYSTEM,
            middleware=[middleware],
            checkpointer=saver,
            context_schema=context_schema,
        )

    return build


async def collect_async_frames(
    agent: Any, turn: dict[str, Any], config: dict[str, Any]
) -> list[str]:
    return [
        f
        async for f in asse_frames(
            agent.astream(turn, config, stream_mode=STREAM_MODES), stream_mode=STREAM_MODES
        )
    ]


def parse_frames(frames: Sequence[str]) -> list[tuple[str, str]]:
    """``(event, data)`` of each SSE frame."""
    out = []
    for frame in frames:
        assert frame.endswith("\n\n"), frame
        event, data = "", []
        for line in frame[:-2].split("\n"):
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        out.append((event, "\n".join(data)))
    return out
