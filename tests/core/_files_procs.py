"""The writer and reader processes of the crash-safety tests (``test_atomic_files``).

``python -m tests.core._files_procs write URL OPTIONS_JSON LINES SLOW``
    offloads one large tool result through ``Compressor.call`` onto the fsspec
    root ``URL``; with ``SLOW=1`` every write goes out in 64 KiB pieces with a
    pause between them, so the test can kill the process mid-write (``SLOW=1``:
    through the filesystem's own file objects, an application's fsspec class;
    ``SLOW=2``: through the ``os`` calls ARS stages local files with). Prints
    ``writing`` just before the call and ``done`` after it.

``python -m tests.core._files_procs read URL OPTIONS_JSON PATH STOP_FILE``
    reads ``PATH`` under ``URL`` over and over until ``STOP_FILE`` exists, and
    prints a JSON list of what it saw: ``"absent"`` or the SHA-256 of the bytes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import time
from typing import Any

from fsspec.asyn import AsyncFileSystem
from fsspec.core import url_to_fs

from ars_core import Compressor, FsspecBackend, Message, SummaryConfig, ToolCall

TOOL = "dump"
PIECE = 64 * 1024


def big_text(lines: int) -> str:
    """The large tool result (deterministic, so the test knows its hash)."""
    return "".join(
        f"line {i:09d}: the quick brown fox jumps over the lazy dog\n" for i in range(lines)
    )


class _SlowFile:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, data: bytes) -> int:
        for start in range(0, len(data), PIECE):
            self._inner.write(data[start : start + PIECE])
            self._inner.flush()
            time.sleep(0.01)
        return len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __enter__(self) -> _SlowFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()


def _slow(fs: Any) -> Any:
    """The same filesystem, with slow streamed writes."""

    class Slow(type(fs)):  # type: ignore[misc]
        def open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
            handle = super().open(path, mode, **kwargs)
            return _SlowFile(handle) if "w" in mode else handle

    if isinstance(fs, AsyncFileSystem):  # s3fs: its sync pipe_file runs this coroutine

        class SlowAsync(Slow):
            async def _pipe_file(self, path: str, data: bytes, **kwargs: Any) -> Any:
                # a slow upload: long enough that the test's kill, 1.5 s after
                # "writing", always lands during it however fast the counting was
                await asyncio.sleep(max(8.0, 0.01 * (len(data) // PIECE)))
                return await super()._pipe_file(path, data, **kwargs)

        return SlowAsync(**fs.storage_options)
    return Slow(**fs.storage_options)


def _slow_os_writes() -> None:
    """``os.write`` of at most :data:`PIECE` bytes, with a pause after each."""
    real_write = os.write

    def write(fd: int, data: Any) -> int:
        written = real_write(fd, data[:PIECE])
        time.sleep(0.01)
        return written

    os.write = write


def write(url: str, options: str, lines: str, slow: str) -> None:
    storage_options = json.loads(options)
    fs, _ = url_to_fs(url, **storage_options)
    if slow == "1":
        fs = _slow(fs)
    if slow == "2":
        _slow_os_writes()
        fs = None
    backend = FsspecBackend(url, storage_options=storage_options, fs=fs)
    call = ToolCall(id="c1", name=TOOL, args={})
    messages = [
        Message(role="user", content="dump it", id="u1"),
        Message(role="assistant", content="", tool_calls=(call,), id="a1"),
        Message(role="tool", content=big_text(int(lines)), tool_call_id="c1", name=TOOL, id="t1"),
    ]
    config = SummaryConfig(summary_threshold=1, summary_l2_trigger_ratio=1.0)
    compressor = Compressor(config, backend=backend)
    print("writing", flush=True)
    compressor.call(messages, lambda view: Message(role="assistant", content="ok"))
    print("done", flush=True)


def read(url: str, options: str, path: str, stop_file: str) -> None:
    fs, root = url_to_fs(url, **json.loads(options))
    target = f"{root.rstrip('/')}/{path}"
    seen: list[str] = []
    while not os.path.exists(stop_file):
        try:
            data = fs.cat_file(target)
        except FileNotFoundError:
            seen.append("absent")
        else:
            seen.append(hashlib.sha256(data).hexdigest())
        fs.invalidate_cache()
        time.sleep(0.005)
    print(json.dumps(seen))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"write": write, "read": read}[command](*args)
