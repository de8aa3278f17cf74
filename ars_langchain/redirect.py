"""``ArsFileRedirectMiddleware``: the agent's own file tools find the calling
thread's ARS files on a backend shared by threads.

On a deepagents backend every thread shares (a ``FilesystemBackend``, a store),
ARS keeps each thread's files under ``/threads/<scope>/outputs/...``
(:mod:`ars_langchain.backends`), while its previews quote the virtual path
``outputs/...``. This middleware rewrites the path argument of deepagents'
``read_file``, ``ls``, ``glob`` and ``grep`` calls that name one of ARS's
output folders (:data:`ars_core.adapter.OUTPUT_FOLDERS`) to the calling
thread's copy; any other call goes through unchanged. On a shared backend it
also puts a :class:`~ars_langchain.isolation.ThreadIsolatedBackend` in front
of the backend of deepagents' file tools, and names the calling thread for it
during each tool call: no file tool reaches another thread's folder.

:class:`~ars_langchain.ArsSummarizationMiddleware` runs one for you over its
own backend (setup stays one middleware); add one yourself to an agent that
reads ARS's files without summarizing (a sub-agent without ARS), over the
same backend.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import Token
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, AgentState, ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from .backends import READ_TOOL_ARGS, BackendResolver, BackendSource, isolate_threads, tool_owner
from .isolation import CURRENT_SCOPE
from .sessions import file_scope, scope_parts

__all__ = ["ArsFileRedirectMiddleware"]


class ArsFileRedirectMiddleware(AgentMiddleware[AgentState[Any], Any]):
    """Points the agent's own ``read_file``/``ls``/``glob``/``grep`` at this thread's
    copy of ARS's output folders (see the module doc).

    ``backend`` is where ARS's files are: a :class:`BackendResolver` (the
    summarization middleware shares its own), or what
    :class:`BackendResolver` takes (``None``: the agent's own backend)."""

    def __init__(
        self,
        backend: BackendResolver | BackendSource | None = None,
        *,
        name: str = "ArsFileRedirectMiddleware",
    ) -> None:
        super().__init__()
        self.resolver = (
            backend if isinstance(backend, BackendResolver) else BackendResolver(backend)
        )
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def redirect(self, request: ToolCallRequest, scope: str | None = None) -> ToolCallRequest:
        """``request`` with its path pointed at the thread's copy when it names one
        of ARS's folders on a shared backend; otherwise ``request`` itself."""
        call = request.tool_call
        arg = READ_TOOL_ARGS.get(call.get("name", ""))
        args = call.get("args") or {}
        if arg is None or not isinstance(args.get(arg), str):
            return request
        path: str = args[arg]
        runtime = request.runtime
        scope = scope if scope is not None else self.scope(request)
        target = self.resolver.agent_path(runtime, scope, request.tool, path)
        if target is None:
            return request
        return request.override(tool_call={**call, "args": {**args, arg: target}})

    @staticmethod
    def scope(request: ToolCallRequest) -> str:
        """The file scope of the thread making ``request``."""
        thread, _ = scope_parts()
        return file_scope(getattr(request.runtime, "context", None), thread)

    def _enter(self, request: ToolCallRequest) -> tuple[ToolCallRequest, Token[str | None]]:
        """The redirected request, with the calling thread's scope set for the
        deepagents backend of the tool, isolated when threads share it."""
        owner = tool_owner(request.tool)
        if owner is not None:
            isolate_threads(owner)
        scope = self.scope(request)
        return self.redirect(request, scope), CURRENT_SCOPE.set(scope)

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        redirected, token = self._enter(request)
        try:
            return handler(redirected)
        finally:
            CURRENT_SCOPE.reset(token)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        redirected, token = self._enter(request)
        try:
            return await handler(redirected)
        finally:
            CURRENT_SCOPE.reset(token)
