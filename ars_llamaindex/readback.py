"""The ``read_ars_file`` tool for LlamaIndex agents: :meth:`ArsMemory.read_tool`.

An offloaded tool result's preview and a summary name the file that holds the
full text; this ``FunctionTool`` reads it back from the memory's own file
backend (scoped to its ``chat_store_key``, so one conversation never reads
another's), a page of lines at a time (:func:`ars_core.adapter.read_page`).
A path outside the conversation's files, a missing file or an offset past the
end comes back to the model as the tool's error text.
"""

from __future__ import annotations

from llama_index.core.tools import FunctionTool

from ars_core import ArsError, FileBackend
from ars_core.adapter import (
    DEFAULT_READ_LIMIT,
    READ_TOOL_DESCRIPTION,
    READ_TOOL_NAME,
    aread_page,
    read_error_text,
    read_page,
)

__all__ = ["READ_TOOL_NAME", "make_read_tool"]


def make_read_tool(files: FileBackend) -> FunctionTool:
    """A ``read_ars_file(path, offset, limit)`` tool over ``files`` (sync and async)."""

    def read_ars_file(path: str, offset: int = 0, limit: int = DEFAULT_READ_LIMIT) -> str:
        try:
            return read_page(files, path, offset, limit)
        except ArsError as exc:
            return f"Error: {read_error_text(exc)}"

    async def aread_ars_file(path: str, offset: int = 0, limit: int = DEFAULT_READ_LIMIT) -> str:
        try:
            return await aread_page(files, path, offset, limit)
        except ArsError as exc:
            return f"Error: {read_error_text(exc)}"

    return FunctionTool.from_defaults(
        fn=read_ars_file,
        async_fn=aread_ars_file,
        name=READ_TOOL_NAME,
        description=READ_TOOL_DESCRIPTION,
    )
