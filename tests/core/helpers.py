"""Builders for core tests: conversations with ids, a small config, a memory backend."""

from __future__ import annotations

import hashlib
import itertools
import struct
import uuid
import zlib

from ars_core import FsspecBackend, Message, SummaryConfig, ToolCall
from ars_core.bounds import Utf8Bytes

_ids = itertools.count()


def mid() -> str:
    return f"m{next(_ids)}"


def user(text: str) -> Message:
    return Message(role="user", content=text, id=mid())


def assistant(text: str = "", *calls: ToolCall) -> Message:
    return Message(role="assistant", content=text, tool_calls=calls, id=mid())


def call(name: str, call_id: str | None = None, **args: object) -> ToolCall:
    return ToolCall(id=call_id or f"call_{uuid.uuid4().hex[:8]}", name=name, args=args)


def tool(call_: ToolCall, text: str) -> Message:
    return Message(role="tool", content=text, tool_call_id=call_.id, name=call_.name, id=mid())


def words(n: int, seed: str = "alpha") -> str:
    """About ``n`` tokens of English-like prose (distinct per seed)."""
    vocab = [
        "context",
        "window",
        "agent",
        "history",
        "summary",
        "message",
        "request",
        "token",
        seed,
    ]
    return " ".join(vocab[i % len(vocab)] for i in range(n))


def large_task(lines: int = 220) -> str:
    """A markdown issue statement of about 24 approx tokens a line, every line distinct
    (220 lines: about 5,300 tokens, more than the summary bound at T = 8K)."""
    body = [
        f"- requirement {i}: the runner must report case {i} as xfailed when the marker "
        "is added at run time, not as failed"
        for i in range(lines)
    ]
    return "\n".join(
        [
            "# Pytest 6: a dynamically added xfail marker no longer ignores the failure",
            "",
            "## Description",
            *body,
            "",
            "## Expected behaviour",
            "TASK-TAIL: the test is reported as xfailed.",
        ]
    )


def small_config(**overrides: object) -> SummaryConfig:
    """T = 1,024 tokens, L2 threshold 512, keep 4, tool results above 120 tokens offloaded."""
    values: dict[str, object] = dict(
        summary_threshold=1,
        summary_keep_messages=4,
        summary_tool_result_token_limit=120,
        summary_l2_trigger_ratio=0.5,
    )
    values.update(overrides)
    return SummaryConfig(**values)  # type: ignore[arg-type]


def memory_backend() -> FsspecBackend:
    return FsspecBackend(f"memory://ars-test-{uuid.uuid4().hex}")


def files_in(backend: FsspecBackend) -> dict[str, str]:
    """Every file in the backend as {virtual path: text}."""
    out: dict[str, str] = {}
    base = backend._host("")
    for path in backend.fs.find(base):
        rel = (
            path[len(base) :].lstrip("/")
            if path.startswith(base)
            else path.split(base.lstrip("/"), 1)[-1].lstrip("/")
        )
        out[rel] = backend.read_text(rel)
    return out


def png(width: int, height: int, seed: str) -> bytes:
    """A valid PNG of noise (so it does not compress away)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    rows = b""
    for y in range(height):
        noise = hashlib.shake_256(f"{seed}-{y}".encode()).digest(width * 3)
        rows += b"\x00" + noise
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


class CountingBytes(Utf8Bytes):
    """UTF-8 bytes (a bounded estimator's ``utf8_bytes``), recording every message measured."""

    def __init__(self) -> None:
        super().__init__()
        self.measured: list[Message] = []

    def measure(self, message: Message) -> int:
        self.measured.append(message)
        return super().measure(message)
