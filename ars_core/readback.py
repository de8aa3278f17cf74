"""Reading ARS's files back, a page at a time: what a read-back tool answers.

An offloaded tool result's preview and a summary name the file that holds the
full text (``outputs/large_tool_results/...``, ``outputs/conversation_history/...``).
An agent without file tools of its own gets a small tool to open them
(``read_ars_file`` in the LangChain middleware, a ``FunctionTool`` from
``ArsMemory`` in LlamaIndex); both answer with :func:`read_page`.

A page is a range of lines, numbered from 1 as ``cat -n`` numbers them. A line
longer than :data:`LINE_CHARS` characters (a one-line JSON result) is shown in
pieces of that size, each counted as a line, so every page stays small; a page
that does not reach the end says how to ask for the next one.
"""

from __future__ import annotations

from typing import Any, cast

from .capabilities import AsyncReadBackend, has
from .errors import ArsError, ConfigError, FileBackendError, PathBoundaryError
from .files import FileBackend
from .paths import check_path

__all__ = [
    "DEFAULT_READ_LIMIT",
    "LINE_CHARS",
    "MAX_LIMIT",
    "READ_TOOL_DESCRIPTION",
    "READ_TOOL_NAME",
    "aread_page",
    "page_of",
    "read_error_text",
    "read_page",
]

#: the read-back tool's name in both adapters
READ_TOOL_NAME = "read_ars_file"
#: lines a page holds unless the caller asks for fewer or more
DEFAULT_READ_LIMIT = 200
#: the most lines one page may hold
MAX_LIMIT = 2000
#: a longer line is shown in pieces of this many characters, each counted as a line
LINE_CHARS = 2000

READ_TOOL_DESCRIPTION = (
    "Read a file that context compression saved: the full output of a tool result "
    "that was shortened to a preview, or the archived text of summarized messages. "
    "Pass the path exactly as the preview or summary names it (for example "
    "outputs/large_tool_results/<name>.txt). Returns numbered lines; offset is the "
    f"number of lines to skip (0 to start), limit how many to return (default "
    f"{DEFAULT_READ_LIMIT}, at most {MAX_LIMIT}). Lines longer than {LINE_CHARS:,} "
    "characters come in pieces, each counted as a line."
)


def _lines(text: str) -> list[str]:
    """The file's lines as its writer made them: ended by ``\n`` (a ``\r`` before it
    dropped), not at U+2028, U+0085 and the other breaks ``str.splitlines`` knows, which
    an archive's JSON lines and a tool's output hold as text."""
    pieces: list[str] = []
    rows = text.split("\n")
    if rows and not rows[-1]:  # the newline ending the last line starts no line
        rows.pop()
    for row in rows:
        line = row[:-1] if row.endswith("\r") else row
        if len(line) <= LINE_CHARS:
            pieces.append(line)
            continue
        pieces.extend(line[i : i + LINE_CHARS] for i in range(0, len(line), LINE_CHARS))
    return pieces


def _checked(path: Any, offset: Any, limit: Any) -> tuple[str, int, int]:
    if not isinstance(path, str):
        raise ConfigError("path", path, "expected the file's path as text")
    norm = check_path(path.strip().lstrip("/"))
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ConfigError("offset", offset, "expected a whole number of lines to skip, 0 or more")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ConfigError("limit", limit, f"expected a whole number of lines from 1 to {MAX_LIMIT}")
    return norm, offset, limit


def page_of(text: str, path: str, offset: int = 0, limit: int = DEFAULT_READ_LIMIT) -> str:
    """Lines ``offset+1`` .. ``offset+limit`` of ``text`` (the file at ``path``),
    numbered, with a last line saying how to read on when the page stops short."""
    lines = _lines(text)
    total = len(lines)
    if total == 0:
        return f"[{path} is empty]"
    if offset >= total:
        return f"[{path} has {total:,} lines; offset {offset:,} is past its end]"
    end = min(total, offset + limit)
    body = "\n".join(f"{n:>6}\t{lines[n - 1]}" for n in range(offset + 1, end + 1))
    if end < total:
        body += f"\n[lines {offset + 1:,}-{end:,} of {total:,}; read on with offset={end}]"
    return body


def read_page(
    backend: FileBackend, path: Any, offset: Any = 0, limit: Any = DEFAULT_READ_LIMIT
) -> str:
    """One page of the file at the virtual ``path`` of ``backend`` (see :func:`page_of`).

    A leading ``/`` is ignored (the agent may write ``/outputs/...``). Raises
    :class:`~ars_core.PathBoundaryError` for a path outside the backend,
    :class:`~ars_core.FileBackendError` when there is no such file, and
    :class:`~ars_core.ConfigError` for an offset or limit out of range."""
    norm, start, count = _checked(path, offset, limit)
    return page_of(backend.read_text(norm), norm, start, count)


async def aread_page(
    backend: FileBackend, path: Any, offset: Any = 0, limit: Any = DEFAULT_READ_LIMIT
) -> str:
    """:func:`read_page` without blocking the event loop: the backend's
    ``aread_text`` when it has one, else its ``read_text`` in a worker thread."""
    norm, start, count = _checked(path, offset, limit)
    if has(backend, AsyncReadBackend):
        text = await cast(AsyncReadBackend, backend).aread_text(norm)
    else:
        import anyio.to_thread

        text = await anyio.to_thread.run_sync(backend.read_text, norm)
    if not isinstance(text, str):  # pragma: no cover - a backend breaking its protocol
        raise FileBackendError(norm, f"the backend returned {type(text).__name__}, not text")
    return page_of(text, norm, start, count)


def read_error_text(exc: ArsError) -> str:
    """What a read-back tool answers for a failed read, in words for the model."""
    if isinstance(exc, FileBackendError) and exc.reason == "no such file":
        return (
            f"There is no saved file at {exc.path}: pass the path exactly as the "
            "preview or summary names it."
        )
    if isinstance(exc, PathBoundaryError):
        return f"{exc.path} is not a path of this conversation's saved files ({exc.reason})."
    return str(exc)
