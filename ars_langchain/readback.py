"""The ``read_ars_file`` tool: the agent reads back what ARS saved.

An offloaded tool result's preview says "Read that file for the full output";
a summary names the archive of the messages it covers. An agent built with
deepagents reads them with its own ``read_file`` (ARS writes where that
reads). Any other agent gets this tool from the middleware
(``ArsSummarizationMiddleware(read_tool=False)`` leaves it out): it reads the
calling thread's files only (the same scope the middleware wrote them in:
the thread id, or the context's ``ars_file_scope``), from the same backend
(the context's ``file_backend``, the middleware's ``backend``, the graph's
store, else the local default folder), a page of lines at a time
(:func:`ars_core.adapter.read_page`). When the agent's own ``read_file``
reads ARS's files, the middleware hides this tool from the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from ars_core import ArsError
from ars_core.adapter import (
    DEFAULT_READ_LIMIT,
    READ_TOOL_DESCRIPTION,
    READ_TOOL_NAME,
    aread_page,
    read_error_text,
    read_page,
)

if TYPE_CHECKING:
    from .middleware import ArsSummarizationMiddleware

__all__ = ["READ_TOOL_NAME", "make_read_tool"]


def make_read_tool(middleware: ArsSummarizationMiddleware) -> BaseTool:
    """The ``read_ars_file`` tool of ``middleware`` (sync and async)."""

    def read_ars_file(
        path: str, runtime: ToolRuntime, offset: int = 0, limit: int = DEFAULT_READ_LIMIT
    ) -> str:
        try:
            return read_page(middleware.tool_backend(runtime), path, offset, limit)
        except ArsError as exc:
            raise ToolException(read_error_text(exc)) from exc

    async def aread_ars_file(
        path: str, runtime: ToolRuntime, offset: int = 0, limit: int = DEFAULT_READ_LIMIT
    ) -> str:
        try:
            return await aread_page(middleware.tool_backend(runtime), path, offset, limit)
        except ArsError as exc:
            raise ToolException(read_error_text(exc)) from exc

    tool: Any = StructuredTool.from_function(
        func=read_ars_file,
        coroutine=aread_ars_file,
        name=READ_TOOL_NAME,
        description=READ_TOOL_DESCRIPTION,
        handle_tool_error=True,
    )
    return tool  # type: ignore[no-any-return]
